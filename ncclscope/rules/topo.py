"""Rules of the TOPO family and CH001: how the GPUs and NICs of a host are wired, and what NCCL built on it.

The `nvidia-smi topo -m` matrix (Case.topologies) gives the wiring; the NCCL log gives what NCCL made
of it: connection transports, its own topology dump and graph searches, channel counts. A matrix
names no host: when the Case holds one matrix and the log one host, the matrix is taken to be that
host's.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from ncclscope.model import Case, Connection, Evidence, Finding, P2pReport, Severity, TopologyMatrix
from ncclscope.rules.context import Context, shown
from ncclscope.rules.registry import make_finding, rule
from ncclscope.topology import NEAR, NV_TOKEN, PCIE_RANK, is_rdma_nic, link, split_label

PAIRS_SHOWN = 6  # blocks of GPU pairs written out in one message
HOSTS_SHOWN = 3

# NCCL falls back to PCIe Gen3 x16 (12 GB/s) for a link whose speed it cannot read from /sys
# (kvDictPciGen default in src/graph/topo.cc), so a maxBw of 12 or less is what a hidden topology
# looks like -- and also what a real Gen3 host looks like, hence only a corroborating signal.
TINY_MAX_BW = 12.0

# Channel counts. Bandwidth grows with channels; on an NVLink host with many GPUs NCCL finds many
# (8+ on 8 GPUs). One ring/tree channel on a host of 4+ NVLink GPUs, or 2 or fewer collective
# channels on 8 NVLink GPUs, is far below what the links carry. On PCIe hosts and 2-GPU boxes few
# channels are normal.
RING_TREE_PATTERNS = {1: "balanced tree", 2: "split tree", 3: "tree", 4: "ring"}
FEW_GRAPH_CHANNELS = 1
FEW_GRAPH_CHANNELS_MIN_GPUS = 4
FEW_COLL_CHANNELS = 2
FEW_COLL_CHANNELS_MIN_GPUS = 8
# Variables that set the channel count (debug settings in NCCL's env.rst). NCCL_NCHANNELS_PER_NET_PEER
# and similar per-peer knobs are tuning for the network, not channel caps, and are left to ENV001.
CHANNEL_OVERRIDES = (
    "NCCL_MAX_NCHANNELS",
    "NCCL_MIN_NCHANNELS",
    "NCCL_MAX_CTAS",
    "NCCL_MIN_CTAS",
    "NCCL_MAX_P2P_NCHANNELS",
)
CHANNEL_SHAPERS = ("NCCL_GRAPH_FILE", "NCCL_TOPO_FILE")  # fix the channels NCCL builds, without a cap


# ------------------------------------------------------------------------------------- matrices
def _nvlinks(token: str) -> int:
    match = NV_TOKEN.match(token)
    return int(match[1]) if match else 0


def _pcie(token: str) -> str | None:
    """The PCIe class of a cell, SOC read as SYS; None for NV#, X and unknown tokens."""
    if token not in PCIE_RANK:
        return None
    return "SYS" if token == "SOC" else token


def _gpu_pairs(topo: TopologyMatrix) -> Iterator[tuple[str, str]]:
    return itertools.combinations(topo.gpus, 2)


def _nvlink_between(topo: TopologyMatrix, a: str, b: str) -> int:
    return _nvlinks(link(topo, a, b))


def _common_nvlink_peer(topo: TopologyMatrix, a: str, b: str) -> str | None:
    """A GPU with NVLink to both: NCCL routes a-b through it (NVB path, `P2P/indirect`)."""
    for g in topo.gpus:
        if g not in (a, b) and _nvlink_between(topo, a, g) and _nvlink_between(topo, g, b):
            return g
    return None


def _order(label: str) -> tuple[str, int]:
    return split_label(label) or (label, -1)


def number_ranges(numbers: Iterable[int]) -> str:
    """0-3,5,7-8: consecutive numbers as ranges."""
    parts = []
    for _, run in itertools.groupby(enumerate(sorted(set(numbers))), key=lambda item: item[1] - item[0]):
        values = [value for _, value in run]
        parts.append(str(values[0]) if len(values) == 1 else f"{values[0]}-{values[-1]}")
    return ",".join(parts)


def _labels(labels: Iterable[str]) -> str:
    """GPU0-3, GPU0,2,5-7: device labels with their numbers compressed."""
    groups: dict[str, list[int]] = defaultdict(list)
    plain: list[str] = []
    for label in labels:
        split = split_label(label)
        if split:
            groups[split[0]].append(split[1])
        else:
            plain.append(label)
    out = [f"{prefix}{number_ranges(numbers)}" for prefix, numbers in groups.items()]
    return ", ".join(out + sorted(set(plain)))


def _components(pairs: set[tuple[str, str]]) -> list[set[str]]:
    neighbours: dict[str, set[str]] = defaultdict(set)
    for a, b in pairs:
        neighbours[a].add(b)
        neighbours[b].add(a)
    seen: set[str] = set()
    out = []
    for start in sorted(neighbours, key=_order):
        if start in seen:
            continue
        component, todo = set(), [start]
        while todo:
            node = todo.pop()
            if node not in component:
                component.add(node)
                todo.extend(neighbours[node] - component)
        seen |= component
        out.append(component)
    return out


def _blocks(pairs: set[tuple[str, str]]) -> list[str]:
    """Compact descriptions of a set of device pairs, one per complete block.

    A clique reads 'all pairs of GPU0-3'; a complete bipartite block reads 'GPU0-3 <-> GPU4-7'
    (devices with the same partners are grouped, so the pairs between two groups are all there).
    """
    out: list[str] = []
    for component in _components(pairs):
        inside = {p for p in pairs if p[0] in component}
        n = len(component)
        if n > 2 and len(inside) == n * (n - 1) // 2:
            out.append(f"all pairs of {_labels(sorted(component, key=_order))}")
            continue
        partners: dict[str, set[str]] = defaultdict(set)
        for a, b in inside:
            partners[a].add(b)
            partners[b].add(a)
        classes: dict[frozenset[str], list[str]] = {}
        for node in sorted(component, key=_order):
            classes.setdefault(frozenset(partners[node]), []).append(node)
        ordered = list(classes.items())
        for i, (key_a, members_a) in enumerate(ordered):
            for _key_b, members_b in ordered[i + 1 :]:
                if members_b[0] in key_a:
                    out.append(f"{_labels(members_a)} <-> {_labels(members_b)}")
    return out


def _pairs_text(pairs: set[tuple[str, str]]) -> str:
    blocks = _blocks(pairs)
    text = "; ".join(blocks[:PAIRS_SHOWN])
    if len(blocks) > PAIRS_SHOWN:
        text += f"; ... ({len(blocks) - PAIRS_SHOWN} more)"
    return text


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _where(topo: TopologyMatrix) -> str:
    return f"{topo.source}:{topo.line}"


def _row_text(topo: TopologyMatrix, device: str) -> str:
    return "  ".join([device] + [topo.links.get(device, {}).get(d, "") for d in topo.devices])


def _matrix_evidence(topo: TopologyMatrix, devices: Iterable[str] = ()) -> list[Evidence]:
    """The header line, then the rows of the devices involved (rows follow the header in order).

    The matrix keeps its cells, not its raw lines, so the rows are written back from the cells.
    """
    evidence = [Evidence(source=topo.source, line=topo.line, text="  ".join(["", *topo.devices]))]
    if topo.problems:  # a row could not be read: row numbers cannot be trusted
        return evidence
    wanted = set(devices)
    for index, device in enumerate(topo.devices):
        if device in wanted:
            evidence.append(Evidence(source=topo.source, line=topo.line + 1 + index, text=_row_text(topo, device)))
    return evidence


def _matrix_hosts(ctx: Context) -> list[str]:
    """The host a matrix belongs to, when that is unambiguous."""
    return list(ctx.hosts) if len(ctx.case.topologies) == 1 and len(ctx.hosts) == 1 else []


def _hosts_like_matrix(ctx: Context) -> list[str]:
    """The hosts a single matrix describes: all hosts of the job, which are taken to be alike."""
    return list(ctx.hosts) if len(ctx.case.topologies) == 1 else []


def _nic_label(topo: TopologyMatrix, nic: str) -> str:
    name = topo.nic_names.get(nic)
    return f"{nic} ({name})" if name and name != nic else nic


def _matrix_has_nvlink(topo: TopologyMatrix) -> bool:
    return any(_nvlink_between(topo, a, b) for a, b in _gpu_pairs(topo))


# ------------------------------------------------------------------------------------------ log
def _gpus_per_host(ctx: Context) -> dict[str, int]:
    devices: dict[str, set[int]] = defaultdict(set)
    for process in ctx.case.processes:
        if process.host:
            devices[process.host].update(process.cuda_devs)
    for comm in ctx.case.communicators:
        for member in comm.ranks:
            if member.host and member.cuda_dev is not None:
                devices[member.host].add(member.cuda_dev)
    counts = {host: len(devs) for host, devs in devices.items()}
    for host in _hosts_like_matrix(ctx):
        counts[host] = max(counts.get(host, 0), len(ctx.case.topologies[0].gpus))
    if ctx.platform.gpus_per_host:
        for host in ctx.hosts:
            counts[host] = max(counts.get(host, 0), ctx.platform.gpus_per_host)
    return counts


def _nvlink_hosts(ctx: Context) -> set[str]:
    """Hosts whose GPUs the inputs show joined by NVLink."""
    case = ctx.case
    hosts = {t.host for t in case.system_topologies if t.host and any("NVL[" in n for n in t.nodes)}
    hosts |= {g.host for g in case.graphs if g.host and (g.type_intra or "").upper() in ("NVL", "NVB")}
    hosts |= {m.host for m in case.messages if m.host and m.family == "nvls_support" and not m.fields.get("nvls_not")}
    hosts |= {e.host for e in case.edges if e.host and e.transport.startswith(("P2P/indirect", "P2P/MNNVL"))}
    hosts |= {r.host for r in case.p2p if r.host and r.kind == "disabled_on_nvlink"}
    if any(_matrix_has_nvlink(t) for t in case.topologies):
        hosts |= set(_hosts_like_matrix(ctx))
    if (ctx.platform.nvlink_links or 0) > 0 or ctx.platform.nvswitch:
        hosts |= set(ctx.hosts)
    return hosts


def _rdma_nics_per_host(case: Case) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for device in case.net_devices:
        if device.transport.upper() != "SOCKET":
            counts[device.host] += 1
    return counts


def _hosts_text(hosts: Iterable[str]) -> str:
    names = sorted(set(hosts))
    if len(names) <= HOSTS_SHOWN:
        return ", ".join(names)
    return f"{', '.join(names[:HOSTS_SHOWN])} and {len(names) - HOSTS_SHOWN} more hosts"


def _socket_evidence(case: Case) -> list[Evidence]:
    """Lines showing NCCL on its socket transport: NET/Socket connections and device lists."""
    evidence = [e for key, e in case.connections.examples.items() if key.upper().startswith("NET/SOCKET")]
    return evidence + [d.evidence for d in case.net_devices if d.transport.upper() == "SOCKET"]


# =============================================================================== TOPO001
@rule("TOPO001", "gpu-pair-far", severity="error", needs=["topology"])
def gpu_pair_far(ctx: Context) -> Iterable[Finding]:
    """Two GPUs of one host have no NVLink and their PCIe path crosses the CPU.

    From the `nvidia-smi topo -m` matrix: a GPU pair without NV# whose path is SYS (SOC on old
    drivers: across the CPU sockets) is an error; NODE or PHB (through a host bridge) is a warning.
    One finding per matrix and severity, the pairs written compactly (`GPU0-3 <-> GPU4-7`). Pairs
    that share an NVLink neighbour are left out: NCCL routes them through that GPU (NVB path,
    `P2P/indirect`), as on the DGX-1 hybrid cube mesh.

    Why: NCCL uses direct P2P between GPUs only up to PXB (one or more PCIe switches, no host
    bridge); beyond that, except SYS on AMD CPUs with at most 2 GPUs, it copies through host memory
    (SHM), at a few GB/s instead of 12-24 GB/s over a PCIe switch or hundreds over NVLink. The
    slowest pair sets the pace of a ring, so one far pair slows every collective.

    Fix: Run jobs that need fast intra-node collectives on GPUs of one PCIe switch or one NVLink
    domain (CUDA_VISIBLE_DEVICES), or on an NVLink/NVSwitch system; check the BIOS for ACS and
    IOMMU settings that force traffic through the root complex; accept the lower figure otherwise.

    Sources: NCCL src/graph/paths.cc (p2pLevel = PATH_PXB, NVB paths); sjeaugey in NVIDIA/nccl#766
    (about 6 GB/s through the CPU on Gen3, 12 GB/s through a Gen3 switch); landscape.md 2.C.9
    """
    shm_lines = ctx.case.connections.by_transport.get("SHM", 0)
    shm_note = (
        f"; the log shows {_plural(shm_lines, 'SHM connection line')} (GPU traffic through host memory)"
        if shm_lines
        else ""
    )
    for topo in ctx.case.topologies:
        far: dict[str, set[tuple[str, str]]] = defaultdict(set)
        for a, b in _gpu_pairs(topo):
            token = link(topo, a, b)
            level = _pcie(token)
            if _nvlinks(token) or level not in ("SYS", "NODE", "PHB") or _common_nvlink_peer(topo, a, b):
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
                f"{_where(topo)}: GPU pairs without NVLink cross the CPU-to-CPU interconnect, {name}: "
                f"{_pairs_text(pairs)} ({_plural(len(pairs), 'pair')}); NCCL does not use P2P beyond PXB, "
                f"so this traffic goes through host memory{shm_note}",
            )
        near = far["NODE"] | far["PHB"]
        if near:
            parts = [f"{_pairs_text(far[level])} {level}" for level in ("PHB", "NODE") if far[level]]
            yield _far_finding(
                ctx,
                topo,
                "warning",
                near,
                f"{_where(topo)}: GPU pairs without NVLink go through a PCIe host bridge: {'; '.join(parts)} "
                f"({_plural(len(near), 'pair')}); NCCL does not use P2P beyond PXB, so this traffic goes through "
                f"host memory{shm_note}",
            )


def _far_finding(
    ctx: Context, topo: TopologyMatrix, severity: Severity, pairs: set[tuple[str, str]], message: str
) -> Finding:
    evidence = _matrix_evidence(topo, {d for pair in pairs for d in pair})
    return make_finding(
        "TOPO001",
        severity,
        message,
        evidence=shown(evidence),
        evidence_count=len(evidence),
        hosts=_matrix_hosts(ctx),
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
    socket_evidence = _socket_evidence(ctx.case)
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
        pxn = {g for g in far if any(_nvlink_between(topo, g, peer) for peer in close)}
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
                f"no NIC shares a PCIe switch with {_plural(len(plain), 'GPU')}, so GPUDirect RDMA is off by "
                "default and inter-host traffic crosses the CPU",
            )
        if pxn:
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
    for gpu in sorted(far, key=_order):
        groups[far[gpu]].append(gpu)
    listing = "; ".join(f"{_labels(gpus)} -> {_nic_label(topo, nic)} {tok}" for (nic, tok), gpus in groups.items())
    evidence = _matrix_evidence(topo, far)
    return make_finding(
        "TOPO002",
        severity,
        f"{_where(topo)}: nearest NIC per GPU: {listing}; {consequence}",
        evidence=shown(evidence),
        evidence_count=len(evidence),
        hosts=_matrix_hosts(ctx),
    )


def _no_rdma_nic(ctx: Context, topo: TopologyMatrix, socket_evidence: list[Evidence]) -> Iterable[Finding]:
    if topo.nics:
        names = ", ".join(_nic_label(topo, n) for n in topo.nics)
        fact = f"its NICs ({names}) are Ethernet ports without RDMA"
        evidence = _matrix_evidence(topo, topo.nics)
    elif socket_evidence:
        fact = "the matrix lists no NIC and the log shows NCCL on NET/Socket"
        evidence = _matrix_evidence(topo) + socket_evidence
    else:
        return  # a GPU-only matrix alone: a workstation, nothing to judge
    yield make_finding(
        "TOPO002",
        "info",
        f"{_where(topo)}: the host has no RDMA NIC: {fact}; inter-host traffic, if any, goes through the CPU "
        "and the TCP stack, without GPUDirect RDMA",
        evidence=shown(evidence),
        evidence_count=len(evidence),
        hosts=_matrix_hosts(ctx),
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
    check_nvlink_status; landscape.md 2.C.10
    """
    for topo in ctx.case.topologies:
        counts = {(a, b): _nvlink_between(topo, a, b) for a, b in _gpu_pairs(topo)}
        histogram = Counter(counts.values())
        if not any(counts.values()) or len(histogram) < 2:
            continue
        evidence_all = _matrix_evidence(topo, topo.gpus)
        if _hybrid_cube_mesh(topo):
            links = ", ".join(f"{_plural(n, 'pair')} NV{c}" for c, n in sorted(histogram.items()) if c)
            yield make_finding(
                "TOPO003",
                "info",
                f"{_where(topo)}: {_labels(topo.gpus)} form an NVLink hybrid cube mesh (DGX-1 design: each GPU has "
                f"NVLink to 4 peers; {links}; the {histogram[0]} other pairs go through an NVLink neighbour): "
                "uneven by design, not a fault",
                evidence=shown(evidence_all),
                evidence_count=len(evidence_all),
                hosts=_matrix_hosts(ctx),
            )
            continue
        # The most common NV# count is the host's norm and is only counted; the other groups, and the
        # pairs without NVLink (always the notable part), are written out.
        majority = max((c for c in histogram if c), key=lambda c: (histogram[c], c))
        parts, odd = [], set()
        for count in sorted(histogram, reverse=True):
            pairs = {p for p, c in counts.items() if c == count}
            if count == majority:
                parts.append(f"NV{count} on {_plural(len(pairs), 'pair')}")
            elif count:
                odd |= pairs
                parts.append(f"NV{count} on {_pairs_text(pairs)} ({_plural(len(pairs), 'pair')})")
            else:
                odd |= pairs
                paths = "/".join(sorted({_pcie(link(topo, *p)) or link(topo, *p) for p in pairs}))
                routed = all(_common_nvlink_peer(topo, *p) for p in pairs)
                via = ", NCCL routes them through an NVLink neighbour" if routed else ""
                parts.append(f"no NVLink on {_pairs_text(pairs)} ({_plural(len(pairs), 'pair')}, {paths}{via})")
        evidence = _matrix_evidence(topo, {d for pair in odd for d in pair})
        yield make_finding(
            "TOPO003",
            "warning",
            f"{_where(topo)}: NVLink differs between GPU pairs: {'; '.join(parts)}",
            evidence=shown(evidence),
            evidence_count=len(evidence),
            hosts=_matrix_hosts(ctx),
        )


def _hybrid_cube_mesh(topo: TopologyMatrix) -> bool:
    """8 GPUs in two fully linked quads, each GPU also linked to one GPU of the other quad."""
    gpus = topo.gpus
    if len(gpus) != 8:
        return False
    peers = {g: {h for h in gpus if h != g and _nvlink_between(topo, g, h)} for g in gpus}
    if any(len(p) != 4 for p in peers.values()):
        return False
    if len({sum(_nvlink_between(topo, g, h) for h in peers[g]) for g in gpus}) != 1:
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


# =============================================================================== TOPO004
@rule("TOPO004", "shm-instead-of-p2p", severity="warning", needs=["transports"])
def shm_instead_of_p2p(ctx: Context) -> Iterable[Finding]:
    """GPUs of one host exchange data through host memory (SHM) instead of P2P.

    From the connection lines (`via SHM/direct/direct`, `via SHM/CE/CE`, `via direct shared memory`)
    and the lines where NCCL says P2P is not possible (`Could not enable P2P between dev ...`,
    `Check P2P Type intraNodeP2pSupport 0`). One finding per group of hosts with the same GPU pairs,
    naming ranks and devices, the matrix path when a matrix is given, and the variables that switch
    P2P off when they are set.

    Why: SHM copies every chunk through a buffer in host memory: a few GB/s and extra latency, where
    P2P over a PCIe switch gives 12-24 GB/s and NVLink hundreds. A ring is as fast as its slowest
    hop. NCCL picks SHM when the GPUs are too far apart (beyond PXB: across the CPU sockets or host
    bridges), when P2P fails between them (ACS/IOMMU, GeForce cards, containers without IPC), or
    when NCCL_P2P_DISABLE / NCCL_P2P_LEVEL forbid it.

    Fix: Unset NCCL_P2P_DISABLE and NCCL_P2P_LEVEL if set; check `nvidia-smi topo -m` for the pairs
    (TOPO001) and `nvidia-smi topo -p2p r`; disable PCI ACS in the BIOS (or with setpci) on bare
    metal; in containers share the IPC namespace (`--ipc=host`); place jobs on GPUs of one PCIe
    switch or an NVLink system.

    Sources: NCCL src/transport/p2p.cc and shm.cc; NCCL docs gpu_troubleshooting.rst (PCI ACS);
    sjeaugey in NVIDIA/nccl#766 and nccl#1086 (GeForce P2P); landscape.md 2.C.9 and 2.C.11
    """
    case = ctx.case
    buses = _bus_to_device(case)
    topo = case.topologies[0] if len(case.topologies) == 1 else None
    per_host: dict[str, _HostShm] = defaultdict(_HostShm)
    for edge in case.edges:
        if not edge.transport.upper().startswith("SHM"):
            continue
        src, dst = _edge_devices(edge, buses)
        if src is not None and src == dst:
            continue  # two ranks on one GPU: not a pair of GPUs
        per_host[edge.host or ""].add(edge, src, dst, topo)
    shm_lines = {k: n for k, n in case.connections.by_transport.items() if k.upper().startswith("SHM")}
    if shm_lines and not per_host:  # the edges were capped away: the summary still counts every line
        per_host[""].lines = sum(shm_lines.values())
        per_host[""].evidence = [e for k, e in case.connections.examples.items() if k in shm_lines]
    for host, refusals in _p2p_refusals(case).items():
        per_host[host].refusals = refusals
    causes = [f"{e.name}={e.value}" for e in case.env if e.name in ("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL")]
    cause = f"; {', '.join(causes)} set by environment" if causes else ""
    # hosts with the same GPU pairs tell one story: one finding for all of them
    grouped: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for host, shm in per_host.items():
        grouped[shm.signature()].append(host)
    for hosts in grouped.values():
        group = [per_host[h] for h in hosts]
        evidence = [e for shm in group for e in [*shm.evidence, *(r.evidence for r in shm.refusals)]]
        named = sorted(h for h in hosts if h)
        lines = sum(shm.lines for shm in group)
        where = "the job" if not named else f"host {named[0]}" if len(named) == 1 else f"hosts {_hosts_text(named)}"
        yield make_finding(
            "TOPO004",
            "warning",
            f"{where}: {group[0].description(len(hosts) == 1, len(hosts), _plural(lines, 'connection line'))}{cause}",
            evidence=shown(evidence),
            evidence_count=lines + sum(len(shm.refusals) for shm in group) or len(evidence),
            hosts=named,
            ranks=sorted({r for shm in group for pair in shm.ranks.values() for ranks in pair for r in ranks}),
        )


@dataclass
class _HostShm:
    """What one host shows of GPU traffic through host memory."""

    pairs: dict[tuple[str, str], str] = field(default_factory=dict)  # GPU pair -> how to name it
    ranks: dict[tuple[str, str], list[tuple[int, int]]] = field(default_factory=dict)
    evidence: list[Evidence] = field(default_factory=list)
    lines: int = 0
    refusals: list[P2pReport] = field(default_factory=list)

    def add(self, edge: Connection, src: int | str | None, dst: int | str | None, topo: TopologyMatrix | None) -> None:
        a = _device_name(src) or f"rank {edge.from_rank}"
        b = _device_name(dst) or f"rank {edge.to_rank}"
        key = (min(a, b, key=_order), max(a, b, key=_order))
        path = link(topo, a, b) if topo is not None else ""
        self.pairs.setdefault(key, f"{a} -> {b}" + (f" [{_pcie(path) or path}]" if path else ""))
        self.ranks.setdefault(key, []).append((edge.from_rank, edge.to_rank))
        self.evidence.append(edge.evidence)
        self.lines += edge.channels

    def signature(self) -> tuple[str, ...]:
        return (*sorted(self.pairs.values()), *sorted({_refusal_text(r) for r in self.refusals}))

    def description(self, with_ranks: bool, hosts: int, lines: str) -> str:
        parts = []
        if self.pairs or self.lines:
            names = []
            for key in sorted(self.pairs, key=lambda k: (_order(k[0]), _order(k[1]))):
                ranks = self.ranks[key][0]
                named = self.pairs[key]
                names.append(
                    f"{named} (ranks {ranks[0]} -> {ranks[1]})" if with_ranks and "rank" not in named else named
                )
            listing = ", ".join(names[:PAIRS_SHOWN])
            if len(names) > PAIRS_SHOWN:
                listing += f", ... ({len(names) - PAIRS_SHOWN} more)"
            per_host = " on each host" if hosts > 1 else ""
            between = f" between {_plural(len(names), 'GPU pair')}{per_host}: {listing}" if names else ""
            parts.append(f"GPU traffic goes through host memory (SHM) instead of P2P{between} ({lines})")
        if self.refusals:
            texts = sorted({_refusal_text(r) for r in self.refusals})
            parts.append(f"NCCL reports P2P unavailable: {', '.join(texts[:PAIRS_SHOWN])}")
        return "; ".join(parts)


def _device_name(dev: int | str | None) -> str | None:
    if dev is None:
        return None
    return f"GPU{dev}" if isinstance(dev, int) else dev


def _refusal_text(report: P2pReport) -> str:
    if report.kind == "not_enabled" and len(report.devices) == 2:
        return f"dev {report.devices[0].split('(')[0]} <-> dev {report.devices[1].split('(')[0]}"
    return "intraNodeP2pSupport 0" if report.kind == "intra_node_support" else " <-> ".join(report.devices)


def _p2p_refusals(case: Case) -> dict[str, list[P2pReport]]:
    out: dict[str, list[P2pReport]] = defaultdict(list)
    seen: set[tuple[str, frozenset[str]]] = set()
    for report in case.p2p:
        if report.kind == "disabled_on_nvlink" or report.supported:
            continue  # TOPO005's, or P2P that works
        key = (report.host or "", frozenset(report.devices) or frozenset({report.kind}))
        if key not in seen:  # both GPUs of a pair print it, every rank prints its support
            seen.add(key)
            out[report.host or ""].append(report)
    return out


def _bus_to_device(case: Case) -> dict[tuple[str, str], int]:
    """(host, busId) -> GPU index, from the communicator init lines.

    The NVML index (nvmlDev) where printed: it is the numbering of `nvidia-smi topo -m`, while the
    CUDA device number depends on CUDA_VISIBLE_DEVICES.
    """
    out: dict[tuple[str, str], int] = {}
    for comm in case.communicators:
        for member in comm.ranks:
            index = member.nvml_dev if member.nvml_dev is not None else member.cuda_dev
            if member.bus_id and index is not None:
                out[(member.host or "", member.bus_id.lower().lstrip("0"))] = index
    return out


def _edge_devices(edge: Connection, buses: dict[tuple[str, str], int]) -> tuple[int | str | None, int | str | None]:
    """The devices in `a[x] -> b[y]`: a device number (2.4 SHM, nvmlDev from 2.18.3) or a busId (2.5-2.18.1)."""
    if edge.from_dev is None or edge.to_dev is None:
        return None, None
    out: list[int | str | None] = []
    for value in (edge.from_dev, edge.to_dev):
        bus = buses.get((edge.host or "", value.lower().lstrip("0")))
        if bus is not None:
            out.append(bus)
        elif value.isdigit() and len(value) <= 3:
            out.append(int(value))
        else:
            out.append(f"busId {value}")
    return out[0], out[1]


# =============================================================================== TOPO005
@rule("TOPO005", "p2p-disabled-on-nvlink", severity="error", needs=["nccl_log"])
def p2p_disabled_on_nvlink(ctx: Context) -> Iterable[Finding]:
    """NCCL WARN `P2P is disabled between NVLINK connected GPUs %d and %d`.

    NCCL sees NVLink between two GPUs but CUDA refuses peer access between them. One finding lists
    every host and GPU pair that printed it.

    Why: NCCL stops with an error here (unless NCCL_IGNORE_DISABLED_P2P=1, which then falls back to
    slow paths). The NCCL message itself says it is probably a hardware issue: an NVLink or NVSwitch
    fault, a fabric manager that is not running, or a driver/virtualisation setting that blocks peer
    access.

    Fix: Check `nvidia-smi topo -p2p n` and `nvidia-smi nvlink --status` on the host, the fabric
    manager (`systemctl status nvidia-fabricmanager`) on NVSwitch systems, and the VM's P2P
    settings; drain the host and open a hardware ticket if links are down. Do not set
    NCCL_IGNORE_DISABLED_P2P to hide it.

    Sources: NCCL src/graph/paths.cc (the WARN text); landscape.md 2.C.10
    """
    reports = [r for r in ctx.case.p2p if r.kind == "disabled_on_nvlink"]
    if not reports:
        return
    pairs: dict[tuple[str, tuple[str, ...]], list[Evidence]] = defaultdict(list)
    for r in reports:
        pairs[(r.host or "", tuple(sorted(r.devices)))].append(r.evidence)
    listing = ", ".join(
        f"{host + ': ' if host else ''}GPU{' <-> GPU'.join(gpus) if gpus else '?'}" for host, gpus in sorted(pairs)
    )
    hosts = sorted({h for h, _ in pairs if h})
    evidence = [e for group in pairs.values() for e in group]
    yield make_finding(
        "TOPO005",
        "error",
        f"P2P is disabled between NVLink-connected GPUs ({listing}): CUDA refuses peer access on links NCCL sees; "
        "probably an NVLink/NVSwitch or fabric manager fault",
        evidence=shown(evidence),
        evidence_count=len(evidence),
        hosts=hosts,
    )


# =============================================================================== TOPO006
@rule("TOPO006", "virtual-topology", severity="warning")
def virtual_topology(ctx: Context) -> Iterable[Finding]:
    """The topology NCCL or nvidia-smi sees hides the real locality (a VM or a container without /sys).

    Fires on `Topology detection : could not read /sys/...` lines, or on the conjunction of a flat
    matrix (every GPU-NIC cell PHB, every GPU pair without NVLink PHB, all GPUs on one NUMA node)
    with a tiny `maxBw` (12 GB/s or less, NCCL's fallback for links it cannot read) in NCCL's own
    topology dump. Either half of the conjunction alone is not enough: a real single-socket host
    whose one NIC hangs off the CPU (PHB to every GPU) has a flat matrix, and a PCIe Gen3 host has
    maxBw 12.

    Why: When the PCI tree is hidden (hypervisor, VMBUS, no /sys in the container), NCCL assumes
    the slowest links and flat distances: it builds fewer channels, turns GPUDirect RDMA off and may
    pick the wrong NIC per GPU.

    Fix: Give NCCL the real topology: mount /sys (read-only) in the container, or use the cloud
    provider's topology file via NCCL_TOPO_FILE (NCCL also loads
    /var/run/nvidia-topologyd/virtualTopology.xml when present); check that the VM exposes the
    GPU/NIC NUMA placement.

    Sources: NCCL docs gpu_troubleshooting.rst ("Topology detection") and env.rst NCCL_TOPO_FILE;
    NCCL src/graph/topo.cc (kvDictPciGen Gen3 fallback) and xml.cc (the could-not-read message);
    nccl-tests#182; NVIDIA/nccl#1008; landscape.md 2.C.12
    """
    case = ctx.case
    sysfs = case.sysfs_unreadable
    tiny = [t for t in case.system_topologies if t.max_bw is not None and t.max_bw <= TINY_MAX_BW]
    flat = [t for t in case.topologies if _flat_matrix(t)]
    facts: list[str] = []
    evidence = [s.evidence for s in sysfs]
    hosts = {s.host for s in sysfs if s.host in ctx.hosts}
    if sysfs:
        files = sorted({s.path.rstrip("/").rsplit("/", 1)[-1] for s in sysfs})
        what = f" ({', '.join(files)})" if files else ""
        facts.append(f"NCCL could not read {_plural(len(sysfs), 'sysfs file')}{what}")
    if tiny and flat:
        tiny_hosts = {t.host for t in tiny if t.host}
        on = f" on {_hosts_text(tiny_hosts)}" if tiny_hosts else ""
        facts.append(
            f"NCCL's topology dump says maxBw {tiny[0].max_bw:g} GB/s{on} and the matrix {_where(flat[0])} is flat "
            "(every GPU-NIC path PHB, one NUMA node)"
        )
        evidence += [t.evidence for t in tiny] + _matrix_evidence(flat[0], flat[0].nics)
        hosts |= tiny_hosts
    if not facts:
        return
    yield make_finding(
        "TOPO006",
        "warning",
        f"the topology looks virtualised or hidden: {'; '.join(facts)}; NCCL then assumes slow, flat links",
        evidence=shown(evidence),
        evidence_count=len(evidence),
        hosts=sorted(hosts),
    )


def _flat_matrix(topo: TopologyMatrix) -> bool:
    if not topo.nics or not topo.gpus:
        return False
    if any(link(topo, g, n) != "PHB" for g in topo.gpus for n in topo.nics):
        return False
    if any(link(topo, a, b) != "PHB" for a, b in _gpu_pairs(topo) if not _nvlink_between(topo, a, b)):
        return False
    numa = {topo.numa_affinity.get(g, "").strip() for g in topo.gpus} - {"", "N/A"}
    cpus = {topo.cpu_affinity.get(g, "").strip() for g in topo.gpus} - {"", "N/A"}
    return len(numa) <= 1 and (bool(numa) or len(cpus) <= 1)


# ================================================================================= CH001
@rule("CH001", "few-channels", severity="warning", needs=["nccl_log"])
def few_channels(ctx: Context) -> Iterable[Finding]:
    """Very few channels for the hardware, or channel counts set by environment.

    Fires on a graph search with one ring/tree channel (`Pattern 4, ..., nChannels 1`) on a host of
    4 or more NVLink GPUs, on 2 or fewer collective channels (`2 coll channels`) on a host of 8
    NVLink GPUs, and on NCCL_MAX_NCHANNELS, NCCL_MIN_NCHANNELS, NCCL_MAX_CTAS and the other channel
    count variables. The hardware comes from the log (GPUs per host; NVLink in NCCL's topology dump,
    graphs, NVLS or indirect P2P lines), the matrix and the platform. Not on PCIe hosts or 2-GPU
    boxes, where one or two channels are normal, nor on multi-host communicators whose hosts have a
    single NIC.

    Why: Each channel is one CUDA block moving one slice of the data; NCCL's bandwidth scales with
    the number of channels until the links are full. One or two channels on NVLink leave most of the
    link bandwidth unused. Channel caps are debug settings that are often left in job scripts.

    Fix: Unset NCCL_MAX_NCHANNELS / NCCL_MIN_NCHANNELS / NCCL_MAX_CTAS (and a stale NCCL_GRAPH_FILE or
    NCCL_TOPO_FILE); if NCCL itself finds few channels, check the topology (TOPO003, TOPO006) and
    re-run with NCCL_DEBUG_SUBSYS=INIT,GRAPH to see the graph search.

    Sources: nccl-tests#182 (nChannels 1 on a hidden topology); NCCL src/init.cc (channel counts
    line) and src/graph/search.cc; NCCL docs env.rst (NCCL_MAX_NCHANNELS, NCCL_MAX_CTAS: debug
    settings); landscape.md 2.H.37
    """
    case = ctx.case
    gpus = _gpus_per_host(ctx)
    nvlink = _nvlink_hosts(ctx)
    nics = _rdma_nics_per_host(case)
    multi = ctx.multi_host

    def rich(host: str | None, min_gpus: int) -> bool:
        return bool(host) and host in nvlink and gpus.get(host or "", 0) >= min_gpus

    def nic_bound(hosts: Iterable[str]) -> bool:
        # one NIC per host caps inter-host channels: few channels are the hardware's limit there
        return multi and all(nics.get(h, 0) <= 1 for h in hosts)

    observed: Counter[str] = Counter()  # graph searches seen -> how many processes printed them
    comms: dict[int, list[str]] = defaultdict(list)  # coll channels -> communicators
    evidence: list[Evidence] = []
    hosts: set[str] = set()
    for g in case.graphs:
        if (
            g.pattern in RING_TREE_PATTERNS
            and 0 < g.nchannels <= FEW_GRAPH_CHANNELS
            and rich(g.host, FEW_GRAPH_CHANNELS_MIN_GPUS)
            and not nic_bound([g.host or ""])
        ):
            kinds = f"type {g.type_intra}/{g.type_inter}" if g.type_intra else f"bw {g.bw_intra:g}"
            observed[f"{RING_TREE_PATTERNS[g.pattern]} graph search nChannels {g.nchannels} ({kinds})"] += 1
            evidence.append(g.evidence)
            hosts.add(g.host or "")
    for comm in case.communicators:
        comm_hosts = sorted({m.host for m in comm.ranks if m.host})
        if comm.channels is None or comm.channels > FEW_COLL_CHANNELS or nic_bound(comm_hosts):
            continue
        poor = [h for h in comm_hosts if rich(h, FEW_COLL_CHANNELS_MIN_GPUS)]
        if poor:
            comms[comm.channels].append(comm.id)
            evidence += [comm.evidence] if comm.evidence else []
            hosts |= set(poor)
    facts = []
    if observed or comms:
        counts = sorted({gpus.get(h, 0) for h in hosts})
        seen = [f"{what}{f' (x{n})' if n > 1 else ''}" for what, n in observed.items()]
        seen += [
            f"{_plural(n, 'coll channel')} in communicator {ids[0]}"
            if len(ids) == 1
            else f"{n} coll channels in {len(ids)} communicators"
            for n, ids in sorted(comms.items())
        ]
        listing = ", ".join(seen)
        facts.append(
            f"{listing} on {_hosts_text(hosts)} ({'/'.join(map(str, counts))} GPUs with NVLink per host, "
            "where NVLink carries many channels)"
        )
        shaping = [e for e in case.env if e.name in CHANNEL_SHAPERS]
        if shaping:
            settings = ", ".join(f"{e.name}={e.value}" for e in shaping)
            facts.append(f"{settings} set by environment (a graph or topology file decides the channels)")
            evidence += [e.evidence for e in shaping]
    overrides = [e for e in case.env if e.name in CHANNEL_OVERRIDES]
    if overrides:
        settings = ", ".join(f"{e.name}={e.value}" for e in overrides)
        used = sorted({c.channels for c in case.communicators if c.channels is not None})
        result = (
            f" (the communicators use {'/'.join(map(str, used))} coll channels)"
            if used and not (observed or comms)
            else ""
        )
        facts.append(f"channel counts set by environment: {settings}{result}")
        evidence += [e.evidence for e in overrides]
        hosts |= {h for e in overrides for h in e.hosts}
    if not facts:
        return
    yield make_finding(
        "CH001",
        "warning",
        f"few channels: {'; '.join(facts)}",
        evidence=shown(evidence),
        evidence_count=len(evidence),
        hosts=sorted(h for h in hosts if h),
    )
