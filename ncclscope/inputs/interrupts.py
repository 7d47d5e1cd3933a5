"""Ctrl-C and SIGTERM while reading: stop reading, keep what was read, and say so.

A hung job's log arrives through a pipe that never closes (`torchrun ... 2>&1 | ncclscope analyze -`);
the user ends it with Ctrl-C. Python's default turns that signal into KeyboardInterrupt wherever the
program happens to be, which would throw away everything parsed so far. While `stop_signals()` is
active, SIGINT and SIGTERM only record a request: reading stops at the next block boundary, or at
once when the reader is waiting for input (`waiting_for_input()`), and the command goes on to analyze
what it has. A second signal while the request is pending interrupts as usual.

`ncclscope run` uses the same request while a collective runs (runner/execute.py): its wait loop reads
it and ends the collective's process group.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class ReadingStopped(Exception):
    """Raised out of a blocking read when a stop was requested."""


class _State:
    active = False  # stop_signals() is installed
    requested: int | None = None  # the signal that asked reading to stop
    waiting = False  # inside a blocking read


_state = _State()


def requested() -> int | None:
    """The signal that asked reading to stop, or None."""
    return _state.requested


def exit_status(signum: int) -> int:
    """The shell's convention: 128 + the signal (130 after Ctrl-C, 143 after SIGTERM)."""
    return 128 + signum


def signal_name(signum: int) -> str:
    return {signal.SIGINT: "Ctrl-C (SIGINT)", signal.SIGTERM: "SIGTERM"}.get(signum, f"signal {signum}")  # type: ignore[call-overload]


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    if _state.requested is not None:  # asked twice: stop now
        raise KeyboardInterrupt
    _state.requested = signum
    if _state.waiting:
        raise ReadingStopped


@contextmanager
def stop_signals() -> Iterator[None]:
    """SIGINT and SIGTERM request a stop instead of interrupting (main thread only; elsewhere a no-op)."""
    if _state.active or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    _state.active, _state.requested = True, None
    try:
        for sig in STOP_SIGNALS:
            signal.signal(sig, _on_signal)
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _state.active = False


@contextmanager
def waiting_for_input() -> Iterator[None]:
    """Around a read that may block (a pipe that stays open): a stop request ends it at once."""
    if not _state.active:
        yield
        return
    if _state.requested is not None:
        raise ReadingStopped
    _state.waiting = True
    try:
        yield
    finally:
        _state.waiting = False


def reset() -> None:
    """Forget a handled request (tests; a command that reads again)."""
    _state.requested = None
