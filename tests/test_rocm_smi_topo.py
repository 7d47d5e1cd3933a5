"""Issue 43: `rocm-smi --showtopo` read as a topology matrix (parse/rocm_smi_topo.py): XGMI kept as AMD's GPU
link, PCIE placed by the NUMA nodes; TOPO001 fires on GPUs joined through the CPUs and stays silent on xGMI."""

from __future__ import annotations

from ncclscope.case.read import read_case
from ncclscope.diagnose.engine import analyze

from conftest import REPO

XGMI = str(REPO / "fixtures/topo/rocm_smi_showtopo_mi300x_xgmi.txt")
PCIE = str(REPO / "fixtures/topo/rocm_smi_showtopo_pcie_two_sockets.txt")


def test_fully_connected_xgmi_is_a_matrix_of_gpu_links_and_healthy() -> None:
    case = read_case([XGMI], jobs=1).case
    (matrix,) = case.topologies
    assert matrix.gpus == [f"GPU{i}" for i in range(8)] and matrix.gpu_link == "xGMI"
    assert {cell for row in matrix.links.values() for cell in row.values()} == {"X", "XGMI"}
    assert matrix.numa_affinity["GPU5"] == "1"
    assert case.sources[0].kinds == ["topology"]
    assert not [f for f in analyze(case).findings if f.code.startswith("TOPO")]


def test_pcie_pairs_are_placed_by_their_numa_nodes_and_their_evidence_is_the_real_lines() -> None:
    case = read_case([PCIE], jobs=1).case
    (matrix,) = case.topologies
    assert matrix.links["GPU0"]["GPU1"] == "NODE" and matrix.links["GPU0"]["GPU2"] == "SYS"
    found = [f for f in analyze(case).findings if f.code == "TOPO001"]
    assert [f.severity for f in found] == ["error", "warning"]
    assert "without xGMI cross the CPU-to-CPU interconnect, SYS: GPU0-1 <-> GPU2-3" in found[0].message
    # RCCL keeps NCCL's older cutoff: P2P through the CPU on AMD CPUs, host memory on Intel and ARM ones
    assert (
        "RCCL copies this traffic through host memory on Intel and ARM CPUs and sends it over P2P" in found[0].message
    )
    assert "NCCL" not in found[0].message
    lines = open(PCIE, encoding="utf-8").read().splitlines()
    for evidence in found[0].evidence:
        assert lines[evidence.line - 1].strip() == evidence.text  # each quoted line is the file's own
    assert any("PCIE" in e.text for e in found[0].evidence)


def test_a_paste_without_the_numa_section_says_only_that_the_path_crosses_the_root_complex(tmp_path) -> None:
    text = open(PCIE, encoding="utf-8").read().split("==== Numa Nodes")[0].rsplit("\n", 1)[0]
    cut = tmp_path / "showtopo.txt"
    cut.write_text(text + "\n", encoding="utf-8")
    (matrix,) = read_case([str(cut)], jobs=1).case.topologies
    assert {matrix.links["GPU0"]["GPU1"], matrix.links["GPU0"]["GPU2"]} == {"PHB"}
