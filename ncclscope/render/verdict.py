"""The verdict a person reads first: the root causes with their one-line fix and what they explain, or
"no problem found" with the one thing to add that would let more rules judge.

Every front door shows it above the findings (analyze's text and Markdown, the HTML report, the TUI's
Findings screen), from the findings' own order (diagnose/engine.py puts each story's head first).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ncclscope.diagnose.engine import SETTINGS
from ncclscope.model import Analysis, Finding

HEADS_SHOWN = 3
# where a fix's first instruction ends: a sentence, or the next of a list of steps
FIRST_STEP_END = re.compile(r"(?<!e\.g)(?<!i\.e)\.\s+(?=[A-Z`])|;\s")


@dataclass
class Story:
    head: Finding
    explains: list[str] = field(default_factory=list)
    settings: list[Finding] = field(default_factory=list)  # settings that tell part of the same story


@dataclass
class Verdict:
    stories: list[Story]
    more_problems: int  # problems beyond the stories shown
    missing: str  # what EVD001 says to add first, when no problem was found ("" when nothing)
    missing_rules: int  # how many rules could not judge

    @property
    def healthy(self) -> bool:
        return not self.stories


def stories(findings: list[Finding]) -> list[Story]:
    """The problems (errors, warnings) that nothing else here explains, each with the codes it explains."""
    out: list[Story] = []
    for f in findings:
        if f.severity == "info" or f.code == "EVD001" or _explained(f, findings):
            continue
        # a setting whose effects an earlier story already explains is part of it (NET002 names the
        # NCCL_IB_DISABLE=1 that ENV001 reports): said with it, not as a second root cause
        told = next((s for s in out if f.code in SETTINGS and f.explains and set(f.explains) <= set(s.explains)), None)
        if told is not None:
            told.settings.append(f)
            continue
        out.append(Story(f, list(f.explains)))
    return out


def _explained(f: Finding, findings: list[Finding]) -> bool:
    return any(g is not f and g.code != f.code and f.code in g.explains for g in findings)


def verdict(analysis: Analysis) -> Verdict:
    heads = stories(analysis.findings)
    evidence = next((f for f in analysis.findings if f.code == "EVD001"), None)
    missing, count = "", 0
    if evidence is not None and evidence.fix.startswith("Add "):
        missing = evidence.fix[len("Add ") :].split(";")[0].split(":")[0].rstrip(".")
        counted = re.match(r"(\d+) rule", evidence.message)
        count = int(counted.group(1)) if counted else 0
    return Verdict(heads[:HEADS_SHOWN], max(0, len(heads) - HEADS_SHOWN), missing, count)


def first_step(fix: str) -> str:
    """A fix's first instruction, as one line."""
    match = FIRST_STEP_END.search(fix)
    step = fix[: match.start()].rstrip(" .;:") if match else fix.rstrip(" .")
    return step + "."


def verdict_lines(analysis: Analysis) -> list[str]:
    """The verdict as plain lines (the text and Markdown outputs, the TUI's summary)."""
    v = verdict(analysis)
    if v.healthy:
        line = "No problem found in what was given."
        if v.missing:
            line += f" {v.missing_rules} rule(s) could not judge; the one thing to add first: {v.missing} (EVD001)."
        return [*_healthy_runs(analysis), line]
    lines = []
    for story in v.stories:
        label = "Root cause" if story.explains else "Problem"
        also = "; with " + ", ".join(f"{f.code} {f.message.split(' ', 1)[0]}" for f in story.settings)
        explains = f" (explains {', '.join(story.explains)}{also if story.settings else ''})" if story.explains else ""
        lines.append(f"{label}: {story.head.code} {story.head.name}{explains}: {story.head.message}")
        if story.head.fix:
            lines.append(f"  fix: {first_step(story.head.fix)}")
    if v.more_problems:
        lines.append(f"... and {v.more_problems} more problem(s) below.")
    return lines


def _healthy_runs(analysis: Analysis) -> list[str]:
    """A benchmark judged against what its hardware should reach, said plainly first when nothing is wrong."""
    from ncclscope.diagnose.expectations import judging

    lines = []
    for j in analysis.bandwidth:
        if j.ratio is None or j.expected_busbw is None:
            continue
        where = f"{j.collective} on {j.platform}" if j.platform else j.collective
        if j.floor and j.ratio >= 1:
            lines.append(
                f"Healthy as far as can be told: {where} peaks at {j.measured_busbw:g} GB/s, above the"
                f" {j.expected_busbw:g} GB/s floor (the NIC details would give the exact figure)."
            )
        elif not j.floor and j.ratio >= judging().warning_below:
            lines.append(
                f"Healthy: {where} peaks at {j.measured_busbw:g} GB/s, {j.ratio:.0%} of the"
                f" {j.expected_busbw:g} GB/s expected."
            )
    return lines
