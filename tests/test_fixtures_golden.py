"""Every fixture parses completely, and its Case matches the reviewed golden JSON.

Set NCCLSCOPE_UPDATE_GOLDEN=1 to rewrite the golden files after a deliberate change (then review
the diff before committing).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from ncclscope.case.read import read_case

from conftest import FIXTURES, REPO, fixture_files

GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = os.environ.get("NCCLSCOPE_UPDATE_GOLDEN") == "1"
EXPECT_RE = re.compile(
    r"^- `(?P<name>[^`]+)`.*\(expect (?P<count>\d+) unrecognised: line numbers? (?P<lines>[\d, and]+)\)"
)


def readmes() -> list[Path]:
    """fixtures/README.md, and a README.md in a fixture folder for the fixtures of that folder."""
    return sorted(FIXTURES.rglob("README.md"))


def expected_unrecognized() -> dict[str, set[int]]:
    """The READMEs mark the fixtures with deliberately damaged records."""
    expected: dict[str, set[int]] = {}
    for readme in readmes():
        base = readme.parent.relative_to(REPO)
        for line in readme.read_text(encoding="utf-8").splitlines():
            match = EXPECT_RE.match(line.strip())
            if match:
                numbers = {int(n) for n in re.findall(r"\d+", match["lines"])}
                name = match["name"]
                key = f"fixtures/{name}" if base == Path("fixtures") else str(base / name)
                expected[key] = numbers
    return expected


def golden_path(fixture: Path) -> Path:
    return GOLDEN / (str(fixture.relative_to("fixtures")).replace("/", "__") + ".json")


def case_json(fixture: Path) -> dict:
    outcome = read_case([str(fixture)], jobs=1)
    data = json.loads(outcome.case.model_dump_json())
    data.pop("ncclscope_version")
    return data


@pytest.mark.parametrize("fixture", fixture_files(), ids=str)
def test_fixture_nccl_lines_are_all_recognised(fixture: Path, repo_cwd: Path) -> None:
    outcome = read_case([str(fixture)], jobs=1)
    source = outcome.case.sources[0]
    unrecognized = {u.line for u in source.unrecognized}
    assert unrecognized == expected_unrecognized().get(str(fixture), set()), source.unrecognized
    assert source.kinds, f"{fixture}: nothing recognised"


@pytest.mark.parametrize("fixture", fixture_files(), ids=str)
def test_fixture_case_matches_golden_json(fixture: Path, repo_cwd: Path) -> None:
    data = case_json(fixture)
    target = golden_path(fixture)
    if UPDATE or not target.exists():
        if not UPDATE:
            pytest.fail(f"no golden file {target.relative_to(REPO)}; run with NCCLSCOPE_UPDATE_GOLDEN=1")
        target.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    assert data == json.loads(target.read_text(encoding="utf-8"))


def test_every_fixture_is_described_in_a_readme() -> None:
    """In fixtures/README.md by its path under fixtures/, or in its own folder's README.md by name."""
    top = (FIXTURES / "README.md").read_text(encoding="utf-8")
    missing = []
    for f in fixture_files():
        local = REPO / f.parent / "README.md"
        local_text = local.read_text(encoding="utf-8") if local.exists() else ""
        if f"`{f.relative_to('fixtures')}`" not in top and f"`{f.name}`" not in local_text:
            missing.append(str(f))
    assert not missing


@pytest.mark.parametrize("fixture", fixture_files(), ids=str)
def test_fixture_analysis_reads_back_from_its_json(fixture: Path, repo_cwd: Path) -> None:
    """The JSON contract holds: what `analyze --format json` writes validates as an Analysis (the TUI reads its
    child's analysis this way), e.g. every Source.kinds value is in the model's literal."""
    from ncclscope.diagnose.engine import analyze
    from ncclscope.model import Analysis

    analysis = analyze(read_case([str(fixture)], jobs=1).case)
    assert Analysis.model_validate_json(analysis.model_dump_json()) == analysis
