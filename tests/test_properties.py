"""Property-based: on arbitrary text the parsers never raise, and every line is accounted for."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ncclscope.inputs.opening import InputFile
from ncclscope.parse.nccl_log import NcclLogParser
from ncclscope.parse.one_input import parse_input

# pieces of real syntax, so that generated lines often look like NCCL's and reach deep paths
FRAGMENTS = [
    "node1:123:456 [0] NCCL INFO ",
    "NCCL WARN ",
    "[2025-01-01 00:00:00] ",
    "[1,0]<stdout>:",
    "3: ",
    "Channel 00/0 : ",
    "0[0] -> 1[1] ",
    "via P2P/IPC",
    "via NET/IB/0/GDRDMA",
    "[send] ",
    "comm 0x55aa ",
    "rank 0 nranks 8 ",
    "- Init COMPLETE",
    "NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>",
    "GPU0\tGPU1\tNIC0\tCPU Affinity",
    "GPU0\t X \tNV18\tPIX\t0-23",
    "#       size         count",
    "           8             2     float     sum      -1    10.25    0.00    0.00       0",
    "Trees [0] -1/-1/-1->0->1",
    " ... ",
    "\t",
    "\x1b[4m",
    "\r",
    ":",
    "[",
    "]",
    "->",
    "0x",
    "12",
]
line_text = (
    st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=30)), max_size=8)
    .map("".join)
    .map(lambda s: s.replace("\n", " "))
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(line_text, min_size=1, max_size=30))
def test_log_parser_never_raises_and_counts_every_line(lines: list[str]) -> None:
    others: list[int] = []
    parser = NcclLogParser(lambda n, t: others.append(n))
    data = "\n".join(lines).encode("utf-8", "surrogatepass")
    parser.feed_block(data, 1)
    result = parser.result
    assert result.nccl_lines + len(others) - result.lead_lines == len(lines)
    assert result.recognized + result.unrecognized_count == result.nccl_lines
    for event in result.events:  # lazily decoded fields must decode too
        assert isinstance(event.fields, dict)
        assert event.text is not None


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(st.lists(line_text, min_size=1, max_size=40), st.sampled_from(["\n", "\r\n"]))
def test_whole_source_parse_never_raises_and_counts_lines(tmp_path: Path, lines: list[str], newline: str) -> None:
    target = tmp_path / "input.txt"
    data = newline.join(lines).encode("utf-8", "surrogatepass")
    target.write_bytes(data)
    parsed = parse_input(InputFile(str(target), "input.txt"))
    source = parsed.source
    if b"\x00" in data:
        assert not source.usable  # binary input is refused as a whole
    elif data:  # a final newline ends the last line; it does not start another (as wc -l counts)
        assert source.lines == data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    assert source.recognized + source.unrecognized_count == source.nccl_lines <= source.lines


@settings(max_examples=50, deadline=None)
@given(st.binary(max_size=2000))
def test_arbitrary_bytes_never_raise(data: bytes) -> None:
    parser = NcclLogParser(lambda n, t: None)
    parser.feed_block(data.replace(b"\n", b" ") + b"\n" + data, 1)
