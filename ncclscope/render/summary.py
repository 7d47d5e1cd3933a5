"""The compact human summary printed by `ncclscope parse`."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ncclscope.model import BenchmarkRun, Case, Host


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "-"


def peak_busbw(run: BenchmarkRun) -> tuple[int, float] | None:
    """(size, busbw) at the largest size of a run: what nccl-tests can say about peak bandwidth."""
    best: tuple[int, float] | None = None
    for row in run.rows:
        values = [m.busbw for m in (row.out_of_place, row.in_place) if m.busbw is not None]
        if values and (best is None or row.size >= best[0]):
            best = (row.size, max(values))
    return best


def print_summary(case: Case, console: Console) -> None:
    console.print("[bold]Inputs[/]")
    for s in case.sources:
        kinds = " + ".join(s.kinds) or "nothing recognised"
        line = f"  {s.path}: {kinds}, {s.lines} lines"
        if s.nccl_lines:
            line += f", {s.nccl_lines} NCCL lines, {_pct(s.recognized, s.nccl_lines)} recognised"
            if s.unrecognized_count:
                line += f" ({s.unrecognized_count} not understood)"
        if s.framework_lines:
            line += f", {s.framework_lines} framework lines"
        if s.kernel_lines:
            line += f", {s.kernel_lines} kernel log lines"
            if s.framework_unrecognized:
                line += f" ({s.framework_unrecognized} not understood)"
        if s.skipped_lines:
            line += f", {s.skipped_lines} lines skipped before the first it knows (no word of any kind it reads)"
        if s.rewrapped:
            line += f"; {s.rewrapped}"
        if s.truncated:
            line += f"; cut: {'; '.join(s.truncated)}"
        console.print(line, markup=False)
    for s in case.sources:
        for u in s.unrecognized[:5]:
            console.print(
                f"  [yellow]{s.path}:{u.line}[/] not understood ({u.reason}): {u.text[:120]}",
                markup=True,
                highlight=False,
            )
        if s.unrecognized_count > 5:
            console.print(f"  ... and {s.unrecognized_count - 5} more lines in {s.path}")
    if case.facts_capped:
        counted = ", ".join(f"{kind} {n}" for kind, n in sorted(case.facts_capped.items()))
        console.print(f"Beyond the limits on kept facts, counted but not kept: {counted}", markup=False)
    if repeated := sum(s.records_repeated for s in case.sources):
        console.print(
            f"Read once: {repeated} INFO records that repeat an earlier one of their process word for"
            " word, the time aside (a restart loop or a collector's resend)",
            markup=False,
        )
    if case.nccl_versions:
        console.print(f"NCCL versions: {', '.join(case.nccl_versions)}")
    if case.hosts:
        hosts = Table(title="Hosts", title_justify="left", show_edge=False)
        for column in ("host", "processes", "ranks", "NCCL", "network", "net plugin", "GDR"):
            hosts.add_column(column)
        for names, h, ranks, processes in _host_groups(case.hosts):
            label = names[0] if len(names) == 1 else f"{names[0]} .. {names[-1]} ({len(names)} hosts)"
            hosts.add_row(
                label,
                str(processes),
                _ranks(ranks),
                ", ".join(h.nccl_versions) or "-",
                ", ".join(h.networks) or "-",
                ", ".join(h.net_plugins) or "-",
                h.gdr,
            )
        console.print(hosts)
    if case.communicators:
        comms = Table(title="Communicators", title_justify="left", show_edge=False)
        for column in ("id", "nranks", "nodes", "Init START", "Init COMPLETE", "channels"):
            comms.add_column(column)
        for c in case.communicators[:20]:
            comms.add_row(
                c.id,
                str(c.nranks or "-"),
                str(c.nnodes or "-"),
                str(c.ranks_started),
                str(c.ranks_completed),
                str(c.channels or "-"),
            )
        console.print(comms)
        if len(case.communicators) > 20:
            console.print(f"... and {len(case.communicators) - 20} more communicators")
    if case.connections.total:
        parts = ", ".join(f"{k} {v}" for k, v in sorted(case.connections.by_transport.items()))
        console.print(
            f"Connections: {case.connections.total} lines ({parts}); NET with GDR {case.connections.net_with_gdr}, "
            f"without {case.connections.net_without_gdr}"
        )
    if case.net_devices:
        devices = sorted(
            {f"{d.transport}:{d.name}" + (f"/{d.link_layer}" if d.link_layer else "") for d in case.net_devices}
        )
        console.print(f"Network devices: {', '.join(devices[:16])}{' ...' if len(devices) > 16 else ''}")
    if case.env:
        console.print("Settings: " + ", ".join(f"{e.name}={e.value}" for e in case.env[:20]))
    if case.warning_count:
        console.print(f"[red]WARN lines: {case.warning_count}[/]")
    for topo in case.topologies:
        console.print(
            f"Topology matrix ({topo.source}:{topo.line}): {len(topo.gpus)} GPUs, {len(topo.nics)} NICs, "
            f"legend {topo.legend}"
        )
    for run in case.benchmarks:
        peak = peak_busbw(run)
        peak_text = f"busbw {peak[1]:.2f} GB/s at {peak[0]} B" if peak else "no rows"
        console.print(
            f"Benchmark {run.collective or '?'} ({run.source}:{run.line}): {run.nranks or '?'} ranks, "
            f"{len(run.rows)} rows, {peak_text}" + (f", avg busbw {run.avg_busbw}" if run.avg_busbw is not None else "")
        )


def _host_groups(hosts: list[Host]) -> list[tuple[list[str], Host, list[int], int]]:
    """Hosts alike in everything but name and ranks share one row: a 128-host job stays readable."""
    groups: dict[tuple, tuple[list[str], Host, list[int], int]] = {}
    for h in hosts:
        key = (tuple(h.nccl_versions), tuple(h.networks), tuple(h.net_plugins), h.gdr, h.processes)
        names, first, ranks, processes = groups.setdefault(key, ([], h, [], 0))
        names.append(h.name)
        ranks.extend(h.ranks)
        groups[key] = (names, first, ranks, processes + h.processes)
    return [(names, first, sorted(ranks), processes) for names, first, ranks, processes in groups.values()]


def _ranks(ranks: list[int]) -> str:
    if not ranks:
        return "-"
    if len(ranks) > 1 and ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"{ranks[0]}-{ranks[-1]}"
    return ",".join(map(str, ranks[:12])) + (" ..." if len(ranks) > 12 else "")
