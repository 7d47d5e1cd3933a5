"""Rules of the NET family (see ../shared/knowledge/rule-catalog.md): which network NCCL uses between
hosts, why RDMA is missing, odd interfaces and NIC lists, and network errors at run time.

The helpers at the top (what each host uses, host/rank naming, the de-duplicated WARN list) are
shared with the GDR rules.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ncclscope.model import Connection, Evidence, Finding, NcclMessage, NetDevice, Severity
from ncclscope.rules.context import EVIDENCE_SHOWN, Context, shown
from ncclscope.rules.registry import make_finding, rule

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
    values = sorted({r for r in ranks if r is not None and r >= 0})
    parts: list[str] = []
    start = prev = None
    for value in values:
        if start is None:
            start = prev = value
        elif value == prev + 1:  # type: ignore[operator]
            prev = value
        else:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
            start = prev = value
    if start is not None:
        parts.append(str(start) if start == prev else f"{start}-{prev}")
    return ", ".join(parts)


def plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


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
    return (name or "").strip().lower() == "socket"


def is_net_edge(edge: Connection) -> bool:
    return edge.transport.startswith(("NET/", "COLLNET/"))


@dataclass
class HostNet:
    """What one host's lines say about its network."""

    name: str
    networks: list[str] = field(default_factory=list)
    socket_edges: list[Connection] = field(default_factory=list)
    rdma_edges: list[Connection] = field(default_factory=list)
    devices: list[NetDevice] = field(default_factory=list)
    ranks: list[int] = field(default_factory=list)

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
    """Per host (by name, in order): networks, NET connection edges and NET devices."""
    out: dict[str, HostNet] = {}
    for host in ctx.case.hosts:
        if host.name:
            out[host.name] = HostNet(host.name, networks=list(host.networks), ranks=list(host.ranks))
    for edge in ctx.case.edges:
        if not edge.host or not is_net_edge(edge):
            continue
        entry = out.setdefault(edge.host, HostNet(edge.host))
        (entry.socket_edges if is_socket(net_name(edge.transport)) else entry.rdma_edges).append(edge)
    for dev in ctx.case.net_devices:
        if dev.host:
            out.setdefault(dev.host, HostNet(dev.host)).devices.append(dev)
    return out


def rank_index(ctx: Context) -> dict[tuple[str | None, int | None, int | None], int]:
    """(host, pid, cudaDev) -> rank, from the communicators' Init lines (the largest communicator wins,
    so ranks are global ranks rather than ranks of split communicators)."""
    index: dict[tuple[str | None, int | None, int | None], int] = {}
    for comm in sorted(ctx.case.communicators, key=lambda c: -(c.nranks or len(c.ranks))):
        for member in comm.ranks:
            if member.rank >= 0 and member.cuda_dev is not None:
                index.setdefault((member.host, member.pid, member.cuda_dev), member.rank)
    for proc in ctx.case.processes:  # one rank per process: the device index is not needed
        if len(proc.ranks) == 1:
            index.setdefault((proc.host, proc.pid, None), proc.ranks[0])
    return index


def rank_of(index: dict[tuple[str | None, int | None, int | None], int], msg: NcclMessage) -> int | None:
    rank = index.get((msg.host, msg.pid, msg.cuda_dev))
    return rank if rank is not None else index.get((msg.host, msg.pid, None))


OOB_RE = re.compile(r"\bOOB\s+([^\s:]+):(\S+?)(?:<\d+>)?\s*$")
ADDRESS_RE = re.compile(r"^(.*?)(?:<\d+>)?$")


def strip_port(address: str | None) -> str:
    return ADDRESS_RE.match(address or "").group(1) if address else ""  # type: ignore[union-attr]


def oob_of(dev: NetDevice) -> tuple[str, str] | None:
    """The out-of-band interface and address printed at the end of a `NET/IB : Using` line."""
    match = OOB_RE.search(dev.evidence.text)
    return (match.group(1), match.group(2)) if match else None


def address_hosts(ctx: Context) -> dict[str, str]:
    """IP address -> host, from the NET/IB OOB and NET/Socket addresses (to name peers). An address seen
    on several hosts (docker0's 172.17.0.1 ...) names no host."""
    seen: dict[str, set[str]] = defaultdict(set)
    for dev in ctx.case.net_devices:
        if not dev.host:
            continue
        if dev.transport == "Socket" and dev.address:
            seen[strip_port(dev.address)].add(dev.host)
        oob = oob_of(dev)
        if oob:
            seen[strip_port(oob[1])].add(dev.host)
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


# ------------------------------------------------------------------------------------ NET001
@rule("NET001", "socket-transport", severity="error", needs=["nccl_log"])
def socket_transport(ctx: Context) -> Iterable[Finding]:
    """Collective traffic between hosts goes over TCP sockets (NET/Socket) instead of an RDMA network:
    connection lines `via NET/Socket/...`, `Using network Socket`. Error when the job spans more than
    one host; info on a single host, where GPUs talk over NVLink/PCIe or shared memory and the NET
    transport carries nothing.

    Why: NET/Socket moves every byte through the kernel's TCP stack and host memory: a few GB/s at
    best, against 25-50 GB/s per NIC for InfiniBand/RoCE/EFA with GPUDirect RDMA. A multi-host job on
    sockets runs many times slower, and large jobs time out. NCCL picks sockets silently when it finds
    no usable RDMA device (container without /dev/infiniband or libibverbs, missing net plugin) or
    when it is told to (NCCL_IB_DISABLE=1, NCCL_NET=Socket).

    Fix: Make the RDMA devices usable on every host: install rdma-core (libibverbs1, librdmacm1 and
    the provider libraries) in the image, pass /dev/infiniband (or run the container with the host's
    RDMA devices), check `ibstat`/`ibv_devinfo`; on AWS install aws-ofi-nccl and check that the log
    says `Selected provider is efa`; remove NCCL_IB_DISABLE=1 / NCCL_NET=Socket. Re-run and check for
    `NET/IB : Using [0]mlx5_...` and connection lines `via NET/IB/.../GDRDMA`.

    Sources: landscape.md 2.A.1; stas00/ml-engineering network/debug/README.md ("NCCL with docker
    containers"); NCCL docs env.rst (NCCL_IB_DISABLE, NCCL_NET); nccl-tests#100 and #82 (libibverbs
    WARN then NET/Socket); nccl-tests#284 (2-node timeout on NET/Socket); formats.md B.6, B.7, B.14
    """
    nets = host_nets(ctx)
    socket_hosts = [h for h in nets.values() if h.uses_socket]
    if not socket_hosts:
        return
    lines = ctx.case.connections.by_transport.get("NET/Socket", 0)
    evidence: list[Evidence] = []
    for h in socket_hosts:
        evidence.extend(d.evidence for d in h.socket_devices)
        evidence.extend(e.evidence for e in h.socket_edges)
    example = ctx.case.connections.examples.get("NET/Socket")
    if example is not None:
        evidence.append(example)
    ranks = sorted({e.from_rank for h in socket_hosts for e in h.socket_edges if e.from_rank >= 0})
    if not ranks:
        ranks = sorted({r for h in socket_hosts for r in h.ranks})
    interfaces = _interfaces(socket_hosts)
    device_lines = {(d.evidence.source, d.evidence.line) for h in socket_hosts for d in h.socket_devices}
    count = sum(e.channels for h in socket_hosts for e in h.socket_edges) + len(device_lines)
    hosts = [h.name for h in socket_hosts]
    if ctx.multi_host:
        if ctx.hosts and len(hosts) == len(ctx.hosts):
            where = f"every host ({names(hosts)}{interfaces})"
        elif ctx.hosts:
            where = f"{names(hosts)} ({len(hosts)} of {len(ctx.hosts)} hosts{interfaces})"
        else:
            where = f"{names(hosts)}" + (f" ({interfaces[2:]})" if interfaces else "")
        spread = f"the job spans {len(ctx.hosts)} hosts" if len(ctx.hosts) > 1 else "the job spans several nodes"
        traffic = f"{plural(lines, 'connection line')} via NET/Socket" if lines else "`Using network Socket`"
        yield make_finding(
            "NET001",
            "error",
            f"Inter-host traffic goes over TCP sockets (NET/Socket) instead of RDMA on {where}: {spread}; {traffic}",
            evidence=shown(evidence),
            evidence_count=count,
            hosts=hosts,
            ranks=ranks,
        )
    else:
        yield make_finding(
            "NET001",
            "info",
            f"NCCL selected NET/Socket on {names(hosts)}"
            + (f" ({interfaces[2:]})" if interfaces else "")
            + ", a single-host job: traffic between its "
            "GPUs does not use the NET transport, so this costs nothing here, but a run over several hosts "
            "would be limited to TCP speed",
            evidence=shown(evidence),
            evidence_count=count,
            hosts=hosts,
            ranks=ranks,
            explanation=(
                "NCCL uses its NET transport (sockets or RDMA) only between hosts; inside one host GPUs talk "
                "over NVLink/PCIe (P2P) or shared memory, so the network NCCL picked does not matter for this run."
            ),
            fix=(
                "Nothing to change for single-host runs. Before scaling out, check that every host has an RDMA "
                "NIC NCCL can use (`NET/IB : Using [0]mlx5_...` or a net plugin in the log)."
            ),
        )


def _interfaces(hosts: Sequence[HostNet]) -> str:
    per_host = {h.name: [d.name for d in h.socket_devices] for h in hosts if h.socket_devices}
    if not per_host:
        return ""
    lists = {tuple(v) for v in per_host.values()}
    if len(lists) == 1:
        only = next(iter(lists))
        return f"; interface{'s' if len(only) > 1 else ''} {names(only)}"
    return "; interfaces " + "; ".join(f"{host}: {names(v)}" for host, v in list(per_host.items())[:NAMES_SHOWN])


# ------------------------------------------------------------------------------------ NET002
LIBIBVERBS_RE = re.compile(r"(Failed to open|Count not open|Could not open)\s+libibverbs", re.I)
NO_DEVICE_RE = re.compile(r"NET/IB\s*:\s*No device found", re.I)
NO_IP_RE = re.compile(r"NET/IB\s*:\s*No IP interface found", re.I)
OFI_FAILED_RE = re.compile(r"NET/OFI\s+(Initializing plugin failed|Couldn't open a fabric provider.*)", re.I)
PLUGIN_CAUSE = "the net plugin failed to initialize"
OFI_CAUSE = "aws-ofi-nccl could not initialize"
PREFIX_HOST_RE = re.compile(r"(?:^|\s)([^\s:\[\]]+):\d+:\d+ ")


@rule("NET002", "rdma-unavailable", severity="warning", needs=["nccl_log"])
def rdma_unavailable(ctx: Context) -> Iterable[Finding]:
    """The RDMA path could not be used on a host of a multi-host job: `Failed to open libibverbs`,
    `NET/IB : No device found`, a net plugin that failed to initialize (aws-ofi-nccl `Initializing plugin
    failed`, `Couldn't open a fabric provider`, `Failed to initialize NET plugin`), or InfiniBand
    switched off by NCCL_IB_DISABLE=1 / NCCL_NET=Socket. Warning; error when the job then runs over
    NET/Socket across hosts (NET001). Probes that fail on a host which still ends up on an RDMA
    network are not reported, and neither are missing IB devices on single-host jobs.

    Why: These lines are the cause of a socket fallback: a container image without rdma-core, RDMA
    devices not passed to the container, a net plugin missing or failing to find its fabric, or a
    variable left from a debugging session. NCCL then carries inter-host traffic over TCP.

    Fix: Install rdma-core (libibverbs1, librdmacm1, ibverbs-providers) in the image and pass
    /dev/infiniband (docker `--device=/dev/infiniband`, Kubernetes RDMA device plugin); check `ibstat` and
    `ibv_devinfo` on the host and inside the container; for EFA install aws-ofi-nccl and libfabric with
    the efa provider and check FI_PROVIDER; remove NCCL_IB_DISABLE=1 and NCCL_NET=Socket.

    Sources: landscape.md 2.A.1 and 2.A.2; stas00/ml-engineering network/debug/README.md;
    nccl-tests#100 and #82 (`Failed to open libibverbs.so[.1]` then NET/Socket); NCCL
    src/misc/ibvsymbols.cc (WARN in 2.3-2.10, INFO from 2.11); NCCL docs env.rst (NCCL_IB_DISABLE,
    NCCL_NET); aws-ofi-nccl include/nccl_ofi_log.h (formats.md B.8); formats.md B.3, B.4
    """
    nets = host_nets(ctx)
    causes: dict[str, list[tuple[str, Evidence | None]]] = defaultdict(list)
    details: dict[str, list[str]] = defaultdict(list)  # cause -> the messages quoted for it

    def add(cause: str, host: str | None, evidence: Evidence | None, detail: str = "") -> None:
        causes[cause].append((host or "", evidence))
        if detail and detail not in details[cause]:
            details[cause].append(detail)

    seen_lines: set[tuple[str, int]] = set()
    for msg in [*unique_warnings(ctx), *ctx.case.messages]:
        key = (msg.evidence.source, msg.evidence.line)
        if key in seen_lines:
            continue
        text = msg.message.strip()
        cause, detail = None, ""
        if LIBIBVERBS_RE.search(text):
            cause = "libibverbs could not be loaded"
        elif msg.family == "plugin_init_failed":
            cause, detail = PLUGIN_CAUSE, text
        elif OFI_FAILED_RE.search(text):
            cause, detail = OFI_CAUSE, OFI_FAILED_RE.search(text).group(1)  # type: ignore[union-attr]
        elif NO_DEVICE_RE.search(text):
            cause = "NET/IB found no device"
        elif NO_IP_RE.search(text):
            cause = "NET/IB found no IP interface"
        if cause:
            seen_lines.add(key)
            add(cause, msg.host, msg.evidence, detail)
    for source in ctx.case.sources:  # INFO form (2.11+) that the parser may not know
        for line in source.unrecognized:
            if LIBIBVERBS_RE.search(line.text):
                match = PREFIX_HOST_RE.search(line.text)
                add(
                    "libibverbs could not be loaded",
                    match.group(1) if match else None,
                    Evidence(source=source.path, line=line.line, text=line.text),
                )
    for setting in ctx.env("NCCL_IB_DISABLE"):
        if setting.value.strip() not in ("", "0"):
            for host in setting.hosts or [""]:
                add(f"NCCL_IB_DISABLE={setting.value} switches InfiniBand off", host, setting.evidence)
    for setting in ctx.env("NCCL_NET"):
        if is_socket(setting.value):
            for host in setting.hosts or [""]:
                add(f"NCCL_NET={setting.value} forces TCP sockets", host, setting.evidence)

    multi = ctx.multi_host
    kept: dict[str, list[tuple[str, Evidence | None]]] = {}
    for cause, items in causes.items():
        plugin_cause = cause in (PLUGIN_CAUSE, OFI_CAUSE)
        if not multi and not plugin_cause:
            continue  # one host: no inter-host traffic, nothing lost
        items = [
            (host, ev)
            for host, ev in items
            if not (host in nets and nets[host].uses_rdma and not nets[host].uses_socket)
        ]
        if items:
            kept[cause] = items
    if not kept:
        return
    socket_hosts = [h.name for h in nets.values() if h.uses_socket]
    severity: Severity = "error" if multi and socket_hosts else "warning"
    hosts = sorted({host for items in kept.values() for host, _ in items if host})
    parts = []
    for cause, items in kept.items():
        lines = len({(ev.source, ev.line) for _, ev in items if ev is not None})
        where = ""
        cause_hosts = {host for host, _ in items if host}
        if len(kept) > 1 and cause_hosts and cause_hosts != set(hosts):
            where = f" on {names(sorted(cause_hosts))}"
        quoted = details.get(cause, [])
        # the most specific message first: "Couldn't open a fabric provider ..." explains "plugin failed"
        quoted = sorted(quoted, key=lambda d: ("failed" in d.lower(), len(quoted) and -len(d)))[:1]
        label = f"{cause} (`{quoted[0]}`)" if quoted else cause
        parts.append(f"{label}{where} ({plural(lines, 'line')})" if lines > 1 else f"{label}{where}")
    evidence = [ev for items in kept.values() for _, ev in items if ev is not None]
    message = f"RDMA networking is unavailable on {names(hosts) if hosts else 'this job'}: {'; '.join(parts)}"
    fallback = [h for h in socket_hosts if not hosts or h in hosts]
    if fallback:
        message += f"; NCCL fell back to TCP sockets (NET/Socket) on {names(fallback)}"
    yield make_finding(
        "NET002",
        severity,
        message,
        evidence=shown(evidence),
        evidence_count=len({(e.source, e.line) for e in evidence}),
        hosts=hosts,
    )


# ------------------------------------------------------------------------------------ NET003
SUSPICIOUS_INTERFACES: list[tuple[re.Pattern[str], str, str]] = [
    (re.compile(r"^lo\d*$"), "loopback", "the loopback interface, unreachable from other hosts"),
    (re.compile(r"^(docker\d*|br-[0-9a-f]{6,})$"), "Docker bridge", "a Docker bridge, local to each host"),
    (re.compile(r"^veth"), "veth", "a container's virtual ethernet pair, local to one host"),
    (re.compile(r"^virbr\d*"), "libvirt bridge", "a libvirt VM bridge, local to each host"),
    (re.compile(r"^(lxcbr|lxdbr)\d*"), "LXC bridge", "an LXC/LXD bridge, local to each host"),
    (re.compile(r"^(tailscale\d*|wg\d+|wg-|tun\d+|zt)"), "VPN", "a VPN tunnel: slow, and not always routable"),
    (re.compile(r"^(cni\d+|flannel\.|cali|vxlan\.|kube-ipvs)"), "overlay", "a Kubernetes overlay interface"),
]
MANY_INTERFACES = 3


def _ifname_matches(iface: str, selector: str) -> bool:
    """NCCL_SOCKET_IFNAME entries are prefixes (`eth` matches eth0), or exact names after `=`."""
    return iface == selector or iface.startswith(selector)


def interface_kind(name: str) -> tuple[str, str] | None:
    for pattern, kind, description in SUSPICIOUS_INTERFACES:
        if pattern.search(name):
            return kind, description
    return None


@rule("NET003", "suspicious-interface", severity="warning", needs=["nccl_log"])
def suspicious_interface(ctx: Context) -> Iterable[Finding]:
    """The bootstrap, out-of-band or NET/Socket interface is one that does not connect hosts: `lo`,
    `docker*`, `veth*`, `virbr*`, `lxcbr*`, a VPN (`tailscale*`, `wg*`) or an overlay; or NET/Socket
    spreads its traffic over many interfaces because NCCL_SOCKET_IFNAME is not set.

    Why: NCCL's bootstrap and its socket transport use the interface NCCL picked on each host. Local
    bridges and loopback carry the same address on every host (docker0 is 172.17.0.1 everywhere), so
    peers connect to themselves or nowhere: init hangs, or fails with connection refused/timeouts.
    VPN tunnels work but are slow and add latency; several interfaces listed without
    NCCL_SOCKET_IFNAME means NCCL stripes traffic over all of them, including ones that may not route
    between hosts.

    Fix: Set NCCL_SOCKET_IFNAME to the data interface that connects the hosts, e.g.
    `NCCL_SOCKET_IFNAME=eth0` (exact name with `=eth0`, exclusions with `^docker,lo`), and use the same
    interface for the launcher (`OMPI_MCA_btl_tcp_if_include`, GLOO_SOCKET_IFNAME for PyTorch).

    Sources: landscape.md 2.A.4; NCCL docs troubleshooting/networking_troubleshooting.rst and
    runtime_and_mpi_issues.rst; NCCL docs env.rst (NCCL_SOCKET_IFNAME); nccl#913 (hang on veth
    interfaces); nccl#1837; nccl#210; formats.md B.2, B.4, B.6
    """
    ifname = ctx.env("NCCL_SOCKET_IFNAME")
    # (kind, role) -> host -> interface -> evidence lines
    found: dict[tuple[str, str], dict[str, dict[str, list[Evidence]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list))
    )
    addresses: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))  # iface -> address -> hosts

    def note(role: str, host: str, iface: str, evidence: Evidence | None, address: str | None = None) -> None:
        kind = interface_kind(iface)
        if kind is None:
            return
        lines = found[(kind[0], role)][host][iface]
        if evidence is not None and evidence not in lines:
            lines.append(evidence)
        if address:
            addresses[iface][strip_port(address)].add(host)

    oob_lines: dict[tuple[str, str], Evidence] = {}
    for dev in ctx.case.net_devices:
        if dev.transport == "Socket":
            note("NET/Socket", dev.host, dev.name, dev.evidence, dev.address)
        oob = oob_of(dev)
        if oob:
            oob_lines.setdefault((dev.host, oob[0]), dev.evidence)
            note("bootstrap/OOB", dev.host, oob[0], dev.evidence, oob[1])
    for proc in ctx.case.processes:
        if proc.host and proc.bootstrap_interface:
            note(
                "bootstrap/OOB",
                proc.host,
                proc.bootstrap_interface,
                oob_lines.get((proc.host, proc.bootstrap_interface)),
            )
    selected: dict[str, list[Evidence]] = defaultdict(list)  # suspicious interfaces NCCL_SOCKET_IFNAME names
    for setting in ifname:
        for part in setting.value.split(","):
            part = part.strip().lstrip("=")
            if part and not part.startswith("^") and interface_kind(part):
                selected[part].append(setting.evidence)

    single = "" if ctx.multi_host else "; harmless while the job stays on one host"
    unset = "" if ifname else "; NCCL_SOCKET_IFNAME is not set"
    role_text = {"NET/Socket": "NET/Socket uses", "bootstrap/OOB": "bootstrap/out-of-band traffic uses"}
    covered: set[str] = set()
    groups = sorted(found.items(), key=lambda item: (item[0][1] != "bootstrap/OOB", item[0]))
    for (kind, role), per_host in groups:
        hosts = [h for h in per_host if h]
        ifaces = list(dict.fromkeys(i for h in per_host.values() for i in h))
        evidence = [e for h in per_host.values() for lines in h.values() for e in lines]
        description = next(d for p, k, d in SUSPICIOUS_INTERFACES if k == kind)
        where = f" on {names(hosts)}" if hosts else ""
        notes = [
            f"{iface} has the same address {addr} on {names(sorted(hs))}"
            for iface in ifaces
            for addr, hs in addresses.get(iface, {}).items()
            if len(hs) > 1
        ]
        chosen = [i for i in ifaces if any(_ifname_matches(i, sel) for sel in selected)]
        if chosen:
            notes.append(f"NCCL_SOCKET_IFNAME selects {names(chosen)}")
            evidence.extend(
                e for sel, lines in selected.items() if any(_ifname_matches(i, sel) for i in chosen) for e in lines
            )
            covered.update(sel for sel in selected if any(_ifname_matches(i, sel) for i in chosen))
        others = ""
        if role == "NET/Socket":
            rest = [
                d.name
                for d in ctx.case.net_devices
                if d.transport == "Socket" and d.host in per_host and d.name not in ifaces
            ]
            others = f" besides {names(dict.fromkeys(rest))}" if rest else ""
        message = f"{role_text[role]} {names(ifaces)} ({description}){where}{others}"
        message += "".join(f"; {n}" for n in notes) + unset + single
        yield make_finding(
            "NET003",
            "warning",
            message,
            evidence=shown(evidence),
            evidence_count=len({(e.source, e.line) for e in evidence}),
            hosts=hosts,
        )
    for iface, lines in selected.items():
        if iface in covered:
            continue
        what = interface_kind(iface)
        hosts = sorted({h for s in ifname for h in s.hosts if s.evidence in lines})
        yield make_finding(
            "NET003",
            "warning",
            f"NCCL_SOCKET_IFNAME selects {iface} ({what[1] if what else 'an unusual interface'})"
            + (f" on {names(hosts)}" if hosts else "")
            + single,
            evidence=shown(lines),
            evidence_count=len({(e.source, e.line) for e in lines}),
            hosts=hosts,
        )
    if not ifname:
        many: dict[str, list[NetDevice]] = defaultdict(list)
        for dev in ctx.case.net_devices:
            if dev.transport == "Socket":
                many[dev.host].append(dev)
        crowded = {h: devs for h, devs in many.items() if len(devs) >= MANY_INTERFACES}
        if crowded:
            counts = sorted({len(v) for v in crowded.values()})
            listing = names(dict.fromkeys(d.name for devs in crowded.values() for d in devs))
            evidence = [d.evidence for devs in crowded.values() for d in devs]
            yield make_finding(
                "NET003",
                "warning",
                f"NET/Socket on {names(h for h in crowded if h) or 'this job'} spreads traffic over "
                f"{'/'.join(map(str, counts))} interfaces ({listing}) because NCCL_SOCKET_IFNAME is not set{single}",
                evidence=shown(evidence),
                evidence_count=len({(e.source, e.line) for e in evidence}),
                hosts=[h for h in crowded if h],
            )


# ------------------------------------------------------------------------------------ NET004
INCOMPATIBLE_RE = re.compile(r"incompatible devices", re.I)


@rule("NET004", "mixed-net-devices", severity="warning", needs=["nccl_log"])
def mixed_net_devices(ctx: Context) -> Iterable[Finding]:
    """The NET/IB device list of a host mixes link layers (InfiniBand and RoCE), or includes bonded
    front-end ports (`mlx5_bond_*`) next to the rail NICs.

    Why: NCCL spreads its channels over every NIC of the list. A RoCE port cannot talk to an IB port
    (`NET/IB : Attempted to connect incompatible devices`), and a bonded management/front-end port is
    usually slower and on another network than the GPU rails, so rings that land on it are slow or
    cannot connect.

    Fix: Give NCCL only the rail NICs of one link layer: `NCCL_IB_HCA=^mlx5_bond_0` to exclude a
    port, or an explicit list `NCCL_IB_HCA==mlx5_0,mlx5_1,...` (same list on every host); check with
    `ibv_devinfo` which ports are IB and which are Ethernet.

    Sources: landscape.md 2.A.3; stas00/ml-engineering network/debug/README.md; NCCL
    src/transport/net_ib (`Attempted to connect incompatible devices ... Try selecting NICs of only one
    link type using NCCL_IB_HCA`); NCCL docs env.rst (NCCL_IB_HCA); formats.md B.4
    """
    per_host: dict[str, list[NetDevice]] = defaultdict(list)
    for dev in ctx.case.net_devices:
        if dev.transport == "IB":
            per_host[dev.host].append(dev)
    signatures: dict[str, list[str]] = defaultdict(list)
    evidence_of: dict[str, list[Evidence]] = defaultdict(list)
    for host, devices in per_host.items():
        devices = sorted(devices, key=lambda d: d.index)
        layers: dict[str, list[str]] = defaultdict(list)
        for dev in devices:
            if dev.link_layer in ("IB", "RoCE"):
                layers[dev.link_layer].append(dev.name)
        bonded = [d.name for d in devices if "bond" in d.name or any("bond" in m for m in d.members)]
        rails = [d.name for d in devices if d.name not in bonded]
        parts = []
        if len(layers) > 1:
            parts.append("mixes link layers: " + " and ".join(f"{ll} ({names(n)})" for ll, n in layers.items()))
        if bonded and rails:
            parts.append(
                f"includes bonded port{'s' if len(bonded) > 1 else ''} {names(bonded)} next to rail NICs {names(rails)}"
            )
        if parts:
            signature = "; ".join(parts)
            signatures[signature].append(host)
            evidence_of[signature].append(devices[0].evidence)
    if not signatures:
        return
    failures = [w for w in unique_warnings(ctx) if INCOMPATIBLE_RE.search(w.message)]
    for signature, hosts in signatures.items():
        evidence = list(evidence_of[signature])
        fails = [w for w in failures if w.host in hosts or not w.host]
        evidence.extend(w.evidence for w in fails)
        message = f"The NET/IB device list on {names(hosts) or 'this job'} {signature}"
        if fails:
            message += f"; NCCL then failed to connect incompatible devices ({plural(len(fails), 'line')})"
        yield make_finding(
            "NET004",
            "warning",
            message,
            evidence=shown(evidence),
            evidence_count=len({(e.source, e.line) for e in evidence}),
            hosts=[h for h in hosts if h],
        )


# ------------------------------------------------------------------------------------ NET005
IBV_WC_STATUS: dict[int, tuple[str, str]] = {
    0: ("SUCCESS", "success"),
    1: ("LOC_LEN_ERR", "local length error: the two sides disagree on a message size"),
    2: ("LOC_QP_OP_ERR", "local queue-pair operation error"),
    3: ("LOC_EEC_OP_ERR", "local EE context operation error"),
    4: (
        "LOC_PROT_ERR",
        "local protection error: a buffer's memory registration is wrong or gone (GPUDirect/DMA-BUF, ACS/IOMMU)",
    ),
    5: (
        "WR_FLUSH_ERR",
        "work request flushed: the connection was already in error, usually a consequence of an earlier "
        "error on this host or its peer",
    ),
    6: ("MW_BIND_ERR", "memory window bind error"),
    7: ("BAD_RESP_ERR", "bad response from the peer"),
    8: ("LOC_ACCESS_ERR", "local access error: memory registration or permissions"),
    9: ("REM_INV_REQ_ERR", "remote invalid request: the peer rejected the request"),
    10: (
        "REM_ACCESS_ERR",
        "remote access error: the peer rejected the RDMA access (its memory registration, or a peer that restarted)",
    ),
    11: ("REM_OP_ERR", "remote operation error on the peer"),
    12: (
        "RETRY_EXC_ERR",
        "transport retry counter exceeded: the peer stopped acknowledging, a link or connectivity problem "
        "(port down or flapping, routing, the peer died)",
    ),
    13: (
        "RNR_RETRY_EXC_ERR",
        "receiver-not-ready retries exceeded: the peer did not post receive buffers in time (stalled or dead peer)",
    ),
    14: ("LOC_RDD_VIOL_ERR", "local RDD violation"),
    15: ("REM_INV_RD_REQ_ERR", "remote invalid RD request"),
    16: ("REM_ABORT_ERR", "remote abort: the peer aborted the operation"),
    17: ("INV_EECN_ERR", "invalid EE context number"),
    18: ("INV_EEC_STATE_ERR", "invalid EE context state"),
    19: ("FATAL_ERR", "fatal adapter error"),
    20: ("RESP_TIMEOUT_ERR", "response timeout"),
    21: ("GENERAL_ERR", "general error"),
}
COMPLETION_RE = re.compile(r"Got completion", re.I)
STATUS_RE = re.compile(r"with\s+(?:error\s+|status=\s*(?:IBV_WC_\w+\()?)(\d+)")
PEER_RE = re.compile(r"from peer\s+(\S+)")
HCA_RE = re.compile(r"\bhca\s+(\S+)\s*$")
VENDOR_RE = re.compile(r"vendor[ _]err[= ]\s*(\d+)")


@rule("NET005", "ib-completion-error", severity="error", needs=["nccl_log"])
def ib_completion_error(ctx: Context) -> Iterable[Finding]:
    """An InfiniBand/RoCE work request completed with an error: `NET/IB : Got completion from peer ...
    with error/status N`. The status is decoded (ibv_wc_status: 12 RETRY_EXC_ERR, 5 WR_FLUSH_ERR,
    4 LOC_PROT_ERR, 13 RNR_RETRY_EXC_ERR, ...), and the NIC, the peer and the host/rank that saw it
    are named; identical errors (status, host, NIC) are counted together.

    Why: A completion error breaks the connection: NCCL aborts the communicator and the job fails or
    hangs. Status 12 (retry exceeded) means the peer stopped acknowledging: a link that is down or
    flapping, bad routing or GID selection on RoCE, or a dead peer. Status 5 (flushed) follows an
    earlier error and is not the cause itself. Protection/access errors (4, 8, 10) point at memory
    registration (GPUDirect RDMA, DMA-BUF, ACS/IOMMU).

    Fix: For status 12/13 check the NIC named and the peer's: `ibstat` (State Active, Physical state
    LinkUp, expected rate), `rdma statistic` (local_ack_timeout_err, rnr_nak_retry_err,
    packet_seq_err), `perfquery -x` (SymbolErrorCounter, LinkDownedCounter), `ethtool -S` for RoCE
    PFC/ECN counters, `ibdiagnet` on the fabric; drain the host if one NIC keeps failing. For 5 look for
    the first error before it. For 4/8/10 check ACS (disable it on PCIe switches or enable ATS in VMs)
    and nvidia-peermem/DMA-BUF.

    Sources: landscape.md 2.G.31 and 2.C.11; NCCL docs troubleshooting/networking_troubleshooting.rst;
    nccl#1405; nccl#1814; nccl#1664 (kiskra-nvidia: completion errors "often indicate connectivity
    problems"); formats.md B.18 (ibv_wc_status)
    """
    index = rank_index(ctx)
    addresses = address_hosts(ctx)
    groups: dict[tuple[int | None, str, str], list[NcclMessage]] = defaultdict(list)
    for w in unique_warnings(ctx):
        if not COMPLETION_RE.search(w.message):
            continue
        status = _int(w.fields.get("status"))
        if status is None:
            found_status = STATUS_RE.search(w.message)
            status = int(found_status.group(1)) if found_status else None
        nic = HCA_RE.search(w.message)
        groups[(status, w.host or "", nic.group(1) if nic else "")].append(w)
    order = sorted(groups.items(), key=lambda item: (item[0][0] == 5, item[0][1], item[0][2], str(item[0][0])))
    for (status, host, hca), items in order:
        name, meaning = IBV_WC_STATUS.get(status, ("", "")) if status is not None else ("", "")
        label = f"status {status} {name}".rstrip() if status is not None else "error (status not printed)"
        peers = []
        for w in items:
            found = PEER_RE.search(w.message)
            peer = w.fields.get("peer") or (found.group(1) if found else None)
            if peer:
                peers.append(peer_label(str(peer), addresses, ctx.hosts)[0])
        ranks = sorted({r for r in (rank_of(index, w) for w in items) if r is not None})
        vendors = sorted({m.group(1) for m in (VENDOR_RE.search(w.message) for w in items) if m})
        where = host or "an unnamed host"
        if hca:
            where += f" NIC {hca}"
        if ranks:
            where += f" (rank{'s' if len(ranks) > 1 else ''} {rank_list(ranks)})"
        message = f"IB completion {label} on {where}"
        if peers:
            message += f" from peer {names(peers)}"
        if vendors:
            message += f", vendor err {names(vendors)}"
        if len(items) > 1:
            message += f" ({len(items)} times)"
        if meaning:
            message += f": {meaning}"
        yield make_finding(
            "NET005",
            "error",
            message,
            evidence=shown(w.evidence for w in items),
            evidence_count=len(items),
            hosts=[host] if host else [],
            ranks=ranks,
        )


def _int(value: object) -> int | None:
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


# ------------------------------------------------------------------------------------ NET006
CONNECTION_KINDS: list[tuple[re.Pattern[str], str, str]] = [
    (
        re.compile(r"message truncated", re.I),
        "message truncated",
        "the two sides expect different sizes: NCCL settings or versions differ between ranks",
    ),
    (
        re.compile(r"wrong (type|magic)|valid magic", re.I),
        "unexpected connection",
        "something else connected to NCCL's port: another job sharing NCCL_COMM_ID/ports, a stale process "
        "or a port scanner",
    ),
    (
        re.compile(r"refused", re.I),
        "connection refused",
        "nothing listened at the peer's address: the peer had exited or not started, a wrong interface was "
        "picked, or a firewall rejected it",
    ),
    (
        re.compile(r"reset by peer", re.I),
        "connection reset by peer",
        "the peer closed the connection abruptly, usually because it crashed or aborted",
    ),
    (
        re.compile(r"closed by remote peer|broken pipe", re.I),
        "connection closed by remote peer",
        "the peer process exited or aborted first: its own log holds the first error",
    ),
    (
        re.compile(r"software caused connection abort", re.I),
        "connection aborted",
        "the local network stack aborted the connection (interface down, timeout, firewall)",
    ),
    (
        re.compile(r"timed out|timeout", re.I),
        "connection timeout",
        "the peer did not answer in time: an unreachable address (wrong interface, firewall) or a host that is down",
    ),
    (
        re.compile(r"no route to host|network is unreachable", re.I),
        "no route to peer",
        "the address is not reachable from this host: wrong interface (NCCL_SOCKET_IFNAME) or routing",
    ),
    (
        re.compile(r"no (usable )?(socket |listening )?interface found|No usable listening interface", re.I),
        "no usable interface",
        "NCCL found no network interface to use: check NCCL_SOCKET_IFNAME",
    ),
    (
        re.compile(r"^\[(Proxy Service \d+|Service thread)\]|Socket recv failed while polling", re.I),
        "proxy error",
        "NCCL's proxy thread failed an operation, usually because of a network error on this host or its peer",
    ),
    (re.compile(r"^Bootstrap", re.I), "bootstrap error", "the ranks could not set up the job's bootstrap ring"),
    (re.compile(r"NCCL_COMM_ID", re.I), "bootstrap error", "NCCL_COMM_ID is malformed"),
    (re.compile(r"exceeded (error )?retr|exceeded timeouts|failed", re.I), "socket error", "a socket operation failed"),
]
PEER_WORDS = {
    "connection refused": "by",
    "connection reset by peer": "",
    "connection closed by remote peer": "",
    "connection timeout": "to",
    "no route to peer": "to",
    "unexpected connection": "from",
}
CONNECTION_FAMILIES = frozenset({"socket_failure", "bootstrap_failure", "proxy_failure"})
SOCKETISH_RE = re.compile(r"socket|connect|Net :|recv|send", re.I)
CONN_PEER_RE = re.compile(r"(?:peer|to|from)\s+([^\s<>]+<\d+>)")
RETRY_RE = re.compile(r"retrying", re.I)


def _is_connection_failure(w: NcclMessage) -> bool:
    if w.family in CONNECTION_FAMILIES:
        return True
    if w.family == "net_socket":
        return w.level == "WARN"
    if w.family != "warn" or not SOCKETISH_RE.search(w.message):
        return False
    kind = connection_kind(w.message)
    if kind is None:
        return False
    # a generic "... failed" counts only when the failing call is a socket call
    return kind[0] != "socket error" or bool(SOCKETISH_RE.search(w.message.split(":")[0]))


def connection_kind(text: str) -> tuple[str, str] | None:
    for pattern, kind, meaning in CONNECTION_KINDS:
        if pattern.search(text):
            return kind, meaning
    return None


@rule("NET006", "connection-failure", severity="error", needs=["nccl_log"])
def connection_failure(ctx: Context) -> Iterable[Finding]:
    """A socket, bootstrap or proxy connection failed: refused, reset, closed by the remote peer,
    wrong type/magic, software caused abort, timeout, no route, truncated message, proxy service
    errors. One finding per kind of failure and peer, naming the hosts that saw it; `retrying` lines
    count only next to a failure of the same host.

    Why: NCCL's bootstrap, proxy and socket transport need every rank to reach every peer over TCP. A
    refused or timed-out connection at init is almost always the network setup (wrong interface,
    firewall, a peer that never started); closed/reset connections during a run mean the peer died
    first, so the peer's log holds the root cause.

    Fix: For refused/timeout/no route: set NCCL_SOCKET_IFNAME to the interface that connects the hosts,
    open the ports between them (NCCL uses ephemeral ports), check that every rank started. For
    closed/reset: read the peer's log for its first WARN (CUDA error, IB completion error, OOM, killed
    by the launcher). For truncated messages: make NCCL versions and NCCL_* settings identical on all
    ranks.

    Sources: formats.md B.18 (socket, proxy and bootstrap messages); NCCL src/misc/socket.cc and
    src/proxy.cc; NCCL docs troubleshooting/networking_troubleshooting.rst and
    runtime_and_mpi_issues.rst; nccl#1328 (sjeaugey on `receiving X bytes instead of Y`)
    """
    index = rank_index(ctx)
    addresses = address_hosts(ctx)
    groups: dict[tuple[str, str], _ConnGroup] = {}
    retries: list[tuple[NcclMessage, str, str | None]] = []
    for w in unique_warnings(ctx):
        text = w.message
        if not _is_connection_failure(w):
            continue
        peer_match = CONN_PEER_RE.search(text)
        label, peer_host = peer_label(peer_match.group(1), addresses, ctx.hosts) if peer_match else ("", None)
        if RETRY_RE.search(text) and w.level != "WARN":
            retries.append((w, label, peer_host))
            continue
        kind, meaning = connection_kind(text) or ("socket error", "a socket operation failed")
        group = groups.setdefault((kind, peer_host or label), _ConnGroup(kind, meaning, label))
        group.items.append(w)
    for w, label, peer_host in retries:  # retries of a connection that finally failed on this host
        for (_kind, peer), group in groups.items():
            if any(i.host == w.host for i in group.items) and (peer in (peer_host or label, "") or not group.peer):
                group.items.append(w)
                group.peer = group.peer or label
                break
    ordered = sorted(groups.values(), key=lambda g: min(i.evidence.line for i in g.items))
    if len(ordered) > GROUPS_LIMIT:
        rest = ordered[GROUPS_LIMIT - 1 :]
        ordered = ordered[: GROUPS_LIMIT - 1]
        folded = _ConnGroup("other connection failures", names(dict.fromkeys(g.kind for g in rest)), "")
        folded.items = [i for g in rest for i in g.items]
        ordered.append(folded)
    for group in ordered:
        items = sorted(group.items, key=lambda i: (i.evidence.source, i.evidence.line))
        hosts = list(dict.fromkeys(i.host for i in items if i.host))
        ranks = sorted({r for r in (rank_of(index, i) for i in items) if r is not None})
        message = group.kind[0].upper() + group.kind[1:]
        if group.peer:
            word = PEER_WORDS.get(group.kind, "with")
            message += f" {word} {group.peer}" if word else f" {group.peer}"
        message += f", seen on {names(hosts) or 'an unnamed host'}"
        if ranks:
            message += f" (rank{'s' if len(ranks) > 1 else ''} {rank_list(ranks)})"
        if len(items) > 1:
            message += f" ({len(items)} lines)"
        message += f": {group.meaning}"
        yield make_finding(
            "NET006",
            "error",
            message,
            evidence=shown(i.evidence for i in items),
            evidence_count=len(items),
            hosts=hosts,
            ranks=ranks,
        )


@dataclass
class _ConnGroup:
    """Connection failures of one kind with one peer."""

    kind: str
    meaning: str
    peer: str
    items: list[NcclMessage] = field(default_factory=list)


# ------------------------------------------------------------------------------------ NET007
def _plugin_label(value: str) -> str:
    text = value.strip()
    if text.startswith("loaded"):
        name = text[len("loaded") :].strip()
        return f"plugin {name}" if name else "an external plugin"
    if text in ("", "internal", "IB", "Socket"):
        return "internal"
    return text


@rule("NET007", "net-plugin-inconsistent", severity="error", needs=["nccl_log"])
def net_plugin_inconsistent(ctx: Context) -> Iterable[Finding]:
    """Hosts of one job use different networks (`Using network IB` on some, `Socket` or `IBext` on
    others) or load different net plugins (an external `libnccl-net.so` on some hosts, the internal
    implementation on others). The hosts that differ from the majority are named.

    Why: NCCL connects each pair of ranks with the network both chose; when hosts disagree the
    connection setup fails, hangs, or silently runs at the speed of the slowest side. Different plugin
    lines mean different container images or library paths on different nodes, a classic source of
    multi-node hangs.

    Fix: Run every host from the same image with the same LD_LIBRARY_PATH and NCCL_NET_PLUGIN (HPC-X
    nccl_rdma_sharp_plugin, aws-ofi-nccl), make the RDMA devices available on all of them, and never
    silence the check with NCCL_IGNORE_NET_MISMATCH.

    Sources: landscape.md 2.A.5; nccl#1634; nccl#2428 ("NCCL_IGNORE_NET_MISMATCH turns a
    heterogeneous-HCA misconfiguration into a silent hang"); NCCL src/init.cc; formats.md B.3, B.7
    """
    hosts = [h for h in ctx.case.hosts if h.name]
    if len(hosts) < 2:
        return
    parts: list[str] = []
    named: set[str] = set()
    for what, values_of in (
        ("network", lambda h: tuple(sorted(set(h.networks)))),
        ("net plugin", lambda h: tuple(sorted({_plugin_label(p) for p in h.net_plugins}))),
    ):
        signature = {h.name: values_of(h) for h in hosts}
        signature = {name: value for name, value in signature.items() if value}
        within = [name for name, value in signature.items() if len(value) > 1]
        counts = Counter(signature.values())
        if len(counts) < 2 and not within:
            continue
        ranked = counts.most_common()
        majority, top = ranked[0]
        if len(counts) < 2:
            parts.append(f"the processes of {names(within)} use different {what}s ({' + '.join(majority)})")
            named.update(within)
            continue
        if sum(1 for _, c in ranked if c == top) > 1:  # no majority: list every group
            groups = []
            for i, (value, _) in enumerate(ranked):
                members = [n for n, v in signature.items() if v == value]
                verb = "uses" if len(members) == 1 else "use"
                groups.append(f"{names(members)} {verb} {what + ' ' if i == 0 else ''}{' + '.join(value)}")
            parts.append(" while ".join(groups))
            named.update(signature)
        else:
            groups = []
            for i, (value, _) in enumerate(ranked[1:]):
                members = [n for n, v in signature.items() if v == value]
                named.update(members)
                verb = "uses" if len(members) == 1 else "use"
                groups.append(f"{names(members)} {verb} {what + ' ' if i == 0 else ''}{' + '.join(value)}")
            verb = "uses" if top == 1 else "use"
            parts.append(f"{', '.join(groups)} while the other {plural(top, 'host')} {verb} {' + '.join(majority)}")
    if not parts:
        return
    evidence = _plugin_evidence(ctx, named)
    yield make_finding(
        "NET007",
        "error",
        "Hosts of one job use different networks or net plugins: " + "; ".join(parts),
        evidence=evidence,
        evidence_count=max(len(evidence), _count_lines(ctx, named)),
        hosts=sorted(named),
    )


PLUGIN_FAMILIES = frozenset(
    {"net_plugin_line", "plugin_loaded", "plugin_initialized", "plugin_assigned", "plugin_init_failed", "net_ofi"}
)


def _plugin_evidence(ctx: Context, hosts: set[str]) -> list[Evidence]:
    """Lines that show the network/plugin choice of the hosts named, the most telling line of each host
    first: a plugin line, else its NET device listing, else a NET connection line."""
    per_host: dict[str, list[Evidence]] = defaultdict(list)
    for msg in [*ctx.case.messages, *unique_warnings(ctx)]:
        if msg.host in hosts and msg.family in PLUGIN_FAMILIES:
            per_host[msg.host].append(msg.evidence)
    for dev in ctx.case.net_devices:
        if dev.host in hosts:
            per_host[dev.host].append(dev.evidence)
    for edge in ctx.case.edges:
        if edge.host in hosts and is_net_edge(edge):
            per_host[edge.host].append(edge.evidence)
    first = shown(lines[0] for lines in per_host.values() if lines)
    rest = [e for e in shown((e for lines in per_host.values() for e in lines), limit=10) if e not in first]
    return sorted(first + rest[: max(0, EVIDENCE_SHOWN - len(first))], key=lambda e: (e.source, e.line))


def _count_lines(ctx: Context, hosts: set[str]) -> int:
    lines = {
        (m.evidence.source, m.evidence.line)
        for m in ctx.case.messages
        if m.host in hosts and m.family in PLUGIN_FAMILIES
    }
    lines |= {(d.evidence.source, d.evidence.line) for d in ctx.case.net_devices if d.host in hosts}
    return len(lines) + sum(e.channels for e in ctx.case.edges if e.host in hosts and is_net_edge(e))
