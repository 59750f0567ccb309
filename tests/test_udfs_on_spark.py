"""Python functions on Spark (issue 13, item 5): CREATE FUNCTION and callables given to
flowc.compile, checked against plain Python over several micro-batches, and their
failures at run time named by function and .flow line.

Each test runs on the shared local SparkSession. The expected rows are computed by
calling the same Python functions in plain Python over the same input files.
"""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc.errorcodes import Code
from tests.helpers.files import Row, at, source, write_batches
from tests.helpers.spark_run import compiled, into_memory, run_generated, run_in, spark_codes

PRICING = '''
from decimal import Decimal


def band(price):
    """A price's band; NULL in, NULL out."""
    if price is None:
        return None
    return "high" if price >= 100 else "mid" if price >= 20 else "low"


def fee(price, rate):
    return (Decimal(price) * Decimal(str(rate))).quantize(Decimal("0.01"))


def words(text):
    return [w for w in text.lower().split() if w]
'''

BIDS: list[list[Row]] = [
    [
        {"auction": 1, "price": 10, "note": "Fast Car", "ts": at(0)},
        {"auction": 2, "price": 120, "note": "old boat", "ts": at(1)},
        {"auction": 1, "price": 25, "note": None, "ts": at(2)},
    ],
    [
        {"auction": 3, "price": None, "note": "a b  c", "ts": at(61)},
        {"auction": 2, "price": 99, "note": "Boat", "ts": at(62)},
    ],
    [
        {"auction": 1, "price": 300, "note": "car car", "ts": at(120)},
        {"auction": 4, "price": 5, "note": "x", "ts": at(121)},
    ],
]
COLUMNS = "auction BIGINT, price INT, note STRING, ts TIMESTAMP"
DECLARE = (
    "CREATE FUNCTION band(price BIGINT) RETURNS STRING LANGUAGE python AS 'pricing:band';\n"
    "CREATE FUNCTION fee(price BIGINT, rate DOUBLE) RETURNS DECIMAL(12, 2)\n"
    "  LANGUAGE python AS 'pricing:fee';\n"
    "CREATE FUNCTION words(text STRING) RETURNS ARRAY<STRING> LANGUAGE python AS 'pricing.words';\n"
)


def table(spark: Any, name: str) -> list[tuple[Any, ...]]:
    """The memory table's rows, sorted with NULLs first (plain sort fails on None)."""
    rows = [tuple(row) for row in spark.sql(f"SELECT * FROM `{name}`").collect()]
    return sorted(rows, key=repr)


def _pricing(tmp_path: Path) -> dict[str, Any]:
    """The module, written beside the job, and its functions for the plain computation."""
    (tmp_path / "pricing.py").write_text(PRICING, encoding="utf-8")
    namespace: dict[str, Any] = {}
    exec(PRICING, namespace)
    return namespace


def test_module_functions_feed_a_keyed_aggregate(spark: Any, tmp_path: Path) -> None:
    """A function's result is a grouping key: counts per band after every micro-batch
    equal plain Python's; the INT argument is widened to the declared BIGINT."""
    pricing = _pricing(tmp_path)
    write_batches(tmp_path / "bids", BIDS)
    job = compiled(
        tmp_path,
        DECLARE
        + source("bids", COLUMNS)
        + "SET max_parallelism = 16;\n"
        + "CREATE SINK per_band WITH (connector = 'noop', mode = 'update');\n"
        + "INSERT INTO per_band FROM bids |> EXTEND band(price) AS band |> KEY BY band\n"
        + "  |> AGGREGATE count(*) AS n, sum(price) AS total;\n",
    )
    assert spark_codes(job) == set()
    run_generated(spark, tmp_path, job, into_memory)
    counts: dict[Any, int] = defaultdict(int)
    totals: dict[Any, int | None] = defaultdict(lambda: None)
    expected = []
    for batch in BIDS:
        for row in batch:
            key = pricing["band"](row["price"])
            counts[key] += 1
            if row["price"] is not None:
                totals[key] = (totals[key] or 0) + row["price"]
        for key in dict.fromkeys(pricing["band"](r["price"]) for r in batch):
            expected.append((key, counts[key], totals[key]))
    rows = table(spark, "per_band")
    assert sorted(rows, key=repr) == sorted(expected, key=repr)
    assert ("high", 2, 420) in rows  # 120, then 300 two batches later


def test_pickled_and_arrow_functions_return_their_declared_types(
    spark: Any, tmp_path: Path
) -> None:
    """DECIMAL and ARRAY results (pickled UDFs) and a STRING one (Arrow) are exactly plain
    Python's, row by row, NULLs included."""
    pricing = _pricing(tmp_path)
    write_batches(tmp_path / "bids", BIDS)
    job = compiled(
        tmp_path,
        DECLARE
        + source("bids", COLUMNS)
        + "CREATE SINK out WITH (connector = 'memory');\n"
        + "INSERT INTO out FROM bids |> WHERE note IS NOT NULL AND price IS NOT NULL\n"
        + "  |> SELECT auction, band(price) AS band, fee(price, 0.075) AS fee,"
        + " words(note) AS words;\n",
    )
    text = job.spark_plan.to_text()
    assert any("band(price BIGINT) -> STRING" in line and "Arrow" in line for line in text)
    assert any("fee(" in line and "pickled" in line for line in text)
    run_generated(spark, tmp_path, job)
    expected = [
        (
            r["auction"],
            pricing["band"](r["price"]),
            pricing["fee"](r["price"], 0.075),
            pricing["words"](r["note"]),
        )
        for batch in BIDS
        for r in batch
        if r["note"] is not None and r["price"] is not None
    ]
    rows = [(auction, band, fee, list(words)) for auction, band, fee, words in table(spark, "out")]
    assert sorted(rows, key=repr) == sorted(expected, key=repr)
    assert all(isinstance(fee, Decimal) for _, _, fee, _ in rows)


def test_callables_given_to_compile_run_without_a_declaration(spark: Any, tmp_path: Path) -> None:
    write_batches(tmp_path / "bids", BIDS)

    def cents(price: int, bonus: int) -> int:
        return price * 100 + bonus

    program = (
        source("bids", COLUMNS)
        + "CREATE SINK out WITH (connector = 'memory');\n"
        + "INSERT INTO out FROM bids |> WHERE price IS NOT NULL"
        + " |> SELECT auction, cents(price, auction) AS c;\n"
    )
    params = (("price", "BIGINT"), ("bonus", "BIGINT"))
    given = flowc.PythonFunction("cents", cents, params, "BIGINT")
    with pytest.raises(flowc.CompileError) as refused:
        flowc.compile(program, str(tmp_path / "job.flow"))
    assert [d.code for d in refused.value.diagnostics] == [Code.E0230]
    job = flowc.compile(program, str(tmp_path / "job.flow"), functions=[given], for_spark=True)
    report = run_in(job, tmp_path)
    assert [q.error for q in report.queries] == [None]
    expected = [
        (r["auction"], cents(r["price"], r["auction"]))
        for batch in BIDS
        for r in batch
        if r["price"] is not None
    ]
    assert table(spark, "out") == sorted(expected, key=repr)


def test_a_failure_inside_a_function_names_it_and_its_call(spark: Any, tmp_path: Path) -> None:
    """Two calls of one function: the one whose row fails is the one the caret is under."""
    (tmp_path / "ratios.py").write_text("def ratio(a, b):\n    return a / b\n", encoding="utf-8")
    write_batches(tmp_path / "bids", BIDS)
    program = (
        "CREATE FUNCTION ratio(a DOUBLE, b DOUBLE) RETURNS DOUBLE LANGUAGE python AS "
        "'ratios:ratio';\n"
        + source("bids", COLUMNS)
        + "CREATE SINK out WITH (connector = 'memory');\n"
        + "INSERT INTO out FROM bids |> WHERE price IS NOT NULL\n"
        + "  |> SELECT ratio(price, 2) AS half, ratio(10, price - 99) AS odd;\n"
    )
    job = flowc.compile(program, str(tmp_path / "job.flow"), for_spark=True)
    report = run_in(job, tmp_path)
    (query,) = report.queries
    assert query.code == Code.E0805
    assert query.failure is not None
    assert query.failure.span.line == 5
    assert program.splitlines()[4][query.failure.span.column - 1 :].startswith("ratio(10,")
    assert "function 'ratio' raised ZeroDivisionError" in query.failure.message
    assert "ratios.py, line 2, in ratio" in query.failure.message


def test_a_value_of_another_type_fails_where_pyspark_writes_null(
    spark: Any, tmp_path: Path
) -> None:
    from pyspark.sql import functions as F

    def raw(value: object, type_text: str, arrow: bool) -> object:
        udf = F.udf(lambda _: value, type_text, useArrow=arrow)
        return spark.range(1).select(udf("id").alias("v")).collect()[0]["v"]

    # PySpark's own UDFs, without a word: a pickled one writes NULL for a str returned as
    # BIGINT and 0 for an INT out of range; an Arrow one truncates a float for a BIGINT.
    assert raw("7", "bigint", arrow=False) is None
    assert raw(2**40, "int", arrow=False) == 0
    assert raw(7.5, "bigint", arrow=True) == 7
    write_batches(tmp_path / "bids", BIDS)
    given = flowc.PythonFunction("as_text", lambda x: str(x), (("x", "BIGINT"),), "BIGINT")
    program = (
        source("bids", COLUMNS)
        + "CREATE SINK out WITH (connector = 'memory');\n"
        + "INSERT INTO out FROM bids |> SELECT as_text(auction) AS t;\n"
    )
    job = flowc.compile(program, str(tmp_path / "job.flow"), functions=[given], for_spark=True)
    (query,) = run_in(job, tmp_path).queries
    assert query.code == Code.E0805
    assert query.failure is not None and query.failure.span.line == 3
    assert "function 'as_text' returned str '1' for BIGINT" in query.failure.message


def test_a_module_that_fails_to_load_stops_the_job_before_any_query(
    spark: Any, tmp_path: Path
) -> None:
    from flowc.runtime.run import SparkRefused

    (tmp_path / "broken.py").write_text(
        "raise RuntimeError('no config')\n\ndef f(x):\n    return x\n", encoding="utf-8"
    )
    write_batches(tmp_path / "bids", BIDS)
    program = (
        "CREATE FUNCTION f(x BIGINT) RETURNS BIGINT LANGUAGE python AS 'broken:f';\n"
        + source("bids", COLUMNS)
        + "CREATE SINK out WITH (connector = 'memory');\n"
        + "INSERT INTO out FROM bids |> SELECT f(auction) AS a;\n"
    )
    job = flowc.compile(program, str(tmp_path / "job.flow"), for_spark=True)
    with pytest.raises(SparkRefused) as refused:
        run_in(job, tmp_path)
    diagnostic = refused.value.diagnostic
    assert diagnostic is not None and diagnostic.code == Code.E0282
    assert diagnostic.span.line == 1
    assert "RuntimeError: no config" in diagnostic.message
    assert not [q for q in spark.streams.active if q.name == "out"]


def test_two_jobs_with_a_module_of_one_name_each_call_their_own(spark: Any, tmp_path: Path) -> None:
    """An embedding platform runs many jobs in one process: each job's pricing.py is its
    own, never the one imported first."""
    results = []
    for number, answer in enumerate(("first", "second")):
        folder = tmp_path / f"job{number}"
        folder.mkdir()
        (folder / "pricing.py").write_text(
            f"def which(x):\n    return {answer!r}\n", encoding="utf-8"
        )
        write_batches(folder / "bids", BIDS[:1])
        program = (
            "CREATE FUNCTION which(x BIGINT) RETURNS STRING LANGUAGE python AS "
            "'pricing:which';\n"
            + source("bids", COLUMNS)
            + f"CREATE SINK out{number} WITH (connector = 'memory');\n"
            + f"INSERT INTO out{number} FROM bids |> SELECT which(auction) AS w;\n"
        )
        job = flowc.compile(program, str(folder / "job.flow"), for_spark=True)
        (query,) = run_in(job, folder).queries
        assert query.error is None
        results.append({row[0] for row in table(spark, f"out{number}")})
    assert results == [{"first"}, {"second"}]


def test_spark_refuses_a_python_function_in_an_outer_joins_on_clause(
    spark: Any, tmp_path: Path
) -> None:
    """Why E0285 exists: Spark's own refusal, and the inner join that runs."""
    from pyspark.errors import PySparkException
    from pyspark.sql import functions as F

    same = F.udf(lambda a, b: a == b, "boolean")
    left = spark.createDataFrame([(1, "a"), (2, "b")], "k INT, v STRING")
    right = spark.createDataFrame([(1, "x")], "id BIGINT, w STRING")
    condition = (left.k == right.id) & same(left.k, right.id)
    with pytest.raises(PySparkException) as refused:
        left.join(right, condition, "left").collect()
    assert "PYTHON_UDF_IN_ON_CLAUSE" in str(refused.value)
    assert [tuple(r) for r in left.join(right, condition, "inner").collect()] == [(1, "a", 1, "x")]
    with pytest.raises(flowc.CompileError) as refused_by_flowc:
        flowc.compile(
            "CREATE FUNCTION same(a BIGINT, b BIGINT) RETURNS BOOLEAN LANGUAGE python "
            "AS 'operator:eq';\n"
            + source("s", "k INT, v STRING")
            + "CREATE TABLE t (id BIGINT, w STRING) WITH (connector = 'files', path = 't', "
            "format = 'json');\nCREATE SINK o WITH (connector = 'memory');\n"
            "INSERT INTO o FROM s |> LEFT JOIN t ON k = t.id AND same(k, t.id);\n",
            str(tmp_path / "job.flow"),
        )
    assert [d.code for d in refused_by_flowc.value.diagnostics] == [Code.E0285]
