"""The Progress screen of the TUI: how far each rank of each group got (Case.progress), with the ranks the
HANG findings name marked: the picture behind "which rank is stuck".

One group at a time: the list at the top names each group with the evidence it comes from (Flight Recorder
dumps, COLL lines, PyTorch watchdog lines, an ncclras report) and how many ranks are behind; the table below
has one row per rank: the furthest sequence number it entered (NCCL's opCount in hex; where the opCount stayed 0,
the number of COLL lines it printed), what it called there, a bar relative to the furthest rank of the group,
and the mark. Enter on a row opens its evidence line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, OptionList, Static
from textual.widgets.option_list import Option

from ncclscope.case.hang_progress import VIA, furthest, group_name, position, position_number
from ncclscope.common.words import number_ranges
from ncclscope.model import Finding, GroupProgress, RankProgress
from ncclscope.tui.messages import JumpToLine
from ncclscope.tui.view import CaseView

BAR_CELLS = 16
NO_PROGRESS = (
    "No collective progress in the inputs. Add what says how far each rank got: PyTorch Flight Recorder dumps "
    "(TORCH_NCCL_DUMP_ON_TIMEOUT=1 with TORCH_FR_DUMP_TEMP_FILE, one file per rank), the output of `ncclras`, or "
    "an NCCL log written with NCCL_DEBUG_SUBSYS=COLL (with the INIT lines, which map communicators to ranks)."
)
COLUMNS = ("Rank", "Host", "PID", "Reached", "Completed", "Last call", "State", "Progress", "Mark")
# marks, most serious first: what a HANG finding says of the rank, else what the numbers alone say
MARK_STYLE = {
    "stuck": Style(bold=True, color="red"),
    "diverged": Style(bold=True, color="red"),
    "behind": Style(bold=True, color="yellow"),
    "no data": Style(color="yellow"),
    "waiting": Style(dim=True),
    "furthest": Style(dim=True),
}


UNITS = {"coll_lines": "opCount (hex)", "ras": "operation count"}
CALLS_UNIT = "number of COLL lines (the opCount stayed 0)"


@dataclass(frozen=True)
class RankRow:
    """One row of the table: a rank that reported, or a member that reported nothing."""

    progress: RankProgress
    mark: str
    why: str  # the finding code or the reason for the mark


def group_of(progress: list[GroupProgress], finding: Finding) -> int | None:
    """The index of the group a HANG finding speaks of: its name and its kind of evidence are in the message."""
    for index, group in enumerate(progress):
        named = re.search(re.escape(group_name(group)) + r"(?![\w.-]|:\S)", finding.message)
        if named and f"(from {VIA[group.via]})" in finding.message:
            return index
    return None


Scales = dict[str, tuple[int, int]]  # collective type ('' for all) -> (slowest, furthest) position


def scales_of(group: GroupProgress, ras_counts: dict[str, dict[int, int]] | None = None) -> Scales:
    """The slowest and furthest position of the group; per collective type for RAS counts, taken from the
    report's count table when given (RAS lists only the ranks off the majority, not the majority)."""
    scales: Scales = {}
    for key, counts in (ras_counts or {}).items():
        if counts:
            scales[key] = (min(counts), max(counts))
    for rank in group.ranks:
        if rank.entered is not None:
            key = (rank.operation or "") if group.counts_by_collective else ""
            low, top = scales.get(key, (rank.entered, rank.entered))
            scales[key] = (min(low, rank.entered), max(top, rank.entered))
    return scales


def rank_rows(group: GroupProgress, findings: list[Finding], scales: Scales) -> list[RankRow]:
    """Every rank of the group with its mark: the ranks a HANG finding names first (HANG001: stuck, HANG002:
    diverged, HANG003: behind), then what the numbers say (behind the furthest rank, or at it)."""
    named: dict[int, str] = {}
    for finding in sorted(findings, key=lambda f: f.code):  # HANG001 before HANG003
        for number in finding.ranks:
            named.setdefault(number, finding.code)
    marks = {"HANG001": "stuck", "HANG002": "diverged", "HANG003": "behind"}
    silent = {id(m) for m in group.missing}
    rows = []
    for rank in sorted([*group.ranks, *group.missing], key=lambda r: r.rank):
        code = named.get(rank.rank)
        scale = scales.get((rank.operation or "") if group.counts_by_collective else "")
        if code is not None:
            rows.append(RankRow(rank, marks[code], code))
        elif id(rank) in silent or rank.entered is None or scale is None:
            rows.append(RankRow(rank, "no data", rank.status or "reported nothing"))
        elif rank.entered < scale[1]:
            rows.append(RankRow(rank, "behind", f"furthest: {position(group, scale[1])}"))
        elif rank.state in ("completed", None):
            rows.append(RankRow(rank, "furthest", ""))
        else:
            rows.append(RankRow(rank, "waiting", ""))  # at the furthest call, not through it (State says how)
    return rows


def bar(entered: int | None, scale: tuple[int, int] | None) -> str:
    """A bar of BAR_CELLS cells (in eighths): where the rank stands between the slowest rank of the group (one
    step) and the furthest (full), so that one call behind shows even at sequence number 10,000."""
    if entered is None or scale is None:
        return ""
    low, top = scale
    eighths = round(BAR_CELLS * 8 * (entered - low + 1) / (top - low + 1))
    full, part = divmod(eighths, 8)
    return ("█" * full + ("▏▎▍▌▋▊▉"[part - 1] if part else "")).ljust(BAR_CELLS, "·")


def group_label(group: GroupProgress) -> str:
    """One line for the group list: name, evidence, size, furthest position and how many are behind."""
    top, _, behind = furthest(group)
    members = len(group.ranks) + len(group.missing)
    size = f" of {group.size}" if group.size and group.size != members else ""
    parts = [group_name(group), f"from {VIA[group.via]}", f"{members}{size} ranks"]
    if group.counts_by_collective:
        parts.append("operation counts per collective")
    elif top is not None:
        parts.append(f"furthest {position(group, top)}")
        if behind:
            parts.append(f"{len(behind)} behind: ranks {number_ranges(r.rank for r in behind)}")
    if group.missing:
        parts.append(f"{len(group.missing)} without data")
    return " · ".join(parts)


class ProgressPane(Vertical):
    """Collective progress per rank of each group; the ranks HANG findings name are marked."""

    DEFAULT_CSS = """
    ProgressPane { height: 1fr; padding: 0 1; }
    ProgressPane #progress-message { height: auto; color: $text-muted; margin-top: 1; }
    ProgressPane #progress-groups { height: auto; max-height: 8; }
    ProgressPane #progress-title { height: auto; text-style: bold; color: $primary; margin-top: 1; }
    ProgressPane #progress-table { height: 1fr; }
    ProgressPane #progress-why { height: auto; max-height: 6; color: $text-muted; }
    """

    def __init__(self, **kwargs: str) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._view: CaseView | None = None
        self._groups: list[GroupProgress] = []
        self._rows: list[RankRow] = []
        self.selected_group: int | None = None

    def compose(self) -> ComposeResult:
        yield Static("Reading inputs...", id="progress-message")
        yield OptionList(id="progress-groups", classes="section")
        yield Static("", id="progress-title", classes="section")
        yield DataTable(id="progress-table", zebra_stripes=True, cursor_type="row", classes="section")
        yield Static("", id="progress-why", classes="section")

    def on_mount(self) -> None:
        self._show_sections(False)

    def _show_sections(self, shown: bool) -> None:
        for widget in self.query(".section"):
            widget.display = shown
        self.query_one("#progress-message").display = not shown

    def show_case(self, view: CaseView) -> None:
        """Show `view`'s groups; the group shown before stays selected when it is still there (a followed input)."""
        before = self._groups[self.selected_group].group if self.selected_group is not None else None
        self._view = view
        self._groups = list(view.case.progress)
        self.query_one("#progress-message", Static).update(NO_PROGRESS)
        self._show_sections(bool(self._groups))
        groups = self.query_one("#progress-groups", OptionList)
        groups.clear_options()
        groups.add_options(Option(Text(group_label(g)), id=str(i)) for i, g in enumerate(self._groups))
        if not self._groups:
            self.selected_group = None
            return
        again = next((i for i, g in enumerate(self._groups) if g.group == before), None)
        stuck = next((i for i, g in enumerate(self._groups) if self._findings_of(g)), 0)
        self.select_group(again if again is not None else stuck)

    def select_group(self, index: int) -> None:
        self.selected_group = index
        groups = self.query_one("#progress-groups", OptionList)
        if groups.highlighted != index:
            groups.highlighted = index
        self._fill(self._groups[index])

    def select_for(self, finding: Finding) -> bool:
        """Select the group a HANG finding speaks of; False when no group matches it."""
        index = group_of(self._groups, finding)
        if index is None:
            return False
        self.select_group(index)
        self.query_one("#progress-table", DataTable).focus()
        return True

    def _findings_of(self, group: GroupProgress) -> list[Finding]:
        if self._view is None:
            return []
        hangs = self._view.findings_with_prefix("HANG")
        return [f for f in hangs if group_of(self._groups, f) == self._groups.index(group)]

    def _fill(self, group: GroupProgress) -> None:
        findings = self._findings_of(group)
        counts = self._ras_counts(group)
        scales = scales_of(group, counts)
        self._rows = rank_rows(group, findings, scales)
        table = self.query_one("#progress-table", DataTable)
        table.clear(columns=True)
        table.add_columns(*COLUMNS)
        for index, row in enumerate(self._rows):
            rank = row.progress
            scale = scales.get((rank.operation or "") if group.counts_by_collective else "")
            style = MARK_STYLE.get(row.mark, Style())
            completed = "" if rank.completed is None else str(rank.completed)
            cells = [
                Text(str(rank.rank), style=style if row.mark in ("stuck", "diverged") else ""),
                rank.host or "",
                "" if rank.pid is None else str(rank.pid),
                "" if rank.entered is None else position_number(group, rank.entered),
                completed,
                rank.operation or "",
                rank.state or rank.status or "",
                Text(bar(rank.entered, scale), style=style),
                Text(f"{row.mark} ({row.why})" if row.why else row.mark, style=style),
            ]
            table.add_row(*cells, key=str(index))
        unit = CALLS_UNIT if group.counts_calls else UNITS.get(group.via, "sequence number")
        title = f"{group_name(group)}: rank by rank, Reached is the furthest {unit} (Enter: the rank's evidence line)"
        if counts:
            spread = "; ".join(
                f"{op or 'all'}: " + ", ".join(f"{n} at {c}" for c, n in sorted(by_count.items(), reverse=True))
                for op, by_count in counts.items()
            )
            title += f"\nRanks per operation count: {spread} (ncclras lists only the ranks off the majority)"
        self.query_one("#progress-title", Static).update(Text(title))
        self.query_one("#progress-why", Static).update(
            "\n".join(f"{f.code}: {f.message}" for f in findings) or "No HANG finding names a rank of this group."
        )

    def _ras_counts(self, group: GroupProgress) -> dict[str, dict[int, int]]:
        if group.via != "ras" or self._view is None:
            return {}
        for report in self._view.case.ras_reports:
            for comm in report.communicators:
                if (comm.hash or comm.id) == group.group:
                    return comm.op_counts
        return {}

    @property
    def marks(self) -> dict[int, str]:
        """rank -> its mark in the shown group (for tests and the palette)."""
        return {row.progress.rank: row.mark for row in self._rows}

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if event.option_list.id == "progress-groups":
            event.stop()
            if event.option_index != self.selected_group:
                self.select_group(event.option_index)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        row = self._rows[int(str(event.row_key.value))]
        evidence = row.progress.evidence
        if evidence is None:
            self.notify(f"rank {row.progress.rank}: no evidence line", title="Progress")
        elif evidence.line > 0:
            self.post_message(JumpToLine(evidence.source, evidence.line))
        else:  # a record of a dump (a pickle or JSON file): nothing to open in the raw log
            self.notify(f"{evidence.source}: {evidence.text}", title=f"rank {row.progress.rank}")
