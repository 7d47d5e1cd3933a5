"""Rules of the ENV family (see ../shared/knowledge/rule-catalog.md).

ENV001 classifies every `NCCL_X set by environment to Y` line with the KNOBS table below; ENV002
compares the settings between the hosts and processes of one job.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ncclscope.model import EnvSetting, Finding, Severity
from ncclscope.rules.context import Context, shown
from ncclscope.rules.registry import make_finding, rule
from ncclscope.rules.version import host_list, jobs


def _truthy(value: str) -> bool:
    return value.strip().lower() not in ("", "0", "false", "no", "off")


def _is(*values: str) -> Callable[[str], bool]:
    wanted = {v.lower() for v in values}
    return lambda value: value.strip().lower() in wanted


@dataclass(frozen=True)
class Knob:
    """How ENV001 judges one variable.

    kind: "debug" (listed under "Debugging" in env.rst: warning) or "tuning" (system configuration
    or a documented tuning knob: info). `off(value)` says whether the value switches a transport or
    feature off; `feature` names what must be present for that to be an error (see FEATURES).
    A value equal to `default` is reported as info whatever the kind.
    """

    kind: str
    what: str
    off: Callable[[str], bool] | None = None
    feature: str | None = None
    default: str | None = None
    note: str = ""
    off_note: str = ""  # said only when the value switches the feature off


# Sources: NCCL docs/userguide/source/env.rst ("System configuration" section; the "Debugging"
# section: "should not be used in production nor retained in scripts ... Keeping them set may
# result in sub-optimal behavior, crashes, or hangs"), troubleshooting/performance_and_tuning.rst
# ("Tuning NCCL configuration": NCCL_MIN/MAX_CTAS, NCCL_CHUNK_SIZE, NCCL_IB_QPS_PER_CONNECTION,
# NCCL_CROSS_NIC; "RoCE considerations"), landscape.md 2.E.25 (cloud images set
# NCCL_IB_PCI_RELAXED_ORDERING and NCCL_TOPO_FILE on purpose: Azure NHC, aws-ofi-nccl nccl#526),
# 2.E.27 (NCCL_IB_GID_INDEX is automatic since 2.21), nccl#2428 (NCCL_IGNORE_NET_MISMATCH).
KNOBS: dict[str, Knob] = {
    # --- debugging knobs that switch a transport or feature off
    "NCCL_IB_DISABLE": Knob("debug", "switches InfiniBand/RoCE off", _truthy, "rdma", "0"),
    "NCCL_NET": Knob(
        "tuning", "selects the network plugin", _is("socket"), "rdma", note="NCCL_NET=Socket forces TCP sockets"
    ),
    "NCCL_P2P_DISABLE": Knob("debug", "switches the P2P transport (NVLink and PCIe) off", _truthy, "nvlink", "0"),
    "NCCL_P2P_LEVEL": Knob(
        "debug", "caps the GPU distance for P2P", _is("loc", "0"), "nvlink", off_note="LOC switches P2P off entirely"
    ),
    "NCCL_NVLS_ENABLE": Knob("debug", "controls NVLink SHARP (NVLS)", _is("0"), "nvls", "2"),
    "NCCL_SHM_DISABLE": Knob("debug", "switches the shared-memory transport off", _truthy, "shm", "0"),
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
        _is("loc", "0"),
        None,
        note="a level below the automatic cutoff (PXB) keeps GPUDirect RDMA off for farther NICs",
        off_note="LOC switches GPUDirect RDMA off",
    ),
    "NCCL_IB_GDR_LEVEL": Knob("debug", "caps GPUDirect RDMA (old name of NCCL_NET_GDR_LEVEL)", _is("loc", "0")),
    "NCCL_PXN_DISABLE": Knob("debug", "switches PXN (sends through a peer GPU's NIC) off", _truthy, None, "0"),
    "NCCL_NVB_DISABLE": Knob("debug", "switches NVLink through an intermediate GPU off", _truthy, None, "0"),
    "NCCL_P2P_DIRECT_DISABLE": Knob("debug", "switches direct P2P within a process off", _truthy, None, "0"),
    "NCCL_DMABUF_ENABLE": Knob("debug", "controls DMA-BUF for GPUDirect RDMA", _is("0")),
    "NCCL_IB_MERGE_NICS": Knob("debug", "controls merging of dual-port NICs", _is("0"), None, "1"),
    # --- debugging knobs that force a choice NCCL would make itself
    "NCCL_ALGO": Knob("debug", "forces the collective algorithms", note="keeps NCCL from choosing per size"),
    "NCCL_PROTO": Knob(
        "debug", "forces the protocols", note="enabling LL128 where it is unsupported can corrupt data, env.rst"
    ),
    "NCCL_MAX_NCHANNELS": Knob("debug", "caps the number of channels"),
    "NCCL_MIN_NCHANNELS": Knob("debug", "forces a minimum number of channels"),
    "NCCL_NTHREADS": Knob("debug", "forces the CUDA threads per block (deprecated)"),
    "NCCL_BUFFSIZE": Knob("debug", "changes the per-channel buffer size"),
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
        "debug", "loads a saved graph", note="a stale graph file breaks init ('Dev not found', nccl#1008)"
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
    "NCCL_SOCKET_IFNAME": Knob("tuning", "selects the IP interfaces"),
    "NCCL_SOCKET_FAMILY": Knob("tuning", "selects IPv4 or IPv6"),
    "NCCL_SOCKET_NTHREADS": Knob("tuning", "sets the socket helper threads"),
    "NCCL_NSOCKS_PERTHREAD": Knob("tuning", "sets the sockets per helper thread"),
    "NCCL_SOCKET_RETRY_CNT": Knob("tuning", "sets socket connect retries"),
    "NCCL_SOCKET_RETRY_SLEEP_MSEC": Knob("tuning", "sets the socket retry delay"),
    "NCCL_CROSS_NIC": Knob("tuning", "allows rings/trees to cross NIC rails"),
    "NCCL_IB_HCA": Knob("tuning", "selects the RDMA NICs"),
    "NCCL_IB_TIMEOUT": Knob("tuning", "sets the IB verbs timeout"),
    "NCCL_IB_RETRY_CNT": Knob("tuning", "sets the IB retry count"),
    "NCCL_IB_GID_INDEX": Knob("tuning", "forces the RoCE GID index", note="automatic since NCCL 2.21"),
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

# NCCL's own logging: the settings that produce the evidence ncclscope reads, not overrides
LOGGING = frozenset(
    {
        "NCCL_DEBUG",
        "NCCL_DEBUG_SUBSYS",
        "NCCL_DEBUG_FILE",
        "NCCL_DEBUG_TIMESTAMP_FORMAT",
        "NCCL_DEBUG_TIMESTAMP_LEVELS",
        "NCCL_WARN_ENABLE_DEBUG_INFO",
    }
)

FEATURE_NAMES = {
    "rdma": "RDMA NICs",
    "nvlink": "NVLink",
    "nvls": "NVSwitch with NVLink SHARP",
    "shm": "GPU pairs that need host memory",
    "mnnvl": "multi-node NVLink",
}
FEATURE_EFFECTS = {
    "rdma": "inter-host traffic goes over TCP sockets",
    "nvlink": "GPU pairs talk through host memory (SHM) or the network instead of NVLink",
    "nvls": "collectives cannot use NVLink SHARP",
    "shm": "GPU pairs without P2P talk through the network instead",
    "mnnvl": "GPUs of different trays talk over the network instead of NVLink",
}
CONF_FILES = "the job script, the container image's ENV, ~/.nccl.conf, /etc/nccl.conf or the file NCCL_CONF_FILE names"
NVLS_GPUS = ("H100", "H200", "H800", "H20", "GH200", "B200", "B300", "GB200", "GB300")


# ----------------------------------------------------------------------------- feature evidence
def _matrix_nv_cells(ctx: Context) -> list[str]:
    cells = []
    for topo in ctx.case.topologies:
        for a in topo.gpus:
            for b in topo.gpus:
                if a != b:
                    cells.append((topo.links.get(a) or {}).get(b, ""))
    return cells


def _has_rdma(ctx: Context, hosts: list[str]) -> str | None:
    """Evidence that the job's hosts have RDMA NICs (the setting hides them, so any host counts)."""
    ib = sorted({d.name for d in ctx.case.net_devices if d.transport in ("IB", "OFI")})
    if ib:
        return f"NET/IB devices {', '.join(ib[:4])}{' ...' if len(ib) > 4 else ''}"
    networks = {n for h in ctx.case.hosts for n in h.networks if n and n.lower() != "socket"}
    if networks:
        return f"network {', '.join(sorted(networks))} on other hosts"
    nics = sorted({topo.nic_names.get(n, n) for topo in ctx.case.topologies for n in topo.nics})
    if nics:
        return f"NICs {', '.join(nics[:4])}{' ...' if len(nics) > 4 else ''} in the topology matrix"
    net = [t for t in ctx.case.connections.by_transport if t.startswith("NET/") and "Socket" not in t]
    if net:
        return f"{net[0]} connections"
    return None


def _has_nvlink(ctx: Context, hosts: list[str]) -> str | None:
    nv = sorted({c for c in _matrix_nv_cells(ctx) if c.startswith("NV")})
    if nv:
        return f"{'/'.join(nv)} links in the topology matrix"
    for topo in ctx.case.system_topologies:
        if (not hosts or topo.host in hosts) and any("NVL[" in n for n in topo.nodes):
            return "NVL links in NCCL's topology dump"
    if ctx.platform.nvlink_links or ctx.platform.nvswitch:
        return "an NVLink platform"
    return _has_nvls(ctx, hosts) or _has_mnnvl(ctx, hosts)


def _has_nvls(ctx: Context, hosts: list[str]) -> str | None:
    for m in ctx.messages("nvls_support"):
        if "not available" not in m.message and (not hosts or m.host in hosts):
            return f"`{m.message}`"
    if any((c.nvls_channels or 0) > 0 for c in ctx.case.communicators):
        return "NVLS channels"
    cells = _matrix_nv_cells(ctx)
    if cells and all(c.startswith("NV") and c[2:].isdigit() and int(c[2:]) >= 18 for c in cells):
        return f"NV{min(int(c[2:]) for c in cells)} between every GPU pair (NVSwitch, NVLink 4+)"
    model = ctx.platform.gpu_model or ""
    if ctx.platform.nvswitch and any(model.startswith(g) for g in NVLS_GPUS):
        return f"{model} on NVSwitch"
    return None


def _has_mnnvl(ctx: Context, hosts: list[str]) -> str | None:
    for m in ctx.messages("mnnvl_clique"):
        if m.message.startswith("MNNVL 1") and (not hosts or m.host in hosts):
            return f"`{m.message}`"
    if any("MNNVL" in t for t in ctx.case.connections.by_transport):
        return "P2P/MNNVL connections"
    return None


def _needs_shm(ctx: Context, hosts: list[str]) -> str | None:
    """SHM carries the GPU pairs of a host that cannot use P2P: it matters only where P2P is off."""
    local = [h for h in ctx.case.hosts if (not hosts or h.name in hosts) and (len(h.ranks) > 1 or h.processes > 1)]
    if not local:
        return None
    for s in ctx.case.env:
        if (s.name == "NCCL_P2P_DISABLE" and _truthy(s.value)) or (
            s.name == "NCCL_P2P_LEVEL" and s.value.strip().lower() in ("loc", "0")
        ):
            return f"{s.name}={s.value} also set, so GPU pairs of a host have no other path"
    if ctx.messages("p2p_not_enabled"):
        return "`Could not enable P2P` lines"
    far = sorted({c for c in _matrix_nv_cells(ctx) if c in ("SYS", "SOC", "NODE", "PHB")})
    if far:
        return f"GPU pairs over {'/'.join(far)} without NVLink in the topology matrix"
    return None


FEATURES: dict[str, Callable[[Context, list[str]], str | None]] = {
    "rdma": _has_rdma,
    "nvlink": _has_nvlink,
    "nvls": _has_nvls,
    "shm": _needs_shm,
    "mnnvl": _has_mnnvl,
}


# ---------------------------------------------------------------------------------------- ENV001
def _where(setting: EnvSetting) -> str:
    if setting.origin == "command_line":
        return f"the command line at {setting.evidence.source}:{setting.evidence.line}"
    hosts = host_list(setting.hosts) or "unknown host"
    n = setting.processes
    return f"{hosts} ({n} process{'es' if n != 1 else ''})"


def _judge(ctx: Context, s: EnvSetting) -> tuple[Severity, str]:
    """(severity, message) for one setting."""
    knob = KNOBS.get(s.name)
    head = f"{s.name}={s.value} on {_where(s)}"
    if knob is None:
        return "info", f"{head}: not among the knobs ncclscope knows; check that it is meant to be set"
    note = f" ({knob.note})" if knob.note else ""
    if knob.default is not None and s.value.strip().lower() == knob.default.lower():
        return "info", f"{head} {knob.what}; this is the default value, so it changes nothing"
    if knob.off is not None and knob.off(s.value):
        note = f" ({knob.off_note})" if knob.off_note else ""
        if knob.feature == "rdma" and not ctx.multi_host:
            return "warning", (
                f"{head} {knob.what}{note}: this is a single-host job, whose intra-node traffic (P2P/SHM) does not"
                " use the network, so it does not affect this run; on several hosts it would force TCP sockets"
            )
        if knob.feature is not None:
            seen = FEATURES[knob.feature](ctx, s.hosts)
            if seen:
                return "error", (
                    f"{head} {knob.what}{note} although the job has {FEATURE_NAMES[knob.feature]} ({seen}):"
                    f" {FEATURE_EFFECTS[knob.feature]}"
                )
            return "warning", (
                f"{head} {knob.what}{note}; the inputs do not show whether the hosts have"
                f" {FEATURE_NAMES[knob.feature]}, which would make this an error"
            )
        return "warning", f"{head} {knob.what}{note}: a debugging override that is not meant for production"
    if knob.kind == "debug":
        return "warning", f"{head} {knob.what}{note}: a debugging override that is not meant for production"
    return "info", f"{head} {knob.what}{note}: a documented configuration or tuning knob"


@rule("ENV001", "debug-override", severity="error", needs=["settings"])
def debug_override(ctx: Context) -> Iterable[Finding]:
    """An NCCL_* variable is set: debugging overrides (P2P/SHM/IB/NVLS/PXN off, ALGO/PROTO forced,
    channel or thread counts capped, NET_GDR_LEVEL lowered, IGNORE_NET_MISMATCH ...) are warnings,
    errors when they switch off a transport the hosts have (IB on a multi-host job with RDMA NICs,
    P2P on NVLink, NVLS on NVSwitch, SHM where P2P is unavailable); documented tuning knobs are info.

    Settings come from the log's `set by environment` lines and from a launcher or shell command line
    in the inputs (`mpirun -x NCCL_...=`, `srun --export=...`, `export NCCL_...=`); NCCL's logging
    variables (NCCL_DEBUG ...) are not overrides.

    One finding per variable and value, with the hosts and how many processes logged it. On a single
    host NCCL_IB_DISABLE=1 changes nothing (intra-node traffic does not use the network) and stays a
    warning. Values can also come from ~/.nccl.conf, /etc/nccl.conf or NCCL_CONF_FILE: NCCL loads
    those files into its environment, so the log says "set by environment" either way.

    Why: NCCL's documentation lists these variables under "Debugging": they "should not be used in
    production nor retained in scripts ... Keeping them set may result in sub-optimal behavior,
    crashes, or hangs". A transport switched off sends the traffic over a slower path (TCP sockets,
    host memory); forced algorithms and capped channels keep NCCL from using the hardware fully.

    Fix: Remove the variable where it is set: the job script, the container image's ENV,
    ~/.nccl.conf, /etc/nccl.conf or the file NCCL_CONF_FILE names. Keep an override only as a
    documented workaround for a known issue, and retest without it after every NCCL upgrade.

    Sources: NCCL docs env.rst (introduction; "Debugging" section); NCCL docs
    troubleshooting/performance_and_tuning.rst ("Tuning NCCL configuration", "RoCE
    considerations"); landscape.md 2.E.25 and 2.E.26 (src/misc/param.cc loads /etc/nccl.conf with
    setenv overwrite=0; nccl#1008, nccl-tests#294); nccl-tests#373 (NCCL_P2P_LEVEL=LOC); nccl#2428
    (NCCL_IGNORE_NET_MISMATCH)
    """
    for s in ctx.case.env:
        if not s.name.startswith("NCCL_") or s.name in LOGGING:
            continue
        severity, message = _judge(ctx, s)
        knob = KNOBS.get(s.name)
        extra: dict[str, object] = {}
        if severity != "info":
            extra["fix"] = (
                f"Unset {s.name} (look in {CONF_FILES}: NCCL reads those files too and still logs 'set by"
                " environment'); keep it only as a documented workaround and retest without it."
            )
        elif knob is not None and knob.kind == "tuning":
            extra["fix"] = "Nothing to do if it was set on purpose; keep it identical on every host of the job."
        yield make_finding(
            "ENV001",
            severity,
            message,
            evidence=[s.evidence],
            evidence_count=s.processes or 1,
            hosts=list(s.hosts),
            **extra,
        )


# ---------------------------------------------------------------------------------------- ENV002
def _host_groups(ctx: Context) -> list[tuple[list[str], dict[str, int]]]:
    """(hosts, processes per host that went through init) of each job.

    Jobs come from shared commIds or nccl-tests runs (version.jobs). When nothing links any two
    processes (old NCCL prints no commId) all hosts are taken as one job.
    """
    groups = []
    for job in jobs(ctx):
        counts: dict[str, int] = defaultdict(int)
        for p in job.processes:
            if p.host and (p.ranks or p.nccl_version or p.cuda_driver_version):
                counts[p.host] += 1
        groups.append((job.hosts, dict(counts)))
    if groups:
        return groups
    counts = defaultdict(int)
    for p in ctx.case.processes:
        if p.host and (p.ranks or p.nccl_version or p.cuda_driver_version):
            counts[p.host] += 1
    hosts = sorted(h.name for h in ctx.case.hosts if h.name)
    return [(hosts, dict(counts))] if hosts else []


@rule("ENV002", "env-inconsistent", severity="warning", needs=["settings"])
def env_inconsistent(ctx: Context) -> Iterable[Finding]:
    """NCCL_* settings differ between the hosts or processes of one job: a variable is set on some
    hosts (or by some processes) but not all, or to different values.

    Hosts are compared within one job (processes linked by a shared commId or one nccl-tests run;
    all hosts when the log prints no commId). A process prints a variable when NCCL first reads it,
    so a host that never used the feature (for example IB parameters on a host that fell back to
    sockets) does not print it even if it is set; the message says so when the networks differ.

    Why: Ranks that disagree on protocols, buffer sizes, algorithms or transports set up
    mismatched connections: NCCL then hangs or fails with errors such as `Message truncated :
    received X bytes instead of Y`. Maintainers ask to "check the log for environment variables set
    on one rank but not the other".

    Fix: Set NCCL_* variables in one place that every rank reads (the launcher's environment
    export, e.g. `mpirun -x`, `srun --export=ALL`, the pod spec), use the same container image and
    /etc/nccl.conf on every host, and remove per-host overrides.

    Sources: landscape.md 2.E.28 (sjeaugey, nccl#1328) and 2.E.26 (/etc/nccl.conf per host);
    formats.md B.9 (one `set by environment` line per process, when the variable is read)
    """
    by_name: dict[str, list[EnvSetting]] = defaultdict(list)
    for s in ctx.case.env:
        # a command line sets its variables for every rank it starts: nothing to compare there
        if s.name.startswith("NCCL_") and s.name not in LOGGING and s.origin == "log":
            by_name[s.name].append(s)
    networks = {h.name: sorted(h.networks) for h in ctx.case.hosts}
    printing_hosts = {h for s in ctx.case.env for h in s.hosts}
    for hosts, counts in _host_groups(ctx):
        host_set = set(hosts)
        for name in sorted(by_name):
            settings = [s for s in by_name[name] if host_set & set(s.hosts) or (not s.hosts and len(hosts) <= 1)]
            if not settings:
                continue
            with_var = sorted({h for s in settings for h in s.hosts if h in host_set})
            missing = [h for h in hosts if h not in with_var]
            values = sorted({s.value for s in settings})
            evidence = shown(s.evidence for s in settings)
            n_lines = sum(max(s.processes, 1) for s in settings)
            if len(values) > 1:
                sides = "; ".join(f"{s.value} on {_where(s)}" for s in sorted(settings, key=lambda s: s.value))
                message = f"{name} has different values within one job: {sides}"
                if missing:
                    message += f"; not set on {host_list(missing)}"
            elif missing and len(hosts) > 1:
                s = settings[0]
                message = f"{name}={s.value} is set on {_where(s)} but not on {host_list(missing)}"
                silent = [h for h in missing if h not in printing_hosts]
                if silent:
                    message += (
                        f" ({host_list(silent)} printed no 'set by environment' line at all: its log may have been"
                        " taken without the ENV subsystem)"
                    )
                elif any(networks.get(h) != networks.get(with_var[0]) for h in missing):
                    nets = ", ".join(f"{h}: {'/'.join(networks.get(h) or ['?'])}" for h in [with_var[0], *missing[:5]])
                    message += (
                        f"; the hosts use different networks ({nets}), and NCCL prints a variable only when it reads"
                        " it, so check the environment of the other hosts too"
                    )
            else:
                s = settings[0]
                expected = sum(counts.get(h, 0) for h in s.hosts if h in host_set)
                if not (0 < s.processes < expected):
                    continue
                message = (
                    f"{name}={s.value} is logged by {s.processes} of the {expected} processes on {host_list(s.hosts)}"
                    " (NCCL prints a variable when a process first reads it; a process that never used the"
                    " feature does not print it)"
                )
            yield make_finding(
                "ENV002",
                "warning",
                message,
                evidence=evidence,
                evidence_count=n_lines,
                hosts=sorted({h for s in settings for h in s.hosts} | set(missing)),
            )
