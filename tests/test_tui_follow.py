"""`ncclscope tui --follow`: the TUI over a log that is still being written (a file that grows, a pipe that
stays open). Real files appended to while the app runs, the real analysing child process; in tmux, a real
pipe whose writer pauses and never closes it."""

from __future__ import annotations

import asyncio
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from test_tui_app import SIZE, active_tab
from test_tui_tmux import Terminal, terminal, tui_command  # noqa: F401 - terminal is a fixture
from textual.pilot import Pilot
from textual.widgets import Input, OptionList

from ncclscope.inputs.growing import last_line_end
from ncclscope.tui.app import NcclscopeApp
from ncclscope.tui.findings import FindingsPane
from ncclscope.tui.following import Following, FollowParse, prepare_followed
from ncclscope.tui.raw_log import LogLines

from conftest import REPO

COLL = REPO / "fixtures" / "hang" / "coll_rank_missing.log"
SOCKET = REPO / "fixtures" / "nccl" / "v2_26_socket_fallback.log"
WAIT_SECONDS = 90  # a guard against a hang, not a timing assertion


def followed_app(path: Path, idle: float = 60.0) -> NcclscopeApp:
    ready = prepare_followed(str(path))
    assert not isinstance(ready, str), ready
    prepared, followed = ready
    return NcclscopeApp(prepared, Following(followed, FollowParse(prepared.files[0]), idle))


async def until(pilot: Pilot[int], condition: Callable[[], bool], what: str) -> None:
    async def wait() -> None:
        while not condition():
            await pilot.pause(0.1)

    try:
        await asyncio.wait_for(wait(), WAIT_SECONDS)
    except TimeoutError:
        raise AssertionError(f"{what} did not happen") from None


def lines_of(path: Path, first: int, last: int) -> bytes:
    return b"".join(path.read_bytes().splitlines(keepends=True)[first - 1 : last])


def codes(app: NcclscopeApp) -> list[str]:
    return [f.code for f in app.view.analysis.findings] if app.view else []


def analysed_lines(app: NcclscopeApp) -> int:
    return sum(s.lines for s in app.latest.case.sources) if app.latest else 0


async def test_new_lines_reach_the_raw_log_and_the_findings_without_a_restart(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_bytes(lines_of(SOCKET, 1, 19))  # the job's start: no network chosen yet
    app = followed_app(log)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.view is not None, "the first analysis")
        assert "NET001" not in codes(app)
        raw = app.query_one(LogLines)
        assert raw.index is not None and raw.index.line_count == 19
        with log.open("ab") as out:  # the job goes on: NET/Socket chosen, and half a line not finished yet
            out.write(lines_of(SOCKET, 20, 147) + b"node-b01:51201:51229 [0] NCCL INFO Conn")
        await until(pilot, lambda: "NET001" in codes(app), "NET001 after the new lines")
        assert raw.index.line_count == 147  # whole lines only: the unfinished one waits for its newline
        assert analysed_lines(app) == 147
        assert app.sub_title.endswith("(following)")


async def test_findings_that_judge_what_is_missing_wait_until_the_input_goes_quiet(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_bytes(lines_of(COLL, 1, 376))
    app = followed_app(log, idle=3.0)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.latest is not None, "the first analysis")
        # rank 6 is one collective short: while lines may still come, that is not a verdict yet
        if time.monotonic() - app.following.input.poll().last_data < 3.0:  # type: ignore[union-attr]
            assert "HANG001" not in codes(app) and "HANG001" in app.held_back
        await until(pilot, lambda: "HANG001" in codes(app), "HANG001 once the input is quiet")
        notes = [n for n in app._notifications if "looks hung" in (n.title or "")]
        assert notes and "ranks 6 behind (slowest at opCount 2a)" in notes[0].message
        # and the finding leads to the Progress screen, where rank 6 is marked
        assert app.query_one(FindingsPane).select_code("HANG001")
        await pilot.press("p")
        await until(pilot, lambda: active_tab(app) == "progress", "the Progress screen")


async def test_the_selected_finding_stays_selected_when_the_analysis_is_renewed(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_bytes(lines_of(SOCKET, 1, 60))
    app = followed_app(log)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: len(codes(app)) >= 2, "two findings")
        findings = app.query_one(FindingsPane)
        chosen = app.view.analysis.findings[-1]  # type: ignore[union-attr]
        assert findings.select_code(chosen.code)
        with log.open("ab") as out:
            out.write(lines_of(SOCKET, 61, 147))
        await until(pilot, lambda: analysed_lines(app) == 147, "the analysis of every line")
        await pilot.pause()
        assert findings.selected is not None and findings.selected.identity == chosen.identity
        assert app.query_one("#findings-list", OptionList).highlighted == findings._findings.index(findings.selected)


async def test_a_truncated_file_is_read_again_from_its_start(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_bytes(lines_of(SOCKET, 1, 147))
    app = followed_app(log)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: "NET001" in codes(app), "NET001")
        log.write_bytes(lines_of(COLL, 1, 100))  # rewritten in place by a new job (a longer log: not a truncation)
        await until(pilot, lambda: "NET001" not in codes(app) and analysed_lines(app) == 100, "the new log read")
        assert app.query_one(LogLines).index.line_count == 100  # type: ignore[union-attr]
        assert any("truncated or replaced" in n.message for n in app._notifications)


async def test_the_raw_log_tails_and_its_filter_and_search_go_on_over_new_lines(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_bytes(lines_of(SOCKET, 1, 19))
    app = followed_app(log)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.view is not None, "the first analysis")
        await pilot.press("6")
        raw = app.query_one(LogLines)
        raw.focus()
        await pilot.press("end")  # the last line: the cursor stays on the last line as lines come, like tail -f
        assert raw.current_line == 19 and raw.tail
        with log.open("ab") as out:
            out.write(lines_of(SOCKET, 20, 60))
        await until(pilot, lambda: raw.current_line == 60, "the cursor on the new last line")
        # a filter that has finished goes on over the lines that come after it
        pane = app.raw_log
        pane.query_one("#raw-regex", Input).value = "NET/Socket"
        pane.query_one("#raw-regex", Input).focus()
        await pilot.press("enter")
        await until(pilot, lambda: pane._filter_scanned is None and raw.rows is not None, "the filter")
        before = len(raw.rows)  # type: ignore[arg-type]
        expected = sum(b"NET/Socket" in line for line in lines_of(SOCKET, 1, 147).splitlines())
        assert 0 < before < expected
        with log.open("ab") as out:
            out.write(lines_of(SOCKET, 61, 147))
        await until(pilot, lambda: raw.rows is not None and len(raw.rows) == expected, "the new matching lines")


def test_last_line_end_reads_backwards_past_a_long_last_line(tmp_path: Path) -> None:
    path = tmp_path / "x.log"
    path.write_bytes(b"a\nb\n" + b"x" * (3 * 1024 * 1024))
    assert last_line_end(str(path), 0, path.stat().st_size) == 4
    assert last_line_end(str(path), 4, path.stat().st_size) is None


def test_follow_takes_one_plain_file_or_a_pipe(tmp_path: Path) -> None:
    assert "not a file that can be followed" in str(prepare_followed(str(tmp_path)))
    gz = tmp_path / "x.log.gz"
    gz.write_bytes(b"")
    assert "not a file that can be followed" in str(prepare_followed(str(gz)))


def test_tui_follows_a_pipe_that_stays_open(terminal: Terminal, tmp_path: Path) -> None:  # noqa: F811
    """`job | ncclscope tui --follow -`: the first lines show at once, the rest when they come, keys work
    throughout, and the pipe never closes (a hung job)."""
    first, rest = tmp_path / "first.log", tmp_path / "rest.log"
    first.write_bytes(lines_of(SOCKET, 1, 19))
    rest.write_bytes(lines_of(SOCKET, 20, 147))
    gate = tmp_path / "go"
    writer = (
        f"{{ cat {shlex.quote(str(first))}; while [ ! -e {shlex.quote(str(gate))} ]; do sleep 0.1; done; "
        f"cat {shlex.quote(str(rest))}; sleep 600; }}"
    )
    status = tmp_path / "tui-status"  # the pipeline itself waits for the writer, which never ends
    terminal.start(f"{writer} | {{ {tui_command('--follow', '-')}; echo $? > {shlex.quote(str(status))}; }}")
    terminal.wait_for_text("Following -")
    terminal.press_until("6", "NCCL version 2.26.2")  # the raw log, while the job still runs
    assert "NET001" not in terminal.screen()
    gate.touch()
    terminal.press_until("1", "NET001")
    terminal.keys("q")
    terminal.wait_for(lambda: status.exists() and status.read_text().strip() == "0", "the TUI's exit, status 0")


def test_tui_follow_without_a_terminal_says_so_before_reading() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ncclscope", "tui", "--follow", "a", "b"],
        capture_output=True, text=True, cwd=REPO, check=False,
    )  # fmt: skip
    # stdout is not a terminal here: that is said first, before anything is read
    assert done.returncode == 2 and "tui needs a terminal" in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--follow", "a", "b"], "--follow reads one file or -"),
        (["--follow", "--idle", "0", "x"], "--follow reads one file or -"),
        (["--follow", "-"], "-: stdin is the terminal; pipe the job's output in"),
        (["--follow", "fixtures"], "fixtures: not a file that can be followed"),
    ],
)
def test_follow_arguments_are_checked_in_a_terminal(
    terminal: Terminal,  # noqa: F811
    tmp_path: Path,
    args: list[str],
    message: str,
) -> None:
    err = tmp_path / "err.txt"
    terminal.start(f"{tui_command(*args)} 2> {shlex.quote(str(err))}")
    assert terminal.exit_status() == 2
    assert message in err.read_text()
