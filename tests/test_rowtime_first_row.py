"""Flink's keep-first row by event time (issue 28): a TOP 1 whose first BY is the input's
rowtime attribute ascending (SQL ``ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts ASC)``
kept at ``rn = 1``, or ``TOP 1 BY ts ASC PER k``) over insert-only rows is insert-only in
Flink 2.3 (``Rank(strategy=[AppendFastStrategy], ..., orderBy=[ROWTIME ts ASC])``,
``changelogMode=[I]``): RowTimeDeduplicateKeepFirstRowFunction drops a row behind the
watermark (``rowtime < currentWatermark``), keeps a group's candidate (replaced only by a
strictly earlier time), emits it once when the watermark reaches its time, and ignores
every later row of the group.

Here: flowc's changelog modes of these forms (Flink's, asked: the opt-in comparison is
tests/test_changelog_against_flink.py); the processor in plain Python over random
micro-batches against a literal port of Flink's function; and real Spark (the SQL form
into an append files sink, the pipe form into an upsert sink) over several micro-batches
and a restart on the same checkpoint, against the same port, with the micro-batch
watermark as flowc defines it (the largest event time of the earlier micro-batches minus
the delay)."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc.spark.codegen import generate_pyspark
from flowc.state import Verdict, compare, describe_state
from tests.helpers.fake_state import Handle
from tests.helpers.files import read_json_dir, upsert_table, write_batches, write_later_batch
from tests.helpers.spark_run import compiled, run_generated, run_in, spark_codes

Row = dict[str, Any]
T0 = datetime(2026, 3, 1, 9, 0, 0)
DELAY_MS = 2000


def at(seconds: int) -> str:
    return (T0 + timedelta(seconds=seconds)).isoformat()


def millis(ts: str) -> int:
    return int((datetime.fromisoformat(ts[:19]) - datetime(1970, 1, 1)).total_seconds() * 1000)


# ---------------------------------------------------------------- Flink's rule, in Python


def flink_first_rows(batches: list[list[Row]], delay_ms: int, key: str | None = "k") -> list[Row]:
    """RowTimeDeduplicateKeepFirstRowFunction ported line by line, fed micro-batch by
    micro-batch: a batch's rows arrive under its watermark (the largest event time of the
    earlier batches minus ``delay_ms``; Spark's first is 0), in the order of (time, v) (an
    arrival order Flink may see: Spark's order within a micro-batch is not fixed, and flowc
    takes the first in the TOP's order); then the watermark advances and the timers at or
    behind it fire. ``key`` None: one group."""
    watermark = 0
    largest: int | None = None
    waiting: dict[object, Row] = {}
    emitted: set[object] = set()
    out: list[Row] = []
    for rows in batches:
        for row in sorted(rows, key=lambda r: (millis(r["ts"]), r["v"])):
            group = row[key] if key else None
            rowtime = millis(row["ts"])
            if rowtime < watermark:
                continue  # late
            if group in emitted:
                continue
            previous = waiting.get(group)
            if previous is None or rowtime < millis(previous["ts"]):
                waiting[group] = row
        for row in rows:
            largest = max(largest or millis(row["ts"]), millis(row["ts"]))
        if largest is not None:
            watermark = max(watermark, largest - delay_ms)
        for group, row in list(waiting.items()):
            if millis(row["ts"]) <= watermark:  # onTimer
                out.append(row)
                emitted.add(group)
                del waiting[group]
    return out


# ---------------------------------------------------------------- changelog modes

SOURCE = """SET sql.dialect = 'flink';
SET max_parallelism = 16;
CREATE TABLE t (k STRING, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
  WITH (connector = 'files', path = 'in', format = 'json', max_files_per_trigger = 1);
"""
APPEND_SINK = """CREATE TABLE o (k STRING, v BIGINT, ts TIMESTAMP(3))
  WITH (connector = 'files', path = 'out', format = 'json');
"""
UPSERT_SINK = """CREATE TABLE o (k STRING, v BIGINT, ts TIMESTAMP(3), PRIMARY KEY (k) NOT ENFORCED)
  WITH (connector = 'files', path = 'out', format = 'json');
"""


def ranked(order: str, keep: str = "rn = 1", select: str = "k, v, ts", per: str = "k") -> str:
    partition = f"PARTITION BY {per} " if per else ""
    return (
        f"INSERT INTO o SELECT {select} FROM (SELECT *, ROW_NUMBER() OVER ({partition}"
        f"ORDER BY {order}) AS rn FROM t) WHERE {keep};\n"
    )


#: Flink 2.3's changelog mode of the Rank for each form, as its EXPLAIN CHANGELOG_MODE
#: printed it (asked with a console sink; tests/test_changelog_against_flink.py asks again).
RANK_MODES = {
    "ts_asc": (ranked("ts ASC"), "I"),
    "ts_asc_rank_selected": (ranked("ts ASC", select="k, v, ts, rn"), "I"),
    "ts_asc_then_v": (ranked("ts ASC, v"), "I"),
    "ts_asc_one_group": (ranked("ts ASC", per=""), "I"),
    "ts_asc_two_rows": (ranked("ts ASC", keep="rn <= 2"), "I,UB,UA,D"),
    "ts_desc": (ranked("ts DESC"), "I,UB,UA,D"),
    "v_then_ts": (ranked("v ASC, ts"), "I,UB,UA,D"),
}


def rank_mode(program: str) -> str:
    graph = flowc.compile(program, "d.flow").stream_graph
    (mode,) = [n.changelog_mode for n in graph.nodes.values() if n.name.startswith("Rank(")]
    return mode


@pytest.mark.parametrize("case", sorted(RANK_MODES))
def test_the_ranks_changelog_mode_is_flinks(case: str) -> None:
    query, mode = RANK_MODES[case]
    rank = ", rn BIGINT" if "ts, rn FROM" in query else ""
    console = (
        f"CREATE TABLE o (k STRING, v BIGINT, ts TIMESTAMP(3){rank}) "
        "WITH (connector = 'console');\n"
    )
    assert rank_mode(SOURCE + console + query) == mode


PIPE_SOURCE = """SET max_parallelism = 16;
CREATE SOURCE t (k STRING, v BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL 2 SECONDS)
  WITH (connector = 'files', path = 'in', format = 'json', max_files_per_trigger = 1);
CREATE SINK o WITH (connector = 'console', mode = 'update');
"""


@pytest.mark.parametrize(
    ("steps", "mode"),
    [
        ("|> TOP 1 BY ts ASC PER k", "I"),
        ("|> TOP 1 BY ts PER k AS rn", "I"),
        ("|> SELECT k, v, ts AS t2 |> TOP 1 BY t2 ASC PER k", "I"),
        ("|> KEY BY k |> TOP 1 BY ts ASC", "I"),
        ("|> EXTEND ts + INTERVAL 1 SECOND AS later |> TOP 1 BY later PER k", "I,UB,UA,D"),
        ("|> TOP 1 BY ts DESC PER k", "I,UB,UA,D"),
        ("|> TOP 2 BY ts ASC PER k", "I,UB,UA,D"),
        ("|> KEY BY k |> AGGREGATE min(ts) AS ts |> TOP 1 BY ts ASC", "I,UB,UA,D"),
    ],
)
def test_the_pipe_forms_changelog_mode(steps: str, mode: str) -> None:
    """Only the watermark's own column, read unchanged, is an event-time attribute (a
    computed time, or an aggregate's, is not: Flink plans an updating Rank)."""
    assert rank_mode(PIPE_SOURCE + f"INSERT INTO o FROM t {steps};\n") == mode


# ---------------------------------------------------------------- the processor in Python


def _processor(monkeypatch: pytest.MonkeyPatch) -> Any:
    """The generated RowtimeFirstRow with in-memory state (the names the generated
    program imports from pyspark put where it reads them)."""
    from pyspark.sql import Row as SparkRow
    from pyspark.sql import types

    from flowc.spark import generated_runtime as runtime

    for name in ("StructType", "StructField", "LongType", "BinaryType"):
        monkeypatch.setattr(runtime, name, getattr(types, name), raising=False)
    monkeypatch.setattr(runtime, "Row", SparkRow, raising=False)
    return runtime


class _Values:
    """transformWithState's TimerValues: the micro-batch's watermark."""

    def __init__(self, mark: int) -> None:
        self.mark = mark

    def getCurrentWatermarkInMs(self) -> int:
        return self.mark


class _Key:
    """One key's processor, its state in memory, and its one event-time timer."""

    def __init__(self, runtime: Any) -> None:
        self.timer: int | None = None
        handle = Handle()
        handle.registerTimer = self.register  # type: ignore[method-assign]
        handle.listTimers = self.timers  # type: ignore[method-assign]
        handle.deleteTimer = self.delete  # type: ignore[method-assign]
        self.processor = runtime.RowtimeFirstRow(["k", "v", "ts"], "ms", "order", False)
        self.processor.init(handle)

    def register(self, timer: int) -> None:
        self.timer = timer

    def timers(self) -> list[int]:
        return [] if self.timer is None else [self.timer]

    def delete(self, timer: int) -> None:
        self.timer = None


def _processed(runtime: Any, batches: list[list[Row]], delay: int) -> list[Row]:
    """The rows the processor emits over ``batches``, as Spark drives it: each micro-batch's
    rows per key under its watermark, then the timers the next watermark reaches."""
    from pyspark.sql import Row as SparkRow

    keys: dict[str, _Key] = {}
    watermark, largest = 0, None
    out: list[Row] = []
    for rows in batches:
        for group in sorted({r["k"] for r in rows}):
            key = keys.setdefault(group, _Key(runtime))
            mine = [
                SparkRow(k=r["k"], v=r["v"], ts=r["ts"], ms=millis(r["ts"]), order=(r["v"],))
                for r in rows
                if r["k"] == group
            ]
            emitted = key.processor.handleInputRows((group,), iter(mine), _Values(watermark))
            out += [{"k": r.k, "v": r.v, "ts": r.ts} for r in emitted]
        for row in rows:
            largest = max(largest or millis(row["ts"]), millis(row["ts"]))
        if largest is not None:
            watermark = max(watermark, largest - delay)
        for group, key in keys.items():
            if key.timer is not None and key.timer <= watermark:
                key.timer = None
                fired = key.processor.handleExpiredTimer((group,), _Values(watermark), None)
                out += [{"k": r.k, "v": r.v, "ts": r.ts} for r in fired]
    return out


def test_the_processor_follows_flinks_function_over_random_batches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Random micro-batches of three keys (late rows, earlier rows later, ties in a batch
    and across batches): the processor, its state in memory and each key's timer fired
    once the watermark reaches it (as Spark fires an event-time timer), emits exactly the
    rows of Flink's function ported to Python."""
    pytest.importorskip("pyspark")
    runtime = _processor(monkeypatch)
    rng = random.Random(28)
    for _ in range(200):
        batches = [
            [
                {"k": rng.choice("abc"), "v": rng.randrange(4), "ts": at(rng.randrange(12))}
                for _ in range(rng.randrange(5))
            ]
            for _ in range(rng.randrange(1, 6))
        ]
        delay = rng.choice([0, 1000, 3000])

        def key(r: Row) -> tuple[str, str, int]:
            return (r["k"], r["ts"], r["v"])

        got = sorted(_processed(runtime, batches, delay), key=key)
        assert got == sorted(flink_first_rows(batches, delay), key=key)


# ---------------------------------------------------------------- on Spark

#: Micro-batches of one file each (delay 2 s). a: a smaller time later in the same batch;
#: b: a smaller time later but late (behind the watermark 9:00:08); c: a tie in one batch
#: (v 0 first in the TOP's order) then a late row; d: a smaller time in a later batch, not
#: late (the watermark 9:00:18 before 9:00:19); e: a tie across batches (the kept row wins,
#: where min_by would take v 1); f: never reached by the watermark (stays in state).
BATCHES: list[list[Row]] = [
    [
        {"k": "a", "v": 1, "ts": at(10)},
        {"k": "b", "v": 1, "ts": at(9)},
        {"k": "a", "v": 2, "ts": at(7)},
    ],
    [
        {"k": "b", "v": 2, "ts": at(3)},
        {"k": "c", "v": 5, "ts": at(20)},
        {"k": "c", "v": 0, "ts": at(20)},
        {"k": "d", "v": 1, "ts": at(21)},
    ],
    [
        {"k": "c", "v": 3, "ts": at(15)},
        {"k": "d", "v": 2, "ts": at(19)},
        {"k": "e", "v": 9, "ts": at(30)},
    ],
]
LATER: list[Row] = [
    {"k": "e", "v": 1, "ts": at(30)},
    {"k": "a", "v": 0, "ts": at(1)},
    {"k": "f", "v": 1, "ts": at(60)},
    {"k": "g", "v": 4, "ts": at(40)},
]


def _rows(rows: list[Row]) -> list[tuple[str, int, int]]:
    return sorted((r["k"], r["v"], millis(r["ts"])) for r in rows)


def _run(spark: Any, tmp_path: Path, program: str, read: Any) -> None:
    """Three micro-batches, then a restart on the same checkpoint with one more (and the
    watermark's batch after it): the rows written each time equal Flink's rule's."""
    write_batches(tmp_path / "in", BATCHES)
    job = compiled(tmp_path, program)
    assert spark_codes(job) == set()
    assert "rowtime_first_row(" in generate_pyspark(job)
    run_generated(spark, tmp_path, job)
    assert _rows(read()) == _rows(flink_first_rows(BATCHES, DELAY_MS))
    write_later_batch(tmp_path / "in", LATER)
    run_generated(spark, tmp_path, compiled(tmp_path, program))
    assert _rows(read()) == _rows(flink_first_rows([*BATCHES, LATER], DELAY_MS))


def test_the_sql_form_into_an_append_sink_writes_flinks_first_rows(
    spark: Any, tmp_path: Path
) -> None:
    _run(
        spark,
        tmp_path,
        SOURCE + APPEND_SINK + ranked("ts ASC"),
        lambda: read_json_dir(tmp_path / "out"),
    )


def test_the_pipe_form_into_an_upsert_sink_writes_flinks_first_rows(
    spark: Any, tmp_path: Path
) -> None:
    program = (
        PIPE_SOURCE.replace(
            "CREATE SINK o WITH (connector = 'console', mode = 'update');",
            "CREATE SINK o WITH (connector = 'files', path = 'out', format = 'json', "
            "mode = 'update', key = 'k');",
        )
        + "INSERT INTO o FROM t |> TOP 1 BY ts ASC PER k;\n"
    )
    _run(spark, tmp_path, program, lambda: upsert_table(tmp_path / "out"))


def test_batch_mode_keeps_each_keys_first_row(spark: Any, tmp_path: Path) -> None:
    """Batch (no watermark, nothing late): Flink's batch Rank, each key's smallest time
    (ties by v, the TOP's order), as Spark's min_by aggregation gives it."""
    rows = [r for batch in [*BATCHES, LATER] for r in batch]
    write_batches(tmp_path / "in", [rows])
    program = "SET execution.mode = batch;\n" + SOURCE + APPEND_SINK + ranked("ts ASC")
    job = compiled(tmp_path, program)
    assert "rowtime_first_row(" not in generate_pyspark(job)
    run_in(job, tmp_path)
    first: dict[str, Row] = {}
    for row in sorted(rows, key=lambda r: (millis(r["ts"]), r["v"])):
        first.setdefault(row["k"], row)
    assert _rows(read_json_dir(tmp_path / "out")) == _rows(list(first.values()))


# ---------------------------------------------------------------- a second BY expression


def test_a_second_by_expression_stays_spark_min_by() -> None:
    """``ORDER BY ts ASC, v``: Flink 2.3's plan says insert-only, but it runs
    FastTop1Function, which emitted +I then +U for each smaller time over one key's rows
    10, 5, 1, 59, 0 (a 2-minute delay), late ones included (asked of Flink 2.3). Its final
    table is then each key's least (ts, v) over every row: Spark's min_by into an upsert
    sink; an append sink is refused (E0704), as it cannot take those updates."""
    upsert = SOURCE + UPSERT_SINK + ranked("ts ASC, v")
    job = flowc.compile(upsert, "d.flow", for_spark=True)
    assert not job.spark_plan.rowtime_firsts
    assert "min_by(" in generate_pyspark(job)
    with pytest.raises(flowc.CompileError) as refused:
        flowc.compile(SOURCE + APPEND_SINK + ranked("ts ASC, v"), "d.flow", for_spark=True)
    assert [d.code for d in refused.value.diagnostics] == ["E0704"]


def test_complete_mode_is_refused_at_the_top() -> None:
    program = PIPE_SOURCE.replace("mode = 'update'", "mode = 'complete'")
    with pytest.raises(flowc.CompileError) as refused:
        flowc.compile(
            program + "INSERT INTO o FROM t |> TOP 1 BY ts PER k;\n", "d.flow", for_spark=True
        )
    assert [d.code for d in refused.value.diagnostics] == ["E0701"]


# ---------------------------------------------------------------- state and restarts


def _verdict(old: str, new: str) -> tuple[Verdict, list[str]]:
    def manifest(text: str) -> Any:
        return describe_state(flowc.compile(text, "job.flow", for_spark=True))

    comparison = compare(manifest(old), manifest(new))
    return comparison.verdict, [f.message for _, f in comparison.findings()]


def test_the_processors_state_is_described_and_guarded() -> None:
    """The processor's state in the manifest; a TOP that ran as Spark's min_by (a second BY
    expression) and now runs as the processor, or back, on one checkpoint is refused: the
    two keep different state under one operator."""
    upsert = SOURCE + UPSERT_SINK
    job = flowc.compile(upsert + ranked("ts ASC"), "job.flow", for_spark=True)
    (query,) = describe_state(job).queries
    (operator,) = query.operators
    assert operator.processor is not None and operator.processor.name == "RowtimeFirstRow"
    for old, new in [("ts ASC, v", "ts ASC"), ("ts ASC", "ts ASC, v")]:
        verdict, messages = _verdict(upsert + ranked(old), upsert + ranked(new))
        assert verdict is Verdict.INCOMPATIBLE, messages
        assert any("min_by" in m and "RowtimeFirstRow" in m for m in messages), messages
    assert _verdict(upsert + ranked("ts ASC"), upsert + ranked("ts ASC"))[0] is Verdict.UNCHANGED
