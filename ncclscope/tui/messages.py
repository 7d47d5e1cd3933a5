"""Messages the TUI's screens send each other."""

from __future__ import annotations

from textual.message import Message

from ncclscope.model import Finding


class JumpToLine(Message):
    """Show the raw log at `line` (1-based) of `source` (an Evidence.source name)."""

    def __init__(self, source: str, line: int) -> None:
        super().__init__()
        self.source = source
        self.line = line


class ShowProgress(Message):
    """Show the Progress screen at the group a finding speaks of (any group when it names none)."""

    def __init__(self, finding: Finding | None) -> None:
        super().__init__()
        self.finding = finding
