"""CH002: the graph NCCL's search settled on (GRAPH lines `Pattern ..., bw X/Y, type NVL/PIX`, or its graph
dump's `speedintra`/`typeintra`) is below what the host's links give: inside a host with NVLink, a channel
that goes over PCIe or the CPU (`type PHB/SYS`), or a channel over NVLink at less than one NVLink carries
(NCCL's own per-link figure, data/expected_busbw.json `nccl_nvlink_bw`).

Network-bound graphs are not judged by speed: between hosts NCCL sizes channels to the NICs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ncclscope.diagnose.expectations import reference, spec_by_key
from ncclscope.diagnose.rules.context import Context
from ncclscope.diagnose.rules.env_knobs import widens
from ncclscope.diagnose.rules.registry import make_finding, rule
from ncclscope.diagnose.rules.topo_common import gpus_per_host
from ncclscope.model import Case, Evidence, Finding

NOT_NVLINK = ("PIX", "PXB", "PXN", "P2C", "PHB", "NODE", "SYS")  # intra-host paths over PCIe or the CPU
PATTERNS = {1: "balanced tree", 2: "split tree", 3: "tree", 4: "ring", 5: "NVLS", 6: "CollNet"}
P2P_SETTINGS = ("NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL")


@dataclass
class _Graph:
    """One graph as the log or the dump gives it."""

    where: str  # the host (GRAPH lines) or the dump's file
    pattern: int | None
    nchannels: int | None
    speed: float | None
    type_intra: str | None
    gpus: int | None  # GPUs of the host in one channel, when the channels are listed
    evidence: Evidence | None
    via: str


def _graphs(case: Case) -> list[_Graph]:
    out = [
        _Graph(g.host or "", g.pattern, g.nchannels, g.bw_intra, g.type_intra, None, g.evidence, "GRAPH lines")
        for g in case.graphs
    ]
    for dump in case.graph_dumps:
        for g in dump.graphs:
            gpus = max((sum(1 for d in channel if d.startswith("GPU/")) for channel in g.channels), default=None)
            out.append(_Graph(dump.source, g.pattern, g.nchannels, g.speed_intra, g.type_intra, gpus, g.evidence,
                              "NCCL's graph dump"))  # fmt: skip
    return out


def _nvlink(case: Case, ctx: Context) -> tuple[bool, float | None]:
    """Whether the inputs show NVLink between the GPUs, and one NVLink's bandwidth as NCCL counts it."""
    figures = reference().nccl_nvlink_bw
    sms = {g.sm for dump in case.topology_dumps for g in dump.gpus if g.sm is not None and g.nvlinks}
    if sms:
        return True, min(figures.per_sm.get(str(sm), 0.0) for sm in sms) or None
    shown = any("NVL[" in n for s in case.system_topologies for n in s.nodes) or any(
        cell.startswith("NV") for m in case.topologies for row in m.links.values() for cell in row.values()
    )
    spec = spec_by_key(ctx.platform.key)
    link = spec.link if spec else None
    figure = float(figures.per_link[link]) if link in figures.per_link else None
    return shown or figure is not None, figure


@rule("CH002", "graph-speed-low", severity="warning", needs=["graph"])
def graph_speed_low(ctx: Context) -> Iterable[Finding]:
    """Inside a host whose GPUs have NVLink, the graph NCCL's search settled on goes over PCIe or the CPU
    (`type PHB/SYS`), or runs over NVLink at less than one NVLink carries per channel (e.g. `bw 12/12,
    type NVL/...` on H100, where NCCL counts 20.6 GB/s per link), as the GRAPH lines
    (`Pattern 4, crossNic 0, nChannels 16, bw 40.000000/40.000000, type NVL/PIX`) or the graph dump
    (NCCL_GRAPH_DUMP_FILE: `speedintra`, `typeintra`) say.

    Why: the graph is NCCL's plan before any byte moves: its channels times their speed is the most
    the collective can reach. A plan over PCIe or at a fraction of one NVLink explains a low busbw
    before the benchmark runs, and points at what NCCL could not use: NVLinks down, P2P refused, a
    wrong NCCL_TOPO_FILE or a setting that keeps NCCL off NVLink.

    Fix: Check the NVLinks (`nvidia-smi nvlink -s`, TOPO008) and P2P (`nvidia-smi topo -p2p n`,
    TOPO005, TOPO009); unset NCCL_P2P_DISABLE, NCCL_P2P_LEVEL, NCCL_GRAPH_FILE and NCCL_TOPO_FILE
    unless they are meant; on NVSwitch systems check that the fabric manager runs.

    Sources: NCCL src/graph/search.cc (speed arrays, the search lowers the speed until the channels
    fit) and src/graph/topo.h (NVLink bandwidth per GPU generation); NCCL docs env.rst
    (NCCL_GRAPH_DUMP_FILE, NCCL_P2P_LEVEL)
    """
    case = ctx.case
    has_nvlink, one_link = _nvlink(case, ctx)
    if not has_nvlink:
        return  # no NVLink shown: PCIe hosts are judged by their benchmark, not their graph
    per_host = gpus_per_host(ctx)  # the GPUs the log's processes drive, and those NCCL's system dump lists
    listed = {s.host or "": sum(1 for n in s.nodes if "- GPU/" in n) for s in case.system_topologies}
    settings = [f"{e.name}={e.value}" for e in case.env if e.name in P2P_SETTINGS and not widens(e.name, e.value)]
    cause = f" ({', '.join(sorted(set(settings)))} is set)" if settings else ""
    seen: set[tuple] = set()
    for g in _graphs(case):
        local = g.gpus if g.gpus is not None else max(per_host.get(g.where, 0), listed.get(g.where, 0)) or None
        if local is not None and local < 2:
            continue  # one GPU on the host: no intra-host path to judge
        name = PATTERNS.get(g.pattern or 0, f"pattern {g.pattern}")
        key = (g.where, g.pattern, g.type_intra, g.speed)
        if key in seen:
            continue  # every rank prints the same graph
        seen.add(key)
        if g.type_intra in NOT_NVLINK:
            problem = (
                f"runs its {g.nchannels} channel(s) inside the host over {g.type_intra}, where the GPUs have NVLink"
            )
        elif g.type_intra == "NVL" and g.speed is not None and one_link is not None and g.speed < one_link:
            problem = (
                f"settled on {g.speed:g} GB/s per channel over NVLink ({g.nchannels} channels), below one NVLink's "
                f"{one_link:g} GB/s"
            )
        else:
            continue
        yield make_finding(
            "CH002", "warning", f"on {g.where or 'the host'}: NCCL's {name} {problem}{cause} ({g.via})",
            evidence=[g.evidence] if g.evidence else [], evidence_count=1, hosts=[g.where] if g.where else [],
        )  # fmt: skip
