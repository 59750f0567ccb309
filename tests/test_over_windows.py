"""OVER windows of a SQL SELECT on Spark (issue 28, item 2: Nexmark q6's form).

Flink's OverAggregate (docs/language.md, "OVER windows"): rows wait until the watermark
reaches their time, then each key's rows are taken in time order (ties in arrival order),
each with its calls over its frame; a RANGE frame's ties get one result; a row at or behind
the last time emitted for its key is late and dropped. flowc runs it streaming as a
transformWithState processor of its own, in batch as Spark's window functions. These tests
run real Spark over several micro-batches on one checkpoint (each ``availableNow`` run one
micro-batch of the file written before it; each run a restart) and compare the rows with
the frames computed in plain Python from their definition.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc.runtime.run import run_job
from flowc.spark.codegen import generate_pyspark
from tests.helpers.fake_state import Handle
from tests.helpers.files import read_json_dir
from tests.helpers.minute_events import Row, at, minutes, write_batch
from tests.helpers.over_frames import BATCHES, avg, emitted, normal, over_rows

# ---------------------------------------------------------------- Flink's rule, in Python


ROWS_CALLS: dict[str, Callable[[list[Row]], Any]] = {
    "a": avg,
    "n": len,
    "m": lambda f: max((r["price"] for r in f if r["price"] is not None), default=None),
}
RANGE_CALLS: dict[str, Callable[[list[Row]], Any]] = {
    "s": lambda f: (
        sum(r["price"] for r in f if r["price"] is not None)
        if any(r["price"] is not None for r in f)
        else None
    ),
    "lo": lambda f: min((r["price"] for r in f if r["price"] is not None), default=None),
    "c": lambda f: sum(1 for r in f if r["price"] is not None),
}


def lag_rows(per_key: dict[int, list[Row]]) -> list[Row]:
    """Each emitted row with Flink's LAG (its frame RANGE UNBOUNDED PRECEDING): every row of
    a time reads the row ``n`` before the last row of that time among its seller's emitted
    rows, NULL prices kept, the default (NULL unless given) before the first rows."""
    out = []
    for rows in per_key.values():
        for row in rows:
            last = max(i for i, r in enumerate(rows) if r["ts"] == row["ts"])

            def lag(n: int, default: Any, last: int = last, rows: list[Row] = rows) -> Any:
                return rows[last - n]["price"] if last >= n else default

            out.append({**row, "p1": lag(1, None), "p2": lag(2, -1), "p3": lag(3, None)})
    return out


JOB = """\
SET max_parallelism = 16;
{mode}CREATE SOURCE bids (seller INT, price INT, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL 1 MINUTE)
  WITH (connector = 'files', path = 'in', format = 'json');
CREATE SINK rows_out WITH (connector = 'files', path = 'out/rows', format = 'json');
CREATE SINK range_out WITH (connector = 'files', path = 'out/range', format = 'json');
CREATE SINK lag_out WITH (connector = 'files', path = 'out/lag', format = 'json');
INSERT INTO rows_out SELECT seller, price, ts,
  AVG(price) OVER (PARTITION BY seller ORDER BY ts ROWS BETWEEN 3 PRECEDING AND CURRENT ROW) AS a,
  COUNT(*) OVER (PARTITION BY seller ORDER BY ts ROWS BETWEEN 3 PRECEDING AND CURRENT ROW) AS n,
  MAX(price) OVER (PARTITION BY seller ORDER BY ts ROWS BETWEEN 3 PRECEDING AND CURRENT ROW) AS m
  FROM bids WHERE seller < 100;
INSERT INTO range_out SELECT seller, price, ts,
  SUM(price) OVER w1 AS s, MIN(price) OVER w1 AS lo, COUNT(price) OVER w1 AS c
  FROM bids;
INSERT INTO lag_out SELECT seller, price, ts,
  LAG(price) OVER (PARTITION BY seller ORDER BY ts) AS p1,
  LAG(price, 2, -1) OVER (PARTITION BY seller ORDER BY ts) AS p2,
  LAG(price, 3) OVER (PARTITION BY seller ORDER BY ts) AS p3
  FROM bids;
"""
RANGE_WINDOW = (
    "(PARTITION BY seller ORDER BY ts RANGE BETWEEN INTERVAL 3 MINUTES PRECEDING AND CURRENT ROW)"
)


def job_text(batch: bool = False) -> str:
    return JOB.format(mode="SET execution.mode = batch;\n" if batch else "").replace(
        "OVER w1", "OVER " + RANGE_WINDOW
    )


# No two rows of a seller share a time where the ROWS query reads them (seller < 100); the
# RANGE query's seller 100 has ties.
def test_over_runs_as_a_processor_the_plan_names() -> None:
    job = flowc.compile(job_text(), "over.flow", for_spark=True)
    assert not [d for d in job.diagnostics if d.severity is flowc.Severity.ERROR]
    overs = sorted(job.spark_plan.over_aggregators.values(), key=lambda o: o.line)
    assert [(o.keys, o.column, o.rows, o.preceding, o.streaming) for o in overs] == [
        (("seller",), "ts", True, 3, True),
        (("seller",), "ts", False, 180_000, True),
        (("seller",), "ts", False, -1, True),
    ]
    assert job.spark_plan.state_store.backend == "rocksdb"
    text = "\n".join(job.spark_plan.to_text())
    assert "over: line 9: OVER (PARTITION BY seller ORDER BY ts ROWS BETWEEN 3 PRECEDING" in text
    assert "transformWithState processor" in text
    program = generate_pyspark(job)
    assert "class OverAggregate(" in program and "= over_aggregate(" in program


def test_over_rows_equal_flinks_rule_across_micro_batches_and_restarts(
    spark: Any, tmp_path: Path
) -> None:
    """Five micro-batches, each its own run on the same checkpoints: ROWS and RANGE frames,
    late rows dropped (and rows behind the watermark kept where Flink keeps them), RANGE
    ties given one result, NULL skipped."""
    flow = tmp_path / "over.flow"
    flow.write_text(job_text(), encoding="utf-8")
    for index, batch in enumerate(BATCHES):
        write_batch(tmp_path / "in", index, batch)
        job = flowc.compile(job_text(), str(flow), for_spark=True)
        report = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
        assert [q.error for q in report.queries] == [None, None, None], index
    per_key = emitted(BATCHES, delay=1)
    small = {k: v for k, v in per_key.items() if k < 100}
    wanted_rows = over_rows(small, ROWS_CALLS, 3, None)
    wanted_range = over_rows(per_key, RANGE_CALLS, None, 3)
    prices = [r["price"] for r in wanted_range]
    assert 99 not in prices and 7 in prices and 9 in prices
    ties = {r["s"] for r in wanted_range if r["seller"] == 100 and minutes(r["ts"]) == 3}
    assert ties == {11}  # 1, 2 and 8 at 10:03, across two micro-batches: one result
    assert normal(read_json_dir(tmp_path / "out" / "rows")) == normal(wanted_rows)
    assert normal(read_json_dir(tmp_path / "out" / "range")) == normal(wanted_range)
    wanted_lag = lag_rows(per_key)
    tied = [(r["p1"], r["p2"]) for r in wanted_lag if r["seller"] == 100 and minutes(r["ts"]) == 6]
    assert tied == [(16, 4), (16, 4)]  # 1, 2, 8, 4, then 16 and 32: before the last of 10:06
    assert normal(read_json_dir(tmp_path / "out" / "lag")) == normal(wanted_lag)


def test_over_in_batch_mode_equals_the_frames(spark: Any, tmp_path: Path) -> None:
    """Batch mode runs Spark's window functions over the same frames: every row (none is
    late in one pass), RANGE ties one result; the rows streaming drops as late are left
    out of the input, so the result is the final rows of the stream run on them."""
    flow = tmp_path / "batch.flow"
    flow.write_text(job_text(batch=True), encoding="utf-8")
    accepted = {id(r) for rows in emitted(BATCHES, delay=1).values() for r in rows}
    late = [r for b in BATCHES for r in b if r["price"] in (99,)]
    assert late and not any(id(r) in accepted for r in late)
    kept = [[r for r in batch if r not in late] for batch in BATCHES]
    for index, batch in enumerate(kept):
        write_batch(tmp_path / "in", index, batch)
    job = flowc.compile(job_text(batch=True), str(flow), for_spark=True)
    assert all(not o.streaming for o in job.spark_plan.over_aggregators.values())
    assert "class OverAggregate(" in generate_pyspark(job)
    report = run_job(job, master="local[2]", out=io.StringIO())
    assert [q.error for q in report.queries] == [None, None, None]
    everything = [[r for batch in kept for r in batch]]
    per_key = emitted([*everything, [{"seller": 0, "price": 0, "ts": at(10_000)}]], delay=0)
    per_key = {k: v for k, v in per_key.items() if k != 0}
    small = {k: v for k, v in per_key.items() if k < 100}
    assert normal(read_json_dir(tmp_path / "out" / "rows")) == normal(
        over_rows(small, ROWS_CALLS, 3, None)
    )
    assert normal(read_json_dir(tmp_path / "out" / "range")) == normal(
        over_rows(per_key, RANGE_CALLS, None, 3)
    )
    # LAG equals the stream's rows where no two rows of a seller share a time (the order
    # of ties is Spark's in batch); a time's ties read one value
    lags = read_json_dir(tmp_path / "out" / "lag")
    assert normal([r for r in lags if r["seller"] < 100]) == normal(lag_rows(small))
    ties: dict[Any, set[tuple[Any, ...]]] = {}
    for r in lags:
        ties.setdefault((r["seller"], r["ts"]), set()).add((r.get("p1"), r.get("p2")))
    assert len(lags) == len([r for b in kept for r in b]) and all(
        len(v) == 1 for v in ties.values()
    )


@pytest.mark.parametrize("batch", [False, True], ids=["streaming", "batch"])
def test_a_missing_processor_package_is_refused_at_the_over_step(
    batch: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """E0816 at the first OVER step where the interpreter Spark's Python workers run lacks
    what the processor needs (it was a crash with only OVER processors); batch mode runs
    Spark's window functions and needs nothing."""
    from flowc.diagnostics import CompileError
    from flowc.runtime import run

    job = flowc.compile(job_text(batch=batch), "over.flow", for_spark=True)
    monkeypatch.setitem(run.PROCESSOR_PACKAGES, "flowc_no_such.module", "nosuch")
    if batch:
        run.check_processor_packages(job)
        return
    with pytest.raises(CompileError) as refused:
        run.check_processor_packages(job)
    (diagnostic,) = refused.value.diagnostics
    first = min(o.line for o in job.spark_plan.over_aggregators.values())
    assert diagnostic.code == "E0816" and diagnostic.span.line == first
    assert diagnostic.message.startswith("An OVER window runs as a Spark stateful processor")


def _processor(
    monkeypatch: pytest.MonkeyPatch, calls: list[Any], rows: bool, preceding: int
) -> Any:
    """The generated OverAggregate with in-memory state (the names the generated program
    imports from pyspark put where it reads them)."""
    from pyspark.sql import Row as SparkRow
    from pyspark.sql import types

    from flowc.spark import generated_runtime as runtime

    for name in ("StructType", "StructField", "LongType"):
        monkeypatch.setattr(runtime, name, getattr(types, name), raising=False)
    monkeypatch.setattr(runtime, "Row", SparkRow, raising=False)
    schema = types.StructType(
        [
            types.StructField("seller", types.IntegerType()),
            types.StructField("price", types.IntegerType()),
            types.StructField("ms", types.LongType()),
        ]
    )
    processor = runtime.OverAggregate(calls, "ms", "g", rows, preceding, schema)
    processor.init(Handle())
    return processor


def test_lag_in_the_processor_equals_what_flink_gave(monkeypatch: pytest.MonkeyPatch) -> None:
    """PyFlink 2.3's rows for 10, then 20 and 30 at one time, NULL, 50, 60 and 70 at one
    time, 80 (docs/language.md, "OVER windows"), fed over two watermarks; then one row per
    watermark, where the state keeps only the largest offset's last rows."""
    processor = _processor(
        monkeypatch, [("lag", "price", "p1", 1, None), ("lag", "price", "p2", 2, -1)], False, -1
    )
    rows = [(1, 10, 1), (1, 20, 2), (1, 30, 2), (1, None, 3), (1, 50, 4), (1, 60, 4)]
    rows += [(1, 70, 4), (1, 80, 9)]
    out = [*processor.emit(3, rows[:5]), *processor.emit(100, rows[5:])]
    assert [(r.p1, r.p2) for r in out] == [
        (None, -1),
        (20, 10),
        (20, 10),
        (30, 20),
        (60, 50),
        (60, 50),
        (60, 50),
        (70, 60),
    ]
    one_by_one = _processor(monkeypatch, [("lag", "price", "p3", 3, None)], False, -1)
    seen = [r.p3 for i in range(6) for r in one_by_one.emit(10 * (i + 1), [(2, i, i + 1)])]
    assert seen == [None, None, None, 0, 1, 2]


def test_a_rows_frame_of_three_keeps_three_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """ROWS BETWEEN 3 PRECEDING, one row per watermark: the frame grows to four rows (it
    stopped at two: the history was cut with a negative start while shorter than n)."""
    processor = _processor(monkeypatch, [("count", None, "n", 0, None)], True, 3)
    counts = [r.n for i in range(6) for r in processor.emit(10 * (i + 1), [(2, i, i + 1)])]
    assert counts == [1, 2, 3, 4, 4, 4]
