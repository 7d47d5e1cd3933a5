"""NCCL 2.30's parameter registry dump (grammars/param_dump.lark): each parameter's value, where it came from
(`set_by=EnvPlugin`: the environment, NCCL's config files or an env plugin; `Default`) and its default. The
parameters set by anything but their default are settings, as a log's `set by environment` lines are.

A dump starts at its `=== ncclParam Registry Dump ===` header and goes on while its lines are the dump's.
"""

from __future__ import annotations

from dataclasses import dataclass

from lark import Tree
from lark.exceptions import LarkError

from ncclscope.model import Evidence
from ncclscope.parse.grammars import load, rule_text

HEADER = "=== ncclParam Registry Dump ==="
UNSET = "<unset>"
BOOLEANS = {"true": "1", "false": "0"}  # a bool parameter prints true/false; the environment says 1/0


@dataclass
class DumpedParam:
    name: str
    value: str | None
    set_by: str
    default: str | None
    evidence: Evidence


class ParamDumpReader:
    """Reads the lines of one input that belong to a parameter registry dump."""

    HINT_WORDS: tuple[str, ...] = ()
    HINT_START = HEADER

    def __init__(self, source: str) -> None:
        self.source = source
        self.params: list[DumpedParam] = []
        self.lines = 0
        self._inside = False
        self._key: str | None = None
        self._type: str | None = None

    @property
    def busy(self) -> bool:
        return self._inside

    def feed(self, line_no: int, text: str) -> bool:
        """True when the line is the dump's (then no other reader needs it)."""
        body = text.strip()
        if not body:
            return self._inside  # the empty line after each parameter
        if not self._inside and not body.startswith(HEADER):
            return False  # outside a dump only its header matters: no parse for the other lines of a job
        try:
            tree = load("param_dump").parse(body)
        except LarkError:
            self._inside, self._key = False, None  # the dump ended
            return False
        kind = tree.children[0]
        assert isinstance(kind, Tree)
        if kind.data == "header":
            self._inside = True
        elif kind.data == "key_line":
            self._key, self._type = rule_text(kind, "key"), rule_text(kind, "type_name")
        elif kind.data == "current_line" and self._key is not None:
            value = rule_text(kind, "value")
            default = rule_text(kind, "default_value")
            if self._type == "bool":
                value, default = BOOLEANS.get(value or "", value), BOOLEANS.get(default or "", default)
            self.params.append(
                DumpedParam(
                    name=self._key,
                    value=None if value in (None, UNSET) else value,
                    set_by=rule_text(kind, "set_by") or "",
                    default=None if default in (None, UNSET) else default,
                    evidence=Evidence(source=self.source, line=line_no, text=body),
                )
            )
        self.lines += 1
        return True
