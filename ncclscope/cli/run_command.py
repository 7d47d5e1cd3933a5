"""`ncclscope run`: build, show or run the collectives, then analyze the run directory.

Exit status: 0 every collective ran and no finding reached --fail-on; 1 a collective failed or timed
out, or a finding reached --fail-on (default error, as `analyze`); 2 a usage problem or no benchmark
to run; 130 interrupted by Ctrl-C, 143 by SIGTERM (what was collected is kept and analyzed; the running
collective's processes are ended); 3 an internal error.
"""

# No `from __future__ import annotations` (see cli/app.py): the names imported for type checking only are
# quoted where they annotate.

import os
import signal
import socket
import sys
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ncclscope.common.exit_status import EXIT_FINDINGS, EXIT_UNUSABLE, FailOn, findings_exit
from ncclscope.inputs.interrupts import exit_status

if TYPE_CHECKING:
    from rich.console import Console

    from ncclscope.runner.environment import RunEnvironment
    from ncclscope.runner.plan import Layout, Sweep

EXIT_USAGE = EXIT_UNUSABLE
INTERRUPTED = (exit_status(signal.SIGINT), exit_status(signal.SIGTERM))  # 130, 143


class BackendChoice(str, Enum):
    auto = "auto"
    nccl_tests = "nccl-tests"
    torch = "torch"


class LauncherChoice(str, Enum):
    none = "none"
    mpirun = "mpirun"
    srun = "srun"
    torchrun = "torchrun"


def run(
    collectives: Annotated[
        list[str] | None,
        typer.Argument(
            help="Collectives to run: all_reduce all_gather reduce_scatter alltoall sendrecv broadcast reduce"
            " (default: the first five).",
            show_default=False,
        ),
    ] = None,
    min_bytes: Annotated[str, typer.Option("-b", "--minbytes", help="Smallest message size (K/M/G suffixes).")] = "8",
    max_bytes: Annotated[
        str | None,
        typer.Option("-e", "--maxbytes", help="Largest message size. Default 8G on GPUs, 16M with gloo on CPUs."),
    ] = None,
    factor: Annotated[int, typer.Option("-f", "--stepfactor", help="Multiply the size by this at each step.")] = 2,
    iters: Annotated[int, typer.Option("-n", "--iters", help="Timed iterations per size.")] = 20,
    warmup: Annotated[int, typer.Option("-w", "--warmup-iters", help="Untimed iterations per size.")] = 5,
    ranks_per_host: Annotated[
        int | None,
        typer.Option(
            "-g",
            "--ranks-per-host",
            help="Ranks per host: GPUs (default: all GPUs of this host), or CPU processes with gloo (default 2).",
            show_default=False,
        ),
    ] = None,
    backend: Annotated[
        BackendChoice,
        typer.Option("--backend", help="auto: nccl-tests when its binaries are found, else the torch benchmark."),
    ] = BackendChoice.auto,
    launcher: Annotated[
        LauncherChoice, typer.Option("--launcher", help="How several processes or hosts are started.")
    ] = LauncherChoice.none,
    hosts: Annotated[
        str | None, typer.Option("--hosts", help="Hosts of a multi-host run: h1,h2 or h1:8,h2:8 (ranks each).")
    ] = None,
    nccl_tests_dir: Annotated[
        Path | None, typer.Option("--nccl-tests-dir", help="Folder of the nccl-tests binaries (or NCCL_TESTS_HOME).")
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            help="Seconds one collective may take before it is ended as hung. Default 1800 on GPUs, 300 on CPUs.",
            show_default=False,
        ),
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Run directory (default ./ncclscope-run-YYYYmmdd-HHMMSS).")
    ] = None,
    keep_going: Annotated[
        bool, typer.Option("--keep-going", help="Go on with the next collective after one failed or hung.")
    ] = False,
    no_analyze: Annotated[
        bool, typer.Option("--no-analyze", help="Collect only; `ncclscope analyze RUN_DIR` later.")
    ] = False,
    fail_on: Annotated[
        FailOn, typer.Option("--fail-on", help="Exit 1 when a finding reaches this severity.")
    ] = FailOn.error,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the environment and the command lines; run nothing.")
    ] = False,
    inspector: Annotated[
        Path | None,
        typer.Option(
            "--inspector",
            help="NCCL Inspector's plugin (libnccl-profiler-inspector.so, NCCL 2.28+): time every collective of the"
            " run into RUN_DIR/inspector/ (BW007, BW008).",
            show_default=False,
        ),
    ] = None,
    pairs: Annotated[
        str | None,
        typer.Option(
            "--pairs",
            help="Pairwise check of --hosts: exhaustive (every pair) or matching (each host with two partners);"
            " one run directory per pair under --out, then `ncclscope fleet` over them.",
        ),
    ] = None,
) -> None:
    """Run collectives (nccl-tests, or the built-in torch.distributed benchmark) with full NCCL logging.

    Sets NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,ENV,GRAPH,NET,TUNING, the timestamps, NCCL_DEBUG_FILE and
    NCCL_TOPO_DUMP_FILE (values you exported win), captures nvidia-smi, writes everything to one run
    directory with a manifest, and analyzes it: report.html and findings.json. A collective that fails
    or hangs stops the run unless --keep-going.
    """
    from rich.console import Console

    from ncclscope.runner import plan as planning
    from ncclscope.runner.backend import BackendError, choose_backend
    from ncclscope.runner.capture import gpu_count
    from ncclscope.runner.environment import debug_environment
    from ncclscope.runner.rundir import default_run_dir

    err = Console(stderr=True, highlight=False, soft_wrap=True)
    if inspector is not None and not inspector.is_file():
        err.print(f"ncclscope: --inspector {inspector}: no such file (the plugin's .so, built from NCCL's"
                  " plugins/profiler/inspector)", markup=False)  # fmt: skip
        raise typer.Exit(EXIT_USAGE)
    try:
        names = planning.collective_names(collectives)
        try:
            chosen = choose_backend(backend.value, names, launcher.value, nccl_tests_dir, os.environ)
        except BackendError:
            if not dry_run or pairs is not None:
                raise
            # a plan needs neither torch nor the binaries: print it for what was asked, and say what is missing
            sweep = _sweep(min_bytes, max_bytes, factor, iters, warmup, True)
            code = _plan_without_backend(
                backend.value, names, launcher, hosts, ranks_per_host, sweep, nccl_tests_dir, out, err, inspector
            )
            raise typer.Exit(code) from None
        # nccl-tests needs GPUs whatever is counted; torch uses gloo where none are found
        gpus = gpu_count(torch_available=chosen.name == "torch")
        on_gpus = gpus > 0 or chosen.name == "nccl-tests"
        sweep = _sweep(min_bytes, max_bytes, factor, iters, warmup, on_gpus)
        layout = _layout(
            launcher, ranks_per_host or gpus or (planning.CPU_RANKS if chosen.name == "torch" else 1), hosts
        )
        planning.check_layout(layout, chosen.name)
    except (planning.PlanError, BackendError) as exc:
        err.print(f"ncclscope: {exc}", markup=False)
        raise typer.Exit(EXIT_USAGE) from None
    run_dir = out or default_run_dir()
    if pairs is not None:
        try:
            pair_list = planning.host_pairs(layout.hosts, pairs)
        except planning.PlanError as exc:
            err.print(f"ncclscope: {exc}", markup=False)
            raise typer.Exit(EXIT_USAGE) from None
        code = _run_pairs(
            run_dir, pair_list, layout, chosen, names, sweep, gpus, dry_run, timeout, on_gpus, keep_going, err,
            inspector,
        )  # fmt: skip
        raise typer.Exit(code)
    env = debug_environment(run_dir, os.environ, hosts=layout.host_count, inspector=inspector)
    steps = planning.plan_steps(
        names, chosen.binaries, sweep, layout, env.names, "nccl" if gpus else "gloo", sys.executable
    )
    if layout.launcher == "torchrun" and layout.host_count > 1:
        meet = f"they meet at {layout.hosts[0].name}:{planning.RDZV_PORT}"
        err.print(f"ncclscope: --launcher torchrun: start this same command on every host of --hosts; {meet}")
    if dry_run:
        _print_plan(chosen.name, env, steps, run_dir, planning.each_host_prefix(layout))
        raise typer.Exit(0)
    limit = timeout if timeout is not None else (planning.GPU_TIMEOUT_S if on_gpus else planning.CPU_TIMEOUT_S)
    if limit <= 0:
        err.print(f"ncclscope: --timeout {timeout}: must be more than 0 seconds", markup=False)
        raise typer.Exit(EXIT_USAGE)
    code = _run(run_dir, chosen.name, layout, env, steps, limit, sweep, keep_going, no_analyze, fail_on)
    raise typer.Exit(code)


def _plan_without_backend(
    requested: str,
    names: list[str],
    launcher: LauncherChoice,
    hosts: str | None,
    ranks_per_host: int | None,
    sweep: "Sweep",
    nccl_tests_dir: Path | None,
    out: Path | None,
    err: "Console",
    inspector: Path | None = None,
) -> int:
    """--dry-run on a machine with neither torch nor nccl-tests (a login node): the plan of each backend asked
    for, as it would run on GPU hosts, after one line per missing piece and how to get it; exit 0."""
    from ncclscope.runner import plan as planning
    from ncclscope.runner.backend import planned_backends
    from ncclscope.runner.environment import debug_environment
    from ncclscope.runner.rundir import default_run_dir

    backends, missing = planned_backends(requested, names, launcher.value, nccl_tests_dir, os.environ)
    for line in missing:
        err.print(f"ncclscope: missing on this machine: {line}", markup=False)
    run_dir = out or default_run_dir()
    for chosen in backends:
        layout = _layout(launcher, ranks_per_host or planning.PLAN_GPUS_PER_HOST, hosts)
        env = debug_environment(run_dir, os.environ, hosts=layout.host_count, inspector=inspector)
        steps = planning.plan_steps(names, chosen.binaries, sweep, layout, env.names, "nccl", sys.executable)
        print(f"# plan for GPU hosts, {layout.ranks_per_host} GPUs each (--ranks-per-host to change)")
        _print_plan(chosen.name, env, steps, run_dir, planning.each_host_prefix(layout))
    return 0


def _sweep(min_bytes: str, max_bytes: str | None, factor: int, iters: int, warmup: int, on_gpus: bool) -> "Sweep":
    """The sizes and iterations of each collective (planning.Sweep), checked; the largest size by device kind."""
    from ncclscope.runner import plan as planning

    largest = max_bytes or (planning.GPU_MAX_BYTES if on_gpus else planning.CPU_MAX_BYTES)
    sweep = planning.Sweep(min_bytes, largest, factor, iters, warmup)
    sweep.validate()
    return sweep


def _layout(launcher: LauncherChoice, per_host: int, hosts: str | None) -> "Layout":
    """How the ranks are laid out over hosts and started (planning.Layout)."""
    from ncclscope.runner import plan as planning

    return planning.Layout(launcher.value, per_host, planning.parse_hosts(hosts, per_host))


def _run_pairs(  # type: ignore[no-untyped-def]
    root: Path, pair_list, layout, chosen, names, sweep, gpus, dry_run, timeout, on_gpus, keep_going, err, inspector
) -> int:
    """One run per host pair (its own run directory, root/<a>__<b>), then `ncclscope fleet` over them."""
    from ncclscope.runner import plan as planning
    from ncclscope.runner.environment import debug_environment

    limit = timeout if timeout is not None else (planning.GPU_TIMEOUT_S if on_gpus else planning.CPU_TIMEOUT_S)
    run_dirs = []
    for a, b in pair_list:
        pair_layout = planning.Layout(layout.launcher, layout.ranks_per_host, [a, b])
        run_dir = root / f"{a.name}__{b.name}"
        env = debug_environment(run_dir, os.environ, hosts=2, inspector=inspector)
        steps = planning.plan_steps(
            names, chosen.binaries, sweep, pair_layout, env.names, "nccl" if gpus else "gloo", sys.executable
        )
        if dry_run:
            print(f"# pair {a.name} {b.name}")
            _print_plan(chosen.name, env, steps, run_dir, planning.each_host_prefix(pair_layout))
            continue
        code = _run(run_dir, chosen.name, pair_layout, env, steps, limit, sweep, keep_going, True, FailOn.never)
        if code in INTERRUPTED:
            return code
        run_dirs.append(str(run_dir))
    fleet_argv = ["ncclscope", "fleet", *(run_dirs or [str(root / f"{a.name}__{b.name}") for a, b in pair_list])]
    if dry_run:
        print(f"# then: {' '.join(fleet_argv)}")
        return 0
    err.print(f"ncclscope: {len(run_dirs)} pairs run; now {' '.join(fleet_argv[:2])} over their run directories")
    import subprocess

    return subprocess.run([sys.executable, "-m", "ncclscope", *fleet_argv[1:]], check=False).returncode


def _print_plan(
    backend: str, env: "RunEnvironment", steps: list[tuple[str, list[str]]], run_dir: Path, each_host: list[str] | None
) -> None:
    """--dry-run: the environment each command gets, then the commands, one per collective (shell syntax)."""
    import shlex

    print(f"# backend {backend}; run directory {run_dir} (not created: --dry-run)")
    if each_host:
        print(
            f"# each host's own reports (nvidia-smi, ibstat) are taken there through: {shlex.join(each_host)} sh -c ..."
        )
    for name, value in env.wanted.items():
        if name in env.user:
            print(f"# {name}={shlex.quote(env.user[name])} (yours, kept; ncclscope would set {value})")
        else:
            print(f"export {name}={shlex.quote(value)}")
    for _, argv in steps:
        print(shlex.join(argv))


def _run(
    run_dir: Path,
    backend: str,
    layout: "Layout",
    env: "RunEnvironment",
    steps: list[tuple[str, list[str]]],
    timeout_s: float,
    sweep: "Sweep",
    keep_going: bool,
    no_analyze: bool,
    fail_on: FailOn,
) -> int:
    from rich.console import Console

    from ncclscope import __version__
    from ncclscope.model import RunRecord, RunStep
    from ncclscope.runner.plan import each_host_prefix
    from ncclscope.runner.rundir import create_run_dir, now
    from ncclscope.runner.session import Settings, execute

    err = Console(stderr=True, highlight=False, soft_wrap=True)
    problem = create_run_dir(run_dir)
    if problem:
        err.print(f"ncclscope: {problem}", markup=False)
        return EXIT_USAGE
    for name, value in env.user.items():
        err.print(f"ncclscope: keeping your {name}={value} (ncclscope would set {env.wanted[name]})", markup=False)
    record = RunRecord(
        ncclscope_version=__version__,
        started=now(),
        host=socket.gethostname(),
        argv=["ncclscope", *sys.argv[1:]],
        backend=backend,
        launcher=layout.launcher,
        hosts=[h.name for h in layout.hosts],
        ranks_per_host=layout.ranks_per_host,
        env_set=env.applied,
        env_user=env.user,
        steps=[RunStep(collective=c, command=argv) for c, argv in steps],
    )
    settings = Settings(
        timeout_s=timeout_s,
        sizes=sweep.sizes(),
        keep_going=keep_going,
        each_host=each_host_prefix(layout),
        hosts=tuple(h.name for h in layout.hosts),
    )
    record = execute(run_dir, record, env.for_children(os.environ), settings, err)
    code = _analyze(run_dir, fail_on, err) if not no_analyze else 0
    failed = [s for s in record.steps if s.status in ("failed", "timed_out")]
    if record.interrupted:
        err.print(f"ncclscope: {record.stopped}; what was collected is kept in {run_dir}", markup=False)
        return exit_status(record.stop_signal or signal.SIGINT)
    err.print(f"ncclscope: run directory {run_dir}", markup=False)
    return EXIT_FINDINGS if failed else code


def _analyze(run_dir: Path, fail_on: FailOn, err: "Console") -> int:
    """Findings printed like `ncclscope analyze`; 1 when one reaches --fail-on."""
    from rich.console import Console

    from ncclscope.render.findings import print_text
    from ncclscope.runner.session import analyze_run

    analysis, messages = analyze_run(run_dir)
    for message in messages:
        err.print(f"ncclscope: {message}", markup=False)
    print_text(analysis, Console(highlight=False, soft_wrap=True))
    err.print(f"ncclscope: wrote {run_dir / 'report.html'} and {run_dir / 'findings.json'}", markup=False)
    return findings_exit(analysis.summary, fail_on)
