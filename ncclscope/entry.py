"""The `ncclscope` executable: answers `--version` before loading anything, then runs the command line.

Importing the command line pulls in typer and rich; a version check or a shell completion probe
should not pay for that (issue 11: start-up under 0.4 s).
"""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:] in (["--version"], ["-V"]):
        from ncclscope import __version__

        print(f"ncclscope {__version__}")
        return
    from ncclscope.cli import main as run_cli

    run_cli()
