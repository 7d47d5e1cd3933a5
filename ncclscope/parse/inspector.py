"""NCCL Inspector output (NCCL plugins/profiler/inspector, 2.28+): the JSON records it writes per process and the
Prometheus text it writes per GPU, summarised into an InspectorReport.

JSON (inspector_json.cc, output format v4.0): one object per completed operation, on one line each (objects spread
over several lines, as the plugin's README shows them, are read too):
`{"header": {"id", "comm_name", "rank", "n_ranks", "nnodes"}, "metadata": {"inspector_output_format_version",
"git_rev", "rec_mechanism", "dump_timestamp_us", "hostname", "pid"}, "coll_perf" | "p2p_perf": {...}}`;
coll_perf holds coll, coll_sn, coll_msg_size_bytes, coll_exec_time_us, coll_timing_source, coll_algobw_gbs,
coll_busbw_gbs and, with NCCL_INSPECTOR_DUMP_VERBOSE=1, event_trace_sn / event_trace_ts (kernel start per channel);
p2p_perf the same with p2p, p2p_sn, p2p_peer. A record is unique by its kind, collective and sequence number (the
number counts per collective kind: an AllReduce and an AllGather can share one).

Prometheus (inspector_prom.cc): samples of grammars/inspector_prom.lark; the plugin rewrites the file at each dump
and removes it at the end of the job, so a copy is all a user has. Bandwidth and time of one operation, size range
and algorithm/protocol are two samples that share their labels.
"""

from __future__ import annotations

import json
import statistics
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from lark import Tree
from lark.exceptions import LarkError

from ncclscope.model.base import Evidence
from ncclscope.model.inspector import InspectorOp, InspectorReport, InspectorSeries
from ncclscope.parse.grammars import load

SERIES_KEEP = 2048  # the last calls of one collective kind kept per rank and communicator (the plugin's ring: 1024)
VALUES_KEEP = 4096  # times and bandwidths kept per operation and size for the median (all are counted)
RECORD_MAX_BYTES = 64 * 1024  # an object spread over lines is given up beyond this
EVIDENCE_CHARS = 2000  # a verbose record with its trace is about 700 characters
UNNAMED = "unknown"  # what the plugin writes for a communicator without a name (and for slurm_job_id outside Slurm)

PROM_METRICS = {
    "nccl_bus_bandwidth_gbs": ("collective", "busbw"),
    "nccl_collective_exec_time_microseconds": ("collective", "time"),
    "nccl_p2p_bus_bandwidth_gbs": ("p2p", "busbw"),
    "nccl_p2p_exec_time_microseconds": ("p2p", "time"),
}


def _evidence(source: str, line: int, text: str) -> Evidence:
    return Evidence(source=source, line=line, text=text.strip()[:EVIDENCE_CHARS])


@dataclass
class _Values:
    """One operation and size on one rank: every record counted, the first VALUES_KEEP kept for the median."""

    evidence: Evidence
    count: int = 0
    times: list[float] = field(default_factory=list)
    busbw: list[float] = field(default_factory=list)
    busbw_max: float = 0.0
    sources: set[str] = field(default_factory=set)

    def add(self, time_us: float, busbw: float, timing: str | None) -> None:
        self.count += 1
        if len(self.times) < VALUES_KEEP:
            self.times.append(time_us)
            self.busbw.append(busbw)
        self.busbw_max = max(self.busbw_max, busbw)
        if timing:
            self.sources.add(timing)


@dataclass
class _Series:
    nranks: int | None
    host: str | None
    pid: int | None
    evidence: Evidence
    calls: deque[tuple[int, float, int | None]] = field(default_factory=lambda: deque(maxlen=SERIES_KEEP))
    seen: int = 0


class _Summary:
    """What the records of one file add up to."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.ops: dict[tuple[Any, ...], tuple[dict[str, Any], _Values]] = {}
        self.series: dict[tuple[str, str, int], _Series] = {}
        self.records = 0
        self.not_understood = 0
        self.first_bad: Evidence | None = None
        self.version: str | None = None

    def bad(self, line: int, text: str) -> None:
        self.not_understood += 1
        if self.first_bad is None:
            self.first_bad = _evidence(self.source, line, text)

    def op(self, ident: dict[str, Any], line: int, text: str) -> _Values:
        key = tuple(ident.values())
        known = self.ops.get(key)
        if known is None:
            known = self.ops[key] = (ident, _Values(_evidence(self.source, line, text)))
        return known[1]

    def report(self, form: str) -> InspectorReport:
        ops = [
            InspectorOp(
                **ident,
                count=v.count,
                exec_time_us=statistics.median(v.times) if v.times else None,
                busbw_gbs=statistics.median(v.busbw),
                busbw_max_gbs=v.busbw_max,
                timing_sources=sorted(v.sources),
                evidence=v.evidence,
            )
            for ident, v in self.ops.values()
            if v.busbw
        ]
        series = []
        capped: dict[str, int] = {}
        for (comm, name, rank), s in self.series.items():
            calls = sorted(s.calls)
            series.append(
                InspectorSeries(
                    comm_id=comm, name=name, rank=rank, nranks=s.nranks, host=s.host, pid=s.pid,
                    sn=[c[0] for c in calls], exec_time_us=[c[1] for c in calls],
                    kernel_start_us=[c[2] for c in calls if c[2] is not None] if all(c[2] is not None for c in calls)
                    else [],
                    evidence=s.evidence,
                )
            )  # fmt: skip
            if s.seen > len(calls):
                capped[name] = capped.get(name, 0) + s.seen - len(calls)
        return InspectorReport(
            source=self.source,
            format="json" if form == "json" else "prometheus",
            format_version=self.version,
            records=self.records,
            not_understood=self.not_understood,
            not_understood_first=self.first_bad,
            ops=ops,
            series=series,
            series_capped=capped,
        )


# ------------------------------------------------------------------------------------------------ JSON
def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _whole(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _kernel_start(perf: dict[str, Any]) -> int | None:
    """The earliest kernel start of a verbose record (event_trace_ts.kernel_events[].kernel_start_ts)."""
    trace = perf.get("event_trace_ts")
    events = trace.get("kernel_events") if isinstance(trace, dict) else None
    starts = [_whole(e.get("kernel_start_ts")) for e in events or [] if isinstance(e, dict)]
    known = [s for s in starts if s is not None]
    return min(known) if known else None


def _take_record(summary: _Summary, obj: Any, line: int, text: str) -> None:
    header = obj.get("header") if isinstance(obj, dict) else None
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    kind = "collective" if isinstance(obj, dict) and "coll_perf" in obj else "p2p"
    perf = obj.get("coll_perf" if kind == "collective" else "p2p_perf") if isinstance(obj, dict) else None
    if not isinstance(header, dict) or not isinstance(meta, dict) or not isinstance(perf, dict):
        summary.bad(line, text)
        return
    prefix = "coll" if kind == "collective" else "p2p"
    name = perf.get(prefix)
    sn = _whole(perf.get(f"{prefix}_sn"))
    time_us = _number(perf.get(f"{prefix}_exec_time_us"))
    busbw = _number(perf.get(f"{prefix}_busbw_gbs"))
    if not isinstance(name, str) or sn is None or time_us is None or busbw is None:
        summary.bad(line, text)
        return
    summary.records += 1
    version = meta.get("inspector_output_format_version")
    if summary.version is None and isinstance(version, str):
        summary.version = version
    comm = header.get("id") if isinstance(header.get("id"), str) else None
    rank = _whole(header.get("rank"))
    host = meta.get("hostname") if isinstance(meta.get("hostname"), str) else None
    pid = _whole(meta.get("pid"))
    nranks = _whole(header.get("n_ranks"))
    comm_name = header.get("comm_name")
    ident = {
        "kind": kind,
        "name": name,
        "comm_id": comm,
        "comm_name": comm_name if isinstance(comm_name, str) and comm_name not in ("", UNNAMED) else None,
        "rank": rank,
        "nranks": nranks,
        "nnodes": _whole(header.get("nnodes")),
        "host": host,
        "pid": pid,
        "size_bytes": _whole(perf.get(f"{prefix}_msg_size_bytes")),
    }
    timing = perf.get(f"{prefix}_timing_source")
    summary.op(ident, line, text).add(time_us, busbw, timing if isinstance(timing, str) else None)
    if kind == "collective" and comm is not None and rank is not None:
        series = summary.series.get((comm, name, rank))
        if series is None:
            series = summary.series[(comm, name, rank)] = _Series(
                nranks, host, pid, _evidence(summary.source, line, text)
            )
        series.calls.append((sn, time_us, _kernel_start(perf)))
        series.seen += 1


def read_json_lines(lines: Iterable[tuple[int, str]], source: str) -> InspectorReport:
    """The records of an Inspector JSON file, given as (line number, text); an object may span several lines."""
    summary = _Summary(source)
    pending: list[str] = []
    pending_line = 0
    pending_bytes = 0
    for line_no, text in lines:
        body = text.strip()
        if not pending:
            if not body:
                continue
            if not body.startswith("{"):
                summary.bad(line_no, text)
                continue
            try:
                _take_record(summary, json.loads(body), line_no, body)
                continue
            except ValueError:
                pending, pending_line, pending_bytes = [body], line_no, len(body)
                continue
        pending.append(body)
        pending_bytes += len(body)
        if body.startswith("}") or body.endswith("}"):
            joined = "".join(pending)
            try:
                obj = json.loads(joined)
            except ValueError:
                if pending_bytes > RECORD_MAX_BYTES:
                    summary.bad(pending_line, pending[0])
                    pending = []
                continue
            _take_record(summary, obj, pending_line, joined)
            pending = []
        elif pending_bytes > RECORD_MAX_BYTES:
            summary.bad(pending_line, pending[0])
            pending = []
    if pending:
        summary.bad(pending_line, pending[0])  # the file ends inside an object (a dump cut short)
    return summary.report("json")


# ------------------------------------------------------------------------------------------ Prometheus
def _labels(tree: Tree) -> dict[str, str]:
    labels = {}
    for label in tree.find_data("label"):
        name, value = label.children
        assert isinstance(name, Tree) and isinstance(value, Tree)
        text = str(value.children[0])[1:-1]
        labels[str(name.children[0])] = text.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
    return labels


def _size_lower(size_range: str) -> int | None:
    """The lower end of a message_size range in bytes: '4-5GB' -> 4 GiB (inspector_prom.cc buckets in 1024s)."""
    units = {"B": 1, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}
    digits = size_range.split("-", 1)[0]
    unit = size_range.lstrip("0123456789-. ")
    if not digits.isdigit() or unit not in units:
        return None
    return int(digits) * units[unit]


def read_prometheus(lines: Iterable[tuple[int, str]], source: str) -> InspectorReport:
    """The samples of an Inspector Prometheus file; other metrics and comments are passed over, lines the grammar
    does not take are counted."""
    parser = load("inspector_prom")
    summary = _Summary(source)
    for line_no, text in lines:
        body = text.strip()
        if not body:
            continue
        try:
            tree = parser.parse(body)
        except LarkError:
            summary.bad(line_no, text)
            continue
        sample = next(tree.find_data("sample"), None)
        if sample is None:
            continue  # a comment
        metric = str(next(sample.find_data("metric")).children[0])
        known = PROM_METRICS.get(metric)
        if known is None:
            continue  # another collector's metric in the same file
        kind, what = known
        labels = _labels(sample)
        value = float(str(next(sample.find_data("value")).children[0]))
        name = labels.get("collective" if kind == "collective" else "p2p_operation")
        if not name:
            summary.bad(line_no, text)
            continue
        summary.records += 1
        summary.version = summary.version or labels.get("version")
        size_range = labels.get("message_size")
        ident = {
            "kind": kind,
            "name": name,
            "comm_id": None,
            "comm_name": labels.get("comm_name") if labels.get("comm_name") not in (None, "", UNNAMED) else None,
            "rank": None,
            "nranks": _int_label(labels.get("nranks")),
            "nnodes": _int_label(labels.get("n_nodes")),
            "host": labels.get("node") or None,
            "pid": None,
            "gpu": labels.get("gpu") or None,
            "size_bytes": _size_lower(size_range) if size_range else None,
            "size_range": size_range,
            "algo_proto": labels.get("algo_proto") or None,
        }
        values = summary.op(ident, line_no, text)
        _pair(values, what, value)
    return summary.report("prometheus")


def _int_label(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None


def _pair(values: _Values, what: str, value: float) -> None:
    """An operation is two Prometheus samples with the same labels (bandwidth, time): each list takes its own."""
    if what == "busbw":
        values.busbw.append(value)
        values.busbw_max = max(values.busbw_max, value)
    else:
        values.times.append(value)
    values.count = max(len(values.busbw), len(values.times))
