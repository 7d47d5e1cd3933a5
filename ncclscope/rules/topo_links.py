"""TOPO007-TOPO008: the links of a host as NCCL read them (its topology XML dump): a GPU or NIC whose PCIe
link trained below its peers', a GPU with fewer NVLinks than its peers.

Each device is judged against its peers on the same host (same kind, same PCI vendor and device id), never
against a figure from elsewhere: a whole host of x8 GPUs may be how it was built, one x8 GPU among x16 ones
is a fault. A cloud's NCCL_TOPO_FILE states fixed speeds: it is read but says nothing about a fault.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from ncclscope.model import Evidence, Finding, NcclTopologyDump, XmlGpu, XmlPciDevice
from ncclscope.rules.context import Context, shown
from ncclscope.rules.registry import make_finding, rule

DUMP = "NCCL's topology dump"


def _host(dump: NcclTopologyDump) -> str:
    """The dump names no host: its file does (NCCL_TOPO_DUMP_FILE with %h, or one file per host)."""
    return dump.source


def _link(device: XmlPciDevice) -> str:
    speed = f"{device.link_speed:g} GT/s" if device.link_speed is not None else "? GT/s"
    return f"{speed} x{device.link_width}" if device.link_width is not None else speed


def _name(device: XmlPciDevice, dump: NcclTopologyDump) -> str:
    if device.kind == "gpu":
        gpu = next((g for g in dump.gpus if g.busid == device.busid), None)
        if gpu is not None and gpu.dev is not None:
            return f"GPU {gpu.dev} ({device.busid})"
        return f"GPU {device.busid}"
    nets = [n.name for n in dump.nets if n.busid == device.busid]
    return f"NIC {'/'.join(nets)} ({device.busid})" if nets else f"NIC {device.busid}"


def _used(device: XmlPciDevice, dump: NcclTopologyDump) -> bool:
    """NCCL found a GPU or a network device on it: it carries NCCL's traffic."""
    if device.kind == "gpu":
        return any(g.busid == device.busid for g in dump.gpus)
    return any(n.busid == device.busid for n in dump.nets)


# =============================================================================== TOPO007
@rule("TOPO007", "pcie-degraded", severity="error", needs=["host_links"])
def pcie_degraded(ctx: Context) -> Iterable[Finding]:
    """A GPU or NIC runs its PCIe link below the generation or width of its peers on the same host
    (same kind and PCI device id), as NCCL's topology dump (NCCL_TOPO_DUMP_FILE) records it, e.g. a
    GPU at 32 GT/s x8 where its seven peers run 32 GT/s x16.

    Why: a link that trained at half width or an older generation halves what the device can move
    to and from the host, its NIC or a GPU across the PCIe switch: GPUDirect RDMA, P2P over PCIe and
    host copies all run at the slowest link of the path, and a ring runs at its slowest hop. A seated
    card, a riser, a bad slot or a BIOS bifurcation setting cause it; nothing in NCCL's log says so.

    Fix: Confirm with `nvidia-smi -q` (GPU Link Info: current against max generation and width,
    under load: an idle GPU lowers its generation to save power, never its width) or `lspci -vv`
    (LnkSta against LnkCap); reseat the card or riser, check the slot's bifurcation in the BIOS, and
    keep the host out of the job until it trains at full width.

    Sources: NCCL src/graph/xml.cc (link_speed and link_width from NVML or sysfs max_link_*);
    NVIDIA nvidia-smi documentation (PCIe generation and link width, current and max); PCI Express
    base specification (link training, LnkCap/LnkSta)
    """
    for dump in ctx.case.topology_dumps:
        peers: dict[tuple, list[XmlPciDevice]] = defaultdict(list)
        for device in dump.pci:
            if device.kind in ("gpu", "nic") and (device.link_width is not None or device.link_speed is not None):
                peers[device.kind, device.vendor, device.device].append(device)
        for group in peers.values():
            if len(group) < 2:
                continue  # nothing to compare with on this host
            best_width = max((d.link_width or 0) for d in group)
            best_speed = max((d.link_speed or 0.0) for d in group)
            slow = [
                d for d in group
                if (d.link_width is not None and d.link_width < best_width)
                or (d.link_speed is not None and d.link_speed < best_speed)
            ]  # fmt: skip
            if not slow or len(slow) * 2 > len(group):
                continue  # no clear majority: the host may be built that way
            full = next(d for d in group if d not in slow)
            used = any(_used(d, dump) for d in slow)
            names = ", ".join(f"{_name(d, dump)} at {_link(d)}" for d in slow)
            kind = "GPU" if group[0].kind == "gpu" else "NIC"
            message = (
                f"on {_host(dump)}: {names}, where its {len(group) - len(slow)} {kind} peers run {_link(full)} ({DUMP})"
            )
            evidence = [d.evidence for d in slow if d.evidence] + ([full.evidence] if full.evidence else [])
            yield make_finding(
                "TOPO007", "error" if used else "warning", message, evidence=shown(evidence),
                evidence_count=len(evidence), hosts=[_host(dump)],
            )  # fmt: skip


# =============================================================================== TOPO008
def _nvlinks(gpu: XmlGpu) -> int:
    return sum(link.count or 0 for link in gpu.nvlinks)


@rule("TOPO008", "nvlink-down", severity="error", needs=["host_links"])
def nvlink_down(ctx: Context) -> Iterable[Finding]:
    """A GPU has fewer NVLinks than its peers of the same host (same compute capability), as NCCL's
    topology dump counts them (`<nvlink target count>` per peer GPU or NVSwitch), e.g. 16 where its
    seven peers have 18, or none where they have some.

    Why: NVLink bandwidth is the sum of the active links: a GPU with 16 of 18 links gives about 11%
    less, and NCCL sizes its rings and NVLS trees for the host as a whole, so the whole job runs at
    the pace of the GPU with the fewest links. A GPU whose NVLinks are all down talks over PCIe, ten
    times slower, and NCCL may route the whole ring that way.

    Fix: Check `nvidia-smi nvlink -s` (each link's speed or `inactive`) and `nvidia-smi -q` for
    NVLink errors and retired rows; on NVSwitch systems make sure the fabric manager runs and the
    GPU's fabric state is Completed; reset the GPU or power-cycle the host; send the board for
    repair when a link stays down.

    Sources: NCCL src/graph/xml.cc (nvlink count per remote device, tclass of an NVSwitch);
    NVIDIA nvidia-smi documentation (`nvlink -s`); NVIDIA Fabric Manager user guide (GPU fabric
    state)
    """
    for dump in ctx.case.topology_dumps:
        peers: dict[int | None, list[XmlGpu]] = defaultdict(list)
        for gpu in dump.gpus:
            peers[gpu.sm].append(gpu)
        for group in peers.values():
            counts = [_nvlinks(g) for g in group]
            most = max(counts, default=0)
            if len(group) < 2 or most == 0:
                continue  # one GPU, or a host without NVLink
            short = [(g, n) for g, n in zip(group, counts, strict=True) if n < most]
            if not short or len(short) * 2 > len(group):
                continue
            names = ", ".join(f"GPU {g.dev if g.dev is not None else g.busid} has {n}" for g, n in short)
            message = (
                f"on {_host(dump)}: {names} NVLink{'s' if short[0][1] != 1 else ''}, where its "
                f"{len(group) - len(short)} peers have {most} ({DUMP})"
            )
            evidence: list[Evidence] = [g.evidence for g, _ in short if g.evidence]
            yield make_finding(
                "TOPO008", "error", message, evidence=shown(evidence), evidence_count=len(evidence),
                hosts=[_host(dump)],
            )  # fmt: skip
