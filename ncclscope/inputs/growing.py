"""An input that is still being written: a job's log file that grows, or its output piped in.

`FollowedInput` watches it: a file's size (truncated, replaced or rewritten in place: read again from its
start), or stdin copied by a thread into a private spool file, so that the bytes can be read again from
the start by every analysis. Only whole lines count until the input ends. `analyze --follow` (cli/analyze_follow.py)
and `tui --follow` (tui/following.py) both read through it.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

READ_BYTES = 1024 * 1024
HEAD_BYTES = 4096  # a file whose first bytes change was rewritten, not appended to
MIN_INTERVAL = 0.5  # seconds between two analyses, at least
ANALYSIS_SHARE = 3  # and this many times the last analysis's duration: a fast writer is read in larger steps


def analysis_due(since_last: float, cost: float) -> bool:
    """Whether the input may be analysed again, `since_last` seconds after the last analysis began or
    ended and `cost` seconds having gone into it: at most a third of the time goes to analysing."""
    return since_last >= max(MIN_INTERVAL, ANALYSIS_SHARE * cost)


@dataclass(frozen=True)
class Growth:
    """Where the input stands."""

    complete: int  # bytes up to the last newline: what is shown and analysed
    seen: int  # bytes arrived
    ended: bool  # stdin reached its end (a file never ends: it may grow again)
    restarted: bool  # the file was truncated or replaced since the last look: read it again from its start
    last_data: float  # time.monotonic() of the last arrival


class FollowedInput:
    """A file that grows, or a pipe spooled by a thread (`stdin_fd`: stdin, duplicated before the terminal
    replaced file descriptor 0, or a pipe given by name, opened)."""

    def __init__(self, display: str, path: str, stdin_fd: int | None = None) -> None:
        self.display = display
        self.path = path
        self._fd = stdin_fd
        self._seen = 0
        self._complete = 0
        self._ended = False
        self._restarted = False
        self._last_data = time.monotonic()
        self._lock = threading.Lock()
        self._file_id: tuple[int, int] | None = None
        self._head = b""  # the file's first bytes when last looked at
        if stdin_fd is not None:
            threading.Thread(target=self._copy_stdin, name="ncclscope-stdin", daemon=True).start()

    @classmethod
    def stdin(cls, workdir: Path) -> FollowedInput:
        """Follow the pipe on file descriptor 0, copied to a spool file in `workdir` (mode 0700)."""
        spooled = workdir / "stdin.log"
        spooled.touch()
        return cls("-", str(spooled), os.dup(0))

    @classmethod
    def pipe(cls, target: str, workdir: Path) -> FollowedInput:
        """Follow a pipe given by name (`<(command)`, a named pipe) as stdin is followed. Opening a named
        pipe waits for its writer."""
        spooled = workdir / "pipe.log"
        spooled.touch()
        return cls(target, str(spooled), os.open(target, os.O_RDONLY))

    def _copy_stdin(self) -> None:
        assert self._fd is not None
        with open(self.path, "ab") as out:
            while True:
                try:
                    data = os.read(self._fd, READ_BYTES)
                except OSError:
                    data = b""
                if data:
                    out.write(data)
                    out.flush()  # before the counters: whoever reads up to them finds the bytes
                newline = data.rfind(b"\n")
                with self._lock:
                    if not data:  # the end: a last line without its newline is still a line
                        self._ended = True
                        self._complete = self._seen
                        self._last_data = time.monotonic()
                        break
                    if newline >= 0:
                        self._complete = self._seen + newline + 1
                    self._seen += len(data)
                    self._last_data = time.monotonic()
        os.close(self._fd)

    def poll(self) -> Growth:
        if self._fd is None:
            self._look_at_file()
        with self._lock:
            growth = Growth(self._complete, self._seen, self._ended, self._restarted, self._last_data)
            self._restarted = False
        return growth

    def _look_at_file(self) -> None:
        try:
            stat = os.stat(self.path)
            with open(self.path, "rb") as handle:
                head = handle.read(HEAD_BYTES)
        except OSError:
            return  # moved away for a moment (rotation): look again later
        size = stat.st_size
        with self._lock:
            # replaced (a new inode), truncated, or rewritten in place (its first bytes differ): from the start
            known = self._head[: len(head)]
            if (stat.st_dev, stat.st_ino) != self._file_id or size < self._seen or head[: len(known)] != known:
                if self._file_id is not None:
                    self._seen = self._complete = 0
                    self._restarted = True
                self._file_id = (stat.st_dev, stat.st_ino)
            self._head = head
            if size == self._seen:
                return
            end = last_line_end(self.path, self._complete, size)
            self._seen = size
            self._complete = end if end is not None else self._complete
            self._last_data = time.monotonic()


def last_line_end(path: str, start: int, end: int) -> int | None:
    """The offset just past the last newline in bytes [start, end) of `path`, None when there is none; read
    backwards from the end a block at a time (a writer appends, so the newline is near the end)."""
    with open(path, "rb") as handle:
        stop = end
        while stop > start:
            begin = max(start, stop - READ_BYTES)
            handle.seek(begin)
            block = handle.read(stop - begin)
            found = block.rfind(b"\n")
            if found >= 0:
                return begin + found + 1
            stop = begin
    return None
