"""Rules of the ENV family (see ../shared/knowledge/rule-catalog.md)."""

from __future__ import annotations
