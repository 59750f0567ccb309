"""Flink's SPLIT_INDEX(s, sep, i) in the Flink dialect: the i-th part (from 0) of ``s``
split on the string ``sep`` (commons-lang's splitByWholeSeparatorPreserveAllTokens),
NULL past the parts, for a negative index and for an empty string; Spark has no
SPLIT_INDEX. Values asked of Flink 2.3 (``FLINK_ANSWERS``; with ``FLOWC_FLINK_PYTHON``
set, asked again)."""

from __future__ import annotations

import os
from typing import Any

import pytest

import flowc
from flowc.program import SelectStep
from flowc.sql.spark_sql import sql_of
from tests.helpers.flink import ask_flink

#: (s, sep, i) -> Flink 2.3's SPLIT_INDEX(s, sep, i).
FLINK_ANSWERS: list[tuple[tuple[str | None, str, int | None], str | None]] = [
    (("a,b,,c,", ",", 0), "a"),
    (("a,b,,c,", ",", 2), ""),
    (("a,b,,c,", ",", 4), ""),
    (("a,b,,c,", ",", 5), None),
    (("", ",", 0), None),
    (("abc", ",", 0), "abc"),
    (("a..b", ".", 1), ""),
    (("a..b", "..", 1), "b"),
    (("a,b", ",", -1), None),
    ((",a", ",", 0), ""),
    (("a|b", "|", 1), "b"),
    (("x", "x", 0), ""),
    (("axbxc", "xb", 1), "xc"),
    (("a%b_c", "%", 1), "b_c"),
    (("a\\xb", "\\x", 1), "b"),
    (("aaa", "aa", 1), "a"),
    ((None, ",", 0), None),
    (("a,b", ",", None), None),
]


def _spark_text(sep: str) -> str:
    program = (
        "SET sql.dialect = 'flink';\n"
        "CREATE SOURCE t (s STRING, i INT) WITH (connector = 'datagen');\n"
        "CREATE SINK o WITH (connector = 'console');\n"
        f"INSERT INTO o SELECT SPLIT_INDEX(s, '{sep.replace(chr(39), chr(39) * 2)}', i) AS v"
        " FROM t;\n"
    )
    job = flowc.compile(program, "split.flow")
    (step,) = [s for s in job.program.inserts[0].stream.steps if isinstance(s, SelectStep)]
    assert job.program.inserts[0].stream.schema[0].type == "STRING"
    return sql_of(step.node.items[0].expr)


def test_split_index_gives_flinks_parts_on_spark(spark: Any) -> None:
    for (text, sep, index), flinks in FLINK_ANSWERS:
        frame = spark.createDataFrame([(text, index)], "s STRING, i INT")
        value = frame.selectExpr(_spark_text(sep) + " AS v").collect()[0]["v"]
        assert value == flinks, (text, sep, index)


@pytest.mark.parametrize(
    ("call", "at"), [("SPLIT_INDEX(s, '', 0)", "''"), ("SPLIT_INDEX(s, s, 0)", "s")]
)
def test_a_separator_flowc_cannot_read_as_flink_is_refused(call: str, at: str) -> None:
    program = (
        "SET sql.dialect = 'flink';\n"
        "CREATE SOURCE t (s STRING) WITH (connector = 'datagen');\n"
        "CREATE SINK o WITH (connector = 'console');\n"
        f"INSERT INTO o SELECT {call} AS v FROM t;\n"
    )
    with pytest.raises(flowc.CompileError) as raised:
        flowc.compile(program, "split.flow")
    (error,) = [d for d in raised.value.diagnostics if d.severity == flowc.Severity.ERROR]
    assert error.code == "E0738"
    line = program.splitlines()[3]
    start = line.index(call) + len("SPLIT_INDEX(s, ")
    assert (error.span.column - 1, error.span.end_column - 1) == (start, start + len(at))


FLINK_PROBE = """
import json, sys
from pyflink.table import EnvironmentSettings, TableEnvironment
t = TableEnvironment.create(EnvironmentSettings.in_batch_mode())
def quote(v, kind):
    if v is None:
        return "CAST(NULL AS %s)" % kind
    return "'%s'" % v.replace("'", "''") if kind == "STRING" else str(v)
out = []
for text, sep, index in json.loads(sys.argv[1]):
    args = (quote(text, "STRING"), quote(sep, "STRING"), quote(index, "INT"))
    sql = "SELECT SPLIT_INDEX(%s, %s, %s)" % args
    out.append(list(t.execute_sql(sql).collect())[0][0])
print(json.dumps(out))
"""


@pytest.mark.skipif(
    not os.environ.get("FLOWC_FLINK_PYTHON"), reason="set FLOWC_FLINK_PYTHON to a PyFlink 2.3"
)
def test_against_flink_split_index() -> None:
    """Real Flink (opt-in) gives the recorded answers."""
    asked = [list(args) for args, _ in FLINK_ANSWERS]
    flink = ask_flink(FLINK_PROBE, asked)
    assert flink == [a for _, a in FLINK_ANSWERS]
