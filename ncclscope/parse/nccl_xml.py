"""NCCL's own XML: the topology it detected (NCCL_TOPO_DUMP_FILE, or an NCCL_TOPO_FILE a cloud ships for
its VMs) and the graphs it chose (NCCL_GRAPH_DUMP_FILE).

Element and attribute names are those NCCL writes (src/graph/xml.cc, topo.cc, search.cc):
`<system version>` > `<cpu numaid affinity arch vendor familyid modelid host_hash>` > `<pci busid class
vendor device subsystem_* link_speed link_width>` (nested for switches) > `<gpu dev sm rank gdr>` with
`<nvlink target count tclass>` and `<c2c bw count>`, or `<nic>` with `<net name dev speed port latency guid
maxconn gdr coll>`; and `<graphs version>` > `<graph id pattern crossnic nchannels speedintra speedinter
latencyinter typeintra typeinter samechannels>` > `<channel>` > `<net dev>`, `<gpu dev rank>`.
`link_speed` is NCCL's own reading: for GPUs, newer NCCL asks NVML for the current PCIe generation; for
other devices it takes the lower of the device's and its port's *maximum* from sysfs.

The file is untrusted: it is read by a real XML parser (expat through defusedxml) that refuses DTDs,
entities and external references (a billion-laughs file is refused, never expanded), with caps on size,
nesting depth and element count. A file cut in the middle keeps the devices before the cut.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from ncclscope.model import (
    Evidence,
    NcclGraphDump,
    NcclTopologyDump,
    XmlCpu,
    XmlGpu,
    XmlGraph,
    XmlNet,
    XmlNvLink,
    XmlPciDevice,
)

MAX_BYTES = 16 * 1024 * 1024  # a 72-GPU NVL72 tray's topology is well under 1 MB
MAX_DEPTH = 64  # NCCL's trees are a dozen levels deep at most
MAX_ELEMENTS = 200_000
EVIDENCE_CHARS = 400
_SPEED_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)")
# the runner's per-host dumps of a run on several hosts (runner/environment.py): nccl-topo.<host>.xml
_HOST_FILE_RE = re.compile(r"(?:^|/)nccl-(?:topo|graph)\.([^/]+)\.xml$")


class XmlRefused(ValueError):
    """The XML asked for something NCCL's files never hold (a DTD, entities) or is too large or deep."""


def read_xml(data: bytes, source: str) -> tuple[NcclTopologyDump | NcclGraphDump | None, list[str]]:
    """The dump and the problems met (a file cut in the middle keeps what came before the cut).
    Raises XmlRefused for a hostile or oversized document."""
    # imported here: every reader sniffs for XML, few inputs are XML (ElementTree is slow to import)
    from xml.etree.ElementTree import ParseError

    from defusedxml import DefusedXmlException
    from defusedxml.ElementTree import DefusedXMLParser

    builder = _Builder(source, data)
    parser = DefusedXMLParser(target=builder, forbid_dtd=True, forbid_entities=True, forbid_external=True)
    builder.parser = parser
    problems = []
    try:
        parser.feed(data)
        parser.close()
    except DefusedXmlException as exc:
        raise XmlRefused(
            f"it declares {type(exc).__name__.removesuffix('Forbidden').lower() or 'a DTD'} ({exc}): "
            "NCCL's XML never does, and expanding it could exhaust memory"
        ) from None
    except ParseError as exc:
        if builder.dump is None:
            raise ValueError(f"not well-formed XML: {exc}") from None
        problems.append(f"the XML is cut or damaged ({exc}); the devices before that point are kept")
    return builder.dump, problems


def _int(value: str | None, base: int = 10) -> int | None:
    if value is None:
        return None
    try:
        return int(value.strip(), 0 if base == 0 else base)
    except ValueError:
        return None


def _float(value: str | None) -> float | None:
    match = _SPEED_RE.match(value or "")
    return float(match.group(1)) if match else None


def _flag(value: str | None) -> bool | None:
    number = _int(value)
    return None if number is None else number != 0


def _pci_kind(class_code: str | None) -> Literal["gpu", "nic", "switch", "nvswitch", "other"]:
    code = (class_code or "").lower()
    if code.startswith("0x0604"):
        return "switch"
    if code.startswith("0x0680"):
        return "nvswitch"
    if code.startswith("0x03"):
        return "gpu"
    if code.startswith("0x02"):
        return "nic"
    return "other"


class _Builder:
    """The target of the XML parser: turns elements into the dump's models as they start."""

    def __init__(self, source: str, data: bytes) -> None:
        self.source = source
        self._lines = data.split(b"\n")
        self.parser: Any = None
        self.dump: NcclTopologyDump | NcclGraphDump | None = None
        self.stack: list[tuple[str, Any]] = []  # (tag, the model it made or None)
        self.elements = 0

    @property
    def line(self) -> Evidence:
        """The current element's line as evidence."""
        number = int(self.parser.parser.CurrentLineNumber) if self.parser is not None else 0
        raw = self._lines[number - 1] if 0 < number <= len(self._lines) else b""
        return Evidence(source=self.source, line=number, text=raw[:EVIDENCE_CHARS].decode("utf-8", "replace").strip())

    def _nearest(self, *tags: str) -> Any:
        for tag, made in reversed(self.stack):
            if tag in tags and made is not None:
                return made
        return None

    def start(self, tag: str, attrib: dict[str, str]) -> None:
        self.elements += 1
        if self.elements > MAX_ELEMENTS:
            raise XmlRefused(f"more than {MAX_ELEMENTS:,} elements: not an NCCL dump")
        if len(self.stack) >= MAX_DEPTH:
            raise XmlRefused(f"nested more than {MAX_DEPTH} levels deep: not an NCCL dump")
        made = self._made(tag, attrib)
        self.stack.append((tag, made))

    def _made(self, tag: str, a: dict[str, str]) -> Any:
        dump = self.dump
        if not self.stack:
            named = _HOST_FILE_RE.search(self.source)
            host = named.group(1) if named else None
            if tag == "system":
                self.dump = NcclTopologyDump(source=self.source, host=host, version=_int(a.get("version")))
                return self.dump
            if tag == "graphs":
                self.dump = NcclGraphDump(source=self.source, host=host, version=_int(a.get("version")))
                return self.dump
            raise ValueError(f"the root element is <{tag}>, not NCCL's <system> or <graphs>")
        if isinstance(dump, NcclTopologyDump):
            return self._topology(dump, tag, a)
        if isinstance(dump, NcclGraphDump):
            return self._graph(dump, tag, a)
        return None

    def _topology(self, dump: NcclTopologyDump, tag: str, a: dict[str, str]) -> Any:
        if tag == "cpu":
            cpu = XmlCpu(
                numa_id=_int(a.get("numaid")), arch=a.get("arch"), vendor=a.get("vendor"),
                family_id=_int(a.get("familyid")), model_id=_int(a.get("modelid")), affinity=a.get("affinity"),
                host_hash=a.get("host_hash"), evidence=self.line,
            )  # fmt: skip
            dump.cpus.append(cpu)
            if cpu.host_hash and dump.host_hash is None:
                dump.host_hash = cpu.host_hash
            return cpu
        if tag == "pci":
            parent = self._nearest("pci", "cpu")
            cpu = self._nearest("cpu")
            device = XmlPciDevice(
                busid=a.get("busid", "").lower(), kind=_pci_kind(a.get("class")), class_code=a.get("class"),
                vendor=a.get("vendor"), device=a.get("device"), link_speed=_float(a.get("link_speed")),
                link_width=_int(a.get("link_width")), parent=parent.busid if isinstance(parent, XmlPciDevice) else None,
                numa_id=cpu.numa_id if isinstance(cpu, XmlCpu) else None, evidence=self.line,
            )  # fmt: skip
            dump.pci.append(device)
            return device
        if tag == "gpu":
            pci = self._nearest("pci")
            if isinstance(pci, XmlPciDevice):
                pci.kind = "gpu"
            gpu = XmlGpu(
                busid=pci.busid if isinstance(pci, XmlPciDevice) else "", dev=_int(a.get("dev")),
                sm=_int(a.get("sm")), rank=_int(a.get("rank")), gdr=_flag(a.get("gdr")), evidence=self.line,
            )  # fmt: skip
            dump.gpus.append(gpu)
            return gpu
        if tag == "nvlink":
            gpu = self._nearest("gpu")
            if isinstance(gpu, XmlGpu):
                target = a.get("target", "").lower()
                gpu.nvlinks.append(XmlNvLink(target=target, count=_int(a.get("count")), target_class=a.get("tclass")))
            return None
        if tag == "c2c":
            gpu = self._nearest("gpu")
            if isinstance(gpu, XmlGpu):
                gpu.c2c_bw, gpu.c2c_count = _float(a.get("bw")), _int(a.get("count"))
            return None
        if tag == "nic":
            pci = self._nearest("pci")
            if isinstance(pci, XmlPciDevice):
                pci.kind = "nic"
            return pci if pci is not None else "nic"
        if tag == "net":
            pci = self._nearest("pci")
            net = XmlNet(
                name=a.get("name", ""), busid=pci.busid if isinstance(pci, XmlPciDevice) else None,
                dev=_int(a.get("dev")), speed=_int(a.get("speed")), port=_int(a.get("port")), guid=a.get("guid"),
                gdr=_flag(a.get("gdr")), latency=_float(a.get("latency")), max_conn=_int(a.get("maxconn")),
                coll=_flag(a.get("coll")), evidence=self.line,
            )  # fmt: skip
            dump.nets.append(net)
            return net
        return None

    def _graph(self, dump: NcclGraphDump, tag: str, a: dict[str, str]) -> Any:
        if tag == "graph":
            graph = XmlGraph(
                id=_int(a.get("id")), pattern=_int(a.get("pattern")), cross_nic=_int(a.get("crossnic")),
                nchannels=_int(a.get("nchannels")), speed_intra=_float(a.get("speedintra")),
                speed_inter=_float(a.get("speedinter")), latency_inter=_float(a.get("latencyinter")),
                type_intra=a.get("typeintra"), type_inter=a.get("typeinter"),
                same_channels=_int(a.get("samechannels")), evidence=self.line,
            )  # fmt: skip
            dump.graphs.append(graph)
            return graph
        graph = self._nearest("graph")
        if tag == "channel" and isinstance(graph, XmlGraph):
            graph.channels.append([])
            return None
        if tag in ("net", "gpu") and isinstance(graph, XmlGraph) and graph.channels:
            rank = a.get("rank")
            graph.channels[-1].append(f"{tag.upper()}/{a.get('dev', '?')}" + (f":{rank}" if rank else ""))
        return None

    def end(self, tag: str) -> None:
        if self.stack:
            self.stack.pop()

    def data(self, text: str) -> None:
        pass

    def close(self) -> Any:
        return self.dump
