"""Exit status contract shared by every command, and `--fail-on` (kept free of heavy imports: the TUI starts fast).

0  everything named was read (and nothing reached --fail-on)
1  a finding reached --fail-on (analyze, run), a size regressed (diff), a collective failed (run)
2  some input was unusable, nothing was recognised, or the command line was wrong
3  internal error
130, 143  reading was stopped by Ctrl-C (SIGINT) or SIGTERM: what was read was still analysed (128 + signal)
"""

from __future__ import annotations

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
