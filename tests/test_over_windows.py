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
import itertools
import json
import math
import os
import re
import shutil
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc.cli.compile import render_stage
from flowc.runtime.run import run_job
from flowc.spark.codegen import generate_pyspark
from tests.helpers.fake_state import Handle
from tests.helpers.files import read_json_dir
from tests.helpers.minute_events import Row, at, minutes, write_batch
from tests.helpers.over_frames import BATCHES, avg, emitted, normal, over_rows
from tests.stages import STAGE_FORMATS

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
    rows; the default (NULL unless given) before the first rows and for a NULL price read."""
    out = []
    for rows in per_key.values():
        for row in rows:
            last = max(i for i, r in enumerate(rows) if r["ts"] == row["ts"])

            def lag(n: int, default: Any, last: int = last, rows: list[Row] = rows) -> Any:
                value = rows[last - n]["price"] if last >= n else None
                return default if value is None else value

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


PIPE_HEAD = """\
SET max_parallelism = 16;
CREATE SOURCE bids (seller INT, price INT, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL 1 MINUTE)
  WITH (connector = 'files', path = 'in', format = 'json');
CREATE SINK rows_out WITH (connector = 'files', path = 'out/rows', format = 'json');
"""
ROWS_WINDOW = "(PARTITION BY seller ORDER BY ts ROWS BETWEEN 3 PRECEDING AND CURRENT ROW)"
PIPE_CALLS = ", ".join(
    f"{call} OVER {ROWS_WINDOW} AS {name}"
    for call, name in (("AVG(price)", "a"), ("COUNT(*)", "n"), ("MAX(price)", "m"))
)
PIPE_JOB = (
    PIPE_HEAD + f"INSERT INTO rows_out FROM bids |> WHERE seller < 100 |> EXTEND {PIPE_CALLS};\n"
)
SQL_JOB = PIPE_HEAD + f"INSERT INTO rows_out SELECT *, {PIPE_CALLS} FROM bids WHERE seller < 100;\n"


def _stage_texts(text: str) -> dict[tuple[str, str], str]:
    """Every stage but the AST in every format, without line and column numbers."""
    job = flowc.compile(text, "over.flow", for_spark=True)
    assert not [d for d in job.diagnostics if d.severity is flowc.Severity.ERROR]
    return {
        (stage, fmt): re.sub(
            r'"(line|column|end_line|end_column)": \d+', "", render_stage(job, stage, fmt)
        )
        for stage, formats in STAGE_FORMATS.items()
        if stage != "ast"
        for fmt in formats
    }


@pytest.mark.parametrize("lag", [False, True], ids=["rows", "lag"])
def test_the_pipe_form_plans_as_the_sql_form(lag: bool) -> None:
    """``FROM s |> EXTEND call OVER (...) AS a, ...`` is the OVER step of ``SELECT *, call
    OVER (...) AS a, ... FROM s``: every stage equal (transformations to the PySpark
    program), and the OVER step's columns those of its input then the calls."""
    sql, pipe = SQL_JOB, PIPE_JOB
    if lag:
        calls = f"LAG(price) OVER {LAG_WINDOW} AS p1, LAG(price, 2, -1) OVER {LAG_WINDOW} AS p2"
        sql = PIPE_HEAD + f"INSERT INTO rows_out SELECT *, {calls} FROM bids;\n"
        pipe = PIPE_HEAD + f"INSERT INTO rows_out FROM bids |> EXTEND {calls};\n"
    assert _stage_texts(pipe) == _stage_texts(sql)
    job = flowc.compile(pipe, "over.flow", for_spark=True)
    (insert,) = job.program.inserts
    wanted = ["seller", "price", "ts", *(["p1", "p2"] if lag else ["a", "n", "m"])]
    assert [c.name for c in insert.stream.schema] == wanted
    assert "OverStep" in [type(s).__name__ for s in insert.stream.steps]


@pytest.mark.parametrize(
    ("items", "wanted"),
    [
        (f"*, AVG(price) OVER {ROWS_WINDOW} AS a", ["seller", "price", "ts", "a"]),
        (f"*, AVG(price) OVER {ROWS_WINDOW} + 1 AS b", ["seller", "price", "ts", "b"]),
        (
            f"*, MAX(price) OVER {ROWS_WINDOW} AS m, price + 1 AS b",
            ["seller", "price", "ts", "m", "b"],
        ),
        (f"COUNT(*) OVER {ROWS_WINDOW} AS n, *", ["n", "seller", "price", "ts"]),
    ],
)
def test_a_star_beside_over_calls_is_the_inputs_columns(items: str, wanted: list[str]) -> None:
    """A SQL SELECT's ``*`` beside OVER calls is the input's columns, not the calls' too
    (it was E0206 for a named call, and the hidden ``w0$o0`` written out beside ``b``)."""
    text = PIPE_HEAD.replace("'files', path = 'out/rows', format = 'json'", "'console'")
    job = flowc.compile(text + f"INSERT INTO rows_out SELECT {items} FROM bids;\n", "star.flow")
    (insert,) = job.program.inserts
    assert [c.name for c in insert.stream.schema] == wanted


LAG_WINDOW = "(PARTITION BY seller ORDER BY ts)"


def test_the_pipe_form_runs_as_flinks_rule_across_micro_batches_and_restarts(
    spark: Any, tmp_path: Path
) -> None:
    """The pipe form on Spark, five micro-batches each its own run on one checkpoint: the
    ROWS frames of the SQL form's test (late rows dropped, NULL skipped)."""
    flow = tmp_path / "pipe.flow"
    flow.write_text(PIPE_JOB, encoding="utf-8")
    for index, batch in enumerate(BATCHES):
        write_batch(tmp_path / "in", index, batch)
        job = flowc.compile(PIPE_JOB, str(flow), for_spark=True)
        report = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
        assert [q.error for q in report.queries] == [None], index
    small = {k: v for k, v in emitted(BATCHES, delay=1).items() if k < 100}
    wanted = over_rows(small, ROWS_CALLS, 3, None)
    assert normal(read_json_dir(tmp_path / "out" / "rows")) == normal(wanted)


def test_a_column_name_avro_refuses_is_kept_in_the_processors_state(
    spark: Any, tmp_path: Path
) -> None:
    """Spark encodes state rows with Avro, whose field names are identifiers: a column
    named `w0$o0` (Flink's own name for an unnamed OVER call) beside the OVER's input
    failed the query at its first micro-batch ("Illegal character in: w0$o0"). Three
    micro-batches, each a run on one checkpoint; the column holds no value (NULL)."""
    text = PIPE_JOB.replace("price INT, ts", "price INT, `w0$o0` INT, `unit price` INT, ts")
    flow = tmp_path / "pipe.flow"
    flow.write_text(text, encoding="utf-8")
    batches = BATCHES[:3]
    for index, batch in enumerate(batches):
        write_batch(tmp_path / "in", index, batch)
        job = flowc.compile(text, str(flow), for_spark=True)
        report = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
        assert [q.error for q in report.queries] == [None], (index, report.queries[0].error)
    small = {k: v for k, v in emitted(batches, delay=1).items() if k < 100}
    wanted = over_rows(small, ROWS_CALLS, 3, None)
    assert wanted and normal(read_json_dir(tmp_path / "out" / "rows")) == normal(wanted)


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
    # Flink's batch LAG is row by row (asked of Flink 2.3: 20 and 30 at one time read 10
    # and 20, where streaming both read 20): the stream's rows where no two rows of a
    # seller share a time; with ties, the rows of some order of each time's rows
    lags = read_json_dir(tmp_path / "out" / "lag")
    assert normal([r for r in lags if r["seller"] < 100]) == normal(lag_rows(small))
    tied = [r for r in lags if r["seller"] == 100]
    assert normal(tied) != normal(lag_rows({100: per_key[100]}))  # not the streaming rule
    assert _some_order_gives(tied, per_key[100])


def _row_lags(rows: list[Row]) -> list[Row]:
    """Flink's batch LAG over one seller's rows in the order given: the row ``n`` before;
    the default before the first rows and for a NULL read."""

    def lag(i: int, n: int, default: Any) -> Any:
        value = rows[i - n]["price"] if i >= n else None
        return default if value is None else value

    return [
        {**r, "p1": lag(i, 1, None), "p2": lag(i, 2, -1), "p3": lag(i, 3, None)}
        for i, r in enumerate(rows)
    ]


def _some_order_gives(out: list[Row], rows: list[Row]) -> bool:
    """Whether some order of each time's rows gives ``out`` (Spark's order of a time's rows
    is its sort's, as Flink's is its own: neither is fixed)."""
    ordered = sorted(rows, key=lambda r: minutes(r["ts"]))
    groups = [list(g) for _, g in itertools.groupby(ordered, key=lambda r: minutes(r["ts"]))]
    assert any(len(g) > 1 for g in groups)
    return any(
        normal(_row_lags([r for g in choice for r in g])) == normal(out)
        for choice in itertools.product(*(itertools.permutations(g) for g in groups))
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


LEAD_JOB = """\
SET max_parallelism = 16;
SET execution.mode = batch;
CREATE SOURCE bids (seller INT, price INT, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL 1 MINUTE)
  WITH (connector = 'files', path = 'in', format = 'json');
CREATE SINK lead_out WITH (connector = 'files', path = 'out/lead', format = 'json');
INSERT INTO lead_out SELECT seller, price, ts,
  LEAD(price) OVER (PARTITION BY seller ORDER BY ts) AS d1,
  LEAD(price, 2, -1) OVER (PARTITION BY seller ORDER BY ts) AS d2,
  LEAD(price, 3) OVER (PARTITION BY seller ORDER BY ts) AS d3,
  LAG(price, 1, -1) OVER (PARTITION BY seller ORDER BY ts) AS g1
  FROM bids;
"""


def _lead_batches() -> list[list[Row]]:
    """Two files, one time per row of a seller (Flink's batch order of a time's rows is its
    sort's, as Spark's is: not fixed), NULL prices where LEAD and LAG read them."""
    prices = {1: [10, None, 30, None, 50, 60, 70], 2: [5, 6, None], 3: [None]}
    rows = [
        {"seller": k, "price": p, "ts": at(i * 1.5 + k / 10)}
        for k, values in prices.items()
        for i, p in enumerate(values)
    ]
    return [rows[::2], rows[1::2]]


def _flink_lead_lag(rows: list[Row]) -> list[Row]:
    """Flink's batch LEAD and LAG (asked of PyFlink 2.3, parallelism 1): the row ``n``
    after (before) in time order; the default past the last (first) rows and for a NULL
    read (LAG(price, 1, -1) over 10, NULL, 30 gave -1, 10, -1), else NULL."""
    per_key: dict[int, list[Row]] = {}
    for row in sorted(rows, key=lambda r: r["ts"]):
        per_key.setdefault(row["seller"], []).append(row)
    out = []
    for ordered in per_key.values():
        for i, row in enumerate(ordered):

            def read(at: int, default: Any, ordered: list[Row] = ordered) -> Any:
                value = ordered[at]["price"] if 0 <= at < len(ordered) else None
                return default if value is None else value

            out.append(
                {
                    **row,
                    "d1": read(i + 1, None),
                    "d2": read(i + 2, -1),
                    "d3": read(i + 3, None),
                    "g1": read(i - 1, -1),
                }
            )
    return out


def test_lead_in_batch_mode_equals_flinks_batch_lead(spark: Any, tmp_path: Path) -> None:
    """Batch mode runs LEAD (Flink runs it in batch only; streaming it stays E0752): Spark's
    ``lead`` in time order, the default past the last rows and for a NULL read, as Flink's
    batch LEAD; LAG's default for a NULL read too."""
    batches = _lead_batches()
    flow = tmp_path / "lead.flow"
    flow.write_text(LEAD_JOB, encoding="utf-8")
    for index, batch in enumerate(batches):
        write_batch(tmp_path / "in", index, batch)
    job = flowc.compile(LEAD_JOB, str(flow), for_spark=True)
    report = run_job(job, master="local[2]", out=io.StringIO())
    assert [q.error for q in report.queries] == [None]
    wanted = _flink_lead_lag([r for b in batches for r in b])
    assert any(r["d2"] == -1 and r["seller"] == 1 for r in wanted[:4])  # a NULL read
    assert normal(read_json_dir(tmp_path / "out" / "lead")) == normal(wanted)
    with pytest.raises(flowc.CompileError) as refused:
        flowc.compile(LEAD_JOB.replace("SET execution.mode = batch;\n", ""), "s.flow")
    assert [d.code for d in refused.value.diagnostics] == ["E0752"]


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
    # 10, NULL, 30, NULL, 50, 60: LAG(price, 1, -1) gave -1, 10, -1, 30, -1, 50 and
    # LAG(price, 2, -1) -1, -1, 10, -1, 30, -1 (a NULL read is the default, streaming and
    # batch alike); LAG(price, 2) NULL, NULL, 10, NULL, 30, NULL
    defaults = _processor(
        monkeypatch,
        [
            ("lag", "price", "g1", 1, -1),
            ("lag", "price", "g2", 2, -1),
            ("lag", "price", "n", 2, None),
        ],
        False,
        -1,
    )
    prices = [10, None, 30, None, 50, 60]
    read = [
        (r.g1, r.g2, r.n)
        for i, p in enumerate(prices)
        for r in defaults.emit(10 * (i + 1), [(1, p, i)])
    ]
    assert read == [
        (-1, -1, None),
        (10, -1, None),
        (-1, 10, 10),
        (30, -1, None),
        (-1, 30, 30),
        (50, -1, None),
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


# ------------------------------------------ Flink's AVG of an integer (the Flink dialect)

FLINK_AVG_JOB = """\
SET max_parallelism = 16;
SET sql.dialect = 'flink';
{mode}CREATE SOURCE bids (seller INT, price INT, big BIGINT, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL '1' MINUTE)
  WITH (connector = 'files', path = 'in', format = 'json');
CREATE SINK avg_out WITH (connector = 'files', path = 'out/avg', format = 'json');
INSERT INTO avg_out SELECT seller, price, big, ts,
  AVG(price) OVER (PARTITION BY seller ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS a,
  AVG(big) OVER (PARTITION BY seller ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS b
  FROM bids;
"""
INT_MAX, BIG_MAX = 2**31 - 1, 2**63 - 1


def _signed(price: int | None, index: int) -> int | None:
    return None if price is None else price * (-1 if index % 2 else 1)


def _flink_avg_batches() -> list[list[Row]]:
    """BATCHES without ties on a seller's time (seller < 100), every other price negated,
    ``big`` past INT's range; seller 4's values near each type's largest, whose sums Flink
    wraps (asked of it: 5, -2, 2^31 - 1 gave -715827882)."""
    out: list[list[Row]] = []
    for b, batch in enumerate(BATCHES):
        rows: list[Row] = []
        for i, r in enumerate(batch):
            if r["seller"] >= 100:
                continue
            price = _signed(r["price"], b + i)
            rows.append({**r, "price": price, "big": None if price is None else price * 3**21})
        out.append(rows)
    extremes = [(5, 5), (-2, -2), (INT_MAX, BIG_MAX), (INT_MAX, BIG_MAX), (-7, -7)]
    for i, (price, big) in enumerate(extremes):
        out[min(i, 2)].append({"seller": 4, "price": price, "big": big, "ts": at(i * 0.5)})
    return out


def _java_average(frame: list[Row], column: str, bits: int, floor: bool = False) -> int | None:
    """Flink's AVG: the sum in a ``bits``-wide two's-complement integer (Java's
    arithmetic wraps), divided by the count truncating toward zero."""
    values = [r[column] for r in frame if r[column] is not None]
    if not values:
        return None
    total = sum(values) & ((1 << bits) - 1)
    if total >= 1 << (bits - 1):
        total -= 1 << bits
    return (math.floor if floor else math.trunc)(Fraction(total, len(values)))


FLINK_AVG_CALLS: dict[str, Callable[[list[Row]], Any]] = {
    "a": lambda f: _java_average(f, "price", 32),
    "b": lambda f: _java_average(f, "big", 64),
}


def test_flink_avg_of_integers_is_their_type_in_the_plan() -> None:
    """The Flink dialect's AVG of an INT is an INT, of a BIGINT a BIGINT (Flink 2.3's
    types), the processor's call ``flink_avg``; the Spark dialect's stays DOUBLE."""
    job = flowc.compile(FLINK_AVG_JOB.format(mode=""), "avg.flow", for_spark=True)
    assert not [d for d in job.diagnostics if d.severity is flowc.Severity.ERROR]
    program = generate_pyspark(job)
    assert "('flink_avg', 'price', 'a', 0, None), ('flink_avg', 'big', 'b', 0, None)" in program
    (insert,) = job.program.inserts
    assert [(c.name, c.type) for c in insert.stream.schema][-2:] == [("a", "INT"), ("b", "BIGINT")]
    spark = flowc.compile(
        FLINK_AVG_JOB.format(mode="").replace("SET sql.dialect = 'flink';\n", ""),
        "avg.flow",
        for_spark=True,
    )
    (spark_insert,) = spark.program.inserts
    assert [c.type for c in spark_insert.stream.schema][-2:] == ["DOUBLE", "DOUBLE"]


def test_flink_avg_streaming_equals_javas_integer_average(spark: Any, tmp_path: Path) -> None:
    """Several micro-batches, each a run on the same checkpoint: AVG of INT and BIGINT with
    negative sums truncated toward zero, NULLs skipped, sums wrapped as Flink's."""
    batches = _flink_avg_batches()
    text = FLINK_AVG_JOB.format(mode="")
    flow = tmp_path / "avg.flow"
    flow.write_text(text, encoding="utf-8")
    for index, batch in enumerate(batches):
        write_batch(tmp_path / "in", index, batch)
        job = flowc.compile(text, str(flow), for_spark=True)
        report = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
        assert [q.error for q in report.queries] == [None], index
    wanted = over_rows(emitted(batches, delay=1), FLINK_AVG_CALLS, 2, None)
    averages = {(r["seller"], r.get("a")) for r in wanted}
    assert (4, -715827882) in averages  # Flink's value for 5, -2, 2^31 - 1
    floored = {"a": lambda f: _java_average(f, "price", 32, floor=True)}
    assert over_rows(emitted(batches, delay=1), floored, 2, None) != over_rows(
        emitted(batches, delay=1), {"a": FLINK_AVG_CALLS["a"]}, 2, None
    )  # a negative average whose truncation is not its floor
    assert normal(read_json_dir(tmp_path / "out" / "avg")) == normal(wanted)


def test_flink_avg_in_batch_mode_equals_javas_integer_average(spark: Any, tmp_path: Path) -> None:
    """Batch: Spark's window functions (an exact sum wrapped to the type, ``div`` by the
    count) give the streaming run's values; no row is late in one pass."""
    batches = _flink_avg_batches()
    kept = {id(r) for rows in emitted(batches, delay=1).values() for r in rows}
    inputs = [[r for r in batch if id(r) in kept] for batch in batches]
    text = FLINK_AVG_JOB.format(mode="SET execution.mode = batch;\n")
    flow = tmp_path / "avg.flow"
    flow.write_text(text, encoding="utf-8")
    for index, batch in enumerate(inputs):
        write_batch(tmp_path / "in", index, batch)
    job = flowc.compile(text, str(flow), for_spark=True)
    report = run_job(job, master="local[2]", out=io.StringIO())
    assert [q.error for q in report.queries] == [None]
    everything = [r for batch in inputs for r in batch]
    per_key = emitted([everything, [{"seller": 0, "price": 0, "ts": at(10_000)}]], delay=0)
    per_key = {k: v for k, v in per_key.items() if k != 0}
    wanted = over_rows(per_key, FLINK_AVG_CALLS, 2, None)
    assert normal(read_json_dir(tmp_path / "out" / "avg")) == normal(wanted)


def test_flink_avg_in_the_processor_equals_what_flink_gave(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """PyFlink 2.3's AVG(INT) over ROWS 2 PRECEDING of 7, -7, -4, NULL, -3, NULL, NULL (one
    key) gave 7, 0, -1, -5, -3, -3, -3 (docs/language.md, "OVER windows")."""
    processor = _processor(monkeypatch, [("flink_avg", "price", "a", 0, None)], True, 2)
    prices = [7, -7, -4, None, -3, None, None]
    out = [r.a for i, p in enumerate(prices) for r in processor.emit(10 * (i + 1), [(1, p, i)])]
    assert out == [7, 0, -1, -5, -3, -3, -3]


# ------------------------------------------------ examples/nexmark_q6.flow on its data

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "nexmark_q6.flow"


def _closed_auctions() -> list[list[Row]]:
    """The example's shipped files, one micro-batch each (max_files_per_trigger = 1)."""
    folder = EXAMPLE.parent / "data" / "closed_auctions"
    return [
        [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
        for path in sorted(folder.glob("*.json"))
    ]


def _q6_rows(per_seller: dict[int, list[Row]]) -> list[tuple[Any, ...]]:
    """Each emitted auction with Flink's AVG(final) over it and its 10 predecessors."""
    out = []
    for rows in per_seller.values():
        for i, row in enumerate(rows):
            average = _java_average(rows[max(0, i - 10) : i + 1], "final", 64)
            out.append((row["seller"], row["final"], _time(row["date_time"]), average))
    return sorted(out)


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value).replace(tzinfo=None)


def _q6_emitted(batches: list[list[Row]], delay: timedelta) -> dict[int, list[Row]]:
    """Flink's OverAggregate over the batches (seconds, not minutes): late rows dropped,
    rows emitted in time order once the watermark (largest time so far minus ``delay``)
    reaches them."""
    last: dict[int, datetime] = {}
    waiting: dict[int, list[Row]] = {}
    out: dict[int, list[Row]] = {}
    watermark = datetime.min
    for batch in batches:
        for row in batch:
            key, t = row["seller"], _time(row["date_time"])
            if key not in last or t > last[key]:
                waiting.setdefault(key, []).append(row)
        watermark = max(watermark, max(_time(r["date_time"]) for r in batch) - delay)
        for key, rows in waiting.items():
            ready = sorted(
                (r for r in rows if _time(r["date_time"]) <= watermark),
                key=lambda r: _time(r["date_time"]),
            )
            waiting[key] = [r for r in rows if _time(r["date_time"]) > watermark]
            if ready:
                out.setdefault(key, []).extend(ready)
                last[key] = _time(ready[-1]["date_time"])
    return out


def _q6_output(folder: Path) -> list[tuple[Any, ...]]:
    return sorted(
        (r["seller"], r["final"], _time(r["date_time"]), r.get("avg_final"))
        for r in read_json_dir(folder / "out" / "seller_averages")
    )


@pytest.mark.parametrize("batch", [False, True], ids=["streaming", "batch"])
def test_the_nexmark_q6_example_on_its_shipped_data(
    spark: Any, tmp_path: Path, batch: bool
) -> None:
    """Streaming: the first two files in one run (a micro-batch each), the last in a second
    run on the same checkpoint (a restart); batch: one pass over all three. Both against
    Flink's rule in plain Python, the average truncated (some seller's frame is not a
    whole number) and its frame 11 rows at most."""
    batches = _closed_auctions()
    assert len(batches) == 3
    copy = tmp_path / EXAMPLE.name
    text = EXAMPLE.read_text(encoding="utf-8")
    if batch:
        text = "SET execution.mode = batch;\n" + text
    copy.write_text(text, encoding="utf-8")
    data = tmp_path / "data" / "closed_auctions"
    data.mkdir(parents=True)
    shipped = sorted((EXAMPLE.parent / "data" / "closed_auctions").glob("*.json"))
    runs = [shipped] if batch else [shipped[:2], shipped[2:]]
    for index, files in enumerate(runs):
        for path in files:
            shutil.copy(path, data / path.name)
            stamp = time.time() - 3600 + 60 * shipped.index(path)
            os.utime(data / path.name, (stamp, stamp))
        job = flowc.compile(text, str(copy), for_spark=True)
        report = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
        assert [q.error for q in report.queries] == [None], index
    if batch:
        everything = [r for b in batches for r in b]
        per_seller: dict[int, list[Row]] = {}
        for row in sorted(everything, key=lambda r: _time(r["date_time"])):
            per_seller.setdefault(row["seller"], []).append(row)
    else:
        per_seller = _q6_emitted(batches, timedelta(seconds=10))
    wanted = _q6_rows(per_seller)
    assert any(len(rows) > 11 for rows in per_seller.values())
    assert any(
        Fraction(sum(r["final"] for r in rows[max(0, i - 10) : i + 1]), min(i + 1, 11)).denominator
        > 1
        for rows in per_seller.values()
        for i in range(len(rows))
    )
    assert _q6_output(tmp_path) == wanted
