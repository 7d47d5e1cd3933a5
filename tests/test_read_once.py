"""Issue 42: an INFO record that repeats an earlier one of its process word for word, the time aside (a restart
loop whose processes keep their pids, a collector's resend), is read once and counted
(log_records.READ_ONCE, case/records.py); WARNs and error chains are always read. Memory and time then do
not grow with the repeats, and the Case is the Case of one run but for the count."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ncclscope.case.read import read_case
from ncclscope.inputs.opening import InputFile
from ncclscope.parse import split, workers

from conftest import REPO

LOOP = REPO / "fixtures" / "nccl" / "restart_loop_same_pids.log"
RUN_LINES = 25  # one run of the fixture, with its supervisor line


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ncclscope", *args], capture_output=True, text=True, cwd=REPO, timeout=120
    )


def test_a_restart_loop_reads_each_repeated_info_record_once_and_keeps_every_warn() -> None:
    done = _cli("parse", "--format", "json", str(LOOP.relative_to(REPO)))
    assert done.returncode == 0, done.stderr
    case = json.loads(done.stdout)
    assert case["sources"][0]["records_repeated"] == 26  # 13 INFO records of each of the two repeats
    warns = [m for m in case["warnings"] if m["level"] == "WARN"]
    assert len(warns) == 3 and len({m["evidence"]["line"] for m in warns}) == 3
    assert len(case["error_traces"]) == 3
    text = _cli("parse", str(LOOP.relative_to(REPO))).stdout
    assert "Read once: 26 INFO records that repeat an earlier one of their process word for word" in text


def test_a_repeated_init_sets_up_its_communicator_again_for_the_lines_after_it() -> None:
    """Rank 0 sets up communicator A (two ring channels), then B (one). When the run repeats, A's Init START
    is read once, yet the ring lines after it are A's again, not B's."""
    case = read_case([str(LOOP)], jobs=1).case
    rings = {c.comm_id: sorted(c.rings) for c in case.communicators}
    assert rings == {"0x5d2c1b77e0a4f311": [0, 1], "0x8e41f0c2d9b3a727": [0]}


def test_the_case_of_the_loop_is_the_case_of_one_run_but_for_the_lines(tmp_path: Path) -> None:
    one = tmp_path / "one_run.log"
    one.write_text("".join(LOOP.read_text().splitlines(keepends=True)[:RUN_LINES]))
    loop, single = read_case([str(LOOP)], jobs=1).case, read_case([str(one)], jobs=1).case

    def shape(case):  # type: ignore[no-untyped-def]
        return (
            [(p.host, p.pid, p.nccl_version, p.bootstrap_interface, p.network, p.ranks) for p in case.processes],
            [(c.comm_id, c.nranks, [(r.rank, r.init_start) for r in c.ranks]) for c in case.communicators],
            [(d.name, d.transport) for d in case.net_devices],
            len(case.interfaces),
        )

    assert shape(loop) == shape(single)
    assert single.sources[0].records_repeated == 0


def test_byte_ranges_read_the_same_repeats_as_one_reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each worker drops the repeats of its own bytes, the walk those across ranges: the count and the Case
    are those of one reader."""
    monkeypatch.setattr(split, "SPLIT_MIN_BYTES", 1)
    monkeypatch.setattr(split, "RANGE_MIN_BYTES", 1 << 16)
    big = tmp_path / "loop.log"
    big.write_bytes(LOOP.read_bytes() * 200)
    assert len(workers.tasks([InputFile(str(big), str(big))], 2)) > 2
    serial = read_case([str(big)], jobs=1).case
    parallel = read_case([str(big)], jobs=2).case
    assert serial.sources[0].records_repeated == 26 + 39 * 199
    assert parallel.model_dump() == serial.model_dump()


def test_a_line_holding_two_processes_records_reads_both() -> None:
    """A terminal glued the version line of one process after another's record: the second is no repeat of
    the first, though they share the line."""
    case = read_case([str(REPO / "fixtures" / "nccl" / "variant_terminal_padding.log")], jobs=1).case
    assert {(p.pid, p.nccl_version) for p in case.processes} >= {(9102, "2.24.3+cuda12.6")}


def test_error_chains_beyond_the_limit_are_counted_once_each_not_once_per_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash loop prints the same `-> N` chain at each restart: past the limit of kept facts, each chain is one
    fact not kept, however many lines it has (it was counted once per line)."""
    from ncclscope.case import records

    monkeypatch.setattr(records, "FACTS_LIMIT", 2)
    lines = []
    for run in range(5):  # a new pid per restart: no chain repeats another word for word
        head = f"node07:{4100 + run}:{4150 + run} [2] NCCL INFO"
        lines += [
            f"{head} misc/socket.cc:{538 + run} -> 2",
            f"{head} misc/socket.cc:{620 + run} -> 2",
            f"{head} bootstrap.cc:{82 + run} -> 2",
            f"step {run} restarting after a failure",
        ]
    log = tmp_path / "chains.log"
    log.write_text("\n".join(lines) + "\n")
    case = read_case([str(log)], jobs=1).case
    assert [len(t.frames) for t in case.error_traces] == [3, 3]
    assert case.facts_capped == {"error_traces": 3}
