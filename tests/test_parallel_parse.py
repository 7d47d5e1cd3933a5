"""One large file read by several processes (byte ranges, parse/split.py) gives the Case one process gives.

The split threshold is lowered so that a file of a few hundred kB is cut into ranges; the ranges run in
real worker processes (fork inherits the lowered threshold). Tables, matrices and framework records that
cross a range's end must still be read whole, and every line number must be the file's own.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ncclscope.case import read as reading
from ncclscope.case.read import ReadOutcome, read_case
from ncclscope.inputs.opening import InputFile
from ncclscope.parse import split, workers

from conftest import FIXTURES

MIXED = [
    "nccl/v2_18_8xh100_nvswitch.log",
    "nccl_tests/multi_block_types.txt",
    "nccl/errors_ib_completion.log",
    "framework/torch25_watchdog_rank_missing.log",
    "nccl/coll_tuning_trace.log",
    "nccl/v2_12_two_hosts_ib_gdr.log",
    "nccl_tests/failure_mid_table.txt",
    "nccl/init_incomplete_two_hosts.log",
]


@pytest.fixture
def big_mixed_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(split, "SPLIT_MIN_BYTES", 1)
    monkeypatch.setattr(split, "RANGE_MIN_BYTES", 1)
    parts = [(FIXTURES / name).read_bytes().rstrip(b"\n") + b"\n" for name in MIXED]
    target = tmp_path / "mixed.log"
    target.write_bytes(b"".join(parts * 6))
    return target


def read_both_ways(target: Path, jobs: int) -> ReadOutcome:
    """`target` read by one process and in byte ranges by `jobs` workers (checked to be cut into more
    ranges than workers): the Cases must be equal; the one read in ranges is returned."""
    assert len(workers.tasks([InputFile(str(target), str(target))], jobs)) > jobs
    serial = read_case([str(target)], jobs=1)
    parallel = read_case([str(target)], jobs=jobs)
    assert parallel.case.model_dump() == serial.case.model_dump()
    return parallel


def test_ranges_start_at_line_starts_and_cover_the_file(big_mixed_file: Path) -> None:
    data = big_mixed_file.read_bytes()
    ranges = split.byte_ranges(str(big_mixed_file), 7)
    assert len(ranges) == 7
    assert ranges[0][0] == 0 and ranges[-1][1] == len(data)
    for (_, end), (start, _) in zip(ranges, ranges[1:], strict=False):
        assert end == start and data[start - 1 : start] == b"\n"


def test_the_first_range_is_short_so_that_its_records_are_walked_while_the_rest_is_parsed(
    big_mixed_file: Path,
) -> None:
    data = big_mixed_file.read_bytes()
    tasks = workers.tasks([InputFile(str(big_mixed_file), str(big_mixed_file))], 2)
    spans = [t.span for t in tasks]
    assert spans[0][0] == 0 and spans[-1][1] == len(data)
    for (_, end), (start, _) in zip(spans, spans[1:], strict=False):
        assert end == start and data[start - 1 : start] == b"\n"
    first, second = (b - a for a, b in spans[:2])
    assert 0.2 < first / (first + second) < 0.3  # a quarter of what one range would have been
    assert split.first_range_cut(str(big_mixed_file), [(0, len(data))], 0.25) == [(0, len(data))]
    # and the last is cut in pieces, so that the workers end close together (the count is odd otherwise)
    pieces = [b - a for a, b in spans[-split.LAST_RANGE_PIECES :]]
    assert max(pieces) < 0.5 * (spans[-split.LAST_RANGE_PIECES - 1][1] - spans[-split.LAST_RANGE_PIECES - 1][0])
    assert split.last_range_cut(str(big_mixed_file), [(0, 5), (5, len(data))], 3) == [(0, 5), (5, len(data))]


@pytest.mark.parametrize(("min_ranges", "workers", "expected"), [(5, 2, 4), (7, 2, 6), (3, 2, 2), (8, 2, 8), (1, 2, 1)])
def test_a_file_is_cut_into_a_multiple_of_the_workers_ranges(
    big_mixed_file: Path, min_ranges: int, workers: int, expected: int
) -> None:
    # 5 ranges on 2 workers: one reads the fifth alone while the other idles (measured on a 96 MB log of
    # COLL lines: 5 ranges 1.07-1.13 s, 4 or 6 ranges 0.96-1.07 s); fewer ranges than workers stay as they are
    size = big_mixed_file.stat().st_size
    ranges = split.byte_ranges(str(big_mixed_file), 8, size // min_ranges, workers)
    assert len(ranges) == expected
    assert ranges[0][0] == 0 and ranges[-1][1] == size


@pytest.mark.parametrize("jobs", [2, 5])
def test_a_file_read_in_ranges_gives_the_case_one_process_gives(big_mixed_file: Path, jobs: int) -> None:
    item = InputFile(str(big_mixed_file), str(big_mixed_file))
    assert len(workers.tasks([item], jobs)) == jobs * split.RANGES_PER_WORKER + split.LAST_RANGE_PIECES  # cut
    serial = read_case([str(big_mixed_file)], jobs=1)
    parallel = read_case([str(big_mixed_file)], jobs=jobs)
    assert parallel.exit_code == serial.exit_code
    assert parallel.case.model_dump() == serial.case.model_dump()
    source = serial.case.sources[0]
    assert source.lines == big_mixed_file.read_bytes().count(b"\n")
    assert source.kinds == ["nccl_log", "nccl_tests", "framework_log"]


@pytest.mark.parametrize("jobs", [2, 3])
def test_every_text_fixture_read_in_ranges_gives_the_case_one_process_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int
) -> None:
    """Every shape our fixtures hold (records glued to records, to cut prefixes and to nccl-tests rows,
    launcher tags, timestamps ...), in a shuffled order, some pastes starting inside a line: where a glued
    record's host begins is decided from its line alone, so a range that has not seen the lines before it
    reads it as one process reading the whole file does (it once depended on the hosts seen earlier)."""
    import random

    monkeypatch.setattr(split, "SPLIT_MIN_BYTES", 1)
    monkeypatch.setattr(split, "RANGE_MIN_BYTES", 1)
    rng = random.Random(5)
    texts = []
    for path in sorted(p for p in FIXTURES.rglob("*") if p.is_file() and p.suffix in (".log", ".txt")):
        data = path.read_bytes()
        if data and b"\x00" not in data:
            texts.append(data[rng.randrange(len(data)) :] if rng.random() < 0.2 else data)
    rng.shuffle(texts)
    target = tmp_path / "pastes.log"
    target.write_bytes(b"".join(t if t.endswith(b"\n") else t + b"\n" for t in texts))
    cut = workers.tasks([InputFile(str(target), str(target))], jobs)
    assert len(cut) == jobs * split.RANGES_PER_WORKER + split.LAST_RANGE_PIECES
    read_both_ways(target, jobs)


def test_a_damaged_record_after_the_unrecognized_lines_kept_is_reported_by_every_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the first 50 lines not understood are kept; whether the input holds a cut record is known apart
    from them, so one process (which prunes what it keeps from time to time) and the ranges (cut to 50 as
    they are joined) say the same."""
    monkeypatch.setattr(split, "SPLIT_MIN_BYTES", 1)
    monkeypatch.setattr(split, "RANGE_MIN_BYTES", 1)
    lines = [f"node1:1:1 [0] NCCL INFO frobnicate widget {n}" for n in range(60)]  # unknown messages
    lines += ["node1:1:1 [0] NCCL IN"]  # line 61: a fragment of a record
    lines += [f"node1:1:1 [0] NCCL INFO Channel {n % 32:02d}/0 : 0[0] -> 1[1] via P2P/IPC" for n in range(300)]
    lines += ["training finished"]  # not inside a listing: its end says nothing
    target = tmp_path / "damaged.log"
    target.write_text("\n".join(lines) + "\n")
    source = read_both_ways(target, 2).case.sources[0]
    assert len(source.unrecognized) == 50 and source.unrecognized_count == 61
    assert source.truncated == ["a record of it is cut or damaged (line 61)"]


def test_several_large_files_share_the_workers(big_mixed_file: Path, tmp_path: Path) -> None:
    other = tmp_path / "second.log"
    other.write_bytes(big_mixed_file.read_bytes())
    items = [InputFile(str(p), str(p)) for p in (big_mixed_file, other)]
    assert len(workers.tasks(items, 4)) == 4 * split.RANGES_PER_WORKER + 2 * split.LAST_RANGE_PIECES  # 2 workers each
    serial = read_case([str(big_mixed_file), str(other)], jobs=1)
    parallel = read_case([str(big_mixed_file), str(other)], jobs=4)
    assert parallel.case.model_dump() == serial.case.model_dump()


def test_only_documents_are_read_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Logs whose lines start with `[` (timestamps, rank tags) or `{` (JSON lines) are cut into ranges;
    a Flight Recorder dump, a RAS JSON report and nccl-tests -J output are read whole."""
    monkeypatch.setattr(split, "SPLIT_MIN_BYTES", 1)
    cases = {
        "stamped.log": (b"[2026-03-14 10:17:06.873617] node022:59573:59573 [5] NCCL INFO NCCL version 2.28.3\n", True),
        "rank_tag.log": (b"[rank3]: node1:77:77 [3] NCCL INFO Bootstrap: Using eth0:10.0.0.1<0>\n", True),
        "json_lines.log": (b'{"msg": "node1:77:77 [3] NCCL INFO Init COMPLETE"}\n', True),
        "rank_0": ((FIXTURES / "hang" / "ras_status.json").read_bytes(), False),
        "ras.json": ((FIXTURES / "hang" / "ras_status.json").read_bytes(), False),
        "dump": (b"\x80\x04\x95" + b"\x00" * 40, False),
    }
    for name, (data, splits) in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        assert split.can_split(InputFile(str(path), name)) is splits, name


@pytest.mark.parametrize("jobs", [1, 2, 3])
def test_coll_lines_of_every_width_read_in_ranges_give_the_case_one_process_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, jobs: int
) -> None:
    """COLL lines read by coarse templates (parse/coarse.py) in worker processes: the per-rank summary
    and its evidence lines (whose field positions are found after the worker sent them) are the same."""
    import random

    from test_nccl_log import _coll_lines

    monkeypatch.setattr(split, "SPLIT_MIN_BYTES", 1)
    monkeypatch.setattr(split, "RANGE_MIN_BYTES", 1)
    rng = random.Random(9)
    ranks = [
        (f"gpu-{h}x{rng.randrange(99)}", rng.randint(10, 99999), f"0x{rng.randrange(1 << 40):x}") for h in range(6)
    ]
    lines, expected = _coll_lines(rng, 6_000, ranks)
    target = tmp_path / "coll.log"
    target.write_text("\n".join(lines) + "\n")
    serial = read_case([str(target)], jobs=1)
    parallel = read_case([str(target)], jobs=jobs)
    assert parallel.case.model_dump() == serial.case.model_dump()
    got = {(c.host, c.pid, c.comm): [c.calls, c.last_op_count, c.evidence.line] for c in parallel.case.coll_calls}
    assert got == expected


def test_coll_lines_read_in_small_pieces_give_the_same_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A block's COLL lines of rare widths are read in pieces (nccl_log.COARSE_CHUNK, to bound their
    memory) and reduced at each block's end: the per-rank summary and its evidence lines do not move."""
    import random

    from test_nccl_log import _coll_lines

    from ncclscope.parse import nccl_log

    rng = random.Random(11)
    ranks = [(f"node{h:03d}", rng.randint(10, 99999), f"0x{rng.randrange(1 << 40):x}") for h in range(5)]
    lines, expected = _coll_lines(rng, 4_000, ranks)
    target = tmp_path / "coll.log"
    target.write_text("\n".join(lines) + "\n")
    whole = read_case([str(target)], jobs=1)
    monkeypatch.setattr(nccl_log, "COARSE_CHUNK", 7)
    pieces = read_case([str(target)], jobs=1)
    assert pieces.case.model_dump() == whole.case.model_dump()
    got = {(c.host, c.pid, c.comm): [c.calls, c.last_op_count, c.evidence.line] for c in pieces.case.coll_calls}
    assert got == expected


def test_records_that_lost_their_host_name_read_in_ranges_give_the_case_one_process_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record whose host name was cut off belongs to the one host its pid has elsewhere; here that
    host appears only ranges later, after the records before it were already walked (case/read.py walks
    a range's records while workers parse the next)."""
    monkeypatch.setattr(split, "SPLIT_MIN_BYTES", 1)
    monkeypatch.setattr(split, "RANGE_MIN_BYTES", 1)
    lines = []
    for n in range(400):
        origin = f"node{n % 4}:{1000 + n % 4}:{1000 + n % 4} [{n % 4}]"
        lines.append(f"{origin} NCCL INFO Channel {n % 32:02d}/0 : 0[0] -> 1[1] via P2P/IPC")
    lines.append(":4242:4242 [0] NCCL INFO Using network IB")  # node9's record, host cut off
    lines += [f"node0:1000:1000 [0] NCCL INFO Channel {n % 32:02d}/1 : 0[0] -> 1[1] via P2P/IPC" for n in range(400)]
    lines += [
        "node9:4242:4242 [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
        "node9:4242:4242 [0] NCCL INFO cudaDriverVersion 12040",
    ]
    target = tmp_path / "lost_host.log"
    target.write_text("\n".join(lines) + "\n")
    parallel = read_both_ways(target, 2)
    (node9,) = [p for p in parallel.case.processes if p.pid == 4242]
    assert (node9.host, node9.network) == ("node9", "IB")


def test_a_file_of_mostly_other_text_is_read_whole_after_its_first_ranges_were_walked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A range that holds more lines of other programs than a range may keep (split.OTHER_LINES_KEEP)
    makes the file be read whole; the records of the ranges already walked are walked once, not twice."""
    monkeypatch.setattr(split, "SPLIT_MIN_BYTES", 1)
    monkeypatch.setattr(split, "RANGE_MIN_BYTES", 1)
    monkeypatch.setattr(split, "OTHER_LINES_KEEP", 100)
    started_again = []
    monkeypatch.setattr(
        reading._InOrder, "start_again", lambda self, f=reading._InOrder.start_again: (started_again.append(1), f(self))
    )
    log = (FIXTURES / "nccl" / "v2_18_8xh100_nvswitch.log").read_bytes().rstrip(b"\n") + b"\n"
    chatter = b"".join(b"epoch 3 step %d loss 0.%04d\n" % (n, n) for n in range(3000))
    target = tmp_path / "mostly_training.log"
    target.write_bytes(log * 12 + chatter)
    serial = read_case([str(target)], jobs=1)
    parallel = read_case([str(target)], jobs=2)
    assert started_again == [1]
    assert parallel.case.model_dump() == serial.case.model_dump()


def test_workers_are_given_only_a_few_tasks_ahead_of_the_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 42: a reader slower than its workers held every range's results at once (1.1 GB for a 1 GB
    crash loop). The pool gives out two tasks per worker and one more as each result is taken; every
    task's result still comes, in order."""
    monkeypatch.setattr(split, "SPLIT_MIN_BYTES", 1)
    monkeypatch.setattr(split, "RANGE_MIN_BYTES", 1)
    target = tmp_path / "log.log"
    target.write_bytes(
        b"".join(
            (FIXTURES / "nccl" / name).read_bytes()
            for name in sorted(p.name for p in (FIXTURES / "nccl").glob("v2_*.log"))
        )
    )
    work = workers.tasks([InputFile(str(target), str(target))], 2)
    assert len(work) == 2 * split.RANGES_PER_WORKER + split.LAST_RANGE_PIECES  # the first short, the last cut
    pool = workers.start(work, 2)
    try:
        assert len(pool.futures) == 2 * workers.AHEAD and len(pool.waiting) == len(work) - 2 * workers.AHEAD
        results = []
        while pool.futures:
            assert len(pool.futures) <= 2 * workers.AHEAD
            results.append(pool.take().result())
        assert len(results) == len(work) and not pool.waiting
    finally:
        pool.executor.shutdown(wait=True)
    assert read_case([str(target)], jobs=2).case.model_dump() == read_case([str(target)], jobs=1).case.model_dump()


def test_a_last_error_quoted_across_ranges_is_read_without_keeping_every_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 42: the reader kept every record of a file to find the NCCL text after a framework's `Last
    error:` at the end (a 1 GB crash loop took 1.1 GB). The text is now found as each range is joined,
    whichever range holds it; the Case is the one a single reader makes."""
    monkeypatch.setattr(split, "SPLIT_MIN_BYTES", 1)
    monkeypatch.setattr(split, "RANGE_MIN_BYTES", 1)
    framework = (FIXTURES / "framework" / "torch23_nccl_error_last_error.log").read_bytes()
    filler = (FIXTURES / "nccl" / "v2_21_multinode_ib_merged.log").read_bytes()
    target = tmp_path / "job.log"
    target.write_bytes((filler + framework) * 6)
    outcome = read_both_ways(target, 2)
    quoted = [e.text for e in outcome.case.framework if e.kind == "last_error"]
    assert len(quoted) == 12 and all(t.startswith("socketStartConnect: Connect to 10.42.7.19<51277>") for t in quoted)
