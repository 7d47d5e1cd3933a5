"""Which failure of a job came first, and the cascade it caused (RUN013, the TUI's Timeline screen, the report).

Every failure the inputs show is placed: a hardware fault in a host's kernel log, a worker process that ended
(torchrun's report), an NCCL WARN that starts a failure (a CUDA error, a failed allocation, a bootstrap
mismatch, an IB completion error), and the failures that only follow another one: a connection closed or
refused by a peer, the proxy's failed calls, a watchdog timeout, an abort, a remote error raised into Python.
The first initiating failure is the root; the following ones are its cascade. The order comes from the
times the lines carry (NCCL's WARN timestamps, the kernel log, torchrun's report, the C++ log header), from
torchrun's own `first observed failure`, or within one process from the order of its lines. Where nothing
orders the failures of different hosts, the candidates are named instead of a guess.

Sources: NVIDIA/nccl#795 (ncclRemoteError on the healthy ranks after a remote crash: find the earliest
failure first); nvidia-resiliency-ext's attribution registry (NCCL watchdog, abort, timeout and system-error
fallout are cascade; search for an earlier initiating failure).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Literal

from ncclscope.case.links import bus_key
from ncclscope.diagnose.xid_catalog import fault_text
from ncclscope.model import Case, Evidence, FrameworkEvent, KernelEvent, NcclMessage, ProcessExit, SocketFailure

# NCCL WARN families (and kinds) that start a failure of their own
INITIATING_WARNS = frozenset({
    "cuda_failure", "alloc_failed", "bootstrap_failure", "bootstrap_mismatch", "bootstrap_rank_twice",
    "internal_error", "shm_failure", "shm_attach_failed", "duplicate_gpu", "call_failed", "completion_error",
    "ib_async_event", "ib_size_mismatch", "ofi_failed", "ofi_open_failed",
})  # fmt: skip
# ... and those that follow another process's failure: its connection closed or refused, the proxy's calls
CASCADE_WARNS = frozenset({"proxy_failure", "error_trace"})
CASCADE_SOCKET_PROBLEMS = frozenset({"connection_closed", "connect_failed", "aborted"})
# framework records that follow a failure elsewhere (a timeout waits for a peer; an abort or dump is the reaction)
CASCADE_FRAMEWORK = frozenset({
    "watchdog_timeout", "dump_signal", "watchdog_exception", "operations_failed", "comm_aborted", "peer_closed",
})  # fmt: skip
# NCCL results raised into Python that say the failure is elsewhere (typed by the framework grammar)
REMOTE_RESULTS = frozenset({"ncclRemoteError", "remote process exited or there was a network error"})
FRAMEWORK_ERRORS = frozenset({"nccl_error", "nccl_result", "last_error"})
# how the root was told apart from the other failures, as a reader is told
ORDERED_BY = {
    "times": "by the times the lines carry",
    "torchrun": "torchrun's own `first observed failure`",
    "line order": "the only process whose failure is not another's fallout",
    "only": "the only failure that is not another's fallout",
    "kind": "a hardware fault ends the processes on its GPU",
}
# signals a launcher sends to the workers it closes after the first one failed
CLOSING_SIGNALS = frozenset({"SIGTERM", "SIGINT", "SIGHUP"})
# a worker's negative exit code is the signal that ended it (Linux numbers, signal(7))
SIGNALS = {
    1: "SIGHUP",
    2: "SIGINT",
    4: "SIGILL",
    6: "SIGABRT",
    7: "SIGBUS",
    8: "SIGFPE",
    9: "SIGKILL",
    11: "SIGSEGV",
    15: "SIGTERM",
}


@dataclass(eq=False)  # one failure is one line: compared by identity (membership tests stay cheap)
class Failure:
    """One failure the inputs show, placed on the job's timeline."""

    source: Literal["kernel", "exit", "nccl", "test", "framework"]
    initiating: bool  # a failure of its own, not only the fallout of another
    what: str
    evidence: Evidence
    host: str | None = None
    rank: int | None = None
    pid: int | None = None
    gpu: str | None = None  # PCI bus id
    when: datetime | None = None  # comparable across inputs: naive, in UTC when the line gave a zone
    time_text: str | None = None
    peer: str | None = None  # the peer a cascade failure names
    lost: bool = False  # it says the peer was there and went away (closed by the peer), not that it was not reached
    first_observed: bool = False  # torchrun said this process ended first
    signal: str | None = None  # the signal that ended a worker

    @property
    def process(self) -> str:
        """How the failure's process is named: host, rank, GPU."""
        parts = [self.host or "a host the inputs do not name"]
        if self.rank is not None:
            parts.append(f"rank {self.rank}")
        elif self.pid is not None:
            parts.append(f"pid {self.pid}")
        if self.gpu:
            parts.append(f"GPU {self.gpu}")
        return ", ".join(parts)

    @property
    def key(self) -> tuple:
        return (
            self.host,
            self.rank if self.rank is not None else self.pid,
            self.gpu if self.source == "kernel" else None,
        )


@dataclass
class Timeline:
    """A job's failures in order, the one that came first and what followed it."""

    failures: list[Failure] = field(default_factory=list)
    root: Failure | None = None
    cascade: list[Failure] = field(default_factory=list)  # the fallout on the other processes
    later: list[Failure] = field(default_factory=list)  # failures of their own on other processes, after the root
    ordered_by: str = ""  # how the root was told apart: "times", "torchrun", "line order", "kind"
    candidates: list[Failure] = field(default_factory=list)  # where the order cannot be known
    lost_peer: str | None = None  # every failure is fallout and names this peer: the root is there
    lost_peer_host: str | None = None  # that peer's host, when the inputs hold lines of it

    @property
    def several(self) -> bool:
        """Failures of more than one process, or a hardware fault with what followed it."""
        return len({f.key for f in self.failures}) > 1 or (
            any(f.source == "kernel" for f in self.failures) and len(self.failures) > 1
        )


def timeline(case: Case) -> Timeline:
    """The job's failures, ordered, with the root and its cascade."""
    year = _year(case)
    failures = _kernel(case) + _exits(case) + _nccl(case) + _tests(case) + _framework(case, year)
    _exits_that_follow(failures)
    failures.sort(key=_order)
    line = Timeline(failures=failures)
    initiating = [f for f in failures if f.initiating]
    if not initiating:
        peers = {f.peer for f in failures if f.peer and f.lost}
        if len(peers) == 1 and failures:
            line.lost_peer = next(iter(peers))
            line.lost_peer_host = _peer_host(case, line.lost_peer)
            line.ordered_by = "kind"
            line.cascade = failures
        return line
    root, ordered_by, candidates = _root(initiating)
    if candidates and len({f.what for f in candidates}) == 1:
        return line  # the same failure on every process: one cause common to all, not a first and its fallout
    line.root, line.ordered_by, line.candidates = root, ordered_by, candidates
    # what followed: the fallout everywhere, the root process's own later failures included (a GPU that fell off
    # the bus fails the next CUDA call of its rank); failures of their own on other processes apart
    listed = {id(f) for f in candidates}
    after = [f for f in failures if f is not root and id(f) not in listed]
    line.cascade = [f for f in after if not f.initiating or (root is not None and _same_process(f, root))]
    cascade = {id(f) for f in line.cascade}
    line.later = [f for f in after if id(f) not in cascade]
    return line


def _exits_that_follow(failures: list[Failure]) -> None:
    """A worker that ended after a failure of its own (its watchdog's abort, SIGABRT after an NCCL error) is that
    failure's fallout; so is an abort when the job shows any other failure. A worker killed or crashed without a
    line of its own before (SIGKILL, SIGSEGV) starts the failure."""
    others = [f for f in failures if f.source != "exit"]
    for f in failures:
        if f.source != "exit" or not f.initiating:
            continue
        own = [o for o in others if _same_process(o, f)]
        if own or (f.signal == "SIGABRT" and others):
            f.initiating = False


def _root(initiating: list[Failure]) -> tuple[Failure | None, str, list[Failure]]:
    """The first initiating failure, how it was told, or the candidates when nothing orders them."""
    first_of: dict[tuple, Failure] = {}
    for f in initiating:
        first_of.setdefault(f.key, f)
    heads = list(first_of.values())
    if len(heads) == 1:
        head = heads[0]
        single = sum(f.key == head.key for f in initiating) == 1
        return head, "torchrun" if head.first_observed else ("only" if single else "line order"), []
    timed = [f for f in heads if f.when is not None]
    hardware = [f for f in heads if f.source == "kernel"]
    if len(timed) == len(heads):
        timed.sort(key=lambda f: f.when or datetime.min)
        if timed[0].when != timed[1].when or timed[0].source == "kernel":
            return timed[0], "times", []
    told = [f for f in heads if f.first_observed]
    if len(told) == 1 and not hardware:
        return told[0], "torchrun", []
    if len(hardware) == 1 and all(h.source != "kernel" for h in heads if h is not hardware[0]):
        # a GPU's fault ends the processes on it: without times, the hardware comes first
        return hardware[0], "kind", []
    return None, "", heads


def _same_process(a: Failure, b: Failure) -> bool:
    """Both happened to one process (or to the GPU of one rank)."""
    if a.host != b.host:
        return False
    return (a.rank is not None and a.rank == b.rank) or (a.pid is not None and a.pid == b.pid)


def _order(f: Failure) -> tuple:
    return (f.when is None, f.when or datetime.min, f.evidence.source, f.evidence.line)


# ------------------------------------------------------------------------------------------ sources
def _kernel(case: Case) -> list[Failure]:
    out, seen = [], set()
    for e in case.kernel_events:
        what = fault_text(e)
        if what is None:
            continue
        host = e.host
        key = (host, e.bus_id, what)
        if key in seen:
            continue  # one line per fault and device: the first
        seen.add(key)
        ranks = ranks_on_gpu(case, host, e.bus_id)
        out.append(
            Failure(
                "kernel", True, what, e.evidence, host=host, rank=ranks[0] if len(ranks) == 1 else None,
                gpu=e.bus_id, when=_kernel_time(e), time_text=e.time,
            )
        )  # fmt: skip
    return out


def _exits(case: Case) -> list[Failure]:
    out = []
    for p in case.process_exits:
        signal = p.signal or SIGNALS.get(-(p.exitcode or 0))
        closed = signal in CLOSING_SIGNALS and not p.first_observed
        how = f"ended by {signal}" if signal else f"exited with code {p.exitcode}"
        code = f" (exit code {p.exitcode})" if signal and p.exitcode is not None else ""
        out.append(
            Failure(
                "exit", not closed, f"process {how}{code}", p.evidence[0] if p.evidence else _none(p),
                host=p.host, rank=p.rank, pid=p.pid, when=_parse(p.time, "%Y-%m-%d_%H:%M:%S"), time_text=p.time,
                first_observed=p.first_observed, signal=signal,
            )
        )  # fmt: skip
    return out


def _nccl(case: Case) -> list[Failure]:
    sockets = {(s.evidence.source, s.evidence.line): s for s in case.socket_failures}
    ranks: dict[tuple[str | None, int | None], int] = {
        (r.host, r.pid): r.rank for c in case.communicators for r in c.ranks if r.pid is not None
    }
    out = []
    for w in case.warnings:
        kind = w.kind if w.family in ("net_ib", "net_ofi") else w.family
        socket = sockets.get((w.evidence.source, w.evidence.line))
        lost = False
        if kind == "socket_failure" and socket is not None and socket.problem in CASCADE_SOCKET_PROBLEMS:
            initiating, peer = False, socket.peer_address
            lost = socket.problem == "connection_closed"
        elif kind in CASCADE_WARNS:
            initiating, peer = False, None
        elif kind in INITIATING_WARNS:
            initiating, peer = True, None
        else:
            continue  # a WARN that ends nothing (a fallback, an unsupported query)
        out.append(
            Failure(
                "nccl", initiating, _warn_text(w, socket), w.evidence, host=w.host, rank=ranks.get((w.host, w.pid)),
                pid=w.pid, when=_parse(_bracketless(w.timestamp)), time_text=w.timestamp, peer=peer, lost=lost,
            )
        )  # fmt: skip
    return out


def _tests(case: Case) -> list[Failure]:
    """nccl-tests' own failure lines: a failed NCCL or CUDA call starts a failure; its unwinding lines follow."""
    out = []
    for run in case.benchmarks:
        for t in run.failures:
            if t.kind not in ("nccl", "cuda"):
                continue
            what = f"nccl-tests {t.kind.upper() if t.kind == 'cuda' else 'NCCL'} failure '{t.message[:100]}'"
            out.append(Failure("test", True, what, t.evidence, host=t.host, pid=t.pid))
    return out


def _framework(case: Case, year: int | None) -> list[Failure]:
    hosts = _host_of_rank(case)
    out = []
    for e in case.framework:
        if e.kind in CASCADE_FRAMEWORK:
            initiating = False
        elif e.kind in FRAMEWORK_ERRORS and e.text:
            initiating = e.text not in REMOTE_RESULTS and not _relays_cascade(e)
        else:
            continue
        out.append(
            Failure(
                "framework", initiating, _framework_text(e), e.evidence, host=hosts.get(e.rank), rank=e.rank,
                when=_glog_time(e.time, year), time_text=e.time, peer=e.peer, lost=e.kind == "peer_closed",
            )
        )  # fmt: skip
    return out


def _relays_cascade(e: FrameworkEvent) -> bool:
    """A `Last error:` that quotes NCCL's own cascade message (a socket closed by the peer)."""
    return e.kind == "last_error" and e.relayed_family in ("socket_failure", "proxy_failure")


def ranks_on_gpu(case: Case, host: str | None, bus_id: str | None) -> list[int]:
    """The ranks NCCL placed on a GPU (its bus id) of a host; a host the line does not name is the only host
    of the logs, when they show one."""
    if not bus_id:
        return []
    key = bus_key(bus_id)
    hosts = {r.host for c in case.communicators for r in c.ranks if r.host}
    found = set()
    for comm in case.communicators:
        for r in comm.ranks:
            same_host = r.host == host or (host is None and len(hosts) == 1)
            if r.bus_id and same_host and bus_key(r.bus_id) == key:
                found.add(r.rank)
    return sorted(found)


def _peer_host(case: Case, peer: str) -> str | None:
    """The host of the inputs a peer's name or address stands for (`node-b01.cluster.internal` is node-b01)."""
    names = {h.name for h in case.hosts if h.name}
    if peer in names:
        return peer
    for i in case.interfaces:
        if i.address == peer and i.host:
            return i.host
    if not peer.replace(".", "").isdigit():
        short = peer.split(".")[0]
        return next((n for n in sorted(names) if n.split(".")[0] == short), None)
    return None


def _host_of_rank(case: Case) -> dict[int | None, str]:
    hosts: dict[int | None, str] = {}
    for c in case.communicators:
        for r in c.ranks:
            if r.host:
                hosts.setdefault(r.rank, r.host)
    for p in case.process_exits:
        if p.rank is not None and p.host:
            hosts.setdefault(p.rank, p.host)
    return hosts


# --------------------------------------------------------------------------------------------- text
def _warn_text(w: NcclMessage, socket: SocketFailure | None = None) -> str:
    """A WARN in a few words: a socket failure by what its typed fields say, another by its text."""
    if socket is not None and socket.problem == "connection_closed":
        return f"connection closed by the peer {socket.peer_address or 'it talked to'}"
    if socket is not None and socket.problem == "connect_failed":
        return f"connect to {socket.peer_address or 'a peer'} failed ({socket.errno_text or 'no reason printed'})"
    if socket is not None and socket.problem == "aborted":
        return "socket closed by the communicator's abort"
    text = w.message.strip()
    return f"NCCL WARN {text[:140]}{'...' if len(text) > 140 else ''}"


def _framework_text(e: FrameworkEvent) -> str:
    names = {
        "watchdog_timeout": "watchdog timeout",
        "dump_signal": "dump signal",
        "watchdog_exception": "watchdog exception",
        "operations_failed": "NCCL operations failed",
        "comm_aborted": "communicator aborted",
        "peer_closed": "connection to the peer lost",
        "nccl_error": "NCCL error",
        "nccl_result": "NCCL error",
        "last_error": "NCCL last error",
    }
    name = names.get(e.kind, e.kind)
    detail = f" {e.peer}" if e.peer else (f": {e.text[:120]}" if e.text else "")
    seq = f" at collective {e.seq}" if e.seq is not None and e.kind == "watchdog_timeout" else ""
    return f"{name}{seq}{detail}"


def _none(p: ProcessExit) -> Evidence:
    return Evidence(source=p.source, line=0, text="")


# -------------------------------------------------------------------------------------------- times
def _parse(text: str | None, form: str | None = None) -> datetime | None:
    if not text:
        return None
    try:
        moment = datetime.strptime(text, form) if form else datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    if moment.tzinfo is not None:
        moment = moment.astimezone(timezone.utc).replace(tzinfo=None)
    return moment


def _bracketless(text: str | None) -> str | None:
    return text.strip().strip("[]") if text else None


def _kernel_time(e: KernelEvent) -> datetime | None:
    return _parse(e.at) if e.at else None


def _glog_time(text: str | None, year: int | None) -> datetime | None:
    """A C++ log header's MM-DD hh:mm:ss(.ffffff), in the year the other dated lines give."""
    if not text or year is None:
        return None
    return _parse(f"{year}-{text.replace(' ', 'T', 1)}")


def _year(case: Case) -> int | None:
    """The year of the job: from its dated lines (NCCL WARN times, kernel log, torchrun's report)."""
    for text in (
        [w.timestamp for w in case.warnings] + [e.at for e in case.kernel_events] + [p.time for p in case.process_exits]
    ):
        if text and text.strip("[ ")[:4].isdigit():
            return int(text.strip("[ ")[:4])
    return None
