"""Reading per-call COLL lines of every width with one template per kind of line.

The word skeleton of templates.py fixes each line's length, so COLL lines, whose values change width
on every call (`opCount 9` / `opCount 1a`, `count 4096` / `count 25165824`, rank tags `[1,7]` /
`[1,1022]`, host names), make a new skeleton for nearly every combination: thousands per log, each
learnt, each a small numpy group. Lines of one *coarse key* (shapes.coarse_key: every run of letters
and digits -> one '0'; a word skeleton has the same key as its line) have the same punctuation
between the same number of words, so their words pair up by position, whatever their widths. A
coarse template checks a whole group of such lines at once, word by word (numpy over the word
boundaries): the exemplar's keywords must be equal, numbers must be numbers, the host name may be
anything; the columns the COLL summary needs (host, pid, comm pointer, opCount) are cut out by word,
not by byte. The rare line kept as evidence gets its own field positions only when it is read
(`record_for`).

Finding the words costs a few passes over the bytes, more per line than the fixed-width templates,
so a word skeleton with many lines in one block (nccl_log.PROMOTE_MIN) is still learnt and read the
fixed-width way; the coarse templates read the long tail of widths that would each be learnt for a
few lines. On the benchmark's mixed log (launcher tags, cloud host names) this parses 25% faster.
"""

from __future__ import annotations

import string
from collections.abc import Callable
from typing import Any

import numpy as np

from ncclscope.parse.shapes import VALUE_RE
from ncclscope.parse.templates import HEX_DIGITS, WORD_SKELETON

Span = tuple[int, int]
COARSE_FAMILIES = frozenset({"coll_call"})  # the per-call lines that make gigabyte logs
MOVED_MEMO = 4096  # field layouts kept per template (one per word skeleton of its evidence lines)

# Per byte: bit 0 set when it is no decimal digit, bit 1 when it is no hex digit, bit 2 when it is a
# letter or digit (the bytes WORD_SKELETON maps to '0')
_CLASS = bytearray(3 for _ in range(256))
for _c in string.hexdigits:
    _CLASS[ord(_c)] = 1 | 4 if _c not in string.digits else 4
for _c in string.ascii_letters:
    if _c not in string.hexdigits:
        _CLASS[ord(_c)] = 3 | 4
_CLASS_TABLE = bytes(_CLASS)
_ALNUM_TABLE = bytes(c >> 2 for c in _CLASS)
_NOT_DIGIT = 0x0101010101010101
_NOT_HEX = 0x0202020202020202
_MASKS = np.array([(1 << (8 * k)) - 1 for k in range(8)] + [(1 << 64) - 1], dtype=np.uint64)  # first k bytes

FIXED, DECIMAL, HEX, HEX_0X, FREE = range(5)


def _windows(buffer: bytes) -> np.ndarray:
    """Every 8 bytes of `buffer` from each position, as one little-endian integer (overlapping views)."""
    return np.ndarray((len(buffer) - 7,), dtype="<u8", buffer=buffer, strides=(1,))


class BlockWords:
    """Where the words (runs of letters and digits) of a block of lines are, found once per block."""

    def __init__(self, data: bytes) -> None:
        padded = b"\0" + data + b"\0" * 16  # every window and every last word ends inside the buffer
        classes = padded.translate(_CLASS_TABLE)
        alnum = np.frombuffer(padded.translate(_ALNUM_TABLE), dtype=np.bool_)
        self.starts = np.flatnonzero(alnum[1:] > alnum[:-1])  # positions in data: padded[1:] is data
        self.ends = np.flatnonzero(alnum[1:] < alnum[:-1])
        padded, classes = padded[1:], classes[1:]
        self.bytes = np.frombuffer(padded, dtype=np.uint8)
        line_starts = np.concatenate(([0], np.flatnonzero(self.bytes[: len(data)] == 10) + 1))
        self.first_word = np.searchsorted(self.starts, line_starts)  # of each line
        self.windows = _windows(padded)
        self.class_windows = _windows(classes)
        self.limit = len(padded) - 8

    def words(self, first: np.ndarray, which: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Start and end of the words `which` (indices within a line) of the lines whose first words are `first`."""
        at = first[:, None] + which
        return self.starts[at], self.ends[at]

    def all_of(self, starts: np.ndarray, ends: np.ndarray, bits: int) -> np.ndarray:
        """Per row: no byte of any word [starts, ends) has one of `bits` in its class."""
        ok = np.ones(starts.shape[0], dtype=bool)
        lengths = ends - starts
        longest = int(lengths.max()) if lengths.size else 0
        for k in range(0, longest, 8):
            masks = _MASKS[np.clip(lengths - k, 0, 8)]
            found = self.class_windows[np.minimum(starts + k, self.limit)] & masks & np.uint64(bits)
            ok &= ~found.any(axis=1)
        return ok


class CoarseTemplate:
    """Which words of an exemplar line must stay, which are numbers, and where its needed fields lie."""

    def __init__(
        self,
        record: Any,  # nccl_log.RecordShape of the exemplar
        exemplar: bytes,
        classes: list[int],
        fields: dict[str, tuple[int, int]],
        move: Callable[[bytes], Any],
    ) -> None:
        self.record = record
        self.exemplar = exemplar
        self.fields = fields  # name -> (first word, last word)
        self.move = move  # a line of this template -> its own RecordShape (nccl_log)
        words = [m.span() for m in VALUE_RE.finditer(exemplar)]
        self.width = len(words)
        # the bytes that must equal the exemplar's, 8 at a time: the fixed words with the byte after each
        # (punctuation, so a longer word differs there), and the "0x" of pointers
        chunks = []
        for i, c in enumerate(classes):
            a, b = words[i]
            if c == FIXED:
                end = min(b + 1, len(exemplar))
                chunks += [(i, k, exemplar[a + k : min(end, a + k + 8)]) for k in range(0, end - a, 8)]
            elif c == HEX_0X:
                chunks.append((i, 0, b"0x"))
        self.chunk_word = np.array([i for i, _, _ in chunks], dtype=np.intp)
        self.chunk_offset = np.array([k for _, k, _ in chunks], dtype=np.intp)
        self.chunk_mask = _MASKS[[len(text) for _, _, text in chunks]]
        self.chunk_want = np.array([int.from_bytes(text, "little") for _, _, text in chunks], dtype=np.uint64)
        self.decimal = np.array([i for i, c in enumerate(classes) if c == DECIMAL], dtype=np.intp)
        self.hexadecimal = np.array([i for i, c in enumerate(classes) if c == HEX], dtype=np.intp)
        self.hex_0x = np.array([i for i, c in enumerate(classes) if c == HEX_0X], dtype=np.intp)
        self._moved: dict[bytes, Any] = {}

    def matches(self, block: BlockWords, rows: np.ndarray) -> np.ndarray:
        """The positions in `rows` (lines of this template's coarse key) of the lines it reads; the
        cheap tests first, each later one on the lines left."""
        first = block.first_word[rows]
        keep = np.arange(len(rows))
        if self.chunk_word.size:
            where = np.minimum(block.starts[first[:, None] + self.chunk_word] + self.chunk_offset, block.limit)
            keep = keep[((block.windows[where] & self.chunk_mask) == self.chunk_want).all(axis=1)]
        if self.decimal.size and keep.size:
            keep = keep[block.all_of(*block.words(first[keep], self.decimal), _NOT_DIGIT)]
        if self.hexadecimal.size and keep.size:
            keep = keep[block.all_of(*block.words(first[keep], self.hexadecimal), _NOT_HEX)]
        if self.hex_0x.size and keep.size:
            starts, ends = block.words(first[keep], self.hex_0x)
            keep = keep[(ends - starts > 2).all(axis=1) & block.all_of(starts + 2, ends, _NOT_HEX)]
        return keep

    def text(self, block: BlockWords, rows: np.ndarray, name: str) -> np.ndarray | None:
        """The bytes of field `name` (first to last word) of the lines `rows`, as a numpy bytes array."""
        where = self.fields.get(name)
        if where is None:
            return None
        first = block.first_word[rows]
        s = block.starts[first + where[0]]
        e = block.ends[first + where[1]]
        width = int((e - s).max()) if s.size else 1
        at = s[:, None] + np.arange(width)
        chars = np.where(at < e[:, None], block.bytes[np.minimum(at, block.limit)], 0).astype(np.uint8)
        return np.ascontiguousarray(chars).view(f"S{width}").ravel()

    def number(self, block: BlockWords, rows: np.ndarray, name: str, base: int) -> np.ndarray | None:
        """Field `name` (one word; decimal, or hex with or without "0x") of the lines `rows` as integers."""
        where = self.fields.get(name)
        if where is None:
            return None
        at = block.first_word[rows] + where[0]
        s, e = block.starts[at], block.ends[at]
        if base == 16:
            s = s + 2 * ((block.bytes[s] == ord("0")) & (block.bytes[s + 1] == ord("x")))
        width = int((e - s).max()) if s.size else 1
        if width > (15 if base == 16 else 18):
            values = [int(bytes(block.bytes[a:b]), base) for a, b in zip(s.tolist(), e.tolist(), strict=True)]
            return np.array(values, dtype=np.int64)
        at = e[:, None] - width + np.arange(width)
        digits = np.where(at >= s[:, None], HEX_DIGITS[block.bytes[np.maximum(at, 0)]], 0)
        return digits @ (base ** np.arange(width - 1, -1, -1, dtype=np.int64))

    def record_for(self, raw: bytes) -> Any:
        """The RecordShape of one line this template matched: its fields where that line has them."""
        key = raw.translate(WORD_SKELETON)
        record = self._moved.get(key)
        if record is None:
            record = self.move(raw)
            if len(self._moved) < MOVED_MEMO:
                self._moved[key] = record
        return record

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_moved"] = {}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)


def word_classes(exemplar: bytes, kind: np.ndarray) -> list[int] | None:
    """Per word of the exemplar, its class from the per-column `kind` of templates.value_columns
    (0 keyword, 1 decimal, 2 hex, 3 host name); None when a word mixes classes."""
    classes = []
    for m in VALUE_RE.finditer(exemplar):
        a, b = m.span()
        if exemplar.startswith(b"0x", a) and b - a > 2 and not kind[a] and not kind[a + 1]:
            inner = set(kind[a + 2 : b].tolist())
            if inner == {2}:
                classes.append(HEX_0X)
                continue
        seen = set(kind[a:b].tolist())
        if len(seen) != 1:
            return None
        classes.append({0: FIXED, 1: DECIMAL, 2: HEX, 3: FREE}[seen.pop()])
    return classes


def span_words(exemplar: bytes, span: Span) -> tuple[int, int] | None:
    """The first and last word a field span covers exactly; None when it starts or ends inside a word."""
    words = [m.span() for m in VALUE_RE.finditer(exemplar)]
    first = next((i for i, (a, _) in enumerate(words) if a == span[0]), None)
    last = next((i for i, (_, b) in enumerate(words) if b == span[1]), None)
    if first is None or last is None or last < first:
        return None
    return first, last
