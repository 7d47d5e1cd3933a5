"""RUN006: a collective that did not finish in time, as the framework's watchdog or `ncclscope run`
saw it (Case.framework, Case.run)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from ncclscope.common.words import ranks_named
from ncclscope.diagnose.rules.context import Context, shown
from ncclscope.diagnose.rules.registry import make_finding, rule
from ncclscope.diagnose.rules.run_init import input_cut
from ncclscope.model import Finding, FrameworkEvent


def _lines(n: int) -> str:
    return f"{n} line{'s' if n != 1 else ''}"


def _world_size(ctx: Context) -> int | None:
    """Ranks of the job: its largest communicator, or its largest process group as PyTorch set it up."""
    sizes = [c.nranks for c in ctx.case.communicators if c.nranks and c.comm_id]
    sizes += [e.world_size for e in ctx.case.framework if e.kind == "pg_options" and e.world_size]
    return max(sizes) if sizes else None


@rule("RUN006", "watchdog-timeout", severity="error")
def watchdog_timeout(ctx: Context) -> Iterable[Finding]:
    """PyTorch's ProcessGroupNCCL watchdog timed out a collective (`Watchdog caught collective
    operation timeout: WorkNCCL(SeqNum=..., OpType=...) ran for ... milliseconds`, as PyTorch, Ray,
    DeepSpeed or vLLM print it), or `ncclscope run` ended a collective on its per-collective timeout
    (`--timeout`); then the evidence is the last lines the collective printed (stdout, stderr and the
    tail of each NCCL log) before it was ended. Without the timeout line, the watchdog's other reports
    of the same: its heartbeat monitor found the watchdog thread stuck (`ProcessGroupNCCL's watchdog
    got stuck for N seconds`, `Heartbeat monitor timed out!`), or its status line names the work
    (`failure detected by watchdog at work sequence id: N`). An NCCL error that the framework raised
    is not a timeout: RUN005 reports it.

    The finding groups the timeouts by collective (OpType, SeqNum), names the ranks that reported
    and, when the communicator size is known, those that did not; ranks stuck at different SeqNums
    mean an application desync.

    Why: NCCL itself never reports a hung collective; the framework's watchdog does, after its
    timeout (10 or 30 minutes by default). A timeout with no NCCL WARN means the collective hung
    rather than failed: a rank never joined it (desync, crash, a rank stuck elsewhere) or the
    network stalled; with NCCL WARNs, those are the cause.

    Fix: Find the rank that did not reach the collective: compare the SeqNums of all ranks
    (TORCH_NCCL_DESYNC_DEBUG=1, PyTorch Flight Recorder with TORCH_NCCL_TRACE_BUFFER_SIZE and
    TORCH_NCCL_DUMP_ON_TIMEOUT=1), read the NCCL WARNs of the same time, and rerun with
    NCCL_DEBUG=INFO. Raise the timeout only for collectives that are legitimately slow.

    Sources: PyTorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (the watchdog and its
    messages); PyTorch docs "torch.distributed" (TORCH_NCCL_DESYNC_DEBUG, TORCH_NCCL_TRACE_BUFFER_SIZE,
    Flight Recorder); NCCL docs troubleshooting.rst (NCCL itself reports no hung collective)
    """
    yield from _runner_timeouts(ctx)
    timeouts: dict[tuple[str, int | None], list[FrameworkEvent]] = defaultdict(list)
    seen: set[tuple[int | None, int | None, str]] = set()
    for event in ctx.case.framework:
        if event.kind != "watchdog_timeout":
            continue
        key = (event.rank, event.seq, event.op_type or "")
        if key in seen:
            continue  # the watchdog's exception repeats the timeout it reports
        seen.add(key)
        timeouts[(event.op_type or "a collective", event.seq)].append(event)
    if not timeouts:
        yield from _watchdog_without_timeout(ctx)
        return
    # a record cut before its OpType (the rest of the line was lost) joins the collective of its SeqNum
    for op, seq in [key for key in timeouts if key[0] == "a collective" and key[1] is not None]:
        named = [key for key in timeouts if key[1] == seq and key[0] != op]
        if len(named) == 1:
            timeouts[named[0]].extend(timeouts.pop((op, seq)))
    nccl_warns = len({(w.evidence.source, w.evidence.line) for w in ctx.case.warnings if w.level in ("WARN", "ABORT")})
    world = _world_size(ctx)
    seqs = sorted({seq for _, seq in timeouts if seq is not None})
    ranks_of = {key: sorted({e.rank for e in items if e.rank is not None}) for key, items in timeouts.items()}
    reporting = {r for ranks in ranks_of.values() for r in ranks}
    silent = sorted(set(range(world)) - reporting) if world and reporting else []
    status = [e for e in ctx.case.framework if e.kind == "watchdog_status"]
    groups = sorted(timeouts.items(), key=lambda kv: kv[0][1] or 0)
    parts, progress_of = [], []
    for (op, seq), items in groups:
        ranks = ranks_of[(op, seq)]
        numel = f", {items[0].numel_in} elements" if items[0].numel_in else ""
        parts.append(f"{op} ({f'SeqNum {seq}' if seq is not None else 'no SeqNum'}{numel}) on {ranks_named(ranks)}")
        progress = sorted(
            {(e.last_enqueued, e.last_completed) for e in status if e.seq == seq and e.last_completed is not None}
        )
        progress_of.append(", ".join(f"{c} (enqueued {q})" for q, c in progress[:3]))
    every = [e for _, items in groups for e in items]
    ran = max((e.ran_ms for e in every if e.ran_ms), default=None)
    limits = {e.timeout_ms for e in every if e.timeout_ms}
    waited = f" after {ran / 1000:.0f} s" if ran else ""
    if len(limits) == 1:
        waited += f" against a {limits.pop() / 1000:.0f} s timeout"
    if len(groups) == 1:
        message = f"PyTorch watchdog timed out {parts[0]}{waited}"
        if progress_of[0]:
            message += f"; last completed work {progress_of[0]}"
    else:  # ranks wait in different collectives (desync): one story, not one finding per collective
        where = "different collectives" if len(seqs) > 1 else "different collectives at one SeqNum"
        message = (
            f"PyTorch watchdog timed out {len(groups)} collectives{waited}, ranks at {where} (desync): "
            + "; ".join(
                part + (f" (last completed work {progress})" if progress else "")
                for part, progress in zip(parts, progress_of, strict=True)
            )
        )
    if silent:
        message += (
            f"; {ranks_named(silent)} of {world} reported no timeout:"
            " look there first (never joined, crashed or stuck elsewhere)"
        )
        cut, _ = input_cut(ctx, {e.evidence.source for e in ctx.case.framework})
        if cut:
            message += f" (but the input looks cut ({cut}), so their lines may just be missing)"
    if nccl_warns:
        message += f"; NCCL logged {_lines(nccl_warns)} of WARN, see those findings"
    elif not any(s.nccl_lines for s in ctx.case.sources):
        message += "; the input holds no NCCL log, so whether NCCL reported an error is unknown"
    else:
        message += "; NCCL logged no WARN: the collective hung rather than failed"
    evidence = [e.evidence for e in every]
    yield make_finding(
        "RUN006",
        "error",
        message,
        evidence=shown(evidence),
        evidence_count=len(evidence),
        ranks=sorted(reporting),
    )


HEARTBEAT_FIX = (
    "Find the call the watchdog is stuck in: the debug dump PyTorch writes before it ends the process (Flight"
    " Recorder with TORCH_NCCL_TRACE_BUFFER_SIZE and TORCH_NCCL_DUMP_ON_TIMEOUT=1, stack traces), `py-spy dump`"
    " of the stuck rank, NCCL's WARNs of the same time and the host's kernel log (a GPU that fell off the bus);"
    " raise TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC only when that call is legitimately slow (a large checkpoint)."
)
NCCL_ERROR_EVENTS = frozenset({"nccl_error", "nccl_result", "last_error", "comm_aborted"})


def _watchdog_without_timeout(ctx: Context) -> Iterable[Finding]:
    """No `Watchdog caught collective operation timeout` line in the input, but the watchdog's other reports of
    the same: its heartbeat monitor found the watchdog thread itself stuck (a CUDA or NCCL call that does not
    return blocks it), or its status line says at which work it detected the failure (when no NCCL error was
    raised or logged: then the failure is that error, RUN005's)."""
    stuck = [e for e in ctx.case.framework if e.kind == "watchdog_stuck"]
    if stuck:
        ranks = sorted({e.rank for e in stuck if e.rank is not None})
        seconds = max((e.stuck_s for e in stuck if e.stuck_s), default=None)
        where = ranks_named(ranks)
        message = (
            f"PyTorch's heartbeat monitor found the ProcessGroupNCCL watchdog stuck"
            f"{f' for {seconds} s' if seconds else ''} on {where}"
            " and ends the process: a CUDA or NCCL call the watchdog waits in does not return (a hung collective"
            " or communicator abort, or a GPU that stopped answering), so the job is stuck, not slow"
        )
        yield make_finding("RUN006", "error", message, evidence=shown(e.evidence for e in stuck),
                           evidence_count=len(stuck), ranks=ranks, fix=HEARTBEAT_FIX)  # fmt: skip
        return
    status = [e for e in ctx.case.framework if e.kind == "watchdog_status" and e.seq is not None]
    # the status line says "failure" or "error or timeout": with an NCCL error raised, it is that error (RUN005)
    failed = any(e.kind in NCCL_ERROR_EVENTS for e in ctx.case.framework) or any(
        w.level in ("WARN", "ABORT") for w in ctx.case.warnings
    )
    if status and not failed:
        ranks = sorted({e.rank for e in status if e.rank is not None})
        first = min(status, key=lambda e: e.seq or 0)
        progress = (
            f" (last completed work {first.last_completed}, last enqueued {first.last_enqueued})"
            if first.last_completed is not None
            else ""
        )
        message = (
            f"PyTorch's watchdog detected a failed or timed-out collective at work {first.seq}{progress} on"
            f" {ranks_named(ranks)}: the collective did not finish; the"
            " line that names it (OpType, timeout) is not in the input"
        )
        yield make_finding("RUN006", "error", message, evidence=shown(e.evidence for e in status),
                           evidence_count=len(status), ranks=ranks)  # fmt: skip


def _runner_timeouts(ctx: Context) -> Iterable[Finding]:
    """The collectives `ncclscope run` ended on its timeout (Case.run): hangs nobody else reports."""
    run = ctx.case.run
    for step in run.steps if run else []:
        if step.status != "timed_out":
            continue
        limit = f" after its {step.timeout_s:.0f} s timeout" if step.timeout_s else " on its timeout"
        message = (
            f"`ncclscope run` ended {step.collective}{limit}: the collective hung"
            f" ({_lines(len(step.last_lines))} seen last, shown as evidence)"
        )
        yield make_finding(
            "RUN006", "error", message, evidence=list(step.last_lines), evidence_count=len(step.last_lines)
        )
