"""Issue 42: a line that no reader wants costs nothing (parse/line_hints.py, word_scan.py). That must change
no result: every fixture, every corpus paste and the benchmark's generated logs of other text give the same
Case with the cheap test as without it, read by one process and in byte ranges."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ncclscope.case.read import read_case
from ncclscope.inputs import opening
from ncclscope.inputs.opening import InputFile
from ncclscope.parse import line_hints, nccl_log, split, workers
from ncclscope.parse.line_hints import other_hints, stored_hints
from ncclscope.parse.nccl_log import NcclLogParser
from ncclscope.parse.other_lines import READERS, OtherLines
from ncclscope.parse.word_scan import WordScan

from conftest import REPO

FIXTURES = REPO / "fixtures"
CORPUS = REPO.parent / "shared" / "corpus"
BENCH = REPO / "bench"


def _case(paths: list[str], cheap: bool, jobs: int = 1, sparse: bool = True) -> dict:
    """The Case read with the cheap test or without it, and the sparse way where it pays or never."""
    line_hints.CHEAP_TEST, nccl_log.SPARSE = cheap, sparse
    try:
        return read_case(paths, jobs=jobs).case.model_dump()
    finally:
        line_hints.CHEAP_TEST = nccl_log.SPARSE = True


def _text_files(folder: Path) -> list[Path]:
    return sorted(
        p for p in folder.rglob("*") if p.is_file() and p.suffix in (".log", ".txt", ".md") and p.stat().st_size
    )


def test_every_fixture_gives_the_same_case_with_the_cheap_test_and_without() -> None:
    files = _text_files(FIXTURES)
    assert len(files) > 150
    for path in files:
        assert _case([str(path)], True) == _case([str(path)], False), path


def test_every_corpus_paste_gives_the_same_case_with_the_cheap_test_and_without() -> None:
    if not CORPUS.is_dir():
        pytest.skip(f"the corpus is not beside the repository ({CORPUS})")
    files = _text_files(CORPUS)
    assert len(files) > 100
    for path in files:
        assert _case([str(path)], True) == _case([str(path)], False), path


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """2 MB of each profile of other text the benchmark makes (bench/job_output.py), three seeds each."""
    sys.path.insert(0, str(BENCH))
    try:
        import generate_log

        out = tmp_path_factory.mktemp("generated")
        made = {}
        for profile in generate_log.OTHER_PROFILES:
            for seed in (1, 2, 3):
                path = out / f"{profile}-{seed}.log"
                generate_log.generate(str(path), 2 << 20, seed=seed, profile=profile)
                made[f"{profile}-{seed}"] = path
    finally:
        sys.path.remove(str(BENCH))
    return made


def test_the_generated_logs_of_other_text_give_the_same_case_with_the_cheap_test_and_without(
    generated: dict[str, Path],
) -> None:
    for name, path in generated.items():
        assert _case([str(path)], True) == _case([str(path)], False), name


def test_byte_ranges_with_the_cheap_test_give_the_case_one_process_gives_without_it(
    generated: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A range keeps only the lines some reader may want (and all of its first lines): joined, they give
    what one process reading every line gives."""
    monkeypatch.setattr(split, "SPLIT_MIN_BYTES", 1)
    monkeypatch.setattr(split, "RANGE_MIN_BYTES", 1 << 16)
    monkeypatch.setattr(split, "LEAD_LINES_KEPT", 50)
    for name in ("stdout-1", "jobs-2", "crashloop-3"):
        path = str(generated[name])
        assert len(workers.tasks([InputFile(path, path)], 2)) > 2  # read in ranges
        assert _case([path], True, jobs=2) == _case([path], False, jobs=1), name
    # tables, matrices and host reports longer than the lines a range keeps first: where one goes on past
    # them at a range's start, the file is read whole
    monkeypatch.setattr(split, "LEAD_LINES_KEPT", 5)
    kinds = ("nccl_tests", "topo", "smi", "ib")
    mixed = [p for kind in kinds for p in _text_files(FIXTURES / kind)]
    stdout = Path(generated["stdout-1"]).read_bytes().split(b"\n")
    joined = Path(generated["stdout-1"]).with_name("joined.log")
    pieces = [
        b"\n".join(stdout[k * 40 : k * 40 + 40]) + b"\n" + p.read_bytes().rstrip(b"\n") + b"\n"
        for k, p in enumerate(mixed)
    ]
    joined.write_bytes(b"".join(pieces) * 2)
    assert len(workers.tasks([InputFile(str(joined), str(joined))], 2)) > 2
    assert _case([str(joined)], True, jobs=2) == _case([str(joined)], False, jobs=1)


def test_a_line_is_found_for_every_word_it_holds_even_where_the_words_overlap() -> None:
    """The words with an upper-case letter are found by one regular expression whose matches do not
    overlap: a match that hides another word carries its tags."""
    scan = WordScan({b"NCCL": 2, b"CCL": 1, b"Last error": 2, b"GPU": 4, b"watchdog": 8})
    lines = [b"xx NCCL yy", b"NCCLast error", b"plain text", b"a GPU and a watchdog", b"CCL"]
    data = b"\n".join(lines)
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    found = scan.scan(data, starts)
    assert found[0] & 3 == 3 and found[1] & 3 == 3 and 2 not in found
    assert found[3] == 12 and found[4] & 1
    for i, line in enumerate(lines):  # the test of one line finds what the block's search finds for it
        assert scan.tags(line) & ~found.get(i, 0) == 0, line


VARIANTS = {  # what terminals, launchers and collectors do to lines (knowledge/real-world-variants.md)
    "crlf": lambda b: b.replace(b"\n", b"\r\n"),
    "bom": lambda b: b"\xef\xbb\xbf" + b,
    "tabs": lambda b: b.replace(b"  ", b"\t"),
    "ansi": lambda b: b.replace(b"\n", b"\x1b[0m\n"),
    "nbsp": lambda b: b.replace(b"\n", b"\n\xc2\xa0"),
    "launcher": lambda b: b"".join(b"[rank3]: " + line + b"\n" for line in b.split(b"\n")),
    "tmux": lambda b: b.replace(b"\n", b"      [22/1819]\n"),
    "ray": lambda b: b.replace(b"\n", b" [repeated 3x across cluster]\n"),
    "backticks": lambda b: b"".join(b"`" + line + b"`\n" for line in b.split(b"\n")),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_the_other_readers_inputs_mangled_give_the_same_case_with_the_cheap_test_and_without(
    variant: str, tmp_path: Path
) -> None:
    """A table, matrix or report whose lines a paste changed: what clean() drops from a line's end (CR, a
    terminal's trailer) or a launcher puts before it must not hide a line a reader wants (a CRLF nccl-tests
    table once lost its bare '#' lines)."""
    files = [p for kind in ("nccl_tests", "topo", "smi", "ib", "framework") for p in _text_files(FIXTURES / kind)]
    assert len(files) > 40
    for path in files:
        mangled = tmp_path / f"{path.stem}.txt"
        mangled.write_bytes(VARIANTS[variant](path.read_bytes()))
        assert _case([str(mangled)], True) == _case([str(mangled)], False), (path, variant)


@pytest.fixture
def sparse_blocks(monkeypatch: pytest.MonkeyPatch) -> list[range]:
    """The lines of each block read the sparse way."""
    blocks: list[range] = []
    feed = NcclLogParser._feed_sparse

    def counted(self: NcclLogParser, data: bytes, first_line: int) -> None:
        blocks.append(range(first_line, first_line + data.count(b"\n") + 1))
        feed(self, data, first_line)

    monkeypatch.setattr(NcclLogParser, "_feed_sparse", counted)
    return blocks


def test_every_input_read_the_sparse_way_gives_the_case_read_line_by_line(
    generated: dict[str, Path], sparse_blocks: list[int]
) -> None:
    """Issue 42: where most lines are other programs' text, a block's lines of interest are found in one pass
    and the rest are never split out (nccl_log.NcclLogParser._sparse); that must change nothing. The sparse way
    is taken for many of these inputs (each is one block), so each shows it."""
    files = [*_text_files(FIXTURES), *(_text_files(CORPUS) if CORPUS.is_dir() else []), *generated.values()]
    used = 0
    for path in files:
        before = len(sparse_blocks)
        assert _case([str(path)], True) == _case([str(path)], True, sparse=False), path
        used += len(sparse_blocks) > before
    assert used > 60, used


def test_nccl_s_name_found_by_the_filter_or_line_by_line_gives_the_same_case(
    generated: dict[str, Path], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Issue 42: the lines no template reads are searched for "CCL" one by one where most are NCCL's (new shapes),
    or as one more word of the filter's pass where most are other programs' text (a crash loop's tracebacks).
    Either way must give the same Case; each input is read both ways, and the probe chooses both ways among them."""
    files = [*_text_files(FIXTURES), *(_text_files(CORPUS) if CORPUS.is_dir() else []), *generated.values()]
    chosen: set[bool] = set()
    probe = nccl_log._ccl_by_filter

    def noted(lines: nccl_log.Lines, rest: list[int]) -> bool:
        way = probe(lines, rest)
        chosen.add(way)
        return way

    monkeypatch.setattr(nccl_log, "_ccl_by_filter", noted)
    for path in files:
        _case([str(path)], True)
    assert chosen == {True, False}  # the probe takes each way on some of them
    # NCCL's records glued after other text, mid-line (no line start tells them), between a crash loop's lines
    glued = tmp_path / "glued.log"
    head = "node01:4242:4242 [0] NCCL INFO"
    loop = [
        "Traceback (most recent call last):",
        '  File "/srv/train.py", line 88, in <module>',
        "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error",
        *(f"{{'loss': {k / 7:.4f}, 'step': {k}}}" for k in range(20)),
    ]
    records = [
        f"step 5 | loss 1.25{head} NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>",
        f"[rank0]: wait{head} comm 0x55d0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0x1234 - Init START",
    ]
    glued.write_text("\n".join([*loop, records[0], *loop, records[1], *loop]) + "\n")
    files.append(glued)
    for path in files:
        monkeypatch.setattr(nccl_log, "_ccl_by_filter", lambda lines, rest: True)
        by_filter = _case([str(path)], True)
        monkeypatch.setattr(nccl_log, "_ccl_by_filter", lambda lines, rest: False)
        assert by_filter == _case([str(path)], True), path
    assert by_filter["communicators"] and by_filter["net_devices"]  # the glued records were read
    # the filter's way finds "CCL" wherever it is, as the test of each line does (RCCL, a cut "CCL WARN")
    only_ccl = [b"loaded RCCL 2.18 from /opt/rocm", b"x CCL WARN cut", b"no such name here"]
    found, _ = nccl_log._line_filter(stored_hints(), with_ccl=True).scan(only_ccl, skip_start=1)
    assert {k for k, tag in found.items() if tag & 1} == {0, 1}
    found, _ = nccl_log._line_filter(stored_hints()).scan(only_ccl, skip_start=1)
    assert not any(tag & 1 for tag in found.values())


def test_the_sparse_way_keeps_autolinks_tracebacks_damaged_text_and_bare_messages(
    tmp_path: Path, sparse_blocks: list[range], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the sparse way must treat as the way line by line does, in one input of mostly other text read in
    small blocks: an autolinked file name in NCCL's lines, a traceback whose lines wait on each other, blank
    lines, a last line of other text. A block that is not valid UTF-8 is read line by line, and so is every
    block after a bare NCCL message (no "CCL" in it: a line like it could be a record)."""
    monkeypatch.setattr(opening, "BLOCK_BYTES", 2048)
    job = [f"step {k}/500 | loss {7 - k / 100:.4f} | lr 3.0e-04" for k in range(300)]
    head = "node01:4242:4242 [0] NCCL INFO"
    nccl = [
        f"{head} [net.cc:12](http://net.cc:12/) NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>",
        f"{head} Channel 00/02 :    0   1",
        f"{head} comm 0x55d0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 18000 commId 0x1234 - Init COMPLETE",
    ]
    traceback = [
        "Traceback (most recent call last):",
        '  File "/srv/train.py", line 88, in <module>',
        "    main()",
        "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error",
    ]
    text = [*job[:100], *nccl, "", *job[100:150], *traceback, "", *job[150:]]
    plain = tmp_path / "job.log"
    plain.write_text("\n".join(text) + "\n")
    damaged_line = text.index(job[120]) + 1
    damaged = tmp_path / "damaged.log"
    damaged.write_bytes(plain.read_bytes().replace(b"step 120/", b"step \xff120/"))
    bare_text = [*job[:100], *nccl, *job[100:110], "NET/IB : No device found.", *job[110:]]
    bare_line = bare_text.index("NET/IB : No device found.") + 1
    bare = tmp_path / "bare.log"
    bare.write_text("\n".join(bare_text) + "\n")
    for path in (plain, damaged, bare):
        sparse_blocks.clear()
        case = _case([str(path)], True)
        assert case == _case([str(path)], True, sparse=False), path.name
        assert len(sparse_blocks) >= 2, path.name
        if path is plain:
            assert case["framework"] and case["processes"] and case["processes"][0]["bootstrap_interface"] is None
            assert any(damaged_line in block for block in sparse_blocks)
        elif path is damaged:
            assert not any(damaged_line in block for block in sparse_blocks)
        else:
            assert all(block.start <= bare_line for block in sparse_blocks)


def test_text_that_is_not_utf8_gives_the_same_case_with_the_cheap_test_and_without(tmp_path: Path) -> None:
    """A damaged byte in a block of NCCL's lines, in one of them or in a line of other text between them:
    the readers count the damaged lines whichever way the block is read (dense or sparse, cheap test or not)."""
    log = (FIXTURES / "nccl" / "v2_28_healthy_multinode_gdr.log").read_bytes().split(b"\n")
    job = [f"step {k}/500 | loss {7 - k / 100:.4f}".encode() for k in range(40)]
    lines = [*log[:20], b"epoch 3 \xff done", *log[20:], *job]
    in_other = tmp_path / "other.log"
    in_other.write_bytes(b"\n".join(lines) + b"\n")
    in_record = tmp_path / "record.log"
    in_record.write_bytes(b"\n".join([*log[:5], log[5].replace(b" NCCL INFO ", b" NCCL INFO \xfe"), *log[6:]]) + b"\n")
    sparse = tmp_path / "sparse.log"
    sparse.write_bytes(b"\n".join([*job, b"epoch 3 \xff done", *job, *log[:3], *job]) + b"\n")
    for path in (in_other, in_record, sparse):
        cheap = _case([str(path)], True)
        assert cheap == _case([str(path)], False), path.name
        assert cheap == _case([str(path)], True, sparse=False), path.name
        if path is not in_record:  # (a record's damaged byte is read with a replacement: it is no reader's)
            assert cheap["sources"][0]["invalid_utf8_lines"] == 1, path.name


def test_the_stored_hints_are_the_readers_own() -> None:
    """A byte range's worker tests lines with data/reader_hints.json before it loads the readers: after a change to
    a reader's HINT_WORDS or HINT_START, run `python tools/reader_hints.py > ncclscope/data/reader_hints.json`."""
    assert stored_hints() == other_hints(READERS), (
        "run: python tools/reader_hints.py > ncclscope/data/reader_hints.json"
    )


def test_readers_that_have_read_nothing_are_left_as_they_were_by_an_empty_line() -> None:
    """Why a range's worker lets an empty line pass unread until its readers have read something (split.py)."""
    readers = OtherLines("x.log")
    before = [dict(vars(r)) for r in readers._readers]
    readers.take(1, "", None)
    assert [dict(vars(r)) for r in readers._readers] == before
    assert not readers.busy


def test_a_cut_nvlink_line_is_wanted_and_a_line_that_only_starts_with_l_is_not(tmp_path: Path) -> None:
    """nvidia-smi nvlink's link lines, whole or cut to `L`...`Link 5`, are wanted where no reader waits (another
    program's line came between); a line that merely starts with an L (one base64 line in 64) is not, and
    costs nothing (it once sent 10,000 lines per 100 MB of random text to the readers)."""
    hints = other_hints(READERS)
    wanted = ["Link 3: 26.562 GB/s", "\tLink\t12 , x", "L", "\t Lin  \r", "Link 5", "Link\xa0", "[1,0]<stdout>:Li"]
    for line in wanted:
        assert hints.wanted(line.encode()), line
    for line in ["LQE4cSAqDTtPQada2aioc3mzQfpphSJ+NnoPJPkeVffTkf2E", "Loss 0.25", "Linking done", "L 5", "Link 5 up"]:
        assert not hints.wanted(line.encode()), line
    # GPU 6's listing broken by another program's line, then its link lines whole and cut: the same Case either way
    lines = (FIXTURES / "smi" / "nvlink_s_gpu6_two_down.txt").read_text().splitlines()
    gpu6 = lines.index(next(line for line in lines if line.startswith("GPU 6:")))
    cut = [*lines[: gpu6 + 2], "step 12 | loss 0.25", "\tLin", *lines[gpu6 + 2 : gpu6 + 5], "LQE4cSAq", "\tL  "]
    path = tmp_path / "nvlink.txt"
    path.write_text("\n".join([*cut, *lines[gpu6 + 5 :]]) + "\n")
    case = _case([str(path)], True)
    assert case == _case([str(path)], False)
    assert len(case["sources"][0]["problems"]) == 2  # the two cut lines, each named
