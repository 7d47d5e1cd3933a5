"""Issue 44: RUN012 from NCCL's own init profile (2.22+): the phase that took the time, with its known causes."""

from __future__ import annotations

from pathlib import Path

from conftest import findings_of, only_finding

SLOW = "fixtures/runtime/init_timings_slow_kernels.log"
FAST = "fixtures/runtime/init_timings_fast.log"


def test_kernels_that_take_most_of_init_are_named_with_their_causes() -> None:
    found = only_finding("RUN012", SLOW)
    assert found.severity == "warning" and found.ranks == [0, 1]
    assert found.message.startswith("init took 41.37 s on rank 0 (2 ranks slow), 39.82 s of it in kernels")
    assert "JIT-compiles" in found.message and "CUDA_MODULE_LOADING=LAZY" in found.fix


def test_a_fast_init_says_nothing() -> None:
    assert findings_of("RUN012", FAST) == []


def test_a_slow_bootstrap_quotes_its_own_timings(tmp_path: Path) -> None:
    log = tmp_path / "boot.log"
    log.write_text(
        "pod-0:188:585 [0] NCCL INFO Bootstrap timings total 8.128340 (create 0.000044, send 0.000162, recv 7.970281,"
        " ring 0.000162, delay 0.000000)\n"
        "pod-0:188:585 [0] NCCL INFO Init timings - ncclCommInitRankConfig: rank 0 nranks 4 total 8.31 (kernels 0.15,"
        " alloc 0.01, bootstrap 8.13, allgathers 0.00, topo 0.01, graphs 0.00, connections 0.00, rest 0.00)\n"
    )
    found = only_finding("RUN012", log)
    assert "8.13 s of it in bootstrap" in found.message and "put 7.97 s in recv" in found.message
