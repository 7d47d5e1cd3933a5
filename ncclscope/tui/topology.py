"""The Topology screen of the TUI: `nvidia-smi topo -m` matrices coloured by link class, each GPU's nearest NIC
with its NUMA/CPU affinity, each host's device tree (case/device_tree.py: what NCCL detected, the host's own reports of
its links, degraded links in red, the GPU <-> NIC paths NCCL chose), and the findings about the wiring."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Grid, Vertical, VerticalScroll
from textual.widget import Widget
from textual.widgets import Static, Tree
from textual.widgets.tree import TreeNode as UiNode

from ncclscope.case.device_tree import HostTree, TreeNode, device_trees
from ncclscope.case.topology import NV_TOKEN, NearestNic, link, nearest_nics, nic_label
from ncclscope.model import TopologyMatrix
from ncclscope.tui.finding_links import FindingLinks
from ncclscope.tui.view import CaseView


@dataclass(frozen=True)
class LinkClass:
    css: str
    meaning: str


# Every link class of the matrix legend, nearest first: its CSS class (coloured in DEFAULT_CSS) and what it means.
LINK_CLASSES: dict[str, LinkClass] = {
    "NV#": LinkClass("link-nv", "NVLink, # bonded links: the fastest path between GPUs"),
    "PIX": LinkClass("link-pix", "at most one PCIe bridge: fast P2P and GPUDirect RDMA"),
    "PXB": LinkClass("link-pxb", "several PCIe bridges, no host bridge: P2P and GPUDirect RDMA still on"),
    "PHB": LinkClass("link-phb", "through a PCIe host bridge (the CPU): no P2P or GPUDirect RDMA by default"),
    "NODE": LinkClass("link-node", "between PCIe host bridges of one NUMA node: no P2P or GPUDirect RDMA by default"),
    "SYS": LinkClass("link-sys", "crosses the CPU interconnect (QPI/UPI): slow for P2P and GPUDirect"),
    "X": LinkClass("link-self", "the device itself"),
}
UNKNOWN_LINK = LinkClass("link-other", "not a legend token")
TOPOLOGY_CODES = ("TOPO", "GDR", "CH001")
NO_MATRIX = (
    "No `nvidia-smi topo -m` matrix in the inputs: run `nvidia-smi topo -m > topo.txt` on each host "
    "and add the file to the inputs."
)


def link_class(token: str) -> str:
    """The LINK_CLASSES key of a matrix cell ("NV18" -> "NV#", old drivers' "SOC" -> "SYS"), or "" if unknown."""
    token = token.strip().upper()
    if NV_TOKEN.match(token):
        return "NV#"
    if token == "SOC":
        return "SYS"
    return token if token in LINK_CLASSES else ""


def _titles(topologies: list[TopologyMatrix]) -> list[str]:
    """Each matrix's file name and line; the whole path where two files share a name (one per host)."""
    names = [Path(t.source).name for t in topologies]
    repeated = {name for name, n in Counter(names).items() if n > 1}
    return [f"{t.source if name in repeated else name}:{t.line}" for t, name in zip(topologies, names, strict=True)]


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _link_cell(token: str, name: str) -> Static:
    css = LINK_CLASSES.get(link_class(token), UNKNOWN_LINK).css
    return Static(token or "?", name=name, classes=f"cell {css}", markup=False)


def _grid(css_class: str, columns: str, cells: list[Static]) -> Grid:
    grid = Grid(*cells, classes=css_class)
    grid.styles.grid_size_columns = len(columns.split())
    grid.styles.grid_columns = columns
    return grid


def _matrix_grid(topo: TopologyMatrix) -> Grid:
    """Header row, then one row per device: each cell named "ROW|COLUMN" and classed by its link class."""
    width = max((len(d) for d in topo.devices), default=4) + 2
    cells = [Static("", classes="head"), *(Static(d, classes="head cell", markup=False) for d in topo.devices)]
    for row in topo.devices:
        cells.append(Static(row, classes="head", markup=False))
        cells.extend(_link_cell(link(topo, row, col), f"{row}|{col}") for col in topo.devices)
    return _grid("matrix", f"{width} " + f"{max(width, 6)} " * len(topo.devices), cells)


def _nearest_grid(topo: TopologyMatrix, nearest: list[NearestNic]) -> Grid:
    """Per GPU: nearest NIC(s), the link class (flagged when far), NUMA and CPU affinity."""
    # Older drivers print no GPU NUMA ID column.
    affinities = {"NUMA": topo.numa_affinity, "CPU affinity": topo.cpu_affinity, "GPU NUMA ID": topo.gpu_numa_id}
    affinities = {heading: column for heading, column in affinities.items() if column}
    headings = ["GPU", "Nearest NIC", "Link", "", *affinities]
    cells = [Static(h, classes="head") for h in headings]
    for near in nearest:
        flag = "GPUDirect RDMA off by default" if near.far else ""
        nics = ", ".join(nic_label(topo, nic) for nic in near.nics) or "no NIC"
        cells += [
            Static(near.gpu, classes="head"),
            Static(nics, name=near.gpu, classes="nearest-nic", markup=False),
            _link_cell(near.link, near.gpu),
            Static(flag, classes="far" if near.far else ""),
        ]
        cells += [Static(column.get(near.gpu, ""), markup=False) for column in affinities.values()]
    return _grid("nearest", " ".join("auto" for _ in headings), cells)


def _legend(topologies: list[TopologyMatrix]) -> Grid:
    """The link classes that appear in the matrices, with their colour and meaning."""
    present = {link_class(token) for t in topologies for row in t.links.values() for token in row.values()}
    cells: list[Static] = []
    for key, cls in LINK_CLASSES.items():
        if key in present:
            cells += [Static(key, classes=f"cell {cls.css}"), Static(cls.meaning, classes="meaning")]
    return _grid("legend", "6 1fr", cells)


STATE_STYLES = {"degraded": "bold red", "lowered": "dim", "ok": ""}


def _device_tree(host: HostTree) -> list[Widget]:
    """A host's devices as a Tree, expanded: degraded links in red, lowered ones dim, notes as leaves."""
    bad = len(host.degraded)
    title = f"Device tree of {host.host}" + (f" ({bad} degraded)" if bad else "")
    widget: Tree[None] = Tree(_label(host.root), classes="device-tree")
    widget.show_root = True
    _fill(widget.root, host.root)
    widget.root.expand_all()
    widgets: list[Widget] = [Static(title, classes="title", markup=False), widget]
    if host.paths:
        widgets.append(Static("NCCL's paths between NICs and GPUs (graph dump)", classes="title"))
        widgets.append(Static("\n".join(host.paths), classes="paths", markup=False))
    return widgets


def _label(node: TreeNode) -> Text:
    text = Text(node.label, style=STATE_STYLES[node.state])
    if node.link:
        text.append(f"  {node.link}", style=STATE_STYLES[node.state] or "cyan")
    if node.state != "ok":
        text.append(f"  [{node.state}]", style=STATE_STYLES[node.state])
    return text


def _fill(ui: UiNode[None], node: TreeNode) -> None:
    for note in node.notes:
        ui.add_leaf(Text(note, style="italic"))
    for child in node.children:
        branch = ui.add(_label(child))
        _fill(branch, child)
        if not child.children and not child.notes:
            branch.allow_expand = False


class TopologyPane(VerticalScroll):
    """Each matrix coloured by link class with its nearest-NIC table, one legend, and the topology findings."""

    DEFAULT_CSS = """
    TopologyPane { padding: 0 1; }
    TopologyPane .title { text-style: bold; color: $primary; margin-top: 1; }
    TopologyPane #topo-message { color: $text-muted; margin-top: 1; }
    TopologyPane #topo-matrices { height: auto; }
    TopologyPane .problem { color: $warning; }
    TopologyPane Grid { height: auto; width: auto; grid-rows: 1; grid-gutter: 0 1; }
    TopologyPane .matrix { grid-gutter: 0 0; }
    TopologyPane .legend { width: 100%; }
    TopologyPane .cell { content-align: center middle; width: 100%; }
    TopologyPane .head { text-style: bold; }
    TopologyPane .far { color: $warning; }
    TopologyPane .link-nv { background: $success 70%; }
    TopologyPane .link-pix { background: $success 35%; }
    TopologyPane .link-pxb { background: $primary 35%; }
    TopologyPane .link-phb { background: $warning 35%; }
    TopologyPane .link-node { background: $warning 70%; }
    TopologyPane .link-sys { background: $error 70%; }
    TopologyPane .link-self, TopologyPane .link-other { color: $text-muted; }
    TopologyPane .device-tree { height: auto; max-height: 60; }
    TopologyPane .paths { color: $text-muted; }
    """

    def __init__(self, **kwargs: str) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.nearest: list[list[NearestNic]] = []
        """Per matrix (in Case order): each GPU's nearest NICs, as shown."""

    def compose(self) -> ComposeResult:
        yield Static("Reading inputs...", id="topo-message", markup=False)
        yield Vertical(id="topo-matrices")
        yield Static("Findings about the topology (Enter: show the evidence line)", classes="title findings")
        yield FindingLinks(id="topo-findings", classes="findings")

    def on_mount(self) -> None:
        for widget in self.query(".findings"):
            widget.display = False

    def show_case(self, view: CaseView) -> None:
        topologies = view.case.topologies
        self.nearest = [nearest_nics(t) for t in topologies]
        trees = device_trees(view.case)
        message = self.query_one("#topo-message", Static)
        message.update(NO_MATRIX)
        message.display = not topologies
        matrices = self.query_one("#topo-matrices", Vertical)
        matrices.remove_children()
        widgets: list[Widget] = []
        for topo, title, nearest in zip(topologies, _titles(topologies), self.nearest, strict=True):
            widgets += self._section(topo, title, nearest)
        if topologies:
            widgets += [Static("Link classes, nearest first", classes="title"), _legend(topologies)]
        for tree in trees:
            widgets += _device_tree(tree)
        matrices.mount_all(widgets)
        for widget in self.query(".findings"):
            widget.display = True
        self.query_one(FindingLinks).show_findings(
            view.findings_with_prefix(*TOPOLOGY_CODES), "No findings about the topology."
        )

    @staticmethod
    def _section(topo: TopologyMatrix, title: str, nearest: list[NearestNic]) -> list[Widget]:
        summary = f"{_count(len(topo.gpus), 'GPU')}, {_count(len(topo.nics), 'NIC')}"
        widgets: list[Widget] = [
            Static(f"Matrix {title} ({summary})", classes="title", markup=False),
            _matrix_grid(topo),
        ]
        widgets += [Static(f"Not read: {problem}", classes="problem", markup=False) for problem in topo.problems]
        widgets.append(Static("GPU to nearest NIC, NUMA and CPU affinity", classes="title"))
        widgets.append(_nearest_grid(topo, nearest) if topo.nics else Static("No NIC in this matrix."))
        return widgets
