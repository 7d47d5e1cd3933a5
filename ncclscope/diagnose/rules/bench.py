"""Rules of the BENCH family about bandwidth: BW001 (low busbw for the platform), BW002 (sizes too
small to judge) and BW006 (small-message time too high). Runs that measured wrong data, were not one
job, or failed are in bench_results.py."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ncclscope.common.words import exact_size
from ncclscope.diagnose.bandwidth import unjudged_need
from ncclscope.diagnose.expectations import figure, judging, latency_references, reference, spec_by_key
from ncclscope.diagnose.platform import cpu_run
from ncclscope.diagnose.rules.bench_common import (
    gbs_text,
    largest_rows,
    row_evidence,
    run_evidence,
    run_hosts,
    run_label,
    run_of,
)
from ncclscope.diagnose.rules.context import Context, shown
from ncclscope.diagnose.rules.job_collectives import job_low_busbw, job_sizes_too_small
from ncclscope.diagnose.rules.registry import make_finding, rule
from ncclscope.diagnose.run_expectation import run_facts
from ncclscope.model import BandwidthJudgement, BenchmarkRow, BenchmarkRun, Evidence, Finding

if TYPE_CHECKING:
    from ncclscope.diagnose.reference_data import LatencyReference

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
@rule("BW001", "low-busbw", severity="error", needs=["bandwidth"])
def low_busbw(ctx: Context) -> Iterable[Finding]:
    """Peak busbw (at the largest size of a run, never the "Avg bus bandwidth" line) is below 80% of
    what the detected platform reaches for that collective, GPU count and likely algorithm (NVLS for
    all_reduce on NVSwitch hosts, ring otherwise, the NICs across hosts). Error below 50%, warning
    below 80%; a run that stops between 128 MiB and 1 GiB only counts below 50%, as a warning. Against a
    floor (the NICs' speed or count not in the inputs: the slowest reference NIC's figure) the error is
    below 25% (floor_error_below), since a healthy NIC of half that rate would reach about half of it. When
    the GPU or the figures are unknown, only what no platform explains is said (a warning): a peak under
    half of what one 100G RDMA NIC carries at 128 MiB and more, or a time per call that stays at
    milliseconds from 1 MiB to 256 MiB and beyond; otherwise EVD001 says what the inputs would need.
    Tables measured between CPU processes (the built-in benchmark on gloo) are not judged. The job's own
    collectives, as NCCL Inspector timed them, are judged the same way at their largest size from 128 MiB on (the
    best rank's median: the rank the others waited for), as a warning below 50% at most, since compute shares the
    GPU inside a job.

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
        run = run_of(ctx, j)
        if run is None or cpu_run(run) or j.nranks == 1 or j.size < limits.provisional_min_bytes:
            continue
        if j.expected_busbw is None:
            unjudged.append((j, run))
            continue
        if j.ratio is None:
            continue
        full = j.size >= limits.judge_min_bytes
        error_below = limits.floor_error_below if j.floor else limits.error_below
        if j.ratio < error_below:
            severity = "error" if full else "warning"
        elif j.floor and j.ratio < limits.error_below:
            # against a floor (the NICs' speed or count not in the inputs) a healthy NIC of half the slowest
            # reference's rate could give this: a warning until the NIC details show how far short it is
            severity = "warning"
        elif j.ratio < limits.warning_below and full:
            severity = "warning"
        else:
            continue
        yield _low_finding(ctx, j, run, severity)  # type: ignore[arg-type]
    for j, run in unjudged:
        # no platform to compare with: only what no platform explains is said; what could not be judged is
        # EVD001's to say, not a BW001 finding that judges nothing
        verdict = _below_any_fabric(j, run) or _flat_time(run)
        if verdict:
            yield verdict
        else:
            _cannot_compare(ctx, j, run)
    yield from job_low_busbw(ctx)


def _below_any_fabric(j: BandwidthJudgement, run: BenchmarkRun) -> Finding | None:
    """Peak busbw, at a size where every fabric is near its plateau, under half of what one 100G RDMA NIC
    carries (the slowest per-NIC reference, data/expected_busbw.json): below any NVLink, PCIe P2P or RDMA
    path of the last ten years, whatever the platform."""
    limits = judging()
    slowest = min(figure(e.busbw_gbs)[0] for e in reference().network.per_nic if e.kind == "reference")
    floor = limits.error_below * slowest
    if j.size < limits.provisional_min_bytes or j.measured_busbw >= floor:
        return None
    if run.devices and len({d.host for d in run.devices}) <= 1:
        return None  # GPUs of one host without P2P (consumer cards) copy through host memory at about this speed
    rows = largest_rows(run)
    return make_finding(
        "BW001",
        "warning",
        f"{j.collective or 'the collective'} at {j.source}:{j.line} peaks at {gbs_text(j.measured_busbw)} GB/s busbw at"
        f" {exact_size(j.size)}: under {gbs_text(floor)} GB/s, half of what one 100G RDMA NIC carries"
        f" ({gbs_text(slowest)} GB/s), so below any NVLink, PCIe P2P or RDMA path whatever the GPUs are; the data"
        " most likely went over TCP sockets or a slow Ethernet link (the platform is not in the inputs, so no exact"
        " figure is compared; GPUs of one host without P2P, consumer cards, copy through host memory at about this"
        " speed)",
        evidence=row_evidence(run, rows) + run_evidence(run),
        hosts=run_hosts(run),
    )


FLAT_MIN_US = 1000.0  # a per-call time no NVLink or RDMA all_reduce of 1 MiB takes (tens of us: data latency)


def _flat_time(run: BenchmarkRun) -> Finding | None:
    """A time that hardly grows while the size grows 256-fold and more, and starts at milliseconds: a fixed
    cost per call (a stall, a timeout, a proxy thread) limits every size, not the links."""
    rows = sorted((r for r in run.rows if r.out_of_place.time_us), key=lambda r: r.size)
    if len(rows) < 4:
        return None
    small = next((r for r in rows if r.size >= 1 << 20), None)
    large = rows[-1]
    if small is None or large.size < 256 * small.size:
        return None
    t0, t1 = small.out_of_place.time_us or 0.0, large.out_of_place.time_us or 0.0
    if t0 < FLAT_MIN_US or t1 > 2 * t0:
        return None
    return make_finding(
        "BW001",
        "warning",
        f"the time per call of the run at {run.source}:{run.line} stays at {t0 / 1000:.1f}-{t1 / 1000:.1f} ms from"
        f" {exact_size(small.size)} to {exact_size(large.size)}: a fixed cost of milliseconds per call limits every"
        " size (a stalled proxy or network thread, a timeout and retry, a host-side synchronisation), not the"
        " links, which would make the time grow with the size",
        evidence=row_evidence(run, [small, large]) + run_evidence(run),
        hosts=run_hosts(run),
    )


def _cannot_compare(ctx: Context, j: BandwidthJudgement, run: BenchmarkRun) -> None:
    need = unjudged_need(ctx.case, ctx.platform, j) or "a reference figure for this hardware"
    ctx.cannot_judge(
        "BW001",
        f"the peak busbw of {j.collective or 'a run'} at {j.source}:{j.line} ({gbs_text(j.measured_busbw)} GB/s)"
        f" has no expectation to be compared with; it would need {need}",
        shown(row_evidence(run, largest_rows(run)) + run_evidence(run), 2),
    )


def _low_finding(ctx: Context, j: BandwidthJudgement, run: BenchmarkRun, severity: str) -> Finding:
    facts = run_facts(run, ctx.platform)
    multi_host = bool(facts and (facts.hosts or 1) > 1)
    causes, cause_evidence = _causes(ctx, multi_host)
    ratio = j.ratio or 0.0
    algorithm = ALGORITHM_NAMES.get(j.algorithm or "", j.algorithm)
    message = (
        f"{j.collective} on {j.platform}: peak busbw {gbs_text(j.measured_busbw)} GB/s at {exact_size(j.size)} is "
        f"{ratio:.0%} of the {gbs_text(j.expected_busbw)} GB/s expected ({algorithm}; {j.expectation_source})"
    )
    if "floor" in j.verdict:
        message += ", itself a floor for this fabric"
    if j.size < judging().judge_min_bytes:
        message += f"; the run stops at {exact_size(j.size)}, so this is a lower bound"
    if causes:
        message += "; the inputs show a likely cause: " + "; ".join(causes)
    rows = largest_rows(run)
    evidence = row_evidence(run, rows) + run_evidence(run) + shown(cause_evidence, 3)
    return make_finding(
        "BW001",
        severity,  # type: ignore[arg-type]
        message,
        evidence=evidence,
        evidence_count=len(evidence),
        hosts=run_hosts(run),
    )


# -------------------------------------------------------------------------------------- BW002
@rule("BW002", "sizes-too-small", severity="info", needs=["bandwidth"])
def sizes_too_small(ctx: Context) -> Iterable[Finding]:
    """The largest size of an nccl-tests run is under 1 GiB, so its peak bandwidth cannot be judged; the same,
    once, when every collective of a job that NCCL Inspector timed is under 1 GiB.

    Why: busbw grows with the message size and only reaches the hardware's plateau at 1-8 GiB; at
    256 MiB a healthy 8x H100 is still below peak ("256M is too small to reach peak bandwidth").
    A sweep that stops early looks slow without being slow. (Not said of CPU-process runs on gloo,
    which are small by design.)

    Fix: Re-run up to 8 GiB (`all_reduce_perf -b 8 -e 8G -f 2`, or `-b 8G -e 8G` for a single size
    as health checks do).

    Sources: sjeaugey nccl-tests#212; stas00 ml-engineering network/README.md (12.5% of NIC spec at
    16 MiB, ~70% at 1 GiB on 4-node B200); Azure NHC (single 8G/16G size)
    """
    limit = judging().judge_min_bytes
    for run in ctx.case.benchmarks:
        if not run.rows or run.nranks == 1 or cpu_run(run):
            continue
        largest = max(r.size for r in run.rows)
        if largest >= limit:
            continue
        if run.failures and (run.max_bytes or 0) > largest:
            continue  # it failed before reaching its largest size: BW005 says why
        rows = largest_rows(run)
        busbw = max((max(r.out_of_place.busbw or 0, r.in_place.busbw or 0) for r in rows), default=0.0)
        requested = f" (maxBytes {run.max_bytes})" if run.max_bytes and run.max_bytes != largest else ""
        yield make_finding(
            "BW002",
            "info",
            f"{run_label(run)} stops at {exact_size(largest)}{requested}, below the {exact_size(limit)} needed to"
            f" reach peak, so its {gbs_text(busbw)} GB/s busbw there cannot be judged as peak bandwidth",
            evidence=row_evidence(run, rows[:1]) + run_evidence(run),
            hosts=run_hosts(run),
        )
    yield from job_sizes_too_small(ctx)


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
        limit = max(ref.max_size_bytes for ref in references)
        small = [r for r in run.rows if 0 < r.size <= limit and r.count > 0]
        times = [t for t in (_best_time(r) for r in small) if t is not None]
        if not times:
            continue
        median = statistics.median(times)
        ref = _latency_reference(ctx, references, (facts.hosts or 1) > 1)
        if median <= ref.warn_above_us:
            continue
        low, high = ref.reference_us
        yield make_finding(
            "BW006",
            "warning",
            f"{run_label(run)} on {facts.nranks} ranks ({ref.fabric}): small messages ({exact_size(small[0].size)}-"
            f"{exact_size(small[-1].size)}) take {median:.1f} us (median), above the {ref.warn_above_us} us bound; "
            f"published references are {low}-{high} us ({ref.source.split(';')[0]})",
            evidence=row_evidence(run, small[:3]) + run_evidence(run),
            evidence_count=len(small),
            hosts=run_hosts(run),
        )


def _best_time(row: BenchmarkRow) -> float | None:
    values = [t for t in (row.out_of_place.time_us, row.in_place.time_us) if t is not None]
    return min(values) if values else None


def _latency_reference(ctx: Context, references: list[LatencyReference], multi_host: bool) -> LatencyReference:
    if multi_host:
        return next(r for r in references if r.hosts != 1)
    nvlink = bool(ctx.platform.nvlink_links) or str(_link_of(ctx)).startswith("NVLink")
    return next(r for r in references if r.hosts == 1 and r.nvlink == nvlink)


def _link_of(ctx: Context) -> str | None:
    spec = spec_by_key(ctx.platform.key)
    return spec.link if spec else None
