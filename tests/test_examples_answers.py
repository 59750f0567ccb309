"""The examples' answers, on Spark, against answers computed independently in Python.

Each test copies an example unchanged, writes input files for it, runs it with
``--available-now`` semantics and reads what its file sinks wrote. (Examples that only
write to the console run on their shipped data, with their exchanges checked, in
test_examples_shipped.py.)
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

import flowc
from flowc.runtime.run import run_job
from tests.helpers.files import read_json_dir

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
    """``flowc run`` of the example (its generated program alone: in
    test_every_generated_program_runs)."""
    job = flowc.compile(copy.read_text(encoding="utf-8"), str(copy), for_spark=True)
    report = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
    for query in report.queries:
        assert query.error is None, (query.name, query.error)
        assert query.exchanges_executed == query.exchanges_planned, query


#: Generated programs run one after another in one Python process, each as ``python job.py
#: --available-now --master local[2]`` runs it (its ``main``), each on a new SparkContext
#: (the one before stopped) in the same JVM: a JVM of its own for each would be most of
#: this test's time. Prints each program's exit code, as JSON, last.
PROGRAMS_IN_ONE_JVM = r"""
import json, runpy, sys, traceback
from pyspark.sql import SparkSession
codes = []
for path in json.loads(sys.argv[1]):
    try:
        program = runpy.run_path(path, run_name="flowc_generated_program")
        codes.append(program["main"](["--available-now", "--master", "local[2]"]))
    except BaseException:
        traceback.print_exc()
        codes.append(None)
    finally:
        session = SparkSession.getActiveSession()
        if session is not None:
            session.stop()
    print("ran", path, "exit code", codes[-1], file=sys.stderr, flush=True)
print(json.dumps(codes))
"""


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


def test_every_generated_program_runs(spark: Any, tmp_path: Path) -> None:
    """The --emit pyspark program of each example without a file sink, and of the examples
    answered above, exits 0 (the other examples with file sinks are run elsewhere, against
    answers computed in Python; a generated program alone against an answer: test_run.py's
    test_generated_program_alone_writes_the_answer)."""
    import subprocess
    import sys

    from stages import EXAMPLES

    from flowc.spark.codegen import generate_pyspark
    from tests.helpers.example_inputs import generate_inputs

    programs = []
    for example in EXAMPLES:
        folder = tmp_path / example.stem
        folder.mkdir()
        copy = folder / example.name
        shutil.copy(example, copy)
        for module in example.parent.glob("*.py"):  # Python functions beside the examples
            shutil.copy(module, folder)
        job = flowc.compile(copy.read_text(encoding="utf-8"), str(copy), for_spark=True)
        if example.name not in ANSWERED and any(s.connector == "files" for s in job.program.sinks):
            answered = SHIPPED_ANSWERS | BATCH_ANSWERS | UPDATING_ANSWERS | OVER_ANSWERS
            assert example.stem in answered, example.name
            continue
        generate_inputs(job, folder)
        program = folder / "job.py"
        program.write_text(generate_pyspark(job), encoding="utf-8")
        programs.append(str(program))
    assert programs
    result = subprocess.run(
        [sys.executable, "-c", PROGRAMS_IN_ONE_JVM, json.dumps(programs)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    codes = json.loads(result.stdout.strip().splitlines()[-1])
    failed = [p for p, code in zip(programs, codes, strict=True) if code != 0]
    assert not failed, (failed, result.stderr[-3000:])


#: The examples with file sinks whose answers are checked above (with flowc run); their
#: generated programs run (to exit code 0) with the others, in one JVM.
ANSWERED = {"clicks_per_user.flow", "orders_payments_join.flow", "payments_routing.flow"}
#: Issue 13's examples are answered on their shipped data (test_examples_shipped.py).
SHIPPED_ANSWERS = {
    "nexmark_bid_stats",
    "partitioned_bids",
    "bid_enrichment",
    "top_bids",
    "auctions",
    "bid_fees",
    "auction_totals",
    "sql_top_categories",
    "clicks_by_arrival",
}
#: Issue 28's batch-mode CDC example, answered on its shipped data against plain Python
#: (test_batch_without_streaming_rules.py::test_cdc_example_runs_with_flowc_run_batch).
BATCH_ANSWERS = {"customers_per_country"}
#: Issue 28's updating pipelines, answered on their shipped data in both modes: the streaming
#: CDC example (test_updating_pipelines.py::test_the_streaming_cdc_example_on_its_shipped_data)
#: and Nexmark q4 (test_nexmark_q4.py::test_the_q4_example_on_its_shipped_data).
UPDATING_ANSWERS = {"customers_per_country_streaming", "nexmark_q4"}
#: Issue 28's Nexmark q6 (an OVER window, Flink's integer AVG), answered on its shipped data
#: in both modes (test_over_windows.py::test_the_nexmark_q6_example_on_its_shipped_data).
OVER_ANSWERS = {"nexmark_q6"}


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
    """Both sinks against the datagen rows computed here (docs/language.md: a pure function
    of seed, row number and column), not one sink against the other."""
    copy = tmp_path / "exchanges.flow"
    shutil.copy(ROOT / "examples" / "exchanges.flow", copy)
    run_with(copy, {"a.connector": "memory", "b.connector": "memory"})
    # one micro-batch of rows_per_second = 100 rows; k in [0, 1000], v in [0, 1000] (defaults)
    events = [(datagen_number(row, 0) % 1001, datagen_number(row, 1) % 1001) for row in range(100)]
    doubled = sorted((k, v * 2) for k, v in events)
    everything = sorted((r["k"], r["v"]) for r in spark.sql("SELECT * FROM b").collect())
    assert everything == doubled  # GLOBAL: every row to b
    filtered = sorted((r["k"], r["v"]) for r in spark.sql("SELECT * FROM a").collect())
    assert filtered == [(k, v) for k, v in doubled if v > 10]


_MASK = (1 << 64) - 1
_PRIME1, _PRIME2, _PRIME3 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
_PRIME4, _PRIME5 = 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5


def _rotate(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (64 - bits))) & _MASK


def _mix(value: int) -> int:
    value = ((value ^ (value >> 33)) * _PRIME2) & _MASK
    value = ((value ^ (value >> 29)) * _PRIME3) & _MASK
    return value ^ (value >> 32)


def _hash_int(value: int, seed: int) -> int:
    mixed = (seed + _PRIME5 + 4) & _MASK
    mixed ^= ((value & 0xFFFFFFFF) * _PRIME1) & _MASK
    return _mix((_rotate(mixed, 23) * _PRIME2 + _PRIME3) & _MASK)


def _hash_long(value: int, seed: int) -> int:
    mixed = (seed + _PRIME5 + 8) & _MASK
    mixed ^= (_rotate((value * _PRIME2) & _MASK, 31) * _PRIME1) & _MASK
    return _mix((_rotate(mixed, 27) * _PRIME1 + _PRIME4) & _MASK)


def datagen_number(row: int, column: int, seed: int = 0) -> int:
    """abs(xxhash64(seed, row, column)): Spark's XxHash64 (seed 42, an INT, a BIGINT and an
    INT argument) written out, the number a datagen column is drawn from."""
    hashed = _hash_int(column, _hash_long(row, _hash_int(seed, 42)))
    return abs(hashed - (1 << 64) if hashed >= 1 << 63 else hashed)
