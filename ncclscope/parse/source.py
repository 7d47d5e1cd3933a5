"""Parsing one input: every line goes to the NCCL log parser; what is not NCCL's goes, in order,
to the topology matrix and nccl-tests readers, so a mixed paste is split into its stretches.

`parse_input` is a plain function of one input so that several inputs can be parsed in
parallel processes; its result is picklable.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from ncclscope.model import BenchmarkRun, Evidence, NcclMessage, Source, TopologyMatrix, UnrecognizedLine
from ncclscope.normalize import clean, strip_launcher_prefix
from ncclscope.parse.nccl_log import LogResult, NcclLogParser
from ncclscope.parse.nccl_tests import NcclTestsReader, looks_like_nccl_tests_json, parse_nccl_tests_json
from ncclscope.parse.topo_matrix import TopologyReader
from ncclscope.sources import InputFile, ReadStats, iter_blocks, read_head

JSON_MAX_BYTES = 256 * 1024 * 1024


@dataclass
class ParsedInput:
    """Everything read from one input, before the inputs are assembled into a Case."""

    source: Source
    log: LogResult = field(default_factory=LogResult)
    host_names: dict[int, str] = field(default_factory=dict)
    topologies: list[TopologyMatrix] = field(default_factory=list)
    benchmarks: list[BenchmarkRun] = field(default_factory=list)
    framework: list[NcclMessage] = field(default_factory=list)


# Framework lines about NCCL that rules need (RUN006): PyTorch's ProcessGroupNCCL watchdog and errors.
FRAMEWORK_RE = re.compile(
    r"Watchdog caught collective operation timeout|ProcessGroupNCCL[^\n]*(?:[Tt]imeout|[Ee]rror|abort)"
    r"|NCCL error in: |DistBackendError|NCCL communicator was aborted"
)
FRAMEWORK_KEEP = 200


class _OtherLines:
    """Routes lines that are not NCCL records to the matrix and nccl-tests readers."""

    def __init__(self, display: str) -> None:
        self.topology = TopologyReader(display)
        self.tests = NcclTestsReader(display)
        self.topology_lines = 0
        self.tests_lines = 0
        self.invalid_utf8 = 0
        self.display = display
        self.framework: list[NcclMessage] = []

    def __call__(self, line_no: int, text: str) -> None:
        if not text:
            self.topology.feed(line_no, "")
            self.tests.feed(line_no, "")
            return
        if "\ufffd" in text:
            self.invalid_utf8 += 1
        body = clean(text).text
        _, body = strip_launcher_prefix(body)
        if self.topology.feed(line_no, body):
            self.topology_lines += 1
        elif self.tests.feed(line_no, body):
            self.tests_lines += 1
        elif len(self.framework) < FRAMEWORK_KEEP and FRAMEWORK_RE.search(body):
            family = "watchdog_timeout" if "atchdog" in body or "imeout" in body else "framework_error"
            evidence = Evidence(source=self.display, line=line_no, text=body.strip())
            self.framework.append(NcclMessage(level="ERROR", family=family, message=body.strip(), evidence=evidence))


def parse_input(item: InputFile, progress: Callable[[int], None] | None = None) -> ParsedInput:
    """Parse one input completely. Never raises for bad content; problems go to Source.problems.
    `progress` is called with the size of each block of text read (the TUI's progress bar)."""
    source = Source(path=item.display)
    if item.path.endswith(".json") and not item.is_stdin:
        parsed = _parse_json(item, source)
        if parsed is not None:
            return parsed
    stats = ReadStats()
    others = _OtherLines(item.display)
    log = NcclLogParser(others)
    for block, first_line in iter_blocks(item, stats, progress):
        log.feed_block(block, first_line)
    parsed = ParsedInput(source, log.result, log.host_names())
    parsed.topologies = others.topology.finish()
    parsed.benchmarks = others.tests.finish()
    parsed.framework = others.framework
    _fill_source(source, stats, parsed, others)
    return parsed


def _fill_source(source: Source, stats: ReadStats, parsed: ParsedInput, others: _OtherLines) -> None:
    res = parsed.log
    source.lines = stats.lines
    source.bytes = stats.bytes
    source.nccl_lines = res.nccl_lines
    source.recognized = res.recognized
    source.unrecognized_count = res.unrecognized_count
    source.cut_records = res.cut_records
    source.unrecognized = [UnrecognizedLine(line=u.line, text=u.text, reason=u.reason) for u in res.unrecognized]
    source.families = dict(sorted(res.families.items()))
    source.topology_lines = others.topology_lines
    source.nccl_tests_lines = others.tests_lines
    source.invalid_utf8_lines = others.invalid_utf8
    source.problems.extend(stats.problems)
    for line_no, size in stats.overlong_lines:
        source.problems.append(
            f"line {line_no} is {size} bytes long; only its first 64 KiB were read, and it was not parsed"
        )
    if res.nccl_lines:
        source.kinds.append("nccl_log")
    if parsed.topologies:
        source.kinds.append("topology")
    if parsed.benchmarks:
        source.kinds.append("nccl_tests")
    if stats.binary or stats.damaged or (stats.problems and not stats.lines):
        source.usable = False
    elif stats.bytes == 0:
        source.usable = False
        source.problems.append("empty input")


def _parse_json(item: InputFile, source: Source) -> ParsedInput | None:
    """nccl-tests -J output; None when the file is not that (then it is read as text)."""
    head = read_head(item).decode("utf-8", "replace")
    if not looks_like_nccl_tests_json(head):
        return None
    try:
        with open(item.path, "rb") as handle:
            data = handle.read(JSON_MAX_BYTES)
    except OSError as exc:
        source.problems.append(f"cannot read: {exc.strerror or exc}")
        source.usable = False
        return ParsedInput(source)
    text = data.decode("utf-8", "replace")
    source.lines = text.count("\n") + 1
    source.bytes = len(data)
    run = parse_nccl_tests_json(text, item.display)
    if run is None:
        try:
            json.loads(text)
            source.problems.append("JSON is not nccl-tests -J output")
        except ValueError as exc:
            source.problems.append(f"invalid JSON: {exc}")
        source.usable = False
        return ParsedInput(source)
    source.kinds.append("nccl_tests_json")
    return ParsedInput(source, benchmarks=[run])
