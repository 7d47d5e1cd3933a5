"""The schema of data/expected_busbw.json, as pydantic models: the file is validated against it when it loads.

Apart from the look-ups (expectations.py), so that an analysis that never needs a figure never builds them.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

Figure = int | float | list[int | float]  # a number, or [low, high]: judged against the low end
GpuCount = int | list[int] | None  # a count, or [fewest, most]; None: any


class _Data(BaseModel):
    # built on first use: an analysis without a benchmark never reads the file
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class Judging(_Data):
    """busbw ratios that make a warning and an error, and the smallest sizes worth judging."""

    warning_below: float
    error_below: float
    thresholds_source: str
    judge_min_bytes: int
    judge_min_bytes_source: str
    provisional_min_bytes: int
    provisional_min_bytes_source: str
    floor_error_below: float  # the error threshold against a floor (the NIC's speed or count unknown)
    floor_error_below_source: str


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


class _BusbwFigure(_Data):
    """What every busbw figure says: where it was measured, for which collective and algorithm, and its source."""

    platform: str
    gpus: GpuCount
    collective: str
    algorithm: str
    busbw_gbs: Figure
    conditions: str
    source: str


class BusbwEntry(_BusbwFigure):
    """A busbw figure on one host of a platform, for a GPU count, collective and algorithm."""

    kind: str = "reference"  # "reference": measured on healthy hardware; else a health-check pass level
    nvlink: bool | None = None  # applies only with (True) or without (False) an NVLink bridge; None: either


class PcieEntry(_BusbwFigure):
    """A busbw figure of GPUs joined by PCIe only, by PCIe generation and path (through a switch or the CPU)."""

    pcie_gen: int
    path: str


class NicEntry(_BusbwFigure):
    """busbw per NIC of a fabric and line rate, across hosts."""

    link_layer: str
    line_rate_gbps: int | float
    kind: str = "reference"
    instance: str | None = None  # a cloud instance type whose NICs run at this line rate
    nics: int | None = None


class MultiHostEntry(_BusbwFigure):
    """A busbw figure of a job over several hosts."""

    hosts: int | str
    gpus: int  # GPUs per host: always one count here


class Network(_Data):
    about: str
    per_nic: list[NicEntry]
    multi_host: list[MultiHostEntry]
    floor_note: str


class HealthCheck(_Data):
    """A provider's own pass level for a host pair (a floor, not what healthy hosts reach)."""

    collective: str
    hosts: int
    busbw_gbs: int | float
    source: str


class InstanceSpec(_Data):
    """A cloud instance type: its GPUs, the GPU NICs (count, line rate in Gb/s) and their fabric."""

    key: str
    provider: str
    gpu: str  # a platforms[].key
    gpus: int
    nics: int
    nic_gbps: int | float
    fabric: str
    networks: list[str] = []  # the network its own NCCL net plugin gives ("Using network FasTrak")
    topo_files: list[str] = []
    source: str
    health_check: HealthCheck | None = None


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
    instances: list[InstanceSpec]
    instances_note: str
    latency: list[LatencyReference]
    data_check: DataCheck
