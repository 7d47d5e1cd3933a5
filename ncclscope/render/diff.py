"""Comparing two runs (`ncclscope diff BEFORE AFTER`): busbw per collective and size, and findings.

A *series* is one benchmark curve: nccl-tests rows of one (collective, type, redop, nranks). At each
size the busbw of a side is the better of out-of-place and in-place; when a side holds the same
size more than once (`-N` repeats, several files of one run) the median of those values is taken,
so one lucky or unlucky repeat does not decide. A size regresses when after < before x (1 - threshold).

Findings are matched by code and normalised message (numbers, hex ids and spacing do not count), so a
BW001 that went from 32% to 35% of the expected figure persists, while a NET001 that is gone
disappeared.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import BaseModel, Field
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ncclscope import __version__
from ncclscope.common.output_files import write_file
from ncclscope.common.words import human_size
from ncclscope.model import Analysis, Finding
from ncclscope.model.factories import new_list
from ncclscope.model.frames import benchmarks as benchmark_frame

DEFAULT_THRESHOLD = 0.10


class SeriesKey(BaseModel):
    """What makes two benchmark curves comparable."""

    collective: str = Field(description="all_reduce, all_gather ... ('unknown' when the output does not say).")
    type: str = Field(description="Data type column, e.g. float.")
    redop: str = Field(description="Reduction column (sum, none, or empty).")
    nranks: int | None = Field(None, description="Ranks of the run, when known.")

    def label(self) -> str:
        bits = [self.type]
        if self.redop and self.redop != "none":
            bits.append(self.redop)
        if self.nranks:
            bits.append(f"{self.nranks} ranks")
        return f"{self.collective} ({', '.join(bits)})"


class SizeDiff(BaseModel):
    """One message size of one series."""

    size: int = Field(description="Bytes, as nccl-tests prints them.")
    before_busbw: float | None = Field(None, description="GB/s; None when the size is only in AFTER.")
    after_busbw: float | None = Field(None, description="GB/s; None when the size is only in BEFORE.")
    ratio: float | None = Field(None, description="after / before; None when either side is missing or zero.")
    regression: bool = Field(False, description="after < before x (1 - threshold).")
    improvement: bool = Field(False, description="after > before x (1 + threshold).")


class SeriesDiff(BaseModel):
    """A benchmark curve present on both sides, size by size."""

    key: SeriesKey
    sizes: list[SizeDiff] = Field(default_factory=new_list, description="Every size of either side, ascending.")
    only_before: list[int] = Field(default_factory=new_list, description="Sizes measured only in BEFORE.")
    only_after: list[int] = Field(default_factory=new_list, description="Sizes measured only in AFTER.")
    before_sources: list[str] = Field(default_factory=new_list)
    after_sources: list[str] = Field(default_factory=new_list)

    @property
    def regressions(self) -> list[SizeDiff]:
        return [s for s in self.sizes if s.regression]


class CollectiveSummary(BaseModel):
    """A series judged at its largest size measured on both sides (where peak busbw is reached)."""

    key: SeriesKey
    size: int
    before_busbw: float
    after_busbw: float
    ratio: float | None
    regression: bool
    regressed_sizes: int = Field(0, description="How many sizes of the series regressed in all.")


class FindingChange(BaseModel):
    """A finding that appeared, disappeared or persisted between the two analyses."""

    code: str
    name: str
    severity: str
    message: str
    key: str = Field(description="The normalised message the match was made on.")


class RunDiff(BaseModel):
    """`ncclscope diff` output: the JSON contract."""

    ncclscope_version: str = __version__
    threshold: float = Field(description="Fraction of busbw lost before a size is flagged (0.10 = 10%).")
    before_inputs: list[str] = Field(default_factory=new_list)
    after_inputs: list[str] = Field(default_factory=new_list)
    series: list[SeriesDiff] = Field(default_factory=new_list, description="Curves present on both sides.")
    series_only_before: list[SeriesKey] = Field(default_factory=new_list)
    series_only_after: list[SeriesKey] = Field(default_factory=new_list)
    summary: list[CollectiveSummary] = Field(default_factory=new_list)
    findings_appeared: list[FindingChange] = Field(default_factory=new_list)
    findings_disappeared: list[FindingChange] = Field(default_factory=new_list)
    findings_persisting: list[FindingChange] = Field(default_factory=new_list)
    regression_count: int = Field(0, description="Sizes flagged as regressions over all series.")

    @property
    def regressed(self) -> bool:
        return self.regression_count > 0


# ---------------------------------------------------------------------------------------------
# comparing


def diff_runs(before: Analysis, after: Analysis, threshold: float = DEFAULT_THRESHOLD) -> RunDiff:
    if not 0 <= threshold < 1:
        raise ValueError(f"threshold must be a fraction in [0, 1), got {threshold}")
    curves_before, sources_before = _curves(before)
    curves_after, sources_after = _curves(after)
    keys_before, keys_after = set(sources_before), set(sources_after)
    sides = pd.concat({"before": curves_before, "after": curves_after}, axis=1).sort_index()
    series = [
        _series_diff(key, sides.loc[key], threshold, sources_before[key], sources_after[key])
        for key in sorted(keys_before & keys_after)
    ]
    appeared, disappeared, persisting = _finding_changes(before.findings, after.findings)
    return RunDiff(
        threshold=threshold,
        before_inputs=[s.path for s in before.case.sources],
        after_inputs=[s.path for s in after.case.sources],
        series=series,
        series_only_before=[_key(k) for k in sorted(keys_before - keys_after)],
        series_only_after=[_key(k) for k in sorted(keys_after - keys_before)],
        summary=[s for s in (_summary(d) for d in series) if s is not None],
        findings_appeared=appeared,
        findings_disappeared=disappeared,
        findings_persisting=persisting,
        regression_count=sum(len(d.regressions) for d in series),
    )


_Key = tuple[str, str, str, int]  # sortable form of SeriesKey (nranks -1 when unknown)
_SERIES = ["collective", "type", "redop", "nranks"]


def _key(k: _Key) -> SeriesKey:
    return SeriesKey(collective=k[0], type=k[1], redop=k[2], nranks=k[3] if k[3] >= 0 else None)


def _curves(analysis: Analysis) -> tuple[pd.Series, dict[_Key, list[str]]]:
    """The median busbw per series and size (a Series indexed by series key and size), and each series'
    inputs in the order read."""
    rows = benchmark_frame(analysis.case).dropna(subset=["busbw"])
    rows = rows.assign(
        collective=rows["collective"].fillna("unknown"),
        nranks=rows["nranks"].fillna(-1).replace(0, -1).astype("int64"),
    )
    curves = rows.groupby([*_SERIES, "size"])["busbw"].median()
    sources = {tuple(key): list(dict.fromkeys(group)) for key, group in rows.groupby(_SERIES, sort=False)["source"]}
    return curves, sources  # type: ignore[return-value]


def _series_diff(
    key: _Key, sides: pd.DataFrame, threshold: float, before_sources: list[str], after_sources: list[str]
) -> SeriesDiff:
    """`sides`: columns before and after (busbw, NaN where a side lacks the size), indexed by size."""
    ratio = (sides["after"] / sides["before"]).where(sides["before"] != 0).round(4)
    rows = sides.assign(ratio=ratio, regression=ratio < 1 - threshold, improvement=ratio > 1 + threshold)
    rows = rows.astype(object).where(rows.notna(), None)
    sizes = [
        SizeDiff(
            size=int(size),
            before_busbw=row.before,
            after_busbw=row.after,
            ratio=row.ratio,
            regression=bool(row.regression),
            improvement=bool(row.improvement),
        )
        for size, row in zip(rows.index, rows.itertuples(index=False), strict=True)
    ]
    return SeriesDiff(
        key=_key(key),
        sizes=sizes,
        only_before=[int(size) for size in sides.index[sides["after"].isna()]],
        only_after=[int(size) for size in sides.index[sides["before"].isna()]],
        before_sources=before_sources,
        after_sources=after_sources,
    )


def _summary(series: SeriesDiff) -> CollectiveSummary | None:
    common = [s for s in series.sizes if s.before_busbw is not None and s.after_busbw is not None]
    if not common:
        return None
    top = common[-1]
    assert top.before_busbw is not None and top.after_busbw is not None
    return CollectiveSummary(
        key=series.key,
        size=top.size,
        before_busbw=top.before_busbw,
        after_busbw=top.after_busbw,
        ratio=top.ratio,
        regression=top.regression,
        regressed_sizes=len(series.regressions),
    )


_NUMBER = re.compile(r"0x[0-9a-f]+|\d+(?:\.\d+)?")


def normalise_message(message: str) -> str:
    """The part of a finding's message that names *what*, not *how much*."""
    return " ".join(_NUMBER.sub("#", message.lower()).split())


def _change(f: Finding) -> FindingChange:
    return FindingChange(
        code=f.code, name=f.name, severity=f.severity, message=f.message, key=normalise_message(f.message)
    )


def _finding_changes(
    before: list[Finding], after: list[Finding]
) -> tuple[list[FindingChange], list[FindingChange], list[FindingChange]]:
    old = {(c.code, c.key): c for c in map(_change, before)}
    new = {(c.code, c.key): c for c in map(_change, after)}
    return (
        [new[k] for k in sorted(new.keys() - old.keys())],
        [old[k] for k in sorted(old.keys() - new.keys())],
        [new[k] for k in sorted(new.keys() & old.keys())],
    )


# ---------------------------------------------------------------------------------------------
# exit status


def exit_code(diff: RunDiff, fail_on_regression: bool = True) -> int:
    """1 when a size regressed beyond the threshold (unless told not to fail), else 0."""
    return 1 if fail_on_regression and diff.regressed else 0


# ---------------------------------------------------------------------------------------------
# output


def _bw(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _ratio(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.2f}x ({int(round((value - 1) * 100)):+d}%)"


def headline(diff: RunDiff) -> str:
    parts = []
    if diff.regression_count:
        names = ", ".join(s.key.label() for s in diff.series if s.regressions)
        parts.append(
            f"{diff.regression_count} size{'s' if diff.regression_count != 1 else ''} regressed by more than "
            f"{diff.threshold:.0%} ({names})"
        )
    elif diff.series:
        parts.append(f"no busbw regression beyond {diff.threshold:.0%}")
    else:
        parts.append("no benchmark in common to compare")
    parts.append(f"{len(diff.findings_appeared)} finding(s) appeared, {len(diff.findings_disappeared)} disappeared")
    return "; ".join(parts)


def render_diff_text(diff: RunDiff, console: Console) -> None:
    console.print(f"[bold]ncclscope diff[/] {__version__}: {escape(headline(diff))}")
    console.print(f"[dim]before:[/] {escape(', '.join(diff.before_inputs))}", soft_wrap=True)
    console.print(f"[dim]after:[/]  {escape(', '.join(diff.after_inputs))}", soft_wrap=True)
    if diff.summary:
        console.print()
        table = Table(title="At the largest common size", title_justify="left", show_edge=False)
        for column in ("series", "size", "before GB/s", "after GB/s", "ratio", "regressed sizes"):
            table.add_column(column, justify="left" if column == "series" else "right")
        for s in diff.summary:
            style = "bold red" if s.regression else None
            table.add_row(
                escape(s.key.label()), human_size(s.size), _bw(s.before_busbw), _bw(s.after_busbw),
                _ratio(s.ratio), str(s.regressed_sizes), style=style,
            )  # fmt: skip
        console.print(table)
    for series in diff.series:
        console.print()
        _print_series(series, console)
    for label, keys in (("only in BEFORE", diff.series_only_before), ("only in AFTER", diff.series_only_after)):
        if keys:
            console.print(f"\n[bold]Benchmarks {label}:[/] {escape(', '.join(k.label() for k in keys))}")
    _print_findings("Findings that appeared", diff.findings_appeared, "red", console)
    _print_findings("Findings that disappeared", diff.findings_disappeared, "green", console)


def _print_series(series: SeriesDiff, console: Console) -> None:
    table = Table(title=escape(series.key.label()), title_justify="left", show_edge=False)
    for column in ("size", "before GB/s", "after GB/s", "ratio", ""):
        table.add_column(column, justify="right")
    for s in series.sizes:
        mark = "REGRESSION" if s.regression else ("improved" if s.improvement else "")
        if s.before_busbw is None:
            mark = "only after"
        elif s.after_busbw is None:
            mark = "only before"
        style = "bold red" if s.regression else ("green" if s.improvement else None)
        table.add_row(human_size(s.size), _bw(s.before_busbw), _bw(s.after_busbw), _ratio(s.ratio), mark, style=style)
    console.print(table)


def _print_findings(title: str, changes: list[FindingChange], colour: str, console: Console) -> None:
    if not changes:
        return
    console.print(f"\n[bold]{title}[/]")
    for c in changes:
        console.print(
            f"  [{colour}]{c.severity.upper():7}[/] [bold]{c.code}[/] {c.name}: {escape(c.message)}", soft_wrap=True
        )


def diff_to_json(diff: RunDiff) -> str:
    return diff.model_dump_json(indent=2)


def diff_plot_png(diff: RunDiff, path: str | Path) -> Path | None:
    """busbw against size (log scale), before and after, one panel per series, regressions marked.

    Returns the path written, or None when there is no series in common (nothing is written).
    The file appears whole or not at all (written beside the target, then renamed).
    """
    if not diff.series:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    target = Path(path)
    count = len(diff.series)
    fig, axes = plt.subplots(count, 1, figsize=(8, 3.2 * count), squeeze=False)
    try:
        for ax, series in zip(axes[:, 0], diff.series, strict=True):
            _plot_series(ax, series)
        fig.tight_layout()
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=100)
        write_file(target, buffer.getvalue())  # never renamed over a device or pipe (common/output_files.py)
    finally:
        plt.close(fig)
    return target


def _plot_series(ax, series: SeriesDiff) -> None:  # type: ignore[no-untyped-def]
    from matplotlib.ticker import FuncFormatter

    before = [(s.size, s.before_busbw) for s in series.sizes if s.before_busbw is not None]
    after = [(s.size, s.after_busbw) for s in series.sizes if s.after_busbw is not None]
    for side, colour, points in (("before", "tab:blue", before), ("after", "tab:orange", after)):
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", markersize=3, color=colour, label=side)
    bad = series.regressions
    if bad:
        ax.scatter(
            [s.size for s in bad], [s.after_busbw for s in bad], s=80, facecolors="none", edgecolors="red",
            linewidths=1.5, zorder=3, label="regression",
        )  # fmt: skip
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: human_size(int(x)) if x >= 1 else ""))
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("busbw (GB/s)")
    ax.set_title(series.key.label())
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(loc="upper left", fontsize="small")


def report_view(diff: RunDiff) -> Any:
    """The diff as the HTML/Markdown report shows it (render.html.DiffView), with its ratio plot."""
    from ncclscope.render.html import DiffRow, DiffView
    from ncclscope.render.plots import ratio_plot

    rows = [
        DiffRow(series.key.label(), s.size, s.before_busbw, s.after_busbw, s.ratio, s.regression)
        for series in diff.series
        for s in series.sizes
    ]
    curves = {
        series.key.label(): [(s.size, s.ratio) for s in series.sizes if s.ratio is not None] for series in diff.series
    }
    return DiffView(
        before=", ".join(diff.before_inputs),
        after=", ".join(diff.after_inputs),
        threshold=1 - diff.threshold,  # the report draws and states the after/before ratio that counts
        rows=rows,
        appeared=[f"{c.code} {c.message}" for c in diff.findings_appeared],
        disappeared=[f"{c.code} {c.message}" for c in diff.findings_disappeared],
        plot=ratio_plot("busbw after / before", curves, 1 - diff.threshold),
    )
