"""The one table of free-text error strings: texts that NCCL quotes from the system rather than prints
from its own formats. Everything NCCL prints itself is cut into fields by grammars/nccl_log/;
these strings come from elsewhere and vary with the C library, the CUDA version and the framework:
- strerror(errno) texts that socket and verbs failures quote ("Connection refused" ...);
- CUDA error strings (cudaGetErrorString / cuGetErrorString) that `Cuda failure` quotes;
- ncclGetErrorString texts that frameworks print for an ncclResult_t ("unhandled system error" ...).
Each entry says what the string means for NCCL and, where there is one, what to do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Meaning:
    label: str  # a short name for grouping and messages
    meaning: str
    fix: str = ""


def _first(table: tuple[tuple[re.Pattern[str], Meaning], ...], text: str | None) -> Meaning | None:
    if not text:
        return None
    for pattern, meaning in table:
        if pattern.search(text):
            return meaning
    return None


# strerror(errno) of a socket operation (glibc wording), and what it means between NCCL ranks
SOCKET_ERRNO: tuple[tuple[re.Pattern[str], Meaning], ...] = (
    (
        re.compile(r"refused", re.I),
        Meaning(
            "connection refused",
            "nothing listened at the peer's address: the peer had exited or not started, a wrong interface was "
            "picked, or a firewall rejected it",
        ),
    ),
    (
        re.compile(r"reset by peer", re.I),
        Meaning(
            "connection reset by peer", "the peer closed the connection abruptly, usually because it crashed or aborted"
        ),
    ),
    (
        re.compile(r"broken pipe", re.I),
        Meaning(
            "connection closed by remote peer",
            "the peer process exited or aborted first: its own log holds the first error",
        ),
    ),
    (
        re.compile(r"software caused connection abort", re.I),
        Meaning(
            "connection aborted",
            "the local network stack aborted the connection: an address that is not reachable from here (a "
            "link-local or container address, a wrong interface), an interface going down, a firewall",
        ),
    ),
    (
        re.compile(r"timed out", re.I),
        Meaning(
            "connection timeout",
            "the peer did not answer in time: an unreachable address (wrong interface, firewall) or a host that"
            " is down",
        ),
    ),
    (
        re.compile(r"no route to host|network is unreachable", re.I),
        Meaning(
            "no route to peer",
            "the address is not reachable from this host: wrong interface (NCCL_SOCKET_IFNAME) or routing",
        ),
    ),
    (
        re.compile(r"temporarily unavailable", re.I),
        Meaning("resource temporarily unavailable", "a non-blocking socket call found nothing ready (EAGAIN)"),
    ),
    (
        re.compile(r"address already in use|cannot assign requested address", re.I),
        Meaning("address unusable", "the local address or port cannot be bound: NCCL_SOCKET_IFNAME or a port clash"),
    ),
)


def socket_errno(text: str | None) -> Meaning | None:
    return _first(SOCKET_ERRNO, text)


# CUDA error strings, as `Cuda failure [N] '...'` quotes them
CUDA_ERRORS: tuple[tuple[re.Pattern[str], Meaning], ...] = (
    (
        re.compile(r"out of memory", re.I),
        Meaning(
            "out of memory",
            "the GPU ran out of memory while NCCL allocated its buffers",
            "Leave GPU memory for NCCL: lower the application's use (batch size, caching allocator limits) and check"
            " nvidia-smi for other processes on the GPU.",
        ),
    ),
    (
        re.compile(r"operation not permitted", re.I),
        Meaning(
            "operation not permitted",
            "CUDA refused the operation; with multi-node NVLink this is the IMEX channel permission"
            " (/dev/nvidia-caps-imex-channels/channel*)",
            "Give the job write access to /dev/nvidia-caps-imex-channels/channel* and check `nvidia-imex-ctl -H -N`"
            " (domain UP, every node READY).",
        ),
    ),
    (
        re.compile(r"system not yet initialized", re.I),
        Meaning(
            "system not yet initialized",
            "the NVSwitch fabric is not initialised: nvidia-fabricmanager is not running (or failed)",
            "Start nvidia-fabricmanager (same version as the driver) and check `nvidia-smi -q | grep -A4 Fabric`.",
        ),
    ),
    (
        re.compile(r"illegal memory access|unspecified launch failure|misaligned address|illegal instruction", re.I),
        Meaning(
            "kernel fault",
            "a CUDA kernel faulted (often the application's, seen by NCCL's next CUDA call); the CUDA context is lost",
            "Find the faulting kernel with CUDA_LAUNCH_BLOCKING=1 or compute-sanitizer; check the counts and buffers"
            " passed to NCCL; check `dmesg` for Xid errors.",
        ),
    ),
    (
        re.compile(r"device-side assert", re.I),
        Meaning(
            "device-side assert",
            "an assertion in a kernel (usually the application's) fired",
            "Run with CUDA_LAUNCH_BLOCKING=1 to find the kernel and its assertion.",
        ),
    ),
    (
        re.compile(r"peer access", re.I),
        Meaning(
            "peer access",
            "CUDA peer access between two GPUs could not be enabled",
            "Check `nvidia-smi topo -p2p r` and the PCIe ACS/IOMMU settings.",
        ),
    ),
    (
        re.compile(r"invalid device ordinal|no CUDA-capable device", re.I),
        Meaning(
            "device not visible",
            "the process does not see the GPU it was given",
            "Check CUDA_VISIBLE_DEVICES and the local-rank-to-GPU mapping of the launcher.",
        ),
    ),
    (
        re.compile(r"busy or unavailable", re.I),
        Meaning(
            "device busy",
            "the GPU is in Exclusive Process mode and another process (often the MPI library's CUDA support) holds a"
            " context on it",
            "Check `nvidia-smi -q | grep -i compute` (Exclusive_Process) and what else opens the GPU before NCCL.",
        ),
    ),
    (
        re.compile(r"driver version is insufficient|forward compatibility", re.I),
        Meaning(
            "driver too old",
            "the driver is older than the CUDA version NCCL was built for",
            "Upgrade the driver or use an NCCL built for the installed CUDA.",
        ),
    ),
    (
        re.compile(r"ECC error|uncorrectable", re.I),
        Meaning(
            "ECC",
            "the GPU reported a hardware (ECC) error",
            "Drain the GPU; check `nvidia-smi -q -d ECC` and Xid errors in `dmesg`.",
        ),
    ),
    (
        re.compile(r"not supported", re.I),
        Meaning(
            "not supported",
            "the driver or GPU does not support an operation NCCL tried (cuMem, multicast or fabric handles)",
            "Check that driver and CUDA are recent enough for this NCCL; as a test only, NCCL_CUMEM_ENABLE=0 or"
            " NCCL_NVLS_ENABLE=0 tell which feature is missing.",
        ),
    ),
    (
        re.compile(r"invalid argument", re.I),
        Meaning(
            "invalid argument",
            "CUDA rejected an argument: often a driver or runtime too old for this NCCL build, or a device or stream"
            " that does not belong to the current GPU",
            "Check driver/runtime versions against the NCCL build (`+cudaX.Y` in the version line) and that every rank"
            " sets its own device before NCCL calls.",
        ),
    ),
    (
        re.compile(r"initialization error", re.I),
        Meaning(
            "initialization error",
            "CUDA failed to initialise in this process",
            "Check the driver (nvidia-smi), the container's GPU access, and that CUDA is not initialised before"
            " fork().",
        ),
    ),
)


def cuda_error(text: str | None) -> Meaning | None:
    return _first(CUDA_ERRORS, text)


# ncclGetErrorString texts (src/misc/utils.cc, with or without the 2.18+ hints) -> ncclResult_t
NCCL_RESULTS: tuple[tuple[re.Pattern[str], Meaning], ...] = (
    (
        re.compile(r"^unhandled cuda error", re.I),
        Meaning("ncclUnhandledCudaError (1)", "a CUDA call failed inside NCCL"),
    ),
    (
        re.compile(r"^unhandled system error", re.I),
        Meaning("ncclSystemError (2)", "a system call or library call failed"),
    ),
    (re.compile(r"^internal error", re.I), Meaning("ncclInternalError (3)", "NCCL hit an internal check")),
    (
        re.compile(r"^invalid argument", re.I),
        Meaning("ncclInvalidArgument (4)", "an argument of an NCCL call was wrong"),
    ),
    (re.compile(r"^invalid usage", re.I), Meaning("ncclInvalidUsage (5)", "NCCL was used the wrong way")),
    (
        re.compile(r"^remote process exited or there was a network error", re.I),
        Meaning("ncclRemoteError (6)", "a peer failed or the network between them did"),
    ),
    (
        re.compile(r"operation in progress", re.I),
        Meaning("ncclInProgress (7)", "a non-blocking operation is still running"),
    ),
    (re.compile(r"^timeout", re.I), Meaning("ncclTimeout (8)", "an NCCL operation timed out")),
)


def nccl_result(text: str | None) -> Meaning | None:
    return _first(NCCL_RESULTS, (text or "").strip())


# What to do about each ncclResult_t that reached the caller (nccl.h.in names them; NCCL's docs,
# troubleshooting.rst, say where each usually comes from). 0 Success and 7 InProgress are not failures.
RESULT_ADVICE: dict[int, str] = {
    1: "a CUDA call inside NCCL failed: the `Cuda failure` WARN before it names the CUDA error; look for Xid "
    "errors in the host's kernel log (dmesg) and at GPU memory in use",
    2: "a system or library call failed (sockets, InfiniBand verbs, /dev/shm, memory registration): the WARN's "
    "errno text or the call it names says which; check the network interface (NCCL_SOCKET_IFNAME), the "
    "locked-memory limit (ulimit -l) and /dev/shm",
    3: "one of NCCL's own checks failed: most often ranks that disagree (different NCCL versions or net plugins) "
    "or an earlier failure on another rank; compare the versions of every rank and find the first error of the "
    "job; if it repeats alone, report it with the NCCL_DEBUG=INFO logs of every rank",
    4: "NCCL rejected an argument of a call: check the counts, data types, devices and communicator the "
    "application passes on that rank",
    5: "NCCL was used in a way it does not allow: ranks calling collectives in a different order, a communicator "
    "used after an abort or from a second thread, or ranks of different NCCL versions",
    6: "a peer process exited or the network between them failed: this rank is not the cause; the first error "
    "of the job is on another rank or host, so read its log first",
    8: "an NCCL operation timed out: a peer that never joined or a network that stopped delivering; find the rank "
    "that did not arrive",
}


# What the cause quoted by an nccl-tests failure line means: a CUDA or NCCL error string, and after
# ' / ' NCCL's last error (which names the call that failed), most specific first.
TEST_FAILURES: list[tuple[str, str]] = [
    (
        "system not yet initialized",
        "CUDA error 802: on an NVSwitch system the NVIDIA fabric manager is not running "
        "(systemctl status nvidia-fabricmanager; its version must match the driver)",
    ),
    ("out of memory", "GPU memory ran out: another process holds GPU memory, or the sizes (-e) are too large"),
    (
        "illegal memory access",
        "a GPU kernel faulted (CUDA error 700): look for Xid errors in dmesg; a hardware, driver or NCCL fault",
    ),
    (
        "ibv_create_qp",
        "creating an InfiniBand queue pair failed: raise the locked-memory limit (ulimit -l unlimited / "
        "--ulimit memlock=-1)",
    ),
    ("ibv_reg_mr", "registering memory with the NIC failed: raise the locked-memory limit (ulimit -l unlimited)"),
    ("/dev/shm", "shared memory ran out: give the container more /dev/shm (docker --shm-size=1g)"),
    (
        "remote process exited or there was a network error",
        "a peer process died or the network dropped the connection: read the other ranks' output first",
    ),
    (
        "unhandled system error",
        "a system call or network call inside NCCL failed (sockets, IB verbs, /dev/shm): NCCL's last WARN, after "
        "the '/', names it; run with NCCL_DEBUG=INFO",
    ),
    (
        "unhandled cuda error",
        "a CUDA call inside NCCL failed: NCCL's last WARN, after the '/', names it; run with NCCL_DEBUG=INFO",
    ),
    ("internal error", "NCCL hit an internal error: read the NCCL WARN lines (NCCL_DEBUG=INFO)"),
    ("invalid usage", "NCCL was called inconsistently (different arguments or versions across ranks)"),
    ("invalid argument", "an invalid argument reached NCCL or CUDA (check the sizes and the device list)"),
    ("no CUDA-capable device", "no GPU is visible to the process (CUDA_VISIBLE_DEVICES, container --gpus)"),
    ("driver version is insufficient", "the NVIDIA driver is older than the CUDA runtime nccl-tests was built with"),
    (
        "operation not permitted",
        "the GPU refused the operation (IMEX channel permissions on MNNVL, or MIG/compute mode)",
    ),
    ("Test timeout", "the collective did not complete within -T seconds: a hang; see RUN001/RUN006 and NCCL's RAS"),
]


def test_failure_meaning(text: str) -> str:
    """What a failure quoted by nccl-tests means (by substring: the quoted texts vary with versions)."""
    lowered = text.lower()
    for needle, meaning in TEST_FAILURES:
        if needle.lower() in lowered:
            return meaning
    return "see the NCCL WARN lines before it (NCCL_DEBUG=INFO)"
