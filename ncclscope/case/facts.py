"""The typed facts the rules read, one per record family that states one (grammars/nccl_log/
names the fields): interfaces, GPUDirect RDMA state, IB completion errors, socket failures, RDMA
that cannot be used, P2P support, CUDA errors, unreadable sysfs attributes.

A fact is produced by whichever line form carries it (an interface by the bootstrap line, the NET/IB
listing or the NET/Socket listing; a missing libibverbs by its INFO or its WARN form), so a rule
that reads the fact sees every form. No text is matched here: the grammar has cut the fields.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import chain
from typing import Any

from ncclscope.model import (
    Case,
    CudaError,
    Evidence,
    GdrReport,
    IbCompletionError,
    InitTiming,
    InspectorSetup,
    InterfaceUse,
    LaunchMismatch,
    P2pReport,
    RdmaProblem,
    SocketFailure,
    SysfsUnreadable,
    VerbsFailure,
)
from ncclscope.parse.log_records import Event, message_text

FACTS_LIMIT = 5000  # facts kept per kind; the rest are counted in Case.facts_capped
# A handler yields (kind, builder): the fact is built only while its kind has room, so a log of a
# thousand ranks does not build ten thousand models only to count them.
Fact = tuple[str, Callable[..., Any]]  # called with no argument; a lambda binds its loop values by defaults


def as_int(value: Any) -> int | None:
    """A decoded field as a number; NCCL ends some numbers with a period ("set by environment to 22.")."""
    if value is None or value is True:  # an absent field, or a flag: no exception to raise and catch
        return None
    if isinstance(value, str) and value.isascii() and value.isdigit():
        return int(value)
    try:
        return int(str(value).strip().rstrip("."))
    except (TypeError, ValueError):
        return None


def as_float(value: Any) -> float | None:
    """A decoded field as a number with a fraction (seconds, GB/s); None when absent or not a number."""
    try:
        return float(str(value).strip()) if value is not None else None
    except ValueError:
        return None


def listed(value: Any) -> list[Any]:
    """A field that repeats (a list of matches) or not, as a list."""
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def find(fields: Any, key: str) -> Any:
    """The first value named `key` anywhere in a record's nested fields (None when absent)."""
    if isinstance(fields, dict):
        if key in fields:
            return fields[key]
        for value in fields.values():
            found = find(value, key)
            if found is not None:
                return found
    elif isinstance(fields, list):
        for value in fields:
            found = find(value, key)
            if found is not None:
                return found
    return None


def without_port(address: str | None) -> str | None:
    """'10.1.2.3<51207>' -> '10.1.2.3' (NCCL prints socket addresses with their port in <>)."""
    if not address:
        return None
    head, bracket, _ = str(address).partition("<")
    return head if bracket else str(address)


def _origin(e: Event) -> dict[str, Any]:
    return {"host": e.host, "pid": e.pid, "tid": e.tid, "cuda_dev": e.cuda_dev}


def evidence_of(e: Event, path: str) -> Evidence:
    """The line an event was read from, as evidence."""
    return Evidence(source=path, line=e.line, text=e.text)


# --------------------------------------------------------------------------------- per family
def _interfaces(e: Event, path: str) -> Iterator[Fact]:
    f = e.fields
    if e.family == "bootstrap":
        entries = listed(f.get("bootstrap_if")) or [f]
        for entry in entries:
            name = entry.get("interface") if isinstance(entry, dict) else None
            if name:
                address = without_port(entry.get("address"))
                index = as_int(entry.get("index"))
                yield (
                    "interfaces",
                    lambda name=name, address=address, index=index: InterfaceUse(
                        role="bootstrap",
                        name=str(name),
                        address=address,
                        index=index,
                        evidence=evidence_of(e, path),
                        **_origin(e),
                    ),
                )
    elif e.family == "net_ib" and isinstance(f.get("ib_devices"), dict):
        oob = f["ib_devices"]
        if oob.get("interface"):
            yield (
                "interfaces",
                lambda: InterfaceUse(
                    role="oob",
                    name=str(oob["interface"]),
                    address=without_port(oob.get("address")),
                    evidence=evidence_of(e, path),
                    **_origin(e),
                ),
            )
    elif e.family == "net_socket" and isinstance(f.get("socket_devices"), dict):
        for entry in listed(f["socket_devices"].get("socket_if")):
            yield (
                "interfaces",
                lambda entry=entry: InterfaceUse(
                    role="socket",
                    name=str(entry.get("interface")),
                    address=without_port(entry.get("address")),
                    index=as_int(entry.get("index")),
                    evidence=evidence_of(e, path),
                    **_origin(e),
                ),
            )


def _gdr(e: Event, path: str) -> Iterator[Fact]:
    f = e.fields
    if e.family == "connected":
        flag = as_int(f.get("gdr_flag"))
        if flag in (0, 1):
            yield (
                "gdr",
                lambda: GdrReport(scope="rings", enabled=flag == 1, evidence=evidence_of(e, path), **_origin(e)),
            )
        return
    gdr = f.get("gdr", f)
    if not isinstance(gdr, dict) or "gdr_state" not in gdr:
        return
    network = None
    if e.family == "net_ib":
        network = "IB"
    elif e.family == "net_gdr_other":
        network = str(f.get("gdr_net_name", "")).strip() or None
    enabled = str(gdr["gdr_state"]) == "Enabled"
    if "gdr_hca" in gdr:
        hca = gdr["gdr_hca"]
        name = str(hca.get("quoted", "")).strip("'") or hca.get("old_hca_name") or None
        yield (
            "gdr",
            lambda: GdrReport(
                scope="hca",
                enabled=enabled,
                network=network,
                hca_index=as_int(hca.get("hca")),
                hca_name=name,
                gpu=hca.get("gpu"),
                reason=str(hca["gdr_reason"]).strip("()") if hca.get("gdr_reason") else hca.get("gdr_old_reason"),
                evidence=evidence_of(e, path),
                **_origin(e),
            ),
        )
    elif "gdr_pair" in gdr:
        pair = gdr["gdr_pair"]
        yield (
            "gdr",
            lambda: GdrReport(
                scope="pair",
                enabled=enabled,
                network=network,
                hca_index=as_int(pair.get("hca")),
                hca_name=pair.get("net_node") or pair.get("old_hca_name"),
                gpu=pair.get("gpu") or pair.get("gpu_node"),
                distance=as_int(pair.get("distance")),
                limit=as_int(pair.get("limit")),
                evidence=evidence_of(e, path),
                **_origin(e),
            ),
        )


def _completion(e: Event, path: str) -> Iterator[Fact]:
    error = e.fields.get("completion_error")
    if not isinstance(error, dict):
        return
    peer = error.get("peer")
    yield (
        "ib_completion_errors",
        lambda: IbCompletionError(
            peer=peer,
            peer_address=without_port(peer),
            status=as_int(find(error, "status")),
            status_name=find(error, "status_name"),
            opcode=as_int(find(error, "opcode")),
            vendor_err=as_int(find(error, "vendor_err")),
            req_type=find(error, "req_type"),
            hca=find(error, "hca_name"),
            gin=e.family == "net_ib_gin",
            evidence=evidence_of(e, path),
            **_origin(e),
        ),
    )


SOCKET_PROBLEMS = {
    "connection_closed": "connection_closed",
    "connect_failed": "connect_failed",
    "call_to_failed": "call_failed",
    "bad_address_family": "bad_address_family",
    "socket_aborted": "aborted",
}


def _socket(e: Event, path: str) -> Iterator[Fact]:
    f = e.fields
    base = {"level": e.level, **_origin(e)}
    if e.family == "bootstrap_no_interface" or (e.family == "net_socket" and "socket_no_interface" in f):
        caller = "Bootstrap" if e.family == "bootstrap_no_interface" else "NET/Socket"
        yield (
            "socket_failures",
            lambda: SocketFailure(problem="no_interface", caller=caller, evidence=evidence_of(e, path), **base),
        )
    elif e.family == "bootstrap_failure" or (e.family == "net_socket" and "socket_error" in f):
        caller = "Bootstrap" if e.family == "bootstrap_failure" else "NET/Socket"
        yield (
            "socket_failures",
            lambda: SocketFailure(problem="other", caller=caller, evidence=evidence_of(e, path), **base),
        )
    elif e.family == "net_ofi" and "ofi_peer_unresponsive" in f:
        # aws-ofi-nccl: EFA reached the peer but its connection handshake got no answer (the peer's security group,
        # subnet or placement, or a peer process gone): a connection that failed, as a refused socket is
        yield (
            "socket_failures",
            lambda: SocketFailure(
                problem="connect_failed", caller="NET/OFI", call="handshake", errno_text="Unresponsive receiver",
                evidence=evidence_of(e, path), **base,
            ),
        )  # fmt: skip
    elif e.family == "socket_failure":
        problem = next((SOCKET_PROBLEMS[k] for k in f if k in SOCKET_PROBLEMS), "other")
        printed_caller = f.get("socket_caller")
        peer = find(f, "peer")
        retry = find(f, "socket_retry")
        yield (
            "socket_failures",
            lambda: SocketFailure(
                problem=problem,  # type: ignore[arg-type]
                caller="Net" if printed_caller is True else (str(printed_caller) if printed_caller else None),
                call=find(f, "socket_call") or ("connect" if problem == "connect_failed" else None),
                peer=peer,
                peer_address=without_port(peer),
                errno_text=find(f, "errno_message"),
                retrying=isinstance(retry, dict) and "retrying" in retry,
                evidence=evidence_of(e, path),
                **base,
            ),
        )


RDMA_FAMILIES = {
    "ibverbs_missing": "libibverbs_missing",
    "plugin_init_failed": "net_plugin_init_failed",
    "net_not_found": "net_not_found",
}
RDMA_MESSAGES = {
    "ib_no_device": "no_ib_device",
    "ib_no_ip_interface": "no_ip_interface",
    "ofi_init_failed": "ofi_init_failed",
    "ofi_no_provider": "ofi_no_provider",
    "ofi_no_fabric": "ofi_no_fabric",
}


def _rdma(e: Event, path: str) -> Iterator[Fact]:
    f = e.fields
    kind = RDMA_FAMILIES.get(e.family) or next((RDMA_MESSAGES[k] for k in f if k in RDMA_MESSAGES), None)
    if kind is None and e.family == "net_plugin_line" and "plugin_init_failed" in f:
        kind = "net_plugin_init_failed"
    load = f.get("plugin_load_failed")
    if kind is None and isinstance(load, dict) and "dl_symbol_error" in load:
        kind = "net_plugin_broken"  # found, but built for another C library or against other symbols
    if kind is not None:
        yield (
            "rdma_problems",
            lambda: RdmaProblem(
                kind=kind,  # type: ignore[arg-type]
                detail=message_text(e).removeprefix("NET/OFI").strip(),
                evidence=evidence_of(e, path),
                **_origin(e),
            ),
        )


def _net_ib(e: Event, path: str) -> Iterator[Fact]:
    """A NET/IB line other than a GDR one (those, one per HCA and process, are most NET/IB lines of a
    large job and state GDR alone: FACTS sends them to _gdr without this chain)."""
    return chain(_interfaces(e, path), _completion(e, path), _rdma(e, path))


def _p2p(e: Event, path: str) -> Iterator[Fact]:
    f = e.fields
    if e.family == "check_p2p_type":
        for pair in listed(f.get("key_value")):
            if pair.get("key") == "intraNodeP2pSupport":
                value = as_int(pair.get("value"))
                yield (
                    "p2p",
                    lambda value=value: P2pReport(
                        kind="intra_node_support", supported=bool(value), evidence=evidence_of(e, path), **_origin(e)
                    ),
                )
    elif e.family == "p2p_not_enabled":
        devices = [f"{d}(={b})" for d, b in zip(listed(f.get("dev")), listed(f.get("bus_id")), strict=False)]
        yield (
            "p2p",
            lambda: P2pReport(
                kind="not_enabled", supported=False, devices=devices, evidence=evidence_of(e, path), **_origin(e)
            ),
        )
    elif e.family == "p2p_indirect_note":
        devices = [str(f[k]) for k in ("gpu_a", "gpu_b") if f.get(k) is not None]
        yield (
            "p2p",
            lambda: P2pReport(
                kind="disabled_on_nvlink", supported=False, devices=devices, evidence=evidence_of(e, path), **_origin(e)
            ),
        )


def _cuda(e: Event, path: str) -> Iterator[Fact]:
    f = e.fields
    yield (
        "cuda_errors",
        lambda: CudaError(
            fatal=e.family == "cuda_failure",
            code=as_int(f.get("cuda_error")),
            text=str(f.get("quoted", "")).strip().strip("'"),
            location=e.location or f.get("source_location"),
            evidence=evidence_of(e, path),
            **_origin(e),
        ),
    )


def _verbs(e: Event, path: str) -> Iterator[Fact]:
    """A verbs call that failed with its errno (grammars/nccl_log 70_warn.lark call_failed, 20_network ofi)."""
    f = e.fields
    if e.family == "call_failed":
        call = f.get("call_name")
        if not call:
            return
        qp = f.get("qp_state") if isinstance(f.get("qp_state"), dict) else {}
        device = find(qp, "qp_device")
        yield (
            "verbs_failures",
            lambda: VerbsFailure(
                call=str(call),
                errno=as_int(find(f, "call_errno")),
                errno_text=_text(find(f, "call_errno_text")),
                device=_text(device),
                qp_from=_text(find(qp, "qp_from")),
                qp_to=_text(find(qp, "qp_to")),
                gid_index=as_int(find(qp, "gid_index")),
                local_gid=_text(find(qp, "local_gid")),
                remote_gid=_text(find(qp, "remote_gid")),
                evidence=evidence_of(e, path),
                **_origin(e),
            ),
        )
    elif e.family == "net_ofi" and "ofi_register_failed" in f:
        yield (
            "verbs_failures",
            lambda: VerbsFailure(
                call="OFI memory registration",
                errno=as_int(find(f, "ofi_rc")),
                errno_text=_text(find(f, "call_errno_text")),
                evidence=evidence_of(e, path),
                **_origin(e),
            ),
        )


def _launch(e: Event, path: str) -> Iterator[Fact]:
    """The bootstrap root's refusals (grammars/nccl_log 70_warn.lark bootstrap_mismatch, bootstrap_rank_twice)."""
    f = e.fields
    if e.family == "bootstrap_mismatch":
        differing = {}
        for field in listed(f.get("mismatch_field")):
            if not isinstance(field, dict):
                continue
            expected, sent = as_int(field.get("mismatch_expected")), as_int(field.get("mismatch_sent"))
            if field.get("name") and expected is not None and sent is not None and expected != sent:
                differing[str(field["name"])] = [expected, sent]
        yield (
            "launch_mismatches",
            lambda: LaunchMismatch(
                kind="info_mismatch", differing=differing, evidence=evidence_of(e, path), **_origin(e)
            ),
        )
    elif e.family == "bootstrap_rank_twice":
        yield (
            "launch_mismatches",
            lambda: LaunchMismatch(
                kind="rank_twice", rank=as_int(f.get("rank")), nranks=as_int(f.get("nranks")),
                evidence=evidence_of(e, path), **_origin(e),
            ),
        )  # fmt: skip


def _timings(e: Event, path: str) -> Iterator[Fact]:
    """`Init timings ...` and `Bootstrap timings ...` (2.22+): the total and each phase in seconds."""
    f = e.fields
    total = as_float(f.get("total"))
    if total is None:
        return
    phases = {}
    for part in listed(f.get("timing_part")):
        if isinstance(part, dict) and part.get("phase") is not None:
            seconds = as_float(part.get("seconds"))
            if seconds is not None:
                phases[str(part["phase"])] = seconds
    yield (
        "init_timings",
        lambda: InitTiming(
            kind="init" if e.family == "init_timings" else "bootstrap",
            rank=as_int(f.get("rank")),
            nranks=as_int(f.get("nranks")),
            total=total,
            phases=phases,
            evidence=evidence_of(e, path),
            **_origin(e),
        ),
    )


def _text(value: Any) -> str | None:
    """A field that is text, or a list of tokens (a device and its port) joined as printed."""
    if value is None:
        return None
    if isinstance(value, dict):  # a device and its port: {"name": "mlx5_0", "int": "1"}
        value = list(value.values())
    if isinstance(value, list):
        return ":".join(str(v) for v in value)
    return str(value).strip() or None


def _sysfs(e: Event, path: str) -> Iterator[Fact]:
    sysfs = e.fields.get("sysfs_path")
    if sysfs:
        yield "sysfs_unreadable", lambda: SysfsUnreadable(path=str(sysfs), evidence=evidence_of(e, path), **_origin(e))


def _inspector(e: Event, path: str) -> Iterator[Fact]:
    """NCCL Inspector's own INFO lines: whether its dump thread runs, how often, where and in which format."""
    f = e.fields
    writes = e.family == "inspector_dumping"
    fmt = _text(f.get("dump_format"))
    interval = f.get("dump_interval")  # {"interval_us": N}, or a flag for continuous dumping
    yield (
        "inspector_setups",
        lambda: InspectorSetup(
            writes=writes,
            interval_us=as_int(interval.get("interval_us")) if isinstance(interval, dict) else None,
            directory=_text(f.get("dump_dir")),
            output_format=fmt,
            evidence=evidence_of(e, path),
            **_origin(e),
        ),
    )


FACTS: dict[str, Callable[[Event, str], Iterator[Fact]]] = {
    "bootstrap": _interfaces,
    "net_ib": lambda e, p: _gdr(e, p) if "gdr" in e.fields else _net_ib(e, p),
    "net_ib_gin": _completion,
    "net_socket": lambda e, p: chain(_interfaces(e, p), _socket(e, p)),
    "gdr": _gdr,
    "net_gdr_other": _gdr,
    "connected": _gdr,
    "socket_failure": _socket,
    "bootstrap_failure": _socket,
    "bootstrap_no_interface": _socket,
    "ibverbs_missing": _rdma,
    "plugin_init_failed": _rdma,
    "net_not_found": _rdma,
    "net_plugin_line": _rdma,
    "net_ofi": lambda e, p: chain(_rdma(e, p), _verbs(e, p), _socket(e, p)),
    "call_failed": _verbs,
    "init_timings": _timings,
    "bootstrap_mismatch": _launch,
    "bootstrap_rank_twice": _launch,
    "bootstrap_timings": _timings,
    "check_p2p_type": _p2p,
    "p2p_not_enabled": _p2p,
    "p2p_indirect_note": _p2p,
    "cuda_failure": _cuda,
    "cuda_failure_ignored": _cuda,
    "topo_detection": _sysfs,
    "inspector_dumping": _inspector,
    "inspector_no_dump": _inspector,
}


def record(case: Case, e: Event, path: str) -> None:
    """The facts of one record, appended to the Case (at most FACTS_LIMIT of each kind)."""
    handler = FACTS.get(e.family)
    if handler is None:
        return
    for kind, build in handler(e, path):
        facts = getattr(case, kind)
        if len(facts) < FACTS_LIMIT:
            facts.append(build())
        else:
            case.facts_capped[kind] = case.facts_capped.get(kind, 0) + 1
