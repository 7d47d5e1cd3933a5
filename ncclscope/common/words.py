"""Sizes and number ranges in words, one spelling for every output (light: the TUI imports it)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable

_SCALED = ("B", "KiB", "MiB", "GiB", "TiB")
_WHOLE = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))


def human_size(size: float, decimals: str = ".3g", largest: str = "TiB") -> str:
    """8 -> 8 B, 1024 -> 1 KiB, 1536 -> 1.5 KiB: binary units, as nccl-tests sizes are; the scaled number is
    written with `decimals` (bytes are whole)."""
    value = float(size)
    for unit in _SCALED:
        if abs(value) < 1024 or unit == largest:
            return f"{value:g} {unit}" if unit == "B" else f"{value:{decimals}} {unit}"
        value /= 1024
    raise ValueError(f"unknown unit {largest!r}")


def exact_size(size: int, compact: bool = False) -> str:
    """A size in the largest binary unit it is a whole multiple of: 1073741824 -> 1 GiB, 1000 -> 1000 B.
    Compact, as nccl-tests' -b/-e take them: 1G, 32M, 8B (a size of no whole unit above 1 KiB: its KiB rounded)."""
    for unit, factor in _WHOLE:
        if size >= factor and size % factor == 0:
            return f"{size // factor}{unit[0]}" if compact else f"{size // factor} {unit}"
    if compact:
        return f"{size}B" if size < 1024 else f"{size / 1024:.0f}K"
    return f"{size} B"


def number_runs(numbers: Iterable[int]) -> list[tuple[int, int]]:
    """(first, last) of each run of consecutive numbers, in order, each number once."""
    runs = []
    for _, run in itertools.groupby(enumerate(sorted(set(numbers))), key=lambda item: item[1] - item[0]):
        values = [value for _, value in run]
        runs.append((values[0], values[-1]))
    return runs


def number_ranges(numbers: Iterable[int], separator: str = ",") -> str:
    """0-3,5,7-8: consecutive numbers as ranges, in order, each once."""
    return separator.join(str(a) if a == b else f"{a}-{b}" for a, b in number_runs(numbers))


def ranks_named(ranks: Iterable[int]) -> str:
    """'rank 3', 'ranks 0-3, 7': ranks with their noun ('ranks ?' when none is known)."""
    listed = sorted(set(ranks))
    return f"rank{'' if len(listed) == 1 else 's'} {number_ranges(listed, ', ') or '?'}"


def plural(count: int, word: str) -> str:
    """'1 host', '2 hosts', '3 processes': a count with its noun (regular plurals: -es after s, x, ch, sh)."""
    if count == 1:
        return f"{count} {word}"
    return f"{count} {word}es" if word.endswith(("s", "x", "ch", "sh")) else f"{count} {word}s"
