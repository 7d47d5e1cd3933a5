"""The Case's models: what every instance costs in memory, and that sharing it changes nothing seen."""

from __future__ import annotations

import subprocess
import sys

from pydantic import BaseModel

import ncclscope as ns
from ncclscope.model import Case, Evidence, Record

from conftest import FIXTURES

LOG = FIXTURES / "nccl" / "v2_12_two_hosts_ib_gdr.log"


def _models(value: object) -> list[BaseModel]:
    found: list[BaseModel] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, BaseModel):
            found.append(item)
            stack.extend(item.__dict__.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    return found


def test_the_models_of_a_read_case_share_one_fields_set_per_class() -> None:
    case = ns.read(LOG, jobs=1)
    models = _models(case)
    assert len(models) > 100
    by_class: dict[type, set[int]] = {}
    for model in models:
        assert isinstance(model, Record), type(model)
        assert model.model_fields_set == set(type(model).model_fields)
        by_class.setdefault(type(model), set()).add(id(model.__pydantic_fields_set__))
    assert all(len(ids) == 1 for ids in by_class.values()), {c.__name__: len(i) for c, i in by_class.items()}
    assert len(by_class[Evidence]) == 1 and sum(isinstance(m, Evidence) for m in models) > 50


def test_assigning_copying_and_json_behave_as_before() -> None:
    first = Evidence(source="a.log", line=1, text="x")
    second = Evidence(source="b.log", line=2, text="y")
    first.line = 7  # pydantic adds the name to the shared set: it is there already
    assert second.model_fields_set == {"source", "line", "text"} and first.line == 7
    copy = first.model_copy(update={"text": "z"})
    assert copy.model_fields_set is not first.model_fields_set and copy.text == "z" and first.text == "x"
    assert Evidence.model_validate_json(first.model_dump_json()) == first
    assert Evidence.model_validate_json(first.model_dump_json()).model_fields_set is second.model_fields_set
    case = Case(ncclscope_version="0")
    assert Case.model_validate_json(case.model_dump_json()) == case


def test_a_text_analysis_builds_no_schema_of_the_whole_case_and_its_json_validates_back() -> None:
    # The Case and the Analysis are made unvalidated (Assembly, engine.analyze): validating them builds the
    # schema of every model they hold, a tenth of a small `analyze`'s start-up, which only JSON output needs.
    # A fresh process: another test here may have built those schemas already.
    code = (
        "import ncclscope as ns; from ncclscope.model import Analysis, Case\n"
        f"analysis = ns.analyze(ns.read({str(LOG)!r}, jobs=1))\n"
        "print(Case.__pydantic_complete__, Analysis.__pydantic_complete__, len(analysis.findings) > 0)\n"
        "again = Analysis.model_validate_json(analysis.model_dump_json())\n"
        "print(again == analysis, again.case == analysis.case)\n"
    )
    run = subprocess.run([sys.executable, "-W", "error", "-c", code], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split("\n")[:2] == ["False False True", "True True"]
