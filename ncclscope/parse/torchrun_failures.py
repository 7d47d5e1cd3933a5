"""What torchrun prints when a worker process ends in failure (grammars/torchrun_failures.lark): its agent's line
for the first worker it saw fail, and its ChildFailedError report with one entry per failed worker (time,
host, rank, exit code, the signal that ended it). The report's `Root Cause (first observed failure)` section
and the agent's line mark the process torchrun saw end first.
"""

from __future__ import annotations

from lark import Token, Tree

from ncclscope.model import Evidence, ProcessExit
from ncclscope.parse.grammars import parse_or_none, rule_text

AGENT = "failed (exitcode:"
ROOT = "Root Cause (first observed failure)"
FIELDS = ("time", "host", "rank", "exitcode", "error_file", "traceback")


class TorchrunFailureReader:
    """Reads torchrun's failure lines of one input."""

    HINT_WORDS: tuple[str, ...] = (AGENT, ROOT, "Failures:")
    HINT_START = ""

    def __init__(self, source: str) -> None:
        self.source = source
        self.exits: list[ProcessExit] = []
        self.lines = 0
        self._section: str | None = None  # "root" or "failures" while inside the report
        self._entry: ProcessExit | None = None

    @property
    def busy(self) -> bool:
        return self._section is not None

    def feed(self, line_no: int, text: str) -> bool:
        """True when the line is torchrun's report of a failed worker."""
        body = text.strip()
        if self._section is None and AGENT not in body and ROOT not in body and body != "Failures:":
            return False
        evidence = Evidence(source=self.source, line=line_no, text=body)
        if AGENT in body and self._section is None:
            return self._agent_line(body, evidence)
        section = parse_or_none("torchrun_failures", "section", body)
        if section is not None:
            self._section = "root" if section.data == "root_section" else "failures"
            self._entry = None
            return self._took()
        if self._section is None:
            return False
        entry = parse_or_none("torchrun_failures", "entry", body)
        if entry is not None:
            self._entry = None
            if not any(isinstance(t, Token) and t.type == "NO_OTHER" for t in entry.children):
                self._entry = ProcessExit(source=self.source, first_observed=self._section == "root")
                self._entry.evidence.append(evidence)
                self.exits.append(self._entry)
            return self._took()
        field = parse_or_none("torchrun_failures", "field", body) if self._entry is not None else None
        if field is None:
            self._section = self._entry = None  # the report's rule lines (---, ===) and whatever follows
            return False
        assert self._entry is not None
        _fill(self._entry, field)
        self._entry.evidence.append(evidence)
        return self._took()

    def _agent_line(self, body: str, evidence: Evidence) -> bool:
        tree = parse_or_none("torchrun_failures", "agent_failed", body[body.index(AGENT) :])
        if tree is None:
            return False
        exit_ = ProcessExit(
            source=self.source,
            local_rank=_int(tree, "local_rank"),
            pid=_int(tree, "pid"),
            exitcode=_int(tree, "exitcode"),
            first_observed=True,
            evidence=[evidence],
        )
        self.exits.append(exit_)
        return self._took()

    def _took(self) -> bool:
        self.lines += 1
        return True

    def finish(self) -> list[ProcessExit]:
        """The failed workers, one per process: the report's entry and the agent's line of the same pid join."""
        self._section = self._entry = None
        out: list[ProcessExit] = []
        for item in self.exits:
            same = next((m for m in out if item.pid is not None and m.pid == item.pid and _same_host(m, item)), None)
            if same is None:
                out.append(item)
                continue
            for name in ("rank", "local_rank", "host", "exitcode", "signal", "time"):
                if getattr(same, name) is None:
                    setattr(same, name, getattr(item, name))
            same.first_observed = same.first_observed or item.first_observed
            same.evidence.extend(item.evidence)
        return out


def _same_host(a: ProcessExit, b: ProcessExit) -> bool:
    return a.host is None or b.host is None or a.host == b.host


def _fill(entry: ProcessExit, field: Tree) -> None:
    kind = str(field.data)
    if kind == "time":
        entry.time = str(field.children[0])
    elif kind == "host":
        entry.host = str(field.children[0])
    elif kind == "rank_field":
        entry.rank = _int(field, "rank")
        entry.local_rank = _int(field, "local_rank")
    elif kind == "exit_field":
        entry.exitcode = _int(field, "exitcode")
        entry.pid = _int(field, "pid")
        signal = next((str(t) for t in field.children if isinstance(t, Token) and t.type == "SIGNAL"), None)
        entry.signal = signal.strip("()") if signal else None
    elif kind == "traceback" and entry.signal is None and field.children:
        # "Signal 9 (SIGKILL) received by PID 29024": the signal, where the exit code line did not name it
        words = str(field.children[0]).split()
        if len(words) > 2 and words[0] == "Signal" and words[2].startswith("("):
            entry.signal = words[2].strip("()")


def _int(tree: Tree, rule: str) -> int | None:
    text = rule_text(tree, rule)
    return int(text) if text and text.lstrip("-").isdigit() else None
