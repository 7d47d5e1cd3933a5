"""Markdown tables, one spelling for the reports, `analyze --format markdown` and the fleet page."""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def cell(value: object, empty: str = "-") -> str:
    """Text safe in a table cell: a `|` would end the cell, a newline the row, a `\\` escape what follows, and
    a `<` open an HTML tag that GitHub would hide (`<inactive>`)."""
    text = empty if value is None or value == "" else str(value)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").replace("<", "&lt;")


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """The lines of a table whose cells are written already (`cell`); headers are the caller's own words."""
    return [
        "| " + " | ".join(headers) + " |",
        "|" + "---|" * len(headers),
        *("| " + " | ".join(r) + " |" for r in rows),
    ]
