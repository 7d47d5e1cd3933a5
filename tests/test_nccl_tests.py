"""nccl-tests output: text tables of every generation (formats.md C.2-C.11) and the -J JSON (C.7).

The inline examples are written from the printf formats of each nccl-tests tag; the fixtures under
fixtures/nccl_tests/ are whole outputs as users paste them.
"""

# The examples keep nccl-tests' real column widths, so their lines are longer than the limit.
# ruff: noqa: E501

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ncclscope.model import BenchmarkRun
from ncclscope.parse.nccl_tests import NcclTestsReader, parse_nccl_tests_json
from ncclscope.parse.sniff import nccl_tests_json as looks_like_nccl_tests_json

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "nccl_tests"


def read(text: str, source: str = "paste.txt") -> list[BenchmarkRun]:
    reader = NcclTestsReader(source)
    for lineno, line in enumerate(text.split("\n"), 1):
        reader.feed(lineno, line)
    return reader.finish()


def claimed(text: str) -> list[bool]:
    reader = NcclTestsReader("paste.txt")
    flags = [reader.feed(lineno, line) for lineno, line in enumerate(text.split("\n"), 1)]
    reader.finish()
    return flags


# What the driver does before feed(): NCCL log lines are not fed, and an NCCL record glued to the
# end of a result row is cut off (the row part alone is fed).
_NCCL_RECORD = re.compile(r"[A-Za-z][\w.-]*:\d+:\d+ \[\d+\] NCCL (?:INFO|WARN) .*$")
_NCCL_BANNER = re.compile(r"NCCL version \S+$")


def driver_lines(text: str) -> list[tuple[int, str]]:
    lines = []
    for lineno, line in enumerate(text.split("\n"), 1):
        line = _NCCL_RECORD.sub("", line)
        if line.strip() and not _NCCL_BANNER.fullmatch(line):
            lines.append((lineno, line))
    return lines


def read_fixture(name: str) -> list[BenchmarkRun]:
    reader = NcclTestsReader(name)
    for lineno, line in driver_lines((FIXTURES / name).read_text(encoding="utf-8")):
        reader.feed(lineno, line)
    return reader.finish()


# ---------------------------------------------------------------------------------------------
# Inline examples, one per generation

V2_19 = """\
# nccl-tests version 2.19.6 nccl-headers=22803 nccl-library=22803
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0 unalign: 0
#
# Using devices
#  Rank  0 Group  0 Pid  41021 on   gpunode7 device  0 [0000:18:00] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid  41022 on   gpunode7 device  1 [0000:2a:00] NVIDIA H100 80GB HBM3
#  Rank  2 Group  0 Pid  41023 on   gpunode7 device  2 [0000:3a:00] NVIDIA H100 80GB HBM3
#  Rank  3 Group  0 Pid  41024 on   gpunode7 device  3 [0000:5d:00] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place          
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong 
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)         
           8             2     float     sum      -1    17.41    0.00    0.00       0    16.93    0.00    0.00       0
          16             4     float     sum      -1    17.02    0.00    0.00       0    16.88    0.00    0.00       0
   134217728      33554432     float     sum      -1   1001.5  134.02  201.03       0   1000.2  134.19  201.29       0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 67.05 
#
# Collective test concluded: all_reduce_perf
#

"""  # noqa: W291

V2_11_ALL_REDUCE = """\
# nThread 1 nGpus 8 minBytes 8 maxBytes 1048576 step: 2(factor) warmup iters: 5 iters: 20 validation: 1 
#
# Using devices
#   Rank  0 Pid  12001 on    dgxa100 device  0 [0x07] A100-SXM4-40GB
#   Rank  1 Pid  12001 on    dgxa100 device  1 [0x0f] A100-SXM4-40GB
#
#                                                       out-of-place                       in-place          
#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)                        (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       
           8             2     float     sum    21.05    0.00    0.00  0e+00    20.87    0.00    0.00  0e+00
     1048576        262144     float     sum    40.12   26.14   45.74  4e-07    39.80   26.35   46.11  4e-07
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 22.9 
#
"""  # noqa: W291

V1 = """\
nThread 1 nGpus 2 minBytes 8 maxBytes 1048576 step: 2(factor) warmup iters: 5 iters: 20 validation: 1 
# NCCL Tests compiled with NCCL 2.1
# Using devices
#   Rank  0 on    dgxbox1 device  0 [0x06] Tesla V100-SXM2-16GB
#   Rank  1 on    dgxbox1 device  1 [0x07] Tesla V100-SXM2-16GB

#                                                 out-of-place                    in-place
#      bytes             N    type      op     time  algbw  busbw      res     time  algbw  busbw      res
           8             2   float     sum    0.031   0.00   0.00    0e+00    0.030   0.00   0.00    0e+00
     1048576        262144   float     sum    0.105   9.99   9.99    0e+00    0.104  10.08  10.08    0e+00
 Out of bounds values : 0 OK
 Avg bus bandwidth    : 5.0175 

"""  # noqa: W291

HEADER_13 = """\
#                                                              out-of-place                       in-place          
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong 
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)         
"""  # noqa: W291


def test_v2_19_run_is_read_whole():
    [run] = read(V2_19)
    assert run.collective == "all_reduce"
    assert run.nranks == 4
    assert run.layout == "v2.13+"
    assert (run.nthreads, run.ngpus, run.min_bytes, run.max_bytes) == (1, 1, 8, 134217728)
    assert (run.warmup_iters, run.iters) == (5, 20)
    assert (run.nccl_tests_version, run.nccl_headers, run.nccl_library) == ("2.19.6", 22803, 22803)
    assert len(run.rows) == 3
    assert run.avg_busbw == pytest.approx(67.05)
    assert (run.out_of_bounds, run.out_of_bounds_ok) == (0, True)
    assert run.line == 1


def test_v2_19_row_cells_become_fields():
    [run] = read(V2_19)
    row = run.rows[-1]
    assert (row.size, row.count, row.type, row.redop, row.root, row.line) == (
        134217728,
        33554432,
        "float",
        "sum",
        -1,
        16,
    )
    assert (row.out_of_place.time_us, row.out_of_place.algbw, row.out_of_place.busbw) == (
        1001.5,
        134.02,
        201.03,
    )
    assert (row.in_place.time_us, row.in_place.algbw, row.in_place.busbw) == (1000.2, 134.19, 201.29)
    assert row.out_of_place.wrong == 0 and row.in_place.wrong == 0


def test_device_lines_become_test_devices():
    [run] = read(V2_19)
    device = run.devices[1]
    assert (device.rank, device.group, device.pid, device.host) == (1, 0, 41022, "gpunode7")
    assert (device.cuda_dev, device.bus_id, device.name) == (1, "0000:2a:00", "NVIDIA H100 80GB HBM3")


def test_run_evidence_is_the_column_header():
    [run] = read(V2_19)
    assert run.evidence is not None
    assert run.evidence.line == 12
    assert "#wrong" in run.evidence.text


def test_every_line_of_the_output_is_claimed_and_others_are_not():
    text = V2_19.replace("#\n# Using devices", "#\nPATH=/usr/bin\n# Using devices")
    flags = claimed(text)
    lines = text.split("\n")
    assert [line for line, flag in zip(lines, flags, strict=True) if not flag] == ["PATH=/usr/bin", "", ""]


def test_old_error_column_goes_to_wrong():
    [run] = read(V2_11_ALL_REDUCE)
    assert run.layout == "v2.0-2.11"
    assert run.rows[1].out_of_place.wrong == pytest.approx(4e-07)
    assert run.rows[0].in_place.wrong == 0.0
    assert run.nranks == 8  # nGpus 8 in the header: the two device lines are a cut list


def test_old_all_reduce_is_recognised_by_its_bandwidth_factor():
    [run] = read(V2_11_ALL_REDUCE)
    assert run.collective == "all_reduce"


def test_v2_0_device_lines_have_pid_but_no_group():
    [run] = read(V2_11_ALL_REDUCE)
    device = run.devices[0]
    assert (device.group, device.pid, device.bus_id, device.name) == (None, 12001, "0x07", "A100-SXM4-40GB")


def test_v1_layout_times_are_converted_from_ms():
    [run] = read(V1)
    assert run.layout == "v1"
    row = run.rows[1]
    assert (row.size, row.count, row.type, row.redop) == (1048576, 262144, "float", "sum")
    assert row.out_of_place.time_us == pytest.approx(105.0)
    assert row.in_place.busbw == pytest.approx(10.08)
    assert row.out_of_place.wrong == 0.0


def test_v1_preamble_and_footer_without_hash():
    [run] = read(V1)
    assert (run.nthreads, run.ngpus, run.iters) == (1, 2, 20)
    assert run.nccl_headers == 2100
    assert run.avg_busbw == pytest.approx(5.0175)
    assert run.out_of_bounds == 0
    assert [d.pid for d in run.devices] == [None, None]
    assert run.nranks == 2


def test_v1_broadcast_has_a_single_measurement():
    text = """\
#                                                 out-of-place
#      bytes             N    type    root     time  algbw  busbw      res
     1048576        262144   float       0    0.210   4.99   4.99    0e+00
"""
    [run] = read(text)
    assert run.collective == "broadcast"
    row = run.rows[0]
    assert row.root == 0 and row.out_of_place.algbw == pytest.approx(4.99)
    assert row.in_place.time_us is None


@pytest.mark.parametrize(
    ("columns", "cells", "collective", "redop", "root"),
    [
        ("size count type redop root", "65536 4096 float sum 0", "reduce", "sum", 0),
        # a root column but busbw/algbw = 7/8 where size = count x 4: no test prints that
        ("size count type root", "65536 16384 float 0", None, "", 0),
        ("size count type", "65536 2048 float", "all_gather", "", -1),
        # size = 8 x count x 4 and busbw/algbw = 7/8 under a redop header with an op: reduce_scatter alone
        ("size count type redop", "65536 2048 float sum", "reduce_scatter", "sum", -1),
    ],
)
def test_per_collective_headers_of_v2_0_to_v2_11(columns, cells, collective, redop, root):
    n = len(columns.split())
    text = (
        "#"
        + " ".join(columns.split())
        + "  time algbw busbw error  time algbw busbw error\n"
        + "#    (B) (elements)"
        + " " * (10 * (n - 2))
        + "(us) (GB/s) (GB/s) (us) (GB/s) (GB/s)\n"
        + f"  {cells}   12.00   5.46   4.78  0e+00   11.90   5.51   4.82  0e+00\n"
    )
    [run] = read(text)
    assert run.layout == "v2.0-2.11"
    row = run.rows[0]
    assert (row.size, row.redop, row.root, row.out_of_place.time_us, row.in_place.busbw) == (
        65536,
        redop,
        root,
        12.0,
        4.82,
    )
    assert run.collective == collective


def test_empty_redop_cell_of_v2_13_0_leaves_one_token_fewer():
    text = HEADER_13 + (
        "        1024            32     float              -1    25.31    0.04    0.04       0    24.87    0.04    0.04       0\n"
        "        2048            64     float              -1    25.90    0.08    0.07       0    25.10    0.08    0.07       0\n"
    )
    [run] = read(text)
    assert [row.redop for row in run.rows] == ["", ""]
    assert run.rows[0].root == -1
    assert run.rows[1].in_place.time_us == pytest.approx(25.10)


def test_none_redop_and_na_wrong():
    text = HEADER_13 + (
        "     1048576        262144     float    none      -1    55.20   19.00   16.62     N/A    54.10   19.38   16.96     N/A\n"
    )
    [run] = read(text)
    row = run.rows[0]
    assert row.redop == "none"
    assert row.out_of_place.wrong is None and row.in_place.wrong is None


def test_exponent_numbers_anywhere_in_a_row():
    text = HEADER_13 + (
        "  8589934592    2147483648     float     sum      -1  1.2e+05   7e+01  1e+02       0  1.1e+05   78.09  136.66       0\n"
    )
    [run] = read(text)
    row = run.rows[0]
    assert row.out_of_place.time_us == pytest.approx(1.2e5)
    assert row.out_of_place.algbw == pytest.approx(70.0)
    assert row.out_of_place.busbw == pytest.approx(100.0)
    assert row.in_place.time_us == pytest.approx(1.1e5)


def test_cputime_and_timestamp_columns():
    text = (
        "#       size         count      type   redop    root  cputime   algbw   busbw  #wrong  cputime   algbw   busbw"
        "  #wrong            timestamp\n"
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)"
        "           %Y-%m-%d %H:%M:%S\n"
        "        4096          1024     float     sum      -1    30.10    0.14    0.24       0    29.80    0.14    0.24"
        "       0  2025-03-04 05:06:07\n"
    )
    [run] = read(text)
    assert run.time_label == "cputime"
    row = run.rows[0]
    assert row.timestamp == "2025-03-04 05:06:07"
    assert row.out_of_place.time_us == pytest.approx(30.10)
    assert row.in_place.wrong == 0


def test_per_iteration_columns_go_to_extra():
    text = (
        "#                                  out-of-place (+ per-iteration)                                in-place (+ per-iteration)\n"
        "#       size         count      type   redop    root     time   algbw   busbw  #wrong    i_min    i_max    i_p99"
        "    i_cv%     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv% \n"
        "     1048576        262144     float     sum      -1    60.12   17.44   30.52       0    58.90    75.31    74.02"
        "     4.12    59.80   17.53   30.68       0    58.10    70.00    69.50     3.90\n"
    )
    [run] = read(text)
    row = run.rows[0]
    assert row.out_of_place.extra == {"i_min": 58.90, "i_max": 75.31, "i_p99": 74.02, "i_cv%": 4.12}
    assert row.in_place.extra["i_cv%"] == pytest.approx(3.90)
    assert row.in_place.busbw == pytest.approx(30.68)


def test_newest_version_line_with_git_hash():
    text = "# nccl-tests version 2.20.0 (a1b2c3d) nccl-headers=23102 nccl-library=23102\n" + HEADER_13
    [run] = read(text)
    assert (run.nccl_tests_version, run.nccl_headers, run.nccl_library) == ("2.20.0", 23102, 23102)


def test_json_output_line_opens_the_run():
    text = "# Writing JSON output to /tmp/ar.json\n" + V2_19
    flags = claimed(text)
    assert flags[:2] == [True, True]
    [run] = read(text)
    assert run.line == 1 and run.collective == "all_reduce"


def test_footer_memory_usage_and_error_lines():
    text = V2_19.replace(
        "# Collective test concluded: all_reduce_perf\n#\n",
        "# Collective test concluded: all_reduce_perf\n"
        "# GPU memory usage     : Initialization 1.01 GB | User-Allocated 2.00 GB | Collective 64.0 MB | Total  3.07 GB\n"
        "#\n# error: unhandled system error\n",
    )
    [run] = read(text)
    assert run.errors == ["unhandled system error"]
    assert all(claimed(text)[-5:-2])


def test_avg_busbw_check_failure_is_an_error():
    text = HEADER_13 + "# Out of bounds values : 3 FAILED\n# Avg bus bandwidth    : 1.5 FAILED\n"
    [run] = read(text)
    assert (run.out_of_bounds, run.out_of_bounds_ok, run.avg_busbw) == (3, False, 1.5)
    assert len(run.errors) == 1


# ---------------------------------------------------------------------------------------------
# Failures, several runs, tables without header, noise


FAILURE_MID_TABLE = (
    HEADER_13
    + """\
        1024           256     float     sum      -1    25.31    0.04    0.07       0    24.87    0.04    0.07       0
gpunode7: Test NCCL failure common.cu:1204 'unhandled cuda error (run with NCCL_DEBUG=INFO for details) / Cuda failure 'an illegal memory access'
 .. gpunode7 pid 41021: Test failure common.cu:915
        2048           512     float     sum      -1    25.90    0.08    0.14       0    25.10    0.08    0.14       0
"""
)


def test_failure_lines_are_collected_and_do_not_end_the_run():
    [run] = read(FAILURE_MID_TABLE)
    assert len(run.rows) == 2
    assert [(f.evidence.line, f.kind, f.host, f.pid) for f in run.failures] == [
        (5, "nccl", "gpunode7", None),
        (6, "unwind", "gpunode7", 41021),
    ]
    assert run.failures[0].evidence.source == "paste.txt"


@pytest.mark.parametrize(
    ("line", "kind", "host", "location", "message"),
    [
        ("node01: Test CUDA failure common.cu:891 'out of memory'", "cuda", "node01", "common.cu:891", "out of memory"),
        (" .. node01: Test failure common.cu:400", "unwind", "node01", "common.cu:400", ""),
        (
            "node01: Test timeout (300s) /opt/nccl-tests/src/common.cu:512",
            "timeout",
            "node01",
            "/opt/nccl-tests/src/common.cu:512",
            "",
        ),
        (
            "NCCL failure common.cu:386 'unhandled system error'",
            "nccl",
            None,
            "common.cu:386",
            "unhandled system error",
        ),
    ],
)
def test_every_failure_shape_is_recognised(line, kind, host, location, message):
    [run] = read(line)
    [failure] = run.failures
    assert failure.evidence.text == line
    assert (failure.kind, failure.host, failure.location, failure.message) == (kind, host, location, message)


def test_failure_glued_to_a_cut_row_is_collected():
    text = (
        HEADER_13
        + "    33554432       8388608     float     sum      -1node01: Test NCCL failure common.cu:1204 'unhandled cuda error'\n"
    )
    [run] = read(text)
    assert run.rows == []
    assert [(f.evidence.line, f.host) for f in run.failures] == [(4, "node01")]


def test_cut_row_inside_a_table_is_not_a_row_and_does_not_start_a_run():
    lines = V2_19.split("\n")
    cut = lines[14][:70]
    text = "\n".join([*lines[:15], cut, *lines[15:]])
    assert claimed(text)[15] is False
    [run] = read(text)
    assert len(run.rows) == 3


def test_failure_is_not_claimed_from_prose():
    assert claimed("The Test failure of yesterday was a CUDA failure, no big deal.") == [False]


def test_non_mpi_build_gives_one_run_per_process():
    block = V2_19.split("# Using devices")[0] + (
        "# Using devices\n#  Rank  0 Group  0 Pid  41021 on   gpunode7 device  0 [0000:18:00] NVIDIA H100 80GB HBM3\n"
        + HEADER_13
        + "        1024           256     float     sum      -1    25.31    0.04    0.00       0    24.87    0.04    0.00       0\n"
        + "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0 \n#\n"
    )
    runs = read(block + block)
    assert len(runs) == 2
    assert [run.devices[0].rank for run in runs] == [0, 0]
    assert [run.nranks for run in runs] == [1, 1]
    assert runs[1].line == block.count("\n") + 1


def test_second_header_without_preamble_starts_a_new_run():
    row = "        1024           256     float     sum      -1    25.31    0.04    0.07       0    24.87    0.04    0.07       0\n"
    runs = read(HEADER_13 + row + HEADER_13 + row + row)
    assert [len(run.rows) for run in runs] == [1, 2]


def test_headerless_rows_infer_the_unified_layout():
    text = (
        "some chat text before the paste\n"
        "     4194304       1048576     float     sum      -1    70.11   59.82  104.69       0    69.80   60.09  105.16       0\n"
        "     8388608       2097152     float     sum      -1    110.2   76.12  133.21       0    109.9   76.33  133.58       0\n"
    )
    [run] = read(text)
    assert run.layout == "headerless"
    assert len(run.rows) == 2
    assert run.rows[0].line == 2 and run.rows[1].in_place.busbw == pytest.approx(133.58)
    assert run.evidence is not None and run.evidence.line == 2
    assert run.collective == "all_reduce"


def test_table_starting_at_the_units_line():
    text = (
        HEADER_13.split("\n")[2]
        + "\n"
        + (
            "     4194304       1048576     float     sum      -1    70.11   59.82  104.69       0    69.80   60.09  105.16       0\n"
        )
    )
    [run] = read(text)
    assert run.layout == "headerless"
    assert run.line == 1
    assert len(run.rows) == 1


def test_numbers_that_only_look_like_a_row_are_no_table():
    assert read("10 20 apples and 30 oranges cost 1 2 3 4 5 6 dollars\n  1 2 3\n") == []


def test_interleaved_launcher_warnings_do_not_end_the_table():
    noise = [
        "--------------------------------------------------------------------------",
        "WARNING: There was an error initializing an OpenFabrics device.",
        "[1700000000.123456] [gpunode7:41021:0]  ucp_context.c:1100 UCX  WARN  network device 'mlx5_0:1' is not available",
        "[gpunode7:41021] 7 more processes have sent help message help-mpi-btl-openib.txt",
    ]
    lines = V2_19.split("\n")
    text = "\n".join(lines[:14] + noise + lines[14:])
    [run] = read(text)
    assert len(run.rows) == 3
    assert claimed(text)[14:18] == [False] * 4


def test_markdown_headings_are_not_nccl_tests():
    assert read("# Results\n#\n# size of the cluster\n# Rank of players\n") == []


# ---------------------------------------------------------------------------------------------
# Fixtures: whole outputs as pasted (fixtures/nccl_tests/)


@pytest.mark.parametrize(
    ("name", "collective", "nranks", "layout", "rows", "avg_busbw"),
    [
        ("v2017_layout.txt", "all_reduce", 4, "v1", 25, 17.1871),
        ("v2_11_all_gather.txt", "all_gather", 8, "v2.0-2.11", 23, 65.7766),
        ("v2_11_reduce_root.txt", "reduce", 8, "v2.0-2.11", 25, 44.6221),
        ("v2_13_empty_redop_alltoall.txt", "alltoall", 8, "v2.13+", 19, 9.79066),
        ("v2_17_unified_8xh100.txt", "all_gather", 8, "v2.13+", 31, 133.475),
        ("v2_19_exponent_numbers.txt", "all_reduce", 16, "v2.13+", 15, 1.04628),
        ("v2_19_cputime_timestamps.txt", "reduce_scatter", 4, "v2.13+", 17, 7.76644),
        ("v2_19_per_iter_columns.txt", "all_reduce", 8, "v2.13+", 11, 331.54),
        ("v2_20_newest_header.txt", "all_reduce", 8, "v2.13+", 30, 228.252),
        ("old_size_all_gpus.txt", "all_gather", 8, "v2.0-2.11", 25, 32.548),
        ("interleaved_nccl_info.txt", "alltoall", 4, "v2.13+", 23, 42.8772),
        ("mpi_ucx_warnings.txt", "all_reduce", 16, "v2.13+", 31, 123.799),
        ("one_rank_busbw_zero.txt", "all_reduce", 1, "v2.13+", 25, 0.0),
        ("wrong_results.txt", "reduce_scatter", 8, "v2.13+", 21, 131.299),
        ("multi_block_types.txt", "all_reduce", 4, "v2.13+", 120, 70.6294),
    ],
)
def test_fixture_is_one_run(name, collective, nranks, layout, rows, avg_busbw):
    [run] = read_fixture(name)
    assert (run.collective, run.nranks, run.layout, len(run.rows)) == (collective, nranks, layout, rows)
    assert run.avg_busbw == pytest.approx(avg_busbw)
    assert run.evidence is not None and run.evidence.source == name
    assert run.failures == []


def test_fixture_v2017_row_times_are_microseconds():
    run = read_fixture("v2017_layout.txt")[0]
    row = run.rows[-1]
    assert (row.size, row.count, row.type, row.redop, row.root, row.line) == (
        134217728,
        33554432,
        "float",
        "sum",
        -1,
        36,
    )
    assert (row.out_of_place.time_us, row.out_of_place.algbw, row.out_of_place.busbw) == (3798.0, 35.34, 53.01)
    assert (row.in_place.time_us, row.in_place.wrong) == (3998.0, 2e-06)
    assert (run.nthreads, run.ngpus, run.nccl_headers, run.out_of_bounds) == (1, 4, 2000, 0)
    assert [device.pid for device in run.devices] == [None] * 4


def test_fixture_v2_11_error_column_and_its_na_rerun():
    first, second = read_fixture("v2_11_all_reduce_error_col.txt")
    assert (first.collective, first.nranks, first.layout, len(first.rows)) == ("all_reduce", 8, "v2.0-2.11", 25)
    assert (second.line, len(second.rows), second.avg_busbw) == (45, 25, 54.2981)  # from its command line
    row = first.rows[-1]
    assert (row.size, row.redop, row.out_of_place.time_us, row.out_of_place.wrong, row.in_place.wrong) == (
        134217728,
        "sum",
        1143.7,
        5e-07,
        4e-07,
    )
    assert second.rows[-1].out_of_place.wrong is None and second.rows[-1].in_place.wrong is None
    assert first.avg_busbw == pytest.approx(53.336)


def test_fixture_v2_11_reduce_has_redop_and_root():
    row = read_fixture("v2_11_reduce_root.txt")[0].rows[-1]
    assert (row.redop, row.root, row.out_of_place.busbw, row.in_place.time_us) == ("sum", 0, 181.14, 712.5)


def test_fixture_v2_13_empty_redop_row():
    run = read_fixture("v2_13_empty_redop_alltoall.txt")[0]
    row = run.rows[-1]
    assert (row.size, row.count, row.redop, row.root) == (268435456, 8388608, "", -1)
    assert (row.out_of_place.time_us, row.out_of_place.algbw, row.in_place.busbw, row.in_place.wrong) == (
        10705.0,
        25.08,
        21.24,
        None,  # alltoall checks no in-place result: N/A (nccl-tests src/alltoall.cu)
    )
    assert [device.host for device in run.devices].count("gpu-e02") == 4


def test_fixture_v2_17_none_redop_and_devices():
    run = read_fixture("v2_17_unified_8xh100.txt")[0]
    row = run.rows[-1]
    assert (row.size, row.count, row.redop, row.out_of_place.time_us, row.in_place.busbw) == (
        8589934592,
        268435456,
        "none",
        20990.9,
        373.25,
    )
    assert run.nccl_tests_version == "2.17.9"
    assert run.devices[0].bus_id.count(":") == 2


def test_fixture_v2_19_exponent_times():
    row = read_fixture("v2_19_exponent_numbers.txt")[0].rows[-1]
    assert (row.size, row.out_of_place.time_us, row.out_of_place.algbw, row.in_place.busbw) == (
        17179869184,
        2.8e7,
        0.6,
        1.13,
    )


def test_fixture_v2_19_cputime_and_timestamps():
    run = read_fixture("v2_19_cputime_timestamps.txt")[0]
    assert run.time_label == "cputime"
    row = run.rows[-1]
    assert (row.size, row.timestamp, row.out_of_place.time_us, row.in_place.algbw) == (
        67108864,
        "2025-03-01 10:12:09",
        2679.52,
        24.74,
    )
    assert all(row.timestamp for row in run.rows)


def test_fixture_v2_19_per_iteration_extras():
    row = read_fixture("v2_19_per_iter_columns.txt")[0].rows[-1]
    assert row.out_of_place.extra == {"i_min": 3966.43, "i_max": 4916.95, "i_p99": 4892.37, "i_cv%": 0.42}
    assert (row.in_place.time_us, row.in_place.busbw, row.in_place.extra["i_cv%"]) == (3921.4, 479.18, 2.42)


def test_fixture_v2_20_newest_header():
    run = read_fixture("v2_20_newest_header.txt")[0]
    assert (run.nccl_tests_version, run.nccl_headers, run.nccl_library) == ("2.20.0", 23007, 23007)
    row = run.rows[-1]
    assert (row.size, row.out_of_place.time_us, row.out_of_place.busbw, row.in_place.wrong) == (
        4294967296,
        10633.0,
        706.87,
        0.0,
    )


def test_fixture_wrong_results_out_of_bounds_failed():
    run = read_fixture("wrong_results.txt")[0]
    assert (run.out_of_bounds, run.out_of_bounds_ok) == (3, False)
    assert any((row.out_of_place.wrong or 0) > 0 or (row.in_place.wrong or 0) > 0 for row in run.rows)


def test_fixture_one_rank_has_zero_busbw():
    run = read_fixture("one_rank_busbw_zero.txt")[0]
    assert run.devices[0].rank == 0
    assert {row.out_of_place.busbw for row in run.rows} == {0.0}


def test_fixture_multi_block_types_stay_under_one_header():
    run = read_fixture("multi_block_types.txt")[0]
    assert len({(row.type, row.redop) for row in run.rows}) > 1
    assert run.rows[-1].type == "bfloat16" and run.rows[-1].redop == "mulsum"


def test_fixture_interleaved_nccl_info_keeps_the_row_glued_to_a_record():
    run = read_fixture("interleaved_nccl_info.txt")[0]
    assert 43 in [row.line for row in run.rows]
    row = next(row for row in run.rows if row.line == 43)
    assert (row.size, row.redop, row.in_place.wrong) == (4096, "none", 0.0)


def test_fixture_failure_mid_table():
    [run] = read_fixture("failure_mid_table.txt")
    assert (run.collective, run.nranks, len(run.rows)) == ("all_reduce", 16, 22)
    assert [failure.evidence.line for failure in run.failures] == list(range(48, 56))
    assert "Test NCCL failure common.cu:1204" in run.failures[0].evidence.text
    assert run.failures[0].host == "gpu-f03"  # glued to its cut row: "-1gpu-f03: Test ..."
    assert run.avg_busbw is None


def test_fixture_no_mpi_duplicate_headers_give_two_runs():
    runs = read_fixture("no_mpi_duplicate_headers.txt")
    assert len(runs) == 2
    assert [(run.collective, run.nranks, len(run.rows)) for run in runs] == [("all_reduce", 8, 11)] * 2
    for run in runs:
        assert len({(device.host, device.pid) for device in run.devices}) == 1
        assert [device.rank for device in run.devices] == list(range(8))
        sizes = [row.size for row in run.rows]
        assert sizes == sorted(sizes)
    assert {run.avg_busbw for run in runs} == {324.462, 327.644}


def test_fixture_headerless_rows_give_two_runs():
    first, second = read_fixture("headerless_rows.txt")
    assert (first.layout, first.line, len(first.rows), first.avg_busbw) == ("headerless", 1, 6, None)
    assert (second.layout, second.line, len(second.rows), second.avg_busbw) == ("headerless", 10, 11, 235.099)
    assert first.collective == second.collective == "all_reduce"
    assert second.rows[0].size == 1048576


@pytest.mark.parametrize(
    ("name", "avg_key", "nranks", "rows"),
    [("results_v1.json", "average_bus_bandwidith", 8, 11), ("results_v3.json", "average_bus_bandwidth", 16, 7)],
)
def test_fixture_json(name, avg_key, nranks, rows):
    text = (FIXTURES / name).read_text(encoding="utf-8")
    assert avg_key in text
    assert looks_like_nccl_tests_json(text[:4096])
    run = parse_nccl_tests_json(text, name)
    assert run is not None
    assert (run.collective, run.nranks, len(run.rows), run.layout) == ("all_reduce", nranks, rows, "json")
    assert (run.out_of_bounds, run.out_of_bounds_ok) == (0, True)
    assert run.avg_busbw is not None and run.avg_busbw > 300


def test_fixture_json_v3_per_iteration_extras():
    run = parse_nccl_tests_json((FIXTURES / "results_v3.json").read_text(encoding="utf-8"), "results_v3.json")
    assert run is not None
    extra = run.rows[-1].out_of_place.extra
    assert {"i_min", "i_max", "i_p99", "i_cv%"} <= extra.keys()
    assert extra["i_min"] <= run.rows[-1].out_of_place.time_us <= extra["i_max"]


MIXED = FIXTURES.parent / "mixed"


@pytest.mark.parametrize(
    ("name", "line", "collective", "nranks", "rows", "avg_busbw"),
    [
        ("tests_header_init_table_teardown.txt", 1, "reduce_scatter", 4, 20, 78.586),
        ("seed_like_4xh100.txt", 41, "all_reduce", 4, 28, 109.315),  # a run begins at its command line
        ("multi_host_job_problems.txt", 1, "all_reduce", 16, 28, 0.603324),
    ],
)
def test_mixed_fixture_has_one_run(name, line, collective, nranks, rows, avg_busbw):
    reader = NcclTestsReader(name)
    for lineno, text in driver_lines((MIXED / name).read_text(encoding="utf-8")):
        reader.feed(lineno, text)
    [run] = reader.finish()
    assert (run.line, run.collective, run.nranks, len(run.rows)) == (line, collective, nranks, rows)
    assert run.avg_busbw == pytest.approx(avg_busbw)


def test_environment_dump_and_topology_matrix_hold_no_run():
    reader = NcclTestsReader("env")
    flags = [
        reader.feed(n, t) for n, t in driver_lines((MIXED / "env_dump_then_matrix.txt").read_text(encoding="utf-8"))
    ]
    assert not any(flags)
    assert reader.finish() == []


# ---------------------------------------------------------------------------------------------
# Never raises


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=200), max_size=40))
def test_arbitrary_lines_never_raise(lines):
    reader = NcclTestsReader("fuzz")
    for lineno, line in enumerate(lines, 1):
        assert isinstance(reader.feed(lineno, line), bool)
    reader.finish()


_TOKEN = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(lambda f: f"{f:g}"),
    st.sampled_from(["float", "sum", "none", "N/A", "-1", "#wrong", "2025-01-01", "12:00:00", "(us)", "", "nan"]),
    st.text(alphabet="0123456789.e+-:/#abcN", max_size=8),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(_TOKEN, min_size=1, max_size=25), max_size=20))
def test_random_rows_after_a_valid_header_never_raise(rows):
    reader = NcclTestsReader("fuzz")
    for lineno, line in enumerate(HEADER_13.split("\n"), 1):
        reader.feed(lineno, line)
    for lineno, cells in enumerate(rows, 10):
        reader.feed(lineno, "  ".join(cells))
    reader.finish()


@settings(max_examples=200, deadline=None)
@given(
    size=st.integers(0, 2**40),
    time=st.floats(0.01, 1e7),
    algbw=st.floats(0, 1e4),
    busbw=st.floats(0, 1e4),
    wrong=st.integers(0, 10**6),
)
def test_rows_printed_by_v2_17_formats_read_back(size, time, algbw, busbw, wrong):
    def fmt(value: float, width: int) -> str:  # getFloatStr of src/util.cu
        for spec in (".2f", ".1f", ".0f"):
            text = f"{value:{width}{spec}}"
            if len(text) <= width:
                return text
        return f"{value:{width}.{1 if width >= 7 else 0}e}"

    body = f"  {fmt(time, 7)}  {fmt(algbw, 6)}  {fmt(busbw, 6)}  {wrong:6g}"
    line = f"{size:12d}  {size // 4:12d}  {'float':>8s}  {'sum':>6s}  {-1:6d}{body}{body}"
    [run] = read(HEADER_13 + line)
    row = run.rows[0]
    assert row.size == size
    assert row.out_of_place.time_us == pytest.approx(float(fmt(time, 7)))
    assert row.in_place.busbw == pytest.approx(float(fmt(busbw, 6)))
    assert row.in_place.wrong == float(f"{wrong:g}")


# ---------------------------------------------------------------------------------------------
# -J JSON


def json_output(misspelled: bool) -> str:
    avg_key, bw_key = ("average_bus_bandwidith", "bandwidith") if misspelled else ("average_bus_bandwidth", "bandwidth")
    device = {
        "rank": 0,
        "group": 0,
        "pid": 5150,
        "hostname": "gpunode7",
        "device": 0,
        "device_hex": "0000:18:00",
        "device_info": "NVIDIA H100 80GB HBM3",
    }
    place = {"time": 55.5, "alg_bw": 18.89, "bus_bw": 33.06, "nwrong": 0}
    data = {
        "version": 1,
        "start_time": "2025-03-04 05:06:07",
        "args": ["/opt/nccl-tests/build/all_reduce_perf", "-b", "8", "-e", "1M", "-g", "8", "-J", "out.json"],
        "env": ["HOME=/root"],
        "nccl_version": 22803,
        "config": {
            "nthreads": 1,
            "ngpus": 8,
            "minimum_bytes": 8,
            "maximum_bytes": 1048576,
            "step_factor": 2,
            "warmup_iters": 5,
            "iterations": 20,
            "devices": [device],
        },
        "results": [
            {
                "size": 1048576,
                "count": 262144,
                "type": "float",
                "redop": "sum",
                "root": "    -1",
                "out_of_place": place,
                "in_place": {**place, "nwrong": None},
                "actual_iterations": 20,
            },
        ],
        "out_of_bounds": {"count": 0, "okay": "true"},  # jsonBool() writes strings
        avg_key: {bw_key: 16.5, "okay": "unchecked"},
        "errors": [],
        "end_time": "2025-03-04 05:06:09",
    }
    return json.dumps(data, indent=2)


@pytest.mark.parametrize("misspelled", [True, False], ids=["v2.17.3-2.17.8", "v2.17.9+"])
def test_json_output_of_both_spellings(misspelled):
    text = json_output(misspelled)
    assert looks_like_nccl_tests_json(text[:4096])
    run = parse_nccl_tests_json(text, "out.json")
    assert run is not None
    assert (run.layout, run.collective, run.nranks, run.avg_busbw) == ("json", "all_reduce", 8, 16.5)
    assert (run.out_of_bounds, run.out_of_bounds_ok, run.nccl_library) == (0, True, 22803)
    row = run.rows[0]
    assert (row.size, row.count, row.type, row.redop, row.root) == (1048576, 262144, "float", "sum", -1)
    assert (row.out_of_place.time_us, row.out_of_place.busbw, row.in_place.wrong) == (55.5, 33.06, None)
    assert row.line == text[: text.index('"size"')].count("\n") + 1
    assert run.devices[0].bus_id == "0000:18:00"


def test_json_that_is_not_nccl_tests_gives_none():
    assert parse_nccl_tests_json('{"results": [1, 2], "name": "x"}', "x.json") is None
    assert parse_nccl_tests_json("[1, 2, 3]", "x.json") is None
    assert parse_nccl_tests_json("not json at all {", "x.json") is None
    assert not looks_like_nccl_tests_json('{"name": "package", "version": "1.0"}')


def test_truncated_json_of_a_run_that_died_keeps_its_results():
    text = json_output(False)
    cut = text[: text.index('"out_of_bounds"')]
    run = parse_nccl_tests_json(cut, "out.json")
    assert run is not None and len(run.rows) == 1 and run.avg_busbw is None


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_json_parser_never_raises(text):
    parse_nccl_tests_json(text, "fuzz.json")
    parse_nccl_tests_json('{"nccl_version": 1, "results": [' + text, "fuzz.json")
    looks_like_nccl_tests_json(text)


# ---------------------------------------------------------------------------------------------
# What a table says about itself when the output does not name its test or its ranks


def test_old_alltoall_table_alone_is_known_by_its_empty_redop_and_its_sizes():
    [run] = read_fixture("v2_11_alltoall_table_only.txt")
    assert (run.collective, run.nranks, len(run.rows), run.layout) == ("alltoall", 16, 8, "v2.0-2.11")
    assert "empty under a redop column" in run.inferred["collective"]
    assert "size = 16 x count" in run.inferred["nranks"]


def test_nccl1_test_binary_names_the_collective_and_its_device_lines_count_the_ranks():
    [run] = read_fixture("nccl1_single_process_test.txt")
    assert (run.line, run.collective, run.nranks, run.layout, len(run.rows)) == (1, "all_reduce", 4, "v1", 3)
    assert [d.host for d in run.devices] == ["", "", "", ""]
    assert run.inferred == {}  # named by its command line, counted by its device lines


def test_a_failure_before_any_preamble_ends_a_run_of_its_own():
    failed, table = read_fixture("v2_13_pasted_outside_fence.txt")
    assert (len(failed.failures), failed.rows, table.failures) == (2, [], [])
    assert (table.nranks, len(table.rows), len(table.devices)) == (3, 3, 3)


def test_in_place_checks_tell_all_reduce_from_sendrecv():
    """sum with root -1 and size = count x 4 is all_reduce or sendrecv, and busbw 0.00 cannot tell them apart;
    sendrecv checks no in-place result (nccl-tests src/sendrecv.cu: its in-place #wrong is N/A), so a number
    there says all_reduce, and N/A beside a checked out-of-place result says sendrecv."""
    table = read_fixture("v2_13_pasted_outside_fence.txt")[1]
    assert table.collective == "all_reduce"
    assert "in-place results checked" in table.inferred["collective"]
    rows = "\n".join(
        f"{size:>12} {size // 4:>13}     float     sum      -1    25.06    0.00    0.00       0    25.95    0.00    0.00"
        f"    {wrong}"
        for size in (8, 16, 32)
        for wrong in ["N/A"]
    )
    header = (
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw"
        " #wrong\n"
    )
    run = _run_of(HEADER + header + rows + "\n")
    assert run.collective == "sendrecv" and "in-place #wrong N/A" in run.inferred["collective"]


def test_a_table_whose_cells_fit_two_tests_leaves_the_collective_unknown():
    """With the data check off (-c 0) both #wrong cells are N/A: sum with root -1 and size = count x 4 stays
    all_reduce or sendrecv while busbw 0.00 cannot tell the bus factor."""
    rows = "\n".join(
        f"{size:>12} {size // 4:>13}     float     sum      -1    25.06    0.00    0.00     N/A    25.95    0.00    0.00"
        "     N/A"
        for size in (8, 16, 32)
    )
    header = (
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw"
        " #wrong\n"
    )
    run = _run_of(HEADER + header + rows + "\n")
    assert run.collective is None and "collective" not in run.inferred


def test_each_command_line_begins_a_run_named_after_its_binary():
    failed, cut, single = read_fixture("invocation_lines.txt")
    assert (failed.collective, failed.nranks, len(failed.failures), failed.rows) == ("hypercube", 8, 2, [])
    assert "nThread x nGpus" in failed.inferred["nranks"]
    assert (cut.collective, cut.nranks, cut.rows, cut.failures) == ("hypercube", 2, [], [])
    assert (single.collective, single.nranks, len(single.rows)) == ("all_gather", 1, 1)


def test_a_command_line_without_test_output_is_no_run():
    reader = NcclTestsReader("job.log")
    reader.feed(1, "$ mpirun -np 2 ./build/all_reduce_perf -b 8 -e 1G")
    reader.feed(2, "gpu1:1:1 [0] NCCL INFO Using network IB")
    assert reader.finish() == []


def test_a_table_that_stops_before_its_last_size_is_said_to_be_cut(tmp_path: Path) -> None:
    from ncclscope.case.read import read_case

    from conftest import REPO

    lines = (REPO / "fixtures/nccl_tests/v2_17_unified_8xh100.txt").read_text(encoding="utf-8").splitlines()[:40]
    cut = tmp_path / "cut.txt"
    cut.write_text("\n".join(lines) + "\n", encoding="utf-8")
    source = read_case([str(cut)], jobs=1).case.sources[0]
    assert source.truncated == ["it stops inside an nccl-tests table (line 40)"] and source.ends_cut
    whole = read_case([str(REPO / "fixtures/nccl_tests/v2_17_unified_8xh100.txt")], jobs=1).case.sources[0]
    assert whole.truncated == []


def _run_of(text: str) -> BenchmarkRun:
    reader = NcclTestsReader("paste")
    for number, line in enumerate(text.splitlines(), start=1):
        reader.feed(number, line)
    (run,) = reader.finish()
    return run


HEADER = "# nThread 1 nGpus 1 minBytes 8 maxBytes 1024 step: 2(factor) warmup iters: 5 iters: 20 validation: 1\n"
DEVICE = "#  Rank {r} Group  0 Pid  3{r}00 on   gpu-x device  {r} [0000:1{r}:00] NVIDIA H100 80GB HBM3"


def test_a_device_line_with_the_next_one_glued_on_is_two_devices() -> None:
    lines = [DEVICE.format(r=r) for r in range(4)]
    run = _run_of(HEADER + "# Using devices\n" + lines[0] + lines[1] + "\n" + "\n".join(lines[2:]) + "\n")
    assert [d.rank for d in run.devices] == [0, 1, 2, 3]
    assert run.devices[0].name == "NVIDIA H100 80GB HBM3"


def test_device_lines_with_tabs_for_spaces_are_read() -> None:
    lines = [DEVICE.format(r=r).replace(" ", "\t") for r in range(2)]
    run = _run_of(HEADER.replace(" ", "\t") + "#\tUsing\tdevices\n" + "\n".join(lines) + "\n")
    assert [d.rank for d in run.devices] == [0, 1] and run.ngpus == 1


def test_a_cut_device_list_still_counts_the_ranks_its_numbers_name() -> None:
    lines = [DEVICE.format(r=r) for r in range(1, 4)]  # rank 0's line is lost
    run = _run_of(HEADER + "# Using devices\n" + "\n".join(lines) + "\n")
    assert run.nranks == 4 and "rank 3" in run.inferred["nranks"]


def test_nccl_tests_own_comment_naming_the_binary_is_no_command_line_even_when_damaged() -> None:
    text = HEADER + "# Using devices\n" + DEVICE.format(r=0) + "\n"
    text += (
        "# Collective \ufffd\ufffdtest concluded: all_reduce_perf\n#\n .. gpu-x pid 3000: Test failure common.cu:1189\n"
    )
    reader = NcclTestsReader("paste")
    for number, line in enumerate(text.splitlines(), start=1):
        reader.feed(number, line)
    (run,) = reader.finish()
    assert [f.evidence.line for f in run.failures] == [6]


def test_a_command_line_whose_test_failed_at_once_is_a_run() -> None:
    reader = NcclTestsReader("paste")
    lines = ["$ ./build/all_reduce_perf -g 8", "box: Test CUDA failure common.cu:892 'out of memory'"]
    for number, line in enumerate(lines, start=1):
        reader.feed(number, line)
    (run,) = reader.finish()
    assert run.collective == "all_reduce" and len(run.failures) == 1


# ---------------------------------------------------------------------------------------------
# rccl-tests' results file (parse/rccl_tests_json.py)
def test_rccl_tests_results_file_pairs_in_and_out_of_place_per_size() -> None:
    from ncclscope.case.read import read_case

    from conftest import REPO

    case = read_case([str(REPO / "fixtures/nccl_tests/rccl_tests_all_reduce_output_file.json")], jobs=1).case
    assert case.sources[0].kinds == ["nccl_tests_json"] and case.sources[0].problems == []
    (run,) = case.benchmarks
    assert (run.collective, run.nranks, len(run.rows), run.layout) == ("all_reduce", 8, 11, "rccl-tests json")
    assert "busbw / algbw" in run.inferred["nranks"]
    last = run.rows[-1]
    assert (last.size, last.count, last.type, last.redop, last.line) == (1073741824, 268435456, "float", "sum", 22)
    assert last.out_of_place.busbw == pytest.approx(311.6, abs=0.01)
    assert last.in_place.busbw == pytest.approx(312.85, abs=0.01)
    assert (last.out_of_place.wrong, last.in_place.wrong) == (0, 0)


def test_rccl_tests_results_as_json_lines_of_several_cycles_and_a_cut_end() -> None:
    from ncclscope.parse.rccl_tests_json import parse_rccl_tests_json

    row = (
        '{{"numCycle": {c}, "name": "alltoall", "size": {s}, "type": "bfloat16", "redop": "none", "inPlace": 0,'
        ' "time": 812.4, "algBw": {a}, "busBw": {b}, "#wrong": "N/A", "nodes": 2, "ranks": 16, "ranksPerNode": 8,'
        ' "gpusPerRank": 1}}'
    )
    lines = [row.format(c=c, s=s, a=a, b=a * 15 / 16) for c in (0, 1) for s, a in ((1 << 20, 1.29), (1 << 24, 20.65))]
    text = "\n".join([*lines, '{"summary": "done"}', lines[0][:40]])  # a line that is no measurement, a cut one
    read = parse_rccl_tests_json(text, "a2a.json")
    assert read is not None
    runs, others = read
    assert others == 2  # the summary and the cut line, counted (the input names them as not understood)
    assert [(r.collective, r.nranks, [row.size for row in r.rows]) for r in runs] == [
        ("alltoall", 16, [1 << 20, 1 << 24]),
        ("alltoall", 16, [1 << 20, 1 << 24]),
    ]
    assert runs[1].line == 3 and runs[0].rows[0].out_of_place.wrong is None  # N/A: not checked
    assert runs[0].rows[0].in_place.busbw is None  # out-of-place only
    assert parse_rccl_tests_json('[{"size": 8, "busBw": 1}]', "x.json") is None
    assert parse_rccl_tests_json("not json", "x.json") is None


def test_a_json_file_that_holds_no_rccl_measurement_is_refused_in_one_line(tmp_path: Path) -> None:
    from conftest import run_cli

    path = tmp_path / "results.json"
    path.write_text('[{"busBw": 1, "algBw": 1, "inPlace": "x"}]')
    proc = run_cli("parse", str(path))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert b"JSON holds no rccl-tests measurement" in proc.stderr + proc.stdout
    assert b"Traceback" not in proc.stderr
