"""Deterministic generator of a large, realistic multi-node NCCL_DEBUG=INFO log.

The log models one training job: 1024 ranks on 128 hosts (``node001`` ..
``node128``), 8 H100 GPUs per host behind an NVSwitch, 8 ``mlx5`` InfiniBand
NICs per host (one rail per GPU), NCCL 2.28-style messages, 32 channels, with
``NCCL_DEBUG=INFO`` and ``NCCL_DEBUG_SUBSYS=INIT,ENV,GRAPH,NET,TUNING``.  Every
line is produced from the NCCL format strings documented in
``shared/knowledge/formats.md`` (sections A and B); nothing is copied from a
real log.

Each rank is one process (``host:pid:tid``, ``cudaDev`` = local rank) and
produces a stream of line blocks:

1. communicator init (banner, bootstrap, NET/IB, GDR, topology dump on the
   first rank of each host, graph search results, ring order and the TUNING
   table on rank 0, trees, ring connections, tuning summary, Init COMPLETE);
2. a barrier (every rank finishes init before any starts communicating);
3. the bulk: lazily created p2p connections, as an all-to-all creates them,
   one peer after another (``[send]``/``[receive] ... /Shared`` over IB with
   PXN, ``P2P/CUMEM/read`` inside a host), with rare WARN lines followed by
   their ``file:line -> N`` propagation chain, and per-collective TUNING lines
   on rank 0;
4. another barrier, then a new communicator (next "epoch") and so on until
   the requested size is reached.

The streams of all ranks written to one file are interleaved in random
blocks, as happens when many processes write to one collected stdout.  Output
is cut at a line boundary once the requested size is reached.

Same arguments give the same bytes: all randomness comes from
``random.Random`` instances seeded from ``--seed``.  ``--files N`` splits the
same job into N files by host groups (``<out>.0`` .. ``<out>.N-1``); the
per-rank streams are identical to the single-file case, only the
interleaving differs.

Usage::

    python bench/generate_log.py --size-mb 100 --out /tmp/bench.log
    python bench/generate_log.py --size-mb 1024 --out /tmp/bench.log --files 4

Sizes are in MiB (1 MB here = 1,048,576 bytes).
"""

# printf-style formatting on purpose: the lines mirror NCCL's C format strings.
# ruff: noqa: UP031

from __future__ import annotations

import argparse
import datetime as _dt
import random
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

from log_style import TIMESTAMP_MARK, Style, choose_style

MB = 1 << 20

NCCL_VERSION = "2.28.3"
CUDA_BUILD_VERSION = "12.9"
CUDA_DRIVER_VERSION = 12090

N_HOSTS = 128
GPUS_PER_HOST = 8
N_RANKS = N_HOSTS * GPUS_PER_HOST
N_CHANNELS = 32
N_GRAPH_CHANNELS = 16  # graph search result, duplicated to N_CHANNELS
P2P_CHANNELS_PER_PEER = 2
BUS_IDS = (0x18000, 0x2A000, 0x3A000, 0x5D000, 0x9A000, 0xAB000, 0xBA000, 0xDB000)
START_TIME = _dt.datetime(2026, 3, 14, 9, 26, 40)

# Probability that one bulk step (one peer) of one rank is followed by a WARN.
WARN_PROBABILITY = 2e-5
# Flush the output buffer every this many characters.
CHUNK_CHARS = 4 * MB

# Tuning table (src/graph/tuning.cc, 2.23+ layout: 7 algorithms, 3 per block).
ALGO_NAMES = ("Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT")
PROTO_NAMES = ("LL", "LL128", "Simple")
FUNC_NAMES = ("Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce")
MAX_THREADS = (
    (512, 512, 512),
    (512, 640, 512),
    (512, 512, 512),
    (512, 512, 512),
    (0, 0, 544),
    (0, 0, 512),
    (0, 0, 512),
)
BASE_LATENCY = (
    (6.8, 14.0, 8.4),
    (6.6, 14.0, 8.4),
    (0.0, 0.0, 12.0),
    (0.0, 0.0, 12.0),
    (0.0, 0.0, 25.0),
    (0.0, 0.0, 25.0),
    (0.0, 0.0, 8.4),
)
BASE_BW = (
    (8.4, 34.5, 45.0),
    (10.8, 44.1, 48.0),
    (0.0, 0.0, 0.0),
    (0.0, 0.0, 0.0),
    (0.0, 0.0, 0.0),
    (0.0, 0.0, 0.0),
    (0.0, 0.0, 0.0),
)


@dataclass(frozen=True)
class RankInfo:
    """Identity of one rank (= one process) of the modelled job."""

    rank: int
    host: int
    local: int
    hostname: str
    pid: int
    ip: str
    info_main: str  # "host:pid:tid [dev] NCCL INFO " of the main thread (after the style's prefix)
    info_async: str  # same for the group/async thread that sets up p2p
    proxy_tid: int  # proxy progress thread (WARN chains)
    style: Style
    nics: tuple[str, ...]


def _ip_of_host(host: int) -> str:
    return f"10.224.{host // 64}.{(host % 64) * 4 + 1}"


def build_job(seed: int, style: Style | None = None, hosts: int = N_HOSTS) -> list[RankInfo]:
    """Return the ranks of the job (of its first `hosts` hosts); pids/tids are distinct per host and seed-derived."""
    style = style or Style.plain()
    rng = random.Random(seed * 7919 + 17)
    nics = tuple(style.nic_name(i) for i in range(GPUS_PER_HOST))
    ranks = []
    for h in range(hosts):
        hostname = style.host_name(h)
        pids = rng.sample(range(style.pid_low, style.pid_high), GPUS_PER_HOST)
        for local, pid in enumerate(pids):
            r = h * GPUS_PER_HOST + local
            tid_async = pid + rng.randrange(1, 900)
            ranks.append(
                RankInfo(
                    rank=r,
                    host=h,
                    local=local,
                    hostname=hostname,
                    pid=pid,
                    ip=_ip_of_host(h),
                    info_main=style.prefix(r, f"{hostname}:{pid}:{pid} [{local}] NCCL INFO "),
                    info_async=style.prefix(r, f"{hostname}:{pid}:{tid_async} [{local}] NCCL INFO "),
                    proxy_tid=pid + rng.randrange(900, 1800),
                    style=style,
                    nics=nics,
                )
            )
    return ranks


def _pointer(rng: random.Random) -> str:
    """A plausible heap pointer as printed by %p (0x7f...)."""
    return "0x%x" % (0x7F0000000000 | (rng.getrandbits(39) & ~0xF))


def comm_id(seed: int, epoch: int) -> str:
    """commId of the communicator created in ``epoch`` (same on all ranks)."""
    return "0x%x" % random.Random(seed * 1_000_003 + epoch).getrandbits(64)


# --------------------------------------------------------------------------
# Job structure: rings and trees.
# --------------------------------------------------------------------------


def ring_local_order(channel: int) -> list[int]:
    """Order of the local GPUs in the ring of ``channel``; it enters and
    leaves every host through NIC ``channel % 8`` (rail of the first GPU)."""
    nic = channel % GPUS_PER_HOST
    return [(nic + i) % GPUS_PER_HOST for i in range(GPUS_PER_HOST)]


def ring_neighbours(rank: int, channel: int) -> tuple[int, int]:
    """(prev, next) of ``rank`` in the ring of ``channel``."""
    host, local = divmod(rank, GPUS_PER_HOST)
    order = ring_local_order(channel)
    i = order.index(local)
    if i > 0:
        prev = host * GPUS_PER_HOST + order[i - 1]
    else:
        prev = ((host - 1) % N_HOSTS) * GPUS_PER_HOST + order[-1]
    if i < GPUS_PER_HOST - 1:
        nxt = host * GPUS_PER_HOST + order[i + 1]
    else:
        nxt = ((host + 1) % N_HOSTS) * GPUS_PER_HOST + order[0]
    return prev, nxt


def ring_sequence(channel: int, start: int = 0) -> list[int]:
    """All ranks of the ring of ``channel``, starting at ``start``."""
    seq = [start]
    cur = ring_neighbours(start, channel)[1]
    while cur != start:
        seq.append(cur)
        cur = ring_neighbours(cur, channel)[1]
    return seq


def _node_tree(host: int, channel: int) -> tuple[int, list[int]]:
    """(parent, children) of ``host`` in the inter-node binary tree; odd
    channels use the mirrored tree (double binary tree)."""
    mirror = channel % 2 == 1
    h = N_HOSTS - 1 - host if mirror else host
    parent = (h - 1) // 2 if h > 0 else -1
    children = [c for c in (2 * h + 1, 2 * h + 2) if c < N_HOSTS]
    if mirror:
        parent = N_HOSTS - 1 - parent if parent >= 0 else -1
        children = [N_HOSTS - 1 - c for c in children]
    return parent, children


def tree_links(rank: int, channel: int) -> tuple[int, list[int]]:
    """(up, [down0, down1, down2]) of ``rank`` in the tree of ``channel``:
    a chain inside the host, its head linked to the heads of other hosts."""
    host, local = divmod(rank, GPUS_PER_HOST)
    order = ring_local_order(channel)
    i = order.index(local)
    downs: list[int] = []
    if i < GPUS_PER_HOST - 1:
        downs.append(host * GPUS_PER_HOST + order[i + 1])
    if i > 0:
        up = host * GPUS_PER_HOST + order[i - 1]
    else:
        parent, children = _node_tree(host, channel)
        up = parent * GPUS_PER_HOST + order[0] if parent >= 0 else -1
        downs.extend(c * GPUS_PER_HOST + order[0] for c in children)
    downs += [-1] * (3 - len(downs))
    return up, downs


# --------------------------------------------------------------------------
# Formatting helpers that follow the NCCL source.
# --------------------------------------------------------------------------


def dump_ring_line(values: list[int], nranks: int, prefix: str) -> str:
    """``dumpLine()`` of src/graph/rings.cc (2.23+): 128-byte buffer,
    ``" %*d"`` per rank, ``...`` at the end when truncated."""
    width = len(str(nranks - 1))
    line = prefix
    for v in values:
        if len(line) >= 127:
            break
        line += " %*d" % (width, v)
    if len(line) >= 128:
        line = line[:124] + "..."
    return line


def topology_dump(ranks_base: int, host: int) -> list[str]:
    """``ncclTopoPrint()`` for one DGX-H100-like host (GRAPH only)."""
    lines = ["=== System : maxBw 48.0 totalBw 370.8 ==="]
    half = GPUS_PER_HOST // 2
    for cpu in range(2):
        lines.append("CPU/0-%x (1/1/4)" % cpu)
        for g in range(cpu * half, (cpu + 1) * half):
            bus = BUS_IDS[g]
            sw = bus - 0x3000
            pad1 = " " * 14
            pad2 = " " * 28
            lines.append("+ PCI[48.0] - PCI/0-%x (1000c0101000a000)" % sw)
            lines.append(pad1 + "+ PCI[48.0] - GPU/0-%x (%d)" % (bus, ranks_base + g))
            lines.append(pad2 + "+ NVL[370.8] - NVS/0-0")
            lines.append(pad1 + "+ PCI[48.0] - NIC/0-%x" % (bus + 0x1000))
            asic = 0xB8CEF60300000000 | (host << 8) | g
            lines.append(pad2 + "+ NET[50.0] - NET/0-%x (0/%x/1/50.000000)" % (g, asic))
        lines.append("+ SYS[22.0] - CPU/0-%x" % (1 - cpu))
    lines.append("==========================================")
    return lines


def graph_dump(pattern: int, bw: float, type_inter: str) -> list[str]:
    """``ncclTopoPrintGraph()`` (2.27.5+ ids) for a ring or tree graph."""
    lines = [
        "Pattern %d, crossNic 0, nChannels %d, bw %f/%f, type NVL/%s, sameChannels 0"
        % (pattern, N_GRAPH_CHANNELS, bw, bw, type_inter)
    ]
    for c in range(N_GRAPH_CHANNELS):
        nic = c % GPUS_PER_HOST
        gpus = "".join(" GPU/0-%x" % BUS_IDS[g] for g in ring_local_order(c))
        lines.append("%2d : NET/0-%x%s NET/0-%x" % (c, nic, gpus, nic))
    return lines


def tuning_table() -> list[str]:
    """Rank 0 TUNING table, 2.23+ layout (three algorithms per block)."""
    lines = []
    n_algos = len(ALGO_NAMES)
    for block in range((n_algos + 2) // 3):
        algos = [a for a in range(block * 3, block * 3 + 3) if a < n_algos]
        lines.append("  Algorithm   |" + "".join(" %14s   %14s   %14s |" % ("", ALGO_NAMES[a], "") for a in algos))
        # The source prints 3 x 3 protocol cells even for a short block.
        lines.append("  Protocol    |" + "".join(" %14s |" % p for _ in range(3) for p in PROTO_NAMES))
        lines.append(" Max NThreads |" + "".join(" %14d |" % MAX_THREADS[a][p] for a in algos for p in range(3)))
        for f, func in enumerate(FUNC_NAMES):
            cells = []
            for a in algos:
                for p in range(3):
                    lat = BASE_LATENCY[a][p] * (1.0 + 0.25 * f) if BASE_BW[a][p] else 0.0
                    bw = BASE_BW[a][p] * (1.0 if f >= 2 else 0.5)
                    cells.append("%8.1f/%6.1f |" % (lat, bw))
            lines.append("%13s |" % func + "".join(cells))
    return lines


def collective_tuning_line(step: int) -> str:
    """Per-collective TUNING line (enqueue.cc, 2.24+), printed by rank 0."""
    func = ("AllReduce", "AllGather", "ReduceScatter", "AllReduce", "Broadcast")[step % 5]
    size = 1 << (3 + (step * 5) % 28)
    if size < 65536:
        algo, proto, hi = "TREE", "LL", min(N_CHANNELS - 1, max(0, size // 8192))
    elif size < 4 * MB:
        algo, proto, hi = "RING", "LL128", N_CHANNELS // 2 - 1
    else:
        algo, proto, hi = "RING", "SIMPLE", N_CHANNELS - 1
    return "%s: %d Bytes -> Algo %s proto %s channel{Lo..Hi}={%d..%d}" % (func, size, algo, proto, 0, hi)


def _timestamp(seconds: float) -> str:
    t = START_TIME + _dt.timedelta(seconds=seconds)
    return t.strftime("[%Y-%m-%d %H:%M:%S] ")


def warn_block(job: list[RankInfo], r: RankInfo, rng: random.Random, seconds: float) -> str:
    """A WARN (2.26+ timestamp, preceded by the blank line NCCL prints) and the
    ``file:line -> N`` INFO chain that follows it."""
    kind = rng.randrange(4)
    tid = r.proxy_tid
    head = "%s:%d:%d [%d] " % (r.hostname, r.pid, tid, r.local)
    tag = r.style.launcher(r.rank) if r.style.launcher else ""
    info = r.style.prefix(r.rank, head + "NCCL INFO ")
    if kind == 0:
        peer = job[rng.randrange(len(job))]
        warn = (
            "transport/net_ib.cc:%d NCCL WARN NET/IB: Got completion from peer %s<%d> with "
            "status=12 opcode=%d len=0 vendor err 129 (%s) hca %s"
            % (
                2365,
                peer.ip,
                rng.randrange(32768, 61000),
                rng.choice((0, 128, 32530)),
                rng.choice(("Send", "Recv")),
                r.nics[r.local],
            )
        )
        chain = [
            "transport/net_ib.cc:2384 -> 6",
            "transport/net.cc:1398 -> 6",
            "proxy.cc:701 -> 6",
            "proxy.cc:879 -> 6 [Progress Thread]",
        ]
    elif kind == 1:
        peer = job[rng.randrange(len(job))]
        warn = "misc/socket.cc:%d NCCL WARN socketProgress: Connection closed by remote peer %s<%d>" % (
            51,
            peer.hostname,
            rng.randrange(32768, 61000),
        )
        chain = ["misc/socket.cc:752 -> 6", "misc/socket.cc:427 -> 6", "proxy.cc:1168 -> 6"]
    elif kind == 2:
        warn = "misc/ibvwrap.cc:197 NCCL WARN Call to ibv_reg_mr failed with error Cannot allocate memory errno 12"
        chain = [
            "transport/net_ib.cc:1812 -> 2",
            "transport/net.cc:743 -> 2",
            "proxy.cc:1342 -> 2 [Progress Thread]",
        ]
    else:
        warn = "include/alloc.h:248 NCCL WARN Cuda failure 2 'out of memory'"
        chain = ["include/alloc.h:250 -> 1", "transport/p2p.cc:219 -> 1", "transport/p2p.cc:527 -> 1"]
    out = [tag, "\n", tag, _timestamp(seconds), head, warn, "\n"]
    out.extend(info + c + "\n" for c in chain)
    return "".join(out)


# --------------------------------------------------------------------------
# Per-rank line streams.
# --------------------------------------------------------------------------


def init_lines(job: list[RankInfo], r: RankInfo, epoch: int, seed: int, rng: random.Random) -> list[str]:
    """Messages (without prefix) of one communicator init on rank ``r``."""
    R, loc, h = r.rank, r.local, r.host
    bus = BUS_IDS[loc]
    comm = _pointer(rng)
    cid = comm_id(seed, epoch)
    out: list[str] = []
    add = out.append
    if epoch == 0:  # printed once per process
        add("NCCL version %s+cuda%s" % (NCCL_VERSION, CUDA_BUILD_VERSION))
        add("cudaDriverVersion %d" % CUDA_DRIVER_VERSION)
        add("Bootstrap: Using %s:%s<0>" % (r.style.interface, r.ip))
        add("NCCL_SOCKET_IFNAME set by environment to %s" % r.style.interface)
        add("NCCL_IB_TIMEOUT set by environment to 22.")
        add("NCCL_CROSS_NIC set by environment to 0.")
        add("NCCL_NVLS_ENABLE set by environment to 0.")
        add("NET/Plugin: libnccl-net.so: cannot open shared object file: No such file or directory")
        add("NET/Plugin: Could not find: libnccl-net.so")
        add(
            "NET/IB : Using%s [RO]; OOB %s:%s<0>"
            % ("".join(" [%d]%s:1/IB" % (i, n) for i, n in enumerate(r.nics)), r.style.interface, r.ip)
        )
        add("Initialized NET plugin IB")
    add("Assigned NET plugin IB to comm")
    add("Using network IB")
    head = "comm %s rank %d nranks %d cudaDev %d nvmlDev %d busId %x commId %s" % (
        comm,
        R,
        N_RANKS,
        loc,
        loc,
        bus,
        cid,
    )
    add("ncclCommInitRank " + head + " - Init START")
    add("Using non-device net plugin version 0")
    for i, n in enumerate(r.nics):
        add("NET/IB : GPU Direct RDMA Enabled for HCA %d '%s'" % (i, n))
    if loc == 0:
        out.extend(topology_dump(h * GPUS_PER_HOST, h))
    cpus = "0-55,112-167" if loc < GPUS_PER_HOST // 2 else "56-111,168-223"
    add(
        "ncclTopoGetCpuAffinity: Affinity for GPU %d is %s. (GPU affinity = %s ; CPU affinity = 0-223)."
        % (loc, cpus, cpus)
    )
    out.extend(graph_dump(1, 24.0, "PIX"))
    out.extend(graph_dump(4, 24.0, "PIX"))
    add(
        "comm %s rank %d nRanks %d nNodes %d localRanks %d localRank %d MNNVL 0"
        % (comm, R, N_RANKS, N_HOSTS, GPUS_PER_HOST, loc)
    )
    if R == 0:
        for c in range(N_CHANNELS):
            add(dump_ring_line(ring_sequence(c), N_RANKS, "Channel %02d/%02d :" % (c, N_CHANNELS)))
    trees = []
    tree_graph = []
    for c in range(N_CHANNELS):
        up, d = tree_links(R, c)
        trees.append(" [%d] %d/%d/%d->%d->%d" % (c, d[0], d[1], d[2], R, up))
        tree_graph.append("Tree %d : %d -> %d -> %d/%d/%d" % (c, up, R, d[0], d[1], d[2]))
    add("Trees" + "".join(trees))
    for c in range(N_CHANNELS):
        prev, nxt = ring_neighbours(R, c)
        add("Ring %02d : %d -> %d -> %d" % (c, prev, R, nxt))
    out.extend(tree_graph)
    add("P2P Chunksize set to 524288")
    for c in range(N_CHANNELS):
        nic = c % GPUS_PER_HOST
        prev, nxt = ring_neighbours(R, c)
        if prev // GPUS_PER_HOST != h:
            add(
                "Channel %02d/%d : %d[%d] -> %d[%d] [receive] via NET/IB/%d/GDRDMA"
                % (c, 0, prev, prev % GPUS_PER_HOST, R, loc, nic)
            )
        if nxt // GPUS_PER_HOST == h:
            add("Channel %02d/%01d : %d[%d] -> %d[%d] via P2P/CUMEM/read" % (c, 0, R, loc, nxt, nxt % GPUS_PER_HOST))
        else:
            proxy = h * GPUS_PER_HOST + nic
            via = "%d" % nic if proxy == R else "%d(%d)" % (nic, proxy)
            add(
                "Channel %02d/%d : %d[%d] -> %d[%d] [send] via NET/IB/%s/GDRDMA"
                % (c, 0, R, loc, nxt, nxt % GPUS_PER_HOST, via)
            )
    add("Connected all rings, use ring PXN 1 GDR 1")
    add("Connected all trees")
    add("threadThresholds 8/8/64 | 8192/8/64 | 512 | 512")
    add(
        "%d coll channels, %d collnet channels, 0 nvls channels, %d p2p channels, %d p2p channels per peer"
        % (N_CHANNELS, N_CHANNELS, N_CHANNELS, P2P_CHANNELS_PER_PEER)
    )
    if R == 0:
        out.extend(tuning_table())
    add("CC Off, workFifoBytes 1048576")
    add("ncclCommInitRank " + head + " - Init COMPLETE")
    t = [
        rng.uniform(0.1, 0.4),
        rng.uniform(0.0, 0.05),
        rng.uniform(0.8, 2.0),
        rng.uniform(0.2, 0.6),
        rng.uniform(0.3, 0.8),
        rng.uniform(0.01, 0.05),
        rng.uniform(1.0, 2.5),
        rng.uniform(0.02, 0.2),
    ]
    t = [round(x, 2) for x in t]
    add(
        "Init timings - ncclCommInitRank: rank %d nranks %d total %.2f (kernels %.2f, alloc %.2f, "
        "bootstrap %.2f, allgathers %.2f, topo %.2f, graphs %.2f, connections %.2f, rest %.2f)"
        % (R, N_RANKS, sum(t), *t)
    )
    return out


def _chunks(lines: list[str], prefix: str, rng: random.Random) -> Iterator[str]:
    """Yield ``lines`` with ``prefix`` in blocks of 1..12 lines."""
    i = 0
    n = len(lines)
    while i < n:
        k = 1 + int(rng.random() * 12)
        yield "".join(prefix + m + "\n" for m in lines[i : i + k])
        i += k


def bulk_segments(
    job: list[RankInfo], r: RankInfo, epoch: int, rng: random.Random, warn_probability: float = WARN_PROBABILITY
) -> Iterator[str]:
    """Lazily created p2p connections of rank ``r`` (one block per peer round)."""
    R, loc, h = r.rank, r.local, r.host
    pre = r.info_async
    main = r.info_main
    half = N_CHANNELS // P2P_CHANNELS_PER_PEER
    t0 = 600.0 * epoch + 30.0
    for d in range(1, N_RANKS):
        send_to = (R + d) % N_RANKS
        recv_from = (R - d) % N_RANKS
        base = d % half
        chans = [base + i * half for i in range(P2P_CHANNELS_PER_PEER)]
        parts = []
        hp, lp = divmod(recv_from, GPUS_PER_HOST)
        if hp != h:
            for c in chans:
                parts.append(
                    f"{pre}Channel {c:02d}/1 : {recv_from}[{lp}] -> {R}[{loc}] "
                    f"[receive] via NET/IB/{loc}/GDRDMA/Shared\n"
                )
        hs, ls = divmod(send_to, GPUS_PER_HOST)
        if hs == h:
            for c in chans:
                parts.append(f"{pre}Channel {c:02d}/1 : {R}[{loc}] -> {send_to}[{ls}] via P2P/CUMEM/read\n")
        else:
            via = f"{ls}" if ls == loc else f"{ls}({h * GPUS_PER_HOST + ls})"
            for c in chans:
                parts.append(
                    f"{pre}Channel {c:02d}/1 : {R}[{loc}] -> {send_to}[{ls}] [send] via NET/IB/{via}/GDRDMA/Shared\n"
                )
        if R == 0 and d % 16 == 0:
            parts.append(main + collective_tuning_line(d // 16 + epoch) + "\n")
        yield "".join(parts)
        if rng.random() < warn_probability:
            yield warn_block(job, r, rng, t0 + d * 0.05)


def trace_line(r: RankInfo, rng: random.Random, ms: float) -> str:
    """A TRACE-level line (builds with TRACE=1): `[dev] ms func:line NCCL TRACE msg` (formats.md A.2)."""
    func, line, msg = rng.choice(
        (
            (
                "ncclProxyProgress",
                1421,
                "Posted send of %d bytes on channel %d" % (rng.randrange(1, 1 << 22), rng.randrange(32)),
            ),
            (
                "ncclTransportP2pSetup",
                318,
                "Connected peer %d channel %d" % (rng.randrange(N_RANKS), rng.randrange(32)),
            ),
            ("ncclCudaCalloc", 96, "Allocated %d bytes at %s" % (rng.randrange(1 << 10, 1 << 26), _pointer(rng))),
            (
                "ncclIbIsend",
                1877,
                "req %s size %d tag %x" % (_pointer(rng), rng.randrange(1 << 20), rng.getrandbits(16)),
            ),
        )
    )
    head = "%s:%d:%d [%d] %f %s:%d NCCL TRACE " % (r.hostname, r.pid, r.proxy_tid, r.local, ms, func, line)
    return r.style.prefix(r.rank, head) + msg + "\n"


DATATYPES = (0, 1, 2, 4, 6, 7, 9)  # ncclInt8 ... ncclFloat32, ncclBfloat16


def coll_segments(r: RankInfo, rng: random.Random) -> Iterator[str]:
    """Per-call COLL lines (NCCL_DEBUG_SUBSYS=COLL) of rank ``r`` on three communicators: the world,
    its tensor-parallel group of 8 and its data-parallel group of 128 (formats.md B.17)."""
    comms = [(_pointer(rng), N_RANKS), (_pointer(rng), GPUS_PER_HOST), (_pointer(rng), N_HOSTS)]
    op_counts = [0, 0, 0]
    stream = _pointer(rng)
    buffers = [_pointer(rng) for _ in range(48)]
    while True:
        parts = []
        for _ in range(1 + int(rng.random() * 6)):
            which = 0 if rng.random() < 0.3 else rng.choice((1, 2))
            comm, nranks = comms[which]
            func = ("AllReduce", "AllGather", "ReduceScatter", "Broadcast")[
                0 if which == 0 else 1 + int(rng.random() * 2.2)
            ]
            parts.append(
                "%s%s: opCount %x sendbuff %s recvbuff %s count %d datatype %d op %d root %d comm %s "
                "[nranks=%d] stream %s\n"
                % (
                    r.info_main,
                    func,
                    op_counts[which],
                    rng.choice(buffers),
                    rng.choice(buffers),
                    rng.choice((1, 4096, 262144, 1 << 20, 25165824)),
                    rng.choice(DATATYPES),
                    0 if func != "Broadcast" else 7,
                    0,
                    comm,
                    nranks,
                    stream,
                )
            )
            op_counts[which] += 1
        yield "".join(parts)


def rank_stream(job: list[RankInfo], r: RankInfo, seed: int, profile: str = "init") -> Iterator[str | None]:
    """Endless stream of line blocks of rank ``r``; ``None`` marks a barrier. Profiles: "init" (one
    communicator after another, lazy p2p connections), "coll" (one init, then per-call COLL lines),
    "trace" (init with TRACE lines and more WARNs, for the mixed profile)."""
    rng = random.Random(seed * 1_000_003 + 7 * r.rank + 1)
    stamp = _stamper(r.style.timestamp_format, rng)
    epoch = 0
    while True:
        yield from map(stamp, _chunks(init_lines(job, r, epoch, seed, rng), r.info_main, rng))
        yield None
        if profile == "coll":
            yield from map(stamp, coll_segments(r, rng))  # endless
        for seg in bulk_segments(job, r, epoch, rng, warn_probability=2e-3 if profile == "trace" else WARN_PROBABILITY):
            if profile == "trace" and rng.random() < 0.4:
                seg += trace_line(r, rng, 1000.0 * epoch + rng.random() * 1000.0)
            yield stamp(seg)
        yield None
        epoch += 1


def _stamper(fmt: str | None, rng: random.Random) -> Callable[[str], str]:
    """Put a timestamp where the style's prefix marked it (one per block of lines, as NCCL prints them
    within a second); without timestamps, the identity."""
    if fmt is None:
        return lambda seg: seg
    clock = [rng.random() * 3600.0]

    def stamp(seg: str) -> str:
        clock[0] += rng.random() * 0.01
        t = START_TIME + _dt.timedelta(seconds=clock[0])
        return seg.replace(TIMESTAMP_MARK, t.strftime(fmt).replace("{frac}", "%06d" % t.microsecond))

    return stamp


# --------------------------------------------------------------------------
# Interleaving and writing.
# --------------------------------------------------------------------------


def _cut(text: str, limit: int) -> str:
    """Cut ``text`` at the first line end at or after ``limit`` characters and
    drop a trailing blank line (the lead-in of a WARN cut off after it)."""
    end = text.find("\n", max(0, limit - 1))
    text = text if end < 0 else text[: end + 1]
    while text.endswith("\n\n"):
        text = text[:-1]
    return text


def write_interleaved(streams: list[Iterator[str | None]], mix_seed: int, target_bytes: int, out: BinaryIO) -> int:
    """Interleave ``streams`` (of ranks, see rank_stream) into ``out`` until ``target_bytes``
    are written (cut at a line boundary).  Returns the bytes written."""
    rng = random.Random(mix_seed)
    active = list(range(len(streams)))
    waiting: list[int] = []
    buf: list[str] = []
    buf_len = 0
    written = 0
    rand = rng.random
    while True:
        if not active:
            if not waiting:
                break
            active, waiting = waiting, []
        i = int(rand() * len(active))
        gen = streams[active[i]]
        for _ in range(1 + int(rand() * 4)):
            seg = next(gen)
            if seg is None:  # barrier: wait for all other ranks
                waiting.append(active[i])
                active[i] = active[-1]
                active.pop()
                break
            buf.append(seg)
            buf_len += len(seg)
        if buf_len >= CHUNK_CHARS or written + buf_len >= target_bytes:
            text = "".join(buf)
            buf.clear()
            buf_len = 0
            done = written + len(text) >= target_bytes
            if done:
                text = _cut(text, target_bytes - written)
            data = text.encode("ascii")
            out.write(data)
            written += len(data)
            if done:
                break
    return written


def output_paths(out: str, files: int) -> list[str]:
    """Paths written for ``files`` files: ``out`` itself, or ``out.0`` ..."""
    return [out] if files == 1 else [f"{out}.{i}" for i in range(files)]


NCCL_PROFILES = ("init", "coll", "mixed")
# logs mostly of other text (bench/job_output.py): a job's stdout, a crash loop, several jobs, random text
OTHER_PROFILES = ("stdout", "crashloop", "jobs", "random")
PROFILES = NCCL_PROFILES + OTHER_PROFILES


def generate(
    out: str, size_bytes: int, seed: int = 1, files: int = 1, profile: str = "init", plain: bool = False
) -> list[str]:
    """Write the log (split into ``files`` host groups) and return the paths. Profiles:
    init: 1024 ranks, 32 channels, communicator after communicator with lazy p2p connections;
    coll: the same job's init, then per-call COLL lines with hex pointers on three communicators;
    mixed: two jobs interleaved in one stream, one with TRACE lines and many WARN chains, the other
    with COLL lines (each job in a style of its own).
    Formatting (host names, pid widths, interfaces, timestamps, launcher tags) is drawn from the
    seed (log_style.py) unless ``plain``."""
    if not 1 <= files <= N_HOSTS:
        raise ValueError(f"--files must be between 1 and {N_HOSTS}")
    if profile not in PROFILES:
        raise ValueError(f"--profile must be one of {', '.join(PROFILES)}")
    if profile in OTHER_PROFILES:
        import job_output  # it builds on this module's streams

        if files != 1:
            raise ValueError(f"--files applies to the NCCL profiles ({', '.join(NCCL_PROFILES)})")
        job_output.write(profile, seed, size_bytes, out)
        return [out]
    jobs = [(seed, "trace" if profile == "mixed" else profile)]
    if profile == "mixed":
        jobs.append((seed + 1, "coll"))
    built = [(build_job(s, Style.plain() if plain else choose_style(s)), s, p) for s, p in jobs]
    paths = output_paths(out, files)
    for i, path in enumerate(paths):
        lo = i * N_HOSTS // files
        hi = (i + 1) * N_HOSTS // files
        streams = [rank_stream(job, r, s, p) for job, s, p in built for r in job if lo <= r.host < hi]
        target = size_bytes // files
        with open(path, "wb", buffering=CHUNK_CHARS) as fh:
            write_interleaved(streams, seed * 104_729 + files * 131 + i, target, fh)
    return paths


def describe(seed: int, profile: str, plain: bool = False) -> str:
    """One line naming the profile and the formatting drawn for it (printed by the benchmark)."""
    if profile in OTHER_PROFILES:
        import job_output

        return job_output.describe(seed, profile)
    seeds = [seed, seed + 1] if profile == "mixed" else [seed]
    return f"{profile}: " + " + ".join("plain formatting" if plain else choose_style(s).name for s in seeds)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=float, default=100.0, help="total size in MiB (default 100)")
    ap.add_argument("--out", required=True, help="output file (prefix with --files > 1)")
    ap.add_argument("--files", type=int, default=1, help="split the job into N files by host groups")
    ap.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    ap.add_argument("--profile", choices=PROFILES, default="init", help="what the log is made of (default init)")
    ap.add_argument("--plain", action="store_true", help="fixed formatting: node001, ib0, no timestamps or tags")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    paths = generate(args.out, int(args.size_mb * MB), args.seed, args.files, args.profile, args.plain)
    print(describe(args.seed, args.profile, args.plain), file=sys.stderr)
    dt = time.perf_counter() - t0
    total = 0
    for p in paths:
        with open(p, "rb") as fh:
            fh.seek(0, 2)
            total += fh.tell()
    print(
        f"wrote {total / MB:.1f} MB in {len(paths)} file(s) in {dt:.1f} s "
        f"({total / MB / dt:.1f} MB/s): {', '.join(paths)}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
