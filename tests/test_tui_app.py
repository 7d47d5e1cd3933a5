"""The TUI application driven by Pilot: screens, keys, help, palette, jumping to evidence, loading while parsing."""

from __future__ import annotations

import asyncio
import io
import os
import signal
import threading
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Static, TabbedContent

from ncclscope.tui.app import TABS, NcclscopeApp
from ncclscope.tui.help import HelpScreen
from ncclscope.tui.loading import prepare_inputs, spool

from conftest import REPO, run_cli

JOB = "fixtures/mixed/multi_host_job_problems.txt"
SIZE = (140, 45)
PARSE_WAIT_SECONDS = 120  # a guard against a hang, not a timing assertion


def app_for(*paths: str) -> NcclscopeApp:
    return NcclscopeApp(prepare_inputs(list(paths)))


async def parsed(app: NcclscopeApp, pilot: Pilot[int]) -> None:
    """Wait until the findings are shown."""

    async def wait() -> None:
        while app.parsing:
            await pilot.pause(0.05)

    await asyncio.wait_for(wait(), PARSE_WAIT_SECONDS)
    await pilot.pause()


def active_tab(app: NcclscopeApp) -> str:
    return app.query_one(TabbedContent).active


async def test_opens_on_findings_with_the_findings_of_the_inputs(repo_cwd: Path) -> None:
    app = app_for(JOB)
    async with app.run_test(size=SIZE) as pilot:
        await parsed(app, pilot)
        assert active_tab(app) == "findings"
        assert app.findings.selected is not None
        assert app.findings.selected.severity == "error"


@pytest.mark.parametrize(("key", "tab"), [(str(n), tab) for n, (tab, _, _) in enumerate(TABS, start=1)])
async def test_number_keys_switch_screens(repo_cwd: Path, key: str, tab: str) -> None:
    app = app_for(JOB)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("5" if key == "1" else "1")  # start elsewhere, so that every key has to act
        await pilot.press(key)
        assert active_tab(app) == tab


async def test_palette_command_switches_screen(repo_cwd: Path) -> None:
    app = app_for(JOB)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+p")
        await pilot.press(*"Show Topology")
        await pilot.pause(0.3)  # the palette searches in a task
        await pilot.press("enter")
        await pilot.pause()
        assert active_tab(app) == "topology"


async def test_palette_jumps_to_a_finding(repo_cwd: Path) -> None:
    app = app_for(JOB)
    async with app.run_test(size=SIZE) as pilot:
        await parsed(app, pilot)
        await pilot.press("2", "ctrl+p")
        await pilot.press(*"Finding NET002")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await pilot.pause()
        assert active_tab(app) == "findings"
        assert app.findings.selected is not None and app.findings.selected.code == "NET002"


async def test_question_mark_shows_the_keys_of_the_app_and_of_the_focused_screen(repo_cwd: Path) -> None:
    app = app_for(JOB)
    async with app.run_test(size=SIZE) as pilot:
        await parsed(app, pilot)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = str(app.screen.query_one("#help-text", Static).render())
        assert "Search the raw log" in text  # the app's
        assert "Evidence" in text  # the Findings screen's
        assert "Communicators" in text
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_ctrl_t_toggles_between_dark_and_light_themes(repo_cwd: Path) -> None:
    app = app_for(JOB)
    async with app.run_test(size=SIZE) as pilot:
        first = app.theme
        await pilot.press("ctrl+t")
        assert app.theme != first and {first, app.theme} == {"textual-dark", "textual-light"}


async def test_enter_on_an_evidence_line_opens_the_raw_log_at_that_line(repo_cwd: Path) -> None:
    app = app_for(JOB)
    async with app.run_test(size=SIZE) as pilot:
        await parsed(app, pilot)
        assert app.findings.select_code("NET002")
        evidence = app.findings.selected.evidence[0]  # type: ignore[union-attr]
        await pilot.press("enter")  # on the finding: to its evidence
        await pilot.press("enter")  # on the first evidence line: to the raw log
        await pilot.pause()
        assert active_tab(app) == "raw-log"
        assert app.raw_log.current == (JOB, evidence.line)


async def test_key_presses_are_answered_while_parsing_runs(repo_cwd: Path) -> None:
    app = app_for(JOB)
    async with app.run_test(size=SIZE) as pilot:
        while app.parse_job.pid is None:  # the child starts once the first screen is painted
            await pilot.pause(0.01)
        pid = app.parse_job.pid
        os.kill(pid, signal.SIGSTOP)  # hold the parse where it is, whatever the machine's speed
        try:
            await pilot.press("3")
            assert active_tab(app) == "communicators"
            assert app.parsing
        finally:
            os.kill(pid, signal.SIGCONT)
        await parsed(app, pilot)
        assert app.findings.selected is not None


async def test_a_bundle_opens_with_its_findings(repo_cwd: Path, tmp_path: Path) -> None:
    ticket = tmp_path / "ticket.tar.gz"
    assert run_cli("bundle", JOB, "-o", str(ticket)).returncode == 0
    app = app_for(str(ticket))
    async with app.run_test(size=SIZE) as pilot:
        await parsed(app, pilot)
        assert app.view is not None
        codes = {f.code for f in app.view.analysis.findings}
        assert {"NET001", "NET002"} <= codes
        source = app.view.analysis.findings[0].evidence[0].source
        assert source.startswith(f"{ticket}:inputs/")
        assert Path(app.view.files[source]).is_file()  # the raw log can read the member


def test_spool_copies_a_pipe_to_a_file(tmp_path: Path) -> None:
    data = (REPO / JOB).read_bytes() * 50  # several copy blocks
    read_end, write_end = os.pipe()
    writer = threading.Thread(target=lambda: (os.write(write_end, data), os.close(write_end)))
    writer.start()
    with os.fdopen(read_end, "rb") as pipe:
        copied = spool(pipe, tmp_path / "stdin.log")
    writer.join()
    assert copied == len(data)
    assert (tmp_path / "stdin.log").read_bytes() == data


def test_stdin_is_read_from_its_spooled_copy_under_the_name_dash() -> None:
    prepared = prepare_inputs(["-"], stdin=io.BytesIO((REPO / JOB).read_bytes()))
    assert [f.display for f in prepared.files] == ["-"]
    assert Path(prepared.raw["-"]).read_bytes() == (REPO / JOB).read_bytes()
    assert prepared.files[0].path == prepared.raw["-"]


def test_a_gz_input_is_decompressed_for_the_raw_log(tmp_path: Path) -> None:
    import gzip

    packed = tmp_path / "job.log.gz"
    packed.write_bytes(gzip.compress((REPO / JOB).read_bytes()))
    prepared = prepare_inputs([str(packed)])
    assert prepared.files[0].path == str(packed)  # the parser reads the .gz itself
    assert Path(prepared.raw[str(packed)]).read_bytes() == (REPO / JOB).read_bytes()
    assert prepared.total_bytes == len((REPO / JOB).read_bytes())


def test_findings_screen_snapshot(repo_cwd: Path, snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def select_a_finding(pilot: Pilot[int]) -> None:
        await parsed(pilot.app, pilot)  # type: ignore[arg-type]
        await pilot.press("down", "down")

    assert snap_compare(app_for(JOB), terminal_size=SIZE, run_before=select_a_finding)


def test_help_snapshot(repo_cwd: Path, snap_compare) -> None:  # type: ignore[no-untyped-def]
    async def open_help(pilot: Pilot[int]) -> None:
        await parsed(pilot.app, pilot)  # type: ignore[arg-type]
        await pilot.press("question_mark")

    assert snap_compare(app_for(JOB), terminal_size=SIZE, run_before=open_help)


async def test_the_raw_log_screen_filters_by_regular_expression_inside_the_app(repo_cwd: Path) -> None:
    from ncclscope.tui.raw_log import LogLines

    app = app_for(JOB)
    async with app.run_test(size=SIZE) as pilot:
        await parsed(app, pilot)
        await pilot.press("6")
        await pilot.click("#raw-regex")
        await pilot.press(*"via NET/Socket", "enter")
        await pilot.pause()
        lines = app.query_one(LogLines)

        async def filtered() -> None:
            while lines.row_count == 0 or lines.row_count > 100:
                await pilot.pause(0.05)

        await asyncio.wait_for(filtered(), PARSE_WAIT_SECONDS)
        await app.workers.wait_for_complete()
        await pilot.pause()
        text = (REPO / JOB).read_text().splitlines()
        expected = [n for n, line in enumerate(text, 1) if "via NET/Socket" in line]
        assert expected and [lines.line_at(row) for row in range(lines.row_count)] == expected


def test_topology_screen_device_tree_snapshot(repo_cwd: Path, snap_compare) -> None:  # type: ignore[no-untyped-def]
    """Our own H100 run: NCCL's tree of the VM (one GPU, eth0 on no PCI device) with nvidia-smi -q's link."""

    async def open_topology(pilot: Pilot[int]) -> None:
        await parsed(pilot.app, pilot)  # type: ignore[arg-type]
        await pilot.press("4")

    assert snap_compare(app_for("fixtures/device/h100_run_nccl_tests"), terminal_size=SIZE, run_before=open_topology)


async def test_slash_then_typing_searches_the_raw_log(repo_cwd: Path) -> None:
    """Issue 41 item 1: the keys a person types after `/` go into the search field, not to the log list's
    shortcuts (`n` next match, `x` clear filters): through the app's own binding, as a terminal sends them."""
    from textual.widgets import Input

    app = app_for(JOB)
    async with app.run_test(size=SIZE) as pilot:
        await parsed(app, pilot)
        await pilot.press("6", "slash")
        await pilot.pause()
        search = app.query_one("#raw-search", Input)
        assert app.focused is search
        await pilot.press(*"Init START", "enter")
        await pilot.pause(0.3)
        assert search.value == "Init START"
        assert app.raw_log.current == (JOB, 36)  # the first line holding it
