"""What `flowc check` accepts, Spark parses and runs: the Spark SQL text flowc generates
(:func:`flowc.sql.spark_sql.sql_of`, what the generated program hands ``F.expr``/selectExpr)
for a corpus of expressions goes through Spark's own parser and, over a one-row
DataFrame, through its analysis and evaluation (where Spark builds datetime formatters).

- every expression of every example parses in Spark;
- a corpus of the forms flowc's grammar takes (operators, predicates, CASE, CAST to each
  type name, INTERVAL literals, string literals with quotes and backslashes, datetime
  functions) runs in Spark when flowc accepts it; SIMILAR TO, which Spark cannot parse, is
  refused with E0224;
- datetime patterns: every letter A-Z a-z at counts 1-7 (and long runs of the letters that
  take them), special characters, quotes and brackets, formatting and parsing: flowc
  refuses exactly what Spark refuses (E0225), and what it accepts gives in Spark the value
  of the pattern as written (sqlglot's strftime round trip is not used);
- the generated text of each form means in Spark what the written text means (a string
  ``'it''s'`` is ``it's``, not sqlglot's ``CONCAT('it', 's')``).
"""

from __future__ import annotations

import datetime
import string
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc import ast
from flowc.diagnostics import CompileError
from flowc.sql.spark_patterns import pattern_problem
from flowc.sql.spark_sql import aggregate_sql, sql_of

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

_COLUMNS = "ts TIMESTAMP, txt STRING, n BIGINT, x DOUBLE, d DATE, b BOOLEAN, i INT"
_ROW = (
    datetime.datetime(2024, 3, 5, 13, 4, 5, 123456),
    "2024-03-05 13:04:05",
    1709643845,
    2.5,
    datetime.date(2024, 3, 5),
    True,
    7,
)
_SPARK_SCHEMA = "ts TIMESTAMP, txt STRING, n BIGINT, x DOUBLE, d DATE, b BOOLEAN, i INT"


def _program(expressions: Sequence[str]) -> str:
    """One SELECT with each expression on its own line (line 4 + index), so a diagnostic's
    line names the expression."""
    items = ",\n".join(f"  {text} AS c{index}" for index, text in enumerate(expressions))
    return (
        f"CREATE SOURCE s ({_COLUMNS}) WITH (connector = 'datagen');\n"
        "CREATE SINK o WITH (connector = 'console');\n"
        "INSERT INTO o FROM s |> SELECT\n"
        f"{items};\n"
    )


def _flowc(expressions: Sequence[str]) -> tuple[dict[int, set[str]], dict[int, str]]:
    """flowc's verdict on each expression: the codes of the errors it reports (by index),
    and, for the ones it accepts, the Spark SQL text it generates."""
    refused: dict[int, set[str]] = {}
    try:
        flowc.compile(_program(expressions), filename="corpus.flow", for_spark=True)
    except CompileError as error:
        for diagnostic in error.diagnostics:
            if diagnostic.severity.value == "error":
                refused.setdefault(diagnostic.span.line - 4, set()).add(str(diagnostic.code))
    accepted = [index for index in range(len(expressions)) if index not in refused]
    job = flowc.compile(
        _program([expressions[index] for index in accepted]),
        filename="corpus.flow",
        for_spark=True,
    )
    (insert,) = job.program.inserts
    select = insert.stream.steps[-1].node
    assert isinstance(select, ast.Select)
    generated = {
        index: sql_of(item.expr) for index, item in zip(accepted, select.items, strict=True)
    }
    return refused, generated


def _spark_failures(spark: Any, texts: dict[int, str], evaluate: bool = True) -> dict[int, str]:
    """The expressions Spark refuses (parsing, analysis and, if ``evaluate``, evaluation
    over the row), with Spark's message: many per call, halving a batch that fails."""
    frame = spark.createDataFrame([_ROW], _SPARK_SCHEMA)
    failures: dict[int, str] = {}

    def run(keys: list[int]) -> None:
        if not keys:
            return
        try:
            selected = frame.selectExpr(*(f"{texts[key]} AS c{key}" for key in keys))
            if evaluate:
                selected.collect()
        except Exception as error:  # Spark's errors have many classes; any is a refusal
            if len(keys) == 1:
                failures[keys[0]] = str(error).split("\n")[0]
                return
            middle = len(keys) // 2
            run(keys[:middle])
            run(keys[middle:])

    run(sorted(texts))
    return failures


@pytest.fixture
def lenient(spark: Any) -> Iterator[Any]:
    """Spark with ANSI mode off: text a parsing pattern does not match gives NULL instead
    of failing, so only a pattern Spark refuses fails an expression."""
    before = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", "false")
    yield spark
    spark.conf.set("spark.sql.ansi.enabled", before)


# ---------------------------------------------------------------- examples


def _example_expressions() -> Iterator[tuple[str, str]]:
    for path in sorted(EXAMPLES.glob("*.flow")):
        job = flowc.compile_file(path, for_spark=True)
        for stream in [view.stream for view in job.program.views] + [
            insert.stream for insert in job.program.inserts
        ]:
            for step in stream.steps:
                aggregate = isinstance(step.node, ast.Aggregate)
                for expr in _expressions(step.node):
                    text = aggregate_sql(expr) if aggregate else sql_of(expr)
                    yield path.name, text


def _expressions(node: object) -> Iterator[ast.SqlExpr]:
    if isinstance(node, ast.SqlExpr):
        yield node
    elif isinstance(node, tuple):
        for item in node:
            yield from _expressions(item)
    elif hasattr(node, "__dataclass_fields__") and not isinstance(node, type):
        for name in node.__dataclass_fields__:
            yield from _expressions(getattr(node, name))


def test_every_example_expression_parses_in_spark(spark: Any) -> None:
    parser = spark._jsparkSession.sessionState().sqlParser()
    corpus = list(_example_expressions())
    assert len(corpus) > 50
    refused = []
    for name, text in corpus:
        try:
            parser.parseExpression(text)
        except Exception as error:
            refused.append((name, text, str(error).split("\n")[0]))
    assert refused == []


# ---------------------------------------------------------------- the grammar's forms

_TYPES = [
    "BOOLEAN", "TINYINT", "SMALLINT", "INT", "INTEGER", "BIGINT", "FLOAT", "DOUBLE",
    "DECIMAL(10, 2)", "DECIMAL", "STRING", "VARCHAR(5)", "CHAR(3)", "DATE", "TIMESTAMP",
    "TIMESTAMP_NTZ", "BINARY", "ARRAY<INT>", "MAP<STRING, INT>", "STRUCT<a: INT, b: STRING>",
]  # fmt: skip

_FORMS = [
    "n + i", "n - i * 2", "x / 2", "n % 3", "-n", "n DIV 2", "i & 3", "i | 4", "i ^ 1", "~i",
    "txt || 'x'", "n = i", "n <> i", "n != i", "n <=> i", "n < i AND b", "NOT b OR b",
    "txt LIKE 'a%'", "txt NOT LIKE 'a\\\\%'", "txt ILIKE 'A%'", "txt RLIKE '^2024'",
    "txt REGEXP '[0-9]+'", "txt SIMILAR TO '2024%'", "txt NOT SIMILAR TO 'x'",
    "n BETWEEN 1 AND 10", "n NOT BETWEEN 1 AND 10", "i IN (1, 2, 7)", "i NOT IN (1, 2)",
    "n IS DISTINCT FROM i", "n IS NOT DISTINCT FROM i", "txt IS NULL", "txt IS NOT NULL",
    "b IS TRUE", "b IS NOT FALSE", "CASE WHEN n > 0 THEN 'p' ELSE 'n' END",
    "CASE i WHEN 7 THEN 'seven' WHEN 8 THEN 'eight' END", "IF(b, 1, 2)", "COALESCE(txt, 'z')",
    "NULLIF(i, 7)", "'it''s'", "'it\\'s'", "'back\\\\slash'", "\"double 'quoted'\"",
    "'tab\\tnew\\nline'", "'%_'", "'unicode é'", "X'0A'", "1e3", "1.5", "-0.0", "123456789012",
    "INTERVAL 1 DAY", "INTERVAL '1' HOUR", "INTERVAL 90 MINUTES",
    "INTERVAL '1 2:03:04' DAY TO SECOND",
    "ts + INTERVAL 5 SECONDS", "ts - INTERVAL 1 MINUTE", "d + 1", "TIMESTAMP '2024-01-01 00:00:00'",
    "DATE '2024-01-01'", "ARRAY(1, 2, 3)[0]", "MAP('a', 1)['a']", "named_struct('a', i).a",
    "EXTRACT(YEAR FROM ts)", "EXTRACT(WEEK FROM ts)", "extract(YEAROFWEEK FROM ts)",
    "date_trunc('HOUR', ts)", "trunc(d, 'MM')", "substring(txt, 1, 4)",
    "SUBSTRING(txt FROM 2 FOR 3)",
    "TRIM(BOTH 'x' FROM txt)", "position('0' IN txt)", "upper(txt)", "concat_ws('-', txt, txt)",
    "date_format(ts, 'yyyy-MM-dd')", "date_format(ts, 'YYYY')", "date_format(ts, 'y')",
    "date_format(ts, 'yyy')", "date_format(ts, \"'day' d\")", "date_format(ts, 'EEEEE')",
    "to_timestamp(txt, 'yyyy-MM-dd HH:mm:ss')", "to_timestamp(txt)", "to_date(txt, 'yyyy-MM-dd')",
    "to_date(txt)", "unix_timestamp(txt, 'yyyy-MM-dd HH:mm:ss')", "from_unixtime(n)",
    "from_unixtime(n, 'yyyy-MM-dd HH:mm')", "to_unix_timestamp(txt, 'yyyy-MM-dd HH:mm:ss')",
    "try_to_timestamp(txt, 'yyyy-MM-dd HH:mm:ss')", "to_timestamp_ntz(txt, 'yyyy-MM-dd HH:mm:ss')",
    "to_timestamp(txt, 'yyyy-MM-dd''T''HH:mm')", "to_timestamp(txt, \"yyyy-MM-dd'T'HH:mm\")",
    "to_timestamp(txt, 'yyyy-MM-dd HH:mm:ss.SSS')", "date_format(ts, txt)",
]  # fmt: skip


_NESTED = ["ARRAY(i)", "MAP('a', i)", "named_struct('a', i)"]


def _grammar_corpus() -> list[str]:
    values = ["txt", "n", "x", "b", "d", "ts", "CAST(ts AS TIMESTAMP_NTZ)", "X'0A'", *_NESTED]
    casts = [f"CAST({value} AS {type_})" for value in values for type_ in _TYPES]
    casts += [f"TRY_CAST(txt AS {type_})" for type_ in _TYPES]
    return _FORMS + casts


def test_what_flowc_accepts_of_the_grammar_runs_in_spark(spark: Any) -> None:
    corpus = _grammar_corpus()
    refused, generated = _flowc(corpus)
    # analysis as flowc run has it (ANSI on), evaluation with ANSI off (text a parsing
    # pattern or a cast does not match gives NULL: only what Spark refuses fails)
    failures = _spark_failures(spark, generated, evaluate=False)
    before = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", "false")
    try:
        failures.update(_spark_failures(spark, generated))
    finally:
        spark.conf.set("spark.sql.ansi.enabled", before)
    assert sorted(corpus[index] for index in failures) == []
    # the generated text means what the written text means in Spark ('it''s' is it's)
    forms = {
        index: f"({text}) <=> ({corpus[index]})"
        for index, text in generated.items()
        if index < len(_FORMS)
    }
    spark.conf.set("spark.sql.ansi.enabled", "false")
    try:
        assert sorted(corpus[index] for index in _spark_failures(spark, forms)) == []
        frame = spark.createDataFrame([_ROW], _SPARK_SCHEMA)
        keys = sorted(forms)
        same = frame.selectExpr(*(forms[key] for key in keys)).collect()[0]
    finally:
        spark.conf.set("spark.sql.ansi.enabled", before)
    assert [corpus[key] for key, equal in zip(keys, same, strict=True) if not equal] == []
    # what flowc refuses with this check's codes, Spark refuses too
    similar = {index for index, text in enumerate(corpus) if "SIMILAR TO" in text}
    assert similar <= {index for index, codes in refused.items() if "E0224" in codes}
    parser = spark._jsparkSession.sessionState().sqlParser()
    for index in similar:
        with pytest.raises(Exception, match="PARSE_SYNTAX_ERROR"):
            parser.parseExpression(corpus[index])
    casts = {index: corpus[index] for index, codes in refused.items() if "E0228" in codes}
    assert len(casts) >= 20
    assert sorted(set(casts) - set(_spark_failures(spark, casts, evaluate=False))) == []
    # and what flowc accepts is most of the corpus: the test exercises Spark
    assert len(generated) >= len(corpus) // 2


# ---------------------------------------------------------------- datetime patterns

_SPECIAL = [
    "yyyy!", "yyyy#", "yyyy{", "yyyy}", "yyyy[", "yyyy]", "[yyyy]", "[[yyyy]-MM]", "yyyy'",
    "''", "'''", "'a''", "yyyy '' MM", "yyyy 'x' MM", "yyyy 'u Y w' MM", "G yyyy", "G uuuu",
    "yyyy-MM-dd'T'HH:mm:ss.SSSXXX", "LLL", "qqq", "y-yyy", "yyyy\\\\MM", "yyyy%MM", "%Y",
    "dd.MM.yyyy HH:mm", "hh:mm a", "EEE, d MMM yyyy HH:mm:ss Z", "yyyyMMddHHmmssSSS", "",
]  # fmt: skip


def _patterns() -> list[str]:
    patterns = [letter * count for letter in string.ascii_letters for count in range(1, 8)]
    patterns += [letter * count for letter in "Sgyu" for count in (9, 10, 12)]
    return patterns + _SPECIAL


def _quoted(pattern: str) -> str:
    """A Spark SQL string literal of ``pattern`` (backslash escapes, as Spark reads them)."""
    return "'" + pattern.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _spark_refuses_pattern(spark: Any, pattern: str, parsing: bool) -> bool:
    """Whether Spark refuses ``pattern``: its TimestampFormatter (what date_format,
    to_timestamp, unix_timestamp... build theirs with) and the validation they run."""
    jvm = spark._jvm
    formatter = jvm.org.apache.spark.sql.catalyst.util.TimestampFormatter
    try:
        formatter.apply(pattern, jvm.java.time.ZoneOffset.UTC, parsing).validatePatternString(True)
    except Exception:
        return True
    return False


@pytest.mark.parametrize("parsing", [False, True], ids=["formatting", "parsing"])
def test_pattern_checker_agrees_with_spark_on_every_letter(spark: Any, parsing: bool) -> None:
    disagree = [
        pattern
        for pattern in _patterns()
        if (pattern_problem(pattern, parsing) is not None)
        != _spark_refuses_pattern(spark, pattern, parsing)
    ]
    assert disagree == []


@pytest.mark.parametrize(
    "template", ["date_format(ts, {p})", "to_timestamp(txt, {p})", "from_unixtime(n, {p})"]
)
def test_flowc_refuses_exactly_the_patterns_spark_refuses(lenient: Any, template: str) -> None:
    patterns = _patterns()
    corpus = [template.format(p=_quoted(pattern)) for pattern in patterns]
    refused, generated = _flowc(corpus)
    assert all(codes == {"E0225"} for codes in refused.values()), refused
    # what flowc accepts runs, and gives what the pattern as written gives
    both = {index: f"({text}) <=> ({corpus[index]})" for index, text in generated.items()}
    failures = _spark_failures(lenient, both)
    assert {patterns[index]: message for index, message in failures.items()} == {}
    frame = lenient.createDataFrame([_ROW], _SPARK_SCHEMA)
    keys = sorted(both)
    same = frame.selectExpr(*(both[key] for key in keys)).collect()[0]
    assert [patterns[key] for key, equal in zip(keys, same, strict=True) if not equal] == []
    # what flowc refuses, Spark refuses: a sample run as expressions (the sweep above
    # covers every pattern through Spark's formatter)
    sample = {index: corpus[index] for index in sorted(refused)[::25]}
    failing = _spark_failures(lenient, sample)
    assert sorted(patterns[index] for index in sample if index not in failing) == []
    assert len(refused) > 200 and len(generated) > 80
