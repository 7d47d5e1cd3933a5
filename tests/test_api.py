"""The Python API: ns.read, ns.analyze, case.frames(), analysis.frames(), and its doctests."""

from __future__ import annotations

import doctest
import importlib
import subprocess
import sys
import warnings
from pathlib import Path

import pandas as pd
import pytest

import ncclscope as ns
from ncclscope.model import frames as frames_module
from ncclscope.model.frames import COLUMNS

from conftest import FIXTURES, REPO

# One input of each kind a frame is built from: a multi-host IB log (connections, ranks, settings), an
# nccl-tests table with device lines (benchmarks, ranks) and a socket-fallback log (findings).
INPUTS = [
    FIXTURES / "nccl" / "v2_12_two_hosts_ib_gdr.log",
    FIXTURES / "nccl_tests" / "v2_17_unified_8xh100.txt",
    FIXTURES / "nccl" / "v2_26_socket_fallback.log",
    FIXTURES / "inspector" / "straggler_4ranks",  # the job's own collectives (job_collectives)
]


@pytest.fixture(scope="module")
def analysis() -> ns.Analysis:
    return ns.analyze(ns.read(*INPUTS, jobs=1))


@pytest.mark.parametrize("module", ["ncclscope", "ncclscope.api", "ncclscope.model.frames"])
def test_the_docstring_examples_run(module: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # the examples name fixtures by their path in the repository
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0


def test_every_frame_has_the_documented_columns_and_dtypes(analysis: ns.Analysis) -> None:
    frames = analysis.frames()
    assert list(frames) == list(COLUMNS)
    for name, spec in COLUMNS.items():
        df = frames[name]
        assert len(df) > 0, name
        assert list(df.columns) == [column for column, _, _ in spec], name
        assert [str(t) for t in df.dtypes] == [dtype for _, dtype, _ in spec], name


def test_a_case_without_some_kinds_still_gives_every_frame_typed_and_empty() -> None:
    frames = ns.read(FIXTURES / "topo" / os_listdir_first("topo"), jobs=1).frames()
    assert frames.benchmarks.empty and frames.findings.empty
    for name, spec in COLUMNS.items():
        assert [str(t) for t in frames[name].dtypes] == [dtype for _, dtype, _ in spec], name


def os_listdir_first(folder: str) -> str:
    return sorted(p.name for p in (FIXTURES / folder).iterdir() if p.suffix == ".txt")[0]


def test_benchmark_rows_equal_the_cases_rows(analysis: ns.Analysis) -> None:
    df = analysis.case.frames("benchmarks")
    rows = [(run, row) for run in analysis.case.benchmarks for row in run.rows]
    assert len(df) == len(rows)
    for (run, row), record in zip(rows, df.itertuples(index=False), strict=True):
        assert (record.source, record.line, record.collective, record.size, record.count) == (
            run.source,
            run.line,
            run.collective,
            row.size,
            row.count,
        )
        assert record.hosts == ",".join(dict.fromkeys(d.host for d in run.devices))
        assert record.oop_busbw == row.out_of_place.busbw and record.ip_busbw == row.in_place.busbw
        assert record.busbw == max(row.out_of_place.busbw, row.in_place.busbw)
        assert record.oop_time_us == row.out_of_place.time_us and record.ip_wrong == row.in_place.wrong
        assert record.row_line == row.line


def test_connections_equal_the_edges_and_name_their_nics(analysis: ns.Analysis) -> None:
    df = analysis.frames().connections
    edges = analysis.case.edges
    assert len(df) == len(edges)
    assert df[["from_rank", "to_rank", "transport", "channels"]].values.tolist() == [
        [e.from_rank, e.to_rank, e.transport, e.channels] for e in edges
    ]
    net = df[df.transport == "NET/IB"]
    assert len(net) > 0 and set(net.nic_name) == {"mlx5_0", "mlx5_1"}


def test_ranks_come_from_communicators_and_nccl_tests_device_lines(analysis: ns.Analysis) -> None:
    df = analysis.frames().ranks
    members = [(c.id, r.rank, r.host, r.bus_id) for c in analysis.case.communicators for r in c.ranks]
    devices = [(r.rank, r.host, r.bus_id) for run in analysis.case.benchmarks for r in run.devices]
    tests_rows = df[df.communicator.str.startswith("nccl-tests:")]
    assert len(df) == len(members) + len(devices)
    assert tests_rows[["rank", "host", "bus_id"]].values.tolist() == [list(d) for d in devices]
    ib = df[df.source.str.endswith("v2_12_two_hosts_ib_gdr.log")]
    assert ib.set_index("rank").loc[2, "nic"] == "mlx5_1"  # rank 2's NET lines go through NIC 1
    assert set(ib.init) == {"complete"}


def test_settings_have_one_row_per_setting_and_host(analysis: ns.Analysis) -> None:
    df = analysis.frames().settings
    assert len(df) == sum(max(1, len(s.hosts)) for s in analysis.case.env)
    hca = df[df.variable == "NCCL_IB_HCA"]
    assert sorted(hca.host) == ["gpu-a07", "gpu-a08"] and set(hca.value) == {"mlx5_0,mlx5_1"}


def test_findings_equal_the_analysis(analysis: ns.Analysis) -> None:
    df = analysis.frames("findings")
    assert df[["code", "severity", "message"]].values.tolist() == [
        [f.code, f.severity, f.message] for f in analysis.findings
    ]
    net001 = df[df.code == "NET001"].iloc[0]
    first = next(f for f in analysis.findings if f.code == "NET001").evidence[0]
    assert net001.evidence == f"{first.source}:{first.line}" and net001.evidence_text == first.text


def test_a_case_frames_findings_empty_and_an_unknown_frame_is_named() -> None:
    frames = ns.read(INPUTS[0], jobs=1).frames()
    assert frames.findings.empty
    with pytest.raises(KeyError, match="frames are benchmarks"):
        frames["edges"]


def test_read_warns_for_an_unusable_input_and_reads_the_rest(tmp_path: Path) -> None:
    missing = tmp_path / "nope.log"
    with pytest.warns(ns.ReadWarning, match="nope.log"):
        case = ns.read(INPUTS[1], missing, jobs=1)
    assert case.benchmarks


def test_read_raises_when_nothing_is_usable(tmp_path: Path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_text("")
    with pytest.raises(ns.ReadError) as caught:
        ns.read(empty, tmp_path / "missing.log")
    assert any("missing.log" in m for m in caught.value.messages)
    with pytest.raises(ns.ReadError):
        ns.read()


def test_analyze_takes_a_path_a_list_or_a_case() -> None:
    by_path = ns.analyze(str(INPUTS[2]), select=["NET001"], jobs=1)
    by_list = ns.analyze([INPUTS[2]], select=["NET001"], jobs=1)
    by_case = ns.analyze(ns.read(INPUTS[2], jobs=1), select=["NET001"])
    assert [f.code for f in by_path.findings] == [f.code for f in by_list.findings] == ["NET001"]
    assert by_case.findings[0].message == by_path.findings[0].message


def test_the_readme_lists_the_columns_as_the_code_declares_them() -> None:
    readme = (REPO / "README.md").read_text()
    begin = readme.index("\n", readme.index("<!-- frames:begin")) + 1
    assert readme[begin : readme.index("<!-- frames:end")] == frames_module.describe()


def test_importing_ncclscope_loads_neither_pandas_nor_the_parser() -> None:
    code = (
        "import sys, ncclscope; print(sorted(m for m in ('pandas', 'ncclscope.model', 'ncclscope.case.read') "
        "if m in sys.modules)); print(sorted(ncclscope.__all__))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "[]"
    assert "read" in out[1] and "analyze" in out[1]


def test_every_public_name_resolves_and_the_package_is_typed() -> None:
    for name in ns.__all__:
        assert getattr(ns, name) is not None
    assert (Path(ns.__file__).parent / "py.typed").exists()
    with pytest.raises(AttributeError):
        ns.no_such_name  # noqa: B018


def test_frames_keep_missing_values_as_na_not_nan() -> None:
    df = frames_module.frame("ranks", [("c", None, 0, "h", None, None, None, None, None, "listed", None, None)])
    assert df["nranks"].isna().all() and str(df["nranks"].dtype) == "Int64"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert pd.isna(df.loc[0, "pid"])
