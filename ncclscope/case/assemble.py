"""Records of every input -> one Case: processes, hosts, communicators, devices, settings.

Per-process state (the communicator being set up, the topology dump being printed) is rebuilt by
walking each process's records in line order, because NCCL prints that context once and then
prints lines that do not repeat it (ring orders, channel counts, the topology tree).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ncclscope import __version__
from ncclscope.case import facts
from ncclscope.case.facts import as_int, evidence_of, listed, message_text
from ncclscope.case.hang_progress import collective_progress
from ncclscope.common.versions import version_from_code
from ncclscope.model import (
    Case,
    CollCalls,
    CommRank,
    Communicator,
    Connection,
    ConnectionSummary,
    EnvSetting,
    ErrorTrace,
    Evidence,
    GraphSearch,
    Host,
    NcclMessage,
    NetDevice,
    Process,
    SystemTopology,
    TuningChoice,
)
from ncclscope.parse.nccl_log import CONTAINER_FAMILIES, Event
from ncclscope.parse.normalize import clean, strip_launcher_prefix
from ncclscope.parse.one_input import ParsedInput

EDGE_LIMIT = 10_000
WARNINGS_PER_FAMILY = 200
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
        "shm_unlink_failed",
        "duplicate_gpu",
        "version_mismatch",
        "bootstrap_no_interface",
        "bootstrap_failure",
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


def _float(value: Any) -> float | None:
    try:
        return float(str(value))
    except (TypeError, ValueError):
        return None


@dataclass
class _ProcessState:
    process: Process
    comm: Communicator | None = None  # the communicator this process is setting up
    topology: SystemTopology | None = None
    trace: ErrorTrace | None = None
    trace_tid: int | None = None
    trace_line: int = -10


@dataclass
class _Builder:
    case: Case
    processes: dict[tuple[str, str, int | None], _ProcessState] = field(default_factory=dict)
    comms: dict[str, Communicator] = field(default_factory=dict)
    comm_by_pointer: dict[tuple[str, str, int | None, str], Communicator] = field(default_factory=dict)
    rank_by_pointer: dict[tuple[str, str, int | None, str], int] = field(default_factory=dict)
    coll_calls: list[tuple[str, dict]] = field(default_factory=list)  # (source path, LogResult.coll_calls)
    env: dict[tuple[str, str], tuple[EnvSetting, set[tuple[str, int | None]]]] = field(default_factory=dict)
    devices: dict[tuple[str, str, str, int], NetDevice] = field(default_factory=dict)
    warnings_per_family: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    versions: set[str] = field(default_factory=set)
    members: dict[tuple[str, int | None, str | None, int | None], CommRank] = field(default_factory=dict)
    bare_versions: dict[str, str] = field(default_factory=dict)  # source -> version of its bare banner
    warned: set[tuple[str, int, tuple[int, int]]] = field(default_factory=set)
    command_line_settings: list[EnvSetting] = field(default_factory=list)
    split_started: dict[tuple[str, str, int | None, str], str] = field(default_factory=dict)  # child -> id
    splits: dict[tuple[str | None, int | None, str, int | None], int] = field(default_factory=dict)
    damaged: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))  # source -> records not used
    damaged_more: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # past DAMAGED_LIMIT


def assemble(inputs: Iterable[ParsedInput]) -> Case:
    """The inputs' records as one Case."""
    assembly = Assembly()
    for parsed in inputs:
        assembly.add(parsed)
    return assembly.finish()


class Assembly:
    """Builds one Case from inputs given in order. The records of a large file read in byte ranges may
    be given range by range (`give_records`) while later ranges are still being parsed, before the file
    itself is added: the records are walked in line order either way, so the Case is the same."""

    def __init__(self) -> None:
        # not validated: the assembly fills it field by field, and validating the empty Case builds the
        # schema of every model it holds (20 ms of a small `analyze`, issue 11), which only JSON output needs
        self.case = Case.model_construct(ncclscope_version=__version__)
        self._builder = _Builder(self.case)
        self._summary = ConnectionSummary()
        self._edges: dict[tuple, list] = {}
        self._records: _RecordWalk | None = None  # the walk through the next input's records

    def give_records(self, path: str, events: list[Event]) -> None:
        """Records of the input that `add` gives next, in order after those given before."""
        if self._records is None:
            self._records = _RecordWalk(self._builder, path)
        self._records.give(events)

    def add(self, parsed: ParsedInput) -> None:
        """An input whole; its records are those given before (if any), then those it holds."""
        case, builder = self.case, self._builder
        case.sources.append(parsed.source)
        case.topologies.extend(parsed.topologies)
        case.benchmarks.extend(parsed.benchmarks)
        case.framework.extend(parsed.framework)
        case.flight_records.extend(parsed.flight_records)
        case.ras_reports.extend(parsed.ras_reports)
        case.topology_dumps.extend(parsed.topology_dumps)
        case.graph_dumps.extend(parsed.graph_dumps)
        case.ib_devices.extend(parsed.ib_devices)
        case.smi_gpus.extend(parsed.smi_gpus)
        case.nvlink_gpus.extend(parsed.nvlink_gpus)
        case.p2p_matrices.extend(parsed.p2p_matrices)
        if parsed.log.coll_calls:
            builder.coll_calls.append((parsed.source.path, parsed.log.coll_calls))
        builder.command_line_settings.extend(parsed.settings)
        for kind, n in parsed.not_kept.items():
            case.facts_capped[kind] = case.facts_capped.get(kind, 0) + n
        walk = self._records or _RecordWalk(builder, parsed.source.path)
        self._records = None
        walk.give(parsed.log.events)
        walk.end()
        # a damaged record the grammar took is a damaged input all the same (Source.truncated)
        parsed.source.truncated.extend(builder.damaged.pop(parsed.source.path, ()))
        if more := builder.damaged_more.pop(parsed.source.path, 0):
            parsed.source.truncated.append(f"{more} more such record{'s' if more > 1 else ''}")
        _last_error_texts(parsed, walk.given)
        parsed.log.events = []  # assembled: the memory goes to the next input and to the output
        _add_connections(parsed, self._summary, self._edges)

    def finish(self) -> Case:
        case = self.case
        case.connections = self._summary
        case.edges = _edge_models(self._edges)
        case.edges_truncated = len(self._edges) > EDGE_LIMIT
        _finish(self._builder, self._edges)
        case.facts_capped = dict(sorted(case.facts_capped.items()))  # whichever came first, records or readers
        case.progress = collective_progress(case)
        return case


# ------------------------------------------------------------------------------------ records
class _RecordWalk:
    """One input's records in line order: each process's records in its own order (its state is its
    own), and what several processes share (a setting's first evidence, the first records of a kind kept
    under a cap) first in the log, first kept.

    A record that lost its host name (a launcher's prefix glued over it) belongs to the one host its
    pid has elsewhere in the input, which only the whole input tells: from the first such record on,
    the walk waits for the end."""

    def __init__(self, b: _Builder, path: str) -> None:
        self.b = b
        self.path = path
        self.given: list[Event] = []
        self._states: dict[tuple[str | None, int | None], _ProcessState] = {}
        self._waiting: list[Event] | None = None  # records after the first that lost its host name

    def give(self, events: list[Event]) -> None:
        events = sorted(events, key=_line_of)
        self.given.extend(events)
        if self._waiting is not None:
            self._waiting.extend(events)
            return
        for i, event in enumerate(events):
            if not event.host and event.pid is not None:
                self._waiting = events[i:]
                return
            self._add(event, event.host, event.pid)

    def end(self) -> None:
        waiting = self._waiting
        if not waiting:
            return
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
            state = self._states[host, pid] = _process(self.b, self.path, host, pid)
        _add_event(self.b, state, event, self.path)


def _line_of(event: Event) -> int:
    return event.line


def _last_error_texts(parsed: ParsedInput, events: list[Event]) -> None:
    """A framework's `Last error:` whose text, on the next line, is NCCL's WARN text: the log reader
    read that line as an NCCL message, so the framework reader never saw it."""
    waiting = {e.evidence.line + 1: e for e in parsed.framework if e.kind == "last_error" and not e.text}
    if not waiting:
        return
    for event in events:
        quoted = waiting.get(event.line)
        if quoted is not None:
            quoted.text = strip_launcher_prefix(message_text(event))[1].strip()


def _process(b: _Builder, path: str, host: str | None, pid: int | None) -> _ProcessState:
    key = (path, host or "", pid)
    state = b.processes.get(key)
    if state is None:
        state = _ProcessState(Process(host=host or "", pid=pid, source=path))
        b.processes[key] = state
        b.case.processes.append(state.process)
    return state


def _add_event(b: _Builder, state: _ProcessState, event: Event, path: str) -> None:
    family = event.family
    proc = state.process
    dev = event.cuda_dev
    if dev is not None and dev not in proc.cuda_devs:
        proc.cuda_devs.append(dev)
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


def _add_message(b: _Builder, event: Event, f: dict[str, Any], path: str, warning: bool) -> None:
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
def _on_version(b: _Builder, s: _ProcessState, e: Event, path: str) -> None:
    f = e.fields
    version = str(f.get("nccl_version", "")).strip()
    b.versions.add(version)
    if e.host is not None or e.pid is not None:
        s.process.nccl_version = version
        s.process.evidence["nccl_version"] = evidence_of(e, path)
    else:  # the bare banner (<= 2.21, or NCCL_DEBUG=VERSION): printed by the process that has rank 0
        b.bare_versions[path] = version


def _on_driver(b: _Builder, s: _ProcessState, e: Event, path: str) -> None:
    f = e.fields
    s.process.cuda_driver_version = as_int(f.get("driver_version"))
    s.process.evidence["cuda_driver_version"] = evidence_of(e, path)


def _on_bootstrap(b: _Builder, s: _ProcessState, e: Event, path: str) -> None:
    f = e.fields
    first = listed(f.get("bootstrap_if"))
    name = first[0].get("interface") if first else f.get("interface")
    if name:
        s.process.bootstrap_interface = str(name)
        s.process.evidence["bootstrap_interface"] = evidence_of(e, path)


def _on_plugin(b: _Builder, s: _ProcessState, e: Event, path: str) -> None:
    f = e.fields
    for kind, detail in f.items():
        if kind == "plugin_loaded":
            name = detail.get("plugin_name") if isinstance(detail, dict) else None
            s.process.net_plugin = f"loaded {name}" if name else "loaded"
        elif kind in ("plugin_not_found", "plugin_internal") and not (s.process.net_plugin or "").startswith("loaded"):
            s.process.net_plugin = "internal"
    if e.family in ("plugin_loaded", "plugin_assigned", "plugin_initialized"):
        s.process.net_plugin = s.process.net_plugin or str(f.get("text", "")).strip()
    if "plugin_load_failed" in f and len(b.case.messages) < MESSAGES_LIMIT:
        _add_message(b, e, f, path, warning=False)  # the usual "no external plugin here", not a fault


DAMAGED_LIMIT = 10  # per input: the damaged records named one by one


def _damaged(b: _Builder, path: str, text: str) -> None:
    if len(b.damaged[path]) < DAMAGED_LIMIT:
        b.damaged[path].append(text)
    else:
        b.damaged_more[path] += 1


# NCCL's own networks; a name cut short of one (`Using network Sock`, the paste's last line) names none
NCCL_NETWORKS = ("IB", "Socket")


def _on_network(b: _Builder, s: _ProcessState, e: Event, path: str) -> None:
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


def _device(b: _Builder, e: Event, path: str, transport: str, index: int | None, name: str, **extra: Any) -> None:
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


def _on_net_ib(b: _Builder, s: _ProcessState, e: Event, path: str) -> None:
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
        return  # a fact (facts.py)
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
        _add_message(
            b, e, f.get("completion_error", f) if isinstance(f.get("completion_error"), dict) else f, path, warning=True
        )


def _on_net_socket(b: _Builder, s: _ProcessState, e: Event, path: str) -> None:
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


def _on_ofi(b: _Builder, s: _ProcessState, e: Event, path: str) -> None:
    f = e.fields
    provider = f.get("ofi_provider")
    if isinstance(provider, dict):
        name = str(provider.get("ofi_provider"))
        _device(b, e, path, "OFI", 0, name, link_layer=str(provider.get("ofi_fabric") or "") or None)
    if e.level == "WARN":
        return
    if not any(kind in f for kind in ("ofi_init_failed", "ofi_no_provider", "ofi_initializing")):
        # aws-ofi-nccl logs its set-up only from a process that loaded it: that process's network is OFI,
        # whether or not its "Using network" line was kept
        s.process.network = s.process.network or "OFI"
        s.process.evidence.setdefault("network", evidence_of(e, path))
    if len(b.case.messages) < MESSAGES_LIMIT:
        _add_message(b, e, f, path, warning=False)


def _on_env(b: _Builder, s: _ProcessState, e: Event, path: str) -> None:
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


def _add_command_line_settings(b: _Builder) -> None:
    """Variables a command line in the inputs sets; NCCL's own report of the same value wins."""
    for setting in b.command_line_settings:
        key = (setting.name, setting.value)
        if key not in b.env:
            b.env[key] = (setting, set())


def _comm_key(e: Event, comm_pointer: str) -> tuple[str, str, int | None, str]:
    return ("", e.host or "", e.pid, comm_pointer)


def _split_of(b: _Builder, e: Event, f: dict[str, Any], pointer: str) -> tuple[str, str, int | None] | None:
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


def _on_init(b: _Builder, s: _ProcessState, e: Event, path: str) -> None:
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


def _on_comm_summary(b: _Builder, s: _ProcessState, e: Event, path: str) -> None:
    f = e.fields
    comm = b.comm_by_pointer.get(_comm_key(e, str(f.get("comm", "")))) or s.comm
    if comm is not None:
        comm.nnodes = as_int(f.get("nnodes"))
        comm.nranks = comm.nranks or as_int(f.get("nranks"))


def _on_channel_counts(b: _Builder, s: _ProcessState, e: Event, path: str) -> None:
    f = e.fields
    if s.comm is not None:
        s.comm.channels = as_int(f.get("coll_channels"))
        s.comm.nvls_channels = as_int(f.get("nvls_channels"))
        s.comm.p2p_channels = as_int(f.get("p2p_channels"))


def _on_ring_order(b: _Builder, s: _ProcessState, e: Event, path: str) -> None:
    f = e.fields
    if s.comm is None:
        return
    channel = as_int(f.get("channel"))
    ranks = [as_int(r) for r in listed(f.get("ring_rank"))]
    if channel is not None:
        s.comm.rings[channel] = [r for r in ranks if r is not None]
    if "ellipsis" in f or e.elided:
        s.comm.rings_truncated = True


def _on_trees(b: _Builder, s: _ProcessState, e: Event, path: str) -> None:
    if s.comm is None:
        return
    rank = s.process.ranks[-1] if s.process.ranks else -1
    entries = []
    text = e.text
    start = text.find("Trees")
    if start >= 0:
        entries = [part.strip() for part in text[start + 5 :].split("[") if part.strip()]
    s.comm.trees[rank] = ["[" + part for part in entries]


def _on_init_timings(b: _Builder, s: _ProcessState, e: Event, path: str) -> None:
    f = e.fields
    rank = as_int(f.get("rank"))
    if s.comm is not None and rank is not None:
        seconds = _float(f.get("total"))
        if seconds is not None:
            s.comm.init_seconds[rank] = seconds


def _on_pattern(b: _Builder, s: _ProcessState, e: Event, path: str) -> None:
    f = e.fields
    b.case.graphs.append(
        GraphSearch(
            host=e.host,
            pid=e.pid,
            pattern=as_int(f.get("pattern_id")) or 0,
            cross_nic=as_int(f.get("cross_nic")) or 0,
            nchannels=as_int(f.get("nchannels")) or 0,
            bw_intra=_float(f.get("bw_intra")) or 0.0,
            bw_inter=_float(f.get("bw_inter")) or 0.0,
            type_intra=str(f.get("type_intra", "")) or None,
            type_inter=str(f.get("type_inter", "")) or None,
            same_channels=as_int(f.get("same_channels")) or 0,
            evidence=evidence_of(e, path),
        )
    )


def _on_system_header(b: _Builder, s: _ProcessState, e: Event, path: str) -> None:
    f = e.fields
    values = {}
    for item in listed(f.get("system_bw")):
        parts = str(item.get("system_bw_key", "")), _float(item.get("number"))
        values[parts[0]] = parts[1]
    s.topology = SystemTopology(
        host=e.host,
        pid=e.pid,
        max_bw=values.get("maxBw", values.get("maxWidth")),
        total_bw=values.get("totalBw", values.get("totalWidth")),
        evidence=evidence_of(e, path),
    )
    b.case.system_topologies.append(s.topology)


def _on_topo_line(b: _Builder, s: _ProcessState, e: Event, path: str) -> None:
    if s.topology is not None:
        text = e.text
        marker = text.find("NCCL INFO ")
        s.topology.nodes.append(text[marker + 10 :] if marker >= 0 else text)


def _on_system_footer(b: _Builder, s: _ProcessState, e: Event, path: str) -> None:
    s.topology = None


def _on_tuning_choice(b: _Builder, s: _ProcessState, e: Event, path: str) -> None:
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


def _on_error_trace(b: _Builder, s: _ProcessState, e: Event, path: str) -> None:
    f = e.fields
    result = as_int(f.get("result"))
    if result is None:
        return
    frame = str(f.get("source_location", ""))
    thread = str(f["thread"]).strip("[]") if "thread" in f else None
    errno_text = str(f["errno_text"]).strip("()") if "errno_text" in f else None
    chain = s.trace
    # one chain = consecutive "-> N" lines of one thread
    if chain is None or s.trace_tid != e.tid or e.line - s.trace_line > 3 or chain.result != result:
        chain = ErrorTrace(
            host=e.host,
            pid=e.pid,
            tid=e.tid,
            result=result,
            result_name=RESULT_NAMES.get(result, f"result {result}"),
            frames=[],
            thread=thread,
            errno_text=errno_text,
            evidence=[],
        )
        b.case.error_traces.append(chain)
        s.trace, s.trace_tid = chain, e.tid
    chain.frames.append(frame)
    chain.thread = chain.thread or thread
    chain.errno_text = chain.errno_text or errno_text
    if len(chain.evidence) < 20:
        chain.evidence.append(evidence_of(e, path))
    s.trace_line = e.line


_HANDLERS = {
    "version": _on_version,
    "cuda_driver": _on_driver,
    "bootstrap": _on_bootstrap,
    "net_plugin_line": _on_plugin,
    "plugin_loaded": _on_plugin,
    "plugin_assigned": _on_plugin,
    "plugin_initialized": _on_plugin,
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
    "topo_paths": _on_topo_line,
    "system_footer": _on_system_footer,
    "tuning_choice": _on_tuning_choice,
    "error_trace": _on_error_trace,
}


# -------------------------------------------------------------------------------- connections
def _add_connections(parsed: ParsedInput, summary: ConnectionSummary, edges: dict[tuple, list]) -> None:
    log = parsed.log
    path = parsed.source.path
    if log.net_same_device and summary.across_hosts is None:
        line, text = log.net_same_device
        summary.across_hosts = Evidence(source=path, line=line, text=text)
    for transport, count in log.by_transport.items():
        summary.total += count
        summary.by_transport[transport] = summary.by_transport.get(transport, 0) + count
        if transport not in summary.examples:
            line, text = log.transport_examples[transport]
            summary.examples[transport] = Evidence(source=path, line=line, text=text)
    for key, (count, line, raw) in log.edges.items():
        host, pid, transport, direction, rank, peer, nic, proxy, gdr, shared, _, _ = key
        if transport.startswith(("NET/", "COLLNET/")):
            if gdr:
                summary.net_with_gdr += count
            else:
                summary.net_without_gdr += count
            if proxy >= 0:
                summary.via_proxy += count
        full = (path, *key)
        entry = edges.get(full)
        if entry is None:
            edges[full] = [count, line, raw]
        else:
            entry[0] += count


def _edge_order(item: tuple[tuple, list]) -> tuple:
    """Edges by source, host, pid, transport, direction, ranks, NIC and proxy; a missing host first."""
    key = item[0][:9]
    return key if None not in key else tuple("" if v is None else v for v in key)


def _edge_models(edges: dict[tuple, list]) -> list[Connection]:
    out = []
    ordered = sorted(edges.items(), key=_edge_order)
    for full, (count, line, raw) in ordered[:EDGE_LIMIT]:
        path, host, pid, transport, direction, rank, peer, nic, proxy, gdr, shared, from_dev, to_dev = full
        # NET edges are keyed by the local rank (whose NIC it is): the remote rank is kept apart as peer_rank
        net = transport.startswith(("NET/", "COLLNET/"))
        out.append(
            Connection(
                from_rank=rank,
                to_rank=-1 if net else peer,
                peer_rank=peer if net and peer >= 0 else None,
                from_dev=from_dev or None,
                to_dev=to_dev or None,
                transport=transport,
                direction=direction or "",
                host=host,
                nic=nic if nic >= 0 else None,
                gdr=bool(gdr),
                shared=bool(shared),
                proxy_rank=proxy if proxy >= 0 else None,
                channels=count,
                evidence=Evidence(source=path, line=line, text=clean(raw.decode("utf-8", "replace")).text),
            )
        )
    return out


# ---------------------------------------------------------------------------------- finishing
# ncclDataType_t (src/nccl.h.in): a COLL line prints the number
DATATYPES = {
    "0": "int8", "1": "uint8", "2": "int32", "3": "uint32", "4": "int64", "5": "uint64",
    "6": "float16", "7": "float32", "8": "float64", "9": "bfloat16", "10": "fp8_e4m3", "11": "fp8_e5m2",
}  # fmt: skip


def _add_coll_calls(b: _Builder) -> None:
    """COLL lines per rank: the rank is the one the same process's init line gives that comm pointer."""
    for path, calls in b.coll_calls:
        for (host, pid, pointer), (count, op, event) in calls.items():
            key = ("", host or "", pid if pid >= 0 else None, pointer)
            comm = b.comm_by_pointer.get(key)
            f = event.field
            dtype = str(f("datatype"))
            b.case.coll_calls.append(
                CollCalls(
                    communicator=comm.id if comm else None,
                    host=host,
                    pid=key[2],
                    comm=pointer,
                    rank=b.rank_by_pointer.get(key),
                    nranks=as_int(f("nranks")),
                    calls=count,
                    last_op_count=op,
                    last_call=f"{f('func_name')} of {f('count')} {DATATYPES.get(dtype, f'datatype {dtype}')}",
                    evidence=evidence_of(event, path),
                )
            )
    b.case.coll_calls.sort(key=lambda c: (c.comm, c.rank if c.rank is not None else -1, c.host or "", c.pid or 0))


def _finish(b: _Builder, edges: dict[tuple, list]) -> None:
    case = b.case
    _add_coll_calls(b)
    _add_command_line_settings(b)
    for setting, seen in b.env.values():
        setting.processes = len(seen)
        setting.pids = sorted({pid for _, pid in seen if pid is not None})
        case.env.append(setting)
    case.env.sort(key=lambda s: (s.name, s.value))
    case.net_devices = list(b.devices.values())
    for comm in b.comms.values():
        comm.ranks.sort(key=lambda r: r.rank)
        comm.ranks_started = sum(r.init_start for r in comm.ranks)
        comm.ranks_completed = sum(r.init_complete for r in comm.ranks)
        case.communicators.append(comm)
    for proc in case.processes:
        banner = b.bare_versions.get(proc.source)
        if banner and proc.nccl_version is None and 0 in proc.ranks:
            proc.nccl_version = banner
    # also what frameworks quote in NCCL errors ("..., NCCL version 2.19.3") and the library an
    # nccl-tests run reports it was built with (nccl-library=22902), as releases
    b.versions |= {e.nccl_version for e in case.framework if e.nccl_version}
    b.versions |= {v for run in case.benchmarks if (v := version_from_code(run.nccl_library))}
    # and what RAS reports and Flight Recorder dumps say the processes run
    b.versions |= {r.nccl_version for r in case.ras_reports if r.nccl_version}
    b.versions |= {r.comm_lib_version for r in case.flight_records if r.comm_lib_version}
    case.nccl_versions = sorted(v for v in b.versions if v)
    case.cuda_driver_versions = sorted(
        {p.cuda_driver_version for p in case.processes if p.cuda_driver_version is not None}
    )
    case.hosts = _hosts(case, edges)


def _hosts(case: Case, edges: dict[tuple, list]) -> list[Host]:
    gdr: dict[str, set[bool]] = defaultdict(set)
    for full in edges:
        host, transport, gdr_flag = full[1], full[3], full[9]
        if transport.startswith("NET/") and transport != "NET/Socket" and host is not None:  # GDR is RDMA's
            gdr[host].add(gdr_flag)
    hosts: dict[str, Host] = {}
    for proc in case.processes:
        if not proc.host:
            continue
        host = hosts.setdefault(proc.host, Host(name=proc.host, processes=0))
        host.processes += 1
        for value, target in (
            (proc.nccl_version, host.nccl_versions),
            (proc.cuda_driver_version, host.cuda_driver_versions),
            (proc.network, host.networks),
            (proc.net_plugin, host.net_plugins),
            (proc.bootstrap_interface, host.bootstrap_interfaces),
        ):
            if value is not None and value not in target:
                target.append(value)  # type: ignore[arg-type]
        host.ranks.extend(r for r in proc.ranks if r not in host.ranks)
    for name, host in hosts.items():
        host.ranks.sort()
        flags = gdr.get(name)
        if flags:
            host.gdr = "mixed" if len(flags) > 1 else ("on" if True in flags else "off")
    return sorted(hosts.values(), key=lambda h: h.name)
