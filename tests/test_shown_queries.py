"""A query written as a statement (``SELECT ...;``, ``FROM v |> ...;``): its result shown
on the console, as Flink's SQL client shows a SELECT's. flowc makes it a console sink
``select_<n>`` and an INSERT into it, in the mode the result needs: append for final rows
(closed windows), update for rows that change (an aggregation without a window)."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import flowc
from tests.helpers.files import Row, write_batches
from tests.helpers.plans import job_graph_json
from tests.helpers.spark_run import compiled, run_generated, spark_codes

HEAD = """SET sql.dialect = 'flink';
SET max_parallelism = 16;
CREATE TABLE bids (k STRING, v BIGINT, ts TIMESTAMP(3), pt AS PROCTIME(),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
  WITH (connector = 'files', path = 'bids', format = 'json', max_files_per_trigger = 1);
"""
TOTALS = "SELECT k, count(*) AS n, sum(v) AS total FROM bids GROUP BY k;\n"
WINDOWS = (
    "SELECT TUMBLE_START(ts, INTERVAL '1' MINUTE) AS ws, k, count(*) AS n\n"
    "FROM bids GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE), k;\n"
)


def _modes(program: str) -> dict[str, str]:
    job = flowc.compile(program, "job.flow", for_spark=True)
    return {q.sink: q.output_mode for q in job.spark_plan.queries}


@pytest.mark.parametrize(
    ("query", "mode"),
    [
        (TOTALS, "update"),
        (WINDOWS, "append"),
        ("SELECT k, v FROM bids WHERE v > 1;", "append"),
        ("FROM bids |> WHERE v > 1 |> SELECT k;", "append"),
        (
            "SELECT SESSION_START(ts, INTERVAL '5' SECOND) AS s, k, count(*) AS n\n"
            "FROM bids GROUP BY SESSION(ts, INTERVAL '5' SECOND), k;",
            "append",
        ),
        (
            "SELECT TUMBLE_START(pt, INTERVAL '1' MINUTE) AS ws, count(*) AS n\n"
            "FROM bids GROUP BY TUMBLE(pt, INTERVAL '1' MINUTE);",
            "update",
        ),
    ],
    ids=["aggregate", "window", "filter", "pipe", "session", "processing_time"],
)
def test_the_mode_is_the_one_the_result_needs(query: str, mode: str) -> None:
    assert _modes(HEAD + query) == {"select_1": mode}


@pytest.mark.parametrize("query", [TOTALS, WINDOWS], ids=["aggregate", "window"])
def test_a_query_statement_plans_as_an_insert_into_a_console_sink(query: str) -> None:
    mode = _modes(HEAD + query)["select_1"]
    written = (
        f"CREATE SINK select_1 WITH (connector = 'console', mode = '{mode}');\n"
        f"INSERT INTO select_1 {query}"
    )
    assert job_graph_json(HEAD + query) == job_graph_json(HEAD + written)
    shown = flowc.compile(HEAD + query, "job.flow", for_spark=True)
    insert = flowc.compile(HEAD + written, "job.flow", for_spark=True)
    assert shown.spark_plan.queries[0].output_mode == insert.spark_plan.queries[0].output_mode


def test_each_query_statement_gets_its_own_free_name() -> None:
    program = (
        HEAD
        + "CREATE VIEW select_1 AS SELECT k, v FROM bids;\n"
        + "SELECT k FROM select_1;\n"
        + TOTALS
    )
    assert _modes(program) == {"select_2": "append", "select_3": "update"}


def test_a_query_statement_with_an_error_is_reported_at_its_place() -> None:
    with pytest.raises(flowc.CompileError) as raised:
        flowc.compile(HEAD + "SELECT k, nope FROM bids;\n", "job.flow")
    [error] = [d for d in raised.value.diagnostics if d.code == "E0201"]
    assert (error.span.line, error.span.column) == (6, 11)


T0 = datetime(2026, 1, 1, 10, 0, 0)
BATCHES: list[list[Row]] = [
    [
        {"k": "a", "v": 1, "ts": (T0 + timedelta(seconds=5)).isoformat()},
        {"k": "b", "v": 2, "ts": (T0 + timedelta(seconds=20)).isoformat()},
        {"k": "a", "v": 3, "ts": (T0 + timedelta(seconds=50)).isoformat()},
    ],
    [
        {"k": "a", "v": 4, "ts": (T0 + timedelta(seconds=70)).isoformat()},
        {"k": "b", "v": 5, "ts": (T0 + timedelta(seconds=61)).isoformat()},
    ],
    [
        {"k": "b", "v": 6, "ts": (T0 + timedelta(seconds=130)).isoformat()},
        {"k": "a", "v": 7, "ts": (T0 + timedelta(seconds=185)).isoformat()},
    ],
]


def _shown_into(folder: Path) -> Any:
    """An edit of the generated text: each console writer made a foreachBatch that appends
    the batch's rows, with the batch's number, to ``folder/<query>`` (a memory sink does
    not restart from a checkpoint in update mode); the modes stay the ones flowc chose."""

    def edit(text: str) -> str:
        parts = text.split("writer = writer.format('console')")
        assert len(parts) == 3
        out = parts[0]
        for number, rest in enumerate(parts[1:], start=1):
            target = str(folder / f"select_{number}")
            out += (
                "writer = writer.foreachBatch(lambda df, i: df.withColumn('_batch', "
                "__import__('pyspark.sql.functions', fromlist=['lit']).lit(i))"
                f".write.mode('append').json({target!r}))" + rest
            )
        return out

    return edit


def _shown(folder: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for part in sorted(folder.glob("part-*.json"))
        for line in part.read_text(encoding="utf-8").splitlines()
    ]


def test_query_statements_show_flinks_rows_on_spark(spark: Any, tmp_path: Path) -> None:
    """Across three micro-batches and a restart: the aggregate's last row per key is plain
    Python's count and sum; the windows shown are those the watermark closed, each once,
    with plain Python's counts."""
    program = HEAD + TOTALS + WINDOWS
    write_batches(tmp_path / "bids", BATCHES[:2])
    job = compiled(tmp_path, program)
    assert spark_codes(job) == set()
    run_generated(spark, tmp_path, job, _shown_into(tmp_path / "shown"))
    write_batches(tmp_path / "bids", BATCHES)
    run_generated(spark, tmp_path, compiled(tmp_path, program), _shown_into(tmp_path / "shown"))
    totals = sorted(_shown(tmp_path / "shown" / "select_1"), key=lambda r: r["_batch"])
    windows_shown = _shown(tmp_path / "shown" / "select_2")

    rows = [row for batch in BATCHES for row in batch]
    count: Counter[str] = Counter(r["k"] for r in rows)
    total: dict[str, int] = defaultdict(int)
    for r in rows:
        total[r["k"]] += r["v"]
    last = {r["k"]: (r["n"], r["total"]) for r in totals}  # update mode: the newest wins
    assert last == {k: (count[k], total[k]) for k in count}

    watermark = max(datetime.fromisoformat(r["ts"]) for r in rows) - timedelta(seconds=1)
    windows: Counter[tuple[datetime, str]] = Counter()
    for r in rows:
        ts = datetime.fromisoformat(r["ts"])
        windows[(ts.replace(second=0, microsecond=0), r["k"])] += 1
    closed = sorted(
        (start, k, n)
        for (start, k), n in windows.items()
        if start + timedelta(minutes=1) <= watermark
    )
    assert (
        sorted(
            (datetime.fromisoformat(r["ws"]).replace(tzinfo=None), r["k"], r["n"])
            for r in windows_shown
        )
        == closed
    )
    assert len(closed) >= 3


def _checkpoints(program: str) -> dict[str, str]:
    job = flowc.compile(program, "job.flow", for_spark=True)
    return {q.sink: q.checkpoint_location for q in job.spark_plan.queries}


def test_a_query_statement_keeps_its_checkpoint_by_its_text_not_its_place() -> None:
    """Another query in its place (the queries swapped, one edited or respaced) gets
    another checkpoint, so no state passes between queries; the same text, moved, keeps
    its own, as Flink's SQL client runs each SELECT as a job of its own."""
    first = _checkpoints(HEAD + TOTALS + WINDOWS)
    swapped = _checkpoints(HEAD + WINDOWS + TOTALS)
    assert first["select_1"] == swapped["select_2"] and first["select_2"] == swapped["select_1"]
    respaced = _checkpoints(HEAD + TOTALS.replace(" FROM", "  FROM") + WINDOWS)
    assert respaced["select_1"] != first["select_1"]  # spacing may be inside a string
    moved = _checkpoints(HEAD + "\n\n" + TOTALS + WINDOWS)
    assert moved == first
    edited = _checkpoints(HEAD + TOTALS.replace("count(*)", "count(v)") + WINDOWS)
    assert edited["select_1"] != first["select_1"] and edited["select_2"] == first["select_2"]


def test_the_same_query_twice_gets_two_checkpoints() -> None:
    twice = _checkpoints(HEAD + TOTALS + TOTALS)
    assert len(set(twice.values())) == 2
