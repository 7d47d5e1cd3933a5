"""Issue 44: RUN008, cuMem host or IPC memory that does not work, from typed facts; RUN003 (a full /dev/shm) stays
silent on an attach of size 0."""

from __future__ import annotations

from conftest import findings_of, only_finding

NOTICE = "fixtures/runtime/cumem_host_fallback_notice.log"
ATTACH = "fixtures/runtime/cumem_shm_attach_size0.log"


def test_the_fallback_notice_alone_is_a_warning() -> None:
    found = only_finding("RUN008", NOTICE)
    assert found.severity == "warning"
    assert "falls back to /dev/shm (1 x)" in found.message and "NCCL_CUMEM_HOST_ENABLE=0" in found.fix


def test_a_segment_of_size_zero_is_an_error_and_not_a_full_dev_shm() -> None:
    found = only_finding("RUN008", ATTACH)
    assert found.severity == "error" and "shared-memory segment of size 0" in found.message
    assert findings_of("RUN003", ATTACH) == []


def test_a_full_dev_shm_is_still_run003_and_a_healthy_log_says_nothing() -> None:
    assert findings_of("RUN003", "fixtures/nccl/errors_runtime.log")  # `failed to extend /dev/shm/...`
    assert findings_of("RUN008", "fixtures/nccl/errors_runtime.log") == []
    assert findings_of("RUN008", "fixtures/nccl/v2_28_healthy_multinode_gdr.log") == []
