"""`ibv_devinfo` and `ibv_devinfo -v` output (rdma-core; grammars/ibv_devinfo.lark): each RDMA device with
its firmware and GUID, each port's state, physical state, width, lane speed and link layer, kept in
ibstat's words (Active, LinkUp, a rate in Gb/s) so that the rules read both tools alike.

A block starts at `hca_id:` and goes on while lines are ibv_devinfo's; the first other line ends it.
"""

from __future__ import annotations

import re

from lark import Tree
from lark.exceptions import LarkError

from ncclscope.model import Evidence, IbDevice, IbPort
from ncclscope.parse.grammars import load

START_RE = re.compile(r"^\s*hca_id:\s*\S+\s*$")
INDENTED_RE = re.compile(r"^\s+\S")
# The fields the reader keeps: taken indented or not (pastes lose indentation); the grammar's other
# `name: value` and flag lines only when indented, as ibv_devinfo prints them.
KEPT = frozenset({"fw_ver", "node_guid", "board_id", "port", "state", "phys_state", "active_width",
                  "active_speed", "link_layer"})  # fmt: skip

# ibv_devinfo prints libibverbs' enums; ibstat's words for them (infiniband-diags), which the rules use.
STATES = {"PORT_DOWN": "Down", "PORT_INIT": "Initializing", "PORT_ARMED": "Armed", "PORT_ACTIVE": "Active"}
PHYSICAL = {1: "Sleep", 2: "Polling", 3: "Disabled", 4: "PortConfigurationTraining", 5: "LinkUp",
            6: "LinkErrorRecovery", 7: "PhyTest"}  # fmt: skip
# active_speed codes (IBTA PortInfo LinkSpeedActive/Extended, as libibverbs numbers them) -> Gb/s per
# lane, for an rdma-core too old to name the speed ("invalid speed (128)" for NDR).
LANE_GBPS = {1: 2.5, 2: 5.0, 4: 10.0, 8: 10.0, 16: 14.0, 32: 25.0, 64: 50.0, 128: 100.0, 256: 200.0}


def _code(token: object) -> int:
    return int(str(token).strip("()"))


class IbvDevinfoReader:
    """Reads the lines of one input that belong to `ibv_devinfo` output."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.devices: list[IbDevice] = []
        self._device: IbDevice | None = None
        self._port: IbPort | None = None
        self._width: int | None = None

    HINT_WORDS: tuple[str, ...] = ()  # what a line must hold for feed() to do anything while not busy
    HINT_START = r"hca_id:"

    @property
    def busy(self) -> bool:
        return self._device is not None

    def feed(self, line_no: int, text: str) -> bool:
        """True when the line is ibv_devinfo's (then no other reader needs it)."""
        body = text.strip()
        if not body:
            return False
        if START_RE.match(body) is None and self._device is None:
            return False
        try:
            tree = load("ibv_devinfo").parse(body)
        except LarkError:
            tree = None
        if tree is None or (tree.data not in KEPT and tree.data != "hca" and not INDENTED_RE.match(text)):
            self._device = self._port = None  # a block ends at the first line that is not ibv_devinfo's
            return False
        self._take(tree, Evidence(source=self.source, line=line_no, text=body))
        return True

    def _take(self, tree: Tree, evidence: Evidence) -> None:
        kind = tree.data
        values = [str(child) for child in tree.children]
        if kind == "hca":
            self._device = IbDevice(name=values[0], source=self.source, tool="ibv_devinfo", evidence=evidence)
            self._port = None
            self.devices.append(self._device)
            return
        device = self._device
        assert device is not None
        if kind == "fw_ver":
            device.firmware, device.firmware_evidence = values[0], evidence
        elif kind == "node_guid":
            device.node_guid = "0x" + values[0].replace(":", "")  # ibstat's form, to compare the two
        elif kind == "board_id":
            device.ca_type = values[0]
        elif kind == "port":
            self._port = IbPort(port=int(values[0]), evidence=evidence)
            self._width = None
            device.ports.append(self._port)
        elif self._port is not None:
            self._take_port(self._port, kind, values, evidence)

    def _take_port(self, port: IbPort, kind: str, values: list[str], evidence: Evidence) -> None:
        if kind == "state":
            port.state, port.evidence = STATES.get(values[0], values[0]), evidence
        elif kind == "phys_state":
            port.physical_state = PHYSICAL.get(_code(values[-1]), values[0])
        elif kind == "link_layer":
            port.link_layer = values[0]
        elif kind == "active_width":
            self._width = int(values[0].rstrip("X"))
        elif kind == "active_speed" and self._width is not None:
            lane = float(values[0]) if len(values) == 2 else LANE_GBPS.get(_code(values[-1]))
            if lane is not None:
                port.rate, port.rate_evidence = round(lane * self._width, 1), evidence
