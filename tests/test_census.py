"""Issue 43: the census of NCCL's messages (tools/census): its notation, and the file it wrote."""

from __future__ import annotations

import json
import sys

from conftest import REPO

sys.path.insert(0, str(REPO / "tools" / "census"))

import nccl_census  # noqa: E402

CENSUS = REPO / "tools" / "census" / "nccl.json"


def test_a_printf_format_becomes_named_typed_fields() -> None:
    text, fields = nccl_census.notation("peer %d of %d on dev %s at 0x%lx, %.2f GB/s {x} 100%%")
    assert text == "peer {peer:int} of {of:int} on dev {dev:text} at 0x{at:hex}, {v4:float} GB/s {{x}} 100%"
    assert [f["type"] for f in fields] == ["int", "int", "text", "hex", "float"]
    assert nccl_census.notation("GPU%d and GPU%d")[1] == [
        {"name": "gpu", "type": "int"},
        {"name": "gpu_2", "type": "int"},
    ]


def test_a_call_s_format_is_read_from_its_literals_and_macros() -> None:
    source = 'x(); // INFO(NCCL_INIT, "not this")\n  INFO(NCCL_INIT|NCCL_NET, "a %" PRIu64 " b" "c", n);\n'
    source += '  WARN("bad %s", why);\n#define INFO(FLAGS, ...) f(__VA_ARGS__)\n  WARN(buffer);\n'
    found = nccl_census.messages_of("src/x.cc", source)
    assert [(m["level"], m["format"], m["subsystems"]) for m in found] == [
        ("INFO", "a {a:uint} bc", ["INIT", "NET"]),
        ("WARN", "bad {bad:text}", []),
        ("WARN", "{dynamic:text}", []),
    ]


def test_the_census_file_is_whole() -> None:
    census = json.loads(CENSUS.read_text(encoding="utf-8"))
    releases = census["releases"]
    assert releases[0] == "v2.3.5-5" and len(releases) >= 60
    assert len(census["messages"]) > 2500
    for message in census["messages"]:
        assert message["level"] in ("INFO", "WARN", "TRACE", "VERSION")
        for first, last in message["releases"]:
            assert releases.index(first) <= releases.index(last)
        names = [f["name"] for f in message["fields"]]
        assert len(names) == len(set(names)), message["format"]


# ---------------------------------------------------------------------------------- the census grammar
import random  # noqa: E402
import re  # noqa: E402

import coverage  # noqa: E402  (tools/census/coverage.py)
import make_grammar  # noqa: E402
import pytest  # noqa: E402

from ncclscope.parse.nccl_log import NcclLogParser  # noqa: E402

RELEASE_RE = re.compile(r"^v(\d+)\.(\d+)\.")
NUMBER_TYPES = ("int", "uint", "hex", "ptr", "float")


def _generations(message: dict) -> list[tuple[str, str]]:
    """(name, what goes before the record) for each prefix generation of the message's releases (formats.md
    A.2, A.3): the plain prefix always; a timestamp before it from 2.26 (NCCL_DEBUG_TIMESTAMP_LEVELS); and
    behind a launcher's prefix (mpirun --tag-output) as real pastes have it."""
    census = json.loads((REPO / "tools" / "census" / f"{message['project']}.json").read_text(encoding="utf-8"))
    releases = census["releases"]
    printed = [r for a, b in message["releases"] for r in releases[releases.index(a) : releases.index(b) + 1]]
    out = [("plain", ""), ("mpirun --tag-output", "[1,3]<stdout>:")]
    if any((m := RELEASE_RE.match(r)) and (int(m[1]), int(m[2])) >= (2, 26) for r in printed):
        out.append(("2.26+ timestamp", "[2026-03-02 14:05:33] "))
    return out


def _spans_text(value: object, raw: bytes) -> list[str]:
    if isinstance(value, tuple):
        return [raw[value[0] : value[1]].decode()]
    if isinstance(value, dict):
        return [t for inner in value.values() for t in _spans_text(inner, raw)]
    if isinstance(value, list):
        return [t for inner in value for t in _spans_text(inner, raw)]
    return []


@pytest.fixture(scope="module")
def census_grammar() -> tuple[list[dict], dict[str, str]]:
    messages = make_grammar.census_messages()
    chosen = make_grammar.chosen(messages)
    text, families = make_grammar.grammar(chosen)
    assert text == (REPO / "grammars" / "nccl_census.lark").read_text(encoding="utf-8"), (
        "grammars/nccl_census.lark is not what the census makes: python tools/census/make_grammar.py"
    )
    return messages, families


def test_every_census_message_is_typed_into_its_family_with_its_fields_in_every_prefix_generation(
    census_grammar: tuple[list[dict], dict[str, str]],
) -> None:
    messages, families = census_grammar
    by_key = {make_grammar.key(m): m for m in messages}
    message_of_rule = {rule: by_key[k] for k, rule in families.items()}
    parser = NcclLogParser(lambda no, text: None)
    rng = random.Random(19)
    checked = 0
    problems: list[str] = []
    for message in messages:
        if message["level"] != "INFO" or message["format"] in coverage.DYNAMIC:
            continue
        fillers = coverage.fillers_of(message)
        first = None
        for filler in fillers:
            text, values = coverage.filled(message, rng, filler)
            shape = parser.shape_of(coverage.with_prefix(message, text, rng).encode())
            if len(shape.records) == 1 and shape.recognized:
                first = (text, values, shape.records[0].family)
                break
        if first is None:
            continue  # untyped: counted by the coverage test below
        text, values, family = first
        expected = families.get(make_grammar.key(message))
        other = message_of_rule.get(family)
        if expected is not None and family != expected and (other is None or other["file"] != message["file"]):
            # (a line that the rule of the same message in other releases also reads may be read by that one)
            problems.append(f"{message['format'][:80]}: read as {family}, its census rule is {expected}")
            continue
        for name, lead in _generations(message):
            raw = (lead + coverage.with_prefix(message, text, rng)).encode()
            records = parser.shape_of(raw).records
            if len(records) != 1 or records[0].family != family:
                problems.append(f"{name}: {message['format'][:80]}: {[r.family for r in records]} not {family}")
                continue
            record = records[0]
            got = _spans_text(record.fields, raw)
            if family.startswith("msg_"):  # a census family: the field names of the message it was made from
                names = {re.sub(r"[^a-z0-9_]", "_", f["name"]) for f in message_of_rule[family]["fields"]}
                if set(record.fields) != names:
                    problems.append(f"{message['format'][:80]}: fields {sorted(record.fields)} not {sorted(names)}")
            missing = [v for kind, v in values if kind in NUMBER_TYPES and not any(v in g for g in got)]
            if missing and family.startswith("msg_"):
                problems.append(f"{message['format'][:80]}: values {missing} not in its fields")
            checked += 1
    assert checked > 3000
    assert not problems, "\n".join(problems[:20])


def test_census_coverage_per_release(census_grammar: tuple[list[dict], dict[str, str]]) -> None:
    """Issue 43's targets: >= 99% of the INFO/WARN messages of 2.18-2.30 typed, >= 95% of 2.3-2.17."""
    census = json.loads(CENSUS.read_text(encoding="utf-8"))
    releases = census["releases"]
    rng = random.Random(43)
    status = []
    for message in census["messages"]:
        if message["level"] not in ("INFO", "WARN") or message["format"] in coverage.DYNAMIC:
            continue
        fillers = coverage.fillers_of(message)
        ok = any(coverage.typed(coverage.line_of(message, rng, filler)) for filler in fillers)
        printed = {r for a, b in message["releases"] for r in releases[releases.index(a) : releases.index(b) + 1]}
        status.append((ok, printed))
    for release in releases:
        here = [ok for ok, printed in status if release in printed]
        m = RELEASE_RE.match(release)
        assert m
        target = 0.99 if (int(m[1]), int(m[2])) >= (2, 18) else 0.95
        assert sum(here) / len(here) >= target, f"{release}: {sum(here)}/{len(here)} typed"
