"""What the Spark backend cannot write, found before any code is generated.

Run by the Spark-plan pass where Spark is the target (``flowc check``, ``flowc run``,
``--emit pyspark``: ``compile(..., for_spark=True)``), where they are errors like Spark's
streaming rules; plan-only compiles skip them (they write every expression as Spark SQL).
Each check calls the very helper code generation calls (:mod:`flowc.sql.spark_sql`), so a
program that passes can always be generated.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator

from sqlglot import exp
from sqlglot.expressions.datatypes import DType
from sqlglot.tokenizer_core import TokenType

from flowc import ast
from flowc.diagnostics import Reporter
from flowc.errorcodes import Code
from flowc.program import (
    AggregateStep,
    ExtendStep,
    InsertDef,
    Program,
    SetStep,
    SinkDef,
    SourceDef,
    Step,
    Stream,
    WindowAggregateStep,
)
from flowc.spans import Span
from flowc.sql.spark_distinct import UnsupportedDistinct, rewrite_distinct
from flowc.sql.spark_patterns import PatternProblem, pattern_problem, pattern_uses
from flowc.sql.spark_sql import (
    UnsupportedOnSpark,
    datagen_supports,
    spark_tokenizer,
    sql_of,
    watermark_delay,
)
from flowc.sql.sqltypes import node_span, sub_span
from flowc.vocabulary import LiteralKind

#: Connectors whose generated program hands Spark the source's schema (a reader's
#: ``.schema(...)``, ``from_json``), where Spark refuses CHAR and VARCHAR.
_SCHEMA_CONNECTORS = frozenset({"files", "kafka"})

_CHAR_TYPE = re.compile(r"\b(?:VAR)?CHAR\s*\(", re.IGNORECASE)
_CHAR_LENGTH = re.compile(r"\b(?:VAR)?CHAR\s*\(\s*\d+\s*\)", re.IGNORECASE)

#: A files source's options that are datetime patterns Spark parses records with; on a
#: files sink, patterns it formats with.
_PATTERN_OPTIONS = {"timestamp_format": "timestampFormat", "date_format": "dateFormat"}


def check_spark(program: Program, reporter: Reporter) -> None:
    for source in program.sources:
        for computed in source.computed:
            _check_expression(computed.expr, reporter)
        if source.watermark is not None:
            try:
                watermark_delay(source)
            except UnsupportedOnSpark as error:
                reporter.error(
                    Code.E0724,
                    f"Spark cannot run this watermark: {error}",
                    source.watermark.span,
                    help="write WATERMARK FOR ts AS ts - INTERVAL <delay>",
                )
        if source.connector == "datagen":
            for column in source.schema:
                if not datagen_supports(column.type):
                    reporter.error(
                        Code.E0725,
                        f"the Spark backend's datagen cannot generate '{column.name} "
                        f"{column.type}'",
                        _type_span(source, column.name),
                    )
        if source.connector in _SCHEMA_CONNECTORS:
            for column in source.schema:
                if _CHAR_TYPE.search(column.type):
                    reporter.error(
                        Code.E0227,
                        f"Spark refuses CHAR and VARCHAR in the schema it reads records with: "
                        f"'{column.name} {column.type}'",
                        _type_span(source, column.name),
                        help=f"declare it STRING: {column.name} "
                        f"{_CHAR_LENGTH.sub('STRING', column.type)}",
                    )
        _check_pattern_options(source, True, reporter)
    for sink in program.sinks:
        _check_pattern_options(sink, False, reporter)
    for view in program.views:
        _check_stream(view.stream, reporter)
    for insert in program.inserts:
        _check_stream(insert.stream, reporter)
    _check_one_insert_per_sink(program, reporter)


def _check_one_insert_per_sink(program: Program, reporter: Reporter) -> None:
    """E0726: Flink writes both INSERTs of a statement set into one sink; Spark runs one
    query per INSERT, and two queries on one sink share its query name (Spark refuses the
    second while the first is active), its checkpoint folder, a files sink's metadata log,
    and, in batch mode, a memory sink's view (the second replaces the first's rows)."""
    first: dict[str, InsertDef] = {}
    for insert in program.inserts:
        earlier = first.setdefault(insert.sink, insert)
        if earlier is insert:
            continue
        reporter.error(
            Code.E0726,
            f"sink '{insert.sink}' is written by more than one INSERT (the first at line "
            f"{earlier.span.line}); Spark would run them as two queries on one sink",
            insert.span,
            help="write one INSERT: put one stream in a view (CREATE VIEW v AS FROM ...) and "
            f"INSERT INTO {insert.sink} FROM ... |> UNION ALL v",
        )


def _check_stream(stream: Stream, reporter: Reporter) -> None:
    for step in stream.steps:
        _check_step(step, reporter)


def _check_expression(expr: ast.SqlExpr, reporter: Reporter) -> None:
    """What Spark must be able to run of one expression: its syntax, patterns, casts, and
    that it can be written as Spark SQL."""
    _check_spark_syntax(expr, reporter)
    _check_patterns(expr, reporter)
    _check_casts(expr, reporter)
    try:
        sql_of(expr)
    except UnsupportedOnSpark as error:
        reporter.error(
            Code.E0720,
            f"the Spark backend {error}",
            expr.span,
            help="check the number and types of the function's arguments",
        )


def _check_step(step: Step, reporter: Reporter) -> None:
    if isinstance(step, AggregateStep | WindowAggregateStep):
        for item in step.node.items:
            try:
                rewrite_distinct(item.expr.tree)
            except UnsupportedDistinct as error:
                reporter.error(
                    Code.E0240,
                    f"Spark cannot run this distinct aggregate on a stream: {error}",
                    item.expr.span,
                    help="write count(DISTINCT x) or sum/avg/min/max(DISTINCT x), or "
                    "approx_count_distinct(x) for an estimate",
                )
    if isinstance(step, SetStep):
        _check_set_names(step, reporter)
    if isinstance(step, ExtendStep):
        _check_extended_names(step, reporter)
    for expr in _expressions(step.node):
        _check_expression(expr, reporter)


def _check_set_names(step: SetStep, reporter: Reporter) -> None:
    """SET writes ``withColumns``, which finds a column by name case-insensitively and
    sets every column it finds: beside an ``A``, a SET of ``a`` would set both (checked
    on Spark)."""
    for item in step.node.items:
        name = item.column.value
        twins = [c.name for c in step.schema if c.name != name and c.name.lower() == name.lower()]
        if twins:
            reporter.error(
                Code.E0206,
                f"SET {name}: Spark reads '{name}' and '{twins[0]}' as one column name (its "
                "names are case-insensitive), so it would set both",
                item.column.span,
                help=f"rename the other one first: |> RENAME {twins[0]} AS {twins[0]}_2",
            )


def _check_extended_names(step: ExtendStep, reporter: Reporter) -> None:
    """EXTEND writes ``withColumns`` too: a new column named like an existing one but for
    case (``B`` beside ``b``) would replace that one on Spark, not be added (checked on
    Spark: ``a, b`` extended with ``B`` is ``a, B``)."""
    items = step.node.items
    added = step.schema[len(step.schema) - len(items) :]
    kept = step.schema[: len(step.schema) - len(items)]
    for item, column in zip(items, added, strict=True):
        twins = [c.name for c in kept if c.name.lower() == column.name.lower()]
        if twins:
            reporter.error(
                Code.E0213,
                f"EXTEND adds '{column.name}', which Spark reads as the existing column "
                f"'{twins[0]}' (its names are case-insensitive): it would replace it",
                (item.alias or item.expr).span,
                help=f"choose a name that differs from '{twins[0]}' in more than case",
            )


def _expressions(node: object) -> Iterator[ast.SqlExpr]:
    """Every SQL expression inside an AST node, in field order."""
    if isinstance(node, ast.SqlExpr):
        yield node
    elif isinstance(node, tuple):
        for item in node:
            yield from _expressions(item)
    elif dataclasses.is_dataclass(node) and not isinstance(node, type):
        for field in dataclasses.fields(node):
            yield from _expressions(getattr(node, field.name))


def _check_pattern_options(owner: SourceDef | SinkDef, parsing: bool, reporter: Reporter) -> None:
    if owner.connector != "files":
        return
    for key, value in owner.options:
        if key in _PATTERN_OPTIONS and isinstance(value, str):
            problem = pattern_problem(value, parsing)
            if problem is not None:
                reporter.error(
                    Code.E0225,
                    f"{key} '{value}': {problem.message}",
                    _option_span(owner, key, problem, value),
                    help=problem.hint,
                )


def _type_span(owner: SourceDef | SinkDef, column: str) -> Span:
    """Where a declared column's type is written (the whole CREATE if not known)."""
    written = owner.written_types.get(column)
    return written.span if written is not None else owner.span


def _option_span(owner: SourceDef | SinkDef, key: str, problem: PatternProblem, value: str) -> Span:
    """Where an option's value is written: the characters of the pattern at fault when
    the value is a one-line string literal that reads as written; else the whole value
    (in the file, or the ``--set`` on the command line); else the whole CREATE."""
    written = owner.written_options.get(key)
    if written is None:
        return owner.span
    text, span = written.value.text, written.value.span
    literal = written.value.kind == LiteralKind.STRING and text[:1] in ("'", '"')
    if literal and text[1:-1] == value and span.line == span.end_line:
        column = span.column + 1
        return Span(span.file, span.line, column + problem.start, span.line, column + problem.end)
    return span


def _check_spark_syntax(expr: ast.SqlExpr, reporter: Reporter) -> None:
    """Forms flowc's SQL parser takes but Spark's does not."""
    if expr.tree.find(exp.SimilarTo) is None:
        return
    tokens = spark_tokenizer().tokenize(expr.text)
    spans = [
        sub_span(expr, token.start, token.end + 1)
        for token in tokens
        if token.token_type == TokenType.SIMILAR_TO
    ]
    for node_index, _ in enumerate(expr.tree.find_all(exp.SimilarTo)):
        reporter.error(
            Code.E0224,
            "Spark's SQL has no SIMILAR TO",
            spans[node_index] if node_index < len(spans) else expr.span,
            help="write RLIKE with a Java regular expression: x RLIKE '^(a|b).*$' "
            "(SIMILAR TO's % is .*, _ is .)",
        )


def _check_patterns(expr: ast.SqlExpr, reporter: Reporter) -> None:
    """Every datetime pattern the expression hands Spark, as the generated program
    writes it, is one Spark builds a formatter from."""
    for use in pattern_uses(expr.tree):
        if use.pattern is None:
            reporter.error(
                Code.E0226,
                f"the datetime pattern of {use.function} is not a string literal; Spark "
                "refuses a bad pattern only when a row reaches it",
                _literal_span(expr, use.literal, None),
                help="write the pattern as a string literal: "
                f"{use.function}(x, 'yyyy-MM-dd HH:mm:ss')",
            )
            continue
        problem = pattern_problem(use.pattern, use.parsing)
        if problem is not None:
            reporter.error(
                Code.E0225,
                f"{use.function} pattern '{use.pattern}': {problem.message}",
                _literal_span(expr, use.literal, (problem, use.pattern)),
                help=problem.hint,
            )


def _literal_span(
    expr: ast.SqlExpr, literal: exp.Expr | None, problem: tuple[PatternProblem, str] | None
) -> Span:
    """Where a pattern's literal stands in the file (the part of it at fault when its
    text is there verbatim); the expression's span when sqlglot kept no position."""
    meta = literal._meta if literal is not None else None
    if not meta or "start" not in meta or "end" not in meta:
        return expr.span
    start, end = int(meta["start"]), int(meta["end"]) + 1
    if not (0 <= start < end <= len(expr.text)) or expr.text[start] not in "'\"":
        return expr.span
    if problem is not None:
        found, pattern = problem
        if expr.text[start + 1 : end - 1] == pattern:
            return sub_span(expr, start + 1 + found.start, start + 1 + found.end)
    return sub_span(expr, start, end)


#: Calls that build a nested value, and X'..' literals, with the kind of type they build
#: (sqlglot's typing leaves them unknown).
_NESTED_BUILDERS: dict[type[exp.Expr], str] = {
    exp.Array: "array",
    exp.VarMap: "map",
    exp.Map: "map",
    exp.Struct: "struct",
    exp.HexString: "binary",
}

_T = exp.DataType.Type
_KINDS: dict[DType, str] = {
    **{kind: "string" for kind in exp.DataType.TEXT_TYPES},
    **{kind: "numeric" for kind in exp.DataType.NUMERIC_TYPES},
    _T.BOOLEAN: "boolean",
    _T.DATE: "date",
    _T.TIMESTAMP: "timestamp",
    _T.TIMESTAMPLTZ: "timestamp",
    _T.TIMESTAMPTZ: "timestamp",
    _T.TIMESTAMPNTZ: "timestamp_ntz",
    _T.BINARY: "binary",
    _T.VARBINARY: "binary",
    _T.ARRAY: "array",
    _T.MAP: "map",
    _T.STRUCT: "struct",
}

#: What Spark's ANSI CAST (``Cast.canAnsiCast``; ANSI is Spark 4's default) takes between
#: different kinds of type, besides any type to STRING.
_ANSI_CASTS = frozenset(
    {
        *(("string", to) for to in ("numeric", "boolean", "date", "timestamp")),
        ("string", "timestamp_ntz"),
        ("string", "binary"),
        ("numeric", "boolean"),
        ("numeric", "timestamp"),
        ("boolean", "numeric"),
        ("date", "timestamp"),
        ("date", "timestamp_ntz"),
        ("timestamp", "date"),
        ("timestamp", "timestamp_ntz"),
        ("timestamp", "numeric"),
        ("timestamp_ntz", "date"),
        ("timestamp_ntz", "timestamp"),
    }
)


def _kind(node: exp.Expr) -> str | None:
    if type(node) in _NESTED_BUILDERS:
        return _NESTED_BUILDERS[type(node)]
    data_type = node.type
    if not isinstance(data_type, exp.DataType):
        return None
    return _KINDS.get(data_type.this)


def _struct_width(node: exp.Expr) -> int | None:
    if isinstance(node, exp.Struct):
        return len(node.expressions)
    if isinstance(node.type, exp.DataType) and node.type.is_type(_T.STRUCT):
        return len(node.type.expressions) or None
    return None


def _check_casts(expr: ast.SqlExpr, reporter: Reporter) -> None:
    """A CAST between kinds of type Spark's analyzer refuses (``Cast.canAnsiCast``): an
    ARRAY to a MAP, a STRING to an ARRAY, a number to a DATE."""
    for node in expr.tree.find_all(exp.Cast):
        target = node.args.get("to")
        if not isinstance(node.this, exp.Expr) or not isinstance(target, exp.DataType):
            continue
        source_kind, target_kind = _kind(node.this), _KINDS.get(target.this)
        if source_kind == "struct" and target_kind == "struct":
            width = _struct_width(node.this)
            if width is not None and width != len(target.expressions):
                reporter.error(
                    Code.E0228,
                    f"Spark cannot cast a STRUCT of {width} fields to {target.sql('spark')} "
                    f"({len(target.expressions)} fields)",
                    node_span(expr, node),
                    help="a STRUCT casts field by field: give the target as many fields",
                )
            continue
        if source_kind is None or target_kind is None or source_kind == target_kind:
            continue
        if target_kind == "string" or (source_kind, target_kind) in _ANSI_CASTS:
            continue
        shown_to = target.sql("spark")
        nested = target_kind in ("array", "map", "struct")
        reporter.error(
            Code.E0228,
            f"Spark cannot cast {source_kind.upper()} to {shown_to}",
            node_span(expr, node),
            help="build the value with array(...), map(...) or named_struct(...), or parse "
            "text with from_json(x, 'ARRAY<INT>')"
            if nested
            else f"CAST to STRING first, or use a function that converts {source_kind} "
            f"values (to_date, timestamp_seconds, unix_date...)",
        )
