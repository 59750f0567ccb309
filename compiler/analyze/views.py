"""Views and inserts: a view's query becomes a named stream with its side outputs; an
INSERT's query must write a sink defined above it, with the sink's columns.
"""

from __future__ import annotations

from flowc import ast, catalog
from flowc.analyze.context import Context
from flowc.analyze.query import check_query
from flowc.analyze.step_common import schema_text
from flowc.analyze.upsert_sinks import postgres_type, upsert_key
from flowc.diagnostics import did_you_mean
from flowc.errorcodes import Code
from flowc.program import Column, InsertDef, SideOutput, SinkDef, Stream, ViewDef
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
    stream = check_query(ctx, node.query, side_outputs, view=None)
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
    written = [(c.name, c.type) for c in stream.schema]
    declared = [(c.name, c.type) for c in sink.schema]
    same = len(written) == len(declared) and all(
        w[0] == d[0] and types_match(w[1], d[1]) for w, d in zip(written, declared, strict=True)
    )
    if not same:
        ctx.reporter.error(
            Code.E0207,
            f"the query's columns do not match sink '{sink.name}'",
            node.query.span,
            help=f"sink: ({schema_text(sink.schema)}); query: ({schema_text(stream.schema)})",
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
