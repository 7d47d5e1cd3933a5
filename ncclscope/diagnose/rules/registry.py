"""The rule registry: a rule is one function plus its documentation.

    @rule("NET001", "socket-transport", severity="error", needs=["connections"])
    def socket_transport(ctx: Context) -> Iterable[Finding]:
        '''Collective traffic goes over NET/Socket.

        Why: ...
        Fix: ...
        Sources: ...
        '''

The docstring is the documentation shown by `ncclscope rules CODE`: the first paragraph says what
the rule detects; paragraphs starting with "Why:", "Fix:" and "Sources:" say why it matters, how
to fix it and where the knowledge comes from. `needs` names the evidence the rule cannot judge
without (see Context.has); when it is missing the rule is not run and EVD001 says so.

This module imports no rule module (they import it); ncclscope.diagnose.rules.catalog imports them all.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ncclscope.model import Finding, Severity

if TYPE_CHECKING:
    from ncclscope.diagnose.rules.context import Context

RuleFunc = Callable[["Context"], Iterable[Finding]]


@dataclass
class Rule:
    code: str
    name: str
    severity: Severity  # default (or highest) severity; the catalog's semantics may lower it
    needs: list[str]
    func: RuleFunc
    summary: str = ""
    why: str = ""
    fix: str = ""
    sources: list[str] = field(default_factory=list)

    @property
    def family(self) -> str:
        return self.code.rstrip("0123456789")


REGISTRY: dict[str, Rule] = {}


def rule(code: str, name: str, severity: Severity, needs: list[str] | None = None) -> Callable[[RuleFunc], RuleFunc]:
    """Register a rule function under its catalog code."""

    def register(func: RuleFunc) -> RuleFunc:
        if code in REGISTRY:
            raise ValueError(f"rule {code} registered twice")
        summary, why, fix, sources = _documentation(func)
        REGISTRY[code] = Rule(code, name, severity, list(needs or []), func, summary, why, fix, sources)
        return func

    return register


def _documentation(func: RuleFunc) -> tuple[str, str, str, list[str]]:
    doc = inspect.cleandoc(func.__doc__ or "")
    parts = {"summary": [], "why": [], "fix": [], "sources": []}  # type: dict[str, list[str]]
    current = "summary"
    for paragraph in doc.split("\n\n"):
        text = " ".join(line.strip() for line in paragraph.splitlines()).strip()
        for key in ("why", "fix", "sources"):
            if text.lower().startswith(key + ":"):
                current = key
                text = text[len(key) + 1 :].strip()
                break
        parts[current].append(text)
    sources = _split_top_level(" ".join(parts["sources"]))
    return " ".join(parts["summary"]), " ".join(parts["why"]), " ".join(parts["fix"]), sources


def _split_top_level(text: str) -> list[str]:
    """Split 'a; b (c; d); e' on the semicolons outside parentheses."""
    items: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        depth += (char == "(") - (char == ")")
        if char == ";" and depth == 0:
            items.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    items.append("".join(current).strip())
    return [item for item in items if item]


def make_finding(rule_code: str, severity: Severity, message: str, **extra: object) -> Finding:
    """A Finding carrying the rule's name, explanation, fix and sources."""
    r = REGISTRY[rule_code]
    data: dict[str, object] = {
        "code": r.code,
        "name": r.name,
        "severity": severity,
        "message": message,
        "explanation": r.why,
        "fix": r.fix,
        "sources": list(r.sources),
    }
    data.update(extra)
    if "evidence_count" not in data:
        data["evidence_count"] = len(data.get("evidence", []) or [])  # type: ignore[arg-type]
    return Finding.model_validate(data)
