"""`nvidia-smi topo -m` matrices found in a stream of lines (formats.md section D).

The syntax of each line is in grammars/topo_matrix.lark. This module decides which lines to hand
to the grammar, and gives the parsed cells their meaning: the cells of a row are matched to the
header's columns by position (tab-separated rows keep their empty fields; pasted rows whose tabs
became spaces only keep their order).

A matrix block is: the header row, the rows, then optionally (after blank lines) the `Legend:`
block and the `NIC Legend:` block. The whole block may be pasted as shell comments (`#` in front
of every line). The block ends at the first line that is none of these. A paste that lost the
header row starts at a `GPU0 ... X ...` row: the columns are then taken from the rows (nvidia-smi
prints the GPU columns first, a GPU row has its `X` in its own column, NVLink joins only GPUs), and
the matrix says so in its problems.

`TopologyReader.feed()` is called on every non-NCCL line of an input, so lines that cannot start
a matrix are rejected by a substring test before any parsing; nothing here ever raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from lark import Lark, Token, Tree
from lark.exceptions import LarkError

from ncclscope.model import TopologyMatrix
from ncclscope.parse.grammars import load, terminal_regex

_STARTS = (
    "header",
    "tab_row",
    "space_row",
    "legend_title",
    "legend_entry",
    "nic_legend_title",
    "nic_legend_entry",
)

# Longer lines are not matrix lines (an H20 header with 40+ NICs is a few hundred characters).
_MAX_LINE = 20_000
# Problems recorded per matrix, at most (a long garbage tail must not grow the result).
_MAX_PROBLEMS = 50

# Cheap line classification, before the grammar is asked.
# A header starts with GPU0 (or GPUn) followed by another column name, possibly run together.
_COMMAND = re.compile(terminal_regex("topo_matrix", "TOPO_COMMAND"))
_HEADER_START = re.compile(r"GPU[0-9]+\s*(?:GPU[0-9]|NIC[0-9]|[a-z][a-z0-9_]*[0-9]|CPU|NUMA)")
_LEGEND_TITLE = re.compile(r"Legend\s*:")
_NIC_LEGEND_TITLE = re.compile(r"NIC\s+Legend\s*:")
_NIC_LEGEND_ENTRY = re.compile(r"NIC[0-9]+\s*:")
# `X    = Self`: nvidia-smi pads the key; `PATH=/usr/bin` of an environment dump is no legend line.
_LEGEND_ENTRY = re.compile(r"(?:NV#|[A-Z][A-Z0-9]*)\s+=\s")
_ROW_START = re.compile(r"(?:GPU[0-9]|NIC[0-9]|[a-z][a-z0-9_]*[0-9])")

_CPU_AFFINITY = "CPU Affinity"
_NUMA_AFFINITY = "NUMA Affinity"
_GPU_NUMA_ID = "GPU NUMA ID"

# Kinds of cells (rule names of the grammar).
_LINK = "link"
_VALUE_KINDS = ("cpu_list", "not_available")

Cell = tuple[str, str]  # (kind, text)


def _parser() -> Lark:
    return load("topo_matrix", _STARTS)


def _parse(text: str, start: str) -> Tree | None:
    try:
        return _parser().parse(text, start=start)
    except LarkError:
        return None


def _cell(tree: Tree) -> Cell:
    """(kind, text) of a `cell` subtree (link, cpu_list, not_available, unknown_cell)."""
    token = tree.children[0]
    return str(tree.data), str(token)


def _space_words(text: str) -> str:
    return " ".join(text.split())


@dataclass
class _Open:
    """The matrix being read."""

    line: int
    devices: list[str]
    trailing: list[str]
    commented: bool
    phase: str = "rows"  # rows, legend, nic_legend
    links: dict[str, dict[str, str]] = field(default_factory=dict)
    cpu_affinity: dict[str, str] = field(default_factory=dict)
    numa_affinity: dict[str, str] = field(default_factory=dict)
    gpu_numa_id: dict[str, str] = field(default_factory=dict)
    nic_names: dict[str, str] = field(default_factory=dict)
    legend: str = "none"
    problems: list[str] = field(default_factory=list)
    headerless: bool = False  # columns named at the end, from the rows (see the module docstring)
    own_columns: dict[str, str] = field(default_factory=dict)  # headerless: placeholder column -> its row's label

    def problem(self, message: str) -> None:
        if len(self.problems) < _MAX_PROBLEMS:
            self.problems.append(message)
        elif len(self.problems) == _MAX_PROBLEMS:
            self.problems.append("more problems not listed")


class TopologyReader:
    """Finds and parses topology matrices in a stream of lines of one source."""

    def __init__(self, source: str) -> None:
        self.source = source
        self._open: _Open | None = None
        self._done: list[TopologyMatrix] = []
        self._pci_only = False  # the last `nvidia-smi topo` command seen asked for PCIe paths only (-mp)

    # ------------------------------------------------------------------------------------------
    # The interface

    HINT_WORDS = ("GPU", "nvidia-smi")  # what _try_header looks for: outside a matrix, other lines change nothing
    HINT_START = ""

    @property
    def busy(self) -> bool:
        return self._open is not None

    def feed(self, lineno: int, text: str) -> bool:
        """One physical line (1-based lineno). Returns True when the line belongs to a matrix
        (header, row, legend, NIC legend, blank line inside the block)."""
        try:
            if self._open is not None:
                return self._feed_open(lineno, text)
            return self._try_header(lineno, text)
        except Exception as exc:  # a bug here must not stop the reading of the input
            if self._open is not None:
                self._open.problem(f"line {lineno}: internal error {type(exc).__name__}: {exc}")
                try:
                    self._close()
                except Exception:
                    self._open = None
            return False

    def finish(self) -> list[TopologyMatrix]:
        """Called once at the end of the source; returns every matrix found, in order."""
        try:
            self._close()
        except Exception:  # pragma: no cover - defensive
            self._open = None
        return list(self._done)

    # ------------------------------------------------------------------------------------------
    # Outside a matrix: only a header can start one.

    def _try_header(self, lineno: int, text: str) -> bool:
        if "nvidia-smi" in text and (command := _COMMAND.search(text)):
            self._pci_only = command[1] in ("-mp", "--matrix_pci")
            return False  # the prompt line is the command's, not the matrix's (other readers see it too)
        if "GPU" not in text or len(text) > _MAX_LINE:
            return False
        body = text.lstrip()
        commented = body.startswith("#")
        if commented:
            body = body.lstrip("#").lstrip()
        if not _HEADER_START.match(body):
            return self._try_headerless(lineno, body.rstrip(), commented)
        tree = _parse(body.rstrip(), "header")
        if tree is None:
            return False
        devices: list[str] = []
        trailing: list[str] = []
        for child in tree.children:
            if not isinstance(child, Tree):
                continue  # TAB
            name = str(child.children[0])
            if child.data == "trailing_column":
                trailing.append(_space_words(name))
            else:
                devices.append(name)
        if len(devices) + len(trailing) < 2 or len(set(devices)) != len(devices):
            return False
        self._open = _Open(line=lineno, devices=devices, trailing=trailing, commented=commented)
        return True

    def _try_headerless(self, lineno: int, body: str, commented: bool) -> bool:
        """A row with its self cell `X` where no header came first: the start of a matrix whose
        header was not pasted. Its columns are placeholders until the rows have been read."""
        if not _ROW_START.match(body) or not body.startswith("GPU"):
            return False
        tree = _parse(body, "space_row")
        if tree is None:
            return False
        cells = [_cell(c) for c in tree.children[1:] if isinstance(c, Tree)]
        n = next((i for i, (kind, _) in enumerate(cells) if kind != _LINK), len(cells))
        if n < 2 or ("link", "X") not in cells[:n]:
            return False
        trailing = [_CPU_AFFINITY, _NUMA_AFFINITY, _GPU_NUMA_ID][: min(3, len(cells) - n)]
        self._open = _Open(
            line=lineno, devices=[f"#{i}" for i in range(n)], trailing=trailing, commented=commented, headerless=True
        )
        self._open.problem(f"line {lineno}: no header row; the columns are taken from the rows")
        return self._read_row(lineno, body)

    # ------------------------------------------------------------------------------------------
    # Inside a matrix

    def _feed_open(self, lineno: int, text: str) -> bool:
        m = self._open
        assert m is not None
        body = text.strip()
        if body.startswith("#"):
            if not m.commented:
                self._close()
                return self._try_header(lineno, text)
            body = body.lstrip("#").strip()
        elif m.commented and body:
            self._close()
            return self._try_header(lineno, text)
        if not body:
            return True
        if len(body) > _MAX_LINE:
            self._close()
            return False

        if _NIC_LEGEND_TITLE.match(body):
            if _parse(body, "nic_legend_title") is not None:
                m.phase = "nic_legend"
                return True
        elif _LEGEND_TITLE.match(body):
            if _parse(body, "legend_title") is not None:
                m.phase = "legend"
                return True
        elif _NIC_LEGEND_ENTRY.match(body):
            tree = _parse(body, "nic_legend_entry")
            if tree is not None:
                nic, name = (str(t) for t in tree.children)
                m.nic_names[nic] = name
                m.phase = "nic_legend"
                return True
        elif _LEGEND_ENTRY.match(body) and m.phase != "nic_legend":
            tree = _parse(body, "legend_entry")
            if tree is not None:
                key = str(tree.children[0])
                if key == "SOC":
                    m.legend = "SOC"
                elif key in ("SYS", "NODE") and m.legend == "none":
                    m.legend = "SYS"
                m.phase = "legend"
                return True

        if m.phase == "rows" and _ROW_START.match(body):
            if self._read_row(lineno, body):
                return True
        # Not a line of this matrix: it ends here. The line may start the next one.
        self._close()
        return self._try_header(lineno, text)

    def _read_row(self, lineno: int, body: str) -> bool:
        """Parses a row and records it; False when the line is not a row of a matrix."""
        m = self._open
        assert m is not None
        n = len(m.devices)
        tabbed = False
        tree = _parse(body, "tab_row") if "\t" in body else None
        if tree is not None:
            tabbed = True
            fields: list[Cell | None] = [None]
            for child in tree.children[1:]:
                if isinstance(child, Token):
                    fields.append(None)  # a TAB opens the next field, empty until a cell fills it
                else:
                    fields[-1] = _cell(child)
            fields = fields[1:]
            cells, rest = fields[:n], fields[n:]
        else:
            tree = _parse(body, "space_row")
            if tree is None:
                return False
            items = [_cell(c) for c in tree.children[1:] if isinstance(c, Tree)]
            # The device cells end at the first affinity value (a short row) or after n cells.
            k = next((i for i, (kind, _) in enumerate(items[:n]) if kind in _VALUE_KINDS), min(n, len(items)))
            cells, rest = list(items[:k]), list(items[k:])

        label = str(tree.children[0].children[0])
        links = sum(1 for c in cells if c is not None and c[0] == _LINK)
        if links * 2 <= len(cells) or links == 0:
            return False  # not a topology row (e.g. an `nvidia-smi topo -p2p` row of OK/GNS cells)
        if m.headerless:
            label = self._headerless_label(label, cells)

        where = f"line {lineno}"
        if label in m.links:
            m.problem(f"{where}: row {label} repeated; the first one is kept")
            return True
        if label not in m.devices:
            m.problem(f"{where}: row {label} is not a column of the header")
        row: dict[str, str] = {}
        m.links[label] = row
        if len(cells) != n:
            m.problem(f"{where}: row {label} has {len(cells)} device cells, the header has {n} devices")
        for device, cell in zip(m.devices, cells, strict=False):
            if cell is None:
                m.problem(f"{where}: row {label}: empty cell for {device}")
            elif cell[0] != _LINK:
                m.problem(f"{where}: row {label}: cell {cell[1]!r} for {device} is not a link type")
            else:
                row[device] = cell[1]
        if tabbed:
            self._tab_affinities(where, label, rest)
        else:
            self._space_affinities(where, label, [c for c in rest if c is not None])
        return True

    def _headerless_label(self, label: str, cells: list[Cell | None]) -> str:
        """The placeholder column of a row of a matrix without header: where its X is."""
        m = self._open
        assert m is not None
        self_cells = [i for i, c in enumerate(cells) if c == (_LINK, "X")]
        if len(self_cells) == 1 and self_cells[0] < len(m.devices):
            m.own_columns.setdefault(f"#{self_cells[0]}", label)
            return f"#{self_cells[0]}"
        return label

    def _name_headerless_columns(self, m: _Open) -> None:
        """GPU columns come first: as many as the highest column that is a GPU row's own or holds an
        NVLink (NV#, only ever between GPUs); the rest are NICs."""
        own = m.own_columns
        gpu_columns = [int(key[1:]) for key, label in own.items() if label.startswith("GPU")]
        nvlink = [i for row in m.links.values() for i, d in enumerate(m.devices) if row.get(d, "").startswith("NV")]
        k = max(gpu_columns + nvlink, default=-1) + 1
        names = {d: (f"GPU{i}" if i < k else f"NIC{i - k}") for i, d in enumerate(m.devices)}
        for key, label in own.items():
            if label != names[key]:
                m.problem(f"row {label} has its self cell in the column of {names[key]}")
        m.devices = [names[d] for d in m.devices]
        m.links = {names.get(a, a): {names[b]: v for b, v in row.items()} for a, row in m.links.items()}
        for values in (m.cpu_affinity, m.numa_affinity, m.gpu_numa_id):
            for key in list(values):
                values[names.get(key, key)] = values.pop(key)
        m.problems.append(f"columns from the rows: {', '.join(m.devices)}")

    def _tab_affinities(self, where: str, label: str, rest: list[Cell | None]) -> None:
        """Positional: one field per trailing column, except that empty fields are skipped before
        GPU NUMA ID (GPU rows of current drivers print an extra empty field there)."""
        m = self._open
        assert m is not None
        i = 0
        for column in m.trailing:
            if column == _GPU_NUMA_ID:
                while i < len(rest) and rest[i] is None:
                    i += 1
            if i >= len(rest):
                break
            cell = rest[i]
            i += 1
            if cell is not None:
                self._affinity(where, label, column, cell)
        extra = [c[1] for c in rest[i:] if c is not None]
        if extra:
            m.problem(f"{where}: row {label}: unexpected cells after the device cells: {' '.join(extra)}")

    def _space_affinities(self, where: str, label: str, rest: list[Cell]) -> None:
        """Pasted rows lost their empty cells: only what is there is recorded."""
        m = self._open
        assert m is not None
        columns = list(m.trailing)
        if len(rest) > len(columns):
            extra = " ".join(c[1] for c in rest[len(columns) :])
            m.problem(f"{where}: row {label}: unexpected cells after the device cells: {extra}")
            rest = rest[: len(columns)]
        if len(rest) < len(columns) and rest and columns and columns[-1] == _GPU_NUMA_ID:
            # GPU NUMA ID is printed on every GPU row (N/A on most systems): the last cell is it.
            self._affinity(where, label, _GPU_NUMA_ID, rest[-1])
            rest, columns = rest[:-1], columns[:-1]
        for column, cell in zip(columns, rest, strict=False):
            self._affinity(where, label, column, cell)

    def _affinity(self, where: str, label: str, column: str, cell: Cell) -> None:
        m = self._open
        assert m is not None
        kind, value = cell
        if kind == _LINK:
            m.problem(f"{where}: row {label}: link type {value!r} found in the {column} column")
            return
        target = {
            _CPU_AFFINITY: m.cpu_affinity,
            _NUMA_AFFINITY: m.numa_affinity,
            _GPU_NUMA_ID: m.gpu_numa_id,
        }[column]
        target[label] = value

    # ------------------------------------------------------------------------------------------

    def _close(self) -> None:
        m, self._open = self._open, None
        if m is None or not m.links:
            return  # a header with no row after it is not a matrix
        if m.headerless:
            self._name_headerless_columns(m)
        missing = [d for d in m.devices if d not in m.links]
        if missing:
            m.problem(f"no row for {', '.join(missing)}")
        gpus = [d for d in m.devices if d.startswith("GPU")]
        self._done.append(
            TopologyMatrix(
                source=self.source,
                line=m.line,
                devices=m.devices,
                gpus=gpus,
                nics=[d for d in m.devices if d not in gpus],
                links=m.links,
                cpu_affinity=m.cpu_affinity,
                numa_affinity=m.numa_affinity,
                gpu_numa_id=m.gpu_numa_id,
                nic_names=m.nic_names,
                legend=m.legend,  # type: ignore[arg-type]
                problems=m.problems,
                pci_only=self._pci_only,
            )
        )
        self._pci_only = False
