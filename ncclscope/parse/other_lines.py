"""The lines that are not NCCL records: routed, in order, to the topology matrix, nccl-tests, host report
and framework (PyTorch ...) readers; and the one cheap test that lets a line no reader wants cost nothing.

A job's stdout is mostly its own text (steps, losses, progress bars, warnings, tracebacks). Each reader
says what a line must hold for it to take the line, or to change anything, while it waits on nothing
(`HINT_WORDS` anywhere in the line, `HINT_START` where the line begins after a launcher's prefix), and
when it does wait on the next line whatever it holds (`busy`: inside a matrix, a table row printed in
pieces, a framework record wrapped over lines). While no reader is busy, a line that holds none of
those is refused by all of them and changes nothing: it is not read at all (line_hints.py). The NCCL
log parser finds the lines that hold a word in one search of its whole block (nccl_log.py).
"""

from __future__ import annotations

from typing import Any

from ncclscope.model import BenchmarkRun
from ncclscope.parse import line_hints, ras
from ncclscope.parse.fr_trace_text import FrTraceTextReader
from ncclscope.parse.framework_log import FrameworkReader
from ncclscope.parse.ibstat import IbstatReader
from ncclscope.parse.ibv_devinfo import IbvDevinfoReader
from ncclscope.parse.kernel_log import KernelLogReader
from ncclscope.parse.line_hints import ELISIONS, other_hints
from ncclscope.parse.lspci import LspciReader
from ncclscope.parse.nccl_diag import DiagReader
from ncclscope.parse.nccl_tests import NcclTestsReader
from ncclscope.parse.normalize import clean, prefix_rank, strip_launcher_prefix
from ncclscope.parse.nvidia_smi_nvlink import NvidiaSmiNvlinkReader
from ncclscope.parse.nvidia_smi_query import NvidiaSmiQueryReader
from ncclscope.parse.p2p_matrix import P2pMatrixReader
from ncclscope.parse.param_dump import ParamDumpReader
from ncclscope.parse.rocm_smi_topo import RocmSmiTopologyReader
from ncclscope.parse.show_gids import ShowGidsReader
from ncclscope.parse.topo_matrix import TopologyReader
from ncclscope.parse.torchrun_failures import TorchrunFailureReader

# the readers, each with HINT_WORDS, HINT_START and `busy` (see above)
READERS: tuple[Any, ...] = (
    TopologyReader,
    NcclTestsReader,
    FrameworkReader,
    FrTraceTextReader,
    IbstatReader,
    IbvDevinfoReader,
    NvidiaSmiQueryReader,
    NvidiaSmiNvlinkReader,
    P2pMatrixReader,
    RocmSmiTopologyReader,
    KernelLogReader,
    TorchrunFailureReader,
    LspciReader,
    ras.RasReader,
    ParamDumpReader,
    DiagReader,
    ShowGidsReader,
)


class OtherLines:
    """Routes lines that are not NCCL records to the matrix, nccl-tests, host report and framework readers."""

    def __init__(self, display: str) -> None:
        self.topology = TopologyReader(display)
        self.tests = NcclTestsReader(display)
        self.framework = FrameworkReader(display)
        self.ras = ras.RasReader(display)
        self.ibstat = IbstatReader(display)
        self.ibv_devinfo = IbvDevinfoReader(display)
        self.smi_query = NvidiaSmiQueryReader(display)
        self.smi_nvlink = NvidiaSmiNvlinkReader(display)
        self.p2p = P2pMatrixReader(display)
        self.rocm_topology = RocmSmiTopologyReader(display)
        self.fr_trace = FrTraceTextReader(display)
        self.kernel = KernelLogReader(display)
        self.torchrun = TorchrunFailureReader(display)
        self.lspci = LspciReader(display)
        self.param_dump = ParamDumpReader(display)
        self.diag = DiagReader(display)
        self.show_gids = ShowGidsReader(display)
        self._host_readers = (
            self.ibstat, self.ibv_devinfo, self.smi_query, self.smi_nvlink, self.p2p, self.fr_trace, self.ras,
            self.torchrun, self.lspci, self.param_dump, self.show_gids,
        )  # fmt: skip
        self._readers = (
            self.kernel, self.rocm_topology, self.topology, self.tests, self.framework, *self._host_readers
        )  # fmt: skip
        self.hints = other_hints(READERS)
        self.busy = False  # some reader waits on the next line, whatever it holds
        self.topology_lines = 0
        self.tests_lines = 0
        self.invalid_utf8 = 0
        self.display = display
        self.elisions: list[tuple[int, str]] = []
        self.tests_runs: list[BenchmarkRun] = []  # the tables read, once finished

    def __call__(self, line_no: int, text: str) -> None:
        self.take(line_no, text, None)

    def take(self, line_no: int, text: str, wanted: bool | None) -> bool | None:
        """One line; `wanted`: the cheap test's answer where the caller knows it (the NCCL log parser's filter
        found the line; a byte range's worker made it), None to make it here when it is needed. Returns the
        answer where it is known, which a range's worker sends on with the line (split.py)."""
        if "\ufffd" in text:
            self.invalid_utf8 += 1
        if line_hints.CHEAP_TEST and not self.busy and text:
            if wanted is None:
                wanted = self.hints.wanted(text.encode())
            if not wanted:
                return False  # no reader waits on a line and this one holds nothing any of them looks for
        self._read(line_no, text)
        self.busy = any(reader.busy for reader in self._readers)
        return wanted

    def _read(self, line_no: int, text: str) -> None:
        if not text:
            self.topology.feed(line_no, "")
            self.tests.feed(line_no, "")
            return
        whole = clean(text).text
        prefix, body = strip_launcher_prefix(whole)
        if body.strip() in ELISIONS:
            self.elisions.append((line_no, body.strip()))
            return
        if self.kernel.feed(line_no, whole, prefix, body):
            return  # a kernel log line: its own leads (a time, a host) are what a launcher's prefix looks like
        if self.diag.feed(line_no, body):
            return  # NCCL 2.31's diagnostics: its host:pid lead is its own
        self.framework.command_line(line_no, body)
        if (self.rocm_topology.busy or body.lstrip().startswith("=")) and self.rocm_topology.feed(line_no, body):
            return  # ROCm SMI's GPU matrices look like nvidia-smi's rows to the matrix reader: read them first
        if self.topology.feed(line_no, body):
            self.topology_lines += 1
        elif self.tests.feed(line_no, body):
            self.tests_lines += 1
        elif not self._host_report(line_no, body):
            self.framework.prefix_rank = prefix_rank(prefix)
            self.framework.feed(line_no, body)

    def found_anything(self) -> bool:
        """Whether any of these readers has taken a line (parse/junk.py skips blocks only before that)."""
        return bool(
            self.topology_lines
            or self.tests_lines
            or self.framework.lines
            or self.framework.settings
            or self.ibstat.devices
            or self.ibv_devinfo.devices
            or self.smi_query.gpus
            or self.smi_nvlink.gpus
            or self.p2p.matrices
            or self.rocm_topology.lines
            or self.fr_trace.lines
            or self.ras.reports
            or self.kernel.lines
            or self.torchrun.lines
            or self.lspci.lines
            or self.param_dump.lines
            or self.diag.reports
            or self.show_gids.lines
        )

    def _host_report(self, line_no: int, body: str) -> bool:
        """A line of a tool's report about the host (its ports, its GPUs) or of ncclras."""
        return any(reader.feed(line_no, body) for reader in self._host_readers)
