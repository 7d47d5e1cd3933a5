"""`ncclscope tui RUN_DIR`: a directory written by `ncclscope run` opens in the TUI as its evidence only."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from textual.widgets import DataTable

from ncclscope.model import RunRecord
from ncclscope.tui.app import NcclscopeApp
from ncclscope.tui.loading import prepare_inputs

from conftest import REPO

GLOO_RUN = REPO / "fixtures/runner/torch_bench_gloo_2ranks.txt"


def run_directory(tmp_path: Path) -> Path:
    """A run directory as `ncclscope run` leaves it: the benchmark's output, a manifest, and the reports it
    wrote (which must not be read back as inputs)."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    shutil.copy(GLOO_RUN, run_dir / "all_reduce.stdout.txt")
    (run_dir / "report.html").write_text("<html>an earlier report</html>\n")
    (run_dir / "findings.json").write_text('{"findings": []}\n')
    manifest = RunRecord(backend="torch", inputs=["all_reduce.stdout.txt"])
    (run_dir / "manifest.json").write_text(manifest.model_dump_json())
    return run_dir


async def test_a_run_directory_opens_with_its_benchmarks(tmp_path: Path) -> None:
    app = NcclscopeApp(prepare_inputs([str(run_directory(tmp_path))]))
    async with app.run_test(size=(140, 45)) as pilot:

        async def wait() -> None:
            while app.parsing:
                await pilot.pause(0.05)

        await asyncio.wait_for(wait(), 120)  # a guard against a hang, not a timing assertion
        assert app.view is not None
        assert [Path(s.path).name for s in app.view.case.sources] == ["all_reduce.stdout.txt"]
        assert app.view.case.run is not None and app.view.case.run.backend == "torch"
        await pilot.press("5")
        await pilot.pause()
        runs = app.query_one("#bench-runs", DataTable)
        assert runs.row_count == 7  # the seven collectives of the captured gloo run
