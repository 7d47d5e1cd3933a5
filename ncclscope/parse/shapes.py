"""Reusing one Lark parse for lines whose values differ in length.

Skeletons (exact and word, see nccl_log.py and templates.py) group lines of equal length. Lines such
as "Channel 03/0 : 7[7] -> 8[0]" and "Channel 03/0 : 71[7] -> 120[0]", two comm pointers of different
widths, or host names `gpu-a7` and `node-b12`, have different skeletons but the same *coarse* shape:
every run of letters and digits replaced by a placeholder. Equal coarse shapes have the same spaces
and punctuation between their words, so the words of two such lines pair up one to one; every field
span of the earlier line is moved to where the corresponding words now start and end. Words that are
not inside a field (NCCL, INFO, AllReduce, the 2 of "P2P") must be equal, or the line is parsed by
Lark after all. A minus sign that starts a number is part of its word, so that a Trees line where a
rank has no parent (`174/-1/-1->173->-1`) shares the parse of one where it has (`174/175/-1->173->172`):
32 channels of those make lines of a thousand characters, each a long grammar parse.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

VALUE_RE = re.compile(rb"[A-Za-z0-9]+")
# the words a shape is moved by: VALUE_RE's, and a sign before digits that follows no letter or digit
# (the minus of "/-1", not the dash of "NET/0-1" or the arrow of "->172")
SIGNED_VALUE_RE = re.compile(rb"(?:(?<![A-Za-z0-9])-(?=[0-9]))?[A-Za-z0-9]+")
NUMBER_RE = re.compile(rb"-?(?:0x)?[0-9a-fA-F]+")

Span = tuple[int, int]
SpanPlan = tuple[int, int, int, int]  # (start anchor, offset, end anchor, offset): see ShapeMover.span_plan


def coarse_key(line: bytes) -> bytes:
    return VALUE_RE.sub(b"0", line)


def shape_key(line: bytes) -> bytes:
    """The key of the lines a ShapeMover may serve (coarse_key, signed numbers as one word)."""
    return SIGNED_VALUE_RE.sub(b"0", line)


class InsideValue(Exception):
    """A field boundary falls inside a number: the template cannot be moved."""


class ShapeMover:
    """Moves the field spans of one exemplar line onto other lines of the same coarse shape."""

    def __init__(self, exemplar: bytes, kind: Sequence[int] | np.ndarray) -> None:
        self.exemplar = exemplar
        self.kind = kind  # per column: 0 a word that must stay, 1-2 a number, 3 the host name
        self._values: list[Span] | None = None  # most shapes are never reused: computed on first use
        self.plan: Any = None  # the moves of its shape's spans, made on first use (nccl_log.py)

    def _prepare(self) -> list[Span]:
        values = [m.span() for m in SIGNED_VALUE_RE.finditer(self.exemplar)]
        exemplar, kind = self.exemplar, self.kind
        # a word's class is its lowest column's; the sign of a number and the "0x" of a pointer stay
        # out of it
        classes = [min(kind[_digits_start(exemplar, a, b) : b]) for a, b in values]
        self._fixed = [i for i, c in enumerate(classes) if c == 0]
        self._numbers = [i for i, c in enumerate(classes) if c in (1, 2)]
        self._value_starts = [a for a, _ in values]
        self._values = values
        return values

    def anchors(self, line: bytes) -> list[int] | None:
        """Where `line`'s words start and end, as positions `span_plan` counts from (0 first, then every
        word's start, then every word's end), or None when `line` is not of the exemplar's shape."""
        values = self._values if self._values is not None else self._prepare()
        new = [m.span() for m in SIGNED_VALUE_RE.finditer(line)]
        if len(new) != len(values):
            return None
        exemplar = self.exemplar
        for i in self._fixed:
            a, b = values[i]
            c, d = new[i]
            if exemplar[a:b] != line[c:d]:
                return None
        for i in self._numbers:  # a number may become any number, never a word ("count 12" vs "count all")
            if not NUMBER_RE.fullmatch(line, *new[i]):
                return None
        return [0, *[c for c, _ in new], *[d for _, d in new]]

    def _anchor_of(self, pos: int) -> tuple[int, int]:
        """(anchor, offset): the exemplar's character at `pos` (or its end, pos == len) lands at
        anchors[anchor] + offset of another line; InsideValue when `pos` falls inside a word."""
        values = self._values if self._values is not None else self._prepare()
        i = bisect.bisect_right(self._value_starts, pos) - 1
        if i < 0:
            return 0, pos  # before the first word: the text is the same
        a, b = values[i]
        if pos == a:
            return 1 + i, 0
        if pos >= b:
            return 1 + len(values) + i, pos - b  # in the literal text after word i
        raise InsideValue

    def span_plan(self, a: int, b: int) -> SpanPlan:
        """How the exemplar's span (a, b) moves onto a line: its ends as (anchor, offset) pairs (see
        `anchors`). It depends on the exemplar alone: InsideValue when an end falls inside a word."""
        values = self._values if self._values is not None else self._prepare()
        start = self._anchor_of(a)
        if b <= a:
            return (*start, *start)
        i = bisect.bisect_right(self._value_starts, b - 1) - 1
        if i >= 0 and values[i][0] <= b - 1 < values[i][1]:
            if b == values[i][1]:
                return (*start, 1 + len(values) + i, 0)
            raise InsideValue
        end, offset = self._anchor_of(b - 1)
        return (*start, end, offset + 1)

    def __getstate__(self) -> dict[str, object]:
        # what is worked out on use (the words, a shape's plan: closures) is worked out again
        return {"exemplar": self.exemplar, "kind": self.kind, "_values": None, "plan": None}


def _digits_start(text: bytes, a: int, b: int) -> int:
    """Where the digits of the word text[a:b] start: after a sign, after the 0x of a pointer."""
    if text.startswith(b"-", a) and b - a > 1:
        a += 1
    return a + 2 if text.startswith(b"0x", a) and b - a > 2 else a
