"""Issue 44: NET009 (a queue pair that cannot connect) and NET010 (memory that cannot be pinned), read by the errno
of the verbs call (data/verbs_errors.json); silent on the GPU's own out-of-memory."""

from __future__ import annotations

from conftest import findings_of, only_finding

QP = "fixtures/net/ibv_modify_qp_cross_rail_timeout.log"
MEMLOCK = "fixtures/net/ibv_create_cq_memlock.log"
GPU_OOM = "fixtures/net/cuda_oom_not_memlock.log"


def test_a_qp_timeout_names_the_device_the_gids_and_the_cross_rail_fix() -> None:
    found = only_finding("NET009", QP)
    assert found.message.startswith(
        "ibv_modify_qp failed with 110 Connection timed out on mlx5_0:1 (INIT -> RTR, local GID ::ffff:10.31.0.7, "
        "remote GID ::ffff:10.32.0.8) on rail-a07 (1 line): the two NICs cannot reach each other"
    )
    assert "NCCL_CROSS_NIC=0" in found.fix and "ibvwrap.cc" in found.fix


def test_an_addressing_errno_points_at_the_gid(tmp_path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "roce.log"
    log.write_text("h:1:2 [0] misc/ibvwrap.cc:284 NCCL WARN Call to ibv_modify_qp failed with error No such device\n")
    found = only_finding("NET009", log)
    assert "the RoCE address of the queue pair is wrong" in found.message and "NCCL_IB_GID_INDEX" in found.fix


def test_memlock_from_cq_and_mr_calls_in_one_finding() -> None:
    found = only_finding("NET010", MEMLOCK)
    assert found.message.startswith(
        "ibv_create_cq, ibv_reg_mr_iova2 failed with Cannot allocate memory on pod-trainer-0"
    )
    assert found.evidence_count == 2 and "ulimit -l unlimited" in found.fix


def test_the_ofi_plugins_registration_failure_is_memlock_too(tmp_path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "efa.log"
    log.write_text(
        "ip-10-0-1-5:149:298 [5] register_mr_buffers:465 NCCL WARN NET/OFI Unable to register memory (type = 1) for"
        " device 0. RC: 12, Error: Cannot allocate memory\n"
    )
    assert only_finding("NET010", log).message.startswith("OFI memory registration failed with Cannot allocate memory")


def test_the_gpus_own_out_of_memory_is_neither() -> None:
    assert findings_of("NET010", GPU_OOM) == [] and findings_of("NET009", GPU_OOM) == []
    assert findings_of("NET009", "fixtures/nccl/v2_28_healthy_multinode_gdr.log") == []


def test_the_qp_failure_heads_the_story_of_the_errors_it_causes() -> None:
    found = only_finding("NET009", QP)
    assert found.root_cause and "RUN005" in found.explains
