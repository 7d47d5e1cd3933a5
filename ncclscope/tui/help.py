"""The TUI's help (`?`): every key of the app and of the focused screen, and what each screen shows."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.markup import escape
from textual.screen import ModalScreen
from textual.widgets import Static

SCREENS = [
    ("1 Findings", "every finding by severity; the detail shows why it matters, the fix and the evidence lines."),
    ("2 Hosts", "hosts, processes, ranks and GPUs, NCCL version, plugin and network; the odd ones out highlighted."),
    ("3 Communicators", "each communicator's ranks and hosts, rings and trees with the transport of each edge."),
    ("4 Topology", "the `nvidia-smi topo -m` matrix coloured by link class, GPU to nearest NIC, CPU affinity."),
    ("5 Benchmarks", "nccl-tests runs: the table, and busbw against message size next to the expected figure."),
    ("6 Raw log", "every line of every input, filtered by host, rank, level, family or regular expression."),
    ("7 Progress", "how far each rank of each group got (Flight Recorder, COLL lines, ncclras); stuck ranks marked."),
    ("8 Timeline", "the job's first failure (kernel log, NCCL WARN, a worker that ended), what followed it per host."),
]


class HelpScreen(ModalScreen[None]):
    """A modal listing keys (given as (key, description) pairs) and the screens."""

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 90; max-width: 95%; height: auto; max-height: 90%;
        border: thick $primary; background: $surface; padding: 1 2;
    }
    HelpScreen Static { height: auto; }
    """

    BINDINGS = [
        Binding("escape", "dismiss", "Close"),
        Binding("question_mark", "dismiss", "Close", show=False),
        Binding("q", "dismiss", "Close", show=False),
    ]

    def __init__(self, keys: list[tuple[str, str]]) -> None:
        super().__init__()
        self._keys = keys

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(self._text(), id="help-text")

    def _text(self) -> str:
        width = max((len(key) for key, _ in self._keys), default=0)
        keys = "\n".join(f"  [b]{escape(key.ljust(width))}[/]  {escape(text)}" for key, text in self._keys)
        screens = "\n".join(f"  [b]{escape(name)}[/]: {escape(text)}" for name, text in SCREENS)
        return (
            "[b]ncclscope[/b]: findings from NCCL logs, topology matrices and nccl-tests output.\n\n"
            f"[b $text-primary]Keys[/]\n{keys}\n\n[b $text-primary]Screens[/]\n{screens}\n\n"
            "[$text-muted]Escape closes this help. Ctrl+P opens the command palette.[/]"
        )
