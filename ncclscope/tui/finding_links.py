"""A short list of findings (code, severity, message) whose Enter opens the first evidence line: the findings
that concern one screen (Hosts, Topology)."""

from __future__ import annotations

from textual.binding import Binding
from textual.content import Content
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from ncclscope.model import Finding
from ncclscope.tui.messages import JumpToLine

# Theme variables, so that the dark and light themes both read well (the Findings screen uses the same).
SEVERITY_STYLE = {"error": "$text-error", "warning": "$text-warning", "info": "$text-primary"}


class FindingLinks(OptionList):
    """Findings one per line (code, severity, message); Enter posts JumpToLine for the first evidence line."""

    BINDINGS = [Binding("enter", "select", "Show evidence")]

    DEFAULT_CSS = """
    FindingLinks { height: auto; max-height: 14; }
    """

    def __init__(self, **kwargs: str) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._findings: list[Finding] = []

    def show_findings(self, findings: list[Finding], none_text: str) -> None:
        self.clear_options()
        self._findings = findings
        if not findings:
            self.add_option(Option(Content.styled(none_text, "$text-muted"), disabled=True))
            return
        self.add_options(
            Content.assemble((f.code, "bold"), " ", (f"{f.severity:<7}", SEVERITY_STYLE[f.severity]), " ", f.message)
            for f in findings
        )
        self.highlighted = 0  # Enter acts at once when the list gets the focus

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        evidence = self._findings[event.option_index].evidence
        if evidence:
            self.post_message(JumpToLine(evidence[0].source, evidence[0].line))
