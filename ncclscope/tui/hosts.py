"""The Hosts and ranks screen of the TUI: what each host and rank ran, with the hosts that disagree highlighted."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.color import Color
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static

from ncclscope.common.words import number_ranges as ranges_text
from ncclscope.diagnose.rules.version import driver_text
from ncclscope.model import Case, CommRank, Evidence, Host, Process
from ncclscope.tui.finding_links import FindingLinks
from ncclscope.tui.messages import JumpToLine
from ncclscope.tui.view import CaseView

# Findings that compare hosts (or ranks) of one job with each other, or say which network each one ended on:
# mixed versions, socket fallback, RDMA unavailable, plugins that differ, GPUDirect RDMA off or uneven, settings
# that differ.
CONSISTENCY_CODES = ("VER", "NET001", "NET002", "NET007", "GDR", "ENV002")
UNKNOWN = "-"
NO_LOG = (
    "No hosts or ranks in the inputs: add the job's NCCL log, written with NCCL_DEBUG=INFO "
    "(NCCL_DEBUG_SUBSYS=INIT,NET shows versions, networks and plugins)."
)
Row = TypeVar("Row")


def _joined(values: Iterable[object]) -> str:
    return ", ".join(str(v) for v in values)


@dataclass(frozen=True)
class HostFacts:
    """One host with the processes and NICs that belong to it."""

    host: Host
    processes: list[Process]
    nics: list[str]


# Hosts table: column label -> its text for a host. COMPARED columns are those where hosts of one job should agree.
HOST_COLUMNS: dict[str, Callable[[HostFacts], str]] = {
    "Host": lambda f: f.host.name or "(no name)",
    "Processes": lambda f: str(f.host.processes),
    "Ranks": lambda f: ranges_text(f.host.ranks),
    "GPUs": lambda f: ranges_text(d for p in f.processes for d in p.cuda_devs),
    "NCCL": lambda f: _joined(f.host.nccl_versions),
    "CUDA driver": lambda f: _joined(driver_text(v) for v in f.host.cuda_driver_versions),
    "Network": lambda f: _joined(f.host.networks),
    "Net plugin": lambda f: _joined(f.host.net_plugins),
    "Bootstrap": lambda f: _joined(f.host.bootstrap_interfaces),
    "GDR": lambda f: "" if f.host.gdr == "unknown" else f.host.gdr,
    "NICs": lambda f: _joined(f.nics),
}
COMPARED = ("NCCL", "CUDA driver", "Network", "Net plugin", "Bootstrap", "GDR")


@dataclass(frozen=True)
class RankRow:
    """One rank of the ranks table, with the process and host it ran in."""

    rank: str
    host: str
    pid: int | None
    cuda_dev: str
    nvml_dev: str = ""
    bus_id: str = ""
    process: Process | None = None
    gdr: str = ""
    evidence: Evidence | None = None


# Ranks table: column label -> its text for a rank; labels shared with HOST_COLUMNS are highlighted alike.
RANK_COLUMNS: dict[str, Callable[[RankRow], str]] = {
    "Host": lambda r: r.host or "(no name)",
    "PID": lambda r: "" if r.pid is None else str(r.pid),
    "Rank": lambda r: r.rank,
    "cudaDev": lambda r: r.cuda_dev,
    "nvmlDev": lambda r: r.nvml_dev,
    "busId": lambda r: r.bus_id,
    "NCCL": lambda r: (r.process and r.process.nccl_version) or "",
    "Network": lambda r: (r.process and r.process.network) or "",
    "Net plugin": lambda r: (r.process and r.process.net_plugin) or "",
    "GDR": lambda r: r.gdr,
}


def odd_ones_out(values: dict[str, str]) -> set[str]:
    """Keys whose value differs from the majority; every key with a value when no value has a majority.

    Empty values (not printed) are never odd: NCCL prints some facts on one rank only.
    """
    known = {key: value for key, value in values.items() if value}
    counts = Counter(known.values())
    if len(counts) < 2:
        return set()
    top = max(counts.values())
    leaders = [value for value, n in counts.items() if n == top]
    if len(leaders) > 1:
        return set(known)
    return {key for key, value in known.items() if value != leaders[0]}


def host_facts(case: Case) -> list[HostFacts]:
    return [
        HostFacts(
            host,
            [p for p in case.processes if p.host == host.name],
            list(dict.fromkeys(d.name for d in case.net_devices if d.host == host.name)),
        )
        for host in case.hosts
    ]


def _text(value: object) -> str:
    return "" if value is None else str(value)


def _first_evidence(process: Process | None) -> Evidence | None:
    return next(iter(process.evidence.values()), None) if process else None


def _comm_row(rank: CommRank, processes: dict[tuple[str, int | None], Process], gdr: dict[str, str]) -> RankRow:
    host = rank.host or ""
    process = processes.get((host, rank.pid))
    return RankRow(
        rank=str(rank.rank),
        host=host,
        pid=rank.pid,
        cuda_dev=_text(rank.cuda_dev),
        nvml_dev=_text(rank.nvml_dev),
        bus_id=_text(rank.bus_id),
        process=process,
        gdr=gdr.get(host, ""),
        evidence=rank.evidence or _first_evidence(process),
    )


def _process_row(process: Process, gdr: dict[str, str]) -> RankRow:
    return RankRow(
        rank=ranges_text(process.ranks),
        host=process.host,
        pid=process.pid,
        cuda_dev=ranges_text(process.cuda_devs),
        process=process,
        gdr=gdr.get(process.host, ""),
        evidence=_first_evidence(process),
    )


def rank_rows(case: Case) -> tuple[str, list[RankRow]]:
    """The title and rows of the ranks table: the largest communicator's ranks, else one row per process."""
    gdr = {h.name: "" if h.gdr == "unknown" else h.gdr for h in case.hosts}
    comms = [c for c in case.communicators if c.ranks]
    if not comms:
        rows = [_process_row(p, gdr) for p in case.processes if p.host or p.pid is not None]
        return "Processes (no communicator init lines in the inputs)", rows
    processes = {(p.host, p.pid): p for p in case.processes}
    comm = max(comms, key=lambda c: len(c.ranks))  # the first of the largest: usually the world communicator
    others = f" (the largest of {len(comms)} communicators)" if len(comms) > 1 else ""
    title = f"Ranks of communicator {comm.comm_id or comm.id}{others}"
    return title, [_comm_row(r, processes, gdr) for r in sorted(comm.ranks, key=lambda r: r.rank)]


def _natural_key(cell: object) -> tuple[tuple[int, int | str], ...]:
    """Sort "10" after "9" and "gpu-2" before "gpu-10"."""
    return tuple((0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"(\d+)", str(cell)) if part)


class HostsPane(VerticalScroll):
    """Hosts and ranks tables with the hosts that disagree highlighted, and the consistency findings."""

    DEFAULT_CSS = """
    HostsPane { padding: 0 1; }
    HostsPane .title { text-style: bold; color: $primary; margin-top: 1; }
    HostsPane #hosts-message { color: $text-muted; margin-top: 1; }
    HostsPane DataTable { height: auto; max-height: 16; }
    """

    def __init__(self, **kwargs: str) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._view: CaseView | None = None
        self._rank_evidence: dict[str, Evidence] = {}
        self._sorted_by: dict[tuple[str | None, str], bool] = {}
        self.odd_cells: set[tuple[str, str]] = set()
        """(host, column label) of every highlighted value: the odd ones out."""

    def compose(self) -> ComposeResult:
        yield Static("Reading inputs...", id="hosts-message")
        yield Static("Hosts", classes="title section")
        yield DataTable(id="hosts-table", zebra_stripes=True, cursor_type="row", classes="section")
        yield Static("Ranks", id="ranks-title", classes="title section")
        yield DataTable(id="ranks-table", zebra_stripes=True, cursor_type="row", classes="section")
        yield Static("Consistency findings (Enter: show the evidence line)", classes="title section")
        yield FindingLinks(id="host-findings", classes="section")

    def on_mount(self) -> None:
        self._show_sections(False)
        # Highlights take the theme's error colour: paint them again when the theme changes.
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self._repaint())

    def show_case(self, view: CaseView) -> None:
        self._view = view
        self._repaint()

    def _repaint(self) -> None:
        view = self._view
        if view is None:
            return
        facts = host_facts(view.case)
        title, rows = rank_rows(view.case)
        has_content = bool(facts or rows)
        self._show_sections(has_content)
        self.query_one("#hosts-message", Static).update(NO_LOG)
        self.odd_cells = {
            (name, label)
            for label in COMPARED
            for name in odd_ones_out({f.host.name: HOST_COLUMNS[label](f) for f in facts})
        }
        self._fill(self.query_one("#hosts-table", DataTable), HOST_COLUMNS, facts, lambda f: f.host.name)
        self.query_one("#ranks-title", Static).update(title)
        self._fill(self.query_one("#ranks-table", DataTable), RANK_COLUMNS, rows, lambda r: r.host)
        self._rank_evidence = {str(index): row.evidence for index, row in enumerate(rows) if row.evidence}
        self.query_one(FindingLinks).show_findings(
            view.findings_with_prefix(*CONSISTENCY_CODES),
            "No consistency findings: the hosts agree on versions, network, plugin and GPUDirect RDMA.",
        )

    def _show_sections(self, shown: bool) -> None:
        """Show the tables, or only the message (the placeholder, or why there is nothing to show)."""
        for widget in self.query(".section"):
            widget.display = shown
        self.query_one("#hosts-message").display = not shown

    def _fill(
        self, table: DataTable, columns: dict[str, Callable[[Row], str]], rows: list[Row], host_of: Callable[[Row], str]
    ) -> None:
        """Replace the table's content (row keys: the row's index); values of odd hosts are highlighted."""
        table.clear(columns=True)
        table.add_columns(*columns)
        highlight, muted = self._highlight_style(), Style(dim=True)
        for index, row in enumerate(rows):
            cells = []
            for label, text in columns.items():
                value = text(row)
                odd = (host_of(row), label) in self.odd_cells and bool(value)
                cells.append(Text(value or UNKNOWN, style=highlight if odd else (muted if not value else "")))
            table.add_row(*cells, key=str(index))

    def _highlight_style(self) -> Style:
        background = Color.parse(self.app.current_theme.error or "red")
        return Style(bold=True, color=background.get_contrast_text(1.0).rich_color, bgcolor=background.rich_color)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        evidence = self._rank_evidence.get(str(event.row_key.value)) if event.data_table.id == "ranks-table" else None
        if evidence:
            event.stop()
            self.post_message(JumpToLine(evidence.source, evidence.line))

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        """Sort by the clicked column; a second click reverses the order."""
        key = (event.data_table.id, str(event.column_key.value))
        reverse = self._sorted_by.get(key) is False
        self._sorted_by = {key: reverse}
        event.data_table.sort(event.column_key, key=_natural_key, reverse=reverse)
