"""``|> SET col = expr, ...`` (BigQuery's pipe SET), end to end: its diagnostics point at
the column, it plans as the Map an EXTEND is, its state lineage is its expression's, and
on Spark it replaces values and types in place before a windowed AGGREGATE, across
micro-batches and a restart, as plain Python computes over the same input."""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc.cli.compile import render_stage
from flowc.diagnostics import CompileError
from flowc.program import SetStep
from flowc.state.describe import describe_state
from tests.helpers.files import Row, at, read_json_dir, source, write_batches
from tests.helpers.plans import without_spans
from tests.helpers.spark_run import Refused, compiled, run_generated

SOURCE = (
    "CREATE SOURCE orders (id BIGINT, item STRING, amount INT, ts TIMESTAMP)"
    " WITH (connector = 'datagen');\n"
    "CREATE SINK o WITH (connector = 'console');\n"
)


def test_unknown_column_is_located_with_a_did_you_mean() -> None:
    text = SOURCE + "INSERT INTO o FROM orders |> SET amout = amount + 1;\n"
    with pytest.raises(CompileError) as raised:
        flowc.compile(text, "job.flow")
    (error,) = raised.value.diagnostics
    assert (error.code, error.span.line, error.span.column) == ("E0201", 3, 34)
    assert error.help is not None and "did you mean 'amount'" in error.help


def test_a_column_set_twice_points_at_the_second() -> None:
    text = SOURCE + "INSERT INTO o FROM orders |> SET amount = 1, item = 'x', amount = 2;\n"
    with pytest.raises(CompileError) as raised:
        flowc.compile(text, "job.flow")
    (error,) = raised.value.diagnostics
    assert (error.code, error.span.line, error.span.column) == ("E0206", 3, 58)


def test_set_plans_as_the_map_an_extend_is() -> None:
    """Same operator, default name, chaining and operator ids as an EXTEND in its place."""
    tail = " |> WHERE id > 0 |> KEY BY item |> AGGREGATE count(*) AS n;\n"
    set_job = flowc.compile(SOURCE + "INSERT INTO o FROM orders |> SET amount = 2" + tail, "j")
    extend_job = flowc.compile(SOURCE + "INSERT INTO o FROM orders |> EXTEND 2 AS a2" + tail, "j")
    (step, *_) = set_job.program.inserts[0].stream.steps
    assert isinstance(step, SetStep)
    for stage in ("transformations", "streamgraph", "jobgraph", "physical"):
        assert without_spans(json.loads(render_stage(set_job, stage, "json"))) == (
            without_spans(json.loads(render_stage(extend_job, stage, "json")))
        ), stage
    assert "Source: orders -> Map -> Filter" in render_stage(set_job, "jobgraph", "text")


def test_state_lineage_of_a_set_column_is_its_expression() -> None:
    """The window's keys: a set column's lineage is its expression's over the input row
    (``id`` reads ``amount`` as it was), a column SET leaves alone keeps its own."""
    text = (
        "SET max_parallelism = 16;\n"
        "CREATE SOURCE orders (id BIGINT, item STRING, amount INT, ts TIMESTAMP,"
        " WATERMARK FOR ts AS ts - INTERVAL 5 SECONDS)"
        " WITH (connector = 'files', path = 'in', format = 'json');\n"
        "CREATE SINK o WITH (connector = 'console');\n"
        "INSERT INTO o FROM orders |> SET item = upper(item), amount = amount * 2, id = amount\n"
        "  |> SET amount = amount + 1\n"
        "  |> KEY BY item, id, amount |> WINDOW TUMBLE(ts, INTERVAL 1 MINUTE)\n"
        "  |> AGGREGATE count(*) AS n;\n"
    )
    (query,) = describe_state(flowc.compile(text, "job.flow", for_spark=True)).queries
    (window,) = query.operators
    assert [(k.name, k.type, k.lineage) for k in window.keys] == [
        ("item", "STRING", "UPPER(orders.item)"),
        ("id", "INT", "orders.amount"),
        ("amount", "INT", "orders.amount * 2 + 1"),
    ]
    assert [w.column for w in window.watermarks] == ["ts"]


# ---------------------------------------------------------------- on Spark

#: Orders over five minutes, one file per micro-batch; the first run reads two, the run
#: after the restart the other two; the last row moves the watermark past minute 2.
ORDERS: list[list[Row]] = [
    [
        {"id": 1, "item": "a", "amount": 4, "ts": at(1)},
        {"id": 2, "item": "b", "amount": 10, "ts": at(20)},
        {"id": 3, "item": "a", "amount": 6, "ts": at(50)},
    ],
    [
        {"id": 4, "item": "a", "amount": 3, "ts": at(65)},
        {"id": 5, "item": "b", "amount": 8, "ts": at(70)},
        {"id": 6, "item": "A", "amount": 2, "ts": at(62)},
    ],
    [
        {"id": 7, "item": "b", "amount": 5, "ts": at(130)},
        {"id": 8, "item": "a", "amount": 1, "ts": at(125)},
        {"id": 9, "item": "B", "amount": 7, "ts": at(128)},
    ],
    [{"id": 10, "item": "c", "amount": 9, "ts": at(300)}],
]

#: SET changes a value (item, upper case: 'a' and 'A' become one key), a value and its
#: type (amount, INT to DOUBLE) and reads the input row (id takes amount before the SET).
PROGRAM = (
    source("orders", "id BIGINT, item STRING, amount INT, ts TIMESTAMP", "5 SECONDS")
    + "SET max_parallelism = 16;\n"
    + "CREATE SINK out WITH (connector = 'files', path = 'out', format = 'json');\n"
    + "INSERT INTO out FROM orders\n"
    + "  |> SET item = upper(item), amount = amount / 4, id = amount\n"
    + "  |> KEY BY item |> WINDOW TUMBLE(ts, INTERVAL 1 MINUTE)\n"
    + "  |> AGGREGATE sum(amount) AS total, max(id) AS biggest, count(*) AS n;\n"
)


def _expected() -> list[tuple[Any, ...]]:
    groups: dict[tuple[datetime, str], list[int]] = defaultdict(list)
    for row in (r for batch in ORDERS for r in batch):
        minute = datetime.fromisoformat(row["ts"]).replace(second=0)
        groups[(minute, row["item"].upper())].append(row["amount"])
    watermark = max(datetime.fromisoformat(r["ts"]) for b in ORDERS for r in b) - timedelta(
        seconds=5
    )
    return sorted(
        (
            start,
            start + timedelta(minutes=1),
            item,
            sum(a / 4 for a in amounts),
            max(amounts),
            len(amounts),
        )
        for (start, item), amounts in groups.items()
        if start + timedelta(minutes=1) <= watermark
    )


def _written(folder: Path) -> list[tuple[Any, ...]]:
    def time(text: str) -> datetime:
        return datetime.fromisoformat(text).replace(tzinfo=None)

    return sorted(
        (
            time(r["window_start"]),
            time(r["window_end"]),
            r["item"],
            r["total"],
            r["biggest"],
            r["n"],
        )
        for r in read_json_dir(folder)
    )


def test_set_before_a_window_on_spark_across_a_restart(spark: Any, tmp_path: Path) -> None:
    job = compiled(tmp_path, PROGRAM)
    assert not job.spark_diagnostics
    types = {c.name: c.type for c in job.program.inserts[0].stream.steps[0].schema}
    assert [*types] == ["id", "item", "amount", "ts"]  # each column in its place
    assert (types["id"], types["amount"]) == ("INT", "DOUBLE")
    write_batches(tmp_path / "orders", ORDERS[:2])
    run_generated(spark, tmp_path, job)
    first = _written(tmp_path / "out")
    write_batches(tmp_path / "orders", ORDERS)  # the same two files, then two more
    run_generated(spark, tmp_path, compiled(tmp_path, PROGRAM))
    expected = _expected()
    assert [e[2] for e in expected] == ["A", "B", "A", "B", "A", "B"]
    assert first and first == expected[: len(first)]  # the first run closed minute 0 at least
    assert _written(tmp_path / "out") == expected


# ---------------------------------------------------------------- watermarks on Spark

#: Clicks over four minutes, one file per micro-batch.
CLICKS: list[list[Row]] = [
    [
        {"k": 1, "ts": at(1), "seen": at(1)},
        {"k": 2, "ts": at(30), "seen": at(30)},
        {"k": 3, "ts": at(40), "seen": at(3)},
    ],
    [{"k": 1, "ts": at(65), "seen": at(65)}, {"k": 1, "ts": at(70), "seen": at(70)}],
    [{"k": 2, "ts": at(240), "seen": at(240)}],
]


def _clicks_job(tmp_path: Path, set_step: str, window_on: str) -> flowc.CompiledJob:
    return compiled(
        tmp_path,
        source("clicks", "k BIGINT, seen TIMESTAMP, ts TIMESTAMP", "5 SECONDS")
        + "SET max_parallelism = 16;\n"
        + "CREATE SINK out WITH (connector = 'memory');\n"
        + f"INSERT INTO out FROM clicks |> {set_step}\n"
        + f"  |> WINDOW TUMBLE({window_on}, INTERVAL 1 MINUTE) |> AGGREGATE count(*) AS n;\n",
    )


def test_a_column_set_to_the_event_time_carries_its_watermark_on_spark(
    spark: Any, tmp_path: Path
) -> None:
    """``SET seen = ts``: Spark's alias keeps ts's watermark, so the appended window on
    ``seen`` closes as the watermark passes, as flowc's rules say (no E0705). The key in
    force is set too: the window groups by its new value (keys 1 and 3 become one)."""
    write_batches(tmp_path / "clicks", CLICKS)
    job = _clicks_job(tmp_path, "KEY BY k |> SET seen = ts, k = k % 2", "seen")
    assert not job.spark_diagnostics
    run_generated(spark, tmp_path, job)
    watermark = datetime.fromisoformat(at(240)) - timedelta(seconds=5)
    counts: dict[tuple[int, datetime], int] = defaultdict(int)
    for row in (r for batch in CLICKS for r in batch):
        counts[(row["k"] % 2, datetime.fromisoformat(row["ts"]).replace(second=0))] += 1
    expected = sorted(
        (k, start, start + timedelta(minutes=1), n)
        for (k, start), n in counts.items()
        if start + timedelta(minutes=1) <= watermark
    )
    assert (1, datetime.fromisoformat(at(0)), datetime.fromisoformat(at(60)), 2) in expected
    assert sorted(tuple(r) for r in spark.sql("SELECT * FROM out").collect()) == expected


def test_the_event_time_set_anew_is_refused_as_spark_refuses_it(spark: Any, tmp_path: Path) -> None:
    """``SET ts = ts + INTERVAL 1 HOUR`` makes a column without the watermark: flowc
    refuses the appended window on it (E0705), and Spark, run despite that, refuses it
    at start."""
    write_batches(tmp_path / "clicks", CLICKS)
    job = _clicks_job(tmp_path, "SET ts = ts + INTERVAL 1 HOUR", "ts")
    assert {d.code for d in job.spark_diagnostics} == {"E0705"}
    with pytest.raises(Refused) as caught:
        run_generated(spark, tmp_path, job)
    assert "watermark" in str(caught.value).lower(), caught.value
