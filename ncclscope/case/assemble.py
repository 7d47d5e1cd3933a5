"""Records of every input -> one Case: the assembly, input by input, and what is worked out once all are in
(hosts, COLL calls per rank, settings from command lines).

Each input's records are walked by records.py; its connection lines are counted by connections.py.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from ncclscope import __version__
from ncclscope.case.building import Builder
from ncclscope.case.connections import EDGE_LIMIT, add_connections, edge_models
from ncclscope.case.facts import as_int, evidence_of
from ncclscope.case.hang_progress import collective_progress
from ncclscope.case.records import RecordWalk, process_state
from ncclscope.common.versions import version_from_code
from ncclscope.model import (
    Case,
    CollCalls,
    ConnectionSummary,
    Host,
    Process,
)
from ncclscope.parse.framework_log import quote_last_errors
from ncclscope.parse.log_records import Event
from ncclscope.parse.normalize import looks_like_host
from ncclscope.parse.one_input import ParsedInput


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
        # schema of every model it holds (a large part of a small `analyze`'s start-up, issue 11), which only
        # JSON output needs
        self.case = Case.model_construct(ncclscope_version=__version__)
        self._builder = Builder(self.case)
        self._summary = ConnectionSummary()
        self._edges: dict[tuple, list] = {}
        self._records: RecordWalk | None = None  # the walk through the next input's records

    def give_records(self, path: str, events: list[Event]) -> None:
        """Records of the input that `add` gives next, in order after those given before."""
        if self._records is None:
            self._records = RecordWalk(self._builder, path)
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
        case.fr_trace_reports.extend(parsed.fr_trace_reports)
        case.kernel_events.extend(parsed.kernel_events)
        case.process_exits.extend(parsed.process_exits)
        case.pci_devices.extend(parsed.pci_devices)
        case.acs_lines.extend(parsed.acs_lines)
        case.topology_dumps.extend(parsed.topology_dumps)
        case.graph_dumps.extend(parsed.graph_dumps)
        case.ib_devices.extend(parsed.ib_devices)
        case.smi_gpus.extend(parsed.smi_gpus)
        case.nvlink_gpus.extend(parsed.nvlink_gpus)
        case.p2p_matrices.extend(parsed.p2p_matrices)
        case.inspector.extend(parsed.inspector)
        case.diag_reports.extend(parsed.diag_reports)
        case.roce_gids.extend(parsed.roce_gids)
        if parsed.log.coll_calls:
            builder.coll_calls.append((parsed.source.path, parsed.log.coll_calls))
        builder.command_line_settings.extend(parsed.settings)
        for kind, n in parsed.not_kept.items():
            case.facts_capped[kind] = case.facts_capped.get(kind, 0) + n
        walk = self._records or RecordWalk(builder, parsed.source.path)
        self._records = None
        walk.give(parsed.log.events)
        walk.end()
        parsed.source.records_repeated = parsed.log.records_repeated + walk.repeated
        # a damaged record the grammar took is a damaged input all the same (Source.truncated)
        parsed.source.truncated.extend(builder.damaged.pop(parsed.source.path, ()))
        if more := builder.damaged_more.pop(parsed.source.path, 0):
            parsed.source.truncated.append(f"{more} more such record{'s' if more > 1 else ''}")
        quote_last_errors(parsed.framework, parsed.log.events)  # an input read whole (ranges: as they are joined)
        parsed.log.events = []  # assembled: the memory goes to the next input and to the output
        add_connections(parsed, self._summary, self._edges)

    def finish(self) -> Case:
        case = self.case
        case.connections = self._summary
        case.edges = edge_models(self._edges)
        case.edges_truncated = len(self._edges) > EDGE_LIMIT
        _finish(self._builder, self._edges)
        case.facts_capped = dict(sorted(case.facts_capped.items()))  # whichever came first, records or readers
        case.progress = collective_progress(case)
        return case


def _add_command_line_settings(b: Builder) -> None:
    """Variables a command line in the inputs sets; NCCL's own report of the same value wins."""
    for setting in b.command_line_settings:
        key = (setting.name, setting.value)
        if key not in b.env:
            b.env[key] = (setting, set())


# ---------------------------------------------------------------------------------- finishing
# ncclDataType_t (src/nccl.h.in): a COLL line prints the number
DATATYPES = {
    "0": "int8", "1": "uint8", "2": "int32", "3": "uint32", "4": "int64", "5": "uint64",
    "6": "float16", "7": "float32", "8": "float64", "9": "bfloat16", "10": "fp8_e4m3", "11": "fp8_e5m2",
}  # fmt: skip


def _add_coll_calls(b: Builder) -> None:
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


def _finish(b: Builder, edges: dict[tuple, list]) -> None:
    case = b.case
    _add_connection_processes(b, edges)
    _merge_cut_hosts(case)
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


def _add_connection_processes(b: Builder, edges: dict[tuple, list]) -> None:
    """The processes (and their hosts) that the connection lines name: a paste of a job's connection lines
    alone still shows every process that printed one, and its rank. (Not its GPU: the number in brackets
    is a device index in newer releases and a bus id in older ones.)"""
    # in the order of their first lines: ranges read apart fill `edges` in another order than one reader.
    # A process has thousands of edges in a large job: they are gathered per process first.
    first: dict[tuple[str, str | None, int | None], tuple[str, int, int]] = {}
    ranks: dict[tuple[str, str | None, int | None], set[int]] = defaultdict(set)
    for order, (full, entry) in enumerate(edges.items()):
        path, host, pid, rank = full[0], full[1], full[2], full[5]
        pid = pid if pid is not None and pid >= 0 else None  # the edges' key says -1 for a lost pid
        if not host and pid is None:
            continue
        key = (path, host, pid)
        known = first.get(key)
        if known is None or entry[1] < known[1]:  # (a key holds its path) ties keep the edges' own order
            first[key] = (path, entry[1], order)
        if rank is not None and rank >= 0:
            ranks[key].add(rank)
    for key in sorted(first, key=first.__getitem__):
        proc = process_state(b, *key).process
        added = [r for r in sorted(ranks.get(key, ())) if r not in proc.ranks]
        if added:
            proc.ranks.extend(added)
            proc.ranks.sort()


MIN_HOST_CHARS = 3  # a shorter tail of a name is too common to be the rest of a cut one


def _merge_cut_hosts(case: Case) -> None:
    """A host name that is the tail of another host's name with the same pid is that host's, its line cut by
    another writer ("gke-h# world_size=16" then "ypercomputer-...:803:1527 [0] NCCL INFO ..."): one process,
    counted once, its facts under the whole name."""
    names: dict[int, set[str]] = defaultdict(set)
    for proc in case.processes:
        if proc.host and proc.pid is not None:
            names[proc.pid].add(proc.host)
    whole: dict[tuple[str, int], str] = {}
    for pid, hosts in names.items():
        for cut in hosts:
            longer = [
                h for h in hosts if len(h) > len(cut) >= MIN_HOST_CHARS and h.endswith(cut) and looks_like_host(h)
            ]  # not "`gpu-bt1": a quote glued to the whole name
            if len(longer) == 1:
                whole[(cut, pid)] = longer[0]
    if not whole:
        return
    for value in case.__dict__.values():
        for item in value if isinstance(value, list) else ():
            _rename(item, whole)
            for rank in getattr(item, "ranks", None) or ():
                _rename(rank, whole)
    kept: dict[tuple[str, str, int | None], Process] = {}
    for proc in case.processes:
        first = kept.setdefault((proc.source, proc.host, proc.pid), proc)
        if first is not proc:
            first.ranks = sorted(set(first.ranks) | set(proc.ranks))
            first.cuda_devs = sorted(set(first.cuda_devs) | set(proc.cuda_devs))
    case.processes = list(kept.values())
    by_name = {cut: name for (cut, _), name in whole.items()}
    for setting in case.env:  # a setting names its hosts, not their pids
        setting.hosts = sorted({by_name.get(h, h) for h in setting.hosts})


def _rename(item: object, whole: dict[tuple[str, int], str]) -> None:
    host, pid = getattr(item, "host", None), getattr(item, "pid", None)
    if isinstance(host, str) and isinstance(pid, int) and (host, pid) in whole:
        item.host = whole[(host, pid)]  # type: ignore[attr-defined]


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
