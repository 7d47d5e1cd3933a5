"""What healthy hardware reaches (data/expected_busbw.json), typed: the file is validated when it loads, and
every figure keeps its source. Look-ups by GPU name, platform key, link and (platform, GPUs, collective,
algorithm); the judgement and its wording live in bandwidth.py, the figure for one run in run_expectation.py.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict

DATA_FILE = Path(__file__).parent.parent / "data" / "expected_busbw.json"

Figure = int | float | list[int | float]  # a number, or [low, high]: judged against the low end
GpuCount = int | list[int] | None  # a count, or [fewest, most]; None: any


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Judging(_Data):
    """busbw ratios that make a warning and an error, and the smallest sizes worth judging."""

    warning_below: float
    error_below: float
    thresholds_source: str
    judge_min_bytes: int
    judge_min_bytes_source: str
    provisional_min_bytes: int
    provisional_min_bytes_source: str


class NcclNvlinkBandwidth(_Data):
    """The per-link NVLink bandwidth NCCL's topology search assumes, by SM generation and by link."""

    about: str
    source: str
    per_sm: dict[str, float]
    per_link: dict[str, float]


class LinkFigure(_Data):
    link: str
    unidirectional_gbs: int | float
    bidirectional_gbs: int | float
    source: str
    conditions: str


class PlatformSpec(_Data):
    """A GPU platform: the patterns of its device names, its GPU link, NVLink and NVSwitch build."""

    key: str
    model: str
    form: str
    match: list[str]
    link: str | None
    pcie_gen: int | None = None
    nvlink_links: int | None = None
    nvswitch_gpus: int | None = None
    nvls_min_gpus: int | None = None
    nvls_source: str | None = None


class Nvls(_Data):
    min_nccl_version: str
    source: str


class BusbwEntry(_Data):
    """A busbw figure on one host of a platform, for a GPU count, collective and algorithm."""

    platform: str
    gpus: GpuCount
    collective: str
    algorithm: str
    busbw_gbs: Figure
    conditions: str
    source: str
    kind: str = "reference"  # "reference": measured on healthy hardware; else a health-check pass level
    nvlink: bool | None = None  # applies only with (True) or without (False) an NVLink bridge; None: either


class PcieEntry(_Data):
    platform: str
    pcie_gen: int
    path: str
    gpus: GpuCount
    collective: str
    algorithm: str
    busbw_gbs: Figure
    conditions: str
    source: str


class NicEntry(_Data):
    """busbw per NIC of a fabric and line rate, across hosts."""

    platform: str
    link_layer: str
    line_rate_gbps: int | float
    gpus: GpuCount
    collective: str
    algorithm: str
    busbw_gbs: Figure
    conditions: str
    source: str
    kind: str = "reference"
    instance: str | None = None  # a cloud instance type whose NICs run at this line rate
    nics: int | None = None


class MultiHostEntry(_Data):
    platform: str
    hosts: int | str
    gpus: int
    collective: str
    algorithm: str
    busbw_gbs: Figure
    conditions: str
    source: str


class Network(_Data):
    about: str
    per_nic: list[NicEntry]
    multi_host: list[MultiHostEntry]
    floor_note: str


class LatencyReference(_Data):
    fabric: str
    hosts: int | str
    nvlink: bool | None
    max_size_bytes: int
    reference_us: list[int | float]
    warn_above_us: int | float
    conditions: str
    source: str


class DataCheck(_Data):
    about: str
    tolerance: dict[str, float]
    tolerance_other_types: float
    source: str


class ExpectedBusbw(_Data):
    """The whole of data/expected_busbw.json."""

    about: str
    judging: Judging
    nccl_nvlink_bw: NcclNvlinkBandwidth
    links: list[LinkFigure]
    platforms: list[PlatformSpec]
    platforms_note: str
    nvls: Nvls
    entries: list[BusbwEntry]
    pcie: list[PcieEntry]
    network: Network
    latency: list[LatencyReference]
    data_check: DataCheck


@lru_cache(maxsize=1)
def reference() -> ExpectedBusbw:
    """The reference figures with their sources, read and validated once."""
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
