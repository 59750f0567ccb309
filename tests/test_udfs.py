"""Python functions without Spark: declarations found in the job's folder, calls typed by
their program's own signatures (never by a kept typing of another program's), the
generated program's registrations, and the check of every returned value."""

from __future__ import annotations

import datetime
import decimal
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import flowc
from flowc.errorcodes import Code
from flowc.spark.codegen import generate_pyspark
from flowc.spark.generated_runtime import checked_value
from flowc.sql.python_functions import result_kind

SOURCE = (
    "CREATE SOURCE s (k INT, v STRING) WITH (connector = 'files', path = 'in', format = 'json');\n"
    "CREATE SINK o WITH (connector = 'console');\n"
)


def _declare(returns: str, target: str = "textwrap:dedent") -> str:
    return f"CREATE FUNCTION f(x BIGINT) RETURNS {returns} LANGUAGE python AS '{target}';\n"


def _output_types(job: flowc.CompiledJob) -> list[tuple[str, str]]:
    return [(c.name, c.type) for c in job.program.inserts[0].stream.steps[-1].schema]


def test_a_call_has_its_own_programs_return_type_whatever_was_compiled_before() -> None:
    """The same expression text over the same columns types differently in two programs:
    kept typings (flowc.sql.sqltypes) must not carry one program's function into the other."""
    query = "INSERT INTO o FROM s |> SELECT f(k) AS y, f(k) + 1 AS z;\n"
    for _ in range(3):
        as_double = flowc.compile(_declare("DOUBLE") + SOURCE + query)
        as_bigint = flowc.compile(_declare("BIGINT") + SOURCE + query)
        assert _output_types(as_double) == [("y", "DOUBLE"), ("z", "DOUBLE")]
        assert _output_types(as_bigint) == [("y", "BIGINT"), ("z", "BIGINT")]


def test_compiling_from_many_threads_gives_one_plan() -> None:
    texts = [
        _declare(returns) + SOURCE + "INSERT INTO o FROM s |> SELECT f(k) AS y;\n"
        for returns in ("STRING", "DOUBLE", "BIGINT", "DATE") * 8
    ]

    def plan(text: str) -> tuple[str, str]:
        job = flowc.compile(text, for_spark=True)
        return job.physical_plan.to_text(), generate_pyspark(job)

    alone = [plan(text) for text in texts]
    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(plan, texts)) == alone


def test_each_call_is_registered_under_its_own_name() -> None:
    query = "INSERT INTO o FROM s |> WHERE f(k) <> '' |> SELECT upper(f(k)) AS a, f(k + 1) AS b;"
    job = flowc.compile(_declare("STRING") + SOURCE + query + "\n", "job.flow", for_spark=True)
    calls = job.program.function_calls
    columns = [query.index("f(k)") + 1, query.index("(f(k))") + 2, query.index("f(k + 1)") + 1]
    assert [(c.span.line, c.span.column) for c in calls] == [(4, c) for c in columns]
    assert [c.span.end_column - c.span.column for c in calls] == [4, 4, 8]
    program = generate_pyspark(job)
    for number in range(3):
        assert f"('f__flowc_{number}', 'f', 'call {number} at job.flow:4:" in program
    # Spark's function names are case-insensitive; sqlglot writes calls in capitals.
    assert "`F__FLOWC_0`" not in program  # a function name, not a column
    assert all(f"F__FLOWC_{number}(CAST(" in program for number in range(3))
    lines = [line for line in job.physical_plan.to_text().splitlines() if "python function" in line]
    assert len(lines) == 3 and all("Arrow-optimized" in line for line in lines)


def test_a_widened_argument_is_cast_to_the_declared_type() -> None:
    job = flowc.compile(
        _declare("STRING") + SOURCE + "INSERT INTO o FROM s |> SELECT f(k) AS a;\n",
        for_spark=True,
    )
    assert "F__FLOWC_0(CAST(`K` AS BIGINT))" in generate_pyspark(job).upper()


def test_calls_in_sql_queries_and_aggregates_are_typed() -> None:
    job = flowc.compile(
        _declare("DOUBLE")
        + SOURCE.replace("'console')", "'console', mode = 'update')")
        + "SET max_parallelism = 8;\n"
        + "INSERT INTO o SELECT v, max(f(k)) AS m, f(count(*)) AS c FROM s GROUP BY v;\n"
    )
    assert _output_types(job) == [("v", "STRING"), ("m", "DOUBLE"), ("c", "DOUBLE")]
    assert len(job.program.function_calls) == 2


def test_modules_are_found_in_the_jobs_folder_without_running_them(tmp_path: Path) -> None:
    """Where the job runs on Spark (check, run): a plan needs no module."""
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "pkg" / "rates.py").write_text(
        "raise SystemExit('checking must not run me')\n"
        "from textwrap import dedent as imported\n"
        "def rate(x):\n    return x\n"
        "alias = rate\n",
        encoding="utf-8",
    )
    flow = str(tmp_path / "job.flow")
    for target in ("pkg.rates:rate", "pkg.rates.rate", "pkg.rates:imported", "pkg.rates:alias"):
        job = flowc.compile(
            _declare("BIGINT", target) + SOURCE + "INSERT INTO o FROM s |> SELECT f(k) AS y;\n",
            flow,
            for_spark=True,
        )
        assert job.program.functions[0].module == "pkg.rates"
    query = "INSERT INTO o FROM s |> SELECT f(k) AS y;\n"
    planned = flowc.compile(_declare("BIGINT", "pkg.nothere:rate") + SOURCE + query, flow)
    assert planned.job_graph.to_text()
    for target, message in (
        ("pkg.rates:missing", "function 'missing' not found in module 'pkg.rates'"),
        ("pkg.nothere:rate", "Python module 'pkg.nothere' is not in the job's folder"),
    ):
        with pytest.raises(flowc.CompileError) as refused:
            flowc.compile(
                _declare("BIGINT", target) + SOURCE + "INSERT INTO o FROM s |> SELECT f(k) AS y;\n",
                flow,
                for_spark=True,
            )
        (diagnostic,) = refused.value.diagnostics
        assert diagnostic.code == Code.E0282 and message in diagnostic.message
        column = _declare("BIGINT", target).index("'") + 1  # the target's string
        assert (diagnostic.span.line, diagnostic.span.column) == (1, column)


def test_untrusted_programs_declare_only_allowed_targets() -> None:
    text = _declare("STRING") + SOURCE + "INSERT INTO o FROM s |> SELECT f(k) AS y;\n"
    with pytest.raises(flowc.CompileError) as refused:
        flowc.compile(text, trusted=False)
    assert [d.code for d in refused.value.diagnostics] == [Code.E0956]
    job = flowc.compile(text, trusted=False, allowed_functions={"textwrap:dedent"})
    assert job.program.functions[0].target == "textwrap:dedent"


def test_given_callables_are_checked_when_made() -> None:
    with pytest.raises(ValueError, match="not a plain identifier"):
        flowc.PythonFunction("my f", len, (("x", "STRING"),), "BIGINT")
    with pytest.raises(ValueError, match="is not supported in a function's signature"):
        flowc.PythonFunction("f", len, (("x", "STRUCT<a: INT>"),), "BIGINT")
    with pytest.raises(ValueError, match="not callable"):
        flowc.PythonFunction("f", "len", (), "BIGINT")  # type: ignore[arg-type]
    given = flowc.PythonFunction("upper", str.upper, (("x", "STRING"),), "STRING")
    with pytest.raises(ValueError, match="one of Spark's functions"):
        flowc.compile(SOURCE + "INSERT INTO o FROM s;\n", functions=[given])


@pytest.mark.parametrize(
    ("returns", "value", "expected"),
    [
        ("BIGINT", 7, 7),
        ("DOUBLE", 7, 7.0),
        ("DOUBLE", 2.5, 2.5),
        ("STRING", "x", "x"),
        ("BOOLEAN", False, False),
        ("DECIMAL(5, 2)", decimal.Decimal("1.5"), decimal.Decimal("1.50")),
        ("DECIMAL(5, 2)", 12, decimal.Decimal("12.00")),
        ("DATE", datetime.date(2026, 1, 2), datetime.date(2026, 1, 2)),
        ("TIMESTAMP", datetime.datetime(2026, 1, 2, 3), datetime.datetime(2026, 1, 2, 3)),
        ("ARRAY<DOUBLE>", (1, 2.5), [1.0, 2.5]),
        ("MAP<STRING, DECIMAL(3, 1)>", {"a": 1}, {"a": decimal.Decimal("1.0")}),
        ("BIGINT", None, None),
        ("ARRAY<BIGINT>", [1, None], [1, None]),
    ],
)
def test_returned_values_become_their_declared_type(
    returns: str, value: object, expected: object
) -> None:
    got = checked_value(value, result_kind(returns))
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize(
    ("returns", "value"),
    [
        ("BIGINT", "7"),
        ("BIGINT", 7.5),
        ("BIGINT", True),
        ("INT", 2**31),
        ("TINYINT", -129),
        ("DOUBLE", "1.0"),
        ("STRING", 1),
        ("DECIMAL(5, 2)", decimal.Decimal("1.005")),
        ("DECIMAL(5, 2)", decimal.Decimal("1234.5")),
        ("DATE", datetime.datetime(2026, 1, 2)),
        ("TIMESTAMP", datetime.date(2026, 1, 2)),
        ("ARRAY<BIGINT>", [1, "2"]),
        ("MAP<STRING, BIGINT>", {1: 1}),
    ],
)
def test_returned_values_of_another_type_are_refused(returns: str, value: object) -> None:
    with pytest.raises((TypeError, ValueError)):
        checked_value(value, result_kind(returns))
