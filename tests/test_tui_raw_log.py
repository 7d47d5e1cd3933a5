"""The Raw log screen, driven through Textual's Pilot on fixtures: jumps, filters, search, marks."""

from __future__ import annotations

from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import Select, Static
from tui_harness import ROOT, PaneHarness, case_view

from ncclscope.tui.raw_log import LogLines, RawLogPane
from ncclscope.tui.view import CaseView

# 2 hosts x 2 GPUs: node-b01 (pids 51201, 51202: ranks 0, 1) and node-b02 (41873, 41874: ranks 2, 3;
# also ranks 0, 1 of a per-host split communicator). Counts below are those of grep on the file.
TWO_HOSTS = "fixtures/nccl/v2_26_socket_fallback.log"
TWO_HOSTS_LINES = 147
GLUED = "fixtures/nccl/variant_glued_records.log"  # unrecognised: lines 52 and 53


def path_of(fixture: str) -> str:
    """The file behind a source (the harness names sources by their path relative to the repository)."""
    return str(ROOT / fixture)


def harness(*fixtures: str) -> PaneHarness:
    return PaneHarness(lambda: RawLogPane(id="raw"), case_view(*fixtures))


async def settle(pilot: Pilot[None]) -> None:
    """Let messages, then the filter/search/index workers, then their reports run."""
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def pane_of(pilot: Pilot[None]) -> RawLogPane:
    return pilot.app.query_one(RawLogPane)


def shown(pilot: Pilot[None]) -> list[int]:
    """The line numbers the raw log shows (all its rows, not only the visible ones)."""
    lines = pilot.app.query_one(LogLines)
    return [lines.line_at(row) for row in range(lines.row_count)]


def status(pilot: Pilot[None]) -> str:
    return str(pilot.app.query_one("#raw-status", Static).render())


def grep(fixture: str, needle: str) -> list[int]:
    text = Path(path_of(fixture)).read_text()
    return [n for n, line in enumerate(text.splitlines(), 1) if needle in line]


async def choose(pilot: Pilot[None], select_id: str, value: object) -> None:
    pilot.app.query_one(f"#{select_id}", Select).value = value
    await settle(pilot)


async def type_into(pilot: Pilot[None], selector: str, text: str) -> None:
    await pilot.click(selector)
    await pilot.press(*text, "enter")
    await settle(pilot)


async def test_before_any_input_it_says_reading_inputs() -> None:
    app = PaneHarness(lambda: RawLogPane(id="raw"), None)
    async with app.run_test(size=(120, 40)) as pilot:
        assert status(pilot) == "Reading inputs..."
        assert pane_of(pilot).current is None


async def test_open_files_shows_the_first_line_at_once() -> None:
    app = PaneHarness(lambda: RawLogPane(id="raw"), None)
    async with app.run_test(size=(120, 40)) as pilot:
        pane_of(pilot).open_files({"job.log": path_of(TWO_HOSTS)})
        assert pane_of(pilot).current == ("job.log", 1)
        await settle(pilot)
        assert status(pilot).startswith(f"{TWO_HOSTS_LINES} lines")


async def test_a_file_that_cannot_be_read_shows_a_message() -> None:
    app = PaneHarness(lambda: RawLogPane(id="raw"), None)
    async with app.run_test(size=(120, 40)) as pilot:
        pane_of(pilot).open_files({"gone.log": "/nonexistent/gone.log"})
        await settle(pilot)
        assert status(pilot) == "gone.log: cannot read (No such file or directory)"


async def test_goto_puts_the_cursor_on_the_line_and_scrolls_to_it() -> None:
    async with harness(TWO_HOSTS).run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        pane_of(pilot).goto(TWO_HOSTS, 137)
        await pilot.pause()
        lines = pilot.app.query_one(LogLines)
        assert pane_of(pilot).current == (TWO_HOSTS, 137)
        top = lines.scroll_offset.y
        assert top <= 136 < top + lines.scrollable_content_region.height


async def test_goto_switches_to_the_other_source() -> None:
    async with harness(TWO_HOSTS, GLUED).run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        pane_of(pilot).goto(GLUED, 52)
        await pilot.pause()
        assert pane_of(pilot).current == (GLUED, 52)
        assert pilot.app.query_one("#raw-source", Select).value == GLUED


async def test_goto_clears_the_filters_that_hide_the_line() -> None:
    async with harness(TWO_HOSTS).run_test(size=(120, 40)) as pilot:
        await choose(pilot, "raw-level", "WARN")
        pane_of(pilot).goto(TWO_HOSTS, 10)
        await settle(pilot)
        assert pane_of(pilot).current == (TWO_HOSTS, 10)
        assert len(shown(pilot)) == TWO_HOSTS_LINES


async def test_level_filter_keeps_the_warn_lines() -> None:
    async with harness(TWO_HOSTS).run_test(size=(120, 40)) as pilot:
        await choose(pilot, "raw-level", "WARN")
        assert shown(pilot) == grep(TWO_HOSTS, "NCCL WARN") == [137, 143]
        assert "filter: 2 matching" in status(pilot)


async def test_level_filter_other_keeps_the_lines_without_an_nccl_record() -> None:
    async with harness(TWO_HOSTS).run_test(size=(120, 40)) as pilot:
        await choose(pilot, "raw-level", "other")
        assert len(shown(pilot)) == TWO_HOSTS_LINES - len(grep(TWO_HOSTS, "NCCL ")) == 2


async def test_host_filter_keeps_that_hosts_lines() -> None:
    async with harness(TWO_HOSTS).run_test(size=(120, 40)) as pilot:
        await choose(pilot, "raw-host", "node-b01")
        assert shown(pilot) == grep(TWO_HOSTS, "node-b01:")
        assert len(shown(pilot)) == 73


async def test_rank_filter_keeps_the_lines_of_that_ranks_process() -> None:
    async with harness(TWO_HOSTS).run_test(size=(120, 40)) as pilot:
        await choose(pilot, "raw-rank", 3)
        assert shown(pilot) == grep(TWO_HOSTS, "node-b02:41874:")
        assert len(shown(pilot)) == 34


async def test_family_filter_keeps_the_environment_lines() -> None:
    async with harness(TWO_HOSTS).run_test(size=(120, 40)) as pilot:
        await choose(pilot, "raw-family", "env")
        assert shown(pilot) == grep(TWO_HOSTS, "set by environment")
        assert len(shown(pilot)) == 12


async def test_regex_filter_keeps_the_matching_lines() -> None:
    async with harness(TWO_HOSTS).run_test(size=(120, 40)) as pilot:
        await type_into(pilot, "#raw-regex", r"via NET/\w+")
        assert shown(pilot) == grep(TWO_HOSTS, "via NET/")
        assert len(shown(pilot)) == 8


async def test_filters_combine() -> None:
    async with harness(TWO_HOSTS).run_test(size=(120, 40)) as pilot:
        await choose(pilot, "raw-level", "WARN")
        await choose(pilot, "raw-host", "node-b01")
        assert shown(pilot) == []
        await choose(pilot, "raw-host", "node-b02")
        assert shown(pilot) == [137, 143]


async def test_an_invalid_regex_shows_a_message_and_keeps_the_lines() -> None:
    async with harness(TWO_HOSTS).run_test(size=(120, 40)) as pilot:
        await type_into(pilot, "#raw-regex", "via (NET")
        assert status(pilot).startswith("Invalid regular expression 'via (NET': missing ), unterminated subpattern")
        assert len(shown(pilot)) == TWO_HOSTS_LINES


async def test_clearing_the_filters_returns_to_all_lines_at_the_same_line() -> None:
    async with harness(TWO_HOSTS).run_test(size=(120, 40)) as pilot:
        await choose(pilot, "raw-level", "WARN")
        await pilot.click(LogLines)
        await pilot.press("down")
        assert pane_of(pilot).current == (TWO_HOSTS, 143)
        await pilot.press("x")
        await settle(pilot)
        assert len(shown(pilot)) == TWO_HOSTS_LINES
        assert pane_of(pilot).current == (TWO_HOSTS, 143)


async def test_search_finds_next_and_previous_and_wraps() -> None:
    hits = grep(TWO_HOSTS, "Connection closed")
    assert hits == [137, 143]
    async with harness(TWO_HOSTS).run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        pane_of(pilot).focus_search()
        await pilot.press(*"connection CLOSED", "enter")
        await settle(pilot)
        assert pane_of(pilot).current == (TWO_HOSTS, 137)
        assert "search 'connection CLOSED': 2 matches" in status(pilot)
        await pilot.press("n")
        assert pane_of(pilot).current == (TWO_HOSTS, 143)
        await pilot.press("n")
        assert pane_of(pilot).current == (TWO_HOSTS, 137)
        assert "Search wrapped to the top" in [n.message for n in pilot.app._notifications]
        await pilot.press("N")
        assert pane_of(pilot).current == (TWO_HOSTS, 143)


async def test_unrecognised_lines_are_marked_and_u_jumps_to_them() -> None:
    async with harness(GLUED).run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        lines = pilot.app.query_one(LogLines)
        assert lines.marked == {52, 53}
        assert "2 of 2 unrecognised lines marked" in status(pilot)
        await pilot.click(LogLines)
        await pilot.press("u")
        assert pane_of(pilot).current == (GLUED, 52)
        row = 52 - 1 - lines.scroll_offset.y
        assert lines.render_line(row).text.lstrip().startswith("52!│")
        await pilot.press("u")
        assert pane_of(pilot).current == (GLUED, 53)


async def test_the_shown_text_of_an_evidence_line_is_the_evidence_text() -> None:
    view: CaseView = case_view("fixtures/nccl/variant_crlf.log")
    evidence = next(e for f in view.analysis.findings for e in f.evidence if "NCCL " in e.text)
    async with PaneHarness(lambda: RawLogPane(id="raw"), view).run_test(size=(160, 40)) as pilot:
        await settle(pilot)
        pane_of(pilot).goto(evidence.source, evidence.line)
        await pilot.pause()
        lines = pilot.app.query_one(LogLines)
        text = lines.render_line(lines.cursor - lines.scroll_offset.y).text
        assert text.split("│ ", 1)[1].rstrip() == evidence.text.rstrip()


def test_snapshot_top_of_a_fixture(snap_compare) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(harness(TWO_HOSTS), terminal_size=(120, 40))


def test_snapshot_with_a_filter(snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def filter_warn(pilot: Pilot[None]) -> None:
        await choose(pilot, "raw-host", "node-b02")
        await type_into(pilot, "#raw-regex", "NCCL (WARN|INFO) (socket|NET/Socket)")

    assert snap_compare(harness(TWO_HOSTS), terminal_size=(120, 40), run_before=filter_warn)
