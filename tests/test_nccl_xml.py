"""NCCL's topology and graph XML (parse/nccl_xml.py): every device and link of a dump, and a hostile file
refused with one line (entities, external references, depth, size), through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ncclscope.inputs.opening import SNIFF_BYTES
from ncclscope.model import NcclTopologyDump
from ncclscope.parse.nccl_xml import MAX_DEPTH, XmlRefused, read_xml
from ncclscope.parse.sniff import nccl_xml as looks_like

from conftest import REPO, run_cli

TOPO = REPO / "fixtures" / "xml" / "dgx_h100_topo.xml"
GRAPH = REPO / "fixtures" / "xml" / "dgx_h100_graph.xml"


def parsed(*paths: str | Path) -> dict:
    done = run_cli("parse", "--format", "json", *map(str, paths))
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)


def test_the_topology_dump_gives_every_device_and_link() -> None:
    case = parsed(TOPO)
    (dump,) = case["topology_dumps"]
    assert case["sources"][0]["kinds"] == ["topology_xml"]
    assert dump["version"] == 1 and dump["host_hash"] == "0x9d3c5a27e81f4b06"
    assert [c["numa_id"] for c in dump["cpus"]] == [0, 1]
    kinds = [p["kind"] for p in dump["pci"]]
    assert kinds.count("switch") == 8 and kinds.count("gpu") == 8 and kinds.count("nic") == 8
    assert all(p["link_speed"] == 32.0 and p["link_width"] == 16 for p in dump["pci"])
    gpus = {g["dev"]: g for g in dump["gpus"]}
    assert sorted(gpus) == list(range(8)) and all(g["sm"] == 90 and g["gdr"] for g in gpus.values())
    assert all(sum(link["count"] for link in g["nvlinks"]) == 18 for g in gpus.values())
    assert {link["target_class"] for g in gpus.values() for link in g["nvlinks"]} == {"0x068000"}
    # each GPU shares its PCIe switch with one NIC: the tree keeps who hangs from what
    parent = {p["busid"]: p["parent"] for p in dump["pci"]}
    numa = {p["busid"]: p["numa_id"] for p in dump["pci"]}
    nets = {n["name"]: n for n in dump["nets"]}
    assert sorted(nets) == [f"mlx5_{i}" for i in range(8)]
    assert parent[gpus[0]["busid"]] == parent[nets["mlx5_0"]["busid"]] == "0000:18:00.0"
    assert numa[gpus[5]["busid"]] == 1
    assert nets["mlx5_3"]["speed"] == 400000 and nets["mlx5_3"]["gdr"] and nets["mlx5_3"]["port"] == 1
    # line numbers point at the elements, for evidence
    lines = TOPO.read_text().splitlines()
    assert 'name="mlx5_3"' in lines[nets["mlx5_3"]["evidence"]["line"] - 1]
    assert 'dev="5"' in lines[gpus[5]["evidence"]["line"] - 1]


def test_a_cloud_topology_file_gives_every_device_by_its_class() -> None:
    """The files clouds ship for NCCL_TOPO_FILE: empty <pci> elements known by class, `16 GT/s` speeds."""
    (dump,) = parsed(REPO / "fixtures" / "xml" / "cloud_vm_topo_file.xml")["topology_dumps"]
    assert [c["numa_id"] for c in dump["cpus"]] == [0, 1, 2, 3]
    by_kind: dict[str, list[dict]] = {}
    for device in dump["pci"]:
        by_kind.setdefault(device["kind"], []).append(device)
    assert {k: len(v) for k, v in by_kind.items()} == {"switch": 4, "gpu": 8, "nic": 8}
    assert all(d["link_speed"] == 16.0 and d["link_width"] == 16 for d in dump["pci"])
    bridges = {d["busid"] for d in by_kind["switch"]}
    assert all(d["parent"] in bridges for d in by_kind["gpu"] + by_kind["nic"])
    assert not dump["gpus"] and not dump["nets"]  # NCCL fills those in from the machine


def test_the_graph_dump_gives_each_graph_and_channel() -> None:
    (dump,) = parsed(GRAPH)["graph_dumps"]
    ring, tree = dump["graphs"]
    assert (ring["pattern"], ring["nchannels"], ring["speed_intra"], ring["type_intra"], ring["type_inter"]) == (
        4, 16, 40.0, "NVL", "PIX"
    )  # fmt: skip
    assert tree["pattern"] == 1 and len(tree["channels"]) == 16
    assert ring["channels"][1] == ["NET/1", *(f"GPU/{r}:{r}" for r in [1, 2, 3, 4, 5, 6, 7, 0]), "NET/1"]


def test_sniffing_needs_nccl_roots() -> None:
    assert looks_like(b'\xef\xbb\xbf<?xml version="1.0"?>\n<system version="1">') == "topology"
    assert looks_like(b'<graphs version="1">') == "graph"
    assert looks_like(b"<html><body>") is None
    assert looks_like(b"gpu-a:1:1 [0] NCCL INFO <system>") is None  # a log line quoting a tag


def refused(tmp_path: Path, name: str, data: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    done = run_cli("analyze", str(path))
    err = done.stderr.decode()
    assert done.returncode == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


def test_a_billion_laughs_file_is_refused_not_expanded(tmp_path: Path) -> None:
    entities = "".join(f'<!ENTITY l{i} "{f"&l{i - 1};" * 10}">' for i in range(1, 10))
    bomb = f'<?xml version="1.0"?><!DOCTYPE system [<!ENTITY l0 "lol">{entities}]><system version="1">&l9;</system>'
    err = refused(tmp_path, "topo.xml", bomb.encode())
    assert "XML refused" in err and "NCCL's XML never does" in err


def test_an_external_entity_is_refused_and_never_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-VALUE")
    xxe = f'<?xml version="1.0"?><!DOCTYPE system [<!ENTITY x SYSTEM "file://{secret}">]><system>&x;</system>'
    err = refused(tmp_path, "topo.xml", xxe.encode())
    assert "XML refused" in err and "TOP-SECRET-VALUE" not in err


def test_deep_nesting_and_huge_files_are_refused(tmp_path: Path) -> None:
    deep = b'<system version="1">' + b"<pci>" * (MAX_DEPTH * 4) + b"</pci>" * (MAX_DEPTH * 4) + b"</system>"
    assert f"nested more than {MAX_DEPTH} levels deep" in refused(tmp_path, "deep.xml", deep)
    with (tmp_path / "huge.xml").open("wb") as out:
        out.write(b'<system version="1">\n' + b"  " * SNIFF_BYTES + b"\n")  # text where the input is sniffed
        out.truncate(17 * 1024 * 1024)  # then sparse: 17 MiB without writing them
    assert "larger than 16 MiB: not read" in refused(tmp_path, "huge.xml", (tmp_path / "huge.xml").read_bytes())


def test_a_cut_dump_keeps_the_devices_before_the_cut(tmp_path: Path) -> None:
    cut = tmp_path / "cut.xml"
    cut.write_text("\n".join(TOPO.read_text().splitlines()[:40]) + "\n")
    done = run_cli("parse", "--format", "json", str(cut))
    assert done.returncode == 0
    assert "the XML is cut or damaged" in done.stderr.decode()
    (dump,) = json.loads(done.stdout)["topology_dumps"]
    assert [g["dev"] for g in dump["gpus"]] == [0, 1, 2] and len(dump["nets"]) == 2


def test_read_xml_names_a_foreign_root_and_keeps_a_cut_one() -> None:
    with pytest.raises(ValueError, match="the root element is <html>"):
        read_xml(b"<html/>", "x")
    dump, problems = read_xml(b'<system version="1"><cpu numaid="3">', "x")
    assert isinstance(dump, NcclTopologyDump) and dump.cpus[0].numa_id == 3
    assert problems and "cut or damaged" in problems[0]
    assert issubclass(XmlRefused, ValueError)  # callers catch it first, then ValueError


def test_a_directory_with_the_dumps_and_a_log_reads_all(tmp_path: Path) -> None:
    (tmp_path / "topo.xml").write_bytes(TOPO.read_bytes())
    (tmp_path / "graph.xml").write_bytes(GRAPH.read_bytes())
    case = parsed(tmp_path)
    assert sorted(k for s in case["sources"] for k in s["kinds"]) == ["graph_xml", "topology_xml"]


def test_an_xml_dump_with_nul_bytes_is_binary_and_refused_whole(tmp_path: Path) -> None:
    # as every text input: NUL bytes where the input is sniffed make it binary, refused in one line
    lines = (REPO / "fixtures/xml/cloud_vm_topo_file.xml").read_bytes().split(b"\n")
    lines[4] = b"\x00" + lines[4]
    assert "binary data (NUL bytes), not a text log; skipped" in refused(tmp_path, "nul.xml", b"\n".join(lines))


def test_a_runs_per_host_dump_is_read_with_the_host_its_file_names(tmp_path: Path) -> None:
    from ncclscope.case.read import read_case
    from ncclscope.model import RunRecord
    from ncclscope.runner.rundir import evidence_inputs

    run = tmp_path / "run"
    run.mkdir()
    source = REPO / "fixtures/xml/h100_gpu3_x8_topo.xml"
    for host in ("gpu-a01", "gpu-a02"):
        (run / f"nccl-topo.{host}.xml").write_bytes(source.read_bytes())
    record = RunRecord(started="2026-11-24T08:00:00+00:00", backend="nccl-tests")
    assert evidence_inputs(run, record) == ["nccl-topo.gpu-a01.xml", "nccl-topo.gpu-a02.xml"]
    case = read_case([str(run / "nccl-topo.gpu-a01.xml"), str(run / "nccl-topo.gpu-a02.xml")], jobs=1).case
    assert [d.host for d in case.topology_dumps] == ["gpu-a01", "gpu-a02"]
    assert read_case([str(source)], jobs=1).case.topology_dumps[0].host is None


def test_a_dump_of_devices_straight_under_an_unknown_numa_node_looks_virtual() -> None:
    from conftest import findings_of

    (found,) = findings_of("TOPO006", "fixtures/xml/kvm_guest_numa_unknown_topo.xml")
    assert "puts 2 GPUs and 2 NICs straight under a CPU of NUMA node -1 (unknown)" in found.message
    assert {e.line for e in found.evidence} >= {2}
    assert findings_of("TOPO008", "fixtures/xml/kvm_guest_numa_unknown_topo.xml") == []
    assert findings_of("TOPO006", "fixtures/xml/dgx_h100_topo.xml") == []  # NUMA nodes 0 and 1, PCIe switches
