"""Every E07xx rule, checked against Spark itself (issue 12, item 7).

flowc refuses (E0701-E0707) what Spark Structured Streaming would refuse when the query
starts or run wrongly. Each refused case here is compiled *despite* the rule (Spark's
rules are kept apart in ``spark_diagnostics``; without ``for_spark`` they do not stop the
plans), run on the shared local SparkSession over JSON files written with increasing
modification times and read one file per micro-batch, and Spark must either refuse it at
start (checked by its error condition) or write something other than the right answer,
computed here in plain Python from the same rows. Each clean case at a rule's boundary
must compile with no Spark diagnostic, run, and write the plain-Python answer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import flowc
from tests.helpers.files import Row, at, minute_of, source, write_batches
from tests.helpers.spark_run import (
    Refused,
    compiled,
    into_memory,
    run_generated,
    run_in,
    spark_codes,
    table,
)

#: The error conditions of Spark 4's UnsupportedOperationChecker, its refusals of a
#: streaming query at start: output modes have a condition of their own, the other rules
#: share one legacy condition and differ in the message.
OUTPUT_MODE = "STREAMING_OUTPUT_MODE.UNSUPPORTED_OPERATION"
UNSUPPORTED = "_LEGACY_ERROR_TEMP_3102"


def assert_refusal(refusal: Refused, condition: str, message: str) -> None:
    assert refusal.condition == condition, refusal
    assert message in str(refusal), refusal


def refused_by_spark(spark: Any, tmp_path: Path, job: flowc.CompiledJob) -> Refused:
    with pytest.raises(Refused) as caught:
        run_generated(spark, tmp_path, job)
    return caught.value


def assert_refused_or_wrong(
    spark: Any,
    tmp_path: Path,
    job: flowc.CompiledJob,
    sink: str,
    expected: list[tuple[Any, ...]],
    edit: Callable[[str], str] | None = None,
) -> None:
    """Spark refuses the job at start, or the sink's rows differ from ``expected``."""
    try:
        run_generated(spark, tmp_path, job, edit)
    except Refused:
        return
    got = table(spark, sink)
    assert got != expected, f"Spark ran it and wrote the right answer: {got}"


# ---------------------------------------------------------------- input

#: Keys 1-3 over three micro-batches, a key repeated within and across them.
KEYED = [
    [
        {"k": 1, "v": 10, "ts": at(0)},
        {"k": 2, "v": 20, "ts": at(5)},
        {"k": 1, "v": 11, "ts": at(9)},
    ],
    [{"k": 2, "v": 21, "ts": at(70)}, {"k": 3, "v": 30, "ts": at(75)}],
    [{"k": 1, "v": 12, "ts": at(200)}, {"k": 3, "v": 31, "ts": at(205)}],
]


#: Orders and payments, two micro-batches each.
ORDERS = [[{"id": 1, "ts": at(0)}, {"id": 2, "ts": at(5)}], [{"id": 3, "ts": at(60)}]]
PAYMENTS = [[{"id": 1, "ts": at(2)}], [{"id": 3, "ts": at(61)}, {"id": 4, "ts": at(62)}]]


def sums_after_each_batch(batches: list[list[Row]]) -> list[dict[int, int]]:
    """Per micro-batch: the running sum of v of each key that batch changed."""
    totals: Counter[int] = Counter()
    out = []
    for batch in batches:
        for row in batch:
            totals[row["k"]] += row["v"]
        out.append({row["k"]: totals[row["k"]] for row in batch})
    return out


# ---------------------------------------------------------------- E0701: complete mode

COMPLETE_WITHOUT_AGGREGATION = (
    source("s", "k BIGINT, v BIGINT, ts TIMESTAMP")
    + "CREATE SINK c1 WITH (connector = 'memory', mode = 'complete');\n"
    + "INSERT INTO c1 FROM s |> WHERE k > 1;\n"
)


def test_e0701_complete_mode_without_aggregation_is_refused_by_spark(
    spark: Any, tmp_path: Path
) -> None:
    write_batches(tmp_path / "s", KEYED)
    job = compiled(tmp_path, COMPLETE_WITHOUT_AGGREGATION)
    assert spark_codes(job) == {"E0701"}
    refusal = refused_by_spark(spark, tmp_path, job)
    assert_refusal(refusal, OUTPUT_MODE, "no streaming aggregations")


COMPLETE_JOIN_WITHOUT_AGGREGATION = (
    source("a", "id BIGINT, ts TIMESTAMP")
    + source("b", "id BIGINT, ts TIMESTAMP")
    + "CREATE SINK c2 WITH (connector = 'memory', mode = 'complete');\n"
    + "INSERT INTO c2 FROM a |> JOIN b ON a.id = b.id |> SELECT a.id AS id;\n"
)


def test_e0701_a_stateful_join_alone_is_no_aggregation_for_spark(
    spark: Any, tmp_path: Path
) -> None:
    """Stateful is not enough: a stream-stream join in complete mode is refused too."""
    write_batches(tmp_path / "a", [[{"id": 1, "ts": at(0)}]])
    write_batches(tmp_path / "b", [[{"id": 1, "ts": at(1)}]])
    job = compiled(tmp_path, COMPLETE_JOIN_WITHOUT_AGGREGATION)
    assert spark_codes(job) == {"E0701"}
    refusal = refused_by_spark(spark, tmp_path, job)
    assert_refusal(refusal, OUTPUT_MODE, "no streaming aggregations")


COMPLETE_AGGREGATE = (
    source("s", "k BIGINT, v BIGINT, ts TIMESTAMP")
    + "SET max_parallelism = 16;\n"
    + "CREATE SINK c3 WITH (connector = 'memory', mode = 'complete');\n"
    + "INSERT INTO c3 FROM s |> KEY BY k |> AGGREGATE sum(v) AS total, count(*) AS n;\n"
)


def test_complete_mode_with_an_aggregate_runs_and_is_right(spark: Any, tmp_path: Path) -> None:
    """E0701's boundary: complete mode with a stateful aggregation is what Spark runs."""
    write_batches(tmp_path / "s", KEYED)
    job = compiled(tmp_path, COMPLETE_AGGREGATE)
    assert spark_codes(job) == set()
    run_generated(spark, tmp_path, job)
    rows = [r for batch in KEYED for r in batch]
    expected = sorted(
        (k, sum(r["v"] for r in rows if r["k"] == k), sum(1 for r in rows if r["k"] == k))
        for k in {r["k"] for r in rows}
    )
    assert table(spark, "c3") == expected


COMPLETE_WINDOWS = (
    source("s", "k BIGINT, v BIGINT, ts TIMESTAMP")
    + "SET max_parallelism = 16;\n"
    + "CREATE SINK c4 WITH (connector = 'memory', mode = 'complete');\n"
    + "INSERT INTO c4 FROM s |> KEY BY k |> WINDOW TUMBLE(ts, INTERVAL 1 MINUTE)\n"
    + "  |> AGGREGATE count(*) AS n;\n"
)


def test_complete_mode_with_windows_and_no_watermark_runs_and_is_right(
    spark: Any, tmp_path: Path
) -> None:
    """Complete mode keeps every window, so Spark needs no watermark (E0705 is append's)."""
    write_batches(tmp_path / "s", KEYED)
    job = compiled(tmp_path, COMPLETE_WINDOWS)
    assert spark_codes(job) == set()
    run_generated(spark, tmp_path, job)
    counts = Counter((r["k"], minute_of(r["ts"])) for batch in KEYED for r in batch)
    expected = sorted((k, m, m + timedelta(minutes=1), n) for (k, m), n in counts.items())
    assert table(spark, "c4") == expected


COMPLETE_SESSIONS = (
    source("s", "k BIGINT, v BIGINT, ts TIMESTAMP")
    + "SET max_parallelism = 16;\n"
    + "CREATE SINK c5 WITH (connector = 'memory', mode = 'complete');\n"
    + "INSERT INTO c5 FROM s |> KEY BY k |> WINDOW SESSION(ts, INTERVAL 1 MINUTE)\n"
    + "  |> AGGREGATE count(*) AS n;\n"
)


def sessions(rows: list[Row], gap: timedelta) -> list[tuple[Any, ...]]:
    """Per key: runs of events less than ``gap`` apart, as (k, start, last + gap, count)."""
    out = []
    for k in sorted({r["k"] for r in rows}):
        times = sorted(datetime.fromisoformat(r["ts"]) for r in rows if r["k"] == k)
        start, last, n = times[0], times[0], 1
        for ts in times[1:]:
            if ts - last < gap:
                last, n = ts, n + 1
            else:
                out.append((k, start, last + gap, n))
                start, last, n = ts, ts, 1
        out.append((k, start, last + gap, n))
    return sorted(out)


def test_complete_mode_with_session_windows_runs_and_is_right(spark: Any, tmp_path: Path) -> None:
    """E0703's boundary: session windows in complete mode (not update) run."""
    write_batches(tmp_path / "s", KEYED)
    job = compiled(tmp_path, COMPLETE_SESSIONS)
    assert spark_codes(job) == set()
    run_generated(spark, tmp_path, job)
    rows = [r for batch in KEYED for r in batch]
    assert table(spark, "c5") == sessions(rows, timedelta(minutes=1))


# ---------------------------------------------------------------- E0702: stateful operators

#: Each key at most once per micro-batch, so which row a DEDUPLICATE keeps is certain.
ONCE_PER_BATCH = [
    [{"k": 1, "v": 10, "ts": at(0)}, {"k": 2, "v": 20, "ts": at(5)}],
    [{"k": 1, "v": 11, "ts": at(70)}, {"k": 3, "v": 30, "ts": at(75)}],
    [
        {"k": 2, "v": 21, "ts": at(200)},
        {"k": 3, "v": 31, "ts": at(205)},
        {"k": 4, "v": 40, "ts": at(210)},
    ],
]


def first_v_per_key(batches: list[list[Row]]) -> list[tuple[int, int]]:
    """DEDUPLICATE ON k |> KEY BY k |> AGGREGATE sum(v): the v of each key's first row.
    In update mode each key's row is written once, in the micro-batch of its first row,
    and never changes after; in complete mode the last table is the same rows."""
    first: dict[int, int] = {}
    for batch in batches:
        for row in batch:
            first.setdefault(row["k"], row["v"])
    return sorted(first.items())


DEDUPLICATE_THEN_AGGREGATE = (
    source("s", "k BIGINT, v BIGINT, ts TIMESTAMP")
    + "SET max_parallelism = 16;\n"
    + "CREATE SINK u1 WITH (connector = '{connector}', mode = '{mode}');\n"
    + "INSERT INTO u1 FROM s |> DEDUPLICATE ON k |> KEY BY k |> AGGREGATE sum(v) AS total;\n"
)


@pytest.mark.parametrize("mode", ["update", "complete"])
def test_deduplicate_then_aggregate_outside_append_mode_runs_and_is_right(
    spark: Any, tmp_path: Path, mode: str
) -> None:
    """E0702's boundary: a DEDUPLICATE before an aggregation emits no late rows, and Spark
    runs the chain in update and complete mode (E0702 once refused it)."""
    write_batches(tmp_path / "s", ONCE_PER_BATCH)
    connector = "noop" if mode == "update" else "memory"
    job = compiled(tmp_path, DEDUPLICATE_THEN_AGGREGATE.format(connector=connector, mode=mode))
    assert spark_codes(job) == set()
    expected = first_v_per_key(ONCE_PER_BATCH)
    assert expected == [(1, 10), (2, 20), (3, 30), (4, 40)]
    run_generated(spark, tmp_path, job, into_memory if mode == "update" else None)
    assert table(spark, "u1") == expected


DEDUPLICATE_THEN_WINDOWS_IN_UPDATE = (
    source("s", "k BIGINT, v BIGINT, ts TIMESTAMP", watermark="10 SECONDS")
    + "SET max_parallelism = 16;\n"
    + "CREATE SINK u4 WITH (connector = 'noop', mode = 'update');\n"
    + "INSERT INTO u4 FROM s |> DEDUPLICATE ON k, ts |> KEY BY k\n"
    + "  |> WINDOW TUMBLE(ts, INTERVAL 1 MINUTE) |> AGGREGATE count(*) AS n;\n"
)


def window_counts_after_each_batch(batches: list[list[Row]]) -> list[tuple[Any, ...]]:
    """Update mode: per micro-batch, each window it changed with its count so far (no row
    of these inputs is late or repeated)."""
    counts: Counter[tuple[int, datetime]] = Counter()
    out = []
    for batch in batches:
        for row in batch:
            counts[(row["k"], minute_of(row["ts"]))] += 1
        changed = {(row["k"], minute_of(row["ts"])) for row in batch}
        out += [(k, m, m + timedelta(minutes=1), counts[(k, m)]) for k, m in changed]
    return sorted(out)


def test_deduplicate_then_windows_in_update_mode_runs_and_is_right(
    spark: Any, tmp_path: Path
) -> None:
    """E0702's boundary: DEDUPLICATE ON k, ts before a window count over the watermarked
    ts, in update mode: each micro-batch's changed windows with their right counts."""
    write_batches(tmp_path / "s", ONCE_PER_BATCH)
    job = compiled(tmp_path, DEDUPLICATE_THEN_WINDOWS_IN_UPDATE)
    assert spark_codes(job) == set()
    expected = window_counts_after_each_batch(ONCE_PER_BATCH)
    run_generated(spark, tmp_path, job, into_memory)
    assert table(spark, "u4") == expected


TWO_AGGREGATIONS_IN_UPDATE = (
    source("s", "k BIGINT, v BIGINT, ts TIMESTAMP")
    + "SET max_parallelism = 16;\n"
    + "CREATE SINK u5 WITH (connector = 'noop', mode = 'update');\n"
    + "INSERT INTO u5 FROM s |> KEY BY k |> AGGREGATE count(*) AS n\n"
    + "  |> AGGREGATE count(*) AS keys;\n"
)

JOIN_THEN_AGGREGATE_IN_UPDATE = (
    source("a", "id BIGINT, ts TIMESTAMP")
    + source("b", "id BIGINT, ts TIMESTAMP")
    + "SET max_parallelism = 16;\n"
    + "CREATE SINK u6 WITH (connector = 'noop', mode = 'update');\n"
    + "INSERT INTO u6 FROM a |> JOIN b ON a.id = b.id |> SELECT a.id AS id\n"
    + "  |> KEY BY id |> AGGREGATE count(*) AS n;\n"
)


def test_inner_join_then_aggregate_in_update_mode_runs_and_is_right(
    spark: Any, tmp_path: Path
) -> None:
    """E0702's boundary: an inner JOIN before an aggregation, in update mode."""
    write_batches(tmp_path / "a", ORDERS)
    write_batches(tmp_path / "b", PAYMENTS)
    job = compiled(tmp_path, JOIN_THEN_AGGREGATE_IN_UPDATE)
    assert spark_codes(job) == set()
    expected = sorted(Counter(id for id, _ in inner_join_answer()).items())
    assert expected == [(1, 1), (3, 1)]
    run_generated(spark, tmp_path, job, into_memory)
    assert table(spark, "u6") == expected


@pytest.mark.parametrize(
    ("program", "message"),
    [
        (TWO_AGGREGATIONS_IN_UPDATE, "possible 'correctness' issue due to global watermark"),
    ],
    ids=["aggregate_then_aggregate"],
)
def test_e0702_chains_spark_refuses_outside_append_mode(
    spark: Any, tmp_path: Path, program: str, message: str
) -> None:
    write_batches(tmp_path / "s", KEYED)
    write_batches(tmp_path / "a", ORDERS)
    write_batches(tmp_path / "b", PAYMENTS)
    job = compiled(tmp_path, program)
    assert spark_codes(job) == {"E0702"}
    refusal = refused_by_spark(spark, tmp_path, job)
    assert_refusal(refusal, UNSUPPORTED, message)


TWO_STATEFUL_IN_APPEND = (
    source("s", "k BIGINT, v BIGINT, ts TIMESTAMP", watermark="10 SECONDS")
    + "SET max_parallelism = 16;\n"
    + "CREATE SINK a1 WITH (connector = 'memory');\n"
    + "INSERT INTO a1 FROM s |> DEDUPLICATE ON k, ts |> KEY BY k\n"
    + "  |> WINDOW TUMBLE(ts, INTERVAL 1 MINUTE) |> AGGREGATE count(*) AS n;\n"
)


def closed_windows(batches: list[list[Row]], delay: timedelta) -> list[tuple[Any, ...]]:
    """Per-minute counts per key of the windows the final watermark has passed."""
    rows = [r for batch in batches for r in batch]
    watermark = max(datetime.fromisoformat(r["ts"]) for r in rows) - delay
    counts = Counter((r["k"], minute_of(r["ts"])) for r in rows)
    return sorted(
        (k, m, m + timedelta(minutes=1), n)
        for (k, m), n in counts.items()
        if m + timedelta(minutes=1) <= watermark
    )


def test_two_stateful_operators_in_append_mode_run_and_are_right(
    spark: Any, tmp_path: Path
) -> None:
    """E0702's boundary (and E0705's): append mode, windows over a watermarked column."""
    write_batches(tmp_path / "s", KEYED)
    job = compiled(tmp_path, TWO_STATEFUL_IN_APPEND)
    assert spark_codes(job) == set()
    run_generated(spark, tmp_path, job)
    expected = closed_windows(KEYED, timedelta(seconds=10))
    assert expected and table(spark, "a1") == expected


# ---------------------------------------------------------------- E0703: session windows

SESSIONS_IN_UPDATE = COMPLETE_SESSIONS.replace("c5", "u2").replace(
    "'memory', mode = 'complete'", "'noop', mode = 'update'"
)


def test_e0703_session_windows_in_update_mode_are_refused_by_spark(
    spark: Any, tmp_path: Path
) -> None:
    write_batches(tmp_path / "s", KEYED)
    job = compiled(tmp_path, SESSIONS_IN_UPDATE)
    assert spark_codes(job) == {"E0703"}
    refusal = refused_by_spark(spark, tmp_path, job)
    assert_refusal(refusal, OUTPUT_MODE, "not supported for session window")


# ---------------------------------------------------------------- E0704: running aggregate

AGGREGATE_IN_APPEND = COMPLETE_AGGREGATE.replace("c3", "a2").replace(", mode = 'complete'", "")


def test_e0704_an_unwindowed_aggregate_in_append_mode_is_refused_by_spark(
    spark: Any, tmp_path: Path
) -> None:
    write_batches(tmp_path / "s", KEYED)
    job = compiled(tmp_path, AGGREGATE_IN_APPEND)
    assert spark_codes(job) == {"E0704"}
    refusal = refused_by_spark(spark, tmp_path, job)
    assert_refusal(refusal, OUTPUT_MODE, "streaming aggregations without watermark")


AGGREGATE_IN_UPDATE = (
    source("s", "k BIGINT, v BIGINT, ts TIMESTAMP")
    + "SET max_parallelism = 16;\n"
    + "CREATE SINK u3 WITH (connector = 'noop', mode = 'update');\n"
    + "INSERT INTO u3 FROM s |> KEY BY k |> AGGREGATE sum(v) AS total;\n"
)


def test_an_unwindowed_aggregate_in_update_mode_runs_and_is_right(
    spark: Any, tmp_path: Path
) -> None:
    """E0704's boundary: update mode writes each micro-batch's changed keys."""
    write_batches(tmp_path / "s", KEYED)
    job = compiled(tmp_path, AGGREGATE_IN_UPDATE)
    assert spark_codes(job) == set()
    run_generated(spark, tmp_path, job, edit=into_memory)
    expected = sorted(
        (k, total) for changed in sums_after_each_batch(KEYED) for k, total in changed.items()
    )
    assert table(spark, "u3") == expected


# ---------------------------------------------------------------- E0705: appended windows

WINDOWS_WITHOUT_WATERMARK = (
    source("s", "k BIGINT, v BIGINT, ts TIMESTAMP")
    + "SET max_parallelism = 16;\n"
    + "CREATE SINK a3 WITH (connector = 'memory');\n"
    + "INSERT INTO a3 FROM s |> KEY BY k |> WINDOW TUMBLE(ts, INTERVAL 1 MINUTE)\n"
    + "  |> AGGREGATE count(*) AS n;\n"
)


def test_e0705_appended_windows_without_a_watermark_are_refused_by_spark(
    spark: Any, tmp_path: Path
) -> None:
    write_batches(tmp_path / "s", KEYED)
    job = compiled(tmp_path, WINDOWS_WITHOUT_WATERMARK)
    assert spark_codes(job) == {"E0705"}
    refusal = refused_by_spark(spark, tmp_path, job)
    assert_refusal(refusal, OUTPUT_MODE, "streaming aggregations without watermark")


WATERMARK_LOST = (
    source("s", "k BIGINT, v BIGINT, ts TIMESTAMP", watermark="10 SECONDS")
    + "SET max_parallelism = 16;\n"
    + "CREATE SINK a4 WITH (connector = 'memory');\n"
    + "INSERT INTO a4 FROM s |> SELECT k, ts + INTERVAL 1 HOUR AS ts\n"
    + "  |> KEY BY k |> WINDOW TUMBLE(ts, INTERVAL 1 MINUTE) |> AGGREGATE count(*) AS n;\n"
)


def test_e0705_a_computed_time_column_loses_the_watermark_on_spark_too(
    spark: Any, tmp_path: Path
) -> None:
    write_batches(tmp_path / "s", KEYED)
    job = compiled(tmp_path, WATERMARK_LOST)
    assert spark_codes(job) == {"E0705"}
    refusal = refused_by_spark(spark, tmp_path, job)
    assert_refusal(refusal, OUTPUT_MODE, "streaming aggregations without watermark")


WATERMARK_KEPT_BY_RENAME = (
    source("s", "k BIGINT, v BIGINT, ts TIMESTAMP", watermark="10 SECONDS")
    + "SET max_parallelism = 16;\n"
    + "CREATE SINK a5 WITH (connector = 'memory');\n"
    + "INSERT INTO a5 FROM s |> SELECT k, ts AS at\n"
    + "  |> KEY BY k |> WINDOW TUMBLE(at, INTERVAL 1 MINUTE) |> AGGREGATE count(*) AS n;\n"
)


def test_a_renamed_time_column_keeps_the_watermark_and_is_right(spark: Any, tmp_path: Path) -> None:
    """E0705's boundary: a column selected under a new name still carries the watermark."""
    write_batches(tmp_path / "s", KEYED)
    job = compiled(tmp_path, WATERMARK_KEPT_BY_RENAME)
    assert spark_codes(job) == set()
    run_generated(spark, tmp_path, job)
    expected = closed_windows(KEYED, timedelta(seconds=10))
    assert expected and table(spark, "a5") == expected


# ---------------------------------------------------------------- E0706: outer joins


LEFT_JOIN_UNBOUNDED = (
    source("a", "id BIGINT, ts TIMESTAMP")
    + source("b", "id BIGINT, ts TIMESTAMP")
    + "SET max_parallelism = 16;\n"
    + "CREATE SINK j1 WITH (connector = 'memory');\n"
    + "INSERT INTO j1 FROM a |> LEFT JOIN b ON a.id = b.id |> SELECT a.id AS id;\n"
)

FULL_JOIN_WATERMARKED_UNBOUNDED = (
    source("a", "id BIGINT, ts TIMESTAMP", watermark="0 SECONDS")
    + source("b", "id BIGINT, ts TIMESTAMP", watermark="0 SECONDS")
    + "SET max_parallelism = 16;\n"
    + "CREATE SINK j2 WITH (connector = 'memory');\n"
    + "INSERT INTO j2 FROM a |> FULL JOIN b ON a.id = b.id |> SELECT a.id AS id;\n"
)


@pytest.mark.parametrize(
    "program",
    [LEFT_JOIN_UNBOUNDED, FULL_JOIN_WATERMARKED_UNBOUNDED],
    ids=["left_without_watermarks_or_bound", "full_with_watermarks_without_bound"],
)
def test_e0706_outer_joins_spark_cannot_finish_are_refused_by_spark(
    spark: Any, tmp_path: Path, program: str
) -> None:
    write_batches(tmp_path / "a", ORDERS)
    write_batches(tmp_path / "b", PAYMENTS)
    job = compiled(tmp_path, program)
    assert spark_codes(job) == {"E0706"}
    refusal = refused_by_spark(spark, tmp_path, job)
    assert_refusal(
        refusal, UNSUPPORTED, "join between two streaming DataFrame/Datasets is not supported"
    )


INNER_JOIN = (
    source("a", "id BIGINT, ts TIMESTAMP")
    + source("b", "id BIGINT, ts TIMESTAMP")
    + "SET max_parallelism = 16;\n"
    + "CREATE SINK j3 WITH (connector = 'memory');\n"
    + "INSERT INTO j3 FROM a |> JOIN b ON a.id = b.id |> SELECT a.id AS id, b.ts AS paid;\n"
)


def test_an_inner_join_without_watermarks_runs_and_is_right(spark: Any, tmp_path: Path) -> None:
    """E0706's boundary: an inner stream-stream join needs neither watermark nor bound."""
    write_batches(tmp_path / "a", ORDERS)
    write_batches(tmp_path / "b", PAYMENTS)
    job = compiled(tmp_path, INNER_JOIN)
    assert spark_codes(job) == set()
    run_generated(spark, tmp_path, job)
    expected = inner_join_answer()
    assert expected and table(spark, "j3") == expected


def inner_join_answer() -> list[tuple[Any, ...]]:
    """a JOIN b ON a.id = b.id |> SELECT a.id AS id, b.ts AS paid, over every row."""
    orders = [r for batch in ORDERS for r in batch]
    payments = [r for batch in PAYMENTS for r in batch]
    return sorted(
        (o["id"], datetime.fromisoformat(p["ts"]))
        for o in orders
        for p in payments
        if o["id"] == p["id"]
    )


INNER_JOIN_IN_UPDATE = INNER_JOIN.replace(
    "j3 WITH (connector = 'memory')", "u7 WITH (connector = 'noop', mode = 'update')"
).replace("INTO j3", "INTO u7")


def test_an_inner_join_in_update_mode_runs_and_is_right(spark: Any, tmp_path: Path) -> None:
    """E0702's boundary: one stateful step (a join) in update mode."""
    write_batches(tmp_path / "a", ORDERS)
    write_batches(tmp_path / "b", PAYMENTS)
    job = compiled(tmp_path, INNER_JOIN_IN_UPDATE)
    assert spark_codes(job) == set()
    run_generated(spark, tmp_path, job, edit=into_memory)
    assert table(spark, "u7") == inner_join_answer()


# ---------------------------------------------------------------- E0707, and WITHIN run


def within_watermark(text: str) -> str:
    """The generated text with Spark's only bounded deduplication in place of the exact one
    (flowc's generator refuses WITHIN, so the case is compiled without it and edited)."""
    assert text.count(".dropDuplicates([") == 1
    return text.replace(".dropDuplicates([", ".dropDuplicatesWithinWatermark([")


WITHIN_WITHOUT_WATERMARK = (
    source("s", "k BIGINT, v BIGINT, ts TIMESTAMP")
    + "SET max_parallelism = 16;\n"
    + "CREATE SINK d1 WITH (connector = 'memory');\n"
    + "INSERT INTO d1 FROM s |> DEDUPLICATE ON k WITHIN INTERVAL 1 MINUTE;\n"
)


def test_e0707_within_without_a_watermark_is_refused_by_spark(spark: Any, tmp_path: Path) -> None:
    write_batches(tmp_path / "s", KEYED)
    assert spark_codes(compiled(tmp_path, WITHIN_WITHOUT_WATERMARK)) == {"E0707"}
    job = compiled(tmp_path, WITHIN_WITHOUT_WATERMARK.replace(" WITHIN INTERVAL 1 MINUTE", ""))
    with pytest.raises(Refused) as caught:
        run_generated(spark, tmp_path, job, edit=within_watermark)
    assert_refusal(caught.value, UNSUPPORTED, "dropDuplicatesWithinWatermark is not supported")


#: Two rows of key 1 in one micro-batch, 3 minutes apart, and one 1.5 minutes later.
REPEATS = [
    [{"k": 1, "v": 1, "ts": at(0)}, {"k": 1, "v": 2, "ts": at(180)}],
    [{"k": 1, "v": 3, "ts": at(270)}, {"k": 2, "v": 4, "ts": at(280)}],
]

WITHIN_WITH_WATERMARK = (
    source("s", "k BIGINT, v BIGINT, ts TIMESTAMP", watermark="1 MINUTE")
    + "SET max_parallelism = 16;\n"
    + "CREATE SINK d2 WITH (connector = 'memory');\n"
    + "INSERT INTO d2 FROM s |> DEDUPLICATE ON k WITHIN INTERVAL 2 MINUTES;\n"
)


def within_rule(batches: list[list[Row]], interval: timedelta) -> list[int]:
    """DEDUPLICATE ON k WITHIN ``interval`` (docs/language.md): per micro-batch in event-time
    order, a row less than the interval from its key's kept row is dropped, another is kept
    and becomes the kept row. (No row of these inputs is late.) The kept rows' v."""
    kept: dict[int, datetime] = {}
    out = []
    for batch in batches:
        for row in sorted(batch, key=lambda r: r["ts"]):
            ts = datetime.fromisoformat(row["ts"])
            if row["k"] in kept and ts - kept[row["k"]] < interval:
                continue
            kept[row["k"]] = ts
            out.append(row["v"])
    return sorted(out)


def test_within_with_a_watermark_runs_flowcs_processor_not_sparks_operator(
    spark: Any, tmp_path: Path
) -> None:
    """Spark's own bounded deduplication gives a wrong answer here; flowc's processor, which
    WITHIN runs as (docs/language.md, "DEDUPLICATE WITHIN on Spark"), gives the rule's."""
    write_batches(tmp_path / "s", REPEATS)
    job = compiled(tmp_path, WITHIN_WITH_WATERMARK)
    assert spark_codes(job) == set()
    assert len(job.spark_plan.within_deduplicators) == 1
    wanted = within_rule(REPEATS, timedelta(minutes=2))
    assert wanted == [1, 2, 4]
    run_in(job, tmp_path)
    assert sorted(row[1] for row in table(spark, "d2")) == wanted
    plain = compiled(
        tmp_path,
        WITHIN_WITH_WATERMARK.replace(" WITHIN INTERVAL 2 MINUTES", "").replace("d2", "d2s"),
    )
    run_generated(spark, tmp_path, plain, edit=within_watermark)
    got = sorted(row[1] for row in table(spark, "d2s"))
    # Spark drops v=2, 3 minutes after the kept row but in the same micro-batch, and v=3 in
    # the next one: key 1 expires at 0 + 60 s, passed by that micro-batch's watermark (180 -
    # 60 s), but its state is evicted only after the micro-batch's rows are deduplicated.
    assert got != wanted, got
    assert len(got) == 2 and 4 in got and 3 not in got, got


DEDUPLICATE_FOREVER = WITHIN_WITH_WATERMARK.replace(" WITHIN INTERVAL 2 MINUTES", "").replace(
    "d2", "d3"
)


def test_deduplicate_without_within_runs_and_is_right(spark: Any, tmp_path: Path) -> None:
    """E0708's boundary: DEDUPLICATE ON k keeps each key's first row, forever."""
    write_batches(tmp_path / "s", REPEATS)
    job = compiled(tmp_path, DEDUPLICATE_FOREVER)
    assert spark_codes(job) == set()
    run_generated(spark, tmp_path, job)
    got = table(spark, "d3")
    assert sorted(row[0] for row in got) == [1, 2]
    first_batch_of_key_1 = {r["v"] for r in REPEATS[0] if r["k"] == 1}
    assert {row[1] for row in got if row[0] == 1} <= first_batch_of_key_1
    assert [row[1] for row in got if row[0] == 2] == [4]


# ---------------------------------------------------------------- without Spark

REFUSED = [
    (COMPLETE_WITHOUT_AGGREGATION, "E0701"),
    (COMPLETE_JOIN_WITHOUT_AGGREGATION, "E0701"),
    (TWO_AGGREGATIONS_IN_UPDATE, "E0702"),
    (SESSIONS_IN_UPDATE, "E0703"),
    (AGGREGATE_IN_APPEND, "E0704"),
    (WINDOWS_WITHOUT_WATERMARK, "E0705"),
    (WATERMARK_LOST, "E0705"),
    (LEFT_JOIN_UNBOUNDED, "E0706"),
    (FULL_JOIN_WATERMARKED_UNBOUNDED, "E0706"),
    (WITHIN_WITHOUT_WATERMARK, "E0707"),
]

ACCEPTED = [
    COMPLETE_AGGREGATE,
    COMPLETE_WINDOWS,
    COMPLETE_SESSIONS,
    TWO_STATEFUL_IN_APPEND,
    AGGREGATE_IN_UPDATE,
    WATERMARK_KEPT_BY_RENAME,
    INNER_JOIN,
    INNER_JOIN_IN_UPDATE,
    DEDUPLICATE_FOREVER,
    WITHIN_WITH_WATERMARK,
    DEDUPLICATE_THEN_AGGREGATE.format(connector="noop", mode="update"),
    DEDUPLICATE_THEN_WINDOWS_IN_UPDATE,
    JOIN_THEN_AGGREGATE_IN_UPDATE,
]
ACCEPTED_IDS = [
    "complete_aggregate",
    "complete_windows",
    "complete_sessions",
    "two_stateful_in_append",
    "aggregate_in_update",
    "watermark_kept_by_rename",
    "inner_join",
    "inner_join_in_update",
    "deduplicate_forever",
    "deduplicate_within_with_a_watermark",
    "deduplicate_then_aggregate_in_update",
    "deduplicate_then_windows_in_update",
    "inner_join_then_aggregate_in_update",
]


@pytest.mark.parametrize(("program", "code"), REFUSED, ids=[code for _, code in REFUSED])
def test_the_refused_cases_are_refused_for_spark(program: str, code: str) -> None:
    """The cases Spark was run on above, as ``flowc check`` sees them (no Spark needed)."""
    with pytest.raises(flowc.CompileError) as caught:
        flowc.compile(program, "job.flow", for_spark=True)
    errors = {d.code for d in caught.value.diagnostics if d.severity is flowc.Severity.ERROR}
    assert errors == {code}


@pytest.mark.parametrize("program", ACCEPTED, ids=ACCEPTED_IDS)
def test_the_boundary_cases_compile_for_spark(program: str) -> None:
    """Complete mode with a stateful aggregation among them: E0701 must not refuse it."""
    job = flowc.compile(program, "job.flow", for_spark=True)
    assert spark_codes(job) == set()


#: A window count per key, then a window count of those (update mode): append mode runs it
#: with the same final rows, each window written once.
WINDOWS_OF_WINDOWS_IN_UPDATE = (
    source("s", "k BIGINT, v BIGINT, ts TIMESTAMP", watermark="10 SECONDS")
    + "SET max_parallelism = 16;\n"
    + "CREATE SINK u9 WITH (connector = 'noop', mode = 'update');\n"
    + "INSERT INTO u9 FROM s |> KEY BY k |> WINDOW TUMBLE(ts, INTERVAL 1 MINUTE)\n"
    + "  |> AGGREGATE count(*) AS n\n"
    + "  |> WINDOW TUMBLE(window_end, INTERVAL 1 MINUTE) |> AGGREGATE sum(n) AS total;\n"
)


@pytest.mark.parametrize(
    ("program", "offered"),
    [(TWO_AGGREGATIONS_IN_UPDATE, False), (WINDOWS_OF_WINDOWS_IN_UPDATE, True)],
    ids=["after_a_running_aggregate", "after_windows"],
)
def test_e0702_offers_append_mode_only_after_windows(program: str, offered: bool) -> None:
    """E0702's help offers mode = 'append' only where the earlier aggregations are
    windowed (final once written): after a running AGGREGATE, append mode would mean
    something else (and is E0704), so the help names what flowc runs instead."""
    with pytest.raises(flowc.CompileError) as caught:
        flowc.compile(program, "job.flow", for_spark=True)
    (found,) = [d for d in caught.value.diagnostics if d.code == "E0702"]
    assert found.help is not None
    assert ("mode = 'append'" in found.help and "cannot" not in found.help) is offered
    assert ("Updating pipelines on Spark" in found.help) is not offered
