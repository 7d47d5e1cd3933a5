"""Benchmarks: the topology matrix beside them, nccl-tests runs, NCCL's graph search and tuning, and
what `ncclscope run` did.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ncclscope.model.base import Evidence, Record
from ncclscope.model.factories import new_dict, new_list


class TopologyMatrix(Record):
    """One `nvidia-smi topo -m` matrix."""

    source: str
    line: int = Field(description="Line of the header row.")
    devices: list[str] = Field(description="Column names in order: GPU0.., NIC0../mlx5_0..")
    gpus: list[str] = Field(default_factory=new_list)
    nics: list[str] = Field(default_factory=new_list)
    links: dict[str, dict[str, str]] = Field(
        description="links[from][to] = the legend token: X, NV12, PIX, PXB, PHB, NODE, SYS, SOC."
    )
    cpu_affinity: dict[str, str] = Field(default_factory=new_dict)
    numa_affinity: dict[str, str] = Field(default_factory=new_dict)
    gpu_numa_id: dict[str, str] = Field(default_factory=new_dict)
    nic_names: dict[str, str] = Field(default_factory=new_dict, description="NIC Legend: NIC0 -> mlx5_0.")
    legend: Literal["SYS", "SOC", "none"] = Field("none", description="Which legend generation was printed.")
    problems: list[str] = Field(default_factory=new_list, description="Cells or rows that could not be read.")
    pci_only: bool = Field(
        False, description="Printed by `nvidia-smi topo -mp`: PCIe paths only, GPU-GPU cells never show NVLink."
    )
    gpu_link: Literal["NVLink", "xGMI"] = Field(
        "NVLink", description="The GPUs' own link: NVLink (nvidia-smi), xGMI (AMD, `rocm-smi --showtopo`: XGMI cells)."
    )
    row_evidence: dict[str, list[Evidence]] = Field(
        default_factory=new_dict,
        description="The lines a device's row was read from, where they are not one row of this matrix (rocm-smi: its"
        " link type, hops and NUMA lines).",
    )


class Measurement(Record):
    time_us: float | None = None
    algbw: float | None = Field(None, description="GB/s (1e9 bytes/s).")
    busbw: float | None = None
    wrong: float | None = Field(None, description="#wrong count (v2.13+) or max error (older `error` column).")
    extra: dict[str, float | str | None] = Field(default_factory=new_dict, description="i_min, i_max ... with -I 1.")


class BenchmarkRow(Record):
    size: int
    count: int
    type: str
    redop: str = ""
    root: int = -1
    out_of_place: Measurement
    in_place: Measurement
    timestamp: str | None = None
    line: int


class TestDevice(Record):
    rank: int
    group: int | None = None
    pid: int | None = None
    host: str
    cuda_dev: int
    bus_id: str
    name: str


class TestFailure(Record):
    """A failure line of nccl-tests: `host: Test NCCL|CUDA failure file:line 'cause'`, `Test timeout`, or one
    of the ` .. host pid N: Test failure file:line` lines printed while unwinding."""

    kind: Literal["nccl", "cuda", "timeout", "unwind"]
    host: str | None = None
    pid: int | None = None
    location: str | None = Field(None, description="file:line in nccl-tests (common.cu:1005 ...).")
    message: str = Field("", description="The quoted cause: the error string, then ' / ' and NCCL's last error.")
    evidence: Evidence


class BenchmarkRun(Record):
    """One nccl-tests table (text or -J JSON)."""

    source: str
    line: int
    collective: str | None = Field(None, description="all_reduce, all_gather ... when known.")
    nranks: int | None = None
    nthreads: int | None = None
    ngpus: int | None = None
    min_bytes: int | None = None
    max_bytes: int | None = None
    iters: int | None = None
    warmup_iters: int | None = None
    nccl_tests_version: str | None = None
    nccl_headers: int | None = None
    nccl_library: int | None = None
    layout: str = Field("", description="Header generation: v1, v2.0-2.11, v2.13+, headerless, json.")
    time_label: Literal["time", "cputime"] = "time"
    devices: list[TestDevice] = Field(default_factory=new_list)
    rows: list[BenchmarkRow] = Field(default_factory=new_list)
    inferred: dict[str, str] = Field(
        default_factory=new_dict,
        description="Fields the output did not print (collective, nranks), each with what it was inferred from.",
    )
    avg_busbw: float | None = Field(None, description="The footer's Avg bus bandwidth (a mean over every row).")
    out_of_bounds: int | None = None
    out_of_bounds_ok: bool | None = None
    failures: list[TestFailure] = Field(default_factory=new_list, description="Test NCCL/CUDA failure lines.")
    errors: list[str] = Field(default_factory=new_list)
    evidence: Evidence | None = None


class GraphSearch(Record):
    """A `Pattern ...` graph search result (GRAPH subsystem) and its channels."""

    host: str | None = None
    pid: int | None = None
    pattern: int
    cross_nic: int
    nchannels: int
    bw_intra: float
    bw_inter: float
    type_intra: str | None = None
    type_inter: str | None = None
    same_channels: int
    channels: list[str] = Field(default_factory=new_list)
    evidence: Evidence


class TopoPath(Record):
    """A path NCCL computed between two GPUs of a host, from the lines after its topology dump
    (`GPU/0-3000 :... GPU/0-d000 (6/6.0/PHB)`)."""

    source: str = Field(description="The GPU the line is about, as NCCL names it (GPU/0-3000).")
    target: str = Field(description="The other GPU.")
    hops: int = Field(description="Links on the path.")
    bw: float = Field(description="The path's bandwidth in GB/s (its slowest link).")
    path_type: str = Field(description="NCCL's path type: NVL, NVB, C2C, PIX, PXB, P2C, PHB, SYS, ...")
    evidence: Evidence


class SystemTopology(Record):
    """NCCL's own topology dump (`=== System : maxBw ...`), one per process that printed it."""

    host: str | None = None
    pid: int | None = None
    max_bw: float | None = None
    total_bw: float | None = None
    nodes: list[str] = Field(default_factory=new_list, description="Node and link lines, indentation kept.")
    gpu_paths: list[TopoPath] = Field(
        default_factory=new_list,
        description="The paths between the host's GPUs that follow the dump (GRAPH), on the first dump of a host"
        " that has them.",
    )
    evidence: Evidence


class TuningChoice(Record):
    collective: str | None = None
    size: int
    algorithm: str
    protocol: str
    count: int = 1
    evidence: Evidence


RunStatus = Literal["ok", "failed", "timed_out", "interrupted", "running", "not_run"]


class RunStep(Record):
    """One command of an `ncclscope run` (one collective), as its manifest records it."""

    collective: str
    command: list[str] = Field(description="The argv that was run (or would be, with --dry-run).")
    status: RunStatus = "not_run"
    exit_code: int | None = None
    started: str | None = None
    duration_s: float | None = None
    timeout_s: float | None = Field(None, description="The per-collective timeout it ran under.")
    stdout: str | None = Field(None, description="File of the run directory holding its stdout.")
    stderr: str | None = None
    nccl_logs: list[str] = Field(default_factory=new_list, description="NCCL_DEBUG_FILE files its processes wrote.")
    last_lines: list[Evidence] = Field(
        default_factory=new_list, description="The last lines seen (stdout, stderr, NCCL logs) when it failed or hung."
    )


class RunCapture(Record):
    """A tool the runner asked about the machine (nvidia-smi ...), and what came of it."""

    name: str
    command: list[str] = Field(default_factory=new_list)
    host: str | None = Field(None, description="On a run of several hosts: the host this report is from.")
    status: Literal["captured", "empty", "missing", "failed"] = Field(
        description="empty: the tool ran and printed nothing (no file is written)."
    )
    file: str | None = None
    detail: str = ""


class RunRecord(Record):
    """What `ncclscope run` did, from the manifest.json of its run directory (the manifest is this model)."""

    format: Literal["ncclscope-run"] = "ncclscope-run"
    version: int = 1
    ncclscope_version: str = ""
    started: str | None = None
    ended: str | None = None
    host: str | None = None
    argv: list[str] = Field(default_factory=new_list, description="The ncclscope command line.")
    backend: str = Field(description="nccl-tests or torch.")
    launcher: str = "none"
    hosts: list[str] = Field(default_factory=new_list)
    ranks_per_host: int | None = None
    env_set: dict[str, str] = Field(default_factory=new_dict, description="Variables ncclscope set for the run.")
    env_user: dict[str, str] = Field(
        default_factory=new_dict, description="Variables ncclscope would have set but the user had: their values won."
    )
    captures: list[RunCapture] = Field(default_factory=new_list)
    versions: dict[str, str] = Field(default_factory=new_dict, description="nccl, cuda, driver, torch when known.")
    steps: list[RunStep] = Field(default_factory=new_list)
    inputs: list[str] = Field(
        default_factory=new_list, description="Files of the run directory that hold the evidence."
    )
    interrupted: bool = False
    stop_signal: int | None = Field(None, description="What interrupted the run: 2 Ctrl-C (SIGINT), 15 SIGTERM.")
    stopped: str | None = Field(None, description="Why the run stopped before the last collective, if it did.")
