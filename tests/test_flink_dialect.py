"""``SET sql.dialect = 'flink'``: the statements after it are read as Flink SQL, and what
flowc hands Spark means what the Flink text means (docs/language.md, "Flink SQL")."""

from __future__ import annotations

from typing import Any

import pytest

import flowc
from flowc.program import ExtendStep
from flowc.sql.spark_sql import sql_of

PROGRAM = """\
SET sql.dialect = '{dialect}';
CREATE SOURCE s (a STRING) WITH (connector = 'files', path = 'in', format = 'json');
CREATE SINK o WITH (connector = 'files', path = 'out', format = 'json');
INSERT INTO o FROM s |> EXTEND {literal} AS b;
"""

#: A Flink string literal and the text it is in Flink (no backslash escapes; '' a quote).
LITERALS = [
    ("'x\\y'", "x\\y"),
    ("'x\\\\y'", "x\\\\y"),
    ("'it''s'", "it's"),
    ("'tab\\t'", "tab\\t"),
]


def _errors(job: flowc.CompiledJob) -> list[flowc.Diagnostic]:
    return [d for d in job.diagnostics if d.severity == flowc.Severity.ERROR]


def _spark_text(dialect: str, literal: str) -> str:
    job = flowc.compile(PROGRAM.format(dialect=dialect, literal=literal), "j.flow")
    assert not _errors(job), job.diagnostics
    (step,) = job.program.inserts[0].stream.steps
    assert isinstance(step, ExtendStep)
    return sql_of(step.node.items[0].expr)


def test_flink_is_a_dialect_name() -> None:
    job = flowc.compile(PROGRAM.format(dialect="flink", literal="'a'"), "j.flow")
    assert not _errors(job) and job.program.settings.sql_dialect == "flink"
    with pytest.raises(flowc.CompileError, match=r"Unknown dialect 'flinq'\. Did you mean flink"):
        flowc.compile(PROGRAM.format(dialect="flinq", literal="'a'"), "j.flow")


@pytest.mark.parametrize(("literal", "meaning"), LITERALS, ids=[m for _, m in LITERALS])
def test_a_flink_string_means_on_spark_what_it_means_on_flink(
    spark: Any, literal: str, meaning: str
) -> None:
    """Spark reads a backslash in a string as an escape, Flink as itself: the Spark SQL
    flowc writes for the Flink literal evaluates, on Spark, to Flink's text."""
    text = _spark_text("flink", literal)
    assert spark.sql(f"SELECT {text} AS v").collect()[0]["v"] == meaning


def test_the_spark_dialect_keeps_spark_escapes(spark: Any) -> None:
    """The default dialect is unchanged: a backslash escapes, as Spark reads it."""
    text = _spark_text("spark", "'tab\\t'")
    assert spark.sql(f"SELECT {text} AS v").collect()[0]["v"] == "tab\t"


def test_a_string_ending_in_a_backslash_is_refused_not_misread() -> None:
    """flowc's lexer reads a statement's strings as Spark does before the dialect's
    tokenizer sees them, so ``'a\\'`` (Flink: the text ``a\\``) is an unterminated string
    there: refused at its place, never read as another string (docs/language.md)."""
    with pytest.raises(flowc.CompileError, match="unterminated string"):
        _spark_text("flink", "'a\\'")


def test_flinks_setting_keys_plan_as_flowcs() -> None:
    """``SET 'parallelism.default'`` and Flink's other keys give the plans of flowc's own
    names (the job's name, mode, parallelism, chaining and checkpoints alike)."""
    body = (
        "CREATE TABLE s (k BIGINT) WITH ('connector' = 'files', 'path' = 'in', "
        "'format' = 'json');\n"
        "CREATE TABLE o (k BIGINT) WITH ('connector' = 'files', 'path' = 'out', "
        "'format' = 'json');\n"
        "INSERT INTO o SELECT k FROM s WHERE k > 0;\n"
    )
    flink_keys = (
        "SET 'sql.dialect' = 'flink';\nSET 'parallelism.default' = '3';\n"
        "SET 'pipeline.max-parallelism' = '16';\nSET 'execution.runtime-mode' = 'STREAMING';\n"
        "SET 'execution.checkpointing.interval' = '10s';\n"
        "SET 'execution.checkpointing.mode' = 'AT_LEAST_ONCE';\n"
        "SET 'pipeline.name' = 'nightly';\nSET 'pipeline.operator-chaining.enabled' = 'false';\n"
    )
    flowc_keys = (
        "SET sql.dialect = 'flink';\nSET parallelism = 3;\nSET max_parallelism = 16;\n"
        "SET execution.mode = 'streaming';\nSET checkpoint.interval = '10s';\n"
        "SET checkpoint.mode = 'at_least_once';\nSET job.name = 'nightly';\n"
        "SET chaining = false;\n"
    )
    theirs = flowc.compile(flink_keys + body, "job.flow", for_spark=True)
    ours = flowc.compile(flowc_keys + body, "job.flow", for_spark=True)
    assert theirs.program.settings.parallelism == 3
    assert theirs.job_graph.to_json() == ours.job_graph.to_json()
    assert theirs.stream_graph.to_json() == ours.stream_graph.to_json()
