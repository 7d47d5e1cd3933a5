"""HANG rules: which rank a hung job waits for (Case.progress, built by case/hang_progress.py from Flight
Recorder dumps, ncclras reports, COLL lines and PyTorch watchdog lines).

A collective completes only when every rank of its group enters it. When ranks stop at different
places, the ranks that did not reach the furthest collective are the ones the others wait for.
Evidence that is a snapshot of a running job (RAS operation counts, the COLL lines of a log that
was cut) cannot tell waiting from running late: it gives HANG003, never HANG001.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from ncclscope.case.hang_progress import (
    VIA,
    collectives_by_rank,
    describe,
    flight_recorder_members,
    furthest,
    group_label,
    group_name,
    position,
)
from ncclscope.common.words import number_ranges, ranks_named
from ncclscope.diagnose.rules.context import Context, shown
from ncclscope.diagnose.rules.job_collectives import job_stragglers
from ncclscope.diagnose.rules.registry import make_finding, rule
from ncclscope.model import Evidence, Finding, FlightRecorderEntry, GroupProgress, RankProgress, Severity

# collectives whose input tensors have the same shape on every rank (the others split unevenly)
SAME_SHAPE = {
    "all_reduce", "allreduce", "allreduce_coalesced", "broadcast", "reduce", "all_gather", "allgather",
    "_allgather_base", "allgather_into_tensor_coalesced", "reduce_scatter", "_reduce_scatter_base",
    "reduce_scatter_tensor_coalesced", "barrier",
}  # fmt: skip


def _hosts(items: Iterable[RankProgress]) -> list[str]:
    return sorted({r.host for r in items if r.host})


def _evidence(items: Iterable[RankProgress]) -> list[Evidence]:
    return [r.evidence for r in items if r.evidence is not None]


def _cut_sources(ctx: Context) -> set[str]:
    return {s.path for s in ctx.case.sources if s.ends_cut}


@rule("HANG001", "rank-missing", severity="error")
def rank_missing(ctx: Context) -> Iterable[Finding]:
    """In a process group or communicator, some ranks never entered the collective that the others
    wait in. Read from PyTorch Flight Recorder dumps (the sequence number each rank reached, with
    the collective, sizes and dtypes) and from what its analyzer (fr_trace) prints about them, PyTorch's
    desync report (TORCH_NCCL_DESYNC_DEBUG), the watchdog's "last enqueued work" lines, NCCL COLL lines
    (opCount per rank) and ncclras reports (ranks that gave no data, processes RAS considers dead).
    Names the ranks, their hosts when known, the group, the sequence number, the collective and how
    many ranks wait.

    Why: a collective completes only when every rank of its group has entered it, so the whole job
    waits for the ranks that did not arrive; the watchdog then times out on every other rank, which
    makes the waiting ranks look guilty. The missing rank is where to look: it crashed, is stuck in
    other code (data loading, a checkpoint, a different collective), or skipped the call.

    Fix: Look at what the missing ranks were doing: their stack (py-spy dump, the Flight Recorder
    frames), their last log lines, NCCL WARNs and network errors on their hosts. If they skipped
    the call, make every rank call the same collectives in the same order (a collective under a
    rank-dependent `if`, an uneven last batch, early exit on one rank).

    Sources: PyTorch torch/distributed/flight_recorder (fr_trace: "Not all ranks joining
    collective"); PyTorch docs "Flight Recorder for debugging stuck jobs"; NCCL docs
    troubleshooting/ras.rst (INCOMPLETE, DEAD); NCCL src/enqueue.cc (the COLL opCount line);
    NVIDIA/nccl#1762 (a RAS client whose report contradicts itself: its errors are not evidence, so
    the finding is a warning)
    """
    cut = _cut_sources(ctx)
    for progress in ctx.case.progress:
        if progress.via == "ras":
            continue  # read from the reports themselves below: RAS says who is missing outright
        top, leaders, behind = furthest(progress)
        if top is None or not behind or not _is_missing(progress, leaders, behind, cut):
            continue
        if progress.via == "flight_recorder" and _mismatch_at(ctx, progress, top):
            continue  # every rank is there, with different calls: HANG002
        yield _missing_finding(progress, top, leaders, behind)
    yield from _ras_missing(ctx)
    yield from _fr_trace_missing(ctx)
    yield from _desync_lagging(ctx)


DESYNC_KINDS = ("desync_not_joined", "desync_never_joined", "desync_unfinished")


def _desync_lagging(ctx: Context) -> Iterable[Finding]:
    """The ranks PyTorch's desync report (TORCH_NCCL_DESYNC_DEBUG=1) blames: those at the lagging collective,
    finished but not in the next one, or in it but not finished, or in none at all."""
    events = [e for e in ctx.case.framework if e.kind in DESYNC_KINDS and e.ranks]
    if not events:
        return
    parts: list[str] = []
    seen: set[tuple[str, tuple[int, ...], int | None]] = set()
    for e in events:
        key = (e.kind, tuple(e.ranks), e.seq)
        if key in seen:
            continue  # every rank's watchdog prints the same report
        seen.add(key)
        who = ranks_named(e.ranks)
        if e.kind == "desync_not_joined":
            parts.append(f"{who} finished collective #{e.seq} but never joined #{e.next_seq}")
        elif e.kind == "desync_unfinished":
            parts.append(f"{who} joined collective #{e.seq} but did not finish it")
        else:
            parts.append(f"{who} never joined any collective")
    ranks = sorted({r for e in events for r in e.ranks})
    message = "PyTorch's desync report (TORCH_NCCL_DESYNC_DEBUG) names the ranks the others wait for: " + "; ".join(
        parts
    )
    yield make_finding(
        "HANG001",
        "error",
        message,
        evidence=shown(e.evidence for e in events),
        evidence_count=len(events),
        ranks=ranks,
    )


def _fr_trace_missing(ctx: Context) -> Iterable[Finding]:
    """The collective that PyTorch's Flight Recorder analyzer (fr_trace) says not all ranks joined: its report
    names the missing ranks; in its side-by-side view, their column ends before the others'."""
    for report in ctx.case.fr_trace_reports:
        if not report.missing_ranks:
            continue
        what = report.collective or "a collective"
        detail = ", ".join(
            part
            for part in (
                f"input sizes {report.input_sizes}" if report.input_sizes else "",
                f"state {report.state}" if report.state else "",
            )
            if part
        )
        if report.form == "report":
            where = f"collective {report.seq}" if report.seq is not None else "a collective"
            if report.entry is not None:
                where += f" (entry {report.entry} of the Flight Recorder buffer)"
            group = f" of process group {report.group}" if report.group else ""
            expected = f" of the {report.expected_ranks} expected" if report.expected_ranks else ""
            message = (
                f"{ranks_named(report.missing_ranks)}{expected}{group} never joined {where}, {what}"
                f"{f' ({detail})' if detail else ''}, as PyTorch's Flight Recorder analyzer (fr_trace) reports: the"
                " other ranks wait in it"
            )
        else:
            message = (
                f"{ranks_named(report.missing_ranks)} never joined entry {report.seq} ({what}"
                f"{f', {detail}' if detail else ''}) that {ranks_named(report.present_ranks)} entered, in the"
                " side-by-side view of PyTorch's Flight Recorder analyzer (fr_trace): the other ranks wait in it"
            )
        yield make_finding(
            "HANG001",
            "error",
            message,
            evidence=shown(report.evidence),
            evidence_count=len(report.evidence),
            ranks=report.missing_ranks,
        )


def _is_missing(
    progress: GroupProgress, leaders: list[RankProgress], behind: list[RankProgress], cut: set[str]
) -> bool:
    if progress.via == "flight_recorder":
        # dumps are written when a collective timed out: the leaders' last call is the one they wait in,
        # unless every leader finished it (then nobody waits)
        return not all(r.state == "completed" for r in leaders)
    if progress.via == "watchdog":
        # ranks that timed out themselves in an earlier collective entered it and wait too: behind (HANG003),
        # not missing, unless some rank behind shows no collective of its own under way
        return any(r.state == "timed out" for r in leaders) and any(r.state != "timed out" for r in behind)
    # COLL lines: counts of a running job; a clear minority behind in a log that was not cut
    if any(r.evidence is not None and r.evidence.source in cut for r in leaders + behind):
        return False
    return len(behind) < len(leaders)


def _missing_finding(
    progress: GroupProgress, top: int, leaders: list[RankProgress], behind: list[RankProgress]
) -> Finding:
    missing = [r.rank for r in behind]
    waiting = [r.rank for r in leaders]
    what = leaders[0].operation or "a collective"
    listed = number_ranges(sorted(set(waiting)), ", ")
    message = (
        f"{ranks_named(missing)} of {group_name(progress)} never entered {what} ({position(progress, top)})"
        f" that {len(waiting)} rank{'s' if len(waiting) != 1 else ''} ({listed}) wait in"
    )
    hosts = _hosts(behind)
    if hosts:
        message += f"; on {', '.join(hosts)}"
    lasts = sorted({(r.entered, r.operation) for r in behind if r.entered is not None}, key=lambda t: t[0] or 0)
    if lasts:
        message += "; their last: " + ", ".join(
            position(progress, n) + (f" ({op})" if op else "") for n, op in lasts[:3]
        )
    silent = [r.rank for r in behind if r.entered is None]
    if silent:
        message += (
            f"; {ranks_named(silent)} show no {'collective' if progress.via != 'coll_lines' else 'COLL line'} at all"
        )
    if progress.missing and progress.via == "flight_recorder":
        message += f"; no dump from {ranks_named([m.rank for m in progress.missing])}"
    message += f" (from {VIA[progress.via]})"
    evidence = _evidence(behind) + _evidence(leaders[:2])
    return make_finding(
        "HANG001",
        "error",
        message,
        evidence=shown(evidence),
        evidence_count=len(evidence),
        ranks=missing,
        hosts=hosts,
    )


def _ras_missing(ctx: Context) -> Iterable[Finding]:
    for report in ctx.case.ras_reports:
        for comm in report.communicators:
            if not comm.missing:
                continue
            ranks = sorted({m.rank for m in comm.missing})
            hosts = _hosts(comm.missing)
            states = sorted({m.status for m in comm.missing if m.status and m.status != "missing"})
            message = (
                f"{ranks_named(ranks)} of communicator {comm.hash or comm.id}"
                f"{f' ({comm.size} ranks)' if comm.size else ''} gave RAS no data"
                f"{' (' + ', '.join(states) + ')' if states else ''}: the others cannot complete a collective without"
                f" {'it' if len(ranks) == 1 else 'them'}"
            )
            if hosts:
                message += f"; on {', '.join(hosts)}"
            if report.dead_processes:
                message += f"; RAS considers dead: {'; '.join(report.dead_processes[:3])}"
            elif report.missing_processes:
                message += f"; unresponsive: {'; '.join(report.missing_processes[:3])}"
            severity: Severity = "error"
            if report.contradictions:  # e.g. the RAS client of NCCL 2.27.3, fixed in 2.29.2 (NVIDIA/nccl#1762)
                severity = "warning"
                message += (
                    f"; but the report contradicts itself ({report.contradictions[0]}), so its INCOMPLETE entries"
                    " are not trusted: query again, or with a newer ncclras"
                )
            # the communicator's own line and the heading that says its ranks below are missing first: the
            # ranks' lines mean what they say only under them
            headings = [line for line in (comm.evidence, comm.missing_evidence) if line is not None]
            evidence = headings + _evidence(comm.missing)
            yield make_finding(
                "HANG001", severity, message + " (from the ncclras report)", evidence=shown(evidence),
                evidence_count=len(evidence), ranks=ranks, hosts=hosts,
            )  # fmt: skip


# ------------------------------------------------------------------------------------ HANG002
def _signature(entry: FlightRecorderEntry) -> tuple:
    sizes = tuple(tuple(s) for s in entry.input_sizes) if entry.collective in SAME_SHAPE else ()
    return (entry.collective, sizes, tuple(entry.input_dtypes))


def _first_divergence(
    ctx: Context, group: str
) -> tuple[int, dict[tuple, list[int]], dict[int, FlightRecorderEntry]] | None:
    by_rank = collectives_by_rank(ctx.case.flight_records, group)
    seqs = sorted({s for seqs in by_rank.values() for s in seqs})
    for seq in seqs:
        calls = {rank: seqs_[seq] for rank, seqs_ in by_rank.items() if seq in seqs_}
        kinds: dict[tuple, list[int]] = defaultdict(list)
        for rank, entry in sorted(calls.items()):
            kinds[_signature(entry)].append(rank)
        if len(kinds) > 1:
            return seq, kinds, calls
    return None


def _mismatch_at(ctx: Context, progress: GroupProgress, top: int) -> bool:
    group = progress.group.split(":")[0]
    found = _first_divergence(ctx, group)
    return found is not None and found[0] <= top


@rule("HANG002", "collective-mismatch", severity="error")
def collective_mismatch(ctx: Context) -> Iterable[Finding]:
    """Ranks of one process group entered different collectives, sizes or dtypes at the same
    sequence number: the application called them in a different order on different ranks (a
    desync). Read from PyTorch Flight Recorder dumps; names the first sequence number where the
    ranks diverge and what each rank called there.

    Why: collectives are matched by order, not by name. When rank 1 calls all_gather while the
    others call all_reduce, NCCL pairs them anyway: the job hangs, or exchanges the wrong bytes
    and fails later with a misleading error. Everything after the first divergence is noise.

    Fix: Make every rank issue the same collectives in the same order with the same shapes and
    dtypes: look for collectives under rank-dependent branches, data-dependent shapes, or a
    different number of parameters per rank. The Flight Recorder's frames show the calling line.

    Sources: PyTorch torch/distributed/flight_recorder (fr_trace: COLLECTIVE_TYPE_MISMATCH,
    SIZE_OR_SYNTAX_MISMATCH, COLLECTIVE_DTYPE_MISMATCH); PyTorch docs TORCH_NCCL_DESYNC_DEBUG
    """
    groups: dict[str, str] = {}
    for dump in ctx.case.flight_records:
        for entry in dump.entries:
            groups.setdefault(entry.group, group_label(entry))
    for group, label in groups.items():
        found = _first_divergence(ctx, group)
        if found is None:
            continue
        seq, kinds, calls = found
        ordered = sorted(kinds.items(), key=lambda kv: (-len(kv[1]), kv[1]))
        parts = []
        for _, ranks in ordered:
            entry = calls[ranks[0]]
            where = f" at {entry.called_at}" if entry.called_at else ""
            parts.append(f"{ranks_named(ranks)} called {describe(entry)}{where}")
        minority = [r for _, ranks in ordered[1:] for r in ranks]
        members = flight_recorder_members(ctx.case.flight_records, group)
        message = (
            f"process group {label} ({len(members)} ranks) diverges at sequence number {seq}: "
            + "; ".join(parts)
            + " (from Flight Recorder dumps)"
        )
        evidence = [
            Evidence(source=d.source, line=0, text=f"sequence number {seq}: {describe(calls[d.rank])}")
            for d in ctx.case.flight_records
            if d.rank in calls
        ]
        yield make_finding(
            "HANG002", "error", message, evidence=shown(evidence), evidence_count=len(evidence), ranks=minority
        )


# ------------------------------------------------------------------------------------ HANG003
@rule("HANG003", "ranks-behind", severity="warning")
def ranks_behind(ctx: Context) -> Iterable[Finding]:
    """Ranks of one group have reached different operation counts or sequence numbers, without
    one clear missing rank: stragglers (a slow host, a rank stuck in other work), or a snapshot of
    a running job (an ncclras query, a cut log). Names the slowest ranks and hosts. In a job that runs, NCCL
    Inspector's records show the straggler itself: the rank whose kernel is the shortest (or starts last) at most
    calls while the others' kernels run longer, waiting for it.

    Why: NCCL collectives run at the pace of the slowest rank. RAS notes that counts can differ
    briefly on a healthy job, because collectives outrun its query; counts that stay the same
    across repeated queries mean the group is stuck and the slowest ranks are the suspects.

    Fix: Repeat the query (ncclras) or look at the end of the log: if the counts do not move, treat
    the slowest ranks as stuck (HANG001): check their hosts for WARNs, network errors, and what
    their processes are doing. If they move, look for load imbalance on those hosts.

    Sources: NCCL docs troubleshooting/ras.rst (MISMATCH of operation counts); NCCL src/enqueue.cc
    (opCount); PyTorch ProcessGroupNCCL (last enqueued / completed work); NCCL plugins/profiler/inspector
    README.md (kernel_gpu timing, event_trace_ts kernel start per channel)
    """
    cut = _cut_sources(ctx)
    for progress in ctx.case.progress:
        if progress.via == "ras":
            continue
        top, leaders, behind = furthest(progress)
        if top is None or not behind or _is_missing(progress, leaders, behind, cut):
            continue
        if progress.via == "flight_recorder" and _mismatch_at(ctx, progress, top):
            continue
        slowest_count = behind[0].entered
        slowest = [r for r in behind if r.entered == slowest_count]
        total = len(progress.ranks) + len(progress.missing)
        unseen: list[int] = []  # ranks of the group (its size, from PyTorch's options line) that printed nothing
        if progress.via == "watchdog" and progress.size and progress.size > total:
            unseen = sorted(set(range(progress.size)) - {r.rank for r in progress.ranks})
            total = progress.size
        message = (
            f"{group_name(progress)}: {len(behind)} of {total} ranks are behind"
            f" ({len(leaders)} at {position(progress, top)}); slowest {ranks_named([r.rank for r in slowest])}"
            f" at {position(progress, slowest_count)}"
        )
        hosts = _hosts(slowest)
        if hosts:
            message += f" on {', '.join(hosts)}"
        if all(r.state == "timed out" for r in slowest):
            message += ", where they timed out waiting themselves"
        if unseen:
            message += f"; {ranks_named(unseen)} printed no watchdog line"
        if any(r.evidence is not None and r.evidence.source in cut for r in leaders + behind):
            message += "; the input was cut, so this may only be where the lines stop"
        message += f" (from {VIA[progress.via]})"
        evidence = _evidence(slowest) + _evidence(leaders[:1])
        yield make_finding(
            "HANG003", "warning", message, evidence=shown(evidence), evidence_count=len(evidence),
            ranks=[r.rank for r in behind], hosts=hosts,
        )  # fmt: skip
    yield from _ras_behind(ctx)
    yield from job_stragglers(ctx)


def _ras_behind(ctx: Context) -> Iterable[Finding]:
    for report in ctx.case.ras_reports:
        for comm in report.communicators:
            for operation, counts in comm.op_counts.items():
                if len(counts) < 2:
                    continue
                top = max(counts)
                low = min(counts)
                listed = [
                    r
                    for r in comm.ranks
                    if (r.operation or "") == operation and r.entered is not None and r.entered < top
                ]
                slowest = [r for r in listed if r.entered == low]
                what = f"{operation} operations" if operation else "operations"
                spread = ", ".join(f"{n} at {c}" for c, n in sorted(counts.items(), reverse=True))
                message = f"communicator {comm.hash or comm.id}: ranks launched different numbers of {what} ({spread})"
                if slowest:
                    message += f"; slowest {ranks_named([r.rank for r in slowest])}"
                    hosts = _hosts(slowest)
                    if hosts:
                        message += f" on {', '.join(hosts)}"
                message += "; one query cannot tell late from stuck: repeat it, counts that do not move are a hang"
                header = [comm.evidence] if comm.evidence else []  # the line that names the communicator
                evidence = header + (_evidence(slowest) or _evidence(listed))
                yield make_finding(
                    "HANG003", "warning", message + " (from the ncclras report)", evidence=shown(evidence),
                    evidence_count=len(evidence), ranks=[r.rank for r in listed], hosts=_hosts(slowest),
                )  # fmt: skip
