"""What the NET and GDR rules share: the network each host uses, naming hosts, ranks and peers."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from ncclscope.case.facts import without_port
from ncclscope.common.words import number_ranges
from ncclscope.diagnose.rules.context import Context
from ncclscope.model import Connection, Evidence, NcclMessage, NetDevice, Origin

NAMES_SHOWN = 6  # host, NIC and peer names quoted in one message before "and N more"
GROUPS_LIMIT = 10  # findings of one rule before the rest are folded into one


# ---------------------------------------------------------------------------------- helpers
def names(items: Iterable[object], limit: int = NAMES_SHOWN) -> str:
    """'a, b, c and 7 more', keeping the first-seen order and dropping repeats."""
    seen: list[str] = []
    for item in items:
        text = str(item)
        if text and text not in seen:
            seen.append(text)
    if len(seen) <= limit:
        return ", ".join(seen)
    return f"{', '.join(seen[:limit])} and {len(seen) - limit} more"


def rank_list(ranks: Iterable[int]) -> str:
    """'0-3, 7, 9-10' for a set of ranks."""
    return number_ranges((r for r in ranks if r is not None and r >= 0), ", ")


def unique_warnings(ctx: Context) -> list[NcclMessage]:
    """case.warnings with each input line once (a WARN of a handled family can be recorded twice)."""
    best: dict[tuple[str, int], NcclMessage] = {}
    for w in ctx.case.warnings:
        key = (w.evidence.source, w.evidence.line)
        known = best.get(key)
        if known is None or (not known.fields and w.fields):
            best[key] = w
    return sorted(best.values(), key=lambda w: (w.evidence.source, w.evidence.line))


def net_name(transport: str) -> str:
    """'NET/IB' -> 'IB', 'NET/AWS Libfabric' -> 'AWS Libfabric', 'COLLNET/SHARP' -> 'SHARP'."""
    return transport.split("/", 1)[1] if "/" in transport else transport


def is_socket(name: str | None) -> bool:
    """NCCL's Socket transport, or a net plugin that moves data over TCP sockets too (FastSocket)."""
    return (name or "").strip().lower().endswith("socket")


def network_family(name: str) -> str:
    """One name per network: aws-ofi-nccl calls its network "AWS Libfabric" (older releases "Libfabric"),
    and a process that logged only its NET/OFI set-up is known as "OFI"."""
    low = name.strip().lower()
    return "OFI" if low == "ofi" or "libfabric" in low else name.strip()


NET_TRANSPORTS = ("NET/", "COLLNET/")  # a connection's transport prefix when it goes over the network


def is_net_edge(edge: Connection) -> bool:
    return edge.transport.startswith(NET_TRANSPORTS)


@lru_cache(maxsize=256)  # a job has a few transports and thousands of edges
def over_socket(transport: str) -> bool | None:
    """Whether a connection of `transport` goes over sockets (NET/Socket, a socket plugin); None when it is no
    NET connection."""
    return is_socket(net_name(transport)) if transport.startswith(NET_TRANSPORTS) else None


@dataclass
class HostNet:
    """What one host's lines say about its network."""

    name: str
    networks: list[str] = field(default_factory=list)
    socket_edges: list[Connection] = field(default_factory=list)
    rdma_edges: list[Connection] = field(default_factory=list)
    devices: list[NetDevice] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)
    network_lines: list[tuple[str, Evidence]] = field(default_factory=list)  # each process's `Using network X`

    @property
    def socket_network_lines(self) -> list[Evidence]:
        """The `Using network Socket` lines: where the log itself says that NCCL chose sockets."""
        return [line for name, line in self.network_lines if is_socket(name)]

    @property
    def socket_devices(self) -> list[NetDevice]:
        return [d for d in self.devices if d.transport == "Socket"]

    @property
    def rdma_devices(self) -> list[NetDevice]:
        return [d for d in self.devices if d.transport != "Socket"]

    @property
    def uses_rdma(self) -> bool:
        return bool(self.rdma_edges) or any(not is_socket(n) for n in self.networks)

    @property
    def uses_socket(self) -> bool:
        if self.socket_edges or any(is_socket(n) for n in self.networks):
            return True
        # older logs print no "Using network" line: a NET/Socket listing with no RDMA device means Socket
        return bool(self.socket_devices) and not self.rdma_devices and not self.uses_rdma

    @property
    def rdma_name(self) -> str | None:
        for edge in self.rdma_edges:
            return net_name(edge.transport)
        for name in self.networks:
            if not is_socket(name):
                return name
        return None


def host_nets(ctx: Context) -> dict[str, HostNet]:
    """Per host (by name, in order): networks, NET connection edges and NET devices. Built once per
    analysis; each caller gets its own dict (host_gdr adds to it) of the shared entries, which are read only."""
    return dict(ctx.once("host_nets", _host_nets))


def _host_nets(ctx: Context) -> dict[str, HostNet]:
    out: dict[str, HostNet] = {}
    for host in ctx.case.hosts:
        if host.name:
            out[host.name] = HostNet(host.name, networks=list(host.networks), ranks=list(host.ranks))
    for edge in ctx.case.edges:
        socket = over_socket(edge.transport)
        if not edge.host or socket is None:
            continue
        entry = out.get(edge.host) or out.setdefault(edge.host, HostNet(edge.host))
        (entry.socket_edges if socket else entry.rdma_edges).append(edge)
    for dev in ctx.case.net_devices:
        if dev.host:
            out.setdefault(dev.host, HostNet(dev.host)).devices.append(dev)
    for proc in ctx.case.processes:
        line = proc.evidence.get("network")
        if proc.host in out and proc.network and line is not None:
            out[proc.host].network_lines.append((proc.network, line))
    return out


def rank_index(ctx: Context) -> dict[tuple[str | None, int | None, int | None], int]:
    """(host, pid, cudaDev) -> rank, from the communicators' Init lines (the largest communicator wins,
    so ranks are global ranks rather than ranks of split communicators). Built once per analysis; read only."""
    return ctx.once("rank_index", _rank_index)


def _rank_index(ctx: Context) -> dict[tuple[str | None, int | None, int | None], int]:
    index: dict[tuple[str | None, int | None, int | None], int] = {}
    for comm in sorted(ctx.case.communicators, key=lambda c: -(c.nranks or len(c.ranks))):
        for member in comm.ranks:
            if member.rank >= 0 and member.cuda_dev is not None:
                index.setdefault((member.host, member.pid, member.cuda_dev), member.rank)
    for proc in ctx.case.processes:  # one rank per process: the device index is not needed
        if len(proc.ranks) == 1:
            index.setdefault((proc.host, proc.pid, None), proc.ranks[0])
    return index


def rank_of(index: dict[tuple[str | None, int | None, int | None], int], msg: NcclMessage | Origin) -> int | None:
    rank = index.get((msg.host, msg.pid, msg.cuda_dev))
    return rank if rank is not None else index.get((msg.host, msg.pid, None))


def strip_port(address: str | None) -> str:
    """'10.1.2.3<51207>' -> '10.1.2.3'."""
    return without_port(address) or ""


def address_hosts(ctx: Context) -> dict[str, str]:
    """IP address -> host, from the interfaces NCCL listed (bootstrap, NET/IB out-of-band, NET/Socket), to
    name peers. An address seen on several hosts (docker0's 172.17.0.1 ...) names no host."""
    seen: dict[str, set[str]] = defaultdict(set)
    for use in ctx.case.interfaces:
        if use.host and use.address:
            seen[use.address].add(use.host)
    return {address: next(iter(hosts)) for address, hosts in seen.items() if len(hosts) == 1}


def peer_label(peer: str, addresses: dict[str, str], hosts: Sequence[str]) -> tuple[str, str | None]:
    """A peer printed as 'addr<port>' -> (label, host it belongs to when known)."""
    bare = strip_port(peer)
    host = addresses.get(bare)
    if host is None:
        short = bare.split(".", 1)[0]
        if short in hosts and not bare.replace(".", "").isdigit():
            host = short
    if host and host != bare:
        return f"{bare} ({host})", host
    return bare, host
