"""Flink's window_time on Spark (issue 27): per-minute counts cascaded into five-minute
sums over ``window_time`` (the minute's end minus 1 ms, keeping the watermark) group as
Flink groups them, in the pipe form and in SQL, across micro-batches and a restart; the
control cascades over ``window_end`` and gets what docs/language.md says it gets.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from tests.helpers.files import Row, read_json_dir, source, write_batches
from tests.helpers.spark_run import compiled, run_generated, spark_codes

DAY = "2026-03-01T"
MS = timedelta(milliseconds=1)
DELAY = timedelta(seconds=5)


def _row(item: int, time: str) -> Row:
    return {"item": item, "ts": DAY + time}


#: Clicks around 10:00, one file per micro-batch. The second batch's last click moves the
#: watermark to 09:59:59.999 exactly: the minute [09:59, 10:00) closes in the third, with
#: a window_time equal to the watermark before it (Spark must not drop it as late).
CLICKS: list[list[Row]] = [
    [_row(1, "09:57:10"), _row(2, "09:58:20"), _row(1, "09:59:30")],
    [_row(2, "09:59:45"), _row(1, "09:59:59.500"), _row(1, "10:00:04.999")],
    [_row(2, "10:00:30"), _row(1, "10:01:10")],
    [_row(1, "10:03:00"), _row(2, "10:04:59"), _row(2, "10:04:59.999")],
    [_row(1, "10:06:00"), _row(2, "10:10:30")],
]
#: The batches the first run reads; the rest come after a restart on its checkpoints.
FIRST_RUN = 3

PER_MINUTE_PIPE = (
    "CREATE VIEW per_minute AS FROM clicks |> KEY BY item\n"
    "  |> WINDOW TUMBLE(ts, INTERVAL 1 MINUTE) |> AGGREGATE count(*) AS n, window_time;\n"
)
PER_MINUTE_SQL = (
    "CREATE VIEW per_minute_sql AS SELECT item, window(ts, '1 minute') AS w,\n"
    "  window_time(w) AS t, count(*) AS n FROM clicks GROUP BY item, w;\n"
)
SINKS = "".join(
    f"CREATE SINK {name} WITH (connector = 'files', path = '{name}', format = 'json');\n"
    for name in ("minutes", "minutes_text", "five_pipe", "five_sql", "five_end", "ten_hop")
)
PROGRAM = (
    source("clicks", "item BIGINT, ts TIMESTAMP", "5 SECONDS")
    + "SET max_parallelism = 16;\n"
    + PER_MINUTE_PIPE
    + PER_MINUTE_SQL
    + SINKS
    + "INSERT INTO minutes FROM per_minute;\n"
    # JSON writes times to the millisecond: as text, the value shows all its digits.
    + "INSERT INTO minutes_text FROM per_minute_sql\n"
    + "  |> SELECT item, CAST(t AS STRING) AS t, CAST(w.end AS STRING) AS e, n;\n"
    + "INSERT INTO five_pipe FROM per_minute\n"
    + "  |> WINDOW TUMBLE(window_time, INTERVAL 5 MINUTES)\n"
    + "  |> AGGREGATE sum(n) AS clicks, window_time AS t;\n"
    + "INSERT INTO five_sql SELECT window.start AS s, window.end AS e, window_time(window),\n"
    + "  sum(n) AS clicks FROM per_minute_sql GROUP BY window(t, '5 minutes');\n"
    + "INSERT INTO ten_hop FROM per_minute\n"
    + "  |> WINDOW HOP(window_time, INTERVAL 10 MINUTES, INTERVAL 5 MINUTES)\n"
    + "  |> AGGREGATE sum(n) AS clicks;\n"
    + "INSERT INTO five_end FROM per_minute\n"
    + "  |> WINDOW TUMBLE(window_end, INTERVAL 5 MINUTES) |> AGGREGATE sum(n) AS clicks;\n"
)


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=None)


def _final_watermark() -> datetime:
    return max(datetime.fromisoformat(r["ts"]) for b in CLICKS for r in b) - DELAY


def _minutes() -> dict[tuple[int, datetime], int]:
    """Flink's one-minute counts per item, by the minute's start."""
    counts: Counter[tuple[int, datetime]] = Counter()
    for batch in CLICKS:
        for row in batch:
            ts = datetime.fromisoformat(row["ts"])
            counts[(row["item"], ts.replace(second=0, microsecond=0))] += 1
    return dict(counts)


def _five(by_end: bool) -> list[tuple[datetime, datetime, datetime, int]]:
    """The five-minute sums of the closed minutes: each minute falls in the window holding
    its window_time (Flink: end - 1 ms), or its window_end (the control)."""
    watermark = _final_watermark()
    totals: Counter[datetime] = Counter()
    for (_, start), n in _minutes().items():
        end = start + timedelta(minutes=1)
        if end > watermark:
            continue
        time = end if by_end else end - MS
        totals[time.replace(minute=time.minute - time.minute % 5, second=0, microsecond=0)] += n
    five = timedelta(minutes=5)
    return sorted(
        (s, s + five, s + five - MS, n) for s, n in totals.items() if s + five <= watermark
    )


def test_window_time_cascades_as_flink(spark: Any, tmp_path: Path) -> None:
    write_batches(tmp_path / "clicks", CLICKS[:FIRST_RUN])
    job = compiled(tmp_path, PROGRAM)
    assert spark_codes(job) == set()
    run_generated(spark, tmp_path, job)
    write_batches(tmp_path / "clicks", CLICKS)  # the same files, then the later ones
    run_generated(spark, tmp_path, compiled(tmp_path, PROGRAM))

    minutes = sorted(
        (
            r["item"],
            _time(r["window_start"]),
            _time(r["window_end"]),
            _time(r["window_time"]),
            r["n"],
        )
        for r in read_json_dir(tmp_path / "minutes")
    )
    expected_minutes = sorted(
        (item, start, start + timedelta(minutes=1), start + timedelta(minutes=1) - MS, n)
        for (item, start), n in _minutes().items()
        if start + timedelta(minutes=1) <= _final_watermark()
    )
    assert minutes == expected_minutes
    assert next(list(r) for r in read_json_dir(tmp_path / "minutes")) == [
        "item",
        "window_start",
        "window_end",
        "window_time",
        "n",
    ]

    texts = sorted(
        (r["item"], r["e"], r["t"], r["n"]) for r in read_json_dir(tmp_path / "minutes_text")
    )
    assert texts == sorted(
        (item, f"{end:%Y-%m-%d %H:%M:%S}", f"{end - MS:%Y-%m-%d %H:%M:%S.%f}"[:-3], n)
        for item, _, end, _, n in expected_minutes
    )

    flink = _five(by_end=False)
    pipe = sorted(
        (_time(r["window_start"]), _time(r["window_end"]), _time(r["t"]), r["clicks"])
        for r in read_json_dir(tmp_path / "five_pipe")
    )
    sql = sorted(
        (_time(r["s"]), _time(r["e"]), _time(r["window_time"]), r["clicks"])
        for r in read_json_dir(tmp_path / "five_sql")
    )
    assert pipe == flink
    assert sql == flink
    nine_fifty_five = datetime(2026, 3, 1, 9, 55)
    # The minute [09:59, 10:00) is in [09:55, 10:00), as in Flink: 5 clicks, not 2.
    assert (
        nine_fifty_five,
        nine_fifty_five + timedelta(minutes=5),
        datetime(2026, 3, 1, 9, 59, 59, 999000),
        5,
    ) in flink

    # Sliding: each minute is in the two ten-minute windows holding its window_time.
    hops: Counter[datetime] = Counter()
    for (_, start), n in _minutes().items():
        end = start + timedelta(minutes=1)
        if end <= _final_watermark():
            time = end - MS
            five = time.replace(minute=time.minute - time.minute % 5, second=0, microsecond=0)
            for s in (five - timedelta(minutes=5), five):
                hops[s] += n
    ten = timedelta(minutes=10)
    assert sorted(
        (_time(r["window_start"]), _time(r["window_end"]), r["clicks"])
        for r in read_json_dir(tmp_path / "ten_hop")
    ) == sorted((s, s + ten, n) for s, n in hops.items() if s + ten <= _final_watermark())

    control = sorted(
        (_time(r["window_start"]), _time(r["window_end"]), r["clicks"])
        for r in read_json_dir(tmp_path / "five_end")
    )
    assert control == [(s, e, n) for s, e, _, n in _five(by_end=True)]
    assert control != [(s, e, n) for s, e, _, n in flink]


def test_keyed_by_window_time_spark_drops_a_row_so_it_is_refused(
    spark: Any, tmp_path: Path
) -> None:
    """Why E0733: run anyway, an AGGREGATE keyed by window_time loses the minute that
    closes when the watermark was its window_time exactly (09:59:59.999, after the click
    at 10:00:04.999), which keyed by window_end it keeps."""
    write_batches(tmp_path / "clicks", CLICKS)
    program = (
        source("clicks", "item BIGINT, ts TIMESTAMP", "5 SECONDS")
        + "SET max_parallelism = 16;\n"
        + PER_MINUTE_PIPE
        + "CREATE SINK by_time WITH (connector = 'files', path = 'by_time', format = 'json');\n"
        + "CREATE SINK by_end WITH (connector = 'files', path = 'by_end', format = 'json');\n"
        + "INSERT INTO by_time FROM per_minute |> KEY BY window_time |> AGGREGATE sum(n) AS n;\n"
        + "INSERT INTO by_end FROM per_minute |> KEY BY window_end |> AGGREGATE sum(n) AS n;\n"
    )
    job = compiled(tmp_path, program)
    assert spark_codes(job) == {"E0733"}
    run_generated(spark, tmp_path, job)
    totals: Counter[datetime] = Counter()
    for (_, start), n in _minutes().items():
        if start + timedelta(minutes=1) <= _final_watermark():
            totals[start + timedelta(minutes=1)] += n
    by_end = sorted((_time(r["window_end"]), r["n"]) for r in read_json_dir(tmp_path / "by_end"))
    assert by_end == sorted(totals.items())
    by_time = {_time(r["window_time"]) + MS: r["n"] for r in read_json_dir(tmp_path / "by_time")}
    ten = datetime(2026, 3, 1, 10, 0)
    assert ten not in by_time
    assert by_time == {end: n for end, n in totals.items() if end != ten}


#: The same cascade as Flink users write it: a group window's TUMBLE_ROWTIME, and a window
#: table function's window_time, each cascaded into five-minute windows.
FLINK_PROGRAM = (
    "SET sql.dialect = 'flink';\n"
    + source("clicks", "item BIGINT, ts TIMESTAMP", "5 SECONDS")
    + "SET max_parallelism = 16;\n"
    + "CREATE VIEW per_minute AS SELECT item, TUMBLE_ROWTIME(ts, INTERVAL '1' MINUTE) AS rt,\n"
    + "  COUNT(*) AS n FROM clicks GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE), item;\n"
    + "CREATE VIEW per_minute_tvf AS SELECT item, window_time, COUNT(*) AS n\n"
    + "  FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '1' MINUTES))\n"
    + "  GROUP BY item, window_start, window_end, window_time;\n"
    + "".join(
        f"CREATE SINK {name} WITH (connector = 'files', path = '{name}', format = 'json');\n"
        for name in ("five_group", "five_tvf")
    )
    + "INSERT INTO five_group SELECT TUMBLE_START(rt, INTERVAL '5' MINUTE) AS s,\n"
    + "  TUMBLE_END(rt, INTERVAL '5' MINUTE) AS e, SUM(n) AS clicks\n"
    + "  FROM per_minute GROUP BY TUMBLE(rt, INTERVAL '5' MINUTE);\n"
    + "INSERT INTO five_tvf SELECT window_start AS s, window_end AS e, SUM(n) AS clicks\n"
    + "  FROM TABLE(TUMBLE(TABLE per_minute_tvf, DESCRIPTOR(window_time), INTERVAL '5' MINUTES))\n"
    + "  GROUP BY window_start, window_end;\n"
)


def test_flink_rowtime_and_window_time_cascade_as_flink(spark: Any, tmp_path: Path) -> None:
    """In the Flink dialect, TUMBLE_ROWTIME(...) of a group window and window_time of a
    window table function are flowc's window_time: the cascaded five-minute sums equal
    Flink's (the minute [09:59, 10:00) in [09:55, 10:00)), across a restart."""
    write_batches(tmp_path / "clicks", CLICKS[:FIRST_RUN])
    job = compiled(tmp_path, FLINK_PROGRAM)
    assert spark_codes(job) == set()
    run_generated(spark, tmp_path, job)
    write_batches(tmp_path / "clicks", CLICKS)
    run_generated(spark, tmp_path, compiled(tmp_path, FLINK_PROGRAM))
    flink = [(s, e, n) for s, e, _, n in _five(by_end=False)]
    for sink in ("five_group", "five_tvf"):
        rows = sorted(
            (_time(r["s"]), _time(r["e"]), r["clicks"]) for r in read_json_dir(tmp_path / sink)
        )
        assert rows == flink, sink


#: The Flink SQL cookbook's chained windows: each window's rowtime named window_end, the
#: name of the window's own end (flowc's AGGREGATE outputs window_start and window_end).
COOKBOOK_PROGRAM = (
    "SET sql.dialect = 'flink';\n"
    + source("clicks", "item BIGINT, ts TIMESTAMP", "5 SECONDS")
    + "SET max_parallelism = 16;\n"
    + "CREATE TEMPORARY VIEW per_minute AS SELECT\n"
    + "  TUMBLE_START(ts, INTERVAL '1' MINUTE) AS window_start,\n"
    + "  TUMBLE_ROWTIME(ts, INTERVAL '1' MINUTE) AS window_end, COUNT(*) AS n\n"
    + "FROM clicks GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE);\n"
    + "CREATE TEMPORARY VIEW per_five AS SELECT\n"
    + "  TUMBLE_START(window_end, INTERVAL '5' MINUTE) AS window_start,\n"
    + "  TUMBLE_ROWTIME(window_end, INTERVAL '5' MINUTE) AS window_end, SUM(n) AS clicks\n"
    + "FROM per_minute GROUP BY TUMBLE(window_end, INTERVAL '5' MINUTE);\n"
    + "CREATE TABLE five (window_start TIMESTAMP(3), window_end TIMESTAMP(3), clicks BIGINT)\n"
    + "  WITH (connector = 'files', path = 'five', format = 'json');\n"
    + "INSERT INTO five SELECT window_start, window_end, clicks FROM per_five;\n"
)


def test_rowtime_named_window_end_cascades_as_flink(spark: Any, tmp_path: Path) -> None:
    """TUMBLE_ROWTIME(...) AS window_end, cascaded (the cookbook's chained windows): the
    five-minute sums equal Flink's, each window_end the window's rowtime (end - 1 ms),
    across a restart."""
    write_batches(tmp_path / "clicks", CLICKS[:FIRST_RUN])
    job = compiled(tmp_path, COOKBOOK_PROGRAM)
    assert spark_codes(job) == set()
    run_generated(spark, tmp_path, job)
    write_batches(tmp_path / "clicks", CLICKS)
    run_generated(spark, tmp_path, compiled(tmp_path, COOKBOOK_PROGRAM))
    flink = [(s, rowtime, n) for s, _, rowtime, n in _five(by_end=False)]
    rows = sorted(
        (_time(r["window_start"]), _time(r["window_end"]), r["clicks"])
        for r in read_json_dir(tmp_path / "five")
    )
    assert rows == flink
    assert rows
