"""Rules of the RUN family (see ../shared/knowledge/rule-catalog.md): init that does not complete,
and the runtime errors NCCL (and PyTorch) report."""

from __future__ import annotations

import bisect
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from ncclscope.model import CommRank, Communicator, ErrorTrace, Evidence, Finding, NcclMessage, Severity
from ncclscope.rules.context import Context, shown
from ncclscope.rules.registry import make_finding, rule
from ncclscope.rules.version import host_list, rank_text

# ------------------------------------------------------------------------- who reports which WARN
CONNECTION_RE = re.compile(
    r"[Cc]onnection (refused|reset|closed|timed out)|closed by remote peer|[Ss]oftware caused connection abort"
    r"|wrong type|[Bb]roken pipe|[Nn]o route to host|[Nn]etwork is unreachable|exceeded (error )?retr|timed out"
)


@dataclass(frozen=True)
class Covered:
    """A WARN that another rule reports: by message family and/or message text."""

    code: str
    families: frozenset[str] | None = None
    text: re.Pattern[str] | None = None

    def matches(self, w: NcclMessage) -> bool:
        if self.families is not None and w.family not in self.families:
            return False
        return self.text is None or bool(self.text.search(w.message))


# The one place that says which WARN lines have a more specific rule; RUN005 reports every other
# WARN, and RUN002-RUN004 select their lines with their own entries.
COVERED_ELSEWHERE: tuple[Covered, ...] = (
    Covered("NET005", frozenset({"net_ib", "net_ib_gin"}), re.compile(r"Got completion")),
    Covered("NET006", frozenset({"socket_failure", "bootstrap_failure", "proxy_failure"})),
    Covered("NET006", None, CONNECTION_RE),
    Covered("NET002", frozenset({"ib_no_device", "plugin_init_failed"})),
    Covered(
        "NET002",
        None,
        re.compile(
            r"Failed to open libibverbs|NET/IB : No device found|[Ii]nitiali[sz]ation failed"
            r"|Failed to initialize (any )?NET plugin|Initializing plugin failed"
        ),
    ),
    Covered("RUN002", frozenset({"duplicate_gpu"})),
    Covered("RUN002", None, re.compile(r"Multiple Ranks are using the same GPU")),
    Covered("RUN003", frozenset({"shm_failure"}), re.compile(r"failed to extend|Error while creating shared memory")),
    Covered("RUN004", frozenset({"cuda_failure"})),
    Covered("TOPO005", frozenset({"p2p_indirect_note"})),
    Covered("VER001", frozenset({"version_mismatch"})),
)


def covered_by(w: NcclMessage) -> str | None:
    """The code of the rule that reports this WARN, or None."""
    for entry in COVERED_ELSEWHERE:
        if entry.matches(w):
            return entry.code
    return None


def _warns(ctx: Context, code: str | None) -> list[NcclMessage]:
    """WARN (and ABORT) lines reported by `code` (None: by nobody else), one per input line."""
    seen: set[tuple[str, int]] = set()
    out = []
    for w in ctx.case.warnings:
        if w.level not in ("WARN", "ABORT"):
            continue
        key = (w.evidence.source, w.evidence.line)
        if key in seen:
            continue  # the same line can be recorded twice (a handler and the generic WARN path)
        if covered_by(w) == code:
            seen.add(key)
            out.append(w)
    return out


# ------------------------------------------------------------------------ error propagation chains
THREAD_RE = re.compile(r"\[([A-Za-z][A-Za-z ]*[A-Za-z](?: \d+)?)\]\s*$")
ERRNO_RE = re.compile(r"-> \d+ \(([^)]*)\)")


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

    def after(self, w: NcclMessage) -> ErrorTrace | None:
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


def describe_chain(t: ErrorTrace) -> str:
    """'UnhandledCudaError (1) through include/alloc.h:246 -> ... -> group.cc:64 [Async thread]'."""
    frames = t.frames
    if len(frames) > 4:
        path = f"{frames[0]} -> {frames[1]} -> ... -> {frames[-1]} ({len(frames)} levels)"
    else:
        path = " -> ".join(frames)
    thread = t.thread
    if not thread and t.evidence:
        match = THREAD_RE.search(t.evidence[-1].text)
        thread = match.group(1) if match else None
    errno = None
    for e in t.evidence:
        match = ERRNO_RE.search(e.text)
        if match:
            errno = match.group(1)
            break
    text = f"{t.result_name} ({t.result})"
    if errno:
        text += f", {errno},"
    text += f" through {path}"
    if thread:
        text += f" [{thread}]"
    return text


def _chain_summary(chains: list[ErrorTrace]) -> str:
    if not chains:
        return ""
    first = describe_chain(chains[0])
    results = sorted({f"{t.result_name} ({t.result})" for t in chains})
    more = f"; results seen: {', '.join(results)}" if len(results) > 1 else ""
    return f"; propagated as {first}{more}"


def _hosts_text(msgs: list[NcclMessage]) -> str:
    hosts = sorted({m.host for m in msgs if m.host})
    return host_list(hosts) if hosts else "an unknown host"


def _lines(n: int) -> str:
    return f"{n} line{'s' if n != 1 else ''}"


def _evidence_with_chains(msgs: list[NcclMessage], chains: list[ErrorTrace]) -> list[Evidence]:
    items = [m.evidence for m in msgs]
    if chains:
        items.extend(chains[0].evidence[:2])
    return shown(items)


# ---------------------------------------------------------------------------------------- RUN001
def _comm_groups(ctx: Context) -> list[tuple[str, list[Communicator]]]:
    """Communicators with a commId one by one; those without (NCCL < 2.16, split comms) merged by
    API and size, because NCCL then keys them by process and pointer (one rank each)."""
    groups: list[tuple[str, list[Communicator]]] = []
    keyless: dict[tuple[str, int | None], list[Communicator]] = defaultdict(list)
    for comm in ctx.case.communicators:
        if comm.comm_id:
            groups.append((f"communicator {comm.comm_id}", [comm]))
        else:
            keyless[(comm.api or "", comm.nranks)].append(comm)
    for (api, _), comms in keyless.items():
        groups.append((f"{api + ' c' if api else 'C'}ommunicators without commId", comms))
    return groups


def _truncation(ctx: Context, sources: set[str]) -> str | None:
    """Positive evidence that the log of these sources was cut (see RUN001's documentation)."""
    for s in ctx.case.sources:
        if s.path not in sources:
            continue
        if s.problems:
            return f"{s.path}: {s.problems[0]}"
        for u in s.unrecognized:
            if "Init COMPLETE" in u.text:
                return f"{s.path}:{u.line} holds a damaged Init COMPLETE record"
            if "fragment" in u.reason:
                return f"{s.path}:{u.line} holds a cut record (the paste starts or ends mid-line)"
            if s.lines and u.line >= s.lines - 1:
                return f"{s.path}:{u.line}, the end of the input, is a cut record"
    return None


@rule("RUN001", "init-incomplete", severity="error", needs=["init"])
def init_incomplete(ctx: Context) -> Iterable[Finding]:
    """A communicator has ranks that logged `Init START` but no `Init COMPLETE`, or fewer ranks
    than `nranks` reported init although the inputs hold the logs of all its hosts.

    Severity: error; warning when the input is visibly cut. "Visibly cut" needs positive evidence,
    because a log that simply ends while ranks are in init is exactly what a hang looks like: the
    reader reported a cut or damaged input (Source.problems), a record of the input is a fragment
    (the paste starts or ends mid-line), a damaged `Init COMPLETE` record, or an unreadable last
    line. Ranks that are absent from the inputs altogether are judged only when the inputs cover
    the communicator (as many hosts as `nNodes`, or as many processes on its hosts as ranks);
    otherwise the finding is info: the other ranks' logs were not given, which is not a fault.

    Why: Every rank of a communicator must reach Init COMPLETE; the ranks that do not are the ones
    stuck (bootstrap, connection setup) or failed, and the other ranks wait for them until a
    timeout. The finding names them, and whether they logged a WARN (a failure) or nothing (a hang).

    Fix: Look at the named ranks' hosts first: their WARN lines, network reachability (bootstrap
    interface, firewall), GPU health. For a live hang, query NCCL RAS (`ncclras`, NCCL 2.24+) to
    see which ranks are missing. Give the logs of every rank (NCCL_DEBUG_FILE=nccl.%h.%p.log) so
    that none is silently absent.

    Sources: landscape.md 2.G.30 (NCCL logging.rst, ras.rst); stas00 ml-engineering
    network/debug/README.md (`grep "Init COMPLETE"` across rank logs); formats.md B.10 (Init
    START/COMPLETE per version: START only since 2.18.3)
    """
    warn_procs: dict[tuple[str | None, int | None], int] = defaultdict(int)
    seen: set[tuple[str, int]] = set()
    for w in ctx.case.warnings:
        if w.level in ("WARN", "ABORT") and (w.evidence.source, w.evidence.line) not in seen:
            seen.add((w.evidence.source, w.evidence.line))
            warn_procs[(w.host, w.pid)] += 1
    procs_per_host: dict[str, int] = defaultdict(int)
    for p in ctx.case.processes:
        if p.host:
            procs_per_host[p.host] += 1
    for label, comms in _comm_groups(ctx):
        members: dict[tuple, CommRank] = {}
        for comm in comms:
            for r in comm.ranks:
                key = (r.rank, r.host, r.pid)
                old = members.get(key)
                if old is None or (r.init_complete and not old.init_complete):
                    members[key] = r
        nranks = max((c.nranks or 0 for c in comms), default=0) or None
        nnodes = max((c.nnodes or 0 for c in comms), default=0) or None
        reported = {r.rank for r in members.values() if r.rank >= 0}
        completed = {r.rank for r in members.values() if r.init_complete}
        stuck = sorted(
            (r for r in members.values() if r.init_start and not r.init_complete and r.rank not in completed),
            key=lambda r: r.rank,
        )
        hosts = sorted({r.host for r in members.values() if r.host})
        missing = sorted(set(range(nranks)) - reported) if nranks else []
        if not stuck and not missing:
            continue
        covered = bool(
            (nnodes and len(hosts) >= nnodes) or (nranks and hosts and sum(procs_per_host[h] for h in hosts) >= nranks)
        )
        sources = {r.evidence.source for r in members.values() if r.evidence}
        cut = _truncation(ctx, sources)
        size = f"{nranks} ranks" if nranks else "size unknown"
        head = (
            f"{label[0].upper()}{label[1:]} ({size}, {len(hosts)} host{'s' if len(hosts) != 1 else ''} in the inputs)"
        )
        if stuck:
            by_host: dict[str, list[int]] = defaultdict(list)
            for r in stuck:
                by_host[r.host or "?"].append(r.rank)
            if len(by_host) > 6:
                ranks_all = [r.rank for r in stuck]
                where = f"ranks {rank_text(ranks_all)} on {len(by_host)} hosts ({host_list(sorted(by_host))})"
            else:
                where = ", ".join(
                    f"rank{'s' if len(set(rs)) != 1 else ''} {rank_text(rs)} on {h}"
                    for h, rs in sorted(by_host.items())
                )
            message = (
                f"{head}: {where} logged Init START but no Init COMPLETE"
                f" ({len(completed)} of the {len(reported)} rank{'s' if len(reported) != 1 else ''} in the inputs"
                " completed)"
            )
            warned = sum(warn_procs.get((r.host, r.pid), 0) for r in {(r.host, r.pid): r for r in stuck}.values())
            if warned:
                message += f"; their processes logged {_lines(warned)} of WARN (the failure is reported there)"
            elif not cut:
                message += "; their processes logged no WARN, so they are stuck (a hang), not failed"
            if missing and covered:
                message += f"; ranks {rank_text(missing)} never logged init at all"
            evidence = shown(r.evidence for r in stuck if r.evidence)
            severity: Severity = "error"
            if cut:
                severity = "warning"
                message += f"; but the input looks cut ({cut}), so their COMPLETE lines may just be missing"
            yield make_finding(
                "RUN001",
                severity,
                message,
                evidence=evidence,
                evidence_count=len(stuck),
                hosts=sorted(by_host),
                ranks=sorted({r.rank for r in stuck}),
            )
            continue
        evidence = shown(r.evidence for r in members.values() if r.evidence)
        if not covered:
            yield make_finding(
                "RUN001",
                "info",
                f"{head}: the inputs hold the init lines of {len(reported)} of {nranks} ranks"
                f" ({host_list(hosts) or 'no host named'}); the other ranks' logs are not among the inputs, so"
                " whether they completed init cannot be judged" + (f" (the input looks cut: {cut})" if cut else ""),
                evidence=evidence,
                evidence_count=len(members),
                hosts=hosts,
                ranks=sorted(reported),
                fix="Give the logs of every rank (NCCL_DEBUG_FILE=/shared/nccl.%h.%p.log) to check the whole job.",
            )
            continue
        message = (
            f"{head}: ranks {rank_text(missing)} never logged Init START or COMPLETE although the inputs hold the"
            f" logs of {'all ' + str(nnodes) + ' hosts' if nnodes else 'enough processes on its hosts'}"
        )
        severity2: Severity = "error"
        if cut:
            severity2 = "warning"
            message += f"; but the input looks cut ({cut}), so the lines may just be missing"
        yield make_finding(
            "RUN001",
            severity2,
            message,
            evidence=evidence,
            evidence_count=len(members),
            hosts=hosts,
            ranks=missing,
        )


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
    GPU/Partition. Set NCCL_MULTI_RANK_GPU_ENABLE=1`); formats.md B.18
    """
    warns = _warns(ctx, "RUN002")
    chains = Chains(ctx)
    by_host: dict[str | None, list[NcclMessage]] = defaultdict(list)
    for w in warns:
        by_host[w.host].append(w)
    for host, msgs in sorted(by_host.items(), key=lambda kv: kv[0] or ""):
        pairs = []
        ranks: set[int] = set()
        for w in msgs:
            f = w.fields
            if f.get("rank") is not None and f.get("other_rank") is not None:
                pairs.append(f"ranks {f['other_rank']} and {f['rank']} on CUDA device {f.get('bus_id', '?')}")
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
            f"{_chain_summary(traces)}",
            evidence=_evidence_with_chains(msgs, traces),
            evidence_count=len(msgs),
            hosts=[host] if host else [],
            ranks=sorted(ranks),
        )


# ---------------------------------------------------------------------------------------- RUN003
def _bytes(value: object) -> str:
    try:
        n = float(str(value))
    except (TypeError, ValueError):
        return str(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
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

    Sources: landscape.md 2.G.33 (NCCL troubleshooting/runtime_and_mpi_issues.rst); formats.md B.18
    """
    warns = _warns(ctx, "RUN003")
    if not warns:
        return
    chains = Chains(ctx)
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
        f"NCCL ran out of /dev/shm on {_hosts_text(warns)} ({_lines(len(warns))}): could not extend {text}"
        f"{_chain_summary(traces)}",
        evidence=_evidence_with_chains(warns, traces),
        evidence_count=len(warns),
        hosts=sorted({w.host for w in warns if w.host}),
    )


# ---------------------------------------------------------------------------------------- RUN004
# Common CUDA error strings (cudaGetErrorString / cuGetErrorString) and what they mean for NCCL.
CUDA_ERRORS: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (
        re.compile(r"out of memory"),
        "the GPU ran out of memory while NCCL allocated its buffers",
        "Leave GPU memory for NCCL: lower the application's use (batch size, caching allocator limits) and check"
        " nvidia-smi for other processes on the GPU.",
    ),
    (
        re.compile(r"operation not permitted"),
        "CUDA refused the operation; with multi-node NVLink this is the IMEX channel permission"
        " (/dev/nvidia-caps-imex-channels/channel*)",
        "Give the job write access to /dev/nvidia-caps-imex-channels/channel* and check `nvidia-imex-ctl -H -N`"
        " (domain UP, every node READY).",
    ),
    (
        re.compile(r"system not yet initialized"),
        "the NVSwitch fabric is not initialised: nvidia-fabricmanager is not running (or failed)",
        "Start nvidia-fabricmanager (same version as the driver) and check `nvidia-smi -q | grep -A4 Fabric`.",
    ),
    (
        re.compile(r"illegal memory access|unspecified launch failure|misaligned address|illegal instruction"),
        "a CUDA kernel faulted (often the application's, seen by NCCL's next CUDA call); the CUDA context is lost",
        "Find the faulting kernel with CUDA_LAUNCH_BLOCKING=1 or compute-sanitizer; check the counts and buffers"
        " passed to NCCL; check `dmesg` for Xid errors.",
    ),
    (
        re.compile(r"device-side assert"),
        "an assertion in a kernel (usually the application's) fired",
        "Run with CUDA_LAUNCH_BLOCKING=1 to find the kernel and its assertion.",
    ),
    (
        re.compile(r"peer access"),
        "CUDA peer access between two GPUs could not be enabled",
        "Check `nvidia-smi topo -p2p r` and the PCIe ACS/IOMMU settings.",
    ),
    (
        re.compile(r"invalid device ordinal|no CUDA-capable device"),
        "the process does not see the GPU it was given",
        "Check CUDA_VISIBLE_DEVICES and the local-rank-to-GPU mapping of the launcher.",
    ),
    (
        re.compile(r"driver version is insufficient|forward compatibility"),
        "the driver is older than the CUDA version NCCL was built for",
        "Upgrade the driver or use an NCCL built for the installed CUDA.",
    ),
    (
        re.compile(r"ECC error|uncorrectable"),
        "the GPU reported a hardware (ECC) error",
        "Drain the GPU; check `nvidia-smi -q -d ECC` and Xid errors in `dmesg`.",
    ),
    (
        re.compile(r"operation not supported|not supported"),
        "the driver or GPU does not support an operation NCCL tried (cuMem, multicast or fabric handles)",
        "Check that driver and CUDA are recent enough for this NCCL; as a test only, NCCL_CUMEM_ENABLE=0 or"
        " NCCL_NVLS_ENABLE=0 tell which feature is missing.",
    ),
    (
        re.compile(r"invalid argument"),
        "CUDA rejected an argument: often a driver or runtime too old for this NCCL build, or a device or stream"
        " that does not belong to the current GPU",
        "Check driver/runtime versions against the NCCL build (`+cudaX.Y` in the version line) and that every rank"
        " sets its own device before NCCL calls.",
    ),
    (
        re.compile(r"initialization error"),
        "CUDA failed to initialise in this process",
        "Check the driver (nvidia-smi), the container's GPU access, and that CUDA is not initialised before fork().",
    ),
)


def _decode_cuda(text: str) -> tuple[str, str]:
    low = text.lower()
    for pattern, meaning, fix in CUDA_ERRORS:
        if pattern.search(low):
            return meaning, fix
    return "", ""


@rule("RUN004", "cuda-error", severity="error", needs=["nccl_log"])
def cuda_error(ctx: Context) -> Iterable[Finding]:
    """An NCCL WARN reports a CUDA failure (`Cuda failure N 'text'`), decoded: out of memory,
    operation not permitted (IMEX channel permissions on multi-node NVLink), system not yet
    initialized (fabric manager not running), illegal memory access, invalid argument ...

    Why: NCCL stops at the first failed CUDA call; the quoted CUDA error string says which
    resource or service is missing, and the `-> 1` chain (UnhandledCudaError) says where NCCL was.

    Fix: Depends on the error: the finding names the fix for the string it found.

    Sources: formats.md B.18 (`Cuda failure %d '%s'`); NCCL
    troubleshooting/performance_and_tuning.rst ("Multi-node NVLink (MNNVL) issues": Cuda failure
    800 'operation not permitted'); landscape.md 2.G.34; nccl-tests failures with `system not yet
    initialized` (fabric manager, rule-catalog BW005)
    """
    warns = _warns(ctx, "RUN004")
    if not warns:
        return
    chains = Chains(ctx)
    groups: dict[str, list[NcclMessage]] = defaultdict(list)
    for w in warns:
        quoted = str(w.fields.get("quoted") or w.message).strip().strip("'")
        groups[quoted.lower()].append(w)
    for _, msgs in sorted(groups.items()):
        first = msgs[0]
        quoted = str(first.fields.get("quoted") or "").strip()
        code = first.fields.get("cuda_error")
        meaning, fix = _decode_cuda(quoted or first.message)
        traces = [t for t in (chains.after(w) for w in msgs) if t]
        gpus = sorted({w.cuda_dev for w in msgs if w.cuda_dev is not None})
        gpu_text = f", GPU {', '.join(map(str, gpus))}" if gpus else ""
        message = (
            f"CUDA error {quoted or first.message}{f' (code {code})' if code else ''} in NCCL on"
            f" {_hosts_text(msgs)}{gpu_text} ({_lines(len(msgs))})"
        )
        if meaning:
            message += f": {meaning}"
        message += _chain_summary(traces)
        extra = {"fix": fix} if fix else {}
        yield make_finding(
            "RUN004",
            "error",
            message,
            evidence=_evidence_with_chains(msgs, traces),
            evidence_count=len(msgs),
            hosts=sorted({w.host for w in msgs if w.host}),
            **extra,
        )


# ---------------------------------------------------------------------------------------- RUN005
# Known meanings of WARNs that no more specific rule reports.
WARN_HINTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"ibv_(create_qp|reg_mr|create_cq|reg_dmabuf_mr)\w* failed"),
        "RDMA resources could not be allocated: usually the locked-memory limit; set `ulimit -l unlimited`"
        " (docker `--ulimit memlock=-1`)",
    ),
    (
        re.compile(r"ibv_modify_qp failed"),
        "RoCE GID selection: since NCCL 2.21 leave NCCL_IB_GID_INDEX unset; set NCCL_IB_TC if the vendor requires it",
    ),
    (
        re.compile(r"async fatal event|non-fatal async event"),
        "the NIC reported a port or hardware event: check `ibstat`, the link state and `dmesg`",
    ),
    (
        re.compile(r"incompatible devices"),
        "NICs of different link layers (IB and RoCE) were paired: select NICs of one type with NCCL_IB_HCA",
    ),
    (
        re.compile(r"unlink shared memory"),
        "systemd removed NCCL's shared memory: set RemoveIPC=no in /etc/systemd/logind.conf",
    ),
    (
        re.compile(r"[Mm]essage truncated|bytes instead of"),
        "ranks disagree on sizes: NCCL settings that differ between ranks (ENV002), or an application desync",
    ),
    (
        re.compile(r"Mismatched collective"),
        "ranks called different collectives: an application desync (TORCH_NCCL_DESYNC_DEBUG, Flight Recorder)",
    ),
    (
        re.compile(r"Couldn't open a fabric provider"),
        "aws-ofi-nccl tries its protocols in turn: when `Selected provider is ...` follows, another protocol"
        " (see `Using transport protocol`) was used and this line is not a failure",
    ),
    (
        re.compile(r"abort state|was revoked|aborted"),
        "an earlier error aborted the communicator: look at the first WARN",
    ),
)


def _shape(message: str) -> str:
    """Group key: numbers, hex and addresses normalised so that repeats of one message group."""
    text = re.sub(r"0x[0-9a-fA-F]+", "0x?", message)
    text = re.sub(r"\d+", "N", text)
    return re.sub(r"\s+", " ", text).strip()


@rule("RUN005", "nccl-warning", severity="warning", needs=["nccl_log"])
def nccl_warning(ctx: Context) -> Iterable[Finding]:
    """Any NCCL WARN that no more specific rule reports, grouped by message (numbers, addresses and
    pointers normalised), with the `file:line -> N` chain that follows it decoded to the result name
    (0 Success, 1 UnhandledCudaError, 2 SystemError, 3 InternalError, 4 InvalidArgument, 5
    InvalidUsage, 6 RemoteError, 7 InProgress, 8 Timeout).

    The WARNs of IB completion errors (NET005), connection failures (NET006), RDMA or plugin
    unavailability (NET002), duplicate GPUs (RUN002), /dev/shm (RUN003), CUDA failures (RUN004),
    P2P disabled on NVLink (TOPO005) and version mismatches (VER001) are left to those rules
    (COVERED_ELSEWHERE in this module).

    Why: NCCL prints WARN only when something failed or is about to; the chain after it shows the
    code path and the ncclResult_t the application received.

    Fix: Read the message and the chain; the finding adds what is known about the message.

    Sources: formats.md A.5 and B.18 (WARN lines, result codes, chains); landscape.md 2.G.32 (ibv
    calls and memlock), 2.G.33 (RemoveIPC), 2.E.27 (ibv_modify_qp and GID), 2.A.3 (incompatible
    devices), 2.E.28 (Message truncated, nccl#1328)
    """
    warns = _warns(ctx, None)
    if not warns:
        return
    chains = Chains(ctx)
    groups: dict[str, list[NcclMessage]] = defaultdict(list)
    for w in warns:
        groups[_shape(w.message)].append(w)
    for _, msgs in sorted(groups.items(), key=lambda kv: (kv[1][0].evidence.source, kv[1][0].evidence.line)):
        first = msgs[0]
        traces = [t for t in (chains.after(w) for w in msgs) if t]
        where = f"{first.file}:{first.file_line}" if first.file and first.file_line else (first.file or "")
        text = first.message if len(first.message) <= 200 else first.message[:197] + "..."
        message = f"NCCL WARN `{text}`{f' ({where})' if where else ''} on {_hosts_text(msgs)}, {_lines(len(msgs))}"
        message += _chain_summary(traces)
        hint = next((h for pattern, h in WARN_HINTS if pattern.search(first.message)), "")
        if hint:
            message += f"; {hint}"
        yield make_finding(
            "RUN005",
            "warning",
            message,
            evidence=_evidence_with_chains(msgs, traces),
            evidence_count=len(msgs),
            hosts=sorted({w.host for w in msgs if w.host}),
        )


# ---------------------------------------------------------------------------------------- RUN006
WORK_RE = re.compile(
    r"WorkNCCL\(SeqNum=(?P<seq>\d+), OpType=(?P<op>\w+)(?:, NumelIn=(?P<numel>\d+))?[^)]*?"
    r"Timeout\(ms\)=(?P<timeout>\d+)\)(?: ran for (?P<ran>\d+) milliseconds)?"
)
RANK_RE = re.compile(r"\bRank (\d+)\]")
RANK_PREFIX_RE = re.compile(r"^\[rank(\d+)\]:")
NCCL_RESULT_TEXT = (
    ("unhandled cuda error", "ncclUnhandledCudaError (1)"),
    ("unhandled system error", "ncclSystemError (2)"),
    ("internal error", "ncclInternalError (3)"),
    ("invalid argument", "ncclInvalidArgument (4)"),
    ("invalid usage", "ncclInvalidUsage (5)"),
    ("remote process exited or there was a network error", "ncclRemoteError (6)"),
)


def _rank_of(m: NcclMessage) -> int | None:
    for pattern in (RANK_RE, RANK_PREFIX_RE):
        match = pattern.search(m.message) or pattern.search(m.evidence.text)
        if match:
            return int(match.group(1))
    return None


def _world_size(ctx: Context) -> int | None:
    sizes = [c.nranks for c in ctx.case.communicators if c.nranks and c.comm_id]
    return max(sizes) if sizes else None


@rule("RUN006", "watchdog-timeout", severity="error")
def watchdog_timeout(ctx: Context) -> Iterable[Finding]:
    """PyTorch's ProcessGroupNCCL watchdog timed out a collective (`Watchdog caught collective
    operation timeout: WorkNCCL(SeqNum=..., OpType=...) ran for ... milliseconds`), or PyTorch
    raised an NCCL error (`NCCL error in: ...`, DistBackendError), or `ncclscope run` ended a
    collective on its per-collective timeout (`--timeout`); then the evidence is the last lines the
    collective printed (stdout, stderr and the tail of each NCCL log) before it was ended.

    The finding groups the timeouts by collective (OpType, SeqNum), names the ranks that reported
    and, when the communicator size is known, those that did not; ranks stuck at different SeqNums
    mean an application desync.

    Why: NCCL itself never reports a hung collective; the framework's watchdog does, after its
    timeout (10 or 30 minutes by default). A timeout with no NCCL WARN means the collective hung
    rather than failed: a rank never joined it (desync, crash, a rank stuck elsewhere) or the
    network stalled; with NCCL WARNs, those are the cause.

    Fix: Find the rank that did not reach the collective: compare the SeqNums of all ranks
    (TORCH_NCCL_DESYNC_DEBUG=1, PyTorch Flight Recorder with TORCH_NCCL_TRACE_BUFFER_SIZE and
    TORCH_NCCL_DUMP_ON_TIMEOUT=1), read the NCCL WARNs of the same time, and rerun with
    NCCL_DEBUG=INFO. Raise the timeout only for collectives that are legitimately slow.

    Sources: formats.md B.18 ("Watchdog timeouts come from the framework (PyTorch), not from
    NCCL"); landscape.md 2.G.36 (desync, Flight Recorder) and section 1 (PyTorch Flight Recorder)
    """
    yield from _runner_timeouts(ctx)
    msgs = ctx.case.framework_messages
    if not msgs:
        return
    timeouts: dict[tuple[str, int], list[tuple[NcclMessage, re.Match[str]]]] = defaultdict(list)
    others: list[NcclMessage] = []
    for m in msgs:
        match = WORK_RE.search(m.message)
        if match:
            timeouts[(match["op"], int(match["seq"]))].append((m, match))
        else:
            others.append(m)
    errors = [m for m in others if "NCCL error" in m.message or any(t in m.message for t, _ in NCCL_RESULT_TEXT)]
    generic = [m for m in others if m not in errors]
    nccl_warns = len({(w.evidence.source, w.evidence.line) for w in ctx.case.warnings if w.level in ("WARN", "ABORT")})
    world = _world_size(ctx)
    seqs = sorted({seq for _, seq in timeouts})
    ranks_of = {
        key: sorted({r for r in (_rank_of(m) for m, _ in items) if r is not None}) for key, items in timeouts.items()
    }
    reporting = {r for ranks in ranks_of.values() for r in ranks}
    silent = sorted(set(range(world)) - reporting) if world and reporting else []
    for (op, seq), items in sorted(timeouts.items(), key=lambda kv: kv[0][1]):
        ranks = ranks_of[(op, seq)]
        match = items[0][1]
        timeout_ms = int(match["timeout"])
        ran = max((int(mt["ran"]) for _, mt in items if mt["ran"]), default=None)
        numel = match["numel"]
        message = (
            f"PyTorch watchdog timed out {op} (SeqNum {seq}{f', {numel} elements' if numel else ''})"
            f" on rank{'s' if len(ranks) != 1 else ''} {rank_text(ranks) or '?'}"
            f"{f' after {ran / 1000:.0f} s' if ran else ''} against a {timeout_ms / 1000:.0f} s timeout"
        )
        if len(seqs) > 1:
            others_seq = ", ".join(str(s) for s in seqs if s != seq)
            message += f"; other ranks time out at SeqNum {others_seq}: ranks are at different collectives (desync)"
        if silent:
            message += (
                f"; rank{'s' if len(silent) != 1 else ''} {rank_text(silent)} of {world} reported no timeout:"
                " look there first (never joined, crashed or stuck elsewhere)"
            )
        if nccl_warns:
            message += f"; NCCL logged {_lines(nccl_warns)} of WARN, see those findings"
        else:
            message += "; NCCL logged no WARN: the collective hung rather than failed"
        evidence = [m.evidence for m, _ in items] + [m.evidence for m in generic]
        yield make_finding(
            "RUN006",
            "error",
            message,
            evidence=shown(evidence),
            evidence_count=len(evidence),
            ranks=ranks,
        )
    if errors or (generic and not timeouts):
        group = errors or generic
        kinds = sorted({name for m in group for text, name in NCCL_RESULT_TEXT if text in m.message})
        ranks = sorted({r for r in (_rank_of(m) for m in group) if r is not None})
        first = group[0].message if len(group[0].message) <= 160 else group[0].message[:157] + "..."
        message = f"PyTorch raised NCCL errors ({_lines(len(group))}"
        message += f", ranks {rank_text(ranks)})" if ranks else ")"
        message += f": `{first}`"
        if kinds:
            message += f"; NCCL returned {', '.join(kinds)}"
        if nccl_warns:
            message += f"; NCCL logged {_lines(nccl_warns)} of WARN, see those findings"
        yield make_finding(
            "RUN006",
            "error",
            message,
            evidence=shown(m.evidence for m in group),
            evidence_count=len(group),
            ranks=ranks,
        )


def _runner_timeouts(ctx: Context) -> Iterable[Finding]:
    """The collectives `ncclscope run` ended on its timeout (Case.run): hangs nobody else reports."""
    run = ctx.case.run
    for step in run.steps if run else []:
        if step.status != "timed_out":
            continue
        limit = f" after its {step.timeout_s:.0f} s timeout" if step.timeout_s else " on its timeout"
        message = (
            f"`ncclscope run` ended {step.collective}{limit}: the collective hung"
            f" ({_lines(len(step.last_lines))} seen last, shown as evidence)"
        )
        yield make_finding(
            "RUN006", "error", message, evidence=list(step.last_lines), evidence_count=len(step.last_lines)
        )
