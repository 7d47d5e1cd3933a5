"""NET009, NET010 and NET011: an RDMA verbs call that failed, read by its errno (data/verbs_errors.json): a queue pair
that cannot be connected, memory that cannot be pinned for RDMA; and the IB events that say the fabric changed."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from ncclscope.common.data_files import data_json
from ncclscope.common.words import plural
from ncclscope.diagnose.rules.context import Context, shown
from ncclscope.diagnose.rules.registry import make_finding, rule
from ncclscope.diagnose.rules.version import host_list
from ncclscope.model import Finding, VerbsFailure


def _errors() -> dict[str, Any]:
    return dict(data_json("verbs_errors.json"))


def _matches(failure: VerbsFailure, entry: dict[str, Any]) -> bool:
    return failure.errno in entry["errnos"] or (failure.errno_text or "") in entry["texts"]


@rule("NET009", "qp-connect-failed", severity="error", needs=["nccl_log"])
def qp_connect_failed(ctx: Context) -> Iterable[Finding]:
    """An IB/RoCE queue pair cannot be connected: `Call to ibv_modify_qp failed with 110 Connection timed out, on dev
    mlx5_0:1, curr state INIT, next state RTR ...` (or `ibv_create_ah`), read by its errno: 110 timed out means the two
    NICs cannot reach each other (a rail-only fabric paired cross-rail, different subnets); 19 no such device, 22
    invalid argument, 101/113 unreachable mean the queue pair's RoCE address is wrong (the GID index).

    Why: NCCL connects a queue pair per peer and channel when a communicator first talks to it; if the NICs cannot
    reach each other the connection fails and the job stops at init or at its first collective, with a SystemError
    that says nothing of the fabric.

    Fix: Follow the decoded errno in the message: NCCL_CROSS_NIC=0 (or connect the rails) for timeouts; the RoCE v2
    GID (unset NCCL_IB_GID_INDEX or set the right index, `show_gids`) for addressing errors.

    Sources: NCCL 2.30 src/misc/ibvwrap.cc (ibv_modify_qp's errno and its HINT lines on cross-rail and the GID
    index); NCCL docs env.rst (NCCL_CROSS_NIC, NCCL_IB_GID_INDEX); data/verbs_errors.json
    """
    data = _errors()
    failures = [f for f in ctx.case.verbs_failures if f.call in data["qp_calls"]]
    groups: dict[str, list[VerbsFailure]] = {}
    for f in failures:
        entry = next((e for e in data["qp_errors"] if _matches(f, e)), None)
        groups.setdefault(entry["cause"] if entry else "", []).append(f)
    for cause, items in groups.items():
        entry = next((e for e in data["qp_errors"] if e["cause"] == cause), None)
        first = items[0]
        errno = f"{first.errno} {first.errno_text}" if first.errno is not None else (first.errno_text or "an error")
        where = f" on {first.device}" if first.device else ""
        pair = (
            f" ({first.qp_from} -> {first.qp_to}, local GID {first.local_gid}, remote GID {first.remote_gid})"
            if first.qp_from and first.remote_gid
            else ""
        )
        hosts = sorted({f.host for f in items if f.host})
        said = f": {entry['cause']}" if entry else ": NCCL could not connect the queue pair"
        yield make_finding(
            "NET009", "error",
            f"{first.call} failed with {errno}{where}{pair} on {host_list(hosts) or 'a host'} "
            f"({plural(len(items), 'line')}){said}",
            evidence=shown(f.evidence for f in items), evidence_count=len(items), hosts=hosts,
            **({"fix": f"{entry['fix'][0].upper()}{entry['fix'][1:]}. Source: {entry['source']}."} if entry else {}),
        )  # fmt: skip


@rule("NET010", "memlock-limit", severity="error", needs=["nccl_log"])
def memlock_limit(ctx: Context) -> Iterable[Finding]:
    """RDMA memory registration or queue creation fails for lack of locked memory: `ibv_reg_mr`, `ibv_create_cq`,
    `ibv_create_qp` or the OFI plugin's `Unable to register memory ... RC: 12, Error: Cannot allocate memory`.

    Why: RDMA NICs read and write pinned memory: every buffer NCCL registers and every queue it creates is locked in
    RAM, counted against the process's locked-memory limit. A limit left at the distribution's default (often 64
    KiB or 8 MiB) fails the first registration with ENOMEM, although the host has memory to spare; the GPU's own
    memory is not the issue.

    Fix: Raise the locked-memory limit where the ranks are started (`ulimit -l unlimited` in the launcher's or
    container's environment: docker `--ulimit memlock=-1`, Kubernetes IPC_LOCK and the runtime's limits, Slurm's
    PropagateResourceLimits), not only in the login shell.

    Sources: NCCL docs troubleshooting.rst (InfiniBand: ulimit -l unlimited); rdma-core ibv_reg_mr(3) (ENOMEM);
    aws/aws-ofi-nccl (memory registration through libfabric); data/verbs_errors.json
    """
    data = _errors()
    entry = data["memory_errors"]
    items = [f for f in ctx.case.verbs_failures if f.call in data["memory_calls"] and _matches(f, entry)]
    if not items:
        return
    calls = sorted({f.call for f in items})
    hosts = sorted({f.host for f in items if f.host})
    yield make_finding(
        "NET010", "error",
        f"{', '.join(calls)} failed with Cannot allocate memory on {host_list(hosts) or 'a host'} "
        f"({plural(len(items), 'line')}): {entry['cause']}",
        evidence=shown(f.evidence for f in items), evidence_count=len(items), hosts=hosts,
    )  # fmt: skip


# the adapter's and port's events (rdma-core's names): the fabric or the port changed under the job. The events of
# one queue pair (local access violation, invalid request, CQ error) are that connection's, read with its completion
# errors (NET005), not a change of the fabric.
FABRIC_EVENTS = frozenset({
    "port error", "port active", "GID table change", "LID change", "P_Key change", "SM change", "client reregistration",
    "local catastrophic error",
})  # fmt: skip
PORT_DOWN_EVENTS = frozenset({"port error", "local catastrophic error"})  # a port or adapter out of service


@rule("NET011", "ib-port-events", severity="error", needs=["nccl_log"])
def ib_port_events(ctx: Context) -> Iterable[Finding]:
    """The log shows the fabric changing under the job: IB async events (`Got async event : port error`, `GID table
    change`, `port active`, `LID change`, `SM change`), or NCCL 2.30's IB port failover marking a device as failed
    (`Device 0 marked as failed. Initiating recovery?`). Error when a port went down or a device was marked failed,
    warning for the other events; with the device and host.

    Why: An async event is the adapter telling NCCL that its port or the subnet changed: a port error is a link that
    went down (cable, transceiver, switch port), a GID table change a RoCE address that changed under the running
    queue pairs. The completion errors (retry exceeded) and timeouts that follow are its fallout; from 2.30 NCCL can
    move the traffic to another port and go on at reduced bandwidth.

    Fix: Check the port named on that host (`ibstat`, `ibv_devinfo -v`, the switch port's counters, `dmesg` for mlx5
    link events), reseat or replace the cable or transceiver, and keep the host out until the link is stable; for
    GID table changes, what changes the RoCE addresses (NetworkManager, DHCP, a CNI) during the job.

    Sources: rdma-core ibv_get_async_event(3) and ibv_event_type_str (the event names); NCCL
    src/transport/net_ib.cc (the async event thread's WARN); NCCL 2.30 src/transport/net_ib/p2p_resiliency.cc (IB
    port failover: Device N marked as failed)
    """
    events = [
        w
        for w in ctx.case.warnings
        if w.family == "net_ib"
        and (w.kind == "ib_device_failed" or (w.kind == "ib_async_event" and w.fields.get("ib_event") in FABRIC_EVENTS))
    ]
    by_host: dict[str, list[Any]] = {}
    for w in events:
        by_host.setdefault(w.host or "a host the log does not name", []).append(w)
    for host, items in by_host.items():
        failed = [w for w in items if w.kind == "ib_device_failed"]
        names = Counter(str(w.fields.get("ib_event") or "") for w in items if w.kind == "ib_async_event")
        devices = sorted({str(w.fields["device_name"]) for w in items if w.fields.get("device_name")})
        down = failed or any(name in PORT_DOWN_EVENTS for name in names)
        said = [f"{n} x {name or 'async event'}" for name, n in names.most_common()]
        if failed:
            said.insert(0, f"{len(failed)} x device marked as failed by NCCL's IB port failover")
        ranks = sorted({w.pid for w in items if w.pid is not None})
        on = f" on {', '.join(devices)}" if devices else ""
        yield make_finding(
            "NET011", "error" if down else "warning",
            f"on {host}{on}: {'; '.join(said)} ({plural(len(ranks), 'process')}): "
            + ("a port went down or an adapter failed under the job" if down else "the fabric changed under the job"),
            evidence=shown(w.evidence for w in items), evidence_count=len(items), hosts=[host] if host else [],
        )  # fmt: skip
