"""``execution.mode = batch`` on real Spark: every window, session and outer-join row is
written, as Flink's bounded execution gives; and in streaming mode, what a stopped run
still holds in state is said, not silently lost.

Answers are computed in plain Python from the same input files.
"""

from __future__ import annotations

import io
import json
from collections import Counter, defaultdict
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc.runtime.run import RunReport, run_job
from tests.helpers.files import write_batches

T0 = datetime(2026, 3, 1, 9, 0, 0)


def run(tmp_path: Path, program: str) -> RunReport:
    flow = tmp_path / "job.flow"
    flow.write_text(program, encoding="utf-8")
    job = flowc.compile(program, str(flow), for_spark=True)
    report = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
    for query in report.queries:
        assert query.error is None, query.error
    return report


def table(spark: Any, name: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(row) for row in spark.sql(f"SELECT * FROM `{name}`").collect())


def at(seconds: float) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat()


# A key's events every 25 seconds, with one gap of two minutes: several windows and
# sessions, the last of each open at the end of the input.
EVENTS = [
    [{"k": k, "ts": at(25 * i + 7 * k)} for k in (1, 2) for i in range(6)],
    [{"k": k, "ts": at(150 + 25 * i + 7 * k)} for k in (1, 2) for i in range(6)],
    [{"k": 3, "ts": at(400)}, {"k": 1, "ts": at(460)}],
]


def events() -> list[tuple[int, datetime]]:
    return [(r["k"], datetime.fromisoformat(r["ts"])) for batch in EVENTS for r in batch]


WINDOWS = """
SET parallelism = 2;
SET max_parallelism = 16;
SET execution.mode = {mode};
CREATE SOURCE s (k BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL 10 SECONDS)
  WITH (connector = 'files', path = 'in', format = 'json');
CREATE SINK o WITH (connector = 'memory');
INSERT INTO o FROM s |> KEY BY k |> WINDOW TUMBLE(ts, INTERVAL 1 MINUTE)
  |> AGGREGATE count(*) AS n;
"""


def expected_windows() -> list[tuple[Any, ...]]:
    counts: Counter[tuple[int, datetime]] = Counter()
    for k, ts in events():
        start = ts.replace(second=0, microsecond=0)
        counts[(k, start)] += 1
    return sorted((k, start, start + timedelta(minutes=1), n) for (k, start), n in counts.items())


def test_batch_mode_writes_every_tumbling_window(spark: Any, tmp_path: Path) -> None:
    write_batches(tmp_path / "in", EVENTS)
    report = run(tmp_path, WINDOWS.format(mode="batch"))
    assert table(spark, "o") == expected_windows()
    (query,) = report.queries
    assert query.rows_written == len(expected_windows())
    assert query.exchanges_executed == query.exchanges_planned


def test_streaming_run_says_which_windows_are_still_open(spark: Any, tmp_path: Path) -> None:
    """The same job in streaming mode: the last windows stay in state, and the run says
    how many rows are held and up to which event time results are complete."""
    write_batches(tmp_path / "in", EVENTS)
    report = run(tmp_path, WINDOWS.format(mode="streaming"))
    written = table(spark, "o")
    expected = expected_windows()
    assert set(written) < set(expected)  # the last windows are missing...
    (query,) = report.queries
    (held,) = query.state
    assert held.kind == "window"
    assert held.rows == len(expected) - len(written)  # ...and each is accounted for
    latest = max(ts for _, ts in events())
    watermark = latest - timedelta(seconds=10)
    assert held.watermark == watermark.strftime("%Y-%m-%d %H:%M:%S")
    assert f"windows ending after {held.watermark} are still open" in held.note
    document = json.dumps(report.to_json())
    assert f'"rows_in_state": {held.rows}' in document


SESSIONS = """
SET parallelism = 2;
SET max_parallelism = 16;
SET execution.mode = batch;
CREATE SOURCE s (k BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL 10 SECONDS)
  WITH (connector = 'files', path = 'in', format = 'json');
CREATE SINK o WITH (connector = 'memory');
INSERT INTO o FROM s |> KEY BY k |> WINDOW SESSION(ts, INTERVAL 30 SECONDS)
  |> AGGREGATE count(*) AS n;
"""


def expected_sessions(gap: timedelta) -> list[tuple[Any, ...]]:
    """A session goes on while the next event comes less than ``gap`` after the last;
    it ends ``gap`` after its last event (Spark's session_window, Flink's session gap)."""
    by_key: dict[int, list[datetime]] = defaultdict(list)
    for k, ts in events():
        by_key[k].append(ts)
    sessions = []
    for k, stamps in by_key.items():
        stamps.sort()
        start = last = stamps[0]
        n = 1
        for ts in stamps[1:]:
            if ts - last < gap:
                last, n = ts, n + 1
                continue
            sessions.append((k, start, last + gap, n))
            start = last = ts
            n = 1
        sessions.append((k, start, last + gap, n))
    return sorted(sessions)


def test_batch_mode_writes_every_session(spark: Any, tmp_path: Path) -> None:
    write_batches(tmp_path / "in", EVENTS)
    run(tmp_path, SESSIONS)
    assert table(spark, "o") == expected_sessions(timedelta(seconds=30))


LEFT_JOIN = """
SET parallelism = 2;
SET max_parallelism = 16;
SET execution.mode = batch;
CREATE SOURCE orders (order_id BIGINT, order_ts TIMESTAMP,
                      WATERMARK FOR order_ts AS order_ts - INTERVAL 10 SECONDS)
  WITH (connector = 'files', path = 'orders', format = 'json');
CREATE SOURCE payments (order_id BIGINT, paid BIGINT, pay_ts TIMESTAMP,
                        WATERMARK FOR pay_ts AS pay_ts - INTERVAL 10 SECONDS)
  WITH (connector = 'files', path = 'payments', format = 'json');
CREATE SINK o WITH (connector = 'memory');
INSERT INTO o
  FROM orders
  |> LEFT JOIN payments
       ON orders.order_id = payments.order_id
      AND pay_ts BETWEEN order_ts AND order_ts + INTERVAL 5 MINUTES
  |> SELECT orders.order_id, paid;
"""


def test_batch_mode_writes_every_unmatched_left_join_row(spark: Any, tmp_path: Path) -> None:
    orders = [
        [{"order_id": i, "order_ts": at(60 * i)} for i in range(b * 4, b * 4 + 4)] for b in range(3)
    ]
    # Orders 0..11: even ones paid within the bound, 3 paid too late, the rest never.
    payments = [
        [{"order_id": i, "paid": 100 + i, "pay_ts": at(60 * i + 30)} for i in range(0, 12, 2)],
        [{"order_id": 3, "paid": 999, "pay_ts": at(60 * 3 + 600)}],
    ]
    write_batches(tmp_path / "orders", orders)
    write_batches(tmp_path / "payments", payments)
    run(tmp_path, LEFT_JOIN)
    expected = []
    flat_payments = [p for batch in payments for p in batch]
    for order in (o for batch in orders for o in batch):
        ordered = datetime.fromisoformat(order["order_ts"])
        matches = [
            p["paid"]
            for p in flat_payments
            if p["order_id"] == order["order_id"]
            and ordered <= datetime.fromisoformat(p["pay_ts"]) <= ordered + timedelta(minutes=5)
        ]
        expected += [(order["order_id"], paid) for paid in matches] or [(order["order_id"], None)]
    assert table(spark, "o") == sorted(expected, key=lambda r: (r[0], r[1] is None, r[1]))


def test_batch_plans_say_blocking_and_batch() -> None:
    job = flowc.compile(WINDOWS.format(mode="batch"), "w.flow", for_spark=True)
    assert "blocking" in job.job_graph.to_text()
    assert job.spark_plan.batch
    assert "Spark realization (batch)" in job.physical_plan.to_text()


@pytest.mark.parametrize("connector", ["files", "noop", "console"])
def test_batch_mode_sinks(spark: Any, tmp_path: Path, connector: str, capsys: Any) -> None:
    write_batches(tmp_path / "in", EVENTS)
    options = {
        "files": "connector = 'files', path = 'out', format = 'json'",
        "noop": "connector = 'noop'",
        "console": "connector = 'console'",
    }[connector]
    program = WINDOWS.format(mode="batch").replace("connector = 'memory'", options)
    report = run(tmp_path, program)
    expected = expected_windows()
    assert report.queries[0].rows_written == len(expected)
    if connector == "files":
        rows = [
            json.loads(line)
            for part in sorted((tmp_path / "out").glob("part-*.json"))
            for line in part.read_text().splitlines()
        ]
        assert sorted((r["k"], r["n"]) for r in rows) == sorted((k, n) for k, _, _, n in expected)
    if connector == "console":
        printed = capsys.readouterr().out
        assert f"[o] {len(expected)} rows" in printed


def test_flowc_run_batch_flag(spark: Any, tmp_path: Path, capfd: Any) -> None:
    """``flowc run --batch`` is ``--set execution.mode=batch``: every window is written."""
    from flowc.cli.main import main

    write_batches(tmp_path / "in", EVENTS)
    flow = tmp_path / "job.flow"
    program = WINDOWS.format(mode="streaming").replace(
        "connector = 'memory'", "connector = 'files', path = 'out', format = 'json'"
    )
    flow.write_text(program, encoding="utf-8")
    assert main(["run", str(flow), "--batch", "--report", str(tmp_path / "r.json")]) == 0
    assert f"[o] batch: {len(expected_windows())} rows written" in capfd.readouterr().err
    rows = [
        json.loads(line)
        for part in sorted((tmp_path / "out").glob("part-*.json"))
        for line in part.read_text().splitlines()
    ]
    assert sorted((r["k"], r["n"]) for r in rows) == sorted(
        (k, n) for k, _, _, n in expected_windows()
    )
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["queries"][0]["rows_written"] == len(expected_windows())


ADAPTIVE = """
SET execution.mode = 'batch';
SET parallelism = 2;
SET chaining = false;
CREATE SOURCE s (value BIGINT) WITH (connector = 'datagen', number_of_rows = 10);
CREATE SINK o WITH (connector = 'console', parallelism = 3);
INSERT INTO o FROM s |> WHERE value > 0 |> SELECT value WITH (parallelism = 2) |> FORWARD
  |> WHERE value > 1;
"""


def test_batch_job_graph_says_minus_one_where_flink_decides_and_plans_the_bound() -> None:
    """Flink's adaptive batch JobGraph (docs/plans.md, "Batch mode"): the source and the
    first Filter set no parallelism (-1, planned at SET parallelism 2); the Map sets 2 and
    the Filter after an explicit FORWARD joins its forward group (2, not -1); the sink sets
    3. An unchained edge with no partition step between equal parallelisms ships RESCALE,
    the FORWARD stays FORWARD. The physical plan gives a -1 vertex the planned subtasks."""
    job = flowc.compile(ADAPTIVE, "a.flow")
    vertices = job.job_graph.topological()
    assert [v.name for v in vertices] == ["Source: s", "Filter", "Map", "Filter", "Sink: o"]
    assert [v.flink_parallelism for v in vertices] == [-1, -1, 2, 2, 3]
    assert [v.parallelism for v in vertices] == [2, 2, 2, 2, 3]
    edges = [(e.ship_strategy, e.distribution) for v in vertices for e in v.inputs]
    assert edges == [
        ("RESCALE", "POINTWISE"),
        ("RESCALE", "POINTWISE"),
        ("FORWARD", "POINTWISE"),
        ("REBALANCE", "ALL_TO_ALL"),
    ]
    nodes = json.loads(job.job_graph.to_json())["nodes"]
    source = next(n for n in nodes if n["name"].startswith("Source"))
    assert (source["parallelism"], source["planned_parallelism"]) == (-1, 2)
    assert "parallelism -1 (decided at run time; planned 2)" in job.job_graph.to_text()
    physical = [v.parallelism for v in job.physical_plan.vertices]
    assert sorted(physical) == [2, 2, 2, 2, 3]
    streaming = flowc.compile(ADAPTIVE.replace("'batch'", "'streaming'"), "a.flow")
    assert all(not v.adaptive for v in streaming.job_graph.vertices.values())
    assert {e.ship_strategy for e in streaming.job_graph.edges()} == {"FORWARD", "REBALANCE"}
