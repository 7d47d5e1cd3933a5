"""What a log's NCCL release changes in what its lines mean (data/nccl_releases.json): lazy connection since 2.22,
WARN timestamps since 2.26 and the like. The release is the log's own version line; a case of several releases,
or of none, answers None (judged without it)."""

from __future__ import annotations

from ncclscope.common.data_files import data_json
from ncclscope.common.versions import release_tuple
from ncclscope.model import Case


def behaviours() -> dict[str, dict[str, str]]:
    return dict(data_json("nccl_releases.json")["behaviours"])


def case_release(case: Case) -> tuple[int, ...] | None:
    """The one NCCL release of the case's logs, or None (none printed, or several)."""
    releases = {r for v in case.nccl_versions if (r := release_tuple(v)) is not None}
    return next(iter(releases)) if len(releases) == 1 else None


def has(case: Case, behaviour: str) -> bool | None:
    """Whether the case's NCCL release has the behaviour; None when the release is not known."""
    release = case_release(case)
    if release is None:
        return None
    since = release_tuple(behaviours()[behaviour]["since"])
    return since is not None and release[: len(since)] >= since


def says(behaviour: str) -> str:
    entry = behaviours()[behaviour]
    return f"{entry['says']} ({entry['source']})"
