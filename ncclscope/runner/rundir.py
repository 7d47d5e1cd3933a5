"""The run directory: its file names, and manifest.json (a RunRecord) rewritten as the run goes.

    manifest.json              what ran, how it ended, the environment, the captures, the inputs
    <collective>.stdout.txt    one stdout and one stderr file per collective
    <collective>.stderr.txt
    nccl.<host>.<pid>.log      NCCL_DEBUG_FILE of every process
    nccl-topo.xml              NCCL_TOPO_DUMP_FILE (what NCCL detected; written by rank 0 only)
    nccl-graph.xml             NCCL_GRAPH_DUMP_FILE (the channels NCCL chose; rank 0)
    nccl-topo.<host>.xml       on several hosts: each host's own dumps, from its local rank 0
    nccl-graph.<host>.xml
    inspector/<host>-pid<pid>.log  with --inspector: NCCL Inspector's records of every collective, per process
    env.txt                    NCCL_*, CUDA_*, FI_*, UCX_* as the collectives saw them
    topo.txt, nvidia-smi-q.txt, nvlink.txt, p2p.txt, ibstat.txt
                               the machine's own reports (inputs/host_reports.py), where its tools exist
    report.html, findings.json the analysis, at the end

The manifest lists the evidence files (`inputs`) so that reading the directory later
(`ncclscope analyze RUN_DIR`) takes those and never the reports, which quote the evidence again.
"""

from __future__ import annotations

import datetime
from pathlib import Path

from ncclscope.common.output_files import replacing
from ncclscope.inputs.host_reports import HOST_REPORTS
from ncclscope.inputs.opening import RUN_MANIFEST
from ncclscope.model import RunRecord
from ncclscope.runner.environment import (
    DEBUG_FILE_GLOB,
    GRAPH_DUMP_NAME,
    HOST_DUMP_GLOBS,
    INSPECTOR_DIR,
    TOPO_DUMP_NAME,
)

EVIDENCE_CAPTURES = tuple(report.file for report in HOST_REPORTS)  # the parsers read them; env.txt is for people


def now() -> str:
    return datetime.datetime.now().astimezone().isoformat(timespec="seconds")


def default_run_dir() -> Path:
    return Path(f"ncclscope-run-{datetime.datetime.now():%Y%m%d-%H%M%S}")


def output_names(collective: str) -> tuple[str, str]:
    return f"{collective}.stdout.txt", f"{collective}.stderr.txt"


def create_run_dir(path: Path) -> str | None:
    """Make the directory; a problem (exists and is not empty, cannot be made) as one line."""
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        return f"{path}: already exists and is not an empty directory; choose another --out"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"{path}: cannot create the run directory: {exc.strerror or exc}"
    return None


def nccl_logs(run_dir: Path) -> list[str]:
    return sorted(p.name for p in run_dir.glob(DEBUG_FILE_GLOB) if p.is_file())


def evidence_inputs(run_dir: Path, record: RunRecord) -> list[str]:
    names = [name for step in record.steps for name in (step.stdout, step.stderr) if name]
    names += nccl_logs(run_dir)
    names += [c.file for c in record.captures if c.file and (c.file in EVIDENCE_CAPTURES or c.host)]
    names += [TOPO_DUMP_NAME, GRAPH_DUMP_NAME]  # what NCCL detected and chose (parse/nccl_xml.py), when written
    names += sorted(p.name for pattern in HOST_DUMP_GLOBS for p in run_dir.glob(pattern) if p.is_file())
    inspector = run_dir / INSPECTOR_DIR
    names += (
        sorted(f"{INSPECTOR_DIR}/{p.name}" for p in inspector.glob("*") if p.is_file()) if inspector.is_dir() else []
    )
    return [name for name in names if _holds_something(run_dir / name)]


def _holds_something(path: Path) -> bool:
    """An empty stderr says nothing, and an empty input would count as unusable."""
    return path.is_file() and path.stat().st_size > 0


def write_manifest(run_dir: Path, record: RunRecord) -> None:
    """Refresh the inputs list and replace manifest.json atomically (a reader never sees half of it)."""
    record.inputs = evidence_inputs(run_dir, record)
    with replacing(run_dir / RUN_MANIFEST, 0o644) as handle:
        handle.write((record.model_dump_json(indent=2) + "\n").encode("utf-8"))
