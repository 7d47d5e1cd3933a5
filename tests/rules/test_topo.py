"""TOPO001-TOPO006 and CH001: wiring of GPUs and NICs, and the channels NCCL builds on it.

Each behaviour is driven through the real pipeline (read the inputs, build the Case, run every
rule) on fixtures; the matrix fixtures are in fixtures/topo and fixtures/topo_cases.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import REPO, run_cli
from conftest import evidence_lines as lines
from conftest import findings_of as findings
from conftest import only_finding as only

TWO_SWITCHES_SYS = "fixtures/topo/pcie_8gpu_two_switches_sys.txt"
H100_NVSWITCH_MATRIX = "fixtures/topo/h100_8gpu_nic_legend_tabs.txt"
H100_VM_MATRIX = "fixtures/topo/h100_4gpu_spaces.txt"
V100_CUBE_MESH = "fixtures/topo/v100_soc_legend.txt"
TWO_GPU_PHB = "fixtures/topo/gpu_only_2gpu.txt"
L40S_NODE_SYS = "fixtures/topo/nic_rows_no_affinity.txt"
A100_PXB_NICS = "fixtures/topo/a100_8gpu_mlx_columns.txt"
NV4_EVERYWHERE = "fixtures/topo/lost_tabs_runtogether.txt"
NV3_BRIDGED_PAIRS = "fixtures/topo/odd_affinity_prompt.txt"
H100_NVSWITCH_LOG = "fixtures/nccl/v2_18_8xh100_nvswitch.log"
SHM_LOG = "fixtures/nccl/shm_instead_of_p2p.log"
DEBUG_OVERRIDES_LOG = "fixtures/nccl/debug_env_overrides.log"
SHM_ON_TWO_HOSTS_LOG = "fixtures/nccl/v2_30_7_latest.log"
ONE_GPU_PER_HOST_LOG = "fixtures/nccl/v2_27_gh200_gdr_pci.log"
RUNTIME_ERRORS_LOG = "fixtures/nccl/errors_runtime.log"
SOCKET_TWO_PCIE_GPUS_LOG = "fixtures/nccl/v2_26_socket_fallback.log"

CASES = "fixtures/topo_cases"
A100_ONE_PAIR_NO_NVLINK = f"{CASES}/a100_4gpu_one_pair_no_nvlink.txt"
NIC_ON_OTHER_SOCKET = f"{CASES}/l40s_4gpu_nic_other_socket.txt"
VM_FLAT_MATRIX = f"{CASES}/vm_4gpu_flat_topo.txt"
VM_TINY_MAXBW_LOG = f"{CASES}/vm_4gpu_maxbw12.log"
VM_SYSFS_LOG = f"{CASES}/vm_sysfs_unreadable.log"
A100_ONE_CHANNEL_LOG = f"{CASES}/a100_8gpu_nvlink_one_channel.log"
NO_RDMA_BUNDLE = f"{CASES}/no_rdma_nic_bundle.txt"
TWO_SOCKET_PATHS_LOG = f"{CASES}/two_socket_4gpu_paths.log"


# --------------------------------------------------------------------------------- TOPO001
def test_gpu_pairs_across_the_sockets_without_nvlink_are_an_error() -> None:
    finding = only("TOPO001", TWO_SWITCHES_SYS)
    assert finding.severity == "error"
    assert "GPU0-3 <-> GPU4-7" in finding.message
    assert "SYS" in finding.message and "16 pairs" in finding.message
    assert lines(finding)[0] == 1  # the matrix header
    assert lines(finding)[1:] == [2, 3, 4, 5]  # then the rows of GPU0..GPU3 (5 lines shown)
    assert finding.evidence_count == 9  # header + the eight GPU rows


@pytest.mark.parametrize(
    ("version", "said"),
    [
        (None, "NCCL uses P2P only up to PXB on Intel and ARM CPUs (from 2.23 on AMD hosts of more than two GPUs too)"),
        ("2.21.5", "NCCL 2.21.5 uses P2P beyond PXB only on AMD CPUs: on Intel and ARM CPUs this traffic goes"),
        ("2.27.7", "NCCL 2.27.7 uses P2P only up to PXB (but between the two GPUs of an AMD host), so this traffic"),
    ],
)
def test_what_nccl_does_with_a_far_pair_follows_its_release(tmp_path: Path, version: str | None, said: str) -> None:
    """NCCL 2.9-2.22 use P2P through the CPU on AMD CPUs and keep it within PXB on Intel and ARM ones; 2.23+ keep it
    within PXB but between the two GPUs of an AMD host (src/graph/paths.cc, data/nccl_releases.json)."""
    inputs = [TWO_SWITCHES_SYS]
    if version:
        log = tmp_path / "version.log"
        log.write_text(f"pcie-box:4410:4410 [0] NCCL INFO NCCL version {version}+cuda12.4\n")
        inputs.append(str(log))
    finding = only("TOPO001", *inputs)
    assert said in finding.message, finding.message
    assert "NCCL does not use P2P beyond PXB" not in finding.message


def test_an_nvswitch_matrix_has_no_far_gpu_pairs() -> None:
    assert findings("TOPO001", H100_NVSWITCH_MATRIX) == []


def test_gpu_pairs_through_a_host_bridge_are_a_warning() -> None:
    finding = only("TOPO001", TWO_GPU_PHB)
    assert finding.severity == "warning"
    assert "GPU0 <-> GPU1 PHB" in finding.message
    assert lines(finding) == [1, 2, 3]


def test_node_and_sys_pairs_give_one_finding_per_severity() -> None:
    by_severity = {f.severity: f for f in findings("TOPO001", L40S_NODE_SYS)}
    assert set(by_severity) == {"error", "warning"}
    assert "GPU0-1 <-> GPU2-3" in by_severity["error"].message
    assert "GPU0 <-> GPU1; GPU2 <-> GPU3 NODE" in by_severity["warning"].message


@pytest.mark.parametrize("matrix", [V100_CUBE_MESH, A100_ONE_PAIR_NO_NVLINK])
def test_pairs_sharing_an_nvlink_neighbour_are_not_far(matrix: str) -> None:
    # NCCL routes them through the neighbour GPU (NVB path); TOPO003 tells that story
    assert findings("TOPO001", matrix) == []


def test_far_pairs_mention_the_shm_connections_of_the_log_and_start_the_story() -> None:
    finding = only("TOPO001", TWO_SWITCHES_SYS, SHM_LOG)
    assert "6 SHM connection lines" in finding.message
    assert finding.hosts == ["l40s-box-05"]
    assert "TOPO004" in finding.related
    assert finding.root_cause


def test_without_a_matrix_the_paths_nccl_prints_between_gpus_say_which_pairs_are_far() -> None:
    """Issue 43: NCCL's (and RCCL's) paths after the topology dump (GRAPH): SYS pairs an error, PHB a warning, each
    with the bandwidth NCCL gives it and the path lines of both GPUs as evidence; PIX pairs are fine."""
    by_severity = {f.severity: f for f in findings("TOPO001", TWO_SOCKET_PATHS_LOG)}
    assert set(by_severity) == {"error", "warning"}
    sys_pairs, phb_pairs = by_severity["error"], by_severity["warning"]
    assert "cross the CPU-to-CPU interconnect (SYS): GPU/0-1b000 <-> GPU/0-89000 at 10 GB/s," in sys_pairs.message
    assert "(4 pairs, from NCCL's topology paths)" in sys_pairs.message
    assert "go through a PCIe host bridge (PHB): GPU/0-89000 <-> GPU/0-b1000 at 24 GB/s (1 pair" in phb_pairs.message
    assert "GPU/0-3d000 at" not in phb_pairs.message  # the PIX pair
    assert "6 SHM connection lines (GPU traffic through host memory)" in sys_pairs.message
    assert lines(phb_pairs) == [25, 26] and sys_pairs.hosts == ["ws-a40x4-07"]
    # the log's paths leave the rule nothing to ask for: EVD001 no longer names TOPO001
    (evd,) = findings("EVD001", TWO_SOCKET_PATHS_LOG)
    assert "TOPO001" not in evd.message and "TOPO002" in evd.message


def test_a_matrix_given_with_the_log_is_what_the_rule_reads() -> None:
    # the matrix of another host (l40s-box-05) says what it says; the log's paths are not read twice
    found = findings("TOPO001", TWO_SOCKET_PATHS_LOG, TWO_GPU_PHB)
    assert [f.message for f in found if "NCCL's topology paths" in f.message] == []


# --------------------------------------------------------------------------------- TOPO002
def test_gpus_whose_only_nic_is_across_the_sockets_get_a_warning() -> None:
    finding = only("TOPO002", NIC_ON_OTHER_SOCKET)
    assert finding.severity == "warning"
    assert "GPU0-3 -> NIC0 (mlx5_0) SYS" in finding.message
    assert lines(finding)[:2] == [1, 2]


@pytest.mark.parametrize("matrix", [H100_NVSWITCH_MATRIX, TWO_SWITCHES_SYS, A100_PXB_NICS, A100_ONE_PAIR_NO_NVLINK])
def test_gpus_with_a_nic_on_their_pcie_switch_are_fine(matrix: str) -> None:
    assert findings("TOPO002", matrix) == []


def test_far_gpus_whose_nvlink_peer_has_a_close_nic_go_through_pxn() -> None:
    far, pxn = sorted(findings("TOPO002", V100_CUBE_MESH), key=lambda f: "PXN" in f.message)
    assert "GPU6-7 -> mlx5_0 SYS" in far.message and far.severity == "warning"
    assert "GPU2-3 -> mlx5_0 PHB" in pxn.message and "GPU4-5 -> mlx5_0 SYS" in pxn.message
    # PXN routes them, but the NIC of GPU0-1 carries the traffic of all eight GPUs: not merely worth knowing
    assert pxn.severity == "warning" and "only GPU0-1 have a NIC on their PCIe switch" in pxn.message


def test_a_host_without_any_rdma_nic_is_info() -> None:
    finding = only("TOPO002", NO_RDMA_BUNDLE)
    assert finding.severity == "info"
    assert "no RDMA NIC" in finding.message and "NET/Socket" in finding.message
    assert 2 in lines(finding)  # the matrix header, after the shell prompt


def test_a_gpu_only_matrix_alone_says_nothing_about_nics() -> None:
    assert findings("TOPO002", TWO_GPU_PHB) == []


# --------------------------------------------------------------------------------- TOPO003
def test_one_pair_without_nvlink_on_an_nvlink_host_is_a_warning() -> None:
    finding = only("TOPO003", A100_ONE_PAIR_NO_NVLINK)
    assert finding.severity == "warning"
    assert "NV4 on 5 pairs" in finding.message
    assert "no NVLink on GPU1 <-> GPU3 (1 pair, SYS" in finding.message
    assert lines(finding) == [1, 3, 5]  # header, GPU1 row, GPU3 row


def test_nvlink_only_in_bridged_pairs_is_a_design() -> None:
    finding = only("TOPO003", NV3_BRIDGED_PAIRS)
    assert finding.severity == "info"  # a bridge per pair of cards: nothing to reseat
    assert "NVLink joins the GPUs in pairs (GPU0-GPU1, GPU2-GPU3)" in finding.message


def test_the_dgx1_hybrid_cube_mesh_is_uneven_by_design() -> None:
    finding = only("TOPO003", V100_CUBE_MESH)
    assert finding.severity == "info"
    assert "hybrid cube mesh" in finding.message


@pytest.mark.parametrize("matrix", [H100_NVSWITCH_MATRIX, NV4_EVERYWHERE, TWO_SWITCHES_SYS])
def test_uniform_or_absent_nvlink_is_not_uneven(matrix: str) -> None:
    assert findings("TOPO003", matrix) == []


# --------------------------------------------------------------------------------- TOPO004
def test_shm_between_gpus_of_one_host_is_a_warning_naming_ranks_and_devices() -> None:
    finding = only("TOPO004", SHM_LOG)
    assert finding.severity == "warning"
    assert finding.hosts == ["l40s-box-05"]
    for pair in ("GPU7 -> GPU0 (ranks 7 -> 0)", "GPU1 -> GPU2 (ranks 1 -> 2)", "GPU3 -> GPU4 (ranks 3 -> 4)"):
        assert pair in finding.message
    assert "6 connection lines" in finding.message
    assert "Could not enable P2P" not in finding.message and "dev 1 <-> dev 2" in finding.message
    assert finding.ranks == [0, 1, 2, 3, 4, 7]
    assert lines(finding)[:2] == [32, 53]  # the P2P refusal, then the first SHM line


def test_shm_pairs_show_their_matrix_path_when_a_matrix_is_given() -> None:
    finding = only("TOPO004", TWO_SWITCHES_SYS, SHM_LOG)
    assert "GPU3 -> GPU4 [SYS]" in finding.message


def test_p2p_switched_off_by_environment_is_named_as_the_cause() -> None:
    finding = only("TOPO004", DEBUG_OVERRIDES_LOG)
    assert "NCCL_P2P_DISABLE=1" in finding.message
    assert "8 GPU pairs" in finding.message


@pytest.mark.parametrize(("value", "named"), [("PIX", True), ("NVL", True), ("1", True), ("SYS", False), ("4", False)])
def test_a_p2p_level_is_named_as_the_cause_of_shm_only_when_it_caps_p2p(
    tmp_path: Path, value: str, named: bool
) -> None:
    """NCCL_P2P_LEVEL=SYS (or the old 4) lets P2P farther than NCCL's own cutoff: it cannot be why NCCL chose SHM."""
    text = (REPO / SHM_LOG).read_text()
    prefix = next(line for line in text.splitlines() if "NCCL INFO" in line).split(" NCCL INFO")[0]
    log = tmp_path / "p2p_level.log"
    log.write_text(f"{prefix} NCCL INFO NCCL_P2P_LEVEL set by environment to {value}\n" + text)
    finding = only("TOPO004", str(log))
    assert (f"NCCL_P2P_LEVEL={value}" in finding.message) == named, finding.message


def test_hosts_with_the_same_shm_pair_share_one_finding() -> None:
    finding = only("TOPO004", SHM_ON_TWO_HOSTS_LOG)
    assert finding.hosts == ["gpu-p01", "gpu-p02"]
    assert "on each host: GPU0 -> GPU1" in finding.message


def _bus_bracket_log(tmp_path: Path, refusals: bool, version: str | None = None, hexed: bool = True) -> Path:
    """Four ranks of one host in NCCL 2.7's format, whose brackets are busIds (`1[90]` is the GPU at
    bus 0x90, not GPU 90): GPU0 reached through host memory from ranks 1 and 3 (formats.md B.14)."""
    head = "pc-04:2106{r}:2134{r} [{r}] NCCL INFO "
    rows = [] if version is None else [head.format(r=0) + f"NCCL version {version}+cuda11.0"]
    if hexed:
        rows.append(head.format(r=2) + "Channel 01 : 2[a0] -> 3[b0] via P2P/IPC")
    for rank, bus in ((1, "90"), (3, "b0" if hexed else "70")):
        if refusals:
            rows.append(head.format(r=rank) + f"Could not enable P2P between dev {rank}(={bus}) and dev 0(=80)")
        rows.append(head.format(r=rank) + f"Channel 01 : {rank}[{bus}] -> 0[80] via direct shared memory")
    path = tmp_path / "bus_brackets.log"
    path.write_text("\n".join(rows) + "\n")
    return path


def test_shm_pairs_of_bus_bracketed_lines_are_named_by_the_devices_the_p2p_refusals_give(tmp_path: Path) -> None:
    finding = only("TOPO004", _bus_bracket_log(tmp_path, refusals=True))
    assert "GPU1 -> GPU0 (ranks 1 -> 0)" in finding.message
    assert "GPU3 -> GPU0 (ranks 3 -> 0)" in finding.message
    assert "GPU90" not in finding.message and "GPU80" not in finding.message


def test_shm_pairs_of_bus_bracketed_lines_keep_their_bus_ids_when_nothing_maps_them(tmp_path: Path) -> None:
    finding = only("TOPO004", _bus_bracket_log(tmp_path, refusals=False))
    assert "busId 90 -> busId 80 (ranks 1 -> 0)" in finding.message
    assert "GPU90" not in finding.message


def test_an_nccl_release_that_brackets_bus_ids_makes_decimal_looking_ones_bus_ids(tmp_path: Path) -> None:
    log = _bus_bracket_log(tmp_path, refusals=False, version="2.7.8", hexed=False)
    finding = only("TOPO004", log)
    assert "busId 90 -> busId 80 (ranks 1 -> 0)" in finding.message
    assert "busId 70 -> busId 80 (ranks 3 -> 0)" in finding.message


@pytest.mark.parametrize("log", [H100_NVSWITCH_LOG, ONE_GPU_PER_HOST_LOG])
def test_p2p_hosts_and_one_gpu_per_host_jobs_have_no_shm_finding(log: str) -> None:
    assert findings("TOPO004", log) == []


# --------------------------------------------------------------------------------- TOPO005
def test_p2p_disabled_between_nvlink_gpus_is_an_error() -> None:
    finding = only("TOPO005", RUNTIME_ERRORS_LOG)
    assert finding.severity == "error"
    assert "hgx-a100-31: GPU0 <-> GPU1" in finding.message
    assert finding.hosts == ["hgx-a100-31"]
    assert lines(finding) == [44]


def test_a_healthy_nvlink_host_has_no_p2p_disabled_finding() -> None:
    assert findings("TOPO005", H100_NVSWITCH_LOG) == []


# --------------------------------------------------------------------------------- TOPO006
def test_unreadable_sysfs_topology_is_a_warning() -> None:
    finding = only("TOPO006", VM_SYSFS_LOG)
    assert finding.severity == "warning"
    assert "could not read 4 sysfs files (max_link_speed, max_link_width)" in finding.message
    assert finding.hosts == ["hv-nc-a100-05"]
    assert lines(finding) == [12, 13, 14, 15]


def test_a_flat_matrix_with_a_tiny_maxbw_is_a_virtual_topology() -> None:
    finding = only("TOPO006", VM_FLAT_MATRIX, VM_TINY_MAXBW_LOG)
    assert finding.severity == "warning"
    assert "maxBw 12 GB/s on vm-a10x4-03" in finding.message and "flat" in finding.message
    assert finding.hosts == ["vm-a10x4-03"]
    assert {1, 6, 18} <= set(lines(finding))  # matrix header, NIC row, `=== System : maxBw 12.0`


@pytest.mark.parametrize("matrix", [VM_FLAT_MATRIX, H100_VM_MATRIX])
def test_a_flat_matrix_alone_is_not_enough(matrix: str) -> None:
    # a real single-socket host whose one NIC hangs off the CPU looks the same
    assert findings("TOPO006", matrix) == []


def test_a_tiny_maxbw_alone_is_not_enough() -> None:
    # a PCIe Gen3 host has maxBw 12 too
    assert findings("TOPO006", VM_TINY_MAXBW_LOG) == []


def test_a_healthy_topology_dump_is_not_virtual() -> None:
    assert findings("TOPO006", H100_NVSWITCH_LOG) == []


# ----------------------------------------------------------------------------------- CH001
def test_one_channel_on_an_8_gpu_nvlink_host_is_a_warning() -> None:
    finding = only("CH001", A100_ONE_CHANNEL_LOG)
    assert finding.severity == "warning"
    assert "ring graph search nChannels 1 (type NVL/PIX)" in finding.message
    assert "1 coll channel in communicator 0x3f1e9a7c55b20d41" in finding.message
    assert "8 GPUs with NVLink" in finding.message
    assert finding.hosts == ["hgx-a100-17"]
    assert {61, 63} <= set(lines(finding))


def test_channel_counts_set_by_environment_are_a_warning() -> None:
    finding = only("CH001", DEBUG_OVERRIDES_LOG)
    assert "NCCL_MAX_NCHANNELS=2" in finding.message and "NCCL_MIN_NCHANNELS=1" in finding.message
    assert "2 coll channels" in finding.message


@pytest.mark.parametrize("log", [SOCKET_TWO_PCIE_GPUS_LOG, SHM_LOG, H100_NVSWITCH_LOG])
def test_few_channels_on_pcie_hosts_and_many_on_nvswitch_are_normal(log: str) -> None:
    # nChannels 1 on 2 PCIe GPUs, 2 coll channels on 8 PCIe GPUs, 8 channels on 8 H100
    assert findings("CH001", log) == []


# ------------------------------------------------------------------------------------- CLI
def test_the_cli_reports_the_far_pairs_of_the_two_switch_matrix_as_json() -> None:
    proc = run_cli("analyze", "--format", "json", "--fail-on", "never", TWO_SWITCHES_SYS)
    assert proc.returncode == 0, proc.stderr.decode()
    data = json.loads(proc.stdout)
    topo = [f for f in data["findings"] if f["code"] == "TOPO001"]
    assert [f["severity"] for f in topo] == ["error"]
    assert topo[0]["name"] == "gpu-pair-far"
    assert topo[0]["evidence"][0] == {
        "source": TWO_SWITCHES_SYS,
        "line": 1,
        "text": "  GPU0  GPU1  GPU2  GPU3  GPU4  GPU5  GPU6  GPU7  NIC0  NIC1",
    }
    assert topo[0]["sources"] and topo[0]["fix"]


def test_a_quad_superchip_node_reaches_its_nics_over_c2c_so_sys_is_info() -> None:
    finding = only("TOPO002", "fixtures/topo/gh200_quad_c2c_gpu_numa_ids.txt")
    assert finding.severity == "info"
    assert "every GPU has a NUMA node of its own (GPU NUMA ID)" in finding.message
    assert not findings("TOPO001", "fixtures/topo/gh200_quad_c2c_gpu_numa_ids.txt")
