"""Who reached which collective: each kind of hang evidence in a Case turned into one picture per
group (Case.progress), which rules/hang.py judges and the TUI shows.

- Flight Recorder dumps: per process group, each rank's highest collective sequence number and what
  it was (collective, sizes, dtypes, state).
- COLL lines: per communicator, each rank's highest opCount (ranks from the init lines).
- PyTorch watchdog lines: per process group, each rank's last enqueued and last completed work.
- ncclras reports: per communicator, the ranks RAS listed with their operation counts, and the ranks
  that gave no data.
"""

from __future__ import annotations

from collections import defaultdict

from ncclscope.common.words import number_ranges
from ncclscope.model import (
    Case,
    CollCalls,
    Evidence,
    FlightRecorderDump,
    FlightRecorderEntry,
    GroupProgress,
    RankProgress,
)

VIA = {
    "flight_recorder": "Flight Recorder dumps",
    "coll_lines": "NCCL COLL lines",
    "watchdog": "PyTorch watchdog lines",
    "ras": "the ncclras report",
}


# Findings that judge what is *missing* (a rank that has not completed init, a rank that has not entered a
# collective yet, evidence not seen yet, the peak of a table still growing): false alarms while a job runs and
# its log grows, so a followed input shows them once it ends or goes quiet.
JUDGED_AT_END = frozenset({"RUN001", "EVD001", "BW001", "BW002", "BW004", "BW006", "HANG001", "HANG003"})


def collective_progress(case: Case) -> list[GroupProgress]:
    out = _flight_recorder(case.flight_records)
    out += _coll_lines(case)
    out += _watchdog(case)
    out += _ras(case)
    return out


def furthest(progress: GroupProgress) -> tuple[int | None, list[RankProgress], list[RankProgress]]:
    """The furthest sequence number, the ranks there, and the ranks behind it, slowest first (those
    that reported nothing for the group count as behind when the evidence says they are members)."""
    known = [r for r in progress.ranks if r.entered is not None]
    if not known:
        return None, [], []
    top = max(r.entered for r in known if r.entered is not None)
    leaders = [r for r in known if r.entered == top]
    behind = [r for r in progress.ranks if r.entered is None or r.entered < top]
    if progress.via == "coll_lines":
        behind += [m for m in progress.missing if m.status == "no COLL line"]
    return top, leaders, sorted(behind, key=lambda r: (r.entered if r.entered is not None else -1, r.rank))


def group_name(progress: GroupProgress) -> str:
    """`process group 0:default_pg`, `communicator 0x3c1f...`: as findings name the group."""
    kind = "communicator" if progress.via in ("coll_lines", "ras") else "process group"
    return f"{kind} {progress.group}"


def position(progress: GroupProgress, n: int | None) -> str:
    """A position as the evidence prints it: NCCL's opCount in hex, PyTorch's sequence numbers in decimal;
    where the opCount stayed 0, the how-manyth COLL line (a count, in decimal)."""
    if n is None:
        return "nothing"
    if progress.via == "coll_lines":
        return f"{'call' if progress.counts_calls else 'opCount'} {position_number(progress, n)}"
    return f"sequence number {n}"


def position_number(progress: GroupProgress, n: int) -> str:
    """The number alone, written as `position` writes it (hex for an opCount)."""
    return f"{n:x}" if progress.via == "coll_lines" and not progress.counts_calls else str(n)


def describe(entry: FlightRecorderEntry) -> str:
    """`all_reduce of [1000] Float`: what a rank called, as the dump says it."""
    sizes = ", ".join("x".join(str(d) for d in shape) for shape in entry.input_sizes) or "no tensors"
    dtypes = "/".join(sorted(set(entry.input_dtypes))) or "?"
    return f"{entry.collective} of [{sizes}] {dtypes}"


def group_label(entry: FlightRecorderEntry) -> str:
    return f"{entry.group}:{entry.group_desc}" if entry.group_desc else entry.group


def flight_recorder_members(dumps: list[FlightRecorderDump], group: str) -> list[int]:
    """The group's global ranks as the dumps' pg_config lists them; else the ranks whose dumps hold
    entries of the group (gloo records the config before the group has a name)."""
    listed = {r for d in dumps for g in d.groups if g.name == group for r in g.ranks}
    holders = {d.rank for d in dumps if d.rank is not None and any(e.group == group for e in d.entries)}
    return sorted(listed | holders)


def collectives_by_rank(dumps: list[FlightRecorderDump], group: str) -> dict[int, dict[int, FlightRecorderEntry]]:
    """rank -> sequence number -> the collective it entered there (point-to-point calls aside)."""
    out: dict[int, dict[int, FlightRecorderEntry]] = {}
    for dump in dumps:
        if dump.rank is None:
            continue
        seqs = out.setdefault(dump.rank, {})
        for entry in dump.entries:
            if entry.group == group and not entry.is_p2p and entry.seq is not None and entry.seq > 0:
                known = seqs.get(entry.seq)
                if known is None or (entry.called_at and not known.called_at):  # a rank's pickle and JSON dumps
                    seqs[entry.seq] = entry
    return out


def _flight_recorder(dumps: list[FlightRecorderDump]) -> list[GroupProgress]:
    groups: dict[str, str] = {}
    for dump in dumps:
        for entry in dump.entries:
            groups.setdefault(entry.group, group_label(entry))
    sources = {d.rank: d.source for d in dumps if d.rank is not None}
    out = []
    for group, label in groups.items():
        members = flight_recorder_members(dumps, group)
        by_rank = collectives_by_rank(dumps, group)
        progress = GroupProgress(via="flight_recorder", group=label, size=len(members) or None)
        for rank in members:
            seqs = by_rank.get(rank)
            if rank not in sources:
                progress.missing.append(RankProgress(rank=rank, status="no dump"))
                continue
            if not seqs:
                progress.ranks.append(RankProgress(rank=rank, status="no collective in the dump"))
                continue
            last = seqs[max(seqs)]
            done = [s for s, e in seqs.items() if e.state == "completed"]
            progress.ranks.append(
                RankProgress(
                    rank=rank,
                    entered=last.seq,
                    completed=max(done) if done else None,
                    operation=describe(last),
                    state=last.state or None,
                    evidence=Evidence(source=sources[rank], line=0, text=f"record {last.record_id}: {describe(last)}"),
                )
            )
        out.append(progress)
    return out


def _coll_lines(case: Case) -> list[GroupProgress]:
    by_comm: dict[str, list[CollCalls]] = defaultdict(list)
    for one in case.coll_calls:
        if one.communicator is not None and one.rank is not None:
            by_comm[one.communicator].append(one)
    out = []
    for comm in case.communicators:
        calls = by_comm.get(comm.id)
        if not calls:
            continue
        # the printed opCount advances only where NCCL starts proxy operations (src/proxy.cc): on a host
        # joined by NVLink or PCIe alone it stays 0 on every call (NCCL 2.28 on our own H100 run), and then
        # the number of COLL lines each rank printed is its progress
        advancing = any(c.last_op_count > 0 for c in calls)
        progress = GroupProgress(
            via="coll_lines", group=comm.comm_id or comm.id, size=comm.nranks, counts_calls=not advancing
        )
        seen: set[int] = set()
        for c in sorted(calls, key=lambda c: c.rank or 0):
            if c.rank is None:
                continue
            seen.add(c.rank)
            progress.ranks.append(
                RankProgress(
                    rank=c.rank,
                    host=c.host,
                    pid=c.pid,
                    entered=c.last_op_count if advancing else c.calls,
                    operation=c.last_call,
                    evidence=c.evidence,
                )
            )
        for member in comm.ranks:
            if member.rank not in seen and member.rank >= 0:
                seen.add(member.rank)
                progress.missing.append(
                    RankProgress(
                        rank=member.rank,
                        host=member.host,
                        pid=member.pid,
                        status="no COLL line",
                        evidence=member.evidence,
                    )
                )
        out.append(progress)
    return out


def _watchdog(case: Case) -> list[GroupProgress]:
    groups: dict[str, dict[int, RankProgress]] = defaultdict(dict)
    for event in case.framework:
        if event.rank is None or event.kind not in ("watchdog_status", "watchdog_timeout"):
            continue
        ranks = groups[event.process_group or "default"]
        known = ranks.get(event.rank)
        if known is None:
            known = ranks[event.rank] = RankProgress(rank=event.rank, evidence=event.evidence)
        if event.kind == "watchdog_timeout" and event.seq is not None:
            known.state = "timed out"
            known.operation = f"{event.op_type or 'a collective'} (SeqNum {event.seq})"
            known.entered = max(known.entered or 0, event.seq)
            known.evidence = event.evidence
        if event.last_enqueued is not None:
            known.entered = max(known.entered or 0, event.last_enqueued)
        if event.last_completed is not None:
            known.completed = max(known.completed or 0, event.last_completed)
    sizes = [e.world_size for e in case.framework if e.kind == "pg_options" and e.world_size]
    return [
        GroupProgress(
            via="watchdog",
            group=f"PG {group}",
            size=max(sizes) if sizes and group in ("0", "default") else None,
            ranks=sorted(ranks.values(), key=lambda r: r.rank),
        )
        for group, ranks in groups.items()
        if ranks
    ]


def _ras(case: Case) -> list[GroupProgress]:
    out = []
    for report in case.ras_reports:
        for comm in report.communicators:
            if not comm.ranks and not comm.missing:
                continue
            out.append(
                GroupProgress(
                    via="ras",
                    group=comm.hash or comm.id,
                    size=comm.size,
                    ranks=list(comm.ranks),
                    missing=list(comm.missing),
                    counts_by_collective=True,
                )
            )
    return out


def waiting_report(case: Case) -> list[str]:
    """What a job that went quiet was doing, one line per communicator whose init is incomplete and per group
    with collective progress (where its ranks stand); empty when nothing is under way."""
    lines = []
    for comm in case.communicators:
        expected = comm.nranks or len(comm.ranks)
        complete = [r.rank for r in comm.ranks if r.init_complete]
        if comm.ranks and len(complete) < expected:
            missing = sorted({r.rank for r in comm.ranks} - set(complete))
            never = expected - len(comm.ranks)
            what = f"ranks {number_ranges(missing)} started init and did not complete it" if missing else ""
            if never > 0:
                what += ("; " if what else "") + f"{never} of {expected} ranks never printed init"
            lines.append(f"communicator {comm.id} ({len(complete)}/{expected} through init): {what}")
    for group in case.progress:
        top, leaders, behind = furthest(group)
        if top is None and not group.missing:
            continue
        if top is None:
            line = f"{group_name(group)}: no position known"
        elif group.counts_by_collective:
            line = f"{group_name(group)}: {len(group.ranks)} operation counts listed"
        else:
            line = f"{group_name(group)}: {len(leaders)} ranks at {position(group, top)}"
        if behind and not group.counts_by_collective:
            slowest = position(group, behind[0].entered)
            line += f"; ranks {number_ranges(r.rank for r in behind)} behind (slowest at {slowest})"
        if group.missing:
            line += f"; no data from ranks {number_ranges(m.rank for m in group.missing)}"
        lines.append(f"{line} (from {VIA[group.via]})")
    return lines
