"""Rules of the NET family about failures at run time: NET005 (IB completion errors) and NET006
(socket, bootstrap and connection failures). Both read typed facts (Case.ib_completion_errors,
Case.socket_failures); the strerror texts that socket failures quote are decoded by error_strings."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from ncclscope.diagnose.rules.context import Context, shown
from ncclscope.diagnose.rules.error_strings import socket_errno
from ncclscope.diagnose.rules.net_common import (
    GROUPS_LIMIT,
    address_hosts,
    names,
    peer_label,
    rank_index,
    rank_list,
    rank_of,
)
from ncclscope.diagnose.rules.registry import make_finding, rule
from ncclscope.model import Finding, IbCompletionError, SocketFailure

# ------------------------------------------------------------------------------------ NET005
IBV_WC_STATUS: dict[int, tuple[str, str]] = {
    0: ("SUCCESS", "success"),
    1: ("LOC_LEN_ERR", "local length error: the two sides disagree on a message size"),
    2: ("LOC_QP_OP_ERR", "local queue-pair operation error"),
    3: ("LOC_EEC_OP_ERR", "local EE context operation error"),
    4: (
        "LOC_PROT_ERR",
        "local protection error: a buffer's memory registration is wrong or gone (GPUDirect/DMA-BUF, ACS/IOMMU)",
    ),
    5: (
        "WR_FLUSH_ERR",
        "work request flushed: the connection was already in error, usually a consequence of an earlier "
        "error on this host or its peer",
    ),
    6: ("MW_BIND_ERR", "memory window bind error"),
    7: ("BAD_RESP_ERR", "bad response from the peer"),
    8: ("LOC_ACCESS_ERR", "local access error: memory registration or permissions"),
    9: ("REM_INV_REQ_ERR", "remote invalid request: the peer rejected the request"),
    10: (
        "REM_ACCESS_ERR",
        "remote access error: the peer rejected the RDMA access (its memory registration, or a peer that restarted)",
    ),
    11: ("REM_OP_ERR", "remote operation error on the peer"),
    12: (
        "RETRY_EXC_ERR",
        "transport retry counter exceeded: the peer stopped acknowledging, a link or connectivity problem "
        "(port down or flapping, routing, the peer died)",
    ),
    13: (
        "RNR_RETRY_EXC_ERR",
        "receiver-not-ready retries exceeded: the peer did not post receive buffers in time (stalled or dead peer)",
    ),
    14: ("LOC_RDD_VIOL_ERR", "local RDD violation"),
    15: ("REM_INV_RD_REQ_ERR", "remote invalid RD request"),
    16: ("REM_ABORT_ERR", "remote abort: the peer aborted the operation"),
    17: ("INV_EECN_ERR", "invalid EE context number"),
    18: ("INV_EEC_STATE_ERR", "invalid EE context state"),
    19: ("FATAL_ERR", "fatal adapter error"),
    20: ("RESP_TIMEOUT_ERR", "response timeout"),
    21: ("GENERAL_ERR", "general error"),
}


@rule("NET005", "ib-completion-error", severity="error", needs=["nccl_log"])
def ib_completion_error(ctx: Context) -> Iterable[Finding]:
    """An InfiniBand/RoCE work request completed with an error: `NET/IB : Got completion from peer ...
    with error/status N`. The status is decoded (ibv_wc_status: 12 RETRY_EXC_ERR, 5 WR_FLUSH_ERR,
    4 LOC_PROT_ERR, 13 RNR_RETRY_EXC_ERR, ...), and the NIC, the peer and the host/rank that saw it
    are named; identical errors (status, host, NIC) are counted together.

    Why: A completion error breaks the connection: NCCL aborts the communicator and the job fails or
    hangs. Status 12 (retry exceeded) means the peer stopped acknowledging: a link that is down or
    flapping, bad routing or GID selection on RoCE, or a dead peer. Status 5 (flushed) follows an
    earlier error and is not the cause itself. Protection/access errors (4, 8, 10) point at memory
    registration (GPUDirect RDMA, DMA-BUF, ACS/IOMMU).

    Fix: For status 12/13 check the NIC named and the peer's: `ibstat` (State Active, Physical state
    LinkUp, expected rate), `rdma statistic` (local_ack_timeout_err, rnr_nak_retry_err,
    packet_seq_err), `perfquery -x` (SymbolErrorCounter, LinkDownedCounter), `ethtool -S` for RoCE
    PFC/ECN counters, `ibdiagnet` on the fabric; drain the host if one NIC keeps failing. For 5 look for
    the first error before it. For 4/8/10 check ACS (disable it on PCIe switches or enable ATS in VMs)
    and nvidia-peermem/DMA-BUF.

    Sources: NCCL docs troubleshooting/networking_troubleshooting.rst and gpu_troubleshooting.rst (PCI
    ACS); NVIDIA/nccl#1405; NVIDIA/nccl#1814; NVIDIA/nccl#1664 (kiskra-nvidia: completion errors "often
    indicate connectivity problems"); rdma-core libibverbs verbs.h (enum ibv_wc_status)
    """
    index = rank_index(ctx)
    addresses = address_hosts(ctx)
    groups: dict[tuple[int | None, str, str], list[IbCompletionError]] = defaultdict(list)
    for error in _once(ctx.case.ib_completion_errors):
        groups[(error.status, error.host or "", error.hca or "")].append(error)
    order = sorted(groups.items(), key=lambda item: (item[0][0] == 5, item[0][1], item[0][2], str(item[0][0])))
    for (status, host, hca), items in order:
        name, meaning = IBV_WC_STATUS.get(status, ("", "")) if status is not None else ("", "")
        label = f"status {status} {name}".rstrip() if status is not None else "error (status not printed)"
        peers = [peer_label(e.peer, addresses, ctx.hosts)[0] for e in items if e.peer]
        ranks = sorted({r for r in (rank_of(index, e) for e in items) if r is not None})
        vendors = sorted({str(e.vendor_err) for e in items if e.vendor_err is not None})
        where = host or "an unnamed host"
        if hca:
            where += f" NIC {hca}"
        if ranks:
            where += f" (rank{'s' if len(ranks) > 1 else ''} {rank_list(ranks)})"
        message = f"IB completion {label} on {where}"
        if peers:
            message += f" from peer {names(peers)}"
        if vendors:
            message += f", vendor err {names(vendors)}"
        if len(items) > 1:
            message += f" ({len(items)} times)"
        if meaning:
            message += f": {meaning}"
        yield make_finding(
            "NET005",
            "error",
            message,
            evidence=shown(e.evidence for e in items),
            evidence_count=len(items),
            hosts=[host] if host else [],
            ranks=ranks,
        )


def _once(facts: list) -> list:  # type: ignore[type-arg]
    """Each input line once (a record glued to another can be read twice)."""
    seen: set[tuple[str, int, str]] = set()
    out = []
    for fact in facts:
        key = (fact.evidence.source, fact.evidence.line, fact.evidence.text)
        if key not in seen:
            seen.add(key)
            out.append(fact)
    return out


# ------------------------------------------------------------------------------------ NET006
# What NCCL's own words say, for the failures that quote no errno
PROBLEM_KINDS = {
    "connection_closed": (
        "connection closed by remote peer",
        "the peer process exited or aborted first: its own log holds the first error",
    ),
    "no_interface": ("no usable interface", "NCCL found no network interface to use: check NCCL_SOCKET_IFNAME"),
}
BOOTSTRAP = ("bootstrap error", "the ranks could not set up the job's bootstrap ring")
EFA_FIX = (
    "Let the instances' security group allow all inbound and outbound traffic from itself (EFA needs a rule that"
    " names the group), keep the instances in one subnet and placement group, and check that every rank is still"
    " running (a peer that died leaves its handshake unanswered)."
)
EFA_HANDSHAKE = (
    "EFA handshake unanswered",
    "aws-ofi-nccl reached the peer over EFA but its connection handshake got no answer (`Unresponsive receiver`): the"
    " instances' security group does not allow all traffic within itself, they are not in one subnet or placement"
    " group, or the peer process is gone (its own log then holds the first error)",
)
SOCKET_ERROR = ("socket error", "a socket operation failed")
PEER_WORDS = {
    "connection refused": "by",
    "connection reset by peer": "",
    "connection closed by remote peer": "",
    "connection timeout": "to",
    "no route to peer": "to",
    "connection aborted": "to",
}


def connection_kind(failure: SocketFailure) -> tuple[str, str] | None:
    """(kind, meaning) of a socket failure; None for one that is not about a connection."""
    if failure.problem == "bad_address_family":
        return None  # an internal check on the address NCCL built (RUN005)
    if failure.problem == "aborted":
        return None  # `socketProgressOpt: abort called`: the communicator's own abort (teardown), not the network
    if failure.caller == "NET/OFI" and failure.call == "handshake":
        return EFA_HANDSHAKE
    known = socket_errno(failure.errno_text)
    if known is not None:
        return known.label, known.meaning
    if failure.problem in PROBLEM_KINDS:
        return PROBLEM_KINDS[failure.problem]
    if failure.caller == "Bootstrap":
        return BOOTSTRAP
    return SOCKET_ERROR


@rule("NET006", "connection-failure", severity="error", needs=["nccl_log"])
def connection_failure(ctx: Context) -> Iterable[Finding]:
    """A socket or bootstrap connection failed: refused, reset, closed by the remote peer, aborted,
    timed out, no route, no usable interface, a bootstrap root that cannot be reached. One finding per
    kind of failure and peer, naming the hosts that saw it; `retrying` lines count only next to a
    failure of the same host. Errors of NCCL's proxy thread and messages of the wrong size are NCCL
    warnings (RUN005): they follow from a failure, they do not say which connection failed.

    Why: NCCL's bootstrap, proxy and socket transport need every rank to reach every peer over TCP. A
    refused or timed-out connection at init is almost always the network setup (wrong interface,
    firewall, a peer that never started); closed/reset connections during a run mean the peer died
    first, so the peer's log holds the root cause.

    Fix: For refused/timeout/no route: set NCCL_SOCKET_IFNAME to the interface that connects the hosts,
    open the ports between them (NCCL uses ephemeral ports), check that every rank started. For
    closed/reset: read the peer's log for its first WARN (CUDA error, IB completion error, OOM, killed
    by the launcher).

    Sources: NCCL src/misc/socket.cc (2.29+: src/os/linux.cc) and src/bootstrap.cc; NCCL docs
    troubleshooting/networking_troubleshooting.rst and troubleshooting/runtime_and_mpi_issues.rst;
    NVIDIA/nccl#1328
    """
    index = rank_index(ctx)
    addresses = address_hosts(ctx)
    groups: dict[tuple[str, str], _ConnGroup] = {}
    retries: list[tuple[SocketFailure, str, str | None]] = []
    for failure in _once(ctx.case.socket_failures):
        kind = connection_kind(failure)
        if kind is None:
            continue
        label, peer_host = peer_label(failure.peer, addresses, ctx.hosts) if failure.peer else ("", None)
        if failure.retrying and failure.level != "WARN":
            retries.append((failure, label, peer_host))
            continue
        group = groups.setdefault((kind[0], peer_host or label), _ConnGroup(kind[0], kind[1], label))
        group.items.append(failure)
    orphans: dict[tuple[str, str], _ConnGroup] = {}
    for failure, label, peer_host in retries:  # retries of a connection that finally failed on this host
        for (_kind, peer), group in groups.items():
            if any(i.host == failure.host for i in group.items) and (
                peer in (peer_host or label, "") or not group.peer
            ):
                group.items.append(failure)
                group.peer = group.peer or label
                break
        else:
            if not _succeeded_after(ctx, failure):
                kind = connection_kind(failure) or SOCKET_ERROR
                group = orphans.setdefault((kind[0], peer_host or label), _ConnGroup(kind[0], kind[1], label))
                group.items.append(failure)
                group.retried_only = True
    ordered = sorted([*groups.values(), *orphans.values()], key=lambda g: min(i.evidence.line for i in g.items))
    if len(ordered) > GROUPS_LIMIT:
        rest = ordered[GROUPS_LIMIT - 1 :]
        ordered = ordered[: GROUPS_LIMIT - 1]
        folded = _ConnGroup("other connection failures", names(dict.fromkeys(g.kind for g in rest)), "")
        folded.items = [i for g in rest for i in g.items]
        ordered.append(folded)
    for group in ordered:
        items = sorted(group.items, key=lambda i: (i.evidence.source, i.evidence.line))
        hosts = list(dict.fromkeys(i.host for i in items if i.host))
        ranks = sorted({r for r in (rank_of(index, i) for i in items) if r is not None})
        message = group.kind[0].upper() + group.kind[1:]
        if group.peer:
            word = PEER_WORDS.get(group.kind, "with")
            message += f" {word} {group.peer}" if word else f" {group.peer}"
        message += f", seen on {names(hosts) or 'an unnamed host'}"
        if ranks:
            message += f" (rank{'s' if len(ranks) > 1 else ''} {rank_list(ranks)})"
        if len(items) > 1:
            message += f" ({len(items)} lines)"
        message += f": {group.meaning}"
        if group.retried_only:
            message += "; NCCL was still retrying and the inputs show neither the final failure nor a success"
        yield make_finding(
            "NET006",
            "warning" if group.retried_only else "error",
            message,
            evidence=shown(i.evidence for i in items),
            evidence_count=len(items),
            hosts=hosts,
            ranks=ranks,
            **({"fix": EFA_FIX} if group.kind == EFA_HANDSHAKE[0] else {}),
        )


@dataclass
class _ConnGroup:
    """Connection failures of one kind with one peer."""

    kind: str
    meaning: str
    peer: str
    items: list[SocketFailure] = field(default_factory=list)
    retried_only: bool = False  # retries whose outcome the inputs do not show


def _succeeded_after(ctx: Context, failure: SocketFailure) -> bool:
    """Whether the retrying process completed a communicator's init after the retry: then it connected."""
    ev = failure.evidence
    return any(
        r.init_complete and r.evidence and r.evidence.source == ev.source and r.evidence.line > ev.line
        for c in ctx.case.communicators
        for r in c.ranks
        if (r.host, r.pid) == (failure.host, failure.pid)
    )
