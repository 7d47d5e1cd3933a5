"""NCCL version strings and NCCL_VERSION_CODE numbers, in one spelling ('2.21.5')."""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1024)  # the rules ask it of every process of a job: a few distinct texts, thousands of times
def nccl_version(text: str | None) -> str | None:
    """'2.21.5+cuda12.4' -> '2.21.5' (the NCCL release; the +cuda suffix is the build toolkit)."""
    if not text:
        return None
    release = text.strip().split("+", 1)[0].split("-", 1)[0]
    parts = release.split(".")
    if len(parts) >= 3 and all(part.isdigit() for part in parts[:3]):
        return ".".join(parts[:3])
    return text.strip() or None


def version_from_code(code: object) -> str | None:
    """NCCL_VERSION_CODE -> 'X.Y.Z' (X*10000+Y*100+Z since 2.9, X*1000+Y*100+Z before)."""
    try:
        value = int(str(code).strip())
    except (TypeError, ValueError):
        return None
    if value <= 0:
        return None
    if value >= 20900:
        return f"{value // 10000}.{value % 10000 // 100}.{value % 100}"
    return f"{value // 1000}.{value % 1000 // 100}.{value % 100}"


@lru_cache(maxsize=1024)
def release_tuple(text: str | None) -> tuple[int, ...] | None:
    """'2.21.5+cuda12.4' -> (2, 21, 5); '2.22' -> (2, 22); None when the text names no release."""
    release = nccl_version(text)
    if not release:
        return None
    parts = release.split(".")
    numbers = tuple(int(p) for p in parts if p.isdigit())
    return numbers if len(numbers) == len(parts) and len(numbers) >= 2 else None
