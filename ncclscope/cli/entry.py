"""The `ncclscope` executable: answers `--version` before loading anything, then runs the command line.

Importing the command line pulls in typer and rich; a version check or a shell completion probe
should not pay for that (issue 11: start-up under 0.4 s).
"""

from __future__ import annotations

import gc
import os
import sys
import types

# commands that never load numpy (help neither): they need not pay for loading it early
WITHOUT_NUMPY = frozenset({"schema", "version"})
# commands that read their inputs with the workers of case/read.py, which may start before the command line
READING_COMMANDS = frozenset({"parse", "analyze", "report"})
LARGE_FILE_BYTES = 48 * 1024 * 1024  # split.SPLIT_MIN_BYTES, not imported: split.py loads the parser


def main() -> None:
    if sys.argv[1:] in (["--version"], ["-V"]):
        from ncclscope import __version__

        print(f"ncclscope {__version__}")
        return
    # Importing builds thousands of long-lived objects (pydantic schemas, grammars, the rule
    # catalogue); the cyclic collector would scan them again and again while they load, for
    # nothing. Pause it, then freeze what was imported so later collections skip it.
    gc.disable()
    # pydantic looks for plugins among the entry points of every installed package on the first model
    # it builds (importlib.metadata, slow to import); the command line uses none
    if os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__") == "__all__":
        _pydantic_plugin_loader_that_finds_none()
    if len(sys.argv) > 1 and sys.argv[1] not in WITHOUT_NUMPY and not {"--help", "-h"} & set(sys.argv):
        _load_numpy_single_threaded()
    if sys.argv[1:2] and sys.argv[1] in READING_COMMANDS and any(map(_large_file, sys.argv[2:])):
        from ncclscope.parse import workers

        workers.start_early(sys.argv[2:])  # the workers parse while the command line loads (parse/workers.py)
    from ncclscope.cli.app import main as run_cli

    gc.freeze()
    gc.enable()
    try:
        run_cli()
    finally:
        if "ncclscope.parse.workers" in sys.modules:
            sys.modules["ncclscope.parse.workers"].discard_early()


def run() -> None:
    """The program (`ncclscope`, `python -m ncclscope`): the command line (`main`, which ends with SystemExit
    as any command line does, for a caller in the same process), then the process ends at once when the
    command kept what it read (exit_status.keep_until_exit)."""
    try:
        main()
    except SystemExit as done:
        from ncclscope.common.exit_status import end_process

        end_process(done.code)  # returns when nothing was kept
        raise


def _large_file(arg: str) -> bool:
    """A regular file that split.py may read in byte ranges (a first look, by its size only)."""
    try:
        return os.stat(arg).st_size >= LARGE_FILE_BYTES
    except (OSError, ValueError):
        return False


def _pydantic_plugin_loader_that_finds_none() -> None:
    """With every plugin disabled, pydantic's plugin loader finds none, but importing it still loads
    importlib.metadata and email (paid by every command that reads, against the start-up target): a
    loader that finds none stands in, for this process only (a program that imports ncclscope.api keeps
    pydantic's own), and only while pydantic has not loaded its own."""
    name = "pydantic.plugin._loader"
    if name not in sys.modules:
        stand_in = types.ModuleType(name, "ncclscope's stand-in: every pydantic plugin is disabled")
        stand_in.get_plugins = tuple  # type: ignore[attr-defined]  # get_plugins() -> (): no plugin
        sys.modules[name] = stand_in


def _load_numpy_single_threaded() -> None:
    """numpy's OpenBLAS starts a thread per core as it loads, and each spins for a
    while, waiting for work that never comes: ncclscope does no linear algebra, and on 2 cores that
    time is taken from the parser. The variable is set only while numpy loads (OpenBLAS reads it
    then): the jobs that `ncclscope run` starts inherit os.environ, and they may want their threads."""
    added = "OPENBLAS_NUM_THREADS" not in os.environ
    if added:
        os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        import numpy  # noqa: F401
    finally:
        if added:
            del os.environ["OPENBLAS_NUM_THREADS"]
