"""A file read in blocks of whole lines (inputs/opening.py, iter_blocks): every line once, with its number, when
block boundaries cut lines anywhere; and while the parser works on a block, the reader holds nothing else of that
size (the chunk it was cut from is let go: one 8 MB buffer less in every reading process, issue 42's 300 MB)."""

from __future__ import annotations

import random
import tracemalloc
from pathlib import Path

import pytest

from ncclscope.inputs import opening
from ncclscope.inputs.opening import InputFile, ReadStats, iter_blocks


def _lines(count: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    head = b"gpu-n%02d:%d:%d [%d] NCCL INFO Channel %02d/%02d : %d[%d] -> %d[%d] via P2P/CUMEM/read"
    out = []
    for k in range(count):
        width = rng.choice((0, 1, 5, 40, 300))
        out.append(head % (k % 7, 4000 + k, 4100 + k, k % 8, k % 32, 32, k % 8, k % 8, (k + 1) % 8, k % 8))
        out[-1] += b" " + b"x" * width if width else b""
        if rng.random() < 0.05:
            out.append(b"")  # an empty line
    return out


@pytest.mark.parametrize("block", [64, 257, 1000])
def test_every_line_comes_once_with_its_number_whatever_the_block_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    monkeypatch.setattr(opening, "BLOCK_BYTES", block)
    lines = _lines(400, block)
    path = tmp_path / "job.log"
    path.write_bytes(b"\n".join(lines) + b"\n")
    stats = ReadStats()
    seen: list[bytes] = []
    for data, first_line in iter_blocks(InputFile(str(path), str(path)), stats):
        assert first_line == len(seen) + 1
        seen.extend(data.split(b"\n"))
    assert seen == lines and stats.lines == len(lines)


def test_the_reader_holds_no_more_than_the_block_while_it_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    block = 2 * 1024 * 1024
    monkeypatch.setattr(opening, "BLOCK_BYTES", block)
    path = tmp_path / "big.log"
    one = b"\n".join(_lines(2000, 7)) + b"\n"
    path.write_bytes(one * (4 * block // len(one) + 1))  # about four blocks, lines cut at every boundary
    stats = ReadStats()
    blocks = iter_blocks(InputFile(str(path), str(path)), stats)
    tracemalloc.start()
    try:
        held = []
        for data, _ in blocks:
            current, _ = tracemalloc.get_traced_memory()
            held.append(current - len(data))  # besides the block itself: the reader's own buffers
            del data
    finally:
        tracemalloc.stop()
    assert len(held) >= 4
    # the line that straddles two blocks and the reader's small objects, not a chunk of BLOCK_BYTES
    assert max(held) < block // 4, held
