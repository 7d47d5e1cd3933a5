"""Rules of the GDR family: GPUDirect RDMA on RDMA networks.

NET/Socket has no GPUDirect RDMA at all, so its connections and hosts are left out here (NET001 covers
them); what counts is NET/IB, NET/IBext, NET/AWS Libfabric, COLLNET ... connections and GDR lines.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from ncclscope.common.words import plural
from ncclscope.diagnose.rules.context import Context, shown
from ncclscope.diagnose.rules.env_knobs import widens
from ncclscope.diagnose.rules.net_common import (
    HostNet,
    host_nets,
    is_socket,
    names,
    net_name,
    over_socket,
    rank_list,
)
from ncclscope.diagnose.rules.registry import make_finding, rule
from ncclscope.model import Connection, Evidence, Finding, GdrReport

# GDR works over one NIC of a rank and not over another: NCCL measured the second NIC too far from the GPU
FAR_NIC_FIX = (
    "Keep each GPU's traffic on the NIC under its own PCIe switch: NCCL_CROSS_NIC=0 (or an NCCL_IB_HCA list per"
    " rail) stops rings from taking a NIC of the other socket; check with `nvidia-smi topo -m` that every GPU has"
    " a NIC at PIX/PXB. Raising NCCL_NET_GDR_LEVEL past the path NCCL measured is not a fix: the traffic would"
    " still cross the CPU."
)
HOSTS_DETAILED = 4  # hosts described one by one in a message before "and N more hosts"
GDR_ENV = ("NCCL_NET_GDR_LEVEL", "NCCL_IB_CUDA_SUPPORT", "NCCL_DMABUF_ENABLE")


@dataclass
class HostGdr:
    """GPUDirect RDMA as one host's lines show it."""

    net: HostNet
    off_edges: list[Connection] = field(default_factory=list)
    on_edges: list[Connection] = field(default_factory=list)
    hca_off: list[GdrReport] = field(default_factory=list)
    hca_on: list[GdrReport] = field(default_factory=list)
    pair_off: list[GdrReport] = field(default_factory=list)
    pair_on: list[GdrReport] = field(default_factory=list)
    flags_off: list[GdrReport] = field(default_factory=list)
    flags_on: list[GdrReport] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.net.name

    @property
    def state(self) -> str | None:
        """on / off / mixed from the best evidence present (connection lines first), None if unknown."""
        for off, on in (
            (self.off_edges, self.on_edges),
            (self.hca_off + self.pair_off, self.hca_on + self.pair_on),
            (self.flags_off, self.flags_on),
        ):
            if off or on:
                return "mixed" if off and on else ("off" if off else "on")
        return None

    @property
    def off_ranks(self) -> list[int]:
        return sorted({e.from_rank for e in self.off_edges if e.from_rank >= 0})

    @property
    def on_ranks(self) -> list[int]:
        return sorted({e.from_rank for e in self.on_edges if e.from_rank >= 0})

    @property
    def far_nic_only(self) -> bool:
        """Every rank without GDR uses it over another NIC: the kernel side works (a missing nvidia-peermem
        would stop it on every NIC), so the NICs without it are too far from the GPU for NCCL_NET_GDR_LEVEL."""
        off = self.off_ranks
        return bool(off) and set(off) <= set(self.on_ranks) and not (self.hca_off or self.flags_off)

    def on_nics(self) -> list[str]:
        return self._nic_names(self.on_edges)

    def off_nics(self) -> list[str]:
        """The NICs of the connections without GDR, and of the HCAs reported without it."""
        return list(
            dict.fromkeys([*self._nic_names(self.off_edges), *(r.hca_name for r in self.hca_off if r.hca_name)])
        )

    def _nic_names(self, edges: list[Connection]) -> list[str]:
        """The NICs of `edges` in NCCL's order: their device names where the host listed them, else NCCL's
        index on NET/IB (said after the word NIC by the message) or the transport's own form."""
        by_index = {d.index: d.name for d in self.net.rdma_devices}
        names = [
            by_index.get(e.nic, str(e.nic)) if net_name(e.transport) == "IB" else f"{e.transport}/{e.nic}"
            for e in sorted(edges, key=lambda e: e.nic if e.nic is not None else -1)
            if e.nic is not None
        ]
        return list(dict.fromkeys(names))

    def off_evidence(self) -> list[Evidence]:
        lines = [e.evidence for e in self.off_edges]
        lines += [m.evidence for m in self.hca_off + self.pair_off + self.flags_off]
        return lines

    def off_count(self) -> int:
        return sum(e.channels for e in self.off_edges) + len(self.hca_off + self.pair_off + self.flags_off)

    def transport(self) -> str:
        for edge in self.off_edges + self.on_edges:
            return f"NET/{net_name(edge.transport)}" if edge.transport.startswith("NET/") else edge.transport
        for report in self.hca_off + self.hca_on:
            if report.network:
                return f"NET/{report.network}"
        name = self.net.rdma_name
        return f"NET/{name}" if name else "the RDMA network"


def host_gdr(ctx: Context) -> dict[str, HostGdr]:
    """GDR evidence of the hosts that use (or only list) an RDMA network; Socket-only hosts are left out.
    Built once per analysis (two rules read it); the entries are read only."""
    return dict(ctx.once("host_gdr", _host_gdr))


def _host_gdr(ctx: Context) -> dict[str, HostGdr]:
    nets = host_nets(ctx)
    out: dict[str, HostGdr] = {}
    decided: dict[str, HostGdr | None] = {}  # per host once: a large job has thousands of edges per host

    def entry(host: str | None) -> HostGdr | None:
        host = host or ""  # a redacted or damaged prefix lost the hostname: its lines still say what GDR does
        if host in decided:
            return decided[host]
        net = nets.get(host) or HostNet(host)
        nets.setdefault(host, net)
        gdr = None if net.uses_socket and not net.uses_rdma else out.setdefault(host, HostGdr(net))
        decided[host] = gdr
        return gdr

    for net in nets.values():
        gdr = entry(net.name) if net.rdma_edges else None
        if gdr is not None:
            for edge in net.rdma_edges:
                (gdr.on_edges if edge.gdr else gdr.off_edges).append(edge)
    for edge in ctx.case.edges:  # lines whose hostname was lost (redacted: ":PID:TID [0] NCCL INFO ...")
        if not edge.host and over_socket(edge.transport) is False:
            gdr = entry("")
            if gdr is not None:
                (gdr.on_edges if edge.gdr else gdr.off_edges).append(edge)
    lists = {
        ("hca", False): "hca_off",
        ("hca", True): "hca_on",
        ("pair", False): "pair_off",
        ("pair", True): "pair_on",
        ("rings", False): "flags_off",
        ("rings", True): "flags_on",
    }
    multi = ctx.multi_host
    for report in ctx.case.gdr:
        if is_socket(report.network):
            continue  # a socket plugin (FastSocket) has no GPUDirect RDMA to turn on
        if report.scope == "rings":
            known = nets.get(report.host or "")
            if known is None or not known.uses_rdma or not (multi or known.rdma_edges):
                continue  # "GDR 0" is printed on Socket and NVLink-only jobs, and on one host, too
        gdr = entry(report.host)
        if gdr is not None:
            getattr(gdr, lists[(report.scope, report.enabled)]).append(report)
    return {h: g for h, g in out.items() if g.state is not None}


def _causes(ctx: Context, hosts: list[HostGdr]) -> tuple[str, list[Evidence]]:
    causes: list[str] = []
    evidence: list[Evidence] = []
    hca_off = [m for h in hosts for m in h.hca_off]
    if hca_off:
        hcas = {r.hca_name for r in hca_off if r.hca_name}
        causes.append(
            f"NCCL reports `GPU Direct RDMA Disabled` for {plural(len(hcas) or len(hca_off), 'HCA')}: no GPUDirect "
            "support in the kernel (nvidia-peermem not loaded, no DMA-BUF)"
        )
    distances = [
        f"distance {r.distance} > {r.limit}"
        for h in hosts
        for r in h.pair_off
        if r.distance is not None and r.limit is not None and r.distance > r.limit
    ]
    if distances:
        causes.append(f"GPU-NIC pairs too far apart for NCCL_NET_GDR_LEVEL ({names(distances, 2)})")
    for name in GDR_ENV:
        for setting in ctx.env(name):
            if widens(name, setting.value):
                continue  # a level past NCCL's cutoff turns GPUDirect RDMA on for more NICs, never off
            if not setting.hosts or {h.name for h in hosts} & set(setting.hosts):
                causes.append(f"{name}={setting.value} is set")
                evidence.append(setting.evidence)
    return "; ".join(causes), evidence


def _describe(h: HostGdr) -> str:
    details = []
    nics = h.off_nics()
    if nics:
        details.append(f"NIC{'s' if len(nics) > 1 else ''} {names(nics, 4)}")
    if h.off_ranks:
        details.append(f"rank{'s' if len(h.off_ranks) > 1 else ''} {rank_list(h.off_ranks)}")
    name = h.name or "the hosts of lines without a hostname"
    return name + (f" ({'; '.join(details)})" if details else "")


def _what(hosts: list[HostGdr]) -> str:
    edges = sum(e.channels for h in hosts for e in h.off_edges)
    flags = sum(len(h.flags_off) for h in hosts)
    if edges:
        return f"{plural(edges, 'connection line')} without /GDRDMA"
    if flags:
        return f"{plural(flags, 'line')} `Connected all rings ... GDR 0`"
    return ""


@rule("GDR001", "gdr-off", severity="warning", needs=["nccl_log"])
def gdr_off(ctx: Context) -> Iterable[Finding]:
    """An RDMA network (InfiniBand, RoCE, EFA, a net plugin; anything but NET/Socket) carries NCCL's
    traffic without GPUDirect RDMA: NET connection lines without `/GDRDMA`, `GPU Direct RDMA Disabled
    for HCA`, `Connected all rings, use ring PXN x GDR 0`. Names the hosts, ranks and NICs, and the
    cause when the log shows it.

    Why: Without GPUDirect RDMA every network transfer is staged through host memory and crosses the
    CPU's PCIe root: inter-node bandwidth drops (sjeaugey in nccl#412: about 16 GB/s where GDR gives
    24 GB/s on the same NIC) and latency grows. The usual causes are the nvidia-peermem kernel module
    not loaded with no DMA-BUF support to replace it, a NIC too far from the GPU for
    NCCL_NET_GDR_LEVEL (default PXB: NIC and GPU behind the same PCIe switch), or NCCL_NET_GDR_LEVEL
    lowered by hand.

    Fix: Load the module and make it persistent: `modprobe nvidia-peermem` (and add it to
    /etc/modules-load.d/), or use the open GPU kernel module with DMA-BUF (NCCL 2.13+, Linux 5.12+);
    check `lsmod | grep peermem` on every host. If the log shows `distance N > M`, the NIC sits too far
    from the GPU: fix the NIC placement or rely on PXN, and remove NCCL_NET_GDR_LEVEL overrides.

    Sources: NCCL docs troubleshooting/gpu_troubleshooting.rst; NCCL
    src/graph/paths.cc (ncclTopoCheckGdr); NCCL src/transport/net_ib/gdr.cc; nccl#1537; nccl#1343;
    nccl#475; nccl#412 (sjeaugey: NIC attached to the CPU gives ~16 GB/s against 24 GB/s with GDR);
    NCCL src/graph/topo.cc (`GPU Direct RDMA %s for HCA`)
    """
    hosts = [h for h in host_gdr(ctx).values() if h.state in ("off", "mixed")]
    if not hosts:
        return
    # GDR matters where traffic crosses hosts: NET lines on the host, or a multi-host job
    # or a communicator larger than one host, whose other ranks run on hosts the inputs lack
    traffic = ctx.multi_host or bool(ctx.ranks_elsewhere) or any(h.off_edges or h.on_edges for h in hosts)
    causes, env_evidence = _causes(ctx, hosts)
    transports = sorted({h.transport() for h in hosts})
    described = "; ".join(_describe(h) for h in hosts[:HOSTS_DETAILED])
    if len(hosts) > HOSTS_DETAILED:
        described += f" and {len(hosts) - HOSTS_DETAILED} more hosts"
    message = f"GPUDirect RDMA is off over {' and '.join(transports)} on {described}"
    what = _what(hosts)
    details = [part for part in (what, causes) if part]
    if details:
        message += ": " + "; ".join(details)
    if not traffic:
        message += "; this job stays on one host, where GPUs do not use the network: it matters once it spans hosts"
    fix = {}
    if all(h.far_nic_only for h in hosts) and not causes:
        h = hosts[0]
        ranks_on = rank_list(h.off_ranks)
        message += (
            f"; rank{'s' if len(h.off_ranks) > 1 else ''} {ranks_on} use{'' if len(h.off_ranks) > 1 else 's'} it"
            f" over NIC{'s' if len(h.on_nics()) > 1 else ''} {names(h.on_nics(), 4)}, so the driver side works:"
            + (" the NICs without it are" if len(h.off_nics()) > 1 else " the NIC without it is")
            + " too far from the GPU"
        )
        fix["fix"] = FAR_NIC_FIX
    evidence = [e for h in hosts for e in h.off_evidence()] + env_evidence
    evidence += [e.evidence for h in hosts if h.far_nic_only for e in h.on_edges[:1]]
    ranks = sorted({r for h in hosts for r in h.off_ranks})
    yield make_finding(
        "GDR001",
        "warning" if traffic else "info",
        message,
        **fix,
        evidence=shown(evidence),
        evidence_count=sum(h.off_count() for h in hosts) + len(env_evidence),
        hosts=[h.name for h in hosts if h.name],
        ranks=ranks,
    )


@rule("GDR002", "gdr-asymmetric", severity="warning", needs=["nccl_log"])
def gdr_asymmetric(ctx: Context) -> Iterable[Finding]:
    """GPUDirect RDMA is on for some hosts or ranks of a job and off for others: one host sends `via
    NET/IB/0/GDRDMA` while another's NET lines lack `/GDRDMA`, or the ranks of one host differ. Names
    the hosts that differ from the majority.

    Why: Hosts built from the same image should behave the same; when GDR is off on one of them, that
    host stages all its network traffic through host memory and every collective runs at its pace.
    The usual cause is a kernel module (nvidia-peermem) missing on one node, or a node whose NICs sit
    elsewhere on the PCIe tree.

    Fix: Compare the hosts named: `lsmod | grep peermem`, the driver and kernel versions, `nvidia-smi
    topo -m` (GPU-NIC distances); load nvidia-peermem (or enable DMA-BUF) on the hosts without GDR and
    drain a node whose topology differs from the others.

    Sources: nccl#897 (sjeaugey: GDRDMA on the send side of one host, not on the receive side of its
    peer: module missing on one node); NCCL src/graph/paths.cc (ncclTopoCheckGdr)
    """
    gdr = host_gdr(ctx)
    states = {name: h.state for name, h in gdr.items()}
    on = [gdr[n] for n, s in states.items() if s == "on"]
    off = [gdr[n] for n, s in states.items() if s == "off"]
    mixed = [gdr[n] for n, s in states.items() if s == "mixed"]
    if not (on or off):  # only hosts whose ranks use GDR over one NIC and not another: GDR001 says why
        mixed = [h for h in mixed if not h.far_nic_only]
    if on and (off or mixed):
        minority_off = len(off) + len(mixed) <= len(on)
        without = off + mixed
        if minority_off:
            message = (
                f"GPUDirect RDMA is off on {'; '.join(_describe(h) for h in without[:HOSTS_DETAILED])}"
                f"{_more(without)} while "
                + (
                    f"{on[0].name} uses it"
                    if len(on) == 1
                    else f"the other {len(on)} hosts ({names(h.name for h in on)}) use it"
                )
            )
        else:
            message = (
                f"GPUDirect RDMA is on only on {names(h.name for h in on)}; the other "
                f"{plural(len(without), 'host')} run without it: "
                f"{'; '.join(_describe(h) for h in without[:HOSTS_DETAILED])}{_more(without)}"
            )
        split = [h for h in mixed if not h.far_nic_only]
        if split:
            message += f"; ranks of {names(h.name for h in split)} differ among themselves"
        evidence = [e for h in without for e in h.off_evidence()]
        evidence += [x.evidence for h in on for x in (h.on_edges[:1] or (h.hca_on + h.pair_on + h.flags_on)[:1])]
        yield make_finding(
            "GDR002",
            "warning",
            message,
            evidence=shown(evidence),
            evidence_count=sum(h.off_count() for h in without) + len(on),
            hosts=[h.name for h in without],
            ranks=sorted({r for h in without for r in h.off_ranks}),
        )
    elif mixed:
        parts = []
        for h in mixed[:HOSTS_DETAILED]:
            only_on = [r for r in h.on_ranks if r not in h.off_ranks]
            text = _describe(h)
            if only_on:
                text += f" while rank{'s' if len(only_on) > 1 else ''} {rank_list(only_on)} use it"
            parts.append(text)
        evidence = [e for h in mixed for e in h.off_evidence()]
        evidence += [x.evidence for h in mixed for x in h.on_edges[:1]]
        yield make_finding(
            "GDR002",
            "warning",
            f"GPUDirect RDMA is on for some ranks and off for others on the same host: "
            f"off on {'; '.join(parts)}{_more(mixed)}",
            evidence=shown(evidence),
            evidence_count=sum(h.off_count() for h in mixed),
            hosts=[h.name for h in mixed],
            ranks=sorted({r for h in mixed for r in h.off_ranks}),
        )


def _more(hosts: list[HostGdr]) -> str:
    return f" and {len(hosts) - HOSTS_DETAILED} more hosts" if len(hosts) > HOSTS_DETAILED else ""
