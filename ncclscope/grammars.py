"""Loads the Lark grammars (grammars/*.lark) once and builds their parsers.

The grammars are the single source of truth for syntax. In a checkout they live in the top-level
grammars/ folder; in an installed wheel they are shipped as ncclscope/grammars_data/.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from lark import Lark

_PACKAGE_DIR = Path(__file__).resolve().parent


def grammar_dir() -> Path:
    """Where the .lark files are: inside the installed package, else the repository's grammars/."""
    for candidate in (_PACKAGE_DIR / "grammars_data", _PACKAGE_DIR.parent / "grammars"):
        if (candidate / "nccl_log.lark").is_file():
            return candidate
    raise FileNotFoundError("ncclscope grammars not found (expected grammars/nccl_log.lark)")


@cache
def grammar_text(name: str) -> str:
    return (grammar_dir() / f"{name}.lark").read_text(encoding="utf-8")


@cache
def load(name: str, start: str | tuple[str, ...] = "start") -> Lark:
    """An LALR parser for grammars/<name>.lark with positions kept (the shape cache needs them)."""
    starts = list(start) if isinstance(start, tuple) else [start]
    return Lark(
        grammar_text(name),
        parser="lalr",
        lexer="contextual",
        start=starts,
        propagate_positions=True,
        maybe_placeholders=False,
        cache=True,  # a pickled parser in the temp dir: start-up in ~0.1 s
    )


def nccl_record_parser() -> Lark:
    """Parses one whole NCCL log record (prefix and message); used as the per-line baseline in bench/."""
    return load("nccl_log", ("record",))
