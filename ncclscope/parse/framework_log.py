"""What the framework around NCCL prints about it (grammars/framework_log.lark): PyTorch's
ProcessGroupNCCL watchdog timeouts and status lines, NCCL errors raised into Python (also inside
DeepSpeed, vLLM, Megatron or Ray tracebacks) with NCCL's `Last error:` text, and the NCCL variables
that a launcher's command line sets.

A record can sit anywhere in a line: behind launcher prefixes, a glog header
(`[E424 01:11:21.160832730 ProcessGroupNCCL.cpp:629] `), or traceback text that another process's
output was glued to. A marker finds where a record begins (backing up over a `[Rank N]` or
`[PG ... Rank N]` tag); the grammar reads it from there. Terminals hard-wrap long lines: a watchdog
record whose `WorkNCCL(...)` is not closed is completed with the next line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache

from lark import Lark, Token, Tree
from lark.exceptions import LarkError

from ncclscope.grammars import load
from ncclscope.model import Evidence, FrameworkEvent

MARKER_RE = re.compile(
    r"(?:Watchdog caught|Caught) collective operation timeout|failure detected by watchdog|Timeout at NCCL work"
    r"|Some NCCL operations have failed|Process group watchdog thread terminated|NCCL error\b|Last error:"
    r"|nccl(?:UnhandledCudaError|SystemError|InternalError|InvalidArgument|InvalidUsage|RemoteError|Timeout):"
    r"|NCCL communicator was aborted"
)
# a rank or process-group tag right before the marker belongs to the record
TAG_BEFORE_RE = re.compile(r"\[(?:Rank \d{1,7}|PG [^\[\]\n]{1,80}?Rank \d{1,7})\][ \t]*\Z")
# hints that a line is a command (so that NCCL_X=V in prose is not taken for a setting)
COMMAND_RE = re.compile(
    r"(?:^|[\s;&|$#>])(?:mpirun|mpiexec|srun|sbatch|salloc|torchrun|python3?|deepspeed|accelerate|docker|podman"
    r"|singularity|apptainer|kubectl|horovodrun|env|export|bash|sh|\S*_perf(?:_mpi)?)(?=\s)"
    r"|(?:^|[\s$#>])(?:-x|-e|--env|--export=\S*?)[ =]?NCCL_|^\s*(?:\S*[$#]\s+)?NCCL_\w+=\S*\s"
)
WRAP_LIMIT = 2  # physical lines one hard-wrapped record may span
FIELDS = {
    "rank", "seq", "op_type", "numel_in", "numel_out", "timeout_ms", "ran_ms", "last_enqueued",
    "last_completed", "pg_id", "nccl_version", "raised_at", "result_text", "result_name",
}  # fmt: skip
INT_FIELDS = {"rank", "seq", "numel_in", "numel_out", "timeout_ms", "ran_ms", "last_enqueued", "last_completed"}


@cache
def _parser(start: str) -> Lark:
    return load("framework_log", start)  # one parser per start rule (their lexers differ)


def _parse(text: str, start: str) -> Tree | None:
    try:
        return _parser(start).parse(text)
    except LarkError:
        return None


def record_start(text: str) -> int | None:
    """Where a framework record begins in `text`, or None."""
    match = MARKER_RE.search(text)
    if match is None:
        return None
    tag = TAG_BEFORE_RE.search(text, max(0, match.start() - 120), match.start())
    return tag.start() if tag else match.start()


def event_from(tree: Tree, evidence: Evidence) -> FrameworkEvent:
    values: dict[str, object] = {}
    for node in tree.iter_subtrees():
        name = str(node.data)
        if name in FIELDS and node.children and isinstance(node.children[0], Token):
            text = str(node.children[0]).strip()
            values.setdefault(name, int(text) if name in INT_FIELDS else text)
    text = next((str(t).strip() for t in tree.children if isinstance(t, Token) and t.type == "TEXT"), "")
    result = values.pop("result_text", None) or values.pop("result_name", None)
    pg = values.pop("pg_id", None)
    return FrameworkEvent(
        kind=str(tree.data),  # type: ignore[arg-type]
        process_group=str(pg) if pg is not None else None,
        text=str(result or text),
        evidence=evidence,
        **values,  # type: ignore[arg-type]
    )


@dataclass
class FrameworkReader:
    """Reads the framework records of one source from its non-NCCL lines, in order."""

    source: str
    events: list[FrameworkEvent] = field(default_factory=list)
    settings: list[tuple[str, str, Evidence]] = field(default_factory=list)
    lines: int = 0
    not_understood: list[tuple[int, str]] = field(default_factory=list)
    cut_at_end: int | None = None  # the line of a record the input cut off
    _pending: tuple[int, str] | None = None  # a hard-wrapped record waiting for its next line
    _last_error: FrameworkEvent | None = None  # "Last error:" whose text is on the next line

    def feed(self, line_no: int, text: str) -> bool:
        """One line (launcher prefix removed); True when it is (part of) a framework record."""
        if self._pending is not None:
            first_no, first = self._pending
            self._pending = None
            if self._read(first_no, first + text, wrapped=True):
                self.lines += 1
                return True
            self.not_understood.append((first_no, first))
        if self._last_error is not None and text.strip():
            waiting, self._last_error = self._last_error, None
            if record_start(text) is None and not waiting.text:
                waiting.text = text.strip()
                self.lines += 1
                return True
        if not ("NCCL" in text or "nccl" in text or "atchdog" in text or "Last error" in text):
            return False
        if self._read(line_no, text, wrapped=False):
            self.lines += 1
            return True
        return False

    def _read(self, line_no: int, text: str, wrapped: bool) -> bool:
        start = record_start(text)
        if start is None:
            return False
        body = text[start:].rstrip()
        tree = _parse(body, "framework_record")
        if tree is None:
            if not wrapped and "WorkNCCL(" in body and ")" not in body.split("WorkNCCL(", 1)[1]:
                self._pending = (line_no, text)  # the terminal wrapped it: the rest is on the next line
                return True
            self.not_understood.append((line_no, body[:300]))
            return True
        event = event_from(tree, Evidence(source=self.source, line=line_no, text=text.strip()))
        self.events.append(event)
        if event.kind == "last_error" and not event.text:
            self._last_error = event
        return True

    def command_line(self, line_no: int, text: str) -> bool:
        """The NCCL_* assignments of a command line (any line: a test's command is read by the
        nccl-tests reader too). True when the line is a command that sets one."""
        if "NCCL_" not in text or "=" not in text or not COMMAND_RE.search(text):
            return False
        tree = _parse(text, "env_assignments")
        if tree is None:
            return False
        found = False
        for setting in tree.find_data("env_setting"):
            name = str(setting.children[0])
            value_tree = setting.children[1] if len(setting.children) > 1 else None
            value = str(value_tree.children[0]) if isinstance(value_tree, Tree) else ""
            value = value.strip("'\"").replace("\\,", ",")
            self.settings.append((name, value, Evidence(source=self.source, line=line_no, text=text.strip())))
            found = True
        return found

    def finish(self) -> None:
        if self._pending is not None:  # a wrapped record whose rest was not pasted
            self.not_understood.append(self._pending)
            self.cut_at_end = self._pending[0]
            self._pending = None
