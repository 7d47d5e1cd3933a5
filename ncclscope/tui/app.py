"""The ncclscope terminal UI: one tab per screen over the inputs, the raw log shown at once, findings when parsed."""

from __future__ import annotations

import time
from functools import partial

from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widget import Widget
from textual.widgets import DataTable, Footer, Header, OptionList, ProgressBar, Static, TabbedContent, TabPane, Tabs
from textual.worker import get_current_worker

from ncclscope.case.hang_progress import JUDGED_AT_END, waiting_report
from ncclscope.model import Analysis
from ncclscope.tui.benchmarks import BenchmarksPane
from ncclscope.tui.communicators import CommunicatorsPane
from ncclscope.tui.findings import FindingsPane
from ncclscope.tui.following import POLL_SECONDS, Analysed, Following
from ncclscope.tui.help import HelpScreen
from ncclscope.tui.hosts import HostsPane
from ncclscope.tui.loading import BackgroundParse, Done, Failed, PreparedInputs, Progress
from ncclscope.tui.messages import JumpToLine, ShowProgress
from ncclscope.tui.palette import NcclscopeCommands, PaletteCommand
from ncclscope.tui.progress import ProgressPane
from ncclscope.tui.raw_log import RawLogPane
from ncclscope.tui.timeline import TimelinePane
from ncclscope.tui.topology import TopologyPane
from ncclscope.tui.view import CaseView

# (tab id, title, pane class): the order is the number key of each tab.
TABS: list[tuple[str, str, type[Widget]]] = [
    ("findings", "Findings", FindingsPane),
    ("hosts", "Hosts", HostsPane),
    ("communicators", "Communicators", CommunicatorsPane),
    ("topology", "Topology", TopologyPane),
    ("benchmarks", "Benchmarks", BenchmarksPane),
    ("raw-log", "Raw log", RawLogPane),
    ("progress", "Progress", ProgressPane),
    ("timeline", "Timeline", TimelinePane),
]
THEMES = ("textual-dark", "textual-light")
# widgets whose screens keep their selection themselves, by identity (a followed input renews every screen)
OWN_CURSORS = ("findings-list", "finding-evidence", "progress-")
MB = 1024 * 1024


class NcclscopeApp(App[int]):
    """Opens on Findings; the raw log is readable at once, the other screens fill in when parsing ends."""

    TITLE = "ncclscope"
    COMMANDS = App.COMMANDS | {NcclscopeCommands}
    CSS = """
    #tabs { height: 1fr; }
    #tabs > ContentSwitcher { height: 1fr; }
    #tabs TabPane { height: 1fr; padding: 0; }
    #loading { height: 1; background: $panel; }
    #loading.done { display: none; }
    #loading.done.following { display: block; }
    #loading.following ProgressBar { display: none; }
    #loading-text { width: auto; padding: 0 1; }
    """
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "help", "Help", key_display="?"),
        *(
            Binding(str(number), f"show_tab('{tab}')", title, show=False)
            for number, (tab, title, _) in enumerate(TABS, start=1)
        ),
        Binding("slash", "search_log", "Search the raw log", key_display="/", show=False),
        Binding("ctrl+t", "toggle_theme", "Dark/light"),
    ]

    def __init__(self, prepared: PreparedInputs, following: Following | None = None) -> None:
        super().__init__()
        self.prepared = prepared
        self.following = following
        self.latest: Analysis | None = None  # the newest analysis, findings held back or not
        self.held_back: list[str] = []  # codes of the findings a followed input shows once it ends or goes quiet
        self.view: CaseView | None = None
        self.messages: list[str] = []
        self.parse_job = BackgroundParse(prepared)
        self.parse_seconds: float | None = None  # time from mount to findings shown
        self.internal_error: str | None = None
        self._started = time.monotonic()
        self._bytes_read = 0

    def compose(self) -> ComposeResult:
        yield Header()
        with TabbedContent(initial="findings", id="tabs"):
            for tab, title, pane in TABS:
                with TabPane(title, id=tab):
                    yield pane(id=f"{tab}-pane")
        with Horizontal(id="loading"):
            yield Static("Reading inputs...", id="loading-text")
            yield ProgressBar(total=max(self.prepared.total_bytes, 1), show_eta=False, id="loading-bar")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = self.prepared.names
        self._started = time.monotonic()
        # The raw log first, before any parsing: its first lines are the first screen of a large input.
        self.raw_log.open_files(self.prepared.raw)
        self.findings.action_focus_list()
        if self.following is not None:
            self.sub_title += " (following)"
            self.query_one("#loading").add_class("following")
            waiting = f"Following {self.following.input.display}: waiting for lines"
            self.query_one("#loading-text", Static).update(waiting)
            self._ticker = self.set_interval(POLL_SECONDS, self._follow_tick)
            self.call_after_refresh(self._follow)
            return
        self._ticker = self.set_interval(0.5, self._show_progress)
        # The parsing process starts once the first screen is painted: on 2 cores its start-up would delay it.
        self.call_after_refresh(self._parse)

    def on_unmount(self) -> None:
        self.workers.cancel_group(self, "parse")
        self.parse_job.stop()
        if self.following is not None:
            self.following.parse.stop()

    @property
    def raw_log(self) -> RawLogPane:
        return self.query_one(RawLogPane)

    @property
    def findings(self) -> FindingsPane:
        return self.query_one(FindingsPane)

    @property
    def parsing(self) -> bool:
        """True until the findings are shown (or parsing failed)."""
        return not self.query_one("#loading").has_class("done")

    # Parsing: a thread waits on the child process so that the event loop never blocks.

    @work(thread=True, exclusive=True, group="parse")
    def _parse(self) -> None:
        worker = get_current_worker()
        self.parse_job.start()
        for event in self.parse_job.events(lambda: worker.is_cancelled):
            if worker.is_cancelled:
                return
            if isinstance(event, Progress):
                self.call_from_thread(self._advance, event.bytes_read)
            elif isinstance(event, Done):
                # Validated here, off the event loop: a large Case takes a moment.
                analysis = Analysis.model_validate_json(event.analysis_json)
                self.call_from_thread(self._show_analysis, analysis, event.messages)
            else:
                self.call_from_thread(self._parse_failed, event.error)

    # Following a growing input (following.py): the ticker takes new lines to the raw log and asks the child for
    # an analysis of the whole lines so far; a thread waits on its results.

    @work(thread=True, exclusive=True, group="parse")
    def _follow(self) -> None:
        assert self.following is not None
        worker = get_current_worker()
        self.following.parse.start()
        for result in self.following.parse.results(lambda: worker.is_cancelled):
            if worker.is_cancelled:
                return
            if isinstance(result, Analysed):
                analysis = Analysis.model_validate_json(result.analysis_json)  # off the event loop
                self.call_from_thread(self._followed, analysis, result.messages)
            elif isinstance(result, Failed):
                self.call_from_thread(self._parse_failed, result.error)

    def _follow_tick(self) -> None:
        following = self.following
        if following is None or self._shutting_down():
            return
        growth = following.input.poll()
        if growth.restarted:  # truncated or replaced: everything again from the start
            self.raw_log.open_files(self.prepared.raw)
            following.shown, following.requested = 0, -1
            self.notify(f"{following.input.display} was truncated or replaced: read again from its start")
        upto = growth.seen if growth.ended else growth.complete
        if upto > following.shown:
            self.raw_log.grow(following.input.display, upto)
            following.shown = upto
        now = time.monotonic()
        if upto > following.requested and following.due(now):
            following.parse.request(upto)
            following.requested, following.analysing, following.asked_at = upto, True, now
        following.ended = growth.ended
        quiet = now - growth.last_data >= following.idle
        if quiet != following.quiet:
            following.quiet = quiet
            if self.latest is not None:
                self._present(said_quiet=quiet)
        self._follow_status(growth.last_data, now)

    def _followed(self, analysis: Analysis, messages: list[str]) -> None:
        following = self.following
        if following is None or self._shutting_down():
            return
        following.analysing = False
        following.cost = time.monotonic() - following.asked_at
        following.analysed_at = time.monotonic()
        self.latest = analysis
        first = self.view is None
        self._present(messages=messages)
        if first:
            self._loading_done()

    def _present(self, messages: list[str] | None = None, said_quiet: bool = False) -> None:
        """Show the newest analysis; while the input grows, without the findings that judge what is missing."""
        assert self.latest is not None and self.following is not None
        settled = self.following.ended or self.following.quiet
        shown = self.latest
        if not settled:
            kept = [f for f in shown.findings if f.code not in JUDGED_AT_END]
            self.held_back = sorted({f.code for f in shown.findings if f.code in JUDGED_AT_END})
            shown = shown.model_copy(update={"findings": kept})
        else:
            self.held_back = []
        self._show_analysis(shown, self.messages if messages is None else messages, again=self.view is not None)
        if said_quiet and not self.following.ended:
            waiting = waiting_report(self.latest.case)
            if waiting:
                more = f"\n... and {len(waiting) - 5} more" if len(waiting) > 5 else ""
                self.notify(
                    "\n".join(waiting[:5]) + more,
                    title=f"The job looks hung: no new line for {self.following.idle:.0f} s",
                    severity="warning",
                    timeout=20,
                )

    def _follow_status(self, last_data: float, now: float) -> None:
        following = self.following
        assert following is not None
        parts = [f"Following {following.input.display}: {following.shown / MB:,.1f} MB"]
        if following.ended:
            parts.append("the input ended")
        elif now - last_data >= 2:
            parts.append(f"no new line for {now - last_data:.0f} s")
        if following.analysing:
            parts.append("analysing...")
        elif following.analysed_at is not None:
            parts.append(f"analysed {now - following.analysed_at:.0f} s ago ({following.cost:.1f} s)")
        if self.held_back:
            codes = ", ".join(self.held_back)
            parts.append(f"{codes} wait for the input to end or go quiet for {following.idle:.0f} s")
        self.query_one("#loading-text", Static).update(" · ".join(parts))

    def _shutting_down(self) -> bool:
        """The parse can end while the app quits: Textual stops running before it removes the widgets one by one,
        and then there is nothing to show."""
        return self._exit or not self.is_running

    def _advance(self, size: int) -> None:
        if self._shutting_down():
            return
        self._bytes_read += size
        self.query_one(ProgressBar).advance(size)
        self._show_progress()

    def _show_progress(self) -> None:
        if self._shutting_down():  # the ticker can fire while the app quits
            return
        elapsed = time.monotonic() - self._started
        total = self.prepared.total_bytes
        self.query_one("#loading-text", Static).update(
            f"Reading and analysing: {self._bytes_read / MB:,.0f} of {total / MB:,.0f} MB, {elapsed:.1f} s"
        )

    def _show_analysis(self, analysis: Analysis, messages: list[str], again: bool = False) -> None:
        """Every screen shows `analysis`; `again`: a newer analysis of a followed input, where each table and
        list keeps its cursor (the Findings and Progress screens keep the finding and group they show)."""
        if self._shutting_down():
            return
        kept = self._cursors() if again else {}
        self.view = CaseView(analysis, self.prepared.raw)
        told = set(self.messages) if again else set()
        self.messages = messages
        for _, _, pane in TABS:
            self.query_one(pane).show_case(self.view)  # type: ignore[attr-defined]
        self._restore_cursors(kept)
        self.findings.show_problems(messages)
        new = [m for m in messages if m not in told]
        if new:
            more = f" (and {len(new) - 1} more on the Findings screen)" if len(new) > 1 else ""
            self.notify(new[0] + more, title="Read problems", severity="warning", timeout=8)
        if self.following is None:
            self._loading_done()

    def _cursors(self) -> dict[str, int]:
        """Cursor rows of the tables and lists that their screens do not restore themselves, by widget id."""
        kept: dict[str, int] = {}
        for table in self.query(DataTable):
            if table.id and not table.id.startswith(OWN_CURSORS):
                kept[table.id] = table.cursor_row
        for options in self.query(OptionList):
            if options.id and options.highlighted is not None and not options.id.startswith(OWN_CURSORS):
                kept[options.id] = options.highlighted
        return kept

    def _restore_cursors(self, kept: dict[str, int]) -> None:
        for widget_id, row in kept.items():
            found = self.query(f"#{widget_id}")
            widget = found.first() if found else None
            if isinstance(widget, DataTable) and row < widget.row_count:
                widget.move_cursor(row=row, animate=False)
            elif isinstance(widget, OptionList) and row < widget.option_count:
                widget.highlighted = row

    def _parse_failed(self, error: str) -> None:
        if self._shutting_down():
            return
        if self.following is not None:
            self.following.analysing = False
        self.messages = [f"parsing failed: {error}"]
        self.findings.show_problems(self.messages)
        self.notify(error, title="Parsing failed", severity="error", timeout=15)
        self._loading_done()

    def _loading_done(self) -> None:
        self.parse_seconds = time.monotonic() - self._started
        if self.following is None:  # a followed input keeps its ticker: it reads the new lines
            self._ticker.stop()
        self.query_one("#loading").add_class("done")

    # Actions and messages.

    def action_show_tab(self, tab: str) -> None:
        tabbed = self.query_one(TabbedContent)
        tabbed.active = tab
        # Focus goes with the tab: left in the hidden pane, Textual would move it to a neighbour there and
        # TabbedContent would switch back to the pane that holds it.
        tabbed.query_one(Tabs).focus()
        self.call_after_refresh(self._focus_into, tabbed.get_pane(tab))

    def _focus_into(self, pane: Widget) -> None:
        """Focus the pane's main view: its tallest focusable widget (the first of equals), when it has one."""
        inside = [widget for widget in self.screen.focus_chain if pane in widget.ancestors]
        if inside:
            max(inside, key=lambda widget: widget.outer_size.height).focus()

    def action_search_log(self) -> None:
        self.action_show_tab("raw-log")
        # after the tab's own focus move (queued by action_show_tab): else it takes the focus back to the log
        # list, and the first keys typed hit its shortcuts (n, x ...) instead of the search field
        self.call_after_refresh(self.raw_log.focus_search)

    def action_toggle_theme(self) -> None:
        self.theme = THEMES[1] if self.theme == THEMES[0] else THEMES[0]

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            return
        keys = [
            (binding.key_display or self.get_key_display(binding), binding.description)
            for binding in self._described_bindings()
        ]
        self.push_screen(HelpScreen(keys))

    def _described_bindings(self) -> list[Binding]:
        """Keys of the app and of the focused screen that have a description, the app's number keys included."""
        seen: set[str] = set()
        found: list[Binding] = []
        for key, active in self.screen.active_bindings.items():
            if active.binding.description and key not in seen:
                seen.add(key)
                found.append(active.binding)
        return found

    def on_jump_to_line(self, message: JumpToLine) -> None:
        self.action_show_tab("raw-log")
        self.raw_log.goto(message.source, message.line)

    def on_show_progress(self, message: ShowProgress) -> None:
        self.action_show_tab("progress")
        if message.finding is not None and self.view is not None:
            self.call_after_refresh(self.query_one(ProgressPane).select_for, message.finding)

    def palette_commands(self) -> list[PaletteCommand]:
        """What the command palette offers besides Textual's own commands."""
        commands = [
            PaletteCommand(f"Show {title}", f"Key {number}", partial(self.action_show_tab, tab))
            for number, (tab, title, _) in enumerate(TABS, start=1)
        ]
        commands.append(PaletteCommand("Toggle dark/light theme", "Key ctrl+t", self.action_toggle_theme))
        if self.view is not None:
            commands.extend(
                PaletteCommand(f"Finding {f.code}: {f.message[:80]}", f.severity, partial(self._open, f.code))
                for f in self.view.analysis.findings
            )
        return commands

    def _open(self, code: str) -> None:
        self.action_show_tab("findings")
        self.findings.select_code(code)

    def _handle_exception(self, error: Exception) -> None:
        # The command line's promise: an internal error is one line (command.py prints it), never a traceback.
        self.internal_error = f"{type(error).__name__}: {error}"
        super()._handle_exception(error)
        self._exit_renderables.clear()
