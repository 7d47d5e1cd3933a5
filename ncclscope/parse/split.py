"""One large file read by several processes: byte ranges of whole lines, parsed apart, merged in order.

Each range is parsed by its own NcclLogParser with line numbers counted from 1; the lines that are
not NCCL records are kept, not read, because the topology, nccl-tests and framework readers follow
tables and records across lines (a table may cross a range's end). The merge shifts every line
number by the lines of the ranges before, so events, evidence and counts are those of one reader,
and then feeds the kept lines to the other readers in order. It takes the ranges one by one as they
arrive (LogJoin), so that the reader can walk the records of the first ranges while workers still
parse the last.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, BinaryIO

from ncclscope.inputs.opening import MAX_LINE_BYTES, InputFile, ReadStats, iter_blocks, read_head
from ncclscope.parse import line_hints, sniff
from ncclscope.parse.junk import JunkSkipper
from ncclscope.parse.line_hints import stored_hints
from ncclscope.parse.log_records import UNRECOGNIZED_KEEP, LogResult
from ncclscope.parse.nccl_log import NcclLogParser, ShapeBook

if TYPE_CHECKING:
    from ncclscope.parse.line_hints import OtherHints
    from ncclscope.parse.other_lines import OtherLines

SPLIT_MIN_BYTES = 48 * 1024 * 1024  # smaller files are read by one process: start-up costs more than it saves
# Several ranges per worker: the start of a log (init, new line shapes to learn) costs more per byte
# than its end, so equal halves leave one worker idle; the pool hands out ranges as workers free up.
RANGES_PER_WORKER = 4
RANGE_MIN_BYTES = 16 * 1024 * 1024
FIRST_RANGE_SHARE = 0.25  # of the first range, read as a range of its own (first_range_cut)
LAST_RANGE_PIECES = 3  # the last range, read as so many (last_range_cut; 2 measured no better than 1)
RANGE_MAX_BYTES = 32 * 1024 * 1024  # a range's records wait whole for the reader: a 1 GB file is 32 ranges
OTHER_LINES_KEEP = 2_000_000  # lines a range holds for the other readers; a file of mostly other text is read whole
# a range's first other lines, all kept for the other readers: a matrix, table or report begun in the range
# before goes on in them; where one still goes on after them, the file is read whole (case/read.py)
LEAD_LINES_KEPT = 1_000


@dataclass
class RangePart:
    """What one byte range gave: the log records and the lines left for the other readers."""

    log: LogResult
    stats: ReadStats
    other: list[tuple[int, str, bool | None]] = field(default_factory=list)  # line, text, the cheap test's answer
    too_much_other: bool = False
    lead_end: int | None = None  # the last of the range's first other lines, all kept (RangeKeeper); None: all were
    skipped_lines: int = 0  # lines of blocks that hold nothing any reader takes (parse/junk.py)


def can_split(item: InputFile) -> bool:
    """A plain file (not stdin or a pipe, not compressed) large enough to be worth splitting."""
    if item.is_stream or item.path.endswith(".gz") or item.span is not None:
        return False
    try:
        if os.path.getsize(item.path) < SPLIT_MIN_BYTES:
            return False
    except OSError:
        return False
    return not is_document(read_head(item))


def is_document(head: bytes) -> bool:
    """A JSON document or a pickle that parse_input reads whole (a Flight Recorder dump, `ncclras -f json`,
    nccl-tests -J, rccl-tests' results file), or NCCL Inspector's output that it reads by its own reader, by the
    sniffers that parse_input dispatches on; a log whose lines start with `[` or `{` is not one."""
    text = head.decode("utf-8", "replace")
    return (
        sniff.flight_recorder_dump(head) is not None
        or sniff.ras_json(head)
        or sniff.inspector_json(head)
        or sniff.inspector_prometheus(head)
        or sniff.nccl_xml(head) is not None
        or sniff.nccl_tests_json(text)
        or sniff.rccl_tests_json(text)
    )


def byte_ranges(path: str, parts: int, min_bytes: int = 1, workers: int = 1) -> list[tuple[int, int]]:
    """`parts` ranges of about equal size (fewer where they would be under `min_bytes`, and a multiple of
    `workers` where there are more ranges than workers), each starting at a line's first byte."""
    size = os.path.getsize(path)
    parts = max(1, min(parts, size // max(1, min_bytes)))
    if parts > workers:
        parts -= parts % workers  # 5 ranges on 2 workers: one worker reads the last alone while the other idles
    with open(path, "rb") as handle:
        return _cut(handle, 0, size, parts)


def _cut(handle: BinaryIO, start: int, end: int, parts: int) -> list[tuple[int, int]]:
    """Bytes `start` to `end` of a file as `parts` ranges of about equal size, each starting at a line's first
    byte (fewer where a line is longer than a range: the range before takes it)."""
    starts = [start]
    for k in range(1, parts):
        at = _next_line_start(handle, max(start + k * (end - start) // parts, starts[-1]))
        if at is not None and starts[-1] < at < end:  # None: one very long line, the range before takes it
            starts.append(at)
    return list(zip(starts, [*starts[1:], end], strict=True))


def _next_line_start(handle: BinaryIO, at: int) -> int | None:
    """The first line start after byte `at` (None when no line ends within MAX_LINE_BYTES of it)."""
    handle.seek(at)
    newline = handle.read(MAX_LINE_BYTES + 1).find(b"\n")
    return None if newline < 0 else at + newline + 1


def first_range_cut(path: str, spans: list[tuple[int, int]], share: float) -> list[tuple[int, int]]:
    """`spans` with the first cut at the line start nearest `share` of its length. The reader walks a range's
    records only once it is parsed whole, and a job's first bytes hold its init records, the most to walk:
    a short first range lets the walk begin while the workers still parse the rest."""
    if len(spans) < 2:
        return spans
    first_end = spans[0][1]
    with open(path, "rb") as handle:
        cut = _next_line_start(handle, int(first_end * share))
    if cut is None or not 0 < cut < first_end:
        return spans
    return [(0, cut), (cut, first_end), *spans[1:]]


def last_range_cut(path: str, spans: list[tuple[int, int]], pieces: int) -> list[tuple[int, int]]:
    """`spans` with the last cut in `pieces` at line starts. Ranges are handed out as workers free up, and
    with the short first range their count is odd: one worker reads the last alone while the other idles
    (0.1 to 0.2 s of a 100 MB log). Short last pieces let the workers end close together."""
    if len(spans) < 3:
        return spans
    with open(path, "rb") as handle:
        return [*spans[:-1], *_cut(handle, *spans[-1], pieces)]


_BOOK: tuple[str, ShapeBook] | None = None  # the shapes learnt from this process's last file


def _shape_book(path: str) -> ShapeBook:
    """The shapes this process learnt from earlier ranges of the same file (a worker reads several)."""
    global _BOOK
    if _BOOK is None or _BOOK[0] != path:
        _BOOK = (path, ShapeBook())
    return _BOOK[1]


class RangeKeeper:
    """Keeps a range's other lines for the readers that read them after the join. A line no reader wants
    while none waits on the next line need not be kept (other_lines.py); whether one waits is known here
    from readers of this range's own kept lines, and is not known for the range's first lines (a table
    may go on from the range before), which are all kept."""

    def __init__(self, part: RangePart, display: str, first_line_at: int) -> None:
        self._part = part
        self._display = display
        self._made: OtherLines | None = None
        self._lead = LEAD_LINES_KEPT if first_line_at > 0 else 0  # the file's first range follows nothing

    @property
    def _readers(self) -> OtherLines:
        """Only their state is used (the readers after the join read). Made on first use: the workers fork
        before the readers and the models load, and a range of NCCL's lines alone never needs them."""
        if self._made is None:
            from ncclscope.parse.other_lines import OtherLines

            self._made = OtherLines(self._display)
        return self._made

    @property
    def hints(self) -> OtherHints:
        return stored_hints()  # (the readers' own, tests/test_cheap_test.py)

    @property
    def busy(self) -> bool:
        return self._lead > 0 or (self._made is not None and self._made.busy)

    def __call__(self, line_no: int, text: str) -> None:
        self.take(line_no, text, None)

    def take(self, line_no: int, text: str, wanted: bool | None) -> bool | None:
        part = self._part
        if len(part.other) >= OTHER_LINES_KEEP:
            part.too_much_other = True
            return wanted
        if self._lead > 0:
            self._lead -= 1
            if not self._lead:
                part.lead_end = line_no
        if self._made is None and (not text or wanted is False or wanted is None and not self._wanted(text)):
            # readers that have read nothing yet let an empty line or one they do not want pass unread
            wanted = False if text else None  # (an empty line is never tested: OtherLines.take)
            part.other.append((line_no, text, wanted))
            return wanted
        # the cheap test's answer goes with the line: the reader after the join need not make it again
        wanted = self._readers.take(line_no, text, wanted)
        part.other.append((line_no, text, wanted))
        return wanted

    def _wanted(self, text: str) -> bool:
        return not line_hints.CHEAP_TEST or stored_hints().wanted(text.encode())


def parse_range(item: InputFile) -> RangePart:
    """One byte range of a large file (`item.span`): its NCCL records, and its other lines kept in order
    for the readers that follow tables across lines (see above)."""
    stats = ReadStats()
    part = RangePart(LogResult(), stats)
    span_start = item.span[0] if item.span is not None else 0
    log = NcclLogParser(RangeKeeper(part, item.display, span_start), _shape_book(item.path))
    junk = JunkSkipper()
    for block, first_line in iter_blocks(item, stats):
        # a range's other lines are read by the readers later, in order: a block is skipped only while this
        # range has no NCCL line and the block no word any reader takes (a table or matrix goes on in blocks
        # that have their rows' words)
        if junk.skip(block, log.result.nccl_lines > 0):
            continue
        log.feed_block(block, first_line)
    part.log = log.result
    part.skipped_lines = junk.skipped_lines
    return part


class LogJoin:
    """The parts of one file joined in order, as they come: one log result, one set of statistics.
    A part that ends the reading (binary, damaged, stopped) is the last one taken."""

    def __init__(self) -> None:
        self.log = LogResult()
        self.stats = ReadStats()
        self.lines = 0  # lines of the parts taken so far
        self.ended = False
        self.skipped_lines = 0

    def add(self, part: RangePart) -> int | None:
        """Takes `part` (its records, left with it, get the file's line numbers); returns its line offset,
        or None when the reading had ended before it."""
        if self.ended:
            return None
        offset, stats = self.lines, self.stats
        _add_log(self.log, part.log, offset)
        stats.bytes += part.stats.bytes
        stats.problems.extend(part.stats.problems)
        stats.overlong_lines.extend((line + offset, size) for line, size in part.stats.overlong_lines)
        stats.binary = stats.binary or part.stats.binary
        stats.damaged = stats.damaged or part.stats.damaged
        stats.stopped_by = stats.stopped_by or part.stats.stopped_by
        stats.unterminated = part.stats.unterminated  # the last range holds the end of the input
        self.lines += part.stats.lines
        self.skipped_lines += part.skipped_lines
        self.ended = bool(stats.binary or stats.damaged or stats.stopped_by)
        return offset

    def result(self) -> tuple[LogResult, ReadStats]:
        self.stats.lines = self.lines
        self.log.unrecognized = sorted(self.log.unrecognized, key=lambda u: u.line)[:UNRECOGNIZED_KEEP]
        return self.log, self.stats


def _add_log(merged: LogResult, log: LogResult, offset: int) -> None:
    for event in log.events:  # the records stay with the range's result: the reader walks them as they come
        event.line += offset
    merged.nccl_lines += log.nccl_lines
    merged.lead_lines += log.lead_lines
    merged.recognized += log.recognized
    merged.unrecognized_count += log.unrecognized_count
    merged.cut_records += log.cut_records
    merged.records_repeated += log.records_repeated
    for u in log.unrecognized:
        u.line += offset
    merged.unrecognized.extend(log.unrecognized)
    if log.first_damaged is not None and merged.first_damaged is None:  # the parts come in order
        merged.first_damaged = log.first_damaged + offset
    if merged.net_same_device is None and log.net_same_device is not None:
        merged.net_same_device = (log.net_same_device[0] + offset, log.net_same_device[1])
    if log.last is not None:
        merged.last = (log.last[0] + offset, log.last[1])
    for family, n in log.families.items():
        merged.families[family] += n
    for transport, n in log.by_transport.items():
        merged.by_transport[transport] += n
    for transport, (line, text) in log.transport_examples.items():
        if transport not in merged.transport_examples:
            merged.transport_examples[transport] = (line + offset, text)
    for key, (calls, op, event) in log.coll_calls.items():
        event.line += offset
        known = merged.coll_calls.get(key)
        if known is None:
            merged.coll_calls[key] = [calls, op, event]
        else:
            known[0] += calls
            if op >= known[1]:  # a later range's call with the same or a higher count is the later one
                known[1:] = [op, event]
    for key, (count, line, raw) in log.edges.items():
        entry = merged.edges.get(key)
        if entry is None:
            merged.edges[key] = [count, line + offset, raw]
        else:
            entry[0] += count
