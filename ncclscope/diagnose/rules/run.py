"""Rules of the RUN family about the errors NCCL reports at run time: RUN002 (two ranks on one GPU),
RUN003 (/dev/shm exhausted) and RUN004 (CUDA errors), each with the `file:line -> N` chain that follows
it decoded; and what they share with RUN005 (rules/run_warnings.py): which rule reports which WARN."""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable

from ncclscope.common.words import human_size
from ncclscope.diagnose.rules.context import Context, shown
from ncclscope.diagnose.rules.error_strings import cuda_error as decode_cuda
from ncclscope.diagnose.rules.error_strings import nccl_result
from ncclscope.diagnose.rules.net_errors import connection_kind
from ncclscope.diagnose.rules.registry import make_finding, rule
from ncclscope.diagnose.rules.version import host_list
from ncclscope.model import CudaError, ErrorTrace, Evidence, Finding, FrameworkEvent, NcclMessage

# ------------------------------------------------------------------------- who reports which WARN
# WARN families whose every line another rule reports
FAMILY_RULES = {"duplicate_gpu": "RUN002", "shm_failure": "RUN003", "version_mismatch": "VER001"}


def covered_lines(ctx: Context) -> dict[tuple[str, int], str]:
    """(source, line) -> the code of the rule that reports that line: the rules whose facts hold it.
    RUN005 reports every other WARN. Built once per analysis (four rules read it; a crash loop holds
    thousands of each fact); read only."""
    return ctx.once("covered_lines", _covered_lines)


def _covered_lines(ctx: Context) -> dict[tuple[str, int], str]:
    case = ctx.case
    out: dict[tuple[str, int], str] = {}

    def mark(evidence: Iterable[Evidence], code: str) -> None:
        for ev in evidence:
            out.setdefault((ev.source, ev.line), code)

    mark((p.evidence for p in case.rdma_problems), "NET002")
    # the OFI plugin's own WARNs in a process where it could not start say why it did not: NET002's story
    failed_ofi = {(p.host, p.pid) for p in case.rdma_problems if p.kind.startswith("ofi_")}
    mark((w.evidence for w in case.warnings if w.family == "net_ofi" and (w.host, w.pid) in failed_ofi), "NET002")
    mark((e.evidence for e in case.ib_completion_errors), "NET005")
    mark((f.evidence for f in case.socket_failures if connection_kind(f) is not None), "NET006")
    mark((c.evidence for c in case.cuda_errors if c.fatal), "RUN004")
    mark((p.evidence for p in case.p2p if p.kind == "disabled_on_nvlink"), "TOPO005")
    for w in case.warnings:
        code = FAMILY_RULES.get(w.family)
        if code:
            out[(w.evidence.source, w.evidence.line)] = code
    return out


def warns_of(ctx: Context, code: str | None, covered: dict[tuple[str, int], str] | None = None) -> list[NcclMessage]:
    """WARN (and ABORT) lines reported by `code` (None: by nobody else), one per input line."""
    covered = covered_lines(ctx) if covered is None else covered
    seen: set[tuple[str, int]] = set()
    out = []
    for w in ctx.case.warnings:
        key = (w.evidence.source, w.evidence.line)
        if w.level not in ("WARN", "ABORT") or key in seen:
            continue  # the same line can be recorded twice (a handler and the generic WARN path)
        if (covered.get(key) or None) == code:
            seen.add(key)
            out.append(w)
    return out


# ------------------------------------------------------------------------ error propagation chains
class Chains:
    """The `file:line -> N` chain that follows each WARN in the same thread."""

    def __init__(self, ctx: Context) -> None:
        self.traces: dict[tuple, list[tuple[int, ErrorTrace]]] = defaultdict(list)
        self.warn_lines: dict[tuple, list[int]] = defaultdict(list)
        for t in ctx.case.error_traces:
            if t.evidence:
                key = (t.evidence[0].source, t.host, t.pid, t.tid)
                self.traces[key].append((t.evidence[0].line, t))
        for lst in self.traces.values():
            lst.sort(key=lambda item: item[0])
        self.trace_lines = {key: [item[0] for item in lst] for key, lst in self.traces.items()}
        for w in ctx.case.warnings:
            self.warn_lines[(w.evidence.source, w.host, w.pid, w.tid)].append(w.evidence.line)
        for lines in self.warn_lines.values():
            lines.sort()

    def after(self, w: NcclMessage | CudaError) -> ErrorTrace | None:
        key = (w.evidence.source, w.host, w.pid, w.tid)
        traces = self.traces.get(key)
        if not traces:
            return None
        line = w.evidence.line
        lines = self.warn_lines.get(key, [])
        nxt = bisect.bisect_right(lines, line)
        limit = lines[nxt] if nxt < len(lines) else line + 200
        i = bisect.bisect_right(self.trace_lines[key], line)
        if i < len(traces) and traces[i][0] < limit:
            return traces[i][1]
        return None


def chains_of(ctx: Context) -> Chains:
    """The chains of the Case, found once per analysis (four rules read them); read only."""
    return ctx.once("chains", Chains)


def describe_chain(t: ErrorTrace) -> str:
    """'UnhandledCudaError (1) through include/alloc.h:246 -> ... -> group.cc:64 [Async thread]'."""
    frames = t.frames
    if len(frames) > 4:
        path = f"{frames[0]} -> {frames[1]} -> ... -> {frames[-1]} ({len(frames)} levels)"
    else:
        path = " -> ".join(frames)
    text = f"{t.result_name} ({t.result})"
    if t.errno_text:
        text += f", {t.errno_text},"
    text += f" through {path}"
    if t.thread:
        text += f" [{t.thread}]"
    return text


def chain_summary(chains: list[ErrorTrace]) -> str:
    if not chains:
        return ""
    first = describe_chain(chains[0])
    results = sorted({f"{t.result_name} ({t.result})" for t in chains})
    more = f"; results seen: {', '.join(results)}" if len(results) > 1 else ""
    return f"; propagated as {first}{more}"


def hosts_text(msgs: Iterable[NcclMessage | CudaError]) -> str:
    hosts = sorted({m.host for m in msgs if m.host})
    return host_list(hosts) if hosts else "an unknown host"


def lines_text(n: int) -> str:
    return f"{n} line{'s' if n != 1 else ''}"


def evidence_with_chains(msgs: list[NcclMessage] | list[CudaError], chains: list[ErrorTrace]) -> list[Evidence]:
    items = [m.evidence for m in msgs]
    if chains:
        items.extend(chains[0].evidence[:2])
    return shown(items)


# ---------------------------------------------------------------------------------------- RUN002
@rule("RUN002", "duplicate-gpu", severity="error", needs=["nccl_log"])
def duplicate_gpu(ctx: Context) -> Iterable[Finding]:
    """Two ranks of one communicator use the same GPU: `Duplicate GPU detected` (or, in newer NCCL,
    `Multiple Ranks are using the same GPU/Partition`).

    Why: NCCL requires one GPU per rank (unless explicitly allowed in recent versions); init fails
    with invalid usage. The usual cause is every process selecting GPU 0 because the device is not
    set from the local rank, or a launcher starting more ranks per node than there are GPUs.

    Fix: Set the device from the local rank before NCCL init (`torch.cuda.set_device(local_rank)`,
    or a per-rank CUDA_VISIBLE_DEVICES), and start as many ranks per node as GPUs.

    Sources: NCCL src/init.cc (`Duplicate GPU detected`; `Multiple Ranks are using the same
    GPU/Partition. Set NCCL_MULTI_RANK_GPU_ENABLE=1`)
    """
    warns = warns_of(ctx, "RUN002")
    chains = chains_of(ctx)
    by_host: dict[str | None, list[NcclMessage]] = defaultdict(list)
    for w in warns:
        by_host[w.host].append(w)
    # the same clash quoted without a host (a framework's "Last error:") joins the host that logged it
    for w in list(by_host.get(None, [])):
        home = [h for h, msgs in by_host.items() if h is not None and any(_clash(m) == _clash(w) for m in msgs)]
        if len(home) == 1:
            by_host[home[0]].append(w)
            by_host[None].remove(w)
    if not by_host.get(None):
        by_host.pop(None, None)
    for host, msgs in sorted(by_host.items(), key=lambda kv: kv[0] or ""):
        pairs = []
        ranks: set[int] = set()
        for w in msgs:
            f = w.fields
            if f.get("rank") is not None and f.get("other_rank") is not None:
                low, high = sorted((str(f["other_rank"]), str(f["rank"])), key=lambda r: (len(r), r))
                pairs.append(f"ranks {low} and {high} on CUDA device {f.get('bus_id', '?')}")
                for key in ("rank", "other_rank"):
                    try:
                        ranks.add(int(str(f[key])))
                    except ValueError:
                        pass
            else:
                pairs.append(f"`{w.message[:120]}`")
        traces = [t for t in (chains.after(w) for w in msgs) if t]
        yield make_finding(
            "RUN002",
            "error",
            f"Several ranks use one GPU on {host or 'an unknown host'}: {'; '.join(sorted(set(pairs)))}"
            f"{chain_summary(traces)}",
            evidence=evidence_with_chains(msgs, traces),
            evidence_count=len(msgs),
            hosts=[host] if host else [],
            ranks=sorted(ranks),
        )


def _clash(w: NcclMessage) -> tuple[frozenset[str], str]:
    """Which ranks clash on which device, in either order."""
    f = w.fields
    return frozenset({str(f.get("rank")), str(f.get("other_rank"))}), str(f.get("bus_id"))


# ---------------------------------------------------------------------------------------- RUN003
def _bytes(value: object) -> str:
    try:
        return human_size(float(str(value)), decimals=".1f", largest="GiB")
    except (TypeError, ValueError):
        return str(value)


@rule("RUN003", "shm-exhausted", severity="error", needs=["nccl_log"])
def shm_exhausted(ctx: Context) -> Iterable[Finding]:
    """NCCL could not create or grow its shared-memory segment: `failed to extend /dev/shm/...` or
    `Error while creating shared memory segment`.

    Why: NCCL keeps per-peer buffers in /dev/shm; containers get a 64 MiB /dev/shm by default,
    which a job with several GPUs per host exceeds, so init fails with a system error.

    Fix: Give the container a larger /dev/shm: `docker run --shm-size=1g` (or `--ipc=host`) with
    `--ulimit memlock=-1`; on Kubernetes mount an emptyDir with `medium: Memory` at /dev/shm.
    Check `df -h /dev/shm` inside the container.

    Sources: NCCL docs troubleshooting/runtime_and_mpi_issues.rst (/dev/shm in containers); NCCL
    src/misc/shmutils.cc (the WARN texts)
    """
    warns = warns_of(ctx, "RUN003")
    if not warns:
        return
    chains = chains_of(ctx)
    traces = [t for t in (chains.after(w) for w in warns) if t]
    details = []
    for w in warns:
        path, size = w.fields.get("shm_path"), w.fields.get("shm_bytes")
        details.append(f"{path} to {_bytes(size)}" if path and size else w.message[:100])
    shown_details = sorted(set(details))
    text = "; ".join(shown_details[:3]) + (" ..." if len(shown_details) > 3 else "")
    yield make_finding(
        "RUN003",
        "error",
        f"NCCL ran out of /dev/shm on {hosts_text(warns)} ({lines_text(len(warns))}): could not extend {text}"
        f"{chain_summary(traces)}",
        evidence=evidence_with_chains(warns, traces),
        evidence_count=len(warns),
        hosts=sorted({w.host for w in warns if w.host}),
    )


# ---------------------------------------------------------------------------------------- RUN004
@rule("RUN004", "cuda-error", severity="error", needs=["nccl_errors"])
def cuda_error(ctx: Context) -> Iterable[Finding]:
    """An NCCL WARN reports a CUDA failure (`Cuda failure N 'text'`), decoded: out of memory,
    operation not permitted (IMEX channel permissions on multi-node NVLink), system not yet
    initialized (fabric manager not running), illegal memory access, invalid argument ... Without
    NCCL's own lines, a framework that raised ncclUnhandledCudaError (PyTorch, vLLM, DeepSpeed,
    JAX/XLA's `NCCL operation ncclCommInitRank(...) failed: unhandled cuda error`) says the same, and
    the `Last error:` it relays names the CUDA error when NCCL printed one.

    Why: NCCL stops at the first failed CUDA call; the quoted CUDA error string says which
    resource or service is missing, and the `-> 1` chain (UnhandledCudaError) says where NCCL was.

    Fix: Depends on the error: the finding names the fix for the string it found.

    Sources: NCCL src/include/checks.h (`Cuda failure %d '%s'`); NCCL docs
    troubleshooting/performance_and_tuning.rst ("Multi-node NVLink (MNNVL) issues": Cuda failure
    800 'operation not permitted'); CUDA Runtime API docs (cudaError_t strings; 802 system not yet
    initialized: the fabric manager)
    """
    errors = _once([c for c in ctx.case.cuda_errors if c.fatal])
    if not errors:
        yield from _relayed_cuda_errors(ctx)
        return
    chains = chains_of(ctx)
    groups: dict[str, list[CudaError]] = defaultdict(list)
    for error in errors:
        groups[error.text.lower()].append(error)
    for _, items in sorted(groups.items()):
        first = items[0]
        known = decode_cuda(first.text)
        traces = [t for t in (chains.after(e) for e in items) if t]
        gpus = sorted({e.cuda_dev for e in items if e.cuda_dev is not None})
        gpu_text = f", GPU {', '.join(map(str, gpus))}" if gpus else ""
        code = f" (code {first.code})" if first.code is not None else ""
        message = f"CUDA error {first.text or 'not printed'}{code} in NCCL on {hosts_text(items)}{gpu_text}"
        message += f" ({lines_text(len(items))})"
        if known:
            message += f": {known.meaning}"
        message += chain_summary(traces)
        extra = {"fix": known.fix} if known and known.fix else {}
        yield make_finding(
            "RUN004",
            "error",
            message,
            evidence=evidence_with_chains(items, traces),
            evidence_count=len(items),
            hosts=sorted({e.host for e in items if e.host}),
            **extra,
        )


UNHANDLED_CUDA = "ncclUnhandledCudaError"


def relayed_cuda_errors(ctx: Context) -> list[FrameworkEvent]:
    """The framework's NCCL errors that are ncclUnhandledCudaError (RUN004's, not RUN005's)."""
    return [
        e
        for e in ctx.case.framework
        if e.kind in ("nccl_error", "nccl_result") and (m := nccl_result(e.text)) and m.label.startswith(UNHANDLED_CUDA)
    ]


def _relayed_cuda_errors(ctx: Context) -> Iterable[Finding]:
    """ncclUnhandledCudaError raised by the framework, no `Cuda failure` line of NCCL's in the inputs."""
    errors = relayed_cuda_errors(ctx)
    if not errors:
        return
    relayed = [e for e in ctx.case.framework if e.kind == "last_error" and e.relayed_family == "cuda_failure"]
    ranks = sorted({e.rank for e in errors if e.rank is not None})
    calls = sorted({e.nccl_call.split("(")[0] for e in errors if e.nccl_call})
    message = f"NCCL returned ncclUnhandledCudaError to the framework ({lines_text(len(errors))}"
    message += f", rank{'s' if len(ranks) != 1 else ''} {', '.join(map(str, ranks))})" if ranks else ")"
    if calls:
        message += f" in {', '.join(calls)}"
    extra: dict[str, object] = {}
    if relayed:
        quoted = relayed[0].relayed_fields.get("quoted", "").strip("'")
        known = decode_cuda(quoted)
        message += f": a CUDA call inside NCCL failed with {quoted or 'an error'}, as NCCL's last error relayed says"
        if known:
            message += f": {known.meaning}"
            if known.fix:
                extra["fix"] = known.fix
    else:
        message += (
            ": a CUDA call inside NCCL failed; which one and its CUDA error are in NCCL's own WARN (`Cuda failure"
            " ...`), which is not in the inputs"
        )
        extra["fix"] = (
            "Rerun with NCCL_DEBUG=WARN (INFO for the call chain) and read the first `Cuda failure` line: it names"
            " the CUDA error; check the host's kernel log (dmesg) for an Xid of that GPU and the GPU memory in use."
        )
    evidence = [e.evidence for e in errors] + [e.evidence for e in relayed]
    yield make_finding(
        "RUN004", "error", message, evidence=shown(evidence), evidence_count=len(evidence), ranks=ranks, **extra
    )


def _once(facts: list[CudaError]) -> list[CudaError]:
    seen: set[tuple[str, int]] = set()
    out = []
    for fact in facts:
        key = (fact.evidence.source, fact.evidence.line)
        if key not in seen:
            seen.add(key)
            out.append(fact)
    return out
