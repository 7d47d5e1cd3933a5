"""RUN001-RUN006: init that does not complete and runtime errors, judged through the real pipeline."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from ncclscope.case.read import read_case
from ncclscope.diagnose.engine import analyze
from ncclscope.diagnose.rules.context import Context
from ncclscope.diagnose.rules.run import covered_lines
from ncclscope.model import Finding

from conftest import REPO, run_cli


def fx(name: str) -> str:
    return str(REPO / "fixtures" / name)


INIT_INCOMPLETE = fx("nccl/init_incomplete_two_hosts.log")
INIT_CUT = fx("runtime/init_cut_mid_record.log")
GLUED = fx("nccl/variant_glued_records.log")
BARE_RANK_TAG = fx("nccl/variant_bare_rank_tag.log")
PASTE_MIDLINE = fx("nccl/variant_paste_starts_midline.log")
RUNTIME_ERRORS = fx("nccl/errors_runtime.log")
IB_ERRORS = fx("nccl/errors_ib_completion.log")
MIXED_NICS = fx("nccl/rocm_roce_mixed_nics.log")
IMEX = fx("runtime/mnnvl_imex_not_permitted.log")
WATCHDOG = fx("runtime/pytorch_watchdog_timeout.log")
TORCH_HEALTHY = fx("runtime/pytorch_healthy_run.log")
TORCHRUN_PREFIX = fx("nccl/variant_torchrun_prefix.log")
SOCKET_FALLBACK = fx("nccl/v2_26_socket_fallback.log")
HEALTHY = [
    fx("nccl/v2_18_8xh100_nvswitch.log"),
    fx("nccl/v2_28_healthy_multinode_gdr.log"),
    fx("nccl/v2_12_two_hosts_ib_gdr.log"),
    fx("nccl/v2_4_two_hosts_ib.log"),
    fx("nccl/v2_10_dgx1_v100_indirect.log"),
    fx("nccl/debug_env_overrides.log"),
    fx("runtime/three_hosts_same_env.log"),
    fx("nccl_tests/one_rank_busbw_zero.txt"),
]


@cache
def _findings(path: str) -> tuple[Finding, ...]:
    return tuple(analyze(read_case([path], jobs=1).case).findings)


def findings(path: str, code: str) -> list[Finding]:
    return [f for f in _findings(path) if f.code == code]


# ------------------------------------------------------------------------------------ RUN001
def test_ranks_with_start_but_no_complete_are_an_error_naming_them() -> None:
    (finding,) = findings(INIT_INCOMPLETE, "RUN001")
    assert finding.severity == "error"
    assert "ranks 5-7 on node-k42 logged Init START but no Init COMPLETE" in finding.message
    assert "5 of the 8 ranks in the inputs completed" in finding.message
    assert "no WARN" in finding.message
    assert finding.ranks == [5, 6, 7]
    assert finding.hosts == ["node-k42"]


def test_an_input_cut_mid_record_makes_it_a_warning() -> None:
    """Ranks 0-1 completed, so the log went past init; the input ends in rank 2's cut COMPLETE record."""
    (finding,) = findings(INIT_CUT, "RUN001")
    assert finding.severity == "warning"
    assert "ranks 2-3 on gpu-t07" in finding.message
    assert "looks cut" in finding.message and "cut NCCL record (line 55)" in finding.message


def test_a_damaged_complete_record_makes_it_a_warning() -> None:
    (finding,) = findings(GLUED, "RUN001")
    assert finding.severity == "warning"
    assert "it ends in a cut NCCL record" in finding.message


def test_a_partial_set_of_rank_logs_is_not_judged_and_evd001_says_so() -> None:
    assert findings(BARE_RANK_TAG, "RUN001") == []
    (note,) = [f for f in findings(BARE_RANK_TAG, "EVD001") if "RUN001 could not judge" in f.message]
    assert "2 of 160 ranks" in note.message and note.evidence
    assert findings(PASTE_MIDLINE, "RUN001") == []
    assert any("looks cut" in f.message for f in findings(PASTE_MIDLINE, "EVD001"))


def test_a_log_that_stops_inside_init_before_any_rank_completed_is_not_judged() -> None:
    """The paste stops inside the connection lines: cut there, or a hang there; the text cannot tell."""
    text = "\n".join(
        [
            "w0:22:28 [0] NCCL INFO comm 0x55fb28c68190 rank 0 nranks 2 cudaDev 0 busId 1e0 commId 0xea07 - Init START",
            "w1:21:26 [0] NCCL INFO comm 0x55a2c6625c10 rank 1 nranks 2 cudaDev 0 busId 1e0 commId 0xea07 - Init START",
            "w0:22:28 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/Socket/0",
        ]
    )
    case = read_case([_write(text)], jobs=1).case
    found = analyze(case).findings
    assert [f for f in found if f.code == "RUN001"] == []
    (note,) = [f for f in found if f.code == "EVD001" and "RUN001 could not judge" in f.message]
    assert "stops inside connection lines" in note.message


def _write(text: str) -> str:
    import tempfile

    handle = tempfile.NamedTemporaryFile("w", suffix=".log", delete=False)  # noqa: SIM115
    handle.write(text + "\n")
    handle.close()
    return handle.name


def test_init_that_failed_with_a_warn_says_the_failure_is_reported_there() -> None:
    (finding,) = findings(MIXED_NICS, "RUN001")
    assert finding.severity == "error"
    assert "logged 2 lines of WARN" in finding.message


def test_complete_init_is_not_reported() -> None:
    for path in [*HEALTHY, SOCKET_FALLBACK, TORCHRUN_PREFIX]:
        assert findings(path, "RUN001") == [], path


# ------------------------------------------------------------------------------------ RUN002
def test_duplicate_gpu_is_an_error_with_both_ranks() -> None:
    (finding,) = findings(RUNTIME_ERRORS, "RUN002")
    assert finding.severity == "error"
    assert "ranks 0 and 1 on CUDA device 1b000" in finding.message
    assert "InvalidUsage (5)" in finding.message
    assert finding.ranks == [0, 1]
    assert 36 in [e.line for e in finding.evidence]


def test_no_duplicate_gpu_without_the_warn() -> None:
    for path in HEALTHY:
        assert findings(path, "RUN002") == [], path


# ------------------------------------------------------------------------------------ RUN003
def test_shm_extend_failure_is_an_error_with_size_and_errno() -> None:
    (finding,) = findings(RUNTIME_ERRORS, "RUN003")
    assert finding.severity == "error"
    assert "/dev/shm/nccl-Xq3Bz1 to 9.2 MiB" in finding.message
    assert "No space left on device" in finding.message
    assert "--shm-size" in finding.fix and "--ipc=host" in finding.fix


def test_no_shm_finding_on_healthy_logs() -> None:
    for path in HEALTHY:
        assert findings(path, "RUN003") == [], path


# ------------------------------------------------------------------------------------ RUN004
def test_cuda_out_of_memory_is_decoded_with_its_chain() -> None:
    oom = [f for f in findings(RUNTIME_ERRORS, "RUN004") if "out of memory" in f.message]
    assert len(oom) == 1
    assert oom[0].severity == "error"
    assert "(code 2)" in oom[0].message
    assert "UnhandledCudaError (1)" in oom[0].message
    assert "[Async thread]" in oom[0].message


def test_operation_not_permitted_points_at_imex_channels() -> None:
    (finding,) = findings(IMEX, "RUN004")
    assert finding.severity == "error"
    assert "IMEX" in finding.message
    assert "nvidia-imex-ctl" in finding.fix
    assert finding.hosts == ["gb200-r04-t01", "gb200-r04-t02"]
    assert finding.evidence_count == 2


def test_each_distinct_cuda_error_is_one_finding() -> None:
    messages = [f.message for f in findings(RUNTIME_ERRORS, "RUN004")]
    assert len(messages) == 2
    assert any("illegal memory access" in m for m in messages)


def test_a_framework_that_raised_an_unhandled_cuda_error_is_a_cuda_error_without_nccl_s_lines() -> None:
    """JAX/XLA names the NCCL call; vLLM glues its traceback to the line; no `Cuda failure` line is pasted."""
    xla = _write(
        "2024-05-02 10:11:12.123456: E external/xla/xla/pjrt/pjrt_stream_executor_client.cc:2732] Execution of"
        " replica 3 failed: INTERNAL: external/xla/xla/service/gpu/nccl_utils.cc:275: NCCL operation"
        " ncclCommInitRank(&comm, nranks, id, rank) failed: unhandled cuda error; current tracing scope: all-reduce"
    )
    (finding,) = findings(xla, "RUN004")
    assert "ncclUnhandledCudaError to the framework (1 line) in ncclCommInitRank" in finding.message
    assert "NCCL_DEBUG=WARN" in finding.fix
    assert findings(xla, "RUN005") == []  # said once
    vllm = _write(
        "(VllmWorkerProcess pid=4121) ERROR 11-02 08:26:01 multiproc_worker_utils.py:226] Exception in worker"
        " VllmWorkerProcess while processing method init_device: NCCL error: unhandled cuda error (run with"
        " NCCL_DEBUG=INFO for details), Traceback (most recent call last):"
    )
    assert len(findings(vllm, "RUN004")) == 1


def test_a_relayed_last_error_names_the_cuda_error() -> None:
    relayed = _write(
        "[rank1]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:317,"
        " unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\n"
        "[rank1]: ncclUnhandledCudaError: Call to CUDA function failed.\n"
        "[rank1]: Last error: Cuda failure 'invalid argument'"
    )
    (finding,) = findings(relayed, "RUN004")
    assert "failed with invalid argument, as NCCL's last error relayed says" in finding.message


def test_xla_s_own_words_about_a_library_it_could_not_load_are_relayed_as_a_warning() -> None:
    missing = _write(
        "E external/xla/xla/pjrt/pjrt_stream_executor_client.cc:2732] Execution of replica 0 failed: INTERNAL:"
        " external/xla/xla/service/gpu/nccl_utils.cc:134: NCCL operation ncclGetUniqueId(&id) failed: Unable to load"
        " NCCL library. Multi-GPU collectives will not work."
    )
    (finding,) = findings(missing, "RUN005")
    assert finding.severity == "warning"
    assert findings(missing, "RUN004") == []


def test_no_cuda_error_on_healthy_logs() -> None:
    for path in HEALTHY:
        assert findings(path, "RUN004") == [], path


# ------------------------------------------------------------------------------------ RUN005
def test_other_warns_are_grouped_with_hints_and_decoded_chains() -> None:
    found = findings(IB_ERRORS, "RUN005")
    # a failed call, an error result in its chain, a fatal NIC event: errors; what NCCL calls non-fatal: a warning
    severity = {f.message.split("`")[1]: f.severity for f in found}
    assert severity == {
        "Call to ibv_create_qp failed with error Cannot allocate memory": "error",
        "Call to ibv_reg_mr failed with error Bad address errno 14": "error",
        "NET/IB : mlx5_2:1 async fatal event: local catastrophic error": "error",
        "NET/IB : mlx5_bond_0:1 Got non-fatal async event: port error(10)": "warning",
    }
    qp = [f for f in found if "ibv_create_qp" in f.message]
    assert len(qp) == 1
    assert "SystemError (2)" in qp[0].message
    assert "ulimit -l unlimited" in qp[0].message
    assert any("async fatal event" in f.message for f in found)


def test_warns_reported_by_specific_rules_are_left_to_them() -> None:
    found = findings(IB_ERRORS, "RUN005") + findings(RUNTIME_ERRORS, "RUN005")
    for f in found:
        assert "Got completion" not in f.message  # NET005
        assert "Connection closed" not in f.message and "Connection refused" not in f.message  # NET006
        assert "Cuda failure" not in f.message and "Duplicate GPU" not in f.message  # RUN004, RUN002
        assert "/dev/shm" not in f.message and "P2P is disabled" not in f.message  # RUN003, TOPO005


def test_a_warn_line_is_covered_by_the_rule_whose_facts_hold_it() -> None:
    case = read_case([RUNTIME_ERRORS], jobs=1).case
    covered = covered_lines(Context(case))
    duplicate = next(w for w in case.warnings if w.family == "duplicate_gpu")
    closed = next(f for f in case.socket_failures if f.problem == "connection_closed")
    oom = next(c for c in case.cuda_errors if "out of memory" in c.text)
    assert covered[(duplicate.evidence.source, duplicate.evidence.line)] == "RUN002"
    assert covered[(closed.evidence.source, closed.evidence.line)] == "NET006"
    assert covered[(oom.evidence.source, oom.evidence.line)] == "RUN004"
    assert set(covered.values()) <= {"NET002", "NET005", "NET006", "RUN002", "RUN003", "RUN004", "TOPO005", "VER001"}


def test_identical_messages_on_two_hosts_group_into_one_finding() -> None:
    (finding,) = [f for f in findings(MIXED_NICS, "RUN005") if "incompatible devices" in f.message]
    assert "InternalError (3)" in finding.message
    assert "NCCL_IB_HCA" in finding.message


def test_no_nccl_warning_on_healthy_logs() -> None:
    for path in HEALTHY:
        assert findings(path, "RUN005") == [], path


# ------------------------------------------------------------------------------------ RUN006
def test_watchdog_timeout_is_an_error_naming_the_collective_and_the_silent_rank() -> None:
    (finding,) = findings(WATCHDOG, "RUN006")
    assert finding.severity == "error"
    assert "ALLREDUCE (SeqNum 1843" in finding.message
    assert "ranks 0-2" in finding.message
    assert "rank 3 of 4 reported no timeout" in finding.message
    assert "NCCL logged no WARN" in finding.message
    assert finding.ranks == [0, 1, 2]


def test_pytorch_lines_without_a_timeout_are_not_reported() -> None:
    assert findings(TORCH_HEALTHY, "RUN006") == []
    assert findings(TORCHRUN_PREFIX, "RUN006") == []


def test_the_heartbeat_monitor_alone_is_a_watchdog_hang() -> None:
    """PyTorch's heartbeat monitor found the watchdog thread stuck (no collective timeout line printed)."""
    (finding,) = findings(fx("framework/heartbeat_hard_wrapped.txt"), "RUN006")
    assert finding.severity == "error" and finding.ranks == [1, 3]
    assert "watchdog stuck for 600 s on ranks 1, 3" in finding.message
    assert "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC" in finding.fix


def test_a_watchdog_status_line_is_a_timeout_only_when_no_nccl_error_was_raised() -> None:
    status = (
        "[rank0]:[E1102 09:12:44.51 ProcessGroupNCCL.cpp:1655] [PG ID 0 PG GUID 0(default_pg) Rank 0]  failure"
        " detected by watchdog at work sequence id: 716 PG status: last enqueued work: 747, last completed work: 715"
    )
    (finding,) = findings(_write(status), "RUN006")
    assert "at work 716 (last completed work 715, last enqueued 747) on rank 0" in finding.message
    raised = (
        "[rank0]:[E1102 09:12:43.98 ProcessGroupNCCL.cpp:1478] [PG ID 0 PG GUID 0(default_pg) Rank 0] Process group"
        " watchdog thread terminated with exception: NCCL error: remote process exited or there was a network error,"
        " NCCL version 2.22.3\nncclRemoteError: A call failed possibly due to a network error or a remote process"
        " exiting prematurely.\n" + status
    )
    assert findings(_write(raised), "RUN006") == []


def test_cli_json_reports_the_watchdog_timeout_with_evidence() -> None:
    result = run_cli("analyze", "--format", "json", WATCHDOG)
    data = json.loads(result.stdout)
    (run006,) = [f for f in data["findings"] if f["code"] == "RUN006"]
    assert run006["severity"] == "error"
    assert run006["name"] == "watchdog-timeout"
    assert run006["evidence"] and "Watchdog caught collective operation timeout" in run006["evidence"][0]["text"]
    assert not [f for f in data["findings"] if f["severity"] == "error" and f["code"] != "RUN006"]


# ------------------------------------------------------------------------------ an input with lines left out
def test_an_input_with_elided_lines_is_said_to_be_incomplete_not_passed() -> None:
    elided = fx("nccl/variant_elided_lines.log")
    case = read_case([elided], jobs=1).case
    assert case.sources[0].truncated == ["lines were left out where it says `[...]` (line 86 and 1 more)"]
    incomplete = [f for f in findings(elided, "EVD001") if "is incomplete" in f.message]
    assert len(incomplete) == 1 and "`[...]`" in incomplete[0].message
    assert [f.severity for f in _findings(elided) if f.severity != "info"] == []


def test_a_chain_that_ends_in_a_warn_level_line_is_told_with_the_warn_it_follows(tmp_path: Path) -> None:
    """The proxy's progress thread ends its `file:line -> N` chain with a WARN of the same shape (`proxy.cc:979
    -> 3 [Progress Thread]`): a line of the first WARN's chain, not a second WARN that "NCCL went on after". A
    WARN of that shape that follows no other WARN is still reported."""
    head = "node03:51800:51866 [2]"
    log = tmp_path / "proxy.log"
    log.write_text(
        f"{head} NCCL INFO comm 0x7f10 rank 2 nranks 4 cudaDev 2 busId 41000 commId 0x9e2d - Init COMPLETE\n"
        f"{head} proxy.cc:363 NCCL WARN Proxy append out of bounds\n"
        f"{head} NCCL INFO proxy.cc:446 -> 3\n"
        f"{head} NCCL INFO proxy.cc:835 -> 3\n"
        f"{head} proxy.cc:979 NCCL WARN proxy.cc:979 -> 3 [Progress Thread]\n"
    )
    (found,) = findings(str(log), "RUN005")
    assert found.severity == "error" and "Proxy append out of bounds" in found.message
    assert "InternalError (3) through proxy.cc:446 -> proxy.cc:835 -> proxy.cc:979 [Progress Thread]" in found.message
    alone = tmp_path / "alone.log"
    alone.write_text(f"{head} proxy.cc:979 NCCL WARN proxy.cc:979 -> 3 [Progress Thread]\n")
    assert len(findings(str(alone), "RUN005")) == 1


def test_nvml_warns_of_one_cause_are_one_finding(tmp_path: Path) -> None:
    """An integrated GPU answers no NVML call: the P2P query and the device lookup fail alike (corpus mixed-d309).
    One RUN005 tells both, a warning since NCCL goes on, instead of one finding per call."""
    log = tmp_path / "tegra.log"
    log.write_text(
        "[2026-02-24 10:44:30] orin-01:5120:5120 [0] misc/nvmlwrap.cc:164 NCCL WARN nvmlDeviceGetP2PStatus(0,0,"
        "NVML_P2P_CAPS_INDEX_READ) failed: Not Supported\n"
        "[2026-02-24 10:44:30] orin-01:5120:5120 [0] init.cc:471 NCCL WARN Failed to find nvml device for busId "
        "0000:00:00.0. This may affect performance.\n",
        encoding="utf-8",
    )
    (found,) = findings(str(log), "RUN005")
    assert found.severity == "warning" and found.evidence_count == 2
    assert "and 1 other NVML WARN on orin-01, 2 lines; NVML could not answer" in found.message


def test_the_proxy_services_warns_of_one_breakage_are_one_finding(tmp_path: Path) -> None:
    """The proxy service's socket to a local rank broke: its accept, its receive and the operation it could not
    finish each print a WARN (corpus nccl-log-d403: three "Problem" lines for one event). One RUN005 tells them,
    with the chain's result, and every line stays in its evidence."""
    log = tmp_path / "proxy.log"
    log.write_text(
        "node7:3301:3390 [0] proxy.cc:1458 NCCL WARN [Service thread] Accept failed Resource temporarily unavailable\n"
        "node7:3301:3390 [0] NCCL INFO misc/socket.cc:826 -> 3\n"
        "node7:3301:3390 [0] proxy.cc:1497 NCCL WARN [Service thread] Could not receive type from localRank 0, res=3,"
        " closed=0\n"
        "node7:3301:3390 [0] proxy.cc:1521 NCCL WARN [Proxy Service 0] Failed to execute operation Close from rank 0,"
        " retcode 3\n",
        encoding="utf-8",
    )
    (found,) = findings(str(log), "RUN005")
    assert found.evidence_count == 3 and found.severity == "error"
    assert found.message.startswith("NCCL WARN `[Service thread] Accept failed Resource temporarily unavailable`")
    assert "and 2 other proxy WARNs on node7, 3 lines; propagated as InternalError (3)" in found.message
