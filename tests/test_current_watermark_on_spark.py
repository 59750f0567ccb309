"""What Spark offers for Flink's CURRENT_WATERMARK, measured: the facts behind how flowc
runs it (docs/language.md, "CURRENT_WATERMARK on Spark"; the jobs themselves are tested
in tests/test_flink_current_watermark.py).

Spark's counterpart of Flink's watermark is the micro-batch's: the largest event time of
the earlier batches minus the delay. Only a stateful processor reads it
(``transformWithState`` in EventTime mode). These tests show that it reads exactly what
plain Python predicts, and why flowc's processor is built as it is: the RocksDB store it
needs (the job moves to it), the rows Spark drops before it unless the input's watermark
is taken off (flowc takes it off), the late rows no event-time step may follow (only a
condition keeping rows ahead of the watermark keeps one), and the pandas form's floats
(flowc uses the row form). If a Spark upgrade lifts one of them, its test fails and the
design is due again.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from flowc.analyze.state_store import DEFAULT_BACKEND, PROVIDERS

pytest.importorskip("pandas")
pytest.importorskip("pyarrow")

ROCKSDB = PROVIDERS["rocksdb"]
#: The store flowc gives a job unless it says otherwise (Flink's hashmap).
DEFAULT_STORE = PROVIDERS[DEFAULT_BACKEND]
PROVIDER = "spark.sql.streaming.stateStore.providerClass"
DELAY = timedelta(seconds=15)
T0 = datetime(2026, 3, 1, 9, 0, 0)

#: One file per micro-batch; (ip, seconds after T0). Late rows in the 2nd, 3rd and 4th
#: file, some behind the watermark of the batch before theirs (z at 5 s, i at 160 s).
FILES: list[list[tuple[str, int]]] = [
    [("a", 10), ("b", 60), ("a", 20)],
    [("c", 40), ("d", 50), ("e", 120), ("a", 44)],
    [("f", 90), ("g", 110), ("h", 180), ("z", 5)],
    [("i", 160), ("j", 170), ("k", 270)],
]
RESTART_BEFORE = 3


def batch_watermarks() -> list[datetime | None]:
    """Plain Python's watermark for each file's micro-batch: the largest time of the files
    before it minus the delay; None (Spark's 0) before the first."""
    marks: list[datetime | None] = []
    latest: datetime | None = None
    for rows in FILES:
        marks.append(None if latest is None else latest - DELAY)
        newest = max(T0 + timedelta(seconds=s) for _, s in rows)
        latest = newest if latest is None else max(latest, newest)
    return marks


def expected_late() -> list[tuple[str, datetime, datetime]]:
    """Flink's late rows with the batch's watermark: at or behind it."""
    out = []
    for rows, mark in zip(FILES, batch_watermarks(), strict=True):
        for ip, s in rows:
            ts = T0 + timedelta(seconds=s)
            if mark is not None and ts <= mark:
                out.append((ip, ts, mark))
    return sorted(out)


def expected_windows() -> list[tuple[datetime, int]]:
    """The on-time rows counted per closed minute: a window is emitted once the final
    watermark (after the last file) has passed its end."""
    counts: dict[datetime, int] = {}
    late = {(ip, ts) for ip, ts, _ in expected_late()}
    final = max(T0 + timedelta(seconds=s) for rows in FILES for _, s in rows) - DELAY
    for rows in FILES:
        for ip, s in rows:
            ts = T0 + timedelta(seconds=s)
            if (ip, ts) not in late:
                start = ts.replace(second=0)
                counts[start] = counts.get(start, 0) + 1
    return sorted((s, n) for s, n in counts.items() if s + timedelta(minutes=1) <= final)


def write_file(folder: Path, index: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"part-{index:03d}.json"
    rows = [{"ip": ip, "ts": (T0 + timedelta(seconds=s)).isoformat()} for ip, s in FILES[index]]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    stamp = 1_700_000_000 + index * 10
    os.utime(path, (stamp, stamp))


@contextmanager
def store(spark: Any, provider: str) -> Iterator[Any]:
    """The shared session with ``provider`` for the queries started inside."""
    before = spark.conf.get(PROVIDER, None)
    spark.conf.set(PROVIDER, provider)
    try:
        yield spark
    finally:
        if before is None:
            spark.conf.unset(PROVIDER)
        else:
            spark.conf.set(PROVIDER, before)


@pytest.fixture
def rocksdb(spark: Any) -> Iterator[Any]:
    """The shared session with the RocksDB store for the queries this test starts."""
    with store(spark, ROCKSDB) as session:
        yield session


def routed(spark: Any, inputs: Path, *, late: bool, strip: bool, declare: bool) -> Any:
    """The source's rows through a processor keeping the late (or on-time) ones, each with
    the watermark the processor read. ``strip`` takes the watermark off the time column
    going in; ``declare`` makes it the output's event time."""
    from pyspark.sql import functions as F
    from pyspark.sql.streaming import StatefulProcessor
    from pyspark.sql.types import LongType, StringType, StructField, StructType, TimestampType

    class Route(StatefulProcessor):  # local: pickled by value for the Python workers
        def init(self, handle: Any) -> None:
            pass

        def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Iterator[Any]:
            mark = timerValues.getCurrentWatermarkInMs()
            for frame in rows:
                behind = (frame["micros"] <= mark * 1000) & (mark > 0)
                kept = frame[behind] if late else frame[~behind]
                yield kept.assign(wm=mark)[["ip", "ts", "wm"]]

        def close(self) -> None:
            pass

    schema = StructType(
        [
            StructField("ip", StringType()),
            StructField("ts", TimestampType()),
            StructField("wm", LongType()),
        ]
    )
    source = (
        spark.readStream.schema("ip STRING, ts TIMESTAMP")
        .option("maxFilesPerTrigger", 1)
        .json(str(inputs))
        .withWatermark("ts", "15 seconds")
    )
    ts = F.col("ts").alias("ts", metadata={}) if strip else F.col("ts")
    rows = source.select(
        "ip", ts, F.unix_micros("ts").alias("micros"), (F.abs(F.hash("ip")) % 4).alias("b")
    )
    extra = {"eventTimeColumnName": "ts"} if declare else {}
    return rows.groupBy("b").transformWithStateInPandas(
        Route(), schema, "Append", "EventTime", **extra
    )


def run(frame: Any, checkpoint: Path, collect: Callable[[Any], None]) -> None:
    query = (
        frame.writeStream.outputMode("append")
        .foreachBatch(lambda df, _batch: collect(df))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


def late_rows(
    spark: Any, tmp_path: Path, *, strip: bool
) -> tuple[list[tuple[str, datetime, datetime]], list[tuple[datetime, int]]]:
    """The late rows and the on-time rows' closed minutes, from two queries over the
    files, both stopped and restarted from their checkpoints before the last file."""
    from pyspark.sql import functions as F

    late: list[tuple[str, datetime, datetime]] = []
    windows: list[tuple[datetime, int]] = []

    def collect_late(df: Any) -> None:
        frame = df.select("ip", "ts", F.timestamp_millis("wm").alias("wm"))
        late.extend((r.ip, r.ts, r.wm) for r in frame.collect())

    def collect_windows(df: Any) -> None:
        windows.extend((r.start, r.n) for r in df.collect())

    for index in range(len(FILES)):
        write_file(tmp_path / "in", index)
        if index in (RESTART_BEFORE - 1, len(FILES) - 1):
            frame = routed(spark, tmp_path / "in", late=True, strip=strip, declare=False)
            run(frame, tmp_path / "late", collect_late)
            on_time = routed(spark, tmp_path / "in", late=False, strip=strip, declare=True)
            counted = (
                on_time.groupBy(F.window("ts", "1 minute"))
                .agg(F.count("ip").alias("n"))
                .select(F.col("window.start").alias("start"), "n")
            )
            run(counted, tmp_path / "windows", collect_windows)
    return sorted(late), sorted(windows)


def test_a_processor_reads_the_batch_watermark_plain_python_computes(
    rocksdb: Any, tmp_path: Path
) -> None:
    """The cookbook's routing, done with a processor: late rows with the watermark they
    were judged by, on-time rows counted per minute, over four files and a restart."""
    late, windows = late_rows(rocksdb, tmp_path, strip=True)
    assert late == expected_late()
    assert windows == expected_windows()
    assert len(late) == 5 and len(windows) == 4


def test_rows_behind_the_batch_before_never_reach_a_processor_whose_input_has_the_watermark(
    rocksdb: Any, tmp_path: Path
) -> None:
    """Spark drops a row at or behind the previous batch's watermark before the processor:
    z at 5 s against 45 s, and i at 160 s against 165 s, the watermark of the batch with no
    data Spark ran after the third file, before the restart (the watermark had moved). Routing
    them needs the time column's watermark taken off the processor's input."""
    got, _ = late_rows(rocksdb, tmp_path, strip=False)
    marks = batch_watermarks()
    previous = [
        marks[i] if i == RESTART_BEFORE else None if i == 0 else marks[i - 1]
        for i in range(len(FILES))
    ]
    dropped = {
        (ip, T0 + timedelta(seconds=s))
        for rows, mark in zip(FILES, previous, strict=True)
        for ip, s in rows
        if mark is not None and T0 + timedelta(seconds=s) <= mark
    }
    assert dropped == {("z", T0 + timedelta(seconds=5)), ("i", T0 + timedelta(seconds=160))}
    assert got == [row for row in expected_late() if row[:2] not in dropped]


def test_late_rows_declared_event_time_fail_the_query(rocksdb: Any, tmp_path: Path) -> None:
    """Late rows cannot go on to an event-time step: as the output's event time they are
    older than the watermark and Spark stops the query."""
    from pyspark.errors import PySparkException

    for index in range(len(FILES)):
        write_file(tmp_path / "in", index)
    frame = routed(rocksdb, tmp_path / "in", late=True, strip=True, declare=True)
    with pytest.raises(PySparkException, match="EMITTING_ROWS_OLDER_THAN_WATERMARK_NOT_ALLOWED"):
        run(frame, tmp_path / "ck", lambda df: df.collect())


def test_the_hdfs_backed_store_flowc_defaults_to_refuses_the_processor(
    spark: Any, tmp_path: Path
) -> None:
    """flowc's default store (Flink's hashmap) cannot run a processor: a filter reading
    the watermark would move its whole query to RocksDB."""
    from pyspark.errors import PySparkException

    write_file(tmp_path / "in", 0)
    with store(spark, DEFAULT_STORE):
        frame = routed(spark, tmp_path / "in", late=True, strip=True, declare=False)
        with pytest.raises(PySparkException, match="STORE_BACKEND_NOT_SUPPORTED_FOR_TWS"):
            run(frame, tmp_path / "ck", lambda df: df.collect())


def test_an_integer_column_with_nulls_reaches_the_processor_as_floats(rocksdb: Any) -> None:
    """The rows cross into pandas: a BIGINT column with a NULL arrives as float64, which
    holds no integer past 2**53 exactly."""
    from pyspark.sql.streaming import StatefulProcessor

    class Types(StatefulProcessor):
        def init(self, handle: Any) -> None:
            pass

        def handleInputRows(self, key: Any, rows: Any, timerValues: Any) -> Iterator[Any]:
            import pandas as pd

            for frame in rows:
                yield pd.DataFrame({"dtype": [str(frame["v"].dtype)]})

        def close(self) -> None:
            pass

    frame = rocksdb.createDataFrame([(0, 2**53 + 1), (0, None)], "g INT, v BIGINT")
    out = frame.groupBy("g").transformWithStateInPandas(Types(), "dtype STRING", "Append", "None")
    assert [r.dtype for r in out.collect()] == ["float64"]


def test_a_window_leaves_out_rows_of_closed_windows_and_counts_them_dropped(
    spark: Any, tmp_path: Path
) -> None:
    """What a window does without CURRENT_WATERMARK: it keeps a late
    row whose window is still open (y at 30 s in the third batch, behind its watermark of
    45 s) and leaves out, counting it in numRowsDroppedByWatermark, one whose window the
    watermark of the batch before has closed (w at 20 s against 115 s): the minute from 0 s
    counts a and y."""
    from pyspark.sql import functions as F

    files = [[("a", 10), ("b", 60)], [("c", 70), ("d", 130)], [("y", 30), ("x", 100)], [("w", 20)]]
    folder = tmp_path / "in"
    folder.mkdir()
    for index, rows in enumerate(files):
        path = folder / f"part-{index:03d}.json"
        lines = [
            json.dumps({"ip": ip, "ts": (T0 + timedelta(seconds=s)).isoformat()}) for ip, s in rows
        ]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        os.utime(path, (1_700_000_000 + index * 10,) * 2)
    counted = (
        spark.readStream.schema("ip STRING, ts TIMESTAMP")
        .option("maxFilesPerTrigger", 1)
        .json(str(folder))
        .withWatermark("ts", "15 seconds")
        .groupBy(F.window("ts", "1 minute"))
        .agg(F.count("ip").alias("n"))
        .select(F.col("window.start").alias("start"), "n")
    )
    windows: list[tuple[datetime, int]] = []
    query = (
        counted.writeStream.outputMode("append")
        .foreachBatch(lambda df, _b: windows.extend((r.start, r.n) for r in df.collect()))
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    dropped = sum(
        operator["numRowsDroppedByWatermark"]
        for progress in query.recentProgress
        for operator in json.loads(progress.json)["stateOperators"]
    )
    assert dropped == 1
    # The minute from 60 s stays open: the last watermark is 130 s - 15 s.
    assert sorted(windows) == [(T0, 2)]
