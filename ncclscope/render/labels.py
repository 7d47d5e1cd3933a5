"""How benchmark sizes and runs are named in every output (kept free of matplotlib, so the TUI starts fast)."""

from __future__ import annotations

from ncclscope.model import Analysis, BandwidthJudgement, BenchmarkRun


def human_size(size: float) -> str:
    """8 -> 8 B, 1024 -> 1 KiB, 1073741824 -> 1 GiB (binary units, as nccl-tests sizes are)."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:g} {unit}" if unit == "B" else f"{value:.3g} {unit}"
        value /= 1024
    return f"{value:g} TiB"  # pragma: no cover


def run_label(run: BenchmarkRun) -> str:
    name = run.collective or "benchmark"
    ranks = f", {run.nranks} ranks" if run.nranks else ""
    return f"{name}{ranks}"


def judgement_for(analysis: Analysis, run: BenchmarkRun) -> BandwidthJudgement | None:
    for j in analysis.bandwidth:
        if j.source == run.source and j.line == run.line:
            return j
    return None
