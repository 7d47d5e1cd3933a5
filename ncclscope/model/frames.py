"""A Case or an Analysis as pandas DataFrames, for notebooks and for the CLI's own tables.

Each frame's columns, dtypes and meanings are declared once in COLUMNS; the frames are built from it,
the README's table is checked against it, and `ncclscope.model.frames.describe()` prints it. Text columns
use pandas' "string" dtype, optional integers "Int64" and optional flags "boolean" (missing values are
<NA>, never a float NaN standing in for an integer); several hosts or ranks in one cell are joined
with "," in the order the input gives them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:
    from ncclscope.model import Analysis, Case, Connection

# frame -> (column, dtype, meaning)
COLUMNS: dict[str, list[tuple[str, str, str]]] = {
    "benchmarks": [
        ("source", "string", "Input the table was read from."),
        ("line", "int64", "Line of the table's header in that input."),
        ("hosts", "string", "Hosts of the run's device lines (comma-joined), or `<NA>` when none were printed."),
        ("collective", "string", "all_reduce, all_gather ... (`<NA>` when neither printed nor inferred)."),
        ("nranks", "Int64", "Ranks of the run."),
        ("size", "int64", "Message size in bytes."),
        ("count", "int64", "Elements per rank."),
        ("type", "string", "Data type column, e.g. float."),
        ("redop", "string", "Reduction column: sum, none, or empty."),
        ("root", "Int64", "Root column (-1 where the collective has none)."),
        ("oop_time_us", "float64", "Out-of-place time, microseconds."),
        ("oop_algbw", "float64", "Out-of-place algorithm bandwidth, GB/s."),
        ("oop_busbw", "float64", "Out-of-place bus bandwidth, GB/s."),
        ("oop_wrong", "float64", "Out-of-place #wrong (or max error in older nccl-tests)."),
        ("ip_time_us", "float64", "In-place time, microseconds."),
        ("ip_algbw", "float64", "In-place algorithm bandwidth, GB/s."),
        ("ip_busbw", "float64", "In-place bus bandwidth, GB/s."),
        ("ip_wrong", "float64", "In-place #wrong."),
        ("busbw", "float64", "The better of out-of-place and in-place bus bandwidth, GB/s."),
        ("row_line", "int64", "Line of this row."),
    ],
    "connections": [
        ("source", "string", "Input of the first line showing the edge."),
        ("line", "int64", "That line."),
        ("host", "string", "Host of the process that printed it."),
        ("from_rank", "int64", "Sending rank (for NET lines: the local rank)."),
        ("to_rank", "int64", "Receiving rank (-1 for NET lines, whose peer is peer_rank)."),
        ("from_dev", "string", "The sender's bracketed device (nvmlDev or busId)."),
        ("to_dev", "string", "The receiver's bracketed device."),
        ("transport", "string", "P2P/CUMEM, SHM, NET/IB, NET/Socket ..."),
        ("direction", "string", "send, receive or empty."),
        ("nic", "Int64", "NET device index."),
        ("nic_name", "string", "That device's name on the host (mlx5_0 ...), when the log listed it."),
        ("gdr", "bool", "GPUDirect RDMA on this edge."),
        ("shared", "bool", "Shared (p2p) buffers."),
        ("proxy_rank", "Int64", "PXN proxy rank."),
        ("peer_rank", "Int64", "NET lines: the rank at the other end, when printed."),
        ("channels", "int64", "How many lines show this edge."),
    ],
    "ranks": [
        (
            "communicator",
            "string",
            "commId; `<parent commId> split N color C` for a communicator made by ncclCommSplit; else "
            "host:pid:pointer; `nccl-tests:<source>` for a table's devices.",
        ),
        ("nranks", "Int64", "Ranks of that communicator."),
        ("rank", "int64", "Rank in it."),
        ("host", "string", "Host."),
        ("pid", "Int64", "Process id."),
        ("gpu", "Int64", "CUDA device index (cudaDev)."),
        ("nvml_dev", "Int64", "NVML device index."),
        ("bus_id", "string", "PCI bus id as printed."),
        ("nic", "string", "NET devices the rank's NET connections use (comma-joined names or indexes)."),
        ("init", "string", "complete, started, or listed (seen without Init START/COMPLETE)."),
        ("source", "string", "Input that shows the rank."),
        ("line", "Int64", "Its line."),
    ],
    "settings": [
        ("variable", "string", "NCCL_* (or other) variable name."),
        ("value", "string", "Its value."),
        ("host", "string", "A host that reported it (`<NA>` when the lines carry none): one row per host."),
        ("processes", "int64", "How many processes reported this value (all hosts)."),
        ("pids", "string", "Those processes' pids, comma-joined."),
        (
            "origin",
            "string",
            "log (NCCL printed it), command_line (a command line in the inputs sets it) or"
            " param_dump (NCCL 2.30's parameter dump lists it as set).",
        ),
        ("source", "string", "Input of the first line showing it."),
        ("line", "int64", "That line."),
    ],
    "job_collectives": [
        ("source", "string", "NCCL Inspector file the records were read from."),
        ("host", "string", "Host of the process (JSON metadata hostname, Prometheus label node)."),
        ("pid", "Int64", "Process id (JSON only)."),
        ("rank", "Int64", "Rank in the communicator (JSON only)."),
        ("nranks", "Int64", "Ranks of the communicator."),
        ("nnodes", "Int64", "Nodes of the communicator."),
        ("comm", "string", "Communicator hash (JSON) or name (Prometheus), `<NA>` when neither."),
        ("kind", "string", "collective or p2p."),
        ("operation", "string", "AllReduce, AllGather, ReduceScatter, Send, Recv ..."),
        ("size", "Int64", "Message size in bytes (the lower end of a Prometheus range)."),
        ("calls", "int64", "Records of this operation and size."),
        ("time_us", "float64", "Median execution time, microseconds (`NaN` where not given)."),
        ("busbw", "float64", "Median bus bandwidth, GB/s."),
        ("busbw_max", "float64", "Highest bus bandwidth of these calls, GB/s."),
        ("line", "int64", "Line of the first record in that input."),
    ],
    "findings": [
        ("code", "string", "Rule code, e.g. NET001."),
        ("name", "string", "Rule name, e.g. socket-transport."),
        ("severity", "string", "error, warning or info."),
        ("message", "string", "The finding in one line."),
        ("hosts", "string", "Hosts concerned, comma-joined."),
        ("ranks", "string", "Ranks concerned, comma-joined."),
        ("evidence", "string", "First evidence line as source:line."),
        ("evidence_text", "string", "Its text."),
        ("evidence_count", "int64", "How many lines support the finding."),
        ("root_cause", "bool", "First link of a story told by several findings."),
        ("related", "string", "Codes of the findings this one explains or is explained by."),
        ("fix", "string", "What to do."),
    ],
}
CASE_FRAMES = ("benchmarks", "connections", "ranks", "settings", "job_collectives")


@dataclass(frozen=True)
class Frames(Mapping[str, pd.DataFrame]):
    """The frames of a Case (findings empty) or of an Analysis, by attribute or by name.

    >>> import ncclscope as ns
    >>> frames = ns.read("fixtures/nccl_tests/v2_17_unified_8xh100.txt").frames()
    >>> list(frames)
    ['benchmarks', 'connections', 'ranks', 'settings', 'job_collectives', 'findings']
    >>> largest = frames.benchmarks.sort_values("size").iloc[-1]
    >>> (largest["collective"], int(largest["size"]), float(largest["busbw"]))
    ('all_gather', 8589934592, 373.25)
    """

    benchmarks: pd.DataFrame
    connections: pd.DataFrame
    ranks: pd.DataFrame
    settings: pd.DataFrame
    job_collectives: pd.DataFrame
    findings: pd.DataFrame

    def __getitem__(self, name: str) -> pd.DataFrame:
        if name not in COLUMNS:
            raise KeyError(f"{name!r}: frames are {', '.join(COLUMNS)}")
        return getattr(self, name)  # type: ignore[no-any-return]

    def __iter__(self) -> Iterator[str]:
        return iter(COLUMNS)

    def __len__(self) -> int:
        return len(COLUMNS)


def case_frames(case: Case) -> Frames:
    """Every frame of a Case; `findings` is empty (a Case has not been analysed)."""
    return Frames(
        benchmarks=benchmarks(case),
        connections=connections(case),
        ranks=ranks(case),
        settings=settings(case),
        job_collectives=job_collectives(case),
        findings=frame("findings", []),
    )


def analysis_frames(analysis: Analysis) -> Frames:
    """Every frame of an Analysis: its Case's, and its findings."""
    base = case_frames(analysis.case)
    return Frames(
        base.benchmarks, base.connections, base.ranks, base.settings, base.job_collectives, findings(analysis)
    )


def frame(name: str, rows: Iterable[tuple[Any, ...]]) -> pd.DataFrame:
    """Rows (tuples in COLUMNS order) as the documented frame, with its dtypes even when empty."""
    spec = COLUMNS[name]
    columns = [column for column, _, _ in spec]
    df = pd.DataFrame.from_records(list(rows), columns=columns)
    return df.astype({column: dtype for column, dtype, _ in spec})


def describe() -> str:
    """The columns of every frame as a Markdown table per frame (the README section is this text)."""
    parts = []
    for name, spec in COLUMNS.items():
        parts.append(f"`{name}`\n\n| column | dtype | meaning |\n| --- | --- | --- |")
        parts.extend(f"| `{column}` | {dtype} | {meaning} |" for column, dtype, meaning in spec)
        parts.append("")
    return "\n".join(parts)


def _join(items: Iterable[Any]) -> str | None:
    text = ",".join(str(item) for item in items if item not in (None, ""))
    return text or None


def benchmarks(case: Case) -> pd.DataFrame:
    rows = []
    for run in case.benchmarks:
        hosts = _join(dict.fromkeys(device.host for device in run.devices))
        for row in run.rows:
            oop, ip = row.out_of_place, row.in_place
            peaks = [bw for bw in (oop.busbw, ip.busbw) if bw is not None]
            rows.append(
                (
                    run.source,
                    run.line,
                    hosts,
                    run.collective,
                    run.nranks,
                    row.size,
                    row.count,
                    row.type,
                    row.redop,
                    row.root,
                    oop.time_us,
                    oop.algbw,
                    oop.busbw,
                    oop.wrong,
                    ip.time_us,
                    ip.algbw,
                    ip.busbw,
                    ip.wrong,
                    max(peaks) if peaks else None,
                    row.line,
                )
            )
    return frame("benchmarks", rows)


def _edge_nic_names(case: Case) -> list[str | None]:
    """Per edge of case.edges: the name of its NET device on its host (mlx5_0 ...) where the log listed it."""
    names: dict[tuple[str, str, int | None], str] = {(d.host, d.transport, d.index): d.name for d in case.net_devices}
    return [
        names.get((edge.host or "", edge.transport.split("/")[1], edge.nic)) if _is_net(edge) else None
        for edge in case.edges
    ]


def _is_net(edge: Connection) -> bool:
    return edge.nic is not None and edge.transport.startswith("NET/")


def connections(case: Case) -> pd.DataFrame:
    rows = []
    for edge, nic_name in zip(case.edges, _edge_nic_names(case), strict=True):
        rows.append(
            (
                edge.evidence.source,
                edge.evidence.line,
                edge.host,
                edge.from_rank,
                edge.to_rank,
                edge.from_dev,
                edge.to_dev,
                edge.transport,
                edge.direction,
                edge.nic,
                nic_name,
                edge.gdr,
                edge.shared,
                edge.proxy_rank,
                edge.peer_rank,
                edge.channels,
            )
        )
    return frame("connections", rows)


def ranks(case: Case) -> pd.DataFrame:
    nics = _nics_of_ranks(case)
    rows = []
    for comm in case.communicators:
        for member in comm.ranks:
            evidence = member.evidence or comm.evidence
            init = "complete" if member.init_complete else "started" if member.init_start else "listed"
            rows.append(
                (
                    comm.id,
                    comm.nranks,
                    member.rank,
                    member.host,
                    member.pid,
                    member.cuda_dev,
                    member.nvml_dev,
                    member.bus_id,
                    _join(nics.get((member.host or "", member.rank), ())),
                    init,
                    evidence.source if evidence else None,
                    evidence.line if evidence else None,
                )
            )
    for run in case.benchmarks:  # nccl-tests' device lines: a rank, its host, pid, GPU and bus id
        for device in run.devices:
            rows.append(
                (
                    f"nccl-tests:{run.source}",
                    run.nranks,
                    device.rank,
                    device.host,
                    device.pid,
                    device.cuda_dev,
                    None,
                    device.bus_id,
                    None,
                    "listed",
                    run.source,
                    run.line,
                )
            )
    return frame("ranks", rows)


def _nics_of_ranks(case: Case) -> dict[tuple[str, int], list[str]]:
    """(host, rank) -> the NET devices its connection lines go through, by name where the log listed them."""
    out: dict[tuple[str, int], list[str]] = {}
    for edge, listed in zip(case.edges, _edge_nic_names(case), strict=True):
        if not _is_net(edge):
            continue
        name = listed or str(edge.nic)
        used = out.setdefault((edge.host or "", edge.from_rank), [])
        if name not in used:
            used.append(name)
    return out


def settings(case: Case) -> pd.DataFrame:
    rows = []
    for setting in case.env:
        pids = _join(setting.pids)
        hosts: list[str | None] = list(setting.hosts) or [None]
        for host in hosts:
            rows.append(
                (
                    setting.name,
                    setting.value,
                    host,
                    setting.processes,
                    pids,
                    setting.origin,
                    setting.evidence.source,
                    setting.evidence.line,
                )
            )
    return frame("settings", rows)


def job_collectives(case: Case) -> pd.DataFrame:
    """NCCL Inspector's summary per operation, size and rank (one row each)."""
    rows = [
        (
            report.source,
            op.host,
            op.pid,
            op.rank,
            op.nranks,
            op.nnodes,
            op.comm_id or op.comm_name,
            op.kind,
            op.name,
            op.size_bytes,
            op.count,
            op.exec_time_us,
            op.busbw_gbs,
            op.busbw_max_gbs,
            op.evidence.line,
        )  # fmt: skip
        for report in case.inspector
        for op in report.ops
    ]
    return frame("job_collectives", rows)


def findings(analysis: Analysis) -> pd.DataFrame:
    rows = []
    for finding in analysis.findings:
        first = finding.evidence[0] if finding.evidence else None
        rows.append(
            (
                finding.code,
                finding.name,
                finding.severity,
                finding.message,
                _join(finding.hosts),
                _join(finding.ranks),
                f"{first.source}:{first.line}" if first else None,
                first.text if first else None,
                finding.evidence_count,
                finding.root_cause,
                _join(finding.related),
                finding.fix,
            )
        )
    return frame("findings", rows)
