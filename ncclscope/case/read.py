"""Reading all inputs of one command into a Case: expand paths, parse in parallel, assemble.

Exit status contract (shared by every command that reads inputs):
  0  everything named was read
  2  some input was unusable (missing, unreadable, binary, empty, damaged .gz) or nothing in the
     inputs was recognised; the rest is still parsed and reported
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from ncclscope.case.assemble import Assembly
from ncclscope.common.exit_status import EXIT_FINDINGS, EXIT_OK, EXIT_UNUSABLE, FailOn, findings_exit
from ncclscope.inputs import interrupts
from ncclscope.inputs.opening import RUN_MANIFEST, InputFile, expand_inputs, run_manifest
from ncclscope.model import Case, RunRecord
from ncclscope.parse import workers
from ncclscope.parse.one_input import JoinedRanges, ParsedInput, parse_input
from ncclscope.parse.split import RangePart

if TYPE_CHECKING:
    from ncclscope.inputs.redact import Redactor

__all__ = [
    "EXIT_FINDINGS",
    "EXIT_OK",
    "EXIT_UNUSABLE",
    "FailOn",
    "ReadOutcome",
    "findings_exit",
    "read_case",
    "read_files",
]


@dataclass
class ReadOutcome:
    case: Case
    messages: list[str] = field(default_factory=list)  # one line per problem, naming the input
    stopped_by: int | None = None  # the signal (Ctrl-C, SIGTERM) that ended reading early
    unusable: bool = False  # an input could not be used, or nothing was recognised

    @property
    def exit_code(self) -> int:
        """128 + the signal after a stop (130 after Ctrl-C), else 2 when an input was unusable."""
        if self.stopped_by is not None:
            return interrupts.exit_status(self.stopped_by)
        return EXIT_UNUSABLE if self.unusable else EXIT_OK


def read_case(paths: list[str], jobs: int | None = None, kept_to_exit: bool = False) -> ReadOutcome:
    """Every input named by `paths` (files, directories, `-`, .gz, ncclscope bundles), read into a Case.
    `kept_to_exit`: see read_files."""
    files, problems = expand_inputs(paths)
    return read_files(files, problems, paths, jobs, kept_to_exit=kept_to_exit)


def read_case_redacted(
    paths: list[str], jobs: int | None = None, redactor: Redactor | None = None
) -> tuple[ReadOutcome, Redactor]:
    """`read_case` on redacted copies of the inputs: (ReadOutcome, Redactor).

    Everything in the outcome (case, source names, messages) is built from redacted text, so the
    analysis and every report drawn from it carry pseudonyms only.
    """
    from ncclscope.inputs.redact import redact_inputs  # only with --redact

    files, problems = expand_inputs(paths)
    with tempfile.TemporaryDirectory(prefix="ncclscope-redact-") as tmp:
        copies, redactor = redact_inputs(files, Path(tmp), redactor)
        outcome = read_files(copies, problems, paths, jobs)
    outcome.messages = [redactor.redact_line(m) for m in outcome.messages]
    if outcome.case.run is not None:  # read from the original run directory's manifest
        if outcome.case.run.host:
            redactor.add_host(outcome.case.run.host)
        data = redactor.redact_json_data(outcome.case.run.model_dump(mode="json"))
        outcome.case.run = type(outcome.case.run).model_validate(data)
    return outcome, redactor


def _attach_run(outcome: ReadOutcome, paths: list[str]) -> None:
    """The first run directory among `paths` fills Case.run; its evidence paths become the inputs' names."""
    for raw in paths:
        manifest = run_manifest(Path(raw)) if raw != "-" else None
        if manifest is None:
            continue
        try:
            record = RunRecord.model_validate(manifest)
        except ValidationError as exc:
            problem = f"run manifest not understood ({exc.error_count()} problems)"
            outcome.messages.append(f"{Path(raw) / RUN_MANIFEST}: warning: {problem}")
            continue
        for step in record.steps:
            for evidence in step.last_lines:
                evidence.source = str(Path(raw) / evidence.source)
        outcome.case.run = record
        return


def read_files(
    files: list[InputFile],
    problems: list[str],
    paths: list[str],
    jobs: int | None = None,
    progress: Callable[[int], None] | None = None,
    kept_to_exit: bool = False,
) -> ReadOutcome:
    """Inputs already expanded (`problems`: paths that could not be used; `paths`: as named).
    `progress` is called with the size of each block read; giving it reads the inputs in this process.
    `kept_to_exit`: the caller keeps what was read until the process ends (a command that runs once),
    so it is frozen out of the collector's reach (workers.gc_paused) instead of walked once more."""
    with workers.gc_paused(frozen_after=kept_to_exit):
        case, unread = _read_all(files, 1 if progress else jobs, progress)
    messages = list(problems)
    unusable = bool(problems)
    for source in case.sources:
        if source.usable:
            messages.extend(f"{source.path}: warning: {p}" for p in source.problems)
        else:
            unusable = True
            messages.extend(f"{source.path}: {problem}" for problem in source.problems)
    if files and not any(source.kinds for source in case.sources) and not unusable:
        unusable = True
        messages.append(f"{', '.join(paths)}: no NCCL log, topology matrix or nccl-tests output found")
    stopped_by = interrupts.requested()
    outcome = ReadOutcome(case, messages, stopped_by, unusable)
    _attach_run(outcome, paths)
    if stopped_by is not None:
        name = interrupts.signal_name(stopped_by)
        for source in case.sources:
            if source.stopped:
                outcome.messages.append(
                    f"{source.path}: reading stopped by {name} after {source.lines} lines; "
                    "the results cover what was read"
                )
        outcome.messages.extend(f"{display}: not read (stopped by {name})" for display in unread)
        interrupts.reset()
    return outcome


class _InOrder:
    """The inputs' assembly, input after input. When a file read in ranges must be read whole after
    all (split.py), the records of its first ranges were already walked: the assembly starts again,
    reading the inputs before it once more (rare: a large file of mostly other programs' text)."""

    def __init__(self) -> None:
        self.assembly = Assembly()
        self._items: list[InputFile] = []

    def add(self, item: InputFile, parsed: ParsedInput) -> None:
        self.assembly.add(parsed)
        self._items.append(item)

    def start_again(self) -> None:
        """Forgets the records given for the input not yet added."""
        self.assembly = Assembly()
        for item in self._items:
            self.assembly.add(parse_input(item))


def _read_all(
    files: list[InputFile], jobs: int | None, progress: Callable[[int], None] | None
) -> tuple[Case, list[str]]:
    """The inputs parsed and assembled, and the names of those a Ctrl-C or SIGTERM left unread
    (inputs/interrupts.py)."""
    count = workers.count(files, jobs)
    unread: list[str] = []
    inputs = _InOrder()
    with interrupts.stop_signals():
        if count <= 1:
            workers.discard_early()  # started for a reading that turned out otherwise (one process)
            for item in files:
                if interrupts.requested() is not None:
                    unread.append(item.display)
                else:
                    walk = partial(inputs.assembly.give_records, item.display)  # as each block is read
                    inputs.add(item, parse_input(item, progress, walk))
            return inputs.assembly.finish(), unread
        tasks = workers.tasks(files, count)
        results = _pool_results(tasks, count)
        try:
            at = 0
            for item in files:
                end = at + 1
                if tasks[at].span is None:  # read whole by one worker
                    whole = next(results)
                    if whole is None:
                        unread.append(item.display)
                    else:
                        inputs.add(item, whole)  # type: ignore[arg-type]
                else:
                    while end < len(tasks) and _continues(tasks[end]):
                        end += 1
                    if not _join_ranges(item, results, end - at, inputs):
                        unread.append(item.display)
                at = end
        finally:
            results.close()
    return inputs.assembly.finish(), unread


def _pool_results(tasks: list[InputFile], count: int) -> Generator[ParsedInput | RangePart | None, None, None]:
    """Every task in a worker process, its result given in task order as soon as it is there; after a
    stop request, the tasks finished by then (None for the rest)."""
    pool = workers.adopt(tasks, count) or workers.start(tasks, count)
    futures = pool.futures
    finished = False
    try:
        while futures:
            future = pool.take()  # the result is the reader's to keep or to let go
            try:
                with interrupts.waiting_for_input():  # a stop request ends the wait at once
                    result = future.result()
            except interrupts.ReadingStopped:
                kept = [
                    f.result() if f.done() and not f.cancelled() and f.exception() is None else None
                    for f in [future, *futures]
                ] + [None] * len(pool.waiting)  # never given out
                workers.stop(pool)
                finished = True
                yield from kept
                return
            yield result
        finished = True
    finally:
        if finished:
            pool.executor.shutdown(wait=True)
        else:  # an error, or the reader gave up: no worker is waited for
            workers.stop(pool)


def _continues(task: InputFile) -> bool:
    """A range after the first of its file."""
    return task.span is not None and task.span[0] != 0


def _join_ranges(
    item: InputFile, results: Iterator[ParsedInput | RangePart | None], count: int, inputs: _InOrder
) -> bool:
    """The next `count` results, the ranges of `item`, joined and assembled as they come: the records of
    the first ranges are walked while workers still parse the last. False when none was read (a stop)."""
    joined = JoinedRanges(item)
    taken = 0
    missing = read_whole = False
    for _ in range(count):
        part = next(results)
        if missing or read_whole:
            continue
        if not isinstance(part, RangePart):  # stopped: the ranges read before the first one missing
            missing = True
        elif part.too_much_other:
            read_whole = True  # mostly text of other programs: read it whole (split.py)
        else:
            inputs.assembly.give_records(item.display, joined.add(part))
            taken += 1
            read_whole = joined.unsure
    if read_whole:
        inputs.start_again()
        inputs.add(item, parse_input(item))
        return True
    if not taken:
        return False
    if missing:
        joined.stopped_by(interrupts.requested())
    inputs.add(item, joined.finish())
    return True
