"""Bids and their running totals per auction in plain Python, shared by the upsert sink
tests (tests/test_upsert_sinks.py) and the Flink DDL primary-key sink (tests/test_flink_ddl.py)."""

from __future__ import annotations

from typing import Any

from tests.helpers.files import Row, at

BIDS: list[list[Row]] = [
    [
        {"auction": 1, "price": 10, "ts": at(0)},
        {"auction": 2, "price": 7, "ts": at(1)},
        {"auction": 1, "price": 30, "ts": at(2)},
    ],
    [
        {"auction": 3, "price": 5, "ts": at(61)},
        {"auction": 1, "price": 20, "ts": at(62)},
    ],
    [
        {"auction": 2, "price": 70, "ts": at(120)},
        {"auction": 4, "price": None, "ts": at(121)},
    ],
]


def expected_totals(batches: list[list[Row]]) -> dict[int, tuple[int, Any, Any]]:
    """The running aggregate's final row per auction, in plain Python."""
    out: dict[int, tuple[int, Any, Any]] = {}
    for batch in batches:
        for row in batch:
            n, top, total = out.get(row["auction"], (0, None, None))
            price = row["price"]
            if price is not None:
                top = price if top is None else max(top, price)
                total = price if total is None else total + price
            out[row["auction"]] = (n + 1, top, total)
    return out
