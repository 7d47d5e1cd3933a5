"""Outputs named by the user: a pipe (or device) is written into, never renamed over; a link is followed.

Renaming the temporary file over `-o /dev/null` replaced the device with a regular file (as root). The
test uses a FIFO, which takes the same path through the code and is safe to break.
"""

from __future__ import annotations

import json
import os
import stat
import threading
from pathlib import Path

import pytest

from conftest import FIXTURES, run_cli

LOG = str(FIXTURES / "nccl" / "v2_18_8xh100_nvswitch.log")


def _read_fifo(path: Path, into: list[bytes]) -> threading.Thread:
    def reader() -> None:
        with open(path, "rb") as handle:
            into.append(handle.read())

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize("command", [["parse", "--format", "json"], ["analyze", "--format", "json"]])
def test_output_into_a_pipe_stays_a_pipe(tmp_path: Path, command: list[str]) -> None:
    fifo = tmp_path / "out.pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    thread = _read_fifo(fifo, received)
    result = run_cli(*command, LOG, "-o", str(fifo))
    thread.join(timeout=30)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode), "the pipe was replaced by a regular file"
    assert result.returncode in (0, 1), result.stderr.decode()
    assert received and json.loads(received[0])


def test_report_into_a_pipe_stays_a_pipe(tmp_path: Path) -> None:
    fifo = tmp_path / "report.md"
    os.mkfifo(fifo)
    received: list[bytes] = []
    thread = _read_fifo(fifo, received)
    result = run_cli("report", LOG, "-o", str(fifo))
    thread.join(timeout=60)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert result.returncode in (0, 1), result.stderr.decode()
    assert received and b"ncclscope" in received[0]


def test_output_through_a_link_replaces_the_file_it_points_to(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    result = run_cli("parse", "--format", "json", LOG, "-o", str(link))
    assert result.returncode == 0, result.stderr.decode()
    assert link.is_symlink()
    assert json.loads(real.read_text())["sources"]


def test_case_json_written_a_field_at_a_time_is_the_serializer_s_json(tmp_path: Path) -> None:
    """`parse --format json` writes the Case one top-level field at a time (the whole document's
    serializer buffer was the peak of a 1 GB run's memory): the bytes must be the whole document's."""
    from pydantic import BaseModel, Field

    from ncclscope.api import analyze, read
    from ncclscope.common.output_files import json_chunks
    from ncclscope.render.findings import to_json as render_json

    case = read(LOG, str(FIXTURES / "nccl" / "errors_runtime.log"))
    whole = case.__pydantic_serializer__.to_json(case, indent=2) + b"\n"
    assert b"".join(json_chunks(case)) == whole
    one = read(LOG)
    expected = one.__pydantic_serializer__.to_json(one, indent=2) + b"\n"
    out = tmp_path / "case.json"
    assert run_cli("parse", "--format", "json", "-o", str(out), LOG).returncode == 0
    assert out.read_bytes() == expected
    printed = run_cli("parse", "--format", "json", LOG)
    assert printed.returncode == 0 and printed.stdout == expected

    class Partly(BaseModel):
        hidden: int = Field(default=1, exclude=True)
        shown: list[int] = [1, 2]

    class Empty(BaseModel):
        hidden: int = Field(default=1, exclude=True)

    analysis = analyze(case)  # its Case is written one Case field at a time
    assert b"".join(json_chunks(analysis)) == analysis.__pydantic_serializer__.to_json(analysis, indent=2) + b"\n"
    printed = run_cli("analyze", "--format", "json", "--fail-on", "never", LOG)
    assert printed.returncode == 0
    assert printed.stdout == render_json(analyze(one)).encode() + b"\n"

    class Holder(BaseModel):
        inner: Empty = Empty()  # a nested model whose every field is excluded
        part: Partly = Partly()

    for model in (Partly(), Empty(), Holder()):
        assert b"".join(json_chunks(model)) == model.__pydantic_serializer__.to_json(model, indent=2) + b"\n"


# ------------------------------------------------------------------ the Case's JSON made while the rules run
# In a process of its own: a test process may have threads left by other tests, and then nothing is forked
FORKED_JSON = """
import os, sys
from ncclscope.api import analyze, read
from ncclscope.common import json_aside, output_files
from ncclscope.model import Analysis


def main():  # in a function: pydantic builds deferred schemas from its caller's frame
    json_aside.ASIDE_MIN_ITEMS = 1  # the fixtures' Case stands in for a 100 MB log's
    parent = os.getpid()
    case = read(*sys.argv[2:])
    analysis = analyze(case)
    whole = analysis.__pydantic_serializer__.to_json(analysis, indent=2) + b"\\n"
    if sys.argv[1] == "fails":  # the copy's serializer raises (a full disk alike): this process makes the pieces
        def fails_in_the_copy(model, name):
            if os.getpid() != parent:
                raise OSError("No space left on device")
            return output_files.field_pieces(model, name)
        json_aside.field_pieces = fails_in_the_copy
    aside = json_aside.field_aside(Analysis, "case", case)
    assert isinstance(aside, json_aside.FieldAside), "nothing was forked"
    pid = aside._pid
    assert b"".join(output_files.json_chunks(analysis, {"case": aside})) == whole, "other bytes"
    try:
        os.waitpid(pid, os.WNOHANG)
        raise AssertionError("the copy was not reaped")
    except ChildProcessError:
        pass
    stopped = json_aside.field_aside(Analysis, "case", case)  # a copy the output never needs (the rules failed)
    pid = stopped._pid
    stopped.discard()
    try:
        os.waitpid(pid, os.WNOHANG)
        raise AssertionError("the stopped copy was not reaped")
    except ChildProcessError:
        pass
    print("OK")


main()
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this system: the Case's JSON is made in place")
@pytest.mark.parametrize("copy", ["works", "fails"])
def test_the_case_s_json_made_by_a_forked_process_is_the_serializer_s_json(copy: str) -> None:
    """`analyze --format json` of a large log: a forked copy makes the Case's pieces while the rules run; the
    document is byte for byte the one made in one process. A copy that fails leaves the pieces to this process
    (the same bytes), and is reaped; one the output never needs is stopped and reaped."""
    import subprocess
    import sys

    logs = [LOG, str(FIXTURES / "nccl" / "errors_runtime.log")]
    run = subprocess.run([sys.executable, "-c", FORKED_JSON, copy, *logs], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "OK", run.stderr


def test_a_small_case_s_json_is_made_in_place() -> None:
    """Forking costs more than a small Case's JSON: nothing is forked."""
    from ncclscope.api import read
    from ncclscope.common.json_aside import field_aside
    from ncclscope.model import Analysis

    assert field_aside(Analysis, "case", read(LOG)) is None


def test_a_command_that_kept_what_it_read_ends_with_its_status_and_its_output_flushed(tmp_path: Path) -> None:
    """A reading command keeps its Case to the end and ends the process at once (freeing a large Case object
    by object costs 0.05 s): its buffered output is still written whole, and its status is the command's."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from ncclscope.common.exit_status import end_process, keep_until_exit\n"
        "end_process(4)\n"  # nothing kept yet: returns
        "keep_until_exit(object())\n"
        "sys.stdout.write('x' * 100000)\n"
        "sys.stderr.write('said')\n"
        "end_process(5)\n"
        "print('not reached')\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert (run.returncode, run.stdout, run.stderr) == (5, b"x" * 100000, b"said")
    out = tmp_path / "out.json"
    analyzed = run_cli("analyze", "--format", "json", "-o", str(out), str(FIXTURES / "nccl" / "errors_runtime.log"))
    assert analyzed.returncode == 1, analyzed.stderr.decode()  # its findings reach --fail-on error
    assert json.loads(out.read_text())["case"]["sources"]
