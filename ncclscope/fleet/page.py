"""`ncclscope fleet` output: a rich table, Markdown, CSV, and a self-contained HTML page with plots.

The tables are pandas frames of the FleetReport (`frames`), so the text, Markdown, CSV and Parquet
outputs show the same rows. Every value from the inputs (host names, paths, failure lines) is escaped
in HTML.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from rich.box import SIMPLE_HEAD
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ncclscope import __version__
from ncclscope.common import markdown
from ncclscope.fleet.judge import FleetReport

NUMERIC = ("busbw", "expected", "median", "z", "change")
STATUS_STYLE = {
    "failed": "bold red",
    "slow": "red",
    "missing": "yellow",
    "in_job": "cyan",
    "unmeasured": "dim",
    "ok": "green",
}


def frames(report: FleetReport) -> dict[str, pd.DataFrame]:
    """hosts, pairs, pair_hosts and drift (one row per item and value) as DataFrames."""
    hosts = pd.DataFrame([h.model_dump() for h in report.hosts], columns=list(_fields("hosts")))
    pairs = pd.DataFrame([p.model_dump() for p in report.pairs], columns=list(_fields("pairs")))
    for df, column in ((hosts, "sources"), (pairs, "hosts"), (pairs, "sources")):  # lists as one text cell
        df[column] = df[column].map(lambda s: ",".join(s) if isinstance(s, list) else s)
    pair_hosts = pd.DataFrame(
        [p.model_dump() for p in report.pair_hosts], columns=["host", "pairs", "slow_pairs", "culprit"]
    )
    drift = pd.DataFrame(
        [
            (d.item, d.kind, d.majority, v.value, len(v.hosts), ",".join(v.hosts))
            for d in report.drift
            for v in d.values
        ],
        columns=["item", "kind", "majority", "value", "hosts_count", "hosts"],
    )
    return {"hosts": hosts, "pairs": pairs, "pair_hosts": pair_hosts, "drift": drift}


def _fields(kind: str) -> list[str]:
    from ncclscope.fleet.judge import HostResult, PairResult

    return list((HostResult if kind == "hosts" else PairResult).model_fields)


def headline(report: FleetReport) -> str:
    s = report.summary
    parts = [f"{s.get('hosts', 0)} hosts: {s.get('ok', 0)} ok"]
    parts += [
        f"{s[k]} {k.replace('_', ' ')}" for k in ("slow", "failed", "missing", "in_job", "unmeasured") if s.get(k)
    ]
    text = ", ".join(parts)
    if report.pairs:
        text += f"; {s.get('pairs', 0)} pairs, {s.get('slow_pairs', 0)} slow"
    if report.baseline:
        text += f"; {s.get('regressions', 0)} regressions since the baseline"
    if report.drift:
        text += f"; {len(report.drift)} items differ across hosts"
    return text


def print_text(report: FleetReport, console: Console, show_ok: bool = False) -> None:
    """The hosts that need attention (all hosts with show_ok), the pair verdicts, the drift, the headline."""
    shown = [h for h in report.hosts if show_ok or h.status != "ok" or h.regression]
    if shown:
        table = Table(title="Hosts" if show_ok else "Hosts that need attention", title_justify="left", box=SIMPLE_HEAD)
        for column in ("host", "status", "collective", "busbw", "expected", "median", "z"):
            table.add_column(column, no_wrap=True, justify="right" if column in NUMERIC else "left")
        if report.baseline:
            table.add_column("change", no_wrap=True, justify="right")
        table.add_column("detail", min_width=20)
        for h in shown:
            cells = [
                escape(h.host),
                f"[{STATUS_STYLE[h.status]}]{h.status}[/]",
                h.collective or "",
                _num(h.busbw),
                _num(h.expected),
                _num(h.fleet_median),
                _num(h.robust_z),
            ]
            if report.baseline:
                change = f"{h.change:+.1%}" if h.change is not None else ""
                cells.append(f"[red]{change}[/]" if h.regression else change)
            table.add_row(*cells, escape(h.detail))
        console.print(table)
    culprits = [p for p in report.pair_hosts if p.culprit]
    listed = [p for p in report.pairs if show_ok or (p.status != "ok" and not (p.blame or "").startswith("host "))]
    if listed:
        table = Table(title="Host pairs", title_justify="left", box=SIMPLE_HEAD)
        table.add_column("pair", min_width=15)
        for column in ("status", "collective", "busbw", "median", "z", "blame"):
            table.add_column(column, no_wrap=True, justify="right" if column in NUMERIC else "left")
        for p in listed:
            table.add_row(
                escape(" - ".join(p.hosts)),
                p.status,
                p.collective,
                _num(p.busbw),
                _num(p.fleet_median),
                _num(p.robust_z),
                p.blame or "",
            )
        console.print(table)
    for c in culprits:
        console.print(f"culprit host: {escape(c.host)}: all {c.pairs} of its pairs are slow")
    if report.drift:
        table = Table(title="Drift across hosts", title_justify="left", box=SIMPLE_HEAD)
        for column in ("item", "majority", "other values (hosts)"):
            table.add_column(column)
        for d in report.drift:
            others = "; ".join(f"{escape(v.value)}: {escape(_hosts(v.hosts))}" for v in d.values[1:])
            table.add_row(escape(d.item), escape(d.majority), others)
        console.print(table)
    for problem in report.unusable:
        console.print(f"[yellow]unusable[/] {escape(problem)}")
    for problem in report.unattributed:
        console.print(f"[yellow]no host[/] {escape(problem)}")
    console.print(headline(report))


def _hosts(hosts: list[str], cap: int = 8) -> str:
    more = len(hosts) - cap
    return ", ".join(hosts[:cap]) + (f" and {more} more" if more > 0 else "")


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"


def to_markdown(report: FleetReport) -> str:
    tables = frames(report)
    out = [f"# ncclscope fleet\n\n{headline(report)}\n", "## Hosts\n"]
    hosts = tables["hosts"][["host", "status", "collective", "busbw", "expected", "fleet_median", "robust_z", "detail"]]
    if report.baseline:
        hosts = tables["hosts"][[*hosts.columns, "baseline_busbw", "change", "regression"]]
    out.append(_md(hosts))
    if report.pairs:
        out += [
            "\n## Host pairs\n",
            _md(tables["pairs"][["hosts", "status", "collective", "busbw", "fleet_median", "blame"]]),
        ]
        out += ["\n## Hosts of the pairs\n", _md(tables["pair_hosts"])]
    if report.drift:
        out += ["\n## Drift\n", _md(tables["drift"][["item", "majority", "value", "hosts_count", "hosts"]])]
    if report.unusable:
        out += ["\n## Unusable inputs\n", *(f"- {_md_cell(p)}" for p in report.unusable)]
    if report.unattributed:
        out += ["\n## Results without a host\n", *(f"- {_md_cell(p)}" for p in report.unattributed)]
    return "\n".join(out) + "\n"


def _md(df: pd.DataFrame) -> str:
    return "\n".join(
        markdown.table(list(df.columns), ([_md_cell(v) for v in row] for row in df.itertuples(index=False)))
    )


def _md_cell(value: object) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return ""
    return markdown.cell(f"{value:.2f}" if isinstance(value, float) else str(value), empty="")


def to_csv(report: FleetReport) -> str:
    """The hosts table (one row per host and collective)."""
    return str(frames(report)["hosts"].to_csv(index=False))


def write_parquet(report: FleetReport, folder: Path) -> list[Path]:
    """Every frame as FOLDER/<name>.parquet (needs pyarrow: `pip install 'ncclscope[parquet]'`)."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, df in frames(report).items():
        path = folder / f"{name}.parquet"
        df.to_parquet(path, index=False)
        written.append(path)
    return written


# ------------------------------------------------------------------------------------------ HTML


def to_html(report: FleetReport) -> str:
    from markupsafe import Markup

    from ncclscope.render.html import CSS, data_uri
    from ncclscope.render.templating import render_page

    tables = frames(report)
    attention = [
        (
            h.host,
            h.status,
            h.collective or "",
            _num(h.busbw),
            _num(h.expected),
            _num(h.fleet_median),
            _num(h.robust_z),
            f"{h.change:+.1%}" if h.change is not None else "",
            h.detail,
        )
        for h in report.hosts
        if h.status != "ok" or h.regression
    ]
    pairs = None
    if report.pairs:
        bad = tables["pairs"][tables["pairs"].status != "ok"]
        pairs = list(bad[["hosts", "status", "busbw", "fleet_median", "blame"]].itertuples(index=False))
    return render_page(
        "fleet.html",
        css=Markup(CSS),
        version=__version__,
        inputs=report.inputs,
        verdict=_verdict(report),
        headline=headline(report),
        strip=host_strip_png(report),
        attention=attention,
        pairs=pairs,
        heat=pair_heatmap_png(report) if report.pairs else None,
        culprits=[p.host for p in report.pair_hosts if p.culprit],
        drift=[(d.item, d.majority, v.value, _hosts(v.hosts, 20)) for d in report.drift for v in d.values],
        unusable=report.unusable,
        unattributed=report.unattributed,
        hosts=[
            (h.host, h.status, h.collective or "", _num(h.busbw), _num(h.expected), _num(h.fleet_median))
            for h in report.hosts
        ],
        data_uri=data_uri,
    )


def _verdict(report: FleetReport) -> str:
    s = report.summary
    if s.get("failed") or s.get("slow") or s.get("regressions"):
        return "error"
    return "warning" if s.get("missing") or s.get("slow_pairs") or report.drift else ""


def host_strip_png(report: FleetReport) -> bytes | None:
    """busbw of every host per collective (one dot each, slow ones red), the fleet median and band."""
    from ncclscope.render.plots import Figure, _png

    measured = [h for h in report.hosts if h.busbw is not None and h.collective]
    if not measured:
        return None
    collectives = sorted({h.collective for h in measured if h.collective})
    fig = Figure(figsize=(8, 1.2 + 1.1 * len(collectives)))
    ax = fig.add_subplot(1, 1, 1)
    for y, collective in enumerate(collectives):
        rows = [h for h in measured if h.collective == collective]
        jitter = [((i * 37) % 11 - 5) / 40 for i in range(len(rows))]  # spread the dots without randomness
        colors = ["#b42318" if h.status == "slow" else "#175cd3" for h in rows]
        ax.scatter([h.busbw or 0.0 for h in rows], [y + j for j in jitter], s=14, c=colors, zorder=3)
        first = rows[0]
        if first.fleet_median is not None:
            ax.plot([first.fleet_median] * 2, [y - 0.35, y + 0.35], color="#067647", lw=2, zorder=2)
        if first.fleet_band is not None:
            ax.plot([first.fleet_band] * 2, [y - 0.35, y + 0.35], color="#067647", lw=1, ls="--", zorder=2)
        expected = next((h.expected for h in rows if h.expected), None)
        if expected:
            ax.plot([expected] * 2, [y - 0.35, y + 0.35], color="#667085", lw=1, ls=":", zorder=2)
    ax.set_yticks(range(len(collectives)), collectives)
    ax.set_xlabel("busbw at the largest size (GB/s); green: fleet median and band, grey: expected")
    ax.set_ylim(-0.6, len(collectives) - 0.4)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return _png(fig)


def pair_heatmap_png(report: FleetReport) -> bytes | None:
    """The host-pair matrix of the most measured collective: busbw per pair, missing pairs blank."""
    from ncclscope.render.plots import Figure, _png

    if not report.pairs:
        return None
    collective = pd.Series([p.collective for p in report.pairs]).mode()[0]
    pairs = [p for p in report.pairs if p.collective == collective and p.busbw is not None]
    hosts = sorted({h for p in pairs for h in p.hosts})
    matrix = pd.DataFrame(float("nan"), index=hosts, columns=hosts)
    for p in pairs:
        a, b = p.hosts
        matrix.loc[a, b] = matrix.loc[b, a] = p.busbw
    size = max(4.0, 0.35 * len(hosts) + 2)
    fig = Figure(figsize=(size + 1.5, size))
    ax = fig.add_subplot(1, 1, 1)
    image = ax.imshow(matrix.to_numpy(), cmap="RdYlGn", interpolation="nearest")
    fig.colorbar(image, ax=ax, label=f"{collective} busbw (GB/s)")
    ax.set_xticks(range(len(hosts)), hosts, rotation=90, fontsize=7)
    ax.set_yticks(range(len(hosts)), hosts, fontsize=7)
    ax.set_title(f"{collective}: busbw per host pair")
    fig.tight_layout()
    return _png(fig)
