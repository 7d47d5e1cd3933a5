"""The command line: one function per command, wiring only.

Exit status: 0 ok; 2 unusable input (a message on stderr names it) or a usage error; 3 an
internal error (a one-line message, never a traceback).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ncclscope import __version__
from ncclscope.model import Case
from ncclscope.reading import EXIT_UNUSABLE, read_case

app = typer.Typer(
    name="ncclscope",
    help="Read NCCL_DEBUG logs, nvidia-smi topo -m matrices and nccl-tests output; say what is wrong.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)
EXIT_INTERNAL = 3


class OutputFormat(str, Enum):
    text = "text"
    json = "json"


PathsArg = Annotated[
    list[str], typer.Argument(help="Files, directories, .gz files, or - for stdin.", show_default=False)
]
JobsOpt = Annotated[
    int | None, typer.Option("--jobs", "-j", help="Parallel processes for several inputs (default: one per core).")
]


def _stderr() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


def _write_output(text: str, output: Path | None) -> None:
    """Print, or write atomically (temporary file then rename) so no half-written file is left."""
    if output is None:
        sys.stdout.write(text)
        if not text.endswith("\n"):
            sys.stdout.write("\n")
        return
    directory = output.resolve().parent
    fd, tmp = tempfile.mkstemp(prefix=f".{output.name}.", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, output)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _report_problems(messages: list[str]) -> None:
    err = _stderr()
    for message in messages:
        err.print(f"ncclscope: {message}", markup=False)


@app.command()
def parse(
    paths: PathsArg,
    output_format: Annotated[OutputFormat, typer.Option("--format", "-f", help="text or json.")] = OutputFormat.text,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write to this file.")] = None,
    jobs: JobsOpt = None,
) -> None:
    """Parse inputs into one Case and print a summary (or the Case as JSON)."""
    outcome = read_case(paths, jobs)
    _report_problems(outcome.messages)
    if output_format is OutputFormat.json:
        _write_output(outcome.case.model_dump_json(indent=2), output)
    else:
        from ncclscope.render.summary import print_summary

        if output is None:
            print_summary(outcome.case, Console(highlight=False, soft_wrap=True))
        else:
            console = Console(record=True, width=120, file=open(os.devnull, "w"))  # noqa: SIM115
            print_summary(outcome.case, console)
            _write_output(console.export_text(), output)
    raise typer.Exit(outcome.exit_code)


@app.command()
def schema() -> None:
    """Print the JSON schema of the Case (the contract of `parse --format json`)."""
    _write_output(json.dumps(Case.model_json_schema(), indent=2), None)


@app.command()
def demo() -> None:
    """Parse the bundled multi-host example and show what ncclscope makes of it."""
    from ncclscope.demo import demo_inputs

    paths = [str(p) for p in demo_inputs()]
    if not paths:
        _report_problems(["the bundled example is missing from this installation"])
        raise typer.Exit(EXIT_UNUSABLE)
    console = Console(highlight=False, soft_wrap=True)
    console.print(f"ncclscope {__version__}: parsing the bundled example {', '.join(Path(p).name for p in paths)}\n")
    outcome = read_case(paths, jobs=1)
    _report_problems(outcome.messages)
    from ncclscope.render.summary import print_summary

    print_summary(outcome.case, console)
    raise typer.Exit(outcome.exit_code)


@app.command()
def version() -> None:
    """Print the ncclscope version."""
    _write_output(f"ncclscope {__version__}", None)


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        _stderr().print("ncclscope: interrupted", markup=False)
        sys.exit(130)
    except BrokenPipeError:
        sys.stderr.close()  # output piped into head: not an error
        sys.exit(0)
    except Exception as exc:  # the promise: never a traceback
        _stderr().print(f"ncclscope: internal error: {type(exc).__name__}: {exc}", markup=False)
        sys.exit(EXIT_INTERNAL)
