"""What `ncclscope run` will run: sizes, hosts, and one command line per collective (pure functions).

Command shapes (shown by `--dry-run`):

* nccl-tests, one host: `all_reduce_perf -b 8 -e 8G -f 2 -n 20 -w 5 -g G -c 1` (one process, G GPUs).
* nccl-tests under mpirun: `mpirun -np H*G -H h1:G,h2:G --bind-to none -x NCCL_DEBUG ... all_reduce_perf
  ... -g 1 -c 1`: one process per GPU, which needs nccl-tests built with MPI=1; `-x` exports each
  variable the run sets.
* nccl-tests under srun: `srun --nodes H --ntasks-per-node G --gpus-per-node G --export ALL ... -g 1`.
  Every task sees all GPUs of its node (no `--gpus-per-task`, which would hide the peers from NCCL's
  P2P transport); nccl-tests picks the GPU by local rank.
* torch, one host: `python -m torch.distributed.run --standalone --nproc-per-node G -m
  ncclscope.runner.torch_bench COLLECTIVE ...`.
* torch, several hosts: one torchrun per host meeting at a c10d rendezvous on the first host
  (`--nnodes H --rdzv-backend c10d --rdzv-endpoint h1:29500`), started by srun or mpirun (one task
  per host), or with `--launcher torchrun` run here and, by the user, the same command on every host.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from ncclscope.runner.environment import HOST_DUMPS_FLAG, host_dump_command

DEFAULT_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv")
COLLECTIVES = (*DEFAULT_COLLECTIVES, "broadcast", "reduce")
PLAN_GPUS_PER_HOST = 8  # a --dry-run on a machine without GPUs plans for the common 8-GPU host
GPU_MAX_BYTES = "8G"  # large enough for busbw to reach its plateau on NVLink and InfiniBand
CPU_MAX_BYTES = "16M"  # gloo on CPUs: enough to see the curve, quick enough for CI
GPU_TIMEOUT_S = 1800.0  # an 8 GiB alltoall sweep on a slow fabric takes minutes, a hang forever
CPU_TIMEOUT_S = 300.0
CPU_RANKS = 2
RDZV_PORT = 29500
RDZV_ID = "ncclscope-run"  # the same on every host: each host's torchrun must name the same rendezvous
BENCH_MODULE = "ncclscope.runner.torch_bench"
LAUNCHERS = ("none", "mpirun", "srun", "torchrun")
SIZE_RE = re.compile(r"^\s*(\d+)\s*([KMG]?)B?\s*$", re.IGNORECASE)
UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


class PlanError(ValueError):
    """The options do not make a runnable plan; str() says why, in the user's terms."""


def parse_size(text: str, option: str) -> int:
    """Bytes of a size as nccl-tests reads it: 8, 64K, 16M, 8G (powers of 1024)."""
    match = SIZE_RE.match(text)
    if not match:
        raise PlanError(f"{option} {text!r}: not a size (examples: 8, 64K, 16M, 8G)")
    return int(match[1]) * UNITS[match[2].upper()]


def collective_names(requested: list[str] | None) -> list[str]:
    """The collectives to run, in order, each once; `all_reduce_perf` is accepted for `all_reduce`."""
    names: list[str] = []
    for raw in requested or DEFAULT_COLLECTIVES:
        name = raw.strip().lower().removesuffix("_perf")
        if name not in COLLECTIVES:
            raise PlanError(f"unknown collective {raw!r}: choose from {', '.join(COLLECTIVES)}")
        if name not in names:
            names.append(name)
    return names


@dataclass(frozen=True)
class Sweep:
    """The message sizes and iterations of every collective (nccl-tests' -b -e -f -n -w)."""

    min_bytes: str
    max_bytes: str
    factor: int
    iters: int
    warmup: int

    def validate(self) -> None:
        low, high = parse_size(self.min_bytes, "-b"), parse_size(self.max_bytes, "-e")
        if low <= 0 or high < low:
            raise PlanError(f"sizes -b {self.min_bytes} -e {self.max_bytes}: need 0 < MIN <= MAX")
        if self.factor < 2:
            raise PlanError(f"-f {self.factor}: the step factor must be at least 2")
        if self.iters < 1 or self.warmup < 0:
            raise PlanError(f"-n {self.iters} -w {self.warmup}: need at least one iteration and no negative warmup")

    def args(self) -> list[str]:
        sizes = ["-b", self.min_bytes, "-e", self.max_bytes, "-f", str(self.factor)]
        return [*sizes, "-n", str(self.iters), "-w", str(self.warmup)]

    def sizes(self) -> int:
        """How many table rows each collective prints (for the progress bar)."""
        size, high, count = parse_size(self.min_bytes, "-b"), parse_size(self.max_bytes, "-e"), 0
        while size <= high:
            count += 1
            size *= self.factor
        return count


@dataclass(frozen=True)
class Host:
    name: str
    slots: int


@dataclass(frozen=True)
class Layout:
    """Where the ranks run: `hosts` empty means this host only."""

    launcher: str
    ranks_per_host: int
    hosts: list[Host] = field(default_factory=list)

    @property
    def host_count(self) -> int:
        return max(1, len(self.hosts))

    @property
    def total_ranks(self) -> int:
        return sum(h.slots for h in self.hosts) if self.hosts else self.ranks_per_host


def parse_hosts(text: str | None, ranks_per_host: int) -> list[Host]:
    """`h1,h2` (each with -g ranks) or `h1:8,h2:4`."""
    hosts: list[Host] = []
    for item in (text or "").split(","):
        if not item.strip():
            continue
        name, _, slots = item.strip().partition(":")
        if not name or (slots and not slots.isdigit()) or slots == "0":
            raise PlanError(f"--hosts {text!r}: expected host names, each optionally with :RANKS (h1:8,h2:8)")
        hosts.append(Host(name, int(slots) if slots else ranks_per_host))
    return hosts


def check_layout(layout: Layout, backend: str) -> None:
    if layout.ranks_per_host < 1:
        raise PlanError(f"-g {layout.ranks_per_host}: need at least one rank per host")
    if layout.launcher not in LAUNCHERS:
        raise PlanError(f"--launcher {layout.launcher}: choose from {', '.join(LAUNCHERS)}")
    if len(layout.hosts) > 1 and layout.launcher == "none":
        raise PlanError("several --hosts need a launcher: --launcher mpirun, srun or torchrun")
    if backend == "nccl-tests" and layout.launcher == "torchrun":
        raise PlanError("--launcher torchrun starts the torch backend; nccl-tests runs under mpirun or srun")
    uneven = {h.slots for h in layout.hosts} - {layout.ranks_per_host}
    if uneven and (layout.launcher != "mpirun" or backend == "torch"):
        raise PlanError("per-host rank counts (h1:N) need --launcher mpirun with nccl-tests; use -g otherwise")


def plan_steps(
    collectives: list[str],
    binaries: dict[str, str],
    sweep: Sweep,
    layout: Layout,
    env_names: list[str],
    torch_backend: str,
    python: str,
) -> list[tuple[str, list[str]]]:
    """(collective, argv) in order: nccl-tests binaries when given, else the torch benchmark."""
    if binaries:
        return [(c, nccl_tests_command(binaries[c], sweep, layout, env_names)) for c in collectives]
    return [(c, torch_command(c, sweep, layout, python, torch_backend, env_names)) for c in collectives]


def nccl_tests_command(binary: str, sweep: Sweep, layout: Layout, env_names: list[str]) -> list[str]:
    """One nccl-tests invocation: one process with -g GPUs, or one process per GPU under a launcher."""
    tail = [binary, *sweep.args()]
    if layout.launcher == "none":
        return [*tail, "-g", str(layout.ranks_per_host), "-c", "1"]
    test = [*tail, "-g", "1", "-c", "1"]
    if HOST_DUMPS_FLAG in env_names:  # several hosts: one topology and graph dump per host
        test = host_dump_command(test)
    return [*_launcher_prefix(layout, env_names, per_host=None), *test]


def torch_command(
    collective: str, sweep: Sweep, layout: Layout, python: str, torch_backend: str, env_names: list[str]
) -> list[str]:
    """torchrun with the built-in benchmark; several hosts meet at a rendezvous on the first host."""
    bench = ["-m", BENCH_MODULE, collective, *sweep.args(), "--backend", torch_backend, "--check", "1"]
    torchrun = [python, "-m", "torch.distributed.run"]
    if layout.host_count == 1:
        return [*torchrun, "--standalone", "--nproc-per-node", str(layout.ranks_per_host), *bench]
    rendezvous = [
        "--nnodes",
        str(layout.host_count),
        "--nproc-per-node",
        str(layout.ranks_per_host),
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        f"{layout.hosts[0].name}:{RDZV_PORT}",
        "--rdzv-id",
        RDZV_ID,
    ]
    prefix = [] if layout.launcher == "torchrun" else _launcher_prefix(layout, env_names, per_host=1)
    return [*prefix, *torchrun, *rendezvous, *bench]


def each_host_prefix(layout: Layout) -> list[str] | None:
    """The launcher starting one process on every host of a run of several hosts (their own reports are
    taken there); None where ncclscope starts nothing on the other hosts (one host, torchrun)."""
    if layout.launcher not in ("mpirun", "srun") or layout.host_count < 2:
        return None
    return _launcher_prefix(layout, [], per_host=1)


def _launcher_prefix(layout: Layout, env_names: list[str], per_host: int | None) -> list[str]:
    """mpirun or srun starting `per_host` processes on each host (None: one per rank)."""
    if layout.launcher == "mpirun":
        slots = [(h.name, per_host or h.slots) for h in layout.hosts]
        count = sum(n for _, n in slots) if slots else per_host or layout.ranks_per_host
        prefix = ["mpirun", "-np", str(count)]
        if slots:
            prefix += ["-H", ",".join(f"{name}:{n}" for name, n in slots)]
        prefix += ["--bind-to", "none"]
        for name in env_names:
            prefix += ["-x", name]
        return prefix
    tasks = per_host or layout.ranks_per_host
    prefix = ["srun", "--nodes", str(layout.host_count), "--ntasks-per-node", str(tasks)]
    if per_host is None:
        prefix += ["--gpus-per-node", str(layout.ranks_per_host)]
    if layout.hosts:
        prefix += ["--nodelist", ",".join(h.name for h in layout.hosts)]
    return [*prefix, "--export", "ALL"]


def shell_line(argv: list[str]) -> str:
    return shlex.join(argv)


PAIR_MODES = ("exhaustive", "matching")


def host_pairs(hosts: list[Host], mode: str) -> list[tuple[Host, Host]]:
    """The host pairs of a pairwise check. exhaustive: every pair (n(n-1)/2 runs). matching: a ring, each host
    with the next (n runs, two different partners each): a host slow with both partners is the culprit, one
    slow pair of hosts fine elsewhere is a link."""
    if mode not in PAIR_MODES:
        raise PlanError(f"--pairs {mode}: choose from {', '.join(PAIR_MODES)}")
    if len(hosts) < 2:
        raise PlanError("--pairs needs at least two --hosts")
    if mode == "exhaustive" or len(hosts) <= 3:
        return [(a, b) for i, a in enumerate(hosts) for b in hosts[i + 1 :]]
    return [(hosts[i], hosts[(i + 1) % len(hosts)]) for i in range(len(hosts))]
