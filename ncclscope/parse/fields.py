"""Fields from the grammar's parse tree of a record (where each value sits in the line), and decoding them
from the bytes of any later line of the same shape.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from lark import Lark, Token, Tree

from ncclscope.parse import grammars
from ncclscope.parse.normalize import (
    clean,
)

Span = tuple[int, int]


Origin = tuple[str | None, int | None, int | None, int | None]  # host, pid, tid, CUDA device


ORIGIN_KEYS = ("host", "pid", "tid", "cuda_dev")


ORIGIN_MEMO = 65_536  # processes remembered per prefix layout


# prefix layout (the origin fields' spans relative to the first) -> its window's bytes -> origin
_ORIGIN_TABLES: dict[tuple[Span | None, ...], dict[bytes, Origin]] = {}


STARTS = ("record", "loose_record", "message")


def grammar_parser() -> Lark:
    return grammars.load("nccl_log", STARTS)


def message_start() -> re.Pattern[str]:
    """What a bare NCCL message (its prefix stripped) can begin with (grammars.first_words)."""
    return grammars.first_words("nccl_log", STARTS, "message")


def message_keywords() -> tuple[str, ...]:
    """The constant words a bare NCCL message can begin with (grammars.first_keywords)."""
    return grammars.first_keywords("nccl_log", STARTS, "message")


def span_of(tok: Any) -> Span:
    """Position of a token (a Tree here would be a grammar change the parser must follow)."""
    return (tok.start_pos or 0, tok.end_pos or 0)


def extract(tree: Tree) -> dict[str, Any]:
    """A parse tree as nested {field: span | True | dict | list} named by the grammar's rules."""
    out: dict[str, Any] = {}
    for child in tree.children:
        value: Any
        if isinstance(child, Token):
            key, value = child.type.lower(), span_of(child)
        else:
            key = str(child.data)
            kids = child.children
            if len(kids) == 1 and isinstance(kids[0], Token):
                value = span_of(kids[0])
            elif not kids:
                value = True
            else:
                value = extract(child)
        existing = out.get(key)
        if existing is None:
            out[key] = value
        elif isinstance(existing, Repeated):
            existing.append(value)
        else:
            out[key] = Repeated([existing, value])
    return out


class Repeated(list):
    """A field that occurs several times in one record (device lists, ring ranks ...)."""


def shift(value: Any, mapper: Callable[[int, int], Span]) -> Any:
    if isinstance(value, tuple):
        return mapper(*value)
    if isinstance(value, dict):
        return {k: shift(v, mapper) for k, v in value.items()}
    if isinstance(value, list):
        return Repeated(shift(v, mapper) for v in value)
    return value


def sort_spans(value: Any, name: str, hex_names: frozenset[str], plain: list[Span], hexes: list[Span]) -> None:
    """The spans of a field set into `hexes` (fields named in `hex_names`) and `plain` (the others)."""
    if isinstance(value, tuple):
        (hexes if name in hex_names else plain).append(value)
    elif isinstance(value, dict):
        for key, inner in value.items():
            sort_spans(inner, key, hex_names, plain, hexes)
    elif isinstance(value, list):
        for inner in value:
            sort_spans(inner, name, hex_names, plain, hexes)


def spans_of(value: Any) -> list[Span]:
    """Every span of a field set."""
    spans: list[Span] = []
    sort_spans(value, "", frozenset(), spans, spans)
    return spans


# Tokens whose ids NCCL prints in hex: an opCount (`%lx`), a bus id, a topology node (`GPU/0-18000`)
HEX_ID_TOKENS = ("HEXID", "HEXID_PAIR", "NODE_REF")


@functools.cache
def hex_field_names() -> frozenset[str]:
    """The fields the grammar reads as one hex-id token (`op_count: HEXID`, `graph_hop: NODE_REF`). A
    template must take hex digits in their ids even when its exemplar's look decimal (`opCount 7`,
    `GPU/0-18000`): else the next line's `opCount 1a` or `GPU/0-2a000` needs a template of its own, and
    past a few per word skeleton every such line is parsed alone."""
    names = {token.lower() for token in HEX_ID_TOKENS}  # the token itself, where a rule uses it inline
    for rule in grammar_parser().rules:
        expansion = [getattr(symbol, "name", None) for symbol in rule.expansion]
        if len(expansion) == 1 and expansion[0] in HEX_ID_TOKENS:
            names.add(str(rule.origin.name))
    return frozenset(names)


def span_text(chunk: bytes) -> str:
    """A field's text; a terminal's colour codes or NUL bytes inside the field (the span maps around them) go."""
    text = chunk.decode("utf-8", "replace")
    return clean(text).text if "\x1b" in text or "\x00" in text else text


def origin_table(prefix: dict[str, Span]) -> tuple[Span, dict[bytes, Origin]]:
    """The bytes that hold a record's origin, and the table shared by the shapes that lay it out alike."""
    spans = [prefix.get(name) for name in ORIGIN_KEYS]
    present = [span for span in spans if span]
    if not present:
        return (0, 0), _ORIGIN_TABLES.setdefault((), {})
    a, b = min(s[0] for s in present), max(s[1] for s in present)
    layout = tuple((s[0] - a, s[1] - a) if s else None for s in spans)
    return (a, b), _ORIGIN_TABLES.setdefault(layout, {})


def int_or_none(text: str | None) -> int | None:
    return int(text) if text else None


def int_or(text: str, default: int) -> int:
    return int(text) if text.strip().lstrip("-").isdigit() else default


def field_decoder(value: Any) -> Callable[[bytes], Any]:
    """A function that decodes `value`'s spans out of a line, as `decode` does. Where the bytes the fields
    span are plain ASCII (no colour code, no NUL: nearly every line), they are decoded once and sliced."""
    by_span = _span_decoder(value)
    spans = spans_of(value)
    if not spans:
        return by_span
    low, high = min(a for a, _ in spans), max(b for _, b in spans)
    sliced = _slice_decoder(value, low)

    def decoder(line: bytes) -> Any:
        window = line[low:high]
        if window.isascii():
            text = window.decode("ascii")
            if "\x1b" not in text and "\x00" not in text:
                return sliced(text)
        return by_span(line)

    return decoder


def _span_decoder(value: Any) -> Callable[[bytes], Any]:
    if isinstance(value, tuple):
        a, b = value
        return lambda line: span_text(line[a:b])
    if isinstance(value, dict):
        parts = [(k, _span_decoder(v)) for k, v in value.items()]
        return lambda line: {k: part(line) for k, part in parts}
    if isinstance(value, list):
        items = [_span_decoder(v) for v in value]
        return lambda line: [item(line) for item in items]
    return lambda line: value


def _slice_decoder(value: Any, low: int) -> Callable[[str], Any]:
    """`_span_decoder` over the text of a line's bytes from `low` on (decoded once); a dict or list of spans
    alone is one comprehension."""
    if isinstance(value, tuple):
        a, b = value[0] - low, value[1] - low
        return lambda text: text[a:b]
    if isinstance(value, dict):
        if all(isinstance(v, tuple) for v in value.values()):
            plan = [(k, a - low, b - low) for k, (a, b) in value.items()]
            return lambda text: {k: text[a:b] for k, a, b in plan}
        parts = [(k, _slice_decoder(v, low)) for k, v in value.items()]
        return lambda text: {k: part(text) for k, part in parts}
    if isinstance(value, list):
        if all(isinstance(v, tuple) for v in value):
            cuts = [(a - low, b - low) for a, b in value]
            return lambda text: [text[a:b] for a, b in cuts]
        items = [_slice_decoder(v, low) for v in value]
        return lambda text: [item(text) for item in items]
    return lambda text: value


def hex_or(chunk: bytes, default: int = -1) -> int:
    try:
        return int(span_text(chunk), 16)
    except ValueError:
        return default


def decode(value: Any, line: bytes) -> Any:
    if isinstance(value, tuple):
        return span_text(line[value[0] : value[1]])
    if isinstance(value, dict):
        return {k: decode(v, line) for k, v in value.items()}
    if isinstance(value, list):
        return [decode(v, line) for v in value]
    return value


def transport_of(fields: dict[str, Any], line: bytes) -> tuple[str, bool, bool, bool]:
    """(transport label, GDR, shared, is NET) of a connection line's transport fields."""
    if "p2p" in fields or "p2p_indirect" in fields:
        p2p = fields.get("p2p") or fields.get("p2p_indirect")
        kind = decode(p2p.get("p2p_kind"), line) if isinstance(p2p, dict) and "p2p_kind" in p2p else "indirect"
        options = p2p.get("p2p_option") if isinstance(p2p, dict) else None
        opts = [options] if isinstance(options, tuple) else list(options or [])
        suffix = "".join("/" + str(decode(o, line)) for o in opts)
        return f"P2P/{kind}{suffix}", False, False, False
    if "shm" in fields:
        return "SHM", False, False, False
    net = fields.get("net") if "net" in fields else fields
    name = str(decode(net.get("net_name"), line)) if isinstance(net, dict) and "net_name" in net else "?"
    options = net.get("net_option") if isinstance(net, dict) else None
    opts = [options] if isinstance(options, tuple) else list(options or [])
    values = {str(decode(o, line)) for o in opts}
    prefix = "COLLNET" if "net" not in fields else "NET"
    return f"{prefix}/{name}", "GDRDMA" in values, "Shared" in values, True
