"""Issue 44: NCCL 2.31's diagnostics reports (`<host>:<pid> NCCL DIAG [OK|INFO] ...`) read by their grammar: a P2P
check that failed is TOPO010, a rank's network bandwidth far under the median NET008, a variable that differs across
ranks ENV002; [OK] reports and reports of other forms are kept and say nothing."""

from __future__ import annotations

from pathlib import Path

from conftest import analysis_of, findings_of, only_finding

FAILURES = "fixtures/runtime/v2_31_diagnostics_failures.log"
HEALTHY = "fixtures/runtime/v2_31_diagnostics_healthy.log"


def test_every_diag_line_is_read_into_a_typed_report() -> None:
    case = analysis_of(FAILURES).case
    assert [(r.kind, r.status, r.host, r.pid) for r in case.diag_reports] == [
        ("p2p", "INFO", "gpu-n01", 5120), ("net_bw", "INFO", "gpu-n01", 5120), ("env_differs", "INFO", "gpu-n01", 5120)
    ]  # fmt: skip
    p2p, net, env = case.diag_reports
    assert (p2p.passed, p2p.total) == (52, 56)
    assert (net.rank, net.node, net.nic_kind, net.measured_gbits, net.median_gbits, net.comm) == (
        3, "gpu-n01", "cross-nic", 265.1, 391.5, "0x7fa3c1d2e4b5a697"
    )  # fmt: skip
    assert (env.env_name, env.env_value, env.ranks) == ("NCCL_BUFFSIZE", "8388608", list(range(8, 16)))
    assert "nccl_diag" in case.sources[0].kinds and not case.sources[0].unrecognized


def test_a_failed_p2p_check_is_an_error() -> None:
    found = only_finding("TOPO010", FAILURES)
    assert found.severity == "error" and found.hosts == ["gpu-n01"]
    assert "only 52 of 56 GPU-to-GPU peer accesses passed verification, so 4 failed" in found.message
    assert found.explanation.startswith("At communicator init NCCL 2.31 writes data between every GPU pair")


def test_a_slow_rank_of_the_network_check_is_a_degraded_port() -> None:
    found = only_finding("NET008", FAILURES)
    assert found.severity == "warning" and found.ranks == [3]
    assert "at 265.1 Gbit/s cross-nic, 32% under the median 391.5 Gbit/s" in found.message


def test_a_variable_that_differs_across_ranks_is_named_with_its_ranks() -> None:
    found = only_finding("ENV002", FAILURES)
    assert found.message == (
        "NCCL_BUFFSIZE differs between the ranks of one communicator, as NCCL's RAS diagnostics compare them:"
        " 8388608 on 8 ranks (8-15)"
    )
    # the variable that asks for the diagnostics is not an override
    assert findings_of("ENV001", FAILURES) == []


def test_reports_that_pass_behind_a_launcher_tag_say_nothing() -> None:
    analysis = analysis_of(HEALTHY)
    assert [(r.kind, r.status) for r in analysis.case.diag_reports] == [
        ("other", "OK"), ("other", "OK"), ("env_consistent", "OK")
    ]  # fmt: skip
    assert {f.code for f in analysis.findings} <= {"EVD001"}


def test_a_diag_line_cut_short_is_left_to_the_other_readers(tmp_path: Path) -> None:
    cut = tmp_path / "cut.log"
    cut.write_text("gpu-n01:5120 NCCL DIAG [INF\n")
    assert analysis_of(cut).case.diag_reports == []
