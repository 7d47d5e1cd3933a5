"""Findings: what `ncclscope analyze` says about a Case."""

from __future__ import annotations

from typing import TYPE_CHECKING, overload

from pydantic import Field

from ncclscope.model.base import Evidence, Record
from ncclscope.model.case import Case, Severity
from ncclscope.model.factories import new_dict, new_list

if TYPE_CHECKING:
    from pandas import DataFrame

    from ncclscope.model.frames import Frames


SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


class Finding(Record):
    """One diagnosis, with the lines that show it and what to do about it."""

    code: str = Field(description="Rule code, e.g. NET001 (a code keeps its meaning across releases).")
    name: str = Field(description="Rule name, e.g. socket-transport.")
    severity: Severity
    message: str = Field(description="One line with the concrete facts: hosts, ranks, GPUs, NICs, sizes.")
    evidence: list[Evidence] = Field(default_factory=new_list, description="Representative lines (a few).")
    evidence_count: int = Field(0, description="How many lines in all support the finding.")
    explanation: str = Field("", description="Why it matters.")
    fix: str = Field("", description="What to do.")
    hosts: list[str] = Field(default_factory=new_list)
    ranks: list[int] = Field(default_factory=new_list)
    related: list[str] = Field(
        default_factory=new_list, description="Codes of findings this one explains or is explained by (one story)."
    )
    root_cause: bool = Field(False, description="First link of a story told by several findings.")
    explains: list[str] = Field(
        default_factory=new_list,
        description="Codes of the findings this one explains here (it is a problem, and their documented cause).",
    )
    sources: list[str] = Field(default_factory=new_list, description="Where the expert knowledge comes from.")

    @property
    def identity(self) -> tuple:
        """What makes it the same finding in a newer analysis of a growing input: code and first evidence line."""
        first = self.evidence[0] if self.evidence else None
        return (self.code, first.source, first.line) if first else (self.code, self.message)


class BandwidthJudgement(Record):
    """How a benchmark's peak busbw compares with what the hardware should reach."""

    source: str
    line: int
    collective: str
    nranks: int | None = None
    size: int = Field(description="The largest size of the run, where peak busbw is judged.")
    measured_busbw: float
    expected_busbw: float | None = None
    ratio: float | None = None
    floor: bool = Field(
        False, description="The expected figure is a floor: what the slowest hardware the inputs allow reaches."
    )
    algorithm: str | None = Field(None, description="Algorithm the expectation assumes (ring, nvls, ...).")
    platform: str | None = None
    expectation_source: str | None = None
    verdict: str = Field(description="One or two sentences a person can quote in a ticket.")


class Platform(Record):
    """What hardware the inputs describe."""

    gpu_model: str | None = Field(None, description="e.g. H100, A100, B200, from nccl-tests device lines or the log.")
    gpu_name: str | None = None
    gpus_per_host: int | None = None
    hosts: int | None = None
    nvlink_links: int | None = Field(None, description="NV# between GPU pairs (the most common value).")
    nvswitch: bool | None = None
    nic_link_layers: list[str] = Field(default_factory=new_list)
    network: str | None = None
    key: str | None = Field(None, description="Entry of data/expected_busbw.json used for expectations.")
    instance: str | None = Field(
        None, description="Cloud instance type (expected_busbw.json instances) named by the net plugin or topo file."
    )
    evidence: list[Evidence] = Field(default_factory=new_list)
    missing: list[str] = Field(default_factory=new_list, description="What would identify the platform.")


class Analysis(Record):
    """The output of `ncclscope analyze`: findings first, then the Case they were drawn from."""

    ncclscope_version: str
    findings: list[Finding] = Field(default_factory=new_list)
    summary: dict[str, int] = Field(default_factory=new_dict, description="Count of findings per severity.")
    platform: Platform = Field(default_factory=Platform)
    bandwidth: list[BandwidthJudgement] = Field(default_factory=new_list)
    case: Case

    @overload
    def frames(self, name: None = None) -> Frames: ...
    @overload
    def frames(self, name: str) -> DataFrame: ...
    def frames(self, name: str | None = None) -> Frames | DataFrame:
        """The Case's frames and the findings as pandas DataFrames (ncclscope.model.frames), or the one frame `name`."""
        from ncclscope.model.frames import analysis_frames

        frames = analysis_frames(self)
        return frames if name is None else frames[name]
