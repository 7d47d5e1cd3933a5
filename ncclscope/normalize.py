"""Undoing what terminals, launchers and log collectors do to lines before they reach us.

Three jobs, all on one physical line:
- `clean`: drop ANSI escapes, CR and tmux scroll markers, remembering where each kept
  character came from (so positions found in the clean text map back to the raw line);
- `strip_launcher_prefix`: remove what mpirun, srun, torchrun, Ray, pdsh, Kubernetes and
  CloudWatch put in front of a line, and markdown quoting (real-world-variants.md);
- `find_records`: locate NCCL records inside a line, wherever they start (after a launcher
  prefix, glued to another record, after a table row). The grammar then parses each record; the
  expression here only finds where records begin.
"""

from __future__ import annotations

import re
from collections.abc import Container
from dataclasses import dataclass

ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
# tmux copy-mode position marker pasted at the end of a line: "   [22/1819]"
TMUX_MARKER_RE = re.compile(r"\s*\[\d+/\d+\]\s*$")

_RFC3339 = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"
LAUNCHER_PREFIX_RE = re.compile(
    "|".join(
        [
            r"`+",  # a stray markdown fence backtick
            r"(?:> ?)+",  # markdown quoting
            rf"\s*\|\s*{_RFC3339}\s*\|\s?",  # CloudWatch-style table
            rf"{_RFC3339}\s",  # Kubernetes/collector timestamp
            r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) \w{3} +\d+ \d\d:\d\d:\d\d \d{4}",  # ctime glued by mpirun
            r"\[\d+,\d+\]<(?:stdout|stderr)>:",  # mpirun --tag-output
            r"\[(?:rank|default)\d+\]:",  # torchrun / elastic
            r"\((?:\w+) pid=\d+(?:, ip=[\d.]+)?\) ",  # Ray workers
            r"(?:\d{1,3}\.){3}\d{1,3}: ",  # pdsh-style host forwarding
            r"\d+: ",  # srun --label
        ]
    )
)

# Where NCCL records begin (formats.md A.2): [timestamp] host:pid:tid [dev] [file:line [(func)]] NCCL LEVEL.
# The host may be empty, pid:tid may be lost ("host [5] NCCL"), everything before NCCL may be lost.
# It is matched backwards from each level marker, inside a bounded window, so that a long run of
# text without markers costs linear time.
MARKER_RE = re.compile(r"NCCL (?:INFO|WARN|TRACE|CALL|ABORT)\b")
RECORD_PREFIX_RE = re.compile(
    r"(?:\[(?!\d+\])[^\]\n]{1,64}\][ \t])?"
    r"(?:[^\s:\[\]]{0,253}:\d{1,10}:\d{1,10}[ \t]+|[^\s:\[\]]{1,253}[ \t]+(?=\[\d+\][ \t]+NCCL ))?"
    r"(?:\[\d{1,6}\][ \t]+(?:[^\s\[\]][^\[\]\n]{0,400}?:\d+(?: \([^\n]{0,200}?\))?[ \t]+(?=NCCL (?:WARN|TRACE)))?)?"
    r"NCCL (?:INFO|WARN|TRACE|CALL|ABORT)\Z"
)
PREFIX_WINDOW = 1200
NCCL_MARKER = "NCCL "


def _known_host_start(text: str, start: int, known_hosts: Container[str]) -> int:
    colon = text.find(":", start)
    host = text[start:colon] if colon > start else ""
    if not host or host in known_hosts:
        return start
    for cut in range(1, len(host)):
        if host[cut:] in known_hosts:
            return start + cut
    return start


@dataclass(slots=True)
class CleanLine:
    """A line with ANSI escapes, CR and tmux markers removed."""

    text: str
    # positions[i] = index in the raw line of text[i]; None when nothing was removed
    positions: list[int] | None = None

    def raw_span(self, start: int, end: int) -> tuple[int, int]:
        if self.positions is None:
            return start, end
        if start >= len(self.positions):
            last = self.positions[-1] + 1 if self.positions else 0
            return last, last
        return self.positions[start], self.positions[end - 1] + 1 if end > start else self.positions[start]


def clean(raw: str) -> CleanLine:
    """Drop what a terminal added; keep a position map when anything was dropped."""
    text = raw
    cut_end = len(text)
    if text.endswith("\r"):
        cut_end -= 1
    marker = TMUX_MARKER_RE.search(text, 0, cut_end) if "/" in text else None
    if marker:
        cut_end = marker.start()
    if "\x1b" not in text:
        if cut_end == len(text):
            return CleanLine(text)
        return CleanLine(text[:cut_end])
    kept: list[str] = []
    positions: list[int] = []
    pos = 0
    for match in ANSI_RE.finditer(text, 0, cut_end):
        kept.append(text[pos : match.start()])
        positions.extend(range(pos, match.start()))
        pos = match.end()
    kept.append(text[pos:cut_end])
    positions.extend(range(pos, cut_end))
    return CleanLine("".join(kept), positions)


def strip_launcher_prefix(text: str) -> tuple[str, str]:
    """Split `text` into (launcher prefix, rest); repeated prefixes (k8s then mpirun ...) all go."""
    pos = 0
    while True:
        match = LAUNCHER_PREFIX_RE.match(text, pos)
        if not match or match.end() == pos:
            break
        pos = match.end()
    return text[:pos], text[pos:]


def find_records(text: str, known_hosts: Container[str] = ()) -> list[tuple[int, int]]:
    """(start, end) of every NCCL record in the line; a record ends where the next begins.

    When a record is glued to the text before it without a space ("...->0gpu-g01:27702:27731 [2]
    NCCL INFO"), the host is ambiguous; a host name already seen in the input decides where it begins.
    """
    if NCCL_MARKER not in text:
        return []
    starts: list[int] = []
    floor = 0
    for marker in MARKER_RE.finditer(text):
        window_start = max(floor, marker.start() - PREFIX_WINDOW)
        match = RECORD_PREFIX_RE.search(text, window_start, marker.end())
        start = match.start() if match else marker.start()
        if match and known_hosts and starts:
            start = _known_host_start(text, start, known_hosts)
        starts.append(start)
        floor = marker.end()
    spans = []
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(text)
        # records glued on one line are separated by padding; it belongs to neither
        while end > start and text[end - 1] in " \t":
            end -= 1
        spans.append((start, end))
    return spans
