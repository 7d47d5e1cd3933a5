"""The Findings screen of the TUI: the verdict, the findings in the engine's order, and the selected one's
explanation, fix and evidence."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.markup import escape
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from ncclscope.model import Finding, Source
from ncclscope.render.verdict import verdict_lines
from ncclscope.tui.finding_links import SEVERITY_STYLE
from ncclscope.tui.messages import JumpToLine, ShowProgress
from ncclscope.tui.view import CaseView

# Theme variables keep the colours legible on dark and light themes alike.
EVIDENCE_TEXT_CHARS = 300


class FindingsPane(Vertical):
    """The verdict, then the findings story by story (each root cause before what it explains); the detail
    pane shows the selected one and its evidence lines."""

    DEFAULT_CSS = """
    FindingsPane { height: 1fr; }
    FindingsPane #findings-summary { height: auto; max-height: 10; padding: 0 1; text-style: bold; }
    FindingsPane #findings-problems { height: auto; max-height: 8; padding: 0 1; color: $text-warning; display: none; }
    FindingsPane #findings-problems.shown { display: block; }
    FindingsPane #findings-body { height: 1fr; }
    FindingsPane #findings-list { width: 2fr; height: 1fr; text-wrap: nowrap; text-overflow: ellipsis; }
    FindingsPane #finding-detail { width: 3fr; height: 1fr; padding: 0 1; border-left: vkey $panel; }
    FindingsPane #finding-text { height: auto; }
    FindingsPane #finding-evidence-title { height: auto; margin-top: 1; text-style: bold; }
    FindingsPane #finding-evidence { height: auto; max-height: 16; }
    """

    BINDINGS = [
        Binding("e", "focus_evidence", "Evidence"),
        Binding("l", "focus_list", "Findings list"),
        Binding("p", "show_progress", "Rank progress"),
    ]

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._findings: list[Finding] = []

    def compose(self) -> ComposeResult:
        yield Static("Reading inputs...", id="findings-summary")
        yield Static("", id="findings-problems")
        with Horizontal(id="findings-body"):
            yield OptionList(id="findings-list")
            with VerticalScroll(id="finding-detail"):
                yield Static("", id="finding-text")
                yield Static("", id="finding-evidence-title")
                yield OptionList(id="finding-evidence")

    def show_case(self, view: CaseView) -> None:
        """Replace the list with the findings of `view`, most severe first, and select the first (or the one
        selected before, when a newer analysis of a followed input still has it)."""
        before = self.selected.identity if self.selected is not None else None
        self._findings = list(view.analysis.findings)  # the engine's order: each story's root cause first
        findings_list = self.query_one("#findings-list", OptionList)
        findings_list.clear_options()
        findings_list.add_options(_list_entry(f, i) for i, f in enumerate(self._findings))
        summary = self.query_one("#findings-summary", Static)
        if not self._findings:
            summary.update(f"No findings. {_what_was_read(view.case.sources)}")
            self._show_detail(None)
            return
        verdict = "\n".join(escape(line) for line in verdict_lines(view.analysis))
        summary.update(_summary(self._findings) + "\n" + verdict)
        again = next((i for i, f in enumerate(self._findings) if f.identity == before), None)
        findings_list.highlighted = again or 0
        self._show_detail(self._findings[again or 0])

    def show_problems(self, messages: list[str]) -> None:
        """Problems met while reading the inputs (unusable inputs, lines cut), one line each."""
        problems = self.query_one("#findings-problems", Static)
        problems.update("\n".join(f"Read problem: {escape(m)}" for m in messages))
        problems.set_class(bool(messages), "shown")

    @property
    def selected(self) -> Finding | None:
        """The finding whose detail is shown."""
        index = self.query_one("#findings-list", OptionList).highlighted
        return self._findings[index] if index is not None and index < len(self._findings) else None

    def select_code(self, code: str) -> bool:
        """Select the first finding with this code; False when there is none."""
        for index, finding in enumerate(self._findings):
            if finding.code == code:
                findings_list = self.query_one("#findings-list", OptionList)
                findings_list.highlighted = index
                findings_list.focus()
                return True
        return False

    def action_focus_evidence(self) -> None:
        self.query_one("#finding-evidence", OptionList).focus()

    def action_focus_list(self) -> None:
        self.query_one("#findings-list", OptionList).focus()

    def action_show_progress(self) -> None:
        """The Progress screen, at the group of the selected HANG finding."""
        finding = self.selected
        self.post_message(ShowProgress(finding if finding is not None and finding.code.startswith("HANG") else None))

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option_list.id == "findings-list":
            event.stop()
            self._show_detail(self._findings[event.option_index])

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option_list.id == "findings-list":
            self.action_focus_evidence()  # Enter on a finding: go to its evidence, one more Enter opens the log
            return
        finding = self.selected
        if finding is not None and event.option_index < len(finding.evidence):
            evidence = finding.evidence[event.option_index]
            self.post_message(JumpToLine(evidence.source, evidence.line))

    def _show_detail(self, finding: Finding | None) -> None:
        evidence_list = self.query_one("#finding-evidence", OptionList)
        evidence_list.clear_options()
        title = self.query_one("#finding-evidence-title", Static)
        if finding is None:
            self.query_one("#finding-text", Static).update("")
            title.update("")
            return
        self.query_one("#finding-text", Static).update(_detail(finding))
        evidence_list.add_options(
            Option(f"[$text-muted]{escape(e.where)}[/]  {escape(e.text[:EVIDENCE_TEXT_CHARS])}")
            for e in finding.evidence
        )
        total = max(finding.evidence_count, len(finding.evidence))
        if total > len(finding.evidence):
            shown = f"{len(finding.evidence)} of {total} lines"
        else:
            shown = "1 line" if total == 1 else f"{total} lines"
        title.update(f"Evidence ({shown}; Enter opens the raw log at the line)" if finding.evidence else "No evidence")
        if finding.evidence:
            evidence_list.highlighted = 0


def _list_entry(finding: Finding, index: int) -> Option:
    root = " [b]root cause[/b]" if finding.root_cause else ""
    style = SEVERITY_STYLE[finding.severity]
    return Option(
        f"[{style}]{finding.severity.upper():7}[/] [b]{finding.code}[/]{root} {escape(finding.message)}", id=str(index)
    )


def _summary(findings: list[Finding]) -> str:
    counts = {severity: sum(f.severity == severity for f in findings) for severity in SEVERITY_STYLE}
    parts = [
        f"[{SEVERITY_STYLE[severity]}]{count} {severity}{'s' if count != 1 else ''}[/]"
        for severity, count in counts.items()
        if count
    ]
    roots = sum(f.root_cause for f in findings)
    causes = f" ({roots} root cause{'s' if roots != 1 else ''} marked)" if roots else ""
    return ", ".join(parts) + causes


def _detail(finding: Finding) -> str:
    style = SEVERITY_STYLE[finding.severity]
    root = "  [b]root cause[/b]" if finding.root_cause else ""
    parts = [
        f"[{style}]{finding.severity.upper()}[/] [b]{finding.code}[/] {escape(finding.name)}{root}",
        escape(finding.message),
    ]
    if finding.hosts or finding.ranks:
        where = ", ".join(filter(None, [", ".join(finding.hosts), _ranks(finding.ranks)]))
        parts.append(f"[$text-muted]Where:[/] {escape(where)}")
    if finding.explanation:
        parts.append(f"[b]Why it matters[/b]\n{escape(finding.explanation)}")
    if finding.fix:
        parts.append(f"[b]Fix[/b]\n{escape(finding.fix)}")
    if finding.related:
        parts.append(f"[b]Related[/b] {', '.join(finding.related)}")
    if finding.code.startswith("HANG"):
        parts.append("[$text-muted]p: how far each rank of the group got, on the Progress screen[/]")
    if finding.sources:
        parts.append("[b]Sources[/b]\n" + "\n".join(f"- {escape(s)}" for s in finding.sources))
    return "\n\n".join(parts)


def _ranks(ranks: list[int]) -> str:
    return f"rank{'s' if len(ranks) != 1 else ''} {', '.join(map(str, ranks))}" if ranks else ""


def _what_was_read(sources: list[Source]) -> str:
    if not sources:
        return "Nothing was read."
    described = [f"{s.path} ({s.lines} lines: {', '.join(s.kinds) or 'nothing recognised'})" for s in sources]
    return "Read " + "; ".join(described) + "."
