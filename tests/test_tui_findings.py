"""The Findings screen on its own (PaneHarness): order, summary, detail, evidence lines that jump to the raw log."""

from __future__ import annotations

import re
from pathlib import Path

from textual.widgets import OptionList, Static
from tui_harness import PaneHarness, case_view

from ncclscope.case.read import read_case
from ncclscope.diagnose.engine import analyze
from ncclscope.tui.findings import FindingsPane
from ncclscope.tui.view import CaseView

JOB = "fixtures/mixed/multi_host_job_problems.txt"
SIZE = (120, 40)


def text_of(pane: FindingsPane, selector: str) -> str:
    return str(pane.query_one(selector, Static).render())


async def test_findings_open_on_the_verdict_then_each_root_cause_before_what_it_explains() -> None:
    view = case_view(JOB)
    app = PaneHarness(FindingsPane, view)
    async with app.run_test(size=SIZE):
        pane = app.query_one(FindingsPane)
        listed = [str(o.prompt) for o in pane.query_one("#findings-list", OptionList).options]
        assert len(listed) == len(view.analysis.findings)
        codes = [re.search(r"\[b\](\w+)\[/\]", p)[1] for p in listed]
        # NET002 (root cause) heads its story: BW001 and NET001, which it explains, follow it
        assert codes[:3] == ["NET002", "BW001", "NET001"], codes
        assert "root cause" in listed[0]
        assert codes[-1] == "EVD001" or "EVD001" not in codes  # what could not be judged comes last
        summary = text_of(pane, "#findings-summary")
        assert "5 errors" in summary and "4 warnings" in summary and "2 infos" in summary
        assert "Root cause: NET002 rdma-unavailable (explains BW001, NET001, NET007)" in summary
        assert "fix: Install rdma-core" in summary


async def test_the_detail_shows_the_highlighted_finding_with_its_fix_and_evidence() -> None:
    view = case_view(JOB)
    app = PaneHarness(FindingsPane, view)
    async with app.run_test(size=SIZE) as pilot:
        pane = app.query_one(FindingsPane)
        pane.action_focus_list()
        await pilot.press("down")
        finding = pane.selected
        assert finding is not None and finding.code == "BW001"  # the second: NET002, the root cause, comes first
        detail = text_of(pane, "#finding-text")
        assert finding.fix[:40] in detail.replace("\n", " ")
        evidence = pane.query_one("#finding-evidence", OptionList)
        assert evidence.option_count == len(finding.evidence)
        assert f"{JOB.split('/')[-1]}:{finding.evidence[0].line}" in str(evidence.get_option_at_index(0).prompt)


async def test_the_evidence_title_counts_the_lines_shown_and_the_lines_there_are() -> None:
    app = PaneHarness(FindingsPane, case_view(JOB))
    async with app.run_test(size=SIZE) as pilot:
        pane = app.query_one(FindingsPane)
        titles = {}
        for code in ("CH001", "NET002", "NET001"):  # one evidence line; two; four shown of six
            assert pane.select_code(code)
            await pilot.pause()
            titles[code] = text_of(pane, "#finding-evidence-title").split(";")[0]
        assert titles == {
            "CH001": "Evidence (1 line",
            "NET002": "Evidence (2 lines",
            "NET001": "Evidence (4 of 6 lines",
        }


async def test_enter_on_an_evidence_line_asks_for_the_raw_log_at_that_line() -> None:
    view = case_view(JOB)
    app = PaneHarness(FindingsPane, view)
    async with app.run_test(size=SIZE) as pilot:
        pane = app.query_one(FindingsPane)
        assert pane.select_code("NET001")
        await pilot.press("enter", "down", "enter")
        second = pane.selected.evidence[1]  # type: ignore[union-attr]
        assert app.jumps == [(second.source, second.line)]


async def test_without_findings_the_screen_says_so_and_what_was_read() -> None:
    full = case_view(JOB)
    nothing_selected = CaseView(analyze(full.case, select=["NOSUCH"]), full.files)
    app = PaneHarness(FindingsPane, nothing_selected)
    async with app.run_test(size=SIZE):
        summary = text_of(app.query_one(FindingsPane), "#findings-summary")
        assert summary.startswith("No findings.")
        assert "multi_host_job_problems.txt (" in summary and "nccl_log" in summary


async def test_read_problems_are_shown_one_per_line() -> None:
    app = PaneHarness(FindingsPane, case_view(JOB))
    async with app.run_test(size=SIZE):
        pane = app.query_one(FindingsPane)
        pane.show_problems(["missing.log: no such file or directory", "x.log: empty input"])
        problems = text_of(pane, "#findings-problems")
        assert problems.splitlines() == [
            "Read problem: missing.log: no such file or directory",
            "Read problem: x.log: empty input",
        ]


async def test_before_the_case_arrives_the_screen_says_it_is_reading() -> None:
    app = PaneHarness(FindingsPane, None)
    async with app.run_test(size=SIZE):
        assert text_of(app.query_one(FindingsPane), "#findings-summary") == "Reading inputs..."


def test_findings_pane_snapshot_with_a_finding_selected(repo_cwd: Path, snap_compare) -> None:  # type: ignore[no-untyped-def]
    # Read by relative path, so that the evidence lines name the fixture the same way on every machine.
    outcome = read_case([JOB], jobs=1)
    view = CaseView(analyze(outcome.case), {JOB: JOB})
    assert snap_compare(PaneHarness(FindingsPane, view), terminal_size=SIZE, press=["down", "down"])
