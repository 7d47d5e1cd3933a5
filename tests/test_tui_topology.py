"""The Topology screen: the matrix coloured by link class, GPU to nearest NIC, affinity, topology findings."""

from __future__ import annotations

from textual.widgets import Static
from tui_harness import PaneHarness, case_view

from ncclscope.case.topology import NearestNic, nearest_nics
from ncclscope.tui.hosts import FindingLinks
from ncclscope.tui.topology import TopologyPane
from ncclscope.tui.view import CaseView

H100 = "fixtures/topo/h100_8gpu_nic_legend_tabs.txt"
PCIE = "fixtures/topo/pcie_8gpu_two_switches_sys.txt"
NIC_OTHER_SOCKET = "fixtures/topo_cases/l40s_4gpu_nic_other_socket.txt"
SIZE = (120, 40)


def harness(view: CaseView | None) -> PaneHarness:
    return PaneHarness(lambda: TopologyPane(), view)


def named(app: PaneHarness, css: str, name: str) -> Static:
    (widget,) = [w for w in app.query(css).results(Static) if w.name == name]
    return widget


def text(widget: Static) -> str:
    return str(widget.content)


async def test_each_h100_gpu_is_nearest_to_its_own_pix_nic() -> None:
    # By hand: GPUk's row has PIX in column NICk, NODE to the other NICs of its socket, SYS across.
    app = harness(case_view(H100))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        expected = [NearestNic(f"GPU{k}", [f"NIC{k}"], "PIX") for k in range(8)]
        assert app.query_one(TopologyPane).nearest == [expected]
        assert text(named(app, ".nearest-nic", "GPU5")) == "NIC5 (mlx5_5)"


async def test_each_pcie_switch_group_is_nearest_to_its_switchs_nic() -> None:
    # By hand: GPU0-3 and NIC0 share the first switch (PIX), GPU4-7 and NIC1 the second; across is SYS.
    app = harness(case_view(PCIE))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        (nearest,) = app.query_one(TopologyPane).nearest
        assert [(n.gpu, n.nics, n.link) for n in nearest] == [
            (f"GPU{k}", ["NIC0" if k < 4 else "NIC1"], "PIX") for k in range(8)
        ]
        assert not any(n.far for n in nearest)


async def test_a_nic_on_the_other_socket_is_flagged_as_far() -> None:
    app = harness(case_view(NIC_OTHER_SOCKET))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        (nearest,) = app.query_one(TopologyPane).nearest
        assert {(n.link, n.far) for n in nearest} == {("SYS", True)}
        flags = [text(w) for w in app.query(".far").results(Static)]
        assert flags == ["GPUDirect RDMA off by default"] * 4


def test_nics_equally_near_a_gpu_are_all_listed() -> None:
    (topo,) = case_view(PCIE).case.topologies
    links = {device: dict(row) for device, row in topo.links.items()}
    links["GPU4"]["NIC0"] = links["NIC0"]["GPU4"] = "PIX"  # a second NIC on GPU4's switch
    (gpu4,) = [n for n in nearest_nics(topo.model_copy(update={"links": links})) if n.gpu == "GPU4"]
    assert gpu4 == NearestNic("GPU4", ["NIC0", "NIC1"], "PIX")


async def test_matrix_cells_carry_their_link_class() -> None:
    app = harness(case_view(PCIE, H100))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        pcie, h100 = app.query(".matrix")
        cells = {(grid, w.name): w for grid in (pcie, h100) for w in grid.query(".cell") if w.name}
        assert cells[pcie, "GPU0|GPU1"].has_class("link-pix")
        assert cells[pcie, "GPU0|GPU4"].has_class("link-sys")
        assert cells[pcie, "GPU4|NIC1"].has_class("link-pix")
        assert cells[pcie, "GPU0|GPU0"].has_class("link-self")
        assert cells[h100, "GPU0|GPU7"].has_class("link-nv")
        assert cells[h100, "GPU0|NIC1"].has_class("link-node")
        assert text(cells[h100, "GPU0|GPU7"]) == "NV18"


async def test_each_matrix_is_titled_with_its_source() -> None:
    app = harness(case_view(PCIE, H100))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        titles = [text(w) for w in app.query("#topo-matrices > .title").results(Static) if text(w).startswith("Matrix")]
        assert titles == [
            "Matrix pcie_8gpu_two_switches_sys.txt:1 (8 GPUs, 2 NICs)",
            "Matrix h100_8gpu_nic_legend_tabs.txt:1 (8 GPUs, 8 NICs)",
        ]


async def test_the_legend_explains_the_classes_in_the_matrix() -> None:
    app = harness(case_view(PCIE))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        legend = [text(w) for w in app.query_one(".legend").query(Static)]
        assert legend[::2] == ["PIX", "SYS", "X"]
        assert "QPI/UPI" in legend[legend.index("SYS") + 1]


async def test_the_topology_findings_are_listed() -> None:
    view = case_view(PCIE)
    app = harness(view)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        links = app.query_one(FindingLinks)
        assert links.option_count == 1
        assert str(links.get_option_at_index(0).prompt).startswith("TOPO001 error")


async def test_enter_on_a_topology_finding_shows_its_evidence_line() -> None:
    view = case_view(PCIE)
    (topo001,) = view.findings_with_prefix("TOPO001")
    app = harness(view)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.query_one(FindingLinks).focus()
        await pilot.press("enter")
        assert app.jumps == [(topo001.evidence[0].source, topo001.evidence[0].line)]


async def test_an_input_without_a_matrix_says_how_to_get_one() -> None:
    app = harness(case_view("fixtures/nccl/v2_18_8xh100_nvswitch.log"))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        message = app.query_one("#topo-message", Static)
        assert message.display and "nvidia-smi topo -m > topo.txt" in text(message)
        assert not app.query(".matrix")


async def test_before_the_case_is_read_the_pane_says_so() -> None:
    app = harness(None)
    async with app.run_test(size=SIZE):
        assert text(app.query_one("#topo-message", Static)) == "Reading inputs..."


async def test_showing_a_new_case_replaces_the_matrices() -> None:
    app = harness(case_view(PCIE))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.query_one(TopologyPane).show_case(case_view(H100))
        await pilot.pause()
        (matrix,) = app.query(".matrix")
        assert [w for w in matrix.query(".cell") if w.name == "GPU0|NIC0"][0].has_class("link-pix")
        assert len(app.query(".nearest-nic")) == 8


def test_snapshot_a100_mlx_columns_with_one_channel(snap_compare) -> None:  # type: ignore[no-untyped-def]
    view = case_view("fixtures/topo/a100_8gpu_mlx_columns.txt", "fixtures/topo_cases/a100_8gpu_nvlink_one_channel.log")
    assert snap_compare(harness(view), terminal_size=SIZE)


async def test_the_device_tree_shows_each_host_with_its_degraded_links_in_red() -> None:
    from textual.widgets import Tree

    app = harness(
        case_view(
            "fixtures/xml/h100_gpu3_x8_topo.xml",
            "fixtures/xml/dgx_h100_graph.xml",
            "fixtures/smi/nvidia_smi_q_gpu3_x8.txt",
            "fixtures/smi/nvlink_s_8x_h100.txt",
            "fixtures/ib/ibstat_port_down_and_slow.txt",
        )
    )
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        (tree,) = app.query(".device-tree").results(Tree)
        labels: dict[str, object] = {}

        def walk(node) -> None:  # type: ignore[no-untyped-def]
            labels[node.label.plain] = node.label
            for child in node.children:
                walk(child)

        walk(tree.root)
        (gpu3,) = [k for k in labels if k.startswith("GPU 3 ")]
        assert "16 GT/s x8 (max 32 GT/s x16)" in gpu3 or "x8" in gpu3, gpu3
        assert gpu3.endswith("[degraded]")
        assert any(span.style == "bold red" for span in labels[gpu3].spans) or labels[gpu3].style == "bold red"
        assert any(k.startswith("CPU / NUMA node 1") for k in labels)
        assert any("NCCL's paths: NET/3 (mlx5_3) -> GPU 3" in k for k in labels)
        titles = [str(w.content) for w in app.query(".title").results(Static)]
        assert any(t.startswith("Device tree of fixtures/xml/h100_gpu3_x8_topo.xml (") for t in titles), titles
