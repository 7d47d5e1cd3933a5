"""What healthy hardware reaches (data/expected_busbw.json), typed (reference_data.py): the file is validated
when it is first needed, and every figure keeps its source. Look-ups by GPU name, platform key, link and
(platform, GPUs, collective, algorithm); the judgement and its wording live in bandwidth.py, the figure for
one run in run_expectation.py.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING

from ncclscope.common.data_files import data_path

if TYPE_CHECKING:
    from ncclscope.diagnose.reference_data import (
        BusbwEntry,
        DataCheck,
        ExpectedBusbw,
        Figure,
        GpuCount,
        InstanceSpec,
        Judging,
        LatencyReference,
        LinkFigure,
        PlatformSpec,
    )

DATA_FILE = data_path("expected_busbw.json")


@lru_cache(maxsize=1)
def reference() -> ExpectedBusbw:
    """The reference figures with their sources, read and validated once."""
    from ncclscope.diagnose.reference_data import ExpectedBusbw

    return ExpectedBusbw.model_validate_json(DATA_FILE.read_bytes())


def judging() -> Judging:
    """Thresholds for judging busbw (ratios, smallest sizes worth judging), with their sources."""
    return reference().judging


def latency_references() -> list[LatencyReference]:
    return reference().latency


def data_check() -> DataCheck:
    return reference().data_check


def figure(value: Figure) -> tuple[float, float | None]:
    """(low, high) of a figure; high is None for a single number."""
    if isinstance(value, list):
        return float(value[0]), float(value[-1])
    return float(value), None


def gpus_fit(gpus: GpuCount, n: int) -> bool:
    if gpus is None:
        return True
    if isinstance(gpus, list):
        return int(gpus[0]) <= n <= int(gpus[-1])
    return int(gpus) == n


def platform_spec(name: str | None) -> PlatformSpec | None:
    """The platform entry whose name patterns match a device name such as 'NVIDIA H100 80GB HBM3'."""
    if not name:
        return None
    for spec in reference().platforms:
        if any(re.search(p, name, re.IGNORECASE) for p in spec.match):
            return spec
    return None


def spec_by_key(key: str | None) -> PlatformSpec | None:
    for spec in reference().platforms:
        if spec.key == key:
            return spec
    return None


def instance_spec(name: str | None) -> InstanceSpec | None:
    """The cloud instance type entry for a name as the provider spells it ('p5.48xlarge', 'Standard_ND96isr_H100_v5');
    the longest key that the name starts with, so that 'p5en.48xlarge' is not taken for 'p5'."""
    if not name:
        return None
    name = name.strip().lower()
    fits = [i for i in reference().instances if name.startswith(i.key.lower())]
    return max(fits, key=lambda i: len(i.key)) if fits else None


def instance_by_topo_file(path: str | None) -> InstanceSpec | None:
    """The instance type whose image ships the topology file NCCL_TOPO_FILE names (by its file name)."""
    if not path:
        return None
    file_name = path.strip().rsplit("/", 1)[-1].lower()
    for entry in reference().instances:
        if file_name in (f.lower() for f in entry.topo_files):
            return entry
    return None


def instances_by_network(network: str | None) -> list[InstanceSpec]:
    """The instance types whose own net plugin gives this network (`Using network FasTrak`)."""
    if not network:
        return []
    return [i for i in reference().instances if network.strip().lower() in (n.lower() for n in i.networks)]


def link_spec(link: str | None) -> LinkFigure | None:
    for entry in reference().links:
        if entry.link == link:
            return entry
    return None


def reference_entry(
    platform_key: str, gpus: int, collective: str, algorithm: str, nvlink: bool | None = None
) -> BusbwEntry | None:
    """The entry for this platform, GPU count, collective and algorithm: the exact collective before
    'any', measured references before health-check pass levels, a single GPU count before a range.
    Entries that state "nvlink" apply only when the NVLink bridge is known to be there (or not)."""
    candidates = []
    for e in reference().entries:
        if e.platform != platform_key or e.algorithm != algorithm or not gpus_fit(e.gpus, gpus):
            continue
        if e.collective not in (collective, "any"):
            continue
        if e.nvlink is not None and e.nvlink != nvlink:
            continue
        rank = (e.collective != collective, e.kind != "reference", isinstance(e.gpus, list))
        candidates.append((rank, e))
    if not candidates:
        return None
    return min(candidates, key=lambda c: c[0])[1]
