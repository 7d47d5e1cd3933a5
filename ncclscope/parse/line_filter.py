"""Which lines of a block may matter to a reader: those holding one of a set of words, and those whose start
an expression may match, found in one pass over the whole block.

With RE2 (the google-re2 package, a dependency) the pass is one automaton run over the block's bytes, at a
cost that grows with the bytes alone, not with the number of words or alternatives: the words, and the start
expression widened to RE2's syntax (re2_pattern.py) at each line's start. Where a line's start matches, Python's
own expression decides (on the few lines found) and the line's words are looked for again one by one (the
start's match may have hidden some). Without RE2 the words are found by word_scan.py and each line's start is
matched in Python: the same answer, slower.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from itertools import accumulate
from typing import Any

from ncclscope.parse import re2_pattern
from ncclscope.parse.re2_pattern import Untranslatable, escape, re2_compile, to_re2
from ncclscope.parse.word_scan import WordScan, hidden_tags


class LineFilter:
    def __init__(self, words: Mapping[bytes, int], start: re.Pattern[bytes]) -> None:
        """`words`: each word and its tags (bits), as WordScan takes them; `start`: matched at a line's start."""
        self._start = start.match
        self._word_scan = WordScan(words)
        self._hidden: dict[bytes, int] = {}  # each word's tags with those of the words its match can hide
        self._re2_pass: Any = None
        if re2_pattern.ENABLED:
            self._compile_re2(words, start)

    @property
    def engine(self) -> str:
        return "re2" if self._re2_pass is not None else "python"

    def _compile_re2(self, words: Mapping[bytes, int], start: re.Pattern[bytes]) -> None:
        try:
            start_source = to_re2(start).encode("latin-1")
        except Untranslatable:
            return
        self._hidden = hidden_tags(words)
        chosen = sorted(words, key=len, reverse=True)
        # at a line's start the start expression is tried first: its match there is never hidden by a word's
        source = b"(?m)^(?:" + start_source + b")|" + b"|".join(escape(w) for w in chosen)
        self._re2_pass = re2_compile(source)
        self._spans = spans_of(self._re2_pass)

    def scan(self, lines: list[bytes], skip_start: int = 0) -> tuple[dict[int, int], dict[int, re.Match[bytes]]]:
        """Of `lines`: index -> the tags of the words it holds (for those that hold any), and index -> the
        start expression's match (for those it matches). A line whose tags hold any bit of `skip_start`
        may be left out of the second (its start does not matter to the caller)."""
        if not lines:
            return {}, {}
        data = b"\n".join(lines)
        starts = [0, *accumulate(len(line) + 1 for line in lines)][:-1]
        if self._re2_pass is None:
            return self._scan_python(lines, data, starts, skip_start)
        found: dict[int, int] = {}
        at_start: list[int] = []  # lines with a match at their start: the start expression's, or a word's
        hidden = self._hidden
        for where, end in self._spans(data):
            k = bisect_right(starts, where) - 1
            if where == starts[k]:
                if not at_start or at_start[-1] != k:
                    at_start.append(k)
            else:
                found[k] = found.get(k, 0) | hidden[data[where:end]]
        match = self._start
        tags_of = self._word_scan.tags
        opened: dict[int, re.Match[bytes]] = {}
        for k in at_start:
            line = lines[k]
            tags = found.get(k, 0) | tags_of(line)
            if tags:
                found[k] = tags
            if tags & skip_start:
                continue
            m = match(line)
            if m is not None:
                opened[k] = m
        return found, opened

    def _scan_python(
        self, lines: list[bytes], data: bytes, starts: list[int], skip_start: int
    ) -> tuple[dict[int, int], dict[int, re.Match[bytes]]]:
        found = self._word_scan.scan(data, starts)
        match = self._start
        opened: dict[int, re.Match[bytes]] = {}
        for k, line in enumerate(lines):
            if found.get(k, 0) & skip_start:
                continue
            m = match(line)
            if m is not None:
                opened[k] = m
        return found, opened


class LinesOfInterest:
    """The lines of a whole block that hold one of a set of words or whose start an expression may match, found
    in one RE2 pass over the block's bytes that stops once per such line (each match runs on to the line's end),
    so that the lines between cost no Python code at all. Used where most lines are other programs' text
    (nccl_log.py, the sparse way); None of it without RE2 (`usable`)."""

    def __init__(self, words: list[bytes], start: re.Pattern[bytes]) -> None:
        self._spans: Callable[[bytes], Iterator[tuple[int, int]]] | None = None
        if not re2_pattern.ENABLED:
            return
        try:
            start_source = to_re2(start).encode("latin-1")
        except Untranslatable:
            return
        chosen = sorted(words, key=len, reverse=True)
        source = b"(?m)(?:^(?:" + start_source + b")|" + b"|".join(escape(w) for w in chosen) + b")[^\n]*"
        compiled = re2_compile(source)
        if compiled is None:
            return
        self._spans = spans_of(compiled)

    @property
    def usable(self) -> bool:
        return self._spans is not None

    def find(self, data: bytes) -> tuple[list[int], list[int], list[int], int]:
        """(index, first byte, end) of each line of interest in `data` (lines joined by b'\\n'), in order, and the
        number of lines in `data`."""
        indices: list[int] = []
        starts: list[int] = []
        ends: list[int] = []
        count, rfind = data.count, data.rfind
        k = at = line_start = 0  # the line at byte `at`, where it starts
        assert self._spans is not None, "usable only"
        for where, end in self._spans(data):
            newlines = count(b"\n", at, where)
            if newlines:
                k += newlines
                line_start = rfind(b"\n", at, where) + 1
            indices.append(k)
            starts.append(line_start)
            ends.append(end)
            at = end  # a match ends where its line does
        return indices, starts, ends, k + count(b"\n", at) + 1


def spans_of(compiled: Any) -> Callable[[bytes], Iterator[tuple[int, int]]]:
    """The (start, end) of every match of a compiled RE2 expression in a block, in order. google-re2's
    finditer builds a match object per match in Python; the compiled expression's own Match call gives the
    spans alone, a third cheaper per match (used where that private API is there, else finditer)."""
    regexp = getattr(compiled, "_regexp", None)
    anchor = getattr(getattr(re2_pattern.re2, "_Anchor", None), "UNANCHORED", None)
    if regexp is None or anchor is None or not hasattr(regexp, "Match"):
        return lambda data: (m.span() for m in compiled.finditer(data))
    match = partial(regexp.Match, anchor)

    def spans(data: bytes) -> Iterator[tuple[int, int]]:
        size = len(data)
        at = 0
        while at <= size:
            ((where, end),) = match(data, at, size)
            if where < 0:
                return
            yield where, end
            at = end + 1 if end == where else end  # an empty match: step over it, as finditer does

    return spans
