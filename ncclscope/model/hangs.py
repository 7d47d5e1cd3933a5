"""Hangs: who reached which collective (Flight Recorder dumps, NCCL RAS, COLL lines, watchdog lines)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ncclscope.model.base import Evidence, Record
from ncclscope.model.factories import new_dict, new_list


class FlightRecorderEntry(Record):
    """One collective or point-to-point call in a rank's Flight Recorder ring buffer."""

    record_id: int | None = None
    group: str = Field(description="Process group name (its uid: '0' for the default group).")
    group_desc: str = Field("", description="The group's description: default_pg, dp, tp ...")
    seq: int | None = Field(None, description="collective_seq_id: the group's collective sequence number.")
    p2p_seq: int | None = Field(None, description="p2p_seq_id: the group's point-to-point sequence number.")
    is_p2p: bool = False
    collective: str = Field(description="all_reduce, broadcast, send 0->1 ... (profiling_name after the backend).")
    backend: str | None = Field(None, description="nccl, gloo ... (profiling_name before ':').")
    input_sizes: list[list[int]] = Field(default_factory=new_list)
    output_sizes: list[list[int]] = Field(default_factory=new_list)
    input_dtypes: list[str] = Field(default_factory=new_list)
    output_dtypes: list[str] = Field(default_factory=new_list)
    state: str = Field("", description="scheduled, started or completed.")
    retired: bool | None = None
    timeout_ms: int | None = None
    time_created_ns: int | None = None
    called_at: str | None = Field(None, description="The innermost frame outside torch: file:line (function).")


class FlightRecorderGroup(Record):
    name: str
    desc: str = ""
    ranks: list[int] = Field(default_factory=new_list, description="Global ranks of the group, as the dump lists them.")


class FlightRecorderStatus(Record):
    """pg_status: the watchdog's view of one group on this rank."""

    last_enqueued: int | None = None
    last_started: int | None = None
    last_completed: int | None = None


class FlightRecorderDump(Record):
    """One rank's Flight Recorder dump (PyTorch TORCH_FR_DUMP_TEMP_FILE, pickle or JSON)."""

    source: str
    rank: int | None = Field(
        None, description="Global rank: the trailing number of the file name, as fr_trace reads it."
    )
    format: Literal["pickle", "json"]
    version: str = ""
    comm_lib_version: str | None = Field(None, description="The NCCL version the dump names.")
    groups: list[FlightRecorderGroup] = Field(default_factory=new_list)
    status: dict[str, FlightRecorderStatus] = Field(default_factory=new_dict, description="Per group id.")
    entries: list[FlightRecorderEntry] = Field(default_factory=new_list)
    entries_total: int = Field(0, description="Entries in the dump (the list keeps the last ones of each group).")
    problems: list[str] = Field(default_factory=new_list, description="Entries or fields that could not be read.")


class FrTraceReport(Record):
    """A collective that not all ranks joined, as PyTorch's Flight Recorder analyzer (fr_trace) prints it: its
    report (`Not all ranks joining collective N at entry M`, `missing ranks: {..}`), or its side-by-side view
    of the ranks' entries, where a rank's column ends before the others'."""

    source: str
    form: Literal["report", "view"]
    group: str | None = Field(None, description="The process group, as the report names it (0:default_pg).")
    collective: str | None = Field(None, description="all_reduce ... (the backend before ':' dropped).")
    seq: int | None = Field(None, description="The collective's sequence number (report), or its row (view).")
    entry: int | None = Field(None, description="report: the entry of the Flight Recorder buffer it is in.")
    missing_ranks: list[int] = Field(default_factory=new_list)
    present_ranks: list[int] = Field(default_factory=new_list, description="view: ranks whose column has it.")
    expected_ranks: int | None = None
    state: str | None = Field(None, description="scheduled, started or completed.")
    input_sizes: str | None = None
    evidence: list[Evidence] = Field(default_factory=new_list)


class RankProgress(Record):
    """How far one rank of a group got."""

    rank: int
    host: str | None = None
    pid: int | None = None
    entered: int | None = Field(None, description="Highest sequence number (op count) the rank entered.")
    completed: int | None = Field(None, description="Highest sequence number it completed, when known.")
    operation: str | None = Field(None, description="What it entered last: collective, sizes, dtype.")
    state: str | None = Field(None, description="Where that last operation stands, when known.")
    status: str | None = Field(None, description="RAS: the rank's status (missing, dead, unresponsive ...).")
    evidence: Evidence | None = None


class GroupProgress(Record):
    """Collective progress of one communicator or process group, from one kind of evidence."""

    via: Literal["flight_recorder", "ras", "coll_lines", "watchdog"]
    group: str = Field(description="Process group (name:desc), communicator hash or pointer.")
    size: int | None = Field(None, description="Ranks the group should have.")
    ranks: list[RankProgress] = Field(default_factory=new_list)
    missing: list[RankProgress] = Field(
        default_factory=new_list, description="Ranks known to belong to the group that reported nothing."
    )
    counts_by_collective: bool = Field(
        False, description="RAS: counts are per collective type (`operation` names it), not one sequence."
    )
    counts_calls: bool = Field(
        False,
        description="COLL lines whose opCount stayed 0 (no proxy operations): a rank's position is the number of "
        "COLL lines it printed, not an opCount.",
    )


class RasCommunicator(Record):
    """One communicator of an `ncclras` report (text or `-f json`)."""

    id: str = Field(description="'#group-index' (text) or the hash (JSON).")
    hash: str | None = None
    size: int | None = None
    status: str | None = Field(None, description="RUNNING, INIT, FINALIZE, ABORT, NOCOMM ...")
    errors: list[str] = Field(default_factory=new_list, description="INCOMPLETE, MISMATCH, ERROR ...")
    ranks: list[RankProgress] = Field(default_factory=new_list, description="Ranks reported, with their op counts.")
    missing: list[RankProgress] = Field(default_factory=new_list, description="Ranks that gave no data.")
    missing_evidence: Evidence | None = Field(
        None, description="The `Missing communicator data from N ranks` line that the missing ranks are listed under."
    )
    op_counts: dict[str, dict[int, int]] = Field(
        default_factory=new_dict,
        description="Per collective type ('' when not named): operation count -> how many ranks.",
    )
    evidence: Evidence | None = None


class RasGroup(Record):
    """A row of the text report's communicator table: communicators alike in size, state and errors."""

    group: int
    communicators: int
    nodes_per_comm: int
    ranks_per_node: str = Field(description="A number or a range ('7-8').")
    ranks_per_comm: int
    ranks_in_group: int
    status: str = Field(description="RUNNING, INIT, FINALIZE, ABORT, NOCOMM ...")
    errors: list[str] = Field(default_factory=new_list, description="Empty for OK; INCOMPLETE, MISMATCH ...")
    evidence: Evidence | None = None


class RasJob(Record):
    """The text report's job summary: what RAS saw of the job as a whole."""

    nodes: int
    processes_per_node: str = Field(description="A number or a range.")
    gpus_per_process: str = Field(description="A number or a range.")
    processes: int
    gpus: int
    evidence: Evidence | None = None


class RasReport(Record):
    """An `ncclras` status report (NCCL 2.24+), text or JSON (2.28.7+)."""

    source: str
    format: Literal["text", "json"]
    nccl_version: str | None = None
    job: RasJob | None = None
    groups: list[RasGroup] = Field(default_factory=new_list, description="Text reports: the communicator table.")
    communicators: list[RasCommunicator] = Field(default_factory=new_list)
    dead_processes: list[str] = Field(default_factory=new_list, description="'process PID on node HOST' entries.")
    missing_processes: list[str] = Field(default_factory=new_list)
    timeouts: int = 0
    contradictions: list[str] = Field(
        default_factory=new_list, description="Where the report contradicts itself (then its errors are not trusted)."
    )
    evidence: Evidence | None = None


class CollCalls(Record):
    """NCCL_DEBUG_SUBSYS=COLL lines of one rank of one communicator: how many calls, and the last."""

    host: str | None = None
    pid: int | None = None
    comm: str = Field(description="The communicator pointer the lines print.")
    communicator: str | None = Field(None, description="Communicator.id, from the init line of that pointer.")
    rank: int | None = Field(None, description="From the same process's init line for that pointer.")
    nranks: int | None = None
    calls: int = 0
    last_op_count: int = Field(description="Highest opCount printed (hex in the log).")
    last_call: str = Field("", description="Collective of that line, with count and datatype.")
    evidence: Evidence
