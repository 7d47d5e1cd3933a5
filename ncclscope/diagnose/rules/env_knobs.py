"""What each NCCL_* variable does and how ENV001 judges a value of it: the table of knobs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


def truthy(value: str) -> bool:
    return value.strip().lower() not in ("", "0", "false", "no", "off")


def _is(*values: str) -> Callable[[str], bool]:
    wanted = {v.lower() for v in values}
    return lambda value: value.strip().lower() in wanted


@dataclass(frozen=True)
class Knob:
    """How ENV001 judges one variable.

    kind: "debug" (listed under "Debugging" in env.rst: warning), "tuning" (system configuration
    or a documented tuning knob: info) or "identity" (names the machine, one value per host: not an override,
    ENV002 judges it). `off(value)` says whether the value switches a transport or
    feature off; `feature` names what must be present for that to be an error (see FEATURES).
    A value equal to `default` is reported as info whatever the kind. `effects` are the codes of the
    findings a non-default value can cause (the engine links them as one story only then); a knob
    that switches a feature off also causes FEATURE_EFFECTS[feature].
    """

    kind: str
    what: str
    off: Callable[[str], bool] | None = None
    feature: str | None = None
    default: str | None = None
    note: str = ""
    off_note: str = ""  # said only when the value switches the feature off
    effects: tuple[str, ...] = ()
    # a level variable set beyond NCCL's own limit: what it then does instead of `what` ({path}: PATHS_OPENED), and
    # the findings it can cause
    raised: Callable[[str], bool] | None = None
    raised_what: str = ""
    raised_effects: tuple[str, ...] = ()

    def is_raised(self, value: str) -> bool:
        """Whether `value` sets this level variable past NCCL's own cutoff (see `raised`)."""
        return self.raised is not None and self.raised(value)


# What switching a feature off causes, by Knob.feature (the findings that then show it)
FEATURE_CAUSES: dict[str, tuple[str, ...]] = {
    # not NET002: it names the setting among the reasons RDMA is unavailable, as the same diagnosis
    "rdma": ("NET001", "NET007", "BW001"),
    "nvlink": ("TOPO004", "BW001"),
    "nvls": ("BW001",),
    "shm": ("BW001",),
    "mnnvl": ("BW001",),
}
GDR = ("GDR001", "BW001")
FEWER_CHANNELS = ("CH001", "BW001")

# NCCL's path types, nearest first (src/include/graph.h), and the path type each old number of NCCL_P2P_LEVEL and
# NCCL_NET_GDR_LEVEL names (src/graph/paths.cc, levelsOldToNew: 0 LOC, 1 PIX, 2 PXB, 3 PHB, 4 and 5 SYS)
PATH_TYPES = ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS")
OLD_PATH_LEVELS = ("LOC", "PIX", "PXB", "PHB", "SYS", "SYS")


def path_level(value: str) -> str | None:
    """The path type a level variable's value names (`PHB`, or the old number `3`); None for another value."""
    word = value.strip().upper()
    if word in PATH_TYPES:
        return word
    return OLD_PATH_LEVELS[min(int(word), len(OLD_PATH_LEVELS) - 1)] if word.isdigit() else None


def through_the_cpu(value: str) -> bool:
    """A level that lets a path through the CPU (PHB) or between CPU sockets (SYS): beyond NCCL's own cutoff for
    GPUDirect RDMA (PXB; P2C where NCCL_NET_GDR_C2C is on, 2.27+), src/graph/paths.cc ncclTopoCheckGdr, and for
    P2P between GPUs on most hosts (ncclTopoCheckP2p, data/nccl_releases.json p2p_within_pxb)."""
    level = path_level(value)
    return level is not None and PATH_TYPES.index(level) >= PATH_TYPES.index("PHB")


# the paths a level past NCCL's cutoff opens, for the message ({path} in Knob.raised_what)
PATHS_OPENED = {"PHB": "through the CPU (PHB)", "SYS": "through the CPU and between CPU sockets (SYS)"}
GDR_RAISED = (
    "lets GPUDirect RDMA run {path}, beyond NCCL's own GPU-NIC cutoff (PXB): over such a path it is often slower"
    " than staging through host memory, which is why NCCL stops there"
)
# NCCL's default cutoff by release and CPU: data/nccl_releases.json p2p_within_pxb. NCCL docs, troubleshooting.rst
# (PCI Access Control Services; IO virtualization): P2P redirected through the root complex costs bandwidth "or even"
# hangs
P2P_RAISED = (
    "lets P2P between GPUs run {path}, past the PCIe-switch cutoff (PXB) that NCCL keeps by default on Intel and ARM"
    " CPUs (and from NCCL 2.23 on AMD hosts of more than two GPUs): on many CPUs P2P through the root complex is"
    " slower than copies through host memory (SHM), and it can hang where the IOMMU or ACS redirects peer traffic"
)


def widens(name: str, value: str) -> bool:
    """A level variable set past NCCL's own cutoff: it lets P2P or GPUDirect RDMA farther, so it never keeps one off
    and is no cause of a finding that one is off (TOPO004, CH002, GDR001)."""
    knob = KNOBS.get(name)
    return knob is not None and knob.is_raised(value)


def knob_effects(knob: Knob, value: str) -> tuple[str, ...]:
    """The findings this value of the knob can cause: none for its default."""
    if knob.default is not None and value.strip().lower() == knob.default.lower():
        return ()
    if knob.is_raised(value):
        return knob.raised_effects
    if knob.off is not None and knob.off(value) and knob.feature in FEATURE_CAUSES:
        return tuple(dict.fromkeys(FEATURE_CAUSES[knob.feature] + knob.effects))
    return knob.effects if knob.off is None or knob.off(value) else ()


# Sources: NCCL docs env.rst ("System configuration" section; the "Debugging" section: "should not be
# used in production nor retained in scripts ... Keeping them set may result in sub-optimal behavior,
# crashes, or hangs"), troubleshooting/performance_and_tuning.rst ("Tuning NCCL configuration":
# NCCL_MIN/MAX_CTAS, NCCL_CHUNK_SIZE, NCCL_IB_QPS_PER_CONNECTION, NCCL_CROSS_NIC; "RoCE
# considerations"); Azure NHC and aws-ofi-nccl set NCCL_IB_PCI_RELAXED_ORDERING and NCCL_TOPO_FILE on
# purpose (NVIDIA/nccl#526); NCCL 2.21 release notes (NCCL_IB_GID_INDEX is automatic); NVIDIA/nccl#2428
# (NCCL_IGNORE_NET_MISMATCH).
KNOBS: dict[str, Knob] = {
    # --- debugging knobs that switch a transport or feature off
    "NCCL_IB_DISABLE": Knob("debug", "switches InfiniBand/RoCE off", truthy, "rdma", "0"),
    "NCCL_NET": Knob(
        "tuning", "selects the network plugin", _is("socket"), "rdma", note="NCCL_NET=Socket forces TCP sockets"
    ),
    "NCCL_P2P_DISABLE": Knob("debug", "switches the P2P transport (NVLink and PCIe) off", truthy, "nvlink", "0"),
    "NCCL_P2P_LEVEL": Knob(
        "debug",
        "caps the GPU distance for P2P",
        _is("loc", "0"),
        "nvlink",
        off_note="LOC switches P2P off entirely",
        raised=through_the_cpu,
        raised_what=P2P_RAISED,
        raised_effects=("BW001",),  # P2P let farther, not switched off: never the cause of TOPO004
    ),
    "NCCL_NVLS_ENABLE": Knob("debug", "controls NVLink SHARP (NVLS)", _is("0"), "nvls", "2"),
    "NCCL_SHM_DISABLE": Knob("debug", "switches the shared-memory transport off", truthy, "shm", "0"),
    "NCCL_MNNVL_ENABLE": Knob("debug", "controls multi-node NVLink (MNNVL)", _is("0"), "mnnvl", "2"),
    "NCCL_CUMEM_ENABLE": Knob(
        "tuning",
        "controls cuMem allocations",
        _is("0"),
        None,
        off_note="MNNVL needs cuMem; =0 is a workaround to remove once the issue is fixed",
    ),
    "NCCL_NET_GDR_LEVEL": Knob(
        "debug",
        "caps the GPU-NIC distance for GPUDirect RDMA",
        None,
        None,
        note="a level below the automatic cutoff (PXB) keeps GPUDirect RDMA off for farther NICs; LOC switches it off",
        effects=GDR,
        raised=through_the_cpu,
        raised_what=GDR_RAISED,
        raised_effects=("BW001",),  # GDR turned on, not off: never the cause of GDR001
    ),
    "NCCL_IB_GDR_LEVEL": Knob(
        "debug",
        "caps GPUDirect RDMA (old name of NCCL_NET_GDR_LEVEL)",
        effects=GDR,
        raised=through_the_cpu,
        raised_what=f"(old name of NCCL_NET_GDR_LEVEL) {GDR_RAISED}",
        raised_effects=("BW001",),
    ),
    "NCCL_PXN_DISABLE": Knob(
        "debug", "switches PXN (sends through a peer GPU's NIC) off", truthy, None, "0", effects=("BW001",)
    ),
    "NCCL_NVB_DISABLE": Knob("debug", "switches NVLink through an intermediate GPU off", truthy, None, "0"),
    "NCCL_P2P_DIRECT_DISABLE": Knob("debug", "switches direct P2P within a process off", truthy, None, "0"),
    "NCCL_DMABUF_ENABLE": Knob("debug", "controls DMA-BUF for GPUDirect RDMA", _is("0"), default="1", effects=GDR),
    "NCCL_IB_MERGE_NICS": Knob("debug", "controls merging of dual-port NICs", _is("0"), None, "1"),
    # --- debugging knobs that force a choice NCCL would make itself
    "NCCL_ALGO": Knob(
        "debug", "forces the collective algorithms", note="keeps NCCL from choosing per size", effects=("BW001",)
    ),
    "NCCL_PROTO": Knob(
        "debug",
        "forces the protocols",
        note="enabling LL128 where it is unsupported can corrupt data, env.rst",
        effects=("BW001",),
    ),
    "NCCL_MAX_NCHANNELS": Knob("debug", "caps the number of channels", effects=FEWER_CHANNELS),
    "NCCL_MIN_NCHANNELS": Knob("debug", "forces a minimum number of channels"),
    "NCCL_NTHREADS": Knob("debug", "forces the CUDA threads per block (deprecated)", effects=("BW001",)),
    "NCCL_BUFFSIZE": Knob("debug", "changes the per-channel buffer size", effects=("BW001",)),
    "NCCL_LL128_BUFFSIZE": Knob("debug", "changes the LL128 buffer size"),
    "NCCL_IB_CUDA_SUPPORT": Knob("debug", "forces GPUDirect RDMA (removed; NCCL_NET_GDR_LEVEL replaces it)"),
    "NCCL_NET_GDR_READ": Knob("debug", "forces GPUDirect RDMA reads on send"),
    "NCCL_NET_GDR_C2C": Knob("debug", "controls GPUDirect RDMA through C2C-attached CPUs"),
    "NCCL_NET_SHARED_BUFFERS": Knob("debug", "controls shared network buffers"),
    "NCCL_NET_SHARED_COMMS": Knob("debug", "controls shared network connections"),
    "NCCL_P2P_PXN_LEVEL": Knob("debug", "controls PXN for send/receive", None, None, "2"),
    "NCCL_IGNORE_NET_MISMATCH": Knob(
        "debug",
        "silences the check of network devices across ranks",
        None,
        None,
        note="a heterogeneous-HCA misconfiguration then hangs silently (nccl#2428)",
    ),
    "NCCL_IGNORE_COLLNET_MISMATCH": Knob("debug", "silences the CollNet consistency check"),
    "NCCL_CHECKS_DISABLE": Knob("debug", "switches argument checks off"),
    "NCCL_CHECK_POINTERS": Knob("debug", "checks pointers on every call (slow)"),
    "NCCL_LAUNCH_MODE": Knob("debug", "changes how kernels are launched"),
    "NCCL_SINGLE_RING_THRESHOLD": Knob("debug", "changes the single-ring threshold"),
    "NCCL_LL_THRESHOLD": Knob("debug", "changes the LL protocol threshold"),
    "NCCL_TREE_THRESHOLD": Knob("debug", "changes the tree algorithm threshold"),
    "NCCL_IB_AR_THRESHOLD": Knob("debug", "changes the IB adaptive-routing threshold"),
    "NCCL_IB_SPLIT_DATA_ON_QPS": Knob("debug", "changes how data is split across QPs"),
    "NCCL_IB_ADAPTIVE_ROUTING": Knob("debug", "forces IB adaptive routing"),
    "NCCL_IB_ECE_ENABLE": Knob("debug", "controls enhanced connection establishment"),
    "NCCL_IB_OOO_RQ": Knob("debug", "controls out-of-order receive queues"),
    "NCCL_CUMEM_HOST_ENABLE": Knob("debug", "controls cuMem host allocations"),
    "NCCL_RUNTIME_CONNECT": Knob("debug", "controls lazy connection setup", None, None, "1"),
    "NCCL_GRAPH_FILE": Knob(
        "debug",
        "loads a saved graph",
        note="a stale graph file breaks init ('Dev not found', nccl#1008)",
        effects=("RUN005", "RUN001", "CH001", "CH002"),
    ),
    "NCCL_GRAPH_REGISTER": Knob("debug", "controls buffer registration in CUDA graphs"),
    "NCCL_LOCAL_REGISTER": Knob("debug", "controls user-buffer registration"),
    "NCCL_P2P_NET_CHUNKSIZE": Knob("debug", "changes the network chunk size for send/receive"),
    "NCCL_P2P_LL_THRESHOLD": Knob("debug", "changes the send/receive LL threshold"),
    "NCCL_CGA_CLUSTER_SIZE": Knob("debug", "changes the CGA cluster size"),
    "NCCL_MEM_SYNC_DOMAIN": Knob("debug", "changes the memory synchronisation domain"),
    "NCCL_SHM_USE_CUDA_MEMCPY": Knob("debug", "makes SHM copies with cudaMemcpy (undocumented)"),
    "NCCL_COMM_BLOCKING": Knob("debug", "controls blocking communicator calls"),
    # --- documented system configuration and tuning knobs (info)
    "NCCL_SOCKET_IFNAME": Knob("tuning", "selects the IP interfaces", effects=("NET003", "NET006", "RUN001")),
    "NCCL_HOSTID": Knob(
        "identity",
        "names the node a process is on (NCCL groups ranks into nodes by it instead of the host's own identity)",
        note="one value per machine: pods of one machine may share it to use NVLink/shared memory between them",
    ),
    "NCCL_SOCKET_FAMILY": Knob("tuning", "selects IPv4 or IPv6"),
    "NCCL_SOCKET_NTHREADS": Knob("tuning", "sets the socket helper threads"),
    "NCCL_NSOCKS_PERTHREAD": Knob("tuning", "sets the sockets per helper thread"),
    "NCCL_SOCKET_RETRY_CNT": Knob("tuning", "sets socket connect retries"),
    "NCCL_SOCKET_RETRY_SLEEP_MSEC": Knob("tuning", "sets the socket retry delay"),
    "NCCL_CROSS_NIC": Knob("tuning", "allows rings/trees to cross NIC rails"),
    "NCCL_IB_HCA": Knob("tuning", "selects the RDMA NICs", effects=("NET002", "NET004")),
    "NCCL_IB_TIMEOUT": Knob("tuning", "sets the IB verbs timeout"),
    "NCCL_IB_RETRY_CNT": Knob("tuning", "sets the IB retry count"),
    "NCCL_IB_GID_INDEX": Knob(
        "tuning", "forces the RoCE GID index", note="automatic since NCCL 2.21", effects=("NET006", "RUN005")
    ),
    "NCCL_IB_ADDR_FAMILY": Knob("tuning", "selects the RoCE GID address family"),
    "NCCL_IB_ADDR_RANGE": Knob("tuning", "selects the RoCE GID range"),
    "NCCL_IB_ROCE_VERSION_NUM": Knob("tuning", "selects the RoCE version"),
    "NCCL_IB_SL": Knob("tuning", "sets the IB service level"),
    "NCCL_IB_TC": Knob("tuning", "sets the IB traffic class"),
    "NCCL_IB_FIFO_TC": Knob("tuning", "sets the IB traffic class of control messages"),
    "NCCL_IB_QPS_PER_CONNECTION": Knob("tuning", "sets the QPs per connection (recommended on RoCE/ECMP)"),
    "NCCL_IB_PCI_RELAXED_ORDERING": Knob("tuning", "controls PCI relaxed ordering for IB"),
    "NCCL_IB_RETURN_ASYNC_EVENTS": Knob("tuning", "controls IB async event handling"),
    "NCCL_OOB_NET_ENABLE": Knob("tuning", "runs the bootstrap over the network plugin"),
    "NCCL_OOB_NET_IFNAME": Knob("tuning", "selects the bootstrap network device"),
    "NCCL_NET_PLUGIN": Knob("tuning", "selects the network plugin library"),
    "NCCL_TUNER_PLUGIN": Knob("tuning", "selects the tuner plugin"),
    "NCCL_PROFILER_PLUGIN": Knob("tuning", "selects the profiler plugin"),
    "NCCL_IGNORE_CPU_AFFINITY": Knob("tuning", "ignores the process CPU affinity"),
    "NCCL_CONF_FILE": Knob("tuning", "names a configuration file"),
    "NCCL_COLLNET_ENABLE": Knob("tuning", "enables CollNet (SHARP)"),
    "NCCL_COLLNET_NODE_THRESHOLD": Knob("tuning", "sets the CollNet node threshold"),
    "NCCL_TOPO_FILE": Knob("tuning", "loads a topology file (cloud images set it on purpose)"),
    "NCCL_TOPO_DUMP_FILE": Knob("tuning", "dumps the detected topology"),
    "NCCL_GRAPH_DUMP_FILE": Knob("tuning", "dumps the computed graphs"),
    "NCCL_SET_THREAD_NAME": Knob("tuning", "names NCCL threads"),
    "NCCL_COMM_ID": Knob("tuning", "sets the bootstrap root address"),
    "NCCL_MIN_CTAS": Knob("tuning", "sets the minimum CTAs (performance_and_tuning.rst)"),
    "NCCL_MAX_CTAS": Knob("tuning", "sets the maximum CTAs (performance_and_tuning.rst)"),
    "NCCL_CHUNK_SIZE": Knob("tuning", "sets the send/receive chunk size (performance_and_tuning.rst)"),
    "NCCL_GDRCOPY_ENABLE": Knob("tuning", "enables GDRCopy"),
    "NCCL_NCHANNELS_PER_NET_PEER": Knob("tuning", "sets the channels per network peer"),
    "NCCL_RAS_ENABLE": Knob("tuning", "controls the RAS subsystem"),
}
