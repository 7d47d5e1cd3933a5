"""The hosts' own reports of their devices (`ibv_devinfo`, `nvidia-smi -q`, `nvidia-smi nvlink -s`,
`nvidia-smi topo -p2p`): read from files and pastes through the real reading pipeline."""

from __future__ import annotations

import re
from pathlib import Path

from ncclscope.case.read import read_case

from conftest import REPO, findings_of, only_finding

DEVINFO = "fixtures/ib/ibv_devinfo_v_port_polling.txt"


def case_of(*paths: str | Path):  # type: ignore[no-untyped-def]
    return read_case([str(p) for p in paths]).case


# ------------------------------------------------------------------------------------------ ibv_devinfo
def test_ibv_devinfo_v_gives_each_port_in_ibstats_words() -> None:
    case = case_of(DEVINFO)
    assert [d.name for d in case.ib_devices] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    first, last = case.ib_devices[0], case.ib_devices[3]
    assert (first.tool, first.firmware, first.node_guid, first.ca_type) == (
        "ibv_devinfo", "28.39.1002", "0xa088c20300c41e50", "MT_0000000838"
    )  # fmt: skip
    port = first.ports[0]
    assert (port.state, port.physical_state, port.rate, port.link_layer) == ("Active", "LinkUp", 400.0, "InfiniBand")
    assert port.evidence is not None and "PORT_ACTIVE (4)" in port.evidence.text
    assert port.rate_evidence is not None and "100.0 Gbps (128)" in port.rate_evidence.text
    down = last.ports[0]
    assert (down.state, down.physical_state, down.rate) == ("Down", "Polling", 10.0)
    source = case.sources[0]
    assert source.kinds == ["ibv_devinfo"] and source.usable
    assert source.framework_lines == 0  # the -v capability lines are ibv_devinfo's, not left over


def test_ibv_devinfo_of_an_old_rdma_core_and_without_indentation(tmp_path: Path) -> None:
    # rdma-core before NDR prints "invalid speed (128)"; a paste may lose every tab
    lines = [
        "$ ibv_devinfo -v -d mlx5_4",
        "hca_id: mlx5_4",
        "fw_ver: 28.35.2000",
        "node_guid: 0c42:a103:0065:7f20",
        "port: 1",
        "state: PORT_INIT (2)",
        "active_width: 4X (2)",
        "active_speed: invalid speed (128)",
        "phys_state: LINK_UP (5)",
        "link_layer: InfiniBand",
        "vendor_id: 0x02c9",
        "state: PORT_DOWN (1)",
    ]
    path = tmp_path / "devinfo.txt"
    path.write_text("\n".join(lines) + "\n")
    case = case_of(path)
    (device,) = case.ib_devices
    (port,) = device.ports
    assert (device.firmware, port.state, port.physical_state) == ("28.35.2000", "Initializing", "LinkUp")
    assert port.rate == 400.0  # 4 lanes of NDR, from the speed code
    # an unindented field the reader does not keep ends the block: the `state:` line after it is not read
    assert case.sources[0].kinds == ["ibv_devinfo"]


def test_ibv_devinfo_port_down_is_net008() -> None:
    (finding,) = findings_of("NET008", DEVINFO)
    assert "mlx5_3 port 1: state Down, physical state Polling" in finding.message
    assert "from ibv_devinfo" in finding.message
    assert not findings_of("NET008", REPO / "fixtures/ib/ibstat_8x_ndr.txt")


# ------------------------------------------------------------------------------------------ nvidia-smi -q
SMI_HEALTHY = "fixtures/smi/nvidia_smi_q_8x_h100.txt"
SMI_X8 = "fixtures/smi/nvidia_smi_q_gpu3_x8.txt"


def test_nvidia_smi_q_gives_each_gpu_with_its_link_versions_and_health() -> None:
    case = case_of(SMI_X8)
    assert [g.bus_id for g in case.smi_gpus][:3] == ["0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0"]
    gpu = case.smi_gpus[3]
    assert (gpu.index, gpu.bus_id, gpu.product) == (3, "0000:5d:00.0", "NVIDIA H100 80GB HBM3")
    assert (gpu.driver, gpu.cuda, gpu.vbios) == ("550.90.07", "12.4", "96.00.89.00.01")
    assert (gpu.pcie_gen, gpu.pcie_gen_max, gpu.width, gpu.width_max) == (5, 5, 8, 16)
    # `Max` of the Bank Remap Availability Histogram is not a link width; `Current` of MIG Mode not a gen
    assert (gpu.mig_mode, gpu.ecc_mode, gpu.performance_state, gpu.fabric_state) == (
        "Disabled", "Enabled", "P0", "Completed"
    )  # fmt: skip
    assert (gpu.uncorrectable_errors, gpu.remap_pending, gpu.remap_failed) == (0, False, False)
    assert gpu.serial == "1654922006254" and gpu.uuid is not None and gpu.uuid.startswith("GPU-")
    assert [e.text.split(":")[0].strip() for e in gpu.link_evidence] == ["Max", "Current", "Max", "Current"]
    source = case.sources[0]
    assert source.kinds == ["nvidia_smi_query"] and source.framework_lines == 0


def test_nvidia_smi_q_pasted_without_indentation_and_followed_by_other_text(tmp_path: Path) -> None:
    text = (REPO / SMI_X8).read_text()
    flat = "\n".join(line.strip() for line in text.splitlines()[:280])  # GPUs 0 and 1, no indentation
    path = tmp_path / "flat.txt"
    path.write_text(flat + "\nTraceback (most recent call last)\nMax : 3\n")
    gpus = case_of(path).smi_gpus
    assert [(g.width, g.width_max, g.pcie_gen, g.mig_mode) for g in gpus] == [(16, 16, 5, "Disabled")] * 2
    # the Traceback line is not nvidia-smi's: the report ends there, and the `Max : 3` after it is not read
    assert gpus[1].pcie_gen_max == 5


def test_an_idle_host_lowers_its_generation_and_is_not_degraded(tmp_path: Path) -> None:
    text = (REPO / SMI_HEALTHY).read_text()
    idle = text.replace("Performance State                     : P0", "Performance State                     : P8")
    idle = re.sub(r"(?m)^( {16}Current +): 5$", r"\1: 1", idle)  # PCIe Generation's Current only
    path = tmp_path / "idle.txt"
    path.write_text(idle)
    gpus = case_of(path).smi_gpus
    assert {(g.pcie_gen, g.performance_state) for g in gpus} == {(1, "P8")}
    assert not findings_of("TOPO007", path)
    # the same GPU at Gen 1 while it works (P0) is degraded
    one_busy = idle.replace(
        "Performance State                     : P8", "Performance State                     : P0", 1
    )
    path.write_text(one_busy)
    (finding,) = findings_of("TOPO007", path)
    assert "GPU 0 (0000:18:00.0) at 2.5 GT/s x16, capable of 32 GT/s x16 (nvidia-smi -q)" in finding.message


# ------------------------------------------------------------------------------------------ nvidia-smi nvlink
def test_nvlink_s_gives_each_gpus_links_and_a_gpu_list_is_not_a_link_report(tmp_path: Path) -> None:
    gpus = case_of("fixtures/smi/nvlink_s_gpu6_two_down.txt").nvlink_gpus
    assert [(g.index, len(g.links), len(g.active)) for g in gpus][5:7] == [(5, 18, 18), (6, 18, 16)]
    assert gpus[6].links[14].speed is None and gpus[6].links[13].speed == 26.562
    assert gpus[0].uuid == "GPU-0a7e0a1c-3b2e-4f0d-9a01-6c2de01847f1" and gpus[0].product == "NVIDIA H100 80GB HBM3"
    # `nvidia-smi -L` prints the same GPU lines with no links: they say nothing about NVLink
    listing = tmp_path / "list.txt"
    listing.write_text("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1f2e)\nGPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-2a3b)\n")
    case = case_of(listing)
    assert case.nvlink_gpus == [] and "nvidia_smi_nvlink" not in case.sources[0].kinds


def test_nvlink_lines_whose_gpu_line_was_lost_are_counted_not_given_to_the_gpu_before(tmp_path: Path) -> None:
    """A paste that lost `GPU 1: ...` holds GPU 1's links right after GPU 0's: read as GPU 0's, GPU 0 had 36
    links and TOPO008 found no majority to hold GPU 6 against."""
    lines = (REPO / "fixtures/smi/nvlink_s_gpu6_two_down.txt").read_text().splitlines()
    assert lines[20].startswith("GPU 1:")
    damaged = tmp_path / "nvlink.txt"
    damaged.write_text("\n".join(lines[:20] + lines[21:]) + "\n")
    case = case_of(damaged)
    assert [(g.index, len(g.links)) for g in case.nvlink_gpus][:2] == [(0, 18), (2, 18)]
    assert case.sources[0].problems == [
        "line 21: 18 NVLink lines of no GPU (its `GPU n: ...` line is missing or damaged); not read"
    ]
    (finding,) = findings_of("TOPO008", damaged)
    assert "GPU 6 has 16 active NVLinks" in finding.message and "its 6 peers have 18" in finding.message


def test_a_gpu_whose_nvlink_listing_lost_lines_is_not_taken_for_one_with_links_down(tmp_path: Path) -> None:
    """nvidia-smi lists every link, active or `<inactive>`: GPU 0 listing 17 (a line lost) is no GPU with
    a link down, and is left out of the peers GPU 6 is held against."""
    lines = (REPO / "fixtures/smi/nvlink_s_gpu6_two_down.txt").read_text().splitlines()
    assert lines[2].strip() == "Link 0: 26.562 GB/s" and lines[96].startswith("GPU 5:")
    del lines[95]  # GPU 4's last link line
    del lines[2]  # GPU 0's link 0
    damaged = tmp_path / "nvlink.txt"
    damaged.write_text("\n".join(lines) + "\n")
    case = case_of(damaged)
    assert [(g.index, len(g.links), len(g.active)) for g in case.nvlink_gpus] == [
        (0, 17, 17), (1, 18, 18), (2, 18, 18), (3, 18, 18), (4, 17, 17), (5, 18, 18), (6, 18, 16), (7, 18, 18)
    ]  # fmt: skip
    assert case.sources[0].problems == []
    (finding,) = findings_of("TOPO008", damaged)
    assert "GPU 6 has 16 active NVLinks (links 14-15 inactive), where its 5 peers have 18" in finding.message
    assert "(GPU 0, 4: fewer links listed, lines lost; not compared)" in finding.message
    # GPU 6 itself losing a line: its `<inactive>` links are still down
    del lines[lines.index(next(line for line in lines if line.startswith("GPU 6:"))) + 1]
    damaged.write_text("\n".join(lines) + "\n")
    (finding,) = findings_of("TOPO008", damaged)
    assert "GPU 6 has 15 active NVLinks (links 14-15 inactive), where its 5 peers have 18" in finding.message
    assert "(one of its link lines lost in the paste)" in finding.message
    # or cut short (`Link 0: 26.562 GB/s` to `L`): the rest of the listing is still GPU 6's, and the line named
    gpu6 = lines.index(next(line for line in lines if line.startswith("GPU 6:")))
    damaged.write_text("\n".join([*lines[: gpu6 + 1], "\t L", *lines[gpu6 + 1 :]]) + "\n")
    case = case_of(damaged)
    assert [(g.index, len(g.links), len(g.active)) for g in case.nvlink_gpus][6] == (6, 17, 15)
    assert case.sources[0].problems == [f"line {gpu6 + 2}: an NVLink line of GPU 6 is cut or damaged; not read"]
    (finding,) = findings_of("TOPO008", damaged)
    assert "GPU 6 has 15 active NVLinks (links 14-15 inactive), where its 5 peers have 18" in finding.message
    # or emptied to its indentation: the rest of GPU 6's listing is still GPU 6's
    lines.insert(lines.index(next(line for line in lines if line.startswith("GPU 6:"))) + 1, "\t")
    damaged.write_text("\n".join(lines) + "\n")
    (finding,) = findings_of("TOPO008", damaged)
    assert "GPU 6 has 15 active NVLinks (links 14-15 inactive), where its 5 peers have 18" in finding.message


def test_a_gpu_line_glued_after_a_prompt_or_a_link_line_is_still_read(tmp_path: Path) -> None:
    """A paste that lost line breaks: `$ nvidia-smi nvlink -sGPU 0: ...` and `Link 17: 26.562 GB/sGPU 5: ...`
    still give GPU 0's and GPU 5's links, and GPU 4 its last link; a cut link line before a GPU line is
    counted."""
    lines = (REPO / "fixtures/smi/nvlink_s_gpu6_two_down.txt").read_text().splitlines()
    assert lines[1].startswith("GPU 0:") and lines[96].startswith("GPU 5:")
    lines[95] = lines[95].rstrip() + lines.pop(96)
    lines[1] = "$ nvidia-smi nvlink -s" + lines[1]
    damaged = tmp_path / "nvlink.txt"
    damaged.write_text("\n".join(lines) + "\n")
    case = case_of(damaged)
    assert [(g.index, len(g.links)) for g in case.nvlink_gpus] == [(i, 18) for i in range(8)]
    assert case.sources[0].problems == []
    assert case.nvlink_gpus[0].evidence.text.startswith("$ nvidia-smi nvlink -sGPU 0: NVIDIA H100")
    (finding,) = findings_of("TOPO008", damaged)
    assert "GPU 6 has 16 active NVLinks (links 14-15 inactive), where its 7 peers have 18" in finding.message
    # the link line cut before the GPU line was glued on: counted, and GPU 4 is not compared
    lines[95] = lines[95].replace(" GB/sGPU 5:", "GPU 5:")
    damaged.write_text("\n".join(lines) + "\n")
    case = case_of(damaged)
    assert [(g.index, len(g.links)) for g in case.nvlink_gpus][4:6] == [(4, 17), (5, 18)]
    assert case.sources[0].problems == ["line 96: an NVLink line of GPU 4 is cut or damaged; not read"]
    (finding,) = findings_of("TOPO008", damaged)
    assert "(GPU 4: fewer links listed, lines lost; not compared)" in finding.message


def test_a_gpus_nvlink_listing_goes_on_past_tabs_and_another_programs_line(tmp_path: Path) -> None:
    """Spaces turned to tabs (`Link\t0:\t26.562\tGB/s`) and a line of another program inside GPU 6's listing
    (two outputs interleaved) leave GPU 6 all its links: the rest of its listing was lost uncounted."""
    lines = (REPO / "fixtures/smi/nvlink_s_gpu6_two_down.txt").read_text().splitlines()
    gpu6 = lines.index(next(line for line in lines if line.startswith("GPU 6:")))
    lines[gpu6] = lines[gpu6].replace(" ", "\t")
    lines[gpu6 + 1] = lines[gpu6 + 1].replace(" ", "\t")
    lines.insert(gpu6 + 5, "[rank0]: step 10 loss 2.31")
    damaged = tmp_path / "nvlink.txt"
    damaged.write_text("\n".join(lines) + "\n")
    case = case_of(damaged)
    assert [(g.index, len(g.links), len(g.active)) for g in case.nvlink_gpus][6] == (6, 18, 16)
    assert case.sources[0].problems == []
    (finding,) = findings_of("TOPO008", damaged)
    assert "GPU 6 has 16 active NVLinks (links 14-15 inactive), where its 7 peers have 18" in finding.message


# `NVML: Unable to retrieve NVLink information as all links are inactive`: a GPU whose NVLinks are all down
def test_a_gpu_with_all_links_inactive_is_named_against_its_peers() -> None:
    found = only_finding("TOPO008", "fixtures/smi/nvlink_s_8x_a100_gpu3_all_inactive.txt")
    said = "GPU 3 (NVIDIA A100-SXM4-80GB) reports all NVLinks inactive, where its 7 peers have 12 active"
    assert said in found.message
    assert [e.line for e in found.evidence] == [41, 42]


def test_a_lone_sxm_gpu_with_all_links_inactive_is_judged_by_its_module(tmp_path: Path) -> None:
    lone = tmp_path / "nvlink.txt"
    lone.write_text(
        "GPU 6: NVIDIA A100-SXM4-80GB (UUID: GPU-1b2c3d4e-0000-1111-2222-333344445555)\n"
        "NVML: Unable to retrieve NVLink information as all links are inactive\n"
    )
    found = only_finding("TOPO008", lone)
    assert "where each A100-SXM module has 12 NVLinks to its NVSwitches or peers" in found.message


def test_pcie_cards_without_a_bridge_say_nothing() -> None:
    assert findings_of("TOPO008", "fixtures/smi/nvlink_s_2x_a100_pcie_no_bridge.txt") == []


def test_links_down_on_most_gpus_of_a_module_with_every_link_wired_are_one_finding() -> None:
    found = only_finding("TOPO008", "fixtures/smi/nvlink_s_8x_v100_four_gpus_links_down.txt")
    assert found.message.endswith(
        "4 GPUs have fewer active NVLinks than the 6 of their 4 peers: GPU 2 has 5 (link 1 inactive); GPU 3 has 4"
        " (links 0,4 inactive); GPU 5 has 5 (link 2 inactive); GPU 6 has 4 (links 3,5 inactive) (nvidia-smi nvlink -s)"
    )
