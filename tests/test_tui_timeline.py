"""Issue 44: the Timeline screen, driven by the keys a person types (Pilot): the first failure marked, what followed
it folded per host, Enter on a failure opens the raw log at its line; a job without failures says what to add."""

from __future__ import annotations

from pathlib import Path

from test_tui_app import SIZE, active_tab, parsed
from textual.widgets import Static, Tree

from ncclscope.tui.app import NcclscopeApp
from ncclscope.tui.loading import prepare_inputs

STORY = "fixtures/timeline"
INPUTS = [f"{STORY}/gpu-a.log", f"{STORY}/gpu-b.log", f"{STORY}/gpu-b-kernel.txt"]


def labels(node) -> list[str]:  # type: ignore[no-untyped-def]
    return [str(child.label) for child in node.children]


async def test_the_first_failure_is_marked_and_the_cascade_folded_per_host(repo_cwd: Path) -> None:
    app = NcclscopeApp(prepare_inputs(INPUTS))
    async with app.run_test(size=SIZE) as pilot:
        await parsed(app, pilot)
        await pilot.press("8")
        assert active_tab(app) == "timeline"
        tree = app.query_one("#timeline-tree", Tree)
        top = labels(tree.root)
        assert top[0].startswith("FIRST 2025-06-02T10:15:40.512409+00:00  gpu-b, rank 3, GPU 0000:43:00.0")
        assert "Xid 79 GPU has fallen off the bus" in top[0]
        assert top[1] == "What followed it (7), per host"
        followed = tree.root.children[1]
        assert not followed.is_expanded  # folded until asked
        await pilot.press("down", "space")  # onto "What followed it", open it
        assert followed.is_expanded
        assert labels(followed) == ["gpu-b (3)", "gpu-a (4)"]
        how = app.query_one("#timeline-how", Static)
        assert "by the times the lines carry" in str(how.render())


async def test_enter_on_the_first_failure_opens_its_line_in_the_raw_log(repo_cwd: Path) -> None:
    app = NcclscopeApp(prepare_inputs(INPUTS))
    async with app.run_test(size=SIZE) as pilot:
        await parsed(app, pilot)
        await pilot.press("8")
        app.query_one("#timeline-tree", Tree).focus()
        await pilot.press("enter")
        await pilot.pause()
        assert active_tab(app) == "raw-log"
        assert app.raw_log.current == (f"{STORY}/gpu-b-kernel.txt", 3)


async def test_a_job_without_failures_says_what_to_add(repo_cwd: Path) -> None:
    app = NcclscopeApp(prepare_inputs(["fixtures/nccl/v2_28_healthy_multinode_gdr.log"]))
    async with app.run_test(size=SIZE) as pilot:
        await parsed(app, pilot)
        await pilot.press("8")
        message = app.query_one("#timeline-message", Static)
        assert message.display and "No failure in the inputs" in str(message.render())
        assert not app.query_one("#timeline-tree", Tree).display
