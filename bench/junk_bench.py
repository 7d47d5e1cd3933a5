"""Input that is none of what ncclscope reads: how fast `analyze` refuses it (exit 2), next to same-run
baselines.

Three shapes of 50 MB each, drawn at random from a seed (what people pipe in by mistake): base64 of random
bytes in lines of varied widths, random "words" with spaces and punctuation (text-like), and hex dumps with
offsets. For each, in one run: the one-regex-per-line Python loop of bench/run_bench.py (the baseline of
the speed targets) and `ncclscope analyze` at default settings; best of --repeat. Target (issue 40): exit 2
in under 2 s for 50 MB.

    python bench/junk_bench.py              # 50 MB per shape
    python bench/junk_bench.py --mb 10      # smaller, quicker
"""

from __future__ import annotations

import argparse
import base64
import random
import string
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH_DIR))

from run_bench import PREFIX_RE  # noqa: E402  (the baseline's regex, one home)

MB = 1024 * 1024
TARGET_S = 2.0


def base64_lines(rng: random.Random, size: int) -> bytes:
    out, total = [], 0
    while total < size:
        line = base64.b64encode(rng.randbytes(rng.choice((48, 57, 60, 76)))) + b"\n"
        out.append(line)
        total += len(line)
    return b"".join(out)


def text_lines(rng: random.Random, size: int) -> bytes:
    letters = string.ascii_letters + string.digits
    out, total = [], 0
    while total < size:
        words = ["".join(rng.choices(letters, k=rng.randint(1, 11))) for _ in range(rng.randint(3, 16))]
        line = (" ".join(words) + rng.choice((".", ",", ";", "", "!")) + "\n").encode()
        out.append(line)
        total += len(line)
    return b"".join(out)


def hex_dump(rng: random.Random, size: int) -> bytes:
    out, total, offset = [], 0, 0
    while total < size:
        chunk = rng.randbytes(16)
        line = f"{offset:08x}  {chunk[:8].hex(' ')}  {chunk[8:].hex(' ')}  |{'.' * 16}|\n".encode()
        out.append(line)
        total += len(line)
        offset += 16
    return b"".join(out)


SHAPES = {"base64": base64_lines, "text": text_lines, "hexdump": hex_dump}


def regex_loop(path: Path) -> float:
    start = time.perf_counter()
    match = PREFIX_RE.match
    with path.open("rb") as fh:
        for line in fh:
            match(line)
    return time.perf_counter() - start


def refuse(path: Path) -> tuple[float, int]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "ncclscope", "analyze", str(path)], capture_output=True)
    return time.perf_counter() - start, done.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=50.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=40)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in SHAPES.items():
            path = Path(tmp) / f"{name}.txt"
            path.write_bytes(make(rng, int(args.mb * MB)))
            loop = min(regex_loop(path) for _ in range(args.repeat))
            runs = [refuse(path) for _ in range(args.repeat)]
            best, rc = min(runs)
            ok = rc == 2 and best < TARGET_S * args.mb / 50
            failed |= not ok
            print(
                f"{name:8} {args.mb:g} MB: ncclscope analyze {best:.2f} s (exit {rc}), "
                f"regex loop {loop:.2f} s; target exit 2 under {TARGET_S * args.mb / 50:.1f} s: "
                f"{'met' if ok else 'NOT met'}"
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
