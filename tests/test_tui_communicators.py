"""The Communicators screen: rings and trees with the transport of each edge, NIC per GPU, init timings, jumps."""

from __future__ import annotations

from typing import Any

from textual.widgets import DataTable, OptionList, Static
from tui_harness import PaneHarness, case_view

from ncclscope.tui.communicators import NO_COMMUNICATOR, NO_NET_LINES, CommunicatorsPane

HEALTHY = "fixtures/nccl/v2_28_healthy_multinode_gdr.log"
GDR_ONE_HOST_OFF = "fixtures/net/ib_gdr_one_host_off.log"
LATEST = "fixtures/nccl/v2_30_7_latest.log"
SIZE = (120, 40)


def harness(*fixtures: str) -> PaneHarness:
    return PaneHarness(lambda: CommunicatorsPane(), case_view(*fixtures))


def pane_of(app: PaneHarness) -> CommunicatorsPane:
    return app.query_one(CommunicatorsPane)


def rings(app: PaneHarness) -> list[str]:
    options = pane_of(app).query_one("#comm-rings", OptionList)
    return [options.get_option_at_index(i).prompt.plain for i in range(options.option_count)]  # type: ignore[union-attr]


def rows(app: PaneHarness, table_id: str) -> list[list[Any]]:
    table = pane_of(app).query_one(f"#{table_id}", DataTable)
    return [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]


def text_of(app: PaneHarness, static_id: str) -> str:
    return str(pane_of(app).query_one(f"#{static_id}", Static).render().plain)  # type: ignore[attr-defined]


async def test_ring_shows_p2p_inside_a_host_and_net_with_gdr_and_nic_between_hosts() -> None:
    app = harness(HEALTHY)
    async with app.run_test(size=SIZE):
        inside = " ".join(f"-P2P-> {r}" for r in range(1, 8))
        other = " ".join(f"-P2P-> {r}" for r in range(9, 16))
        assert rings(app)[0] == f"ch 0: 0 {inside} -NET/IB/0 GDR-> 8 {other} -NET/IB/0 GDR-> 0"


async def test_every_channel_has_its_ring() -> None:
    app = harness(HEALTHY)
    async with app.run_test(size=SIZE):
        assert [line.split(":")[0] for line in rings(app)] == [f"ch {c}" for c in range(8)]
        assert rings(app)[1].startswith("ch 1: 0 -NET/IB/1 GDR-> 9 -P2P-> 10")


async def test_ring_shows_shm_edges() -> None:
    app = harness(LATEST)
    async with app.run_test(size=SIZE):
        assert rings(app)[0] == "ch 0: 0 -NET/IB/0 GDR-> 3 -SHM-> 2 -NET/IB/0 GDR-> 1 -SHM-> 0"


async def test_ring_says_which_side_of_a_net_edge_lacks_gdr() -> None:
    app = harness(GDR_ONE_HOST_OFF)
    async with app.run_test(size=SIZE):
        # gpu-r01 sends and receives with GDRDMA, gpu-r02 without; a ring edge lists the NICs of that rank pair
        assert rings(app)[0] == (
            "ch 0: 0 -P2P-> 1 -NET/IB/0,1 GDR send side only-> 2 -P2P-> 3 -NET/IB/0,1 GDR receive side only-> 0"
        )


async def test_nic_table_says_which_nic_each_gpu_uses_and_whether_gdr_is_on() -> None:
    app = harness(GDR_ONE_HOST_OFF)
    async with app.run_test(size=SIZE):
        assert rows(app, "comm-nics") == [
            ["0", "gpu-r01", "cudaDev 0 · busId 1b000", "mlx5_0, mlx5_1", "-", "yes"],
            ["1", "gpu-r01", "cudaDev 1 · busId 9a000", "-", "mlx5_0, mlx5_1", "yes"],
            ["2", "gpu-r02", "cudaDev 0 · busId 1b000", "mlx5_0, mlx5_1", "-", "no"],
            ["3", "gpu-r02", "cudaDev 1 · busId 9a000", "-", "mlx5_0, mlx5_1", "no"],
        ]


async def test_nic_table_names_the_pxn_proxy_rank_of_a_send() -> None:
    app = harness(HEALTHY)
    async with app.run_test(size=SIZE):
        assert rows(app, "comm-nics")[0][3:] == ["mlx5_0", "mlx5_1 via rank 1 (PXN)", "yes"]


async def test_nic_table_says_what_is_missing_without_net_lines() -> None:
    app = harness("fixtures/runtime/mnnvl_imex_not_permitted.log")
    async with app.run_test(size=SIZE):
        assert text_of(app, "comm-nics-note") == NO_NET_LINES
        assert [row[3] for row in rows(app, "comm-nics")] == ["unknown", "unknown"]


async def test_single_host_ranks_have_no_net_connection() -> None:
    app = harness("fixtures/nccl/v2_18_8xh100_nvswitch.log")
    async with app.run_test(size=SIZE):
        assert not pane_of(app).query_one("#comm-nics-note").display
        assert {row[3] for row in rows(app, "comm-nics")} == {
            "no NET connection (single host, NVLink across hosts, or not logged)"
        }


async def test_trees_are_drawn_per_channel_from_every_ranks_view() -> None:
    app = harness(GDR_ONE_HOST_OFF)
    async with app.run_test(size=SIZE):
        # no connection line was logged for the tree edges between hosts: they show as not logged
        assert text_of(app, "comm-trees") == "\n".join(
            [
                "ch 0:",
                "0 [gpu-r01]",
                "├─ 1 [gpu-r01]  P2P",
                "└─ 2 [gpu-r02]  ?",
                "   └─ 3 [gpu-r02]  P2P",
                "ch 1:",
                "2 [gpu-r02]",
                "├─ 3 [gpu-r02]  P2P",
                "└─ 0 [gpu-r01]  ?",
                "   └─ 1 [gpu-r01]  P2P",
            ]
        )


async def test_channels_with_the_same_tree_are_drawn_once() -> None:
    app = harness("fixtures/nccl/v2_18_8xh100_nvswitch.log")
    async with app.run_test(size=SIZE):
        assert text_of(app, "comm-trees").splitlines()[0] == "ch 0, 1, 2, 3, 4, 5, 6, 7:"


async def test_ranks_table_shows_init_state_and_init_seconds() -> None:
    app = harness(LATEST)
    async with app.run_test(size=SIZE):
        assert rows(app, "comm-ranks")[3] == ["3", "gpu-p02", "12989", "1", "1", "c3000", "complete", "0.89"]
        assert "Init timings: 4 of 4 ranks, median 0.86 s, slowest rank 3 0.89 s." in text_of(app, "comm-heading")


async def test_ranks_table_shows_ranks_that_never_completed_init() -> None:
    app = harness("fixtures/nccl/init_incomplete_two_hosts.log")
    async with app.run_test(size=SIZE):
        assert [row[6] for row in rows(app, "comm-ranks")] == ["complete"] * 5 + ["started, not complete"] * 3


async def test_enter_on_a_rank_opens_its_init_line() -> None:
    app = harness(GDR_ONE_HOST_OFF)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("k", "down", "down", "enter")
        assert app.jumps == [(GDR_ONE_HOST_OFF, 74)]


async def test_enter_on_a_ring_opens_its_first_net_edge() -> None:
    app = harness(GDR_ONE_HOST_OFF)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("r", "enter")
        # line 50: `1[1] -> 2[0] [send] via NET/IB/0/GDRDMA`, the first edge of ring 0 that leaves a host
        assert app.jumps == [(GDR_ONE_HOST_OFF, 50)]


async def test_enter_on_a_nic_row_opens_that_ranks_net_line() -> None:
    app = harness(GDR_ONE_HOST_OFF)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("n", "down", "down", "down", "enter")
        assert app.jumps == [(GDR_ONE_HOST_OFF, 53)]


async def test_choosing_another_communicator_shows_its_detail() -> None:
    app = harness("fixtures/nccl/v2_29_gb200_mnnvl.log")
    async with app.run_test(size=SIZE) as pilot:
        second = str(app.query_one("#comm-list", DataTable).get_row_at(1)[0])
        await pilot.press("c", "down")
        assert text_of(app, "comm-heading").startswith(f"Communicator {second} ")


async def test_several_communicators_warn_that_edges_are_not_per_communicator() -> None:
    app = harness("fixtures/nccl/v2_29_gb200_mnnvl.log")
    async with app.run_test(size=SIZE):
        assert "connection lines are not tied to a communicator" in text_of(app, "comm-heading")


async def test_input_without_communicator_says_what_would_fill_the_screen() -> None:
    app = harness("fixtures/topo/h100_4gpu_spaces.txt")
    async with app.run_test(size=SIZE):
        assert text_of(app, "comm-message") == NO_COMMUNICATOR
        assert not pane_of(app).query_one("#comm-detail").display


async def test_placeholder_before_the_case_arrives() -> None:
    app = PaneHarness(lambda: CommunicatorsPane(), None)
    async with app.run_test(size=SIZE):
        assert text_of(app, "comm-message") == "Reading inputs..."


def test_screen_of_a_two_host_job(snap_compare: Any) -> None:
    assert snap_compare(harness(HEALTHY), terminal_size=SIZE)


def test_trees_of_a_large_communicator_are_drawn_up_to_a_bound_and_the_rest_named() -> None:
    """A chain tree per channel, 64 ranks x 64 channels: 4096 nodes, twice what is drawn."""
    from ncclscope.model import CommRank, Communicator
    from ncclscope.tui.communicators import TREE_NODES_DRAWN, EdgeIndex, trees_content

    ranks, channels = 64, 64
    trees = {
        r: [f"[{c}] {(r + 1) if r + 1 < ranks else -1}/-1/-1->{r}->{r - 1 if r else -1}" for c in range(channels)]
        for r in range(ranks)
    }
    comm = Communicator(id="big", nranks=ranks, ranks=[CommRank(rank=r, host="h") for r in range(ranks)], trees=trees)
    text = trees_content(comm, EdgeIndex([])).plain
    drawn = TREE_NODES_DRAWN // ranks
    assert text.startswith("ch " + ", ".join(map(str, range(drawn))) + ":")  # identical trees drawn once
    assert f"ch {', '.join(map(str, range(drawn, channels)))}: not drawn" in text
