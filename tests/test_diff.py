"""`ncclscope diff BEFORE AFTER`: busbw per collective and size, regressions, findings that changed."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from ncclscope.render.diff import (
    RunDiff,
    SeriesDiff,
    diff_plot_png,
    diff_runs,
    diff_to_json,
    exit_code,
    render_diff_text,
)

from conftest import analysis_of

BEFORE = "fixtures/diff/before_allreduce_allgather_8xh100.txt"
AFTER = "fixtures/diff/after_allreduce_allgather_8xh100.txt"
STABLE_BEFORE = "fixtures/diff/stable_before_8xh100.txt"
STABLE_AFTER = "fixtures/diff/stable_after_8xh100.txt"
DEMO = "fixtures/mixed/multi_host_job_problems.txt"
HEALTHY_LOG = "fixtures/nccl/v2_28_healthy_multinode_gdr.log"
MODERATE = "fixtures/bench/moderate_allreduce_8xh100.txt"
MIB, GIB = 2**20, 2**30


@pytest.fixture(scope="module")
def regressed() -> RunDiff:
    return diff_runs(analysis_of(BEFORE), analysis_of(AFTER))


@pytest.fixture(scope="module")
def stable() -> RunDiff:
    return diff_runs(analysis_of(STABLE_BEFORE), analysis_of(STABLE_AFTER))


def series(diff: RunDiff, collective: str) -> SeriesDiff:
    (found,) = [s for s in diff.series if s.key.collective == collective]
    return found


def text_of(diff: RunDiff) -> str:
    out = io.StringIO()
    render_diff_text(diff, Console(file=out, width=160, no_color=True))
    return out.getvalue()


def test_series_are_matched_by_collective_type_redop_and_ranks(regressed: RunDiff) -> None:
    keys = [(s.key.collective, s.key.type, s.key.redop, s.key.nranks) for s in regressed.series]
    assert keys == [("all_gather", "float", "none", 8), ("all_reduce", "float", "sum", 8)]
    assert not regressed.series_only_before and not regressed.series_only_after


def test_regression_is_flagged_exactly_at_the_large_sizes_that_lost_bandwidth(regressed: RunDiff) -> None:
    assert [s.size for s in series(regressed, "all_reduce").regressions] == [2**k for k in range(28, 34)]
    assert [s.size for s in series(regressed, "all_gather").regressions] == [2**k for k in range(30, 34)]
    assert regressed.regression_count == 10


def test_ratio_is_after_over_before_of_the_better_placement(regressed: RunDiff) -> None:
    one_gib = next(s for s in series(regressed, "all_reduce").sizes if s.size == GIB)
    # 1 GiB row: out-of-place / in-place busbw, before 469.27 / 465.49 and after 374.26 / 375.11
    assert one_gib.before_busbw == pytest.approx(469.27)
    assert one_gib.after_busbw == pytest.approx(375.11)
    assert one_gib.ratio == pytest.approx(375.11 / 469.27, abs=1e-4)
    for s in series(regressed, "all_reduce").regressions:
        assert s.ratio == pytest.approx(0.80, abs=0.02)
    for s in series(regressed, "all_gather").regressions:
        assert s.ratio == pytest.approx(0.85, abs=0.02)


def test_a_loss_within_the_threshold_is_not_flagged(regressed: RunDiff) -> None:
    mid = next(s for s in series(regressed, "all_reduce").sizes if s.size == 128 * MIB)
    assert mid.ratio is not None and 0.9 < mid.ratio < 0.97
    assert not mid.regression


def test_threshold_decides_what_counts_as_a_regression() -> None:
    before, after = analysis_of(BEFORE), analysis_of(AFTER)
    assert diff_runs(before, after, threshold=0.18).regression_count == 6  # all_reduce's 20% only
    assert diff_runs(before, after, threshold=0.25).regression_count == 0
    with pytest.raises(ValueError):
        diff_runs(before, after, threshold=10)


def test_sizes_measured_on_one_side_only_are_listed(regressed: RunDiff) -> None:
    all_reduce = series(regressed, "all_reduce")
    assert all_reduce.only_after == [16 * GIB] and all_reduce.only_before == []
    extra = all_reduce.sizes[-1]
    assert (extra.size, extra.before_busbw, extra.ratio, extra.regression) == (16 * GIB, None, None, False)


def test_summary_judges_each_collective_at_the_largest_common_size(regressed: RunDiff) -> None:
    by_name = {s.key.collective: s for s in regressed.summary}
    assert by_name["all_reduce"].size == 8 * GIB  # not 16 GiB, which only AFTER measured
    assert by_name["all_reduce"].ratio == pytest.approx(0.80, abs=0.02)
    assert by_name["all_reduce"].regression and by_name["all_reduce"].regressed_sizes == 6
    assert by_name["all_gather"].ratio == pytest.approx(0.85, abs=0.02)


def test_identical_runs_within_noise_flag_nothing(stable: RunDiff) -> None:
    assert stable.regression_count == 0
    assert all(s.ratio is not None and 0.97 <= s.ratio <= 1.03 for s in stable.series[0].sizes)
    assert not stable.findings_appeared and not stable.findings_disappeared
    assert exit_code(stable) == 0


def test_exit_code_is_one_on_regression_unless_told_not_to_fail(regressed: RunDiff) -> None:
    assert exit_code(regressed) == 1
    assert exit_code(regressed, fail_on_regression=False) == 0


def test_findings_that_disappear_when_the_job_is_fixed() -> None:
    diff = diff_runs(analysis_of(DEMO), analysis_of(HEALTHY_LOG, STABLE_AFTER))
    gone = {c.code for c in diff.findings_disappeared}
    assert {"NET001", "NET002", "GDR001", "VER001", "BW001"} <= gone
    assert not diff.findings_appeared
    # the demo's 16-rank benchmark has no counterpart in an 8-rank one: listed, not compared
    assert [k.nranks for k in diff.series_only_before] == [16]
    assert [k.nranks for k in diff.series_only_after] == [8]
    assert diff.series == [] and exit_code(diff) == 0


def test_findings_that_appear_when_the_job_breaks() -> None:
    diff = diff_runs(analysis_of(HEALTHY_LOG, STABLE_AFTER), analysis_of(DEMO))
    assert {"NET001", "NET002", "GDR001", "VER001"} <= {c.code for c in diff.findings_appeared}
    assert not diff.findings_disappeared


def test_a_finding_only_appears_when_it_is_new(regressed: RunDiff) -> None:
    # AFTER's all_reduce tops out at 380 GB/s, 79% of the NVLS figure: BW001 appears
    assert [c.code for c in regressed.findings_appeared] == ["BW001"]
    assert not regressed.findings_disappeared


def test_a_finding_whose_numbers_changed_persists() -> None:
    # BW001 at 56% of the expected figure (270 GB/s) before, at 79% (380 GB/s) after: the same finding
    diff = diff_runs(analysis_of(MODERATE), analysis_of(AFTER))
    assert "BW001" in {c.code for c in diff.findings_persisting}
    assert "BW001" not in {c.code for c in diff.findings_appeared + diff.findings_disappeared}


def test_text_names_the_regressed_sizes_and_ratios(regressed: RunDiff) -> None:
    text = text_of(regressed)
    assert "10 sizes regressed by more than 10%" in text
    assert "REGRESSION" in text and "0.80x (-20%)" in text and "only after" in text
    assert "Findings that appeared" in text and "BW001" in text


def test_text_of_a_stable_pair_says_nothing_regressed(stable: RunDiff) -> None:
    text = text_of(stable)
    assert "no busbw regression beyond 10%" in text
    assert "REGRESSION" not in text


def test_json_round_trips(regressed: RunDiff) -> None:
    data = json.loads(diff_to_json(regressed))
    assert data["regression_count"] == 10 and data["threshold"] == 0.10
    assert RunDiff.model_validate_json(diff_to_json(regressed)) == regressed


def test_plot_is_a_png_file(regressed: RunDiff, tmp_path: Path) -> None:
    target = tmp_path / "diff.png"
    assert diff_plot_png(regressed, target) == target
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == ["diff.png"]  # no temporary file left behind


def test_no_plot_without_a_series_in_common(tmp_path: Path) -> None:
    diff = diff_runs(analysis_of(DEMO), analysis_of(STABLE_AFTER))
    assert diff_plot_png(diff, tmp_path / "diff.png") is None
    assert not any(tmp_path.iterdir())


def test_plot_into_a_missing_folder_fails_without_leaving_a_file(regressed: RunDiff, tmp_path: Path) -> None:
    with pytest.raises(OSError):
        diff_plot_png(regressed, tmp_path / "missing" / "diff.png")
    assert not any(tmp_path.iterdir())
