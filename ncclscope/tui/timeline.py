"""The Timeline screen of the TUI: the job's first failure, and under it, folded per host, what followed it
(diagnose/first_failure.py orders them). Enter on a failure shows its line in the raw log."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static, Tree
from textual.widgets.tree import TreeNode

from ncclscope.diagnose.first_failure import ORDERED_BY, Failure, Timeline, timeline
from ncclscope.model import Evidence
from ncclscope.tui.messages import JumpToLine
from ncclscope.tui.view import CaseView

NO_FAILURES = (
    "No failure in the inputs: no NCCL WARN that ends a job, no watchdog timeout, no process that ended, no "
    "hardware fault in a kernel log. Add each rank's log (NCCL_DEBUG=INFO, NCCL_DEBUG_FILE=nccl.%h.%p), the "
    "launcher's output and the hosts' kernel logs (`journalctl -k -o short-iso`)."
)


def failure_label(f: Failure, first: bool = False) -> Text:
    """One failure on one line: time, where, what."""
    label = Text()
    if first:
        label.append("FIRST ", style="bold reverse")
    if f.time_text:
        label.append(f"{f.time_text.strip('[]')}  ", style="dim")
    label.append(f.process, style="bold" if first else "")
    label.append(f"  {f.what}")
    return label


class TimelinePane(Vertical):
    """The first failure, the cascade folded under it per host, later failures and unordered candidates."""

    DEFAULT_CSS = """
    TimelinePane { padding: 0 1; }
    TimelinePane #timeline-message { color: $text-muted; margin-top: 1; }
    TimelinePane #timeline-how { margin: 1 0; }
    TimelinePane Tree { height: 1fr; }
    """

    def __init__(self, **kwargs: str) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.line: Timeline | None = None

    def compose(self) -> ComposeResult:
        yield Static("Reading inputs...", id="timeline-message")
        yield Static("", id="timeline-how")
        tree: Tree[Evidence | None] = Tree("Failures of the job", id="timeline-tree")
        tree.show_root = False
        yield tree

    def on_mount(self) -> None:
        self.query_one("#timeline-tree").display = False

    def show_case(self, view: CaseView) -> None:
        line = self.line = timeline(view.case)
        tree: Tree[Evidence | None] = self.query_one("#timeline-tree", Tree)
        tree.clear()
        message = self.query_one("#timeline-message", Static)
        if not line.failures:
            message.update(NO_FAILURES)
            message.display, tree.display = True, False
            self.query_one("#timeline-how", Static).update("")
            return
        message.display, tree.display = False, True
        self.query_one("#timeline-how", Static).update(_how(line))
        if line.root is not None:
            tree.root.add_leaf(failure_label(line.root, first=True), data=line.root.evidence)
        elif line.lost_peer:
            seen = f"its host {line.lost_peer_host} shows no failure" if line.lost_peer_host else "its log is not given"
            tree.root.add_leaf(Text(f"FIRST  on the lost peer {line.lost_peer} ({seen})"))
        if line.candidates:
            _group(tree.root, f"Any of these may be first ({len(line.candidates)})", line.candidates, expand=True)
        if line.cascade:
            _group(tree.root, f"What followed it ({len(line.cascade)}), per host", line.cascade)
        if line.later:
            _group(tree.root, f"Later failures of their own ({len(line.later)}), per host", line.later)
        tree.root.expand()
        tree.cursor_line = 0

    def on_tree_node_selected(self, event: Tree.NodeSelected) -> None:
        evidence = event.node.data
        if isinstance(evidence, Evidence) and evidence.line:
            event.stop()
            self.post_message(JumpToLine(evidence.source, evidence.line))


def _group(parent: TreeNode, title: str, failures: list[Failure], expand: bool = False) -> None:
    """A folded node of failures, one node per host under it, in time order."""
    node = parent.add(title, expand=expand)
    hosts: dict[str, list[Failure]] = {}
    for f in failures:
        hosts.setdefault(f.host or "(host not named)", []).append(f)
    for host, items in hosts.items():
        branch = node.add(f"{host} ({len(items)})", expand=False)
        for f in items:
            branch.add_leaf(failure_label(f), data=f.evidence)


def _how(line: Timeline) -> str:
    if line.root is not None:
        how = ORDERED_BY.get(line.ordered_by, line.ordered_by)
        return f"First failure ({how}); Enter on a line shows it in the raw log."
    if line.candidates:
        return "Nothing orders these failures across hosts (their lines carry no times): any may be first."
    return f"Every failure here follows the loss of the peer {line.lost_peer}: the first failure is there."
