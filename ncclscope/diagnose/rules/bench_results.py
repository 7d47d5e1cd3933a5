"""Rules of the BENCH family about what a run is worth: BW003 (wrong results), BW004 (not one job: a
build without MPI) and BW005 (the test failed)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ncclscope.common.words import exact_size
from ncclscope.diagnose.expectations import data_check as data_check_reference
from ncclscope.diagnose.rules.bench_common import (
    OLD_ERROR_LAYOUTS,
    gbs_text,
    largest_rows,
    row_evidence,
    run_evidence,
    run_hosts,
    run_label,
)
from ncclscope.diagnose.rules.context import Context, shown
from ncclscope.diagnose.rules.error_strings import test_failure_meaning
from ncclscope.diagnose.rules.registry import make_finding, rule
from ncclscope.model import BenchmarkRun, Finding, TestFailure

if TYPE_CHECKING:
    from ncclscope.diagnose.reference_data import DataCheck


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
        shown_cells = ", ".join(f"{what} {v:g} at {exact_size(r.size)} {p}" for r, p, v in cells[:4])
        more = f" and {len(cells) - 4} more" if len(cells) > 4 else ""
        parts = [f"{len(cells)} result cell(s) wrong ({shown_cells}{more})"] if cells else []
        if failed:
            parts.append(f"footer 'Out of bounds values : {run.out_of_bounds} FAILED'")
        rows = list({r.line: r for r, _, _ in cells}.values())
        evidence = row_evidence(run, rows[:4]) + run_evidence(run)
        yield make_finding(
            "BW003",
            "error",
            f"{run_label(run)} on {_gpu_summary(run)}: " + "; ".join(parts),
            evidence=evidence,
            evidence_count=len(rows) + len(run_evidence(run)),
            hosts=run_hosts(run),
        )


def _is_wrong(layout: str, dtype: str, value: float, checks: DataCheck) -> bool:
    """Old layouts print the largest absolute error, judged against nccl-tests' own tolerance."""
    old = layout in OLD_ERROR_LAYOUTS or (layout == "headerless" and value != int(value))
    if not old:
        return value > 0
    tolerance = checks.tolerance.get(dtype.lower(), checks.tolerance_other_types)
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
    (Troubleshooting); nccl-tests src/common.cu (only process 0 prints; a build without MPI=1 starts
    one job per process)
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
            evidence=shown([e for run in group for e in run_evidence(run)]),
            evidence_count=len(group),
            hosts=hosts,
        )
    # processes that ran none of the tables read: a run directory holds one process per collective, each the
    # owner of its own 1-rank table, and those ran one after the other, not as one job
    owners = {(d.host, d.pid) for run in ctx.case.benchmarks for d in run.devices if d.pid is not None}
    processes = {(p.host, p.pid) for p in ctx.case.processes if p.pid is not None} - owners
    for run in ctx.case.benchmarks:
        if (run.source, run.line) in flagged or run.nranks != 1 or not run.rows:
            continue
        zero = all((r.out_of_place.busbw or 0) == 0 and (r.in_place.busbw or 0) == 0 for r in run.rows)
        moving = any((r.out_of_place.algbw or 0) > 0 for r in run.rows)
        # a table without device lines names no owner: one process of the log may be the test itself
        others = len(processes) - (0 if run.devices else 1)
        if zero and moving and (others > 0 or len(ctx.hosts) > 1):
            yield make_finding(
                "BW004",
                "error",
                f"{run_label(run)} has 1 rank (busbw 0, algbw up to "
                f"{gbs_text(max(r.out_of_place.algbw or 0 for r in run.rows))} GB/s) while the inputs show "
                f"{max(others + 1, len(ctx.hosts))} processes/hosts: each process ran alone",
                evidence=run_evidence(run) + row_evidence(run, largest_rows(run)[:1]),
                hosts=run_hosts(run),
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

    Sources: nccl-tests src/common.h and common.cu (the failure lines); NCCL troubleshooting.rst and
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
                f"{run_label(run)} failed on {', '.join(hosts) or 'some rank'}"
                + (f" after {exact_size(max(r.size for r in run.rows))}" if run.rows else "")
                + f": '{what[:200]}' - {test_failure_meaning(what)}",
                evidence=shown(
                    [f.evidence for f in failures] + [f.evidence for f in run.failures if f not in failures]
                ),
                evidence_count=len(run.failures),
                hosts=hosts,
            )
