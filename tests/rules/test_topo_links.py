"""TOPO007 (PCIe link below its peers') and TOPO008 (fewer NVLinks than its peers) from NCCL's topology XML dump,
through the real pipeline; each fires on its fixture and stays silent on the healthy host and on variants that
are how a host was built, not a fault."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import REPO, findings_of, only_finding, run_cli
from conftest import evidence_lines as lines

HEALTHY = "fixtures/xml/dgx_h100_topo.xml"
GPU_X8 = "fixtures/xml/h100_gpu3_x8_topo.xml"
NVLINK_DOWN = "fixtures/xml/h100_gpu6_nvlink_down_topo.xml"
CLOUD_FILE = "fixtures/xml/cloud_vm_topo_file.xml"


def variant(tmp_path: Path, name: str, edit: dict[str, str], source: str = HEALTHY) -> Path:
    text = (REPO / source).read_text()
    for old, new in edit.items():
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_gpu_at_x8_among_x16_peers_is_an_error() -> None:
    finding = only_finding("TOPO007", GPU_X8)
    assert finding.severity == "error"
    assert "GPU 3 (0000:5e:00.0) at 32 GT/s x8, where its 7 GPU peers run 32 GT/s x16" in finding.message
    assert 49 in lines(finding)
    assert [h.endswith(GPU_X8) for h in finding.hosts] == [True]  # the dump's file names its host


def test_a_nic_at_an_older_generation_is_an_error_naming_its_device(tmp_path: Path) -> None:
    old = 'class="0x020700" vendor="0x15b3" device="0x1021" subsystem_vendor="0x15b3" subsystem_device="0x0041" '
    gen4_nic = 'link_speed="32.0 GT/s PCIe" link_width="16">\n        <nic>\n          <net name="mlx5_5"'
    text = (REPO / HEALTHY).read_text()
    at = text.index('<net name="mlx5_5"')
    start = text.rindex("<pci ", 0, at)
    pci_line = text[start : text.index("\n", start)]
    assert old in pci_line and gen4_nic.split("\n")[0] in pci_line
    path = tmp_path / "nic_gen4.xml"
    path.write_text(text[:start] + pci_line.replace("32.0 GT/s", "16.0 GT/s") + text[start + len(pci_line) :])
    finding = only_finding("TOPO007", path)
    assert finding.severity == "error"
    assert "NIC mlx5_5 (0000:ae:00.0) at 16 GT/s x16, where its 7 NIC peers run 32 GT/s x16" in finding.message


def test_a_host_built_with_x8_slots_is_not_degraded(tmp_path: Path) -> None:
    path = variant(tmp_path, "all_x8.xml", {'class="0x030200"': 'class="0x030200" x="1"'})
    text = path.read_text().replace('x="1" vendor="0x10de" device="0x2330" subsystem_vendor="0x10de" '
                                    'subsystem_device="0x16c1" link_speed="32.0 GT/s PCIe" link_width="16"',
                                    'vendor="0x10de" device="0x2330" subsystem_vendor="0x10de" '
                                    'subsystem_device="0x16c1" link_speed="32.0 GT/s PCIe" link_width="8"')  # fmt: skip
    path.write_text(text)
    assert text.count('link_width="8"') == 8
    assert not findings_of("TOPO007", path)


def test_the_healthy_host_and_a_cloud_topology_file_say_nothing() -> None:
    for healthy in (HEALTHY, CLOUD_FILE):
        assert not findings_of("TOPO007", healthy) and not findings_of("TOPO008", healthy)


def test_a_gpu_with_two_nvlinks_down_is_an_error() -> None:
    finding = only_finding("TOPO008", NVLINK_DOWN)
    assert finding.severity == "error"
    assert "GPU 6 has 16 NVLinks, where its 7 peers have 18" in finding.message
    assert lines(finding) == [97]
    assert not findings_of("TOPO007", NVLINK_DOWN) and not findings_of("TOPO008", GPU_X8)


def test_a_gpu_without_any_nvlink_among_nvlinked_peers(tmp_path: Path) -> None:
    text = (REPO / HEALTHY).read_text()
    start = text.index('<gpu dev="2"')
    block_end = text.index("</gpu>", start)
    first, last = text.index("\n", start) + 1, text.rindex("\n", start, block_end) + 1
    assert text[first:last].count("<nvlink") == 4
    path = tmp_path / "no_nvlink.xml"
    path.write_text(text[:first] + text[last:])
    finding = only_finding("TOPO008", path)
    assert "GPU 2 has 0 NVLinks, where its 7 peers have 18" in finding.message


def test_without_a_topology_dump_evd001_names_the_rules_and_the_setting() -> None:
    done = run_cli("analyze", "--format", "json", "fixtures/nccl/v2_26_socket_fallback.log")
    assert b"NET008, TOPO007, TOPO008, TOPO009, VER002" in done.stdout and b"NCCL_TOPO_DUMP_FILE" in done.stdout
    assert b"`nvidia-smi nvlink -s` (NVLinks) and `ibstat` (ports)" in done.stdout
    judged = run_cli("analyze", "--format", "json", HEALTHY).stdout  # the dump's nets answer NET008 too
    assert b"TOPO007" not in judged and b"NET008" not in judged


# ------------------------------------------------------------------------------------------ nvidia-smi -q
def test_a_gpu_below_its_own_width_in_nvidia_smi_q() -> None:
    (finding,) = findings_of("TOPO007", "fixtures/smi/nvidia_smi_q_gpu3_x8.txt")
    assert finding.severity == "warning"  # an error needs evidence: no NCCL input shows that the GPU carries traffic
    assert "GPU 3 (0000:5d:00.0) at 32 GT/s x8, capable of 32 GT/s x16 (nvidia-smi -q)" in finding.message
    assert lines(finding) == [426, 481, 482, 487, 488]  # the GPU line, then its generation and width lines


def test_a_healthy_nvidia_smi_q_says_nothing() -> None:
    assert not findings_of("TOPO007", "fixtures/smi/nvidia_smi_q_8x_h100.txt")


# ------------------------------------------------------------------------------------------ nvidia-smi nvlink -s
def test_two_nvlinks_down_in_nvlink_s() -> None:
    finding = only_finding("TOPO008", "fixtures/smi/nvlink_s_gpu6_two_down.txt")
    assert "GPU 6 has 16 active NVLinks (links 14-15 inactive), where its 7 peers have 18 (nvidia-smi nvlink -s)" in (
        finding.message
    )
    assert lines(finding) == [116, 131, 132]


def test_a_link_at_reduced_speed_in_nvlink_s(tmp_path: Path) -> None:
    text = (REPO / "fixtures/smi/nvlink_s_8x_h100.txt").read_text()
    path = tmp_path / "slow.txt"
    gpu2 = "GPU 2: NVIDIA H100 80GB HBM3 (UUID: GPU-0a7e2a1c-3b2e-4f0d-9a21-6c2de03a47f1)\n"
    path.write_text(text.replace(gpu2 + "\t Link 0: 26.562", gpu2 + "\t Link 0: 13.281"))
    finding = only_finding("TOPO008", path)
    assert "GPU 2 has link 0 at 13.281 GB/s where the others run 26.562" in finding.message


def test_healthy_nvlinks_and_a_host_without_nvlink_say_nothing(tmp_path: Path) -> None:
    assert not findings_of("TOPO008", "fixtures/smi/nvlink_s_8x_h100.txt")
    text = (REPO / "fixtures/smi/nvlink_s_8x_h100.txt").read_text().replace("26.562 GB/s", "<inactive>")
    path = tmp_path / "pcie_only.txt"  # a PCIe host: every link of every GPU inactive alike
    path.write_text(text)
    assert not findings_of("TOPO008", path)


def test_the_same_gpu_slow_in_nccls_dump_and_in_nvidia_smi_is_one_finding_naming_both(tmp_path: Path) -> None:
    # the x8 GPU of the smi fixture moved to the bus id of the dump's x8 GPU: one host seen two ways
    smi = re.sub("5d:00.0", "5E:00.0", (REPO / "fixtures/smi/nvidia_smi_q_gpu3_x8.txt").read_text(), flags=re.I)
    (tmp_path / "smi.txt").write_text(smi)
    f = only_finding("TOPO007", "fixtures/xml/h100_gpu3_x8_topo.xml", tmp_path / "smi.txt")
    assert "where its 7 GPU peers run 32 GT/s x16 (NCCL's topology dump)" in f.message
    assert "; GPU 3 (0000:5e:00.0) at 32 GT/s x8, capable of 32 GT/s x16 (nvidia-smi -q)" in f.message
    assert {e.source.rsplit("/", 1)[-1] for e in f.evidence} == {"h100_gpu3_x8_topo.xml", "smi.txt"}
    # different GPUs in the two views stay two findings
    assert (
        len(findings_of("TOPO007", "fixtures/xml/h100_gpu3_x8_topo.xml", "fixtures/smi/nvidia_smi_q_gpu3_x8.txt")) == 2
    )
