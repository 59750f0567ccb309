"""Spark's functions and literal casts: flowc's checks (E0230–E0232) against the real Spark.

- ``compiler/sql/spark_functions.py`` is exactly what ``python -m flowc.runtime.function_list``
  writes from the installed pyspark (so upgrading pyspark fails here until it is
  regenerated);
- every expression flowc refuses fails in Spark, every one it accepts runs: unknown and
  window functions, and string literals Spark's ANSI mode casts (``amount > 'large'``);
- flowc's ports of Spark's string parsers agree with Spark's ``try_cast`` on a corpus;
- no Spark function, called as a user would call it, is refused.
"""

from __future__ import annotations

import ast as pyast
import re
from pathlib import Path
from typing import Any

import pytest
from sqlglot import parse_one

import flowc
from flowc.ast import SqlExpr
from flowc.diagnostics import Reporter
from flowc.spans import Span
from flowc.sql import spark_functions
from flowc.sql.functions import check_functions
from flowc.sql.spark_casts import spark_can_cast

REGENERATE = "python -m flowc.runtime.function_list"

# ---------------------------------------------------------------- the shipped list


def test_shipped_function_list_is_what_pyspark_reports(spark: Any) -> None:
    from flowc.runtime.function_list import read_functions, render_module

    reported = read_functions(spark)
    shipped = Path(spark_functions.__file__).read_text(encoding="utf-8")
    problems = []
    for name, now, before in (
        ("functions", reported.functions, spark_functions.FUNCTIONS),
        ("aggregate functions", reported.aggregate_functions, spark_functions.AGGREGATE_FUNCTIONS),
        ("window functions", reported.window_functions, spark_functions.WINDOW_FUNCTIONS),
    ):
        if now != before:
            problems.append(
                f"{name}: new in pyspark {sorted(now - before)}, gone {sorted(before - now)}"
            )
    if reported.pyspark_version != spark_functions.PYSPARK_VERSION:
        problems.append(
            f"generated from pyspark {spark_functions.PYSPARK_VERSION}, "
            f"installed is {reported.pyspark_version}"
        )
    if not problems and render_module(reported) != shipped:
        problems.append("the file is not what the script writes (edited by hand?)")
    assert not problems, (
        "compiler/sql/spark_functions.py is out of date with the installed pyspark; "
        f"regenerate it with `{REGENERATE}` and review the diff:\n  " + "\n  ".join(problems)
    )


def test_shipped_list_is_plain_sorted_data() -> None:
    assert len(spark_functions.FUNCTIONS) > 400
    assert {"upper", "sum", "count", "date_trunc", "window"} <= spark_functions.FUNCTIONS
    assert "upcase" not in spark_functions.FUNCTIONS
    assert spark_functions.AGGREGATE_FUNCTIONS <= spark_functions.FUNCTIONS
    assert spark_functions.WINDOW_FUNCTIONS <= spark_functions.FUNCTIONS
    assert {"sum", "mean", "every", "try_sum"} <= spark_functions.AGGREGATE_FUNCTIONS
    assert {"row_number", "lag"} <= spark_functions.WINDOW_FUNCTIONS
    assert not spark_functions.AGGREGATE_FUNCTIONS & spark_functions.WINDOW_FUNCTIONS
    text = Path(spark_functions.__file__).read_text(encoding="utf-8")
    assert REGENERATE in text.splitlines()[0]
    imports = [
        node
        for node in pyast.parse(text).body
        if isinstance(node, pyast.Import | pyast.ImportFrom) and node.module != "__future__"
    ]
    assert imports == [], "the generated module is plain data"


# ---------------------------------------------------------------- one expression, both sides

#: A one-row table with a column of each type; the same columns in flowc.
COLUMNS = (
    ("amount", "DOUBLE", "CAST(1.5 AS DOUBLE)"),
    ("f", "FLOAT", "CAST(1.5 AS FLOAT)"),
    ("n", "INT", "1"),
    ("b", "BIGINT", "CAST(1 AS BIGINT)"),
    ("t", "TINYINT", "CAST(1 AS TINYINT)"),
    ("price", "DECIMAL(10, 2)", "CAST(1.5 AS DECIMAL(10, 2))"),
    ("d", "DATE", "DATE '2024-01-01'"),
    ("ts", "TIMESTAMP", "TIMESTAMP '2024-01-01 10:00:00'"),
    ("local", "TIMESTAMP_NTZ", "TIMESTAMP_NTZ '2024-01-01 10:00:00'"),
    ("ok", "BOOLEAN", "true"),
    ("card", "STRING", "'abc'"),
)

#: Expressions flowc refuses (E0231) because Spark's ANSI mode fails on their literal.
REFUSED = (
    "amount > 'large'",
    "amount = ''",
    "'large' < amount",
    "f > 'x'",
    "price > 'abc'",
    "n > '12.5'",  # an INT compares as BIGINT: no fraction
    "n > '1e3'",
    "b = 'large'",
    "t <=> '12.0'",
    "n + 'a'",
    "n * '2.5'",
    "amount - 'x'",
    "amount IN ('a', 'b')",
    "amount BETWEEN '1' AND 'many'",
    "d > '2024-13-01'",
    "d = 'last week'",
    "ts < '2024-01-01 garbage'",
    "ts >= '2024-01-01 25:00:00'",
    "ts = 'now UTC'",
    "local > '10:00:00'",
    "ok = 'maybe'",
    "CAST('abc' AS INT)",
    "CAST('12.5' AS INT)",
    "CAST('300' AS TINYINT)",
    "CAST('99999999999' AS INT)",
    "CAST('1e20' AS DECIMAL(10, 2))",
    "CAST('2024-02-30' AS DATE)",
    "CAST('x' AS BOOLEAN)",
)

#: Expressions with a literal Spark casts successfully: flowc accepts them.
ACCEPTED = (
    "amount > '12.5'",
    "amount > ' 12.5 '",
    "amount > '1e3'",
    "amount > '12d'",
    "amount < 'Infinity'",
    "amount <> 'nan'",
    "f > '1.5'",
    "n > '12'",
    "n > '99999999999'",  # compared as BIGINT, not INT
    "t < '300'",  # likewise
    "price < '1e20'",  # a DECIMAL compares as DOUBLE
    "n + '1'",
    "amount * '2'",
    "n IN ('1', '2')",
    "amount BETWEEN '0' AND '100.5'",
    "d > '2024-01-01'",
    "d > '2024'",
    "d > 'yesterday'",
    "d <> '2024-01-01 ignored'",
    "ts > '2024-01-01'",
    "ts > '2024-01-01T10:00:00Z'",
    "ts < 'now'",
    "ts > 'today Europe/Paris'",
    "local > '2024-01-01 10:00:00Z'",
    "ok = 'yes'",
    "ok <> ' FALSE '",
    "card = 'large'",
    "card > '12.5'",
    "CAST(' 12 ' AS INT)",
    "CAST('+12' AS BIGINT)",
    "CAST('12.345' AS DECIMAL(10, 2))",
    "CAST(' 1.5e1 ' AS DECIMAL(10, 2))",
    "CAST('2024-02-29' AS DATE)",
    "try_cast('abc' AS INT)",
    "DATE '2024-02-29'",
)


def flowc_errors(expression: str, settings: str = "") -> list[str]:
    """The error codes flowc reports for ``SELECT <expression>`` over COLUMNS."""
    columns = ", ".join(f"{name} {kind}" for name, kind, _ in COLUMNS)
    program = (
        f"{settings}"
        f"CREATE SOURCE s ({columns}) WITH (connector = 'files', path = 'in', format = 'json');\n"
        "CREATE SINK o WITH (connector = 'console');\n"
        f"INSERT INTO o FROM s |> SELECT {expression} AS x;\n"
    )
    try:
        flowc.compile(program, filename="literal.flow")
    except flowc.CompileError as error:
        return [d.code for d in error.diagnostics if d.severity is flowc.Severity.ERROR]
    return []


def spark_error(spark: Any, items: str) -> str | None:
    """Spark's error class for ``SELECT <items>`` over the one-row table, or None."""
    values = ", ".join(f"{value} AS {name}" for name, _, value in COLUMNS)
    spark.sql(f"SELECT {values}").createOrReplaceTempView("flowc_literals")
    try:
        spark.sql(f"SELECT {items} FROM flowc_literals").collect()
    except Exception as error:  # pyspark's error classes differ by version: read the class
        match = re.search(r"\[([A-Z_]+)(\.[A-Z_]+)?\]", str(error))
        return match.group(1) if match else type(error).__name__
    return None


@pytest.fixture(scope="module")
def ansi_spark(spark: Any) -> Any:
    assert spark.conf.get("spark.sql.ansi.enabled") == "true", "Spark 4 runs in ANSI mode"
    return spark


@pytest.mark.parametrize("expression", REFUSED)
def test_refused_literal_fails_in_spark(ansi_spark: Any, expression: str) -> None:
    assert set(flowc_errors(expression)) == {"E0231"}
    error = spark_error(ansi_spark, f"{expression} AS x")
    assert error in ("CAST_INVALID_INPUT", "NUMERIC_VALUE_OUT_OF_RANGE")


@pytest.mark.parametrize("expression", ACCEPTED)
def test_accepted_literal_runs_in_spark(ansi_spark: Any, expression: str) -> None:
    assert flowc_errors(expression) == []
    assert spark_error(ansi_spark, f"{expression} AS x") is None


def test_ansi_mode_off_makes_the_literals_null(spark: Any) -> None:
    off = "SET spark.sql.ansi.enabled = false;\n"
    assert flowc_errors("amount > 'large'", off) == []
    assert flowc_errors("CAST('abc' AS INT)", off) == []
    spark.conf.set("spark.sql.ansi.enabled", "false")
    try:
        assert spark_error(spark, "amount > 'large' AS x") is None
        assert spark_error(spark, "CAST('abc' AS INT) AS x") is None
    finally:
        spark.conf.set("spark.sql.ansi.enabled", "true")


# ---------------------------------------------------------------- Spark's string parsers

CORPUS = (
    *("", " ", "12", " 12 ", "+12", "-12", "+", "-", "12.", "12.0", "12.5", ".5", "5."),
    *("1e3", "1E3", "1e+3", "1e-3", "1.5e1", "e3", "1e", "12d", "12f", "0x1p3", "0x1.8p1"),
    *("0x10", "Infinity", "-Infinity", "infinity", "INF", "-inf", "NaN", "nan", "-nan"),
    *("+NaN", "large", "1,000", "1_000", "\uff11\uff12", "\t12\n", "12\u00a0", "99999999999"),
    *("9223372036854775807", "9223372036854775808", "-9223372036854775808", "2147483648"),
    *("127", "128", "-129", "32768", "300", "00012", "1e20", "12345678.125", "99999999.995"),
    *("99999999.994", "1e-50", "2024-01-01", "2024-1-1", "2024-13-01", "2024-02-29"),
    *("2023-02-29", "2024", "2024-01", "2024-01-01 garbage", "2024-01-01T10:00:00"),
    *("2024-01-01 10:00", "2024-01-01 10:00:00.123456789", "2024-01-01 25:00:00"),
    *("2024-01-01 10:60:00", "2024-01-01 10:00:00Z", "2024-01-01 10:00:00+02:00"),
    *("2024-01-01 10:00:00 Europe/Paris", "10:00:00", "T10:00:00", " T10:00:00", "10:00"),
    *("+2024-01-01", "-2024-01-01", "12345-01-01", "99-01-01", "2024-01-01T", "2024/01/01"),
    *("t", "true", " True ", "y", "yes", "1", "f", "false", "n", "no", "0", "maybe", "on"),
    "\x01true\x02",
)
TARGETS = (
    *("TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "DECIMAL(10, 2)"),
    *("DECIMAL(38, 0)", "DECIMAL(5, 5)", "DATE", "TIMESTAMP", "TIMESTAMP_NTZ", "BOOLEAN"),
)
#: Special values Spark reads only in a literal (it folds them), so they are cast as literals.
SPECIAL = (
    *("yesterday", "today", "tomorrow", "now", "epoch", " Epoch ", "now UTC"),
    *("today Europe/Paris", "todayx", "next week", "ep"),
)


def test_string_casts_agree_with_spark(spark: Any) -> None:
    frame = spark.createDataFrame([(value,) for value in CORPUS], "v string")
    columns = [f"try_cast(v AS {target}) IS NULL AS c{i}" for i, target in enumerate(TARGETS)]
    rows = frame.selectExpr("v", *columns).collect()
    wrong = [
        (row["v"], target, "Spark casts it" if spark_ok else "Spark fails")
        for row in rows
        for i, target in enumerate(TARGETS)
        if (spark_ok := not row[f"c{i}"]) != spark_can_cast(row["v"], target)
    ]
    literal_targets = ("DATE", "TIMESTAMP", "TIMESTAMP_NTZ")
    cells = [(value, target) for value in SPECIAL for target in literal_targets]
    literal = ", ".join(
        f"try_cast('{value}' AS {target}) IS NULL AS c{i}"
        for i, (value, target) in enumerate(cells)
    )
    row = spark.sql(f"SELECT {literal}").collect()[0]
    wrong += [
        (value, target, "Spark casts it" if spark_ok else "Spark fails")
        for i, (value, target) in enumerate(cells)
        if (spark_ok := not row[f"c{i}"]) != spark_can_cast(value, target)
    ]
    assert wrong == []


# ---------------------------------------------------------------- functions


@pytest.mark.parametrize(
    ("expression", "code", "spark_class"),
    [
        ("upcase(card)", "E0230", "UNRESOLVED_ROUTINE"),
        ("week(ts)", "E0230", "UNRESOLVED_ROUTINE"),  # sqlglot writes WEEK(ts)
        ("lag(n)", "E0232", "WINDOW_FUNCTION_WITHOUT_OVER_CLAUSE"),
        ("row_number()", "E0232", "WINDOW_FUNCTION_WITHOUT_OVER_CLAUSE"),
    ],
)
def test_refused_function_fails_in_spark(
    spark: Any, expression: str, code: str, spark_class: str
) -> None:
    assert flowc_errors(expression) == [code]
    sql = parse_one(expression, dialect="spark").sql("spark")  # what flowc's program runs
    assert spark_error(spark, f"{sql} AS x") == spark_class


def test_aggregates_sqlglot_does_not_know_run_in_spark(spark: Any) -> None:
    items = "mean(amount) AS m, std(amount) AS sd, every(n > 0) AS e, try_sum(b) AS ts"
    columns = ", ".join(f"{name} {kind}" for name, kind, _ in COLUMNS)
    program = (
        "SET max_parallelism = 128;\n"
        f"CREATE SOURCE s ({columns}) WITH (connector = 'files', path = 'in', format = 'json');\n"
        "CREATE SINK o WITH (connector = 'console', mode = 'update');\n"
        f"INSERT INTO o FROM s |> KEY BY card |> AGGREGATE {items};\n"
    )
    flowc.compile(program, filename="aggregates.flow")
    assert spark_error(spark, items) is None


def test_over_windows_fail_on_a_stream(spark: Any) -> None:
    assert flowc_errors("sum(n) OVER (PARTITION BY card)") == ["E0232"]
    stream = spark.readStream.format("rate").option("rowsPerSecond", 1).load()
    query = stream.selectExpr("sum(value) OVER (PARTITION BY value % 2) AS total")
    with pytest.raises(Exception, match="NON_TIME_WINDOW_NOT_SUPPORTED_IN_STREAMING"):
        query.writeStream.format("noop").start().stop()


def _unknown_calls(text: str) -> list[str]:
    reporter = Reporter()
    expr = SqlExpr(text=text, tree=parse_one(text, dialect="spark"), span=Span("x", 1, 1, 1, 1))
    check_functions(expr, reporter)
    return [d.message for d in reporter.diagnostics if d.code == "E0230"]


def test_no_spark_function_is_an_unknown_function() -> None:
    """sqlglot reads some calls as its own functions and writes them back under another
    name; for every Spark function that name must be one Spark knows."""
    refused = {}
    for name in sorted(spark_functions.FUNCTIONS):
        if not re.fullmatch(r"[a-z_][a-z0-9_]*", name):
            continue  # operators
        for arguments in ("x", "x, y", "x, y, z", "", "x, 1", "x, 'a', 'b'"):
            try:
                messages = _unknown_calls(f"{name}({arguments})")
            except Exception:  # sqlglot's parser wants other arguments: try the next ones
                continue
            if messages:
                refused[name] = messages
            break
    assert refused == {}
