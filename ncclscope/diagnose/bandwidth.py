"""Each nccl-tests run judged against what its platform should reach, and the verdict a person can quote.

The peak busbw at the run's largest size (never the "Avg bus bandwidth") against the figure for its platform,
GPU count, collective and likely algorithm (run_expectation.py).
"""

from __future__ import annotations

from typing import Any

from ncclscope.common.words import exact_size
from ncclscope.diagnose.expectations import figure, judging, link_spec, reference_entry
from ncclscope.diagnose.platform import cpu_run
from ncclscope.diagnose.run_expectation import Expectation, RunFacts, expectation_of, num, run_facts
from ncclscope.model import BandwidthJudgement, BenchmarkRun, Case, Platform
from ncclscope.parse.nccl_tests_infer import FACTOR_PER_RANK


# ---------------------------------------------------------------------------------- judgement
def judge_bandwidth(case: Case, platform: Platform) -> list[BandwidthJudgement]:
    """One judgement per benchmark run, at its largest size, against the platform's expectation."""
    judgements = []
    for run in case.benchmarks:
        facts = run_facts(run, platform)
        if facts is not None:
            judgements.append(_judge(facts, case, platform))
    return judgements


def run_expectation(case: Case, platform: Platform, run: BenchmarkRun) -> tuple[RunFacts | None, Expectation | None]:
    """A run's facts at its largest size and what it should reach there (None where nothing is known)."""
    facts = run_facts(run, platform)
    if facts is None or cpu_run(run):
        return facts, None
    return facts, expectation_of(facts, case, platform)[0]


def unjudged_need(case: Case, platform: Platform, judgement: BandwidthJudgement) -> str | None:
    """What the inputs would need for a run without expectation to be judged (None when it has one)."""
    for run in case.benchmarks:
        if run.source == judgement.source and run.line == judgement.line:
            facts = run_facts(run, platform)
            if facts is None:
                return None
            expectation, unjudged = expectation_of(facts, case, platform)
            return None if expectation else (unjudged.need if unjudged else None)
    return None


def _judge(facts: RunFacts, case: Case, platform: Platform) -> BandwidthJudgement:
    run = facts.run
    assert run is not None  # a benchmark's facts (the job's own collectives are BW007's)
    collective = facts.collective or "unknown collective"
    base: dict[str, Any] = {
        "source": run.source,
        "line": run.line,
        "collective": collective,
        "nranks": facts.nranks,
        "size": facts.size,
        "measured_busbw": facts.measured,
        "platform": _where(facts),
    }
    head = f"{collective} on {_where(facts)}: peak busbw {num(facts.measured)} GB/s at {exact_size(facts.size)}"
    if cpu_run(run):
        return BandwidthJudgement(
            **base,
            verdict=f"{head}, measured with gloo between CPU processes, not NCCL on GPUs: NCCL's bandwidth "
            "figures do not apply, so there is nothing to judge; run on GPUs to judge the hardware.",
        )
    if facts.nranks == 1:
        algbw = max((r.out_of_place.algbw or 0.0) for r in facts.rows)
        # nccl-tests' bus factor (formats.md C.6): 2(n-1)/n for all_reduce, (n-1)/n for the gathers and
        # alltoall, 1 for the rooted ones and sendrecv, where busbw then repeats algbw
        factor = {"all_reduce": "2(n-1)/n"}.get(collective, "(n-1)/n" if collective in FACTOR_PER_RANK else None)
        bus = (
            f"busbw is 0 by definition (factor {factor} with n = 1)"
            if factor
            else "busbw repeats algbw (factor 1), and in place there is nothing to move at all"
        )
        return BandwidthJudgement(
            **base,
            verdict=f"{collective} on {_where(facts)} with 1 rank, up to {exact_size(facts.size)}: nothing leaves the "
            f"GPU, so there is nothing to judge: {bus}; algbw (up to {num(algbw)} GB/s out of place) measures a "
            "local copy. Run with 2 or more GPUs.",
        )
    expectation, unjudged = expectation_of(facts, case, platform)
    if expectation is None:
        reason = unjudged.reason if unjudged else "no expectation"
        need = unjudged.need if unjudged else "a reference figure"
        return BandwidthJudgement(**base, verdict=f"{head}; not judged: {reason}. It would need {need}.")
    limits = judging()
    ratio = facts.measured / expectation.busbw
    judgement = BandwidthJudgement(
        **base,
        expected_busbw=expectation.busbw,
        floor=expectation.floor,
        algorithm=expectation.algorithm,
        expectation_source=expectation.source,
        verdict="",
    )
    if facts.size < limits.provisional_min_bytes:
        judgement.verdict = (
            f"{head}: the run stops below {exact_size(limits.provisional_min_bytes)}, where busbw is still far from "
            f"peak, so it is not compared with the expected {expectation.shown} ({expectation.label}); "
            "re-run with -e 8G."
        )
        return judgement
    judgement.ratio = round(ratio, 4)
    judgement.verdict = _verdict(head, facts, expectation, ratio)
    return judgement


def _verdict(head: str, facts: RunFacts, exp: Expectation, ratio: float) -> str:
    limits = judging()
    if exp.floor:
        first = f"{head}, expected at least {exp.shown} ({exp.label}; {exp.source})"
        if ratio >= 1:
            first += ": above that floor, so no fault can be shown without the NIC details"
        elif ratio >= limits.warning_below:
            first += (
                f": {ratio:.0%} of that floor, within what a healthy system of the slowest such NICs reaches, so no"
                " fault can be shown without the NIC details"
            )
        else:
            first += f": only {ratio:.0%} of that floor"
    else:
        first = f"{head} is {ratio:.0%} of the expected {exp.shown} ({exp.label}; {exp.source})"
        if ratio >= limits.warning_below:
            first += ": healthy"
        elif ratio >= limits.error_below:
            first += ": below the 80% a healthy system reaches"
        else:
            first += ": less than half of it"
    if facts.size < limits.judge_min_bytes:
        first += (
            f" (the run stops at {exact_size(facts.size)}, below the {exact_size(limits.judge_min_bytes)} needed"
            " for peak, "
            "so only a figure under half the expectation counts as a fault)"
        )
    notes = _spec_notes(facts, exp, ratio) + _nvls_note(facts, exp, ratio) + _multi_host_notes(facts)
    return first + ". " + "; ".join(notes) + "."


def _nvls_note(facts: RunFacts, exp: Expectation, ratio: float) -> list[str]:
    """A low NVLS all_reduce that sits at the ring figure: NVLS is probably not engaged."""
    if exp.algorithm != "nvls" or ratio >= judging().warning_below or facts.spec is None:
        return []
    ring = reference_entry(facts.spec.key, facts.nranks or 0, "all_reduce", "ring")
    if not ring:
        return []
    low, high = figure(ring.busbw_gbs)
    if facts.measured < 0.95 * low:
        return []
    shown = f"{num(low)}-{num(high)}" if high and high != low else num(low)
    return [
        f"{num(facts.measured)} GB/s matches the ring figure ({shown} GB/s, {ring.source}), so NVLS "
        "(NVLink SHARP) does not seem to be engaged"
    ]


def _spec_notes(facts: RunFacts, exp: Expectation, ratio: float) -> list[str]:
    """Compare with the unidirectional per-GPU link figure, and say why the bidirectional one misleads."""
    if exp.scope == "network":
        return [
            "This busbw is compared with unidirectional per-NIC figures (line rate / 8 is one direction) times the "
            "NICs of a host, never with bidirectional ones"
        ]
    link = link_spec(facts.spec.link) if facts.spec else None
    if link is None:
        return ["This busbw is compared with a unidirectional per-GPU figure, never with a bidirectional one"]
    uni, bi = float(link.unidirectional_gbs), float(link.bidirectional_gbs)
    notes = [
        f"This busbw is compared with the unidirectional per-GPU {link.link} figure of {num(uni)} GB/s "
        f"({facts.measured / uni:.0%} of it)"
    ]
    if exp.algorithm == "nvls" and facts.measured > uni:
        notes.append(
            "busbw above the link figure is normal with NVLS, as nccl-tests keeps the ring factor 2(n-1)/n whatever "
            "the algorithm (sjeaugey nccl-tests#212)"
        )
    if ratio >= judging().warning_below and facts.measured < 0.5 * bi:
        notes.append(
            f"{num(facts.measured)} GB/s is ~{facts.measured / bi:.0%} of {num(bi)} GB/s only because "
            f"{num(bi)} GB/s is the bidirectional figure (both directions added; unidirectional {num(uni)} GB/s), "
            "so comparing with it would wrongly suggest a problem"
        )
    return notes


def _gpu_name(facts: RunFacts) -> str:
    """The GPUs as the run's device lines name them (one model) when ncclscope has no figures for it."""
    names = {d.name for d in facts.run.devices} if facts.run else set()
    return next(iter(names)) if len(names) == 1 else "unknown GPUs"


def _multi_host_notes(facts: RunFacts) -> list[str]:
    hosts, n = facts.hosts or 1, facts.nranks or 0
    if hosts < 2 or facts.collective != "all_reduce" or n < 2:
        return []
    notes = []
    if hosts == 2:
        notes.append(
            "on 2 hosts NCCL may use tree or NVLSTree, whose busbw can exceed the NICs, so a figure above the ring "
            "expectation is not a fault"
        )
    notes.append(
        f"under a hierarchical algorithm each GPU's NIC carried about busbw x (k-1)/(n-1) = "
        f"{num(facts.measured * (hosts - 1) / (n - 1))} GB/s (stas00 ml-engineering network/README.md)"
    )
    return notes


def _where(facts: RunFacts) -> str:
    model = facts.spec.key if facts.spec else "CPU processes" if facts.run and cpu_run(facts.run) else _gpu_name(facts)
    hosts = facts.hosts
    if facts.nranks and hosts and hosts > 1 and facts.gpus_per_host:
        return f"{hosts} hosts x {facts.gpus_per_host} {model} ({facts.nranks} ranks)"
    if facts.nranks:
        return f"{facts.nranks}x {model}" + (", 1 host" if hosts == 1 else "")
    return model
