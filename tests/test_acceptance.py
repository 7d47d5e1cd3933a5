"""Issue acceptance: the seeds, the pitfalls table, stories across inputs, and healthy fixtures.

The seeds live in ../shared/seeds (beside the repository, as in CI); their tests are skipped
where that folder is absent.
"""

from __future__ import annotations

import pytest

from ncclscope.model import Analysis

from conftest import REPO
from conftest import analysis_of as run

SEEDS = REPO.parent / "shared" / "seeds"
SEED_002 = SEEDS / "002_0bad1d865d8e9f7b.txt"


def codes(analysis: Analysis, severity: str | None = None) -> set[str]:
    return {f.code for f in analysis.findings if severity is None or f.severity == severity}


def finding(analysis: Analysis, code: str):  # type: ignore[no-untyped-def]
    found = [f for f in analysis.findings if f.code == code]
    assert found, f"{code} not found in {sorted(codes(analysis))}"
    return found[0]


# ------------------------------------------------------------------------------------- seed 002
@pytest.mark.skipif(not SEED_002.exists(), reason="shared/seeds not beside the repository")
def test_seed_002_single_host_socket_is_info_only() -> None:
    analysis = run(SEED_002)
    net = finding(analysis, "NET001")
    assert net.severity == "info"


@pytest.mark.skipif(not SEED_002.exists(), reason="shared/seeds not beside the repository")
def test_seed_002_flags_the_ib_disable_variable() -> None:
    env = finding(run(SEED_002), "ENV001")
    assert "NCCL_IB_DISABLE" in env.message


@pytest.mark.skipif(not SEED_002.exists(), reason="shared/seeds not beside the repository")
def test_seed_002_bandwidth_is_healthy_and_the_verdict_explains_the_900_figure() -> None:
    analysis = run(SEED_002)
    assert "BW001" not in codes(analysis)
    judged = [j for j in analysis.bandwidth if j.collective == "all_reduce"]
    assert judged and judged[0].expected_busbw
    assert 0.9 <= (judged[0].ratio or 0) <= 1.05
    verdict = judged[0].verdict
    assert "900" in verdict and "bidirectional" in verdict.lower()


# ------------------------------------------------------------------- seed 004 and pitfalls (000)
def test_seed_004_two_pcie_switches_joined_through_the_cpu_give_topo001() -> None:
    topo = finding(run("fixtures/topo/pcie_8gpu_two_switches_sys.txt"), "TOPO001")
    assert topo.severity == "error"


def test_pitfall_net_socket_instead_of_net_ib_on_two_hosts() -> None:
    net = finding(run("fixtures/nccl/v2_26_socket_fallback.log"), "NET001")
    assert net.severity == "error"


def test_pitfall_no_gpudirect_rdma() -> None:
    assert "GDR001" in codes(run("fixtures/mixed/multi_host_job_problems.txt"))


def test_pitfall_pcie_bottleneck() -> None:
    analysis = run("fixtures/nccl/shm_instead_of_p2p.log")
    assert "TOPO004" in codes(analysis)


def test_pitfall_mixed_versions() -> None:
    ver = finding(run("fixtures/mixed/multi_host_job_problems.txt"), "VER001")
    assert "2.21.5" in ver.message and "2.23.4" in ver.message


# ----------------------------------------------------------------------------- cross-source story
STORY = [
    "fixtures/stories/pcie_host_topo.txt",
    "fixtures/stories/pcie_host_nccl.log",
    "fixtures/stories/pcie_host_all_reduce.txt",
]


def test_matrix_log_and_benchmark_tell_one_story_root_cause_first() -> None:
    analysis = run(*STORY)
    found = codes(analysis)
    assert {"TOPO001", "TOPO004", "BW001"} <= found
    topo = finding(analysis, "TOPO001")
    assert topo.root_cause
    assert {"TOPO004", "BW001"} <= set(topo.related)
    assert "TOPO001" in finding(analysis, "BW001").related
    first_error = next(f for f in analysis.findings if f.severity == "error")
    assert first_error.code == "TOPO001"


# ------------------------------------------------------------------------------ healthy fixtures
HEALTHY = [
    "fixtures/nccl/v2_18_8xh100_nvswitch.log",
    "fixtures/nccl/v2_28_healthy_multinode_gdr.log",
    "fixtures/topo/h100_8gpu_nic_legend_tabs.txt",
    "fixtures/nccl_tests/one_rank_busbw_zero.txt",
]


@pytest.mark.parametrize("path", HEALTHY)
def test_no_error_on_a_healthy_fixture(path: str) -> None:
    analysis = run(path)
    errors = [f"{f.code}: {f.message}" for f in analysis.findings if f.severity == "error"]
    assert not errors


def test_one_rank_busbw_of_zero_is_expected() -> None:
    analysis = run("fixtures/nccl_tests/one_rank_busbw_zero.txt")
    assert "BW001" not in codes(analysis, "error") | codes(analysis, "warning")
