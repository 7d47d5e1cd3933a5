"""A job's output read while it runs: a pipe that stays open, Ctrl-C and SIGTERM, `analyze --follow`.

Real processes, real signals: the CLI runs as a child whose stdin is a pipe this test holds open, as
`torchrun ... 2>&1 | ncclscope analyze -` does while the job hangs.
"""

from __future__ import annotations

import fcntl
import os
import queue
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SOCKET_LOG = REPO / "fixtures" / "nccl" / "v2_26_socket_fallback.log"
INIT_STUCK_LOG = REPO / "fixtures" / "nccl" / "init_incomplete_two_hosts.log"
WAIT = 60.0  # generous: CI machines are slow; every wait ends as soon as its condition holds

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and pipes")


STARTED: list[subprocess.Popen] = []


@pytest.fixture(autouse=True)
def _no_child_left() -> object:
    """A failed test must not leave a follower running."""
    yield
    while STARTED:
        proc = STARTED.pop()
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=WAIT)


class Child:
    """`python -m ncclscope ARGS` with stdin a pipe we keep open, stdout/stderr read as they come."""

    def __init__(self, *args: str, stdin_data: bytes | None = None) -> None:
        self.read_end, self.write_end = os.pipe()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ncclscope", *args],
            stdin=self.read_end,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=REPO,
        )
        STARTED.append(self.proc)
        self.out: queue.Queue[str] = queue.Queue()
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        for stream, sink in ((self.proc.stdout, self.stdout), (self.proc.stderr, self.stderr)):
            threading.Thread(target=self._pump, args=(stream, sink), daemon=True).start()
        if stdin_data:
            self.write(stdin_data)

    def _pump(self, stream, sink: list[str]) -> None:  # type: ignore[no-untyped-def]
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", "replace")
            sink.append(line)
            self.out.put(line)

    def write(self, data: bytes) -> None:
        os.write(self.write_end, data)

    def unread_bytes(self) -> int:
        """Bytes still in the pipe (we hold its read end too): 0 once the child has taken them."""
        buf = fcntl.ioctl(self.read_end, termios.FIONREAD, struct.pack("i", 0))
        return struct.unpack("i", buf)[0]

    def wait_drained(self) -> None:
        deadline = time.monotonic() + WAIT
        while self.unread_bytes() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert self.unread_bytes() == 0, "the child never read its input"
        time.sleep(0.5)  # and parsed the block it took

    def wait_for(self, text: str) -> None:
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            if any(text in line for line in self.stdout + self.stderr):
                return
            try:
                self.out.get(timeout=0.2)
            except queue.Empty:
                pass
        raise AssertionError(f"{text!r} never appeared; stdout: {self.text[-1500:]} stderr: {self.errors[-1500:]}")

    def stop(self, sig: int) -> int:
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=WAIT)
        finally:
            os.close(self.write_end)
            os.close(self.read_end)
        time.sleep(0.2)  # let the pumps take the last lines
        return rc

    def close_input(self) -> int:
        os.close(self.write_end)
        try:
            return self.proc.wait(timeout=WAIT)
        finally:
            os.close(self.read_end)
            time.sleep(0.2)

    @property
    def text(self) -> str:
        return "".join(self.stdout)

    @property
    def errors(self) -> str:
        return "".join(self.stderr)


def stopped_after_reading(command: str, sig: int) -> tuple[int, Child]:
    """`ncclscope COMMAND -` fed the socket-fallback log through a pipe that stays open, then `sig`."""
    child = Child(command, "-", stdin_data=SOCKET_LOG.read_bytes())
    child.wait_drained()
    return child.stop(sig), child


def test_ctrl_c_on_an_open_pipe_analyzes_what_was_read() -> None:
    rc, child = stopped_after_reading("analyze", signal.SIGINT)
    assert rc == 130, child.errors
    assert "NET001 socket-transport" in child.text
    assert "reading stopped by Ctrl-C (SIGINT) after 147 lines" in child.errors
    assert "Traceback" not in child.errors


def test_sigterm_on_an_open_pipe_parses_what_was_read() -> None:
    rc, child = stopped_after_reading("parse", signal.SIGTERM)
    assert rc == 143, child.errors
    assert "147 lines, 145 NCCL lines" in child.text
    assert "reading stopped by SIGTERM" in child.errors


def test_ctrl_c_before_anything_arrived() -> None:
    child = Child("analyze", "-")
    time.sleep(1.0)
    rc = child.stop(signal.SIGINT)
    assert rc == 130
    assert "-: nothing arrived before Ctrl-C (SIGINT)" in child.errors
    assert "Traceback" not in child.errors
    assert "ERROR" not in child.text


def test_follow_prints_findings_before_the_interrupt() -> None:
    child = Child("analyze", "--follow", "-", stdin_data=SOCKET_LOG.read_bytes())
    child.wait_for("NET001 socket-transport")  # printed while the pipe is still open
    child.wait_for("following -: 147 lines")
    before = child.text
    assert "EVD001" not in before  # what is missing is judged at the end, not while the job runs
    rc = child.stop(signal.SIGINT)
    assert rc == 130
    assert child.text.count("NET001 socket-transport") == 1  # each finding once
    assert "EVD001 missing-evidence" in child.text
    assert "stopped by Ctrl-C (SIGINT)" in child.errors


def test_follow_says_the_job_looks_hung_when_init_stalls() -> None:
    child = Child("analyze", "--follow", "--idle", "1", "-", stdin_data=INIT_STUCK_LOG.read_bytes())
    child.wait_for("the job looks hung")
    child.wait_for("ranks 5-7 started init and did not complete it")
    assert "RUN001" not in child.text  # an incomplete init is only judged at the end
    rc = child.stop(signal.SIGTERM)
    assert rc == 143
    assert "RUN001 init-incomplete" in child.text


def test_follow_says_the_job_looks_hung_when_collectives_stop() -> None:
    coll = REPO / "fixtures" / "hang" / "coll_rank_missing.log"
    child = Child("analyze", "--follow", "--idle", "1", "-", stdin_data=coll.read_bytes())
    child.wait_for("the job looks hung")
    child.wait_for("communicator 0x6e1f0b2c9d3a4857: 7 ranks at opCount 2b; ranks 6 behind (slowest at opCount 2a)")
    assert "HANG001" not in child.text  # a rank behind is only judged at the end
    assert child.stop(signal.SIGINT) == 130
    assert "HANG001 rank-missing" in child.text and "rank 6 of communicator 0x6e1f0b2c9d3a4857" in child.text


def test_follow_to_the_end_of_the_pipe_exits_like_analyze() -> None:
    child = Child("analyze", "--follow", "-", stdin_data=SOCKET_LOG.read_bytes())
    rc = child.close_input()
    assert rc == 1  # errors found, --fail-on error
    assert "ncclscope: 4 errors" in child.text  # the same count as `analyze` of the whole file
    assert "stopped by" not in child.errors


def test_follow_a_growing_file(tmp_path: Path) -> None:
    lines = SOCKET_LOG.read_bytes().splitlines(keepends=True)
    log = tmp_path / "job.log"
    log.write_bytes(b"".join(lines[:12]))  # the start of init: no connection lines yet
    child = Child("analyze", "--follow", str(log))
    child.wait_for(f"following {log}: 12 lines")
    assert "NET001" not in child.text
    with log.open("ab") as handle:
        handle.write(b"".join(lines[12:]))
    child.wait_for("NET001 socket-transport")
    rc = child.stop(signal.SIGINT)
    assert rc == 130
    assert "(147 lines read)" in child.text


def test_follow_takes_one_input_and_text_only() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ncclscope", "analyze", "--follow", str(SOCKET_LOG), str(INIT_STUCK_LOG)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=WAIT,
    )
    assert done.returncode == 2
    assert "--follow reads one file or -" in done.stderr


SECOND_RANGE: list[int] = []  # where the second byte range starts (set before the workers fork)


def _slow_after_the_first_range(task):  # type: ignore[no-untyped-def]
    """A worker's task (forked: it replaces workers.run_task there too): the first range is parsed;
    the second asks the parent to stop, as one Ctrl-C would; every later one would take a minute."""
    from ncclscope.parse.split import parse_range

    if task.span is None or task.span[0] == 0:
        return parse_range(task)
    if task.span[0] == SECOND_RANGE[0]:
        time.sleep(2.0)  # the first range is done by then
        os.kill(os.getppid(), signal.SIGINT)
    time.sleep(60)  # a busy worker: stopped by the parent, not waited for
    raise AssertionError("not stopped")


def test_ctrl_c_while_workers_parse_one_large_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The byte ranges finished before Ctrl-C are kept, in order; busy workers are stopped at once."""
    from ncclscope.case import read as reading
    from ncclscope.parse import split, workers

    big = tmp_path / "big.log"
    big.write_bytes(SOCKET_LOG.read_bytes() * 400)
    monkeypatch.setattr(split, "SPLIT_MIN_BYTES", 1)
    monkeypatch.setattr(split, "RANGE_MIN_BYTES", 64 * 1024)
    monkeypatch.setattr(workers, "run_task", _slow_after_the_first_range)
    spans = split.byte_ranges(str(big), 2 * split.RANGES_PER_WORKER, split.RANGE_MIN_BYTES)
    monkeypatch.setattr(sys.modules[__name__], "SECOND_RANGE", [spans[1][0]])
    started = time.monotonic()
    outcome = reading.read_case([str(big)], jobs=2)
    assert time.monotonic() - started < 30
    assert outcome.stopped_by == signal.SIGINT
    assert outcome.exit_code == 130
    (source,) = outcome.case.sources
    assert source.stopped == "Ctrl-C (SIGINT)"
    assert 0 < source.lines < 147 * 400
    assert source.nccl_lines > 0
    assert any("reading stopped by Ctrl-C (SIGINT)" in m for m in outcome.messages)


def test_tui_spool_keeps_what_came_before_ctrl_c(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`... | ncclscope tui -`: the TUI copies stdin first; a pipe that stays open ends with Ctrl-C."""
    from ncclscope.tui.loading import spool

    read_end, write_end = os.pipe()
    os.write(write_end, SOCKET_LOG.read_bytes())
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with os.fdopen(read_end, "rb") as stream:
            copied = spool(stream, tmp_path / "stdin.log")
    finally:
        timer.cancel()
        os.close(write_end)
    assert copied == len(SOCKET_LOG.read_bytes())
    assert (tmp_path / "stdin.log").read_bytes() == SOCKET_LOG.read_bytes()
    assert "reading stopped by Ctrl-C (SIGINT)" in capsys.readouterr().err


# ------------------------------------------------------------------------------------ a reader that leaves
@pytest.mark.parametrize(("extra", "status"), [([], 0), (["missing.log"], 2)])
def test_output_piped_into_a_reader_that_leaves_ends_with_the_usual_status(
    tmp_path: Path, extra: list[str], status: int
) -> None:
    # `ncclscope parse --format json big.log | head -c 100`: the reader leaves after 100 bytes; the command
    # finishes and exits as it would have (0, or 2 for the missing input), with no traceback on stderr
    lines = [
        f"gpu-a{h}:{4100 + r}:{4100 + r} [{r}] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth{r}"
        for h in range(40)
        for r in range(8)
    ]
    log = tmp_path / "big.log"
    log.write_text("\n".join(lines * 20) + "\n")
    read, write = os.pipe()
    child = subprocess.Popen(
        [sys.executable, "-m", "ncclscope", "parse", "--format", "json", str(log), *extra],
        stdout=write,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    os.close(write)
    assert len(os.read(read, 100)) > 0
    os.close(read)  # the reader leaves while the JSON (over 1 MB) is still being written
    _, err = child.communicate(timeout=120)
    assert child.returncode == status, err.decode()
    assert b"Traceback" not in err and b"BrokenPipe" not in err and b"Exception ignored" not in err, err.decode()
