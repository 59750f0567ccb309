"""Flink's meaning of functions and operators Spark has under the same name, in the Flink
dialect (docs/language.md, "Functions whose meaning differs"): the Spark SQL flowc writes
for each Flink form, that SQL evaluated on Spark against plain Python computing Flink's
values, one streaming job over several micro-batches, and the refused forms at their span.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc.program import ExtendStep
from flowc.spark.codegen import generate_pyspark
from flowc.sql.spark_sql import sql_of
from tests.helpers.files import Row, read_json_dir, source, write_batches
from tests.helpers.plans import without_spans
from tests.helpers.spark_run import run_in

COLUMNS = "a INT, b BIGINT, c DOUBLE, t STRING"

PROGRAM = """\
SET sql.dialect = '{dialect}';
CREATE SOURCE s ({columns}) WITH (connector = 'files', path = 'in', format = 'json');
CREATE SINK o WITH (connector = 'files', path = 'out', format = 'json');
INSERT INTO o FROM s |> EXTEND {expr} AS v;
"""


def _errors(job: flowc.CompiledJob) -> list[flowc.Diagnostic]:
    return [d for d in job.diagnostics if d.severity == flowc.Severity.ERROR]


def spark_sql(expr: str, dialect: str = "flink") -> tuple[str, str]:
    """The Spark SQL flowc writes for ``expr`` over :data:`COLUMNS`, and its type."""
    job = flowc.compile(PROGRAM.format(dialect=dialect, columns=COLUMNS, expr=expr), "j.flow")
    assert not _errors(job), job.diagnostics
    (step,) = job.program.inserts[0].stream.steps
    assert isinstance(step, ExtendStep)
    return sql_of(step.node.items[0].expr), job.program.inserts[0].stream.schema[-1].type


def _quotient(x: int | None, y: int | None) -> int | None:
    """Java's integer division: truncation toward zero."""
    if x is None or y is None:
        return None
    magnitude = abs(x) // abs(y)
    return magnitude if (x < 0) == (y < 0) else -magnitude


def _search(pattern: str, group: int) -> Callable[[Row], str | None]:
    def flink(row: Row) -> str | None:
        if row["t"] is None:
            return None
        found = re.search(pattern, row["t"])
        return found.group(group) if found is not None else None

    return flink


def _similar(regex: str) -> Callable[[Row], bool | None]:
    """Flink's SIMILAR TO, by a Python regex written by hand for each pattern."""
    return lambda row: None if row["t"] is None else re.fullmatch(regex, row["t"], re.S) is not None


#: (Flink expression, the Spark SQL flowc writes, its type, Flink's value for a row).
ROWS: list[tuple[str, str, str, Callable[[Row], Any]]] = [
    ("a / 2", "CAST(`a` DIV 2 AS INT)", "INT", lambda r: _quotient(r["a"], 2)),
    ("b / a", "`b` DIV `a`", "BIGINT", lambda r: _quotient(r["b"], r["a"])),
    ("b / 3", "`b` DIV 3", "BIGINT", lambda r: _quotient(r["b"], 3)),
    ("c / a", "`c` / `a`", "DOUBLE", lambda r: None if r["a"] is None else r["c"] / r["a"]),
    (
        r"REGEXP_EXTRACT(t, 'x(\d+)')",
        r"CASE WHEN `t` RLIKE 'x(\\d+)' THEN REGEXP_EXTRACT(`t`, 'x(\\d+)', 0) END",
        "STRING",
        _search(r"x(\d+)", 0),
    ),
    (
        r"REGEXP_EXTRACT(t, 'x(\d+)', 1)",
        r"CASE WHEN `t` RLIKE 'x(\\d+)' THEN REGEXP_EXTRACT(`t`, 'x(\\d+)') END",
        "STRING",
        _search(r"x(\d+)", 1),
    ),
    (
        r"REGEXP_EXTRACT(REGEXP_EXTRACT(t, 'x\d+'), '\d$')",
        r"CASE WHEN CASE WHEN `t` RLIKE 'x\\d+' THEN REGEXP_EXTRACT(`t`, 'x\\d+', 0) END "
        r"RLIKE '\\d$' THEN REGEXP_EXTRACT(CASE WHEN `t` RLIKE 'x\\d+' "
        r"THEN REGEXP_EXTRACT(`t`, 'x\\d+', 0) END, '\\d$', 0) END",
        "STRING",
        lambda r: _search(r"\d$", 0)({"t": _search(r"x\d+", 0)(r)}),
    ),
    (
        "t SIMILAR TO '(ab|x)%'",
        r"`t` RLIKE '(?s)^(?:(ab|x).*)\\z'",
        "BOOLEAN",
        _similar(r"(ab|x).*"),
    ),
    (
        "t SIMILAR TO 'a[.]b_'",
        r"`t` RLIKE '(?s)^(?:a[\\.]b.)\\z'",
        "BOOLEAN",
        _similar(r"a\.b."),
    ),
    (
        "t NOT SIMILAR TO '[a-c]x{1,2}[0-9]+'",
        r"NOT `t` RLIKE '(?s)^(?:[a-c]x{1,2}[0-9]+)\\z'",
        "BOOLEAN",
        lambda r: None if r["t"] is None else not re.fullmatch(r"[a-c]x{1,2}[0-9]+", r["t"]),
    ),
    (
        "t SIMILAR TO '%[$]_'",
        r"`t` RLIKE '(?s)^(?:.*[\\$].)\\z'",
        "BOOLEAN",
        _similar(r".*\$."),
    ),
]

INPUT: list[Row] = [
    {"a": -7, "b": -7, "c": 1.5, "t": "ab x12 x3"},
    {"a": 7, "b": 9_007_199_254_740_993, "c": -2.0, "t": "no digits"},
    {"a": 2, "b": -9_007_199_254_740_993, "c": 0.0, "t": "a.bc"},
    {"a": -3, "b": 5, "c": 3.0, "t": "axb\nx"},
    {"a": 3, "b": 0, "c": 9.0, "t": "bxx42"},
    {"a": 1, "b": -1, "c": 4.0, "t": "x\n$!"},
    {"a": None, "b": None, "c": None, "t": None},
    {"a": 5, "b": 11, "c": 2.0, "t": "axb"},
]


@pytest.mark.parametrize(("flink", "spark", "kind", "meaning"), ROWS, ids=[r[0] for r in ROWS])
def test_flink_text_is_written_as_this_spark_sql(
    flink: str, spark: str, kind: str, meaning: Callable[[Row], Any]
) -> None:
    assert spark_sql(flink) == (spark, kind)


@pytest.mark.parametrize(
    ("flink", "kind", "meaning"), [(f, k, m) for f, _, k, m in ROWS], ids=[r[0] for r in ROWS]
)
def test_the_spark_sql_computes_flinks_values(
    spark: Any, flink: str, kind: str, meaning: Callable[[Row], Any]
) -> None:
    text, _ = spark_sql(flink)
    frame = spark.createDataFrame(INPUT, schema="a INT, b BIGINT, c DOUBLE, t STRING")
    got = [row["v"] for row in frame.selectExpr(f"{text} AS v").collect()]
    assert got == [meaning(row) for row in INPUT]


def _text(fn: Callable[[str], Any]) -> Callable[[Row], Any]:
    return lambda row: None if row["t"] is None else fn(row["t"])


def _remainder(x: int | None, y: int) -> int | None:
    """Java's ``%``: the sign of the dividend."""
    return None if x is None else int(math.fmod(x, y))


#: Functions Flink and Spark agree on (docs/language.md): passed as written, Flink's
#: values on Spark.
AGREED: list[tuple[str, Callable[[Row], Any]]] = [
    ("CONCAT(t, CAST(NULL AS STRING))", lambda r: None),
    ("t || CAST(NULL AS STRING)", lambda r: None),
    (
        "CONCAT_WS('-', t, CAST(NULL AS STRING), 'z')",
        lambda r: "-".join(x for x in (r["t"], "z") if x is not None),
    ),
    ("MOD(a, 2)", lambda r: _remainder(r["a"], 2)),
    ("a % -3", lambda r: _remainder(r["a"], -3)),
    ("POSITION('x' IN t)", _text(lambda t: t.find("x") + 1)),
    ("LOCATE('x', t, 3)", _text(lambda t: t.find("x", 2) + 1)),
    ("CHAR_LENGTH(t)", _text(len)),
    ("IF(a > 0, 'p', 'n')", lambda r: "p" if r["a"] is not None and r["a"] > 0 else "n"),
]


@pytest.mark.parametrize(("flink", "meaning"), AGREED, ids=[r[0] for r in AGREED])
def test_functions_both_read_alike_give_flinks_values(
    spark: Any, flink: str, meaning: Callable[[Row], Any]
) -> None:
    text, _ = spark_sql(flink)
    frame = spark.createDataFrame(INPUT, schema=COLUMNS)
    got = [row["v"] for row in frame.selectExpr(f"{text} AS v").collect()]
    assert got == [meaning(row) for row in INPUT]


def test_the_spark_dialect_keeps_sparks_meaning() -> None:
    """Spark programs are untouched: ``/`` is DOUBLE division, REGEXP_EXTRACT group 1."""
    assert spark_sql("a / 2", "spark") == ("`a` / 2", "DOUBLE")
    assert spark_sql(r"REGEXP_EXTRACT(t, 'x')", "spark")[0] == "REGEXP_EXTRACT(`t`, 'x')"


def test_integer_division_by_zero_fails_the_job_as_in_flink(spark: Any) -> None:
    """Flink's integer ``/`` by zero throws (the job fails); Spark's ``div`` under ANSI
    (flowc's setting) raises DIVIDE_BY_ZERO."""
    from pyspark.errors import PySparkException

    text, _ = spark_sql("b / a")
    frame = spark.createDataFrame([{"a": 0, "b": 1, "c": 0.0, "t": ""}], schema=COLUMNS)
    with pytest.raises(PySparkException, match="DIVIDE_BY_ZERO"):
        frame.selectExpr(f"{text} AS v").collect()


@pytest.mark.parametrize("expr", ["a / -1", "b / -1"])
def test_the_one_overflowing_quotient_fails_the_job_not_a_wrong_row(spark: Any, expr: str) -> None:
    """MIN_VALUE / -1 wraps to MIN_VALUE in Flink (Java's arithmetic); Spark's ANSI
    ``div`` and cast raise instead: the job fails, documented, never a wrong row."""
    from pyspark.errors import PySparkException

    text, _ = spark_sql(expr)
    frame = spark.createDataFrame([(-(2**31), -(2**63), 0.0, "")], schema=COLUMNS)
    with pytest.raises(PySparkException, match="OVERFLOW"):
        frame.selectExpr(f"{text} AS v").collect()


#: (Flink expression, its code, the text the diagnostic points at).
REFUSED = [
    ("CURRENT_WATERMARK(ts) IS NULL", "E0610", "CURRENT_WATERMARK(ts)"),  # ts has no watermark
    ("t SIMILAR TO 'a\\b'", "E0611", "\\"),
    ("t SIMILAR TO t", "E0611", "t"),
    ("t SIMILAR TO '[[:alpha:]]'", "E0611", "["),
    ("t SIMILAR TO 'a{'", "E0611", "{"),
    ("t SIMILAR TO 'a%.'", "E0611", "."),
    ("t SIMILAR TO '^a'", "E0611", "^"),
    (r"REGEXP_EXTRACT(t, '(a)?b', 1)", "E0613", "1"),
    (r"REGEXP_EXTRACT(t, 'x|(y)', 1)", "E0613", "1"),
    (r"REGEXP_EXTRACT(t, 'x(\d)', 2)", "E0613", "2"),
    ("REGEXP_EXTRACT(t, t, 1)", "E0613", "t"),
    ("DATE_FORMAT(ts, 'HH:mm:ss.S')", "E0612", "S"),
    ("DATE_FORMAT(ts, 'yyyy F')", "E0612", "F"),
]


@pytest.mark.parametrize(("flink", "code", "at"), REFUSED, ids=[r[0] for r in REFUSED])
def test_forms_flowc_cannot_give_flinks_meaning_are_refused_at_their_span(
    flink: str, code: str, at: str
) -> None:
    program = PROGRAM.format(dialect="flink", columns=COLUMNS + ", ts TIMESTAMP", expr=flink)
    with pytest.raises(flowc.CompileError) as raised:
        flowc.compile(program, "j.flow")
    (error,) = [d for d in raised.value.diagnostics if d.severity == flowc.Severity.ERROR]
    assert error.code == code
    line = program.splitlines()[error.span.line - 1]
    assert error.span.line == error.span.end_line == 4
    assert line[error.span.column - 1 : error.span.end_column - 1] == at
    assert error.help


def test_spark_gives_an_empty_string_where_flink_gives_null(spark: Any) -> None:
    """Why a group that may take no part is refused: Flink's REGEXP_EXTRACT returns
    Java's Matcher.group, NULL; Spark's returns ''."""
    row = spark.sql("SELECT regexp_extract('b', '(a)?b', 1) AS v").collect()[0]
    assert row["v"] == ""


def test_each_current_watermark_is_refused_at_its_call() -> None:
    """Of a column with no watermark (the source declares none), each call is E0610."""
    expr = "CURRENT_WATERMARK(ts) IS NULL OR ts > current_watermark (ts)"
    program = PROGRAM.format(dialect="flink", columns=COLUMNS + ", ts TIMESTAMP", expr=expr)
    with pytest.raises(flowc.CompileError) as raised:
        flowc.compile(program, "j.flow")
    line = program.splitlines()[3]
    assert sorted(
        (d.code, line[d.span.column - 1 : d.span.end_column - 1], d.span.column)
        for d in raised.value.diagnostics
    ) == [
        ("E0610", "CURRENT_WATERMARK(ts)", line.index("CURRENT_WATERMARK") + 1),
        ("E0610", "current_watermark (ts)", line.index("current_watermark") + 1),
    ]


def test_date_format_patterns_both_read_alike_pass() -> None:
    text, _ = spark_sql("DATE_FORMAT(CAST(t AS TIMESTAMP), 'yyyy-MM-dd HH:mm:ss.SSS')")
    assert text == "DATE_FORMAT(CAST(`t` AS TIMESTAMP), 'yyyy-MM-dd HH:mm:ss.SSS')"


BATCHES: list[list[Row]] = [
    [{"a": -7, "b": 10, "t": "ab x12"}, {"a": 2, "b": -9, "t": "zz"}],
    [{"a": 3, "b": -1, "t": "x7 x8"}, {"a": -4, "b": 9_007_199_254_740_993, "t": "a.b!"}],
    [{"a": 5, "b": -11, "t": "abx"}, {"a": -1, "b": 0, "t": None}],
]
#: Read after a restart, from the checkpoint.
LATER: list[Row] = [
    {"a": -2, "b": -9_007_199_254_740_993, "t": "ax!\nx5"},
    {"a": 9, "b": 4, "t": "a.z!"},
]


def _flink_row(r: Row) -> dict[str, Any]:
    """The row Flink writes for ``r``."""
    return {
        "q": _quotient(r["b"], r["a"]),
        "h": _quotient(r["a"], 2),
        "r": _search(r"x(\d)", 0)(r),
        "m": _similar(r"ab.*|a\..!")(r),
    }


def test_a_flink_dialect_job_computes_flinks_values_across_micro_batches(
    spark: Any, tmp_path: Path
) -> None:
    write_batches(tmp_path / "s", BATCHES)
    job = flowc.compile(
        "SET sql.dialect = 'flink';\n"
        + source("s", "a INT, b BIGINT, t STRING")
        + "SET max_parallelism = 16;\n"
        + "CREATE SINK o WITH (connector = 'files', path = 'out', format = 'json');\n"
        + "INSERT INTO o SELECT b / a AS q, a / 2 AS h, REGEXP_EXTRACT(t, 'x(\\d)') AS r, "
        + "t SIMILAR TO 'ab%|a[.]_!' AS m FROM s;\n",
        str(tmp_path / "job.flow"),
        for_spark=True,
    )
    assert [q.error for q in run_in(job, tmp_path).queries] == [None]
    first = [_flink_row(r) for batch in BATCHES for r in batch]
    assert sorted(_written(tmp_path), key=repr) == sorted(first, key=repr)
    target = tmp_path / "s" / "part-099.json"
    target.write_text("".join(json.dumps(r) + "\n" for r in LATER), encoding="utf-8")
    os.utime(target, (1_700_001_000, 1_700_001_000))
    assert [q.error for q in run_in(job, tmp_path).queries] == [None]
    every = first + [_flink_row(r) for r in LATER]
    assert sorted(_written(tmp_path), key=repr) == sorted(every, key=repr)


def _written(folder: Path) -> list[dict[str, Any]]:
    """The sink's rows, a missing value as None (Spark's JSON writer leaves NULLs out)."""
    return [{k: row.get(k) for k in ("q", "h", "r", "m")} for row in read_json_dir(folder / "out")]


FLINK_JOB = """\
SET sql.dialect = 'flink';
CREATE SOURCE s (a INT, b BIGINT, t STRING)
  WITH (connector = 'files', path = 'in', format = 'json');
CREATE SINK o WITH (connector = 'files', path = 'out', format = 'json');
INSERT INTO o SELECT b / a AS q, REGEXP_EXTRACT(t, 'x(\\d)') AS r, t SIMILAR TO 'ab%' AS m FROM s;
"""
SPARK_JOB = """\
CREATE SOURCE s (a INT, b BIGINT, t STRING)
  WITH (connector = 'files', path = 'in', format = 'json');
CREATE SINK o WITH (connector = 'files', path = 'out', format = 'json');
INSERT INTO o FROM s |> SELECT b div a AS q,
  CASE WHEN t RLIKE 'x(\\\\d)' THEN regexp_extract(t, 'x(\\\\d)', 0) END AS r,
  t RLIKE '(?s)^(?:ab.*)\\\\z' AS m;
"""


def test_a_flink_dialect_job_plans_and_runs_as_its_spark_forms() -> None:
    """The Flink SQL job and the same job in flowc's pipe forms and Spark's functions:
    equal JobGraphs (spans aside) and the same generated PySpark."""
    flink = flowc.compile(FLINK_JOB, "j.flow", for_spark=True)
    spark = flowc.compile(SPARK_JOB, "j.flow", for_spark=True)
    assert without_spans(json.loads(flink.job_graph.to_json())) == without_spans(
        json.loads(spark.job_graph.to_json())
    )
    assert generate_pyspark(flink) == generate_pyspark(spark)
    assert "`b` DIV `a`" in generate_pyspark(flink)


def test_a_flink_division_is_never_written_untyped() -> None:
    """Flink's ``/`` means integer or real division by its operands' types: a tree not
    typed is not written (the backend reports E0720), never guessed as Spark's ``/``."""
    from flowc.sql.spark_sql import spark_text
    from flowc.sql.sql_parsing import parse_sql_uncached

    with pytest.raises(ValueError, match="not typed"):
        spark_text(parse_sql_uncached("a / b", "flink"))
    assert spark_text(parse_sql_uncached("a / b", "spark")) == "`a` / `b`"
