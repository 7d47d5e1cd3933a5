"""VER001: mixed NCCL versions or CUDA drivers within one job, judged through the real pipeline."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

from ncclscope.case.read import read_case
from ncclscope.diagnose.engine import analyze
from ncclscope.diagnose.rules.version import version_from_code
from ncclscope.model import Finding

from conftest import FIXTURES, REPO, run_cli

DEMO = str(REPO / "fixtures/mixed/multi_host_job_problems.txt")
MISMATCH_WARN = str(REPO / "fixtures/runtime/version_mismatch_warn.log")
HEADERS_MISMATCH = str(REPO / "fixtures/runtime/nccl_tests_headers_mismatch.txt")
NEWEST_HEADER = str(REPO / "fixtures/nccl_tests/v2_20_newest_header.txt")
RUNTIME_COLLECTION = str(REPO / "fixtures/nccl/errors_runtime.log")
IB_COLLECTION = str(REPO / "fixtures/nccl/errors_ib_completion.log")


@cache
def _findings(path: str) -> tuple[Finding, ...]:
    return tuple(analyze(read_case([path], jobs=1).case).findings)


def findings(path: str) -> list[Finding]:
    return [f for f in _findings(path) if f.code == "VER001"]


def test_two_hosts_of_one_communicator_with_different_nccl_releases_are_an_error() -> None:
    (finding,) = findings(DEMO)
    assert finding.severity == "error"
    assert "communicator 0x1d4e5bea5de5f482" in finding.message
    assert "NCCL 2.21.5 on gpu-demo-a" in finding.message
    assert "NCCL 2.23.4 on gpu-demo-b" in finding.message
    assert "CUDA drivers differ too: 12.4 on gpu-demo-a, 12.6 on gpu-demo-b" in finding.message
    assert finding.hosts == ["gpu-demo-a", "gpu-demo-b"]
    assert [e.line for e in finding.evidence] == [178, 186]  # the Init lines that share the commId


def test_nccls_own_mismatch_warn_is_folded_into_the_job_finding() -> None:
    (finding,) = findings(MISMATCH_WARN)
    assert finding.severity == "error"
    assert "NCCL 2.24.3 on gpu-v01" in finding.message and "NCCL 2.23.4 on gpu-v02" in finding.message
    assert "Mismatched NCCL version detected" in finding.message
    assert {14, 19} <= {e.line for e in finding.evidence}


def test_nccl_tests_built_against_other_headers_than_the_library_is_an_error() -> None:
    (finding,) = findings(HEADERS_MISMATCH)
    assert finding.severity == "error"
    assert "NCCL 2.19.3 headers" in finding.message and "NCCL 2.23.4 library" in finding.message
    assert [e.line for e in finding.evidence] == [1]


def test_matching_headers_and_library_are_not_reported() -> None:
    assert findings(NEWEST_HEADER) == []


def test_collections_of_separate_jobs_are_not_read_as_one_mixed_job() -> None:
    assert findings(RUNTIME_COLLECTION) == []
    assert findings(IB_COLLECTION) == []


@pytest.mark.parametrize(
    "fixture",
    sorted(
        str(p)
        for p in FIXTURES.rglob("*")
        if p.is_file() and p.name != "README.md" and p.parent.name in ("nccl", "nccl_tests", "topo")
    ),
)
def test_single_version_fixtures_do_not_fire(fixture: str) -> None:
    case = read_case([fixture], jobs=1).case
    releases = {v.split("+")[0] for v in case.nccl_versions}
    if len(releases) > 1 or "errors_" in fixture:
        pytest.skip("holds several NCCL releases")
    assert [f for f in analyze(case).findings if f.code == "VER001"] == []


def test_version_codes_decode_across_the_2_9_change() -> None:
    assert version_from_code(22304) == "2.23.4"
    assert version_from_code(21903) == "2.19.3"
    assert version_from_code(2803) == "2.8.3"
    assert version_from_code(None) is None


def test_cli_json_reports_the_headers_mismatch() -> None:
    result = run_cli("analyze", "--format", "json", HEADERS_MISMATCH)
    data = json.loads(result.stdout)
    ver = [f for f in data["findings"] if f["code"] == "VER001"]
    assert len(ver) == 1
    assert ver[0]["severity"] == "error"
    assert ver[0]["name"] == "mixed-versions"
    assert ver[0]["sources"]


def test_without_a_version_line_the_socket_functions_of_one_jobs_warns_tell_two_releases(tmp_path: Path) -> None:
    """Issue 43: ncclOsSocketPollConnect (src/os/linux.cc, 2.29.2+) on one host and socketPollConnect
    (src/misc/socket.cc, 2.16.2-2.28.9) on the other, both connecting to the job's bootstrap root."""
    path = REPO / "fixtures/runtime/mixed_releases_by_socket_function.log"
    (finding,) = findings(str(path))
    assert finding.severity == "error" and finding.hosts == ["gpu-n01", "gpu-n02"]
    assert "connect to one address (10.4.0.11<42113>)" in finding.message
    assert "socketPollConnect (misc/socket.cc, NCCL 2.16.2 to 2.28.9) on gpu-n02" in finding.message
    assert "ncclOsSocketPollConnect (os/linux.cc, NCCL 2.29.2 or newer) on gpu-n01" in finding.message
    assert sorted(e.line for e in finding.evidence) == [1, 4]
    # one release on both hosts, or the two releases towards different addresses (separate jobs): nothing
    text = path.read_text()
    same = tmp_path / "same.log"
    same.write_text(
        text.replace(
            "os/linux.cc:200 NCCL WARN ncclOsSocketPollConnect", "misc/socket.cc:578 NCCL WARN socketPollConnect"
        )
    )
    apart = tmp_path / "apart.log"
    apart.write_text(
        text.replace("socketPollConnect: connect to 10.4.0.11", "socketPollConnect: connect to 10.4.0.12", 1)
    )
    assert findings(str(same)) == [] and findings(str(apart)) == []
