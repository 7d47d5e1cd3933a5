"""Issue 44: NCCL 2.30's parameter registry dump (`ncclparam -l`, ncclParamDumpAll) read by its grammar: the
parameters set by anything but their default are settings that ENV001/ENV002 judge."""

from __future__ import annotations

from pathlib import Path

from conftest import analysis_of, run_cli

DUMP = "fixtures/nccl/v2_30_param_dump.txt"


def test_the_dump_is_read_whole_and_its_set_parameters_are_settings() -> None:
    case = analysis_of(DUMP).case
    (source,) = case.sources
    assert source.kinds == ["param_dump"] and not source.problems and not source.unrecognized
    # the shell line sets the same values first; the dump's NCCL_SET_THREAD_NAME prints `true`, read as 1
    assert sorted((e.name, e.value) for e in case.env) == [("NCCL_DEBUG", "WARN"), ("NCCL_SET_THREAD_NAME", "1")]


def test_a_dump_alone_names_where_its_settings_come_from(tmp_path: Path) -> None:
    lines = (Path(__file__).resolve().parent.parent / DUMP).read_text().splitlines()[1:-2]  # no shell lines
    dump = tmp_path / "params.txt"
    dump.write_text("\n".join(lines) + "\n")
    found = [f for f in analysis_of(dump).findings if f.code == "ENV001"]
    assert [f.message for f in found] == [
        f"NCCL_SET_THREAD_NAME=1 on NCCL's parameter dump at {dump}:23 names NCCL threads: a documented configuration"
        " or tuning knob"
    ]
    settings = analysis_of(dump).case.env
    assert {(e.name, e.origin) for e in settings} == {
        ("NCCL_DEBUG", "param_dump"),
        ("NCCL_SET_THREAD_NAME", "param_dump"),
    }


def test_lines_of_the_dumps_shape_outside_a_dump_are_not_taken(tmp_path: Path) -> None:
    stray = tmp_path / "stray.txt"
    stray.write_text("    Current value=1 set_by=EnvPlugin default=0\n")
    result = run_cli("parse", "--format", "json", str(stray))
    assert b"param_dump" not in result.stdout
