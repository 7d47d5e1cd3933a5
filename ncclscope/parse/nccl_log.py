"""NCCL debug log lines -> records, fast, with grammars/nccl_log.lark as the authority.

Large logs repeat a few hundred line shapes millions of times. A line's *skeleton* is the line
with every digit replaced by '0': lines of one skeleton have the same length and the same
characters everywhere but in their digits, so the Lark parse of the first line of a skeleton
(its *template*: which byte ranges hold which fields) is valid for all of them. Lark parses each
skeleton once; the fields of every later line are cut out of it by position, a whole group of
lines at a time with numpy. Digits that belong to keywords (the 2 of "P2P") are checked against
the template so a line that only looks alike is parsed on its own.

Connection lines, GRAPH ring lines and per-call lines are the bulk of big logs; they are
aggregated column-wise and never become per-line objects. Every other record becomes an `Event`.
"""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from lark import Lark, Token, Tree
from lark.exceptions import LarkError, UnexpectedToken

from ncclscope.parse import grammars
from ncclscope.parse.coarse import (
    COARSE_FAMILIES,
    CoarseTemplate,
    span_words,
    word_classes,
)
from ncclscope.parse.coll_scan import CollScan, hex_values
from ncclscope.parse.normalize import (
    CUT_MARKER_RE,
    CUT_PREFIX_RE,
    clean,
    find_records,
    strip_launcher_prefix,
    unwrap_autolinks,
)
from ncclscope.parse.shapes import InsideValue, ShapeMover, SpanPlan, coarse_key, shape_key
from ncclscope.parse.templates import (
    HEX_DIGITS,
    TEMPLATES_PER_SKELETON,
    WORD_SKELETON,
    Template,
    template_of,
    value_columns,
)

DIGITS_TO_ZERO = bytes.maketrans(b"123456789", b"000000000")
MAX_LINE_BYTES = 16 * 1024  # NCCL lines are < 1 KiB (< 4 KiB since 2.29): longer ones are reported, not parsed
CACHE_LIMIT = 50_000  # skeletons kept; unique-per-line shapes (pointers, prose) would grow it forever
DECODE_MEMO = 4096  # decoded field sets kept per record shape (one per distinct value, e.g. per host)
COARSE_CHUNK = 8192  # COLL lines of other widths read in one pass (coll_scan.py): their memory stays small
COLL_PENDING_MAX = 50_000  # COLL lines kept (with their columns) before they are reduced together
PROMOTE_MIN = 1024  # lines of one new word skeleton in a block worth learning it (fewer: read by a coarse template)
COARSE_TEMPLATES_MAX = 32  # per coarse key: one per collective (AllReduce, Broadcast ...), a few more
GROUP_VECTOR_MIN = 8  # below this many lines per shape, plain slicing is cheaper than numpy
ELLIPSIS_RE = re.compile(r"\s*(?:\.{3,}|…)\s*$")

# families aggregated column-wise (the bulk of big logs)
# Messages that, without NCCL's prefix, are any program's text: a row of '=' ends NCCL's topology dump
# and every banner of a job script.
BARE_TOO_PLAIN = frozenset({"system_footer"})
NCCL_LINE_MAX = 1023  # NCCL formats each debug line into a 1024-byte buffer (src/debug.cc) and cuts the rest
BULK_FAMILIES = frozenset(
    {"connection", "collnet_connection", "graph_ring", "graph_tree", "graph_channel", "coll_call", "call", "trace"}
)

Span = tuple[int, int]
Origin = tuple[str | None, int | None, int | None, int | None]  # host, pid, tid, CUDA device
ORIGIN_KEYS = ("host", "pid", "tid", "cuda_dev")
ORIGIN_MEMO = 65_536  # processes remembered per prefix layout
# prefix layout (the origin fields' spans relative to the first) -> its window's bytes -> origin
_ORIGIN_TABLES: dict[tuple[Span | None, ...], dict[bytes, Origin]] = {}

# Families whose grammar rule holds several kinds of message (NET/IB lists devices, reports GDR,
# completion errors ...): a record's kind is the name of the alternative that matched.
CONTAINER_FAMILIES = frozenset(
    {"net_ib", "net_ib_gin", "net_socket", "net_ofi", "net_plugin_line", "other_plugin_line"}
)

# Pieces of NCCL records left on a line of their own when several writers share a stream (an
# orphan tail "000 commId 0x... - Init COMPLETE", "NCCL IN" cut by another logger): counted as
# NCCL lines that were not understood, never dropped as prose.
FRAGMENT_RE = re.compile(
    r"\S*:\d+:\d+ \[\d+\] NCCL\b|\bNCCL (?:IN|INF|WA|WAR|TR|TRA)\b|- Init (?:START|COMPLETE)\b|\bcommId 0x"
    r"|\bvia (?:P2P|SHM|NET)/|\bUsing network \w|\bnRanks \d+ nNodes \d+"
)


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
            self._origin_window, self._origins = _origin_table(self.prefix)
        a, b = self._origin_window
        key = line[a:b]
        found = self._origins.get(key)
        if found is None:
            spans = [self.prefix.get(name) for name in ORIGIN_KEYS]
            host, pid, tid, dev = (span_text(line[s[0] : s[1]]) if s else None for s in spans)
            found = (host, _int_or_none(pid), _int_or_none(tid), _int_or_none(dev))
            if len(self._origins) < ORIGIN_MEMO:
                self._origins[key] = found
        return found

    def decode(self, line: bytes) -> dict[str, Any]:
        """The fields of `line` as text; a shape decoded twice gets a closure (no type tests per line).
        Lines whose field bytes are equal (the same setting or device listing on every rank) share one
        decoded dict: records are read, never changed, after parsing."""
        window = self._window
        if window is None:
            spans = _spans_of(self.fields)
            window = self._window = (min(a for a, _ in spans), max(b for _, b in spans)) if spans else (0, 0)
        key = line[window[0] : window[1]]
        fields = self._memo.get(key)
        if fields is not None:
            return fields
        if self._decoder is None:
            self._decoder = _decoder(self.fields)
            fields = _decode(self.fields, line)  # many shapes serve one line: decode it directly
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
            hex_names = _hex_fields()
            fields: list[Span] = []
            hex_fields: list[Span] = []
            for record in self.records:
                _sort_spans(record.fields, "", hex_names, fields, hex_fields)
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
        which took the worker 0.08 s while the assembly waited for them. Other kinds of Event go whole."""
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
DAMAGED_REASONS = (FRAGMENT_REASON, REFUSED_REASON)  # what a damaged input leaves (source.py: `truncated`)


def _parser() -> Lark:
    return grammars.load("nccl_log", ("record", "loose_record", "message"))


def _span(tok: Any) -> Span:
    """Position of a token (a Tree here would be a grammar change the parser must follow)."""
    return (tok.start_pos or 0, tok.end_pos or 0)


def _extract(tree: Tree) -> dict[str, Any]:
    """A parse tree as nested {field: span | True | dict | list} named by the grammar's rules."""
    out: dict[str, Any] = {}
    for child in tree.children:
        value: Any
        if isinstance(child, Token):
            key, value = child.type.lower(), _span(child)
        else:
            key = str(child.data)
            kids = child.children
            if len(kids) == 1 and isinstance(kids[0], Token):
                value = _span(kids[0])
            elif not kids:
                value = True
            else:
                value = _extract(child)
        existing = out.get(key)
        if existing is None:
            out[key] = value
        elif isinstance(existing, _Repeated):
            existing.append(value)
        else:
            out[key] = _Repeated([existing, value])
    return out


class _Repeated(list):
    """A field that occurs several times in one record (device lists, ring ranks ...)."""


def _shift(value: Any, mapper: Callable[[int, int], Span]) -> Any:
    if isinstance(value, tuple):
        return mapper(*value)
    if isinstance(value, dict):
        return {k: _shift(v, mapper) for k, v in value.items()}
    if isinstance(value, list):
        return _Repeated(_shift(v, mapper) for v in value)
    return value


def _sort_spans(value: Any, name: str, hex_names: frozenset[str], plain: list[Span], hexes: list[Span]) -> None:
    """The spans of a field set into `hexes` (fields named in `hex_names`) and `plain` (the others)."""
    if isinstance(value, tuple):
        (hexes if name in hex_names else plain).append(value)
    elif isinstance(value, dict):
        for key, inner in value.items():
            _sort_spans(inner, key, hex_names, plain, hexes)
    elif isinstance(value, list):
        for inner in value:
            _sort_spans(inner, name, hex_names, plain, hexes)


def _spans_of(value: Any) -> list[Span]:
    """Every span of a field set."""
    spans: list[Span] = []
    _sort_spans(value, "", frozenset(), spans, spans)
    return spans


# Tokens whose ids NCCL prints in hex: an opCount (`%lx`), a bus id, a topology node (`GPU/0-18000`)
HEX_ID_TOKENS = ("HEXID", "HEXID_PAIR", "NODE_REF")


@functools.cache
def _hex_fields() -> frozenset[str]:
    """The fields the grammar reads as one hex-id token (`op_count: HEXID`, `graph_hop: NODE_REF`). A
    template must take hex digits in their ids even when its exemplar's look decimal (`opCount 7`,
    `GPU/0-18000`): else the next line's `opCount 1a` or `GPU/0-2a000` needs a template of its own, and
    past a few per word skeleton every such line is parsed alone."""
    names = {token.lower() for token in HEX_ID_TOKENS}  # the token itself, where a rule uses it inline
    for rule in _parser().rules:
        expansion = [getattr(symbol, "name", None) for symbol in rule.expansion]
        if len(expansion) == 1 and expansion[0] in HEX_ID_TOKENS:
            names.add(str(rule.origin.name))
    return frozenset(names)


def span_text(chunk: bytes) -> str:
    """A field's text; a terminal's colour codes or NUL bytes inside the field (the span maps around them) go."""
    text = chunk.decode("utf-8", "replace")
    return clean(text).text if "\x1b" in text or "\x00" in text else text


def _origin_table(prefix: dict[str, Span]) -> tuple[Span, dict[bytes, Origin]]:
    """The bytes that hold a record's origin, and the table shared by the shapes that lay it out alike."""
    spans = [prefix.get(name) for name in ORIGIN_KEYS]
    present = [span for span in spans if span]
    if not present:
        return (0, 0), _ORIGIN_TABLES.setdefault((), {})
    a, b = min(s[0] for s in present), max(s[1] for s in present)
    layout = tuple((s[0] - a, s[1] - a) if s else None for s in spans)
    return (a, b), _ORIGIN_TABLES.setdefault(layout, {})


def _int_or_none(text: str | None) -> int | None:
    return int(text) if text else None


def _int_or(text: str, default: int) -> int:
    return int(text) if text.strip().lstrip("-").isdigit() else default


def _decoder(value: Any) -> Callable[[bytes], Any]:
    """A function that decodes `value`'s spans out of a line, mirroring `_decode`."""
    if isinstance(value, tuple):
        a, b = value
        return lambda line: span_text(line[a:b])
    if isinstance(value, dict):
        parts = [(k, _decoder(v)) for k, v in value.items()]
        return lambda line: {k: part(line) for k, part in parts}
    if isinstance(value, list):
        items = [_decoder(v) for v in value]
        return lambda line: [item(line) for item in items]
    return lambda line: value


def _hex_or(chunk: bytes, default: int = -1) -> int:
    try:
        return int(span_text(chunk), 16)
    except ValueError:
        return default


def _decode(value: Any, line: bytes) -> Any:
    if isinstance(value, tuple):
        return span_text(line[value[0] : value[1]])
    if isinstance(value, dict):
        return {k: _decode(v, line) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v, line) for v in value]
    return value


@dataclass
class ShapeBook:
    """What a parser has learnt about line shapes. Parsers of several byte ranges of one file in one
    worker share it, so that the grammar reads each kind of line once per worker, not once per range."""

    cache: dict[bytes, LineShape] = field(default_factory=dict)  # exact digit skeleton -> shape
    coarse: dict[bytes, list[tuple[ShapeMover, LineShape]]] = field(default_factory=dict)
    templates: dict[bytes, list[Template]] = field(default_factory=dict)  # word skeleton -> templates
    # COLL lines of any widths (coarse.py): coarse key -> templates, and word skeleton -> its coarse key
    coarse_templates: dict[bytes, list[CoarseTemplate]] = field(default_factory=dict)
    coarse_words: dict[bytes, bytes | None] = field(default_factory=dict)
    coll_scan: CollScan | None = None  # the coarse templates as one expression (coll_scan.py), made on use
    host_ids: dict[bytes, int] = field(default_factory=dict)


class NcclLogParser:
    """Feeds lines of one source; collects records, counts and the lines that are not NCCL's."""

    def __init__(self, on_other: Callable[[int, str], None], shapes: ShapeBook | None = None) -> None:
        self._result = LogResult()
        self._coll_rows: list[tuple] = []  # per batch of COLL lines, its columns (_coll_calls)
        self._coll_pending = 0  # lines in _coll_rows
        self._on_other = on_other
        shapes = shapes or ShapeBook()
        self._book = shapes
        self._cache = shapes.cache
        self._parser = _parser()
        self._host_ids = shapes.host_ids
        self._coarse_cache = shapes.coarse
        self._templates = shapes.templates
        self._coarse_templates = shapes.coarse_templates
        self._coarse_words = shapes.coarse_words
        self._coarse_missed = False  # the line being learnt is one the coarse templates did not read
        self.lark_parses = 0  # how many lines the grammar itself read (the rest reused a parse)
        self.shapes_made = 0  # shapes made for new skeletons, by the grammar or by moving a known one
        self._stopped_early = False  # the last parse that failed ran out of text inside a known message
        self._unrecognized_cutoff = float("inf")

    @property
    def result(self) -> LogResult:
        """What was read so far (the COLL lines' per-rank summary brought up to date)."""
        if self._coll_rows:
            self._reduce_coll_calls()
        return self._result

    # ----------------------------------------------------------------------------------- lines
    def feed_block(self, data: bytes, first_line: int) -> None:
        """`data` holds whole lines separated by b'\\n' (no trailing newline)."""
        data = unwrap_autolinks(data)
        lines = data.split(b"\n")
        words = data.translate(WORD_SKELETON).split(b"\n")
        groups: dict[LineShape, list[int]] = {}
        by_word: dict[bytes, list[int]] = {}
        by_coarse: dict[bytes, list[int]] = {}
        templates = self._templates
        coarse_words = self._coarse_words
        for i, word in enumerate(words):
            if word in templates:  # the hot path: a line of a known word skeleton (see templates.py)
                pending = by_word.get(word)
                if pending is None:
                    by_word[word] = [i]
                else:
                    pending.append(i)
                continue
            if self._coarse_templates:  # COLL lines whose widths make a new word skeleton (coarse.py)
                key = coarse_words.get(word, b"")
                if key == b"":
                    key = self._coarse_route(word)
                if key is not None:
                    pending = by_coarse.get(word)
                    if pending is None:
                        by_coarse[word] = [i]
                    else:
                        pending.append(i)
                    continue
            self._exact(i, lines, word, groups, first_line)
        for word, indices in by_word.items():
            self._match_templates(word, indices, lines, groups, first_line)
        rare: list[int] = []  # lines of word skeletons seen rarely
        for word, indices in by_coarse.items():
            if len(indices) < PROMOTE_MIN:
                rare.extend(indices)
                continue
            # a width that recurs: its shape is learnt once, its lines read the fixed-width way
            self._exact(indices[0], lines, word, groups, first_line)
            if word in self._templates:
                self._match_templates(word, indices[1:], lines, groups, first_line)
            else:
                rare.extend(indices[1:])
        rare.sort()
        for at in range(0, len(rare), COARSE_CHUNK):  # a pass's rows hold a dozen values a line
            self._match_coarse(rare[at : at + COARSE_CHUNK], lines, words, groups, first_line)
        for shape, indices in groups.items():
            self._emit_group(shape, [lines[i] for i in indices], [first_line + i for i in indices])
        if self._coll_rows:  # the rows hold their lines: reduced now, the block's memory goes back whole
            self._reduce_coll_calls()
        self._note_last(lines, first_line)

    def _exact(
        self,
        i: int,
        lines: list[bytes],
        word: bytes,
        groups: dict[LineShape, list[int]],
        first_line: int,
    ) -> None:
        """Line `i` through the exact skeleton cache (learning its shape if new); a shape that can be
        shared becomes a template of the line's word skeleton."""
        cache = self._cache
        skeleton = lines[i].translate(DIGITS_TO_ZERO)  # only lines no template read need it
        shape = cache.get(skeleton)
        if shape is None:
            line = lines[i]
            if len(line) > MAX_LINE_BYTES:
                self._overlong(first_line + i, line)
                return
            shape = self._shape_for_new_skeleton(line)
            if len(cache) >= CACHE_LIMIT:
                cache.clear()
                self._coarse_cache.clear()
                self._templates.clear()
                self._coarse_templates.clear()
                self._coarse_words.clear()
                self._book.coll_scan = None
            cache[skeleton] = shape
        if shape.plain and shape.recognized:
            known = self._templates.setdefault(word, [])
            if (
                len(known) < TEMPLATES_PER_SKELETON
                and len(shape.exemplar) == len(word)
                and not any(t.shape is shape for t in known)  # the same template would refuse the same lines
            ):
                known.append(template_of(shape, shape.kind))
            if len(shape.records) == 1 and shape.records[0].family in COARSE_FAMILIES:
                self._add_coarse(word, shape)
        if not shape.records:
            self._on_other(first_line + i, lines[i].decode("utf-8", "replace"))
            return
        if shape.lead is not None:  # a table row the record was glued to also goes to the other readers
            lead = lines[i][shape.lead[0] : shape.lead[1]].decode("utf-8", "replace")
            self._result.lead_lines += 1
            self._on_other(first_line + i, clean(lead).text)
        groups.setdefault(shape, []).append(i)

    def _match_templates(
        self,
        word: bytes,
        indices: list[int],
        lines: list[bytes],
        groups: dict[LineShape, list[int]],
        first_line: int,
    ) -> None:
        """Lines of one word skeleton, read with the first of its templates each matches; the others
        the exact way (they add templates)."""
        rest = np.asarray(indices, dtype=np.intp)
        matrix = np.frombuffer(b"".join([lines[i] for i in indices]), dtype=np.uint8).reshape(len(indices), -1)
        templates = self._templates.get(word, [])  # none left: the caches were emptied while reading this block
        tried = 0
        while rest.size:
            for template in templates[tried:]:
                ok = template.matches(matrix)
                if ok.any():
                    groups.setdefault(template.shape, []).extend(rest[ok].tolist())
                    rest, matrix = rest[~ok], matrix[~ok]
                    if not rest.size:
                        return
            tried = len(templates)
            # the first line no template reads is parsed the exact way; its shape may serve the others
            self._exact(int(rest[0]), lines, word, groups, first_line)
            rest, matrix = rest[1:], matrix[1:]
            if len(templates) == tried:  # no new template (full, or a line that cannot be shared)
                for i in rest.tolist():
                    self._exact(i, lines, word, groups, first_line)
                return

    def _coarse_route(self, word: bytes) -> bytes | None:
        """The coarse key of a word skeleton when a coarse template may read its lines, else None
        (remembered either way; a new template forgets the word skeletons that had none)."""
        key = coarse_key(word)
        found = key if key in self._coarse_templates else None
        if len(self._coarse_words) < CACHE_LIMIT:
            self._coarse_words[word] = found
        return found

    def _add_coarse(self, word: bytes, shape: LineShape) -> None:
        """A COLL line's shape as a coarse template of its coarse key (when its words allow one)."""
        key = coarse_key(word)
        known = self._coarse_templates.get(key, [])
        if len(known) >= COARSE_TEMPLATES_MAX or (known and not self._coarse_missed):
            return  # learnt for a line no coarse template was asked to read: most likely one already can
        scan = self._coll_scan()
        if known and scan is not None and scan.rows(shape.exemplar)[0][0]:  # another width of a kind already known
            return
        template = _coarse_template(shape)
        if template is None:
            return
        self._coarse_templates[key] = [*known, template]
        self._coarse_words.clear()  # word skeletons that had no template may have one now
        self._book.coll_scan = None

    def _coll_scan(self) -> CollScan | None:
        """The pass that reads the COLL lines the coarse templates know (coll_scan.py); None before the
        first template."""
        book = self._book
        if book.coll_scan is None and self._coarse_templates:
            book.coll_scan = CollScan(t for known in self._coarse_templates.values() for t in known)
        return book.coll_scan

    def _scanned_coll_calls(
        self, scan: CollScan, rows: list[tuple[bytes, ...]], at: list[int], first_line: int
    ) -> None:
        """The COLL lines a pass read (rows[k] is the line at[k] of the block), as _coll_calls reads lines of
        one shape: a batch of columns per template."""
        read = [k for k, row in enumerate(rows) if row[0]]
        if not read:
            return
        res = self._result
        res.nccl_lines += len(read)
        res.recognized += len(read)
        res.families["coll_call"] += len(read)
        several = len(scan.alternatives) > 1
        for alternative in scan.alternatives:
            groups = alternative.groups
            mine = [k for k in read if rows[k][groups["op_count"]]] if several else read
            if not mine:
                continue
            columns = list(zip(*[rows[k] for k in mine], strict=True))
            where = np.asarray(at, dtype=np.int64)[mine]
            if alternative.variant is None:
                batches = [(next(iter(alternative.templates.values())), None)]
            else:
                keywords, which = np.unique(np.array(columns[alternative.variant]), return_inverse=True)
                batches = [(alternative.templates[bytes(k)], which == n) for n, k in enumerate(keywords.tolist())]
            hosts = self._host_ids_of(columns[groups["host"]]) if "host" in groups else np.full(len(mine), -1)
            pids = np.array(columns[groups["pid"]]).astype(np.int64) if "pid" in groups else np.full(len(mine), -1)
            ops = hex_values(np.array(columns[groups["op_count"]]))
            comms = np.array(columns[groups["comm"]])
            lines = columns[0]
            for template, mask in batches:
                if mask is None:
                    picked = (pids, hosts, comms, ops, where + first_line, lines)
                else:
                    chosen = np.flatnonzero(mask)
                    picked = (
                        pids[chosen],
                        hosts[chosen],
                        comms[chosen],
                        ops[chosen],
                        where[chosen] + first_line,
                        [lines[k] for k in chosen.tolist()],
                    )
                self._coll_rows.append((*picked, template))
                self._coll_pending += len(picked[5])
        if self._coll_pending >= COLL_PENDING_MAX:
            self._reduce_coll_calls()

    def _host_ids_of(self, names: Sequence[bytes] | np.ndarray) -> np.ndarray:
        """The ids (ShapeBook.host_ids) of host names, one per line."""
        unique, inverse = np.unique(np.asarray(names), return_inverse=True)
        host_ids = self._host_ids
        ids = [host_ids.setdefault(bytes(u), len(host_ids)) for u in unique.tolist()]
        return np.array(ids, dtype=np.int64)[inverse]

    def _match_coarse(
        self,
        indices: list[int],
        lines: list[bytes],
        words: list[bytes],
        groups: dict[LineShape, list[int]],
        first_line: int,
    ) -> None:
        """COLL lines of word skeletons seen rarely, read by the coarse templates in one pass (coll_scan.py);
        the first line none reads is parsed the exact way (which may add a template), then the others
        are tried again."""
        rest = indices
        while rest:
            scan = self._coll_scan()
            if scan is None:
                break
            rows = scan.rows(b"\n".join([lines[i] for i in rest]))
            if len(rows) != len(rest):  # cannot be: lines hold no b"\n"; read them the exact way then
                break
            self._scanned_coll_calls(scan, rows, rest, first_line)
            rest = [i for i, row in zip(rest, rows, strict=True) if not row[0]]
            if not rest:
                return
            self._coarse_missed = True
            self._exact(rest[0], lines, words[rest[0]], groups, first_line)
            self._coarse_missed = False
            rest = rest[1:]
            if self._book.coll_scan is scan:  # no new template: the rest the exact way
                break
        for i in rest:
            self._exact(i, lines, words[i], groups, first_line)

    def _note_last(self, lines: list[bytes], first_line: int) -> None:
        """What the last non-empty line of the block is (truncation: does the input stop mid-listing?)."""
        for i in range(len(lines) - 1, -1, -1):
            if not lines[i].strip():
                continue
            shape = self._cache.get(lines[i].translate(DIGITS_TO_ZERO))
            if shape is None and len(lines[i]) <= MAX_LINE_BYTES:
                shape = self._shape_for_new_skeleton(lines[i])
            if shape is None or not shape.records:
                self._result.last = (first_line + i, "")
            elif not shape.recognized:
                # "?": a whole record whose message is new to us (NCCL adds messages in every release,
                # often at teardown); None: a fragment, or a record that stops inside its prefix
                unknown = all(
                    r.reason == "unknown message" and not r.stops_early for r in shape.records if r.family is None
                )
                self._result.last = (first_line + i, "?" if unknown else None)
            else:
                self._result.last = (first_line + i, record_kind(shape.records[-1]))
            return

    def _overlong(self, line_no: int, line: bytes) -> None:
        if b"NCCL " in line:
            self._result.nccl_lines += 1
            self._unrecognized(line_no, line[:300], f"line too long ({len(line)} bytes), not parsed")
        else:
            self._on_other(line_no, "")

    def _unrecognized(self, line_no: int, raw: bytes, reason: str) -> None:
        res = self._result
        res.unrecognized_count += 1
        if reason.startswith(DAMAGED_REASONS) and (res.first_damaged is None or line_no < res.first_damaged):
            res.first_damaged = line_no  # whether or not the line is among those kept
        if line_no > self._unrecognized_cutoff:
            return
        kept = res.unrecognized
        kept.append(Unrecognized(line_no, clean(raw.decode("utf-8", "replace")).text[:300], reason))
        if len(kept) >= 4 * UNRECOGNIZED_KEEP:  # keep the earliest lines, whatever order the groups came in
            kept.sort(key=lambda u: u.line)
            del kept[UNRECOGNIZED_KEEP:]
            self._unrecognized_cutoff = kept[-1].line

    # -------------------------------------------------------------------------------- learning
    def _shape_for_new_skeleton(self, line: bytes) -> LineShape:
        """Lines differing only in number lengths or hex values reuse a parse (see shapes.py)."""
        self.shapes_made += 1
        key = shape_key(line)
        known = self._coarse_cache.get(key)
        for n, (mover, shape) in enumerate(known or ()):
            moved = self._move_shape(mover, shape, line)
            if moved is not None:
                if n:  # the shape that served last is tried first: lines of one kind come in runs
                    known.insert(0, known.pop(n))  # type: ignore[union-attr]
                return moved
        shape = self._learn(line)
        if shape.records:
            known = self._coarse_cache.setdefault(key, [])
            if len(known) < TEMPLATES_PER_SKELETON:  # "AllReduce" and "AllGather" lines: one each
                known.append((ShapeMover(line, shape.kind), shape))
        return shape

    def _move_shape(self, mover: ShapeMover, shape: LineShape, line: bytes) -> LineShape | None:
        moved = _moved_shape(mover, shape, line)
        if moved is not None:
            moved.fixed_digits = self._fixed_digit_columns(line, moved.records)
        return moved

    def _learn(self, raw: bytes) -> LineShape:
        """Parse one exemplar line with the grammar and remember where its fields are."""
        text_raw = raw.decode("latin-1")  # one char per byte: positions stay byte positions
        cl = clean(text_raw)
        text = cl.text
        spans = find_records(text)
        records: list[RecordShape] = []
        lead: Span | None = None
        if spans:
            before = text[: spans[0][0]]
            _, rest = strip_launcher_prefix(before.lstrip())
            if rest.strip():
                start = spans[0][0] - len(rest)
                lead = cl.raw_span(start, spans[0][0])
            for start, end in spans:
                records.append(self._parse_record(text[start:end], start, "record", cl.raw_span))
        else:
            prefix, rest = strip_launcher_prefix(text)
            body = rest.strip()
            start = len(prefix) + (len(rest) - len(rest.lstrip()))
            cut = CUT_MARKER_RE.match(body)
            if cut:  # "CCL INFO Channel ...": the record lost its beginning, its message is whole
                start += cut.end()
                body = body[cut.end() :]
            if body and body[0] not in "#|" and len(body) < 4096:
                record = self._parse_record(body, start, "message", cl.raw_span)
                if record.family is not None and cut:
                    record.level = cut[1]
                    record.reason = "the record's prefix was cut off"
                if record.family is not None:
                    records.append(record)
                elif FRAGMENT_RE.search(body):
                    whole = cl.raw_span(start, start + len(body))
                    records.append(RecordShape(whole, "INFO", None, FRAGMENT_REASON))
        shape = LineShape(records, lead, _understood(records), exemplar=raw)
        if records:
            shape.fixed_digits = self._fixed_digit_columns(raw, records)
        return shape

    def _parse_record(self, text: str, offset: int, start: str, to_raw: Callable[[int, int], Span]) -> RecordShape:
        def mapper(a: int, b: int) -> Span:
            return to_raw(a + offset, b + offset)

        whole = to_raw(offset, offset + len(text))
        tree, elided = self._try_parse(text, start)
        if tree is None:
            if start == "message":
                return RecordShape(whole, "BARE", None, "not an NCCL message")
            stops_early = self._stopped_early
            loose = self._parse_loose(text, whole, mapper)
            loose.stops_early = stops_early
            return loose
        if start == "message" and (tree.data in BARE_TOO_PLAIN or (tree.data == "version" and "compiled" in text)):
            # "NCCL version 2.28.9 compiled with CUDA 13.0" heads an ncclras report: that reader takes it
            return RecordShape(whole, "BARE", None, "not an NCCL message")
        if start == "message":
            bare = _extract(tree)
            return RecordShape(
                whole, "BARE", str(tree.data), fields=_shift(bare, mapper), elided=elided or "ellipsis" in bare
            )
        prefix: dict[str, Span] = {}
        body = tree.children[-1]
        for child in tree.children[:-1]:
            prefix.update(self._prefix_fields(child, text))
        level = str(body.data).upper()
        fields: dict[str, Any] = {}
        family: str = level.lower()
        for child in body.children:
            if isinstance(child, Tree) and child.data == "location":
                prefix["location"] = _span(child.children[0])
            elif isinstance(child, Tree):
                family = str(child.data)
                fields = _extract(child)
                if not child.children:
                    fields = {}
            elif isinstance(child, Token) and child.type == "TEXT":
                fields = {"text": _span(child)}
        return RecordShape(
            whole,
            level,
            family,
            prefix={k: mapper(*v) for k, v in prefix.items()},
            fields=_shift(fields, mapper),
            elided=elided or "ellipsis" in fields,
        )

    def _try_parse(self, text: str, start: str) -> tuple[Tree | None, bool]:
        self.lark_parses += 1
        self._stopped_early = False
        try:
            return self._parser.parse(text, start=start), False
        except UnexpectedToken as exc:
            self._stopped_early = exc.token.type == "$END"
        except LarkError:
            pass
        trimmed = ELLIPSIS_RE.sub("", text)
        if trimmed != text and trimmed:
            try:
                return self._parser.parse(trimmed, start=start), True
            except LarkError:
                pass
        if NCCL_LINE_MAX - 2 <= len(text) <= NCCL_LINE_MAX:
            # NCCL cut the line itself at its 1024-byte buffer (src/debug.cc), often inside the last item of a
            # long listing (Trees, ring orders): read the items before the cut, marked as elided like "..."
            cut = text.rstrip()
            for _ in range(4):
                space = cut.rfind(" ")
                if space <= 0:
                    break
                cut = cut[:space].rstrip()
                try:
                    return self._parser.parse(cut, start=start), True
                except LarkError:
                    continue
        return None, False

    def _parse_loose(self, text: str, whole: Span, mapper: Callable[[int, int], Span]) -> RecordShape:
        try:
            tree = self._parser.parse(text, start="loose_record")
        except LarkError as exc:
            if CUT_PREFIX_RE.fullmatch(text.rstrip()):
                return RecordShape(whole, "CUT", None, "a record cut after its prefix (another writer's line follows)")
            return RecordShape(whole, "INFO", None, f"{REFUSED_REASON}: {str(exc).splitlines()[0][:120]}")
        prefix: dict[str, Span] = {}
        level = "INFO"
        message: Span | None = None
        for child in tree.children:
            if isinstance(child, Tree) and child.data == "prefix":
                prefix.update(self._prefix_fields(child, text))
            elif isinstance(child, Tree) and child.data == "location":
                prefix["location"] = _span(child.children[0])
            elif isinstance(child, Token) and child.type == "LEVEL":
                level = str(child)
            elif isinstance(child, Token) and child.type == "TEXT":
                message = _span(child)
        mapped = {k: mapper(*v) for k, v in prefix.items()}
        fields = {"text": mapper(*message)} if message else {}
        if level in ("WARN", "ABORT"):
            # any WARN is a WARN: its text is kept whole and grouped by message later
            return RecordShape(whole, level, "warn", prefix=mapped, fields=fields)
        return RecordShape(whole, level, None, "unknown message", prefix=mapped, fields=fields)

    @staticmethod
    def _prefix_fields(prefix: Tree, text: str) -> dict[str, Span]:
        out: dict[str, Span] = {}
        for part in prefix.children:
            if not isinstance(part, Tree) or not part.children:
                continue
            token = part.children[0]
            if part.data == "device":
                token = token.children[0] if isinstance(token, Tree) else token
                out["cuda_dev"] = _span(token)
            elif part.data == "timestamp":
                out["timestamp"] = _span(token)
            elif part.data == "origin":
                a, b = _span(token)
                value = text[a:b]
                if getattr(token, "type", "") == "PROCESS":
                    host, pid, tid = value.rsplit(":", 2)
                    h_end = a + len(host)
                    p_end = h_end + 1 + len(pid)
                    out["host"] = (a, h_end)
                    out["pid"] = (h_end + 1, p_end)
                    out["tid"] = (p_end + 1, b)
                else:
                    out["host"] = (a, b)
        return out

    @staticmethod
    def _fixed_digit_columns(raw: bytes, records: list[RecordShape]) -> np.ndarray | None:
        """Digits inside a record but outside every field: keywords such as P2P, NV18, C2C."""
        covered = np.zeros(len(raw), dtype=bool)
        inside = np.zeros(len(raw), dtype=bool)
        for record in records:
            inside[record.span[0] : record.span[1]] = True
            for a, b in list(record.prefix.values()) + _spans_of(record.fields):
                covered[a:b] = True
        digits = np.frombuffer(raw, dtype=np.uint8)
        columns = np.flatnonzero(inside & ~covered & (digits >= 48) & (digits <= 57))
        return columns.astype(np.intp) if columns.size else None

    # -------------------------------------------------------------------------------- emitting
    def _emit_group(self, shape: LineShape, lines: list[bytes], line_nos: list[int]) -> None:
        if shape.fixed_digits is not None and len(lines) > 1:
            cols = shape.fixed_digits
            want = np.frombuffer(shape.exemplar, np.uint8)[cols]
            matrix = np.frombuffer(b"".join(lines), dtype=np.uint8).reshape(len(lines), len(lines[0]))
            same = (matrix[:, cols] == want).all(axis=1)
            if not same.all():
                for i in np.flatnonzero(~same).tolist():  # other keyword digits: parse on its own
                    self._emit_group(self._learn(lines[i]), [lines[i]], [line_nos[i]])
                keep = np.flatnonzero(same).tolist()
                lines = [lines[i] for i in keep]
                line_nos = [line_nos[i] for i in keep]
                if not lines:
                    return
        res = self._result
        n = len(lines)
        res.nccl_lines += n
        if shape.recognized:
            res.recognized += n
        else:
            reason = next((r.reason for r in shape.records if r.family is None and r.level != "CUT"), "")
            for line, no in zip(lines, line_nos, strict=False):
                self._unrecognized(no, line, reason)
        for record in shape.records:
            if record.family is None:
                res.cut_records += n if record.level == "CUT" else 0
                continue
            res.families[record.family] += n
            if record.family in BULK_FAMILIES:
                self._bulk(record, lines, line_nos)
            else:
                # copies: an event's line kept alone would pin the allocator's arena of its whole block
                res.events.extend(map(Event, line_nos, [memoryview(x).tobytes() for x in lines], [record] * n))

    # ------------------------------------------------------------------------------ bulk paths
    def _bulk(self, record: RecordShape, lines: list[bytes], line_nos: list[int]) -> None:
        """Connections are aggregated; the other bulk families (GRAPH rings and trees, per-call
        lines) are only counted, in `families`."""
        if record.family in ("connection", "collnet_connection"):
            self._connections(record, lines, line_nos)
        elif record.family == "coll_call":
            self._coll_calls(record, lines, line_nos)

    def _coll_calls(self, record: RecordShape, lines: list[bytes], line_nos: list[int]) -> None:
        """Per rank (process and communicator pointer): how many calls, and the one with the highest opCount.
        A batch only converts its columns here (a batch holds about one line per rank: a per-batch reduction
        costs more than its lines); the rows are reduced together in numpy every COLL_PENDING_MAX lines and
        when the result is read. A hung rank stops calling; the others' counts run ahead (rules/hang.py)."""
        f = record.fields
        if not isinstance(f.get("op_count"), tuple) or not isinstance(f.get("comm"), tuple):
            return
        n = len(lines)
        column = self._columns(lines)
        hosts = self._host_column(record, column, n)
        pids = self._int_column(column, record.prefix.get("pid"), n)
        ops = self._hex_column(column, f["op_count"])
        self._coll_rows.append((pids, hosts, column(f["comm"]), ops, line_nos, lines, record))
        self._coll_pending += n
        if self._coll_pending >= COLL_PENDING_MAX:  # each row keeps its line alive: memory stays bounded
            self._reduce_coll_calls()

    def _reduce_coll_calls(self) -> None:
        rows, self._coll_rows, self._coll_pending = self._coll_rows, [], 0
        pids = np.concatenate([r[0] for r in rows])
        hosts = np.concatenate([r[1] for r in rows])
        comm_text, comm_col = np.unique(np.concatenate([r[2] for r in rows]), return_inverse=True)
        ops = np.concatenate([r[3] for r in rows])
        sizes = [len(r[4]) for r in rows]
        batch = np.repeat(np.arange(len(rows)), sizes)
        offset = np.arange(len(ops)) - np.repeat(np.cumsum([0, *sizes[:-1]]), sizes)
        # the highest opCount of each rank; among equal ones the latest line, as a later call replaces
        # (groups of lines are reduced in the order their shapes were met, not in line order)
        line_nos = np.concatenate([np.asarray(r[4], dtype=np.int64) for r in rows])
        order = np.lexsort((line_nos, ops, comm_col, hosts, pids))
        keys = np.stack([pids, hosts, comm_col], axis=1)[order]
        starts = np.append(0, np.flatnonzero(np.any(keys[1:] != keys[:-1], axis=1)) + 1)
        ends = np.append(starts[1:], len(order)) - 1
        totals = (ends - starts + 1).tolist()
        host_names = {v: k.decode("utf-8", "replace") for k, v in self._host_ids.items()}
        comms = [span_text(c) for c in comm_text.tolist()]
        summary = self._result.coll_calls
        last = order[ends]  # the row of each rank's highest opCount; its values as Python ints at once
        for count, host, pid, comm, op, in_batch, at in zip(
            totals,
            hosts[last].tolist(),
            pids[last].tolist(),
            comm_col[last].tolist(),
            ops[last].tolist(),
            batch[last].tolist(),
            offset[last].tolist(),
            strict=True,
        ):
            key = (host_names.get(host), pid, comms[comm])
            row = rows[in_batch]
            entry = summary.get(key)
            if entry is None:
                summary[key] = [count, op, _event(int(row[4][at]), row[5][at], row[6])]
            else:  # reduced before (COLL_PENDING_MAX, or the result was read): later rows add to it
                entry[0] += count
                if op >= entry[1]:
                    entry[1:] = [op, _event(int(row[4][at]), row[5][at], row[6])]

    @staticmethod
    def _hex_column(column: Callable[[Span], np.ndarray], span: Span) -> np.ndarray:
        """A hex field of every line (-1 where it is not hex), like _int_column for decimal ones."""
        matrix = getattr(column, "matrix", None)
        a, b = span
        if matrix is not None and b - a <= 15:
            digits = HEX_DIGITS[matrix[:, a:b]]
            if (digits >= 0).all():  # lines of one shape have their digits at the same places
                return digits @ (16 ** np.arange(b - a - 1, -1, -1, dtype=np.int64))
        return np.array([_hex_or(v) for v in column(span).tolist()], dtype=np.int64)

    def _columns(self, lines: list[bytes]) -> Callable[[Span], np.ndarray]:
        """Cut a byte range out of every line of a group at once."""
        width = len(lines[0])
        if len(lines) < GROUP_VECTOR_MIN:
            return lambda span: np.array([line[span[0] : span[1]] for line in lines])
        matrix = np.frombuffer(b"".join(lines), dtype=np.uint8).reshape(len(lines), width)

        def column(span: Span) -> np.ndarray:
            a, b = span
            if b <= a:  # an empty field (a host name the paste lost)
                return np.full(len(lines), b"", dtype="S1")
            return np.ascontiguousarray(matrix[:, a:b]).view(f"S{b - a}").ravel()

        column.matrix = matrix  # type: ignore[attr-defined]
        return column

    def _host_column(self, record: RecordShape, column: Callable[[Span], np.ndarray], n: int) -> np.ndarray:
        span = record.prefix.get("host")
        if span is None:
            return np.full(n, -1, dtype=np.int64)
        return self._host_ids_of(column(span))

    @staticmethod
    def _int_column(column: Callable[[Span], np.ndarray], span: Any, n: int, default: int = -1) -> np.ndarray:
        if not isinstance(span, tuple):
            return np.full(n, default, dtype=np.int64)
        matrix = getattr(column, "matrix", None)
        a, b = span
        if matrix is not None and b - a <= 18:
            digits = matrix[:, a:b].astype(np.int64) - 48
            if ((digits >= 0) & (digits <= 9)).all():  # lines of one shape have digits at the same places
                return digits @ (10 ** np.arange(b - a - 1, -1, -1, dtype=np.int64))
        values = column(span)
        try:
            return values.astype(np.int64)
        except ValueError:  # a terminal's colour codes inside the number (the span maps around them)
            return np.array([_int_or(span_text(v), default) for v in values.tolist()], dtype=np.int64)

    def _connections(self, record: RecordShape, lines: list[bytes], line_nos: list[int]) -> None:
        res = self._result
        f = record.fields
        n = len(lines)
        column = self._columns(lines)
        exemplar = lines[0]
        transport, gdr, shared, is_net = _transport_of(f, exemplar)
        res.by_transport[transport] += n
        known = res.transport_examples.get(transport)
        if known is None or line_nos[0] < known[0]:  # the earliest line, however the lines were grouped
            res.transport_examples[transport] = (line_nos[0], clean(exemplar.decode("utf-8", "replace")).text)
        ends = f.get("endpoint")
        if record.family == "collnet_connection":
            src, dst = {"rank": f.get("rank")}, {}
        else:
            src, dst = (ends[0], ends[1]) if isinstance(ends, list) else (ends or {}, {})
        direction = _decode(f.get("direction"), exemplar) if "direction" in f else ""
        direction = str(direction).strip("[]")
        hosts = self._host_column(record, column, n)
        pids = self._int_column(column, record.prefix.get("pid"), n)
        # a [receive] line names the remote sender first: NET edges are keyed by the local rank
        local, remote = (dst, src) if direction == "receive" and dst else (src, dst)
        from_rank = self._int_column(column, local.get("rank"), n)
        net = f.get("net") or {}
        if is_net:
            nic = self._int_column(column, (net or f).get("net_dev"), n)
            proxy = self._int_column(column, (net or f).get("proxy_rank"), n)
            peer = self._int_column(column, remote.get("rank"), n)
            if "channel_sub" in f:
                # Only ring/tree connections (connIndex 0) keep their peer: p2p ones (connIndex 1, created lazily
                # towards any rank) would make one edge per rank pair, millions on a large job.
                peer = np.where(self._int_column(column, f["channel_sub"], n) == 0, peer, -1)
            keys = np.stack([hosts, pids, from_rank, nic, proxy, peer], axis=1)
            to_devs: tuple[np.ndarray | None, np.ndarray | None] | None = None
            self._same_device_pairs(column, src, dst, lines, line_nos)
        else:
            to_rank = self._int_column(column, dst.get("rank"), n)
            keys = np.stack([hosts, pids, from_rank, to_rank], axis=1)
            src_dev, dst_dev = src.get("dev"), dst.get("dev")
            to_devs = (
                column(src_dev) if isinstance(src_dev, tuple) else None,
                column(dst_dev) if isinstance(dst_dev, tuple) else None,
            )
        uniq, first, counts = _unique_rows(keys)
        hosts_by_id = {v: k for k, v in self._host_ids.items()}
        for row, idx, count in zip(uniq.tolist(), first.tolist(), counts.tolist(), strict=False):
            host = hosts_by_id.get(row[0], b"").decode("utf-8", "replace") if row[0] >= 0 else None
            if is_net:
                key = (host, row[1], transport, direction, row[2], row[5], row[3], row[4], gdr, shared, "", "")
            else:
                devs = to_devs or (None, None)
                fd = devs[0][idx].decode() if devs[0] is not None else ""
                td = devs[1][idx].decode() if devs[1] is not None else ""
                key = (host, row[1], transport, direction, row[2], row[3], -1, -1, gdr, shared, fd, td)
            entry = res.edges.get(key)
            if entry is None:
                res.edges[key] = [count, line_nos[idx], lines[idx]]
            else:
                entry[0] += count
                if line_nos[idx] < entry[1]:  # the earliest line is the evidence, however lines were grouped
                    entry[1], entry[2] = line_nos[idx], lines[idx]

    def _same_device_pairs(
        self, column: Callable[[Span], np.ndarray], src: dict, dst: dict, lines: list[bytes], line_nos: list[int]
    ) -> None:
        """NET lines between two ranks printed with the same device ("0[18000] -> 1[18000]"): two ranks
        cannot share a GPU, so they are on different hosts, whatever host name the lines carry."""
        res = self._result
        if not (isinstance(src.get("dev"), tuple) and isinstance(dst.get("dev"), tuple)):
            return
        same = (column(src["dev"]) == column(dst["dev"])) & (column(src["rank"]) != column(dst["rank"]))
        hits = np.flatnonzero(same)
        if len(hits):
            i = int(hits[0])
            if res.net_same_device is None or line_nos[i] < res.net_same_device[0]:
                res.net_same_device = (line_nos[i], clean(lines[i].decode("utf-8", "replace")).text)


def _moved_shape(mover: ShapeMover, shape: LineShape, line: bytes) -> LineShape | None:
    """The shape of `line`: the exemplar's fields moved to where `line` has them (shapes.py)."""
    anchors = mover.anchors(line)
    if anchors is None:
        return None
    plan = mover.plan
    if plan is None or plan[0] is not shape:
        plan = mover.plan = (shape, _move_plan(mover, shape))
    if plan[1] is None:
        return None
    moves, build = plan[1]
    return build(iter([(anchors[sa] + da, anchors[sb] + db) for sa, da, sb, db in moves]), line)


def _move_plan(
    mover: ShapeMover, shape: LineShape
) -> tuple[list[SpanPlan], Callable[[Iterator[Span], bytes], LineShape]] | None:
    """How every span of `shape` moves (one flat list, worked out once), and the function that builds a
    moved shape from the moved spans in that order; None when a span ends inside a word. A Trees line
    of 32 channels holds some 200 spans, and a 1024-rank job prints a thousand such lines that differ."""
    flat: list[Span] = []
    records = []
    for r in shape.records:
        flat.append(r.span)
        keys = list(r.prefix)
        flat.extend(r.prefix.values())
        records.append((r, keys, _span_builder(r.fields, flat)))
    lead = shape.lead
    if lead is not None:
        flat.append(lead)
    try:
        moves = [mover.span_plan(a, b) for a, b in flat]
    except InsideValue:
        return None
    recognized = shape.recognized

    def build(spans: Iterator[Span], line: bytes) -> LineShape:
        moved = [
            RecordShape(next(spans), r.level, r.family, r.reason, {k: next(spans) for k in keys}, take(spans), r.elided)
            for r, keys, take in records
        ]
        return LineShape(moved, next(spans) if lead is not None else None, recognized, exemplar=line)

    return moves, build


def _span_builder(value: Any, flat: list[Span]) -> Callable[[Iterator[Span]], Any]:
    """A function that rebuilds the field set `value` from an iterator of its spans, in the order they are
    appended to `flat` here (as _shift would move them one by one)."""
    if isinstance(value, tuple):
        flat.append(value)
        return next
    if isinstance(value, dict):
        parts = [(k, _span_builder(v, flat)) for k, v in value.items()]
        if all(part is next for _, part in parts):
            keys = [k for k, _ in parts]
            return lambda spans: {k: next(spans) for k in keys}
        return lambda spans: {k: part(spans) for k, part in parts}
    if isinstance(value, list):
        items = [_span_builder(v, flat) for v in value]
        if all(item is next for item in items):
            count = len(items)
            return lambda spans: _Repeated([next(spans) for _ in range(count)])
        return lambda spans: _Repeated([item(spans) for item in items])
    return lambda spans: value


def _event(line: int, raw: bytes, shape: RecordShape | CoarseTemplate) -> Event:
    return Event(line, raw, shape) if isinstance(shape, RecordShape) else CoarseEvent(line, raw, shape)


class _MoveRecord:
    """A coarse template's way to the RecordShape of one of its lines (picklable, unlike a closure)."""

    def __init__(self, shape: LineShape) -> None:
        self.shape = shape
        self.mover = ShapeMover(shape.exemplar, shape.kind)

    def __call__(self, line: bytes) -> RecordShape:
        moved = _moved_shape(self.mover, self.shape, line)
        if moved is None:  # cannot happen for a line the template matched; its fields are then left unread
            record = self.shape.records[0]
            return RecordShape((0, len(line)), record.level, record.family)
        return moved.records[0]


def _coarse_template(shape: LineShape) -> CoarseTemplate | None:
    """The coarse template of a COLL line's shape; None when its fields do not fall on whole words."""
    record = shape.records[0]
    exemplar = shape.exemplar
    classes = word_classes(exemplar, shape.kind)
    if classes is None:
        return None
    fields: dict[str, tuple[int, int]] = {}
    for name, span, needed in (
        ("host", record.prefix.get("host"), False),
        ("pid", record.prefix.get("pid"), False),
        ("comm", record.fields.get("comm"), True),
        ("op_count", record.fields.get("op_count"), True),
    ):
        if not isinstance(span, tuple):
            if needed:
                return None
            continue
        words = span_words(exemplar, span)
        if words is None or (name in ("pid", "op_count") and words[0] != words[1]):
            return None
        fields[name] = words
    return CoarseTemplate(record, exemplar, classes, fields, _MoveRecord(shape))


def _unique_rows(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """np.unique(axis=0) with first indices and counts, through a 1-D hash (checked, exact)."""
    mixed = keys[:, 0].copy()
    for j in range(1, keys.shape[1]):
        mixed = mixed * np.int64(1_000_003) + keys[:, j]  # wraps on overflow; collisions are checked
    _, first, inverse, counts = np.unique(mixed, return_index=True, return_inverse=True, return_counts=True)
    if not (keys == keys[first][inverse]).all():
        return np.unique(keys, axis=0, return_index=True, return_counts=True)[0:3]  # type: ignore[return-value]
    return keys[first], first, counts


def record_kind(record: RecordShape) -> str:
    """The family of a record, or for a container family the alternative it holds."""
    family = record.family or ""
    if family in CONTAINER_FAMILIES and record.fields:
        return next(iter(record.fields))
    return family


def _understood(records: list[RecordShape]) -> bool:
    """A line is understood when every record that holds a message has a known family (a record
    cut right after its prefix holds nothing to understand; it is counted apart)."""
    messages = [r for r in records if r.level != "CUT"]
    return bool(messages) and all(r.family is not None for r in messages)


def _transport_of(fields: dict[str, Any], line: bytes) -> tuple[str, bool, bool, bool]:
    """(transport label, GDR, shared, is NET) of a connection line's transport fields."""
    if "p2p" in fields or "p2p_indirect" in fields:
        p2p = fields.get("p2p") or fields.get("p2p_indirect")
        kind = _decode(p2p.get("p2p_kind"), line) if isinstance(p2p, dict) and "p2p_kind" in p2p else "indirect"
        options = p2p.get("p2p_option") if isinstance(p2p, dict) else None
        opts = [options] if isinstance(options, tuple) else list(options or [])
        suffix = "".join("/" + str(_decode(o, line)) for o in opts)
        return f"P2P/{kind}{suffix}", False, False, False
    if "shm" in fields:
        return "SHM", False, False, False
    net = fields.get("net") if "net" in fields else fields
    name = str(_decode(net.get("net_name"), line)) if isinstance(net, dict) and "net_name" in net else "?"
    options = net.get("net_option") if isinstance(net, dict) else None
    opts = [options] if isinstance(options, tuple) else list(options or [])
    values = {str(_decode(o, line)) for o in opts}
    prefix = "COLLNET" if "net" not in fields else "NET"
    return f"{prefix}/{name}", "GDRDMA" in values, "Shared" in values, True
