"""The state a Case is built in while the records are walked: per process, and for the whole Case."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from ncclscope.model import (
    Case,
    CommRank,
    Communicator,
    EnvSetting,
    ErrorTrace,
    NetDevice,
    Process,
    SystemTopology,
)


@dataclass
class ProcessState:
    process: Process
    comm: Communicator | None = None  # the communicator this process is setting up
    topology: SystemTopology | None = None  # the topology dump being printed
    last_topology: SystemTopology | None = None  # the last one printed (the paths lines follow its end)
    trace: ErrorTrace | None = None
    trace_tid: int | None = None
    trace_result: int | None = None  # the result the chain of trace_tid ends in (kept or not)
    trace_line: int = -10


@dataclass
class Builder:
    case: Case
    processes: dict[tuple[str, str, int | None], ProcessState] = field(default_factory=dict)
    comms: dict[str, Communicator] = field(default_factory=dict)
    comm_by_pointer: dict[tuple[str, str, int | None, str], Communicator] = field(default_factory=dict)
    rank_by_pointer: dict[tuple[str, str, int | None, str], int] = field(default_factory=dict)
    coll_calls: list[tuple[str, dict]] = field(default_factory=list)  # (source path, LogResult.coll_calls)
    env: dict[tuple[str, str], tuple[EnvSetting, set[tuple[str, int | None]]]] = field(default_factory=dict)
    devices: dict[tuple[str, str, str, int], NetDevice] = field(default_factory=dict)
    warnings_per_family: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    versions: set[str] = field(default_factory=set)
    members: dict[tuple[str, int | None, str | None, int | None], CommRank] = field(default_factory=dict)
    bare_versions: dict[str, str] = field(default_factory=dict)  # source -> version of its bare banner
    warned: set[tuple[str, int, tuple[int, int]]] = field(default_factory=set)
    command_line_settings: list[EnvSetting] = field(default_factory=list)
    split_started: dict[tuple[str, str, int | None, str], str] = field(default_factory=dict)  # child -> id
    splits: dict[tuple[str | None, int | None, str, int | None], int] = field(default_factory=dict)
    damaged: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))  # source -> records not used
    damaged_more: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # past DAMAGED_LIMIT
    # (source, host) whose GPU paths are kept: every process of a host prints the same ones
    hosts_with_paths: set[tuple[str, str]] = field(default_factory=set)
