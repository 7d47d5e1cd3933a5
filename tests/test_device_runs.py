"""What our own runs on a lent H100 machine printed (fixtures/device/, NCCL 2.28.9, nccl-tests 2.19.6,
PyTorch 2.11) reads and judges as an expert would: every line understood, and no false alarm about a
1-GPU machine (five collectives in five processes, no NVLink, no RDMA device)."""

from __future__ import annotations

from pathlib import Path

from ncclscope.case.read import read_case

from conftest import REPO, analysis_of, findings_of, only_finding, run_cli

DEVICE = "fixtures/device"
NCCL_TESTS_RUN = f"{DEVICE}/h100_run_nccl_tests"
TORCH_RUN = f"{DEVICE}/h100_run_torch"
COLL_ON_STDOUT = f"{DEVICE}/coll_lines_on_stdout_all_reduce.txt"
TWO_RANKS_ONE_GPU = f"{DEVICE}/two_ranks_one_gpu_torchrun.log"
HANG = f"{DEVICE}/hang"
PREFIX = "[2026-11-24 08:03:46] vm:1254:1254 [0] NCCL INFO "


def _source(path: str | Path):  # type: ignore[no-untyped-def]
    return read_case([str(REPO / path) if not Path(path).is_absolute() else str(path)], jobs=1).case.sources[0]


# ------------------------------------------------------------------------------------ the run directories
def test_a_one_gpu_run_directory_raises_no_false_alarm() -> None:
    for run in (NCCL_TESTS_RUN, TORCH_RUN):
        codes = {f.code for f in analysis_of(run).findings}
        # each collective ran alone on purpose, eth0 is listed once per process, the dump files are ours,
        # and a communicator of one rank has no connections to miss
        assert not codes & {"BW004", "NET003", "ENV001", "EVD001"}, (run, codes)
        assert "TOPO006" in codes  # the VM does hide its PCI tree from NCCL


def test_a_one_gpu_run_directory_exits_0_and_says_one_rank_has_nothing_to_judge() -> None:
    result = run_cli("analyze", NCCL_TESTS_RUN)
    out = result.stdout.decode()
    assert result.returncode == 0, out
    assert "sendrecv on 1x H100-SXM, 1 host with 1 rank, up to 1 GiB: nothing leaves the GPU" in out
    assert "busbw repeats algbw (factor 1)" in out
    assert "all_gather on 1x H100-SXM, 1 host with 1 rank" in out and "factor (n-1)/n with n = 1" in out


def test_every_nccl_2_28_line_of_the_run_is_understood_and_none_is_called_cut() -> None:
    source = _source(f"{NCCL_TESTS_RUN}/nccl.vm.1254.log")
    assert source.unrecognized == []
    assert source.truncated == [] and not source.ends_cut  # it ends in "ENV/Plugin: Closing env plugin ..."


# ------------------------------------------------------------------------------------ NCCL's own line cut
def _trees(channels: int) -> str:
    return PREFIX + "Trees" + "".join(f" [{c}] -1/-1/-1->0->-1" for c in range(channels))


def test_a_line_nccl_cut_at_its_1023_byte_buffer_is_read_up_to_the_cut(tmp_path: Path) -> None:
    cut = _trees(64)[:1023]
    assert cut.endswith("[55") or cut[-1] != "1"  # the cut falls inside an entry
    log = tmp_path / "trees.log"
    log.write_text(cut + "\n")
    assert _source(log).unrecognized == []


def test_a_damaged_line_shorter_than_nccls_buffer_is_not_taken_for_nccls_cut(tmp_path: Path) -> None:
    log = tmp_path / "trees.log"
    log.write_text(_trees(20) + " [20] -1/-1/-1->0->\n")
    assert [u.line for u in _source(log).unrecognized] == [1]


# ------------------------------------------------------------------------------------ the end of an input
def test_an_unfamiliar_last_message_ends_a_log_only_when_its_line_is_unterminated(tmp_path: Path) -> None:
    whole = PREFIX + "Init COMPLETE\n" + PREFIX + "XYZ/Plugin: Unloading the xyz plugin"
    log = tmp_path / "whole.log"
    log.write_text(whole + "\n")
    assert not _source(log).ends_cut  # a new message, written whole: the log is complete
    log.write_text(whole)
    assert _source(log).ends_cut  # no newline: the writer stopped inside it


def test_a_known_message_that_stops_early_is_a_cut_even_with_its_newline() -> None:
    source = _source("fixtures/runtime/init_cut_mid_record.log")
    assert source.truncated == ["it ends in a cut NCCL record (line 55)"]


# ------------------------------------------------------------------------------------ COLL lines on stdout
def test_table_rows_printed_in_pieces_between_coll_lines_are_put_back_together() -> None:
    case = read_case([str(REPO / COLL_ON_STDOUT)], jobs=1).case
    (run,) = case.benchmarks
    assert [r.size for r in run.rows] == [1024, 4096, 16384, 65536]
    first = run.rows[0]
    assert first.line == 19  # where the row starts; its timings come 7 and 14 lines later
    assert (first.out_of_place.time_us, first.in_place.time_us) == (10.29, 6.17)
    assert first.out_of_place.algbw == 0.10 and first.in_place.algbw == 0.17
    assert case.sources[0].unrecognized == []
    # the records glued to the pieces belong to host vm, not to "-1vm" or "0vm"
    assert {h.name for h in case.hosts} == {"vm"}


# ------------------------------------------------------------------------------------ two ranks, one GPU
def test_two_ranks_on_one_gpu_is_one_finding_for_the_host_with_the_pair_once() -> None:
    f = only_finding("RUN002", TWO_RANKS_ONE_GPU)
    assert f.hosts == ["vm"]
    assert "ranks 0 and 1 on CUDA device 60" in f.message and "ranks 1 and 0" not in f.message
    run005 = only_finding("RUN005", TWO_RANKS_ONE_GPU)
    assert "see the findings of RUN002 for NCCL's own lines" in run005.message  # not NET002: an INFO line


# ------------------------------------------------------------------------------------ a real hang
def test_the_hang_reads_the_watchdog_the_flight_recorder_and_a_healthy_ras_report() -> None:
    case = read_case([str(REPO / HANG)], jobs=1).case
    (record,) = case.flight_records
    assert record.status["0"].last_enqueued == 7 and record.status["0"].last_completed == 6
    assert [e.state for e in record.entries][-1] == "scheduled"
    text, json_report = sorted(case.ras_reports, key=lambda r: r.format, reverse=True)
    assert text.format == "text" and text.nccl_version == "2.28.9"
    assert text.job is not None and (text.job.nodes, text.job.processes, text.job.gpus) == (1, 1, 1)
    assert [(g.group, g.status, g.errors) for g in text.groups] == [(0, "RUNNING", [])]
    assert json_report.format == "json" and json_report.communicators[0].size == 1
    assert case.nccl_versions == ["2.28.9", "2.28.9+cuda13.0"]
    assert not any(p.host == "" for p in case.processes)  # RAS's banner is no NCCL process


def test_the_hang_is_the_watchdog_error_and_an_info_is_never_its_root_cause() -> None:
    analysis = analysis_of(HANG)
    run006 = only_finding("RUN006", HANG)
    assert "ALLREDUCE (SeqNum 7" in run006.message and "last completed work 6" in run006.message
    assert [f.code for f in analysis.findings if f.root_cause] == []
    assert findings_of("VER001", HANG) == []  # 2.28.9 from RAS and the dump, 2.28.9+cuda13.0 from the log


# ------------------------------------------------------------------------------------ opCount that stays 0
def _two_ranks_opcount_0(calls: tuple[int, int]) -> list[str]:
    """Two ranks of one communicator (NCCL 2.28 lines) whose COLL lines all say `opCount 0`; rank r makes
    calls[r] calls."""
    comms = {0: "0x55d0a1b2c3d0", 1: "0x55e0a1b2c3e0"}
    lines = [
        f"gpu-p2:{7100 + r}:{7100 + r} [{r}] NCCL INFO ncclCommInitRank comm {comms[r]} rank {r} nranks 2 cudaDev {r}"
        f" nvmlDev {r} busId {(r + 1) * 0x1000:x} commId 0x3a1b2c3d4e5f6071 - Init COMPLETE"
        for r in (0, 1)
    ]
    for call in range(max(calls)):
        lines.extend(
            f"gpu-p2:{7100 + r}:{7100 + r} [{r}] NCCL INFO AllReduce: opCount 0 sendbuff 0x7f00{r}0000000 "
            f"recvbuff 0x7f00{r}0400000 count 1048576 datatype 7 op 0 root 0 comm {comms[r]} [nranks=2] stream 0x5"
            for r in (0, 1)
            if call < calls[r]
        )
    return lines


def test_coll_lines_whose_opcount_stays_0_still_tell_which_rank_is_behind(tmp_path: Path) -> None:
    # NCCL 2.28.9 printed `opCount 0` on every call of our run: the count advances only with proxy
    # operations, so on NVLink/PCIe alone the number of COLL lines per rank is what tells progress
    log = tmp_path / "two_ranks_opcount_0.log"
    log.write_text("\n".join(_two_ranks_opcount_0((6, 3))) + "\n")  # rank 1 stops after its third call
    (finding,) = findings_of("HANG003", str(log))
    assert "rank 1" in finding.message, finding.message


def test_where_the_opcount_stays_0_a_position_is_a_count_of_calls_never_an_opcount(tmp_path: Path) -> None:
    # 26 calls against 17 read as "opCount 1a" and "opCount 11" would name opCounts the log never printed
    lines = _two_ranks_opcount_0((26, 17))
    log = tmp_path / "opcount_0_counts.log"
    log.write_text("\n".join(lines) + "\n")
    (group,) = analysis_of(str(log)).case.progress
    assert group.counts_calls and [r.entered for r in group.ranks] == [26, 17]
    (finding,) = findings_of("HANG003", str(log))
    assert "(1 at call 26); slowest rank 1 at call 17" in finding.message, finding.message
    assert "opCount" not in finding.message
    # where the opCount advances, positions stay the opCounts NCCL printed, in hex
    advancing = [line.replace("opCount 0 ", f"opCount {n:x} ") for n, line in enumerate(lines)]
    log.write_text("\n".join(advancing) + "\n")
    (group,) = analysis_of(str(log)).case.progress
    assert not group.counts_calls
    (finding,) = findings_of("HANG003", str(log))
    assert "opCount" in finding.message and "call " not in finding.message, finding.message


# ------------------------------------------------------------------------------------ four processes' COLL lines
FOUR_PROCESSES = f"{DEVICE}/coll_lines_four_processes.log"


def _calls_in_text(path: str) -> dict[tuple[int, str], int]:
    """(pid, comm) -> COLL lines, counted from the text alone (not by ncclscope's parser)."""
    counts: dict[tuple[int, str], int] = {}
    for line in (REPO / path).read_text().splitlines():
        if " opCount " in line:
            key = (int(line.split(":")[1]), line.split(" comm ")[1].split()[0])
            counts[key] = counts.get(key, 0) + 1
    return counts


def test_four_processes_coll_lines_in_one_stream_are_counted_per_process_and_communicator() -> None:
    # our run: four processes at once on the one GPU, each with two 1-rank communicators (the world and a
    # new_group), 60,000 calls of five kinds into one stdout ("stream (nil)": the default stream), every
    # 160th COLL line kept with all the other lines
    expected = _calls_in_text(FOUR_PROCESSES)
    assert len(expected) == 8 and len({pid for pid, _ in expected}) == 4
    case = read_case([str(REPO / FOUR_PROCESSES)], jobs=1).case
    source = case.sources[0]
    assert source.unrecognized_count == 0 and source.recognized == source.nccl_lines == source.lines
    assert source.families["coll_call"] == sum(expected.values())
    assert {(c.pid, c.comm): c.calls for c in case.coll_calls} == expected
    assert {c.nranks for c in case.coll_calls} == {1}


def test_four_processes_coll_lines_reach_the_grammar_a_bounded_number_of_times() -> None:
    from ncclscope.inputs.opening import InputFile, ReadStats, iter_blocks
    from ncclscope.parse.nccl_log import NcclLogParser

    parser = NcclLogParser(lambda line, text: None)
    for block, first_line in iter_blocks(InputFile(str(REPO / FOUR_PROCESSES), FOUR_PROCESSES), ReadStats()):
        parser.feed_block(block, first_line)
    # 1,200 COLL lines with real pointers and counts of 1 to 1024 elements, and the init lines of four
    # processes: the grammar reads each kind of line about once, not once per value
    assert parser.result.families["coll_call"] == 1200
    assert parser.lark_parses < 60, parser.lark_parses


def test_four_processes_of_one_rank_each_raise_no_hang_or_warning() -> None:
    analysis = analysis_of(FOUR_PROCESSES)
    assert {f.severity for f in analysis.findings} == {"info"}, [(f.code, f.severity) for f in analysis.findings]
    assert not [f for f in analysis.findings if f.code.startswith("HANG")]
