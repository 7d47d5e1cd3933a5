"""Reusing one Lark parse for lines whose numbers differ in length or whose hex values differ.

The exact skeleton (digits -> '0') groups lines of equal length. Lines such as
"Channel 03/0 : 7[7] -> 8[0]" and "Channel 03/0 : 71[7] -> 120[0]", or two comm pointers, have
different skeletons but the same *coarse* shape: every run of digits and every hex word
(0x..., busId 1b000) replaced by a placeholder. Equal coarse shapes have the same text between
their values, so the values of two such lines pair up one to one; every field span of the earlier
line is moved to where the corresponding values now start and end. Values that are not inside a
field (the 2 of "P2P") must be equal, or the line is parsed by Lark after all.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable

# a pointer, or a hex word holding both a digit and a letter a-f (busId 1b000, commId ...)
HEX_WORD = rb"0x[0-9a-fA-F]+|(?<![\w])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]+(?![\w])"
VALUE_RE = re.compile(rb"(" + HEX_WORD + rb")|\d+")

Span = tuple[int, int]
SpanMover = Callable[[int, int], Span]


def coarse_key(line: bytes) -> bytes:
    return VALUE_RE.sub(lambda m: b"#" if m.group(1) else b"0", line)


class InsideValue(Exception):
    """A field boundary falls inside a number: the template cannot be moved."""


class ShapeMover:
    """Moves the field spans of one exemplar line onto other lines of the same coarse shape."""

    def __init__(self, exemplar: bytes, field_spans: list[Span]) -> None:
        self.exemplar = exemplar
        self.field_spans = field_spans
        self._values: list[Span] | None = None  # most shapes are never reused: computed on first use

    def _prepare(self) -> list[Span]:
        values = [m.span() for m in VALUE_RE.finditer(self.exemplar)]
        spans = self.field_spans
        self._fixed = [i for i, (a, b) in enumerate(values) if not any(fa <= a and b <= fb for fa, fb in spans)]
        self._value_starts = [a for a, _ in values]
        self._values = values
        return values

    def mapper(self, line: bytes) -> SpanMover | None:
        """A function moving an exemplar span onto `line`, or None when the shapes differ."""
        values = self._values if self._values is not None else self._prepare()
        new = [m.span() for m in VALUE_RE.finditer(line)]
        if len(new) != len(values):
            return None
        exemplar = self.exemplar
        for i in self._fixed:
            a, b = values[i]
            c, d = new[i]
            if exemplar[a:b] != line[c:d]:
                return None
        starts = self._value_starts

        def move(pos: int) -> int:
            """Where the character at `pos` of the exemplar (or the end, pos == len) lands."""
            i = bisect.bisect_right(starts, pos) - 1
            if i < 0:
                return pos  # before the first value: the text is the same
            a, b = values[i]
            if pos == a:
                return new[i][0]
            if pos >= b:
                return new[i][1] + pos - b  # in the literal text after value i
            raise InsideValue

        def move_span(a: int, b: int) -> Span:
            start = move(a)
            if b <= a:
                return (start, start)
            i = bisect.bisect_right(starts, b - 1) - 1
            if i >= 0 and values[i][0] <= b - 1 < values[i][1]:
                if b == values[i][1]:
                    return (start, new[i][1])
                raise InsideValue
            return (start, move(b - 1) + 1)

        return move_span
