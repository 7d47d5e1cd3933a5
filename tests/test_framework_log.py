"""Framework logs (PyTorch ProcessGroupNCCL, torchrun, DeepSpeed, vLLM) as an input kind of their own:
their records as typed facts, the findings they carry, and the command line, report and TUI on them."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from ncclscope.case.read import read_case
from ncclscope.model import FrameworkEvent
from ncclscope.parse.framework_log import FrameworkReader
from ncclscope.tui.app import TABS, NcclscopeApp
from ncclscope.tui.loading import prepare_inputs

from conftest import REPO, analysis_of, evidence_lines, findings_of, only_finding, run_cli

WATCHDOG = "fixtures/framework/torch25_watchdog_rank_missing.log"
WRAPPED = "fixtures/framework/torch113_watchdog_hard_wrapped.log"
LAST_ERROR = "fixtures/framework/torch23_nccl_error_last_error.log"
VLLM_DEEPSPEED = "fixtures/framework/vllm_deepspeed_nccl_errors.log"
COMMAND_LINES = "fixtures/framework/command_line_settings.log"


def events(path: str, kind: str | None = None) -> list[FrameworkEvent]:
    case = read_case([str(REPO / path)], jobs=1).case
    return [e for e in case.framework if kind is None or e.kind == kind]


def read_lines(*lines: str) -> FrameworkReader:
    reader = FrameworkReader("paste")
    for number, line in enumerate(lines, start=1):
        reader.feed(number, line)
    reader.finish()
    return reader


# ------------------------------------------------------------------------------ records as facts
def test_watchdog_timeouts_status_and_dump_signals_are_typed() -> None:
    timeouts = events(WATCHDOG, "watchdog_timeout")
    assert {e.rank for e in timeouts} == {0, 1, 2, 3, 4, 5, 7}
    assert {(e.seq, e.op_type, e.numel_in, e.timeout_ms) for e in timeouts} == {(20417, "ALLREDUCE", 50331648, 600000)}
    assert all(600000 < (e.ran_ms or 0) < 600100 for e in timeouts)
    status = events(WATCHDOG, "watchdog_status")
    assert {(e.rank, e.seq, e.last_enqueued, e.last_completed) for e in status} >= {(0, 20417, 20417, 20416)}
    (dump,) = events(WATCHDOG, "dump_signal")
    assert (dump.rank, dump.from_rank, dump.last_enqueued, dump.last_completed) == (6, 3, 20416, 20416)
    options = events(WATCHDOG, "pg_options")
    assert {e.rank for e in options} == set(range(8))
    assert {(e.world_size, e.timeout_ms, e.process_group) for e in options} == {(8, 600000, "0")}


def test_the_timeout_quoted_by_the_watchdog_exception_is_a_timeout_too() -> None:
    reader = read_lines(
        "  what():  [PG 0 Rank 1] Process group watchdog thread terminated with exception: [Rank 1] Watchdog caught"
        " collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLGATHER, NumelIn=4, NumelOut=16,"
        " Timeout(ms)=120000) ran for 120092 milliseconds before timing out."
    )
    assert [e.kind for e in reader.events] == ["watchdog_exception", "watchdog_timeout"]
    assert (reader.events[1].rank, reader.events[1].seq, reader.events[1].op_type) == (1, 9, "ALLGATHER")


def test_hard_wrapped_timeouts_are_joined_across_two_and_three_lines() -> None:
    timeouts = events(WRAPPED, "watchdog_timeout")
    by_rank = {e.rank: e for e in reversed(timeouts)}  # the first record of each rank
    assert by_rank[1].evidence.line == 2 and by_rank[1].ran_ms == 1800437
    # cut inside "timeout" and inside "1800512": the join must read across both cuts
    assert by_rank[0].evidence.line == 4 and by_rank[0].ran_ms == 1800512
    assert by_rank[0].op_type == "BROADCAST" and by_rank[0].timeout_ms == 1800000
    case = read_case([str(REPO / WRAPPED)], jobs=1).case
    assert case.sources[0].framework_unrecognized == 0


def test_ran_for_on_a_line_of_its_own_completes_the_timeout() -> None:
    reader = read_lines(
        "[rank1]:[E1111 17:01:37] [Rank 1] Watchdog caught collective operation timeout: ",
        "WorkNCCL(SeqNum=14, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=1800000) ",
        "ran for 1800048 milliseconds before timing out.",
    )
    (event,) = reader.events
    assert (event.seq, event.ran_ms, event.evidence.line) == (14, 1800048, 1)
    assert reader.lines == 3 and not reader.not_understood


def test_a_wrapped_record_cut_by_the_end_of_the_input_is_read_in_part_and_named_as_cut() -> None:
    """The paste ends inside the record: its rank and SeqNum are whole, its OpType is not."""
    reader = read_lines("[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=")
    assert [(e.kind, e.rank, e.seq, e.op_type) for e in reader.events] == [("watchdog_timeout", 0, 3, None)]
    assert reader.cut_at_end == 1 and reader.cut == [1] and not reader.not_understood


@pytest.mark.parametrize(
    ("cut_after", "read"),
    [
        ("Timeout(ms)=18", (4, "BROADCAST", 112, None, None)),  # the field cut is left out, with its "(ms)"
        ("Timeout(ms)=1800000) ran for 18", (4, "BROADCAST", 112, 1800000, None)),
    ],
)
def test_a_cut_record_keeps_the_fields_it_holds_whole(cut_after: str, read: tuple) -> None:
    full = "WorkNCCL(SeqNum=4, OpType=BROADCAST, NumelIn=112, NumelOut=112, Timeout(ms)=1800000) ran for 1800010"
    text = "[Rank 4] Watchdog caught collective operation timeout: " + full[: full.index(cut_after) + len(cut_after)]
    (event,) = read_lines(text).events
    assert (event.seq, event.op_type, event.numel_out, event.timeout_ms, event.ran_ms) == read


def test_a_record_cut_before_its_first_field_is_not_understood() -> None:
    reader = read_lines("[Rank 4] Watchdog caught collective operation timeout: WorkNCCL(SeqN")
    assert reader.events == [] and reader.cut == [] and reader.cut_at_end == 1
    assert [line for line, _ in reader.not_understood] == [1]


def test_a_log_line_whose_marker_was_wrapped_away_is_not_the_rest_of_a_damaged_record() -> None:
    """Rank 1's record never reads (its second half is damaged); rank 0's, cut inside `timeout` by the
    terminal, begins with a log header: it is a record of its own, not a third piece of rank 1's."""
    reader = read_lines(
        "[E ProcessGroupNCCL.cpp:737] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=",
        "\ufffd\ufffd88214, OpType=BROADCAST, Timeout(ms)=1800000) ran for 1800437 milliseconds before timing out.",
        "[E ProcessGroupNCCL.cpp:737] [Rank 0] Watchdog caught collective operation timeo",
        "ut: WorkNCCL(SeqNum=88214, OpType=BROADCAST, Timeout(ms)=1800000) ran for 180051",
        "2 milliseconds before timing out.",
    )
    reader.finish()
    assert [(e.rank, e.seq, e.ran_ms, e.evidence.line) for e in reader.events] == [(0, 88214, 1800512, 3)]
    assert [line for line, _ in reader.not_understood] == [1]


def test_a_wrapped_watchdog_exception_is_joined_with_the_timeout_it_quotes() -> None:
    """PyTorch 2.4's `watchdog thread terminated with exception:` wrapped by a terminal before the quoted timeout
    and again inside `ran for N milliseconds`: one record of three lines, the quoted timeout whole."""
    reader = read_lines(
        "[rank5]:[E1104 07:12:09.300118000 ProcessGroupNCCL.cpp:1515] [PG 0 (default_pg) Rank 5] Process group"
        " watchdog thread terminated with ",
        "exception: [Rank 5] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=311, OpType=REDUCE,"
        " NumelIn=1, NumelOut=1, Timeout(ms)=300000) ran for 300044 ",
        "milliseconds before timing out.",
    )
    assert [(e.kind, e.rank, e.seq, e.ran_ms) for e in reader.events] == [
        ("watchdog_exception", 5, None, None),
        ("watchdog_timeout", 5, 311, 300044),
    ]
    assert reader.lines == 3 and reader.not_understood == [] and reader.cut == []
    # cut before its end by the next record: what it holds whole is read, and the input is named as cut
    reader = read_lines(
        "[PG 0 Rank 2] Process group watchdog thread terminated with exception: [Rank 2] Watchdog caught collective"
        " operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=4, NumelOut=4, Timeout(ms)=60000) ran for",
        "[E1104 07:12:10.000000000 ProcessGroupNCCL.cpp:1521] [PG 0 Rank 2] Some NCCL operations have failed or timed"
        " out.",
    )
    assert [(e.kind, e.seq) for e in reader.events] == [
        ("watchdog_exception", None),
        ("watchdog_timeout", 9),
        ("operations_failed", None),
    ]
    assert reader.cut == [1] and reader.not_understood == []


def test_thousands_of_messages_glued_into_one_line_are_read_to_the_limit_and_counted() -> None:
    line = " ".join("[E a.cc:1] NCCL error: unhandled system error, NCCL version 2.19.3" for _ in range(3000))
    reader = read_lines(line)
    assert len(reader.events) == 2000 and reader.not_kept == {"framework": 1000}
    assert {e.evidence.line for e in reader.events} == {1}


def test_a_traceback_quoting_the_code_that_raised_is_no_record() -> None:
    reader = read_lines('    raise RuntimeError(f"NCCL error: {error_str}")')
    assert reader.events == [] and reader.not_understood == []
    reader = read_lines("RuntimeError: NCCL error: remote process exited or there was a network error")
    assert [e.kind for e in reader.events] == ["nccl_error"]


def test_a_new_record_is_not_swallowed_by_an_unfinished_one() -> None:
    """Rank 0's record lost its rest (the next line is rank 1's own): what it holds whole is read, and it
    is named as cut."""
    reader = read_lines(
        "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=",
        "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE) ran for 9"
        " milliseconds before timing out.",
    )
    assert [(e.rank, e.seq, e.op_type) for e in reader.events] == [(0, 3, None), (1, 3, "ALLREDUCE")]
    assert reader.cut == [1] and reader.cut_at_end is None and not reader.not_understood


def test_a_record_cut_short_inside_an_input_is_named_and_joins_its_collective(tmp_path: Path) -> None:
    """RUN006 counts rank 0 among the ranks that timed out at SeqNum 3 (ALLREDUCE): its record, cut before
    its OpType by the next one, holds its rank and SeqNum whole. The input is named as damaged there."""
    target = tmp_path / "cut.log"
    target.write_text(
        "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=\n"
        + "".join(
            f"[Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=3, OpType=ALLREDUCE, "
            f"NumelIn=8, NumelOut=8, Timeout(ms)=600000) ran for 600100 milliseconds before timing out.\n"
            for r in (1, 2)
        ),
        encoding="utf-8",
    )
    finding = only_finding("RUN006", target)
    assert "timed out ALLREDUCE (SeqNum 3, 8 elements) on ranks 0-2 after 600 s" in finding.message
    case = read_case([str(target)], jobs=1).case
    assert case.sources[0].truncated == [
        "a framework record of it is cut short (line 1); the fields it holds whole are read"
    ]
    assert case.sources[0].framework_unrecognized == 0


@pytest.mark.parametrize(
    ("line", "kind", "fields"),
    [
        (
            "[rank1]:[E1003 18:37:01.833575187 ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank 1] Exception (either"
            " an error or timeout) detected by watchdog at work: 6463, last enqueued NCCL work: 6463, last completed"
            " NCCL work: 6462.",
            "watchdog_status",
            {"rank": 1, "seq": 6463, "last_enqueued": 6463, "last_completed": 6462},
        ),
        (
            "[PG 1 Rank 1] Timeout at NCCL work: 158046, last enqueued NCCL work: 158046, last completed NCCL work:"
            " 158045.",
            "watchdog_status",
            {"rank": 1, "seq": 158046, "last_completed": 158045},
        ),
        (
            "[PG ID 0 PG GUID 0(default_pg) Rank 3] Received a dump signal due to a collective timeout from this local"
            " rank and we will try our best to dump the debug info. Last enqueued NCCL work: 1, last completed NCCL"
            " work: -1.This is most likely caused by incorrect usages of collectives",
            "dump_signal",
            {"rank": 3, "from_rank": None, "last_enqueued": 1, "last_completed": -1},
        ),
        (
            "[E1111 17:10:53.1 ProcessGroupNCCL.cpp:1] [PG ID 0 PG GUID 0(default_pg) Rank 1] ProcessGroupNCCL's"
            " watchdog got stuck for 480 seconds without making progress in monitoring enqueued collectives.",
            "watchdog_stuck",
            {"rank": 1, "stuck_s": 480},
        ),
        (
            "I0527 15:16:51.665462 58626 ProcessGroupNCCL.cpp:878] [PG 0 Rank 2] ProcessGroupNCCL environments: NCCL"
            " version: 2.18.3, TORCH_NCCL_ASYNC_ERROR_HANDLING: 1",
            "pg_options",
            {"rank": 2, "nccl_version": "2.18.3", "world_size": None},
        ),
        (
            "RuntimeError: NCCL error: unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
            "nccl_error",
            {"text": "unhandled cuda error (run with NCCL_DEBUG=INFO for details)", "nccl_version": None},
        ),
        (
            "[PG 0 Rank 1] NCCL communicator was aborted on rank 1. Original reason for failure was: NCCL error:"
            " unhandled cuda error",
            "comm_aborted",
            {"rank": 1},
        ),
    ],
)
def test_each_pytorch_record_shape_is_read(line: str, kind: str, fields: dict) -> None:
    reader = read_lines(line)
    assert not reader.not_understood
    (event,) = reader.events
    assert event.kind == kind
    assert {k: getattr(event, k) for k in fields} == fields


def test_last_error_takes_nccls_text_from_the_next_line_even_when_the_nccl_reader_has_it() -> None:
    last = events(LAST_ERROR, "last_error")
    assert [e.text for e in last] == [
        "socketStartConnect: Connect to 10.42.7.19<51277> failed : Software caused connection abort"
    ] * 2
    last = events(VLLM_DEEPSPEED, "last_error")
    assert [e.text for e in last] == ["Cuda failure 'out of memory'"]


def test_a_log_viewer_pid_before_the_rank_tag_is_a_prefix() -> None:
    errors = events(VLLM_DEEPSPEED, "nccl_error")
    assert any(e.evidence.line == 11 and e.nccl_version == "2.19.3" for e in errors)
    assert not any(e.text.startswith("[") for e in events(VLLM_DEEPSPEED))


def test_command_line_settings_are_read_from_every_launcher_form() -> None:
    case = read_case([str(REPO / COMMAND_LINES)], jobs=1).case
    settings = {e.name: e.value for e in case.env}
    assert settings == {
        "NCCL_IB_DISABLE": "1",
        "NCCL_DEBUG_SUBSYS": "INIT,NET",
        "NCCL_P2P_LEVEL": "LOC",
        "NCCL_ALGO": "Ring",
        "NCCL_SHM_DISABLE": "1",
        "NCCL_DEBUG": "WARN",
        "NCCL_SOCKET_IFNAME": "=ens1f0",
    }
    assert {e.origin for e in case.env} == {"command_line"}
    assert case.nccl_versions == ["2.19.3"]  # from the process group's environment line


def test_framework_events_beyond_the_limit_are_counted_not_dropped() -> None:
    line = "[Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=BARRIER)"
    reader = read_lines(*(line.format(r=r) for r in range(2100)))
    assert len(reader.events) == 2000
    assert reader.not_kept == {"framework": 100}
    assert reader.lines == 2100


# ------------------------------------------------------------------------------ findings
def test_watchdog_on_a_framework_log_alone_names_the_silent_rank_from_the_process_group_size() -> None:
    finding = only_finding("RUN006", WATCHDOG)
    assert finding.severity == "error"
    assert "on ranks 0-5, 7" in finding.message
    assert "rank 6 of 8 reported no timeout" in finding.message
    assert "the input holds no NCCL log" in finding.message  # not "NCCL logged no WARN": nobody asked it to


def test_ranks_that_time_out_in_an_earlier_collective_are_behind_not_missing() -> None:
    """Ranks 1-2 time out in BROADCAST 7712 while rank 0 times out two collectives later: they entered theirs
    and wait in it, so they are behind (HANG003), not ranks that never came (HANG001)."""
    path = "fixtures/framework/torch26_watchdog_ranks_behind.log"
    assert findings_of("HANG001", path) == []
    finding = only_finding("HANG003", path)
    assert finding.severity == "warning" and finding.ranks == [1, 2]
    assert "2 of 4 ranks are behind (1 at sequence number 7714)" in finding.message
    assert "slowest ranks 1-2 at sequence number 7712, where they timed out waiting themselves" in finding.message
    assert "rank 3 printed no watchdog line" in finding.message
    assert evidence_lines(finding) == [4, 5, 6]
    # the two collectives the ranks time out in are one RUN006, not one finding each saying the same desync
    timeout = only_finding("RUN006", path)
    assert (
        "timed out 2 collectives after 900 s against a 900 s timeout, ranks at different collectives (desync):"
        " BROADCAST (SeqNum 7712, 2097152 elements) on ranks 1-2; _ALLGATHER_BASE (SeqNum 7714, 1024 elements) on"
        " rank 0; rank 3 of 4 reported no timeout" in timeout.message
    )
    assert timeout.ranks == [0, 1, 2] and evidence_lines(timeout) == [4, 5, 6]


def test_a_rank_behind_with_no_collective_of_its_own_under_way_is_missing(tmp_path: Path) -> None:
    timeout = (
        "[rank{r}]:[E1102 05:02:40.5519{r}0000 ProcessGroupNCCL.cpp:632] [Rank {r}] Watchdog caught collective"
        " operation timeout: WorkNCCL(SeqNum=50, OpType=ALLREDUCE, NumelIn=8, NumelOut=8, Timeout(ms)=60000)"
        " ran for 60012 milliseconds before timing out."
    )
    log = tmp_path / "job.log"
    log.write_text(
        f"{timeout.format(r=0)}\n{timeout.format(r=1)}\n"
        "[rank2]:[E1102 05:02:41.100200000 ProcessGroupNCCL.cpp:1512] Exception (either an error or timeout) detected"
        " by watchdog at work: 48, last enqueued NCCL work: 48, last completed NCCL work: 48.\n"
    )
    assert findings_of("HANG003", log) == []
    finding = only_finding("HANG001", log)
    assert finding.ranks == [2] and "never entered ALLREDUCE (SeqNum 50)" in finding.message


def test_messages_of_a_line_whose_line_breaks_were_lost_are_each_read() -> None:
    """An issue body that joined PyTorch's error chain into one line: the version of the NCCL error in its
    middle is read, each record with the whole line as its evidence, and NCCL's relayed text after `Last error:`
    is an NCCL record (NET005), not a watchdog timeout."""
    path = "fixtures/framework/torch20_error_chain_one_line.txt"
    found = events(path)
    assert [(e.kind, e.nccl_version) for e in found] == [("operations_failed", None), ("nccl_error", "2.17.1")]
    assert found[1].text == "remote process exited or there was a network error"
    assert all(e.evidence.line == 1 and e.evidence.text.startswith("[E ProcessGroupNCCL.cpp:475]") for e in found)
    assert read_case([str(REPO / path)], jobs=1).case.nccl_versions == ["2.17.1"]
    codes = [f.code for f in analysis_of(path).findings]
    assert codes[0] == "NET005" and "RUN006" not in codes


def test_framework_nccl_errors_are_reported_without_an_nccl_log() -> None:
    finding = only_finding("RUN005", "fixtures/framework/torch23_nccl_error_last_error.log")
    assert "NCCL's last error: `socketStartConnect: Connect to 10.42.7.19<51277> failed" in finding.message
    assert "Traceback" not in finding.message


def test_evd001_says_what_an_nccl_log_would_add_to_a_framework_log() -> None:
    (nccl_log,) = [f.message for f in findings_of("EVD001", WATCHDOG)]
    lacks = nccl_log.split("for lack of ", 1)[1]
    assert lacks.startswith("an NCCL log (") and "RUN005" in lacks and "NET001" in lacks


def test_a_setting_on_a_command_line_says_the_host_count_is_unknown_not_single_host() -> None:
    ib = next(f for f in findings_of("ENV001", COMMAND_LINES) if "NCCL_IB_DISABLE" in f.message)
    assert "single-host" not in ib.message
    assert "do not show whether the hosts have RDMA NICs" in ib.message


# ------------------------------------------------------------------------------ command line, report, TUI
def test_cli_accepts_a_framework_log_and_exits_by_its_findings(tmp_path: Path) -> None:
    proc = run_cli("analyze", COMMAND_LINES)
    assert proc.returncode == 0, proc.stderr
    assert b"could not judge for lack of an NCCL log" in proc.stdout
    proc = run_cli("analyze", WATCHDOG)
    assert proc.returncode == 1, proc.stderr  # RUN006 is an error: --fail-on error
    proc = run_cli("analyze", "--fail-on", "never", "-f", "json", WATCHDOG)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["case"]["sources"][0]["kinds"] == ["framework_log"]
    proc = run_cli("parse", WATCHDOG)
    assert b"framework_log, 49 lines, 26 framework lines" in proc.stdout


def test_report_on_a_framework_log(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    proc = run_cli("report", WATCHDOG, "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    html = out.read_text(encoding="utf-8")
    assert "RUN006" in html and "rank 6 of 8 reported no timeout" in html


async def test_tui_opens_a_framework_log_on_its_watchdog_finding(repo_cwd: Path) -> None:
    app = NcclscopeApp(prepare_inputs([WATCHDOG]))
    async with app.run_test(size=(140, 45)) as pilot:

        async def parsed() -> None:
            while app.parsing:
                await pilot.pause(0.05)

        await asyncio.wait_for(parsed(), 120)
        await pilot.pause()
        assert app.findings.selected is not None and app.findings.selected.code == "RUN006"
        for number in range(2, len(TABS) + 1):  # every screen opens on it
            await pilot.press(str(number))
            await pilot.pause()


def test_silent_ranks_of_a_cut_input_may_just_be_missing(tmp_path: Path) -> None:
    lines = (REPO / WATCHDOG).read_text(encoding="utf-8").splitlines()[:30]
    lines.append(lines[28][: lines[28].index("OpType=") + 4].replace("rank4", "rank5").replace("Rank 4", "Rank 5"))
    cut = tmp_path / "cut.log"
    cut.write_text("\n".join(lines) + "\n", encoding="utf-8")
    finding = only_finding("RUN006", cut)
    # rank 5's record, cut inside OpType, holds its rank and SeqNum: rank 5 timed out like ranks 0-4
    assert "on ranks 0-5" in finding.message and "ranks 6-7 of 8 reported no timeout" in finding.message
    assert "the input looks cut" in finding.message and "so their lines may just be missing" in finding.message


def test_the_nccl_a_framework_says_it_loaded_is_a_release_of_the_job() -> None:
    """Issue 43: vLLM names the NCCL its pynccl loaded; without an NCCL banner it is the release the job ran."""
    reader = read_lines(
        "(VllmWorkerProcess pid=4120) INFO 11-02 08:25:45 pynccl.py:63] vLLM is using nccl==2.20.5",
        "INFO 11-02 08:25:45 pynccl.py:63] vLLM is using nccl==2.21.5",
    )
    assert [(e.kind, e.nccl_version) for e in reader.events] == [
        ("nccl_version_used", "2.20.5"),
        ("nccl_version_used", "2.21.5"),
    ]


def test_the_desync_report_names_the_ranks_the_others_wait_for() -> None:
    """Issue 43: PyTorch's TORCH_NCCL_DESYNC_DEBUG report (TraceUtils.h), behind 2.4+'s `[PG ID .. Rank N]` tag."""
    from ncclscope.diagnose.engine import analyze

    path = "fixtures/framework/torch26_desync_report.log"
    assert [(e.rank, e.seq) for e in events(path, "watchdog_timeout")] == [(1, 923553), (3, 923553)]
    (report,) = events(path, "desync_not_joined")
    assert (report.ranks, report.seq, report.next_seq) == ([0], 923552, 923553)
    reader = read_lines(
        "\t   - [47] joined but didn't finish collective #41207 (count from 1)",
        " - To our best knowledge, ranks [5, 6] are the lagging ranks that caused this timeout. They never joined"
        " any collectives",
    )
    assert [(e.kind, e.ranks, e.seq) for e in reader.events] == [
        ("desync_unfinished", [47], 41207),
        ("desync_never_joined", [5, 6], None),
    ]
    findings = analyze(read_case([str(REPO / path)], jobs=1).case).findings
    assert findings[0].code == "HANG001" and findings[0].ranks == [0]
    assert "rank 0 finished collective #923552 but never joined #923553" in findings[0].message
