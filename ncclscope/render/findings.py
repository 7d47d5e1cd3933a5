"""Findings for people (terminal text, Markdown) and machines (JSON, SARIF)."""

from __future__ import annotations

import json
import re
from typing import Any

from rich.console import Console
from rich.markup import escape

from ncclscope import __version__
from ncclscope.common.markdown import cell, table
from ncclscope.common.words import plural
from ncclscope.model import Analysis, Evidence, Finding
from ncclscope.render.verdict import verdict_lines

STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def severity_counts(analysis: Analysis) -> list[tuple[str, str]]:
    """(severity, '2 warnings') for each severity that has findings, worst first; none for a zero."""
    s = analysis.summary
    return [(k, f"{s[k]} {k}" if k == "info" else plural(s[k], k)) for k in ("error", "warning", "info") if s.get(k)]


def headline(analysis: Analysis) -> str:
    if not analysis.findings:
        return "No findings."
    return ", ".join(text for _, text in severity_counts(analysis))


def print_text(analysis: Analysis, console: Console) -> None:
    console.print(f"[bold]ncclscope[/] {__version__}: {headline(analysis)}")
    platform = analysis.platform
    if platform.key or platform.gpu_model:
        console.print(f"Platform: {escape(describe_platform(analysis))}")
    if analysis.findings:
        console.print()
        for line in verdict_lines(analysis):
            console.print(f"[bold]{escape(line)}[/]" if not line.startswith(" ") else escape(line), soft_wrap=True)
    for finding in analysis.findings:
        console.print()
        print_finding(finding, console)
    if analysis.bandwidth:
        console.print()
        console.print("[bold]Bandwidth[/]")
        for judgement in analysis.bandwidth:
            console.print(f"  {escape(judgement.verdict)}")


def evidence_shown(f: Finding, cap: int | None = None) -> tuple[list[Evidence], int]:
    """The evidence lines to print (at most `cap`) and how many more lines support the finding."""
    shown = f.evidence if cap is None else f.evidence[:cap]
    return shown, max(f.evidence_count, len(f.evidence)) - len(shown)


def describe_platform(analysis: Analysis) -> str:
    p = analysis.platform
    bits = []
    if p.gpu_model:
        bits.append(f"{p.gpus_per_host or '?'}x {p.gpu_model} per host")
    if p.hosts:
        bits.append(f"{p.hosts} host{'s' if p.hosts != 1 else ''}")
    if p.nvlink_links:
        bits.append(f"NV{p.nvlink_links}")
    if p.network:
        bits.append(f"network {p.network}")
    if p.instance:
        bits.append(p.instance)
    return ", ".join(bits) or "unknown"


def print_finding(f: Finding, console: Console) -> None:
    root = "  [dim](root cause)[/]" if f.root_cause else ""
    console.print(f"[{STYLE[f.severity]}]{f.severity.upper():7}[/] [bold]{f.code}[/] {f.name}{root}")
    console.print(f"  {escape(f.message)}", soft_wrap=True)
    shown, more = evidence_shown(f)
    for ev in shown:
        console.print(f"    [dim]{escape(ev.where)}[/]  {escape(ev.text[:200])}", soft_wrap=True)
    if more > 0:
        console.print(f"    [dim]... and {more} more line{'s' if more != 1 else ''}[/]")
    if f.related:
        console.print(f"  [dim]related: {', '.join(f.related)}[/]")
    if f.explanation:
        console.print(f"  [bold]why:[/] {escape(f.explanation)}", soft_wrap=True)
    if f.fix:
        console.print(f"  [bold]fix:[/] {escape(f.fix)}", soft_wrap=True)


def to_json(analysis: Analysis) -> str:
    return analysis.model_dump_json(indent=2)


def to_markdown(analysis: Analysis) -> str:
    lines = [f"## ncclscope {__version__}: {headline(analysis)}", ""]
    if analysis.platform.key or analysis.platform.gpu_model:
        lines += [f"Platform: {describe_platform(analysis)}", ""]
    if analysis.findings:
        lines += [("> " + line.strip()) for line in verdict_lines(analysis)] + [""]
        rows = ([f.severity, f"{f.code} {f.name}", cell(f.message)] for f in analysis.findings)
        lines += table(["severity", "code", "finding"], rows)
        lines.append("")
    for f in analysis.findings:
        lines += [f"### {f.severity}: {f.code} {f.name}", "", f.message, ""]
        if f.evidence:
            lines += ["<details><summary>evidence</summary>", "", "```text"]
            shown, more = evidence_shown(f)
            lines += [f"{ev.where}: {ev.text}" for ev in shown]
            if more > 0:
                lines.append(f"... and {more} more lines")
            lines += ["```", "", "</details>", ""]
        if f.explanation:
            lines += [f"**Why:** {f.explanation}", ""]
        if f.fix:
            lines += [f"**Fix:** {f.fix}", ""]
    if analysis.bandwidth:
        lines += ["### Bandwidth", ""] + [f"- {j.verdict}" for j in analysis.bandwidth] + [""]
    return "\n".join(lines)


def to_sarif(analysis: Analysis) -> str:
    rules = _rules()
    used = sorted({f.code for f in analysis.findings})
    driver_rules = [
        {
            "id": code,
            "name": rules[code].name,
            "shortDescription": {"text": rules[code].summary or rules[code].name},
            "fullDescription": {"text": rules[code].why or rules[code].summary},
            "help": {"text": rules[code].fix or ""},
            "defaultConfiguration": {"level": SARIF_LEVEL[rules[code].severity]},
        }
        for code in used
        if code in rules
    ]
    results: list[dict[str, Any]] = []
    for f in analysis.findings:
        result: dict[str, Any] = {
            "ruleId": f.code,
            "level": SARIF_LEVEL[f.severity],
            "message": {"text": f.message},
        }
        if f.evidence:
            result["locations"] = [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": ev.source},
                        **({"region": {"startLine": ev.line, "snippet": {"text": ev.text}}} if ev.line > 0 else {}),
                    }
                }
                for ev in f.evidence
            ]
        results.append(result)
    sarif = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "ncclscope",
                        "version": __version__,
                        "informationUri": "https://pypi.org/project/ncclscope/",
                        "rules": driver_rules,
                    }
                },
                "results": results,
            }
        ],
    }
    return json.dumps(sarif, indent=2)


# a full stop that ends a sentence: not an abbreviation's ("e.g.", "i.e."), nor an ellipsis, and the next
# sentence begins with a capital, a quote or a parenthesis
_SENTENCE_END_RE = re.compile(r"(?<!\be\.g)(?<!\bi\.e)(?<!\.)\.(?!\.)(?=\s+[A-Z(`\"]|\s*$)")


def first_sentence(text: str) -> str:
    """The first sentence of a rule's summary; a full stop inside `code` (quoted log text) ends nothing."""
    for end in _SENTENCE_END_RE.finditer(text):
        if text.count("`", 0, end.start()) % 2 == 0:
            return text[: end.end()]
    return text


def print_rule_list(console: Console) -> None:
    for code, r in _rules().items():
        first = first_sentence(r.summary)  # the full text is one `ncclscope rules CODE` away
        console.print(f"[bold]{code:7}[/] {r.name:24} [{STYLE[r.severity]}]{r.severity:7}[/] {escape(first)}")


def print_rule(code: str, console: Console) -> bool:
    r = _rules().get(code.upper())
    if r is None:
        return False
    console.print(f"[bold]{r.code} {r.name}[/] (default severity: {r.severity})")
    console.print()
    console.print(escape(r.summary))
    if r.needs:
        console.print(f"\n[bold]Needs:[/] {', '.join(r.needs)}")
    if r.why:
        console.print(f"\n[bold]Why it matters:[/] {escape(r.why)}")
    if r.fix:
        console.print(f"\n[bold]How to fix:[/] {escape(r.fix)}")
    if r.sources:
        console.print("\n[bold]Sources:[/]")
        for source in r.sources:
            console.print(f"  - {escape(source)}")
    return True


def _rules() -> dict[str, Any]:
    """Every rule, imported when a renderer needs their documentation (rendering findings needs none)."""
    from ncclscope.diagnose.rules.catalog import all_rules

    return all_rules()
