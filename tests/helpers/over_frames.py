"""Flink's OverAggregate in plain Python, for the tests of OVER on Spark and of its state:
which rows it emits per micro-batch and in what order, each row's frame, and the input
the tests share (docs/language.md, "OVER windows")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.helpers.minute_events import Row, at, minutes


def emitted(batches: list[list[Row]], delay: float) -> dict[int, list[Row]]:
    """Per seller, the rows Flink's OverAggregate emits, in the order it emits them.

    Per micro-batch: a row at or behind the last time emitted for its seller is dropped
    (late); the others wait; then the watermark moves on (the largest time so far minus
    ``delay``: each run ends with a micro-batch without data that moves it, as Flink's
    watermark follows its input) and every waiting row at or before it is emitted, by time,
    ties in arrival order.
    """
    last: dict[int, float] = {}
    waiting: dict[int, list[Row]] = {}
    out: dict[int, list[Row]] = {}
    watermark = float("-inf")
    for batch in batches:
        for row in batch:
            key, t = row["seller"], minutes(row["ts"])
            if key in last and t <= last[key]:
                continue
            waiting.setdefault(key, []).append(row)
        watermark = max(watermark, max(minutes(r["ts"]) for r in batch) - delay)
        for key, rows in waiting.items():
            ready = sorted(
                (r for r in rows if minutes(r["ts"]) <= watermark), key=lambda r: minutes(r["ts"])
            )
            waiting[key] = [r for r in rows if minutes(r["ts"]) > watermark]
            if ready:
                out.setdefault(key, []).extend(ready)
                last[key] = minutes(ready[-1]["ts"])
    return out


def over_rows(
    per_key: dict[int, list[Row]],
    calls: dict[str, Callable[[list[Row]], Any]],
    rows: int | None,
    range_minutes: float | None,
) -> list[Row]:
    """Each emitted row with each call over its frame, from the frame's definition: the row
    and the ``rows`` rows emitted before it (ROWS), or every emitted row of its seller at
    most ``range_minutes`` before it, its ties included (RANGE)."""
    out = []
    for emitted_rows in per_key.values():
        for index, row in enumerate(emitted_rows):
            if rows is not None:
                frame = emitted_rows[max(0, index - rows) : index + 1]
            else:
                assert range_minutes is not None
                t = minutes(row["ts"])
                frame = [r for r in emitted_rows if t - range_minutes <= minutes(r["ts"]) <= t]
            out.append({**row, **{name: f(frame) for name, f in calls.items()}})
    return out


def avg(frame: list[Row]) -> float | None:
    values = [r["price"] for r in frame if r["price"] is not None]
    total = 0.0
    for v in values:
        total += float(v)
    return total / len(values) if values else None


BATCHES: list[list[Row]] = [
    [
        {"seller": 1, "price": 10, "ts": at(0)},
        {"seller": 1, "price": 30, "ts": at(2)},
        {"seller": 1, "price": 20, "ts": at(1)},  # out of order, not late
        {"seller": 2, "price": 5, "ts": at(1.5)},
        {"seller": 100, "price": 1, "ts": at(3)},
        {"seller": 100, "price": 2, "ts": at(3)},
    ],
    # watermark 10:02
    [
        {"seller": 1, "price": None, "ts": at(4)},
        {"seller": 1, "price": 99, "ts": at(1.5)},  # behind seller 1's last emitted (10:02): late
        {
            "seller": 2,
            "price": 7,
            "ts": at(1.8),
        },  # behind the watermark (10:02), after 2's last (10:01.5): kept
        {"seller": 100, "price": 4, "ts": at(5)},
        {"seller": 100, "price": 8, "ts": at(3)},  # a tie with two rows waiting: kept
    ],
    # watermark 10:04
    [
        {"seller": 1, "price": 40, "ts": at(6)},
        {"seller": 2, "price": 9, "ts": at(3.5)},  # behind the watermark, after 2's last: kept
        {"seller": 3, "price": 3, "ts": at(2)},  # a new seller behind the watermark: kept
        {"seller": 100, "price": 16, "ts": at(6)},
        {"seller": 100, "price": 32, "ts": at(6)},
    ],
    # watermark 10:05
    [{"seller": 1, "price": 50, "ts": at(9)}, {"seller": 100, "price": 64, "ts": at(8)}],
    # watermark 10:08
    [{"seller": 9, "price": 0, "ts": at(30)}],
    # watermark 10:29
]


def normal(rows: list[Row]) -> list[tuple[Any, ...]]:
    """The rows as sorted tuples, NULL fields left out (the JSON sink writes none)."""
    return sorted(
        tuple((k, minutes(v) if k == "ts" else v) for k, v in sorted(r.items()) if v is not None)
        for r in rows
    )
