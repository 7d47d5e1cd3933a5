"""`ncclscope fleet` over about 2,000 files: wall time and peak RSS, in parallel (default) and serial.

The fleet is bench/generate_fleet.py's (per-node and per-pair nccl-tests outputs with NCCL_DEBUG=INFO
lines, known faults); each run is a child process measured by GNU time, so its peak RSS is its own
(for the parallel run, the largest single process).

Usage::

    python bench/fleet_bench.py [--workdir DIR] [--hosts 1010] [--pair-hosts 45]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import generate_fleet  # noqa: E402


def timed(args: list[str]) -> tuple[float, float, int]:
    """Seconds, peak RSS in MB, exit status."""
    start = time.perf_counter()
    proc = subprocess.run(["/usr/bin/time", "-f", "%M", *args], capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    rss_kb = float(proc.stderr.strip().splitlines()[-1])
    return seconds, rss_kb / 1024, proc.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--hosts", type=int, default=1010)
    parser.add_argument("--pair-hosts", type=int, default=45)
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="ncclscope-fleet-"))
    truth_file = work / "truth.json"
    if not truth_file.exists():
        generate_fleet.generate(work, hosts=args.hosts, pair_hosts=args.pair_hosts, seed=3)
    truth = json.loads(truth_file.read_text())
    base = [
        sys.executable,
        "-m",
        "ncclscope",
        "fleet",
        str(work / "nodes"),
        str(work / "pairs"),
        "-f",
        "json",
        "-o",
        str(work / "out.json"),
        "--hosts",
        f"@{work / 'hosts.txt'}",
        "--fail-on",
        "none",
    ]
    print(f"{truth['files']} files in {work}")
    rows = []
    for label, extra in (("parallel (default)", []), ("serial (--jobs 1)", ["--jobs", "1"])):
        seconds, rss, rc = timed([*base, *extra])
        rows.append((label, seconds, rss, rc))
        print(f"{label:20s} {seconds:7.2f} s  {truth['files'] / seconds:7.1f} files/s  peak RSS {rss:6.1f} MB  rc {rc}")
    report = json.loads((work / "out.json").read_text())
    slow = sorted({h["host"] for h in report["hosts"] if h["status"] == "slow"})
    print(f"speed-up {rows[1][1] / rows[0][1]:.2f}x; slow hosts found {slow == truth['slow']}")


if __name__ == "__main__":
    main()
