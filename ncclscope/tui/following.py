"""`ncclscope tui --follow PATH|-`: the TUI over an input that is still being written (a job's log file, or
its output piped in), like `tail -f`: new lines reach the raw log as they arrive, and the findings and every
screen are analysed again from the start of the input when whole new lines have come.

- `FollowedInput` (inputs/growing.py) watches the input: a file's size, or stdin copied by a thread into a private
  spool file (here the terminal becomes the keyboard, loading.py). Only whole lines are shown and analysed
  until the input ends.
- `FollowParse` is one child process (spawned, like loading.BackgroundParse, so that the interface keeps the
  GIL) that reads and analyses the first N bytes on request; requests that queue up while it works are
  merged into the newest.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing import get_context, resource_tracker
from multiprocessing.connection import Connection
from pathlib import Path

from ncclscope.inputs.growing import FollowedInput, analysis_due
from ncclscope.inputs.opening import InputFile, is_pipe
from ncclscope.tui.loading import Failed, PreparedInputs

POLL_SECONDS = 0.2


@dataclass
class Analysed:
    """One analysis of the first `upto` bytes."""

    analysis_json: str
    messages: list[str]
    upto: int


class FollowParse:
    """A child process that analyses the first N bytes of the input whenever asked."""

    def __init__(self, item: InputFile) -> None:
        """Create it before Textual runs (see loading.BackgroundParse)."""
        resource_tracker.ensure_running()
        context = get_context("spawn")
        requests, self._requests = context.Pipe(duplex=False)  # (receiving end, sending end)
        self._results, results = context.Pipe(duplex=False)
        self._process = context.Process(
            target=_analyse_in_child, args=(item, requests, results), name="ncclscope-follow", daemon=True
        )
        self._child_ends = (requests, results)

    @property
    def pid(self) -> int | None:
        return self._process.pid

    def start(self) -> None:
        self._process.start()
        for end in self._child_ends:
            end.close()

    def request(self, upto: int) -> None:
        """Analyse the first `upto` bytes (whole lines, or the whole input once it ended)."""
        self._requests.send(upto)

    def results(self, cancelled: Callable[[], bool]) -> Iterator[Analysed | Failed]:
        """Each analysis as it is done, until `cancelled()` or the child ends; blocks, so call it from a thread."""
        while not cancelled():
            try:
                if not self._results.poll(POLL_SECONDS):
                    continue
                yield self._results.recv()
            except (EOFError, OSError):
                if not cancelled():
                    yield Failed(f"the analysing process ended (exit status {self._process.exitcode})")
                return

    def stop(self) -> None:
        if self._process.pid is None:  # never started (the app quit before its first paint)
            return
        try:
            self._requests.send(None)
        except OSError:
            pass
        self._process.join(timeout=2)
        if self._process.is_alive():
            self._process.terminate()
            self._process.join(timeout=5)


def _analyse_in_child(item: InputFile, requests: Connection, results: Connection) -> None:
    from ncclscope.case.read import read_files
    from ncclscope.diagnose.engine import analyze

    while True:
        try:
            upto = requests.recv()
            while upto is not None and requests.poll():  # only the newest of the requests that queued up
                upto = requests.recv()
        except (EOFError, OSError):
            return
        if upto is None:
            return
        try:
            part = InputFile(item.path, item.display, span=(0, upto))
            outcome = read_files([part], [], [item.display], jobs=1)
            results.send(Analysed(analyze(outcome.case).model_dump_json(), outcome.messages, upto))
        except Exception as exc:  # reported inside the interface, in one line
            results.send(Failed(f"{type(exc).__name__}: {exc}"))


def prepare_followed(target: str) -> tuple[PreparedInputs, FollowedInput] | str:
    """The inputs of `tui --follow`: one file, `-` or a pipe given by name; a message when `target` cannot be
    followed."""
    if target == "-" and os.isatty(0):
        return "-: stdin is the terminal; pipe the job's output in (`torchrun ... 2>&1 | ncclscope tui --follow -`)"
    if target == "-" or is_pipe(target):
        workdir = Path(tempfile.mkdtemp(prefix="ncclscope-tui-"))
        atexit.register(shutil.rmtree, workdir, True)
        followed = FollowedInput.stdin(workdir) if target == "-" else FollowedInput.pipe(target, workdir)
    else:
        if not os.path.isfile(target) or target.endswith(".gz"):
            return f"{target}: not a file that can be followed (--follow reads one plain file, or - for stdin)"
        followed = FollowedInput(target, target)
    item = InputFile(followed.path, followed.display)
    return PreparedInputs([target], [item], raw={followed.display: followed.path}), followed


@dataclass
class Following:
    """What the app needs to follow its one input, and where following stands."""

    input: FollowedInput
    parse: FollowParse
    idle: float  # seconds without a new line before the job is said to look hung
    shown: int = 0  # bytes given to the raw log
    requested: int = -1  # bytes the last analysis request covers
    analysing: bool = False
    asked_at: float = 0.0
    cost: float = 0.0  # seconds the last analysis took
    analysed_at: float | None = None
    quiet: bool = False  # the input has been quiet for `idle` seconds: every finding is shown
    ended: bool = False

    def due(self, now: float) -> bool:
        return not self.analysing and analysis_due(now - self.asked_at, self.cost)
