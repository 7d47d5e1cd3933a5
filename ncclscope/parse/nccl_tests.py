"""nccl-tests output (formats.md section C): the text tables of every generation, and the -J JSON.

The syntax of each line is in grammars/nccl_tests.lark. This module decides which lines to hand to
the grammar, keeps the state of the table being read, and gives the parsed cells their meaning.

A run is the output of one `*_perf` invocation: preamble (version, `# Collective test starting`,
`# nThread ...`, options), `# Using devices` and one line per rank, the header (group line, column
names, units), the rows, the footer (`# Out of bounds values`, `# Avg bus bandwidth`, `# Collective
test concluded`, `# GPU memory usage`, `# error:`). Any of these may be missing from a paste. The
sections always come in that order, so a line of an earlier section than the one a run has reached
(or a second column header, a second version line ...) cannot belong to it. The N copies printed
by a non-MPI build started under mpirun come out as N runs, also when their lines interleave:
several runs may be open, and each line goes to the open run that can take it (see
NcclTestsReader).

Rows are the bulk of the text (thousands per run), so they do not each go through Lark: a row is
split into cells, each cell is classified with the grammar's own cell terminals (INT, FLOAT, NA,
WORD, DATE, CLOCK), and the first row of each shape (row rule, kinds of its cells) is parsed by Lark
to learn which field every cell is. Later rows of that shape are read directly from that plan. The
header decides the row rule (which columns exist); a table without a header tries the rules in
turn and is marked `layout="headerless"`.

`NcclTestsReader.feed()` is called on every non-NCCL line of an input, so lines that cannot belong
to nccl-tests output are rejected by precompiled regexes before any parsing; nothing here raises.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from enum import IntEnum
from functools import cache
from typing import TypeGuard

from lark import Lark, Token, Tree
from lark.exceptions import LarkError

from ncclscope.model import BenchmarkRow, BenchmarkRun, Evidence, Measurement, TestDevice, TestFailure
from ncclscope.parse.grammars import load, terminal_regex
from ncclscope.parse.nccl_tests_infer import infer

_GRAMMAR = "nccl_tests"

# Row rules of the grammar, in the order a table without a header tries them.
_ROW_RULES = ("row_unified", "row_per_iter", "row_redop", "row_root", "row_plain")

# Longer lines are no nccl-tests lines (the longest are failure lines quoting NCCL's last error).
_MAX_LINE = 10_000

# ---------------------------------------------------------------------------------------------
# Cheap line classification, before the grammar is asked.

# Preamble, device, header and footer lines. All start with "#" except in v1.0.0 (and in pastes
# that lost it); a bare "#" separates sections. Words may be separated by tabs (a paste that converted them).
_INFO_START = re.compile(
    r"""[ \t]*(?:
        \#[ \t]*(?:nccl-tests[ \t]+version | Collective[ \t]+test | nThread[ \t]+ | Using[ \t]+devices | Rank[ \t]+
            | size[ \t] | bytes[ \t] | \(B\) | out-of-place | Out[ \t]+of[ \t]+bounds | Avg[ \t]+bus[ \t]+bandwidth
            | GPU[ \t]+memory[ \t]+usage | error: | Writing[ \t]+JSON | skipping[ \t]+json | Blocking[ \t]+Enabled
            | Per-Iteration[ \t]+Report | Parallel[ \t]+Init | Swap[ \t]+Comms | Reducing[ \t]+maxBytes
            | NCCL[ \t]+Tests[ \t]+compiled | $)
        | nThread[ \t]+ | Out[ \t]+of[ \t]+bounds | Avg[ \t]+bus[ \t]+bandwidth | out-of-place | \(B\)
        | Using[ \t]+devices
        | (?:size|bytes)[ \t]+(?:count|N)[ \t] | Blocking[ \t]+Enabled | Parallel[ \t]+Init | Swap[ \t]+Comms
    )""",
    re.X,
)
# a device line with the next rank's device line glued on (a paste, an MPI gather)
_GLUED_DEVICE = re.compile(r"(?<=\S)#[ \t]+Rank[ \t]+\d+[ \t]+(?:Group|Pid|on|uses)[ \t]")
# A result row starts with two integers (size, count) and the type name.
_ROW_START = re.compile(r"[ \t]*[-+]?\d+[ \t]+[-+]?\d+[ \t]+[A-Za-z_]")
# The pieces of a row that nccl-tests prints with separate printf calls: "size count type redop root",
# then per timing group "time algbw busbw #wrong" (a NCCL line can come between them on a shared stdout).
_ROW_HEAD = re.compile(r"[ \t]*\d+[ \t]+\d+[ \t]+[A-Za-z]\w*[ \t]+[A-Za-z]\w*[ \t]+-?\d+[ \t]*")
_CELL = r"(?:[-+]?[\d.]+(?:e[-+]?\d+)?|N/A|nan|inf)"
_ROW_PIECE = re.compile(rf"[ \t]*{_CELL}(?:[ \t]+{_CELL})*[ \t]*", re.I)
# Test CUDA/NCCL failure, the ` .. host pid N: Test failure` unwinding lines, Test timeout, and
# v1.0.0's bare `Cuda failure file:line`.
_FAILURE = re.compile(r"Test (?:CUDA|NCCL) failure |: Test failure |: Test timeout \(|^[ \t]*(?:Cuda|NCCL) failure \S")

# Type names nccl-tests prints (int8 ... f8e5m2; char/int of NCCL 1). A row of a table without a
# header must carry one, so that random "12 34 word ..." lines are not taken for a table.
TYPE_NAME = re.compile(terminal_regex("nccl_tests", "TYPE_NAME"))
# Without a header a row must have at least size, count, type and two measurements.
_HEADERLESS_MIN_CELLS = 11

_PROGRAM_SUFFIX = re.compile(r"_(?:perf(?:_mpi)?|test)$")
# A shell or wrapper line that runs a test binary (the grammar's invocation_line reads it): the binary's
# name as the grammar's INVOCATION_LEAD looks ahead for it
_LEAD = terminal_regex("nccl_tests", "INVOCATION_LEAD")
_INVOCATION = re.compile(_LEAD[_LEAD.rindex("(?=") + 3 : -1])
# a Python traceback's frame names a function, which may end in _test too: `File "x.py", line 9, in eval_test`
_FRAME = r'File "[^"]*", line \d+, in '
_TRACEBACK_FRAME = re.compile(rf"\s*{_FRAME}")


class _Section(IntEnum):
    """Sections of one run, in the order nccl-tests prints them."""

    JSON = 0
    VERSION = 1
    STARTING = 2
    PARAMS = 3
    OPTION = 4
    COMPILED = 5
    USING = 6
    DEVICE = 7
    REDUCING = 8
    GROUP = 9
    COLUMNS = 10
    UNITS = 11
    ROWS = 12
    OUT_OF_BOUNDS = 13
    AVG_BUSBW = 14
    CONCLUDED = 15
    MEMORY = 16
    ERROR = 17


# Sections that hold several lines; any other section seen twice means a new run.
_REPEATED = {_Section.OPTION, _Section.DEVICE, _Section.ROWS}

# Grammar rule of an info line -> its section.
_SECTION_OF = {
    "json_output": _Section.JSON,
    "version_line": _Section.VERSION,
    "test_starting": _Section.STARTING,
    "params": _Section.PARAMS,
    "option": _Section.OPTION,
    "compiled_with": _Section.COMPILED,
    "using_devices": _Section.USING,
    "device": _Section.DEVICE,
    "reducing_max_bytes": _Section.REDUCING,
    "group_header": _Section.GROUP,
    "column_header": _Section.COLUMNS,
    "units_header": _Section.UNITS,
    "out_of_bounds": _Section.OUT_OF_BOUNDS,
    "avg_busbw": _Section.AVG_BUSBW,
    "test_concluded": _Section.CONCLUDED,
    "memory_usage": _Section.MEMORY,
    "error": _Section.ERROR,
}

# ---------------------------------------------------------------------------------------------
# Grammar access


@cache
def _parser(start: str) -> Lark:
    # One parser per start rule: LALR states shared between start rules would merge lookaheads.
    return load(_GRAMMAR, start)


def _parse(text: str, start: str) -> Tree | None:
    try:
        return _parser(start).parse(text)
    except LarkError:
        return None


@cache
def _cell_kind() -> re.Pattern[str]:
    """One regex with a named group per cell terminal of the grammar (they never overlap)."""
    parser = _parser("row_unified")
    names = ("DATE", "CLOCK", "NA", "INT", "FLOAT", "WORD")
    return re.compile("|".join(f"(?P<{name}>{parser.get_terminal(name).pattern.to_regexp()})" for name in names))


class _Kinds:
    """The terminal of each cell of a row, with a bounded memo (sizes, types, 0.00 ... repeat)."""

    _LIMIT = 1 << 16

    def __init__(self) -> None:
        self._memo: dict[str, str] = {}

    def __call__(self, cells: list[str]) -> tuple[str, ...] | None:
        """None when a cell is no cell terminal at all (then the line is no row)."""
        memo = self._memo
        kinds = []
        for cell in cells:
            kind = memo.get(cell)
            if kind is None:
                match = _cell_kind().fullmatch(cell)
                if match is None:
                    return None
                kind = match.lastgroup or ""
                if len(memo) < self._LIMIT:
                    memo[cell] = kind
            kinds.append(kind)
        return tuple(kinds)


def _fields(tree: Tree) -> dict[str, str]:
    """{rule: text} for the one-token field rules directly under `tree` (and their first token)."""
    out: dict[str, str] = {}
    for child in tree.children:
        if isinstance(child, Tree) and child.children and isinstance(child.children[0], Token):
            out.setdefault(str(child.data), str(child.children[0]))
    return out


def _tokens(tree: Tree, type_: str) -> list[str]:
    return [str(tok) for tok in tree.children if isinstance(tok, Token) and tok.type == type_]


# ---------------------------------------------------------------------------------------------
# Row plans: which field each cell of a row is, learnt from Lark once per shape.

_PLACES = {
    "out_of_place": "out_of_place",
    "out_of_place_timed": "out_of_place",
    "in_place": "in_place",
    "in_place_timed": "in_place",
}
# -I columns: grammar rule -> the header's column name (the key in Measurement.extra).
_PER_ITERATION = {"i_min": "i_min", "i_max": "i_max", "i_p99": "i_p99", "i_cv": "i_cv%"}


@dataclass(frozen=True)
class _PlacePlan:
    """Cell indices of one measurement."""

    time: int
    algbw: int
    busbw: int
    wrong: int
    extra: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class _RowPlan:
    """Cell indices of every field of one row shape."""

    size: int
    count: int
    type: int
    redop: int | None
    root: int | None
    out_of_place: _PlacePlan | None
    in_place: _PlacePlan | None
    timestamp: tuple[int, ...]


def _row_plan(tree: Tree) -> tuple[_RowPlan, int] | None:
    """The plan of a parsed row and how many cells Lark saw."""
    slots: list[tuple[str, str]] = []  # (place, field rule) of each cell, in order

    def walk(node: Tree, place: str) -> None:
        for child in node.children:
            if isinstance(child, Token):
                slots.append((place, str(node.data)))
            else:
                walk(child, _PLACES.get(str(child.data), place))

    walk(tree, "")
    where = {slot: i for i, slot in reversed(list(enumerate(slots)))}

    def place_plan(place: str) -> _PlacePlan | None:
        if (place, "time") not in where:
            return None
        extra = tuple((column, where[place, rule]) for rule, column in _PER_ITERATION.items() if (place, rule) in where)
        return _PlacePlan(
            where[place, "time"], where[place, "algbw"], where[place, "busbw"], where[place, "wrong"], extra
        )

    plan = _RowPlan(
        size=where["", "size"],
        count=where["", "count"],
        type=where["", "type"],
        redop=where.get(("", "redop")),
        root=where.get(("", "root")),
        out_of_place=place_plan("out_of_place"),
        in_place=place_plan("in_place"),
        timestamp=tuple(i for i, slot in enumerate(slots) if slot == ("", "timestamp")),
    )
    return plan, len(slots)


class _RowReader:
    """Turns the cells of a row into a BenchmarkRow, with a plan cache keyed by shape."""

    _LIMIT = 10_000

    def __init__(self) -> None:
        self._plans: dict[tuple[str, tuple[str, ...]], _RowPlan | None] = {}

    def plan(self, rule: str, text: str, cells: list[str], kinds: tuple[str, ...]) -> _RowPlan | None:
        key = (rule, kinds)
        if key in self._plans:
            return self._plans[key]
        tree = _parse(text, rule)
        learnt = _row_plan(tree) if tree is not None else None
        # Lark must have seen exactly these cells, else the shape is not trusted
        plan = learnt[0] if learnt is not None and learnt[1] == len(cells) else None
        if len(self._plans) < self._LIMIT:
            self._plans[key] = plan
        return plan

    @staticmethod
    def row(plan: _RowPlan, cells: list[str], lineno: int, time_scale: float) -> BenchmarkRow:
        return BenchmarkRow(
            size=int(cells[plan.size]),
            count=int(cells[plan.count]),
            type=cells[plan.type],
            redop="" if plan.redop is None else cells[plan.redop],
            root=-1 if plan.root is None else int(cells[plan.root]),
            out_of_place=_measurement(plan.out_of_place, cells, time_scale),
            in_place=_measurement(plan.in_place, cells, time_scale),
            timestamp=" ".join(cells[i] for i in plan.timestamp) if plan.timestamp else None,
            line=lineno,
        )


def _measurement(plan: _PlacePlan | None, cells: list[str], time_scale: float) -> Measurement:
    if plan is None:
        return Measurement()
    wrong = cells[plan.wrong]
    time = float(cells[plan.time])
    return Measurement(
        time_us=time if time_scale == 1.0 else round(time * time_scale, 9),
        algbw=float(cells[plan.algbw]),
        busbw=float(cells[plan.busbw]),
        wrong=None if wrong == "N/A" else float(wrong),
        extra={column: float(cells[i]) for column, i in plan.extra},
    )


# ---------------------------------------------------------------------------------------------
# The table being read


@dataclass
class _Table:
    """A run being read, and where it stands."""

    run: BenchmarkRun
    first: Evidence  # the run's first line: its evidence when it has neither header nor rows
    section: int = -1
    columns: list[str] = field(default_factory=list)
    row_rule: str | None = None
    headerless: bool = False
    time_scale: float = 1.0  # v1.0.0 prints milliseconds
    invocation: bool = False  # begun by the command line that ran it

    def accepts(self, section: _Section) -> bool:
        """Whether a line of `section` can come next in this run."""
        return section > self.section or (section == self.section and section in _REPEATED)

    def continues(self, row: BenchmarkRow) -> bool:
        """Whether `row` is the next size of this run's sweep (same type, op and root)."""
        if not self.run.rows:
            return False
        last = self.run.rows[-1]
        return (last.type, last.redop, last.root) == (row.type, row.redop, row.root) and last.size < row.size

    def has_rank(self, rank: int) -> bool:
        return any(device.rank == rank for device in self.run.devices)

    def has_process(self, host: str, pid: int | None) -> bool:
        return any(device.host == host and device.pid == pid for device in self.run.devices)

    def has_host(self, host: str) -> bool:
        return any(device.host == host for device in self.run.devices)


def _layout(columns: list[str]) -> tuple[str, str, float]:
    """(layout, row rule, time scale to us) of a column header."""
    has_redop = "redop" in columns or "op" in columns
    has_root = "root" in columns
    if "i_min" in columns:
        rule = "row_per_iter"
    elif has_redop and has_root:
        rule = "row_unified"
    elif has_redop:
        rule = "row_redop"
    elif has_root:
        rule = "row_root"
    else:
        rule = "row_plain"
    if columns[0] == "bytes" or "res" in columns:
        return "v1", rule, 1000.0
    if "error" in columns:
        return "v2.0-2.11", rule, 1.0
    return "v2.13+", rule, 1.0


def _program(name: str) -> str:
    """`/opt/nccl-tests/build/all_reduce_perf` -> `all_reduce`."""
    return _PROGRAM_SUFFIX.sub("", name.replace("\\", "/").rsplit("/", 1)[-1])


def _nccl_code(version: str) -> int | None:
    """NCCL_VERSION_CODE of "major.minor" (v1.0.0's `compiled with NCCL 2.1`)."""
    parts = version.split(".")
    if len(parts) < 2 or not (parts[0].isdigit() and parts[1].isdigit()):
        return None
    major, minor = int(parts[0]), int(parts[1])
    return major * 10000 + minor * 100 if (major, minor) >= (2, 9) else major * 1000 + minor * 100


class NcclTestsReader:
    """Finds and parses nccl-tests tables in a stream of lines of one source.

    Several runs can be open at once: the N processes of a non-MPI build started by mpirun print
    their outputs into one stream, interleaved line by line. A line goes to the open run it can
    follow (by section order; device lines by process and rank, rows by their size sweep,
    failures by host), preferring the most advanced and then the newest run; a line no open run
    can take starts a new one.
    """

    # Open runs kept at most (the oldest is closed beyond that)
    _MAX_OPEN = 16

    def __init__(self, source: str) -> None:
        self.source = source
        self._tables: list[_Table] = []  # every run, in order of their first line
        self._open: list[_Table] = []  # the runs that may still take lines, oldest first
        self._rows = _RowReader()
        self._kinds = _Kinds()
        # A row printed in pieces (size..root, then each timing group once measured) with NCCL lines on the
        # same stdout between them (NCCL_DEBUG_SUBSYS=COLL): the pieces so far and the line they started on.
        self._row_head: tuple[int, str, int] | None = None  # (line, pieces joined, cells the header names)

    # -- public ---------------------------------------------------------------------------------

    # what feed() needs in a line to take it: failure lines and the test's command line anywhere; "#" lines
    # and rows (two numbers, then a word) at its start, and the preamble and footer lines of every layout
    # what _FAILURE and _INVOCATION need: a binary's name ends the word (test_program: "_test" then white space
    # or the line's end; a job's traceback is full of "run_test(")
    HINT_WORDS = ("Test ", "Cuda failure", "NCCL failure", "_perf", *(f"_test{space}" for space in " \t\r\f\v"))
    # (a "#" line whatever follows, but another "#": what clean() drops from its end, "\r" or a terminal's
    # trailer, would keep the bare "#" of a section's end from matching; no line of the test starts "##", a
    # job's banner of "#" does, thousands of times)
    HINT_START = "|".join(
        [
            f"(?:{_ROW_START.pattern})",
            f"(?:{_ROW_HEAD.pattern})",
            r"[ \t]*\#(?:[^#]|$)",
            f"(?x:{_INFO_START.pattern})",
            rf"(?!{_FRAME}).*_test$",  # (not a traceback's frame)
        ]
    )

    @property
    def busy(self) -> bool:
        """A row printed in pieces is pending: the next line may be its rest, whatever it holds."""
        return self._row_head is not None

    def feed(self, lineno: int, text: str) -> bool:
        """One physical line (1-based). Returns True when the line belongs to nccl-tests output
        (preamble, device lines, headers, rows, footer, Test failure lines)."""
        if len(text) > _MAX_LINE:
            return False
        if text.strip() == "#":
            # "#" separates sections; it belongs to a run only while one is open
            return any(t.section < _Section.ERROR for t in self._open)
        try:
            if self._row_head is not None and _ROW_PIECE.fullmatch(text):
                return self._row_piece(text)
            if _ROW_START.match(text) and self._row(lineno, text):
                return True
            if _ROW_HEAD.fullmatch(text):
                named = [t for t in self._open if t.row_rule and not t.headerless and t.columns]
                if named:
                    self._row_head = (lineno, text.rstrip(), len(named[-1].columns))
                    return True
            if _INFO_START.match(text):
                glued = _GLUED_DEVICE.search(text, 1)
                if glued:  # the next rank's device line, glued on by the paste or an MPI gather
                    first = self._info(lineno, text[: glued.start()])
                    return self._info(lineno, text[glued.start() :]) or first
                return self._info(lineno, text)
            if ("failure" in text or "timeout" in text) and _FAILURE.search(text):
                return self._failure(lineno, text)
            if ("_perf" in text or "_test" in text) and not _TRACEBACK_FRAME.match(text) and _INVOCATION.search(text):
                return self._invocation(lineno, text)
        except (LarkError, ValueError, KeyError, IndexError, OverflowError):
            return False
        return False

    def finish(self) -> list[BenchmarkRun]:
        """Called once at the end of the source; every run found, in order."""
        self._open.clear()
        # a command line followed by no output of the test is not a run (the log of a job it started, say)
        runs = [
            _finished(table)
            for table in self._tables
            if not (table.invocation and table.section < 0 and not table.run.failures)
        ]
        self._tables = []
        return runs

    # -- runs -----------------------------------------------------------------------------------

    def _evidence(self, lineno: int, text: str) -> Evidence:
        return Evidence(source=self.source, line=lineno, text=text)

    def _start(self, lineno: int, text: str) -> _Table:
        """A new run; the open runs that have reached their footer or failed are done."""
        still_open = [t for t in self._open if t.section < _Section.AVG_BUSBW and not t.run.failures]
        self._open = still_open[-(self._MAX_OPEN - 1) :]
        table = _Table(run=BenchmarkRun(source=self.source, line=lineno), first=self._evidence(lineno, text))
        self._tables.append(table)
        self._open.append(table)
        return table

    def _candidates(self, section: _Section) -> list[_Table]:
        """The open runs a line of `section` can go to, best first: the most advanced, the newest."""
        found = [t for t in self._open if t.accepts(section)]
        found.reverse()
        found.sort(key=lambda t: t.section, reverse=True)
        return found

    def _table_for(self, section: _Section, lineno: int, text: str) -> _Table:
        candidates = self._candidates(section)
        return candidates[0] if candidates else self._start(lineno, text)

    # -- lines ----------------------------------------------------------------------------------

    def _info(self, lineno: int, text: str) -> bool:
        tree = _parse(text, "info_line")
        if tree is None:
            return False
        kind = str(tree.data)
        if kind == "empty_comment":
            return any(t.section < _Section.ERROR for t in self._open)
        section = _SECTION_OF[kind]
        values = _fields(tree)
        if kind == "device":
            table = self._device_table(values, lineno, text)
        else:
            table = self._table_for(section, lineno, text)
        table.section = section
        handler = getattr(self, f"_on_{kind}", None)
        if handler is not None:
            handler(table, tree, values)
        if kind == "column_header" and (table.run.evidence is None or not table.run.rows):
            table.run.evidence = self._evidence(lineno, text)
        return True

    def _device_table(self, values: dict[str, str], lineno: int, text: str) -> _Table:
        """A device line goes to the run of the same process, else to one that just printed
        `# Using devices`, else to one that does not have that rank yet."""
        candidates = self._candidates(_Section.DEVICE)
        host, rank = values.get("host", ""), int(values["rank"])
        pid = int(values["pid"]) if "pid" in values else None
        for wanted in (
            lambda t: t.has_process(host, pid),
            lambda t: t.section == _Section.USING,
            lambda t: not t.has_rank(rank),
        ):
            for table in candidates:
                if wanted(table):
                    return table
        return candidates[0] if candidates else self._start(lineno, text)

    def _on_version_line(self, table: _Table, tree: Tree, values: dict[str, str]) -> None:
        run = table.run
        run.nccl_tests_version = values.get("tests_version")
        run.nccl_headers = int(values["nccl_headers"])
        run.nccl_library = int(values["nccl_library"])

    def _on_test_starting(self, table: _Table, tree: Tree, values: dict[str, str]) -> None:
        table.run.collective = _program(values["program"])

    def _on_test_concluded(self, table: _Table, tree: Tree, values: dict[str, str]) -> None:
        table.run.collective = table.run.collective or _program(values["program"])

    def _on_params(self, table: _Table, tree: Tree, values: dict[str, str]) -> None:
        run = table.run
        run.nthreads = int(values["nthreads"])
        run.ngpus = int(values["ngpus"])
        run.min_bytes = int(values["min_bytes"])
        run.max_bytes = int(values["max_bytes"])
        run.warmup_iters = int(values["warmup_iters"])
        run.iters = int(values["iters"])

    def _on_compiled_with(self, table: _Table, tree: Tree, values: dict[str, str]) -> None:
        versions = _tokens(tree, "VERSION")
        if versions and table.run.nccl_headers is None:
            table.run.nccl_headers = _nccl_code(versions[0])

    def _invocation(self, lineno: int, text: str) -> bool:
        """A command line that runs a test binary begins a new run and names its collective; the runs
        still open belong to earlier commands."""
        tree = _parse(text, "invocation_line")
        if tree is None:
            return False
        program = _fields(tree).get("test_program", "")
        self._open = []
        table = self._start(lineno, text)
        table.run.collective = _program(program)
        table.invocation = True
        return True

    def _on_device(self, table: _Table, tree: Tree, values: dict[str, str]) -> None:
        table.run.devices.append(
            TestDevice(
                rank=int(values["rank"]),
                group=int(values["group"]) if "group" in values else None,
                pid=int(values["pid"]) if "pid" in values else None,
                host=values.get("host", ""),
                cuda_dev=int(values["cuda_dev"]),
                bus_id=values["bus_id"][1:-1],
                name=values.get("device_name", "").strip(),
            )
        )

    def _on_column_header(self, table: _Table, tree: Tree, values: dict[str, str]) -> None:
        columns = [str(tok) for tok in tree.scan_values(lambda v: isinstance(v, Token))]
        layout, rule, scale = _layout(columns)
        table.columns = columns
        table.row_rule = rule
        table.time_scale = scale
        table.headerless = False
        table.run.layout = layout
        table.run.time_label = "cputime" if "cputime" in columns else "time"

    def _on_out_of_bounds(self, table: _Table, tree: Tree, values: dict[str, str]) -> None:
        run = table.run
        run.out_of_bounds = int(values["oob_count"])
        status = values.get("oob_status")
        run.out_of_bounds_ok = status == "OK" if status else run.out_of_bounds == 0

    def _on_avg_busbw(self, table: _Table, tree: Tree, values: dict[str, str]) -> None:
        table.run.avg_busbw = float(values["avg_value"])
        if values.get("avg_status") == "FAILED":
            table.run.errors.append("Avg bus bandwidth below 90% of NCCL_TESTS_MIN_BW (FAILED)")

    def _on_error(self, table: _Table, tree: Tree, values: dict[str, str]) -> None:
        table.run.errors.extend(message.strip() for message in _tokens(tree, "REST"))

    def _failure(self, lineno: int, text: str) -> bool:
        tree = _failure_tree(text)
        if tree is None:
            return False
        # A failure belongs to the run it interrupts (it does not end it): the open run with a
        # device on the failing host, else the newest open run, else the last run.
        host = _fields(tree).get("failure_host", "")
        runs = self._open[::-1] or self._tables[-1:]
        table = next((t for t in runs if host and t.has_host(host)), None)
        if table is None and runs:
            table = runs[0]
        if table is None:
            # nccl-tests prints failures after the preamble: one with no run before it ends a run whose
            # start was not pasted, and the preamble lines that follow begin another
            table = self._start(lineno, text)
            table.section = _Section.ERROR
        failure = _test_failure(tree, self._evidence(lineno, text))
        if failure.host and _ROW_START.match(text):
            # glued to the end of a cut row ("... sum  -1node01: Test ..."): the row's last cell (root, or a
            # number of the measurement) ran into the host name
            host = failure.host.lstrip("-+").lstrip("0123456789.")
            failure.host = host or failure.host
        if failure.host and not table.has_host(failure.host):
            # glued to the end of a cut row ("... -1gpu-f03: Test ..."): the device lines name the host
            glued = [d.host for t in self._tables for d in t.run.devices if d.host and failure.host.endswith(d.host)]
            failure.host = max(glued, key=len) if glued else failure.host
        table.run.failures.append(failure)
        return True

    def _row_piece(self, text: str) -> bool:
        """The next timing group of a row printed in pieces; the row is read once it is whole."""
        assert self._row_head is not None
        lineno, head, cells = self._row_head
        joined = f"{head} {text.strip()}"
        if len(joined.split()) < cells:  # the in-place group is still to come
            self._row_head = (lineno, joined, cells)
            return True
        self._row_head = None
        return self._row(lineno, joined)

    def _row(self, lineno: int, text: str) -> bool:
        cells = text.split()
        kinds = self._kinds(cells)
        if kinds is None:
            return False
        found = self._row_table(lineno, text, cells, kinds)
        if found is None:
            return False
        table, plan = found
        row = self._rows.row(plan, cells, lineno, table.time_scale)
        if len(self._open) > 1 and table.run.rows and not table.continues(row):
            # interleaved outputs: a row that continues another run's size sweep belongs there
            sweep = [t for t in self._candidates(_Section.ROWS) if t.row_rule == table.row_rule and t.continues(row)]
            if sweep:
                other = max(sweep, key=lambda t: t.run.rows[-1].size)
                if other.time_scale != table.time_scale:
                    row = self._rows.row(plan, cells, lineno, other.time_scale)
                table = other
        table.section = _Section.ROWS
        if table.run.evidence is None:
            table.run.evidence = self._evidence(lineno, text)
        table.run.rows.append(row)
        return True

    def _row_table(
        self, lineno: int, text: str, cells: list[str], kinds: tuple[str, ...]
    ) -> tuple[_Table, _RowPlan] | None:
        """The run a row goes to, and the row's plan. First a run whose header (or units line)
        waits for its first row, then a run reading rows, then a run still in its preamble, else
        a new run; the newest first. Runs without column names read the row strictly."""
        newest_first = [t for t in reversed(self._open) if t.accepts(_Section.ROWS)]
        waiting = [t for t in newest_first if t.section >= _Section.GROUP and not t.run.rows]
        reading = [t for t in newest_first if t.run.rows]
        in_preamble = [t for t in newest_first if t.section < _Section.GROUP and not t.run.rows]
        for table in waiting + reading:
            plan = self._rows.plan(table.row_rule, text, cells, kinds) if table.row_rule else None
            if plan is None and (table.row_rule is None or table.headerless):
                rule, plan = self._headerless_plan(text, cells, kinds)
                if plan is not None and table.row_rule is None:
                    self._mark_headerless(table, rule)
            if plan is not None:
                return table, plan
        if any(t.row_rule is not None and not t.headerless for t in newest_first):
            return None  # a cut or damaged row inside a table: it must not start a new one
        rule, plan = self._headerless_plan(text, cells, kinds)
        if plan is None:
            return None
        table = in_preamble[0] if in_preamble else self._start(lineno, text)
        self._mark_headerless(table, rule)
        return table, plan

    @staticmethod
    def _mark_headerless(table: _Table, rule: str | None) -> None:
        table.row_rule = rule
        table.headerless = True
        table.run.layout = "headerless"

    def _headerless_plan(
        self, text: str, cells: list[str], kinds: tuple[str, ...]
    ) -> tuple[str | None, _RowPlan | None]:
        """Without a header: the first row rule that reads the row (strict, see TYPE_NAME)."""
        if len(cells) < _HEADERLESS_MIN_CELLS or not TYPE_NAME.fullmatch(cells[2]):
            return None, None
        for rule in _ROW_RULES:
            plan = self._rows.plan(rule, text, cells, kinds)
            if plan is not None:
                return rule, plan
        return None, None


def _test_failure(tree: Tree, evidence: Evidence) -> TestFailure:
    values = _fields(tree)
    api = next((str(t) for t in tree.children if isinstance(t, Token) and t.type in ("FAILED_API", "V1_FAILURE")), "")
    kinds = {"unwind_failure": "unwind", "test_timeout": "timeout"}
    kind = kinds.get(str(tree.data)) or ("cuda" if api.lower().startswith("cuda") else "nccl")
    return TestFailure(
        kind=kind,  # type: ignore[arg-type]
        host=values.get("failure_host") or None,
        pid=int(values["pid"]) if "pid" in values else None,
        location=values.get("location"),
        message=values.get("failure_message", "").strip().strip("'").strip(),
        evidence=evidence,
    )


def _failure_tree(text: str) -> Tree | None:
    """The failure line, also when it is glued to the end of a cut row (`... -1host: Test NCCL ...`):
    then it is read from one of the last words before `Test`."""
    tree = _parse(text, "failure_line")
    if tree is not None:
        return tree
    match = _FAILURE.search(text)
    if match is None:
        return None
    starts = [m.start() for m in re.finditer(r"(?<!\S)\S", text[: match.start()])]
    for start in reversed(starts[-3:]):
        tree = _parse(text[start:], "failure_line")
        if tree is not None:
            return tree
    return None


def _finished(table: _Table) -> BenchmarkRun:
    """The run with what is known only at its end: nranks, what the rows say, evidence."""
    run = table.run
    per_process = run.nthreads * run.ngpus if run.nthreads is not None and run.ngpus is not None else 0
    if run.nranks is None:
        if run.devices:
            # every rank has a device line; fewer than one process's ranks, or a rank number beyond the
            # lines, means a cut list
            highest = max(d.rank for d in run.devices) + 1
            run.nranks = max(len(run.devices), per_process, highest)
            if highest > len(run.devices) and highest > per_process:
                run.inferred["nranks"] = f"the device lines name rank {highest - 1}; some ranks' lines are missing"
        elif per_process:
            # nThread and nGpus count one process's ranks: an MPI run has more (its device lines say)
            run.nranks = per_process
            run.inferred["nranks"] = "nThread x nGpus of the header, the ranks of one process (no device lines)"
    _infer(run, table.columns)
    if run.evidence is None:
        run.evidence = table.first
    return run


def _infer(run: BenchmarkRun, columns: list[str]) -> None:
    if run.collective is not None and run.nranks is not None:
        return
    found = infer(run, columns)
    run.collective = run.collective or found.collective
    run.nranks = run.nranks or found.nranks
    run.inferred.update(found.reasons or {})


# ---------------------------------------------------------------------------------------------
# -J JSON output (C.7)

_JSON_BARE_NAN = re.compile(r"(?<=[:\[,])(\s*)-?(?:nan|inf)\b", re.I)
_JSON_RESULT = re.compile(r'\{\s*"size"\s*:')  # where each result begins: its line is its evidence


def parse_nccl_tests_json(text: str, source: str) -> BenchmarkRun | None:
    """The -J JSON output (both spellings: average_bus_bandwidith/bandwidith of v2.17.3-2.17.8
    and the fixed ones). Returns None when the JSON is not nccl-tests output. Never raises."""
    try:
        data = _load_json(text)
        if not _is_nccl_tests(data):
            return None
        return _json_run(data, text, source)
    except (ValueError, TypeError, KeyError, AttributeError, IndexError, OverflowError, RecursionError):
        return None


def _load_json(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        pass
    # %lf of inf prints a bare `inf`; a run that died leaves the file unterminated
    fixed = _JSON_BARE_NAN.sub(r"\1null", text)
    try:
        return json.loads(fixed)
    except ValueError:
        closed = _close_truncated(fixed)
        return json.loads(closed) if closed is not None else None


def _close_truncated(text: str) -> str | None:
    """Cut an unterminated JSON text after its last complete element and close what is open."""
    stack: list[str] = []
    in_string = escaped = False
    cut: tuple[int, tuple[str, ...]] | None = None
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if not stack:
                return None
            stack.pop()
        elif ch == ",":
            cut = (i, tuple(stack))
    if not stack or cut is None:
        return None
    end, still_open = cut
    return text[:end] + "".join(reversed(still_open))


def _is_nccl_tests(data: object) -> TypeGuard[dict]:
    if not isinstance(data, dict):
        return False
    if not isinstance(data.get("results"), list) and not isinstance(data.get("config"), dict):
        return False
    keys = ("nccl_version", "average_bus_bandwidth", "average_bus_bandwidith", "out_of_bounds")
    return any(key in data for key in keys)


def _float(value: object) -> float | None:
    """A JSON number, or the "nan" string nccl-tests writes for NaN."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _int(value: object) -> int | None:
    number = _float(value)
    if number is None or number != number or number in (float("inf"), float("-inf")):
        return None
    return int(number)


def _bool(value: object) -> bool | None:
    """nccl-tests writes booleans as the strings "true" and "false" (jsonBool)."""
    if isinstance(value, bool):
        return value
    return {"true": True, "false": False}.get(str(value).strip().lower()) if isinstance(value, str) else None


def _dict(value: object) -> dict:
    return value if isinstance(value, dict) else {}


# JSON per-iteration keys -> Measurement.extra keys (the text's -I column names where there is one)
_JSON_PER_ITERATION = {
    "min_us": "i_min",
    "max_us": "i_max",
    "p99_us": "i_p99",
    "cv_pct": "i_cv%",
    "avg_us": "avg_us",
    "p50_us": "p50_us",
    "p95_us": "p95_us",
    "stdev_us": "stdev_us",
    "skipped_iterations": "skipped_iterations",
}


def _json_measurement(place: object, per_iteration: object) -> Measurement:
    place = _dict(place)
    if not place:
        return Measurement()
    time = place.get("time", place.get("cpu_time"))
    extra: dict[str, float | str | None] = {
        column: _float(value)
        for key, column in _JSON_PER_ITERATION.items()
        if (value := _dict(per_iteration).get(key)) is not None
    }
    return Measurement(
        time_us=_float(time),
        algbw=_float(place.get("alg_bw")),
        busbw=_float(place.get("bus_bw")),
        wrong=_float(place.get("nwrong")),
        extra=extra,
    )


def _json_row(result: dict, line: int) -> BenchmarkRow | None:
    size, count = _int(result.get("size")), _int(result.get("count"))
    if size is None or count is None:
        return None
    root = _int(str(result.get("root", "-1")).strip())
    return BenchmarkRow(
        size=size,
        count=count,
        type=str(result.get("type", "")),
        redop=str(result.get("redop", "") or "").strip(),
        root=-1 if root is None else root,
        out_of_place=_json_measurement(result.get("out_of_place"), result.get("out_of_place_per_iter")),
        in_place=_json_measurement(result.get("in_place"), result.get("in_place_per_iter")),
        line=line,
    )


def _json_device(device: object) -> TestDevice | None:
    device = _dict(device)
    rank, cuda_dev = _int(device.get("rank")), _int(device.get("device"))
    if rank is None or cuda_dev is None:
        return None
    return TestDevice(
        rank=rank,
        group=_int(device.get("group")),
        pid=_int(device.get("pid")),
        host=str(device.get("hostname", "")),
        cuda_dev=cuda_dev,
        bus_id=str(device.get("device_hex", "")),
        name=str(device.get("device_info", "")).strip(),
    )


def match_lines(text: str, pattern: re.Pattern[str], count: int) -> list[int]:
    """The line each match of `pattern` ends on, when the text holds exactly `count` of them (else 1 for all): the
    lines of a JSON document's `count` records."""
    starts = [m.end() for m in pattern.finditer(text)]
    if len(starts) != count:
        return [1] * count
    lines, line, pos = [], 1, 0
    for start in starts:
        line += text.count("\n", pos, start)
        pos = start
        lines.append(line)
    return lines


def _json_nranks(devices: list[TestDevice], nthreads: int | None, ngpus: int | None) -> int | None:
    """nthreads and ngpus are per process; nccl-tests lists the first device line of each process
    (C.7), other writers list every rank."""
    processes = len({(device.host, device.pid) for device in devices}) or 1
    per_process = nthreads * ngpus if nthreads and ngpus else 0
    return max(len(devices), processes * per_process) or None


def _json_run(data: dict, text: str, source: str) -> BenchmarkRun:
    config = _dict(data.get("config"))
    results = [r for r in data.get("results") or [] if isinstance(r, dict)]
    rows = [
        row
        for result, line in zip(results, match_lines(text, _JSON_RESULT, len(results)), strict=True)
        if (row := _json_row(result, line)) is not None
    ]
    devices = [d for d in map(_json_device, config.get("devices") or []) if d is not None]
    args = data.get("args")
    program = args[0] if isinstance(args, list) and args and isinstance(args[0], str) else ""
    avg = _dict(data.get("average_bus_bandwidth", data.get("average_bus_bandwidith")))
    oob = _dict(data.get("out_of_bounds"))
    nthreads, ngpus = _int(config.get("nthreads")), _int(config.get("ngpus"))
    errors = [str(e) for e in data.get("errors") or [] if e]
    if _bool(avg.get("okay")) is False:
        errors.append("Avg bus bandwidth below 90% of NCCL_TESTS_MIN_BW (FAILED)")
    run = BenchmarkRun(
        source=source,
        line=1,
        collective=_program(program) if program else None,
        nranks=_json_nranks(devices, nthreads, ngpus),
        nthreads=nthreads,
        ngpus=ngpus,
        min_bytes=_int(config.get("minimum_bytes")),
        max_bytes=_int(config.get("maximum_bytes")),
        iters=_int(config.get("iterations")),
        warmup_iters=_int(config.get("warmup_iters")),
        nccl_library=_int(data.get("nccl_version")),
        layout="json",
        time_label="cputime" if any("cpu_time" in _dict(r.get("out_of_place")) for r in results) else "time",
        devices=devices,
        rows=rows,
        avg_busbw=_float(avg.get("bandwidth", avg.get("bandwidith"))),
        out_of_bounds=_int(oob.get("count")),
        out_of_bounds_ok=_bool(oob.get("okay")),
        errors=errors,
        evidence=Evidence(source=source, line=1, text=text.split("\n", 1)[0][:300]),
    )
    _infer(run, ["redop", "root"])
    return run
