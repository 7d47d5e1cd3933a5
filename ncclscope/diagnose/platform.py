"""Which platform the inputs describe: GPU model, GPUs per host, hosts, NVLink wiring, NICs.

`detect_platform` reads every input: nccl-tests device lines name the GPU, `nvidia-smi topo -m` shows NVLink
counts and NVSwitch wiring, the NCCL log shows hosts, ranks, NICs and NVLS support.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import TYPE_CHECKING

from ncclscope.diagnose.expectations import (
    instance_by_topo_file,
    instance_spec,
    instances_by_network,
    platform_spec,
    spec_by_key,
)
from ncclscope.model import BenchmarkRun, Case, Evidence, Platform

if TYPE_CHECKING:
    from ncclscope.diagnose.reference_data import InstanceSpec, PlatformSpec

NV_RE = re.compile(r"^NV(\d+)$")


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

    instance, instance_evidence = detect_instance(case, spec)
    if instance_evidence is not None:
        evidence.append(instance_evidence)
    if spec is None and instance is not None:
        spec = spec_by_key(instance.gpu)  # the instance type's GPU, when no device line names one

    nvlink_links, nvswitch, topo_evidence = _matrix_facts(case, spec)
    evidence.extend(topo_evidence)
    log_nvswitch, log_evidence = _log_nvswitch(case)
    evidence.extend(log_evidence)
    if log_nvswitch:
        nvswitch = True

    hosts = _host_names(case)
    per_host = _gpus_per_host(case)
    if nvswitch is None and spec and spec.nvswitch_gpus and per_host == spec.nvswitch_gpus:
        nvswitch = True  # HGX/DGX 8-GPU SXM boards are built with NVSwitch

    layers = sorted({d.link_layer or d.transport for d in case.net_devices if (d.link_layer or d.transport)})
    networks = Counter(p.network for p in case.processes if p.network)
    network = "+".join(sorted(networks)) if networks else None

    if gpu_name is None and len(gpu_runs) < len(case.benchmarks):
        missing.append("GPU model: the benchmark tables are from CPU processes (gloo), not GPUs")
    elif gpu_name is None and spec is None:
        missing.append(
            "GPU model: nccl-tests device lines (`#  Rank  0 Group  0 Pid ... NVIDIA H100 80GB HBM3`) from a run "
            "printed with its header, or `nvidia-smi -L`"
        )
    elif spec is None:
        missing.append(f"reference figures for '{gpu_name}' (ncclscope has none for this GPU)")
    if per_host is None:
        missing.append("GPUs per host: nccl-tests device lines, `nvidia-smi topo -m`, or an NCCL_DEBUG=INFO log")
    if not case.topologies and spec and spec.nvlink_links and nvswitch is None:
        missing.append("NVLink wiring: `nvidia-smi topo -m` from each host")

    return Platform(
        gpu_model=spec.model if spec else None,
        gpu_name=gpu_name,
        gpus_per_host=per_host,
        hosts=len(hosts) or None,
        nvlink_links=nvlink_links,
        nvswitch=nvswitch,
        nic_link_layers=layers,
        network=network,
        key=spec.key if spec else None,
        instance=instance.key if instance else None,
        evidence=evidence,
        missing=missing,
    )


def detect_instance(case: Case, gpu: PlatformSpec | None) -> tuple[InstanceSpec | None, Evidence | None]:
    """The cloud instance type: named by the net plugin (aws-ofi-nccl's `Running on <type> platform`), by the
    file name of the topology file its image ships (NCCL_TOPO_FILE, e.g. Azure's ndv5-topo.xml), or by the network
    of a provider's own plugin (`Using network FasTrak`: A3 Mega); where two types share a plugin, by the GPU."""
    for p in case.processes:
        spec = instance_spec(p.instance_type)
        if spec is not None:
            return spec, p.evidence.get("instance_type")
    for setting in case.env:
        if setting.name == "NCCL_TOPO_FILE":
            spec = instance_by_topo_file(setting.value)
            if spec is not None:
                return spec, setting.evidence
    tried: set[str | None] = set()  # thousands of processes print a few networks
    for p in case.processes:
        if p.network in tried:
            continue
        tried.add(p.network)
        fits = instances_by_network(p.network)
        if len(fits) > 1:
            fits = [i for i in fits if gpu is not None and i.gpu == gpu.key]
        if len(fits) == 1:
            return fits[0], p.evidence.get("network")
    return None, None


def _matrix_facts(case: Case, spec: PlatformSpec | None) -> tuple[int | None, bool | None, list[Evidence]]:
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
        per_gpu = spec.nvlink_links if spec else None
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
