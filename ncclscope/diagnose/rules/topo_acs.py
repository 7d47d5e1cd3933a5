"""TOPO010: PCIe ACS redirects peer-to-peer traffic between GPUs up to the root complex, as `lspci -vvv` shows it on
a bridge above a GPU (ACSCtl ReqRedir+ or CmpltRedir+)."""

from __future__ import annotations

from collections.abc import Iterable

from ncclscope.diagnose.rules.context import Context, shown
from ncclscope.diagnose.rules.registry import make_finding, rule
from ncclscope.model import Finding, PciDevice

GPU_CLASSES = ("3D controller", "VGA compatible controller")  # how lspci names a GPU (NVIDIA data-center GPUs: 3D)
REDIRECTS = ("ReqRedir", "CmpltRedir")  # the ACS controls that send peer requests and completions upstream


def _bus(device: PciDevice) -> int:
    return int(device.bus_id.split(":")[1], 16)


@rule("TOPO010", "p2p-unreliable", severity="warning")
def p2p_unreliable(ctx: Context) -> Iterable[Finding]:
    """PCIe ACS is enabled on the path between GPUs: a bridge above a GPU has ACSCtl ReqRedir+ (or CmpltRedir+) in
    `lspci -vvv`, so peer-to-peer PCIe traffic between the GPUs below it goes up to the root complex.

    Why: With ACS redirect, GPU-to-GPU P2P over PCIe detours through the CPU's root complex: it is slow, and on many
    platforms it hangs or corrupts data (nccl-tests #wrong > 0, a job that stops right after init). NVLink traffic
    is not affected; GPUs joined by PCIe only are.

    Fix: Disable ACS on the bridges between the GPUs (BIOS setting, or `setpci` on each bridge at boot), or turn the
    IOMMU to passthrough; until then NCCL_P2P_DISABLE=1 makes NCCL use shared memory instead of P2P.

    Sources: NCCL docs troubleshooting.rst (PCI Access Control Services (ACS): P2P through the root complex, how to
    disable it); pciutils lspci (ACSCtl flags); NVIDIA/nccl-tests#117
    """
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
