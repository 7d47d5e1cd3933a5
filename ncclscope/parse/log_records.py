"""What the NCCL log parser gives: the shapes of records and lines it learnt, the records (events) it read,
the lines it could not read, and its result for one input.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ncclscope.parse.coarse import (
    CoarseTemplate,
)
from ncclscope.parse.fields import (
    ORIGIN_KEYS,
    ORIGIN_MEMO,
    Origin,
    Span,
    decode,
    field_decoder,
    hex_field_names,
    int_or_none,
    origin_table,
    sort_spans,
    span_text,
    spans_of,
)
from ncclscope.parse.normalize import (
    clean,
)
from ncclscope.parse.templates import (
    value_columns,
)

DECODE_MEMO = 4096  # decoded field sets kept per record shape (one per distinct value, e.g. per host)


# Families whose grammar rule holds several kinds of message (NET/IB lists devices, reports GDR,
# completion errors ...): a record's kind is the name of the alternative that matched.
CONTAINER_FAMILIES = frozenset(
    {"net_ib", "net_ib_gin", "net_socket", "net_ofi", "net_plugin_line", "other_plugin_line"}
)


# INFO records that say what a process is (its version, interfaces, NICs): one that repeats an earlier record
# of its process word for word, the time aside, adds nothing but its line (a restart loop whose processes
# keep their pids, a collector that resends) and is read once: the parser drops it (case/records.py says
# the rest). Records whose number or order is evidence (WARNs, error chains, retries) are always kept.
READ_ONCE = frozenset({"version", "cuda_driver", "bootstrap", "net_ib", "using_network"})
READ_ONCE_KEYS_MAX = 100_000  # records remembered per reader; past it they are forgotten and learnt again


@dataclass(slots=True)
class RecordShape:
    """Where one record sits in a line of a given skeleton, and what its fields are."""

    span: Span
    level: str  # INFO, WARN, TRACE, CALL, ABORT, or BARE (message without prefix)
    family: str | None  # None: not understood
    reason: str = ""
    prefix: dict[str, Span] = field(default_factory=dict)  # timestamp, host, pid, tid, cuda_dev, location
    fields: dict[str, Any] = field(default_factory=dict)  # nested; leaves are spans or True
    elided: bool = False
    stops_early: bool = False  # not understood, and the grammar ran out of text inside a message it knows
    _decoder: Callable[[bytes], dict[str, Any]] | None = field(default=None, repr=False, compare=False)
    _window: Span | None = field(default=None, repr=False, compare=False)  # the bytes the fields come from
    _memo: dict[bytes, dict[str, Any]] = field(default_factory=dict, repr=False, compare=False)
    _origin_window: Span | None = field(default=None, repr=False, compare=False)
    _origins: dict[bytes, Origin] = field(default_factory=dict, repr=False, compare=False)

    def origin(self, line: bytes) -> Origin:
        """host, pid, tid and CUDA device of `line`, read once per process: shapes that place them
        alike share one table (a process prints through some 40 shapes in a 1024-rank init, and the
        assembler asks each record for its origin)."""
        if self._origin_window is None:
            self._origin_window, self._origins = origin_table(self.prefix)
        a, b = self._origin_window
        key = line[a:b]
        found = self._origins.get(key)
        if found is None:
            spans = [self.prefix.get(name) for name in ORIGIN_KEYS]
            host, pid, tid, dev = (span_text(line[s[0] : s[1]]) if s else None for s in spans)
            found = (host, int_or_none(pid), int_or_none(tid), int_or_none(dev))
            if len(self._origins) < ORIGIN_MEMO:
                self._origins[key] = found
        return found

    def decode(self, line: bytes) -> dict[str, Any]:
        """The fields of `line` as text; a shape decoded twice gets a closure (no type tests per line).
        Lines whose field bytes are equal (the same setting or device listing on every rank) share one
        decoded dict: records are read, never changed, after parsing."""
        window = self._window
        if window is None:
            spans = spans_of(self.fields)
            window = self._window = (min(a for a, _ in spans), max(b for _, b in spans)) if spans else (0, 0)
        key = line[window[0] : window[1]]
        fields = self._memo.get(key)
        if fields is not None:
            return fields
        if self._decoder is None:
            self._decoder = field_decoder(self.fields)
            fields = decode(self.fields, line)  # many shapes serve one line: decode it directly
        else:
            fields = self._decoder(line)
        if len(self._memo) < DECODE_MEMO:
            self._memo[key] = fields
        return fields

    def __getstate__(self) -> tuple[Any, ...]:  # the decoder is a closure: rebuilt after unpickling
        return (self.span, self.level, self.family, self.reason, self.prefix, self.fields, self.elided)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self.span, self.level, self.family, self.reason, self.prefix, self.fields, self.elided = state
        self._decoder = None
        self._window = None
        self._memo = {}
        self._origin_window = None
        self._origins = {}


@dataclass(slots=True, eq=False)
class LineShape:
    """The template of one skeleton."""

    records: list[RecordShape]
    lead: Span | None = None  # content before the first record (a table row the record was glued to)
    recognized: bool = True
    fixed_digits: np.ndarray | None = None  # columns whose digit must equal the exemplar's
    exemplar: bytes = b""
    plain: bool = False  # NCCL records only, nothing before them
    _kind: np.ndarray | None = None

    def __post_init__(self) -> None:
        self.plain = bool(self.records) and self.lead is None

    @property
    def kind(self) -> np.ndarray:
        """Per column of the exemplar: a word that must stay, a number, or the host name (templates.py)."""
        if self._kind is None:
            prefix = [(name, span) for r in self.records for name, span in r.prefix.items()]
            hex_names = hex_field_names()
            fields: list[Span] = []
            hex_fields: list[Span] = []
            for record in self.records:
                sort_spans(record.fields, "", hex_names, fields, hex_fields)
            first = self.records[0].span[0] if self.records else 0
            self._kind = value_columns(self.exemplar, first, prefix, fields, hex_fields)
        return self._kind


class Event:
    """One NCCL record that is not bulk. Fields are decoded from the raw line on first use."""

    __slots__ = ("line", "raw", "shape", "_fields", "_origin", "_text")

    def __init__(self, line: int, raw: bytes, shape: RecordShape) -> None:
        self.line = line
        self.raw = raw
        self.shape = shape
        self._fields: dict[str, Any] | None = None
        self._origin: Origin | None = None
        self._text: str | None = None

    @property
    def family(self) -> str:
        return self.shape.family or ""

    @property
    def level(self) -> str:
        return self.shape.level

    @property
    def elided(self) -> bool:
        return self.shape.elided

    @property
    def text(self) -> str:
        """The line as printed, less what a terminal added (the evidence of every fact it gives)."""
        text = self._text
        if text is None:
            text = self._text = clean(self.raw.decode("utf-8", "replace")).text
        return text

    @property
    def fields(self) -> dict[str, Any]:
        if self._fields is None:
            self._fields = self.shape.decode(self.raw)
        return self._fields

    def field(self, name: str) -> Any:
        """One field of the record, without decoding the others when it is a plain one (the assembly
        reads four of a COLL line's dozen, for thousands of ranks)."""
        if self._fields is None:
            span = self.shape.fields.get(name)
            if isinstance(span, tuple):
                return span_text(self.raw[span[0] : span[1]])
            if span is None:
                return None
        return self.fields.get(name)

    def _prefix(self, key: str) -> str | None:
        span = self.shape.prefix.get(key)
        return span_text(self.raw[span[0] : span[1]]) if span else None

    def _host_pid(self) -> Origin:
        """host, pid, tid and CUDA device, read once (the assembler asks for them many times)."""
        origin = self._origin
        if origin is None:
            origin = self._origin = self.shape.origin(self.raw)
        return origin

    @property
    def origin(self) -> Origin:
        """(host, pid, tid, CUDA device)."""
        return self._host_pid()

    @property
    def host(self) -> str | None:
        return self._host_pid()[0]

    def repair_host(self, host: str) -> None:
        """The host name this record lost, known from the other records of its process (same pid)."""
        self._origin = (host, *self._host_pid()[1:])

    @property
    def pid(self) -> int | None:
        return self._host_pid()[1]

    @property
    def tid(self) -> int | None:
        return self._host_pid()[2]

    @property
    def cuda_dev(self) -> int | None:
        return self._host_pid()[3]

    @property
    def timestamp(self) -> str | None:
        return self._prefix("timestamp")

    @property
    def location(self) -> str | None:
        return self._prefix("location")

    def __getstate__(self) -> tuple[int, bytes, RecordShape]:
        return (self.line, self.raw, self.shape)

    def __setstate__(self, state: tuple[int, bytes, RecordShape]) -> None:
        self.line, self.raw, self.shape = state
        self._fields = None
        self._origin = None
        self._text = None


_SHAPE_SLOT = Event.__dict__["shape"]


class CoarseEvent(Event):
    """The Event of a COLL line read by a coarse template (coarse.py): its own field positions are
    found when it is first read (most such lines are only counted, and a worker pickles the rest)."""

    __slots__ = ("_template",)

    def __init__(self, line: int, raw: bytes, template: CoarseTemplate) -> None:
        self._template: CoarseTemplate | None = template
        super().__init__(line, raw, None)  # type: ignore[arg-type]

    @property  # type: ignore[override]
    def shape(self) -> RecordShape:
        if self._template is not None:
            _SHAPE_SLOT.__set__(self, self._template.record_for(self.raw))
            self._template = None
        return _SHAPE_SLOT.__get__(self)

    @shape.setter
    def shape(self, value: RecordShape | None) -> None:
        _SHAPE_SLOT.__set__(self, value)

    def __getstate__(self) -> tuple[int, bytes, Any]:  # type: ignore[override]
        return (self.line, self.raw, self._template or _SHAPE_SLOT.__get__(self))

    def __setstate__(self, state: tuple[int, bytes, Any]) -> None:  # type: ignore[override]
        self.line, self.raw, shape = state
        self._template, self.shape = (None, shape) if isinstance(shape, RecordShape) else (shape, None)
        self._fields = None
        self._origin = None
        self._text = None


@dataclass
class Unrecognized:
    line: int
    text: str
    reason: str


@dataclass
class LogResult:
    """What the NCCL log parser found in one source."""

    events: list[Event] = field(default_factory=list)
    nccl_lines: int = 0
    lead_lines: int = 0  # NCCL lines whose leading text (a table row ...) also went to the other readers
    recognized: int = 0
    unrecognized_count: int = 0
    unrecognized: list[Unrecognized] = field(default_factory=list)
    cut_records: int = 0  # records cut right after their prefix: nothing of their message is left
    records_repeated: int = 0  # READ_ONCE records dropped as repeats
    first_damaged: int | None = None  # the first line holding a fragment of a record or a record the grammar refused
    net_same_device: tuple[int, str] | None = None  # a NET line between two ranks on one device number
    # the last non-empty line seen: (line number, kind of its last NCCL record or "" when it is no
    # NCCL line, or None when it is an NCCL line that was not understood)
    last: tuple[int, str | None] | None = None
    families: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    # connections aggregated: key -> [lines, first line number, first raw line]
    edges: dict[tuple, list] = field(default_factory=dict)
    by_transport: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    transport_examples: dict[str, tuple[int, str]] = field(default_factory=dict)
    # COLL per-call lines by (host, pid, comm pointer): [calls, highest opCount, the Event of that line]
    coll_calls: dict[tuple[str | None, int, str], list] = field(default_factory=dict)

    def __getstate__(self) -> dict[str, Any]:
        """A worker's range holds tens of thousands of records (the first 16 MB of the mixed bench log:
        55k): they travel as columns (line numbers, lines, shapes), not as one pickled object each,
        which kept the worker busy while the assembly waited for them. Other kinds of Event go whole."""
        state = self.__dict__.copy()
        events = state["events"]
        others = [(i, e) for i, e in enumerate(events) if type(e) is not Event]
        plain = [e for e in events if type(e) is Event] if others else events
        state["events"] = ([e.line for e in plain], [e.raw for e in plain], [e.shape for e in plain], others)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        lines, raws, shapes, others = state["events"]
        events = list(map(Event, lines, raws, shapes))
        for i, event in others:  # in the order they were taken out: each goes back where it was
            events.insert(i, event)
        self.__dict__.update(state)
        self.events = events


UNRECOGNIZED_KEEP = 50


FRAGMENT_REASON = "a fragment of an NCCL record (cut by the paste or by another writer)"


REFUSED_REASON = "unreadable record"  # the grammar's reason follows


DAMAGED_REASONS = (FRAGMENT_REASON, REFUSED_REASON)  # what a damaged input leaves (parse/one_input.py: `truncated`)


def record_kind(record: RecordShape) -> str:
    """The family of a record, or for a container family the alternative it holds."""
    family = record.family or ""
    if family in CONTAINER_FAMILIES and record.fields:
        return next(iter(record.fields))
    return family


def understood(records: list[RecordShape]) -> bool:
    """A line is understood when every record that holds a message has a known family (a record
    cut right after its prefix holds nothing to understand; it is counted apart)."""
    messages = [r for r in records if r.level != "CUT"]
    return bool(messages) and all(r.family is not None for r in messages)


def message_text(e: Event) -> str:
    """The record's message: what follows `NCCL <LEVEL> ` (the whole text of a bare message)."""
    text = e.text
    marker = text.find(" NCCL ")
    if marker < 0:
        return text.strip()
    level_end = text.find(" ", marker + 6)
    return text[level_end + 1 :].strip() if level_end > 0 else ""


def without_time(line: bytes, record: RecordShape) -> bytes:
    """A record's bytes less its timestamp: what a repeat of it shares (READ_ONCE). Only the record's own: a
    line may hold the records of several processes (glued by a terminal)."""
    start, end = record.span
    span = record.prefix.get("timestamp")
    return line[start : span[0]] + line[span[1] : end] if span else line[start:end]
