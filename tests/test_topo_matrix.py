"""`nvidia-smi topo -m` matrices: what TopologyReader finds in a stream of lines (formats.md D)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ncclscope.model import TopologyMatrix
from ncclscope.parse.topo_matrix import TopologyReader

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
TOPO = FIXTURES / "topo"
MIXED = FIXTURES / "mixed"


def read_lines(lines: list[str], source: str = "test") -> tuple[list[TopologyMatrix], list[bool]]:
    reader = TopologyReader(source)
    flags = [reader.feed(n, line) for n, line in enumerate(lines, 1)]
    return reader.finish(), flags


def read_text(text: str, source: str = "test") -> list[TopologyMatrix]:
    return read_lines(text.split("\n"), source)[0]


def read_fixture(path: Path) -> list[TopologyMatrix]:
    """As the driver does: CR and ANSI escapes removed (the fixtures hold no launcher prefix)."""
    import re

    if not path.is_file():
        pytest.skip(f"fixture {path.name} not written yet")
    text = path.read_text(encoding="utf-8", errors="replace")
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line.rstrip("\r")) for line in text.split("\n")]
    return read_lines(lines, str(path))[0]


def only_matrix(matrices: list[TopologyMatrix]) -> TopologyMatrix:
    assert len(matrices) == 1, [m.devices for m in matrices]
    return matrices[0]


def tab(*fields: str) -> str:
    return "\t".join(fields)


# A current-driver capture, as printed (tabs, empty corner, empty field before GPU NUMA ID, NIC
# rows with four empty trailing fields), written from formats.md D.1 and D.3.
H100_TABS = [
    "$ nvidia-smi topo -m",
    tab("", "GPU0", "GPU1", "NIC0", "NIC1", "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"),
    tab("GPU0", " X ", "NV18", "PIX", "NODE", "0-55,112-167", "0", "", "N/A"),
    tab("GPU1", "NV18", " X ", "NODE", "PIX", "0-55,112-167", "0", "", "N/A"),
    tab("NIC0", "PIX", "NODE", " X ", "NODE", "", "", "", ""),
    tab("NIC1", "NODE", "PIX", "NODE", " X"),
    "",
    "Legend:",
    "",
    "  X    = Self",
    "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)",
    "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node",
    "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)",
    "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)",
    "  PIX  = Connection traversing at most a single PCIe bridge",
    "  NV#  = Connection traversing a bonded set of # NVLinks",
    "",
    "NIC Legend:",
    "",
    "  NIC0: mlx5_0",
    "  NIC1: mlx5_bond_0",
    "",
    "",
]

# An old-driver capture pasted with spaces: RDMA names as columns, only CPU Affinity, SOC legend.
OLD_SOC_SPACES = """\
        GPU0    GPU1    mlx5_0  CPU Affinity
GPU0     X      SOC     PHB     0-0,8-8,16-16
GPU1    SOC      X      SOC     1-1,9-9
mlx5_0  PHB     SOC      X

Legend:

  X   = Self
  SOC  = Connection traversing PCIe as well as the SMP link between CPU sockets(e.g. QPI)
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe switches (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing a single PCIe switch
  NV#  = Connection traversing a bonded set of # NVLinks
"""


# ---------------------------------------------------------------------------------------------
# Inline examples: the shapes of formats.md D and real-world-variants.md


def test_tab_separated_matrix_gives_devices_links_affinities_and_legends():
    m = only_matrix(read_lines(H100_TABS)[0])
    assert m.line == 2
    assert m.devices == ["GPU0", "GPU1", "NIC0", "NIC1"]
    assert m.gpus == ["GPU0", "GPU1"]
    assert m.nics == ["NIC0", "NIC1"]
    assert m.links["GPU0"] == {"GPU0": "X", "GPU1": "NV18", "NIC0": "PIX", "NIC1": "NODE"}
    assert m.links["NIC1"]["NIC1"] == "X"
    assert m.cpu_affinity == {"GPU0": "0-55,112-167", "GPU1": "0-55,112-167"}
    assert m.numa_affinity == {"GPU0": "0", "GPU1": "0"}
    assert m.gpu_numa_id == {"GPU0": "N/A", "GPU1": "N/A"}
    assert m.nic_names == {"NIC0": "mlx5_0", "NIC1": "mlx5_bond_0"}
    assert m.legend == "SYS"
    assert m.problems == []


def test_every_line_of_the_block_is_claimed_but_not_the_prompt():
    _, flags = read_lines(H100_TABS)
    assert flags[0] is False
    assert all(flags[1:])


def test_space_pasted_old_matrix_has_rdma_columns_and_soc_legend():
    m = only_matrix(read_text(OLD_SOC_SPACES))
    assert m.devices == ["GPU0", "GPU1", "mlx5_0"]
    assert m.nics == ["mlx5_0"]
    assert m.links["GPU1"] == {"GPU0": "SOC", "GPU1": "X", "mlx5_0": "SOC"}
    assert m.links["mlx5_0"]["GPU0"] == "PHB"
    assert m.cpu_affinity == {"GPU0": "0-0,8-8,16-16", "GPU1": "1-1,9-9"}
    assert m.numa_affinity == {} and m.gpu_numa_id == {}
    assert m.legend == "SOC"
    assert m.problems == []


def test_empty_affinity_cells_are_omitted_and_gpu_numa_id_found_after_the_empty_fields():
    lines = [
        tab("", "GPU0", "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"),
        tab("GPU0", " X ", "", "", "", "N/A"),
    ]
    m = only_matrix(read_lines(lines)[0])
    assert m.links == {"GPU0": {"GPU0": "X"}}
    assert m.cpu_affinity == {} and m.numa_affinity == {}
    assert m.gpu_numa_id == {"GPU0": "N/A"}
    assert m.problems == []


def test_unknown_cpu_affinity_keeps_numa_affinity_in_its_column():
    lines = [
        tab("", "GPU0", "GPU1", "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"),
        tab("GPU0", " X ", "NODE", "", "0", "", "N/A"),
        tab("GPU1", "NODE", " X ", "", "0", "", "N/A"),
    ]
    m = only_matrix(read_lines(lines)[0])
    assert m.cpu_affinity == {}
    assert m.numa_affinity == {"GPU0": "0", "GPU1": "0"}
    assert m.gpu_numa_id == {"GPU0": "N/A", "GPU1": "N/A"}


def test_header_with_lost_tabs_is_split_into_column_names():
    text = """\
GPU0GPU1GPU2GPU3NIC0CPU AffinityNUMA AffinityGPU NUMA ID
GPU0 X NV4 NV4 NV4 PIX 0-23 0 N/A
GPU1 NV4 X NV4 NV4 PIX 0-23 0 N/A
GPU2 NV4 NV4 X NV4 SYS 24-47 1 N/A
GPU3 NV4 NV4 NV4 X SYS 24-47 1 N/A
NIC0 PIX PIX SYS SYS X
"""
    m = only_matrix(read_text(text))
    assert m.devices == ["GPU0", "GPU1", "GPU2", "GPU3", "NIC0"]
    assert m.links["GPU2"]["NIC0"] == "SYS"
    assert m.cpu_affinity["GPU3"] == "24-47"
    assert m.numa_affinity["GPU3"] == "1"
    assert m.problems == []


def test_cells_that_run_together_are_split():
    text = "GPU0GPU1NIC0CPU Affinity\nGPU0 XNV4PIX 0-7\nGPU1 NV4XPIX 0-7\nNIC0 PIXPIXX\n"
    m = only_matrix(read_text(text))
    assert m.links["GPU1"] == {"GPU0": "NV4", "GPU1": "X", "NIC0": "PIX"}
    assert m.links["NIC0"] == {"GPU0": "PIX", "GPU1": "PIX", "NIC0": "X"}
    assert m.cpu_affinity == {"GPU0": "0-7", "GPU1": "0-7"}


def test_unindented_legend_and_misaligned_columns_are_read():
    text = """\
GPU0  GPU1 NIC0 NIC1   CPU Affinity   NUMA Affinity  GPU NUMA ID
GPU0 X  NV8   PXB PXB  0-31  0   N/A
GPU1 NV8 X   PXB   PXB 0-31 0 N/A
NIC0 PXB   PXB X PIX
NIC1 PXB PXB   PIX    X
Legend:
X    = Self
SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
NIC Legend:
NIC0: mlx5_0
NIC1: mlx5_1
"""
    m = only_matrix(read_text(text))
    assert m.links["NIC0"]["NIC1"] == "PIX"
    assert m.legend == "SYS"
    assert m.nic_names == {"NIC0": "mlx5_0", "NIC1": "mlx5_1"}
    assert m.problems == []


def test_matrix_pasted_as_shell_comments_is_read():
    lines = ["#        " + line if line else "#" for line in H100_TABS[1:-2]]
    m = only_matrix(read_lines(lines)[0])
    assert m.devices == ["GPU0", "GPU1", "NIC0", "NIC1"]
    assert m.links["GPU1"]["NIC1"] == "PIX"
    assert m.gpu_numa_id["GPU1"] == "N/A"
    assert m.nic_names["NIC1"] == "mlx5_bond_0"
    assert m.legend == "SYS"


def test_matrix_with_twelve_nics():
    nics = [f"NIC{i}" for i in range(12)]
    devices = ["GPU0", "GPU1", *nics]
    lines = [tab("", *devices, "CPU Affinity", "NUMA Affinity", "GPU NUMA ID")]
    for row in devices:
        cells = [" X " if col == row else ("NV18" if row[:3] == col[:3] == "GPU" else "SYS") for col in devices]
        if row == "GPU1":
            cells[devices.index("NIC11")] = "PIX"
        tail = ["0-95", "0", "", "N/A"] if row.startswith("GPU") else ["", "", "", ""]
        lines.append(tab(row, *cells, *tail))
    lines += ["", "NIC Legend:", ""] + [f"  NIC{i}: mlx5_{i}" for i in range(12)]
    m = only_matrix(read_lines(lines)[0])
    assert m.nics == nics
    assert m.links["GPU1"]["NIC11"] == "PIX"
    assert m.links["NIC11"]["NIC10"] == "SYS"
    assert m.links["NIC10"]["NIC10"] == "X"
    assert m.nic_names["NIC11"] == "mlx5_11"
    assert m.cpu_affinity["GPU1"] == "0-95"
    assert m.problems == []


def test_several_matrices_in_one_source_are_returned_in_order():
    text = "\n".join(H100_TABS) + "\nand on the other node:\n" + OLD_SOC_SPACES
    matrices = read_text(text)
    assert [m.devices[-1] for m in matrices] == ["NIC1", "mlx5_0"]
    assert [m.legend for m in matrices] == ["SYS", "SOC"]
    assert matrices[1].line == len(H100_TABS) + 2


def test_a_second_header_right_after_the_rows_starts_a_new_matrix():
    lines = [
        tab("", "GPU0", "GPU1", "CPU Affinity"),
        tab("GPU0", " X ", "NV2", "0-7"),
        tab("GPU1", "NV2", " X ", "0-7"),
        tab("", "GPU0", "GPU1", "CPU Affinity"),
        tab("GPU0", " X ", "PHB", "0-7"),
        tab("GPU1", "PHB", " X ", "0-7"),
    ]
    matrices = read_lines(lines)[0]
    assert [m.links["GPU0"]["GPU1"] for m in matrices] == ["NV2", "PHB"]
    assert [m.line for m in matrices] == [1, 4]


def test_short_row_is_recorded_with_a_problem():
    lines = [
        tab("", "GPU0", "GPU1", "GPU2", "CPU Affinity"),
        tab("GPU0", " X ", "NV2", "NV2", "0-7"),
        tab("GPU1", "NV2", " X "),
        tab("GPU2", "NV2", "NV2", " X ", "0-7"),
    ]
    m = only_matrix(read_lines(lines)[0])
    assert m.links["GPU1"] == {"GPU0": "NV2", "GPU1": "X"}
    assert m.links["GPU2"]["GPU1"] == "NV2"
    assert any("GPU1" in p and "2 device cells" in p for p in m.problems)


def test_unknown_cell_is_reported_and_the_rest_of_the_row_kept():
    lines = [
        tab("", "GPU0", "GPU1", "GPU2", "CPU Affinity"),
        tab("GPU0", " X ", "C2C", "NV2", "0-7"),
        tab("GPU1", "C2C", " X ", "NV2", "0-7"),
        tab("GPU2", "NV2", "NV2", " X ", "0-7"),
    ]
    m = only_matrix(read_lines(lines)[0])
    assert m.links["GPU0"] == {"GPU0": "X", "GPU2": "NV2"}
    assert m.cpu_affinity["GPU0"] == "0-7"
    assert any("'C2C'" in p for p in m.problems)


def test_missing_rows_are_reported():
    lines = [tab("", "GPU0", "GPU1", "NIC0", "CPU Affinity"), tab("GPU0", " X ", "NV2", "PIX", "0-7")]
    m = only_matrix(read_lines(lines)[0])
    assert "no row for GPU1, NIC0" in m.problems


def test_header_without_rows_is_not_a_matrix():
    assert read_text("\tGPU0\tGPU1\tCPU Affinity\nnothing followed\n") == []


def test_p2p_status_matrix_is_not_a_topology_matrix():
    text = " \tGPU0\tGPU1\t\n GPU0\tX\tGNS\t\n GPU1\tGNS\tX\t\n\nLegend:\n\n  X    = Self\n  OK   = Status Ok\n"
    assert read_text(text) == []


# ---------------------------------------------------------------------------------------------
# Fixtures: each file under fixtures/topo holds exactly one matrix


def test_h100_tab_capture_with_underlined_header_and_nic_legend():
    m = only_matrix(read_fixture(TOPO / "h100_8gpu_nic_legend_tabs.txt"))
    assert m.gpus == [f"GPU{i}" for i in range(8)]
    assert m.nics == [f"NIC{i}" for i in range(8)]
    assert m.links["GPU0"]["GPU7"] == "NV18"
    assert m.links["GPU3"]["NIC3"] == "PIX"
    assert m.links["GPU4"]["NIC0"] == "SYS"
    assert m.links["NIC7"]["NIC7"] == "X"
    assert m.cpu_affinity["GPU0"] == "0-55,112-167"
    assert m.numa_affinity["GPU7"] == "1"
    assert m.gpu_numa_id == {f"GPU{i}": "N/A" for i in range(8)}
    assert "NIC0" not in m.cpu_affinity  # the four empty trailing fields of NIC rows
    assert m.nic_names["NIC7"] == "mlx5_7"
    assert m.legend == "SYS"
    assert m.problems == []


def test_h100_space_paste_reads_affinities_from_what_is_left_after_the_device_cells():
    m = only_matrix(read_fixture(TOPO / "h100_4gpu_spaces.txt"))
    assert m.devices == ["GPU0", "GPU1", "GPU2", "GPU3", "NIC0"]
    assert m.links["GPU2"] == {"GPU0": "NV18", "GPU1": "NV18", "GPU2": "X", "GPU3": "NV18", "NIC0": "PHB"}
    assert m.links["NIC0"]["NIC0"] == "X"
    assert m.cpu_affinity["GPU3"] == "0-63"
    assert m.numa_affinity["GPU3"] == "0"
    assert m.gpu_numa_id["GPU3"] == "N/A"
    assert m.nic_names == {"NIC0": "mlx5_0"}
    assert m.problems == []


def test_a100_matrix_with_rdma_device_columns_and_no_gpu_numa_id():
    m = only_matrix(read_fixture(TOPO / "a100_8gpu_mlx_columns.txt"))
    assert m.nics == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    assert m.links["GPU0"]["GPU1"] == "NV12"
    assert m.links["GPU0"]["mlx5_0"] == "PXB"
    assert m.links["mlx5_3"]["GPU7"] == "PXB"
    assert m.links["mlx5_3"]["mlx5_3"] == "X"
    assert m.cpu_affinity["GPU4"] == "112-127,240-255"
    assert m.numa_affinity["GPU4"] == "7"
    assert m.gpu_numa_id == {}
    assert m.nic_names == {}
    assert m.legend == "SYS"
    assert m.problems == []


def test_v100_old_driver_matrix_has_soc_cells_and_soc_legend():
    m = only_matrix(read_fixture(TOPO / "v100_soc_legend.txt"))
    assert m.nics == ["mlx5_0"]
    assert m.links["GPU0"]["GPU1"] == "NV1"
    assert m.links["GPU0"]["GPU3"] == "NV2"
    assert m.links["GPU0"]["GPU5"] == "SOC"
    assert m.links["mlx5_0"]["GPU2"] == "PHB"
    assert m.cpu_affinity["GPU7"] == "20-39,60-79"
    assert m.numa_affinity == {} and m.gpu_numa_id == {}
    assert m.legend == "SOC"
    assert m.problems == []


def test_pcie_only_matrix_with_two_switches():
    m = only_matrix(read_fixture(TOPO / "pcie_8gpu_two_switches_sys.txt"))
    assert m.links["GPU0"]["GPU3"] == "PIX"
    assert m.links["GPU0"]["GPU4"] == "SYS"
    assert m.links["GPU7"]["NIC1"] == "PIX"
    assert m.links["NIC0"]["NIC1"] == "SYS"
    assert not any(v.startswith("NV") for row in m.links.values() for v in row.values())
    assert m.cpu_affinity["GPU5"] == "32-63,96-127"
    assert m.nic_names == {"NIC0": "mlx5_0", "NIC1": "mlx5_1"}
    assert m.problems == []


def test_gpu_only_matrix_has_no_nics():
    m = only_matrix(read_fixture(TOPO / "gpu_only_2gpu.txt"))
    assert m.devices == ["GPU0", "GPU1"] and m.nics == []
    assert m.links == {"GPU0": {"GPU0": "X", "GPU1": "PHB"}, "GPU1": {"GPU0": "PHB", "GPU1": "X"}}
    assert m.cpu_affinity == {"GPU0": "0-31", "GPU1": "0-31"}
    assert m.gpu_numa_id == {"GPU0": "N/A", "GPU1": "N/A"}
    assert m.nic_names == {}
    assert m.problems == []


def test_lost_tabs_header_runs_together_but_is_split():
    m = only_matrix(read_fixture(TOPO / "lost_tabs_runtogether.txt"))
    assert m.devices == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert m.links["GPU1"]["GPU3"] == "NV4"
    assert m.cpu_affinity["GPU2"] == "24-47,72-95"
    assert m.numa_affinity["GPU2"] == "1"
    assert m.gpu_numa_id["GPU2"] == "N/A"
    assert m.problems == []


def test_unindented_legend_and_misaligned_twelve_nic_columns():
    m = only_matrix(read_fixture(TOPO / "unindented_legend_misaligned.txt"))
    assert m.nics == [f"NIC{i}" for i in range(12)]
    assert m.links["GPU0"]["NIC8"] == "NODE"
    assert m.links["GPU4"]["NIC11"] == "NODE"
    assert m.links["NIC7"]["NIC8"] == "SYS"
    assert m.links["NIC11"]["NIC11"] == "X"
    assert m.cpu_affinity["GPU4"] == "48-95,144-191"
    assert m.nic_names["NIC8"] == "mlx5_bond_0"
    assert m.nic_names["NIC11"] == "mlx5_10"
    assert m.legend == "SYS"
    assert m.problems == []


def test_prompt_line_and_odd_affinities():
    matrices = read_fixture(TOPO / "odd_affinity_prompt.txt")
    m = only_matrix(matrices)
    assert m.line == 2
    assert m.links["GPU0"]["GPU1"] == "NV3"
    assert m.cpu_affinity == {"GPU0": "0-0,8-8,16-16", "GPU1": "0-0,8-8,16-16", "GPU2": "0-3,48-51"}
    assert m.numa_affinity == {"GPU0": "0", "GPU1": "0", "GPU2": "8"}
    assert m.gpu_numa_id["GPU3"] == "N/A"  # GPU3 has empty CPU and NUMA affinity
    assert m.nic_names == {"NIC0": "mlx5_0"}
    assert m.problems == []


def test_matrix_pasted_as_shell_comments_in_a_fixture():
    m = only_matrix(read_fixture(TOPO / "shell_comment_prefix.txt"))
    assert m.devices == ["GPU0", "GPU1", "GPU2", "GPU3", "NIC0", "NIC1"]
    assert m.links["GPU0"]["GPU1"] == "PIX"
    assert m.links["GPU3"]["NIC1"] == "PIX"
    assert m.links["NIC1"]["NIC1"] == "X"
    assert m.cpu_affinity["GPU2"] == "16-31,48-63"
    assert m.gpu_numa_id["GPU2"] == "N/A"
    assert m.nic_names == {"NIC0": "mlx5_0", "NIC1": "mlx5_1"}
    assert m.legend == "SYS"
    assert m.problems == []


def test_windows_capture_with_empty_affinity_fields():
    m = only_matrix(read_fixture(TOPO / "windows_empty_affinity.txt"))
    assert m.links["GPU1"] == {"GPU0": "PHB", "GPU1": "X"}
    assert m.cpu_affinity == {} and m.numa_affinity == {}
    assert m.gpu_numa_id == {"GPU0": "N/A", "GPU1": "N/A"}
    assert m.problems == []


def test_nic_rows_that_end_after_the_last_matrix_cell():
    m = only_matrix(read_fixture(TOPO / "nic_rows_no_affinity.txt"))
    assert m.links["NIC0"] == {
        "GPU0": "PXB",
        "GPU1": "PXB",
        "GPU2": "SYS",
        "GPU3": "SYS",
        "NIC0": "X",
        "NIC1": "SYS",
    }
    assert m.links["NIC1"]["NIC1"] == "X"
    assert set(m.cpu_affinity) == {"GPU0", "GPU1", "GPU2", "GPU3"}
    assert m.nic_names == {"NIC0": "mlx5_0", "NIC1": "mlx5_1"}
    assert m.problems == []


# fragments: some rows only; rocm-smi's matrices: another reader's (tests/test_rocm_smi_topo.py)
WHOLE_MATRICES = sorted(p for p in TOPO.glob("*.txt") if "fragment" not in p.name and not p.name.startswith("rocm_smi"))


@pytest.mark.parametrize("path", WHOLE_MATRICES, ids=lambda p: p.name)
def test_every_topo_fixture_is_one_square_symmetric_matrix(path):
    m = only_matrix(read_fixture(path))
    assert m.problems == []
    assert list(m.links) == m.devices
    for a in m.devices:
        assert list(m.links[a]) == m.devices
        assert m.links[a][a] == "X"
        for b in m.devices:
            assert m.links[a][b] == m.links[b][a]


# ---------------------------------------------------------------------------------------------
# Mixed pastes: the matrix among prose, environment dumps, NCCL logs and nccl-tests tables


def test_environment_dump_ending_in_a_matrix_yields_that_matrix():
    m = only_matrix(read_fixture(MIXED / "env_dump_then_matrix.txt"))
    assert m.line == 51
    assert m.gpus == [f"GPU{i}" for i in range(8)]
    assert m.nics == ["NIC0", "NIC1", "NIC2", "NIC3"]
    assert m.links["GPU6"]["NIC3"] == "PXB"
    assert m.cpu_affinity["GPU6"] == "80-95,208-223"
    assert m.numa_affinity["GPU6"] == "5"
    assert m.nic_names["NIC3"] == "mlx5_3"
    assert m.problems == []


def test_blog_post_with_a_fenced_matrix_and_a_benchmark_yields_the_matrix_only():
    m = only_matrix(read_fixture(MIXED / "seed_like_4xh100.txt"))
    assert m.line == 12
    assert m.devices == ["GPU0", "GPU1", "GPU2", "GPU3", "NIC0"]
    assert m.links["GPU0"]["GPU3"] == "NV18"
    assert m.links["NIC0"]["GPU1"] == "PHB"
    assert m.cpu_affinity["GPU1"] == "0-51"
    assert m.nic_names == {"NIC0": "mlx5_0"}
    assert m.problems == []


def test_block_ends_at_the_closing_fence():
    path = MIXED / "seed_like_4xh100.txt"
    if not path.is_file():
        pytest.skip("fixture not written yet")
    lines = path.read_text(encoding="utf-8").split("\n")
    _, flags = read_lines(lines)
    claimed = [n for n, flag in enumerate(flags, 1) if flag]
    assert claimed == list(range(12, 32))


@pytest.mark.parametrize(
    "path",
    sorted([*FIXTURES.glob("nccl/*"), *FIXTURES.glob("nccl_tests/*")]),
    ids=lambda p: p.name,
)
def test_nccl_logs_and_nccl_tests_outputs_hold_no_matrix(path):
    assert read_fixture(path) == []


# ---------------------------------------------------------------------------------------------
# Text that holds no matrix


def test_prose_yields_no_matrix():
    text = """\
We run on GPU0 and GPU1 with NCCL_P2P_LEVEL=NVL.
GPU0 is slower than GPU1 by about 10%, CPU affinity is 0-23.
GPU0 GPU1 GPU2 are on the same switch, NIC0 is not.
Legend: none
X = Self is what the docs call it.
"""
    assert read_text(text) == []


def test_nccl_tests_table_yields_no_matrix():
    text = """\
# nThread 1 nGpus 8 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1
#
# Using devices
#  Rank  0 Group  0 Pid  12345 on     node01 device  0 [0x18] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid  12345 on     node01 device  1 [0x2a] NVIDIA H100 80GB HBM3
#
#                                                     out-of-place                  in-place
#     size      count   type  redop root   time  algbw  busbw #wrong   time  algbw  busbw #wrong
#      (B) (elements)                      (us) (GB/s) (GB/s)          (us) (GB/s) (GB/s)
         8          2  float    sum   -1  20.12   0.00   0.00      0  19.87   0.00   0.00      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.00
"""
    assert read_text(text) == []


def test_nccl_log_paste_without_nccl_prefix_yields_no_matrix():
    text = """\
Bootstrap: Using eth0:10.0.0.1<0>
NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.0.0.1<0>
Channel 00/02 : 0 1 2 3 4 5 6 7
Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM
GPU0 NV18 GPU1 via NVLink
Connected all rings, use ring PXN 0 GDR 1
=== System : maxBw 240.0 totalBw 240.0 ===
CPU/0-0 (1/1/1)
+ PCI[24.0] - GPU/0-18000 (0)
"""
    assert read_text(text) == []


# ---------------------------------------------------------------------------------------------
# Garbage never raises

MATRIX_WORDS = st.sampled_from(
    [
        "GPU0",
        "GPU1",
        "GPU12",
        "NIC0",
        "NIC11",
        "mlx5_0",
        "X",
        " X ",
        "NV18",
        "PIX",
        "SYS",
        "SOC",
        "NODE",
        "CPU Affinity",
        "NUMA Affinity",
        "GPU NUMA ID",
        "N/A",
        "0-23,48-71",
        "0",
        "",
        "Legend:",
        "NIC Legend:",
        "NIC0:",
        "=",
        "#",
        "\t",
        "  ",
        "NV#",
        "\x00",
        "é",
        "GPU0GPU1",
        "-",
        ",",
    ]
)
MATRIX_LIKE_LINE = (
    st.lists(MATRIX_WORDS, max_size=14).map(lambda words: "".join(words))
    | st.lists(MATRIX_WORDS, max_size=14).map("\t".join)
    | st.lists(MATRIX_WORDS, max_size=14).map(" ".join)
)
ANY_LINE = st.text(max_size=120).map(lambda s: s.replace("\n", " ")) | MATRIX_LIKE_LINE
HEADER = st.sampled_from(
    [
        tab("", "GPU0", "GPU1", "NIC0", "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"),
        "GPU0GPU1CPU Affinity",
        "#  GPU0 GPU1 mlx5_0 CPU Affinity",
    ]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(ANY_LINE, HEADER), max_size=40))
def test_arbitrary_lines_never_raise(lines):
    matrices, flags = read_lines(lines)
    assert len(flags) == len(lines)
    assert all(isinstance(f, bool) for f in flags)
    for m in matrices:
        assert m.links  # a reported matrix always has rows
        assert set(m.gpus) | set(m.nics) == set(m.devices)


def test_a_matrix_without_its_header_takes_its_columns_from_the_rows() -> None:
    [m] = read_fixture(TOPO / "headerless_fragment_gpu_without_nvlink.txt")
    assert m.gpus == [f"GPU{i}" for i in range(8)]  # NV18 in columns 5-7: GPUs whose rows were not pasted
    assert m.nics == ["NIC0", "NIC1", "NIC2", "NIC3"]
    assert sorted(m.links) == ["GPU0", "GPU1", "GPU2", "GPU3", "GPU4"]
    assert (m.links["GPU1"]["GPU0"], m.links["GPU4"]["GPU1"], m.links["GPU4"]["NIC2"]) == ("NODE", "SYS", "PXB")
    assert (m.cpu_affinity["GPU4"], m.numa_affinity["GPU4"], m.gpu_numa_id["GPU4"]) == ("48-95,144-191", "1", "N/A")
    assert "no header row" in m.problems[0]
    assert any(p.startswith("no row for GPU5, GPU6, GPU7, NIC0") for p in m.problems)
