"""The HTML report: one self-contained page (inline CSS, images as data URIs, no script at all).

Every piece of text that comes from the inputs (log lines, host names, paths, values) goes through
`html.escape`, so a log line holding `<script>` shows as text. The helpers that compute views of a
Case (nearest NIC per GPU, edges grouped by transport) are shared with the Markdown report.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ncclscope import __version__
from ncclscope.case.device_tree import TreeNode, device_trees
from ncclscope.case.topology import nearest_nics, nic_label
from ncclscope.common.words import human_size, number_ranges
from ncclscope.model import Analysis, Connection, Evidence, Finding, TopologyMatrix
from ncclscope.render.findings import describe_platform, headline
from ncclscope.render.findings import evidence_shown as capped_evidence
from ncclscope.render.plots import Plot

EVIDENCE_CAP = 10  # evidence lines shown per finding; the rest are counted
ROWS_CAP = 200  # rows of a long table (hosts, settings, edges, warnings)
SEVERITIES = ("error", "warning", "info")
ROOT_NOTE = " <em>(root cause)</em>"

SECTIONS = [
    ("summary", "Summary"),
    ("findings", "Findings"),
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
# HTML building


def e(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


CSS = """
:root { --err:#b42318; --warn:#b54708; --info:#175cd3; --ok:#067647; --line:#d0d5dd; --bg2:#f5f7fa; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color:#101828;
       margin: 0 auto; max-width: 1180px; padding: 16px 24px 48px; }
h1 { font-size: 22px; margin: 8px 0 4px; } h2 { font-size: 18px; border-bottom: 2px solid var(--line);
     padding-bottom: 4px; margin-top: 28px; } h3 { font-size: 15px; margin: 18px 0 6px; }
h4 { font-size: 14px; margin: 0 0 4px; }
nav { font-size: 13px; margin: 6px 0 12px; } nav a { margin-right: 10px; }
.meta, .muted { color:#667085; font-size: 12px; }
section { margin-bottom: 12px; }
table { border-collapse: collapse; margin: 6px 0 10px; font-size: 13px; }
th, td { border: 1px solid var(--line); padding: 3px 7px; text-align: left; vertical-align: top; }
th { background: var(--bg2); }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
pre, code { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, monospace; font-size: 12px; }
pre { background: var(--bg2); padding: 6px 8px; overflow-x: auto; white-space: pre-wrap;
      word-break: break-all; margin: 4px 0; }
.verdict { border-left: 6px solid var(--ok); background: #ecfdf3; padding: 10px 14px; margin: 10px 0; }
.verdict.error { border-color: var(--err); background: #fef3f2; }
.verdict.warning { border-color: var(--warn); background: #fffaeb; }
.verdict p { margin: 4px 0; } .verdict .big { font-size: 17px; font-weight: 600; }
.badge { display: inline-block; border-radius: 4px; padding: 0 6px; font-size: 11px; font-weight: 700;
         color: #fff; background: #667085; vertical-align: 1px; }
.badge.error { background: var(--err); } .badge.warning { background: var(--warn); }
.badge.info { background: var(--info); } .badge.ok { background: var(--ok); }
.finding { border: 1px solid var(--line); border-left: 5px solid #667085; border-radius: 4px;
           padding: 8px 12px; margin: 8px 0; page-break-inside: avoid; break-inside: avoid; }
.finding.error { border-left-color: var(--err); } .finding.warning { border-left-color: var(--warn); }
.finding.info { border-left-color: var(--info); }
.finding p { margin: 4px 0; }
details summary { cursor: pointer; color: #344054; font-size: 13px; }
.scroll { overflow-x: auto; max-width: 100%; }
table.matrix td, table.matrix th { text-align: center; padding: 2px 5px; font-family: ui-monospace, monospace;
    font-size: 12px; white-space: nowrap; }
.t-x { background: #e4e7ec; color: #475467; } .t-nv { background: #abefc6; }
.t-pix { background: #d1e9ff; } .t-pxb { background: #b2ddff; } .t-phb { background: #fef0c7; }
.t-node { background: #fedf89; } .t-sys { background: #fecdca; } .t-other { background: #fff; }
.legend span { display: inline-block; padding: 1px 6px; margin: 2px 4px 2px 0; border: 1px solid var(--line);
    font-size: 12px; }
figure { margin: 10px 0; page-break-inside: avoid; break-inside: avoid; }
figure img { max-width: 100%; height: auto; border: 1px solid var(--line); }
figcaption { font-size: 12px; color: #475467; }
.plots { display: flex; flex-wrap: wrap; gap: 8px; }
.reg { color: var(--err); font-weight: 600; }
ul.tree, ul.tree ul { list-style: none; margin: 0; padding-left: 18px; border-left: 1px dotted var(--line); }
ul.tree { padding-left: 0; border: 0; font-size: 13px; }
ul.tree .dev { font-weight: 600; } ul.tree .link { font-family: ui-monospace, monospace; font-size: 12px; }
ul.tree li.note { color: #475467; font-size: 12px; }
ul.tree li.state-degraded > .dev, ul.tree li.state-degraded > .link { color: var(--err); }
ul.tree li.state-lowered > .dev, ul.tree li.state-lowered > .link { color: #98a2b3; }
@media print {
  body { max-width: none; padding: 0; font-size: 11px; }
  nav { display: none; }
  h2 { page-break-after: avoid; break-after: avoid; }
  .scroll { overflow: visible; }
  table.matrix td, table.matrix th { font-size: 9px; padding: 1px 2px; }
  details::details-content { content-visibility: visible; display: block; }
  pre { white-space: pre-wrap; }
  a { color: inherit; text-decoration: none; }
  * { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
}
"""


def _table(headers: Sequence[str], rows: Iterable[Sequence[object]], raw: bool = False) -> str:
    """A table; cells are escaped unless raw (then the caller has escaped them)."""
    head = "".join(f"<th>{e(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = "".join(f"<td>{c if raw else e(c)}</td>" for c in row)
        body.append(f"<tr>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _more(count: int, what: str = "rows") -> str:
    return f'<p class="muted">... and {count} more {e(what)}</p>' if count > 0 else ""


def _where(ev: Evidence | None) -> str:
    return ev.where if ev else ""


def _evidence_block(lines: Sequence[Evidence], more: int) -> str:
    text = "\n".join(f"{ev.where}: {ev.text}" for ev in lines)
    if more > 0:
        text += f"\n... and {more} more line{'s' if more != 1 else ''}"
    return f"<pre>{e(text)}</pre>"


def _section(sid: str, title: str, body: str) -> str:
    return f'<section id="{sid}"><h2>{e(title)}</h2>\n{body}\n</section>\n'


def _summary(analysis: Analysis) -> str:
    cls = verdict_class(analysis)
    badges = " ".join(f'<span class="badge {sev}">{analysis.summary.get(sev, 0)} {sev}</span>' for sev in SEVERITIES)
    parts = [f'<div class="verdict {cls}"><p class="big">{e(headline(analysis))}</p><p>{badges}</p>']
    if analysis.platform.key or analysis.platform.gpu_model:
        parts.append(f"<p>Platform: {e(describe_platform(analysis))}</p>")
    indexed = list(enumerate(analysis.findings))
    top = [x for x in indexed if x[1].severity == "error"][:8] or [x for x in indexed if x[1].severity == "warning"][:5]
    if top:
        items = "".join(
            f'<li><a href="#f-{i}">{e(f.code)}</a> {e(f.message)}{ROOT_NOTE if f.root_cause else ""}</li>'
            for i, f in top
        )
        parts.append(f"<ul>{items}</ul>")
    parts.append("</div>")
    if analysis.bandwidth:
        parts.append("<h3>Bandwidth verdicts</h3><ul>")
        parts += [f"<li>{e(j.verdict)}</li>" for j in analysis.bandwidth]
        parts.append("</ul>")
    return "".join(parts)


def _finding(f: Finding, index: int) -> str:
    root = ' <span class="badge">root cause</span>' if f.root_cause else ""
    out = [
        f'<article class="finding {f.severity}" id="f-{index}">',
        f'<h4><span class="badge {f.severity}">{f.severity.upper()}</span> {e(f.code)} {e(f.name)}{root}</h4>',
        f"<p>{e(f.message)}</p>",
    ]
    shown, more = evidence_shown(f)
    if shown:
        total = len(shown) + more
        out.append(
            f"<details><summary>evidence ({total} line{'s' if total != 1 else ''})</summary>"
            f"{_evidence_block(shown, more)}</details>"
        )
    if f.explanation:
        out.append(f"<p><strong>Why:</strong> {e(f.explanation)}</p>")
    if f.fix:
        out.append(f"<p><strong>Fix:</strong> {e(f.fix)}</p>")
    if f.related:
        out.append(f'<p class="muted">related: {e(", ".join(f.related))}</p>')
    if f.sources:
        out.append(f'<p class="muted">sources: {e("; ".join(f.sources))}</p>')
    out.append("</article>")
    return "".join(out)


def _findings(analysis: Analysis) -> str:
    if not analysis.findings:
        return "<p>No findings.</p>"
    parts = []
    for sev in SEVERITIES:
        items = [(i, f) for i, f in enumerate(analysis.findings) if f.severity == sev]
        if items:
            parts.append(f"<h3>{e(sev.capitalize())} ({len(items)})</h3>")
            parts += [_finding(f, i) for i, f in items]
    return "".join(parts)


def _platform(analysis: Analysis) -> str:
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
    parts = [_table(["", "detected"], [(k, "-" if v in (None, "") else v) for k, v in rows])]
    if p.missing:
        parts.append(f"<p>Not identified; would help: {e('; '.join(p.missing))}</p>")
    if p.evidence:
        parts.append(f"<details><summary>evidence ({len(p.evidence)} lines)</summary>")
        parts.append(_evidence_block(p.evidence[:EVIDENCE_CAP], len(p.evidence) - EVIDENCE_CAP) + "</details>")
    if analysis.bandwidth:
        parts.append("<h3>Expectations used</h3>")
        parts.append(
            _table(
                ["run", "collective", "ranks", "size", "measured busbw", "expected", "ratio", "algorithm", "source"],
                [
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
                ],
            )
        )
    else:
        parts.append("<p>No benchmark was judged against an expectation.</p>")
    return "".join(parts)


def _hosts(analysis: Analysis) -> str:
    c = analysis.case
    parts = [
        f"<p>NCCL versions: {e(', '.join(c.nccl_versions) or '-')}; CUDA driver versions: "
        f"{e(', '.join(str(v) for v in c.cuda_driver_versions) or '-')}</p>"
    ]
    if c.hosts:
        rows = [
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
        headers = ["host", "processes", "ranks", "NCCL", "CUDA driver", "network", "net plugin", "bootstrap", "GDR"]
        parts.append(_table(headers, rows))
        parts.append(_more(len(c.hosts) - ROWS_CAP, "hosts"))
    else:
        parts.append("<p>No host named in the inputs.</p>")
    return "".join(parts)


def _settings(analysis: Analysis) -> str:
    env = analysis.case.env
    if not env:
        return "<p>No NCCL variable reported as set by the environment.</p>"
    rows = [
        (
            e(s.name),
            f"<code>{e(s.value)}</code>",
            e(", ".join(s.hosts) or "-"),
            str(s.processes),
            f'<span class="muted">{e(_where(s.evidence))}</span><br><code>{e(s.evidence.text)}</code>',
        )
        for s in env[:ROWS_CAP]
    ]
    return _table(["variable", "value", "hosts", "processes", "where it came from"], rows, raw=True) + _more(
        len(env) - ROWS_CAP, "settings"
    )


def _matrix(m: TopologyMatrix) -> str:
    head = "".join(f"<th>{e(d)}</th>" for d in m.devices)
    extra = [("CPU Affinity", m.cpu_affinity), ("NUMA Affinity", m.numa_affinity), ("GPU NUMA ID", m.gpu_numa_id)]
    extra = [(name, values) for name, values in extra if values]
    head += "".join(f"<th>{e(name)}</th>" for name, _ in extra)
    body = []
    for dev in m.devices:
        row = m.links.get(dev, {})
        cells = "".join(f'<td class="{token_class(row.get(col, ""))}">{e(row.get(col, ""))}</td>' for col in m.devices)
        cells += "".join(f"<td>{e(values.get(dev, ''))}</td>" for _, values in extra)
        body.append(f"<tr><th>{e(nic_label(m, dev) if dev in m.nics else dev)}</th>{cells}</tr>")
    return (
        f'<div class="scroll"><table class="matrix"><thead><tr><th></th>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


LEGEND = [
    ("t-x", "X self"),
    ("t-nv", "NV# NVLink"),
    ("t-pix", "PIX one PCIe bridge"),
    ("t-pxb", "PXB several PCIe bridges"),
    ("t-phb", "PHB PCIe host bridge (CPU)"),
    ("t-node", "NODE between host bridges, same NUMA node"),
    ("t-sys", "SYS/SOC across NUMA nodes"),
]


def _topology(analysis: Analysis) -> str:
    mats = analysis.case.topologies
    if not mats:
        return "<p>No <code>nvidia-smi topo -m</code> matrix in the inputs.</p>"
    parts = ['<p class="legend">' + "".join(f'<span class="{c}">{e(t)}</span>' for c, t in LEGEND) + "</p>"]
    for m in mats:
        parts.append(f"<h3>{e(m.source)}:{m.line}</h3>")
        parts.append(_matrix(m))
        if m.problems:
            parts.append(f'<p class="muted">not read: {e("; ".join(m.problems[:10]))}</p>')
    return "".join(parts)


def _device_node(node: TreeNode) -> str:
    link = f' <span class="link">{e(node.link)}</span>' if node.link else ""
    state = f' <span class="badge {"error" if node.state == "degraded" else ""}">{e(node.state)}</span>'
    head = f'<span class="dev {node.kind}">{e(node.label)}</span>{link}{state if node.state != "ok" else ""}'
    notes = "".join(f'<li class="note">{e(note)}</li>' for note in node.notes)
    children = "".join(_device_node(child) for child in node.children)
    inner = f"<ul>{notes}{children}</ul>" if notes or children else ""
    return f'<li class="state-{node.state}">{head}{inner}</li>'


def _devices(analysis: Analysis) -> str:
    """Each host's device tree (device_tree.py): degraded links in red, NCCL's NIC <-> GPU paths."""
    trees = device_trees(analysis.case)
    if not trees:
        return (
            "<p>No NCCL topology dump and no host report (<code>nvidia-smi -q</code>, <code>ibstat</code>) in the"
            " inputs: <code>ncclscope run</code> collects them.</p>"
        )
    parts = []
    for tree in trees:
        bad = len(tree.degraded)
        parts.append(
            f"<h3>{e(tree.host)}" + (f' <span class="badge error">{bad} degraded</span>' if bad else "") + "</h3>"
        )
        parts.append(f'<p class="muted">from {e(", ".join(tree.sources))}</p>')
        parts.append(f'<ul class="tree">{_device_node(tree.root)}</ul>')
        if tree.paths:
            parts.append("<details><summary>NCCL's paths between NICs and GPUs (graph dump)</summary><pre>")
            parts.append(e("\n".join(tree.paths)) + "</pre></details>")
    return "".join(parts)


def _nics(analysis: Analysis) -> str:
    mats = [m for m in analysis.case.topologies if m.gpus and m.nics]
    if not mats:
        return "<p>No matrix with both GPUs and NICs.</p>"
    parts = []
    for m in mats:
        parts.append(f"<h3>{e(m.source)}:{m.line}</h3>")
        rows = []
        for gpu, nics, token in nearest_nics(m):
            label = ", ".join(nic_label(m, n) for n in nics) or "-"
            cls = token_class(token) if token else "t-other"
            rows.append((e(gpu), e(label), f'<span class="{cls}">&nbsp;{e(token or "-")}&nbsp;</span>'))
        parts.append(_table(["GPU", "nearest NIC", "path"], rows, raw=True))
    return "".join(parts)


def _transports(analysis: Analysis) -> str:
    c = analysis.case
    parts = []
    if c.communicators:
        rows = [
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
        parts.append("<h3>Communicators</h3>")
        parts.append(
            _table(["communicator", "API", "ranks", "nodes", "init complete/started", "channels", "NVLS"], rows)
        )
        parts.append(_more(len(c.communicators) - ROWS_CAP, "communicators"))
    cs = c.connections
    if cs.total:
        parts.append(f"<h3>Connection lines by transport ({cs.total} lines)</h3>")
        rows2 = [
            (e(t), str(n), f"<code>{e(cs.examples[t].text)}</code>" if t in cs.examples else "")
            for t, n in sorted(cs.by_transport.items(), key=lambda kv: -kv[1])
        ]
        parts.append(_table(["transport", "lines", "first line"], rows2, raw=True))
        parts.append(
            f"<p>NET connection lines with GPUDirect RDMA: {cs.net_with_gdr}; without: {cs.net_without_gdr}; "
            f"through a PXN proxy: {cs.via_proxy}.</p>"
        )
    if c.edges:
        parts.append("<h3>Edges by transport</h3>")
        if c.edges_truncated:
            parts.append('<p class="muted">The edge list was capped while reading; counts above are complete.</p>')
        for name, edges in edge_groups(c.edges):
            shown = edges[:50]
            text = "\n".join(edge_text(x) for x in shown)
            if len(edges) > len(shown):
                text += f"\n... and {len(edges) - len(shown)} more"
            parts.append(
                f"<details><summary>{e(name)}: {len(edges)} edge{'s' if len(edges) != 1 else ''}</summary>"
                f"<pre>{e(text)}</pre></details>"
            )
    return "".join(parts) or "<p>No connection lines in the inputs.</p>"


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _figure(p: Plot) -> str:
    return (
        f'<figure><img src="{data_uri(p.png)}" alt="{e(p.alt)}" width="750">'
        f"<figcaption>{e(p.title)}</figcaption></figure>"
    )


def _benchmarks(analysis: Analysis, plots: Sequence[Plot], unplotted: int) -> str:
    runs = analysis.case.benchmarks
    if not runs:
        return "<p>No nccl-tests output in the inputs.</p>"
    parts = []
    for index, run in enumerate(runs, start=1):
        mine = [p for p in plots if p.run_index == index]
        if not mine and index > len(runs) - unplotted:
            break
        failures = f"; {len(run.failures)} failure lines" if run.failures else ""
        parts.append(
            f"<h3>Run {index}: {e(run.collective or 'unknown collective')}, {e(run.nranks or '?')} ranks "
            f'<span class="muted">{e(run.source)}:{run.line}{e(failures)}</span></h3>'
        )
        if mine:
            parts.append('<div class="plots">' + "".join(_figure(p) for p in mine) + "</div>")
        else:
            parts.append("<p>No row with a bandwidth to plot.</p>")
    if unplotted:
        parts.append(_more(unplotted, "runs not plotted"))
    return "".join(parts)


def _diff(diff: DiffView) -> str:
    parts = [f"<p>Before: <code>{e(diff.before)}</code>; after: <code>{e(diff.after)}</code>"]
    if diff.threshold is not None:
        parts.append(f"; regression when after/before &lt; {e(f'{diff.threshold:g}')}")
    parts.append("</p>")
    if diff.plot is not None:
        parts.append(_figure(diff.plot))
    if diff.rows:
        rows = []
        for r in diff.rows[:ROWS_CAP]:
            ratio = f"{r.ratio:.2f}" if r.ratio is not None else "-"
            rows.append(
                (
                    e(r.collective),
                    e(human_size(r.size)),
                    e(f"{r.before:g}" if r.before is not None else "-"),
                    e(f"{r.after:g}" if r.after is not None else "-"),
                    f'<span class="reg">{ratio} regression</span>' if r.regression else ratio,
                )
            )
        parts.append(_table(["collective", "size", "busbw before", "busbw after", "after/before"], rows, raw=True))
        parts.append(_more(len(diff.rows) - ROWS_CAP))
    for title, items in (("Findings that appeared", diff.appeared), ("Findings that disappeared", diff.disappeared)):
        if items:
            parts.append(f"<h3>{e(title)}</h3><ul>" + "".join(f"<li>{e(x)}</li>" for x in items) + "</ul>")
    return "".join(parts)


def _warnings(analysis: Analysis) -> str:
    c = analysis.case
    if not c.warnings:
        return "<p>No NCCL WARN line.</p>"
    shown = c.warnings[:ROWS_CAP]
    text = "\n".join(f"{w.evidence.source}:{w.evidence.line}: {w.evidence.text}" for w in shown)
    more = max(c.warning_count, len(c.warnings)) - len(shown)
    if more > 0:
        text += f"\n... and {more} more"
    total = max(c.warning_count, len(c.warnings))
    return f"<details><summary>{total} WARN line{'s' if total != 1 else ''}</summary><pre>{e(text)}</pre></details>"


def _inputs(analysis: Analysis) -> str:
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
    out = _table(["input", "holds", "lines", "NCCL lines", "recognised", "problems"], rows)
    return out + _more(len(analysis.case.sources) - ROWS_CAP, "inputs")


def render_html(
    analysis: Analysis, plots: Sequence[Plot] = (), unplotted: int = 0, diff: DiffView | None = None
) -> str:
    """The whole page as a string."""
    bodies = {
        "summary": _summary(analysis),
        "findings": _findings(analysis),
        "platform": _platform(analysis),
        "hosts": _hosts(analysis),
        "settings": _settings(analysis),
        "topology": _topology(analysis),
        "nics": _nics(analysis),
        "devices": _devices(analysis),
        "transports": _transports(analysis),
        "benchmarks": _benchmarks(analysis, plots, unplotted),
        "warnings": _warnings(analysis),
        "inputs": _inputs(analysis),
    }
    if diff is not None:
        bodies["diff"] = _diff(diff)
    sections = [(sid, title) for sid, title in SECTIONS if sid in bodies]
    nav = "".join(f'<a href="#{sid}">{e(title)}</a>' for sid, title in sections)
    body = "".join(_section(sid, title, bodies[sid]) for sid, title in sections)
    title = f"ncclscope report: {headline(analysis)}"
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{e(title)}</title><style>{CSS}</style></head>\n<body>\n"
        f"<header><h1>ncclscope report</h1>"
        f'<p class="meta">ncclscope {e(__version__)}, {len(analysis.case.sources)} input'
        f"{'s' if len(analysis.case.sources) != 1 else ''}</p><nav>{nav}</nav></header>\n"
        f"<main>{body}</main>\n</body></html>\n"
    )


def strip_tags(text: str) -> str:
    """Visible text of a fragment (for tests and plain previews)."""
    return html.unescape(re.sub(r"<[^>]+>", "", text))
