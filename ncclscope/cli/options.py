"""Command-line options that several commands take, declared once so that their names and help agree."""

from __future__ import annotations

from typing import Annotated

import typer

IdleOpt = Annotated[
    float,
    typer.Option("--idle", help="With --follow: seconds without a new line before the job is said to look hung."),
]
