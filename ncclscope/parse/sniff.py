"""What a whole-document input is, from its first bytes: a Flight Recorder dump, `ncclras -f json`,
NCCL's XML, nccl-tests -J JSON, NCCL Inspector's JSON records or Prometheus text; anything else is read line by
line.

Apart from the readers of those documents (and their models) because the split of a large log into
byte ranges asks too, before its workers are forked: what they do not need is loaded after (parse/workers.py).
"""

from __future__ import annotations

import re
from typing import Literal

XmlForm = Literal["topology", "graph"]

PICKLE_PROTOCOLS = range(2, 6)
_ROOT_RE = re.compile(rb"<(system|graphs)[\s>/]")
_JSON_HINT = re.compile(r'"(?:nccl_version|average_bus_bandwid[ie]th|out_of_bounds|minimum_bytes|out_of_place)"')


def flight_recorder_dump(head: bytes) -> str | None:
    """'pickle' or 'json' when the start of a file can be a Flight Recorder dump, else None."""
    if len(head) >= 2 and head[0] == 0x80 and head[1] in PICKLE_PROTOCOLS:
        return "pickle"
    text = head.lstrip()[:4096]
    if text.startswith(b"{") and b'"entries"' in head and (b'"pg_config"' in head or b'"version"' in head):
        return "json"
    return None


def ras_json(head: bytes) -> bool:
    text = head.lstrip()
    return text.startswith(b"{") and b'"communicators' in head and (b'"ras"' in head or b'"nccl_version"' in head)


def nccl_xml(head: bytes) -> XmlForm | None:
    """'topology' or 'graph' when the input is NCCL's XML (it starts with markup and has that root)."""
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if not text.startswith(b"<"):
        return None
    found = _ROOT_RE.search(head)
    if found is None:
        return None
    return "topology" if found.group(1) == b"system" else "graph"


def nccl_tests_json(head: str) -> bool:
    """Cheap check on the first few KB of a .json input."""
    if not head.lstrip().startswith("{"):
        return False
    if _JSON_HINT.search(head):
        return True
    # version, start_time and args come first; a long env list may push the rest out of the head
    return '"start_time"' in head and '"args"' in head and '"version"' in head


def rccl_tests_json(head: str) -> bool:
    """rccl-tests' results file (parse/rccl_tests_json.py): a JSON array or lines of measurements."""
    return head.lstrip("\ufeff \t\r\n")[:1] in ("[", "{") and all(
        f'"{key}"' in head for key in ("busBw", "algBw", "inPlace")
    )


_PROM_SAMPLE = re.compile(
    rb"^nccl_(?:bus_bandwidth_gbs|collective_exec_time_microseconds|p2p_bus_bandwidth_gbs|p2p_exec_time_microseconds)"
    rb"[{\s]",
    re.MULTILINE,
)


def inspector_json(head: bytes) -> bool:
    """NCCL Inspector's JSON records (one object per operation, usually one per line)."""
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    return (
        text.startswith(b"{")
        and b'"inspector_output_format_version"' in head
        and (b'"coll_perf"' in head or b'"p2p_perf"' in head)
    )


def inspector_prometheus(head: bytes) -> bool:
    """NCCL Inspector's Prometheus text: its first line that is not a comment is one of the plugin's metrics."""
    for line in head.lstrip(b"\xef\xbb\xbf").splitlines():
        body = line.strip()
        if body and not body.startswith(b"#"):
            return _PROM_SAMPLE.match(body) is not None
    return False
