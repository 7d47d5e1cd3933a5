"""The Benchmarks screen of the TUI: each nccl-tests run, its table, and busbw against size with the expected figure."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult, RenderResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import DataTable, Static
from textual_plotext import PlotextPlot
from textual_plotext.plot import Plot

from ncclscope.common.words import human_size
from ncclscope.diagnose.bandwidth import unjudged_need
from ncclscope.diagnose.rules.bench_common import OLD_ERROR_LAYOUTS
from ncclscope.model import BandwidthJudgement, BenchmarkRow, BenchmarkRun, Finding, Measurement
from ncclscope.render.labels import judgement_for, run_label
from ncclscope.render.summary import peak_busbw
from ncclscope.tui.messages import JumpToLine
from ncclscope.tui.view import CaseView

NO_BENCHMARK = (
    "No nccl-tests table in the inputs: run `ncclscope run`, or add the output of nccl-tests "
    "(e.g. `all_reduce_perf -b 8 -e 8G -f 2 -g N`) as a file."
)
# Curve colours of an overlay (green is kept for the expected figures). More curves than this are unreadable, and
# plotext drops a legend taller than the plot.
OVERLAY_COLORS = ("cyan", "orange", "magenta", "blue+", "red+", "yellow", "gray", "gold")
OVERLAY_MAX = len(OVERLAY_COLORS)
TICK_STEPS = (1, 2, 5, 10)  # powers of 2 between ticks; 10 keeps 1K, 1M, 1G on the axis
MAX_TICKS = 8
CAPTION = (
    "oop = out-of-place, ip = in-place; time in us, algbw and busbw in GB/s; "
    "rows with wrong results in red; Enter opens the raw log at a row"
)


@dataclass(frozen=True)
class Series:
    """One curve of the plot: busbw (GB/s) at each message size (bytes, > 0 for the log axis)."""

    label: str
    sizes: tuple[int, ...]
    busbw: tuple[float, ...]
    color: str  # a plotext colour name


@dataclass(frozen=True)
class ExpectedLine:
    """The busbw the platform should reach (a horizontal line on the plot)."""

    busbw: float
    label: str


@dataclass(frozen=True)
class Plotted:
    """What the plot shows; the plotext figure is drawn from it (and tests read it)."""

    title: str
    series: tuple[Series, ...]
    expected: tuple[ExpectedLine, ...]


@dataclass(frozen=True)
class Sweep:
    """One entry of the runs list: a run, or one (type, redop, root) sweep of a run that tests several."""

    run: BenchmarkRun  # rows restricted to the sweep; source and line are those of the whole run
    name: str  # "all_reduce", or "all_reduce int8 sum" for a sweep
    title: str  # "all_reduce, 8 ranks" (and the sweep's type and reduction)
    judgement: BandwidthJudgement | None
    verdict: str  # what the rules concluded: "BW001 error", "BW003 error", "no fault", "not judged" ...


class BusbwPlot(PlotextPlot):
    """busbw against size, drawn from a Plotted at every render: plotext's build changes its figure (it takes the
    log of the data in place), so a figure built once cannot be built again after a resize or a theme change."""

    plotted: Plotted | None = None

    def show(self, plotted: Plotted) -> None:
        self.plotted = plotted
        self.refresh()

    def render(self) -> RenderResult:
        self.plt.clear_figure()
        if self.plotted is not None:
            _draw_figure(self.plt, self.plotted, title_width=max(self.size.width - 4, 1))
        return super().render()


class BenchmarksPane(Vertical):
    """Runs list on top; the selected run's busbw plot, its verdict and its table below."""

    DEFAULT_CSS = """
    BenchmarksPane { height: 1fr; }
    BenchmarksPane #bench-note { color: $text-muted; padding: 0 1; }
    BenchmarksPane.-has-runs #bench-note { display: none; }
    BenchmarksPane #bench-body { display: none; }
    BenchmarksPane.-has-runs #bench-body { display: block; }
    BenchmarksPane #bench-runs { height: auto; max-height: 8; }
    BenchmarksPane #bench-verdict { padding: 0 1; background: $panel; max-height: 3; }
    BenchmarksPane #bench-plot { height: 16; min-height: 8; }
    BenchmarksPane #bench-caption { color: $text-muted; padding: 0 1; }
    BenchmarksPane #bench-rows { height: 1fr; }
    """

    BINDINGS = [Binding("o", "toggle_overlay", "Overlay runs")]

    def __init__(self, **kwargs: str | None) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.view: CaseView | None = None
        self.sweeps: list[Sweep] = []
        self.selected: Sweep | None = None
        self.overlay = False
        self.plotted: Plotted | None = None

    def compose(self) -> ComposeResult:
        yield Static("Reading inputs...", id="bench-note")
        with Vertical(id="bench-body"):
            yield DataTable(id="bench-runs", cursor_type="row", zebra_stripes=True)
            yield Static(id="bench-verdict", markup=False)
            yield BusbwPlot(id="bench-plot")
            yield Static(CAPTION, id="bench-caption", markup=False)
            yield DataTable(id="bench-rows", cursor_type="row")

    def on_mount(self) -> None:
        # Table cells are Rich text, which cannot use theme variables: colour them again when the theme changes.
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self._fill_tables())

    def show_case(self, view: CaseView) -> None:
        self.view = view
        self.sweeps = [sweep for run in view.case.benchmarks for sweep in _sweeps_of(view, run)]
        self.selected = self.sweeps[0] if self.sweeps else None
        self.set_class(bool(self.sweeps), "-has-runs")
        self.query_one("#bench-note", Static).update(NO_BENCHMARK)
        self._fill_tables()
        self._draw()

    def action_toggle_overlay(self) -> None:
        self.overlay = not self.overlay
        self._draw()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id != "bench-runs" or not self.sweeps:
            return
        sweep = self.sweeps[event.cursor_row]
        if sweep is not self.selected:
            self.selected = sweep
            self._fill_rows()
            self._draw()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if self.selected is None:
            return
        run = self.selected.run
        if event.data_table.id == "bench-runs":
            self.post_message(JumpToLine(run.source, run.line))
        else:
            self.post_message(JumpToLine(run.source, run.rows[event.cursor_row].line))

    # ------------------------------------------------------------------------------------- tables

    def _colour(self, name: str) -> str:
        return self.app.theme_variables.get(name, "")

    def _fill_tables(self) -> None:
        if self.view is None:
            return
        table = self.query_one("#bench-runs", DataTable)
        table.clear(columns=True)
        table.add_columns("run", "ranks", "input", "peak busbw", "expected", "ratio", "verdict")
        for sweep in self.sweeps:
            table.add_row(*self._run_cells(sweep))
        if self.selected is not None:
            table.move_cursor(row=self.sweeps.index(self.selected), animate=False)
        self._fill_rows()

    def _run_cells(self, sweep: Sweep) -> list[Text]:
        peak = peak_busbw(sweep.run)
        j = sweep.judgement
        return [
            Text(sweep.name),
            Text(str(sweep.run.nranks or "?")),
            Text(f"{_short_source(sweep.run.source)}:{sweep.run.line}"),
            Text(f"{peak[1]:g} GB/s at {human_size(peak[0])}" if peak else "no rows"),
            Text(f"{j.expected_busbw:g} GB/s" if j and j.expected_busbw else "-"),
            Text(f"{j.ratio:.0%}" if j and j.ratio is not None else "-"),
            Text(sweep.verdict, style=self._verdict_style(sweep.verdict)),
        ]

    def _verdict_style(self, verdict: str) -> str:
        severity = "success" if verdict == "no fault" else verdict.rsplit(" ", 1)[-1]
        return self._colour(severity) if severity in ("success", "warning", "error") else "dim"

    def _fill_rows(self) -> None:
        table = self.query_one("#bench-rows", DataTable)
        table.clear(columns=True)
        sweep = self.selected
        if sweep is None or self.view is None:
            return
        run = sweep.run
        rooted = any(r.root >= 0 for r in run.rows)
        wrong_name = "error" if run.layout in OLD_ERROR_LAYOUTS else "#wrong"
        places = [f"{p} {name}" for p in ("oop", "ip") for name in (run.time_label, "algbw", "busbw", wrong_name)]
        table.add_columns("size", "count", "type", "redop", *(["root"] if rooted else []), *places)
        wrong = _wrong_lines(self.view, run)
        for row in run.rows:
            style = f"bold {self._colour('error')}" if row.line in wrong else ""
            cells = [human_size(row.size), str(row.count), row.type, row.redop, *([str(row.root)] if rooted else [])]
            cells += _measurement_cells(row.out_of_place) + _measurement_cells(row.in_place)
            table.add_row(*(Text(c, style=style) for c in cells))

    # --------------------------------------------------------------------------------------- plot

    def _draw(self) -> None:
        if self.view is None or self.selected is None:
            return
        self.plotted = _overlay(self.view, self.sweeps) if self.overlay else _single(self.view, self.selected)
        self.query_one("#bench-verdict", Static).update(_verdict_line(self.selected))
        self.query_one("#bench-plot", BusbwPlot).show(self.plotted)


# ------------------------------------------------------------------------------ what is plotted


def _single(view: CaseView, sweep: Sweep) -> Plotted:
    run = sweep.run
    series = tuple(
        s
        for s in (
            _series("out-of-place", run.rows, lambda r: r.out_of_place, "cyan"),
            _series("in-place", run.rows, lambda r: r.in_place, "orange"),
        )
        if s.sizes
    )
    j = sweep.judgement
    if j is not None and j.expected_busbw:
        algorithm = f", {j.algorithm}" if j.algorithm else ""
        return Plotted(
            f"busbw (GB/s) of {sweep.title} against message size",
            series,
            (ExpectedLine(j.expected_busbw, f"expected {j.expected_busbw:g} GB/s{algorithm}"),),
        )
    return Plotted(f"busbw (GB/s) of {sweep.title}: {_why_no_expectation(view, j)}", series, ())


def _overlay(view: CaseView, sweeps: list[Sweep]) -> Plotted:
    shown = sweeps[:OVERLAY_MAX]
    curves = [_series(w.name, w.run.rows, lambda r: r.out_of_place, OVERLAY_COLORS[i]) for i, w in enumerate(shown)]
    series = tuple(s for s in curves if s.sizes)
    expected: dict[float, ExpectedLine] = {}
    for w in shown:
        figure = w.judgement.expected_busbw if w.judgement else None
        if figure and figure not in expected:
            expected[figure] = ExpectedLine(figure, f"expected {figure:g} GB/s ({w.name})")
    more = f" (first {OVERLAY_MAX} of {len(sweeps)})" if len(sweeps) > OVERLAY_MAX else ""
    return Plotted(f"out-of-place busbw (GB/s) of every run{more}", series, tuple(expected.values()))


def _series(label: str, rows: list[BenchmarkRow], place: Callable[[BenchmarkRow], Measurement], color: str) -> Series:
    points = [(r.size, m.busbw) for r in rows if r.size > 0 for m in [place(r)] if m.busbw is not None]
    return Series(label, tuple(p[0] for p in points), tuple(p[1] for p in points), color)


def _why_no_expectation(view: CaseView, judgement: BandwidthJudgement | None) -> str:
    if judgement is None:
        return "not judged (no row with a busbw at its largest size)"
    if judgement.nranks == 1:
        return "no expected figure: with 1 rank nothing leaves the GPU"
    need = unjudged_need(view.case, view.analysis.platform, judgement)
    return f"no expected figure: it would need {need}" if need else "no expected figure for this platform"


def _draw_figure(plt: Plot, plotted: Plotted, title_width: int) -> None:
    # plotext leaves out a title wider than the plot: clip it instead.
    title = plotted.title
    plt.title(title if len(title) <= title_width else title[: title_width - 1] + "…")
    plt.xlabel("message size (log scale)")
    sizes = [size for s in plotted.series for size in s.sizes]
    if not sizes:
        return
    plt.xscale("log")
    for s in plotted.series:
        plt.plot(list(s.sizes), list(s.busbw), label=s.label, color=s.color, marker="braille")
    low, high = min(sizes), max(sizes)
    for line in plotted.expected:
        # A two-point curve rather than plotext's hline, so the figure gets a legend entry.
        plt.plot([low, high], [line.busbw, line.busbw], label=line.label, color="green", marker="braille")
    top = max([b for s in plotted.series for b in s.busbw] + [line.busbw for line in plotted.expected])
    yticks = busbw_ticks(top)
    plt.ylim(0, yticks[-1])
    plt.yticks(yticks)
    ticks = size_ticks(low, high)
    plt.xticks([float(t) for t in ticks], [_tick_label(t) for t in ticks])


def size_ticks(low: int, high: int) -> list[int]:
    """Powers of 2 between two sizes, at most MAX_TICKS of them, preferring 1K, 1M, 1G when spaced out."""
    first, last = math.ceil(math.log2(low)), math.floor(math.log2(high))
    if last < first:
        return [low]
    for step in TICK_STEPS:
        exponents = [k for k in range(first, last + 1) if k % step == 0]
        if len(exponents) <= MAX_TICKS:
            return [2**k for k in exponents] or [2**first]
    return [2**k for k in range(first, last + 1, (last - first) // MAX_TICKS + 1)]


def busbw_ticks(top: float) -> list[float]:
    """Round GB/s values from 0 to a little above `top`, at most 6 steps: 0, 100, 200, 300, 400."""
    if top <= 0:
        return [0.0, 1.0]
    ceiling = top * 1.02  # room above the highest point, so it does not sit on the frame
    magnitude = 10 ** math.floor(math.log10(ceiling))
    step = next(m * magnitude for m in (0.2, 0.25, 0.5, 1, 2) if ceiling / (m * magnitude) <= 6)
    return [round(i * step, 6) for i in range(math.ceil(ceiling / step) + 1)]


# --------------------------------------------------------------------------------- the case's facts


def _sweeps_of(view: CaseView, run: BenchmarkRun) -> list[Sweep]:
    """A run that tests several types or reductions (nccl-tests -d all -o all) is one sweep of sizes per pair."""

    judgement = judgement_for(view.analysis, run)
    verdict = _engine_verdict(view, run, judgement)
    name, title = run.collective or "benchmark", run_label(run)
    keys = list(dict.fromkeys((r.type, r.redop, r.root) for r in run.rows))
    if len(keys) <= 1:
        return [Sweep(run, name, title, judgement, verdict)]
    sweeps = []
    for dtype, redop, root in keys:
        rows = [r for r in run.rows if (r.type, r.redop, r.root) == (dtype, redop, root)]
        suffix = f" {dtype} {redop}".rstrip() + (f" root {root}" if root >= 0 else "")
        sweeps.append(Sweep(run.model_copy(update={"rows": rows}), name + suffix, title + suffix, judgement, verdict))
    return sweeps


def _cites(finding: Finding, run: BenchmarkRun) -> bool:
    lines = {r.line for r in run.rows} | ({run.evidence.line} if run.evidence else set())
    return any(e.source == run.source and e.line in lines for e in finding.evidence)


def _engine_verdict(view: CaseView, run: BenchmarkRun, judgement: BandwidthJudgement | None) -> str:
    """What the rules concluded about the run (low busbw, wrong results ...): the TUI only names it."""
    cited = [f for f in view.findings_with_prefix("BW") if _cites(f, run)]
    for severity in ("error", "warning"):
        codes = sorted({f.code for f in cited if f.severity == severity})
        if codes:
            return f"{', '.join(codes)} {severity}"
    return "no fault" if judgement is not None and judgement.ratio is not None else "not judged"


def _wrong_lines(view: CaseView, run: BenchmarkRun) -> set[int]:
    """Rows with wrong results: a #wrong count above 0, or a row the BW003 finding cites (old `error` columns hold
    the largest error, which only the rule can weigh against nccl-tests' tolerance)."""
    if run.layout in OLD_ERROR_LAYOUTS:
        lines: set[int] = set()
    else:
        lines = {r.line for r in run.rows if any(_is_count(m.wrong) for m in (r.out_of_place, r.in_place))}
    for finding in view.findings_with_prefix("BW003"):
        lines |= {e.line for e in finding.evidence if e.source == run.source}
    return lines


def _is_count(wrong: float | None) -> bool:
    """A #wrong count above 0 (a fractional value in a headerless table is an old `error` column)."""
    return wrong is not None and wrong > 0 and wrong == int(wrong)


def _verdict_line(sweep: Sweep) -> Content:
    if sweep.judgement is None:
        return Content(f"{sweep.title}: no bandwidth judgement (the run has no busbw at its largest size).")
    return Content(sweep.judgement.verdict)


def _measurement_cells(m: Measurement) -> list[str]:
    wrong = "-" if m.wrong is None else f"{m.wrong:g}"
    return [_number(m.time_us), _number(m.algbw), _number(m.busbw), wrong]


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _short_source(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _tick_label(size: int) -> str:
    """8 -> 8B, 1024 -> 1K, 2**30 -> 1G: short enough for a terminal axis."""
    return human_size(size).replace(" ", "").removesuffix("iB")
