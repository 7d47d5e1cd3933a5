"""CH002: the graph NCCL settled on against what the host's NVLinks give (graph dump and GRAPH lines)."""

from __future__ import annotations

from pathlib import Path

from conftest import REPO, findings_of

TOPO = "fixtures/xml/dgx_h100_topo.xml"  # GPUs with 18 NVLinks, sm 90: one link is 20.6 GB/s to NCCL
SLOW = "fixtures/xml/h100_graph_nvlink_slow.xml"
HEALTHY = "fixtures/xml/dgx_h100_graph.xml"


def test_a_graph_below_one_nvlink() -> None:
    found = findings_of("CH002", SLOW, TOPO)
    assert sorted(f.message.split(": NCCL's ")[1].split(" settled")[0] for f in found) == ["balanced tree", "ring"]
    ring = next(f for f in found if "ring" in f.message)
    assert ring.severity == "warning"
    assert "settled on 10 GB/s per channel over NVLink (4 channels), below one NVLink's 20.6 GB/s" in ring.message
    assert ring.evidence[0].line == 2 and 'speedintra="10"' in ring.evidence[0].text


def test_a_healthy_graph_and_a_graph_without_nvlink_say_nothing() -> None:
    assert not findings_of("CH002", HEALTHY, TOPO)
    assert not findings_of("CH002", SLOW)  # nothing shows NVLink: a PCIe host is judged by its benchmark


def test_grap_lines_over_the_cpu_on_an_nvlink_host(tmp_path: Path) -> None:
    prefix = "gpu-node-3:4121:4188 [0] NCCL INFO "
    lines = [
        "NCCL version 2.21.5+cuda12.4",
        "=== System : maxBw 12.0 totalBw 370.8 ===",
        "CPU/0-0 (1/1/1)",
        "+ PCI[24.0] - GPU/18000 (0)",
        "              + NVL[370.8] - NVS/0",
        "+ PCI[24.0] - GPU/2a000 (1)",
        "              + NVL[370.8] - NVS/0",
        "Pattern 4, crossNic 0, nChannels 2, bw 12.000000/12.000000, type SYS/PIX, sameChannels 1",
        "NCCL_P2P_DISABLE set by environment to 1",
    ]
    path = tmp_path / "sys.log"
    path.write_text("".join(prefix + line + "\n" for line in lines))
    (finding,) = findings_of("CH002", path)
    assert finding.message == (
        "on gpu-node-3: NCCL's ring runs its 2 channel(s) inside the host over SYS, where the GPUs have NVLink "
        "(NCCL_P2P_DISABLE=1 is set) (GRAPH lines)"
    )
    assert not findings_of("CH002", REPO / "fixtures/nccl/shm_instead_of_p2p.log")  # a PCIe host
