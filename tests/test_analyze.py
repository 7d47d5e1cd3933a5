"""`ncclscope analyze` and `ncclscope rules`: options, formats and exit codes, through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

from ncclscope.case.read import read_case
from ncclscope.diagnose.engine import analyze, selected
from ncclscope.diagnose.rules.catalog import all_rules

from conftest import run_cli

DEMO = "fixtures/mixed/multi_host_job_problems.txt"
HEALTHY = "fixtures/nccl/v2_28_healthy_multinode_gdr.log"
MATRIX_ONLY = "fixtures/topo/gpu_only_2gpu.txt"


def analysis_json(*args: str) -> tuple[int, dict]:
    proc = run_cli("analyze", "--format", "json", *args)
    assert "Traceback" not in proc.stderr.decode()
    return proc.returncode, json.loads(proc.stdout)


def test_json_output_has_findings_with_evidence_and_the_case() -> None:
    _, data = analysis_json("--fail-on", "never", DEMO)
    assert set(data) >= {"findings", "case", "summary", "platform", "bandwidth"}
    assert data["case"]["sources"][0]["path"] == DEMO
    for finding in data["findings"]:
        assert {"code", "name", "severity", "message", "evidence"} <= set(finding)
        for ev in finding["evidence"]:
            assert set(ev) == {"source", "line", "text"}


def test_findings_are_ordered_by_severity() -> None:
    _, data = analysis_json("--fail-on", "never", DEMO)
    order = {"error": 0, "warning": 1, "info": 2}
    severities = [order[f["severity"]] for f in data["findings"]]
    assert severities == sorted(severities)


def test_fail_on_never_exits_zero_even_with_errors() -> None:
    code, data = analysis_json("--fail-on", "never", DEMO)
    assert code == 0


def test_fail_on_error_exits_one_when_an_error_is_found() -> None:
    code, data = analysis_json(DEMO)
    assert code == (1 if data["summary"].get("error") else 0)


def test_fail_on_warning_counts_warnings_too() -> None:
    code, data = analysis_json("--fail-on", "warning", DEMO)
    summary = data["summary"]
    assert code == (1 if summary.get("error") or summary.get("warning") else 0)


def test_missing_input_exits_two() -> None:
    proc = run_cli("analyze", "no/such/file.log")
    assert proc.returncode == 2
    assert "no such file" in proc.stderr.decode()


def test_select_keeps_only_matching_codes() -> None:
    # BW rules need a benchmark, which a lone matrix lacks: only EVD001 can speak
    _, data = analysis_json("--fail-on", "never", "--select", "EVD,BW", MATRIX_ONLY)
    assert data["findings"], "a lone matrix leaves the benchmark rules without evidence"
    assert {f["code"] for f in data["findings"]} == {"EVD001"}


def test_ignore_removes_codes_and_wins_over_select() -> None:
    _, data = analysis_json("--fail-on", "never", "--select", "EVD", "--ignore", "EVD001", MATRIX_ONLY)
    assert data["findings"] == []


def test_selection_accepts_prefixes_and_comma_lists() -> None:
    rules = all_rules()
    chosen = selected(rules, ["evd001,NET"], None)
    assert "EVD001" in chosen
    assert all(code == "EVD001" or code.startswith("NET") for code in chosen)


def test_missing_evidence_is_reported_not_passed_silently() -> None:
    analysis = analyze(read_case([MATRIX_ONLY], jobs=1).case)
    evd = [f for f in analysis.findings if f.code == "EVD001"]
    assert evd
    assert any("NCCL_DEBUG=INFO" in f.fix for f in evd)


def test_markdown_output_fits_an_issue_comment() -> None:
    proc = run_cli("analyze", "--format", "markdown", "--fail-on", "never", DEMO)
    text = proc.stdout.decode()
    assert text.startswith("## ncclscope")
    if "### " in text:
        assert "<details>" in text


def test_sarif_output_is_sarif_2_1_0() -> None:
    proc = run_cli("analyze", "--format", "sarif", "--fail-on", "never", DEMO)
    sarif = json.loads(proc.stdout)
    assert sarif["version"] == "2.1.0"
    run = sarif["runs"][0]
    assert run["tool"]["driver"]["name"] == "ncclscope"
    rule_ids = {r["id"] for r in run["tool"]["driver"]["rules"]}
    for result in run["results"]:
        assert result["ruleId"] in rule_ids
        assert result["level"] in ("error", "warning", "note")


def test_output_file_is_written(tmp_path: Path) -> None:
    target = tmp_path / "findings.json"
    proc = run_cli("analyze", "--format", "json", "--fail-on", "never", "-o", str(target), DEMO)
    assert proc.returncode == 0
    assert json.loads(target.read_text())["findings"] is not None


def test_text_output_names_the_codes_and_the_verdict() -> None:
    proc = run_cli("analyze", "--fail-on", "never", DEMO)
    text = proc.stdout.decode()
    assert text.startswith("ncclscope ")
    for finding in analysis_json("--fail-on", "never", DEMO)[1]["findings"]:
        assert finding["code"] in text


def test_rules_lists_every_rule_with_its_name() -> None:
    proc = run_cli("rules")
    text = proc.stdout.decode()
    for code, rule in all_rules().items():
        assert code in text and rule.name in text


def test_rules_code_explains_one_rule() -> None:
    proc = run_cli("rules", "evd001")
    text = proc.stdout.decode()
    assert "EVD001 missing-evidence" in text
    assert "Why it matters" in text and "How to fix" in text


def test_rules_unknown_code_exits_two() -> None:
    proc = run_cli("rules", "XYZ999")
    assert proc.returncode == 2
    assert "no rule XYZ999" in proc.stderr.decode()


def test_every_rule_is_documented() -> None:
    for code, rule in all_rules().items():
        assert rule.summary, code
        assert rule.why and rule.fix, f"{code} lacks Why:/Fix: paragraphs"
        assert rule.sources, f"{code} names no source"


def test_schema_of_the_analysis_output() -> None:
    proc = run_cli("schema", "analysis")
    schema = json.loads(proc.stdout)
    assert "findings" in schema["properties"] and "case" in schema["properties"]


def test_demo_shows_findings() -> None:
    proc = run_cli("demo")
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout.decode()
    assert "Analyzing the bundled example" in text


CATALOG = Path(__file__).resolve().parent.parent.parent / "shared" / "knowledge" / "rule-catalog.md"


def test_every_catalog_code_is_a_rule_with_its_exact_name() -> None:
    import re

    import pytest

    if not CATALOG.exists():
        pytest.skip("shared/knowledge is not beside the repository")
    catalog = dict(re.findall(r"^\| ([A-Z]+\d{3}) \| ([a-z0-9-]+) \|", CATALOG.read_text(), re.M))
    rules = all_rules()
    assert set(rules) <= set(catalog), "every rule has a catalog code"
    assert {code: catalog[code] for code in rules} == {code: r.name for code, r in rules.items()}
    # codes the catalog published for work not done yet, each with the issue that brings it
    assert set(catalog) - set(rules) == set(PLANNED_CODES)


# Catalog codes whose rules come with later issues (code -> issue); a code leaves this list when its rule
# lands. The corpus harness counts a `must` of these apart (tests/test_corpus.py).
PLANNED_CODES: dict[str, int] = {}


def test_diff_command_flags_a_regression_with_exit_one(tmp_path: Path) -> None:
    plot = tmp_path / "diff.png"
    proc = run_cli(
        "diff",
        "--format",
        "json",
        "--plot",
        str(plot),
        "fixtures/diff/before_allreduce_allgather_8xh100.txt",
        "fixtures/diff/after_allreduce_allgather_8xh100.txt",
    )
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    assert data and plot.read_bytes().startswith(b"\x89PNG")


def test_diff_command_on_a_stable_pair_exits_zero() -> None:
    proc = run_cli("diff", "fixtures/diff/stable_before_8xh100.txt", "fixtures/diff/stable_after_8xh100.txt")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr.decode()


def test_diff_with_a_missing_side_exits_two() -> None:
    proc = run_cli("diff", "no/such/before.txt", "fixtures/diff/stable_after_8xh100.txt")
    assert proc.returncode == 2


def test_report_command_writes_a_self_contained_html_page(tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    proc = run_cli("report", DEMO, "-o", str(target))
    assert proc.returncode == 0, proc.stderr
    page = target.read_text()
    assert page.lstrip().lower().startswith("<!doctype html") and "<script" not in page.lower()
    assert "data:image/png;base64," in page


def test_report_command_writes_markdown_with_plots_beside_it(tmp_path: Path) -> None:
    target = tmp_path / "report.md"
    proc = run_cli("report", DEMO, "-o", str(target))
    assert proc.returncode == 0, proc.stderr
    assert target.read_text().startswith("#")
    assert list(tmp_path.glob("report-*.png"))


def test_report_to_an_unwritable_path_leaves_nothing(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    target = blocker / "report.html"  # its folder cannot be made: a file stands where it would be
    proc = run_cli("report", DEMO, "-o", str(target))
    assert proc.returncode == 2
    said = proc.stderr.decode()
    assert said.startswith(f"ncclscope: cannot create the folder of {target}") and "Traceback" not in said
    assert blocker.read_text() == "not a folder\n"


def test_bundle_command_round_trips_through_analyze(tmp_path: Path) -> None:
    ticket = tmp_path / "ticket.tar.gz"
    proc = run_cli("bundle", DEMO, "-o", str(ticket), "--redact")
    assert proc.returncode == 0, proc.stderr
    code, back = analysis_json("--fail-on", "never", str(ticket))
    _, original = analysis_json("--fail-on", "never", DEMO)
    assert [f["code"] for f in back["findings"]] == [f["code"] for f in original["findings"]]
    assert "gpu-demo" not in json.dumps(back)


def test_redact_option_on_analyze_hides_hostnames() -> None:
    _, data = analysis_json("--fail-on", "never", "--redact", DEMO)
    text = json.dumps(data)
    assert "gpu-demo-a" not in text and "10.8.0.11" not in text
    assert "host-01" in text


def test_diff_command_writes_the_comparison_into_an_html_report(tmp_path: Path) -> None:
    page = tmp_path / "diff.html"
    proc = run_cli(
        "diff",
        "--report",
        str(page),
        "fixtures/diff/before_allreduce_allgather_8xh100.txt",
        "fixtures/diff/after_allreduce_allgather_8xh100.txt",
    )
    assert proc.returncode == 1, proc.stderr
    html = page.read_text()
    assert 'id="diff"' in html and "regression" in html
    assert "after/before &lt; 0.9" in html or "after/before < 0.9" in html


# What a user reads as a source must be something they can open: our own notes are not published.
INTERNAL_REFERENCES = ("landscape", "formats.md", "rule-catalog", "diagnostics.md", "shared/", "real-world-variants")


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def test_every_source_shown_to_users_is_public() -> None:
    import ncclscope

    shown = [f"{code}: {s}" for code, rule in all_rules().items() for s in rule.sources + [rule.why, rule.fix]]
    data = Path(ncclscope.__file__).parent / "data" / "expected_busbw.json"
    shown += _strings(json.loads(data.read_text()))
    leaks = [s for s in shown if any(ref in s.lower() for ref in INTERNAL_REFERENCES)]
    assert not leaks


def test_a_record_that_lost_its_host_name_is_put_on_its_process_host(tmp_path: Path) -> None:
    from ncclscope.case.read import read_case

    log = tmp_path / "damaged.log"
    log.write_text(
        "gpu-a1:4412:4412 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
        ":4412:4412 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>\n",
        encoding="utf-8",
    )
    case = read_case([str(log)], jobs=1).case
    assert [h.name for h in case.hosts] == ["gpu-a1"]
    assert [(p.host, p.pid) for p in case.processes] == [("gpu-a1", 4412)]


def test_markdown_findings_table_keeps_angle_brackets_visible() -> None:
    """A `<` in a finding's message is escaped in its table cell, as in the Markdown report: GitHub would
    take `<51277>` for an HTML tag and hide it (common/markdown.py, one escaper for every table)."""
    proc = run_cli(
        "analyze", "--format", "markdown", "--fail-on", "never", "fixtures/framework/torch23_nccl_error_last_error.log"
    )
    rows = [line for line in proc.stdout.decode().splitlines() if line.startswith("| error | RUN005")]
    assert rows and "10.42.7.19&lt;51277>" in rows[0], proc.stdout


def test_a_finding_with_nothing_to_do_is_never_a_root_cause() -> None:
    """The demo job: NCCL_IB_TIMEOUT=22 (ENV001, info: a documented knob) explains nothing; the host where
    NET/IB found no device (NET002) is the cause of its socket fallback (NET001) and the low busbw."""
    import ncclscope as ns

    for fixture in ("fixtures/mixed/multi_host_job_problems.txt", "fixtures/nccl/v2_26_socket_fallback.log"):
        findings = ns.analyze(fixture).findings
        roots = [f.code for f in findings if f.root_cause]
        assert "NET002" in roots, (fixture, roots)
        assert not [f.code for f in findings if f.root_cause and f.severity == "info"], fixture
        codes = [f.code for f in findings]
        assert codes[0] == "NET002" and codes.index("NET002") < codes.index("NET001"), codes
