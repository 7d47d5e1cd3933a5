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

from ncclscope.case.links import (
    NvlinkProblem,
    bus_key,
    nvlink_groups,
    nvlink_problems,
    slow_pci,
    slow_smi,
    smi_groups,
    smi_link,
    xml_link,
)
from ncclscope.common.words import number_ranges, plural
from ncclscope.diagnose.expectations import platform_spec
from ncclscope.diagnose.rules.context import EVIDENCE_SHOWN, Context, shown
from ncclscope.diagnose.rules.registry import make_finding, rule
from ncclscope.model import Evidence, Finding, NcclTopologyDump, NvlinkGpu, XmlGpu, XmlPciDevice

DUMP = "NCCL's topology dump"
SMI = "nvidia-smi -q"
NVLINK = "nvidia-smi nvlink -s"


def _host(dump: NcclTopologyDump) -> str:
    """The dump names no host: a run's per-host file name does (nccl-topo.<host>.xml), else the file itself."""
    return dump.host or dump.source


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
    x16". Error where the inputs show that NCCL uses the device (its topology dump, its ranks' bus
    ids), warning otherwise.

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
        for slow, full, size in slow_pci(dump):
            used = any(_used(d, dump) for d in slow)
            names = ", ".join(f"{_name(d, dump)} at {xml_link(d)}" for d in slow)
            kind = "GPU" if full.kind == "gpu" else "NIC"
            peers = f"its {size - len(slow)} {kind} peers run {xml_link(full)}"
            message = f"on {_host(dump)}: {names}, where {peers} ({DUMP})"
            evidence = [d.evidence for d in slow if d.evidence] + ([full.evidence] if full.evidence else [])
            finding = make_finding(
                "TOPO007", "error" if used else "warning", message, evidence=shown(evidence),
                evidence_count=len(evidence), hosts=[_host(dump)],
            )  # fmt: skip
            from_dumps.append(({bus_key(d.busid) for d in slow}, finding))
    from_smi = list(_smi_pcie_degraded(ctx))
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


def _smi_pcie_degraded(ctx: Context) -> Iterable[tuple[set[int | None], Finding]]:
    case = ctx.case
    nccl_buses = {bus_key(m.bus_id) for c in case.communicators for m in c.ranks if m.bus_id}
    for gpus in smi_groups(case.smi_gpus):
        source = gpus[0].source
        slow = slow_smi(gpus)
        if not slow:
            continue
        names = ", ".join(
            f"GPU {g.index} ({g.bus_id}) at {smi_link(g.pcie_gen, g.width)}, capable of "
            f"{smi_link(g.pcie_gen_max, g.width_max)}"
            for g in slow
        )
        # NCCL's ranks name their GPUs' bus ids: an error for a GPU they show it uses; without an NCCL log
        # nothing shows that the GPU carries NCCL traffic (an error must be earned: a warning)
        used = any(bus_key(g.bus_id) in nccl_buses for g in slow)
        evidence = [e for g in slow for e in ([g.evidence] if g.evidence else []) + g.link_evidence]
        finding = make_finding(
            "TOPO007", "error" if used else "warning", f"on {ctx.report_host(source)}: {names} ({SMI})",
            evidence=shown(evidence), evidence_count=len(evidence), hosts=[ctx.report_host(source)],
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
    yield from _smi_nvlink_down(ctx)


def _all_inactive(ctx: Context, group: list[NvlinkGpu]) -> Iterable[Finding]:
    """GPUs for which nvidia-smi prints `NVML: Unable to retrieve NVLink information as all links are inactive`:
    against their peers of the same product with active links, or alone against what an SXM or superchip module
    has (data/expected_busbw.json nvlink_links); a PCIe card without a bridge prints it by design."""
    down = [g for g in group if g.all_inactive is not None]
    if not down:
        return
    up = [g for g in group if g.all_inactive is None and g.active]
    spec = platform_spec(down[0].product)
    if up:
        most = max(len(g.active) for g in up)
        where = f"where its {plural(len(up), 'peer')} have {most} active"
    elif spec is not None and spec.form in ("SXM", "Superchip") and spec.nvlink_links:
        where = f"where each {spec.key} module has {spec.nvlink_links} NVLinks to its NVSwitches or peers"
    else:
        return  # a PCIe card, or a product ncclscope does not know: no NVLink may be how it is built
    host = ctx.report_host(down[0].source)
    names = ", ".join(str(g.index) for g in down)
    lines = [e for g in down for e in (g.evidence, g.all_inactive) if e is not None]
    yield make_finding(
        "TOPO008", "error",
        f"on {host}: GPU {names} ({down[0].product}) report{'s' if len(down) == 1 else ''} all NVLinks inactive, "
        f"{where}: {'its' if len(down) == 1 else 'their'} traffic to other GPUs goes over PCIe ({NVLINK})",
        evidence=shown(lines), evidence_count=len(lines), hosts=[host],
    )  # fmt: skip


def _smi_nvlink_down(ctx: Context) -> Iterable[Finding]:
    case = ctx.case
    for whole in nvlink_groups(case.nvlink_gpus):
        yield from _all_inactive(ctx, whole)
        group = [g for g in whole if g.all_inactive is None]
        if not group:
            continue
        spec = platform_spec(group[0].product)
        full = spec.nvlink_links if spec is not None and spec.form in ("SXM", "Superchip") else None
        problems = nvlink_problems(group, full)
        down = [p for p in problems if not p.slow]
        if len(down) > 1:  # several GPUs of one host with links down: one finding, each GPU named
            yield _several_down(ctx, down)
            problems = [p for p in problems if p.slow]
        for p in problems:
            g = p.gpu
            if p.slow:
                speeds = {link.link: link.speed for link in g.links}
                rates = sorted({f"{speeds[n]:g}" for n in p.slow})
                problem = (
                    f"link{'s' if len(p.slow) != 1 else ''} {number_ranges(p.slow)} at {'/'.join(rates)} GB/s "
                    f"where the others run {p.fastest:g}"
                )
            else:
                which = f" (link{'s' if len(p.down) != 1 else ''} {number_ranges(p.down)} inactive)" if p.down else ""
                problem = f"{len(g.active)} active NVLinks{which}, where its {p.peers} peers have {p.most}"
                if p.lines_lost:
                    problem += f" ({'one' if p.lines_lost == 1 else p.lines_lost} of its link lines lost in the paste)"
                if p.partial:
                    listed = ", ".join(str(other.index) for other in p.partial)
                    problem += f" (GPU {listed}: fewer links listed, lines lost; not compared)"
            yield make_finding(
                "TOPO008", "error", f"on {ctx.report_host(g.source)}: GPU {g.index} has {problem} ({NVLINK})",
                evidence=shown(p.evidence), evidence_count=len(p.evidence), hosts=[ctx.report_host(g.source)],
            )  # fmt: skip


def _several_down(ctx: Context, down: list[NvlinkProblem]) -> Finding:
    host = ctx.report_host(down[0].gpu.source)
    parts = [
        f"GPU {p.gpu.index} has {len(p.gpu.active)}"
        + (f" (link{'s' if len(p.down) != 1 else ''} {number_ranges(p.down)} inactive)" if p.down else "")
        for p in down
    ]
    lines = [e for p in down for e in p.evidence]
    return make_finding(
        "TOPO008", "error",
        f"on {host}: {len(down)} GPUs have fewer active NVLinks than the {down[0].most} of their"
        f" {plural(down[0].peers, 'peer')}: {'; '.join(parts)} ({NVLINK})",
        evidence=shown(lines), evidence_count=len(lines), hosts=[host],
    )  # fmt: skip
