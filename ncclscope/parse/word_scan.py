"""Which lines of a block hold which of a set of words, found in passes over the whole block.

The readers' cheap test (other_lines.py, nccl_log.py) is "does the line hold any of these words": asked
line by line it costs a Python call and a search per word for every line of a job's stdout. Here the
block is searched instead, and the cost goes with its bytes at the speed of C:
- the words that hold an upper-case letter are looked for from that letter on (a part of the word, so
  every line that holds the word is found), all in one regular expression: its first bytes are rare in
  other text, and the regular expression engine skips to them;
- each other word (lower-case only, or a control or non-ASCII byte) is looked for with bytes.find.
A find moves on to the next line at once: a line is found once per word. A line may be found for more
words than it holds (see the overlaps below), never for fewer.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Mapping


class WordScan:
    def __init__(self, words: Mapping[bytes, int]) -> None:
        """`words`: each word and its tags (bits); a line's tags are those of the words it holds."""
        self._tags: dict[bytes, int] = {}  # what the regular expression matches -> tags
        self._finds: dict[bytes, int] = {}
        for word, tags in words.items():
            upper = next((i for i, byte in enumerate(word) if 65 <= byte <= 90), None)
            if upper is None:
                self._finds[word] = self._finds.get(word, 0) | tags
            else:
                part = word[upper:]
                self._tags[part] = self._tags.get(part, 0) | tags
        self._tags = hidden_tags(self._tags)
        parts = sorted(self._tags, key=len, reverse=True)
        self._regex = re.compile(b"|".join(re.escape(p) for p in parts)) if parts else None
        self._per_line = [(word, tags) for word, tags in [*self._tags.items(), *self._finds.items()]]

    def scan(self, data: bytes, starts: list[int]) -> dict[int, int]:
        """Line index (into the lines beginning at `starts`) -> the tags of the words it holds, for the lines
        that hold any."""
        found: dict[int, int] = {}
        if self._regex is not None:
            tags_of = self._tags
            for match in self._regex.finditer(data):
                i = bisect_right(starts, match.start()) - 1
                found[i] = found.get(i, 0) | tags_of[match.group()]
        end = len(data)
        last = len(starts) - 1
        for word, tags in self._finds.items():
            at = data.find(word)
            while at >= 0:
                i = bisect_right(starts, at) - 1
                found[i] = found.get(i, 0) | tags
                if i >= last:
                    break
                at = data.find(word, starts[i + 1], end)
        return found

    def tags(self, line: bytes) -> int:
        """The same for one line."""
        found = 0
        for word, tags in self._per_line:
            if word in line:
                found |= tags
        return found


def hidden_tags(tags: Mapping[bytes, int]) -> dict[bytes, int]:
    """Each word's tags with those of the words its match can hide. An expression's matches do not overlap:
    one that holds another word, or ends where another begins, would hide it. It carries that word's tags
    too (both are in one line: the line is found for both)."""
    words = list(tags)
    hides = {a: [b for b in words if a != b and _overlaps(a, b)] for a in words}  # found once, not on every pass
    out = dict(tags)
    changed = True
    while changed:
        changed = False
        for a, hidden in hides.items():
            for b in hidden:
                if out[a] | out[b] != out[a]:
                    out[a] |= out[b]
                    changed = True
    return out


def _overlaps(a: bytes, b: bytes) -> bool:
    """Whether a match of `a` holds `b` or ends with a beginning of it."""
    return b in a or any(a.endswith(b[:k]) for k in range(1, len(b)))
