"""`ncclscope fleet`: many hosts' results at once. Which hosts and links are bad, what drifted, what changed.

Every input (a per-node or per-pair nccl-tests output, a run directory, a job's log) is summarised on its
own (`summarize`: a small FileSummary, never a whole Case, so that thousands of files cross process and
machine boundaries cheaply), then the summaries are judged together with pandas (`judge`):

- per host and collective: busbw at the largest size against the platform's expectation (the BW001
  figure, data/expected_busbw.json) and against the fleet's own median. The fleet band is a robust one:
  the modified z-score 0.6745 (x - median) / MAD of Iglewicz and Hoaglin, below -3.5 is outside it.
  A host is `slow` when it is below both its expectation band (under judging.warning_below of the
  expected figure) and the fleet band; where no expectation is known, the fleet band alone decides.
  `failed` when its run failed or its table is empty, `missing` when a host of --hosts has no result,
  `in_job` when only a run of several hosts measured it (one host of a job cannot be told apart),
  `unmeasured` when it appears (log lines) without a benchmark.
- host pairs (runs over exactly two hosts): the same bands over the pairs; a host with at least two
  pairs, all slow, is the culprit; a slow pair of two hosts that are not culprits is a bad link.
- drift: NCCL, CUDA driver, net plugin and firmware versions and NCCL_* settings whose values differ
  across hosts, each value with the hosts that hold it.
- against a baseline (an earlier `fleet --format json`): the change per host and collective, a drop
  beyond the threshold is a regression.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

import pandas as pd
from pydantic import BaseModel, Field

from ncclscope import __version__
from ncclscope.common.words import plural
from ncclscope.model.factories import new_dict, new_list

MODIFIED_Z = 0.6745  # Iglewicz & Hoaglin (1993): z = 0.6745 (x - median) / MAD
OUTLIER_Z = -3.5  # their cut for an outlier, on the slow side only
MAD_FLOOR = 0.01  # of the median: a fleet of near-identical figures must not flag a 1% difference
DEFAULT_THRESHOLD = 0.10
MIN_FLEET = 3  # hosts (or pairs) of a collective before a fleet band means anything
Status = Literal["ok", "slow", "failed", "missing", "in_job", "unmeasured"]
FAIL_ON_CHOICES = ("slow", "failed", "missing", "regression", "drift")
DEFAULT_FAIL_ON = ("slow", "failed", "regression")


# ---------------------------------------------------------------------------------------------
# one input


class RunResult(BaseModel):
    """One benchmark table of an input, at its largest size."""

    hosts: list[str]
    collective: str
    nranks: int | None = None
    size: int | None = Field(None, description="Largest size measured, bytes.")
    busbw: float | None = Field(None, description="Peak busbw at that size (out-of-place or in-place), GB/s.")
    expected: float | None = Field(None, description="What the platform should reach, GB/s (BW001's figure).")
    expected_floor: float | None = Field(
        None, description="Only a lower bound is known (NIC speed or count not in the input): judged by the fleet band."
    )
    failed: bool = False
    failure: str | None = Field(None, description="The failure line, or why the table is empty.")
    line: int = 0


class FileSummary(BaseModel):
    """What one input says about its hosts: enough to judge a fleet, small enough to gather by the thousand."""

    path: str
    hosts: list[str] = Field(default_factory=new_list)
    hosts_from: str = Field("", description="devices, log, manifest or file name: where the host names came from.")
    usable: bool = True
    problems: list[str] = Field(default_factory=new_list)
    runs: list[RunResult] = Field(default_factory=new_list)
    versions: dict[str, dict[str, str]] = Field(
        default_factory=new_dict, description="host -> {nccl, cuda_driver, net_plugin, ib_firmware, gpu_vbios ...}."
    )
    settings: dict[str, dict[str, str]] = Field(default_factory=new_dict, description="host -> {NCCL_*: value}.")


def units(paths: Sequence[str]) -> tuple[list[str], list[str]]:
    """The inputs to summarise one by one (a run directory or a bundle is one; a folder is each file in
    it), and one message per path that cannot be used."""
    from ncclscope.inputs.opening import run_manifest

    found: list[str] = []
    problems: list[str] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir() and run_manifest(path) is None:
            runs = sorted(p.parent for p in path.rglob("manifest.json") if run_manifest(p.parent) is not None)
            members = [
                p
                for p in sorted(path.rglob("*"))
                if p.is_file() and not p.name.startswith(".") and not any(r in p.parents for r in runs)
            ]
            found.extend(str(p) for p in sorted([*runs, *members]))
            if not runs and not members:
                problems.append(f"{raw}: directory holds no files")
        elif path.exists():
            found.append(raw)
        else:
            problems.append(f"{raw}: no such file or directory")
    return found, problems


def summarize(path: str) -> FileSummary:
    """One input read and reduced to its hosts' results, versions and settings."""
    from ncclscope.case.read import read_case
    from ncclscope.diagnose.bandwidth import run_expectation
    from ncclscope.diagnose.platform import detect_platform

    outcome = read_case([path], jobs=1)
    case = outcome.case
    summary = FileSummary(path=path, problems=list(outcome.messages))
    summary.usable = not outcome.unusable
    hosts, summary.hosts_from = _hosts_of(case, path)
    summary.hosts = hosts
    platform = detect_platform(case)
    for run in case.benchmarks:
        run_hosts = list(dict.fromkeys(d.host for d in run.devices)) or hosts
        facts, expectation = run_expectation(case, platform, run)
        result = RunResult(hosts=run_hosts, collective=run.collective or "unknown", nranks=run.nranks, line=run.line)
        if facts is not None:
            result.size, result.busbw = facts.size, facts.measured
        if expectation is not None:
            if expectation.floor:
                result.expected_floor = expectation.busbw
            else:
                result.expected = expectation.busbw
        if run.failures:
            result.failed, result.failure = True, run.failures[0].evidence.text.strip()
        elif result.busbw is None:
            result.failed, result.failure = True, "the table has no rows"
        summary.runs.append(result)
    _versions(case, summary)
    return summary


_HOST_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9.-]*\d[A-Za-z0-9.-]*$")


def _hosts_of(case: Any, path: str) -> tuple[list[str], str]:
    devices = [d.host for run in case.benchmarks for d in run.devices]
    if devices:
        return list(dict.fromkeys(devices)), "devices"
    logged = [p.host for p in case.processes if p.host]
    if logged:
        return list(dict.fromkeys(logged)), "log"
    if case.run is not None and case.run.hosts:
        return list(case.run.hosts), "manifest"
    stem = Path(path).name.split(".txt")[0].split(".log")[0]
    named = [part for part in re.split(r"__|\+|_vs_", stem) if _HOST_NAME.match(part)]
    return (named, "file name") if named else ([], "")


def _versions(case: Any, summary: FileSummary) -> None:
    def put(table: dict[str, dict[str, str]], host: str | None, key: str, value: object) -> None:
        if host and value not in (None, ""):
            table.setdefault(host, {}).setdefault(key, str(value))

    for process in case.processes:
        put(summary.versions, process.host, "nccl", process.nccl_version)
        put(summary.versions, process.host, "cuda_driver", process.cuda_driver_version)
        put(summary.versions, process.host, "net_plugin", process.net_plugin)
    for run in case.benchmarks:
        code = run.nccl_library
        if code:
            for host in dict.fromkeys(d.host for d in run.devices):
                put(summary.versions, host, "nccl", f"{code // 10000}.{code // 100 % 100}.{code % 100}")
    for device in case.ib_devices:
        put(summary.versions, device.host, "ib_firmware", device.firmware)
    for gpu in case.smi_gpus:
        put(summary.versions, gpu.host, "gpu_vbios", gpu.vbios)
        put(summary.versions, gpu.host, "gpu_driver", gpu.driver)
    for setting in case.env:
        if setting.name.startswith("NCCL_"):
            for host in setting.hosts or summary.hosts:
                put(summary.settings, host, setting.name, setting.value)


def summarize_all(
    paths: Sequence[str], jobs: int | None = None, progress: Callable[[int], None] | None = None
) -> list[FileSummary]:
    """Every input summarised, in a process pool (`jobs` processes; one runs them here), in input order.
    `progress` is called with the number of inputs done so far."""
    import os

    workers = max(1, min(jobs or os.cpu_count() or 1, len(paths)))
    if workers == 1:
        out = []
        for n, path in enumerate(paths, 1):
            out.append(_safe_summary(path))
            if progress:
                progress(n)
        return out
    from concurrent.futures import ProcessPoolExecutor

    chunk = max(1, min(64, len(paths) // (workers * 8) or 1))
    with ProcessPoolExecutor(max_workers=workers) as pool:
        out = []
        for n, summary in enumerate(pool.map(_safe_summary, paths, chunksize=chunk), 1):
            out.append(summary)
            if progress:
                progress(n)
    return out


class DaskUnavailable(Exception):
    """--dask was asked for but dask.distributed is not installed or the scheduler cannot be reached."""


def summarize_on_dask(
    paths: Sequence[str], address: str, progress: Callable[[int], None] | None = None
) -> list[FileSummary]:
    """Every input summarised on the Dask cluster at `address`; only the small summaries come back
    (as plain dicts, so the client never unpickles a model class from a worker)."""
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise DaskUnavailable("--dask needs dask.distributed: pip install 'ncclscope[dask]'") from None
    try:
        client = Client(address, timeout="10s")
    except (OSError, TimeoutError, ValueError) as exc:
        raise DaskUnavailable(f"--dask {address}: cannot reach the scheduler ({exc})") from None
    try:
        futures = client.map(_summary_dict, list(paths), pure=False)
        index = {future.key: i for i, future in enumerate(futures)}
        out: list[FileSummary | None] = [None] * len(futures)
        for done, future in enumerate(as_completed(futures), 1):
            out[index[future.key]] = FileSummary.model_validate(future.result())
            if progress:
                progress(done)
        return [s for s in out if s is not None]
    finally:
        client.close()


def _summary_dict(path: str) -> dict[str, Any]:
    return _safe_summary(path).model_dump()


def _safe_summary(path: str) -> FileSummary:
    """A file that breaks the reader is one unusable input, never the end of a fleet's run."""
    try:
        return summarize(path)
    except Exception as exc:  # noqa: BLE001 - reported as this input's problem
        return FileSummary(path=path, usable=False, problems=[f"{path}: could not be read ({type(exc).__name__})"])


# ---------------------------------------------------------------------------------------------
# the fleet


class HostResult(BaseModel):
    """One host and collective (a host without any result: one entry, collective None)."""

    host: str
    status: Status
    collective: str | None = None
    nranks: int | None = None
    size: int | None = None
    busbw: float | None = None
    expected: float | None = None
    expected_band: float | None = Field(None, description="Below this is below the expectation band, GB/s.")
    fleet_median: float | None = None
    fleet_band: float | None = Field(None, description="Below this is outside the fleet band, GB/s.")
    robust_z: float | None = Field(None, description="Modified z-score against the fleet (negative: slower).")
    runs: int = 0
    failed_runs: int = 0
    nccl_version: str | None = None
    detail: str = ""
    sources: list[str] = Field(default_factory=new_list)
    baseline_busbw: float | None = None
    change: float | None = Field(None, description="busbw / baseline busbw - 1.")
    regression: bool = False


class PairResult(BaseModel):
    """One host pair and collective."""

    hosts: list[str]
    status: Literal["ok", "slow", "failed"]
    collective: str
    busbw: float | None = None
    expected: float | None = None
    fleet_median: float | None = None
    fleet_band: float | None = None
    robust_z: float | None = None
    blame: str | None = Field(None, description="host X (a culprit host), link (both hosts fine elsewhere).")
    sources: list[str] = Field(default_factory=new_list)


class PairHost(BaseModel):
    """A host of the pairwise runs: how many of its pairs were slow."""

    host: str
    pairs: int
    slow_pairs: int
    culprit: bool


class DriftValue(BaseModel):
    value: str
    hosts: list[str]


class Drift(BaseModel):
    """A version or setting whose value differs across hosts."""

    item: str = Field(description="nccl, cuda_driver, net_plugin, ib_firmware, gpu_vbios, or an NCCL_* variable.")
    kind: Literal["version", "setting"]
    majority: str
    values: list[DriftValue] = Field(description="Every value, the majority first; '(not set)' for a setting.")


class FleetReport(BaseModel):
    """`ncclscope fleet --format json`: the contract."""

    ncclscope_version: str = __version__
    inputs: int = 0
    unusable: list[str] = Field(default_factory=new_list, description="Inputs that could not be used, with why.")
    unattributed: list[str] = Field(
        default_factory=new_list,
        description="Inputs whose results name no host (no device lines, log or manifest), and what names it.",
    )
    hosts: list[HostResult] = Field(default_factory=new_list)
    pairs: list[PairResult] = Field(default_factory=new_list)
    pair_hosts: list[PairHost] = Field(default_factory=new_list)
    drift: list[Drift] = Field(default_factory=new_list)
    baseline: str | None = None
    threshold: float = DEFAULT_THRESHOLD
    summary: dict[str, int] = Field(default_factory=new_dict, description="Hosts per status; pairs slow; regressions.")

    def problems(self) -> Counter[str]:
        """How many hosts are in each status that can fail a run, regressions and drifted items."""
        counts: Counter[str] = Counter()
        for status in ("slow", "failed", "missing"):
            counts[status] = len({h.host for h in self.hosts if h.status == status})
        counts["regression"] = sum(h.regression for h in self.hosts)
        counts["drift"] = len(self.drift)
        return counts


def results_frame(summaries: Iterable[FileSummary]) -> pd.DataFrame:
    """One row per input and benchmark run."""
    rows = [
        {
            "source": s.path,
            "hosts": tuple(r.hosts),
            "n_hosts": len(r.hosts),
            "collective": r.collective,
            "nranks": r.nranks,
            "size": r.size,
            "busbw": r.busbw,
            "expected": r.expected,
            "failed": r.failed,
            "failure": r.failure,
        }
        for s in summaries
        for r in s.runs
    ]
    columns = ["source", "hosts", "n_hosts", "collective", "nranks", "size", "busbw", "expected", "failed", "failure"]
    df = pd.DataFrame(rows, columns=columns)
    return df.astype({"nranks": "Int64", "size": "Int64", "busbw": "float64", "expected": "float64", "failed": bool})


def _bands(values: pd.Series) -> tuple[float, float, float]:
    """median, MAD (floored), and the lowest value still inside the fleet band."""
    median = float(values.median())
    mad = max(float((values - median).abs().median()), MAD_FLOOR * median)
    return median, mad, median + OUTLIER_Z * mad / MODIFIED_Z


def judge(
    summaries: Sequence[FileSummary],
    expected_hosts: Sequence[str] = (),
    baseline: FleetReport | None = None,
    threshold: float = DEFAULT_THRESHOLD,
) -> FleetReport:
    """The fleet's verdict from every input's summary."""
    from ncclscope.diagnose.expectations import judging

    warning_below = float(judging().warning_below)
    report = FleetReport(inputs=len(summaries), threshold=threshold)
    report.unusable = [p for s in summaries if not s.usable for p in (s.problems or [f"{s.path}: unusable"])]
    summaries, report.unattributed = _confirm_file_name_hosts(summaries, expected_hosts)
    results = results_frame(summaries)
    nodes = results[results.n_hosts == 1].assign(host=lambda d: d.hosts.str[0])
    report.hosts = _host_results(nodes, warning_below)
    seen = {h.host for h in report.hosts}
    versions = _host_versions(summaries)
    for host in dict.fromkeys([*expected_hosts, *(h for s in summaries for h in s.hosts)]):
        if host in seen:
            continue
        job = _job_of(results, host)
        status: Status = "missing" if host in expected_hosts and not _in_any_run(results, host) else "unmeasured"
        detail = "no result for this host" if status == "missing" else "seen in the inputs without its own benchmark"
        if job is not None:  # measured, but together with other hosts: one of them cannot be told apart
            status = "in_job"
            busbw = f", {job.busbw:.1f} GB/s" if pd.notna(job.busbw) else ""
            if job.n_hosts == 2:
                other = next(h for h in job.hosts if h != host)
                detail = f"measured in a pair with {other} ({job.source}{busbw}): see Host pairs"
            else:
                detail = (
                    f"measured in a {job.n_hosts}-host {job.collective or 'run'} ({job.source}{busbw}), not on its"
                    " own: test it alone, or in pairs (ncclscope run --pairs), to tell it apart"
                )
        report.hosts.append(HostResult(host=host, status=status, detail=detail))
    for entry in report.hosts:
        entry.nccl_version = versions.get(entry.host, {}).get("nccl")
    report.pairs, report.pair_hosts = _pair_results(results[results.n_hosts == 2], warning_below)
    report.drift = drift(summaries)
    if baseline is not None:
        _compare(report, baseline, threshold)
    order = {"failed": 0, "slow": 1, "missing": 2, "in_job": 3, "unmeasured": 4, "ok": 5}
    report.hosts.sort(key=lambda h: (order[h.status], not h.regression, h.host, h.collective or ""))
    status_counts = Counter(h.status for h in {h.host: h for h in sorted(report.hosts, key=_worst_last)}.values())
    report.summary = {
        **{s: status_counts.get(s, 0) for s in ("ok", "slow", "failed", "missing", "in_job", "unmeasured")},
        "hosts": len({h.host for h in report.hosts}),
        "pairs": len(report.pairs),
        "slow_pairs": sum(p.status == "slow" for p in report.pairs),
        "regressions": sum(h.regression for h in report.hosts),
        "drift": len(report.drift),
    }
    return report


def _confirm_file_name_hosts(
    summaries: Sequence[FileSummary], expected_hosts: Sequence[str]
) -> tuple[list[FileSummary], list[str]]:
    """A host read from a file's name only (`node-a01.txt`) counts when --hosts or another input names it:
    any name of letters and digits would pass for a host (`nccltests-d302.txt`, `run3.log`). The runs of
    a file whose name names no known host are set apart, each with how to name its host."""
    known = set(expected_hosts) | {h for s in summaries if s.hosts_from != "file name" for h in s.hosts}
    kept: list[FileSummary] = []
    unattributed: list[str] = []
    for s in summaries:
        if s.hosts_from != "file name" or all(h in known for h in s.hosts):
            kept.append(s)
            continue
        guessed = set(s.hosts)
        s = s.model_copy(deep=True)
        s.hosts = [h for h in s.hosts if h in known]
        for run in s.runs:
            run.hosts = [h for h in run.hosts if h not in guessed or h in known]
        kept.append(s)
        if s.runs and not any(run.hosts for run in s.runs):
            unattributed.append(
                f"{s.path}: {plural(len(s.runs), 'result')} without a host name (no device lines, NCCL log or run"
                f" manifest); its file name is taken for the host when --hosts lists {', '.join(sorted(guessed))}"
            )
    return kept, unattributed


def _robust_z(value: float | None, median: float | None, mad: float | None) -> float | None:
    """The modified z-score of `value` in its fleet (None without a value or a fleet band)."""
    if value is None or median is None or not mad:
        return None
    return round(MODIFIED_Z * (value - median) / mad, 2)


def _worst_last(h: HostResult) -> int:
    return {"ok": 0, "in_job": 1, "unmeasured": 1, "missing": 2, "slow": 3, "failed": 4}[h.status]


def _job_of(results: pd.DataFrame, host: str) -> Any:
    """The run of two or more hosts that measured `host` (the latest), or None."""
    if results.empty:
        return None
    jobs = results[(results.n_hosts >= 2) & results.hosts.map(lambda hs: host in hs)]
    return None if jobs.empty else jobs.iloc[-1]


def _in_any_run(results: pd.DataFrame, host: str) -> bool:
    return bool(results.hosts.map(lambda hs: host in hs).any()) if len(results) else False


def _host_results(nodes: pd.DataFrame, warning_below: float) -> list[HostResult]:
    out: list[HostResult] = []
    if nodes.empty:
        return out
    per_host = nodes.groupby(["collective", "host"], sort=True).agg(
        busbw=("busbw", "median"),
        size=("size", "max"),
        nranks=("nranks", "max"),
        expected=("expected", "first"),
        runs=("source", "size"),
        failed_runs=("failed", "sum"),
        failure=("failure", "first"),
        sources=("source", list),
    )
    for collective, group in per_host.groupby(level="collective", sort=True):
        measured = group.busbw.dropna()
        median, mad, band = _bands(measured) if len(measured) >= MIN_FLEET else (None, None, None)
        for (_, host), row in group.iterrows():
            entry = HostResult(
                host=host,
                status="ok",
                collective=collective,
                nranks=_int(row.nranks),
                size=_int(row["size"]),
                busbw=_float(row.busbw),
                expected=_float(row.expected),
                runs=int(row.runs),
                failed_runs=int(row.failed_runs),
                sources=list(row.sources),
                fleet_median=median,
                fleet_band=None if band is None else round(band, 2),
            )
            if entry.expected is not None:
                entry.expected_band = round(entry.expected * warning_below, 2)
            entry.robust_z = _robust_z(entry.busbw, median, mad)
            if entry.failed_runs:
                entry.status = "failed"
                entry.detail = f"{entry.failed_runs} of {entry.runs} runs failed: {_short(row.failure)}"
            elif entry.busbw is not None and band is not None and entry.busbw < band:
                below_expected = entry.expected_band is None or entry.busbw < entry.expected_band
                if below_expected:
                    entry.status = "slow"
                    entry.detail = _slow_detail(entry)
                else:
                    entry.detail = f"below the fleet band ({band:.1f} GB/s) but within its expectation band"
            out.append(entry)
    return out


def _slow_detail(entry: HostResult) -> str:
    assert entry.busbw is not None and entry.fleet_median is not None
    parts = [f"{entry.busbw:.1f} GB/s is {entry.busbw / entry.fleet_median:.0%} of the fleet median"]
    if entry.expected:
        parts.append(f"{entry.busbw / entry.expected:.0%} of the expected {entry.expected:.0f} GB/s")
    return ", ".join(parts)


def _pair_results(pairs: pd.DataFrame, warning_below: float) -> tuple[list[PairResult], list[PairHost]]:
    if pairs.empty:
        return [], []
    pairs = pairs.assign(pair=pairs.hosts.map(lambda hs: tuple(sorted(hs))))
    per_pair = pairs.groupby(["collective", "pair"], sort=True).agg(
        busbw=("busbw", "median"), expected=("expected", "first"), failed=("failed", "any"), sources=("source", list)
    )
    results: list[PairResult] = []
    for collective, group in per_pair.groupby(level="collective", sort=True):
        measured = group.busbw.dropna()
        median, mad, band = _bands(measured) if len(measured) >= MIN_FLEET else (None, None, None)
        for (_, pair), row in group.iterrows():
            busbw, expected = _float(row.busbw), _float(row.expected)
            slow = (
                busbw is not None
                and band is not None
                and busbw < band
                and (expected is None or busbw < expected * warning_below)
            )
            results.append(
                PairResult(
                    hosts=list(pair),
                    status="failed" if row.failed else "slow" if slow else "ok",
                    collective=collective,
                    busbw=busbw,
                    expected=expected,
                    fleet_median=median,
                    fleet_band=None if band is None else round(band, 2),
                    robust_z=_robust_z(busbw, median, mad),
                    sources=list(row.sources),
                )
            )
    table = (
        pd.DataFrame([(h, p.status != "ok") for p in results for h in p.hosts], columns=["host", "bad"])
        .groupby("host")["bad"]
        .agg(pairs="size", slow_pairs="sum")
    )
    culprits = set(table[(table.pairs >= 2) & (table.slow_pairs == table.pairs)].index)
    pair_hosts = [
        PairHost(host=host, pairs=int(row.pairs), slow_pairs=int(row.slow_pairs), culprit=host in culprits)
        for host, row in table.iterrows()
    ]
    for pair in results:
        if pair.status == "ok":
            continue
        blamed = [h for h in pair.hosts if h in culprits]
        pair.blame = f"host {blamed[0]}" if blamed else "link"
    return results, pair_hosts


def _host_versions(summaries: Iterable[FileSummary]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for s in summaries:
        for host, values in s.versions.items():
            for key, value in values.items():
                out.setdefault(host, {}).setdefault(key, value)
    return out


def drift(summaries: Sequence[FileSummary]) -> list[Drift]:
    """Versions and NCCL_* settings whose values differ across hosts (one value per host and item: the first
    input that names it)."""
    rows: list[tuple[str, str, str, str]] = []
    for kind, attribute in (("version", "versions"), ("setting", "settings")):
        for s in summaries:
            for host, values in getattr(s, attribute).items():
                rows.extend((kind, item, host, value) for item, value in values.items())
    table = pd.DataFrame(rows, columns=["kind", "item", "host", "value"]).drop_duplicates(["kind", "item", "host"])
    if table.empty:
        return []
    setting_hosts = sorted(set(table[table.kind == "setting"].host))
    out = []
    for (kind, item), group in table.groupby(["kind", "item"], sort=True):
        by_value = group.groupby("value")["host"].apply(sorted)
        if kind == "setting":
            unset = sorted(set(setting_hosts) - set(group.host))
            if unset:
                by_value["(not set)"] = unset
        if len(by_value) < 2:
            continue
        ordered = sorted(by_value.items(), key=lambda kv: (-len(kv[1]), kv[0]))
        out.append(
            Drift(
                item=str(item),
                kind=kind,
                majority=ordered[0][0],
                values=[DriftValue(value=value, hosts=list(hosts)) for value, hosts in ordered],
            )
        )
    return out


def _compare(report: FleetReport, baseline: FleetReport, threshold: float) -> None:
    report.baseline = "given"
    before = {(h.host, h.collective): h.busbw for h in baseline.hosts if h.busbw is not None}
    for entry in report.hosts:
        old = before.get((entry.host, entry.collective))
        if old is None or entry.busbw is None or not old:
            continue
        entry.baseline_busbw = old
        entry.change = round(entry.busbw / old - 1, 4)
        entry.regression = entry.change < -threshold


def failing(report: FleetReport, fail_on: Sequence[str]) -> list[str]:
    """What in `fail_on` the report holds, e.g. ['2 slow hosts', '1 regression'] (empty: exit 0)."""
    counts = report.problems()
    return [f"{counts[what]} {what}" for what in fail_on if counts.get(what)]


def _short(text: str | None, limit: int = 160) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _int(value: Any) -> int | None:
    return None if pd.isna(value) else int(value)


def _float(value: Any) -> float | None:
    return None if pd.isna(value) else round(float(value), 2)
