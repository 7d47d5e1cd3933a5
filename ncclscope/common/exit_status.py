"""Exit status contract shared by every command, and `--fail-on` (kept free of heavy imports: the TUI starts fast).

0  everything named was read (and nothing reached --fail-on)
1  a finding reached --fail-on (analyze, run), a size regressed (diff), a collective failed (run)
2  some input was unusable, nothing was recognised, or the command line was wrong
3  internal error
130, 143  reading was stopped by Ctrl-C (SIGINT) or SIGTERM: what was read was still analysed (128 + signal)
"""

from __future__ import annotations

import os
import sys
from enum import Enum

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_UNUSABLE = 2
EXIT_INTERNAL = 3


class FailOn(str, Enum):
    """The least severe finding that makes a command exit 1 (`--fail-on`)."""

    error = "error"
    warning = "warning"
    never = "never"


def findings_exit(summary: dict[str, int], fail_on: FailOn, read_status: int = EXIT_OK) -> int:
    """Exit status of a command that analyzed: 128 + signal if reading was stopped, 2 if an input was
    unusable, 1 if a finding reached `fail_on`."""
    if read_status == EXIT_UNUSABLE or read_status > 128:
        return read_status
    levels = {FailOn.error: ("error",), FailOn.warning: ("error", "warning"), FailOn.never: ()}[fail_on]
    return EXIT_FINDINGS if any(summary.get(level) for level in levels) else EXIT_OK


_KEPT: list[object] = []  # what the command read, alive until the process ends (keep_until_exit)


def keep_until_exit(value: object) -> None:
    """`value` (what a command read) stays alive to the end of the process and is never freed: a large
    Case is millions of objects, and freeing them one by one as the command returns costs 0.05 s on a
    100 MB log, for nothing. The program's entry point then ends the process with `end_process`."""
    _KEPT.append(value)


def end_process(code: object) -> None:
    """Ends the process now with exit status `code` (a SystemExit's), stdout and stderr flushed, when a
    command kept what it read (keep_until_exit); else, or for a code that is not a number, returns."""
    if not _KEPT or not (code is None or isinstance(code, int)):
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader that went away (`| head`): the status stays the command's
            pass
    os._exit(code or 0)
