"""What a training job prints around NCCL's lines, for the profiles of logs people really pipe in.

`ncclscope analyze -` most often reads a job's whole stdout: step logs, progress bars, warnings,
tracebacks, the framework's and other libraries' logging, with NCCL's lines a few percent of it.
Four profiles are made here from those lines and the NCCL streams of generate_log.py:

* `stdout`: one job's output with NCCL lines at a share drawn from 1 to 10 %;
* `crashloop`: a few short failing runs (init, a WARN chain, the framework's error and traceback)
  restarted again and again: the same processes, new times, and runs of restarts pasted twice (a
  collector that repeats what it already sent);
* `jobs`: several jobs' logs one after another, each in a style of its own, each with its own
  other text;
* `random`: random text without any NCCL line (base64, words, hex dumps), which is refused.

Everything is drawn from the seed: the share of NCCL lines, the libraries that print, the step
format, whether tqdm's carriage returns are kept, the widths and the wording vary as they do
from job to job. Nothing is copied from a real log.
"""

# ruff: noqa: UP031

from __future__ import annotations

import base64
import datetime as _dt
import random
from collections.abc import Callable, Iterator

from generate_log import GPUS_PER_HOST, START_TIME, _stamper, build_job, rank_stream, warn_block
from log_style import Style, choose_style

WORDS = (
    "model layer attention head weight bias tensor shard rank batch token sequence gradient optimizer "
    "checkpoint epoch step loss learning rate scheduler warmup dataset loader worker cache memory device "
    "stream kernel launch compile graph trace profile metric eval train valid test config yaml path file"
).split()
MODULES = (
    "torch/distributed/distributed_c10d.py",
    "torch/nn/modules/module.py",
    "transformers/trainer.py",
    "accelerate/accelerator.py",
    "deepspeed/runtime/engine.py",
    "megatron/core/pipeline_parallel/schedules.py",
    "torch/utils/data/dataloader.py",
)
WARNINGS = (
    (
        "UserWarning",
        "TypedStorage is deprecated. It will be removed in the future and UntypedStorage will be the only"
        " storage class.",
    ),
    (
        "FutureWarning",
        "`torch.cuda.amp.autocast(args...)` is deprecated. Please use `torch.amp.autocast('cuda', args...)` instead.",
    ),
    (
        "UserWarning",
        "barrier(): using the device under current context. You can specify `device_id` in"
        " `init_process_group` to mute this warning.",
    ),
    ("DeprecationWarning", "The 'warn' method is deprecated, use 'warning' instead"),
)
ERRORS = (
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, "
    "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.28.3",
    "ValueError: Expected input batch_size (%d) to match target batch_size (%d).",
    "KeyError: 'model.layers.%d.self_attn.q_proj.weight'",
)


class OtherText:
    """A job's own output, block by block: each call returns a few lines of one kind."""

    def __init__(self, seed: int, style: Style, ranks: int) -> None:
        self.rng = random.Random(seed * 7_777 + 13)
        self.style = style
        self.ranks = ranks
        rng = self.rng
        self.clock = rng.random() * 3600.0
        self.step = rng.randrange(0, 5000)
        self.carriage = rng.random() < 0.5  # tqdm's \r updates kept on one line (a file), or not (a terminal copy)
        self.width = rng.choice((80, 100, 120, 160))
        self.logger = rng.choice(
            (
                lambda t, lvl, src: f"[{t:%Y-%m-%d %H:%M:%S},{t.microsecond // 1000:03d}] [{lvl}] [{src}] ",
                lambda t, lvl, src: f"{t:%m/%d/%Y %H:%M:%S} - {lvl} - {src.split('/')[-1].split('.')[0]} - ",
                lambda t, lvl, src: (
                    f"{lvl[0]}{t:%m%d %H:%M:%S}.{t.microsecond:06d} {rng.randrange(1000, 99999)}"
                    f" {src}:{rng.randrange(10, 3000)}] "
                ),
                lambda t, lvl, src: "",
            )
        )
        self.kinds: list[tuple[float, Callable[[], str]]] = [
            (0.40, self.step_line),
            (0.15, self.progress),
            (0.12, self.log_line),
            (0.08, self.metrics_json),
            (0.08, self.warning),
            (0.04, self.traceback),
            (0.05, self.long_line),
            (0.08, self.blank_or_banner),
        ]

    def now(self) -> _dt.datetime:
        self.clock += self.rng.random() * 0.8
        return START_TIME + _dt.timedelta(seconds=self.clock)

    def tag(self) -> str:
        launcher = self.style.launcher
        return launcher(self.rng.randrange(self.ranks)) if launcher else ""

    def block(self) -> str:
        pick = self.rng.random()
        for weight, make in self.kinds:
            if pick < weight:
                return make()
            pick -= weight
        return self.step_line()

    def step_line(self) -> str:
        rng = self.rng
        self.step += 1
        t = self.now()
        fields = [
            f"step {self.step}/{rng.choice((50000, 100000, 250000))}",
            f"loss {rng.uniform(0.5, 9.0):.4f}",
            f"lr {rng.uniform(1e-6, 3e-4):.3e}",
            f"grad_norm {rng.uniform(0.05, 40):.3f}",
        ]
        if rng.random() < 0.6:
            fields.append(f"tokens/s {rng.randrange(10_000, 900_000)}")
        if rng.random() < 0.4:
            fields.append(f"mem {rng.uniform(10, 79):.1f}GB")
        if rng.random() < 0.3:
            fields.append(f"elapsed {rng.uniform(0.1, 12):.2f}s")
        return self.tag() + self.logger(t, "INFO", rng.choice(MODULES)) + " | ".join(fields) + "\n"

    def progress(self) -> str:
        rng = self.rng
        total = rng.choice((500, 1000, 3125, 10000))
        done = rng.randrange(total)
        updates = rng.randrange(1, 12) if self.carriage else 1
        bars = []
        for _ in range(updates):
            done = min(total, done + rng.randrange(1, 40))
            frac = done / total
            cells = 20
            full = int(frac * cells)
            bar = "\u2588" * full + ("\u258f" if full < cells else "") + " " * max(0, cells - full - 1)
            rate = rng.uniform(0.5, 30)
            bars.append(
                f"Epoch {rng.randrange(0, 8)}: {frac:4.0%}|{bar}| {done}/{total} "
                f"[{rng.randrange(0, 59):02d}:{rng.randrange(0, 59):02d}<{rng.randrange(0, 59):02d}:"
                f"{rng.randrange(0, 59):02d}, {rate:5.2f}it/s, loss={rng.uniform(0.5, 6):.3f}]"
            )
        return self.tag() + "\r".join(bars) + "\n"

    def log_line(self) -> str:
        rng = self.rng
        t = self.now()
        lvl = rng.choice(("INFO", "INFO", "INFO", "WARNING", "DEBUG"))
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(4, 24)))
        if rng.random() < 0.3:
            text += f" ({rng.randrange(1, 1 << 20)} of {rng.randrange(1 << 20, 1 << 24)})"
        if rng.random() < 0.2:
            text = f"wandb: {text}"
        return self.tag() + self.logger(t, lvl, rng.choice(MODULES)) + text + "\n"

    def metrics_json(self) -> str:
        rng = self.rng
        pairs = ", ".join(
            f'"{rng.choice(WORDS)}_{i}": {rng.uniform(-10, 10000):.5g}' for i in range(rng.randrange(3, 14))
        )
        return self.tag() + "{" + f'"step": {self.step}, ' + pairs + "}\n"

    def warning(self) -> str:
        rng = self.rng
        kind, text = rng.choice(WARNINGS)
        path = f"/usr/local/lib/python3.{rng.randrange(9, 13)}/site-packages/{rng.choice(MODULES)}"
        tag = self.tag()
        return f"{tag}{path}:{rng.randrange(20, 5000)}: {kind}: {text}\n{tag}  warnings.warn(\n"

    def traceback(self) -> str:
        rng = self.rng
        tag = self.tag()
        lines = [f"{tag}Traceback (most recent call last):\n"]
        for _ in range(rng.randrange(3, 14)):
            module = rng.choice(MODULES)
            func = "_".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 4)))
            lines.append(
                f'{tag}  File "/usr/local/lib/python3.11/site-packages/{module}",'
                f" line {rng.randrange(10, 4000)}, in {func}\n"
            )
            lines.append(f"{tag}    return self.{func}(*args, **kwargs)\n")
        error = rng.choice(ERRORS)
        if "%d" in error:
            error = error % tuple(rng.randrange(1, 512) for _ in range(error.count("%d")))
        lines.append(f"{tag}{error}\n")
        return "".join(lines)

    def long_line(self) -> str:
        """A config or a tensor dumped on one line: a few kB without a line break."""
        rng = self.rng
        items = ", ".join(f"'{rng.choice(WORDS)}_{i}': {rng.uniform(-1, 1):.6f}" for i in range(rng.randrange(40, 400)))
        return self.tag() + "{" + items + "}\n"

    def blank_or_banner(self) -> str:
        rng = self.rng
        if rng.random() < 0.5:
            return "\n"
        return self.tag() + rng.choice("=-*#") * self.width + "\n"


def _nccl_streams(seed: int, style: Style, hosts: int, profile: str) -> Iterator[str]:
    """The NCCL blocks of the first `hosts` hosts' ranks, taken round-robin (barriers skipped)."""
    job = build_job(seed, style)
    streams = [rank_stream(job, r, seed, profile) for r in job if r.host < hosts]
    rng = random.Random(seed * 104_729 + 3)
    while True:
        gen = rng.choice(streams)
        for _ in range(1 + int(rng.random() * 4)):
            seg = next(gen)
            if seg is not None:
                yield seg


def job_output(seed: int, nccl_share: float | None = None, hosts: int | None = None) -> Iterator[str]:
    """One job's stdout, endless: its own text with NCCL's blocks at `nccl_share` of the bytes (drawn from
    1 to 10 % unless given)."""
    rng = random.Random(seed * 1_009 + 1)
    style = choose_style(seed)
    share = nccl_share if nccl_share is not None else rng.uniform(0.01, 0.10)
    hosts = hosts or rng.choice((1, 1, 2, 4, 8))
    other = OtherText(seed, style, hosts * GPUS_PER_HOST)
    nccl = _nccl_streams(seed, style, hosts, rng.choice(("init", "init", "coll")))
    nccl_bytes = other_bytes = 0
    while True:
        if nccl_bytes < share * (nccl_bytes + other_bytes + 1):
            seg = next(nccl)
            nccl_bytes += len(seg)
        else:
            seg = other.block()
            other_bytes += len(seg)
        yield seg


def crash_loop(seed: int) -> Iterator[str]:
    """A short failing run restarted again and again, endless, as a supervisor's log or a container's
    restarts show it: init lines of a few ranks, a WARN chain on one of them, the framework's error and
    traceback, the supervisor's restart line. The same few runs come back (a restarted container's
    processes keep their host and pids), each time with new times; now and then the collector sends the
    last restarts again, byte for byte."""
    rng = random.Random(seed * 3_001 + 5)
    style = choose_style(seed)
    stamp = _stamper(style.timestamp_format, rng)
    runs = [_failing_run(seed, k, style, rng) for k in range(rng.randrange(3, 9))]
    sent: list[str] = []
    restart = 0
    while True:
        text = stamp(rng.choice(runs)) + f"[supervisor] worker exited with code 1; restarting ({restart + 1})\n"
        sent.append(text)
        yield text
        restart += 1
        if rng.random() < 0.15:  # the collector repeats what it sent
            yield from sent[-rng.randrange(1, 6) :]
        if len(sent) > 10:
            del sent[:-10]


def _failing_run(seed: int, k: int, style: Style, rng: random.Random) -> str:
    """One of the runs of a crash loop, its timestamps left to be filled in (log_style.TIMESTAMP_MARK)."""
    job = build_job(seed * 1_000 + k, style, hosts=2)
    ranks = job[: rng.choice((2, 4, 8, 16))]
    other = OtherText(seed + k, style, len(ranks))
    parts = [
        f"{r.info_main}NCCL version 2.28.3+cuda12.9\n"
        f"{r.info_main}Bootstrap: Using {style.interface}:{r.ip}<0>\n"
        f"{r.info_main}NET/IB : Using [0]{r.nics[r.local]}:1/IB ; OOB {style.interface}:{r.ip}<0>\n"
        f"{r.info_async}ncclCommInitRank comm 0x{rng.randrange(1 << 40, 1 << 44):x} rank {r.rank} nranks "
        f"{len(ranks)} cudaDev {r.local} nvmlDev {r.local} busId {r.local + 0x18:x}000 commId "
        f"0x{rng.randrange(1 << 60, 1 << 64):016x} - Init START\n"
        for r in ranks
    ]
    parts += [other.block() for _ in range(rng.randrange(2, 30))]
    parts.append(warn_block(job, rng.choice(ranks), rng, 60.0 * k))
    parts.append(other.traceback())
    return "".join(parts)


def several_jobs(seed: int, size_bytes: int) -> Iterator[str]:
    """Several jobs' logs one after another (a directory's files cat'ed together), each its own style."""
    rng = random.Random(seed * 17 + 4)
    count = rng.randrange(3, 9)
    per_job = size_bytes // count
    for j in range(count):
        written = 0
        for seg in job_output(seed * 100 + j):
            yield seg
            written += len(seg)
            if written >= per_job:
                break


def random_text(seed: int) -> Iterator[str]:
    """Text that is no log: base64, words, hex dumps, in blocks."""
    rng = random.Random(seed * 11 + 2)
    while True:
        kind = rng.randrange(3)
        if kind == 0:
            data = rng.randbytes(rng.randrange(600, 6000))
            text = base64.b64encode(data).decode()
            yield "\n".join(text[i : i + 76] for i in range(0, len(text), 76)) + "\n"
        elif kind == 1:
            yield (
                " ".join(rng.choice(WORDS) + rng.choice(("", "", ",", ".")) for _ in range(rng.randrange(50, 900)))
                + "\n"
            )
        else:
            rows = []
            for _ in range(rng.randrange(8, 64)):
                chunk = rng.randbytes(16)
                rows.append(
                    f"{rng.randrange(1 << 32):08x}  "
                    + " ".join(f"{b:02x}" for b in chunk)
                    + "  |"
                    + "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
                    + "|"
                )
            yield "\n".join(rows) + "\n"


def describe(seed: int, profile: str) -> str:
    """The drawn parameters of a profile, one line."""
    if profile == "stdout":
        rng = random.Random(seed * 1_009 + 1)
        share = rng.uniform(0.01, 0.10)
        hosts = rng.choice((1, 1, 2, 4, 8))
        return f"stdout: one job's output, {share:.1%} NCCL bytes from {hosts} host(s); {choose_style(seed).name}"
    if profile == "crashloop":
        runs = random.Random(seed * 3_001 + 5).randrange(3, 9)
        return f"crashloop: {runs} failing runs restarted again and again, repeats resent; {choose_style(seed).name}"
    if profile == "jobs":
        return f"jobs: {random.Random(seed * 17 + 4).randrange(3, 9)} jobs' outputs concatenated, each its own style"
    return "random: base64, words and hex dumps, no NCCL line"


MAKERS: dict[str, Callable[[int, int], Iterator[str]]] = {
    "stdout": lambda seed, size: job_output(seed),
    "crashloop": lambda seed, size: crash_loop(seed),
    "jobs": several_jobs,
    "random": lambda seed, size: random_text(seed),
}


def write(profile: str, seed: int, size_bytes: int, path: str) -> int:
    """Write `size_bytes` (cut at a line end) of `profile` to `path`; returns the bytes written."""
    written = 0
    chunk: list[str] = []
    pending = 0
    with open(path, "wb") as out:
        for seg in MAKERS[profile](seed, size_bytes):
            chunk.append(seg)
            pending += len(seg)
            if pending < 1 << 20 and written + pending < size_bytes:
                continue
            data = "".join(chunk).encode("utf-8")
            chunk.clear()
            pending = 0
            if written + len(data) >= size_bytes:
                end = data.find(b"\n", max(0, size_bytes - written - 1))
                data = data if end < 0 else data[: end + 1]
                out.write(data)
                return written + len(data)
            out.write(data)
            written += len(data)
    return written


__all__ = ["MAKERS", "describe", "write"]
