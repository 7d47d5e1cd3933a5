"""What hardware the inputs describe, and what it should reach (data/expected_busbw.json).

`detect_platform` reads every input: nccl-tests device lines name the GPU, `nvidia-smi topo -m`
shows NVLink counts and NVSwitch wiring, the NCCL log shows hosts, ranks, NICs and NVLS support.
`judge_bandwidth` compares the peak busbw of each nccl-tests run (at its largest size, never the
"Avg bus bandwidth") with the reference figure for that platform, GPU count, collective and
likely algorithm, and writes a verdict that a person can quote. Figures are never literals here:
they come, with their sources, from data/expected_busbw.json.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from ncclscope.common.words import exact_size
from ncclscope.model import BandwidthJudgement, BenchmarkRow, BenchmarkRun, Case, Evidence, Platform
from ncclscope.parse.nccl_tests_infer import FACTOR_PER_RANK

DATA_FILE = Path(__file__).parent.parent / "data" / "expected_busbw.json"
GIB = 1 << 30

# collectives whose cross-host traffic cannot be spread over the NICs of a host (sjeaugey nccl-tests#267)
SINGLE_NIC_COLLECTIVES = frozenset({"alltoall", "alltoallv", "sendrecv", "gather", "scatter", "hypercube"})
# nccl-tests' busbw factor is 2(n-1)/n, so one rank always prints 0
NV_RE = re.compile(r"^NV(\d+)$")
NET_SPEED_RE = re.compile(r"\bNET\[(\d+(?:\.\d+)?)\]")
OFI_NICS_RE = re.compile(r"found (\d+) nics", re.IGNORECASE)
OFI_INSTANCE_RE = re.compile(r"Running on (\S+) platform")
FAR_PATHS = frozenset({"SYS", "SOC", "NODE", "PHB"})


@lru_cache(maxsize=1)
def reference_data() -> dict[str, Any]:
    """The reference figures with their sources (data/expected_busbw.json), read once."""
    data: dict[str, Any] = json.loads(DATA_FILE.read_text(encoding="utf-8"))
    return data


def judging() -> dict[str, Any]:
    """Thresholds for judging busbw (ratios, smallest sizes worth judging), with their sources."""
    return dict(reference_data()["judging"])


def latency_references() -> list[dict[str, Any]]:
    return list(reference_data()["latency"])


def data_check() -> dict[str, Any]:
    return dict(reference_data()["data_check"])


# ------------------------------------------------------------------------------------ GPU names
def platform_spec(name: str | None) -> dict[str, Any] | None:
    """The platform entry whose name patterns match a device name such as 'NVIDIA H100 80GB HBM3'."""
    if not name:
        return None
    for spec in reference_data()["platforms"]:
        if any(re.search(p, name, re.IGNORECASE) for p in spec["match"]):
            return dict(spec)
    return None


def spec_by_key(key: str | None) -> dict[str, Any] | None:
    for spec in reference_data()["platforms"]:
        if spec["key"] == key:
            return dict(spec)
    return None


def link_spec(link: str | None) -> dict[str, Any] | None:
    for entry in reference_data()["links"]:
        if entry["link"] == link:
            return dict(entry)
    return None


# ---------------------------------------------------------------------------------- detection
def cpu_run(run: BenchmarkRun) -> bool:
    """A table measured between CPU processes (ncclscope's built-in benchmark on gloo prints its devices
    as `[cpu] CPU <model>`): NCCL's GPU figures do not apply to it."""
    return bool(run.devices) and all(d.bus_id.lower() == "cpu" for d in run.devices)


def detect_platform(case: Case) -> Platform:
    """GPU model, GPUs per host, hosts, NVLink links, NIC link layers, from every input."""
    evidence: list[Evidence] = []
    missing: list[str] = []

    gpu_runs = [run for run in case.benchmarks if not cpu_run(run)]
    names = Counter(d.name.strip() for run in gpu_runs for d in run.devices if d.name.strip())
    gpu_name = names.most_common(1)[0][0] if names else None
    spec = platform_spec(gpu_name)
    for run in gpu_runs:
        if any(d.name.strip() == gpu_name for d in run.devices):
            hosts_of_run = sorted({d.host for d in run.devices})
            evidence.append(
                Evidence(
                    source=run.source,
                    line=run.line,
                    text=f"device lines: {len(run.devices)}x {gpu_name} on {', '.join(hosts_of_run)}",
                )
            )
            break

    nvlink_links, nvswitch, topo_evidence = _matrix_facts(case, spec)
    evidence.extend(topo_evidence)
    log_nvswitch, log_evidence = _log_nvswitch(case)
    evidence.extend(log_evidence)
    if log_nvswitch:
        nvswitch = True

    hosts = _host_names(case)
    per_host = _gpus_per_host(case)
    if nvswitch is None and spec and spec.get("nvswitch_gpus") and per_host == spec["nvswitch_gpus"]:
        nvswitch = True  # HGX/DGX 8-GPU SXM boards are built with NVSwitch

    layers = sorted({d.link_layer or d.transport for d in case.net_devices if (d.link_layer or d.transport)})
    networks = Counter(p.network for p in case.processes if p.network)
    network = "+".join(sorted(networks)) if networks else None

    if gpu_name is None and len(gpu_runs) < len(case.benchmarks):
        missing.append("GPU model: the benchmark tables are from CPU processes (gloo), not GPUs")
    elif gpu_name is None:
        missing.append(
            "GPU model: nccl-tests device lines (`#  Rank  0 Group  0 Pid ... NVIDIA H100 80GB HBM3`) from a run "
            "printed with its header, or `nvidia-smi -L`"
        )
    elif spec is None:
        missing.append(f"reference figures for '{gpu_name}' (ncclscope has none for this GPU)")
    if per_host is None:
        missing.append("GPUs per host: nccl-tests device lines, `nvidia-smi topo -m`, or an NCCL_DEBUG=INFO log")
    if not case.topologies and spec and spec.get("nvlink_links") and nvswitch is None:
        missing.append("NVLink wiring: `nvidia-smi topo -m` from each host")

    return Platform(
        gpu_model=spec["model"] if spec else None,
        gpu_name=gpu_name,
        gpus_per_host=per_host,
        hosts=len(hosts) or None,
        nvlink_links=nvlink_links,
        nvswitch=nvswitch,
        nic_link_layers=layers,
        network=network,
        key=spec["key"] if spec else None,
        evidence=evidence,
        missing=missing,
    )


def _matrix_facts(case: Case, spec: dict[str, Any] | None) -> tuple[int | None, bool | None, list[Evidence]]:
    """Most common NV# between GPU pairs, and whether the wiring can only be an NVSwitch."""
    counts: Counter[int] = Counter()
    nvswitch: bool | None = None
    evidence: list[Evidence] = []
    for topo in case.topologies:
        cells = [topo.links.get(a, {}).get(b, "") for a in topo.gpus for b in topo.gpus if a != b]
        links = [int(m.group(1)) for c in cells if (m := NV_RE.match(c))]
        counts.update(links)
        if not cells:
            continue
        if links:
            common = Counter(links).most_common(1)[0][0]
            evidence.append(
                Evidence(
                    source=topo.source,
                    line=topo.line,
                    text=f"topology matrix: {len(topo.gpus)} GPUs, NV{common} between {len(links) // 2} of "
                    f"{len(cells) // 2} GPU pairs",
                )
            )
        else:
            evidence.append(
                Evidence(source=topo.source, line=topo.line, text=f"topology matrix: {len(topo.gpus)} GPUs, no NVLink")
            )
        common = Counter(links).most_common(1)[0][0] if links else 0
        share = links.count(common) / len(cells)
        per_gpu = spec.get("nvlink_links") if spec else None
        if share == 1 and len(topo.gpus) >= 8:
            nvswitch = True
        elif share >= 0.5 and per_gpu and common * (len(topo.gpus) - 1) > per_gpu:
            nvswitch = True  # a GPU has too few links to give that many to every peer itself (one degraded pair aside)
        elif share < 1:
            nvswitch = False if nvswitch is None else nvswitch
    nvlink = counts.most_common(1)[0][0] if counts else None
    return nvlink, nvswitch, evidence


def _log_nvswitch(case: Case) -> tuple[bool, list[Evidence]]:
    for topo in case.system_topologies:
        for node in topo.nodes:
            if "NVS/" in node:
                return True, [topo.evidence]
    for m in case.messages:
        if m.family == "nvls_support" and "not available" not in m.message:
            return True, [m.evidence]
        if m.family == "mnnvl_clique":
            return True, [m.evidence]
    return False, []


def _host_names(case: Case) -> list[str]:
    names = {h.name for h in case.hosts if h.name}
    names |= {d.host for run in case.benchmarks for d in run.devices if d.host}
    return sorted(names)


def host_gpus(run: BenchmarkRun) -> dict[str, int]:
    """GPUs per host that a run's device lines show: their count, or, when some ranks' lines are missing,
    more where a device number says so (a line for device 7 means a host of 8 GPUs)."""
    counts = Counter(d.host for d in run.devices)
    if len(run.devices) >= (run.nranks or 0):
        return dict(counts)  # every rank's line is there: a job may use some of a host's GPUs only
    for d in run.devices:
        if d.cuda_dev is not None:
            counts[d.host] = max(counts[d.host], d.cuda_dev + 1)
    return dict(counts)


def _gpus_per_host(case: Case) -> int | None:
    per_host: Counter[str] = Counter()
    for run in case.benchmarks:
        for host, n in host_gpus(run).items():
            per_host[host] = max(per_host[host], n)
    if per_host:
        return max(per_host.values())
    devs: dict[str, set[int]] = {}
    for p in case.processes:
        if p.host:
            devs.setdefault(p.host, set()).update(p.cuda_devs)
    if any(devs.values()):
        return max(len(v) for v in devs.values())
    if case.topologies:
        return max(len(t.gpus) for t in case.topologies)
    return None


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
            return f"{_num(self.busbw)}-{_num(self.high)} GB/s"
        return f"{_num(self.busbw)} GB/s"


@dataclass
class Unjudged:
    """Why a run has no expectation, and what would give it one."""

    reason: str
    need: str


@dataclass
class RunFacts:
    """One run as the judgement sees it."""

    run: BenchmarkRun
    collective: str | None
    nranks: int | None
    hosts: int | None
    gpus_per_host: int | None
    spec: dict[str, Any] | None
    size: int
    measured: float
    rows: list[BenchmarkRow]


def _figure(value: Any) -> tuple[float, float | None]:
    if isinstance(value, list):
        return float(value[0]), float(value[-1])
    return float(value), None


def _in(gpus: Any, n: int) -> bool:
    if gpus is None:
        return True
    if isinstance(gpus, list):
        return int(gpus[0]) <= n <= int(gpus[-1])
    return int(gpus) == n


def reference_entry(
    platform_key: str, gpus: int, collective: str, algorithm: str, nvlink: bool | None = None
) -> dict[str, Any] | None:
    """The entry for this platform, GPU count, collective and algorithm: the exact collective before
    'any', measured references before health-check pass levels, a single GPU count before a range.
    Entries that state "nvlink" apply only when the NVLink bridge is known to be there (or not)."""
    candidates = []
    for e in reference_data()["entries"]:
        if e["platform"] != platform_key or e["algorithm"] != algorithm or not _in(e["gpus"], gpus):
            continue
        if e["collective"] not in (collective, "any"):
            continue
        if "nvlink" in e and e["nvlink"] != nvlink:
            continue
        rank = (e["collective"] != collective, e.get("kind", "reference") != "reference", isinstance(e["gpus"], list))
        candidates.append((rank, e))
    if not candidates:
        return None
    return min(candidates, key=lambda c: c[0])[1]


def _from_entry(e: dict[str, Any], label: str) -> Expectation:
    low, high = _figure(e["busbw_gbs"])
    return Expectation(low, high, e["algorithm"], e["source"], label)


def _nccl_version(case: Case, run: BenchmarkRun) -> tuple[int, int] | None:
    code = run.nccl_library
    if code:
        # NCCL_VERSION_CODE is X*10000+Y*100+Z from 2.9, X*1000+Y*100+Z before
        major, rest = (code // 10000, code % 10000) if code >= 20900 else (code // 1000, code % 1000)
        return major, rest // 100
    for v in case.nccl_versions:
        m = re.match(r"(\d+)\.(\d+)", v)
        if m:
            return int(m.group(1)), int(m.group(2))
    return None


def nvls_blocker(case: Case, run: BenchmarkRun) -> str | None:
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
    first = reference_data()["nvls"]["min_nccl_version"]
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
    key = spec["key"]
    if spec.get("pcie_gen"):
        return _pcie_card_expectation(case, platform, spec, gpus, collective)
    if collective != "all_reduce":
        e = reference_entry(key, gpus, collective, "ring")
        if e:
            return _from_entry(e, "ring / point-to-point"), None
        return None, _no_figure(collective, gpus, key)
    nvls_from = spec.get("nvls_min_gpus")
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
        return None, _no_figure(collective, gpus, key)
    why = f", NVLS not expected: {blocker}" if blocker and nvls_from and gpus >= nvls_from else ""
    return _from_entry(e, "ring" + why), None


def _no_figure(collective: str, gpus: int, key: str) -> Unjudged:
    return Unjudged(
        f"no reference figure for {collective} on {gpus}x {key}",
        f"a reference figure for {collective} on {gpus}x {key} (none in the sources ncclscope cites; compare with "
        "a known-good host of the same kind)",
    )


def _pcie_card_expectation(
    case: Case, platform: Platform, spec: dict[str, Any], gpus: int, collective: str
) -> tuple[Expectation | None, Unjudged | None]:
    bridge = _nvlink_bridge(case, platform)
    specific = reference_entry(spec["key"], gpus, collective, "ring", nvlink=bridge) if bridge is not None else None
    if specific:
        return _from_entry(specific, "NVLink bridge" if bridge else "ring, no NVLink"), None
    if bridge:
        return None, Unjudged(
            f"no reference figure for {gpus}x {spec['key']} joined by NVLink bridges",
            "a reference figure for this bridged configuration (compare with a known-good host)",
        )
    gen = spec["pcie_gen"]
    path = _pcie_path(case)
    options = [e for e in reference_data()["pcie"] if e["pcie_gen"] == gen and _in(e["gpus"], gpus)]
    if not options:
        return None, Unjudged(f"no PCIe Gen{gen} figure for {gpus} GPUs", "a reference figure for this host")
    matching = [e for e in options if e["path"] in (path, "any")]
    # through the CPU is the slower case: assume it when the matrix does not say
    chosen = matching[0] if matching else min(options, key=lambda e: _figure(e["busbw_gbs"])[0])
    label = f"{chosen['platform']}, no NVLink" + ("" if bridge is False else " seen (no topology matrix)")
    return _from_entry(chosen, label), None


def _nic_count(case: Case) -> tuple[int | None, str]:
    """RDMA NICs per host that NCCL listed (the fewest of the hosts that list any), and the fabric."""
    per_host: dict[str, set[str]] = {}
    fabric = ""
    for d in case.net_devices:
        if d.transport == "Socket":
            continue
        if d.transport == "OFI":
            fabric = "efa"
            m = OFI_NICS_RE.search(d.evidence.text)
            per_host.setdefault(d.host, set()).update(f"ofi{i}" for i in range(int(m.group(1)) if m else 1))
            continue
        fabric = fabric or (d.link_layer or "IB")
        per_host.setdefault(d.host, set()).update(d.members or [d.name])
    if per_host:
        return min(len(v) for v in per_host.values()), fabric
    names = [t.nic_names.get(x, x) for t in case.topologies for x in t.nics]
    rdma = [n for n in names if n.startswith(("mlx5", "bnxt_re", "rdma")) and "bond" not in n.lower()]
    if rdma:
        return max(1, len(rdma) // len(case.topologies)), "IB"
    return None, fabric


def _nic_speed(case: Case) -> float | None:
    """Line rate of the NICs in Gb/s: topology dump `NET[50.0]` (GB/s), or the AWS instance type."""
    speeds: Counter[float] = Counter()
    for topo in case.system_topologies:
        for node in topo.nodes:
            m = NET_SPEED_RE.search(node)
            if m:
                speeds[round(float(m.group(1)) * 8)] += 1
    if speeds:
        return speeds.most_common(1)[0][0]
    for msg in case.messages:
        inst = OFI_INSTANCE_RE.search(msg.message) if msg.family == "net_ofi" else None
        if inst:
            for e in reference_data()["network"]["per_nic"]:
                if e.get("instance") and inst.group(1).startswith(e["instance"]):
                    return float(e["line_rate_gbps"])
    return None


def _per_nic(fabric: str, speed: float | None) -> tuple[dict[str, Any], bool]:
    """The per-NIC reference for the fabric and line rate, or the lowest one (a floor) when the speed is unknown."""
    per_nic = [e for e in reference_data()["network"]["per_nic"] if e.get("kind", "reference") == "reference"]
    family = {"efa": "efa", "roce": "RoCE"}.get(fabric.lower(), "IB")
    same = [e for e in per_nic if e["link_layer"] in (family, "any")]
    if speed is not None:
        fits = sorted((e for e in same if e["line_rate_gbps"] == speed), key=lambda e: e["link_layer"] != family)
        if fits:
            return fits[0], False
    if not fabric:  # nothing says which fabric: the generic 100G figure
        same = [e for e in per_nic if e["link_layer"] == "any"] or per_nic
    return min(same, key=lambda e: _figure(e["busbw_gbs"])[0]), True


def _socket_only(case: Case) -> bool:
    networks = {p.network for p in case.processes if p.network}
    rdma = [d for d in case.net_devices if d.transport != "Socket"]
    return bool(networks) and networks <= {"Socket"} and not rdma


def _network_expectation(
    facts: RunFacts, case: Case, intra: Expectation | None
) -> tuple[Expectation | None, Unjudged | None]:
    if _socket_only(case):
        return None, Unjudged(
            "traffic goes over TCP sockets (NET/Socket) and no RDMA NIC appears in the inputs, so what it should "
            "reach depends on the Ethernet line rate",
            "the Ethernet line rate (`ethtool <if>`), or an RDMA fabric",
        )
    nics, fabric = _nic_count(case)
    entry, floor = _per_nic(fabric, _nic_speed(case))
    low, high = _figure(entry["busbw_gbs"])
    single = (facts.collective or "") in SINGLE_NIC_COLLECTIVES
    count = 1 if single else (nics or 1)
    per = f"{_num(low)}{'-' + _num(high) if high else ''} GB/s per NIC, {entry['platform']}"
    if single:
        label = f"one NIC: {facts.collective} cannot aggregate the NICs of a host (sjeaugey nccl-tests#267); {per}"
    else:
        label = f"network ring: {count} NIC{'s' if count != 1 else ''} per host x {per}"
    floor = floor or (nics is None and not single)
    if floor:
        unknown = "NIC speed" if nics is not None or single else "NIC count and speed"
        label += f"; {unknown} not in the inputs, so a floor"
    exp = Expectation(
        busbw=low * count,
        high=high * count if high is not None else None,
        algorithm="ring",
        source=entry["source"],
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


def _expectation(facts: RunFacts, case: Case, platform: Platform) -> tuple[Expectation | None, Unjudged | None]:
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
            ring = reference_entry(facts.spec["key"], facts.gpus_per_host, "all_reduce", "ring")
            intra = _from_entry(ring, "intra-host ring") if ring else None
        elif intra is not None:
            intra.label = f"intra-host {intra.label}"
    return _network_expectation(facts, case, intra)


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


# ---------------------------------------------------------------------------------- judgement
def judge_bandwidth(case: Case, platform: Platform) -> list[BandwidthJudgement]:
    """One judgement per benchmark run, at its largest size, against the platform's expectation."""
    judgements = []
    for run in case.benchmarks:
        facts = run_facts(run, platform)
        if facts is not None:
            judgements.append(_judge(facts, case, platform))
    return judgements


def run_expectation(case: Case, platform: Platform, run: BenchmarkRun) -> tuple[RunFacts | None, Expectation | None]:
    """A run's facts at its largest size and what it should reach there (None where nothing is known)."""
    facts = run_facts(run, platform)
    if facts is None or cpu_run(run):
        return facts, None
    return facts, _expectation(facts, case, platform)[0]


def unjudged_need(case: Case, platform: Platform, judgement: BandwidthJudgement) -> str | None:
    """What the inputs would need for a run without expectation to be judged (None when it has one)."""
    for run in case.benchmarks:
        if run.source == judgement.source and run.line == judgement.line:
            facts = run_facts(run, platform)
            if facts is None:
                return None
            expectation, unjudged = _expectation(facts, case, platform)
            return None if expectation else (unjudged.need if unjudged else None)
    return None


def _judge(facts: RunFacts, case: Case, platform: Platform) -> BandwidthJudgement:
    run = facts.run
    collective = facts.collective or "unknown collective"
    base: dict[str, Any] = {
        "source": run.source,
        "line": run.line,
        "collective": collective,
        "nranks": facts.nranks,
        "size": facts.size,
        "measured_busbw": facts.measured,
        "platform": _where(facts),
    }
    head = f"{collective} on {_where(facts)}: peak busbw {_num(facts.measured)} GB/s at {exact_size(facts.size)}"
    if cpu_run(run):
        return BandwidthJudgement(
            **base,
            verdict=f"{head}, measured with gloo between CPU processes, not NCCL on GPUs: NCCL's bandwidth "
            "figures do not apply, so there is nothing to judge; run on GPUs to judge the hardware.",
        )
    if facts.nranks == 1:
        algbw = max((r.out_of_place.algbw or 0.0) for r in facts.rows)
        # nccl-tests' bus factor (formats.md C.6): 2(n-1)/n for all_reduce, (n-1)/n for the gathers and
        # alltoall, 1 for the rooted ones and sendrecv, where busbw then repeats algbw
        factor = {"all_reduce": "2(n-1)/n"}.get(collective, "(n-1)/n" if collective in FACTOR_PER_RANK else None)
        bus = (
            f"busbw is 0 by definition (factor {factor} with n = 1)"
            if factor
            else "busbw repeats algbw (factor 1), and in place there is nothing to move at all"
        )
        return BandwidthJudgement(
            **base,
            verdict=f"{collective} on {_where(facts)} with 1 rank, up to {exact_size(facts.size)}: nothing leaves the "
            f"GPU, so there is nothing to judge: {bus}; algbw (up to {_num(algbw)} GB/s out of place) measures a "
            "local copy. Run with 2 or more GPUs.",
        )
    expectation, unjudged = _expectation(facts, case, platform)
    if expectation is None:
        reason = unjudged.reason if unjudged else "no expectation"
        need = unjudged.need if unjudged else "a reference figure"
        return BandwidthJudgement(**base, verdict=f"{head}; not judged: {reason}. It would need {need}.")
    limits = judging()
    ratio = facts.measured / expectation.busbw
    judgement = BandwidthJudgement(
        **base,
        expected_busbw=expectation.busbw,
        algorithm=expectation.algorithm,
        expectation_source=expectation.source,
        verdict="",
    )
    if facts.size < limits["provisional_min_bytes"]:
        judgement.verdict = (
            f"{head}: the run stops below {exact_size(limits['provisional_min_bytes'])}, where busbw is still far from "
            f"peak, so it is not compared with the expected {expectation.shown} ({expectation.label}); "
            "re-run with -e 8G."
        )
        return judgement
    judgement.ratio = round(ratio, 4)
    judgement.verdict = _verdict(head, facts, expectation, ratio)
    return judgement


def _verdict(head: str, facts: RunFacts, exp: Expectation, ratio: float) -> str:
    limits = judging()
    if exp.floor:
        first = f"{head}, expected at least {exp.shown} ({exp.label}; {exp.source})"
        if ratio >= limits["warning_below"]:
            first += ": above that floor, so no fault can be shown without the NIC details"
        else:
            first += f": only {ratio:.0%} of that floor"
    else:
        first = f"{head} is {ratio:.0%} of the expected {exp.shown} ({exp.label}; {exp.source})"
        if ratio >= limits["warning_below"]:
            first += ": healthy"
        elif ratio >= limits["error_below"]:
            first += ": below the 80% a healthy system reaches"
        else:
            first += ": less than half of it"
    if facts.size < limits["judge_min_bytes"]:
        first += (
            f" (the run stops at {exact_size(facts.size)}, below the {exact_size(limits['judge_min_bytes'])} needed"
            " for peak, "
            "so only a figure under half the expectation counts as a fault)"
        )
    notes = _spec_notes(facts, exp, ratio) + _nvls_note(facts, exp, ratio) + _multi_host_notes(facts)
    return first + ". " + "; ".join(notes) + "."


def _nvls_note(facts: RunFacts, exp: Expectation, ratio: float) -> list[str]:
    """A low NVLS all_reduce that sits at the ring figure: NVLS is probably not engaged."""
    if exp.algorithm != "nvls" or ratio >= judging()["warning_below"] or facts.spec is None:
        return []
    ring = reference_entry(facts.spec["key"], facts.nranks or 0, "all_reduce", "ring")
    if not ring:
        return []
    low, high = _figure(ring["busbw_gbs"])
    if facts.measured < 0.95 * low:
        return []
    shown = f"{_num(low)}-{_num(high)}" if high and high != low else _num(low)
    return [
        f"{_num(facts.measured)} GB/s matches the ring figure ({shown} GB/s, {ring['source']}), so NVLS "
        "(NVLink SHARP) does not seem to be engaged"
    ]


def _spec_notes(facts: RunFacts, exp: Expectation, ratio: float) -> list[str]:
    """Compare with the unidirectional per-GPU link figure, and say why the bidirectional one misleads."""
    if exp.scope == "network":
        return [
            "This busbw is compared with unidirectional per-NIC figures (line rate / 8 is one direction) times the "
            "NICs of a host, never with bidirectional ones"
        ]
    link = link_spec(facts.spec.get("link")) if facts.spec else None
    if link is None:
        return ["This busbw is compared with a unidirectional per-GPU figure, never with a bidirectional one"]
    uni, bi = float(link["unidirectional_gbs"]), float(link["bidirectional_gbs"])
    notes = [
        f"This busbw is compared with the unidirectional per-GPU {link['link']} figure of {_num(uni)} GB/s "
        f"({facts.measured / uni:.0%} of it)"
    ]
    if exp.algorithm == "nvls" and facts.measured > uni:
        notes.append(
            "busbw above the link figure is normal with NVLS, as nccl-tests keeps the ring factor 2(n-1)/n whatever "
            "the algorithm (sjeaugey nccl-tests#212)"
        )
    if ratio >= judging()["warning_below"] and facts.measured < 0.5 * bi:
        notes.append(
            f"{_num(facts.measured)} GB/s is ~{facts.measured / bi:.0%} of {_num(bi)} GB/s only because "
            f"{_num(bi)} GB/s is the bidirectional figure (both directions added; unidirectional {_num(uni)} GB/s), "
            "so comparing with it would wrongly suggest a problem"
        )
    return notes


def _multi_host_notes(facts: RunFacts) -> list[str]:
    hosts, n = facts.hosts or 1, facts.nranks or 0
    if hosts < 2 or facts.collective != "all_reduce" or n < 2:
        return []
    notes = []
    if hosts == 2:
        notes.append(
            "on 2 hosts NCCL may use tree or NVLSTree, whose busbw can exceed the NICs, so a figure above the ring "
            "expectation is not a fault"
        )
    notes.append(
        f"under a hierarchical algorithm each GPU's NIC carried about busbw x (k-1)/(n-1) = "
        f"{_num(facts.measured * (hosts - 1) / (n - 1))} GB/s (stas00 ml-engineering network/README.md)"
    )
    return notes


def _where(facts: RunFacts) -> str:
    model = facts.spec["key"] if facts.spec else "CPU processes" if cpu_run(facts.run) else "unknown GPUs"
    hosts = facts.hosts
    if facts.nranks and hosts and hosts > 1 and facts.gpus_per_host:
        return f"{hosts} hosts x {facts.gpus_per_host} {model} ({facts.nranks} ranks)"
    if facts.nranks:
        return f"{facts.nranks}x {model}" + (", 1 host" if hosts == 1 else "")
    return model


def _num(x: float) -> str:
    if x >= 1000:
        return f"{x:.0f}"
    return f"{x:.1f}".rstrip("0").rstrip(".") if x >= 1 else f"{x:.2f}"
