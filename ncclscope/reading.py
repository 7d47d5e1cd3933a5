"""Reading all inputs of one command into a Case: expand paths, parse in parallel, assemble.

Exit status contract (shared by every command that reads inputs):
  0  everything named was read
  2  some input was unusable (missing, unreadable, binary, empty, damaged .gz) or nothing in the
     inputs was recognised; the rest is still parsed and reported
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from ncclscope.assemble import assemble
from ncclscope.exit_status import EXIT_FINDINGS, EXIT_OK, EXIT_UNUSABLE, FailOn, findings_exit
from ncclscope.model import Case, RunRecord, Source
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
    interrupted: bool = False
    unusable: bool = False  # an input could not be used, or nothing was recognised

    @property
    def exit_code(self) -> int:
        return EXIT_UNUSABLE if self.unusable or self.interrupted else EXIT_OK


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
        parsed, interrupted = _parse_all(files, 1 if progress else jobs, progress)
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
    outcome = ReadOutcome(case, messages, interrupted, unusable)
    _attach_run(outcome, paths)
    if interrupted:
        outcome.messages.append("interrupted: results cover what was read until then")
    return outcome


def _parse_all(
    files: list[InputFile], jobs: int | None, progress: Callable[[int], None] | None
) -> tuple[list[ParsedInput], bool]:
    workers = _workers(files, jobs)
    if workers <= 1:
        results: list[ParsedInput] = []
        for item in files:
            try:
                results.append(parse_input(item, progress))
            except KeyboardInterrupt:
                results.append(ParsedInput(Source(path=item.display, problems=["interrupted while reading"])))
                return results, True
        return results, False
    from concurrent.futures import ProcessPoolExecutor  # multiprocessing costs 30 ms to import: only when used

    tasks = _tasks(files, workers)
    nccl_log._parser()  # build the grammar once; forked workers inherit it
    with ProcessPoolExecutor(max_workers=workers) as pool:
        done = list(pool.map(_run_task, tasks, chunksize=1))
    results = []
    for item in files:
        parts = [result for task, result in zip(tasks, done, strict=True) if task.path == item.path]
        if len(parts) == 1 and isinstance(parts[0], ParsedInput):
            results.append(parts[0])
        else:
            results.append(join_ranges(item, parts))  # type: ignore[arg-type]
    return results, False


def _tasks(files: list[InputFile], workers: int) -> list[InputFile]:
    """Whole files, and large files cut into byte ranges so that every worker has work (split.py)."""
    tasks: list[InputFile] = []
    per_file = max(1, workers // max(1, len(files)))  # several large files: each gets its share of workers
    for item in files:
        if per_file > 1 and can_split(item):
            spans = byte_ranges(item.path, per_file * split.RANGES_PER_WORKER, split.RANGE_MIN_BYTES)
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
