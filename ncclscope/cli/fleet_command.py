"""`ncclscope fleet`: wiring only (fleet.py judges, render/fleet.py writes)."""

# No `from __future__ import annotations` (see cli/app.py): typer would evaluate this command's annotations.

import os
import sys
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ncclscope.common.exit_status import EXIT_FINDINGS, EXIT_OK, EXIT_UNUSABLE

if TYPE_CHECKING:
    from ncclscope.fleet.judge import FleetReport


class FleetFormat(str, Enum):
    text = "text"
    json = "json"
    csv = "csv"
    markdown = "markdown"


def fleet(
    paths: Annotated[
        list[str],
        typer.Argument(
            help="nccl-tests outputs (one per node or node pair), run directories, NCCL logs; folders are read "
            "file by file.",
            show_default=False,
        ),
    ],
    hosts: Annotated[
        str | None,
        typer.Option("--hosts", help="The hosts that should have a result: h1,h2,... or @FILE (one per line)."),
    ] = None,
    baseline: Annotated[
        Path | None, typer.Option("--baseline", help="An earlier `fleet --format json`: report the change since.")
    ] = None,
    threshold: Annotated[
        float, typer.Option("--threshold", help="Fraction of busbw lost since the baseline that is a regression.")
    ] = 0.10,
    fail_on: Annotated[
        str,
        typer.Option(
            "--fail-on", help="Exit 1 on any of: slow, failed, missing, regression, drift (comma list), or none."
        ),
    ] = "slow,failed,regression",
    output_format: Annotated[FleetFormat, typer.Option("--format", "-f", help="text, json, csv or markdown.")] = (
        FleetFormat.text
    ),
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write to this file; a .html name writes the HTML page.")
    ] = None,
    parquet: Annotated[
        Path | None, typer.Option("--parquet", help="Also write the frames (hosts, pairs, pair_hosts, drift) here.")
    ] = None,
    show_all: Annotated[
        bool, typer.Option("--all", help="Text: list every host, not only those that need attention.")
    ] = False,
    jobs: Annotated[
        int | None, typer.Option("--jobs", "-j", help="Processes reading the inputs (default: one per core).")
    ] = None,
    dask: Annotated[
        str | None,
        typer.Option("--dask", help="Read the inputs on this Dask cluster (scheduler address; needs ncclscope[dask])."),
    ] = None,
) -> None:
    """Judge many hosts at once: slow, failed and missing hosts, bad links from pairwise runs, version and
    setting drift, and regressions since a baseline."""

    from ncclscope.fleet import judge as judging
    from ncclscope.fleet import page as render

    failing_on = [w.strip() for w in fail_on.split(",") if w.strip() and w.strip() != "none"]
    expected_hosts, host_problem = _host_list(hosts)
    earlier, baseline_problem = _baseline(baseline) if baseline is not None else (None, None)
    problems = [*_option_problems(failing_on, threshold), *filter(None, [host_problem, baseline_problem])]
    if problems:
        _stderr(problems)
        raise typer.Exit(EXIT_UNUSABLE)
    units, missing = judging.units(paths)
    _stderr(missing)
    if not units:
        raise typer.Exit(EXIT_UNUSABLE)
    with _progress(len(units)) as advance:
        if dask:
            try:
                summaries = judging.summarize_on_dask(units, dask, advance)
            except judging.DaskUnavailable as exc:
                _stderr([str(exc)])
                raise typer.Exit(EXIT_UNUSABLE) from None
        else:
            summaries = judging.summarize_all(units, jobs, advance)
    report = judging.judge(summaries, expected_hosts, earlier, threshold)
    if baseline is not None:
        report.baseline = str(baseline)
    _stderr(report.unusable)
    _write_report(report, output_format, output, show_all)
    if parquet is not None:
        try:
            render.write_parquet(report, parquet)
        except ImportError:
            _stderr([f"{parquet}: --parquet needs pyarrow (pip install 'ncclscope[parquet]'); not written"])
            raise typer.Exit(EXIT_UNUSABLE) from None
    if missing or (report.unusable and not any(s.usable for s in summaries)):
        raise typer.Exit(EXIT_UNUSABLE)
    reasons = judging.failing(report, failing_on)
    if reasons:
        _stderr([f"fleet: exit 1 on {', '.join(reasons)} (--fail-on {','.join(failing_on)})"])
    raise typer.Exit(EXIT_FINDINGS if reasons else EXIT_OK)


def _option_problems(failing_on: list[str], threshold: float) -> list[str]:
    from ncclscope.fleet import judge as judging

    problems = []
    unknown = [w for w in failing_on if w not in judging.FAIL_ON_CHOICES]
    if unknown:
        problems.append(f"--fail-on: {', '.join(unknown)} is not one of {', '.join(judging.FAIL_ON_CHOICES)}, none")
    if not 0 <= threshold < 1:
        problems.append(f"--threshold must be between 0 and 1, not {threshold}")
    return problems


PIPE_WIDTH = 10_000  # wider than any row: a table printed into a pipe takes the width its cells need


def _write_report(report: "FleetReport", output_format: FleetFormat, output: Path | None, show_all: bool) -> None:
    """The report in the format asked for (a .html output name asks for the page), printed or written."""
    from rich.console import Console

    from ncclscope.fleet import page as render

    if output is not None and output.suffix.lower() in (".html", ".htm"):
        _write(render.to_html(report), output)
    elif output_format is FleetFormat.json:
        _write(report.model_dump_json(indent=2), output)
    elif output_format is FleetFormat.csv:
        _write(render.to_csv(report), output)
    elif output_format is FleetFormat.markdown:
        _write(render.to_markdown(report), output)
    elif output is None and sys.stdout.isatty():
        render.print_text(report, Console(highlight=False, soft_wrap=True), show_all)
    elif output is None:
        # piped (`| cat`, a CI log): no terminal width to fit, so each row stays one line with every value whole
        # (not cut to "bu…" nor wrapped over lines), without the padding to the widest row
        console = Console(record=True, width=PIPE_WIDTH, file=open(os.devnull, "w"))  # noqa: SIM115
        render.print_text(report, console, show_all)
        sys.stdout.write("\n".join(line.rstrip() for line in console.export_text().splitlines()) + "\n")
    else:
        console = Console(record=True, width=140, file=open("/dev/null", "w"))  # noqa: SIM115
        render.print_text(report, console, show_all)
        _write(console.export_text(), output)


def _host_list(spec: str | None) -> tuple[list[str], str | None]:
    if not spec:
        return [], None
    if spec.startswith("@"):
        try:
            text = Path(spec[1:]).read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            return [], f"{spec[1:]}: cannot read the host list ({exc.strerror or exc})"
        names = [line.split("#")[0].strip() for line in text.splitlines()]
    else:
        names = [name.strip() for name in spec.split(",")]
    return [n for n in dict.fromkeys(names) if n], None


def _baseline(path: Path):  # type: ignore[no-untyped-def]
    from pydantic import ValidationError

    from ncclscope.fleet.judge import FleetReport

    try:
        return FleetReport.model_validate_json(path.read_bytes()), None
    except OSError as exc:
        return None, f"{path}: cannot read the baseline ({exc.strerror or exc})"
    except ValidationError as exc:
        return None, f"{path}: not a `fleet --format json` output ({exc.error_count()} problems)"


class _progress:
    """A progress bar over the inputs on stderr when it is a terminal; nothing otherwise."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.bar = None

    def __enter__(self):  # type: ignore[no-untyped-def]
        if not sys.stderr.isatty() or self.total < 2:
            return None
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self.bar = Progress(
            TextColumn("reading"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=True,
        )
        self.bar.start()
        task = self.bar.add_task("inputs", total=self.total)
        return lambda done: self.bar.update(task, completed=done)  # type: ignore[union-attr]

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()


def _write(text: str, output: Path | None) -> None:
    from ncclscope.common.output_files import write_output

    write_output(text, output)


def _stderr(messages: list[str]) -> None:
    """Problems and the exit reason, one line each, prefixed like every other command's (cli._report_problems)."""
    for message in messages:
        print(f"ncclscope: {message}", file=sys.stderr)
