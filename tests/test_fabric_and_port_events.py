"""Issue 44: RUN009 (the NVLink fabric not ready) and NET011 (the IB fabric changing under the job), each from typed
facts, each silent on its close case."""

from __future__ import annotations

from pathlib import Path

from conftest import findings_of, only_finding

PORT = "fixtures/net/ib_port_error_two_ranks.log"
QP_EVENT = "fixtures/net/ib_qp_access_event_only.log"
BIND = "fixtures/runtime/nvls_bind_failed_fabric.log"
INIT_ERROR = "fixtures/runtime/nvls_cuda_init_error_not_fabric.log"


def test_port_errors_on_two_ranks_are_one_error_for_the_host() -> None:
    found = only_finding("NET011", PORT)
    assert found.severity == "error" and found.hosts == ["ib-n12"]
    assert found.message.startswith("on ib-n12 on mlx5_1: 2 x port error; 1 x port active (2 processes)")
    assert found.root_cause and "RUN005" in found.explains


def test_a_gid_change_is_a_warning(tmp_path: Path) -> None:
    log = tmp_path / "gid.log"
    log.write_text("h1:5:6 [0] transport/net_ib.cc:73 NCCL WARN NET/IB : Got async event : GID table change\n")
    assert only_finding("NET011", log).severity == "warning"


def test_the_230_port_failover_is_an_error(tmp_path: Path) -> None:
    log = tmp_path / "failover.log"
    log.write_text(
        "[2026-05-04 19:55:27] gpu-6:53:54 [1] transport/net_ib/p2p_resiliency.cc:325 NCCL WARN NET/IB: "
        "ncclIbResiliencyHandleDeviceFailure: Device 0 marked as failed. Initiating recovery? Yes "
        "(send comm=0x7f03e80, outstandingRecovery=0)\n"
    )
    found = only_finding("NET011", log)
    assert found.severity == "error" and "device marked as failed by NCCL's IB port failover" in found.message


def test_a_queue_pairs_own_event_is_not_a_fabric_change() -> None:
    assert findings_of("NET011", QP_EVENT) == []


def test_an_nvls_bind_failure_is_the_fabric() -> None:
    found = only_finding("RUN009", BIND)
    assert found.message == (
        "the NVLink fabric is not ready on hgx-c04: NVLS multicast memory could not be bound (1 x CUDA error 401 "
        "'the operation cannot be performed in the present state')"
    )
    assert "nvidia-fabricmanager" in found.fix and "NCCL_NVLS_ENABLE=0" in found.fix


def test_system_not_yet_initialized_from_nccl_tests_is_the_fabric_manager(tmp_path: Path) -> None:
    out = tmp_path / "tests.txt"
    out.write_text(
        "# nccl-tests version 2.13.9 nccl-headers=22105 nccl-library=22105\n"
        "# Collective test starting: all_reduce_perf\n"
        "gpu: Test CUDA failure common.cu:1030 'system not yet initialized'\n"
        " .. gpu pid 3018: Test failure common.cu:937\n"
    )
    assert "CUDA says 'system not yet initialized' (1 line)" in only_finding("RUN009", out).message


def test_a_cuda_init_error_in_the_nvls_code_is_not_the_fabric() -> None:
    assert findings_of("RUN009", INIT_ERROR) == []
    assert findings_of("RUN009", "fixtures/nccl/v2_18_8xh100_nvswitch.log") == []
