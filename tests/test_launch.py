"""Issue 44: RUN010 (a process launched unlike the others, refused by the bootstrap root) and RUN011 (a container
that hides the other ranks' GPUs), from typed facts; silent on a healthy log."""

from __future__ import annotations

from conftest import findings_of, only_finding

MISMATCH = "fixtures/runtime/bootstrap_root_mismatch_two_releases.log"
TWICE = "fixtures/runtime/bootstrap_rank_checked_in_twice.log"
HIDDEN = "fixtures/runtime/container_nvml_gpu_not_found.log"
HEALTHY = "fixtures/nccl/v2_28_healthy_multinode_gdr.log"


def test_a_garbage_offset_is_two_releases_in_one_job() -> None:
    found = only_finding("RUN010", MISMATCH)
    assert found.message.startswith("the bootstrap root on node-r1 refused a process (1 line): offset 0 expected but")
    assert "two NCCL releases in one job" in found.message


def test_the_mismatch_is_the_first_failure_and_the_refused_connections_follow() -> None:
    found = only_finding("RUN013", MISMATCH)
    assert found.message.startswith("first failure: NCCL WARN Bootstrap Root : mismatch in info from procs")
    assert "connect to 10.0.9.1 failed" in found.message


def test_a_rank_that_checked_in_twice() -> None:
    assert "rank 3 checked in twice" in only_finding("RUN010", TWICE).message


def test_a_hidden_gpu_is_the_container() -> None:
    found = only_finding("RUN011", HIDDEN)
    assert "do not see each other's GPUs" in found.message and "--ipc=host" in found.fix


def test_a_healthy_log_has_neither() -> None:
    assert findings_of("RUN010", HEALTHY) == [] and findings_of("RUN011", HEALTHY) == []
