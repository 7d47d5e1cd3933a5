"""Hangs: which rank the others wait for (rules/hang.py), from real evidence.

- Flight Recorder: real torchrun jobs (gloo on CPU, 3 ranks, tests/jobs/hang_job.py) where rank 1
  skips a collective or calls a different one; every rank dumps its record (pickle and JSON). The
  culprit ncclscope names is checked against PyTorch's own analyzer (fr_trace) run on the same dumps.
- A hostile pickle is refused and nothing in it runs.
- ncclras text (2.24 and 2.26 layouts) and JSON, and NCCL COLL lines: fixtures written from the
  format facts (fixtures/hang/).
"""

from __future__ import annotations

import io
import json
import os
import pickle
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from test_runner_torch_bench import require_torch

from conftest import REPO, findings_of, only_finding, run_cli

JOB = REPO / "tests" / "jobs" / "hang_job.py"
HANG = "fixtures/hang"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run_job(mode: str, out: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT")}
    env.update(TORCH_FR_BUFFER_SIZE="2000", OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "3", "--master-port", str(_free_port())]
    done = subprocess.run([*cmd, str(JOB), mode, str(out)], env=env, capture_output=True, timeout=180, check=False)
    dumps = sorted(p.name for p in out.glob("rank_*"))
    assert dumps == ["rank_0", "rank_1", "rank_2"], done.stderr.decode()[-2000:]


@pytest.fixture(scope="module")
def hung_jobs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    require_torch()
    base = tmp_path_factory.mktemp("fr")
    out = {}
    for mode in ("skip", "mismatch"):
        _run_job(mode, base / mode)
        out[mode] = base / mode
    return out


def _fr_trace(dumps: Path, work: Path) -> str:
    """PyTorch's analyzer on the same dumps. gloo records a group's config before PyTorch names the group,
    so the dumps' pg_config lacks the group the entries name and fr_trace cannot look it up (KeyError);
    the copy given to it gets the config an NCCL run writes: the group's name, description and ranks."""
    from ncclscope.parse.flight_recorder import _PlainDataUnpickler

    work.mkdir()
    files = sorted(dumps.glob("rank_*"))
    for path in files:
        data = _PlainDataUnpickler(io.BytesIO(path.read_bytes())).load()
        ranks = str(list(range(len(files))))
        data["pg_config"] = {
            name: {"name": name, "desc": desc, "ranks": ranks}
            for name, desc in (e["process_group"] for e in data["entries"])
        }
        (work / path.name).write_bytes(pickle.dumps(data))
    cmd = [sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace", str(work), "--prefix", "rank_"]
    done = subprocess.run(cmd, capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return done.stdout.decode() + done.stderr.decode()  # its report goes through logging (stderr)


def _analyze_json(*paths: str | Path) -> dict:
    done = run_cli("analyze", "--format", "json", *map(str, paths))
    assert b"Traceback" not in done.stderr, done.stderr.decode()
    return json.loads(done.stdout)


def _codes(report: dict, code: str) -> list[dict]:
    return [f for f in report["findings"] if f["code"] == code]


# --------------------------------------------------------------------------------- Flight Recorder
def test_skipped_collective_names_the_rank_fr_trace_names(hung_jobs: dict[str, Path], tmp_path: Path) -> None:
    report = _analyze_json(hung_jobs["skip"])  # the directory: three pickles and json/ with three JSON dumps
    (finding,) = _codes(report, "HANG001")
    assert finding["ranks"] == [1]
    assert "sequence number 5" in finding["message"] and "all_reduce of [1000] Float" in finding["message"]
    assert "2 ranks (0, 2) wait in" in finding["message"] and "process group 1:dp" in finding["message"]
    assert not _codes(report, "HANG002")
    theirs = _fr_trace(hung_jobs["skip"], tmp_path / "fr")
    assert "Not all ranks joining collective, sequence number: 5" in theirs
    assert re.search(r"missing ranks: \{1\}", theirs), theirs
    assert "collective: gloo:all_reduce" in theirs


def test_mismatched_collective_names_the_first_divergence_fr_trace_names(
    hung_jobs: dict[str, Path], tmp_path: Path
) -> None:
    report = _analyze_json(hung_jobs["mismatch"])
    (finding,) = _codes(report, "HANG002")
    assert "diverges at sequence number 5" in finding["message"]
    assert "ranks 0, 2 called all_reduce of [1000] Float" in finding["message"]
    assert "rank 1 called all_gather of [1000] Float" in finding["message"]
    assert "hang_job.py:" in finding["message"]  # the calling line, from the pickle's frames
    assert finding["ranks"] == [1]
    assert not _codes(report, "HANG001")  # every rank entered sequence number 5: nobody is missing
    theirs = _fr_trace(hung_jobs["mismatch"], tmp_path / "fr")
    assert "Collective sequence number: 5 has errors" in theirs
    assert "Culprit rank 1; Error type: COLLECTIVE_TYPE_MISMATCH" in theirs


def test_json_dumps_alone_give_the_same_answer(hung_jobs: dict[str, Path]) -> None:
    skip = _codes(_analyze_json(hung_jobs["skip"] / "json"), "HANG001")
    assert [f["ranks"] for f in skip] == [[1]] and "sequence number 5" in skip[0]["message"]
    mismatch = _codes(_analyze_json(hung_jobs["mismatch"] / "json"), "HANG002")
    assert [f["ranks"] for f in mismatch] == [[1]]


def test_parse_shows_the_records(hung_jobs: dict[str, Path]) -> None:
    done = run_cli("parse", "--format", "json", str(hung_jobs["skip"] / "rank_0"), str(hung_jobs["skip"] / "rank_1"))
    case = json.loads(done.stdout)
    assert [d["rank"] for d in case["flight_records"]] == [0, 1]
    assert case["sources"][0]["kinds"] == ["flight_recorder"]
    groups = [p for p in case["progress"] if p["via"] == "flight_recorder" and p["group"] == "1:dp"]
    (group,) = groups
    assert {r["rank"]: r["entered"] for r in group["ranks"]} == {0: 5, 1: 4}
    # gloo's pg_config does not list the group's ranks (see _fr_trace): its members are the ranks whose dumps name it
    assert group["missing"] == [] and group["size"] == 2


# ------------------------------------------------------------------------------ untrusted pickles
class _Payload:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_a_hostile_pickle_is_refused_and_nothing_runs(tmp_path: Path, protocol: int) -> None:
    marker = tmp_path / "ran"
    dump = tmp_path / "rank_0"
    dump.write_bytes(pickle.dumps({"version": "2.10", "entries": [_Payload(marker)]}, protocol=protocol))
    done = run_cli("analyze", str(dump))
    assert done.returncode == 2
    assert not marker.exists()
    err = done.stderr.decode()
    assert f"{dump}: pickle refused: it asks to load posix.system" in err
    assert len([line for line in err.splitlines() if "rank_0" in line]) == 1 and "Traceback" not in err


def test_other_pickles_and_damaged_dumps_are_named_not_trusted(tmp_path: Path) -> None:
    other = tmp_path / "weights.pkl"
    other.write_bytes(pickle.dumps([1, 2, 3], protocol=4))
    cut = tmp_path / "rank_3"
    cut.write_bytes(pickle.dumps({"version": "2.10", "entries": []}, protocol=4)[:-6])
    done = run_cli("analyze", str(other), str(cut))
    err = done.stderr.decode()
    assert done.returncode == 2 and "Traceback" not in err
    assert f"{other}: pickle not read: not a Flight Recorder dump" in err
    assert f"{cut}: pickle not read: damaged pickle" in err


# --------------------------------------------------------------------------------- RAS and COLL
def test_ras_text_incomplete_names_the_missing_rank() -> None:
    finding = only_finding("HANG001", f"{HANG}/ras_incomplete.txt")
    assert finding.ranks == [7] and finding.hosts == ["10.20.4.12"]
    assert "communicator 4f18a2c07d9be361 (8 ranks)" in finding.message
    assert "process 7733 on node 10.20.4.12" in finding.message
    # the communicator's INCOMPLETE line, the heading that says the ranks below it gave no data, then the
    # missing rank's: the rank is that communicator's missing rank only under both
    assert [e.line for e in finding.evidence] == [31, 32, 33]


def test_ras_text_2_24_counts_give_ranks_behind_not_missing() -> None:
    finding = only_finding("HANG003", f"{HANG}/ras_counts_2_24.txt")
    assert finding.ranks == [12, 13, 26]
    assert "29 at 15307, 2 at 15306, 1 at 15305" in finding.message
    assert "slowest rank 26 on 10.8.0.44" in finding.message
    assert [e.line for e in finding.evidence] == [21, 26]  # the communicator's MISMATCH line, the slowest rank's

    assert not findings_of("HANG001", f"{HANG}/ras_counts_2_24.txt")  # a snapshot cannot say who is stuck


def test_ras_json_missing_rank() -> None:
    finding = only_finding("HANG001", f"{HANG}/ras_status.json")
    assert finding.ranks == [2] and finding.hosts == ["10.4.1.9"]
    assert "gave RAS no data (unresponsive)" in finding.message


def test_coll_lines_name_the_rank_one_call_short() -> None:
    finding = only_finding("HANG001", f"{HANG}/coll_rank_missing.log")
    assert finding.ranks == [6] and finding.hosts == ["gpu-b04"]
    assert "opCount 2b" in finding.message and "AllReduce of 1048576 float32" in finding.message
    assert "7 ranks (0-5, 7) wait in" in finding.message


def _split_job(splits: int = 1, parent_init: bool = True) -> str:
    """Four ranks on one host (NCCL 2.28 lines): the world communicator, then `splits` splits of it into
    the pairs 0-1 (color 7) and 2-3 (color 9), as torch's new_group does; on the last split each rank
    makes 40 calls, except rank 3, which stops after 31 (opCount 1f)."""
    lines = []
    for r in range(4):
        pid, world = 8100 + r, f"0x5600000{r}a000"
        if parent_init:
            lines.append(
                f"gpu-s1:{pid}:{pid} [{r}] NCCL INFO ncclCommInitRankConfig comm {world} rank {r} nranks 4 cudaDev {r}"
                f" nvmlDev {r} busId {r + 1}b000 commId 0x7e3a91c2d4b5f60a - Init COMPLETE"
            )
        for n in range(1, splits + 1):
            child = f"0x5600000{r}b00{n}"
            lines.append(
                f"gpu-s1:{pid}:{pid} [{r}] NCCL INFO ncclCommSplit comm {child} rank {r % 2} nranks 2 cudaDev {r}"
                f" nvmlDev {r} busId {r + 1}b000 parent {world} splitCount {n} color {7 if r < 2 else 9}"
                f" key {r % 2} - Init COMPLETE"
            )
    for call in range(40):
        for r in range(4):
            if r == 3 and call >= 31:
                continue
            lines.append(
                f"gpu-s1:{8100 + r}:{8100 + r} [{r}] NCCL INFO AllReduce: opCount {call:x} sendbuff 0x7f0{r}00000000"
                f" recvbuff 0x7f0{r}00400000 count 4096 datatype 7 op 0 root 0 comm 0x5600000{r}b00{splits}"
                " [nranks=2] stream 0x5"
            )
    return "\n".join(lines) + "\n"


def test_a_split_communicator_is_one_group_across_its_ranks_and_names_the_rank_behind(tmp_path: Path) -> None:
    # ncclCommSplit prints no commId: the pair is known by its parent, its color and which split it was.
    # Taken one per process (as before), each rank was alone in its communicator and nobody was behind.
    log = tmp_path / "split.log"
    log.write_text(_split_job())
    (finding,) = findings_of("HANG001", log) + findings_of("HANG003", log)
    assert finding.ranks == [1] and "communicator 0x7e3a91c2d4b5f60a split 1 color 9" in finding.message
    assert "opCount 27" in finding.message and "opCount 1e" in finding.message, finding.message


def test_splits_of_one_parent_with_one_color_are_told_apart_by_their_order(tmp_path: Path) -> None:
    from ncclscope.case.read import read_case

    log = tmp_path / "splits.log"
    log.write_text(_split_job(splits=2))
    comms = {c.id: c for c in read_case([str(log)], jobs=1).case.communicators}
    parent = "0x7e3a91c2d4b5f60a"
    assert sorted(comms) == sorted([parent] + [f"{parent} split {n} color {c}" for c in (7, 9) for n in (1, 2)])
    pair = comms[f"{parent} split 2 color 9"]
    assert pair.parent == parent and pair.color == 9 and pair.nranks == 2
    assert [(r.rank, r.pid) for r in pair.ranks] == [(0, 8102), (1, 8103)]
    (finding,) = findings_of("HANG001", log) + findings_of("HANG003", log)
    assert "split 2 color 9" in finding.message


def test_a_split_whose_parent_is_not_in_the_inputs_stays_its_process_own(tmp_path: Path) -> None:
    from ncclscope.case.read import read_case

    log = tmp_path / "orphans.log"
    log.write_text(_split_job(parent_init=False))
    comms = read_case([str(log)], jobs=1).case.communicators
    assert [c.id for c in comms] == [f"gpu-s1:{8100 + r}:0x5600000{r}b001" for r in range(4)]
    assert all(c.parent is None for c in comms)


def test_coll_lines_of_a_cut_log_are_only_ranks_behind(tmp_path: Path) -> None:
    text = (REPO / HANG / "coll_rank_missing.log").read_text().splitlines()
    cut = tmp_path / "cut.log"
    cut.write_text("\n".join(text[:-3]) + "\n" + text[-3][:60])  # ends inside a record: the paste was cut

    assert not findings_of("HANG001", cut)


def test_healthy_coll_lines_say_nothing() -> None:

    for fixture in ("fixtures/nccl/coll_tuning_trace.log",):
        assert not findings_of("HANG001", fixture) and not findings_of("HANG003", fixture)


def _nccl_dump(path: Path, last_seq: int, state: str = "started") -> None:
    """A Flight Recorder JSON dump as an NCCL job writes it (pg_config lists the members)."""
    entries = [
        {
            "record_id": seq - 1,
            "pg_id": 0,
            "process_group": ["0", "default_pg"],
            "collective_seq_id": seq,
            "p2p_seq_id": 0,
            "op_id": seq,
            "profiling_name": "nccl:all_reduce",
            "time_created_ns": 10**18 + seq,
            "input_sizes": [[4096, 1024]],
            "input_dtypes": ["BFloat16"],
            "output_sizes": [[4096, 1024]],
            "output_dtypes": ["BFloat16"],
            "state": "completed" if seq < last_seq else state,
            "is_p2p": False,
            "retired": seq < last_seq,
            "timeout_ms": 600000,
            "thread_id": "1",
            "thread_name": "pt_main_thread",
        }  # fmt: skip
        for seq in range(1, last_seq + 1)
    ]
    dump = {
        "version": "2.10", "comm_lib_version": "2.27.5", "entries": entries,
        "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1, 2, 3]"}},
        "pg_status": {"0": {"last_enqueued_collective": str(last_seq), "last_started_collective": str(last_seq),
                            "last_completed_collective": str(last_seq - 1)}},
    }  # fmt: skip
    path.write_text(json.dumps(dump))


def test_nccl_style_dumps_name_the_member_without_a_dump(tmp_path: Path) -> None:
    for rank, last in ((0, 10), (1, 10), (2, 9)):
        _nccl_dump(tmp_path / f"nccl_trace_rank_{rank}.json", last)
    (finding,) = _codes(_analyze_json(tmp_path), "HANG001")
    assert finding["ranks"] == [2]
    assert "process group 0:default_pg" in finding["message"] and "sequence number 10" in finding["message"]
    assert "all_reduce of [4096x1024] BFloat16" in finding["message"]
    assert "no dump from rank 3" in finding["message"]


def test_dumps_where_everyone_finished_are_not_a_hang(tmp_path: Path) -> None:
    for rank, last in ((0, 10), (1, 10), (2, 9), (3, 10)):
        _nccl_dump(tmp_path / f"rank_{rank}.json", last, state="completed")
    report = _analyze_json(tmp_path)
    assert not _codes(report, "HANG001")
    (behind,) = _codes(report, "HANG003")
    assert behind["ranks"] == [2]


def test_a_ras_report_that_contradicts_itself_is_only_a_warning(tmp_path: Path) -> None:
    text = (REPO / HANG / "ras_incomplete.txt").read_text()
    row = "    0         1         2       3-4         8         8   RUNNING  INCOMPLETE\n"
    bogus = row + "    1         4         0         0         0         0    NOCOMM  INCOMPLETE,MISMATCH\n"
    assert row in text
    path = tmp_path / "ras.txt"
    path.write_text(text.replace(row, bogus))
    finding = only_finding("HANG001", path)
    assert finding.severity == "warning" and finding.ranks == [7]
    assert "contradicts itself (group 1 reports INCOMPLETE,MISMATCH" in finding.message


def test_coll_summary_is_the_same_however_often_it_is_reduced(monkeypatch: pytest.MonkeyPatch) -> None:
    from ncclscope.case.read import read_case
    from ncclscope.parse import nccl_log

    paths = [str(REPO / HANG / "coll_rank_missing.log"), str(REPO / "fixtures/nccl/coll_tuning_trace.log")]
    once = read_case(paths, jobs=1).case.coll_calls
    monkeypatch.setattr(nccl_log, "COLL_PENDING_MAX", 1)  # every batch reduced into the summary at once
    assert read_case(paths, jobs=1).case.coll_calls == once
    hang = [c for c in once if c.evidence.source.endswith("coll_rank_missing.log")]
    assert len(hang) == 8 and {c.rank: (c.calls, c.last_op_count) for c in hang if c.calls < 44} == {6: (43, 0x2A)}
