"""What the TOPO rules and CH001 share: reading a topology matrix (GPU pairs, NVLink, labels) and
what the log says about each host's GPUs and NICs.

The `nvidia-smi topo -m` matrix (Case.topologies) gives the wiring; the NCCL log gives what NCCL made
of it. A matrix names no host: when the Case holds one matrix and the log one host, the matrix is
taken to be that host's.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator

from ncclscope.case.topology import NV_TOKEN, PCIE_RANK, link, split_label
from ncclscope.common.words import number_ranges
from ncclscope.diagnose.rules.context import Context
from ncclscope.model import Case, Evidence, TopologyMatrix

PAIRS_SHOWN = 6  # blocks of GPU pairs written out in one message
HOSTS_SHOWN = 3


def nvlinks(token: str) -> int:
    match = NV_TOKEN.match(token)
    return int(match[1]) if match else 0


def pcie(token: str) -> str | None:
    """The PCIe class of a cell, SOC read as SYS; None for NV#, X and unknown tokens."""
    if token not in PCIE_RANK:
        return None
    return "SYS" if token == "SOC" else token


def gpu_pairs(topo: TopologyMatrix) -> Iterator[tuple[str, str]]:
    return itertools.combinations(topo.gpus, 2)


def nvlink_between(topo: TopologyMatrix, a: str, b: str) -> int:
    return nvlinks(link(topo, a, b))


def common_nvlink_peer(topo: TopologyMatrix, a: str, b: str) -> str | None:
    """A GPU with NVLink to both: NCCL routes a-b through it (NVB path, `P2P/indirect`)."""
    for g in topo.gpus:
        if g not in (a, b) and nvlink_between(topo, a, g) and nvlink_between(topo, g, b):
            return g
    return None


def order(label: str) -> tuple[str, int]:
    return split_label(label) or (label, -1)


def labels(labels: Iterable[str]) -> str:
    """GPU0-3, GPU0,2,5-7: device labels with their numbers compressed."""
    groups: dict[str, list[int]] = defaultdict(list)
    plain: list[str] = []
    for label in labels:
        split = split_label(label)
        if split:
            groups[split[0]].append(split[1])
        else:
            plain.append(label)
    out = [f"{prefix}{number_ranges(numbers)}" for prefix, numbers in groups.items()]
    return ", ".join(out + sorted(set(plain)))


def components(pairs: set[tuple[str, str]]) -> list[set[str]]:
    neighbours: dict[str, set[str]] = defaultdict(set)
    for a, b in pairs:
        neighbours[a].add(b)
        neighbours[b].add(a)
    seen: set[str] = set()
    out = []
    for start in sorted(neighbours, key=order):
        if start in seen:
            continue
        component, todo = set(), [start]
        while todo:
            node = todo.pop()
            if node not in component:
                component.add(node)
                todo.extend(neighbours[node] - component)
        seen |= component
        out.append(component)
    return out


def pair_blocks(pairs: set[tuple[str, str]]) -> list[str]:
    """Compact descriptions of a set of device pairs, one per complete block.

    A clique reads 'all pairs of GPU0-3'; a complete bipartite block reads 'GPU0-3 <-> GPU4-7'
    (devices with the same partners are grouped, so the pairs between two groups are all there).
    """
    out: list[str] = []
    for component in components(pairs):
        inside = {p for p in pairs if p[0] in component}
        n = len(component)
        if n > 2 and len(inside) == n * (n - 1) // 2:
            out.append(f"all pairs of {labels(sorted(component, key=order))}")
            continue
        partners: dict[str, set[str]] = defaultdict(set)
        for a, b in inside:
            partners[a].add(b)
            partners[b].add(a)
        classes: dict[frozenset[str], list[str]] = {}
        for node in sorted(component, key=order):
            classes.setdefault(frozenset(partners[node]), []).append(node)
        ordered = list(classes.items())
        for i, (key_a, members_a) in enumerate(ordered):
            for _key_b, members_b in ordered[i + 1 :]:
                if members_b[0] in key_a:
                    out.append(f"{labels(members_a)} <-> {labels(members_b)}")
    return out


def pairs_text(pairs: set[tuple[str, str]]) -> str:
    blocks = pair_blocks(pairs)
    text = "; ".join(blocks[:PAIRS_SHOWN])
    if len(blocks) > PAIRS_SHOWN:
        text += f"; ... ({len(blocks) - PAIRS_SHOWN} more)"
    return text


def where(topo: TopologyMatrix) -> str:
    return f"{topo.source}:{topo.line}"


def row_text(topo: TopologyMatrix, device: str) -> str:
    return "  ".join([device] + [topo.links.get(device, {}).get(d, "") for d in topo.devices])


def matrix_evidence(topo: TopologyMatrix, devices: Iterable[str] = ()) -> list[Evidence]:
    """The header line, then the rows of the devices involved (rows follow the header in order).

    The matrix keeps its cells, not its raw lines, so the rows are written back from the cells.
    """
    wanted = set(devices)
    if topo.row_evidence:  # read from lines that are not this matrix's rows (rocm-smi): those lines
        return [e for device in topo.devices if device in wanted for e in topo.row_evidence.get(device, [])]
    evidence = [Evidence(source=topo.source, line=topo.line, text="  ".join(["", *topo.devices]))]
    if topo.problems:  # a row could not be read: row numbers cannot be trusted
        return evidence
    for index, device in enumerate(topo.devices):
        if device in wanted:
            evidence.append(Evidence(source=topo.source, line=topo.line + 1 + index, text=row_text(topo, device)))
    return evidence


def matrix_hosts(ctx: Context) -> list[str]:
    """The host a matrix belongs to, when that is unambiguous."""
    return list(ctx.hosts) if len(ctx.case.topologies) == 1 and len(ctx.hosts) == 1 else []


def hosts_like_matrix(ctx: Context) -> list[str]:
    """The hosts a single matrix describes: all hosts of the job, which are taken to be alike."""
    return list(ctx.hosts) if len(ctx.case.topologies) == 1 else []


def nic_label(topo: TopologyMatrix, nic: str) -> str:
    name = topo.nic_names.get(nic)
    return f"{nic} ({name})" if name and name != nic else nic


def matrix_has_nvlink(topo: TopologyMatrix) -> bool:
    return any(nvlink_between(topo, a, b) for a, b in gpu_pairs(topo))


# ------------------------------------------------------------------------------------------ log
def gpus_per_host(ctx: Context) -> dict[str, int]:
    """GPUs per host: the devices its processes drive, the matrix's, the platform's. Built once per analysis
    (two rules read it); each caller gets its own dict."""
    return dict(ctx.once("gpus_per_host", _gpus_per_host))


def _gpus_per_host(ctx: Context) -> dict[str, int]:
    devices: dict[str, set[int]] = defaultdict(set)
    for process in ctx.case.processes:
        if process.host:
            devices[process.host].update(process.cuda_devs)
    for comm in ctx.case.communicators:
        for member in comm.ranks:
            if member.host and member.cuda_dev is not None:
                devices[member.host].add(member.cuda_dev)
    counts = {host: len(devs) for host, devs in devices.items()}
    for host in hosts_like_matrix(ctx):
        counts[host] = max(counts.get(host, 0), len(ctx.case.topologies[0].gpus))
    if ctx.platform.gpus_per_host:
        for host in ctx.hosts:
            counts[host] = max(counts.get(host, 0), ctx.platform.gpus_per_host)
    return counts


def nvlink_hosts(ctx: Context) -> set[str]:
    """Hosts whose GPUs the inputs show joined by NVLink."""
    case = ctx.case
    hosts = {t.host for t in case.system_topologies if t.host and any("NVL[" in n for n in t.nodes)}
    hosts |= {g.host for g in case.graphs if g.host and (g.type_intra or "").upper() in ("NVL", "NVB")}
    hosts |= {m.host for m in case.messages if m.host and m.family == "nvls_support" and not m.fields.get("nvls_not")}
    hosts |= {e.host for e in case.edges if e.host and e.transport.startswith(("P2P/indirect", "P2P/MNNVL"))}
    hosts |= {r.host for r in case.p2p if r.host and r.kind == "disabled_on_nvlink"}
    if any(matrix_has_nvlink(t) for t in case.topologies):
        hosts |= set(hosts_like_matrix(ctx))
    if (ctx.platform.nvlink_links or 0) > 0 or ctx.platform.nvswitch:
        hosts |= set(ctx.hosts)
    return hosts


def rdma_nics_per_host(case: Case) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for device in case.net_devices:
        if device.transport.upper() != "SOCKET":
            counts[device.host] += 1
    return counts


def hosts_text(hosts: Iterable[str]) -> str:
    names = sorted(set(hosts))
    if len(names) <= HOSTS_SHOWN:
        return ", ".join(names)
    return f"{', '.join(names[:HOSTS_SHOWN])} and {len(names) - HOSTS_SHOWN} more hosts"


def socket_lines(case: Case) -> list[Evidence]:
    """Lines showing NCCL on its socket transport: NET/Socket connections and device lists."""
    evidence = [e for key, e in case.connections.examples.items() if key.upper().startswith("NET/SOCKET")]
    return evidence + [d.evidence for d in case.net_devices if d.transport.upper() == "SOCKET"]
