"""Parsing one input: every line goes to the NCCL log parser; what is not NCCL's goes, in order,
to the topology matrix, nccl-tests and framework (PyTorch ...) readers, so a mixed paste is split
into its stretches. Command lines that set NCCL variables are read whichever reader takes them.

`parse_input` is a plain function of one input so that several inputs can be parsed in
parallel processes; its result is picklable.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ncclscope.common.words import plural
from ncclscope.inputs import interrupts
from ncclscope.inputs.opening import InputFile, ReadStats, iter_blocks, open_binary, read_head
from ncclscope.model import (
    BenchmarkRun,
    DiagReport,
    EnvSetting,
    Evidence,
    FlightRecorderDump,
    FrameworkEvent,
    FrTraceReport,
    IbDevice,
    InspectorReport,
    KernelEvent,
    NcclGraphDump,
    NcclTopologyDump,
    NvlinkGpu,
    P2pMatrix,
    PciDevice,
    ProcessExit,
    RasReport,
    RoceGid,
    SmiGpu,
    Source,
    SourceKind,
    TopologyMatrix,
    UnrecognizedLine,
)
from ncclscope.parse import flight_recorder, inspector, nccl_xml, ras, rewrap, sniff
from ncclscope.parse.framework_log import quote_last_errors
from ncclscope.parse.junk import JunkSkipper
from ncclscope.parse.log_records import UNRECOGNIZED_KEEP, Event, LogResult
from ncclscope.parse.nccl_log import NcclLogParser
from ncclscope.parse.nccl_tests import parse_nccl_tests_json
from ncclscope.parse.other_lines import OtherLines
from ncclscope.parse.rccl_tests_json import parse_rccl_tests_json
from ncclscope.parse.split import LogJoin, RangePart

JSON_MAX_BYTES = 256 * 1024 * 1024


@dataclass
class ParsedInput:
    """Everything read from one input, before the inputs are assembled into a Case."""

    source: Source
    log: LogResult = field(default_factory=LogResult)
    topologies: list[TopologyMatrix] = field(default_factory=list)
    benchmarks: list[BenchmarkRun] = field(default_factory=list)
    framework: list[FrameworkEvent] = field(default_factory=list)
    settings: list[EnvSetting] = field(default_factory=list)  # set by command lines in the input
    not_kept: dict[str, int] = field(default_factory=dict)  # facts read beyond the per-input limits, by kind
    flight_records: list[FlightRecorderDump] = field(default_factory=list)
    ras_reports: list[RasReport] = field(default_factory=list)
    fr_trace_reports: list[FrTraceReport] = field(default_factory=list)
    kernel_events: list[KernelEvent] = field(default_factory=list)
    process_exits: list[ProcessExit] = field(default_factory=list)
    pci_devices: list[PciDevice] = field(default_factory=list)
    acs_lines: list[Evidence] = field(default_factory=list)
    topology_dumps: list[NcclTopologyDump] = field(default_factory=list)
    graph_dumps: list[NcclGraphDump] = field(default_factory=list)
    ib_devices: list[IbDevice] = field(default_factory=list)
    smi_gpus: list[SmiGpu] = field(default_factory=list)
    nvlink_gpus: list[NvlinkGpu] = field(default_factory=list)
    p2p_matrices: list[P2pMatrix] = field(default_factory=list)
    inspector: list[InspectorReport] = field(default_factory=list)
    diag_reports: list[DiagReport] = field(default_factory=list)
    roce_gids: list[RoceGid] = field(default_factory=list)


# Records that NCCL prints in runs (one per channel, device, node, HCA ...): a paste that stops on one
# of them stopped in the middle of the run, so what would have followed is missing, not absent.
LISTINGS = {
    "connection": "connection lines",
    "collnet_connection": "connection lines",
    "ring_order": "ring orders",
    "trees": "tree lines",
    "graph_ring": "graph rings",
    "graph_tree": "graph trees",
    "graph_channel": "graph channels",
    "nvls_trees": "NVLS trees",
    "system_header": "the topology dump",
    "topo_node": "the topology dump",
    "topo_link": "the topology dump",
    "topo_paths": "the topology dump",
    "tuning_header_old": "the tuning table",
    "tuning_algorithm": "the tuning table",
    "tuning_protocol": "the tuning table",
    "tuning_nthreads": "the tuning table",
    "tuning_row": "the tuning table",
    "gdr": "GPUDirect RDMA lines",
    "ib_device_detail": "NET/IB device lines",
    "error_trace": "an error chain",
    "rccl_coll_trace": "kernel trace lines",
}


def parse_input(
    item: InputFile,
    progress: Callable[[int], None] | None = None,
    records: Callable[[list[Event]], None] | None = None,
) -> ParsedInput:
    """Parse one input completely. Never raises for bad content; problems go to Source.problems.
    `progress` is called with the size of each block of text read (the TUI's progress bar). `records`,
    where given, takes the NCCL records of each block as it is read (the reader in this process walks them
    then: a large log's records are not all held until its end); the result holds those not given."""
    source = Source(path=item.display)
    head = read_head(item)
    form = sniff.flight_recorder_dump(head)
    if form is not None:
        return _parse_flight_record(item, source, form)
    if b"\x00" not in head:  # text documents; with NUL bytes the line reader refuses the input as binary
        parsed = _parse_text_document(item, source, head)
        if parsed is not None:
            return parsed
    stats = ReadStats()
    others = OtherLines(item.display)
    log = NcclLogParser(others)
    junk = JunkSkipper()
    for block, first_line in iter_blocks(item, stats, progress):
        if junk.skip(block, log.result.nccl_lines > 0 or others.found_anything()):
            continue
        if first_line == 1 and (rejoined := rewrap.rejoin(block)) is not None:
            block = rejoined.data
            source.rewrapped = (
                f"hard-wrapped at {rejoined.width} columns: {rejoined.pieces} piece{'s' if rejoined.pieces > 1 else ''}"
                " joined to the lines they continue"
            )
        log.feed_block(block, first_line)
        result = log.result
        if records is not None and result.events:
            events, result.events = result.events, []
            quote_last_errors(others.framework.events, events)
            records(events)
    parsed = _finish(source, stats, log.result, others)
    parsed.source.skipped_lines = junk.skipped_lines
    return parsed


def _parse_text_document(item: InputFile, source: Source, head: bytes) -> ParsedInput | None:
    """A whole-document text input (ncclras JSON, Inspector output, NCCL's XML, nccl-tests JSON), or None for a line
    input."""
    if sniff.ras_json(head):
        return _parse_ras_json(item, source)
    if sniff.inspector_json(head):
        return _parse_inspector(item, source, "json")
    if sniff.inspector_prometheus(head):
        return _parse_inspector(item, source, "prometheus")
    xml_form = sniff.nccl_xml(head)
    if xml_form is not None:
        return _parse_nccl_xml(item, source, xml_form)
    if item.path.endswith(".json") and not item.is_stream:
        return _parse_json(item, source, head)
    return None


class JoinedRanges:
    """The parsed ranges of one file joined in order as they come (see split.py). A range's records
    are handed back as it is joined, for the assembly to walk them while later ranges are still
    parsed; its other lines go to the other readers at once. A range with more other lines than it
    could keep (`too_much_other`) means the file is to be read whole instead (parse_input)."""

    def __init__(self, item: InputFile) -> None:
        self.item = item
        self._log = LogJoin()
        self._others = OtherLines(item.display)
        self.unsure = False  # the other lines kept by a range may not hold all a reader needed: read it whole

    def add(self, part: RangePart) -> list[Event]:
        """Joins `part`; returns its records, line numbers the file's (none after the reading ended)."""
        offset = self._log.add(part)
        events = part.log.events if offset is not None else []
        part.log.events = []
        if offset is not None:
            others = self._others
            for line_no, text, want in part.other:  # the test made where the worker knew it, else here if needed
                others.take(line_no + offset, text, want)
                if line_no == part.lead_end and others.busy:
                    self.unsure = True  # something begun before the range goes on past the lines it kept
            quote_last_errors(self._others.framework.events, events)
        part.other.clear()
        return events

    def stopped_by(self, signum: int | None) -> None:
        """Reading stopped (Ctrl-C, SIGTERM) after the ranges joined so far."""
        self._log.stats.stopped_by = signum

    def finish(self) -> ParsedInput:
        log, stats = self._log.result()
        parsed = _finish(Source(path=self.item.display), stats, log, self._others)
        parsed.source.skipped_lines = self._log.skipped_lines
        return parsed


def _finish(source: Source, stats: ReadStats, log: LogResult, others: OtherLines) -> ParsedInput:
    parsed = ParsedInput(source, log)
    parsed.topologies = others.topology.finish() + others.rocm_topology.finish()
    parsed.benchmarks = others.tests.finish()
    others.tests_runs = parsed.benchmarks
    others.framework.finish()
    parsed.framework = others.framework.events
    parsed.ras_reports = [r for r in others.ras.reports if r.communicators or r.nccl_version or r.groups or r.job]
    parsed.fr_trace_reports = others.fr_trace.finish()
    parsed.kernel_events = others.kernel.finish()
    parsed.process_exits = others.torchrun.finish()
    parsed.pci_devices, parsed.acs_lines = others.lspci.finish()
    parsed.ib_devices = others.ibstat.devices + others.ibv_devinfo.devices
    parsed.smi_gpus = others.smi_query.gpus
    parsed.nvlink_gpus = others.smi_nvlink.gpus
    parsed.p2p_matrices = others.p2p.matrices
    parsed.diag_reports = others.diag.reports
    parsed.roce_gids = others.show_gids.gids
    parsed.not_kept = dict(others.framework.not_kept)
    parsed.settings = [
        EnvSetting(name=name, value=value, origin="command_line", evidence=evidence)
        for name, value, evidence in others.framework.settings
    ] + [
        EnvSetting(name=p.name, value=p.value or "", origin="param_dump", evidence=p.evidence)
        for p in others.param_dump.params
        if p.set_by != "Default"  # what the environment, a config file or an env plugin set
    ]
    _fill_source(source, stats, parsed, others)
    return parsed


def _fill_source(source: Source, stats: ReadStats, parsed: ParsedInput, others: OtherLines) -> None:
    res = parsed.log
    source.lines = stats.lines
    source.bytes = stats.bytes
    source.nccl_lines = res.nccl_lines
    source.recognized = res.recognized
    source.unrecognized_count = res.unrecognized_count
    source.cut_records = res.cut_records
    earliest = sorted(res.unrecognized, key=lambda u: u.line)[:UNRECOGNIZED_KEEP]
    source.unrecognized = [UnrecognizedLine(line=u.line, text=u.text, reason=u.reason) for u in earliest]
    source.families = dict(sorted(res.families.items()))
    source.topology_lines = others.topology_lines
    source.nccl_tests_lines = others.tests_lines
    source.framework_lines = others.framework.lines + others.fr_trace.lines + others.torchrun.lines
    source.kernel_lines = others.kernel.lines
    source.framework_unrecognized = len(others.framework.not_understood)
    room = max(0, 50 - len(source.unrecognized))
    source.unrecognized.extend(
        UnrecognizedLine(line=n, text=t[:300], reason="a framework line about NCCL that was not understood")
        for n, t in others.framework.not_understood[:room]
    )
    source.invalid_utf8_lines = others.invalid_utf8
    if stats.stopped_by is not None:  # not `truncated`: a hung job's log really ends where it stopped
        source.stopped = interrupts.signal_name(stats.stopped_by)
    source.problems.extend(stats.problems)
    source.problems.extend(others.smi_nvlink.problems)
    _truncation(source, res, others, stats)
    for line_no, size in stats.overlong_lines:
        source.problems.append(
            f"line {line_no} is {size} bytes long; only its first 64 KiB were read, and it was not parsed"
        )
    found: list[tuple[SourceKind, object]] = [
        ("nccl_log", res.nccl_lines),
        ("topology", parsed.topologies),
        ("nccl_tests", parsed.benchmarks),
        ("framework_log", parsed.framework or parsed.fr_trace_reports or parsed.process_exits),
        ("ras_status", parsed.ras_reports),
        ("kernel_log", others.kernel.lines),
        ("lspci", parsed.pci_devices or parsed.acs_lines),
        ("param_dump", others.param_dump.lines),
        ("nccl_diag", others.diag.reports),
        ("show_gids", others.show_gids.lines),
        ("ibstat", others.ibstat.devices),
        ("ibv_devinfo", others.ibv_devinfo.devices),
        ("nvidia_smi_query", others.smi_query.gpus),
        ("nvidia_smi_nvlink", others.smi_nvlink.gpus),
        ("p2p_matrix", others.p2p.matrices),
    ]
    source.kinds.extend(kind for kind, what in found if what)
    if stats.binary or stats.damaged or (stats.problems and not stats.lines):
        source.usable = False
    elif stats.bytes == 0:
        source.usable = False
        source.problems.append(f"nothing arrived before {source.stopped}" if source.stopped else "empty input")


def _truncation(source: Source, res: LogResult, others: OtherLines, stats: ReadStats) -> None:
    """Say when the input visibly stops early (so that a rank 'stuck' in init may just be cut off)."""
    if res.last is not None:
        line_no, kind = res.last
        if kind is None or (kind == "?" and stats.unterminated):
            source.truncated.append(f"it ends in a cut NCCL record (line {line_no})")
        elif kind in LISTINGS:
            source.truncated.append(f"it stops inside {LISTINGS[kind]} (line {line_no})")
        source.ends_cut = bool(source.truncated)
    if res.first_damaged is not None and not source.ends_cut:
        source.truncated.append(f"a record of it is cut or damaged (line {res.first_damaged})")
    if res.last is not None and res.last[1] == "":  # the input ends in a line that is no NCCL record
        for run in others.tests_runs:
            rows = run.rows
            # only where the header says how far the table goes: rows pasted alone may be a chosen excerpt
            if rows and rows[-1].line == res.last[0] and run.avg_busbw is None and not run.failures:
                if run.max_bytes is not None and rows[-1].size < run.max_bytes:
                    source.truncated.append(f"it stops inside an nccl-tests table (line {rows[-1].line})")
                    source.ends_cut = True
    if others.framework.cut_at_end is not None:
        source.truncated.append(f"it ends in a cut framework record (line {others.framework.cut_at_end})")
        source.ends_cut = True
    if inside := [n for n in others.framework.cut if n != others.framework.cut_at_end]:
        more = f" and {len(inside) - 1} more" if len(inside) > 1 else ""
        source.truncated.append(
            f"a framework record of it is cut short (line {inside[0]}{more}); the fields it holds whole are read"
        )
    if others.elisions:
        line_no, mark = others.elisions[0]
        more = f" and {len(others.elisions) - 1} more" if len(others.elisions) > 1 else ""
        source.truncated.append(f"lines were left out where it says `{mark}` (line {line_no}{more})")


def _read_whole(item: InputFile, source: Source, limit: int) -> bytes | None:
    """A document read whole (JSON, a pickle), or None with the reason in `source`."""
    try:
        with open_binary(item) as handle:
            data = handle.read(limit + 1)
    except (OSError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
        source.problems.append(f"cannot read: {getattr(exc, 'strerror', None) or exc}")
        source.usable = False
        return None
    if len(data) > limit:
        source.problems.append(f"larger than {limit // 2**20} MiB: not read")
        source.usable = False
        return None
    source.bytes = len(data)
    return data


def _unusable(source: Source, problem: str) -> ParsedInput:
    """An input read whole that cannot be used: the reason, and nothing from it."""
    source.problems.append(problem)
    source.usable = False
    return ParsedInput(source)


def _parse_flight_record(item: InputFile, source: Source, form: str) -> ParsedInput:
    """A PyTorch Flight Recorder dump (parse/flight_recorder.py); a refused or damaged one is unusable."""
    data = _read_whole(item, source, flight_recorder.MAX_BYTES)
    if data is None:
        return ParsedInput(source)
    try:
        dump = flight_recorder.read_dump(data, form, item.display)
    except flight_recorder.RefusedPickle as exc:
        return _unusable(source, f"pickle refused: {exc}; nothing in it was run (a dump holds only plain data)")
    except ValueError as exc:
        return _unusable(source, f"{'pickle' if form == 'pickle' else 'JSON'} not read: {exc}")
    source.kinds.append("flight_recorder")
    source.problems.extend(dump.problems)
    return ParsedInput(source, flight_records=[dump])


def _parse_nccl_xml(item: InputFile, source: Source, form: sniff.XmlForm) -> ParsedInput:
    """NCCL's topology or graph XML (parse/nccl_xml.py); a hostile one is refused whole."""
    data = _read_whole(item, source, nccl_xml.MAX_BYTES)
    if data is None:
        return ParsedInput(source)
    source.lines = data.count(b"\n") + (not data.endswith(b"\n") and bool(data))
    try:
        dump, problems = nccl_xml.read_xml(data, item.display)
    except nccl_xml.XmlRefused as exc:
        return _unusable(source, f"XML refused: {exc}")
    except ValueError as exc:
        return _unusable(source, f"{form} XML not read: {exc}")
    source.problems.extend(problems)
    if isinstance(dump, NcclTopologyDump):
        source.kinds.append("topology_xml")
        return ParsedInput(source, topology_dumps=[dump])
    if isinstance(dump, NcclGraphDump):
        source.kinds.append("graph_xml")
        return ParsedInput(source, graph_dumps=[dump])
    return ParsedInput(source)


def _parse_ras_json(item: InputFile, source: Source) -> ParsedInput:
    """`ncclras -f json` output (parse/ras.py)."""
    data = _read_whole(item, source, JSON_MAX_BYTES)
    if data is None:
        return ParsedInput(source)
    source.lines = data.count(b"\n") + 1
    try:
        report = ras.read_json(data, item.display)
    except ValueError as exc:
        return _unusable(source, f"RAS JSON not read: {exc}")
    source.kinds.append("ras_status")
    return ParsedInput(source, ras_reports=[report])


def _parse_inspector(item: InputFile, source: Source, form: str) -> ParsedInput:
    """NCCL Inspector's JSON records or Prometheus text (parse/inspector.py), read line by line: a long job's
    records run to gigabytes, and only their summary is kept."""
    stats = ReadStats()

    def lines() -> Iterator[tuple[int, str]]:
        for block, first in iter_blocks(item, stats):
            for offset, raw in enumerate(block.split(b"\n")):
                yield first + offset, raw.decode("utf-8", "replace")

    read = inspector.read_json_lines if form == "json" else inspector.read_prometheus
    report = read(lines(), item.display)
    source.lines, source.bytes = stats.lines, stats.bytes
    source.problems.extend(stats.problems)
    for line_no, size in stats.overlong_lines:
        source.problems.append(f"line {line_no} is {size} bytes long: not read")
    if report.not_understood:
        first = report.not_understood_first
        where = f" (the first at line {first.line})" if first else ""
        source.problems.append(
            f"{plural(report.not_understood, 'line')} not understood as Inspector {form} records{where}"
        )
    if not report.records:
        return _unusable(source, f"no NCCL Inspector {form} record could be read")
    source.kinds.append("inspector")
    return ParsedInput(source, inspector=[report])


def _parse_json(item: InputFile, source: Source, head_bytes: bytes) -> ParsedInput | None:
    """nccl-tests -J output or rccl-tests' results file; None when the file is neither (then it is read as text)."""
    head = head_bytes.decode("utf-8", "replace")
    if not sniff.nccl_tests_json(head):
        return _parse_rccl_tests_json(item, source) if sniff.rccl_tests_json(head) else None
    text = _json_text(item, source)
    if text is None:
        return ParsedInput(source)
    run = parse_nccl_tests_json(text, item.display)
    if run is None:
        try:
            json.loads(text)
            problem = "JSON is not nccl-tests -J output"
        except ValueError as exc:
            problem = f"invalid JSON: {exc}"
        return _unusable(source, problem)
    source.kinds.append("nccl_tests_json")
    return ParsedInput(source, benchmarks=[run])


def _json_text(item: InputFile, source: Source) -> str | None:
    """A JSON document's text, read whole (its lines and bytes counted), or None with the reason in `source`."""
    data = _read_whole(item, source, JSON_MAX_BYTES)
    if data is None:
        return None
    text = data.decode("utf-8", "replace")
    source.lines = text.count("\n") + 1
    source.bytes = len(data)
    return text


def _parse_rccl_tests_json(item: InputFile, source: Source) -> ParsedInput:
    text = _json_text(item, source)
    if text is None:
        return ParsedInput(source)
    read = parse_rccl_tests_json(text, item.display)
    if read is None:
        return _unusable(source, "JSON holds no rccl-tests measurement (busBw, algBw, inPlace)")
    runs, others = read
    if others:
        source.problems.append(f"{plural(others, 'object')} not understood as rccl-tests measurements")
    source.kinds.append("nccl_tests_json")
    return ParsedInput(source, benchmarks=runs)
