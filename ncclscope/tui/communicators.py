"""The Communicators screen of the TUI: ranks, rings and trees with the transport of each edge, and NIC per GPU."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from statistics import median

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.widget import Widget
from textual.widgets import DataTable, OptionList, Static
from textual.widgets.option_list import Option

from ncclscope.model import Case, CommRank, Communicator, Connection, Evidence
from ncclscope.tui.messages import JumpToLine
from ncclscope.tui.view import CaseView

# Transport classes of an edge: legend text and the theme colour it is drawn in.
STYLES = {
    "p2p": ("P2P: NVLink or PCIe", "$success"),
    "shm": ("SHM: host memory", "$warning"),
    "net_gdr": ("NET with GDR", "$primary"),
    "net": ("NET, GDR off on a side", "$error"),
    "unknown": ("?: not logged", "dim"),
}
NO_COMMUNICATOR = (
    "No communicator in the inputs: add an NCCL_DEBUG=INFO log with its INIT lines "
    "(`ncclCommInitRank ... Init START` / `Init COMPLETE`)."
)
NO_NET_LINES = (
    "No NET connection lines (`Channel .. : a[x] -> b[y] [send] via NET/...`) in the inputs: NCCL prints them "
    "during init when NCCL_DEBUG_SUBSYS includes INIT or NET, so the NIC of each GPU is unknown."
)
NO_NET_EDGE = "no NET connection (single host, NVLink across hosts, or not logged)"
# "[ch] down0/down1/down2->rank->up" (2.8+), "[ch] up->rank->down0/down1/down2" (2.4); 2.5-2.7 append "|treeDn".
TREE_ENTRY = re.compile(r"\[(\d+)\]\s*([-\d/]+)->(-?\d+)->([-\d/]+)")


@dataclass(frozen=True)
class Link:
    """How data goes from one rank to the next: a short label, a transport class, the line that says so."""

    label: str
    kind: str
    evidence: Evidence | None = None

    def content(self) -> Content:
        return Content.styled(self.label, STYLES[self.kind][1])


def _on(edge: Connection, host: str | None) -> bool:
    return host is None or edge.host is None or edge.host == host


def _short_transport(transport: str) -> str:
    """P2P/CUMEM/read -> P2P: the mechanism matters less than the class, except an indirect or MNNVL path."""
    if transport.startswith("P2P/"):
        special = [part for part in transport.split("/")[1:] if part in ("indirect", "MNNVL")]
        return "/".join(["P2P", *special])
    return transport.split("/")[0]


def _gdr_words(sends: list[Connection], receives: list[Connection]) -> str:
    sides = [e.gdr for e in sends + receives]
    if all(sides):
        return "GDR"
    if not any(sides):
        return "no GDR"
    if all(e.gdr for e in sends) and not any(e.gdr for e in receives):
        return "GDR send side only"
    if all(e.gdr for e in receives) and not any(e.gdr for e in sends):
        return "GDR receive side only"
    return "GDR on some channels"


class EdgeIndex:
    """The Case's connection edges looked up by rank pair (edges are case-wide, not kept per communicator)."""

    def __init__(self, edges: Iterable[Connection]) -> None:
        self.direct: dict[tuple[int, int], list[Connection]] = defaultdict(list)
        self.sends: dict[tuple[int, int], list[Connection]] = defaultdict(list)
        self.receives: dict[tuple[int, int], list[Connection]] = defaultdict(list)
        self.net_of_rank: dict[int, list[Connection]] = defaultdict(list)
        # What a link shows depends only on these facts of an edge: later edges repeating them (other processes,
        # communicators or channels of a large job) are left out, so that a lookup stays short.
        seen: set[tuple[object, ...]] = set()
        for edge in edges:
            facts = (edge.from_rank, edge.to_rank, edge.peer_rank, edge.host, edge.direction, edge.nic, edge.gdr)
            if edge.to_rank >= 0:
                if facts[:4] not in seen:
                    seen.add(facts[:4])
                    self.direct[edge.from_rank, edge.to_rank].append(edge)
                continue
            self.net_of_rank[edge.from_rank].append(edge)
            if edge.peer_rank is None or facts in seen:
                continue
            seen.add(facts)
            # NET edges are keyed by the local rank: a [receive] edge of rank b from a carries a -> b
            if edge.direction == "receive":
                self.receives[edge.peer_rank, edge.from_rank].append(edge)
            else:
                self.sends[edge.from_rank, edge.peer_rank].append(edge)

    def link(self, a: int, b: int, hosts: dict[int, str | None]) -> Link:
        """The transport from rank a to rank b, as the connection lines of those ranks' hosts say."""
        direct = [e for e in self.direct.get((a, b), []) if _on(e, hosts.get(a))]
        if direct:
            edge = direct[0]
            kind = "shm" if edge.transport.startswith("SHM") else "p2p"
            return Link(_short_transport(edge.transport), kind, edge.evidence)
        sends = [e for e in self.sends.get((a, b), []) if _on(e, hosts.get(a))]
        receives = [e for e in self.receives.get((a, b), []) if _on(e, hosts.get(b))]
        if not sends and not receives:
            return Link("?", "unknown")
        first = (sends or receives)[0]
        nics = sorted({e.nic for e in (sends or receives) if e.nic is not None})
        name = first.transport + ("/" + ",".join(map(str, nics)) if nics else "")
        gdr = _gdr_words(sends, receives)
        return Link(f"{name} {gdr}", "net_gdr" if gdr == "GDR" else "net", first.evidence)


def _hosts_of(comm: Communicator) -> dict[int, str | None]:
    return {r.rank: r.host for r in comm.ranks}


def _host_list(comm: Communicator) -> list[str]:
    return list(dict.fromkeys(r.host for r in comm.ranks if r.host))


def ring_content(ring: list[int], links: list[Link]) -> Content:
    """`0 -P2P-> 1 -NET/IB/0 GDR-> 2 ... -> 0`: each edge in its transport's colour."""
    parts: list[Content | str] = [str(ring[0])]
    for rank, link in zip([*ring[1:], ring[0]], links, strict=True):
        parts += [" ", Content.assemble("-", link.content(), "->"), f" {rank}"]
    return Content.assemble(*parts)


def ring_links(ring: list[int], index: EdgeIndex, hosts: dict[int, str | None]) -> list[Link]:
    return [index.link(a, b, hosts) for a, b in zip(ring, [*ring[1:], ring[0]], strict=True)]


def ring_jump(links: list[Link]) -> Evidence | None:
    """The line Enter opens for a ring: its first edge that leaves NVLink/P2P (the interesting one), else the first."""
    logged = [link for link in links if link.evidence is not None]
    notable = [link for link in logged if link.kind != "p2p"]
    return (notable or logged or [Link("", "unknown")])[0].evidence


@dataclass
class TreeNode:
    up: int
    down: list[int]


def parse_trees(trees: dict[int, list[str]]) -> dict[int, dict[int, TreeNode]]:
    """channel -> rank -> its parent and children, from each rank's own `Trees` entries."""
    out: dict[int, dict[int, TreeNode]] = defaultdict(dict)
    for rank, entries in trees.items():
        for entry in entries:
            match = TREE_ENTRY.match(entry.split("|")[0])
            if match is None:
                continue
            channel, left, _, right = match.groups()
            # the side with slashes lists the children (2.8+ puts it first, 2.4 last)
            down, up = (left, right) if "/" in left else (right, left)
            children = [int(r) for r in down.split("/") if int(r) >= 0]
            out[int(channel)][rank] = TreeNode(int(up), children)
    return dict(sorted(out.items()))


def tree_lines(
    nodes: dict[int, TreeNode], index: EdgeIndex, hosts: dict[int, str | None], show_hosts: bool
) -> list[Content]:
    """One channel's tree, indented from its root(s), each child with the transport from its parent."""
    children: dict[int, list[int]] = defaultdict(list)
    for rank, node in nodes.items():
        for child in node.down:
            children[rank].append(child)
        if node.up >= 0 and rank not in nodes.get(node.up, TreeNode(-1, [rank])).down:
            children[node.up].append(rank)
    roots = [r for r, n in nodes.items() if n.up < 0 or n.up not in nodes]
    lines: list[Content] = []
    seen: set[int] = set()

    def label(rank: int) -> str:
        host = f" [{hosts.get(rank)}]" if show_hosts and hosts.get(rank) else ""
        missing = "" if rank in nodes else " (no Trees line)"
        return f"{rank}{host}{missing}"

    def walk(rank: int, prefix: str, tail: bool, parent: int | None) -> None:
        seen.add(rank)
        if parent is None:
            lines.append(Content(label(rank)))
            inner = ""
        else:
            link = index.link(parent, rank, hosts)
            if link.kind == "unknown":
                link = index.link(rank, parent, hosts)
            branch = "└─ " if tail else "├─ "
            lines.append(Content.assemble(prefix + branch, label(rank), "  ", link.content()))
            inner = prefix + ("   " if tail else "│  ")
        kids = [c for c in dict.fromkeys(children.get(rank, [])) if c not in seen]
        for i, child in enumerate(kids):
            walk(child, inner, i == len(kids) - 1, rank)

    for root in roots:
        if root not in seen:
            walk(root, "", True, None)
    return lines


# Drawing every channel's tree of a 1024-rank job (32 channels x 1024 nodes) takes seconds on the UI thread:
# channels are drawn until this many tree nodes are on the screen, the rest are named.
TREE_NODES_DRAWN = 2048


def trees_content(comm: Communicator, index: EdgeIndex) -> Content:
    """Every channel's tree (up to TREE_NODES_DRAWN nodes); channels whose trees draw the same are listed
    together."""
    hosts = _hosts_of(comm)
    show_hosts = len(_host_list(comm)) > 1
    groups: dict[str, tuple[list[int], list[Content]]] = {}
    drawn = 0
    not_drawn: list[int] = []
    for channel, nodes in parse_trees(comm.trees).items():
        if drawn and drawn + len(nodes) > TREE_NODES_DRAWN:
            not_drawn.append(channel)
            continue
        drawn += len(nodes)
        lines = tree_lines(nodes, index, hosts, show_hosts)
        key = "\n".join(line.plain for line in lines)
        groups.setdefault(key, ([], lines))[0].append(channel)
    blocks: list[Content] = []
    for channels, lines in groups.values():
        heading = "ch " + ", ".join(map(str, channels)) + ":"
        blocks.append(Content("\n").join([Content.styled(heading, "bold"), *lines]))
    if not_drawn:
        note = (
            f"ch {', '.join(map(str, not_drawn))}: not drawn ({TREE_NODES_DRAWN} tree nodes drawn at most); "
            "their `Trees` lines are in the raw log (family filter: graph)"
        )
        blocks.append(Content.styled(note, "$text-muted"))
    return Content("\n").join(blocks)


def nic_names(case: Case) -> dict[tuple[str, str, int], str]:
    """(host, network, index) -> device name, from the `NET/IB : Using [0]mlx5_0:1/IB ...` lines."""
    return {(d.host, d.transport, d.index): d.name for d in case.net_devices}


def nic_text(edges: list[Connection], names: dict[tuple[str, str, int], str]) -> str:
    words = []
    for edge in edges:
        if edge.nic is None:
            continue
        network = edge.transport.split("/", 1)[-1]
        name = names.get((edge.host or "", network, edge.nic)) or f"NIC {edge.nic}"
        proxy = f" via rank {edge.proxy_rank} (PXN)" if edge.proxy_rank is not None else ""
        words.append(f"{name}{proxy}")
    return ", ".join(dict.fromkeys(words)) or "-"


def init_summary(comm: Communicator) -> str:
    if not comm.init_seconds:
        return "Init timings: not in the log (NCCL prints `Init timings` from 2.22 on)."
    slowest = max(comm.init_seconds, key=lambda r: comm.init_seconds[r])
    typical = median(comm.init_seconds.values())
    return (
        f"Init timings: {len(comm.init_seconds)} of {comm.nranks or len(comm.ranks)} ranks, median {typical:.2f} s, "
        f"slowest rank {slowest} {comm.init_seconds[slowest]:.2f} s."
    )


def init_state(rank: CommRank) -> str:
    if rank.init_complete:
        return "complete"
    return "started, not complete" if rank.init_start else "seen"


def comm_heading(comm: Communicator, communicators: int) -> str:
    hosts = _host_list(comm)
    channels = [
        f"{n} {what}"
        for n, what in ((comm.channels, "coll"), (comm.nvls_channels, "NVLS"), (comm.p2p_channels, "P2P"))
        if n is not None
    ]
    lines = [
        f"Communicator {comm.comm_id or comm.id} · {comm.api or 'init API not printed'} · "
        f"{comm.nranks or len(comm.ranks)} ranks on {len(hosts)} host(s): {', '.join(hosts) or '?'} · "
        f"channels: {', '.join(channels) or 'not printed'} · init complete {comm.ranks_completed}/"
        f"{comm.nranks or len(comm.ranks)}",
        init_summary(comm),
    ]
    if comm.comm_id is None:
        lines.append(
            "No commId printed: the ranks of this communicator could not be joined; this is one process's view."
        )
    if communicators > 1:
        lines.append(
            f"{communicators} communicators: connection lines are not tied to a communicator, so an edge's "
            "transport may have been logged by another communicator between the same ranks."
        )
    return "\n".join(lines)


def legend() -> Content:
    parts: list[Content | str] = ["Legend: "]
    for label, style in STYLES.values():
        parts += [Content.styled(f"■ {label}", style), "  "]
    return Content.assemble(*parts)


class CommunicatorsPane(Vertical):
    """Each communicator: its ranks, rings and trees drawn with transports, init timings, the NIC of each GPU."""

    DEFAULT_CSS = """
    CommunicatorsPane { height: 1fr; }
    CommunicatorsPane #comm-list { height: auto; max-height: 8; }
    CommunicatorsPane #comm-detail { height: 1fr; border-top: solid $panel; }
    CommunicatorsPane .section { text-style: bold; color: $primary; margin-top: 1; }
    CommunicatorsPane .note { color: $text-muted; }
    CommunicatorsPane DataTable, CommunicatorsPane OptionList { height: auto; max-height: 20; }
    CommunicatorsPane OptionList { border: none; padding: 0; }
    """
    BINDINGS = [
        Binding("c", "focus_section('comm-list')", "Communicators"),
        Binding("k", "focus_section('comm-ranks')", "Ranks"),
        Binding("r", "focus_section('comm-rings')", "Rings"),
        Binding("t", "focus_section('comm-trees')", "Trees"),
        Binding("n", "focus_section('comm-nics')", "NIC per GPU"),
    ]

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._view: CaseView | None = None
        self._index = EdgeIndex([])
        self._jumps: dict[str, dict[int, Evidence | None]] = {}
        self._shown: int | None = None  # the communicator whose detail is drawn

    def compose(self) -> ComposeResult:
        yield Static("Reading inputs...", id="comm-message")
        yield DataTable(id="comm-list", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(id="comm-detail"):
            yield Static(id="comm-heading")
            yield Static("Ranks (Enter: open the rank's Init line)", classes="section")
            yield DataTable(id="comm-ranks", cursor_type="row")
            yield Static("Rings per channel, in rank 0's order (Enter: open the ring's NET edge)", classes="section")
            yield Static(legend(), classes="note")
            yield Static(id="comm-rings-note", classes="note")
            yield OptionList(id="comm-rings")
            yield Static("Trees per channel, joined from every rank's own `Trees` line", classes="section")
            yield Static(id="comm-trees")
            yield Static("Which NIC does each GPU use (Enter: open its NET line)", classes="section")
            yield Static(id="comm-nics-note", classes="note")
            yield DataTable(id="comm-nics", cursor_type="row")

    def on_mount(self) -> None:
        self.query_one("#comm-list", DataTable).add_columns(
            "communicator", "api", "ranks", "nodes", "hosts", "channels", "init complete"
        )
        self.query_one("#comm-ranks", DataTable).add_columns(
            "rank", "host", "pid", "cudaDev", "nvmlDev", "busId", "init", "init s"
        )
        self.query_one("#comm-nics", DataTable).add_columns("rank", "host", "GPU", "receives on", "sends on", "GDR")
        self._show_parts(False)

    def _show_parts(self, visible: bool) -> None:
        self.query_one("#comm-list").display = visible
        self.query_one("#comm-detail").display = visible
        self.query_one("#comm-message").display = not visible

    def show_case(self, view: CaseView) -> None:
        self._view = view
        self._shown = None
        self._index = EdgeIndex(view.case.edges)
        table = self.query_one("#comm-list", DataTable)
        table.clear()
        communicators = view.case.communicators
        if not communicators:
            self.query_one("#comm-message", Static).update(Content(NO_COMMUNICATOR))
            self._show_parts(False)
            return
        self._show_parts(True)
        for i, comm in enumerate(communicators):
            hosts = _host_list(comm)
            table.add_row(
                *_cells(
                    comm.comm_id or comm.id,
                    comm.api,
                    comm.nranks or len(comm.ranks),
                    comm.nnodes or len(hosts),
                    ", ".join(hosts[:3]) + (f" +{len(hosts) - 3}" if len(hosts) > 3 else ""),
                    comm.channels,
                    f"{comm.ranks_completed}/{comm.nranks or len(comm.ranks)}",
                ),
                key=str(i),
            )
        self.show_communicator(0)

    def show_communicator(self, number: int) -> None:
        """Fill the detail with communicator `number` (its place in the Case's list)."""
        assert self._view is not None
        if number == self._shown:
            return  # the list's cursor settling on the row already shown: drawing it again costs seconds
        self._shown = number
        case = self._view.case
        comm = case.communicators[number]
        self.query_one("#comm-heading", Static).update(Content(comm_heading(comm, len(case.communicators))))
        self._fill_ranks(comm)
        self._fill_rings(comm)
        self.query_one("#comm-trees", Static).update(
            trees_content(comm, self._index) if comm.trees else Content("No `Trees` lines for this communicator.")
        )
        self._fill_nics(comm, case)

    def _fill_ranks(self, comm: Communicator) -> None:
        table = self.query_one("#comm-ranks", DataTable)
        table.clear()
        jumps: dict[int, Evidence | None] = {}
        for rank in sorted(comm.ranks, key=lambda r: r.rank):
            seconds = comm.init_seconds.get(rank.rank)
            table.add_row(
                *_cells(
                    rank.rank,
                    rank.host,
                    rank.pid,
                    rank.cuda_dev,
                    rank.nvml_dev,
                    rank.bus_id,
                    init_state(rank),
                    None if seconds is None else f"{seconds:.2f}",
                )
            )
            jumps[len(jumps)] = rank.evidence
        self._jumps["comm-ranks"] = jumps

    def _fill_rings(self, comm: Communicator) -> None:
        rings = self.query_one("#comm-rings", OptionList)
        rings.clear_options()
        hosts = _hosts_of(comm)
        jumps: dict[int, Evidence | None] = {}
        for channel, ring in sorted((c, r) for c, r in comm.rings.items() if r):
            links = ring_links(ring, self._index, hosts)
            rings.add_option(Option(Content.assemble(f"ch {channel}: ", ring_content(ring, links))))
            jumps[len(jumps)] = ring_jump(links)
        self._jumps["comm-rings"] = jumps
        if jumps:
            rings.highlighted = 0  # Enter works as soon as the list has focus
        notes = []
        if not comm.rings:
            notes.append("No ring lines (`Channel 00/02 : 0 1 ...`) for this communicator: rank 0 prints them at init.")
        if comm.rings_truncated:
            notes.append("NCCL cut the ring lines at its buffer size: rings with many ranks are partial.")
        self.query_one("#comm-rings-note", Static).update(Content("\n".join(notes)))
        self.query_one("#comm-rings-note").display = bool(notes)

    def _fill_nics(self, comm: Communicator, case: Case) -> None:
        table = self.query_one("#comm-nics", DataTable)
        table.clear()
        names = nic_names(case)
        any_net = any(self._index.net_of_rank.values())
        note = self.query_one("#comm-nics-note", Static)
        note.update(Content(NO_NET_LINES))
        # GPUs on several hosts joined by multi-node NVLink (MNNVL) need no NIC: nothing is missing then
        mnnvl = any("MNNVL" in e.transport for e in case.edges)
        note.display = not any_net and not mnnvl and len(_host_list(comm)) > 1
        jumps: dict[int, Evidence | None] = {}
        for rank in sorted(comm.ranks, key=lambda r: r.rank):
            edges = [e for e in self._index.net_of_rank.get(rank.rank, []) if _on(e, rank.host)]
            gpu = f"cudaDev {'-' if rank.cuda_dev is None else rank.cuda_dev} · busId {rank.bus_id or '-'}"
            if edges:
                receives = [e for e in edges if e.direction == "receive"]
                sends = [e for e in edges if e.direction != "receive"]
                gdr = {e.gdr for e in edges}
                row = (nic_text(receives, names), nic_text(sends, names), "mixed" if len(gdr) > 1 else _yes(gdr.pop()))
            else:
                row = (NO_NET_EDGE if any_net or not note.display else "unknown", "", "")
            table.add_row(*_cells(rank.rank, rank.host, gpu, *row))
            jumps[len(jumps)] = edges[0].evidence if edges else rank.evidence
        self._jumps["comm-nics"] = jumps

    def _jump(self, table_id: str, row: int) -> None:
        evidence = self._jumps.get(table_id, {}).get(row)
        if evidence is not None:
            self.post_message(JumpToLine(evidence.source, evidence.line))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "comm-list" and event.row_key.value is not None:
            self.show_communicator(int(event.row_key.value))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id in ("comm-ranks", "comm-nics"):
            event.stop()
            self._jump(event.data_table.id, event.cursor_row)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self._jump("comm-rings", event.option_index)

    def action_focus_section(self, widget_id: str) -> None:
        widget: Widget = self.query_one(f"#{widget_id}")
        if widget.focusable:
            widget.focus()
        else:
            self.query_one("#comm-detail", VerticalScroll).focus()
        widget.scroll_visible(top=True)


def _cells(*values: object) -> list[Text]:
    """Table cells as plain text: host names and ids come from logs and must not be read as markup."""
    return [Text("-" if v is None else str(v)) for v in values]


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"
