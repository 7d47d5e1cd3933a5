"""The knowledge files of ncclscope/data/ (figures, catalogs, profiles, each entry with its public source): one
place that finds them in the installed package and reads each once."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

DATA_DIR = Path(__file__).resolve().parent.parent / "data"


def data_path(name: str) -> Path:
    """ncclscope/data/<name> (shipped inside the package)."""
    return DATA_DIR / name


@cache
def data_json(name: str) -> Any:
    """The parsed JSON of ncclscope/data/<name>, read once per process (callers must not change it)."""
    return json.loads(data_path(name).read_text(encoding="utf-8"))
