"""Default factories for the fields of pydantic models.

Pydantic asks each default factory for its signature (does it take the validated data?), and for the
builtins `list` and `dict` inspect parses a text signature: a cost for each of some 160 fields, paid each
time a command builds a model's schema. A plain function answers at once.
"""

from __future__ import annotations

from typing import Any


def new_list() -> list[Any]:
    return []


def new_dict() -> dict[Any, Any]:
    return {}
