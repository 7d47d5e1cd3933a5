"""`rocm-smi --showtopo` (grammars/rocm_smi_topo.lark): AMD GPUs' links as a topology matrix, in the legend of
`nvidia-smi topo -m` that the rules read.

The link between two GPUs is its Link Type: XGMI (AMD's GPU-to-GPU link, Infinity Fabric) is kept as `XGMI`, a
GPU link as NV# is; a PCIE path becomes the nvidia-smi level its place gives: SYS when the two GPUs are on
different NUMA nodes (the path crosses the CPUs' interconnect), NODE on one NUMA node, PHB (through the CPU's
root complex) without the NUMA section: the hop count alone does not say where a path crosses. ROCm does not
name the host: the input's name does.
"""

from __future__ import annotations

import re

from lark import Tree

from ncclscope.model import Evidence, TopologyMatrix
from ncclscope.parse.grammars import parse_or_none

TITLE = "ROCm System Management Interface"
SECTION_RE = re.compile(r"(Weight|Hops|Link Type) between two GPUs|Numa Nodes|End of ROCm SMI Log")
SECTIONS = {"Weight": "weight", "Hops": "hops", "Link Type": "type", "Numa Nodes": "numa"}
EVIDENCE_ORDER = {"type": 0, "hops": 1, "numa": 2}  # a GPU's lines shown as evidence, in this order


class RocmSmiTopologyReader:
    """Reads the lines of one input that belong to `rocm-smi --showtopo` output."""

    # its banners name it or a section; a line of '=' alone is another program's separator (until the report
    # has begun: then every line is read, busy)
    HINT_WORDS: tuple[str, ...] = (TITLE, "between two GPUs", "(Topology) Numa", "Numa Nodes")
    HINT_START = ""

    def __init__(self, source: str) -> None:
        self.source = source
        self.lines = 0
        self._section: str | None = None
        self._started = False
        self._header: list[str] = []
        self._tables: dict[str, dict[str, dict[str, str]]] = {}
        self._numa: dict[str, str] = {}
        self._first_line = 0
        self._rows: dict[str, list[tuple[int, Evidence]]] = {}  # the lines each GPU's links were read from
        self.matrices: list[TopologyMatrix] = []

    @property
    def busy(self) -> bool:
        """Inside ROCm SMI's report: its matrix rows hold none of the words above."""
        return self._started

    def feed(self, line_no: int, text: str) -> bool:
        """True when the line is rocm-smi's."""
        body = text.strip()
        if not body:
            return self._started
        if body.startswith("="):
            return self._banner(line_no, body)
        if not self._started:
            return False
        if self._section in ("weight", "hops", "type"):
            tree = _parse(body, "header") if body.startswith("GPU") and not self._header else None
            if tree is not None:
                self._header = [str(t) for t in _tokens(tree, "gpu_name")]
                return self._took(line_no, body)
            tree = _parse(body, "row")
            if tree is not None and self._header:
                name = str(next(tree.find_data("gpu_name")).children[0])
                cells = [str(c.children[0]) for c in tree.find_data("cell")]
                table = self._tables.setdefault(self._section, {})
                table[name] = dict(zip(self._header, cells, strict=False))
                if self._section in EVIDENCE_ORDER:  # the weights say nothing the link type and hops do not
                    self._rows.setdefault(name, []).append(
                        (EVIDENCE_ORDER[self._section], Evidence(source=self.source, line=line_no, text=body))
                    )
                return self._took(line_no, body)
        if self._section == "numa":
            tree = _parse(body, "numa")
            if tree is not None:
                what = next(t for t in tree.children if getattr(t, "type", "") == "NUMA_WHAT")
                gpu = "GPU" + re.sub(r"\D", "", str(next(tree.find_data("gpu_ref")).children[0]))
                if str(what) == "Numa Node":
                    self._numa[gpu] = str(next(tree.find_data("numa_value")).children[0])
                    self._rows.setdefault(gpu, []).append(
                        (EVIDENCE_ORDER["numa"], Evidence(source=self.source, line=line_no, text=body))
                    )
                return self._took(line_no, body)
        if body.startswith("WARNING:"):  # ROCm SMI's own notes under its banner
            return self._took(line_no, body)
        self._end()
        return False

    def _banner(self, line_no: int, body: str) -> bool:
        title = SECTION_RE.search(body)
        if not (self._started or title or TITLE in body):
            return False  # another program's line of '=' (a separator, a progress bar): no grammar for it
        if _parse(body, "banner") is None:
            return False
        if TITLE in body:
            self._end()
            self._started, self._first_line = True, line_no
        elif not self._started and title and title[0] != "End of ROCm SMI Log":
            self._started, self._first_line = True, line_no  # a paste that starts at a section
        elif not self._started:
            return False
        if title:
            if title[0] == "End of ROCm SMI Log":
                self._took(line_no, body)
                self._end()
                return True
            self._section = SECTIONS.get(title[1] or title[0])
            self._header = []
        return self._took(line_no, body)

    def _took(self, line_no: int, body: str) -> bool:
        self.lines += 1
        return True

    def _end(self) -> None:
        types = self._tables.get("type") or {}
        if types:
            self.matrices.append(self._matrix(types))
        self._started = False
        self._section = None
        self._header = []
        self._tables = {}
        self._numa = {}
        self._rows = {}

    def _matrix(self, types: dict[str, dict[str, str]]) -> TopologyMatrix:
        gpus = sorted(types, key=lambda g: int(g[3:]))
        links: dict[str, dict[str, str]] = {}
        for a in gpus:
            links[a] = {}
            for b in gpus:
                links[a][b] = "X" if a == b else self._level(types[a].get(b, ""), a, b)
        return TopologyMatrix(
            source=self.source,
            line=self._first_line,
            devices=gpus,
            gpus=gpus,
            links=links,
            numa_affinity=dict(self._numa),
            legend="SYS",
            gpu_link="xGMI",
            row_evidence={gpu: [e for _, e in sorted(self._rows.get(gpu, []), key=lambda r: r[0])] for gpu in gpus},
        )

    def _level(self, kind: str, a: str, b: str) -> str:
        if kind == "XGMI":
            return "XGMI"
        if kind != "PCIE":
            return kind or "N/A"
        if a in self._numa and b in self._numa:
            return "NODE" if self._numa[a] == self._numa[b] else "SYS"
        return "PHB"  # through the CPU's root complex; whether it also crosses sockets is not said

    def finish(self) -> list[TopologyMatrix]:
        self._end()
        return self.matrices


def _parse(text: str, start: str) -> Tree | None:
    return parse_or_none("rocm_smi_topo", start, text)


def _tokens(tree: Tree, rule: str) -> list[str]:
    return [str(node.children[0]) for node in tree.find_data(rule)]
