"""VER002: the versions the hosts' own reports give (GPU driver and VBIOS from `nvidia-smi -q`, NIC
firmware from `ibstat`/`ibv_devinfo`) differ across the hosts of one job.

Each report names no host: one input is one host's report (as `ncclscope run` and support engineers
collect them), so the inputs are compared with each other. Like is compared with like: VBIOS per GPU
product, NIC firmware per adapter family (the first number of a Mellanox/NVIDIA firmware version names it:
28 is ConnectX-7, 22 ConnectX-6 Dx).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from ncclscope.diagnose.rules.context import Context, shown
from ncclscope.diagnose.rules.registry import make_finding, rule
from ncclscope.model import Evidence, Finding

# what -> version -> host -> the line that shows it (the first such line on that host)
Versions = dict[str, dict[str, dict[str, Evidence | None]]]


def _collect(ctx: Context) -> Versions:
    seen: Versions = defaultdict(lambda: defaultdict(dict))
    for gpu in ctx.case.smi_gpus:
        driver_line = gpu.version_evidence[0] if gpu.version_evidence else None
        if gpu.driver:
            seen["GPU driver"][gpu.driver].setdefault(ctx.report_host(gpu.source), driver_line)
        if gpu.vbios:
            vbios_line = next((e for e in gpu.version_evidence if "VBIOS" in e.text), None)
            seen[f"{gpu.product or 'GPU'} VBIOS"][gpu.vbios].setdefault(ctx.report_host(gpu.source), vbios_line)
    for device in ctx.case.ib_devices:
        if device.firmware:
            family = device.firmware.split(".")[0]
            host = ctx.report_host(device.source)
            seen[f"NIC firmware (family {family})"][device.firmware].setdefault(host, device.firmware_evidence)
    return seen


@rule("VER002", "firmware-mismatch", severity="warning", needs=["host_versions"])
def firmware_mismatch(ctx: Context) -> Iterable[Finding]:
    """The hosts of one job report different GPU driver versions, GPU VBIOS versions (for the same
    product) or NIC firmware versions (for the same adapter family), as their `nvidia-smi -q` and
    `ibstat`/`ibv_devinfo` say, e.g. NIC firmware 28.39.1002 on seven hosts and 28.36.1010 on one.

    Why: NCCL's own version check does not look at firmware or the GPU driver. A NIC firmware older
    than its peers' can lack fixes for adaptive routing, congestion control or GPUDirect RDMA, and
    hosts that differ in driver or VBIOS behave differently (NVLink training, P2P, clocks): the job
    runs at the pace of the odd host, or hangs on it, and the difference is invisible in NCCL's log.
    Fleets drift when hosts are repaired or imaged one at a time.

    Fix: Bring the odd hosts to the fleet's versions (NIC firmware with `mlxfwmanager`/`mlxup` or the
    vendor's image, the GPU driver and VBIOS from the same release), or keep them out of the job
    until they match; record the versions in the host's health check.

    Sources: NVIDIA nvidia-smi documentation (Driver Version, VBIOS Version); infiniband-diags
    ibstat(8) and rdma-core ibv_devinfo(1) (Firmware version, fw_ver); NVIDIA MLNX_OFED/DOCA
    release notes (firmware versions per ConnectX family)
    """
    for what, versions in sorted(_collect(ctx).items()):
        if len(versions) < 2:
            continue
        # the version most hosts hold first; the odd ones after
        ordered = sorted(versions.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        parts = [f"{version} on {_hosts(list(hosts))}" for version, hosts in ordered]
        hosts = sorted({h for _, held in ordered for h in held})
        evidence = [line for _, held in ordered for line in held.values() if line is not None]
        yield make_finding(
            "VER002", "warning", f"{what} differs across hosts: {'; '.join(parts)}",
            evidence=shown(evidence), evidence_count=len(evidence), hosts=hosts,
        )  # fmt: skip


def _hosts(hosts: list[str], limit: int = 4) -> str:
    hosts = sorted(hosts)
    if len(hosts) <= limit:
        return ", ".join(hosts)
    return f"{', '.join(hosts[:limit])} and {len(hosts) - limit} more"
