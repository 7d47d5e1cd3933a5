"""The command line: one function per command, wiring only.

Exit status: 0 ok; 1 `analyze` found something at or above --fail-on; 2 unusable input (a message
on stderr names it) or a usage error; 3 an internal error (a one-line message, never a traceback).
"""

# No `from __future__ import annotations` here: typer reads the commands' signatures on every run, and
# string annotations it must evaluate one by one (some 270 in all, a cost at every start-up).

import json
import os
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ncclscope import __version__
from ncclscope.cli.fleet_command import fleet
from ncclscope.cli.options import IdleOpt
from ncclscope.cli.run_command import run
from ncclscope.cli.tui_command import tui
from ncclscope.common.exit_status import EXIT_INTERNAL, EXIT_UNUSABLE, FailOn, findings_exit, keep_until_exit
from ncclscope.common.output_files import guard_stdout, json_chunks, write_output

app = typer.Typer(
    name="ncclscope",
    help="Read NCCL_DEBUG logs, nvidia-smi topo -m matrices and nccl-tests output; say what is wrong.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _print_version(value: bool) -> None:
    if value:
        print(f"ncclscope {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option("--version", "-V", help="Print the version and exit.", is_eager=True, callback=_print_version),
    ] = False,
) -> None:
    """Read NCCL_DEBUG logs, nvidia-smi topo -m matrices and nccl-tests output; say what is wrong."""


class OutputFormat(str, Enum):
    text = "text"
    json = "json"


PathsArg = Annotated[
    list[str], typer.Argument(help="Files, directories, .gz files, or - for stdin.", show_default=False)
]
RedactOpt = Annotated[
    bool, typer.Option("--redact", help="Replace hostnames, addresses, users, container/pod names by pseudonyms.")
]
JobsOpt = Annotated[
    int | None,
    typer.Option(
        "--jobs",
        "-j",
        help="Parallel processes: several inputs, or byte ranges of one large file (default: one per core).",
    ),
]


QuietOpt = Annotated[
    bool,
    typer.Option(
        "--quiet",
        "-q",
        help="Leave out what could not be judged for lack of evidence (EVD001): only what the inputs show.",
    ),
]


def _quieted(ignore: list[str] | None, quiet: bool) -> list[str] | None:
    return [*(ignore or []), "EVD001"] if quiet else ignore


def read_case(paths: list[str], jobs: int | None):  # type: ignore[no-untyped-def]
    """ncclscope.case.read.read_case, imported when a command reads (the parser is the heavy part)."""
    from ncclscope.case.read import read_case as read

    # A command runs once and exits: what was read lives to the end, so the collector need not walk
    # it again while the rules and the output run, nor free it as the command returns (a large Case is
    # millions of objects; exit_status.keep_until_exit).
    outcome = read(paths, jobs, kept_to_exit=True)
    keep_until_exit(outcome)
    return outcome


def _read(paths: list[str], jobs: int | None, redact: bool):  # type: ignore[no-untyped-def]
    """Read the inputs, redacted before parsing when asked (so nothing built from them leaks)."""
    if redact:
        from ncclscope.case.read import read_case_redacted

        return read_case_redacted(paths, jobs)[0]
    return read_case(paths, jobs)


def _json_output_ahead(name: str) -> None:
    """Builds the serializer of the model (`Case` or `Analysis`) that is to be written as JSON, now: the
    Case and the Analysis are made unvalidated, so it is otherwise built as the output is written, a cost
    on one core after every worker has ended; now, the workers started early parse meanwhile."""
    from ncclscope import model

    getattr(model, name).model_rebuild()


def _stderr() -> Console:
    return Console(stderr=True, highlight=False, soft_wrap=True)


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
    if output_format is OutputFormat.json:
        _json_output_ahead("Case")
    outcome = read_case(paths, jobs)
    _report_problems(outcome.messages)
    if output_format is OutputFormat.json:
        write_output(json_chunks(outcome.case), output)
    else:
        from ncclscope.render.summary import print_summary

        if output is None:
            print_summary(outcome.case, Console(highlight=False, soft_wrap=True))
        else:
            console = Console(record=True, width=120, file=open(os.devnull, "w"))  # noqa: SIM115
            print_summary(outcome.case, console)
            write_output(console.export_text(), output)
    raise typer.Exit(outcome.exit_code)


class ReportFormat(str, Enum):
    html = "html"
    markdown = "markdown"
    md = "md"


class AnalyzeFormat(str, Enum):
    text = "text"
    json = "json"
    markdown = "markdown"
    sarif = "sarif"


@app.command()
def analyze(
    paths: PathsArg,
    output_format: Annotated[
        AnalyzeFormat, typer.Option("--format", "-f", help="text, json, markdown or sarif.")
    ] = AnalyzeFormat.text,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write to this file.")] = None,
    select: Annotated[
        list[str] | None, typer.Option("--select", help="Only these codes or prefixes (NET, BW001); repeatable.")
    ] = None,
    ignore: Annotated[
        list[str] | None, typer.Option("--ignore", help="Skip these codes or prefixes; repeatable.")
    ] = None,
    fail_on: Annotated[
        FailOn, typer.Option("--fail-on", help="Exit 1 when a finding reaches this severity.")
    ] = FailOn.error,
    redact: RedactOpt = False,
    jobs: JobsOpt = None,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow",
            "-F",
            help="Read one file or - while the job writes it (like tail -f): print each finding as it shows.",
        ),
    ] = False,
    idle: IdleOpt = 60.0,
    quiet: QuietOpt = False,
) -> None:
    """Diagnose: the verdict (root causes and their fix) first, then every finding with its evidence lines,
    why it matters and the fix."""
    ignore = _quieted(ignore, quiet)
    if follow:
        if len(paths) != 1 or output_format is not AnalyzeFormat.text or output is not None or redact:
            _report_problems(["--follow reads one file or - and prints text (no -o, --format or --redact)"])
            raise typer.Exit(EXIT_UNUSABLE)
        from ncclscope.cli.analyze_follow import follow as follow_input

        raise typer.Exit(
            follow_input(paths[0], Console(highlight=False, soft_wrap=True), _stderr(), idle, fail_on, select, ignore)
        )
    from ncclscope.diagnose.engine import analyze as run_rules
    from ncclscope.render import findings as render

    if output_format is AnalyzeFormat.json:
        _json_output_ahead("Analysis")
    outcome = _read(paths, jobs, redact)
    _report_problems(outcome.messages)
    if not any(s.kinds for s in outcome.case.sources) and (outcome.stopped_by is not None or outcome.unusable):
        # stopped before anything was read, or nothing usable in the inputs (a missing path, an empty or binary
        # file, no line any reader knows): the lines above say why, and there is nothing to judge
        raise typer.Exit(outcome.exit_code)
    case_json = None
    if output_format is AnalyzeFormat.json:
        from ncclscope.common.json_aside import field_aside
        from ncclscope.model import Analysis

        case_json = field_aside(Analysis, "case", outcome.case)  # made while the rules run (json_aside.py)
    try:
        analysis = run_rules(outcome.case, select, ignore)
    except BaseException:
        if case_json is not None:
            case_json.discard()
        raise
    if output_format is AnalyzeFormat.text:
        if output is None:
            render.print_text(analysis, Console(highlight=False, soft_wrap=True))
        else:
            console = Console(record=True, width=120, file=open(os.devnull, "w"))  # noqa: SIM115
            render.print_text(analysis, console)
            write_output(console.export_text(), output)
    elif output_format is AnalyzeFormat.json:
        # render.to_json's bytes, written in pieces
        write_output(json_chunks(analysis, {"case": case_json} if case_json is not None else None), output)
    else:
        writer = {"markdown": render.to_markdown, "sarif": render.to_sarif}
        write_output(writer[output_format.value](analysis), output)
    raise typer.Exit(findings_exit(analysis.summary, fail_on, outcome.exit_code))  # 2 if an input was unusable


@app.command()
def report(
    paths: PathsArg,
    output: Annotated[Path, typer.Option("--output", "-o", help="report.html or report.md (plots beside it).")],
    select: Annotated[list[str] | None, typer.Option("--select", help="Only these codes or prefixes.")] = None,
    ignore: Annotated[list[str] | None, typer.Option("--ignore", help="Skip these codes or prefixes.")] = None,
    redact: RedactOpt = False,
    jobs: JobsOpt = None,
    quiet: QuietOpt = False,
    report_format: Annotated[
        ReportFormat | None,
        typer.Option("--format", "-f", help="html or markdown (md); default: by the name of -o."),
    ] = None,
) -> None:
    """Write a report to attach to a ticket: one self-contained HTML page, or Markdown with PNG plots."""
    ignore = _quieted(ignore, quiet)
    from ncclscope.diagnose.engine import analyze as run_rules
    from ncclscope.render.report import ReportError, report_form, write_report

    form = {"md": "markdown"}.get(report_format.value, report_format.value) if report_format else None
    try:  # before any work: a name or folder that cannot take the report is said at once
        form = report_form(output, form)
        output.parent.mkdir(parents=True, exist_ok=True)
    except ReportError as exc:
        _report_problems([str(exc)])
        raise typer.Exit(EXIT_UNUSABLE) from None
    except OSError as exc:
        _report_problems([f"cannot create the folder of {output}: {exc.strerror or exc}"])
        raise typer.Exit(EXIT_UNUSABLE) from None
    outcome = _read(paths, jobs, redact)
    _report_problems(outcome.messages)
    if outcome.unusable and not any(s.kinds for s in outcome.case.sources):
        raise typer.Exit(outcome.exit_code)
    try:
        written = write_report(run_rules(outcome.case, select, ignore), output, form=form)
    except ReportError as exc:
        _report_problems([str(exc)])
        raise typer.Exit(EXIT_UNUSABLE) from None
    _stderr().print("ncclscope: wrote " + ", ".join(str(p) for p in written), markup=False)
    raise typer.Exit(outcome.exit_code)


@app.command()
def bundle(
    paths: PathsArg,
    output: Annotated[Path, typer.Option("--output", "-o", help="The bundle to write, e.g. ticket.tar.gz.")],
    redact: RedactOpt = False,
    redact_map: Annotated[
        Path | None, typer.Option("--redact-map", help="Keep the pseudonym map in this file (never in the bundle).")
    ] = None,
    select: Annotated[list[str] | None, typer.Option("--select", help="Only these codes or prefixes.")] = None,
    ignore: Annotated[list[str] | None, typer.Option("--ignore", help="Skip these codes or prefixes.")] = None,
    jobs: JobsOpt = None,
) -> None:
    """Pack a support-ticket bundle: the inputs, report.html, report.md, findings.json and a manifest."""
    from ncclscope.render.bundle import BundleError, write_bundle

    try:
        outcome = write_bundle(
            paths,
            output,
            redact=redact,
            command="ncclscope " + " ".join(sys.argv[1:]),
            jobs=jobs,
            select=select,
            ignore=ignore,
            map_output=redact_map,
        )
    except BundleError as exc:
        _report_problems([str(exc)])
        raise typer.Exit(EXIT_UNUSABLE) from None
    _report_problems(outcome.messages)
    _stderr().print(f"ncclscope: wrote {output}", markup=False)
    raise typer.Exit(outcome.exit_code)


class DiffFormat(str, Enum):
    text = "text"
    json = "json"


class FailOnRegression(str, Enum):
    regression = "regression"
    never = "never"


@app.command()
def diff(
    before: Annotated[str, typer.Argument(help="The earlier run: a file, directory or bundle (- for stdin).")],
    after: Annotated[str, typer.Argument(help="The later run: a file, directory or bundle.")],
    threshold: Annotated[
        float, typer.Option("--threshold", help="Fraction of busbw lost before a size counts as a regression.")
    ] = 0.10,
    output_format: Annotated[DiffFormat, typer.Option("--format", "-f", help="text or json.")] = DiffFormat.text,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write to this file.")] = None,
    plot: Annotated[Path | None, typer.Option("--plot", help="Also draw busbw before/after to this PNG.")] = None,
    html: Annotated[
        Path | None, typer.Option("--report", help="Also write the AFTER report with this comparison (.html/.md).")
    ] = None,
    select: Annotated[list[str] | None, typer.Option("--select", help="Rules to compare (codes or prefixes).")] = None,
    ignore: Annotated[list[str] | None, typer.Option("--ignore", help="Rules to leave out.")] = None,
    fail_on: Annotated[
        FailOnRegression, typer.Option("--fail-on", help="Exit 1 when a size regressed (or never).")
    ] = FailOnRegression.regression,
    jobs: JobsOpt = None,
) -> None:
    """Compare the benchmarks and findings of two runs: busbw ratio per size, regressions flagged."""
    from ncclscope.diagnose.engine import analyze as run_rules
    from ncclscope.render import diff as diffing

    if not 0 <= threshold < 1:
        _report_problems([f"--threshold must be between 0 and 1, not {threshold}"])
        raise typer.Exit(EXIT_UNUSABLE)
    sides = [read_case([path], jobs) for path in (before, after)]
    for outcome in sides:
        _report_problems(outcome.messages)
    if any(outcome.exit_code == EXIT_UNUSABLE for outcome in sides):
        raise typer.Exit(EXIT_UNUSABLE)
    earlier, later = (run_rules(o.case, select, ignore) for o in sides)
    result = diffing.diff_runs(earlier, later, threshold=threshold)
    if output_format is DiffFormat.json:
        write_output(diffing.diff_to_json(result), output)
    elif output is None:
        diffing.render_diff_text(result, Console(highlight=False, soft_wrap=True))
    else:
        console = Console(record=True, width=120, file=open(os.devnull, "w"))  # noqa: SIM115
        diffing.render_diff_text(result, console)
        write_output(console.export_text(), output)
    if plot is not None and diffing.diff_plot_png(result, plot) is None:
        _report_problems([f"{plot}: no benchmark in common to plot; nothing written"])
    if html is not None:
        from ncclscope.render.report import ReportError, write_report

        try:
            write_report(later, html, diff=diffing.report_view(result))
        except ReportError as exc:
            _report_problems([str(exc)])
            raise typer.Exit(EXIT_UNUSABLE) from None
    raise typer.Exit(diffing.exit_code(result, fail_on is FailOnRegression.regression))


@app.command()
def rules(
    code: Annotated[str | None, typer.Argument(help="A rule code, e.g. NET001, to explain it.")] = None,
) -> None:
    """List the rules, or explain one (what it detects, why it matters, how to fix it)."""
    from ncclscope.render import findings as render

    console = Console(highlight=False, soft_wrap=True)
    if code is None:
        render.print_rule_list(console)
        return
    if not render.print_rule(code, console):
        _report_problems([f"no rule {code}; `ncclscope rules` lists them"])
        raise typer.Exit(EXIT_UNUSABLE)


class SchemaKind(str, Enum):
    case = "case"
    analysis = "analysis"


@app.command()
def schema(
    kind: Annotated[
        SchemaKind, typer.Argument(help="case (parse --format json) or analysis (analyze --format json).")
    ] = SchemaKind.case,
) -> None:
    """Print a JSON schema: of the Case, or of the analysis output."""
    from ncclscope.model import Analysis, Case

    model = Case if kind is SchemaKind.case else Analysis
    write_output(json.dumps(model.model_json_schema(), indent=2), None)


@app.command()
def demo() -> None:
    """Analyze the bundled multi-host example (a job with several real problems) and show the findings."""
    from ncclscope.cli.demo import demo_inputs
    from ncclscope.diagnose.engine import analyze as run_rules
    from ncclscope.render import findings as render

    paths = [str(p) for p in demo_inputs()]
    if not paths:
        _report_problems(["the bundled example is missing from this installation"])
        raise typer.Exit(EXIT_UNUSABLE)
    console = Console(highlight=False, soft_wrap=True)
    names = ", ".join(Path(p).name for p in paths)
    console.print(f"Analyzing the bundled example {names}: a 16-rank job on two hosts.")
    console.print(f"(the same as: ncclscope analyze {' '.join(paths)})\n")
    outcome = read_case(paths, jobs=1)
    _report_problems(outcome.messages)
    render.print_text(run_rules(outcome.case), console)


class Symptom(str, Enum):
    hang = "hang"
    slow = "slow"
    crash = "crash"
    wrong = "wrong"


@app.command()
def collect(
    symptom: Annotated[Symptom, typer.Argument(help="hang, slow, crash or wrong (results).")],
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write to this file.")] = None,
) -> None:
    """Say what to collect for a support ticket: NCCL and framework settings, host reports, what to write."""
    from ncclscope.cli.collect import collect_text

    write_output(collect_text(symptom.value), output)


@app.command()
def version() -> None:
    """Print the ncclscope version."""
    write_output(f"ncclscope {__version__}", None)


# Commands that live with their subsystem; their modules import Textual / torch only when they run.
app.command()(tui)
app.command()(run)
app.command()(fleet)


def main() -> None:
    guard_stdout()  # `ncclscope ... | head`: the command still ends with its usual exit status
    try:
        app()
    except KeyboardInterrupt:
        _stderr().print("ncclscope: interrupted", markup=False)
        sys.exit(130)
    except Exception as exc:  # the promise: never a traceback
        _stderr().print(f"ncclscope: internal error: {type(exc).__name__}: {exc}", markup=False)
        sys.exit(EXIT_INTERNAL)
