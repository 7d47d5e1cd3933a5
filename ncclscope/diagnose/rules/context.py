"""What a rule sees: the Case, the detected platform and bandwidth judgements, and small helpers."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeVar

from ncclscope.model import BandwidthJudgement, Case, Communicator, EnvSetting, Evidence, NcclMessage, Platform

# GPUs of one host on NVIDIA's 8-GPU HGX/DGX boards (A100, H100, H200, B200) and most cloud GPU VMs;
# a communicator of more ranks, on one host in the inputs, most likely has ranks elsewhere (DGX-2 had 16)
GPUS_PER_HOST = 8

T = TypeVar("T")

EVIDENCE_SHOWN = 5  # representative lines per finding; the count says how many there are

GRAPH_FAMILIES = frozenset(
    {"system_header", "topo_node", "topo_link", "pattern", "graph_channel", "graph_ring", "graph_tree"}
)
TUNING_FAMILIES = frozenset(
    {"tuning_choice", "tuning_row", "tuning_algorithm", "tuning_protocol", "tuning_nthreads", "tuning_header_old"}
)

# Evidence a rule may need, and how to get it when it is missing (EVD001 quotes this).
NEEDS: dict[str, str] = {
    "nccl_log": "an NCCL log: run with NCCL_DEBUG=INFO (ncclscope run does it for you)",
    # NCCL's errors: its own WARNs, or those the framework raised (with NCCL's last error) when there is no log
    "nccl_errors": "an NCCL log: run with NCCL_DEBUG=INFO (ncclscope run does it for you)",
    "settings": "NCCL settings: the log's `set by environment` lines (NCCL_DEBUG_SUBSYS with ENV, on by default)"
    " or the job's command line",
    "transports": "connection lines or P2P reports: NCCL_DEBUG=INFO with the INIT subsystem, from communicator setup",
    "connections": "connection lines: NCCL_DEBUG=INFO with the INIT subsystem, from communicator setup",
    "graph": "GRAPH lines: NCCL_DEBUG_SUBSYS=INIT,ENV,GRAPH,NET,TUNING",
    "tuning": "TUNING lines: NCCL_DEBUG_SUBSYS=INIT,ENV,GRAPH,NET,TUNING",
    "topology": "a topology matrix: the output of `nvidia-smi topo -m` on each host",
    # a matrix, or the paths between GPUs that NCCL prints after its topology dump (GRAPH): EVD001 asks for a matrix
    "gpu_paths": "a topology matrix: the output of `nvidia-smi topo -m` on each host",
    "nccl_tests": "a benchmark: nccl-tests output (all_reduce_perf -b 8 -e 8G -f 2) or `ncclscope run`",
    "bandwidth": "a benchmark: nccl-tests output (all_reduce_perf -b 8 -e 8G -f 2) or `ncclscope run`",
    "version": "the NCCL version line: NCCL_DEBUG=INFO (NCCL 2.22+ prints it on every rank)",
    "init": "communicator init lines (Init START/COMPLETE): NCCL_DEBUG=INFO",
    "platform": "what the hardware is: nccl-tests device lines or `nvidia-smi topo -m` with the log",
    # all answered by the hosts' own reports: EVD001 says them together (rules/evidence.py SAME_INPUT)
    "host_links": "the hosts' own reports of their links: NCCL's topology dump (NCCL_TOPO_DUMP_FILE=topo-%h.xml on"
    " the job; `ncclscope run` writes it), and from each host `nvidia-smi -q` (PCIe links, versions),"
    " `nvidia-smi nvlink -s` (NVLinks) and `ibstat` (ports)",
    "pcie_links": "the GPUs' PCIe links: `nvidia-smi -q` from each host, or NCCL's topology dump",
    "nvlinks": "the GPUs' NVLinks: `nvidia-smi nvlink -s` from each host, or NCCL's topology dump",
    "host_views": "NCCL's view and the host's side by side: NCCL's topology dump with `nvidia-smi topo -m`,"
    " or an NCCL log with `nvidia-smi topo -p2p r`, from the same host",
    "host_versions": "the hosts' own reports of their versions: `nvidia-smi -q` and `ibstat` from each host",
    "ib_ports": "the hosts' own reports of their ports: `ibstat` from each host, or NCCL's topology dump"
    " (NCCL_TOPO_DUMP_FILE=topo-%h.xml)",
}


@dataclass
class NotJudged:
    """Something a rule could not judge although its evidence is there in part (EVD001 reports it)."""

    code: str
    what: str
    evidence: list[Evidence] = field(default_factory=list)


@dataclass
class Context:
    case: Case
    platform: Platform = field(default_factory=Platform)
    bandwidth: list[BandwidthJudgement] = field(default_factory=list)
    not_judged: list[NotJudged] = field(default_factory=list)
    # views of the Case that several rules read (once): see `once`
    derived: dict[str, Any] = field(default_factory=dict, repr=False)

    def cannot_judge(self, code: str, what: str, evidence: Iterable[Evidence] = ()) -> None:
        self.not_judged.append(NotJudged(code, what, list(evidence)))

    def once(self, name: str, build: Callable[[Context], T]) -> T:
        """`build(self)`, built once per analysis for the rules that read it (net_common.host_nets ...,
        which live beside their rules): a large job has tens of thousands of edges to sort by host.
        What it returns is shared, so its readers leave it as it is."""
        if name not in self.derived:
            self.derived[name] = build(self)
        return self.derived[name]

    # ------------------------------------------------------------------------------ evidence
    @cached_property
    def families(self) -> set[str]:
        return {f for s in self.case.sources for f in s.families}

    def has(self, need: str) -> bool:
        case = self.case
        checks = {
            "nccl_log": lambda: any("nccl_log" in s.kinds for s in case.sources),
            "nccl_errors": lambda: (
                any("nccl_log" in s.kinds for s in case.sources)
                or any(e.kind in ("nccl_error", "nccl_result") for e in case.framework)
            ),
            # communicators of one rank connect to nobody: no connection lines to miss
            "connections": lambda: case.connections.total > 0 or self.single_rank_comms,
            # a log shows the settings NCCL read (none: nothing set); without one, a command line may
            "settings": lambda: bool(case.env) or any("nccl_log" in s.kinds for s in case.sources),
            "transports": lambda: (
                case.connections.total > 0 or bool(case.p2p or case.p2p_matrices) or self.single_rank_comms
            ),
            "graph": lambda: bool(self.families & GRAPH_FAMILIES) or bool(case.graph_dumps),
            "tuning": lambda: bool(self.families & TUNING_FAMILIES),
            "topology": lambda: bool(case.topologies),
            "gpu_paths": lambda: bool(case.topologies) or any(t.gpu_paths for t in case.system_topologies),
            "host_links": lambda: any(d.gpus or d.nets for d in case.topology_dumps),
            "pcie_links": lambda: bool(case.smi_gpus) or any(d.pci for d in case.topology_dumps),
            "host_views": lambda: (
                bool(case.topology_dumps and case.topologies) or bool(case.p2p_matrices and case.edges)
            ),
            "host_versions": lambda: bool(case.smi_gpus) or bool(case.ib_devices),
            "nvlinks": lambda: bool(case.nvlink_gpus) or any(d.gpus for d in case.topology_dumps),
            "ib_ports": lambda: (
                bool(case.ib_devices)
                or any(d.nets for d in case.topology_dumps)
                or any(r.kind == "net_bw" for r in case.diag_reports)
            ),
            "nccl_tests": lambda: bool(case.benchmarks),
            # a benchmark, or NCCL Inspector's records of the job's own collectives
            "bandwidth": lambda: bool(case.benchmarks or case.inspector),
            "version": lambda: bool(case.nccl_versions),
            "init": lambda: bool(case.communicators),
            "platform": lambda: self.platform.key is not None,
        }
        return checks[need]()

    # ------------------------------------------------------------------------------- helpers
    def report_host(self, source: str) -> str:
        """The host a report of the machine comes from: a run of several hosts names it in the capture
        (nvidia-smi-q.<host>.txt); otherwise the report's input stands for its host."""
        name = source.rsplit("/", 1)[-1]
        run = self.case.run
        found = next((c.host for c in run.captures if c.host and c.file == name), None) if run else None
        return found or source

    @cached_property
    def single_rank_comms(self) -> bool:
        """Every communicator of the inputs has one rank (a 1-GPU run): nothing connects to anything."""
        comms = self.case.communicators
        return bool(comms) and all(c.nranks == 1 for c in comms)

    @cached_property
    def one_gpu(self) -> bool:
        """The inputs show a one-GPU job: communicators or benchmark runs, each of one rank, and no connection
        between GPUs. Every transport between GPUs and hosts is then idle."""
        case = self.case
        comms, runs = case.communicators, case.benchmarks
        if not comms and not runs or case.connections.total:
            return False
        return all(c.nranks == 1 for c in comms) and all(
            (run.nranks or len(run.devices) or 0) == 1 and (run.ngpus or 1) == 1 for run in runs
        )

    @cached_property
    def hosts(self) -> list[str]:
        """Hosts of the job: from the log, else from nccl-tests device lines."""
        names = [h.name for h in self.case.hosts if h.name]
        if not names:
            names = sorted({d.host for run in self.case.benchmarks for d in run.devices if d.host})
        return names

    @property
    def multi_host(self) -> bool:
        if len(self.hosts) > 1 or self.case.connections.across_hosts is not None:
            return True
        return any((c.nnodes or 0) > 1 for c in self.case.communicators)

    @property
    def single_host(self) -> bool:
        """The inputs show the job on one host (not merely that they show no other: a command line alone
        shows none), and no communicator too large for one host."""
        return not self.multi_host and len(self.hosts) == 1 and not self.ranks_elsewhere

    @cached_property
    def ranks_elsewhere(self) -> list[tuple[str, int, int]]:
        """ranks_beyond_inputs of more ranks than one usual host has GPUs, largest first: the job most
        likely runs on hosts the inputs lack."""
        return sorted((c for c in self.ranks_beyond_inputs if c[1] > GPUS_PER_HOST), key=lambda c: -c[1])

    @cached_property
    def comm_groups(self) -> list[tuple[str, list[Communicator]]]:
        """Communicators with a commId, or split from one whose init is in the inputs, one by one; those
        without (NCCL < 2.16, splits of an unknown parent) merged by API and size, because they are then
        keyed by process and pointer (one rank each). Each with its label ("communicator 0x...")."""
        groups: list[tuple[str, list[Communicator]]] = []
        keyless: dict[tuple[str, int | None], list[Communicator]] = defaultdict(list)
        for comm in self.case.communicators:
            if comm.comm_id or comm.parent:
                groups.append((f"communicator {comm.comm_id or comm.id}", [comm]))
            else:
                keyless[(comm.api or "", comm.nranks)].append(comm)
        for (api, _), comms in keyless.items():
            groups.append((f"{api + ' c' if api else 'C'}ommunicators without commId", comms))
        return groups

    @cached_property
    def ranks_beyond_inputs(self) -> list[tuple[str, int, int]]:
        """On inputs of one host: (label, ranks, ranks shown) of the communicators with more ranks than the
        inputs show and no node count (one rank's log of a 16-rank job): the others may run on hosts the
        inputs lack."""
        if self.multi_host:
            return []
        found = []
        for label, comms in self.comm_groups:
            nranks = max((c.nranks or 0 for c in comms), default=0)
            shown_ranks = len({r.rank for c in comms for r in c.ranks if r.rank >= 0})
            if nranks > shown_ranks and not any(c.nnodes for c in comms):
                found.append((label, nranks, shown_ranks))
        return found

    def env(self, name: str) -> list[EnvSetting]:
        return [e for e in self.case.env if e.name == name]

    def warnings(self, family: str | None = None) -> list[NcclMessage]:
        """WARN lines (and error families logged at INFO), of one family or all."""
        return [w for w in self.case.warnings if family is None or w.family == family]

    def messages(self, family: str) -> list[NcclMessage]:
        return [m for m in self.case.messages if m.family == family]


def shown(items: Iterable[Evidence], limit: int = EVIDENCE_SHOWN) -> list[Evidence]:
    """A few representative lines: distinct lines, in input order."""
    seen: set[tuple[str, int]] = set()
    out: list[Evidence] = []
    for item in sorted(items, key=lambda e: (e.source, e.line)):
        key = (item.source, item.line)
        if key not in seen:
            seen.add(key)
            out.append(item)
        if len(out) >= limit:
            break
    return out


def shown_with(items: Iterable[Evidence], also: Iterable[Evidence], limit: int = EVIDENCE_SHOWN) -> list[Evidence]:
    """shown(items) with room kept for at least one line of `also`, lines of another kind that the claim
    stands on too (`Using network Socket` beside the probes that failed), which fill what is left."""
    extra = shown(also, limit)
    if not extra:
        return shown(items, limit)
    main = shown(items, limit - 1)
    return shown([*main, *extra[: limit - len(main)]], limit)
