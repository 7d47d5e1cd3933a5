"""Issue 44: the host's kernel log (parse/kernel_log.py, grammars/kernel_log.lark) in every form a paste keeps it,
and HW001 from it and from `nvidia-smi -q`'s remapped rows; silent on the application's own Xids."""

from __future__ import annotations

import json

import pytest

from ncclscope.case.read import read_case
from ncclscope.diagnose.xid_catalog import catalog, xid
from ncclscope.parse.kernel_log import KernelLogReader

from conftest import REPO, findings_of, only_finding, run_cli

XID79 = "fixtures/kernel/dmesg_T_xid79_fallen_off_bus.txt"
NVLINK = "fixtures/kernel/journalctl_nvlink_xid74_sxid.txt"
AER = "fixtures/kernel/dmesg_aer_uncorrected_uptime.txt"
HEALTHY = "fixtures/kernel/dmesg_application_xids_only.txt"
REMAP = "fixtures/smi/remapped_rows_pending_fragment.txt"


def events_of(*lines: str) -> list[dict]:
    reader = KernelLogReader("x")
    for number, line in enumerate(lines, start=1):
        reader.feed(number, line)
    return [e.model_dump(exclude={"evidence", "source"}, exclude_none=True) for e in reader.finish()]


@pytest.mark.parametrize(
    ("line", "time", "host"),
    [
        ("[Tue Mar  4 14:55:02 2025] NVRM: Xid (PCI:0000:5d:00): 79, pid=1, name=x, GPU has fallen off the bus.",
         "Tue Mar  4 14:55:02 2025", None),
        ("[ 5120.338811] NVRM: Xid (PCI:0000:5d:00): 79, pid=1, name=x, gone", "5120.338811", None),
        ("[  +0.000316] NVRM: Xid (PCI:0000:5d:00): 79, pid=1, name=x, gone", "+0.000316", None),
        ("Mar  4 14:55:02 gpu-n3 kernel: NVRM: Xid (PCI:0000:5d:00): 79, pid=1, name=x, GPU has fallen off the bus.",
         "Mar 4 14:55:02", "gpu-n3"),
        ("Mar  4 14:55:02 gpu-n3 kernel: [ 12.5] NVRM: Xid (PCI:0000:5d:00): 79, pid=1, name=x, lost.",
         "12.5", "gpu-n3"),
        ("kernel: NVRM: Xid (PCI:0000:5d:00): 79, pid=1, name=x, GPU has fallen off the bus.", None, None),
        ("2025-03-04T14:55:02.123+01:00 gpu-n3 kernel: NVRM: Xid (PCI:0000:5d:00): 79, pid=1, name=x, gone",
         "2025-03-04T14:55:02.123+01:00", "gpu-n3"),
        ("10.0.0.7: kern: warning: [2025-03-04T14:55:02.1Z]: NVRM: Xid (PCI:0000:5d:00): 79, pid=1, name=x, gone",
         "2025-03-04T14:55:02.1Z", "10.0.0.7"),
    ],
)  # fmt: skip
def test_every_lead_a_kernel_log_line_comes_with_gives_its_time_and_host(line: str, time: str, host: str) -> None:
    [event] = events_of(line)
    assert (event["kind"], event["xid"], event["bus_id"]) == ("xid", 79, "0000:5d:00.0")
    assert event.get("time") == time and event.get("host") == host


def test_an_xid_line_gives_its_process_text_and_the_xid_it_follows() -> None:
    [event] = events_of(
        "kernel: NVRM: Xid (PCI:0000:dc:00): 45, pid=77, name=VLLM::Worker, Ch 00000002 caused by previous Xid 149"
    )
    assert event == {
        "kind": "xid", "bus_id": "0000:dc:00.0", "xid": 45, "pid": "77", "process": "VLLM::Worker",
        "detail": "Ch 00000002", "caused_by": 149,
    }  # fmt: skip
    [old] = events_of("[ 269.5] NVRM: Xid (0000:01:00): 3, C 00000005 SC 00000007 M 00001ffc Data ffffffff")
    assert (old["xid"], old["bus_id"], old["detail"]) == (
        3,
        "0000:01:00.0",
        "C 00000005 SC 00000007 M 00001ffc Data ffffffff",
    )


def test_the_three_line_fallen_off_message_and_the_gsp_banner_are_one_event_each() -> None:
    lines = (REPO / AER).read_text(encoding="utf-8").splitlines()
    fallen = [e for e in events_of(*lines) if e["kind"] == "fallen_off_bus"]
    assert fallen == [
        {"kind": "fallen_off_bus", "time": "5120.512044", "uptime": 5120.512044, "bus_id": "0000:16:00.0",
         "detail": "fallen off the bus",
         "closing": {"source": "x", "line": 5, "text": "NVRM: fallen off the bus and is not responding to commands."}}
    ]  # fmt: skip
    gsp = events_of(
        "[ 88.1] NVRM: _kgspLogXid119: ********** GSP Timeout **********",
        "[ 88.1] NVRM: _kgspLogXid119: Note: Please also check logs above.",
        "[ 88.2] NVRM: GPU at PCI:0000:0b:00: GPU-ff3d0000-7042-cc8c-f3a6-84d9d6eb3a4b",
    )
    assert [(e["xid"], e["bus_id"], e["detail"]) for e in gsp] == [(119, "0000:0b:00.0", "GSP Timeout")]


def test_sxid_aer_and_the_driver_version_are_typed() -> None:
    events = events_of(*(REPO / NVLINK).read_text(encoding="utf-8").splitlines())
    [sxid] = [e for e in events if e["kind"] == "sxid"]
    assert (sxid["xid"], sxid["severity"], sxid["bus_id"], sxid["host"]) == (20034, "Fatal", "0000:07:00.0", "hgx-b07")
    aer = [e for e in events_of(*(REPO / AER).read_text(encoding="utf-8").splitlines()) if e["kind"] == "aer"]
    assert [(e["bus_id"], e["severity"], e.get("detail")) for e in aer] == [
        ("0000:16:00.0", "Uncorrected (Fatal)", None), ("0000:16:00.0", "Uncorrected (Fatal)", "Inaccessible"),
    ]  # fmt: skip
    [load] = [
        e for e in events_of(*(REPO / XID79).read_text(encoding="utf-8").splitlines()) if e["kind"] == "driver_load"
    ]
    assert load["driver_version"] == "550.127.05"


def test_a_kernel_log_is_an_input_kind_and_its_lines_are_counted() -> None:
    case = read_case([str(REPO / XID79)], jobs=1).case
    source = case.sources[0]
    assert source.kinds == ["kernel_log"] and source.kernel_lines == 8
    done = run_cli("parse", XID79)
    assert done.returncode == 0 and b"kernel_log, 11 lines, 8 kernel log lines" in done.stdout


def test_hw001_names_the_gpu_the_xid_and_what_to_do() -> None:
    found = only_finding("HW001", XID79)
    assert found.severity == "error"
    assert (
        "GPU 0000:5d:00.0: Xid 79 GPU has fallen off the bus (at Tue Mar  4 14:55:02 2025): a PCIe fault"
        in found.message
    )
    assert found.fix.startswith("Drain the node; power-cycle it") and "nvidia-bug-report.sh" in found.fix
    assert [e.line for e in found.evidence] == [7, 8]


def test_hw001_groups_a_host_and_takes_the_xid_45_fallout_as_its_cause() -> None:
    found = only_finding("HW001", NVLINK)
    assert found.hosts == ["hgx-b07"]
    assert "GPU 0000:1b:00.0: Xid 74 NVLink error (at 2025-05-17T22:41:07.118204+00:00)" in found.message
    assert (
        "the driver then says: GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)" in found.message
    )
    assert "NVSwitch 0000:07:00.0: fatal SXid 20034 (Link 44 LTSSM Fault Up)" in found.message
    assert found.message.endswith("an NVLink fault and an NVSwitch fault")
    assert found.evidence_count == 6  # both Xid 74, both Xid 45 that name it, the SXid, Xid 154; not its detail line


def test_hw001_on_an_uncorrected_pcie_error_and_a_storm_of_corrected_ones(tmp_path) -> None:
    assert (
        "PCIe device 0000:16:00.0: uncorrected PCIe error (Fatal, Inaccessible)" in only_finding("HW001", AER).message
    )
    storm = tmp_path / "dmesg.txt"
    storm.write_text(
        "".join(
            f"[  +0.00031{i}] pcieport 0000:00:03.0: AER: Corrected error received: 0000:00:03.0\n"
            f"[  +0.00000{i}] pcieport 0000:00:03.0: PCIe Bus Error: severity=Corrected, type=Data Link Layer,"
            " (Transmitter ID)\n"
            for i in range(3)
        ),
        encoding="utf-8",
    )
    found = only_finding("HW001", storm)
    # dmesg's relative times: the first is the time since the line before the burst
    assert "a storm of 3 corrected PCIe errors (Data Link Layer) in 0.6 ms" in found.message


def test_hw001_is_silent_on_the_application_own_xids_and_scattered_corrected_errors() -> None:
    assert findings_of("HW001", HEALTHY) == []
    case = read_case([str(REPO / HEALTHY)], jobs=1).case
    assert sorted({e.xid for e in case.kernel_events if e.xid}) == [13, 31, 43, 45, 63]


def test_hw001_from_a_remapped_rows_fragment_of_nvidia_smi() -> None:
    found = only_finding("HW001", REMAP)
    assert "2 rows remapped after uncorrectable memory errors, and the remap waits for a GPU reset" in found.message
    assert [e.line for e in found.evidence] == [2, 4, 5, 6]


def test_hw001_names_the_ranks_on_the_faulty_gpu(tmp_path) -> None:
    log = tmp_path / "rank.log"
    init = "NCCL INFO comm 0x5c{0} rank {0} nranks 2 cudaDev {0} nvmlDev {0} busId {1} commId 0x9 - Init COMPLETE"
    log.write_text(
        f"hgx-b07:40112:40150 [0] {init.format(0, '1b000')}\nhgx-b07:40113:40151 [1] {init.format(1, '43000')}\n",
        encoding="utf-8",
    )
    found = only_finding("HW001", NVLINK, log)
    assert "GPU 0000:1b:00.0 (rank 0)" in found.message and "GPU 0000:43:00.0 (rank 1)" in found.message
    assert found.ranks == [0, 1]


def test_the_xid_catalog_names_a_cause_and_a_source_for_every_code() -> None:
    data = catalog()
    assert {x.cause for x in data.xids} <= {"hardware", "application", "driver", "fallout", "maintenance", "recovery"}
    assert all(x.source and x.action for x in data.xids)
    assert xid(79).cause == "hardware" and xid(43).cause == "application" and xid(45).cause == "fallout"
    raw = json.loads((REPO / "ncclscope/data/xid_catalog.json").read_text(encoding="utf-8"))
    assert len({x["code"] for x in raw["xids"]}) == len(raw["xids"])


def test_an_nvidia_bug_report_is_read_section_by_section() -> None:
    """The report's sections hold the host's kernel log and nvidia-smi -q: each is read by its own reader."""
    report = "fixtures/host/nvidia_bug_report_xid79.log.gz"
    case = read_case([str(REPO / report)], jobs=1).case
    assert case.sources[0].kinds == ["kernel_log", "nvidia_smi_query"]
    assert [g.bus_id for g in case.smi_gpus] == ["0000:18:00.0"]
    found = only_finding("HW001", report)
    assert found.hosts == ["gpu-n3"] and "GPU 0000:18:00.0: Xid 79 GPU has fallen off the bus" in found.message
