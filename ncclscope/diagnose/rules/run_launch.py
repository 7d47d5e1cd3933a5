"""RUN010 and RUN011: the processes were launched inconsistently (the bootstrap root refuses one), or the container
hides what NCCL needs (a peer GPU that NVML cannot find)."""

from __future__ import annotations

from collections.abc import Iterable

from ncclscope.common.words import plural
from ncclscope.diagnose.rules.context import Context, shown
from ncclscope.diagnose.rules.registry import make_finding, rule
from ncclscope.diagnose.rules.version import host_list
from ncclscope.model import Finding

# the NVML call NCCL makes for every GPU of the host's ranks, and NVML's answer when the GPU is not in this container
NVML_BY_BUS = "nvmlDeviceGetHandleByPciBusId()"
NVML_NOT_FOUND = "Not Found"
# a field the root and a process disagree on, and what that says about the launch
MISMATCH_MEANS = {
    "nranks": "the processes were started with different world sizes",
    "nroots": "the processes were started with different numbers of bootstrap roots (NCCL_UID_STAGGER / split roots)",
    "iroot": "a process believes a different process is its bootstrap root",
    "offset": "a process sent a field the root's NCCL does not have, or garbage in it: two NCCL releases in one job"
    " (the offset came with 2.29)",
}


@rule("RUN010", "launch-mismatch", severity="error", needs=["nccl_log"])
def launch_mismatch(ctx: Context) -> Iterable[Finding]:
    """The processes were launched inconsistently and NCCL's bootstrap root refuses one: `Bootstrap Root : mismatch
    in info from procs` (the fields that differ: nranks, nroots, iroot, offset) or `rank N of M ranks has already
    checked in` (two processes started as the same rank).

    Why: Every process of a communicator sends the root its rank, the world size and the root it expects; one that
    disagrees was started by another launcher, with another MASTER_ADDR/port or node rank, or runs another NCCL
    release whose message differs. The root refuses it and the others wait or time out.

    Fix: Start every process of the job from one launcher with one MASTER_ADDR, MASTER_PORT, world size and node
    rank per host; one NCCL release on every host (the same wheel or image). For a rank that checked in twice, the
    node_rank or local rank arithmetic of the launch.

    Sources: NCCL src/bootstrap.cc (the root's checks: nranks, nroots, iroot, offset; 'has already checked in');
    NCCL 2.29 release notes (bootstrap offsets)
    """
    items = ctx.case.launch_mismatches
    if not items:
        return
    hosts = sorted({m.host for m in items if m.host})
    said = []
    fields = sorted({name for m in items for name in m.differing})
    for name in fields:
        values = next(m.differing[name] for m in items if name in m.differing)
        means = MISMATCH_MEANS.get(name, "the processes disagree on it")
        said.append(f"{name} {values[0]} expected but {values[1]} sent: {means}")
    twice = sorted({m.rank for m in items if m.kind == "rank_twice" and m.rank is not None})
    if twice:
        said.append(f"rank{'s' if len(twice) != 1 else ''} {', '.join(map(str, twice))} checked in twice: two processes"
                    " were started as the same rank")  # fmt: skip
    yield make_finding(
        "RUN010", "error",
        f"the bootstrap root on {host_list(hosts) or 'a host'} refused a process "
        f"({plural(len(items), 'line')}): " + "; ".join(said or ["the processes disagree on the job"]),
        evidence=shown(m.evidence for m in items), evidence_count=len(items), hosts=hosts,
    )  # fmt: skip


@rule("RUN011", "container-isolation", severity="error", needs=["nccl_log"])
def container_isolation(ctx: Context) -> Iterable[Finding]:
    """The container hides what NCCL needs: `nvmlDeviceGetHandleByPciBusId() failed: Not Found` while NCCL detects
    the topology (a peer rank's GPU on this host is not visible in this rank's container).

    Why: NCCL looks up the GPU of every rank on its host through NVML to build the host's topology; when each rank's
    container sees only its own GPU (one container per GPU, NVIDIA_VISIBLE_DEVICES per rank), the lookup fails and
    init stops with a SystemError, or NCCL cannot use P2P or SHM between the ranks.

    Fix: Run the ranks of a host in one container that sees all of its GPUs (or all GPUs visible to each, with
    CUDA_VISIBLE_DEVICES selecting one), share the IPC namespace (`--ipc=host`) and the PID namespace where NCCL
    needs them.

    Sources: NCCL src/misc/nvmlwrap.cc (nvmlDeviceGetHandleByPciBusId); NCCL src/graph/xml.cc (topology detection
    through NVML); NCCL docs troubleshooting.rst (Docker: --ipc=host, shared memory)
    """
    hidden = [
        w
        for w in ctx.case.warnings
        if w.family == "nvml_failure"
        and w.fields.get("nvml_call") == NVML_BY_BUS
        and w.fields.get("text") == NVML_NOT_FOUND
    ]
    if not hidden:
        return
    hosts = sorted({w.host for w in hidden if w.host})
    yield make_finding(
        "RUN011", "error",
        f"NVML cannot find a GPU of this host's ranks from inside the container on {host_list(hosts) or 'a host'} "
        f"({len(hidden)} x {NVML_BY_BUS} failed: {NVML_NOT_FOUND}): the ranks' containers do not see each other's GPUs",
        evidence=shown(w.evidence for w in hidden), evidence_count=len(hidden), hosts=hosts,
    )  # fmt: skip
