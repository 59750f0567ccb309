"""Nexmark q4's auctions and bids over five micro-batches, as the tests of its join
(tests/test_interval_join_filter.py) and of q4's updating pipeline
(tests/test_nexmark_q4.py) write them, Flink's regular join of them in plain Python, and
q4's result over any auctions and bids (also examples/flink_sql/nexmark_q4.flow's, in
tests/test_flink_sql_examples.py)."""

from __future__ import annotations

from tests.helpers.minute_events import Row, at


def auction(i: int, category: int, start: float, expires: float) -> Row:
    return {"id": i, "category": category, "date_time": at(start), "expires": at(expires)}


def bid(i: int, price: int, time: float) -> Row:
    return {"auction": i, "price": price, "date_time": at(time)}


#: (auctions, bids) per micro-batch: auction 1 (minutes 0 to 30) gets bids in the first
#: three; the watermark passes its start in the second.
BATCHES: list[tuple[list[Row], list[Row]]] = [
    ([auction(1, 10, 0, 30), auction(2, 10, 1, 5)], [bid(1, 100, 2), bid(2, 50, 3), bid(3, 70, 4)]),
    ([auction(3, 11, 2, 40)], [bid(1, 120, 10), bid(2, 80, 6), bid(3, 90, 11)]),
    ([auction(4, 11, 12, 50)], [bid(4, 30, 13), bid(1, 90, 14)]),
    ([auction(5, 10, 15, 60)], [bid(5, 200, 16), bid(3, 60, 17), bid(4, 300, 18)]),
    ([auction(6, 12, 20, 60)], [bid(6, 10, 21), bid(5, 210, 22)]),
]


def flink_join(batches: list[tuple[list[Row], list[Row]]]) -> list[tuple[int, int, int]]:
    """Flink's regular join of every auction and bid so far, then the WHERE."""
    auctions = [a for some, _ in batches for a in some]
    bids = [b for _, some in batches for b in some]
    return sorted(
        (a["id"], a["category"], b["price"])
        for a in auctions
        for b in bids
        if a["id"] == b["auction"] and a["date_time"] <= b["date_time"] <= a["expires"]
    )


def closing_averages(auctions: list[Row], bids: list[Row]) -> dict[int, float]:
    """Flink's q4 over these rows: each auction's closing price (its highest bid between
    its start and its expiry, both included) averaged per category; an auction without
    such a bid counts in none."""
    final: dict[int, tuple[int, float]] = {}
    for a in auctions:
        prices = [
            float(b["price"])
            for b in bids
            if b["auction"] == a["id"] and a["date_time"] <= b["date_time"] <= a["expires"]
        ]
        if prices:
            final[a["id"]] = (a["category"], max(prices))
    per_category: dict[int, list[float]] = {}
    for category, price in final.values():
        per_category.setdefault(category, []).append(price)
    return {c: sum(values) / len(values) for c, values in per_category.items()}
