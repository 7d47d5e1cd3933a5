"""A generated fleet: one nccl-tests output per node, and one per node pair, with known faults.

What a nightly health check leaves behind: every node ran `all_reduce_perf -b 8 -e 8G -f 2 -g 8` with
NCCL_DEBUG=INFO (so NCCL's version, driver and settings lines are interleaved with the table), and a
subset of nodes ran the same test in pairs (2 nodes x 8 GPUs over the network). The faults are chosen
by the options and returned as the truth that `ncclscope fleet` must find:
  slow       nodes whose busbw is about 55-65% of the healthy figure (a degraded NVSwitch, a bad GPU)
  failed     a node whose test died (`Test NCCL failure`, no table)
  missing    a node of the host list with no output
  version    a node with another NCCL (and another cuda driver)
  bad_host   in the pairwise set, a node every pair of which is slow (its NIC)
  bad_link   in the pairwise set, one slow pair of two healthy nodes (a cable)
Values vary the way real runs vary: each node's figures jitter by a few percent, pids, bus ids and
timings differ, and busbw rises with size as a real curve does.

Usage::

    python bench/generate_fleet.py OUT_DIR [--hosts 64] [--pair-hosts 12] [--seed 1] [--regress HOST]
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path

GPUS = 8
SIZES = [8 * 2**k for k in range(31)]  # 8 B .. 8 GiB, -f 2
HEALTHY_NODE_BUSBW = 480.0  # GB/s at 8 GiB: what 8x H100 on NVSwitch reach (data/expected_busbw.json)
HEALTHY_PAIR_BUSBW = 370.0  # GB/s: 2 nodes x 8 H100 over 8x 400G NDR
NCCL = ("2.21.5", 22105, 12040)
OTHER_NCCL = ("2.18.3", 21803, 12020)
BUS_IDS = ["19", "3b", "4c", "5d", "9b", "bb", "cb", "db"]


@dataclass
class Truth:
    """What the generated fleet holds, for the tests and the benchmark to check `fleet` against."""

    hosts: list[str]
    slow: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    version: list[str] = field(default_factory=list)
    pair_hosts: list[str] = field(default_factory=list)
    bad_host: str | None = None
    bad_link: list[str] = field(default_factory=list)
    regressed: list[str] = field(default_factory=list)
    files: int = 0


def host_name(i: int, style: int) -> str:
    return [f"gpu-h100-{i:03d}", f"dgx{i:02d}", f"node{i:04d}.cluster.local"][style % 3]


def generate(
    out: Path,
    hosts: int = 64,
    pair_hosts: int = 12,
    seed: int = 1,
    slow: int = 3,
    regress: list[str] | None = None,
    style: int = 0,
) -> Truth:
    """Write the fleet under `out` (nodes/, pairs/, hosts.txt) and return its truth."""
    rng = random.Random(seed)
    names = [host_name(i + 1, style) for i in range(hosts)]
    picks = rng.sample(names, slow + 3)
    truth = Truth(hosts=names, slow=sorted(picks[:slow]), failed=[picks[slow]], missing=[picks[slow + 1]])
    truth.version = [picks[slow + 2]]
    truth.regressed = sorted(regress or [])
    (out / "nodes").mkdir(parents=True, exist_ok=True)
    (out / "hosts.txt").write_text("".join(f"{h}\n" for h in names))
    for host in names:
        if host in truth.missing:
            continue
        factor = rng.uniform(0.97, 1.02)
        if host in truth.slow:
            factor = rng.uniform(0.55, 0.65)
        if host in truth.regressed:
            factor *= 0.8
        nccl = OTHER_NCCL if host in truth.version else NCCL
        text = node_output(rng, [host], HEALTHY_NODE_BUSBW * factor, nccl, failed=host in truth.failed)
        (out / "nodes" / f"{host}.txt").write_text(text)
        truth.files += 1
    if pair_hosts:
        healthy = [h for h in names if h not in {*truth.slow, *truth.failed, *truth.missing, *truth.version}]
        members = sorted(rng.sample(healthy, pair_hosts))
        truth.pair_hosts = members
        truth.bad_host = members[rng.randrange(len(members))]
        others = [h for h in members if h != truth.bad_host]
        truth.bad_link = sorted(rng.sample(others, 2))
        (out / "pairs").mkdir(exist_ok=True)
        for i, a in enumerate(members):
            for b in members[i + 1 :]:
                factor = rng.uniform(0.97, 1.02)
                if truth.bad_host in (a, b):
                    factor = rng.uniform(0.35, 0.45)
                elif sorted([a, b]) == truth.bad_link:
                    factor = rng.uniform(0.5, 0.6)
                text = node_output(rng, [a, b], HEALTHY_PAIR_BUSBW * factor, NCCL)
                (out / "pairs" / f"{a}__{b}.txt").write_text(text)
                truth.files += 1
    (out / "truth.json").write_text(json.dumps(asdict(truth), indent=1))
    return truth


def node_output(
    rng: random.Random, hosts: list[str], peak: float, nccl: tuple[str, int, int], failed: bool = False
) -> str:
    """One `all_reduce_perf -g 8` output (one process per host) with NCCL_DEBUG=INFO lines."""
    version, code, driver = nccl
    nranks = GPUS * len(hosts)
    pids = [rng.randrange(2000, 99999) for _ in hosts]
    out = [
        f"# nccl-tests version 2.17.9 nccl-headers={code} nccl-library={code}",
        "# Collective test starting: all_reduce_perf",
        f"# nThread 1 nGpus {GPUS} minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 "
        "agg iters: 1 validation: 1 graph: 0",
        "#",
        "# Using devices",
    ]
    for h, (host, pid) in enumerate(zip(hosts, pids, strict=True)):
        for g in range(GPUS):
            out.append(
                f"#  Rank {h * GPUS + g:2d} Group  0 Pid {pid:6d} on {host:>10s} device  {g} "
                f"[0000:{BUS_IDS[g]}:00] NVIDIA H100 80GB HBM3"
            )
    for host, pid in zip(hosts, pids, strict=True):
        tid = pid + rng.randrange(1, 300)
        prefix = f"{host}:{pid}:{pid}"
        out += [
            f"{prefix} [0] NCCL INFO Bootstrap : Using eth0:10.{rng.randrange(256)}.{rng.randrange(256)}.7<0>",
            f"{prefix} [0] NCCL INFO cudaDriverVersion {driver}",
            f"{prefix} [0] NCCL INFO NCCL version {version}+cuda{driver // 1000}.{driver % 1000 // 10}",
            f"{prefix} [0] NCCL INFO NCCL_IB_HCA set by environment to mlx5",
            f"{host}:{pid}:{tid} [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.0.0.7<0>",
            f"{host}:{pid}:{tid} [0] NCCL INFO Using network IB",
        ]
    out += [
        "#",
        f"#{'out-of-place':>74s}{'in-place':>31s}          ",
        "#       size         count      type   redop    root"
        "     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong ",
        "#        (B)    (elements)                        "
        "       (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)         ",
    ]
    if failed:
        out.append(
            f"{hosts[0]}: Test NCCL failure common.cu:1005 'unhandled cuda error (run with NCCL_DEBUG=INFO for "
            "details) / Cuda failure 'uncorrectable ECC error encountered''"
        )
        out.append(f" .. {hosts[0]} pid {pids[0]}: Test failure common.cu:891")
        return "\n".join(out) + "\n"
    factor = 2 * (nranks - 1) / nranks
    total = 0.0
    latency = rng.uniform(22.0, 30.0)  # microseconds: the small-size floor
    for size in SIZES:
        row = [size, size // 4, "float", "sum", -1]
        cells = []
        for _ in range(2):
            time_us = (latency + size / (peak / factor * 1e3)) * rng.uniform(1.0, 1.015)
            algbw = size / (time_us * 1e3)
            bw = algbw * factor
            total += bw
            cells.append(f"{time_us:8.1f}  {algbw:6.2f}  {bw:6.2f}  {0:6d}")
        out.append(f"{row[0]:12d}  {row[1]:12d}  {row[2]:>8s}  {row[3]:>6s}  {row[4]:6d}  " + "  ".join(cells))
    out += [
        "# Out of bounds values : 0 OK",
        f"# Avg bus bandwidth    : {total / (2 * len(SIZES)):.4g} ",
        "#",
        "# Collective test concluded: all_reduce_perf",
        "#",
    ]
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--hosts", type=int, default=64)
    parser.add_argument("--pair-hosts", type=int, default=12)
    parser.add_argument("--slow", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--regress", action="append", default=[], help="a host whose busbw drops by 20%%")
    args = parser.parse_args()
    truth = generate(args.out, args.hosts, args.pair_hosts, args.seed, args.slow, args.regress)
    print(json.dumps(asdict(truth), indent=1))


if __name__ == "__main__":
    main()
