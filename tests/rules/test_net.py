"""NET001-NET007: which network NCCL uses between hosts and how it fails, judged through the real pipeline.

The fixtures written for this family are in fixtures/net (see its README); the others come from
fixtures/nccl and fixtures/mixed.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from ncclscope.case.read import read_case
from ncclscope.diagnose.engine import analyze
from ncclscope.model import Finding

from conftest import REPO, findings_of, run_cli
from conftest import evidence_lines as lines

NET = "fixtures/net"
SINGLE_HOST_SOCKET = f"{NET}/single_host_socket.log"
LIBIBVERBS_MISSING = f"{NET}/libibverbs_missing_two_hosts.log"
BOOTSTRAP_DOCKER0 = f"{NET}/bootstrap_docker0_two_hosts.log"
PLUGIN_MISMATCH = f"{NET}/plugin_mismatch_three_hosts.log"
EFA_PLUGIN_FAILED = f"{NET}/efa_plugin_failed_socket.log"
GDR_ONE_HOST_OFF = f"{NET}/ib_gdr_one_host_off.log"

SOCKET_FALLBACK = "fixtures/nccl/v2_26_socket_fallback.log"
HEALTHY_MULTINODE = "fixtures/nccl/v2_28_healthy_multinode_gdr.log"
HEALTHY_NVSWITCH = "fixtures/nccl/v2_18_8xh100_nvswitch.log"
HEALTHY_EFA = "fixtures/nccl/efa_aws_ofi.log"
HEALTHY_IB_GDR = "fixtures/nccl/v2_12_two_hosts_ib_gdr.log"
HEALTHY_MERGED = "fixtures/nccl/v2_21_multinode_ib_merged.log"
COLLNET = "fixtures/nccl/v2_18_collnet_sharp.log"
IB_ERRORS = "fixtures/nccl/errors_ib_completion.log"
RUNTIME_ERRORS = "fixtures/nccl/errors_runtime.log"
MIXED_NICS = "fixtures/nccl/rocm_roce_mixed_nics.log"
LATEST = "fixtures/nccl/v2_30_7_latest.log"
SHM_DOCKER0 = "fixtures/nccl/shm_instead_of_p2p.log"
IB_DISABLED_ONE_HOST = "fixtures/nccl/debug_env_overrides.log"
DEMO = "fixtures/mixed/multi_host_job_problems.txt"


@cache
def _findings(path: str) -> tuple[Finding, ...]:
    return tuple(analyze(read_case([path], jobs=1).case).findings)


def findings(path: str, code: str) -> list[Finding]:
    return [f for f in _findings(path) if f.code == code]


# ------------------------------------------------------------------------------------ NET001
def test_net001_is_an_error_when_a_two_host_job_talks_over_sockets() -> None:
    (finding,) = findings(SOCKET_FALLBACK, "NET001")
    assert finding.severity == "error"
    assert "every host (node-b01, node-b02; interface eth0)" in finding.message
    assert "8 connection lines via NET/Socket" in finding.message
    assert finding.hosts == ["node-b01", "node-b02"]
    assert finding.ranks == [0, 1, 2, 3]
    assert 20 in lines(finding)  # NET/Socket : Using [0]eth0


def test_net001_names_only_the_host_on_sockets_when_the_other_uses_ib() -> None:
    (finding,) = findings(DEMO, "NET001")
    assert finding.severity == "error"
    assert "gpu-demo-b (1 of 2 hosts; interfaces bond0, docker0)" in finding.message
    assert finding.hosts == ["gpu-demo-b"]
    assert finding.ranks == [8, 15]


def test_net001_is_info_on_a_single_host_where_sockets_carry_nothing() -> None:
    (finding,) = findings(SINGLE_HOST_SOCKET, "NET001")
    assert finding.severity == "info"
    assert "single-host job" in finding.message
    assert "costs nothing here" in finding.message
    assert "enp5s0" in finding.message
    # the socket listing, and each process's `Using network Socket`: the lines that say NCCL chose sockets
    assert lines(finding) == [6, 7, 15]


def _one_rank_of(tmp_path: Path, nranks: int, keyless: bool = False) -> str:
    """SINGLE_HOST_SOCKET cut to rank 1's lines (one rank's NCCL_DEBUG_FILE), its communicator of
    `nranks` ranks; without the nNodes line, which would tell how many hosts the job has."""
    kept = []
    for line in Path(SINGLE_HOST_SOCKET).read_text().splitlines():
        if ":8813:" not in line or "nNodes" in line:
            continue
        line = line.replace("nranks 2", f"nranks {nranks}")
        if keyless:  # NCCL 2.8.4-2.15: no commId, no nvmlDev
            line = line.replace(" commId 0x6a1e33c09d2f8b41", "").replace(" nvmlDev 1", "")
        kept.append(line)
    path = tmp_path / f"rank1_of_{nranks}.log"
    path.write_text("\n".join(kept) + "\n")
    return str(path)


def test_net001_does_not_call_a_job_single_host_when_it_sees_one_rank_of_many(tmp_path: Path) -> None:
    """One rank's log of a 16-rank communicator on sockets: more ranks than one usual host has GPUs, so
    the job most likely spans hosts that talk over TCP; 'a single-host job, costs nothing' was a silent pass."""
    (finding,) = findings(_one_rank_of(tmp_path, 16), "NET001")
    assert finding.severity == "warning"
    assert "single-host job" not in finding.message
    assert "a communicator of 16 ranks (communicator 0x6a1e33c09d2f8b41) and the inputs show 1 of them" in (
        finding.message
    )
    assert "most likely run on other hosts" in finding.message


def test_net001_stays_info_for_one_rank_of_a_communicator_one_host_can_hold(tmp_path: Path) -> None:
    (finding,) = findings(_one_rank_of(tmp_path, 4), "NET001")
    assert finding.severity == "info"
    assert "single-host job" not in finding.message
    assert "the one host in the inputs (a communicator of 4 ranks, communicator 0x6a1e33c09d2f8b41, of which the" in (
        finding.message
    )
    assert "inputs show 1: any on other hosts" in finding.message


def test_net001_counts_the_ranks_of_communicators_without_commid_together(tmp_path: Path) -> None:
    """Before NCCL 2.16 a communicator has no commId: its ranks are read as one communicator each, and
    only together do they show every rank of the job."""
    log = tmp_path / "keyless_two_ranks.log"
    text = Path(SINGLE_HOST_SOCKET).read_text()
    for old in (" commId 0x6a1e33c09d2f8b41", " nvmlDev 0", " nvmlDev 1"):
        text = text.replace(old, "")
    log.write_text("\n".join(line for line in text.splitlines() if "nNodes" not in line) + "\n")
    (finding,) = findings(str(log), "NET001")
    assert finding.severity == "info"
    assert "single-host job" in finding.message
    one = _one_rank_of(tmp_path, 16, keyless=True)
    (finding,) = findings(one, "NET001")
    assert finding.severity == "warning"
    assert "a communicator of 16 ranks (ncclCommInitRank communicators without commId) and the inputs show 1" in (
        finding.message
    )


def test_a_single_host_socket_log_gives_only_infos() -> None:
    found = [f for f in _findings(SINGLE_HOST_SOCKET) if f.code.startswith(("NET", "GDR"))]
    assert {(f.code, f.severity) for f in found} == {("NET001", "info"), ("NET002", "info")}


def test_net001_does_not_fire_on_rdma_jobs() -> None:
    for path in (HEALTHY_MULTINODE, HEALTHY_NVSWITCH, HEALTHY_EFA, COLLNET):
        assert findings(path, "NET001") == [], path


# ------------------------------------------------------------------------------------ NET002
def test_net002_decodes_missing_libibverbs_and_is_an_error_with_the_socket_fallback() -> None:
    (finding,) = findings(LIBIBVERBS_MISSING, "NET002")
    assert finding.severity == "error"
    assert "libibverbs could not be loaded (4 lines)" in finding.message
    assert "fell back to TCP sockets (NET/Socket) on trn-c11, trn-c12" in finding.message
    assert finding.hosts == ["trn-c11", "trn-c12"]
    assert lines(finding) == [5, 7, 11, 17, 23]  # the four failed loads and the first `Using network Socket`
    assert finding.evidence_count == 8  # with the other three processes' `Using network Socket`


def test_net002_reports_no_ib_device_on_a_multi_host_socket_job() -> None:
    (finding,) = findings(SOCKET_FALLBACK, "NET002")
    assert finding.severity == "error"
    assert "NET/IB found no device (4 lines)" in finding.message
    assert lines(finding) == [18, 22, 25, 32, 39]  # every probe, and the first `Using network Socket` (line 22)


def test_net002_quotes_the_aws_ofi_nccl_failure() -> None:
    (finding,) = findings(EFA_PLUGIN_FAILED, "NET002")
    assert finding.severity == "error"
    assert "aws-ofi-nccl could not initialize (`Couldn't open a fabric provider. RC: -61" in finding.message
    assert "NET/IB found no device" in finding.message


def test_net002_ignores_a_failed_probe_on_a_host_that_still_uses_efa() -> None:
    assert findings(HEALTHY_EFA, "NET002") == []


def test_net002_is_only_info_about_missing_ib_devices_and_ib_disable_on_a_single_host() -> None:
    for path in (SINGLE_HOST_SOCKET, IB_DISABLED_ONE_HOST):
        (finding,) = findings(path, "NET002")
        assert finding.severity == "info", path
        assert "harmless while the job stays on one host" in finding.message


def test_a_network_name_with_undecodable_bytes_is_not_read_as_rdma(tmp_path) -> None:  # type: ignore[no-untyped-def]
    data = Path(SINGLE_HOST_SOCKET).read_bytes().replace(b"Using network Socket", b"Using network S\xff\xfeocket")
    damaged = tmp_path / "damaged.log"
    damaged.write_bytes(data)
    codes = {f.code for f in analyze(read_case([str(damaged)], jobs=1).case).findings}
    assert {"NET001", "NET002"} <= codes  # "NET/Socket : Using [0]enp5s0" still tells, with no RDMA device


def test_a_network_name_cut_short_of_socket_is_not_read_as_rdma_and_is_named(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`Using network S` (a line cut in the paste) names no plugin: read as one, the host used RDMA and the
    fallback vanished. The host's `NET/Socket` listing still tells; the input is named as cut there."""
    path = "fixtures/topo_cases/vm_sysfs_unreadable.log"
    damaged = tmp_path / "damaged.log"
    damaged.write_text(Path(path).read_text().replace("Using network Socket", "Using network S"))
    case = read_case([str(damaged)], jobs=1).case
    assert {"NET001", "NET002"} <= {f.code for f in analyze(case).findings}
    assert case.sources[0].truncated == [
        "a record of it is cut or damaged (line 10: `Using network S`; no network read from it)",
        "a record of it is cut or damaged (line 11: `Using network S`; no network read from it)",
    ]
    # a plugin's own name is read as it is
    damaged.write_text(Path(path).read_text().replace("Using network Socket", "Using network IBext_v8"))
    case = read_case([str(damaged)], jobs=1).case
    assert case.sources[0].truncated == [] and {p.network for p in case.processes} == {"IBext_v8"}


def test_net002_is_quiet_on_healthy_ib_jobs() -> None:
    for path in (HEALTHY_MULTINODE, HEALTHY_IB_GDR, HEALTHY_MERGED):
        assert findings(path, "NET002") == [], path


# ------------------------------------------------------------------------------------ NET003
def test_net003_flags_a_docker0_bootstrap_with_the_same_address_on_both_hosts() -> None:
    (finding,) = findings(BOOTSTRAP_DOCKER0, "NET003")
    assert finding.severity == "warning"
    assert "bootstrap/out-of-band traffic uses docker0 (a Docker bridge" in finding.message
    assert "docker0 has the same address 172.17.0.1 on dl-node-31, dl-node-32" in finding.message
    assert "NCCL_SOCKET_IFNAME selects docker0" in finding.message
    assert finding.hosts == ["dl-node-31", "dl-node-32"]
    assert 1 in lines(finding)  # NCCL_SOCKET_IFNAME set by environment to docker0


def test_net003_tells_a_veth_used_for_bootstrap_and_net_socket_once(tmp_path: Path) -> None:
    """One interface, two uses on one host: one finding naming both (corpus nccl-log-d412 told the same veth as two
    root causes, one per use)."""
    log = tmp_path / "veth.log"
    veth = "vethb71e0c2:fe80::9c41:2aff:fe10:5b1%vethb71e0c2<0>"
    log.write_text(
        f"trainer-0:811:811 [0] NCCL INFO Bootstrap : Using eno1:10.8.0.11<0> {veth}\n"
        "trainer-0:811:811 [0] NCCL INFO NET/IB : No device found.\n"
        f"trainer-0:811:811 [0] NCCL INFO NET/Socket : Using [0]eno1:10.8.0.11<0> [1]{veth}\n"
        "trainer-1:944:944 [0] NCCL INFO Bootstrap : Using eno1:10.8.0.12<0>\n",
        encoding="utf-8",
    )
    (finding,) = findings_of("NET003", str(log))
    assert finding.message.startswith(
        "bootstrap/out-of-band traffic and NET/Socket use vethb71e0c2 (a container's virtual ethernet pair"
    ), finding.message
    assert "on trainer-0 (NET/Socket besides eno1); NCCL_SOCKET_IFNAME is not set" in finding.message
    assert lines(finding) == [1, 3]


def test_net003_flags_docker0_in_the_socket_list_of_the_demo() -> None:
    (finding,) = findings(DEMO, "NET003")
    assert finding.severity == "warning"
    assert finding.message.startswith("NET/Socket uses docker0")
    assert "besides bond0; NCCL_SOCKET_IFNAME is not set" in finding.message
    assert lines(finding) == [35]


def test_net003_says_a_local_interface_is_harmless_on_one_host() -> None:
    (finding,) = findings(SHM_DOCKER0, "NET003")
    assert finding.severity == "info"  # "harmless" is not a warning
    assert finding.message.endswith("harmless while the job stays on one host")


def test_net003_is_quiet_on_data_interfaces() -> None:
    for path in (SOCKET_FALLBACK, HEALTHY_MULTINODE, HEALTHY_EFA, SINGLE_HOST_SOCKET):
        assert findings(path, "NET003") == [], path


def test_net003_counts_interface_names_not_the_processes_that_list_them(tmp_path: Path) -> None:
    # five processes of one host each list the one interface eth0 (our own run on a 1-GPU machine)
    assert findings("fixtures/device/h100_run_nccl_tests", "NET003") == []
    socket = "NCCL INFO NET/Socket : Using [0]eth0:10.4.0.7<0> [1]eth1:10.5.0.7<0> [2]ens9:10.6.0.7<0>"
    log = tmp_path / "three_interfaces.log"
    log.write_text("\n".join(f"gpu-q3:{pid}:{pid} [0] {socket}" for pid in (3101, 3102)) + "\n")
    (finding,) = findings(str(log), "NET003")
    assert "spreads traffic over 3 interfaces (eth0, eth1, ens9)" in finding.message


# ------------------------------------------------------------------------------------ NET004
def test_net004_flags_ib_and_roce_ports_and_a_bond_in_one_nic_list() -> None:
    (finding,) = findings(MIXED_NICS, "NET004")
    assert finding.severity == "warning"
    assert "mixes link layers: IB (mlx5_0, mlx5_1) and RoCE (mlx5_bond_0, mlx5_4)" in finding.message
    assert "bonded port mlx5_bond_0 next to rail NICs" in finding.message
    assert "failed to connect incompatible devices" in finding.message
    assert finding.hosts == ["gpu-m01", "gpu-m02"]
    assert 64 in lines(finding)


def test_net004_accepts_a_host_whose_ports_are_all_bonds_or_all_ib() -> None:
    for path in (IB_ERRORS, HEALTHY_MULTINODE, HEALTHY_MERGED):
        assert findings(path, "NET004") == [], path


# ------------------------------------------------------------------------------------ NET005
def test_net005_decodes_status_12_and_names_nic_rank_and_peer_host() -> None:
    (finding,) = findings(LATEST, "NET005")
    assert finding.severity == "error"
    assert "status 12 RETRY_EXC_ERR on gpu-p02 NIC mlx5_1 (rank 3)" in finding.message
    assert "from peer 10.9.4.21 (gpu-p01)" in finding.message
    assert "transport retry counter exceeded" in finding.message
    assert finding.ranks == [3]
    assert lines(finding) == [124]


def test_net005_reads_every_completion_error_format() -> None:
    found = findings(IB_ERRORS, "NET005")
    assert {f.hosts[0] for f in found} == {
        "ib-old-03",
        "ib-cl2-07",
        "roce-gpu-11",
        "ib-h100-21",
        "ib-h100-34",
        "roce-h100-52",
        "ib-b200-61",
        "roce-b200-71",
    }
    assert all(f.severity == "error" for f in found)
    by_host = {f.hosts[0]: f.message for f in found}
    assert "status 12 RETRY_EXC_ERR" in by_host["ib-b200-61"]  # 2.28.7 status=IBV_WC_RETRY_EXC_ERR(12)
    assert "NIC mlx5_5" in by_host["ib-b200-61"]
    assert "status 10 REM_ACCESS_ERR" in by_host["roce-b200-71"]
    assert "status 5 WR_FLUSH_ERR" in by_host["ib-h100-34"]
    assert "consequence of an earlier error" in by_host["ib-h100-34"]


def test_net005_counts_each_completion_line_once() -> None:
    for finding in findings(IB_ERRORS, "NET005"):
        assert finding.evidence_count == 1


def test_net005_is_quiet_without_completion_errors() -> None:
    for path in (HEALTHY_MULTINODE, SOCKET_FALLBACK, RUNTIME_ERRORS):
        assert findings(path, "NET005") == [], path


# ------------------------------------------------------------------------------------ NET006
def test_net006_groups_connection_retries_with_the_final_refusal() -> None:
    found = findings(RUNTIME_ERRORS, "NET006")
    refused = [f for f in found if "gpu-c05" in f.hosts]
    (finding,) = refused
    assert finding.severity == "error"
    assert finding.message.startswith("Connection refused by 10.5.0.3, seen on gpu-c05 (3 lines)")
    assert lines(finding) == [57, 58, 60]


def test_net006_names_the_peer_that_closed_the_connection() -> None:
    (finding,) = findings(SOCKET_FALLBACK, "NET006")
    assert finding.severity == "error"
    assert "Connection closed by remote peer node-b01.cluster.internal (node-b01)" in finding.message
    assert "seen on node-b02 (ranks 2-3) (2 lines)" in finding.message
    assert lines(finding) == [137, 143]


def test_net006_reports_the_reset_and_leaves_the_proxy_error_to_run005() -> None:
    messages = [f.message for f in findings(LATEST, "NET006")]
    assert any(m.startswith("Connection reset by peer 10.9.4.22 (gpu-p02), seen on gpu-p01") for m in messages)
    assert not any("Proxy" in m for m in messages)
    assert any("[Proxy Service" in f.message for f in findings(LATEST, "RUN005"))


def test_net006_does_not_name_a_host_for_an_address_every_host_has() -> None:
    (finding,) = findings(BOOTSTRAP_DOCKER0, "NET006")
    assert finding.message.startswith("Connection refused by 172.17.0.1, seen on dl-node-32 (rank 2) (4 lines)")


def test_net006_is_quiet_on_healthy_logs() -> None:
    for path in (HEALTHY_MULTINODE, HEALTHY_NVSWITCH, HEALTHY_EFA, LIBIBVERBS_MISSING):
        assert findings(path, "NET006") == [], path


# ------------------------------------------------------------------------------------ NET007
def test_net007_names_the_host_that_differs_from_the_majority() -> None:
    (finding,) = findings(PLUGIN_MISMATCH, "NET007")
    assert finding.severity == "error"
    assert "gpu-x03 uses network IB while the other 2 hosts use IBext" in finding.message
    assert "gpu-x03 uses net plugin internal while the other 2 hosts use plugin IBext" in finding.message
    assert finding.hosts == ["gpu-x03"]
    assert 14 in lines(finding)  # the plugin load failure of gpu-x03


def test_net007_lists_both_sides_when_two_hosts_disagree() -> None:
    (finding,) = findings(DEMO, "NET007")
    assert "gpu-demo-a uses network IB while gpu-demo-b uses Socket" in finding.message
    assert finding.hosts == ["gpu-demo-a", "gpu-demo-b"]
    # the `Using network` lines the two networks are read from are among the lines shown
    assert [e.text.split("NCCL INFO ")[1] for e in finding.evidence if "Using network" in e.text] == [
        "Using network IB",
        "Using network Socket",
    ]


def test_net007_is_quiet_when_every_host_matches() -> None:
    for path in (HEALTHY_MULTINODE, HEALTHY_EFA, COLLNET, SOCKET_FALLBACK):
        assert findings(path, "NET007") == [], path


# ------------------------------------------------------------------------------------ all
def test_no_net_error_on_healthy_fixtures() -> None:
    for path in (HEALTHY_MULTINODE, HEALTHY_NVSWITCH, HEALTHY_EFA, HEALTHY_IB_GDR, HEALTHY_MERGED, COLLNET):
        errors = [f for f in _findings(path) if f.code.startswith("NET") and f.severity == "error"]
        assert errors == [], path


def test_cli_json_reports_the_socket_fallback_story() -> None:
    proc = run_cli("analyze", "--format", "json", "--select", "NET", "--fail-on", "never", LIBIBVERBS_MISSING)
    assert proc.returncode == 0
    data = json.loads(proc.stdout)
    by_code = {f["code"]: f for f in data["findings"]}
    assert set(by_code) == {"NET001", "NET002"}
    assert by_code["NET002"]["severity"] == "error"
    assert by_code["NET002"]["root_cause"] is True
    assert "NET001" in by_code["NET002"]["related"]
    assert by_code["NET001"]["name"] == "socket-transport"
    assert by_code["NET001"]["evidence"][0] == {
        "source": LIBIBVERBS_MISSING,
        "line": 6,
        "text": "trn-c11:20411:20411 [0] NCCL INFO NET/Socket : Using [0]eth0:10.60.2.11<0>",
    }
    assert by_code["NET001"]["sources"]


# ------------------------------------------------------------------------------ socket plugins, retries
FASTSOCKET = f"{NET}/fastsocket_plugin_gdr_disabled.log"
RETRIES_RECOVERED = f"{NET}/connect_retries_recovered.log"
RETRIES_CUT = f"{NET}/connect_retries_cut_off.log"


def _codes(path: str) -> dict[str, list[Finding]]:
    out: dict[str, list[Finding]] = {}
    for f in analyze(read_case([path], jobs=1).case).findings:
        out.setdefault(f.code, []).append(f)
    return out


def test_a_socket_plugin_is_named_as_the_log_names_it_and_its_gdr_off_is_no_fault() -> None:
    found = _codes(FASTSOCKET)
    (net001,) = found["NET001"]
    assert net001.severity == "info" and "NCCL selected NET/FastSocket on a3-vm-0417" in net001.message
    assert "GDR001" not in found and "GDR002" not in found  # a TCP plugin has no GPUDirect RDMA to turn on


def test_connection_retries_that_ended_in_a_complete_init_are_not_reported() -> None:
    found = _codes(RETRIES_RECOVERED)
    assert "NET006" not in found and "RUN001" not in found


def test_connection_retries_whose_outcome_is_cut_off_are_a_warning_and_explain_the_stuck_init() -> None:
    found = _codes(RETRIES_CUT)
    (net006,) = found["NET006"]
    assert net006.severity == "warning"
    assert "NCCL was still retrying and the inputs show neither the final failure nor a success" in net006.message
    assert lines(net006) == [7, 8, 9]
    (run001,) = found["RUN001"]
    assert "rank 1 was still retrying a connection (NET006)" in run001.message
    assert "stuck (a hang)" not in run001.message


def test_an_ofi_plugin_that_finds_no_efa_device_is_the_root_of_the_socket_fallback() -> None:
    """Issue 43: aws-ofi-nccl's `fi_getinfo() call failed: No data available`: the EFA device is not visible."""
    found = analyze(read_case([str(REPO / "fixtures/nccl/aws_ofi_no_efa_device.log")], jobs=1).case).findings
    (net002,) = [f for f in found if f.code == "NET002"]
    assert net002.severity == "error" and found[0].code == "NET002"
    assert "aws-ofi-nccl found no fabric device (fi_getinfo: the EFA device is not visible" in net002.message
    assert "vpc.amazonaws.com/efa" in net002.fix


# a peer reached at a loopback address: some rank advertised `lo`
LOOPBACK_ERROR = (
    "[rank3]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error"
    " (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\n"
    "[rank3]: Last error:\n"
    "[rank3]: socketStartConnect: Connect to 127.0.0.1<39421> failed : Connection refused\n"
)


def test_a_failed_connect_to_loopback_names_the_advertised_lo(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text(LOOPBACK_ERROR)
    (found,) = findings_of("NET003", log)
    assert found.severity == "warning"
    assert found.message.startswith(
        "a rank failed to connect to 127.0.0.1<39421> (Connection refused): a loopback address, which reaches only"
    )


def test_loopback_on_a_job_of_one_host_is_not_blamed(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text(
        "box:101:101 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
        "box:101:101 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.5<0>\n"
        "box:101:101 [0] NCCL INFO ncclCommInitRank comm 0x55d0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId"
        " 0x1 - Init COMPLETE\n"
        "box:102:102 [1] NCCL INFO ncclCommInitRank comm 0x55e0 rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId 2000 commId"
        " 0x1 - Init COMPLETE\n" + LOOPBACK_ERROR
    )
    assert [f.message for f in findings_of("NET003", log) if "loopback" in f.message] == []


def test_a_plugin_that_cannot_load_and_the_network_it_should_give_are_one_root_cause() -> None:
    (found,) = findings_of("NET002", "fixtures/net/gib_plugin_glibc_mismatch.log")
    assert found.severity == "error" and found.hosts == ["a3u-0", "a3u-1"]
    assert "the net plugin was found but could not be loaded: a symbol it needs is missing" in found.message
    assert "version `GLIBC_2.34' not found" in found.message
    assert "NCCL_NET names a network that no loaded plugin provides, so communicator init fails" in found.message
    assert found.fix.startswith("Give the image a net plugin it can load")


def test_a_plugin_that_is_simply_absent_is_no_broken_plugin(tmp_path: Path) -> None:
    log = tmp_path / "absent.log"
    log.write_text(
        "n1:11:11 [0] NCCL INFO NCCL version 2.25.1+cuda12.8\n"
        "n1:11:11 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.\n"
    )
    assert findings_of("NET002", log) == []


def test_an_efa_handshake_no_peer_answered_is_a_connection_failure() -> None:
    (found,) = findings_of("NET006", "fixtures/net/efa_handshake_unresponsive.log")
    assert found.severity == "error" and found.hosts == ["p5-a"]
    assert found.message.startswith("EFA handshake unanswered, seen on p5-a")
    assert "security group" in found.fix
    assert findings_of("NET005", "fixtures/net/efa_handshake_unresponsive.log") == []
