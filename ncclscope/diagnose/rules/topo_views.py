"""TOPO009: NCCL's view of a host disagrees with the host's own.

NCCL's view: its topology dump (where it placed each NIC in the PCI tree, whether it allows GPUDirect
RDMA on each net) and its log (P2P it could not enable, GPU pairs it connects through host memory).
The host's view: `nvidia-smi topo -m` (the GPU-NIC paths) and `nvidia-smi topo -p2p` (P2P the driver
allows). Neither view names its host; they are paired when the inputs hold one host, or when a host's
name is in the other input's file name (as `ncclscope run` names its captures).
"""

from __future__ import annotations

from collections.abc import Iterable

from ncclscope.diagnose.rules.context import Context, shown
from ncclscope.diagnose.rules.registry import make_finding, rule
from ncclscope.diagnose.rules.topo_links import DUMP
from ncclscope.diagnose.rules.topo_log import bus_to_device, edge_devices
from ncclscope.model import Case, Evidence, Finding, NcclTopologyDump, P2pMatrix, TopologyMatrix

CLOSE = ("PIX", "PXB")  # through PCIe switches only, not the CPU: where GPUDirect RDMA pays
P2P_SETTINGS = ("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL")


def _paired(dump: NcclTopologyDump, matrices: list[TopologyMatrix], dumps: int) -> TopologyMatrix | None:
    """The `topo -m` matrix of the dump's host: the only one when each side has one, else by name."""
    if len(matrices) == 1 and dumps == 1:
        return matrices[0]
    if dump.host:  # a run's per-host dump: the matrix whose file names the same host
        found = [m for m in matrices if dump.host in m.source.rsplit("/", 1)[-1]]
        return found[0] if len(found) == 1 else None
    stem = dump.source.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    for part in stem.replace("_", "-").split("-"):
        if len(part) > 2 and part not in ("nccl", "topo", "dump", "xml"):
            found = [m for m in matrices if part in m.source]
            if len(found) == 1:
                return found[0]
    return None


def _switches(busid: str, dump: NcclTopologyDump) -> list[str]:
    """The PCI devices above `busid` in NCCL's tree, nearest first (switches; the CPU is not one)."""
    by_bus = {d.busid: d for d in dump.pci}
    out: list[str] = []
    device = by_bus.get(busid)
    while device is not None and device.parent is not None and device.parent not in out:
        out.append(device.parent)
        device = by_bus.get(device.parent)
    return out


def _dump_views(case: Case) -> Iterable[tuple[str, str, list[Evidence]]]:
    """(host, what disagrees, evidence) from the topology dumps against `topo -m`."""
    for dump in case.topology_dumps:
        matrix = _paired(dump, case.topologies, len(case.topology_dumps))
        if matrix is None or not matrix.nics:
            continue
        gpu_bus = {f"GPU{g.dev}": g.busid for g in dump.gpus if g.dev is not None}
        for nic in matrix.nics:
            name = matrix.nic_names.get(nic, nic)
            net = next((n for n in dump.nets if n.name.split(":")[0] == name and n.busid), None)
            if net is None or net.busid is None:
                continue
            close = [g for g in matrix.gpus if matrix.links.get(g, {}).get(nic) in CLOSE]
            if not close:
                continue
            nic_switches = set(_switches(net.busid, dump))
            apart = [g for g in close if g in gpu_bus and not nic_switches & set(_switches(gpu_bus[g], dump))]
            lines = [e for e in (net.evidence,) if e is not None]
            host = dump.source
            if apart:
                cells = ", ".join(f"{g}-{nic} {matrix.links[g][nic]}" for g in apart)
                yield (
                    host,
                    (
                        f"NCCL places {name} ({net.busid}) on no PCIe switch shared with "
                        f"{', '.join(apart)} ({DUMP}: the path goes through the CPU), while `nvidia-smi topo -m` "
                        f"shows them on one switch ({cells})"
                    ),
                    lines,
                )
            if net.gdr is False:
                cells = ", ".join(f"{g}-{nic} {matrix.links[g][nic]}" for g in close)
                yield (
                    host,
                    (
                        f'NCCL\'s topology dump has GPUDirect RDMA off for {name} (gdr="0"), while '
                        f"`nvidia-smi topo -m` shows it next to {', '.join(close)} ({cells})"
                    ),
                    lines,
                )


def _p2p_views(ctx: Context) -> Iterable[tuple[str, str, list[Evidence]]]:
    """(host, what disagrees, evidence) from `topo -p2p` against NCCL's log."""
    case = ctx.case
    if not case.p2p_matrices or any(e.name in P2P_SETTINGS for e in case.env):
        return  # P2P turned off on purpose: not a misdetection (TOPO004 names the setting)
    hosts = sorted({h.name for h in case.hosts})
    buses = bus_to_device(case)
    for matrix in case.p2p_matrices:
        if matrix.capability not in (None, "read", "write", "prop"):
            continue  # NVLink or atomics only: says nothing about P2P over PCIe
        host = _matrix_host(matrix, hosts)
        if host is None:
            continue
        refused: dict[tuple[int, int], list[Evidence]] = {}
        for edge in case.edges:
            if (edge.host or "") != host or not edge.transport.upper().startswith("SHM"):
                continue
            src, dst = edge_devices(edge, buses)
            if isinstance(src, int) and isinstance(dst, int) and src != dst:
                refused.setdefault((min(src, dst), max(src, dst)), []).append(edge.evidence)
        for (a, b), lines in sorted(refused.items()):
            cell = matrix.cells.get(f"GPU{a}", {}).get(f"GPU{b}")
            if cell != "OK":
                continue
            row = matrix.evidence.get(f"GPU{a}")
            what = f"P2P {matrix.capability}" if matrix.capability else "P2P"
            yield (
                host,
                (
                    f"NCCL connects GPU{a} and GPU{b} through host memory (SHM), while `nvidia-smi topo -p2p` allows "
                    f"{what} between them (OK)"
                ),
                [*lines[:2], *([row] if row else [])],
            )


def _matrix_host(matrix: P2pMatrix, hosts: list[str]) -> str | None:
    if len(hosts) == 1:
        return hosts[0]
    named = [h for h in hosts if h and h in matrix.source]
    return named[0] if len(named) == 1 else None


@rule("TOPO009", "topology-misdetected", severity="warning", needs=["host_views"])
def topology_misdetected(ctx: Context) -> Iterable[Finding]:
    """NCCL's view of a host disagrees with the host's own: a NIC that NCCL's topology dump places on no
    PCIe switch shared with a GPU while `nvidia-smi topo -m` shows them on one switch (PIX/PXB); a net
    whose GPUDirect RDMA flag is off in the dump while `topo -m` shows it next to a GPU; a GPU pair NCCL
    connects through host memory (SHM) while `nvidia-smi topo -p2p` allows P2P between them. Both views
    are named.

    Why: NCCL plans channels, GPU-NIC pairs and GPUDirect RDMA from what it detects. A virtual machine or
    container that hides the PCIe switches (the hypervisor shows a flat bus), an ACS or IOMMU setting,
    or a missing kernel module makes NCCL see the NIC across the CPU: it then reads through host memory
    or picks a far NIC, at a fraction of the bandwidth, with nothing in the log but the paths it chose.

    Fix: On a VM, give NCCL the real topology with NCCL_TOPO_FILE (clouds publish one per instance type);
    on bare metal check that the NIC and GPU sit under one switch in `lspci -tv`, that ACS is off on it,
    and that nvidia-peermem (or dma-buf) is loaded for GPUDirect RDMA; for P2P check
    `nvidia-smi topo -p2p r` against NCCL_P2P_LEVEL and the IOMMU setting.

    Sources: NCCL docs env.rst (NCCL_TOPO_FILE, NCCL_P2P_LEVEL, NCCL_NET_GDR_LEVEL) and
    troubleshooting.rst (PCI Access Control Services, virtual machines); NCCL src/graph/topo.cc and
    paths.cc (PCI tree, P2P and GDR decisions); NVIDIA nvidia-smi documentation (topo -m, topo -p2p)
    """
    for host, message, evidence in [*_dump_views(ctx.case), *_p2p_views(ctx)]:
        yield make_finding(
            "TOPO009", "warning", f"on {host}: {message}", evidence=shown(evidence),
            evidence_count=len(evidence), hosts=[host],
        )  # fmt: skip
