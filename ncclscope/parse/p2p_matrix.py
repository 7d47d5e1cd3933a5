"""`nvidia-smi topo -p2p` matrices (grammars/p2p_matrix.lark): per GPU pair, whether the driver allows peer
to peer access (OK) or why not (CNS, GNS, TNS, NS, DR, U).

The header row is the `topo -m` reader's (the same `GPU0 GPU1` line); this reader takes the rows whose
cells are all of this legend's, and the legend. Row i's cells are for GPU0, GPU1, ... in order, as
nvidia-smi prints them.
"""

from __future__ import annotations

import re

from lark.exceptions import LarkError

from ncclscope.model import Evidence, P2pMatrix
from ncclscope.parse.grammars import load

ROW_RE = re.compile(r"^GPU\d+(\s+(X|OK|CNS|GNS|TNS|NS|DR|U))+\s*$")
LEGEND_RE = re.compile(r"^(X|OK|CNS|GNS|TNS|NS|DR|U)\s+=\s")
COMMAND_RE = re.compile(r"nvidia-smi\s+topo\s+--?p2p\s+([rwnap])\b")
CAPABILITY = {"r": "read", "w": "write", "n": "nvlink", "a": "atomics", "p": "prop"}


class P2pMatrixReader:
    """Reads the rows and legend of `nvidia-smi topo -p2p` matrices in one input."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.matrices: list[P2pMatrix] = []
        self._matrix: P2pMatrix | None = None
        self._capability: str | None = None

    # what a line must hold for feed() to do anything while not busy: the command, a row, a legend line
    HINT_WORDS = ("nvidia-smi", "GPU")
    HINT_START = r"(?:X|OK|CNS|GNS|TNS|NS|DR|U)\s+=\s"

    @property
    def busy(self) -> bool:
        """Inside a matrix: the first other line ends it."""
        return self._matrix is not None

    def feed(self, line_no: int, text: str) -> bool:
        """True when the line is a P2P matrix row or legend line (then no other reader needs it)."""
        body = text.strip()
        command = COMMAND_RE.search(body)
        if command is not None:
            self._capability = CAPABILITY[command.group(1)]
            self._matrix = None
            return False  # the command line stays for the readers of command lines
        is_row = ROW_RE.match(body) is not None
        if not is_row and LEGEND_RE.match(body) is None:
            if self._matrix is not None and not body.startswith(("Legend", "GPU")):
                self._matrix = None  # a matrix ends at the first other line (but not at its legend)
            return False
        try:
            tree = load("p2p_matrix").parse(body)
        except LarkError:
            return False
        if tree.data == "legend":
            return True
        name, *cells = (str(token) for token in tree.children)
        matrix = self._matrix
        # a repeated row name or another width starts the next matrix (a matrix always has its first row)
        if matrix is None or name in matrix.cells or len(cells) != len(matrix.cells[matrix.gpus[0]]):
            matrix = self._matrix = P2pMatrix(source=self.source, capability=self._capability)  # type: ignore[arg-type]
            self.matrices.append(matrix)
        matrix.gpus.append(name)
        matrix.cells[name] = {f"GPU{i}": cell for i, cell in enumerate(cells)}
        matrix.evidence[name] = Evidence(source=self.source, line=line_no, text=body)
        return True
