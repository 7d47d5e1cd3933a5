"""A paste that a terminal hard-wrapped at a fixed width (real-world-variants.md: lines cut mid-word at 80 to
210 columns, the last piece of each line sometimes padded with spaces to the width): the pieces joined back
into the line they continue, before any reader sees them.

Only what can be nothing else is joined: the longest line length is shared by a good part of the lines (a
terminal's width), and several of those lines end inside a word that the next line goes on with and several
are followed by a shorter last piece, or (half the lines at the width) several end in the padding a terminal
adds to the last piece of a line. A table
whose rows have one width (nccl-tests, nvidia-smi) ends its rows with a digit or a border and starts the
next with a space or the same border, so it is never taken for wrapped text. A joined line keeps the number
of its first piece; the pieces after it become empty lines, so every other line keeps its number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MIN_WIDTH, MAX_WIDTH = 60, 400  # terminal widths; NCCL's own lines are up to 1023 bytes, never cut by us
MIN_SHARE = 0.3  # of the non-empty lines, those at the width
MIN_SPLITS = 2  # lines at the width that end inside a word the next line goes on with (or padded to it)
PADDED_SHARE = 0.5  # of the non-empty lines, those at the width, where only padding shows the wrapping
REWRAP_MAX_BYTES = 8 << 20  # a paste: a log of a job that large is written to a file, not copied from a terminal
# where a new line of output begins (never the rest of a wrapped one): a launcher or rank tag, a C++ log
# header, a timestamp, an NCCL record's host:pid:tid, a traceback, a shell prompt, a row of a tab-separated table
# (show_gids: a terminal's copy has no tabs, so a piece that holds one was not cut by it)
NEW_LINE_RE = re.compile(
    rb"\s*(?:\[rank\d+\]|\[[EWIF]\d|\[\d{4}-\d\d-\d\d|\d{4}-\d\d-\d\d[ T]|[EWIF]\d{4} |\(\w+ pid=\d+\)"
    rb"|[^\s:\[\]]+:\d+:\d+ \[\d+\]|Traceback |File \"|\$ |# |\S+\t)"
)


@dataclass(frozen=True)
class Rejoined:
    data: bytes
    width: int
    pieces: int  # pieces joined to the line before them


def rejoin(block: bytes) -> Rejoined | None:
    """The block with its hard-wrapped lines joined back, or None when it does not look hard-wrapped."""
    if len(block) > REWRAP_MAX_BYTES or b"\n" not in block:
        return None
    lines = [line.rstrip(b"\r") for line in block.split(b"\n")]
    lengths = [len(line) for line in lines]
    width = max(lengths)
    if not MIN_WIDTH <= width <= MAX_WIDTH:
        return None
    at_width = [i for i, n in enumerate(lengths) if n == width]
    nonempty = sum(1 for n in lengths if n)
    if len(at_width) < 3 or len(at_width) < MIN_SHARE * nonempty:
        return None
    splits = sum(
        1
        for i in at_width
        if i + 1 < len(lines)
        and lines[i][-1:].isalnum()
        and lines[i + 1][:1].isalnum()
        and not NEW_LINE_RE.match(lines[i + 1])
    )
    # a wrapped line ends in a shorter last piece: rows of one width (a matrix whose rows end in N/A and begin
    # with GPU1) have none
    last_pieces = sum(1 for i in at_width if i + 1 < len(lines) and 0 < lengths[i + 1] < width)
    # or a terminal that pads the last piece of each line to its width (a copy from tmux or screen)
    padded = sum(1 for i in at_width if lines[i].endswith(b"  "))
    wrapped = splits >= MIN_SPLITS and last_pieces >= MIN_SPLITS
    if not wrapped and (padded < MIN_SPLITS or len(at_width) < PADDED_SHARE * nonempty):
        return None
    out: list[bytes] = []
    pieces = 0
    i = 0
    while i < len(lines):
        line, j = lines[i], i
        # a line at the width goes on in the next one, unless it ends in padding or the next begins anew
        while (
            lengths[j] == width
            and not lines[j].endswith(b"  ")
            and j + 1 < len(lines)
            and lines[j + 1].strip()
            and not NEW_LINE_RE.match(lines[j + 1])
        ):
            j += 1
            line += lines[j]
        out.append(line.rstrip(b" ") if lengths[j] == width else line)
        out.extend(b"" for _ in range(j - i))
        pieces += j - i
        i = j + 1
    if not pieces:
        return None
    return Rejoined(b"\n".join(out), width, pieces)
