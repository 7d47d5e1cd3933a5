"""Reports for support tickets: the HTML page and the Markdown comment, from the real pipeline."""

from __future__ import annotations

import base64
import os
import re
from pathlib import Path

import pytest

from ncclscope.case.read import read_case
from ncclscope.case.topology import nearest_nics
from ncclscope.diagnose.engine import analyze
from ncclscope.render.html import DiffRow, DiffView
from ncclscope.render.report import ReportError, write_html_report, write_markdown_report, write_report

from conftest import REPO, analysis_of, run_cli

DEMO = "fixtures/mixed/multi_host_job_problems.txt"
STORY = "fixtures/stories"
SECTION_IDS = ["summary", "findings", "platform", "hosts", "settings", "topology", "nics", "transports", "benchmarks"]

HOSTILE_LOG = """\
NCCL version 2.19.3+cuda12.2
evil-host:4242:4242 [0] NCCL INFO cudaDriverVersion 12020
evil-host:4242:4242 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to <img src=x onerror=alert(2)>
evil-host:4242:4250 [0] misc/socket.cc:484 NCCL WARN Net : Connect failed <script>alert(1)</script>
"""


@pytest.fixture(scope="module")
def demo_html(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("demo") / "report.html"
    write_html_report(analysis_of(DEMO), out)
    return out.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def story_html(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("story") / "report.html"
    write_report(analysis_of(STORY), out)
    return out.read_text(encoding="utf-8")


def test_html_is_one_self_contained_file_without_script(demo_html: str) -> None:
    assert demo_html.startswith("<!DOCTYPE html>")
    assert "<style>" in demo_html and "@media print" in demo_html
    assert "<script" not in demo_html.lower()
    # nothing is loaded from elsewhere: no stylesheet link, no remote image, no iframe
    assert not re.search(r"<link\b|<iframe\b|src=\"(?!data:image/png;base64,)", demo_html)
    for sid in SECTION_IDS:
        assert f'<section id="{sid}">' in demo_html


def test_summary_verdict_comes_first_with_counts_and_bandwidth(demo_html: str) -> None:
    analysis = analysis_of(DEMO)
    summary = demo_html.split('<section id="summary">', 1)[1].split("</section>", 1)[0]
    assert demo_html.index('<section id="summary">') < demo_html.index('<section id="findings">')
    assert f"{analysis.summary['error']} error" in summary
    assert "1.2 GB/s at 1 GiB" in summary  # the BW verdict of the demo
    assert 'class="verdict error"' in summary


def test_findings_by_severity_with_evidence_collapsible(demo_html: str) -> None:
    findings = demo_html.split('<section id="findings">', 1)[1].split("</section>", 1)[0]
    assert findings.index("<h3>Error") < findings.index("<h3>Warning") < findings.index("<h3>Info")
    gdr = findings.split("GDR001 gdr-off", 1)[1].split("</article>", 1)[0]
    assert "<details><summary>evidence (12 lines)</summary>" in gdr
    assert "... and 7 more lines" in gdr  # 5 shown of 12


def test_evidence_capped_per_finding_with_count() -> None:
    analysis = analysis_of(DEMO)
    finding = next(f for f in analysis.findings if f.evidence)
    finding.evidence = [finding.evidence[0]] * 40
    finding.evidence_count = 5000
    from ncclscope.render.html import render_html

    page = render_html(analysis)
    assert "... and 4990 more lines" in page
    assert page.count(finding.evidence[0].text.replace("<", "&lt;")[:40]) < 40


def test_platform_expectations_versions_settings(demo_html: str) -> None:
    assert "H100-SXM" in demo_html and "sjeaugey nccl#766" in demo_html
    hosts = demo_html.split('<section id="hosts">', 1)[1].split("</section>", 1)[0]
    assert "gpu-demo-a" in hosts and "2.21.5+cuda12.4" in hosts and "2.23.4+cuda12.6" in hosts
    settings = demo_html.split('<section id="settings">', 1)[1].split("</section>", 1)[0]
    assert "NCCL_IB_TIMEOUT" in settings and "multi_host_job_problems.txt:" in settings


def test_topology_matrix_colour_coded_and_nearest_nic(story_html: str) -> None:
    topo = story_html.split('<section id="topology">', 1)[1].split("</section>", 1)[0]
    assert '<div class="scroll"><table class="matrix">' in topo
    assert topo.count('class="t-pix"') >= 24 and topo.count('class="t-sys"') >= 32 and 'class="t-x"' in topo
    assert "NIC0 (mlx5_0)" in topo
    matrix = analysis_of(STORY).case.topologies[0]
    assert nearest_nics(matrix)[0] == ("GPU0", ["NIC0"], "PXB")
    assert nearest_nics(matrix)[7] == ("GPU7", ["NIC1"], "PXB")
    nics = story_html.split('<section id="nics">', 1)[1].split("</section>", 1)[0]
    assert "GPU5" in nics and "NIC1 (mlx5_1)" in nics


def test_transport_summary(demo_html: str, story_html: str) -> None:
    demo = demo_html.split('<section id="transports">', 1)[1].split("</section>", 1)[0]
    assert "NET/IB without GDR" in demo and "NET/Socket without GDR" in demo and "P2P/CUMEM" in demo
    story = story_html.split('<section id="transports">', 1)[1].split("</section>", 1)[0]
    assert "SHM" in story and "P2P/IPC" in story


def test_benchmark_plots_embedded_as_png(story_html: str) -> None:
    bench = story_html.split('<section id="benchmarks">', 1)[1].split("</section>", 1)[0]
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', bench)
    assert images, "no plot embedded"
    assert all(base64.b64decode(i).startswith(b"\x89PNG\r\n\x1a\n") for i in images)
    assert "busbw: all_reduce, 8 ranks" in bench


def test_input_text_is_escaped(tmp_path: Path) -> None:
    log = tmp_path / "<script>x.log"  # a file name is input text too
    log.write_text(HOSTILE_LOG)
    analysis = analyze(read_case([str(log)], jobs=1).case)
    assert any("<script>alert(1)</script>" in w.message for w in analysis.case.warnings)
    out = tmp_path / "r.html"
    write_html_report(analysis, out)
    page = out.read_text()
    assert "<script" not in page.lower()
    assert "<img" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page  # shown as text
    assert "&lt;img src=x onerror=alert(2)&gt;" in page


def test_markdown_with_plots_beside_it(tmp_path: Path) -> None:
    out = tmp_path / "ticket.md"
    written = write_markdown_report(analysis_of(STORY), out)
    text = out.read_text()
    assert written[-1] == out
    pngs = sorted(p.name for p in tmp_path.glob("*.png"))
    assert pngs == ["ticket-busbw-1-all_reduce.png"]
    assert "![busbw against message size" in text and "](ticket-busbw-1-all_reduce.png)" in text
    assert text.startswith("## ncclscope ")
    assert "<details><summary>evidence" in text and "| severity | code | finding |" in text
    assert "| GPU0 | X | PIX |" in text.replace("  ", " ")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left behind
    assert len(text) < 65536  # a GitHub comment holds 65536 characters


def test_markdown_escapes_table_cells(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text(HOSTILE_LOG)
    out = tmp_path / "x.md"
    write_report(analyze(read_case([str(log)], jobs=1).case), out)
    text = out.read_text()
    table_lines = [line for line in text.splitlines() if line.startswith("|")]
    assert not any("<img" in line for line in table_lines)


def test_unwritable_output_is_a_clear_error_and_leaves_nothing(tmp_path: Path) -> None:
    analysis = analysis_of(STORY)
    with pytest.raises(ReportError, match=r"cannot write .*missing.*report\.html"):
        write_report(analysis, tmp_path / "missing" / "report.html")
    locked = tmp_path / "locked"
    locked.mkdir()
    os.chmod(locked, 0o500)
    try:
        if os.access(locked, os.W_OK):
            pytest.skip("running as a user who can write anywhere")
        with pytest.raises(ReportError):
            write_report(analysis, locked / "report.md")
        assert list(locked.iterdir()) == []
    finally:
        os.chmod(locked, 0o700)


def test_failed_write_keeps_the_previous_report(tmp_path: Path) -> None:
    out = tmp_path / "ticket.md"
    out.write_text("previous")
    (tmp_path / "ticket-busbw-1-all_reduce.png").mkdir()  # a plot cannot take its name
    with pytest.raises(ReportError, match="cannot write"):
        write_report(analysis_of(STORY), out)
    assert out.read_text() == "previous"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ticket-busbw-1-all_reduce.png", "ticket.md"]


def test_unknown_suffix_refused(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match="use .html or .md"):
        write_report(analysis_of(STORY), tmp_path / "report.pdf")
    assert list(tmp_path.iterdir()) == []


def test_diff_section(tmp_path: Path) -> None:
    diff = DiffView(
        before="before/",
        after="after/",
        threshold=0.9,
        rows=[DiffRow("all_reduce", 1 << 30, 100.0, 50.0, 0.5, True), DiffRow("all_gather", 1024, 1.0, 1.0, 1.0)],
        appeared=["NET001 socket-transport"],
    )
    out = tmp_path / "d.html"
    write_html_report(analysis_of(STORY), out, diff=diff)
    section = out.read_text().split('<section id="diff">', 1)[1].split("</section>", 1)[0]
    assert "0.50 regression" in section and "NET001 socket-transport" in section


def test_seed_report_if_present(tmp_path: Path) -> None:
    seed = REPO.parent / "shared" / "seeds" / "002_0bad1d865d8e9f7b.txt"
    if not seed.exists():
        pytest.skip("shared seed not present")
    out = tmp_path / "seed.html"
    write_html_report(analysis_of(seed), out)
    page = out.read_text()
    assert "NV18" in page and 'class="t-nv"' in page and "nccl#1455" in page


def test_the_page_templates_escape_every_value_by_default(tmp_path: Path) -> None:
    """render/templating.py: a value is escaped unless it is Markup, with html.escape's entities (quotes too)."""
    from markupsafe import Markup

    from ncclscope.render.templating import environment

    template = environment().from_string('<p title="{{ a }}">{{ a }}{{ b }}{{ c }}</p>')
    assert template.render(a="<script>'x'&\"y\"", b=Markup("<b>kept</b>"), c=None) == (
        '<p title="&lt;script&gt;&#x27;x&#x27;&amp;&quot;y&quot;">&lt;script&gt;&#x27;x&#x27;&amp;&quot;y&quot;'
        "<b>kept</b></p>"
    )


def test_report_creates_the_folder_and_takes_format_like_the_other_commands(tmp_path: Path) -> None:
    """Issue 41 item 4: -o into a folder that does not exist yet; --format md; a name and a format that
    disagree are refused in one line before any work."""
    log = "fixtures/verdicts/ib_disabled_two_hosts.log"
    page = tmp_path / "new" / "deeper" / "x.html"
    done = run_cli("report", log, "-o", str(page))
    assert done.returncode == 0, done.stderr
    assert page.read_text().startswith("<!DOCTYPE html>")
    md = tmp_path / "new" / "notes"
    done = run_cli("report", log, "--format", "md", "-o", str(md))
    assert done.returncode == 0, done.stderr
    assert md.read_text().startswith("## ncclscope")
    done = run_cli("report", log, "--format", "markdown", "-o", str(tmp_path / "r.html"))
    assert done.returncode == 2
    assert (
        done.stderr.decode().strip()
        == f"ncclscope: {tmp_path / 'r.html'}: --format markdown but the name ends in .html"
    )


def test_timeline_section_names_the_first_failure_and_folds_what_followed(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    write_html_report(analysis_of("fixtures/timeline"), out)
    page = out.read_text(encoding="utf-8")
    section = page[page.index('<section id="timeline">') :]
    section = section[: section.index("</section>")]
    assert (
        "<strong>First failure</strong> (by the times the lines carry): Xid 79 GPU has fallen off the bus on "
        in section
    )
    assert "gpu-b, rank 3, GPU 0000:43:00.0 at 2025-06-02T10:15:40.512409+00:00" in section
    assert "<details><summary>What followed it (7)</summary>" in section  # folded until opened
    assert section.index("<h3>gpu-b</h3>") < section.index("<h3>gpu-a</h3>")
    # without failures, no section
    healthy = tmp_path / "healthy.html"
    write_html_report(analysis_of("fixtures/nccl/v2_28_healthy_multinode_gdr.log"), healthy)
    assert 'id="timeline"' not in healthy.read_text(encoding="utf-8")
