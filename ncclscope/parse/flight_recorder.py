"""PyTorch Flight Recorder dumps: one file per rank, written on a collective timeout
(TORCH_NCCL_DUMP_ON_TIMEOUT / TORCH_FR_DUMP_TEMP_FILE + rank) or by `_dump_fr_trace[_json]`.

The pickle form is read by an unpickler that builds only plain containers and scalars: a dump is a
dict of lists, dicts, tuples, strings and numbers, so any request for a class or function (a pickle's
GLOBAL opcodes, which `__reduce__` exploits use to call e.g. `os.system`) is refused before anything
runs, with one line naming what was asked for. Then the data is checked against the record layout of
PyTorch's FlightRecorder (torch/csrc/distributed/c10d/FlightRecorder*.{hpp,cpp}; the analyzer in
torch/distributed/flight_recorder reads the same keys); what does not fit is counted, not trusted.

The dump does not name its rank: like PyTorch's fr_trace, the rank is the number that ends the file
name (`rank_3`, `nccl_trace_rank_3`, `rank_3.json`).
"""

from __future__ import annotations

import io
import json
import pickle
import re
from pathlib import PurePath
from typing import Any

from ncclscope.model import (
    FlightRecorderDump,
    FlightRecorderEntry,
    FlightRecorderGroup,
    FlightRecorderStatus,
)

MAX_BYTES = 512 * 1024 * 1024  # a 2000-entry dump with stacks is a few MB per rank
ENTRIES_KEEP = 256  # the last entries kept per group and rank (a hang is decided at the end of the buffer)
RANK_RE = re.compile(r"(\d+)(?:\.json|\.pkl|\.pickle)?$")
RANKS_RE = re.compile(r"^\s*[\[(]?\s*(\d+(?:\s*,\s*\d+)*)?\s*,?\s*[\])]?\s*$")


class RefusedPickle(ValueError):
    """The pickle asked for something other than plain data."""


class _PlainDataUnpickler(pickle.Unpickler):
    """Builds dicts, lists, tuples, sets, strings, bytes, numbers, booleans and None; nothing else.
    Every class or callable a pickle can name reaches find_class (GLOBAL, STACK_GLOBAL, INST, the
    copyreg extension codes), and persistent ids reach persistent_load: both refuse."""

    def find_class(self, module: str, name: str) -> Any:
        raise RefusedPickle(f"it asks to load {module}.{name}")

    def persistent_load(self, pid: Any) -> Any:
        raise RefusedPickle("it refers to a persistent object")


def rank_from_name(path: str) -> int | None:
    match = RANK_RE.search(PurePath(path).name)
    return int(match.group(1)) if match else None


def read_dump(data: bytes, form: str, source: str) -> FlightRecorderDump:
    """The dump in `data`; raises ValueError (RefusedPickle included) with a one-line reason."""
    if form == "pickle":
        try:
            raw = _PlainDataUnpickler(io.BytesIO(data)).load()
        except RefusedPickle:
            raise
        except Exception as exc:  # a damaged pickle can raise almost anything; it stays data
            raise ValueError(f"damaged pickle ({type(exc).__name__}: {str(exc)[:80]})") from None
    else:
        try:
            raw = json.loads(data.decode("utf-8", "replace"))
        except ValueError as exc:
            raise ValueError(f"invalid JSON: {exc}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("entries"), list):
        raise ValueError("not a Flight Recorder dump (no list of entries)")
    return _dump(raw, form, source)


def _dump(raw: dict, form: str, source: str) -> FlightRecorderDump:
    dump = FlightRecorderDump(
        source=source,
        rank=rank_from_name(source),
        format=form,  # type: ignore[arg-type]
        version=str(raw.get("version", "")),
        comm_lib_version=_text(raw.get("comm_lib_version")) or None,
    )
    if dump.rank is None:
        dump.problems.append("the file name does not end in the rank number (rank_<N>), so the rank is unknown")
    configs = raw.get("pg_config")
    if isinstance(configs, dict):
        for name, config in configs.items():
            if not isinstance(config, dict):
                continue
            ranks = _ranks(config.get("ranks"))
            if ranks is None:
                dump.problems.append(f"group {name!r}: ranks not understood")
                ranks = []
            dump.groups.append(FlightRecorderGroup(name=str(name), desc=_text(config.get("desc")), ranks=ranks))
    statuses = raw.get("pg_status")
    if isinstance(statuses, dict):
        for group_id, status in statuses.items():
            if isinstance(status, dict):
                dump.status[str(group_id)] = FlightRecorderStatus(
                    last_enqueued=_int(status.get("last_enqueued_collective")),
                    last_started=_int(status.get("last_started_collective")),
                    last_completed=_int(status.get("last_completed_collective")),
                )
    entries = raw["entries"]
    dump.entries_total = len(entries)
    bad = 0
    kept: dict[str, list[FlightRecorderEntry]] = {}
    for item in entries:
        entry = _entry(item) if isinstance(item, dict) else None
        if entry is None:
            bad += 1
            continue
        kept.setdefault(entry.group, []).append(entry)
    if bad:
        dump.problems.append(f"{bad} of {len(entries)} entries not understood")
    for group_entries in kept.values():
        dump.entries.extend(group_entries[-ENTRIES_KEEP:])
    dump.entries.sort(key=lambda e: (e.record_id is None, e.record_id or 0))
    return dump


def _entry(item: dict) -> FlightRecorderEntry | None:
    group = item.get("process_group")
    name = item.get("profiling_name")
    if not isinstance(group, list | tuple) or len(group) != 2 or not isinstance(name, str):
        return None
    backend, _, collective = name.partition(":")
    if not collective:
        backend, collective = "", name
    return FlightRecorderEntry(
        record_id=_int(item.get("record_id")),
        group=_text(group[0]),
        group_desc=_text(group[1]),
        seq=_int(item.get("collective_seq_id")),
        p2p_seq=_int(item.get("p2p_seq_id")),
        is_p2p=item.get("is_p2p") is True,
        collective=collective.strip(),
        backend=backend or None,
        input_sizes=_sizes(item.get("input_sizes")),
        output_sizes=_sizes(item.get("output_sizes")),
        input_dtypes=[_text(d) for d in item.get("input_dtypes") or [] if isinstance(d, str)],
        output_dtypes=[_text(d) for d in item.get("output_dtypes") or [] if isinstance(d, str)],
        state=_text(item.get("state")),
        retired=item.get("retired") if isinstance(item.get("retired"), bool) else None,
        timeout_ms=_int(item.get("timeout_ms")),
        time_created_ns=_int(item.get("time_created_ns")),
        called_at=_called_at(item.get("frames")),
    )


def _called_at(frames: Any) -> str | None:
    """The innermost frame of the user's code: the first whose file is not PyTorch's own."""
    if not isinstance(frames, list):
        return None
    for frame in frames:
        if not isinstance(frame, dict):
            continue
        filename = _text(frame.get("filename"))
        if filename and "/torch/" not in filename and not filename.startswith("<"):
            return f"{filename}:{_int(frame.get('line'))} ({_text(frame.get('name'))})"
    return None


def _sizes(value: Any) -> list[list[int]]:
    if not isinstance(value, list | tuple):
        return []
    return [[d for d in shape if isinstance(d, int)] for shape in value if isinstance(shape, list | tuple)]


def _ranks(value: Any) -> list[int] | None:
    """pg_config ranks: a list, or its text '[0, 1, 2]' (read by pattern, never evaluated)."""
    if isinstance(value, list | tuple):
        return [r for r in value if isinstance(r, int)]
    if isinstance(value, str):
        match = RANKS_RE.match(value)
        if match is None:
            return None
        return [int(r) for r in match.group(1).split(",")] if match.group(1) else []
    return None


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?\d{1,19}", value.strip()):
        return int(value)
    return None


def _text(value: Any) -> str:
    return value[:300] if isinstance(value, str) else ""
