"""NCCL 2.31's diagnostics reports (grammars/nccl_diag.lark): `NCCL DIAG [OK|INFO] ...` lines of its active checks
at communicator init (P2P between the GPU pairs NCCL will use; network bandwidth between paired nodes) and of its
RAS diagnostics (the ranks' NCCL_* variables compared). They bypass the debug filter, so they reach a job's
stdout whatever NCCL_DEBUG says."""

from __future__ import annotations

import re

from lark import Tree
from lark.exceptions import LarkError

from ncclscope.model import DiagReport, Evidence
from ncclscope.parse.grammars import load, rule_text

KINDS = {
    "p2p_partial": "p2p",
    "net_bw_outlier": "net_bw",
    "env_consistent": "env_consistent",
    "env_differs": "env_differs",
    "incomplete": "incomplete",
}
RANK_SET_RE = re.compile(r"\d+")


def _int(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None


def _float(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


class DiagReader:
    """Reads the `NCCL DIAG` lines of one input."""

    HINT_WORDS: tuple[str, ...] = ("NCCL DIAG",)
    HINT_START = ""
    busy = False  # one line each

    def __init__(self, source: str) -> None:
        self.source = source
        self.reports: list[DiagReport] = []

    def feed(self, line_no: int, text: str) -> bool:
        """True when the line is a diagnostics report."""
        at = text.find("NCCL DIAG")
        if at < 0:
            return False
        start = text.rfind(" ", 0, max(at - 1, 0)) + 1 if at > 0 else 0  # the host:pid before it, if any
        body = text[start:].strip()
        try:
            tree = load("nccl_diag").parse(body)
        except LarkError:
            return False
        self.reports.append(self._report(tree, line_no, text))
        return True

    def _report(self, tree: Tree, line_no: int, text: str) -> DiagReport:
        message = tree.children[-1]
        kind = KINDS.get(str(message.data), "other") if isinstance(message, Tree) else "other"
        origin = rule_text(tree, "origin")
        host, _, rest = (origin or "").partition(":")
        part = message if isinstance(message, Tree) else tree
        ranks = [int(n) for n in RANK_SET_RE.findall(rule_text(part, "rank_set") or "")]
        return DiagReport(
            kind=kind,  # type: ignore[arg-type]
            status=rule_text(tree, "status") or "",
            host=host or None,
            pid=_int(rest.split(":")[0]) if rest else None,
            passed=_int(rule_text(part, "passed")),
            total=_int(rule_text(part, "total")),
            rank=_int(rule_text(part, "rank")),
            node=rule_text(part, "node"),
            nic_kind=rule_text(part, "nic_kind"),
            measured_gbits=_float(rule_text(part, "measured")),
            median_gbits=_float(rule_text(part, "median")),
            comm=rule_text(part, "comm"),
            env_name=rule_text(part, "env_name"),
            env_value=rule_text(part, "env_value"),
            ranks=ranks,
            evidence=Evidence(source=self.source, line=line_no, text=text.strip()),
        )
