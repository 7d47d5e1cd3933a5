"""The job's own collectives, as NCCL Inspector timed them: their bus bandwidth against what the platform should reach
(BW001, and BW002 when all are too small to judge), one rank that the others wait for at every call (HANG003), and an
Inspector that writes nothing (EVD001). The rules of those codes call these.

Inspector's time is the kernel's, from its start on the GPU to its end. A kernel that starts early spins until the
last rank's data arrives, so the ranks of one call end together and differ in when they started: the rank whose
kernel is the shortest (or, with the verbose trace, starts last) is the one the others waited for, and the busbw of
that rank is the nearest to what the links carried.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable

from ncclscope.common.words import exact_size, plural
from ncclscope.diagnose.expectations import judging, spec_by_key
from ncclscope.diagnose.rules.context import Context, shown
from ncclscope.diagnose.rules.registry import make_finding
from ncclscope.diagnose.run_expectation import RunFacts, expectation_of, num
from ncclscope.model import Evidence, Finding, InspectorOp, InspectorSeries

# Inspector's collective names and nccl-tests' (the reference figures are nccl-tests busbw, per collective)
COLLECTIVES = {
    "AllReduce": "all_reduce",
    "AllGather": "all_gather",
    "ReduceScatter": "reduce_scatter",
    "Broadcast": "broadcast",
    "Reduce": "reduce",
    "AllToAll": "alltoall",
}
STRAGGLER_MIN_CALLS = 20  # calls seen on every rank before one rank can be said to be last at most of them
STRAGGLER_SHARE = 0.8  # ... at this share of the calls or more (two ranks sharing a GPU: 55%, our H200 run)
STRAGGLER_WAIT_SHARE = 0.25  # ... while the others wait this share of the call's longest kernel time (median)
STRAGGLER_WAIT_MIN_US = 100.0  # ... and at least this long: a few us of launch jitter is no straggler


def _job_key(op: InspectorOp) -> tuple[str | None, str | None, int | None, int | None]:
    """One communicator: its hash where the JSON gives one, else its name and size (Prometheus labels)."""
    return (op.comm_id, None if op.comm_id else op.comm_name, op.nranks, op.nnodes)


def _comm_words(op: InspectorOp) -> str:
    name = f"communicator {op.comm_id}" if op.comm_id else (f"communicator '{op.comm_name}'" if op.comm_name else "")
    size = f"{op.nranks} ranks" if op.nranks else "ranks unknown"
    nodes = f" on {plural(op.nnodes, 'node')}" if op.nnodes else ""
    return f"{name}, {size}{nodes}" if name else f"{size}{nodes}"


# ------------------------------------------------------------------------------------- BW001, BW002
def _largest(ctx: Context) -> list[tuple[InspectorOp, list[InspectorOp], int]]:
    """Per communicator and collective: the best rank's op at the largest size, all ranks' ops there, the size."""
    groups: dict[tuple[object, ...], list[InspectorOp]] = defaultdict(list)
    for report in ctx.case.inspector:
        for op in report.ops:
            if op.kind == "collective" and op.name in COLLECTIVES and (op.nranks or 0) > 1 and op.size_bytes:
                groups[_job_key(op) + (op.name,)].append(op)
    out = []
    for ops in groups.values():
        size = max(op.size_bytes or 0 for op in ops)
        largest = [op for op in ops if op.size_bytes == size]
        out.append((max(largest, key=lambda op: op.busbw_gbs), largest, size))
    return out


def job_low_busbw(ctx: Context) -> Iterable[Finding]:
    """BW001 for the job's own collectives (NCCL Inspector): at the largest size of each collective and
    communicator from 128 MiB on, the best rank's median busbw (the rank the others waited for, whose kernel time is
    the transfer's) below half of what the platform should reach. A warning at most: inside a job compute shares the
    GPU (fewer SMs, memory bandwidth taken), so its collectives may fall short of the benchmark without a fault."""
    for best, largest, size in _largest(ctx):
        if size >= judging().provisional_min_bytes:
            finding = _judged(ctx, best, largest, size)
            if finding is not None:
                yield finding


def job_sizes_too_small(ctx: Context) -> Iterable[Finding]:
    """BW002 for the job's own collectives: every one under 1 GiB, so none is judged as peak bandwidth."""
    limit = judging().judge_min_bytes
    found = _largest(ctx)
    if not found or any(size >= limit for _, _, size in found):
        return
    parts = [
        f"{op.name} up to {exact_size(size)} ({num(op.busbw_gbs)} GB/s busbw, {_comm_words(op)})"
        for op, _, size in sorted(found, key=lambda item: (-item[2], item[0].name))
    ]
    more = f" and {len(parts) - 6} more" if len(parts) > 6 else ""
    yield make_finding(
        "BW002", "info",
        f"NCCL Inspector timed the job's own collectives, all under {exact_size(limit)}, where no collective reaches "
        f"its peak: {'; '.join(parts[:6])}{more}; their busbw cannot be judged as the fabric's (nccl-tests at 1-8 GiB"
        " on the same hosts can)",
        evidence=shown(op.evidence for op, _, _ in found), evidence_count=len(found),
        hosts=sorted({op.host for op, _, _ in found if op.host}),
    )  # fmt: skip


def _judged(ctx: Context, best: InspectorOp, largest: list[InspectorOp], size: int) -> Finding | None:
    limits = judging()
    nranks, nnodes = best.nranks or 0, best.nnodes or 1
    per_host = nranks // nnodes if nnodes and nranks % nnodes == 0 else None
    facts = RunFacts(
        run=None, collective=COLLECTIVES[best.name], nranks=nranks, hosts=nnodes, gpus_per_host=per_host,
        spec=spec_by_key(ctx.platform.key), size=size, measured=best.busbw_gbs, rows=[],
    )  # fmt: skip
    expectation, _ = expectation_of(facts, ctx.case, ctx.platform)
    if expectation is None or expectation.busbw <= 0:
        return None  # EVD001 and the platform line say what is missing; a job's figure alone judges nothing
    ratio = best.busbw_gbs / expectation.busbw
    error_below = limits.floor_error_below if expectation.floor else limits.error_below
    if ratio >= error_below:
        return None
    ranks = plural(len(largest), "rank")
    return make_finding(
        "BW001", "warning",
        f"the job's own {best.name} ({_comm_words(best)}) reaches {num(best.busbw_gbs)} GB/s busbw at "
        f"{exact_size(size)} on its best rank (median of {plural(best.count, 'call')}; {ranks} timed by NCCL "
        f"Inspector), {ratio:.0%} of the {num(expectation.busbw)} GB/s expected ({expectation.label}); inside a job "
        "compute shares the GPU, so compare with nccl-tests on the same hosts",
        fix="Run nccl-tests (or `ncclscope run`) on the same hosts at 1-8 GiB: if it reaches the figure, the job's"
        " collectives are slowed by what runs beside them (compute overlap, NCCL_NCHANNELS or CTA limits); if not,"
        " read the transport, GPUDirect and topology findings. Larger gradient buckets (DDP bucket_cap_mb) let a"
        " job's collectives reach the fabric's bandwidth.",
        evidence=shown(op.evidence for op in largest), evidence_count=len(largest),
        hosts=sorted({op.host for op in largest if op.host}),
    )  # fmt: skip


# ------------------------------------------------------------------------------------------ HANG003
def job_stragglers(ctx: Context) -> Iterable[Finding]:
    """HANG003 from NCCL Inspector: one rank is the last to reach the job's collectives. Over the calls timed on
    every rank of a communicator (20 or more), that rank's kernel started last (verbose trace) or ran shortest at
    80% of them or more, and the other ranks' kernels ran longer than its own, waiting for it, by a median of 25% of
    the call's time and at least 100 us. The slowness is outside NCCL (the data loader, a CPU core shared with
    another process, a throttled or faulty GPU, more work on that rank), and the waiting ranks look slow instead:
    their kernels are the long ones."""
    by_comm: dict[tuple[str, str], dict[int, InspectorSeries]] = defaultdict(dict)
    for report in ctx.case.inspector:
        for series in report.series:
            by_comm[(series.comm_id, series.name)][series.rank] = series
    for (comm, name), ranks in sorted(by_comm.items()):
        if len(ranks) < 2:
            continue
        finding = _straggler(comm, name, ranks)
        if finding is not None:
            yield finding


def _straggler(comm: str, name: str, ranks: dict[int, InspectorSeries]) -> Finding | None:
    calls = {rank: dict(zip(s.sn, s.exec_time_us, strict=True)) for rank, s in ranks.items()}
    starts = {
        rank: dict(zip(s.sn, s.kernel_start_us, strict=True))
        for rank, s in ranks.items()
        if len(s.kernel_start_us) == len(s.sn)
    }
    common = set.intersection(*(set(c) for c in calls.values()))
    if len(common) < STRAGGLER_MIN_CALLS:
        return None
    by_start = len(starts) == len(ranks)
    last: Counter[int] = Counter()
    waits: list[float] = []
    longest: list[float] = []
    for sn in common:
        times = {rank: calls[rank][sn] for rank in ranks}
        if by_start:
            begun = {rank: starts[rank][sn] for rank in ranks}
            late = max(begun, key=lambda r: begun[r])
        else:
            late = min(times, key=lambda r: times[r])
        # the wait is what the others' kernels ran longer than the late one's: ranks that start apart but run
        # equally long (two processes taking turns on one GPU) waited for nobody
        waits.append(max(times.values()) - times[late])
        last[late] += 1
        longest.append(max(times.values()))
    rank, count = last.most_common(1)[0]
    share = count / len(common)
    wait, call = statistics.median(waits), statistics.median(longest)
    if share < STRAGGLER_SHARE or wait < STRAGGLER_WAIT_MIN_US or wait < STRAGGLER_WAIT_SHARE * call:
        return None
    late_series = ranks[rank]
    where = f" ({late_series.host}, pid {late_series.pid})" if late_series.host else ""
    nranks = late_series.nranks or len(ranks)
    whose = "" if len(ranks) >= nranks else f" (the {len(ranks)} of {nranks} ranks whose Inspector files are here)"
    how = "its kernel started last" if by_start else "its kernel was the shortest (the others spun waiting for it)"
    others = [s for r, s in sorted(ranks.items()) if r != rank]
    return make_finding(
        "HANG003", "warning",
        f"rank {rank}{where} is the last to reach the {name} calls of communicator {comm}{whose}: at {count} of "
        f"{plural(len(common), 'call')} timed on every rank ({share:.0%}) {how}; the other ranks waited a median "
        f"{num(wait)} us of a {num(call)} us call (NCCL Inspector)",
        fix=f"Look at rank {rank} and its host: CPU binding and load (`top`, the data-loader workers), GPU clocks and"
        " throttling (`nvidia-smi -q -d PERFORMANCE,CLOCK`), Xid errors in its kernel log, and whether its share of"
        " the work (batch, sequence lengths, pipeline stage) is larger; compare its step time with the others'.",
        evidence=shown([late_series.evidence, *(s.evidence for s in others)]), evidence_count=len(ranks),
        hosts=sorted({s.host for s in ranks.values() if s.host}), ranks=[rank],
    )  # fmt: skip


# ------------------------------------------------------------------------------------------ EVD001
def inspector_writes_nothing(ctx: Context) -> tuple[str, list[Evidence]] | None:
    """NCCL Inspector loaded with its dump thread off (NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS left at its
    default, -1): the plugin's README says -1 writes at the end of the job; its code (inspector.cc
    inspectorStartDumpThread) starts no thread for a negative interval and nothing is ever written (seen on our H200
    run: fixtures/device/h200_run_nccl_tests_inspector_off). What EVD001 says, and its lines."""
    silent = [s for s in ctx.case.inspector_setups if not s.writes]
    if not silent or ctx.case.inspector:
        return None
    hosts = sorted({s.host for s in silent if s.host})
    processes = len({(s.host, s.pid) for s in silent})
    where = f" on {', '.join(hosts[:4])}{' ...' if len(hosts) > 4 else ''}" if hosts else ""
    what = (
        f"NCCL Inspector is loaded in {plural(processes, 'process')}{where} but writes nothing:"
        " its dump thread is off (NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS at its default, -1, starts none,"
        " and nothing is written at the end either), so the job's own collectives cannot be judged (BW001, HANG003);"
        " set it to a positive interval (10000: every 10 ms) with NCCL_INSPECTOR_DUMP_DIR, or run `ncclscope run"
        " --inspector PLUGIN`"
    )
    return what, [s.evidence for s in silent]
