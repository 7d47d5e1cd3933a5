"""What PyTorch's Flight Recorder analyzer (fr_trace) prints, as text (grammars/fr_trace_text.lark): its report
of a collective that not all ranks joined, and its side-by-side view of the ranks' entries.

A report begins at `Not all ranks joining collective N at entry M` and goes on while its `name: value` lines
do. The view begins at a header of two or more `Rank N` columns; each row holds one entry per rank in the
columns the header set, and a rank whose column ends before the others' did not join the entry where it
ends: the first such row is the collective it never joined.
"""

from __future__ import annotations

import re

from lark import Tree

from ncclscope.model import Evidence, FrTraceReport
from ncclscope.parse.grammars import parse_or_none, rule_text

MISMATCH = "Not all ranks joining collective"  # a report's first words: the one test before the grammar
REPORT_FIELDS = ("group_info", "collective", "missing", "sizes", "expected", "state")
HEADER_RE = re.compile(r"Rank \d+")


class FrTraceTextReader:
    """Reads the lines of one input that fr_trace printed."""

    HINT_WORDS: tuple[str, ...] = (MISMATCH, "input_sizes=")
    HINT_START = r"Rank \d+\s{2,}Rank \d+"

    def __init__(self, source: str) -> None:
        self.source = source
        self.reports: list[FrTraceReport] = []
        self.lines = 0
        self._report: FrTraceReport | None = None
        self._columns: list[tuple[int, int]] = []  # the view's (start, rank) per column
        self._rows: list[tuple[Evidence, dict[int, Tree]]] = []

    @property
    def busy(self) -> bool:
        return self._report is not None or bool(self._columns)

    def feed(self, line_no: int, text: str) -> bool:
        """True when the line is fr_trace's."""
        body = text.strip()
        if self._report is None and not self._columns and not body.startswith(MISMATCH) and "Rank " not in body:
            return False  # most lines: none of fr_trace's
        evidence = Evidence(source=self.source, line=line_no, text=body)
        if self._report is not None:
            if self._report_line(body, evidence):
                return self._took()
            self._report = None
        if self._columns:
            if self._view_line(text, body, evidence):
                return self._took()
            self._end_view()
        tree = _parse(body, "mismatch") if body.startswith(MISMATCH) else None
        if tree is not None:
            self._report = FrTraceReport(
                source=self.source, form="report", seq=_int(tree, "coll_seq"), entry=_int(tree, "entry"),
                evidence=[evidence],
            )  # fmt: skip
            self.reports.append(self._report)
            return self._took()
        if len(HEADER_RE.findall(body)) >= 2 and _parse(body, "view_header") is not None:
            self._columns = [(m.start(), int(m.group()[5:])) for m in HEADER_RE.finditer(text)]
            self._rows = []
            return self._took()
        return False

    def _took(self) -> bool:
        self.lines += 1
        return True

    def _report_line(self, body: str, evidence: Evidence) -> bool:
        report = self._report
        assert report is not None
        for start in REPORT_FIELDS:
            tree = _parse(body, start)
            if tree is None:
                continue
            if start == "group_info":
                report.group = rule_text(tree, "group")
            elif start == "collective":
                report.collective = (rule_text(tree, "coll_name") or "").split(":")[-1]
            elif start == "missing":
                report.missing_ranks = sorted(int(str(r.children[0])) for r in tree.find_data("rank"))
            elif start == "sizes" and str(tree.children[0]) == "input":
                report.input_sizes = rule_text(tree, "size_list")
            elif start == "expected":
                report.expected_ranks = _int(tree, "expected_ranks")
            elif start == "state":
                report.state = rule_text(tree, "coll_state")
            report.evidence.append(evidence)
            return True
        return body.startswith(("output sizes", "collective stack trace")) or (
            bool(report.evidence) and body.endswith(tuple(")0123456789")) and " at " in body  # stack frames
        )

    def _view_line(self, text: str, body: str, evidence: Evidence) -> bool:
        if _parse(body, "view_rule") is not None:
            return True
        cells: dict[int, Tree] = {}
        bounds = [start for start, _ in self._columns] + [len(text) + 1]
        for (start, rank), end in zip(self._columns, bounds[1:], strict=False):
            piece = text[start:end].strip()
            if not piece:
                continue
            tree = _parse(piece, "cell")
            if tree is None:
                return False
            cells[rank] = tree
        if not cells:
            return False
        self._rows.append((evidence, cells))
        return True

    def _end_view(self) -> None:
        ranks = [rank for _, rank in self._columns]
        for index, (evidence, cells) in enumerate(self._rows, start=1):
            missing = [r for r in ranks if r not in cells]
            if not missing:
                continue
            first = next(iter(cells.values()))
            self.reports.append(
                FrTraceReport(
                    source=self.source,
                    form="view",
                    collective=(rule_text(first, "op_name") or "").split(":")[-1],
                    seq=index,
                    missing_ranks=missing,
                    present_ranks=sorted(cells),
                    expected_ranks=len(ranks),
                    state=rule_text(first, "coll_state"),
                    input_sizes=rule_text(first, "size_list_cell"),
                    evidence=[evidence],
                )
            )
            break
        self._columns, self._rows = [], []

    def finish(self) -> list[FrTraceReport]:
        if self._columns:
            self._end_view()
        self._report = None
        return self.reports


def _parse(text: str, start: str) -> Tree | None:
    return parse_or_none("fr_trace_text", start, text)


def _int(tree: Tree, rule: str) -> int | None:
    value = rule_text(tree, rule)
    return int(value) if value and value.isdigit() else None
