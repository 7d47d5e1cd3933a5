"""RUN013: which failure of the job came first, and the cascade it caused (diagnose/first_failure.py orders them)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from ncclscope.diagnose.first_failure import ORDERED_BY, Failure, Timeline, timeline
from ncclscope.diagnose.rules.context import EVIDENCE_SHOWN, Context, shown, shown_with
from ncclscope.diagnose.rules.net_common import rank_list
from ncclscope.diagnose.rules.registry import make_finding, rule
from ncclscope.model import Evidence, Finding


@rule("RUN013", "first-failure", severity="error")
def first_failure(ctx: Context) -> Iterable[Finding]:
    """Several failures in one job: the earliest initiating failure (a hardware fault in a host's kernel log, a
    worker process that ended, an NCCL WARN that starts a failure: a CUDA error, a failed allocation, a
    bootstrap mismatch) is named as the root, with its host, rank, GPU and time, and the failures that only
    follow it are its cascade: watchdog timeouts and aborts on the other ranks, `Connection closed by remote
    peer` and refused connections, the proxy's failed calls, remote errors raised into Python, the workers the
    launcher closed. Where nothing orders the failures of different hosts, the candidates are named.

    Why: When one rank dies, every other rank of the communicator fails too, later and more loudly: their
    watchdogs time out, their sockets close, their errors say `remote process exited or there was a network
    error`. Those lines outnumber the one that matters, and sorting them by severity or count points at a
    healthy host. Support's first question is which rank failed first.

    Fix: Investigate the root named here first (its host's kernel log, its GPU, its process's own output);
    the cascade needs no fix of its own. Keep times on every line so that the order is known across hosts:
    NCCL 2.26+ stamps WARN lines by default (NCCL_DEBUG_TIMESTAMP_LEVELS), `dmesg -T` or `journalctl -k -o
    short-iso` for the kernel, torchrun's failure report for the workers.

    Sources: NVIDIA/nccl#795 (ncclRemoteError on healthy ranks after a remote crash); NVIDIA/nccl-tests#166;
    nvidia-resiliency-ext attribution registry (nccl_cascade: search for an earlier initiating failure); PyTorch
    torch/distributed/elastic/multiprocessing/errors (ChildFailedError, Root Cause (first observed failure));
    NCCL docs env.rst (NCCL_DEBUG_TIMESTAMP_LEVELS)
    """
    line = job_timeline(ctx)
    if not line.failures:
        return
    if line.root is not None and line.several:
        yield _rooted(line)
    elif line.candidates:
        yield _unordered(line)
    elif line.lost_peer:
        yield _lost_peer(line)


def job_timeline(ctx: Context) -> Timeline:
    return ctx.once("timeline", lambda c: timeline(c.case))


def first_failure_line(ctx: Context) -> Evidence | None:
    """The line of the failure RUN013 names as the first (its first evidence line), when it names one."""
    line = job_timeline(ctx)
    return line.root.evidence if line.root is not None and line.several else None


def _rooted(line: Timeline) -> Finding:
    root = line.root
    assert root is not None
    when = f" at {root.time_text.strip('[]')}" if root.time_text else ""
    cascade, later = _summary(line.cascade), _summary(line.later)
    others = [f.evidence for f in line.cascade + line.later]
    return make_finding(
        "RUN013", "error",
        f"first failure: {root.what} on {root.process}{when} ({ORDERED_BY.get(line.ordered_by, line.ordered_by)})"
        + (f"; what followed it: {cascade}" if cascade else "")
        + (f"; later failures of their own: {later}" if later else ""),
        evidence=[root.evidence, *shown(_one_per_kind(line.cascade + line.later), EVIDENCE_SHOWN - 1)],
        evidence_count=1 + len(others),
        hosts=_hosts([root]),
        ranks=_ranks([root]),
    )  # fmt: skip


def _unordered(line: Timeline) -> Finding:
    names = "; ".join(f"{f.what} on {f.process}{f' at {f.time_text}' if f.time_text else ''}" for f in line.candidates)
    cascade = _summary(line.cascade)
    lines = [f.evidence for f in line.candidates] + [f.evidence for f in line.cascade]
    return make_finding(
        "RUN013", "warning",
        f"failures on {len(line.candidates)} processes and nothing orders them across hosts (no times on their "
        f"lines): any of them may be first: {names}" + (f"; what followed: {cascade}" if cascade else ""),
        evidence=shown_with([f.evidence for f in line.candidates], _one_per_kind(line.cascade)),
        evidence_count=len(lines), hosts=_hosts(line.candidates),
        ranks=_ranks(line.candidates),
    )  # fmt: skip


def _lost_peer(line: Timeline) -> Finding:
    cascade = _summary(line.cascade)
    lines = [f.evidence for f in line.cascade]
    if line.lost_peer_host:
        where = (
            f"its host {line.lost_peer_host} is in the inputs but shows no failure of its own: its process ended "
            "without a word (killed, out of host memory) or the host went away; its launcher's output and kernel "
            "log say which"
        )
    else:
        where = "its process exited or its host went away first, and its own log is not in the inputs"
    return make_finding(
        "RUN013", "error",
        f"every failure here follows the loss of the peer {line.lost_peer}: {where}; what followed here: {cascade}",
        evidence=shown(_one_per_kind(line.cascade)), evidence_count=len(lines), hosts=_hosts(line.cascade),
        ranks=_ranks(line.cascade),
    )  # fmt: skip


def _summary(failures: list[Failure]) -> str:
    """'3 watchdog timeouts (ranks 1, 2, 3); 2 NCCL WARN socketProgress ... (rank 0)': each kind once."""
    kinds: Counter[str] = Counter()
    ranks: dict[str, set[int]] = {}
    hosts: dict[str, set[str]] = {}
    for f in failures:
        kind = _kind(f)
        kinds[kind] += 1
        if f.rank is not None:
            ranks.setdefault(kind, set()).add(f.rank)
        elif f.host:
            hosts.setdefault(kind, set()).add(f.host)
    parts = []
    for kind, n in kinds.most_common():
        where = (
            f" (rank{'s' if len(ranks[kind]) > 1 else ''} {rank_list(ranks[kind])})"
            if kind in ranks
            else (f" (on {', '.join(sorted(hosts[kind]))})" if kind in hosts else "")
        )
        parts.append(f"{n} x {kind}{where}")
    return "; ".join(parts)


def _one_per_kind(failures: list[Failure]) -> list[Evidence]:
    """The first line of each kind of failure: the evidence shows what happened, not the same line five times."""
    seen: dict[str, Evidence] = {}
    for f in failures:
        seen.setdefault(_kind(f), f.evidence)
    return list(seen.values())


def _kind(f: Failure) -> str:
    """The failure without its details: what it is, as a reader counts it."""
    if f.source == "framework":
        return f.what.split(" at collective")[0].split(":")[0].split(" [")[0]
    if f.source == "nccl" and f.peer:
        return f.what.split(" (")[0]
    if f.source == "nccl":
        return f.what.split(":")[0][:80]
    return f.what


def _hosts(failures: list[Failure]) -> list[str]:
    return sorted({f.host for f in failures if f.host})


def _ranks(failures: list[Failure]) -> list[int]:
    return sorted({f.rank for f in failures if f.rank is not None})
