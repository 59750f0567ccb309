"""Flink SQL as Flink users write it (issue 27): a GROUP BY key named with its relation
after a join (``GROUP BY o.id``) is the pipe form's ``KEY BY orders.id``, read after the
grouping as ``id``, in both dialects (the plans are equal). A Flink-dialect UNION ALL of
SELECTs whose column types differ and widen alike in Flink and Spark (INT with BIGINT,
an integer with DOUBLE, DECIMALs) has Flink's common types: on Spark its rows (values and
types) equal plain Python's over micro-batches and a restart. Flink's TO_TIMESTAMP(s[,
fmt]) (NULL where the text does not parse) is Spark's strict try_to_timestamp, the job
failing where Flink may read the text leniently; UNIX_TIMESTAMP of a string is refused."""

from __future__ import annotations

import json
import os
import re
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc.program import ExtendStep
from flowc.sql.spark_sql import sql_of
from tests.helpers.files import Row, committed_files, read_json_dir, write_batches
from tests.helpers.flink import ask_flink
from tests.helpers.plans import job_graph_json
from tests.helpers.spark_run import compiled, run_generated, spark_codes

HEAD = """SET max_parallelism = 16;
CREATE SOURCE orders (id BIGINT, amount INT) WITH (connector = 'datagen');
CREATE SOURCE shipments (order_id BIGINT, carrier STRING) WITH (connector = 'datagen');
CREATE SINK totals WITH (connector = 'console', mode = 'update');
"""
GROUPED = """INSERT INTO totals
SELECT o.id, s.carrier, o.id + 1 AS next_id, count(*) AS n, sum(o.amount) AS total
FROM orders o JOIN shipments s ON o.id = s.order_id
GROUP BY o.id, s.carrier HAVING o.id > 3 AND count(*) > 1;
"""
PIPE = """INSERT INTO totals FROM orders
|> JOIN shipments ON orders.id = shipments.order_id
|> KEY BY orders.id, shipments.carrier
|> AGGREGATE count(*) AS n, sum(orders.amount) AS total
|> WHERE id > 3 AND n > 1
|> SELECT id, carrier, id + 1 AS next_id, n, total;
"""


@pytest.mark.parametrize("dialect", ["", "SET sql.dialect = 'flink';\n"], ids=["spark", "flink"])
def test_a_qualified_group_by_key_plans_as_the_pipe_forms_key_by(dialect: str) -> None:
    assert job_graph_json(dialect + HEAD + GROUPED) == job_graph_json(dialect + HEAD + PIPE)


UNION_HEAD = """SET sql.dialect = 'flink';
CREATE SOURCE a (k INT, v INT, d DECIMAL(5, 3), w BIGINT)
  WITH (connector = 'files', path = 'a', format = 'json', max_files_per_trigger = 1);
CREATE SOURCE b (k BIGINT, v DOUBLE, d DECIMAL(10, 1), w INT)
  WITH (connector = 'files', path = 'b', format = 'json', max_files_per_trigger = 1);
CREATE SINK out WITH (connector = 'files', path = 'out', format = 'json');
"""
UNION = """INSERT INTO out SELECT k, v, d, w FROM a WHERE k > 0
UNION ALL SELECT k, v, d, w FROM b WHERE v < 100;
"""
A_ROWS: list[list[Row]] = [
    [{"k": 1, "v": 3, "d": 1.234, "w": 7}, {"k": -1, "v": 4, "d": 2.5, "w": 8}],
    [{"k": 2147483647, "v": -5, "d": 99.999, "w": 9000000000}],
    [{"k": 3, "v": 0, "d": 0.001, "w": 0}],
]
B_ROWS: list[list[Row]] = [
    [{"k": 3000000000, "v": 1.5, "d": 123456789.5, "w": -2}],
    [{"k": -4, "v": 250.0, "d": 1.0, "w": 5}, {"k": 5, "v": -0.25, "d": 0.1, "w": 2147483647}],
    [{"k": 6, "v": 99.5, "d": 7.7, "w": 1}],
]


def _flink_union(a: list[list[Row]], b: list[list[Row]]) -> list[tuple[int, str, str, int]]:
    """Flink's rows: BIGINT k, DOUBLE v, DECIMAL(12, 3) d, BIGINT w (Calcite's common types),
    each input's WHERE first; v and d as JSON writes them (a DOUBLE with its point, a
    DECIMAL with its three places)."""
    rows = [r for batch in a for r in batch if r["k"] > 0]
    rows += [r for batch in b for r in batch if r["v"] < 100]
    return sorted(
        (int(r["k"]), repr(float(r["v"])), f"{Decimal(str(r['d'])):.3f}", int(r["w"])) for r in rows
    )


def test_a_flink_union_of_narrower_and_wider_columns_on_spark(spark: Any, tmp_path: Path) -> None:
    write_batches(tmp_path / "a", A_ROWS[:2])
    write_batches(tmp_path / "b", B_ROWS[:2])
    program = UNION_HEAD + UNION
    job = compiled(tmp_path, program)
    assert spark_codes(job) == set()
    run_generated(spark, tmp_path, job)
    write_batches(tmp_path / "a", A_ROWS)
    write_batches(tmp_path / "b", B_ROWS)
    run_generated(spark, tmp_path, compiled(tmp_path, program))
    written = [  # numbers as written: 3 (an integer) is no DOUBLE, 12.5 no DECIMAL(12, 3)
        json.loads(line, parse_float=Decimal)
        for part in committed_files(tmp_path / "out")
        for line in part.read_text().splitlines()
        if line
    ]
    rows = sorted((r["k"], str(r["v"]), str(r["d"]), r["w"]) for r in written)
    assert rows == _flink_union(A_ROWS, B_ROWS)
    assert len(rows) == 6


@pytest.mark.parametrize(
    ("b_types", "message"),
    [
        ("k BIGINT, v FLOAT, d DECIMAL(10, 1), w INT", "'out\\$union' differs"),
        ("k BIGINT, v DOUBLE, d DECIMAL(10, 1), w DECIMAL(10, 2)", "'out\\$union' differs"),
        ("k STRING, v DOUBLE, d DECIMAL(10, 1), w INT", "'out\\$union' differs"),
    ],
    ids=["int-with-float", "bigint-with-decimal", "int-with-string"],
)
def test_types_flink_and_spark_widen_apart_stay_refused(b_types: str, message: str) -> None:
    program = UNION_HEAD.replace("k BIGINT, v DOUBLE, d DECIMAL(10, 1), w INT", b_types)
    with pytest.raises(flowc.CompileError, match=message):
        flowc.compile(program + UNION, "job.flow")


def test_the_spark_dialect_keeps_refusing_a_union_of_other_types() -> None:
    program = UNION_HEAD.replace("SET sql.dialect = 'flink';\n", "")
    with pytest.raises(flowc.CompileError, match="UNION ALL needs the same columns"):
        flowc.compile(program + UNION, "job.flow")


TS_PROGRAM = """SET sql.dialect = 'flink';
CREATE SOURCE s (t STRING) WITH (connector = 'files', path = 'in', format = 'json');
CREATE SINK o WITH (connector = 'files', path = 'out', format = 'json');
INSERT INTO o FROM s |> EXTEND {expr} AS v;
"""
#: Java's fixed-width fields of the formats read, as Python regular expressions.
_FIELDS = {"yyyy": r"(\d{4})", "MM": r"(\d{2})", "dd": r"(\d{2})", "HH": r"(\d{2})",
           "mm": r"(\d{2})", "ss": r"(\d{2})"}  # fmt: skip


def _to_timestamp_sql(expr: str) -> str:
    job = flowc.compile(TS_PROGRAM.format(expr=expr), "j.flow")
    (step,) = job.program.inserts[0].stream.steps
    assert isinstance(step, ExtendStep)
    assert job.program.inserts[0].stream.schema[-1].type == "TIMESTAMP"
    return sql_of(step.node.items[0].expr)


def _flink_to_timestamp(text: str | None, fmt: str = "yyyy-MM-dd HH:mm:ss") -> datetime | None:
    """Flink's TO_TIMESTAMP for text that parses strictly or has no reading at all (the
    inputs below): each field its fixed width, the date valid; else NULL."""
    if text is None:
        return None
    order = re.findall(r"[A-Za-z]+", fmt)
    pattern = re.sub(r"[A-Za-z]+", lambda m: _FIELDS[m.group()], re.escape(fmt))
    found = re.fullmatch(pattern, text)
    if found is None:
        return None
    fields = dict(zip(order, map(int, found.groups()), strict=True))
    return datetime(
        fields["yyyy"], fields["MM"], fields["dd"],
        fields.get("HH", 0), fields.get("mm", 0), fields.get("ss", 0),
    )  # fmt: skip


#: Strings each format reads strictly, and strings Flink can read no way (NULL).
READ = {
    "yyyy-MM-dd HH:mm:ss": ["2024-01-05 10:20:30", "2024-02-29 23:59:59", "abc", "", None,
                            "2024/01/05 10:20:30", "10:20:30", "N/A"],
    "dd/MM/yyyy HH:mm": ["05/01/2024 10:20", "31/12/1999 00:00", "05.01.2024 10:20", "x",
                         "05/01/2024"],
}  # fmt: skip
#: Strings Flink may read leniently where Spark's strict parse cannot: the job fails.
LENIENT = {
    "yyyy-MM-dd HH:mm:ss": ["2024-02-30 10:00:00", "2024-1-5 10:20:30",
                            "2024-01-05 10:20:30.5", "2024-01-05", " 2024-01-05 10:20:30"],
    "dd/MM/yyyy HH:mm": ["31/02/2024 10:00", "2024-01-05 10:20:30", "5/1/2024 10:20"],
}  # fmt: skip


def _call(fmt: str) -> str:
    return "TO_TIMESTAMP(t)" if fmt == "yyyy-MM-dd HH:mm:ss" else f"TO_TIMESTAMP(t, '{fmt}')"


@pytest.mark.parametrize("fmt", list(READ))
def test_to_timestamp_gives_flinks_values_and_null(spark: Any, fmt: str) -> None:
    text = _to_timestamp_sql(_call(fmt))
    frame = spark.createDataFrame([(t,) for t in READ[fmt]], schema="t STRING")
    got = [(r["t"], r["v"]) for r in frame.selectExpr("t", f"{text} AS v").collect()]
    assert got == [(t, _flink_to_timestamp(t, fmt)) for t in READ[fmt]]
    assert sum(v is not None for _, v in got) == 2


@pytest.mark.parametrize(("fmt", "value"), [(f, v) for f, vs in LENIENT.items() for v in vs])
def test_to_timestamp_fails_the_job_where_flink_may_read_leniently(
    spark: Any, fmt: str, value: str
) -> None:
    """Not a NULL where Flink may give a timestamp: Spark's strict parse cannot read
    these, Flink's lenient resolving or its java.sql fallback may."""
    from pyspark.errors import PySparkException

    text = _to_timestamp_sql(_call(fmt))
    frame = spark.createDataFrame([(value,)], schema="t STRING")
    with pytest.raises(PySparkException, match="TO_TIMESTAMP: Flink may read"):
        frame.selectExpr(f"{text} AS v").collect()


TS_JOB = """SET sql.dialect = 'flink';
SET max_parallelism = 16;
CREATE SOURCE events (t STRING, u STRING, ts AS TO_TIMESTAMP(t),
    WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (connector = 'files', path = 'in', format = 'json', max_files_per_trigger = 1);
CREATE SINK out WITH (connector = 'files', path = 'out', format = 'json');
INSERT INTO out SELECT t, u, ts, TO_TIMESTAMP(u, 'dd/MM/yyyy HH:mm') AS d FROM events;
"""
TS_BATCHES: list[list[Row]] = [
    [{"t": "2024-01-05 10:20:30", "u": "05/01/2024 10:20"}, {"t": "bad", "u": "x"}],
    [{"t": "2024-01-05 10:21:00", "u": "N/A"}],
    [{"t": "2024-02-29 23:59:59", "u": "31/12/1999 00:00"}, {"t": "", "u": None}],
]


def test_to_timestamp_in_a_job_across_micro_batches_and_a_restart(
    spark: Any, tmp_path: Path
) -> None:
    """A computed event-time column and a parsed column: Flink's values (NULL where the
    text does not parse) after three micro-batches and a restart."""
    write_batches(tmp_path / "in", TS_BATCHES[:2])
    job = compiled(tmp_path, TS_JOB)
    assert spark_codes(job) == set()
    run_generated(spark, tmp_path, job)
    write_batches(tmp_path / "in", TS_BATCHES)
    run_generated(spark, tmp_path, compiled(tmp_path, TS_JOB))

    def iso(value: datetime | None) -> str | None:
        return value.isoformat(timespec="milliseconds") if value is not None else None

    expected = sorted(
        (r["t"], r["u"], iso(_flink_to_timestamp(r["t"])),
         iso(_flink_to_timestamp(r["u"], "dd/MM/yyyy HH:mm")))
        for batch in TS_BATCHES
        for r in batch
    )  # fmt: skip
    rows = sorted(
        (r["t"], r.get("u"), _iso_text(r.get("ts")), _iso_text(r.get("d")))
        for r in read_json_dir(tmp_path / "out")
    )
    assert rows == expected
    assert sum(e[2] is not None for e in expected) == 3


def _iso_text(value: str | None) -> str | None:
    """Spark's JSON timestamp (``2024-01-05T10:20:30.000Z``) as Python's isoformat."""
    if value is None:
        return None
    return (
        datetime.fromisoformat(value.replace("Z", "+00:00"))
        .replace(tzinfo=None)
        .isoformat(timespec="milliseconds")
    )


@pytest.mark.parametrize(
    ("expr", "code", "at"),
    [
        ("TO_TIMESTAMP(t, 'yyyy-MM-dd HH:mm:ss.SSS')", "E0614", "SSS"),
        ("TO_TIMESTAMP(t, 'yyyy-MM-dd''T''HH:mm')", "E0614", "'yyyy-MM-dd''T''HH:mm'"),
        ("TO_TIMESTAMP(t, t)", "E0614", "t"),
        ("TO_TIMESTAMP(t, 'yy-M-d')", "E0614", "yy"),
        ("UNIX_TIMESTAMP(t)", "E0615", "UNIX_TIMESTAMP(t)"),
        ("UNIX_TIMESTAMP(t, 'yyyy-MM-dd')", "E0615", "UNIX_TIMESTAMP(t, 'yyyy-MM-dd')"),
    ],
)
def test_timestamp_forms_flowc_cannot_read_as_flink_are_refused_at_their_span(
    expr: str, code: str, at: str
) -> None:
    program = TS_PROGRAM.format(expr=expr)
    with pytest.raises(flowc.CompileError) as raised:
        flowc.compile(program, "j.flow")
    (error,) = [d for d in raised.value.diagnostics if d.severity == flowc.Severity.ERROR]
    assert error.code == code
    line = program.splitlines()[error.span.line - 1]
    assert line[error.span.column - 1 : error.span.end_column - 1] == at
    assert error.help


def test_unix_timestamp_of_nothing_is_sparks_current_seconds() -> None:
    assert "UNIX_TIMESTAMP()" in sql_of(
        flowc.compile(TS_PROGRAM.format(expr="UNIX_TIMESTAMP()"), "j.flow")
        .program.inserts[0]
        .stream.steps[0]
        .node.items[0]  # type: ignore[attr-defined]
        .expr
    )


#: Flink 2.3's UNION ALL type of two columns (each read off Flink's planner: the schema of
#: ``SELECT CAST(.. AS a) UNION ALL SELECT CAST(.. AS b)``), against which union_type is
#: checked together with Spark's own answer, asked of Spark below.
FLINK_UNION_TYPES = {
    ("INT", "BIGINT"): "BIGINT",
    ("TINYINT", "DOUBLE"): "DOUBLE",
    ("INT", "DOUBLE"): "DOUBLE",
    ("INT", "FLOAT"): "FLOAT",
    ("FLOAT", "DOUBLE"): "FLOAT",
    ("DECIMAL(10, 2)", "DOUBLE"): "DOUBLE",
    ("INT", "DECIMAL(10, 2)"): "DECIMAL(12, 2)",
    ("BIGINT", "DECIMAL(10, 2)"): "DECIMAL(21, 2)",
    ("DECIMAL(5, 3)", "DECIMAL(10, 1)"): "DECIMAL(12, 3)",
    ("DECIMAL(38, 10)", "BIGINT"): "DECIMAL(38, 10)",
}


@pytest.mark.parametrize(("a", "b"), list(FLINK_UNION_TYPES))
def test_union_type_is_flinks_where_spark_unions_alike(spark: Any, a: str, b: str) -> None:
    """The Flink dialect takes Flink's type exactly where Spark's unionByName gives the
    same type (so the rows Spark writes have Flink's type), and refuses elsewhere."""
    from flowc.sql.sqltypes import normalize_type, union_type

    left = spark.createDataFrame([], f"c {a}")
    right = spark.createDataFrame([], f"c {b}")
    sparks = normalize_type(left.unionByName(right).schema["c"].dataType.simpleString())
    flinks = FLINK_UNION_TYPES[(a, b)]
    expected = flinks if sparks == flinks else None
    assert union_type(a, b) == expected
    assert union_type(b, a) == expected


FLINK_PYTHON = os.environ.get("FLOWC_FLINK_PYTHON") or None

#: Asked of real Flink: each TO_TIMESTAMP below over each string, and each UNION ALL type.
FLINK_PROBE = """
import json, sys
from pyflink.table import EnvironmentSettings, TableEnvironment
t = TableEnvironment.create(EnvironmentSettings.in_batch_mode())
t.get_config().set("parallelism.default", "1")
asked = json.loads(sys.argv[1])
out = {"parsed": [], "unions": []}
for fmt, text in asked["parsed"]:
    call = "TO_TIMESTAMP(x)" if fmt is None else "TO_TIMESTAMP(x, '%s')" % fmt
    quoted = "CAST(NULL AS STRING)" if text is None else "'%s'" % text.replace("'", "''")
    rows = list(t.execute_sql("SELECT %s FROM (VALUES (%s)) AS v(x)" % (call, quoted)).collect())
    value = rows[0][0]
    out["parsed"].append(None if value is None else value.isoformat())
for a, b in asked["unions"]:
    table = t.sql_query("SELECT CAST(1 AS %s) AS c UNION ALL SELECT CAST(2 AS %s)" % (a, b))
    java_type = table._j_table.getResolvedSchema().getColumnDataTypes().get(0).toString()
    out["unions"].append(java_type.replace(" NOT NULL", ""))
print(json.dumps(out))
"""


@pytest.mark.skipif(FLINK_PYTHON is None, reason="set FLOWC_FLINK_PYTHON to a PyFlink 2.3")
def test_against_flink_to_timestamp_and_union_types(spark: Any) -> None:
    """Real Flink (opt-in): wherever flowc's Spark SQL gives a timestamp or NULL, Flink
    gives the same; where it fails the job, Flink may give anything. The UNION ALL types
    recorded above are Flink's."""
    from pyspark.errors import PySparkException

    cases = [(f, t) for f, texts in READ.items() for t in texts]
    cases += [(f, t) for f, texts in LENIENT.items() for t in texts]
    asked = {
        "parsed": [(None if f == "yyyy-MM-dd HH:mm:ss" else f, t) for f, t in cases],
        "unions": [list(pair) for pair in FLINK_UNION_TYPES],
    }
    flink = ask_flink(FLINK_PROBE, asked)
    failed = 0
    for (fmt, text), flinks in zip(cases, flink["parsed"], strict=True):
        sql = _to_timestamp_sql(_call(fmt))
        frame = spark.createDataFrame([(text,)], schema="t STRING")
        try:
            value = frame.selectExpr(f"{sql} AS v").collect()[0]["v"]
        except PySparkException:
            failed += 1
            continue
        assert (value.isoformat() if value is not None else None) == flinks, (fmt, text)
    assert failed == sum(len(v) for v in LENIENT.values())
    assert flink["unions"] == list(FLINK_UNION_TYPES.values())
