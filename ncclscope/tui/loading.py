"""The TUI's inputs: made readable line by line (stdin and .gz spooled to plain files), then parsed and
analysed in a child process so that the interface stays responsive while a large log is read.

Parsing runs in a separate process, not a thread: the parser is Python and holds the GIL, which would freeze
the interface for the whole parse. The child is started with `spawn` (a fresh interpreter) because forking a
process that runs Textual's threads can copy a lock that some thread holds and deadlock the child.
"""

from __future__ import annotations

import atexit
import gzip
import multiprocessing
import os
import shutil
import sys
import tempfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from multiprocessing import resource_tracker
from multiprocessing.connection import Connection
from pathlib import Path
from typing import BinaryIO

from ncclscope.inputs import interrupts
from ncclscope.inputs.opening import InputFile, expand_inputs, read_head

COPY_BYTES = 1024 * 1024
POLL_SECONDS = 0.2


@dataclass
class PreparedInputs:
    """What the TUI reads: the inputs for the parser, and a plain file for each one's raw lines."""

    paths: list[str]  # as the user named them
    files: list[InputFile]  # what the parser reads (stdin replaced by its spooled copy)
    problems: list[str] = field(default_factory=list)  # paths that cannot be used, as `analyze` words them
    raw: dict[str, str] = field(default_factory=dict)  # Evidence.source name -> plain file with the same lines

    @property
    def total_bytes(self) -> int:
        """Bytes of text the parser will read (decompressed sizes), for the progress bar."""
        return sum(_size(path) for path in self.raw.values())

    @property
    def names(self) -> str:
        """The inputs' names for the title bar."""
        return ", ".join("stdin" if p == "-" else p for p in self.paths)


def prepare_inputs(paths: list[str], stdin: BinaryIO | None = None) -> PreparedInputs:
    """Expand `paths` (files, directories, bundles, `-`); spool stdin and pipes and decompress .gz inputs to
    temporary files.

    stdin and pipes are read to their end here, before the interface starts (the raw log needs random access
    to its lines)."""
    expanded, problems = expand_inputs(paths)
    workdir = Path(tempfile.mkdtemp(prefix="ncclscope-tui-"))
    atexit.register(shutil.rmtree, workdir, True)
    prepared = PreparedInputs(paths, [], problems)
    for index, item in enumerate(expanded):
        if item.is_stream:  # stdin or a pipe (`<(command)`): read once, here
            spooled = workdir / ("stdin.log" if item.is_stdin else f"{index}-{Path(item.path).name}.log")
            if item.is_stdin:
                spool(stdin if stdin is not None else sys.stdin.buffer, spooled)
            else:
                with open(item.path, "rb") as stream:
                    spool(stream, spooled)
            item = InputFile(str(spooled), item.display)
            prepared.raw[item.display] = item.path
        elif item.path.endswith(".gz"):
            # The parser reads the .gz itself (its damage messages stay those of `analyze`); the raw log
            # reads the decompressed copy, whose line numbers are the parser's.
            plain = workdir / f"{index}-{Path(item.path).name[:-3]}"
            decompress(item.path, plain)
            prepared.raw[item.display] = str(plain)
        else:
            prepared.raw[item.display] = item.path
        prepared.files.append(item)
    return prepared


def spool(stream: BinaryIO, target: Path) -> int:
    """Copy a stream (a pipe) to `target` in blocks; the number of bytes copied. Ctrl-C or SIGTERM
    (a hung job's pipe never ends) stops the copy and keeps what came (inputs/interrupts.py)."""
    copied = 0
    read = getattr(stream, "read1", stream.read)
    with open(target, "wb") as out, interrupts.stop_signals():
        while interrupts.requested() is None:
            try:
                with interrupts.waiting_for_input():
                    block = read(COPY_BYTES)
            except interrupts.ReadingStopped:
                break
            if not block:
                break
            out.write(block)
            copied += len(block)
        stopped = interrupts.requested()
    if stopped is not None:
        interrupts.reset()
        print(
            f"ncclscope: -: reading stopped by {interrupts.signal_name(stopped)} after {copied} bytes; "
            "exploring what was read",
            file=sys.stderr,
        )
    return copied


def decompress(path: str, target: Path) -> None:
    """Decompress a .gz file; a damaged one keeps what came before the damage (the parser reports it)."""
    with open(target, "wb") as out:
        try:
            with gzip.open(path, "rb") as source:
                while block := source.read(COPY_BYTES):
                    out.write(block)
        except (OSError, EOFError, zlib.error):
            pass


def unusable_messages(prepared: PreparedInputs) -> tuple[list[str], bool]:
    """Messages about inputs a quick look shows to be unusable (empty, binary, unreadable), worded as `analyze`
    words them, and whether nothing usable is left. Only those inputs are read in full, so this stays quick."""
    messages = list(prepared.problems)
    suspects = [item for item in prepared.files if _looks_unusable(item)]
    if suspects:
        from ncclscope.case.read import read_files

        outcome = read_files(suspects, [], [item.display for item in suspects], jobs=1)
        messages.extend(outcome.messages)
    return messages, len(suspects) == len(prepared.files)


def _looks_unusable(item: InputFile) -> bool:
    head = read_head(item)
    return not head or b"\x00" in head


def reattach_terminal() -> None:
    """Make the terminal the keyboard again after stdin was a pipe: Textual reads keys from file descriptor 0."""
    tty = os.open("/dev/tty", os.O_RDONLY)
    os.dup2(tty, 0)
    os.close(tty)


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


@dataclass
class Progress:
    bytes_read: int


@dataclass
class Done:
    analysis_json: str
    messages: list[str]


@dataclass
class Failed:
    error: str


ParseEvent = Progress | Done | Failed


class BackgroundParse:
    """Reads and analyses the inputs in a child process, reporting progress as it goes."""

    def __init__(self, prepared: PreparedInputs) -> None:
        """Create it before Textual runs: `spawn` hands the resource tracker sys.stderr's file descriptor, and
        Textual replaces sys.stderr by an object without one while the app runs."""
        resource_tracker.ensure_running()
        self.prepared = prepared
        context = multiprocessing.get_context("spawn")
        self._receiver, sender = context.Pipe(duplex=False)
        self._process = context.Process(
            target=_parse_in_child,
            args=(prepared.files, prepared.problems, prepared.paths, sender),
            name="ncclscope-parse",
            daemon=True,
        )
        self._sender = sender

    @property
    def pid(self) -> int | None:
        return self._process.pid

    def start(self) -> None:
        self._process.start()
        self._sender.close()  # the child holds the only sending end: its exit ends our reads

    def events(self, cancelled: Callable[[], bool] = lambda: False) -> Iterator[ParseEvent]:
        """Progress events until the result (Done) or a failure; blocks, so call it from a thread.
        Stops quietly once `cancelled()` is true (checked a few times a second)."""
        while not cancelled():
            try:
                if not self._receiver.poll(POLL_SECONDS):
                    continue
                event = self._receiver.recv()
            except (EOFError, OSError):
                code = self._process.exitcode
                yield Failed(f"the parsing process ended without a result (exit status {code})")
                return
            yield event
            if not isinstance(event, Progress):
                self._process.join()
                return

    def stop(self) -> None:
        """End the child if it still runs (the app quits while parsing)."""
        if self._process.is_alive():
            self._process.terminate()
            self._process.join(timeout=5)


def _parse_in_child(files: list[InputFile], problems: list[str], paths: list[str], sender: Connection) -> None:
    """The child process: read, analyse, send the Analysis as JSON (cheap to pickle, validated on arrival)."""
    from ncclscope.case.read import read_files
    from ncclscope.diagnose.engine import analyze

    try:
        outcome = read_files(files, problems, paths, jobs=1, progress=lambda size: sender.send(Progress(size)))
        sender.send(Done(analyze(outcome.case).model_dump_json(), outcome.messages))
    except Exception as exc:  # reported inside the interface, in one line
        sender.send(Failed(f"{type(exc).__name__}: {exc}"))
    finally:
        sender.close()
