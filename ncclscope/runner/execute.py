"""Running one collective: its output teed to files, its rows reported as they stream, a timeout.

The child starts in a session of its own, so that a timeout or Ctrl-C can end its whole process
group (torchrun's workers, mpirun's daemons) and a Ctrl-C at the terminal reaches only ncclscope,
which then ends the group itself: SIGTERM, and SIGKILL after a grace period.

While a child runs, Ctrl-C and SIGTERM only record a request that the wait loop reads
(inputs/interrupts.py). Raised as KeyboardInterrupt at an arbitrary point, Ctrl-C could land between
Popen's spawn and the wait (the child never ended, holding the GPUs), or inside Popen.wait() just after it
takes its wait lock, which is then never released, so the next wait() hangs for ever (CPython's
subprocess, Popen._wait). SIGTERM (`timeout`, a scheduler) would end ncclscope and leave the child running.
A second signal does interrupt; the child's group is then killed on the way out.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from ncclscope.inputs import interrupts
from ncclscope.model import Evidence

KILL_GRACE_S = 5.0
POLL_S = 0.2
TAIL_LINES = 5  # of stdout and of stderr
NCCL_TAIL_LINES = 3  # of each NCCL log
NCCL_TAIL_FILES = 4
ROW_RE = re.compile(rb"^\s*(\d+)\s+\d+\s+\S+")  # a table row starts with size and count


@dataclass
class Stream:
    """One output of the child, written to `path` line by line; its last lines kept."""

    path: Path
    name: str
    tail: deque[tuple[int, str]] = field(default_factory=lambda: deque(maxlen=TAIL_LINES))
    lines: int = 0

    def pump(self, pipe: IO[bytes], on_line: Callable[[bytes], None] | None) -> None:
        with open(self.path, "wb") as out:
            for raw in iter(pipe.readline, b""):
                out.write(raw)
                out.flush()
                self.lines += 1
                self.tail.append((self.lines, raw.decode("utf-8", "replace").rstrip("\r\n")))
                if on_line is not None:
                    on_line(raw)

    def evidence(self) -> list[Evidence]:
        return [Evidence(source=self.name, line=n, text=text) for n, text in self.tail if text.strip()]


@dataclass
class StepOutcome:
    status: str  # ok, failed, timed_out, interrupted
    exit_code: int | None
    duration_s: float
    last_lines: list[Evidence]
    stop_signal: int | None = None  # Ctrl-C or SIGTERM during the step, even if its child had ended by then


def run_step(
    argv: list[str],
    env: dict[str, str],
    stdout: Path,
    stderr: Path,
    timeout_s: float,
    on_size: Callable[[int], None],
    on_tick: Callable[[], None],
) -> StepOutcome:
    """Run `argv` to its end, its timeout, or Ctrl-C or SIGTERM (which end it: status interrupted, stop_signal)."""
    out, err = Stream(stdout, stdout.name), Stream(stderr, stderr.name)
    start = time.monotonic()
    with interrupts.stop_signals():
        try:
            child = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                start_new_session=True,
            )  # fmt: skip
        except OSError as exc:
            stderr.write_text(f"ncclscope: cannot start {argv[0]}: {exc.strerror or exc}\n", encoding="utf-8")
            stdout.write_bytes(b"")
            said = Evidence(source=stderr.name, line=1, text=stderr.read_text().strip())
            return StepOutcome("failed", None, 0.0, [said], _taken_request())
        try:
            status = _follow(child, out, err, start, timeout_s, on_size, on_tick)
        except BaseException:  # a second Ctrl-C: leave now, but not with the child still running
            _signal_group(child, signal.SIGKILL)
            raise
        stop_signal = _taken_request()
    code = child.returncode
    if status == "ok" and code != 0:
        status = "failed"
    tail = out.evidence() + err.evidence() if status != "ok" else []
    return StepOutcome(status, code, time.monotonic() - start, tail, stop_signal)


def _taken_request() -> int | None:
    """The stop request of this step, if any; forgotten here so that nothing read later stops on it."""
    stop_signal = interrupts.requested()
    interrupts.reset()
    return stop_signal


def _follow(
    child: subprocess.Popen[bytes],
    out: Stream,
    err: Stream,
    start: float,
    timeout_s: float,
    on_size: Callable[[int], None],
    on_tick: Callable[[], None],
) -> str:
    """Tee the child's outputs until it ends, times out or is interrupted; then end its group if needed."""
    assert child.stdout is not None and child.stderr is not None
    pumps = [
        threading.Thread(target=out.pump, args=(child.stdout, _row_sizes(on_size)), daemon=True),
        threading.Thread(target=err.pump, args=(child.stderr, None), daemon=True),
    ]
    for pump in pumps:
        pump.start()
    status = _wait(child, start, timeout_s, on_tick)
    if status != "ok":
        _end_group(child)
    _drain(child, pumps)
    return status


def _row_sizes(on_size: Callable[[int], None]) -> Callable[[bytes], None]:
    def seen(raw: bytes) -> None:
        match = ROW_RE.match(raw)
        if match:
            on_size(int(match[1]))

    return seen


def _wait(child: subprocess.Popen[bytes], start: float, timeout_s: float, on_tick: Callable[[], None]) -> str:
    while interrupts.requested() is None:
        try:
            child.wait(timeout=POLL_S)
            return "ok"
        except subprocess.TimeoutExpired:
            on_tick()
            if time.monotonic() - start > timeout_s:
                return "timed_out"
    return "interrupted"


def _end_group(child: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the child's process group, SIGKILL to what is left after the grace period."""
    _signal_group(child, signal.SIGTERM)
    try:
        child.wait(timeout=KILL_GRACE_S)
    except subprocess.TimeoutExpired:
        pass
    _signal_group(child, signal.SIGKILL)
    child.wait()


def _signal_group(child: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    try:
        os.killpg(child.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _drain(child: subprocess.Popen[bytes], pumps: list[threading.Thread]) -> None:
    """Wait for the outputs to close; a leftover grandchild holding a pipe open is ended with its group.

    One that left the group (a daemon that made a session of its own) could hold a pipe for ever: after
    the SIGKILL the wait is bounded too, and its pump, a daemon thread, is left to end with ncclscope.
    """
    for pump in pumps:
        pump.join(timeout=KILL_GRACE_S)
    if any(p.is_alive() for p in pumps):
        _signal_group(child, signal.SIGKILL)
        for pump in pumps:
            pump.join(timeout=KILL_GRACE_S)


def nccl_log_tail(run_dir: Path, names: list[str]) -> list[Evidence]:
    """The last lines of the NCCL logs a collective's processes wrote."""
    evidence: list[Evidence] = []
    for name in names[:NCCL_TAIL_FILES]:
        tail: deque[tuple[int, str]] = deque(maxlen=NCCL_TAIL_LINES)
        try:
            with open(run_dir / name, encoding="utf-8", errors="replace") as handle:
                for number, line in enumerate(handle, 1):
                    tail.append((number, line.rstrip("\r\n")))
        except OSError:
            continue
        evidence += [Evidence(source=name, line=n, text=text) for n, text in tail if text.strip()]
    return evidence
