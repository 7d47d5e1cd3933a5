"""Rules of the NET family (see ../shared/knowledge/rule-catalog.md)."""

from __future__ import annotations
