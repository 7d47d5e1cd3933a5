"""BW001-BW006: what nccl-tests results say, judged through the real pipeline on fixtures.

The bandwidth fixtures of this family are in fixtures/bench (see its README); the older nccl-tests
layouts and the mixed inputs come from fixtures/nccl_tests and fixtures/mixed.
"""

from __future__ import annotations

import json

from ncclscope.case.read import read_case
from ncclscope.diagnose.engine import analyze

from conftest import REPO, analysis_of, run_cli
from conftest import evidence_lines as lines
from conftest import findings_of as findings
from conftest import only_finding as only

BENCH = "fixtures/bench"
LOW = f"{BENCH}/low_allreduce_8xh100.txt"
MODERATE = f"{BENCH}/moderate_allreduce_8xh100.txt"
RING_ONLY_NCCL = f"{BENCH}/ring_only_nccl216_8xh100.txt"
CAPPED_256M = f"{BENCH}/capped_256m_8xh100.txt"
LATENCY_HIGH = f"{BENCH}/latency_high_8xh100.txt"
ONE_RANK_EACH = f"{BENCH}/no_mpi_one_rank_each.txt"
FABRIC_MANAGER = f"{BENCH}/fabric_manager_not_running.txt"
OLD_ERROR_WRONG = f"{BENCH}/old_error_column_wrong.txt"
SHM_RUN = f"{BENCH}/shm_allreduce_8xh100.txt"

HEALTHY_NVLS = "fixtures/nccl_tests/v2_19_per_iter_columns.txt"
HEALTHY_ALL_GATHER = "fixtures/nccl_tests/v2_17_unified_8xh100.txt"
ONE_RANK = "fixtures/nccl_tests/one_rank_busbw_zero.txt"
NO_MPI_TWO_HOSTS = "fixtures/nccl_tests/no_mpi_duplicate_headers.txt"
WRONG_RESULTS = "fixtures/nccl_tests/wrong_results.txt"
OLD_ERROR_NOISE = "fixtures/nccl_tests/v2_11_all_reduce_error_col.txt"
FAILURE_MID_TABLE = "fixtures/nccl_tests/failure_mid_table.txt"
HEADERLESS = "fixtures/nccl_tests/headerless_rows.txt"
TCP_TWO_HOSTS = "fixtures/nccl_tests/v2_19_exponent_numbers.txt"
HEALTHY_TWO_HOSTS = "fixtures/nccl_tests/mpi_ucx_warnings.txt"
SEED_LIKE = "fixtures/mixed/seed_like_4xh100.txt"
DEMO = "fixtures/mixed/multi_host_job_problems.txt"


# ------------------------------------------------------------------------------------- BW001
def test_busbw_under_half_of_nvls_on_8xh100_is_an_error() -> None:
    f = only("BW001", LOW)
    assert f.severity == "error"
    assert "153.1 GB/s at 8 GiB" in f.message
    assert "32% of the 480 GB/s expected" in f.message
    assert "NVLS all_reduce" in f.message and "nccl#1455" in f.message
    assert 32 in lines(f)  # the 8 GiB row


def test_busbw_between_half_and_80_percent_is_a_warning() -> None:
    f = only("BW001", MODERATE)
    assert f.severity == "warning"
    assert "270.6 GB/s" in f.message and "56% of the 480 GB/s" in f.message


def test_nccl_before_nvls_is_judged_against_ring_and_passes() -> None:
    assert findings("BW001", RING_ONLY_NCCL) == []
    judgement = analyze(read_case([str(REPO / RING_ONLY_NCCL)], jobs=1).case).bandwidth[0]
    assert judgement.algorithm == "ring"
    assert judgement.expected_busbw == 365
    assert "NCCL 2.16 predates NVLS" in judgement.verdict


def test_healthy_nvls_all_reduce_on_8xh100_is_not_flagged() -> None:
    assert findings("BW001", HEALTHY_NVLS) == []


def test_healthy_all_gather_is_judged_against_the_ring_figure() -> None:
    assert findings("BW001", HEALTHY_ALL_GATHER) == []
    judgement = analyze(read_case([str(REPO / HEALTHY_ALL_GATHER)], jobs=1).case).bandwidth[0]
    assert judgement.algorithm == "ring" and judgement.expected_busbw == 370


def test_a_run_on_gpus_without_reference_figures_names_them_from_its_device_lines(tmp_path) -> None:
    """The device lines name the model: the verdict says which GPUs ran, not 'unknown GPUs', and why it cannot
    judge them (corpus nccltests-d706, two GeForce RTX 2080 Ti)."""
    text = (REPO / HEALTHY_ALL_GATHER).read_text(encoding="utf-8").replace("NVIDIA H100 80GB HBM3", "NVIDIA RTX A4000")
    log = tmp_path / "a4000.txt"
    log.write_text(text, encoding="utf-8")
    judgement = analyze(read_case([str(log)], jobs=1).case).bandwidth[0]
    assert judgement.verdict.startswith("all_gather on 8x NVIDIA RTX A4000, 1 host: peak busbw"), judgement.verdict
    assert "no reference figures for 'NVIDIA RTX A4000'" in judgement.verdict
    assert "unknown GPUs" not in judgement.verdict


def test_one_rank_run_is_not_judged() -> None:
    assert findings("BW001", ONE_RANK) == []
    assert findings("BW002", ONE_RANK) == []


def test_low_busbw_names_shm_and_the_override_as_the_likely_cause() -> None:
    f = only("BW001", SHM_RUN)
    assert f.severity == "error"
    assert "through host memory (SHM)" in f.message
    assert "NCCL_P2P_DISABLE=1" in f.message
    assert "TOPO004" in f.related or "ENV001" in f.related


def test_multi_host_socket_job_is_low_and_names_sockets_and_missing_gdr() -> None:
    f = only("BW001", DEMO)
    assert f.severity == "error"
    assert "2 hosts x 8 H100-SXM" in f.message
    assert "NET/Socket on gpu-demo-b" in f.message
    assert "without GPUDirect RDMA on gpu-demo-a" in f.message
    assert "NET001" in f.related


def test_tcp_speed_between_two_hosts_is_below_even_the_floor_of_one_nic() -> None:
    f = only("BW001", TCP_TWO_HOSTS)
    assert f.severity == "error"
    assert "floor" in f.message


def test_two_host_all_reduce_above_the_network_floor_is_not_flagged() -> None:
    assert findings("BW001", HEALTHY_TWO_HOSTS) == []


def test_unknown_platform_is_said_by_evd001_not_by_a_bw001_that_judges_nothing() -> None:
    assert findings("BW001", HEADERLESS) == []
    (evd,) = findings("EVD001", HEADERLESS)
    assert evd.message.count("BW001 could not judge") == 2, evd.message
    assert evd.message.count("has no expectation to be compared with") == 2
    # the rank count is inferred from busbw/algbw (2(n-1)/n); what is missing is the GPU model
    assert "nvidia-smi -L" in evd.message


def test_capped_run_is_not_called_low() -> None:
    assert findings("BW001", CAPPED_256M) == []


# ------------------------------------------------------------------------------------- BW002
def test_run_stopping_at_256_mib_cannot_be_judged() -> None:
    f = only("BW002", CAPPED_256M)
    assert f.severity == "info"
    assert "stops at 256 MiB" in f.message and "1 GiB" in f.message
    assert 44 in lines(f)


def test_run_reaching_8_gib_is_not_too_small() -> None:
    assert findings("BW002", LOW) == []


def test_run_that_failed_midway_is_left_to_bw005() -> None:
    assert findings("BW002", FAILURE_MID_TABLE) == []


# ------------------------------------------------------------------------------------- BW003
def test_wrong_element_counts_are_an_error() -> None:
    f = only("BW003", WRONG_RESULTS)
    assert f.severity == "error"
    assert "#wrong 4096 at 16 MiB out-of-place" in f.message
    assert "Out of bounds values : 3 FAILED" in f.message


def test_old_error_column_above_the_float_tolerance_is_wrong() -> None:
    f = only("BW003", OLD_ERROR_WRONG)
    assert "2 result cell(s) wrong" in f.message
    assert "largest error 2 at 64 MiB out-of-place" in f.message
    assert lines(f)[:2] == [23, 26]


def test_old_error_column_rounding_noise_is_not_wrong() -> None:
    assert findings("BW003", OLD_ERROR_NOISE) == []
    assert findings("BW003", "fixtures/nccl_tests/v2017_layout.txt") == []


# ------------------------------------------------------------------------------------- BW004
def test_two_hosts_each_printing_rank_0_are_not_one_job() -> None:
    f = only("BW004", NO_MPI_TWO_HOSTS)
    assert f.severity == "error"
    assert "gpu-n1:41120" in f.message and "gpu-n2:40987" in f.message
    assert "not built with MPI" in f.message
    assert f.hosts == ["gpu-n1", "gpu-n2"]


def test_one_rank_processes_interleaved_on_one_host_are_not_one_job() -> None:
    f = only("BW004", ONE_RANK_EACH)
    assert "4 separate all_reduce runs" in f.message and "1 rank(s)" in f.message


def test_two_sequential_runs_on_one_host_are_one_job_each() -> None:
    assert findings("BW004", OLD_ERROR_NOISE) == []
    assert findings("BW004", ONE_RANK) == []


def test_a_run_directory_of_one_gpu_runs_one_process_per_collective_is_not_flagged() -> None:
    # our own `ncclscope run` on a 1-GPU machine: five collectives, five processes one after the other,
    # each the owner of its own 1-rank table
    assert findings("BW004", "fixtures/device/h100_run_nccl_tests") == []
    assert findings("BW004", "fixtures/device/h100_run_torch") == []


def test_a_one_rank_table_beside_other_processes_that_ran_no_table_is_flagged() -> None:
    f = only("BW004", ONE_RANK, "fixtures/nccl/v2_7_single_host_busid.log")
    assert "has 1 rank" in f.message and "each process ran alone" in f.message


# ------------------------------------------------------------------------------------- BW005
def test_system_not_yet_initialized_means_fabric_manager_not_running() -> None:
    f = only("BW005", FABRIC_MANAGER)
    assert f.severity == "error"
    assert "fabric manager is not running" in f.message
    assert f.hosts == ["gpu-fm07"]
    assert lines(f) == [15, 16, 17]


def test_failure_glued_to_a_row_is_decoded_for_both_hosts() -> None:
    f = only("BW005", FAILURE_MID_TABLE)
    assert f.hosts == ["gpu-f03", "gpu-f04"]
    assert "illegal memory access" in f.message and "after 16 MiB" in f.message


def test_completed_run_has_no_failure() -> None:
    assert findings("BW005", LOW) == []


# ------------------------------------------------------------------------------------- BW006
def test_small_messages_slower_than_100_us_inside_one_nvlink_host_warn() -> None:
    f = only("BW006", LATENCY_HIGH)
    assert f.severity == "warning"
    assert "184.2 us" in f.message and "100 us" in f.message
    assert findings("BW001", LATENCY_HIGH) == []


def test_small_messages_at_usual_latency_do_not_warn() -> None:
    assert findings("BW006", SEED_LIKE) == []
    assert findings("BW006", HEALTHY_ALL_GATHER) == []


# ---------------------------------------------------------------------------------------- CLI
def test_cli_json_carries_the_finding_and_the_judgement() -> None:
    result = run_cli("analyze", "--format", "json", LOW)
    data = json.loads(result.stdout)
    codes = {f["code"]: f for f in data["findings"]}
    assert codes["BW001"]["severity"] == "error"
    assert codes["BW001"]["sources"]
    judgement = data["bandwidth"][0]
    assert judgement["expected_busbw"] == 480
    assert judgement["algorithm"] == "nvls"
    assert 0.31 < judgement["ratio"] < 0.33
    assert data["platform"]["key"] == "H100-SXM"


# ------------------------------------------------------------------ CPU processes (gloo)
GLOO_RUN = "fixtures/runner/torch_bench_gloo_2ranks.txt"


def test_a_gloo_run_between_cpu_processes_is_not_judged_against_gpu_figures():
    """The built-in benchmark on gloo is small and slow by design: no latency, size or bandwidth alarm."""
    codes = {f.code for f in analysis_of(GLOO_RUN).findings}
    assert codes == {"EVD001"}  # only: no NCCL log, no topology matrix


def test_a_gloo_run_says_why_it_is_not_judged():
    analysis = analysis_of(GLOO_RUN)
    assert len(analysis.bandwidth) == 7
    for judgement in analysis.bandwidth:
        assert judgement.expected_busbw is None
        assert "gloo between CPU processes" in judgement.verdict


def test_a_gloo_run_with_wrong_results_is_still_an_error(tmp_path):
    text = (REPO / GLOO_RUN).read_text()
    lines_ = text.splitlines()
    row = next(i for i, line in enumerate(lines_) if line.strip().startswith("1024 ") and "sum" in line)
    lines_[row] = lines_[row][: lines_[row].rindex("0")] + "3"  # in-place #wrong 0 -> 3
    wrong = tmp_path / "gloo_wrong.txt"
    wrong.write_text("\n".join(lines_) + "\n")
    assert only("BW003", wrong).severity == "error"


def test_a_gloo_run_directory_says_why_it_has_no_nccl_log(tmp_path):
    from ncclscope.model import RunCapture, RunRecord
    from ncclscope.runner.capture import HOST_REPORTS

    (tmp_path / "all_reduce.stdout.txt").write_text((REPO / GLOO_RUN).read_text())
    missing = [  # what the runner records on a machine without GPUs or InfiniBand
        RunCapture(name=r.name, command=r.argv, status="missing", detail=f"{r.argv[0]} not on PATH")
        for r in HOST_REPORTS
    ]
    manifest = RunRecord(backend="torch", inputs=["all_reduce.stdout.txt"], captures=missing)
    (tmp_path / "manifest.json").write_text(manifest.model_dump_json())
    messages = [f.message for f in analysis_of(tmp_path).findings if f.code == "EVD001"]
    (links,) = messages  # one finding: the NCCL log, the topology matrix, the hosts' reports of their links
    assert links.count("gloo between CPU processes") == 3, links
    assert "the hosts' own reports of their links (this run used gloo" in links
    assert "NET008, TOPO007, TOPO008, TOPO009, VER002" in links
    # each report the run could not capture, and what it would add
    assert "nvidia-smi -q missing (nvidia-smi not on PATH): each GPU's PCIe link, driver and VBIOS" in links
    assert "nvidia-smi nvlink -s missing (nvidia-smi not on PATH): each NVLink's state and speed (TOPO008)" in links
    assert "ibstat missing (ibstat not on PATH): each InfiniBand port's state and rate, and NIC firmware" in links
    assert "NCCL's topology and graph dumps absent (no NCCL ran)" in links


def test_a_lost_device_line_does_not_make_a_second_host(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from conftest import REPO

    lines = (REPO / "fixtures/bench/moderate_allreduce_8xh100.txt").read_text(encoding="utf-8").splitlines()
    lost = [line for line in lines if "Rank  0 Group" not in line]
    assert len(lost) == len(lines) - 1
    target = tmp_path / "lost.txt"
    target.write_text("\n".join(lost) + "\n", encoding="utf-8")
    finding = only("BW001", target)
    assert finding.message.startswith("all_reduce on 8x H100-SXM, 1 host:")
