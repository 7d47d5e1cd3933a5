"""ncclscope's built-in benchmark: torch.distributed collectives, timed and checked, printed as nccl-tests tables.

Run it under torchrun, one process per GPU (or per CPU rank with gloo)::

    python -m torch.distributed.run --standalone --nproc-per-node 2 -m ncclscope.runner.torch_bench \\
        all_reduce all_gather -b 1K -e 1G -f 2 -n 20 -w 5

It measures what nccl-tests measures and prints it the way nccl-tests v2.17.3+ does (formats.md C.2-C.6), so that
ncclscope's nccl-tests parser reads each collective as a run of that collective: `# Collective test starting:
all_reduce_perf`, the `# nThread` line, `# Using devices` with one line per rank, the three header lines, one row per
size (flushed at once: the runner shows progress from it), `# Out of bounds values`, `# Avg bus bandwidth` and
`# Collective test concluded`. Only rank 0 prints. A first comment line per block names this benchmark, torch, the
backend and (with NCCL) its version, so that nobody takes the output for nccl-tests'; no `# nccl-tests version` line
is printed.

Semantics, as nccl-tests (C.5, C.9): the size column is max(send, receive) bytes, the count column the per-rank count
(per peer for alltoall); algbw = size / time (1 GB = 1e9 B), busbw = algbw x 2(n-1)/n (all_reduce), (n-1)/n
(all_gather, reduce_scatter, alltoall) or 1 (broadcast, reduce, sendrecv); the time is us per iteration, averaged over
ranks (`-a 1`, nccl-tests' default; `-a 0|2|3` take rank 0's, the minimum or the maximum). The data check fills every
input with small integers that depend on rank and position (exact in every supported type), runs the collective once
more and counts the elements that differ from the expected result; #wrong is that count summed over ranks, and
`Out of bounds values` the number of checks (size x place) that found any.

Where torch or gloo differ from NCCL's API, and what is done instead:
- torch has no out-of-place all_reduce, broadcast or reduce: their out-of-place column runs the collective on a
  separate output buffer that holds a copy of the input (the copy is made before timing and is not timed).
- gloo reads a send buffer while the data received into the same buffer may already overwrite it, so in-place alltoall
  and sendrecv on gloo receive into a scratch buffer and copy it back (the copy is timed, as part of the op). With NCCL
  they use one buffer, as nccl-tests does, and their in-place result is not checked (#wrong N/A, as in nccl-tests):
  peers write into the buffer being sent from, so it is undefined.
- gloo has every collective of the runner's default set in torch 2.13 (reduce_scatter included), so nothing is
  composed or skipped.
- sendrecv is a ring: each rank sends to rank+1 and receives from rank-1 (batch_isend_irecv).
- On CPU the device line reads `device <local rank> [cpu] <CPU model>`: no bus id exists, and the brackets stay so
  that nccl-tests readers still parse it.

Exit status: 0; 1 when a collective fails or times out (`--timeout`, the process group's timeout; a one-line reason on
stderr) or when a data check found wrong elements (as nccl-tests); 2 for a wrong command line.

For tests only: NCCLSCOPE_TORCH_BENCH_CORRUPT=1 makes one rank change one element of every result it checks, so a
test can see #wrong > 0 reach the table.
"""

from __future__ import annotations

import argparse
import inspect
import os
import platform
import socket
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

from ncclscope import __version__
from ncclscope.runner import plan
from ncclscope.runner.environment import host_dump_env

CORRUPT_ENV = "NCCLSCOPE_TORCH_BENCH_CORRUPT"

# nccl-tests' type names -> torch dtypes. Inputs stay within 1..8, sums within 8n: exact in all of them.
DTYPES = {
    "float": torch.float32,
    "double": torch.float64,
    "half": torch.float16,
    "bfloat16": torch.bfloat16,
    "int32": torch.int32,
    "int64": torch.int64,
}

# nccl-tests' -a: how the time of each rank becomes the time printed.
AVERAGE_MODES = {0: "rank 0", 1: "average", 2: "minimum", 3: "maximum"}


class BenchFailure(Exception):
    """A collective failed or timed out; the message is the one-line reason."""


# ---------------------------------------------------------------------------------------------
# The collectives


@dataclass(frozen=True)
class Collective:
    """One collective as nccl-tests measures it: its buffers, its bus factor, and the expected result."""

    name: str
    redop: str
    root: int
    every_rank_in_size: bool  # the size column counts every rank's part (count column is per rank)
    copy_in: bool  # torch has no out-of-place form: the op runs on the output buffer, filled from the input first

    def bus_factor(self, nranks: int) -> float:
        if self.name == "all_reduce":
            return 2 * (nranks - 1) / nranks
        if self.every_rank_in_size:
            return (nranks - 1) / nranks
        return 1.0

    def numels(self, count: int, nranks: int) -> tuple[int, int]:
        """(send, receive) elements for a per-rank count."""
        if self.name == "all_gather":
            return count, count * nranks
        if self.name == "reduce_scatter":
            return count * nranks, count
        if self.name == "alltoall":
            return count * nranks, count * nranks
        return count, count

    def in_place_views(self, buf: torch.Tensor, count: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(send, receive) views of one buffer: each rank's part sits at rank x count, as in NCCL."""
        part = buf[rank * count : (rank + 1) * count]
        if self.name == "all_gather":
            return part, buf
        if self.name == "reduce_scatter":
            return buf, part
        return buf, buf

    def checked_on(self, rank: int) -> bool:
        """reduce leaves a result on the root only."""
        return self.name != "reduce" or rank == self.root

    def checks_in_place(self) -> bool:
        """alltoall and sendrecv in place read the buffer that peers are writing into: the result is undefined, and
        nccl-tests checks none (its in-place #wrong cell reads N/A, src/alltoall.cu and sendrecv.cu). Checking it
        counted NCCL's races as wrong results (2 ranks on an H200, 2026-11-28)."""
        return self.name not in ("alltoall", "sendrecv")

    def expected(self, rank: int, nranks: int, count: int, like: torch.Tensor) -> torch.Tensor:
        """The receive buffer of `rank` after the collective, from every rank's input pattern."""
        if self.name in ("all_reduce", "reduce"):
            return sum(pattern(r, 0, count, like) for r in range(nranks))  # type: ignore[return-value]
        if self.name == "all_gather":
            return torch.cat([pattern(r, 0, count, like) for r in range(nranks)])
        if self.name == "reduce_scatter":
            return sum(pattern(r, rank * count, count, like) for r in range(nranks))  # type: ignore[return-value]
        if self.name == "alltoall":
            return torch.cat([pattern(r, rank * count, count, like) for r in range(nranks)])
        if self.name == "broadcast":
            return pattern(self.root, 0, count, like)
        return pattern((rank - 1) % nranks, 0, count, like)  # sendrecv: from the previous rank of the ring


COLLECTIVES = {
    c.name: c
    for c in (
        Collective("all_reduce", "sum", -1, every_rank_in_size=False, copy_in=True),
        Collective("all_gather", "none", -1, every_rank_in_size=True, copy_in=False),
        Collective("reduce_scatter", "sum", -1, every_rank_in_size=True, copy_in=False),
        Collective("alltoall", "none", -1, every_rank_in_size=True, copy_in=False),
        # nccl-tests prints an op name for sendrecv although nothing is reduced (C.5)
        Collective("sendrecv", "sum", -1, every_rank_in_size=False, copy_in=False),
        Collective("broadcast", "none", 0, every_rank_in_size=False, copy_in=True),
        Collective("reduce", "sum", 0, every_rank_in_size=False, copy_in=True),
    )
}


def pattern(rank: int, start: int, count: int, like: torch.Tensor) -> torch.Tensor:
    """The input of `rank` at positions start..start+count: integers 1..8, exact in every supported type."""
    positions = torch.arange(start, start + count, device=like.device, dtype=torch.int64)
    return ((positions + 3 * rank) % 8 + 1).to(like.dtype)


# ---------------------------------------------------------------------------------------------
# Running one collective


@dataclass
class Group:
    """This process's view of the job."""

    rank: int
    nranks: int
    device: torch.device
    backend: str

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def collective_op(coll: Collective, group: Group) -> Callable[[torch.Tensor, torch.Tensor], None]:
    """The torch.distributed call of a collective from a send to a receive buffer."""
    # torch 2.13 renamed the tensor forms; older versions (the runner extra allows >= 2.1) have the old names
    all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    reduce_scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    ring_next, ring_prev = (group.rank + 1) % group.nranks, (group.rank - 1) % group.nranks

    def sendrecv(send: torch.Tensor, recv: torch.Tensor) -> None:
        ops = [dist.P2POp(dist.isend, send, ring_next), dist.P2POp(dist.irecv, recv, ring_prev)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()

    ops: dict[str, Callable[[torch.Tensor, torch.Tensor], None]] = {
        "all_reduce": lambda send, recv: dist.all_reduce(recv),
        "all_gather": lambda send, recv: all_gather(recv, send),
        "reduce_scatter": lambda send, recv: reduce_scatter(recv, send),
        "alltoall": lambda send, recv: dist.all_to_all_single(recv, send),
        "sendrecv": sendrecv,
        "broadcast": lambda send, recv: dist.broadcast(recv, coll.root),
        "reduce": lambda send, recv: dist.reduce(recv, coll.root),
    }
    op = ops[coll.name]
    if group.backend != "gloo" or coll.name not in ("alltoall", "sendrecv"):
        return op

    def staged(send: torch.Tensor, recv: torch.Tensor) -> None:
        if send.data_ptr() != recv.data_ptr():
            op(send, recv)
            return
        scratch = torch.empty_like(recv)
        op(send, scratch)
        recv.copy_(scratch)

    return staged


@dataclass(frozen=True)
class Measurement:
    """One place (out-of-place or in-place) of one row, as rank 0 prints it."""

    time_us: float
    algbw: float
    busbw: float
    wrong: int | None


@dataclass(frozen=True)
class Settings:
    """The command line, once checked."""

    collectives: list[Collective]
    min_bytes: int
    max_bytes: int
    factor: int
    iters: int
    warmup: int
    dtype_name: str
    check: bool
    average: int
    timeout: float

    @property
    def dtype(self) -> torch.dtype:
        return DTYPES[self.dtype_name]

    def sizes(self) -> Iterator[int]:
        size = self.min_bytes
        while size <= self.max_bytes:
            yield size
            size *= self.factor


class Bench:
    """Times and checks the collectives of one run on one rank."""

    def __init__(self, settings: Settings, group: Group) -> None:
        self.settings = settings
        self.group = group
        self.corrupt = os.environ.get(CORRUPT_ENV) == "1"

    def counts(self, coll: Collective, size: int) -> tuple[int, int]:
        """(per-rank count, size column) of a requested size, rounded down as nccl-tests does."""
        elements = size // self.settings.dtype.itemsize
        count = elements // self.group.nranks if coll.every_rank_in_size else elements
        send, recv = coll.numels(count, self.group.nranks)
        return count, max(send, recv) * self.settings.dtype.itemsize

    def measure(self, coll: Collective, count: int, size: int, in_place: bool) -> Measurement:
        send, recv = self.buffers(coll, count, in_place)
        op = collective_op(coll, self.group)
        time_us = self.timed(lambda: op(send, recv))
        algbw = size / time_us / 1e3 if time_us > 0 else 0.0
        checked = self.settings.check and (coll.checks_in_place() or not in_place)
        wrong = self.check(coll, count, in_place, op) if checked else None
        return Measurement(time_us, algbw, algbw * coll.bus_factor(self.group.nranks), wrong)

    def buffers(self, coll: Collective, count: int, in_place: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """Buffers holding this rank's input; for copy-in collectives the receive buffer holds it as well."""
        nsend, nrecv = coll.numels(count, self.group.nranks)
        if in_place:
            buf = torch.zeros(max(nsend, nrecv), dtype=self.settings.dtype, device=self.group.device)
            send, recv = coll.in_place_views(buf, count, self.group.rank)
        else:
            send = torch.zeros(nsend, dtype=self.settings.dtype, device=self.group.device)
            recv = torch.zeros(nrecv, dtype=self.settings.dtype, device=self.group.device)
        send.copy_(pattern(self.group.rank, 0, nsend, send))
        if coll.copy_in and not in_place:
            recv.copy_(send)
        return send, recv

    def timed(self, run: Callable[[], None]) -> float:
        """us per iteration on this rank, after warm-up, reduced over ranks as `-a` asks."""
        for _ in range(self.settings.warmup):
            run()
        self.group.sync()
        dist.barrier()
        start = time.perf_counter()
        for _ in range(self.settings.iters):
            run()
        self.group.sync()
        mine = (time.perf_counter() - start) / self.settings.iters * 1e6
        return self.across_ranks(mine)

    def across_ranks(self, value: float) -> float:
        tensor = torch.tensor([value], dtype=torch.float64, device=self.group.device)
        mode = self.settings.average
        if mode == 0:
            dist.broadcast(tensor, 0)
        else:
            dist.all_reduce(tensor, {1: dist.ReduceOp.SUM, 2: dist.ReduceOp.MIN, 3: dist.ReduceOp.MAX}[mode])
        return float(tensor.item()) / (self.group.nranks if mode == 1 else 1)

    def check(
        self, coll: Collective, count: int, in_place: bool, op: Callable[[torch.Tensor, torch.Tensor], None]
    ) -> int:
        """Wrong elements of one more run on fresh inputs, summed over ranks."""
        send, recv = self.buffers(coll, count, in_place)
        op(send, recv)
        self.group.sync()
        wrong = torch.zeros(1, dtype=torch.int64, device=self.group.device)
        rank, nranks = self.group.rank, self.group.nranks
        if coll.checked_on(rank):
            if self.corrupt and rank == max(r for r in range(nranks) if coll.checked_on(r)) and recv.numel():
                recv[0] += 1
            wrong += (recv != coll.expected(rank, nranks, count, recv)).sum()
        dist.all_reduce(wrong)
        return int(wrong.item())


# ---------------------------------------------------------------------------------------------
# Output in the nccl-tests layout (formats.md C.2-C.6, v2.17.3+)


def float_cell(value: float, width: int) -> str:
    """nccl-tests' getFloatStr: the most decimals (2, 1, 0) that fit the width, else scientific."""
    for decimals in (2, 1, 0):
        text = f"{value:.{decimals}f}"
        if len(text) <= width:
            return text.rjust(width)
    return f"{value:{width}.{1 if width >= 7 else 0}e}"


def header_lines() -> list[str]:
    """The `#`, group, column and unit lines above the rows (C.4, v2.17.3+)."""
    blank = f"# {'':>10}  {'':>12}  {'':>8}  {'':>6}  {'':>6}"
    place = "  {:>7}  {:>6}  {:>6}  {:>%d}"
    columns = f"# {'size':>10}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>6}" + 2 * (place % 6).format(
        "time", "algbw", "busbw", "#wrong"
    )
    units = f"# {'(B)':>10}  {'(elements)':>12}  {'':>8}  {'':>6}  {'':>6}" + 2 * (place % 5).format(
        "(us)", "(GB/s)", "(GB/s)", ""
    )
    group = blank + "           out-of-place                       in-place          "
    return ["#", group, columns, units]


def row_line(size: int, count: int, dtype_name: str, coll: Collective, places: list[Measurement]) -> str:
    """One result row (C.5, v2.17.3+): the preamble cells, then time, algbw, busbw, #wrong per place."""
    text = f"{size:>12}  {count:>12}  {dtype_name:>8}  {coll.redop:>6}  {coll.root:>6}"
    for m in places:
        wrong = f"{m.wrong:>6g}" if m.wrong is not None else "   N/A"
        text += f"  {float_cell(m.time_us, 7)}  {float_cell(m.algbw, 6)}  {float_cell(m.busbw, 6)}  {wrong}"
    return text


def device_line(group: Group) -> str:
    """This rank's `# Using devices` line (C.3, v2.14.1+)."""
    local = int(os.environ.get("LOCAL_RANK", "0"))
    host = socket.gethostname().split(".")[0] or "localhost"
    if group.device.type == "cuda":
        props = torch.cuda.get_device_properties(group.device)
        ids = (getattr(props, "pci_domain_id", 0), getattr(props, "pci_bus_id", 0), getattr(props, "pci_device_id", 0))
        bus, name, dev = "[{:04x}:{:02x}:{:02x}]".format(*ids), props.name, group.device.index or 0
    else:
        bus, name, dev = "[cpu]", cpu_model(), local
    return f"#  Rank {group.rank:2d} Group {0:2d} Pid {os.getpid():6d} on {host:>10} device {dev:2d} {bus} {name}"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return "CPU " + line.split(":", 1)[1].strip()
    except OSError:
        pass
    return f"CPU {platform.processor() or platform.machine()}".strip()


def banner(group: Group) -> str:
    versions = f"torch {torch.__version__}, backend {group.backend}"
    if group.backend == "nccl":
        versions += f" (NCCL {'.'.join(map(str, torch.cuda.nccl.version()))})"
    return f"# ncclscope {__version__} built-in torch.distributed benchmark (not nccl-tests): {versions}"


class Printer:
    """Rank 0's stdout, one flushed line at a time; the other ranks stay silent."""

    def __init__(self, rank: int) -> None:
        self.active = rank == 0

    def __call__(self, *lines: str) -> None:
        if self.active:
            for line in lines:
                sys.stdout.write(line + "\n")
            sys.stdout.flush()


def run_collective(bench: Bench, coll: Collective, devices: list[str], out: Printer) -> int:
    """Print one collective's whole block; returns its failed checks (`Out of bounds values`)."""
    s = bench.settings
    program = f"{coll.name}_perf"
    out(
        banner(bench.group),
        f"# Collective test starting: {program}",
        f"# nThread 1 nGpus 1 minBytes {s.min_bytes} maxBytes {s.max_bytes} step: {s.factor}(factor) warmup iters: "
        f"{s.warmup} iters: {s.iters} agg iters: 1 validation: {int(s.check)} graph: 0",
        "#",
        "# Using devices",
        *devices,
        *header_lines(),
    )
    busbws: list[float] = []
    failed_checks = 0
    for requested in s.sizes():
        count, size = bench.counts(coll, requested)
        places = [guarded(bench, coll, count, size, in_place) for in_place in (False, True)]
        busbws += [m.busbw for m in places]
        failed_checks += sum(1 for m in places if m.wrong)
        out(row_line(size, count, s.dtype_name, coll, places))
    average = sum(busbws) / len(busbws) if busbws else 0.0
    out(
        f"# Out of bounds values : {failed_checks} {'OK' if failed_checks == 0 else 'FAILED'}",
        f"# Avg bus bandwidth    : {average:g} ",
        "#",
        f"# Collective test concluded: {program}",
        "",
    )
    return failed_checks


def guarded(bench: Bench, coll: Collective, count: int, size: int, in_place: bool) -> Measurement:
    """The measurement, or BenchFailure with a one-line reason (a timeout of gloo or NCCL included)."""
    try:
        return bench.measure(coll, count, size, in_place)
    except (RuntimeError, ValueError, dist.DistError) as error:
        raise BenchFailure(f"{coll.name} at {size} bytes failed: {first_line(error)}") from error


# ---------------------------------------------------------------------------------------------
# Command line


def parse_size(text: str) -> int:
    """nccl-tests' sizes, read as `ncclscope run` reads them."""
    try:
        return plan.parse_size(text, "size")
    except plan.PlanError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"invalid value {text!r}: a whole number >= 1")
    return int(text)


def non_negative(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"invalid value {text!r}: a whole number >= 0")
    return int(text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torch_bench",
        description="Time and check torch.distributed collectives and print nccl-tests tables on rank 0. Start it "
        "with: python -m torch.distributed.run --nproc-per-node G ... -m ncclscope.runner.torch_bench ...",
    )
    parser.add_argument(
        "collectives", nargs="*", metavar="COLLECTIVE", help=f"{', '.join(COLLECTIVES)} (default: all_reduce)"
    )
    parser.add_argument(
        "-b", "--minbytes", type=parse_size, default=parse_size("32M"), help="smallest size (default 32M)"
    )
    parser.add_argument(
        "-e", "--maxbytes", type=parse_size, default=parse_size("32M"), help="largest size (default 32M)"
    )
    parser.add_argument("-f", "--stepfactor", type=positive, default=2, help="size multiplier (default 2)")
    parser.add_argument("-n", "--iters", type=positive, default=20, help="timed iterations (default 20)")
    parser.add_argument("-w", "--warmup_iters", type=non_negative, default=5, help="warm-up iterations (default 5)")
    parser.add_argument("-d", "--datatype", choices=list(DTYPES), default="float", help="element type (default float)")
    parser.add_argument("-c", "--check", type=int, choices=(0, 1), default=1, help="check the results (default 1)")
    parser.add_argument(
        "-a",
        "--average",
        type=int,
        choices=sorted(AVERAGE_MODES),
        default=1,
        help="time over ranks: 0 rank 0, 1 average (default), 2 minimum, 3 maximum",
    )
    parser.add_argument(
        "--backend",
        choices=("auto", "nccl", "gloo"),
        default="auto",
        help="auto: NCCL when CUDA is available, else gloo",
    )
    parser.add_argument("--timeout", type=positive, default=600, help="seconds a collective may take (default 600)")
    return parser


def settings_from(argv: list[str] | None) -> tuple[Settings, str]:
    """Checked settings and the backend asked for; argparse exits 2 with a usage message on a wrong command line."""
    parser = build_parser()
    args = parser.parse_args(argv)
    names = args.collectives or ["all_reduce"]
    unknown = [name for name in names if name not in COLLECTIVES]
    if unknown:
        parser.error(f"unknown collective {', '.join(unknown)}; choose from {', '.join(COLLECTIVES)}")
    itemsize = DTYPES[args.datatype].itemsize
    if args.minbytes < itemsize:
        parser.error(f"-b {args.minbytes}: smaller than one {args.datatype} element ({itemsize} bytes)")
    if args.minbytes > args.maxbytes:
        parser.error(f"-b {args.minbytes} is larger than -e {args.maxbytes}")
    if args.stepfactor < 2:
        parser.error("-f must be 2 or more")
    settings = Settings(
        collectives=[COLLECTIVES[name] for name in names],
        min_bytes=args.minbytes,
        max_bytes=args.maxbytes,
        factor=args.stepfactor,
        iters=args.iters,
        warmup=args.warmup_iters,
        dtype_name=args.datatype,
        check=bool(args.check),
        average=args.average,
        timeout=args.timeout,
    )
    return settings, args.backend


def join_group(backend: str, timeout: float) -> Group:
    """init_process_group from torchrun's environment: NCCL on cuda:LOCAL_RANK, or gloo on the CPU."""
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        raise SystemExit(usage_error("RANK and WORLD_SIZE are not set: start it with python -m torch.distributed.run"))
    gpu = torch.cuda.is_available() and dist.is_nccl_available()
    if backend == "nccl" and not gpu:
        raise SystemExit(usage_error("--backend nccl needs CUDA and a torch built with NCCL"))
    chosen = "nccl" if backend == "nccl" or (backend == "auto" and gpu) else "gloo"
    local = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("cuda", local) if chosen == "nccl" else torch.device("cpu")
    os.environ.update(host_dump_env(os.environ, socket.gethostname()))  # before NCCL reads its variables
    try:
        options: dict[str, object] = {"timeout": timedelta(seconds=timeout)}
        if chosen == "nccl":
            torch.cuda.set_device(device)
            # bound to its GPU up front (torch 2.3+): NCCL starts eagerly, and barrier() does not warn
            # that it guesses the device (it did on each run on our H100)
            if "device_id" in inspect.signature(dist.init_process_group).parameters:
                options["device_id"] = device
        dist.init_process_group(chosen, **options)  # type: ignore[arg-type]
    except (RuntimeError, ValueError, dist.DistError) as error:
        raise BenchFailure(f"cannot start the {chosen} process group: {first_line(error)}") from error
    return Group(dist.get_rank(), dist.get_world_size(), device, chosen)


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def usage_error(message: str) -> int:
    print(f"torch_bench: {message}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    settings, backend = settings_from(argv)
    try:
        group = join_group(backend, settings.timeout)
        out = Printer(group.rank)
        gathered: list[str] = [""] * group.nranks
        dist.all_gather_object(gathered, device_line(group))
        bench = Bench(settings, group)
        failed_checks = sum(run_collective(bench, coll, gathered, out) for coll in settings.collectives)
    except BenchFailure as failure:
        print(f"torch_bench: rank {os.environ.get('RANK', '?')}: {failure}", file=sys.stderr, flush=True)
        # a wedged peer can hang the process group's teardown: leave at once, the output is flushed
        os._exit(1)
    dist.destroy_process_group()
    if failed_checks:
        if group.rank == 0:
            print(f"torch_bench: {failed_checks} data check(s) found wrong elements", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
