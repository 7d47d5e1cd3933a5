"""The hosts' own reports of their devices (`ibv_devinfo`, `nvidia-smi -q`, `nvidia-smi nvlink -s`,
`nvidia-smi topo -p2p`): read from files and pastes through the real reading pipeline."""

from __future__ import annotations

from pathlib import Path

from ncclscope.reading import read_case

from conftest import REPO

DEVINFO = "fixtures/ib/ibv_devinfo_v_port_polling.txt"


def case_of(*paths: str | Path):  # type: ignore[no-untyped-def]
    return read_case([str(p) for p in paths]).case


# ------------------------------------------------------------------------------------------ ibv_devinfo
def test_ibv_devinfo_v_gives_each_port_in_ibstats_words() -> None:
    case = case_of(DEVINFO)
    assert [d.name for d in case.ib_devices] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    first, last = case.ib_devices[0], case.ib_devices[3]
    assert (first.tool, first.firmware, first.node_guid, first.ca_type) == (
        "ibv_devinfo", "28.39.1002", "0xa088c20300c41e50", "MT_0000000838"
    )  # fmt: skip
    port = first.ports[0]
    assert (port.state, port.physical_state, port.rate, port.link_layer) == ("Active", "LinkUp", 400.0, "InfiniBand")
    assert port.evidence is not None and "PORT_ACTIVE (4)" in port.evidence.text
    assert port.rate_evidence is not None and "100.0 Gbps (128)" in port.rate_evidence.text
    down = last.ports[0]
    assert (down.state, down.physical_state, down.rate) == ("Down", "Polling", 10.0)
    source = case.sources[0]
    assert source.kinds == ["ibv_devinfo"] and source.usable
    assert source.framework_lines == 0  # the -v capability lines are ibv_devinfo's, not left over


def test_ibv_devinfo_of_an_old_rdma_core_and_without_indentation(tmp_path: Path) -> None:
    # rdma-core before NDR prints "invalid speed (128)"; a paste may lose every tab
    lines = [
        "$ ibv_devinfo -v -d mlx5_4",
        "hca_id: mlx5_4",
        "fw_ver: 28.35.2000",
        "node_guid: 0c42:a103:0065:7f20",
        "port: 1",
        "state: PORT_INIT (2)",
        "active_width: 4X (2)",
        "active_speed: invalid speed (128)",
        "phys_state: LINK_UP (5)",
        "link_layer: InfiniBand",
        "vendor_id: 0x02c9",
        "state: PORT_DOWN (1)",
    ]
    path = tmp_path / "devinfo.txt"
    path.write_text("\n".join(lines) + "\n")
    case = case_of(path)
    (device,) = case.ib_devices
    (port,) = device.ports
    assert (device.firmware, port.state, port.physical_state) == ("28.35.2000", "Initializing", "LinkUp")
    assert port.rate == 400.0  # 4 lanes of NDR, from the speed code
    # an unindented field the reader does not keep ends the block: the `state:` line after it is not read
    assert case.sources[0].kinds == ["ibv_devinfo"]


def test_ibv_devinfo_port_down_is_net008() -> None:
    from conftest import findings_of

    (finding,) = findings_of("NET008", DEVINFO)
    assert "mlx5_3 port 1: state Down, physical state Polling" in finding.message
    assert "from ibv_devinfo" in finding.message
    assert not findings_of("NET008", REPO / "fixtures/ib/ibstat_8x_ndr.txt")
