"""Reusing one Lark parse for lines whose numbers differ in length or whose hex values differ.

The exact skeleton (digits -> '0') groups lines of equal length. Lines such as
"Channel 03/0 : 7[7] -> 8[0]" and "Channel 03/0 : 71[7] -> 120[0]", or two comm pointers, have
different skeletons but the same *coarse* shape: every run of digits and every hex word
(0x..., busId 1b000) replaced by a placeholder. For such a line the template of an earlier line
is moved onto it: a regular expression built from that line's segments finds where each number
now starts and ends, and every field span is shifted accordingly. Numbers and hex words that are
not inside a field (the 2 of "P2P") must be equal, or the line is parsed by Lark after all.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Any

# a pointer, or a hex word holding both a digit and a letter a-f (busId 1b000, commId ...)
HEX_WORD = rb"0x[0-9a-fA-F]+|(?<![\w])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]+(?![\w])"
VALUE_RE = re.compile(rb"(" + HEX_WORD + rb")|\d+")

Span = tuple[int, int]


def coarse_key(line: bytes) -> bytes:
    return VALUE_RE.sub(lambda m: b"#" if m.group(1) else b"0", line)


@dataclass
class _Segment:
    start: int
    end: int
    group: int | None  # index of the value group, None for literal text


class ShapeMover:
    """Moves the field spans of one exemplar line onto other lines of the same coarse shape."""

    def __init__(self, exemplar: bytes, field_spans: list[Span]) -> None:
        self.exemplar = exemplar
        self.field_spans = field_spans
        self._ready = False  # most shapes are never reused: build the expression on first use

    def _prepare(self) -> None:
        exemplar, field_spans = self.exemplar, self.field_spans
        self._ready = True
        self.segments: list[_Segment] = []
        pattern: list[bytes] = []
        values: list[bytes] = []
        pos = 0
        for match in VALUE_RE.finditer(exemplar):
            if match.start() > pos:
                self.segments.append(_Segment(pos, match.start(), None))
                pattern.append(re.escape(exemplar[pos : match.start()]))
            self.segments.append(_Segment(match.start(), match.end(), len(values)))
            pattern.append(b"(" + HEX_WORD + b")" if match.group(1) else rb"(\d+)")
            values.append(match.group())
            pos = match.end()
        if pos < len(exemplar):
            self.segments.append(_Segment(pos, len(exemplar), None))
            pattern.append(re.escape(exemplar[pos:]))
        self.regex = re.compile(b"".join(pattern), re.DOTALL)
        self.values = values
        self.starts = [s.start for s in self.segments]
        # values outside every field must stay equal (keyword digits, prose numbers)
        self.fixed = [
            s.group
            for s in self.segments
            if s.group is not None and not any(a <= s.start and s.end <= b for a, b in field_spans)
        ]

    def mapper(self, line: bytes) -> Any:
        """A function old position -> new position for `line`, or None when the shapes differ."""
        if not self._ready:
            self._prepare()
        match = self.regex.fullmatch(line)
        if match is None:
            return None
        for group in self.fixed:
            if match.group(group + 1) != self.values[group]:
                return None
        new_starts: list[int] = []
        cursor = 0
        for segment in self.segments:
            if segment.group is None:
                new_starts.append(cursor)
                cursor += segment.end - segment.start
            else:
                new_starts.append(match.start(segment.group + 1))
                cursor = match.end(segment.group + 1)
        segments, starts = self.segments, self.starts

        def move(pos: int) -> int:
            if pos >= len(self.exemplar):
                return len(line) + pos - len(self.exemplar)
            i = bisect.bisect_right(starts, pos) - 1
            segment = segments[i]
            if segment.group is None:
                return new_starts[i] + pos - segment.start
            if pos == segment.start:
                return new_starts[i]
            raise InsideValue

        def move_span(a: int, b: int) -> Span:
            start = move(a)
            if b <= a:
                return (start, start)
            i = bisect.bisect_right(starts, b - 1) - 1
            segment = segments[i]
            if segment.group is None:
                return (start, new_starts[i] + b - segment.start)
            if b == segment.end:
                return (start, match.end(segment.group + 1))
            raise InsideValue

        return move_span


class InsideValue(Exception):
    """A field boundary falls inside a number: the template cannot be moved."""
