"""Rules of the ENV family: ENV001 classifies every NCCL_* setting (a `set by environment` line of the
log, or a command line of the inputs) with the table of env_knobs.py; ENV002 compares the settings
between the hosts and processes of one job.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable

from ncclscope.common.words import plural
from ncclscope.diagnose.expectations import platform_spec
from ncclscope.diagnose.releases import case_release, default_span, param_default
from ncclscope.diagnose.rules.context import Context, shown
from ncclscope.diagnose.rules.env_knobs import KNOBS, PATHS_OPENED, knob_effects, path_level, truthy
from ncclscope.diagnose.rules.registry import make_finding, rule
from ncclscope.diagnose.rules.version import host_list, jobs
from ncclscope.diagnose.vendor_profiles import Profile, profile_of
from ncclscope.model import DiagReport, EnvSetting, Finding, Process, Severity

# NCCL's own logging: the settings that produce the evidence ncclscope reads, not overrides
LOGGING = frozenset(
    {
        "NCCL_DEBUG",
        "NCCL_DEBUG_SUBSYS",
        "NCCL_DEBUG_FILE",
        "NCCL_DEBUG_TIMESTAMP_FORMAT",
        "NCCL_DEBUG_TIMESTAMP_LEVELS",
        "NCCL_WARN_ENABLE_DEBUG_INFO",
        # 2.31's own checks at init and over RAS: they print evidence (`NCCL DIAG` lines), they change no path
        "NCCL_RUN_DIAGNOSTICS",
        "NCCL_RUN_RAS_DIAGNOSTICS",
    }
)

FEATURE_NAMES = {
    "rdma": "RDMA NICs",
    "nvlink": "NVLink",
    "nvls": "NVSwitch with NVLink SHARP",
    "shm": "GPU pairs that need host memory",
    "mnnvl": "multi-node NVLink",
}
FEATURE_EFFECTS = {
    "rdma": "inter-host traffic goes over TCP sockets",
    "nvlink": "GPU pairs talk through host memory (SHM) or the network instead of NVLink",
    "nvls": "collectives cannot use NVLink SHARP",
    "shm": "GPU pairs without P2P talk through the network instead",
    "mnnvl": "GPUs of different trays talk over the network instead of NVLink",
}
CONF_FILES = "the job script, the container image's ENV, ~/.nccl.conf, /etc/nccl.conf or the file NCCL_CONF_FILE names"
NVLS_GPUS = ("H100", "H200", "H800", "H20", "GH200", "B200", "B300", "GB200", "GB300")


# ----------------------------------------------------------------------------- feature evidence
def _matrix_nv_cells(ctx: Context) -> list[str]:
    cells = []
    for topo in ctx.case.topologies:
        for a in topo.gpus:
            for b in topo.gpus:
                if a != b:
                    cells.append((topo.links.get(a) or {}).get(b, ""))
    return cells


def _has_rdma(ctx: Context, hosts: list[str]) -> str | None:
    """Evidence that the job's hosts have RDMA NICs (the setting hides them, so any host counts)."""
    ib = sorted({d.name for d in ctx.case.net_devices if d.transport in ("IB", "OFI")})
    if ib:
        return f"NET/IB devices {', '.join(ib[:4])}{' ...' if len(ib) > 4 else ''}"
    networks = {n for h in ctx.case.hosts for n in h.networks if n and n.lower() != "socket"}
    if networks:
        return f"network {', '.join(sorted(networks))} on other hosts"
    nics = sorted({topo.nic_names.get(n, n) for topo in ctx.case.topologies for n in topo.nics})
    if nics:
        return f"NICs {', '.join(nics[:4])}{' ...' if len(nics) > 4 else ''} in the topology matrix"
    net = [t for t in ctx.case.connections.by_transport if t.startswith("NET/") and "Socket" not in t]
    if net:
        return f"{net[0]} connections"
    return None


def _has_nvlink(ctx: Context, hosts: list[str]) -> str | None:
    nv = sorted({c for c in _matrix_nv_cells(ctx) if c.startswith("NV")})
    if nv:
        return f"{'/'.join(nv)} links in the topology matrix"
    for topo in ctx.case.system_topologies:
        if (not hosts or topo.host in hosts) and any("NVL[" in n for n in topo.nodes):
            return "NVL links in NCCL's topology dump"
    if ctx.platform.nvlink_links or ctx.platform.nvswitch:
        return "an NVLink platform"
    spec = platform_spec(ctx.platform.gpu_name)
    if spec and spec.form == "SXM" and str(spec.link).startswith("NVLink"):
        if (ctx.platform.gpus_per_host or 0) > 1:  # SXM modules of one board are linked by NVLink
            return f"{ctx.platform.gpus_per_host} {ctx.platform.gpu_name} per host, SXM modules linked by NVLink"
    return _has_nvls(ctx, hosts) or _has_mnnvl(ctx, hosts)


def _has_nvls(ctx: Context, hosts: list[str]) -> str | None:
    for m in ctx.messages("nvls_support"):
        if "not available" not in m.message and (not hosts or m.host in hosts):
            return f"`{m.message}`"
    if any((c.nvls_channels or 0) > 0 for c in ctx.case.communicators):
        return "NVLS channels"
    cells = _matrix_nv_cells(ctx)
    if cells and all(c.startswith("NV") and c[2:].isdigit() and int(c[2:]) >= 18 for c in cells):
        return f"NV{min(int(c[2:]) for c in cells)} between every GPU pair (NVSwitch, NVLink 4+)"
    model = ctx.platform.gpu_model or ""
    if ctx.platform.nvswitch and any(model.startswith(g) for g in NVLS_GPUS):
        return f"{model} on NVSwitch"
    return None


def _has_mnnvl(ctx: Context, hosts: list[str]) -> str | None:
    for m in ctx.messages("mnnvl_clique"):
        if m.message.startswith("MNNVL 1") and (not hosts or m.host in hosts):
            return f"`{m.message}`"
    if any("MNNVL" in t for t in ctx.case.connections.by_transport):
        return "P2P/MNNVL connections"
    return None


def _needs_shm(ctx: Context, hosts: list[str]) -> str | None:
    """SHM carries the GPU pairs of a host that cannot use P2P: it matters only where P2P is off."""
    local = [h for h in ctx.case.hosts if (not hosts or h.name in hosts) and (len(h.ranks) > 1 or h.processes > 1)]
    if not local and (ctx.platform.gpus_per_host or 0) < 2:  # nccl-tests -g 4: one process, four GPUs
        return None
    for s in ctx.case.env:
        if (s.name == "NCCL_P2P_DISABLE" and truthy(s.value)) or (
            s.name == "NCCL_P2P_LEVEL" and s.value.strip().lower() in ("loc", "0")
        ):
            return f"{s.name}={s.value} also set, so GPU pairs of a host have no other path"
    if ctx.messages("p2p_not_enabled"):
        return "`Could not enable P2P` lines"
    far = sorted({c for c in _matrix_nv_cells(ctx) if c in ("SYS", "SOC", "NODE", "PHB")})
    if far:
        return f"GPU pairs over {'/'.join(far)} without NVLink in the topology matrix"
    return None


FEATURES: dict[str, Callable[[Context, list[str]], str | None]] = {
    "rdma": _has_rdma,
    "nvlink": _has_nvlink,
    "nvls": _has_nvls,
    "shm": _needs_shm,
    "mnnvl": _has_mnnvl,
}


# ---------------------------------------------------------------------------------------- ENV001
def _where(setting: EnvSetting) -> str:
    if setting.origin == "command_line":
        return f"the command line at {setting.evidence.source}:{setting.evidence.line}"
    if setting.origin == "param_dump":
        return f"NCCL's parameter dump at {setting.evidence.source}:{setting.evidence.line}"
    hosts = host_list(setting.hosts) or "unknown host"
    n = setting.processes
    return f"{hosts} ({plural(n, 'process')})"


def _release_words(release: tuple[int, ...], parts: int = 3) -> str:
    """NCCL 2.28.9; with parts=2, NCCL 2.28 (the defaults' data sees a change at the first tag of a release)."""
    return f"NCCL {'.'.join(map(str, release[:parts]))}"


def _same_value(value: str, default: str) -> bool:
    """A setting equal to a default: numbers as numbers (`020` is 20), other values as words."""
    a, b = value.strip().lower(), default.strip().lower()
    if a.lstrip("-").isdigit() and b.lstrip("-").isdigit():
        return int(a) == int(b)
    return a == b


def default_of(ctx: Context, name: str) -> tuple[str | None, str]:
    """(default, whose) of a variable: the log's NCCL release's (data/nccl_param_defaults.json) where the case has
    one release and NCCL defines the variable as a parameter with a plain value, else the knob table's."""
    release = case_release(ctx.case)
    if release is not None:
        default = param_default(name, release)
        if default is not None and default.lstrip("-").isdigit():
            return default, f"{_release_words(release)}'s default"
    knob = KNOBS.get(name)
    if knob is not None and knob.default is not None:
        return knob.default, f"{name}'s default"
    return None, ""


def _pinned(ctx: Context, s: EnvSetting) -> str:
    """' (NCCL 2.14's default until 2.23; NCCL 2.28's is 20)': a value kept from an older release's default."""
    release = case_release(ctx.case)
    if release is None or not s.value.strip().lstrip("-").isdigit():
        return ""
    now = param_default(s.name, release)
    span = default_span(s.name, str(int(s.value.strip())))
    if now is None or span is None or span[1] is None or release[: len(span[1])] < span[1]:
        return ""
    return (
        f" (the default from {_release_words(span[0], 2)} until {_release_words(span[1], 2)};"
        f" {_release_words(release)}'s is {now})"
    )


def _gid_index(ctx: Context, s: EnvSetting) -> str | None:
    """What NCCL_IB_GID_INDEX selects in the hosts' `show_gids` tables, when that is not a routable RoCE v2 GID:
    a RoCE v1 GID (not routed beyond the L2 segment), a link-local fe80:: GID (no IPv4: not routed), or no GID at
    all on some port. None when the value is fine or there is no table to read it against."""
    if s.name != "NCCL_IB_GID_INDEX" or not ctx.case.roce_gids or not s.value.strip().isdigit():
        return None
    index = int(s.value.strip())
    ports = sorted({(g.device, g.port) for g in ctx.case.roce_gids})
    at = {(g.device, g.port): g for g in ctx.case.roce_gids if g.index == index}
    v2 = sorted({g.index for g in ctx.case.roce_gids if g.ipv4 and (g.version or "").lower() == "v2"})
    better = f"; the tables' RoCE v2 IPv4 GIDs are at index {', '.join(map(str, v2))}" if v2 else ""
    missing = [f"{d}:{p}" for d, p in ports if (d, p) not in at]
    v1 = [f"{g.device}:{g.port}" for g in at.values() if (g.version or "").lower() == "v1"]
    local = [f"{g.device}:{g.port}" for g in at.values() if not g.ipv4 and (g.version or "").lower() != "v1"]
    if v1:
        return (
            f"show_gids lists index {index} as a RoCE v1 GID on {', '.join(v1)}: v1 is not routed beyond one L2"
            f" segment, so ranks across a router cannot connect{better}"
        )
    if local:
        return (
            f"show_gids lists index {index} as a link-local fe80:: GID (no IPv4) on {', '.join(local)}: not"
            f" routed between subnets{better}"
        )
    if missing:
        return f"show_gids lists no GID at index {index} on {', '.join(missing)}: NCCL cannot use that port{better}"
    return None


def _judge(ctx: Context, s: EnvSetting) -> tuple[Severity, str]:
    """(severity, message) for one setting."""
    knob = KNOBS.get(s.name)
    head = f"{s.name}={s.value} on {_where(s)}"
    default, whose = default_of(ctx, s.name)
    if default is not None and _same_value(s.value, default):
        what = f" ({s.name} {knob.what})" if knob is not None else ""
        return "info", f"{head}: {whose} value, so it changes nothing{what}"
    head += _pinned(ctx, s)
    gid = _gid_index(ctx, s)
    if gid is not None:
        return "warning", f"{head}: {gid}"
    if knob is None:
        if default is not None:
            return "info", (
                f"{head}: an NCCL parameter ({whose} is {default}) that ncclscope has no judgement of; check that it"
                " is meant to be set"
            )
        return "info", f"{head}: not among the knobs ncclscope knows; check that it is meant to be set"
    if knob.is_raised(s.value):
        opened = PATHS_OPENED[path_level(s.value) or "SYS"]
        what = knob.raised_what.format(path=opened)
        return "warning", f"{head} {what}: a debugging override that is not meant for production"
    note = f" ({knob.note})" if knob.note else ""
    if knob.off is not None and knob.off(s.value):
        note = f" ({knob.off_note})" if knob.off_note else ""
        if knob.feature is not None and ctx.one_gpu:
            return "info", (
                f"{head} {knob.what}{note}: a one-GPU job, where nothing leaves the GPU, so it changes nothing here;"
                " unset it before the job runs on several GPUs"
            )
        if knob.feature == "rdma" and ctx.single_host:
            return "warning", (
                f"{head} {knob.what}{note}: this is a single-host job, whose intra-node traffic (P2P/SHM) does not"
                " use the network, so it does not affect this run; on several hosts it would force TCP sockets"
            )
        if knob.feature is not None:
            seen = FEATURES[knob.feature](ctx, s.hosts)
            if seen:
                return "error", (
                    f"{head} {knob.what}{note} although the job has {FEATURE_NAMES[knob.feature]} ({seen}):"
                    f" {FEATURE_EFFECTS[knob.feature]}"
                )
            return "warning", (
                f"{head} {knob.what}{note}; the inputs do not show whether the hosts have"
                f" {FEATURE_NAMES[knob.feature]}, which would make this an error"
            )
        return "warning", f"{head} {knob.what}{note}: a debugging override that is not meant for production"
    if knob.off is not None and s.name.endswith("_ENABLE") and knob.default and not knob.off(knob.default):
        # NCCL_NVLS_ENABLE=1: asks for a feature NCCL uses by itself where the hardware has it
        return "info", (
            f"{head} {knob.what}{note}: it asks for what NCCL does by itself where the hardware allows"
            f" (default {knob.default}); nothing is switched off"
        )
    if knob.kind == "debug":
        return "warning", f"{head} {knob.what}{note}: a debugging override that is not meant for production"
    return "info", f"{head} {knob.what}{note}: a documented configuration or tuning knob"


@rule("ENV001", "debug-override", severity="error", needs=["settings"])
def debug_override(ctx: Context) -> Iterable[Finding]:
    """An NCCL_* variable is set: debugging overrides (P2P/SHM/IB/NVLS/PXN off, ALGO/PROTO forced,
    channel or thread counts capped, NET_GDR_LEVEL lowered, IGNORE_NET_MISMATCH ...) are warnings,
    errors when they switch off a transport the hosts have (IB on a multi-host job with RDMA NICs,
    P2P on NVLink, NVLS on NVSwitch, SHM where P2P is unavailable); documented tuning knobs are info.
    NCCL_P2P_LEVEL or NCCL_NET_GDR_LEVEL set past NCCL's own cutoff (PHB, SYS, or the old 3-5) is told as
    what it does, P2P or GPUDirect RDMA let through the CPU, still a warning, and never as the cause of
    P2P or GDR being off.

    Settings come from the log's `set by environment` lines and from a launcher or shell command line
    in the inputs (`mpirun -x NCCL_...=`, `srun --export=...`, `export NCCL_...=`); NCCL's logging
    variables (NCCL_DEBUG ...) are not overrides.

    A value equal to the default of the log's NCCL release changes nothing (info); a value that was the default of
    an older release says so, with this release's (data/nccl_param_defaults.json, read from NCCL's parameter
    definitions at every release tag: NCCL_IB_TIMEOUT was 14, 18 from 2.14 and 20 from 2.23).

    One finding per variable and value, with the hosts and how many processes logged it. On a single
    host NCCL_IB_DISABLE=1 changes nothing (intra-node traffic does not use the network) and stays a
    warning. Values can also come from ~/.nccl.conf, /etc/nccl.conf or NCCL_CONF_FILE: NCCL loads
    those files into its environment, so the log says "set by environment" either way.

    Why: NCCL's documentation lists these variables under "Debugging": they "should not be used in
    production nor retained in scripts ... Keeping them set may result in sub-optimal behavior,
    crashes, or hangs". A transport switched off sends the traffic over a slower path (TCP sockets,
    host memory); forced algorithms and capped channels keep NCCL from using the hardware fully.

    Fix: Remove the variable where it is set: the job script, the container image's ENV,
    ~/.nccl.conf, /etc/nccl.conf or the file NCCL_CONF_FILE names. Keep an override only as a
    documented workaround for a known issue, and retest without it after every NCCL upgrade.

    Sources: NCCL docs env.rst (introduction; "Debugging" section); NCCL docs
    troubleshooting/performance_and_tuning.rst ("Tuning NCCL configuration", "RoCE
    considerations"); NCCL src/misc/param.cc (loads /etc/nccl.conf and ~/.nccl.conf with setenv
    overwrite=0); NVIDIA/nccl#1008 and nccl-tests#294 (settings from /etc/nccl.conf); NVIDIA/nccl#526
    (cloud images set NCCL_TOPO_FILE on purpose); nccl-tests#373 (NCCL_P2P_LEVEL=LOC); NVIDIA/nccl#2428
    (NCCL_IGNORE_NET_MISMATCH); data/nccl_param_defaults.json (NVIDIA/nccl release tags: NCCL_PARAM definitions)
    """
    # what `ncclscope run` set itself (dump files, debug output) is the evidence being collected, not a setting
    # of the job; a user's own value of the same variable (env_user) is still judged
    ours = ctx.case.run.env_set if ctx.case.run is not None else {}
    vendors: dict[str, tuple[Profile, list[EnvSetting]]] = {}
    for s in ctx.case.env:
        if not s.name.startswith("NCCL_") or s.name in LOGGING or ours.get(s.name) == s.value:
            continue
        if (known := KNOBS.get(s.name)) is not None and known.kind == "identity":
            continue  # a machine's name, set per host on purpose (ENV002 says when one host has two)
        vendor = profile_of(ctx.case, s)
        if vendor is not None:  # the provider's own settings: one finding per profile, below
            vendors.setdefault(vendor.key, (vendor, []))[1].append(s)
            continue
        severity, message = _judge(ctx, s)
        knob = KNOBS.get(s.name)
        extra: dict[str, object] = {}
        if severity != "info":
            extra["fix"] = (
                f"Unset {s.name} (look in {CONF_FILES}: NCCL reads those files too and still logs 'set by"
                " environment'); keep it only as a documented workaround and retest without it."
            )
        elif knob is not None:  # nothing to do: the rule's why (env.rst on debugging knobs) would say otherwise
            extra["fix"] = "Nothing to do if it was set on purpose; keep it identical on every host of the job."
            extra["explanation"] = (
                "A setting worth knowing when runs or hosts are compared; it switches nothing off and forces"
                " nothing NCCL would not choose, so it costs nothing by itself."
            )
        if knob is not None and severity != "info":
            # the findings it can cause (engine.py links them to it as one story when they are present)
            extra["related"] = list(knob_effects(knob, s.value))
        yield make_finding(
            "ENV001",
            severity,
            message,
            evidence=[s.evidence],
            evidence_count=s.processes or 1,
            hosts=list(s.hosts),
            **extra,
        )

    # ---------------------------------------------------------------------------------------- ENV002
    for vendor, settings in vendors.values():
        names = ", ".join(f"{s.name}={s.value}" for s in settings)
        hosts = sorted({h for s in settings for h in s.hosts})
        yield make_finding(
            "ENV001", "info",
            f"{plural(len(settings), 'setting')} of {vendor.name}, set on purpose: {names}",
            evidence=shown(s.evidence for s in settings), evidence_count=len(settings), hosts=hosts,
            fix="Nothing to do: keep the provider's settings unless its documentation says otherwise; compare with"
            f" its current profile after an image or plugin upgrade. Source: {vendor.source}.",
            explanation="The provider tunes NCCL for its network and instances with these values; NCCL's documentation"
            " calls some of them debugging knobs, but here they are the platform's configuration, not left-overs.",
        )  # fmt: skip


def _host_groups(ctx: Context) -> list[tuple[list[str], dict[str, int]]]:
    """(hosts, processes per host that went through init) of each job.

    Jobs come from shared commIds or nccl-tests runs (version.jobs). When nothing links any two
    processes (old NCCL prints no commId) all hosts are taken as one job.
    """
    groups = []
    # a process counts where its lines show its start (version, driver, Init START, its settings): one known
    # only from later lines (connection lines of an excerpt) may have printed its settings before them
    started = {(r.host, r.pid) for c in ctx.case.communicators for r in c.ranks if r.init_start}
    # a setting names its hosts and its pids, not which pid on which host: a host and a pid that printed one
    printed = [s for s in ctx.case.env if s.origin == "log"]
    printing_hosts = {h for s in printed for h in s.hosts}
    printing_pids = {pid for s in printed for pid in s.pids}

    def shows_start(p: Process) -> bool:
        if not p.host:
            return False
        printed_one = p.host in printing_hosts and p.pid in printing_pids
        return bool(p.nccl_version or p.cuda_driver_version or printed_one or (p.host, p.pid) in started)

    for job in jobs(ctx):
        counts: dict[str, int] = defaultdict(int)
        for p in job.processes:
            if shows_start(p):
                counts[p.host] += 1
        groups.append((job.hosts, dict(counts)))
    if groups:
        return groups
    counts = defaultdict(int)
    for p in ctx.case.processes:
        if shows_start(p):
            counts[p.host] += 1
    hosts = sorted(h.name for h in ctx.case.hosts if h.name)
    return [(hosts, dict(counts))] if hosts else []


HOST_ID = "NCCL_HOSTID"  # meant to differ between machines: only several values on one host are a problem


def _split_hosts(settings: list[EnvSetting]) -> Iterable[Finding]:
    """NCCL_HOSTID with several values on one host: NCCL takes its processes for separate nodes, so they talk over
    the network (NET/IB or NET/Socket) instead of NVLink, PCIe P2P or shared memory (NCCL src/misc/utils.cc
    getHostHash: NCCL_HOSTID replaces the host's identity). Different values on different hosts are its purpose."""
    by_host: dict[str, set[str]] = defaultdict(set)
    for s in settings:
        for host in s.hosts:
            by_host[host].add(s.value)
    for host, values in sorted(by_host.items()):
        if len(values) < 2:
            continue
        mine = [s for s in settings if host in s.hosts]
        yield make_finding(
            "ENV002", "warning",
            f"{HOST_ID} has {len(values)} values on {host} ({', '.join(sorted(values))}): NCCL takes its processes"
            f" for {len(values)} separate nodes, so they talk over the network instead of NVLink, PCIe or shared"
            " memory",
            evidence=shown(s.evidence for s in mine), evidence_count=sum(max(s.processes, 1) for s in mine),
            hosts=[host],
            explanation="NCCL groups ranks into nodes by their host identity and connects the ranks of one node over"
            " NVLink, PCIe P2P or shared memory, and nodes over the network. Processes of one machine given different"
            " identities are connected as if they were on different machines: through the NIC or TCP sockets, many"
            " times slower (and not at all where the machine has no NIC NCCL can use).",
            fix=f"Give every process of a machine the same {HOST_ID} (or leave it unset): one value per machine.",
        )  # fmt: skip


@rule("ENV002", "env-inconsistent", severity="warning", needs=["settings"])
def env_inconsistent(ctx: Context) -> Iterable[Finding]:
    """NCCL_* settings differ between the hosts or processes of one job: a variable is set on some
    hosts (or by some processes) but not all, or to different values.

    Hosts are compared within one job (processes linked by a shared commId or one nccl-tests run;
    all hosts when the log prints no commId). A process prints a variable when NCCL first reads it,
    so a host that never used the feature (for example IB parameters on a host that fell back to
    sockets) does not print it even if it is set; the message says so when the networks differ. NCCL 2.31's RAS
    diagnostics compare every NCCL_* variable across the ranks themselves and list the ranks of a differing value.

    Why: Ranks that disagree on protocols, buffer sizes, algorithms or transports set up
    mismatched connections: NCCL then hangs or fails with errors such as `Message truncated :
    received X bytes instead of Y`. Maintainers ask to "check the log for environment variables set
    on one rank but not the other".

    Fix: Set NCCL_* variables in one place that every rank reads (the launcher's environment
    export, e.g. `mpirun -x`, `srun --export=ALL`, the pod spec), use the same container image and
    /etc/nccl.conf on every host, and remove per-host overrides.

    Sources: sjeaugey in NVIDIA/nccl#1328 ("check the log for environment variables set on one rank but
    not the other"); NCCL src/misc/param.cc (/etc/nccl.conf per host; one `set by environment` line per
    process, when the variable is first read); NCCL docs troubleshooting/ras.rst (2.31 RAS diagnostics: NCCL
    environment)
    """
    yield from diag_env_differs(ctx)
    by_name: dict[str, list[EnvSetting]] = defaultdict(list)
    for s in ctx.case.env:
        # a command line sets its variables for every rank it starts: nothing to compare there
        if s.name.startswith("NCCL_") and s.name not in LOGGING and s.origin == "log":
            by_name[s.name].append(s)
    networks = {h.name: sorted(h.networks) for h in ctx.case.hosts}
    printing_hosts = {h for s in ctx.case.env for h in s.hosts}
    for hosts, counts in _host_groups(ctx):
        host_set = set(hosts)
        for name in sorted(by_name):
            settings = [s for s in by_name[name] if host_set & set(s.hosts) or (not s.hosts and len(hosts) <= 1)]
            if not settings:
                continue
            if name == HOST_ID:
                yield from _split_hosts(settings)
                continue
            with_var = sorted({h for s in settings for h in s.hosts if h in host_set})
            missing = [h for h in hosts if h not in with_var]
            values = sorted({s.value for s in settings})
            severity: Severity = "warning"
            default, _ = default_of(ctx, name)
            if len(values) == 1 and default is not None and _same_value(values[0], default):
                continue  # set to its default on some hosts: they behave as the hosts where it is unset
            evidence = shown(s.evidence for s in settings)
            n_lines = sum(max(s.processes, 1) for s in settings)
            if len(values) > 1:
                sides = "; ".join(f"{s.value} on {_where(s)}" for s in sorted(settings, key=lambda s: s.value))
                message = f"{name} has different values within one job: {sides}"
                if missing:
                    message += f"; not set on {host_list(missing)}"
            elif missing and len(hosts) > 1:
                s = settings[0]
                message = f"{name}={s.value} is set on {_where(s)} but not on {host_list(missing)}"
                silent = [h for h in missing if h not in printing_hosts]
                if silent:
                    message += (
                        f" ({host_list(silent)} printed no 'set by environment' line at all: its log may have been"
                        " taken without the ENV subsystem)"
                    )
                elif any(networks.get(h) != networks.get(with_var[0]) for h in missing):
                    nets = ", ".join(f"{h}: {'/'.join(networks.get(h) or ['?'])}" for h in [with_var[0], *missing[:5]])
                    message += (
                        f"; the hosts use different networks ({nets}), and NCCL prints a variable only when it reads"
                        " it, so check the environment of the other hosts too"
                    )
            else:
                s = settings[0]
                expected = sum(counts.get(h, 0) for h in s.hosts if h in host_set)
                if not (0 < s.processes < expected):
                    continue
                message = (
                    f"{name}={s.value} is logged by {s.processes} of the {expected} processes on {host_list(s.hosts)}"
                    " (NCCL prints a variable when a process first reads it; a process that never used the"
                    " feature does not print it)"
                )
                severity = "info"  # processes of one host share its environment: nothing shows they differ
            yield make_finding(
                "ENV002",
                severity,
                message,
                evidence=evidence,
                evidence_count=n_lines,
                hosts=sorted({h for s in settings for h in s.hosts} | set(missing)),
            )


def diag_env_differs(ctx: Context) -> Iterable[Finding]:
    """ENV002 from NCCL 2.31's RAS diagnostics, which compare every NCCL_* variable across the ranks of a
    communicator and list the ranks of each value that is not the others' (`NCCL environment: NCCL_BUFFSIZE=8388608
    on rank(s) {8,...,15}`)."""
    by_name: dict[str, list[DiagReport]] = defaultdict(list)
    for r in ctx.case.diag_reports:
        if r.kind == "env_differs" and r.env_name:
            by_name[r.env_name].append(r)
    for name, reports in sorted(by_name.items()):
        sides = "; ".join(f"{r.env_value} on {plural(len(r.ranks), 'rank')} ({_ranks(r.ranks)})" for r in reports)
        yield make_finding(
            "ENV002", "warning",
            f"{name} differs between the ranks of one communicator, as NCCL's RAS diagnostics compare them: {sides}",
            evidence=shown(r.evidence for r in reports), evidence_count=len(reports),
            hosts=sorted({r.host for r in reports if r.host}), ranks=sorted({n for r in reports for n in r.ranks}),
        )  # fmt: skip


def _ranks(ranks: list[int]) -> str:
    """'8-15', '1, 3, 5': a set of ranks the short way."""
    if ranks and ranks == list(range(ranks[0], ranks[-1] + 1)) and len(ranks) > 2:
        return f"{ranks[0]}-{ranks[-1]}"
    return ", ".join(map(str, ranks))
