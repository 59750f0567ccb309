"""``flowc run`` and ``--emit pyspark`` on a real local SparkSession (one per test session).

Inputs are real files the tests write; answers are computed independently in Python.
"""

from __future__ import annotations

import ast as python_ast
import io
import json
import os
import queue
import re
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from stages import EXAMPLES

import flowc
from flowc.runtime.run import ProgressDisplay, RunReport, count_exchanges, run_job
from flowc.spark.codegen import generate_pyspark
from tests.helpers.files import read_json_dir
from tests.helpers.progress import PROGRESS, FakeQuery


def write_json_lines(path: Path, rows: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def run(tmp_path: Path, program: str) -> RunReport:
    flow = tmp_path / "job.flow"
    flow.write_text(program, encoding="utf-8")
    job = flowc.compile(program, str(flow), for_spark=True)
    return run_job(job, available_now=True, master="local[2]", out=io.StringIO())


def assert_exchanges_as_planned(report: RunReport) -> None:
    for query in report.queries:
        assert query.error is None, query.error
        assert query.exchanges_executed == query.exchanges_planned, query


PAYMENTS = """
SET parallelism = 2;
CREATE SOURCE pay (user STRING, amount BIGINT)
  WITH (connector = 'files', path = 'in', format = 'json');
CREATE SINK big WITH (connector = 'files', path = 'out/big', format = 'json');
CREATE SINK totals WITH (connector = 'memory', mode = 'complete');
CREATE VIEW v AS FROM pay |> WHERE amount > 3 |> EXTEND amount * 2 AS doubled;
INSERT INTO big FROM v |> REBALANCE |> SELECT user, doubled WITH (parallelism = 3);
INSERT INTO totals
  FROM v |> KEY BY user |> AGGREGATE sum(amount) AS total, count(*) AS n
  WITH (max_parallelism = 16);
"""


def test_filter_map_rebalance_and_keyed_aggregate(spark: Any, tmp_path: Path) -> None:
    rows = [{"user": f"u{i % 3}", "amount": i} for i in range(20)]
    write_json_lines(tmp_path / "in" / "a.json", rows)
    report = run(tmp_path, PAYMENTS)
    assert_exchanges_as_planned(report)
    kept = [r for r in rows if r["amount"] > 3]
    written = read_json_dir(tmp_path / "out" / "big")
    assert sorted((r["user"], r["doubled"]) for r in written) == sorted(
        (r["user"], r["amount"] * 2) for r in kept
    )
    totals = {r["user"]: (r["total"], r["n"]) for r in spark.sql("SELECT * FROM totals").collect()}
    expected: dict[str, tuple[int, int]] = {}
    for r in kept:
        total, n = expected.get(r["user"], (0, 0))
        expected[r["user"]] = (total + r["amount"], n + 1)
    assert totals == expected


def test_restart_from_checkpoint_processes_each_row_once(spark: Any, tmp_path: Path) -> None:
    first = [{"user": "a", "amount": i} for i in range(10, 20)]
    write_json_lines(tmp_path / "in" / "1.json", first)
    run(tmp_path, PAYMENTS)
    second = [{"user": "b", "amount": i} for i in range(30, 35)]
    write_json_lines(tmp_path / "in" / "2.json", second)
    report = run(tmp_path, PAYMENTS)
    assert_exchanges_as_planned(report)
    written = Counter((r["user"], r["doubled"]) for r in read_json_dir(tmp_path / "out" / "big"))
    expected = Counter((r["user"], r["amount"] * 2) for r in first + second)
    assert written == expected  # nothing lost, nothing twice


RESCALE_FILES = """
CREATE SOURCE pay (user STRING, amount BIGINT)
  WITH (connector = 'files', path = 'in', format = 'json', parallelism = {up});
CREATE SINK copy
  WITH (connector = 'files', path = 'out/copy', format = 'json', parallelism = {down});
INSERT INTO copy FROM pay |> RESCALE |> SELECT user, amount WITH (parallelism = {down});
"""


@pytest.mark.parametrize(
    ("up", "down", "shuffles", "operator"),
    [(2, 2, 0, "Coalesce 2"), (2, 4, 1, "RoundRobinPartitioning(4)"), (4, 2, 0, "Coalesce 2")],
)
def test_rescale_runs_the_exchange_decided_for_it(
    spark: Any, tmp_path: Path, up: int, down: int, shuffles: int, operator: str
) -> None:
    """What Spark executes for a RESCALE edge, written here and not taken from the plan: no
    shuffle unless the consumers outnumber the producers (equal counts merge nothing)."""
    from flowc.runtime.run import load_program

    rows = [{"user": f"u{i}", "amount": i} for i in range(12)]
    write_json_lines(tmp_path / "in" / "a.json", rows)
    program_text = RESCALE_FILES.format(up=up, down=down)
    report = run(tmp_path, program_text)
    (query,) = report.queries
    assert query.error is None, query.error
    assert (query.exchanges_planned, query.exchanges_executed) == (shuffles, shuffles)
    assert sorted(r["amount"] for r in read_json_dir(tmp_path / "out" / "copy")) == list(range(12))
    # The executed plan itself, from a second start of the same program on fresh folders.
    again = tmp_path / "again"
    write_json_lines(again / "in" / "a.json", rows)
    job = flowc.compile(program_text, str(again / "job.flow"), for_spark=True)
    program = load_program(job)
    program.__dict__["BASE_DIR"] = str(again)
    (started,) = program.start_queries(spark, str(again / "checkpoints"), True)
    try:
        assert started.awaitTermination(300), "the available-now run did not finish in 300 s"
        executed = str(started._jsq.streamingQuery().lastExecution().executedPlan().toString())
    finally:
        started.stop()
    assert operator in executed, executed
    assert count_exchanges(executed) == shuffles, executed


NEXMARK_HEAD = """
SET parallelism = 2;
SET max_parallelism = 16;
CREATE SOURCE bids (auction BIGINT, bidder BIGINT, price BIGINT, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL 5 SECONDS)
  WITH (connector = 'files', path = 'bids', format = 'json', max_files_per_trigger = 1);
CREATE SOURCE auctions (id BIGINT, seller BIGINT, category BIGINT, opened TIMESTAMP,
  WATERMARK FOR opened AS opened - INTERVAL 5 SECONDS)
  WITH (connector = 'files', path = 'auctions', format = 'json', max_files_per_trigger = 1);
CREATE TABLE persons (pid BIGINT, city STRING)
  WITH (connector = 'files', path = 'persons', format = 'json');
"""
APPEND_SINK = "CREATE SINK out WITH (connector = 'noop');\n"
UPDATE_SINK = "CREATE SINK out WITH (connector = 'noop', mode = 'update');\n"
AUCTION_BIDS = """INSERT INTO out FROM auctions |> JOIN bids ON id = bids.auction
  AND ts BETWEEN opened AND opened + INTERVAL 1 MINUTE
"""

#: Nexmark's shapes, with the shuffles Spark runs for each (read from its executed plan).
SHUFFLE_CORPUS = [
    (  # q7: a window's maximum joined back to the bids it came from
        "window joined back to its input",
        APPEND_SINK
        + """CREATE VIEW maxes AS FROM bids |> KEY BY auction
  |> WINDOW TUMBLE(ts, INTERVAL 10 SECONDS) |> AGGREGATE max(price) AS maxprice;
INSERT INTO out FROM bids |> JOIN maxes ON bids.auction = maxes.auction AND price = maxprice
  AND ts BETWEEN window_start AND window_end |> SELECT bids.auction AS auction, price;""",
        3,
    ),
    (
        "cascading windows",
        APPEND_SINK
        + """CREATE VIEW per_auction AS FROM bids |> KEY BY auction
  |> WINDOW TUMBLE(ts, INTERVAL 10 SECONDS) |> AGGREGATE max(price) AS top;
INSERT INTO out FROM per_auction |> KEY BY auction
  |> WINDOW TUMBLE(window_end, INTERVAL 20 SECONDS) |> AGGREGATE max(top) AS best;""",
        2,
    ),
    (  # q9: the winning bid of each auction, the join's key partitioning reused
        "top-1 after a join on its key",
        UPDATE_SINK + AUCTION_BIDS + "  |> TOP 1 BY price DESC PER id;",
        2,
    ),
    (
        "top-1 after a join, the key renamed",
        UPDATE_SINK
        + AUCTION_BIDS
        + "  |> WHERE price > 0 |> SELECT id AS item, price |> TOP 1 BY price DESC PER item;",
        2,
    ),
    (
        "top-1 after a join and a dimension join",
        UPDATE_SINK
        + AUCTION_BIDS
        + "  |> JOIN persons ON bidder = pid |> TOP 1 BY price DESC PER id;",
        2,
    ),
    (
        "top-1 after a join, the key computed anew",
        UPDATE_SINK
        + AUCTION_BIDS
        + "  |> SELECT id + 1 AS id, price |> TOP 1 BY price DESC PER id;",
        3,
    ),
    (
        "windowed top-1 after a join: the window is a key",
        APPEND_SINK
        + AUCTION_BIDS
        + "  |> WINDOW TUMBLE(ts, INTERVAL 1 MINUTE) |> TOP 1 BY price DESC PER id;",
        3,
    ),
    (
        "aggregate after a join on a subset of its keys",
        UPDATE_SINK
        + """INSERT INTO out FROM auctions
  |> JOIN bids ON id = bids.auction AND seller = bids.bidder
  AND ts BETWEEN opened AND opened + INTERVAL 1 MINUTE |> KEY BY id |> AGGREGATE count(*) AS n;""",
        3,
    ),
    (
        "dimension join, then a window",
        APPEND_SINK
        + """INSERT INTO out FROM bids |> JOIN persons ON bidder = pid |> KEY BY bidder
  |> WINDOW TUMBLE(ts, INTERVAL 10 SECONDS) |> AGGREGATE count(*) AS n;""",
        1,
    ),
    (  # q5, hot items: the counts per window, their maximum joined back on the window
        "a cascading window joined back",
        APPEND_SINK
        + """CREATE VIEW counts AS FROM bids |> KEY BY auction
  |> WINDOW HOP(ts, INTERVAL 10 SECONDS, INTERVAL 2 SECONDS) |> AGGREGATE count(*) AS num;
CREATE VIEW maxes AS FROM counts |> KEY BY window_start, window_end
  |> AGGREGATE max(num) AS maxn;
INSERT INTO out FROM counts |> JOIN maxes ON counts.window_start = maxes.window_start
  AND counts.window_end = maxes.window_end AND num >= maxn
  |> SELECT counts.auction AS auction, num;""",
        3,
    ),
    (  # q5 as Nexmark's SQL writes it, the counts twice: Spark's ReusedExchange shares
        # their input shuffle
        "a cascading window joined back, the window written twice",
        APPEND_SINK
        + """CREATE VIEW counts AS FROM bids |> KEY BY auction
  |> WINDOW HOP(ts, INTERVAL 10 SECONDS, INTERVAL 2 SECONDS) |> AGGREGATE count(*) AS num;
CREATE VIEW again AS FROM bids |> KEY BY auction
  |> WINDOW HOP(ts, INTERVAL 10 SECONDS, INTERVAL 2 SECONDS) |> AGGREGATE count(*) AS n;
CREATE VIEW maxes AS FROM again |> KEY BY window_start, window_end
  |> AGGREGATE max(n) AS maxn;
INSERT INTO out FROM counts |> JOIN maxes ON counts.window_start = maxes.window_start
  AND counts.window_end = maxes.window_end AND num >= maxn
  |> SELECT counts.auction AS auction, num;""",
        3,
    ),
    (  # q5 in Spark SQL, its subqueries as Nexmark writes them
        "a cascading window joined back, in SQL",
        APPEND_SINK
        + """INSERT INTO out
SELECT AuctionBids.auction, AuctionBids.num
FROM (SELECT auction, count(*) AS num, window.start AS starttime, window.end AS endtime
      FROM bids GROUP BY auction, window(ts, '10 seconds', '2 seconds')) AS AuctionBids
JOIN (SELECT max(num) AS maxn, starttime, endtime
      FROM (SELECT count(*) AS num, window.start AS starttime, window.end AS endtime
            FROM bids GROUP BY auction, window(ts, '10 seconds', '2 seconds')) AS CountBids
      GROUP BY starttime, endtime) AS MaxBids
ON AuctionBids.starttime = MaxBids.starttime AND AuctionBids.endtime = MaxBids.endtime
  AND AuctionBids.num >= MaxBids.maxn;""",
        3,
    ),
    (  # the same windows but for their aggregate: exchanges Spark does not share
        "two windows of one stream, different aggregates, joined",
        APPEND_SINK
        + """CREATE VIEW counts AS FROM bids |> KEY BY auction
  |> WINDOW TUMBLE(ts, INTERVAL 10 SECONDS) |> AGGREGATE count(*) AS num;
CREATE VIEW tops AS FROM bids |> KEY BY auction
  |> WINDOW TUMBLE(ts, INTERVAL 10 SECONDS) |> AGGREGATE max(price) AS top;
INSERT INTO out FROM counts |> JOIN tops ON counts.auction = tops.auction
  AND counts.window_end = tops.window_end |> SELECT counts.auction AS auction, num, top;""",
        4,
    ),
    (  # Spark's CollapseGroupedSumOfCount would run it as one aggregation, one shuffle
        "a window's counts summed per window",
        APPEND_SINK
        + """CREATE VIEW counts AS FROM bids |> KEY BY auction
  |> WINDOW TUMBLE(ts, INTERVAL 10 SECONDS) |> AGGREGATE count(*) AS num;
INSERT INTO out FROM counts |> KEY BY window_start, window_end |> AGGREGATE sum(num) AS total;""",
        2,
    ),
    (
        "a window's counts, their maximum per window",
        APPEND_SINK
        + """CREATE VIEW counts AS FROM bids |> KEY BY auction
  |> WINDOW TUMBLE(ts, INTERVAL 10 SECONDS) |> AGGREGATE count(*) AS num;
INSERT INTO out FROM counts |> KEY BY window_end |> AGGREGATE max(num) AS maxn;""",
        2,
    ),
    (
        "deduplicate, then aggregate on the same key",
        UPDATE_SINK + "INSERT INTO out FROM bids |> DEDUPLICATE ON auction |> KEY BY auction\n"
        "  |> AGGREGATE count(*) AS n;",
        1,
    ),
]


@pytest.mark.parametrize(
    ("program", "shuffles"),
    [pytest.param(p, n, id=name) for name, p, n in SHUFFLE_CORPUS],
)
def test_planned_shuffles_are_the_ones_spark_runs(
    spark: Any, tmp_path: Path, program: str, shuffles: int
) -> None:
    """Spark's EnsureRequirements adds no exchange where a stateful operator's input is
    hash-partitioned on exactly its keys already (a TOP or aggregation after a join or a
    deduplication on the same key): the plan counts what Spark executes."""
    write_nexmark(tmp_path)
    report = run(tmp_path, NEXMARK_HEAD + program)
    (query,) = report.queries
    assert query.error is None, query.error
    assert (query.exchanges_planned, query.exchanges_executed) == (shuffles, shuffles)


def test_batch_plans_count_the_exchanges_adaptive_execution_reuses(
    spark: Any, tmp_path: Path
) -> None:
    """In batch mode AQE reuses the repeated window's input shuffle only when it runs the
    stages; its initial plan, which ``flowc run`` reads, shows all 4, and so does the plan."""
    (program,) = [p for name, p, _ in SHUFFLE_CORPUS if name.endswith("the window written twice")]
    write_nexmark(tmp_path)
    report = run(tmp_path, "SET execution.mode = 'batch';\n" + NEXMARK_HEAD + program)
    (query,) = report.queries
    assert query.error is None, query.error
    assert (query.exchanges_planned, query.exchanges_executed) == (4, 4)


def write_nexmark(tmp_path: Path) -> None:
    """Bids and auctions in three files of increasing modification time, and persons."""
    start = datetime(2026, 1, 1, 12, 0, 0)
    for index in range(3):
        at = start + timedelta(seconds=30 * index)
        bids = [
            {"auction": k % 5, "bidder": k, "price": 10 * index + k,
             "ts": (at + timedelta(seconds=k)).isoformat()}
            for k in range(10)
        ]  # fmt: skip
        opened = [
            {"id": k, "seller": k, "category": k % 2, "opened": at.isoformat()} for k in range(5)
        ]
        for folder, rows in (("bids", bids), ("auctions", opened)):
            path = tmp_path / folder / f"part-{index}.json"
            write_json_lines(path, rows)
            stamp = 1_700_000_000 + index * 10
            os.utime(path, (stamp, stamp))
    write_json_lines(tmp_path / "persons" / "p.json", [{"pid": k, "city": "c"} for k in range(10)])


SUM_OF_COUNTS = """
SET parallelism = 2;
SET max_parallelism = 16;
CREATE SOURCE bids (auction BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL 5 SECONDS)
  WITH (connector = 'files', path = 'bids', format = 'json', max_files_per_trigger = 1);
CREATE SINK out WITH (connector = 'files', path = 'out', format = 'json');
CREATE VIEW counts AS FROM bids |> KEY BY auction
  |> WINDOW TUMBLE(ts, INTERVAL 10 SECONDS) |> AGGREGATE count(*) AS num;
INSERT INTO out FROM counts |> KEY BY window_start, window_end
  |> AGGREGATE sum(num) AS total, max(auction) AS top_auction;
"""
#: Two runs (a restart between them) of micro-batches of bids, seconds after 12:00. The
#: second run's first micro-batch has rows behind the watermark (12:00:22) for their window.
SUM_OF_COUNTS_RUNS: list[list[list[tuple[int, int]]]] = [
    [[(1, 1), (2, 2), (1, 3), (2, 12)], [(1, 8), (1, 25)], [(3, 27), (1, 22)]],
    [[(2, 9), (2, 15), (3, 21), (4, 40)], [(4, 41), (5, 70)]],
]


def sums_of_counts_as_flink(runs: list[list[list[tuple[int, int]]]]) -> list[tuple[int, int, int]]:
    """Flink's cascade in plain Python: the window drops a row whose window ended at or
    before the watermark (the latest event time of the earlier micro-batches minus 5 s);
    a window's sum is written once the final watermark passes its end."""
    counts: Counter[tuple[int, int]] = Counter()
    latest: int | None = None
    for batch in (b for run in runs for b in run):
        watermark = None if latest is None else latest - 5
        for auction, second in batch:
            start = second - second % 10
            if watermark is None or start + 10 > watermark:
                counts[(start, auction)] += 1
        latest = max([second for _, second in batch] + ([] if latest is None else [latest]))
    assert latest is not None
    out: dict[int, tuple[int, int]] = {}
    for (start, auction), n in counts.items():
        if start + 10 <= latest - 5:
            total, top = out.get(start, (0, 0))
            out[start] = (total + n, max(top, auction))
    return sorted((start, total, top) for start, (total, top) in out.items())


def test_a_sum_of_counts_runs_as_two_aggregations_and_drops_late_rows(
    spark: Any, tmp_path: Path
) -> None:
    """count(*) per auction per window, then sum(num) and max(auction) per window: Spark
    4.3's CollapseGroupedSumOfCount would run it as one sum(1) over the bids (one shuffle,
    one stateful operator, not the plan's two); the generated program excludes it, so the
    plan's shuffles and stateful operators are Spark's, and the rows are Flink's across
    micro-batches and a restart, late rows dropped."""
    start = datetime(2026, 1, 1, 12, 0, 0)
    index = 0
    for run_batches in SUM_OF_COUNTS_RUNS:
        for batch in run_batches:
            path = tmp_path / "bids" / f"part-{index:03d}.json"
            rows = [
                {"auction": a, "ts": (start + timedelta(seconds=s)).isoformat()} for a, s in batch
            ]
            write_json_lines(path, rows)
            stamp = 1_700_000_000 + index * 10
            os.utime(path, (stamp, stamp))
            index += 1
        report = run(tmp_path, SUM_OF_COUNTS)
        (query,) = report.queries
        assert query.error is None, query.error
        assert (query.exchanges_planned, query.exchanges_executed) == (2, 2)
        assert len(query.state) == 2  # the window's and the sum's state, each its own line
    written = sorted(
        (
            int(datetime.fromisoformat(r["window_start"]).replace(tzinfo=None).timestamp()
                - start.timestamp()),
            r["total"],
            r["top_auction"],
        )
        for r in read_json_dir(tmp_path / "out")
    )  # fmt: skip
    expected = sums_of_counts_as_flink(SUM_OF_COUNTS_RUNS)
    assert expected == [(0, 4, 2), (10, 1, 2), (20, 4, 3), (40, 2, 4)]
    assert written == expected


def test_a_reused_exchange_is_no_shuffle() -> None:
    """Spark's executed plan for q5 with its counts written twice (abridged): the second
    input exchange is a ReusedExchange of the first, which runs no shuffle of its own."""
    plan = """WriteToDataSourceV2 MicroBatchWrite[epoch: 3, writer: NoopStreamingWrite]
+- StreamingSymmetricHashJoin [window_start#33, window_end#34-T5000ms], Inner
   :- Exchange hashpartitioning(window_start#33, window_end#34-T5000ms, 2), REQUIRED_BY_STATEFUL_OPERATOR
   :  +- StateStoreSave [auction#0L, window#32-T5000ms]
   :     +- Exchange hashpartitioning(auction#0L, window#32-T5000ms, 2), REQUIRED_BY_STATEFUL_OPERATOR, [plan_id=1391]
   +- StateStoreSave [window_start#43, window_end#44-T5000ms]
      +- Exchange hashpartitioning(window_start#43, window_end#44-T5000ms, 2), REQUIRED_BY_STATEFUL_OPERATOR
         +- StateStoreSave [auction#0L, window#32-T5000ms]
            +- ReusedExchange [auction#0L, window#32-T5000ms, count#70L], Exchange hashpartitioning(auction#0L, window#32-T5000ms, 2), REQUIRED_BY_STATEFUL_OPERATOR, [plan_id=1391]
"""  # noqa: E501
    assert count_exchanges(plan) == 3


def test_tumbling_window_counts(spark: Any, tmp_path: Path) -> None:
    start = datetime(2026, 1, 1, 12, 0, 0)
    rows = [
        {"user": f"u{i % 2}", "ts": (start + timedelta(seconds=17 * i)).isoformat()}
        for i in range(30)
    ]
    write_json_lines(tmp_path / "in" / "clicks.json", rows)
    report = run(
        tmp_path,
        """
        SET parallelism = 2;
        SET max_parallelism = 8;
        CREATE SOURCE clicks (user STRING, ts TIMESTAMP,
                              WATERMARK FOR ts AS ts - INTERVAL 5 SECONDS)
          WITH (connector = 'files', path = 'in', format = 'json');
        CREATE SINK per_minute WITH (connector = 'memory', mode = 'complete');
        INSERT INTO per_minute
          FROM clicks |> KEY BY user |> WINDOW TUMBLE(ts, INTERVAL 1 MINUTE)
          |> AGGREGATE count(*) AS clicks;
        """,
    )
    assert_exchanges_as_planned(report)
    got = {
        (r["user"], r["window_start"].replace(tzinfo=None), r["clicks"])
        for r in spark.sql("SELECT * FROM per_minute").collect()
    }
    expected = Counter((r["user"], datetime.fromisoformat(r["ts"]).replace(second=0)) for r in rows)
    assert got == {(user, minute, n) for (user, minute), n in expected.items()}


def test_route_and_union(spark: Any, tmp_path: Path) -> None:
    payments = [{"id": i, "amount": i * 100} for i in range(1, 9)]
    refunds = [{"id": 100 + i, "amount": -i} for i in range(3)]
    write_json_lines(tmp_path / "payments" / "p.json", payments)
    write_json_lines(tmp_path / "refunds" / "r.json", refunds)
    report = run(
        tmp_path,
        """
        SET parallelism = 2;
        CREATE SOURCE payments (id BIGINT, amount BIGINT)
          WITH (connector = 'files', path = 'payments', format = 'json');
        CREATE SOURCE refunds (id BIGINT, amount BIGINT)
          WITH (connector = 'files', path = 'refunds', format = 'json', parallelism = 1);
        CREATE SINK large WITH (connector = 'files', path = 'out/large', format = 'json');
        CREATE SINK rest WITH (connector = 'files', path = 'out/rest', format = 'json');
        CREATE VIEW checked AS FROM payments |> UNION ALL refunds
          |> ROUTE large WHEN amount > 500, negative WHEN amount < 0;
        INSERT INTO large FROM checked.large;
        INSERT INTO rest FROM checked;
        """,
    )
    assert_exchanges_as_planned(report)
    everything = payments + refunds
    large = sorted(r["id"] for r in read_json_dir(tmp_path / "out" / "large"))
    rest = sorted(r["id"] for r in read_json_dir(tmp_path / "out" / "rest"))
    assert large == sorted(r["id"] for r in everything if r["amount"] > 500)
    assert rest == sorted(r["id"] for r in everything if 0 <= r["amount"] <= 500)


def test_hostile_names_and_paths_are_quoted(spark: Any, tmp_path: Path) -> None:
    folder = 'in put\'s "dir"'
    write_json_lines(tmp_path / folder / "x.json", [{"we'ird\"col": 1}, {"we'ird\"col": 2}])
    report = run(
        tmp_path,
        """
        CREATE SOURCE `s'""rc` (`we'ird"col` BIGINT)
          WITH (connector = 'files', path = 'in put''s "dir"', format = 'json');
        CREATE SINK `o"); import os #`
          WITH (connector = 'files', path = 'out/x''y', format = 'json');
        INSERT INTO `o"); import os #` FROM `s'""rc` |> SELECT `we'ird"col` + 1 AS `new``name`;
        """,
    )
    assert_exchanges_as_planned(report)
    assert sorted(r["new`name"] for r in read_json_dir(tmp_path / "out" / "x'y")) == [2, 3]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_generates_a_program_that_compiles(path: Path) -> None:
    job = flowc.compile(path.read_text(encoding="utf-8"), f"examples/{path.name}")
    code = generate_pyspark(job)
    tree = python_ast.parse(code)
    imported = {
        (node.module or "").split(".")[0]
        for node in python_ast.walk(tree)
        if isinstance(node, python_ast.ImportFrom)
    } | {
        alias.name.split(".")[0]
        for node in python_ast.walk(tree)
        if isinstance(node, python_ast.Import)
        for alias in node.names
    }
    standard = {"__future__", "argparse", "os", "sys", "urllib", "pyspark"}
    # A job calling Python functions loads them (flowc.spark.generated_runtime.load_functions).
    loading = {"datetime", "decimal", "hashlib", "importlib", "sysconfig", "traceback"}
    # An upsert sink reads and writes its table's files (shutil, json; psycopg for postgres).
    # (a batch job's writer is a fresh uuid each run: query_identity)
    upserting = (
        {"json", "shutil", "uuid"} if any(s.mode == "update" for s in job.program.sinks) else set()
    )
    if any(s.connector == "postgres" for s in job.program.sinks):
        upserting.add("psycopg")
    # A batch files sink writes beside its output and swaps it in (replace_output).
    batch = job.program.settings.execution_mode == "batch"
    replacing = (
        {"shutil", "uuid"}
        if batch and any(s.connector == "files" for s in job.program.sinks)
        else set()
    )
    # An updating pipeline's processors (ChangelogOperator) keep each key group's state
    # pickled, and compare timestamps by their instant.
    updating = (
        {"pickle", "collections", "datetime"} if job.spark_plan.changelog_processors else set()
    )
    # A stateful processor's handleInputRows is typed with collections.abc's Iterator.
    processors = job.spark_plan.processors or job.spark_plan.over_aggregators
    typing_rows = {"collections"} if processors else set()
    allowed = (
        standard
        | (loading if job.program.functions else set())
        | upserting
        | replacing
        | updating
        | typing_rows
    )
    assert imported <= allowed
    assert "def main(" in code


def test_count_exchanges_reads_plan_trees() -> None:
    plan = (
        "*(2) HashAggregate(keys=[k#1])\n+- Exchange hashpartitioning(k#1, 2)\n"
        "   +- *(1) Project\n      +- Exchange RoundRobinPartitioning(3)\n"
        "         +- Coalesce 2\n"
    )
    assert count_exchanges(plan) == 2
    adaptive = (
        "AdaptiveSparkPlan isFinalPlan=true\n+- == Final Plan ==\n   ResultQueryStage 1\n"
        "   +- Exchange hashpartitioning(k#1, 2)\n+- == Initial Plan ==\n"
        "   Exchange hashpartitioning(k#1, 2)\n   +- Scan\n"
    )
    assert count_exchanges(adaptive) == 1


def test_missing_kafka_package_is_a_clear_error(spark: Any, tmp_path: Path) -> None:
    from flowc.spark.codegen import UnsupportedOnSpark

    program = """
    CREATE SOURCE k (value STRING) WITH (connector = 'kafka', topic = 't',
                                         bootstrap_servers = 'localhost:9092');
    CREATE SINK o WITH (connector = 'noop');
    INSERT INTO o FROM k;
    """
    with pytest.raises(UnsupportedOnSpark, match=r"spark\.jars\.packages=org\.apache\.spark"):
        run(tmp_path, program)
    assert not spark.streams.active


def test_generated_program_alone_writes_the_answer(tmp_path: Path) -> None:
    """The --emit pyspark program, run with python in its own JVM, writes the rows plain
    Python computes from the input (not what flowc run wrote: that is the same code)."""
    rows = [{"user": f"u{i % 4}", "amount": i} for i in range(30)]
    write_json_lines(tmp_path / "in" / "x.json", rows)
    job = flowc.compile(PAYMENTS, str(tmp_path / "job.flow"), for_spark=True)
    program = tmp_path / "job.py"
    program.write_text(generate_pyspark(job), encoding="utf-8")
    result = subprocess.run(
        [
            sys.executable,
            str(program),
            "--available-now",
            "--master",
            "local[2]",
            "--base-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    written = read_json_dir(tmp_path / "out" / "big")
    assert sorted((r["user"], r["doubled"]) for r in written) == sorted(
        (r["user"], r["amount"] * 2) for r in rows if r["amount"] > 3
    )


def free_port() -> int:
    """A loopback port nothing listens on now (the kernel's pick for port 0)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


# A Spark Connect server as ``--remote local`` starts one in-process, but on the port given:
# ``local`` would always take Spark's fixed 15002, which a parallel run may hold.
CONNECT_SERVER = """
import sys, time
from pyspark.sql import SparkSession

spark = (
    SparkSession.builder.master("local[2]")
    .config("spark.ui.enabled", "false")
    .config("spark.plugins", "org.apache.spark.sql.connect.SparkConnectPlugin")
    .config("spark.connect.grpc.binding.address", "127.0.0.1")
    .config("spark.connect.grpc.binding.port", sys.argv[1])
    .config("spark.sql.artifact.isolation.enabled", "true")
    .config("spark.sql.artifact.isolation.alwaysApplyClassloader", "true")
    .getOrCreate()
)
while True:
    time.sleep(60)
"""


@contextmanager
def spark_connect_server(log: Path, timeout: float = 300) -> Iterator[str]:
    """A local Spark Connect server on a free port, once it accepts connections: its URL.
    Its output goes to ``log`` (a pipe nobody reads could fill and stall it); the server is
    stopped on leaving, whatever happened."""
    port = free_port()
    with log.open("w", encoding="utf-8") as output:
        server = subprocess.Popen(
            [sys.executable, "-c", CONNECT_SERVER, str(port)],
            stdout=output,
            stderr=subprocess.STDOUT,
            text=True,
        )
    try:
        deadline = time.monotonic() + timeout
        while True:
            if server.poll() is not None:
                pytest.fail(f"the Connect server exited: {log.read_text()[-3000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"the Connect server did not listen on {port} within {timeout} s")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        server.terminate()  # the JVM exits when its Python driver's pipe closes
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=60)


def test_run_through_spark_connect(tmp_path: Path) -> None:
    """--remote: the same program through a Spark Connect server (a local one here)."""
    pytest.importorskip("grpc", reason="Spark Connect needs flowc[connect]")
    rows = [{"user": "u", "amount": i} for i in range(10)]
    write_json_lines(tmp_path / "in" / "x.json", rows)
    (tmp_path / "job.flow").write_text(PAYMENTS, encoding="utf-8")
    report = tmp_path / "report.json"
    with spark_connect_server(tmp_path / "connect-server.log") as url:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "flowc",
                "run",
                str(tmp_path / "job.flow"),
                "--available-now",
                "--remote",
                url,
                "--report",
                str(report),
            ],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(r["doubled"] for r in read_json_dir(tmp_path / "out" / "big")) == [
        2 * i for i in range(4, 10)
    ]
    queries = json.loads(report.read_text())["queries"]
    assert [q["error"] for q in queries] == [None, None]


STREAMING_FILES = """
SET parallelism = 2;
CREATE SOURCE pay (user STRING, amount BIGINT)
  WITH (connector = 'files', path = 'in', format = 'json', max_files_per_trigger = 1);
CREATE SINK copy WITH (connector = 'files', path = 'out/copy', format = 'json');
INSERT INTO copy FROM pay |> REBALANCE |> SELECT user, amount;
"""


def write_files(tmp_path: Path, count: int) -> list[dict[str, Any]]:
    everything = []
    for index in range(count):
        rows = [{"user": f"f{index}", "amount": index * 100 + i} for i in range(5)]
        write_json_lines(tmp_path / "in" / f"{index:03}.json", rows)
        everything += rows
    return everything


def wait_for_batch(query: Any, batch: int, timeout: float = 300) -> None:
    """Until the streaming query has finished micro-batch ``batch`` or a later one; a failure
    if it stops first or the deadline passes."""
    deadline = time.monotonic() + timeout
    while (query.lastProgress or {}).get("batchId", -1) < batch:
        if not query.isActive:
            pytest.fail(f"query {query.name} stopped before batch {batch}: {query.exception()}")
        if time.monotonic() > deadline:
            pytest.fail(f"query {query.name} did not reach batch {batch} within {timeout} s")
        time.sleep(0.2)


def test_stop_mid_stream_then_restart_loses_and_repeats_nothing(spark: Any, tmp_path: Path) -> None:
    from flowc.runtime.run import load_program

    everything = write_files(tmp_path, 6)
    flow = tmp_path / "job.flow"
    flow.write_text(STREAMING_FILES, encoding="utf-8")
    job = flowc.compile(STREAMING_FILES, str(flow), for_spark=True)
    program = load_program(job)
    program.__dict__["BASE_DIR"] = str(tmp_path)
    checkpoints = str(tmp_path / ".flowc-checkpoints")
    (query,) = program.start_queries(spark, checkpoints, False)  # one file per micro-batch
    try:
        wait_for_batch(query, 1)
    finally:
        query.stop()  # mid-stream: some files done, some not
    done_before = len(read_json_dir(tmp_path / "out" / "copy"))
    assert 0 < done_before < len(everything)
    report = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
    assert_exchanges_as_planned(report)
    written = Counter(
        json.dumps(r, sort_keys=True) for r in read_json_dir(tmp_path / "out" / "copy")
    )
    assert written == Counter(json.dumps(r, sort_keys=True) for r in everything)


#: Input files of the runs that are stopped by a signal: enough that a run stopped a batch
#: or two after batch 1 still has files it has not read (each micro-batch reads one).
SIGNALLED_FILES = 12
BATCH_LINE = re.compile(r"^\[copy\] batch (\d+):")


@dataclass(slots=True)
class FlowcRun:
    """A ``flowc run`` process and its standard error, read line by line by a thread;
    ``spawned``: the processes it had started (its JVM), found before it is signalled."""

    process: subprocess.Popen[str]
    command: list[str]
    lines: queue.Queue[str | None]
    read: list[str]
    spawned: list[int]

    def error_text(self, timeout: float = 120) -> str:
        """Everything it wrote to standard error, once it has exited."""
        self.process.wait(timeout=timeout)
        while (line := self.lines.get(timeout=timeout)) is not None:
            self.read.append(line)
        return "".join(self.read)


@contextmanager
def flowc_run_past_batch(tmp_path: Path, batch: int, timeout: float = 300) -> Iterator[FlowcRun]:
    """A streaming ``flowc run`` of STREAMING_FILES, once it reports micro-batch ``batch`` or a
    later one (the progress display can skip batches). A failure if it exits first or the
    deadline passes; the process is killed on leaving, whatever happened."""
    flow = tmp_path / "job.flow"
    flow.write_text(STREAMING_FILES, encoding="utf-8")
    command = [sys.executable, "-m", "flowc", "run", str(flow), "--master", "local[2]"]
    process = subprocess.Popen(
        command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    run = FlowcRun(process, command, lines, [], [])
    try:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                pytest.fail(f"no batch {batch} within {timeout} s: {''.join(run.read)[-3000:]}")
            try:
                line = lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                pytest.fail(f"flowc run exited before batch {batch}: {''.join(run.read)[-3000:]}")
            run.read.append(line)
            reported = BATCH_LINE.match(line)
            if reported is not None and int(reported[1]) >= batch:
                break
        run.spawned.extend(descendants(process.pid))
        yield run
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=60)


def descendants(pid: int) -> list[int]:
    """The processes ``pid`` started, and theirs (Linux's /proc/PID/task/TID/children)."""
    found: list[int] = []
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        with suppress(OSError):
            for child in map(int, children.read_text().split()):
                found += [child, *descendants(child)]
    return found


def wait_until_gone(pids: list[int], timeout: float = 120) -> None:
    """Until none of ``pids`` runs (a JVM left by a killed ``flowc run`` ends once its
    standard input closes): the rerun after it must not share its checkpoint with it."""
    deadline = time.monotonic() + timeout
    while alive := [p for p in pids if Path(f"/proc/{p}").exists() and not zombie(p)]:
        assert time.monotonic() < deadline, f"processes {alive} still run after {timeout} s"
        time.sleep(0.1)


def zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return False


def assert_input_was_left(tmp_path: Path, everything: list[dict[str, Any]]) -> None:
    """After the signalled process has exited, some input is still unwritten: so it was when
    the signal came (the output only grows), and the rerun has real work to finish."""
    written = len(read_json_dir(tmp_path / "out" / "copy"))
    assert written < len(everything), "every row was written before the signal: nothing tested"


def assert_rerun_completes_exactly_once(
    tmp_path: Path, signalled: FlowcRun, everything: list[dict[str, Any]]
) -> None:
    """The rerun, on the signalled run's checkpoint once its JVM has gone, runs on the
    shared session (the run a rerun starts is flowc run's own: run_job)."""
    wait_until_gone(signalled.spawned)
    rerun = run(tmp_path, STREAMING_FILES)
    assert [q.error for q in rerun.queries] == [None], rerun
    written = Counter(
        json.dumps(r, sort_keys=True) for r in read_json_dir(tmp_path / "out" / "copy")
    )
    assert written == Counter(json.dumps(r, sort_keys=True) for r in everything)


def test_ctrl_c_stops_cleanly_and_a_rerun_completes(spark: Any, tmp_path: Path) -> None:
    import signal

    everything = write_files(tmp_path, SIGNALLED_FILES)
    with flowc_run_past_batch(tmp_path, 1) as run:
        run.process.send_signal(signal.SIGINT)
        errors = run.error_text()
    assert run.process.returncode == 130, errors[-3000:]
    assert "Traceback" not in errors
    assert_input_was_left(tmp_path, everything)
    assert_rerun_completes_exactly_once(tmp_path, run, everything)


def test_plain_progress_lines_off_a_terminal() -> None:
    from flowc.runtime.run import ProgressDisplay

    out = io.StringIO()
    display = ProgressDisplay(out)
    display.update([FakeQuery("per_user", PROGRESS)])
    display.update([FakeQuery("per_user", PROGRESS)])  # same batch: no second line
    display.close()
    assert out.getvalue() == (
        "[per_user] batch 3: 40 rows in, 6 written, 12.5 in/s, 80.0 processed/s, 512 ms, "
        "watermark 2026-01-01T12:00:00.000Z, state rows 10\n"
    )


def test_a_first_batch_shows_no_placeholder_rate_or_watermark() -> None:
    """Spark's first micro-batch of a run has no input rate (its JSON leaves the NaN
    out) and a query whose event-time column saw no row yet says the epoch as its
    watermark: neither is shown as if it were a measure ('0.0 in/s', 1970)."""
    from flowc.runtime.run import ProgressDisplay

    first = {k: v for k, v in PROGRESS.items() if k != "inputRowsPerSecond"}
    first["eventTime"] = {"watermark": "1970-01-01T00:00:00.000Z"}
    out = io.StringIO()
    display = ProgressDisplay(out)
    display.update([FakeQuery("per_user", first)])
    display.update([FakeQuery("no_time", {**first, "batchId": 4, "eventTime": {}})])
    display.close()
    first_line, second_line = out.getvalue().splitlines()
    assert first_line == (
        "[per_user] batch 3: 40 rows in, 6 written, 80.0 processed/s, 512 ms, "
        "watermark none yet, state rows 10"
    )
    assert " in/s" not in second_line and "watermark -," in second_line


def test_a_zero_input_rate_beside_rows_read_is_no_rate() -> None:
    """Spark Classic's first micro-batch of a session measures its rate over an infinite
    time: 0.0 rows per second beside the 40 rows it read. A batch that read nothing did
    come in at 0.0 rows per second, and says so."""
    from flowc.runtime.run import ProgressDisplay

    out = io.StringIO()
    display = ProgressDisplay(out)
    display.update([FakeQuery("per_user", {**PROGRESS, "inputRowsPerSecond": 0.0})])
    idle = {**PROGRESS, "batchId": 4, "numInputRows": 0, "inputRowsPerSecond": 0.0}
    display.update([FakeQuery("per_user", idle)])
    display.close()
    read, empty = out.getvalue().splitlines()
    assert read.startswith("[per_user] batch 3: 40 rows in, 6 written, 80.0 processed/s"), read
    assert empty.startswith("[per_user] batch 4: 0 rows in, 6 written, 0.0 in/s, "), empty


def test_live_table_on_a_terminal() -> None:
    from flowc.runtime.run import ProgressDisplay

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Terminal()
    display = ProgressDisplay(out)
    display.update(
        [FakeQuery("per_user", PROGRESS), FakeQuery("totals", {**PROGRESS, "batchId": 9})]
    )
    display.close()
    shown = out.getvalue()
    assert "per_user" in shown and "totals" in shown
    assert "80.0" in shown and "512" in shown and "2026-01-0" in shown
    assert "[per_user] batch" not in shown  # the table, not the plain lines


def test_set_overrides_connector_options_as_if_written() -> None:
    job = flowc.compile(
        PAYMENTS, "job.flow", for_spark=True, option_overrides={"pay.path": "elsewhere/in"}
    )
    assert dict(job.program.source("pay").options)["path"] == "elsewhere/in"
    assert "'elsewhere/in'" in generate_pyspark(job)
    with pytest.raises(flowc.CompileError) as unknown:
        flowc.compile(PAYMENTS, "job.flow", option_overrides={"nope.path": "x"})
    assert [d.code for d in unknown.value.diagnostics] == ["E0411"]
    with pytest.raises(flowc.CompileError) as bad:
        flowc.compile(PAYMENTS, "job.flow", option_overrides={"pay.max_files_per_trigger": "0"})
    assert [d.code for d in bad.value.diagnostics] == ["E0405"]


def test_run_with_set_reads_the_overridden_path(spark: Any, tmp_path: Path) -> None:
    from flowc.cli.main import main

    write_json_lines(tmp_path / "other" / "x.json", [{"user": "z", "amount": 50}])
    (tmp_path / "job.flow").write_text(PAYMENTS, encoding="utf-8")
    code = main(
        [
            "run",
            str(tmp_path / "job.flow"),
            "--available-now",
            "--master",
            "local[2]",
            "--set",
            "pay.path=other",
            "--set",
            "parallelism=2",
        ]
    )
    assert code == 0
    assert [r["doubled"] for r in read_json_dir(tmp_path / "out" / "big")] == [100]


def test_explode_deduplicate_hop_and_session_windows(spark: Any, tmp_path: Path) -> None:
    from datetime import datetime, timedelta
    from itertools import pairwise

    start = datetime(2026, 5, 1, 8, 0, 0)
    offsets = [0, 10, 25, 70, 95, 100, 200, 215, 400, 410]
    events = [
        {
            "id": i % 7,
            "user": f"u{i % 2}",
            "words": ["a", "b"] if i % 3 else ["c"],
            "ts": (start + timedelta(seconds=s)).isoformat(),
        }
        for i, s in enumerate(offsets)
    ]
    write_json_lines(tmp_path / "events" / "e.json", events)
    (tmp_path / "csv").mkdir()
    (tmp_path / "csv" / "r.csv").write_text("name,score\nann,3\nbob,5\n", encoding="utf-8")
    report = run(
        tmp_path,
        """
        SET parallelism = 2;
        SET max_parallelism = 16;
        CREATE SOURCE events (id BIGINT, user STRING, words ARRAY<STRING>, ts TIMESTAMP,
                              WATERMARK FOR ts AS ts - INTERVAL 1 SECOND)
          WITH (connector = 'files', path = 'events', format = 'json');
        CREATE SOURCE scores (name STRING, score INT)
          WITH (connector = 'files', path = 'csv', format = 'csv', header = true);
        CREATE SINK words WITH (connector = 'memory', mode = 'complete');
        CREATE SINK unique WITH (connector = 'files', path = 'out/unique', format = 'json');
        CREATE SINK hops WITH (connector = 'memory', mode = 'complete');
        CREATE SINK sessions WITH (connector = 'memory', mode = 'complete');
        CREATE SINK doubled WITH (connector = 'files', path = 'out/doubled', format = 'json');
        INSERT INTO words FROM events |> EXPLODE words AS word |> KEY BY word
          |> AGGREGATE count(*) AS n;
        INSERT INTO unique FROM events |> DEDUPLICATE ON id
          |> SELECT id;
        INSERT INTO hops FROM events |> KEY BY user
          |> WINDOW HOP(ts, INTERVAL 2 MINUTES, INTERVAL 1 MINUTE) |> AGGREGATE count(*) AS n;
        INSERT INTO sessions FROM events |> KEY BY user
          |> WINDOW SESSION(ts, INTERVAL 30 SECONDS) |> AGGREGATE count(*) AS n;
        INSERT INTO doubled FROM scores |> SELECT name, score * 2 AS score;
        """,
    )
    assert_exchanges_as_planned(report)
    words = Counter(w for e in events for w in e["words"])
    assert {(r["word"], r["n"]) for r in spark.sql("SELECT * FROM words").collect()} == set(
        words.items()
    )
    assert sorted(r["id"] for r in read_json_dir(tmp_path / "out" / "unique")) == sorted(
        {e["id"] for e in events}
    )
    times = [(e["user"], datetime.fromisoformat(e["ts"])) for e in events]
    hops: Counter[tuple[str, datetime]] = Counter()
    for user, ts in times:
        minute = ts.replace(second=0)
        hops[(user, minute)] += 1
        hops[(user, minute - timedelta(minutes=1))] += 1
    got_hops = {
        (r["user"], r["window_start"].replace(tzinfo=None), r["n"])
        for r in spark.sql("SELECT * FROM hops").collect()
    }
    assert got_hops == {(u, w, n) for (u, w), n in hops.items()}
    sessions = set()
    for user in ("u0", "u1"):
        mine = sorted(ts for u, ts in times if u == user)
        first, count = mine[0], 1
        for previous, ts in pairwise(mine):
            # windows [t, t + gap) that touch merge, in Spark as in Flink's session windows
            if ts - previous > timedelta(seconds=30):
                sessions.add((user, first, count))
                first, count = ts, 0
            count += 1
        sessions.add((user, first, count))
    got_sessions = {
        (r["user"], r["window_start"].replace(tzinfo=None), r["n"])
        for r in spark.sql("SELECT * FROM sessions").collect()
    }
    assert got_sessions == sessions
    assert sorted((r["name"], r["score"]) for r in read_json_dir(tmp_path / "out" / "doubled")) == [
        ("ann", 6),
        ("bob", 10),
    ]


def test_socket_source_over_loopback(spark: Any, tmp_path: Path) -> None:
    from flowc.runtime.run import load_program

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    lines = [f"line {i}" for i in range(5)]

    def serve() -> None:
        connection, _ = server.accept()
        with connection:
            connection.sendall("".join(line + "\n" for line in lines).encode())
            time.sleep(20)

    threading.Thread(target=serve, daemon=True).start()
    program_text = f"""
    CREATE SOURCE lines (text STRING)
      WITH (connector = 'socket', host = '127.0.0.1', port = {port});
    CREATE SINK got WITH (connector = 'memory');
    INSERT INTO got FROM lines |> SELECT upper(text) AS text;
    """
    job = flowc.compile(program_text, str(tmp_path / "job.flow"), for_spark=True)
    program = load_program(job)
    program.__dict__["BASE_DIR"] = str(tmp_path)
    (query,) = program.start_queries(spark, str(tmp_path / "ck"), False)
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            if spark.sql("SELECT count(*) AS n FROM got").collect()[0]["n"] >= len(lines):
                break
            time.sleep(0.5)
    finally:
        query.stop()
        server.close()
    got = sorted(r["text"] for r in spark.sql("SELECT * FROM got").collect())
    assert got == sorted(line.upper() for line in lines)


def test_sigkill_mid_stream_then_rerun_writes_each_row_once(spark: Any, tmp_path: Path) -> None:
    """No clean stop at all: the process dies between micro-batches or inside one."""
    import signal

    everything = write_files(tmp_path, SIGNALLED_FILES)
    with flowc_run_past_batch(tmp_path, 2) as run:
        run.process.send_signal(signal.SIGKILL)
        run.process.wait(timeout=60)
    assert_input_was_left(tmp_path, everything)
    assert_rerun_completes_exactly_once(tmp_path, run, everything)


# Names and strings no generated program may mangle: a newline inside a quoted name,
# non-ASCII, quote characters of both kinds, and a string literal with
# escape sequences (Spark SQL's \n is a newline, \' a quote).
HOSTILE_PROGRAM = r"""
CREATE SOURCE `source
ünïcode` (`prix
net` BIGINT, `ünï` STRING)
  WITH (connector = 'files', path = 'données', format = 'json');
CREATE SINK `sortie"''` WITH (connector = 'files', path = 'out/é''"', format = 'json');
INSERT INTO `sortie"''` FROM `source
ünïcode`
  |> SELECT `prix
net` * 2 AS `double\nprix`, concat(`ünï`, '\n"\'') AS texte;
"""


def test_names_with_newlines_and_non_ascii_survive_code_generation(
    spark: Any, tmp_path: Path
) -> None:
    write_json_lines(tmp_path / "données" / "x.json", [{"prix\nnet": 4, "ünï": "é"}])
    report = run(tmp_path, HOSTILE_PROGRAM)
    assert_exchanges_as_planned(report)
    (row,) = read_json_dir(tmp_path / "out" / "é'\"")
    assert row == {"double\\nprix": 8, "texte": "é\n\"'"}


def test_a_query_spark_refuses_to_start_is_exit_1_not_a_crash(spark: Any, tmp_path: Path) -> None:
    """A memory sink cannot recover from a checkpoint: the second run (flowc run, in a
    process of its own) is Spark's refusal. The first, which leaves the checkpoint, runs on
    the shared session."""
    write_json_lines(tmp_path / "in" / "a.json", [{"user": "a", "amount": 1}])
    program = (
        "CREATE SOURCE pay (user STRING, amount BIGINT)\n"
        "  WITH (connector = 'files', path = 'in', format = 'json');\n"
        "CREATE SINK mem WITH (connector = 'memory');\n"
        "INSERT INTO mem FROM pay;\n"
    )
    first = run(tmp_path, program)
    assert [q.error for q in first.queries] == [None]
    command = [sys.executable, "-m", "flowc", "run", "job.flow", "--available-now"]
    second = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert second.returncode == 1, second.stderr[-2000:]
    assert "error[E0803]: Spark could not start query 'mem': " in second.stderr
    assert "Traceback" not in second.stderr and "internal error" not in second.stderr


def test_a_line_for_every_batch_even_when_several_finish_between_polls() -> None:
    """The plain display writes one line per micro-batch: two batches that finish between
    two polls are both shown (it once showed only the latest, so batch 0 could be missing)."""

    def progress(batch: int, rows: int) -> dict[str, Any]:
        return {"batchId": batch, "numInputRows": rows, "sink": {"numOutputRows": rows}}

    out = io.StringIO()
    display = ProgressDisplay(out)
    display.update([FakeQuery("q", progress(0, 5), progress(1, 0))])
    display.update([FakeQuery("q", progress(0, 5), progress(1, 0), progress(1, 0), progress(2, 7))])
    display.close()
    lines = out.getvalue().splitlines()
    assert [line.split(":")[0] for line in lines] == ["[q] batch 0", "[q] batch 1", "[q] batch 2"]
    assert lines[0].startswith("[q] batch 0: 5 rows in, 5 written")


def test_a_job_leaves_the_running_sessions_settings_as_they_were(
    spark: Any, tmp_path: Path
) -> None:
    """run_job runs in the session the process has (an embedding application's): the job's
    SET spark.* settings, shuffle partitions, state store and excluded optimizer rules are
    put back after the run, so a later job or query in that session does not take them
    (those Spark lets a session change: spark.app.name, say, stays the job's)."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.json").write_text('{"word": "x"}\n', encoding="utf-8")
    before = dict(spark.conf.getAll)
    spark.conf.set("spark.sql.streaming.fileSink.log.compactInterval", "7")
    report = run(
        tmp_path,
        "SET spark.sql.streaming.fileSink.log.compactInterval = 3;\n"
        "SET spark.sql.streaming.minBatchesToRetain = 5;\n"
        "SET state.backend.type = 'rocksdb';\n"
        "CREATE SOURCE lines (word STRING) WITH (connector = 'files', path = 'in', "
        "format = 'json');\n"
        "CREATE SINK out WITH (connector = 'files', path = 'out', format = 'json');\n"
        "INSERT INTO out FROM lines |> WHERE word <> '';\n",
    )
    assert [q.error for q in report.queries] == [None]
    assert read_json_dir(tmp_path / "out") == [{"word": "x"}]
    after = dict(spark.conf.getAll)
    spark.conf.set(
        "spark.sql.streaming.fileSink.log.compactInterval",
        before.get("spark.sql.streaming.fileSink.log.compactInterval", "10"),
    )
    assert after.pop("spark.sql.streaming.fileSink.log.compactInterval") == "7"
    before.pop("spark.sql.streaming.fileSink.log.compactInterval", None)
    modifiable = {k for k in before.keys() | after.keys() if spark.conf.isModifiable(k)}
    assert {k: after.get(k) for k in modifiable} == {k: before.get(k) for k in modifiable}
    assert "spark.sql.streaming.minBatchesToRetain" not in after
    assert after.get("spark.sql.optimizer.excludedRules") == before.get(
        "spark.sql.optimizer.excludedRules"
    )


def test_the_settings_put_back_are_the_sessions_own_not_another_active_ones(
    spark: Any, tmp_path: Path
) -> None:
    """The JVM's active session in this thread may be another one (a streaming query's
    clone of the session, with its internal settings): run_job puts back the settings of
    the session the job ran in, not that one's (seen: a clone's
    spark.sql.streaming.internal.stateStore.partitions put on the shared session made a
    later query keep another query's state partitions)."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.json").write_text('{"word": "x"}\n', encoding="utf-8")
    own = spark.conf.get("spark.sql.shuffle.partitions")
    other = spark.newSession()
    other.conf.set("spark.sql.shuffle.partitions", "7")
    other.conf.set("spark.sql.streaming.internal.stateStore.partitions", "7")
    jvm = spark.sparkContext._jvm
    jvm.org.apache.spark.sql.SparkSession.setActiveSession(other._jsparkSession)
    session_class = type(spark)
    active = session_class._activeSession
    session_class._activeSession = other  # as PySpark holds a query's clone, seen
    try:
        report = run(
            tmp_path,
            "CREATE SOURCE lines (word STRING) WITH (connector = 'files', path = 'in', "
            "format = 'json');\n"
            "CREATE SINK out WITH (connector = 'files', path = 'out', format = 'json');\n"
            "INSERT INTO out FROM lines |> WHERE word <> '';\n",
        )
    finally:
        session_class._activeSession = active
        jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
    assert [q.error for q in report.queries] == [None]
    assert spark.conf.get("spark.sql.shuffle.partitions") == own
    assert "spark.sql.streaming.internal.stateStore.partitions" not in dict(spark.conf.getAll)


def test_a_rescale_leaves_the_running_sessions_settings_as_they_were(
    spark: Any, tmp_path: Path
) -> None:
    """flowc rescale in a process with a session (an application's, a test's) puts its
    settings back as run_job does: the job's SET spark.* stayed on it (seen: test_rescale's
    compactInterval 3 made a later file sink on the shared session look for a
    2.compact its log did not have)."""
    from flowc.runtime.run import rescale_job

    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.json").write_text('{"k": "a"}\n{"k": "b"}\n', encoding="utf-8")
    program = (
        "SET spark.sql.streaming.fileSink.log.compactInterval = 3;\n"
        "SET state.backend.type = 'rocksdb';\n"
        "SET parallelism = {p};\n"
        "CREATE SOURCE s (k STRING) WITH (connector = 'files', path = 'in', format = 'json');\n"
        "CREATE SINK o WITH (connector = 'files', path = 'out', format = 'json');\n"
        "INSERT INTO o FROM s |> DEDUPLICATE ON k |> SELECT k;\n"
    )
    flow = tmp_path / "job.flow"
    report = run(tmp_path, program.format(p=2))
    assert [q.error for q in report.queries] == [None]
    before = dict(spark.conf.getAll)
    flow.write_text(program.format(p=1), encoding="utf-8")
    rescaled = rescale_job(
        flowc.compile(program.format(p=1), str(flow), for_spark=True),
        master="local[2]",
        out=io.StringIO(),
    )
    assert [r.query for r in rescaled] == ["o"]
    after = dict(spark.conf.getAll)
    modifiable = {k for k in before.keys() | after.keys() if spark.conf.isModifiable(k)}
    assert {k: after.get(k) for k in modifiable} == {k: before.get(k) for k in modifiable}
