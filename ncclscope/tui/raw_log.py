"""The Raw log screen of the TUI: every line of every input, filtered, searched, read on demand."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.cache import LRUCache
from textual.containers import Horizontal, Vertical
from textual.events import Click
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Input, Select, Static
from textual.worker import get_current_worker

from ncclscope.parse.normalize import MARKER_RE, find_records
from ncclscope.tui.lines import FIRST_CHUNK_BYTES, GrowingArray, LineIndex, match_text, shown_text
from ncclscope.tui.view import CaseView

SCAN_LINES = 20_000  # lines a filter or search worker reads between two reports to the screen

# Level filter: a line matches when one of its NCCL records has the level (ABORT counts as WARN,
# CALL as TRACE); "other" is every line that holds no NCCL record.
LEVELS: dict[str, frozenset[str]] = {
    "INFO": frozenset({"INFO"}),
    "WARN": frozenset({"WARN", "ABORT"}),
    "TRACE": frozenset({"TRACE", "CALL"}),
    "other": frozenset(),
}

# Family filter: what part of NCCL a record's message comes from, named like NCCL_DEBUG_SUBSYS's
# subsystems. The parser's own per-record families need the Lark grammar per line shape, too slow for
# a per-line filter in the UI; these keywords are the shapes of those families, tried in order.
FAMILIES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern))
    for name, pattern in (
        ("connections", r"\bvia (?:P2P|SHM|NET|COLLNET)\b|^Connected |\bConnected (?:all|NVLS|CollNet|collnet)\b"),
        ("env", r"\bset (?:by|from) environment\b|^NCCL_\w+ set to\b"),
        (
            "init",
            r"\bInit (?:START|COMPLETE)\b|^NCCL (?:git )?version|^cudaDriverVersion|^Bootstrap|^comm 0x"
            r"|^Setting affinity|Affinity for GPU|^Using \d+ threads|^MNNVL"
            r"|\b(?:Destroy|Abort|Revoke|CommRevokeAsync) (?:START|COMPLETE)\b"
            r"|^CC \w|^Init timings|^ncclComm\w*\(",
        ),
        ("net", r"^NET/|^Using network|GPU Direct RDMA|^GDRCOPY|^DMA-BUF|Plugin|plugin|^RAS "),
        (
            "tuning",
            r"threadThresholds|Latency|AlgBw|\bAlgo\b|Bytes ->|[nN][cC]hannels|coll channels|maxP2pPeers"
            r"|P2P Chunksize|Tuning|tuning|\|",
        ),
        (
            "graph",
            r"^Pattern |^Channel \d+(?:/\d+)? :|^Ring \d|^Tree \d|^Trees|^\s*\d+ : |^=+ System"
            r"|^\s*(?:CPU|GPU|NIC|NET|NVS|PCI)/|^\s*\+ |NVLS|^=+$|Could not enable P2P",
        ),
        ("coll", r"\bopCount\b|^nccl\w+\(|^rank \d+ nranks \d+ size \d+"),
        ("errors", r"\s-> \d+\b|[Ee]rror|[Ff]ail|Connection (?:closed|refused)|returned Co|[Tt]imeout"),
    )
)
OTHER_FAMILY = "other"


def family_of(message: str) -> str:
    """The family of one NCCL record's message (the text after `NCCL INFO`)."""
    return next((name for name, pattern in FAMILIES if pattern.search(message)), OTHER_FAMILY)


@dataclass(frozen=True, slots=True)
class Record:
    """One NCCL record found on a line: its level, origin and message."""

    level: str
    host: str | None
    pid: int | None
    message: str


def records_of(text: str) -> list[Record]:
    """The NCCL records of a cleaned line (none for a line that is not NCCL's)."""
    records = []
    for start, end in find_records(text):
        record = text[start:end]
        marker = MARKER_RE.search(record)
        if marker is None:
            continue
        host, pid = _origin(record[: marker.start()].split())
        records.append(Record(marker.group()[5:], host, pid, record[marker.end() :].strip()))
    return records


def _origin(words: list[str]) -> tuple[str | None, int | None]:
    """(host, pid) from the words before `NCCL LEVEL`: `host:pid:tid`, or `host [dev]` without pid."""
    for word in words:
        host, _, rest = word.partition(":")
        pid, _, tid = rest.partition(":")
        if pid.isdigit() and tid.isdigit():
            return host, int(pid)
    if len(words) >= 2 and words[1].startswith("[") and not words[0].startswith("["):
        return words[0], None
    return None, None


@dataclass(frozen=True)
class LineFilter:
    """Which lines the raw log shows; the conditions that are set must all hold."""

    host: str | None = None
    rank: int | None = None
    origins: frozenset[tuple[str, int | None]] = frozenset()  # the (host, pid) of the rank's processes
    level: str | None = None
    family: str | None = None
    pattern: re.Pattern[str] | None = None

    @property
    def active(self) -> bool:
        return any(v is not None for v in (self.host, self.rank, self.level, self.family, self.pattern))

    def matches(self, raw: bytes) -> bool:
        text = None
        if self.pattern is not None:
            text = match_text(raw)
            if not self.pattern.search(text):
                return False
        if self.host is None and self.rank is None and self.level is None and self.family is None:
            return True
        records = records_of(text if text is not None else match_text(raw)) if b"NCCL " in raw else []
        if self.level == "other":
            return not records and self.host is None and self.rank is None and self.family is None
        return any(self._keeps(record) for record in records)

    def _keeps(self, record: Record) -> bool:
        if self.level is not None and record.level not in LEVELS[self.level]:
            return False
        if self.host is not None and record.host != self.host:
            return False
        if self.rank is not None and (record.host, record.pid) not in self.origins:
            if (record.host, None) not in self.origins:
                return False
        return self.family is None or family_of(record.message) == self.family


class LogLines(ScrollView, can_focus=True):
    """The lines of one input, drawn on demand from its line index (only visible lines are read)."""

    COMPONENT_CLASSES = {
        "log-lines--gutter",
        "log-lines--cursor",
        "log-lines--unrecognized",
        "log-lines--info",
        "log-lines--warn",
        "log-lines--abort",
        "log-lines--match",
    }
    DEFAULT_CSS = """
    LogLines { height: 1fr; background: $surface; }
    LogLines > .log-lines--gutter { color: $text-muted; }
    LogLines > .log-lines--cursor { background: $primary 40%; }
    LogLines:focus > .log-lines--cursor { background: $primary 60%; }
    LogLines > .log-lines--unrecognized { color: $error; background: $error 15%; text-style: bold; }
    LogLines > .log-lines--info { color: $primary; }
    LogLines > .log-lines--warn { color: $warning; text-style: bold; }
    LogLines > .log-lines--abort { color: $error; text-style: bold; }
    LogLines > .log-lines--match { background: $warning 50%; }
    """
    BINDINGS = [
        Binding("up", "move(-1)", "Up", show=False),
        Binding("down", "move(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "edge(0)", "First line", show=False),
        Binding("end", "edge(1)", "Last line", show=False),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.index: LineIndex | None = None
        self.rows: GrowingArray | None = None  # the line numbers shown when filtered; None: every line
        self.cursor = 0  # a row
        self.anchor_line: int | None = None  # the line the cursor stays on while filtered rows arrive
        self.marked: frozenset[int] = frozenset()
        self.needle = ""  # search text, highlighted
        self.tail = False  # the cursor is on the last row and stays there as lines arrive (End, like tail -f)
        self._texts: LRUCache[int, Text] = LRUCache(2048)
        self._width = 0

    # ------------------------------------------------------------------------------- rows and lines
    @property
    def row_count(self) -> int:
        if self.index is None:
            return 0
        return len(self.rows) if self.rows is not None else self.index.line_count

    def line_at(self, row: int) -> int:
        return int(self.rows.values[row]) if self.rows is not None else row + 1

    def row_of(self, line: int) -> int | None:
        """The row showing `line`, None when it is filtered out or not indexed yet."""
        if self.rows is None:
            return line - 1 if 1 <= line <= self.row_count else None
        values = self.rows.values
        row = int(np.searchsorted(values, line))
        return row if row < len(values) and values[row] == line else None

    def first_row_from(self, line: int) -> int:
        """The row of `line`, or of the first shown line after it."""
        if self.rows is None:
            return max(0, min(line - 1, self.row_count - 1))
        return min(int(np.searchsorted(self.rows.values, line)), max(0, len(self.rows) - 1))

    @property
    def current_line(self) -> int | None:
        return self.line_at(self.cursor) if self.cursor < self.row_count else None

    def show(self, index: LineIndex | None, rows: GrowingArray | None, line: int | None) -> None:
        """Show `index` (all lines or `rows`), with the cursor on `line` or the first line after it."""
        if index is not self.index:
            self._texts.clear()
            self._width = 0
        # only filtered rows move under the cursor as they arrive; indexed lines never do
        self.index, self.rows, self.anchor_line = index, rows, line if rows is not None else None
        self.cursor = 0
        self.rows_changed()
        if line is not None:
            self.move_to(self.first_row_from(line), center=True)

    def rows_changed(self) -> None:
        """More lines were indexed or matched a filter: grow the scroll area, keep the cursor's line."""
        if self.tail and self.row_count:
            self.cursor = self.row_count - 1
            self._scroll_to_cursor(center=False)
        elif self.anchor_line is not None and self.row_count:
            self.cursor = self.first_row_from(self.anchor_line)
            self._scroll_to_cursor(center=True)
        self._resize()
        self.refresh()

    def _resize(self) -> None:
        self.virtual_size = Size(self._gutter_width() + self._width, self.row_count)

    def set_needle(self, needle: str) -> None:
        self.needle = needle
        self._texts.clear()
        self.refresh()

    # --------------------------------------------------------------------------------- the cursor
    def move_to(self, row: int, center: bool = False) -> None:
        self.cursor = max(0, min(row, self.row_count - 1))
        self._scroll_to_cursor(center)
        self.refresh()

    def _scroll_to_cursor(self, center: bool) -> None:
        height = max(1, self.scrollable_content_region.height)
        top = self.scroll_offset.y
        if center:
            self.scroll_to(y=max(0, self.cursor - height // 2), animate=False, immediate=True)
        elif self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False, immediate=True)
        elif self.cursor >= top + height:
            self.scroll_to(y=self.cursor - height + 1, animate=False, immediate=True)

    def _user_move(self, row: int) -> None:
        self.anchor_line = None
        self.move_to(row)
        self.tail = self.row_count > 0 and self.cursor == self.row_count - 1

    def action_move(self, step: int) -> None:
        self._user_move(self.cursor + step)

    def action_page(self, direction: int) -> None:
        self._user_move(self.cursor + direction * max(1, self.scrollable_content_region.height - 1))

    def action_edge(self, end: int) -> None:
        self._user_move(self.row_count - 1 if end else 0)

    def on_click(self, event: Click) -> None:
        offset = event.get_content_offset(self)
        if offset is not None:
            self._user_move(self.scroll_offset.y + offset.y)

    # ------------------------------------------------------------------------------------ drawing
    def _gutter_width(self) -> int:
        return len(str(max(1, self.index.line_count if self.index else 1))) + 3

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        row = scroll_y + y
        width = self.scrollable_content_region.width
        base = self.rich_style
        if self.index is None or row >= self.row_count:
            return Strip.blank(width, base)
        number = self.line_at(row)
        gutter_width = self._gutter_width()
        marked = number in self.marked
        gutter = Text(
            f"{number:>{gutter_width - 3}}{'!' if marked else ' '}│ ",
            self.get_component_rich_style("log-lines--unrecognized" if marked else "log-lines--gutter"),
        )
        text = self._text(number)
        if text.cell_len > self._width:
            self._width = text.cell_len
            self.call_after_refresh(self._resize)
        console = self.app.console
        body = Strip(text.render(console)).crop(scroll_x, scroll_x + max(0, width - gutter_width))
        strip = Strip.join([Strip(gutter.render(console)), body]).apply_style(base)
        strip = strip.extend_cell_length(width, base)
        if row == self.cursor:
            cursor = self.get_component_rich_style("log-lines--cursor")
            strip = Strip(Segment.apply_style(strip, post_style=Style(bgcolor=cursor.bgcolor)), strip.cell_length)
        return strip

    def _text(self, number: int) -> Text:
        cached = self._texts.get(number)
        if cached is not None:
            return cached
        assert self.index is not None
        text = Text(shown_text(self.index.line(number, limit=4096)), no_wrap=True, end="")
        if number in self.marked:
            text.stylize(self.get_component_rich_style("log-lines--unrecognized"))
        for marker in MARKER_RE.finditer(text.plain):
            level = marker.group()[5:]
            if level in ("WARN", "ABORT"):
                style = "log-lines--warn" if level == "WARN" else "log-lines--abort"
                text.stylize(self.get_component_rich_style(style), marker.start())
            else:
                text.stylize(self.get_component_rich_style("log-lines--info"), marker.start(), marker.end())
        if self.needle:
            match = self.get_component_rich_style("log-lines--match")
            for found in re.finditer(re.escape(self.needle), text.plain, re.IGNORECASE):
                text.stylize(match, found.start(), found.end())
        self._texts[number] = text
        return text


class RawLogPane(Vertical):
    """The Raw log screen: every line of one input at a time, with filters, search and marks.

    Public API (the app relies on it):
    - `RawLogPane(id=...)`; before `open_files` it says "Reading inputs...".
    - `open_files(files)`: source name (Evidence.source) -> plain file path. Each file gets a line-offset
      index (`ncclscope.tui.lines.LineIndex`); the first megabyte of the first file is indexed at once so
      its first lines show immediately, the rest in a thread worker with the progress in the status line.
      A file that cannot be read gets a message instead.
    - `show_case(view)`: enables the host and rank filters and marks the unrecognised lines
      (`Source.unrecognized`; the parser keeps the first 50, so the status line says how many of
      `Source.unrecognized_count` are marked). Opens `view.files` when `open_files` was not given them.
    - `goto(source, line)`: shows that source, clears the filters if they hide the line, puts the cursor
      (highlighted) on the 1-based `line` and scrolls it into view; a line not indexed yet is shown as
      soon as it is.
    - `current`: (source, line) under the cursor, None when nothing is shown.
    - `focus_search()`: opens the search field (the app binds `/` to it).

    One source is shown at a time; a selector above the lines picks it when there are several.
    Filters combine (AND): host and rank (from each record's `host:pid:tid` prefix and the Case's
    processes; lines without an NCCL record match neither), level (INFO, WARN with ABORT, TRACE with
    CALL, or "other": lines without an NCCL record), family (NCCL's subsystem a record comes from:
    connections, env, init, net, tuning, graph, coll, errors or other, by the keyword table `FAMILIES`)
    and a regular expression (Enter applies it) over the line's cleaned text. Filtering runs in a worker
    and shows matches as they are found; clearing the filters returns to every line, cursor on the same
    line. Search (`/`, Enter, then `n`/`N` or F3/shift+F3) is case-insensitive plain text over every line
    and wraps around with a notice. Unrecognised lines carry `!` in the gutter; `u` jumps to the next.
    Lines are decoded as UTF-8 with replacement, cleaned like Evidence.text (ANSI escapes and CR
    removed), other control characters escaped, and cut with an ellipsis past 2000 characters.
    """

    DEFAULT_CSS = """
    RawLogPane { height: 1fr; }
    RawLogPane #raw-filters { height: auto; }
    RawLogPane #raw-filters Select { width: 1fr; min-width: 12; }
    RawLogPane #raw-filters #raw-source { width: 2fr; }
    RawLogPane #raw-regex { width: 2fr; }
    RawLogPane Input.-invalid { border: tall $error; }
    RawLogPane #raw-status { height: 1; padding: 0 1; background: $panel; color: $text-muted; }
    RawLogPane #raw-search { display: none; }
    RawLogPane #raw-search.-open { display: block; }
    """
    BINDINGS = [
        Binding("n,f3", "search(1)", "Next match"),
        Binding("N,shift+f3", "search(-1)", "Previous match"),
        Binding("u", "next_unrecognized", "Next unrecognised"),
        Binding("x", "clear_filters", "Clear filters"),
        Binding("escape", "close_search", "Close search", show=False),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._files: dict[str, str] = {}
        self._indexes: dict[str, LineIndex] = {}
        self._problems: dict[str, str] = {}
        self._source: str | None = None
        self._lines_by_source: dict[str, int] = {}
        self._marked: dict[str, frozenset[int]] = {}
        self._unrecognized: dict[str, int] = {}  # Source.unrecognized_count
        self._filter = LineFilter()
        self._rows: GrowingArray | None = None
        self._filter_scanned: int | None = None  # lines scanned by the running filter; None when done
        self._filter_upto = 0  # lines the filter has scanned when done (a followed input grows past it)
        self._origins: dict[int, frozenset[tuple[str, int | None]]] = {}
        self._needle = ""
        self._hits: GrowingArray | None = None
        self._search_scanned: int | None = None
        self._search_upto = 0
        self._search_tests: tuple[Callable[[bytes], bool], Callable[[list[bytes]], bool]] = (
            lambda raw: False,
            lambda block: False,
        )
        self._search_wanted = 0  # a direction to jump in as soon as the running search finds a hit
        self._pending_goto: tuple[str, int] | None = None
        self._message = "Reading inputs..."

    def compose(self) -> ComposeResult:
        with Horizontal(id="raw-filters"):
            yield Select[str]([], prompt="source", id="raw-source")
            yield Select[str]([(name, name) for name in LEVELS], prompt="level", id="raw-level")
            yield Select[str]([], prompt="host", id="raw-host", disabled=True)
            yield Select[int]([], prompt="rank", id="raw-rank", disabled=True)
            families = [name for name, _ in FAMILIES] + [OTHER_FAMILY]
            yield Select[str]([(name, name) for name in families], prompt="family", id="raw-family")
            yield Input(placeholder="regex filter, Enter applies", id="raw-regex")
        yield Static(self._message, id="raw-status", markup=False)
        yield LogLines(id="raw-lines")
        yield Input(placeholder="search: Enter finds the next match, Esc closes", id="raw-search")

    @property
    def _view_lines(self) -> LogLines:
        return self.query_one(LogLines)

    # --------------------------------------------------------------------------------- public API
    def open_files(self, files: dict[str, str]) -> None:
        """Index `files` (source name -> plain file path) and show the first one."""
        self._files = dict(files)
        self._indexes, self._problems = {}, {}
        for name, path in files.items():
            try:
                self._indexes[name] = LineIndex(path)
            except OSError as exc:
                self._problems[name] = f"{name}: cannot read ({exc.strerror or exc})"
        for problem in self._problems.values():
            self.notify(problem, title="Raw log", severity="error")
        selector = self.query_one("#raw-source", Select)
        selector.set_options([(name, name) for name in self._indexes])
        selector.display = len(self._indexes) > 1
        self._source = None
        self._lines_by_source = {}
        first = next(iter(self._indexes), None)
        if first is None:
            self._message = "; ".join(self._problems.values()) or "No inputs to show."
            self._view_lines.show(None, None, None)
        else:
            self._message = ""
            self._indexes[first].index_more(FIRST_CHUNK_BYTES)
            self._show_source(first)
        self._index_files(list(self._indexes.values()))
        self._update_status()

    def show_case(self, view: CaseView) -> None:
        """Enable the host and rank filters and mark the unrecognised lines of `view`'s sources."""
        if view.files != self._files:
            self.open_files(view.files)
        case = view.case
        self._marked = {s.path: frozenset(u.line for u in s.unrecognized) for s in case.sources}
        self._unrecognized = {s.path: s.unrecognized_count for s in case.sources}
        origins: dict[int, set[tuple[str, int | None]]] = {}
        for process in case.processes:
            for rank in process.ranks:
                origins.setdefault(rank, set()).add((process.host, process.pid))
        self._origins = {rank: frozenset(found) for rank, found in origins.items()}
        host = self.query_one("#raw-host", Select)
        host.set_options([(h.name or "(empty host name)", h.name) for h in case.hosts])
        host.disabled = not case.hosts
        ranks = self.query_one("#raw-rank", Select)
        ranks.set_options([(f"rank {r}", r) for r in sorted(self._origins)])
        ranks.disabled = not self._origins
        lines = self._view_lines
        lines.marked = self._marked.get(self._source or "", frozenset())
        lines.set_needle(lines.needle)  # redraw with the marks
        self._update_status()

    def grow(self, source: str, size: int) -> None:
        """`source` now has `size` bytes of whole lines (a followed input): index them; a cursor on the last
        line follows the new lines, and a filter or search that had finished goes on over them."""
        index = self._indexes.get(source)
        if index is None or not index.grow(size):
            return
        self._index_files([i for i in self._indexes.values() if not i.complete])

    def goto(self, source: str, line: int) -> None:
        """Show `line` (1-based) of `source` under the cursor."""
        if source not in self._indexes:
            self.notify(self._problems.get(source, f"{source}: not among the raw log's inputs"), severity="warning")
            return
        if source != self._source:
            self._show_source(source)
        index = self._indexes[source]
        if line > index.line_count:
            if not index.complete:
                self._pending_goto = (source, line)
                return
            self.notify(f"{source} has {index.line_count} lines; line {line} is past its end", severity="warning")
            return
        self._pending_goto = None
        lines = self._view_lines
        if lines.row_of(line) is None:
            self.notify(f"Filters cleared to show line {line}", title="Raw log")
            self._reset_filter_widgets()
            self._apply_filter(LineFilter())
        lines.anchor_line = None
        lines.move_to(lines.first_row_from(line), center=True)
        self._update_status()

    @property
    def current(self) -> tuple[str, int] | None:
        line = self._view_lines.current_line
        return (self._source, line) if self._source is not None and line is not None else None

    def focus_search(self) -> None:
        search = self.query_one("#raw-search", Input)
        search.add_class("-open")
        search.focus()

    # ---------------------------------------------------------------------------------- sources
    def _show_source(self, source: str) -> None:
        lines = self._view_lines
        if self._source is not None and lines.current_line is not None:
            self._lines_by_source[self._source] = lines.current_line
        self._source = source
        selector = self.query_one("#raw-source", Select)
        if selector.value != source:
            selector.value = source
        lines.marked = self._marked.get(source, frozenset())
        line = self._lines_by_source.get(source, 1)
        self._rows = None
        lines.show(self._indexes[source], None, line)
        if self._filter.active:
            self._start_filter(line)
        if self._needle:
            self._start_search(0)
        self._update_status()

    @work(thread=True, exclusive=True, group="raw-index")
    def _index_files(self, indexes: list[LineIndex]) -> None:
        worker = get_current_worker()
        for index in indexes:
            while not worker.is_cancelled:
                done = index.index_more()
                if worker.is_cancelled:
                    return
                self.app.call_from_thread(self._indexed, index)
                if done:
                    break

    def _indexed(self, index: LineIndex) -> None:
        if index is not self._view_lines.index:
            return
        if self._rows is None:
            self._view_lines.rows_changed()
        self._scan_new_lines(index)
        if self._pending_goto is not None and self._pending_goto[0] == self._source:
            source, line = self._pending_goto
            if line <= index.line_count or index.complete:
                self.goto(source, line)
        self._update_status()

    # ---------------------------------------------------------------------------------- filters
    @on(Select.Changed)
    def _select_changed(self, event: Select.Changed) -> None:
        event.stop()
        if event.select.id == "raw-source":
            if isinstance(event.value, str) and event.value != self._source and event.value in self._indexes:
                self._show_source(event.value)
            return
        self._apply_filter(self._filter_from_widgets(self._filter.pattern))

    @on(Input.Submitted, "#raw-regex")
    def _regex_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        try:
            pattern = re.compile(event.value) if event.value else None
        except re.error as exc:
            event.input.add_class("-invalid")
            self._message = f"Invalid regular expression {event.value!r}: {exc}"
            self.notify(self._message, title="Raw log", severity="error")
            self._update_status()
            return
        event.input.remove_class("-invalid")
        self._message = ""
        self._apply_filter(self._filter_from_widgets(pattern))
        self._view_lines.focus()

    def _filter_from_widgets(self, pattern: re.Pattern[str] | None) -> LineFilter:
        def value(selector: str) -> object:
            chosen = self.query_one(selector, Select).value
            return None if chosen is Select.NULL else chosen

        rank = value("#raw-rank")
        return LineFilter(
            host=value("#raw-host"),  # type: ignore[arg-type]
            rank=rank,  # type: ignore[arg-type]
            origins=self._origins.get(rank, frozenset()) if isinstance(rank, int) else frozenset(),
            level=value("#raw-level"),  # type: ignore[arg-type]
            family=value("#raw-family"),  # type: ignore[arg-type]
            pattern=pattern,
        )

    def _reset_filter_widgets(self) -> None:
        for selector in ("#raw-host", "#raw-rank", "#raw-level", "#raw-family"):
            self.query_one(selector, Select).clear()
        regex = self.query_one("#raw-regex", Input)
        regex.value = ""
        regex.remove_class("-invalid")

    def action_clear_filters(self) -> None:
        self._reset_filter_widgets()
        self._apply_filter(LineFilter())

    def _apply_filter(self, line_filter: LineFilter) -> None:
        if line_filter == self._filter:
            return
        self._filter = line_filter
        lines = self._view_lines
        line = lines.current_line
        if not line_filter.active:
            self.workers.cancel_group(self, "raw-filter")
            self._rows, self._filter_scanned = None, None
            lines.show(lines.index, None, line)
        else:
            self._start_filter(line)
        self._update_status()

    def _start_filter(self, line: int | None) -> None:
        index = self._view_lines.index
        if index is None:
            return
        self._rows = GrowingArray()
        self._filter_scanned, self._filter_upto = 0, 0
        self._view_lines.show(index, self._rows, line)
        self._scan(index, self._filter, self._rows, 1)

    def _scan_new_lines(self, index: LineIndex) -> None:
        """Filter and search the lines a followed input added after they had finished."""
        if self._rows is not None and self._filter_scanned is None and self._filter_upto < index.line_count:
            self._filter_scanned = self._filter_upto
            self._scan(index, self._filter, self._rows, self._filter_upto + 1)
        if self._hits is not None and self._search_scanned is None and self._search_upto < index.line_count:
            self._search_scanned = self._search_upto
            self._search(index, self._hits, *self._search_tests, self._search_upto + 1)

    def _filtered(self, rows: GrowingArray, scanned: int, done: bool) -> None:
        if rows is not self._rows:
            return
        if done:
            self._filter_upto = scanned
        self._filter_scanned = None if done else scanned
        self._view_lines.rows_changed()
        self._update_status()

    @work(thread=True, exclusive=True, group="raw-filter")
    def _scan(self, index: LineIndex, line_filter: LineFilter, rows: GrowingArray, first: int) -> None:
        self._scan_lines(index, rows, self._filtered, line_filter.matches, first=first)

    def _scan_lines(
        self,
        index: LineIndex,
        out: GrowingArray,
        report: Callable[[GrowingArray, int, bool], None],
        keep: Callable[[bytes], bool],
        block_may_match: Callable[[list[bytes]], bool] = lambda block: True,
        first: int = 1,
    ) -> None:
        """Run in a thread worker: the line numbers of `index` from `first` on whose bytes `keep` accepts, into
        `out`, reported every SCAN_LINES lines; waits for the index when it is still being built."""
        worker = get_current_worker()
        while not worker.is_cancelled:
            count = index.line_count
            if first > count:
                if index.complete:
                    break
                time.sleep(0.05)  # the index worker is still reading the file
                continue
            last = min(count, first + SCAN_LINES - 1)
            block = index.lines(first, last)
            if block_may_match(block):
                found = [number for number, raw in enumerate(block, first) if keep(raw)]
                out.extend(np.array(found, dtype=np.int64))
            first = last + 1
            if worker.is_cancelled:
                return
            self.app.call_from_thread(report, out, last, False)
        if not worker.is_cancelled:
            self.app.call_from_thread(report, out, first - 1, True)

    # ----------------------------------------------------------------------------------- search
    @on(Input.Submitted, "#raw-search")
    def _search_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._view_lines.focus()
        needle = event.value
        if not needle:
            return
        if needle == self._needle and self._hits is not None:
            self.action_search(1)
            return
        self._needle = needle
        self._view_lines.set_needle(needle)
        self._start_search(1)

    def action_close_search(self) -> None:
        self.query_one("#raw-search", Input).remove_class("-open")
        self._view_lines.focus()

    def _start_search(self, direction: int) -> None:
        index = self._view_lines.index
        if index is None:
            return
        self._hits = GrowingArray()
        self._search_scanned, self._search_upto = 0, 0
        self._search_wanted = direction
        needle = self._needle.lower()
        raw_needle = needle.encode("utf-8")

        def keep(raw: bytes) -> bool:
            return raw_needle in raw.lower() and needle in match_text(raw).lower()

        def block_may_match(block: list[bytes]) -> bool:
            return any(raw_needle in raw.lower() for raw in block)

        self._search_tests = (keep, block_may_match)
        self._search(index, self._hits, keep, block_may_match, 1)
        self._update_status()

    @work(thread=True, exclusive=True, group="raw-search")
    def _search(
        self,
        index: LineIndex,
        hits: GrowingArray,
        keep: Callable[[bytes], bool],
        block_may_match: Callable[[list[bytes]], bool],
        first: int,
    ) -> None:
        self._scan_lines(index, hits, self._searched, keep, block_may_match, first)

    def _searched(self, hits: GrowingArray, scanned: int, done: bool) -> None:
        if hits is not self._hits:
            return
        if done:
            self._search_upto = scanned
        self._search_scanned = None if done else scanned
        if self._search_wanted:
            self._jump_to_hit(self._search_wanted, final=done)
        self._update_status()

    def action_search(self, direction: int) -> None:
        if not self._needle:
            self.focus_search()
            return
        if self._hits is None:
            self._start_search(direction)
            return
        self._search_wanted = direction
        self._jump_to_hit(direction, final=self._search_scanned is None)

    def _jump_to_hit(self, direction: int, final: bool) -> None:
        """Move to the next shown hit in `direction`; wrap around once the search is complete."""
        assert self._hits is not None
        hits = self._hits.values
        target = _next_shown(hits, self._view_lines, direction)
        if target is None and not final:
            return  # not found yet: the search worker calls again with more hits
        self._search_wanted = 0
        if target is None:
            target = _next_shown(hits, self._view_lines, direction, wrap=True)
            if target is None:
                self.notify(f"No line matches {self._needle!r}", title="Search", severity="warning")
                return
            where = "top" if direction > 0 else "bottom"
            self.notify(f"Search wrapped to the {where}", title="Search")
        lines = self._view_lines
        lines.anchor_line = None
        lines.move_to(target, center=True)
        self._update_status()

    # ------------------------------------------------------------------------------ unrecognised
    def action_next_unrecognized(self) -> None:
        lines = self._view_lines
        marked = np.array(sorted(lines.marked), dtype=np.int64)
        target = _next_shown(marked, lines, 1)
        if target is None:
            target = _next_shown(marked, lines, 1, wrap=True)
            if target is None:
                self.notify("No unrecognised line is shown", title="Raw log")
                return
            self.notify("Wrapped to the first unrecognised line", title="Raw log")
        lines.anchor_line = None
        lines.move_to(target, center=True)

    # ----------------------------------------------------------------------------------- status
    def _update_status(self) -> None:
        self.query_one("#raw-status", Static).update(self._status_text())

    def _status_text(self) -> str:
        index = self._view_lines.index
        if self._message or index is None:
            return self._message or "Reading inputs..."
        parts = [f"{index.line_count:,} lines" + ("" if index.complete else f" (indexing {index.progress:.0%})")]
        if self._rows is not None:
            scanning = "" if self._filter_scanned is None else f" (scanning {self._filter_scanned:,})"
            parts.append(f"filter: {len(self._rows):,} matching{scanning}")
        total = self._unrecognized.get(self._source or "", 0)
        if total:
            parts.append(f"{len(self._view_lines.marked)} of {total} unrecognised lines marked (u: next)")
        if self._needle and self._hits is not None:
            scanning = "" if self._search_scanned is None else f" so far (scanning {self._search_scanned:,})"
            parts.append(f"search {self._needle!r}: {len(self._hits):,} matches{scanning}")
        return " · ".join(parts)


def _next_shown(lines_sorted: np.ndarray, view: LogLines, direction: int, wrap: bool = False) -> int | None:
    """The row of the first of `lines_sorted` after (before, direction < 0) the cursor that the view
    shows; with `wrap`, counted from the start (end) instead."""
    current = view.current_line or 0
    if direction > 0:
        start = 0 if wrap else int(np.searchsorted(lines_sorted, current, side="right"))
        candidates: Iterable[int] = lines_sorted[start:].tolist()
    else:
        stop = len(lines_sorted) if wrap else int(np.searchsorted(lines_sorted, current, side="left"))
        candidates = reversed(lines_sorted[:stop].tolist())
    for line in candidates:
        row = view.row_of(line)
        if row is not None:
            return row
    return None
