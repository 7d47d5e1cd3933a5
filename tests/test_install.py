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
            "import ncclscope, ncclscope.parse.grammars as g; print(ncclscope.__file__); print(g.grammar_dir())",
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


NUMPY_THREADS_PROBE = """
import os
from ncclscope.cli.entry import _load_numpy_single_threaded
_load_numpy_single_threaded()
print(len(os.listdir("/proc/self/task")), os.environ.get("OPENBLAS_NUM_THREADS"))
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads through Linux's /proc")
@pytest.mark.parametrize(("user_value", "printed"), [(None, "1 None"), ("3", "3")])
def test_numpy_loads_without_blas_threads_and_leaves_the_environment_as_it_was(
    user_value: str | None, printed: str
) -> None:
    """The command line loads numpy with one BLAS thread (spinning helpers cost CPU the parser needs),
    but the jobs `ncclscope run` starts inherit os.environ: the variable is not left behind, and a
    value the user set is theirs."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if user_value is not None:
        env["OPENBLAS_NUM_THREADS"] = user_value
    out = subprocess.run(
        [sys.executable, "-c", NUMPY_THREADS_PROBE], env=env, capture_output=True, text=True, check=True, cwd=REPO
    ).stdout.split()
    if user_value is None:
        assert out == printed.split()  # the main thread alone
    else:
        assert out[1] == printed  # the user's value stays; their thread count is theirs


PLUGIN_LOADER_PROBE = """
import sys
from ncclscope.cli.entry import main
sys.argv = ["ncclscope", "parse", "--format", "json", sys.argv[1]]
try:
    main()
except SystemExit as stop:
    code = stop.code
loader = sys.modules.get("pydantic.plugin._loader")
sys.stderr.write(f"PROBE {code} {getattr(loader, '__file__', None) is not None}\\n")
"""


@pytest.mark.parametrize(
    ("user_value", "pydantic_loader"),
    [(None, "False"), ("__all__", "False"), ("some_plugin", "True")],
)
def test_pydantic_plugin_loader_stands_aside_only_when_every_plugin_is_disabled(
    user_value: str | None, pydantic_loader: str
) -> None:
    """pydantic's plugin loader imports importlib.metadata and email (10 ms of start-up) to find no plugin
    when all are disabled: the command line puts one that finds none in its place, and the Case is read and
    printed as before. A user who names the plugins to disable gets pydantic's own loader."""
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"}
    if user_value is not None:
        env["PYDANTIC_DISABLE_PLUGINS"] = user_value
    run = subprocess.run(
        [sys.executable, "-c", PLUGIN_LOADER_PROBE, str(FIXTURE)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    )
    probe = next(line for line in run.stderr.splitlines() if line.startswith("PROBE"))
    code, own_loader = probe.split()[1:]
    assert code == "0"
    assert own_loader == pydantic_loader
    assert '"nccl_versions": [\n    "2.18.' in run.stdout  # models built and dumped either way
