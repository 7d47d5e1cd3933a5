"""rccl-tests' results file (`-x/--output_file`, `-X/--rccl_output_file` in newer builds): a JSON array, or one
object per line, of measurements: `name` (the collective, `AllReduce` or `allreduce`), `size` (bytes), `type`,
`redop`, `inPlace` (0 or 1), `time` (us), `algBw` and `busBw` (GB/s), `wrong` or `#wrong` (the wrong-element
count, or "N/A" when not checked), `numCycle` (the cycle of `-N`), and on multi-node runs `nodes`, `ranks`,
`ranksPerNode`, `gpusPerRank`.

Each collective and cycle becomes one benchmark run whose rows pair the out-of-place and in-place measurements
of a size, as a table of nccl-tests' text would.

Sources: the rccl-tests result schema of ROCm's cluster validation suite (ROCm/cvs cvs/schema/rccl.py: its fields,
"N/A" in `wrong`, lower-case collective names); nccl-tests' -J output (C.7) for the reading of a truncated file.
"""

from __future__ import annotations

import json
import re

from ncclscope.model import BenchmarkRow, BenchmarkRun, Evidence, Measurement
from ncclscope.parse.nccl_tests import _float, _infer, _int, _load_json, match_lines
from ncclscope.parse.nccl_tests_infer import TYPE_SIZES

# rccl-tests' collective names (any case, `_`/`-` dropped) -> the test names nccl-tests' programs carry
COLLECTIVES = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "reducescatter": "reduce_scatter",
    "alltoall": "alltoall",
    "alltoallv": "alltoallv",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "gather": "gather",
    "scatter": "scatter",
    "sendrecv": "sendrecv",
}
MEASUREMENT_KEYS = ("busBw", "algBw", "inPlace")  # what every measurement holds
_OBJECT_START = re.compile(r"\{")  # the objects of the array are flat: one brace each


def parse_rccl_tests_json(text: str, source: str) -> tuple[list[BenchmarkRun], int] | None:
    """The runs of a results file, and how many of its objects were not measurements; None when the text is not
    rccl-tests' results. Never raises."""
    try:
        items = _objects(text)
    except (ValueError, TypeError, RecursionError):
        return None
    by_run: dict[tuple[str, int | None], list[tuple[dict, int]]] = {}
    for item, line in items:
        if _is_measurement(item):
            by_run.setdefault((_collective(item.get("name")), _int(item.get("numCycle"))), []).append((item, line))
    if not by_run:
        return None
    lines = text.splitlines()  # each run's first line is its evidence
    runs = [_run(collective, found, lines, source) for (collective, _), found in by_run.items()]
    return runs, len(items) - sum(len(found) for found in by_run.values())


def _objects(text: str) -> list[tuple[dict, int]]:
    """The objects of a JSON array (a file cut short is closed after its last whole object), or of JSON lines,
    each with the line it starts on."""
    try:
        data = _load_json(text)
    except ValueError:  # JSON lines: several documents
        data = None
    if isinstance(data, dict):
        data = [data]
    if isinstance(data, list):
        items = [item for item in data if isinstance(item, dict)]
        return list(zip(items, match_lines(text, _OBJECT_START, len(items)), strict=True))
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        body = line.strip().rstrip(",")
        if body.startswith("{"):
            try:
                item = json.loads(body)
            except ValueError:
                item = {}  # cut short: counted with the objects that are no measurement
            found.append((item if isinstance(item, dict) else {}, number))
    return found


def _is_measurement(item: dict) -> bool:
    return all(key in item for key in MEASUREMENT_KEYS) and _int(item.get("size")) is not None


def _collective(name: object) -> str:
    key = str(name or "").lower().replace("_", "").replace("-", "")
    return COLLECTIVES.get(key, str(name or ""))


def _wrong(item: dict) -> float | None:
    """The wrong-element count; "N/A" (not checked) is none."""
    return _float(item.get("wrong", item.get("#wrong")))


def _measurement(item: dict) -> Measurement:
    return Measurement(
        time_us=_float(item.get("time")),
        algbw=_float(item.get("algBw")),
        busbw=_float(item.get("busBw")),
        wrong=_wrong(item),
    )


def _run(collective: str, found: list[tuple[dict, int]], lines: list[str], source: str) -> BenchmarkRun:
    rows: dict[tuple[int, str, str, int], BenchmarkRow] = {}
    for item, line in found:
        size = _int(item.get("size")) or 0
        dtype, redop = str(item.get("type", "")), str(item.get("redop", "") or "")
        root = _int(item.get("root"))
        key = (size, dtype, redop, -1 if root is None else root)
        row = rows.get(key)
        if row is None:
            type_size = TYPE_SIZES.get(dtype)
            row = rows[key] = BenchmarkRow(
                size=size,
                count=size // type_size if type_size else 0,
                type=dtype,
                redop=redop,
                root=key[3],
                out_of_place=Measurement(),
                in_place=Measurement(),
                line=line,
            )
        if _int(item.get("inPlace")) == 1:
            row.in_place = _measurement(item)
        else:
            row.out_of_place = _measurement(item)
    first_item, first_line = found[0]
    sizes = [row.size for row in rows.values()]
    run = BenchmarkRun(
        source=source,
        line=first_line,
        collective=collective or None,
        nranks=_int(first_item.get("ranks")),
        min_bytes=min(sizes) if sizes else None,
        max_bytes=max(sizes) if sizes else None,
        layout="rccl-tests json",
        rows=list(rows.values()),
        evidence=Evidence(source=source, line=first_line, text=lines[first_line - 1][:300]),
    )
    _infer(run, ["redop", "root"] if "root" in first_item else ["redop"])  # the rank count from busBw / algBw
    return run
