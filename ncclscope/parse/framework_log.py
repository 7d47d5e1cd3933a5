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
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache, lru_cache
from typing import Any, TypeVar

from lark import Lark, Token, Tree
from lark.exceptions import LarkError

from ncclscope.model import Evidence, FrameworkEvent
from ncclscope.parse.grammars import load
from ncclscope.parse.log_records import Event, message_text
from ncclscope.parse.nccl_log import relayed_message
from ncclscope.parse.normalize import strip_launcher_prefix

NCCL_ERRORS = (
    "UnhandledCudaError",
    "SystemError",
    "InternalError",
    "InvalidArgument",
    "InvalidUsage",
    "RemoteError",
    "Timeout",
)
MARKER_RE = re.compile(
    r"(?:Watchdog caught|Caught) collective operation timeout|Timeout at NCCL work"
    r"|(?:failure |Exception (?:\(either an error or timeout\) )?)?detected by watchdog at work"
    r"|Received a dump signal due to a collective timeout"
    r"|ProcessGroupNCCL.s watchdog got stuck for|Heartbeat monitor timed out"
    r"|Some NCCL operations have failed|Process group watchdog thread terminated|NCCL error\b|Last error:"
    r"|NCCL operation nccl\w+\(.{0,200}?\) failed:|vLLM is using nccl=="
    r"|(?:- )?\[[\d, ]+\] (?:joined but didn't finish|finished) collective #|ranks \[[\d, ]+\] are the lagging ranks"
    rf"|nccl(?:{'|'.join(NCCL_ERRORS)}):"
    r"|NCCL communicator was aborted|ProcessGroupNCCL (?:initialization options|environments):"
    r"|Connection closed by peer \[|(?:Read|Write) error \[[^\]\s]+\]:\d+:"  # gloo
)
# the header a C++ log line begins with (`[E ProcessGroupNCCL.cpp:737] `, `[E424 01:11:21.160832730
# ProcessGroupNCCL.cpp:629] `, glog's `E0424 01:11:21.160832 4242 ProcessGroupNCCL.cpp:629] `): a new message,
# never the rest of a wrapped one
LOG_HEADER_RE = re.compile(r"\[?[EWIF]\d{0,4}(?: [\d:.]+)?(?: \d+)? ?[\w./-]+\.(?:cpp|cc|cu|hpp|h|py):\d+\]")
# such a header inside a line, after a space: the paste lost the line break before it (an issue body whose
# lines were joined), and what follows is a message of its own
GLUED_HEADER_RE = re.compile(r"(?<=\s)(?=\[)" + LOG_HEADER_RE.pattern)
# the time of such a header (glog's month, day and time: no year), where the text before a record holds one
LOG_TIME_RE = re.compile(r"[EWIF](\d{1,2})(\d\d) (\d\d:\d\d:\d\d(?:\.\d+)?)\b")  # c10 may not pad the month
# a rank or process-group tag right before the marker belongs to the record
TAG_BEFORE_RE = re.compile(r"\[(?:Rank \d{1,7}|PG [^\[\]\n]{1,80}?Rank \d{1,7})\][ \t]*\Z")
# hints that a line is a command (so that NCCL_X=V in prose is not taken for a setting)
COMMAND_RE = re.compile(
    r"(?:^|[\s;&|$#>])(?:mpirun|mpiexec|srun|sbatch|salloc|torchrun|python3?|deepspeed|accelerate|docker|podman"
    r"|singularity|apptainer|kubectl|horovodrun|env|export|bash|sh|\S*_perf(?:_mpi)?)(?=\s)"
    r"|(?:^|[\s$#>])(?:-x|-e|--env|--export=\S*?)[ =]?NCCL_|^\s*(?:\S*[$#]\s+)?NCCL_\w+=\S*\s"
)
# a marker inside a string literal of Python code (a traceback quotes the line that raised: `raise
# RuntimeError(f"NCCL error: {error_str}")`): the text before the marker opens a call's quoted argument
QUOTED_IN_CODE_RE = re.compile(r"""^\s*(?:raise\s+)?[\w.]+\(\s*[fr]?["']$""")
# the first words of records that a terminal may wrap before their fields (the rest is on the next lines)
WRAPPED_STARTS = ("collective operation timeout", "watchdog thread terminated")
WORK_RE = re.compile(r"WorkNCCL\((?:[^()]|\(ms\))*\)")  # the work a watchdog record names, closed
WRAP_LIMIT = 3  # physical lines one hard-wrapped record may span
EVENTS_KEEP = 2000  # events kept per input (a watchdog prints several per rank); the rest are counted
SETTINGS_KEEP = 500
FIELDS = {
    "rank", "seq", "op_type", "numel_in", "numel_out", "timeout_ms", "ran_ms", "last_enqueued",
    "last_completed", "pg_id", "nccl_version", "raised_at", "result_text", "result_name", "from_rank", "stuck_s",
    "nccl_call", "next_seq", "peer",
}  # fmt: skip
INT_FIELDS = {
    "rank", "seq", "numel_in", "numel_out", "timeout_ms", "ran_ms", "last_enqueued", "last_completed", "from_rank",
    "stuck_s", "next_seq",
}  # fmt: skip


@cache
def _parser(start: str) -> Lark:
    return load("framework_log", start)  # one parser per start rule (their lexers differ)


T = TypeVar("T")

# a job's ranks print the same record many times, a crash loop thousands: what a text says is found once, for a
# text up to this long (each cache keeps its last `texts`; lines are cut at 64 kB on reading)
CACHED_TEXT_MAX = 4096


def _once_per_text(texts: int) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """`find(text, ...)` remembered for the last `texts` texts of up to CACHED_TEXT_MAX characters."""

    def remembered(find: Callable[..., T]) -> Callable[..., T]:
        cached = lru_cache(maxsize=texts)(find)

        def call(text: str, *args: Any) -> T:
            return cached(text, *args) if len(text) <= CACHED_TEXT_MAX else find(text, *args)

        return call

    return remembered


@_once_per_text(512)  # the trees are only read
def _parse(text: str, start: str) -> Tree | None:
    parser = _parser(start)  # a broken grammar raises here: it is our bug, not the input's
    try:
        return parser.parse(text)
    except LarkError:
        return None


@_once_per_text(1024)  # a crash loop's error lines name NCCL_DEBUG=INFO, each rank the same
def _is_command(text: str) -> bool:
    return COMMAND_RE.search(text) is not None


@_once_per_text(1024)
def record_start(text: str, at: int = 0) -> int | None:
    """Where a framework record begins in `text` (from `at` on), or None."""
    match = MARKER_RE.search(text, at)
    if match is None:
        return None
    tag = TAG_BEFORE_RE.search(text, max(at, match.start() - 120), match.start())
    return tag.start() if tag else match.start()


@_once_per_text(1024)
def _record_cuts(text: str) -> tuple[int, ...] | None:
    """Where the records of `text` begin: 0, then each C++ log header glued after a space that a record
    follows; None when no record begins in it."""
    start = record_start(text)
    if start is None:
        return None
    cuts = [0]
    at = start + 1
    while (glued := GLUED_HEADER_RE.search(text, at)) is not None:
        if record_start(text, glued.start()) is not None:
            cuts.append(glued.start())
        at = glued.end()
    return tuple(cuts)


def _glue(first: str, rest: str, starts_record: bool = False) -> str:
    """A line and the next one, joined as the terminal had them before wrapping: at a column (mid-word)
    or at a space the paste may have dropped; the join that reads is kept."""
    tight = first + rest
    if starts_record:
        return tight if record_start(tight) is not None else f"{first} {rest}"
    body = tight[record_start(tight) or 0 :].rstrip()
    return tight if _parse(body, "framework_record") is not None else f"{first} {rest}"


# the options of a process group (pg_options) that are fields of the event
OPTIONS = {"size": "world_size", "global rank": "rank", "TIMEOUT(ms)": "timeout_ms", "NCCL version": "nccl_version"}


def event_from(tree: Tree, evidence: Evidence) -> FrameworkEvent:
    kind, values, text = _what_it_says(tree)
    return FrameworkEvent(kind=kind, text=text, evidence=evidence, **values)  # type: ignore[arg-type]


# trees read (by id, each kept here so that its id names it alone) -> what they say: _parse serves the same
# tree for the same record text, which a crash loop prints by the thousand, and walking a tree costs more
# than the event made from it
_SAID: dict[int, tuple[Tree, str, dict[str, object], str]] = {}
SAID_KEEP = 512


def _what_it_says(tree: Tree) -> tuple[str, dict[str, object], str]:
    """A record's kind, fields and text (event_from); the fields are a copy the caller may keep."""
    said = _SAID.get(id(tree))
    if said is None or said[0] is not tree:
        said = (tree, *_read_tree(tree))
        if len(_SAID) >= SAID_KEEP:
            _SAID.clear()
        _SAID[id(tree)] = said
    return said[1], dict(said[2]), said[3]


def _read_tree(tree: Tree) -> tuple[str, dict[str, object], str]:
    values: dict[str, object] = {}
    for option in tree.find_data("option"):
        name = OPTIONS.get(str(option.children[0]).strip())
        if name and len(option.children) > 1:
            text = str(option.children[1]).strip()
            if name == "nccl_version":
                values.setdefault(name, text)
            elif text.isdigit():
                values.setdefault(name, int(text))
    for node in tree.iter_subtrees():
        name = str(node.data)
        if name in FIELDS and node.children and isinstance(node.children[0], Token):
            text = str(node.children[0]).strip()
            values.setdefault(name, int(text) if name in INT_FIELDS else text)
    ranks = [int(str(r.children[0])) for node in tree.find_data("rank_list") for r in node.children]
    if ranks:  # a desync report's ranks: the list, not one rank
        values.pop("rank", None)
        values["ranks"] = ranks
    text = next((str(t).strip() for t in tree.children if isinstance(t, Token) and t.type == "TEXT"), "")
    result = values.pop("result_text", None) or values.pop("result_name", None)
    pg = values.pop("pg_id", None)
    values["process_group"] = str(pg) if pg is not None else None
    return str(tree.data), values, str(result or text)


@dataclass
class FrameworkReader:
    """Reads the framework records of one source from its non-NCCL lines, in order."""

    source: str
    events: list[FrameworkEvent] = field(default_factory=list)
    settings: list[tuple[str, str, Evidence]] = field(default_factory=list)
    lines: int = 0
    not_understood: list[tuple[int, str]] = field(default_factory=list)
    not_kept: dict[str, int] = field(default_factory=dict)  # facts read beyond the limits, by kind
    cut_at_end: int | None = None  # the line of a record the input cut off
    cut: list[int] = field(default_factory=list)  # lines of cut records read in part
    _pending: tuple[int, str, int] | None = None  # a hard-wrapped record: first line, text so far, lines
    _last_error: tuple[FrameworkEvent, int] | None = None  # "Last error:" (and its line) whose text follows
    _carry: tuple[int, str] | None = None  # a line that may hold the first part of a wrapped record
    _wants_ran: FrameworkEvent | None = None  # a timeout whose "ran for N milliseconds" was wrapped away
    prefix_rank: int | None = None  # the global rank a launcher's prefix gave the line being read (other_lines.py)

    # what feed() needs in a line while nothing is pending, and command_line() in any line
    # (the words feed() tests before MARKER_RE, narrowed to the MARKER_RE forms that hold them: "nccl" alone
    # is no record, its forms are ncclSystemError: ...; "atchdog" alone makes a wrapped record's first part)
    HINT_WORDS = (
        "NCCL", "atchdog", "Last error", "Heartbeat monitor", "Caught collective", "Received a dump signal",
        "is using nccl==", "collective #", "lagging ranks", *(f"nccl{e}:" for e in NCCL_ERRORS),
        "Connection closed by peer", "Read error [", "Write error [",
    )  # fmt: skip
    HINT_START = ""

    @property
    def busy(self) -> bool:
        """A record's rest or the line after `Last error:` is awaited: the next line matters, whatever it holds."""
        return not (
            self._pending is None and self._wants_ran is None and self._last_error is None and self._carry is None
        )

    def feed(self, line_no: int, text: str) -> bool:
        """One line (launcher prefix removed); True when it is (part of) a framework record."""
        stripped = text.strip()
        if self._pending is not None:
            first_no, joined, parts = self._pending
            self._pending = None
            if not LOG_HEADER_RE.match(stripped):
                glued = _glue(joined, stripped)
                # the rest of the wrapped record, unless it is a record of its own (which the joined one may quote)
                if record_start(text) is None or _parse(glued[record_start(glued) or 0 :].rstrip(), "framework_record"):
                    self._read(first_no, glued, parts + 1)
                    self.lines += 1
                    return True
            self._cut_short(first_no, joined)
        if self._wants_ran is not None:
            waiting, self._wants_ran = self._wants_ran, None
            ran = _parse(stripped, "ran")
            if ran is not None:
                waiting.ran_ms = int(str(next(ran.find_data("ran_ms")).children[0]))
                self.lines += 1
                return True
        if self._last_error is not None and stripped:
            (waiting, after), self._last_error = self._last_error, None
            # NCCL's text is the very next line; when that line was an NCCL record, the log reader has it
            if line_no == after + 1 and record_start(text) is None:
                waiting.text = stripped
                _relay(waiting)
                self.lines += 1
                return True
        if self._carry is not None:
            carry_no, carry = self._carry
            self._carry = None
            if record_start(text) is None:
                glued = _glue(carry, stripped, starts_record=True)
                if record_start(glued) is not None:  # the wrap cut the record's first words
                    self._read(carry_no, glued, 2)
                    self.lines += 2
                    return True
        if not (
            "NCCL" in text or "nccl" in text or "atchdog" in text or "Last error" in text or "eartbeat" in text
            or "collective #" in text or "lagging ranks" in text  # PyTorch's desync report
            or "closed by peer" in text or "error [" in text  # gloo
        ):  # fmt: skip
            return False
        if self._read(line_no, text, 1):
            self.lines += 1
            return True
        if "atchdog" in text:
            self._carry = (line_no, text)
        return False

    def _read(self, line_no: int, text: str, parts: int) -> bool:
        """The record that begins in `text` (of `parts` physical lines, the first `line_no`), and those of the
        messages glued after it: each C++ log header after a space that a record follows begins one."""
        cuts = _record_cuts(text)
        if cuts is None:
            return False
        found = False
        for begin, end in zip(cuts, [*cuts[1:], len(text)], strict=True):
            found = self._read_one(line_no, text[begin:end], parts, text) or found
        return found

    def _read_one(self, line_no: int, text: str, parts: int, line: str) -> bool:
        """One record that begins in `text`, a piece of `line` (the evidence)."""
        start = record_start(text)
        if start is None or QUOTED_IN_CODE_RE.match(text, 0, start):
            return False
        body = text[start:].rstrip()
        tree = _parse(body, "framework_record")
        if tree is None:
            if parts < WRAP_LIMIT and any(w in body for w in WRAPPED_STARTS) and line.endswith(text):
                self._pending = (line_no, text, parts)  # the terminal wrapped it: the rest is on the next line
                return True
            self.not_understood.append((line_no, body[:300]))
            return True
        if len(self.events) >= EVENTS_KEEP:  # counted, not made
            self.not_kept["framework"] = self.not_kept.get("framework", 0) + 1
            return True
        event = event_from(tree, Evidence(source=self.source, line=line_no, text=line.strip()))
        quoted = _quoted_timeout(event) if event.kind == "watchdog_exception" else None
        if quoted is None and event.kind == "watchdog_exception" and "collective operation timeout" in event.text:
            if parts < WRAP_LIMIT and line.endswith(text):  # the timeout it quotes goes on on the next line
                self._pending = (line_no, text, parts)
                return True
        if event.rank is None:
            event.rank = self.prefix_rank  # torchrun's `[rank3]:` before the line
        clock = LOG_TIME_RE.search(text, 0, start)
        if clock is not None:
            event.time = f"{int(clock[1]):02d}-{clock[2]} {clock[3]}"
        self.events.append(event)
        if event.kind == "last_error" and not event.text:
            self._last_error = (event, line_no + parts - 1)
        elif event.kind == "last_error":
            _relay(event)
        if event.kind == "watchdog_timeout" and event.ran_ms is None and parts > 1:
            self._wants_ran = event
        if quoted is not None:  # the exception quotes the timeout, which may be printed nowhere else
            self.events.append(event_from(quoted, event.evidence))
        return True

    def command_line(self, line_no: int, text: str) -> bool:
        """The NCCL_* assignments of a command line (any line: a test's command is read by the
        nccl-tests reader too). True when the line is a command that sets one."""
        if "NCCL_" not in text or "=" not in text or not _is_command(text):
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
            found = True
            if len(self.settings) >= SETTINGS_KEEP:
                self.not_kept["settings"] = self.not_kept.get("settings", 0) + 1
                continue
            self.settings.append((name, value, Evidence(source=self.source, line=line_no, text=text.strip())))
        return found

    def finish(self) -> None:
        if self._pending is not None:  # a wrapped record whose rest was not pasted
            self._cut_short(*self._pending[:2])
            self.cut_at_end = self._pending[0]
            self._pending = None

    def _cut_short(self, line_no: int, text: str) -> None:
        """A watchdog timeout (or the exception that quotes one) whose rest was lost (the paste ends, or another
        record follows): the fields it holds whole are read (`[Rank 4] ... WorkNCCL(SeqNum=4, OpTy`: rank 4 timed
        out at SeqNum 4), else it is a line not understood. Either way the input is named as cut (`cut`,
        `cut_at_end`)."""
        body = text[record_start(text) or 0 :].rstrip()
        work = body.find("WorkNCCL(")
        closed = WORK_RE.search(body)
        comma = body.rfind(",", work)
        # up to the end of WorkNCCL(...), else up to its last whole field
        whole = body[: closed.end()] if closed else body[:comma] + ")" if comma > work >= 0 else ""
        tree = _parse(whole, "framework_record") if whole else None
        kinds = ("watchdog_timeout", "watchdog_exception")
        if tree is None or tree.data not in kinds or len(self.events) >= EVENTS_KEEP:
            self.not_understood.append((line_no, text[:300]))
            return
        event = event_from(tree, Evidence(source=self.source, line=line_no, text=text.strip()))
        self.events.append(event)
        quoted = _quoted_timeout(event) if event.kind == "watchdog_exception" else None
        if quoted is not None:
            self.events.append(event_from(quoted, event.evidence))
        self.cut.append(line_no)


def _quoted_timeout(event: FrameworkEvent) -> Tree | None:
    """The watchdog timeout that a `watchdog thread terminated with exception:` record quotes, read whole."""
    inner = record_start(event.text)
    quoted = _parse(event.text[inner:], "framework_record") if inner is not None else None
    return quoted if quoted is not None and quoted.data == "watchdog_timeout" else None


def _relay(event: FrameworkEvent) -> None:
    """The family and fields of NCCL's message that a `Last error:` relays, read with NCCL's grammar."""
    read = relayed_message(event.text) if event.text else None
    if read is not None:
        event.relayed_family, event.relayed_fields = read


def quote_last_errors(events: list[FrameworkEvent], records: list[Event]) -> None:
    """A framework's `Last error:` whose text, on the next line or after it on its own line, is NCCL's WARN
    text: the log reader read that as an NCCL message, so the framework reader never saw it. Called with the records of
    each range as it is joined (the `Last error:` line comes first: its event is known by then), or with
    all the records of an input read whole: no record is kept for it."""
    waiting = {e.evidence.line + 1: e for e in events if e.kind == "last_error" and not e.text}
    # on its own line, the log reader took NCCL's text from the line and left the framework's words before it
    waiting.update({e.evidence.line: e for e in events if e.kind == "last_error" and not e.text})
    if not waiting:
        return
    for record in records:
        quoted = waiting.get(record.line)
        if quoted is not None:
            quoted.text = strip_launcher_prefix(message_text(record))[1].strip()
            _relay(quoted)
