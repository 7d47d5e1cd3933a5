"""How much of the census (tools/census/nccl.json) ncclscope types, per release (issue 43).

Each message of the census is made into a line: its fields filled with values of their type (varied per
message), behind the prefix NCCL prints at its level. The lines are read by ncclscope's NCCL log parser;
a line is typed when every record on it was understood (a family, not "unknown message"). Printed: per
release, the messages it prints at INFO and WARN and the share typed; then the untyped messages of the
newest release, most common subsystems first.

Usage::

    python tools/census/coverage.py [--show N]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from ncclscope.parse.nccl_log import NcclLogParser  # noqa: E402

CENSUS = Path(__file__).with_name("nccl.json")
FIELD_RE = re.compile(r"\{(\w+):(\w+)\}")
# A text field holds what the source formats into it: a name, a word of a set (Enabled, Ring, LL128) or a
# whole clause. A message is typed when one filling of its text fields (all with the same word) is.
TEXT_VALUES = (
    "mlx5_0", "eth0", "Enabled", "Disabled", "Ring", "Simple", "LL128", "IB", "Socket", "AllReduce", "gpu-node-3",
    " [0]eth0:10.1.0.3<0>", "/dev/shm/nccl-x2Yb", "1", "init.cc", "NCCL_IB_HCA", "",
)  # fmt: skip
# "" fills only the text fields glued to another field ("via P2P/IPC{v5:text}{v6:text}": an optional suffix
# such as "/read", often empty); the others keep the first word
GLUED_RE = re.compile(r"(?<=\})\{(\w+):text\}|\{(\w+):text\}(?=\{)")
# Messages whose text fields are clauses built elsewhere (a device listing, a tree, a transport's options):
# one filling with an example of each, in order (formats.md B.4, B.13, B.14)
EXAMPLE = "<example>"
EXAMPLES = {
    "NET/IB : Using{using:text} {using_2:text}; OOB {oob:text}:{oob_2:text}": [
        " [0]mlx5_0:1/IB [1]mlx5_1:1/IB", "[RO]", "eth0", "10.1.0.3<0>",
    ],
    "Trees{trees:text}": [" [0] 1/-1/-1->0->-1 [1] 1/-1/-1->0->-1"],
    "Channel {channel:int}/{channel_2:int} : {v2:int}[{v3:int}] -> {v4:int}[{v5:int}] via "
    "P2P/{p2p:text}{p2p_2:text}{p2p_3:text}": ["IPC", "/read", ""],
}  # fmt: skip
DYNAMIC = {"{dynamic:text}", "{v0:text}"}  # a message that is all one formatted string: nothing to type


def value(kind: str, rng: random.Random, text: str) -> str:
    if kind in ("int", "uint"):
        return str(rng.choice((0, 1, 3, 7, 16, 128, 4096, 65536)))
    if kind == "hex":
        return f"{rng.randrange(1, 1 << 32):x}"
    if kind == "ptr":
        return f"0x{rng.randrange(1 << 44, 1 << 47):x}"
    if kind == "float":
        return f"{rng.uniform(0, 400):.2f}"
    if kind == "char":
        return rng.choice("RWX")
    return text


def filled(message: dict[str, Any], rng: random.Random, filler: str) -> tuple[str, list[tuple[str, str]]]:
    """The message's first line with its fields filled (text fields with `filler`), and the (type, value) of
    each field in order."""
    fmt = message["format"]
    glued = {m[1] or m[2] for m in GLUED_RE.finditer(fmt)} if filler == "" else set()
    examples = iter(EXAMPLES.get(fmt, ())) if filler == EXAMPLE else None
    values: list[tuple[str, str]] = []

    def one(m: re.Match[str]) -> str:
        if examples is not None and m[2] == "text":
            text = next(examples, "")
        else:
            text = "" if m[1] in glued else value(m[2], rng, filler if filler not in ("", EXAMPLE) else TEXT_VALUES[0])
        values.append((m[2], text))
        return text

    text = FIELD_RE.sub(one, fmt).replace("{{", "{").replace("}}", "}")
    return (text.splitlines()[0] if text else text), values


def with_prefix(message: dict[str, Any], text: str, rng: random.Random, timestamp: str = "") -> str:
    """`text` behind the prefix NCCL prints at the message's level (formats.md A.2); `timestamp` goes first
    (2.26+, NCCL_DEBUG_TIMESTAMP_LEVELS)."""
    level = message["level"]
    head = f"{timestamp}gpu-node-3:4211:4290 [2]"
    if message.get("located"):  # INFO_LOC: the call site before the message (2.30.7)
        text = f"{Path(message['file']).name}:{rng.randrange(40, 2000)} (someFunc) {text}"
    if level == "WARN":
        return f"{head} {Path(message['file']).name}:{rng.randrange(40, 2000)} NCCL WARN {text}"
    if level == "TRACE":
        return f"{head} {rng.uniform(1, 900):.6f} someFunc:{rng.randrange(40, 2000)} NCCL TRACE {text}"
    return f"{head} NCCL {level if level != 'VERSION' else 'INFO'} {text}"


def fillers_of(message: dict[str, Any]) -> list[str]:
    """The fillings a message is tried with: each word of TEXT_VALUES (and its example, where EXAMPLES has one)
    when it has a text field, else one."""
    if not any(f["type"] == "text" for f in message["fields"]):
        return [TEXT_VALUES[0]]
    return [*TEXT_VALUES, EXAMPLE] if message["format"] in EXAMPLES else list(TEXT_VALUES)


def line_of(message: dict[str, Any], rng: random.Random, filler: str) -> str:
    """The message filled (text fields with `filler`) and behind its level's prefix."""
    return with_prefix(message, filled(message, rng, filler)[0], rng)


def typed(line: str) -> bool:
    parser = NcclLogParser(lambda no, text: None)
    parser.feed_block(line.encode(), 1)
    result = parser.result
    return result.nccl_lines == 1 and result.unrecognized_count == 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show", type=int, default=25, help="untyped messages of the newest release to list")
    parser.add_argument(
        "--census",
        default="nccl",
        choices=("nccl", "rccl", "aws-ofi-nccl", "nccl-fastsocket"),
        help="whose (default: NCCL's)",
    )
    args = parser.parse_args(argv)
    census = json.loads(CENSUS.with_name(f"{args.census}.json").read_text(encoding="utf-8"))
    releases: list[str] = census["releases"]
    rng = random.Random(43)
    status = []
    for message in census["messages"]:
        if message["level"] not in ("INFO", "WARN"):
            continue
        if message["format"] in DYNAMIC:
            continue  # counted apart below
        ok = any(typed(line_of(message, rng, filler)) for filler in fillers_of(message))
        span = {r for a, b in message["releases"] for r in releases[releases.index(a) : releases.index(b) + 1]}
        status.append((message, ok, span))
    dynamic = sum(1 for m in census["messages"] if m["format"] in DYNAMIC and m["level"] in ("INFO", "WARN"))
    print(f"INFO/WARN messages that are one formatted string (nothing to type), left out: {dynamic}")
    print(f"{'release':12} {'messages':>8} {'typed':>6} {'share':>6}")
    for release in releases:
        here = [ok for _, ok, span in status if release in span]
        if here:
            print(f"{release:12} {len(here):8} {sum(here):6} {sum(here) / len(here):6.1%}")
    newest = releases[-1]
    missing = [m for m, ok, span in status if newest in span and not ok]
    subsystems = Counter(s for m in missing for s in m["subsystems"] or ["WARN"])
    print(f"\nuntyped in {newest}: {len(missing)}; by subsystem: {dict(subsystems.most_common(10))}")
    for message in missing[: args.show]:
        print(f"  {message['level']:5} {message['file']}: {message['format'][:110]!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
