"""What the hosts report of themselves: NCCL's topology and graph XML, ibstat, nvidia-smi -q, nvlink, topo -p2p."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ncclscope.model.base import Evidence, Record
from ncclscope.model.factories import new_dict, new_list


class XmlCpu(Record):
    """A CPU (NUMA node) of NCCL's topology XML."""

    numa_id: int | None = None
    arch: str | None = None
    vendor: str | None = None
    family_id: int | None = None
    model_id: int | None = None
    affinity: str | None = None
    host_hash: str | None = None
    evidence: Evidence | None = Field(None, description="The element's line.")


class XmlPciDevice(Record):
    """A PCI device of NCCL's topology XML (a switch, GPU, NIC or other), with the link NCCL read for it."""

    busid: str
    kind: Literal["gpu", "nic", "switch", "nvswitch", "other"]
    class_code: str | None = Field(None, description="PCI class, e.g. 0x060400 (bridge), 0x030200 (3D controller).")
    vendor: str | None = None
    device: str | None = None
    link_speed: float | None = Field(None, description="GT/s as NCCL wrote it (2.5, 5, 8, 16, 32, 64).")
    link_width: int | None = Field(None, description="Lanes, as NCCL wrote them.")
    parent: str | None = Field(None, description="busid of the upstream PCI device; None: attached to its CPU.")
    numa_id: int | None = Field(None, description="The CPU (NUMA node) the device hangs from.")
    evidence: Evidence | None = Field(None, description="The element's line.")


class XmlNvLink(Record):
    target: str = Field(description="busid of the peer GPU or NVSwitch, or a CPU's id.")
    count: int | None = Field(None, description="Links bonded to that target.")
    target_class: str | None = Field(None, description="PCI class of the target (tclass): 0x068000 is an NVSwitch.")


class XmlGpu(Record):
    """A GPU of NCCL's topology XML."""

    busid: str
    dev: int | None = None
    sm: int | None = Field(None, description="Compute capability x 10 (90: Hopper).")
    rank: int | None = None
    gdr: bool | None = None
    nvlinks: list[XmlNvLink] = Field(default_factory=new_list)
    c2c_bw: float | None = Field(None, description="C2C link bandwidth (GB/s per link) where the GPU has one.")
    c2c_count: int | None = None
    evidence: Evidence | None = Field(None, description="The element's line.")


class XmlNet(Record):
    """A network device (an HCA port, a socket interface) of NCCL's topology XML."""

    name: str
    busid: str | None = Field(None, description="The NIC's PCI device, when the XML places it on one.")
    dev: int | None = None
    speed: int | None = Field(None, description="Mb/s as NCCL wrote it.")
    port: int | None = None
    guid: str | None = None
    gdr: bool | None = None
    latency: float | None = None
    max_conn: int | None = None
    coll: bool | None = None
    evidence: Evidence | None = Field(None, description="The element's line.")


class NcclTopologyDump(Record):
    """What NCCL detected on one host (NCCL_TOPO_DUMP_FILE) or was told (an NCCL_TOPO_FILE): CPUs, PCI tree,
    GPUs with their NVLinks, NICs."""

    source: str
    host: str | None = Field(None, description="From the file name of a run's per-host dump (nccl-topo.<host>.xml).")
    version: int | None = None
    host_hash: str | None = None
    cpus: list[XmlCpu] = Field(default_factory=new_list)
    pci: list[XmlPciDevice] = Field(default_factory=new_list)
    gpus: list[XmlGpu] = Field(default_factory=new_list)
    nets: list[XmlNet] = Field(default_factory=new_list)


class XmlGraph(Record):
    """One graph (ring, tree, NVLS ...) of NCCL's graph XML: what NCCL chose and the speeds it expects."""

    id: int | None = None
    pattern: int | None = Field(None, description="1 balanced tree, 2 split tree, 3 tree, 4 ring, 5 NVLS, 6 CollNet.")
    cross_nic: int | None = None
    nchannels: int | None = None
    speed_intra: float | None = Field(None, description="GB/s per channel inside a node.")
    speed_inter: float | None = Field(None, description="GB/s per channel between nodes.")
    latency_inter: float | None = None
    type_intra: str | None = Field(None, description="Path type inside a node: NVL, PIX, PXB, PHB, SYS ...")
    type_inter: str | None = None
    same_channels: int | None = None
    channels: list[list[str]] = Field(
        default_factory=new_list, description="Each channel's devices in order: NET/<dev>, GPU/<dev>:<rank>."
    )
    evidence: Evidence | None = Field(None, description="The element's line.")


class NcclGraphDump(Record):
    """NCCL's graph XML (NCCL_GRAPH_DUMP_FILE)."""

    source: str
    host: str | None = Field(None, description="From the file name of a run's per-host dump (nccl-graph.<host>.xml).")
    version: int | None = None
    graphs: list[XmlGraph] = Field(default_factory=new_list)


class IbPort(Record):
    """One port of a channel adapter, as `ibstat` or `ibv_devinfo` reports it (in ibstat's words)."""

    port: int
    state: str | None = Field(None, description="Down, Initializing, Armed, Active.")
    physical_state: str | None = Field(None, description="Polling, Disabled, LinkUp, LinkErrorRecovery ...")
    rate: float | None = Field(None, description="Gb/s.")
    link_layer: str | None = Field(None, description="InfiniBand or Ethernet (RoCE).")
    port_guid: str | None = None
    evidence: Evidence | None = Field(None, description="The `State:` line (the `Port N:` line until it comes).")
    rate_evidence: Evidence | None = Field(
        None, description="The `Rate:` line (ibv_devinfo -v: `active_speed`, the lane speed times the width)."
    )


class IbDevice(Record):
    """One channel adapter (HCA) as `ibstat`, `ibstatus` or `ibv_devinfo` reports it."""

    name: str
    source: str = Field(description="The input it was read from (neither tool names its host).")
    tool: Literal["ibstat", "ibstatus", "ibv_devinfo"] = "ibstat"
    ca_type: str | None = Field(None, description="ibstat's CA type (MT4129); ibv_devinfo's board_id.")
    firmware: str | None = None
    node_guid: str | None = None
    ports: list[IbPort] = Field(default_factory=new_list)
    evidence: Evidence | None = Field(
        None, description="The `CA 'name'`, `Infiniband device 'name' port N status:` or `hca_id:` line."
    )
    firmware_evidence: Evidence | None = None


class SmiGpu(Record):
    """One GPU as `nvidia-smi -q` reports it: identity, versions, PCIe link (current and max), modes and
    health. Values are as printed (None where the tool printed N/A or nothing)."""

    source: str = Field(description="The input it was read from (nvidia-smi -q does not name its host).")
    bus_id: str = Field(description="PCI bus id in NCCL's form, e.g. 0000:18:00.0 ('' for a fragment that names none).")
    index: int = Field(description="Its place in the report (0 for the first GPU), nvidia-smi's own order.")
    product: str | None = None
    serial: str | None = None
    uuid: str | None = None
    vbios: str | None = None
    driver: str | None = Field(None, description="The report's Driver Version.")
    cuda: str | None = Field(None, description="The report's CUDA Version.")
    pcie_gen: int | None = Field(None, description="PCIe generation now (an idle GPU lowers it to save power).")
    pcie_gen_max: int | None = Field(None, description="The highest generation the GPU and its slot allow.")
    width: int | None = Field(None, description="PCIe link width now (lanes).")
    width_max: int | None = None
    performance_state: str | None = Field(None, description="P0 (full performance) ... P12 (idle).")
    persistence_mode: str | None = None
    mig_mode: str | None = None
    ecc_mode: str | None = None
    uncorrectable_errors: int | None = Field(None, description="Volatile uncorrectable ECC errors, summed.")
    remap_pending: bool | None = Field(None, description="Remapped Rows: Pending (a reset is needed).")
    remap_failed: bool | None = None
    remap_uncorrectable: int | None = Field(
        None, description="Remapped Rows: Uncorrectable Error (rows remapped after uncorrectable errors)."
    )
    remap_evidence: list[Evidence] = Field(default_factory=new_list, description="The Remapped Rows lines read.")
    fabric_state: str | None = Field(None, description="NVSwitch systems: Fabric State (Completed when ready).")
    evidence: Evidence | None = Field(None, description="The `GPU 00000000:18:00.0` line.")
    link_evidence: list[Evidence] = Field(
        default_factory=new_list, description="The PCIe generation and link width lines (Max, Current)."
    )
    version_evidence: list[Evidence] = Field(default_factory=new_list, description="The Driver and VBIOS lines.")


class NvlinkLink(Record):
    """One NVLink of a GPU as `nvidia-smi nvlink -s` reports it."""

    link: int
    speed: float | None = Field(None, description="GB/s per direction; None when inactive.")
    evidence: Evidence | None = None


class NvlinkGpu(Record):
    """One GPU's NVLinks as `nvidia-smi nvlink -s` reports them."""

    source: str = Field(description="The input it was read from (nvidia-smi does not name its host).")
    index: int = Field(description="nvidia-smi's GPU index.")
    product: str | None = None
    uuid: str | None = None
    links: list[NvlinkLink] = Field(default_factory=new_list)
    evidence: Evidence | None = Field(None, description="The `GPU 0: ... (UUID: ...)` line.")
    all_inactive: Evidence | None = Field(
        None, description="`NVML: Unable to retrieve NVLink information as all links are inactive`, in place of links."
    )

    @property
    def active(self) -> list[NvlinkLink]:
        return [link for link in self.links if link.speed is not None]


class P2pMatrix(Record):
    """One `nvidia-smi topo -p2p` matrix: what the driver allows between each pair of GPUs."""

    source: str
    capability: Literal["read", "write", "nvlink", "atomics", "prop"] | None = Field(
        None, description="From the command line before it (`topo -p2p r`); None when the input does not say."
    )
    gpus: list[str] = Field(default_factory=new_list, description="Row names in order: GPU0, GPU1 ...")
    cells: dict[str, dict[str, str]] = Field(
        default_factory=new_dict, description="cells[GPUa][GPUb]: X, OK, CNS, GNS, TNS, NS, DR, U."
    )
    evidence: dict[str, Evidence] = Field(default_factory=new_dict, description="Each GPU's row.")


class KernelEvent(Record):
    """A line of a host's kernel log that matters to collectives: an NVIDIA Xid, an NVSwitch SXid, a GPU fallen off
    the bus, the driver's load banner, a PCIe AER report. Values are as printed."""

    source: str
    kind: Literal["xid", "sxid", "fallen_off_bus", "aer", "driver_load"]
    host: str | None = Field(None, description="The host the log line names (syslog, journalctl, a collector).")
    time: str | None = Field(None, description="The line's time as printed (ctime, ISO, syslog or uptime seconds).")
    at: str | None = Field(
        None, description="Wall-clock time in ISO 8601 where the line gives one with its year (dmesg -T, ISO forms)."
    )
    uptime: float | None = Field(None, description="Seconds since boot (plain dmesg).")
    bus_id: str | None = Field(None, description="PCI bus id of the device, in NCCL's form 0000:9b:00.0.")
    xid: int | None = Field(None, description="Xid or SXid code.")
    caused_by: int | None = Field(None, description="`caused by previous Xid N`: this Xid is the fallout of Xid N.")
    pid: str | None = None
    process: str | None = None
    severity: str | None = Field(None, description="SXid: Fatal or Non-fatal; AER: Corrected, Uncorrected (...).")
    detail: str | None = Field(None, description="The text after the code, or the AER error type.")
    driver_version: str | None = None
    evidence: Evidence
    closing: Evidence | None = Field(
        None, description="The last line of a report printed over several lines (`fallen off the bus and ...`)."
    )


class PciDevice(Record):
    """A device of `lspci -vvv`: its address and class, a bridge's bus range, and its ACS control when printed."""

    source: str
    bus_id: str = Field(description="PCI address in NCCL's form, 0000:80:01.0.")
    device_class: str = Field(description="PCI bridge, 3D controller, Infiniband controller ... as lspci names it.")
    name: str = ""
    secondary: int | None = Field(None, description="A bridge's first bus behind it.")
    subordinate: int | None = Field(None, description="A bridge's last bus behind it.")
    acs: dict[str, bool] = Field(default_factory=new_dict, description="ACSCtl flags (ReqRedir: True when +).")
    evidence: Evidence
    acs_evidence: Evidence | None = None


class RoceGid(Record):
    """One row of `show_gids`: a GID of an RDMA device's port, its IPv4 address (none for link-local), its RoCE
    version and network device."""

    source: str
    device: str
    port: int
    index: int
    gid: str
    ipv4: str | None = None
    version: str | None = Field(None, description="v1 or v2 (RoCE), as printed.")
    netdev: str | None = None
    evidence: Evidence
