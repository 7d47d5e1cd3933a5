"""Issue 44: VER003, a published NCCL bug whose release and evidence the inputs show (data/known_bugs.json)."""

from __future__ import annotations

from pathlib import Path

from ncclscope.diagnose.rules.version_bugs import known_bugs

from conftest import REPO, findings_of, only_finding

SHARED_MEM = "fixtures/nccl/v2_25_shared_mem_limit.log"


def test_the_blackwell_consumer_bug_is_named_with_its_fixed_release_and_source() -> None:
    found = only_finding("VER003", SHARED_MEM)
    assert found.severity == "warning"
    assert found.message.startswith("NCCL 2.25.1 has a published bug that the inputs show: NCCL 2.24-2.25 cannot")
    assert found.message.endswith("first fixed in NCCL 2.26.2")
    assert "NVIDIA/nccl-tests#287" in found.fix
    assert "ncclMaxSharedMem 82240 exceeds" in found.evidence[0].text


def test_the_fixed_release_is_silent(tmp_path: Path) -> None:
    log = tmp_path / "fixed.log"
    log.write_text((REPO / SHARED_MEM).read_text(encoding="utf-8").replace("2.25.1+cuda12.2", "2.26.2+cuda12.2"))
    assert findings_of("VER003", log) == []


def test_the_release_alone_is_no_evidence(tmp_path: Path) -> None:
    log = tmp_path / "no_evidence.log"
    text = (REPO / SHARED_MEM).read_text(encoding="utf-8")
    log.write_text("\n".join(line for line in text.splitlines() if "maxSharedMem" not in line) + "\n")
    assert findings_of("VER003", log) == []


def test_every_bug_has_releases_evidence_and_a_source() -> None:
    for bug in known_bugs():
        assert len(bug["affected"]) == 2 and bug["fixed"] and bug["source"]
        assert bug["evidence"].get("families") or bug["evidence"].get("gpu_names")
