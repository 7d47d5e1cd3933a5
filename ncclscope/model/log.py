"""What NCCL and the frameworks log: devices, settings, messages, typed facts, processes, hosts,
communicators, connections.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ncclscope.model.base import Evidence, Record
from ncclscope.model.factories import new_dict, new_list


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
    nics: int | None = Field(None, description="NICs the provider found (NET/OFI `found N nics`).")
    evidence: Evidence


class EnvSetting(Record):
    """An NCCL variable reported by `... set by environment to ...` (or `NCCL_IB_HCA set to`), or set by a
    command line in the inputs (`mpirun -x NCCL_...=`, `export NCCL_...=`)."""

    name: str
    value: str
    origin: Literal["log", "command_line", "param_dump"] = Field(
        "log",
        description="log: NCCL reported it; command_line: a launcher or shell line in the inputs sets it;"
        " param_dump: NCCL 2.30's parameter registry dump lists it as set (not by its default).",
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
    """A socket operation of NCCL's bootstrap, proxy or socket transport that failed (or is being retried), or a
    network plugin's connection to a peer that failed (aws-ofi-nccl: an EFA handshake no peer answered)."""

    level: str
    problem: Literal[
        "connection_closed", "connect_failed", "call_failed", "bad_address_family", "no_interface", "aborted", "other"
    ] = Field(description="What NCCL's own text says happened (aborted: the communicator's abort closed it).")
    caller: str | None = Field(None, description="socketProgress, socketStartConnect, Net, Bootstrap ...")
    call: str | None = Field(None, description="recv, send, connect ...")
    peer: str | None = None
    peer_address: str | None = None
    errno_text: str | None = Field(None, description="strerror(errno) as printed: 'Connection refused' ...")
    retrying: bool = False
    evidence: Evidence


class VerbsFailure(Origin):
    """An RDMA verbs call that failed (`Call to ibv_modify_qp failed with 110 Connection timed out, on dev ...`), or the
    OFI plugin's memory registration (`Unable to register memory ... RC: 12, Error: Cannot allocate memory`)."""

    call: str = Field(description="ibv_modify_qp, ibv_create_cq, ibv_reg_mr ..., or OFI memory registration.")
    errno: int | None = Field(None, description="The errno NCCL printed (2.23+; the OFI plugin's RC).")
    errno_text: str | None = Field(None, description="strerror: 'Connection timed out', 'Cannot allocate memory' ...")
    device: str | None = Field(None, description="ibv_modify_qp (2.23+): the device and port, mlx5_0:1.")
    qp_from: str | None = Field(None, description="ibv_modify_qp: the QP state it was in (INIT, RTR).")
    qp_to: str | None = Field(None, description="ibv_modify_qp: the state it failed to reach (RTR, RTS).")
    gid_index: int | None = None
    local_gid: str | None = None
    remote_gid: str | None = None
    evidence: Evidence


class LaunchMismatch(Origin):
    """The bootstrap root refusing a process that does not fit the job as the root knows it: `mismatch in info from
    procs` (the fields that differ: what the root expected and what the process sent), or a rank that checked in
    twice."""

    kind: Literal["info_mismatch", "rank_twice"]
    differing: dict[str, list[int]] = Field(
        default_factory=new_dict, description="info_mismatch: field -> [expected, sent], the fields that differ."
    )
    rank: int | None = Field(None, description="rank_twice: the rank that checked in twice.")
    nranks: int | None = None
    evidence: Evidence


class InitTiming(Origin):
    """NCCL's own profile of a communicator's init (2.22+): `Init timings - ncclCommInitRankConfig: rank 3 nranks 8
    total 55.01 (kernels 52.45, alloc 0.41, ...)`, or of its bootstrap (`Bootstrap timings total ...`)."""

    kind: Literal["init", "bootstrap"]
    rank: int | None = None
    nranks: int | None = None
    total: float = Field(description="Seconds.")
    phases: dict[str, float] = Field(default_factory=new_dict, description="Seconds per phase, as NCCL names them.")
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
        "ofi_no_fabric",
        "net_plugin_broken",
        "net_not_found",
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
    "peer_closed",
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
    "nccl_version_used",
    "desync_unfinished",
    "desync_not_joined",
    "desync_never_joined",
]


class FrameworkEvent(Record):
    """A line that the framework around NCCL (PyTorch's ProcessGroupNCCL, and what wraps it) printed about it."""

    kind: FrameworkKind = Field(
        description="watchdog_timeout (a collective ran past its timeout), watchdog_status (last enqueued and "
        "completed work), dump_signal (a rank's state dumped because some rank timed out: from_rank, or this rank "
        "when None), watchdog_stuck (the watchdog thread itself made no progress), pg_options (how a process group "
        "was set up: world_size, timeout_ms, nccl_version), operations_failed, watchdog_exception, nccl_error (NCCL "
        "returned an error to the framework), nccl_result (the ncclResult_t name line), last_error (NCCL's last "
        "WARN, as the framework quotes it), peer_closed (gloo: the process at the other end is gone), comm_aborted, "
        "nccl_version_used (the NCCL the framework says it loaded); "
        "desync_unfinished, desync_not_joined and desync_never_joined: the ranks PyTorch's desync report "
        "(TORCH_NCCL_DESYNC_DEBUG) blames, with the collective."
    )
    rank: int | None = Field(None, description="Global rank, as the record names it.")
    ranks: list[int] = Field(default_factory=new_list, description="The ranks a desync report names.")
    next_seq: int | None = Field(None, description="desync_not_joined: the collective the ranks did not join.")
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
    nccl_call: str | None = Field(None, description="The NCCL call that failed, as the framework names it (XLA).")
    relayed_family: str | None = Field(
        None, description="last_error: the family of NCCL's message it relays (cuda_failure ...), by NCCL's grammar."
    )
    relayed_fields: dict[str, str] = Field(default_factory=dict, description="last_error: that message's fields.")
    peer: str | None = Field(None, description="peer_closed: the address of the peer that went away, as printed.")
    time: str | None = Field(
        None, description="The time of the C++ log header before the record (glog: MMDD hh:mm:ss)."
    )
    text: str = Field("", description="The error text: NCCL's result string, the last error, the rest of the line.")
    evidence: Evidence


class ProcessExit(Record):
    """A worker process of the job that ended in failure, as torchrun (torch.distributed.elastic) reports it:
    its agent's `failed (exitcode: -9) local_rank: 1 (pid: ...)` line and its ChildFailedError report."""

    source: str
    rank: int | None = Field(None, description="Global rank (the report's `rank`).")
    local_rank: int | None = None
    host: str | None = None
    pid: int | None = None
    exitcode: int | None = Field(None, description="Negative: killed by that signal (-9: SIGKILL).")
    signal: str | None = Field(None, description="The signal's name when a signal ended it: SIGKILL, SIGTERM ...")
    time: str | None = Field(None, description="When torchrun saw it end, as printed.")
    first_observed: bool = Field(
        False, description="torchrun's own `Root Cause (first observed failure)`, or its agent's first `failed` line."
    )
    evidence: list[Evidence] = Field(default_factory=new_list)


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
    instance_type: str | None = Field(
        None, description="The cloud instance type the net plugin names (`NET/OFI Running on p5.48xlarge platform`)."
    )
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


class DiagReport(Record):
    """One report of NCCL 2.31's diagnostics (`<host>:<pid> NCCL DIAG [OK|INFO] ...`): its own P2P check of the GPU
    pairs NCCL will use, its network bandwidth check between paired nodes, the RAS comparison of the ranks'
    NCCL_* variables, or another report kept as text."""

    kind: Literal["p2p", "net_bw", "env_consistent", "env_differs", "incomplete", "other"]
    status: str = Field(description="OK, INFO ... as printed.")
    host: str | None = None
    pid: int | None = None
    passed: int | None = Field(None, description="p2p: peer accesses verified; incomplete: ranks gathered.")
    total: int | None = Field(None, description="p2p: peer accesses tried; incomplete and env: ranks.")
    rank: int | None = None
    node: str | None = None
    nic_kind: str | None = Field(None, description="net_bw: same-nic or cross-nic.")
    measured_gbits: float | None = None
    median_gbits: float | None = None
    comm: str | None = None
    env_name: str | None = None
    env_value: str | None = None
    ranks: list[int] = Field(default_factory=new_list, description="env_differs: the ranks with that value.")
    evidence: Evidence
