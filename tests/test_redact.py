"""Redaction: consistent pseudonyms for hosts, addresses and ids; the diagnosis survives it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ncclscope.case.read import read_case, read_case_redacted
from ncclscope.diagnose.engine import analyze
from ncclscope.diagnose.rules.catalog import all_rules
from ncclscope.inputs.redact import Redactor
from ncclscope.render.findings import to_json, to_markdown

from conftest import REPO, fixture_files

ANY_IPV4 = re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.])")


def _catalogue_text() -> list[str]:
    """ncclscope's own words (rule documentation): they may quote example addresses like docker0's."""
    texts = []
    for r in all_rules().values():
        for text in (r.why, r.fix, r.summary, *r.sources):
            if text:
                texts += [text, json.dumps(text)[1:-1]]
    return sorted(texts, key=len, reverse=True)


CATALOGUE = _catalogue_text()


def _originals(path: Path) -> set[str]:
    """Hostnames and addresses of one unredacted fixture, as the real pipeline understood them."""
    case = read_case([str(path)], jobs=1).case
    found = {h.name for h in case.hosts} | {p.host for p in case.processes}
    found |= {d.address.split("<")[0] for d in case.net_devices if d.address}
    found |= {d.host for run in case.benchmarks for d in run.devices}
    for member in sorted(path.rglob("*")) if path.is_dir() else [path]:  # a run directory: all its files
        if member.is_file():
            found |= set(ANY_IPV4.findall(member.read_bytes().decode("utf-8", "replace")))
    return {f for f in found if f}


def _leaks(originals: set[str], output: str) -> list[str]:
    for text in CATALOGUE:
        output = output.replace(text, "")
    return sorted(o for o in originals if re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", output))


@pytest.mark.parametrize("rel", fixture_files(), ids=str)
def test_no_original_hostname_or_address_survives(rel: Path) -> None:
    path = REPO / rel
    originals = _originals(path)
    outcome, redactor = read_case_redacted([str(path)], jobs=1)
    analysis = analyze(outcome.case)
    outputs = to_json(analysis) + "\n" + to_markdown(analysis) + "\n" + "\n".join(outcome.messages)
    assert _leaks(originals, outputs) == []
    hosts = {h.name for h in read_case([str(path)], jobs=1).case.hosts}
    assert all(any(known in h for known in redactor.mapping()) for h in hosts), "every host got a pseudonym"


@pytest.mark.parametrize(
    "rel",
    [
        "fixtures/net/bootstrap_docker0_two_hosts.log",
        "fixtures/net/ib_gdr_one_host_off.log",
        "fixtures/nccl/v2_21_multinode_ib_merged.log",
        "fixtures/nccl/variant_odd_hostnames.log",
        "fixtures/nccl/variant_pdsh_host.log",
        "fixtures/nccl_tests/failure_mid_table.txt",
        "fixtures/nccl_tests/results_v3.json",
        "fixtures/runtime/three_hosts_extra_env.log",
        "fixtures/mixed/multi_host_job_problems.txt",
        "fixtures/xml/h100_gpu3_x8_topo.xml",
        "fixtures/xml/h100_gpu6_nvlink_down_topo.xml",
    ],
)
def test_diagnosis_is_unchanged_by_redaction(rel: str) -> None:
    before = analyze(read_case([str(REPO / rel)], jobs=1).case)
    outcome, _ = read_case_redacted([str(REPO / rel)], jobs=1)
    after = analyze(outcome.case)
    assert [f.code for f in after.findings] == [f.code for f in before.findings]
    assert [f.severity for f in after.findings] == [f.severity for f in before.findings]
    assert len(after.case.hosts) == len(before.case.hosts)


def test_the_same_host_gets_the_same_pseudonym_across_inputs_and_file_names(tmp_path: Path) -> None:
    log = tmp_path / "nccl.gpu-a7.1234.log"
    log.write_text(
        "gpu-a7:1234:1234 [0] NCCL INFO Bootstrap : Using eth0:10.1.2.3<0>\n"
        "gpu-b9:77:77 [0] NCCL INFO NET/Socket : Using [0]eth0:10.1.2.4<0>\n"
    )
    tests = tmp_path / "bench.txt"
    tests.write_text("#  Rank  0 Group  0 Pid   1234 on     gpu-b9 device  0 [0x19] NVIDIA H100 80GB HBM3\n")
    outcome, redactor = read_case_redacted([str(tmp_path)], jobs=1)
    names = redactor.mapping()
    assert names["gpu-a7"] == "host-01" or names["gpu-b9"] == "host-01"
    assert {p.host for p in outcome.case.processes} == {names["gpu-a7"], names["gpu-b9"]}
    assert {d.host for run in outcome.case.benchmarks for d in run.devices} == {names["gpu-b9"]}
    assert any(f"nccl.{names['gpu-a7']}.1234.log" in s.path for s in outcome.case.sources)
    assert "10.1.2.3" not in outcome.case.model_dump_json()


def test_what_the_diagnosis_needs_is_kept() -> None:
    r = Redactor()
    r.learn_text("node7:10:10 [3] NCCL INFO x\n")
    line = (
        "node7:10:10 [3] NCCL INFO NCCL version 2.21.5+cuda12.4 NET/IB : Using [0]mlx5_0:1/IB [1]ib0:1/RoCE;"
        " OOB eth0:192.168.1.20<0> busId 0000:19:00.0 comm 0x7f2a3c001230 NVIDIA H100 80GB HBM3 size 137438953472"
    )
    out = r.redact_line(line)
    for kept in ("2.21.5+cuda12.4", "mlx5_0", "ib0", "eth0", "0000:19:00.0", "0x7f2a3c001230", "137438953472"):
        assert kept in out
    assert out.startswith("host-01:10:10 [3]") and "ip-01<0>" in out
    assert "node7" not in out and "192.168.1.20" not in out


@pytest.mark.parametrize(
    ("text", "gone", "pseudonym"),
    [
        ("addr fe80::1%ib0 up", "fe80::1", "ipv6-01%ib0"),
        ("peer 2001:db8:0:1::42 refused", "2001:db8:0:1::42", "ipv6-01"),
        ("link/ether 0c:42:a1:0b:cd:ef brd", "0c:42:a1:0b:cd:ef", "mac-01"),
        ("port GUID 0x0c42a10300abcdef", "0c42a10300abcdef", "guid-01"),
        ("Node GUID 0c42:a103:00ab:cdef", "0c42:a103:00ab:cdef", "guid-01"),
        ("open /home/alice/run/nccl.log", "alice", "/home/user-01/run"),
        ("open /Users/bob/nccl.log", "bob", "/Users/user-01/"),
        ("container 4f1c2b3a9d8e started", "4f1c2b3a9d8e", "container-01"),
        ("pod trainer-7f9c4d8b6d-x2kqz ready", "trainer-7f9c4d8b6d-x2kqz", "pod-01"),
        ('  <cpu host_hash="0x9d3c5a27e81f4b06" numaid="0">', "9d3c5a27e81f4b06", 'host_hash="host-01"'),
        ('<net name="mlx5_0" dev="0" guid="0x946dae03007c1a30" gdr="1"/>', "946dae03007c1a30", 'guid="guid-01"'),
        ("pod job-0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0-worker-3 ready", "0b1c2d3e", "pod-01"),
        ("    Serial Number                         : 1654922006233", "1654922006233", ": serial-01"),
        ("    GPU UUID : GPU-0a7e0a1c-3b2e-4f0d-9a01-6c2de01847f1", "0a7e0a1c", ": uuid-01"),
        (
            "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0a7e0a1c-3b2e-4f0d-9a01-6c2de01847f1)",
            "6c2de01847f1",
            "(UUID: uuid-01)",
        ),
        ("\tnode_guid:\t\t\ta088:c203:00c4:1e50", "a088:c203", "guid-01"),
    ],
)
def test_addresses_ids_and_users_get_pseudonyms(text: str, gone: str, pseudonym: str) -> None:
    out = Redactor().redact_line(text)
    assert gone not in out
    assert pseudonym in out


def test_a_serial_nvidia_smi_does_not_know_stays_as_it_is() -> None:
    line = "    Serial Number                         : N/A"
    assert Redactor().redact_line(line) == line


@pytest.mark.parametrize(
    "text",
    [
        "NCCL version 2.21.5+cuda12.4 driver 535.104.05 CUDA runtime 12.4.131",
        "c10::DistBackendError at 12:30:45",
        "size 123456789012 bytes",
        "libnccl.so.2.21.5",
    ],
)
def test_versions_times_and_numbers_are_not_addresses(text: str) -> None:
    assert Redactor().redact_line(text) == text


def test_nccl_tests_json_keeps_only_nccl_cuda_ucx_fi_environment() -> None:
    r = Redactor()
    data = json.loads((REPO / "fixtures/nccl_tests/results_v3.json").read_text())
    out = r.redact_json_text(json.dumps(data))
    assert out is not None
    redacted = json.loads(out)
    assert redacted["env"] and all(e.startswith(("NCCL_", "CUDA_", "UCX_", "FI_")) for e in redacted["env"])
    assert "AWS_SECRET_ACCESS_KEY" not in out and "HF_TOKEN" not in out
    hosts = {d["hostname"] for d in redacted["config"]["devices"]}
    assert hosts and all(h.startswith("host-") for h in hosts)


def test_the_map_is_written_only_on_request(tmp_path: Path) -> None:
    r = Redactor()
    r.learn_text("gpu-z1:1:1 [0] NCCL INFO hello\n")
    assert r.redact_text("gpu-z1 and 10.0.0.9\n") == "host-01 and ip-01\n"
    r.write_map(tmp_path / "map.json")
    assert json.loads((tmp_path / "map.json").read_text()) == {
        "host": {"gpu-z1": "host-01"},
        "ip": {"10.0.0.9": "ip-01"},
    }


def test_a_run_directory_manifest_is_redacted_too(tmp_path: Path) -> None:
    from ncclscope.model import RunRecord

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "all_reduce.stdout.txt").write_text((REPO / "fixtures/runner/torch_bench_gloo_2ranks.txt").read_text())
    record = RunRecord(
        backend="torch",
        host="secret-node-7.corp.example",
        env_set={"NCCL_DEBUG_FILE": "/home/alice/runs/nccl.%h.%p.log"},
        inputs=["all_reduce.stdout.txt"],
    )
    (run_dir / "manifest.json").write_text(record.model_dump_json())
    outcome, _ = read_case_redacted([str(run_dir)], jobs=1)
    assert outcome.case.run is not None and outcome.case.run.backend == "torch"
    dumped = outcome.case.run.model_dump_json()
    assert "secret-node-7" not in dumped
    assert "alice" not in dumped
