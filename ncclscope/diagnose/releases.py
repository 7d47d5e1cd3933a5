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


def param_defaults(name: str) -> list[tuple[tuple[int, ...], str | None]]:
    """The default of an NCCL_* parameter from each release where it changed (data/nccl_param_defaults.json, read
    from NCCL's parameter definitions at every release tag); empty for a variable NCCL reads otherwise."""
    changes = data_json("nccl_param_defaults.json")["variables"].get(name, [])
    return [(since, c["default"]) for c in changes if (since := release_tuple(c["since"])) is not None]


def param_default(name: str, release: tuple[int, ...]) -> str | None:
    """The parameter's default in `release` (None: not a parameter of that release, or not known)."""
    found = None
    for since, default in param_defaults(name):
        if release[: len(since)] >= since:
            found = default
    return found


def default_span(name: str, value: str) -> tuple[tuple[int, ...], tuple[int, ...] | None] | None:
    """(from, until) releases whose default was `value` (until None: still is), the latest such span."""
    changes = param_defaults(name)
    spans = None
    for i, (since, default) in enumerate(changes):
        if default == value:
            spans = (since, changes[i + 1][0] if i + 1 < len(changes) else None)
    return spans
