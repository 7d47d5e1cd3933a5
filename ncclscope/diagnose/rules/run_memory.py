"""RUN007: NCCL's own device memory is a likely cause of an out-of-memory: an allocation inside NCCL fails while NVLS
(NVLink SHARP) is in use, or in NVLS's own set-up, or in a process that holds many communicators."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from ncclscope.common.words import plural
from ncclscope.diagnose.rules.context import Context, shown
from ncclscope.diagnose.rules.registry import make_finding, rule
from ncclscope.diagnose.rules.version import host_list
from ncclscope.model import Evidence, Finding

OUT_OF_MEMORY = "out of memory"  # cudaErrorMemoryAllocation's text
NVLS_SOURCE = "transport/nvls.cc"
MANY_COMMUNICATORS = 8  # communicators of one process: each holds its own buffers on the GPU (channels x protocols)


@rule("RUN007", "nccl-memory", severity="error", needs=["nccl_log"])
def nccl_memory(ctx: Context) -> Iterable[Finding]:
    """NCCL's own device memory is a likely cause of an out-of-memory: a CUDA allocation inside NCCL fails (`Cuda
    failure 'out of memory'`, `Failed to CUDA calloc N bytes`) in NVLS's set-up, on a host where NVLS (NVLink SHARP)
    is in use, or in a process that created many communicators.

    Why: NCCL allocates device memory per communicator (buffers per channel and protocol) and, with NVLS, multicast
    buffers of several hundred MiB per GPU; a framework that creates many process groups, or a model sized to the last
    GiB, leaves NCCL too little, and its init or first collective fails with out of memory.

    Fix: Leave NCCL room: NCCL_NVLS_ENABLE=0 frees the NVLS buffers (at the cost of NVLS's all_reduce speed),
    create fewer communicators (reuse process groups), lower NCCL_BUFFSIZE only if the job tolerates it, and set the
    framework's memory cap (PyTorch's caching allocator) below the GPU's size.

    Sources: NCCL docs env.rst (NCCL_NVLS_ENABLE, NCCL_BUFFSIZE); NCCL src/transport/nvls.cc (multicast buffer sizes:
    nvlsPerRankSize, nvlsTotalSize); NVIDIA/nccl#1455
    """
    ooms: list[tuple[str | None, int | None, Evidence, str | None]] = [
        (c.host, c.pid, c.evidence, c.location) for c in ctx.case.cuda_errors if c.text == OUT_OF_MEMORY
    ]
    ooms += [(w.host, w.pid, w.evidence, None) for w in ctx.case.warnings if w.family == "alloc_failed"]
    if not ooms:
        return
    nvls_hosts = {m.host for m in ctx.case.messages if m.family == "nvls_support" and not m.fields.get("nvls_not")}
    comms: Counter[tuple[str | None, int | None]] = Counter(
        (r.host, r.pid) for c in ctx.case.communicators for r in c.ranks if r.pid is not None
    )
    why = []
    in_nvls = [o for o in ooms if (o[3] or "").startswith(NVLS_SOURCE)]
    if in_nvls:
        why.append(f"{len(in_nvls)} in NVLS's own set-up ({in_nvls[0][3]})")
    with_nvls = [o for o in ooms if o[0] in nvls_hosts and o not in in_nvls]
    if with_nvls:
        why.append(
            f"{len(with_nvls)} on a host where NVLS is in use (its multicast buffers take hundreds of MiB per GPU)"
        )
    crowded = [o for o in ooms if comms.get((o[0], o[1]), 0) >= MANY_COMMUNICATORS]
    if crowded:
        most = max(comms.get((o[0], o[1]), 0) for o in crowded)
        why.append(f"{len(crowded)} in a process that holds {most} communicators, each with its own buffers")
    if not why:
        return  # an out-of-memory with no sign that NCCL's share is large: RUN004 says it
    hosts = sorted({o[0] for o in ooms if o[0]})
    yield make_finding(
        "RUN007", "error",
        f"NCCL ran out of GPU memory on {host_list(hosts) or 'a host'} "
        f"({plural(len(ooms), 'line')}), and NCCL's own memory is a likely part of it: " + "; ".join(why),
        evidence=shown(o[2] for o in ooms), evidence_count=len(ooms), hosts=hosts,
    )  # fmt: skip
