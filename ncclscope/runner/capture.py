"""What the machine says about itself: GPU count, `nvidia-smi topo -m`, driver/CUDA/NCCL versions.

A missing tool is recorded as missing, never an error: a CPU-only machine has no nvidia-smi.
"""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
import sys
from pathlib import Path

from ncclscope.model import RunCapture

TOOL_TIMEOUT_S = 60
GPU_FACTS = ("Attached GPUs", "Driver Version", "CUDA Version", "Product Name", "Bus Id", "GPU 0")
NCCL_VERSION_RE = re.compile(r"NCCL version (\d+\.\d+\.\d+)")
NCCL_LIBRARY_RE = re.compile(r"nccl-library=(\d+)")


def _run(argv: list[str]) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None


def gpu_count(torch_available: bool) -> int:
    """GPUs on this host: `nvidia-smi -L`, or torch.cuda.device_count() where nvidia-smi is absent."""
    if shutil.which("nvidia-smi"):
        done = _run(["nvidia-smi", "-L"])
        return sum(line.startswith("GPU ") for line in done.stdout.splitlines()) if done else 0
    if torch_available:
        done = _run([sys.executable, "-c", "import torch; print(torch.cuda.device_count())"])
        if done and done.returncode == 0 and done.stdout.strip().isdigit():
            return int(done.stdout.strip())
    return 0


def capture_machine(run_dir: Path) -> tuple[list[RunCapture], dict[str, str]]:
    """topo.txt and gpus.txt when nvidia-smi exists; the driver and CUDA versions it reports."""
    captures: list[RunCapture] = []
    versions: dict[str, str] = {}
    for name, argv, target in (
        ("nvidia-smi topo -m", ["nvidia-smi", "topo", "-m"], "topo.txt"),
        ("nvidia-smi -q", ["nvidia-smi", "-q"], "gpus.txt"),
    ):
        if not shutil.which(argv[0]):
            captures.append(RunCapture(name=name, command=argv, status="missing", detail="nvidia-smi not on PATH"))
            continue
        done = _run(argv)
        if done is None or done.returncode != 0:
            detail = (done.stderr or done.stdout).strip()[:200] if done else "did not answer"
            captures.append(RunCapture(name=name, command=argv, status="failed", detail=detail))
            continue
        text = done.stdout if target == "topo.txt" else gpu_basics(done.stdout)
        (run_dir / target).write_text(text, encoding="utf-8")
        captures.append(RunCapture(name=name, command=argv, status="captured", file=target))
        if target == "gpus.txt":
            versions.update(driver_versions(text))
    try:
        versions["torch"] = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        pass
    return captures, versions


def gpu_basics(query: str) -> str:
    """The few lines of `nvidia-smi -q` a diagnosis needs: versions, GPU names and bus ids."""
    kept = [line.rstrip() for line in query.splitlines() if line.strip().startswith(GPU_FACTS)]
    return "\n".join(kept) + "\n"


def driver_versions(basics: str) -> dict[str, str]:
    versions: dict[str, str] = {}
    for line in basics.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "Driver Version":
            versions["driver"] = value.strip()
        elif key.strip() == "CUDA Version":
            versions["cuda"] = value.strip()
    return versions


def nccl_version(texts: list[str]) -> str | None:
    """From an `NCCL version X.Y.Z` line, or the nccl-tests banner's `nccl-library=CODE`."""
    for text in texts:
        match = NCCL_VERSION_RE.search(text)
        if match:
            return match[1]
    for text in texts:
        match = NCCL_LIBRARY_RE.search(text)
        if match:
            return version_from_code(int(match[1]))
    return None


def version_from_code(code: int) -> str:
    """NCCL_VERSION_CODE: X*10000+Y*100+Z since 2.9, X*1000+Y*100+Z before."""
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"
