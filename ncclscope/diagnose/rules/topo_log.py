"""TOPO004-TOPO006: what the NCCL log says about the GPUs of a host: traffic through host memory,
P2P disabled on NVLink, a topology hidden by a VM or a container."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from ncclscope.case.topology import is_rdma_nic, link
from ncclscope.common.versions import release_tuple
from ncclscope.common.words import plural
from ncclscope.diagnose.rules.context import Context, shown
from ncclscope.diagnose.rules.env_knobs import widens
from ncclscope.diagnose.rules.registry import make_finding, rule
from ncclscope.diagnose.rules.topo_common import (
    PAIRS_SHOWN,
    gpu_pairs,
    hosts_text,
    matrix_evidence,
    nvlink_between,
    order,
    pcie,
    where,
)
from ncclscope.model import Case, Connection, Evidence, Finding, NcclTopologyDump, P2pReport, TopologyMatrix

# NCCL falls back to PCIe Gen3 x16 (12 GB/s) for a link whose speed it cannot read from /sys
# (kvDictPciGen default in src/graph/topo.cc), so a maxBw of 12 or less is what a hidden topology
# looks like -- and also what a real Gen3 host looks like, hence only a corroborating signal.
TINY_MAX_BW = 12.0


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
    hop. NCCL picks SHM when the GPUs are too far apart (beyond PXB, across the CPU sockets or host
    bridges: on Intel and ARM CPUs, and from NCCL 2.23 on most AMD hosts too), when P2P fails between
    them (ACS/IOMMU, GeForce cards, containers without IPC), or when NCCL_P2P_DISABLE / NCCL_P2P_LEVEL
    forbid it.

    Fix: Unset NCCL_P2P_DISABLE and NCCL_P2P_LEVEL if set; check `nvidia-smi topo -m` for the pairs
    (TOPO001) and `nvidia-smi topo -p2p r`; disable PCI ACS in the BIOS (or with setpci) on bare
    metal; in containers share the IPC namespace (`--ipc=host`); place jobs on GPUs of one PCIe
    switch or an NVLink system.

    Sources: NCCL src/transport/p2p.cc and shm.cc; NCCL docs gpu_troubleshooting.rst (PCI ACS);
    sjeaugey in NVIDIA/nccl#766 and NVIDIA/nccl#1086 (GeForce P2P); NVIDIA/nccl#304 and #606 (ACS)
    """
    case = ctx.case
    buses = bus_to_device(case)
    topo = case.topologies[0] if len(case.topologies) == 1 else None
    per_host: dict[str, _HostShm] = defaultdict(_HostShm)
    for edge in case.edges:
        if not edge.transport.upper().startswith("SHM"):
            continue
        src, dst = edge_devices(edge, buses)
        if src is not None and src == dst:
            continue  # two ranks on one GPU: not a pair of GPUs
        per_host[edge.host or ""].add(edge, src, dst, topo)
    shm_lines = {k: n for k, n in case.connections.by_transport.items() if k.upper().startswith("SHM")}
    if shm_lines and not per_host:  # the edges were capped away: the summary still counts every line
        per_host[""].lines = sum(shm_lines.values())
        per_host[""].evidence = [e for k, e in case.connections.examples.items() if k in shm_lines]
    for host, refusals in _p2p_refusals(case).items():
        per_host[host].refusals = refusals
    for matrix in case.p2p_matrices:  # `nvidia-smi topo -p2p r|w|p`: the driver's own answer for each pair
        if matrix.capability in ("nvlink", "atomics"):
            continue  # no NVLink or no atomics says nothing of P2P over PCIe
        refused = sorted(
            {(min(a, b, key=order), max(a, b, key=order), cell) for a, row in matrix.cells.items()
             for b, cell in row.items() if a != b and cell.upper() in P2P_REFUSED}
        )  # fmt: skip
        if refused:
            shm = per_host[ctx.report_host(matrix.source) if len(case.p2p_matrices) > 1 else ""]
            flag = f" {matrix.capability[0]}" if matrix.capability else ""
            command = f"`nvidia-smi topo -p2p{flag}`"
            shm.matrix_refusals.append(
                f"{command} reports P2P {', '.join(f'{a}-{b} {P2P_REFUSED[c.upper()]} ({c})' for a, b, c in refused)}"
            )
            shm.evidence.extend(matrix.evidence[g] for g in sorted({a for a, _, _ in refused}) if g in matrix.evidence)
    causes = [
        f"{e.name}={e.value}"
        for e in case.env
        if e.name in ("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL") and not widens(e.name, e.value)
    ]
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
        place = "the job" if not named else f"host {named[0]}" if len(named) == 1 else f"hosts {hosts_text(named)}"
        yield make_finding(
            "TOPO004",
            "warning",
            f"{place}: {group[0].description(len(hosts) == 1, len(hosts), plural(lines, 'connection line'))}{cause}",
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
    matrix_refusals: list[str] = field(default_factory=list)

    def add(self, edge: Connection, src: int | str | None, dst: int | str | None, topo: TopologyMatrix | None) -> None:
        a = _device_name(src) or f"rank {edge.from_rank}"
        b = _device_name(dst) or f"rank {edge.to_rank}"
        key = (min(a, b, key=order), max(a, b, key=order))
        path = link(topo, a, b) if topo is not None else ""
        self.pairs.setdefault(key, f"{a} -> {b}" + (f" [{pcie(path) or path}]" if path else ""))
        self.ranks.setdefault(key, []).append((edge.from_rank, edge.to_rank))
        self.evidence.append(edge.evidence)
        self.lines += edge.channels

    def signature(self) -> tuple[str, ...]:
        return (
            *sorted(self.pairs.values()),
            *sorted({_refusal_text(r) for r in self.refusals}),
            *self.matrix_refusals,
        )

    def description(self, with_ranks: bool, hosts: int, lines: str) -> str:
        parts = []
        if self.pairs or self.lines:
            names = []
            for key in sorted(self.pairs, key=lambda k: (order(k[0]), order(k[1]))):
                ranks = self.ranks[key][0]
                named = self.pairs[key]
                names.append(
                    f"{named} (ranks {ranks[0]} -> {ranks[1]})" if with_ranks and "rank" not in named else named
                )
            listing = ", ".join(names[:PAIRS_SHOWN])
            if len(names) > PAIRS_SHOWN:
                listing += f", ... ({len(names) - PAIRS_SHOWN} more)"
            per_host = " on each host" if hosts > 1 else ""
            between = f" between {plural(len(names), 'GPU pair')}{per_host}: {listing}" if names else ""
            parts.append(f"GPU traffic goes through host memory (SHM) instead of P2P{between} ({lines})")
        if self.refusals:
            texts = sorted({_refusal_text(r) for r in self.refusals})
            parts.append(f"NCCL reports P2P unavailable: {', '.join(texts[:PAIRS_SHOWN])}")
        if self.matrix_refusals:
            parts.append("; ".join(self.matrix_refusals) + ": NCCL then copies through host memory (SHM)")
        return "; ".join(parts)


# nvidia-smi topo -p2p's legend (nvidia-smi --help-query / `topo -h`): every status but OK and X refuses P2P
P2P_REFUSED = {
    "CNS": "chipset not supported",
    "GNS": "GPU not supported",
    "TNS": "topology not supported",
    "NS": "not supported",
    "DR": "disabled by regkey",
}


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
    gpus: dict[str, set[int]] = defaultdict(set)  # the GPUs each host's processes use
    for proc in case.processes:
        gpus[proc.host or ""].update(proc.cuda_devs)
    for report in case.p2p:
        if report.kind == "disabled_on_nvlink" or report.supported:
            continue  # TOPO005's, or P2P that works
        if report.kind == "intra_node_support" and len(gpus.get(report.host or "", ())) <= 1:
            continue  # one GPU of this host in the job: no pair inside it, whatever intraNodeP2pSupport says
        key = (report.host or "", frozenset(report.devices) or frozenset({report.kind}))
        if key not in seen:  # both GPUs of a pair print it, every rank prints its support
            seen.add(key)
            out[report.host or ""].append(report)
    return out


@dataclass
class Buses:
    """What names the GPU behind a bracket of a connection line."""

    index: dict[tuple[str, str], int]  # (host, busId) -> GPU index
    bracket_hosts: set[str]  # hosts whose brackets hold busIds (bus_brackets)


def bus_to_device(case: Case) -> Buses:
    """(host, busId) -> GPU index, from the communicator init lines, then from the P2P refusals
    (`dev 1(=90)`, the CUDA device and its busId).

    The NVML index (nvmlDev) where printed: it is the numbering of `nvidia-smi topo -m`, while the
    CUDA device number depends on CUDA_VISIBLE_DEVICES.
    """
    out: dict[tuple[str, str], int] = {}
    for comm in case.communicators:
        for member in comm.ranks:
            index = member.nvml_dev if member.nvml_dev is not None else member.cuda_dev
            if member.bus_id and index is not None:
                out[(member.host or "", _bus_key(member.bus_id))] = index
    for report in case.p2p:
        for device in report.devices:
            dev, _, bus = device.partition("(=")
            if bus.endswith(")") and dev.strip().isdigit():
                out.setdefault((report.host or "", _bus_key(bus[:-1])), int(dev))
    return Buses(out, bus_brackets(case))


def _bus_key(bus: str) -> str:
    """A busId as NCCL's lines spell it in any case or padding: `0000B9000`, `b9000`."""
    return bus.lower().lstrip("0")


def bus_brackets(case: Case) -> set[str]:
    """Hosts whose `a[x] -> b[y]` brackets hold busIds (NCCL 2.5-2.18.1), not device numbers: one of
    them has a hex letter (`2[a0]`), or the host's NCCL release is of those. A busId such as `90` is
    then not GPU 90."""
    hosts = {  # (2.18.1's P2P/CUMEM lines print the CUDA device in hex: `a` is device 10 there)
        edge.host or ""
        for edge in case.edges
        if any(v and not v.isdigit() for v in (edge.from_dev, edge.to_dev)) and "CUMEM" not in edge.transport.upper()
    }
    for process in case.processes:
        release = release_tuple(process.nccl_version)
        if release is not None and len(release) == 3 and (2, 5, 0) <= release < (2, 18, 3):
            hosts.add(process.host)
    return hosts


def edge_devices(edge: Connection, buses: Buses) -> tuple[int | str | None, int | str | None]:
    """The devices in `a[x] -> b[y]`: a device number (2.4 SHM, nvmlDev from 2.18.3) or a busId (2.5-2.18.1)."""
    if edge.from_dev is None or edge.to_dev is None:
        return None, None
    host = edge.host or ""
    out: list[int | str | None] = []
    for value in (edge.from_dev, edge.to_dev):
        bus = buses.index.get((host, _bus_key(value)))
        if bus is not None:
            out.append(bus)
        elif value.isdigit() and len(value) <= 3 and host not in buses.bracket_hosts:
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

    Sources: NCCL src/graph/paths.cc (the WARN text); NCCL docs performance_and_tuning.rst
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

    Fires on `Topology detection : could not read /sys/...` lines; on NCCL's topology dump putting GPUs and NICs
    straight under a CPU of NUMA node -1 (unknown), with no PCIe switch between; or on the conjunction of a flat
    matrix (every GPU-NIC cell PHB, every GPU pair without NVLink PHB, all GPUs on one NUMA node)
    with a tiny `maxBw` (12 GB/s or less, NCCL's fallback for links it cannot read) in NCCL's own
    topology dump. Either half of the conjunction alone is not enough: a real single-socket host
    whose one NIC hangs off the CPU (PHB to every GPU) has a flat matrix, and a PCIe Gen3 host has
    maxBw 12. A flat matrix of 4 or more GPUs and 2 or more RDMA NICs is enough by itself: no
    multi-GPU board puts all of them on one host bridge without a PCIe switch.

    Why: When the PCI tree is hidden (hypervisor, VMBUS, no /sys in the container), NCCL assumes
    the slowest links and flat distances: it builds fewer channels, turns GPUDirect RDMA off and may
    pick the wrong NIC per GPU.

    Fix: Give NCCL the real topology: mount /sys (read-only) in the container, or use the cloud
    provider's topology file via NCCL_TOPO_FILE (NCCL also loads
    /var/run/nvidia-topologyd/virtualTopology.xml when present); check that the VM exposes the
    GPU/NIC NUMA placement.

    Sources: NCCL docs gpu_troubleshooting.rst ("Topology detection") and env.rst NCCL_TOPO_FILE;
    NCCL src/graph/topo.cc (kvDictPciGen Gen3 fallback) and xml.cc (the could-not-read message);
    nccl-tests#182; NVIDIA/nccl#1008
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
        facts.append(f"NCCL could not read {plural(len(sysfs), 'sysfs file')}{what}")
    # a flat matrix alone is enough where no real board could be that flat: several GPUs and several RDMA NICs
    # all on one host bridge (no PCIe switch for any of them) is what a hypervisor or container presents
    virtual = [t for t in flat if len(t.gpus) >= FLAT_GPUS and len(_rdma_nics(t)) >= 2]
    if virtual and not (tiny and flat):
        topo = virtual[0]
        facts.append(
            f"the matrix {where(topo)} is flat: {len(topo.gpus)} GPUs and {len(_rdma_nics(topo))} RDMA NICs all PHB"
            " to one another on one NUMA node, with no PCIe switch between any of them, which no multi-GPU board is"
            " built like (a VM or container presents its devices this way)"
        )
        evidence += matrix_evidence(topo, topo.nics)
    for dump in [d for d in case.topology_dumps if _unknown_numa(d)][:1]:
        cpus = [c for c in dump.cpus if c.numa_id == -1]
        direct = [p for p in dump.pci if p.kind in ("gpu", "nic") and p.parent is None]
        gpus, nics = (sum(p.kind == kind for p in direct) for kind in ("gpu", "nic"))
        on = f" of {dump.host}" if dump.host else ""
        facts.append(
            f"NCCL's topology dump{on} puts {plural(gpus, 'GPU')} and {plural(nics, 'NIC')} straight under a CPU of"
            " NUMA node -1 (unknown), with no PCIe switch between them: the locality NCCL pairs GPUs and NICs by is"
            " not there (a VM's emulated root ports present devices this way)"
        )
        evidence += [c.evidence for c in cpus if c.evidence] + [p.evidence for p in direct if p.evidence]
        if dump.host:
            hosts.add(dump.host)
    if tiny and flat:
        tiny_hosts = {t.host for t in tiny if t.host}
        on = f" on {hosts_text(tiny_hosts)}" if tiny_hosts else ""
        facts.append(
            f"NCCL's topology dump says maxBw {tiny[0].max_bw:g} GB/s{on} and the matrix {where(flat[0])} is flat "
            "(every GPU-NIC path PHB, one NUMA node)"
        )
        evidence += [t.evidence for t in tiny] + matrix_evidence(flat[0], flat[0].nics)
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


FLAT_GPUS = 4  # a real host with this many GPUs puts them behind PCIe switches (PIX/PXB cells)


def _unknown_numa(dump: NcclTopologyDump) -> bool:
    """A topology dump whose CPU has NUMA id -1 (NCCL could not tell the node) with a GPU and a NIC attached
    straight to it: no locality left for NCCL to read."""
    if not any(c.numa_id == -1 for c in dump.cpus):
        return False
    direct = {p.kind for p in dump.pci if p.parent is None}
    return {"gpu", "nic"} <= direct


def _rdma_nics(topo: TopologyMatrix) -> list[str]:
    return [n for n in topo.nics if is_rdma_nic(topo.nic_names.get(n, n))]


def _flat_matrix(topo: TopologyMatrix) -> bool:
    if not topo.nics or not topo.gpus:
        return False
    if any(link(topo, g, n) != "PHB" for g in topo.gpus for n in topo.nics):
        return False
    if any(link(topo, a, b) != "PHB" for a, b in gpu_pairs(topo) if not nvlink_between(topo, a, b)):
        return False
    numa = {topo.numa_affinity.get(g, "").strip() for g in topo.gpus} - {"", "N/A"}
    cpus = {topo.cpu_affinity.get(g, "").strip() for g in topo.gpus} - {"", "N/A"}
    return len(numa) <= 1 and (bool(numa) or len(cpus) <= 1)
