"""The bundled example used by `ncclscope demo`: shipped in the wheel, or read from fixtures/."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent  # ncclscope/
DEMO_FILE = "multi_host_job_problems.txt"


def demo_inputs() -> list[Path]:
    for folder in (_PACKAGE / "demo_data", _PACKAGE.parent / "fixtures" / "mixed"):
        candidate = folder / DEMO_FILE
        if candidate.is_file():
            return [candidate]
    return []
