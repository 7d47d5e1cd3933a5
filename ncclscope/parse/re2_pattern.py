"""A Python regular expression (bytes) written as an RE2 pattern that matches at least what it matches.

RE2 runs an automaton over a whole block in one pass, at a cost that does not grow with the number of
alternatives; Python's engine tries every alternative at every place it may begin. RE2 has no look-around,
atomic groups, possessive repeats or back references, so the translation keeps what it can and widens the
rest: a look-around is dropped (it can only refuse), an atomic group or a possessive repeat becomes an
ordinary one (they refuse what giving back would have matched). The result is used as a first filter
only: where it matches, the Python expression decides (line_filter.py).

Every class leaves out b'\\n', so that a match over the lines of a block joined by b'\\n' never runs
into the next line (the Python expression is matched against one line, which holds no b'\\n').
The pattern is read by Python's own parser (re._parser), so verbose mode, escapes and classes are taken
exactly as Python takes them.
"""

from __future__ import annotations

import re
import re._constants as sre_c
import re._parser as sre_parse
from typing import Any

from ncclscope.common.words import number_runs

try:
    import re2  # type: ignore[import-untyped,unused-ignore]
except ImportError:  # a platform without its wheel: the callers use Python's engine
    re2 = None

# RE2 is used when it imports; the tests turn it off to show that Python's engine gives the same answers
ENABLED = re2 is not None
RE2_MEMORY = 64 << 20  # for an automaton of a few hundred alternatives (the words and starts of line_filter)

NEWLINE = 0x0A
ALL_BYTES = frozenset(range(256))
_CATEGORY_BYTES = {
    sre_c.CATEGORY_DIGIT: frozenset(range(0x30, 0x3A)),
    sre_c.CATEGORY_WORD: frozenset(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_"),
    sre_c.CATEGORY_SPACE: frozenset(b" \t\n\r\f\v"),
}
for _cat, _neg in (
    (sre_c.CATEGORY_DIGIT, sre_c.CATEGORY_NOT_DIGIT),
    (sre_c.CATEGORY_WORD, sre_c.CATEGORY_NOT_WORD),
    (sre_c.CATEGORY_SPACE, sre_c.CATEGORY_NOT_SPACE),
):
    _CATEGORY_BYTES[_neg] = ALL_BYTES - _CATEGORY_BYTES[_cat]


class Untranslatable(ValueError):
    """The expression holds something RE2 cannot widen (a back reference, a conditional group)."""


def to_re2(pattern: re.Pattern[bytes]) -> str:
    """RE2 source (Latin-1: one character per byte) matching a superset of `pattern`, line by line."""
    if not isinstance(pattern.pattern, bytes):
        raise Untranslatable("only bytes patterns are translated")
    if pattern.flags & re.IGNORECASE:
        raise Untranslatable("a pattern compiled IGNORECASE as a whole")
    parsed = sre_parse.parse(pattern.pattern, pattern.flags)
    return _seq(parsed)


def _seq(items: Any) -> str:
    return "".join(_item(op, av) for op, av in items)


def _item(op: Any, av: Any) -> str:
    if op is sre_c.LITERAL:
        return _byte(av)
    if op is sre_c.NOT_LITERAL:
        return _class(ALL_BYTES - {av})
    if op is sre_c.ANY:
        return _class(ALL_BYTES)
    if op is sre_c.IN:
        return _class(_in_bytes(av))
    if op is sre_c.BRANCH:
        return "(?:" + "|".join(_seq(branch) for branch in av[1]) + ")"
    if op is sre_c.SUBPATTERN:
        _group, add_flags, del_flags, sub = av
        if add_flags & ~(re.VERBOSE | re.IGNORECASE) or del_flags & ~re.VERBOSE:
            raise Untranslatable(f"inline flags {add_flags}/{del_flags}")
        return ("(?i:" if add_flags & re.IGNORECASE else "(?:") + _seq(sub) + ")"
    if op is sre_c.ATOMIC_GROUP:
        return "(?:" + _seq(av) + ")"
    if op in (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT, sre_c.POSSESSIVE_REPEAT):
        low, high, sub = av
        body = "(?:" + _seq(sub) + ")"
        if high is sre_c.MAXREPEAT:
            return body + ("*" if low == 0 else "+" if low == 1 else f"{{{low},}}")
        if high > 1000:  # RE2's limit on a counted repeat: widened to an open one
            return body + f"{{{min(low, 1000)},}}"
        return body + f"{{{low},{high}}}"
    if op in (sre_c.ASSERT, sre_c.ASSERT_NOT):
        return ""  # a look-around only refuses: without it, more matches
    if op is sre_c.AT:
        return _at(av)
    raise Untranslatable(f"{op} has no RE2 form")


def _at(code: Any) -> str:
    if code in (sre_c.AT_BEGINNING, sre_c.AT_BEGINNING_STRING, sre_c.AT_BEGINNING_LINE):
        return "^"  # the RE2 pattern is compiled multi-line: each line is a string of its own
    if code in (sre_c.AT_END, sre_c.AT_END_STRING, sre_c.AT_END_LINE):
        return "$"
    if code is sre_c.AT_BOUNDARY:
        return r"\b"
    if code is sre_c.AT_NON_BOUNDARY:
        return r"\B"
    raise Untranslatable(f"{code} has no RE2 form")


def _in_bytes(items: Any) -> frozenset[int]:
    chosen: set[int] = set()
    negate = False
    for op, av in items:
        if op is sre_c.NEGATE:
            negate = True
        elif op is sre_c.LITERAL:
            chosen.add(av)
        elif op is sre_c.RANGE:
            chosen.update(range(av[0], av[1] + 1))
        elif op is sre_c.CATEGORY and av in _CATEGORY_BYTES:
            chosen |= _CATEGORY_BYTES[av]
        else:
            raise Untranslatable(f"{op} {av} in a class")
    return ALL_BYTES - chosen if negate else frozenset(chosen)


def _class(chosen: frozenset[int] | set[int]) -> str:
    """A class of these bytes less b'\\n', as ranges."""
    runs = number_runs(set(chosen) - {NEWLINE})
    if not runs:
        return "[^\\x00-\\xff]"  # matches nothing
    return "[" + "".join(_byte(a) if a == b else f"{_byte(a)}-{_byte(b)}" for a, b in runs) + "]"


def _byte(value: int) -> str:
    char = chr(value)
    return char if char.isascii() and char.isalnum() else f"\\x{value:02x}"


def re2_compile(source: bytes) -> Any | None:
    """RE2 source (bytes, one character per byte) compiled, or None where RE2 is not used."""
    if not ENABLED:
        return None
    options = re2.Options()
    options.encoding = re2.Options.Encoding.LATIN1
    options.max_mem = RE2_MEMORY
    return re2.compile(source, options)


def escape(word: bytes) -> bytes:
    """A literal in RE2 source."""
    return "".join(_byte(b) for b in word).encode("latin-1")
