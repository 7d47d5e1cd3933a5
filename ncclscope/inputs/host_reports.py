"""The reports a host gives of itself that a run directory holds (the runner asks for them), and what
each adds to a diagnosis: the runner collects them, the evidence rule (EVD001) names a missing one."""

from __future__ import annotations

from typing import NamedTuple


class HostReport(NamedTuple):
    """A report the runner asks the machine for, the file it goes to, and what it adds to a diagnosis."""

    name: str
    argv: list[str]
    file: str
    adds: str


HOST_REPORTS = (
    HostReport("nvidia-smi topo -m", ["nvidia-smi", "topo", "-m"], "topo.txt",
               "the GPU and NIC paths (TOPO001-TOPO003, TOPO009)"),
    HostReport("nvidia-smi -q", ["nvidia-smi", "-q"], "nvidia-smi-q.txt",
               "each GPU's PCIe link, driver and VBIOS (TOPO007, VER002)"),
    HostReport("nvidia-smi nvlink -s", ["nvidia-smi", "nvlink", "-s"], "nvlink.txt",
               "each NVLink's state and speed (TOPO008)"),
    HostReport("nvidia-smi topo -p2p r", ["nvidia-smi", "topo", "-p2p", "r"], "p2p.txt",
               "the GPU pairs the driver allows P2P between (TOPO009)"),
    HostReport("ibstat", ["ibstat"], "ibstat.txt",
               "each InfiniBand port's state and rate, and NIC firmware (NET008, VER002)"),
)  # fmt: skip
