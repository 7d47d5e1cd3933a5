"""Undoing what terminals, launchers and log collectors do to lines before they reach us.

Three jobs, all on one physical line:
- `clean`: drop what terminals and trackers add (ANSI escapes, CR, tmux scroll markers, Ray's
  `[repeated Nx across cluster]` de-duplication tag, markdown autolinks that GitHub made of file
  names such as `[net.cc:1137](http://net.cc:1137/)`), remembering where each kept character came
  from (so positions found in the clean text map back to the raw line);
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

ANSI_RE = re.compile(r"\x1b\[[0-9;?]{0,32}[A-Za-z]|\x1b\][^\x07]{0,512}\x07")
# what a terminal or a log collector appends to a line: tmux's copy-mode position "   [22/1819]",
# Ray's log de-duplication tag " [repeated 15x across cluster]"
TRAILER_RE = re.compile(r"(?:\[\d+/\d+\]|\[repeated \d+x across cluster\])(?:[ \t\x00]|\x1b\[[0-9;]*m)*$")
# NUL bytes inside a text file: the hole a crash or a truncating copy leaves
NUL_RE = re.compile(r"\x00+")
# a file name that a markdown renderer turned into a link to itself: [net.cc:1137](http://net.cc:1137/)
AUTOLINK_RE = re.compile(r"\[([^\[\]\s]{1,200})\]\(https?://\1/?\)")
AUTOLINK_BYTES_RE = re.compile(AUTOLINK_RE.pattern.encode())


def unwrap_autolinks(data: bytes) -> bytes:
    """A block of lines with every autolink replaced by its text (line breaks are kept). The parser
    reads fields by position, so a link around a file name is undone before, not mapped around."""
    return AUTOLINK_BYTES_RE.sub(rb"\1", data) if b"](http" in data else data


_RFC3339 = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"
LAUNCHER_PREFIX_RE = re.compile(
    "|".join(
        [
            r"`+",  # a stray markdown fence backtick
            r"\[\d+(?:;\d+)*m",  # an ANSI colour whose ESC byte was lost in the paste: "[36m"
            r"(?:> ?)+",  # markdown quoting
            rf"\s*\|\s*{_RFC3339}\s*\|\s?",  # CloudWatch-style table
            rf"{_RFC3339}\s",  # Kubernetes/collector timestamp
            r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) \w{3} +\d+ \d\d:\d\d:\d\d \d{4}",  # ctime glued by mpirun
            r"\[\d+,\d+\]<(?:stdout|stderr)>:",  # mpirun --tag-output
            r"\[[A-Za-z][\w.\-]*(?:\|\d+)?\]:",  # torchrun/elastic/TorchX tags: [rank3]: [default0]: [trainer0|0]:
            r"\[\d{1,7}\] (?=\[[A-Za-z][\w.\-]*(?:\|\d+)?\]:)",  # a log viewer's pid before such a tag: [3318] [rank0]:
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
    r"(?:[^\s:\[\]]{0,253}:\d{0,10}:\d{0,10}[ \t]+|[^\s:\[\]]{1,253}[ \t]+(?=\[\d+\][ \t]+NCCL ))?"
    r"(?:\[\d{1,6}\][ \t]+(?:[^\s\[\]][^\[\]\n]{0,400}?:\d+(?: \([^\n]{0,200}?\))?[ \t]+(?=NCCL (?:WARN|TRACE)))?)?"
    r"NCCL (?:INFO|WARN|TRACE|CALL|ABORT)\Z"
)
PREFIX_WINDOW = 1200
NCCL_MARKER = "NCCL "
# A record cut right after its prefix by another writer: "g183:161262:166017 [5] NCCL " followed by the
# next record's prefix, or by nothing. It begins a record (so the one before it ends there) that holds
# no message. (A prefix followed by another logger's text is a fragment, see nccl_log.FRAGMENT_RE.)
CUT_PREFIX_RE = re.compile(
    r"[^\s:\[\]]{0,253}:\d{1,10}:\d{1,10}[ \t]+\[\d{1,6}\][ \t]+NCCL"
    r"(?=[ \t]*$|[ \t]*[^\s:\[\]]{0,253}:\d{1,10}:\d{1,10}[ \t]+\[\d{1,6}\][ \t]+NCCL )"
)
# A launcher's tag that ends a record's text is the next record's ("...Using network Socket[trainer0|0]:host:..."
# when two tagged lines were glued): it belongs to neither message
GLUED_TAG_RE = re.compile(
    r"(?:\[\d+,\d+\]<(?:stdout|stderr)>:|\[[A-Za-z][\w.\-]*(?:\|\d+)?\]:|\((?:\w+) pid=\d+(?:, ip=[\d.]+)?\) )+\Z"
)
# A record whose beginning was cut off inside the "NCCL" of its level marker: "CCL INFO Channel 08/0 : ..."
CUT_MARKER_RE = re.compile(r"(?:N?C?CL|L)[ \t]+(INFO|WARN)[ \t]+(?=\S)")


def _known_host_start(text: str, start: int, *known: Container[str]) -> int:
    """Where the host of a record glued to the text before it begins: the longest known host name
    that ends the run of characters before its ':pid:tid'."""
    colon = text.find(":", start)
    host = text[start:colon] if colon > start else ""
    if not host or any(host in hosts for hosts in known):
        return start
    for cut in range(1, len(host)):
        if any(host[cut:] in hosts for hosts in known):
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
    trailer = TRAILER_RE.search(text, 0, cut_end) if "]" in text else None
    if trailer:
        cut_end = len(text[: trailer.start()].rstrip(" \t"))  # the padding before it goes too
    removed = _removed_spans(text, cut_end)
    if not removed:
        return CleanLine(text) if cut_end == len(text) else CleanLine(text[:cut_end])
    kept: list[str] = []
    positions: list[int] = []
    pos = 0
    for start, end in removed:
        if end <= pos:
            continue
        start = max(start, pos)
        kept.append(text[pos:start])
        positions.extend(range(pos, start))
        pos = end
    kept.append(text[pos:cut_end])
    positions.extend(range(pos, cut_end))
    return CleanLine("".join(kept), positions)


def _removed_spans(text: str, end: int) -> list[tuple[int, int]]:
    """Spans of `text[:end]` that are no part of the line: ANSI escapes, NUL bytes, autolink wrappers."""
    spans: list[tuple[int, int]] = []
    if "\x1b" in text:
        spans.extend(m.span() for m in ANSI_RE.finditer(text, 0, end))
    if "\x00" in text:
        spans.extend(m.span() for m in NUL_RE.finditer(text, 0, end))
    if "](http" in text:
        for m in AUTOLINK_RE.finditer(text, 0, end):
            spans.append((m.start(), m.start(1)))  # "["
            spans.append((m.end(1), m.end()))  # "](http://...)"
    spans.sort()
    return spans


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
        if match and known_hosts and (starts or start > 0):  # glued to a record or to other text (a table row)
            start = _known_host_start(text, start, known_hosts)
        starts.append(start)
        floor = marker.end()
    if len(starts) < text.count(NCCL_MARKER):
        # the hosts of this line's whole records tell where a glued cut record's host begins
        here = {text[s : text.find(":", s)] for s in starts if text.find(":", s) > s}
        cut = [_known_host_start(text, m.start(), known_hosts, here) for m in CUT_PREFIX_RE.finditer(text)]
        starts = sorted(set(starts) | set(cut))
    spans = []
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(text)
        if end < len(text):
            tag = GLUED_TAG_RE.search(text, start, end)
            end = tag.start() if tag else end
        # records glued on one line are separated by padding; it belongs to neither
        while end > start and text[end - 1] in " \t":
            end -= 1
        spans.append((start, end))
    return spans
