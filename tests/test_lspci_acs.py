"""Issue 44: `lspci -vvv` (parse/lspci.py, grammars/lspci.lark) and TOPO010: PCIe ACS redirect on a bridge above
GPUs; silent when ACS is off or the redirecting ports lead to no GPU."""

from __future__ import annotations

from ncclscope.case.read import read_case

from conftest import REPO, findings_of, only_finding

ACS_ON = "fixtures/host/lspci_vvv_acs_on_two_gpus.txt"
ACS_OFF = "fixtures/host/lspci_vvv_acs_off_two_gpus.txt"


def test_devices_bus_ranges_and_acs_flags_are_read() -> None:
    case = read_case([str(REPO / ACS_ON)], jobs=1).case
    assert case.sources[0].kinds == ["lspci"]
    by_bus = {d.bus_id: d for d in case.pci_devices}
    assert set(by_bus) == {"0000:17:00.0", "0000:18:08.0", "0000:18:10.0", "0000:19:00.0", "0000:1a:00.0"}
    port = by_bus["0000:18:08.0"]
    assert (port.secondary, port.subordinate, port.acs["ReqRedir"]) == (0x19, 0x19, True)
    assert by_bus["0000:19:00.0"].device_class == "3D controller"
    assert by_bus["0000:17:00.0"].acs["ReqRedir"] is False  # the ACSCap line before it is not the control


def test_acs_redirect_above_gpus_is_topo010() -> None:
    found = only_finding("TOPO010", ACS_ON)
    assert found.severity == "warning"
    assert "ACS redirect is on at 2 bridge(s) above 2 GPU(s) (0000:19:00.0, 0000:1a:00.0)" in found.message
    assert "NCCL_P2P_DISABLE=1" in found.fix
    assert any("ACSCtl" in e.text for e in found.evidence)


def test_acs_off_is_silent() -> None:
    assert findings_of("TOPO010", ACS_OFF) == []
