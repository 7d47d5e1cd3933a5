"""Issue 44: what a log's NCCL release changes in what an absence means (data/nccl_releases.json): lazy connection
since 2.22 is no missing evidence."""

from __future__ import annotations

from ncclscope.case.read import read_case
from ncclscope.common.versions import release_tuple
from ncclscope.diagnose.releases import behaviours, case_release, has

from conftest import REPO, only_finding

LAZY = "fixtures/nccl/v2_28_lazy_connect_init_only.log"


def test_release_tuples() -> None:
    assert release_tuple("2.21.5+cuda12.4") == (2, 21, 5)
    assert release_tuple("2.22") == (2, 22)
    assert release_tuple("unknown") is None and release_tuple(None) is None


def test_a_228_log_that_ends_at_init_is_not_told_to_turn_on_the_init_subsystem() -> None:
    found = only_finding("EVD001", LAZY)
    assert (
        "connection lines, which NCCL 2.22+ prints at a communicator's first collective, not at init" in found.message
    )
    assert "NCCL_RUNTIME_CONNECT=0" in found.fix
    assert "connection lines: NCCL_DEBUG=INFO with the INIT subsystem" not in found.fix


def test_an_older_release_still_needs_the_init_subsystem(tmp_path) -> None:  # type: ignore[no-untyped-def]
    old = tmp_path / "v2_21.log"
    old.write_text((REPO / LAZY).read_text(encoding="utf-8").replace("2.28.3+cuda12.9", "2.21.5+cuda12.4"))
    found = only_finding("EVD001", old)
    assert "connection lines or P2P reports: NCCL_DEBUG=INFO with the INIT subsystem" in found.fix


def test_the_release_of_a_case_and_its_behaviours() -> None:
    case = read_case([str(REPO / LAZY)], jobs=1).case
    assert case_release(case) == (2, 28, 3)
    assert has(case, "lazy_connect") is True and has(case, "gdr_at_trace") is False
    assert all(entry["source"] and entry["since"] for entry in behaviours().values())
