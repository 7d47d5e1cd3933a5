"""What one nccl-tests run should reach on its platform, and why: the figure, its source and how a verdict
names it, or why there is none and what would give one. Figures come from data/expected_busbw.json
(expectations.py), never from literals here.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ncclscope.common.words import exact_size
from ncclscope.diagnose.expectations import (
    figure,
    gpus_fit,
    instance_spec,
    platform_spec,
    reference,
    reference_entry,
    spec_by_key,
)
from ncclscope.diagnose.platform import host_gpus
from ncclscope.model import BenchmarkRow, BenchmarkRun, Case, Platform

if TYPE_CHECKING:
    from ncclscope.diagnose.reference_data import BusbwEntry, InstanceSpec, NicEntry, PcieEntry, PlatformSpec

GIB = 1 << 30
# collectives whose cross-host traffic cannot be spread over the NICs of a host (sjeaugey nccl-tests#267)
SINGLE_NIC_COLLECTIVES = frozenset({"alltoall", "alltoallv", "sendrecv", "gather", "scatter", "hypercube"})
NET_SPEED_RE = re.compile(r"\bNET\[(\d+(?:\.\d+)?)\]")
FAR_PATHS = frozenset({"SYS", "SOC", "NODE", "PHB"})


# -------------------------------------------------------------------------------- expectations
@dataclass
class Expectation:
    """What a run should reach, and why."""

    busbw: float  # the figure judged against: the low end of a range
    high: float | None
    algorithm: str
    source: str
    label: str  # how the verdict names it
    scope: str = "gpu"  # "gpu": a per-GPU link figure (NVLink, PCIe); "network": per-NIC figures
    floor: bool = False  # a lower bound: NIC speed or count not in the inputs

    @property
    def shown(self) -> str:
        if self.high is not None and self.high != self.busbw:
            return f"{num(self.busbw)}-{num(self.high)} GB/s"
        return f"{num(self.busbw)} GB/s"


@dataclass
class Unjudged:
    """Why a run has no expectation, and what would give it one."""

    reason: str
    need: str


@dataclass
class RunFacts:
    """One run as the judgement sees it (run None: the job's own collectives, NCCL Inspector's)."""

    run: BenchmarkRun | None
    collective: str | None
    nranks: int | None
    hosts: int | None
    gpus_per_host: int | None
    spec: PlatformSpec | None
    size: int
    measured: float
    rows: list[BenchmarkRow]


def _from_entry(e: BusbwEntry | PcieEntry, label: str) -> Expectation:
    low, high = figure(e.busbw_gbs)
    return Expectation(low, high, e.algorithm, e.source, label)


def _nccl_version(case: Case, run: BenchmarkRun | None) -> tuple[int, int] | None:
    code = run.nccl_library if run is not None else None
    if code:
        # NCCL_VERSION_CODE is X*10000+Y*100+Z from 2.9, X*1000+Y*100+Z before
        major, rest = (code // 10000, code % 10000) if code >= 20900 else (code // 1000, code % 1000)
        return major, rest // 100
    for v in case.nccl_versions:
        m = re.match(r"(\d+)\.(\d+)", v)
        if m:
            return int(m.group(1)), int(m.group(2))
    return None


def nvls_blocker(case: Case, run: BenchmarkRun | None) -> str | None:
    """Why NCCL would not use NVLS for all_reduce here, or None when nothing in the inputs says so."""
    for e in case.env:
        if e.name == "NCCL_NVLS_ENABLE" and e.value.strip() == "0":
            return "NCCL_NVLS_ENABLE=0"
        if e.name == "NCCL_ALGO":
            value = e.value.strip().lower()
            tokens = [t for t in re.split(r"[,;:\s]+", value.lstrip("^")) if t]
            if value.startswith("^") == ("nvls" in tokens):
                return f"NCCL_ALGO={e.value}"
    if any(m.family == "nvls_support" and "not available" in m.message for m in case.messages):
        return "'NVLS multicast support is not available'"
    choices = [t for t in case.tuning if (t.collective or "").lower() == "allreduce" and not t.algorithm.isdigit()]
    if choices:
        largest = max(choices, key=lambda t: t.size)
        if largest.size >= 64 << 20 and "NVLS" not in largest.algorithm.upper():
            return f"TUNING chooses {largest.algorithm} for AllReduce at {exact_size(largest.size)}"
    version = _nccl_version(case, run)
    first = reference().nvls.min_nccl_version
    if version is not None and version < tuple(int(x) for x in first.split(".")):
        return f"NCCL {version[0]}.{version[1]} predates NVLS (NCCL {first})"
    return None


def _mnnvl(case: Case) -> bool:
    return any(m.family == "mnnvl_clique" and str(m.fields.get("mnnvl_flag", "1")) == "1" for m in case.messages)


def _nvlink_bridge(case: Case, platform: Platform) -> bool | None:
    """For PCIe cards: is there an NVLink bridge (NV# in the matrix)? None without a matrix."""
    if platform.nvlink_links:
        return True
    return False if case.topologies else None


def _pcie_path(case: Case) -> str:
    """'cpu' when some GPU pair goes through a host bridge or across sockets, 'switch' when all are PIX/PXB."""
    cells = [t.links.get(a, {}).get(b, "") for t in case.topologies for a in t.gpus for b in t.gpus if a != b]
    if not cells:
        return "unknown"
    return "cpu" if any(c in FAR_PATHS for c in cells) else "switch"


def _intra_expectation(
    facts: RunFacts, case: Case, platform: Platform, gpus: int
) -> tuple[Expectation | None, Unjudged | None]:
    """Expectation inside one host (or one NVLink domain), or why there is none."""
    spec = facts.spec
    assert spec is not None
    collective = facts.collective or ""
    key = spec.key
    if spec.pcie_gen:
        return _pcie_card_expectation(case, platform, spec, gpus, collective)
    if collective != "all_reduce":
        e = reference_entry(key, gpus, collective, "ring")
        if e:
            return _from_entry(e, "ring / point-to-point"), None
        return None, _nofigure(collective, gpus, key)
    nvls_from = spec.nvls_min_gpus
    blocker = nvls_blocker(case, facts.run)
    if nvls_from and gpus >= nvls_from and platform.nvswitch is not False and blocker is None:
        e = reference_entry(key, gpus, collective, "nvls")
        if e:
            return _from_entry(e, "NVLS (NVLink SHARP)"), None
        ring = reference_entry(key, gpus, collective, "ring")
        if ring:
            return _from_entry(ring, f"ring, as a floor: no NVLS figure for {gpus} GPUs"), None
    e = reference_entry(key, gpus, collective, "ring") or reference_entry(key, gpus, collective, "nvls")
    if e is None:
        return None, _nofigure(collective, gpus, key)
    why = f", NVLS not expected: {blocker}" if blocker and nvls_from and gpus >= nvls_from else ""
    return _from_entry(e, "ring" + why), None


def _nofigure(collective: str, gpus: int, key: str) -> Unjudged:
    return Unjudged(
        f"no reference figure for {collective} on {gpus}x {key}",
        f"a reference figure for {collective} on {gpus}x {key} (none in the sources ncclscope cites; compare with "
        "a known-good host of the same kind)",
    )


def _pcie_card_expectation(
    case: Case, platform: Platform, spec: PlatformSpec, gpus: int, collective: str
) -> tuple[Expectation | None, Unjudged | None]:
    bridge = _nvlink_bridge(case, platform)
    specific = reference_entry(spec.key, gpus, collective, "ring", nvlink=bridge) if bridge is not None else None
    if specific:
        return _from_entry(specific, "NVLink bridge" if bridge else "ring, no NVLink"), None
    if bridge:
        return None, Unjudged(
            f"no reference figure for {gpus}x {spec.key} joined by NVLink bridges",
            "a reference figure for this bridged configuration (compare with a known-good host)",
        )
    gen = spec.pcie_gen
    path = _pcie_path(case)
    options = [e for e in reference().pcie if e.pcie_gen == gen and gpus_fit(e.gpus, gpus)]
    if not options:
        return None, Unjudged(f"no PCIe Gen{gen} figure for {gpus} GPUs", "a reference figure for this host")
    matching = [e for e in options if e.path in (path, "any")]
    # through the CPU is the slower case: assume it when the matrix does not say
    chosen = matching[0] if matching else min(options, key=lambda e: figure(e.busbw_gbs)[0])
    label = f"{chosen.platform}, no NVLink" + ("" if bridge is False else " seen (no topology matrix)")
    return _from_entry(chosen, label), None


def _nic_count(case: Case, instance: InstanceSpec | None) -> tuple[int | None, str]:
    """RDMA NICs per host that NCCL listed (the fewest of the hosts that list any), and the fabric; else the
    cloud instance type's GPU NICs."""
    per_host: dict[str, set[str]] = {}
    fabric = ""
    for d in case.net_devices:
        if d.transport == "Socket":
            continue
        if d.transport == "OFI":
            fabric = "efa"
            found = d.nics or (instance.nics if instance is not None else 1)  # `(found N nics)` is not always printed
            per_host.setdefault(d.host, set()).update(f"ofi{i}" for i in range(found))
            continue
        fabric = fabric or (d.link_layer or "IB")
        per_host.setdefault(d.host, set()).update(d.members or [d.name])
    if per_host:
        return min(len(v) for v in per_host.values()), fabric
    if instance is not None:
        return instance.nics, instance.fabric
    names = [t.nic_names.get(x, x) for t in case.topologies for x in t.nics]
    rdma = [n for n in names if n.startswith(("mlx5", "bnxt_re", "rdma")) and "bond" not in n.lower()]
    if rdma:
        return max(1, len(rdma) // len(case.topologies)), "IB"
    # the job's own NIC list (`mpirun -x NCCL_IB_HCA=mlx5_0:1,mlx5_1:1,...`): a list that selects (no ^ to
    # exclude, env.rst) names the NICs NCCL may use on each host
    for setting in case.env:
        value = setting.value.strip().lstrip("=")
        if setting.name == "NCCL_IB_HCA" and value and not value.startswith("^"):
            return len({part.strip() for part in value.split(",") if part.strip()}), fabric or "IB"
    return None, fabric


def _nic_speed(case: Case, instance: InstanceSpec | None) -> float | None:
    """Line rate of the NICs in Gb/s: topology dump `NET[50.0]` (GB/s), or the cloud instance type's."""
    speeds: Counter[float] = Counter()
    for topo in case.system_topologies:
        for node in topo.nodes:
            m = NET_SPEED_RE.search(node)
            if m:
                speeds[round(float(m.group(1)) * 8)] += 1
    if speeds:
        return speeds.most_common(1)[0][0]
    return float(instance.nic_gbps) if instance is not None else None


def _per_nic(fabric: str, speed: float | None) -> tuple[NicEntry, bool]:
    """The per-NIC reference for the fabric and line rate, or the lowest one (a floor) when the speed is unknown
    or the fabric has no reference (Google's GPUDirect-TCPX/TCPXO: TCP on the GPU NICs)."""
    per_nic = [e for e in reference().network.per_nic if e.kind == "reference"]
    family = {"efa": "efa", "roce": "RoCE"}.get(fabric.lower(), "IB")
    same = [e for e in per_nic if e.link_layer in (family, "any")]
    if speed is not None and not fabric.lower().startswith("gpudirect-tcp"):
        fits = sorted((e for e in same if e.line_rate_gbps == speed), key=lambda e: e.link_layer != family)
        if fits:
            return fits[0], False
    if not fabric or fabric.lower().startswith("gpudirect-tcp"):  # no reference for the fabric: the generic 100G
        same = [e for e in per_nic if e.link_layer == "any"] or per_nic
    return min(same, key=lambda e: figure(e.busbw_gbs)[0]), True


def _socket_only(case: Case) -> bool:
    networks = {p.network for p in case.processes if p.network}
    rdma = [d for d in case.net_devices if d.transport != "Socket"]
    return bool(networks) and networks <= {"Socket"} and not rdma


def _network_expectation(
    facts: RunFacts, case: Case, intra: Expectation | None, instance: InstanceSpec | None
) -> tuple[Expectation | None, Unjudged | None]:
    if _socket_only(case):
        return None, Unjudged(
            "traffic goes over TCP sockets (NET/Socket) and no RDMA NIC appears in the inputs, so what it should "
            "reach depends on the Ethernet line rate",
            "the Ethernet line rate (`ethtool <if>`), or an RDMA fabric",
        )
    nics, fabric = _nic_count(case, instance)
    speed = _nic_speed(case, instance)
    entry, floor = _per_nic(fabric, speed)
    low, high = figure(entry.busbw_gbs)
    single = (facts.collective or "") in SINGLE_NIC_COLLECTIVES
    count = 1 if single else (nics or 1)
    per = f"{num(low)}{'-' + num(high) if high else ''} GB/s per NIC, {entry.platform}"
    where = f" ({instance.key})" if instance is not None else ""
    if single:
        label = f"one NIC: {facts.collective} cannot aggregate the NICs of a host (sjeaugey nccl-tests#267); {per}"
    else:
        label = f"network ring: {count} NIC{'s' if count != 1 else ''} per host{where} x {per}"
    floor = floor or (nics is None and not single)
    if floor and speed is not None and (nics is not None or single):
        label += f"; no reference figure for {speed:g}G {fabric} NICs, so a floor"
    elif floor:
        unknown = "NIC speed" if nics is not None or single else "NIC count and speed"
        label += f"; {unknown} not in the inputs, so a floor"
    check = instance.health_check if instance is not None else None
    if (
        floor
        and instance is not None
        and check is not None
        and check.collective == facts.collective
        and check.hosts == facts.hosts
        and check.busbw_gbs > low * count
    ):
        # the provider's own pass level for the instance type is a higher floor than a generic NIC's
        return Expectation(
            busbw=float(check.busbw_gbs),
            high=None,
            algorithm="ring",
            source=check.source,
            label=f"{instance.provider} health-check pass level for a pair of {instance.key} (a floor)",
            scope="network",
            floor=True,
        ), None
    exp = Expectation(
        busbw=low * count,
        high=high * count if high is not None else None,
        algorithm="ring",
        source=entry.source,
        label=label,
        scope="network",
        floor=floor,
    )
    if intra is not None and intra.busbw < exp.busbw and not single:
        intra.label += ", lower than what the NICs allow"
        return intra, None
    return exp, None


def run_facts(run: BenchmarkRun, platform: Platform) -> RunFacts | None:
    """How many ranks, hosts and GPUs per host a run has, its GPU, and its peak busbw at the largest size."""
    rows = [r for r in run.rows if _busbw(r) is not None]
    if not rows:
        return None
    size = max(r.size for r in rows)
    largest = [r for r in rows if r.size == size]
    measured = max(_busbw(r) or 0.0 for r in largest)
    names = Counter(d.name.strip() for d in run.devices if d.name.strip())
    spec = platform_spec(names.most_common(1)[0][0]) if names else spec_by_key(platform.key)
    per_host_counts = host_gpus(run)
    gpus_per_host = max(per_host_counts.values()) if per_host_counts else platform.gpus_per_host
    nranks = run.nranks or (len(run.devices) or None)
    hosts: int | None = len(per_host_counts) or None
    if nranks and gpus_per_host:
        hosts = max(hosts or 1, math.ceil(nranks / gpus_per_host))
    return RunFacts(run, run.collective, nranks, hosts, gpus_per_host, spec, size, measured, largest)


def _busbw(row: BenchmarkRow) -> float | None:
    values = [v for v in (row.out_of_place.busbw, row.in_place.busbw) if v is not None]
    return max(values) if values else None


def expectation_of(facts: RunFacts, case: Case, platform: Platform) -> tuple[Expectation | None, Unjudged | None]:
    if facts.collective is None:
        return None, Unjudged(
            "the collective is unknown",
            "the run's first lines (`# Collective test starting: all_reduce_perf`) or its command line",
        )
    if facts.nranks is None:
        return None, Unjudged(
            "the number of ranks is unknown",
            "the nccl-tests header and device lines (`# nThread 1 nGpus 8 ...`, `#  Rank  0 Group  0 Pid ...`)",
        )
    hosts = facts.hosts or 1
    if hosts == 1 or _mnnvl(case):
        if facts.spec is None:
            return None, _unknown_gpu(platform)
        return _intra_expectation(facts, case, platform, facts.nranks)
    intra = None
    if facts.spec is not None and facts.gpus_per_host and facts.gpus_per_host > 1:
        intra, _ = _intra_expectation(facts, case, platform, facts.gpus_per_host)
        if intra is not None and intra.algorithm == "nvls":
            # across hosts the NVLink part of a ring all_reduce moves data like any ring
            ring = reference_entry(facts.spec.key, facts.gpus_per_host, "all_reduce", "ring")
            intra = _from_entry(ring, "intra-host ring") if ring else None
        elif intra is not None:
            intra.label = f"intra-host {intra.label}"
    return _network_expectation(facts, case, intra, instance_spec(platform.instance))


def _unknown_gpu(platform: Platform) -> Unjudged:
    if platform.gpu_name:
        return Unjudged(
            f"ncclscope has no reference figures for '{platform.gpu_name}'",
            f"reference figures for '{platform.gpu_name}' (compare with a known-good host of the same kind)",
        )
    return Unjudged(
        "the GPU model is unknown",
        "the GPU model: nccl-tests device lines (`#  Rank  0 Group  0 Pid ... NVIDIA H100 80GB HBM3`) from a run "
        "printed with its header, or the output of `nvidia-smi -L`",
    )


def num(x: float) -> str:
    if x >= 1000:
        return f"{x:.0f}"
    return f"{x:.1f}".rstrip("0").rstrip(".") if x >= 1 else f"{x:.2f}"
