"""VER003: the NCCL release in use has a published bug whose evidence is in the inputs (data/known_bugs.json)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from ncclscope.common.data_files import data_json
from ncclscope.common.versions import release_tuple
from ncclscope.diagnose.releases import case_release
from ncclscope.diagnose.rules.context import Context, shown
from ncclscope.diagnose.rules.registry import make_finding, rule
from ncclscope.model import Evidence, Finding


def known_bugs() -> list[dict[str, Any]]:
    return list(data_json("known_bugs.json")["bugs"])


@rule("VER003", "known-nccl-bug", severity="warning", needs=["version"])
def known_nccl_bug(ctx: Context) -> Iterable[Finding]:
    """The NCCL release in use has a published bug whose evidence is in the inputs: a message NCCL prints only when
    it hits it, or the GPU it hits on (data/known_bugs.json lists each with its releases, its first fixed release
    and its source).

    Why: Some failures are not configuration at all: the release has a bug that its next release fixes. Knowing it
    saves the hunt through drivers, networks and settings.

    Fix: Upgrade NCCL to the first fixed release or later (pip's nvidia-nccl-cu12, the container image, or the
    framework's bundled NCCL: PyTorch wheels carry their own).

    Sources: data/known_bugs.json (each bug's issue or release notes); NCCL release notes
    """
    release = case_release(ctx.case)
    if release is None:
        return
    families = {m.family: m.evidence for m in [*ctx.case.warnings, *ctx.case.messages]}
    names = {d.name: (run.source, run.line) for run in ctx.case.benchmarks for d in run.devices}
    version = ".".join(map(str, release))
    for bug in known_bugs():
        first, last = (release_tuple(v) for v in bug["affected"])
        if first is None or last is None or not first <= release <= last:
            continue
        lines: list[Evidence] = [families[f] for f in bug["evidence"].get("families", []) if f in families]
        gpus = [n for n in names if any(re.search(p, n) for p in bug["evidence"].get("gpu_names", []))]
        for name in gpus[:1]:
            source, line = names[name]
            lines.append(Evidence(source=source, line=line, text=f"nccl-tests device: {name}"))
        if not lines:
            continue
        yield make_finding(
            "VER003", "warning",
            f"NCCL {version} has a published bug that the inputs show: {bug['title']}; first fixed in NCCL "
            f"{bug['fixed']}",
            evidence=shown(lines), evidence_count=len(lines),
            fix=f"Upgrade NCCL to {bug['fixed']} or later. Source: {bug['source']}.",
        )  # fmt: skip
