"""The verdict a person reads first (issue 40): one fixture per way it went wrong on real pastes, each written
from the format facts (fixtures/verdicts/, described in fixtures/README.md). Every test here failed before
the change it covers."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from ncclscope.case.read import read_case
from ncclscope.diagnose.engine import analyze
from ncclscope.model import Analysis, Finding

from conftest import REPO, run_cli

VERDICTS = REPO / "fixtures" / "verdicts"


@cache
def analysis_of(*names: str) -> Analysis:
    paths = [str(VERDICTS / n) if "/" not in n else str(REPO / n) for n in names]
    return analyze(read_case(paths, jobs=1).case)


def found(name: str, code: str) -> list[Finding]:
    return [f for f in analysis_of(name).findings if f.code == code]


def first_json_finding(*args: str) -> dict:
    done = run_cli("analyze", "--format", "json", "--fail-on", "never", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["findings"][0]


# 1. hosts and processes are counted from every line that names them -------------------------------------
def test_hosts_and_processes_named_only_in_connection_lines_are_counted() -> None:
    case = analysis_of("hosts_only_in_connection_lines.log").case
    assert [h.name for h in case.hosts] == ["trn-a17", "trn-b04", "trn-c11"]
    assert len(case.processes) == 24 and sorted(r for p in case.processes for r in p.ranks) == list(range(24))
    (net001,) = found("hosts_only_in_connection_lines.log", "NET001")
    assert net001.severity == "error" and "the job spans 3 hosts" in net001.message
    assert "the one host" not in net001.message


def test_parse_lists_the_hosts_of_connection_lines() -> None:
    done = run_cli("parse", str(VERDICTS / "hosts_only_in_connection_lines.log"))
    assert b"(3 hosts)" in done.stdout and b"0-23" in done.stdout, done.stdout


# 2. a root cause is one that explains; a setting that changes nothing explains nothing --------------------
def test_only_a_documented_cause_is_named_root_cause() -> None:
    analysis = analysis_of("ib_disabled_two_hosts.log")
    first = analysis.findings[0]
    assert (first.code, first.root_cause, first.explains) == ("NET002", True, ["NET001"])
    settings = {f.message.split("=")[0]: f for f in analysis.findings if f.code == "ENV001"}
    assert settings["NCCL_IB_DISABLE"].explains == ["NET001"] and settings["NCCL_IB_DISABLE"].root_cause
    for knob in ("NCCL_COMM_ID", "NCCL_IB_TIMEOUT"):  # tuning knobs: info, nothing to do, explain nothing
        f = settings[knob]
        assert (f.severity, f.root_cause, f.explains) == ("info", False, [])
        assert "should not be used in production" not in f.explanation


def test_the_first_json_finding_is_the_root_cause_and_the_text_opens_on_it() -> None:
    assert first_json_finding(str(VERDICTS / "ib_disabled_two_hosts.log"))["code"] == "NET002"
    text = run_cli("analyze", "--fail-on", "never", str(VERDICTS / "ib_disabled_two_hosts.log")).stdout.decode()
    lines = text.splitlines()
    # the setting NET002 names is said with it, not as a second root cause
    assert lines[2].startswith(
        "Root cause: NET002 rdma-unavailable (explains NET001; with ENV001 NCCL_IB_DISABLE=1): RDMA networking is"
    )
    assert lines[3].startswith("  fix: ") and not lines[4].startswith("Root cause")


def test_quiet_leaves_out_what_could_not_be_judged() -> None:
    loud = run_cli("analyze", "--fail-on", "never", str(VERDICTS / "ib_disabled_two_hosts.log")).stdout
    quiet = run_cli("analyze", "-q", "--fail-on", "never", str(VERDICTS / "ib_disabled_two_hosts.log")).stdout
    assert b"EVD001" in loud and b"EVD001" not in quiet and b"Root cause: NET002" in quiet


def test_the_report_opens_on_the_verdict(tmp_path: Path) -> None:
    html, md = tmp_path / "report.html", tmp_path / "report.md"
    for target in (html, md):
        done = run_cli("report", str(VERDICTS / "ib_disabled_two_hosts.log"), "-o", str(target))
        assert done.returncode == 0, done.stderr
    page = html.read_text()
    summary = page[page.index('class="verdict') : page.index("</div>", page.index('class="verdict'))]
    assert "Root cause: NET002 rdma-unavailable" in summary and "fix: Install rdma-core" in summary
    assert "> Root cause: NET002 rdma-unavailable" in md.read_text()


def test_no_problem_found_says_so_and_names_the_one_thing_to_add() -> None:
    text = run_cli("analyze", str(VERDICTS / "mpirun_ib_hca_list.txt")).stdout.decode()
    assert text.splitlines()[4].startswith("No problem found in what was given.")  # after the healthy run's line
    assert "the one thing to add first: an NCCL log (EVD001)" in text


def test_a_default_value_says_it_changes_nothing_and_explains_nothing(tmp_path: Path) -> None:
    text = (VERDICTS / "ib_disabled_two_hosts.log").read_text()
    log = tmp_path / "default.log"
    log.write_text(text.replace("NCCL_IB_DISABLE set by environment to 1.", "NCCL_IB_DISABLE set by environment to 0."))
    analysis = analyze(read_case([str(log)], jobs=1).case)
    (ib,) = [f for f in analysis.findings if f.code == "ENV001" and "NCCL_IB_DISABLE" in f.message]
    assert "switches InfiniBand/RoCE off; this is the default" not in ib.message
    assert "NCCL_IB_DISABLE's default value, so it changes nothing" in ib.message
    assert (ib.severity, ib.root_cause, ib.explains) == ("info", False, [])
    assert not [f for f in analysis.findings if f.code == "ENV002"]


# 3. a log that simply ends in init is an excerpt as much as a hang ----------------------------------------
def test_an_excerpt_that_ends_in_init_is_a_warning_that_says_what_is_missing() -> None:
    (run001,) = found("excerpt_ends_in_init.log", "RUN001")
    assert run001.severity == "warning"
    assert "the input may end there (an excerpt) or the job hang there" in run001.message
    assert "so they are stuck (a hang)" not in run001.message


def test_a_watchdog_timeout_is_the_positive_evidence_that_makes_it_a_hang() -> None:
    (run001,) = [
        f
        for f in analysis_of("excerpt_ends_in_init.log", "fixtures/runtime/pytorch_watchdog_timeout.log").findings
        if f.code == "RUN001"
    ]
    assert run001.severity == "error" and "watchdog timeout: they are stuck (a hang)" in run001.message


# 4. an empty hostname field loses no evidence ------------------------------------------------------------
def test_gdr_off_is_found_on_lines_whose_hostname_was_redacted() -> None:
    (gdr,) = found("empty_hostname_gdr_off.log", "GDR001")
    assert gdr.severity == "warning"
    assert "GPUDirect RDMA is off over NET/IB on the hosts of lines without a hostname" in gdr.message
    assert "32 connection lines without /GDRDMA" in gdr.message


# 5. a command line's NIC list is read whole --------------------------------------------------------------
def test_mpirun_ib_hca_list_is_read_whole_and_counts_the_nics() -> None:
    analysis = analysis_of("mpirun_ib_hca_list.txt")
    (hca,) = [s for s in analysis.case.env if s.name == "NCCL_IB_HCA"]
    assert hca.value == "mlx5_0:1,mlx5_3:1,mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_9:1,mlx5_10:1,mlx5_11:1"
    (judgement,) = analysis.bandwidth
    assert "8 NICs per host" in judgement.verdict and judgement.expected_busbw == 96
    assert not [f for f in analysis.findings if f.severity != "info"]


def test_a_slurm_export_list_still_ends_each_value_at_the_next_variable() -> None:
    from ncclscope.parse.framework_log import FrameworkReader

    reader = FrameworkReader("cmd")
    reader.command_line(1, "srun --export=ALL,NCCL_DEBUG=INFO,NCCL_IB_HCA=mlx5_0,mlx5_1 python train.py")
    reader.command_line(2, "mpirun -x NCCL_DEBUG_SUBSYS=INIT\\,NET -x NCCL_ALGO=Ring,Tree ./a.out")
    assert [(name, value) for name, value, _ in reader.settings] == [
        ("NCCL_DEBUG", "INFO"),
        ("NCCL_IB_HCA", "mlx5_0,mlx5_1"),
        ("NCCL_DEBUG_SUBSYS", "INIT,NET"),
        ("NCCL_ALGO", "Ring,Tree"),
    ]


# 6. BW004 (not one job) fires on separate jobs, not on a smoke test ------------------------------------
def test_two_headers_with_rank_0_on_two_hosts_are_two_separate_jobs() -> None:
    (bw004,) = found("two_headers_rank0_two_hosts.txt", "BW004")
    assert bw004.severity == "error" and bw004.hosts == ["a100-n03", "a100-n04"]
    assert "nccl-tests was not built with MPI" in bw004.message


def test_a_one_rank_smoke_test_with_its_own_nccl_log_is_not_two_processes() -> None:
    assert found("one_rank_smoke_test.txt", "BW004") == []
    assert not [f for f in analysis_of("one_rank_smoke_test.txt").findings if f.severity != "info"]


# 7. tables without a header: what no platform explains is said; what cannot be judged is EVD001's -----------
def test_a_headerless_table_far_below_any_fabric_is_a_warning() -> None:
    (bw001,) = found("headerless_table_slow.txt", "BW001")
    assert bw001.severity == "warning"
    assert "peaks at 4.1 GB/s busbw at 512 MiB" in bw001.message
    assert "below any NVLink, PCIe P2P or RDMA" in bw001.message
    assert "could not be compared" not in bw001.message


def test_a_time_that_stays_at_milliseconds_whatever_the_size_is_a_warning() -> None:
    (bw001,) = found("flat_time_table.txt", "BW001")
    assert bw001.severity == "warning"
    assert "stays at 40.1-44.2 ms from 1 MiB to 1 GiB" in bw001.message


def test_a_headerless_table_that_cannot_be_judged_gets_no_bw001() -> None:
    analysis = analysis_of("fixtures/nccl_tests/headerless_rows.txt")
    assert [f.code for f in analysis.findings if f.code.startswith("BW001")] == []
    (evd,) = [f for f in analysis.findings if f.code == "EVD001"]
    assert "BW001 could not judge" in evd.message


# 9. topology verdicts -------------------------------------------------------------------------------------
def test_a_flattened_matrix_is_a_hidden_topology_that_explains_the_far_nics() -> None:
    analysis = analysis_of("flattened_vm_matrix.txt")
    first = analysis.findings[0]
    assert (first.code, first.severity, first.root_cause) == ("TOPO006", "warning", True)
    assert first.explains == ["TOPO001", "TOPO002"]
    assert "8 GPUs and 4 RDMA NICs all PHB" in first.message


def test_one_gpus_nics_serving_eight_gpus_through_pxn_is_a_warning() -> None:
    (topo002,) = found("two_nics_on_gpu0.txt", "TOPO002")
    assert topo002.severity == "warning"
    assert "only GPU0 has a NIC on its PCIe switch: 2 NICs (NIC0 (mlx5_0), NIC1 (mlx5_1)) carry" in topo002.message


def test_nvlink_bridges_in_pairs_are_a_design_not_a_board_to_reseat() -> None:
    (topo003,) = found("nvlink_bridged_pairs.txt", "TOPO003")
    assert topo003.severity == "info" and "GPU0-GPU1, GPU2-GPU3" in topo003.message
    assert "reseat" not in topo003.fix and "drain" not in topo003.fix


def test_a_matrix_cut_after_some_rows_says_nothing_of_the_pairs_in_the_others(tmp_path: Path) -> None:
    text = (VERDICTS / "two_nics_on_gpu0.txt").read_text().splitlines()
    cut = tmp_path / "cut.txt"
    cut.write_text("\n".join(text[:6]) + "\n")  # the header and GPU0-GPU4: no row of GPU5-7
    analysis = analyze(read_case([str(cut)], jobs=1).case)
    assert [f for f in analysis.findings if f.code == "TOPO003"] == []


def test_a_pci_only_matrix_does_not_judge_nvlink(tmp_path: Path) -> None:
    matrix = (VERDICTS / "two_nics_on_gpu0.txt").read_text().replace("NV12", "SYS")
    paste = tmp_path / "mp.txt"
    paste.write_text("root@a1b2c3:/workspace# nvidia-smi topo -mp\n" + matrix)
    analysis = analyze(read_case([str(paste)], jobs=1).case)
    assert analysis.case.topologies[0].pci_only
    assert [f.code for f in analysis.findings if f.code in ("TOPO001", "TOPO003")] == []
    (evd,) = [f for f in analysis.findings if f.code == "EVD001"]
    assert "TOPO001 could not judge" in evd.message and "nvidia-smi topo -mp" in evd.message


# 1 (again). a host name cut by another writer's text is the same host ------------------------------------
def test_a_host_name_cut_by_another_writer_is_not_a_second_host(tmp_path: Path) -> None:
    log = tmp_path / "cut_host.log"
    log.write_text(
        "gke-pool-a3-node7:803:803 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0\n"
        "gke-pool-a3-node7:803:1369 [0] NCCL INFO ncclCommInitRank comm 0x5633e7a1c2d0 rank 0 nranks 2 cudaDev 0"
        " nvmlDev 0 busId 4000 commId 0x2d6c0b1e9fa40177 - Init START\n"
        "gke-pool-a3-node7:803:1369 [0] NCCL INFO ncclCommInitRank comm 0x5633e7a1c2d0 rank 0 nranks 2 cudaDev 0"
        " nvmlDev 0 busId 4000 commId 0x2d6c0b1e9fa40177 - Init COMPLETE\n"
        "gke-p# step 100 loss 2.31\n"
        "ool-a3-node7:803:1527 [0] NCCL INFO misc/socket.cc:775 -> 3\n"
    )
    analysis = analyze(read_case([str(log)], jobs=1).case)
    assert [h.name for h in analysis.case.hosts] == ["gke-pool-a3-node7"]
    assert [f for f in analysis.findings if f.code == "ENV002"] == []


# 8. wording and severities that say one thing ------------------------------------------------------------
def test_proxy_warnings_after_the_communicators_abort_are_teardown_not_failures(tmp_path: Path) -> None:
    log = tmp_path / "abort.log"
    log.write_text(
        "node-a:4410:4470 [0] NCCL INFO socketProgressOpt: abort called\n"
        "node-a:4410:4512 [0] proxy.cc:1458 NCCL WARN [Service thread] Accept failed Operation now in progress\n"
        "node-a:4410:4512 [0] proxy.cc:1521 NCCL WARN [Proxy Service 0] Failed to execute operation Close from"
        " rank 0, retcode 3\n"
        "node-a:4410:4410 [0] NCCL INFO comm 0x55c0d1e2f300 rank 0 nranks 2 cudaDev 0 busId 4000 - Abort COMPLETE\n"
    )
    analysis = analyze(read_case([str(log)], jobs=1).case)
    assert [f for f in analysis.findings if f.code == "NET006"] == []
    run005 = [f for f in analysis.findings if f.code == "RUN005"]
    assert run005 and {f.severity for f in run005} == {"info"}
    assert all("after the communicator's abort" in f.message for f in run005)


def test_net003_on_one_host_is_info_and_an_exclusion_list_selects_nothing(tmp_path: Path) -> None:
    log = tmp_path / "ifname.log"
    log.write_text(
        "ip-172-31-1-71:2285:2285 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to ^lo,docker,veth\n"
        "ip-172-31-1-71:2285:2285 [0] NCCL INFO Bootstrap : Using ens3:172.31.1.71<0>\n"
    )
    assert [f for f in analyze(read_case([str(log)], jobs=1).case).findings if f.code == "NET003"] == []


# 10. garbage is refused, and fast ------------------------------------------------------------------------
def _random_text(size: int, seed: int = 40) -> bytes:
    import base64
    import random

    rng = random.Random(seed)
    lines, total = [], 0
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    while total < size:
        words = " ".join("".join(rng.choices(letters, k=rng.randint(2, 9))) for _ in range(6))
        three = [
            base64.b64encode(rng.randbytes(rng.choice((48, 57, 60)))) + b"\n",
            (words + ".\n").encode(),
            ("RAS " + words + "\n").encode(),  # a keyword and free text: no NCCL message without NCCL's prefix
        ]
        lines += three
        total += sum(map(len, three))
    return b"".join(lines)


def test_random_text_is_refused_in_one_line_and_its_lines_are_counted_not_parsed(tmp_path: Path) -> None:
    junk = tmp_path / "junk.txt"
    junk.write_bytes(_random_text(3 * 1024 * 1024))
    done = run_cli("analyze", str(junk))
    assert done.returncode == 2, done.stdout
    assert done.stderr.decode().strip().splitlines() == [
        f"ncclscope: {junk}: no NCCL log, topology matrix or nccl-tests output found"
    ]
    assert done.stdout == b""
    source = read_case([str(junk)], jobs=1).case.sources[0]
    assert source.nccl_lines == 0 and source.skipped_lines == source.lines > 0


def test_a_log_after_junk_is_still_read_and_the_skipped_lines_are_said(tmp_path: Path) -> None:
    mixed = tmp_path / "junk_then_log.txt"
    mixed.write_bytes(_random_text(9 * 1024 * 1024) + (REPO / "fixtures/nccl/v2_26_socket_fallback.log").read_bytes())
    case = read_case([str(mixed)], jobs=1).case
    assert case.sources[0].skipped_lines > 0 and case.sources[0].recognized == case.sources[0].nccl_lines > 100
    assert [h.name for h in case.hosts] == ["node-b01", "node-b02"]
    summary = run_cli("parse", str(mixed)).stdout.decode()
    assert "lines skipped before the first it knows" in summary


def test_a_test_that_failed_at_once_is_not_taken_for_junk(tmp_path: Path) -> None:
    failed = tmp_path / "failed.txt"
    failed.write_text(
        "# Using devices\n"
        "gpu: Test CUDA failure common.cu:1030 'system not yet initialized'\n"
        " .. gpu pid 3018: Test failure common.cu:937\n"
        "Primary job  terminated normally, but 1 process returned a non-zero exit code.\n"
    )
    analysis = analyze(read_case([str(failed)], jobs=1).case)
    (bw005,) = [f for f in analysis.findings if f.code == "BW005"]
    assert "system not yet initialized" in bw005.message


# a healthy run has a plain verdict (issue 41, item 6) ----------------------------------------------------
def test_a_healthy_run_says_so_first_with_its_figure(tmp_path: Path) -> None:
    text = run_cli("analyze", "fixtures/nccl_tests/v2_17_unified_8xh100.txt").stdout.decode().splitlines()
    assert text[3] == "Healthy: all_gather on 8x H100-SXM, 1 host peaks at 373.25 GB/s, 101% of the 370 GB/s expected."
    floor = run_cli("analyze", str(VERDICTS / "mpirun_ib_hca_list.txt")).stdout.decode().splitlines()
    assert floor[3].startswith("Healthy as far as can be told: all_reduce on 2 hosts x 8 H100-SXM (16 ranks) peaks")
    page = tmp_path / "healthy.html"
    assert run_cli("report", "fixtures/nccl_tests/v2_17_unified_8xh100.txt", "-o", str(page)).returncode == 0
    html = page.read_text()
    assert html.index("Healthy: all_gather on 8x H100-SXM") < html.index("Findings</h2>")
