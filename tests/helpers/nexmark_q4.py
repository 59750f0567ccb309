"""Nexmark q4's auctions and bids over five micro-batches, as the tests of its join
(tests/test_interval_join_filter.py) and of q4's updating pipeline
(tests/test_nexmark_q4.py) write them, and Flink's regular join of them in plain Python."""

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
