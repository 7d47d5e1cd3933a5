"""Reading all inputs of one command into a Case: expand paths, parse in parallel, assemble.

Exit status contract (shared by every command that reads inputs):
  0  everything named was read
  2  some input was unusable (missing, unreadable, binary, empty, damaged .gz) or nothing in the
     inputs was recognised; the rest is still parsed and reported
"""

from __future__ import annotations

import gc
import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from ncclscope import interrupts
from ncclscope.assemble import assemble
from ncclscope.exit_status import EXIT_FINDINGS, EXIT_OK, EXIT_UNUSABLE, FailOn, findings_exit
from ncclscope.model import Case, RunRecord
from ncclscope.parse import nccl_log, split
from ncclscope.parse.source import ParsedInput, join_ranges, parse_input, parse_range
from ncclscope.parse.split import RangePart, byte_ranges, can_split
from ncclscope.sources import RUN_MANIFEST, InputFile, expand_inputs, run_manifest

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


def read_case(paths: list[str], jobs: int | None = None) -> ReadOutcome:
    """Every input named by `paths` (files, directories, `-`, .gz, ncclscope bundles), read into a Case."""
    files, problems = expand_inputs(paths)
    return read_files(files, problems, paths, jobs)


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
) -> ReadOutcome:
    """Inputs already expanded (`problems`: paths that could not be used; `paths`: as named).
    `progress` is called with the size of each block read; giving it reads the inputs in this process."""
    with gc_paused():
        parsed, unread = _parse_all(files, 1 if progress else jobs, progress)
        case = assemble(parsed)
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


def _parse_all(
    files: list[InputFile], jobs: int | None, progress: Callable[[int], None] | None
) -> tuple[list[ParsedInput], list[str]]:
    """The inputs parsed, and the names of those a Ctrl-C or SIGTERM left unread (interrupts.py)."""
    workers = _workers(files, jobs)
    unread: list[str] = []
    results: list[ParsedInput] = []
    with interrupts.stop_signals():
        if workers <= 1:
            for item in files:
                if interrupts.requested() is not None:
                    unread.append(item.display)
                else:
                    results.append(parse_input(item, progress))
            return results, unread
        tasks = _tasks(files, workers)
        done = _run_pool(tasks, workers)
    for item in files:
        parts = []
        for task, result in zip(tasks, done, strict=True):
            if task.path == item.path:
                if result is None:  # stopped: the ranges read before the first one missing
                    break
                parts.append(result)
        if not parts:
            unread.append(item.display)
        elif len(parts) == 1 and isinstance(parts[0], ParsedInput):
            results.append(parts[0])
        else:
            if len(parts) < sum(task.path == item.path for task in tasks):
                parts[-1].stats.stopped_by = interrupts.requested()  # type: ignore[union-attr]
            results.append(join_ranges(item, parts))  # type: ignore[arg-type]
    return results, unread


def _run_pool(tasks: list[InputFile], workers: int) -> list[ParsedInput | RangePart | None]:
    """Every task in a worker process; after a stop request, the tasks finished by then (None for the rest)."""
    from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait  # 30 ms of imports: only here

    nccl_log._parser()  # build the grammar once; forked workers inherit it
    pool = ProcessPoolExecutor(max_workers=workers, initializer=_ignore_ctrl_c)
    futures = [pool.submit(_run_task, task) for task in tasks]
    try:
        with interrupts.waiting_for_input():  # a stop request ends the wait at once
            wait(futures, return_when=FIRST_EXCEPTION)
    except interrupts.ReadingStopped:
        kept = [f.result() if f.done() and not f.cancelled() and f.exception() is None else None for f in futures]
        workers_left = list(getattr(pool, "_processes", {}).values())  # no public way to stop a busy worker
        for process in workers_left:
            process.terminate()
        pool.shutdown(wait=False, cancel_futures=True)
        for process in workers_left:
            process.join(timeout=10)
        return kept
    pool.shutdown(wait=True)
    return [f.result() for f in futures]


def _ignore_ctrl_c() -> None:
    """Workers leave Ctrl-C (sent to the whole process group) to the parent, which keeps their results;
    SIGTERM, the parent's way to stop a busy worker, ends them (not the parent's stop request, forked with them)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _tasks(files: list[InputFile], workers: int) -> list[InputFile]:
    """Whole files, and large files cut into byte ranges so that every worker has work (split.py)."""
    tasks: list[InputFile] = []
    per_file = max(1, workers // max(1, len(files)))  # several large files: each gets its share of workers
    for item in files:
        if per_file > 1 and can_split(item):
            spans = byte_ranges(item.path, per_file * split.RANGES_PER_WORKER, split.RANGE_MIN_BYTES, per_file)
            tasks.extend(InputFile(item.path, item.display, span) for span in spans)
        else:
            tasks.append(item)
    return tasks


def _run_task(task: InputFile) -> ParsedInput | RangePart:
    with gc_paused():
        return parse_range(task) if task.span is not None else parse_input(task)


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while reading: parsing makes millions of small objects and few
    cycles, and every full collection walks them all (a quarter of the time of a large log)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _workers(files: list[InputFile], jobs: int | None) -> int:
    if any(f.is_stdin for f in files):
        return 1
    cores = os.cpu_count() or 1
    if jobs is not None:
        cores = max(1, jobs)
    splittable = sum(1 for f in files if can_split(f))
    return max(1, min(cores, max(len(files), cores if splittable else 1)))
