"""Carrying out a run: captures, each collective in turn with a progress bar, the manifest kept current,
then the analysis of the run directory (report.html, findings.json).

A collective that fails or hangs stops the run (the next ones would most likely meet the same fault
and bury its evidence) unless `keep_going`; Ctrl-C or SIGTERM always stops it. Either way everything collected
so far stays in the run directory and the manifest says how the run ended.
"""

from __future__ import annotations

import itertools
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from ncclscope.common.words import exact_size
from ncclscope.inputs import interrupts
from ncclscope.model import Analysis, RunRecord, RunStep
from ncclscope.runner import capture
from ncclscope.runner.environment import recorded_environment
from ncclscope.runner.execute import nccl_log_tail, run_step
from ncclscope.runner.rundir import nccl_logs, now, output_names, write_manifest

VERSION_SCAN_LINES = 200


@dataclass(frozen=True)
class Settings:
    timeout_s: float
    sizes: int  # rows each collective prints, for the progress bar
    keep_going: bool
    each_host: list[str] | None = None  # the launcher's one-process-per-host prefix on a run of several hosts
    hosts: tuple[str, ...] = ()


def execute(
    run_dir: Path, record: RunRecord, child_env: dict[str, str], settings: Settings, console: Console
) -> RunRecord:
    """Run every step of `record` (each planned as not_run), keeping the manifest current."""
    (run_dir / "env.txt").write_text(recorded_environment(child_env), encoding="utf-8")
    write_manifest(run_dir, record)
    try:
        if settings.each_host:  # several hosts: each one's own reports, through the launcher
            record.captures, record.versions = capture.capture_hosts(run_dir, settings.each_host, list(settings.hosts))
        else:
            record.captures, record.versions = capture.capture_machine(run_dir)
        write_manifest(run_dir, record)
        with _progress(console) as progress:
            for step in record.steps:
                stop_signal = _run_one(run_dir, record, step, child_env, settings, progress)
                if stop_signal is not None or step.status == "interrupted":
                    record.interrupted, record.stop_signal = True, stop_signal or signal.SIGINT
                    break
                if step.status != "ok" and not settings.keep_going:
                    record.stopped = f"{step.collective} {step.status.replace('_', ' ')}; the run stopped there"
                    break
    except KeyboardInterrupt:
        record.interrupted, record.stop_signal = True, signal.SIGINT
    if record.interrupted:
        record.stopped = f"interrupted by {interrupts.signal_name(record.stop_signal or signal.SIGINT)}"
    nccl = capture.nccl_version(_heads(run_dir, record))
    if nccl:
        record.versions["nccl"] = nccl
    record.ended = now()
    write_manifest(run_dir, record)
    return record


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    )


def _run_one(
    run_dir: Path, record: RunRecord, step: RunStep, env: dict[str, str], settings: Settings, progress: Progress
) -> int | None:
    """Run one step, keeping the manifest current; the signal that asked the run to stop during it, if one did."""
    step.stdout, step.stderr = output_names(step.collective)
    step.status, step.started, step.timeout_s = "running", now(), settings.timeout_s
    write_manifest(run_dir, record)
    logs_before = set(nccl_logs(run_dir))
    task = progress.add_task(step.collective, total=settings.sizes)
    outcome = run_step(
        step.command,
        env,
        run_dir / step.stdout,
        run_dir / step.stderr,
        settings.timeout_s,
        on_size=_size_shown(progress, task, step.collective),
        on_tick=progress.refresh,
    )
    progress.update(task, description=f"{step.collective} {outcome.status.replace('_', ' ')}")
    step.status = outcome.status  # type: ignore[assignment]
    step.exit_code, step.duration_s = outcome.exit_code, round(outcome.duration_s, 3)
    step.nccl_logs = [name for name in nccl_logs(run_dir) if name not in logs_before]
    if outcome.status != "ok":
        step.last_lines = outcome.last_lines + nccl_log_tail(run_dir, step.nccl_logs)
        _say_why(step, progress.console)
    write_manifest(run_dir, record)
    return outcome.stop_signal


def _size_shown(progress: Progress, task: TaskID, collective: str) -> Callable[[int], None]:
    def shown(size: int) -> None:
        progress.update(task, advance=1, description=f"{collective} {exact_size(size, compact=True)}")

    return shown


def _say_why(step: RunStep, console: Console) -> None:
    what = {
        "failed": f"failed (exit status {step.exit_code})",
        "timed_out": f"did not finish within {step.timeout_s:.0f} s (--timeout) and was ended",
        "interrupted": "interrupted",
    }[step.status]
    console.print(f"ncclscope: {escape(step.collective)} {what}; last lines seen:", markup=True, highlight=False)
    for line in step.last_lines:
        console.print(f"  {line.source}:{line.line}: {line.text}", markup=False, highlight=False)


def _heads(run_dir: Path, record: RunRecord) -> list[str]:
    """The first lines of the outputs, where NCCL and nccl-tests print their versions."""
    texts: list[str] = []
    names = [s.stdout for s in record.steps if s.stdout] + nccl_logs(run_dir)
    for name in names[:8]:
        try:
            with open(run_dir / name, encoding="utf-8", errors="replace") as handle:
                texts.append("".join(itertools.islice(handle, VERSION_SCAN_LINES)))
        except OSError:
            continue
    return texts


def analyze_run(run_dir: Path) -> tuple[Analysis, list[str]]:
    """Read the run directory as `ncclscope analyze RUN_DIR` would; write report.html and findings.json."""
    from ncclscope.case.read import read_case
    from ncclscope.common.output_files import json_chunks, write_in_place
    from ncclscope.diagnose.engine import analyze
    from ncclscope.render.report import ReportError, write_report

    outcome = read_case([str(run_dir)], jobs=1)
    analysis = analyze(outcome.case)
    messages = list(outcome.messages)
    write_in_place(run_dir / "findings.json", json_chunks(analysis))  # `analyze --format json`'s bytes
    try:
        write_report(analysis, run_dir / "report.html")
    except ReportError as exc:
        messages.append(str(exc))
    return analysis, messages
