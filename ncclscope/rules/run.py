"""Rules of the RUN family (see ../shared/knowledge/rule-catalog.md)."""

from __future__ import annotations
