"""TOPO009: NCCL's view of a host (its topology dump, its log) against the host's own (`nvidia-smi topo -m`,
`nvidia-smi topo -p2p`), through the real pipeline."""

from __future__ import annotations

from pathlib import Path

from conftest import REPO, findings_of
from conftest import evidence_lines as lines

MATRIX = "fixtures/topo/h100_8gpu_nic_legend_tabs.txt"
DUMP_HEALTHY = "fixtures/xml/dgx_h100_topo.xml"
DUMP_MISDETECTED = "fixtures/xml/h100_nic_off_switch_topo.xml"
P2P = "fixtures/smi/topo_p2p_r_8x_l40s_two_sockets.txt"
SHM_LOG = "fixtures/nccl/shm_instead_of_p2p.log"


def test_a_nic_nccl_places_off_the_gpus_switch_and_a_gdr_flag_off_next_to_a_gpu() -> None:
    placed, gdr = findings_of("TOPO009", MATRIX, DUMP_MISDETECTED)
    assert placed.severity == gdr.severity == "warning"
    assert "NCCL places mlx5_0 (0000:1b:00.0) on no PCIe switch shared with GPU0" in placed.message
    assert "while `nvidia-smi topo -m` shows them on one switch (GPU0-NIC0 PIX)" in placed.message
    assert 'GPUDirect RDMA off for mlx5_3 (gdr="0"), while `nvidia-smi topo -m` shows it next to GPU3' in gdr.message
    assert lines(placed) == [15] and lines(gdr) == [59]


def test_views_that_agree_say_nothing() -> None:
    assert not findings_of("TOPO009", MATRIX, DUMP_HEALTHY)
    assert not findings_of("TOPO009", DUMP_MISDETECTED)  # no host view to compare with: EVD001 says so


def test_shm_where_the_driver_allows_p2p() -> None:
    (finding,) = findings_of("TOPO009", P2P, SHM_LOG)
    # 1->2 is SHM although topo -p2p says OK; 3->4 and 7->0 cross the sockets, where it says CNS: agreed
    assert finding.message == (
        "on l40s-box-05: NCCL connects GPU1 and GPU2 through host memory (SHM), while `nvidia-smi topo -p2p` "
        "allows P2P read between them (OK)"
    )
    assert [e.source.rsplit("/", 1)[-1] for e in finding.evidence] == [
        SHM_LOG.rsplit("/", 1)[-1],
        P2P.rsplit("/", 1)[-1],
    ]


def test_p2p_switched_off_on_purpose_is_not_a_misdetection(tmp_path: Path) -> None:
    text = (REPO / SHM_LOG).read_text()
    host_line = next(line for line in text.splitlines() if "NCCL INFO" in line)
    prefix = host_line.split(" NCCL INFO")[0]
    path = tmp_path / "p2p_level.log"
    path.write_text(f"{prefix} NCCL INFO NCCL_P2P_LEVEL set by environment to PHB\n" + text)
    assert not findings_of("TOPO009", P2P, path)


def test_the_p2p_matrix_is_read_with_its_capability() -> None:
    from ncclscope.case.read import read_case

    case = read_case([str(REPO / P2P)]).case
    ours = case.p2p_matrices[0]
    assert (ours.capability, ours.gpus[:2], ours.cells["GPU1"]["GPU2"], ours.cells["GPU3"]["GPU4"]) == (
        "read", ["GPU0", "GPU1"], "OK", "CNS"
    )  # fmt: skip
    assert ours.evidence["GPU1"].line == 4
