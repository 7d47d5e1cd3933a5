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
