"""Which benchmark `ncclscope run` uses: nccl-tests binaries when they are there, else the torch benchmark.

nccl-tests binaries are found as `<collective>_perf` (the names nccl-tests builds) in, in order,
`--nccl-tests-dir`, `$NCCL_TESTS_HOME` and its `build/` folder (where `make` puts them), then PATH.
Under mpirun or srun the MPI builds some distributions ship as `<collective>_perf_mpi` are preferred.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

HOW_TO_GET_ONE = (
    "install the built-in benchmark with `pip install 'ncclscope[runner]'` (torch), or build nccl-tests"
    " (https://github.com/NVIDIA/nccl-tests) and pass --nccl-tests-dir DIR or set NCCL_TESTS_HOME"
)


class BackendError(RuntimeError):
    """No usable benchmark; str() says what is missing and how to get it."""


@dataclass(frozen=True)
class Backend:
    name: str  # "nccl-tests" or "torch"
    binaries: dict[str, str]  # collective -> nccl-tests binary path (empty for torch)


def binary_names(collective: str, launcher: str) -> list[str]:
    plain = f"{collective}_perf"
    return [f"{plain}_mpi", plain] if launcher in ("mpirun", "srun") else [plain]


def search_dirs(nccl_tests_dir: Path | None, env: Mapping[str, str]) -> list[Path]:
    dirs = [nccl_tests_dir] if nccl_tests_dir else []
    home = env.get("NCCL_TESTS_HOME")
    if home:
        dirs += [Path(home), Path(home) / "build"]
    return dirs


def find_binary(collective: str, launcher: str, dirs: list[Path], env: Mapping[str, str]) -> str | None:
    """The binary's absolute path, from the given folders first, then PATH."""
    for name in binary_names(collective, launcher):
        for folder in dirs:
            candidate = folder / name
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate.resolve())
    for name in binary_names(collective, launcher):
        found = shutil.which(name, path=env.get("PATH", ""))
        if found:
            return str(Path(found).resolve())
    return None


def module_available(name: str) -> bool:
    """Whether `name` can be imported here, without importing it (torch takes seconds to import)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def choose_backend(
    requested: str,
    collectives: list[str],
    launcher: str,
    nccl_tests_dir: Path | None,
    env: Mapping[str, str],
    torch_module: str = "torch",
) -> Backend:
    """auto: nccl-tests when a binary is found for every collective, else torch when importable."""
    dirs = search_dirs(nccl_tests_dir, env)
    if requested in ("auto", "nccl-tests"):
        found = {c: find_binary(c, launcher, dirs, env) for c in collectives}
        missing = [binary_names(c, launcher)[-1] for c, path in found.items() if path is None]
        if not missing:
            return Backend("nccl-tests", {c: p for c, p in found.items() if p})
        if requested == "nccl-tests":
            where = ", ".join([*(str(d) for d in dirs), "PATH"])
            absent = f"nccl-tests binaries not found ({', '.join(missing)}; looked in {where})"
            raise BackendError(f"{absent}: {HOW_TO_GET_ONE}")
    if module_available(torch_module):
        return Backend("torch", {})
    if requested == "torch":
        raise BackendError("the torch backend needs torch: `pip install 'ncclscope[runner]'`")
    raise BackendError("no benchmark to run: " + HOW_TO_GET_ONE)


def planned_backends(
    requested: str, collectives: list[str], launcher: str, nccl_tests_dir: Path | None, env: Mapping[str, str]
) -> tuple[list[Backend], list[str]]:
    """For --dry-run where `choose_backend` finds nothing usable (a login node): the backends to print a plan
    for (the one asked for, or both for auto; nccl-tests with the binaries' bare names) and, one line each,
    what this machine lacks for each and how to get it."""
    dirs = search_dirs(nccl_tests_dir, env)
    planned: list[Backend] = []
    missing: list[str] = []
    if requested in ("auto", "nccl-tests"):
        names = {c: binary_names(c, launcher)[-1] for c in collectives}
        found = {c: find_binary(c, launcher, dirs, env) for c in collectives}
        planned.append(Backend("nccl-tests", {c: str(found[c] or names[c]) for c in collectives}))
        absent = [names[c] for c in collectives if found[c] is None]
        if absent:
            where = ", ".join([*(str(d) for d in dirs), "PATH"])
            missing.append(
                f"nccl-tests: {', '.join(absent)} not found (looked in {where}): build nccl-tests"
                " (https://github.com/NVIDIA/nccl-tests, `make MPI=1` for mpirun/srun) and pass --nccl-tests-dir DIR"
                " or set NCCL_TESTS_HOME"
            )
    if requested in ("auto", "torch"):
        planned.append(Backend("torch", {}))
        if not module_available("torch"):
            missing.append("torch: not importable here: `pip install 'ncclscope[runner]'`")
    return planned, missing
