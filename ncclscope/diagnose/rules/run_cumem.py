"""RUN008: cuMem host or IPC memory does not work: NCCL's fallback notice, a shared-memory segment of size 0 that a
rank cannot attach, a CUDA failure on the SHM transport's cuMem host path."""

from __future__ import annotations

from collections.abc import Iterable

from ncclscope.diagnose.rules.context import Context, shown
from ncclscope.diagnose.rules.registry import make_finding, rule
from ncclscope.diagnose.rules.version import host_list
from ncclscope.model import Evidence, Finding, Severity

SHM_SOURCE = "transport/shm.cc"  # NCCL's SHM transport: from 2.19 its host buffers are cuMem host memory


@rule("RUN008", "cumem-fallback", severity="warning", needs=["nccl_log"])
def cumem_fallback(ctx: Context) -> Iterable[Finding]:
    """cuMem host or IPC memory does not work: NCCL says `cuMem host allocations do not appear to be working; falling
    back to a /dev/shm/ based implementation` (2.26+), a rank fails to attach a peer's shared-memory segment of size 0
    (the peer exported it by cuMem, the rank looked for a /dev/shm file), or a CUDA call fails on the SHM transport's
    cuMem host path (transport/shm.cc). Warning for the fallback alone, error when a failure follows.

    Why: Since 2.19 NCCL shares host buffers between the ranks of a host as cuMem host memory; containers that hide
    NUMA or deny the capability it needs (SYS_NICE), and drivers or GPUs without the support, make it fail. NCCL then
    falls back to /dev/shm, or, when ranks disagree on the mechanism, one cannot find the other's buffer and the job
    fails at its first intra-node connection.

    Fix: NCCL_CUMEM_HOST_ENABLE=0 (or NCCL_CUMEM_ENABLE=0) on every rank, so that all use /dev/shm; or let cuMem
    work: run the container with --cap-add SYS_NICE and NUMA visible, a driver that supports cuMem host memory.

    Sources: NCCL src/misc/cudawrap.cc (2.26.3+ fallback notice, NCCL_CUMEM_HOST_ENABLE); NCCL src/misc/shmutils.cc
    (attaching a segment); NCCL docs env.rst (NCCL_CUMEM_ENABLE, NCCL_CUMEM_HOST_ENABLE); NVIDIA/nccl#1852
    """
    lines: list[Evidence] = []
    said: list[str] = []
    hosts: set[str] = set()
    fallback = [m for m in ctx.case.messages if m.family == "cumem_host_fallback"]
    if fallback:
        said.append(f"NCCL says cuMem host allocations do not work and falls back to /dev/shm ({len(fallback)} x)")
        lines += [m.evidence for m in fallback]
        hosts |= {m.host for m in fallback if m.host}
    empty = [w for w in ctx.case.warnings if w.family == "shm_attach_failed" and w.fields.get("shm_bytes") == "0"]
    if empty:
        path = empty[0].fields.get("shm_path")
        said.append(
            f"a rank cannot attach a peer's shared-memory segment of size 0 ({len(empty)} x {path}): the peer"
            " shared it as cuMem memory, not as a /dev/shm file"
        )
        lines += [w.evidence for w in empty]
        hosts |= {w.host for w in empty if w.host}
    cuda = [c for c in ctx.case.cuda_errors if (c.location or "").startswith(SHM_SOURCE)]
    if cuda:
        said.append(
            f"CUDA fails on the SHM transport's cuMem host path ({len(cuda)} x '{cuda[0].text}' at {cuda[0].location})"
        )
        lines += [c.evidence for c in cuda]
        hosts |= {c.host for c in cuda if c.host}
    if not said:
        return
    severity: Severity = "error" if empty or cuda else "warning"
    yield make_finding(
        "RUN008", severity,
        f"cuMem host memory does not work on {host_list(sorted(hosts)) or 'the host'}: " + "; ".join(said),
        evidence=shown(lines), evidence_count=len(lines), hosts=sorted(hosts),
    )  # fmt: skip
