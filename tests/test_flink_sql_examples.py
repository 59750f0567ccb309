"""examples/flink_sql/ on Spark (issue 27): each of the Flink documentation's examples, run
unchanged over its shipped data, gives the rows plain Python computes with Flink's
semantics, and the rows its README states.

The shipped data is one file per source; here it is split into several files with
increasing modification times, read one file per micro-batch (``--set
<source>.max_files_per_trigger=1``, which changes no plan), and the job is stopped after
the first two micro-batches and started again from its checkpoint for the rest. What
is written after the first run is checked too: a window closed then, a row deduplicated
then.

Flink's semantics computed here: a tumbling window of an event-time attribute fires once
when the watermark (the largest event time seen before a micro-batch, less the
WATERMARK's delay) reaches its last millisecond, and a row arriving after its window fired
is dropped; a window Top-N ranks each fired window's rows; ROW_NUMBER() over processing
time ASC kept at 1 is each key's first row as rows arrive; the interval join is every
pair meeting its conditions (no row in this data is old enough for Flink to have expired
its partner, so none is missed).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from stages import ROOT

import flowc
from tests.helpers.files import Row, read_json_dir
from tests.helpers.nexmark_q4 import closing_averages
from tests.helpers.spark_run import run_generated, spark_codes

FOLDER = ROOT / "examples" / "flink_sql"
README = FOLDER / "README.md"
#: Micro-batches read by the first run; the rest after the restart.
FIRST_RUN = 2
MS = timedelta(milliseconds=1)
TEN_MINUTES = timedelta(minutes=10)
Result = Counter[tuple[Any, ...]]


def _shipped(source: str) -> list[Row]:
    """A source's shipped rows in file order, DECIMAL values read exactly."""
    text = (FOLDER / "data" / source / "1.json").read_text(encoding="utf-8")
    return [json.loads(line, parse_float=Decimal) for line in text.splitlines() if line]


def _split(rows: list[Row], sizes: list[int]) -> list[list[Row]]:
    assert sum(sizes) == len(rows), "every shipped row is read"
    batches, start = [], 0
    for size in sizes:
        batches.append(rows[start : start + size])
        start += size
    return batches


def _write(folder: Path, batches: list[list[Row]], first: int) -> None:
    """Files ``first``, ``first + 1``, ...: each modified after every file before it."""
    folder.mkdir(parents=True, exist_ok=True)
    for index, rows in enumerate(batches, start=first):
        path = folder / f"part-{index:03d}.json"
        path.write_text("".join(json.dumps(r, default=float) + "\n" for r in rows), "utf-8")
        stamp = 1_700_000_000 + index * 10
        os.utime(path, (stamp, stamp))


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=None)


def _value(value: Any) -> Any:
    """A value as written or stated: a timestamp as its datetime, a number exact."""
    if isinstance(value, str) and re.fullmatch(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d.*", value):
        return _time(value)
    if isinstance(value, float | int) and not isinstance(value, bool):
        return Decimal(str(value))
    return value


def _table(rows: list[Row], columns: tuple[str, ...]) -> Result:
    return Counter(tuple(_value(r[c]) for c in columns) for r in rows)


def _run(
    spark: Any,
    tmp_path: Path,
    example: str,
    inputs: dict[str, tuple[str, list[list[Row]]]],
    read: Callable[[Path], list[Row]],
) -> tuple[list[Row], list[Row]]:
    """Run ``example`` (copied unchanged) over ``inputs`` (source name: its folder and
    batches): the sink's rows after the first run and after the restart."""
    copy = tmp_path / example
    shutil.copy(FOLDER / example, copy)
    overrides = {f"{name}.max_files_per_trigger": "1" for name in inputs}
    job = flowc.compile(
        copy.read_text(encoding="utf-8"), str(copy), for_spark=True, overrides=overrides
    )
    assert spark_codes(job) == set()
    (sink,) = job.program.sinks
    out = tmp_path / str(dict(sink.options)["path"])
    for folder, batches in inputs.values():
        _write(tmp_path / folder, batches[:FIRST_RUN], 0)
    run_generated(spark, tmp_path, job)
    first = read(out)
    for folder, batches in inputs.values():
        _write(tmp_path / folder, batches[FIRST_RUN:], FIRST_RUN)
    run_generated(spark, tmp_path, job)  # restarted from its checkpoint
    return first, read(out)


# ---------------------------------------------------------------- the README's results


def _stated() -> dict[str, list[Row]]:
    """The rows README.md states for each example: the ```json block under its heading."""
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(r"^### `(\w+\.flow)`\n(?:(?!^#).)*?^```json\n(.*?)^```", text, re.S | re.M)
    return {
        name: [json.loads(line) for line in body.splitlines() if line.strip()]
        for name, body in blocks
    }


def _assert_readme(example: str, got: Result, columns: tuple[str, ...]) -> None:
    assert _table(_stated()[example], columns) == got, f"README.md's rows of {example}"


def test_readme_states_the_results_of_every_example() -> None:
    """Every example's results are stated (and checked by its test below), none other."""
    assert sorted(_stated()) == sorted(p.name for p in FOLDER.glob("*.flow"))
    assert all(_stated().values())


# ---------------------------------------------------------------- windows over Bid

BID_SIZES = [2, 2, 1, 2]  # the first run ends at 08:11: the window [08:00, 08:10) fires
BID_DELAY = timedelta(seconds=1)


def _fired_windows(batches: list[list[Row]]) -> dict[datetime, list[Row]]:
    """Flink's tumbling windows of ten minutes over bidtime, the ones fired after the
    batches: each row in the window holding it unless that window had fired before the
    row's micro-batch."""
    windows: dict[datetime, list[Row]] = {}
    watermark = datetime.min
    for batch in batches:
        for row in batch:
            ts = _time(row["bidtime"])
            start = datetime(1970, 1, 1) + TEN_MINUTES * (
                (ts - datetime(1970, 1, 1)) // TEN_MINUTES
            )
            if watermark < start + TEN_MINUTES - MS:  # not fired yet
                windows.setdefault(start, []).append(row)
        watermark = max(watermark, *(_time(r["bidtime"]) - BID_DELAY for r in batch))
    return {s: rows for s, rows in windows.items() if watermark >= s + TEN_MINUTES - MS}


def _per_supplier(rows: list[Row]) -> dict[str, list[Row]]:
    out: dict[str, list[Row]] = {}
    for row in rows:
        out.setdefault(row["supplier_id"], []).append(row)
    return out


def _tvf_tumble(batches: list[list[Row]]) -> Result:
    return Counter(
        (start, start + TEN_MINUTES, sum(r["price"] for r in rows))
        for start, rows in _fired_windows(batches).items()
    )


def _group_window(batches: list[list[Row]]) -> Result:
    return Counter(
        (supplier, start, sum(r["price"] for r in bids))
        for start, rows in _fired_windows(batches).items()
        for supplier, bids in _per_supplier(rows).items()
    )


def _window_top_n(batches: list[list[Row]]) -> Result:
    out: Result = Counter()
    for start, rows in _fired_windows(batches).items():
        totals = [
            (sum(r["price"] for r in bids), supplier, len(bids))
            for supplier, bids in _per_supplier(rows).items()
        ]
        assert len({price for price, _, _ in totals}) == len(totals), "no ties: one order"
        for rank, (price, supplier, count) in enumerate(sorted(totals, reverse=True)[:3], 1):
            out[(start, start + TEN_MINUTES, supplier, price, count, rank)] += 1
    return out


WINDOW_EXAMPLES = {
    "window_tvf_tumble.flow": (_tvf_tumble, ("window_start", "window_end", "total_price")),
    "group_window.flow": (_group_window, ("supplier_id", "wstart", "total")),
    "window_top_n.flow": (
        _window_top_n,
        ("window_start", "window_end", "supplier_id", "price", "cnt", "rownum"),
    ),
}


@pytest.mark.parametrize("example", sorted(WINDOW_EXAMPLES))
def test_window_example_on_spark(example: str, spark: Any, tmp_path: Path) -> None:
    """The windows fired after the first run, then every window fired by the end, each
    once (a Counter: no duplicate), equal Flink's; the last window stays open (its end is
    past the final watermark) and is not written."""
    flink, columns = WINDOW_EXAMPLES[example]
    batches = _split(_shipped("bid"), BID_SIZES)
    first, final = _run(spark, tmp_path, example, {"Bid": ("data/bid", batches)}, read_json_dir)
    assert _table(first, columns) == flink(batches[:FIRST_RUN]) != Counter()
    assert _table(final, columns) == flink(batches) != flink(batches[:FIRST_RUN])
    _assert_readme(example, _table(final, columns), columns)


# ---------------------------------------------------------------- orders

ORDER_SIZES = [2, 1, 2, 1]
DEDUP_COLUMNS = ("order_id", "user", "product", "num")


def _first_rows(batches: list[list[Row]]) -> Result:
    """Each order's first row as the rows arrive (files in order, lines in order)."""
    first: dict[str, Row] = {}
    for row in (r for b in batches for r in b):
        first.setdefault(row["order_id"], row)
    return Counter(tuple(_value(r[c]) for c in DEDUP_COLUMNS) for r in first.values())


def test_deduplication_example_on_spark(spark: Any, tmp_path: Path) -> None:
    """o1 arrives three times, twice in the first run and once after the restart: written
    once, its first row; the orders first seen after the restart are written then."""
    batches = _split(_shipped("orders"), ORDER_SIZES)
    first, final = _run(
        spark, tmp_path, "deduplication.flow", {"Orders": ("data/orders", batches)}, read_json_dir
    )
    assert _table(first, DEDUP_COLUMNS) == _first_rows(batches[:FIRST_RUN])
    assert _table(final, DEDUP_COLUMNS) == _first_rows(batches)
    assert sum(r["order_id"] == "o1" for b in batches for r in b) == 3
    _assert_readme("deduplication.flow", _table(final, DEDUP_COLUMNS), DEDUP_COLUMNS)


SHIPMENT_SIZES = [1, 1, 2, 1]
JOIN_COLUMNS = ("order_id", "ship_id")


def _shipped_within_four_hours(orders: list[list[Row]], shipments: list[list[Row]]) -> Result:
    return Counter(
        (_value(o["order_id"]), _value(s["id"]))
        for o in (r for b in orders for r in b)
        for s in (r for b in shipments for r in b)
        if o["order_id"] == s["order_id"]
        and _time(s["ship_time"]) - timedelta(hours=4)
        <= _time(o["order_time"])
        <= _time(s["ship_time"])
    )


def test_interval_join_example_on_spark(spark: Any, tmp_path: Path) -> None:
    """o1's three rows meet s1 (two in the first run, one after the restart), o3 meets s3;
    o2 shipped too late, o4 'shipped' before it was ordered, s4 of no order: none."""
    orders = _split(_shipped("orders"), ORDER_SIZES)
    shipments = _split(_shipped("shipments"), SHIPMENT_SIZES)
    inputs = {"Orders": ("data/orders", orders), "Shipments": ("data/shipments", shipments)}
    first, final = _run(spark, tmp_path, "interval_join.flow", inputs, read_json_dir)
    expected_first = _shipped_within_four_hours(orders[:FIRST_RUN], shipments[:FIRST_RUN])
    assert _table(first, JOIN_COLUMNS) == expected_first
    expected = _shipped_within_four_hours(orders, shipments)
    assert _table(final, JOIN_COLUMNS) == expected
    assert expected == Counter({("o1", "s1"): 3, ("o3", "s3"): 1})
    _assert_readme("interval_join.flow", _table(final, JOIN_COLUMNS), JOIN_COLUMNS)


# ---------------------------------------------------------------- Top-N into a keyed table

SALES_SIZES = [3, 3, 2, 3]
TOP_COLUMNS = ("product_id", "category", "product_name", "sales")


def _upsert_table(folder: Path) -> list[Row]:
    """The rows of a files upsert table: the version folder ``_current`` names."""
    pointer = json.loads((folder / "_current").read_text(encoding="utf-8"))
    return read_json_dir(folder / pointer["version"])


def _top_five(batches: list[list[Row]]) -> Result:
    """Flink's Rank into its keyed sink: each category's five best products (a product
    pushed out is retracted, so the sink deletes it)."""
    per: dict[str, list[Row]] = {}
    for row in (r for b in batches for r in b):
        per.setdefault(row["category"], []).append(row)
    return Counter(
        tuple(_value(r[c]) for c in TOP_COLUMNS)
        for rows in per.values()
        for r in sorted(rows, key=lambda r: -r["sales"])[:5]
    )


def test_top_n_example_on_spark(spark: Any, tmp_path: Path) -> None:
    """After the first run x's five are all it has; after the restart g and i push a and e
    out (j never gets in): the table holds each category's five best, none pushed out."""
    batches = _split(_shipped("sales"), SALES_SIZES)
    first, final = _run(
        spark, tmp_path, "top_n.flow", {"ShopSales": ("data/sales", batches)}, _upsert_table
    )
    assert _table(first, TOP_COLUMNS) == _top_five(batches[:FIRST_RUN])
    assert _table(final, TOP_COLUMNS) == _top_five(batches)
    assert not {r["product_id"] for r in final} & {"a", "e", "j"}
    _assert_readme("top_n.flow", _table(final, TOP_COLUMNS), TOP_COLUMNS)


# ---------------------------------------------------------------- Nexmark q4

AUCTION_SIZES = [2, 1, 1, 1]
Q4_BID_SIZES = [2, 3, 2, 3]
Q4_COLUMNS = ("category", "avg_final")


def _closing_averages(auctions: list[list[Row]], bids: list[list[Row]]) -> Result:
    """Flink's q4 over the batches' rows (tests/helpers/nexmark_q4.py)."""
    found = closing_averages([r for b in auctions for r in b], [r for b in bids for r in b])
    return Counter((_value(category), _value(avg)) for category, avg in found.items())


def test_nexmark_q4_example_on_spark(spark: Any, tmp_path: Path) -> None:
    """The GROUP BY over a GROUP BY subquery runs as the pipe form does: auction 1's
    closing price rises in the first run (120 retracting 100 from category 10's
    average), auction 4's after the restart (90 retracting 30 from category 11's); the
    table after each run is plain Python's, the bids after their auction's expiry left
    out."""
    auctions = _split(_shipped("auctions"), AUCTION_SIZES)
    bids = _split(_shipped("bids"), Q4_BID_SIZES)
    inputs = {"auctions": ("data/auctions", auctions), "bids": ("data/bids", bids)}
    first, final = _run(spark, tmp_path, "nexmark_q4.flow", inputs, _upsert_table)
    expected_first = _closing_averages(auctions[:FIRST_RUN], bids[:FIRST_RUN])
    assert _table(first, Q4_COLUMNS) == expected_first
    expected = _closing_averages(auctions, bids)
    assert _table(final, Q4_COLUMNS) == expected
    assert expected[(Decimal(11), Decimal("80.0"))] and not expected_first.keys() <= expected.keys()
    _assert_readme("nexmark_q4.flow", _table(final, Q4_COLUMNS), Q4_COLUMNS)
