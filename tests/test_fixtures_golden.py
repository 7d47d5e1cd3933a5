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
from conftest import FIXTURES, REPO, fixture_files

from ncclscope.reading import read_case

GOLDEN = Path(__file__).resolve().parent / "golden"
UPDATE = os.environ.get("NCCLSCOPE_UPDATE_GOLDEN") == "1"
EXPECT_RE = re.compile(
    r"^- `(?P<name>[^`]+)`.*\(expect (?P<count>\d+) unrecognised: line numbers? (?P<lines>[\d, and]+)\)"
)


def expected_unrecognized() -> dict[str, set[int]]:
    """fixtures/README.md marks the fixtures with deliberately damaged records."""
    expected: dict[str, set[int]] = {}
    for line in (FIXTURES / "README.md").read_text(encoding="utf-8").splitlines():
        match = EXPECT_RE.match(line.strip())
        if match:
            numbers = {int(n) for n in re.findall(r"\d+", match["lines"])}
            expected[f"fixtures/{match['name']}"] = numbers
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


def test_every_fixture_is_described_in_the_readme() -> None:
    readme = (FIXTURES / "README.md").read_text(encoding="utf-8")
    missing = [
        str(f.relative_to("fixtures")) for f in fixture_files() if f"`{f.relative_to('fixtures')}`" not in readme
    ]
    assert not missing
