"""Reading all inputs of one command into a Case: expand paths, parse in parallel, assemble.

Exit status contract (shared by every command that reads inputs):
  0  everything named was read
  2  some input was unusable (missing, unreadable, binary, empty, damaged .gz) or nothing in the
     inputs was recognised; the rest is still parsed and reported
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

from ncclscope.assemble import assemble
from ncclscope.model import Case, Source
from ncclscope.parse import nccl_log
from ncclscope.parse.source import ParsedInput, parse_input
from ncclscope.sources import InputFile, expand_inputs

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_UNUSABLE = 2


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


def read_files(files: list[InputFile], problems: list[str], paths: list[str], jobs: int | None = None) -> ReadOutcome:
    """Inputs already expanded (`problems`: paths that could not be used; `paths`: as named)."""
    parsed, interrupted = _parse_all(files, jobs)
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
    if interrupted:
        outcome.messages.append("interrupted: results cover what was read until then")
    return outcome


def _parse_all(files: list[InputFile], jobs: int | None) -> tuple[list[ParsedInput], bool]:
    workers = _workers(files, jobs)
    if workers <= 1:
        results: list[ParsedInput] = []
        for item in files:
            try:
                results.append(parse_input(item))
            except KeyboardInterrupt:
                results.append(ParsedInput(Source(path=item.display, problems=["interrupted while reading"])))
                return results, True
        return results, False
    nccl_log._parser()  # build the grammar once; forked workers inherit it
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(parse_input, files, chunksize=1)), False


def _workers(files: list[InputFile], jobs: int | None) -> int:
    if any(f.is_stdin for f in files):
        return 1
    if jobs is not None:
        return max(1, min(jobs, len(files)))
    return max(1, min(os.cpu_count() or 1, len(files)))
