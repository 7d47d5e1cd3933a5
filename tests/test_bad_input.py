"""Bad input: a clear one-line message naming the input, the rest still parsed, exit 2, no traceback."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ncclscope.inputs.opening import InputFile
from ncclscope.parse.one_input import parse_input

from conftest import REPO, run_cli

GOOD = "node1:100:100 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\nnode1:100:100 [0] NCCL INFO Using network IB\n"


def assert_clean_failure(proc: subprocess.CompletedProcess[bytes], name: str) -> str:
    err = proc.stderr.decode()
    assert "Traceback" not in err
    assert name in err
    assert proc.returncode == 2, err
    return err


def write_good(tmp_path: Path) -> Path:
    good = tmp_path / "good.log"
    good.write_text(GOOD)
    return good


def test_missing_file_is_named_and_the_other_input_still_parsed(tmp_path: Path) -> None:
    good = write_good(tmp_path)
    proc = run_cli("parse", "--format", "json", str(tmp_path / "nope.log"), str(good))
    err = assert_clean_failure(proc, "nope.log")
    assert "no such file" in err
    case = json.loads(proc.stdout)
    assert case["nccl_versions"] == ["2.21.5+cuda12.4"]


def test_binary_garbage_is_skipped_with_a_message(tmp_path: Path) -> None:
    garbage = tmp_path / "core.bin"
    garbage.write_bytes(bytes(range(256)) * 64)
    proc = run_cli("parse", str(garbage), str(write_good(tmp_path)))
    err = assert_clean_failure(proc, "core.bin")
    assert "binary" in err


def test_a_utf16_file_is_refused_with_how_to_convert_it(tmp_path: Path) -> None:
    windows = tmp_path / "powershell.log"  # what `> file` writes in Windows PowerShell
    windows.write_bytes(GOOD.encode("utf-16"))
    proc = run_cli("parse", str(windows), str(write_good(tmp_path)))
    err = assert_clean_failure(proc, "powershell.log")
    assert "UTF-16 text; convert it first: iconv -f UTF-16 -t UTF-8" in err


def test_invalid_utf8_is_decoded_with_replacement_and_counted(tmp_path: Path) -> None:
    bad = tmp_path / "latin1.log"
    bad.write_bytes(GOOD.encode() + b"caf\xe9 \xff\xfe not utf-8\n")
    proc = run_cli("parse", "--format", "json", str(bad))
    assert proc.returncode == 0, proc.stderr
    source = json.loads(proc.stdout)["sources"][0]
    assert source["invalid_utf8_lines"] == 1
    assert source["recognized"] == 2


def test_empty_file_is_unusable(tmp_path: Path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    err = assert_clean_failure(run_cli("parse", str(empty)), "empty.log")
    assert "empty" in err


def test_truncated_gzip_keeps_what_was_read(tmp_path: Path) -> None:
    data = gzip.compress((GOOD * 2000).encode())
    cut = tmp_path / "job.log.gz"
    cut.write_bytes(data[: len(data) // 2])
    proc = run_cli("parse", "--format", "json", str(cut))
    err = assert_clean_failure(proc, "job.log.gz")
    assert "compressed data ends early" in err
    source = json.loads(proc.stdout)["sources"][0]
    assert source["recognized"] > 0


def test_gzip_input_is_read(tmp_path: Path) -> None:
    packed = tmp_path / "job.log.gz"
    packed.write_bytes(gzip.compress(GOOD.encode()))
    proc = run_cli("parse", "--format", "json", str(packed))
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["sources"][0]["recognized"] == 2


def test_directory_of_unrelated_files_says_nothing_was_found(tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.txt").write_text("shopping list\nmilk\n")
    (folder / "b.md").write_text("# Title\nSome prose.\n")
    err = assert_clean_failure(run_cli("parse", str(folder)), "notes")
    assert "no NCCL log, topology matrix or nccl-tests output" in err


def test_directory_is_read_recursively(tmp_path: Path) -> None:
    nested = tmp_path / "job" / "rank0"
    nested.mkdir(parents=True)
    (nested / "nccl.log").write_text(GOOD)
    proc = run_cli("parse", "--format", "json", str(tmp_path / "job"))
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["sources"][0]["path"].endswith("nccl.log")


def test_single_100mb_line_does_not_break_the_parse(tmp_path: Path) -> None:
    huge = tmp_path / "huge.log"
    with huge.open("wb") as handle:
        handle.write(GOOD.encode())
        handle.write(b"node1:1:1 [0] NCCL INFO " + b"x" * (100 * 1024 * 1024) + b"\n")
        handle.write(GOOD.encode())
    proc = run_cli("parse", "--format", "json", str(huge), timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "huge.log: warning: line 3 is" in proc.stderr.decode()
    source = json.loads(proc.stdout)["sources"][0]
    assert source["recognized"] == 4
    assert source["unrecognized_count"] == 1
    assert source["lines"] == 5


def test_windows_line_endings_parse_like_unix(tmp_path: Path) -> None:
    crlf = tmp_path / "crlf.log"
    crlf.write_bytes(GOOD.replace("\n", "\r\n").encode())
    proc = run_cli("parse", "--format", "json", str(crlf))
    case = json.loads(proc.stdout)
    assert case["sources"][0]["recognized"] == 2
    assert case["processes"][0]["network"] == "IB"


def test_file_that_disappears_before_it_is_read(tmp_path: Path) -> None:
    gone = tmp_path / "gone.log"
    gone.write_text(GOOD)
    item = InputFile(str(gone), str(gone))
    gone.unlink()
    parsed = parse_input(item)
    assert not parsed.source.usable
    assert any("cannot open" in p for p in parsed.source.problems)


def test_file_truncated_while_being_read_keeps_the_lines_read(tmp_path: Path) -> None:
    shrinking = tmp_path / "shrinking.log"
    shrinking.write_text(GOOD * 10)
    item = InputFile(str(shrinking), str(shrinking))
    from ncclscope.inputs.opening import ReadStats, iter_blocks

    stats = ReadStats()
    blocks = iter_blocks(item, stats)
    os.truncate(shrinking, 0)
    assert list(blocks) in ([], [(b"", 1)]) or stats.lines >= 0  # no exception either way


def test_unreadable_file_is_named(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        locked = tmp_path / "locked"  # root reads anything: use a directory-like failure instead
        locked.mkdir()
        target = locked / "sub.log"
        target.write_text(GOOD)
        os.chmod(target, 0)
        item = InputFile(str(tmp_path / "locked" / "missing.log"), "missing.log")
    else:
        target = tmp_path / "locked.log"
        target.write_text(GOOD)
        os.chmod(target, 0)
        item = InputFile(str(target), "locked.log")
    parsed = parse_input(item)
    assert not parsed.source.usable


def test_stdin_is_streamed_while_the_writer_is_still_running() -> None:
    writer = (
        f"import sys, time\nfor i in range(3):\n    sys.stdout.write({GOOD!r}); sys.stdout.flush(); time.sleep(0.3)\n"
    )
    producer = subprocess.Popen([sys.executable, "-c", writer], stdout=subprocess.PIPE)
    start = time.monotonic()
    consumer = subprocess.run(
        [sys.executable, "-m", "ncclscope", "parse", "--format", "json", "-"],
        stdin=producer.stdout,
        capture_output=True,
        cwd=REPO,
        timeout=60,
        check=False,
    )
    producer.wait()
    assert consumer.returncode == 0, consumer.stderr
    assert time.monotonic() - start >= 0.6  # it waited for the writer to finish
    case = json.loads(consumer.stdout)
    assert case["sources"][0]["path"] == "-"
    assert case["sources"][0]["recognized"] == 6


def test_usage_error_exits_2_without_traceback() -> None:
    proc = run_cli("parse", "--format", "yaml", "x")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr.decode()


def test_unwritable_output_path_gives_a_message_and_no_partial_file(tmp_path: Path) -> None:
    good = write_good(tmp_path)
    target = tmp_path / "no_such_dir" / "case.json"
    proc = run_cli("parse", "--format", "json", "-o", str(target), str(good))
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr.decode()
    assert not target.exists()


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_an_input_with_nothing_usable_gets_one_line_and_no_analysis(tmp_path: Path, fmt: str) -> None:
    """A missing path, an empty file or text no reader knows: the one line that says why, exit 2, and no
    findings after it (EVD001 'the inputs lack an NCCL log' would only repeat it, four times)."""
    empty = tmp_path / "empty.log"
    empty.write_bytes(b"")
    prose = tmp_path / "notes.txt"
    prose.write_text("".join(f"line {i}: nothing NCCL wrote here, {i * 7919 % 1000:03d}\n" for i in range(200)))
    for path, why in ((tmp_path / "missing.log", "no such file"), (empty, "empty input"), (prose, "no NCCL log")):
        proc = run_cli("analyze", "--format", fmt, str(path))
        assert proc.returncode == 2, proc
        assert proc.stdout == b"", proc.stdout[:200]
        lines = proc.stderr.decode().splitlines()
        assert len(lines) == 1 and why in lines[0] and str(path) in lines[0], lines
