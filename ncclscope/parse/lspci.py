"""`lspci -vvv` (grammars/lspci.lark): each device with its class, a bridge's bus range and its ACS control. ACSCtl
lines without a device header before them (`lspci -vvv | grep ACSCtl`) are kept as lines: their ports are unknown."""

from __future__ import annotations

from lark import Token, Tree

from ncclscope.model import Evidence, PciDevice
from ncclscope.parse.grammars import parse_or_none

WORDS = ("ACSCtl", "Bus: primary=")


class LspciReader:
    """Reads the lspci lines of one input."""

    HINT_WORDS: tuple[str, ...] = WORDS
    HINT_START = r"(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7] [A-Za-z0-9]"

    def __init__(self, source: str) -> None:
        self.source = source
        self.devices: list[PciDevice] = []
        self.acs_lines: list[Evidence] = []  # ACSCtl lines of no known device
        self.lines = 0
        self._device: PciDevice | None = None

    @property
    def busy(self) -> bool:
        return False

    def feed(self, line_no: int, text: str) -> bool:
        """True when the line is lspci's header, bus range or ACS control."""
        body = text.strip()
        if body.startswith("ACSCtl"):
            tree = parse_or_none("lspci", "acs_ctl", body)
            if tree is None:
                return False
            flags = {str(f.children[0]): str(f.children[1]) == "+" for f in tree.find_data("acs_flag")}
            evidence = Evidence(source=self.source, line=line_no, text=body)  # made for lspci's lines alone
            if self._device is not None and not self._device.acs:
                self._device.acs, self._device.acs_evidence = flags, evidence
            else:
                self.acs_lines.append(evidence)
            return self._took()
        if body.startswith("Bus:") and self._device is not None:
            tree = parse_or_none("lspci", "bus_range", body)
            if tree is None:
                return False
            numbers = [int(str(t), 16) for t in tree.children if isinstance(t, Token) and t.type == "HEX"]
            self._device.secondary, self._device.subordinate = numbers[1], numbers[2]
            return self._took()
        if text[:1].isspace() or ":" not in body[:8]:
            return False
        tree = parse_or_none("lspci", "header", body)
        if tree is None or not isinstance(tree, Tree):
            return False
        address, kind, name = (str(t) for t in tree.children)
        self._device = PciDevice(
            source=self.source, bus_id=_bus_id(address), device_class=kind.strip(), name=name.strip(),
            evidence=Evidence(source=self.source, line=line_no, text=body),
        )  # fmt: skip
        self.devices.append(self._device)
        return self._took()

    def _took(self) -> bool:
        self.lines += 1
        return True

    def finish(self) -> tuple[list[PciDevice], list[Evidence]]:
        """The devices (only an input that showed a bus range or ACS control is an lspci report) and lone ACS lines."""
        devices = self.devices if any(d.acs or d.secondary is not None for d in self.devices) else []
        return devices, self.acs_lines


def _bus_id(address: str) -> str:
    address = address.lower()
    return address if address.count(":") == 2 else f"0000:{address}"
