"""Running the rules over a Case: selection, missing evidence (EVD001), stories, ordering."""

from __future__ import annotations

from ncclscope import __version__
from ncclscope.diagnose.bandwidth import judge_bandwidth
from ncclscope.diagnose.platform import detect_platform
from ncclscope.diagnose.rules.catalog import all_rules
from ncclscope.diagnose.rules.context import Context
from ncclscope.diagnose.rules.registry import Rule
from ncclscope.diagnose.rules.run_timeline import first_failure_line
from ncclscope.model import SEVERITY_ORDER, Analysis, Case, Evidence, Finding


def selected(rules: dict[str, Rule], select: list[str] | None, ignore: list[str] | None) -> dict[str, Rule]:
    """ruff-style: codes or prefixes (NET, NET001); --ignore wins over --select."""

    def matches(code: str, patterns: list[str]) -> bool:
        parts = [part.strip().upper() for p in patterns for part in p.split(",") if part.strip()]
        return any(code.startswith(part) for part in parts)

    chosen = {c: r for c, r in rules.items() if not select or matches(c, select)}
    return {c: r for c, r in chosen.items() if not ignore or not matches(c, ignore)}


def analyze(case: Case, select: list[str] | None = None, ignore: list[str] | None = None) -> Analysis:
    platform = detect_platform(case)
    ctx = Context(case, platform, judge_bandwidth(case, platform))
    rules = selected(all_rules(), select, ignore)
    findings: list[Finding] = []
    unjudged: dict[str, list[str]] = {}
    for code, r in rules.items():
        if code == "EVD001":
            continue
        missing = [need for need in r.needs if not ctx.has(need)]
        if missing:
            for need in missing:
                unjudged.setdefault(need, []).append(code)
            continue
        findings.extend(r.func(ctx))
    if "EVD001" in rules:
        ctx.unjudged = unjudged  # type: ignore[attr-defined]
        findings.extend(rules["EVD001"].func(ctx))
    first = first_failure_line(ctx) if any(f.code == "RUN013" for f in findings) else None
    heads = _link_stories(findings, first)
    findings.sort(key=lambda f: _story_order(f, heads))
    summary = {s: sum(f.severity == s for f in findings) for s in ("error", "warning", "info")}
    # not validated: its parts are models already; validating would build the schema of the whole Case
    # (see Assembly), which only JSON output needs
    return Analysis.model_construct(
        ncclscope_version=__version__,
        findings=findings,
        summary=summary,
        platform=platform,
        bandwidth=ctx.bandwidth,
        case=case,
    )


# causes and their effects: when both are present they are one story, root cause first
STORIES: list[tuple[str, list[str]]] = [
    # a hidden topology makes NCCL see flat, slow paths: the far NICs and pairs are what it sees, not the board
    ("TOPO006", ["TOPO001", "TOPO002", "GDR001", "CH001", "BW001"]),
    # a GPU without its NVLinks: its pairs go through PCIe and the CPU (far pairs, SHM)
    ("TOPO003", ["TOPO001", "TOPO004", "BW001"]),
    ("TOPO001", ["TOPO004", "BW001"]),
    ("TOPO004", ["BW001"]),
    ("NET002", ["NET001", "NET007", "BW001", "RUN005", "RUN001"]),
    ("NET001", ["BW001"]),
    ("GDR001", ["BW001"]),
    ("TOPO002", ["GDR001", "BW001"]),
    ("VER001", ["RUN001"]),
    ("NET007", ["RUN001"]),
    ("BW004", ["BW001"]),
    ("GDR002", ["BW001"]),
    ("NET003", ["NET006", "RUN001", "RUN005"]),
    # a hang's cause is what went wrong on the host of the rank the others wait for (HOST_BOUND)
    # a rank's CUDA failure: its peers' connections close, the proxy's calls fail, the test stops
    ("RUN004", ["RUN013", "HANG001", "HANG003", "NET006", "RUN005", "BW005"]),
    # NCCL's own memory behind an out-of-memory: the CUDA error it raised
    ("RUN007", ["RUN004", "RUN005", "RUN013", "NET006", "BW005"]),
    # cuMem host memory that does not work: the CUDA failure and WARNs that follow
    ("RUN008", ["RUN004", "RUN005", "RUN013", "NET006", "BW005"]),
    # a process launched unlike the others, a container that hides the GPUs: what fails after it
    ("RUN010", ["RUN005", "RUN013", "NET006", "RUN001", "HANG001", "RUN006"]),
    ("RUN011", ["RUN005", "RUN013", "RUN001", "NET006"]),
    # the NVSwitch fabric not ready: NCCL's CUDA calls in the NVLS set-up fail, the test stops
    ("RUN009", ["RUN004", "RUN005", "BW005", "RUN013", "NET006"]),
    # a GPU, NVLink or PCIe fault ends the ranks on it; the others wait, time out or lose their peer
    ("HW001", ["RUN013", "RUN004", "HANG001", "HANG003", "NET006", "RUN005", "RUN006", "BW005"]),
    # the first failure of a job, and what followed it on the other ranks
    ("RUN013", ["HANG001", "HANG003", "NET006", "RUN005", "RUN006", "BW005"]),
    ("RUN005", ["HANG001", "HANG003"]),
    # an IB completion error breaks its queue pair: the WARNs of the same failure, the peers' closed connections
    ("NET005", ["RUN005", "NET006", "HANG001", "HANG003", "BW005"]),
    ("NET006", ["HANG001", "HANG003", "BW005"]),
    # a queue pair that cannot connect, or memory that cannot be pinned: the WARNs and errors that follow
    ("NET009", ["RUN005", "RUN013", "NET006", "HANG001", "BW005"]),
    ("NET010", ["RUN005", "RUN013", "NET006", "HANG001", "BW005"]),
    # a port that went down under the job: the completion errors and timeouts that follow
    ("NET011", ["NET005", "RUN005", "RUN013", "NET006", "HANG001", "RUN006", "BW005"]),
    ("HANG001", ["RUN006"]),
    ("HANG002", ["RUN006"]),
]
# causes whose effects depend on the finding (which variable, which value): the rule lists them in `related`
# (env_knobs.knob_effects), and a finding that lists none explains nothing
OWN_EFFECTS = frozenset({"ENV001"})
SETTINGS = frozenset({"ENV001", "ENV002"})  # findings about a variable's value, not about what happened
# effects that a cause explains only when they share a host (when both name hosts)
HOST_BOUND = frozenset({"HANG001", "HANG003", "BW005"})


def _same_story(cause: Finding, effect: Finding) -> bool:
    if effect.code not in HOST_BOUND or not cause.hosts or not effect.hosts:
        return True
    return bool(set(cause.hosts) & set(effect.hosts))


def _stories(findings: list[Finding]) -> list[tuple[Finding, list[str]]]:
    """Each finding that may explain others, with the codes it may explain."""
    effects = {cause: codes for cause, codes in STORIES}
    out = []
    for f in findings:
        codes = list(f.related) if f.code in OWN_EFFECTS else effects.get(f.code, [])
        if codes:
            out.append((f, codes))
    return out


def _upstream(
    stories: list[tuple[Finding, list[str]]], diagnosed: list[tuple[Finding, Finding]], f: Finding
) -> list[Finding]:
    """Findings that may explain `f` and are problems themselves."""
    by_code = [c for c, codes in stories if c is not f and f.code in codes and c.code != f.code]
    return [c for c in by_code if c.severity != "info"] + [d for d, first in diagnosed if first is f]


def _diagnosed_first_failures(findings: list[Finding], first: Evidence | None) -> list[tuple[Finding, Finding]]:
    """(diagnosis, RUN013) where the failure RUN013 names as the first is a line another problem reads: the IB
    completion error of NET005, the CUDA error of RUN004. That finding says what the failure is and how to fix
    it; RUN013 adds that it came first, and what followed. Matched on the line itself, not by codes: a completion
    error may as well be the fallout of another rank's crash, which RUN013 then names first. What RUN013 tells
    as the cascade (RUN005's WARNs, NET006's closed connections) is never its diagnosis."""
    if first is None:
        return []
    cascade = set(dict(STORIES)["RUN013"])
    pairs = []
    for timeline in findings:
        if timeline.code != "RUN013" or not timeline.evidence or timeline.evidence[0] != first:
            continue
        for f in findings:
            if f.code == "RUN013" or f.code in cascade or f.severity == "info":
                continue
            if any(e.source == first.source and e.line == first.line for e in f.evidence):
                pairs.append((f, timeline))
    return pairs


def _link_stories(findings: list[Finding], first: Evidence | None = None) -> dict[int, Finding]:
    """Marks root causes and related codes; returns, per finding (by id), the head of its story: the
    problem at the start of the chain of causes that explains it (itself when nothing does)."""
    by_code: dict[str, list[Finding]] = {}
    for f in findings:
        by_code.setdefault(f.code, []).append(f)
    causes: dict[int, list[Finding]] = {}
    stories = _stories(findings)
    diagnosed = _diagnosed_first_failures(findings, first)
    for f in findings:
        if f.code in OWN_EFFECTS:
            f.related = []  # what it may cause, until it is found below
    told: list[tuple[Finding, list[Finding]]] = []
    for f, effects in stories:
        linked = [e for code in effects for e in by_code.get(code, []) if e is not f and _same_story(f, e)]
        if linked:
            told.append((f, linked))
    told += [(d, [first]) for d, first in diagnosed]
    for f, linked in told:
        # a root cause explains a problem and is one itself: an info (nothing to do) is only related to
        # what it may touch, and does not hide the cause that is a problem
        explains = f.severity != "info" and any(e.severity in ("error", "warning") for e in linked)
        f.root_cause = f.root_cause or (explains and not any(_upstream(stories, diagnosed, f)))
        f.related = sorted(set(f.related) | {e.code for e in linked})
        for e in linked:
            e.related = sorted(set(e.related) | {f.code})
            if explains:
                causes.setdefault(id(e), []).append(f)
        if explains:
            f.explains = sorted(set(f.explains) | {e.code for e in linked})
    return {id(f): _head(f, causes) for f in findings}


def _head(f: Finding, causes: dict[int, list[Finding]]) -> Finding:
    seen = {id(f)}
    while causes.get(id(f)):
        # the weightiest cause, root causes first (NET002 before the NET001 it explains)
        up = min(causes[id(f)], key=lambda c: (SEVERITY_ORDER[c.severity], not c.root_cause, c.code))
        if id(up) in seen:
            break
        seen.add(id(up))
        f = up
    return f


def _story_order(f: Finding, heads: dict[int, Finding]) -> tuple:
    """The order a person reads: each story whole, its head first and what it explains after it, the
    weightiest story first; what could not be judged (EVD001) last of all."""
    head = heads.get(id(f), f)
    return (
        head.code == "EVD001",
        SEVERITY_ORDER[head.severity],
        not head.root_cause,
        # a setting is one cause among those a diagnosis names (NET002 lists NCCL_IB_DISABLE=1): it reads after
        head.code in SETTINGS,
        -len(head.explains),
        head.code,
        head.message,
        f is not head,
        SEVERITY_ORDER[f.severity],
        f.code,
        f.message,
    )
