"""The one cheap test that lets a line no reader wants cost nothing (other_lines.py says why it holds).

Each reader of the lines that are not NCCL's says what a line must hold for it to do anything while it
waits on no line (HINT_WORDS anywhere, HINT_START where the line begins after a launcher's prefix and
white space). Here they are joined: the words and the patterns are searched in whole blocks (line_filter.py,
from nccl_log.py). Kept apart from the readers so that the NCCL log parser, which the byte-range workers load
before anything else, loads none of them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any, Protocol

from ncclscope.parse.normalize import LAUNCHER_PREFIX_RE
from ncclscope.parse.re2_pattern import escape, re2_compile

# The one cheap test is made; the tests turn it off to show that it changes no result
CHEAP_TEST = True
# Read the long way whatever else they hold: what clean() drops (an escape or a NUL byte could split a word),
# a replacement character (counted as invalid UTF-8); and a line that is an elision.
OWN_WORDS = ("\x00", "\x1b", "\ufffd")
# A line that only says lines were left out where it stands
ELISIONS = frozenset({"...", "....", "\u2026", "[...]", "[\u2026]", "<snip>", "[snip]", "(...)", "[... truncated ...]"})
OWN_START = "|".join(re.escape(elision) for elision in sorted(ELISIONS, key=lambda e: (-len(e), e)))  # (one order)
# the white space that str.strip() removes before a reader's own test at a line's start (the pattern is
# written in characters and searched in UTF-8 bytes)
STRIPPED = "(?:\\s|[\x1c-\x1f]|\u0085|\u00a0)*"
# what may come before a line's own first words: launcher prefixes taken as strip_launcher_prefix takes them
# (each the first that matches, never given back: atomic), then white space (possessive); one way to match
# it, so the pattern after it is tried once per line
LINE_LEAD = rf"(?>{LAUNCHER_PREFIX_RE.pattern})*+{STRIPPED}+"


@dataclass(frozen=True)
class OtherHints:
    """What any of the readers may want in a line that no reader waits on: words (UTF-8 bytes, looked for
    in a whole block at once) and the patterns that a line's start is matched against."""

    words: tuple[bytes, ...]
    starts: bytes  # the patterns alone, after what `pattern` lets come first (nccl_log.py joins them with its own)
    pattern: re.Pattern[bytes]  # matched at a line's start

    def wanted(self, line: bytes) -> bool:
        """The test for one line (where a block is not searched at once): the words in one RE2 search where RE2
        is used (one pass, whatever the number of words), else each word in turn."""
        search = _words_search(self)
        if search is not None:
            found = search(line) is not None
        else:
            found = any(word in line for word in self.words)
        return found or self.pattern.match(line) is not None


@cache
def _words_search(hints: OtherHints) -> Any:
    """The hints' words as one RE2 alternation (its search method), or None where RE2 is not used."""
    compiled = re2_compile(b"|".join(escape(word) for word in hints.words))
    return compiled.search if compiled is not None else None


class LineSink(Protocol):
    """Where the NCCL log parser sends the lines that are not NCCL's, when it says what its readers want."""

    @property
    def hints(self) -> OtherHints: ...

    @property
    def busy(self) -> bool: ...

    def __call__(self, line_no: int, text: str) -> None: ...

    def take(self, line_no: int, text: str, wanted: bool | None) -> bool | None:
        """One line whose cheap test the caller may have made (`wanted`); returns the test's answer where
        it is known (made here or given), None where no reader needed it."""
        ...


@cache
def stored_hints() -> OtherHints:
    """other_hints(other_lines.READERS) as data/reader_hints.json keeps it (tools/reader_hints.py): for a byte
    range's worker, which tests lines before (and often without) loading the readers."""
    from ncclscope.common.data_files import data_json

    data = data_json("reader_hints.json")
    return _hints(tuple(word.encode("latin-1") for word in data["words"]), data["starts"].encode("latin-1"))


def _hints(words: tuple[bytes, ...], starts: bytes) -> OtherHints:
    return OtherHints(words, starts, re.compile(LINE_LEAD.encode() + b"(?:" + starts + b")"))


@cache
def other_hints(readers: tuple[Any, ...]) -> OtherHints:
    """The hints of `readers` (classes with HINT_WORDS and HINT_START, other_lines.READERS) and our own."""
    words = tuple(dict.fromkeys(w.encode() for r in readers for w in r.HINT_WORDS))
    words += tuple(w.encode() for w in OWN_WORDS)
    starts = "|".join(f"(?:{start})" for start in [*(r.HINT_START for r in readers), OWN_START] if start)
    return _hints(words, starts.encode())


def is_sink(on_other: object) -> bool:
    """Whether what the parser sends the other lines to is a LineSink (OtherLines, a byte range's keeper), told
    by its class: a keeper makes its readers, and so its hints, on first use (split.py)."""
    return callable(getattr(type(on_other), "take", None))
