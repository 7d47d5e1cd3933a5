"""The support-ticket bundle: what it holds, that it reads back as its inputs, and safe writing."""

from __future__ import annotations

import hashlib
import json
import os
import tarfile
from pathlib import Path

import pytest

from ncclscope.case.read import read_case
from ncclscope.diagnose.engine import analyze
from ncclscope.render.bundle import BundleError, read_manifest, write_bundle

from conftest import REPO

CASES = [
    ["fixtures/net/bootstrap_docker0_two_hosts.log"],
    [
        "fixtures/stories/pcie_host_nccl.log",
        "fixtures/stories/pcie_host_topo.txt",
        "fixtures/stories/pcie_host_all_reduce.txt",
    ],
    ["fixtures/nccl_tests/results_v3.json", "fixtures/nccl/v2_21_multinode_ib_merged.log"],
    ["fixtures/net"],
]


def _codes(paths: list[str]) -> list[str]:
    return [f.code for f in analyze(read_case(paths, jobs=1).case).findings]


@pytest.mark.parametrize("redact", [False, True], ids=["plain", "redacted"])
@pytest.mark.parametrize("rels", CASES, ids=lambda r: "+".join(Path(p).name for p in r))
def test_a_bundle_reads_back_as_its_inputs(tmp_path: Path, rels: list[str], redact: bool) -> None:
    paths = [str(REPO / r) for r in rels]
    ticket = tmp_path / "ticket.tar.gz"
    write_bundle(paths, ticket, redact=redact, command="ncclscope bundle ...")
    back = read_case([str(ticket)], jobs=1)
    assert back.exit_code == 0, back.messages
    assert [f.code for f in analyze(back.case).findings] == _codes(paths)
    assert all(s.path.startswith(f"{ticket}:inputs/") for s in back.case.sources)
    original = read_case(paths, jobs=1).case
    assert sorted(s.lines for s in back.case.sources) == sorted(s.lines for s in original.sources)
    evidence_lines = sorted(f.evidence[0].line for f in analyze(original).findings if f.evidence)
    assert sorted(f.evidence[0].line for f in analyze(back.case).findings if f.evidence) == evidence_lines


def test_the_bundle_holds_inputs_reports_findings_and_a_manifest(tmp_path: Path) -> None:
    ticket = tmp_path / "ticket.tar.gz"
    log = REPO / "fixtures/net/bootstrap_docker0_two_hosts.log"
    write_bundle([str(log)], ticket, redact=False, command="ncclscope bundle x.log -o ticket.tar.gz")
    with tarfile.open(ticket, "r:gz") as tar:
        names = tar.getnames()
        data = {m: tar.extractfile(m).read() for m in names}  # type: ignore[union-attr]
    assert "inputs/bootstrap_docker0_two_hosts.log" in names
    assert {"manifest.json", "report.md", "findings.json"} <= set(names)
    assert data["inputs/bootstrap_docker0_two_hosts.log"] == log.read_bytes()
    manifest = read_manifest(ticket)
    assert manifest["command"] == "ncclscope bundle x.log -o ticket.tar.gz"
    assert manifest["redacted"] is False and "redaction_map" not in manifest
    assert manifest["ncclscope_version"]
    files = manifest["files"]
    assert isinstance(files, dict) and set(files) == set(names) - {"manifest.json"}
    for name, meta in files.items():
        assert meta["sha256"] == hashlib.sha256(data[name]).hexdigest()
    findings = json.loads(data["findings.json"])
    assert {f["code"] for f in findings["findings"]} >= {"NET003"}
    if "report.html" not in names:
        assert any("report.html" in n for n in manifest.get("notes", []))  # type: ignore[union-attr]


def test_a_redacted_bundle_holds_no_original_host_or_address_and_not_the_map(tmp_path: Path) -> None:
    ticket = tmp_path / "ticket.tar.gz"
    map_file = tmp_path / "redaction-map.json"
    paths = [
        str(REPO / "fixtures/net/bootstrap_docker0_two_hosts.log"),
        str(REPO / "fixtures/nccl_tests/results_v3.json"),
    ]
    write_bundle(paths, ticket, redact=True, command="ncclscope bundle --redact", map_output=map_file)
    originals = {"dl-node-31", "dl-node-32", "gpu-j01", "/home/bench", "AWS_SECRET_ACCESS_KEY"}
    mapping = json.loads(map_file.read_text())
    assert {"dl-node-31", "dl-node-32"} <= set(mapping["host"])
    with tarfile.open(ticket, "r:gz") as tar:
        everything = b"".join(tar.extractfile(m).read() for m in tar.getmembers() if m.isfile())  # type: ignore[union-attr]
    for original in originals:
        assert original.encode() not in everything
    assert b"host-01" in everything
    manifest = read_manifest(ticket)
    assert manifest["redacted"] is True and manifest["redaction_map"] == "kept outside the bundle"
    assert "dl-node" not in json.dumps(manifest)


def test_an_unwritable_output_is_a_clear_error_and_leaves_nothing(tmp_path: Path) -> None:
    log = str(REPO / "fixtures/net/bootstrap_docker0_two_hosts.log")
    with pytest.raises(BundleError, match="no-such-dir"):
        write_bundle([log], tmp_path / "no-such-dir" / "t.tar.gz")
    with pytest.raises(BundleError, match="is a directory"):
        write_bundle([log], tmp_path)
    assert list(tmp_path.iterdir()) == []
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running as a user who can write anywhere")
        with pytest.raises(OSError, match="cannot write the bundle"):
            write_bundle([log], locked / "t.tar.gz")
        assert list(locked.iterdir()) == []
    finally:
        locked.chmod(0o700)


def test_a_tar_gz_that_is_not_a_bundle_is_not_expanded(tmp_path: Path) -> None:
    other = tmp_path / "other.tar.gz"
    with tarfile.open(other, "w:gz") as tar:
        tar.add(REPO / "fixtures/net/bootstrap_docker0_two_hosts.log", arcname="inputs/x.log")
    outcome = read_case([str(other)], jobs=1)
    assert not any(":inputs/" in s.path for s in outcome.case.sources)


def test_the_bundle_answers_the_nccl_issue_form(tmp_path: Path) -> None:
    """ticket.md: impact, the first failure, versions per host, platform and scale, the logs."""
    ticket = tmp_path / "ticket.tar.gz"
    write_bundle([str(REPO / "fixtures/timeline")], ticket, command="ncclscope bundle fixtures/timeline")
    with tarfile.open(ticket) as tar:
        member = tar.extractfile("ticket.md")
        assert member is not None
        text = member.read().decode()
    for section in ("## How this issue impacts you", "## The first failure", "## NCCL version", "## Debug logs"):
        assert section in text
    assert "- Xid 79 GPU has fallen off the bus on gpu-b, rank 3, GPU 0000:43:00.0 at 2025-06-02T10:15:40" in text
    assert "- gpu-a: NCCL 2.27.3+cuda12.8; CUDA driver 12.8" in text
    assert "4 ranks in the largest communicator" in text and "- `inputs/gpu-b-kernel.txt`" in text
