"""RUN005: every NCCL WARN that no more specific rule reports, and the NCCL errors a framework raised
(with NCCL's `Last error:`), each with the `file:line -> N` chain that follows it decoded."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from itertools import groupby

from ncclscope.common.words import plural, ranks_named
from ncclscope.diagnose.rules.context import Context, shown
from ncclscope.diagnose.rules.error_strings import RESULT_ADVICE, nccl_result
from ncclscope.diagnose.rules.registry import make_finding, rule
from ncclscope.diagnose.rules.run import (
    chain_summary,
    chains_of,
    covered_lines,
    evidence_with_chains,
    hosts_text,
    lines_text,
    relayed_cuda_errors,
    warns_of,
)
from ncclscope.model import ErrorTrace, Finding, FrameworkEvent, NcclMessage, Severity, SocketFailure

# ---------------------------------------------------------------------------------------- RUN005
MEMLOCK = (
    "RDMA resources could not be allocated: usually the locked-memory limit; set `ulimit -l unlimited`"
    " (docker `--ulimit memlock=-1`)"
)
# What is known about the WARNs no more specific rule reports, by the verbs call that failed ...
CALL_HINTS = {
    "ibv_create_qp": MEMLOCK,
    "ibv_reg_mr": MEMLOCK,
    "ibv_reg_mr_iova2": MEMLOCK,
    "ibv_create_cq": MEMLOCK,
    "ibv_reg_dmabuf_mr": MEMLOCK,
    "ibv_modify_qp": "RoCE GID selection: since NCCL 2.21 leave NCCL_IB_GID_INDEX unset; set NCCL_IB_TC if the"
    " vendor requires it",
}
# ... and by the kind of message (NcclMessage.kind)
KIND_HINTS = {
    "ib_async_event": "the NIC reported a port or hardware event: check `ibstat`, the link state and `dmesg`",
    "ib_incompatible_devices": "NICs of different link layers (IB and RoCE) were paired: select NICs of one type"
    " with NCCL_IB_HCA",
    "shm_unlink_failed": "systemd removed NCCL's shared memory: set RemoveIPC=no in /etc/systemd/logind.conf",
    "message_truncated": "ranks disagree on sizes: NCCL settings that differ between ranks (ENV002), or an"
    " application desync",
    "ib_size_mismatch": "ranks called collectives of different sizes: an application desync"
    " (TORCH_NCCL_DESYNC_DEBUG, Flight Recorder)",
    "comm_aborted": "an earlier error aborted the communicator: look at the first WARN",
    "proxy_failure": "NCCL's proxy thread failed an operation; it follows a failure of this host or its peer"
    " (a connection error, a peer that died): look at the first error before it",
    "alloc_failed": "GPU memory ran out while NCCL allocated its buffers",
    "nvml_failure": "NVML could not answer (integrated GPUs, containers without NVML): NCCL goes on, maybe slower",
    "shared_mem_limit": "NCCL's kernels need more shared memory than this GPU gives: an NCCL build that predates"
    " the GPU; upgrade NCCL",
}
# kinds whose WARNs make one finding whatever their text: one cause, told once (an integrated GPU: NVML answers no
# call; the proxy service's socket to a rank broke: its accept, receive and operation WARNs follow one another)
TOLD_TOGETHER = {"nvml_failure": "NVML WARN", "proxy_failure": "proxy WARN"}
# WARNs that say an operation failed and NCCL returned the error: the job breaks (the others may go on)
FAILED_KINDS = frozenset(
    {
        "call_failed",
        "proxy_failure",
        "alloc_failed",
        "comm_aborted",
        "internal_error",
        "usage_error",
        "message_truncated",
        "ib_size_mismatch",
        "ofi_open_failed",
        "ofi_failed",
    }
)
# ibverbs' async events that only report a change (ibv_event_type_str in rdma-core libibverbs/enum_strs.c;
# IBV_EVENT_GID_CHANGE, PORT_ACTIVE, LID/PKEY/SM change, CLIENT_REREGISTER); the others are faults
# (QP/CQ errors, access violations, port error, device fatal)
PORT_CHANGE_EVENTS = frozenset(
    {"GID table change", "port active", "LID change", "P_Key change", "SM change", "client reregistration"}
)
BAD_ADDRESS = (
    "NCCL had no address to connect to: NCCL_SOCKET_IFNAME names an interface this host lacks (or one without"
    " an address), so the address it exchanged was empty"
)


def _shape(message: str) -> str:
    """Group key: numbers, hex and addresses normalised so that repeats of one message group."""
    words = []
    for word in message.split():
        if word.startswith("0x"):
            words.append("0x?")
            continue
        # each run of digits becomes one N
        words.append("".join("N" if digit else "".join(run) for digit, run in groupby(word, key=str.isdigit)))
    return " ".join(words)


def _hint(w: NcclMessage, failures: dict[tuple[str, int], SocketFailure]) -> str:
    call = w.fields.get("call_name")
    if call and call in CALL_HINTS:
        return CALL_HINTS[str(call)]
    failure = failures.get((w.evidence.source, w.evidence.line))
    if failure is not None and failure.problem == "bad_address_family":
        return BAD_ADDRESS
    return KIND_HINTS.get(w.kind, "")


@rule("RUN005", "nccl-warning", severity="warning", needs=["nccl_errors"])
def nccl_warning(ctx: Context) -> Iterable[Finding]:
    """Any NCCL WARN that no more specific rule reports, grouped by message (numbers, addresses and
    pointers normalised), with the `file:line -> N` chain that follows it decoded to the result name
    (0 Success, 1 UnhandledCudaError, 2 SystemError, 3 InternalError, 4 InvalidArgument, 5
    InvalidUsage, 6 RemoteError, 7 InProgress, 8 Timeout). An error when the WARN reports a failure
    that reached the caller (an error result in its chain, a failed call or operation, a NIC fault,
    an NCCL error the framework raised); a warning when NCCL goes on (NVML could not answer, advice).

    The WARNs of IB completion errors (NET005), connection failures (NET006), RDMA or plugin
    unavailability (NET002), duplicate GPUs (RUN002), /dev/shm (RUN003), CUDA failures (RUN004),
    P2P disabled on NVLink (TOPO005) and version mismatches (VER001) are left to those rules
    (COVERED_ELSEWHERE in this module).

    Why: NCCL prints WARN only when something failed or is about to; the chain after it shows the
    code path and the ncclResult_t the application received.

    Fix: Start from the first WARN of the job in time (later WARNs on other ranks usually follow from
    it); the result at the end of its chain says what kind of failure reached the application, and its
    first file:line where in NCCL's source it was seen. Each finding's fix says this for its WARN.

    Sources: NCCL src/include/debug.h and src/nccl.h.in (WARN lines, result codes, `-> N` chains);
    NCCL docs troubleshooting/networking_troubleshooting.rst (ibv calls and memlock, ibv_modify_qp and
    the RoCE GID), runtime_and_mpi_issues.rst (RemoveIPC); NCCL src/transport/net_ib.cc (incompatible
    devices); sjeaugey in NVIDIA/nccl#1328 (Message truncated)
    """
    covered = covered_lines(ctx)
    chains = chains_of(ctx)
    warns = warns_of(ctx, None, covered)  # one per input line
    chain_of = {(w.evidence.source, w.evidence.line): chains.after(w) for w in warns}
    # a chain's `file:line -> N` printed at WARN level (the proxy's progress thread ends its chain so): a line of
    # the chain told with the WARN it follows, not a WARN of its own that "NCCL went on after"
    in_chains = {(ev.source, ev.line) for t in chain_of.values() if t for ev in t.evidence}
    warns = [w for w in warns if (w.evidence.source, w.evidence.line) not in in_chains]
    failures = {(f.evidence.source, f.evidence.line): f for f in ctx.case.socket_failures}
    versions: dict[tuple[str | None, int | None], str] = {
        (p.host, p.pid): p.nccl_version for p in ctx.case.processes if p.nccl_version
    }
    groups: dict[str, list[NcclMessage]] = defaultdict(list)
    for w in warns:
        groups[f"kind {w.kind}" if w.kind in TOLD_TOGETHER else _shape(w.message)].append(w)
    # where each process's communicator was aborted (`socketProgressOpt: abort called`): its proxy's WARNs after
    # that are the teardown's, not a failure of their own
    aborted: dict[tuple, int] = {}
    for f in ctx.case.socket_failures:
        if f.problem == "aborted":
            key = (f.evidence.source, f.host, f.pid)
            aborted[key] = min(aborted.get(key, f.evidence.line), f.evidence.line)
    for _, msgs in sorted(groups.items(), key=lambda kv: (kv[1][0].evidence.source, kv[1][0].evidence.line)):
        first = msgs[0]
        teardown = all(
            w.kind == "proxy_failure" and w.evidence.line > aborted.get((w.evidence.source, w.host, w.pid), 1 << 62)
            for w in msgs
        )
        traces = [t for t in (chain_of[w.evidence.source, w.evidence.line] for w in msgs) if t]
        where = f"{first.file}:{first.file_line}" if first.file and first.file_line else (first.file or "")
        text = first.message if len(first.message) <= 200 else first.message[:197] + "..."
        others = len({_shape(w.message) for w in msgs}) - 1
        more = f" and {plural(others, 'other ' + TOLD_TOGETHER[first.kind])}" if others else ""
        message = (
            f"NCCL WARN `{text}`{f' ({where})' if where else ''}{more} on {hosts_text(msgs)}, {lines_text(len(msgs))}"
        )
        message += chain_summary(traces)
        hint = _hint(first, failures)
        if teardown:
            hint = "after the communicator's abort (`abort called`): its proxy thread stopping, not a failure"
        if hint:
            message += f"; {hint}"
        severity: Severity = "info" if teardown else "error" if _failed(first, traces) else "warning"
        yield make_finding(
            "RUN005",
            severity,
            message,
            fix=_fix(first, traces, severity, versions.get((first.host, first.pid))),
            evidence=evidence_with_chains(msgs, traces),
            evidence_count=len(msgs),
            hosts=sorted({w.host for w in msgs if w.host}),
        )
    yield from _framework_errors(ctx, covered)


def _fix(w: NcclMessage, traces: list[ErrorTrace], severity: Severity, version: str | None) -> str:
    """What to do about one WARN: the result its chain returned, decoded, and where NCCL first saw it (the
    message says what the WARN itself means; the fix does not say it again)."""
    if severity == "info":
        return "Nothing to do about this line: look at what made the communicator abort (the first error before it)."
    where = f"{w.file}:{w.file_line}" if w.file and w.file_line else None
    source = f"NCCL's source at {f'release {version}' if version else 'the release that wrote the log'}"
    if not (w.file or "").endswith((".cc", ".h", ".cu")) or w.message.startswith("NET/OFI"):
        source = "the source of the library that printed it"  # a net plugin's function name, not NCCL's file
    failing = [t for t in traces if t.result not in (0, 7)]
    if failing:
        t = failing[0]
        advice = RESULT_ADVICE.get(t.result)
        steps = [f"The failure propagated as {t.result_name} ({t.result})" + (f": {advice}" if advice else "")]
        if t.frames:
            steps.append(
                f"NCCL first saw the failure at {t.frames[0]}, the innermost file:line of the chain ({source})"
            )
    elif severity == "error":
        steps = [
            "Find the first error of this host and of its peers before this line: with NCCL_DEBUG=INFO on every rank"
            " the chain after a WARN names the result the application received"
        ]
        if where:
            steps.append(f"NCCL printed this WARN at {where} ({source})")
    else:
        steps = [
            "NCCL went on after this WARN (no error result follows it): act on it if the job then fails or is slow"
        ]
        if where:
            steps.append(f"It is printed at {where} ({source})")
    return ". ".join(steps) + "."


def _failed(w: NcclMessage, traces: list[ErrorTrace]) -> bool:
    """The WARN reports a failure that reached the caller: an error result propagated after it, a failed
    operation, or a fault the NIC reported (not a mere change of its port)."""
    if any(t.result not in (0, 7) for t in traces):  # 0 Success, 7 InProgress
        return True
    if w.kind == "ib_async_event":
        if "non-fatal" in str(w.fields.get("async_event", "")):  # NCCL's own word (2.24+ "Got non-fatal async event")
            return False
        event = str(w.fields.get("ib_async_event", "")).split("(")[0].strip()  # "port error(10)": the enum follows
        return event not in PORT_CHANGE_EVENTS
    return w.kind in FAILED_KINDS


def _framework_errors(ctx: Context, covered: dict[tuple[str, int], str]) -> Iterable[Finding]:
    """NCCL errors a framework raised (PyTorch's `NCCL error in: ...`), with NCCL's last error."""
    errors = [e for e in ctx.case.framework if e.kind in ("nccl_error", "nccl_result")]
    if not any(c.fatal for c in ctx.case.cuda_errors):  # RUN004 reports the unhandled CUDA errors then
        cuda = {id(e) for e in relayed_cuda_errors(ctx)}
        errors = [e for e in errors if id(e) not in cuda]
    if not errors:
        return
    last: list[FrameworkEvent] = [e for e in ctx.case.framework if e.kind == "last_error" and e.text]
    results = sorted({m.label for m in (nccl_result(e.text) for e in errors) if m})
    names = sorted({e.text for e in errors if e.kind == "nccl_result"})
    ranks = sorted({e.rank for e in errors if e.rank is not None})
    versions = sorted({e.nccl_version for e in errors if e.nccl_version})
    first = next((e for e in errors if e.kind == "nccl_error"), errors[0])
    text = first.text if len(first.text) <= 160 else first.text[:157] + "..."
    message = f"The framework raised NCCL errors ({lines_text(len(errors))}"
    message += f", {ranks_named(ranks)})" if ranks else ")"
    message += f": `{text}`"
    if results:
        message += f" = {', '.join(results)}"
    elif names:
        message += f" ({', '.join(names)})"
    if versions:
        message += f", NCCL {', '.join(versions)}"
    if last:
        quoted = last[0].text if len(last[0].text) <= 160 else last[0].text[:157] + "..."
        message += f"; NCCL's last error: `{quoted}`"
    warned = {(w.evidence.source, w.evidence.line) for w in ctx.case.warnings if w.level in ("WARN", "ABORT")}
    nccl_warns = {k: c for k, c in covered.items() if c and k in warned}  # INFO lines (NET/IB: no device) are no WARN
    if nccl_warns:
        message += f"; see the findings of {', '.join(sorted(set(nccl_warns.values())))} for NCCL's own lines"
    # the framework raised an NCCL result: the job failed. A text that is no NCCL result (XLA's "Unable to load
    # NCCL library") is the framework's own words about NCCL, relayed as they are
    severity: Severity = "error" if results or names else "warning"
    yield make_finding(
        "RUN005",
        severity,
        message,
        evidence=shown([e.evidence for e in errors] + [e.evidence for e in last]),
        evidence_count=len(errors) + len(last),
        ranks=ranks,
    )
