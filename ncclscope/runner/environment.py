"""The environment of a run: the NCCL debug variables the rules need, and what the user had set.

NCCL prints GRAPH, NET and TUNING lines only when asked, so every run sets them. A value the user
already exported wins (they may be chasing something specific) and the manifest records it.
NCCL expands `%h` (host) and `%p` (pid) in NCCL_DEBUG_FILE, so every process gets its own file;
NCCL_TOPO_DUMP_FILE is not expanded and is written by rank 0 only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

DEBUG_FILE_PATTERN = "nccl.%h.%p.log"
DEBUG_FILE_GLOB = "nccl.*.log"
TOPO_DUMP_NAME = "nccl-topo.xml"
GRAPH_DUMP_NAME = "nccl-graph.xml"
RECORDED_PREFIXES = ("NCCL_", "CUDA_", "FI_", "UCX_")


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


def debug_environment(run_dir: Path, user_env: Mapping[str, str]) -> RunEnvironment:
    wanted = {
        "NCCL_DEBUG": "INFO",
        "NCCL_DEBUG_SUBSYS": "INIT,ENV,GRAPH,NET,TUNING",
        "NCCL_DEBUG_TIMESTAMP_LEVELS": "WARN,INFO",
        "NCCL_DEBUG_FILE": str(run_dir.resolve() / DEBUG_FILE_PATTERN),
        "NCCL_TOPO_DUMP_FILE": str(run_dir.resolve() / TOPO_DUMP_NAME),
        "NCCL_GRAPH_DUMP_FILE": str(run_dir.resolve() / GRAPH_DUMP_NAME),
    }
    return RunEnvironment(wanted, {name: user_env[name] for name in wanted if name in user_env})


def recorded_environment(env: Mapping[str, str]) -> str:
    """env.txt: the variables that shape NCCL, CUDA and the fabric libraries, sorted."""
    lines = [f"{name}={value}" for name, value in sorted(env.items()) if name.startswith(RECORDED_PREFIXES)]
    return "\n".join(lines) + "\n" if lines else ""
