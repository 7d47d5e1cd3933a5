"""Issue 41 item 7: the small inconsistencies a new user meets in the first hour, each through the real CLI
(the HTML ones also through headless Chromium in test_report_chromium.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from conftest import run_cli

GDR_BY_NIC = "fixtures/first_hour/gdr_off_nic_index.log"
INLINE_CODE = "fixtures/first_hour/inline_code_lines.md"
PROXY_ERROR = "fixtures/first_hour/proxy_internal_error.log"
TESTS_TWO_HOSTS = "fixtures/nccl_tests/mpi_ucx_warnings.txt"
ONE_HOST_LOGGED = "fixtures/first_hour/tests_one_host_logged.txt"


def _analyze(*args: str) -> str:
    done = run_cli("analyze", *args)
    assert done.returncode in (0, 1), done.stderr
    return done.stdout.decode()


def test_a_nic_known_only_by_its_index_is_named_once() -> None:
    """'(NIC NIC 1; rank 0)' was said when the host listed no NET/IB devices."""
    out = _analyze(GDR_BY_NIC)
    assert "NIC NIC" not in out
    assert "on gpu-k1 (NIC 1; rank 0)" in out


def test_gdr_on_over_one_nic_and_off_over_another_is_the_nic_s_distance_not_the_module() -> None:
    """Rank 0 uses GPUDirect RDMA over NIC 0: nvidia-peermem is loaded, so 'load the module' is not the fix."""
    out = _analyze(GDR_BY_NIC)
    first = out.split("\n\n")[1]
    assert "rank 0 uses it over NIC 0, so the driver side works: the NIC without it is too far from the GPU" in first
    assert "modprobe" not in first
    assert "fix: Keep each GPU's traffic on the NIC under its own PCIe switch" in first


def test_lines_quoted_as_inline_code_keep_their_hosts_whole() -> None:
    """Each line of a paste wrapped in backticks: hosts without the backtick, every record read."""
    done = run_cli("parse", "--format", "json", INLINE_CODE)
    assert done.returncode == 0, done.stderr
    case = json.loads(done.stdout)
    assert [h["name"] for h in case["hosts"]] == ["node-q7", "node-q8"]
    source = case["sources"][0]
    assert source["unrecognized_count"] == 0
    assert source["recognized"] == 5
    assert case["connections"]["total"] == 1


def test_a_communicator_counts_the_hosts_that_logged_it_not_the_hosts_of_the_inputs() -> None:
    """'2 hosts' on the platform line beside '1 host in the inputs' for the same job: the communicator's
    hosts are those whose NCCL lines show it."""
    out = _analyze(ONE_HOST_LOGGED)
    assert "Platform: 1x H100 per host, 2 hosts, network IB" in out
    assert "Communicator 0x5be0c7d1a93f2e44 (2 ranks, logged on 1 host)" in out
    assert "in the inputs)" not in out


def test_rules_list_ends_every_summary_on_a_whole_sentence() -> None:
    """`ncclscope rules` cut 'Got completion from peer .' and '(... e.g.' mid-sentence."""
    done = run_cli("rules")
    assert done.returncode == 0
    lines = [line for line in done.stdout.decode().splitlines() if re.match(r"[A-Z]+\d{3} ", line)]
    assert len(lines) >= 40
    for line in lines:
        text = line.rstrip()
        assert text.endswith((".", '"')), line
        assert not text.endswith((" .", "e.g.", "i.e.")), line
        assert text.count("`") % 2 == 0, line
    joined = "\n".join(lines)
    assert "Got completion from peer ... with error/status N`." in joined
    assert "e.g. Down/Polling: no link)" in joined


def test_counts_have_plurals_and_no_zero(tmp_path: Path) -> None:
    """'0 error, 2 warning' in Markdown; the headline says each count once, with its plural."""
    out = _analyze(GDR_BY_NIC)
    assert out.splitlines()[0] == "ncclscope 0.1.0: 2 warnings, 1 info"
    md = tmp_path / "r.md"
    assert run_cli("report", GDR_BY_NIC, "-o", str(md)).returncode in (0, 1)
    text = md.read_text()
    assert text.startswith("## ncclscope 0.1.0 report: 2 warnings, 1 info\n")
    assert "0 error" not in text
    assert " 2 warning," not in text


def test_a_report_of_nccl_tests_alone_lists_the_hosts_its_device_lines_name(tmp_path: Path) -> None:
    """'No host named in the inputs' while the platform said 2 hosts: the device lines name them."""
    md = tmp_path / "r.md"
    assert run_cli("report", TESTS_TWO_HOSTS, "-o", str(md)).returncode in (0, 1)
    text = md.read_text()
    hosts = text.split("### Versions and hosts", 1)[1].split("###", 1)[0]
    assert "No host named" not in hosts
    rows = [line for line in hosts.splitlines() if line.startswith("| ") and "(nccl-tests:" in line]
    assert len(rows) == 2, hosts


def test_run005_fix_decodes_the_result_and_names_where_nccl_saw_it() -> None:
    """RUN005's fix was 'Read the message and the chain' whatever the WARN."""
    out = _analyze(PROXY_ERROR)
    finding = out.split("ERROR   RUN005 nccl-warning", 1)[1]
    fix = next(line for line in finding.splitlines() if line.startswith("  fix: "))
    assert "Read the message" not in fix
    assert fix.startswith("  fix: The failure propagated as InternalError (3): one of NCCL's own checks failed")
    assert "NCCL first saw the failure at proxy.cc:452, the innermost file:line of the chain" in fix
    assert "NCCL's source at release 2.19.3+cuda12.3" in fix


def test_hosts_named_by_logs_and_by_device_lines_are_both_listed(tmp_path: Path) -> None:
    """One host logged NCCL lines, its partner is named by nccl-tests' device lines only: both are rows."""
    md = tmp_path / "r.md"
    assert run_cli("report", ONE_HOST_LOGGED, "-o", str(md)).returncode in (0, 1)
    hosts = md.read_text().split("### Versions and hosts", 1)[1].split("###", 1)[0]
    rows = [line for line in hosts.splitlines() if line.startswith("| cx-node")]
    assert rows[0].startswith("| cx-node11 | 1 | 0 | 2.26.2+cuda12.4 | IB |")
    assert rows[1] == "| cx-node12 (nccl-tests: 1x NVIDIA H100 80GB HBM3) | 1 | 1 | - | - | - |"


def test_a_redacted_host_placeholder_stays_the_host(tmp_path: Path) -> None:
    """A quote that opens a line is not part of the host; a placeholder put where the host was is the host."""
    log = tmp_path / "redacted.log"
    log.write_text(
        "<cluster_name>:920:1145 [1] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [receive] via NET/Socket/0\n"
        "`node-z3:310:311 [0] NCCL INFO NCCL version 2.21.5+cuda12.4`\n"
    )
    done = run_cli("parse", "--format", "json", str(log))
    assert done.returncode == 0, done.stderr
    case = json.loads(done.stdout)
    assert [h["name"] for h in case["hosts"]] == ["<cluster_name>", "node-z3"]
    assert case["nccl_versions"] == ["2.21.5+cuda12.4"]
