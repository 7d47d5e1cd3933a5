"""Writes grammars/nccl_census.lark: the INFO messages of the censuses (tools/census/nccl.json, then RCCL's
rccl.json and the network plugins' aws-ofi-nccl.json and nccl-fastsocket.json) that the hand-written grammar
(grammars/nccl_log/) does not type, as grammar rules in our notation (issue 43).

Each message becomes one rule named after its constant words (`msg_p2p_not_supported_between_gpu`), whose
constant words are literals and whose fields are rules named as in the census (`gpu`). The NCCL log parser
reads a record with it only when the hand-written grammar did not know the record's message
(parse/nccl_log.py): a family with hand-written knowledge (fields that rules read) always wins.

Left out, and so still counted as unknown messages: messages that are one formatted string, messages without a
constant word of three letters (nothing to tell them by), and messages whose constant words are those of
another one (the first of them is kept).

Usage::

    python tools/census/make_grammar.py            # rewrites grammars/nccl_census.lark
    python tools/census/make_grammar.py --check    # exit 1 when the file is not what the census makes
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import coverage  # noqa: E402  (tools/census/coverage.py: how a census message is made into a line)

CENSUSES = [Path(__file__).with_name(f"{name}.json") for name in ("nccl", "rccl", "aws-ofi-nccl", "nccl-fastsocket")]
GRAMMAR = REPO / "grammars" / "nccl_census.lark"
FIELD_RE = re.compile(r"\{(\w+):(\w+)\}")
# a field's type -> the terminal that reads it; text in the middle of a message is one word, at its end the rest.
# Numbers of every kind are one terminal: where two messages print a number of different kinds at the same
# place (respFd %d and respFd %p), the lexer must not choose between them.
TERMINAL = {"int": "NUM", "uint": "NUM", "hex": "NUM", "ptr": "NUM", "float": "NUM", "char": "CHAR"}
HEADER = """\
// NCCL INFO messages that grammars/nccl_log/ does not know, from the censuses of the messages of NCCL,
// RCCL and the network plugins aws-ofi-nccl and nccl-fastsocket (tools/census/*.json, format facts per
// release).
// WRITTEN BY tools/census/make_grammar.py: do not edit. A message that deserves fields a rule reads gets a
// hand-written family in grammars/nccl_log/ instead.
//
// A rule per message, named after its constant words; its fields named as in the census. The parser tries
// this grammar only on a record whose message the hand-written grammar did not know (parse/nccl_log.py).
// Literals win over a field's word where both could be read (the fields' terminals have lower priority).

start: census_message

"""
FOOTER = """
NUM.-1: /-?0x[0-9a-fA-F]+|-?\\d+\\.\\d+([eE][-+]?\\d+)?|-?[0-9a-fA-F]+|\\(nil\\)|-?nan|-?inf/
DIGITS: /-?\\d+/
CHAR: /\\S/
WORD.-2: /[^\\s,;()\\[\\]{}<>='"]+(?<![.:])/
REST.-3: /[^\\n]*[^\\s\\n]/

%ignore /[ \\t]+/
"""


def pieces(fmt: str) -> list[tuple[str, str, bool]]:
    """The format's first line as ("lit", word, _) and ("field", name:type, glued) pieces, in order; a field is
    glued when the next word follows it without a space ("{v0:text}/Plugin:")."""
    first = fmt.splitlines()[0] if fmt else ""
    out: list[tuple[str, str, bool]] = []
    at = 0

    def words(text: str) -> None:
        out.extend(("lit", w, False) for w in text.replace("{{", "{").replace("}}", "}").split())

    for m in FIELD_RE.finditer(first):
        words(first[at : m.start()])
        after = first[m.end() : m.end() + 1]
        out.append(("field", f"{m[1]}:{m[2]}", bool(after) and not after.isspace() and after != "{"))
        at = m.end()
    words(first[at:])
    return out


def distinctive(parts: list[tuple[str, str, bool]]) -> bool:
    """Constant words enough to tell the message from any line: one of three letters or more (else
    "{v0:text}: {v1:text}" would take every line with a colon), and two or more words before free text at
    the end (else "Trees {v0:text}" would take a damaged Trees line, and "{v0:text}/Plugin: {v1:text}" any
    plugin's line: the text was formatted elsewhere)."""
    words = [w for kind, w, _ in parts if kind == "lit"]
    if not any(sum(c.isalpha() for c in w) >= 3 for w in words):
        return False
    ends_in_text = parts[-1][0] == "field" and parts[-1][1].endswith(":text")
    return not ends_in_text or len(words) >= 2


def slug(words: list[str]) -> str:
    text = "_".join(re.sub(r"[^a-z0-9]+", "_", w.lower()).strip("_") for w in words)
    return re.sub(r"_+", "_", text).strip("_")[:48].rstrip("_") or "message"


def literal(word: str) -> str:
    return json.dumps(word)


def chosen(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The INFO messages to write: typed by no filling of the hand-written grammar, and with words to go by."""
    from ncclscope.parse import nccl_log

    was, nccl_log.CENSUS_FALLBACK = nccl_log.CENSUS_FALLBACK, False  # what the hand-written grammar alone types
    try:
        return _untyped(messages)
    finally:
        nccl_log.CENSUS_FALLBACK = was


def _untyped(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rng = coverage.random.Random(43)
    out, seen_words = [], set()
    for message in messages:
        if message["level"] != "INFO" or message["format"] in coverage.DYNAMIC:
            continue
        parts = pieces(message["format"])
        if not parts or not distinctive(parts):
            continue
        # fields next to each other count as one: a line of the one message fits the other's rule
        words = tuple(
            w if kind == "lit" else "{}"
            for i, (kind, w, _) in enumerate(parts)
            if kind == "lit" or i == 0 or parts[i - 1][0] == "lit"
        )
        if words in seen_words:
            continue
        fillers = coverage.fillers_of(message)
        if any(coverage.typed(coverage.line_of(message, rng, filler)) for filler in fillers):
            continue
        seen_words.add(words)
        out.append(message)
    return out


def grammar(messages: list[dict[str, Any]]) -> tuple[str, dict[str, str]]:
    """The grammar's text, and the rule (family) of each message by its key (project, file, format)."""
    families: dict[str, str] = {}
    rules: list[str] = []
    names: list[str] = []
    field_rules: dict[str, str] = {}  # rule name -> its terminal
    before: dict[str, str] = {}  # a word a text field is glued to -> the terminal that reads up to it
    taken: set[str] = set()
    for message in messages:
        parts = pieces(message["format"])
        words = [w for kind, w, _ in parts if kind == "lit"][:6]
        name = "msg_" + slug(words)
        base, n = name, 2
        while name in taken:
            name, n = f"{base}_{n}", n + 1
        taken.add(name)
        families[key(message)] = name
        symbols = []
        for at, (kind, value, glued) in enumerate(parts):
            if kind == "lit":
                symbols.append(literal(value))
                continue
            field, type_ = value.split(":")
            field = re.sub(r"[^a-z0-9_]", "_", field.lower()) or "value"
            last = at == len(parts) - 1
            terminal = TERMINAL.get(type_) or ("REST" if last else "WORD")
            if terminal == "WORD" and glued and parts[at + 1][0] == "lit":
                terminal = before.setdefault(parts[at + 1][1], f"UPTO{len(before) + 1}")
            elif type_ in ("int", "uint") and glued and parts[at + 1][1].startswith("."):
                terminal = "DIGITS"  # "version 1.21": the number ends at the dot (NUM would read 1.21)
            rule = f"{field}__{terminal.lower()}"
            field_rules[rule] = terminal
            # text may be empty: at the end ("Matrix:%s" whose table follows on the next lines), or quoted ('%s')
            optional = type_ == "text" and (last or terminal.startswith("UPTO"))
            symbols.append(rule + ("?" if optional else ""))
        where = f"{message['project']} " if message["project"] != "nccl" else ""
        rules.append(f"{name}: {' '.join(symbols)}  // {where}{Path(message['file']).name} {_span(message)}")
        names.append(name)
    out = [HEADER, "?census_message: " + "\n    | ".join(names), ""]
    out.extend(rules)
    out.append("")
    out.extend(f"{rule}: {terminal}" for rule, terminal in sorted(field_rules.items()))
    out.append(FOOTER)
    # a text field glued to the word after it: up to that word (its own terminal, as the lexer has no lookahead)
    out.extend(f"{terminal}.-1: /[^\\s]+?(?={_regex(word)})/" for word, terminal in before.items())
    out.append("")
    return "\n".join(out), families


def key(message: dict[str, Any]) -> str:
    return f"{message.get('project', 'nccl')}:{message['file']}:{message['format']}"


def census_messages() -> list[dict[str, Any]]:
    """The messages of every census, each with its project (nccl, rccl)."""
    messages = []
    for path in CENSUSES:
        project = path.stem
        messages.extend({**m, "project": project} for m in json.loads(path.read_text(encoding="utf-8"))["messages"])
    return messages


def _regex(word: str) -> str:
    return re.escape(word).replace("/", "\\/")


def _span(message: dict[str, Any]) -> str:
    return ", ".join(
        a.removeprefix("v") + ("" if a == b else ".." + b.removeprefix("v")) for a, b in message["releases"]
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the grammar is not what the census makes")
    args = parser.parse_args(argv)
    text, _ = grammar(chosen(census_messages()))
    if args.check:
        same = GRAMMAR.exists() and GRAMMAR.read_text(encoding="utf-8") == text
        print("grammars/nccl_census.lark is " + ("up to date" if same else "not what the census makes"))
        return 0 if same else 1
    GRAMMAR.write_text(text, encoding="utf-8")
    print(f"wrote {GRAMMAR.relative_to(REPO)}: {text.count(chr(10) + 'msg_')} messages")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
