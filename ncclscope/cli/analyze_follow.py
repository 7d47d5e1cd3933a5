"""`analyze --follow`: read a log while the job writes it, like `tail -f`, and say what is wrong as soon
as it shows.

The input (a growing file, or stdin spooled to a private temporary file: growing.FollowedInput, which
the TUI's --follow reads through too) is analysed again from its start whenever new whole lines have
arrived and the last analysis is old enough (growing.analysis_due: at most one third of the time goes
to analysing, so a fast writer is read in larger steps); each analysis is exactly what
`analyze` would say of the lines so far. A finding is printed once, the first time it appears (its
identity: code and first evidence line). Findings that judge what is *missing* (a rank that has not
completed init, evidence not seen yet, the peak of a table that is still growing) would be false
alarms while the job runs: they wait for the end of the input. A running summary goes to stderr.

When no line has arrived for `idle` seconds while a communicator's init is incomplete or collectives
are under way (COLL lines, watchdog lines), the job looks hung: it says so once per quiet spell, with
what each communicator's ranks reached (progress.waiting_report). The end: EOF on
stdin, or Ctrl-C / SIGTERM (inputs/interrupts.py); then the remaining findings and the exit status of
`analyze` (128 + signal after a signal).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from rich.console import Console

from ncclscope.case.assemble import assemble
from ncclscope.case.hang_progress import JUDGED_AT_END, waiting_report
from ncclscope.common.exit_status import EXIT_UNUSABLE, FailOn, findings_exit
from ncclscope.diagnose.engine import analyze
from ncclscope.inputs import interrupts
from ncclscope.inputs.growing import FollowedInput, analysis_due
from ncclscope.inputs.opening import InputFile, is_pipe
from ncclscope.model import Analysis, Case
from ncclscope.parse.one_input import parse_input
from ncclscope.parse.workers import gc_paused
from ncclscope.render.findings import headline, print_finding

POLL_SECONDS = 0.25  # how often a quiet input is looked at again


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
    if target == "-" or is_pipe(target):
        workdir = Path(tempfile.mkdtemp(prefix="ncclscope-follow-"))  # mode 0700: the log stays private
        source = FollowedInput.stdin(workdir) if target == "-" else FollowedInput.pipe(target, workdir)
    else:
        if not Path(target).is_file():
            err.print(f"ncclscope: {target}: not a file that can be followed", markup=False)
            return EXIT_UNUSABLE
        source = FollowedInput(target, target)
    printed: set[tuple] = set()
    analysis: Analysis | None = None
    hung_said = False
    pending = False  # whole lines arrived since the last analysis
    analysed_upto = 0
    last_run = 0.0
    cost = 0.0
    try:
        with interrupts.stop_signals():
            growth = source.poll()
            while interrupts.requested() is None and not growth.ended:
                if growth.restarted or growth.complete != analysed_upto:
                    pending, hung_said = True, False
                now = time.monotonic()
                if pending and analysis_due(now - last_run, cost):
                    pending, analysed_upto = False, growth.complete
                    started = time.monotonic()
                    analysis = _analyze(source, growth.complete, select_codes, ignore_codes)
                    cost, last_run = time.monotonic() - started, time.monotonic()
                    _print_new(analysis, printed, console, final=False)
                    _summary(analysis, source.display, err)
                if analysis is not None and not hung_said and now - growth.last_data >= idle:
                    hung_said = _say_if_hung(analysis, now - growth.last_data, err)
                _wait()
                growth = source.poll()
        # the end: everything read, judged once more, and what waited for the end
        stopped = interrupts.requested()
        interrupts.reset()  # the last reading below must not stop at once
        growth = source.poll()
        analysis = _analyze(source, growth.seen, select_codes, ignore_codes) if growth.seen else None
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
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)


def _wait() -> None:
    """POLL_SECONDS, or less when a stop signal comes."""
    try:
        with interrupts.waiting_for_input():
            time.sleep(POLL_SECONDS)
    except interrupts.ReadingStopped:
        pass


def _analyze(
    source: FollowedInput, upto: int, select_codes: list[str] | None, ignore_codes: list[str] | None
) -> Analysis:
    """What `analyze` says of the first `upto` bytes."""
    item = InputFile(source.path, source.display, span=(0, upto))
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


def _summary(analysis: Analysis, display: str, err: Console) -> None:
    case = analysis.case
    ranks = sum(len(c.ranks) for c in case.communicators)
    done = sum(1 for c in case.communicators for r in c.ranks if r.init_complete)
    err.print(
        f"ncclscope: following {display}: {_lines(case)} lines, {len(case.hosts)} hosts, "
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
