"""A one-pane Textual app for testing a TUI pane on a fixture (tests import it as `tui_harness`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from textual.app import App, ComposeResult
from textual.widget import Widget

from ncclscope.case.read import read_case
from ncclscope.diagnose.engine import analyze
from ncclscope.tui.messages import JumpToLine
from ncclscope.tui.view import CaseView

ROOT = Path(__file__).resolve().parents[1]


def case_view(*fixtures: str) -> CaseView:
    """The CaseView of fixtures named relative to the repository root (e.g. "fixtures/topo/x.txt").

    Read from the root under those relative names, so that what the panes show (and the snapshots)
    does not depend on where the repository is checked out.
    """
    before = os.getcwd()
    os.chdir(ROOT)
    try:
        outcome = read_case(list(fixtures), jobs=1)
    finally:
        os.chdir(before)
    return CaseView(analyze(outcome.case), {s.path: str(ROOT / s.path) for s in outcome.case.sources})


class PaneHarness(App[None]):
    """Mounts one pane and hands it the CaseView; records the JumpToLine messages it sends."""

    def __init__(self, make_pane: Callable[[], Widget], view: CaseView | None) -> None:
        super().__init__()
        self._make_pane = make_pane
        self._view = view
        self.jumps: list[tuple[str, int]] = []

    def compose(self) -> ComposeResult:
        yield self._make_pane()

    def on_mount(self) -> None:
        if self._view is not None:
            self.query_one(Widget).show_case(self._view)  # type: ignore[attr-defined]

    def on_jump_to_line(self, message: JumpToLine) -> None:
        self.jumps.append((message.source, message.line))
