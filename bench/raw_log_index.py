"""How fast the TUI's raw log opens a large log: line index, first lines, and key presses while indexing.

Uses the same generated log as run_bench.py (generated on first use, then reused) and prints, next to
a `wc -l` baseline:

* time until the first screen of lines can be drawn (open + index the first chunk + read 40 lines);
* time to index the whole file with numpy (what the TUI does) and with a `bytes.find` loop;
* in a headless Textual app with the real RawLogPane: the time from `open_files` to the first screen
  of lines, and how long a key press takes to move the cursor while the index worker runs and after.

Usage::

    python bench/raw_log_index.py                  # 100 MB
    python bench/raw_log_index.py --size-mb 1024   # 1 GB
"""

from __future__ import annotations

import argparse
import asyncio
import mmap
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))
sys.path.insert(0, str(BENCH_DIR.parent))

import run_bench  # noqa: E402  (sibling module: the shared log generator cache)

from ncclscope.tui.lines import FIRST_CHUNK_BYTES, LineIndex, shown_text  # noqa: E402
from ncclscope.tui.raw_log import LogLines  # noqa: E402

MB = 1024 * 1024


def timed(label: str, seconds: float, size: int | None = None, note: str = "") -> None:
    rate = f"{size / MB / seconds:6.0f} MB/s" if size else " " * 11
    print(f"{label:<46} {seconds * 1000:9.1f} ms {rate}  {note}")


def wc_lines(path: str) -> tuple[float, int]:
    start = time.perf_counter()
    out = subprocess.run(["wc", "-l", path], capture_output=True, text=True, check=True).stdout
    return time.perf_counter() - start, int(out.split()[0])


def first_screen(path: str) -> float:
    start = time.perf_counter()
    index = LineIndex(path)
    index.index_more(FIRST_CHUNK_BYTES)
    for number in range(1, 41):
        shown_text(index.line(number))
    return time.perf_counter() - start


def numpy_index(path: str) -> tuple[float, int]:
    start = time.perf_counter()
    index = LineIndex(path)
    index.index_all()
    return time.perf_counter() - start, index.line_count


def find_loop_index(path: str) -> tuple[float, int]:
    """The alternative to numpy: a bytes.find loop over the mapping (one Python call per line)."""
    start = time.perf_counter()
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        offsets = []
        find = data.find
        pos = find(b"\n")
        while pos >= 0:
            offsets.append(pos)
            pos = find(b"\n", pos + 1)
    return time.perf_counter() - start, len(offsets)


async def in_the_app(path: str, presses: int) -> tuple[float, list[float], list[float], bool]:
    """(seconds from open_files to a drawn first screen, key press answer times while the index worker
    runs and once it is done, whether it was still running at the last press)."""
    from textual.app import App, ComposeResult

    from ncclscope.tui.raw_log import RawLogPane

    class Bench(App[None]):
        def compose(self) -> ComposeResult:
            yield RawLogPane(id="raw")

    app = Bench()
    async with app.run_test(size=(120, 40)) as pilot:
        pane = app.query_one(RawLogPane)
        lines = app.query_one(LogLines)
        lines.focus()
        start = time.perf_counter()
        pane.open_files({"big.log": path})
        screen = [lines.render_line(y).text for y in range(40)]
        first = time.perf_counter() - start
        assert screen[0].strip(), "the first line should be drawn"
        busy = [await answer_time(lines) for _ in range(presses)]
        indexing = lines.index is not None and not lines.index.complete
        await pilot.app.workers.wait_for_complete()
        idle = [await answer_time(lines) for _ in range(presses)]
    return first, busy, idle, indexing


async def answer_time(lines: LogLines) -> float:
    """Seconds from a key press arriving to the cursor having moved (the loop polled every 0.5 ms)."""
    before = lines.cursor
    start = time.perf_counter()
    lines.app.simulate_key("down" if before < 1000 else "up")
    while lines.cursor == before:
        await asyncio.sleep(0.0005)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=float, default=100.0)
    ap.add_argument("--workdir", default="/tmp/ncclscope-bench")
    ap.add_argument("--presses", type=int, default=30)
    args = ap.parse_args(argv)
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    path = run_bench.ensure_log(workdir, args.size_mb, 1, 1)[0]
    size = Path(path).stat().st_size
    subprocess.run(["cat", path], stdout=subprocess.DEVNULL, check=True)  # warm the page cache for everyone
    print(f"{path}: {size / MB:.0f} MB")

    seconds, lines = wc_lines(path)
    timed("wc -l (baseline)", seconds, size, f"{lines:,} lines")
    timed("first screen: open + 1 MB index + 40 lines", first_screen(path))
    seconds, count = numpy_index(path)
    timed("full index, numpy chunks (the TUI's)", seconds, size, f"{count:,} lines")
    seconds, count = find_loop_index(path)
    timed("full index, bytes.find loop", seconds, size, f"{count:,} newlines")

    first, busy, idle, indexing = asyncio.run(in_the_app(path, args.presses))
    timed("app: open_files + drawing the first screen", first)
    note = "" if indexing else " (indexing finished before the last press)"
    for label, rounds in (("while indexing", busy), ("once indexed", idle)):
        timed(f"app: key press answered {label}", statistics.median(rounds), None, f"max {max(rounds) * 1000:.1f} ms")
    print(f"{len(busy)} presses each{note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
