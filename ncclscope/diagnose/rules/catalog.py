"""Every rule: importing the rule modules registers them (ncclscope.diagnose.rules.registry)."""

from __future__ import annotations

from ncclscope.diagnose.rules import (  # noqa: F401  (imported for their @rule registrations)
    bench,
    bench_results,
    channels,
    env,
    evidence,
    gdr,
    graph_speed,
    hang,
    hardware,
    host_versions,
    net,
    net_errors,
    net_interfaces,
    net_ports,
    net_verbs,
    run,
    run_cumem,
    run_fabric,
    run_framework,
    run_init,
    run_init_time,
    run_launch,
    run_memory,
    run_timeline,
    run_warnings,
    topo,
    topo_acs,
    topo_links,
    topo_log,
    topo_views,
    version,
    version_bugs,
)
from ncclscope.diagnose.rules.registry import REGISTRY, Rule


def all_rules() -> dict[str, Rule]:
    """Every rule, by code."""
    return dict(sorted(REGISTRY.items()))
