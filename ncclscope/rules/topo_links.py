"""TOPO007-TOPO008: the links of a host as NCCL read them (its topology XML dump) or as the host reports
them (`nvidia-smi -q`): a GPU or NIC whose PCIe link trained below its peers' or its own maximum, a GPU with
fewer NVLinks than its peers.

In NCCL's dump each device is judged against its peers on the same host (same kind, same PCI vendor and
device id), never against a figure from elsewhere: a whole host of x8 GPUs may be how it was built, one x8
GPU among x16 ones is a fault. A cloud's NCCL_TOPO_FILE states fixed speeds: it is read but says nothing
about a fault. `nvidia-smi -q` gives each GPU's own maximum, so a GPU is judged against itself there; its
generation only while it works (P0) or where its peers run theirs, since an idle GPU lowers it to save power.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from ncclscope.model import Case, Evidence, Finding, NcclTopologyDump, NvlinkGpu, SmiGpu, XmlGpu, XmlPciDevice
from ncclscope.rules.context import EVIDENCE_SHOWN, Context, shown
from ncclscope.rules.registry import make_finding, rule
from ncclscope.rules.topo_common import number_ranges

DUMP = "NCCL's topology dump"
SMI = "nvidia-smi -q"
NVLINK = "nvidia-smi nvlink -s"
GT_PER_S = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}  # PCIe generation -> transfer rate per lane


def _host(dump: NcclTopologyDump) -> str:
    """The dump names no host: a run's per-host file name does (nccl-topo.<host>.xml), else the file itself."""
    return dump.host or dump.source


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
@rule("TOPO007", "pcie-degraded", severity="error", needs=["pcie_links"])
def pcie_degraded(ctx: Context) -> Iterable[Finding]:
    """A GPU or NIC runs its PCIe link below the generation or width of its peers on the same host
    (same kind and PCI device id), as NCCL's topology dump (NCCL_TOPO_DUMP_FILE) records it, e.g. a
    GPU at 32 GT/s x8 where its seven peers run 32 GT/s x16; or a GPU below its own maximum width (or
    generation, while it works) as `nvidia-smi -q` reports it: "GPU 3 at 32 GT/s x8, capable of 32 GT/s
    x16". Error where NCCL uses the device (or the inputs do not say), warning for others.

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
    from_dumps: list[tuple[set[int | None], Finding]] = []
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
            finding = make_finding(
                "TOPO007", "error" if used else "warning", message, evidence=shown(evidence),
                evidence_count=len(evidence), hosts=[_host(dump)],
            )  # fmt: skip
            from_dumps.append(({bus_key(d.busid) for d in slow}, finding))
    from_smi = list(_smi_pcie_degraded(ctx.case))
    # one host in each view: the same GPU seen slow by both is one finding that names both views
    one_host = len(ctx.case.topology_dumps) == 1 and len({g.source for g in ctx.case.smi_gpus}) == 1
    for buses, finding in from_dumps:
        same = [f for b, f in from_smi if one_host and b & buses]
        for other in same:
            from_smi = [(b, f) for b, f in from_smi if f is not other]
            finding.message += f"; {other.message.split(': ', 1)[1]}"
            finding.severity = "error" if "error" in (finding.severity, other.severity) else finding.severity
            half = EVIDENCE_SHOWN // 2  # both views keep lines of their own
            finding.evidence = [*shown(finding.evidence, half), *shown(other.evidence, EVIDENCE_SHOWN - half)]
            finding.evidence_count += other.evidence_count
        yield finding
    yield from (f for _, f in from_smi)


def bus_key(bus_id: str) -> int | None:
    """A PCI bus id in any of its forms (0000:1a:00.0, 00000000:1A:00.0, NCCL's busId 1a000) as one number."""
    digits = "".join(c for c in bus_id if c in "0123456789abcdefABCDEF")
    return int(digits, 16) if digits else None


def _smi_link(gen: int | None, width: int | None) -> str:
    speed = f"{GT_PER_S[gen]:g} GT/s" if gen in GT_PER_S else "? GT/s"
    return f"{speed} x{width}" if width is not None else speed


def _smi_pcie_degraded(case: Case) -> Iterable[tuple[set[int | None], Finding]]:
    nccl_buses = {bus_key(m.bus_id) for c in case.communicators for m in c.ranks if m.bus_id}
    by_source: dict[str, list[SmiGpu]] = defaultdict(list)
    for gpu in case.smi_gpus:
        by_source[gpu.source].append(gpu)
    for source, gpus in by_source.items():
        at_max = sum(1 for g in gpus if g.pcie_gen is not None and g.pcie_gen == g.pcie_gen_max)
        slow: list[SmiGpu] = []
        for g in gpus:
            narrow = g.width is not None and g.width_max is not None and g.width < g.width_max
            working = g.performance_state == "P0" or at_max * 2 > len(gpus)  # not an idle GPU saving power
            older = g.pcie_gen is not None and g.pcie_gen_max is not None and g.pcie_gen < g.pcie_gen_max
            if narrow or (older and working):
                slow.append(g)
        if not slow:
            continue
        names = ", ".join(
            f"GPU {g.index} ({g.bus_id}) at {_smi_link(g.pcie_gen, g.width)}, capable of "
            f"{_smi_link(g.pcie_gen_max, g.width_max)}"
            for g in slow
        )
        # NCCL's ranks name their GPUs' bus ids: a GPU none of them uses carries no NCCL traffic
        used = not nccl_buses or any(bus_key(g.bus_id) in nccl_buses for g in slow)
        evidence = [e for g in slow for e in ([g.evidence] if g.evidence else []) + g.link_evidence]
        finding = make_finding(
            "TOPO007", "error" if used else "warning", f"on {source}: {names} ({SMI})",
            evidence=shown(evidence), evidence_count=len(evidence), hosts=[source],
        )  # fmt: skip
        yield {bus_key(g.bus_id) for g in slow}, finding


# =============================================================================== TOPO008
def _nvlinks(gpu: XmlGpu) -> int:
    return sum(link.count or 0 for link in gpu.nvlinks)


@rule("TOPO008", "nvlink-down", severity="error", needs=["nvlinks"])
def nvlink_down(ctx: Context) -> Iterable[Finding]:
    """A GPU has fewer NVLinks than its peers of the same host (same compute capability), as NCCL's
    topology dump counts them (`<nvlink target count>` per peer GPU or NVSwitch), e.g. 16 where its
    seven peers have 18, or none where they have some; or, as `nvidia-smi nvlink -s` reports them,
    fewer active links than its peers (same product), or links at a lower speed than the others.

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
    yield from _smi_nvlink_down(ctx.case)


def _smi_nvlink_down(case: Case) -> Iterable[Finding]:
    peers: dict[tuple[str, str | None], list[NvlinkGpu]] = defaultdict(list)
    for gpu in case.nvlink_gpus:
        peers[gpu.source, gpu.product].append(gpu)
    for (source, _), group in peers.items():
        most = max(len(g.active) for g in group)
        short = [g for g in group if len(g.active) < most]
        problems: list[tuple[NvlinkGpu, str, list[Evidence]]] = []
        if short and len(short) * 2 <= len(group) and len(group) > 1:
            for g in short:
                down = [link for link in g.links if link.speed is None]
                which = f" (link{'s' if len(down) != 1 else ''} {number_ranges([d.link for d in down])} inactive)"
                peers_have = f", where its {len(group) - len(short)} peers have {most}"
                problems.append((g, f"{len(g.active)} active NVLinks{which if down else ''}{peers_have}", [
                    e for e in [g.evidence, *(d.evidence for d in down)] if e is not None
                ]))  # fmt: skip
        speeds = [link.speed for g in group for link in g.active if link.speed is not None]
        fastest = max(speeds, default=0.0)
        for g in group:
            slow = [link for link in g.active if link.speed is not None and link.speed < fastest]
            if slow and len(slow) * 2 <= len(speeds):
                rates = sorted({f"{link.speed:g}" for link in slow})
                problems.append((g, f"link{'s' if len(slow) != 1 else ''} {number_ranges([x.link for x in slow])} at "
                                 f"{'/'.join(rates)} GB/s where the others run {fastest:g}", [
                    e for e in [g.evidence, *(x.evidence for x in slow)] if e is not None
                ]))  # fmt: skip
        for g, problem, evidence in problems:
            yield make_finding(
                "TOPO008", "error", f"on {source}: GPU {g.index} has {problem} ({NVLINK})",
                evidence=shown(evidence), evidence_count=len(evidence), hosts=[source],
            )  # fmt: skip
