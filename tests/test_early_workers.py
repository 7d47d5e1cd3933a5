"""Workers started before the command line loads (workers.start_early): the reading adopts them when
they were given its own tasks, stops them when not, and the Case is the one a single process reads."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ncclscope.case import read as reading
from ncclscope.cli import entry
from ncclscope.parse import split, workers

from conftest import FIXTURES

LOG = FIXTURES / "nccl/v2_18_8xh100_nvswitch.log"
STARTED_PROCESSES: list = []  # the worker processes of the pools a test started


@pytest.fixture
def big_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A log cut into ranges at a few hundred kB (the forked workers inherit the lowered thresholds)."""
    monkeypatch.setattr(split, "SPLIT_MIN_BYTES", 1)
    monkeypatch.setattr(split, "RANGE_MIN_BYTES", 1)
    target = tmp_path / "big.log"
    target.write_bytes(LOG.read_bytes() * 20)
    return target


@pytest.fixture
def pools_started(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many workers each pool started got; any early workers left are stopped after the test."""
    started: list[int] = []
    start = workers.start

    def counted(work, count):  # type: ignore[no-untyped-def]
        started.append(count)
        pool = start(work, count)
        STARTED_PROCESSES.extend(pool.executor._processes.values())  # type: ignore[union-attr]
        return pool

    monkeypatch.setattr(workers, "start", counted)
    yield started
    workers.discard_early()


def test_the_reading_takes_the_workers_started_early_for_its_file(big_log: Path, pools_started: list[int]) -> None:
    workers.start_early(["--format", "json", str(big_log), "-j", "2"])
    assert pools_started == [2]
    early = reading.read_case([str(big_log)], jobs=2)
    assert pools_started == [2]  # no second pool: the early one read the file
    assert workers._early is None
    alone = reading.read_case([str(big_log)], jobs=1)
    assert early.case.model_dump() == alone.case.model_dump()


def test_workers_started_for_other_tasks_are_stopped_and_the_reading_starts_its_own(
    big_log: Path, pools_started: list[int]
) -> None:
    workers.start_early([str(big_log), "--jobs=2"])
    early_processes = list(workers._early[2].executor._processes.values())  # type: ignore[index,union-attr]
    assert early_processes
    outcome = reading.read_case([str(big_log)], jobs=3)
    assert pools_started == [2, 3]
    assert not any(process.is_alive() for process in early_processes)
    assert outcome.case.model_dump() == reading.read_case([str(big_log)], jobs=1).case.model_dump()


@pytest.mark.parametrize(
    "args",
    [
        ["--follow", "{log}"],  # read as it grows, not in ranges
        ["-F", "{log}"],
        ["--redact", "{log}"],  # read from a redacted copy
        ["{log}", "--help"],
        ["{log}", "{log}"],  # several inputs share the workers their own way
        ["{log}", "-j", "1"],
        ["-"],
    ],
)
def test_no_workers_start_early_where_the_reading_would_not_take_them(
    big_log: Path, pools_started: list[int], args: list[str]
) -> None:
    workers.start_early([arg.format(log=big_log) for arg in args])
    assert pools_started == [] and workers._early is None


@pytest.mark.parametrize(
    ("args", "named", "jobs"),
    [
        (["--format", "json", "a.log", "-j", "3"], ["a.log"], 3),
        (["-o", "out.json", "--jobs=2", "a.log"], ["a.log"], 2),
        (["-j4", "a.log", "--select", "NET", "--fail-on", "never"], ["a.log"], 4),
        (["a.log", "--jobs", "many"], ["a.log"], None),
        (["a.log", "b.log", "-f", "text"], ["a.log", "b.log"], None),
    ],
)
def test_the_early_look_at_the_arguments(args: list[str], named: list[str], jobs: int | None) -> None:
    assert workers._inputs_and_jobs(args) == (named, jobs)


def test_the_first_look_at_a_file_size_is_the_size_split_reads_in_ranges() -> None:
    assert entry.LARGE_FILE_BYTES == split.SPLIT_MIN_BYTES


def test_the_entry_point_stops_the_early_workers_of_a_command_that_did_not_read(
    big_log: Path, pools_started: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """entry.main, in this process: the workers start for the file, typer refuses an option, and the
    workers are stopped on the way out, not left to parse the file for nothing. When stop returns they
    have all been reaped (the pool's own thread reaps them too: CI once saw one not yet marked ended)."""
    monkeypatch.setattr(entry, "LARGE_FILE_BYTES", 1)
    monkeypatch.setenv("PYDANTIC_DISABLE_PLUGINS", "none-here")  # pydantic's own plugin loader stays
    monkeypatch.setattr(sys, "argv", ["ncclscope", "parse", str(big_log), "--no-such-option"])
    STARTED_PROCESSES.clear()
    with pytest.raises(SystemExit) as stop:
        entry.main()
    assert stop.value.code == 2
    assert pools_started == [os.cpu_count()] or pools_started == []  # none on a machine of one core
    assert workers._early is None
    assert not any(process.is_alive() for process in STARTED_PROCESSES)


def test_a_command_line_error_after_an_early_start_stops_the_workers(tmp_path: Path) -> None:
    """The real entry point with a file large enough to start workers, then an option typer refuses:
    the usage error and its exit status, and the process ends without waiting for the workers."""
    big = tmp_path / "big.log"
    data = LOG.read_bytes()
    big.write_bytes(data * (split.SPLIT_MIN_BYTES // len(data) + 1))
    run = subprocess.run(
        [sys.executable, "-m", "ncclscope", "parse", str(big), "--no-such-option"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2
    assert "No such option" in run.stderr
    assert "Traceback" not in run.stderr


STOPPED_MID_SEND = """
import os, struct, sys, time
from ncclscope.parse import workers
from ncclscope.inputs.opening import InputFile

def half_a_result(task):
    # as if stopped while sending its result: a message's length, a few of its bytes, then nothing
    result_queue = sys._getframe(1).f_locals["result_queue"]  # concurrent.futures' _process_worker
    os.write(result_queue._writer.fileno(), struct.pack("!i", 1 << 20) + b"partial")
    time.sleep(120)

workers.run_task = half_a_result
pool = workers.start([InputFile("a.log", "a.log", (0, 1))], 1)
time.sleep(1.0)  # the pool's thread has read the length and waits for the rest
workers.stop(pool)
print("stopped", flush=True)
"""


def test_workers_stopped_while_sending_a_result_do_not_hold_up_the_end_of_the_process() -> None:
    """workers.stop closes this process's end of the result pipe: without it the pool's thread waits
    for the rest of the half-sent message for ever, and Python waits for that thread at exit."""
    run = subprocess.run(
        [sys.executable, "-c", STOPPED_MID_SEND], capture_output=True, text=True, timeout=90, cwd=Path(__file__).parent
    )
    assert (run.returncode, run.stdout.strip()) == (0, "stopped"), run.stderr[-2000:]


def test_workers_stopped_before_their_initializer_ran_end_even_when_the_parent_catches_sigterm(
    big_log: Path, pools_started: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker forked a moment ago still has the parent's signal handlers until its initializer runs.
    Where the parent catches SIGTERM (inputs/interrupts.py while reading, or a program that imports ncclscope),
    a SIGTERM sent then only calls that handler, and the worker goes on with its ranges: stop must not
    rely on it. The workers end by the stop (a signal), not by finishing their work."""
    initializer = workers._ignore_ctrl_c

    def late_initializer() -> None:
        time.sleep(1.0)  # the stop arrives while the parent's handler is still in place
        initializer()

    monkeypatch.setattr(workers, "_ignore_ctrl_c", late_initializer)
    caught: list[int] = []
    before = signal.signal(signal.SIGTERM, lambda signum, frame: caught.append(signum))
    try:
        STARTED_PROCESSES.clear()
        workers.start_early([str(big_log), "-j", "2"])
        started = list(STARTED_PROCESSES)
        assert started
        workers.discard_early()
    finally:
        signal.signal(signal.SIGTERM, before)
    assert [process.exitcode is not None and process.exitcode < 0 for process in started] == [True] * len(started)
    assert caught == []  # the parent itself was never signalled


def test_workers_are_forked_before_the_readers_and_models_load() -> None:
    """What runs before the fork runs while one core idles: the ranges' workers need the log parser only,
    and the models (pydantic) and other readers load in the command beside them."""
    probe = (
        "import sys; from ncclscope.parse import workers; from ncclscope.parse import fields; fields.grammar_parser(); "
        "print(sorted(m for m in ('ncclscope.model', 'pydantic', 'ncclscope.parse.one_input') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
