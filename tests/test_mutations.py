"""Property-based robustness on real shapes: every fixture and every corpus paste, damaged the ways pastes
are damaged (prefix fields emptied, duplicated or stripped; records glued and cut; CRLF, ANSI colours,
tabs for spaces, NUL bytes, invalid UTF-8, 100 kB lines; lines of two files interleaved), is read and
analyzed without an internal error, every line is counted, and every finding of the undamaged input
whose evidence lines were left alone is still reported.

The number of examples is bounded for CI, and the examples are the same on every run (a suite that passes
does not fail on the next clone by chance); `NCCLSCOPE_MUTATION_EXAMPLES=5000 pytest tests/test_mutations.py`
runs the long campaign by hand, with examples drawn afresh each time.
"""

from __future__ import annotations

import io
import os
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from ncclscope.case.read import read_case
from ncclscope.diagnose.engine import analyze
from ncclscope.inputs.opening import SNIFF_BYTES, InputFile
from ncclscope.model import Analysis
from ncclscope.parse import sniff
from ncclscope.parse.one_input import parse_input
from ncclscope.render import findings as render

from conftest import FIXTURES, REPO

CORPUS = REPO.parent / "shared" / "corpus"
CAMPAIGN = os.environ.get("NCCLSCOPE_MUTATION_EXAMPLES")
EXAMPLES = int(CAMPAIGN or "60")


def _inputs() -> list[Path]:
    """Text fixtures, and the corpus pastes when ../shared is beside the repository."""
    files = [p for p in sorted(FIXTURES.rglob("*")) if p.is_file() and p.suffix != ".json" and p.name != "README.md"]
    if CORPUS.is_dir():
        files += sorted(CORPUS.glob("*.txt"))
    return files


INPUTS = _inputs()
# host:pid:tid [dev] NCCL LEVEL: the prefix fields a paste loses or repeats
# (the host is bounded: an unbounded run would make a search over a 100 kB line quadratic)
PREFIX_RE = re.compile(
    rb"(?P<host>[^\s:\[\]]{0,253}):(?P<pid>\d+):(?P<tid>\d+)(?P<sp>[ \t]+)\[(?P<dev>\d+)\][ \t]+NCCL "
)


@dataclass
class Mutated:
    """A damaged copy of one input: its lines (original numbers kept) and which originals were touched."""

    lines: list[tuple[int, bytes]]
    touched: set[int] = field(default_factory=set)
    newline: bytes = b"\n"


def _prefix(line: bytes) -> re.Match[bytes] | None:
    return PREFIX_RE.search(line) if b"NCCL " in line else None


def _empty_field(line: bytes, which: str) -> bytes:
    m = _prefix(line)
    if m is None:
        return line
    return line[: m.start(which)] + line[m.end(which) :]


def _duplicate_prefix(line: bytes) -> bytes:
    m = _prefix(line)
    return line if m is None else line[: m.end()] + line[m.start() : m.end()] + line[m.end() :]


def _strip_prefix(line: bytes) -> bytes:
    m = _prefix(line)
    if m is None:
        return line
    rest = line[m.end() :]
    level_end = rest.find(b" ")
    return line[: m.start()] + (rest[level_end + 1 :] if level_end >= 0 else rest)


def _ansi(line: bytes, at: int) -> bytes:
    pos = at % (len(line) + 1)
    return line[:pos] + b"\x1b[1;32m" + line[pos:] + b"\x1b[0m"


def _invalid_utf8(line: bytes, at: int) -> bytes:
    pos = at % (len(line) + 1)
    return line[:pos] + b"\xff\xfe\xc3" + line[pos:]


LINE_MUTATIONS = {
    "empty_host": lambda line, at: _empty_field(line, "host"),
    "empty_pid": lambda line, at: _empty_field(line, "pid"),
    "empty_dev": lambda line, at: _empty_field(line, "dev"),
    "duplicate_prefix": lambda line, at: _duplicate_prefix(line),
    "strip_prefix": lambda line, at: _strip_prefix(line),
    "cut": lambda line, at: line[: at % (len(line) + 1)],
    "ansi": _ansi,
    "tabs": lambda line, at: line.replace(b" ", b"\t"),
    "invalid_utf8": _invalid_utf8,
    "nul": lambda line, at: line + b"\x00",
}


def apply(original: bytes, edits: list[tuple[str, int, int]], crlf: bool, interleave: bytes | None = None) -> Mutated:
    """The damaged copy: `edits` are (mutation, line index, position) with indices taken modulo the line count."""
    raw_lines = original.split(b"\n")
    if raw_lines and raw_lines[-1] == b"":
        raw_lines.pop()  # the final newline ends the last line
    mutated = Mutated([(n, text.rstrip(b"\r")) for n, text in enumerate(raw_lines, start=1)])
    for name, index, at in edits:
        if not mutated.lines:
            break
        i = index % len(mutated.lines)
        number, text = mutated.lines[i]
        if name == "glue" and i + 1 < len(mutated.lines):  # two records on one line
            next_number, next_text = mutated.lines.pop(i + 1)
            mutated.lines[i] = (number, text + next_text)
            mutated.touched |= {number, next_number}
        elif name == "long_line":  # a 100 kB line of other output
            mutated.lines.insert(i, (0, b"x" * 100_000))
        elif name in LINE_MUTATIONS:
            mutated.lines[i] = (number, LINE_MUTATIONS[name](text, at))
            mutated.touched.add(number)
    if interleave is not None:
        others = [(0, line) for line in interleave.split(b"\n") if line]
        merged: list[tuple[int, bytes]] = []
        for k in range(max(len(mutated.lines), len(others))):
            merged.extend(mutated.lines[k : k + 1] + others[k : k + 1])
        mutated.lines = merged
    mutated.newline = b"\r\n" if crlf else b"\n"
    return mutated


def data_of(mutated: Mutated) -> bytes:
    return b"".join(text + mutated.newline for _, text in mutated.lines)


@cache
def original_findings(path: Path) -> Analysis:
    return analyze(read_case([str(path)], jobs=1).case)


ABSENCE_CODES = {"RUN001", "RUN006"}


def evidence_lines(path: Path, finding) -> set[int]:  # type: ignore[no-untyped-def]
    """The lines a finding stands on. A finding about an nccl-tests table is about all of it: its header,
    device lines and rows (damage to the header's numbers changes what the run is); a finding that something
    never came stands on the input's end too (a cut last line makes it "cannot judge", by design)."""
    lines = {e.line for e in finding.evidence if e.source == str(path)}
    if finding.code in ABSENCE_CODES:  # "no COMPLETE came": where the input ends is part of the claim
        lines.add(original_findings(path).case.sources[0].lines)
    for run in original_findings(path).case.benchmarks:
        last = max([r.line for r in run.rows] + [f.evidence.line for f in run.failures] + [run.line])
        if any(run.line <= n <= last for n in lines):
            lines |= set(range(run.line, last + 1))
    return lines


def render_all(analysis: Analysis) -> None:
    """Every text output a user can ask for (the HTML report is left to the corpus harness: it plots)."""
    render.print_text(analysis, Console(file=io.StringIO(), width=120))
    render.to_json(analysis)
    render.to_markdown(analysis)
    render.to_sarif(analysis)


edit = st.tuples(
    st.sampled_from([*LINE_MUTATIONS, "glue", "long_line"]),
    st.integers(min_value=0, max_value=10_000),
    st.integers(min_value=0, max_value=400),
)
SETTINGS = settings(
    max_examples=EXAMPLES,
    derandomize=CAMPAIGN is None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)


@SETTINGS
@given(
    path=st.sampled_from(INPUTS),
    edits=st.lists(edit, min_size=1, max_size=6),
    crlf=st.booleans(),
)
def test_damaged_inputs_are_read_counted_and_keep_the_findings_they_did_not_touch(
    tmp_path: Path, path: Path, edits: list[tuple[str, int, int]], crlf: bool
) -> None:
    mutated = apply(path.read_bytes(), edits, crlf)
    data = data_of(mutated)
    target = tmp_path / "damaged.log"
    target.write_bytes(data)
    outcome = read_case([str(target)], jobs=1)
    analysis = analyze(outcome.case)  # no exception: an internal error fails the test with its traceback
    render_all(analysis)
    (source,) = outcome.case.sources
    if b"\x00" in data[:SNIFF_BYTES]:
        # binary: refused in one line, never half-read; unless the damage left a Flight Recorder pickle,
        # a dump read whole (our H100 VM's fr_rank_0 with an edit that found no NCCL prefix to change)
        if not (source.usable and sniff.flight_recorder_dump(data) == "pickle"):
            assert not source.usable and source.problems
        return
    assert source.lines == len(mutated.lines)
    assert source.recognized + source.unrecognized_count == source.nccl_lines <= source.lines
    kept = {f.code for f in analysis.findings}
    for finding in original_findings(path).findings:
        lines = evidence_lines(path, finding)
        if lines and not lines & mutated.touched and not _depends_on_touched(finding, mutated, path):
            assert finding.code in kept, (finding.code, finding.message, sorted(mutated.touched), edits)


def _depends_on_touched(finding, mutated: Mutated, path: Path) -> bool:  # type: ignore[no-untyped-def]
    """A finding about what is absent or partial (EVD001, a rank missing) is about every line, and so is one
    read from a whole document (NCCL's XML dumps, JSON): damage anywhere in it, its root element say, may
    leave no document to read. Either may change legitimately."""
    document = path.suffix in (".xml", ".json")
    # a rank that never joined (HANG001) is read from what is absent: a view's rows from its header's columns
    absence = finding.code in ("EVD001", "HANG001")
    return document or absence or (finding.evidence_count or 0) > len(finding.evidence)


@SETTINGS
@given(
    first=st.sampled_from(INPUTS),
    second=st.sampled_from(INPUTS),
    edits=st.lists(edit, max_size=3),
)
def test_two_inputs_interleaved_line_by_line_are_read_and_counted(
    tmp_path: Path, first: Path, second: Path, edits: list[tuple[str, int, int]]
) -> None:
    mutated = apply(first.read_bytes(), edits, crlf=False, interleave=second.read_bytes())
    data = data_of(mutated)
    target = tmp_path / "interleaved.log"
    target.write_bytes(data)
    parsed = parse_input(InputFile(str(target), "interleaved.log"))
    if b"\x00" in data[:SNIFF_BYTES]:
        # binary: refused, unless it is a dump read whole (an empty input, such as our H100 VM's
        # `nvlink -s`, interleaved with a Flight Recorder pickle is that pickle)
        assert not parsed.source.usable or sniff.flight_recorder_dump(data) == "pickle"
        return
    assert parsed.source.lines == len(mutated.lines)
    analysis = analyze(read_case([str(target)], jobs=1).case)
    render_all(analysis)
