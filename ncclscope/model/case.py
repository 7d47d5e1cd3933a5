"""The Case: everything understood from the inputs of one invocation."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, overload

from pydantic import Field

from ncclscope.model.base import Evidence, Record, Source
from ncclscope.model.benchmarks import (
    BenchmarkRun,
    GraphSearch,
    RunRecord,
    SystemTopology,
    TopologyMatrix,
    TuningChoice,
)
from ncclscope.model.factories import new_dict, new_list
from ncclscope.model.hangs import CollCalls, FlightRecorderDump, FrTraceReport, GroupProgress, RasReport
from ncclscope.model.host_reports import (
    IbDevice,
    KernelEvent,
    NcclGraphDump,
    NcclTopologyDump,
    NvlinkGpu,
    P2pMatrix,
    PciDevice,
    RoceGid,
    SmiGpu,
)
from ncclscope.model.inspector import InspectorReport, InspectorSetup
from ncclscope.model.log import (
    Communicator,
    Connection,
    ConnectionSummary,
    CudaError,
    DiagReport,
    EnvSetting,
    ErrorTrace,
    FrameworkEvent,
    GdrReport,
    Host,
    IbCompletionError,
    InitTiming,
    InterfaceUse,
    LaunchMismatch,
    NcclMessage,
    NetDevice,
    P2pReport,
    Process,
    ProcessExit,
    RdmaProblem,
    SocketFailure,
    SysfsUnreadable,
    VerbsFailure,
)

if TYPE_CHECKING:
    from pandas import DataFrame

    from ncclscope.model.frames import Frames


class Case(Record):
    """Everything understood from the inputs of one `ncclscope` invocation."""

    ncclscope_version: str
    sources: list[Source] = Field(default_factory=new_list)
    nccl_versions: list[str] = Field(default_factory=new_list)
    cuda_driver_versions: list[int] = Field(default_factory=new_list)
    hosts: list[Host] = Field(default_factory=new_list)
    processes: list[Process] = Field(default_factory=new_list)
    communicators: list[Communicator] = Field(default_factory=new_list)
    connections: ConnectionSummary = Field(default_factory=ConnectionSummary)
    edges: list[Connection] = Field(default_factory=new_list, description="Distinct connection edges (capped).")
    edges_truncated: bool = False
    net_devices: list[NetDevice] = Field(default_factory=new_list)
    env: list[EnvSetting] = Field(default_factory=new_list)
    warnings: list[NcclMessage] = Field(default_factory=new_list, description="WARN lines (capped per family).")
    warning_count: int = 0
    error_traces: list[ErrorTrace] = Field(default_factory=new_list)
    interfaces: list[InterfaceUse] = Field(
        default_factory=new_list,
        description="Network interfaces NCCL named (bootstrap, NET/IB out-of-band, NET/Socket).",
    )
    gdr: list[GdrReport] = Field(default_factory=new_list, description="GPUDirect RDMA per HCA, GPU-NIC pair, rings.")
    ib_completion_errors: list[IbCompletionError] = Field(default_factory=new_list)
    socket_failures: list[SocketFailure] = Field(default_factory=new_list)
    rdma_problems: list[RdmaProblem] = Field(default_factory=new_list)
    launch_mismatches: list[LaunchMismatch] = Field(
        default_factory=new_list, description="Processes the bootstrap root refused: fields that differ, a rank twice."
    )
    init_timings: list[InitTiming] = Field(
        default_factory=new_list, description="NCCL's profile of each communicator's init and bootstrap (2.22+)."
    )
    verbs_failures: list[VerbsFailure] = Field(
        default_factory=new_list, description="RDMA verbs calls that failed (QP transitions, CQ/MR creation)."
    )
    p2p: list[P2pReport] = Field(default_factory=new_list)
    cuda_errors: list[CudaError] = Field(default_factory=new_list)
    sysfs_unreadable: list[SysfsUnreadable] = Field(default_factory=new_list)
    facts_capped: dict[str, int] = Field(
        default_factory=new_dict,
        description="Facts read but not kept beyond the limits (5000 of a kind per case; per input 2000 "
        "framework events and 500 command-line settings), counted by kind (interfaces, gdr, framework, settings ...).",
    )
    messages: list[NcclMessage] = Field(
        default_factory=new_list, description="Other notable INFO lines (NVLS support, P2P level, affinity ...)."
    )
    graphs: list[GraphSearch] = Field(default_factory=new_list)
    system_topologies: list[SystemTopology] = Field(default_factory=new_list)
    tuning: list[TuningChoice] = Field(default_factory=new_list)
    topologies: list[TopologyMatrix] = Field(default_factory=new_list)
    benchmarks: list[BenchmarkRun] = Field(default_factory=new_list)
    framework: list[FrameworkEvent] = Field(
        default_factory=new_list, description="PyTorch/framework lines about NCCL: watchdog timeouts, NCCL errors."
    )
    run: RunRecord | None = Field(None, description="What `ncclscope run` did, when the input is its run directory.")
    flight_records: list[FlightRecorderDump] = Field(
        default_factory=new_list, description="PyTorch Flight Recorder dumps."
    )
    fr_trace_reports: list[FrTraceReport] = Field(
        default_factory=new_list,
        description="Collectives not all ranks joined, as PyTorch's Flight Recorder analyzer (fr_trace) printed them.",
    )
    ras_reports: list[RasReport] = Field(default_factory=new_list, description="`ncclras` status reports.")
    topology_dumps: list[NcclTopologyDump] = Field(
        default_factory=new_list, description="NCCL's topology XML: what NCCL detected on a host."
    )
    graph_dumps: list[NcclGraphDump] = Field(default_factory=new_list, description="NCCL's graph XML: what it chose.")
    ib_devices: list[IbDevice] = Field(
        default_factory=new_list, description="`ibstat`, `ibv_devinfo`: adapters, ports, states, rates."
    )
    smi_gpus: list[SmiGpu] = Field(default_factory=new_list, description="`nvidia-smi -q`: one entry per GPU.")
    process_exits: list[ProcessExit] = Field(
        default_factory=new_list, description="Worker processes that ended in failure, as torchrun reports them."
    )
    pci_devices: list[PciDevice] = Field(
        default_factory=new_list, description="`lspci -vvv`: devices, bridges' bus ranges and ACS control."
    )
    acs_lines: list[Evidence] = Field(
        default_factory=new_list, description="ACSCtl lines with no device header before them (a grep of lspci)."
    )
    kernel_events: list[KernelEvent] = Field(
        default_factory=new_list,
        description="Kernel log lines about GPUs, NVSwitches and PCIe (Xid, SXid, fallen off the bus, AER).",
    )
    nvlink_gpus: list[NvlinkGpu] = Field(
        default_factory=new_list, description="`nvidia-smi nvlink -s`: each GPU's links and their speeds."
    )
    p2p_matrices: list[P2pMatrix] = Field(
        default_factory=new_list, description="`nvidia-smi topo -p2p`: P2P allowed or not, per GPU pair."
    )
    coll_calls: list[CollCalls] = Field(default_factory=new_list, description="COLL lines per rank and communicator.")
    inspector: list[InspectorReport] = Field(
        default_factory=new_list, description="NCCL Inspector output: the job's own collectives, timed per rank."
    )
    inspector_setups: list[InspectorSetup] = Field(
        default_factory=new_list, description="How each process's Inspector plugin writes (from its INFO lines)."
    )
    roce_gids: list[RoceGid] = Field(
        default_factory=new_list, description="`show_gids`: each RDMA port's GIDs, their IPv4 and RoCE version."
    )
    diag_reports: list[DiagReport] = Field(
        default_factory=new_list, description="NCCL 2.31's diagnostics reports (`NCCL DIAG` lines)."
    )
    progress: list[GroupProgress] = Field(
        default_factory=new_list, description="Who reached which collective, per group and kind of evidence (hangs)."
    )

    @overload
    def frames(self, name: None = None) -> Frames: ...
    @overload
    def frames(self, name: str) -> DataFrame: ...
    def frames(self, name: str | None = None) -> Frames | DataFrame:
        """The Case as pandas DataFrames (ncclscope.model.frames: benchmarks, connections, ranks, settings; findings
        empty), or the one frame `name`."""
        from ncclscope.model.frames import case_frames

        frames = case_frames(self)
        return frames if name is None else frames[name]


Severity = Literal["error", "warning", "info"]
