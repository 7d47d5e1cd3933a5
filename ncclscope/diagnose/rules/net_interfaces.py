"""Rules of the NET family about interfaces and NIC lists: NET003 (interfaces that do not connect hosts)
and NET004 (NIC lists that mix link layers or take in front-end ports)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from ncclscope.common.words import plural
from ncclscope.diagnose.rules.context import Context, shown
from ncclscope.diagnose.rules.net_common import names
from ncclscope.diagnose.rules.registry import make_finding, rule
from ncclscope.model import Evidence, Finding, InterfaceUse, NetDevice, Severity

# Interface names that do not connect hosts, by the prefix their creators give them: (prefixes, digits
# only after the prefix?, kind, why it is a problem)
SUSPICIOUS_INTERFACES: tuple[tuple[tuple[str, ...], bool, str, str], ...] = (
    (("lo",), True, "loopback", "the loopback interface, unreachable from other hosts"),
    (("docker",), True, "Docker bridge", "a Docker bridge, local to each host"),
    (("br-",), False, "Docker bridge", "a Docker bridge, local to each host"),
    (("veth",), False, "veth", "a container's virtual ethernet pair, local to one host"),
    (("virbr",), False, "libvirt bridge", "a libvirt VM bridge, local to each host"),
    (("lxcbr", "lxdbr"), False, "LXC bridge", "an LXC/LXD bridge, local to each host"),
    (
        ("tailscale", "wg", "tun", "utun", "zt", "CloudflareWARP", "nordlynx"),
        False,
        "VPN",
        "a VPN tunnel: slow, and not always routable",
    ),
    (
        ("cni", "flannel.", "cali", "vxlan.", "kube-ipvs", "cilium_", "weave"),
        False,
        "overlay",
        "a Kubernetes overlay interface",
    ),
)
MANY_INTERFACES = 3
ROLES = {"bootstrap": "bootstrap/OOB", "oob": "bootstrap/OOB", "socket": "NET/Socket"}
ROLE_TEXT = {"bootstrap/OOB": "bootstrap/out-of-band traffic", "NET/Socket": "NET/Socket"}


def interface_kind(name: str) -> tuple[str, str] | None:
    for prefixes, digits_only, kind, description in SUSPICIOUS_INTERFACES:
        for prefix in prefixes:
            rest = name[len(prefix) :]
            if name.startswith(prefix) and (not digits_only or rest == "" or rest.isdigit()):
                return kind, description
    return None


def _ifname_matches(iface: str, selector: str) -> bool:
    """NCCL_SOCKET_IFNAME entries are prefixes (`eth` matches eth0), or exact names after `=`."""
    return iface == selector or iface.startswith(selector)


@rule("NET003", "suspicious-interface", severity="warning", needs=["nccl_errors"])
def suspicious_interface(ctx: Context) -> Iterable[Finding]:
    """The bootstrap, out-of-band or NET/Socket interface is one that does not connect hosts: `lo`,
    `docker*`, `veth*`, `virbr*`, `lxcbr*`, a VPN (`tailscale*`, `wg*`) or an overlay; or NET/Socket
    spreads its traffic over many interfaces because NCCL_SOCKET_IFNAME is not set; or a rank of a job that is not
    on one host failed to connect to a loopback address (`Connect to 127.0.0.1<port> failed`, in NCCL's log or the
    `Last error` a framework quotes): a peer advertised its loopback interface.

    Why: NCCL's bootstrap and its socket transport use the interface NCCL picked on each host. Local
    bridges and loopback carry the same address on every host (docker0 is 172.17.0.1 everywhere), so
    peers connect to themselves or nowhere: init hangs, or fails with connection refused/timeouts.
    VPN tunnels work but are slow and add latency; several interfaces listed without
    NCCL_SOCKET_IFNAME means NCCL stripes traffic over all of them, including ones that may not route
    between hosts.

    Fix: Set NCCL_SOCKET_IFNAME to the data interface that connects the hosts, e.g.
    `NCCL_SOCKET_IFNAME=eth0` (exact name with `=eth0`, exclusions with `^docker,lo`), and use the same
    interface for the launcher (`OMPI_MCA_btl_tcp_if_include`, GLOO_SOCKET_IFNAME for PyTorch).

    Sources: NCCL docs troubleshooting/networking_troubleshooting.rst and runtime_and_mpi_issues.rst;
    NCCL docs env.rst (NCCL_SOCKET_IFNAME); NVIDIA/nccl#913 (hang on veth interfaces); NVIDIA/nccl#1837;
    NVIDIA/nccl#210; NCCL src/bootstrap.cc, src/transport/net_ib.cc and net_socket.cc (the interface
    lines)
    """
    yield from _loopback_peers(ctx)
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
            addresses[iface][address].add(host)

    for use in _uses(ctx.case.interfaces):
        note(ROLES[use.role], use.host or "", use.name, use.evidence, use.address)
    selected: dict[str, list[Evidence]] = defaultdict(list)  # suspicious interfaces NCCL_SOCKET_IFNAME names
    for setting in ifname:
        value = setting.value.strip()
        if value.startswith("^"):
            continue  # a leading ^ makes the whole list one of interfaces NCCL must not use (env.rst)
        for part in value.lstrip("=").split(","):
            part = part.strip()
            if part and interface_kind(part):
                selected[part].append(setting.evidence)

    # on one host nothing crosses these interfaces but the bootstrap's local traffic: worth knowing, no more
    severity: Severity = "info" if ctx.single_host else "warning"
    single = "; harmless while the job stays on one host" if ctx.single_host else ""
    unset = "" if ifname else "; NCCL_SOCKET_IFNAME is not set"
    covered: set[str] = set()
    # one finding per kind of interface: the roles it serves are told together (bootstrap and NET/Socket on one veth)
    by_kind: dict[str, dict[str, dict[str, dict[str, list[Evidence]]]]] = defaultdict(dict)
    for (kind, role), per_host_of_role in found.items():
        by_kind[kind][role] = per_host_of_role
    for kind, roles in sorted(by_kind.items()):
        ordered = sorted(roles, key=lambda role: role != "bootstrap/OOB")
        hosts = list(dict.fromkeys(h for role in ordered for h in roles[role] if h))
        used = {role: list(dict.fromkeys(i for h in roles[role].values() for i in h)) for role in ordered}
        ifaces = list(dict.fromkeys(i for role in ordered for i in used[role]))
        evidence: list[Evidence] = []
        for e in (e for role in ordered for h in roles[role].values() for lines in h.values() for e in lines):
            if e not in evidence:
                evidence.append(e)
        description = next(d for _, _, k, d in SUSPICIOUS_INTERFACES if k == kind)
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
        if "NET/Socket" in roles:
            socket_hosts = roles["NET/Socket"]
            rest = [u.name for u in ctx.case.interfaces if u.role == "socket" and u.host in socket_hosts]
            rest = [name for name in rest if name not in ifaces]
            besides = f"besides {names(dict.fromkeys(rest))}"
            others = "" if not rest else f" {besides}" if len(roles) == 1 else f" (NET/Socket {besides})"
        if len({tuple(v) for v in used.values()}) == 1:
            users = " and ".join(ROLE_TEXT[role] for role in ordered)
            message = f"{users} {'use' if len(ordered) > 1 else 'uses'} {names(ifaces)} ({description}){where}{others}"
        else:
            told = "; ".join(f"{ROLE_TEXT[role]} uses {names(used[role])}" for role in ordered)
            message = f"{told} ({description}){where}{others}"
        message += "".join(f"; {n}" for n in notes) + unset + single
        yield make_finding(
            "NET003",
            severity,
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
            severity,
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
            if dev.transport == "Socket" and not interface_kind(dev.name):  # those are reported above
                many[dev.host].append(dev)
        # every process of a host lists the same interfaces: count the names, not the lines
        crowded = {h: devs for h, devs in many.items() if len({d.name for d in devs}) >= MANY_INTERFACES}
        if crowded:
            counts = sorted({len({d.name for d in v}) for v in crowded.values()})
            listing = names(dict.fromkeys(d.name for devs in crowded.values() for d in devs))
            evidence = [d.evidence for devs in crowded.values() for d in devs]
            yield make_finding(
                "NET003",
                severity,
                f"NET/Socket on {names(h for h in crowded if h) or 'this job'} spreads traffic over "
                f"{'/'.join(map(str, counts))} interfaces ({listing}) because NCCL_SOCKET_IFNAME is not set{single}",
                evidence=shown(evidence),
                evidence_count=len({(e.source, e.line) for e in evidence}),
                hosts=[h for h in crowded if h],
            )


def _uses(uses: list[InterfaceUse]) -> list[InterfaceUse]:
    """Each interface of each host and role once (every process lists the same ones), the first line kept."""
    seen: dict[tuple[str | None, str, str], InterfaceUse] = {}
    for use in uses:
        seen.setdefault((use.host, ROLES[use.role], use.name), use)
    return list(seen.values())


# ------------------------------------------------------------------------------------ NET004
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

    Sources: stas00/ml-engineering network/debug/README.md; NCCL src/transport/net_ib.cc (the device
    list, and `Attempted to connect incompatible devices ... Try selecting NICs of only one link type
    using NCCL_IB_HCA`); NCCL docs env.rst (NCCL_IB_HCA)
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
    failures = [w for w in ctx.case.warnings if w.kind == "ib_incompatible_devices"]
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


def _loopback(address: str) -> bool:
    return address.startswith("127.") or address in ("::1", "localhost")


def _loopback_peers(ctx: Context) -> Iterable[Finding]:
    """Connections to a loopback address that failed, in a job not shown to be on one host: the peer's address came
    from the bootstrap, so some rank advertised its `lo` (NCCL_SOCKET_IFNAME=lo, or an image where NCCL found no
    other interface), which reaches only itself."""
    if ctx.single_host:
        return  # on one host, loopback reaches every rank: the failure is something else (NET006 says it)
    hits = [f for f in ctx.case.socket_failures if f.peer_address and _loopback(f.peer_address)]
    if not hits:
        return
    peers = sorted({f.peer or f.peer_address or "" for f in hits})
    errors = sorted({f.errno_text for f in hits if f.errno_text})
    why = f" ({'; '.join(errors)})" if errors else ""
    yield make_finding(
        "NET003", "warning",
        f"a rank failed to connect to {names(peers)}{why}: a loopback address, which reaches only the rank's own"
        " host, so some rank advertised its loopback interface to the others; in a job across hosts set"
        " NCCL_SOCKET_IFNAME to the interface that connects them",
        evidence=shown(f.evidence for f in hits), evidence_count=len(hits),
        hosts=sorted({f.host for f in hits if f.host}),
    )  # fmt: skip
