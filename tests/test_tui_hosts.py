"""The Hosts and ranks screen: hosts and ranks tables, the hosts that disagree highlighted, consistency findings."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import DataTable, Static
from tui_harness import PaneHarness, case_view

from ncclscope.tui.hosts import FindingLinks, HostsPane, odd_ones_out
from ncclscope.tui.view import CaseView

PLUGIN_MISMATCH = "fixtures/net/plugin_mismatch_three_hosts.log"
VERSION_MISMATCH = "fixtures/runtime/version_mismatch_warn.log"
SIZE = (120, 40)


def harness(view: CaseView | None) -> PaneHarness:
    return PaneHarness(lambda: HostsPane(), view)


def cell(table: DataTable, row: int, label: str) -> Text:
    labels = [str(column.label) for column in table.ordered_columns]
    value = table.get_row_at(row)[labels.index(label)]
    assert isinstance(value, Text)
    return value


def column(table: DataTable, label: str) -> list[str]:
    return [cell(table, row, label).plain for row in range(table.row_count)]


async def test_the_host_on_another_network_and_plugin_is_the_odd_one_out() -> None:
    app = harness(case_view(PLUGIN_MISMATCH))
    async with app.run_test(size=SIZE):
        assert app.query_one(HostsPane).odd_cells == {("gpu-x03", "Network"), ("gpu-x03", "Net plugin")}


async def test_the_odd_hosts_cell_is_drawn_on_the_themes_error_colour() -> None:
    app = harness(case_view(PLUGIN_MISMATCH))
    async with app.run_test(size=SIZE):
        hosts = app.query_one("#hosts-table", DataTable)
        odd, usual = cell(hosts, 2, "Net plugin"), cell(hosts, 0, "Net plugin")
        assert (odd.plain, usual.plain) == ("internal", "loaded IBext")
        assert odd.style.bgcolor is not None and odd.style.bgcolor.triplet.hex == app.current_theme.error.lower()
        assert not usual.style


async def test_a_version_printed_by_one_host_only_is_not_odd() -> None:
    # NCCL prints its version on rank 0 only: the hosts that did not print it do not disagree.
    app = harness(case_view(PLUGIN_MISMATCH))
    async with app.run_test(size=SIZE):
        hosts = app.query_one("#hosts-table", DataTable)
        assert column(hosts, "NCCL") == ["2.18.5+cuda12.2", "-", "-"]
        assert not any(label == "NCCL" for _, label in app.query_one(HostsPane).odd_cells)


async def test_two_hosts_on_two_versions_are_both_highlighted() -> None:
    app = harness(case_view(VERSION_MISMATCH))
    async with app.run_test(size=SIZE):
        assert app.query_one(HostsPane).odd_cells == {("gpu-v01", "NCCL"), ("gpu-v02", "NCCL")}


def test_the_minority_is_odd_whichever_value_it_holds() -> None:
    assert odd_ones_out({"a": "IB", "b": "IB", "c": "Socket"}) == {"c"}
    assert odd_ones_out({"a": "Socket", "b": "Socket", "c": "IB"}) == {"c"}
    assert odd_ones_out({"a": "IB", "b": "", "c": "IB"}) == set()


async def test_the_ranks_table_has_a_row_per_rank_with_its_gpu() -> None:
    app = harness(case_view(PLUGIN_MISMATCH))
    async with app.run_test(size=SIZE):
        ranks = app.query_one("#ranks-table", DataTable)
        assert column(ranks, "Rank") == ["0", "1", "2", "3", "4", "5"]
        assert column(ranks, "Host") == ["gpu-x01", "gpu-x01", "gpu-x02", "gpu-x02", "gpu-x03", "gpu-x03"]
        assert column(ranks, "busId") == ["3b000", "86000"] * 3
        assert column(ranks, "cudaDev") == ["0", "1"] * 3


async def test_the_odd_hosts_ranks_are_highlighted_too() -> None:
    app = harness(case_view(PLUGIN_MISMATCH))
    async with app.run_test(size=SIZE):
        ranks = app.query_one("#ranks-table", DataTable)
        highlighted = [row for row in range(ranks.row_count) if cell(ranks, row, "Network").style]
        assert highlighted == [4, 5]


async def test_the_highlight_follows_a_change_of_theme() -> None:
    app = harness(case_view(PLUGIN_MISMATCH))
    async with app.run_test(size=SIZE) as pilot:
        app.theme = "textual-light"
        await pilot.pause()
        odd = cell(app.query_one("#hosts-table", DataTable), 2, "Network")
        assert odd.style.bgcolor is not None and odd.style.bgcolor.triplet.hex == app.current_theme.error.lower()


async def test_without_communicator_init_lines_the_ranks_table_lists_the_processes() -> None:
    app = harness(case_view("fixtures/mixed/seed_like_4xh100.txt"))
    async with app.run_test(size=SIZE):
        ranks = app.query_one("#ranks-table", DataTable)
        assert (column(ranks, "Host"), column(ranks, "PID"), column(ranks, "cudaDev")) == (
            ["inst-4h100-a"],
            ["28417"],
            ["0-3"],
        )
        assert "no communicator init lines" in str(app.query_one("#ranks-title", Static).content)


async def test_clicking_a_header_sorts_by_that_column_and_again_reverses() -> None:
    app = harness(case_view(PLUGIN_MISMATCH))
    async with app.run_test(size=SIZE) as pilot:
        ranks = app.query_one("#ranks-table", DataTable)
        bus_id_header = (sum(column.get_render_width(ranks) for column in ranks.ordered_columns[:5]) + 1, 0)
        await pilot.click(ranks, offset=bus_id_header)
        assert column(ranks, "busId") == ["3b000"] * 3 + ["86000"] * 3
        await pilot.click(ranks, offset=bus_id_header)
        assert column(ranks, "busId") == ["86000"] * 3 + ["3b000"] * 3


async def test_enter_on_a_consistency_finding_shows_its_evidence_line() -> None:
    view = case_view(PLUGIN_MISMATCH)
    (net007,) = view.findings_with_prefix("NET007")
    app = harness(view)
    async with app.run_test(size=SIZE) as pilot:
        app.query_one(FindingLinks).focus()
        await pilot.press("enter")
        assert app.jumps == [(net007.evidence[0].source, net007.evidence[0].line)]


async def test_enter_on_a_rank_shows_its_init_line() -> None:
    view = case_view(PLUGIN_MISMATCH)
    app = harness(view)
    async with app.run_test(size=SIZE) as pilot:
        app.query_one("#ranks-table", DataTable).focus()
        await pilot.press("down", "down", "enter")
        rank2 = view.case.communicators[0].ranks[2].evidence
        assert rank2 is not None and "rank 2" in rank2.text
        assert app.jumps == [(rank2.source, rank2.line)]


async def test_an_input_without_an_nccl_log_says_what_to_add() -> None:
    app = harness(case_view("fixtures/topo/h100_8gpu_nic_legend_tabs.txt"))
    async with app.run_test(size=SIZE):
        message = app.query_one("#hosts-message", Static)
        assert message.display and "NCCL_DEBUG=INFO" in str(message.content)
        assert not app.query_one("#hosts-table").display


async def test_before_the_case_is_read_the_pane_says_so() -> None:
    app = harness(None)
    async with app.run_test(size=SIZE):
        assert str(app.query_one("#hosts-message", Static).content) == "Reading inputs..."


async def test_showing_a_new_case_replaces_the_tables() -> None:
    app = harness(case_view(PLUGIN_MISMATCH))
    async with app.run_test(size=SIZE):
        pane = app.query_one(HostsPane)
        pane.show_case(case_view(VERSION_MISMATCH))
        assert column(app.query_one("#hosts-table", DataTable), "Host") == ["gpu-v01", "gpu-v02"]
        assert app.query_one("#ranks-table", DataTable).row_count == 2


def test_snapshot_three_hosts_one_on_another_plugin(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(harness(case_view(PLUGIN_MISMATCH)), terminal_size=SIZE)
