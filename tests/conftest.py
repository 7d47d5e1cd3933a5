"""Shared helpers: the repository's fixtures, and running the real command line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"


def fixture_files() -> list[Path]:
    """Every input fixture (README.md excluded), relative to the repository root."""
    return sorted(p.relative_to(REPO) for p in FIXTURES.rglob("*") if p.is_file() and p.name != "README.md")


def run_cli(
    *args: str, stdin: bytes | None = None, cwd: Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[bytes]:
    """Run `python -m ncclscope ARGS` as a user would, capturing bytes."""
    env = dict(os.environ, COLUMNS="160", NO_COLOR="1")
    return subprocess.run(
        [sys.executable, "-m", "ncclscope", *args],
        input=stdin,
        capture_output=True,
        cwd=cwd or REPO,
        env=env,
        timeout=timeout,
        check=False,
    )


@pytest.fixture
def repo_cwd(monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(REPO)
    return REPO
