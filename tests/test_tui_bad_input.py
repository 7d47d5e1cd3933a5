"""`ncclscope tui` on bad input: one clear message before the UI starts (exit 2), or inside it, never a traceback."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

from textual.widgets import Static

from ncclscope.tui.app import NcclscopeApp
from ncclscope.tui.loading import prepare_inputs

from conftest import REPO, run_cli

JOB = "fixtures/mixed/multi_host_job_problems.txt"


def tui_in_a_terminal(*paths: str) -> tuple[int, str]:
    """Run `ncclscope tui PATHS` with a pseudo-terminal as stdin and stdout (as a user would), stderr captured.
    Only for inputs that stop it before the UI starts."""
    controller, terminal = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "ncclscope", "tui", *paths],
            stdin=terminal,
            stdout=terminal,
            stderr=subprocess.PIPE,
            cwd=REPO,
            timeout=60,
            check=False,
        )
    finally:
        os.close(terminal)
        os.close(controller)
    return done.returncode, done.stderr.decode()


def test_a_missing_file_is_named_before_the_ui_starts() -> None:
    code, stderr = tui_in_a_terminal("no/such/job.log")
    assert code == 2
    assert stderr == "ncclscope: no/such/job.log: no such file or directory\n"


def test_an_empty_file_is_named_before_the_ui_starts(tmp_path: Path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    code, stderr = tui_in_a_terminal(str(empty))
    assert code == 2
    assert stderr == f"ncclscope: {empty}: empty input\n"


def test_a_binary_file_is_named_before_the_ui_starts(tmp_path: Path) -> None:
    binary = tmp_path / "core.bin"
    binary.write_bytes(bytes(range(256)) * 64)
    code, stderr = tui_in_a_terminal(str(binary))
    assert code == 2
    assert "binary data" in stderr and str(binary) in stderr and "Traceback" not in stderr


def test_the_messages_are_those_of_analyze(tmp_path: Path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    analyze = run_cli("analyze", str(empty), "missing.log")
    code, stderr = tui_in_a_terminal(str(empty), "missing.log")
    assert code == analyze.returncode == 2
    assert sorted(stderr.splitlines()) == sorted(analyze.stderr.decode().splitlines())


def test_without_a_terminal_it_refuses_in_one_line() -> None:
    done = run_cli("tui", JOB)
    assert done.returncode == 2
    assert done.stdout == b""
    assert done.stderr.decode().count("\n") == 1 and "needs a terminal" in done.stderr.decode()


async def test_a_missing_file_beside_a_good_one_is_reported_inside_the_ui(repo_cwd: Path) -> None:
    app = NcclscopeApp(prepare_inputs([JOB, "missing.log"]))
    # every notification the app posts, kept: on a loaded machine its 8 s on screen can end before parsing does
    posted: list[str] = []
    show = app.notify
    app.notify = lambda message, **options: (posted.append(message), show(message, **options))[1]  # type: ignore[method-assign]
    async with app.run_test(size=(140, 45)) as pilot:
        while app.parsing:
            await pilot.pause(0.05)
        problems = str(app.findings.query_one("#findings-problems", Static).render())
        assert "missing.log: no such file or directory" in problems
        assert app.findings.selected is not None  # the good input was read
        assert any("missing.log" in message for message in posted)
