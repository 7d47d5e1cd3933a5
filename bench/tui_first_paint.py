"""How fast `ncclscope tui` opens a large log: first paint, raw log lines, findings, a key press while parsing.

The app runs headless (Textual's `App.run_test`) in this process, on the benchmark's synthetic log
(`bench/generate_log.py`, generated once and cached like `bench/run_bench.py` does). Printed, next to
baselines run on the same file (`wc -l`, `grep -c`, `ncclscope analyze`):

* first paint: from before the TUI's modules are imported to the first screen painted (Findings, with the
  progress bar), the time a user waits for the interface;
* raw log lines: to the first lines of the log shown on the Raw log screen (key 6 pressed at once);
* key answered: the time one key press (switching tabs) takes while parsing runs;
* findings: until parsing and analysis end and the findings are shown.

Usage::

    python bench/tui_first_paint.py                  # 1 GB log
    python bench/tui_first_paint.py --size-mb 100
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

import run_bench  # noqa: E402  (sibling module: the log cache)

FIRST_PAINT_TARGET_S = 1.0


async def measure_app(path: str) -> dict[str, float]:
    """Seconds from the start to each milestone of one headless TUI session."""
    start = time.perf_counter()
    from textual.widgets import TabbedContent

    from ncclscope.tui.app import NcclscopeApp
    from ncclscope.tui.loading import prepare_inputs

    app = NcclscopeApp(prepare_inputs([path]))
    figures: dict[str, float] = {}
    async with app.run_test(size=(140, 45)) as pilot:
        figures["first paint"] = time.perf_counter() - start
        await pilot.press("6")
        while app.raw_log.current is None:
            await pilot.pause(0.01)
        figures["raw log lines"] = time.perf_counter() - start
        if app.parsing:
            pressed = time.perf_counter()
            await pilot.press("2")
            assert app.query_one(TabbedContent).active == "hosts"
            figures["key answered while parsing"] = time.perf_counter() - pressed
        while app.parsing:
            await pilot.pause(0.1)
        figures["findings shown"] = time.perf_counter() - start
        figures["findings"] = len(app.view.analysis.findings) if app.view else 0
    return figures


def timed(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=run_bench.child_env()
    )
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=1024)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/ncclscope-bench"))
    args = parser.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    (path,) = run_bench.ensure_log(args.workdir, args.size_mb, args.seed, 1)
    size_mb = Path(path).stat().st_size / run_bench.MB
    print(f"{path}: {size_mb:,.0f} MB", file=sys.stderr)
    app = asyncio.run(measure_app(path))
    baselines = {
        "wc -l": timed(["wc", "-l", path]),
        "grep -c 'NCCL INFO'": timed(["grep", "-c", "NCCL INFO", path]),
        "ncclscope analyze --format json": timed(
            [sys.executable, "-m", "ncclscope", "analyze", "--format", "json", "--fail-on", "never", path]
        ),
    }
    print(f"ncclscope tui on a {size_mb:,.0f} MB log (headless, 140x45)")
    for name, value in app.items():
        print(f"  {name:32} {value:8.0f}" if name == "findings" else f"  {name:32} {value:8.3f} s")
    print("baselines on the same file")
    for name, seconds in baselines.items():
        print(f"  {name:32} {seconds:8.3f} s")
    verdict = "PASS" if app["first paint"] < FIRST_PAINT_TARGET_S else "MISS"
    print(f"target: first paint under {FIRST_PAINT_TARGET_S:g} s: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
