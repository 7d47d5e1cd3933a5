"""Issue 44: NCCL Inspector output (JSON records, Prometheus text) read into the Case, and what the job's own
collectives say: BW001/BW002 (their bandwidth), HANG003 (a rank the others wait for), EVD001 (an Inspector that
writes nothing), and `ncclscope run --inspector`. The real files come from our H200 run
(fixtures/device/h200_inspector); the rule cases are ours, written from the record layout (fixtures/inspector)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from conftest import analysis_of, findings_of, only_finding, run_cli

H200 = "fixtures/device/h200_inspector"
MIXED_ON_ONE_GPU = f"{H200}/json"
STRAGGLER = "fixtures/inspector/straggler_4ranks"
NO_STRAGGLER = "fixtures/inspector/no_straggler_4ranks"
JOB_LOG = "fixtures/nccl/v2_28_healthy_multinode_gdr.log"


def analyzed_json(*paths: str | Path) -> dict:  # type: ignore[type-arg]
    result = run_cli("analyze", "--format", "json", "--fail-on", "never", *map(str, paths))
    assert result.returncode == 0, result.stderr.decode()
    assert b"Traceback" not in result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


# ---------------------------------------------------------------------------------------- reading
def test_the_h200_json_records_are_read_whole_through_the_cli() -> None:
    data = analyzed_json(MIXED_ON_ONE_GPU)
    reports = {Path(r["source"]).name: r for r in data["case"]["inspector"]}
    assert set(reports) == {"vm-pid679.log.gz", "vm-pid680.log.gz"}
    for name, report in reports.items():
        assert (report["format"], report["format_version"], report["records"], report["not_understood"]) == (
            "json", "v4.0", 1534, 0,
        ), name  # fmt: skip
        kinds = {(op["kind"], op["name"]) for op in report["ops"]}
        assert kinds == {
            ("collective", "AllReduce"), ("collective", "AllGather"), ("collective", "ReduceScatter"),
            ("p2p", "Send"), ("p2p", "Recv"),
        }  # fmt: skip
        # every record counted once: the ops add up to the file's records
        assert sum(op["count"] for op in report["ops"]) == 1534
        # coll_sn counts per collective kind: one series per kind, each sequence number once
        assert sorted(s["name"] for s in report["series"]) == ["AllGather", "AllReduce", "ReduceScatter"]
        for series in report["series"]:
            assert len(series["sn"]) == len(set(series["sn"])) and series["kernel_start_us"] == []
    sources = {Path(s["path"]).name: s for s in data["case"]["sources"]}
    assert sources["vm-pid679.log.gz"]["kinds"] == ["inspector"]


def test_a_record_keeps_its_figures_as_the_plugin_wrote_them() -> None:
    case = analysis_of(MIXED_ON_ONE_GPU).case
    first = json.loads(gzip.open(f"{MIXED_ON_ONE_GPU}/inspector/vm-pid679.log.gz", "rt").readline())
    op = next(
        op
        for r in case.inspector
        for op in r.ops
        if op.pid == 679 and op.name == first["coll_perf"]["coll"] and op.size_bytes == 8192
    )
    assert (op.comm_id, op.rank, op.nranks, op.nnodes, op.host) == ("0xafb15ac88ac33d", 0, 2, 2, "vm")
    assert op.comm_name is None  # the plugin's "unknown" is no name
    assert op.timing_sources == ["kernel_gpu"] and op.evidence.line == 1


def test_the_verbose_trace_gives_each_call_its_kernel_start() -> None:
    case = analysis_of(f"{H200}/verbose").case
    series = [s for r in case.inspector for s in r.series]
    assert {s.rank for s in series} == {0, 1}
    assert all(len(s.kernel_start_us) == len(s.sn) > 100 for s in series)


def test_the_prometheus_file_is_read_by_its_grammar() -> None:
    case = analysis_of(f"{H200}/prom").case
    (report,) = case.inspector
    assert (report.format, report.format_version, report.records, report.not_understood) == (
        "prometheus",
        "v5.1",
        74,
        0,
    )
    ops = {(op.kind, op.name, op.size_range): op for op in report.ops}
    allreduce = ops[("collective", "AllReduce", "16-17MB")]
    assert (allreduce.size_bytes, allreduce.algo_proto, allreduce.gpu, allreduce.nranks) == (
        16 << 20,
        "RING_SIMPLE",
        "GPU0",
        2,
    )
    assert allreduce.exec_time_us is not None and allreduce.busbw_gbs > 0
    assert ("p2p", "Recv", "16-17MB") in ops


def test_the_inspector_lines_of_the_nccl_log_are_typed() -> None:
    case = analysis_of(f"{H200}/json/nccl.vm.679.log", f"{H200}/prom/nccl.vm.857.log").case
    assert all(not s.unrecognized for s in case.sources)
    setups = sorted((s.pid, s.writes, s.interval_us, s.output_format) for s in case.inspector_setups)
    assert setups == [(679, True, 500, "JSON"), (857, True, 30000000, "Prometheus")]


def test_damaged_and_spread_records_are_counted_not_dropped(tmp_path: Path) -> None:
    record = json.loads(gzip.open(f"{MIXED_ON_ONE_GPU}/inspector/vm-pid679.log.gz", "rt").readline())
    spread = json.dumps(record, indent=2)  # as the plugin's README prints them
    no_time = json.loads(json.dumps(record))
    del no_time["coll_perf"]["coll_exec_time_us"]
    text = "\n".join([json.dumps(record), spread, "not json at all", json.dumps(no_time), json.dumps(record)[:150]])
    path = tmp_path / "host-pid1.log"
    path.write_text(text + "\n")
    data = analyzed_json(path)
    (report,) = data["case"]["inspector"]
    assert (report["records"], report["not_understood"]) == (2, 3)
    assert report["not_understood_first"]["line"] == 2 + spread.count("\n") + 1
    (source,) = data["case"]["sources"]
    assert source["problems"] == [
        f"3 lines not understood as Inspector json records (the first at line {2 + spread.count(chr(10)) + 1})"
    ]


def test_a_prometheus_file_with_comments_and_other_metrics(tmp_path: Path) -> None:
    path = tmp_path / "nccl_inspector_metrics_x.prom"
    path.write_text(
        "# HELP nccl_bus_bandwidth_gbs NCCL bus bandwidth\n"
        "# TYPE nccl_bus_bandwidth_gbs gauge\n"
        'nccl_bus_bandwidth_gbs{version="v5.1",node="n1",gpu="GPU3",comm_name="DP group",n_nodes="4",nranks="32",'
        'collective="AllReduce",message_size="1-2GB",algo_proto="RING_SIMPLE"} 301.5\n'
        'node_load1{host="n1"} 0.5\n'
        "nccl_bus_bandwidth_gbs{broken\n"
    )
    (report,) = analyzed_json(path)["case"]["inspector"]
    assert (report["records"], report["not_understood"]) == (1, 1)
    (op,) = report["ops"]
    assert (op["comm_name"], op["size_bytes"], op["nranks"], op["nnodes"], op["exec_time_us"]) == (
        "DP group", 1 << 30, 32, 4, None,
    )  # fmt: skip


def test_a_file_with_no_record_is_unusable_with_a_reason(tmp_path: Path) -> None:
    path = tmp_path / "empty-pid9.log"
    path.write_text('{"header": {}, "metadata": {"inspector_output_format_version": "v4.0"}, "coll_perf": {}}\n')
    result = run_cli("analyze", str(path))
    assert result.returncode == 2 and b"Traceback" not in result.stderr  # no usable input (README: exit codes)
    assert result.stderr.decode().splitlines() == [
        f"ncclscope: {path}: 1 line not understood as Inspector json records (the first at line 1)",
        f"ncclscope: {path}: no NCCL Inspector json record could be read",
    ]


# ------------------------------------------------------------------------------------------ rules
def test_a_rank_the_others_wait_for_is_named() -> None:
    found = only_finding("HANG003", STRAGGLER)
    assert found.severity == "warning" and found.ranks == [3] and found.hosts == ["trn-a01", "trn-a02"]
    assert found.fix.startswith("Look at rank 3 and its host")
    assert found.message.startswith(
        "rank 3 (trn-a02, pid 38807) is the last to reach the AllReduce calls of communicator 0x5e1f03c2a9d4b7: at 54"
        " of 60 calls timed on every rank (90%) its kernel was the shortest"
    )


def test_no_straggler_when_the_last_rank_changes_from_call_to_call() -> None:
    assert findings_of("HANG003", NO_STRAGGLER) == []


def test_our_two_ranks_on_one_gpu_are_no_stragglers() -> None:
    # json: the shorter kernel alternates (55%); verbose: rank 1 starts last at 82% of the calls, but both kernels
    # run equally long (the processes take turns on the GPU), so nobody waited
    assert findings_of("HANG003", MIXED_ON_ONE_GPU) == []
    assert findings_of("HANG003", f"{H200}/verbose") == []


def test_a_slow_job_allreduce_is_judged_against_its_nics() -> None:
    found = only_finding("BW001", JOB_LOG, "fixtures/inspector/slow_allreduce_16ranks")
    assert found.severity == "warning"
    assert found.fix.startswith("Run nccl-tests (or `ncclscope run`) on the same hosts")
    assert (
        "the job's own AllReduce (communicator 0xda3cbce04c2ca8cc, 16 ranks on 2 nodes) reaches 20 GB/s"
        in found.message
    )
    assert "at 4 GiB" in found.message and "21% of the 96 GB/s expected" in found.message
    assert "compare with nccl-tests on the same hosts" in found.message


def test_a_healthy_job_allreduce_says_nothing() -> None:
    assert findings_of("BW001", JOB_LOG, "fixtures/inspector/healthy_allreduce_16ranks") == []
    # 1 GiB and more: judged, so not said to be too small
    assert findings_of("BW002", JOB_LOG, "fixtures/inspector/healthy_allreduce_16ranks") == []


def test_small_job_collectives_are_said_to_be_unjudgeable_once() -> None:
    # the benchmark's own tables (torch_bench.stdout.txt) have a BW002 each; the job's collectives one together
    (found,) = [f for f in findings_of("BW002", MIXED_ON_ONE_GPU) if "Inspector" in f.message]
    assert found.severity == "info"
    assert found.message.startswith(
        "NCCL Inspector timed the job's own collectives, all under 1 GiB, where no collective reaches its peak:"
        " AllReduce up to 16 MiB"
    )
    assert findings_of("BW001", MIXED_ON_ONE_GPU) == []


def test_an_inspector_that_writes_nothing_is_said() -> None:
    found = only_finding("EVD001", "fixtures/device/h200_run_nccl_tests_inspector_off")
    assert found.evidence_count == 3 and {e.line for e in found.evidence} == {332}
    assert "NCCL Inspector is loaded in 3 processes on vm but writes nothing: its dump thread is off" in found.message
    assert "`ncclscope run --inspector PLUGIN`" in found.message


def test_an_inspector_that_writes_says_nothing_of_it() -> None:
    assert all("Inspector" not in f.message for f in findings_of("EVD001", MIXED_ON_ONE_GPU))


# ------------------------------------------------------------------------------------- the runner
def test_run_inspector_sets_the_plugin_and_writes_into_the_run(tmp_path: Path) -> None:
    plugin = tmp_path / "libnccl-profiler-inspector.so"
    plugin.write_bytes(b"\x7fELF")
    result = run_cli("run", "--backend", "torch", "--dry-run", "-o", str(tmp_path / "run"), "--inspector", str(plugin))
    assert result.returncode == 0, result.stderr.decode()
    out = result.stdout.decode()
    for line in (
        f"NCCL_PROFILER_PLUGIN={plugin}",
        "NCCL_INSPECTOR_ENABLE=1",
        f"NCCL_INSPECTOR_DUMP_DIR={tmp_path / 'run' / 'inspector'}",
        "NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS=10000",
        "NCCL_DEBUG_SUBSYS=INIT,ENV,GRAPH,NET,TUNING,PROFILE",
    ):
        assert line in out, line


def test_run_inspector_that_is_not_there_is_a_usage_error(tmp_path: Path) -> None:
    result = run_cli("run", "--backend", "torch", "--dry-run", "--inspector", str(tmp_path / "none.so"))
    assert result.returncode == 2
    assert result.stderr.decode().startswith(f"ncclscope: --inspector {tmp_path / 'none.so'}: no such file")


def test_the_run_directory_lists_the_inspector_files_as_inputs(tmp_path: Path) -> None:
    from ncclscope.model import RunRecord
    from ncclscope.runner.rundir import evidence_inputs

    (tmp_path / "inspector").mkdir()
    (tmp_path / "inspector" / "vm-pid7.log").write_text("{}\n")
    (tmp_path / "inspector" / "empty-pid8.log").write_text("")
    record = RunRecord.model_validate(
        {"format": "ncclscope-run", "version": 1, "ncclscope_version": "0", "started": "x", "backend": "torch"}
    )
    assert evidence_inputs(tmp_path, record) == ["inspector/vm-pid7.log"]


def test_a_large_inspector_file_is_never_split_into_log_ranges() -> None:
    # files of 48 MB and more are read in byte ranges by several processes as logs; Inspector's records are read
    # by their own reader, whole (a 60 MB file of them was read as log lines before)
    from ncclscope.parse.split import is_document

    head = gzip.open(f"{MIXED_ON_ONE_GPU}/inspector/vm-pid679.log.gz", "rb").read(4096)
    assert is_document(head)
    prom = Path(f"{H200}/prom/inspector").glob("*.prom")
    assert is_document(next(prom).read_bytes()[:4096])
