"""The raw log's line-offset index: line numbers and texts as the parser sees them, on small and big files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ncclscope.case.read import read_case
from ncclscope.tui.lines import ELLIPSIS, SHOWN_CHARS, LineIndex, match_text, shown_text

from conftest import FIXTURES, REPO, analysis_of


def indexed(path: Path, budget: int | None = None) -> LineIndex:
    index = LineIndex(str(path))
    if budget is None:
        index.index_all()
    else:
        while not index.index_more(budget):
            pass
    return index


def all_lines(index: LineIndex) -> list[bytes]:
    return [index.line(n) for n in range(1, index.line_count + 1)]


def test_lines_of_a_small_file_are_numbered_from_one(tmp_path: Path) -> None:
    path = tmp_path / "log.txt"
    path.write_bytes(b"first\nsecond\n\nfourth\n")
    assert all_lines(indexed(path)) == [b"first", b"second", b"", b"fourth"]


def test_a_last_line_without_newline_counts(tmp_path: Path) -> None:
    path = tmp_path / "log.txt"
    path.write_bytes(b"first\nsecond")
    assert all_lines(indexed(path)) == [b"first", b"second"]


def test_an_empty_file_has_no_lines(tmp_path: Path) -> None:
    path = tmp_path / "empty.txt"
    path.write_bytes(b"")
    index = indexed(path)
    assert (index.complete, index.line_count, index.lines(1, 0)) == (True, 0, [])


def test_crlf_ends_lines_at_the_newline_and_the_cr_is_not_shown(tmp_path: Path) -> None:
    path = tmp_path / "crlf.txt"
    path.write_bytes(b"one\r\ntwo\r\nthree")
    index = indexed(path)
    assert all_lines(index) == [b"one\r", b"two\r", b"three"]
    assert [shown_text(raw) for raw in all_lines(index)] == ["one", "two", "three"]


def test_a_lone_cr_does_not_end_a_line(tmp_path: Path) -> None:
    path = tmp_path / "cr.txt"
    path.write_bytes(b"progress 10%\rprogress 100%\nnext\n")
    assert indexed(path).line_count == 2


def test_lines_across_chunk_boundaries_are_whole(tmp_path: Path) -> None:
    path = tmp_path / "log.txt"
    expected = [f"line {i} ".encode() * (i % 7) for i in range(1, 500)]
    path.write_bytes(b"\n".join(expected) + b"\n")
    assert all_lines(indexed(path, budget=37)) == expected


def test_lines_can_be_read_before_the_index_is_complete(tmp_path: Path) -> None:
    path = tmp_path / "log.txt"
    path.write_bytes(b"".join(f"line {i}\n".encode() for i in range(1, 10_001)))
    index = LineIndex(str(path))
    index.index_more(1000)
    assert not index.complete
    assert 0 < index.line_count < 10_000
    assert index.line(index.line_count) == f"line {index.line_count}".encode()


def test_a_block_of_lines_is_read_in_one_slice(tmp_path: Path) -> None:
    path = tmp_path / "log.txt"
    path.write_bytes(b"a\nbb\nccc\ndddd")
    assert indexed(path).lines(2, 4) == [b"bb", b"ccc", b"dddd"]


def test_a_line_number_out_of_range_is_an_index_error(tmp_path: Path) -> None:
    path = tmp_path / "log.txt"
    path.write_bytes(b"a\nb\n")
    with pytest.raises(IndexError):
        indexed(path).line(3)


def test_three_million_lines_are_all_indexed_and_random_lines_are_right(tmp_path: Path) -> None:
    path = tmp_path / "big.log"
    count = 3_000_000
    numbers = np.arange(1, count + 1)
    # variable widths: "L1\n" ... "L3000000\n"
    path.write_bytes(("\n".join(f"L{n}" for n in numbers.tolist()) + "\n").encode())
    index = indexed(path)
    assert index.line_count == count
    picks = [
        1,
        2,
        9,
        10,
        99_999,
        100_000,
        1_234_567,
        count - 1,
        count,
        *np.random.default_rng(5).integers(1, count, 50),
    ]
    assert [index.line(int(n)) for n in picks] == [f"L{n}".encode() for n in picks]


def test_ansi_escapes_are_stripped_and_other_controls_escaped() -> None:
    assert shown_text(b"\x1b[1;31mNCCL WARN boom\x1b[0m") == "NCCL WARN boom"
    assert shown_text(b"bell\x07 and lone escape \x1b here") == "bell\\x07 and lone escape \\x1b here"


def test_invalid_utf8_is_decoded_with_replacement() -> None:
    assert shown_text(b"caf\xe9 ok") == "caf\ufffd ok"


def test_a_very_long_line_is_cut_with_an_ellipsis() -> None:
    text = shown_text(b"x" * 100_000)
    assert text == "x" * SHOWN_CHARS + ELLIPSIS


def test_line_count_equals_the_parsers_on_every_nccl_fixture() -> None:
    fixtures = sorted((FIXTURES / "nccl").glob("*.log"))
    outcome = read_case([str(p) for p in fixtures], jobs=1)
    counted = {source.path: source.lines for source in outcome.case.sources}
    assert {str(p): indexed(p).line_count for p in fixtures} == counted


@pytest.mark.parametrize(
    "fixture",
    [
        "nccl/variant_crlf.log",
        "nccl/variant_ansi_colors.log",
        "nccl/variant_glued_records.log",
        "nccl/variant_tmux_scroll_markers.log",
        "nccl/v2_30_7_latest.log",
        "mixed/multi_host_job_problems.txt",
    ],
)
def test_the_line_at_every_nccl_evidence_line_number_is_the_evidence_text(fixture: str) -> None:
    analysis = analysis_of(f"fixtures/{fixture}")
    path = str(REPO / "fixtures" / fixture)
    evidence = [e for f in analysis.findings for e in f.evidence]
    evidence += [e for p in analysis.case.processes for e in p.evidence.values()]
    # NCCL records quote their line; benchmark rows and matrices are summed up in words instead
    evidence = [e for e in evidence if e.source == path and "NCCL " in e.text]
    assert evidence, "the fixture should give evidence lines"
    index = indexed(Path(path))
    assert {(e.line, match_text(index.line(e.line))) for e in evidence} == {(e.line, e.text) for e in evidence}


def test_unrecognised_line_numbers_point_at_their_text() -> None:
    path = FIXTURES / "nccl" / "variant_glued_records.log"
    source = read_case([str(path)], jobs=1).case.sources[0]
    index = indexed(path)
    assert [u.line for u in source.unrecognized] == [52, 53]
    assert all(match_text(index.line(u.line))[:300] == u.text for u in source.unrecognized)
