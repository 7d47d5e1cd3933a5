"""Rules of the BENCH family (see ../shared/knowledge/rule-catalog.md): what nccl-tests results say.

Peak bandwidth is judged by ncclscope.platforms (ctx.bandwidth, against data/expected_busbw.json);
the rules here turn those judgements and the tables' own columns into findings: low busbw, sizes
too small to judge, wrong results, runs that were not one job, failures, and slow small messages.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable

from ncclscope.model import BandwidthJudgement, BenchmarkRow, BenchmarkRun, Evidence, Finding, TestFailure
from ncclscope.platforms import cpu_run, judging, latency_references, run_facts, spec_by_key, unjudged_need
from ncclscope.platforms import data_check as data_check_reference
from ncclscope.rules.context import Context, shown
from ncclscope.rules.error_strings import test_failure_meaning
from ncclscope.rules.registry import make_finding, rule

OLD_ERROR_LAYOUTS = frozenset({"v1", "v2.0-2.11"})  # the `error` column holds the largest absolute error
# NCCL_* settings that switch a path off or cap what NCCL may use (landscape 2.E.25)
THROTTLING_ENV = {
    "NCCL_P2P_DISABLE": "1",
    "NCCL_SHM_DISABLE": "1",
    "NCCL_IB_DISABLE": "1",
    "NCCL_NVLS_ENABLE": "0",
    "NCCL_NET_GDR_LEVEL": None,
    "NCCL_P2P_LEVEL": None,
    "NCCL_MAX_NCHANNELS": None,
    "NCCL_MAX_CTAS": None,
    "NCCL_ALGO": None,
    "NCCL_PROTO": None,
}
FEW_CHANNELS = 2
ALGORITHM_NAMES = {"nvls": "NVLS all_reduce", "ring": "ring"}


# ---------------------------------------------------------------------------------- helpers
def _size(size: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} B"


def _gbs(value: float | None) -> str:
    if value is None:
        return "?"
    return f"{value:.1f}".rstrip("0").rstrip(".") if value >= 1 else f"{value:.2f}"


def _row_evidence(run: BenchmarkRun, rows: Iterable[BenchmarkRow]) -> list[Evidence]:
    """nccl-tests rows keep only their line number; the text says what the row holds."""
    out = []
    for r in rows:
        oop, inp = r.out_of_place, r.in_place
        text = (
            f"{r.size} B {r.type} {r.redop}: time {_gbs(oop.time_us)}/{_gbs(inp.time_us)} us, "
            f"busbw {_gbs(oop.busbw)}/{_gbs(inp.busbw)} GB/s (out-of-place/in-place)"
        )
        out.append(Evidence(source=run.source, line=r.line, text=text))
    return out


def _run_evidence(run: BenchmarkRun) -> list[Evidence]:
    return [run.evidence] if run.evidence else []


def _run_of(ctx: Context, judgement: BandwidthJudgement) -> BenchmarkRun | None:
    for run in ctx.case.benchmarks:
        if run.source == judgement.source and run.line == judgement.line:
            return run
    return None


def _largest_rows(run: BenchmarkRun) -> list[BenchmarkRow]:
    if not run.rows:
        return []
    size = max(r.size for r in run.rows)
    return [r for r in run.rows if r.size == size]


def _hosts(run: BenchmarkRun) -> list[str]:
    return sorted({d.host for d in run.devices if d.host})


def _where(run: BenchmarkRun) -> str:
    return f"{run.collective or 'nccl-tests'} run at {run.source}:{run.line}"


# ----------------------------------------------------------------------------------- causes
def _causes(ctx: Context, multi_host: bool) -> tuple[list[str], list[Evidence]]:
    """What else in the inputs would explain low bandwidth (for the BW001 message)."""
    case = ctx.case
    causes: list[str] = []
    evidence: list[Evidence] = []
    conns = case.connections
    shm = {k: n for k, n in conns.by_transport.items() if k.upper().startswith("SHM")}
    if shm:
        causes.append(f"{sum(shm.values())} connection line(s) go through host memory ({', '.join(sorted(shm))})")
        evidence += [conns.examples[k] for k in sorted(shm) if k in conns.examples]
    far = _far_gpu_pairs(ctx)
    if far:
        causes.append(f"GPU pairs without NVLink through the CPU in the topology matrix ({far})")
    if multi_host:
        sockets = sorted({p.host for p in case.processes if p.network == "Socket" and p.host})
        socket_lines = conns.by_transport.get("NET/Socket", 0)
        if sockets or socket_lines:
            causes.append(
                f"inter-host traffic over TCP sockets (NET/Socket{' on ' + ', '.join(sockets) if sockets else ''})"
            )
            if "NET/Socket" in conns.examples:
                evidence.append(conns.examples["NET/Socket"])
        no_gdr = sorted(
            h.name for h in case.hosts if h.gdr in ("off", "mixed") and set(h.networks or ["?"]) != {"Socket"}
        )
        if conns.net_without_gdr or no_gdr:
            where = f" on {', '.join(no_gdr)}" if no_gdr else ""
            causes.append(f"{conns.net_without_gdr} NET connection line(s) without GPUDirect RDMA{where}")
    overrides = []
    for e in case.env:
        wanted = THROTTLING_ENV.get(e.name, "")
        if e.name in THROTTLING_ENV and (wanted is None or e.value.strip() == wanted):
            if e.name == "NCCL_IB_DISABLE" and not multi_host:
                continue
            overrides.append(e)
    if overrides:
        causes.append("debug overrides set: " + ", ".join(f"{e.name}={e.value}" for e in overrides))
        evidence += [e.evidence for e in overrides]
    few = [c for c in case.communicators if c.channels is not None and c.channels <= FEW_CHANNELS]
    if few:
        causes.append(f"only {min(c.channels or 0 for c in few)} coll channel(s) in {len(few)} communicator(s)")
        evidence += [c.evidence for c in few if c.evidence]
    return causes, evidence


def _far_gpu_pairs(ctx: Context) -> str:
    pairs = []
    for topo in ctx.case.topologies:
        for i, a in enumerate(topo.gpus):
            for b in topo.gpus[i + 1 :]:
                cell = topo.links.get(a, {}).get(b, "")
                if cell in ("SYS", "SOC", "NODE", "PHB"):
                    pairs.append(f"{a}-{b} {cell}")
    if len(pairs) > 4:
        return f"{', '.join(pairs[:4])} and {len(pairs) - 4} more"
    return ", ".join(pairs)


# -------------------------------------------------------------------------------------- BW001
@rule("BW001", "low-busbw", severity="error", needs=["nccl_tests"])
def low_busbw(ctx: Context) -> Iterable[Finding]:
    """Peak busbw (at the largest size of a run, never the "Avg bus bandwidth" line) is below 80% of
    what the detected platform reaches for that collective, GPU count and likely algorithm (NVLS for
    all_reduce on NVSwitch hosts, ring otherwise, the NICs across hosts). Error below 50%, warning
    below 80%; a run that stops between 128 MiB and 1 GiB only counts below 50%, as a warning. When
    the GPU or the figures are unknown, one info finding says what the inputs would need. Tables
    measured between CPU processes (the built-in benchmark on gloo) are not judged.

    Why: busbw is the figure that should sit near the hardware's unidirectional link rate: ~370 GB/s
    ring or ~480 GB/s NVLS on 8x H100, ~24 GB/s per HDR NIC across hosts. A run far below it means
    a transport fell back (SHM, sockets), GPUDirect RDMA is off, NVLink or a NIC is degraded, or a
    debug variable caps NCCL. Comparing with bidirectional marketing numbers (900 GB/s for NVLink4)
    or with the average over all sizes makes healthy systems look broken; this rule does neither.

    Fix: Read the related findings first (transport, GDR, topology, environment): they usually name
    the cause. Otherwise re-run with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV,GRAPH,NET,TUNING and
    `nvidia-smi topo -m`, compare with NCCL_ALGO=RING, and test hosts in pairs to find a bad one.

    Sources: sjeaugey nccl-tests#212; nccl#1455; nccl#2140; stas00 ml-engineering network/README.md;
    sjeaugey nccl#412; AddyLaddy nccl-tests#290; sjeaugey nccl#1442 (900 GB/s is both directions);
    data/expected_busbw.json (every figure with its source)
    """
    limits = judging()
    unjudged: list[tuple[BandwidthJudgement, BenchmarkRun]] = []
    for j in ctx.bandwidth:
        run = _run_of(ctx, j)
        if run is None or cpu_run(run) or j.nranks == 1 or j.size < limits["provisional_min_bytes"]:
            continue
        if j.expected_busbw is None:
            unjudged.append((j, run))
            continue
        if j.ratio is None:
            continue
        full = j.size >= limits["judge_min_bytes"]
        if j.ratio < limits["error_below"]:
            severity = "error" if full else "warning"
        elif j.ratio < limits["warning_below"] and full:
            severity = "warning"
        else:
            continue
        yield _low_finding(ctx, j, run, severity)  # type: ignore[arg-type]
    if unjudged:
        yield _unjudged_finding(ctx, unjudged)


def _low_finding(ctx: Context, j: BandwidthJudgement, run: BenchmarkRun, severity: str) -> Finding:
    facts = run_facts(run, ctx.platform)
    multi_host = bool(facts and (facts.hosts or 1) > 1)
    causes, cause_evidence = _causes(ctx, multi_host)
    ratio = j.ratio or 0.0
    algorithm = ALGORITHM_NAMES.get(j.algorithm or "", j.algorithm)
    message = (
        f"{j.collective} on {j.platform}: peak busbw {_gbs(j.measured_busbw)} GB/s at {_size(j.size)} is "
        f"{ratio:.0%} of the {_gbs(j.expected_busbw)} GB/s expected ({algorithm}; {j.expectation_source})"
    )
    if "floor" in j.verdict:
        message += ", itself a floor for this fabric"
    if j.size < judging()["judge_min_bytes"]:
        message += f"; the run stops at {_size(j.size)}, so this is a lower bound"
    if causes:
        message += "; the inputs show a likely cause: " + "; ".join(causes)
    rows = _largest_rows(run)
    evidence = _row_evidence(run, rows) + _run_evidence(run) + shown(cause_evidence, 3)
    return make_finding(
        "BW001",
        severity,  # type: ignore[arg-type]
        message,
        evidence=evidence,
        evidence_count=len(evidence),
        hosts=_hosts(run),
    )


def _unjudged_finding(ctx: Context, items: list[tuple[BandwidthJudgement, BenchmarkRun]]) -> Finding:
    needs: list[str] = []
    for j, _run in items:
        need = unjudged_need(ctx.case, ctx.platform, j)
        if need and need not in needs:
            needs.append(need)
    runs = ", ".join(f"{j.collective} at {j.source}:{j.line} ({_gbs(j.measured_busbw)} GB/s)" for j, _ in items[:4])
    more = f" and {len(items) - 4} more" if len(items) > 4 else ""
    message = (
        f"Peak busbw of {len(items)} run(s) could not be compared with an expectation ({runs}{more}); "
        f"it would need {'; '.join(needs) or 'a reference figure for this hardware'}"
    )
    evidence = [e for _, run in items for e in _run_evidence(run)]
    return make_finding(
        "BW001",
        "info",
        message,
        evidence=shown(evidence),
        evidence_count=len(evidence),
        hosts=sorted({h for _, run in items for h in _hosts(run)}),
        fix="Add what the message names (nccl-tests output with its header and device lines, `nvidia-smi topo -m`, "
        "an NCCL_DEBUG=INFO log); then ncclscope can compare peak busbw with a sourced reference figure.",
    )


# -------------------------------------------------------------------------------------- BW002
@rule("BW002", "sizes-too-small", severity="info", needs=["nccl_tests"])
def sizes_too_small(ctx: Context) -> Iterable[Finding]:
    """The largest size of an nccl-tests run is under 1 GiB, so its peak bandwidth cannot be judged.

    Why: busbw grows with the message size and only reaches the hardware's plateau at 1-8 GiB; at
    256 MiB a healthy 8x H100 is still below peak ("256M is too small to reach peak bandwidth").
    A sweep that stops early looks slow without being slow. (Not said of CPU-process runs on gloo,
    which are small by design.)

    Fix: Re-run up to 8 GiB (`all_reduce_perf -b 8 -e 8G -f 2`, or `-b 8G -e 8G` for a single size
    as health checks do).

    Sources: sjeaugey nccl-tests#212; stas00 ml-engineering network/README.md (12.5% of NIC spec at
    16 MiB, ~70% at 1 GiB on 4-node B200); Azure NHC (single 8G/16G size)
    """
    limit = judging()["judge_min_bytes"]
    for run in ctx.case.benchmarks:
        if not run.rows or run.nranks == 1 or cpu_run(run):
            continue
        largest = max(r.size for r in run.rows)
        if largest >= limit:
            continue
        if run.failures and (run.max_bytes or 0) > largest:
            continue  # it failed before reaching its largest size: BW005 says why
        rows = _largest_rows(run)
        busbw = max((max(r.out_of_place.busbw or 0, r.in_place.busbw or 0) for r in rows), default=0.0)
        requested = f" (maxBytes {run.max_bytes})" if run.max_bytes and run.max_bytes != largest else ""
        yield make_finding(
            "BW002",
            "info",
            f"{_where(run)} stops at {_size(largest)}{requested}, below the {_size(limit)} needed to reach peak, "
            f"so its {_gbs(busbw)} GB/s busbw there cannot be judged as peak bandwidth",
            evidence=_row_evidence(run, rows[:1]) + _run_evidence(run),
            hosts=_hosts(run),
        )


# -------------------------------------------------------------------------------------- BW003
@rule("BW003", "wrong-results", severity="error", needs=["nccl_tests"])
def wrong_results(ctx: Context) -> Iterable[Finding]:
    """nccl-tests found wrong data: `#wrong` > 0, an old-layout `error` column above the tolerance of
    its data type, or the footer `Out of bounds values : N FAILED`.

    Why: Wrong elements mean data corruption on the path between GPUs (PCIe ACS/IOMMU redirection,
    a faulty NVLink, NIC or GPU memory, a driver or NCCL bug), not a slow path. Training on such a
    system silently produces wrong gradients. Before nccl-tests 2.13 the `error` column is the
    largest absolute difference, and small float rounding (e.g. 4e-07 for float) is within the
    tolerance nccl-tests itself applies (1e-5 for float, 1e-2 for half and bfloat16, exact for
    integers); only values above it count.

    Fix: Re-run to see whether it repeats, then bisect hosts and GPU pairs; check ACS
    (`lspci -vvv | grep ACSCtl`), dmesg Xid errors, `nvidia-smi -q` ECC counters and
    `dcgmi diag -r 3`. Take the host out of service until it passes.

    Sources: nccl-tests#179; Azure NHC (FAILED maps to NHC2010); nccl-tests src/common.cu
    DeltaMaxValue (tolerances); NCCL gpu_troubleshooting.rst (PCI ACS)
    """
    checks = data_check_reference()
    for run in ctx.case.benchmarks:
        cells = []
        for row in run.rows:
            for place, m in (("out-of-place", row.out_of_place), ("in-place", row.in_place)):
                if m.wrong is not None and _is_wrong(run.layout, row.type, m.wrong, checks):
                    cells.append((row, place, m.wrong))
        failed = run.out_of_bounds_ok is False or (run.out_of_bounds or 0) > 0
        if not cells and not failed:
            continue
        old = run.layout in OLD_ERROR_LAYOUTS
        what = "largest error" if old else "#wrong"
        shown_cells = ", ".join(f"{what} {v:g} at {_size(r.size)} {p}" for r, p, v in cells[:4])
        more = f" and {len(cells) - 4} more" if len(cells) > 4 else ""
        parts = [f"{len(cells)} result cell(s) wrong ({shown_cells}{more})"] if cells else []
        if failed:
            parts.append(f"footer 'Out of bounds values : {run.out_of_bounds} FAILED'")
        rows = list({r.line: r for r, _, _ in cells}.values())
        evidence = _row_evidence(run, rows[:4]) + _run_evidence(run)
        yield make_finding(
            "BW003",
            "error",
            f"{_where(run)} on {_gpu_summary(run)}: " + "; ".join(parts),
            evidence=evidence,
            evidence_count=len(rows) + len(_run_evidence(run)),
            hosts=_hosts(run),
        )


def _is_wrong(layout: str, dtype: str, value: float, checks: dict) -> bool:
    """Old layouts print the largest absolute error, judged against nccl-tests' own tolerance."""
    old = layout in OLD_ERROR_LAYOUTS or (layout == "headerless" and value != int(value))
    if not old:
        return value > 0
    tolerance = checks["tolerance"].get(dtype.lower(), checks["tolerance_other_types"])
    return value > tolerance


def _gpu_summary(run: BenchmarkRun) -> str:
    names = sorted({d.name for d in run.devices})
    if not names:
        return f"{run.nranks or '?'} ranks"
    return f"{len(run.devices)}x {names[0]}" + (f" and {len(names) - 1} other model(s)" if len(names) > 1 else "")


# -------------------------------------------------------------------------------------- BW004
@rule("BW004", "not-one-job", severity="error", needs=["nccl_tests"])
def not_one_job(ctx: Context) -> Iterable[Finding]:
    """Several processes each ran their own nccl-tests job: every one prints its own header and a
    `Rank  0` device line (their tables interleaved, or on different hosts), or a 1-rank run shows
    busbw 0 with non-zero algbw while the inputs show several processes. nccl-tests was started by a
    launcher without being built with MPI, so each process measured only itself.

    Why: Without MPI=1 each process creates its own communicator: no data crosses processes or
    hosts, so the figures say nothing about the network (or, with one GPU per process, nothing at
    all: busbw is 0 by definition).

    Fix: Rebuild nccl-tests with MPI support (`make MPI=1 MPI_HOME=/path/to/mpi`) and start it with
    mpirun/srun; the header then shows all ranks in one `# Using devices` list.

    Sources: sjeaugey nccl-tests#182; nccl-tests#294; xxrjun/nccl-tests-cluster README
    (Troubleshooting); formats.md C.1
    """
    flagged: set[tuple[str, int]] = set()
    for group in _same_command_groups(ctx):
        if len(group) < 2:
            continue
        owners = {(d.host, d.pid) for run in group for d in run.devices}
        hosts = sorted({h for h, _ in owners})
        if len(owners) < 2 or not (len(hosts) > 1 or _interleaved(group)):
            continue
        flagged.update((run.source, run.line) for run in group)
        n = group[0].nranks
        who = ", ".join(f"{h}:{p}" for h, p in sorted(owners, key=str))
        crossed = "processes or hosts" if len(hosts) > 1 else "processes"
        yield make_finding(
            "BW004",
            "error",
            f"{len(group)} separate {group[0].collective or 'nccl-tests'} runs in {group[0].source}, each printing "
            f"its own header and 'Rank  0' with {n} rank(s) (processes {who}): nccl-tests was not built with "
            f"MPI, so no traffic crossed {crossed}",
            evidence=shown([e for run in group for e in _run_evidence(run)]),
            evidence_count=len(group),
            hosts=hosts,
        )
    processes = {(p.host, p.pid) for p in ctx.case.processes if p.pid is not None}
    for run in ctx.case.benchmarks:
        if (run.source, run.line) in flagged or run.nranks != 1 or not run.rows:
            continue
        zero = all((r.out_of_place.busbw or 0) == 0 and (r.in_place.busbw or 0) == 0 for r in run.rows)
        moving = any((r.out_of_place.algbw or 0) > 0 for r in run.rows)
        if zero and moving and (len(processes) > 1 or len(ctx.hosts) > 1):
            yield make_finding(
                "BW004",
                "error",
                f"{_where(run)} has 1 rank (busbw 0, algbw up to "
                f"{_gbs(max(r.out_of_place.algbw or 0 for r in run.rows))} GB/s) while the inputs show "
                f"{max(len(processes), len(ctx.hosts))} processes/hosts: each process ran alone",
                evidence=_run_evidence(run) + _row_evidence(run, _largest_rows(run)[:1]),
                hosts=_hosts(run),
            )


def _same_command_groups(ctx: Context) -> list[list[BenchmarkRun]]:
    """Single-process runs of one source that show a rank 0 and were started with the same parameters."""
    groups: dict[tuple, list[BenchmarkRun]] = defaultdict(list)
    for run in ctx.case.benchmarks:
        pids = {(d.host, d.pid) for d in run.devices}
        if not run.rows or len(pids) != 1 or not any(d.rank == 0 for d in run.devices):
            continue
        key = (run.source, run.collective, run.nthreads, run.ngpus, run.min_bytes, run.max_bytes, run.nranks)
        groups[key].append(run)
    return list(groups.values())


def _interleaved(runs: list[BenchmarkRun]) -> bool:
    spans = sorted((min(r.line for r in run.rows), max(r.line for r in run.rows)) for run in runs)
    return any(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:], strict=False))


# -------------------------------------------------------------------------------------- BW005
@rule("BW005", "test-failure", severity="error", needs=["nccl_tests"])
def test_failure(ctx: Context) -> Iterable[Finding]:
    """nccl-tests stopped with `Test NCCL failure`, `Test CUDA failure` or `Test timeout`; the quoted
    cause is decoded (`system not yet initialized` = fabric manager not running, out of memory,
    unhandled cuda/system error, remote process exited ...).

    Why: A failed run measured nothing past the failing size, and the cause is usually a setup
    problem with a known fix rather than a bandwidth problem.

    Fix: Follow the decoded cause in the message; for `unhandled ... error` read NCCL's last WARN
    (printed after the '/') and re-run with NCCL_DEBUG=INFO to see the lines before it.

    Sources: formats.md C.10 (error shapes); NCCL troubleshooting.rst and
    runtime_and_mpi_issues.rst; NCCL networking_troubleshooting.rst (ibv_create_qp, memlock)
    """
    for run in ctx.case.benchmarks:
        if not run.failures:
            continue
        causes: dict[str, list[TestFailure]] = {}
        for failure in run.failures:
            if failure.kind == "timeout":
                causes.setdefault("Test timeout", []).append(failure)
            elif failure.kind != "unwind":
                causes.setdefault(failure.message, []).append(failure)
        if not causes:  # only the unwinding lines were pasted
            causes[run.failures[0].evidence.text.strip()] = list(run.failures)
        hosts = sorted({f.host for f in run.failures if f.host and f.kind != "unwind"})
        for what, failures in causes.items():
            yield make_finding(
                "BW005",
                "error",
                f"{_where(run)} failed on {', '.join(hosts) or 'some rank'}"
                + (f" after {_size(max(r.size for r in run.rows))}" if run.rows else "")
                + f": '{what[:200]}' - {test_failure_meaning(what)}",
                evidence=shown(
                    [f.evidence for f in failures] + [f.evidence for f in run.failures if f not in failures]
                ),
                evidence_count=len(run.failures),
                hosts=hosts,
            )


# -------------------------------------------------------------------------------------- BW006
@rule("BW006", "latency-high", severity="warning", needs=["nccl_tests"])
def latency_high(ctx: Context) -> Iterable[Finding]:
    """Small messages (up to 1 KiB) take far longer than the fabric should need: the median time
    over those sizes is above the bound of data/expected_busbw.json (100 us inside one host, 150 us
    across hosts; about three times the slowest published reference). GPU runs only: CPU processes
    on gloo have no such bound.

    Why: Small-message time is latency: launch overhead, proxy threads, network round trips. A large
    value points at CPU contention or bad affinity, a TCP/socket path, an oversubscribed or
    throttled GPU, or blocking options (-z), and it hurts every small collective of a training job.

    Fix: Check CPU affinity (bind ranks to the GPU's NUMA node), that no other process shares the
    GPUs, that NCCL uses NVLink/IB rather than sockets, and compare with CUDA graphs (-G) to
    separate launch cost from communication.

    Sources: superbench tests/data/nccl_allreduce.log (34-36 us, 8x A100); nccl#1259; nccl#1940;
    nccl#1244 (46-48 us, 2 nodes); nccl#1984 (aggregation changes what time means)
    """
    references = latency_references()
    for run in ctx.case.benchmarks:
        if (run.nranks is not None and run.nranks <= 1) or cpu_run(run):
            continue
        facts = run_facts(run, ctx.platform)
        if facts is None or not facts.nranks or facts.nranks < 2:
            continue
        limit = max(ref["max_size_bytes"] for ref in references)
        small = [r for r in run.rows if 0 < r.size <= limit and r.count > 0]
        times = [t for t in (_best_time(r) for r in small) if t is not None]
        if not times:
            continue
        median = statistics.median(times)
        ref = _latency_reference(ctx, references, (facts.hosts or 1) > 1)
        if median <= ref["warn_above_us"]:
            continue
        low, high = ref["reference_us"]
        yield make_finding(
            "BW006",
            "warning",
            f"{_where(run)} on {facts.nranks} ranks ({ref['fabric']}): small messages ({_size(small[0].size)}-"
            f"{_size(small[-1].size)}) take {median:.1f} us (median), above the {ref['warn_above_us']} us bound; "
            f"published references are {low}-{high} us ({ref['source'].split(';')[0]})",
            evidence=_row_evidence(run, small[:3]) + _run_evidence(run),
            evidence_count=len(small),
            hosts=_hosts(run),
        )


def _best_time(row: BenchmarkRow) -> float | None:
    values = [t for t in (row.out_of_place.time_us, row.in_place.time_us) if t is not None]
    return min(values) if values else None


def _latency_reference(ctx: Context, references: list[dict], multi_host: bool) -> dict:
    if multi_host:
        return next(r for r in references if r["hosts"] != 1)
    nvlink = bool(ctx.platform.nvlink_links) or str(_link_of(ctx)).startswith("NVLink")
    return next(r for r in references if r["hosts"] == 1 and r["nvlink"] == nvlink)


def _link_of(ctx: Context) -> str | None:
    spec = spec_by_key(ctx.platform.key)
    return spec.get("link") if spec else None
