"""Inputs that are pipes with a name: `ncclscope analyze <(kubectl logs ...)` (bash hands over /dev/fd/63)
and named pipes (mkfifo). What is read from a pipe is gone from it: every command reads such an input
once, in order, as it reads stdin; it is never sniffed or opened a second time (which read it as empty).

Real named pipes and real child processes; a thread of the test is the job that writes into the pipe.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from ncclscope.inputs.opening import expand_inputs
from ncclscope.inputs.redact import redact_inputs
from ncclscope.tui.following import prepare_followed
from ncclscope.tui.loading import prepare_inputs

REPO = Path(__file__).resolve().parent.parent
SOCKET_LOG = REPO / "fixtures" / "nccl" / "v2_26_socket_fallback.log"
OTHER_LOG = REPO / "fixtures" / "mixed" / "multi_host_job_problems.txt"
WAIT = 60.0

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX named pipes")


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "job.pipe"
    os.mkfifo(path)
    yield path


def writer(path: Path, data: bytes, hold_open: threading.Event | None = None) -> threading.Thread:
    """The job: opens the pipe for writing (it waits for a reader), writes, and closes it, or keeps it
    open until `hold_open` is set (a job that hangs)."""

    def write() -> None:
        with open(path, "wb") as pipe:
            pipe.write(data)
            pipe.flush()
            if hold_open is not None:
                hold_open.wait(WAIT)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def ncclscope(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ncclscope", *args], capture_output=True, text=True, cwd=REPO, timeout=WAIT
    )


def started(*args: str) -> subprocess.Popen[str]:
    """`ncclscope ARGS` running, its output read by the test."""
    return subprocess.Popen(
        [sys.executable, "-m", "ncclscope", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO, text=True
    )


@contextmanager
def hung_job_read_by(fifo: Path, *args: str) -> Iterator[tuple[subprocess.Popen[str], threading.Event]]:
    """A job that writes the socket-fallback log into `fifo` and holds it open (until the event is set), and
    `ncclscope ARGS` running, its output read by the test; neither is left behind."""
    still_running = threading.Event()
    job = writer(fifo, SOCKET_LOG.read_bytes(), hold_open=still_running)
    child = started(*args)
    try:
        yield child, still_running
    finally:
        still_running.set()
        if child.poll() is None:
            child.kill()
        job.join(WAIT)


def test_a_pipe_is_not_a_regular_file_and_is_read_as_a_stream(fifo: Path) -> None:
    (item,), problems = expand_inputs([str(fifo)])
    assert not problems and item.is_stream and not item.is_stdin
    (plain,), _ = expand_inputs([str(SOCKET_LOG)])
    assert not plain.is_stream


def test_analyze_reads_what_the_job_writes_into_a_pipe(fifo: Path) -> None:
    job = writer(fifo, SOCKET_LOG.read_bytes())
    done = ncclscope("analyze", str(fifo), str(OTHER_LOG))
    job.join(WAIT)
    assert "empty input" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert "NET001 socket-transport" in done.stdout
    assert str(fifo) in done.stdout  # its lines are cited by the pipe's name
    assert done.returncode == 1  # errors found: both inputs were read


def test_parse_counts_every_line_of_a_pipe(fifo: Path) -> None:
    data = SOCKET_LOG.read_bytes()
    job = writer(fifo, data)
    done = ncclscope("parse", str(fifo))
    job.join(WAIT)
    assert done.returncode == 0, done.stderr
    lines = data.count(b"\n")
    assert f"{fifo}: nccl_log, {lines} lines" in done.stdout


def test_ctrl_c_on_a_pipe_the_job_keeps_open_analyzes_what_was_read(fifo: Path) -> None:
    """A hung job: the pipe never ends. As with stdin, Ctrl-C analyses what came and exits 130."""
    with hung_job_read_by(fifo, "analyze", str(fifo)) as (child, _):
        time.sleep(3)  # it reads the lines and waits for more
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=WAIT)
    assert child.returncode == 130, err
    assert "NET001 socket-transport" in out
    assert "reading stopped by Ctrl-C (SIGINT)" in err and "Traceback" not in err


def test_a_bundle_holds_what_was_read_from_a_pipe(fifo: Path, tmp_path: Path) -> None:
    data = SOCKET_LOG.read_bytes()
    job = writer(fifo, data)
    target = tmp_path / "ticket.tar.gz"
    done = ncclscope("bundle", str(fifo), "-o", str(target))
    job.join(WAIT)
    assert done.returncode == 0 and "empty input" not in done.stderr, done.stderr
    with tarfile.open(target) as tar:
        (member,) = [m for m in tar.getmembers() if m.name.startswith("inputs/")]
        assert tar.extractfile(member).read() == data  # type: ignore[union-attr]
    assert "NET001 socket-transport" in ncclscope("analyze", str(target)).stdout


def test_redacting_a_pipe_reads_it_once(fifo: Path, tmp_path: Path) -> None:
    data = SOCKET_LOG.read_bytes()
    job = writer(fifo, data)
    files, _ = expand_inputs([str(fifo)])
    (copy,), redactor = redact_inputs(files, tmp_path / "redacted")
    job.join(WAIT)
    redacted = Path(copy.path).read_bytes()
    assert redacted.count(b"\n") == data.count(b"\n") and redacted != data  # every line, host names replaced


def test_the_tui_keeps_a_copy_of_a_pipe_for_its_raw_log(fifo: Path) -> None:
    data = SOCKET_LOG.read_bytes()
    job = writer(fifo, data)
    prepared = prepare_inputs([str(fifo)])
    job.join(WAIT)
    (item,) = prepared.files
    assert item.display == str(fifo) and not item.is_stream
    assert Path(item.path).read_bytes() == data
    assert prepared.raw[str(fifo)] == item.path


def test_follow_prints_findings_while_the_job_keeps_its_pipe_open(fifo: Path) -> None:
    """`analyze --follow <(torchrun ...)`: each finding as soon as its lines came, as for stdin; the pipe's
    end ends it."""
    with hung_job_read_by(fifo, "analyze", "--follow", str(fifo)) as (child, still_running):
        seen: list[str] = []
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline and not any("NET001 socket-transport" in line for line in seen):
            seen.append(child.stdout.readline())  # type: ignore[union-attr]
        assert any("NET001 socket-transport" in line for line in seen), seen[-20:]
        assert child.poll() is None  # printed while the job still holds the pipe open
        still_running.set()
        out, err = child.communicate(timeout=WAIT)
    assert child.returncode == 1, err  # the pipe ended: the findings' exit status
    assert "147 lines read" in out + err and "Traceback" not in err


def test_the_tui_follows_a_pipe_given_by_name(fifo: Path) -> None:
    data = SOCKET_LOG.read_bytes()
    job = writer(fifo, data)
    prepared = prepare_followed(str(fifo))
    assert not isinstance(prepared, str), prepared
    inputs, followed = prepared
    job.join(WAIT)
    deadline = time.monotonic() + WAIT
    while not followed.poll().ended and time.monotonic() < deadline:
        time.sleep(0.05)
    assert followed.display == str(fifo) and Path(followed.path).read_bytes() == data
    assert inputs.raw == {str(fifo): followed.path}


def test_ctrl_c_while_a_named_pipe_waits_for_its_writer_ends_the_reading(fifo: Path) -> None:
    """Opening a named pipe waits until a job opens it for writing: Ctrl-C ends that wait too."""
    child = started("analyze", str(fifo))
    try:
        time.sleep(3)
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=WAIT)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 130, err
    assert f"{fifo}: nothing arrived before Ctrl-C (SIGINT)" in err and "Traceback" not in err
