"""Issue 43: what PyTorch's Flight Recorder analyzer (fr_trace) prints, read as facts (parse/fr_trace_text.py), and
HANG001 from them."""

from __future__ import annotations

from ncclscope.case.read import read_case
from ncclscope.diagnose.engine import analyze

from conftest import REPO

REPORT = str(REPO / "fixtures/hang/fr_trace_report_rank_missing.txt")
VIEW = str(REPO / "fixtures/hang/fr_trace_view_rank_missing.txt")


def test_the_analyzer_s_report_names_the_missing_ranks_and_the_collective() -> None:
    case = read_case([REPORT], jobs=1).case
    (report,) = case.fr_trace_reports
    assert (report.form, report.group, report.collective, report.seq, report.entry) == (
        "report", "3:tp", "reduce_scatter_tensor_coalesced", 1207, 1206
    )  # fmt: skip
    assert (report.missing_ranks, report.expected_ranks, report.state) == ([5, 7], 8, "scheduled")
    assert [e.line for e in report.evidence] == [2, 3, 4, 5, 6, 7, 8, 9]
    (finding,) = [f for f in analyze(case).findings if f.code == "HANG001"]
    assert finding.severity == "error" and finding.ranks == [5, 7]
    assert "ranks 5, 7 of the 8 expected of process group 3:tp never joined collective 1207" in finding.message


def test_the_side_by_side_view_gives_the_rank_whose_column_ends_first() -> None:
    case = read_case([VIEW], jobs=1).case
    (report,) = case.fr_trace_reports
    assert (report.form, report.collective, report.seq, report.missing_ranks, report.present_ranks) == (
        "view", "all_reduce", 5, [1], [0, 2]
    )  # fmt: skip
    assert report.evidence[0].line == 7
    (finding,) = [f for f in analyze(case).findings if f.code == "HANG001"]
    assert "rank 1 never joined entry 5 (all_reduce" in finding.message


def test_a_view_where_every_rank_has_every_entry_reports_nothing(tmp_path) -> None:
    lines = open(VIEW, encoding="utf-8").read().splitlines()[:-1]  # without the entry rank 1 lacks
    whole = tmp_path / "view.txt"
    whole.write_text("\n".join(lines) + "\n", encoding="utf-8")
    case = read_case([str(whole)], jobs=1).case
    assert case.fr_trace_reports == []
    assert not [f for f in analyze(case).findings if f.code == "HANG001"]
