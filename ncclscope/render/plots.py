"""Benchmark plots for the reports, drawn with matplotlib (Agg backend, no display needed).

One busbw plot per benchmark run (nccl-tests table): busbw against message size on a log2 axis,
out-of-place and in-place, with the expected figure of the detected platform as a horizontal line
whose label names its source. One latency plot per run for the sizes up to 1 MiB (time_us).
Figures are built with `matplotlib.figure.Figure` directly: no pyplot global state, thread safe.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")

from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator  # noqa: E402

from ncclscope.common.words import human_size
from ncclscope.model import Analysis, BandwidthJudgement, BenchmarkRun  # noqa: E402
from ncclscope.render.labels import judgement_for, run_label  # noqa: E402

SMALL_SIZES = 1 << 20  # latency plots cover messages up to 1 MiB
MAX_RUNS_PLOTTED = 24  # a huge case keeps a readable report: the rest is counted, not drawn
DPI = 100


@dataclass
class Plot:
    """One PNG image, ready to embed (HTML) or to write next to a Markdown file."""

    slug: str  # file-name safe: busbw-1-all_reduce
    kind: str  # "busbw", "latency" or "diff"
    title: str
    alt: str
    png: bytes
    run_index: int | None = None


def _size_axis(ax) -> None:  # type: ignore[no-untyped-def]
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(LogLocator(base=2, numticks=40))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: human_size(v).replace(" ", "")))
    for label in ax.get_xticklabels():
        label.set_rotation(45)
    ax.tick_params(axis="x", labelrotation=45, labelsize=8)
    ax.set_xlabel("message size (bytes, log2 scale)")
    ax.grid(True, which="major", alpha=0.3)


def _png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]+", "_", text).strip("_") or "run"


def busbw_plot(run: BenchmarkRun, judgement: BandwidthJudgement | None, index: int) -> Plot | None:
    points_oop = [(r.size, r.out_of_place.busbw) for r in run.rows if r.out_of_place.busbw is not None and r.size > 0]
    points_ip = [(r.size, r.in_place.busbw) for r in run.rows if r.in_place.busbw is not None and r.size > 0]
    if not points_oop and not points_ip:
        return None
    fig = Figure(figsize=(7.5, 4.2))
    ax = fig.add_subplot(1, 1, 1)
    if points_oop:
        ax.plot(*zip(*points_oop, strict=True), marker="o", markersize=3, label="out-of-place busbw", color="#1f77b4")
    if points_ip:
        ax.plot(
            *zip(*points_ip, strict=True), marker="s", markersize=3, label="in-place busbw", color="#ff7f0e", alpha=0.85
        )
    if judgement is not None and judgement.expected_busbw:
        source = judgement.expectation_source or "ncclscope data"
        ax.axhline(
            judgement.expected_busbw,
            color="#2ca02c",
            linestyle="--",
            label=f"expected {judgement.expected_busbw:g} GB/s ({source})",
        )
    _size_axis(ax)
    ax.set_ylabel("busbw (GB/s)")
    ax.set_ylim(bottom=0)
    title = f"busbw: {run_label(run)}"
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    alt = f"busbw against message size for {run_label(run)} (input line {run.line})"
    return Plot(f"busbw-{index}-{_slug(run.collective or 'run')}", "busbw", title, alt, _png(fig), index)


def latency_plot(run: BenchmarkRun, index: int) -> Plot | None:
    small = [r for r in run.rows if 0 < r.size <= SMALL_SIZES]
    oop = [(r.size, r.out_of_place.time_us) for r in small if r.out_of_place.time_us is not None]
    ip = [(r.size, r.in_place.time_us) for r in small if r.in_place.time_us is not None]
    if len({size for size, _ in oop + ip}) < 2:
        return None  # one size is not a curve
    fig = Figure(figsize=(7.5, 3.6))
    ax = fig.add_subplot(1, 1, 1)
    if oop:
        ax.plot(*zip(*oop, strict=True), marker="o", markersize=3, label="out-of-place time", color="#1f77b4")
    if ip:
        ax.plot(*zip(*ip, strict=True), marker="s", markersize=3, label="in-place time", color="#ff7f0e", alpha=0.85)
    _size_axis(ax)
    ax.set_ylabel(f"{run.time_label} (us)")
    ax.set_ylim(bottom=0)
    title = f"latency up to 1 MiB: {run_label(run)}"
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    alt = f"time in microseconds against message size up to 1 MiB for {run_label(run)} (input line {run.line})"
    return Plot(f"latency-{index}-{_slug(run.collective or 'run')}", "latency", title, alt, _png(fig), index)


def benchmark_plots(analysis: Analysis) -> tuple[list[Plot], int]:
    """Plots of every benchmark run (busbw, then latency), and how many runs were left unplotted."""
    plots: list[Plot] = []
    runs = analysis.case.benchmarks
    for index, run in enumerate(runs[:MAX_RUNS_PLOTTED], start=1):
        bw = busbw_plot(run, judgement_for(analysis, run), index)
        if bw is not None:
            plots.append(bw)
        lat = latency_plot(run, index)
        if lat is not None:
            plots.append(lat)
    return plots, max(0, len(runs) - MAX_RUNS_PLOTTED)


def ratio_plot(title: str, series: dict[str, list[tuple[int, float]]], threshold: float | None) -> Plot | None:
    """after/before busbw ratio against size, one line per collective (for run diffs)."""
    series = {k: [p for p in v if p[0] > 0] for k, v in series.items()}
    series = {k: v for k, v in series.items() if v}
    if not series:
        return None
    fig = Figure(figsize=(7.5, 3.8))
    ax = fig.add_subplot(1, 1, 1)
    for name, points in sorted(series.items()):
        ax.plot(*zip(*sorted(points), strict=True), marker="o", markersize=3, label=name)
    ax.axhline(1.0, color="#555555", linewidth=0.8)
    if threshold is not None:
        ax.axhline(threshold, color="#d62728", linestyle="--", label=f"regression threshold {threshold:g}")
    _size_axis(ax)
    ax.set_ylabel("busbw after / before")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return Plot("diff-ratio", "diff", title, "busbw ratio after/before against message size", _png(fig))
