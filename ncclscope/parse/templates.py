"""Reading lines that differ only in their values (host names, hex pointers, counts) with one parse.

The exact skeleton of nccl_log.py (digits -> '0') keeps letters, so a hex pointer (`sendbuff
0x7f3a2c000000`), a bus id such as `9a000` or a host name with letters makes a new skeleton on nearly
every line of a real log. The *word skeleton* maps every letter and digit to '0': lines of one word
skeleton have the same length, and the same spaces and punctuation in the same columns. A line that
was parsed (its shape) becomes a *template* of its word skeleton; another line of that word skeleton
is read with the template when, column by column, it
  - equals the template outside every value field (keywords, the level, `P2P`, `IB`, `AllReduce`),
  - holds digits where the template's field is a decimal number, hex digits where it is a hex one,
  - holds anything (letters or digits) in the first record's host name.
The check runs on a whole group of lines at once (numpy). A line that matches none of its word
skeleton's templates is parsed the exact way and becomes the next template (a few per skeleton).
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

WORD_SKELETON = bytes.maketrans((string.ascii_letters + string.digits).encode(), b"0" * 62)
TEMPLATES_PER_SKELETON = 8  # "[send]"/"[recv]", INFO/WARN, decimal/hex values: a handful is plenty
_DECIMAL = re.compile(rb"-?[0-9]+(?:[./][0-9]+)*")
_HEX = re.compile(rb"(?:0x)?[0-9a-fA-F]+")
_WORD = re.compile(rb"[A-Za-z0-9]+")
_HEX_WORD = re.compile(rb"[0-9a-fA-F]+")
_IS_DIGIT = np.zeros(256, dtype=bool)
_IS_DIGIT[ord("0") : ord("9") + 1] = True
_IS_HEX = _IS_DIGIT.copy()
for _c in b"abcdefABCDEF":
    _IS_HEX[_c] = True
HEX_DIGITS = np.full(256, -1, dtype=np.int64)  # byte -> its value as a hex digit
HEX_DIGITS[np.frombuffer(b"0123456789abcdef", np.uint8)] = HEX_DIGITS[np.frombuffer(b"0123456789ABCDEF", np.uint8)] = (
    np.arange(16)
)

Span = tuple[int, int]


@dataclass(slots=True, eq=False)
class Template:
    """Which columns of a word skeleton's lines must equal the exemplar, be digits, or be hex digits."""

    shape: Any  # nccl_log.LineShape
    fixed: np.ndarray
    want: np.ndarray
    decimal: np.ndarray
    hexadecimal: np.ndarray

    def matches(self, matrix: np.ndarray) -> np.ndarray:
        """One bool per row of `matrix` (lines of this word skeleton, one byte per column)."""
        ok = (matrix[:, self.fixed] == self.want).all(axis=1)
        if self.decimal.size:
            ok &= _IS_DIGIT[matrix[:, self.decimal]].all(axis=1)
        if self.hexadecimal.size:
            ok &= _IS_HEX[matrix[:, self.hexadecimal]].all(axis=1)
        return ok


def value_columns(
    raw: bytes,
    first_record: int,
    prefix_spans: list[tuple[str, Span]],
    field_spans: list[Span],
    hex_field_spans: Sequence[Span] = (),
) -> np.ndarray:
    """Per column of a parsed line: 0 fixed, 1 decimal digit, 2 hex digit, 3 free (the host name).
    `first_record` is where the first record begins (before it: a launcher's tag such as `[1,17]<stdout>:`),
    `prefix_spans` are (name, span) of every record's prefix in order, `field_spans` every field but
    those whose ids the grammar reads as hex, `hex_field_spans`: there every word of hex digits is hex,
    whatever the exemplar's value looked like (`opCount 7`, `GPU/0-18000`).
    The spans are sorted into classes first and marked in a few whole-line passes (a `Trees` line
    has hundreds of fields)."""
    digit_spans: list[Span] = [(0, first_record)]  # rank numbers and times in a launcher's tag; its words stay
    hex_spans: list[Span] = []
    for a, b in hex_field_spans:
        hex_spans.extend(word.span() for word in _WORD.finditer(raw, a, b) if _HEX_WORD.fullmatch(word.group()))
    host: Span | None = None
    for name, span in prefix_spans:
        if name == "host":
            host = host or span  # only the first record's host: a glued record's host may be split by name
        elif name in ("timestamp", "location"):  # "[2026-03-14 10:14:41.118] ", "transport/net.cc:1398"
            digit_spans.append(span)
        elif name in ("pid", "tid", "cuda_dev"):
            _classify(raw, span, digit_spans, hex_spans)
    for span in field_spans:
        _classify(raw, span, digit_spans, hex_spans)
    kind = np.zeros(len(raw), dtype=np.int8)
    kind[_covered(digit_spans, len(raw)) & _IS_DIGIT[np.frombuffer(raw, dtype=np.uint8)]] = 1
    kind[_covered(hex_spans, len(raw))] = 2
    if host is not None:
        kind[host[0] : host[1]] = 3
    return kind


def _covered(spans: list[Span], n: int) -> np.ndarray:
    """Columns inside any of `spans`, as one bool per column (a slice each: a new line shape has a few to a
    few hundred, where numpy's scatter-add costs more per call than these cost in all)."""
    mask = bytearray(n)
    for a, b in spans:
        b = min(b, n)  # (a slice assigned past the end would lengthen the mask)
        if b > a:
            mask[a:b] = b"\x01" * (b - a)
    return np.frombuffer(mask, dtype=bool)


def template_of(shape: Any, kind: np.ndarray) -> Template:
    """The template of a parsed line (`kind` from value_columns)."""
    raw: bytes = shape.exemplar
    alnum = np.frombuffer(raw.translate(WORD_SKELETON), dtype=np.uint8) == ord("0")
    fixed = np.flatnonzero(alnum & (kind == 0))
    return Template(
        shape,
        fixed,
        np.frombuffer(raw, dtype=np.uint8)[fixed].copy(),
        np.flatnonzero(alnum & (kind == 1)),
        np.flatnonzero(alnum & (kind == 2)),
    )


def _classify(raw: bytes, span: Span, digit_spans: list[Span], hex_spans: list[Span]) -> None:
    """Sort a field's columns into decimal or hex when its exemplar text is a number; in a field of
    several words (a TRACE message, a free-text tail) each number among them, so that "Posted send of
    512 bytes" and "... of 4096 bytes" share a parse. Words stay fixed, but for their digits (a peer's
    host name `node096`): the exact skeleton (digits -> 0) already gives `node012` the same shape."""
    a, b = span
    if b <= a:
        return
    text = raw[a:b]
    if _DECIMAL.fullmatch(text):
        digit_spans.append(span)
    elif _is_hex(text):
        hex_spans.append((a + 2 if text.startswith(b"0x") else a, b))  # "0x" itself stays fixed
    else:
        for word in _WORD.finditer(text):
            start, end = a + word.start(), a + word.end()
            if _is_hex(word.group()) and not word.group().isdigit():
                hex_spans.append((start + 2 if word.group().startswith(b"0x") else start, end))
            else:
                digit_spans.append((start, end))  # only its digits become number columns


def _is_hex(text: bytes) -> bool:
    """A hex number: `0x` and hex digits, or hex digits with at least one decimal digit (`9a000`, not `add`)."""
    return bool(_HEX.fullmatch(text)) and (text.startswith(b"0x") or any(c in b"0123456789" for c in text))


def fixed_holds(raw: bytes, kind: np.ndarray, word: bytes) -> bool:
    """Whether every line a template of `raw` reads holds `word` where `raw` does: somewhere all its bytes are
    fixed columns (`kind` 0, value_columns), not a value or the host name."""
    at = raw.find(word)
    while at != -1:
        if not kind[at : at + len(word)].any():
            return True
        at = raw.find(word, at + 1)
    return False
