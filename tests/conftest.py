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
    """Every input fixture (README.md excluded), relative to the repository root. A run directory (a folder
    with an ncclscope manifest.json) is one fixture: its files are read together, as `analyze RUN_DIR` does."""
    runs = {p.parent for p in FIXTURES.rglob("manifest.json")}
    files = [p for p in FIXTURES.rglob("*") if p.is_file() and p.name != "README.md" and p.parent not in runs]
    return sorted(p.relative_to(REPO) for p in [*files, *runs])


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


def analysis_of(*paths: str | Path):  # type: ignore[no-untyped-def]
    """The real pipeline on fixture paths (relative to the repository): read, assemble, analyze."""
    from ncclscope.case.read import read_case
    from ncclscope.diagnose.engine import analyze

    return analyze(read_case([str(REPO / p) for p in paths], jobs=1).case)


def findings_of(code: str, *paths: str | Path) -> list:  # type: ignore[type-arg]
    return [f for f in analysis_of(*paths).findings if f.code == code]


def only_finding(code: str, *paths: str | Path):  # type: ignore[no-untyped-def]
    found = findings_of(code, *paths)
    assert len(found) == 1, [f.message for f in found]
    return found[0]


def evidence_lines(finding) -> list[int]:  # type: ignore[no-untyped-def]
    return [e.line for e in finding.evidence]


def require_torch() -> None:
    """Skip a test that needs torch when it is not installed (the README's test command installs no torch);
    fail it when NCCLSCOPE_REQUIRE_TORCH=1 (CI, which installs the CPU build)."""
    import importlib.util

    if importlib.util.find_spec("torch") is not None:
        return
    if os.environ.get("NCCLSCOPE_REQUIRE_TORCH") == "1":
        pytest.fail("NCCLSCOPE_REQUIRE_TORCH=1 but torch is not importable: pip install 'ncclscope[runner]'")
    pytest.skip("torch is not installed (pip install 'ncclscope[runner]')")
