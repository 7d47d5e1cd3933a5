"""The Topology screen of the TUI (placeholder until it is written)."""

from __future__ import annotations

from textual.widgets import Static

from ncclscope.tui.view import CaseView


class TopologyPane(Static):
    def __init__(self, **kwargs: object) -> None:
        super().__init__("Reading inputs...", **kwargs)  # type: ignore[arg-type]

    def show_case(self, view: CaseView) -> None:
        self.update("Topology: not written yet")
