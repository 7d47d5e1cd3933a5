"""Rules of the TOPO family (see ../shared/knowledge/rule-catalog.md)."""

from __future__ import annotations
