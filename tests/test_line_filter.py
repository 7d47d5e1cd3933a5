"""Issue 42: the cheap test of a block's other lines runs as one RE2 pass (parse/line_filter.py), its start
expression widened from Python's (parse/re2_pattern.py). The widening must never lose a line that Python's
expression matches, a match must never run into the next line, and the Python engine (used where RE2 does
not import) must give the same Case."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ncclscope.case.read import read_case
from ncclscope.parse import junk, line_hints, nccl_log, re2_pattern
from ncclscope.parse.line_filter import LineFilter
from ncclscope.parse.line_hints import other_hints
from ncclscope.parse.normalize import LAUNCHER_PREFIX_RE
from ncclscope.parse.other_lines import READERS
from ncclscope.parse.re2_pattern import Untranslatable, to_re2

from conftest import REPO

re2 = pytest.importorskip("re2", reason="google-re2 is a dependency: pip install -e .")

FIXTURES = REPO / "fixtures"
BENCH = REPO / "bench"


def _re2_match(pattern: re.Pattern[bytes]):  # type: ignore[no-untyped-def]
    options = re2.Options()
    options.encoding = re2.Options.Encoding.LATIN1
    options.max_mem = re2_pattern.RE2_MEMORY
    return re2.compile(b"(?m)^(?:" + to_re2(pattern).encode("latin-1") + b")", options).match


def _start_pattern() -> re.Pattern[bytes]:
    return nccl_log.line_start(other_hints(READERS))


# Patterns with what RE2 lacks: look-ahead (negative and positive), atomic groups, possessive repeats,
# verbose mode, negated classes and categories, an end anchor, inline ignore-case.
WIDENED = [
    rb"(?>\[\w+\]:)*+\s*+Init(?![\w])",
    rb"[^)]*\)\s*(?=x)",
    rb"(?x: \# [ \t]* (?: size | bytes ) [ \t]+ | $ )",
    rb"\S+:\d+:\d+ \[\d+\] (?:[\d.]+ \S+ )?NCCL (INFO|WARN)",
    rb"(?i:gpu)\d{1,2}\W",
    rb"a{2,5}b?[\D]",
]
ALPHABET = st.sampled_from(list(b"abx)([]:# \t\r\x0b.0123456789-\\IintNCCLWARNgpuGPU\x85\xa0\xc2") + [0x0A])


@settings(max_examples=300, deadline=None)
@given(st.lists(ALPHABET, max_size=40).map(bytes), st.sampled_from(WIDENED))
def test_the_widened_pattern_matches_wherever_pythons_does(text: bytes, source: bytes) -> None:
    pattern = re.compile(source)
    wide = _re2_match(pattern)
    for line in text.split(b"\n"):
        if pattern.match(line):
            assert wide(line) is not None, (source, line)


def test_the_line_start_and_launcher_prefixes_widen_without_loss_on_every_fixture_line() -> None:
    patterns = [_start_pattern(), re.compile(LAUNCHER_PREFIX_RE.pattern.encode())]
    lines = [
        line
        for path in sorted(FIXTURES.rglob("*"))
        if path.is_file() and path.suffix in (".log", ".txt")
        for line in path.read_bytes().splitlines()
    ]
    assert len(lines) > 15_000
    for pattern in patterns:
        wide = _re2_match(pattern)
        matched = [line for line in lines if pattern.match(line)]
        assert matched  # the check means something
        assert all(wide(line) is not None for line in matched)


def test_back_references_are_not_widened_and_the_filter_falls_back_to_python() -> None:
    with pytest.raises(Untranslatable):
        to_re2(re.compile(rb"(a)\1"))
    with pytest.raises(Untranslatable):
        to_re2(re.compile(rb"(a)?(?(1)b|c)"))
    assert LineFilter({b"GPU": 2}, re.compile(rb"(a)\1")).engine == "python"
    assert LineFilter({b"GPU": 2}, _start_pattern()).engine == "re2"


def test_a_match_never_runs_into_the_next_line() -> None:
    """Joined by b'\\n', a negated class could carry a match from one line into the next and hide the next
    line's own match; every class of the widened pattern leaves b'\\n' out."""
    lines = [b"open ( without end", b"x) closes here", b"(y)", b"plain"]
    start = re.compile(rb"[^)]*\)")
    for engine in (True, False):
        re2_pattern.ENABLED = engine
        try:
            found, opened = LineFilter({b"zz": 2}, start).scan(lines)
        finally:
            re2_pattern.ENABLED = True
        assert sorted(opened) == [1, 2] and not found


def _sample_lines() -> list[bytes]:
    """Fixture lines and the benchmark's other text (bench/job_output.py), mangled as pastes are."""
    sys.path.insert(0, str(BENCH))
    try:
        import job_output
    finally:
        sys.path.remove(str(BENCH))
    lines = [
        line
        for path in sorted(FIXTURES.rglob("*"))
        if path.is_file() and path.suffix in (".log", ".txt")
        for line in path.read_bytes().splitlines()
    ]
    for profile in ("stdout", "random", "crashloop"):
        text = "".join(seg for _, seg in zip(range(400), job_output.MAKERS[profile](7, 1 << 20), strict=False))
        lines += text.encode().splitlines()
    lines += [b"[rank3]: " + line for line in lines[:3000]] + [b"\t" + line.rstrip() + b"\r" for line in lines[:3000]]
    return lines


def test_both_engines_open_the_same_lines_and_find_every_word_a_line_holds() -> None:
    hints = other_hints(READERS)
    words = dict.fromkeys(nccl_log.NCCL_WORDS, 1)
    for word in hints.words:
        words[word] = words.get(word, 0) | 2
    start = _start_pattern()
    lines = _sample_lines()

    def held(line: bytes) -> int:  # the tags of the words a line holds, word by word
        out = 0
        for word, tags in words.items():
            if word in line:
                out |= tags
        return out

    results = {}
    for engine in (True, False):
        re2_pattern.ENABLED = engine
        try:
            results[engine] = LineFilter(words, start).scan(lines, skip_start=1)
        finally:
            re2_pattern.ENABLED = True
    for found, _opened in results.values():
        for k, line in enumerate(lines):
            assert held(line) & ~found.get(k, 0) == 0, line  # never fewer words than the line holds
    (found_re2, opened_re2), (found_py, opened_py) = results[True], results[False]
    # the start matters where no NCCL word was found; there both engines open the same lines, alike
    both = {k for k in range(len(lines)) if not (found_re2.get(k, 0) | found_py.get(k, 0)) & 1}
    assert {k for k in opened_re2 if k in both} == {k for k in opened_py if k in both}
    assert all(opened_re2[k].groupdict() == opened_py[k].groupdict() for k in both & set(opened_re2))
    assert len(opened_re2) > 50


def test_the_python_engine_gives_the_same_case_as_re2(tmp_path: Path) -> None:
    files = sorted(
        str(p) for p in FIXTURES.rglob("*") if p.is_file() and p.suffix in (".log", ".txt") and p.stat().st_size
    )
    stdout = tmp_path / "stdout.log"
    stdout.write_bytes(b"\n".join(_sample_lines()[-20_000:]) + b"\n")
    cases = {}
    for engine in (True, False):
        re2_pattern.ENABLED = engine
        nccl_log._line_filter.cache_clear()
        try:
            cases[engine] = [read_case([path], jobs=1).case.model_dump() for path in [*files, str(stdout)]]
        finally:
            re2_pattern.ENABLED = True
            nccl_log._line_filter.cache_clear()
    assert cases[True] == cases[False]


def test_the_junk_check_in_one_search_answers_as_its_tests_in_turn() -> None:
    """parse/junk.py: whether a block holds a word of any kind ncclscope reads, per block of fixtures (every
    kind), of the benchmark's other text and of random text, and where a word sits at a block's edge."""
    bare = junk._bare_message_words()
    lines = _sample_lines()
    blocks = [b"\n".join(lines[k : k + 7]) for k in range(0, len(lines), 7)]
    blocks += [b"NCCL", b"xNCCL_", b"GPU0 ", b"  Rank  0", b"Channel", b"ranks 3", b"4  2 float sum", b"nccl"]
    answers = {}
    for engine in (True, False):
        re2_pattern.ENABLED = engine
        junk._one_search.cache_clear()
        try:
            assert (junk._one_search(bare) is not None) == engine
            answers[engine] = [junk.holds_known_words(block, bare) for block in blocks]
        finally:
            re2_pattern.ENABLED = True
            junk._one_search.cache_clear()
    assert answers[True] == answers[False]
    assert 0 < sum(answers[True]) < len(blocks)


def test_a_quiet_line_that_is_not_valid_utf8_is_still_counted(tmp_path: Path) -> None:
    """A line that is not valid UTF-8 goes to the reader that counts it, among quiet lines, NCCL lines and
    valid non-ASCII ones (a progress bar)."""
    nccl = b"node1:77:77 [0] NCCL INFO NCCL version 2.26.2+cuda12.8\n"
    quiet = b"step 12 loss 3.1\n" * 40
    bar = "Epoch 0:  40%|\u2588\u2588\u2588\u2588      | 4/10\n".encode() * 5
    log = tmp_path / "job.log"
    log.write_bytes(nccl + quiet + bar + b"weights \xff\xfe dumped\n" + quiet + b"\xc3 cut\n" + nccl)
    counts = []
    for cheap in (True, False):
        line_hints.CHEAP_TEST = cheap
        try:
            counts.append(read_case([str(log)], jobs=1).case.sources[0].invalid_utf8_lines)
        finally:
            line_hints.CHEAP_TEST = True
    assert counts == [2, 2]


def test_a_word_carries_the_tags_of_every_word_its_match_can_hide() -> None:
    """A match of `Traceback (most` holds `back (` and ends where `most recent` begins: its line is found for
    both, and so for what they hide in turn (`recent`)."""
    from ncclscope.parse.word_scan import hidden_tags

    tags = {b"Traceback (most": 1, b"back (": 2, b"most recent": 4, b"recent": 8, b"NCCL": 16}
    assert hidden_tags(tags) == {
        b"Traceback (most": 1 | 2 | 4 | 8,
        b"back (": 2,
        b"most recent": 4 | 8,
        b"recent": 8,
        b"NCCL": 16,
    }
