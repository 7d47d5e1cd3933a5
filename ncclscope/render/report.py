"""Reports for support tickets: one self-contained HTML page, or Markdown with PNG plots beside it.

`write_report(analysis, path)` picks the format by the suffix (.html/.htm or .md/.markdown).
Every file is written to a temporary name in the target directory and renamed into place, so an
output that cannot be written leaves no half-written file; the error is a `ReportError` whose text
is one line naming the path.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from ncclscope import __version__
from ncclscope.case.topology import nearest_nics, nic_label
from ncclscope.common import markdown
from ncclscope.common.markdown import cell as _cell
from ncclscope.common.output_files import Replacement, permissions, write_in_place, written_in_place
from ncclscope.common.words import human_size
from ncclscope.model import Analysis
from ncclscope.render.findings import describe_platform, headline
from ncclscope.render.html import (
    EVIDENCE_CAP,
    ROWS_CAP,
    DiffView,
    edge_groups,
    edge_text,
    evidence_shown,
    evidence_text,
    ranks_text,
    render_html,
)
from ncclscope.render.labels import test_only_hosts
from ncclscope.render.plots import Plot, benchmark_plots
from ncclscope.render.verdict import verdict_lines

HTML_SUFFIXES = (".html", ".htm")
MARKDOWN_SUFFIXES = (".md", ".markdown")

__all__ = ["DiffView", "ReportError", "write_report", "write_html_report", "write_markdown_report", "markdown_text"]


class ReportError(Exception):
    """The report could not be written (one line, naming the path)."""


def report_form(path: str | os.PathLike[str], asked: str | None = None) -> str:
    """ "html" or "markdown": the format asked for (--format), else the one the suffix of `path` names; a
    ReportError (one line) when neither says, or they disagree. Checked before any work is done."""
    suffix = Path(path).suffix.lower()
    named = "html" if suffix in HTML_SUFFIXES else "markdown" if suffix in MARKDOWN_SUFFIXES else None
    if asked is not None and named is not None and asked != named:
        raise ReportError(f"{path}: --format {asked} but the name ends in {suffix}")
    form = asked or named
    if form is None:
        raise ReportError(f"{path}: unknown report format {suffix or '(no suffix)'}: use .html or .md, or --format")
    return form


def write_report(
    analysis: Analysis, path: str | os.PathLike[str], diff: DiffView | None = None, form: str | None = None
) -> list[Path]:
    """Write an HTML or Markdown report (`form`, else chosen by the suffix of `path`); returns the files written."""
    if report_form(path, form) == "html":
        return [write_html_report(analysis, path, diff)]
    return write_markdown_report(analysis, path, diff)


def write_html_report(analysis: Analysis, path: str | os.PathLike[str], diff: DiffView | None = None) -> Path:
    target = Path(path)
    plots, unplotted = benchmark_plots(analysis)
    page = render_html(analysis, plots, unplotted, diff)
    _write_all([(target, page.encode("utf-8"))])
    return target


def write_markdown_report(analysis: Analysis, path: str | os.PathLike[str], diff: DiffView | None = None) -> list[Path]:
    """The .md file and its PNG plots, named `<stem>-<plot>.png` beside it; returns every file written."""
    target = Path(path)
    plots, unplotted = benchmark_plots(analysis)
    if diff is not None and diff.plot is not None:
        plots.append(diff.plot)
    names = {p.slug: f"{target.stem}-{p.slug}.png" for p in plots}
    text = markdown_text(analysis, plots, names, unplotted, diff)
    files = [(target.with_name(names[p.slug]), p.png) for p in plots]
    files.append((target, text.encode("utf-8")))
    _write_all(files)
    return [f for f, _ in files]


def _write_all(files: list[tuple[Path, bytes]]) -> None:
    """Write every file to a temporary name beside it, then rename them all (the main file last)."""
    pending: list[Replacement] = []
    try:
        for target, data in files:
            if written_in_place(target):  # /dev/null, a pipe: never renamed over (common/output_files.py)
                write_in_place(target, data)
                continue
            pending.append(Replacement(target, permissions(0o666)))
            pending[-1].handle.write(data)
        for replacement in pending:
            replacement.commit()
    except OSError as exc:
        for replacement in pending:
            try:
                replacement.discard()
            except OSError:
                pass
        reason = exc.strerror or str(exc)
        where = files[-1][0] if files else "report"
        raise ReportError(f"cannot write {where}: {reason}") from exc


# ------------------------------------------------------------------------------------------
# Markdown (fits a GitHub issue comment: tables, <details>, relative image links)


def _md_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    return [*markdown.table(headers, ([_cell(c) for c in row] for row in rows)), ""]


def _fence(text: str) -> list[str]:
    fence = "```"
    while fence in text:
        fence += "`"
    return [fence + "text", text, fence]


def markdown_text(
    analysis: Analysis,
    plots: list[Plot],
    names: dict[str, str],
    unplotted: int = 0,
    diff: DiffView | None = None,
) -> str:
    out = [
        *_md_summary(analysis),
        *_md_findings(analysis),
        *_md_platform(analysis),
        *_md_hosts(analysis),
        *_md_settings(analysis),
        *_md_topologies(analysis),
        *_md_transports(analysis),
        *_md_benchmarks(plots, names, unplotted),
        *(_md_diff(diff) if diff is not None else []),
    ]
    return "\n".join(out).rstrip() + "\n"


def _md_summary(analysis: Analysis) -> list[str]:
    out = [f"## ncclscope {__version__} report: {headline(analysis)}", ""]
    if analysis.findings:
        out += [("> " + line.strip()) for line in verdict_lines(analysis)] + [""]
    if analysis.platform.key or analysis.platform.gpu_model:
        out += [f"**Platform:** {describe_platform(analysis)}", ""]
    for j in analysis.bandwidth:
        out.append(f"- {j.verdict}")
    if analysis.bandwidth:
        out.append("")
    return out


def _md_findings(analysis: Analysis) -> list[str]:
    out = ["### Findings", ""]
    if not analysis.findings:
        return [*out, "No findings.", ""]
    out += _md_table(
        ["severity", "code", "finding"],
        [
            [f.severity, f"{f.code} {f.name}" + (" (root cause)" if f.root_cause else ""), f.message]
            for f in analysis.findings
        ],
    )
    for f in analysis.findings:
        out += [f"#### {f.severity}: {f.code} {f.name}", "", _cell(f.message), ""]
        shown, more = evidence_shown(f)
        if shown:
            out += [f"<details><summary>evidence ({len(shown) + more} lines)</summary>", ""]
            out += _fence(evidence_text(shown, more)) + ["", "</details>", ""]
        if f.explanation:
            out += [f"**Why:** {f.explanation}", ""]
        if f.fix:
            out += [f"**Fix:** {f.fix}", ""]
    return out


def _md_platform(analysis: Analysis) -> list[str]:
    p = analysis.platform
    out = ["### Platform and expectations", ""]
    out += _md_table(
        ["GPU", "GPUs/host", "hosts", "NVLink", "NVSwitch", "network", "expectations entry"],
        [
            [
                p.gpu_name or p.gpu_model,
                p.gpus_per_host,
                p.hosts,
                f"NV{p.nvlink_links}" if p.nvlink_links else None,
                {True: "yes", False: "no"}.get(p.nvswitch) if p.nvswitch is not None else None,
                p.network,
                p.key,
            ]
        ],
    )
    if analysis.bandwidth:
        out += _md_table(
            ["collective", "ranks", "size", "measured", "expected", "ratio", "source"],
            [
                [
                    j.collective,
                    j.nranks,
                    human_size(j.size),
                    f"{j.measured_busbw:g} GB/s",
                    f"{j.expected_busbw:g} GB/s" if j.expected_busbw else None,
                    f"{j.ratio:.0%}" if j.ratio is not None else None,
                    j.expectation_source,
                ]
                for j in analysis.bandwidth
            ],
        )
    return out


def _md_hosts(analysis: Analysis) -> list[str]:
    c = analysis.case
    out = ["### Versions and hosts", "", f"NCCL versions: {', '.join(c.nccl_versions) or '-'}", ""]
    rows = [
        [h.name, h.processes, ranks_text(h.ranks), ", ".join(h.nccl_versions), ", ".join(h.networks), h.gdr]
        for h in c.hosts
    ]
    rows += [
        [f"{t.name} (nccl-tests: {t.gpus})", t.processes, ranks_text(t.ranks), "-", "-", "-"]
        for t in test_only_hosts(c)
    ]
    if rows:
        out += _md_table(["host", "processes", "ranks", "NCCL", "network", "GDR"], rows[:ROWS_CAP])
        if len(rows) > ROWS_CAP:
            out += [f"... and {len(rows) - ROWS_CAP} more hosts", ""]
    else:
        out += ["No host named in the inputs.", ""]
    return out


def _md_settings(analysis: Analysis) -> list[str]:
    env = analysis.case.env
    if not env:
        return []
    rows = [[s.name, s.value, ", ".join(s.hosts), s.processes, f"{s.evidence.source}:{s.evidence.line}"] for s in env]
    return [
        "### NCCL settings",
        "",
        *_md_table(["variable", "value", "hosts", "processes", "where it came from"], rows[:ROWS_CAP]),
    ]


def _md_topologies(analysis: Analysis) -> list[str]:
    out: list[str] = []
    for m in analysis.case.topologies:
        out += [f"### Topology: {_cell(m.source)}:{m.line}", ""]
        out += _md_table(
            [""] + [nic_label(m, d) if d in m.nics else d for d in m.devices],
            [[d] + [m.links.get(d, {}).get(col, "") for col in m.devices] for d in m.devices],
        )
        if m.gpus and m.nics:
            out += _md_table(
                ["GPU", "nearest NIC", "path"],
                [[g, ", ".join(nic_label(m, n) for n in nics), tok] for g, nics, tok in nearest_nics(m)],
            )
    return out


def _md_transports(analysis: Analysis) -> list[str]:
    cs = analysis.case.connections
    if not cs.total:
        return []
    out = ["### Transports", ""]
    out += _md_table(["transport", "lines"], [[t, n] for t, n in sorted(cs.by_transport.items())])
    out += [f"NET lines with GDR: {cs.net_with_gdr}; without: {cs.net_without_gdr}; via proxy: {cs.via_proxy}.", ""]
    for name, edges in edge_groups(analysis.case.edges):
        text = "\n".join(edge_text(x) for x in edges[: EVIDENCE_CAP * 3])
        if len(edges) > EVIDENCE_CAP * 3:
            text += f"\n... and {len(edges) - EVIDENCE_CAP * 3} more"
        out += [f"<details><summary>{_cell(name)}: {len(edges)} edges</summary>", ""]
        out += _fence(text) + ["", "</details>", ""]
    return out


def _md_benchmarks(plots: list[Plot], names: dict[str, str], unplotted: int) -> list[str]:
    if not plots:
        return []
    out = ["### Benchmarks", ""]
    for plot in plots:
        out += [f"![{_cell(plot.alt)}]({names[plot.slug]})", ""]
    if unplotted:
        out += [f"... and {unplotted} more runs not plotted", ""]
    return out


def _md_diff(diff: DiffView) -> list[str]:
    out = ["### Run comparison", "", f"Before: `{diff.before}`; after: `{diff.after}`", ""]
    if diff.rows:
        out += _md_table(
            ["collective", "size", "before", "after", "after/before"],
            [
                [
                    r.collective,
                    human_size(r.size),
                    r.before,
                    r.after,
                    (f"{r.ratio:.2f}" if r.ratio is not None else None)
                    and (f"{r.ratio:.2f}" + (" **regression**" if r.regression else "")),
                ]
                for r in diff.rows[:ROWS_CAP]
            ],
        )
    for title, items in (("appeared", diff.appeared), ("disappeared", diff.disappeared)):
        if items:
            out += [f"Findings that {title}: " + ", ".join(items), ""]
    return out
