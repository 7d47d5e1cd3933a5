"""The Case: everything ncclscope understood from its inputs, as pydantic models.

The models are the contract of `ncclscope parse --format json` (and of `ncclscope schema`).
Every fact keeps where it came from (`Evidence`: source path, line number, text) so that a
human can check it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal, overload

from pydantic import BaseModel, ConfigDict, Field

from ncclscope.factories import new_dict, new_list

if TYPE_CHECKING:
    from pandas import DataFrame

    from ncclscope.frames import Frames

SourceKind = Literal[
    "nccl_log",
    "topology",
    "nccl_tests",
    "nccl_tests_json",
    "framework_log",
    "flight_recorder",
    "ras_status",
    "topology_xml",
    "graph_xml",
    "ibstat",
    "ibv_devinfo",
    "nvidia_smi_query",
    "nvidia_smi_nvlink",
    "p2p_matrix",
]


class Record(BaseModel):
    """Base of the models here. Pydantic gives every instance a set of its own: the names of the fields
    its constructor was given (`model_fields_set`, read by `exclude_unset`). ncclscope never asks it,
    and in a Case of a 1024-rank job (76,000 models) those sets take 34 MB, more than the values: the
    instances of one class share one set, of all its field names (assigning a field adds nothing)."""

    # Schemas are built on a model's first use: a command uses a few of these classes (start-up, issue 11)
    model_config = ConfigDict(defer_build=True)

    _every_field: ClassVar[set[str]] = set()

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls._every_field = set(cls.model_fields)

    def model_post_init(self, context: Any, /) -> None:
        object.__setattr__(self, "__pydantic_fields_set__", self._every_field)


class Evidence(Record):
    """One input line that shows a fact."""

    source: str = Field(description="Path of the input ('-' for stdin).")
    line: int = Field(
        description="1-based line number in that input (0: a record of a file that has no lines, a dump)."
    )
    text: str = Field(
        default="",
        description="The line as it was read (ANSI escapes, CR, terminal trailers and markdown autolinks removed).",
    )

    @property
    def where(self) -> str:
        """`path:line`, or the path alone for a record of a binary or JSON document."""
        return f"{self.source}:{self.line}" if self.line > 0 else self.source


class UnrecognizedLine(Record):
    line: int
    text: str = Field(description="The line's text, cut at 300 characters.")
    reason: str = Field(default="", description="Why it was not understood, when known.")


class Source(Record):
    """One input (file, stdin, member of a directory) and how much of it was understood."""

    path: str
    kinds: list[SourceKind] = Field(default_factory=new_list, description="What the input holds.")
    lines: int = Field(0, description="Physical lines read.")
    bytes: int = 0
    nccl_lines: int = Field(0, description="Lines holding at least one NCCL log record (or a bare NCCL message).")
    recognized: int = Field(0, description="NCCL lines whose records were all understood.")
    unrecognized_count: int = Field(0, description="NCCL lines with at least one record not understood.")
    unrecognized: list[UnrecognizedLine] = Field(
        default_factory=new_list, description="The first unrecognised NCCL lines (at most 50)."
    )
    cut_records: int = Field(
        0, description="Records cut right after their prefix by another writer (no message left to read)."
    )
    topology_lines: int = 0
    nccl_tests_lines: int = 0
    framework_lines: int = Field(0, description="PyTorch/framework lines about NCCL (watchdog, NCCL errors) read.")
    framework_unrecognized: int = Field(
        0, description="Framework lines about NCCL that were not understood (listed in `unrecognized`)."
    )
    invalid_utf8_lines: int = Field(0, description="Lines that were not valid UTF-8 (decoded with replacement).")
    families: dict[str, int] = Field(default_factory=new_dict, description="Count of NCCL records per message family.")
    problems: list[str] = Field(default_factory=new_list, description="Why this input was partly or wholly unusable.")
    truncated: list[str] = Field(
        default_factory=new_list,
        description="Why the input looks cut: it stops inside a listing or in a cut record, or lines were elided.",
    )
    ends_cut: bool = Field(False, description="The input stops inside a listing or in a cut record.")
    stopped: str | None = Field(
        None, description="What ended reading before the input's end (Ctrl-C, SIGTERM): the rest was never read."
    )
    usable: bool = True


class NetDevice(Record):
    """A network device listed by `NET/IB : Using ...`, `NET/Socket : Using ...` or NET/OFI."""

    host: str
    transport: str = Field(description="IB, Socket or OFI.")
    index: int
    name: str = Field(description="e.g. mlx5_0, eth0, or a merged device 'mlx5_0+mlx5_1'.")
    port: int | None = None
    link_layer: str | None = Field(None, description="IB, RoCE or UNSPECIFIED (NET/IB only).")
    address: str | None = Field(None, description="Socket address (NET/Socket only).")
    members: list[str] = Field(default_factory=new_list, description="Physical NICs of a merged (virtual) device.")
    rail: int | None = None
    plane: int | None = None
    evidence: Evidence


class EnvSetting(Record):
    """An NCCL variable reported by `... set by environment to ...` (or `NCCL_IB_HCA set to`), or set by a
    command line in the inputs (`mpirun -x NCCL_...=`, `export NCCL_...=`)."""

    name: str
    value: str
    origin: Literal["log", "command_line"] = Field(
        "log", description="log: NCCL reported it; command_line: a launcher or shell line in the inputs sets it."
    )
    hosts: list[str] = Field(default_factory=new_list)
    processes: int = Field(0, description="How many processes reported it.")
    pids: list[int] = Field(default_factory=new_list, description="The processes (pids) that reported it.")
    evidence: Evidence


class NcclMessage(Record):
    """A WARN line (or an INFO line of a known error family), with its origin."""

    level: str
    family: str = Field(description="Message family, e.g. net_ib, cuda_failure, warn (a WARN of no known family).")
    kind: str = Field(
        "",
        description="What the message says within its family: ib_no_device, completion_error ... (the family's "
        "name when it has only one kind).",
    )
    host: str | None = None
    pid: int | None = None
    tid: int | None = None
    cuda_dev: int | None = None
    file: str | None = None
    file_line: int | None = None
    function: str | None = None
    timestamp: str | None = None
    message: str
    fields: dict[str, str | bool | int | float | None] = Field(
        default_factory=new_dict, description="The record's one-token fields, by the grammar's names (flags are true)."
    )
    evidence: Evidence


class Origin(Record):
    """Which process printed a record: the fields of its prefix."""

    host: str | None = None
    pid: int | None = None
    tid: int | None = None
    cuda_dev: int | None = None


class InterfaceUse(Origin):
    """A network interface NCCL names: for its bootstrap, as NET/IB's out-of-band interface, or in NET/Socket's list."""

    role: Literal["bootstrap", "oob", "socket"]
    name: str
    address: str | None = Field(None, description="IP address (or host name) without the <port>.")
    index: int | None = None
    evidence: Evidence


class GdrReport(Origin):
    """What a line says about GPUDirect RDMA: per HCA, per GPU-NIC pair, or for the rings of a communicator."""

    scope: Literal["hca", "pair", "rings"]
    enabled: bool
    network: str | None = Field(None, description="IB, IBext, AWS Libfabric ... (the NET/<name> of the line).")
    hca_index: int | None = None
    hca_name: str | None = None
    gpu: str | None = Field(None, description="The GPU: busId (2.5-2.28) or topology node (2.29+).")
    distance: int | None = None
    limit: int | None = Field(None, description="The NCCL_NET_GDR_LEVEL distance the pair is compared with.")
    reason: str | None = Field(None, description="Why, when printed: '(no module)' ...")
    evidence: Evidence


class IbCompletionError(Origin):
    """`NET/IB : Got completion ... with error/status N`: a work request that completed in error."""

    peer: str | None = Field(None, description="The peer as printed: address<port>.")
    peer_address: str | None = None
    status: int | None = Field(None, description="ibv_wc_status.")
    status_name: str | None = Field(None, description="IBV_WC_* name when printed (2.28.7+).")
    opcode: int | None = None
    vendor_err: int | None = None
    req_type: str | None = None
    hca: str | None = Field(None, description="The local NIC (2.22+).")
    gin: bool = Field(False, description="From NET/IB/GIN (2.29+).")
    evidence: Evidence


class SocketFailure(Origin):
    """A socket operation of NCCL's bootstrap, proxy or socket transport that failed (or is being retried)."""

    level: str
    problem: Literal[
        "connection_closed", "connect_failed", "call_failed", "bad_address_family", "no_interface", "other"
    ] = Field(description="What NCCL's own text says happened.")
    caller: str | None = Field(None, description="socketProgress, socketStartConnect, Net, Bootstrap ...")
    call: str | None = Field(None, description="recv, send, connect ...")
    peer: str | None = None
    peer_address: str | None = None
    errno_text: str | None = Field(None, description="strerror(errno) as printed: 'Connection refused' ...")
    retrying: bool = False
    evidence: Evidence


class RdmaProblem(Origin):
    """A line saying that the RDMA path (verbs, an IB device, a net plugin) cannot be used."""

    kind: Literal[
        "libibverbs_missing",
        "no_ib_device",
        "no_ip_interface",
        "net_plugin_init_failed",
        "ofi_init_failed",
        "ofi_no_provider",
    ]
    detail: str = ""
    evidence: Evidence


class P2pReport(Origin):
    """What NCCL says about peer-to-peer access between GPUs of one host."""

    kind: Literal["intra_node_support", "not_enabled", "disabled_on_nvlink"] = Field(
        description="intra_node_support: `Check P2P Type intraNodeP2pSupport N`; not_enabled: `Could not enable "
        "P2P between dev a and dev b`; disabled_on_nvlink: `P2P is disabled between NVLINK connected GPUs a and b`."
    )
    supported: bool | None = None
    devices: list[str] = Field(default_factory=new_list, description="The two devices, as printed.")
    evidence: Evidence


class CudaError(Origin):
    """`Cuda failure [N] 'text'` (WARN), or its non-fatal INFO form."""

    fatal: bool = Field(True, description="False for the INFO ...IGNORE form NCCL goes on after.")
    code: int | None = None
    text: str = Field(description="The CUDA error string, as quoted.")
    location: str | None = None
    evidence: Evidence


class SysfsUnreadable(Origin):
    """`Topology detection : could not read /sys/...`: an attribute NCCL's topology detection could not read."""

    path: str
    evidence: Evidence


FrameworkKind = Literal[
    "watchdog_timeout",
    "watchdog_status",
    "dump_signal",
    "watchdog_stuck",
    "pg_options",
    "operations_failed",
    "watchdog_exception",
    "nccl_error",
    "nccl_result",
    "last_error",
    "comm_aborted",
]


class FrameworkEvent(Record):
    """A line that the framework around NCCL (PyTorch's ProcessGroupNCCL, and what wraps it) printed about it."""

    kind: FrameworkKind = Field(
        description="watchdog_timeout (a collective ran past its timeout), watchdog_status (last enqueued and "
        "completed work), dump_signal (a rank's state dumped because some rank timed out: from_rank, or this rank "
        "when None), watchdog_stuck (the watchdog thread itself made no progress), pg_options (how a process group "
        "was set up: world_size, timeout_ms, nccl_version), operations_failed, watchdog_exception, nccl_error (NCCL "
        "returned an error to the framework), nccl_result (the ncclResult_t name line), last_error (NCCL's last "
        "WARN, as the framework quotes it), comm_aborted."
    )
    rank: int | None = Field(None, description="Global rank, as the record names it.")
    world_size: int | None = Field(None, description="pg_options: ranks in the process group.")
    process_group: str | None = None
    seq: int | None = Field(None, description="Sequence number of the collective (SeqNum, work sequence id).")
    op_type: str | None = Field(None, description="OpType: ALLREDUCE, BROADCAST, _ALLGATHER_BASE ...")
    numel_in: int | None = None
    numel_out: int | None = None
    timeout_ms: int | None = None
    ran_ms: int | None = None
    last_enqueued: int | None = None
    last_completed: int | None = None
    from_rank: int | None = Field(None, description="dump_signal: the rank whose timeout made this rank dump.")
    stuck_s: int | None = Field(None, description="watchdog_stuck: seconds the watchdog made no progress.")
    nccl_version: str | None = None
    raised_at: str | None = Field(None, description="file:line of the framework that raised the NCCL error.")
    text: str = Field("", description="The error text: NCCL's result string, the last error, the rest of the line.")
    evidence: Evidence


class ErrorTrace(Record):
    """A `file:line -> N` error propagation chain of one thread, decoded."""

    host: str | None = None
    pid: int | None = None
    tid: int | None = None
    result: int
    result_name: str
    frames: list[str] = Field(description="file:line of each level, innermost first.")
    thread: str | None = Field(None, description="'Async thread', 'Progress Thread' ... when printed.")
    errno_text: str | None = Field(None, description="strerror(errno) of the first level that printed one.")
    evidence: list[Evidence]


class Process(Record):
    host: str
    pid: int | None
    source: str
    nccl_version: str | None = None
    cuda_driver_version: int | None = None
    cuda_devs: list[int] = Field(default_factory=new_list)
    ranks: list[int] = Field(default_factory=new_list)
    network: str | None = Field(None, description="`Using network X`.")
    bootstrap_interface: str | None = None
    net_plugin: str | None = Field(None, description="What the NET plugin lines say (loaded name or internal).")
    evidence: dict[str, Evidence] = Field(
        default_factory=new_dict, description="The line behind each field above (nccl_version, network ...)."
    )


class Host(Record):
    name: str
    processes: int
    ranks: list[int] = Field(default_factory=new_list)
    nccl_versions: list[str] = Field(default_factory=new_list)
    cuda_driver_versions: list[int] = Field(default_factory=new_list)
    networks: list[str] = Field(default_factory=new_list)
    net_plugins: list[str] = Field(default_factory=new_list)
    bootstrap_interfaces: list[str] = Field(default_factory=new_list)
    gdr: Literal["on", "off", "mixed", "unknown"] = Field(
        "unknown", description="GPUDirect RDMA as shown by the NET connection lines and GDR messages."
    )


class CommRank(Record):
    rank: int
    host: str | None = None
    pid: int | None = None
    cuda_dev: int | None = None
    nvml_dev: int | None = None
    bus_id: str | None = None
    init_start: bool = False
    init_complete: bool = False
    evidence: Evidence | None = None


class Communicator(Record):
    """One NCCL communicator, keyed by commId; one made by ncclCommSplit (no commId) by its parent, its
    color and which split of the parent it was; else by host+pid+comm pointer."""

    id: str
    comm_id: str | None = Field(None, description="commId as printed (0x...), when printed and non-zero.")
    api: str | None = Field(None, description="ncclCommInitRank, ncclCommSplit ...")
    parent: str | None = Field(None, description="ncclCommSplit: the id of the communicator it was split from.")
    color: int | None = Field(None, description="ncclCommSplit: the color its ranks asked for.")
    nranks: int | None = None
    nnodes: int | None = None
    ranks: list[CommRank] = Field(default_factory=new_list)
    ranks_started: int = 0
    ranks_completed: int = 0
    channels: int | None = Field(None, description="From the `N coll channels` line.")
    nvls_channels: int | None = None
    p2p_channels: int | None = None
    rings: dict[int, list[int]] = Field(default_factory=new_dict, description="Ring order per channel (rank 0's view).")
    rings_truncated: bool = False
    trees: dict[int, list[str]] = Field(default_factory=new_dict, description="Per rank, `Trees` entries.")
    init_seconds: dict[int, float] = Field(default_factory=new_dict, description="Init timings total per rank.")
    evidence: Evidence | None = None


class ConnectionSummary(Record):
    """Connection lines (transport setup), summarised; every line is counted."""

    total: int = 0
    by_transport: dict[str, int] = Field(
        default_factory=new_dict, description="e.g. P2P/CUMEM, SHM, NET/IB, NET/Socket, COLLNET, counts of lines."
    )
    net_with_gdr: int = 0
    net_without_gdr: int = 0
    via_proxy: int = Field(0, description="NET connections through a PXN proxy rank.")
    across_hosts: Evidence | None = Field(
        None,
        description="A NET line between two ranks on the same device number (0[18000] -> 1[18000]): two ranks "
        "cannot share a GPU, so the job spans hosts even when every line carries one host name.",
    )
    examples: dict[str, Evidence] = Field(default_factory=new_dict, description="First line of each transport.")


class Connection(Record):
    """One distinct edge (aggregated over channels)."""

    from_rank: int
    to_rank: int
    from_dev: str | None = Field(
        None, description="The bracketed device of the sender: nvmlDev, or busId (2.5-2.18.1)."
    )
    to_dev: str | None = None
    transport: str
    direction: Literal["send", "receive", ""] = ""
    host: str | None = None
    nic: int | None = None
    gdr: bool = False
    shared: bool = False
    proxy_rank: int | None = None
    peer_rank: int | None = Field(
        None,
        description="NET edges (to_rank -1, from_rank the local rank): the rank at the other end, when printed.",
    )
    channels: int = Field(description="How many lines show this edge.")
    evidence: Evidence


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


class SystemTopology(Record):
    """NCCL's own topology dump (`=== System : maxBw ...`), one per process that printed it."""

    host: str | None = None
    pid: int | None = None
    max_bw: float | None = None
    total_bw: float | None = None
    nodes: list[str] = Field(default_factory=new_list, description="Node and link lines, indentation kept.")
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
    stopped: str | None = Field(None, description="Why the run stopped before the last collective, if it did.")


# ---------------------------------------------------------------------------------------------
# Hangs: who reached which collective (Flight Recorder dumps, NCCL RAS, COLL lines, watchdog lines)


class FlightRecorderEntry(Record):
    """One collective or point-to-point call in a rank's Flight Recorder ring buffer."""

    record_id: int | None = None
    group: str = Field(description="Process group name (its uid: '0' for the default group).")
    group_desc: str = Field("", description="The group's description: default_pg, dp, tp ...")
    seq: int | None = Field(None, description="collective_seq_id: the group's collective sequence number.")
    p2p_seq: int | None = Field(None, description="p2p_seq_id: the group's point-to-point sequence number.")
    is_p2p: bool = False
    collective: str = Field(description="all_reduce, broadcast, send 0->1 ... (profiling_name after the backend).")
    backend: str | None = Field(None, description="nccl, gloo ... (profiling_name before ':').")
    input_sizes: list[list[int]] = Field(default_factory=new_list)
    output_sizes: list[list[int]] = Field(default_factory=new_list)
    input_dtypes: list[str] = Field(default_factory=new_list)
    output_dtypes: list[str] = Field(default_factory=new_list)
    state: str = Field("", description="scheduled, started or completed.")
    retired: bool | None = None
    timeout_ms: int | None = None
    time_created_ns: int | None = None
    called_at: str | None = Field(None, description="The innermost frame outside torch: file:line (function).")


class FlightRecorderGroup(Record):
    name: str
    desc: str = ""
    ranks: list[int] = Field(default_factory=new_list, description="Global ranks of the group, as the dump lists them.")


class FlightRecorderStatus(Record):
    """pg_status: the watchdog's view of one group on this rank."""

    last_enqueued: int | None = None
    last_started: int | None = None
    last_completed: int | None = None


class FlightRecorderDump(Record):
    """One rank's Flight Recorder dump (PyTorch TORCH_FR_DUMP_TEMP_FILE, pickle or JSON)."""

    source: str
    rank: int | None = Field(
        None, description="Global rank: the trailing number of the file name, as fr_trace reads it."
    )
    format: Literal["pickle", "json"]
    version: str = ""
    comm_lib_version: str | None = Field(None, description="The NCCL version the dump names.")
    groups: list[FlightRecorderGroup] = Field(default_factory=new_list)
    status: dict[str, FlightRecorderStatus] = Field(default_factory=new_dict, description="Per group id.")
    entries: list[FlightRecorderEntry] = Field(default_factory=new_list)
    entries_total: int = Field(0, description="Entries in the dump (the list keeps the last ones of each group).")
    problems: list[str] = Field(default_factory=new_list, description="Entries or fields that could not be read.")


class RankProgress(Record):
    """How far one rank of a group got."""

    rank: int
    host: str | None = None
    pid: int | None = None
    entered: int | None = Field(None, description="Highest sequence number (op count) the rank entered.")
    completed: int | None = Field(None, description="Highest sequence number it completed, when known.")
    operation: str | None = Field(None, description="What it entered last: collective, sizes, dtype.")
    state: str | None = Field(None, description="Where that last operation stands, when known.")
    status: str | None = Field(None, description="RAS: the rank's status (missing, dead, unresponsive ...).")
    evidence: Evidence | None = None


class GroupProgress(Record):
    """Collective progress of one communicator or process group, from one kind of evidence."""

    via: Literal["flight_recorder", "ras", "coll_lines", "watchdog"]
    group: str = Field(description="Process group (name:desc), communicator hash or pointer.")
    size: int | None = Field(None, description="Ranks the group should have.")
    ranks: list[RankProgress] = Field(default_factory=new_list)
    missing: list[RankProgress] = Field(
        default_factory=new_list, description="Ranks known to belong to the group that reported nothing."
    )
    counts_by_collective: bool = Field(
        False, description="RAS: counts are per collective type (`operation` names it), not one sequence."
    )
    counts_calls: bool = Field(
        False,
        description="COLL lines whose opCount stayed 0 (no proxy operations): a rank's position is the number of "
        "COLL lines it printed, not an opCount.",
    )


class RasCommunicator(Record):
    """One communicator of an `ncclras` report (text or `-f json`)."""

    id: str = Field(description="'#group-index' (text) or the hash (JSON).")
    hash: str | None = None
    size: int | None = None
    status: str | None = Field(None, description="RUNNING, INIT, FINALIZE, ABORT, NOCOMM ...")
    errors: list[str] = Field(default_factory=new_list, description="INCOMPLETE, MISMATCH, ERROR ...")
    ranks: list[RankProgress] = Field(default_factory=new_list, description="Ranks reported, with their op counts.")
    missing: list[RankProgress] = Field(default_factory=new_list, description="Ranks that gave no data.")
    missing_evidence: Evidence | None = Field(
        None, description="The `Missing communicator data from N ranks` line that the missing ranks are listed under."
    )
    op_counts: dict[str, dict[int, int]] = Field(
        default_factory=new_dict,
        description="Per collective type ('' when not named): operation count -> how many ranks.",
    )
    evidence: Evidence | None = None


class RasGroup(Record):
    """A row of the text report's communicator table: communicators alike in size, state and errors."""

    group: int
    communicators: int
    nodes_per_comm: int
    ranks_per_node: str = Field(description="A number or a range ('7-8').")
    ranks_per_comm: int
    ranks_in_group: int
    status: str = Field(description="RUNNING, INIT, FINALIZE, ABORT, NOCOMM ...")
    errors: list[str] = Field(default_factory=new_list, description="Empty for OK; INCOMPLETE, MISMATCH ...")
    evidence: Evidence | None = None


class RasJob(Record):
    """The text report's job summary: what RAS saw of the job as a whole."""

    nodes: int
    processes_per_node: str = Field(description="A number or a range.")
    gpus_per_process: str = Field(description="A number or a range.")
    processes: int
    gpus: int
    evidence: Evidence | None = None


class RasReport(Record):
    """An `ncclras` status report (NCCL 2.24+), text or JSON (2.28.7+)."""

    source: str
    format: Literal["text", "json"]
    nccl_version: str | None = None
    job: RasJob | None = None
    groups: list[RasGroup] = Field(default_factory=new_list, description="Text reports: the communicator table.")
    communicators: list[RasCommunicator] = Field(default_factory=new_list)
    dead_processes: list[str] = Field(default_factory=new_list, description="'process PID on node HOST' entries.")
    missing_processes: list[str] = Field(default_factory=new_list)
    timeouts: int = 0
    contradictions: list[str] = Field(
        default_factory=new_list, description="Where the report contradicts itself (then its errors are not trusted)."
    )
    evidence: Evidence | None = None


class CollCalls(Record):
    """NCCL_DEBUG_SUBSYS=COLL lines of one rank of one communicator: how many calls, and the last."""

    host: str | None = None
    pid: int | None = None
    comm: str = Field(description="The communicator pointer the lines print.")
    communicator: str | None = Field(None, description="Communicator.id, from the init line of that pointer.")
    rank: int | None = Field(None, description="From the same process's init line for that pointer.")
    nranks: int | None = None
    calls: int = 0
    last_op_count: int = Field(description="Highest opCount printed (hex in the log).")
    last_call: str = Field("", description="Collective of that line, with count and datatype.")
    evidence: Evidence


class XmlCpu(Record):
    """A CPU (NUMA node) of NCCL's topology XML."""

    numa_id: int | None = None
    arch: str | None = None
    vendor: str | None = None
    family_id: int | None = None
    model_id: int | None = None
    affinity: str | None = None
    host_hash: str | None = None
    evidence: Evidence | None = Field(None, description="The element's line.")


class XmlPciDevice(Record):
    """A PCI device of NCCL's topology XML (a switch, GPU, NIC or other), with the link NCCL read for it."""

    busid: str
    kind: Literal["gpu", "nic", "switch", "nvswitch", "other"]
    class_code: str | None = Field(None, description="PCI class, e.g. 0x060400 (bridge), 0x030200 (3D controller).")
    vendor: str | None = None
    device: str | None = None
    link_speed: float | None = Field(None, description="GT/s as NCCL wrote it (2.5, 5, 8, 16, 32, 64).")
    link_width: int | None = Field(None, description="Lanes, as NCCL wrote them.")
    parent: str | None = Field(None, description="busid of the upstream PCI device; None: attached to its CPU.")
    numa_id: int | None = Field(None, description="The CPU (NUMA node) the device hangs from.")
    evidence: Evidence | None = Field(None, description="The element's line.")


class XmlNvLink(Record):
    target: str = Field(description="busid of the peer GPU or NVSwitch, or a CPU's id.")
    count: int | None = Field(None, description="Links bonded to that target.")
    target_class: str | None = Field(None, description="PCI class of the target (tclass): 0x068000 is an NVSwitch.")


class XmlGpu(Record):
    """A GPU of NCCL's topology XML."""

    busid: str
    dev: int | None = None
    sm: int | None = Field(None, description="Compute capability x 10 (90: Hopper).")
    rank: int | None = None
    gdr: bool | None = None
    nvlinks: list[XmlNvLink] = Field(default_factory=new_list)
    c2c_bw: float | None = Field(None, description="C2C link bandwidth (GB/s per link) where the GPU has one.")
    c2c_count: int | None = None
    evidence: Evidence | None = Field(None, description="The element's line.")


class XmlNet(Record):
    """A network device (an HCA port, a socket interface) of NCCL's topology XML."""

    name: str
    busid: str | None = Field(None, description="The NIC's PCI device, when the XML places it on one.")
    dev: int | None = None
    speed: int | None = Field(None, description="Mb/s as NCCL wrote it.")
    port: int | None = None
    guid: str | None = None
    gdr: bool | None = None
    latency: float | None = None
    max_conn: int | None = None
    coll: bool | None = None
    evidence: Evidence | None = Field(None, description="The element's line.")


class NcclTopologyDump(Record):
    """What NCCL detected on one host (NCCL_TOPO_DUMP_FILE) or was told (an NCCL_TOPO_FILE): CPUs, PCI tree,
    GPUs with their NVLinks, NICs."""

    source: str
    host: str | None = Field(None, description="From the file name of a run's per-host dump (nccl-topo.<host>.xml).")
    version: int | None = None
    host_hash: str | None = None
    cpus: list[XmlCpu] = Field(default_factory=new_list)
    pci: list[XmlPciDevice] = Field(default_factory=new_list)
    gpus: list[XmlGpu] = Field(default_factory=new_list)
    nets: list[XmlNet] = Field(default_factory=new_list)


class XmlGraph(Record):
    """One graph (ring, tree, NVLS ...) of NCCL's graph XML: what NCCL chose and the speeds it expects."""

    id: int | None = None
    pattern: int | None = Field(None, description="1 balanced tree, 2 split tree, 3 tree, 4 ring, 5 NVLS, 6 CollNet.")
    cross_nic: int | None = None
    nchannels: int | None = None
    speed_intra: float | None = Field(None, description="GB/s per channel inside a node.")
    speed_inter: float | None = Field(None, description="GB/s per channel between nodes.")
    latency_inter: float | None = None
    type_intra: str | None = Field(None, description="Path type inside a node: NVL, PIX, PXB, PHB, SYS ...")
    type_inter: str | None = None
    same_channels: int | None = None
    channels: list[list[str]] = Field(
        default_factory=new_list, description="Each channel's devices in order: NET/<dev>, GPU/<dev>:<rank>."
    )
    evidence: Evidence | None = Field(None, description="The element's line.")


class NcclGraphDump(Record):
    """NCCL's graph XML (NCCL_GRAPH_DUMP_FILE)."""

    source: str
    host: str | None = Field(None, description="From the file name of a run's per-host dump (nccl-graph.<host>.xml).")
    version: int | None = None
    graphs: list[XmlGraph] = Field(default_factory=new_list)


class IbPort(Record):
    """One port of a channel adapter, as `ibstat` or `ibv_devinfo` reports it (in ibstat's words)."""

    port: int
    state: str | None = Field(None, description="Down, Initializing, Armed, Active.")
    physical_state: str | None = Field(None, description="Polling, Disabled, LinkUp, LinkErrorRecovery ...")
    rate: float | None = Field(None, description="Gb/s.")
    link_layer: str | None = Field(None, description="InfiniBand or Ethernet (RoCE).")
    port_guid: str | None = None
    evidence: Evidence | None = Field(None, description="The `State:` line (the `Port N:` line until it comes).")
    rate_evidence: Evidence | None = Field(
        None, description="The `Rate:` line (ibv_devinfo -v: `active_speed`, the lane speed times the width)."
    )


class IbDevice(Record):
    """One channel adapter (HCA) as `ibstat` or `ibv_devinfo` reports it."""

    name: str
    source: str = Field(description="The input it was read from (neither tool names its host).")
    tool: Literal["ibstat", "ibv_devinfo"] = "ibstat"
    ca_type: str | None = Field(None, description="ibstat's CA type (MT4129); ibv_devinfo's board_id.")
    firmware: str | None = None
    node_guid: str | None = None
    ports: list[IbPort] = Field(default_factory=new_list)
    evidence: Evidence | None = Field(None, description="The `CA 'name'` or `hca_id:` line.")
    firmware_evidence: Evidence | None = None


class SmiGpu(Record):
    """One GPU as `nvidia-smi -q` reports it: identity, versions, PCIe link (current and max), modes and
    health. Values are as printed (None where the tool printed N/A or nothing)."""

    source: str = Field(description="The input it was read from (nvidia-smi -q does not name its host).")
    bus_id: str = Field(description="PCI bus id in NCCL's form, e.g. 0000:18:00.0.")
    index: int = Field(description="Its place in the report (0 for the first GPU), nvidia-smi's own order.")
    product: str | None = None
    serial: str | None = None
    uuid: str | None = None
    vbios: str | None = None
    driver: str | None = Field(None, description="The report's Driver Version.")
    cuda: str | None = Field(None, description="The report's CUDA Version.")
    pcie_gen: int | None = Field(None, description="PCIe generation now (an idle GPU lowers it to save power).")
    pcie_gen_max: int | None = Field(None, description="The highest generation the GPU and its slot allow.")
    width: int | None = Field(None, description="PCIe link width now (lanes).")
    width_max: int | None = None
    performance_state: str | None = Field(None, description="P0 (full performance) ... P12 (idle).")
    persistence_mode: str | None = None
    mig_mode: str | None = None
    ecc_mode: str | None = None
    uncorrectable_errors: int | None = Field(None, description="Volatile uncorrectable ECC errors, summed.")
    remap_pending: bool | None = Field(None, description="Remapped Rows: Pending (a reset is needed).")
    remap_failed: bool | None = None
    fabric_state: str | None = Field(None, description="NVSwitch systems: Fabric State (Completed when ready).")
    evidence: Evidence | None = Field(None, description="The `GPU 00000000:18:00.0` line.")
    link_evidence: list[Evidence] = Field(
        default_factory=new_list, description="The PCIe generation and link width lines (Max, Current)."
    )
    version_evidence: list[Evidence] = Field(default_factory=new_list, description="The Driver and VBIOS lines.")


class NvlinkLink(Record):
    """One NVLink of a GPU as `nvidia-smi nvlink -s` reports it."""

    link: int
    speed: float | None = Field(None, description="GB/s per direction; None when inactive.")
    evidence: Evidence | None = None


class NvlinkGpu(Record):
    """One GPU's NVLinks as `nvidia-smi nvlink -s` reports them."""

    source: str = Field(description="The input it was read from (nvidia-smi does not name its host).")
    index: int = Field(description="nvidia-smi's GPU index.")
    product: str | None = None
    uuid: str | None = None
    links: list[NvlinkLink] = Field(default_factory=new_list)
    evidence: Evidence | None = Field(None, description="The `GPU 0: ... (UUID: ...)` line.")

    @property
    def active(self) -> list[NvlinkLink]:
        return [link for link in self.links if link.speed is not None]


class P2pMatrix(Record):
    """One `nvidia-smi topo -p2p` matrix: what the driver allows between each pair of GPUs."""

    source: str
    capability: Literal["read", "write", "nvlink", "atomics", "prop"] | None = Field(
        None, description="From the command line before it (`topo -p2p r`); None when the input does not say."
    )
    gpus: list[str] = Field(default_factory=new_list, description="Row names in order: GPU0, GPU1 ...")
    cells: dict[str, dict[str, str]] = Field(
        default_factory=new_dict, description="cells[GPUa][GPUb]: X, OK, CNS, GNS, TNS, NS, DR, U."
    )
    evidence: dict[str, Evidence] = Field(default_factory=new_dict, description="Each GPU's row.")


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
    ras_reports: list[RasReport] = Field(default_factory=new_list, description="`ncclras` status reports.")
    topology_dumps: list[NcclTopologyDump] = Field(
        default_factory=new_list, description="NCCL's topology XML: what NCCL detected on a host."
    )
    graph_dumps: list[NcclGraphDump] = Field(default_factory=new_list, description="NCCL's graph XML: what it chose.")
    ib_devices: list[IbDevice] = Field(
        default_factory=new_list, description="`ibstat`, `ibv_devinfo`: adapters, ports, states, rates."
    )
    smi_gpus: list[SmiGpu] = Field(default_factory=new_list, description="`nvidia-smi -q`: one entry per GPU.")
    nvlink_gpus: list[NvlinkGpu] = Field(
        default_factory=new_list, description="`nvidia-smi nvlink -s`: each GPU's links and their speeds."
    )
    p2p_matrices: list[P2pMatrix] = Field(
        default_factory=new_list, description="`nvidia-smi topo -p2p`: P2P allowed or not, per GPU pair."
    )
    coll_calls: list[CollCalls] = Field(default_factory=new_list, description="COLL lines per rank and communicator.")
    progress: list[GroupProgress] = Field(
        default_factory=new_list, description="Who reached which collective, per group and kind of evidence (hangs)."
    )

    @overload
    def frames(self, name: None = None) -> Frames: ...
    @overload
    def frames(self, name: str) -> DataFrame: ...
    def frames(self, name: str | None = None) -> Frames | DataFrame:
        """The Case as pandas DataFrames (ncclscope.frames: benchmarks, connections, ranks, settings; findings
        empty), or the one frame `name`."""
        from ncclscope.frames import case_frames

        frames = case_frames(self)
        return frames if name is None else frames[name]


# ---------------------------------------------------------------------------------------------
# Findings: what `ncclscope analyze` says about a Case

Severity = Literal["error", "warning", "info"]
SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


class Finding(Record):
    """One diagnosis, with the lines that show it and what to do about it."""

    code: str = Field(description="Rule code, e.g. NET001 (a code keeps its meaning across releases).")
    name: str = Field(description="Rule name, e.g. socket-transport.")
    severity: Severity
    message: str = Field(description="One line with the concrete facts: hosts, ranks, GPUs, NICs, sizes.")
    evidence: list[Evidence] = Field(default_factory=new_list, description="Representative lines (a few).")
    evidence_count: int = Field(0, description="How many lines in all support the finding.")
    explanation: str = Field("", description="Why it matters.")
    fix: str = Field("", description="What to do.")
    hosts: list[str] = Field(default_factory=new_list)
    ranks: list[int] = Field(default_factory=new_list)
    related: list[str] = Field(
        default_factory=new_list, description="Codes of findings this one explains or is explained by (one story)."
    )
    root_cause: bool = Field(False, description="First link of a story told by several findings.")
    sources: list[str] = Field(default_factory=new_list, description="Where the expert knowledge comes from.")

    @property
    def identity(self) -> tuple:
        """What makes it the same finding in a newer analysis of a growing input: code and first evidence line."""
        first = self.evidence[0] if self.evidence else None
        return (self.code, first.source, first.line) if first else (self.code, self.message)


class BandwidthJudgement(Record):
    """How a benchmark's peak busbw compares with what the hardware should reach."""

    source: str
    line: int
    collective: str
    nranks: int | None = None
    size: int = Field(description="The largest size of the run, where peak busbw is judged.")
    measured_busbw: float
    expected_busbw: float | None = None
    ratio: float | None = None
    algorithm: str | None = Field(None, description="Algorithm the expectation assumes (ring, nvls, ...).")
    platform: str | None = None
    expectation_source: str | None = None
    verdict: str = Field(description="One or two sentences a person can quote in a ticket.")


class Platform(Record):
    """What hardware the inputs describe."""

    gpu_model: str | None = Field(None, description="e.g. H100, A100, B200, from nccl-tests device lines or the log.")
    gpu_name: str | None = None
    gpus_per_host: int | None = None
    hosts: int | None = None
    nvlink_links: int | None = Field(None, description="NV# between GPU pairs (the most common value).")
    nvswitch: bool | None = None
    nic_link_layers: list[str] = Field(default_factory=new_list)
    network: str | None = None
    key: str | None = Field(None, description="Entry of data/expected_busbw.json used for expectations.")
    evidence: list[Evidence] = Field(default_factory=new_list)
    missing: list[str] = Field(default_factory=new_list, description="What would identify the platform.")


class Analysis(Record):
    """The output of `ncclscope analyze`: findings first, then the Case they were drawn from."""

    ncclscope_version: str
    findings: list[Finding] = Field(default_factory=new_list)
    summary: dict[str, int] = Field(default_factory=new_dict, description="Count of findings per severity.")
    platform: Platform = Field(default_factory=Platform)
    bandwidth: list[BandwidthJudgement] = Field(default_factory=new_list)
    case: Case

    @overload
    def frames(self, name: None = None) -> Frames: ...
    @overload
    def frames(self, name: str) -> DataFrame: ...
    def frames(self, name: str | None = None) -> Frames | DataFrame:
        """The Case's frames and the findings as pandas DataFrames (ncclscope.frames), or the one frame `name`."""
        from ncclscope.frames import analysis_frames

        frames = analysis_frames(self)
        return frames if name is None else frames[name]
