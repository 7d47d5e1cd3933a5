"""`ncclscope run` end to end, through the real command line and real child processes.

nccl-tests binaries need a GPU, which this machine lacks, so the nccl-tests path runs stand-ins:
small shell scripts named like the binaries (`all_reduce_perf`) that print real output captured
from ncclscope's built-in benchmark (fixtures/runner/torch_bench_gloo_2ranks.txt), write an NCCL
debug log where NCCL_DEBUG_FILE says, and then succeed, fail or hang. Everything else is real:
the runner, its process groups, timeouts, signals, the run directory and the analysis. The gloo
test runs the torch backend for real.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ncclscope.case.read import read_case

from conftest import FIXTURES, REPO, require_torch, run_cli

CAPTURED = FIXTURES / "runner" / "torch_bench_gloo_2ranks.txt"
NCCL_LOG_LINES = [  # written from formats.md A.1 (INFO and WARN prefixes)
    "{host}:{pid}:{pid} [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
    "{host}:{pid}:{pid} [0] NCCL INFO Bootstrap : Using eth0:10.1.2.3<0>",
]
WARN_LINE = "{host}:{pid}:{pid} [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.1.2.4<43211> failed : Software caused connection abort"  # noqa: E501


def captured_block(collective: str) -> str:
    """One collective's block of the captured benchmark output, as the binary for it would print it."""
    text = CAPTURED.read_text(encoding="utf-8")
    start = text.index(f"# Collective test starting: {collective}_perf")
    start = text.rfind("\n", 0, start - 1) + 1  # with the benchmark's banner line before it
    end = text.index(f"# Collective test concluded: {collective}_perf")
    return text[start : text.index("\n", end) + 1]


def stand_in(folder: Path, collective: str, then: str = "exit 0", table: bool = True, warn: bool = False) -> Path:
    """An executable `<collective>_perf` printing captured output and an NCCL log, then running `then`."""
    folder.mkdir(parents=True, exist_ok=True)
    output = folder / f"{collective}.out"
    output.write_text(captured_block(collective) if table else captured_block(collective).split("#\n#  ")[0])
    log_lines = NCCL_LOG_LINES + ([WARN_LINE] if warn else [])
    log = "\n".join(line.replace("{host}", "$host").replace("{pid}", "$$") for line in log_lines)
    script = folder / f"{collective}_perf"
    script.write_text(
        "#!/bin/sh\n"
        "host=$(hostname | cut -d. -f1)\n"
        'log=$(printf %s "$NCCL_DEBUG_FILE" | sed "s/%h/$host/; s/%p/$$/")\n'
        f'cat > "$log" <<EOF\n{log}\nEOF\n'
        f'cat "{output}"\n'
        f"{then}\n",
        encoding="utf-8",
    )
    script.chmod(0o755)
    return script


def manifest(run_dir: Path) -> dict:
    return json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))


def run_with_stand_ins(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return run_cli("run", "--backend", "nccl-tests", "--nccl-tests-dir", str(tmp_path / "nt"), *args, cwd=tmp_path)


# ------------------------------------------------------------------------------ the nccl-tests path
@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess[bytes]]:
    """One run, two collectives, read by the tests below (which only look)."""
    tmp_path = tmp_path_factory.mktemp("finished")
    for collective in ("all_reduce", "alltoall"):
        stand_in(tmp_path / "nt", collective)
    done = run_with_stand_ins(tmp_path, "all_reduce", "alltoall", "-g", "2", "-e", "1M", "--out", "run")
    return tmp_path / "run", done


def test_a_run_writes_its_evidence_reports_and_manifest_into_one_directory(finished_run) -> None:  # type: ignore[no-untyped-def]
    run_dir, done = finished_run
    assert done.returncode == 0, done.stderr.decode()
    names = {p.name for p in run_dir.iterdir()}
    assert {"manifest.json", "report.html", "findings.json", "env.txt"} <= names
    assert {"all_reduce.stdout.txt", "all_reduce.stderr.txt", "alltoall.stdout.txt", "alltoall.stderr.txt"} <= names
    assert len([n for n in names if n.startswith("nccl.") and n.endswith(".log")]) == 2
    assert f"run directory {Path('run')}" in done.stderr.decode()


def test_the_manifest_records_commands_statuses_environment_and_captures(finished_run) -> None:  # type: ignore[no-untyped-def]
    run_dir, _ = finished_run
    record = manifest(run_dir)
    assert record["format"] == "ncclscope-run" and record["backend"] == "nccl-tests" and not record["interrupted"]
    first = record["steps"][0]
    assert first["command"][0].endswith("/nt/all_reduce_perf")
    assert first["command"][1:] == "-b 8 -e 1M -f 2 -n 20 -w 5 -g 2 -c 1".split()
    assert [(s["collective"], s["status"], s["exit_code"]) for s in record["steps"]] == [
        ("all_reduce", "ok", 0),
        ("alltoall", "ok", 0),
    ]
    assert record["env_set"]["NCCL_DEBUG_SUBSYS"] == "INIT,ENV,GRAPH,NET,TUNING"
    assert record["env_set"]["NCCL_DEBUG_FILE"] == f"{run_dir.resolve()}/nccl.%h.%p.log"
    assert record["versions"]["nccl"] == "2.21.5"
    tools = {c["name"]: c["status"] for c in record["captures"]}
    assert set(tools) == {  # missing here (no GPU, no InfiniBand), captured on a GPU host
        "nvidia-smi topo -m", "nvidia-smi -q", "nvidia-smi nvlink -s", "nvidia-smi topo -p2p r", "ibstat"
    }  # fmt: skip
    assert record["env_set"]["NCCL_GRAPH_DUMP_FILE"] == f"{run_dir.resolve()}/nccl-graph.xml"


def test_the_tables_of_a_run_parse_as_their_collectives(finished_run) -> None:  # type: ignore[no-untyped-def]
    run_dir, _ = finished_run
    case = read_case([str(run_dir)], jobs=1).case
    assert sorted(b.collective for b in case.benchmarks) == ["all_reduce", "alltoall"]
    assert all(len(b.rows) == 6 and all(r.out_of_place.wrong == 0 for r in b.rows) for b in case.benchmarks)
    assert case.nccl_versions == ["2.21.5+cuda12.4"]
    assert case.run is not None and case.run.backend == "nccl-tests"


def test_findings_json_is_the_analysis_of_the_run_directory(finished_run) -> None:  # type: ignore[no-untyped-def]
    run_dir, _ = finished_run
    findings = json.loads((run_dir / "findings.json").read_text(encoding="utf-8"))
    assert {s["path"] for s in findings["case"]["sources"]} == {
        str(Path("run") / name) for name in manifest(run_dir)["inputs"]
    }
    assert findings["case"]["run"]["steps"][1]["collective"] == "alltoall"


def test_analyze_reads_a_run_directory_from_its_manifest_not_its_reports(finished_run) -> None:  # type: ignore[no-untyped-def]
    run_dir, _ = finished_run
    done = run_cli("analyze", "--format", "json", str(run_dir))
    assert done.returncode == 0, done.stderr.decode()
    sources = {Path(s["path"]).name for s in json.loads(done.stdout)["case"]["sources"]}
    assert sources == set(manifest(run_dir)["inputs"])
    assert not sources & {"report.html", "findings.json", "manifest.json", "env.txt"}


# ------------------------------------------------------------------------------ hangs, failures, Ctrl-C
def test_a_hung_collective_is_ended_at_its_timeout_and_reported_with_its_last_lines(tmp_path: Path) -> None:
    stand_in(tmp_path / "nt", "all_reduce", then="sleep 600", table=False)
    stand_in(tmp_path / "nt", "alltoall")
    done = run_with_stand_ins(tmp_path, "all_reduce", "alltoall", "--timeout", "3", "--out", "run")
    assert done.returncode == 1
    record = manifest(tmp_path / "run")
    hung, after = record["steps"]
    assert hung["status"] == "timed_out" and hung["timeout_s"] == 3
    assert after["status"] == "not_run"
    assert record["stopped"].startswith("all_reduce timed out")
    findings = json.loads((tmp_path / "run" / "findings.json").read_text(encoding="utf-8"))["findings"]
    (run006,) = [f for f in findings if f["code"] == "RUN006"]
    assert "ended all_reduce after its 3 s timeout" in run006["message"]
    texts = [e["text"] for e in run006["evidence"]]
    assert "# Using devices" in texts  # the last stdout lines before the hang
    assert any("NCCL INFO Bootstrap : Using eth0" in t for t in texts)  # the tail of its NCCL log


def test_a_failing_collective_is_recorded_and_stops_the_run(tmp_path: Path) -> None:
    stand_in(tmp_path / "nt", "all_reduce", then="echo 'all_reduce_perf: test NCCL failure' >&2; exit 1", warn=True)
    stand_in(tmp_path / "nt", "alltoall")
    done = run_with_stand_ins(tmp_path, "all_reduce", "alltoall", "--out", "run")
    assert done.returncode == 1
    steps = manifest(tmp_path / "run")["steps"]
    assert [(s["status"], s["exit_code"]) for s in steps] == [("failed", 1), ("not_run", None)]
    assert "all_reduce failed (exit status 1)" in done.stderr.decode()
    assert any("test NCCL failure" in e["text"] for e in steps[0]["last_lines"])
    assert (tmp_path / "run" / "report.html").is_file()


def test_keep_going_runs_the_next_collective_after_a_failure(tmp_path: Path) -> None:
    stand_in(tmp_path / "nt", "all_reduce", then="exit 1")
    stand_in(tmp_path / "nt", "alltoall")
    done = run_with_stand_ins(tmp_path, "all_reduce", "alltoall", "--keep-going", "--out", "run")
    assert done.returncode == 1
    assert [s["status"] for s in manifest(tmp_path / "run")["steps"]] == ["failed", "ok"]


def start_and_wait_for_the_table(tmp_path: Path, then: str) -> subprocess.Popen[bytes]:
    """`ncclscope run all_reduce` on a stand-in that prints its table, then runs `then`; returned once printed."""
    stand_in(tmp_path / "nt", "all_reduce", then=then)
    argv = [sys.executable, "-m", "ncclscope", "run", "all_reduce", "--backend", "nccl-tests"]
    argv += ["--nccl-tests-dir", str(tmp_path / "nt"), "--out", "run"]
    child = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    stdout, pid_file = tmp_path / "run" / "all_reduce.stdout.txt", tmp_path / "sleep.pid"
    deadline = time.monotonic() + 60
    while "Collective test concluded" not in (stdout.read_text() if stdout.exists() else "") or not pid_file.exists():
        assert time.monotonic() < deadline and child.poll() is None, "the stand-in never started"
        time.sleep(0.1)
    return child


def hanging(tmp_path: Path, ignore_sigterm: bool = False) -> str:
    """A stand-in's hang: a sleep in its process group, its pid in sleep.pid, optionally deaf to SIGTERM."""
    deaf = "trap '' TERM; " if ignore_sigterm else ""  # an ignored signal stays ignored in the sleep too
    written, ready = tmp_path / "sleep.pid.tmp", tmp_path / "sleep.pid"  # renamed: never read half written
    return f"{deaf}sleep 600 & echo $! > {written}; mv {written} {ready}; wait"


def ended(pid: int, within_s: float = 10.0) -> bool:
    """Whether `pid` is gone (or a zombie nobody has reaped yet) within `within_s`."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def test_ctrl_c_stops_the_run_keeps_what_was_collected_and_exits_130(tmp_path: Path) -> None:
    child = start_and_wait_for_the_table(tmp_path, hanging(tmp_path))
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=60)
    assert child.returncode == 130, err.decode()
    record = manifest(tmp_path / "run")
    assert record["interrupted"] and record["steps"][0]["status"] == "interrupted"
    assert record["stop_signal"] == signal.SIGINT and record["stopped"] == "interrupted by Ctrl-C (SIGINT)"
    assert "interrupted by Ctrl-C (SIGINT); what was collected is kept" in err.decode()
    assert (tmp_path / "run" / "findings.json").is_file() and (
        tmp_path / "run" / "all_reduce.stdout.txt"
    ).stat().st_size
    assert ended(int((tmp_path / "sleep.pid").read_text()))


def test_sigterm_ends_the_collective_too_keeps_what_was_collected_and_exits_143(tmp_path: Path) -> None:
    """`timeout 600 ncclscope run`, a scheduler's stop: the collective runs in a session of its own, so without
    this it would outlive ncclscope and keep the GPUs."""
    child = start_and_wait_for_the_table(tmp_path, hanging(tmp_path))
    child.send_signal(signal.SIGTERM)
    _, err = child.communicate(timeout=60)
    assert child.returncode == 143, err.decode()
    record = manifest(tmp_path / "run")
    assert record["steps"][0]["status"] == "interrupted" and record["stop_signal"] == signal.SIGTERM
    assert "interrupted by SIGTERM; what was collected is kept" in err.decode()
    assert (tmp_path / "run" / "findings.json").is_file()
    assert ended(int((tmp_path / "sleep.pid").read_text()))


def test_a_second_ctrl_c_during_the_grace_period_leaves_at_once_and_kills_the_collective(tmp_path: Path) -> None:
    """The first Ctrl-C sends SIGTERM, which this stand-in ignores; the second one does not wait out the grace."""
    child = start_and_wait_for_the_table(tmp_path, hanging(tmp_path, ignore_sigterm=True))
    child.send_signal(signal.SIGINT)
    time.sleep(1.0)  # inside the grace period (execute.KILL_GRACE_S, 5 s)
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=60)
    assert child.returncode == 130, err.decode()
    assert manifest(tmp_path / "run")["interrupted"]
    assert ended(int((tmp_path / "sleep.pid").read_text()), within_s=3.0), "the collective outlived ncclscope"


RUN_STEP_UNDER_FIRE = """
import os, random, signal, sys, threading, time
from pathlib import Path
from ncclscope.runner.execute import run_step

folder = Path(sys.argv[1])
script = folder / "hang.sh"
script.write_text("#!/bin/sh\\necho started\\nsleep 600 & echo $! > $PID_FILE; wait\\n")
script.chmod(0o755)
random.seed(7)
for n in range(int(sys.argv[2])):
    delay = random.choice([0.0, 0.001, 0.003, 0.01]) + random.random() * 0.02
    threading.Timer(delay, os.kill, (os.getpid(), signal.SIGINT)).start()
    pid_file = folder / f"sleep{n}.pid"
    started = time.monotonic()
    try:
        outcome = run_step([str(script)], dict(os.environ, PID_FILE=str(pid_file)), folder / f"{n}.out",
                           folder / f"{n}.err", 600, lambda size: None, lambda: None)
    except KeyboardInterrupt:  # only before the child could start: the handler was not yet in place
        assert not pid_file.exists(), f"run {n}: Ctrl-C escaped with the child started"
        continue
    took = time.monotonic() - started
    assert (outcome.status, outcome.stop_signal) == ("interrupted", signal.SIGINT), (n, outcome)
    assert took < 5, f"run {n}: {took:.1f} s to stop"
    print(n, f"{delay * 1000:.1f} ms", outcome.status, f"{took:.2f} s", flush=True)
print("done")
"""


def test_ctrl_c_at_any_moment_of_a_step_ends_the_child_and_never_escapes_or_hangs(tmp_path: Path) -> None:
    """Ctrl-C landing anywhere in run_step: during the spawn, the thread starts, Popen.wait's lock. Each
    run must end as interrupted within seconds, with its child's process group gone."""
    runs = 12
    done = subprocess.run(
        [sys.executable, "-c", RUN_STEP_UNDER_FIRE, str(tmp_path), str(runs)],
        cwd=REPO, capture_output=True, timeout=180, text=True,
    )  # fmt: skip
    assert done.returncode == 0 and done.stdout.endswith("done\n"), done.stdout + done.stderr
    for pid_file in tmp_path.glob("sleep*.pid"):
        assert ended(int(pid_file.read_text())), f"{pid_file.name}: the child's sleep outlived its step"


# ------------------------------------------------------------------------------ environment, dry run, usage
def test_a_debug_variable_the_user_set_wins_and_the_run_says_so(tmp_path: Path) -> None:
    stand_in(tmp_path / "nt", "all_reduce")
    env = dict(os.environ, NCCL_DEBUG_SUBSYS="INIT,NET", COLUMNS="160")
    argv = [sys.executable, "-m", "ncclscope", "run", "all_reduce", "--backend", "nccl-tests", "--out", "run"]
    done = subprocess.run(
        [*argv, "--nccl-tests-dir", str(tmp_path / "nt")], cwd=tmp_path, env=env, capture_output=True, timeout=120
    )
    assert done.returncode == 0, done.stderr.decode()
    record = manifest(tmp_path / "run")
    assert record["env_user"] == {"NCCL_DEBUG_SUBSYS": "INIT,NET"}
    assert "NCCL_DEBUG_SUBSYS" not in record["env_set"]
    assert "NCCL_DEBUG_SUBSYS=INIT,NET" in (tmp_path / "run" / "env.txt").read_text()
    assert done.stderr.decode().count("keeping your NCCL_DEBUG_SUBSYS=INIT,NET") == 1


def test_dry_run_prints_the_environment_and_one_command_per_collective_and_runs_nothing(tmp_path: Path) -> None:
    for collective in ("all_reduce", "sendrecv"):
        stand_in(tmp_path / "nt", collective)
    done = run_with_stand_ins(tmp_path, "all_reduce", "sendrecv", "-g", "8", "--out", "run", "--dry-run")
    assert done.returncode == 0, done.stderr.decode()
    lines = done.stdout.decode().splitlines()
    assert "export NCCL_DEBUG=INFO" in lines and "export NCCL_DEBUG_SUBSYS=INIT,ENV,GRAPH,NET,TUNING" in lines
    commands = [line for line in lines if "_perf" in line]
    assert [c.split()[0].rsplit("/", 1)[1] for c in commands] == ["all_reduce_perf", "sendrecv_perf"]
    assert commands[0].endswith("-b 8 -e 8G -f 2 -n 20 -w 5 -g 8 -c 1")
    assert not (tmp_path / "run").exists()


def test_dry_run_shows_the_mpirun_command_of_a_multi_host_run(tmp_path: Path) -> None:
    stand_in(tmp_path / "nt", "all_reduce")
    args = ["all_reduce", "-g", "8", "--launcher", "mpirun", "--hosts", "h1,h2", "--dry-run"]
    done = run_with_stand_ins(tmp_path, *args)
    (command,) = [line for line in done.stdout.decode().splitlines() if line.startswith("mpirun")]
    assert command.startswith("mpirun -np 16 -H h1:8,h2:8 --bind-to none -x NCCL_DEBUG -x NCCL_DEBUG_SUBSYS")
    assert command.endswith("-g 1 -c 1")


def test_without_nccl_tests_binaries_the_nccl_tests_backend_says_how_to_get_them(tmp_path: Path) -> None:
    done = run_with_stand_ins(tmp_path, "all_reduce", "--out", "run")
    assert done.returncode == 2
    message = done.stderr.decode()
    assert "nccl-tests binaries not found (all_reduce_perf" in message and "NCCL_TESTS_HOME" in message
    assert not (tmp_path / "run").exists()


def test_a_bad_size_is_a_usage_error_naming_the_option(tmp_path: Path) -> None:
    stand_in(tmp_path / "nt", "all_reduce")
    done = run_with_stand_ins(tmp_path, "all_reduce", "-e", "lots")
    assert done.returncode == 2 and "-e 'lots': not a size" in done.stderr.decode()


def test_an_existing_run_directory_is_not_overwritten(tmp_path: Path) -> None:
    stand_in(tmp_path / "nt", "all_reduce")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "keep.txt").write_text("mine")
    done = run_with_stand_ins(tmp_path, "all_reduce", "--out", "run")
    assert done.returncode == 2 and "already exists" in done.stderr.decode()
    assert [p.name for p in (tmp_path / "run").iterdir()] == ["keep.txt"]


# ------------------------------------------------------------------------------ the torch backend, for real


@pytest.mark.slow
def test_the_torch_backend_runs_gloo_collectives_for_real_and_analyzes_them(tmp_path: Path) -> None:
    require_torch()
    args = ["all_reduce", "all_gather", "--backend", "torch", "-g", "2", "-e", "1M", "-n", "5", "-w", "1"]
    done = run_cli("run", *args, "--out", "run", cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr.decode()
    run_dir = tmp_path / "run"
    record = manifest(run_dir)
    assert record["backend"] == "torch" and [s["status"] for s in record["steps"]] == ["ok", "ok"]
    assert "--backend gloo" in " ".join(record["steps"][0]["command"])
    case = read_case([str(run_dir)], jobs=1).case
    assert [(b.collective, b.nranks) for b in case.benchmarks] == [("all_reduce", 2), ("all_gather", 2)]
    busbw_factor = {"all_reduce": 1.0, "all_gather": 0.5}  # 2(n-1)/n and (n-1)/n for n = 2
    for bench in case.benchmarks:
        assert [r.size for r in bench.rows] == [8 << i for i in range(18)]  # 8 B to 1 MiB
        for m in [m for r in bench.rows for m in (r.out_of_place, r.in_place)]:
            assert m.wrong == 0
        for row in bench.rows:
            m = row.out_of_place
            assert m.algbw == pytest.approx(row.size / (m.time_us * 1e3), abs=0.006, rel=0.01)
            assert m.busbw == pytest.approx(m.algbw * busbw_factor[bench.collective], abs=0.006)
    assert (run_dir / "report.html").stat().st_size > 0
    assert json.loads((run_dir / "findings.json").read_text())["case"]["run"]["backend"] == "torch"


def test_dry_run_of_a_torchrun_multi_host_run_says_to_start_it_on_every_host(tmp_path: Path) -> None:
    require_torch()
    done = run_cli("run", "all_reduce", "--backend", "torch", "--launcher", "torchrun", "--hosts", "a,b", "-g", "8",
                   "--dry-run", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    assert "start this same command on every host of --hosts; they meet at a:29500" in done.stderr.decode()
    (command,) = [line for line in done.stdout.decode().splitlines() if "torch.distributed.run" in line]
    assert "--nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint a:29500" in command


def test_the_hosts_own_reports_are_captured_and_read_back(tmp_path: Path) -> None:
    """nvidia-smi and ibstat stand-ins on PATH (a GPU host's tools cannot run here) print fixtures; the run
    keeps each report in its file, and the analysis of the run reads them (TOPO007, TOPO008, NET008)."""
    stand_in(tmp_path / "nt", "all_reduce")
    tools = tmp_path / "tools"
    tools.mkdir()
    answers = {
        "-q": "fixtures/smi/nvidia_smi_q_gpu3_x8.txt",
        "nvlink -s": "fixtures/smi/nvlink_s_gpu6_two_down.txt",
        "topo -m": "fixtures/topo/h100_8gpu_nic_legend_tabs.txt",
        "topo -p2p r": "fixtures/smi/topo_p2p_r_8x_l40s_two_sockets.txt",
    }
    cases = "".join(f'  "{args}") cat "{REPO / path}" ;;\n' for args, path in answers.items())
    listing = "".join(f"echo 'GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{i})'; " for i in range(2))
    script = f'#!/bin/sh\ncase "$*" in\n{cases}  "-L") {listing};;\n  *) exit 1 ;;\nesac\n'
    (tools / "nvidia-smi").write_text(script)
    (tools / "ibstat").write_text(f'#!/bin/sh\ncat "{REPO / "fixtures/ib/ibstat_port_down_and_slow.txt"}"\n')
    for tool in tools.iterdir():
        tool.chmod(0o755)
    env = dict(os.environ, PATH=f"{tools}:{os.environ['PATH']}", COLUMNS="160", NO_COLOR="1")
    argv = [sys.executable, "-m", "ncclscope", "run", "--backend", "nccl-tests", "--nccl-tests-dir"]
    argv += [str(tmp_path / "nt"), "all_reduce", "-g", "2", "-e", "1M", "--out", "run"]
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, timeout=120, check=False)
    run_dir = tmp_path / "run"
    record = manifest(run_dir)
    assert {c["name"]: (c["status"], c["file"]) for c in record["captures"]} == {
        "nvidia-smi topo -m": ("captured", "topo.txt"),
        "nvidia-smi -q": ("captured", "nvidia-smi-q.txt"),
        "nvidia-smi nvlink -s": ("captured", "nvlink.txt"),
        "nvidia-smi topo -p2p r": ("captured", "p2p.txt"),
        "ibstat": ("captured", "ibstat.txt"),
    }, done.stderr.decode()
    assert {"topo.txt", "nvidia-smi-q.txt", "nvlink.txt", "p2p.txt", "ibstat.txt"} <= set(record["inputs"])
    assert record["versions"]["driver"] == "550.90.07"
    assert (run_dir / "p2p.txt").read_text().startswith("# nvidia-smi topo -p2p r\n")
    findings = json.loads((run_dir / "findings.json").read_text(encoding="utf-8"))
    codes = {f["code"] for f in findings["findings"]}
    assert {"TOPO007", "TOPO008", "NET008"} <= codes
    case = findings["case"]
    assert len(case["smi_gpus"]) == 8 and len(case["nvlink_gpus"]) == 8 and len(case["ib_devices"]) == 8
    assert case["p2p_matrices"][0]["capability"] == "read"


def test_a_report_that_prints_nothing_is_recorded_as_empty_not_as_missing(tmp_path: Path) -> None:
    """`nvidia-smi nvlink -s` printed nothing on our 1-GPU H100 VM (no NVLink there): the run records the
    answer as empty, writes no file for it, and the analysis does not ask for it again."""
    stand_in(tmp_path / "nt", "all_reduce")
    tools = tmp_path / "tools"
    tools.mkdir()
    smi = REPO / "fixtures/device/h100_run_nccl_tests"
    script = (
        '#!/bin/sh\ncase "$*" in\n'
        f'  "-q") cat "{smi / "nvidia-smi-q.txt"}" ;;\n  "topo -m") cat "{smi / "topo.txt"}" ;;\n'
        '  "nvlink -s") ;;\n  "-L") echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)" ;;\n  *) exit 1 ;;\nesac\n'
    )
    (tools / "nvidia-smi").write_text(script)
    (tools / "nvidia-smi").chmod(0o755)
    env = dict(os.environ, PATH=f"{tools}:{os.environ['PATH']}", COLUMNS="160", NO_COLOR="1")
    argv = [sys.executable, "-m", "ncclscope", "run", "--backend", "nccl-tests", "--nccl-tests-dir"]
    argv += [str(tmp_path / "nt"), "all_reduce", "-g", "1", "-e", "1M", "--out", "run"]
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, timeout=120, check=False)
    record = manifest(tmp_path / "run")
    captures = {c["name"]: c for c in record["captures"]}
    nvlink = captures["nvidia-smi nvlink -s"]
    assert (nvlink["status"], nvlink["file"], nvlink["detail"]) == ("empty", None, "no NVLink on this host's GPUs")
    assert not (tmp_path / "run" / "nvlink.txt").exists()
    assert "nvidia-smi nvlink -s" not in done.stdout.decode(), done.stdout.decode()


def test_a_run_of_several_hosts_takes_each_hosts_own_reports_through_the_launcher(tmp_path: Path) -> None:
    """srun cannot run here: a stand-in starts the command once per node of --nodelist for one task per node
    (as srun --ntasks-per-node 1 does), with that node's `hostname`, and once otherwise. Node n1 has the
    tools, a newer driver than n2 and an IB port down; n2 has no ibstat. Each report lands in its own file,
    the manifest says which host lacks what, and the analysis compares the hosts (VER002)."""
    stand_in(tmp_path / "nt", "all_reduce")
    tools = tmp_path / "tools"
    for node in ("n1", "n2"):
        bin_dir = tools / node
        bin_dir.mkdir(parents=True)
        (bin_dir / "hostname").write_text(f"#!/bin/sh\necho {node}.cluster.example\n")
        q = {"n1": "nvidia_smi_q_8x_h100.txt", "n2": "nvidia_smi_q_8x_h100_older_driver.txt"}[node]
        smi = f'#!/bin/sh\ncase "$*" in\n  "-q") cat "{REPO / "fixtures/smi" / q}" ;;\n  *) exit 1 ;;\nesac\n'
        (bin_dir / "nvidia-smi").write_text(smi)
        ibstat = {"n1": "ibstat_port_down_and_slow.txt", "n2": None}[node]
        if ibstat:
            (bin_dir / "ibstat").write_text(f'#!/bin/sh\ncat "{REPO / "fixtures/ib" / ibstat}"\n')
    srun = (
        "#!/bin/sh\n"
        'per_node=""; nodes=""\n'
        'while [ "$#" -gt 0 ]; do case "$1" in\n'
        '  --ntasks-per-node) per_node="$2"; shift 2 ;;\n'
        '  --nodelist) nodes=$(echo "$2" | tr , " "); shift 2 ;;\n'
        "  --nodes|--gpus-per-node) shift 2 ;;\n"
        "  --export) shift 2 ;;\n"
        "  *) break ;;\n"
        "esac; done\n"
        'if [ "$per_node" = 1 ]; then for n in $nodes; do PATH="' + str(tools) + '/$n:$PATH" "$@"; done\n'
        'else exec "$@"; fi\n'
    )
    (tools / "srun").write_text(srun)
    for tool in tools.rglob("*"):
        if tool.is_file():
            tool.chmod(0o755)
    env = dict(os.environ, PATH=f"{tools}:{os.environ['PATH']}", COLUMNS="160", NO_COLOR="1")
    argv = [sys.executable, "-m", "ncclscope", "run", "--backend", "nccl-tests", "--nccl-tests-dir"]
    argv += [str(tmp_path / "nt"), "all_reduce", "--launcher", "srun", "--hosts", "n1,n2", "-g", "1", "-e", "1M"]
    done = subprocess.run([*argv, "--out", "run"], cwd=tmp_path, env=env, capture_output=True, timeout=120, check=False)
    run_dir = tmp_path / "run"
    record = manifest(run_dir)
    got = {(c["name"], c["host"]): (c["status"], c["file"]) for c in record["captures"]}
    assert got[("nvidia-smi -q", "n1")] == ("captured", "nvidia-smi-q.n1.txt"), done.stderr.decode()
    assert got[("nvidia-smi -q", "n2")] == ("captured", "nvidia-smi-q.n2.txt")
    assert got[("ibstat", "n1")] == ("captured", "ibstat.n1.txt")
    assert got[("ibstat", "n2")] == ("missing", None)
    assert got[("nvidia-smi topo -m", "n1")] == ("missing", None)  # the stand-in nvidia-smi answers only -q
    assert {"nvidia-smi-q.n1.txt", "nvidia-smi-q.n2.txt", "ibstat.n1.txt"} <= set(record["inputs"])
    assert record["versions"]["driver"] == "550.90.07"
    findings = json.loads((run_dir / "findings.json").read_text(encoding="utf-8"))
    evd = " ".join(f["message"] for f in findings["findings"] if f["code"] == "EVD001")
    assert "ibstat on n2 missing" in evd
    ver002 = [f["message"] for f in findings["findings"] if f["code"] == "VER002"]
    assert "GPU driver differs across hosts: 535.183.01 on n2; 550.90.07 on n1" in ver002
    # the other findings about a host's own reports name it too, not its capture file
    net008 = [f for f in findings["findings"] if f["code"] == "NET008"]
    assert net008 and all(f["hosts"] == ["n1"] and f["message"].startswith("on n1: ") for f in net008)


def test_dry_run_on_a_login_node_plans_both_backends_and_says_what_is_missing(tmp_path: Path) -> None:
    """Issue 41 item 2: without torch and without nccl-tests binaries, --dry-run still prints the plan of
    each backend, says what this machine lacks and how to get it, and exits 0; a real run still refuses."""
    no_torch = (
        "import sys, runpy; sys.modules['torch'] = None; sys.argv = ['ncclscope', *sys.argv[1:]];"
        " runpy.run_module('ncclscope', run_name='__main__')"
    )
    env = {k: v for k, v in os.environ.items() if k != "NCCL_TESTS_HOME"}
    env["PATH"] = str(Path(sys.executable).parent)  # no nccl-tests binary anywhere on it

    def run(*args: str) -> subprocess.CompletedProcess[bytes]:
        argv = [sys.executable, "-c", no_torch, "run", *args]
        return subprocess.run(argv, capture_output=True, cwd=tmp_path, env=env, timeout=120, check=False)

    done = run("--dry-run", "all_reduce", "--out", "run")
    assert done.returncode == 0, done.stderr.decode()
    said = done.stderr.decode()
    assert "missing on this machine: nccl-tests: all_reduce_perf not found" in said
    assert "missing on this machine: torch: not importable here: `pip install 'ncclscope[runner]'`" in said
    plan = done.stdout.decode().splitlines()
    assert "# backend nccl-tests; run directory run (not created: --dry-run)" in plan
    assert "all_reduce_perf -b 8 -e 8G -f 2 -n 20 -w 5 -g 8 -c 1" in plan
    assert any(line.startswith("# backend torch") for line in plan)
    assert any("torch.distributed.run" in line and "--backend nccl" in line for line in plan)
    assert not (tmp_path / "run").exists()
    refused = run("--backend", "torch", "all_reduce")
    assert refused.returncode == 2 and b"the torch backend needs torch" in refused.stderr
