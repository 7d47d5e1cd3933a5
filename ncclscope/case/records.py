"""NCCL log records -> the Case, one handler per record family.

Per-process state (the communicator being set up, the topology dump being printed) is rebuilt by
walking each process's records in line order, because NCCL prints that context once and then
prints lines that do not repeat it (ring orders, channel counts, the topology tree).
"""

from __future__ import annotations

from collections import defaultdict
from operator import attrgetter
from typing import Any

from ncclscope.case import facts
from ncclscope.case.building import Builder, ProcessState
from ncclscope.case.facts import FACTS_LIMIT, as_float, as_int, evidence_of, listed
from ncclscope.model import (
    CommRank,
    Communicator,
    EnvSetting,
    ErrorTrace,
    GraphSearch,
    NcclMessage,
    NetDevice,
    Process,
    SystemTopology,
    TopoPath,
    TuningChoice,
)
from ncclscope.parse.log_records import (
    CONTAINER_FAMILIES,
    READ_ONCE,
    READ_ONCE_KEYS_MAX,
    Event,
    message_text,
    without_time,
)

WARNINGS_PER_FAMILY = 200
# INFO records that say what a process is (its version, interfaces, NICs, communicators): one that repeats
# an earlier record of its process word for word, the time aside, adds nothing but its line (a restart loop
# whose processes keep their pids, a collector that resends), and is read once. Records whose number or
# order is evidence (WARNs, error chains, retries, the topology dump) are always read.
# The parser drops such repeats within the bytes it reads (log_records.READ_ONCE), the walk those across a
# file's byte ranges and of `init`, whose repeat sets the communicator its process is setting up.
REPEATS_READ_ONCE = READ_ONCE | {"init"}


MESSAGES_LIMIT = 2_000


RESULT_NAMES = {
    0: "Success",
    1: "UnhandledCudaError",
    2: "SystemError",
    3: "InternalError",
    4: "InvalidArgument",
    5: "InvalidUsage",
    6: "RemoteError",
    7: "InProgress",
    8: "Timeout",
}


# Families that NCCL prints only with WARN(): a record of one that lost its prefix (an application
# logger, PyTorch's "Last error:") is still a WARN.
WARN_FAMILIES = frozenset(
    {
        "cuda_failure",
        "call_failed",
        "socket_failure",
        "message_truncated",
        "shm_failure",
        "shm_attach_failed",
        "shm_unlink_failed",
        "duplicate_gpu",
        "version_mismatch",
        "bootstrap_no_interface",
        "bootstrap_failure",
        "bootstrap_mismatch",
        "bootstrap_rank_twice",
        "proxy_failure",
        "internal_error",
        "usage_error",
        "comm_aborted",
        "alloc_failed",
        "nvml_failure",
    }
)


# families whose records are errors even when NCCL logged them at INFO level (NOWARN)
ERROR_FAMILIES = WARN_FAMILIES | {
    "warn",
    "p2p_indirect_note",
    "plugin_init_failed",
    "ib_no_device",
    "ib_no_ip_interface",
    "socket_no_interface",
    "ib_async_event",
    "ib_incompatible_devices",
    "ibverbs_missing",
}


NOTABLE_FAMILIES = frozenset(
    {
        "shared_mem_limit",  # a GPU newer than the build (VER003)
        "cumem_host_fallback",  # cuMem host memory not working (RUN008)
        "nvls_support",
        "p2p_not_enabled",
        "affinity",
        "topo_affinity",
        "cc_mode",
        "connected",
        "dmabuf",
        "gdrcopy",
        "pxn_disabled",
        "p2p_chunksize",
        "thread_thresholds",
        "mnnvl_clique",
        "launch_mode",
        "ras",
        "net_ofi",
        "topo_detection",
        "check_p2p_type",
    }
)


# ------------------------------------------------------------------------------------ records
class RecordWalk:
    """One input's records in line order: each process's records in its own order (its state is its
    own), and what several processes share (a setting's first evidence, the first records of a kind kept
    under a cap) first in the log, first kept.

    A record that lost its host name (a launcher's prefix glued over it) belongs to the one host its
    pid has elsewhere in the input, which only the whole input tells: from the first such record on,
    the walk waits for the end."""

    def __init__(self, b: Builder, path: str) -> None:
        self.b = b
        self.path = path
        self._states: dict[tuple[str | None, int | None], ProcessState] = {}
        self._waiting: list[Event] | None = None  # records after the first that lost its host name
        # a record read once (REPEATS_READ_ONCE) -> the communicator its process sets up after it (init)
        self._read_once: dict[tuple[Any, ...], Any] = {}
        self.repeated = 0  # records not read again (Source.records_repeated)

    def give(self, events: list[Event]) -> None:
        events = sorted(events, key=_line_of)
        if self._waiting is not None:
            self._waiting.extend(events)
            return
        add = self._add
        for i, event in enumerate(events):
            host, pid, _, _ = event.origin
            if not host and pid is not None:
                self._waiting = events[i:]
                return
            add(event, host, pid)

    def end(self) -> None:
        waiting, self._waiting = self._waiting, None
        if waiting:
            hosts_of_pid: dict[int, set[str]] = defaultdict(set)
            for host, pid in [*self._states, *((e.host, e.pid) for e in waiting)]:
                if host and pid is not None:
                    hosts_of_pid[pid].add(host)
            for event in waiting:
                host, pid = event.host, event.pid
                if not host and pid is not None and len(hosts_of_pid.get(pid, ())) == 1:
                    host = next(iter(hosts_of_pid[pid]))
                    event.repair_host(host)
                self._add(event, host, pid)

    def _add(self, event: Event, host: str | None, pid: int | None) -> None:
        state = self._states.get((host, pid))
        if state is None:
            state = self._states[host, pid] = process_state(self.b, self.path, host, pid)
        shape = event.shape
        family = shape.family
        if family not in REPEATS_READ_ONCE or shape.level != "INFO":
            _add_event(self.b, state, event, self.path)
            return
        key = (host, without_time(event.raw, shape))
        seen = self._read_once
        if key in seen:
            if family == "init":
                state.comm = seen[key]  # what reading it again would do to the process's state
            self.repeated += 1
            return
        _add_event(self.b, state, event, self.path)
        if len(seen) >= READ_ONCE_KEYS_MAX:
            seen.clear()
        seen[key] = state.comm


_line_of = attrgetter("line")


def process_state(b: Builder, path: str, host: str | None, pid: int | None) -> ProcessState:
    """The process (host, pid) of an input, made when first seen."""
    key = (path, host or "", pid)
    state = b.processes.get(key)
    if state is None:
        state = ProcessState(Process(host=host or "", pid=pid, source=path))
        b.processes[key] = state
        b.case.processes.append(state.process)
    return state


def _add_event(b: Builder, state: ProcessState, event: Event, path: str) -> None:
    family = event.shape.family or ""
    proc = state.process
    dev = event.origin[3]
    if dev is not None and dev not in proc.cuda_devs:
        proc.cuda_devs.append(dev)
    if family in facts.FACTS:
        facts.record(b.case, event, path)
    handler = _HANDLERS.get(family)
    if handler is not None:
        handler(b, state, event, path)
    elif family in ERROR_FAMILIES or event.level in ("WARN", "ABORT"):
        _add_message(b, event, event.fields, path, warning=True)
    elif family in NOTABLE_FAMILIES and len(b.case.messages) < MESSAGES_LIMIT:
        _add_message(b, event, event.fields, path, warning=False)
    if event.level in ("WARN", "ABORT") and handler is not None:
        _add_message(b, event, event.fields, path, warning=True)


def _message(event: Event, f: dict[str, Any], path: str) -> NcclMessage:
    loc = event.location or ""
    file = line = func = None
    if loc:
        head, _, tail = loc.rpartition(" (")
        if head and tail.endswith(")"):
            func, loc = tail[:-1], head
        file, _, line_text = loc.rpartition(":")
        line = as_int(line_text)
        if " " in file and file.split()[0].replace(".", "").isdigit():  # TRACE: "ms func"
            file = file.split(None, 1)[1]
    flat = {k: v for k, v in f.items() if isinstance(v, (str, bool))}
    return NcclMessage(
        level=_level(event),
        family=event.family,
        kind=_kind(event),
        host=event.host,
        pid=event.pid,
        tid=event.tid,
        cuda_dev=event.cuda_dev,
        file=file or None,
        file_line=line,
        function=func,
        timestamp=event.timestamp,
        message=message_text(event),
        fields=flat,
        evidence=evidence_of(event, path),
    )


def _kind(event: Event) -> str:
    if event.family in CONTAINER_FAMILIES:
        return next(iter(event.fields), event.family)
    return event.family


def _level(event: Event) -> str:
    """The record's level; a bare message of a WARN-only family was a WARN (a retry notice stays INFO)."""
    if event.level != "BARE":
        return event.level
    if event.family in WARN_FAMILIES and facts.find(event.fields, "retrying") is None:
        return "WARN"
    return "INFO"


def _add_message(b: Builder, event: Event, f: dict[str, Any], path: str, warning: bool) -> None:
    if warning:
        key = (path, event.line, event.shape.span)
        if key in b.warned:  # a handler already recorded this WARN (with its fields)
            return
        b.warned.add(key)
        b.case.warning_count += 1
        if b.warnings_per_family[event.family] >= WARNINGS_PER_FAMILY:
            return
        b.warnings_per_family[event.family] += 1
        b.case.warnings.append(_message(event, f, path))
    else:
        b.case.messages.append(_message(event, f, path))


# families ---------------------------------------------------------------------------------------
def _on_version(b: Builder, s: ProcessState, e: Event, path: str) -> None:
    f = e.fields
    version = str(f.get("nccl_version", "")).strip()
    b.versions.add(version)
    if e.host is not None or e.pid is not None:
        s.process.nccl_version = version
        s.process.evidence["nccl_version"] = evidence_of(e, path)
    else:  # the bare banner (<= 2.21, or NCCL_DEBUG=VERSION): printed by the process that has rank 0
        b.bare_versions[path] = version


def _on_driver(b: Builder, s: ProcessState, e: Event, path: str) -> None:
    f = e.fields
    s.process.cuda_driver_version = as_int(f.get("driver_version"))
    s.process.evidence["cuda_driver_version"] = evidence_of(e, path)


def _on_bootstrap(b: Builder, s: ProcessState, e: Event, path: str) -> None:
    f = e.fields
    first = listed(f.get("bootstrap_if"))
    name = first[0].get("interface") if first else f.get("interface")
    if name:
        s.process.bootstrap_interface = str(name)
        s.process.evidence["bootstrap_interface"] = evidence_of(e, path)


def _on_plugin(b: Builder, s: ProcessState, e: Event, path: str) -> None:
    f = e.fields
    for kind, detail in f.items():
        if kind == "plugin_loaded":
            name = detail.get("plugin_name") if isinstance(detail, dict) else None
            s.process.net_plugin = f"loaded {name}" if name else "loaded"
        elif kind in ("plugin_not_found", "plugin_internal") and not (s.process.net_plugin or "").startswith("loaded"):
            s.process.net_plugin = "internal"
    if e.family in ("plugin_loaded", "plugin_assigned", "plugin_initialized"):
        named = f.get("assigned_plugin") or f.get("plugin_network") or f.get("text", "")
        if "plugin_release" in f:
            named = f"{named} {f['plugin_release']}"
        s.process.net_plugin = s.process.net_plugin or str(named).strip()
    if "plugin_load_failed" in f and len(b.case.messages) < MESSAGES_LIMIT:
        _add_message(b, e, f, path, warning=False)  # the usual "no external plugin here", not a fault
    if e.family == "p2p_plugin":  # the RDMA/SHARP net plugin (HPC-X) names its transport: "P2P plugin IBext"
        name = f.get("plugin_name")
        s.process.net_plugin = s.process.net_plugin or (f"loaded {name}" if name else "loaded")


DAMAGED_LIMIT = 10  # per input: the damaged records named one by one


def _damaged(b: Builder, path: str, text: str) -> None:
    if len(b.damaged[path]) < DAMAGED_LIMIT:
        b.damaged[path].append(text)
    else:
        b.damaged_more[path] += 1


# NCCL's own networks; a name cut short of one (`Using network Sock`, the paste's last line) names none
NCCL_NETWORKS = ("IB", "Socket")


def _on_network(b: Builder, s: ProcessState, e: Event, path: str) -> None:
    name = str(e.fields.get("network", "")).strip()
    # a damaged name is no network: an unknown one would read as an RDMA plugin's
    if "\ufffd" in name or any(len(name) < len(n) and n.startswith(name) for n in NCCL_NETWORKS):
        why = f"line {e.line}: `Using network {name}`; no network read from it"
        _damaged(b, path, f"a record of it is cut or damaged ({why})")
        return
    s.process.network = name
    s.process.evidence["network"] = evidence_of(e, path)


def _device_key(e: Event, path: str, transport: str, index: int | None) -> tuple[str, str, str, int]:
    return (path, e.host or "", transport, index if index is not None else -1)


def _device(b: Builder, e: Event, path: str, transport: str, index: int | None, name: str, **extra: Any) -> None:
    """The device of a host's listing; the first listing of the host keeps it (each of its processes lists it)."""
    key = _device_key(e, path, transport, index)
    host = key[1]
    if key not in b.devices:
        b.devices[key] = NetDevice(
            host=host,
            transport=transport,
            index=index if index is not None else -1,
            name=name,
            evidence=evidence_of(e, path),
            **extra,
        )


def _on_net_ib(b: Builder, s: ProcessState, e: Event, path: str) -> None:
    f = e.fields
    devices = f.get("ib_devices")
    if isinstance(devices, dict):
        for dev in listed(devices.get("ib_device")):
            index = as_int(dev.get("index"))
            if _device_key(e, path, "IB", index) in b.devices:
                continue  # listed by another process of the host: its fields are not read again
            members = listed(dev.get("ib_member"))
            if members:
                names = [str(m.get("device_name")) for m in members]
                _device(
                    b,
                    e,
                    path,
                    "IB",
                    index,
                    "+".join(names),
                    members=names,
                    port=as_int(members[0].get("port")),
                    link_layer=str(members[0].get("link_layer")),
                )
            else:
                _device(
                    b,
                    e,
                    path,
                    "IB",
                    index,
                    str(dev.get("device_name")),
                    port=as_int(dev.get("port")),
                    link_layer=str(dev.get("link_layer")),
                    rail=as_int(dev.get("rail")),
                    plane=as_int(dev.get("plane")),
                )
        return
    if "gdr" in f:
        return  # a fact (case/facts.py)
    if (
        any(
            k in f
            for k in (
                "completion_error",
                "ib_no_device",
                "ib_no_ip_interface",
                "ib_async_event",
                "ib_incompatible_devices",
            )
        )
        or e.level == "WARN"
    ):
        fields = f.get("completion_error", f) if isinstance(f.get("completion_error"), dict) else f
        event = f.get("ib_async_event")
        if isinstance(event, dict):  # "mlx5_0:1 Got async event : ...": the device's event, named like the others
            fields = {k: v for k, v in event.items() if k not in ("text", "ib_event")}
            fields["ib_async_event"] = _event_name(event.get("ib_event")) or event.get("text")
            fields["ib_event"] = _event_name(event.get("ib_event"))
        elif "ib_event" in f:
            fields = {**f, "ib_event": _event_name(f["ib_event"])}
        _add_message(b, e, fields, path, warning=True)


def _event_name(event: Any) -> str | None:
    """An IB async event's name as rdma-core prints it ("port error"), or its text when the grammar knows no name."""
    if isinstance(event, dict):
        return str(event.get("ib_event_name") or event.get("text") or "") or None
    return str(event) if event else None


def _on_net_socket(b: Builder, s: ProcessState, e: Event, path: str) -> None:
    f = e.fields
    devices = f.get("socket_devices")
    if isinstance(devices, dict):
        for dev in listed(devices.get("socket_if")):
            _device(
                b,
                e,
                path,
                "Socket",
                as_int(dev.get("index")),
                str(dev.get("interface")),
                address=str(dev.get("address")),
            )
    elif devices is True:
        return
    elif "socket_threads" not in f:
        _add_message(b, e, f, path, warning=True)


def _on_ofi(b: Builder, s: ProcessState, e: Event, path: str) -> None:
    f = e.fields
    provider = f.get("ofi_provider")
    if isinstance(provider, dict):
        name = str(provider.get("ofi_provider"))
        fabric = str(provider.get("ofi_fabric") or "") or None
        _device(b, e, path, "OFI", 0, name, link_layer=fabric, nics=as_int(provider.get("nics")))
    platform = f.get("ofi_platform")
    if isinstance(platform, dict) and platform.get("instance_type"):
        s.process.instance_type = str(platform["instance_type"])
        s.process.evidence.setdefault("instance_type", evidence_of(e, path))
    if e.level == "WARN":
        return
    if not any(kind in f for kind in ("ofi_init_failed", "ofi_no_provider", "ofi_no_fabric", "ofi_initializing")):
        # aws-ofi-nccl logs its set-up only from a process that loaded it: that process's network is OFI,
        # whether or not its "Using network" line was kept
        s.process.network = s.process.network or "OFI"
        s.process.evidence.setdefault("network", evidence_of(e, path))
    if len(b.case.messages) < MESSAGES_LIMIT:
        _add_message(b, e, f, path, warning=False)


def _on_env(b: Builder, s: ProcessState, e: Event, path: str) -> None:
    f = e.fields
    name = str(f.get("env_name", "")).strip()
    value = str(f.get("env_value", "")).strip()
    if value.endswith(".") and value[:-1].lstrip("-").isdigit():
        value = value[:-1]  # numeric parameters end with a period (formats.md B.9)
    key = (name, value)
    entry = b.env.get(key)
    if entry is None:
        entry = (EnvSetting(name=name, value=value, evidence=evidence_of(e, path)), set())
        b.env[key] = entry
    setting, seen = entry
    seen.add((e.host or "", e.pid))
    if e.host and e.host not in setting.hosts:
        setting.hosts.append(e.host)


def _comm_key(e: Event, comm_pointer: str) -> tuple[str, str, int | None, str]:
    return ("", e.host or "", e.pid, comm_pointer)


def _split_of(b: Builder, e: Event, f: dict[str, Any], pointer: str) -> tuple[str, str, int | None] | None:
    """(id, parent id, color) of a communicator made by ncclCommSplit, which prints no commId (0x0 before
    NCCL 2.24). Its ranks are the children of one parent that asked for the same color in the same split;
    splitting is collective (every rank of the parent calls it, in the same order), so which of its process's
    splits of that parent with that color a child is names it on every rank. None when the parent's init is
    not in the inputs: the child is then known by its process and pointer alone."""
    split = f.get("split")
    if not isinstance(split, dict):
        return None
    parent = b.comm_by_pointer.get(_comm_key(e, str(split.get("parent", ""))))
    if parent is None:
        return None
    color = as_int(split.get("color"))
    child = _comm_key(e, pointer)
    starting = str(f.get("init_stage")) == "START"
    key = None if starting else b.split_started.pop(child, None)  # COMPLETE follows its START
    if key is None:
        which = (e.host, e.pid, parent.id, color)
        count = b.splits[which] = b.splits.get(which, 0) + 1
        key = f"{parent.id} split {count} color {color}"
        if starting:
            b.split_started[child] = key
    return key, parent.id, color


def _on_init(b: Builder, s: ProcessState, e: Event, path: str) -> None:
    f = e.fields
    pointer = str(f.get("comm", ""))
    comm_id = f.get("comm_id")
    comm_id = str(comm_id) if comm_id and int(str(comm_id), 16) != 0 else None
    split = None if comm_id else _split_of(b, e, f, pointer)
    key = comm_id or (split[0] if split else f"{e.host or ''}:{e.pid}:{pointer}")
    comm = b.comms.get(key)
    if comm is None:
        comm = Communicator(id=key, comm_id=comm_id, evidence=evidence_of(e, path))
        if split:
            comm.parent, comm.color = split[1], split[2]
        b.comms[key] = comm
    comm.api = comm.api or (str(f["api"]) if "api" in f else None)
    comm.nranks = as_int(f.get("nranks"))
    b.comm_by_pointer[_comm_key(e, pointer)] = comm
    s.comm = comm
    rank = as_int(f.get("rank"))
    if rank is not None:
        b.rank_by_pointer[_comm_key(e, pointer)] = rank
    member_key = (comm.id, rank, e.host, e.pid)
    member = b.members.get(member_key)
    if member is None:
        member = CommRank(
            rank=rank if rank is not None else -1,
            host=e.host,
            pid=e.pid,
            cuda_dev=as_int(f.get("cuda_dev")),
            nvml_dev=as_int(f.get("nvml_dev")),
            bus_id=str(f["bus_id"]) if "bus_id" in f else None,
            evidence=evidence_of(e, path),
        )
        comm.ranks.append(member)
        b.members[member_key] = member
    if str(f.get("init_stage")) == "START":
        member.init_start = True
    else:
        member.init_complete = True
        member.evidence = evidence_of(e, path)
    if rank is not None and rank not in s.process.ranks:
        s.process.ranks.append(rank)


def _on_comm_summary(b: Builder, s: ProcessState, e: Event, path: str) -> None:
    f = e.fields
    comm = b.comm_by_pointer.get(_comm_key(e, str(f.get("comm", "")))) or s.comm
    if comm is not None:
        comm.nnodes = as_int(f.get("nnodes"))
        comm.nranks = comm.nranks or as_int(f.get("nranks"))


def _on_channel_counts(b: Builder, s: ProcessState, e: Event, path: str) -> None:
    f = e.fields
    if s.comm is not None:
        s.comm.channels = as_int(f.get("coll_channels"))
        s.comm.nvls_channels = as_int(f.get("nvls_channels"))
        s.comm.p2p_channels = as_int(f.get("p2p_channels"))


def _on_ring_order(b: Builder, s: ProcessState, e: Event, path: str) -> None:
    f = e.fields
    if s.comm is None:
        return
    channel = as_int(f.get("channel"))
    ranks = [as_int(r) for r in listed(f.get("ring_rank"))]
    if channel is not None:
        s.comm.rings[channel] = [r for r in ranks if r is not None]
    if "ellipsis" in f or e.elided:
        s.comm.rings_truncated = True


def _on_trees(b: Builder, s: ProcessState, e: Event, path: str) -> None:
    if s.comm is None:
        return
    rank = s.process.ranks[-1] if s.process.ranks else -1
    entries = []
    text = e.text
    start = text.find("Trees")
    if start >= 0:
        entries = [part.strip() for part in text[start + 5 :].split("[") if part.strip()]
    s.comm.trees[rank] = ["[" + part for part in entries]


def _on_init_timings(b: Builder, s: ProcessState, e: Event, path: str) -> None:
    f = e.fields
    rank = as_int(f.get("rank"))
    if s.comm is not None and rank is not None:
        seconds = as_float(f.get("total"))
        if seconds is not None:
            s.comm.init_seconds[rank] = seconds


def _on_pattern(b: Builder, s: ProcessState, e: Event, path: str) -> None:
    f = e.fields
    b.case.graphs.append(
        GraphSearch(
            host=e.host,
            pid=e.pid,
            pattern=as_int(f.get("pattern_id")) or 0,
            cross_nic=as_int(f.get("cross_nic")) or 0,
            nchannels=as_int(f.get("nchannels")) or 0,
            bw_intra=as_float(f.get("bw_intra")) or 0.0,
            bw_inter=as_float(f.get("bw_inter")) or 0.0,
            type_intra=str(f.get("type_intra", "")) or None,
            type_inter=str(f.get("type_inter", "")) or None,
            same_channels=as_int(f.get("same_channels")) or 0,
            evidence=evidence_of(e, path),
        )
    )


def _on_system_header(b: Builder, s: ProcessState, e: Event, path: str) -> None:
    f = e.fields
    values = {}
    for item in listed(f.get("system_bw")):
        parts = str(item.get("system_bw_key", "")), as_float(item.get("number"))
        values[parts[0]] = parts[1]
    s.topology = SystemTopology(
        host=e.host,
        pid=e.pid,
        max_bw=values.get("maxBw", values.get("maxWidth")),
        total_bw=values.get("totalBw", values.get("totalWidth")),
        evidence=evidence_of(e, path),
    )
    b.case.system_topologies.append(s.topology)
    s.last_topology = s.topology


def _on_topo_paths(b: Builder, s: ProcessState, e: Event, path: str) -> None:
    """A GPU's paths to the other GPUs of its host, on the process's last topology dump; the paths of a host are
    kept once (from the first process that prints them)."""
    topology = s.last_topology
    if topology is None or not str(e.fields.get("node", "")).startswith("GPU/"):
        return
    key = (path, topology.host or "")
    if key in b.hosts_with_paths and not topology.gpu_paths:
        return  # kept on the dump of another process of the host
    source = str(e.fields["node"])
    for target in listed(e.fields.get("path_target")):
        name = str(target.get("path_node", ""))
        hops, bw = as_int(target.get("path_hops")), as_float(target.get("path_bw"))
        if not name.startswith("GPU/") or name == source or hops is None or bw is None:
            continue
        topology.gpu_paths.append(
            TopoPath(
                source=source,
                target=name,
                hops=hops,
                bw=bw,
                path_type=str(target.get("path_kind", "")),
                evidence=evidence_of(e, path),
            )
        )
    if topology.gpu_paths:
        b.hosts_with_paths.add(key)


def _on_topo_line(b: Builder, s: ProcessState, e: Event, path: str) -> None:
    if s.topology is not None:
        text = e.text
        marker = text.find("NCCL INFO ")
        s.topology.nodes.append(text[marker + 10 :] if marker >= 0 else text)


def _on_system_footer(b: Builder, s: ProcessState, e: Event, path: str) -> None:
    s.topology = None


def _on_tuning_choice(b: Builder, s: ProcessState, e: Event, path: str) -> None:
    f = e.fields
    size = as_int(f.get("size"))
    if size is None:
        return
    choice = TuningChoice(
        collective=str(f["func_name"]) if "func_name" in f else None,
        size=size,
        algorithm=str(f.get("algo", "")),
        protocol=str(f.get("proto", "")),
        evidence=evidence_of(e, path),
    )
    for known in b.case.tuning:
        if (known.collective, known.size, known.algorithm, known.protocol) == (
            choice.collective,
            choice.size,
            choice.algorithm,
            choice.protocol,
        ):
            known.count += 1
            return
    b.case.tuning.append(choice)


def _on_error_trace(b: Builder, s: ProcessState, e: Event, path: str) -> None:
    f = e.fields
    result = as_int(f.get("result"))
    if result is None:
        return
    # one chain = consecutive "-> N" lines of one thread
    goes_on = s.trace_tid == e.tid and e.line - s.trace_line <= 3 and s.trace_result == result
    s.trace_line = e.line
    chain = s.trace
    if goes_on:
        if chain is None:
            return  # a chain not kept (below): counted once, at its first line
    else:
        s.trace_tid, s.trace_result = e.tid, result
        if len(b.case.error_traces) >= FACTS_LIMIT:  # a crash loop's chains, again and again: counted
            b.case.facts_capped["error_traces"] = b.case.facts_capped.get("error_traces", 0) + 1
            s.trace = None
            return
        chain = ErrorTrace(
            host=e.host,
            pid=e.pid,
            tid=e.tid,
            result=result,
            result_name=RESULT_NAMES.get(result, f"result {result}"),
            frames=[],
            thread=None,
            errno_text=None,
            evidence=[],
        )
        b.case.error_traces.append(chain)
        s.trace = chain
    chain.frames.append(str(f.get("source_location", "")))
    # the first thread name and errno the chain's lines give (each assignment to a model's field is a call)
    if not chain.thread and "thread" in f:
        chain.thread = str(f["thread"]).strip("[]")
    if not chain.errno_text and "errno_text" in f:
        chain.errno_text = str(f["errno_text"]).strip("()")
    if len(chain.evidence) < 20:
        chain.evidence.append(evidence_of(e, path))


_HANDLERS = {
    "version": _on_version,
    "cuda_driver": _on_driver,
    "bootstrap": _on_bootstrap,
    "net_plugin_line": _on_plugin,
    "plugin_loaded": _on_plugin,
    "plugin_assigned": _on_plugin,
    "plugin_initialized": _on_plugin,
    "p2p_plugin": _on_plugin,
    "using_network": _on_network,
    "net_ib": _on_net_ib,
    "net_ib_gin": _on_net_ib,
    "net_socket": _on_net_socket,
    "net_ofi": _on_ofi,
    "env": _on_env,
    "env_ib_hca": _on_env,
    "init": _on_init,
    "comm_summary": _on_comm_summary,
    "channel_counts": _on_channel_counts,
    "ring_order": _on_ring_order,
    "trees": _on_trees,
    "init_timings": _on_init_timings,
    "pattern": _on_pattern,
    "system_header": _on_system_header,
    "topo_node": _on_topo_line,
    "topo_link": _on_topo_line,
    "topo_paths": _on_topo_paths,
    "system_footer": _on_system_footer,
    "tuning_choice": _on_tuning_choice,
    "error_trace": _on_error_trace,
}
