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

from ncclscope.parse.grammars import terminal_regex
from ncclscope.parse.re2_pattern import re2_compile

ANSI_RE = re.compile(r"\x1b\[[0-9;?]{0,32}[A-Za-z]|\x1b\][^\x07]{0,512}\x07")
# what a terminal or a log collector appends to a line: tmux's copy-mode position "   [22/1819]",
# Ray's log de-duplication tag " [repeated 15x across cluster]"
TRAILER_RE = re.compile(r"(?:\[\d+/\d+\]|\[repeated \d+x across cluster\])(?:[ \t\x00]|\x1b\[[0-9;]*m)*$")
# NUL bytes inside a text file: the hole a crash or a truncating copy leaves
NUL_RE = re.compile(r"\x00+")
# a file name that a markdown renderer turned into a link to itself: [net.cc:1137](http://net.cc:1137/)
AUTOLINK_RE = re.compile(r"\[([^\[\]\s]{1,200})\]\(https?://\1/?\)")
AUTOLINK_BYTES_RE = re.compile(AUTOLINK_RE.pattern.encode())
AUTOLINK_MARK = b"](http"  # in every autolink; an autolink never crosses a line break
# RE2 finds a literal with memchr, three times as fast as `in` over a block of a log (issue 42)
_AUTOLINK_SEARCH = re2_compile(re.escape(AUTOLINK_MARK))


def unwrap_autolinks(data: bytes) -> bytes:
    """A block of lines with every autolink replaced by its text (line breaks are kept). The parser
    reads fields by position, so a link around a file name is undone before, not mapped around."""
    if _AUTOLINK_SEARCH is not None:
        found = _AUTOLINK_SEARCH.search(data) is not None
    else:
        found = AUTOLINK_MARK in data
    return AUTOLINK_BYTES_RE.sub(rb"\1", data) if found else data


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
    rf"(?:{terminal_regex('nccl_log', 'TIMESTAMP')}[ \t])?"  # the grammar's own: [2025-03-01 12:00:01]
    r"(?:[^\s:\[\]]{0,253}:\d{0,10}:\d{0,10}[ \t]+|[^\s:\[\]]{1,253}[ \t]+(?=\[\d+\][ \t]+NCCL ))?"
    r"(?:\[\d{1,6}\][ \t]+(?:[^\s\[\]][^\[\]\n]{0,400}?:\d+(?: \([^\n]{0,200}?\))?[ \t]+(?=NCCL (?:WARN|TRACE)))?"
    # a WARN whose host:pid:tid [dev] was cut: its file:line (one word) still belongs to it
    r"|[^\s\[\]]{1,400}:\d+(?: \([^\n]{0,200}?\))?[ \t]+(?=NCCL (?:WARN|TRACE)))?"
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


# What NCCL prints as a host (gethostname, cut at the first '.'): letters, digits, '-' and '_' (a paste may
# keep the domain). A record glued to the text before it takes none of that text's other characters.
NOT_HOST_RE = re.compile(r"[^A-Za-z0-9_.\-]")
QUOTE = "`"  # markdown's inline code around a line (clean() drops the closing one)
HOST_END_RE = re.compile(r"[:\s]")
NUMBER_RE = re.compile(r"[\d.]+")
# the number a table row ends with, when a record's host follows it without a space
TABLE_NUMBER_RE = re.compile(r"-?\d+(?:\.\d+)?(?=[A-Za-z])")
TABLE_CELL_RE = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?|[A-Za-z_]+|N/A")
# A prefix cut after its tid at the start of a line, the next record glued on ("g183:161264:166015g183:...")
LINE_START_PREFIX_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*(?=:\d+:\d+(?:[ \t]+\[\d|[A-Za-z_]))")


def _glued_host_start(text: str, start: int, here: Container[str]) -> int:
    """Where the host of a record that may be glued to the text before it begins, from the line alone: after
    any character no host has; after the number that ends a table row (nccl-tests printing on the same
    stream: "...  0.19       0gpu-w01:9920:9955 [0] NCCL INFO"); else where a host name this line begins with
    (`here`) ends the run of characters before its ':pid:tid'."""
    if text.startswith("[", start):  # a timestamp opens the record: nothing is glued to its host
        return start
    end_match = HOST_END_RE.search(text, start)
    end = end_match.start() if end_match else len(text)
    for foreign in NOT_HOST_RE.finditer(text, start, end):
        start = foreign.end()
    row_end = TABLE_NUMBER_RE.match(text, start, end)
    if row_end and _table_row_before(text[:start]):
        return row_end.end()
    while start < end and text[start] in "-.":  # a host name begins with a letter or a digit
        start += 1
    host = text[start:end]
    if not host or host in here:
        return start
    for cut in range(1, len(host)):
        rest = host[cut:]
        if rest in here and looks_like_host(rest):
            return start + cut
    return start


def _table_row_before(text: str) -> bool:
    """The text before a glued record is a table row: some numbers and words (`1024  256  float  sum`)."""
    cells = text.split()
    return len(cells) >= 3 and all(TABLE_CELL_RE.fullmatch(cell) for cell in cells)


def looks_like_host(name: str) -> bool:
    """A name NCCL may print as a host: host characters only, a letter or a digit first, and not a number
    alone (what a line cut inside its prefix leaves: the `59` of `59:13502:13531 [3] NCCL INFO`)."""
    return bool(name) and NOT_HOST_RE.search(name) is None and name[0] not in "-." and NUMBER_RE.fullmatch(name) is None


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
    if text.endswith("`", 0, cut_end):  # markdown: a line quoted as `code`, or a fence glued to the last line
        body = text[:cut_end].rstrip("`").rstrip(" \t")
        if body.strip("`"):  # a fence on its own line stays what it is
            cut_end = len(body)
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


RANK_TAG_RE = re.compile(r"\[rank(\d{1,7})\]:")  # torchrun's tag of a worker's output: its global rank


def prefix_rank(prefix: str) -> int | None:
    """The global rank a launcher's prefix names (torchrun's `[rank3]:`), or None."""
    match = RANK_TAG_RE.search(prefix) if "[rank" in prefix else None
    return int(match[1]) if match else None


def strip_launcher_prefix(text: str) -> tuple[str, str]:
    """Split `text` into (launcher prefix, rest); repeated prefixes (k8s then mpirun ...) all go."""
    pos = 0
    while True:
        match = LAUNCHER_PREFIX_RE.match(text, pos)
        if not match or match.end() == pos:
            break
        pos = match.end()
    return text[:pos], text[pos:]


def find_records(text: str) -> list[tuple[int, int]]:
    """(start, end) of every NCCL record in the line; a record ends where the next begins.

    When a record is glued to the text before it without a space ("...->0gpu-g01:27702:27731 [2]
    NCCL INFO"), the host is ambiguous; the line alone decides where it begins (_glued_host_start), so
    that the readers of a large file's byte ranges decide as one reader of the whole file does.
    """
    if NCCL_MARKER not in text:
        return []
    found: list[tuple[int, bool]] = []  # where each record's prefix match begins; whether it had one
    floor = 0
    for marker in MARKER_RE.finditer(text):
        window_start = max(floor, marker.start() - PREFIX_WINDOW)
        match = RECORD_PREFIX_RE.search(text, window_start, marker.end())
        found.append((match.start(), True) if match else (marker.start(), False))
        floor = marker.end()
    here: set[str] = set()
    at_start = LINE_START_PREFIX_RE.match(text)
    if at_start:  # the host the line begins with (its first record's, or a cut prefix's)
        here.add(at_start.group())
    starts: list[int] = []
    for start, matched in found:
        # after a record or other text, maybe glued to it; or after a backtick that opens the line (markdown's
        # inline code); not after a redacted name's "<", which is the host ("<cluster_name>:920:1145 ...")
        if matched and (starts or start > 0 or text.startswith(QUOTE, start)):
            start = _glued_host_start(text, start, here)
        starts.append(start)
    if len(starts) < text.count(NCCL_MARKER):
        # the hosts of this line's whole records tell where a glued cut record's host begins
        here |= {host for s in starts if looks_like_host(host := text[s : text.find(":", s)])}
        cut = [_glued_host_start(text, m.start(), here) for m in CUT_PREFIX_RE.finditer(text)]
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
