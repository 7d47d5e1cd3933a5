"""The Python API: read inputs into a Case, analyse it, look at both as pandas DataFrames.

    >>> import ncclscope as ns
    >>> case = ns.read("fixtures/nccl/v2_26_socket_fallback.log")
    >>> sorted(host.name for host in case.hosts)
    ['node-b01', 'node-b02']
    >>> analysis = ns.analyze(case, select=["NET001"])
    >>> analysis.frames().findings[["code", "severity"]].values.tolist()
    [['NET001', 'error']]

`read` takes what the CLI takes (files, directories, .gz, ncclscope bundles, run directories, "-"
for stdin). A problem with one input is a Python warning (ReadWarning) naming it, and the rest is
read; only when nothing at all could be used does `read` raise ReadError.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable

from ncclscope.model import Analysis, Case

__all__ = ["ReadError", "ReadWarning", "analyze", "read"]

PathLike = str | os.PathLike[str]


class ReadError(Exception):
    """No input could be used; `messages` names each one and why."""

    def __init__(self, messages: list[str]) -> None:
        super().__init__("; ".join(messages) or "nothing to read")
        self.messages = messages


class ReadWarning(UserWarning):
    """An input was partly or wholly unusable; the others were read."""


def read(*paths: PathLike, jobs: int | None = None) -> Case:
    """Every input named by `paths`, as one Case (parsed on every core unless `jobs` says otherwise).

    >>> import ncclscope as ns
    >>> case = ns.read("fixtures/nccl_tests/v2_17_unified_8xh100.txt")
    >>> [(run.collective, run.nranks, len(run.rows)) for run in case.benchmarks]
    [('all_gather', 8, 31)]
    """
    from ncclscope.case.read import read_case

    if not paths:
        raise ReadError(["no input named"])
    outcome = read_case([os.fspath(p) for p in paths], jobs)
    usable = any(source.usable and source.kinds for source in outcome.case.sources)
    if not usable:
        raise ReadError(outcome.messages)
    for message in outcome.messages:
        warnings.warn(message, ReadWarning, stacklevel=2)
    return outcome.case


def analyze(
    inputs: Case | PathLike | Iterable[PathLike],
    select: list[str] | None = None,
    ignore: list[str] | None = None,
    jobs: int | None = None,
) -> Analysis:
    """The findings on a Case, or on the inputs named (read as `read` does); `select` and `ignore` take
    rule codes or prefixes as `ncclscope analyze --select/--ignore` do.

    >>> import ncclscope as ns
    >>> [f.code for f in ns.analyze("fixtures/nccl/v2_26_socket_fallback.log", select=["NET001"]).findings]
    ['NET001']
    """
    from ncclscope.diagnose.engine import analyze as run_rules

    if not isinstance(inputs, Case):
        paths = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
        inputs = read(*paths, jobs=jobs)
    return run_rules(inputs, select, ignore)
