"""ENV001 and ENV002: NCCL_* settings, judged through the real pipeline.

Fixtures of this family are in fixtures/runtime (see its README); the others come from
fixtures/nccl, fixtures/mixed and fixtures/topo.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

from ncclscope.case.read import read_case
from ncclscope.diagnose.engine import analyze
from ncclscope.diagnose.rules.env import KNOBS
from ncclscope.diagnose.rules.env_knobs import knob_effects
from ncclscope.model import Finding

from conftest import REPO, findings_of, run_cli

DEBUG_ENV = str(REPO / "fixtures/nccl/debug_env_overrides.log")
H100_MATRIX = str(REPO / "fixtures/topo/h100_8gpu_nic_legend_tabs.txt")
EXTRA_ENV = str(REPO / "fixtures/runtime/three_hosts_extra_env.log")
SAME_ENV = str(REPO / "fixtures/runtime/three_hosts_same_env.log")
DEMO = str(REPO / "fixtures/mixed/multi_host_job_problems.txt")
HEALTHY_NVSWITCH = str(REPO / "fixtures/nccl/v2_18_8xh100_nvswitch.log")
HEALTHY_MULTINODE = str(REPO / "fixtures/nccl/v2_28_healthy_multinode_gdr.log")
TWO_HOSTS_IB = str(REPO / "fixtures/nccl/v2_12_two_hosts_ib_gdr.log")
EFA = str(REPO / "fixtures/nccl/efa_aws_ofi.log")
SEED_SINGLE_HOST_IB_OFF = Path(REPO).parent / "shared" / "seeds" / "002_0bad1d865d8e9f7b.txt"


@cache
def _findings(*paths: str) -> tuple[Finding, ...]:
    return tuple(analyze(read_case(list(paths), jobs=1).case).findings)


def findings(code: str, *paths: str) -> list[Finding]:
    return [f for f in _findings(*paths) if f.code == code]


def by_variable(code: str, *paths: str) -> dict[str, Finding]:
    return {f.message.split("=")[0]: f for f in findings(code, *paths)}


# ------------------------------------------------------------------------------------ ENV001
def test_seed_single_host_ib_disable_is_a_warning_that_says_it_does_not_affect_this_run() -> None:
    if not SEED_SINGLE_HOST_IB_OFF.exists():
        pytest.skip("seed not present")
    found = by_variable("ENV001", str(SEED_SINGLE_HOST_IB_OFF))
    ib = found["NCCL_IB_DISABLE"]
    assert ib.severity == "warning"
    assert "single-host" in ib.message
    assert "does not affect this run" in ib.message
    assert "several hosts" in ib.message


def test_debug_overrides_without_hardware_evidence_are_warnings_one_per_variable() -> None:
    found = by_variable("ENV001", DEBUG_ENV)
    for name in (
        "NCCL_IB_DISABLE",
        "NCCL_P2P_DISABLE",
        "NCCL_P2P_LEVEL",
        "NCCL_NVLS_ENABLE",
        "NCCL_ALGO",
        "NCCL_PROTO",
        "NCCL_MAX_NCHANNELS",
        "NCCL_NTHREADS",
        "NCCL_BUFFSIZE",
        "NCCL_NET_GDR_LEVEL",
    ):
        assert found[name].severity == "warning", name
    assert not [f for f in findings("ENV001", DEBUG_ENV) if f.severity == "error"]
    assert len(findings("ENV001", DEBUG_ENV)) == 14  # one per variable/value of the log


def test_finding_names_host_process_count_and_the_env_line() -> None:
    p2p = by_variable("ENV001", DEBUG_ENV)["NCCL_P2P_DISABLE"]
    assert p2p.message.startswith("NCCL_P2P_DISABLE=1 on dgx-h100-09 (1 process)")
    assert p2p.hosts == ["dgx-h100-09"]
    assert [e.line for e in p2p.evidence] == [19]


def test_switching_p2p_and_nvls_off_on_an_nvlink_nvswitch_host_is_an_error() -> None:
    found = by_variable("ENV001", DEBUG_ENV, H100_MATRIX)
    assert found["NCCL_P2P_DISABLE"].severity == "error"
    assert "NV18" in found["NCCL_P2P_DISABLE"].message
    assert found["NCCL_P2P_LEVEL"].severity == "error"
    assert found["NCCL_NVLS_ENABLE"].severity == "error"


def test_ib_disable_stays_a_warning_on_a_single_host_even_with_rdma_nics() -> None:
    ib = by_variable("ENV001", DEBUG_ENV, H100_MATRIX)["NCCL_IB_DISABLE"]
    assert ib.severity == "warning"
    assert "single-host" in ib.message


def test_ib_disable_is_not_excused_as_single_host_when_the_communicator_is_too_large_for_one(
    tmp_path: Path,
) -> None:
    """The same 8 ranks of one host, but of a 16-rank communicator (and no nNodes line): the other 8 run
    elsewhere, so switching IB off does affect this run."""
    text = Path(DEBUG_ENV).read_text().replace("nranks 8", "nranks 16")
    log = tmp_path / "eight_of_sixteen.log"
    log.write_text("\n".join(line for line in text.splitlines() if "nNodes" not in line) + "\n")
    ib = by_variable("ENV001", str(log))["NCCL_IB_DISABLE"]
    assert "single-host" not in ib.message
    assert "does not affect this run" not in ib.message
    assert ib.severity in ("warning", "error")
    assert by_variable("ENV001", DEBUG_ENV)["NCCL_IB_DISABLE"].message != ib.message


@pytest.mark.parametrize(("value", "severity"), [("1", "info"), ("2", "info"), ("0", "warning")])
def test_a_feature_switch_set_on_is_info_and_set_off_is_not(tmp_path: Path, value: str, severity: str) -> None:
    """NCCL_NVLS_ENABLE=1 asks for NVLS, which NCCL uses by itself where the hardware has it: nothing is
    off (a GB200 paste showed it as a debugging-override warning); =0 switches it off."""
    log = tmp_path / "nvls.log"
    log.write_text(f"gb-tray-2:311:311 [0] NCCL INFO NCCL_NVLS_ENABLE set by environment to {value}.\n")
    (found,) = findings("ENV001", str(log))
    assert found.severity == severity
    assert ("nothing is switched off" in found.message) == (value == "1")


def _one_process_four_gpus(tmp_path: Path, gpu: str) -> str:
    """`all_reduce_perf -g 4` (one process, four GPUs: no per-rank init lines) with P2P and SHM off."""
    rows = ["# nThread 1 nGpus 4 minBytes 8 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 20", "#"]
    rows += ["# Using devices"]
    rows += [f"#   Rank  {r} Pid  40417 on   sxm-lab-7 device  {r} [0x{0x41 + r:02x}] {gpu}" for r in range(4)]
    rows += [
        "sxm-lab-7:40417:40417 [0] NCCL INFO NCCL_P2P_LEVEL set by environment to LOC",
        "sxm-lab-7:40417:40417 [0] NCCL INFO NCCL_SHM_DISABLE set by environment to 1.",
    ]
    path = tmp_path / f"{gpu}.log"
    path.write_text("\n".join(rows) + "\n")
    return str(path)


def test_p2p_and_shm_off_on_an_sxm_board_are_errors_without_a_matrix(tmp_path: Path) -> None:
    """A100-SXM4 modules of one board are linked by NVLink, and with P2P off too SHM was the only other
    path between them: both settings are errors, known from the nccl-tests device lines alone."""
    found = by_variable("ENV001", _one_process_four_gpus(tmp_path, "A100-SXM4-40GB"))
    assert found["NCCL_P2P_LEVEL"].severity == "error"
    assert "4 A100-SXM4-40GB per host, SXM modules linked by NVLink" in found["NCCL_P2P_LEVEL"].message
    assert found["NCCL_SHM_DISABLE"].severity == "error"
    assert "NCCL_P2P_LEVEL=LOC also set" in found["NCCL_SHM_DISABLE"].message


def test_p2p_off_on_pcie_cards_is_not_called_an_nvlink_error(tmp_path: Path) -> None:
    found = by_variable("ENV001", _one_process_four_gpus(tmp_path, "A100-PCIE-40GB"))
    assert found["NCCL_P2P_LEVEL"].severity == "warning"
    assert "NVLink" not in found["NCCL_P2P_LEVEL"].message.split(";")[0]
    assert found["NCCL_SHM_DISABLE"].severity == "error"  # four GPUs, P2P off: the network is left


def test_tuning_knobs_are_info() -> None:
    found = by_variable("ENV001", TWO_HOSTS_IB)
    assert {name: f.severity for name, f in found.items()} == {"NCCL_IB_HCA": "info", "NCCL_IB_TIMEOUT": "info"}
    # the aws-ofi-nccl plugin sets the instance type's topology file itself: one info naming the plugin
    [efa] = [f for f in findings_of("ENV001", EFA) if "NCCL_TOPO_FILE=" in f.message]
    assert efa.severity == "info" and "aws-ofi-nccl plugin on AWS" in efa.message
    assert by_variable("ENV001", DEBUG_ENV)["NCCL_SOCKET_IFNAME"].severity == "info"


def test_fix_mentions_the_configuration_files_nccl_reads() -> None:
    fix = by_variable("ENV001", DEBUG_ENV)["NCCL_ALGO"].fix
    assert "/etc/nccl.conf" in fix and "NCCL_CONF_FILE" in fix


def test_knob_table_classifies_the_documented_debugging_and_tuning_variables() -> None:
    for name in ("NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_IB_DISABLE", "NCCL_ALGO", "NCCL_PROTO"):
        assert KNOBS[name].kind == "debug"
    for name in ("NCCL_IB_QPS_PER_CONNECTION", "NCCL_CROSS_NIC", "NCCL_MIN_CTAS", "NCCL_IB_PCI_RELAXED_ORDERING"):
        assert KNOBS[name].kind == "tuning"


def test_no_env001_above_info_on_healthy_logs() -> None:
    for path in (HEALTHY_NVSWITCH, HEALTHY_MULTINODE, TWO_HOSTS_IB, SAME_ENV):
        assert all(f.severity == "info" for f in findings("ENV001", path)), path


# ------------------------------------------------------------------------------------ ENV002
def test_variable_set_on_one_host_only_is_reported_with_the_hosts_that_lack_it() -> None:
    algo = [f for f in findings("ENV002", EXTRA_ENV) if f.message.startswith("NCCL_ALGO")]
    assert len(algo) == 1
    assert algo[0].severity == "warning"
    assert algo[0].message.startswith("NCCL_ALGO=Tree is set on gpu-r03 (2 processes) but not on gpu-r01, gpu-r02")
    assert algo[0].hosts == ["gpu-r01", "gpu-r02", "gpu-r03"]


def test_different_values_are_reported_with_which_hosts_have_which() -> None:
    timeout = [f for f in findings("ENV002", EXTRA_ENV) if f.message.startswith("NCCL_IB_TIMEOUT")]
    assert len(timeout) == 1
    assert "18 on gpu-r03 (2 processes)" in timeout[0].message
    assert "22 on gpu-r01, gpu-r02 (4 processes)" in timeout[0].message


def test_identical_settings_on_every_host_are_not_reported() -> None:
    assert findings("ENV002", SAME_ENV) == []
    assert findings("ENV002", TWO_HOSTS_IB) == []
    assert findings("ENV002", HEALTHY_NVSWITCH) == []


def test_demo_job_reports_the_timeout_set_on_one_host() -> None:
    (finding,) = findings("ENV002", DEMO)
    assert "NCCL_IB_TIMEOUT=22 is set on gpu-demo-a" in finding.message
    assert "gpu-demo-b" in finding.message


def test_cli_json_carries_env_findings() -> None:
    result = run_cli("analyze", "--format", "json", EXTRA_ENV)
    data = json.loads(result.stdout)
    codes = [(f["code"], f["severity"]) for f in data["findings"]]
    assert ("ENV002", "warning") in codes
    assert ("ENV001", "warning") in codes
    env002 = [f for f in data["findings"] if f["code"] == "ENV002"]
    assert all(f["evidence"] and f["evidence"][0]["source"].endswith("three_hosts_extra_env.log") for f in env002)


# NCCL_HOSTID names a machine: one value per host is its purpose, two on one host split it
def test_two_host_ids_on_one_machine_split_it_into_two_nodes() -> None:
    # our H200 run: two processes on one GPU given their own NCCL_HOSTID, which NCCL then connects over NET/Socket
    (found,) = [f for f in findings_of("ENV002", "fixtures/device/h200_inspector/json") if "NCCL_HOSTID" in f.message]
    assert found.severity == "warning" and found.hosts == ["vm"]
    assert found.message.startswith(
        "NCCL_HOSTID has 2 values on vm (h200-fake-host-0, h200-fake-host-1): NCCL takes its processes for 2 separate"
        " nodes"
    )
    assert all("NCCL_HOSTID" not in f.message for f in findings_of("ENV001", "fixtures/device/h200_inspector/json"))


def test_one_host_id_per_machine_is_its_purpose(tmp_path: Path) -> None:
    log = tmp_path / "two_hosts.log"
    log.write_text(
        "node-a:101:101 [0] NCCL INFO NCCL version 2.28.9+cuda13.0\n"
        "node-a:101:101 [0] NCCL INFO NCCL_HOSTID set by environment to rack1-slot3\n"
        "node-b:202:202 [0] NCCL INFO NCCL version 2.28.9+cuda13.0\n"
        "node-b:202:202 [0] NCCL INFO NCCL_HOSTID set by environment to rack1-slot4\n"
    )
    assert [f.message for f in analyze(read_case([str(log)], jobs=1).case).findings if "HOSTID" in f.message] == []


# defaults per release (data/nccl_param_defaults.json, from NCCL's parameter definitions at each release tag)
def _settings_log(tmp_path: Path, version: str, *settings: str) -> str:
    log = tmp_path / f"v{version}.log"
    lines = [f"node-a:101:101 [0] NCCL INFO NCCL version {version}+cuda12.4"]
    lines += [f"node-a:101:101 [0] NCCL INFO {s.replace('=', ' set by environment to ')}" for s in settings]
    log.write_text("\n".join(lines) + "\n")
    return str(log)


def test_a_value_equal_to_the_logs_release_default_changes_nothing(tmp_path: Path) -> None:
    (found,) = findings_of("ENV001", _settings_log(tmp_path, "2.28.9", "NCCL_IB_TIMEOUT=20"))
    assert found.severity == "info"
    assert found.message.startswith("NCCL_IB_TIMEOUT=20 on node-a (1 process): NCCL 2.28.9's default value")


def test_a_value_kept_from_an_older_releases_default_says_so(tmp_path: Path) -> None:
    (found,) = findings_of("ENV001", _settings_log(tmp_path, "2.28.9", "NCCL_IB_TIMEOUT=18"))
    assert "(the default from NCCL 2.14 until NCCL 2.23; NCCL 2.28.9's is 20)" in found.message
    # in 2.18, 18 was the default
    (old,) = findings_of("ENV001", _settings_log(tmp_path, "2.18.3", "NCCL_IB_TIMEOUT=18"))
    assert "NCCL 2.18.3's default value, so it changes nothing" in old.message


def test_the_defaults_data_holds_each_change_with_its_release() -> None:
    from ncclscope.diagnose.releases import param_default, param_defaults

    assert [d for _, d in param_defaults("NCCL_IB_TIMEOUT")] == ["14", "18", "20"]
    assert param_default("NCCL_NVLS_ENABLE", (2, 17, 1)) == "1" and param_default("NCCL_NVLS_ENABLE", (2, 18, 1)) == "2"
    assert param_default("NCCL_P2P_LEVEL", (2, 28, 9)) is None  # read with ncclGetEnv, not a parameter


@pytest.mark.parametrize(
    ("value", "raised"),
    [("SYS", True), ("4", True), ("5", True), ("PHB", True), ("3", True), ("PIX", False), ("1", False), ("LOC", False)],
)
def test_a_gdr_level_past_nccls_cutoff_is_said_to_widen_gdr_not_to_cap_it(
    tmp_path: Path, value: str, raised: bool
) -> None:
    """NCCL_NET_GDR_LEVEL=4 is the old number of SYS (src/graph/paths.cc levelsOldToNew): it lets GPUDirect RDMA
    through the CPU, past NCCL's PXB cutoff, where it can be slower than host memory. It switches nothing off, so
    it is no cause of GDR001; a level below PXB (PIX, 1, LOC) is one (a KVM paste, nccltests-d703, was told
    `caps the GPU-NIC distance` for =4)."""
    log = tmp_path / "gdr_level.log"
    log.write_text(f"gpu-a:311:311 [0] NCCL INFO NCCL_NET_GDR_LEVEL set by environment to {value}\n")
    (found,) = findings("ENV001", str(log))
    assert found.severity == "warning"
    assert ("lets GPUDirect RDMA run through the CPU" in found.message) == raised
    assert ("caps the GPU-NIC distance" in found.message) == (not raised)
    assert ("between CPU sockets (SYS)" in found.message) == (value in ("SYS", "4", "5"))
    effects = knob_effects(KNOBS["NCCL_NET_GDR_LEVEL"], value)  # the findings the engine may tell as its effects
    assert ("GDR001" in effects) == (not raised)
    assert "BW001" in effects


@pytest.mark.parametrize(
    ("value", "raised"),
    [("SYS", True), ("4", True), ("PHB", True), ("3", True), ("NVL", False), ("PIX", False), ("2", False)],
)
def test_a_p2p_level_past_nccls_cutoff_is_said_to_widen_p2p_not_to_cap_it(
    tmp_path: Path, value: str, raised: bool
) -> None:
    """NCCL_P2P_LEVEL=SYS lets P2P through the CPU's root complex, past NCCL's default PXB (src/graph/paths.cc
    ncclTopoCheckP2p), where it can be slow or hang (troubleshooting.rst, ACS/IOMMU); NVL or PIX caps it."""
    log = tmp_path / "p2p_level.log"
    log.write_text(f"gpu-a:311:311 [0] NCCL INFO NCCL_P2P_LEVEL set by environment to {value}\n")
    (found,) = findings("ENV001", str(log))
    assert found.severity == "warning"
    assert ("lets P2P between GPUs run through the CPU" in found.message) == raised
    assert ("caps the GPU distance for P2P" in found.message) == (not raised)
    assert ("between CPU sockets (SYS)" in found.message) == (value in ("SYS", "4"))
    assert knob_effects(KNOBS["NCCL_P2P_LEVEL"], value) == (("BW001",) if raised else ())
    assert knob_effects(KNOBS["NCCL_P2P_LEVEL"], "LOC") == ("TOPO004", "BW001")  # LOC switches P2P off


@pytest.mark.parametrize(("ranks", "severity"), [(1, "info"), (2, "warning")])
def test_a_transport_switched_off_for_a_one_gpu_job_changes_nothing_and_is_told_as_info(
    tmp_path: Path, ranks: int, severity: str
) -> None:
    """A one-GPU nccl-tests run (corpus mixed-d309, an integrated GPU with NCCL_NVLS_ENABLE=0): nothing leaves the
    GPU, so no transport between GPUs can matter here; with two ranks the same setting keeps its warning."""
    text = (REPO / "fixtures/nccl_tests/one_rank_busbw_zero.txt").read_text(encoding="utf-8")
    if ranks == 2:
        device = next(line for line in text.splitlines() if line.startswith("#  Rank  0"))
        second = device.replace("Rank  0", "Rank  1").replace("device  0 [0000:01:00]", "device  1 [0000:02:00]")
        text = text.replace(device, f"{device}\n{second}").replace("nGpus 1", "nGpus 2")
    run = tmp_path / "run.txt"
    run.write_text(
        f"$ NCCL_NVLS_ENABLE=0 NCCL_P2P_DISABLE=1 ./build/all_reduce_perf -g {ranks}\n{text}", encoding="utf-8"
    )
    found = {f.message.split("=")[0]: f for f in findings_of("ENV001", str(run))}
    for name in ("NCCL_NVLS_ENABLE", "NCCL_P2P_DISABLE"):
        assert found[name].severity == severity, found[name].message
        assert ("a one-GPU job, where nothing leaves the GPU" in found[name].message) == (ranks == 1)
