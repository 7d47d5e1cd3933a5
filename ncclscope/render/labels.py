"""How benchmark sizes and runs are named in every output (kept free of matplotlib, so the TUI starts fast)."""

from __future__ import annotations

from ncclscope.model import Analysis, BandwidthJudgement, BenchmarkRun


def run_label(run: BenchmarkRun) -> str:
    name = run.collective or "benchmark"
    ranks = f", {run.nranks} ranks" if run.nranks else ""
    return f"{name}{ranks}"


def judgement_for(analysis: Analysis, run: BenchmarkRun) -> BandwidthJudgement | None:
    for j in analysis.bandwidth:
        if j.source == run.source and j.line == run.line:
            return j
    return None
