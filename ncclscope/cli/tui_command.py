"""`ncclscope tui`: open inputs in the terminal UI (imports Textual only when the command runs)."""

# No `from __future__ import annotations` (see cli/app.py): typer would evaluate this command's annotations.

import sys
from typing import Annotated

import typer

from ncclscope.cli.options import IdleOpt
from ncclscope.common.exit_status import EXIT_INTERNAL, EXIT_UNUSABLE

NO_TERMINAL = "tui needs a terminal, and stdout is not one (`ncclscope analyze` prints the findings)"


def tui(
    paths: Annotated[
        list[str], typer.Argument(help="Files, directories, .gz files, bundles, run directories, or - for stdin.")
    ],
    follow: Annotated[
        bool,
        typer.Option(
            "--follow",
            "-F",
            help="Follow one file that grows, or - (a pipe), like tail -f: new lines, findings and screens update.",
        ),
    ] = False,
    idle: IdleOpt = 60.0,
) -> None:
    """Explore inputs in the terminal UI: findings, hosts, communicators, topology, benchmarks, raw log, progress."""
    if not sys.stdout.isatty():  # checked first, so that stdin is not swallowed for a UI that cannot be shown
        _fail([NO_TERMINAL], EXIT_UNUSABLE)
    from ncclscope.tui.loading import prepare_inputs, reattach_terminal, unusable_messages

    following = None
    if follow:
        if len(paths) != 1 or idle <= 0:
            _fail(["--follow reads one file or - (and --idle takes a number of seconds above 0)"], EXIT_UNUSABLE)
        from ncclscope.tui.following import Following, FollowParse, prepare_followed

        ready = prepare_followed(paths[0])
        if isinstance(ready, str):
            _fail([ready], EXIT_UNUSABLE)
            return
        prepared, followed = ready
        following = Following(followed, FollowParse(prepared.files[0]), idle)
    else:
        prepared = prepare_inputs(paths)
        messages, nothing_usable = unusable_messages(prepared)
        if nothing_usable:
            _fail(messages or [f"{', '.join(paths)}: nothing to read"], EXIT_UNUSABLE)
    if not sys.stdin.isatty():
        # stdin was a pipe (spooled already when named as `-`): the keyboard is the terminal.
        try:
            reattach_terminal()
        except OSError as exc:
            _fail([f"tui reads keys from the terminal, and /dev/tty cannot be opened: {exc.strerror}"], EXIT_UNUSABLE)
    from ncclscope.tui.app import NcclscopeApp

    app = NcclscopeApp(prepared, following)
    app.run()
    if app.internal_error is not None:
        _fail([f"internal error: {app.internal_error}"], EXIT_INTERNAL)


def _fail(messages: list[str], code: int) -> None:
    for message in messages:
        print(f"ncclscope: {message}", file=sys.stderr)
    raise typer.Exit(code)
