"""ticket.md of a bundle: the analysis as the answers NVIDIA's NCCL issue form asks for (impact, versions per host,
platform, scale, the first failure, the logs), so that a ticket can be filed from it as it is."""

from __future__ import annotations

from ncclscope.diagnose.first_failure import timeline
from ncclscope.diagnose.rules.version import driver_text
from ncclscope.model import Analysis
from ncclscope.render.findings import describe_platform

# The questions of NVIDIA/nccl's issue form (.github/ISSUE_TEMPLATE), in its order
FORM = "NVIDIA/nccl issue form (.github/ISSUE_TEMPLATE: impact, debug logs, steps, NCCL version, platform)"


def ticket_summary(analysis: Analysis, inputs: list[str]) -> str:
    """Markdown with one section per question of the issue form, each answered from the inputs."""
    case = analysis.case
    lines = ["# NCCL issue summary", "", f"Answers to the questions of the {FORM}, from the inputs of this bundle.", ""]
    lines += ["## How this issue impacts you", ""]
    problems = [f for f in analysis.findings if f.severity in ("error", "warning")]
    if problems:
        heads = [f for f in problems if f.root_cause] or problems[:1]
        lines += [f"- {f.code} {f.name} ({f.severity}): {f.message}" for f in heads[:5]]
    else:
        lines.append("- ncclscope found no problem in these inputs.")
    lines += ["", "## The first failure", ""]
    line = timeline(case)
    if line.root is not None:
        when = f" at {line.root.time_text.strip('[]')}" if line.root.time_text else ""
        lines.append(
            f"- {line.root.what} on {line.root.process}{when} ({line.root.evidence.source}:{line.root.evidence.line})"
        )
    elif line.lost_peer:
        lines.append(f"- on the lost peer {line.lost_peer}: every failure in these inputs follows its loss")
    elif case.warnings:
        first = case.warnings[0]
        lines.append(f"- the first NCCL WARN: `{first.evidence.text}` ({first.evidence.source}:{first.evidence.line})")
    else:
        lines.append("- no failure in the inputs")
    lines += ["", "## NCCL version", ""]
    for host in case.hosts:
        versions = ", ".join(host.nccl_versions) or "not printed"
        drivers = ", ".join(driver_text(d) for d in host.cuda_driver_versions) or "not printed"
        lines.append(f"- {host.name or '(no host name)'}: NCCL {versions}; CUDA driver {drivers}")
    if not case.hosts:
        lines.append(f"- {', '.join(case.nccl_versions) or 'no NCCL version line in the inputs'}")
    lines += ["", "## Your platform details", ""]
    lines.append(f"- {describe_platform(analysis)}")
    nranks = max((c.nranks or 0 for c in case.communicators), default=0)
    scale = f"{len(case.hosts)} host(s)" + (f", {nranks} ranks in the largest communicator" if nranks else "")
    lines += [f"- scale: {scale}", "", "## Debug logs", ""]
    lines += [f"- `{name}`" for name in inputs] or ["- none"]
    return "\n".join(lines) + "\n"
