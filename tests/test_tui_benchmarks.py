"""The Benchmarks screen: runs list, each run's table, busbw against size with the expected figure."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable, Static
from tui_harness import ROOT, PaneHarness, case_view

from ncclscope.tui.benchmarks import BenchmarksPane, BusbwPlot
from ncclscope.tui.view import CaseView

H100 = "fixtures/nccl_tests/v2_17_unified_8xh100.txt"  # all_gather on 8x H100, 8 B to 8 GiB, expected 370 GB/s
WRONG = "fixtures/nccl_tests/wrong_results.txt"
MULTI_TYPES = "fixtures/nccl_tests/multi_block_types.txt"  # one all_reduce run over 12 types x 5 reductions
TWO_RUNS = "fixtures/diff/after_allreduce_allgather_8xh100.txt"  # all_reduce (BW001 warning), then all_gather
V100 = "fixtures/nccl_tests/v2017_layout.txt"  # 4x V100: no reference figure
NO_BENCHMARK = "fixtures/topo/h100_8gpu_nic_legend_tabs.txt"
SIZE = (120, 40)


def harness(view: CaseView | None) -> PaneHarness:
    return PaneHarness(lambda: BenchmarksPane(), view)


def pane(app: PaneHarness) -> BenchmarksPane:
    return app.query_one(BenchmarksPane)


def table(app: PaneHarness, name: str) -> DataTable:
    return app.query_one(f"#bench-{name}", DataTable)


def cells(app: PaneHarness, name: str, row: int) -> list[Text]:
    return table(app, name).get_row_at(row)  # type: ignore[return-value]


def data_rows(fixture: str) -> list[tuple[int, list[str]]]:
    """(line number, fields) of each table row of an nccl-tests output, read straight from the file."""
    lines = (ROOT / fixture).read_text().splitlines()
    return [(n, line.split()) for n, line in enumerate(lines, 1) if line.strip() and not line.lstrip().startswith("#")]


async def test_plot_holds_out_of_place_and_in_place_busbw_at_every_nonzero_size() -> None:
    rows = [fields for _, fields in data_rows(H100) if int(fields[0]) > 0]  # size 0 has no place on a log axis
    app = harness(case_view(H100))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        plotted = pane(app).plotted
        assert plotted is not None
        out_of_place, in_place = plotted.series
        assert (out_of_place.label, in_place.label) == ("out-of-place", "in-place")
        assert len(out_of_place.sizes) == len(in_place.sizes) == 29
        assert list(out_of_place.sizes) == [int(f[0]) for f in rows]
        assert list(out_of_place.busbw) == [float(f[7]) for f in rows]
        assert list(in_place.busbw) == [float(f[11]) for f in rows]


async def test_plot_draws_the_expected_busbw_as_a_labelled_line() -> None:
    app = harness(case_view(H100))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        plotted = pane(app).plotted
        assert plotted is not None
        assert [(e.busbw, e.label) for e in plotted.expected] == [(370.0, "expected 370 GB/s, ring")]
        assert "expected 370 GB/s, ring" in app.query_one(BusbwPlot).render().plain  # type: ignore[union-attr]


async def test_plot_has_a_log_size_axis_labelled_in_short_binary_units() -> None:
    app = harness(case_view(H100))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        figure = app.query_one(BusbwPlot).render().plain  # type: ignore[union-attr]
        (axis,) = [line for line in figure.splitlines() if "1K" in line]
        assert axis.split() == ["32B", "1K", "32K", "1M", "32M", "1G"]
        # Equal factors of size take equal widths: the axis is logarithmic.
        gaps = [axis.index(b) - axis.index(a) for a, b in zip(axis.split(), axis.split()[1:], strict=False)]
        assert max(gaps) - min(gaps) <= 1


async def test_plot_is_drawn_again_after_a_resize() -> None:
    # plotext's build changes its figure (log of the data in place): a second build must start from the data.
    app = harness(case_view(H100))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        plot = app.query_one(BusbwPlot)
        before = plot.render().plain  # type: ignore[union-attr]
        await pilot.resize_terminal(100, 40)
        await pilot.pause()
        after = plot.render().plain  # type: ignore[union-attr]
        assert before != after
        assert all(label in after for label in ("1K", "1M", "1G", "expected 370 GB/s, ring"))


async def test_rows_table_holds_every_row_of_the_fixture() -> None:
    rows = data_rows(H100)
    app = harness(case_view(H100))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        shown = [[c.plain for c in cells(app, "rows", i)] for i in range(table(app, "rows").row_count)]
        assert len(shown) == len(rows) == 31
        for cells_shown, (_, fields) in zip(shown, rows, strict=True):
            # size, count, type, redop; root -1 is left out; then out-of-place and in-place measurements
            assert cells_shown[1:4] == fields[1:4]
            assert [float(c) for c in cells_shown[4:]] == [float(f) for f in fields[5:]]
        assert (shown[0][0], shown[-1][0]) == ("0 B", "8 GiB")


async def test_rows_with_wrong_results_are_highlighted() -> None:
    wrong = [i for i, (_, f) in enumerate(data_rows(WRONG)) if int(f[8]) > 0 or int(f[12]) > 0]
    assert len(wrong) == 3  # the fixture's three corrupted sizes
    app = harness(case_view(WRONG))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        highlighted = [
            i for i in range(table(app, "rows").row_count) if all("bold" in str(c.style) for c in cells(app, "rows", i))
        ]
        assert highlighted == wrong


async def test_every_sweep_of_a_run_over_several_types_and_reductions_is_listed() -> None:
    app = harness(case_view(MULTI_TYPES))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        runs = table(app, "runs")
        assert runs.row_count == 60
        names = [cells(app, "runs", i)[0].plain for i in range(runs.row_count)]
        assert names[:2] == ["all_reduce int8 sum", "all_reduce int8 prod"]
        assert len(set(names)) == 60
        assert table(app, "rows").row_count == 2  # 1 MiB and 2 MiB of int8 sum only


async def test_moving_to_another_run_shows_its_table_and_plot() -> None:
    app = harness(case_view(TWO_RUNS))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("down")
        await pilot.pause()
        plotted = pane(app).plotted
        assert plotted is not None and "all_gather" in plotted.title
        assert table(app, "rows").row_count == 14
        assert "all_gather on 8x H100" in str(app.query_one("#bench-verdict", Static).content)


async def test_overlay_draws_every_runs_out_of_place_busbw_with_their_expected_figures() -> None:
    app = harness(case_view(TWO_RUNS))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("o")
        plotted = pane(app).plotted
        assert plotted is not None
        assert [s.label for s in plotted.series] == ["all_reduce", "all_gather"]
        assert sorted(e.busbw for e in plotted.expected) == [370.0, 480.0]
        await pilot.press("o")
        assert [s.label for s in pane(app).plotted.series] == ["out-of-place", "in-place"]  # type: ignore[union-attr]


async def test_verdict_column_names_the_rules_conclusion() -> None:
    app = harness(case_view(TWO_RUNS))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        verdicts = [cells(app, "runs", i)[-1] for i in range(2)]
        assert [v.plain for v in verdicts] == ["BW001 warning", "no fault"]
        assert str(verdicts[0].style) == app.theme_variables["warning"]
        assert str(verdicts[1].style) == app.theme_variables["success"]


async def test_a_run_without_expected_figure_says_in_the_title_what_is_missing() -> None:
    app = harness(case_view(V100))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        plotted = pane(app).plotted
        assert plotted is not None
        assert plotted.expected == ()
        assert "it would need a reference figure for all_reduce on 4x V100-SXM" in plotted.title


async def test_enter_on_a_run_opens_the_raw_log_where_its_output_starts() -> None:
    view = case_view(TWO_RUNS)
    app = harness(view)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("down", "enter")
        await pilot.pause()
        second = view.case.benchmarks[1]
        assert app.jumps == [(second.source, second.line)]
        # a run's output starts at the command line that ran it
        assert (ROOT / TWO_RUNS).read_text().splitlines()[second.line - 1].startswith("$ ./build/all_gather_perf")


async def test_enter_on_a_row_opens_the_raw_log_at_that_row() -> None:
    app = harness(case_view(H100))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        table(app, "rows").focus()
        await pilot.press("down", "down", "enter")
        await pilot.pause()
        third_line, fields = data_rows(H100)[2]
        assert fields[0] == "32"
        assert app.jumps == [(H100, third_line)]


async def test_input_without_benchmark_says_how_to_get_one() -> None:
    app = harness(case_view(NO_BENCHMARK))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        note = str(app.query_one("#bench-note", Static).content)
        assert "ncclscope run" in note and "all_reduce_perf -b 8 -e 8G -f 2 -g N" in note
        assert not app.query_one("#bench-body").display


async def test_before_the_case_is_read_the_pane_says_so() -> None:
    app = harness(None)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert str(app.query_one("#bench-note", Static).content) == "Reading inputs..."
        assert not app.query_one("#bench-body").display


def test_snapshot_one_run_with_expected_line(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(harness(case_view(H100)), terminal_size=SIZE)


def test_snapshot_two_runs_overlaid(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(harness(case_view(TWO_RUNS)), terminal_size=SIZE, press=["o"])
