"""Every example runs, as a new user would run it, on the input data shipped beside it.

A fresh clone has ``examples/`` and ``examples/data/``, nothing else: each example is run
from a copy of that folder with ``--available-now`` semantics, reads the shipped files,
finishes with no failed query and shows flowc's progress lines. The answers of the
examples with file sinks are checked against the shipped data (the computations there
are tested at length in test_examples_answers.py; here the data itself is the subject:
realistic rows, invalid ones where an example routes them, event times spread over
minutes so windows close).

The examples whose sources are generated (``datagen``) need no data: under
``--available-now`` Spark reads what such a source offers when the query starts (one
micro-batch) and stops. A ``rate`` source offers only the rows already due, usually
none, so no example reads one (``sequence_shuffle.flow`` reads a bounded ``datagen``).
"""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import pytest
from stages import EXAMPLES, ROOT

import flowc
from flowc.runtime.run import run_job

SHIPPED = ROOT / "examples"


def _fresh_copy(tmp_path: Path) -> Path:
    """``examples/`` as a clone has it: without outputs or checkpoints of earlier runs."""
    target = tmp_path / "examples"
    shutil.copytree(
        SHIPPED, target, ignore=shutil.ignore_patterns("out", ".flowc-checkpoints", "errors")
    )
    return target


def _file_sources(job: flowc.CompiledJob) -> dict[str, str]:
    return {
        s.name: str(dict(s.options)["path"]) for s in job.program.sources if s.connector == "files"
    }


def _read_json_lines(folder: Path, pattern: str = "*.json") -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for part in sorted(folder.glob(pattern)):
        rows += [json.loads(line) for line in part.read_text(encoding="utf-8").splitlines()]
    return rows


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_every_files_source_has_shipped_data(example: Path) -> None:
    job = flowc.compile(example.read_text(encoding="utf-8"), str(example), for_spark=True)
    for name, path in _file_sources(job).items():
        folder = SHIPPED / path
        files = [f for f in folder.glob("*") if f.is_file() and not f.name.startswith(".")]
        assert files, f"{example.name}: source {name} reads {path}, which ships no data"
        for file in files:
            assert 0 < file.stat().st_size < 64 * 1024, f"{file}: keep sample data small"


# ---------------------------------------------------------------- answers from the data


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _parquet(spark: Any, folder: Path) -> list[dict[str, Any]]:
    return [row.asDict() for row in spark.read.parquet(str(folder)).collect()]


def _clicks_per_user(folder: Path, spark: Any) -> None:
    clicks = [c for c in _read_json_lines(folder / "data" / "clicks") if c["url"] is not None]
    assert len(clicks) < len(_read_json_lines(folder / "data" / "clicks")), "no click to drop"
    latest = max(_time(c["ts"]) for c in clicks)
    closed = latest - timedelta(seconds=5)  # the watermark after the last batch
    rows = _parquet(spark, folder / "out" / "per_user")
    expected: dict[tuple[str, datetime], int] = {}
    for click in clicks:
        at = _time(click["ts"])
        start = at.replace(second=0)
        if start + timedelta(minutes=1) <= closed:
            key = (click["user_id"], start)
            expected[key] = expected.get(key, 0) + 1
    assert len(expected) >= 10, "the data should close windows of several minutes"
    got = {(r["user_id"], r["window_start"]): r["clicks"] for r in rows}
    assert got == expected


def _orders_payments_join(folder: Path, spark: Any) -> None:
    orders = {o["order_id"]: o for o in _read_json_lines(folder / "data" / "orders")}
    payments = _read_json_lines(folder / "data" / "payments")
    expected = sorted(
        p["order_id"]
        for p in payments
        if p["order_id"] in orders
        and _time(orders[p["order_id"]]["order_ts"])
        <= _time(p["pay_ts"])
        <= _time(orders[p["order_id"]]["order_ts"]) + timedelta(hours=1)
    )
    assert len(orders) > len(expected) > 10  # some orders unpaid or paid too late
    rows = _parquet(spark, folder / "out" / "paid")
    assert sorted(r["order_id"] for r in rows) == expected


def _payments_routing(folder: Path, spark: Any) -> None:
    rows = _read_json_lines(folder / "data" / "account_payments") + _read_json_lines(
        folder / "data" / "refunds"
    )
    invalid = [r for r in rows if r["amount"] is None or r["account"] is None]
    large = sorted(r["id"] for r in rows if r not in invalid and r["amount"] > 10000)
    assert invalid and large, "the data should exercise both side outputs"
    written = _read_json_lines(folder / "out" / "suspicious", "part-*.json")
    assert sorted(r["id"] for r in written) == large
    assert {r["reason"] for r in written} == {"large"}


def _nexmark_bid_stats(folder: Path, spark: Any) -> None:
    events = _read_json_lines(folder / "data" / "nexmark_events")
    bids = [e["bid"] | {"ts": _time(e["date_time"])} for e in events if e["event_type"] == 2]
    assert len(bids) < len(events), "the data should hold events that are not bids"
    closed = max(b["ts"] for b in bids) - timedelta(seconds=4)  # the last watermark
    groups: dict[tuple[int, datetime], list[dict[str, Any]]] = {}
    for bid in bids:
        start = bid["ts"].replace(second=0)
        if start + timedelta(minutes=1) <= closed:
            groups.setdefault((bid["auction"], start), []).append(bid)
    expected = {
        key: (
            len(rows),
            sum(1 for b in rows if b["price"] < 10000),
            sum(1 for b in rows if 10000 <= b["price"] < 1000000),
            len({b["bidder"] for b in rows}),
            len({b["bidder"] for b in rows if b["price"] < 10000}),
            len({b["channel"] for b in rows}),
        )
        for key, rows in groups.items()
    }
    assert len(expected) >= 12, "the data should close windows of several minutes"
    got = {
        (r["auction"], _time(r["window_start"]).replace(tzinfo=None)): (
            r["total_bids"],
            r["rank1_bids"],
            r["rank2_bids"],
            r["total_bidders"],
            r["rank1_bidders"],
            r["channels"],
        )
        for r in _read_json_lines(folder / "out" / "bid_stats", "part-*.json")
    }
    assert got == expected


def _partitioned_bids(folder: Path, spark: Any) -> None:
    bids = _read_json_lines(folder / "data" / "bids")
    expected: dict[str, list[tuple[int, int, int]]] = {}
    for bid in bids:
        at = _time(bid["date_time"])
        path = f"dt={at:%Y-%m-%d}/hm={at:%H}%3A{at:%M}"
        expected.setdefault(path, []).append((bid["auction"], bid["bidder"], bid["price"]))
    assert len(expected) >= 3, "the data should span several minutes"
    out = folder / "out" / "bids_by_minute"
    got: dict[str, list[tuple[int, int, int]]] = {}
    for part in out.glob("dt=*/hm=*/part-*.json"):
        path = f"{part.parent.parent.name}/{part.parent.name}"
        for line in part.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            got.setdefault(path, []).append((row["auction"], row["bidder"], row["price"]))
    assert {k: sorted(v) for k, v in got.items()} == {k: sorted(v) for k, v in expected.items()}


def _bid_enrichment(folder: Path, spark: Any) -> None:
    auctions = {a["id"]: a for a in _read_json_lines(folder / "data" / "auctions")}
    persons = {p["id"]: p for p in _read_json_lines(folder / "data" / "persons")}
    bids = _read_json_lines(folder / "data" / "bids")
    expected = sorted(
        (
            b["auction"],
            b["bidder"],
            b["price"],
            auctions[b["auction"]]["item_name"],
            persons.get(auctions[b["auction"]]["seller"], {}).get("city"),
        )
        for b in bids
        if b["auction"] in auctions
    )
    assert len(bids) > len(expected), "some bids should have no auction in the table"
    assert any(row[4] is None for row in expected), "some sellers should be unknown"
    rows = _read_json_lines(folder / "out" / "enriched_bids", "part-*.json")
    got = [
        (r["auction"], r["bidder"], r["price"], r["item_name"], r.get("seller_city")) for r in rows
    ]
    assert sorted(got, key=repr) == sorted(expected, key=repr)


def _ranked_per_auction(rows: list[dict[str, Any]], n: int) -> list[tuple[int, dict[str, Any]]]:
    """TOP n BY price DESC PER auction in plain Python: (rank, bid), ties broken by the
    other columns in the same direction, as flowc breaks them."""
    out: list[tuple[int, dict[str, Any]]] = []
    for auction in {b["auction"] for b in rows}:
        bids = sorted(
            (b for b in rows if b["auction"] == auction),
            key=lambda b: (b["price"], b["bidder"], b["date_time"]),
            reverse=True,
        )
        out += list(enumerate(bids[:n], start=1))
    return out


def _top_bids(folder: Path, spark: Any) -> None:
    bids = _read_json_lines(folder / "data" / "bids")
    closed = max(_time(b["date_time"]) for b in bids) - timedelta(seconds=4)
    windows: dict[datetime, list[dict[str, Any]]] = {}
    for bid in bids:
        start = _time(bid["date_time"]).replace(second=0)
        if start + timedelta(minutes=1) <= closed:
            windows.setdefault(start, []).append(bid)
    assert len(windows) >= 2, "the data should close several windows"
    expected_top = sorted(
        (start, bid["auction"], rank, bid["price"])
        for start, rows in windows.items()
        for rank, bid in _ranked_per_auction(rows, 3)
    )
    got_top = sorted(
        (
            _time(r["window_start"]).replace(tzinfo=None),
            r["auction"],
            r["rank_in_auction"],
            r["price"],
        )
        for r in _read_json_lines(folder / "out" / "top_bids", "part-*.json")
    )
    assert got_top == expected_top
    expected_best = sorted(
        (start, max(rows, key=lambda b: b["price"])["price"]) for start, rows in windows.items()
    )
    got_best = sorted(
        (_time(r["window_start"]).replace(tzinfo=None), r["price"])
        for r in _read_json_lines(folder / "out" / "best_bid", "part-*.json")
    )
    assert got_best == expected_best


def _auctions(folder: Path, spark: Any) -> None:
    """Dimension joins, a cascading window and two Top-Ns, against plain Python."""
    auctions = {a["id"]: a for a in _read_json_lines(folder / "data" / "auctions")}
    persons = {p["id"]: p for p in _read_json_lines(folder / "data" / "persons")}
    bids = [
        b
        | {
            "ts": _time(b["date_time"]),
            "category": auctions[b["auction"]]["category"],
            "city": persons.get(auctions[b["auction"]]["seller"], {}).get("city"),
        }
        for b in _read_json_lines(folder / "data" / "bids")
        if b["auction"] in auctions
    ]
    closed = max(_time(b["date_time"]) for b in _read_json_lines(folder / "data" / "bids"))
    closed -= timedelta(seconds=4)
    minutes: dict[datetime, list[dict[str, Any]]] = {}
    for bid in bids:
        start = bid["ts"].replace(second=0)
        if start + timedelta(minutes=1) <= closed:
            minutes.setdefault(start, []).append(bid)
    assert len(minutes) >= 2, "the data should close several minutes"
    expected_hot = []
    for start, rows in minutes.items():
        per_category: dict[int, list[int]] = {}
        for bid in rows:
            per_category.setdefault(bid["category"], []).append(bid["price"])
        count, category = max((len(p), c) for c, p in per_category.items())
        expected_hot.append((start, category, count, max(per_category[category])))
    got_hot = sorted(
        (_time(r["window_start"]).replace(tzinfo=None), r["category"], r["bids"], r["top_price"])
        for r in _read_json_lines(folder / "out" / "hot_categories", "part-*.json")
    )
    assert got_hot == sorted(expected_hot)
    expected_top = sorted(
        (start, bid["auction"], rank, bid["price"], bid["bidder"], bid["city"])
        for start, rows in minutes.items()
        for rank, bid in _ranked_per_auction(rows, 2)
    )
    got_top = sorted(
        (
            _time(r["window_start"]).replace(tzinfo=None),
            r["auction"],
            r["rank_in_auction"],
            r["price"],
            r["bidder"],
            r.get("seller_city"),
        )
        for r in _read_json_lines(folder / "out" / "top_bids_per_auction", "part-*.json")
    )
    assert got_top == expected_top
    assert any(row[5] is None for row in expected_top), "a seller missing from persons"


def _bid_fees(folder: Path, spark: Any) -> None:
    """Python functions: the band and the fee of each bid as pricing.py's rules say, written
    here again in plain Python, and the per-band minute totals of the closed windows."""

    def band(price: int) -> str:
        return "premium" if price >= 5000 else "standard" if price >= 2000 else "budget"

    def fee(price: int) -> Decimal:
        cents = max(Decimal(price) * Decimal("0.025"), Decimal(25))
        return cents.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)

    bids = _read_json_lines(folder / "data" / "bids")
    expected = sorted(
        (b["auction"], b["bidder"], b["price"], band(b["price"]), fee(b["price"])) for b in bids
    )
    got = sorted(
        (r["auction"], r["bidder"], r["price"], r["band"], Decimal(str(r["fee"])))
        for r in _read_json_lines(folder / "out" / "bid_fees", "part-*.json")
    )
    assert got == expected
    assert {row[3] for row in expected} == {"premium", "standard", "budget"}
    closed = max(_time(b["date_time"]) for b in bids) - timedelta(seconds=4)
    totals: dict[tuple[str, datetime], tuple[int, Decimal]] = {}
    for bid in bids:
        start = _time(bid["date_time"]).replace(second=0)
        if start + timedelta(minutes=1) <= closed:
            key = (band(bid["price"]), start)
            count, fees = totals.get(key, (0, Decimal(0)))
            totals[key] = (count + 1, fees + fee(bid["price"]))
    got_totals = {
        (r["band"], _time(r["window_start"]).replace(tzinfo=None)): (
            r["bids"],
            Decimal(str(r["fees"])),
        )
        for r in _read_json_lines(folder / "out" / "bands_per_minute", "part-*.json")
    }
    assert got_totals == totals and len(totals) >= 4


def _auction_totals(folder: Path, spark: Any) -> None:
    """An upsert sink: the files table _current names holds one row per auction, its
    running aggregate over every bid."""
    table = folder / "out" / "auction_totals"
    current = json.loads((table / "_current").read_text(encoding="utf-8"))
    got = {
        row["auction"]: (row["bids"], row["top_price"], row["last_bid"])
        for row in _parquet(spark, table / current["version"])
    }
    expected: dict[int, tuple[int, int, datetime]] = {}
    for bid in _read_json_lines(folder / "data" / "bids"):
        count, top, last = expected.get(bid["auction"], (0, bid["price"], _time(bid["date_time"])))
        expected[bid["auction"]] = (
            count + 1,
            max(top, bid["price"]),
            max(last, _time(bid["date_time"])),
        )
    assert got == expected and len(expected) >= 3
    assert [p.name for p in table.iterdir() if p.name.startswith("v-")] == [current["version"]]


def _sql_top_categories(folder: Path, spark: Any) -> None:
    """CTEs, a FOR SYSTEM_TIME AS OF join and Flink's ROW_NUMBER() Top-N: the two categories
    with the most bids of each closed minute, ties broken as TOP breaks them (by the other
    columns, in the same direction)."""
    category = {a["id"]: a["category"] for a in _read_json_lines(folder / "data" / "auctions")}
    bids = _read_json_lines(folder / "data" / "bids")
    closed = max(_time(b["date_time"]) for b in bids) - timedelta(seconds=4)
    minutes: dict[tuple[datetime, int], list[int]] = {}
    for bid in bids:
        end = _time(bid["date_time"]).replace(second=0) + timedelta(minutes=1)
        if bid["auction"] in category and end <= closed:
            minutes.setdefault((end, category[bid["auction"]]), []).append(bid["price"])
    expected = []
    for end in sorted({end for end, _ in minutes}):
        rows = [(len(p), c, max(p)) for (e, c), p in minutes.items() if e == end]
        for place, (count, cat, top) in enumerate(sorted(rows, reverse=True)[:2], start=1):
            expected.append((end, cat, count, top, place))
    got = sorted(
        (
            _time(r["minute_end"]).replace(tzinfo=None),
            r["category"],
            r["bids"],
            r["top_price"],
            r["place"],
        )
        for r in _read_json_lines(folder / "out" / "top_categories", "part-*.json")
    )
    assert got == sorted(expected) and len({row[0] for row in expected}) >= 2


def _clicks_by_arrival(folder: Path, spark: Any) -> None:
    """Processing time: windows of arrival, so the counts per window are the machine's;
    per user they add up to the user's clicks, each window is one minute, and the last
    click is the latest event time of the user's clicks (one minute holds the whole run
    unless it crosses a minute's end)."""
    table = folder / "out" / "clicks_by_arrival"
    current = json.loads((table / "_current").read_text(encoding="utf-8"))
    rows = _read_json_lines(table / current["version"], "part-*.json")
    clicks = _read_json_lines(folder / "data" / "clicks")
    per_user: dict[str, int] = {}
    for click in clicks:
        per_user[click["user_id"]] = per_user.get(click["user_id"], 0) + 1
    got: dict[str, int] = {}
    for row in rows:
        got[row["user_id"]] = got.get(row["user_id"], 0) + row["clicks"]
        assert _time(row["window_end"]) - _time(row["window_start"]) == timedelta(minutes=1)
    assert got == per_user
    assert len({(r["user_id"], r["window_start"]) for r in rows}) == len(rows)  # one per key
    for user in per_user:
        latest = max(_time(c["ts"]) for c in clicks if c["user_id"] == user)
        mine = [r for r in rows if r["user_id"] == user]
        last = max(_time(r["last_click"]).replace(tzinfo=None) for r in mine)
        assert last == latest


ANSWERS = {
    "clicks_by_arrival": _clicks_by_arrival,
    "sql_top_categories": _sql_top_categories,
    "auction_totals": _auction_totals,
    "bid_fees": _bid_fees,
    "auctions": _auctions,
    "top_bids": _top_bids,
    "bid_enrichment": _bid_enrichment,
    "partitioned_bids": _partitioned_bids,
    "nexmark_bid_stats": _nexmark_bid_stats,
    "clicks_per_user": _clicks_per_user,
    "orders_payments_join": _orders_payments_join,
    "payments_routing": _payments_routing,
}


@pytest.mark.parametrize(
    ("example", "exchanges"),
    [(e, mode) for e in EXAMPLES for mode in ("minimal", "flink")],
    ids=lambda p: p.stem if isinstance(p, Path) else p,
)
def test_example_runs_on_its_shipped_data(
    example: Path, exchanges: str, tmp_path: Path, spark: Any
) -> None:
    """In both exchange modes (SET exchanges), Spark executes exactly the shuffles the plan
    promises, and SET exchanges = 'flink' (Flink's every exchange a shuffle) writes the same
    answer as the default, which runs no shuffle where Spark needs none."""
    folder = _fresh_copy(tmp_path)
    copy = folder / example.name
    job = flowc.compile(
        copy.read_text(encoding="utf-8"),
        str(copy),
        for_spark=True,
        overrides={"exchanges": exchanges},
    )
    out = io.StringIO()
    report = run_job(job, available_now=True, master="local[2]", out=out)
    assert report.queries, "no query ran"
    for query in report.queries:
        assert query.error is None, (query.name, query.error)
        assert query.exchanges_executed == query.exchanges_planned, query
        line = f"[{query.name}] batch: " if job.spark_plan.batch else f"[{query.name}] batch 0: "
        assert line in out.getvalue(), out.getvalue()
    if not job.spark_plan.batch:  # a batch job's rows read are not counted
        assert all(q.input_rows > 0 for q in report.queries), report.to_json()
    check = ANSWERS.get(example.stem)
    if check is not None:
        check(folder, spark)


# ---------------------------------------------------------------- as a new user runs it


def test_flowc_run_from_a_fresh_copy_shows_flowc_lines(tmp_path: Path) -> None:
    """``flowc run examples/sql_view.flow --available-now`` in a process of its own."""
    folder = _fresh_copy(tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "flowc", "run", "examples/sql_view.flow", "--available-now"],
        cwd=folder.parent,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "[hot] batch 0: " in result.stderr, result.stderr[-3000:]
    written = re.findall(r"\[hot\] batch \d+: \d+ rows in, (\d+) written", result.stderr)
    assert sum(map(int, written)) > 0, result.stderr[-3000:]  # windows closed and printed
    assert (folder / ".flowc-checkpoints").is_dir()  # beside the file, as the README says


def test_git_ignores_what_running_the_examples_writes() -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    paths = [
        "examples/out/per_user/part-0.parquet",
        "examples/.flowc-checkpoints/clicks_per_user/per_user/offsets/0",
        "examples/out/_flowc_sink.json",
        "spark-warehouse/x",
    ]
    result = subprocess.run(
        ["git", "check-ignore", "--no-index", *paths],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.stdout.split() == paths
    shipped = subprocess.run(
        ["git", "check-ignore", "--no-index", "examples/data/clicks/clicks-0900.json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert shipped.returncode == 1, "shipped data must not be ignored"
