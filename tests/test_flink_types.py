"""Column types as Flink writes them, in the Flink dialect: ``ROW<...>`` is Spark's STRUCT
(Nexmark's event table: three ROW columns and a computed event time chosen from their
fields), CHAR(n) and VARCHAR(n) strings read and written as they come, BYTES BINARY."""

from __future__ import annotations

import json
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc.spark.codegen import generate_pyspark
from flowc.sql.flink_dialect import flink_column_type
from tests.helpers.files import T0, at, read_json_dir, write_batches, write_later_batch
from tests.helpers.plans import without_spans
from tests.helpers.spark_run import run_in


@pytest.mark.parametrize(
    ("flink", "spark"),
    [
        ("ROW<a BIGINT, `b` VARCHAR>", "STRUCT<a BIGINT, `b` VARCHAR>"),
        ("row < a INT >", "STRUCT< a INT >"),
        ("ARRAY<ROW<a ROW<c CHAR(3)>>>", "ARRAY<STRUCT<a STRUCT<c STRING>>>"),
        ("VARCHAR(255)", "STRING"),
        ("CHAR(3)", "STRING"),
        ("MAP<VARCHAR(2), BYTES>", "MAP<STRING, BINARY>"),
        ("ROW<`row` INT, `CHAR(3)` BIGINT>", "STRUCT<`row` INT, `CHAR(3)` BIGINT>"),
        ("DECIMAL(10, 2)", "DECIMAL(10, 2)"),
        ("TIMESTAMP(3)", "TIMESTAMP(3)"),
    ],
)
def test_flink_column_types_are_spelled_as_sparks(flink: str, spark: str) -> None:
    assert flink_column_type(flink) == spark


FLINK_JOB = """\
SET sql.dialect = 'flink';
SET max_parallelism = 8;
CREATE TABLE events (
  event_type INT,
  bid ROW<auction BIGINT, price BIGINT, `dateTime` TIMESTAMP(3)>,
  person ROW<id BIGINT, name VARCHAR, `dateTime` TIMESTAMP(3)>,
  code CHAR(3),
  `dateTime` AS CASE WHEN event_type = 0 THEN person.`dateTime` ELSE bid.`dateTime` END,
  WATERMARK FOR `dateTime` AS `dateTime` - INTERVAL '4' SECOND
) WITH ('connector' = 'files', 'path' = 'in', 'format' = 'json', 'max_files_per_trigger' = '1');
CREATE VIEW bid AS
  SELECT bid.auction, bid.price, code, `dateTime` FROM events WHERE event_type = 2;
CREATE TABLE o (auction BIGINT, code VARCHAR(3), bids BIGINT, top BIGINT,
                window_start TIMESTAMP(3), window_end TIMESTAMP(3))
  WITH ('connector' = 'files', 'path' = 'out', 'format' = 'json');
INSERT INTO o
  SELECT auction, code, COUNT(*) AS bids, MAX(price) AS top, window_start, window_end
  FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))
  GROUP BY auction, code, window_start, window_end;
"""

SPARK_JOB = (
    FLINK_JOB.replace("ROW<", "STRUCT<")
    .replace("VARCHAR(3)", "STRING")
    .replace("CHAR(3)", "STRING")
    .replace("VARCHAR", "STRING")
)


def test_a_flink_row_table_plans_as_the_same_job_with_structs() -> None:
    """ROW and CHAR/VARCHAR columns give the JobGraph and the PySpark of the same job
    written with Spark's STRUCT and STRING."""
    flink = flowc.compile(FLINK_JOB, "j.flow", for_spark=True)
    spark = flowc.compile(SPARK_JOB, "j.flow", for_spark=True)
    assert without_spans(json.loads(flink.job_graph.to_json())) == without_spans(
        json.loads(spark.job_graph.to_json())
    )
    assert generate_pyspark(flink) == generate_pyspark(spark)


def test_char_columns_are_refused_in_sparks_dialect_only() -> None:
    """Spark refuses CHAR/VARCHAR in a schema it reads records with (E0227); Flink's
    CHAR(n) is a string, so the Flink dialect reads it."""
    table = (
        "CREATE SOURCE s (c CHAR(3)) WITH (connector = 'files', path = 'in', format = 'json');\n"
    )
    tail = "CREATE SINK o WITH (connector = 'console');\nINSERT INTO o FROM s;\n"
    with pytest.raises(flowc.CompileError) as raised:
        flowc.compile(table + tail, "j.flow", for_spark=True)
    assert {d.code for d in raised.value.diagnostics} == {"E0227"}
    job = flowc.compile("SET sql.dialect = 'flink';\n" + table + tail, "j.flow", for_spark=True)
    (read,) = job.program.sources
    assert read.schema[0].type == "STRING"


def _event(kind: int, auction: int, price: int, code: str, seconds: float) -> dict[str, Any]:
    """One event as Nexmark's JSON: the other kinds' ROW columns NULL."""
    stamp = at(seconds)
    bid = {"auction": auction, "price": price, "dateTime": stamp} if kind == 2 else None
    person = {"id": auction, "name": "p", "dateTime": stamp} if kind == 0 else None
    return {"event_type": kind, "bid": bid, "person": person, "code": code, "dateTime": None}


BATCHES = [
    [_event(2, 1, 10, "abcdef", 1), _event(2, 1, 30, "abcdef", 3), _event(0, 9, 0, "x", 4)],
    [_event(2, 2, 5, "ab", 12), _event(2, 1, 7, "abcdef", 14), _event(0, 8, 0, "x", 25)],
    [_event(2, 2, 9, "ab", 26), _event(2, 1, 1, "abcdef", 41)],
]
LATER = [_event(2, 3, 4, "zz", 52), _event(0, 7, 0, "x", 75)]


def _closed_windows(events: list[dict[str, Any]]) -> Counter[tuple[Any, ...]]:
    """Each ten-second window's bids per auction and code, for the windows the watermark
    (the largest event time so far, of any kind, minus 4 s) has passed."""
    times = [datetime_of(e) for e in events]
    watermark = max(times) - timedelta(seconds=4)
    groups: dict[tuple[Any, ...], list[int]] = {}
    for event, time in zip(events, times, strict=True):
        if event["event_type"] != 2:
            continue
        start = T0 + timedelta(seconds=(time - T0).total_seconds() // 10 * 10)
        groups.setdefault((event["bid"]["auction"], event["code"], start), []).append(
            event["bid"]["price"]
        )
    return Counter(
        (auction, code, len(prices), max(prices), start.isoformat())
        for (auction, code, start), prices in groups.items()
        if start + timedelta(seconds=10) <= watermark
    )


def datetime_of(event: dict[str, Any]) -> Any:
    from datetime import datetime

    row = event["bid"] or event["person"]
    return datetime.fromisoformat(row["dateTime"])


def _written(folder: Path) -> Counter[tuple[Any, ...]]:
    return Counter(
        (r["auction"], r["code"], r["bids"], r["top"], r["window_start"][:19])
        for r in read_json_dir(folder)
    )


def test_nested_rows_window_on_spark_across_micro_batches_and_a_restart(
    spark: Any, tmp_path: Path
) -> None:
    """Fields of ROW columns read, the event time computed from them carries the
    watermark, CHAR(3) values pass whole: the closed windows' rows equal plain Python's,
    after three micro-batches and again after a restart with more input."""
    write_batches(tmp_path / "in", BATCHES)
    job = flowc.compile(FLINK_JOB, str(tmp_path / "job.flow"), for_spark=True)
    assert [q.error for q in run_in(job, tmp_path).queries] == [None]
    first = [e for batch in BATCHES for e in batch]
    assert _written(tmp_path / "out") == _closed_windows(first)
    write_later_batch(tmp_path / "in", LATER)
    assert [q.error for q in run_in(job, tmp_path).queries] == [None]
    assert _written(tmp_path / "out") == _closed_windows(first + LATER)
