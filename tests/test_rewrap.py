"""Issue 43: a paste that a terminal hard-wrapped at a fixed width is joined back before any reader sees it
(parse/rewrap.py); tables and logs whose lines merely share a width are left alone."""

from __future__ import annotations

from pathlib import Path

from ncclscope.case.read import read_case
from ncclscope.parse.rewrap import rejoin

from conftest import REPO

RECORD = (
    "[rank2]:[E0711 10:02:03.118204332 ProcessGroupNCCL.cpp:1743] [PG ID 0 PG GUID 0(default_pg) Rank 2] "
    "ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in monitoring enqueued "
    "collectives. This typically indicates a NCCL/CUDA API hang blocking the watchdog."
)


def _wrapped(records: list[str], width: int, pad: bool) -> str:
    out = []
    for record in records:
        pieces = [record[i : i + width] for i in range(0, len(record), width)]
        if pad:
            pieces[-1] = pieces[-1].ljust(width)
        out.extend(pieces)
    return "\n".join(out)


def test_lines_cut_mid_word_are_joined_and_keep_their_first_line_number() -> None:
    text = _wrapped([RECORD, RECORD.replace("Rank 2", "Rank 5")], 83, pad=False)
    joined = rejoin(text.encode())
    assert joined is not None and joined.width == 83
    lines = joined.data.decode().split("\n")
    pieces = -(-len(RECORD) // 83)
    assert joined.pieces == 2 * (pieces - 1)
    assert lines[0] == RECORD and lines[1:pieces] == [""] * (pieces - 1)  # the pieces after the first: empty lines
    assert lines[pieces] == RECORD.replace("Rank 2", "Rank 5")
    assert len(lines) == len(text.split("\n"))


def test_a_paste_wrapped_at_word_boundaries_is_told_by_its_padding(tmp_path: Path) -> None:
    source = read_case([str(REPO / "fixtures/framework/heartbeat_hard_wrapped.txt")], jobs=1).case.sources[0]
    assert source.rewrapped == "hard-wrapped at 100 columns: 5 pieces joined to the lines they continue"
    assert source.framework_lines == 2


def test_tables_and_logs_whose_lines_share_a_width_are_not_joined() -> None:
    rows = "\n".join(
        f"{size:>12} {size // 4:>13}     float     sum      -1    25.06    0.00    0.00       0    25.95    0.00"
        "    0.00       0"
        for size in (8, 16, 32, 64, 128)
    )
    assert rejoin(rows.encode()) is None
    log = "\n".join(
        f"gpu-node-{n}:4211:4290 [2] NCCL INFO Channel 0{c}/0 : 2[2] -> 3[3] via P2P/IPC/read comm 0xabcdef"
        for n in range(2)
        for c in range(4)
    )
    assert rejoin(log.encode()) is None
    smi = "\n".join(["+" + "-" * 80 + "+", *("| GPU  Name " + " " * 69 + "|" for _ in range(6)), "+" + "-" * 80 + "+"])
    assert rejoin(smi.encode()) is None


def test_matrix_rows_of_one_width_are_not_joined() -> None:
    """Rows that end in a word (N/A) and begin with one (GPU1), all of the same width: no row is a last piece."""
    text = (REPO / "fixtures/topo/headerless_fragment_gpu_without_nvlink.txt").read_bytes()
    assert rejoin(text.rstrip(b"\n")) is None
