"""What the BW rules share: sizes and bandwidths in a message's words, and the lines behind a run."""

from __future__ import annotations

from collections.abc import Iterable

from ncclscope.diagnose.rules.context import Context
from ncclscope.model import BandwidthJudgement, BenchmarkRow, BenchmarkRun, Evidence

OLD_ERROR_LAYOUTS = frozenset({"v1", "v2.0-2.11"})  # the `error` column holds the largest absolute error


# ---------------------------------------------------------------------------------- helpers
def gbs_text(value: float | None) -> str:
    if value is None:
        return "?"
    return f"{value:.1f}".rstrip("0").rstrip(".") if value >= 1 else f"{value:.2f}"


def row_evidence(run: BenchmarkRun, rows: Iterable[BenchmarkRow]) -> list[Evidence]:
    """nccl-tests rows keep only their line number; the text says what the row holds."""
    out = []
    for r in rows:
        oop, inp = r.out_of_place, r.in_place
        text = (
            f"{r.size} B {r.type} {r.redop}: time {gbs_text(oop.time_us)}/{gbs_text(inp.time_us)} us, "
            f"busbw {gbs_text(oop.busbw)}/{gbs_text(inp.busbw)} GB/s (out-of-place/in-place)"
        )
        out.append(Evidence(source=run.source, line=r.line, text=text))
    return out


def run_evidence(run: BenchmarkRun) -> list[Evidence]:
    return [run.evidence] if run.evidence else []


def run_of(ctx: Context, judgement: BandwidthJudgement) -> BenchmarkRun | None:
    for run in ctx.case.benchmarks:
        if run.source == judgement.source and run.line == judgement.line:
            return run
    return None


def largest_rows(run: BenchmarkRun) -> list[BenchmarkRow]:
    if not run.rows:
        return []
    size = max(r.size for r in run.rows)
    return [r for r in run.rows if r.size == size]


def run_hosts(run: BenchmarkRun) -> list[str]:
    return sorted({d.host for d in run.devices if d.host})


def run_label(run: BenchmarkRun) -> str:
    return f"{run.collective or 'nccl-tests'} run at {run.source}:{run.line}"
