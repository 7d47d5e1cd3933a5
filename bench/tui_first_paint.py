"""How fast `ncclscope tui` opens a large log: first paint, raw log lines, findings, a key press while parsing.

The app runs in tmux for the first paint and headless (Textual's `App.run_test`) in this process for the
rest, on the benchmark's synthetic log (`bench/generate_log.py`, generated once and cached like
`bench/run_bench.py` does). Printed, next to baselines run on the same file and machine (`wc -l`,
`grep -c`, `ncclscope analyze`, the interpreter's and the CLI's start):

* first paint in a terminal: from launching `ncclscope tui` in tmux to its tabs on the screen (interpreter
  start and imports included: what a user waits for); headless first paint: the app alone, modules loaded;
* raw log lines: from key 6, pressed at once after the first paint, to the raw log's first lines shown;
* key answered: from a key press (switching tabs) to the tab being active, while parsing runs;
* findings: until parsing and analysis end and the findings are shown.

Usage::

    python bench/tui_first_paint.py                  # 1 GB log
    python bench/tui_first_paint.py --size-mb 100
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

import run_bench  # noqa: E402  (sibling module: the log cache)

FIRST_PAINT_TARGET_S = 1.0
KEY_GIVE_UP_S = 30


TABS = {"1": "findings", "2": "hosts", "3": "communicators", "4": "topology", "5": "benchmarks", "6": "raw-log"}


async def key_answer(app, pilot, key: str) -> float:  # type: ignore[no-untyped-def]
    """Seconds from a key press to the tab it selects being active (not Pilot's wait for idle, which also
    waits for the tab underline's animation)."""
    from textual.widgets import TabbedContent

    tabs = app.query_one(TabbedContent)
    pressed = time.perf_counter()
    press = asyncio.create_task(pilot.press(key))
    while tabs.active != TABS[key]:
        if press.done() and time.perf_counter() - pressed > KEY_GIVE_UP_S:
            raise RuntimeError(f"key {key} was not answered within {KEY_GIVE_UP_S} s (tab: {tabs.active})")
        await asyncio.sleep(0.002)
    answered = time.perf_counter() - pressed
    await press  # presses never overlap
    return answered


async def measure_app(path: str) -> dict[str, float]:
    """Seconds from the start to each milestone of one headless TUI session (modules imported first)."""
    from ncclscope.tui.app import NcclscopeApp
    from ncclscope.tui.loading import prepare_inputs

    start = time.perf_counter()
    app = NcclscopeApp(prepare_inputs([path]))
    figures: dict[str, float] = {}
    async with app.run_test(size=(140, 45)) as pilot:
        figures["headless first paint (after imports)"] = time.perf_counter() - start
        from ncclscope.tui.raw_log import LogLines

        lines = app.query_one(LogLines)
        pressed = time.perf_counter()
        await key_answer(app, pilot, "6")
        while lines.row_count == 0:
            await asyncio.sleep(0.002)
        figures["raw log lines after key 6"] = time.perf_counter() - pressed
        answers: list[float] = []
        while app.parsing and len(answers) < 60:
            answers.append(await key_answer(app, pilot, "123456"[len(answers) % 6]))
            await asyncio.sleep(0.3)
        if answers:
            answers.sort()
            figures["key answered while parsing, median"] = answers[len(answers) // 2]
            figures["key answered while parsing, max"] = answers[-1]
        while app.parsing:
            await pilot.pause(0.1)
        figures["findings shown"] = time.perf_counter() - start
        figures["findings"] = len(app.view.analysis.findings) if app.view else 0
    return figures


def terminal_first_paint(path: str, repeat: int = 3) -> float | None:
    """Best of `repeat`: seconds from launching `ncclscope tui PATH` in a real terminal (tmux) to its tabs on
    the screen, as a person sees it (interpreter start and imports included). None without tmux."""
    if shutil.which("tmux") is None:
        return None
    best = None
    for attempt in range(repeat):
        server = ["tmux", "-L", f"ncclscope-bench-{os.getpid()}-{attempt}"]
        command = f"{shlex.quote(sys.executable)} -m ncclscope tui {shlex.quote(path)}"
        try:
            start = time.perf_counter()
            subprocess.run([*server, "new-session", "-d", "-x", "140", "-y", "45", command], check=True)
            while (
                "Communicators"
                not in subprocess.run(
                    [*server, "capture-pane", "-p"], capture_output=True, text=True, check=False
                ).stdout
            ):
                time.sleep(0.005)
            seconds = time.perf_counter() - start
            best = seconds if best is None else min(best, seconds)
        finally:
            subprocess.run([*server, "kill-server"], check=False, capture_output=True)
    return best


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
    paint = terminal_first_paint(path)
    app = asyncio.run(measure_app(path))
    baselines = {
        "python -c pass": timed([sys.executable, "-c", "pass"]),
        "ncclscope version (CLI start)": timed([sys.executable, "-m", "ncclscope", "version"]),
        "wc -l": timed(["wc", "-l", path]),
        "grep -c 'NCCL INFO'": timed(["grep", "-c", "NCCL INFO", path]),
        "ncclscope analyze --format json": timed(
            [sys.executable, "-m", "ncclscope", "analyze", "--format", "json", "--fail-on", "never", path]
        ),
    }
    print(f"ncclscope tui on a {size_mb:,.0f} MB log")
    if paint is not None:
        print(f"  {'first paint in a terminal (tmux)':40} {paint:8.3f} s   (launch to tabs on screen, best of 3)")
    print("  headless (Textual's run_test, 140x45):")
    for name, value in app.items():
        print(f"  {name:40} {value:8.0f}" if name == "findings" else f"  {name:40} {value:8.3f} s")
    print("baselines on the same file")
    for name, seconds in baselines.items():
        print(f"  {name:40} {seconds:8.3f} s")
    first = paint if paint is not None else app["headless first paint (after imports)"]
    verdict = "PASS" if first < FIRST_PAINT_TARGET_S else "MISS"
    print(f"target: first paint under {FIRST_PAINT_TARGET_S:g} s: {verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
