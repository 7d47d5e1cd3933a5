"""Loads the Lark grammars (grammars/*.lark) once and builds their parsers.

The grammars are the single source of truth for syntax. In a checkout they live in the top-level
grammars/ folder; in an installed wheel they are shipped as ncclscope/grammars_data/. A grammar too
large for one file is a folder of its name (grammars/nccl_log/: a file per group of record families),
whose files are one grammar joined in the order of their names.
"""

from __future__ import annotations

import os
import re
import stat
import sys
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lark import Lark, Tree

_PACKAGE_DIR = Path(__file__).resolve().parent.parent  # ncclscope/


def grammar_dir() -> Path:
    """Where the .lark files are: inside the installed package, else the repository's grammars/."""
    for candidate in (_PACKAGE_DIR / "grammars_data", _PACKAGE_DIR.parent / "grammars"):
        if (candidate / "nccl_log").is_dir():
            return candidate
    raise FileNotFoundError("ncclscope grammars not found (expected grammars/nccl_log/)")


@cache
def grammar_text(name: str) -> str:
    """grammars/<name>.lark, or the files of grammars/<name>/ joined in the order of their names."""
    folder = grammar_dir() / name
    if folder.is_dir():
        return "".join(part.read_text(encoding="utf-8") for part in sorted(folder.glob("*.lark")))
    return (grammar_dir() / f"{name}.lark").read_text(encoding="utf-8")


def terminal_regex(name: str, terminal: str) -> str:
    """The regular expression of a terminal of grammars/<name> (`TERMINAL: /.../`), as Python's re takes
    it: a reader's quick pre-filter that needs the same text as the grammar takes it from here, so the
    grammar stays its one home. Read from the grammar's text: no parser is built for it."""
    match = re.search(
        rf"^{re.escape(terminal)}(?:\.\d+)?:[ \t]*/((?:[^/\\\n]|\\.)+)/[imslux]*[ \t]*(?://.*)?$",
        grammar_text(name),
        re.MULTILINE,
    )
    if match is None:
        raise LookupError(f"grammars/{name}: no terminal {terminal} written as a regular expression")
    return match[1].replace("\\/", "/")


def _cache_file(name: str, starts: list[str]) -> str | bool:
    """Where Lark may keep this parser between runs, or False.

    Lark's own default is a predictable name in the shared temporary directory, read back with
    pickle: on a shared login node another user could plant that file and run code as whoever
    starts ncclscope next. So the cache lives only in a directory that this user owns and nobody
    else can write ($XDG_CACHE_HOME/ncclscope, or ~/.cache/ncclscope); without one, no cache
    (the grammar is then built on each run, slower). Lark checks the grammar's hash inside
    the file, so an edited grammar is rebuilt, never served stale.
    """
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    folder = Path(root) / "ncclscope"
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = folder.lstat()
    except OSError:
        return False
    getuid = getattr(os, "getuid", None)
    private = stat.S_ISDIR(info.st_mode) and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    if not private or (getuid is not None and info.st_uid != getuid()):
        return False
    import lark

    tag = f"{name}-{'-'.join(starts)}-lark{lark.__version__}-py{sys.version_info[0]}{sys.version_info[1]}"
    return str(folder / f"{tag}.cache")


@cache
def load(name: str, start: str | tuple[str, ...] = "start") -> Lark:
    """An LALR parser for grammars/<name>.lark; its tokens keep their positions (the shape cache needs them)."""
    from lark import Lark  # here: a reader of the grammar's text alone (terminal_regex) need not load Lark

    starts = list(start) if isinstance(start, tuple) else [start]
    lark_cache = _cache_file(name, starts)
    built = _built_file(lark_cache, name) if isinstance(lark_cache, str) else None
    parser = _read_built(built) if built else None
    if parser is not None:
        return _no_second_guess(parser)
    parser = Lark(
        grammar_text(name),
        parser="lalr",
        lexer="contextual",
        start=starts,
        propagate_positions=False,  # tokens carry their positions; tree positions are never read (and cost 40%)
        maybe_placeholders=False,
        cache=lark_cache,  # loading a built parser is much faster than building it
    )
    if built:
        _write_built(parser, built)
    return _no_second_guess(parser)


def _no_second_guess(parser: Lark) -> Lark:
    """`parser` without the lexer its contextual lexer tries on text that no terminal of the parser's state
    reads: that one (every terminal of the grammar) only words a finer error, and building it costs 0.08 s
    in each process for nccl_log's 550 terminals, at the first line a grammar refuses. ncclscope reads no
    error's words (a text the grammar refuses is not its: LarkError), so a stand-in refuses at once and Lark
    raises its own first error. Where a Lark release has no such lexer, the parser is left as it is."""
    lexer = getattr(parser.parser, "lexer", None)
    if lexer is not None and hasattr(lexer, "root_lexer"):
        lexer.root_lexer = _RefuseAtOnce()
    return parser


class _RefuseAtOnce:
    """Stands in for a contextual lexer's root lexer (see _no_second_guess)."""

    terminals_by_name: dict[str, object] = {}

    def __init__(self) -> None:
        from lark.exceptions import UnexpectedCharacters

        class Refused(UnexpectedCharacters):
            def __init__(self) -> None:  # Lark catches it and raises its first error instead
                pass

        self._refused = Refused

    def next_token(self, lexer_state: object, parser_state: object = None) -> object:
        raise self._refused


def rule_text(tree: Tree, rule: str, index: int = 0) -> str | None:
    """The text (stripped) of the index-th child of the first `rule` subtree of a parse, or None."""
    node = next(tree.find_data(rule), None)
    if node is None or len(node.children) <= index:
        return None
    return str(node.children[index]).strip()


def parse_or_none(name: str, start: str, text: str) -> Tree | None:
    """`text` read from `start` of grammars/<name>, or None when the grammar does not take it (a reader trying
    one line kind after another)."""
    from lark.exceptions import LarkError

    try:
        return load(name, start).parse(text)
    except LarkError:
        return None


def _built_file(lark_cache: str, name: str) -> Path:
    """The whole built parser, beside Lark's cache: Lark's own file holds its tables in a form that it turns
    back into objects one by one (most of a short analysis's start-up); this one is read back in one go.
    Its name carries the grammar text's hash, so an edited grammar is never served stale."""
    import hashlib

    digest = hashlib.sha256(grammar_text(name).encode()).hexdigest()[:16]
    return Path(lark_cache).with_suffix(f".{digest}.built")


def _read_built(path: Path) -> Lark | None:
    """The parser kept by _write_built, or None. The file is ncclscope's own, in the private cache folder
    (_cache_file: owned by this user, written by nobody else), never an input's."""
    import gc
    import pickle

    try:
        data = path.read_bytes()
    except OSError:
        return None
    paused = gc.isenabled()
    gc.disable()  # thousands of small objects: the collector would scan them again and again as they arrive
    try:
        parser = pickle.loads(data)  # noqa: S301 - our own cache file in the private folder, see above
    except Exception:  # a file cut by a full disk or left by another version of Lark: build again
        return None
    finally:
        if paused:
            gc.enable()
    return parser if type(parser).__name__ == "Lark" else None


def _write_built(parser: Lark, path: Path) -> None:
    """Keep the built parser for the next run (replacing the files of earlier grammar texts)."""
    import copyreg
    import importlib
    import io
    import pickle
    import types

    from lark.parsers import lalr_analysis

    out = io.BytesIO()
    pickler = pickle.Pickler(out, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = copyreg.dispatch_table.copy()
    # the lexer keeps the `re` module; the parse table's actions are compared by identity (Shift, Reduce)
    pickler.dispatch_table[types.ModuleType] = lambda m: (importlib.import_module, (m.__name__,))
    pickler.dispatch_table[lalr_analysis.Action] = lambda a: (getattr, (lalr_analysis, a.name))
    try:
        pickler.dump(parser)
        for old in path.parent.glob(f"{path.stem.rsplit('.', 1)[0]}.*.built"):
            old.unlink(missing_ok=True)
        temporary = path.with_suffix(f".{os.getpid()}.tmp")
        temporary.write_bytes(out.getvalue())
        os.replace(temporary, path)
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        return  # without it the next run loads Lark's own cache, slower


def nccl_record_parser() -> Lark:
    """Parses one whole NCCL log record (prefix and message); used as the per-line baseline in bench/."""
    return load("nccl_log", ("record",))


@cache
def first_words(name: str, starts: tuple[str, ...], start: str) -> re.Pattern[str]:
    """What a text parsed from `start` can begin with, as one regular expression: the terminals the LALR
    table accepts first (a keyword, a node id ...), and after a broad one (a number) the terminals that
    may follow it. A reader's one cheap test for text that is no such thing (a training log's lines,
    random text) before the parser is asked; made from the parser's own table, so it never refuses what
    the grammar takes."""
    parser = load(name, starts)
    table = parser.parser.parser.parser.parse_table
    terminals = {t.name: t for t in parser.terminals}

    def pattern(name: str) -> str | None:
        terminal = terminals.get(name)
        if terminal is None:
            return None  # a rule's name: the table lists what it may reduce to, not text
        if terminal.pattern.type == "str":
            value = terminal.pattern.value
            return re.escape(value) + (r"(?![\w])" if value[-1:].isalnum() else "")
        return f"(?:{terminal.pattern.to_regexp()})"

    def either(names: Iterable[str]) -> str:
        found = [p for p in map(pattern, names) if p]
        return "(?:" + "|".join(sorted(found, key=len, reverse=True)) + ")"

    state = table.states[table.start_states[start]]
    alternatives = []
    for name, (action, target) in state.items():
        first = pattern(name)
        if first is None:
            continue
        pattern_of = terminals[name].pattern
        broad = pattern_of.type == "re" or not pattern_of.value[-1:].isalnum()  # a number, or "[" and "##"
        if broad and action.name == "Shift":
            first += r"[ \t]*" + either(table.states[target].keys())  # "12 : ...", "[Service", not "12abc"
        alternatives.append(first)
    return re.compile(r"[ \t]*(?:" + "|".join(sorted(alternatives, key=len, reverse=True)) + ")")


@cache
def first_keywords(name: str, starts: tuple[str, ...], start: str) -> tuple[str, ...]:
    """The constant words a text parsed from `start` can begin with (the string terminals of the LALR
    table's first state): `Channel`, `Bootstrap`, `NET` ... (first_words is the whole test)."""
    parser = load(name, starts)
    table = parser.parser.parser.parser.parse_table
    accepted = table.states[table.start_states[start]].keys()
    return tuple(sorted(t.pattern.value for t in parser.terminals if t.name in accepted and t.pattern.type == "str"))
