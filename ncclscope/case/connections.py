"""Connection lines -> the Case's connection summary and its distinct edges (capped)."""

from __future__ import annotations

from ncclscope.model import (
    Connection,
    ConnectionSummary,
    Evidence,
)
from ncclscope.parse.normalize import clean
from ncclscope.parse.one_input import ParsedInput

EDGE_LIMIT = 10_000


# -------------------------------------------------------------------------------- connections
def add_connections(parsed: ParsedInput, summary: ConnectionSummary, edges: dict[tuple, list]) -> None:
    log = parsed.log
    path = parsed.source.path
    if log.net_same_device and summary.across_hosts is None:
        line, text = log.net_same_device
        summary.across_hosts = Evidence(source=path, line=line, text=text)
    for transport, count in log.by_transport.items():
        summary.total += count
        summary.by_transport[transport] = summary.by_transport.get(transport, 0) + count
        if transport not in summary.examples:
            line, text = log.transport_examples[transport]
            summary.examples[transport] = Evidence(source=path, line=line, text=text)
    with_gdr = without_gdr = via_proxy = 0  # summed here: each assignment to a pydantic field is a Python call
    for key, (count, line, raw) in log.edges.items():
        host, pid, transport, direction, rank, peer, nic, proxy, gdr, shared, _, _ = key
        if transport.startswith(("NET/", "COLLNET/")):
            if gdr:
                with_gdr += count
            else:
                without_gdr += count
            if proxy >= 0:
                via_proxy += count
        full = (path, *key)
        entry = edges.get(full)
        if entry is None:
            edges[full] = [count, line, raw]
        else:
            entry[0] += count
    summary.net_with_gdr += with_gdr
    summary.net_without_gdr += without_gdr
    summary.via_proxy += via_proxy


def _edge_order(item: tuple[tuple, list]) -> tuple:
    """Edges by source, host, pid, transport, direction, ranks, NIC and proxy; a missing host first."""
    key = item[0][:9]
    return key if None not in key else tuple("" if v is None else v for v in key)


def edge_models(edges: dict[tuple, list]) -> list[Connection]:
    # Built from plain dicts in one validation each (Evidence nested): half the time of keyword constructors,
    # which validate the nested model again; up to EDGE_LIMIT of them after the last range, on one core.
    build = Connection.model_validate
    out = []
    ordered = sorted(edges.items(), key=_edge_order)
    for full, (count, line, raw) in ordered[:EDGE_LIMIT]:
        path, host, pid, transport, direction, rank, peer, nic, proxy, gdr, shared, from_dev, to_dev = full
        # NET edges are keyed by the local rank (whose NIC it is): the remote rank is kept apart as peer_rank
        net = transport.startswith(("NET/", "COLLNET/"))
        out.append(
            build(
                {
                    "from_rank": rank,
                    "to_rank": -1 if net else peer,
                    "peer_rank": peer if net and peer >= 0 else None,
                    "from_dev": from_dev or None,
                    "to_dev": to_dev or None,
                    "transport": transport,
                    "direction": direction or "",
                    "host": host,
                    "nic": nic if nic >= 0 else None,
                    "gdr": bool(gdr),
                    "shared": bool(shared),
                    "proxy_rank": proxy if proxy >= 0 else None,
                    "channels": count,
                    "evidence": {"source": path, "line": line, "text": clean(raw.decode("utf-8", "replace")).text},
                }
            )
        )
    return out
