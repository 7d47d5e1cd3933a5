"""NET008: an InfiniBand or RoCE port that is not up, or runs below its siblings, as the host reports it
(`ibstat`) or as NCCL read it (the `speed` of its topology dump's nets); or a rank whose network bandwidth NCCL's
own check (2.31 diagnostics) measured far under the others'."""

from __future__ import annotations

from collections.abc import Iterable

from ncclscope.case.links import Port, ib_ports, port_problems
from ncclscope.diagnose.rules.context import Context, shown
from ncclscope.diagnose.rules.registry import make_finding, rule
from ncclscope.diagnose.rules.topo_links import DUMP
from ncclscope.model import Case, Finding


def _nccl_devices(case: Case) -> set[str] | None:
    """The adapters NCCL lists (`NET/IB : Using [0]mlx5_0:1/IB ...`, or its topology dump's nets); None when
    the inputs do not say."""
    names = {member for d in case.net_devices for member in [d.name, *d.members]}
    names |= {n.name for dump in case.topology_dumps for n in dump.nets}
    return {name.split(":")[0] for name in names} if names else None


@rule("NET008", "ib-port-degraded", severity="error", needs=["ib_ports"])
def ib_port_degraded(ctx: Context) -> Iterable[Finding]:
    """An InfiniBand or RoCE port is not up (`State` other than Active, `Physical state` other than
    LinkUp, e.g. Down/Polling: no link) or runs at a lower rate than the other ports of its kind on the
    same host (200 where its siblings run 400 Gb/s), as `ibstat` reports it; or, from NCCL's topology
    dump, a net whose speed is below its siblings'. Error for a port NCCL uses, warning for the others
    and when the inputs do not say which ports NCCL uses. NCCL 2.31's network check at init (NCCL_RUN_DIAGNOSTICS=1)
    names a rank whose same-NIC or cross-NIC bandwidth is more than 30% off the median of the communicator: a
    warning (a short test, which NCCL itself reports as information).

    Why: NCCL spreads channels over every NIC it finds and runs each ring at the pace of its slowest
    hop: one port at half rate halves what the whole job gets across hosts, and a port that is down
    makes NCCL either skip the NIC (fewer rails) or fail when a peer expects it. Cables, transceivers,
    switch ports and subnet manager problems cause it; NCCL's log does not say so.

    Fix: Check the port with `ibstat`/`ibv_devinfo -v` and the switch side (`ibdiagnet`, `iblinkinfo`):
    reseat or replace the cable or transceiver, check that the subnet manager runs (a port stuck in
    Initializing has link but no SM), and keep the host out of the job or exclude the port with
    NCCL_IB_HCA until it runs at full rate.

    Sources: infiniband-diags ibstat(8) (State, Physical state, Rate); InfiniBand Architecture
    Specification vol. 1 (PortInfo PortState and PortPhysicalState); NCCL docs env.rst (NCCL_IB_HCA);
    NCCL src/graph/xml.cc (net speed); NCCL docs troubleshooting/diagnostics.rst (2.31: the network bandwidth
    check between paired nodes)
    """
    yield from _diag_net_bw(ctx)
    used = _nccl_devices(ctx.case)
    by_host = ib_ports(ctx.case.ib_devices)
    for dump in ctx.case.topology_dumps:
        for net in dump.nets:
            rate = net.speed / 1000 if net.speed else None  # NCCL writes Mb/s
            lines = [net.evidence] if net.evidence else []
            by_host[dump.source].append(Port(net.name, net.port or 1, None, None, rate, "nccl", DUMP, lines))
    for source, ports in by_host.items():
        host = ctx.report_host(source)
        for p, problem in port_problems(ports):
            nccl_uses = used is not None and p.name in used
            said = "NCCL uses it" if nccl_uses else (
                "NCCL does not list it" if used is not None else "the inputs do not say whether NCCL uses it"
            )  # fmt: skip
            kind = "RoCE port" if p.layer == "Ethernet" else "port"
            yield make_finding(
                "NET008", "error" if nccl_uses else "warning",
                f"on {host}: {p.name} {kind} {p.number}: {problem} ({said}; from {p.via})",
                evidence=shown(p.lines), evidence_count=len(p.lines), hosts=[host],
            )  # fmt: skip


def _diag_net_bw(ctx: Context) -> Iterable[Finding]:
    """NCCL 2.31's network check: ranks whose measured bandwidth is far off the communicator's median."""
    slow = [r for r in ctx.case.diag_reports if r.kind == "net_bw" and r.measured_gbits and r.median_gbits]
    for r in slow:
        assert r.measured_gbits is not None and r.median_gbits is not None
        if r.measured_gbits >= r.median_gbits:
            continue  # faster than the others: nothing to fix there
        short = 1 - r.measured_gbits / r.median_gbits
        node = r.node or r.host
        yield make_finding(
            "NET008", "warning",
            f"NCCL's own network check at init measured rank {r.rank}{f' ({node})' if node else ''} at"
            f" {r.measured_gbits:g} Gbit/s {r.nic_kind or ''}, {short:.0%} under the median {r.median_gbits:g} Gbit/s"
            f"{f' of communicator {r.comm}' if r.comm else ''}: a NIC, cable or switch port of that node runs"
            " slower than its peers (NCCL 2.31 diagnostics)",
            evidence=[r.evidence], hosts=[node] if node else [], ranks=[r.rank] if r.rank is not None else [],
        )  # fmt: skip
