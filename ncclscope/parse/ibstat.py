"""`ibstat` output (infiniband-diags; grammars/ibstat.lark): each channel adapter with its firmware and
GUID, and each port's state, physical state, rate and link layer; and `ibstatus`, the same package's
per-port report (no firmware or GUIDs).

A block starts at `CA 'name'` and goes on while lines are ibstat's fields; the first other line ends it.
ibstat does not name its host: the input's name does (one file per host, as `ncclscope run` or a
support engineer collects them).
"""

from __future__ import annotations

import re

from lark import Tree

from ncclscope.model import Evidence, IbDevice, IbPort
from ncclscope.parse.grammars import parse_or_none

START_RE = re.compile(r"^(?:CA '[^']+'|Infiniband device '[^']+' port \d+ status:)\s*$")
FIELD_RE = re.compile(
    r"^(?:CA type:|Number of ports:|Firmware version:|Hardware version:|Node GUID:|System image GUID:|Port \d+:"
    r"|Port GUID:|State:|Physical state:|Rate:|Base lid:|LMC:|SM lid:|Capability mask:|Link layer:"
    r"|default gid:|base lid:|sm lid:|state:|phys state:|rate:|link_layer:)"  # ibstatus
)
# ibstatus prints the kernel's port state names; ibstat's words are the ones the rules compare
STATE_WORDS = {"ACTIVE": "Active", "DOWN": "Down", "INIT": "Initializing", "ARMED": "Armed", "ACTIVE_DEFER": "Active"}


class IbstatReader:
    """Reads the lines of one input that belong to `ibstat` output."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.devices: list[IbDevice] = []
        self._device: IbDevice | None = None
        self._port: IbPort | None = None

    # what a line must hold for feed() to take it or change anything while not busy (other_lines.py's one test):
    # words anywhere, or a pattern at its start (after a launcher's prefix and white space)
    HINT_WORDS: tuple[str, ...] = ()
    HINT_START = r"CA '|Infiniband device '"

    @property
    def busy(self) -> bool:
        """Inside a device's block: every line matters (the first that is not ibstat's ends it)."""
        return self._device is not None

    def feed(self, line_no: int, text: str) -> bool:
        """True when the line is ibstat's (then no other reader needs it)."""
        body = text.strip()
        if not body:
            return False
        if not START_RE.match(body) and (self._device is None or not FIELD_RE.match(body)):
            self._device = self._port = None  # a block ends at the first line that is not ibstat's
            return False
        tree = parse_or_none("ibstat", "start", body)
        if tree is None:
            return False
        self._take(tree, Evidence(source=self.source, line=line_no, text=body))
        return True

    def _take(self, tree: Tree, evidence: Evidence) -> None:
        kind = tree.data
        value = str(tree.children[0]) if tree.children else None
        if kind in ("state", "phys_state") and len(tree.children) == 2:  # ibstatus: "4: ACTIVE"
            value = str(tree.children[1])
            value = STATE_WORDS.get(value, value) if kind == "state" else value
        if kind == "ca":
            self._device = IbDevice(name=str(value).strip("'"), source=self.source, evidence=evidence)
            self._port = None
            self.devices.append(self._device)
            return
        if kind == "status_port":  # ibstatus: a block per port; the ports of one device join its entry
            name = str(value).strip("'")
            device = next((d for d in self.devices if d.name == name and d.source == self.source), None)
            if device is None:
                device = IbDevice(name=name, source=self.source, tool="ibstatus", evidence=evidence)
                self.devices.append(device)
            self._device = device
            self._port = IbPort(port=int(str(tree.children[1])), evidence=evidence)
            device.ports.append(self._port)
            return
        device = self._device
        assert device is not None
        if kind == "ca_type":
            device.ca_type = value
        elif kind == "firmware":
            device.firmware, device.firmware_evidence = value, evidence
        elif kind == "node_guid":
            device.node_guid = value
        elif kind == "port":
            self._port = IbPort(port=int(str(value)), evidence=evidence)
            device.ports.append(self._port)
        elif self._port is not None:
            port = self._port
            if kind == "state":
                port.state, port.evidence = value, evidence
            elif kind == "phys_state":
                port.physical_state = value
            elif kind == "rate" and value is not None:
                port.rate, port.rate_evidence = float(value), evidence
            elif kind == "link_layer":
                port.link_layer = value
            elif kind == "port_guid":
                port.port_guid = value
