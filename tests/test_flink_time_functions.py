"""Flink's time functions in the Flink dialect (issue 27), as the Flink SQL cookbook uses
them. CONVERT_TZ(s, from, to) gives Flink's string: the answers real Flink 2.3 gave for
~8,500 inputs (random times 1900-9998, every hour around the DST transitions of 21 zones,
short ids, GMT offsets, unknown zones, malformed text), recorded in
tests/data/flink_convert_tz.json, are what Spark computes; where Flink may read the text
leniently the job fails. TUMBLE_PROCTIME (HOP_, SESSION_) selected is the time the
window's row is written: on Spark the micro-batch's time, read after the aggregation."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections import defaultdict
from datetime import date, datetime, time, timedelta
from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc.program import ExtendStep
from flowc.sql.spark_sql import sql_of
from tests.helpers.files import Row, read_json_dir, source, write_batches
from tests.helpers.flink_worker import run_flink
from tests.helpers.plans import job_graph_json
from tests.helpers.spark_run import compiled, into_memory, run_generated, spark_codes

FLINK_PYTHON = os.environ.get("FLOWC_FLINK_PYTHON") or None

#: [s, from, to, Flink's CONVERT_TZ(s, from, to)], asked of Flink 2.3 (test_against_flink_*).
ANSWERS: list[list[str | None]] = json.loads(
    (Path(__file__).parent / "data" / "flink_convert_tz.json").read_text(encoding="utf-8")
)

TZ_PROGRAM = """SET sql.dialect = 'flink';
CREATE SOURCE s (t STRING, a STRING, b STRING) WITH (connector = 'datagen');
CREATE SINK o WITH (connector = 'console');
INSERT INTO o FROM s |> EXTEND CONVERT_TZ(t, a, b) AS v;
"""

_STRICT = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(?![0-9])")
_NO_READING = re.compile(r"(?s)\d.*-.*\d.*-.*\d.*:.*\d.*:.*\d")


#: Zones whose offsets java.util.TimeZone and java.time disagree on past 2036 (Java 17).
_FAR_APART = {"Africa/Casablanca", "Africa/El_Aaiun", "Africa/Windhoek", "Asia/Gaza", "Asia/Hebron"}


def _kind(text: str, zones: tuple[str | None, ...] = ()) -> str:
    """Plain Python's reading of the text: ``read`` (yyyy-MM-dd HH:mm:ss, valid, 1900 to
    9998, anything not a digit after it), ``none`` (not the digits, '-', ':' a
    SimpleDateFormat parse needs: Flink's NULL) or ``lenient`` (what Flink may still read,
    or a time past 2036 in a zone the two Java libraries disagree on: the job fails)."""
    if not _NO_READING.search(text):
        return "none"
    if _STRICT.match(text):
        try:
            year = datetime.strptime(text[:19], "%Y-%m-%d %H:%M:%S").year
        except ValueError:
            return "lenient"
        if set(zones) & _FAR_APART and text[:19] >= "2036-12-30":
            return "lenient"
        if 1900 <= year <= 9998:
            return "read"
    return "lenient"


@pytest.fixture
def los_angeles(spark: Any) -> Any:
    """The session in a zone with DST gaps: flowc's SQL must not pass through it."""
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/Los_Angeles")
    yield spark
    spark.conf.set("spark.sql.session.timeZone", before)


def _convert_tz_sql() -> str:
    job = flowc.compile(TZ_PROGRAM, "j.flow")
    (step,) = job.program.inserts[0].stream.steps
    assert isinstance(step, ExtendStep)
    assert job.program.inserts[0].stream.schema[-1].type == "STRING"
    return sql_of(step.node.items[0].expr)


def _frame(spark: Any, rows: list[tuple[int, str | None, str | None, str | None]]) -> Any:
    return spark.createDataFrame(rows, schema="i INT, t STRING, a STRING, b STRING")


def test_convert_tz_gives_flinks_strings(los_angeles: Any) -> None:
    """Every recorded input Spark reads (strictly, or as no reading at all) gives Flink's
    answer: zones from a column, fractions dropped, DST gaps and overlaps, year ends; in
    a session whose own zone has DST gaps."""
    sql = _convert_tz_sql()
    rows = [
        (i, s, a, b) for i, (s, a, b, _) in enumerate(ANSWERS) if _kind(str(s), (a, b)) != "lenient"
    ]
    frame = _frame(los_angeles, rows)
    got = {r["i"]: r["v"] for r in frame.selectExpr("i", f"{sql} AS v").collect()}
    wrong = [(ANSWERS[i], v) for i, v in got.items() if v != ANSWERS[i][3]]
    assert wrong == []
    assert len(got) > 2500
    # the inputs are not all alike: NULLs, other zones, overlaps, unknown zones (GMT)
    assert sum(v is None for v in got.values()) >= 10
    assert sum(1 for i in got if ANSWERS[i][1] == "Nowhere/Land") >= 10


def test_convert_tz_of_null_is_null(spark: Any) -> None:
    sql = _convert_tz_sql()
    rows = [
        (0, None, "UTC", "UTC"),
        (1, "2024-07-01 12:00:00", None, "UTC"),
        (2, "2024-07-01 12:00:00", "UTC", None),
        (3, "2024-07-01 12:00:00", "UTC", "Asia/Tokyo"),
    ]
    got = [r["v"] for r in _frame(spark, rows).selectExpr(f"{sql} AS v").orderBy("i").collect()]
    assert got == [None, None, None, "2024-07-01 21:00:00"]


LENIENT = [
    ("2024-02-30 12:00:00", "2024-03-01 12:00:00"),  # a day past the month's end
    ("2024-07-01 24:00:00", "2024-07-02 00:00:00"),
    ("2024-7-1 1:2:3", "2024-07-01 01:02:03"),  # single digits
    ("2024-07-01  12:00:00", "2024-07-01 12:00:00"),  # two spaces
    ("1899-12-31 23:59:59", "1899-12-31 23:59:59"),  # before 1900
    ("2024-07-01T12:00:00", None),
]


@pytest.mark.parametrize(("text", "flinks"), LENIENT)
def test_convert_tz_fails_the_job_where_flink_may_read_leniently(
    spark: Any, text: str, flinks: str | None
) -> None:
    from pyspark.errors import PySparkException

    assert _kind(text) == "lenient"
    recorded = [row[3] for row in ANSWERS if row[:3] == [text, "UTC", "UTC"]]
    assert recorded in ([flinks], [])
    frame = _frame(spark, [(0, text, "UTC", "UTC")])
    with pytest.raises(PySparkException, match="CONVERT_TZ: Flink may read this text"):
        frame.selectExpr(f"{_convert_tz_sql()} AS v").collect()


def test_convert_tz_fails_the_job_past_2036_where_the_java_libraries_differ(
    spark: Any,
) -> None:
    from pyspark.errors import PySparkException

    recorded = [
        r for r in ANSWERS if _kind(str(r[0])) == "read" and _kind(str(r[0]), r[1:3]) != "read"
    ]
    assert recorded  # Flink answered them; Spark's java.time would give other offsets
    frame = _frame(spark, [(0, "2040-06-01 12:00:00", "UTC", "Africa/Casablanca")])
    with pytest.raises(PySparkException, match="CONVERT_TZ: past 2036"):
        frame.selectExpr(f"{_convert_tz_sql()} AS v").collect()


def test_convert_tz_refuses_a_zone_java_time_cannot_read(spark: Any) -> None:
    """'GMT+20' from a column: java.util.TimeZone (Flink) reads it, java.time (Spark)
    reads offsets up to 18 hours only: the job fails with flowc's message."""
    from pyspark.errors import PySparkException

    frame = _frame(spark, [(0, "2024-07-01 12:00:00", "GMT+20", "UTC")])
    with pytest.raises(PySparkException, match="CONVERT_TZ: a GMT offset past 18 hours"):
        frame.selectExpr(f"{_convert_tz_sql()} AS v").collect()


def test_convert_tz_is_allowed_in_an_untrusted_program() -> None:
    """It reads zones with reflect('java.util.TimeZone', 'getTimeZone', z), which an
    untrusted program may call (no other reflect)."""
    flowc.compile(TZ_PROGRAM, "j.flow", trusted=False)
    other = TZ_PROGRAM.replace(
        "CONVERT_TZ(t, a, b)", "reflect('java.lang.System', 'getProperty', t)"
    ).replace("SET sql.dialect = 'flink';\n", "")
    with pytest.raises(flowc.CompileError) as refused:
        flowc.compile(other, "j.flow", trusted=False)
    assert "E0952" in {d.code for d in refused.value.diagnostics}


TZ_JOB = """SET sql.dialect = 'flink';
CREATE SOURCE iot (device STRING, zone STRING, local_time STRING)
  WITH (connector = 'files', path = 'in', format = 'json', max_files_per_trigger = 1);
CREATE SINK out WITH (connector = 'files', path = 'out', format = 'json');
INSERT INTO out
SELECT device, zone, local_time, CONVERT_TZ(local_time, zone, 'UTC') AS utc,
       CONVERT_TZ(local_time, 'UTC', zone) AS back
FROM iot;
"""
TZ_BATCHES: list[list[Row]] = [
    [
        {"device": "a", "zone": "America/Los_Angeles", "local_time": "2024-11-03 01:30:00"},
        {"device": "b", "zone": "Asia/Shanghai", "local_time": "2024-12-31 23:30:00.250"},
    ],
    [
        {"device": "c", "zone": "Nowhere/Land", "local_time": "2024-07-01 12:00:00"},
        {"device": "d", "zone": "GMT+05:30", "local_time": None},
    ],
    [
        {"device": "e", "zone": "Europe/Berlin", "local_time": "2024-03-31 02:30:00"},
        {"device": "f", "zone": "PST", "local_time": "garbage"},
    ],
]
#: Flink's answers for TZ_BATCHES (asked of Flink 2.3): (utc, back) per device.
TZ_FLINK = {
    "a": ("2024-11-03 09:30:00", "2024-11-02 18:30:00"),
    "b": ("2024-12-31 15:30:00", "2025-01-01 07:30:00"),
    "c": ("2024-07-01 12:00:00", "2024-07-01 12:00:00"),
    "d": (None, None),
    "e": ("2024-03-31 01:30:00", "2024-03-31 04:30:00"),
    "f": (None, None),
}


def test_convert_tz_in_a_job_across_micro_batches_and_a_restart(spark: Any, tmp_path: Path) -> None:
    write_batches(tmp_path / "in", TZ_BATCHES[:2])
    job = compiled(tmp_path, TZ_JOB)
    assert spark_codes(job) == set()
    run_generated(spark, tmp_path, job)
    write_batches(tmp_path / "in", TZ_BATCHES)
    run_generated(spark, tmp_path, compiled(tmp_path, TZ_JOB))
    rows = {r["device"]: (r.get("utc"), r.get("back")) for r in read_json_dir(tmp_path / "out")}
    assert rows == TZ_FLINK
    for row in (r for batch in TZ_BATCHES for r in batch):
        recorded = [a[3] for a in ANSWERS if a[:3] == [row["local_time"], row["zone"], "UTC"]]
        assert recorded in ([], [TZ_FLINK[str(row["device"])][0]])


#: Asked of real Flink: CONVERT_TZ over rows of (s, from, to).
FLINK_PROBE = """
import json, sys
from pyflink.table import DataTypes, EnvironmentSettings, TableEnvironment
t = TableEnvironment.create(EnvironmentSettings.in_batch_mode())
t.get_config().set("parallelism.default", "1")
cases = json.loads(sys.stdin.read())
fields = [DataTypes.FIELD("i", DataTypes.INT())] + [
    DataTypes.FIELD(n, DataTypes.STRING()) for n in ("s", "a", "b")]
rows = [(i, *case) for i, case in enumerate(cases)]
t.create_temporary_view("cases", t.from_elements(rows, DataTypes.ROW(fields)))
out = {}
with t.execute_sql("SELECT i, CONVERT_TZ(s, a, b) FROM cases").collect() as result:
    for row in result:
        out[row[0]] = row[1]
print(json.dumps([out[i] for i in range(len(cases))]))
"""


@pytest.mark.skipif(FLINK_PYTHON is None, reason="set FLOWC_FLINK_PYTHON to a PyFlink 2.3")
def test_against_flink_convert_tz() -> None:
    """Real Flink (opt-in): the recorded answers, and TZ_FLINK, are Flink's."""
    asked = [row[:3] for row in ANSWERS] + [
        [r["local_time"], r["zone"], z] if z == "UTC" else [r["local_time"], "UTC", r["zone"]]
        for batch in TZ_BATCHES
        for r in batch
        if r["local_time"] is not None
        for z in ("UTC", "zone")
    ]
    assert FLINK_PYTHON is not None
    # A process of its own, not the shared worker (tests/helpers/flink_worker.py): in the
    # worker's long-lived JVM this one query over 2,864 rows took 46-58 s, alone 16-23 s.
    probe = subprocess.run(
        [FLINK_PYTHON, "-c", FLINK_PROBE],
        input=json.dumps(asked),
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert probe.returncode == 0, probe.stderr[-3000:]
    flink = json.loads(probe.stdout.strip().splitlines()[-1])
    assert flink[: len(ANSWERS)] == [row[3] for row in ANSWERS]
    mine = [
        TZ_FLINK[str(r["device"])][0 if z == "UTC" else 1]
        for batch in TZ_BATCHES
        for r in batch
        if r["local_time"] is not None
        for z in ("UTC", "zone")
    ]
    assert flink[len(ANSWERS) :] == mine


# ---------------------------------------------------------------- TUMBLE_PROCTIME

CLICKS: list[list[Row]] = [
    [{"user_id": 1, "batch": 0}, {"user_id": 2, "batch": 0}, {"user_id": 1, "batch": 0}],
    [{"user_id": 2, "batch": 1}, {"user_id": 3, "batch": 1}],
    [{"user_id": 1, "batch": 2}, {"user_id": 1, "batch": 2}, {"user_id": 3, "batch": 2}],
]
PROCTIME_HEAD = (
    "SET sql.dialect = 'flink';\nSET max_parallelism = 16;\n"
    + source("clicks", "user_id BIGINT, batch INT, pt AS PROCTIME()")
    + "CREATE SINK per_user WITH (connector = 'noop', mode = 'update');\n"
)
PROCTIME_SQL = """INSERT INTO per_user
SELECT user_id, COUNT(*) AS n, MAX(batch) AS last_batch,
       TUMBLE_START(pt, INTERVAL '1' HOUR) AS ws, TUMBLE_END(pt, INTERVAL '1' HOUR) AS we,
       TUMBLE_PROCTIME(pt, INTERVAL '1' HOUR) AS written
FROM clicks GROUP BY user_id, TUMBLE(pt, INTERVAL '1' HOUR);
"""
PROCTIME_PIPE = """INSERT INTO per_user FROM clicks |> KEY BY user_id
  |> WINDOW TUMBLE(pt, INTERVAL '1' HOUR)
  |> AGGREGATE COUNT(*) AS n, MAX(batch) AS last_batch
  |> SELECT user_id, n, last_batch, window_start AS ws, window_end AS we,
       current_timestamp() AS written;
"""


def test_tumble_proctime_plans_as_current_timestamp_after_the_aggregate() -> None:
    assert job_graph_json(PROCTIME_HEAD + PROCTIME_SQL) == job_graph_json(
        PROCTIME_HEAD + PROCTIME_PIPE
    )


def test_tumble_proctime_is_the_time_each_update_is_written(spark: Any, tmp_path: Path) -> None:
    """Each row a micro-batch writes carries that micro-batch's time: inside the run, inside
    the row's window (a processing-time window holds the rows read in it), the same for
    every row of a micro-batch, later for later micro-batches; the counts add up."""
    write_batches(tmp_path / "clicks", CLICKS)
    job = compiled(tmp_path, PROCTIME_HEAD + PROCTIME_SQL)
    assert spark_codes(job) == set()
    started = datetime.now() - timedelta(seconds=1)
    run_generated(spark, tmp_path, job, into_memory)
    ended = datetime.now() + timedelta(seconds=1)
    rows = list(spark.sql("SELECT * FROM `per_user`").collect())
    written: dict[int, set[datetime]] = defaultdict(set)  # batch -> times its rows carry
    latest: dict[tuple[int, datetime], int] = {}
    for row in rows:
        assert started <= row["written"] <= ended
        assert row["ws"] <= row["written"] < row["we"]
        written[row["last_batch"]].add(row["written"])
        key = (row["user_id"], row["ws"])
        latest[key] = max(latest.get(key, 0), row["n"])
    batches_with: dict[int, set[int]] = defaultdict(set)
    for index, batch in enumerate(CLICKS):
        for r in batch:
            batches_with[int(r["user_id"])].add(index)
    # update mode: one row per user per micro-batch that changed its window
    assert sorted((r["user_id"], r["last_batch"]) for r in rows) == sorted(
        (u, b) for u, bs in batches_with.items() for b in bs
    )
    assert sorted(written) == [0, 1, 2]
    assert all(len(times) == 1 for times in written.values()), written
    ordered = [next(iter(written[b])) for b in (0, 1, 2)]
    assert ordered == sorted(ordered) and len(set(ordered)) == 3
    totals: dict[int, int] = defaultdict(int)
    for (user, _), n in latest.items():
        totals[user] += n
    assert totals == {u: sum(r["user_id"] == u for b in CLICKS for r in b) for u in (1, 2, 3)}


# ---------------------------------------------------------------- DATE_FORMAT's weeks

#: [day, Flink's DATE_FORMAT(day 12:00, 'YYYY ww w W YY Y'), ... 'YYYYww', ... 'yyyy-ww'],
#: Dec 24 to Jan 8 of 1999/2000 to 2031/2032, asked of Flink 2.3 (JVM locale 'en').
WEEKS: list[list[str]] = json.loads(
    (Path(__file__).parent / "data" / "flink_week_date_format.json").read_text(encoding="utf-8")
)
WEEK_PATTERNS = ["YYYY ww w W YY Y", "YYYYww", "yyyy-ww"]


def _flink_weeks(day: date, pattern: str) -> str:
    """Plain Python: java.time's week fields in an English locale (weeks from Sunday, the
    week holding January 1 is week 1), as Flink's DATE_FORMAT of a TIMESTAMP gives them."""
    sunday_index = (day.weekday() + 1) % 7
    saturday = day + timedelta(days=6 - sunday_index)
    week = (saturday.timetuple().tm_yday + 6) // 7
    month_week = (day.day + (day.replace(day=1).weekday() + 1) % 7 - 1) // 7 + 1
    return {
        "YYYY ww w W YY Y": f"{saturday.year:04d} {week:02d} {week} {month_week} "
        f"{saturday.year % 100:02d} {saturday.year}",
        "YYYYww": f"{saturday.year:04d}{week:02d}",
        "yyyy-ww": f"{day.year:04d}-{week:02d}",
    }[pattern]


def _date_format_sql(pattern: str) -> str:
    program = TZ_PROGRAM.replace("t STRING, a STRING, b STRING", "ts TIMESTAMP").replace(
        "CONVERT_TZ(t, a, b)", f"DATE_FORMAT(ts, '{pattern}')"
    )
    job = flowc.compile(program, "j.flow")
    (step,) = job.program.inserts[0].stream.steps
    assert isinstance(step, ExtendStep)
    return sql_of(step.node.items[0].expr)


@pytest.mark.parametrize("pattern", WEEK_PATTERNS)
def test_week_based_date_format_gives_flinks_strings(spark: Any, pattern: str) -> None:
    """Every day of 1995 to 2035 (at noon and a second before midnight) as plain Python's
    week rule, which is Flink's on the recorded days around each year's end."""
    for day, fields, compact, dashed in WEEKS:
        recorded = {"YYYY ww w W YY Y": fields, "YYYYww": compact, "yyyy-ww": dashed}
        assert _flink_weeks(date.fromisoformat(day), pattern) == recorded[pattern]
    days = [
        date(1995, 1, 1) + timedelta(days=n)
        for n in range((date(2036, 1, 1) - date(1995, 1, 1)).days)
    ]
    rows = [(datetime.combine(d, time(12)), d.isoformat()) for d in days]
    rows += [(datetime.combine(d, time(23, 59, 59)), d.isoformat()) for d in days[::7]]
    rows.append((None, None))
    frame = spark.createDataFrame(rows, schema="ts TIMESTAMP, d STRING")
    got = frame.selectExpr("d", f"{_date_format_sql(pattern)} AS v").collect()
    expected = [
        (d, _flink_weeks(date.fromisoformat(d), pattern) if d is not None else None)
        for _, d in rows
    ]
    assert [(r["d"], r["v"]) for r in got] == expected


@pytest.mark.skipif(FLINK_PYTHON is None, reason="set FLOWC_FLINK_PYTHON to a PyFlink 2.3")
def test_against_flink_week_date_format() -> None:
    """Real Flink (opt-in): the recorded week fields are Flink's."""
    probe = """
import json, sys
from pyflink.table import DataTypes, EnvironmentSettings, TableEnvironment
t = TableEnvironment.create(EnvironmentSettings.in_batch_mode())
t.get_config().set("parallelism.default", "1")
days = json.loads(sys.stdin.read())
fields = [DataTypes.FIELD("i", DataTypes.INT()), DataTypes.FIELD("d", DataTypes.STRING())]
t.create_temporary_view("days", t.from_elements(list(enumerate(days)), DataTypes.ROW(fields)))
ts = "CAST(CONCAT(d, ' 12:00:00') AS TIMESTAMP(3))"
query = ("SELECT i, DATE_FORMAT(%s, 'YYYY ww w W YY Y'), DATE_FORMAT(%s, 'YYYYww'), "
         "DATE_FORMAT(%s, 'yyyy-ww') FROM days" % (ts, ts, ts))
out = {}
with t.execute_sql(query).collect() as result:
    for row in result:
        out[row[0]] = [days[row[0]], row[1], row[2], row[3]]
print(json.dumps([out[i] for i in range(len(days))]))
"""
    assert FLINK_PYTHON is not None
    done = run_flink(FLINK_PYTHON, probe, stdin=json.dumps([row[0] for row in WEEKS]))
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == WEEKS
