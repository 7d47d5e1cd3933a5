"""Reading per-call COLL lines of every width with one template per kind of line.

The word skeleton of templates.py fixes each line's length, so COLL lines, whose values change width
on every call (`opCount 9` / `opCount 1a`, `count 4096` / `count 25165824`, rank tags `[1,7]` /
`[1,1022]`, host names), make a new skeleton for nearly every combination: thousands per log, each
learnt, each a small group. Lines of one *coarse key* (shapes.coarse_key: every run of letters and
digits -> one '0'; a word skeleton has the same key as its line) have the same punctuation between
the same number of words, so their words pair up by position, whatever their widths. A coarse
template says, word by word, which lines of its key it reads: the exemplar's keywords must be equal,
numbers must be numbers, the host name may be anything; and which words hold the values the COLL
summary needs (host, pid, comm pointer, opCount). coll_scan.py turns the templates into one regular
expression that reads a block's lines of this kind in one pass. The rare line kept as evidence gets
its own field positions only when it is read (`record_for`).

A word skeleton with many lines in one block (nccl_log.PROMOTE_MIN) is still learnt and read the
fixed-width way; the coarse templates read the long tail of widths that would each be learnt for a
few lines.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ncclscope.parse.shapes import VALUE_RE
from ncclscope.parse.templates import WORD_SKELETON

Span = tuple[int, int]
COARSE_FAMILIES = frozenset({"coll_call"})  # the per-call lines that make gigabyte logs
MOVED_MEMO = 4096  # field layouts kept per template (one per word skeleton of its evidence lines)

FIXED, DECIMAL, HEX, HEX_0X, FREE = range(5)  # a word must equal the exemplar's, be a number, or be anything


class CoarseTemplate:
    """Which words of an exemplar line must stay, which are numbers, and where its needed fields lie."""

    def __init__(
        self,
        record: Any,  # nccl_log.RecordShape of the exemplar
        exemplar: bytes,
        classes: list[int],
        fields: dict[str, tuple[int, int]],
        move: Callable[[bytes], Any],
    ) -> None:
        self.record = record
        self.exemplar = exemplar
        self.classes = classes  # per word of the exemplar: FIXED, DECIMAL ...
        self.fields = fields  # name -> (first word, last word)
        self.move = move  # a line of this template -> its own RecordShape (nccl_log)
        self._moved: dict[bytes, Any] = {}

    def record_for(self, raw: bytes) -> Any:
        """The RecordShape of one line this template matched: its fields where that line has them."""
        key = raw.translate(WORD_SKELETON)
        record = self._moved.get(key)
        if record is None:
            record = self.move(raw)
            if len(self._moved) < MOVED_MEMO:
                self._moved[key] = record
        return record

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_moved"] = {}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)


def word_classes(exemplar: bytes, kind: np.ndarray) -> list[int] | None:
    """Per word of the exemplar, its class from the per-column `kind` of templates.value_columns
    (0 keyword, 1 decimal, 2 hex, 3 host name); None when a word mixes classes."""
    classes = []
    for m in VALUE_RE.finditer(exemplar):
        a, b = m.span()
        if exemplar.startswith(b"0x", a) and b - a > 2 and not kind[a] and not kind[a + 1]:
            inner = set(kind[a + 2 : b].tolist())
            if inner == {2}:
                classes.append(HEX_0X)
                continue
        seen = set(kind[a:b].tolist())
        if len(seen) != 1:
            return None
        classes.append({0: FIXED, 1: DECIMAL, 2: HEX, 3: FREE}[seen.pop()])
    return classes


def span_words(exemplar: bytes, span: Span) -> tuple[int, int] | None:
    """The first and last word a field span covers exactly; None when it starts or ends inside a word."""
    words = [m.span() for m in VALUE_RE.finditer(exemplar)]
    first = next((i for i, (a, _) in enumerate(words) if a == span[0]), None)
    last = next((i for i, (_, b) in enumerate(words) if b == span[1]), None)
    if first is None or last is None or last < first:
        return None
    return first, last
