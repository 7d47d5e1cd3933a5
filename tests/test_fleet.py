"""`ncclscope fleet` on a generated fleet (bench/generate_fleet.py): the real CLI names exactly the hosts
and the link the generator broke, the drift, and a regression against a baseline."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, require_torch, run_cli

sys.path.insert(0, str(REPO / "bench"))
import generate_fleet  # noqa: E402


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, generate_fleet.Truth]:
    out = tmp_path_factory.mktemp("fleet")
    return out, generate_fleet.generate(out, hosts=64, pair_hosts=10, seed=7)


@pytest.fixture(scope="module")
def report(fleet: tuple[Path, generate_fleet.Truth]) -> dict:
    out, _ = fleet
    result = run_cli("fleet", str(out / "nodes"), str(out / "pairs"), "--hosts", f"@{out / 'hosts.txt'}", "-f", "json")
    assert result.returncode == 1, result.stderr  # slow and failed hosts: --fail-on's default
    return json.loads(result.stdout)


def _status(report: dict, status: str) -> list[str]:
    return sorted({h["host"] for h in report["hosts"] if h["status"] == status})


def test_fleet_names_exactly_the_slow_failed_and_missing_hosts(fleet, report) -> None:
    _, truth = fleet
    assert _status(report, "slow") == truth.slow
    assert _status(report, "failed") == truth.failed
    assert _status(report, "missing") == truth.missing
    ok = set(truth.hosts) - {*truth.slow, *truth.failed, *truth.missing}
    assert set(_status(report, "ok")) == ok
    slow = next(h for h in report["hosts"] if h["status"] == "slow")
    assert slow["busbw"] < slow["fleet_band"] < slow["fleet_median"]
    assert slow["expected"] == 480.0 and slow["busbw"] < slow["expected_band"]
    assert report["summary"]["hosts"] == 64


def test_fleet_finds_the_bad_host_and_the_bad_link_from_pairs(fleet, report) -> None:
    _, truth = fleet
    culprits = [h["host"] for h in report["pair_hosts"] if h["culprit"]]
    assert culprits == [truth.bad_host]
    links = [p["hosts"] for p in report["pairs"] if p["blame"] == "link"]
    assert links == [truth.bad_link]
    blamed = [p for p in report["pairs"] if p["status"] != "ok"]
    assert all(truth.bad_host in p["hosts"] for p in blamed if p["blame"] != "link")
    assert len(report["pairs"]) == 10 * 9 // 2


def test_fleet_reports_the_drifted_nccl_version_and_driver(fleet, report) -> None:
    _, truth = fleet
    items = {d["item"]: d for d in report["drift"]}
    assert set(items) == {"nccl", "cuda_driver"}
    odd = items["nccl"]["values"][1]
    assert odd["hosts"] == truth.version and odd["value"].startswith("2.18.3")
    assert items["nccl"]["majority"].startswith("2.21.5")


def test_a_baseline_flags_the_regression_injected_in_a_second_night(fleet, report, tmp_path: Path) -> None:
    out, truth = fleet
    victim = sorted(set(truth.hosts) - {*truth.slow, *truth.failed, *truth.missing, *truth.version})[5]
    tonight = tmp_path / "tonight"
    generate_fleet.generate(tonight, hosts=64, pair_hosts=0, seed=7, regress=[victim])
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps(report))
    nodes = str(tonight / "nodes")
    result = run_cli("fleet", nodes, "--baseline", str(baseline), "--fail-on", "regression", "-f", "json")
    assert result.returncode == 1, result.stderr
    assert b"1 regression" in result.stderr
    assert all(line.startswith(b"ncclscope: ") for line in result.stderr.splitlines())
    later = json.loads(result.stdout)
    regressed = [h for h in later["hosts"] if h["regression"]]
    assert [h["host"] for h in regressed] == [victim]
    assert -0.25 < regressed[0]["change"] < -0.1
    quiet = run_cli("fleet", str(tonight / "nodes"), "--baseline", str(baseline), "--fail-on", "none")
    assert quiet.returncode == 0 and b"regressions since the baseline" in quiet.stdout


def test_text_csv_and_markdown_show_the_same_hosts(fleet) -> None:
    out, truth = fleet
    args = ("fleet", str(out / "nodes"), "--hosts", f"@{out / 'hosts.txt'}", "--fail-on", "none")
    text = run_cli(*args)
    assert text.returncode == 0
    for host in [*truth.slow, *truth.failed, *truth.missing]:
        assert host.encode() in text.stdout
    rows = list(csv.DictReader(io.StringIO(run_cli(*args, "-f", "csv").stdout.decode())))
    assert sorted({r["host"] for r in rows if r["status"] == "slow"}) == truth.slow
    markdown = run_cli(*args, "-f", "markdown").stdout.decode()
    assert markdown.startswith("# ncclscope fleet") and f"| {truth.failed[0]} | failed |" in markdown


def test_parquet_frames_read_back(fleet, tmp_path: Path) -> None:
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    out, truth = fleet
    folder = tmp_path / "frames"
    result = run_cli("fleet", str(out / "nodes"), str(out / "pairs"), "--parquet", str(folder), "--fail-on", "none")
    assert result.returncode == 0, result.stderr
    hosts = pd.read_parquet(folder / "hosts.parquet")
    assert sorted(hosts[hosts.status == "slow"].host.unique()) == truth.slow
    assert set(pd.read_parquet(folder / "pairs.parquet").columns) >= {"hosts", "busbw", "blame"}


def test_the_html_page_shows_the_verdict_plots_and_drift_in_chromium(fleet, tmp_path: Path) -> None:
    out, truth = fleet
    page = tmp_path / "fleet.html"
    result = run_cli("fleet", str(out / "nodes"), str(out / "pairs"), "-o", str(page), "--fail-on", "none")
    assert result.returncode == 0, result.stderr
    html = page.read_text()
    assert html.count("data:image/png;base64,") == 2  # the per-host strip plot and the pair heatmap
    assert truth.bad_host in html and "Drift across hosts" in html
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("no chromium")
    shot = tmp_path / "fleet.png"
    subprocess.run(
        [
            chromium,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--screenshot={shot}",
            "--window-size=1200,1600",
            page.as_uri(),
        ],
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert shot.exists() and shot.stat().st_size > 20_000
    dom = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--dump-dom", page.as_uri()],
        capture_output=True,
        timeout=120,
        check=False,
    ).stdout.decode()
    assert "Hosts that need attention" in dom and truth.slow[0] in dom


def test_an_input_that_names_its_hosts_only_in_the_file_name(tmp_path: Path) -> None:
    """A file name is taken for a host only when --hosts (or another input) names that host: any name of
    letters and digits would pass (issue 41: `nccltests-d302.txt` became a host)."""
    text = (REPO / "fixtures" / "nccl_tests" / "headerless_rows.txt").read_text()
    (tmp_path / "node-a01.txt").write_text(text)
    (tmp_path / "allreduce-run3.txt").write_text(text)
    result = run_cli("fleet", str(tmp_path), "-f", "json", "--fail-on", "none", "--hosts", "node-a01,node-a02")
    data = json.loads(result.stdout)
    assert {h["host"]: h["status"] for h in data["hosts"]} == {"node-a01": "ok", "node-a02": "missing"}
    assert data["unattributed"] == [
        f"{tmp_path / 'allreduce-run3.txt'}: 2 results without a host name (no device lines, NCCL log or run"
        " manifest); its file name is taken for the host when --hosts lists allreduce-run3"
    ]
    plain = run_cli("fleet", str(tmp_path), "--fail-on", "none")
    text_out = plain.stdout.decode()
    assert text_out.count("no host ") == 2, text_out
    assert "when --hosts lists node-a01" in text_out
    assert text_out.rstrip().endswith("0 hosts: 0 ok")


def test_bad_options_and_inputs_give_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = run_cli("fleet", str(tmp_path / "nothing"))
    assert bad.returncode == 2 and b"no such file" in bad.stderr and b"Traceback" not in bad.stderr
    assert bad.stderr.startswith(b"ncclscope: ")
    (tmp_path / "base.json").write_text("{not json")
    wrong = run_cli("fleet", str(REPO / "fixtures" / "bench"), "--baseline", str(tmp_path / "base.json"))
    assert wrong.returncode == 2 and b"not a `fleet --format json` output" in wrong.stderr
    choice = run_cli("fleet", str(REPO / "fixtures" / "bench"), "--fail-on", "slow,late")
    assert choice.returncode == 2 and b"late is not one of" in choice.stderr


def test_serial_and_parallel_reading_give_the_same_report(fleet) -> None:
    from ncclscope.fleet import judge as judging

    out, _ = fleet
    units, _ = judging.units([str(out / "pairs")])
    serial = judging.judge(judging.summarize_all(units, jobs=1))
    parallel = judging.judge(judging.summarize_all(units, jobs=2))
    assert serial.model_dump() == parallel.model_dump()


def test_the_dask_path_gives_the_same_json_as_the_local_path(fleet) -> None:
    distributed = pytest.importorskip("distributed")
    from ncclscope.fleet import judge as judging

    out, _ = fleet
    units, _ = judging.units([str(out / "nodes"), str(out / "pairs")])
    local = judging.judge(judging.summarize_all(units, jobs=1))
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        remote = judging.judge(judging.summarize_on_dask(units, cluster.scheduler_address))
    assert remote.model_dump_json() == local.model_dump_json()


def _pairs_plan(mode: str, hosts: str) -> tuple[int, list[list[str]], str]:
    require_torch()  # --backend torch, even for a dry run
    result = run_cli(
        "run", "all_reduce", "--pairs", mode, "--hosts", hosts, "--launcher", "mpirun", "-g", "8",
        "--backend", "torch", "--dry-run", "-o", "/tmp/ncclscope-pairs",
    )  # fmt: skip
    text = result.stdout.decode()
    pairs = [line.split()[2:] for line in text.splitlines() if line.startswith("# pair ")]
    return result.returncode, pairs, text


def test_run_pairs_plans_every_pair_then_fleet_over_their_run_directories() -> None:
    code, pairs, text = _pairs_plan("exhaustive", "n1,n2,n3,n4")
    assert code == 0
    assert pairs == [["n1", "n2"], ["n1", "n3"], ["n1", "n4"], ["n2", "n3"], ["n2", "n4"], ["n3", "n4"]]
    launches = [line for line in text.splitlines() if line.startswith("mpirun") and "all_reduce" in line]
    assert len(launches) == 6  # the torch backend: one torchrun per host of the pair, 8 ranks each
    assert "-H n1:1,n2:1" in launches[0] and "--nnodes 2 --nproc-per-node 8" in launches[0]
    assert "NCCL_DEBUG_FILE=/tmp/ncclscope-pairs/n1__n2/" in text
    assert text.rstrip().splitlines()[-1].startswith("# then: ncclscope fleet /tmp/ncclscope-pairs/n1__n2 ")


def test_run_pairs_matching_gives_each_host_two_partners_and_refuses_one_host() -> None:
    code, pairs, _ = _pairs_plan("matching", "a,b,c,d,e")
    assert code == 0 and len(pairs) == 5
    for host in "abcde":
        partners = {p for pair in pairs if host in pair for p in pair} - {host}
        assert len(partners) == 2
    assert _pairs_plan("matching", "a")[0] == 2
    assert _pairs_plan("sometimes", "a,b")[0] == 2


def test_fleet_piped_keeps_every_value_whole(fleet) -> None:  # type: ignore[no-untyped-def]
    """Issue 41 item 5: `fleet DIR | cat` or a CI log: no terminal width, so no cell is cut to 'bu…'."""
    out, _ = fleet
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    argv = [sys.executable, "-m", "ncclscope", "fleet", str(out / "nodes"), "--fail-on", "none"]
    done = subprocess.run(argv, capture_output=True, env=env, cwd=REPO, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    text = done.stdout.decode()
    assert "…" not in text and all(line == line.rstrip() for line in text.splitlines())
    header = next(line for line in text.splitlines() if line.split()[:2] == ["host", "status"])
    assert header.split() == ["host", "status", "collective", "busbw", "expected", "median", "z", "detail"]
    # each host's row is one line, its detail whole (at 80 columns it was wrapped over several lines)
    (failed,) = [line for line in text.splitlines() if " failed " in line and "runs failed" in line]
    assert "Test NCCL failure common.cu:1005" in failed and "ECC" in failed


def test_hosts_that_only_a_job_of_several_hosts_measured_are_in_job_not_unmeasured(tmp_path: Path) -> None:
    """Issue 41 item 5: the hosts of a multi-host run were listed as 'unmeasured' although their run measured
    them: a pair's hosts point to the pair, a larger job's hosts say that one of them cannot be told apart."""
    table = (REPO / "fixtures/verdicts/mpirun_ib_hca_list.txt").read_text()
    (tmp_path / "pair.txt").write_text(table)
    three = (
        "\n".join(
            line.replace("gpu-r08", "gpu-r09") if line.startswith("#  Rank 1") and int(line.split()[2]) >= 12 else line
            for line in table.splitlines()
        )
        .replace("gpu-r07", "gpu-s07")
        .replace("gpu-r08", "gpu-s08")
        .replace("gpu-r09", "gpu-s09")
    )
    (tmp_path / "job.txt").write_text(three + "\n")
    done = run_cli("fleet", str(tmp_path), "--fail-on", "none", "-f", "json")
    assert done.returncode == 0, done.stderr
    hosts = {h["host"]: h for h in json.loads(done.stdout)["hosts"]}
    assert hosts["gpu-r07"]["status"] == "in_job" and "measured in a pair with gpu-r08" in hosts["gpu-r07"]["detail"]
    assert {hosts[h]["status"] for h in ("gpu-s07", "gpu-s08", "gpu-s09")} == {"in_job"}
    assert "measured in a 3-host all_reduce" in hosts["gpu-s09"]["detail"]
