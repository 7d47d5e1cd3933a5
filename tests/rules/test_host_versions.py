"""VER002: GPU driver, VBIOS and NIC firmware versions that differ across the hosts' own reports."""

from __future__ import annotations

from conftest import REPO, findings_of

IB_A = str(REPO / "fixtures/ib/ibstat_8x_ndr.txt")
IB_B = str(REPO / "fixtures/ib/ibstat_8x_ndr_old_firmware.txt")
SMI_A = str(REPO / "fixtures/smi/nvidia_smi_q_8x_h100.txt")
SMI_B = str(REPO / "fixtures/smi/nvidia_smi_q_8x_h100_older_driver.txt")


def test_two_hosts_with_different_nic_firmware() -> None:
    (finding,) = findings_of("VER002", IB_A, IB_B)
    assert finding.severity == "warning"
    assert finding.message == (
        f"NIC firmware (family 28) differs across hosts: 28.36.1010 on {IB_B}; 28.39.1002 on {IB_A}"
    )
    assert [e.text for e in finding.evidence] == ["Firmware version: 28.39.1002", "Firmware version: 28.36.1010"]
    assert finding.hosts == sorted([IB_A, IB_B])


def test_the_version_most_hosts_hold_comes_first() -> None:
    devinfo = str(REPO / "fixtures/ib/ibv_devinfo_v_port_polling.txt")  # its fw_ver compares with ibstat's
    (finding,) = findings_of("VER002", IB_A, IB_B, devinfo)
    assert finding.message.startswith(
        f"NIC firmware (family 28) differs across hosts: 28.39.1002 on {IB_A}, {devinfo};"
    )


def test_gpu_driver_and_vbios_differ() -> None:
    driver, vbios = findings_of("VER002", SMI_A, SMI_B)
    assert driver.message == f"GPU driver differs across hosts: 535.183.01 on {SMI_B}; 550.90.07 on {SMI_A}"
    assert vbios.message.startswith("NVIDIA H100 80GB HBM3 VBIOS differs across hosts: 96.00.74.00.0D on")
    assert all("Driver Version" in e.text for e in driver.evidence)


def test_hosts_that_agree_say_nothing() -> None:
    assert not findings_of("VER002", IB_A, "fixtures/ib/ibstat_port_down_and_slow.txt", SMI_A)
    assert not findings_of("VER002", SMI_A, REPO / "fixtures/smi/nvidia_smi_q_gpu3_x8.txt")
