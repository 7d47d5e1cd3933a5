"""HW001: a GPU, NVLink, NVSwitch or PCIe fault that the host itself reports: its kernel log (NVIDIA Xid, NVSwitch
SXid, a GPU fallen off the bus, PCIe AER) or `nvidia-smi -q` (remapped rows). What an Xid means comes from
data/xid_catalog.json (diagnose/xid_catalog.py)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from ncclscope.diagnose.first_failure import ranks_on_gpu
from ncclscope.diagnose.rules.context import Context, shown
from ncclscope.diagnose.rules.registry import make_finding, rule
from ncclscope.diagnose.xid_catalog import catalog, fault_xid, xid
from ncclscope.model import Evidence, Finding, KernelEvent
from ncclscope.model.analysis import Severity

# after the catalog's action for the fault found, what holds for every one of them
COMMON_FIX = (
    "Collect `nvidia-bug-report.sh` from the host for NVIDIA support before the reset; keep the host out of jobs"
    " until it passes a check (`dcgmi diag -r 2`), and replace the part if the fault repeats."
)


@dataclass
class _Fault:
    """One device's fault, as the finding says it."""

    severity: Severity
    bus_id: str
    device: str  # "GPU 0000:9b:00.0 (rank 3)"
    what: str  # "Xid 79 GPU has fallen off the bus (at ...)"
    component: str
    action: str
    lines: list[Evidence]
    ranks: list[int]


@dataclass
class _Device:
    """What one host's kernel log says of one device (a GPU, an NVSwitch, a PCIe port)."""

    host: str
    bus_id: str
    named_host: str | None  # the host the lines name (None: the report's input stands for it)
    faults: dict[int, list[KernelEvent]] = field(default_factory=dict)  # hardware Xid -> its lines (and fallout)
    recovery: list[KernelEvent] = field(default_factory=list)  # Xid 154: what the GPU now needs
    fatal_sxid: list[KernelEvent] = field(default_factory=list)
    other_sxid: list[KernelEvent] = field(default_factory=list)
    uncorrected: list[KernelEvent] = field(default_factory=list)
    corrected: list[KernelEvent] = field(default_factory=list)


@rule("HW001", "gpu-hardware-fault", severity="error")
def gpu_hardware_fault(ctx: Context) -> Iterable[Finding]:
    """The host reports a hardware fault of a GPU, its memory, NVLink, an NVSwitch or PCIe: an NVIDIA Xid that
    NVIDIA's catalog calls a hardware fault (48 double-bit ECC, 74 and 144-150 NVLink, 79 fallen off the bus,
    94/95 contained/uncontained ECC, 119/120 GSP, 61/62 micro-controller), an Xid 45 that says it was caused
    by one, a GPU fallen off the bus, a fatal NVSwitch SXid, an uncorrected PCIe AER error or a storm of
    corrected ones, or remapped rows that failed or wait for a reset with uncorrectable errors.

    Why: A collective needs every GPU of the communicator: when one GPU, NVLink or PCIe link fails, the ranks
    on it stop or crash and every other rank waits in the collective until its watchdog fires. The timeouts,
    `Connection closed by remote peer` and aborts on the other hosts are the fallout; the fault is here. The
    application's own Xids (13, 31, 43) and Xid 45 alone (the driver cleaning up after a process ends) are not
    hardware faults.

    Fix: Take the host out of the job (drain it) and do what NVIDIA's catalog says for the Xid: reset the GPU
    (`nvidia-smi -r`) or reboot, power-cycle a GPU that fell off the bus; check the NVLinks (`nvidia-smi nvlink
    -e`) or the PCIe link (`lspci -vvv`); replace the part if it repeats. Collect `nvidia-bug-report.sh` for
    NVIDIA support first.

    Sources: NVIDIA Xid catalog (docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html); NVIDIA Fabric
    Manager user guide (SXid errors); Linux kernel Documentation/PCI/pcieaer-howto.rst; stas00 ml-engineering
    compute/accelerator/nvidia/debug.md; NVIDIA/nccl#968 (a hang whose cause was an Xid on one GPU)
    """
    by_host: dict[str, list[_Fault]] = {}
    for device in _devices(ctx).values():
        by_host.setdefault(device.host, []).extend(_faults(ctx, device))
    for host, faults in by_host.items():
        if not faults:
            continue
        faults.sort(key=lambda f: (f.severity != "error", f.lines[0].line))
        lines = [line for f in faults for line in f.lines]
        ranks = sorted({r for f in faults for r in f.ranks})
        actions = list(dict.fromkeys(f.action for f in faults))
        yield make_finding(
            "HW001", faults[0].severity,
            f"on {host}: {_said(faults)}: {_kinds(faults)}",
            evidence=shown(lines), evidence_count=len(lines), hosts=[host], ranks=ranks,
            fix=f"{_sentence(' '.join(actions))} {COMMON_FIX}",
        )  # fmt: skip
    yield from _smi_findings(ctx)


def _devices(ctx: Context) -> dict[tuple[str, str], _Device]:
    devices: dict[tuple[str, str], _Device] = {}
    for event in ctx.case.kernel_events:
        if event.bus_id is None or event.kind == "driver_load":
            continue
        host = event.host or ctx.report_host(event.source)
        device = devices.get((host, event.bus_id))
        if device is None:
            device = devices[host, event.bus_id] = _Device(host, event.bus_id, event.host)
        code = fault_xid(event)  # its fallout (Xid 45) shows the cause too
        if code is not None:
            device.faults.setdefault(code, []).append(event)
        elif event.kind == "xid" and (entry := xid(event.xid)) is not None and entry.cause == "recovery":
            device.recovery.append(event)
        elif event.kind == "sxid":
            fatal = (event.severity or "").lower() == "fatal"
            (device.fatal_sxid if fatal else device.other_sxid).append(event)
        elif event.kind == "aer":
            corrected = (event.severity or "").lower().startswith("corrected")
            (device.corrected if corrected else device.uncorrected).append(event)
    return devices


def _faults(ctx: Context, device: _Device) -> Iterable[_Fault]:
    ranks = ranks_on_gpu(ctx.case, device.named_host, device.bus_id)
    who = f" (rank{'s' if len(ranks) != 1 else ''} {', '.join(map(str, ranks))})" if ranks else ""
    if device.faults:
        parts: list[str] = []
        lines: list[Evidence] = []
        for code, events in sorted(device.faults.items(), key=lambda kv: _order(kv[1][0])):
            entry = xid(code)
            said = f"Xid {code} {entry.meaning if entry else 'a hardware fault'}"
            if all(e.caused_by == code for e in events):
                said += ", named by the Xid 45 that followed it"
            parts.append(said)
            lines.extend(line for e in events for line in (e.evidence, e.closing) if line is not None)
        first = min((events[0] for events in device.faults.values()), key=_order)
        when = _when(first)
        recovery = f"; the driver then says: {device.recovery[0].detail}" if device.recovery else ""
        lines.extend(e.evidence for e in device.recovery)
        components = sorted({e.component for c in device.faults if (e := xid(c)) is not None})
        actions = [e.action for c in sorted(device.faults) if (e := xid(c)) is not None]
        yield _Fault(
            "error",
            device.bus_id,
            f"GPU {device.bus_id}{who}",
            f"{', '.join(parts)}{f' ({when})' if when else ''}{recovery}",
            " and ".join(components) or "GPU",
            actions[0] if actions else "drain the node and reset the GPU",
            lines,
            ranks,
        )
    if device.fatal_sxid or device.other_sxid:
        sxids = device.fatal_sxid or device.other_sxid
        codes = ", ".join(sorted({str(e.xid) for e in sxids}))
        kind = "fatal" if device.fatal_sxid else "non-fatal"
        yield _Fault(
            "error" if device.fatal_sxid else "warning",
            device.bus_id,
            f"NVSwitch {device.bus_id}",
            f"{kind} SXid {codes} ({sxids[0].detail or 'no detail'})",
            "NVSwitch",
            catalog().sxid.fatal_action if device.fatal_sxid else "watch the NVSwitch's SXids",
            [e.evidence for e in sxids],
            [],
        )
    aer = catalog().aer
    storm = len(device.corrected) >= aer.storm_reports and _span(device.corrected) <= aer.storm_seconds
    if device.uncorrected or storm:
        events = device.uncorrected or device.corrected
        what = (
            f"uncorrected PCIe error{'s' if _errors(events) != 1 else ''} "
            f"({(events[0].severity or '').split('(')[-1].rstrip(')') or 'uncorrected'}, {_detail(events)})"
            if device.uncorrected
            else f"a storm of {_errors(events)} corrected PCIe errors ({_detail(events)}) in "
            f"{_span_text(events)}: a failing link, slot or riser"
        )
        lines = [e.evidence for e in events]
        yield _Fault(
            "error", device.bus_id, f"PCIe device {device.bus_id}{who}", what, "PCIe", aer.action, lines, ranks
        )


def _smi_findings(ctx: Context) -> Iterable[Finding]:
    """`nvidia-smi -q`: remapped rows that failed, or wait for a reset after uncorrectable errors."""
    for gpu in ctx.case.smi_gpus:
        host = ctx.report_host(gpu.source)
        lines = [e for e in [gpu.evidence] if e is not None]
        if gpu.remap_failed:
            what = "row remapping failed: the GPU's memory cannot be repaired"
        elif gpu.remap_pending and (gpu.remap_uncorrectable or gpu.uncorrectable_errors):
            count = gpu.remap_uncorrectable or gpu.uncorrectable_errors
            what = f"{count} rows remapped after uncorrectable memory errors, and the remap waits for a GPU reset"
        else:
            continue
        yield make_finding(
            "HW001", "error",
            f"on {host}: GPU {gpu.bus_id or '(not named in the fragment)'}: {what} (nvidia-smi -q, Remapped Rows)",
            fix="Drain the node and reset the GPU before it runs NCCL again; replace it if remapping failed. "
            + COMMON_FIX,
            evidence=shown(lines + gpu.remap_evidence), evidence_count=len(lines) + len(gpu.remap_evidence),
            hosts=[host],
        )  # fmt: skip


def _when(event: KernelEvent) -> str:
    if event.uptime is not None:
        return f"at {event.uptime:.1f} s after boot"
    return f"at {event.time}" if event.time and not event.time.startswith(("+", "-")) else ""


def _said(faults: list[_Fault]) -> str:
    """Each fault once, with the devices that show it: 'GPUs 0000:ed:00.0, 0000:ba:00.0: Xid 145 ...'."""
    devices: dict[str, list[str]] = {}
    for f in faults:
        devices.setdefault(f.what, []).append(f.device)
    said = []
    for what, names in devices.items():
        if len(names) > 1 and all(n.startswith("GPU ") for n in names):
            label = "GPUs " + ", ".join(n.removeprefix("GPU ") for n in names)
        else:
            label = ", ".join(names)
        said.append(f"{label}: {what}")
    return "; ".join(said)


def _kinds(faults: list[_Fault]) -> str:
    """'an NVLink fault', 'NVLink faults on 4 devices', 'a GPU memory fault and a PCIe fault'."""
    kinds = list(dict.fromkeys(f.component for f in faults))
    devices = len({f.bus_id for f in faults})
    if len(kinds) == 1 and devices > 1:
        return f"{kinds[0]} faults on {devices} devices"
    return " and ".join(f"{_article(k)} {k} fault" for k in kinds)


def _article(word: str) -> str:
    return "an" if word[:1].upper() in "AEIOUN" and not word.startswith(("GPU", "GSP", "PCIe")) else "a"


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def _order(event: KernelEvent) -> tuple[int, str]:
    return (event.evidence.line, event.evidence.source)


def _seconds(event: KernelEvent) -> float | None:
    if event.uptime is not None:
        return event.uptime
    if event.at:
        try:
            return datetime.fromisoformat(event.at).timestamp()
        except ValueError:
            return None
    return None  # no time, or dmesg's relative form (the time since the line before), summed by _span


def _span(events: list[KernelEvent]) -> float:
    """Seconds from the first to the last report: their times, or the sum of dmesg's relative times; 0 when
    the lines give no time (a burst pasted together)."""
    seconds = [s for e in events if (s := _seconds(e)) is not None]
    if len(seconds) >= 2:
        return max(seconds) - min(seconds)
    deltas = [float(e.time) for e in events[1:] if e.time and e.time.lstrip().startswith(("+", "-"))]
    return sum(deltas)


def _errors(events: list[KernelEvent]) -> int:
    """How many errors the reports are: the kernel prints `error received` and then the error's own line
    (`PCIe Bus Error: severity=..., type=...`) for each; a paste may keep either."""
    received = sum(e.detail is None for e in events)
    return max(received, len(events) - received)


def _detail(events: list[KernelEvent]) -> str:
    """The error type the reports give ('Data Link Layer'), from the first that names one."""
    return next((e.detail for e in events if e.detail), "type not given")


def _span_text(events: list[KernelEvent]) -> str:
    span = _span(events)
    if span <= 0:
        return "one burst"
    return f"{span * 1000:.1f} ms" if span < 1 else f"{span:.0f} s"
