"""ncclscope: read NCCL logs, topology matrices and nccl-tests output, and say what is wrong.

    >>> import ncclscope as ns
    >>> analysis = ns.analyze("fixtures/nccl/v2_26_socket_fallback.log")
    >>> analysis.frames().findings.loc[0, "code"]
    'NET002'

The API (ns.read, ns.analyze, Case, Analysis, frames) is imported on first use, so that
`ncclscope --version` and the CLI load only what a command needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = ["Analysis", "Case", "Frames", "ReadError", "ReadWarning", "__version__", "analyze", "read"]

if TYPE_CHECKING:
    from ncclscope.api import ReadError, ReadWarning, analyze, read
    from ncclscope.model import Analysis, Case
    from ncclscope.model.frames import Frames

_LAZY = {
    "read": "ncclscope.api",
    "analyze": "ncclscope.api",
    "ReadError": "ncclscope.api",
    "ReadWarning": "ncclscope.api",
    "Case": "ncclscope.model",
    "Analysis": "ncclscope.model",
    "Frames": "ncclscope.model.frames",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ncclscope' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
