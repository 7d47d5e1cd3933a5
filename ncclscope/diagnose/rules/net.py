"""Rules of the NET family about the network NCCL uses between hosts: NET001 (sockets), NET002 (RDMA that
cannot be used) and NET007 (hosts that disagree). Interfaces and NIC lists are in net_interfaces.py,
failures at run time in net_errors.py, the helpers they share in net_common.py.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

from ncclscope.common.words import plural
from ncclscope.diagnose.rules.context import EVIDENCE_SHOWN, GPUS_PER_HOST, Context, shown, shown_with
from ncclscope.diagnose.rules.net_common import (
    NAMES_SHOWN,
    HostNet,
    host_nets,
    is_net_edge,
    is_socket,
    names,
    network_family,
    unique_warnings,
)
from ncclscope.diagnose.rules.registry import make_finding, rule
from ncclscope.model import Evidence, Finding, Severity


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

    Sources: stas00/ml-engineering network/debug/README.md ("NCCL with docker containers"); NCCL docs
    env.rst (NCCL_IB_DISABLE, NCCL_NET); nccl-tests#100 and #82 (libibverbs WARN then NET/Socket);
    nccl-tests#284 (2-node timeout on NET/Socket); NCCL src/transport/net_socket.cc and src/init.cc
    (`Using network`)
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
    chosen = [line for h in socket_hosts for line in h.socket_network_lines]  # `Using network Socket`
    example = ctx.case.connections.examples.get("NET/Socket")
    if example is not None:
        evidence.append(example)
    ranks = sorted({e.from_rank for h in socket_hosts for e in h.socket_edges if e.from_rank >= 0})
    if not ranks:
        ranks = sorted({r for h in socket_hosts for r in h.ranks})
    interfaces = _interfaces(socket_hosts)
    # the listings of socket devices and the `Using network Socket` lines, each line once
    listed = {(e.source, e.line) for e in [*(d.evidence for h in socket_hosts for d in h.socket_devices), *chosen]}
    count = sum(e.channels for h in socket_hosts for e in h.socket_edges) + len(listed)
    hosts = [h.name for h in socket_hosts]
    # NCCL's own Socket transport, or a socket plugin such as FastSocket, by the name the log gives
    label = " / ".join(sorted({f"NET/{n}" for h in socket_hosts for n in h.networks if is_socket(n)})) or "NET/Socket"
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
            f"Inter-host traffic goes over TCP sockets ({label}) instead of RDMA on {where}: {spread}; {traffic}",
            evidence=shown_with(evidence, chosen),
            evidence_count=count,
            hosts=hosts,
            ranks=ranks,
        )
        return
    selected = f"NCCL selected {label} on {names(hosts)}" + (f" ({interfaces[2:]})" if interfaces else "")
    if ctx.ranks_elsewhere:
        comm, nranks, shown_ranks = ctx.ranks_elsewhere[0]
        yield make_finding(
            "NET001",
            "warning",
            f"{selected}, the one host in the inputs, but the job has a communicator of {nranks} ranks ({comm}) "
            f"and the inputs show {shown_ranks} of them: more than the {GPUS_PER_HOST} GPUs of one usual host, so "
            "the others most likely run on other hosts, and traffic between hosts then goes over TCP sockets instead "
            "of RDMA",
            evidence=shown_with(evidence, chosen),
            evidence_count=count,
            hosts=hosts,
            ranks=ranks,
            fix=(
                "Give the logs of every rank (NCCL_DEBUG_FILE=nccl.%h.%p.log) to see where they run; for a job "
                "over several hosts, make an RDMA NIC usable to NCCL on each (`NET/IB : Using [0]mlx5_...`, or "
                "the net plugin of the cluster such as aws-ofi-nccl for EFA)."
            ),
        )
        return
    known = ctx.single_host and ctx.comm_groups and not ctx.ranks_beyond_inputs  # every rank is shown
    job = "a single-host job" if known else "the one host in the inputs"
    unseen = "".join(
        f" (a communicator of {nranks} ranks, {comm}, of which the inputs show {shown_ranks}: any on other"
        " hosts would reach the others over TCP)"
        for comm, nranks, shown_ranks in ctx.ranks_beyond_inputs[:1]
    )
    yield make_finding(
        "NET001",
        "info",
        f"{selected}, {job}{unseen}: traffic between its GPUs does not use the NET transport, so this costs nothing "
        "here, but a run over several hosts would be limited to TCP speed",
        evidence=shown_with(evidence, chosen),
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
# What each kind of RdmaProblem (case/facts.py) says, in a finding's words
RDMA_CAUSES = {
    "libibverbs_missing": "libibverbs could not be loaded",
    "no_ib_device": "NET/IB found no device",
    "no_ip_interface": "NET/IB found no IP interface",
    "net_plugin_init_failed": "the net plugin failed to initialize",
    "ofi_init_failed": "aws-ofi-nccl could not initialize",
    "ofi_no_provider": "aws-ofi-nccl could not initialize",
    "ofi_no_fabric": "aws-ofi-nccl found no fabric device (fi_getinfo: the EFA device is not visible to the process)",
    "net_plugin_broken": "the net plugin was found but could not be loaded: a symbol it needs is missing (a plugin"
    " built for a newer C library or other libraries than the image has)",
    "net_not_found": "NCCL_NET names a network that no loaded plugin provides, so communicator init fails",
}
QUOTED_CAUSES = {"net_plugin_init_failed", "ofi_init_failed", "ofi_no_provider", "net_plugin_broken", "net_not_found"}
PLUGIN_FIX = (
    "Give the image a net plugin it can load: one built for its OS and C library (a plugin that needs GLIBC_2.34"
    " needs an image of that generation, e.g. Ubuntu 22.04 or newer), where NCCL_NET_PLUGIN or LD_LIBRARY_PATH points"
    " (the provider's own image or its installer, for gIB or TCPX); or unset NCCL_NET so that NCCL uses its own"
    " IB or socket transport."
)
EFA_FIX = (
    "Make the EFA devices visible to the process: on EKS request the vpc.amazonaws.com/efa resource (the EFA device"
    " plugin), with docker pass them (--device=/dev/infiniband/uverbs0 ... for each), and check `fi_info -p efa` on"
    " the host and inside the container; keep aws-ofi-nccl and libfabric of the image matched to the host's driver."
)


@rule("NET002", "rdma-unavailable", severity="warning", needs=["nccl_log"])
def rdma_unavailable(ctx: Context) -> Iterable[Finding]:
    """The RDMA path could not be used on a host: `Failed to open libibverbs` (a WARN before NCCL 2.11,
    an INFO after), `NET/IB : No device found`, a net plugin that failed to initialize (aws-ofi-nccl
    `initialization failed` or `Couldn't open a fabric provider`, `Failed to initialize NET plugin`),
    a net plugin found but not loadable (a symbol it needs is missing: `version GLIBC_2.34 not found`), NCCL_NET
    naming a network no plugin provides (`Error: network gIB not found.`: an error, init fails, on one host too),
    or InfiniBand switched off by NCCL_IB_DISABLE=1 / NCCL_NET=Socket. Error when a multi-host job
    then runs over NET/Socket (NET001), warning on a multi-host job otherwise, on a job whose other
    ranks may be on hosts the inputs lack, and on a host set up for RDMA (an external net plugin
    loaded); info on a job shown on one host, where nothing crosses the network yet. Probes that
    fail on a host which still ends up on an RDMA network are not reported.

    Why: These lines are the cause of a socket fallback: a container image without rdma-core, RDMA
    devices not passed to the container, a net plugin missing or failing to find its fabric, or a
    variable left from a debugging session. NCCL then carries inter-host traffic over TCP.

    Fix: Install rdma-core (libibverbs1, librdmacm1, ibverbs-providers) in the image and pass
    /dev/infiniband (docker `--device=/dev/infiniband`, Kubernetes RDMA device plugin); check `ibstat` and
    `ibv_devinfo` on the host and inside the container; for EFA install aws-ofi-nccl and libfabric with
    the efa provider and check FI_PROVIDER; remove NCCL_IB_DISABLE=1 and NCCL_NET=Socket.

    Sources: nccl-tests#100 and #82 (`Failed to open libibverbs.so[.1]` then NET/Socket); NCCL
    src/misc/ibvsymbols.cc (WARN in 2.3-2.10, INFO from 2.11); NCCL src/transport/net_ib.cc (`No device
    found`); NCCL docs env.rst (NCCL_IB_DISABLE, NCCL_NET); aws-ofi-nccl src/nccl_ofi_net.c and
    include/nccl_ofi_log.h; stas00/ml-engineering network/debug/README.md ("NCCL with docker containers")
    """
    nets = host_nets(ctx)
    causes: dict[str, list[tuple[str, Evidence]]] = defaultdict(list)
    details: dict[str, list[str]] = defaultdict(list)  # cause -> the messages quoted for it
    for problem in ctx.case.rdma_problems:
        cause = RDMA_CAUSES[problem.kind]
        causes[cause].append((problem.host or "", problem.evidence))
        if problem.kind in QUOTED_CAUSES and problem.detail and problem.detail not in details[cause]:
            details[cause].append(problem.detail)
    for setting in ctx.env("NCCL_IB_DISABLE"):
        if setting.value.strip() not in ("", "0"):
            for host in setting.hosts or [""]:
                causes[f"NCCL_IB_DISABLE={setting.value} switches InfiniBand off"].append((host, setting.evidence))
    for setting in ctx.env("NCCL_NET"):
        if is_socket(setting.value):
            for host in setting.hosts or [""]:
                causes[f"NCCL_NET={setting.value} forces TCP sockets"].append((host, setting.evidence))
    kept: dict[str, list[tuple[str, Evidence]]] = {}
    for cause, items in causes.items():
        # a probe that failed on a host that still ends up on an RDMA network lost nothing
        items = [(h, ev) for h, ev in items if not (h in nets and nets[h].uses_rdma and not nets[h].uses_socket)]
        if items:
            kept[cause] = items
    if not kept:
        return
    multi = ctx.multi_host
    socket_hosts = [h.name for h in nets.values() if h.uses_socket]
    # on one host the network carries nothing; but a host set up for RDMA (an external net plugin loaded) that
    # sees no device, or a job whose other ranks may be on hosts the inputs lack, will pay for it
    meant = any((p.net_plugin or "").startswith("loaded") for p in ctx.case.processes) or any(
        p.kind.startswith("ofi_") or p.kind == "net_plugin_broken"
        for p in ctx.case.rdma_problems  # aws-ofi-nccl or another plugin was installed, and failed
    )
    # NCCL_NET naming a network no plugin provides stops init itself, on one host too
    missing_net = any(p.kind == "net_not_found" for p in ctx.case.rdma_problems)
    if missing_net:
        severity: Severity = "error"
    elif multi:
        severity = "error" if socket_hosts else "warning"
    else:
        severity = "info" if ctx.single_host and not meant else "warning"
    hosts = sorted({host for items in kept.values() for host, _ in items if host})
    parts = []
    for cause, items in kept.items():
        lines = len({(ev.source, ev.line) for _, ev in items})
        where = ""
        cause_hosts = {host for host, _ in items if host}
        if len(kept) > 1 and cause_hosts and cause_hosts != set(hosts):
            where = f" on {names(sorted(cause_hosts))}"
        quoted = details.get(cause, [])
        # the most specific message first: "Couldn't open a fabric provider ..." explains "initialization failed"
        quoted = sorted(quoted, key=lambda d: ("failed" in d.lower(), -len(d)))[:1]
        label = f"{cause} (`{quoted[0]}`)" if quoted else cause
        parts.append(f"{label}{where} ({plural(lines, 'line')})" if lines > 1 else f"{label}{where}")
    evidence = [ev for items in kept.values() for _, ev in items]
    message = f"RDMA networking is unavailable on {names(hosts) if hosts else 'this job'}: {'; '.join(parts)}"
    fallback = [h for h in socket_hosts if not hosts or h in hosts]
    chosen = [line for h in fallback for line in nets[h].socket_network_lines]  # `Using network Socket`
    if fallback:
        message += f"; NCCL fell back to TCP sockets (NET/Socket) on {names(fallback)}"
    if severity == "info":
        message += "; harmless while the job stays on one host, where GPUs do not talk over the network"
    elif missing_net:
        pass  # init fails: nothing runs over TCP either
    elif not multi and meant:
        message += "; this host has an external net plugin, so it was set up for RDMA: a run over several hosts"
        message += " would go over TCP"
    elif not multi:
        message += "; the job's other ranks may run on hosts the inputs lack, which would talk over TCP"
    no_fabric = any(p.kind == "ofi_no_fabric" for p in ctx.case.rdma_problems)
    plugin = any(p.kind in ("net_plugin_broken", "net_not_found") for p in ctx.case.rdma_problems)
    yield make_finding(
        "NET002",
        severity,
        message,
        evidence=shown_with(evidence, chosen),
        evidence_count=len({(e.source, e.line) for e in [*evidence, *chosen]}),
        hosts=hosts,
        **({"fix": EFA_FIX} if no_fabric else {"fix": PLUGIN_FIX} if plugin else {}),
    )


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

    Sources: NVIDIA/nccl#1634; NVIDIA/nccl#2428 ("NCCL_IGNORE_NET_MISMATCH turns a heterogeneous-HCA
    misconfiguration into a silent hang"); NCCL src/init.cc and src/plugin/net.cc (`Using network`, the
    NET/Plugin lines)
    """
    hosts = [h for h in ctx.case.hosts if h.name]
    if not hosts:
        return
    parts: list[str] = []
    named: set[str] = set()
    for what, values_of in (
        ("network", lambda h: tuple(sorted({network_family(n) for n in h.networks}))),
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
    first: a plugin line, else its `Using network` line, else its NET device listing, else a NET
    connection line."""
    per_host: dict[str, list[Evidence]] = defaultdict(list)
    for msg in [*ctx.case.messages, *unique_warnings(ctx)]:
        if msg.host in hosts and msg.family in PLUGIN_FAMILIES:
            per_host[msg.host].append(msg.evidence)
    for host, line in _network_lines(ctx, hosts):
        per_host[host].append(line)
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
    lines |= {(line.source, line.line) for _, line in _network_lines(ctx, hosts)}
    return len(lines) + sum(e.channels for e in ctx.case.edges if e.host in hosts and is_net_edge(e))


def _network_lines(ctx: Context, hosts: set[str]) -> list[tuple[str, Evidence]]:
    """Each process's line that names its network (`Using network X`, or the NET/OFI set-up)."""
    nets = host_nets(ctx)
    return [(host, line) for host in hosts if host in nets for _, line in nets[host].network_lines]
