"""A host's kernel log (grammars/kernel_log.lark): the NVIDIA driver's Xid reports, NVSwitch SXids, a GPU fallen off
the bus, the driver's load banner and PCIe AER reports, each with its time and host where the line gives them.

A line is tried only when it holds one of the driver's or the PCIe reporter's words. The driver prints a GPU that
fell off the bus as three lines (`The NVIDIA GPU <bus>`, `(PCI ID: ...) installed in this system has`,
`fallen off the bus and ...`): the first opens the event and the last closes it. Other NVRM lines (GSP RPC
history, stack dumps) are the driver's too: they are counted as kernel log lines, not typed.
"""

from __future__ import annotations

from datetime import datetime

from lark import Token, Tree

from ncclscope.model import Evidence, KernelEvent
from ncclscope.parse.grammars import parse_or_none, rule_text
from ncclscope.parse.kernel_words import WORDS

FALLEN_OFF_LINES = 3  # the driver's three-line message: an open one that does not end within them is let go
GSP_BANNER_LINES = 6  # the GSP's Xid banner names its GPU within this many lines (`GPU at PCI:...`)


class KernelLogReader:
    """Reads the kernel log lines of one input."""

    HINT_WORDS: tuple[str, ...] = WORDS
    HINT_START = ""

    def __init__(self, source: str) -> None:
        self.source = source
        self.events: list[KernelEvent] = []
        self.lines = 0  # the driver's and PCIe reporter's lines read (typed or not)
        self._open: KernelEvent | None = None  # `The NVIDIA GPU <bus>`, waiting for `fallen off the bus`
        self._open_left = 0
        self._gsp: KernelEvent | None = None  # `_kgspLogXid119: ...`, waiting for the `GPU at PCI:` line
        self._gsp_left = 0

    @property
    def busy(self) -> bool:
        return self._open is not None or self._gsp is not None

    def feed(self, line_no: int, text: str, prefix: str = "", rest: str = "") -> bool:
        """True when the line is the kernel's about a GPU, an NVSwitch or PCIe. `prefix` and `rest`: the line
        cut where a launcher's prefix ends (normalize.strip_launcher_prefix); a host-forwarding prefix
        (`10.0.0.7: `) names the host of a line whose own leads do not."""
        if not any(word in text for word in WORDS):
            self._age_open()
            return False
        body = text.strip()
        host = None
        tree = parse_or_none("kernel_log", "line", body)
        if tree is None and prefix.endswith(": ") and rest:
            body, host = rest.strip(), prefix[:-2].strip() or None
            tree = parse_or_none("kernel_log", "line", body)
        self.lines += 1
        if tree is None:
            self._age_open()
            return True  # the driver's, not typed (GSP RPC history, a stack dump)
        message = tree.children[-1]
        assert isinstance(message, Tree)
        # an SXid or AER line's device comes before its message: the message is the last subtree
        inner = message.children[-1] if message.data == "message" else message
        kind = str(inner.data) if isinstance(inner, Tree) else ""
        event = KernelEvent(
            source=self.source,
            kind="xid",
            host=host,
            evidence=Evidence(source=self.source, line=line_no, text=body),
        )
        for lead in tree.children[:-1]:
            _lead(event, lead)
        if kind == "gpu_named":
            self._open, self._open_left = event, FALLEN_OFF_LINES
            event.kind = "fallen_off_bus"
            event.bus_id = _bus(_token(message, "BUS_ID"))
            return True
        if kind == "fallen_off_bus" and _token(message, "BUS_ID") is None and self._open is not None:
            opened, self._open = self._open, None
            opened.detail = "fallen off the bus"
            opened.closing = event.evidence  # the opener names the GPU, this line what happened to it
            self.events.append(opened)
            return True
        self._age_open()
        if kind == "gsp_xid":
            if self._gsp is None:  # the banner's first line; its next lines (a note) are the same report
                event.xid = _int((_token(message, "GSP_XID") or "").removeprefix("_kgspLogXid").rstrip(":"))
                event.detail = (_token(message, "REST") or "").strip("* ") or None
                self._gsp, self._gsp_left = event, GSP_BANNER_LINES
            return True
        if kind == "gpu_at" and self._gsp is not None:
            self._gsp.bus_id = _bus(_token(message, "BUS_ID"))
            self._end_gsp()
            return True
        if _typed(event, kind, message):
            self.events.append(event)
        return True

    def _age_open(self) -> None:
        if self._open is not None:
            self._open_left -= 1
            if self._open_left <= 0:
                self._open = None
        if self._gsp is not None:
            self._gsp_left -= 1
            if self._gsp_left <= 0:
                self._end_gsp()

    def _end_gsp(self) -> None:
        """The GSP banner's Xid, with its GPU where a line named it."""
        if self._gsp is not None:
            self.events.append(self._gsp)
            self._gsp = None

    def finish(self) -> list[KernelEvent]:
        self._open = None
        self._end_gsp()
        return self.events


def _typed(event: KernelEvent, kind: str, message: Tree) -> bool:
    """Fills the event from its message; False for a line that is no event (a GPU's UUID line)."""
    if kind == "xid":
        event.bus_id = _bus(rule_text(message, "pci_ref"))
        event.xid = _int(rule_text(message, "xid_code"))
        event.pid = rule_text(message, "xid_pid", 1)
        event.process = (rule_text(message, "xid_process", 1) or "").strip() or None
        event.detail = (rule_text(message, "xid_text") or "").strip() or None
        event.caused_by = _int(rule_text(message, "xid_cause", 1))
        return event.xid is not None
    if kind == "fallen_off_bus":
        event.kind = "fallen_off_bus"
        event.bus_id = _bus(_token(message, "BUS_ID"))
        event.detail = "fallen off the bus"
        return True
    if kind == "driver_load":
        event.kind = "driver_load"
        event.driver_version = _token(message, "DRIVER_VERSION")
        return True
    if kind == "sxid":
        event.kind = "sxid"
        event.bus_id = _bus(rule_text(message, "pci_ref"))
        event.xid = _int(_token(message, "INT"))
        event.severity = _token(message, "SXID_SEVERITY")
        event.detail = (_token(message, "REST") or "").strip() or None
        return True
    if kind in ("aer_received", "aer_bus_error"):
        event.kind = "aer"
        device = _token(message, "PCI_DEVICE") or ""
        source = _token(message, "BUS_ID")  # `error received: <bdf>`: the device the error came from
        event.bus_id = _bus(source) if source else (_bus(device.split()[-1].rstrip(":")) if device else None)
        received = _token(message, "AER_RECEIVED")
        event.severity = (received or _token(message, "AER_SEVERITY") or "").removeprefix("Multiple ").strip() or None
        event.detail = _token(message, "AER_TYPE")
        return True
    return False  # gpu_at: the GPU's UUID, no event


def _lead(event: KernelEvent, lead: Tree | Token) -> None:
    """A line's time and host from one of its leads."""
    if not isinstance(lead, Tree) or not lead.children:
        return
    text = str(lead.children[0])
    kind = str(lead.data)
    if kind == "ctime":
        event.time = text.strip("[]")
        event.at = _iso(event.time, "%a %b %d %H:%M:%S %Y")
    elif kind == "uptime":
        event.time = text.strip("[] ")
        event.uptime = float(event.time)
    elif kind == "relative":
        event.time = text.strip("[] ")  # "+0.000316": since the line before
    elif kind == "syslog":
        words = text.split()[:-1]  # the facility last
        event.time = " ".join(words[:3])
        event.host = words[3] if len(words) > 3 else event.host
    elif kind == "iso":
        words = text.split()[:-1]
        stamp = 1 if "T" in words[0] else 2  # "2025-03-01T10:00:00Z" or "2025-03-01 10:00:00"
        event.time = " ".join(words[:stamp])
        event.host = words[stamp] if len(words) > stamp else event.host
        event.at = _iso(event.time)
    elif kind == "collector":
        host, _, rest = text.partition(":")
        event.host = host
        event.time = rest[rest.index("[") + 1 : rest.rindex("]")]
        event.at = _iso(event.time)


def _iso(text: str, form: str | None = None) -> str | None:
    try:
        moment = datetime.strptime(text, form) if form else datetime.fromisoformat(text.replace(" ", "T", 1))
    except ValueError:
        return None
    return moment.isoformat()


def _bus(text: str | None) -> str | None:
    """0000:9b:00 (Xid) or 0000:b3:00.0 as NCCL writes a bus id: 0000:9b:00.0."""
    if not text:
        return None
    text = text.strip().lower().removeprefix("pci:")
    return text if "." in text else f"{text}.0"


def _token(tree: Tree, name: str) -> str | None:
    for token in tree.scan_values(lambda v: isinstance(v, Token) and v.type == name):
        return str(token)
    return None


def _int(text: str | None) -> int | None:
    return int(text) if text and text.isdigit() else None
