"""Throughput, memory and scaling of ``ncclscope parse`` and ``analyze`` on three log profiles.

Per profile (bench/generate_log.py: init-heavy, COLL-heavy, mixed), on the same file and in one
run: ``grep -c`` (the floor), a Python one-regex-per-line loop (the baseline the targets are
relative to), ``ncclscope parse --format json`` and ``analyze`` at default settings (all cores),
and ``parse --jobs 1`` (the speed-up of one file on every core). Then several files, and start-up.
Every measurement runs in its own child process through GNU ``time -f %M``, so each peak RSS is
isolated; for a child that forks workers it is the largest single process. See bench/README.md.

Usage::

    python bench/run_bench.py          # every profile at 100 MB
    python bench/run_bench.py --gb     # and at 1 GB
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
sys.path.insert(0, str(BENCH_DIR))

import generate_log  # noqa: E402  (sibling module, found through sys.path)

MB = generate_log.MB
# The baseline must find the NCCL prefix on the lines that have one, after whatever a launcher or a
# timestamp put before it (`[1,5]<stdout>:`, `[rank5]:`, `5: `, `[2026-03-14 10:17:06]`) and before a
# TRACE record's time and function; a regex that fails at the first byte measures nothing.
PREFIX_RE = re.compile(
    rb"^(?:\[[^\]]*\](?:<\w+>)?:?\s*|\d+: )*(\S+):(\d+):(\d+) \[(\d+)\] (?:[\d.]+ \S+ )?NCCL (INFO|WARN|TRACE)"
)
TARGET_MB_S = 50.0
TARGET_RATIO = 0.35  # of the same-run one-regex-per-line Python loop
TARGET_RSS_MB = 300.0
TARGET_SPEEDUP = 1.7  # one 1 GB file on 2 cores
TARGET_STARTUP_S = 0.4
TARGET_RATIO_MB = 1000.0  # the ratio to the regex loop is judged at 1 GB, where once-per-run costs no longer dominate
TARGET_SPREAD = 1.5  # of repeated runs of one input, the slowest over the fastest
STDERR_TAIL_LINES = 15


@dataclass
class ChildRun:
    """Outcome of one child process."""

    rc: int
    seconds: float
    peak_rss_mb: float
    stdout: str
    stderr: str
    cpu_seconds: float | None = None  # user + system, with the processes it waited for (its workers)
    spread: float | None = None  # of repeated runs, the slowest's time over the fastest's


@dataclass
class Row:
    """One line of the result table."""

    name: str
    seconds: float | None = None
    mb_per_s: float | None = None
    peak_rss_mb: float | None = None
    vs_ncclscope: float | None = None
    cpu_seconds: float | None = None
    note: str = ""
    spread: float | None = None  # slowest / fastest of the repeats (one run: None)


# --------------------------------------------------------------------------
# Child processes.
# --------------------------------------------------------------------------


def child_env() -> dict[str, str]:
    """Environment for children: the repository (and its src/ layout, if
    any) on PYTHONPATH, so ``ncclscope`` imports without being installed."""
    env = dict(os.environ)
    paths = [str(p) for p in (REPO_ROOT / "src", REPO_ROOT) if p.is_dir()]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    # An installed package has its bytecode compiled (pip does it at install); a checkout run with
    # PYTHONDONTWRITEBYTECODE would compile every changed module again in each child and each
    # worker, which measures the compiler, not ncclscope.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


TIME_BIN = shutil.which("time", path="/usr/bin:/bin")

# Fallback when GNU time is missing: run the command from a small fresh
# Python process and report RUSAGE_CHILDREN (its ru_maxrss includes a few MB of
# the wrapper itself, copied into the child by fork), in GNU time's order.
RSS_WRAPPER = (
    "import resource, subprocess, sys\n"
    "rc = subprocess.call(sys.argv[2:])\n"
    "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "open(sys.argv[1], 'w').write(f'{u.ru_maxrss} {u.ru_utime} {u.ru_stime}')\n"
    "sys.exit(rc if rc >= 0 else 128 - rc)\n"
)


def run_child(cmd: list[str], capture_stdout: bool = False) -> ChildRun:
    """Run ``cmd``; return its exit status, wall time, peak RSS and CPU time.

    The peak RSS is read by a small intermediate process (GNU ``time -f %M``,
    else a tiny Python wrapper): ``ru_maxrss`` survives ``exec``, so measuring
    the child directly from this (large) process would report at least this
    process's own size, copied in by fork. The CPU time is the child's user and
    system time with that of the processes it waited for: ncclscope's workers."""
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.NamedTemporaryFile("r", suffix=".rss") as rss,
    ):
        if TIME_BIN:
            full = [TIME_BIN, "-f", "%M %U %S", "-o", rss.name, *cmd]
        else:
            full = [sys.executable, "-c", RSS_WRAPPER, rss.name, *cmd]
        t0 = time.perf_counter()
        proc = subprocess.run(
            full,
            stdin=subprocess.DEVNULL,
            stdout=out if capture_stdout else subprocess.DEVNULL,
            stderr=err,
            env=child_env(),
            check=False,
        )
        seconds = time.perf_counter() - t0
        out.seek(0)
        err.seek(0)
        # the last line: GNU time writes "Command exited with non-zero status N" before it
        usage = (rss.read().strip().splitlines() or [""])[-1].split()
        rss_kib, cpu = _usage(usage)
        return ChildRun(
            rc=proc.returncode,
            seconds=seconds,
            peak_rss_mb=rss_kib / 1024.0,  # KiB on Linux
            stdout=out.read().decode(errors="replace"),
            stderr=err.read().decode(errors="replace"),
            cpu_seconds=cpu,
        )


def _usage(fields: list[str]) -> tuple[int, float | None]:
    """Peak RSS in KiB and CPU seconds (user + system) from "MAXRSS USER SYSTEM"."""
    try:
        return int(fields[0]), float(fields[1]) + float(fields[2])
    except (IndexError, ValueError):
        return (int(fields[0]) if fields and fields[0].isdigit() else 0), None


def run_best(cmd: list[str], repeat: int, capture_stdout: bool = False, refused_ok: bool = False) -> ChildRun:
    """Run ``cmd`` ``repeat`` times; keep the fastest run, the highest RSS and the slowest over the fastest.
    Stops at the first failure and returns it."""
    best: ChildRun | None = None
    peak = 0.0
    slowest = 0.0
    for _ in range(repeat):
        run = run_child(cmd, capture_stdout)
        if refused_ok and run.rc == 2 and "no NCCL log, topology matrix or nccl-tests output found" in run.stderr:
            run.rc = 0  # text that is no log at all is refused in one line: that is the run to time
        if run.rc != 0:
            return run
        peak = max(peak, run.peak_rss_mb)
        slowest = max(slowest, run.seconds)
        if best is None or run.seconds < best.seconds:
            best = run
    assert best is not None
    best.peak_rss_mb = peak
    best.spread = slowest / best.seconds if repeat > 1 and best.seconds else None
    return best


def stderr_tail(text: str) -> str:
    return "\n".join(text.rstrip().splitlines()[-STDERR_TAIL_LINES:])


def self_cmd(*args: str) -> list[str]:
    """Command line that runs a worker of this script in a fresh process."""
    return [sys.executable, str(Path(__file__).resolve()), "--worker", *args]


# --------------------------------------------------------------------------
# Workers (run inside child processes, print one JSON object).
# --------------------------------------------------------------------------


def worker_regex(path: str) -> dict[str, Any]:
    """Baseline: one compiled prefix regex per line, binary mode."""
    match = PREFIX_RE.match
    lines = matched = 0
    with open(path, "rb") as fh:
        for line in fh:
            lines += 1
            if match(line):
                matched += 1
    return {"lines": lines, "matched": matched}


def run_worker(argv: list[str]) -> int:
    kind, path, *rest = argv
    if kind == "regex":
        result = worker_regex(path)
    else:
        raise SystemExit(f"unknown worker {kind!r}")
    print(json.dumps(result))
    return 0


# --------------------------------------------------------------------------
# Measurements.
# --------------------------------------------------------------------------


def mb_of(paths: list[str]) -> float:
    return sum(os.path.getsize(p) for p in paths) / MB


def timed_row(name: str, run: ChildRun, size_mb: float, note: str = "") -> Row:
    if run.rc != 0:
        print(
            f"\n[{name}] failed with exit status {run.rc}; stderr tail:\n{stderr_tail(run.stderr)}\n",
            file=sys.stderr,
        )
        return Row(name, note=f"FAILED (exit {run.rc})")
    return Row(
        name,
        seconds=run.seconds,
        mb_per_s=size_mb / run.seconds,
        peak_rss_mb=run.peak_rss_mb,
        note=note,
        cpu_seconds=run.cpu_seconds,
        spread=run.spread,
    )


def measure_grep(path: str, size_mb: float, repeat: int) -> Row:
    run = run_best(["grep", "-c", "NCCL INFO", path], repeat, capture_stdout=True)
    if run.rc == 1:  # grep: no line matched, still a valid measurement
        run.rc = 0
    return timed_row("grep -c 'NCCL INFO'", run, size_mb, f"{run.stdout.strip()} INFO lines" if run.rc == 0 else "")


def measure_regex(path: str, size_mb: float, repeat: int) -> Row:
    run = run_best(self_cmd("regex", path), repeat, capture_stdout=True)
    note = ""
    if run.rc == 0:
        info = json.loads(run.stdout)
        note = f"{info['lines']} lines, {info['matched']} matched"
    return timed_row("python: for line in f + 1 regex", run, size_mb, note)


def ncclscope_cmd(paths: list[str], jobs: int | None = None, command: str = "parse") -> list[str]:
    cmd = [sys.executable, "-m", "ncclscope", command, "--format", "json"]
    if command == "analyze":
        cmd += ["--fail-on", "never"]
    if jobs is not None:
        cmd += ["--jobs", str(jobs)]
    return cmd + paths


def measure_scaling(paths: list[str], jobs: int, repeat: int) -> tuple[Row, Row, float | None]:
    """--jobs 1 and --jobs N on the same files, and the speed-up."""
    size_mb = mb_of(paths)
    label = f"{len(paths)} files, {size_mb:.0f} MB"
    single = timed_row(f"ncclscope --jobs 1, {label}", run_best(ncclscope_cmd(paths, 1), repeat), size_mb)
    multi = timed_row(f"ncclscope --jobs {jobs}, {label}", run_best(ncclscope_cmd(paths, jobs), repeat), size_mb)
    speedup = None
    if single.seconds and multi.seconds:
        speedup = single.seconds / multi.seconds
        multi.note = (
            f"speedup {speedup:.2f}x vs --jobs 1 (ideal {min(jobs, os.cpu_count() or 1)}x); RSS = largest process"
        )
    return single, multi, speedup


# --------------------------------------------------------------------------
# Input files.
# --------------------------------------------------------------------------


def ensure_log(workdir: Path, size_mb: float, seed: int, files: int, profile: str = "init") -> list[str]:
    """Generate the log (``files`` parts) of ``profile`` unless cached; return its paths."""
    stem = f"nccl-{profile}-{size_mb:g}mb-seed{seed}" + (f"-files{files}" if files > 1 else "") + ".log"
    final = generate_log.output_paths(str(workdir / stem), files)
    if all(os.path.exists(p) for p in final):
        return final
    tmp_prefix = str(workdir / (stem + ".tmp"))
    print(f"generating {size_mb:g} MB {profile} log in {files} file(s) under {workdir} ...", file=sys.stderr)
    t0 = time.perf_counter()
    tmp = generate_log.generate(tmp_prefix, int(size_mb * MB), seed, files, profile)
    for src, dst in zip(tmp, final, strict=True):
        os.replace(src, dst)
    dt = time.perf_counter() - t0
    print(f"  done in {dt:.1f} s ({size_mb / dt:.0f} MB/s)", file=sys.stderr)
    return final


# --------------------------------------------------------------------------
# Report.
# --------------------------------------------------------------------------


def _fmt(value: float | None, spec: str, unit: str = "") -> str:
    return "-" if value is None else format(value, spec) + unit


@dataclass
class ProfileResult:
    """The rows of one profile at one size."""

    profile: str
    size_mb: float
    style: str
    grep: Row
    regex: Row
    parse: Row
    analyze: Row
    one_core: Row

    @property
    def speedup(self) -> float | None:
        if self.parse.seconds and self.one_core.seconds:
            return self.one_core.seconds / self.parse.seconds
        return None

    @property
    def spread(self) -> float | None:
        """The largest slowest/fastest of the ncclscope rows (None with one run each)."""
        values = [r.spread for r in (self.parse, self.analyze, self.one_core) if r.spread is not None]
        return max(values) if values else None

    @property
    def rss(self) -> float | None:
        values = [r.peak_rss_mb for r in (self.parse, self.analyze, self.one_core) if r.peak_rss_mb is not None]
        return max(values) if values else None


def measure_profile(workdir: Path, size_mb: float, seed: int, profile: str, repeat: int) -> ProfileResult:
    log = ensure_log(workdir, size_mb, seed, 1, profile)[0]
    size = mb_of([log])
    refused = profile == "random"  # no log: the one-line refusal (exit 2) is what a user gets
    return ProfileResult(
        profile,
        size,
        generate_log.describe(seed, profile),
        measure_grep(log, size, repeat),
        measure_regex(log, size, repeat),
        timed_row("parse", run_best(ncclscope_cmd([log]), repeat, refused_ok=refused), size),
        timed_row("analyze", run_best(ncclscope_cmd([log], command="analyze"), repeat, refused_ok=refused), size),
        timed_row("parse --jobs 1", run_best(ncclscope_cmd([log], 1), repeat, refused_ok=refused), size),
    )


def ratio(row: Row, base: Row) -> float | None:
    return row.mb_per_s / base.mb_per_s if row.mb_per_s and base.mb_per_s else None


def reachable_ratio(row: Row, base: Row, cores: int) -> float | None:
    """The ratio to the regex loop that `row` would reach if its CPU time were spread evenly over every
    core from start to end: where it is under the target, the run does too much work for any better
    use of the cores to meet it."""
    if not row.cpu_seconds or not base.seconds:
        return None
    return base.seconds * cores / row.cpu_seconds


def render_profiles(results: list[ProfileResult]) -> str:
    header = (
        "profile",
        "MB",
        "grep MB/s",
        "regex MB/s",
        "parse MB/s",
        "/regex",
        "CPU s",
        "/regex max",
        "analyze MB/s",
        "/regex",
        "1 core MB/s",
        "speed-up",
        "peak RSS MB",
        "slowest/fastest",
    )
    body = [
        (
            r.profile,
            f"{r.size_mb:.0f}",
            _fmt(r.grep.mb_per_s, ".0f"),
            _fmt(r.regex.mb_per_s, ".1f"),
            _fmt(r.parse.mb_per_s, ".1f"),
            _fmt(ratio(r.parse, r.regex), ".2f"),
            _fmt(r.parse.cpu_seconds, ".2f"),
            _fmt(reachable_ratio(r.parse, r.regex, os.cpu_count() or 1), ".2f"),
            _fmt(r.analyze.mb_per_s, ".1f"),
            _fmt(ratio(r.analyze, r.regex), ".2f"),
            _fmt(r.one_core.mb_per_s, ".1f"),
            _fmt(r.speedup, ".2f", "x"),
            _fmt(r.rss, ".0f"),
            _fmt(r.spread, ".2f"),
        )
        for r in results
    ]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(header)]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(
            c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    return "\n".join([line(header), "  ".join("-" * w for w in widths), *(line(b) for b in body)])


def render_table(rows: list[Row]) -> str:
    header = ("benchmark", "seconds", "MB/s", "peak RSS MB", "notes")
    body = [(r.name, _fmt(r.seconds, ".2f"), _fmt(r.mb_per_s, ".1f"), _fmt(r.peak_rss_mb, ".0f"), r.note) for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(header)]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(
            c.rjust(w) if i in (1, 2, 3) else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    return "\n".join([line(header), "  ".join("-" * w for w in widths), *(line(b) for b in body)])


def measure_startup(workdir: Path, repeat: int) -> list[Row]:
    """`ncclscope --version` and `analyze` of a 10 kB log: what a user waits for on every small call."""
    small = workdir / "small-10kb.log"
    if not small.exists():
        data = (REPO_ROOT / "fixtures" / "nccl" / "v2_18_8xh100_nvswitch.log").read_bytes()
        small.write_bytes(data[: data.rfind(b"\n", 0, 10_000) + 1])
    rows = []
    for name, cmd in (
        ("ncclscope --version", [sys.executable, "-m", "ncclscope", "--version"]),
        ("ncclscope analyze 10 kB", [sys.executable, "-m", "ncclscope", "analyze", "--fail-on", "never", str(small)]),
    ):
        run = run_best(cmd, max(repeat, 5))
        rows.append(timed_row(name, run, os.path.getsize(small) / MB))
    return rows


def target_lines(
    results: list[ProfileResult], scaling: tuple[float | None, float] | None, startup: list[Row], jobs: int
) -> list[str]:
    """The targets of issue 11 next to the measured figures, with PASS/MISS."""

    def verdict(ok: bool) -> str:
        return "PASS" if ok else "MISS"

    items = []
    for r in results:
        for row in (r.parse, r.analyze):
            rel = ratio(row, r.regex)
            if r.size_mb >= TARGET_RATIO_MB:  # issue 42: the ratio at 1 GB, MB/s at 100 MB
                ok = bool(rel and rel >= TARGET_RATIO)
                label = f"{r.profile} {r.size_mb:.0f} MB {row.name}: >= {TARGET_RATIO} x regex"
            else:
                ok = bool(row.mb_per_s and row.mb_per_s >= TARGET_MB_S)
                label = f"{r.profile} {r.size_mb:.0f} MB {row.name}: >= {TARGET_MB_S:g} MB/s"
            items.append((label, f"{_fmt(row.mb_per_s, '.1f')} MB/s, {_fmt(rel, '.2f')} x {verdict(ok)}"))
        if r.spread is not None:
            items.append(
                (
                    f"{r.profile} {r.size_mb:.0f} MB slowest run <= {TARGET_SPREAD}x the fastest",
                    f"{r.spread:.2f}x {verdict(r.spread <= TARGET_SPREAD)}",
                )
            )
        if r.size_mb >= 1000:
            items.append(
                (
                    f"{r.profile} 1 GB peak RSS < {TARGET_RSS_MB:g} MB",
                    f"{_fmt(r.rss, '.0f')} MB {verdict((r.rss or 1e9) < TARGET_RSS_MB)}",
                )
            )
            items.append(
                (
                    f"{r.profile} 1 GB speed-up on {os.cpu_count() or 1} cores >= {TARGET_SPEEDUP}x",
                    f"{_fmt(r.speedup, '.2f')}x {verdict((r.speedup or 0) >= TARGET_SPEEDUP)}",
                )
            )
    if scaling is not None:
        speedup, size_mb = scaling
        label = f"{jobs} files of {size_mb / jobs:.0f} MB, speed-up on {os.cpu_count() or 1} cores"
        if size_mb >= 1000:  # the target is set for 1 GB, like one file's
            ok = (speedup or 0) >= TARGET_SPEEDUP
            items.append((f"{label} >= {TARGET_SPEEDUP}x", f"{_fmt(speedup, '.2f')}x {verdict(ok)}"))
        else:
            items.append((label, f"{_fmt(speedup, '.2f')}x (the target is for 1 GB: --gb)"))
    for row in startup:
        items.append(
            (
                f"{row.name} < {TARGET_STARTUP_S} s",
                f"{_fmt(row.seconds, '.2f')} s {verdict((row.seconds or 9) < TARGET_STARTUP_S)}",
            )
        )
    width = max(len(label) for label, _ in items)
    return ["targets:", *(f"  {label.ljust(width)} : {value}" for label, value in items)]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        return run_worker(argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=float, default=100.0, help="log size in MiB (default 100)")
    ap.add_argument("--gb", action="store_true", help="also run every profile at 1 GB")
    ap.add_argument("--profile", choices=generate_log.PROFILES, action="append", help="only these (default: all)")
    ap.add_argument("--workdir", default="/tmp/ncclscope-bench", help="where logs and results.json go")
    ap.add_argument("--jobs", type=int, default=2, help="files for the several-files rows (default 2)")
    ap.add_argument("--seed", type=int, default=1, help="generator seed (default 1)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per measurement, best time kept")
    args = ap.parse_args(argv)

    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    cores = os.cpu_count() or 1
    profiles = args.profile or list(generate_log.PROFILES)
    sizes = [args.size_mb] + ([1024.0] if args.gb and args.size_mb != 1024 else [])
    print(f"python {platform.python_version()}, cpu_count={cores}, default settings (all cores)", file=sys.stderr)
    results = []
    for size in sizes:
        for profile in profiles:
            results.append(measure_profile(workdir, size, args.seed, profile, args.repeat))
            print(render_profiles(results[-1:]).splitlines()[-1], file=sys.stderr)
    scaling: tuple[float | None, float] | None = None
    extra: list[Row] = []
    if args.jobs > 1:  # several files of one job, at the largest size (the speed-up target is for 1 GB)
        parts = ensure_log(workdir, max(sizes), args.seed, args.jobs)
        single, multi, speedup = measure_scaling(parts, args.jobs, args.repeat)
        scaling = (speedup, mb_of(parts))
        extra += [single, multi]
    startup = measure_startup(workdir, args.repeat)
    extra += startup

    print(f"\nncclscope benchmark, cpu_count={cores}; per profile (generated, formatting drawn from seed {args.seed}):")
    for r in results:
        print(f"  {r.profile} {r.size_mb:.0f} MB: {r.style}")
    print()
    print(render_profiles(results))
    print()
    print(render_table(extra))
    print()
    targets = target_lines(results, scaling, startup, args.jobs)
    print("\n".join(targets))
    out = workdir / "results.json"
    out.write_text(
        json.dumps(
            {
                "seed": args.seed,
                "cpu_count": cores,
                "python": platform.python_version(),
                "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "profiles": [
                    {
                        **{k: getattr(r, k) for k in ("profile", "size_mb", "style", "speedup", "rss", "spread")},
                        **{
                            name: asdict(getattr(r, name)) for name in ("grep", "regex", "parse", "analyze", "one_core")
                        },
                    }
                    for r in results
                ],
                "rows": [asdict(r) for r in extra],
                "targets": targets,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"\nresults written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
