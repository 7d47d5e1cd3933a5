"""Throughput and memory benchmark of ``ncclscope parse`` against baselines.

One command generates (or reuses) a large synthetic NCCL log with
``bench/generate_log.py`` and measures, on the same file and in one run:

* ``grep -c 'NCCL INFO'``: the floor, a C tool that only scans bytes;
* a Python ``for line in f`` loop matching one compiled prefix regex per line:
  what the cheapest pure-Python pass costs;
* Lark LALR on a sample of lines (``ncclscope.grammars.nccl_record_parser``),
  extrapolated to the whole file;
* ``python -m ncclscope parse --format json FILE > /dev/null``;
* multi-file scaling: the same total size split into ``--jobs`` files, parsed
  with ``--jobs N`` and with ``--jobs 1``.

Every measurement runs in its own child process, started through GNU
``time -f %M`` (or a tiny Python wrapper when it is missing), so each peak
RSS figure is isolated; for a child that forks workers it is the largest
single process.  Wall time is taken around the child.
The table is printed and also written to ``<workdir>/results.json``.

Usage::

    python bench/run_bench.py                    # 100 MB
    python bench/run_bench.py --size-mb 1024     # 1 GB

Sizes and rates are in MiB (1 MB = 1,048,576 bytes).
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
PREFIX_RE = re.compile(rb"^(\S*):(\d+):(\d+) \[(\d+)\] NCCL (INFO|WARN)")
TARGET_MB_S = 50.0
TARGET_RSS_MB = 400.0
STDERR_TAIL_LINES = 15


@dataclass
class ChildRun:
    """Outcome of one child process."""

    rc: int
    seconds: float
    peak_rss_mb: float
    stdout: str
    stderr: str


@dataclass
class Row:
    """One line of the result table."""

    name: str
    seconds: float | None = None
    mb_per_s: float | None = None
    peak_rss_mb: float | None = None
    vs_ncclscope: float | None = None
    note: str = ""


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
    return env


TIME_BIN = shutil.which("time", path="/usr/bin:/bin")

# Fallback when GNU time is missing: run the command from a small fresh
# Python process and report RUSAGE_CHILDREN.ru_maxrss (includes a few MB of
# the wrapper itself, copied into the child by fork).
RSS_WRAPPER = (
    "import resource, subprocess, sys\n"
    "rc = subprocess.call(sys.argv[2:])\n"
    "open(sys.argv[1], 'w').write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))\n"
    "sys.exit(rc if rc >= 0 else 128 - rc)\n"
)


def run_child(cmd: list[str], capture_stdout: bool = False) -> ChildRun:
    """Run ``cmd``; return its exit status, wall time and peak RSS.

    The peak RSS is read by a small intermediate process (GNU ``time -f %M``,
    else a tiny Python wrapper): ``ru_maxrss`` survives ``exec``, so measuring
    the child directly from this (large) process would report at least this
    process's own size, copied in by fork."""
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.NamedTemporaryFile("r", suffix=".rss") as rss,
    ):
        if TIME_BIN:
            full = [TIME_BIN, "-f", "%M", "-o", rss.name, *cmd]
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
        rss_lines = rss.read().split()
        rss_kib = int(rss_lines[-1]) if rss_lines and rss_lines[-1].isdigit() else 0
        return ChildRun(
            rc=proc.returncode,
            seconds=seconds,
            peak_rss_mb=rss_kib / 1024.0,  # KiB on Linux
            stdout=out.read().decode(errors="replace"),
            stderr=err.read().decode(errors="replace"),
        )


def run_best(cmd: list[str], repeat: int, capture_stdout: bool = False) -> ChildRun:
    """Run ``cmd`` ``repeat`` times; keep the fastest run, the highest RSS.
    Stops at the first failure and returns it."""
    best: ChildRun | None = None
    peak = 0.0
    for _ in range(repeat):
        run = run_child(cmd, capture_stdout)
        if run.rc != 0:
            return run
        peak = max(peak, run.peak_rss_mb)
        if best is None or run.seconds < best.seconds:
            best = run
    assert best is not None
    best.peak_rss_mb = peak
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


def sample_lines(path: str, n: int) -> list[str]:
    """About ``n`` non-empty lines spread evenly over the file."""
    size = os.path.getsize(path)
    seen: set[int] = set()
    lines: list[str] = []
    with open(path, "rb") as fh:
        for i in range(n):
            fh.seek(i * size // n)
            if i:
                fh.readline()  # skip the partial line
            while True:
                start = fh.tell()
                raw = fh.readline()
                if not raw or raw.strip():
                    break
            if not raw or start in seen:
                continue
            seen.add(start)
            lines.append(raw.decode("ascii", errors="replace").rstrip("\n"))
    return lines


def worker_lark(path: str, n: int) -> dict[str, Any]:
    """Parse a sample of lines with the ncclscope Lark grammar."""
    try:
        from ncclscope.grammars import nccl_record_parser

        parser = nccl_record_parser() if not hasattr(nccl_record_parser, "parse") else nccl_record_parser
    except Exception as exc:  # ImportError, missing grammar file, grammar error
        return {"available": False, "error": f"{type(exc).__name__}: {exc}"}
    lines = sample_lines(path, n)
    failures = 0
    first_error = ""
    t0 = time.perf_counter()
    for line in lines:
        try:
            parser.parse(line)
        except Exception as exc:  # lark.exceptions.* on lines it cannot parse
            failures += 1
            if not first_error:
                first_error = f"{type(exc).__name__}: {str(exc)[:300]}"
    seconds = time.perf_counter() - t0
    return {
        "available": True,
        "lines": len(lines),
        "bytes": sum(len(x) + 1 for x in lines),
        "seconds": seconds,
        "failures": failures,
        "first_error": first_error,
    }


def run_worker(argv: list[str]) -> int:
    kind, path, *rest = argv
    if kind == "regex":
        result = worker_regex(path)
    elif kind == "lark":
        result = worker_lark(path, int(rest[0]))
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
    return Row(name, seconds=run.seconds, mb_per_s=size_mb / run.seconds, peak_rss_mb=run.peak_rss_mb, note=note)


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


def measure_lark(path: str, size_mb: float, sample: int) -> Row:
    name = f"lark LALR, {sample} sampled lines"
    run = run_child(self_cmd("lark", path, str(sample)), capture_stdout=True)
    if run.rc != 0:
        print(f"\n[{name}] worker failed; stderr tail:\n{stderr_tail(run.stderr)}\n", file=sys.stderr)
        return Row(name, note="n/a (worker failed)")
    info = json.loads(run.stdout)
    if not info["available"]:
        print(f"[{name}] parser not available: {info['error']}", file=sys.stderr)
        return Row(name, note="n/a (parser not available)")
    if info["seconds"] <= 0 or not info["lines"]:
        return Row(name, note="n/a (empty sample)")
    rate = info["bytes"] / MB / info["seconds"]
    note = f"extrapolated from {info['bytes'] / MB:.2f} MB"
    if info["failures"]:
        note += f"; {info['failures']} lines failed to parse"
        print(f"[{name}] first parse error: {info['first_error']}", file=sys.stderr)
    return Row(name, seconds=size_mb / rate, mb_per_s=rate, note=note)


def ncclscope_cmd(paths: list[str], jobs: int | None = None, command: str = "parse") -> list[str]:
    cmd = [sys.executable, "-m", "ncclscope", command, "--format", "json"]
    if command == "analyze":
        cmd += ["--fail-on", "never"]
    if jobs is not None:
        cmd += ["--jobs", str(jobs)]
    return cmd + paths


def measure_ncclscope(path: str, size_mb: float, repeat: int) -> Row:
    run = run_best(ncclscope_cmd([path]), repeat)
    return timed_row("ncclscope parse --format json", run, size_mb)


def measure_analyze(path: str, size_mb: float, repeat: int) -> Row:
    """`analyze` = parse + rules: the rules must cost little (within 20% of parse)."""
    run = run_best(ncclscope_cmd([path], command="analyze"), repeat)
    return timed_row("ncclscope analyze --format json", run, size_mb)


def measure_scaling(paths: list[str], jobs: int, repeat: int) -> tuple[Row, Row]:
    size_mb = mb_of(paths)
    single = timed_row(f"ncclscope --jobs 1, {len(paths)} files", run_best(ncclscope_cmd(paths, 1), repeat), size_mb)
    multi = timed_row(
        f"ncclscope --jobs {jobs}, {len(paths)} files", run_best(ncclscope_cmd(paths, jobs), repeat), size_mb
    )
    if single.seconds and multi.seconds:
        multi.note = (
            f"speedup {single.seconds / multi.seconds:.2f}x vs --jobs 1 "
            f"(ideal {min(jobs, os.cpu_count() or 1)}x); RSS = largest process"
        )
    return single, multi


# --------------------------------------------------------------------------
# Input files.
# --------------------------------------------------------------------------


def ensure_log(workdir: Path, size_mb: float, seed: int, files: int) -> list[str]:
    """Generate the log (``files`` parts) unless cached; return its paths."""
    stem = f"nccl-{size_mb:g}mb-seed{seed}" + (f"-files{files}" if files > 1 else "") + ".log"
    final = generate_log.output_paths(str(workdir / stem), files)
    if all(os.path.exists(p) for p in final):
        return final
    tmp_prefix = str(workdir / (stem + ".tmp"))
    print(f"generating {size_mb:g} MB log in {files} file(s) under {workdir} ...", file=sys.stderr)
    t0 = time.perf_counter()
    tmp = generate_log.generate(tmp_prefix, int(size_mb * MB), seed, files)
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


def render_table(rows: list[Row]) -> str:
    header = ("benchmark", "seconds", "MB/s", "peak RSS MB", "vs ncclscope", "notes")
    body = [
        (
            r.name,
            _fmt(r.seconds, ".2f"),
            _fmt(r.mb_per_s, ".1f"),
            _fmt(r.peak_rss_mb, ".0f"),
            _fmt(r.vs_ncclscope, ".2f", "x"),
            r.note,
        )
        for r in rows
    ]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(header)]
    right = {1, 2, 3, 4}

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(header), sep, *(line(b) for b in body)])


def target_lines(main: Row, scaling: Row | None, size_mb: float, jobs: int, analyze: Row | None = None) -> list[str]:
    """The targets next to the measured figures, with PASS/MISS."""
    cores = os.cpu_count() or 1

    def verdict(ok: bool) -> str:
        return "PASS" if ok else "MISS"

    speed = rss = "n/a (ncclscope parse failed)"
    if main.mb_per_s is not None and main.peak_rss_mb is not None:
        speed = f"{main.mb_per_s:.1f} MB/s {verdict(main.mb_per_s >= TARGET_MB_S)}"
        rss = f"{main.peak_rss_mb:.0f} MB {verdict(main.peak_rss_mb < TARGET_RSS_MB)}"
        if size_mb < 1024:
            rss += f" (measured on {size_mb:.0f} MB; --size-mb 1024 for the target size)"
    scale = f"n/a (cpu_count={cores})"
    if scaling is not None and scaling.note.startswith("speedup"):
        scale = f"{scaling.note.split(';')[0]}, --jobs {jobs}, cpu_count={cores}"
    rules = "n/a"
    if analyze is not None and analyze.seconds and main.seconds:
        overhead = analyze.seconds / main.seconds - 1
        rules = f"analyze takes {100 * overhead:+.0f}% vs parse {verdict(overhead <= 0.20)}"
    items = [
        (f"single process >= {TARGET_MB_S:g} MB/s", speed),
        (f"peak RSS < {TARGET_RSS_MB:g} MB at 1 GB", rss),
        ("scaling close to linear over cores", scale),
        ("rules within 20% of parse", rules),
    ]
    width = max(len(label) for label, _ in items)
    return ["targets:", *(f"  {label.ljust(width)} : {value}" for label, value in items)]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        return run_worker(argv[1:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=float, default=100.0, help="log size in MiB (default 100)")
    ap.add_argument("--workdir", default="/tmp/ncclscope-bench", help="where logs and results.json go")
    ap.add_argument("--jobs", type=int, default=2, help="files / worker processes for the scaling rows")
    ap.add_argument("--lark-sample", type=int, default=20000, help="lines parsed by the Lark row")
    ap.add_argument("--seed", type=int, default=1, help="generator seed (default 1)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per measurement, best time kept")
    args = ap.parse_args(argv)

    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    log = ensure_log(workdir, args.size_mb, args.seed, 1)[0]
    size_mb = mb_of([log])
    cores = os.cpu_count() or 1
    print(
        f"file: {log} ({size_mb:.1f} MB), python {platform.python_version()}, cpu_count={cores}",
        file=sys.stderr,
    )

    rows = [
        measure_grep(log, size_mb, args.repeat),
        measure_regex(log, size_mb, args.repeat),
        measure_lark(log, size_mb, args.lark_sample),
        measure_ncclscope(log, size_mb, args.repeat),
    ]
    main_row = rows[-1]
    analyze_row = measure_analyze(log, size_mb, args.repeat)
    rows.append(analyze_row)
    scaling_row: Row | None = None
    if args.jobs > 1:
        parts = ensure_log(workdir, args.size_mb, args.seed, args.jobs)
        single, scaling_row = measure_scaling(parts, args.jobs, args.repeat)
        rows += [single, scaling_row]
    if main_row.mb_per_s:
        for r in rows:
            if r.mb_per_s is not None:
                r.vs_ncclscope = r.mb_per_s / main_row.mb_per_s

    table = render_table(rows)
    targets = target_lines(main_row, scaling_row, size_mb, args.jobs, analyze_row)
    print(f"\nncclscope benchmark: {size_mb:.1f} MB synthetic NCCL log (1024 ranks, 128 hosts), cpu_count={cores}\n")
    print(table)
    print()
    print("\n".join(targets))

    results = {
        "file": log,
        "size_mb": size_mb,
        "seed": args.seed,
        "jobs": args.jobs,
        "cpu_count": cores,
        "python": platform.python_version(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "rows": [asdict(r) for r in rows],
        "targets": targets,
    }
    out = workdir / "results.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nresults written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
