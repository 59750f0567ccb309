"""Views and inserts: a view's query becomes a named stream with its side outputs; an
INSERT's query must write a sink defined above it, with the sink's columns.
"""

from __future__ import annotations

import dataclasses
import re

from sqlglot import exp

from flowc import ast, catalog
from flowc.analyze.context import Context
from flowc.analyze.query import check_query
from flowc.analyze.row_steps import check_select
from flowc.analyze.step_common import StepInput, schema_text
from flowc.analyze.upsert_sinks import postgres_type, upsert_key
from flowc.diagnostics import did_you_mean
from flowc.errorcodes import Code
from flowc.program import Column, InsertDef, SideOutput, SinkDef, Stream, ViewDef
from flowc.sql.flink_dialect import FLINK
from flowc.sql.sqltypes import types_match
from flowc.vocabulary import DefinitionKind


def check_view(ctx: Context, node: ast.CreateView) -> None:
    """A second definition of the name is checked too, but reads as no view (``view=None``)."""
    name = node.name.value
    ctx.defined.add(name)
    side_outputs: list[SideOutput] = []
    registered = ctx.definitions[name].node is node
    stream = check_query(ctx, node.query, side_outputs, view=name if registered else None)
    if stream is None or not registered:
        return
    ctx.views[name] = ViewDef(
        name=name, stream=stream, side_outputs=tuple(side_outputs), span=node.span
    )


def check_insert(ctx: Context, node: ast.Insert, order: int) -> None:
    """``order`` is the statement's position: the sink must be defined above it."""
    sink_name = node.sink.value
    definition = ctx.definitions.get(sink_name)
    side_outputs: list[SideOutput] = []
    sink = ctx.sinks.get(sink_name)
    declared = sink.schema if sink is not None and _flink_insert(ctx, node) else None
    query = _named_as_sink(node.query, declared) if declared is not None else None
    reported = len(ctx.reporter.diagnostics)
    stream = check_query(ctx, query or node.query, side_outputs, view=None)
    if (
        stream is not None
        and sink is not None
        and declared is not None
        and len(stream.schema) == len(declared)
        and not _same_columns(stream, sink)
    ):  # Flink writes the query's i-th column as the sink's i-th column, cast
        del ctx.reporter.diagnostics[reported:]  # checked again, as the sink's columns
        side_outputs = []
        stream = _positional(ctx, node, query or node.query, sink, stream, side_outputs)
    if definition is None or definition.kind != DefinitionKind.SINK:
        what = f"a {definition.kind}" if definition else "not defined"
        sinks = [n for n, d in ctx.definitions.items() if d.kind == DefinitionKind.SINK]
        ctx.reporter.error(
            Code.E0103,
            f"cannot INSERT INTO '{sink_name}': it is {what}",
            node.sink.span,
            help=did_you_mean(sink_name, sinks)
            or ("sinks: " + ", ".join(sinks) if sinks else "declare it with CREATE SINK"),
        )
        return
    if definition.order > order:
        ctx.reporter.error(
            Code.E0104,
            f"sink '{sink_name}' is used before its definition",
            node.sink.span,
            help=f"move CREATE SINK {sink_name} (line {definition.node.span.line}) above this",
        )
        return
    ctx.used.add(sink_name)
    if stream is None or sink_name not in ctx.sinks:
        return
    for output in side_outputs:
        ctx.reporter.warning(
            Code.W0005,
            f"side output '{output.name}' of a ROUTE in an INSERT can never be read",
            output.span,
            help="define the ROUTE in a CREATE VIEW and read it with FROM view.name",
        )
    _check_sink_schema(ctx, node, ctx.sinks[sink_name], stream)
    ctx.inserts.append(InsertDef(sink=sink_name, stream=stream, span=node.span))


def _check_sink_schema(ctx: Context, node: ast.Insert, sink: SinkDef, stream: Stream) -> None:
    names: dict[str, Column] = {}
    for column in stream.schema:
        if column.name in names:
            ctx.reporter.error(
                Code.E0206,
                f"the query writes two columns named '{column.name}'",
                node.query.span,
                help="SELECT the columns to write, renaming one of them with AS",
            )
            return
        names[column.name] = column
    _check_partition_columns(ctx, node, sink, stream)
    if catalog.is_upsert(sink.connector, sink.mode):
        _check_upsert_columns(ctx, node, sink, stream)
    if sink.schema is None:
        return
    if not _same_columns(stream, sink):
        positional = " (Flink writes columns by position: their counts differ)"
        ctx.reporter.error(
            Code.E0207,
            f"the query's columns do not match sink '{sink.name}'",
            node.query.span,
            help=f"sink: ({schema_text(sink.schema)}); query: ({schema_text(stream.schema)})"
            + (positional if _flink_insert(ctx, node) else ""),
        )


def _same_columns(stream: Stream, sink: SinkDef) -> bool:
    """The query writes the sink's columns, in its order, with its names and types."""
    declared = sink.schema or ()
    return len(stream.schema) == len(declared) and all(
        w.name == d.name and types_match(w.type, d.type)
        for w, d in zip(stream.schema, declared, strict=True)
    )


def _flink_insert(ctx: Context, node: ast.Insert) -> bool:
    """An INSERT read as Flink SQL: its query's dialect, or the program's."""
    if isinstance(node.query, ast.SqlQuery):
        return node.query.dialect == FLINK
    return ctx.settings.sql_dialect == FLINK


#: Integer types, narrowest first: each casts implicitly to the ones after it (in Flink).
_INTEGERS = ("TINYINT", "SMALLINT", "INT", "BIGINT")
_DECIMAL = re.compile(r"DECIMAL\((\d+), (\d+)\)")


def sink_cast(written: str, declared: str) -> str | None:
    """How Flink writes a column of type ``written`` into a sink column of type
    ``declared`` (its implicit cast, run in Flink 2.3): "" as it is, "CAST" (as Flink computes it:
    integer widening, any number to DOUBLE, FLOAT to DOUBLE), "TRY_CAST" (into a DECIMAL:
    rounded half up to its scale, NULL where it overflows, as Flink gives it; Spark's
    TRY_CAST computes both so, its CAST fails in ANSI mode), None where Flink refuses the
    pair (narrowing: DOUBLE or DECIMAL to an integer, BIGINT to INT, DOUBLE to FLOAT;
    across kinds: numbers and strings, BOOLEAN, DATE to TIMESTAMP) or flowc does not cast
    it (the other pairs Flink casts: numbers to FLOAT, FLOAT to a DECIMAL, TIMESTAMP to
    DATE, strings to VARCHAR(n); tests/test_sink_casts_against_flink.py)."""
    if types_match(written, declared):
        return ""
    if written in _INTEGERS and declared in _INTEGERS:
        return "CAST" if _INTEGERS.index(written) < _INTEGERS.index(declared) else None
    numeric = written in _INTEGERS or written in ("FLOAT", "DOUBLE") or _DECIMAL.fullmatch(written)
    if declared == "DOUBLE" and numeric:
        return "CAST"
    if _DECIMAL.fullmatch(declared) and numeric and written != "FLOAT":
        return "TRY_CAST"
    return None


def _outer_select(query: ast.Query) -> exp.Select | None:
    """The outermost SELECT of a SQL query whose columns can be renamed (not ``*``)."""
    tree = query.tree if isinstance(query, ast.SqlQuery) else None
    return tree if isinstance(tree, exp.Select) and not tree.is_star else None


def _named_as_sink(query: ast.Query, declared: tuple[Column, ...]) -> ast.SqlQuery | None:
    """A Flink-dialect INSERT's query with its outermost SELECT's columns named as the
    sink's, by position (Flink's planner renames at the sink: the plan is the query's
    own); None where the query cannot be so renamed (``*``, a UNION, another count)."""
    tree = _outer_select(query)
    if (
        tree is None
        or len(tree.expressions) != len(declared)
        or not isinstance(query, ast.SqlQuery)
    ):
        return None
    items = [
        _sink_item(e.unalias(), c, "") for e, c in zip(tree.expressions, declared, strict=True)
    ]
    return dataclasses.replace(query, tree=tree.copy().select(*items, append=False))


def _positional(
    ctx: Context,
    node: ast.Insert,
    query: ast.Query,
    sink: SinkDef,
    stream: Stream,
    side_outputs: list[SideOutput],
) -> Stream | None:
    """``query`` (``stream`` as checked) writing the sink's columns: its outermost
    SELECT's columns cast to the sink's types where Flink casts them (in the Calc before
    the sink, as Flink's planner does), or, where that SELECT cannot be rewritten (``*``,
    a UNION), one SELECT after it renaming and casting (a Calc). None where a type pair is
    refused (reported)."""
    declared = sink.schema or ()
    casts: list[str] = []
    for index, (column, target) in enumerate(zip(stream.schema, declared, strict=True)):
        how = sink_cast(column.type, target.type)
        if how is None:
            ctx.reporter.error(
                Code.E0296,
                f"the query's column {index + 1} is {column.type}, which cannot be written "
                f"into column '{target.name}' ({target.type}) of sink '{sink.name}'",
                node.query.span,
                help=f"CAST it to {target.type} in the query (Flink casts only widening "
                "numbers into a sink's column by itself)",
            )
            return None
        casts.append(how)
    tree = _outer_select(query)
    if isinstance(query, ast.SqlQuery) and tree is not None:
        items = [
            _sink_item(item.unalias(), target, how)
            for item, target, how in zip(tree.expressions, declared, casts, strict=True)
        ]
        rewritten = dataclasses.replace(query, tree=tree.copy().select(*items, append=False))
        return check_query(ctx, rewritten, side_outputs, view=None)
    checked = check_query(ctx, query, side_outputs, view=None)
    if checked is None:
        return None
    select = _sink_select(node, checked, declared, casts)
    step_input = StepInput(
        checked.schema, checked.keys, side_outputs, len(checked.steps), None, None
    )
    step = check_select(ctx, select, step_input)
    if step is None:
        return None
    return dataclasses.replace(
        checked,
        steps=(*checked.steps, step),
        schema=step.schema,
        keys=step.keys_after(checked.keys),
    )


def _sink_item(tree: exp.Expr, target: Column, how: str) -> exp.Expr:
    """``tree`` as the sink's column ``target``: cast as ``how`` says, under its name."""
    if how:
        kind = exp.TryCast if how == "TRY_CAST" else exp.Cast
        tree = kind(
            this=tree.copy(),
            to=exp.DataType.build(target.type, dialect="spark"),
            safe=kind is exp.TryCast,
        )
    return exp.alias_(tree, exp.to_identifier(target.name, quoted=True))


def _sink_select(
    node: ast.Insert, stream: Stream, declared: tuple[Column, ...], casts: list[str]
) -> ast.Select:
    """The SELECT writing ``stream``'s columns as the sink's, by position."""
    items = []
    for column, target, how in zip(stream.schema, declared, casts, strict=True):
        tree = _sink_item(exp.column(exp.to_identifier(column.name, quoted=True)), target, how)
        expr = ast.SqlExpr(text=tree.this.sql("spark"), tree=tree.this, span=node.query.span)
        alias = ast.Name(value=target.name, quoted=True, span=node.query.span)
        items.append(ast.SelectItem(expr=expr, alias=alias, span=node.query.span))
    return ast.Select(
        items=tuple(items),
        keyword_span=node.query.span,
        hints=(),
        hints_span=None,
        span=node.query.span,
    )


def _check_partition_columns(ctx: Context, node: ast.Insert, sink: SinkDef, stream: Stream) -> None:
    """``partition_by``'s columns are written columns of atomic types, never all of them
    (Spark's file sink refuses both)."""
    text = dict(sink.options).get("partition_by")
    if text is None:
        return
    wanted = catalog.partition_columns(str(text))
    _check_sink_columns(
        ctx, node, sink, stream, wanted, (Code.E0420, Code.E0421), ("partitioned", "partition")
    )
    if set(wanted) >= {c.name for c in stream.schema}:
        ctx.reporter.error(
            Code.E0421,
            f"sink '{sink.name}' is partitioned by every column it writes, so its files "
            "would hold no column",
            node.query.span,
            help="write at least one column that is not in partition_by",
        )


def _check_sink_columns(
    ctx: Context,
    node: ast.Insert,
    sink: SinkDef,
    stream: Stream,
    names: tuple[str, ...],
    codes: tuple[Code, Code],
    verbs: tuple[str, str],
) -> None:
    """The columns a sink option names (``partition_by``, ``key``) are written by the query
    (``codes[0]``) and of atomic types (``codes[1]``); ``verbs`` say what the sink does
    with them ("partitioned by", "partition by")."""
    columns = {c.name: c for c in stream.schema}
    done, verb = verbs
    for name in names:
        column = columns.get(name)
        if column is None:
            ctx.reporter.error(
                codes[0],
                f"sink '{sink.name}' is {done} by '{name}', which the query does not write",
                node.query.span,
                help=did_you_mean(name, list(columns)) or f"the query writes: {', '.join(columns)}",
            )
        elif column.type.split("<", 1)[0] in ("STRUCT", "ARRAY", "MAP"):
            ctx.reporter.error(
                codes[1],
                f"sink '{sink.name}' cannot be {done} by '{name}', of type {column.type}",
                node.query.span,
                help=f"{verb} by columns of atomic types (STRING, BIGINT, DATE, TIMESTAMP, ...)",
            )


def _check_upsert_columns(ctx: Context, node: ast.Insert, sink: SinkDef, stream: Stream) -> None:
    """An upsert sink's key columns are written columns of atomic types (E0431, E0432); a
    postgres sink stores every column in a column type of its own (E0432)."""
    keys = upsert_key(sink)
    _check_sink_columns(ctx, node, sink, stream, keys, (Code.E0431, Code.E0432), ("keyed", "key"))
    if sink.connector != "postgres":
        return
    for column in stream.schema:
        if postgres_type(column.type) is None:
            ctx.reporter.error(
                Code.E0432,
                f"sink '{sink.name}' cannot store column '{column.name}' of type "
                f"{column.type} in PostgreSQL",
                node.query.span,
                help="write scalar columns (flatten a STRUCT, to_json(...) an ARRAY or MAP)",
            )


# ------------------------------------------------------------ relations
