"""RUN001: communicators whose init did not complete, judged only where the inputs can show it."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from ncclscope.common.words import plural, ranks_named
from ncclscope.diagnose.rules.context import Context, shown
from ncclscope.diagnose.rules.registry import make_finding, rule
from ncclscope.diagnose.rules.run import covered_lines
from ncclscope.diagnose.rules.version import host_list
from ncclscope.model import CommRank, Communicator, Finding, Severity


def _lines(n: int) -> str:
    return f"{n} line{'s' if n != 1 else ''}"


def input_cut(ctx: Context, sources: set[str]) -> tuple[str | None, bool]:
    """(why the input of these sources looks cut, whether it stops there) from Source.truncated
    and Source.problems (a damaged .gz ...)."""
    for s in ctx.case.sources:
        if s.path not in sources:
            continue
        if s.problems:
            return f"{s.path}: {s.problems[0]}", True
        if s.truncated:
            return f"{s.path}: {s.truncated[0]}", s.ends_cut
    return None, False


@rule("RUN001", "init-incomplete", severity="error", needs=["init"])
def init_incomplete(ctx: Context) -> Iterable[Finding]:
    """A communicator has ranks that logged `Init START` but no `Init COMPLETE`, or fewer ranks
    than `nranks` reported init although the inputs hold the logs of all its hosts.

    Severity: error with positive evidence that init failed (the stuck ranks' WARN lines) or hangs (a
    watchdog or timeout, the process going on past it); otherwise a warning, because a log that
    simply ends while ranks are in init is what an excerpt looks like as much as a hang. When the
    input is visibly cut (the reader reported a damaged input (Source.problems), the input stops
    inside a listing (connection lines, the topology dump ...) or in a cut record, records in it are
    cut, or the poster elided lines (`...`, `[...]`): Source.truncated) and no rank of the
    communicator completed, nothing shows how far init got: the rule does not judge, and EVD001 says
    so. Ranks that are absent from the inputs altogether are judged only when the inputs cover the
    communicator (as many hosts as `nNodes`, or as many processes on its hosts as ranks); otherwise
    EVD001 says that the other ranks' logs were not given, which is not a fault.

    Why: Every rank of a communicator must reach Init COMPLETE; the ranks that do not are the ones
    stuck (bootstrap, connection setup) or failed, and the other ranks wait for them until a
    timeout. The finding names them, and whether they logged a WARN (a failure) or nothing (a hang).

    Fix: Look at the named ranks' hosts first: their WARN lines, network reachability (bootstrap
    interface, firewall), GPU health. For a live hang, query NCCL RAS (`ncclras`, NCCL 2.24+) to
    see which ranks are missing. Give the logs of every rank (NCCL_DEBUG_FILE=nccl.%h.%p.log) so
    that none is silently absent.

    Sources: NCCL docs troubleshooting.rst and ras.rst; NCCL src/init.cc (Init START/COMPLETE lines,
    START since 2.18.3); stas00/ml-engineering network/debug/README.md (`grep "Init COMPLETE"` across
    rank logs)
    """
    warn_procs = _warn_lines_per_process(ctx)
    procs_per_host: dict[str, int] = defaultdict(int)
    for p in ctx.case.processes:
        if p.host:
            procs_per_host[p.host] += 1
    for label, comms in ctx.comm_groups:
        init = _InitState.of(comms, procs_per_host)
        if not init.stuck and not init.missing:
            continue
        cut, stops = input_cut(ctx, {r.evidence.source for r in init.members.values() if r.evidence})
        size = f"{init.nranks} ranks" if init.nranks else "size unknown"
        hosts = init.hosts
        # the hosts whose NCCL lines show this communicator; a benchmark's device lines may name more
        head = f"{label[0].upper()}{label[1:]} ({size}, logged on {plural(len(hosts), 'host')})"
        if init.stuck and cut and stops and not init.completed:
            ctx.cannot_judge(
                "RUN001",
                f"{head}: {ranks_named([r.rank for r in init.stuck])} logged Init START and the input ({cut}) stops"
                " before any rank completed: it may have been cut there or the job may hang there; the whole log"
                " (or `ncclras` on the live job) tells which",
                (r.evidence for r in init.stuck if r.evidence),
            )
        elif init.stuck:
            yield _stuck_ranks(ctx, head, init, warn_procs, cut)
        elif not init.covered:
            ctx.cannot_judge(
                "RUN001",
                f"{head}: the inputs hold the init lines of {len(init.reported)} of {init.nranks} ranks"
                f" ({host_list(hosts) or 'no host named'}); whether the others completed init cannot be judged"
                " without their logs (NCCL_DEBUG_FILE=/shared/nccl.%h.%p.log gives one per process)"
                + (f"; the input looks cut ({cut})" if cut else ""),
                shown(r.evidence for r in init.members.values() if r.evidence),
            )
        else:
            yield _missing_ranks(head, init, cut)


@dataclass
class _InitState:
    """One communicator's init as the inputs show it: each rank's furthest record, who completed, who is
    stuck after Init START, who never logged init, and whether the inputs cover every rank's host."""

    members: dict[tuple, CommRank]
    nranks: int | None
    nnodes: int | None
    reported: set[int]
    completed: set[int]
    stuck: list[CommRank]
    hosts: list[str]
    missing: list[int]
    covered: bool

    @classmethod
    def of(cls, comms: list[Communicator], procs_per_host: dict[str, int]) -> _InitState:
        members: dict[tuple, CommRank] = {}
        for comm in comms:
            for r in comm.ranks:
                key = (r.rank, r.host, r.pid)
                old = members.get(key)
                if old is None or (r.init_complete and not old.init_complete):
                    members[key] = r
        nranks = max((c.nranks or 0 for c in comms), default=0) or None
        nnodes = max((c.nnodes or 0 for c in comms), default=0) or None
        reported = {r.rank for r in members.values() if r.rank >= 0}
        completed = {r.rank for r in members.values() if r.init_complete}
        stuck = sorted(
            (r for r in members.values() if r.init_start and not r.init_complete and r.rank not in completed),
            key=lambda r: r.rank,
        )
        hosts = sorted({r.host for r in members.values() if r.host})
        covered = bool(
            (nnodes and len(hosts) >= nnodes) or (nranks and hosts and sum(procs_per_host[h] for h in hosts) >= nranks)
        )
        missing = sorted(set(range(nranks)) - reported) if nranks else []
        return cls(members, nranks, nnodes, reported, completed, stuck, hosts, missing, covered)


def _warn_lines_per_process(ctx: Context) -> dict[tuple[str | None, int | None], int]:
    """WARN (and ABORT) lines per (host, pid), each line once; not those of a network NCCL gave up for
    another (a net plugin that could not start: NCCL goes on over the next network, NET002 says so)."""
    warn_procs: dict[tuple[str | None, int | None], int] = defaultdict(int)
    seen: set[tuple[str, int]] = {line for line, code in covered_lines(ctx).items() if code == "NET002"}
    for w in ctx.case.warnings:
        if w.level in ("WARN", "ABORT") and (w.evidence.source, w.evidence.line) not in seen:
            seen.add((w.evidence.source, w.evidence.line))
            warn_procs[(w.host, w.pid)] += 1
    return warn_procs


def _stuck_ranks(
    ctx: Context, head: str, init: _InitState, warn_procs: dict[tuple[str | None, int | None], int], cut: str | None
) -> Finding:
    """Ranks that logged Init START and no Init COMPLETE: failed (their WARN lines), waiting for a peer
    (still retrying a connection) or stuck (a hang)."""
    stuck, completed, reported = init.stuck, init.completed, init.reported
    by_host: dict[str, list[int]] = defaultdict(list)
    for r in stuck:
        by_host[r.host or "?"].append(r.rank)
    if len(by_host) > 6:
        ranks_all = [r.rank for r in stuck]
        where = f"{ranks_named(ranks_all)} on {len(by_host)} hosts ({host_list(sorted(by_host))})"
    else:
        where = ", ".join(f"{ranks_named(rs)} on {h}" for h, rs in sorted(by_host.items()))
    message = (
        f"{head}: {where} logged Init START but no Init COMPLETE"
        f" ({len(completed)} of the {len(reported)} rank{'s' if len(reported) != 1 else ''} in the inputs"
        " completed)"
    )
    warned = sum(warn_procs.get((r.host, r.pid), 0) for r in {(r.host, r.pid): r for r in stuck}.values())
    hung = "" if cut else _hang_shown(ctx, stuck)
    if warned:
        message += f"; their processes logged {_lines(warned)} of WARN (the failure is reported there)"
    elif retrying := _retrying_ranks(ctx, stuck):
        message += (
            f"; their processes logged no WARN, and {ranks_named(retrying)}"
            f" {'were' if len(retrying) != 1 else 'was'} still retrying a connection"
            " (NET006): waiting for a peer"
        )
    elif hung:
        message += f"; their processes logged no WARN and {hung}: they are stuck (a hang), not failed"
    elif not cut:
        message += (
            "; their processes logged no WARN, and nothing after it shows a hang (a watchdog or timeout, later"
            " lines of theirs): the input may end there (an excerpt) or the job hang there; the rest of the log,"
            " or `ncclras` on the live job, tells which"
        )
    if init.missing and init.covered:
        message += f"; {ranks_named(init.missing)} never logged init at all"
    # an error only with positive evidence that init failed or hangs; an input that simply ends in init is
    # what an excerpt looks like too
    severity: Severity = "error" if not cut and (warned or hung) else "warning"
    if cut:
        message += f"; but the input looks cut ({cut}), so their COMPLETE lines may just be missing"
    return make_finding(
        "RUN001",
        severity,
        message,
        evidence=shown(r.evidence for r in stuck if r.evidence),
        evidence_count=len(stuck),
        hosts=sorted(by_host),
        ranks=sorted({r.rank for r in stuck}),
    )


def _missing_ranks(head: str, init: _InitState, cut: str | None) -> Finding:
    """Ranks that never logged init although the inputs hold the logs of every host of the communicator."""
    nnodes = init.nnodes
    message = (
        f"{head}: {ranks_named(init.missing)} never logged Init START or COMPLETE although the inputs hold the"
        f" logs of {'all ' + str(nnodes) + ' hosts' if nnodes else 'enough processes on its hosts'}"
    )
    severity: Severity = "error"
    if cut:
        severity = "warning"
        message += f"; but the input looks cut ({cut}), so the lines may just be missing"
    return make_finding(
        "RUN001",
        severity,
        message,
        evidence=shown(r.evidence for r in init.members.values() if r.evidence),
        evidence_count=len(init.members),
        hosts=init.hosts,
        ranks=init.missing,
    )


HANG_EVENTS = frozenset({"watchdog_timeout", "watchdog_stuck", "dump_signal", "operations_failed"})


def _hang_shown(ctx: Context, stuck: list[CommRank]) -> str:
    """Positive evidence that the stuck ranks hang rather than that the input ends: the framework's
    watchdog or timeout, or their process going on to complete another communicator's init later."""
    events = sorted({e.kind for e in ctx.case.framework if e.kind in HANG_EVENTS})
    if events:
        return f"the framework reported {', '.join(k.replace('_', ' ') for k in events)}"
    starts = {(r.host, r.pid): r.evidence.line for r in stuck if r.evidence}
    if not starts:
        return ""
    sources = {r.evidence.source for r in stuck if r.evidence}
    ids = {c.comm_id for c in _comms_of(ctx, stuck) if c.comm_id}
    last_start = max(starts.values())
    later = sorted(
        {
            r.rank
            for comm in ctx.case.communicators
            if comm.comm_id in ids
            for r in comm.ranks
            if r.init_complete and r.evidence and r.evidence.source in sources and r.evidence.line > last_start
        }
    )
    if later:  # init ends in collective steps: its ranks complete together, so the input went past the moment
        return f"{ranks_named(later)} of the communicator completed init later"
    for comm in ctx.case.communicators:
        for r in comm.ranks:
            start = starts.get((r.host, r.pid))
            if start is not None and r.init_complete and r.evidence and r.evidence.line > start:
                return "their process went on to complete another communicator's init"
    return ""


def _comms_of(ctx: Context, ranks: list[CommRank]) -> list[Communicator]:
    ids = {id(r) for r in ranks}
    return [c for c in ctx.case.communicators if any(id(r) in ids for r in c.ranks)]


def _retrying_ranks(ctx: Context, stuck: list[CommRank]) -> list[int]:
    """The stuck ranks whose process was retrying a socket connection (and had not given up)."""
    retrying = {(f.host, f.pid) for f in ctx.case.socket_failures if f.retrying and f.level != "WARN"}
    return sorted({r.rank for r in stuck if (r.host, r.pid) in retrying})
