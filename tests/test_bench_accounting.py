"""bench/run_bench.py's accounting: a run's CPU time includes the workers it forked and waited for
(ncclscope's parse is one process and its pool), with GNU time and with the Python fallback. The
figures themselves are the benchmark's to print, not a test's to judge."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench" / "run_bench.py"

# The parent forks a worker; each spins until its own CPU time reaches SPIN seconds, and the parent
# waits for the worker, as ncclscope's pool is waited for.
SPIN = 0.3
TWO_PROCESSES = f"""
import os, sys, time
def spin():
    while time.process_time() < {SPIN}:
        pass
pid = os.fork()
spin()
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
sys.exit(int(sys.argv[1]))
"""


@pytest.fixture(scope="module")
def run_bench():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("run_bench", BENCH)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["run_bench"] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("gnu_time", [True, False], ids=["gnu-time", "python-wrapper"])
@pytest.mark.parametrize("status", [0, 3])
def test_a_run_counts_the_cpu_time_of_the_workers_it_waited_for(run_bench, monkeypatch, gnu_time, status):
    if gnu_time and not run_bench.TIME_BIN:
        pytest.skip("GNU time is not installed here")
    if not gnu_time:
        monkeypatch.setattr(run_bench, "TIME_BIN", None)
    run = run_bench.run_child([sys.executable, "-c", TWO_PROCESSES, str(status)])
    assert run.rc == status, run.stderr
    assert run.cpu_seconds is not None and run.cpu_seconds >= 2 * SPIN - 0.02  # GNU time rounds to 10 ms
    assert run.peak_rss_mb > 1  # read past GNU time's "Command exited with non-zero status" line
    row = run_bench.timed_row("two processes", run, 100.0)
    assert row.cpu_seconds == run.cpu_seconds if status == 0 else row.seconds is None


def test_the_reachable_ratio_spreads_the_cpu_time_over_every_core(run_bench):
    regex = run_bench.Row("regex", seconds=1.0)
    parse = run_bench.Row("parse", seconds=3.0, cpu_seconds=4.0)
    assert run_bench.reachable_ratio(parse, regex, cores=2) == pytest.approx(0.5)
    assert run_bench.reachable_ratio(run_bench.Row("parse", seconds=3.0), regex, cores=2) is None
