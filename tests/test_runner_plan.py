"""`ncclscope run`'s planning: command lines per backend and launcher, sizes, environment, backend choice."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from ncclscope.runner.backend import BackendError, choose_backend, find_binary, module_available
from ncclscope.runner.capture import nccl_version, version_from_code
from ncclscope.runner.environment import debug_environment, recorded_environment
from ncclscope.runner.plan import (
    Layout,
    PlanError,
    Sweep,
    check_layout,
    collective_names,
    nccl_tests_command,
    parse_hosts,
    parse_size,
    torch_command,
)

SWEEP = Sweep("8", "8G", 2, 20, 5)
ENV_NAMES = ["NCCL_DEBUG", "NCCL_DEBUG_FILE"]


def executable(folder: Path, name: str) -> Path:
    """An empty executable file: only its presence is looked at here."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


# ------------------------------------------------------------------------------ command lines
def test_nccl_tests_on_one_host_is_one_process_driving_every_gpu() -> None:
    argv = nccl_tests_command("/opt/nt/all_reduce_perf", SWEEP, Layout("none", 8), ENV_NAMES)
    assert argv == "/opt/nt/all_reduce_perf -b 8 -e 8G -f 2 -n 20 -w 5 -g 8 -c 1".split()


def test_nccl_tests_under_mpirun_is_one_process_per_gpu_with_the_debug_variables_exported() -> None:
    layout = Layout("mpirun", 8, parse_hosts("h1,h2", 8))
    argv = nccl_tests_command("all_reduce_perf", SWEEP, layout, ENV_NAMES)
    prefix = "mpirun -np 16 -H h1:8,h2:8 --bind-to none -x NCCL_DEBUG -x NCCL_DEBUG_FILE".split()
    assert argv[: len(prefix)] == prefix
    assert argv[len(prefix) :] == "all_reduce_perf -b 8 -e 8G -f 2 -n 20 -w 5 -g 1 -c 1".split()


def test_mpirun_takes_per_host_rank_counts() -> None:
    layout = Layout("mpirun", 8, parse_hosts("h1:4,h2:8", 8))
    argv = nccl_tests_command("all_reduce_perf", SWEEP, layout, [])
    assert argv[:5] == ["mpirun", "-np", "12", "-H", "h1:4,h2:8"]


def test_nccl_tests_under_srun_gives_every_task_all_gpus_of_its_node() -> None:
    layout = Layout("srun", 4, parse_hosts("n1,n2", 4))
    argv = nccl_tests_command("sendrecv_perf", SWEEP, layout, ENV_NAMES)
    expected = "srun --nodes 2 --ntasks-per-node 4 --gpus-per-node 4 --nodelist n1,n2 --export ALL sendrecv_perf"
    assert argv[:12] == expected.split()
    assert argv[-4:] == ["-g", "1", "-c", "1"]


def test_torch_on_one_host_is_a_standalone_torchrun_of_the_builtin_benchmark() -> None:
    argv = torch_command("alltoall", Sweep("8", "16M", 2, 20, 5), Layout("none", 2), "python3", "gloo", [])
    assert (
        argv
        == (
            "python3 -m torch.distributed.run --standalone --nproc-per-node 2 -m ncclscope.runner.torch_bench alltoall"
            " -b 8 -e 16M -f 2 -n 20 -w 5 --backend gloo --check 1"
        ).split()
    )


def test_torch_on_several_hosts_meets_at_a_rendezvous_on_the_first_host_one_torchrun_per_host() -> None:
    layout = Layout("srun", 8, parse_hosts("a,b,c", 8))
    argv = torch_command("all_reduce", SWEEP, layout, "python3", "nccl", ENV_NAMES)
    assert argv[:9] == "srun --nodes 3 --ntasks-per-node 1 --nodelist a,b,c --export ALL".split()
    text = " ".join(argv)
    assert "--nnodes 3 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint a:29500" in text
    assert "--standalone" not in text


def test_torchrun_launcher_runs_the_same_rendezvous_command_here_without_a_wrapper() -> None:
    argv = torch_command("all_reduce", SWEEP, Layout("torchrun", 8, parse_hosts("a,b", 8)), "py", "nccl", [])
    assert argv[:3] == ["py", "-m", "torch.distributed.run"]


def test_several_hosts_without_a_launcher_are_refused() -> None:
    with pytest.raises(PlanError, match="need a launcher"):
        check_layout(Layout("none", 8, parse_hosts("h1,h2", 8)), "nccl-tests")


def test_torchrun_launcher_does_not_start_nccl_tests() -> None:
    with pytest.raises(PlanError, match="torch backend"):
        check_layout(Layout("torchrun", 8), "nccl-tests")


# ------------------------------------------------------------------------------ sizes and names
@pytest.mark.parametrize(("text", "size"), [("8", 8), ("64K", 65536), ("16M", 16 << 20), ("8g", 8 << 30)])
def test_sizes_read_like_nccl_tests(text: str, size: int) -> None:
    assert parse_size(text, "-e") == size


def test_a_size_that_is_not_one_names_the_option() -> None:
    with pytest.raises(PlanError, match="-e '8 GiB'"):
        parse_size("8 GiB", "-e")


def test_the_progress_bar_counts_one_row_per_size_of_the_sweep() -> None:
    assert Sweep("8", "1M", 2, 1, 0).sizes() == 18
    assert SWEEP.sizes() == 31


def test_collectives_default_to_the_five_the_rules_judge_and_accept_binary_names() -> None:
    assert collective_names(None) == ["all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv"]
    assert collective_names(["all_reduce_perf", "all_reduce", "broadcast"]) == ["all_reduce", "broadcast"]


def test_an_unknown_collective_lists_the_known_ones() -> None:
    with pytest.raises(PlanError, match="unknown collective 'allreduce'.*all_reduce"):
        collective_names(["allreduce"])


# ------------------------------------------------------------------------------ environment
def test_the_run_sets_every_debug_variable_the_rules_need(tmp_path: Path) -> None:
    env = debug_environment(tmp_path, {})
    assert env.applied == {
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_SUBSYS": "INIT,ENV,GRAPH,NET,TUNING",
        "NCCL_DEBUG_TIMESTAMP_LEVELS": "WARN,INFO",
        "NCCL_DEBUG_FILE": f"{tmp_path.resolve()}/nccl.%h.%p.log",
        "NCCL_TOPO_DUMP_FILE": f"{tmp_path.resolve()}/nccl-topo.xml",
        "NCCL_GRAPH_DUMP_FILE": f"{tmp_path.resolve()}/nccl-graph.xml",
    }


def test_a_value_the_user_exported_wins_and_is_recorded(tmp_path: Path) -> None:
    env = debug_environment(tmp_path, {"NCCL_DEBUG_SUBSYS": "ALL", "PATH": "/bin"})
    assert env.user == {"NCCL_DEBUG_SUBSYS": "ALL"}
    assert "NCCL_DEBUG_SUBSYS" not in env.applied
    child = env.for_children({"NCCL_DEBUG_SUBSYS": "ALL", "PATH": "/bin"})
    assert child["NCCL_DEBUG_SUBSYS"] == "ALL" and child["NCCL_DEBUG"] == "INFO"
    assert "NCCL_DEBUG_SUBSYS" in env.names  # still exported through mpirun -x, with the user's value


def test_env_txt_keeps_the_nccl_cuda_and_fabric_variables_only() -> None:
    text = recorded_environment({"NCCL_IB_HCA": "mlx5", "FI_PROVIDER": "efa", "HOME": "/root", "UCX_TLS": "rc"})
    assert text == "FI_PROVIDER=efa\nNCCL_IB_HCA=mlx5\nUCX_TLS=rc\n"


# ------------------------------------------------------------------------------ backend choice
def test_binaries_are_found_on_path(tmp_path: Path) -> None:
    binary = executable(tmp_path / "bin", "all_reduce_perf")
    assert find_binary("all_reduce", "none", [], {"PATH": str(tmp_path / "bin")}) == str(binary.resolve())


def test_nccl_tests_dir_comes_before_path(tmp_path: Path) -> None:
    executable(tmp_path / "bin", "all_reduce_perf")
    chosen = executable(tmp_path / "nt", "all_reduce_perf")
    found = find_binary("all_reduce", "none", [tmp_path / "nt"], {"PATH": str(tmp_path / "bin")})
    assert found == str(chosen.resolve())


def test_nccl_tests_home_and_its_build_folder_are_searched(tmp_path: Path) -> None:
    built = executable(tmp_path / "nccl-tests" / "build", "alltoall_perf")
    backend = choose_backend("auto", ["alltoall"], "none", None, {"NCCL_TESTS_HOME": str(tmp_path / "nccl-tests")})
    assert backend.name == "nccl-tests" and backend.binaries == {"alltoall": str(built.resolve())}


def test_mpi_builds_named_perf_mpi_are_preferred_under_a_launcher(tmp_path: Path) -> None:
    executable(tmp_path, "all_reduce_perf")
    mpi = executable(tmp_path, "all_reduce_perf_mpi")
    assert find_binary("all_reduce", "mpirun", [tmp_path], {"PATH": ""}) == str(mpi.resolve())


def test_auto_takes_torch_when_a_binary_is_missing(tmp_path: Path) -> None:
    executable(tmp_path, "all_reduce_perf")
    backend = choose_backend("auto", ["all_reduce", "sendrecv"], "none", tmp_path, {"PATH": ""}, "os")
    assert backend.name == "torch"


def test_an_importable_module_is_seen_without_importing_it() -> None:
    assert module_available("json")
    assert not module_available("ncclscope_no_such_module")


def test_without_nccl_tests_or_torch_the_message_says_how_to_get_either(tmp_path: Path) -> None:
    with pytest.raises(BackendError) as raised:
        choose_backend("auto", ["all_reduce"], "none", tmp_path, {"PATH": ""}, "ncclscope_no_such_module")
    assert "pip install 'ncclscope[runner]'" in str(raised.value)
    assert "--nccl-tests-dir" in str(raised.value) and "NCCL_TESTS_HOME" in str(raised.value)


def test_asking_for_torch_without_it_says_how_to_install_it() -> None:
    with pytest.raises(BackendError, match=r"ncclscope\[runner\]"):
        choose_backend("torch", ["all_reduce"], "none", None, {"PATH": ""}, "ncclscope_no_such_module")


# ------------------------------------------------------------------------------ versions
def test_nccl_version_codes_of_both_generations_decode() -> None:
    assert version_from_code(22803) == "2.28.3"
    assert version_from_code(2708) == "2.7.8"


def test_the_nccl_version_line_wins_over_the_nccl_tests_banner() -> None:
    banner = "# nccl-tests version 2.17.6 nccl-headers=22703 nccl-library=22703"
    assert nccl_version([banner]) == "2.27.3"
    assert nccl_version([banner, "host:1:1 [0] NCCL INFO NCCL version 2.27.5+cuda12.9"]) == "2.27.5"


# ------------------------------------------------------------------------------ one topology dump per host
def test_a_run_on_several_hosts_asks_each_host_for_its_own_dumps(tmp_path: Path) -> None:
    assert "NCCLSCOPE_HOST_DUMPS" not in debug_environment(tmp_path, {}).wanted  # one host: rank 0's dumps
    env = debug_environment(tmp_path, {}, hosts=2)
    assert env.applied["NCCLSCOPE_HOST_DUMPS"] == "1"
    # dump files the user named stay as the user named them
    assert "NCCLSCOPE_HOST_DUMPS" not in debug_environment(tmp_path, {"NCCL_TOPO_DUMP_FILE": "/x.xml"}, hosts=2).wanted
    layout = Layout("mpirun", 8, parse_hosts("h1,h2", 8))
    argv = nccl_tests_command("all_reduce_perf", SWEEP, layout, env.names)
    assert "-x" in argv and "NCCLSCOPE_HOST_DUMPS" in argv
    wrapper = argv.index("sh")
    assert argv[wrapper + 1] == "-c" and argv[wrapper + 3] == "ncclscope-host-dumps"
    assert argv[wrapper + 4 :] == "all_reduce_perf -b 8 -e 8G -f 2 -n 20 -w 5 -g 1 -c 1".split()


@pytest.mark.parametrize(
    ("ranks", "expected_rank"),
    [
        ({"OMPI_COMM_WORLD_RANK": "8", "OMPI_COMM_WORLD_LOCAL_RANK": "0"}, "8"),  # Open MPI
        ({"SLURM_PROCID": "16", "SLURM_LOCALID": "0"}, "16"),  # srun
        ({"PMI_RANK": "4", "MPI_LOCALRANKID": "0"}, "4"),  # MPICH / Intel MPI
        ({"OMPI_COMM_WORLD_RANK": "9", "OMPI_COMM_WORLD_LOCAL_RANK": "1"}, None),  # not the host's first
    ],
)
def test_the_wrapper_gives_local_rank_0_its_hosts_dump_files(tmp_path: Path, ranks: dict, expected_rank) -> None:  # type: ignore[no-untyped-def,type-arg]
    import os
    import socket
    import subprocess

    from ncclscope.runner.environment import host_dump_command

    base = {k: v for k, v in os.environ.items() if not k.startswith(("OMPI_", "SLURM_", "PMI_", "MPI_"))}
    dumps = {"NCCL_TOPO_DUMP_FILE": "/runs/r1/nccl-topo.xml", "NCCL_GRAPH_DUMP_FILE": "/runs/r1/nccl-graph.xml"}
    env = {**base, **dumps, **ranks, "NCCLSCOPE_HOST_DUMPS": "1"}
    done = subprocess.run(host_dump_command(["env"]), env=env, capture_output=True, text=True, check=True)
    seen = dict(line.split("=", 1) for line in done.stdout.splitlines() if line.startswith("NCCL_"))
    host = socket.gethostname().split(".")[0]
    if expected_rank is None:
        assert seen["NCCL_TOPO_DUMP_FILE"] == "/runs/r1/nccl-topo.xml" and "NCCL_TOPO_DUMP_FILE_RANK" not in seen
    else:
        assert seen["NCCL_TOPO_DUMP_FILE"] == f"/runs/r1/nccl-topo.{host}.xml"
        assert seen["NCCL_GRAPH_DUMP_FILE"] == f"/runs/r1/nccl-graph.{host}.xml"
        assert seen["NCCL_TOPO_DUMP_FILE_RANK"] == seen["NCCL_GRAPH_DUMP_FILE_RANK"] == expected_rank


def test_the_built_in_benchmark_sets_the_same_for_torchruns_local_rank_0() -> None:
    from ncclscope.runner.environment import host_dump_env

    env = {"NCCLSCOPE_HOST_DUMPS": "1", "RANK": "8", "LOCAL_RANK": "0", "NCCL_TOPO_DUMP_FILE": "/r/nccl-topo.xml"}
    assert host_dump_env(env, "gpu-b07.cluster.example") == {
        "NCCL_TOPO_DUMP_FILE": "/r/nccl-topo.gpu-b07.xml",
        "NCCL_TOPO_DUMP_FILE_RANK": "8",
    }
    assert host_dump_env({**env, "LOCAL_RANK": "3"}, "gpu-b07") == {}
    assert host_dump_env({**env, "NCCLSCOPE_HOST_DUMPS": ""}, "gpu-b07") == {}
