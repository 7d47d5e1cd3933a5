"""The processes that parse inputs: whole files, or the byte ranges of one large file (parse/split.py).

Which tasks, how many workers, the pool that runs them, and an early start. Once its parsers are
loaded, a reading command still spends a tenth of a second or more loading typer and the rules and
reading its command line while one core idles, and the workers need none of that. So cli/entry.py calls
`start_early` with the arguments of a reading command before it loads the command line; when they
name one existing file large enough to be read in ranges, the workers are forked and given their
ranges at once.
case/read.py adopts them when the tasks it makes are the same (the same file and ranges, as many
workers); whatever else the command line turns out to mean (`--help`, a misread option, `--follow`),
`discard_early` stops them, and nothing they did is kept.
"""

from __future__ import annotations

import gc
import os
import signal
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ncclscope.inputs.opening import InputFile
from ncclscope.parse import fields, split  # split loads the NCCL log parser: forked workers inherit it
from ncclscope.parse.split import RangePart, byte_ranges, can_split, first_range_cut, last_range_cut, parse_range

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor

    from ncclscope.parse.one_input import ParsedInput

AHEAD = 2  # tasks per worker given out ahead of the reader (one being done, one done and waiting)
# options of the reading commands (parse, analyze, report) followed by a value, not by an input
VALUE_OPTIONS = frozenset({"-f", "--format", "-o", "--output", "--select", "--ignore", "--fail-on", "--idle"})
NOT_IN_RANGES = frozenset({"--follow", "-F", "--redact", "--help", "-h"})  # read another way, or not at all


@dataclass
class Pool:
    """Worker processes and the futures of their tasks, in task order. Only so many tasks are given to the
    workers ahead of the reader (AHEAD per worker): when the reader is the slower (a log of many records
    to walk), the results of every range would wait in its memory; the next task goes out as a result is
    taken."""

    executor: ProcessPoolExecutor
    futures: deque[Future[Any]]
    waiting: deque[InputFile] = field(default_factory=deque)  # tasks not yet given to a worker

    def take(self) -> Future[Any]:
        """The next result's future (in task order); one more task goes to the workers."""
        future = self.futures.popleft()
        if self.waiting:
            self.futures.append(self.executor.submit(run_task, self.waiting.popleft()))
        return future


def count(files: list[InputFile], jobs: int | None) -> int:
    """How many workers: one per core (or `jobs`), as many as the inputs need; one for stdin or a pipe
    (this process reads it: what came before a Ctrl-C is kept)."""
    if any(f.is_stream for f in files):
        return 1
    cores = os.cpu_count() or 1
    if jobs is not None:
        cores = max(1, jobs)
    splittable = sum(1 for f in files if can_split(f))
    return max(1, min(cores, max(len(files), cores if splittable else 1)))


def tasks(files: list[InputFile], workers: int) -> list[InputFile]:
    """Whole files, and large files cut into byte ranges so that every worker has work (split.py)."""
    made: list[InputFile] = []
    per_file = max(1, workers // max(1, len(files)))  # several large files: each gets its share of workers
    for item in files:
        if per_file > 1 and can_split(item):
            # several ranges per worker, and none larger than RANGE_MAX_BYTES: a range's records wait in
            # memory until the reader walks them
            size = os.path.getsize(item.path)
            parts = max(per_file * split.RANGES_PER_WORKER, -(-size // split.RANGE_MAX_BYTES))
            spans = first_range_cut(
                item.path, byte_ranges(item.path, parts, split.RANGE_MIN_BYTES, per_file), split.FIRST_RANGE_SHARE
            )
            spans = last_range_cut(item.path, spans, split.LAST_RANGE_PIECES)
            made.extend(InputFile(item.path, item.display, span) for span in spans)
        else:
            made.append(item)
    return made


def run_task(task: InputFile) -> ParsedInput | RangePart:
    with gc_paused():
        if task.span is not None:
            return parse_range(task)
        # the other readers and the models load here, not before the fork: workers forked early for the
        # ranges of a large log need neither, and the command loads them beside the workers (cli/entry.py)
        from ncclscope.parse.one_input import parse_input

        return parse_input(task)


@contextmanager
def gc_paused(frozen_after: bool = False) -> Iterator[None]:
    """No cyclic garbage collection while reading: parsing makes millions of small objects and few
    cycles, and every full collection walks them all (much of the time of a large log).
    `frozen_after`: what is alive at the end is frozen (gc.freeze) before collection resumes, for a
    caller that keeps it to the end of the process; else the first full collection after the pause
    walks all of it, long after a large log. The few cycles already garbage then are never freed."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if frozen_after:
            gc.freeze()
        if was_enabled:
            gc.enable()


def start(work: list[InputFile], workers: int) -> Pool:
    """Forked workers, every task given to them (the pool hands them out as workers free up)."""
    from concurrent.futures import ProcessPoolExecutor  # slow imports: only when a pool is needed

    fields.grammar_parser()  # build the grammar once; forked workers inherit it
    _keep_freed_memory()
    executor = ProcessPoolExecutor(max_workers=workers, initializer=_ignore_ctrl_c)
    ahead = workers * AHEAD
    return Pool(executor, deque(executor.submit(run_task, task) for task in work[:ahead]), deque(work[ahead:]))


def stop(pool: Pool) -> None:
    """Stops the workers at once, busy or not; what they were doing is lost. When it returns, every
    worker has ended and been reaped."""
    executor = pool.executor
    # no public way to stop a busy worker; `_processes` is None once the pool has shut down
    workers_left = list((getattr(executor, "_processes", None) or {}).values())
    results = getattr(executor, "_result_queue", None)  # shutdown() lets go of these two
    pool_thread = getattr(executor, "_executor_manager_thread", None)
    for process in workers_left:
        # SIGKILL, not SIGTERM: a worker forked a moment ago has not yet run its initializer and still
        # carries the parent's handlers, which may catch SIGTERM (inputs/interrupts.py, or a host program's)
        process.kill()
    executor.shutdown(wait=False, cancel_futures=True)
    # A worker stopped while it sent a result leaves half a message in the pipe; the pool's thread that
    # reads it waits for the rest, and holds up the end of the process (Python joins that thread). This
    # process's own copy of the pipe's sending end is the last one open: closed, the read ends.
    sending_end = getattr(results, "_writer", None)
    if sending_end is not None:
        sending_end.close()
    # That thread, seeing its workers gone, reaps them too: whichever of it and join() below waits
    # first takes a worker's exit status, and the other is told the worker is still running until that
    # thread has stored it. Its end, then, is when all of them are known to have ended.
    if pool_thread is not None:
        pool_thread.join(timeout=10)
    for process in workers_left:
        process.join(timeout=10)


def _keep_freed_memory() -> None:
    """glibc gives freed memory back to the system at once and maps large blocks afresh: reading a
    large file frees and takes back hundreds of MB of blocks, and each page taken again costs a fault
    (a third of the system time of a 100 MB read). Kept memory counts in the peak: about 25 MB more
    on the 1 GB mixed bench log (still under the 300 MB target). Elsewhere (musl, macOS) nothing changes."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        m_trim_threshold, m_top_pad, m_mmap_threshold = -1, -2, -3  # glibc malloc.h
        libc.mallopt(m_mmap_threshold, 32 << 20)
        libc.mallopt(m_trim_threshold, 256 << 20)
        libc.mallopt(m_top_pad, 64 << 20)
    except (OSError, AttributeError):
        pass


def _ignore_ctrl_c() -> None:
    """Workers leave Ctrl-C (sent to the whole process group) to the parent, which keeps their results;
    SIGTERM ends them (not the parent's stop request, forked with them). The parent stops them with SIGKILL."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


# ------------------------------------------------------------------------------- early start
_early: tuple[list[tuple[str, str, tuple[int, int] | None]], int, Pool] | None = None


def start_early(args: list[str]) -> None:
    """Workers for the one large file that `args` (a reading command's arguments) name, started now."""
    global _early
    if _early is not None or NOT_IN_RANGES.intersection(args):
        return
    named, jobs = _inputs_and_jobs(args)
    if len(named) != 1:
        return
    files = [InputFile(str(Path(named[0])), named[0])]
    workers = count(files, jobs)
    work = tasks(files, workers)
    if workers > 1 and len(work) > 1:
        _early = (_key(work), workers, start(work, workers))


def adopt(work: list[InputFile], workers: int) -> Pool | None:
    """The workers started early, when they were given exactly `work` on `workers` processes; else
    None, and any started early are stopped."""
    global _early
    early, _early = _early, None
    if early is None:
        return None
    if early[0] == _key(work) and early[1] == workers:
        return early[2]
    stop(early[2])
    return None


def discard_early() -> None:
    """Stops the workers started early that no reading took (the command did not read the file)."""
    global _early
    early, _early = _early, None
    if early is not None:
        stop(early[2])


def _key(work: list[InputFile]) -> list[tuple[str, str, tuple[int, int] | None]]:
    return [(task.path, task.display, task.span) for task in work]


def _inputs_and_jobs(args: list[str]) -> tuple[list[str], int | None]:
    """The arguments that may name inputs, and --jobs. A guess: the command line decides later, and a
    wrong guess only costs the work of the workers started for it."""
    named: list[str] = []
    jobs: int | None = None
    at = 0
    while at < len(args):
        arg = args[at]
        value = None
        if arg in ("-j", "--jobs"):
            value = args[at + 1] if at + 1 < len(args) else ""
            at += 1
        elif arg.startswith("--jobs="):
            value = arg.removeprefix("--jobs=")
        elif arg.startswith("-j") and len(arg) > 2:
            value = arg[2:]
        elif arg in VALUE_OPTIONS:
            at += 1
        elif not arg.startswith("-"):
            named.append(arg)
        if value is not None:
            jobs = int(value) if value.isdigit() else None
        at += 1
    return named, jobs
