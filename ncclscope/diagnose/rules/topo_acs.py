"""TOPO010: PCIe ACS redirects peer-to-peer traffic between GPUs up to the root complex, as `lspci -vvv` shows it on
a bridge above a GPU (ACSCtl ReqRedir+ or CmpltRedir+); or NCCL's own P2P check (2.31 diagnostics) found GPU pairs
whose peer accesses fail verification."""

from __future__ import annotations

from collections.abc import Iterable

from ncclscope.diagnose.rules.context import Context, shown
from ncclscope.diagnose.rules.registry import make_finding, rule
from ncclscope.model import Finding, PciDevice

GPU_CLASSES = ("3D controller", "VGA compatible controller")  # how lspci names a GPU (NVIDIA data-center GPUs: 3D)
REDIRECTS = ("ReqRedir", "CmpltRedir")  # the ACS controls that send peer requests and completions upstream


def _bus(device: PciDevice) -> int:
    return int(device.bus_id.split(":")[1], 16)


@rule("TOPO010", "p2p-unreliable", severity="error")
def p2p_unreliable(ctx: Context) -> Iterable[Finding]:
    """PCIe ACS is enabled on the path between GPUs: a bridge above a GPU has ACSCtl ReqRedir+ (or CmpltRedir+) in
    `lspci -vvv`, so peer-to-peer PCIe traffic between the GPUs below it goes up to the root complex (warning).
    Error when NCCL's own P2P check at init (2.31, NCCL_RUN_DIAGNOSTICS=1) reports peer accesses that failed
    verification (`NCCL DIAG [INFO] p2p: only 52/56 GPU-to-GPU peer accesses passed verification`): data written
    between those GPUs did not arrive intact.

    Why: With ACS redirect, GPU-to-GPU P2P over PCIe detours through the CPU's root complex: it is slow, and on many
    platforms it hangs or corrupts data (nccl-tests #wrong > 0, a job that stops right after init). NVLink traffic
    is not affected; GPUs joined by PCIe only are.

    Fix: Disable ACS on the bridges between the GPUs (BIOS setting, or `setpci` on each bridge at boot), or turn the
    IOMMU to passthrough; until then NCCL_P2P_DISABLE=1 makes NCCL use shared memory instead of P2P.

    Sources: NCCL docs troubleshooting.rst (PCI Access Control Services (ACS): P2P through the root complex, how to
    disable it); pciutils lspci (ACSCtl flags); NVIDIA/nccl-tests#117; NCCL docs troubleshooting/diagnostics.rst
    (2.31 active diagnostics: the P2P check and its report)
    """
    yield from _diag_p2p(ctx)
    for source in sorted({d.source for d in ctx.case.pci_devices}):
        devices = [d for d in ctx.case.pci_devices if d.source == source]
        gpus = [d for d in devices if d.device_class in GPU_CLASSES]
        redirecting = [d for d in devices if any(d.acs.get(flag) for flag in REDIRECTS) and d.secondary is not None]
        above = [
            (bridge, [g for g in gpus if bridge.secondary is not None and bridge.subordinate is not None
                      and bridge.secondary <= _bus(g) <= bridge.subordinate])
            for bridge in redirecting
        ]  # fmt: skip
        above = [(bridge, under) for bridge, under in above if under]
        if not above:
            continue
        gpus_hit = sorted({g.bus_id for _, under in above for g in under})
        lines = [b.acs_evidence for b, _ in above if b.acs_evidence] + [b.evidence for b, _ in above]
        host = ctx.report_host(source)
        yield make_finding(
            "TOPO010", "warning",
            f"on {host}: PCIe ACS redirect is on at {len(above)} bridge(s) above {len(gpus_hit)} GPU(s) "
            f"({', '.join(gpus_hit)}): peer-to-peer traffic between them goes through the root complex",
            evidence=shown(lines), evidence_count=len(lines), hosts=[host],
        )  # fmt: skip


def _diag_p2p(ctx: Context) -> Iterable[Finding]:
    """NCCL 2.31's P2P check: peer accesses between the GPU pairs NCCL will use that failed verification."""
    failed = [r for r in ctx.case.diag_reports if r.kind == "p2p" and r.passed is not None and r.total]
    for report in failed:
        if report.total is None or report.passed is None or report.passed >= report.total:
            continue
        where = f" on {report.host}" if report.host else ""
        yield make_finding(
            "TOPO010", "error",
            f"NCCL's own P2P check at init{where}: only {report.passed} of {report.total} GPU-to-GPU peer accesses"
            f" passed verification, so {report.total - report.passed} failed: P2P between some of these GPUs does"
            " not carry data intact (NCCL 2.31 diagnostics; NCCL_DEBUG_SUBSYS=DIAG names the pairs and paths)",
            evidence=[report.evidence], hosts=[report.host] if report.host else [],
            explanation="At communicator init NCCL 2.31 writes data between every GPU pair it will use directly,"
            " reads it back and checks it, before any traffic of the job: a failed access means the path itself (a"
            " GPU, an NVLink or PCIe link, a PCIe switch with ACS, the IOMMU, the driver) loses or corrupts data, and a"
            " job that uses it hangs or computes wrong results.",
            fix="Find the failing pairs (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=DIAG with NCCL_RUN_DIAGNOSTICS=1): on PCIe"
            " paths disable ACS on the bridges between the GPUs or set the IOMMU to passthrough; on NVLink check the"
            " links (`nvidia-smi nvlink -s`) and the fabric manager; until fixed NCCL_P2P_DISABLE=1 avoids P2P.",
        )  # fmt: skip
