"""The NCCL log parser: prefixes of every version, launcher damage, and the shape cache."""

from __future__ import annotations

import pickle
import random

import numpy as np

from ncclscope.parse.coarse import CoarseTemplate
from ncclscope.parse.coll_scan import CollScan, hex_values
from ncclscope.parse.log_records import Event, LogResult
from ncclscope.parse.moves import moved_shape as _moved_shape
from ncclscope.parse.nccl_log import NcclLogParser, ShapeBook
from ncclscope.parse.shapes import ShapeMover, shape_key


def parse(text: str) -> tuple[LogResult, list[tuple[int, str]]]:
    others: list[tuple[int, str]] = []
    parser = NcclLogParser(lambda n, t: others.append((n, t)))
    parser.feed_block(text.encode(), 1)
    return parser.result, others


def fed(lines: list[str], book: ShapeBook | None = None) -> NcclLogParser:
    """A parser that has read `lines` as one block (its counters say how it read them)."""
    parser = NcclLogParser(lambda n, t: None, book)
    parser.feed_block("\n".join(lines).encode(), 1)
    return parser


def coll_line(rng: random.Random, origin: str, call: str, sizes: str, pointer_bits: tuple[int, int]) -> str:
    """A COLL line (`call`: "AllReduce: opCount 1f"; `sizes`: "count .. datatype .. op ..") with random
    pointers of `pointer_bits` bits."""
    low, high = pointer_bits
    pointers = [f"0x{rng.randrange(1 << low, 1 << high):x}" for _ in range(4)]
    return (
        f"{origin} NCCL INFO {call} sendbuff {pointers[0]} recvbuff {pointers[1]} {sizes} root 0 "
        f"comm {pointers[2]} [nranks=64] stream {pointers[3]}"
    )


def only_event(text: str):  # type: ignore[no-untyped-def]
    result, _ = parse(text)
    assert result.unrecognized_count == 0, result.unrecognized
    assert len(result.events) == 1
    return result.events[0]


def test_info_prefix_gives_host_pid_tid_and_device() -> None:
    event = only_event("node1:12345:12399 [3] NCCL INFO cudaDriverVersion 12040")
    assert (event.host, event.pid, event.tid, event.cuda_dev) == ("node1", 12345, 12399, 3)
    assert event.family == "cuda_driver"
    assert event.fields["driver_version"] == "12040"


def test_warn_with_226_timestamp_keeps_timestamp_and_location() -> None:
    event = only_event(
        "[2025-03-02 14:05:33] node1:12345:12420 [3] transport/net_ib.cc:2358 NCCL WARN "
        "NET/IB: Got completion from peer 10.1.2.4<53468> with status=12 opcode=0 len=0 "
        "vendor err 129 (Recv) hca mlx5_0"
    )
    assert event.level == "WARN"
    assert event.timestamp == "[2025-03-02 14:05:33]"
    assert event.location == "transport/net_ib.cc:2358"
    assert event.fields["completion_error"]["status"] == "12"
    assert event.fields["completion_error"]["peer"] == "10.1.2.4<53468>"


def test_warn_2307_carries_the_function_name() -> None:
    event = only_event("gpu1:10:11 [0] misc/shmutils.cc:91 (ncclShmOpen) NCCL WARN Cuda failure 2 'out of memory'")
    assert event.location == "misc/shmutils.cc:91 (ncclShmOpen)"
    assert event.family == "cuda_failure"


def test_unknown_warn_text_is_still_a_recognised_warn() -> None:
    event = only_event("gpu1:10:11 [0] init.cc:100 NCCL WARN Something NCCL never printed before, 42 times")
    assert event.family == "warn"
    assert event.fields["text"].startswith("Something")


def test_unknown_info_message_is_counted_as_unrecognised() -> None:
    result, _ = parse("gpu1:10:11 [0] NCCL INFO This message does not exist 7")
    assert result.nccl_lines == 1
    assert result.unrecognized_count == 1
    assert result.unrecognized[0].line == 1
    assert result.unrecognized[0].reason == "unknown message"


def test_damaged_prefixes_are_understood() -> None:
    lines = [
        ":22901:22901 [0] NCCL INFO Using network IB",
        "[0] NCCL INFO Using network IB",
        "NCCL INFO Using network IB",
        "gpu-server320 [5] NCCL INFO Using network IB",
    ]
    result, _ = parse("\n".join(lines))
    assert result.recognized == 4
    hosts = [e.host for e in result.events]
    assert hosts == ["", None, None, "gpu-server320"]


def test_launcher_prefixes_are_skipped() -> None:
    lines = [
        "[1,3]<stdout>:node1:1:2 [0] NCCL INFO Using network IB",
        "Fri Aug 11 12:31:45 2023[1,0]<stdout>:node1:1:2 [0] NCCL INFO Using network IB",
        "3: node1:1:2 [0] NCCL INFO Using network IB",
        "[rank3]:node1:1:2 [0] NCCL INFO Using network IB",
        "(RayWorker pid=75830) node1:1:2 [0] NCCL INFO Using network IB",
        "2025-03-01T10:11:12.123456789Z node1:1:2 [0] NCCL INFO Using network IB",
        "  | 2025-03-01T10:11:12.123-07:00 | node1:1:2 [0] NCCL INFO Using network IB",
        "> node1:1:2 [0] NCCL INFO Using network IB",
    ]
    result, others = parse("\n".join(lines))
    assert result.recognized == len(lines)
    assert {e.host for e in result.events} == {"node1"}
    assert not others


def test_two_records_glued_on_one_line_are_both_read() -> None:
    result, _ = parse("node1:1:2 [0] NCCL INFO Using network IB    node2:3:4 [1] NCCL INFO cudaDriverVersion 12080")
    assert result.nccl_lines == 1 and result.recognized == 1
    assert sorted(e.family for e in result.events) == ["cuda_driver", "using_network"]
    assert {e.host for e in result.events} == {"node1", "node2"}


def test_a_launcher_tag_between_glued_records_belongs_to_neither_message() -> None:
    result, _ = parse(
        "[worker0|0]:hostA:11:11 [0] NCCL INFO Using network Socket[worker1|1]:hostA:12:12 [1] NCCL INFO "
        "Using network Socket"
    )
    assert [e.fields["network"] for e in result.events] == ["Socket", "Socket"]


def test_lines_of_one_shape_each_get_their_own_values() -> None:
    lines = [
        f"node{h:02d}:{1000 + r}:{2000 + r} [{r}] NCCL INFO comm 0x55d5c8a3f1e{r} rank {r} nRanks 16 "
        f"nNodes 2 localRanks 8 localRank {r % 8} MNNVL 0"
        for h in (1, 2)
        for r in range(8)
    ]
    result, _ = parse("\n".join(lines))
    assert result.recognized == 16
    ranks = sorted((e.host, int(e.fields["rank"]), e.fields["comm"]) for e in result.events)
    assert ranks[0] == ("node01", 0, "0x55d5c8a3f1e0")
    assert ranks[-1] == ("node02", 7, "0x55d5c8a3f1e7")
    assert [e.pid for e in result.events[:3]] == [1000, 1001, 1002]


def test_pointers_with_other_letters_share_a_shape_but_keep_their_values() -> None:
    lines = [
        "n:1:1 [0] NCCL INFO comm 0x7f3a00000001 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0",
        "n:2:2 [1] NCCL INFO comm 0xabcdef000002 rank 1 nRanks 2 nNodes 1 localRanks 2 localRank 1 MNNVL 0",
    ]
    result, _ = parse("\n".join(lines))
    assert [e.fields["comm"] for e in result.events] == ["0x7f3a00000001", "0xabcdef000002"]


def test_a_keyword_digit_that_differs_is_not_taken_from_the_cache() -> None:
    # "P2P" and "P3P" have the same skeleton; only the first is NCCL's
    result, _ = parse(
        "n:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n"
        "n:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P3P/IPC"
    )
    assert result.recognized == 1
    assert result.unrecognized_count == 1
    assert result.unrecognized[0].line == 2


def test_connections_are_aggregated_by_transport_and_edge() -> None:
    lines = []
    for channel in range(4):
        lines.append(f"n1:10:10 [0] NCCL INFO Channel {channel:02d}/0 : 0[0] -> 1[1] via P2P/CUMEM/read")
        lines.append(
            f"n1:10:10 [0] NCCL INFO Channel {channel:02d}/0 : 0[0] -> 8[0] [send] via NET/IB/{channel % 2}/GDRDMA"
        )
        lines.append(
            f"n1:10:10 [0] NCCL INFO Channel {channel:02d}/0 : 8[0] -> 0[0] [receive] via NET/IB/{channel % 2}"
        )
    result, _ = parse("\n".join(lines))
    assert result.by_transport == {"P2P/CUMEM/read": 4, "NET/IB": 8}
    p2p = [k for k in result.edges if k[2].startswith("P2P")]
    assert len(p2p) == 1 and result.edges[p2p[0]][0] == 4
    receive = {k for k in result.edges if k[3] == "receive"}
    assert all(k[4] == 0 and k[8] is False for k in receive)  # local rank 0, no GDR
    assert {k[6] for k in receive} == {0, 1}  # NIC per edge


def test_network_names_with_spaces_in_connection_lines() -> None:
    result, _ = parse("n:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/AWS Libfabric/0/GDRDMA")
    assert result.by_transport == {"NET/AWS Libfabric": 1}
    assert next(iter(result.edges))[8] is True


def test_bare_message_without_prefix_is_an_nccl_line() -> None:
    result, others = parse("Channel 00/0 : 2[2] -> 3[3] via P2P/direct pointer\nSome prose about GPUs.")
    assert result.recognized == 1
    assert result.by_transport == {"P2P/direct pointer": 1}
    assert others == [(2, "Some prose about GPUs.")]


def test_elided_trees_line_is_understood() -> None:
    event = only_event("h:1:2 [3] NCCL INFO Trees [0] -1/-1/-1->3->2 [1] 2/-1/-1->3->-1 ...")
    assert event.family == "trees"
    assert event.elided


def test_table_row_glued_before_a_record_goes_to_the_other_readers() -> None:
    result, others = parse(
        "     1048576        262144     float     sum      -1    28.06   37.36   56.05      0"
        "node1:1:2 [0] NCCL INFO Using network IB"
    )
    assert result.recognized == 1
    assert others and others[0][1].strip().startswith("1048576")


def test_where_a_glued_record_s_host_begins_is_read_from_its_line_alone() -> None:
    """The number that ends a table row is the row's; the host a line begins with ends the run glued after
    a Trees record; a cut prefix's tid is not part of the next host; and a host whose name ends with a host
    seen before (`llm-train-1`, `n-1`) is kept whole: lines read before decide nothing (a byte range of a
    large file has not seen them)."""
    lines = [
        "n-1:5:5 [0] NCCL INFO Using network IB",
        "2025-03-01T10:11:15.368950036Z llm-train-1:61:90 [1] NCCL INFO Using network IB",
        "[trainer3]:twshared1016:1958:1958 [3] NCCL INFO Using network IB",
        "    4096    256   float   none   -1   15.02   0.27   0.20   0   16.42   0.25   0.19   0"
        "gpu-w01:9920:9955 [0] NCCL INFO Using network IB",
        "gpu-g01:27701:27730 [1] NCCL INFO Trees [0] 2/-1/-1->1->0 [1] 2/-1/-1->1->0"
        "gpu-g01:27702:27731 [2] NCCL INFO Trees [0] 3/-1/-1->2->1 [1] 3/-1/-1->2->1",
        "g183:161264:166015g183:161258:166018 [1] NCCL INFO Using network IB",
    ]
    result, others = parse("\n".join(lines))
    assert [(e.host, e.pid) for e in sorted(result.events, key=lambda e: (e.line, e.pid or 0))] == [
        ("n-1", 5),
        ("llm-train-1", 61),
        ("twshared1016", 1958),
        ("gpu-w01", 9920),
        ("gpu-g01", 27701),
        ("gpu-g01", 27702),
        ("g183", 161258),
    ]
    trees = [e for e in result.events if e.family == "trees"]
    # both channels of each, the first record's last parent (0) its own, not the glued host's
    assert [[c["tree_chain"]["tree_ids"][-1] for c in e.fields["tree_entry"]] for e in trees] == [
        ["0", "0"],
        ["1", "1"],
    ]
    assert others[0][0] == 4 and others[0][1].split()[0] == "4096"  # the table row goes to its reader
    assert others[0][1].endswith(" 0")  # with its last column


def test_ansi_colours_and_crlf_are_ignored() -> None:
    result, _ = parse("\x1b[31mnode1:1:2 [0] NCCL INFO Using network IB\x1b[0m\r")
    assert result.recognized == 1
    assert result.events[0].fields["network"] == "IB"


def test_overlong_line_is_reported_not_parsed() -> None:
    result, _ = parse("node1:1:2 [0] NCCL INFO " + "x" * 70000)
    assert result.unrecognized_count == 1
    assert "too long" in result.unrecognized[0].reason


def test_ray_dedup_tag_is_not_part_of_the_message() -> None:
    event = only_event("(W pid=9) h1:9:9 [2] NCCL INFO NET/IB : No device found. [repeated 15x across cluster]")
    assert event.family == "net_ib"
    assert event.text.endswith("No device found.")


def test_markdown_autolinked_file_names_are_unwrapped() -> None:
    event = only_event("> h1:9:9 [0] NCCL INFO transport/[net.cc:1137](http://net.cc:1137/) -> 6")
    assert event.family == "error_trace"
    assert event.fields["source_location"] == "transport/net.cc:1137"


def test_a_record_cut_after_its_prefix_ends_the_record_before_it() -> None:
    result, _ = parse(
        "h1:1:2 [1] NCCL INFO threadThresholds 8/8/64 | 128/8/64 | 512 | 512h1:3:4 [5] NCCL h1:5:6 [7] NCCL INFO "
        "Connected all rings"
    )
    assert (result.nccl_lines, result.recognized, result.cut_records) == (1, 1, 1)
    assert sorted(result.families) == ["connected", "thread_thresholds"]


def test_a_prefix_followed_by_another_loggers_text_stays_a_fragment() -> None:
    result, _ = parse("h1:1:2 [1] NCCL ININFO 10-24 13:17:20 [custom_all_reduce.py:37] kernel not used")
    assert result.unrecognized_count == 1
    assert "fragment" in result.unrecognized[0].reason


def test_a_record_that_lost_its_beginning_up_to_ccl_info_is_still_typed() -> None:
    event = only_event("(W pid=9) CCL INFO Using network IB")
    assert (event.level, event.family, event.host) == ("INFO", "using_network", None)


# Damage the property tests (tests/test_mutations.py) found: a terminal colour code inside a number field.
def test_a_colour_code_inside_a_prefix_number_is_dropped_from_its_value() -> None:
    result, _ = parse("gpu-a1:4\x1b[1;32m411:4411 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\x1b[0m\n")
    (event,) = result.events
    assert (event.host, event.pid, event.tid) == ("gpu-a1", 4411, 4411)


def test_colour_codes_and_nul_bytes_inside_a_field_are_dropped_from_every_line_of_its_shape() -> None:
    """`grep --color` marks a match inside a value; the first line of a shape is decoded field by field,
    the others by the shape's decoder (which slices plain lines): each value comes out as printed."""
    lines = [
        "h:1:2 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0",
        "h:3:4 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to e\x1b[01;31m\x1b[Kth\x1b[m\x1b[K1",
        "h:5:6 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth\x002",
        "h:7:8 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth3",
    ]
    lines += [line.replace("h:", "g:").replace("1:2", "9:9") for line in lines]  # each shape once more
    lines += [line[:-1] + "7" for line in lines]
    result, _ = parse("\n".join(lines))
    values = [event.fields["env_value"] for event in sorted(result.events, key=lambda e: e.line)]
    assert values == [f"eth{n}" for n in (0, 1, 2, 3, 0, 1, 2, 3)] + ["eth7"] * 8


def test_a_colour_code_inside_a_connection_rank_is_dropped_from_its_value() -> None:
    lines = [f"h:1:2 [0] NCCL INFO Channel {c:02d}/0 : 0[0] -> 1[1] via P2P/IPC\n" for c in range(40)]
    lines.append("h:1:2 [0] NCCL INFO Channel 40/0 : 0[0] -> 1\x1b[1;32m[1] via P2P/IPC\n")
    lines.append("h:1:2 [0] NCCL INFO Channel 41/0 : 0[0] -> \x1b[1;32m1[1] via P2P/IPC\n")
    result, _ = parse("".join(lines))
    assert result.recognized == 42
    assert result.families["connection"] == 42


def test_a_ray_tag_before_a_colour_reset_is_still_a_trailer() -> None:
    event = only_event("h:1:2 [0] NCCL INFO Using network Socket [repeated 7x across cluster]\x1b[0m\n")
    assert event.fields["network"] == "Socket"


def test_nul_bytes_inside_a_line_are_no_part_of_it() -> None:
    event = only_event("h:1:2 [0] NCCL INFO Using network IB\x00\x00\n")
    assert event.fields["network"] == "IB"


def test_an_empty_pid_or_tid_keeps_the_host() -> None:
    event = only_event("gpu-a1::5120 [5] NCCL INFO Using network IB\n")
    assert (event.host, event.pid, event.tid) == ("gpu-a1", None, 5120)
    event = only_event("gpu-a1:4412: [5] NCCL INFO Using network IB\n")
    assert (event.host, event.pid, event.tid) == ("gpu-a1", 4412, None)


def test_many_connection_lines_with_an_empty_host_are_read_together() -> None:
    lines = "".join(f":1:2 [0] NCCL INFO Channel {c:02d}/0 : 0[0] -> 1[1] via P2P/IPC\n" for c in range(64))
    result, _ = parse(lines)
    assert result.recognized == 64 and result.families["connection"] == 64


def test_lines_that_differ_only_in_values_reach_the_grammar_a_handful_of_times() -> None:
    rng = random.Random(7)
    hosts = [
        f"{rng.choice(['gpu', 'node', 'dgx'])}-{rng.choice('abcdefghxyz')}{rng.randint(0, 99):02d}" for _ in range(40)
    ]
    funcs = ["AllReduce", "AllGather", "ReduceScatter", "Broadcast"]
    lines = [
        coll_line(
            rng,
            f"{rng.choice(hosts)}:{rng.randint(900, 99999)}:{rng.randint(900, 99999)} [{rng.randrange(8)}]",
            f"{rng.choice(funcs)}: opCount {n // 64:x}",
            f"count {rng.choice([1, 1024, 262144, 33554432])} datatype {rng.randrange(10)} op {rng.randrange(4)}",
            (40, 47),
        )
        for n in range(10_000)
    ]
    others: list[tuple[int, str]] = []
    parser = NcclLogParser(lambda n, t: others.append((n, t)))
    parser.feed_block("\n".join(lines).encode(), 1)
    result = parser.result
    assert (result.nccl_lines, result.recognized, dict(result.families)) == (10_000, 10_000, {"coll_call": 10_000})
    assert not others
    # host names, pid widths, hex opCounts and pointers vary on every line; the wording does not
    assert parser.lark_parses <= 12, parser.lark_parses


def test_coll_lines_read_in_many_blocks_are_read_as_in_one() -> None:
    """A block's COLL lines whose widths a coarse template already reads go to it from the block's first
    pass (those of new widths in the first block are found line by line): block by block, the per-rank
    counts and last opCounts are those of one block, and the program's own lines between them stay
    other lines."""
    rng = random.Random(23)
    origins = [
        f"gpu-{n:0{rng.choice([2, 3])}d}:{rng.randint(100, 9_999_999)}:{rng.randint(100, 999)} [{n % 8}]"
        for n in range(64)
    ]
    lines = []
    for n in range(6_000):
        if n % 97 == 5:
            lines.append(f"step {n} | loss {rng.random():.4f} | lr 3e-4")
            continue
        count = rng.choice([1, 4096, 262144, 25165824])
        lines.append(
            coll_line(
                rng,
                rng.choice(origins),
                f"{rng.choice(['AllReduce', 'ReduceScatter'])}: opCount {n:x}",
                f"count {count} datatype {rng.randrange(10)} op 0",
                (rng.choice([40, 44]), 47),
            )
        )

    def read(block_lines: int) -> tuple[dict, dict, int, list[int]]:
        others: list[tuple[int, str]] = []
        parser = NcclLogParser(lambda n, t: others.append((n, t)))
        for at in range(0, len(lines), block_lines):
            parser.feed_block("\n".join(lines[at : at + block_lines]).encode(), at + 1)
        result = parser.result
        calls = {key: (count, op) for key, (count, op, _) in result.coll_calls.items()}
        return calls, dict(result.families), result.recognized, [n for n, _ in others]

    whole, blocks = read(len(lines)), read(150)
    assert whole == blocks
    assert whole[1] == {"coll_call": 6_000 - 62} and whole[3] == [n + 1 for n in range(6_000) if n % 97 == 5]


def test_an_opcount_that_looks_decimal_or_like_a_word_does_not_make_a_template_of_its_own() -> None:
    """opCount is printed in hex: `7` and `d` are values of one field. The template learnt from the first
    line must take hex digits in that column whatever its own value looked like; else each letter (`d`
    reads as a word) needs a template of its own, per collective of the same length (AllGather and
    Broadcast share a word skeleton), and once a word skeleton has its fill of templates, every further
    line is parsed on its own (its pointers differ)."""
    rng = random.Random(13)
    ops = [rng.randrange(16) for _ in range(2_000)]
    origins = [
        f"node{n % 90 + 10}:{rng.randint(10000, 99999)}:{rng.randint(10000, 99999)} [{n % 8}]" for n in range(2_000)
    ]
    calls = [f"{rng.choice(['AllGather', 'Broadcast'])}: opCount {op:x}" for op in ops]
    parser = fed(
        [coll_line(rng, o, c, "count 4096 datatype 7 op 0", (44, 45)) for o, c in zip(origins, calls, strict=True)]
    )
    result = parser.result
    assert (result.recognized, dict(result.families)) == (2_000, {"coll_call": 2_000})
    assert parser.shapes_made <= 4, parser.shapes_made  # one per collective, and the last line (_note_last)
    for (_, pid, _), (calls, op, event) in result.coll_calls.items():
        assert calls == 1 and op == ops[event.line - 1] == int(event.fields["op_count"], 16)
        assert event.pid == pid


def test_graph_channels_whose_bus_ids_look_decimal_or_not_share_a_template() -> None:
    """A graph channel lists topology nodes (`GPU/0-18000`, `GPU/0-2a000`) in an order that turns with
    the channel: their ids are hex, whether or not the exemplar's had a letter in that place."""
    bus_ids = ["18000", "2a000", "3a000", "5d000", "9a000", "ab000", "ba000", "db000"]
    rng = random.Random(17)

    def channel_line(dev: int, channel: int) -> str:
        hops = " ".join(f"GPU/0-{bus_ids[(channel + k) % 8]}" for k in range(8))
        origin = f"node{rng.randint(10, 99)}:{rng.randint(10000, 99999)}:{rng.randint(10000, 99999)} [{dev}]"
        return f"{origin} NCCL INFO {channel:2d} : NET/0-{channel % 4} {hops} NET/0-{channel % 4}"

    parser = fed([channel_line(n % 8, rng.randrange(16)) for n in range(1_000)])
    assert parser.shapes_made <= 4, parser.shapes_made
    assert parser.result.recognized == parser.result.families["graph_channel"] == 1_000


def test_warnings_naming_a_peer_host_share_one_template() -> None:
    """A failing job's ranks each warn about the peer that went away (`... remote peer node096<42039>`):
    the peer's name is part of the message, its digits vary like any number's. One template reads
    them all; it is not learnt again and again for lines it cannot read."""
    rng = random.Random(19)
    lines = [
        f"node{rng.randint(100, 999)}:{rng.randint(10000, 99999)}:{rng.randint(10000, 99999)} [{n % 8}] "
        f"misc/socket.cc:51 NCCL WARN socketProgress: Connection closed by remote peer "
        f"node{rng.randint(100, 999)}<{rng.randint(10000, 65535)}>"
        for n in range(2_000)
    ]
    book = ShapeBook()
    parser = fed(lines, book)
    assert parser.result.recognized == 2_000
    read = sorted((e.line, e.fields["connection_closed"]["peer"]) for e in parser.result.events)
    assert read == [(n + 1, line.rsplit(" ", 1)[1]) for n, line in enumerate(lines)]
    assert max(len(templates) for templates in book.templates.values()) == 1


def test_trace_lines_whose_numbers_vary_reach_the_grammar_a_handful_of_times() -> None:
    """A TRACE record's message is one free-text field: its numbers (sizes, channels, pointers, the
    elapsed time before the function) vary from line to line, its words do not."""
    rng = random.Random(11)
    messages = [
        lambda: f"Posted send of {rng.randint(1, 1 << 24)} bytes on channel {rng.randrange(32)}",
        lambda: f"Allocated {rng.randint(1, 1 << 30)} bytes at 0x{rng.randrange(1 << 40, 1 << 47):x}",
        lambda: f"Connected peer {rng.randrange(1024)} channel {rng.randrange(32)}",
    ]
    functions = ["ncclProxyPost:312", "ncclCudaCalloc:96", "ncclTransportP2pSetup:140"]
    lines = []
    for _ in range(3_000):
        kind = rng.randrange(3)
        lines.append(
            f"node{rng.randint(1, 128):03d}:{rng.randint(1000, 99999)}:{rng.randint(1000, 99999)} "
            f"[{rng.randrange(8)}] {rng.uniform(0, 5000):.6f} {functions[kind]} NCCL TRACE {messages[kind]()}"
        )
    parser = fed(lines)
    assert (parser.result.recognized, dict(parser.result.families)) == (3_000, {"trace": 3_000})
    assert parser.lark_parses <= 12, parser.lark_parses


def test_trees_lines_where_ranks_lack_a_parent_or_child_share_one_parse() -> None:
    """A rank with no parent or child prints -1 in its place (`[3] 12/-1/-1->11->-1`): where the -1s
    fall changes from rank to rank and channel to channel; each such line is still read with the fields
    of the one line the grammar read, the -1s included."""
    rng = random.Random(5)

    def node() -> int:
        return rng.choice([-1, rng.randrange(1024)])

    lines, expected = [], []
    for n in range(400):
        chains = [(node(), node(), node(), rng.randrange(1024), node()) for _ in range(16)]
        entries = " ".join(f"[{c}] {a}/{b}/{d}->{r}->{up}" for c, (a, b, d, r, up) in enumerate(chains))
        origin = f"node{n % 128:03d}:{rng.randint(100, 99999)}:{rng.randint(100, 99999)} [{n % 8}]"
        lines.append(f"{origin} NCCL INFO Trees {entries}")
        expected.append(chains)
    parser = fed(lines)
    assert (parser.result.recognized, dict(parser.result.families)) == (400, {"trees": 400})
    assert parser.lark_parses <= 4, parser.lark_parses
    events = sorted(parser.result.events, key=lambda e: e.line)
    for event, chains in zip(events, expected, strict=True):
        read = [entry["tree_chain"]["tree_ids"] for entry in event.fields["tree_entry"]]
        assert read == [[{"sint": [str(a), str(b), str(d)]}, str(r), str(up)] for a, b, d, r, up in chains]


def test_a_shape_moved_onto_a_line_of_other_value_widths_is_the_one_the_grammar_reads_there() -> None:
    """A line whose values differ in width from a parsed line's is read with that parse moved word by word
    (shapes.py): every span of every record (its prefix, its fields, a table row glued before it) lands
    where the grammar itself puts it on that line."""
    rng = random.Random(23)

    def trees() -> str:
        chains = " ".join(
            f"[{c}] {rng.choice([-1, rng.randrange(2048)])}/-1/{rng.randrange(2048)}->{rng.randrange(2048)}->"
            f"{rng.choice([-1, rng.randrange(2048)])}"
            for c in range(32)
        )
        return f"Trees {chains}"

    messages = [
        trees,
        lambda: (
            f"Channel {rng.randrange(64):02d}/{rng.randrange(2)} : {rng.randrange(4096)}[{rng.randrange(8)}] -> "
            f"{rng.randrange(4096)}[{rng.randrange(8)}] [send] via NET/IB/{rng.randrange(8)}/GDRDMA/Shared"
        ),
        lambda: (
            f"Ring {rng.randrange(64):02d} : {rng.randrange(4096)} -> {rng.randrange(4096)} -> {rng.randrange(4096)}"
        ),
        lambda: (
            f"comm 0x{rng.randrange(1 << 40):x} rank {rng.randrange(4096)} nRanks {rng.randrange(1, 4096)} "
            f"nNodes {rng.randrange(1, 512)} localRanks 8 localRank {rng.randrange(8)} MNNVL 0"
        ),
    ]
    for n, make in enumerate(messages):
        lines = []
        for _ in range(30):  # the words stay (one kind of host name, a launcher's tag or none); their widths change
            tag = f"[1,{rng.randrange(4096)}]<stdout>:" if n % 2 else ""
            origin = f"{rng.choice(['node', 'gpua', 'dgx'])}{rng.randrange(1, 999)}:{rng.randrange(1, 10**7)}"
            lines.append(f"{tag}{origin}:{rng.randrange(1, 10**7)} [{rng.randrange(8)}] NCCL INFO {make()}")
        parser = NcclLogParser(lambda n, t: None)
        exemplar = parser._learn(lines[0].encode())
        assert exemplar.recognized, lines[0]
        mover = ShapeMover(exemplar.exemplar, exemplar.kind)
        moved_any = False
        for line in lines[1:]:
            raw = line.encode()
            if shape_key(raw) != shape_key(exemplar.exemplar):
                continue  # another number of words: not a line this shape can be moved onto
            moved = _moved_shape(mover, exemplar, raw)
            parsed = parser._learn(raw)
            assert moved is not None, line
            moved_any = True
            assert [(r.span, r.level, r.family, r.prefix, r.fields) for r in moved.records] == [
                (r.span, r.level, r.family, r.prefix, r.fields) for r in parsed.records
            ], line
            assert (moved.lead, moved.recognized, moved.exemplar) == (parsed.lead, parsed.recognized, raw)
        assert moved_any, make


def _coll_lines(rng: random.Random, n: int, ranks: list[tuple[str, int, str]]) -> tuple[list[str], dict]:
    """COLL lines of a few ranks whose every value changes width from line to line (launcher tags,
    opCounts, counts, pointers), and what a line-by-line reader makes of them per rank."""
    funcs = ["AllReduce", "AllGather", "ReduceScatter", "Broadcast"]
    expected: dict[tuple[str, int, str], list] = {}
    lines = []
    for k in range(n):
        host, pid, comm = rng.choice(ranks)
        op = rng.choice([k // 50, rng.randrange(4096)])
        pointers = [f"0x{rng.randrange(1 << 20, 1 << 47):x}" for _ in range(3)]
        lines.append(
            f"[1,{rng.randrange(2048)}]<stdout>:{host}:{pid}:{pid} [{rng.randrange(8)}] NCCL INFO "
            f"{rng.choice(funcs)}: opCount {op:x} sendbuff {pointers[0]} recvbuff {pointers[1]} "
            f"count {rng.randint(1, 1 << 30)} datatype {rng.randrange(10)} op {rng.randrange(4)} "
            f"root 0 comm {comm} [nranks={rng.choice([8, 64, 1024])}] stream {pointers[2]}"
        )
        entry = expected.setdefault((host, pid, comm), [0, -1, 0])
        entry[0] += 1
        if op >= entry[1]:
            entry[1:] = [op, k + 1]
    return lines, expected


def test_coll_lines_of_every_width_are_learnt_a_handful_of_times_and_summed_exactly() -> None:
    """Every COLL line here has its own combination of widths: the per-rank summary must still be the
    line-by-line one (calls, highest opCount, the latest line holding it), without learning a shape
    per combination (parse/coarse.py)."""
    rng = random.Random(3)
    ranks = [
        (f"ip-10-4-{h}-{rng.randrange(256)}", rng.randint(100, 9_999_999), f"0x{rng.randrange(1 << 44):x}")
        for h in range(16)
    ]
    lines, expected = _coll_lines(rng, 20_000, ranks)
    parser = NcclLogParser(lambda n, t: None)
    for start in range(0, len(lines), 5_000):  # several blocks, as files are read
        parser.feed_block("\n".join(lines[start : start + 5_000]).encode(), start + 1)
    result = parser.result
    assert (result.nccl_lines, result.recognized, dict(result.families)) == (20_000, 20_000, {"coll_call": 20_000})
    got = {key: [calls, op, event.line] for key, (calls, op, event) in result.coll_calls.items()}
    assert got == {key: value for key, value in expected.items()}
    for key, (_, op, event) in result.coll_calls.items():  # the evidence line reads as that line
        assert (event.host, event.pid, event.fields["comm"], int(event.fields["op_count"], 16)) == (*key, op)
        assert event.text == lines[event.line - 1]
    assert parser.shapes_made <= 40, parser.shapes_made


def test_a_line_like_a_coll_line_but_for_one_word_is_not_read_as_one() -> None:
    """The coarse templates check every keyword, whatever the widths around it."""
    rng = random.Random(5)
    lines, _ = _coll_lines(rng, 3_000, [("node7", 4242, "0xabc")])
    odd = lines[2_500].replace(" recvbuff ", " recvbuf ").replace(" count ", " cnt ")
    lines[2_500] = odd
    parser = fed(lines)
    result = parser.result
    assert result.families["coll_call"] == 2_999
    assert result.coll_calls[("node7", 4242, "0xabc")][0] == 2_999


def test_the_coarse_templates_of_one_kind_share_one_expression_that_reads_their_lines_only() -> None:
    """coll_scan.py: the templates of the four collectives differ in one keyword, so one expression
    reads them all (and says which); it reads other widths of the same lines (a host name of more
    words is another coarse key: another expression), and refuses a line whose keyword, number or
    punctuation no template has."""
    rng = random.Random(13)
    book = ShapeBook()
    lines, _ = _coll_lines(rng, 3_000, [("node7", 4242, "0xabc"), ("node12", 77, "0xdef12")])
    fed(lines, book)
    scan = CollScan(t for known in book.coarse_templates.values() for t in known)
    assert len(scan.alternatives) == 1
    (alternative,) = scan.alternatives
    assert sorted(alternative.templates) == [b"AllGather", b"AllReduce", b"Broadcast", b"ReduceScatter"]
    good = (
        "[1,1999]<stdout>:gpuzz9:123456:123456 [7] NCCL INFO ReduceScatter: opCount 1f2e sendbuff 0x7f00aa "
        "recvbuff 0xbeef count 99999999 datatype 3 op 1 root 0 comm 0x1234abcd [nranks=1024] stream 0x55"
    )
    refused = [
        good.replace("ReduceScatter:", "ReduceScattr:"),  # a keyword no template has
        good.replace("count 99999999", "count 999g9999"),  # a letter in a decimal number
        good.replace("sendbuff 0x7f00aa", "sendbuff 0x7f00ag"),  # a letter that is no hex digit
        good.replace("sendbuff 0x7f00aa", "sendbuff 7f00aa"),  # a pointer without its 0x
        good.replace("[nranks=1024]", "[nranks:1024]"),  # other punctuation
        good + " extra",  # one word more
    ]
    rows = scan.rows("\n".join([good, *refused, "", good]).encode())
    assert len(rows) == 9
    assert [bool(row[0]) for row in rows] == [True] + [False] * 7 + [True]
    groups = alternative.groups
    assert [rows[0][groups[name]] for name in ("host", "pid", "op_count", "comm")] == [
        b"gpuzz9",
        b"123456",
        b"1f2e",
        b"0x1234abcd",
    ]
    assert rows[0][alternative.variant] == b"ReduceScatter"


def test_templates_that_differ_in_two_keywords_get_an_expression_each() -> None:
    """An expression that let two keywords vary at once would read combinations no template reads
    (here INFO with Broadcast, made from a learnt template by changing its exemplar's words)."""
    rng = random.Random(17)
    book = ShapeBook()
    lines = [
        coll_line(rng, "node1:100:100 [0]", f"{call}: opCount {k:x}", "count 4 datatype 7 op 0", (20, 48))
        for k, call in enumerate(["AllReduce", "Broadcast"] * 200)
    ]
    fed(lines, book)
    learnt = next(t for known in book.coarse_templates.values() for t in known)
    info_allreduce = lines[0].encode()
    warn_broadcast = lines[1].replace("INFO", "WARN").encode()
    pair = [
        CoarseTemplate(None, line, learnt.classes, learnt.fields, None) for line in (info_allreduce, warn_broadcast)
    ]
    scan = CollScan(pair)
    assert len(scan.alternatives) == 2
    crossed = lines[1].encode()  # INFO Broadcast: no template has it
    rows = scan.rows(b"\n".join([info_allreduce, warn_broadcast, crossed]))
    assert [bool(row[0]) for row in rows] == [True, True, False]
    same_level = CollScan([pair[0], CoarseTemplate(None, crossed, learnt.classes, learnt.fields, None)])
    assert len(same_level.alternatives) == 1  # one keyword apart: one expression


def test_hex_values_read_with_and_without_0x_and_hold_at_the_top_of_int64() -> None:
    texts = np.array([b"1a", b"0x1a", b"FF", b"0", b"7fffffffffffffff"])
    assert hex_values(texts).tolist() == [26, 26, 255, 0, (1 << 63) - 1]
    assert hex_values(np.array([b"0x" + b"f" * 20])).tolist() == [(1 << 63) - 1]


def test_a_range_result_pickled_as_columns_gives_back_every_record_in_its_place() -> None:
    """A worker's LogResult sends its records as columns; the records read by a coarse template (another
    kind of Event) go whole and come back where they were."""
    rng = random.Random(7)
    lines = [
        "node1:100:100 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>",
        "node1:100:100 [0] NCCL INFO cudaDriverVersion 12040",
        *(
            coll_line(
                rng,
                f"node1:{100 + k % 4}:{100 + k % 4} [{k % 4}]",
                f"AllReduce: opCount {k:x}",
                "count 1024 datatype 7 op 0",
                (20, 48),
            )
            for k in range(400)
        ),
        "node1:101:101 [1] NCCL INFO NCCL_IB_DISABLE set by environment to 1.",
    ]
    result = fed(lines).result
    coarse = [entry[2] for entry in result.coll_calls.values() if type(entry[2]) is not Event]
    assert coarse, "no COLL line was read by a coarse template: widen the pointers"
    result.events.insert(1, coarse[0])
    back = pickle.loads(pickle.dumps(result))
    assert [type(e) for e in back.events] == [type(e) for e in result.events]
    assert [(e.line, e.raw, e.family, e.fields, e.host, e.pid) for e in back.events] == [
        (e.line, e.raw, e.family, e.fields, e.host, e.pid) for e in result.events
    ]
    assert back.families == result.families and back.coll_calls.keys() == result.coll_calls.keys()


def test_one_field_read_alone_is_the_field_the_whole_record_decodes() -> None:
    rng = random.Random(3)
    lines = [
        coll_line(rng, "node1:100:100 [0]", "Broadcast: opCount 2a", "count 96 datatype 9 op 0", (30, 47)),
        "node1:100:100 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE ; OOB eth0:10.0.0.1<0>",
        "node1:100:100 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read",
    ]
    parser = fed(lines)
    events = [*parser.result.events, *(entry[2] for entry in parser.result.coll_calls.values())]
    assert len(events) >= 2
    for event in events:
        alone = {name: event.field(name) for name in event.shape.fields}  # before any whole decoding
        assert alone == event.fields, event.raw
        assert event.field("no_such_field") is None


def test_2_30_config_overrides_and_net_device_counts_are_typed_with_their_fields() -> None:
    """Issue 43 (families the census of NCCL 2.28-2.30 lists that the grammar did not know): a communicator
    setting overridden by its variable, and the NICs per rank compared across the communicator."""
    origin = "h100-r07:51820:51870 [0]"
    event = only_event(f"{origin} NCCL INFO Comm config maxCTAs reset to NCCL_MAX_CTAS=16")
    assert event.family == "comm_config_reset"
    assert event.fields == {"config_name": "maxCTAs", "env_name": "NCCL_MAX_CTAS", "env_value": "16"}
    event = only_event(f"{origin} NCCL INFO Comm config graphUsageMode reset to 1 by NCCL_GRAPH_MIXING_SUPPORT=0")
    assert event.fields["reset_value"] == "1" and event.fields["env_name"] == "NCCL_GRAPH_MIXING_SUPPORT"
    event = only_event(f"{origin} NCCL INFO Local CollNet device counts across ranks: min 0 max 2")
    assert event.family == "net_device_counts"
    assert event.fields == {"net_kind": "CollNet", "min_count": "0", "max_count": "2"}
    event = only_event(
        f"{origin} init.cc:1339 NCCL WARN Detected mixed local Net device counts across ranks (min 2, max 4). "
        "Set NCCL_IGNORE_NET_MISMATCH=1 to continue."
    )
    assert (event.family, event.level) == ("net_device_mismatch", "WARN")
    assert (event.fields["min_count"], event.fields["max_count"]) == ("2", "4")


def test_rccl_forms_are_typed_with_their_fields() -> None:
    """Issue 43: what newer RCCL builds print beside NCCL's messages (grammars/nccl_log/65_rccl_and_old_forms.lark,
    fixtures/nccl/rccl_2_27_two_gpus_xgmi.log): its version with the build apart, the communicator it ends
    Trees and connection lines with, the extra fields of its COLL lines, its own messages."""
    origin = "mi300-n07:40211:40251 [0]"
    event = only_event(f"{origin} NCCL INFO RCCL version : 2.27.7-HEAD:4c1f0aa")
    assert event.family == "version" and event.fields == {"nccl_version": "2.27.7", "rccl_build": "-HEAD:4c1f0aa"}
    event = only_event(f"{origin} NCCL INFO Hipruntime version: 70253211, firmware version: 177")
    assert event.fields == {"hip_runtime_version": "70253211", "firmware_version": "177"}
    event = only_event(
        f"{origin} NCCL INFO [node_id = 2; gpu_id = 48862; unique_id = 731; location_id = 6656; bdf = 6656; "
        "domain = 0; partition = 0], "
    )
    assert event.family == "rccl_gpu_node" and event.fields["gpu_id"] == "48862" and event.fields["bdf"] == "6656"
    event = only_event(
        f"{origin} NCCL INFO comm:0x55e1c0a01f0, nRanks:2, nNodes:1, coll channels:2 collnet channels:0, "
        "nvls channels:0, p2p channels:2, p2p channels per peer:1, shiftSize:0"
    )
    assert event.family == "rccl_comm_channels"
    channels = (event.fields["comm"], event.fields["coll_channels"], event.fields["p2p_per_peer"])
    assert channels == ("0x55e1c0a01f0", "2", "1")
    event = only_event(f"{origin} NCCL INFO Trees [0] -1/-1/-1->0->1 comm 0x55e1c0a01f0 nRanks 02 busId a000")
    assert event.family == "trees" and event.fields["rccl_comm_tail"] == {
        "comm": "0x55e1c0a01f0", "nranks": "02", "bus_id": "a000"
    }  # fmt: skip
    for line, family in [
        ("Kernel version 7.0", "rccl_kernel_version"),
        ("RCCL: Detected 0 IB devices, primary type: 0 (count: 0)", "rccl_ib_devices"),
        ("                + XGMI[64.0] - DEV/0-1a000", "topo_link"),
        ("RCCL Tuning index:0", "rccl_tuning_index"),
        ("GFX9 cheap fence is OFF", "rccl_gfx9_fence"),
        ("[RINGS]  00->01 01->00", "rccl_rings"),
        ("post-adjustment based on threadThreshold:64 nBytes:1048576 nc:2", "rccl_thread_adjustment"),
        ("Memory used = 201326592", "rccl_memory_used"),
        ("Could not open libibverbs.so", "ibverbs_missing"),
    ]:
        assert only_event(f"{origin} NCCL INFO {line}").family == family, line
    # NCCL's own COLL line with RCCL's acc pointer and task fields: read as COLL calls (a bulk family)
    result = fed(
        [
            f"{origin} NCCL INFO AllReduce: opCount {k:x} sendbuff 0x7f3a10400000 recvbuff 0x7f3a10400000 acc (nil) "
            f"count 262144 datatype 7 op 0 root 0 comm 0x55e1c0a01f0 [nranks=2] stream 0x55e1c0b0200 task {k} "
            "globalrank 0"
            for k in range(3)
        ]
    ).result
    assert result.unrecognized_count == 0 and sum(entry[0] for entry in result.coll_calls.values()) == 3


def test_a_message_the_census_knows_is_typed_with_the_census_s_fields() -> None:
    """Issue 43: an INFO message the hand-written grammar does not know is read by grammars/nccl_census.lark
    (tools/census): a family named after its words, fields named as in the census, 2.30.7's INFO_LOC call site
    as the record's location; a message no census holds stays an unknown message."""
    origin = "[2026-11-02 16:20:12] gke-a3-node-2:812:1204 [0]"
    event = only_event(f"{origin} NCCL INFO NET/FastSocket : Connected after 12 retries.")
    assert event.family == "msg_net_fastsocket_connected_after_retries" and event.fields == {"after": "12"}
    event = only_event(f"{origin} NCCL INFO P2P not supported between GPU0 and GPU4")
    assert event.fields == {"gpu": "0", "gpu_2": "4"}
    line = f"{origin} NCCL INFO init.cc:1702 (ncclCommInitRankFunc) netName buffer Size 256 pointer 0x55c01e2a41d0"
    event = only_event(line)
    assert event.family == "msg_netname_buffer_size_pointer"
    assert event.fields == {"size": "256", "pointer": "0x55c01e2a41d0"}
    assert event.location == "init.cc:1702 (ncclCommInitRankFunc)"
    result = fed([f"{origin} NCCL INFO Frobnicated the widget cache 3 times"]).result
    assert result.unrecognized_count == 1 and result.unrecognized[0].reason == "unknown message"


def test_nccl_s_last_warn_relayed_on_a_framework_s_line_is_a_bare_record_behind_its_lead() -> None:
    """Issue 43: PyTorch's `Last error:` and XLA's `Last NCCL warning(error) log entry (may be unrelated) '...'`
    relay NCCL's last WARN on the framework's own line (with srun -l's label when the line breaks were lost):
    the message is read with the grammar; the framework's words before it go to the other readers."""
    parser = NcclLogParser(lambda n, t: None)
    line = (
        "10: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1331, unhandled system error"
        " (run with NCCL_DEBUG=INFO for details), NCCL version 2.18.5 10: Last error: 10: socketStartConnect:"
        " Connect to 127.0.0.1<45069> failed : Software caused connection abort"
    )
    shape = parser.shape_of(line.encode())
    assert [r.family for r in shape.records] == ["socket_failure"] and shape.records[0].level == "BARE"
    assert shape.lead is not None and line[shape.lead[0] : shape.lead[1]].endswith("Last error:")
    xla = (
        "E0311 external/xla/xla/service/gpu/nccl_utils.cc:305: NCCL operation ncclCommInitRank(&comm, nranks, id,"
        " rank) failed: unhandled system error. Last NCCL warning(error) log entry (may be unrelated)"
        " 'socketTryAccept: Accept failed: Bad file descriptor'."
    )
    assert [r.family for r in parser.shape_of(xla.encode()).records] == ["socket_failure"]
    plain = "RuntimeError: NCCL error: unhandled system error. Last error: something NCCL never printed"
    assert parser.shape_of(plain.encode()).records == []


def test_nccl_2_3_gdr_ring_order_and_receive_only_net_lines_are_typed() -> None:
    """Issue 43: 2.3's GDR lines name the HCA and give their reason in words, its ring order begins `Ring`, and its
    NET connection lines are printed by the receiving rank only, untagged (`peer -> me`)."""
    from ncclscope.case.read import read_case

    from conftest import REPO

    case = read_case([str(REPO / "fixtures/nccl/v2_3_two_hosts_gdr_off.log")], jobs=1).case
    assert case.sources[0].unrecognized == []
    assert [(g.host, g.scope, g.hca_name, g.reason, g.distance, g.limit) for g in case.gdr] == [
        ("gpu-a1", "hca", "mlx4_0", "no module", None, None),
        ("gpu-b1", "pair", "mlx4_0", None, 4, 2),
    ]
    assert sorted((e.host, e.from_rank, e.direction) for e in case.edges) == [
        ("gpu-a1", 0, "receive"),
        ("gpu-b1", 1, "receive"),
    ]


def test_a_plugin_banner_stamped_with_its_own_clock_names_the_plugin_and_its_release() -> None:
    from ncclscope.case.read import read_case

    from conftest import REPO

    case = read_case([str(REPO / "fixtures/nccl/gcp_tcpxo_fastrak_banner.log")], jobs=1).case
    assert case.sources[0].unrecognized == []
    assert {(p.host, p.net_plugin) for p in case.processes if p.host} == {("a3mega-7", "FasTrak 1.0.6")}
