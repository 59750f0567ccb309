"""flowc's types against Spark's: every expression of a corpus, typed by both.

    python -m benchmarks.spark_types              # everything: a summary, exit 1 on a mismatch
    python -m benchmarks.spark_types --list       # every mismatch, one a line
    python -m benchmarks.spark_types --sample 400 # as CI's test does

flowc types an expression at compile time (``flowc.sql.sqltypes``); Spark types the
generated program's DataFrame when the query is built. They must agree: a sink declared
with Spark's real type is checked against flowc's (E0207), and a postgres upsert table is
created with flowc's types. The corpus is:

- every example of every built-in function's documentation (Spark's ExpressionInfo:
  ``> SELECT abs(-1);``), whose arguments are literals;
- the functions of the ``math_funcs`` group and the aggregates over a column of each
  numeric type (and the aggregates over the other types too);
- a grid of Spark's typing rules: ``+ - * / % div`` over every pair of numeric types
  (decimal precision and scale: Spark's DecimalPrecision), sum and avg, CASE, COALESCE,
  IF, NVL, greatest and least over pairs of types (widening), dates, timestamps and
  intervals.

Each batch of expressions is one flowc program (``FROM t |> SELECT ...`` or
``|> AGGREGATE ...`` over a source with a column of each type); flowc's type of each
output column is compared with the schema Spark gives the DataFrame the generated program
writes (its ``writeStream`` is intercepted: nothing runs). An expression Spark refuses is
left out of the corpus; one flowc refuses (Spark accepts it) is counted apart.
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import flowc
from flowc.diagnostics import CompileError, Diagnostic
from flowc.sql.sqltypes import UNKNOWN, TypeSyntaxError, normalize_type

#: The source's columns: one of each type the corpus takes arguments of.
PALETTE: tuple[tuple[str, str], ...] = (
    ("c_tinyint", "TINYINT"),
    ("c_smallint", "SMALLINT"),
    ("c_int", "INT"),
    ("c_bigint", "BIGINT"),
    ("c_float", "FLOAT"),
    ("c_double", "DOUBLE"),
    ("c_dec5_2", "DECIMAL(5, 2)"),
    ("c_dec12_2", "DECIMAL(12, 2)"),
    ("c_dec20_0", "DECIMAL(20, 0)"),
    ("c_dec38_10", "DECIMAL(38, 10)"),
    ("c_string", "STRING"),
    ("c_boolean", "BOOLEAN"),
    ("c_date", "DATE"),
    ("c_ts", "TIMESTAMP"),
    ("c_ts_ntz", "TIMESTAMP_NTZ"),
    ("c_binary", "BINARY"),
    ("c_arr_int", "ARRAY<INT>"),
    ("c_arr_str", "ARRAY<STRING>"),
    ("c_map", "MAP<STRING, INT>"),
    ("c_struct", "STRUCT<a: INT, b: STRING>"),
)
NUMERIC = tuple(name for name, kind in PALETTE[:10])
#: Columns of other types for widening (CASE, COALESCE, ...) and aggregates.
OTHERS = ("c_string", "c_boolean", "c_date", "c_ts", "c_ts_ntz")

#: Groups whose functions are not expressions of a SELECT over a stream.
_SKIPPED_GROUPS = frozenset({"window_funcs", "generator_funcs", "table_funcs"})
#: Not valid in a streaming projection, or not deterministic in type (the session's
#: catalog), or not parsed by flowc as a call: their examples are left out.
_SKIPPED_FUNCTIONS = frozenset(
    {
        "current_catalog", "current_database", "current_schema", "current_user", "user",
        "session_user", "input_file_name", "input_file_block_start",
        "input_file_block_length", "monotonically_increasing_id", "spark_partition_id",
        "reflect", "java_method", "try_reflect", "from_protobuf", "to_protobuf",
        "from_avro", "to_avro", "schema_of_avro", "uuid", "rand", "randn", "random",
        "shuffle", "raise_error", "assert_true", "version", "current_time",
    }
)  # fmt: skip

_MATH_AGGREGATES = (
    "sum", "avg", "mean", "try_sum", "try_avg", "min", "max", "first", "last",
    "any_value", "stddev", "stddev_pop", "stddev_samp", "variance", "var_pop",
    "var_samp", "skewness", "kurtosis", "median", "collect_list", "collect_set",
    "count", "approx_count_distinct", "bit_and", "bit_or", "bit_xor",
)  # fmt: skip
_OTHER_AGGREGATES = ("min", "max", "first", "last", "any_value", "count", "collect_list")
_OPERATORS = ("+", "-", "*", "/", "%", "div")
_LITERALS = ("1", "2L", "1.5", "1.25BD", "1.5D", "CAST(1 AS DECIMAL(3, 1))")


@dataclass(frozen=True, slots=True)
class Case:
    """One expression: ``aggregate`` ones go in an AGGREGATE step, others in a SELECT."""

    expr: str
    origin: str
    aggregate: bool = False


@dataclass(slots=True)
class Outcome:
    """Both types of every case typed; the cases each side refused."""

    typed: list[tuple[Case, str, str]] = field(default_factory=list)
    flowc_refused: list[tuple[Case, str]] = field(default_factory=list)
    spark_refused: list[Case] = field(default_factory=list)

    def mismatches(self) -> list[tuple[Case, str, str]]:
        """Cases flowc types otherwise than Spark (flowc's UNKNOWN is not one: flowc
        then checks nothing against the type, and refuses where it needs it)."""
        return [(c, f, s) for c, f, s in self.typed if f != s and f != UNKNOWN]

    def unknown(self) -> list[tuple[Case, str, str]]:
        return [(c, f, s) for c, f, s in self.typed if f == UNKNOWN]


# ---------------------------------------------------------------- the corpus


def function_examples(spark: Any) -> dict[str, tuple[str, str]]:
    """Each built-in function's documented examples and group, from Spark's registry."""
    registry = spark._jvm.org.apache.spark.sql.catalyst.analysis.FunctionRegistry.builtin()
    out: dict[str, tuple[str, str]] = {}
    identifiers = registry.listFunction().iterator()
    while identifiers.hasNext():
        identifier = identifiers.next()
        info = registry.lookupFunction(identifier).get()
        out[str(identifier.funcName())] = (str(info.getExamples()), str(info.getGroup()))
    return dict(sorted(out.items()))


def split_items(select_list: str) -> list[str]:
    """A SELECT list's items, split at its top-level commas (quotes and brackets kept)."""
    items: list[str] = []
    depth = 0
    quote: str | None = None
    start = 0
    i = 0
    while i < len(select_list):
        char = select_list[i]
        if quote is not None:
            if char == "\\":
                i += 1
            elif char == quote:
                quote = None
        elif char in "'\"`":
            quote = char
        elif char in "([":
            depth += 1
        elif char in ")]":
            depth -= 1
        elif char == "," and depth == 0:
            items.append(select_list[start:i].strip())
            start = i + 1
        i += 1
    items.append(select_list[start:].strip())
    return [item for item in items if item]


_EXAMPLE = re.compile(r"^\s*>\s*SELECT\s+(.*);\s*$", re.IGNORECASE)
_ALIAS = re.compile(r"\s+AS\s+[`\w]+$", re.IGNORECASE)


def example_cases(examples: dict[str, tuple[str, str]]) -> list[Case]:
    """The one-line examples that select from no table, each item a case."""
    cases: list[Case] = []
    for name, (text, group) in examples.items():
        if group in _SKIPPED_GROUPS or name in _SKIPPED_FUNCTIONS or group == "agg_funcs":
            continue
        for line in text.splitlines():
            match = _EXAMPLE.match(line)
            if match is None or re.search(r"\bFROM\b|\bOVER\b|\bSELECT\b", match.group(1), re.I):
                continue
            for item in split_items(match.group(1)):
                item = _ALIAS.sub("", item)
                if name.lower() in item.lower():
                    cases.append(Case(item, f"example of {name}"))
    return cases


def column_cases(examples: dict[str, tuple[str, str]]) -> list[Case]:
    """Math functions of one argument over each numeric column; aggregates over columns."""
    cases: list[Case] = []
    for name, (text, group) in examples.items():
        if group != "math_funcs" or name in _SKIPPED_FUNCTIONS or not name.isidentifier():
            continue
        for arity in (1, 2):
            if _documented_arity(text, name, arity):
                extra = ", 1" * (arity - 1)
                cases.extend(Case(f"{name}({c}{extra})", f"{name} of a column") for c in NUMERIC)
    for name in _MATH_AGGREGATES:
        cases.extend(Case(f"{name}({c})", f"aggregate {name}", True) for c in NUMERIC)
    for name in _OTHER_AGGREGATES:
        cases.extend(Case(f"{name}({c})", f"aggregate {name}", True) for c in OTHERS)
    cases.extend(Case(f"sum(DISTINCT {c})", "aggregate sum", True) for c in NUMERIC)
    cases.extend(Case(f"avg(DISTINCT {c})", "aggregate avg", True) for c in NUMERIC)
    cases.extend(Case(f"avg({c} * 2)", "aggregate avg", True) for c in NUMERIC)
    return cases


def _documented_arity(text: str, name: str, arity: int) -> bool:
    """Whether an example calls ``name`` with ``arity`` arguments."""
    for line in text.splitlines():
        match = _EXAMPLE.match(line)
        if match is None:
            continue
        for item in split_items(match.group(1)):
            call = re.fullmatch(rf"{name}\((.*)\)", _ALIAS.sub("", item), re.IGNORECASE)
            if call is not None and len(split_items(call.group(1))) == arity:
                return True
    return False


def rule_cases() -> list[Case]:
    """Spark's typing rules: arithmetic, widening, dates and intervals."""
    cases: list[Case] = []
    for op in _OPERATORS:
        for left in NUMERIC:
            for right in NUMERIC:
                cases.append(Case(f"{left} {op} {right}", f"{op} of two columns"))
            for literal in _LITERALS:
                cases.append(Case(f"{left} {op} {literal}", f"{op} with a literal"))
                cases.append(Case(f"{literal} {op} {left}", f"{op} with a literal"))
        cases.append(Case(f"-{NUMERIC[7]} {op} 3", f"{op} of a negation"))
    widened = NUMERIC + OTHERS
    for left in widened:
        for right in widened:
            cases.append(Case(f"CASE WHEN c_boolean THEN {left} ELSE {right} END", "CASE"))
            cases.append(Case(f"coalesce({left}, {right})", "coalesce"))
            cases.append(Case(f"if(c_boolean, {left}, {right})", "if"))
            cases.append(Case(f"nvl({left}, {right})", "nvl"))
            cases.append(Case(f"greatest({left}, {right})", "greatest"))
            cases.append(Case(f"least({left}, {right})", "least"))
        cases.append(Case(f"CASE WHEN c_boolean THEN {left} END", "CASE"))
        cases.append(Case(f"coalesce({left}, NULL)", "coalesce"))
        cases.append(Case(f"CASE WHEN c_boolean THEN {left} ELSE 1 END", "CASE"))
        cases.append(Case(f"coalesce({left}, 0)", "coalesce"))
    for when in ("c_date", "c_ts", "c_ts_ntz"):
        for interval in (
            "INTERVAL 1 DAY", "INTERVAL '1' HOUR", "INTERVAL 2 HOURS",
            "INTERVAL '1-2' YEAR TO MONTH",
            "INTERVAL '1 02:03:04' DAY TO SECOND", "INTERVAL 3 MONTHS", "INTERVAL 10 SECONDS",
        ):  # fmt: skip
            cases.append(Case(f"{when} + {interval}", "date/time + interval"))
            cases.append(Case(f"{when} - {interval}", "date/time - interval"))
            cases.append(Case(f"{interval} + {when}", "interval + date/time"))
        for other in ("c_date", "c_ts", "c_ts_ntz"):
            cases.append(Case(f"{when} - {other}", "date/time - date/time"))
        for function in (
            "date_trunc('HOUR', {})", "to_date({})", "date_add({}, 1)", "date_sub({}, 1)",
            "add_months({}, 1)", "datediff({}, c_date)", "year({})", "hour({})",
            "unix_timestamp({})", "to_timestamp({})", "last_day({})", "trunc({}, 'MM')",
            "date_format({}, 'yyyy')", "window({}, '1 minute').start",
            "timestampadd(HOUR, 1, {})", "timestampdiff(HOUR, {}, c_ts)",
            "{} + 1", "extract(YEAR FROM {})", "date_part('day', {})",
        ):  # fmt: skip
            cases.append(Case(function.format(when), "date/time function"))
    for interval in ("INTERVAL 1 DAY", "INTERVAL '1-2' YEAR TO MONTH", "INTERVAL 2 HOURS"):
        cases.append(Case(f"{interval} + {interval}", "interval + interval"))
        cases.append(Case(f"{interval} * 2", "interval * number"))
        cases.append(Case(f"{interval} / 2", "interval / number"))
        cases.append(Case(f"-{interval}", "interval negation"))
        cases.append(Case(interval, "interval literal"))
    for column in (*NUMERIC, "c_string"):
        for target in ("INT", "BIGINT", "DOUBLE", "DECIMAL(10, 2)", "STRING", "DECIMAL(38, 18)"):
            cases.append(Case(f"CAST({column} AS {target})", "cast"))
            cases.append(Case(f"try_cast({column} AS {target})", "cast"))
    return cases


def corpus(spark: Any) -> list[Case]:
    """Every case, once each, in a fixed order."""
    examples = function_examples(spark)
    cases = example_cases(examples) + column_cases(examples) + rule_cases()
    return list(dict.fromkeys(cases))


def sample(cases: Sequence[Case], size: int, seed: int = 25) -> list[Case]:
    """A fixed sample: every rule case of decimals, sums and averages, and random others."""
    pinned = [c for c in cases if _pinned(c)]
    rest = [c for c in cases if not _pinned(c)]
    chosen = random.Random(seed).sample(rest, max(0, min(len(rest), size - len(pinned))))
    return pinned + chosen


def _pinned(case: Case) -> bool:
    return "c_dec12_2" in case.expr and (
        case.origin.startswith(("aggregate sum", "aggregate avg", "/ of", "* of", "+ of"))
        or case.origin.startswith(("div of", "CASE", "coalesce"))
    )


# ---------------------------------------------------------------- typing both ways


_SOURCE = "CREATE SOURCE t ({columns}) WITH (connector = 'files', path = 't', format = 'json');\n"
_SINK = "CREATE SINK o WITH (connector = 'console', mode = '{mode}');\n"
_HEADER_LINES = 3


def program(cases: Sequence[Case], aggregate: bool) -> str:
    """One flowc program typing every case: its item ``i`` on line ``4 + i``, named ``xi``."""
    columns = ", ".join(f"{name} {kind}" for name, kind in PALETTE)
    step = "AGGREGATE" if aggregate else "SELECT"
    items = ",\n".join(f"  {c.expr} AS x{i}" for i, c in enumerate(cases))
    return (
        _SOURCE.format(columns=columns)
        + _SINK.format(mode="update" if aggregate else "append")
        + f"INSERT INTO o FROM t |> {step}\n{items};\n"
    )


@contextmanager
def captured_sinks() -> Iterator[list[Any]]:
    """While open, a DataFrame's ``writeStream`` records the DataFrame and starts nothing:
    the schemas of what a generated program writes, without running it."""
    from pyspark.sql.classic.dataframe import DataFrame

    written: list[Any] = []
    original = DataFrame.writeStream

    class Writer:
        def __getattr__(self, name: str) -> Any:
            return lambda *args, **kwargs: self

    def write_stream(self: DataFrame) -> Any:
        written.append(self)
        return Writer()

    DataFrame.writeStream = property(write_stream)  # type: ignore[assignment,method-assign]
    try:
        yield written
    finally:
        DataFrame.writeStream = original  # type: ignore[method-assign]


def spark_type(data_type: Any) -> str:
    """flowc's spelling of a Spark DataType."""
    text = str(data_type.simpleString())
    try:
        return normalize_type(text)
    except TypeSyntaxError:
        return text.upper()


def generated_schemas(spark: Any, job: flowc.CompiledJob, folder: Path) -> list[Any]:
    """The schema of each DataFrame the job's generated program writes, in INSERT order."""
    from flowc.runtime.run import load_program

    module = load_program(job)
    module.__dict__["BASE_DIR"] = str(folder)
    module.__dict__["EMBEDDED_FUNCTIONS"] = {f.name.lower(): f.call for f in job.functions}
    if job.spark_plan.batch:
        return batch_schemas(spark, module)
    with captured_sinks() as written:
        module.start_queries(spark, str(folder / "checkpoints"), True)
    return [frame.schema for frame in written]


def batch_schemas(spark: Any, module: Any) -> list[Any]:
    """A batch program's written schemas: each INSERT's DataFrame as it reaches the
    program's ``executed_plan`` (called once an INSERT, before its write), the writes
    themselves left out (no observation, no files replaced, no upsert)."""
    from pyspark.sql.classic.dataframe import DataFrame

    class Unobserved:
        get: ClassVar[dict[str, int]] = {"rows": 0}

        def __init__(self, name: str) -> None:
            pass

    written: list[Any] = []

    def executed_plan(df: Any) -> None:
        written.append(df.schema)

    def no_write(*args: Any, **kwargs: Any) -> None:
        pass

    module.__dict__.update(
        executed_plan=executed_plan, Observation=Unobserved, replace_output=no_write
    )
    original = DataFrame.observe
    DataFrame.observe = lambda self, *args, **kwargs: self  # type: ignore[method-assign]
    try:
        module.run_batch(spark)
    finally:
        DataFrame.observe = original  # type: ignore[method-assign]
    return written


def type_batch(spark: Any, cases: Sequence[Case], aggregate: bool, outcome: Outcome) -> None:
    """Type ``cases`` both ways; a batch Spark refuses is split until each refusal is alone."""
    cases = list(cases)
    with tempfile.TemporaryDirectory(prefix="flowc-types-", ignore_cleanup_errors=True) as tmp:
        folder = Path(tmp)
        (folder / "t").mkdir()
        while cases:
            text = program(cases, aggregate)
            try:
                job = flowc.compile(text, str(folder / "types.flow"), for_spark=True)
                errors: list[Diagnostic] = []
            except CompileError as error:
                errors = [d for d in error.diagnostics if d.severity.name == "ERROR"]
            if errors:
                refused: dict[int, str] = {}
                for d in errors:
                    index = d.span.line - _HEADER_LINES - 1 if d.span is not None else -1
                    if 0 <= index < len(cases):
                        refused.setdefault(index, f"{d.code}: {d.message}")
                if not refused:
                    raise RuntimeError(f"a batch flowc refuses as a whole: {errors[0]}")
                outcome.flowc_refused.extend((cases[i], why) for i, why in refused.items())
                cases = [c for i, c in enumerate(cases) if i not in refused]
                continue
            try:
                schemas = generated_schemas(spark, job, folder)
            except Exception:
                if len(cases) == 1:
                    outcome.spark_refused.append(cases[0])
                    return
                half = len(cases) // 2
                type_batch(spark, cases[:half], aggregate, outcome)
                type_batch(spark, cases[half:], aggregate, outcome)
                return
            if len(schemas) != 1:
                raise RuntimeError(f"the program wrote {len(schemas)} DataFrames, not one")
            (schema,) = schemas
            (insert,) = job.program.inserts
            flowc_types = {c.name: c.type for c in insert.stream.schema}
            for i, case in enumerate(cases):
                outcome.typed.append(
                    (case, flowc_types[f"x{i}"], spark_type(schema[f"x{i}"].dataType))
                )
            return


def spark_accepts(frame: Any, cases: Sequence[Case], outcome: Outcome) -> list[Case]:
    """The cases Spark types over ``frame`` (a DataFrame of the palette's columns), the
    others added to ``outcome.spark_refused``: one query for the lot, split where it fails
    (a refusal costs Spark far more than an acceptance)."""
    if not cases:
        return []
    try:
        _ = frame.selectExpr(*(f"{c.expr} AS x{i}" for i, c in enumerate(cases))).schema
    except Exception:
        if len(cases) == 1:
            outcome.spark_refused.append(cases[0])
            return []
        half = len(cases) // 2
        return spark_accepts(frame, cases[:half], outcome) + spark_accepts(
            frame, cases[half:], outcome
        )
    return list(cases)


def compare(spark: Any, cases: Sequence[Case], batch: int = 250) -> Outcome:
    """Type every case both ways, in batches of ``batch``: first the cases Spark accepts
    over a DataFrame of the palette's columns, then those in flowc's generated program."""
    outcome = Outcome()
    frame = spark.createDataFrame([], ", ".join(f"{n} {k}" for n, k in PALETTE))
    for aggregate in (False, True):
        chosen = [c for c in cases if c.aggregate == aggregate]
        chosen = [
            case
            for start in range(0, len(chosen), 50)
            for case in spark_accepts(frame, chosen[start : start + 50], outcome)
        ]
        for start in range(0, len(chosen), batch):
            type_batch(spark, chosen[start : start + batch], aggregate, outcome)
    return outcome


def report(outcome: Outcome, listing: bool, out: Any = sys.stdout) -> None:
    mismatches = outcome.mismatches()
    out.write(
        f"typed by both: {len(outcome.typed)}; mismatches: {len(mismatches)}; "
        f"flowc UNKNOWN: {len(outcome.unknown())}; refused by flowc only: "
        f"{len(outcome.flowc_refused)}; refused by Spark: {len(outcome.spark_refused)}\n"
    )
    if listing:
        for case, mine, theirs in mismatches:
            out.write(f"MISMATCH  {case.expr}  flowc {mine}  spark {theirs}  ({case.origin})\n")
        for case, _, theirs in outcome.unknown():
            out.write(f"UNKNOWN   {case.expr}  spark {theirs}  ({case.origin})\n")
        for case, why in outcome.flowc_refused:
            out.write(f"REFUSED   {case.expr}  {why}\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=int, default=None, help="type a fixed sample only")
    parser.add_argument("--list", action="store_true", help="list every mismatch")
    args = parser.parse_args(argv)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[1]")
        .appName("flowc-spark-types")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("OFF")
    cases = corpus(spark)
    if args.sample is not None:
        cases = sample(cases, args.sample)
    sys.stdout.write(f"corpus: {len(cases)} expressions\n")
    outcome = compare(spark, cases)
    report(outcome, args.list)
    return 1 if outcome.mismatches() else 0


if __name__ == "__main__":
    raise SystemExit(main())
