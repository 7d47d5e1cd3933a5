"""Which collective a nccl-tests table measured, and over how many ranks, when the output does not say.

A pasted table often lacks the lines that name them (`# Collective test starting`, the binary's
command line, `# Using devices`). The rows still carry the arithmetic of their test
(formats.md C.4, C.5, C.9, from nccl-tests' src/*.cu):
- the columns of an old header (per-test layouts before v2.13) and the redop/root cells;
- size / (count x type size): 1 for tests whose size is one rank's buffer, n for those that print
  the bytes of every rank (all_gather, reduce_scatter, alltoall, gather, scatter);
- busbw / algbw, the bus factor: 2(n-1)/n for all_reduce, (n-1)/n for the per-rank tests, 1 for
  broadcast, reduce, sendrecv and hypercube (and for all_gather/reduce_scatter before v2.9).
Each clue narrows the candidates; a collective or a rank count is set only when one is left, and
the reasons are kept so that the Case says where the value came from.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from ncclscope.model import BenchmarkRow, BenchmarkRun

ALL = frozenset(
    {"all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "gather", "scatter"}
    | {"sendrecv", "hypercube"}
)
PER_RANK_SIZE = frozenset({"all_gather", "reduce_scatter", "alltoall", "gather", "scatter"})  # size = n x count
ONE_RANK_SIZE = frozenset({"all_reduce", "broadcast", "reduce", "sendrecv"})  # size = count
REDUCING = frozenset({"all_reduce", "reduce_scatter", "reduce", "sendrecv"})  # sendrecv prints an op, unused
ROOTED = frozenset({"broadcast", "reduce", "gather", "scatter"})
# tests that check no in-place result: their in-place #wrong cell is N/A while out-of-place is checked
# (nccl-tests src/sendrecv.cu, alltoall.cu, alltoallv.cu: reportErrors = in_place ? 0 : 1)
UNCHECKED_IN_PLACE = frozenset({"sendrecv", "alltoall", "alltoallv"})
FACTOR_ONE = frozenset({"broadcast", "reduce", "sendrecv", "hypercube"})
FACTOR_PER_RANK = PER_RANK_SIZE  # (n-1)/n
OLD_FACTOR_ONE = frozenset({"all_gather", "reduce_scatter"})  # before nccl-tests v2.9.0 (C.9 history)
MAX_RANKS = 1 << 16

# Bytes per element of the type names nccl-tests prints
TYPE_SIZES = {
    "int8": 1, "uint8": 1, "char": 1, "f8e4m3": 1, "f8e5m2": 1,
    "half": 2, "bfloat16": 2,
    "int32": 4, "uint32": 4, "int": 4, "float": 4,
    "int64": 8, "uint64": 8, "double": 8,
}  # fmt: skip

# Header columns of the per-test layouts (C.4) -> the tests that print them
OLD_COLUMNS = {
    ("v1", True, True): frozenset({"reduce"}),
    ("v1", True, False): frozenset({"all_reduce", "reduce_scatter"}),
    ("v1", False, True): frozenset({"broadcast"}),
    ("v1", False, False): frozenset({"all_gather"}),
    ("v2.0-2.11", True, True): frozenset({"reduce"}),
    ("v2.0-2.11", True, False): frozenset({"all_reduce", "reduce_scatter", "alltoall"}),
    ("v2.0-2.11", False, True): frozenset({"broadcast", "gather", "scatter"}),
    ("v2.0-2.11", False, False): frozenset({"all_gather", "sendrecv", "hypercube"}),
}


@dataclass
class Inference:
    collective: str | None = None
    nranks: int | None = None
    reasons: dict[str, str] | None = None


def infer(run: BenchmarkRun, columns: list[str]) -> Inference:
    """What the table's own cells say about its collective and rank count (run.collective and
    run.nranks, when set, are taken as given)."""
    rows = [r for r in run.rows if r.size > 0]
    if not rows:
        return Inference()
    candidates = set(ALL) if run.collective is None else {run.collective}
    clues: list[str] = []

    def narrow(allowed: Iterable[str], clue: str) -> None:
        # clues that contradict each other leave no candidate: the table is not what its cells say
        if not candidates <= set(allowed):
            candidates.intersection_update(allowed)
            clues.append(clue)

    old = run.layout in ("v1", "v2.0-2.11")
    has_redop = "redop" in columns or "op" in columns
    has_root = "root" in columns
    if old:
        narrow(OLD_COLUMNS.get((run.layout, has_redop, has_root), ALL), _columns_clue(has_redop, has_root))
        if len(candidates) == 1 and run.collective is None:
            # the header was printed by the test itself: its columns are those of one test only
            run = run.model_copy(update={"collective": next(iter(candidates))})
            reasons_given = {"collective": "inferred from the header: " + clues[-1] + " is printed by that test only"}
            found = infer(run, columns)
            return Inference(run.collective, found.nranks, {**reasons_given, **(found.reasons or {})})
    redops = {r.redop for r in rows}
    if redops <= {"", "none"}:
        if old and has_redop:
            narrow({"alltoall"}, "its redop cells are empty under a redop column")
        else:
            narrow(ALL - REDUCING, "no reduction operation in the redop column")
    else:
        narrow(REDUCING, f"a reduction operation ({sorted(redops - {'', 'none'})[0]}) in the redop column")
    if not old and has_root:
        if any(r.root >= 0 for r in rows):
            narrow(ROOTED, "a root rank in the root column")
        else:
            narrow(ALL - ROOTED, "root -1 in every row")

    checked = [r for r in rows if r.out_of_place.wrong is not None]  # with -c 0 neither side is checked
    if checked and not old:
        if all(r.in_place.wrong is None for r in checked):
            narrow(UNCHECKED_IN_PLACE, "in-place #wrong N/A where out-of-place is checked")
        else:
            narrow(ALL - UNCHECKED_IN_PLACE, "in-place results checked (#wrong a number)")

    n_given = run.nranks
    per_rank = _size_ratio(rows)
    n_from_size = None
    if per_rank == 1 and n_given != 1:
        narrow(ALL - PER_RANK_SIZE, "size = count x type size")
    elif per_rank is not None and per_rank > 1 and n_given in (None, per_rank):
        narrow(PER_RANK_SIZE, f"size = {per_rank} x count x type size")
        n_from_size = per_rank

    factors = _factor_classes(rows, run.layout, n_given)
    if factors.clue:
        narrow(factors.allowed, factors.clue)

    reasons: dict[str, str] = {}
    collective = run.collective
    if collective is None and len(candidates) == 1:
        collective = next(iter(candidates))
        reasons["collective"] = "inferred from the table: " + "; ".join(clues)
    nranks = n_given
    if nranks is None:
        if n_from_size and (collective is None or collective in PER_RANK_SIZE):
            nranks = n_from_size
            reasons["nranks"] = f"inferred from the table: size = {n_from_size} x count x type size in every row"
        else:
            options = {n for c in candidates for n in factors.ranks.get(_factor_of(c), set())}
            if len(options) == 1:
                nranks = options.pop()
                reasons["nranks"] = (
                    f"inferred from the table: busbw / algbw fits {_factor_text(candidates)} only for {nranks} ranks"
                )
    return Inference(collective, nranks, reasons or None)


def _columns_clue(has_redop: bool, has_root: bool) -> str:
    present = [name for name, there in (("redop", has_redop), ("root", has_root)) if there]
    return f"an old per-test header with {' and '.join(present)}" if present else "an old header without redop or root"


def _size_ratio(rows: list[BenchmarkRow]) -> int | None:
    """size / (count x type size) when every row with a count agrees on one integer."""
    ratios = set()
    for row in rows:
        type_size = TYPE_SIZES.get(row.type)
        if not type_size or row.count <= 0:
            continue
        value = row.size / (row.count * type_size)
        if abs(value - round(value)) > 1e-9:
            return None
        ratios.add(round(value))
    return ratios.pop() if len(ratios) == 1 else None


def _factor_of(collective: str) -> str:
    if collective == "all_reduce":
        return "all_reduce"
    if collective in FACTOR_PER_RANK:
        return "per_rank"
    return "one"


def _factor_text(candidates: set[str]) -> str:
    if candidates == {"all_reduce"}:
        return "2(n-1)/n"
    if candidates <= FACTOR_PER_RANK:
        return "(n-1)/n"
    return "the bus factor"


@dataclass
class _Factors:
    allowed: set[str]
    clue: str
    ranks: dict[str, set[int]]


def _factor_classes(rows: list[BenchmarkRow], layout: str, n_given: int | None) -> _Factors:
    """Which bus factors fit busbw / algbw of every measurement precise enough (for `n_given` ranks
    when known), and for which rank counts."""
    bounds: dict[str, tuple[float, float]] = {"all_reduce": (1.0, MAX_RANKS), "per_rank": (1.0, MAX_RANKS)}
    one_fits = True
    seen = False
    for row in rows:
        for m in (row.out_of_place, row.in_place):
            interval = _ratio_interval(row.size, m.time_us, m.algbw, m.busbw, layout)
            if interval is None:
                continue
            seen = True
            lo, hi = interval
            one_fits = one_fits and lo <= 1.0 <= hi
            for name, factor_max in (("all_reduce", 2.0), ("per_rank", 1.0)):
                a, b = bounds[name]
                # factor_max (n-1)/n in [lo, hi]  <=>  n in [factor_max/(factor_max-lo), factor_max/(factor_max-hi)]
                n_lo = factor_max / (factor_max - lo) if lo < factor_max else math.inf
                n_hi = factor_max / (factor_max - hi) if hi < factor_max else math.inf
                bounds[name] = (max(a, n_lo), min(b, n_hi))
    if not seen:
        return _Factors(set(ALL), "", {})
    ranks = {name: _integers(*b) for name, b in bounds.items()}
    if n_given is not None:  # the device lines may be a cut list: a class that fits other counts stays
        for name, (lo, hi) in bounds.items():
            if lo - 1e-9 <= n_given <= hi + 1e-9:
                ranks[name] = {n_given}
    allowed: set[str] = set()
    texts = []
    if ranks["all_reduce"]:
        allowed.add("all_reduce")
        texts.append("2(n-1)/n")
    if ranks["per_rank"]:
        allowed |= FACTOR_PER_RANK
        texts.append("(n-1)/n")
    if one_fits:
        allowed |= FACTOR_ONE | (OLD_FACTOR_ONE if layout in ("v1", "v2.0-2.11") else set())
        texts.append("1")
    ranks["one"] = set()
    return _Factors(allowed, f"busbw / algbw fits a bus factor of {' or '.join(texts) or 'none'}", ranks)


def _integers(lo: float, hi: float, limit: int = 4) -> set[int]:
    """The integers in [lo, hi] (at most `limit` + 1 of them: many means no information)."""
    if hi < lo or lo > MAX_RANKS:
        return set()
    first = max(1, math.ceil(lo - 1e-9))
    last = min(MAX_RANKS, math.floor(hi + 1e-9)) if hi != math.inf else first + limit
    return set(range(first, min(last, first + limit) + 1))


def _tolerance(value: float) -> float:
    """Half a unit in the last digit of a bandwidth: 2 decimals, fewer as values grow (C.5 getFloatStr)."""
    magnitude = abs(value)
    if magnitude < 1000:
        return 0.005
    if magnitude < 10000:
        return 0.05
    return 0.5 * 10 ** max(0, math.floor(math.log10(magnitude)) - 4)


def _time_tolerance(time_us: float, layout: str) -> float:
    """Half a unit in the last digit of a time: v1 prints ms with 3 decimals; later %7.2f below 100 us,
    %7.1f below 10000, %7.0f above, and from v2.17.3 one significant decimal in scientific form."""
    if layout == "v1":
        return 0.5
    if time_us < 100:
        return 0.005
    if time_us < 10000:
        return 0.05
    if time_us < 1e7:
        return 0.5
    return 0.05 * 10 ** math.floor(math.log10(time_us))


def _ratio_interval(
    size: int, time_us: float | None, algbw: float | None, busbw: float | None, layout: str
) -> tuple[float, float] | None:
    """Bounds of busbw / algbw given the printed precision, or None when too imprecise to tell."""
    if algbw is None or busbw is None or algbw <= 0 or not math.isfinite(algbw) or not math.isfinite(busbw):
        return None
    a_lo, a_hi = algbw - _tolerance(algbw), algbw + _tolerance(algbw)
    if time_us and time_us > 0 and math.isfinite(time_us):
        # algbw = size / time: the time column (printed with more digits) may bound it more tightly
        t_tol = _time_tolerance(time_us, layout)
        t_lo, t_hi = max(time_us - t_tol, 1e-9), time_us + t_tol
        a_lo, a_hi = max(a_lo, size / t_hi / 1e3), min(a_hi, size / t_lo / 1e3)
    if a_lo <= 0 or a_hi < a_lo:
        return None
    lo = (busbw - _tolerance(busbw)) / a_hi
    hi = (busbw + _tolerance(busbw)) / a_lo
    return (lo, hi) if hi - lo < 0.25 else None
