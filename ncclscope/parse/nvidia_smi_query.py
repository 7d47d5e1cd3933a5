"""`nvidia-smi -q` output (grammars/nvidia_smi_query.lark): per GPU its identity (product, serial, UUID,
VBIOS), the report's driver and CUDA versions, its PCIe link now and at most, its modes (persistence,
MIG, ECC, performance state) and health (uncorrectable ECC errors, row remapping, fabric state).

A report starts at the `NVSMI LOG` banner or a `GPU 00000000:18:00.0` line. Its lines nest by
indentation; `Max` and `Current` mean something only with their section (`PCIe Generation`, `Link
Width`, `MIG Mode`, ...), which the reader tracks. A paste that lost its indentation still names the
section last opened, which is the one that counts here.
"""

from __future__ import annotations

import re

from lark.exceptions import LarkError

from ncclscope.model import Evidence, SmiGpu
from ncclscope.parse.grammars import load

START_RE = re.compile(r"^\s*(?:=+ *NVSMI LOG *=+|GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")
# A pasted fragment of one GPU's health sections, without the GPU line above it: read as a GPU with no bus id
FRAGMENT_RE = re.compile(r"^\s*(?:Remapped Rows|Retired Pages)\s*$")
TOP_LEVEL = frozenset({"Timestamp", "Driver Version", "CUDA Version", "Attached GPUs"})
# Section titles whose `Max`/`Current`/`Pending` the reader keeps, and the others a paste without
# indentation may show: an unindented title outside this list ends the report.
KNOWN_SECTIONS = frozenset({
    "PCI", "GPU Link Info", "PCIe Generation", "Link Width", "MIG Mode", "ECC Mode", "ECC Errors",
    "Volatile", "Aggregate", "Remapped Rows", "Retired Pages", "Fabric", "Driver Model", "Inforom Version",
    "GPU Operation Mode", "GPU Virtualization Mode", "GPU Reset Status", "Bridge Chip", "Clocks",
    "Max Clocks", "Applications Clocks", "Default Applications Clocks", "Clocks Event Reasons",
    "Clocks Throttle Reasons", "Temperature", "Power Readings", "GPU Power Readings", "Module Power Readings",
    "FB Memory Usage", "BAR1 Memory Usage", "Conf Compute Protected Memory Usage", "Utilization",
    "Encoder Stats", "FBC Stats", "Processes", "IBMNPU", "Bank Remap Availability Histogram",
    "Max Customer Boost Clocks", "Clock Policy", "Voltage", "Supported Clocks", "Inforom BBX Object Flush",
    "Compute Mode", "Single Bit", "Double Bit", "Device Memory", "Register File", "L1 Cache", "L2 Cache",
    "Texture Memory", "Texture Shared", "CBU", "Total",
})  # fmt: skip
YES = {"Yes": True, "No": False}


def bus_id(text: str) -> str:
    """00000000:18:00.0 (nvidia-smi) -> 0000:18:00.0 (NCCL's form), lower case."""
    domain, rest = text.strip().split(":", 1)
    return f"{int(domain, 16):04x}:{rest.lower()}"


def _number(value: str | None) -> int | None:
    match = re.match(r"\s*(\d+)", value or "")
    return int(match.group(1)) if match else None


def _value(value: str | None) -> str | None:
    return None if value is None or value.strip() in ("", "N/A", "[N/A]") else value.strip()


class NvidiaSmiQueryReader:
    """Reads the lines of one input that belong to `nvidia-smi -q` reports."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.gpus: list[SmiGpu] = []
        self._active = False
        self._indented = False  # the report keeps its indentation (then sections nest by it)
        self._sections: list[tuple[int, str]] = []
        self._last_section: str | None = None
        self._driver: tuple[str, Evidence] | None = None
        self._cuda: str | None = None
        self._gpu: SmiGpu | None = None
        self._count = 0  # GPUs of the current report

    # what a line must hold for feed() to do anything while not busy: START_RE, FRAGMENT_RE
    HINT_WORDS = ("NVSMI LOG", "GPU", "Remapped Rows", "Retired Pages")
    HINT_START = ""

    @property
    def busy(self) -> bool:
        return self._active

    def feed(self, line_no: int, text: str) -> bool:
        """True when the line is nvidia-smi -q's (then no other reader needs it)."""
        body = text.strip()
        if not body:
            return False
        fragment = False
        if START_RE.match(body):
            if not self._active or body.startswith("="):
                self._start()
        elif not self._active and FRAGMENT_RE.match(body):
            self._start()
            fragment = True
        elif not self._active:
            return False
        try:
            tree = load("nvidia_smi_query").parse(body)
        except LarkError:
            self._active = False
            return False
        indent = len(text) - len(text.lstrip())
        name = str(tree.children[0])
        if tree.data in ("entry", "section") and indent == 0 and name not in TOP_LEVEL:
            if self._indented or (tree.data == "section" and name not in KNOWN_SECTIONS):
                self._active = False  # an unindented line inside a report: another program's
                return False
        if indent:
            self._indented = True
        evidence = Evidence(source=self.source, line=line_no, text=body)
        if fragment:
            self._open_gpu(None, evidence)
        if tree.data == "gpu":
            self._open_gpu(name, evidence)
        elif tree.data == "section":
            self._nest(indent)
            self._sections.append((indent, name))
            self._last_section = name
        elif tree.data == "entry":
            self._nest(indent)
            value = str(tree.children[1]) if len(tree.children) > 1 else None
            self._entry(name, value, evidence)
        return True

    def _start(self) -> None:
        self._active, self._indented = True, False
        self._sections, self._last_section = [], None
        self._driver, self._cuda, self._gpu = None, None, None
        self._count = 0

    def _nest(self, indent: int) -> None:
        while self._sections and self._sections[-1][0] >= indent:
            self._sections.pop()

    def _section(self) -> str | None:
        if self._indented:
            return self._sections[-1][1] if self._sections else None
        return self._last_section

    def _open_gpu(self, line: str | None, evidence: Evidence) -> None:
        """A GPU's report from its `GPU 00000000:18:00.0` line (None: a fragment that does not name it)."""
        self._sections, self._last_section = [], None
        self._gpu = SmiGpu(
            source=self.source,
            bus_id=bus_id(line.split(None, 1)[1]) if line else "",
            index=self._count,
            driver=self._driver_text(),
            cuda=self._cuda,
            evidence=evidence,
            version_evidence=[self._driver[1]] if self._driver else [],
        )
        self.gpus.append(self._gpu)
        self._count += 1

    def _driver_text(self) -> str | None:
        return self._driver[0] if self._driver else None

    def _entry(self, name: str, raw: str | None, evidence: Evidence) -> None:
        value = _value(raw)
        if name == "Driver Version" and value:
            self._driver = (value, evidence)
            return
        if name == "CUDA Version":
            self._cuda = value
            return
        gpu = self._gpu
        if gpu is None:
            return
        section = self._section()
        if name == "Product Name":
            gpu.product = value
        elif name == "Serial Number":
            gpu.serial = value
        elif name == "GPU UUID":
            gpu.uuid = value
        elif name == "VBIOS Version":
            gpu.vbios = value
            gpu.version_evidence.append(evidence)
        elif name == "Persistence Mode":
            gpu.persistence_mode = value
        elif name == "Performance State":
            gpu.performance_state = value
        elif section == "PCIe Generation" and name in ("Max", "Current"):
            setattr(gpu, "pcie_gen_max" if name == "Max" else "pcie_gen", _number(value))
            gpu.link_evidence.append(evidence)
        elif section == "Link Width" and name in ("Max", "Current"):
            setattr(gpu, "width_max" if name == "Max" else "width", _number(value))
            gpu.link_evidence.append(evidence)
        elif section == "MIG Mode" and name == "Current":
            gpu.mig_mode = value
        elif section == "ECC Mode" and name == "Current":
            gpu.ecc_mode = value
        elif section == "Volatile" and name.endswith("Uncorrectable"):  # SRAM, DRAM (R450+ layout)
            count = _number(value)
            if count is not None:
                gpu.uncorrectable_errors = (gpu.uncorrectable_errors or 0) + count
        elif section == "Remapped Rows" and name in ("Pending", "Remapping Failure Occurred"):
            flag = YES.get(value or "")
            if name == "Pending":
                gpu.remap_pending = flag
            else:
                gpu.remap_failed = flag
            gpu.remap_evidence.append(evidence)
        elif section == "Remapped Rows" and name == "Uncorrectable Error":  # rows remapped for uncorrectable errors
            gpu.remap_uncorrectable = _number(value)
            gpu.remap_evidence.append(evidence)
        elif section == "Fabric" and name == "State":
            gpu.fabric_state = value
