"""Rules of the VERSION family: NCCL versions and CUDA drivers across the processes of one job.

Also home of `jobs()`, the partition of the processes of a Case into jobs, which ENV002 shares:
two processes belong to one job when they are ranks of one communicator with a commId, or devices
of one nccl-tests run. A file that collects several separate incidents (one short section per job)
is thereby never compared with itself across sections.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property

from ncclscope.common.data_files import data_json
from ncclscope.common.versions import nccl_version, release_tuple, version_from_code
from ncclscope.common.words import plural, ranks_named
from ncclscope.diagnose.rules.context import Context, shown
from ncclscope.diagnose.rules.registry import make_finding, rule
from ncclscope.model import Evidence, Finding, NcclMessage, Process, SocketFailure

ProcKey = tuple[str, "int | None"]  # (host, pid)


# --------------------------------------------------------------------------------------- jobs
class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[ProcKey, ProcKey] = {}

    def find(self, key: ProcKey) -> ProcKey:
        root = key
        while self.parent.setdefault(root, root) != root:
            root = self.parent[root]
        while key != root:  # path compression
            self.parent[key], key = root, self.parent[key]
        return root

    def union(self, keys: Iterable[ProcKey]) -> None:
        first: ProcKey | None = None
        for key in keys:
            root = self.find(key)
            if first is None:
                first = root
            elif root != first:
                self.parent[root] = first


@dataclass
class Job:
    """Processes known to belong to one job, and the communicators that link them."""

    processes: list[Process] = field(default_factory=list)
    comm_ids: list[str] = field(default_factory=list)
    evidence: dict[ProcKey, Evidence] = field(default_factory=dict)  # an Init line per process

    @cached_property
    def hosts(self) -> list[str]:
        return sorted({p.host for p in self.processes if p.host})


def proc_key(p: Process) -> ProcKey:
    return (p.host or "", p.pid)


def jobs(ctx: Context) -> list[Job]:
    """Groups of at least two processes linked by a shared commId or nccl-tests run.

    Processes that nothing links to another process are left out: their job is unknown. Built once per analysis.
    """
    return ctx.once("jobs", _jobs)


def _jobs(ctx: Context) -> list[Job]:
    uf = _UnionFind()
    known = {proc_key(p): p for p in ctx.case.processes if p.host or p.pid is not None}
    comm_of: dict[ProcKey, set[str]] = defaultdict(set)
    evidence: dict[ProcKey, Evidence] = {}
    for comm in ctx.case.communicators:
        if not comm.comm_id:
            continue
        members = [(r.host or "", r.pid) for r in comm.ranks if (r.host or r.pid is not None)]
        members = [m for m in members if m in known]
        uf.union(members)
        for r in comm.ranks:
            key = (r.host or "", r.pid)
            if key in known:
                comm_of[key].add(comm.comm_id)
                if r.evidence is not None:
                    evidence.setdefault(key, r.evidence)
    for run in ctx.case.benchmarks:
        members = [(d.host, d.pid) for d in run.devices if (d.host, d.pid) in known]
        uf.union(members)
    groups: dict[ProcKey, list[ProcKey]] = defaultdict(list)
    for key in known:
        groups[uf.find(key)].append(key)
    result = []
    for members in groups.values():
        if len(members) < 2:
            continue
        job = Job(processes=[known[m] for m in members])
        job.comm_ids = sorted({c for m in members for c in comm_of.get(m, ())})
        job.evidence = {m: evidence[m] for m in members if m in evidence}
        result.append(job)
    result.sort(key=lambda j: (j.hosts, len(j.processes)))
    return result


# ---------------------------------------------------------------------------------- versions
def driver_text(version: int) -> str:
    """cudaDriverVersion 12040 -> 'CUDA driver API 12.4'."""
    return f"{version // 1000}.{version % 1000 // 10}"


def host_list(hosts: Iterable[str], limit: int = 6) -> str:
    """'a, b, c' or 'a, b, c, d, e, f and 122 more' for long lists."""
    names = list(hosts)
    if len(names) <= limit:
        return ", ".join(names)
    return f"{', '.join(names[:limit])} and {len(names) - limit} more"


def _describe(procs: list[Process]) -> str:
    by_host: dict[str, list[Process]] = defaultdict(list)
    for p in procs:
        by_host[p.host or "?"].append(p)
    parts = []
    if len(by_host) > 6:
        ranks = [r for p in procs for r in p.ranks]
        detail = f", {ranks_named(ranks)}" if ranks else ""
        return f"{len(by_host)} hosts ({host_list(sorted(by_host))}; {len(procs)} processes{detail})"
    for host in sorted(by_host):
        group = by_host[host]
        ranks = [r for p in group for r in p.ranks]
        n = len(group)
        detail = plural(n, "process")
        if ranks:
            detail += f", {ranks_named(ranks)}"
        parts.append(f"{host} ({detail})")
    return ", ".join(parts)


def _sides(label: str, values: dict[str, list[Process]]) -> str:
    ordered = sorted(values.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    return "; ".join(f"{label} {value} on {_describe(procs)}" for value, procs in ordered)


def _mismatch_finding(
    job: Job, label: str, values: dict[str, list[Process]], unknown: list[Process], also: str = ""
) -> Finding:
    where = f" of communicator {job.comm_ids[0]}" if len(job.comm_ids) == 1 else " of one job"
    message = f"Processes{where} run different {label} versions: {_sides(label, values)}"
    if also:
        message += f"; {also}"
    if unknown:
        n = len(unknown)
        message += (
            f" ({plural(n, 'other process')} printed no version line: before NCCL 2.22 only rank 0"
            " prints it, so they are unknown, not different)"
        )
    procs = [p for group in values.values() for p in group]
    evidence = [job.evidence[proc_key(p)] for p in procs if proc_key(p) in job.evidence]
    # one Init line per version first: it shows host:pid and the shared commId
    first = [job.evidence[proc_key(p)] for group in values.values() for p in group[:1] if proc_key(p) in job.evidence]
    return make_finding(
        "VER001",
        "error",
        message,
        evidence=shown(first) or shown(evidence),
        evidence_count=len(evidence),
        hosts=sorted({p.host for p in procs if p.host}),
        ranks=sorted({r for p in procs for r in p.ranks}),
    )


def _version_mismatch_warnings(ctx: Context) -> list[NcclMessage]:
    seen: set[tuple[str, int]] = set()
    warns: list[NcclMessage] = []
    for w in ctx.warnings(family="version_mismatch"):
        key = (w.evidence.source, w.evidence.line)
        if key not in seen:
            seen.add(key)
            warns.append(w)
    return warns


def _warn_pairs(warns: list[NcclMessage]) -> str:
    pairs: set[str] = set()
    for w in warns:
        f = w.fields
        ver, other_ver = version_from_code(f.get("version_code")), version_from_code(f.get("other_version_code"))
        if ver and other_ver:
            a, b = sorted([(str(f.get("rank")), ver), (str(f.get("other_rank")), other_ver)])
            pairs.add(f"rank {a[0]} has {a[1]}, rank {b[0]} has {b[1]}")
        else:
            pairs.add(w.message)
    return "; ".join(sorted(pairs)[:4]) + (" ..." if len(pairs) > 4 else "")


def _warn_finding(warns: list[NcclMessage]) -> Finding:
    hosts = sorted({w.host for w in warns if w.host})
    return make_finding(
        "VER001",
        "error",
        f"NCCL stopped the communicator init because ranks run different NCCL versions: {_warn_pairs(warns)}"
        f" ({len(warns)} WARN line{'s' if len(warns) != 1 else ''} on {host_list(hosts) or 'unknown hosts'})",
        evidence=shown(w.evidence for w in warns),
        evidence_count=len(warns),
        hosts=hosts,
    )


def _benchmark_mismatches(ctx: Context) -> Iterable[Finding]:
    for run in ctx.case.benchmarks:
        if run.nccl_headers is None or run.nccl_library is None or run.nccl_headers == run.nccl_library:
            continue
        headers, library = version_from_code(run.nccl_headers), version_from_code(run.nccl_library)
        text = (
            f"# nccl-tests version {run.nccl_tests_version or '?'} "
            f"nccl-headers={run.nccl_headers} nccl-library={run.nccl_library}"
        )
        hosts = sorted({d.host for d in run.devices if d.host})
        yield make_finding(
            "VER001",
            "error",
            f"nccl-tests {run.nccl_tests_version or ''} ({run.collective or 'benchmark'}) was built against NCCL"
            f" {headers} headers but runs with the NCCL {library} library"
            f" (nccl-headers={run.nccl_headers} nccl-library={run.nccl_library})",
            evidence=[Evidence(source=run.source, line=run.line, text=text)],
            evidence_count=1,
            hosts=hosts,
            fix=(
                "Rebuild nccl-tests against the NCCL that runs (make NCCL_HOME=<that NCCL>), or make the loader find"
                " the NCCL it was built with: check LD_LIBRARY_PATH and `ldd all_reduce_perf | grep nccl` on every"
                " host."
            ),
        )


@rule("VER001", "mixed-versions", severity="error")
def mixed_versions(ctx: Context) -> Iterable[Finding]:
    """Processes of one job run different NCCL versions or CUDA drivers, NCCL reported `Mismatched NCCL
    version detected`, or nccl-tests was built against other NCCL headers than the library it runs.

    Processes are compared only within one job (ranks of a communicator with a shared commId, or
    devices of one nccl-tests run), so a file that collects separate incidents is not read as one
    mixed job. Before NCCL 2.22 only rank 0 prints the version line: processes without one are
    unknown, not different. Versions differing only in the `+cudaX.Y` build suffix count as equal.

    Why: NCCL requires the same version on every rank; since 2.23 init fails with `Mismatched NCCL
    version detected`, older versions can hang or corrupt data, and maintainers suspect mixed
    versions first in unexplained multi-node hangs. Different CUDA drivers across hosts point to
    hosts that were not provisioned alike. A benchmark whose headers and library differ measures
    another NCCL than the one it was built for.

    Fix: Install the same NCCL (and driver) on every host: use one container image, pin
    nvidia-nccl-cu* in every Python environment, check LD_LIBRARY_PATH and `ldd` of the binary, and
    rebuild nccl-tests against the NCCL in use.

    Sources: NCCL src/init.cc (`Mismatched NCCL version detected`; the version banner, printed by rank
    0 only before 2.22); NVIDIA/nccl#354 (kwen2501); NVIDIA/nccl#1328 (sjeaugey); nccl-tests src/util.cu
    (`nccl-headers=`, `nccl-library=`)
    """
    warns = _version_mismatch_warnings(ctx)
    yield from _benchmark_mismatches(ctx)
    for job in jobs(ctx):
        versions: dict[str, list[Process]] = defaultdict(list)
        drivers: dict[str, list[Process]] = defaultdict(list)
        unknown: list[Process] = []
        for p in job.processes:
            v = nccl_version(p.nccl_version)
            if v:
                versions[v].append(p)
            elif p.ranks:
                unknown.append(p)
            if p.cuda_driver_version:
                drivers[driver_text(p.cuda_driver_version)].append(p)
        if len(versions) > 1:
            also = []
            if len(drivers) > 1:
                also.append(
                    "the CUDA drivers differ too: "
                    + ", ".join(
                        f"{value} on {host_list(sorted({p.host for p in procs if p.host})) or '?'}"
                        for value, procs in sorted(drivers.items())
                    )
                )
            keys = {proc_key(p) for p in job.processes}
            mine = [w for w in warns if (w.host or "", w.pid) in keys]
            if mine:
                warns = [w for w in warns if w not in mine]
                also.append(f"NCCL stopped init with `Mismatched NCCL version detected` ({len(mine)} WARN lines)")
            finding = _mismatch_finding(job, "NCCL", dict(versions), unknown, "; ".join(also))
            if mine:
                finding.evidence = shown([w.evidence for w in mine] + finding.evidence)
                finding.evidence_count += len(mine)
            yield finding
        elif len(drivers) > 1:
            yield _mismatch_finding(job, "CUDA driver", dict(drivers), [])
    if warns:
        yield _warn_finding(warns)
    yield from _releases_told_by_callers(ctx)


def _releases_told_by_callers(ctx: Context) -> Iterable[Finding]:
    """Where no version line says it: the processes whose socket WARNs connect to one address (one job's bootstrap
    root) and name functions of releases that never overlap (data/release_markers.json)."""
    markers = {m["caller"]: m for m in data_json("release_markers.json")["socket_callers"]}
    versioned = {proc_key(p) for p in ctx.case.processes if nccl_version(p.nccl_version)}
    by_peer: dict[str, dict[str, list[SocketFailure]]] = defaultdict(lambda: defaultdict(list))
    for failure in ctx.case.socket_failures:
        caller = failure.caller or ""
        if caller in markers and failure.peer and (failure.host or "", failure.pid) not in versioned:
            by_peer[failure.peer][caller].append(failure)
    for peer, by_caller in by_peer.items():
        spans = {caller: _span(markers[caller]) for caller in by_caller}
        callers = sorted(by_caller, key=lambda c: spans[c][0])
        if not any(_apart(spans[a], spans[b]) for a in callers for b in callers if a != b):
            continue
        parts = []
        for caller in callers:
            hosts = sorted({f.host for f in by_caller[caller] if f.host})
            parts.append(
                f"{caller} ({markers[caller]['file']}, {_span_text(markers[caller])}) on "
                + (", ".join(hosts) if hosts else "a host not named")
            )
        evidence = [by_caller[caller][0].evidence for caller in callers]
        yield make_finding(
            "VER001",
            "error",
            f"Processes that connect to one address ({peer}) run different NCCL releases, as the functions their"
            f" socket WARNs name tell (no version line says it): {'; '.join(parts)}",
            evidence=shown(evidence),
            evidence_count=sum(len(found) for found in by_caller.values()),
            hosts=sorted({f.host for found in by_caller.values() for f in found if f.host}),
        )


def _span(marker: dict) -> tuple[tuple[int, ...], tuple[int, ...]]:
    return release_tuple(marker["since"]) or (0,), release_tuple(marker.get("until")) or (99,)


def _apart(a: tuple[tuple[int, ...], tuple[int, ...]], b: tuple[tuple[int, ...], tuple[int, ...]]) -> bool:
    """The release spans share no release."""
    return a[1] < b[0] or b[1] < a[0]


def _span_text(marker: dict) -> str:
    until = marker.get("until")
    return f"NCCL {marker['since']} to {until}" if until else f"NCCL {marker['since']} or newer"
