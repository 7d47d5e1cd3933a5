"""Platform detection and the bandwidth judgement against data/expected_busbw.json."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ncclscope.case.read import read_case
from ncclscope.diagnose.bandwidth import judge_bandwidth
from ncclscope.diagnose.engine import analyze
from ncclscope.diagnose.expectations import DATA_FILE, instance_spec, platform_spec, reference
from ncclscope.diagnose.platform import detect_platform
from ncclscope.diagnose.reference_data import ExpectedBusbw
from ncclscope.model import BandwidthJudgement, Case, Platform

from conftest import REPO

SEED = REPO.parent / "shared" / "seeds" / "002_0bad1d865d8e9f7b.txt"
LANDSCAPE = REPO.parent / "shared" / "knowledge" / "landscape.md"


def platform_of(*paths: str | Path) -> Platform:
    return detect_platform(read_case([str(REPO / p) for p in paths], jobs=1).case)


def judgements(*paths: str | Path) -> list[BandwidthJudgement]:
    case = read_case([str(REPO / p) for p in paths], jobs=1).case
    return judge_bandwidth(case, detect_platform(case))


# ----------------------------------------------------------------------------------- acceptance
@pytest.mark.skipif(not SEED.exists(), reason="shared/seeds is not beside the repository")
def test_seed_4xh100_all_reduce_is_healthy_against_ring_and_explains_bidirectional_900() -> None:
    case = read_case([str(SEED)], jobs=1).case
    analysis = analyze(case)
    assert analysis.platform.gpu_model == "H100"
    assert analysis.platform.gpus_per_host == 4
    assert analysis.platform.nvlink_links == 18
    [j] = analysis.bandwidth
    assert j.measured_busbw == pytest.approx(355.89)
    assert j.algorithm == "ring"
    assert 360 <= (j.expected_busbw or 0) <= 370
    assert 0.96 <= (j.ratio or 0) <= 0.99
    assert [f for f in analysis.findings if f.code == "BW001"] == []
    verdict = j.verdict
    assert "355.9 GB/s is ~40% of 900 GB/s" in verdict
    assert "bidirectional" in verdict and "unidirectional" in verdict and "450 GB/s" in verdict
    assert "wrongly suggest a problem" in verdict


# ------------------------------------------------------------------------------------ detection
@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("NVIDIA H100 80GB HBM3", "H100-SXM"),
        ("NVIDIA H100 PCIe", "H100-PCIe"),
        ("NVIDIA H100 NVL", "H100-NVL"),
        ("NVIDIA H200", "H200-SXM"),
        ("NVIDIA H200 NVL", "H200-NVL"),
        ("NVIDIA H800", "H800-SXM"),
        ("NVIDIA H20", "H20"),
        ("NVIDIA A100-SXM4-80GB", "A100-SXM"),
        ("A100-SXM4-40GB", "A100-SXM"),
        ("NVIDIA A100 80GB PCIe", "A100-PCIe"),
        ("NVIDIA A800-SXM4-80GB", "A800-SXM"),
        ("NVIDIA B200", "B200"),
        ("NVIDIA B300 SXM6 AC", "B300"),
        ("NVIDIA GB200", "GB200"),
        ("NVIDIA GH200 480GB", "GH200"),
        ("Tesla V100-SXM2-32GB", "V100-SXM"),
        ("Tesla V100-PCIE-16GB", "V100-PCIe"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA A10G", "A10"),
        ("NVIDIA GeForce RTX 4070 Laptop GPU", None),
    ],
)
def test_device_names_map_to_platform_keys(name: str, key: str | None) -> None:
    spec = platform_spec(name)
    assert (spec.key if spec else None) == key


def test_nvswitch_h100_host_from_the_matrix() -> None:
    p = platform_of("fixtures/topo/h100_8gpu_nic_legend_tabs.txt")
    assert p.nvlink_links == 18 and p.nvswitch is True and p.gpus_per_host == 8
    assert p.gpu_model is None
    assert any("GPU model" in m for m in p.missing)


def test_v100_hybrid_cube_mesh_is_not_an_nvswitch() -> None:
    p = platform_of("fixtures/topo/v100_soc_legend.txt")
    assert p.nvswitch is False
    assert p.nvlink_links in (1, 2)


def test_a100_matrix_shows_nv12() -> None:
    assert platform_of("fixtures/topo/a100_8gpu_mlx_columns.txt").nvlink_links == 12


def test_log_shows_nvswitch_hosts_nics_and_network() -> None:
    p = platform_of("fixtures/nccl/v2_18_8xh100_nvswitch.log")
    assert p.nvswitch is True
    assert p.hosts == 1 and p.gpus_per_host == 8
    assert p.nic_link_layers == ["IB"]
    assert p.network == "IB"


def test_device_lines_give_model_hosts_and_evidence() -> None:
    p = platform_of("fixtures/nccl_tests/mpi_ucx_warnings.txt")
    assert (p.gpu_model, p.key, p.gpus_per_host, p.hosts) == ("H100", "H100-SXM", 8, 2)
    assert p.nvswitch is True  # 8-GPU SXM boards are built with NVSwitch
    assert p.evidence and "NVIDIA H100 80GB HBM3" in p.evidence[0].text


def test_unknown_gpu_says_what_would_identify_it() -> None:
    p = platform_of("fixtures/nccl_tests/one_rank_busbw_zero.txt")
    assert p.key is None
    assert p.gpu_name == "NVIDIA GeForce RTX 4070 Laptop GPU"
    assert any("RTX 4070" in m for m in p.missing)


# ------------------------------------------------------------------------------------ judgement
def test_judgement_uses_the_largest_size_not_the_average() -> None:
    [j] = judgements("fixtures/nccl_tests/v2_17_unified_8xh100.txt")
    assert j.size == 8 << 30
    assert j.measured_busbw == pytest.approx(373.25)  # the in-place cell, higher than out-of-place


def test_one_rank_verdict_says_busbw_zero_is_expected() -> None:
    [j] = judgements("fixtures/nccl_tests/one_rank_busbw_zero.txt")
    assert j.expected_busbw is None and j.ratio is None
    assert "busbw is 0 by definition" in j.verdict


def test_nvls_is_expected_for_8xh100_all_reduce() -> None:
    [j] = judgements("fixtures/nccl_tests/v2_19_per_iter_columns.txt")
    assert (j.algorithm, j.expected_busbw) == ("nvls", 480)
    assert "nccl-tests keeps the ring factor" in j.verdict


def test_nvls_switched_off_in_the_log_means_ring_is_expected() -> None:
    # the log sets NCCL_ALGO=Ring and NCCL_NVLS_ENABLE=0; either keeps NCCL off NVLS
    [j] = judgements("fixtures/nccl_tests/v2_19_per_iter_columns.txt", "fixtures/nccl/debug_env_overrides.log")
    assert (j.algorithm, j.expected_busbw) == ("ring", 365)
    assert "NVLS not expected: NCCL_ALGO=Ring" in j.verdict


def test_ring_level_all_reduce_against_nvls_says_nvls_is_not_engaged() -> None:
    [j] = judgements("fixtures/nccl_tests/mpi_ucx_warnings.txt")  # two hosts: network ring
    assert j.algorithm == "ring"
    [j] = judgements("fixtures/bench/moderate_allreduce_8xh100.txt")
    assert "below the 80%" in j.verdict
    assert "bidirectional" not in j.verdict  # only said of healthy figures


def test_multi_host_expectation_counts_the_nics_of_the_log() -> None:
    [j] = judgements("fixtures/mixed/multi_host_job_problems.txt")
    assert j.expected_busbw == pytest.approx(96)  # 8 IB NICs x the 100G floor: their speed is not in the log
    assert "8 NICs per host" in j.verdict and "floor" in j.verdict
    assert "busbw x (k-1)/(n-1)" in j.verdict


def test_two_host_all_reduce_verdict_allows_tree_above_the_nics() -> None:
    [j] = judgements("fixtures/nccl_tests/mpi_ucx_warnings.txt")
    assert "may use tree" in j.verdict
    assert (j.ratio or 0) > 1


def test_pcie_gpus_without_matrix_use_the_pcie_figure() -> None:
    [j] = judgements("fixtures/nccl_tests/v2_19_cputime_timestamps.txt")
    assert j.expected_busbw == 12  # PCIe Gen4, low end
    assert j.ratio is None  # 64 MiB is too small to compare
    assert "re-run with -e 8G" in j.verdict


def test_unknown_collective_is_not_judged(tmp_path: Path) -> None:
    """The alltoall table with its data check off (-c 0: both #wrong cells N/A): an empty redop, root -1 and
    size = 8 x count fit all_gather and alltoall alike, whose bus factors are the same."""
    text = (REPO / "fixtures/nccl_tests/v2_13_empty_redop_alltoall.txt").read_text(encoding="utf-8")
    unchecked = tmp_path / "alltoall_c0.txt"
    unchecked.write_text(re.sub(r"(?m) +0( +[0-9.]+ +[0-9.]+ +[0-9.]+)    N/A$", r"    N/A\1    N/A", text))
    assert unchecked.read_text(encoding="utf-8").count("N/A") > 30
    [j] = judgements(unchecked)
    assert j.expected_busbw is None
    assert "collective is unknown" in j.verdict


# ----------------------------------------------------------------------------------- data file
def test_every_figure_has_a_source() -> None:
    data = reference()
    assert data.about
    figures = [*data.entries, *data.pcie, *data.network.per_nic, *data.network.multi_host]
    for entry in [*figures, *data.links, *data.latency]:
        assert entry.source.strip(), entry


def test_the_data_file_is_validated_when_it_loads(tmp_path: Path) -> None:
    """A typo in a field name or a figure that is not a number is refused, not read as a missing figure."""
    import pydantic

    raw = json.loads(DATA_FILE.read_text(encoding="utf-8"))
    raw["entries"][0]["busbw_gb"] = raw["entries"][0].pop("busbw_gbs")
    with pytest.raises(pydantic.ValidationError, match="busbw_gb"):
        ExpectedBusbw.model_validate(raw)
    raw = json.loads(DATA_FILE.read_text(encoding="utf-8"))
    raw["judging"]["warning_below"] = "eighty percent"
    with pytest.raises(pydantic.ValidationError, match="warning_below"):
        ExpectedBusbw.model_validate(raw)


@pytest.mark.skipif(not LANDSCAPE.exists(), reason="shared/knowledge is not beside the repository")
def test_every_cited_issue_appears_in_the_landscape() -> None:
    text = LANDSCAPE.read_text(encoding="utf-8")
    cited = set(re.findall(r"nccl(?:-tests)?#\d+", DATA_FILE.read_text(encoding="utf-8")))
    assert cited
    assert sorted(c for c in cited if c not in text) == []


def test_derived_figures_say_so() -> None:
    xdr = next(e for e in reference().network.per_nic if "XDR" in e.platform)
    assert "derived" in xdr.conditions


def test_data_file_ships_in_the_package() -> None:
    assert DATA_FILE.parent.name == "data" and DATA_FILE.parent.parent.name == "ncclscope"
    assert json.loads(DATA_FILE.read_text(encoding="utf-8"))["entries"]


# ------------------------------------------------------------------------------ cloud instances
P5_LOG = "fixtures/nccl/aws_ofi_p5_instance.log"
P5_TABLE = "fixtures/nccl_tests/p5_two_hosts_all_reduce_efa.txt"


def _with_log(tmp_path: Path, table: str, log_lines: list[str], collective: str | None = None) -> Case:
    text = (REPO / table).read_text(encoding="utf-8")
    if collective:  # the same table as another collective: nccl-tests prints its name and `none` for redop
        text = text.replace("all_reduce_perf", f"{collective}_perf").replace("     sum  ", "    none  ")
    (tmp_path / "table.txt").write_text(text, encoding="utf-8")
    (tmp_path / "job.log").write_text("\n".join(log_lines) + "\n", encoding="utf-8")
    return read_case([str(tmp_path / "job.log"), str(tmp_path / "table.txt")], jobs=1).case


def test_an_aws_instance_named_by_the_plugin_gives_the_nics_the_log_does_not_count() -> None:
    platform = platform_of(P5_LOG, P5_TABLE)
    assert platform.instance == "p5.48xlarge"
    assert "Running on p5.48xlarge platform" in platform.evidence[-1].text
    [j] = judgements(P5_LOG, P5_TABLE)
    assert j.expected_busbw == pytest.approx(32 * 10.6)  # 32 EFA NICs of 100G: its provider line counts none
    assert "32 NICs per host (p5.48xlarge)" in j.verdict
    assert (j.ratio or 1) < 0.5  # an error: under half of it


def test_the_instance_gives_the_gpu_when_no_device_line_does() -> None:
    platform = platform_of(P5_LOG)
    assert (platform.instance, platform.key, platform.gpu_model) == ("p5.48xlarge", "H100-SXM", "H100")
    assert not any(m.startswith("GPU model") for m in platform.missing)


def test_an_azure_topology_file_names_the_vm_series(tmp_path: Path) -> None:
    log = ["gpu-u01:51020:51020 [0] NCCL INFO NCCL_TOPO_FILE set by environment to /opt/microsoft/ndv5-topo.xml"]
    case = _with_log(tmp_path, "fixtures/nccl_tests/mpi_ucx_warnings.txt", log)
    platform = detect_platform(case)
    assert platform.instance == "Standard_ND96isr_H100_v5"
    [j] = judge_bandwidth(case, platform)
    # 8 NDR NICs (8 x 46 GB/s) allow more than the 8 GPUs' own ring: the intra-host figure is the expectation
    assert j.expected_busbw == 365 and "lower than what the NICs allow" in j.verdict


def test_a_google_plugin_network_names_the_instance_and_its_health_check_floor(tmp_path: Path) -> None:
    log = [f"tcpxo-{h}:31{r}:31{r} [{r}] NCCL INFO Using network FasTrak" for h in (0, 1) for r in range(8)]
    case = _with_log(tmp_path, P5_TABLE, log, collective="all_gather")
    platform = detect_platform(case)
    assert platform.instance == "a3-megagpu-8g"
    [j] = judge_bandwidth(case, platform)
    # TCPXO has no per-NIC reference: Google's own pass level for a pair of A3 Mega hosts is the floor
    assert j.expected_busbw == 150 and "health-check pass level" in j.verdict
    assert "cluster-health-scanner" in (j.expectation_source or "")


def test_a_plugin_shared_by_two_instance_types_needs_the_gpu(tmp_path: Path) -> None:
    log = [f"gib-{h}:40{r}:40{r} [{r}] NCCL INFO Using network gIB" for h in (0, 1) for r in range(8)]
    (tmp_path / "only").mkdir()
    case = read_case([str(_write(tmp_path / "only" / "job.log", log))], jobs=1).case
    assert detect_platform(case).instance is None  # a3-ultragpu-8g (H200) or a4-highgpu-8g (B200)
    h200 = (REPO / P5_TABLE).read_text(encoding="utf-8").replace("H100 80GB HBM3", "H200")
    (tmp_path / "table.txt").write_text(h200, encoding="utf-8")
    case = read_case([str(tmp_path / "only" / "job.log"), str(tmp_path / "table.txt")], jobs=1).case
    assert detect_platform(case).instance == "a3-ultragpu-8g"


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("p5en.48xlarge", "p5en.48xlarge"),
        ("p5.48xlarge", "p5.48xlarge"),
        ("P4D.24XLARGE", "p4d.24xlarge"),
        ("standard_nd96isr_h100_v5", "Standard_ND96isr_H100_v5"),
        ("m5.large", None),
        (None, None),
    ],
)
def test_instance_types_match_by_their_longest_name(name: str | None, key: str | None) -> None:
    spec = instance_spec(name)
    assert (spec.key if spec else None) == key


def test_every_instance_names_a_known_gpu_and_a_source() -> None:
    keys = {p.key for p in reference().platforms}
    for entry in reference().instances:
        assert entry.gpu in keys, entry.key
        assert entry.source and entry.nics > 0 and entry.nic_gbps > 0
        if entry.health_check:
            assert entry.health_check.source


@pytest.mark.parametrize(
    ("name", "key"),
    [("AMD Instinct MI300X", "MI300X"), ("AMD Instinct MI325X", "MI325X"), ("AMD Instinct MI250X", "MI250X")],
)
def test_amd_instinct_names_are_their_own_platforms(name: str, key: str) -> None:
    spec = platform_spec(name)
    assert spec is not None and spec.key == key
