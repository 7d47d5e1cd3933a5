"""Issue 44: which failure of a job came first (diagnose/first_failure.py, RUN013): a GPU fallen off the bus before
the other ranks' timeouts, the first NCCL WARN when the kernel log is missing, torchrun's own report of a killed
worker (and a real gloo job whose rank is killed with SIGKILL), the loss of a peer whose log is not given, and
failures that nothing orders across hosts."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from ncclscope.case.read import read_case
from ncclscope.diagnose.first_failure import timeline
from ncclscope.parse.torchrun_failures import TorchrunFailureReader

from conftest import REPO, analysis_of, findings_of, only_finding, require_torch, run_cli

STORY = "fixtures/timeline"
LOGS = [f"{STORY}/gpu-a.log", f"{STORY}/gpu-b.log"]
KERNEL = f"{STORY}/gpu-b-kernel.txt"
GLOO = "fixtures/framework/torchrun_gloo_rank1_sigkill.txt"


def test_an_xid_before_the_timeouts_is_the_root_and_the_timeouts_its_cascade() -> None:
    found = only_finding("RUN013", *LOGS, KERNEL)
    assert found.message.startswith(
        "first failure: Xid 79 GPU has fallen off the bus on gpu-b, rank 3, GPU 0000:43:00.0 at "
        "2025-06-02T10:15:40.512409+00:00 (by the times the lines carry); what followed it: "
    )
    assert "3 x watchdog timeout (ranks 0-2)" in found.message
    assert "3 x connection closed by the peer gpu-b (ranks 0-2)" in found.message
    assert "1 x NCCL WARN Cuda failure 'unspecified launch failure' (rank 3)" in found.message  # its own rank
    assert found.evidence[0].source.endswith("gpu-b-kernel.txt") and found.evidence[0].line == 3
    assert (found.hosts, found.ranks) == (["gpu-b"], [3])


def test_the_hardware_fault_heads_the_story_it_explains() -> None:
    analysis = analysis_of(*LOGS, KERNEL)
    head = analysis.findings[0]
    assert head.code == "HW001" and head.root_cause
    assert {"RUN013", "RUN004", "NET006", "RUN006"} <= set(head.explains)


def test_without_the_kernel_log_the_first_nccl_warn_is_the_root() -> None:
    found = only_finding("RUN013", *LOGS)
    assert found.message.startswith(
        "first failure: NCCL WARN Cuda failure 'unspecified launch failure' on gpu-b, rank 3 at 2025-06-02 10:15:41"
    )
    assert "3 x watchdog timeout (ranks 0-2)" in found.message


def test_the_timeline_orders_every_failure_by_its_time() -> None:
    line = timeline(read_case([str(REPO / p) for p in [*LOGS, KERNEL]], jobs=1).case)
    assert line.root is not None and line.root.source == "kernel"
    times = [f.when for f in line.failures if f.when is not None]
    assert times == sorted(times) and len(times) == len(line.failures)
    assert [f.source for f in line.cascade].count("framework") == 3


def test_torchrun_report_is_read_per_worker() -> None:
    reader = TorchrunFailureReader("x")
    for number, text in enumerate((REPO / GLOO).read_text(encoding="utf-8").splitlines(), start=1):
        reader.feed(number, text)
    exits = {e.rank: e for e in reader.finish()}
    assert set(exits) == {0, 1, 2}
    killed = exits[1]
    assert (killed.signal, killed.exitcode, killed.host, killed.first_observed) == ("SIGKILL", -9, "localhost", True)
    assert killed.time == "2026-11-28_12:22:49" and killed.local_rank == 1
    assert len(killed.evidence) == 8  # the agent's `failed (exitcode: -9)` line and the report's entry
    assert (exits[0].signal, exits[0].first_observed) == ("SIGTERM", False)


def test_a_killed_gloo_rank_is_the_root_of_the_others_closed_connections() -> None:
    found = only_finding("RUN013", GLOO)
    assert found.message.startswith(
        "first failure: process ended by SIGKILL (exit code -9) on localhost, rank 1 at 2026-11-28_12:22:49 "
        "(torchrun's own `first observed failure`)"
    )
    assert "2 x connection to the peer lost (ranks 0, 2)" in found.message
    assert "2 x process ended by SIGTERM (exit code -15) (ranks 0, 2)" in found.message


def test_a_lost_peer_whose_log_is_missing_is_named(tmp_path: Path) -> None:
    log = tmp_path / "survivor.log"
    log.write_text(
        "".join(
            f"\n[2025-06-02 10:15:4{i}] node-a:311:390 [0] misc/socket.cc:50 NCCL WARN socketProgress: "
            f"Connection closed by remote peer node-c<5512{i}>\n"
            for i in range(3)
        ),
        encoding="utf-8",
    )
    found = only_finding("RUN013", log)
    assert found.message.startswith("every failure here follows the loss of the peer node-c:")


def test_failures_nothing_orders_are_named_as_candidates(tmp_path: Path) -> None:
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_text("h1:10:11 [0] enqueue.cc:1570 NCCL WARN Cuda failure 'out of memory'\n", encoding="utf-8")
    b.write_text("h2:20:21 [0] transport/net_ib.cc:198 NCCL WARN NET/IB : mlx5_0:1 Got async event : port error\n")
    found = only_finding("RUN013", a, b)
    assert found.severity == "warning"
    assert "nothing orders them across hosts" in found.message and "h1" in found.message and "h2" in found.message


def test_the_same_failure_on_every_rank_is_no_first_failure(tmp_path: Path) -> None:
    logs = []
    for host in ("h1", "h2"):
        log = tmp_path / f"{host}.log"
        log.write_text(f"{host}:10:11 [0] enqueue.cc:1570 NCCL WARN Cuda failure 'out of memory'\n", encoding="utf-8")
        logs.append(log)
    assert findings_of("RUN013", *logs) == []


def test_a_single_failure_or_a_healthy_job_says_nothing() -> None:
    assert findings_of("RUN013", "fixtures/nccl/v2_28_healthy_multinode_gdr.log") == []
    # one host's fallout alone: the peer it lost is where the first failure was
    assert only_finding("RUN013", f"{STORY}/gpu-a.log").message.startswith(
        "every failure here follows the loss of the peer gpu-b: its process exited or its host went away first"
    )
    # the lost peer's host is in the inputs and shows no failure of its own: it ended without a word
    found = only_finding("RUN013", "fixtures/nccl/v2_26_socket_fallback.log")
    said = "the loss of the peer node-b01.cluster.internal: its host node-b01 is in the inputs but shows no failure"
    assert said in found.message


def test_a_real_gloo_job_whose_rank_is_killed_names_that_rank(tmp_path: Path) -> None:
    """Real torch.distributed processes (gloo on CPU) under torchrun; rank 1 kills itself with SIGKILL while the
    others are inside all_reduce. ncclscope reads what torchrun printed."""
    require_torch()
    job = tmp_path / "job.py"
    job.write_text(
        textwrap.dedent(
            """
            import os, signal, threading, time
            import torch, torch.distributed as dist
            dist.init_process_group("gloo")
            rank = dist.get_rank()
            data = torch.ones(1 << 18)
            if rank == 1:
                threading.Timer(1.5, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()
            for _ in range(1_000_000):
                dist.all_reduce(data)
                if rank == 1:
                    time.sleep(0.01)
            """
        ),
        encoding="utf-8",
    )
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT")}
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=3", str(job)],
        capture_output=True, text=True, env=dict(env, OMP_NUM_THREADS="1"), timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    output = tmp_path / "torchrun.txt"
    output.write_text(done.stdout + done.stderr, encoding="utf-8")
    shown = run_cli("analyze", "--select", "RUN013", str(output))
    text = shown.stdout.decode()
    assert shown.returncode == 1, text
    # the output says which line failed, should a loaded machine change what the job printed (seen once under -n 2)
    assert "first failure: process ended by SIGKILL (exit code -9) on " in text and ", rank 1 at " in text, text
    assert "connection to the peer lost (rank" in text, text + output.read_text(encoding="utf-8")[-3000:]


# --------------------------------------------------------------------- a first failure that another rule diagnoses
# Written from formats.md: the 2.29+ completion error, the WARN timestamps NCCL prints from 2.26, the 2.28 CQE line.
def _completion(stamp: str, host: str, pid: int, peer: str, hca: str) -> str:
    return (
        f"[{stamp}] {host}:{pid}:{pid + 40} [1] transport/net_ib/p2p.cc:648 NCCL WARN NET/IB: Got completion from peer"
        f" {peer}<40112> with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_SEND(0) vendor_err=129 hca {hca}"
    )


def _cqe(stamp: str, host: str, pid: int) -> str:
    return (
        f"[{stamp}] {host}:{pid}:{pid + 40} [1] transport/net_ib/p2p.cc:783 NCCL WARN NET/IB: ncclIbTest: Got CQE with"
        " error (devIndex=0, req=0x7f10aa00e028, comm=0x7f10aa00e000 (send), wr_id=0, qp_num=4711)"
    )


def _timeline_of(tmp_path: Path, lines: list[str]):  # type: ignore[no-untyped-def]
    """The analysis of a log of these lines, and its RUN013."""
    log = tmp_path / "job.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    analysis = analysis_of(str(log))
    return analysis, next(f for f in analysis.findings if f.code == "RUN013")


def test_a_completion_error_that_came_first_heads_its_timeline_and_its_warns(tmp_path: Path) -> None:
    """RUN013 names the completion error on rack1-07 as the first failure: NET005, which reads that very line and
    says what it means, is the root cause; RUN013 (it came first, then the peer's) and the CQE WARNs of the same
    failure (RUN005) are its story, not causes beside it."""
    analysis, first = _timeline_of(tmp_path, [
        _cqe("2026-03-04 10:46:33", "rack1-07", 31200),
        _completion("2026-03-04 10:46:33", "rack1-07", 31200, "10.20.0.9", "mlx5_1"),
        _cqe("2026-03-04 10:46:35", "rack1-09", 28800),
        _completion("2026-03-04 10:46:35", "rack1-09", 28800, "10.20.0.7", "mlx5_0"),
    ])  # fmt: skip
    assert first.message.startswith("first failure: NCCL WARN NET/IB: Got completion from peer 10.20.0.9")
    head = analysis.findings[0]
    assert (head.code, head.hosts, head.root_cause) == ("NET005", ["rack1-07"], True)
    assert {"RUN013", "RUN005"} <= set(head.explains)
    assert not first.root_cause and "NET005" in first.related
    assert all("NET005" in f.related for f in analysis.findings if f.code == "RUN005")


def test_a_completion_error_that_follows_another_ranks_crash_does_not_head_the_timeline(tmp_path: Path) -> None:
    """The same completion error, one second after a CUDA error on the peer's host: RUN013 names the CUDA error, so
    NET005 (the fallout of the peer's crash) is not the diagnosis of the first failure."""
    analysis, first = _timeline_of(tmp_path, [
        "[2026-03-04 10:46:32] rack1-09:28800:28800 [1] enqueue.cc:1581 NCCL WARN Cuda failure 'an illegal memory"
        " access was encountered'",
        _completion("2026-03-04 10:46:33", "rack1-07", 31200, "10.20.0.9", "mlx5_1"),
    ])  # fmt: skip
    assert first.message.startswith("first failure: NCCL WARN Cuda failure")
    net005 = next(f for f in analysis.findings if f.code == "NET005")
    assert "RUN013" not in net005.explains and "NET005" not in first.related
