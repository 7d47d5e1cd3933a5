"""The wheel carries the grammars: installed, ncclscope works from any directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

FIXTURE = REPO / "fixtures" / "nccl" / "v2_18_8xh100_nvswitch.log"


@pytest.mark.slow
def test_built_wheel_parses_from_another_directory(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(wheels), str(REPO)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    wheel = next(wheels.glob("ncclscope-*.whl"))
    site = tmp_path / "site"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target", str(site), str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert install.returncode == 0, install.stderr[-2000:]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = dict(os.environ, PYTHONPATH=str(site))
    probe = subprocess.run(
        [
            sys.executable,
            "-c",
            "import ncclscope, ncclscope.grammars as g; print(ncclscope.__file__); print(g.grammar_dir())",
        ],
        capture_output=True,
        text=True,
        cwd=elsewhere,
        env=env,
        check=True,
    )
    module_file, grammar_dir = probe.stdout.split()
    assert module_file.startswith(str(site))
    assert grammar_dir.startswith(str(site)) and grammar_dir.endswith("grammars_data")
    run = subprocess.run(
        [sys.executable, "-m", "ncclscope", "parse", str(FIXTURE)],
        capture_output=True,
        text=True,
        cwd=elsewhere,
        env=env,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert "100.0%" in run.stdout
