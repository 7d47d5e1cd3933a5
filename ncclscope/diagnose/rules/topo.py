"""TOPO001-TOPO003: what an `nvidia-smi topo -m` matrix says about the distances between GPUs and
from GPUs to NICs (the log-side TOPO rules are in topo_log.py, CH001 in channels.py)."""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Iterable

from ncclscope.case.topology import NEAR, PCIE_RANK, is_rdma_nic, link
from ncclscope.common.words import plural
from ncclscope.diagnose.releases import case_release, has
from ncclscope.diagnose.rules.context import Context, shown
from ncclscope.diagnose.rules.registry import make_finding, rule
from ncclscope.diagnose.rules.topo_common import (
    common_nvlink_peer,
    gpu_pairs,
    labels,
    matrix_evidence,
    matrix_hosts,
    nic_label,
    nvlink_between,
    nvlinks,
    order,
    pairs_text,
    pcie,
    socket_lines,
    where,
)
from ncclscope.model import Evidence, Finding, Severity, TopologyMatrix, TopoPath


# =============================================================================== TOPO001
@rule("TOPO001", "gpu-pair-far", severity="error", needs=["gpu_paths"])
def gpu_pair_far(ctx: Context) -> Iterable[Finding]:
    """Two GPUs of one host have no NVLink and their PCIe path crosses the CPU.

    From the `nvidia-smi topo -m` matrix: a GPU pair without NV# whose path is SYS (SOC on old
    drivers: across the CPU sockets) is an error; NODE or PHB (through a host bridge) is a warning.
    One finding per matrix and severity, the pairs written compactly (`GPU0-3 <-> GPU4-7`). Pairs
    that share an NVLink neighbour are left out: NCCL routes them through that GPU (NVB path,
    `P2P/indirect`), as on the DGX-1 hybrid cube mesh. Without a matrix, from the paths between GPUs
    that NCCL (and RCCL) print after their topology dump with GRAPH on (`GPU/0-3000 :... GPU/0-d000
    (6/6.0/PHB)`): path type SYS is an error, PHB a warning, each pair with the bandwidth NCCL gives it.

    Why: NCCL 2.23+ uses direct P2P between GPUs only up to PXB (one or more PCIe switches, no host
    bridge); beyond that, except SYS on AMD CPUs with at most 2 GPUs, it copies through host memory
    (SHM), at a few GB/s instead of 12-24 GB/s over a PCIe switch or hundreds over NVLink. Older releases,
    and RCCL, do so on Intel and ARM CPUs and use P2P through the CPU elsewhere, at PCIe speed through the
    root complex. The slowest pair sets the pace of a ring, so one far pair slows every collective.

    Fix: Run jobs that need fast intra-node collectives on GPUs of one PCIe switch or one NVLink
    (AMD: xGMI) domain (CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES), or on an NVLink/NVSwitch or
    xGMI system; check the BIOS for ACS and IOMMU settings that force traffic through the root
    complex; accept the lower figure otherwise.

    Sources: NCCL src/graph/paths.cc (p2pLevel, NVB paths; printNodePaths; data/nccl_releases.json
    p2p_within_pxb); sjeaugey in NVIDIA/nccl#766
    (about 6 GB/s through the CPU on Gen3, 12 GB/s through a Gen3 switch); NVIDIA/nccl#1086 (GeForce
    GPUs cannot use P2P)
    """
    shm_lines = ctx.case.connections.by_transport.get("SHM", 0)
    shm_note = (
        f"; the log shows {plural(shm_lines, 'SHM connection line')} (GPU traffic through host memory)"
        if shm_lines
        else ""
    )
    for topo in _gpu_pair_matrices(ctx, "TOPO001"):
        far: dict[str, set[tuple[str, str]]] = defaultdict(set)
        for a, b in gpu_pairs(topo):
            token = link(topo, a, b)
            level = pcie(token)
            if nvlinks(token) or level not in ("SYS", "NODE", "PHB") or common_nvlink_peer(topo, a, b):
                continue
            far[level].add((a, b))
        if far["SYS"]:
            pairs = far["SYS"]
            name = "SOC (= SYS)" if topo.legend == "SOC" else "SYS"
            yield _far_finding(
                ctx,
                topo,
                "error",
                pairs,
                f"{where(topo)}: GPU pairs without {topo.gpu_link} cross the CPU-to-CPU interconnect, {name}: "
                f"{pairs_text(pairs)} ({plural(len(pairs), 'pair')}); {_beyond_pxb(ctx, topo)}{shm_note}",
            )
        near = far["NODE"] | far["PHB"]
        if near:
            parts = [f"{pairs_text(far[level])} {level}" for level in ("PHB", "NODE") if far[level]]
            yield _far_finding(
                ctx,
                topo,
                "warning",
                near,
                f"{where(topo)}: GPU pairs without {topo.gpu_link} go through a PCIe host bridge: {'; '.join(parts)} "
                f"({plural(len(near), 'pair')}); {_beyond_pxb(ctx, topo)}{shm_note}",
            )
    yield from _far_paths_in_log(ctx)


def _beyond_pxb(ctx: Context, topo: TopologyMatrix) -> str:
    """What the library does with a GPU pair beyond PXB, by its release where the log gives one
    (data/nccl_releases.json, p2p_within_pxb): NCCL 2.23+ copies it through host memory but on a 2-GPU AMD host;
    older releases, and RCCL, do only on Intel and ARM CPUs and use P2P through the CPU elsewhere."""
    if topo.gpu_link == "xGMI":
        return (
            "RCCL copies this traffic through host memory on Intel and ARM CPUs and sends it over P2P through the"
            " root complex on AMD CPUs: either way at PCIe speed through the CPU"
        )
    newer, release = has(ctx.case, "p2p_within_pxb"), case_release(ctx.case)
    name = f"NCCL {'.'.join(map(str, release))}" if release else "NCCL"
    if newer:
        return (
            f"{name} uses P2P only up to PXB (but between the two GPUs of an AMD host), so this traffic goes through"
            " host memory"
        )
    if newer is False:
        return (
            f"{name} uses P2P beyond PXB only on AMD CPUs: on Intel and ARM CPUs this traffic goes through host memory"
        )
    return (
        "NCCL uses P2P only up to PXB on Intel and ARM CPUs (from 2.23 on AMD hosts of more than two GPUs too), so"
        " there this traffic goes through host memory"
    )


# NCCL's path types beyond PXB, as TOPO001 judges them: (type, severity, what the path crosses)
FAR_PATH_LEVELS: tuple[tuple[str, Severity, str], ...] = (
    ("SYS", "error", "cross the CPU-to-CPU interconnect (SYS)"),
    ("PHB", "warning", "go through a PCIe host bridge (PHB)"),
)


def _far_paths_in_log(ctx: Context) -> Iterable[Finding]:
    """TOPO001 from NCCL's own paths between the GPUs of a host, where no matrix was given."""
    if ctx.case.topologies:
        return
    transports = ctx.case.connections.by_transport
    shm = sum(n for name, n in transports.items() if name.startswith("SHM"))
    p2p = sum(n for name, n in transports.items() if name.startswith("P2P"))
    if shm:  # NCCL copies through host memory beyond PXB; RCCL (AMD) may still connect such a pair over P2P
        seen = f"the log shows {plural(shm, 'SHM connection line')} (GPU traffic through host memory)"
    elif p2p:
        seen = f"the log shows {plural(p2p, 'P2P connection line')}: direct P2P, at that path's speed"
    else:
        seen = ""
    for topo in ctx.case.system_topologies:
        far: dict[tuple[str, ...], TopoPath] = {}
        for path in topo.gpu_paths:
            if path.path_type in ("SYS", "PHB"):
                far.setdefault(tuple(sorted((path.source, path.target))), path)
        for level, severity, crossing in FAR_PATH_LEVELS:
            pairs = sorted((pair, path) for pair, path in far.items() if path.path_type == level)
            if not pairs:
                continue
            listed = ", ".join(f"{a} <-> {b} at {path.bw:g} GB/s" for (a, b), path in pairs)
            message = (
                f"{topo.host or 'a host'}: NCCL's paths between GPUs without NVLink or xGMI {crossing}: {listed}"
                f" ({plural(len(pairs), 'pair')}, from NCCL's topology paths)"
            )
            if seen:
                message += f"; {seen}"
            evidence: list[Evidence] = []
            for _, path in pairs:
                for line in (path.evidence, *(p.evidence for p in topo.gpu_paths if p.source == path.target)):
                    if line not in evidence:
                        evidence.append(line)
            yield make_finding(
                "TOPO001",
                severity,
                message,
                evidence=shown(evidence),
                evidence_count=len(evidence),
                hosts=[topo.host] if topo.host else [],
            )


def _far_finding(
    ctx: Context, topo: TopologyMatrix, severity: Severity, pairs: set[tuple[str, str]], message: str
) -> Finding:
    evidence = matrix_evidence(topo, {d for pair in pairs for d in pair})
    return make_finding(
        "TOPO001",
        severity,
        message,
        evidence=shown(evidence),
        evidence_count=len(evidence),
        hosts=matrix_hosts(ctx),
    )


# =============================================================================== TOPO002
@rule("TOPO002", "nic-far-from-gpu", severity="warning", needs=["topology"])
def nic_far_from_gpu(ctx: Context) -> Iterable[Finding]:
    """A GPU's nearest NIC is NODE, PHB or SYS: no NIC shares a PCIe switch with it (PIX/PXB).

    From the matrix: for each GPU, its nearest RDMA NIC and the path to it. A warning lists the GPUs
    whose nearest NIC is NODE/PHB/SYS; when an NVLink peer of such a GPU has a PIX/PXB NIC, NCCL
    sends through that peer (PXN) and the GPU is listed in a separate info finding. Info too when the
    host has no RDMA NIC at all: the matrix lists no NIC while the log shows NET/Socket, or its NICs
    are plain Ethernet ports.

    Why: GPUDirect RDMA is used only up to PXB by default (NCCL_NET_GDR_LEVEL), so a far NIC means
    every inter-host byte is staged in host memory and crosses the CPU: on a multi-node job the
    network bandwidth per GPU drops (about 16 GB/s instead of 24 on a Gen4 NIC in the maintainers'
    example). Without an RDMA NIC, traffic goes through the kernel TCP stack.

    Fix: Put the GPUs and NICs that work together on the same PCIe switch (server vendor layout), run
    one rank per GPU with a rail-matched NIC, keep PXN on (default) where NVLink peers have close
    NICs; on a host without RDMA NICs, add InfiniBand/RoCE NICs for multi-node jobs.

    On GPUs coherent with their CPU over NVLink-C2C (Grace Hopper/Blackwell: the matrix gives each GPU
    a NUMA node of its own), NICs attached to the CPU are reached over C2C with GPUDirect RDMA (NCCL
    2.27+): info.

    Sources: NCCL src/graph/paths.cc (ncclTopoCheckGdr, PXN; NCCL_NET_GDR_C2C, default 1 from 2.27);
    sjeaugey in NVIDIA/nccl#412 (NIC attached to the CPU gives about 16 GB/s, a NIC on the GPU's PCI
    switch 24 GB/s); nccl-tests#232 and NVIDIA/nccl#1357 (NICs close to only half the GPUs)
    """
    socket_evidence = socket_lines(ctx.case)
    for topo in ctx.case.topologies:
        if not topo.gpus:
            continue
        rdma = [n for n in topo.nics if is_rdma_nic(topo.nic_names.get(n, n))]
        if not rdma:
            yield from _no_rdma_nic(ctx, topo, socket_evidence)
            continue
        nearest: dict[str, tuple[str, str]] = {}
        for gpu in topo.gpus:
            cells = [(PCIE_RANK[tok], nic, tok) for nic in rdma if (tok := link(topo, gpu, nic)) in PCIE_RANK]
            if cells:
                _, nic, token = min(cells)
                nearest[gpu] = (nic, "SYS" if token == "SOC" else token)
        close = {g for g, (_, tok) in nearest.items() if PCIE_RANK[tok] <= NEAR}
        far = {g: v for g, v in nearest.items() if g not in close}
        if not far:
            continue
        pxn = {g for g in far if any(nvlink_between(topo, g, peer) for peer in close)}
        plain = {g: v for g, v in far.items() if g not in pxn}
        if plain and _c2c_superchip(topo):
            yield _nic_finding(
                ctx,
                topo,
                "info",
                plain,
                "every GPU has a NUMA node of its own (GPU NUMA ID), as on Grace Hopper/Blackwell superchips whose"
                " GPU and CPU are joined by NVLink-C2C: NICs attached to the CPU are reached over C2C, where NCCL"
                " 2.27+ uses GPUDirect RDMA (NCCL_NET_GDR_C2C=1 by default; set it by hand on 2.26)",
            )
        elif plain:
            yield _nic_finding(
                ctx,
                topo,
                "warning",
                plain,
                f"no NIC shares a PCIe switch with {plural(len(plain), 'GPU')}, so GPUDirect RDMA is off by "
                "default and inter-host traffic crosses the CPU",
            )
        if pxn and len(pxn) > len(close):
            # PXN routes, but the few GPUs next to NICs carry the inter-host traffic of the many that are not
            nics = sorted(
                {n for g in close for n in rdma if PCIE_RANK.get(link(topo, g, n), NEAR + 1) <= NEAR}, key=order
            )
            yield _nic_finding(
                ctx,
                topo,
                "warning",
                {g: far[g] for g in pxn},
                f"NCCL sends their traffic through an NVLink peer (PXN), but only {labels(sorted(close, key=order))}"
                f" {'has' if len(close) == 1 else 'have'} a NIC on {'its' if len(close) == 1 else 'their'} PCIe"
                f" switch: {plural(len(nics), 'NIC')} ({', '.join(nic_label(topo, n) for n in nics)})"
                f" {'carries' if len(nics) == 1 else 'carry'} the inter-host traffic of"
                f" {plural(len(topo.gpus), 'GPU')}",
            )
        elif pxn:
            yield _nic_finding(
                ctx,
                topo,
                "info",
                {g: far[g] for g in pxn},
                "an NVLink peer of each has a PIX/PXB NIC, so NCCL sends through that peer (PXN) and the far NIC "
                "is not on the data path",
            )


def _c2c_superchip(topo: TopologyMatrix) -> bool:
    """nvidia-smi prints a GPU NUMA ID only where GPU memory is a NUMA node of its own: GPUs coherent
    with the CPU over NVLink-C2C. Elsewhere the column says N/A (or is absent)."""
    ids = [topo.gpu_numa_id.get(g, "").strip() for g in topo.gpus]
    return bool(ids) and all(i.isdigit() for i in ids)


def _nic_finding(
    ctx: Context, topo: TopologyMatrix, severity: Severity, far: dict[str, tuple[str, str]], consequence: str
) -> Finding:
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    for gpu in sorted(far, key=order):
        groups[far[gpu]].append(gpu)
    listing = "; ".join(f"{labels(gpus)} -> {nic_label(topo, nic)} {tok}" for (nic, tok), gpus in groups.items())
    evidence = matrix_evidence(topo, far)
    return make_finding(
        "TOPO002",
        severity,
        f"{where(topo)}: nearest NIC per GPU: {listing}; {consequence}",
        evidence=shown(evidence),
        evidence_count=len(evidence),
        hosts=matrix_hosts(ctx),
    )


def _no_rdma_nic(ctx: Context, topo: TopologyMatrix, socket_evidence: list[Evidence]) -> Iterable[Finding]:
    if topo.nics:
        names = ", ".join(nic_label(topo, n) for n in topo.nics)
        fact = f"its NICs ({names}) are Ethernet ports without RDMA"
        evidence = matrix_evidence(topo, topo.nics)
    elif socket_evidence:
        fact = "the matrix lists no NIC and the log shows NCCL on NET/Socket"
        evidence = matrix_evidence(topo) + socket_evidence
    else:
        return  # a GPU-only matrix alone: a workstation, nothing to judge
    yield make_finding(
        "TOPO002",
        "info",
        f"{where(topo)}: the host has no RDMA NIC: {fact}; inter-host traffic, if any, goes through the CPU "
        "and the TCP stack, without GPUDirect RDMA",
        evidence=shown(evidence),
        evidence_count=len(evidence),
        hosts=matrix_hosts(ctx),
    )


# =============================================================================== TOPO003
@rule("TOPO003", "nvlink-uneven", severity="warning", needs=["topology"])
def nvlink_uneven(ctx: Context) -> Iterable[Finding]:
    """NVLink counts differ between GPU pairs of one host, or some pairs lack NVLink while others have it.

    From the matrix: the NV# counts of all GPU pairs of a host that has NVLink at all. A warning
    names the pairs that differ from the most common count (fewer links, or none and their PCIe
    path). One pattern is a design, not a fault: the DGX-1 hybrid cube mesh (8 GPUs, each with
    NVLink to 4 peers in two fully linked quads, NV1/NV2 mix, the other pairs SYS/SOC), reported as
    info.

    Why: NVSwitch and fully connected NVLink systems give every pair the same count (NV18 on H100,
    NV12 on A100); a pair with fewer links, or none, usually means a failed or disabled link, a
    missing fabric manager or a wrong board, and the slowest pair limits every ring. Pairs left
    without NVLink are routed through a neighbour GPU or host memory.

    Fix: Check `nvidia-smi nvlink --status` and `nvidia-smi topo -p2p n` on the host, the fabric
    manager service on NVSwitch systems, and reseat or replace the board; drain the host meanwhile.

    Sources: NCCL src/graph/paths.cc; NCCL docs performance_and_tuning.rst; Azure NHC
    check_nvlink_status
    """
    for topo in _gpu_pair_matrices(ctx, "TOPO003"):
        # pairs whose cell the paste holds (a matrix cut after some rows says nothing of the pairs in the others)
        counts = {(a, b): nvlink_between(topo, a, b) for a, b in gpu_pairs(topo) if link(topo, a, b)}
        histogram = Counter(counts.values())
        if not any(counts.values()) or len(histogram) < 2:
            continue
        evidence_all = matrix_evidence(topo, topo.gpus)
        bridged = _bridged_pairs(topo, counts)
        if bridged:
            yield make_finding(
                "TOPO003",
                "info",
                f"{where(topo)}: NVLink joins the GPUs in pairs ({bridged}), each GPU to one peer, with the same"
                " count: NVLink bridges, a design rather than a fault; the other pairs go over PCIe, and NCCL rings"
                " cross them there",
                evidence=shown(evidence_all),
                evidence_count=len(evidence_all),
                hosts=matrix_hosts(ctx),
                fix="Nothing to fix. Keep the GPUs that talk most on a bridged pair (CUDA_VISIBLE_DEVICES order).",
            )
            continue
        if _hybrid_cube_mesh(topo):
            links = ", ".join(f"{plural(n, 'pair')} NV{c}" for c, n in sorted(histogram.items()) if c)
            yield make_finding(
                "TOPO003",
                "info",
                f"{where(topo)}: {labels(topo.gpus)} form an NVLink hybrid cube mesh (DGX-1 design: each GPU has "
                f"NVLink to 4 peers; {links}; the {histogram[0]} other pairs go through an NVLink neighbour): "
                "uneven by design, not a fault",
                evidence=shown(evidence_all),
                evidence_count=len(evidence_all),
                hosts=matrix_hosts(ctx),
            )
            continue
        # The most common NV# count is the host's norm and is only counted; the other groups, and the
        # pairs without NVLink (always the notable part), are written out.
        majority = max((c for c in histogram if c), key=lambda c: (histogram[c], c))
        parts, odd = [], set()
        for count in sorted(histogram, reverse=True):
            pairs = {p for p, c in counts.items() if c == count}
            if count == majority:
                parts.append(f"NV{count} on {plural(len(pairs), 'pair')}")
            elif count:
                odd |= pairs
                parts.append(f"NV{count} on {pairs_text(pairs)} ({plural(len(pairs), 'pair')})")
            else:
                odd |= pairs
                paths = "/".join(sorted({pcie(link(topo, *p)) or link(topo, *p) for p in pairs}))
                routed = all(common_nvlink_peer(topo, *p) for p in pairs)
                via = ", NCCL routes them through an NVLink neighbour" if routed else ""
                parts.append(f"no NVLink on {pairs_text(pairs)} ({plural(len(pairs), 'pair')}, {paths}{via})")
        evidence = matrix_evidence(topo, {d for pair in odd for d in pair})
        yield make_finding(
            "TOPO003",
            "warning",
            f"{where(topo)}: NVLink differs between GPU pairs: {'; '.join(parts)}",
            evidence=shown(evidence),
            evidence_count=len(evidence),
            hosts=matrix_hosts(ctx),
        )


def _gpu_pair_matrices(ctx: Context, code: str) -> list[TopologyMatrix]:
    """The matrices whose GPU-GPU cells say whether NVLink joins the pair: not those of `nvidia-smi topo -mp`
    (PCIe paths only), of which the rule says it could not judge."""
    for topo in ctx.case.topologies:
        if topo.pci_only:
            ctx.cannot_judge(
                code,
                f"{where(topo)} was printed by `nvidia-smi topo -mp`, which shows PCIe paths only: its GPU-GPU cells"
                " never show NVLink (`nvidia-smi topo -m` does)",
                matrix_evidence(topo, topo.gpus)[:1],
            )
    return [t for t in ctx.case.topologies if not t.pci_only]


def _bridged_pairs(topo: TopologyMatrix, counts: dict[tuple[str, str], int]) -> str:
    """Every GPU of the matrix has NVLink to exactly one peer, all with one count (a bridge per pair of PCIe
    cards): the pairs, as "GPU0-GPU1, GPU2-GPU3"; "" otherwise."""
    linked = [pair for pair, n in counts.items() if n]
    peers = Counter(g for pair in linked for g in pair)
    if len(topo.gpus) < 2 or set(peers) != set(topo.gpus) or any(n != 1 for n in peers.values()):
        return ""
    if len({counts[pair] for pair in linked}) != 1:
        return ""
    return ", ".join(f"{a}-{b}" for a, b in linked)


def _hybrid_cube_mesh(topo: TopologyMatrix) -> bool:
    """8 GPUs in two fully linked quads, each GPU also linked to one GPU of the other quad."""
    gpus = topo.gpus
    if len(gpus) != 8:
        return False
    peers = {g: {h for h in gpus if h != g and nvlink_between(topo, g, h)} for g in gpus}
    if any(len(p) != 4 for p in peers.values()):
        return False
    if len({sum(nvlink_between(topo, g, h) for h in peers[g]) for g in gpus}) != 1:
        return False
    first = gpus[0]
    for trio in itertools.combinations(sorted(peers[first]), 3):
        quad = {first, *trio}
        rest = set(gpus) - quad
        if all(b in peers[a] for a, b in itertools.combinations(quad, 2)) and all(
            b in peers[a] for a, b in itertools.combinations(rest, 2)
        ):
            return True
    return False
