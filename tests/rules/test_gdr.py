"""GDR001-GDR002: GPUDirect RDMA on RDMA networks, judged through the real pipeline on fixtures."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from ncclscope.case.read import read_case
from ncclscope.diagnose.engine import analyze
from ncclscope.model import Finding

from conftest import run_cli

GDR_ONE_HOST_OFF = "fixtures/net/ib_gdr_one_host_off.log"
SINGLE_HOST_SOCKET = "fixtures/net/single_host_socket.log"
LIBIBVERBS_MISSING = "fixtures/net/libibverbs_missing_two_hosts.log"
DEMO = "fixtures/mixed/multi_host_job_problems.txt"
SOCKET_FALLBACK = "fixtures/nccl/v2_26_socket_fallback.log"
TESTS_WITH_SOCKET = "fixtures/mixed/tests_header_init_table_teardown.txt"
HEALTHY = [
    "fixtures/nccl/v2_28_healthy_multinode_gdr.log",
    "fixtures/nccl/v2_18_8xh100_nvswitch.log",
    "fixtures/nccl/efa_aws_ofi.log",
    "fixtures/nccl/v2_12_two_hosts_ib_gdr.log",
    "fixtures/nccl/v2_21_multinode_ib_merged.log",
    "fixtures/nccl/v2_18_collnet_sharp.log",
    "fixtures/nccl/v2_27_gh200_gdr_pci.log",
    "fixtures/nccl/v2_29_gb200_mnnvl.log",
    "fixtures/nccl/v2_4_two_hosts_ib.log",
]


@cache
def _findings(path: str) -> tuple[Finding, ...]:
    return tuple(analyze(read_case([path], jobs=1).case).findings)


def findings(path: str, code: str) -> list[Finding]:
    return [f for f in _findings(path) if f.code == code]


# ------------------------------------------------------------------------------------ GDR001
def test_gdr001_names_the_host_nics_and_ranks_without_gdr_and_the_cause() -> None:
    (finding,) = findings(DEMO, "GDR001")
    assert finding.severity == "warning"
    assert finding.message.startswith("GPUDirect RDMA is off over NET/IB on gpu-demo-a (NICs mlx5_0")
    assert "ranks 0, 7" in finding.message
    assert "4 connection lines without /GDRDMA" in finding.message
    assert "`GPU Direct RDMA Disabled` for 8 HCAs" in finding.message
    assert "nvidia-peermem" in finding.message
    assert finding.hosts == ["gpu-demo-a"]
    assert finding.ranks == [0, 7]
    assert finding.evidence[0].line == 60  # GPU Direct RDMA Disabled for HCA 0 'mlx5_0'


def test_gdr001_reports_the_host_that_lacks_gdr_in_an_asymmetric_job() -> None:
    (finding,) = findings(GDR_ONE_HOST_OFF, "GDR001")
    assert finding.severity == "warning"
    assert "on gpu-r02 (NICs mlx5_0, mlx5_1; ranks 2-3)" in finding.message
    assert finding.hosts == ["gpu-r02"]


def test_gdr001_ignores_socket_connections_which_have_no_gdr() -> None:
    for path in (SOCKET_FALLBACK, LIBIBVERBS_MISSING, SINGLE_HOST_SOCKET, TESTS_WITH_SOCKET):
        assert findings(path, "GDR001") == [], path


def test_gdr001_is_quiet_on_healthy_gdr_jobs() -> None:
    for path in HEALTHY:
        assert findings(path, "GDR001") == [], path


# ------------------------------------------------------------------------------------ GDR002
def test_gdr002_names_the_host_without_gdr_against_the_one_with_it() -> None:
    (finding,) = findings(GDR_ONE_HOST_OFF, "GDR002")
    assert finding.severity == "warning"
    assert finding.message == (
        "GPUDirect RDMA is off on gpu-r02 (NICs mlx5_0, mlx5_1; ranks 2-3) while gpu-r01 uses it"
    )
    assert finding.hosts == ["gpu-r02"]
    assert finding.ranks == [2, 3]
    shown = {e.line for e in finding.evidence}
    assert 48 in shown  # gpu-r01's [receive] via NET/IB/0/GDRDMA, the side that has it


def test_gdr002_does_not_count_a_socket_host_as_one_without_gdr() -> None:
    assert findings(DEMO, "GDR002") == []


def test_gdr002_is_quiet_when_every_host_has_gdr() -> None:
    for path in HEALTHY:
        assert findings(path, "GDR002") == [], path


def test_cli_json_reports_gdr_findings() -> None:
    proc = run_cli("analyze", "--format", "json", "--select", "GDR", "--fail-on", "never", GDR_ONE_HOST_OFF)
    assert proc.returncode == 0
    data = json.loads(proc.stdout)
    codes = sorted(f["code"] for f in data["findings"])
    assert codes == ["GDR001", "GDR002"]
    for finding in data["findings"]:
        assert finding["severity"] == "warning"
        assert finding["hosts"] == ["gpu-r02"]
        assert finding["fix"] and finding["sources"]


def test_gdr001_names_a_lowered_gdr_level_as_a_cause_and_not_a_raised_one(tmp_path: Path) -> None:
    """A level past NCCL's cutoff (SYS, or its old number 4) turns GPUDirect RDMA on for more NICs: it cannot be
    why GDR is off. A level below the cutoff (LOC) can."""
    text = Path(DEMO).read_text()
    for value, named in (("SYS", False), ("4", False), ("LOC", True)):
        log = tmp_path / f"gdr_{value}.txt"
        log.write_text(f"gpu-demo-a:40110:40110 [0] NCCL INFO NCCL_NET_GDR_LEVEL set by environment to {value}\n{text}")
        (finding,) = [f for f in analyze(read_case([str(log)], jobs=1).case).findings if f.code == "GDR001"]
        assert (f"NCCL_NET_GDR_LEVEL={value} is set" in finding.message) == named, value
