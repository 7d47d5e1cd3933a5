"""What an `nvidia-smi topo -m` matrix says about distance: PCIe path classes ranked, and each GPU's nearest NIC.

Shared by the topology rules, the reports and the TUI (kept free of heavy imports: the TUI starts fast).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from ncclscope.model import TopologyMatrix

# PCIe path classes of the matrix legend, nearest first; SOC is the old drivers' name for SYS.
PCIE_RANK = {"PIX": 1, "PXB": 2, "PHB": 3, "NODE": 4, "SYS": 5, "SOC": 5}
# NCCL uses P2P between GPUs, and GPUDirect RDMA between a GPU and a NIC, up to PXB by default
# (src/graph/paths.cc); NODE is PHB-class for NCCL.
NEAR = PCIE_RANK["PXB"]
NV_TOKEN = re.compile(r"^NV(\d+)$")


def link(topo: TopologyMatrix, a: str, b: str) -> str:
    """The matrix cell between devices a and b (either row), upper-cased; "" when not printed."""
    return (topo.links.get(a, {}).get(b) or topo.links.get(b, {}).get(a) or "").strip().upper()


class NearestNic(NamedTuple):
    """The NICs with the best PCIe path from one GPU (ties all listed, in matrix order), and that path's token."""

    gpu: str
    nics: list[str]
    link: str

    @property
    def far(self) -> bool:
        """PHB, NODE or SYS: NCCL leaves GPUDirect RDMA off by default and NIC traffic crosses the CPU."""
        return bool(self.link) and PCIE_RANK[self.link] > NEAR


def nearest_nics(topo: TopologyMatrix) -> list[NearestNic]:
    """Per GPU, in matrix order: the NICs of the best PCIe class (NVLink does not reach NICs; cells that are not
    a PCIe class are skipped)."""
    result = []
    for gpu in topo.gpus:
        ranked = {nic: PCIE_RANK[token] for nic in topo.nics if (token := link(topo, gpu, nic)) in PCIE_RANK}
        best = min(ranked.values(), default=None)
        nics = [nic for nic, rank in ranked.items() if rank == best]
        result.append(NearestNic(gpu, nics, link(topo, gpu, nics[0]) if nics else ""))
    return result


def nic_label(topo: TopologyMatrix, nic: str) -> str:
    """A NIC column with its legend name: NIC0 (mlx5_0)."""
    name = topo.nic_names.get(nic)
    return f"{nic} ({name})" if name and name != nic else nic


def split_label(label: str) -> tuple[str, int] | None:
    """'GPU12' -> ('GPU', 12), 'mlx5_3' -> ('mlx5_', 3); None when the label does not end in a number."""
    head = label.rstrip("0123456789")
    return (head, int(label[len(head) :])) if len(head) < len(label) else None


# nvidia-smi lists RDMA devices as NICs (mlx5_0, rocep25s0f0, ibp12s0, efa0 ...); plain netdev names
# (a NIC column of an Ethernet port) mean a port without RDMA.
NON_RDMA_PREFIXES = ("eth", "em", "bond", "br", "docker", "veth", "virbr", "lxcbr", "wl")


def is_rdma_nic(name: str) -> bool:
    """Whether a NIC name of a matrix (or of its NIC Legend) is an RDMA device."""
    low = name.lower()
    if low == "lo" or low.startswith(NON_RDMA_PREFIXES):
        return False
    # enp65s0, eno1, ens5 ...: systemd's predictable names of Ethernet ports
    return not (low.startswith("en") and len(low) > 2 and low[2].isalpha())
