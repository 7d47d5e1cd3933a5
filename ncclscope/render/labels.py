"""How benchmark sizes and runs are named in every output (kept free of matplotlib, so the TUI starts fast)."""

from __future__ import annotations

from dataclasses import dataclass

from ncclscope.model import Analysis, BandwidthJudgement, BenchmarkRun, Case


def run_label(run: BenchmarkRun) -> str:
    name = run.collective or "benchmark"
    ranks = f", {run.nranks} ranks" if run.nranks else ""
    return f"{name}{ranks}"


def judgement_for(analysis: Analysis, run: BenchmarkRun) -> BandwidthJudgement | None:
    for j in analysis.bandwidth:
        if j.source == run.source and j.line == run.line:
            return j
    return None


@dataclass(frozen=True)
class TestHost:
    """A host that only nccl-tests' device lines name (no NCCL log of it): what those lines say."""

    name: str
    processes: int
    ranks: list[int]
    gpus: str


def test_only_hosts(case: Case) -> list[TestHost]:
    """Hosts of the benchmarks' `#  Rank n ... on HOST device ...` lines that no NCCL log line names, so that
    a report of nccl-tests output alone lists the hosts its platform counts."""
    logged = {h.name for h in case.hosts}
    devices: dict[str, list] = {}
    for run in case.benchmarks:
        for d in run.devices:
            if d.host and d.host not in logged:
                devices.setdefault(d.host, []).append(d)
    out = []
    for name in sorted(devices):
        ds = devices[name]
        gpus: dict[str, int] = {}
        for d in {(d.rank, d.bus_id, d.name): d for d in ds}.values():
            gpus[d.name] = gpus.get(d.name, 0) + 1
        out.append(
            TestHost(
                name=name,
                processes=len({d.pid for d in ds if d.pid is not None}) or 1,
                ranks=sorted({d.rank for d in ds}),
                gpus=", ".join(f"{n}x {g}" for g, n in gpus.items()),
            )
        )
    return out
