"""A window table function grouped with no aggregate (Nexmark q8's distinct sellers per
window): each group once per window, as Flink's window aggregate with no aggregate calls
emits it; planned as the window's AGGREGATE with a row count left out of the SELECT."""

from __future__ import annotations

import json
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import flowc
from tests.helpers.files import T0, at, read_json_dir, source, write_batches, write_later_batch
from tests.helpers.plans import without_spans
from tests.helpers.spark_run import run_in

FLINK = """\
SET sql.dialect = 'flink';
SET max_parallelism = 8;
{source}CREATE TABLE o (id BIGINT, name STRING, starttime TIMESTAMP(3))
  WITH ('connector' = 'files', 'path' = 'out', 'format' = 'json');
INSERT INTO o
  SELECT id, name, window_start AS starttime
  FROM TABLE(TUMBLE(TABLE person, DESCRIPTOR(ts), INTERVAL '10' SECOND))
  GROUP BY id, name, window_start, window_end;
"""
PIPE = """\
SET max_parallelism = 8;
{source}CREATE SINK o (id BIGINT, name STRING, starttime TIMESTAMP)
  WITH (connector = 'files', path = 'out', format = 'json');
INSERT INTO o FROM person |> KEY BY id, name |> WINDOW TUMBLE(ts, INTERVAL '10' SECOND)
  |> AGGREGATE count(*) AS flowc_rows |> SELECT id, name, window_start AS starttime;
"""
SOURCE = source("person", "id BIGINT, name STRING, ts TIMESTAMP", watermark="'2' SECOND")

BATCHES = [
    [{"id": 1, "name": "a", "ts": at(1)}, {"id": 1, "name": "a", "ts": at(3)}],
    [{"id": 2, "name": "b", "ts": at(4)}, {"id": 1, "name": "a", "ts": at(12)}],
    [{"id": 1, "name": "a", "ts": at(14)}, {"id": 3, "name": "c", "ts": at(25)}],
]
LATER = [{"id": 3, "name": "c", "ts": at(27)}, {"id": 4, "name": "d", "ts": at(40)}]


def _expected(rows: list[dict[str, Any]]) -> Counter[tuple[Any, ...]]:
    """Each (id, name) once per ten-second window the final watermark has closed."""
    watermark = max(row["ts"] for row in rows)
    closed = (T0 + timedelta(seconds=_seconds(watermark) - 2)).isoformat()
    groups = set()
    for row in rows:
        start = T0 + timedelta(seconds=_seconds(row["ts"]) // 10 * 10)
        if (start + timedelta(seconds=10)).isoformat() <= closed:
            groups.add((row["id"], row["name"], start.isoformat()))
    return Counter(groups)


def _seconds(stamp: str) -> float:
    from datetime import datetime

    return (datetime.fromisoformat(stamp) - T0).total_seconds()


def _written(folder: Path) -> Counter[tuple[Any, ...]]:
    return Counter((r["id"], r["name"], r["starttime"][:19]) for r in read_json_dir(folder))


def test_plans_equal_the_pipe_form_with_a_count_left_out() -> None:
    flink = flowc.compile(FLINK.format(source=SOURCE), "j.flow", for_spark=True)
    pipe = flowc.compile(PIPE.format(source=SOURCE), "j.flow", for_spark=True)
    assert without_spans(json.loads(flink.job_graph.to_json())) == without_spans(
        json.loads(pipe.job_graph.to_json())
    )


def test_each_group_once_per_window_across_micro_batches_and_a_restart(
    spark: Any, tmp_path: Path
) -> None:
    write_batches(tmp_path / "person", BATCHES)
    job = flowc.compile(FLINK.format(source=SOURCE), str(tmp_path / "j.flow"), for_spark=True)
    assert [q.error for q in run_in(job, tmp_path).queries] == [None]
    first = [r for batch in BATCHES for r in batch]
    assert _written(tmp_path / "out") == _expected(first)
    write_later_batch(tmp_path / "person", LATER)
    assert [q.error for q in run_in(job, tmp_path).queries] == [None]
    assert _written(tmp_path / "out") == _expected(first + LATER)
