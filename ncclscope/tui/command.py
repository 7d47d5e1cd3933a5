"""`ncclscope tui`: open inputs in the terminal UI (imports Textual only when the command runs)."""

from __future__ import annotations

from typing import Annotated

import typer


def tui(
    paths: Annotated[
        list[str], typer.Argument(help="Files, directories, .gz files, bundles, run directories, or - for stdin.")
    ],
) -> None:
    """Explore inputs in the terminal UI: findings, hosts, communicators, topology, benchmarks, raw log."""
    raise typer.Exit(3)  # filled in by the TUI work
