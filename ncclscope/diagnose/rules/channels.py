"""CH001: few channels for the hardware, or channel counts set by environment."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable

from ncclscope.common.words import plural
from ncclscope.diagnose.rules.context import Context, shown
from ncclscope.diagnose.rules.registry import make_finding, rule
from ncclscope.diagnose.rules.topo_common import (
    gpus_per_host,
    hosts_text,
    nvlink_hosts,
    rdma_nics_per_host,
)
from ncclscope.model import Evidence, Finding

# Channel counts. Bandwidth grows with channels; on an NVLink host with many GPUs NCCL finds many
# (8+ on 8 GPUs). One ring/tree channel on a host of 4+ NVLink GPUs, or 2 or fewer collective
# channels on 8 NVLink GPUs, is far below what the links carry. On PCIe hosts and 2-GPU boxes few
# channels are normal.
RING_TREE_PATTERNS = {1: "balanced tree", 2: "split tree", 3: "tree", 4: "ring"}
FEW_GRAPH_CHANNELS = 1
FEW_GRAPH_CHANNELS_MIN_GPUS = 4
FEW_COLL_CHANNELS = 2
FEW_COLL_CHANNELS_MIN_GPUS = 8
# Variables that set the channel count (debug settings in NCCL's env.rst). NCCL_NCHANNELS_PER_NET_PEER
# and similar per-peer knobs are tuning for the network, not channel caps, and are left to ENV001.
CHANNEL_OVERRIDES = (
    "NCCL_MAX_NCHANNELS",
    "NCCL_MIN_NCHANNELS",
    "NCCL_MAX_CTAS",
    "NCCL_MIN_CTAS",
    "NCCL_MAX_P2P_NCHANNELS",
)
CHANNEL_SHAPERS = ("NCCL_GRAPH_FILE", "NCCL_TOPO_FILE")  # fix the channels NCCL builds, without a cap


# ------------------------------------------------------------------------------------- matrices


# ================================================================================= CH001
@rule("CH001", "few-channels", severity="warning", needs=["nccl_log"])
def few_channels(ctx: Context) -> Iterable[Finding]:
    """Very few channels for the hardware, or channel counts set by environment.

    Fires on a graph search with one ring/tree channel (`Pattern 4, ..., nChannels 1`) on a host of
    4 or more NVLink GPUs, on 2 or fewer collective channels (`2 coll channels`) on a host of 8
    NVLink GPUs, and on NCCL_MAX_NCHANNELS, NCCL_MIN_NCHANNELS, NCCL_MAX_CTAS and the other channel
    count variables. The hardware comes from the log (GPUs per host; NVLink in NCCL's topology dump,
    graphs, NVLS or indirect P2P lines), the matrix and the platform. Not on PCIe hosts or 2-GPU
    boxes, where one or two channels are normal, nor on multi-host communicators whose hosts have a
    single NIC.

    Why: Each channel is one CUDA block moving one slice of the data; NCCL's bandwidth scales with
    the number of channels until the links are full. One or two channels on NVLink leave most of the
    link bandwidth unused. Channel caps are debug settings that are often left in job scripts.

    Fix: Unset NCCL_MAX_NCHANNELS / NCCL_MIN_NCHANNELS / NCCL_MAX_CTAS (and a stale NCCL_GRAPH_FILE or
    NCCL_TOPO_FILE); if NCCL itself finds few channels, check the topology (TOPO003, TOPO006) and
    re-run with NCCL_DEBUG_SUBSYS=INIT,GRAPH to see the graph search.

    Sources: nccl-tests#182 (nChannels 1 on a hidden topology); NCCL src/init.cc (channel counts
    line) and src/graph/search.cc; NCCL docs env.rst (NCCL_MAX_NCHANNELS, NCCL_MAX_CTAS: debug
    settings)
    """
    case = ctx.case
    gpus = gpus_per_host(ctx)
    nvlink = nvlink_hosts(ctx)
    nics = rdma_nics_per_host(case)
    multi = ctx.multi_host

    def rich(host: str | None, min_gpus: int) -> bool:
        return bool(host) and host in nvlink and gpus.get(host or "", 0) >= min_gpus

    def nic_bound(hosts: Iterable[str]) -> bool:
        # one NIC per host caps inter-host channels: few channels are the hardware's limit there
        return multi and all(nics.get(h, 0) <= 1 for h in hosts)

    observed: Counter[str] = Counter()  # graph searches seen -> how many processes printed them
    comms: dict[int, list[str]] = defaultdict(list)  # coll channels -> communicators
    evidence: list[Evidence] = []
    hosts: set[str] = set()
    for g in case.graphs:
        if (
            g.pattern in RING_TREE_PATTERNS
            and 0 < g.nchannels <= FEW_GRAPH_CHANNELS
            and rich(g.host, FEW_GRAPH_CHANNELS_MIN_GPUS)
            and not nic_bound([g.host or ""])
        ):
            kinds = f"type {g.type_intra}/{g.type_inter}" if g.type_intra else f"bw {g.bw_intra:g}"
            observed[f"{RING_TREE_PATTERNS[g.pattern]} graph search nChannels {g.nchannels} ({kinds})"] += 1
            evidence.append(g.evidence)
            hosts.add(g.host or "")
    for comm in case.communicators:
        comm_hosts = sorted({m.host for m in comm.ranks if m.host})
        if comm.channels is None or comm.channels > FEW_COLL_CHANNELS or nic_bound(comm_hosts):
            continue
        poor = [h for h in comm_hosts if rich(h, FEW_COLL_CHANNELS_MIN_GPUS)]
        if poor:
            comms[comm.channels].append(comm.id)
            evidence += [comm.evidence] if comm.evidence else []
            hosts |= set(poor)
    facts = []
    if observed or comms:
        counts = sorted({gpus.get(h, 0) for h in hosts})
        seen = [f"{what}{f' (x{n})' if n > 1 else ''}" for what, n in observed.items()]
        seen += [
            f"{plural(n, 'coll channel')} in communicator {ids[0]}"
            if len(ids) == 1
            else f"{n} coll channels in {len(ids)} communicators"
            for n, ids in sorted(comms.items())
        ]
        listing = ", ".join(seen)
        facts.append(
            f"{listing} on {hosts_text(hosts)} ({'/'.join(map(str, counts))} GPUs with NVLink per host, "
            "where NVLink carries many channels)"
        )
        shaping = [e for e in case.env if e.name in CHANNEL_SHAPERS]
        if shaping:
            settings = ", ".join(f"{e.name}={e.value}" for e in shaping)
            facts.append(f"{settings} set by environment (a graph or topology file decides the channels)")
            evidence += [e.evidence for e in shaping]
    overrides = [e for e in case.env if e.name in CHANNEL_OVERRIDES]
    if overrides:
        settings = ", ".join(f"{e.name}={e.value}" for e in overrides)
        used = sorted({c.channels for c in case.communicators if c.channels is not None})
        result = (
            f" (the communicators use {'/'.join(map(str, used))} coll channels)"
            if used and not (observed or comms)
            else ""
        )
        facts.append(f"channel counts set by environment: {settings}{result}")
        evidence += [e.evidence for e in overrides]
        hosts |= {h for e in overrides for h in e.hosts}
    if not facts:
        return
    yield make_finding(
        "CH001",
        "warning",
        f"few channels: {'; '.join(facts)}",
        evidence=shown(evidence),
        evidence_count=len(evidence),
        hosts=sorted(h for h in hosts if h),
    )
