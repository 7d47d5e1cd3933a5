"""The HTML report: one self-contained page (inline CSS, images as data URIs, no script at all).

The page is the template render/templates/report.html; this module works out what each section shows
(plain values: the template escapes every one, so a log line holding `<script>` shows as text). The
helpers that compute views of a Case (nearest NIC per GPU, edges grouped by transport) are shared with
the Markdown report.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup

from ncclscope import __version__
from ncclscope.case.device_tree import device_trees
from ncclscope.case.topology import nearest_nics, nic_label
from ncclscope.common.words import human_size, number_ranges
from ncclscope.diagnose.first_failure import ORDERED_BY, Failure, timeline
from ncclscope.model import Analysis, Connection, Evidence, Finding, TopologyMatrix
from ncclscope.render.findings import describe_platform, headline, severity_counts
from ncclscope.render.findings import evidence_shown as capped_evidence
from ncclscope.render.labels import test_only_hosts
from ncclscope.render.plots import Plot
from ncclscope.render.templating import TEMPLATES, render_page
from ncclscope.render.verdict import verdict_lines

EVIDENCE_CAP = 10  # evidence lines shown per finding; the rest are counted
ROWS_CAP = 200  # rows of a long table (hosts, settings, edges, warnings)
SEVERITIES = ("error", "warning", "info")

SECTIONS = [
    ("summary", "Summary"),
    ("findings", "Findings"),
    ("timeline", "Timeline of failures"),
    ("platform", "Platform and expectations"),
    ("hosts", "Versions and hosts"),
    ("settings", "NCCL settings"),
    ("topology", "Topology"),
    ("nics", "GPU to nearest NIC"),
    ("devices", "Device tree"),
    ("transports", "Transports"),
    ("benchmarks", "Benchmarks"),
    ("diff", "Run comparison"),
    ("warnings", "NCCL warnings"),
    ("inputs", "Inputs"),
]


# ------------------------------------------------------------------------------------------
# Views shared with the Markdown report


@dataclass
class DiffRow:
    collective: str
    size: int
    before: float | None
    after: float | None
    ratio: float | None
    regression: bool = False


@dataclass
class DiffView:
    """What a run comparison shows in a report (built by the diff command from its own result)."""

    before: str
    after: str
    threshold: float | None = None
    rows: list[DiffRow] = field(default_factory=list)
    appeared: list[str] = field(default_factory=list)
    disappeared: list[str] = field(default_factory=list)
    plot: Plot | None = None


def token_class(token: str) -> str:
    t = token.strip().upper()
    if t == "X":
        return "t-x"
    if t.startswith("NV"):
        return "t-nv"
    if t in ("SYS", "SOC"):
        return "t-sys"
    if t in ("PIX", "PXB", "PHB", "NODE"):
        return f"t-{t.lower()}"
    return "t-other"


def edge_groups(edges: Iterable[Connection]) -> list[tuple[str, list[Connection]]]:
    """Edges grouped by transport, NET edges split by GPUDirect RDMA; the largest groups first."""
    groups: dict[str, list[Connection]] = {}
    for edge in edges:
        key = edge.transport
        if edge.transport.upper().startswith(("NET", "COLLNET")):
            key += " with GDR" if edge.gdr else " without GDR"
        groups.setdefault(key, []).append(edge)
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def edge_text(edge: Connection) -> str:
    target = "NET" if edge.to_rank < 0 else str(edge.to_rank)
    bits = [f"{edge.from_rank} -> {target}"]
    if edge.direction:
        bits.append(edge.direction)
    if edge.host:
        bits.append(f"on {edge.host}")
    if edge.nic is not None:
        bits.append(f"NIC {edge.nic}")
    if edge.proxy_rank is not None:
        bits.append(f"via proxy rank {edge.proxy_rank}")
    bits.append(f"{edge.channels} line{'s' if edge.channels != 1 else ''}")
    return ", ".join(bits)


def evidence_shown(f: Finding) -> tuple[list[Evidence], int]:
    return capped_evidence(f, EVIDENCE_CAP)


def verdict_class(analysis: Analysis) -> str:
    s = analysis.summary
    return "error" if s.get("error") else "warning" if s.get("warning") else "ok"


def ranks_text(ranks: Sequence[int]) -> str:
    """[0,1,2,3,7] -> '0-3, 7'."""
    return number_ranges(ranks, ", ")


# ------------------------------------------------------------------------------------------
# What each section shows


# the style of every page (the report, the fleet page): one file, inlined into each
CSS = (TEMPLATES / "page.css").read_text(encoding="utf-8")


LEGEND = [
    ("t-x", "X self"),
    ("t-nv", "NV# NVLink"),
    ("t-pix", "PIX one PCIe bridge"),
    ("t-pxb", "PXB several PCIe bridges"),
    ("t-phb", "PHB PCIe host bridge (CPU)"),
    ("t-node", "NODE between host bridges, same NUMA node"),
    ("t-sys", "SYS/SOC across NUMA nodes"),
]


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def evidence_text(lines: Sequence[Evidence], more: int) -> str:
    text = "\n".join(f"{ev.where}: {ev.text}" for ev in lines)
    if more > 0:
        text += f"\n... and {more} more line{'s' if more != 1 else ''}"
    return text


def _summary(analysis: Analysis) -> dict[str, Any]:
    p = analysis.platform
    indexed = list(enumerate(analysis.findings))
    top = [x for x in indexed if x[1].severity == "error"][:8] or [x for x in indexed if x[1].severity == "warning"][:5]
    return {
        "cls": verdict_class(analysis),
        "headline": headline(analysis),
        "verdict": verdict_lines(analysis) if analysis.findings else [],
        "badges": severity_counts(analysis),
        "platform": describe_platform(analysis) if p.key or p.gpu_model else None,
        "top": top,
        "verdicts": [j.verdict for j in analysis.bandwidth],
    }


def _findings(analysis: Analysis) -> list[tuple[str, list[tuple[int, Finding]]]]:
    groups = []
    for sev in SEVERITIES:
        items = [(i, f) for i, f in enumerate(analysis.findings) if f.severity == sev]
        if items:
            groups.append((sev.capitalize(), items))
    return groups


def _platform(analysis: Analysis) -> dict[str, Any]:
    p = analysis.platform
    rows = [
        ("GPU model", p.gpu_model),
        ("GPU name", p.gpu_name),
        ("GPUs per host", p.gpus_per_host),
        ("hosts", p.hosts),
        ("NVLink links per GPU pair", f"NV{p.nvlink_links}" if p.nvlink_links else None),
        ("NVSwitch", {True: "yes", False: "no"}.get(p.nvswitch) if p.nvswitch is not None else None),
        ("NIC link layers", ", ".join(p.nic_link_layers)),
        ("network", p.network),
        ("expectations entry", p.key),
    ]
    judged = [
        (
            f"{j.source}:{j.line}",
            j.collective,
            j.nranks or "-",
            human_size(j.size),
            f"{j.measured_busbw:g} GB/s",
            f"{j.expected_busbw:g} GB/s" if j.expected_busbw else "-",
            f"{j.ratio:.0%}" if j.ratio is not None else "-",
            j.algorithm or "-",
            j.expectation_source or "-",
        )
        for j in analysis.bandwidth
    ]
    return {
        "rows": [(k, "-" if v in (None, "") else v) for k, v in rows],
        "missing": "; ".join(p.missing) if p.missing else None,
        "evidence": p.evidence[:EVIDENCE_CAP],
        "evidence_more": len(p.evidence) - EVIDENCE_CAP,
        "evidence_count": len(p.evidence),
        "judged": judged,
    }


def _hosts(analysis: Analysis) -> dict[str, Any]:
    c = analysis.case
    rows: list[tuple[str, int, str, str, str, str, str, str, str]] = [
        (
            h.name,
            h.processes,
            ranks_text(h.ranks) or "-",
            ", ".join(h.nccl_versions) or "-",
            ", ".join(str(v) for v in h.cuda_driver_versions) or "-",
            ", ".join(h.networks) or "-",
            ", ".join(h.net_plugins) or "-",
            ", ".join(h.bootstrap_interfaces) or "-",
            h.gdr,
        )
        for h in c.hosts[:ROWS_CAP]
    ]
    tested = test_only_hosts(c)
    rows += [
        (f"{t.name} (nccl-tests: {t.gpus})", t.processes, ranks_text(t.ranks) or "-", "-", "-", "-", "-", "-", "-")
        for t in tested[: max(0, ROWS_CAP - len(rows))]
    ]
    return {
        "nccl": ", ".join(c.nccl_versions) or "-",
        "drivers": ", ".join(str(v) for v in c.cuda_driver_versions) or "-",
        "rows": rows,
        "more": len(c.hosts) + len(tested) - len(rows),
    }


def _settings(analysis: Analysis) -> dict[str, Any]:
    env = analysis.case.env
    rows = [
        {
            "name": s.name,
            "value": s.value,
            "hosts": ", ".join(s.hosts) or "-",
            "processes": s.processes,
            "where": s.evidence.where if s.evidence else "",
            "text": s.evidence.text,
        }
        for s in env[:ROWS_CAP]
    ]
    return {"rows": rows, "more": len(env) - ROWS_CAP}


def _matrix(m: TopologyMatrix) -> dict[str, Any]:
    extra = [("CPU Affinity", m.cpu_affinity), ("NUMA Affinity", m.numa_affinity), ("GPU NUMA ID", m.gpu_numa_id)]
    extra = [(name, values) for name, values in extra if values]
    rows = []
    for dev in m.devices:
        row = m.links.get(dev, {})
        cells = [(token_class(row.get(col, "")), row.get(col, "")) for col in m.devices]
        rows.append((nic_label(m, dev) if dev in m.nics else dev, cells, [values.get(dev, "") for _, values in extra]))
    return {
        "where": f"{m.source}:{m.line}",
        "head": [*m.devices, *(name for name, _ in extra)],
        "rows": rows,
        "problems": "; ".join(m.problems[:10]) if m.problems else None,
    }


def _topology(analysis: Analysis) -> dict[str, Any]:
    return {"legend": LEGEND, "matrices": [_matrix(m) for m in analysis.case.topologies]}


def _nics(analysis: Analysis) -> list[dict[str, Any]]:
    out = []
    for m in analysis.case.topologies:
        if not (m.gpus and m.nics):
            continue
        rows = []
        for gpu, nics, token in nearest_nics(m):
            label = ", ".join(nic_label(m, n) for n in nics) or "-"
            rows.append((gpu, label, token_class(token) if token else "t-other", token or "-"))
        out.append({"where": f"{m.source}:{m.line}", "rows": rows})
    return out


def _transports(analysis: Analysis) -> dict[str, Any]:
    c = analysis.case
    cs = c.connections
    communicators = [
        (
            m.comm_id or m.id,
            m.api or "-",
            m.nranks if m.nranks is not None else "-",
            m.nnodes if m.nnodes is not None else "-",
            f"{m.ranks_completed}/{m.ranks_started}",
            m.channels if m.channels is not None else "-",
            m.nvls_channels if m.nvls_channels is not None else "-",
        )
        for m in c.communicators[:ROWS_CAP]
    ]
    groups = []
    for name, edges in edge_groups(c.edges):
        shown = edges[:50]
        text = "\n".join(edge_text(x) for x in shown)
        if len(edges) > len(shown):
            text += f"\n... and {len(edges) - len(shown)} more"
        groups.append((name, len(edges), text))
    return {
        "communicators": communicators,
        "communicators_more": len(c.communicators) - ROWS_CAP,
        "connections": cs if cs.total else None,
        "by_transport": [
            (t, n, cs.examples[t].text if t in cs.examples else None)
            for t, n in sorted(cs.by_transport.items(), key=lambda kv: -kv[1])
        ],
        "edges_truncated": c.edges_truncated,
        "edge_groups": groups,
    }


def _benchmarks(analysis: Analysis, plots: Sequence[Plot], unplotted: int) -> dict[str, Any]:
    runs = analysis.case.benchmarks
    shown = []
    for index, run in enumerate(runs, start=1):
        mine = [p for p in plots if p.run_index == index]
        if not mine and index > len(runs) - unplotted:
            break
        shown.append(
            {
                "index": index,
                "collective": run.collective or "unknown collective",
                "nranks": run.nranks or "?",
                "where": f"{run.source}:{run.line}",
                "failures": f"; {len(run.failures)} failure lines" if run.failures else "",
                "plots": mine,
            }
        )
    return {"any": bool(runs), "runs": shown, "unplotted": unplotted}


def _diff(diff: DiffView) -> dict[str, Any]:
    rows = [
        (
            r.collective,
            human_size(r.size),
            f"{r.before:g}" if r.before is not None else "-",
            f"{r.after:g}" if r.after is not None else "-",
            f"{r.ratio:.2f}" if r.ratio is not None else "-",
            r.regression,
        )
        for r in diff.rows[:ROWS_CAP]
    ]
    changes = [("Findings that appeared", diff.appeared), ("Findings that disappeared", diff.disappeared)]
    return {
        "before": diff.before,
        "after": diff.after,
        "threshold": f"{diff.threshold:g}" if diff.threshold is not None else None,
        "plot": diff.plot,
        "rows": rows,
        "more": len(diff.rows) - ROWS_CAP,
        "changes": [(title, items) for title, items in changes if items],
    }


def _warnings(analysis: Analysis) -> dict[str, Any]:
    c = analysis.case
    total = max(c.warning_count, len(c.warnings))
    if not c.warnings:
        return {"total": total, "text": None}
    shown = c.warnings[:ROWS_CAP]
    text = "\n".join(f"{w.evidence.source}:{w.evidence.line}: {w.evidence.text}" for w in shown)
    if total - len(shown) > 0:
        text += f"\n... and {total - len(shown)} more"
    return {"total": total, "text": text}


def _timeline(analysis: Analysis) -> dict[str, Any] | None:
    """The first failure and, folded per host, what followed it (diagnose/first_failure.py); None without failures."""
    line = timeline(analysis.case)
    if not line.failures:
        return None

    def row(f: Failure) -> tuple[str, str, str, str]:
        where = f"{f.evidence.source}:{f.evidence.line}" if f.evidence.line else f.evidence.source
        return ((f.time_text or "").strip("[]"), f.process, f.what, where)

    def per_host(failures: list[Failure]) -> list[tuple[str, list[tuple[str, str, str, str]]]]:
        hosts: dict[str, list[tuple[str, str, str, str]]] = {}
        for f in failures[:ROWS_CAP]:
            hosts.setdefault(f.host or "(host not named)", []).append(row(f))
        return list(hosts.items())

    if line.root is not None:
        first = f"{line.root.what} on {line.root.process}"
        first += f" at {line.root.time_text.strip('[]')}" if line.root.time_text else ""
        how = ORDERED_BY.get(line.ordered_by, line.ordered_by)
    elif line.lost_peer:
        seen = f"its host {line.lost_peer_host} shows no failure" if line.lost_peer_host else "its log is not given"
        first = f"on the lost peer {line.lost_peer} ({seen})"
        how = "every failure here is fallout"
    else:
        first, how = None, "nothing orders these failures across hosts: any may be first"
    groups = [
        (f"Any of these may be first ({len(line.candidates)})", per_host(line.candidates), True),
        (f"What followed it ({len(line.cascade)})", per_host(line.cascade), False),
        (f"Later failures of their own ({len(line.later)})", per_host(line.later), False),
    ]
    return {
        "first": first,
        "how": how,
        "root": row(line.root) if line.root is not None else None,
        "groups": [g for g in groups if g[1]],
    }


def _inputs(analysis: Analysis) -> dict[str, Any]:
    rows = [
        (
            s.path,
            " + ".join(s.kinds) or "nothing recognised",
            s.lines,
            s.nccl_lines,
            s.recognized,
            "; ".join(s.problems) or "",
        )
        for s in analysis.case.sources[:ROWS_CAP]
    ]
    return {"rows": rows, "more": len(analysis.case.sources) - ROWS_CAP}


def render_html(
    analysis: Analysis, plots: Sequence[Plot] = (), unplotted: int = 0, diff: DiffView | None = None
) -> str:
    """The whole page as a string."""
    views: dict[str, Any] = {
        "summary": _summary(analysis),
        "findings": _findings(analysis),
        "platform": _platform(analysis),
        "hosts": _hosts(analysis),
        "settings": _settings(analysis),
        "topology": _topology(analysis),
        "nics": _nics(analysis),
        "devices": device_trees(analysis.case),
        "transports": _transports(analysis),
        "benchmarks": _benchmarks(analysis, plots, unplotted),
        "warnings": _warnings(analysis),
        "inputs": _inputs(analysis),
    }
    failures = _timeline(analysis)
    if failures is not None:
        views["timeline"] = failures
    if diff is not None:
        views["diff"] = _diff(diff)
    return render_page(
        "report.html",
        title=f"ncclscope report: {headline(analysis)}",
        css=Markup(CSS),
        version=__version__,
        inputs=len(analysis.case.sources),
        sections=[(sid, title) for sid, title in SECTIONS if sid in views],
        views=views,
        evidence_shown=evidence_shown,
        evidence_text=evidence_text,
        data_uri=data_uri,
    )


def strip_tags(text: str) -> str:
    """Visible text of a fragment (for tests and plain previews)."""
    return html.unescape(re.sub(r"<[^>]+>", "", text))
