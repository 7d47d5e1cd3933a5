"""Issue 43: `show_gids` read by its grammar, and NCCL_IB_GID_INDEX judged against it (ENV001)."""

from __future__ import annotations

from pathlib import Path

from conftest import REPO, analysis_of, findings_of

GIDS = "fixtures/ib/show_gids_two_roce_nics.txt"


def _job(tmp_path: Path, index: str) -> Path:
    log = tmp_path / "job.log"
    log.write_text(
        "node-a:101:101 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
        f"node-a:101:101 [0] NCCL INFO NCCL_IB_GID_INDEX set by environment to {index}.\n"
    )
    return log


def test_every_row_is_read_with_its_version_and_address() -> None:
    case = analysis_of(GIDS).case
    assert case.sources[0].kinds == ["show_gids"]
    rows = [(g.device, g.port, g.index, g.ipv4, g.version, g.netdev) for g in case.roce_gids]
    assert len(rows) == 8
    assert rows[3] == ("mlx5_0", 1, 3, "10.42.1.17", "v2", "ens1f0np0")
    assert rows[4] == ("mlx5_1", 1, 0, None, "v1", "ens1f1np1")


def test_a_gid_index_of_roce_v1_is_a_warning_naming_the_v2_index(tmp_path: Path) -> None:
    (found,) = findings_of("ENV001", REPO / GIDS, _job(tmp_path, "2"))
    assert found.severity == "warning"
    assert found.message.endswith(
        "show_gids lists index 2 as a RoCE v1 GID on mlx5_0:1, mlx5_1:1: v1 is not routed beyond one L2 segment, so"
        " ranks across a router cannot connect; the tables' RoCE v2 IPv4 GIDs are at index 3"
    )


def test_a_link_local_gid_index_is_a_warning(tmp_path: Path) -> None:
    (found,) = findings_of("ENV001", REPO / GIDS, _job(tmp_path, "1"))
    assert "as a link-local fe80:: GID (no IPv4) on mlx5_0:1, mlx5_1:1" in found.message


def test_the_v2_ipv4_index_is_only_worth_knowing(tmp_path: Path) -> None:
    (found,) = findings_of("ENV001", REPO / GIDS, _job(tmp_path, "3"))
    assert found.severity == "info" and "show_gids" not in found.message
