"""RUN012: communicator init took long and one phase took most of it, as NCCL's own `Init timings` and `Bootstrap
timings` (2.22+) say; the phase's known causes come from data/init_phases.json."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ncclscope.common.data_files import data_json
from ncclscope.common.words import plural
from ncclscope.diagnose.rules.context import Context, shown
from ncclscope.diagnose.rules.registry import make_finding, rule
from ncclscope.model import Finding, InitTiming


def _phases() -> dict[str, Any]:
    return dict(data_json("init_phases.json"))


def _dominant(timing: InitTiming, share: float) -> tuple[str, float] | None:
    if not timing.phases or timing.total <= 0:
        return None
    phase, seconds = max(timing.phases.items(), key=lambda kv: kv[1])
    return (phase, seconds) if seconds >= share * timing.total else None


@rule("RUN012", "slow-init", severity="warning")
def slow_init(ctx: Context) -> Iterable[Finding]:
    """A communicator's init took long (5 s or more on a rank) and one phase took most of it (60% or more), as
    NCCL's own `Init timings` (kernels, alloc, bootstrap, allgathers, topo, graphs, connections, rest) and
    `Bootstrap timings` (2.22+) report it: the phase and its known causes.

    Why: Init is paid at every start and restart of a job and by every new communicator; when one phase takes
    seconds, the cause is specific: kernels JIT-compiled for a GPU the library was not built for, ranks that start
    late (the bootstrap waits for them), a topology search on a large host.

    Fix: Follow the phase named in the message (data/init_phases.json gives each phase's causes and fix).

    Sources: NCCL 2.22.3 release notes (init profiling); NCCL src/init.cc (the timed phases); data/init_phases.json
    """
    data = _phases()
    slow = [
        (t, d)
        for t in ctx.case.init_timings
        if t.kind == "init" and t.total >= data["slow_total_s"]
        and (d := _dominant(t, data["dominant_share"])) is not None
    ]  # fmt: skip
    by_phase: dict[str, list[tuple[InitTiming, tuple[str, float]]]] = {}
    for t, d in slow:
        by_phase.setdefault(d[0], []).append((t, d))
    for phase, items in by_phase.items():
        known = data["phases"].get(phase, {"what": phase, "causes": "not known to ncclscope", "fix": ""})
        worst, (_, seconds) = max(items, key=lambda item: item[0].total)
        ranks = sorted({t.rank for t, _ in items if t.rank is not None})
        hosts = sorted({t.host for t, _ in items if t.host})
        lines = [t.evidence for t, _ in items]
        boot = [b for b in ctx.case.init_timings if b.kind == "bootstrap" and b.host in hosts and b.phases]
        detail = ""
        if phase == "bootstrap" and boot:
            part, took = max(boot[0].phases.items(), key=lambda kv: kv[1])
            detail = f"; its `Bootstrap timings` put {took:.2f} s in {part}"
            lines.append(boot[0].evidence)
        yield make_finding(
            "RUN012", "warning",
            f"init took {worst.total:.2f} s on rank {worst.rank} ({plural(len(items), 'rank')} "
            f"slow), {seconds:.2f} s of it in {phase} ({known['what']}){detail}: {known['causes']}",
            evidence=shown(lines), evidence_count=len(lines), hosts=hosts, ranks=ranks,
            fix=f"{known['fix'][:1].upper()}{known['fix'][1:]}." if known["fix"] else None,
        )  # fmt: skip
