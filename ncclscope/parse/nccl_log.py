"""NCCL debug log lines -> records, fast, with grammars/nccl_log/ as the authority.

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

import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache, partial
from typing import Any

import numpy as np
from lark import Token, Tree
from lark.exceptions import LarkError, UnexpectedToken

from ncclscope.parse import grammars, line_hints
from ncclscope.parse.coarse import (
    COARSE_FAMILIES,
    CoarseTemplate,
)
from ncclscope.parse.coll_scan import CollScan, hex_values
from ncclscope.parse.fields import (
    Span,
    decode,
    extract,
    grammar_parser,
    hex_or,
    int_or,
    message_start,
    shift,
    span_of,
    span_text,
    spans_of,
    transport_of,
)
from ncclscope.parse.line_filter import LineFilter, LinesOfInterest
from ncclscope.parse.line_hints import LINE_LEAD, LineSink, OtherHints, is_sink
from ncclscope.parse.log_records import (
    DAMAGED_REASONS,
    FRAGMENT_REASON,
    READ_ONCE,
    READ_ONCE_KEYS_MAX,
    REFUSED_REASON,
    UNRECOGNIZED_KEEP,
    Event,
    LineShape,
    LogResult,
    RecordShape,
    Unrecognized,
    record_kind,
    understood,
    without_time,
)
from ncclscope.parse.moves import coarse_template, event_of, moved_shape, unique_rows
from ncclscope.parse.normalize import (
    AUTOLINK_MARK,
    CUT_MARKER_RE,
    CUT_PREFIX_RE,
    CleanLine,
    clean,
    find_records,
    strip_launcher_prefix,
    unwrap_autolinks,
)
from ncclscope.parse.shapes import ShapeMover, coarse_key, shape_key
from ncclscope.parse.templates import (
    HEX_DIGITS,
    TEMPLATES_PER_SKELETON,
    WORD_SKELETON,
    Template,
    fixed_holds,
    template_of,
)

DIGITS_TO_ZERO = bytes.maketrans(b"123456789", b"000000000")


# A block is read the sparse way (NcclLogParser._sparse) where, in its first bytes, under one line in
# SPARSE_MAX_SHARE holds "CCL": there, passing over the other lines in one automaton run costs less than
# looking at each line
SPARSE = True  # the tests turn the sparse way off to show that it changes no Case
SPARSE_SAMPLE_BYTES = 64 * 1024
SPARSE_MAX_SHARE = 3
# The lines no template reads are searched for "CCL" one by one where, of the first CCL_PROBE, at least one in
# CCL_PROBE_SHARE holds it (most are NCCL's lines of new shapes); else by the filter's one pass (line_filter.py)
CCL_PROBE = 64
CCL_PROBE_SHARE = 4
# a block's lines: all of them (a list), or those of interest by their index in the block (the sparse way)
Lines = list[bytes] | dict[int, bytes]

MAX_LINE_BYTES = 16 * 1024  # NCCL lines are < 1 KiB (< 4 KiB since 2.29): longer ones are reported, not parsed


CACHE_LIMIT = 50_000  # skeletons kept; unique-per-line shapes (pointers, prose) would grow it forever


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


# before NCCL's last WARN, as frameworks relay it (ncclGetLastError): PyTorch, vLLM ... and JAX/XLA's own words
LAST_ERROR_RE = re.compile(r"Last error:|(?P<xla>Last NCCL warning\(error\) log entry \(may be unrelated\) ')")
CENSUS_FALLBACK = True  # read unknown INFO messages with grammars/nccl_census.lark (off: the census tools' own check)
LOCATED_RE = re.compile(r"(\S+\.\w+:\d+ \([^()\s]*\)) ")  # INFO_LOC's call site (2.30.7): "init.cc:123 (func) "
CENSUS_FIELD_SUFFIX_RE = re.compile(r"__[a-z0-9]+$")  # the census grammar's field rules are named field__terminal
NCCL_LINE_MAX = 1023  # NCCL formats each debug line into a 1024-byte buffer (src/debug.cc) and cuts the rest


BULK_FAMILIES = frozenset(
    {"connection", "collnet_connection", "graph_ring", "graph_tree", "graph_channel", "coll_call", "call", "trace"}
)


# Pieces of NCCL records left on a line of their own when several writers share a stream (an
# orphan tail "000 commId 0x... - Init COMPLETE", "NCCL IN" cut by another logger): counted as
# NCCL lines that were not understood, never dropped as prose.
FRAGMENT_RE = re.compile(
    # (searched, so no leading \S*: that made every start of a long word a scan to its end)
    r":\d+:\d+ \[\d+\] NCCL\b|\bNCCL (?:IN|INF|WA|WAR|TR|TRA)\b|- Init (?:START|COMPLETE)\b|\bcommId 0x"
    r"|\bvia (?:P2P|SHM|NET)/|\bUsing network \w|\bnRanks \d+ nNodes \d+"
)


# What any line that can hold NCCL's text has somewhere: the level marker (or what a cut left of it), what
# FRAGMENT_RE looks for, an escape or a NUL byte that clean() would drop before reading. A line without any,
# and without a bare message's first words at its start (line_start), is other programs' text: it goes to
# the other readers (or nowhere, other_lines.py) with no skeleton, shape or cache entry made for it.
NCCL_WORDS = (  # (and b"CCL": _sort_out looks for it first, line by line, where NCCL's own lines are most)
    b"- Init ", b"commId 0x", b"via P2P/", b"via SHM/", b"via NET/", b"Using network ", b"nRanks ", b"\x00",
    b"\x1b",
)  # fmt: skip


@cache
def line_start(hints: OtherHints | None) -> re.Pattern[bytes]:
    """One match at a line's start (after a launcher's prefixes and white space) for both: what a bare NCCL
    message can begin with, also where a cut left only the end of its level marker (group `nccl`:
    fields.message_start), and what the other readers look for there (group `other`: line_hints.py)."""
    nccl = rf"(?:{CUT_MARKER_RE.pattern})?(?:{message_start().pattern})".encode("latin-1")
    # the lead matches one way only: NCCL's is tried first where the line's own words begin, then the others'
    text = LINE_LEAD.encode() + b"(?:(?P<nccl>" + nccl + b")"
    if hints is not None:
        text += b"|(?P<other>" + hints.starts + b")"
    return re.compile(text + b")")


def _ccl_by_filter(lines: Lines, rest: list[int]) -> bool:
    """Whether the lines no template reads are searched for "CCL" by the filter's one pass (most of them are
    other programs' text) rather than one by one (most are NCCL's lines of new shapes): by the first few."""
    probe = rest[:CCL_PROBE]
    return sum(b"CCL" in lines[i] for i in probe) * CCL_PROBE_SHARE < len(probe)


def _valid_utf8(data: bytes) -> bool:
    if data.isascii():  # nearly every block: no decoded copy is made to tell
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def relayed_message(text: str) -> tuple[str, dict[str, str]] | None:
    """(family, fields as text) of NCCL's message that a framework relays (`Last error:` then the text of
    NCCL's last WARN, without its prefix), read with the grammar's `message` start; None when unknown."""
    raw = text.strip().encode()
    shape = _relay_reader().shape_of(raw)
    record = shape.records[0] if len(shape.records) == 1 else None
    if record is None or record.family is None:
        return None
    fields = {k: raw[v[0] : v[1]].decode("utf-8", "replace") for k, v in record.fields.items() if isinstance(v, tuple)}
    return record.family, fields


@cache
def _relay_reader() -> NcclLogParser:
    return NcclLogParser(lambda line_no, text: None)


def _census_record(message: str) -> tuple[str, dict[str, Any], Span | None] | None:
    """(family, fields, location) of an INFO message that grammars/nccl_census.lark knows, or None. The fields
    are spans in `message`, named as in the census; the location is the span of the call site that 2.30.7's
    INFO_LOC writes before the message ("init.cc:123 (ncclCommInitRank) "), when there is one."""
    located = LOCATED_RE.match(message)
    at = located.end() if located else 0
    tree = grammars.parse_or_none("nccl_census", "start", message[at:])
    if tree is None:
        return None
    rule = tree.children[0] if tree.data == "start" and tree.children else tree
    if not isinstance(rule, Tree):
        return None
    fields = {CENSUS_FIELD_SUFFIX_RE.sub("", k): v for k, v in extract(rule).items()}
    if at:
        fields = shift(fields, lambda a, b: (a + at, b + at))
    return str(rule.data), fields, (located.span(1) if located else None)


@cache
def _lines_of_interest(hints: OtherHints | None) -> LinesOfInterest:
    """The sparse way's one pass (NcclLogParser._sparse): the lines that hold "CCL" or an autolink (undone
    before anything else looks at the line), or anything the filter of _line_filter finds."""
    words = [b"CCL", AUTOLINK_MARK, *NCCL_WORDS, *(hints.words if hints is not None else ())]
    return LinesOfInterest(list(dict.fromkeys(words)), line_start(hints))


@cache
def _line_filter(hints: OtherHints | None, with_ccl: bool = False) -> LineFilter:
    """One filter of a block for both: NCCL's words (tag 1; `with_ccl`: and b"CCL") and the other readers'
    (tag 2), and the starts of line_start."""
    words = dict.fromkeys(NCCL_WORDS, 1)
    if with_ccl:
        words[b"CCL"] = 1
    for word in hints.words if hints is not None else ():
        words[word] = words.get(word, 0) | 2
    return LineFilter(words, line_start(hints))


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
    # shapes and templates of records that a line without "CCL" could match (a bare message's): while there is
    # one, a block is not read the sparse way (NcclLogParser._sparse)
    unanchored: int = 0


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
        self._parser = grammar_parser()
        self._message_start = message_start()  # one cheap test before a line is tried as a bare message
        # the other lines' reader, when it says what its readers want and whether one waits (other_lines.py)
        self._sink: LineSink | None = on_other if is_sink(on_other) else None  # type: ignore[assignment]
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
        self._seen: set[bytes] = set()  # READ_ONCE records read (their lines less the time)

    @property
    def result(self) -> LogResult:
        """What was read so far (the COLL lines' per-rank summary brought up to date)."""
        if self._coll_rows:
            self._reduce_coll_calls()
        return self._result

    # ----------------------------------------------------------------------------------- lines
    def shape_of(self, line: bytes) -> LineShape:
        """How the grammar reads one line, outside any block: its records' level, family, prefix and field
        spans (the census test and tools, tools/census)."""
        return self._learn(line)

    def feed_block(self, data: bytes, first_line: int) -> None:
        """`data` holds whole lines separated by b'\\n' (no trailing newline)."""
        if self._sparse(data):  # (markdown's autolinks undone line by line: the filter finds them)
            self._feed_sparse(data, first_line)
            return
        data = unwrap_autolinks(data)
        lines = data.split(b"\n")
        words = data.translate(WORD_SKELETON).split(b"\n")
        by_word, by_coarse, rest = self._by_template(enumerate(words), lines)
        maybe_nccl, loud = self._sort_out(data, lines, rest)
        quiet = partial(self._quiet_while_busy, rest, lines=lines, first_line=first_line)
        maybe_lines = self._nccl_or_wanted(rest, maybe_nccl, loud, lines, first_line, quiet, every_line=True)
        self._read_lines(lines, words, by_word, by_coarse, maybe_lines, first_line)
        self._note_last(lines, first_line)

    def _sparse(self, data: bytes) -> bool:
        """Whether a block is read the sparse way: only its lines of interest are split out and looked at
        (LinesOfInterest), the rest cost one pass of the automaton. It gives what the way line by line gives
        where no line without NCCL's name can be an NCCL record: every learnt shape and template of a record
        holds "CCL" where each line it reads does (ShapeBook.unanchored), and the filter finds every line that
        holds "CCL"; and where the block is valid UTF-8 (else every line goes to the readers, who count the
        damaged ones). It pays where most lines are other programs' text: judged on the block's first bytes."""
        if not (SPARSE and line_hints.CHEAP_TEST and self._sink is not None) or self._book.unanchored:
            return False
        sample = data[:SPARSE_SAMPLE_BYTES]
        if sample.count(b"CCL") * SPARSE_MAX_SHARE > sample.count(b"\n") + 1:
            return False
        return _lines_of_interest(self._sink.hints).usable and _valid_utf8(data)

    def _feed_sparse(self, data: bytes, first_line: int) -> None:
        """The block's lines of interest read as feed_block reads every line; the others are quiet lines."""
        indices, starts, ends, count = _lines_of_interest(self._sink.hints if self._sink else None).find(data)
        lines = {i: unwrap_autolinks(data[a:b]) for i, a, b in zip(indices, starts, ends, strict=True)}
        words = {i: line.translate(WORD_SKELETON) for i, line in lines.items()}
        by_word, by_coarse, rest = self._by_template(words.items(), lines)
        read_by_templates = {i for indices_of in (*by_word.values(), *by_coarse.values()) for i in indices_of}
        maybe_nccl, loud = self._sort_out(data, lines, rest, valid_utf8=True)
        ends_of = dict(zip(indices, ends, strict=True))

        def quiet(after: int, before: int | None) -> None:
            """The lines after line `after` (and before `before`) but those the templates read, to the other
            readers while one waits: found by their line breaks from the end of line `after`."""
            at = ends_of[after] + 1 if after >= 0 else 0
            i = after + 1
            stop = count if before is None else before
            while i < stop and self._sink_busy():
                end = data.find(b"\n", at)
                end = len(data) if end < 0 else end
                if i not in read_by_templates:
                    self._on_other(first_line + i, unwrap_autolinks(data[at:end]).decode("utf-8", "replace"))
                at = end + 1
                i += 1

        maybe_lines = self._nccl_or_wanted(rest, maybe_nccl, loud, lines, first_line, quiet)
        self._read_lines(lines, words, by_word, by_coarse, maybe_lines, first_line)
        self._note_last_sparse(data, count, first_line)

    def _by_template(
        self, words: Iterable[tuple[int, bytes]], lines: Lines
    ) -> tuple[dict[bytes, list[int]], dict[bytes, list[int]], list[int]]:
        """Lines (index, word skeleton), in order: those of a skeleton some template may read, by skeleton;
        the COLL lines of a skeleton that a coarse template may read, by skeleton (coarse.py: new widths of a
        known kind, most lines of a COLL log); and the rest (read line by line)."""
        by_word: dict[bytes, list[int]] = {}
        by_coarse: dict[bytes, list[int]] = {}
        templates = self._templates
        coarse_words = self._coarse_words if self._coarse_templates else None
        rest: list[int] = []
        for i, word in words:
            if word in templates:  # the hot path: a line of a known word skeleton (see templates.py)
                into = by_word
            elif coarse_words is not None and coarse_words.get(word) and b"CCL" in lines[i]:
                # a skeleton routed to a coarse template before, on a line that names NCCL: the one way
                # _read_lines would send it (the routes change only as templates are learnt)
                into = by_coarse
            else:
                rest.append(i)
                continue
            pending = into.get(word)
            if pending is None:
                into[word] = [i]
            else:
                pending.append(i)
        return by_word, by_coarse, rest

    def _read_lines(
        self,
        lines: Lines,
        words: Lines,
        by_word: dict[bytes, list[int]],
        by_coarse: dict[bytes, list[int]],
        maybe_nccl: Iterator[int],
        first_line: int,
    ) -> None:
        """The lines of a block that templates read (`by_word`, `by_coarse`) and those that may be NCCL's, read."""
        groups: dict[LineShape, list[int]] = {}
        templates = self._templates
        coarse_words = self._coarse_words
        for i in maybe_nccl:
            word = words[i]
            if word in templates:  # learnt from a line above in this block
                by_word.setdefault(word, []).append(i)
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

    def _sort_out(
        self, data: bytes, lines: Lines, rest: list[int], valid_utf8: bool | None = None
    ) -> tuple[set[int], set[int] | None]:
        """Of the lines no template reads: those that may hold NCCL's text, and those that another reader
        wants (None: every line, as where no reader says what it wants, or where these lines are not valid
        UTF-8: the readers count the damaged ones). The other lines are quiet: no reader wants them unless one
        waits on the next line (other_lines.py). Found by passes over those lines as one (line_filter.py)."""
        if not line_hints.CHEAP_TEST:
            return set(rest), None
        hints = self._sink.hints if self._sink is not None else None
        if _ccl_by_filter(lines, rest):
            # mostly other programs' lines (a crash loop's tracebacks between NCCL's lines, which templates read):
            # NCCL's name is one more word of the filter's one pass, not a test of each line
            maybe: set[int] = set()
            others = rest
            line_filter = _line_filter(hints, with_ccl=True)
        else:
            maybe = {i for i in rest if b"CCL" in lines[i]}
            others = [i for i in rest if i not in maybe] if maybe else rest  # without NCCL's name: searched
            line_filter = _line_filter(hints)
        found, opened = line_filter.scan([lines[i] for i in others], skip_start=1) if others else ({}, {})
        maybe.update(others[k] for k, tag in found.items() if tag & 1)
        wanted = {others[k] for k, tag in found.items() if tag == 2}
        for k, opening in opened.items():
            if opening["nccl"] is not None:
                maybe.add(others[k])
            else:
                wanted.add(others[k])
        if valid_utf8 is None:  # only the lines that may go to the readers count (a record's bytes do not)
            valid_utf8 = data.isascii() or _valid_utf8(
                data if len(rest) == len(lines) else b"\n".join([lines[i] for i in rest])
            )
        if hints is None or not valid_utf8:
            return maybe, None
        return maybe, wanted

    def _nccl_or_wanted(
        self,
        rest: list[int],
        maybe: set[int],
        loud: set[int] | None,
        lines: Lines,
        first_line: int,
        quiet: Callable[[int, int | None], None],
        every_line: bool = False,
    ) -> Iterator[int]:
        """The lines of `rest` that may be NCCL's, in order; on the way the others go to the other readers:
        those that are wanted, and the quiet ones while a reader waits on the next line. `every_line`: `rest`
        holds every line no template reads (else quiet lines lie outside it too: the sparse way)."""
        on_other = self._on_other
        if loud is None:
            for i in rest:
                if i in maybe:
                    yield i
                else:
                    on_other(first_line + i, lines[i].decode("utf-8", "replace"))
            return
        sink = self._sink
        if every_line and len(maybe) + len(loud) == len(rest) and maybe.isdisjoint(loud):
            # no quiet line (a block of NCCL's lines): none to pass on while a reader waits, one pass over `rest`
            for i in rest:
                if i in maybe:
                    yield i
                elif sink is not None:
                    sink.take(first_line + i, lines[i].decode("utf-8", "replace"), True)
                else:
                    on_other(first_line + i, lines[i].decode("utf-8", "replace"))
            return
        done = -1  # the last line handled
        for i in sorted(maybe | loud):
            if sink is not None and sink.busy:  # the quiet lines before this one, while a reader waits on them
                quiet(done, i)
            done = i
            if i in maybe:
                yield i
            elif sink is not None:  # the filter found what a reader wants: the sink need not test it again
                sink.take(first_line + i, lines[i].decode("utf-8", "replace"), True)
            else:
                on_other(first_line + i, lines[i].decode("utf-8", "replace"))
        if sink is not None and sink.busy:
            quiet(done, None)

    def _quiet_while_busy(
        self, rest: list[int], after: int, before: int | None, *, lines: list[bytes], first_line: int
    ) -> None:
        """The lines of `rest` after line `after` (and before `before`) to the other readers while one waits."""
        at = bisect_right(rest, after)
        stop = len(rest) if before is None else bisect_left(rest, before, at)
        while at < stop and self._sink_busy():
            self._on_other(first_line + rest[at], lines[rest[at]].decode("utf-8", "replace"))
            at += 1

    def _sink_busy(self) -> bool:
        return self._sink is not None and self._sink.busy

    def _exact(
        self,
        i: int,
        lines: Lines,
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
                self._book.unanchored = 0
            if shape.records and b"CCL" not in skeleton:  # a skeleton keeps every letter of the lines it reads
                self._book.unanchored += 1
            cache[skeleton] = shape
        if shape.plain and shape.recognized:
            known = self._templates.setdefault(word, [])
            if (
                len(known) < TEMPLATES_PER_SKELETON
                and len(shape.exemplar) == len(word)
                and not any(t.shape is shape for t in known)  # the same template would refuse the same lines
            ):
                known.append(template_of(shape, shape.kind))
                if not fixed_holds(shape.exemplar, shape.kind, b"CCL"):
                    self._book.unanchored += 1
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
        lines: Lines,
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
        template = coarse_template(shape)
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
        lines: Lines,
        words: Lines,
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
            if lines[i].strip():
                self._note_last_line(first_line + i, lines[i])
                return

    def _note_last_sparse(self, data: bytes, count: int, first_line: int) -> None:
        """_note_last for a block read the sparse way: its lines found from its end by their line breaks."""
        end = len(data)
        for i in range(count - 1, -1, -1):
            start = data.rfind(b"\n", 0, end) + 1
            if data[start:end].strip():
                self._note_last_line(first_line + i, unwrap_autolinks(data[start:end]))
                return
            end = start - 1

    def _note_last_line(self, line_no: int, line: bytes) -> None:
        shape = self._cache.get(line.translate(DIGITS_TO_ZERO))
        if shape is None and len(line) <= MAX_LINE_BYTES:
            shape = self._shape_for_new_skeleton(line)
        if shape is None or not shape.records:
            self._result.last = (line_no, "")
        elif not shape.recognized:
            # "?": a whole record whose message is new to us (NCCL adds messages in every release,
            # often at teardown); None: a fragment, or a record that stops inside its prefix
            unknown = all(
                r.reason == "unknown message" and not r.stops_early for r in shape.records if r.family is None
            )
            self._result.last = (line_no, "?" if unknown else None)
        else:
            self._result.last = (line_no, record_kind(shape.records[-1]))

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
        moved = moved_shape(mover, shape, line)
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
                # one cheap test first: most such lines are other programs' text, which no message begins like
                record = None
                if self._message_start.match(body):
                    record = self._parse_record(body, start, "message", cl.raw_span)
                if record is not None and record.family is not None and cut:
                    record.level = cut[1]
                    record.reason = "the record's prefix was cut off"
                if record is not None and record.family is not None:
                    records.append(record)
                elif (relayed := self._relayed_last_error(body, start, cl)) is not None:
                    lead, record = relayed
                    records.append(record)
                elif FRAGMENT_RE.search(body):
                    whole = cl.raw_span(start, start + len(body))
                    records.append(RecordShape(whole, "INFO", None, FRAGMENT_REASON))
        shape = LineShape(records, lead, understood(records), exemplar=raw)
        if records:
            shape.fixed_digits = self._fixed_digit_columns(raw, records)
        return shape

    def _relayed_last_error(self, body: str, start: int, cl: CleanLine) -> tuple[Span, RecordShape] | None:
        """NCCL's last WARN that a framework relays on its own line (`... Last error: NET/IB : Got completion
        from peer ...`, PyTorch, vLLM, a line whose breaks a paste lost): the message as a bare record, and the
        framework's text before it as the line's lead (the framework reader reads it, `Last error:` included)."""
        found = LAST_ERROR_RE.search(body)
        if found is None:
            return None
        after = found.end()
        message = strip_launcher_prefix(body[after:].lstrip())[1].lstrip()  # srun -l's "10: ", line breaks lost
        if found["xla"]:  # XLA quotes it: '...'. (the quote may be cut with the line)
            message = message.split("'", 1)[0] if "'" in message else message
        if not message or not self._message_start.match(message):
            return None
        offset = start + after + body[after:].index(message)
        record = self._parse_record(message.rstrip(), offset, "message", cl.raw_span)
        if record.family is None:
            return None
        return cl.raw_span(start, start + after), record

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
            bare = extract(tree)
            if set(bare) == {"text"} and bare["text"][0] <= len(text.split(None, 1)[0]) + 1:
                # one keyword and free text ("RAS ..."): without NCCL's prefix, any program's line can be that
                return RecordShape(whole, "BARE", None, "not an NCCL message")
            return RecordShape(
                whole, "BARE", str(tree.data), fields=shift(bare, mapper), elided=elided or "ellipsis" in bare
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
                prefix["location"] = span_of(child.children[0])
            elif isinstance(child, Tree):
                family = str(child.data)
                fields = extract(child)
                if not child.children:
                    fields = {}
            elif isinstance(child, Token) and child.type == "TEXT":
                fields = {"text": span_of(child)}
        return RecordShape(
            whole,
            level,
            family,
            prefix={k: mapper(*v) for k, v in prefix.items()},
            fields=shift(fields, mapper),
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
                prefix["location"] = span_of(child.children[0])
            elif isinstance(child, Token) and child.type == "LEVEL":
                level = str(child)
            elif isinstance(child, Token) and child.type == "TEXT":
                message = span_of(child)
        mapped = {k: mapper(*v) for k, v in prefix.items()}
        if level == "INFO" and message and CENSUS_FALLBACK:
            known = _census_record(text[message[0] : message[1]])
            if known is not None:  # a message of NCCL's the census knows (grammars/nccl_census.lark)
                family, census_fields, location = known
                shifted = shift(census_fields, lambda a, b: mapper(a + message[0], b + message[0]))
                if location is not None:
                    mapped["location"] = mapper(location[0] + message[0], location[1] + message[0])
                return RecordShape(whole, level, family, prefix=mapped, fields=shifted)
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
                out["cuda_dev"] = span_of(token)
            elif part.data == "timestamp":
                out["timestamp"] = span_of(token)
            elif part.data == "origin":
                a, b = span_of(token)
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
            for a, b in list(record.prefix.values()) + spans_of(record.fields):
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
            elif record.family in READ_ONCE and record.level == "INFO" and len(shape.records) == 1:
                self._read_once(record, lines, line_nos)
            else:
                # copies: an event's line kept alone would pin the allocator's arena of its whole block
                res.events.extend(map(Event, line_nos, [memoryview(x).tobytes() for x in lines], [record] * n))

    def _read_once(self, record: RecordShape, lines: list[bytes], line_nos: list[int]) -> None:
        """Records of a READ_ONCE family: those that repeat an earlier one are counted, not kept."""
        seen = self._seen
        res = self._result
        for line, no in zip(lines, line_nos, strict=True):
            key = without_time(line, record)
            if key in seen:
                res.records_repeated += 1
                continue
            if len(seen) >= READ_ONCE_KEYS_MAX:
                seen.clear()
            seen.add(key)
            res.events.append(Event(no, memoryview(line).tobytes(), record))

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
                summary[key] = [count, op, event_of(int(row[4][at]), row[5][at], row[6])]
            else:  # reduced before (COLL_PENDING_MAX, or the result was read): later rows add to it
                entry[0] += count
                if op >= entry[1]:
                    entry[1:] = [op, event_of(int(row[4][at]), row[5][at], row[6])]

    @staticmethod
    def _hex_column(column: Callable[[Span], np.ndarray], span: Span) -> np.ndarray:
        """A hex field of every line (-1 where it is not hex), like _int_column for decimal ones."""
        matrix = getattr(column, "matrix", None)
        a, b = span
        if matrix is not None and b - a <= 15:
            digits = HEX_DIGITS[matrix[:, a:b]]
            if (digits >= 0).all():  # lines of one shape have their digits at the same places
                return digits @ (16 ** np.arange(b - a - 1, -1, -1, dtype=np.int64))
        return np.array([hex_or(v) for v in column(span).tolist()], dtype=np.int64)

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
            return np.array([int_or(span_text(v), default) for v in values.tolist()], dtype=np.int64)

    def _connections(self, record: RecordShape, lines: list[bytes], line_nos: list[int]) -> None:
        res = self._result
        f = record.fields
        n = len(lines)
        column = self._columns(lines)
        exemplar = lines[0]
        transport, gdr, shared, is_net = transport_of(f, exemplar)
        res.by_transport[transport] += n
        known = res.transport_examples.get(transport)
        if known is None or line_nos[0] < known[0]:  # the earliest line, however the lines were grouped
            res.transport_examples[transport] = (line_nos[0], clean(exemplar.decode("utf-8", "replace")).text)
        ends = f.get("endpoint")
        if record.family == "collnet_connection":
            src, dst = {"rank": f.get("rank")}, {}
        else:
            src, dst = (ends[0], ends[1]) if isinstance(ends, list) else (ends or {}, {})
        direction = decode(f.get("direction"), exemplar) if "direction" in f else ""
        direction = str(direction).strip("[]")
        if is_net and not direction and record.family == "connection":
            # NCCL 2.3 printed a NET connection on the receiving rank only, `Ring 00 : peer -> me via NET/IB/0`,
            # untagged (transport/net.cu netRecvSetup); 2.4 on tag both sides
            direction = "receive"
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
        uniq, first, counts = unique_rows(keys)
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
