"""Flink's AVG in the Flink dialect: its type is its argument's (an AVG of INT is an INT,
the sum divided by the count truncated toward zero; of DECIMAL(p, s) a DECIMAL(38,
max(6, s)) rounded half up; of FLOAT a FLOAT), where Spark's ``avg`` gives a DOUBLE or
DECIMAL(p + 4, s + 4). The variance family over integers, which Calcite reduces to
truncating integer steps, is refused (E0619). Types and values asked of Flink 2.3
(``FLINK_TYPES``; with ``FLOWC_FLINK_PYTHON`` set, the values are asked again)."""

from __future__ import annotations

import json
import os
import random
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc.program import AggregateStep
from flowc.sql.spark_sql import sql_of
from tests.helpers.files import at, source, write_batches, write_later_batch
from tests.helpers.flink import ask_flink
from tests.helpers.spark_run import run_in

#: Flink 2.3's result type of AVG over each argument type (``getResolvedSchema()``).
FLINK_TYPES = {
    "TINYINT": "TINYINT",
    "SMALLINT": "SMALLINT",
    "INT": "INT",
    "BIGINT": "BIGINT",
    "FLOAT": "FLOAT",
    "DOUBLE": "DOUBLE",
    "DECIMAL(10, 2)": "DECIMAL(38, 6)",
    "DECIMAL(10, 0)": "DECIMAL(38, 6)",
    "DECIMAL(38, 10)": "DECIMAL(38, 10)",
}


def _errors(job: flowc.CompiledJob) -> list[flowc.Diagnostic]:
    return [d for d in job.diagnostics if d.severity == flowc.Severity.ERROR]


def _program(select: str, columns: str, dialect: str = "flink") -> str:
    return (
        f"SET sql.dialect = '{dialect}';\n"
        f"CREATE SOURCE t (k STRING, {columns}) WITH (connector = 'files', path = 'in', "
        "format = 'json');\n"
        "CREATE SINK o WITH (connector = 'files', path = 'out', format = 'json', mode = 'update',"
        " key = 'k');\n"
        f"INSERT INTO o SELECT k, {select} FROM t GROUP BY k;\n"
    )


@pytest.mark.parametrize("argument", sorted(FLINK_TYPES))
def test_avg_has_flinks_type(argument: str) -> None:
    job = flowc.compile(_program("AVG(x) AS v", f"x {argument}"), "avg.flow")
    assert not _errors(job), job.diagnostics
    assert job.program.inserts[0].stream.schema[-1].type == FLINK_TYPES[argument]


def test_the_spark_dialect_keeps_sparks_avg() -> None:
    job = flowc.compile(_program("AVG(x) AS v", "x INT", dialect="spark"), "avg.flow")
    assert job.program.inserts[0].stream.schema[-1].type == "DOUBLE"


def _flink_avg(values: list[Any], kind: str) -> Any:
    """Flink's AVG over ``values`` (NULLs skipped) for an argument of type ``kind``."""
    present = [v for v in values if v is not None]
    if not present:
        return None
    if kind.startswith("DECIMAL"):
        scale = max(6, int(kind.split(",")[1].rstrip(")")))
        quotient = sum(present, Decimal(0)) / Decimal(len(present))
        return quotient.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP)
    if kind in ("FLOAT", "DOUBLE"):
        return sum(present) / len(present)
    total = sum(present)
    quotient = abs(total) // len(present)  # Java's long division truncates toward zero
    return quotient if total >= 0 else -quotient


COLUMNS = "a INT, b BIGINT, c DECIMAL(10, 2), d DECIMAL(5, 0), f DOUBLE"
SELECT = (
    "AVG(a) AS a, AVG(b) AS b, AVG(c) AS c, AVG(d) AS d, AVG(f) AS f, "
    "AVG(DISTINCT a) AS da, AVG(b) FILTER (WHERE a > 0) AS fb, AVG(DISTINCT c) AS dc"
)
KINDS = {"a": "INT", "b": "BIGINT", "c": "DECIMAL(10, 2)", "d": "DECIMAL(5, 0)", "f": "DOUBLE"}


def _rows(rng: random.Random, count: int, second: int) -> list[dict[str, Any]]:
    rows = []
    for i in range(count):
        rows.append(
            {
                "k": rng.choice("pq"),
                "a": rng.choice([None, rng.randint(-50, 50)]),
                "b": rng.randint(-(10**12), 10**12),
                "c": str(Decimal(rng.randint(-99999, 99999)).scaleb(-2)),
                "d": rng.choice([None, rng.randint(-999, 999)]),
                "f": rng.uniform(-10, 10),
                "ts": at(second + i),
            }
        )
    return rows


def _expected(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each key's Flink row, in plain Python."""
    out = {}
    for key in sorted({r["k"] for r in rows}):
        mine = [r for r in rows if r["k"] == key]

        def column(name: str, of: list[dict[str, Any]] = mine) -> list[Any]:
            values = [r[name] for r in of]
            return [Decimal(v) if isinstance(v, str) else v for v in values]

        row = {name: _flink_avg(column(name), kind) for name, kind in KINDS.items()}
        row["da"] = _flink_avg(list(set(column("a")) - {None}), "INT")
        row["fb"] = _flink_avg(column("b", [r for r in mine if (r["a"] or 0) > 0]), "BIGINT")
        row["dc"] = _flink_avg(list(set(column("c"))), "DECIMAL(10, 2)")
        out[key] = row
    return out


def _latest(folder: Path) -> dict[str, dict[str, Any]]:
    """The upsert files table's current row per key (its ``_current`` version), numbers
    with a point read as exact decimals."""
    pointer = json.loads((folder / "_current").read_text(encoding="utf-8"))
    rows = {}
    for part in sorted((folder / pointer["version"]).glob("part-*.json")):
        for line in part.read_text(encoding="utf-8").splitlines():
            row = json.loads(line, parse_float=Decimal)
            rows[row["k"]] = row
    return rows


def _same(written: dict[str, Any], expected: dict[str, Any]) -> None:
    for name, value in expected.items():
        got = written.get(name)
        if isinstance(value, Decimal):
            assert Decimal(str(got)) == value, (name, got, value)
        elif isinstance(value, float):
            assert float(got) == pytest.approx(value, rel=1e-12), (name, got, value)
        else:
            assert got == value, (name, got, value)


def test_avg_computes_flinks_values_across_micro_batches_and_a_restart(
    spark: Any, tmp_path: Path
) -> None:
    """Integer averages truncate toward zero (negative sums too), decimals round half up
    at Flink's scale, DISTINCT and FILTER included: the newest row per key after three
    micro-batches, and again after a restart with a fourth, equal plain Python's."""
    rng = random.Random(27)
    batches = [_rows(rng, 25, 60 * n) for n in range(3)]
    write_batches(tmp_path / "in", batches)
    program = (
        "SET sql.dialect = 'flink';\nSET max_parallelism = 8;\n"
        + source("t", f"k STRING, {COLUMNS}, ts TIMESTAMP", path="in")
        + "CREATE SINK o WITH (connector = 'files', path = 'out', format = 'json', "
        + "mode = 'update', key = 'k');\n"
        + f"INSERT INTO o SELECT k, {SELECT} FROM t GROUP BY k;\n"
    )
    job = flowc.compile(program, str(tmp_path / "job.flow"), for_spark=True)
    assert not _errors(job), job.diagnostics
    assert [q.error for q in run_in(job, tmp_path).queries] == [None]
    first = [r for batch in batches for r in batch]
    written = _latest(tmp_path / "out")
    expected = _expected(first)
    assert sorted(written) == sorted(expected)
    for key, row in expected.items():
        _same(written[key], row)
    later = _rows(rng, 20, 600)
    write_later_batch(tmp_path / "in", later)
    assert [q.error for q in run_in(job, tmp_path).queries] == [None]
    written = _latest(tmp_path / "out")
    for key, row in _expected(first + later).items():
        _same(written[key], row)


@pytest.mark.parametrize(
    ("select", "columns", "at_text"),
    [
        ("STDDEV_POP(a) AS v", "a INT", "STDDEV_POP(a)"),
        ("VAR_SAMP(b) AS v", "b BIGINT", "VAR_SAMP(b)"),
        ("STDDEV(a) AS v", "a SMALLINT", "STDDEV(a)"),
        ("VARIANCE(DISTINCT a) AS v", "a TINYINT", "VARIANCE(DISTINCT a)"),
    ],
)
def test_the_variance_family_over_integers_is_refused_at_the_call(
    select: str, columns: str, at_text: str
) -> None:
    """Flink types them as their integer argument and computes them in truncating integer
    steps (VAR_SAMP of 0 and 1 is 1 in Flink, 0.5 exactly): E0619 at the call."""
    # The pipe form: the SQL form's SELECT after the failed AGGREGATE would also report
    # its column as unknown (a query's later steps are still checked).
    text = (
        f"SET sql.dialect = 'flink';\nCREATE SOURCE t (k STRING, {columns}) "
        "WITH (connector = 'datagen');\nCREATE SINK o WITH (connector = 'console', "
        f"mode = 'update');\nINSERT INTO o FROM t |> KEY BY k |> AGGREGATE {select};\n"
    )
    with pytest.raises(flowc.CompileError) as raised:
        flowc.compile(text, "var.flow")
    (error,) = [d for d in raised.value.diagnostics if d.severity == flowc.Severity.ERROR]
    assert error.code == "E0619"
    line = text.splitlines()[error.span.line - 1]
    assert line[error.span.column - 1 : error.span.end_column - 1] == at_text
    assert "CAST" in (error.help or "")


def test_the_variance_family_over_doubles_is_sparks() -> None:
    job = flowc.compile(_program("STDDEV_POP(x) AS v, VAR_SAMP(x) AS w", "x DOUBLE"), "v.flow")
    assert not _errors(job), job.diagnostics


FLINK_PROBE = """
import json, sys
from pyflink.table import EnvironmentSettings, TableEnvironment
t = TableEnvironment.create(EnvironmentSettings.in_batch_mode())
t.get_config().set("parallelism.default", "1")
out = []
for kind, values in json.loads(sys.argv[1]):
    cells = ["NULL" if v is None else "'%s'" % v for v in values]
    rows = ", ".join("(CAST(%s AS %s))" % (cell, kind) for cell in cells)
    table = t.sql_query("SELECT AVG(x) FROM (VALUES %s) AS v(x)" % rows)
    result = list(table.execute().collect())[0][0]
    out.append([table._j_table.getResolvedSchema().getColumnDataTypes().get(0).toString(),
                None if result is None else str(result)])
print(json.dumps(out))
"""

ASKED = [
    ("INT", [1, 2, 2]),
    ("INT", [-7, 0, 0]),
    ("BIGINT", [-(10**12) - 1, 10**12, 3]),
    ("TINYINT", [-5, -2]),
    ("DECIMAL(10, 2)", ["1.50", "2.25", "1.00"]),
    ("DECIMAL(10, 0)", ["1", "1", "2"]),
    ("DECIMAL(5, 3)", ["0.001", "0.002"]),
    ("DECIMAL(10, 2)", ["-0.01", "-0.02", "0.00"]),
    ("INT", [None, None]),
]


def _spark_text(kind: str) -> str:
    """The Spark SQL flowc writes for the Flink dialect's ``AVG(x)``, ``x`` of ``kind``."""
    job = flowc.compile(_program("AVG(x) AS v", f"x {kind}"), "avg.flow")
    (step,) = [s for s in job.program.inserts[0].stream.steps if isinstance(s, AggregateStep)]
    return sql_of(step.node.items[-1].expr)


@pytest.mark.skipif(
    not os.environ.get("FLOWC_FLINK_PYTHON"), reason="set FLOWC_FLINK_PYTHON to a PyFlink 2.3"
)
def test_against_flink_avg_types_and_values(spark: Any) -> None:
    """Real Flink (opt-in): AVG's type and value over each list, against the Spark SQL
    flowc writes for the Flink dialect, evaluated on Spark."""
    from pyspark.sql import functions

    flink = ask_flink(FLINK_PROBE, ASKED)
    for (kind, values), (flink_type, flink_value) in zip(ASKED, flink, strict=True):
        job = flowc.compile(_program("AVG(x) AS v", f"x {kind}"), "avg.flow")
        flowc_type = job.program.inserts[0].stream.schema[-1].type
        assert flowc_type.replace(" ", "") == flink_type.replace(" NOT NULL", "").replace(" ", "")
        frame = spark.createDataFrame([(v,) for v in values], "x STRING").selectExpr(
            f"CAST(x AS {kind}) AS x"
        )
        value = frame.agg(functions.expr(_spark_text(kind))).collect()[0][0]
        assert (None if value is None else str(value)) == flink_value, (kind, values)
