"""The Progress screen: how far each rank got, per group, with the ranks HANG findings name marked; reached
from a HANG finding with `p`."""

from __future__ import annotations

import json
from pathlib import Path

from rich.text import Text
from test_tui_app import SIZE, active_tab, app_for, parsed
from textual.widgets import DataTable, OptionList, Static
from tui_harness import PaneHarness, case_view

from ncclscope.tui.findings import FindingsPane
from ncclscope.tui.progress import NO_PROGRESS, ProgressPane, bar
from ncclscope.tui.view import CaseView

COLL = "fixtures/hang/coll_rank_missing.log"
RAS_COUNTS = "fixtures/hang/ras_counts_2_24.txt"
RAS_INCOMPLETE = "fixtures/hang/ras_incomplete.txt"
PANE_SIZE = (160, 40)


def harness(view: CaseView) -> PaneHarness:
    return PaneHarness(lambda: ProgressPane(), view)


def column(table: DataTable, label: str) -> list[str]:
    labels = [str(c.label) for c in table.ordered_columns]
    return [str(table.get_row_at(row)[labels.index(label)]) for row in range(table.row_count)]


async def test_coll_lines_mark_the_rank_one_call_short_as_stuck() -> None:
    app = harness(case_view(COLL))
    async with app.run_test(size=PANE_SIZE) as pilot:
        pane = app.query_one(ProgressPane)
        assert pane.marks == {**dict.fromkeys([0, 1, 2, 3, 4, 5, 7], "furthest"), 6: "stuck"}
        table = app.query_one("#progress-table", DataTable)
        assert column(table, "Reached")[6] == "2a" and set(column(table, "Reached")) == {"2a", "2b"}
        assert column(table, "Host")[6] == "gpu-b04"
        assert column(table, "Mark")[6] == "stuck (HANG001)"
        assert column(table, "Last call")[6] == "AllReduce of 262144 float32"
        why = app.query_one("#progress-why", Static).render()
        assert "HANG001: rank 6 of communicator 0x6e1f0b2c9d3a4857" in str(why)
        # Enter on the stuck rank opens its last COLL line in the raw log
        table.focus()
        table.move_cursor(row=6)
        await pilot.press("enter")
        assert app.jumps == [(COLL, 365)]


async def test_ras_counts_show_the_majority_the_report_does_not_list() -> None:
    app = harness(case_view(RAS_COUNTS))
    async with app.run_test(size=PANE_SIZE):
        pane = app.query_one(ProgressPane)
        assert pane.marks == {12: "behind", 13: "behind", 26: "behind"}
        title = str(app.query_one("#progress-title", Static).render())
        assert "29 at 15307, 2 at 15306, 1 at 15305" in title
        table = app.query_one("#progress-table", DataTable)
        # bars run from the slowest count (one step) to the majority's (full)
        assert column(table, "Progress") == [bar(15306, (15305, 15307))] * 2 + [bar(15305, (15305, 15307))]


async def test_a_rank_ras_lists_as_missing_is_stuck_without_a_count() -> None:
    app = harness(case_view(RAS_INCOMPLETE))
    async with app.run_test(size=PANE_SIZE):
        assert app.query_one(ProgressPane).marks[7] == "stuck"
        table = app.query_one("#progress-table", DataTable)
        row = column(table, "Rank").index("7")
        assert column(table, "Reached")[row] == "" and column(table, "State")[row] == "missing"


def _dump(path: Path, last_seq: int, state: str = "started") -> None:
    """A Flight Recorder JSON dump (pg_config names four members): all_reduce 1..last_seq, the last one `state`."""
    entry = {"pg_id": 0, "process_group": ["0", "default_pg"], "p2p_seq_id": 0, "profiling_name": "nccl:all_reduce",
             "input_sizes": [[1024]], "input_dtypes": ["Float"], "output_sizes": [[1024]], "output_dtypes": ["Float"],
             "is_p2p": False, "timeout_ms": 60000}  # fmt: skip
    entries = [
        {**entry, "record_id": s - 1, "collective_seq_id": s, "state": "completed" if s < last_seq else state}
        for s in range(1, last_seq + 1)
    ]
    config = {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3]"}}
    path.write_text(json.dumps({"version": "2.10", "entries": entries, "pg_config": config}))


async def test_flight_recorder_dumps_mark_waiting_stuck_and_silent_ranks(tmp_path: Path) -> None:
    for rank, last in ((0, 7), (1, 7), (2, 6)):
        _dump(tmp_path / f"rank_{rank}.json", last)
    app = harness(case_view(str(tmp_path)))
    async with app.run_test(size=PANE_SIZE) as pilot:
        pane = app.query_one(ProgressPane)
        # rank 2 never entered sequence number 7; rank 3 left no dump; 0 and 1 wait inside 7
        assert pane.marks == {0: "waiting", 1: "waiting", 2: "stuck", 3: "no data"}
        assert column(app.query_one("#progress-table", DataTable), "Mark")[3] == "no data (no dump)"
        table = app.query_one("#progress-table", DataTable)
        assert column(table, "State")[:3] == ["started", "started", "started"]
        assert column(table, "Reached")[:3] == ["7", "7", "6"]
        # a dump record has no line to open: Enter says what the record holds
        table.focus()
        table.move_cursor(row=2)
        await pilot.press("enter")
        assert not app.jumps


async def test_where_the_opcount_stayed_0_reached_is_a_count_of_coll_lines_in_decimal() -> None:
    # our H100 run: every COLL line says opCount 0; the first communicator listed (comm 0x47ef6c40, the world
    # of the process whose lines come first) printed 142 of the lines kept
    app = harness(case_view("fixtures/device/coll_lines_four_processes.log"))
    async with app.run_test(size=PANE_SIZE):
        table = app.query_one("#progress-table", DataTable)
        assert column(table, "Reached") == ["142"]  # not "8e", the count in hex
        title = str(app.query_one("#progress-title", Static).render())
        assert "Reached is the furthest number of COLL lines (the opCount stayed 0)" in title


async def test_without_progress_evidence_the_screen_says_what_to_add() -> None:
    app = harness(case_view("fixtures/topo/a100_8gpu_mlx_columns.txt"))
    async with app.run_test(size=PANE_SIZE):
        message = app.query_one("#progress-message", Static)
        assert message.display and str(message.render()) == NO_PROGRESS
        assert not app.query_one("#progress-table", DataTable).display


async def test_p_on_a_hang_finding_opens_its_group(repo_cwd: Path) -> None:
    app = app_for(RAS_COUNTS, COLL)
    async with app.run_test(size=SIZE) as pilot:
        await parsed(app, pilot)
        findings = app.query_one(FindingsPane)
        assert findings.select_code("HANG003")
        await pilot.press("p")
        await pilot.pause()
        assert active_tab(app) == "progress"
        pane = app.query_one(ProgressPane)
        groups = app.query_one("#progress-groups", OptionList)
        assert "a93c5e0d17b2f448" in str(groups.get_option_at_index(groups.highlighted or 0).prompt)
        assert pane.marks == {12: "behind", 13: "behind", 26: "behind"}
        assert app.focused is app.query_one("#progress-table", DataTable)
        # and back: the HANG001 of the COLL lines opens the other group
        await pilot.press("1")
        assert findings.select_code("HANG001")
        await pilot.press("p")
        await pilot.pause()
        assert pane.marks[6] == "stuck"


def test_bar_shows_one_call_behind_at_any_sequence_number() -> None:
    assert bar(10_000, (9_999, 10_000)) == "█" * 16
    assert bar(9_999, (9_999, 10_000)) == "█" * 8 + "·" * 8
    assert bar(None, (1, 2)) == "" and bar(5, None) == ""
    assert isinstance(Text(bar(3, (1, 3))), Text)
