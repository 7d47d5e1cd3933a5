"""A line shape moved onto a line of other value widths (shapes.py plans the moves of its spans), and the
coarse templates that read COLL lines of every width (coarse.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from ncclscope.parse.coarse import (
    CoarseTemplate,
    span_words,
    word_classes,
)
from ncclscope.parse.fields import Repeated, Span
from ncclscope.parse.log_records import CoarseEvent, Event, LineShape, RecordShape
from ncclscope.parse.shapes import InsideValue, ShapeMover, SpanPlan


def moved_shape(mover: ShapeMover, shape: LineShape, line: bytes) -> LineShape | None:
    """The shape of `line`: the exemplar's fields moved to where `line` has them (shapes.py)."""
    anchors = mover.anchors(line)
    if anchors is None:
        return None
    plan = mover.plan
    if plan is None or plan[0] is not shape:
        plan = mover.plan = (shape, move_plan(mover, shape))
    if plan[1] is None:
        return None
    moves, build = plan[1]
    return build(iter([(anchors[sa] + da, anchors[sb] + db) for sa, da, sb, db in moves]), line)


def move_plan(
    mover: ShapeMover, shape: LineShape
) -> tuple[list[SpanPlan], Callable[[Iterator[Span], bytes], LineShape]] | None:
    """How every span of `shape` moves (one flat list, worked out once), and the function that builds a
    moved shape from the moved spans in that order; None when a span ends inside a word. A Trees line
    of 32 channels holds some 200 spans, and a 1024-rank job prints a thousand such lines that differ."""
    flat: list[Span] = []
    records = []
    for r in shape.records:
        flat.append(r.span)
        keys = list(r.prefix)
        flat.extend(r.prefix.values())
        records.append((r, keys, span_builder(r.fields, flat)))
    lead = shape.lead
    if lead is not None:
        flat.append(lead)
    try:
        moves = [mover.span_plan(a, b) for a, b in flat]
    except InsideValue:
        return None
    recognized = shape.recognized

    def build(spans: Iterator[Span], line: bytes) -> LineShape:
        moved = [
            RecordShape(next(spans), r.level, r.family, r.reason, {k: next(spans) for k in keys}, take(spans), r.elided)
            for r, keys, take in records
        ]
        return LineShape(moved, next(spans) if lead is not None else None, recognized, exemplar=line)

    return moves, build


def span_builder(value: Any, flat: list[Span]) -> Callable[[Iterator[Span]], Any]:
    """A function that rebuilds the field set `value` from an iterator of its spans, in the order they are
    appended to `flat` here (as shift would move them one by one)."""
    if isinstance(value, tuple):
        flat.append(value)
        return next
    if isinstance(value, dict):
        parts = [(k, span_builder(v, flat)) for k, v in value.items()]
        if all(part is next for _, part in parts):
            keys = [k for k, _ in parts]
            return lambda spans: {k: next(spans) for k in keys}
        return lambda spans: {k: part(spans) for k, part in parts}
    if isinstance(value, list):
        items = [span_builder(v, flat) for v in value]
        if all(item is next for item in items):
            count = len(items)
            return lambda spans: Repeated([next(spans) for _ in range(count)])
        return lambda spans: Repeated([item(spans) for item in items])
    return lambda spans: value


def event_of(line: int, raw: bytes, shape: RecordShape | CoarseTemplate) -> Event:
    return Event(line, raw, shape) if isinstance(shape, RecordShape) else CoarseEvent(line, raw, shape)


class MoveRecord:
    """A coarse template's way to the RecordShape of one of its lines (picklable, unlike a closure)."""

    def __init__(self, shape: LineShape) -> None:
        self.shape = shape
        self.mover = ShapeMover(shape.exemplar, shape.kind)

    def __call__(self, line: bytes) -> RecordShape:
        moved = moved_shape(self.mover, self.shape, line)
        if moved is None:  # cannot happen for a line the template matched; its fields are then left unread
            record = self.shape.records[0]
            return RecordShape((0, len(line)), record.level, record.family)
        return moved.records[0]


def coarse_template(shape: LineShape) -> CoarseTemplate | None:
    """The coarse template of a COLL line's shape; None when its fields do not fall on whole words."""
    record = shape.records[0]
    exemplar = shape.exemplar
    classes = word_classes(exemplar, shape.kind)
    if classes is None:
        return None
    fields: dict[str, tuple[int, int]] = {}
    for name, span, needed in (
        ("host", record.prefix.get("host"), False),
        ("pid", record.prefix.get("pid"), False),
        ("comm", record.fields.get("comm"), True),
        ("op_count", record.fields.get("op_count"), True),
    ):
        if not isinstance(span, tuple):
            if needed:
                return None
            continue
        words = span_words(exemplar, span)
        if words is None or (name in ("pid", "op_count") and words[0] != words[1]):
            return None
        fields[name] = words
    return CoarseTemplate(record, exemplar, classes, fields, MoveRecord(shape))


def unique_rows(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """np.unique(axis=0) with first indices and counts, through a 1-D hash (checked, exact)."""
    mixed = keys[:, 0].copy()
    for j in range(1, keys.shape[1]):
        mixed = mixed * np.int64(1_000_003) + keys[:, j]  # wraps on overflow; collisions are checked
    _, first, inverse, counts = np.unique(mixed, return_index=True, return_inverse=True, return_counts=True)
    if not (keys == keys[first][inverse]).all():
        return np.unique(keys, axis=0, return_index=True, return_counts=True)[0:3]  # type: ignore[return-value]
    return keys[first], first, counts
