"""Which links of a host run below what they should: the judgement TOPO007, TOPO008 and NET008 report and
the device tree (case/device_tree.py) paints, in one place so that both always agree.

Every comparison stays on one host (one dump, one report) and among peers of the same kind: a minority
below the others is a fault, a whole host built that way is not. Light imports only: the TUI uses it.
"""

from __future__ import annotations

from collections import defaultdict
from typing import NamedTuple

from ncclscope.model import Evidence, IbDevice, NcclTopologyDump, NvlinkGpu, SmiGpu, XmlPciDevice

GT_PER_S = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}  # PCIe generation -> transfer rate per lane
UP_STATE, UP_PHYSICAL = "Active", "LinkUp"


def bus_key(bus_id: str) -> int | None:
    """A PCI bus id in any of its forms (0000:1a:00.0, 00000000:1A:00.0, NCCL's busId 1a000) as one number."""
    digits = "".join(c for c in bus_id if c in "0123456789abcdefABCDEF")
    return int(digits, 16) if digits else None


def smi_link(gen: int | None, width: int | None) -> str:
    speed = f"{GT_PER_S[gen]:g} GT/s" if gen in GT_PER_S else "? GT/s"
    return f"{speed} x{width}" if width is not None else speed


def xml_link(device: XmlPciDevice) -> str:
    speed = f"{device.link_speed:g} GT/s" if device.link_speed is not None else "? GT/s"
    return f"{speed} x{device.link_width}" if device.link_width is not None else speed


# ------------------------------------------------------------------------------------------ PCIe
def slow_pci(dump: NcclTopologyDump) -> list[tuple[list[XmlPciDevice], XmlPciDevice, int]]:
    """Per group of peers in NCCL's dump (GPUs or NICs of one PCI vendor and device id): the devices whose
    link is below the group's best when they are a minority, one peer at the best link, and the group's size."""
    peers: dict[tuple, list[XmlPciDevice]] = defaultdict(list)
    for device in dump.pci:
        if device.kind in ("gpu", "nic") and (device.link_width is not None or device.link_speed is not None):
            peers[device.kind, device.vendor, device.device].append(device)
    out = []
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
        out.append((slow, next(d for d in group if d not in slow), len(group)))
    return out


def smi_groups(gpus: list[SmiGpu]) -> list[list[SmiGpu]]:
    """The GPUs of each `nvidia-smi -q` report (its input stands for its host): the peers slow_smi weighs."""
    by_source: dict[str, list[SmiGpu]] = defaultdict(list)
    for gpu in gpus:
        by_source[gpu.source].append(gpu)
    return list(by_source.values())


def slow_smi(gpus: list[SmiGpu]) -> list[SmiGpu]:
    """The GPUs of one `nvidia-smi -q` below their own maximum width, or generation while they work (P0, or
    where most of their peers run theirs: an idle GPU lowers its generation to save power)."""
    at_max = sum(1 for g in gpus if g.pcie_gen is not None and g.pcie_gen == g.pcie_gen_max)
    slow = []
    for g in gpus:
        narrow = g.width is not None and g.width_max is not None and g.width < g.width_max
        working = g.performance_state == "P0" or at_max * 2 > len(gpus)
        older = g.pcie_gen is not None and g.pcie_gen_max is not None and g.pcie_gen < g.pcie_gen_max
        if narrow or (older and working):
            slow.append(g)
    return slow


# ---------------------------------------------------------------------------------------- NVLink
def nvlink_groups(gpus: list[NvlinkGpu]) -> list[list[NvlinkGpu]]:
    """The GPUs of one `nvidia-smi nvlink -s` of one product: the peers each is compared with."""
    peers: dict[tuple[str, str | None], list[NvlinkGpu]] = defaultdict(list)
    for gpu in gpus:
        peers[gpu.source, gpu.product].append(gpu)
    return list(peers.values())


class NvlinkProblem(NamedTuple):
    gpu: NvlinkGpu
    down: list[int]  # links inactive where the peers have more active ones
    slow: list[int]  # links slower than the others
    most: int  # the peers' active links
    peers: int  # how many peers have them
    fastest: float
    evidence: list[Evidence]
    partial: tuple[NvlinkGpu, ...] = ()  # GPUs whose listing lost lines, left out of the comparison
    lines_lost: int = 0  # link lines this GPU's own listing lost (its inactive ones are down all the same)


def nvlink_problems(group: list[NvlinkGpu], full: int | None = None) -> list[NvlinkProblem]:
    """Fewer active links than the peers (a minority of GPUs, or any number where the best peers have all the
    `full` links of their module: then every link is wired, and one inactive is down), or links slower than the
    others'. nvidia-smi lists every link of a GPU, active or `<inactive>`: a GPU that lists fewer than its peers is
    a paste that lost lines; its `<inactive>` links are still down, and without any it is not compared."""
    listed = max(len(g.links) for g in group)
    whole = [g for g in group if len(g.links) == listed]
    # a partial listing still says which links are `<inactive>`; one without any says nothing
    inactive = [g for g in group if len(g.links) < listed and any(link.speed is None for link in g.links)]
    partial = [g for g in group if len(g.links) < listed and g not in inactive]
    most = max(len(g.active) for g in whole)
    short = [g for g in whole if len(g.active) < most] + inactive
    judged = len(whole) + len(inactive)
    out: list[NvlinkProblem] = []
    if short and (len(short) * 2 <= judged or (full is not None and most == full)) and judged > 1:
        for g in short:
            down = [link for link in g.links if link.speed is None]
            lines = [e for e in [g.evidence, *(d.evidence for d in down)] if e is not None]
            peers = judged - len(short)
            lost = listed - len(g.links)
            out.append(NvlinkProblem(g, [d.link for d in down], [], most, peers, 0.0, lines, tuple(partial), lost))
    speeds = [link.speed for g in group for link in g.active if link.speed is not None]
    fastest = max(speeds, default=0.0)
    for g in group:
        slow = [link for link in g.active if link.speed is not None and link.speed < fastest]
        if slow and len(slow) * 2 <= len(speeds):
            lines = [e for e in [g.evidence, *(x.evidence for x in slow)] if e is not None]
            out.append(NvlinkProblem(g, [], [x.link for x in slow], most, 0, fastest, lines))
    return out


# ------------------------------------------------------------------------------------------ ports
class Port(NamedTuple):
    """A port as ibstat or NCCL's topology dump reports it (the dump says neither state: None)."""

    name: str
    number: int
    state: str | None
    physical: str | None
    rate: float | None  # Gb/s
    layer: str | None  # InfiniBand, Ethernet; "nccl" for the dump's nets, compared among themselves
    via: str
    lines: list[Evidence]


def ib_ports(devices: list[IbDevice]) -> dict[str, list[Port]]:
    """The ports of each report (its input stands for its host)."""
    by_host: dict[str, list[Port]] = defaultdict(list)
    for device in devices:
        for port in device.ports:
            lines = [e for e in (port.evidence, port.rate_evidence) if e is not None]
            by_host[device.source].append(
                Port(device.name, port.port, port.state, port.physical_state, port.rate, port.link_layer,
                     device.tool, lines)
            )  # fmt: skip
    return by_host


def port_problems(ports: list[Port]) -> list[tuple[Port, str]]:
    """Ports of one host that are not up, or run below the best up port of their link layer."""
    best: dict[str | None, float] = defaultdict(float)  # the siblings' rate, per link layer
    for p in ports:
        if p.rate is not None and p.state in (None, UP_STATE):
            best[p.layer] = max(best[p.layer], p.rate)
    out = []
    for p in ports:
        if p.state is not None and p.state != UP_STATE:
            problem = f"state {p.state}" + (f", physical state {p.physical}" if p.physical else "")
        elif p.physical is not None and p.physical != UP_PHYSICAL:
            problem = f"physical state {p.physical}"
        elif p.rate is not None and p.rate < best[p.layer]:
            problem = f"runs at {p.rate:g} Gb/s where its siblings run {best[p.layer]:g}"
        else:
            continue
        out.append((p, problem))
    return out
