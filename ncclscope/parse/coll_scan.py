"""Reading COLL lines of every width in one regular-expression pass.

Per-call COLL lines are most of the bytes of a production log. Those whose widths recur are read by
fixed-width templates (templates.py); the long tail of widths (launcher tags `[1,7]`/`[1,1022]`, host
names, opCounts and counts of every length) by the coarse templates (coarse.py). A coarse template
says exactly which lines it reads: the exemplar's punctuation between as many words, its keywords
where it has keywords, digits (or hex digits) where it has numbers, any word in the host name. That is
a regular expression, which Python's `re` runs over many lines at once in C, capturing the values the
COLL summary needs (host, pid, opCount, comm). The templates of one coarse key that differ only in one
keyword (the collective: AllReduce, Broadcast ...) share one expression, which captures that keyword
to tell them apart.

The expression is derived from templates the grammar made, never written by hand: the grammar stays
the authority on what a COLL line is, and a line no template reads (a new collective, a damaged line)
goes the usual way, where it may teach a new template.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ncclscope.parse.coarse import DECIMAL, FIXED, FREE, HEX, HEX_0X, CoarseTemplate
from ncclscope.parse.shapes import VALUE_RE, coarse_key
from ncclscope.parse.templates import HEX_DIGITS

ALTERNATIVES_MAX = 16  # expressions tried on each line before it is taken for another kind of line
_WORD = {DECIMAL: rb"[0-9]+", HEX: rb"[0-9a-fA-F]+", HEX_0X: rb"0x[0-9a-fA-F]+", FREE: rb"[A-Za-z0-9]+"}
FIELDS = ("host", "pid", "op_count", "comm")


@dataclass(slots=True)
class Alternative:
    """One expression of the pass: where its values are in a row, and which template reads its lines."""

    groups: dict[str, int]  # field -> index in a row (absent: the lines do not print it)
    templates: dict[bytes, CoarseTemplate]  # the keyword that tells its templates apart -> template
    variant: int | None  # index of that keyword in a row; None when one template has it alone


class CollScan:
    """The expression of a set of coarse templates; `rows` runs it over a block."""

    def __init__(self, templates: Iterable[CoarseTemplate]) -> None:
        kinds: dict[tuple[bytes, tuple[int, ...]], list[CoarseTemplate]] = {}
        for template in templates:
            kinds.setdefault((coarse_key(template.exemplar), tuple(template.classes)), []).append(template)
        bodies: list[bytes] = []
        self.alternatives: list[Alternative] = []
        group = 1  # row[0] is the whole COLL line, whichever expression read it
        for members in kinds.values():
            for part, texts, variant in _shared(members):
                if len(self.alternatives) == ALTERNATIVES_MAX:
                    break
                body, alternative, group = _alternative(part, texts, variant, group)
                bodies.append(body)
                self.alternatives.append(alternative)
        # `^.*$`: a line no expression reads still gives its row (of empty values), so rows and lines pair up
        self.regex = re.compile(rb"^(" + b"|".join(bodies) + rb")$|^.*$", re.MULTILINE)

    def rows(self, data: bytes) -> list[tuple[bytes, ...]]:
        """One tuple per line of `data` (lines joined by b'\\n'): row[0] is the line when an expression
        read it, b'' when none did."""
        return self.regex.findall(data)


def _words(exemplar: bytes) -> list[tuple[int, int]]:
    return [m.span() for m in VALUE_RE.finditer(exemplar)]


Words = list[bytes]  # the words of an exemplar (VALUE_RE), in order


def _shared(members: list[CoarseTemplate]) -> list[tuple[list[CoarseTemplate], list[Words], int | None]]:
    """Templates of one coarse key and word classes, in the groups one expression may read, each with
    its templates' words and the word where their keywords differ (None: one template): all of them
    when their keywords differ in one word at most, else each alone (an expression that let each word
    vary would read combinations that no template reads)."""
    texts = [[t.exemplar[a:b] for a, b in _words(t.exemplar)] for t in members]
    classes = members[0].classes
    differ = [i for i, c in enumerate(classes) if c == FIXED and len({words[i] for words in texts}) > 1]
    if len(differ) <= 1:
        return [(members, texts, differ[0] if differ else None)]
    return [([t], [words], None) for t, words in zip(members, texts, strict=True)]


def _alternative(
    part: list[CoarseTemplate], texts: list[Words], variant: int | None, group: int
) -> tuple[bytes, Alternative, int]:
    """The expression of templates whose keywords differ in word `variant` only, its groups numbered
    from `group`."""
    first = part[0]
    exemplar, classes = first.exemplar, first.classes
    words = _words(exemplar)
    opens: dict[int, list[str]] = {}
    closes: dict[int, int] = {}
    for name in FIELDS:
        where = first.fields.get(name)
        if where is not None:
            opens.setdefault(where[0], []).append(name)
            closes[where[1]] = closes.get(where[1], 0) + 1
    groups: dict[str, int] = {}
    pieces: list[bytes] = []
    variant_group = None
    end = 0
    for i, (a, b) in enumerate(words):
        pieces.append(re.escape(exemplar[end:a]))
        for name in opens.get(i, ()):
            pieces.append(b"(")
            groups[name] = group
            group += 1
        if i == variant:
            pieces.append(b"(" + b"|".join(re.escape(w) for w in sorted({w[i] for w in texts})) + b")")
            variant_group = group
            group += 1
        elif classes[i] == FIXED:
            pieces.append(re.escape(exemplar[a:b]))
        else:
            pieces.append(_WORD[classes[i]])
        pieces.append(b")" * closes.get(i, 0))
        end = b
    pieces.append(re.escape(exemplar[end:]))
    templates: dict[bytes, CoarseTemplate] = {}
    for template, words_of in zip(part, texts, strict=True):
        templates.setdefault(words_of[variant] if variant is not None else b"", template)
    return b"".join(pieces), Alternative(groups, templates, variant_group), group


def hex_values(texts: np.ndarray) -> np.ndarray:
    """Hex numbers (`1a`, `0x1a`) given as a numpy bytes array, as int64: digit by digit over the
    columns, the padding and the `x` of `0x` skipped (the expression let only hex digits through)."""
    width = texts.dtype.itemsize
    if width > 17:  # more than 15 digits: Python's ints, the few that do not fit in int64 held at its top
        return np.array([min(int(t, 16), (1 << 63) - 1) for t in texts.tolist()], dtype=np.int64)
    digits = HEX_DIGITS[np.ascontiguousarray(texts).view(np.uint8).reshape(len(texts), width)]
    value = np.zeros(len(texts), dtype=np.int64)
    for column in digits.T:
        value = np.where(column >= 0, value * 16 + column, value)
    return value
