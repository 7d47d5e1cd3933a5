"""The environment of a run: the NCCL debug variables the rules need, and what the user had set.

NCCL prints GRAPH, NET and TUNING lines only when asked, so every run sets them. A value the user
already exported wins (they may be chasing something specific) and the manifest records it.
NCCL expands `%h` (host) and `%p` (pid) in NCCL_DEBUG_FILE, so every process gets its own file;
NCCL_TOPO_DUMP_FILE and NCCL_GRAPH_DUMP_FILE are not expanded and are written by one rank only
(NCCL_TOPO_DUMP_FILE_RANK / NCCL_GRAPH_DUMP_FILE_RANK, default 0; src/graph/topo.cc, graph/search.cc).
On several hosts each host's local rank 0 therefore gets its own file name and names itself as the
dumping rank (nccl-topo.<host>.xml): a shell wrapper does it for nccl-tests under mpirun or srun
(host_dump_command), the built-in benchmark does it itself (host_dump_env).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

DEBUG_FILE_PATTERN = "nccl.%h.%p.log"
DEBUG_FILE_GLOB = "nccl.*.log"
TOPO_DUMP_NAME = "nccl-topo.xml"
GRAPH_DUMP_NAME = "nccl-graph.xml"
HOST_DUMP_GLOBS = ("nccl-topo.*.xml", "nccl-graph.*.xml")  # one per host in a run of several hosts
HOST_DUMPS_FLAG = "NCCLSCOPE_HOST_DUMPS"  # set by the runner: local rank 0 of each host writes its own dumps
DUMP_VARIABLES = ("NCCL_TOPO_DUMP_FILE", "NCCL_GRAPH_DUMP_FILE")
# POSIX sh, run by each process the launcher starts: which global and local rank it is (Open MPI, MPICH/PMI,
# Slurm, torchrun), and on local rank 0 a host's own dump files, named by the short host name as NCCL's %h is
_HOST_DUMP_SCRIPT = (
    "r=${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-${SLURM_PROCID:-${RANK:-0}}}}; "
    "l=${OMPI_COMM_WORLD_LOCAL_RANK:-${MPI_LOCALRANKID:-${SLURM_LOCALID:-${LOCAL_RANK:-0}}}}; "
    'if [ "$l" = 0 ] && [ "${NCCLSCOPE_HOST_DUMPS:-}" = 1 ]; then h=$(hostname); h=${h%%.*}; '
    'if [ -n "${NCCL_TOPO_DUMP_FILE:-}" ]; then export NCCL_TOPO_DUMP_FILE="${NCCL_TOPO_DUMP_FILE%.xml}.$h.xml" '
    'NCCL_TOPO_DUMP_FILE_RANK="$r"; fi; '
    'if [ -n "${NCCL_GRAPH_DUMP_FILE:-}" ]; then export NCCL_GRAPH_DUMP_FILE="${NCCL_GRAPH_DUMP_FILE%.xml}.$h.xml" '
    'NCCL_GRAPH_DUMP_FILE_RANK="$r"; fi; fi; exec "$@"'
)
RECORDED_PREFIXES = ("NCCL_", "CUDA_", "FI_", "UCX_")
INSPECTOR_DIR = "inspector"  # NCCL_INSPECTOR_DUMP_DIR of a run with --inspector: one JSON file per process
# The plugin writes only from its dump thread, which does not start at the default interval (-1) and writes what
# completed since its last pass: every 10 ms loses at most the job's last 10 ms (plugins/profiler/inspector
# inspector.cc; RUN014)
INSPECTOR_INTERVAL_US = "10000"


@dataclass(frozen=True)
class RunEnvironment:
    wanted: dict[str, str]  # what ncclscope asks for
    user: dict[str, str]  # the user's values of those names, which are kept

    @property
    def applied(self) -> dict[str, str]:
        """The variables ncclscope set (those the user had not)."""
        return {name: value for name, value in self.wanted.items() if name not in self.user}

    @property
    def names(self) -> list[str]:
        """Every debug variable of the run, to export through a launcher (mpirun -x)."""
        return list(self.wanted)

    def for_children(self, base: Mapping[str, str]) -> dict[str, str]:
        return {**base, **self.applied}


def host_dump_name(path: str, host: str) -> str:
    """nccl-topo.xml -> nccl-topo.<host>.xml"""
    return f"{path.removesuffix('.xml')}.{host}.xml"


def host_dump_env(environ: Mapping[str, str], host: str) -> dict[str, str]:
    """What a process of a run on several hosts sets before NCCL starts: on its host's local rank 0, its own
    dump files and itself as the rank that writes them; nothing elsewhere."""
    if environ.get(HOST_DUMPS_FLAG) != "1" or environ.get("LOCAL_RANK", "0") != "0":
        return {}
    rank = environ.get("RANK", "0")
    short = host.split(".", 1)[0]
    out: dict[str, str] = {}
    for name in DUMP_VARIABLES:
        if environ.get(name):
            out[name] = host_dump_name(environ[name], short)
            out[f"{name}_RANK"] = rank
    return out


def host_dump_command(argv: list[str]) -> list[str]:
    """`argv` started through the shell wrapper that gives each host's local rank 0 its own dump files."""
    return ["sh", "-c", _HOST_DUMP_SCRIPT, "ncclscope-host-dumps", *argv]


def debug_environment(
    run_dir: Path, user_env: Mapping[str, str], hosts: int = 1, inspector: Path | None = None
) -> RunEnvironment:
    """The variables of a run; with `inspector` (the plugin's .so), NCCL Inspector times every collective into
    the run directory's inspector/ (JSON: the Prometheus file is removed when the job ends) and PROFILE lines say
    how it was set up."""
    wanted = {
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_SUBSYS": "INIT,ENV,GRAPH,NET,TUNING" + (",PROFILE" if inspector else ""),
        "NCCL_DEBUG_TIMESTAMP_LEVELS": "WARN,INFO",
        "NCCL_DEBUG_FILE": str(run_dir.resolve() / DEBUG_FILE_PATTERN),
        "NCCL_TOPO_DUMP_FILE": str(run_dir.resolve() / TOPO_DUMP_NAME),
        "NCCL_GRAPH_DUMP_FILE": str(run_dir.resolve() / GRAPH_DUMP_NAME),
    }
    if inspector is not None:
        wanted |= {
            "NCCL_PROFILER_PLUGIN": str(inspector.resolve()),
            "NCCL_INSPECTOR_ENABLE": "1",
            "NCCL_INSPECTOR_DUMP_DIR": str(run_dir.resolve() / INSPECTOR_DIR),
            "NCCL_INSPECTOR_DUMP_THREAD_INTERVAL_MICROSECONDS": INSPECTOR_INTERVAL_US,
        }
    if hosts > 1 and not any(name in user_env for name in DUMP_VARIABLES):  # the user's own dump files stay theirs
        wanted[HOST_DUMPS_FLAG] = "1"
    return RunEnvironment(wanted, {name: user_env[name] for name in wanted if name in user_env})


def recorded_environment(env: Mapping[str, str]) -> str:
    """env.txt: the variables that shape NCCL, CUDA and the fabric libraries, sorted."""
    lines = [f"{name}={value}" for name, value in sorted(env.items()) if name.startswith(RECORDED_PREFIXES)]
    return "\n".join(lines) + "\n" if lines else ""
