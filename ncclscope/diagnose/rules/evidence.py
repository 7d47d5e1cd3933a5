"""EVD001: say which rules could not judge, and what to add to the inputs, instead of passing silently."""

from __future__ import annotations

from collections.abc import Iterable

from ncclscope.diagnose import releases
from ncclscope.diagnose.platform import cpu_run
from ncclscope.diagnose.rules.context import NEEDS, Context, shown
from ncclscope.diagnose.rules.job_collectives import inspector_writes_nothing
from ncclscope.diagnose.rules.registry import make_finding, rule
from ncclscope.model import Finding

SAME_INPUT = {
    "nccl_errors": "nccl_log",
    "ib_ports": "host_links",
    "pcie_links": "host_links",
    "nvlinks": "host_links",
    "host_versions": "host_links",
    "host_views": "host_links",
    "bandwidth": "nccl_tests",
    "gpu_paths": "topology",
}
# Without any NCCL log, the log rules have nothing to look at; say so once, plainly.
ORDER = [
    "nccl_log",
    "version",
    "settings",
    "init",
    "connections",
    "transports",
    "graph",
    "tuning",
    "topology",
    "host_links",
    "ib_ports",
    "nccl_tests",
    "platform",
]


@rule("EVD001", "missing-evidence", severity="info")
def missing_evidence(ctx: Context) -> Iterable[Finding]:
    """Some rules could not judge because the inputs lack what they need, or hold only part of it (the
    logs of some ranks of a communicator, an input that stops in the middle of NCCL's init).

    Why: Most logs in tickets are taken with the default NCCL_DEBUG_SUBSYS, which hides the GRAPH,
    NET and TUNING lines, and come without a topology matrix or a benchmark. A rule that cannot see
    its evidence must not be read as a pass: this finding names the rules that could not judge and
    what to add.

    Fix: Re-run with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV,GRAPH,NET,TUNING, add the output of
    `nvidia-smi topo -m` from each host and an nccl-tests run up to 8 GiB (`ncclscope run` collects
    all of it).

    Sources: NCCL docs env.rst (NCCL_DEBUG_SUBSYS and its default mask); NVIDIA/nccl#1801 (maintainers
    ask for NCCL_DEBUG_SUBSYS=INIT,ENV,GRAPH,NET,TUNING)
    """
    unjudged: dict[str, list[str]] = {}
    for need, codes in getattr(ctx, "unjudged", {}).items():  # needs that the same input answers, together
        unjudged.setdefault(SAME_INPUT.get(need, need), []).extend(codes)
    lacks: list[tuple[str, list[str], str]] = []  # what the inputs lack, the rules it stops, how to add it
    for need in sorted(unjudged, key=lambda n: ORDER.index(n) if n in ORDER else len(ORDER)):
        codes = sorted(set(unjudged[need]))
        if need == "version" and not ctx.has("nccl_log"):
            continue  # already covered by the missing log
        log_parts = ("settings", "init", "connections", "transports", "graph", "tuning")
        if need != "nccl_log" and not ctx.has("nccl_log") and need in log_parts:
            continue
        what, _, how = NEEDS[need].partition(":")
        how = how.strip()
        if need in GPU_ONLY and _gloo_run(ctx):
            what += " (this run used gloo between CPU processes, which writes none)"
            how = (
                "`ncclscope run` on a GPU host: NCCL writes its log and topology and graph dumps, and"
                " nvidia-smi and ibstat their reports, into the run"
            )
        if need == "host_links" and ctx.case.run is not None:
            what += _run_reports(ctx)
        if need in ("connections", "transports") and _lazy_before_first_collective(ctx):
            # no logging setting is missing: NCCL 2.22+ connects at a communicator's first collective
            what = "connection lines, which NCCL 2.22+ prints at a communicator's first collective, not at init"
            how = (
                "the log up to and through the job's first collective (or NCCL_RUNTIME_CONNECT=0, which connects"
                " at init)"
            )
        lacks.append((what, codes, how))
    # the addition that lets the most rules judge first: the one thing to add, when a person adds one
    lacks.sort(key=lambda item: -len(item[1]))
    said = " ".join(item.what for item in ctx.not_judged)
    partial = [f"{item.code} could not judge: {item.what}" for item in ctx.not_judged]
    for source in ctx.case.sources:
        cut = [why for why in source.truncated if why not in said]
        if cut:  # what the missing lines held is judged by nobody: say so rather than pass it
            partial.append(
                f"{source.path} is incomplete ({'; '.join(cut)}): the findings judge the lines it holds, not those"
                " left out"
            )
    silent = inspector_writes_nothing(ctx)
    if silent is not None:
        partial.append(silent[0])
    if not lacks and not partial:
        return
    # one finding per analysis: what is missing, grouped by what to add, and what was judged in part
    count = len({code for _, codes, _ in lacks for code in codes})
    parts = [f"{what} ({', '.join(codes)})" for what, codes, _ in lacks]
    message = f"{count} rule(s) could not judge for lack of " + "; ".join(parts) if parts else ""
    message = ". ".join(part for part in [message, *partial] if part)
    fixes = [f"{what}: {how}" for what, _, how in lacks if how]
    if any(source.truncated for source in ctx.case.sources):
        fixes.append("the whole log (NCCL_DEBUG_FILE=nccl.%h.%p.log writes one file per process)")
    evidence = [ev for item in ctx.not_judged for ev in item.evidence] + (silent[1] if silent else [])
    extra: dict[str, object] = {"fix": "Add " + "; ".join(fixes) + "."} if fixes else {}
    yield make_finding("EVD001", "info", message, evidence=shown(evidence), evidence_count=len(evidence), **extra)


GPU_ONLY = ("nccl_log", "topology", "host_links")


def _lazy_before_first_collective(ctx: Context) -> bool:
    """A log of NCCL 2.22+ (lazy connection) whose communicators finished init: its absent connection lines
    mean no collective ran in it yet, not a missing debug setting (data/nccl_releases.json lazy_connect)."""
    complete = any(r.init_complete for c in ctx.case.communicators for r in c.ranks)
    return complete and releases.has(ctx.case, "lazy_connect") is True


def _gloo_run(ctx: Context) -> bool:
    """An `ncclscope run` directory whose benchmark ran on CPU processes only."""
    runs = ctx.case.benchmarks
    return ctx.case.run is not None and bool(runs) and all(cpu_run(r) for r in runs)


def _run_reports(ctx: Context) -> str:
    """What the run could not capture about its host, and what each report would have added."""
    from ncclscope.inputs.host_reports import HOST_REPORTS  # what the runner asks each host for

    run = ctx.case.run
    assert run is not None
    adds = {report.name: report.adds for report in HOST_REPORTS}
    absent = [
        f"{c.name}{f' on {c.host}' if c.host else ''} {c.status}"
        + (f" ({c.detail}): {adds[c.name]}" if c.detail else f": {adds[c.name]}")
        for c in run.captures
        if c.status not in ("captured", "empty") and c.name in adds  # an empty report is an answer: nothing there
    ]
    dumps = {s.path.rsplit("/", 1)[-1] for s in ctx.case.sources if "topology_xml" in s.kinds or "graph_xml" in s.kinds}
    if not dumps:
        absent.append(
            "NCCL's topology and graph dumps absent (no NCCL ran): what NCCL detected and chose "
            "(TOPO007-TOPO009, NET008, CH002)"
        )
    return "; the run recorded " + "; ".join(absent) if absent else ""
