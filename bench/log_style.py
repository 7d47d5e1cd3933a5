"""How one generated job formats what real logs format differently from site to site.

A benchmark whose lines all look alike measures its own generator: the parser's shape cache
would see one host-name style, one pid width, no timestamps and no launcher tags. A Style is drawn
from the seed, so every job of a benchmark run varies:

* host names: `node017`, `gpu-c07-3`, `dgx-h100-2a` (hex-like), `ip-10-12-4-17` (cloud), `a100x12`;
* pid widths from 3 to 7 digits;
* the socket interface and the HCA names (`ib0`/`bond0`/`enp65s0f0np0`, `mlx5_3`/`mlx5_bond_3`/`ibp12s0`);
* timestamps on INFO lines or not (NCCL_DEBUG_TIMESTAMP_LEVELS=ALL, formats.md A.3);
* a launcher prefix or not (torchrun `[rank5]:`, mpirun `[1,5]<stdout>:`, srun `5: `).

`Style.plain()` is the fixed style of the original generator (node001, ib0, mlx5_N, no prefixes).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

TIMESTAMP_MARK = "\x00"  # where a line's timestamp goes; replaced per block of lines


@dataclass(frozen=True)
class Style:
    host_name: Callable[[int], str]
    pid_low: int
    pid_high: int
    interface: str
    nic_name: Callable[[int], str]
    timestamp_format: str | None  # strftime format, or None: no timestamps on INFO lines
    launcher: Callable[[int], str] | None  # rank -> prefix, or None
    name: str = "plain"

    @staticmethod
    def plain() -> Style:
        return Style(
            host_name=lambda h: f"node{h + 1:03d}",
            pid_low=20_000,
            pid_high=4_000_000,
            interface="ib0",
            nic_name=lambda i: f"mlx5_{i}",
            timestamp_format=None,
            launcher=None,
        )

    def prefix(self, rank: int, head: str) -> str:
        """A line prefix: launcher tag, timestamp mark, then NCCL's `host:pid:tid [dev] NCCL INFO `."""
        tag = self.launcher(rank) if self.launcher else ""
        mark = TIMESTAMP_MARK if self.timestamp_format else ""
        return tag + mark + head


def _host_styles(rng: random.Random) -> list[tuple[str, Callable[[int], str]]]:
    rack = rng.choice("abcdefgh")
    site = rng.randrange(1, 30)
    return [
        ("node", lambda h: f"node{h + 1:03d}"),
        ("rack", lambda h: f"gpu-{chr(ord(rack) + h // 32)}{h % 32:02d}-{h % 4}"),
        ("dgx", lambda h: f"dgx-h100-{h + 0x20:x}"),
        ("cloud", lambda h: f"ip-10-{site}-{h // 250}-{h % 250 + 4}"),
        ("short", lambda h: f"a100x{h}"),
    ]


def choose_style(seed: int) -> Style:
    """A style drawn from `seed` (the same seed gives the same style)."""
    rng = random.Random(seed * 31 + 5)
    host_kind, host_name = rng.choice(_host_styles(rng))
    width = rng.choice([3, 4, 5, 6, 7])
    nic_kind = rng.randrange(3)
    nic_name: Callable[[int], str] = [
        lambda i: f"mlx5_{i}",
        lambda i: f"mlx5_bond_{i}",
        lambda i: f"ibp{12 + 16 * i}s0",
    ][nic_kind]
    launcher_kind = rng.randrange(4)
    launcher: Callable[[int], str] | None = [
        None,
        lambda r: f"[rank{r}]:",
        lambda r: f"[1,{r}]<stdout>:",
        lambda r: f"{r}: ",
    ][launcher_kind]
    timestamp = rng.choice([None, "[%Y-%m-%d %H:%M:%S] ", "[%Y-%m-%d %H:%M:%S.{frac}] "])
    return Style(
        host_name=host_name,
        pid_low=10 ** (width - 1),
        pid_high=10**width - (1000 if width > 3 else 1),  # room for the tids above the pid, where there is any
        interface=rng.choice(["ib0", "bond0", "enp65s0f0np0", "eth0"]),
        nic_name=nic_name,
        timestamp_format=timestamp,
        launcher=launcher,
        name=f"{host_kind} hosts, {width}-digit pids, "
        f"{'timestamps' if timestamp else 'no timestamps'}, "
        f"{['no launcher', 'torchrun tags', 'mpirun tags', 'srun labels'][launcher_kind]}",
    )
