"""`show_gids` output (grammars/show_gids.lark): the GIDs of each RDMA port, with IPv4 address, RoCE version and
network device, as the table NCCL_IB_GID_INDEX is chosen from.

A table starts at its `DEV PORT INDEX GID IPv4 VER DEV` header and goes on while its lines are rows; the first other
line ends it (the `n gids found` count is the table's too).
"""

from __future__ import annotations

import re

from lark import Tree

from ncclscope.model import Evidence, RoceGid
from ncclscope.parse.grammars import parse_or_none, rule_text

HEADER_RE = re.compile(r"^DEV\s+PORT\s+INDEX\s+GID\s+IPv4\s+VER\s+DEV\s*$")


class ShowGidsReader:
    """Reads the lines of one input that belong to `show_gids` tables."""

    HINT_WORDS: tuple[str, ...] = ()
    HINT_START = r"DEV\s+PORT\s+INDEX\s+GID"

    def __init__(self, source: str) -> None:
        self.source = source
        self.gids: list[RoceGid] = []
        self.lines = 0
        self._inside = False

    @property
    def busy(self) -> bool:
        return self._inside

    def feed(self, line_no: int, text: str) -> bool:
        """True when the line is show_gids' (then no other reader needs it)."""
        body = text.strip()
        if not self._inside and not HEADER_RE.match(body):
            return False
        tree = parse_or_none("show_gids", "start", body) if body else None
        if tree is None:
            self._inside = False  # the table ended
            return False
        kind = tree.children[0]
        assert isinstance(kind, Tree)
        self._inside = kind.data != "total"
        self.lines += 1
        if kind.data == "row":
            self.gids.append(
                RoceGid(
                    source=self.source,
                    device=rule_text(kind, "device") or "",
                    port=int(rule_text(kind, "port") or 0),
                    index=int(rule_text(kind, "index") or 0),
                    gid=rule_text(kind, "gid") or "",
                    ipv4=rule_text(kind, "ipv4"),
                    version=rule_text(kind, "version"),
                    netdev=rule_text(kind, "netdev"),
                    evidence=Evidence(source=self.source, line=line_no, text=body),
                )
            )
        return True
