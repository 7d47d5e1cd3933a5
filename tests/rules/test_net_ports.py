"""NET008: InfiniBand/RoCE ports that are not up or run below their siblings, from `ibstat` and from NCCL's
topology dump, through the real pipeline."""

from __future__ import annotations

from pathlib import Path

from conftest import REPO, findings_of
from conftest import evidence_lines as lines

DOWN_AND_SLOW = "fixtures/ib/ibstat_port_down_and_slow.txt"
HEALTHY = "fixtures/ib/ibstat_8x_ndr.txt"
TOPO = "fixtures/xml/dgx_h100_topo.xml"


def test_a_port_down_and_a_slow_port_are_named_with_their_lines() -> None:
    down, slow = findings_of("NET008", DOWN_AND_SLOW)
    assert "mlx5_2 port 1: state Down, physical state Polling" in down.message
    assert "mlx5_5 port 1: runs at 200 Gb/s where its siblings run 400" in slow.message
    assert lines(down) == [43, 45] and lines(slow) == [94, 96]
    # ibstat alone does not say which ports NCCL uses: warnings, and the message says why
    assert {down.severity, slow.severity} == {"warning"}
    assert "the inputs do not say whether NCCL uses it" in down.message


def test_ports_nccl_uses_are_errors() -> None:
    found = findings_of("NET008", DOWN_AND_SLOW, TOPO)  # the dump lists mlx5_0..7 as NCCL's nets
    assert [f.severity for f in found] == ["error", "error"]
    assert all("NCCL uses it" in f.message for f in found)


def test_healthy_ports_say_nothing() -> None:
    assert not findings_of("NET008", HEALTHY)
    assert not findings_of("NET008", HEALTHY, TOPO)


def test_a_roce_port_at_a_lower_rate(tmp_path: Path) -> None:
    text = (REPO / HEALTHY).read_text().replace("Link layer: InfiniBand", "Link layer: Ethernet")
    marker = "CA 'mlx5_6'"
    head, tail = text.split(marker)
    path = tmp_path / "roce.txt"
    path.write_text(head + marker + tail.replace("Rate: 400", "Rate: 100", 1))
    (finding,) = findings_of("NET008", path)
    assert "mlx5_6 RoCE port 1: runs at 100 Gb/s where its siblings run 400" in finding.message


def test_a_net_slower_than_its_siblings_in_nccls_topology_dump(tmp_path: Path) -> None:
    text = (REPO / TOPO).read_text()
    path = tmp_path / "topo.xml"
    path.write_text(text.replace('name="mlx5_4" dev="4" speed="400000"', 'name="mlx5_4" dev="4" speed="200000"'))
    (finding,) = findings_of("NET008", path)
    assert finding.severity == "error"
    assert "mlx5_4 port 1: runs at 200 Gb/s where its siblings run 400 (NCCL uses it; from NCCL's topology dump)" in (
        finding.message
    )


def test_ibstatus_gives_the_same_ports_in_ibstat_s_words() -> None:
    """Issue 43: `ibstatus` (lower-case fields, the kernel's "1: DOWN") reads as ibstat does, and NET008 fires."""
    (finding,) = findings_of("NET008", "fixtures/ib/ibstatus_4x_hdr_port_down.txt")
    assert "mlx5_2 port 1: state Down, physical state Polling" in finding.message
    assert "from ibstatus" in finding.message
    assert lines(finding) == [23, 25]  # its state and rate lines, as from ibstat
