"""The currency rates' versions and the orders of the event-time temporal join tests
(tests/test_temporal_joins.py, and the same join in Flink's DDL, tests/test_flink_ddl.py),
with the join's answer in plain Python."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from tests.helpers.files import Row, at

#: Versions of the rates, the table's files in no order: EUR has one before any order and
#: two later (one at an order's exact time, one after every order: a future version),
#: USD starts after its first order, GBP has none, and a NULL version time is never valid.
VERSIONS: list[Row] = [
    {"cur": "EUR", "rate": 1.10, "since": at(0)},
    {"cur": "USD", "rate": 0.90, "since": at(10)},
    {"cur": "EUR", "rate": 1.20, "since": at(20)},
    {"cur": "EUR", "rate": 9.99, "since": at(1000)},
    {"cur": "USD", "rate": 0.95, "since": at(35)},
    {"cur": "JPY", "rate": 0.01, "since": None},
    {"cur": "EUR", "rate": 1.15, "since": at(12)},
]
#: Orders over three micro-batches; order 2 comes before USD's first version, order 9's
#: currency has no version, order 10's only version has no time.
ORDERS: list[list[Row]] = [
    [
        {"id": 1, "cur": "EUR", "amount": 10.0, "ts": at(5)},
        {"id": 2, "cur": "USD", "amount": 20.0, "ts": at(5)},
        {"id": 3, "cur": "EUR", "amount": 30.0, "ts": at(12)},
    ],
    [
        {"id": 4, "cur": "EUR", "amount": 40.0, "ts": at(20)},
        {"id": 5, "cur": "USD", "amount": 50.0, "ts": at(34)},
        {"id": 6, "cur": "EUR", "amount": 60.0, "ts": at(19)},
    ],
    [
        {"id": 7, "cur": "USD", "amount": 70.0, "ts": at(40)},
        {"id": 8, "cur": "EUR", "amount": 80.0, "ts": at(500)},
        {"id": 9, "cur": "GBP", "amount": 90.0, "ts": at(41)},
        {"id": 10, "cur": "JPY", "amount": 100.0, "ts": at(42)},
    ],
]


def version_of(order: Row) -> Row | None:
    """The version with the greatest since <= the order's time, among its currency's."""
    valid = [
        v
        for v in VERSIONS
        if v["cur"] == order["cur"] and v["since"] is not None and v["since"] <= order["ts"]
    ]
    return max(valid, key=lambda v: v["since"]) if valid else None


def written_versions(folder: Path) -> list[tuple[Any, ...]]:
    rows = [
        json.loads(line)
        for part in sorted(folder.glob("part-*.json"))
        for line in part.read_text(encoding="utf-8").splitlines()
    ]
    return sorted(((r["id"], r.get("rate"), naive_time(r.get("since"))) for r in rows), key=repr)


def naive_time(text: str | None) -> datetime | None:
    """A time as written (Spark adds the session's offset), as naive local time."""
    return None if text is None else datetime.fromisoformat(text).replace(tzinfo=None)
