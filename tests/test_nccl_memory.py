"""Issue 44: RUN007, NCCL's own device memory behind an out-of-memory; silent where nothing says its share is large."""

from __future__ import annotations

from conftest import findings_of, only_finding

NVLS_OOM = "fixtures/runtime/nvls_init_out_of_memory.log"
PLAIN_OOM = "fixtures/net/cuda_oom_not_memlock.log"


def test_an_oom_in_the_nvls_setup_is_nccls_own_memory() -> None:
    found = only_finding("RUN007", NVLS_OOM)
    assert "1 in NVLS's own set-up (transport/nvls.cc:184)" in found.message
    assert "NCCL_NVLS_ENABLE=0" in found.fix
    assert found.root_cause and "RUN004" in found.explains


def test_an_oom_without_nvls_or_many_communicators_is_only_run004() -> None:
    assert findings_of("RUN007", PLAIN_OOM) == []
    assert findings_of("RUN004", PLAIN_OOM)
