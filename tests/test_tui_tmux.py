"""`ncclscope tui` in a real terminal (tmux, on a private server socket): it paints, answers keys and quits."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from conftest import REPO

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

JOB = "fixtures/mixed/multi_host_job_problems.txt"
WAIT_SECONDS = 60  # a guard against a hang, not a timing assertion


class Terminal:
    """One tmux server of its own (-L) running one command in a 140x45 window."""

    def __init__(self, socket: str, status_file: Path) -> None:
        self.socket = socket
        self.status_file = status_file

    def tmux(self, *args: str) -> str:
        done = subprocess.run(["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=False)
        return done.stdout

    def start(self, command: str) -> None:
        shell = f"cd {shlex.quote(str(REPO))} && {command}; echo $? > {shlex.quote(str(self.status_file))}"
        self.tmux("new-session", "-d", "-x", "140", "-y", "45", shell)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p")

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", *keys)

    def wait_for(self, condition: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + WAIT_SECONDS
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} did not happen; the screen shows:\n{self.screen()}")
            time.sleep(0.1)

    def wait_for_text(self, text: str) -> None:
        self.wait_for(lambda: text in self.screen(), f"{text!r} on the screen")

    def press_until(self, key: str, text: str) -> None:
        """Press `key` (a screen switch: pressing it again does no harm) until `text` shows; a key sent
        while the app is still starting under load may be lost, and waiting for it would then wait forever."""
        deadline = time.monotonic() + WAIT_SECONDS
        while True:
            self.keys(key)
            pressed = time.monotonic()
            while time.monotonic() - pressed < 5:
                if text in self.screen():
                    return
                time.sleep(0.1)
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} did not show after {key!r}; the screen shows:\n{self.screen()}")

    def exit_status(self) -> int:
        self.wait_for(lambda: self.status_file.exists() and self.status_file.read_text().strip() != "", "exit")
        return int(self.status_file.read_text())


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    term = Terminal(f"ncclscope-test-{tmp_path.name}", tmp_path / "status")
    yield term
    term.tmux("kill-server")


def tui_command(*args: str) -> str:
    return " ".join([shlex.quote(sys.executable), "-m", "ncclscope", "tui", *map(shlex.quote, args)])


def test_tui_shows_findings_answers_keys_and_quits(terminal: Terminal) -> None:
    terminal.start(tui_command(JOB))
    terminal.wait_for_text("NET002")  # the findings are shown
    terminal.keys("6")
    terminal.wait_for_text("# nccl-tests version")  # the raw log's first lines
    terminal.keys("/")
    terminal.wait_for_text("search:")
    terminal.keys("Escape")
    # A key sent right after Escape would arrive as alt+key: wait until the search is closed.
    terminal.wait_for(lambda: "search:" not in terminal.screen(), "search closed")
    terminal.keys("q")
    assert terminal.exit_status() == 0
    assert terminal.tmux("list-sessions") == ""  # the command ended, and its session with it


def test_slash_then_typed_text_searches_the_raw_log(terminal: Terminal) -> None:
    """Issue 41 item 1: in a real terminal the text typed after `/` lands in the search field."""
    terminal.start(tui_command(JOB))
    terminal.wait_for_text("NET002")
    terminal.keys("6")
    terminal.wait_for_text("# nccl-tests version")
    terminal.keys("/")
    terminal.wait_for_text("search:")
    terminal.keys("Init START")
    terminal.keys("Enter")
    terminal.wait_for_text("search 'Init START'")
    terminal.keys("q")


def test_tui_reads_a_piped_stdin_and_still_takes_keys(terminal: Terminal) -> None:
    terminal.start(f"cat {shlex.quote(JOB)} | {tui_command('-')}")
    terminal.wait_for_text("NET002")
    terminal.keys("2")
    terminal.wait_for(lambda: "Findings" in terminal.screen() and "NET002" not in terminal.screen(), "tab switch")
    terminal.keys("q")
    assert terminal.exit_status() == 0
