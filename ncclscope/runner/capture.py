"""What the machine says about itself: GPU count, its own reports of its GPUs, links and ports
(`nvidia-smi topo -m`, `-q`, `nvlink -s`, `topo -p2p r`, `ibstat`), driver/CUDA/NCCL versions.

A missing tool is recorded as missing, never an error: a CPU-only machine has no nvidia-smi, a host
without InfiniBand no ibstat. Each report says what it adds, so that an analysis of the run can say
what a missing one would have told (EVD001).
"""

from __future__ import annotations

import importlib.metadata
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from ncclscope.inputs.host_reports import HOST_REPORTS, HostReport
from ncclscope.model import RunCapture

TOOL_TIMEOUT_S = 60


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


# what a report that answered with nothing says about the machine
EMPTY_MEANS = {"nvidia-smi nvlink -s": "no NVLink on this host's GPUs", "ibstat": "no InfiniBand device"}


def capture_hosts(run_dir: Path, each_host: list[str], hosts: list[str]) -> tuple[list[RunCapture], dict[str, str]]:
    """Each report from every host of a run of several hosts: the launcher (`each_host`, one process per
    host) runs the tool there into <file stem>.<host>.txt of the (shared) run directory. A host with no
    file is recorded as missing the report; the driver and CUDA versions come from the first host's -q."""
    captures: list[RunCapture] = []
    versions: dict[str, str] = {}
    for report in HOST_REPORTS:
        stem = report.file.removesuffix(".txt")
        header = f"echo '# {' '.join(report.argv)}'; " if report.file == "p2p.txt" else ""
        script = (
            f"command -v {report.argv[0]} >/dev/null 2>&1 || exit 0; h=$(hostname); h=${{h%%.*}}; "
            f'out="{run_dir.resolve()}/{stem}.$h.txt"; {{ {header}{shlex.join(report.argv)}; }} > "$out" 2>/dev/null '
            '|| rm -f "$out"'
        )
        done = _run([*each_host, "sh", "-c", script])
        found = {p.name[len(stem) + 1 : -4]: p for p in sorted(run_dir.glob(f"{stem}.*.txt"))}
        for host in hosts:
            short = host.split(".", 1)[0]
            path = found.pop(short, None) or found.pop(host, None)
            captures.append(_host_capture(report, host, path, done))
        captures += [_host_capture(report, host, path, done) for host, path in found.items()]  # names unlike --hosts
    first = next((c for c in captures if c.name == "nvidia-smi -q" and c.status == "captured" and c.file), None)
    if first is not None and first.file:
        versions.update(driver_versions((run_dir / first.file).read_text(encoding="utf-8", errors="replace")))
    try:
        versions["torch"] = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        pass
    return captures, versions


def _host_capture(
    report: HostReport, host: str, path: Path | None, done: subprocess.CompletedProcess[str] | None
) -> RunCapture:
    base = {"name": report.name, "command": report.argv, "host": host}
    if path is None:
        why = "the launcher did not answer" if done is None else f"{report.argv[0]} absent or failed there"
        return RunCapture(**base, status="missing", detail=why)
    text = path.read_text(encoding="utf-8", errors="replace")
    if report.file == "p2p.txt":  # our own "# nvidia-smi topo -p2p r" line heads it
        text = text.partition("\n")[2]
    if not text.strip():
        path.unlink()
        return RunCapture(**base, status="empty", detail=EMPTY_MEANS.get(report.name, ""))
    return RunCapture(**base, status="captured", file=path.name)


def capture_machine(run_dir: Path) -> tuple[list[RunCapture], dict[str, str]]:
    """Each host report where its tool exists (recorded as missing or failed otherwise); the driver and
    CUDA versions `nvidia-smi -q` gives."""
    captures: list[RunCapture] = []
    versions: dict[str, str] = {}
    for report in HOST_REPORTS:
        name, argv, target = report.name, report.argv, report.file
        if not shutil.which(argv[0]):
            captures.append(RunCapture(name=name, command=argv, status="missing", detail=f"{argv[0]} not on PATH"))
            continue
        done = _run(argv)
        if done is None or done.returncode != 0:
            detail = (done.stderr or done.stdout).strip()[:200] if done else "did not answer"
            captures.append(RunCapture(name=name, command=argv, status="failed", detail=detail))
            continue
        if not done.stdout.strip():  # `nvlink -s` on a GPU without NVLink (our H100 VM), ibstat without ports
            captures.append(RunCapture(name=name, command=argv, status="empty", detail=EMPTY_MEANS.get(name, "")))
            continue
        # topo -p2p does not say which capability it shows: the command line in the file does
        text = f"# {' '.join(argv)}\n{done.stdout}" if target == "p2p.txt" else done.stdout
        (run_dir / target).write_text(text, encoding="utf-8")
        captures.append(RunCapture(name=name, command=argv, status="captured", file=target))
        if name == "nvidia-smi -q":
            versions.update(driver_versions(text))
    try:
        versions["torch"] = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        pass
    return captures, versions


def driver_versions(query: str) -> dict[str, str]:
    """Driver and CUDA versions from the header of `nvidia-smi -q`."""
    versions: dict[str, str] = {}
    for line in query.splitlines():
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
