"""`analyze --follow`: read a log while the job writes it, like `tail -f`, and say what is wrong as soon
as it shows.

The input (a growing file, or stdin spooled to a private temporary file) is analysed again from its
start whenever new whole lines have arrived and the last analysis is old enough (at most one third of
the time goes to analysing, so a fast writer is read in larger steps); each analysis is exactly what
`analyze` would say of the lines so far. A finding is printed once, the first time it appears (its
identity: code and first evidence line). Findings that judge what is *missing* (a rank that has not
completed init, evidence not seen yet, the peak of a table that is still growing) would be false
alarms while the job runs: they wait for the end of the input. A running summary goes to stderr.

When no line has arrived for `idle` seconds while a communicator's init is incomplete or collectives
are under way (COLL lines, watchdog lines), the job looks hung: it says so once per quiet spell, with
what each communicator's ranks reached (progress.waiting_report). The end: EOF on
stdin, or Ctrl-C / SIGTERM (interrupts.py); then the remaining findings and the exit status of
`analyze` (128 + signal after a signal).
"""

from __future__ import annotations

import os
import select
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from rich.console import Console

from ncclscope import interrupts
from ncclscope.assemble import assemble
from ncclscope.engine import analyze
from ncclscope.exit_status import EXIT_UNUSABLE, FailOn, findings_exit
from ncclscope.model import Analysis, Case
from ncclscope.parse.source import parse_input
from ncclscope.progress import JUDGED_AT_END, waiting_report
from ncclscope.reading import gc_paused
from ncclscope.render.findings import headline, print_finding
from ncclscope.sources import InputFile

POLL_SECONDS = 0.25  # how often a quiet input is looked at again
MIN_INTERVAL = 0.5  # seconds between analyses, at least
ANALYSIS_SHARE = 3  # wait this many times the last analysis's duration before the next
READ_BYTES = 1024 * 1024


@dataclass
class _Input:
    """The bytes seen so far: the file itself, or stdin's spool."""

    display: str
    path: Path
    spool: BinaryIO | None = None  # stdin's copy, open for writing; None: a file followed in place
    complete: int = 0  # bytes up to the last newline: what an analysis reads
    seen: int = 0
    ended: bool = False  # EOF on stdin
    last_data: float = field(default_factory=time.monotonic)

    def take(self, data: bytes) -> bool:
        """Count bytes that arrived; True when they end at least one more whole line."""
        before = self.complete
        newline = data.rfind(b"\n")
        if newline >= 0:
            self.complete = self.seen + newline + 1
        self.seen += len(data)
        self.last_data = time.monotonic()
        return self.complete > before


def follow(
    target: str,
    console: Console,
    err: Console,
    idle: float,
    fail_on: FailOn,
    select_codes: list[str] | None,
    ignore_codes: list[str] | None,
) -> int:
    """Follow `target` (a path or `-`) to its end or a stop signal; the exit status of `analyze`."""
    workdir = None
    if target == "-":
        workdir = Path(tempfile.mkdtemp(prefix="ncclscope-follow-"))  # mode 0700: the log stays private
        spooled = workdir / "stdin.log"
        source = _Input("-", spooled, spool=open(spooled, "wb"))  # noqa: SIM115 - closed below
    else:
        path = Path(target)
        if not path.is_file():
            err.print(f"ncclscope: {target}: not a file that can be followed", markup=False)
            return EXIT_UNUSABLE
        source = _Input(target, path)
    printed: set[tuple] = set()
    analysis: Analysis | None = None
    hung_said = False
    pending = False  # whole lines arrived since the last analysis
    last_run = 0.0
    cost = 0.0
    try:
        with interrupts.stop_signals():
            while interrupts.requested() is None and not source.ended:
                if _read_more(source):
                    pending, hung_said = True, False
                now = time.monotonic()
                due = now - last_run >= max(MIN_INTERVAL, ANALYSIS_SHARE * cost)
                if pending and due:
                    pending = False
                    started = time.monotonic()
                    analysis = _analyze(source, select_codes, ignore_codes)
                    cost, last_run = time.monotonic() - started, time.monotonic()
                    _print_new(analysis, printed, console, final=False)
                    _summary(analysis, source, err)
                if analysis is not None and not hung_said and now - source.last_data >= idle:
                    hung_said = _say_if_hung(analysis, now - source.last_data, err)
        # the end: everything read, judged once more, and what waited for the end
        stopped = interrupts.requested()
        interrupts.reset()  # the last reading below must not stop at once
        analysis = _analyze(source, select_codes, ignore_codes, final=True) if source.seen else None
        if analysis is None:
            err.print(f"ncclscope: {source.display}: nothing arrived", markup=False)
            return interrupts.exit_status(stopped) if stopped is not None else EXIT_UNUSABLE
        _print_new(analysis, printed, console, final=True)
        console.print(f"[bold]ncclscope[/]: {headline(analysis)} ({_lines(analysis.case)} lines read)")
        if stopped is not None:
            err.print(
                f"ncclscope: {source.display}: stopped by {interrupts.signal_name(stopped)}; "
                "the findings cover what was read",
                markup=False,
            )
            return interrupts.exit_status(stopped)
        return findings_exit(analysis.summary, fail_on)
    finally:
        interrupts.reset()
        if source.spool is not None:
            source.spool.close()
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)


def _read_more(source: _Input) -> bool:
    """Take what has arrived (waiting at most POLL_SECONDS); True when new whole lines are there
    (a file truncated or replaced is read again from its start)."""
    if source.spool is not None:
        try:
            with interrupts.waiting_for_input():
                ready, _, _ = select.select([sys.stdin.buffer], [], [], POLL_SECONDS)
                data = os.read(sys.stdin.buffer.fileno(), READ_BYTES) if ready else None
        except interrupts.ReadingStopped:
            return False
        if data is None:
            return False
        if not data:  # EOF: a last line without its newline is still a line
            source.ended = True
            source.complete = source.seen
            return True
        source.spool.write(data)
        source.spool.flush()
        return source.take(data)
    try:
        size = source.path.stat().st_size
    except OSError:
        size = source.seen
    if size < source.seen:  # truncated or replaced (log rotation)
        source.seen = source.complete = 0
    if size == source.seen:
        try:
            with interrupts.waiting_for_input():
                time.sleep(POLL_SECONDS)
        except interrupts.ReadingStopped:
            pass
        return False
    with open(source.path, "rb") as handle:
        handle.seek(source.seen)
        return source.take(handle.read(size - source.seen))


def _analyze(
    source: _Input, select_codes: list[str] | None, ignore_codes: list[str] | None, final: bool = False
) -> Analysis:
    upto = source.seen if final else source.complete
    item = InputFile(str(source.path), source.display, span=(0, upto))
    with gc_paused():
        case = assemble([parse_input(item)])
    return analyze(case, select_codes, ignore_codes)


def _print_new(analysis: Analysis, printed: set[tuple], console: Console, final: bool) -> None:
    for finding in analysis.findings:
        if not final and finding.code in JUDGED_AT_END:
            continue
        key = finding.identity
        if key in printed:
            continue
        printed.add(key)
        print_finding(finding, console)
        console.print()
        console.file.flush()


def _lines(case: Case) -> int:
    return sum(source.lines for source in case.sources)


def _summary(analysis: Analysis, source: _Input, err: Console) -> None:
    case = analysis.case
    ranks = sum(len(c.ranks) for c in case.communicators)
    done = sum(1 for c in case.communicators for r in c.ranks if r.init_complete)
    err.print(
        f"ncclscope: following {source.display}: {_lines(case)} lines, {len(case.hosts)} hosts, "
        f"{len(case.communicators)} communicators ({done}/{ranks} ranks through init); {headline(analysis)}",
        markup=False,
    )


def _say_if_hung(analysis: Analysis, quiet: float, err: Console) -> bool:
    """When init is incomplete or collectives are under way and the input has gone quiet: say that the job
    looks hung, and where each communicator and group stands."""
    waiting = waiting_report(analysis.case)
    if not waiting:
        return False
    err.print(f"ncclscope: the job looks hung: no new line for {quiet:.0f} s, and", markup=False)
    for line in waiting[:10]:
        err.print(f"  {line}", markup=False)
    if len(waiting) > 10:
        err.print(f"  ... and {len(waiting) - 10} more", markup=False)
    return True
