"""NCCL RAS status reports: what the `ncclras` client (or `echo status | nc localhost 28028`) prints,
as text (NCCL 2.24+, grammars/ras_status.lark) or as JSON (`ncclras -f json`, 2.28.7+).

RAS knows which ranks of each communicator answered, how many operations each launched (per
collective type since 2.26), and which processes stopped answering; it leaves the interpretation
to the reader (NCCL docs, troubleshooting/ras.rst). This module only reads: rules/hang.py judges.

The text lists ranks one by one only for outlier groups: a line `26 ranks have launched up to
operation 6650` counts the majority, and `Rank 5 -- GPU ...` lines under a count line belong to it.
"""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any

from lark import Lark, Token, Tree
from lark.exceptions import LarkError

from ncclscope.model import Evidence, RankProgress, RasCommunicator, RasGroup, RasJob, RasReport
from ncclscope.parse.grammars import load

# lines worth giving to the grammar once a report has started (the rest are number tables and prose)
CANDIDATE_RE = re.compile(
    r"(?:NCCL version \S+ compiled|Communicators\.\.\.|\d|#\d|Missing |The missing |Process \d|Communicator ranks"
    r"|Rank \d|Encountered \d|(?:Errors|Warnings|[A-Z]{3,})\s*$)"
)
START_RE = re.compile(r"^(?:NCCL version \S+ compiled with CUDA|Job summary\s*$|Communicators\.\.\.)")


@cache
def _parser() -> Lark:
    return load("ras_status", ("start", "job_row"))


class RasReader:
    """Reads the lines of one input that belong to `ncclras` reports; one RasReport per report."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.reports: list[RasReport] = []
        self._report: RasReport | None = None
        self._comm: RasCommunicator | None = None
        self._rows: dict[int, tuple[int, str, list[str]]] = {}  # group -> (ranks per comm, status, errors)
        self._listing: str = ""  # what the Rank lines under the current heading are: missing, count, status
        self._value: int | None = None
        self._status: str | None = None
        self._collective: str | None = None
        self._dead = False
        self._in_job = False  # under "Job summary": the next row of numbers is the job's

    HINT_WORDS: tuple[str, ...] = ()  # what a line must hold for feed() to do anything while not busy: START_RE
    HINT_START = r"NCCL version \S+ compiled with CUDA|Job summary|Communicators\.\.\."  # (not to its end)

    @property
    def busy(self) -> bool:
        """Inside a report (its lines begin with digits and words of every kind)."""
        return self._report is not None

    def feed(self, line_no: int, text: str) -> bool:
        """True when the line is part of a report (then no other reader needs it)."""
        body = text.strip()
        if self._report is None:
            if not START_RE.match(body):
                return False
            self._report = RasReport(source=self.source, format="text", evidence=self._evidence(line_no, body))
            self.reports.append(self._report)
        if body.startswith("Job summary"):
            self._in_job = True
            return True
        if not body or not CANDIDATE_RE.match(body):
            return False
        if self._in_job and body[0].isdigit():
            try:
                self._job_row(_parser().parse(body, start="job_row"), line_no, body)
                return True
            except LarkError:
                pass
        try:
            tree = _parser().parse(body, start="start")
        except LarkError:
            return False
        self._in_job = False
        self._take(tree, line_no, body)
        return True

    # ----------------------------------------------------------------------------------- lines
    def _take(self, tree: Tree, line_no: int, body: str) -> None:
        report = self._report
        assert report is not None
        kind = tree.data
        v = [str(t) for t in tree.scan_values(lambda t: isinstance(t, Token))]
        if kind == "version":
            if report.communicators or report.nccl_version:  # a second query in the same input
                self._report = None
                self.feed(line_no, body)
                return
            report.nccl_version = v[0]
        elif kind == "comm_row":
            self._rows[int(v[0])] = (int(v[4]), v[6], [] if v[7] == "OK" else v[7].split(","))
            report.groups.append(
                RasGroup(
                    group=int(v[0]),
                    communicators=int(v[1]),
                    nodes_per_comm=int(v[2]),
                    ranks_per_node=v[3],
                    ranks_per_comm=int(v[4]),
                    ranks_in_group=int(v[5]),
                    status=v[6],
                    errors=[] if v[7] == "OK" else v[7].split(","),
                    evidence=self._evidence(line_no, body),
                )
            )
            if v[7] != "OK" and (int(v[2]) == 0 or int(v[4]) == 0):
                report.contradictions.append(
                    f"group {v[0]} reports {v[7]} for communicators of 0 nodes or 0 ranks (line {line_no})"
                )
        elif kind == "comm_problem":
            group = int(v[0].split("-")[0])
            comm = next((c for c in report.communicators if c.id == f"#{v[0]}"), None)
            if comm is None:
                size, status, errors = self._rows.get(group, (None, None, []))
                comm = RasCommunicator(id=f"#{v[0]}", hash=v[1], size=size, status=status, errors=list(errors))
                comm.evidence = self._evidence(line_no, body)
                report.communicators.append(comm)
            if v[2] not in comm.errors:
                comm.errors.append(v[2])
            self._comm, self._listing = comm, ""
        elif kind == "section":
            self._comm, self._listing = None, ("processes" if v and v[0] in ("INCOMPLETE", "DEAD") else "")
            self._dead = bool(v) and v[0] == "DEAD"
        elif kind == "missing_ranks_count":
            self._listing = "missing"
            if self._comm is not None and self._comm.missing_evidence is None:
                self._comm.missing_evidence = self._evidence(line_no, body)
            if self._comm is not None and self._comm.size is not None and int(v[0]) > self._comm.size:
                report.contradictions.append(
                    f"{self._comm.id} misses {v[0]} ranks of a {self._comm.size}-rank communicator (line {line_no})"
                )
        elif kind == "missing_ranks" and self._comm is not None:
            for rank in v[2:]:
                self._comm.missing.append(
                    RankProgress(rank=int(rank), status="missing", evidence=self._evidence(line_no, body))
                )
        elif kind == "processes_missing":
            self._listing, self._dead = "processes", False
        elif kind == "processes_dead":
            self._listing, self._dead = "processes", True
        elif kind == "process_line" and self._listing == "processes":
            entry = f"process {v[0]} on node {v[1]} (GPU {v[-1]})"
            (report.dead_processes if self._dead else report.missing_processes).append(entry)
        elif kind == "differ":
            rest = v[0]
            self._listing = "status" if rest.startswith("status") else "count"
            match = re.match(r"(\w+) operation counts", rest)
            self._collective = match.group(1) if match and match.group(1) != "collective" else None
            self._value, self._status = None, None
        elif kind == "ranks_launched":
            self._value = 0 if "not launched" in v[1] else int(v[1])
            if self._comm is not None:
                self._comm.op_counts.setdefault(self._collective or "", {})[self._value] = int(v[0])
        elif kind == "ranks_status":
            self._status = v[1]
        elif kind == "rank_line":
            self._rank_line(tree, line_no, body)
        elif kind == "timeouts":
            report.timeouts += int(v[0])

    def _job_row(self, tree: Tree, line_no: int, body: str) -> None:
        assert self._report is not None
        v = [str(t) for t in tree.scan_values(lambda t: isinstance(t, Token))]
        self._report.job = RasJob(
            nodes=int(v[0]),
            processes_per_node=v[1],
            gpus_per_process=v[2],
            processes=int(v[3]),
            gpus=int(v[4]),
            evidence=self._evidence(line_no, body),
        )
        self._in_job = False

    def _rank_line(self, tree: Tree, line_no: int, body: str) -> None:
        comm = self._comm
        if comm is None:
            return
        rank = int(str(tree.children[0]))
        says = next((c for c in tree.children if isinstance(c, Tree) and c.data.startswith("rank_")), None)
        where = next((c for c in tree.children if isinstance(c, Tree) and c.data == "gpu_process"), None)
        host = pid = None
        if where is not None:
            vals = [str(t) for t in where.children]
            pid, host = int(vals[1]), vals[2]
        entry = RankProgress(rank=rank, host=host, pid=pid, evidence=self._evidence(line_no, body))
        if self._listing == "missing":
            entry.status = "missing"
            comm.missing.append(entry)
            return
        if says is not None and says.data in ("rank_launched", "rank_not_launched"):
            entry.entered = int(str(says.children[0])) if says.data == "rank_launched" else 0
            counts = comm.op_counts.setdefault(self._collective or "", {})
            counts[entry.entered] = counts.get(entry.entered, 0) + 1
        elif says is not None and says.data == "rank_status":
            entry.status = str(says.children[0])
        elif says is not None and says.data == "rank_reported":
            entry.status = str(says.children[0]).strip()
        elif self._listing == "count":
            entry.entered = self._value
        elif self._listing == "status":
            entry.status = self._status
        if entry.entered is not None:
            entry.operation = self._collective
        comm.ranks.append(entry)

    def _evidence(self, line_no: int, body: str) -> Evidence:
        return Evidence(source=self.source, line=line_no, text=body[:300])


# ---------------------------------------------------------------------------------------- JSON
def read_json(data: bytes, source: str) -> RasReport:
    """`ncclras -f json` output; ValueError with a one-line reason when it is not that."""
    try:
        raw = json.loads(data.decode("utf-8", "replace"))
    except ValueError as exc:
        raise ValueError(f"invalid JSON: {exc}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("communicators"), list):
        raise ValueError("no list of communicators")
    report = RasReport(source=source, format="json", nccl_version=_str(raw.get("nccl_version")))
    ras = raw.get("ras")
    if isinstance(ras, dict) and isinstance(ras.get("timeouts_count"), int):
        report.timeouts = ras["timeouts_count"]
    for comm in raw["communicators"]:
        if not isinstance(comm, dict):
            continue
        model = RasCommunicator(
            id=_str(comm.get("hash")) or f"#{len(report.communicators)}",
            hash=_str(comm.get("hash")),
            size=comm.get("size") if isinstance(comm.get("size"), int) else None,
        )
        for item in comm.get("ranks") or []:
            if isinstance(item, dict) and isinstance(item.get("rank"), int):
                model.ranks.extend(_json_ranks(item))
        for item in comm.get("missing_ranks") or []:
            if isinstance(item, dict) and isinstance(item.get("rank"), int):
                status = _dict(item.get("status"))
                state = "dead" if status.get("considered_dead") else "missing"
                state = "unresponsive" if state == "missing" and status.get("unresponsive") else state
                host, pid = _str(item.get("host")), _int(item.get("pid"))
                text = f"missing rank {item['rank']}: {state}, process {pid} on {host}"
                model.missing.append(
                    RankProgress(
                        rank=item["rank"],
                        host=host,
                        pid=pid,
                        status=state,
                        evidence=Evidence(source=source, line=0, text=f"communicator {model.id}: {text}"),
                    )  # fmt: skip
                )
        if model.missing:
            model.errors.append("INCOMPLETE")
        for rank in model.ranks:
            if rank.entered is not None:
                counts = model.op_counts.setdefault(rank.operation or "", {})
                counts[rank.entered] = counts.get(rank.entered, 0) + 1
        report.communicators.append(model)
    return report


def _json_ranks(item: dict[str, Any]) -> list[RankProgress]:
    """One entry per collective type with its count (RAS counts each type separately)."""
    status = _dict(item.get("status"))
    flags = [name for name in ("abort_flag", "destroy_flag", "finalize_called") if status.get(name) is True]
    if status.get("async_error"):
        flags.append(f"async error {status['async_error']}")
    base = {"rank": item["rank"], "host": _str(item.get("host")), "pid": _int(item.get("pid"))}
    counts = _dict(item.get("collective_counts"))
    out = [
        RankProgress(**base, entered=count, operation=str(name), status=", ".join(flags) or None)
        for name, count in counts.items()
        if isinstance(count, int)
    ]
    return out or [RankProgress(**base, status=", ".join(flags) or None)]


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: Any) -> str | None:
    return value[:200] if isinstance(value, str) else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
