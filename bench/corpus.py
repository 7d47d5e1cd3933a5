"""The real-paste harness: parse and analyze every file of ../shared/corpus against its answer key.

    python bench/corpus.py                       # per-file deviations, then one summary line
    python bench/corpus.py --corpus DIR -v       # every file, also those without deviations
    python bench/corpus.py --json out.json       # the figures, for scripts

Each corpus file `*-dNNN.txt` has an entry in `keys/*.json` written by an NCCL expert: `must`
(codes that must fire), `must_not` (false alarms), `max_severity_ok`, and `facts` (NCCL version,
hosts, lines holding `NCCL INFO`/`NCCL WARN`, nccl-tests tables, GPUs and NICs of a matrix).
Where this project disagrees with an entry after reading the text and NCCL's source, the entry
and the reason are listed in tests/corpus_disagreements.toml; such entries are counted apart.

The pipeline is the product's own: `read_case` (what every command reads with), the rules, and
every renderer a user reaches (text, JSON, Markdown, SARIF, the HTML report). Any exception is
an internal error, the one outcome a user must never see.
"""

from __future__ import annotations

import argparse
import io
import json
import re
import sys
import tempfile
import traceback
from collections.abc import Set
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DEFAULT_CORPUS = REPO.parent / "shared" / "corpus"
DISAGREEMENTS = REPO / "tests" / "corpus_disagreements.toml"
SEVERITY_RANK = {"info": 0, "warning": 1, "error": 2}
BUSBW_TOLERANCE = 0.006  # GB/s: the tables print two decimals
# a line the key counts as an NCCL line: what `grep -c -E 'NCCL (INFO|WARN)'` counts
NCCL_LINE_RE = re.compile(r"NCCL (?:INFO|WARN)")
# Kinds of input that issue 43 teaches (host reports and framework text of forms not read yet): their
# files are read and checked like the others, and their figures counted apart until that issue lands.
LATER_KINDS = ("framework", "smi", "ibstat", "xml", "ras", "dmesg", "lspci", "bugreport")
# ... and forms of other kinds that issue 43 teaches, by a line only that form prints
LATER_FORMS = {"ROCm System Management Interface": "rocm-smi --showtopo", "NVRM: Xid": "kernel log (dmesg)"}


def later_kind(name: str, text: str = "") -> str:
    """Why a file is counted apart until issue 43 lands ("" when it is not)."""
    kind = name.split("-d")[0]
    if kind in LATER_KINDS:
        return f"{kind} (issue 43)"
    form = next((form for marker, form in LATER_FORMS.items() if marker in text), "")
    return f"{form} (issue 43)" if form else ""


@dataclass
class Disagreement:
    file: str
    item: str  # "must RUN004", "must_not NET001", "max_severity_ok", "severity NET002", "root", "facts.hosts" ...
    reason: str


@dataclass
class FileResult:
    name: str
    internal_error: str = ""
    unusable: str = ""  # the exit-2 message a user would see, for a file that holds real content
    nccl_lines_key: int = 0  # lines holding NCCL INFO/WARN, as the key counts them
    nccl_lines: int = 0  # NCCL lines the parser counted
    typed: int = 0  # of those, lines whose every record has a known message family
    untyped: list[str] = field(default_factory=list)
    tests_checked: int = 0
    tests_right: int = 0
    topo_checked: int = 0
    topo_right: int = 0
    kernel_checked: int = 0
    kernel_right: int = 0
    must: list[str] = field(default_factory=list)
    must_hit: list[str] = field(default_factory=list)
    false_alarms: list[str] = field(default_factory=list)
    over_severity: str = ""
    under_severity: str = ""  # must codes fired below the severity the key gives them
    root: list[str] = field(default_factory=list)  # the key's root causes (empty: the key names none)
    root_planned: bool = False  # every root code is one whose rule is still planned
    headline: str = ""  # the code of the first finding (text, JSON and the report start with it)
    evd001: int = 0  # EVD001 findings
    findings: int = 0
    fired: dict[str, str] = field(default_factory=dict)  # code -> highest severity
    deviations: list[str] = field(default_factory=list)
    apart: list[str] = field(default_factory=list)  # deviations covered by a listed disagreement
    planned: list[str] = field(default_factory=list)  # must codes of the catalog that have no rule yet
    later: str = ""  # a kind or form issue 43 teaches: counted apart (later_kind)


@dataclass
class Summary:
    files: int = 0
    internal_errors: int = 0
    unusable: int = 0
    nccl_lines: int = 0
    typed: int = 0
    tests_checked: int = 0
    tests_right: int = 0
    topo_checked: int = 0
    topo_right: int = 0
    kernel_checked: int = 0
    kernel_right: int = 0
    must: int = 0
    must_hit: int = 0
    false_alarms: int = 0
    over_severity: int = 0
    under_severity: int = 0
    roots: int = 0  # files whose key names a root cause that a rule can find
    headline_right: int = 0
    evd001_most: int = 0  # the most EVD001 findings of one file
    findings: int = 0
    facts_wrong: int = 0
    apart: int = 0
    planned: int = 0

    @property
    def typed_ratio(self) -> float:
        return self.typed / self.nccl_lines if self.nccl_lines else 1.0

    @property
    def recall(self) -> float:
        return self.must_hit / self.must if self.must else 1.0

    @property
    def headline_ratio(self) -> float:
        return self.headline_right / self.roots if self.roots else 1.0

    def line(self) -> str:
        return (
            f"corpus: {self.files - self.internal_errors}/{self.files} files without internal error, "
            f"{self.unusable} refused as unusable; "
            f"NCCL lines typed {self.typed}/{self.nccl_lines} ({100 * self.typed_ratio:.1f}%); "
            f"nccl-tests facts right {self.tests_right}/{self.tests_checked}; "
            f"topology facts right {self.topo_right}/{self.topo_checked}; "
            f"kernel log facts right {self.kernel_right}/{self.kernel_checked}; "
            f"must recall {self.must_hit}/{self.must} ({100 * self.recall:.1f}%); "
            f"false alarms {self.false_alarms}; over-severity {self.over_severity}; "
            f"under-severity {self.under_severity}; "
            f"headline right {self.headline_right}/{self.roots} ({100 * self.headline_ratio:.1f}%); "
            f"EVD001 per file at most {self.evd001_most}; "
            f"findings per file {self.findings / max(1, self.files - self.unusable):.1f}; "
            f"other facts wrong {self.facts_wrong}; disagreements counted apart {self.apart}; "
            f"must codes whose rule is still planned {self.planned}"
        )


def load_keys(corpus: Path) -> dict[str, dict[str, Any]]:
    keys: dict[str, dict[str, Any]] = {}
    for path in sorted((corpus / "keys").glob("*.json")):
        keys.update(json.loads(path.read_text(encoding="utf-8")))
    return keys


def load_disagreements(path: Path = DISAGREEMENTS) -> list[Disagreement]:
    if not path.exists():
        return []
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    return [Disagreement(d["file"], d["item"], d["reason"].strip()) for d in data.get("disagreement", [])]


# --------------------------------------------------------------------------------------------
# one file


def check_file(path: Path, key: dict[str, Any], disagreements: list[Disagreement]) -> FileResult:
    from ncclscope.case.read import read_case
    from ncclscope.diagnose.engine import analyze

    result = FileResult(path.name)
    text = path.read_bytes().decode("utf-8", "replace")
    result.later = later_kind(path.name, text)
    result.nccl_lines_key = sum(1 for line in text.splitlines() if NCCL_LINE_RE.search(line))
    listed = {d.item for d in disagreements if d.file == path.name}
    try:
        outcome = read_case([str(path)], jobs=1)
        analysis = analyze(outcome.case)
        _render_everything(analysis)
    except Exception as exc:  # the harness's job is to catch what a user would see as exit 3
        result.internal_error = f"{type(exc).__name__}: {exc} @ {_where(exc)}"
        result.deviations.append(f"internal error: {result.internal_error}")
        return result
    if outcome.unusable:
        result.unusable = "; ".join(outcome.messages) or "unusable"
        result.deviations.append(f"exit 2: {result.unusable}")
    case = analysis.case
    _check_lines(result, case)
    _check_findings(result, key, analysis, listed)
    _check_facts(result, key.get("facts", {}), case, listed)
    return result


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    own = [f for f in frames if "ncclscope" in f.filename] or frames
    last = own[-1] if own else None
    return f"{Path(last.filename).name}:{last.lineno}" if last else "?"


def _render_everything(analysis: Any) -> None:
    """Every output a user can ask for, so that a renderer's crash counts too."""
    from rich.console import Console

    from ncclscope.render import findings as render
    from ncclscope.render.report import write_report

    render.print_text(analysis, Console(file=io.StringIO(), width=120))
    render.to_json(analysis)
    render.to_markdown(analysis)
    render.to_sarif(analysis)
    with tempfile.TemporaryDirectory() as tmp:
        write_report(analysis, Path(tmp) / "report.html")


def _check_lines(result: FileResult, case: Any) -> None:
    source = case.sources[0]
    result.nccl_lines = max(source.nccl_lines, result.nccl_lines_key)
    result.typed = source.recognized
    if source.nccl_lines < result.nccl_lines_key:
        result.deviations.append(
            f"NCCL lines: counted {source.nccl_lines}, the text has {result.nccl_lines_key} lines with NCCL INFO/WARN"
        )
    for u in source.unrecognized:
        result.untyped.append(f"line {u.line}: {u.reason}: {u.text[:110]}")
    if source.unrecognized_count:
        result.deviations.append(f"{source.unrecognized_count} NCCL line(s) not typed")
    if source.framework_unrecognized:
        result.deviations.append(f"{source.framework_unrecognized} framework line(s) about NCCL not understood")


def _check_findings(result: FileResult, key: dict[str, Any], analysis: Any, listed: set[str]) -> None:
    result.findings = len(analysis.findings)
    result.evd001 = sum(f.code == "EVD001" for f in analysis.findings)
    result.headline = analysis.findings[0].code if analysis.findings else ""
    for f in analysis.findings:
        old = result.fired.get(f.code)
        if old is None or SEVERITY_RANK[f.severity] > SEVERITY_RANK[old]:
            result.fired[f.code] = f.severity
    rules = _rule_codes()
    for code in key.get("must", []):
        if code not in rules:
            # a catalog code whose rule a later issue brings (tests/test_analyze.py PLANNED_CODES): a miss
            # of it is that work, counted apart and named, not folded into the recall of the rules
            result.planned.append(code)
            result.deviations.append(f"planned {code} (no rule yet)")
            continue
        if f"must {code}" in listed:
            result.apart.append(f"must {code}")
            continue
        result.must.append(code)
        if code in result.fired:
            result.must_hit.append(code)
        else:
            result.deviations.append(f"missed {code}")
    for code in key.get("must_not", []):
        if code in result.fired:
            if f"must_not {code}" in listed:
                result.apart.append(f"must_not {code}")
                continue
            result.false_alarms.append(code)
            result.deviations.append(f"false alarm {code} ({result.fired[code]})")
    _check_severity(result, key, listed)
    _check_headline(result, key, rules, listed)


def _check_severity(result: FileResult, key: dict[str, Any], listed: set[str]) -> None:
    """Above the file's limit (max_severity_ok), or above or below the severity the key gives a code that
    fired (`severity`; a listed "severity CODE" disagreement puts one apart)."""
    limit = key.get("max_severity_ok", "error")
    given = key.get("severity") or {}
    over: list[str] = []
    worst = [c for c, s in result.fired.items() if SEVERITY_RANK[s] > SEVERITY_RANK[limit]]
    if worst:
        if "max_severity_ok" in listed:
            result.apart.append("max_severity_ok")
        else:
            over += worst
    under = []
    for code, want in given.items():
        if code not in result.fired or code in over or SEVERITY_RANK[result.fired[code]] == SEVERITY_RANK[want]:
            continue
        if f"severity {code}" in listed:
            result.apart.append(f"severity {code}")
        elif SEVERITY_RANK[result.fired[code]] > SEVERITY_RANK[want]:
            over.append(code)
        elif code in result.must:
            under.append(code)
    if over:
        result.over_severity = ", ".join(f"{c} ({result.fired[c]})" for c in sorted(over))
        result.deviations.append(f"over severity (max {limit}, key {given}): {result.over_severity}")
    if under:
        result.under_severity = ", ".join(f"{c} ({result.fired[c]}, key {given[c]})" for c in sorted(under))
        result.deviations.append(f"under severity: {result.under_severity}")


def _check_headline(result: FileResult, key: dict[str, Any], rules: set[str], listed: set[str]) -> None:
    """The first finding must be one the key calls the root cause (where it names one)."""
    root = list(key.get("root") or [])
    if not root:
        return
    result.root = root
    if not any(code in rules for code in root):
        result.root_planned = True  # the root is a code a later issue brings: counted apart
        return
    if result.headline not in root:
        if "root" in listed:
            result.apart.append("root")
            result.root = []
        else:
            result.deviations.append(f"headline {result.headline or 'none'}, key root {', '.join(root)}")


def _rule_codes() -> set[str]:
    from ncclscope.diagnose.rules.catalog import all_rules

    return set(all_rules())


def _check_facts(result: FileResult, facts: dict[str, Any], case: Any, listed: set[str]) -> None:
    def wrong(item: str, message: str) -> None:
        if item in listed:
            result.apart.append(item)
        else:
            result.deviations.append(message)

    version = facts.get("nccl_version")
    # the release is compared (a key may carry the build's "+cudaX.Y", as NCCL's banner prints it, or not)
    if version and not any(v.split("+")[0] == version.split("+")[0] for v in case.nccl_versions):
        wrong("facts.nccl_version", f"NCCL version: want {version}, got {case.nccl_versions}")
    unused = list(case.benchmarks)
    for i, want in enumerate(facts.get("tests") or []):
        result.tests_checked += 1
        item = f"facts.tests[{i}]"
        skip = {field for field in want if f"{item}.{field}" in listed}
        result.apart.extend(f"{item}.{field}" for field in sorted(skip))
        run, problems = _best_run(want, unused, skip)
        if run is not None:
            unused.remove(run)
        if not problems:
            result.tests_right += 1
        else:
            result.deviations.append(f"nccl-tests table {i + 1}: " + "; ".join(problems))
    if "xids" in facts:  # a kernel log: the Xids and GPUs it names, not a matrix
        result.kernel_checked += 1
        problems = _kernel_problems(facts, case)
        if not problems:
            result.kernel_right += 1
        else:
            result.deviations.append("kernel log: " + "; ".join(problems))
    elif facts.get("gpus") is not None or facts.get("nics") is not None:  # (null: the paste does not show them)
        result.topo_checked += 1
        if case.topologies:
            problems = _topology_problems(facts, case.topologies)
        elif case.topology_dumps:
            problems = _dump_problems(facts, case.topology_dumps)
        else:
            problems = _host_gpu_problems(facts, case)
        if not problems:
            result.topo_right += 1
        elif "facts.topology" in listed:
            result.apart.append("facts.topology")
            result.topo_checked -= 1
        else:
            result.deviations.append("topology: " + "; ".join(problems))


def _best_run(want: dict[str, Any], runs: list[Any], skip: set[str]) -> tuple[Any, list[str]]:
    """The run that fits the key's table best (a paste may hold runs the key does not list, such as
    a command that failed before its table), and what it gets wrong."""
    if not runs:
        return None, ["not read"]
    scored = [
        (len(problems), i, run, problems)
        for i, run in enumerate(runs)
        for problems in [_test_problems(want, run, skip)]
    ]
    _, _, run, problems = min(scored, key=lambda item: (item[0], item[1]))
    return run, problems


def _test_problems(want: dict[str, Any], run: Any, skip: Set[str] = frozenset()) -> list[str]:
    want = {k: v for k, v in want.items() if k not in skip}
    problems = []
    rows = [r for r in run.rows]
    if want.get("rows") is not None and len(rows) != want["rows"]:
        problems.append(f"rows {len(rows)} != {want['rows']}")
    if want.get("collective") and run.collective != want["collective"]:
        problems.append(f"collective {run.collective} != {want['collective']}")
    if want.get("nranks") and run.nranks != want["nranks"]:
        problems.append(f"nranks {run.nranks} != {want['nranks']}")
    busbws = [r.out_of_place.busbw for r in rows if r.out_of_place.busbw is not None]
    if want.get("max_busbw_oop") is not None:
        peak = max(busbws, default=None)
        if peak is None or abs(peak - want["max_busbw_oop"]) > BUSBW_TOLERANCE:
            problems.append(f"peak busbw {peak} != {want['max_busbw_oop']}")
    if want.get("max_size") is not None:
        largest = max((r.size for r in rows), default=None)
        if largest != want["max_size"]:
            problems.append(f"largest size {largest} != {want['max_size']}")
    return problems


# the tokens a matrix cell may hold (formats.md C: the legend of every driver generation)
CELL_RE = re.compile(r"^(X|NV\d+|XGMI|PIX|PXB|PHB|NODE|SYS|SOC|PCI|N/A)$")  # XGMI: rocm-smi --showtopo


def _host_gpu_problems(facts: dict[str, Any], case: Any) -> list[str]:
    """Without a matrix, the GPUs a host report lists (nvidia-smi -q, nvlink -s): their count, when it lists any."""
    gpus = max(len({g.bus_id for g in case.smi_gpus}), len({g.index for g in case.nvlink_gpus}))
    if not gpus:
        return ["no matrix read"]
    if "gpus" in facts and gpus != facts["gpus"]:
        return [f"GPUs in the host reports {gpus} != {facts['gpus']}"]
    return []


def _dump_problems(facts: dict[str, Any], dumps: list[Any]) -> list[str]:
    """NCCL's topology XML (NCCL_TOPO_DUMP_FILE, a cloud's NCCL_TOPO_FILE): its GPUs, NICs, NUMA nodes and NIC
    speeds, where the key gives them."""
    got = {
        "gpus": sum(len(d.gpus) for d in dumps),
        "nics": sum(len(d.nets) for d in dumps),
        "numa_nodes": len({c.numa_id for d in dumps for c in d.cpus if c.numa_id is not None and c.numa_id >= 0}),
    }
    problems = [
        f"{name} {got[name]} != {facts[name]}"
        for name in got
        if facts.get(name) is not None and got[name] != facts[name]
    ]
    speeds = sorted({n.speed for d in dumps for n in d.nets if n.speed})
    if facts.get("nic_speeds_mbps") is not None and speeds != sorted(set(facts["nic_speeds_mbps"])):
        problems.append(f"NIC speeds {speeds} != {facts['nic_speeds_mbps']}")
    return problems


def _kernel_problems(facts: dict[str, Any], case: Any) -> list[str]:
    """A kernel log: the Xid codes it holds (an Xid 45's `caused by previous Xid N` names N too) and the GPUs
    named by them (the key writes PCI:0000:9b:00 (GPU4), the model 0000:9b:00.0)."""
    problems = []
    xids = {e.xid for e in case.kernel_events if e.kind == "xid"} | {
        e.caused_by for e in case.kernel_events if e.caused_by is not None
    }
    if xids != set(facts["xids"]):
        problems.append(f"Xids {sorted(x for x in xids if x is not None)} != {sorted(set(facts['xids']))}")
    want = {_bus_digits(g) for g in facts.get("gpus") or []}
    got = {_bus_digits(e.bus_id) for e in case.kernel_events if e.kind in ("xid", "fallen_off_bus") and e.bus_id}
    if want and got != want:
        problems.append(f"GPUs {sorted(got)} != {sorted(want)}")
    return problems


def _bus_digits(text: str) -> str:
    bus = text.split(" (")[0].strip().lower().removeprefix("pci:")
    return bus if "." in bus else f"{bus}.0"


def _topology_problems(facts: dict[str, Any], matrices: list[Any]) -> list[str]:
    if not matrices:
        return ["no matrix read"]
    m = matrices[0]
    problems = []
    if "gpus" in facts and len(m.gpus) != facts["gpus"]:
        problems.append(f"GPUs {len(m.gpus)} != {facts['gpus']}")
    if "nics" in facts and len(m.nics) != facts["nics"]:
        problems.append(f"NICs {len(m.nics)} != {facts['nics']}")
    for a in m.devices:
        if a not in m.links:
            continue  # a paste may hold some rows only (the reader says which are missing)
        row = m.links[a]
        missing = [b for b in m.devices if b not in row]
        odd = [f"{b}={row[b]}" for b in m.devices if b in row and not CELL_RE.match(row[b])]
        if missing:
            problems.append(f"row {a} lacks {', '.join(missing)}")
        if odd:
            problems.append(f"row {a} has odd cells {', '.join(odd)}")
        if row.get(a) not in (None, "X"):
            problems.append(f"{a}->{a} is {row.get(a)}, not X")
    return problems


# --------------------------------------------------------------------------------------------
# the whole corpus


def run_corpus(
    corpus: Path = DEFAULT_CORPUS, disagreements: list[Disagreement] | None = None
) -> tuple[list[FileResult], Summary]:
    keys = load_keys(corpus)
    listed = load_disagreements() if disagreements is None else disagreements
    results = []
    for name in sorted(keys):
        path = corpus / name
        if path.exists():
            results.append(check_file(path, keys[name], listed))
    return results, summarize(results)


def summarize(results: list[FileResult]) -> Summary:
    s = Summary(files=len(results))
    for r in results:
        s.internal_errors += bool(r.internal_error)
        s.unusable += bool(r.unusable)
        s.nccl_lines += r.nccl_lines
        s.typed += r.typed
        s.tests_checked += r.tests_checked
        s.tests_right += r.tests_right
        s.topo_checked += r.topo_checked
        s.topo_right += r.topo_right
        s.kernel_checked += r.kernel_checked
        s.kernel_right += r.kernel_right
        s.must += len(r.must)
        s.must_hit += len(r.must_hit)
        s.false_alarms += len(r.false_alarms)
        s.over_severity += bool(r.over_severity)
        s.under_severity += bool(r.under_severity)
        if r.root and not r.root_planned:
            s.roots += 1
            s.headline_right += r.headline in r.root
        s.evd001_most = max(s.evd001_most, r.evd001)
        s.findings += r.findings
        s.apart += len(r.apart)
        s.planned += len(r.planned)
        s.facts_wrong += sum(d.startswith("NCCL version") for d in r.deviations)
    return s


def kind_of(name: str) -> str:
    """A paste's kind, as its file name begins (nccl-log-d101.txt: nccl-log)."""
    return re.sub(r"-d\d+$", "", name.rsplit(".", 1)[0])


def kind_table(results: list[FileResult]) -> str:
    """The figures per kind of paste (issue 43): files, refused, NCCL lines typed, tables, topology and kernel log
    facts right,
    must recall, false alarms, severity misses and headlines right."""
    rows = [("kind", "files", "refused", "typed", "tables", "topology", "kernel", "recall", "false alarms",
             "severity off", "headline")]  # fmt: skip
    by_kind: dict[str, list[FileResult]] = {}
    for r in results:
        by_kind.setdefault(kind_of(r.name), []).append(r)
    for kind, items in sorted(by_kind.items()):
        s = summarize(items)
        rows.append((
            kind, str(s.files), str(s.unusable), f"{s.typed}/{s.nccl_lines}", f"{s.tests_right}/{s.tests_checked}",
            f"{s.topo_right}/{s.topo_checked}", f"{s.kernel_right}/{s.kernel_checked}", f"{s.must_hit}/{s.must}",
            str(s.false_alarms),
            str(s.over_severity + s.under_severity), f"{s.headline_right}/{s.roots}",
        ))  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("-v", "--verbose", action="store_true", help="list every file and every untyped line")
    parser.add_argument("--json", type=Path, help="also write the per-file results and the summary here")
    args = parser.parse_args(argv)
    if not (args.corpus / "keys").is_dir():
        print(f"no corpus at {args.corpus} (expected keys/*.json beside the pastes)", file=sys.stderr)
        return 2
    sys.path.insert(0, str(REPO))
    results, summary = run_corpus(args.corpus)
    for r in results:
        if not r.deviations and not args.verbose:
            continue
        fired = " ".join(f"{c}:{s[0]}" for c, s in sorted(r.fired.items()))
        print(f"{r.name}: fired [{fired}]")
        for d in r.deviations:
            print(f"  - {d}")
        if args.verbose:
            for u in r.untyped:
                print(f"    {u}")
        for a in r.apart:
            print(f"  ~ {a} (listed disagreement)")
    print(summarize([r for r in results if not r.later]).line())
    later = summarize([r for r in results if r.later])
    forms = ", ".join([*LATER_KINDS, *LATER_FORMS.values()])
    print(f"later kinds and forms ({forms}; issue 43), apart: {later.line()}")
    print()
    print(kind_table(results))
    if args.json:
        payload = {"summary": summary.__dict__, "files": [r.__dict__ for r in results]}
        args.json.write_text(json.dumps(payload, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
