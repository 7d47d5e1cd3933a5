"""Reading a large text file by line number without loading it: a line-offset index over an mmap.

The index records where each newline is, a chunk at a time (numpy over the mapped bytes), so the
first lines of a 1 GB file can be read after indexing its first megabyte while a worker indexes the
rest; a line's text is cut out of the mapping only when it is shown.

Lines are numbered exactly as `ncclscope.inputs.opening` numbers them, so line N here is `Evidence.line`
N: only b"\\n" ends a line (the CR of a CRLF stays in the line and is removed on display, a lone CR
ends nothing), a last line without a newline counts, an empty file has no lines, and a line longer
than the parser's 64 KiB cap is still one line.
"""

from __future__ import annotations

import mmap
import os
import threading

import numpy as np

from ncclscope.inputs.opening import MAX_LINE_BYTES
from ncclscope.parse.normalize import clean

FIRST_CHUNK_BYTES = 1024 * 1024  # indexed before the first paint: a few milliseconds
CHUNK_BYTES = 8 * 1024 * 1024  # then in steps this big, so a worker can report progress and stop
SHOWN_BYTES = 4096  # of a line read for display; the rest is cut with an ellipsis
SHOWN_CHARS = 2000
ELLIPSIS = "…"
# C0 controls (but TAB), DEL and C1 controls left after ANSI stripping are shown escaped, never sent raw
_CONTROLS = {c: f"\\x{c:02x}" for c in [*range(0x09), *range(0x0A, 0x20), 0x7F, *range(0x80, 0xA0)]}


class GrowingArray:
    """An int64 array that one thread appends to while others read it (newline offsets, line numbers).

    Readers take the length first and the array second; a full array is replaced by a bigger copy
    before the length grows, so a reader never sees a length larger than the array it holds.
    """

    def __init__(self) -> None:
        self._data = np.empty(1024, dtype=np.int64)
        self._length = 0

    def __len__(self) -> int:
        return self._length

    @property
    def values(self) -> np.ndarray:
        length = self._length
        return self._data[:length]

    def extend(self, values: np.ndarray) -> None:
        need = self._length + len(values)
        if need > len(self._data):
            grown = np.empty(max(need, 2 * len(self._data)), dtype=np.int64)
            grown[: self._length] = self._data[: self._length]
            self._data = grown
        self._data[self._length : need] = values
        self._length = need


class LineIndex:
    """Byte offsets of the lines of one file, built progressively; safe to read while a thread indexes.

    `index_more` (one thread at a time) extends the index; `line_count`, `line` and `lines` may be
    called from any thread and see the lines indexed so far.
    """

    def __init__(self, path: str) -> None:
        """Open and map `path`; raises OSError when it cannot be read."""
        self.path = path
        with open(path, "rb") as handle:
            self.size = os.fstat(handle.fileno()).st_size
            self._map = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) if self.size else None
        self._newlines = GrowingArray()  # offsets of the b"\n" bytes found so far
        self._scanned = 0  # bytes indexed so far
        self._lock = threading.Lock()  # one indexer at a time

    @property
    def complete(self) -> bool:
        return self._scanned >= self.size

    @property
    def progress(self) -> float:
        """Fraction of the file indexed (1.0 for an empty file)."""
        return self._scanned / self.size if self.size else 1.0

    @property
    def line_count(self) -> int:
        """Lines known so far; when complete, every line, including a last one without newline."""
        return self._snapshot()[1]

    def _snapshot(self) -> tuple[np.ndarray, int]:
        """The newlines found so far and the number of lines they make."""
        complete = self.complete  # read first: the last newlines are stored before the file counts as indexed
        newlines = self._newlines.values
        found = len(newlines)
        if complete and self.size and (found == 0 or newlines[-1] != self.size - 1):
            return newlines, found + 1
        return newlines, found

    def index_more(self, budget: int = CHUNK_BYTES) -> bool:
        """Index up to `budget` more bytes; True once the whole file is indexed."""
        with self._lock:
            if self.complete or self._map is None:
                return True
            start = self._scanned
            end = min(self.size, start + budget)
            chunk = np.frombuffer(self._map, dtype=np.uint8, count=end - start, offset=start)
            found = np.flatnonzero(chunk == 10)
            del chunk  # a live view would keep the mapping from closing
            self._newlines.extend(found + start)
            self._scanned = end
            return self.complete

    def grow(self, size: int) -> bool:
        """The file grew (a followed input): index it up to `size` bytes from now on, mapped again; False when
        `size` is not larger. A reader that holds the old mapping keeps it until it lets go."""
        if size <= self.size:
            return False
        with self._lock, open(self.path, "rb") as handle:
            self._map = mmap.mmap(handle.fileno(), size, access=mmap.ACCESS_READ)
            self.size = size
        return True

    def index_all(self) -> None:
        while not self.index_more():
            pass

    def span(self, number: int) -> tuple[int, int]:
        """(start, end) byte offsets of line `number` (1-based), newline excluded."""
        newlines, count = self._snapshot()
        if not 1 <= number <= count:
            raise IndexError(f"line {number} of {self.path} (known lines: {count})")
        start = int(newlines[number - 2]) + 1 if number > 1 else 0
        end = int(newlines[number - 1]) if number <= len(newlines) else self.size
        return start, end

    def line(self, number: int, limit: int | None = None) -> bytes:
        """The raw bytes of line `number` (1-based), at most `limit` of them."""
        start, end = self.span(number)
        if limit is not None:
            end = min(end, start + limit)
        return self._map[start:end] if self._map is not None else b""

    def lines(self, first: int, last: int) -> list[bytes]:
        """Raw lines `first` to `last` (1-based, inclusive), read in one slice of the mapping."""
        if last < first or self._map is None:
            return []
        start = self.span(first)[0]
        end = self.span(last)[1]
        return self._map[start:end].split(b"\n")


def shown_text(raw: bytes) -> str:
    """A line as the raw log shows it: UTF-8 with replacement, ANSI escapes, CR and tmux markers
    removed as the parser removes them (so it equals Evidence.text), tabs expanded, other control
    characters escaped, and cut with an ellipsis past SHOWN_CHARS."""
    text = clean(raw[:SHOWN_BYTES].decode("utf-8", "replace")).text
    text = text.expandtabs(8).translate(_CONTROLS)
    if len(raw) > SHOWN_BYTES or len(text) > SHOWN_CHARS:
        return text[:SHOWN_CHARS] + ELLIPSIS
    return text


def match_text(raw: bytes) -> str:
    """A line as filters and search see it: decoded and cleaned, uncut up to the parser's 64 KiB."""
    return clean(raw[:MAX_LINE_BYTES].decode("utf-8", "replace")).text
