"""RUN009: the NVLink fabric is not ready or not usable: NVLS (NVLink SHARP) multicast memory that cannot be bound
or set up, CUDA's `system not yet initialized` (the fabric manager), a host report whose Fabric State is not done."""

from __future__ import annotations

from collections.abc import Iterable

from ncclscope.diagnose.rules.context import Context, shown
from ncclscope.diagnose.rules.registry import make_finding, rule
from ncclscope.diagnose.rules.version import host_list
from ncclscope.model import Evidence, Finding

NVLS_SOURCE = "transport/nvls.cc"  # NCCL's NVLS transport: a CUDA failure there is the multicast set-up's
# ... and these of its errors say the multicast objects cannot be made or bound: the fabric (CUDA driver API
# cuMulticastCreate/cuMulticastBindMem: not supported, invalid value, not permitted, not ready). An `initialization
# error` or `out of memory` there is the node's CUDA or memory, not the fabric.
NVLS_FABRIC_ERRORS = frozenset({
    "invalid argument", "operation not supported", "operation not permitted",
    "the operation cannot be performed in the present state", "system not yet initialized",
})  # fmt: skip
# cudaErrorSystemNotReady's text (CUDA runtime API): the fabric manager has not brought the NVSwitch fabric up
NOT_READY = "system not yet initialized"
FABRIC_DONE = "Completed"  # nvidia-smi -q Fabric State once the fabric manager has trained the GPU's links


@rule("RUN009", "nvswitch-fabric", severity="error")
def nvswitch_fabric(ctx: Context) -> Iterable[Finding]:
    """The NVLink fabric is not ready or not usable: `Failed to bind NVLink SHARP (NVLS) Multicast memory` (CUDA
    error 401 and the like), a CUDA failure inside NCCL's NVLS set-up (transport/nvls.cc), CUDA's `system not yet
    initialized` from NCCL or nccl-tests (the fabric manager has not finished), or `nvidia-smi -q` showing a Fabric
    State other than Completed.

    Why: On NVSwitch systems (HGX/DGX H100/H200/B200, GB200 NVL) the fabric manager (and on multi-node NVLink the IMEX
    service) must set up the NVSwitch fabric before CUDA can use it; NVLS multicast memory needs it too. A fabric
    manager that is not running, is of another version than the driver, or is still training the links makes NCCL
    fail at init or lose NVLS, which on 5+ GPUs costs up to a quarter of all_reduce busbw.

    Fix: On each host named: `systemctl status nvidia-fabricmanager` (and `nvidia-imex` for multi-node NVLink), its
    version equal to the driver's, `nvidia-smi -q | grep -A2 Fabric` showing Completed; restart the service (or the
    node) and rerun. To run meanwhile without NVLS, NCCL_NVLS_ENABLE=0.

    Sources: NCCL src/transport/nvls.cc (the bind failure's own advice: a Fabric Manager or NVSwitch configuration
    error; NCCL_NVLS_ENABLE=0); NVIDIA Fabric Manager user guide; CUDA runtime API (cudaErrorSystemNotReady: 'system
    not yet initialized'); NVIDIA/nccl#1455
    """
    lines: list[Evidence] = []
    hosts: set[str] = set()
    said: list[str] = []
    binds = [w for w in ctx.case.warnings if w.family == "nvls_bind_failed"]
    if binds:
        code = binds[0].fields.get("cuda_error")
        text = str(binds[0].fields.get("quoted") or "").strip("'")
        said.append(f"NVLS multicast memory could not be bound ({len(binds)} x CUDA error {code} '{text}')")
        lines += [w.evidence for w in binds]
        hosts |= {w.host for w in binds if w.host}
    nvls = [
        c for c in ctx.case.cuda_errors if (c.location or "").startswith(NVLS_SOURCE) and c.text in NVLS_FABRIC_ERRORS
    ]
    if nvls:
        said.append(f"CUDA failed in NCCL's NVLS set-up ({len(nvls)} x '{nvls[0].text}' at {nvls[0].location})")
        lines += [c.evidence for c in nvls]
        hosts |= {c.host for c in nvls if c.host}
    cuda = [c for c in ctx.case.cuda_errors if c.text == NOT_READY]
    tests = [t for run in ctx.case.benchmarks for t in run.failures if t.message.strip() == NOT_READY]
    if cuda or tests:
        n = len(cuda) + len(tests)
        said.append(f"CUDA says '{NOT_READY}' ({n} line{'s' if n != 1 else ''}): the fabric manager has not brought up"
                    " the fabric")  # fmt: skip
        lines += [c.evidence for c in cuda] + [t.evidence for t in tests]
        hosts |= {h for h in [*(c.host for c in cuda), *(t.host for t in tests)] if h}
    waiting = [g for g in ctx.case.smi_gpus if g.fabric_state and g.fabric_state != FABRIC_DONE]
    if waiting:
        states = sorted({str(g.fabric_state) for g in waiting})
        said.append(f"nvidia-smi -q shows Fabric State {', '.join(states)} on {len(waiting)} GPU(s)")
        lines += [g.evidence for g in waiting if g.evidence]
        hosts |= {ctx.report_host(g.source) for g in waiting}
    if not said:
        return
    yield make_finding(
        "RUN009", "error",
        f"the NVLink fabric is not ready on {host_list(sorted(hosts)) or 'the host'}: " + "; ".join(said),
        evidence=shown(lines), evidence_count=len(lines), hosts=sorted(hosts),
    )  # fmt: skip
