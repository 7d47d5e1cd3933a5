"""Each host's device tree: CPU (NUMA node) -> PCIe switches -> GPUs and NICs, with each link as NCCL read it
(its topology dump) and as the host reports it (`nvidia-smi -q`, `nvidia-smi nvlink -s`, `ibstat`), the links
that run below what they should in a state of their own, and the GPU <-> NIC paths NCCL chose (its graph dump).

The HTML report and the TUI's Topology screen draw it; the judging is case/links.py's, the same that TOPO007,
TOPO008 and NET008 report, so that what is red here is what the findings explain.
Without a topology dump there is no PCIe tree: the host's own reports are listed flat.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Literal

from ncclscope.case.links import (
    bus_key,
    ib_ports,
    nvlink_groups,
    nvlink_problems,
    port_problems,
    slow_pci,
    slow_smi,
    smi_groups,
    smi_link,
    xml_link,
)
from ncclscope.common.words import number_ranges
from ncclscope.model import Case, IbDevice, NcclGraphDump, NcclTopologyDump, NvlinkGpu, SmiGpu, XmlNet, XmlPciDevice

State = Literal["ok", "degraded", "lowered"]  # lowered: a lower PCIe generation on an idle GPU (power saving)
PATTERNS = {1: "balanced tree", 2: "split tree", 3: "tree", 4: "ring", 5: "NVLS", 6: "CollNet"}


@dataclass
class TreeNode:
    kind: Literal["host", "cpu", "switch", "gpu", "nic", "other"]
    label: str
    link: str = ""  # the PCIe link, "32 GT/s x16" (with its maximum where the host reports one)
    state: State = "ok"
    notes: list[str] = field(default_factory=list)  # NVLinks, ports, NCCL's paths, why the state
    children: list[TreeNode] = field(default_factory=list)

    def walk(self) -> list[TreeNode]:
        return [self, *(n for child in self.children for n in child.walk())]


@dataclass
class HostTree:
    host: str
    sources: list[str]
    root: TreeNode
    paths: list[str] = field(default_factory=list)  # NCCL's graph: which GPU enters and leaves by which NIC

    @property
    def degraded(self) -> list[TreeNode]:
        return [n for n in self.root.walk() if n.state == "degraded"]


def device_trees(case: Case) -> list[HostTree]:
    """One tree per topology dump, or, without one, per host report of GPUs or NICs."""
    judged = _Judged.of(case)
    trees = [_from_dump(dump, _graph_for(dump, case), judged, case) for dump in case.topology_dumps]
    if not trees and (case.smi_gpus or case.ib_devices):
        trees.append(_from_reports(case, judged))
    return trees


@dataclass
class _Judged:
    """The host reports, keyed to join them to NCCL's devices, and what case/links.py finds wrong in them."""

    smi_by_bus: dict[int | None, SmiGpu]
    nvlink_by_uuid: dict[str, NvlinkGpu]
    ib_by_name: dict[str, IbDevice]
    slow_smi: set[int]  # id() of the GPUs below their maximum
    nvlink_down: set[int]  # id() of the GPUs with NVLinks down or slow
    bad_ports: dict[tuple[str, str, int], str]  # (report, NIC, port) -> what is wrong with it

    @classmethod
    def of(cls, case: Case) -> _Judged:
        slow = {id(g) for group in smi_groups(case.smi_gpus) for g in slow_smi(group)}
        down = {id(p.gpu) for group in nvlink_groups(case.nvlink_gpus) for p in nvlink_problems(group)}
        ports = {
            (source, p.name, p.number): why
            for source, group in ib_ports(case.ib_devices).items()
            for p, why in port_problems(group)
        }
        return cls(
            {bus_key(g.bus_id): g for g in case.smi_gpus},
            {g.uuid: g for g in case.nvlink_gpus if g.uuid},
            {d.name: d for d in case.ib_devices},
            slow,
            down,
            ports,
        )


# ----------------------------------------------------------------------------------- from NCCL's dump
def _from_dump(dump: NcclTopologyDump, graph: NcclGraphDump | None, judged: _Judged, case: Case) -> HostTree:
    run_host = case.run.host if case.run is not None and len(case.topology_dumps) == 1 else None
    host = dump.host or run_host or dump.source
    root = TreeNode("host", host)
    cpus: dict[int | None, TreeNode] = {}
    for cpu in dump.cpus:
        what = " ".join(p for p in (cpu.vendor, cpu.arch) if p)
        cpus[cpu.numa_id] = TreeNode("cpu", _cpu_label(cpu.numa_id) + (f" ({what})" if what else ""))
        root.children.append(cpus[cpu.numa_id])
    slow = {d.busid: (full, size - len(group)) for group, full, size in slow_pci(dump) for d in group}
    nodes: dict[str, TreeNode] = {}
    for device in dump.pci:
        nodes[device.busid] = _pci_node(device, dump, slow, judged)
    for device in dump.pci:
        parent = nodes.get(device.parent) if device.parent else None
        if parent is None:
            parent = cpus.get(device.numa_id)
        if parent is None:
            parent = cpus.setdefault(device.numa_id, TreeNode("cpu", _cpu_label(device.numa_id)))
            if parent not in root.children:
                root.children.append(parent)
        parent.children.append(nodes[device.busid])
    # a net on no PCI device (a socket interface, a NIC the PCI tree hides): under the CPU when there is one
    home = next(iter(cpus.values())) if len(cpus) == 1 else root
    for net in (n for n in dump.nets if n.busid is None):
        node = TreeNode("nic", f"NIC {net.name}", notes=["on no PCI device in NCCL's dump"])
        _net_facts(node, net, judged)
        nodes[f"net:{net.dev}"] = node
        home.children.append(node)
    tree = HostTree(host, sorted({dump.source, *(graph.source for graph in [graph] if graph)}), root)
    if graph is not None:
        tree.paths = _paths(graph, dump, nodes)
    return tree


def _pci_node(
    device: XmlPciDevice, dump: NcclTopologyDump, slow: dict[str, tuple[XmlPciDevice, int]], judged: _Judged
) -> TreeNode:
    kind = device.kind if device.kind in ("switch", "gpu", "nic") else "other"
    link = xml_link(device) if device.link_speed is not None else ""
    node = TreeNode(kind, f"{_kind_word(device)} {device.busid}", link=link)  # type: ignore[arg-type]
    if device.busid in slow:
        full, peers = slow[device.busid]
        node.state = "degraded"
        node.notes.append(f"NCCL read {node.link}, where its {peers} peers run {xml_link(full)}")
    if device.kind == "gpu":
        gpu = next((g for g in dump.gpus if g.busid == device.busid), None)
        if gpu is not None:
            node.label = f"GPU {gpu.dev} {device.busid}" if gpu.dev is not None else node.label
            links = sum(link.count or 0 for link in gpu.nvlinks)
            if links:
                node.notes.append(f"{links} NVLinks in NCCL's dump")
            if gpu.gdr is False:
                node.notes.append("GPUDirect RDMA off (gdr=0)")
        smi = judged.smi_by_bus.get(bus_key(device.busid))
        if smi is not None:
            read = node.link
            _smi_facts(node, smi, judged)
            if read and read not in node.link:
                node.notes.insert(0, f"NCCL read {read}")
    elif device.kind == "nic":
        for net in (n for n in dump.nets if n.busid == device.busid):
            _net_facts(node, net, judged)
    return node


def _net_facts(node: TreeNode, net: XmlNet, judged: _Judged) -> None:
    speed = f", {net.speed / 1000:g} Gb/s" if net.speed else ""
    gdr = "" if net.gdr is None else (", GDR" if net.gdr else ", GDR off")
    node.notes.append(f"NET/{net.dev} {net.name} port {net.port}{speed}{gdr}")
    ib = judged.ib_by_name.get(net.name)
    if ib is not None:
        _ib_facts(node, ib, net.port, judged)


def _smi_facts(node: TreeNode, smi: SmiGpu, judged: _Judged) -> None:
    """What `nvidia-smi -q` (and `nvlink -s`) says of this GPU: its link now and at best, its NVLinks."""
    now, top = smi_link(smi.pcie_gen, smi.width), smi_link(smi.pcie_gen_max, smi.width_max)
    node.link = now if now == top else f"{now} (max {top})"
    if smi.product:
        node.label += f" {smi.product}"
    if id(smi) in judged.slow_smi:
        node.state = "degraded"
        node.notes.append(f"{now}, capable of {top} (nvidia-smi -q)")
    elif smi.pcie_gen is not None and smi.pcie_gen_max is not None and smi.pcie_gen < smi.pcie_gen_max:
        if node.state == "ok":
            node.state = "lowered"
        node.notes.append(f"PCIe Gen{smi.pcie_gen} while idle ({smi.performance_state or 'not P0'}): power saving")
    nvlink = judged.nvlink_by_uuid.get(smi.uuid or "")
    if nvlink is not None:
        _nvlink_facts(node, nvlink, judged)


def _nvlink_facts(node: TreeNode, gpu: NvlinkGpu, judged: _Judged) -> None:
    down = [link.link for link in gpu.links if link.speed is None]
    text = f"NVLink: {len(gpu.active)} of {len(gpu.links)} links active"
    node.notes.append(text + (f" (down: {number_ranges(down)})" if down else ""))
    if id(gpu) in judged.nvlink_down:
        node.state = "degraded"


def _ib_facts(node: TreeNode, ib: IbDevice, port_no: int | None, judged: _Judged) -> None:
    for port in ib.ports:
        if port_no is not None and port.port != port_no:
            continue
        rate = f" {port.rate:g} Gb/s" if port.rate else ""
        state = f"{port.state or '?'}/{port.physical_state or '?'}"
        node.notes.append(f"{ib.name} port {port.port}: {state}{rate} ({ib.tool})")
        if (ib.source, ib.name, port.port) in judged.bad_ports:
            node.state = "degraded"


# ------------------------------------------------------------------------ without a dump: the host's reports
def _from_reports(case: Case, judged: _Judged) -> HostTree:
    sources = sorted({g.source for g in case.smi_gpus} | {d.source for d in case.ib_devices})
    root = TreeNode("host", " + ".join(sources), notes=["no NCCL topology dump: GPUs and NICs without their PCIe tree"])
    for smi in case.smi_gpus:
        node = TreeNode("gpu", f"GPU {smi.index} {smi.bus_id}")
        _smi_facts(node, smi, judged)
        root.children.append(node)
    for ib in case.ib_devices:
        node = TreeNode("nic", f"NIC {ib.name}" + (f" ({ib.ca_type})" if ib.ca_type else ""))
        _ib_facts(node, ib, None, judged)
        root.children.append(node)
    return HostTree(root.label, sources, root)


# ------------------------------------------------------------------------------------- NCCL's paths
def _graph_for(dump: NcclTopologyDump, case: Case) -> NcclGraphDump | None:
    """The graph dump of the same host: named alike by the runner, or the only one beside the only dump."""
    if dump.host:
        return next((g for g in case.graph_dumps if g.host == dump.host), None)
    if len(case.topology_dumps) == 1 and len(case.graph_dumps) == 1:
        return case.graph_dumps[0]
    return None


def _paths(graph: NcclGraphDump, dump: NcclTopologyDump, nodes: dict[str, TreeNode]) -> list[str]:
    """Per graph with network hops: which NIC feeds which GPU and which GPU sends out by which NIC."""
    nets = {n.dev: n for n in dump.nets}
    gpus = {g.dev: g for g in dump.gpus}
    out: list[str] = []
    hops: dict[str, dict[str, None]] = defaultdict(dict)  # busid -> its hops, in order, once
    for g in graph.graphs:
        uses: dict[tuple[str, str, str], list[int]] = defaultdict(list)  # (way, NET/n, GPU/n:rank) -> channels
        for c, channel in enumerate(g.channels):
            if len(channel) < 3:
                continue
            for net_ref, gpu_ref, way in ((channel[0], channel[1], "in"), (channel[-1], channel[-2], "out")):
                if net_ref.startswith("NET/") and gpu_ref.startswith("GPU/"):
                    uses[(way, net_ref, gpu_ref)].append(c)
        for (way, net_ref, gpu_ref), channels in sorted(uses.items(), key=lambda kv: (kv[1][0], kv[0][0])):
            net = nets.get(_int(net_ref[4:]))
            gpu = gpus.get(_int(gpu_ref[4:].split(":")[0]))
            nic = f"{net_ref} ({net.name})" if net else net_ref
            gpu_name = f"GPU {gpu.dev}" if gpu else gpu_ref
            arrow = f"{nic} -> {gpu_name}" if way == "in" else f"{gpu_name} -> {nic}"
            pattern = PATTERNS.get(g.pattern or 0, f"pattern {g.pattern}")
            out.append(f"{pattern}: {arrow} (channels {number_ranges(channels)})")
            net_key = (net.busid or f"net:{net.dev}") if net else None
            for busid in (gpu.busid if gpu else None, net_key):
                if busid in nodes:
                    hops[busid][arrow] = None
    for busid, arrows in hops.items():
        nodes[busid].notes.append(f"NCCL's paths: {'; '.join(arrows)}")
    return out


# ------------------------------------------------------------------------------------------- helpers
def _cpu_label(numa_id: int | None) -> str:
    # -1: NCCL could not read the node (a VM without /sys/devices/system/node, as on our H100 VM)
    return f"CPU / NUMA node {numa_id}" if numa_id is not None and numa_id >= 0 else "CPU (NUMA node unknown to NCCL)"


def _kind_word(device: XmlPciDevice) -> str:
    return {"switch": "PCIe switch", "gpu": "GPU", "nic": "NIC", "nvswitch": "NVSwitch"}.get(device.kind, "PCI device")


def _int(text: str) -> int | None:
    return int(text) if text.isdigit() else None
