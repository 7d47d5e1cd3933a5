"""NCCL Inspector: what the profiler plugin (NCCL plugins/profiler/inspector, 2.28+) measured of a job's own
collectives, and how it was set up.

The plugin writes one JSON record per completed collective or point-to-point operation and rank (JSON lines, a file
per process: `<host>-pid<pid>.log`), or a Prometheus text file per GPU. A job runs millions of collectives, so a
report keeps a summary per operation and size (InspectorOp) and the last kernel times per collective kind
(InspectorSeries) that comparing ranks collective by collective needs; every record read is counted.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ncclscope.model.base import Evidence, Record
from ncclscope.model.factories import new_dict, new_list
from ncclscope.model.log import Origin


class InspectorSetup(Origin):
    """How a process's Inspector plugin writes, from its INFO lines: `NCCL Inspector enabled with polling interval
    500 us, output directory D, format JSON`, or `NCCL Inspector: dump thread disabled (interval is -1) ...`."""

    writes: bool = Field(description="False when the dump thread did not start: the plugin writes nothing.")
    interval_us: int | None = Field(None, description="Dump interval; None for continuous dumping or none.")
    directory: str | None = None
    output_format: str | None = Field(None, description="JSON or Prometheus.")
    evidence: Evidence


class InspectorOp(Record):
    """One operation at one message size on one rank of one communicator: all its records of one input."""

    kind: Literal["collective", "p2p"]
    name: str = Field(description="As the plugin names it: AllReduce, AllGather, ReduceScatter, Send, Recv ...")
    comm_id: str | None = Field(None, description="The communicator's hash (JSON header id).")
    comm_name: str | None = None
    rank: int | None = None
    nranks: int | None = None
    nnodes: int | None = None
    host: str | None = None
    pid: int | None = None
    gpu: str | None = Field(None, description="Prometheus label gpu (GPU0 ...).")
    size_bytes: int | None = Field(None, description="Message size; None where only a range is given.")
    size_range: str | None = Field(None, description="Prometheus label message_size, a range such as 4-5GB.")
    algo_proto: str | None = Field(None, description="Prometheus label algo_proto (RING_SIMPLE ...).")
    count: int = Field(description="Records summarised here.")
    exec_time_us: float | None = Field(None, description="Median execution time (a Prometheus file may lack it).")
    busbw_gbs: float = Field(description="Median bus bandwidth (GB/s, as nccl-tests counts it).")
    busbw_max_gbs: float
    timing_sources: list[str] = Field(default_factory=new_list, description="kernel_gpu, kernel_cpu, collective_cpu.")
    evidence: Evidence = Field(description="The first record of this operation and size.")


class InspectorSeries(Record):
    """The last collectives of one kind on one rank of one communicator: sequence number and kernel time each
    (the kernel's GPU start time too with NCCL_INSPECTOR_DUMP_VERBOSE=1), to compare ranks call by call."""

    comm_id: str
    name: str
    rank: int
    nranks: int | None = None
    host: str | None = None
    pid: int | None = None
    sn: list[int] = Field(default_factory=new_list)
    exec_time_us: list[float] = Field(default_factory=new_list)
    kernel_start_us: list[int] = Field(default_factory=new_list, description="Empty without the verbose trace.")
    evidence: Evidence = Field(description="The first record of the series.")


class InspectorReport(Record):
    """One Inspector output file."""

    source: str
    format: Literal["json", "prometheus"]
    format_version: str | None = Field(None, description="inspector_output_format_version (JSON) or label version.")
    records: int = 0
    not_understood: int = Field(0, description="Lines that are not Inspector records.")
    not_understood_first: Evidence | None = None
    ops: list[InspectorOp] = Field(default_factory=new_list)
    series: list[InspectorSeries] = Field(default_factory=new_list)
    series_capped: dict[str, int] = Field(
        default_factory=new_dict, description="Older calls left out of a series beyond its limit, by collective."
    )
