"""The built-in benchmark (ncclscope.runner.torch_bench): real gloo processes on loopback, read by ncclscope's parser.

Every test that runs the benchmark starts real torch.distributed processes (torchrun, or two plain processes with
torchrun's environment). Without torch they are skipped, unless NCCLSCOPE_REQUIRE_TORCH=1 (CI) makes that a failure.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from ncclscope.case.read import read_case
from ncclscope.model import BenchmarkRow, BenchmarkRun, Measurement

from conftest import REPO, require_torch, run_cli

DEFAULT_SET = ["all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv"]
SIZES = [1024, 4096, 16384, 65536, 262144, 1048576]  # -b 1K -e 1M -f 4
NRANKS = 2
FIXTURE = "fixtures/runner/torch_bench_gloo_2ranks.txt"

# A finished benchmark: the process (stdout, stderr, exit status) and the runs ncclscope read from its stdout.
Outcome = tuple[subprocess.CompletedProcess[str], list[BenchmarkRun]]

# busbw / algbw per collective for n ranks (nccl-tests' doc/PERFORMANCE.md, formats.md C.9)
BUS_FACTOR = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "alltoall": lambda n: (n - 1) / n,
    "sendrecv": lambda n: 1.0,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
}


def bench_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT")}
    return dict(env, OMP_NUM_THREADS="1", **extra)


def torchrun(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The benchmark on two gloo ranks, started the way the runner starts it."""
    require_torch()
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={NRANKS}"]
    return subprocess.run(
        [*command, "-m", "ncclscope.runner.torch_bench", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env or bench_env(),
        timeout=120,
        check=False,
    )


def plain(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The module started without torchrun (command line checks come first)."""
    require_torch()
    return subprocess.run(
        [sys.executable, "-m", "ncclscope.runner.torch_bench", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env or bench_env(),
        timeout=60,
        check=False,
    )


def parsed(stdout: str, folder: Path) -> list[BenchmarkRun]:
    """The runs ncclscope's own reader finds in the benchmark's output, read from a file as `analyze` does."""
    path = folder / "bench.txt"
    path.write_text(stdout, encoding="utf-8")
    outcome = read_case([str(path)], jobs=1)
    assert outcome.exit_code == 0, outcome.messages
    assert outcome.case.sources[0].unrecognized == []
    return outcome.case.benchmarks


@pytest.fixture(scope="module")
def default_run(tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    result = torchrun(*DEFAULT_SET, "-b", "1K", "-e", "1M", "-f", "4", "-n", "5", "-w", "2")
    return result, parsed(result.stdout, tmp_path_factory.mktemp("default_run"))


@pytest.fixture(scope="module")
def corrupted_run(tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    result = torchrun(
        "all_reduce", "alltoall", "-b", "1K", "-e", "4K", "-f", "4", "-n", "1", "-w", "0",
        env=bench_env(NCCLSCOPE_TORCH_BENCH_CORRUPT="1"),
    )  # fmt: skip
    return result, parsed(result.stdout, tmp_path_factory.mktemp("corrupted_run"))


def places(row: BenchmarkRow) -> list[Measurement]:
    return [row.out_of_place, row.in_place]


def within_printed_digits(printed: float, exact: float, time_us: float) -> bool:
    """The cells carry two decimals here; the printed time (two decimals too) shifts `exact` by up to 0.005 us."""
    slack = exact * 0.005 / time_us
    return abs(printed - exact) <= 0.005 + slack + 1e-9


# ---------------------------------------------------------------------------------------------
# A healthy run


def test_benchmark_exits_zero_on_a_healthy_run(default_run: Outcome) -> None:
    result, _ = default_run
    assert result.returncode == 0, result.stderr


def test_each_collective_is_read_as_its_own_run_in_the_order_asked(default_run: Outcome) -> None:
    _, runs = default_run
    assert [run.collective for run in runs] == DEFAULT_SET


def test_each_run_has_two_ranks(default_run: Outcome) -> None:
    _, runs = default_run
    assert {run.collective: run.nranks for run in runs} == dict.fromkeys(DEFAULT_SET, NRANKS)


def test_each_run_has_the_sizes_asked(default_run: Outcome) -> None:
    _, runs = default_run
    assert {run.collective: [row.size for row in run.rows] for run in runs} == dict.fromkeys(DEFAULT_SET, SIZES)


def test_count_is_per_rank_where_nccl_tests_counts_every_rank_in_the_size(default_run: Outcome) -> None:
    _, runs = default_run
    for run in runs:
        per_rank = run.collective in ("all_gather", "reduce_scatter", "alltoall")
        assert [row.count for row in run.rows] == [size // 4 // (NRANKS if per_rank else 1) for size in SIZES]


def test_no_element_is_wrong(default_run: Outcome) -> None:
    _, runs = default_run
    for run in runs:
        unchecked = run.collective in ("alltoall", "sendrecv")
        assert [(row.out_of_place.wrong, row.in_place.wrong) for row in run.rows] == [
            (0, None if unchecked else 0)
        ] * len(SIZES), run.collective
    assert {run.out_of_bounds for run in runs} == {0}


def test_algbw_is_size_over_time(default_run: Outcome) -> None:
    _, runs = default_run
    for run in runs:
        for row in run.rows:
            for m in places(row):
                assert within_printed_digits(m.algbw, row.size / m.time_us / 1e3, m.time_us), (run.collective, row)


def test_busbw_is_algbw_times_the_factor_of_the_collective(default_run: Outcome) -> None:
    _, runs = default_run
    for run in runs:
        factor = BUS_FACTOR[run.collective](NRANKS)
        for row in run.rows:
            for m in places(row):
                exact = row.size / m.time_us / 1e3 * factor
                assert within_printed_digits(m.busbw, exact, m.time_us), (run.collective, row)


def test_avg_bus_bandwidth_is_the_mean_of_every_busbw_cell(default_run: Outcome) -> None:
    _, runs = default_run
    for run in runs:
        cells = [m.busbw for row in run.rows for m in places(row)]
        assert run.avg_busbw == pytest.approx(sum(cells) / len(cells), abs=0.005)


def test_only_rank_0_prints_and_each_block_names_the_benchmark_and_backend(default_run: Outcome) -> None:
    result, _ = default_run
    banners = [line for line in result.stdout.splitlines() if "(not nccl-tests)" in line]
    assert len(banners) == len(DEFAULT_SET)
    assert all("ncclscope" in line and "backend gloo" in line for line in banners)


def test_device_lines_say_cpu_with_gloo(default_run: Outcome) -> None:
    _, runs = default_run
    assert {(d.rank, d.bus_id, d.name.split()[0]) for d in runs[0].devices} == {(0, "cpu", "CPU"), (1, "cpu", "CPU")}


# ---------------------------------------------------------------------------------------------
# Wrong results, failures, wrong command lines


def test_a_corrupted_result_reaches_the_wrong_column(corrupted_run: Outcome) -> None:
    _, runs = corrupted_run
    assert {run.collective: [m.wrong for row in run.rows for m in places(row)] for run in runs} == {
        "all_reduce": [1, 1, 1, 1],
        "alltoall": [1, None, 1, None],  # in place it is undefined and unchecked, as in nccl-tests
    }


def test_a_corrupted_result_fails_the_out_of_bounds_line(corrupted_run: Outcome) -> None:
    _, runs = corrupted_run
    assert [(run.out_of_bounds, run.out_of_bounds_ok) for run in runs] == [(4, False), (2, False)]


def test_a_corrupted_result_fails_the_run_with_a_one_line_reason(corrupted_run: Outcome) -> None:
    result, _ = corrupted_run
    assert result.returncode != 0
    assert "torch_bench: 6 data check(s) found wrong elements" in result.stderr


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_peer_that_leaves_mid_run_fails_the_run_with_a_one_line_reason() -> None:
    """Rank 1 stops after 1 KiB, rank 0 goes on to 2 KiB: its collective fails at once, it does not hang."""
    require_torch()
    common = ["all_reduce", "-n", "1", "-w", "0", "-b", "1K", "--timeout", "30"]
    env = bench_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE="2")
    module = [sys.executable, "-m", "ncclscope.runner.torch_bench"]
    leaver = subprocess.Popen(
        [*module, *common, "-e", "1K"], cwd=REPO, env=dict(env, RANK="1", LOCAL_RANK="1"),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        result = subprocess.run(
            [*module, *common, "-e", "1M"], cwd=REPO, env=dict(env, RANK="0", LOCAL_RANK="0"),
            capture_output=True, text=True, timeout=90, check=False,
        )  # fmt: skip
    finally:
        leaver.wait(timeout=60)
    assert result.returncode == 1
    assert result.stderr.startswith("torch_bench: rank 0: all_reduce at 2048 bytes failed: ")
    assert len(result.stderr.strip().splitlines()) == 1


def test_outside_torchrun_it_says_how_to_start_it() -> None:
    result = plain("all_reduce")
    assert result.returncode == 2
    assert "python -m torch.distributed.run" in result.stderr


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["-b", "8K", "-e", "1K"], "-b 8192 is larger than -e 1024"),
        (["-b", "2"], "smaller than one float element"),
        (["-b", "12Q"], "size '12Q': not a size"),
        (["all_reduce", "gather"], "unknown collective gather"),
    ],
    ids=["min-above-max", "below-one-element", "bad-suffix", "unknown-collective"],
)
def test_a_wrong_command_line_is_a_usage_error(
    args: list[str], reason: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """In this process (importing torch once costs seconds): the command line is checked before any process group."""
    require_torch()
    from ncclscope.runner.torch_bench import main

    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    stderr = capsys.readouterr().err
    assert stderr.startswith("usage: torch_bench")
    assert reason in stderr


# ---------------------------------------------------------------------------------------------
# The captured fixture (no torch needed)


def test_the_captured_run_is_analyzed_with_every_table() -> None:
    result = run_cli("analyze", FIXTURE, "--format", "json", "--fail-on", "never")
    assert result.returncode == 0, result.stderr
    runs = json.loads(result.stdout)["case"]["benchmarks"]
    expected = [*DEFAULT_SET, "broadcast", "reduce"]
    assert [(run["collective"], run["nranks"], len(run["rows"])) for run in runs] == [(c, 2, 6) for c in expected]
