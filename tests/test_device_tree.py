"""Each host's device tree (case/device_tree.py): NCCL's PCIe tree with the host's own reports joined by
bus id, UUID and NIC name, degraded links marked on the rules' grounds, and the NIC <-> GPU paths NCCL chose."""

from __future__ import annotations

from ncclscope.case.device_tree import HostTree, TreeNode, device_trees
from ncclscope.case.read import read_case

from conftest import REPO, run_cli


def trees(*paths: str) -> list[HostTree]:
    return device_trees(read_case([str(REPO / p) for p in paths], jobs=1).case)


def node(tree: HostTree, prefix: str) -> TreeNode:
    (found,) = [n for n in tree.root.walk() if n.label.startswith(prefix)]
    return found


def test_nccls_tree_nests_cpus_switches_gpus_and_nics_and_marks_the_gpu_at_x8() -> None:
    (tree,) = trees("fixtures/xml/h100_gpu3_x8_topo.xml")
    cpus = [n for n in tree.root.children if n.kind == "cpu"]
    assert [c.label for c in cpus] == [
        "CPU / NUMA node 0 (GenuineIntel x86_64)",
        "CPU / NUMA node 1 (GenuineIntel x86_64)",
    ]
    switch = cpus[0].children[3]
    assert switch.kind == "switch" and [c.kind for c in switch.children] == ["gpu", "nic"]
    gpu3 = node(tree, "GPU 3 ")
    assert (gpu3.link, gpu3.state) == ("32 GT/s x8", "degraded")
    assert gpu3.notes[0] == "NCCL read 32 GT/s x8, where its 7 peers run 32 GT/s x16"
    assert [n.label for n in tree.degraded] == ["GPU 3 0000:5e:00.0"]


def test_the_graph_dump_gives_each_gpu_and_nic_the_paths_nccl_chose() -> None:
    (tree,) = trees("fixtures/xml/dgx_h100_topo.xml", "fixtures/xml/dgx_h100_graph.xml")
    assert tree.paths[:2] == [
        "ring: NET/0 (mlx5_0) -> GPU 0 (channels 0,8)",
        "ring: GPU 7 -> NET/0 (mlx5_0) (channels 0,8)",
    ]
    assert "NCCL's paths: NET/3 (mlx5_3) -> GPU 3; GPU 3 -> NET/4 (mlx5_4)" in node(tree, "GPU 3 ").notes


def test_a_port_down_joined_by_nic_name_marks_its_nic() -> None:
    (tree,) = trees("fixtures/xml/dgx_h100_topo.xml", "fixtures/ib/ibstat_port_down_and_slow.txt")
    nic = next(n for n in tree.root.walk() if "NET/2 mlx5_2 port 1, 400 Gb/s, GDR" in n.notes)
    assert nic.state == "degraded" and "mlx5_2 port 1: Down/Polling 10 Gb/s (ibstat)" in nic.notes


def test_our_own_run_joins_nvidia_smi_by_bus_id_and_shows_a_net_on_no_pci_device() -> None:
    (tree,) = trees("fixtures/device/h100_run_nccl_tests")
    assert tree.host == "vm"  # from the run's manifest
    gpu = node(tree, "GPU 0 ")
    assert gpu.label == "GPU 0 0000:00:06.0 NVIDIA H100 80GB HBM3"
    assert (gpu.link, gpu.state) == ("32 GT/s x16", "ok")  # nvidia-smi -q's; the VM showed NCCL width 0
    assert gpu.notes == ["NCCL read 32 GT/s x0"]
    eth0 = node(tree, "NIC eth0")
    assert eth0.notes == ["on no PCI device in NCCL's dump", "NET/0 eth0 port 0, 10 Gb/s, GDR off"]


def test_without_a_dump_the_hosts_reports_are_listed_flat_with_nvlinks_down_and_idle_gpus() -> None:
    (tree,) = trees("fixtures/smi/nvidia_smi_q_gpu3_x8.txt", "fixtures/smi/nvlink_s_gpu6_two_down.txt")
    assert tree.root.notes == ["no NCCL topology dump: GPUs and NICs without their PCIe tree"]
    assert [n.kind for n in tree.root.children] == ["gpu"] * 8
    assert (
        node(tree, "GPU 3 ").state == "degraded"
        and "32 GT/s x8, capable of 32 GT/s x16 (nvidia-smi -q)" in node(tree, "GPU 3 ").notes
    )
    gpu6 = node(tree, "GPU 6 ")
    assert gpu6.state == "degraded" and "NVLink: 16 of 18 links active (down: 14-15)" in gpu6.notes


def test_the_html_report_draws_the_tree_with_the_degraded_gpu_in_red(tmp_path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "r.html"
    done = run_cli("report", "fixtures/xml/h100_gpu3_x8_topo.xml", "fixtures/xml/dgx_h100_graph.xml", "-o", str(out))
    assert done.returncode in (0, 1), done.stderr.decode()
    html = out.read_text()
    section = html[html.index('<section id="devices">') :]
    section = section[: section.index("</section>")]
    assert '<span class="badge error">1 degraded</span>' in section
    assert '<li class="state-degraded"><span class="dev gpu">GPU 3 0000:5e:00.0</span>' in section
    assert "NCCL's paths between NICs and GPUs (graph dump)" in section
    assert "li.state-degraded > .dev" in html  # the rule that paints it red
