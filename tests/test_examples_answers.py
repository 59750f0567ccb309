"""The examples' answers, on Spark, against answers computed independently in Python.

Each test copies an example unchanged, writes input files for it, runs it with
``--available-now`` semantics and reads what its file sinks wrote. (Examples that only
write to the console are run, with their exchanges checked, in test_examples_run.py.)
"""

from __future__ import annotations

import io
import json
import random
import re
import shutil
from collections import Counter, defaultdict
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from stages import ROOT
from test_run import read_json_dir

import flowc
from flowc.runtime.run import run_job

START = datetime(2026, 3, 1, 9, 0, 0)


def prepare(example: str, tmp_path: Path, inputs: dict[str, list[dict[str, Any]]]) -> Path:
    copy = tmp_path / example
    shutil.copy(ROOT / "examples" / example, copy)
    for folder, rows in inputs.items():
        target = tmp_path / folder
        target.mkdir(parents=True, exist_ok=True)
        (target / "part.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return copy


def run(copy: Path) -> None:
    job = flowc.compile(copy.read_text(encoding="utf-8"), str(copy), for_spark=True)
    report = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
    for query in report.queries:
        assert query.error is None, (query.name, query.error)
        assert query.exchanges_executed == query.exchanges_planned, query


def read_parquet(spark: Any, path: Path) -> list[dict[str, Any]]:
    return [row.asDict() for row in spark.read.parquet(str(path)).collect()]


def test_clicks_per_user_counts_closed_windows(spark: Any, tmp_path: Path) -> None:
    rng = random.Random(3)
    clicks = []
    for _ in range(200):
        ts = START + timedelta(seconds=rng.randint(0, 600))
        url = rng.choice([None, "A.html", "b.html", "C.HTML"])
        clicks.append({"user_id": f"u{rng.randint(1, 4)}", "url": url, "ts": ts.isoformat()})
    copy = prepare("clicks_per_user.flow", tmp_path, {"data/clicks": clicks})
    run(copy)
    kept = [c for c in clicks if c["url"] is not None]
    watermark = max(datetime.fromisoformat(c["ts"]) for c in kept) - timedelta(seconds=5)
    windows: dict[tuple[str, datetime], list[str]] = defaultdict(list)
    for c in kept:
        start = datetime.fromisoformat(c["ts"]).replace(second=0)
        windows[(c["user_id"], start)].append(c["url"].lower())
    expected = {
        (user, start, len(urls), len(set(urls)))
        for (user, start), urls in windows.items()
        if start + timedelta(minutes=1) <= watermark  # appended once the watermark passes
    }
    rows = read_parquet(spark, tmp_path / "out" / "per_user")
    got = {
        (r["user_id"], r["window_start"].replace(tzinfo=None), r["clicks"], r["pages"])
        for r in rows
    }
    assert expected and got == expected


def test_orders_payments_join_within_an_hour(spark: Any, tmp_path: Path) -> None:
    rng = random.Random(5)
    orders, payments = [], []
    for order_id in range(1, 41):
        order_ts = START + timedelta(minutes=rng.randint(0, 300))
        orders.append(
            {
                "order_id": order_id,
                "customer": f"c{order_id % 5}",
                "total": order_id * 1.5,
                "order_ts": order_ts.isoformat(),
            }
        )
        for _ in range(rng.randint(0, 2)):
            pay_ts = order_ts + timedelta(minutes=rng.randint(-20, 90))
            payments.append(
                {
                    "order_id": order_id,
                    "paid": round(rng.uniform(1, 50), 2),
                    "pay_ts": pay_ts.isoformat(),
                }
            )
    copy = prepare(
        "orders_payments_join.flow", tmp_path, {"data/orders": orders, "data/payments": payments}
    )
    run(copy)
    expected = Counter()
    for o in orders:
        low = datetime.fromisoformat(o["order_ts"])
        for p in payments:
            pay_ts = datetime.fromisoformat(p["pay_ts"])
            if p["order_id"] == o["order_id"] and low <= pay_ts <= low + timedelta(hours=1):
                expected[(o["order_id"], o["customer"], o["total"], p["paid"], pay_ts)] += 1
    rows = read_parquet(spark, tmp_path / "out" / "paid")
    got = Counter(
        (r["order_id"], r["customer"], r["total"], r["paid"], r["pay_ts"].replace(tzinfo=None))
        for r in rows
    )
    assert expected and got == expected


def test_payments_routing_routes_the_union(spark: Any, tmp_path: Path) -> None:
    rng = random.Random(9)

    def rows(first: int, count: int) -> list[dict[str, Any]]:
        out = []
        for i in range(first, first + count):
            amount = rng.choice([None, round(rng.uniform(0, 20000), 2)])
            account = rng.choice([None, "acc-1", "acc-2"]) if i % 3 else "acc-3"
            out.append(
                {
                    "id": i,
                    "account": account,
                    "amount": amount,
                    "ts": (START + timedelta(seconds=i)).isoformat(),
                }
            )
        return out

    payments, refunds = rows(1, 60), rows(1000, 20)
    copy = prepare(
        "payments_routing.flow",
        tmp_path,
        {"data/account_payments": payments, "data/refunds": refunds},
    )
    run(copy)
    both = payments + refunds
    invalid = [r for r in both if r["amount"] is None or r["account"] is None]
    large = [r for r in both if r not in invalid and r["amount"] > 10000]
    got = read_json_dir(tmp_path / "out" / "suspicious")
    assert large and sorted(r["id"] for r in got) == sorted(r["id"] for r in large)
    assert {r["reason"] for r in got} == {"large"}


def test_generated_programs_match_flowc_run(spark: Any, tmp_path: Path) -> None:
    """Each example's --emit pyspark program, run with python in its own JVM, exits 0; for
    the examples with file sinks it writes exactly what flowc run wrote."""
    import subprocess
    import sys

    from stages import EXAMPLES
    from test_examples_run import generate_inputs

    from flowc.codegen import generate_pyspark

    for example in EXAMPLES:
        runs = {}
        for side in ("flowc", "python"):
            folder = tmp_path / example.stem / side
            folder.mkdir(parents=True)
            copy = folder / example.name
            shutil.copy(example, copy)
            job = flowc.compile(copy.read_text(encoding="utf-8"), str(copy), for_spark=True)
            generate_inputs(job, folder)
            runs[side] = (folder, job)
        folder, job = runs["flowc"]
        run_job(job, available_now=True, master="local[2]", out=io.StringIO())
        folder, job = runs["python"]
        program = folder / "job.py"
        program.write_text(generate_pyspark(job), encoding="utf-8")
        result = subprocess.run(
            [sys.executable, str(program), "--available-now", "--master", "local[2]"],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert result.returncode == 0, (example.name, result.stderr[-3000:])
        for sink in job.program.sinks:
            options = dict(sink.options)
            if sink.connector != "files":
                continue
            path = str(options["path"])
            fmt = str(options["format"])
            written = {
                side: sorted(
                    json.dumps(r.asDict(), default=str, sort_keys=True)
                    for r in spark.read.format(fmt).load(str(runs[side][0] / path)).collect()
                )
                for side in runs
            }
            assert written["flowc"] == written["python"], (example.name, sink.name)


def run_with(copy: Path, overrides: dict[str, str]) -> None:
    """Run an example with --set style option overrides (its console sinks made readable)."""
    job = flowc.compile(
        copy.read_text(encoding="utf-8"), str(copy), for_spark=True, option_overrides=overrides
    )
    report = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
    for query in report.queries:
        assert query.error is None, (query.name, query.error)
        assert query.exchanges_executed == query.exchanges_planned, query


def test_wordcount_counts_every_word(spark: Any, tmp_path: Path) -> None:
    lines = ["To be, or not to be", "that is the question", "", "TO BE!"]
    copy = tmp_path / "wordcount.flow"
    shutil.copy(ROOT / "examples" / "wordcount.flow", copy)
    (tmp_path / "data" / "lines").mkdir(parents=True)
    (tmp_path / "data" / "lines" / "l.txt").write_text("\n".join(lines) + "\n")
    run_with(copy, {"counts.connector": "memory", "counts.mode": "complete"})
    expected = Counter(w for line in lines for w in re.split(r"\W+", line.lower()) if w)
    got = {r["word"]: r["n"] for r in spark.sql("SELECT * FROM counts").collect()}
    assert got == dict(expected)


def test_sql_view_windows_per_auction(spark: Any, tmp_path: Path) -> None:
    rng = random.Random(11)
    bids = [
        {
            "auction": rng.randint(1, 3),
            "bidder": i,
            "price": rng.randint(-5, 100),
            "date_time": (START + timedelta(seconds=rng.randint(0, 90))).isoformat(),
        }
        for i in range(80)
    ]
    copy = prepare("sql_view.flow", tmp_path, {"data/bids": bids})
    run_with(copy, {"hot.connector": "memory"})
    kept = [b for b in bids if b["price"] > 0]
    watermark = max(datetime.fromisoformat(b["date_time"]) for b in kept) - timedelta(seconds=4)
    windows: dict[tuple[int, datetime], list[int]] = defaultdict(list)
    for b in kept:
        ts = datetime.fromisoformat(b["date_time"])
        start = ts.replace(second=ts.second - ts.second % 10)
        windows[(b["auction"], start)].append(b["price"])
    expected = {
        (auction, start, len(prices), max(prices))
        for (auction, start), prices in windows.items()
        if start + timedelta(seconds=10) <= watermark
    }
    got = {
        (r["auction"], r["window_start"].replace(tzinfo=None), r["bids"], r["top"])
        for r in spark.sql("SELECT * FROM hot").collect()
    }
    assert expected and got == expected


def test_exchanges_example_sends_every_row_where_it_should(spark: Any, tmp_path: Path) -> None:
    copy = tmp_path / "exchanges.flow"
    shutil.copy(ROOT / "examples" / "exchanges.flow", copy)
    run_with(copy, {"a.connector": "memory", "b.connector": "memory"})
    everything = [(r["k"], r["v"]) for r in spark.sql("SELECT * FROM b").collect()]
    assert len(everything) == 100  # one micro-batch of 100 generated rows, all to b (GLOBAL)
    assert all(v % 2 == 0 for _, v in everything)  # the view doubles v
    filtered = sorted((r["k"], r["v"]) for r in spark.sql("SELECT * FROM a").collect())
    assert filtered == sorted(row for row in everything if row[1] > 10)
