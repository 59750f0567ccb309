"""Flink's ``CREATE TABLE`` in the Flink dialect: a source, a sink or a dimension table, by use.

In Flink every source and sink is a table; in flowc a stream is a ``CREATE SOURCE``, a
sink a ``CREATE SINK`` and a ``CREATE TABLE`` a bounded dimension table. A Flink-dialect
table is decided by what the file does with it (docs/language.md, "Flink tables"): one an
INSERT writes is a sink (its PRIMARY KEY the upsert key; its WATERMARK and computed
columns, which Flink ignores on a sink, dropped); one read on the right of ``FOR
SYSTEM_TIME AS OF`` is a dimension table (Flink's lookup and temporal joins); any other is
a stream. One both written and read is E0295: a job reading what it writes is not a
pipeline flowc can chain.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace

from sqlglot import exp

from flowc import ast
from flowc.diagnostics import Reporter
from flowc.errorcodes import Code
from flowc.spans import Span, text_span
from flowc.vocabulary import LiteralKind


def resolve_tables(
    statements: Sequence[ast.Statement], flink: frozenset[int], reporter: Reporter
) -> list[ast.Statement]:
    """``statements`` with each Flink-dialect ``CREATE TABLE`` (its index in ``flink``)
    made the source, sink or table its uses say it is."""
    if not flink:
        return list(statements)
    written: dict[str, ast.Insert] = {}
    read: dict[str, Span] = {}
    as_of: set[str] = set()
    for statement in statements:
        if isinstance(statement, ast.Insert):
            written.setdefault(statement.sink.value, statement)
        if isinstance(statement, (ast.Insert, ast.CreateView)):
            for name, span, versioned in _reads(statement.query):
                read.setdefault(name, span)
                if versioned:
                    as_of.add(name)
    out: list[ast.Statement] = []
    for index, statement in enumerate(statements):
        if index not in flink or not isinstance(statement, ast.CreateSource):
            out.append(statement)
            continue
        statement = replace(statement, options=_flowc_connector(statement.options))
        name = statement.name.value
        if name in written and name in read:
            reporter.error(
                Code.E0295,
                f"table '{name}' is both written (by the INSERT at "
                f"{written[name].sink.span}) and read (at {read[name]})",
                statement.name.span,
                help="a flowc job does not read its own sink: read the stream the INSERT "
                "writes from a view instead (CREATE VIEW), or run two jobs",
            )
        if name in written:
            out.append(
                ast.CreateSink(
                    name=statement.name,
                    columns=statement.columns or None,
                    options=_partition_options(statement, reporter),
                    span=statement.span,
                    primary_key=statement.primary_key,
                    flink_table=True,
                )
            )
        else:
            if statement.partitioned_by is not None:
                reporter.error(
                    Code.E0294,
                    f"PARTITIONED BY on table '{name}', which the job reads",
                    statement.partitioned_by.span,
                    help="remove it: flowc reads a table's files as they are (PARTITIONED BY "
                    "is for a files table the job writes)",
                )
            out.append(replace(statement, bounded=name in as_of))
    return out


#: Flink's connectors that are flowc's under another name: blackhole drops every change,
#: print shows each (flowc's console shows a micro-batch's rows as a table, not one line
#: per change with its kind). Their other options stay unknown (E0403).
FLINK_CONNECTORS = {"blackhole": "noop", "print": "console"}


def _flowc_connector(options: tuple[ast.Option, ...]) -> tuple[ast.Option, ...]:
    """A table's options with a Flink connector name (``'blackhole'``) made flowc's."""
    out = []
    for option in options:
        if option.key.lower() == "connector" and option.value.kind == LiteralKind.STRING:
            name = FLINK_CONNECTORS.get(str(option.value.python).lower())
            if name is not None:
                option = replace(option, value=replace(option.value, text=f"'{name}'"))
        out.append(option)
    return tuple(out)


#: Sinks that keep no files: a PARTITIONED BY changes none of the rows they show or drop.
_UNSTORED = frozenset({"console", "noop"})


def _partition_options(table: ast.CreateSource, reporter: Reporter) -> tuple[ast.Option, ...]:
    """The options of a written table, its PARTITIONED BY (a, b) made a files sink's
    ``partition_by = 'a, b'``; dropped for a console or noop sink, which keep no files
    (Flink's print and blackhole sinks take it and ignore it); E0294 for any other."""
    partitioned = table.partitioned_by
    if partitioned is None:
        return table.options
    given = {o.key.lower(): o for o in table.options}
    connector = given.get("connector")
    kind = str(connector.value.python).lower() if connector is not None else ""
    if kind in _UNSTORED:
        return table.options
    if kind != "files" or "partition_by" in given:
        reporter.error(
            Code.E0294,
            f"PARTITIONED BY on a {kind or 'connector-less'} table"
            if kind != "files"
            else "PARTITIONED BY and partition_by both given",
            partitioned.span,
            help="only a files sink writes partitions (partition_by = 'a, b'); give them once"
            if kind == "files"
            else "remove PARTITIONED BY, or write the table with connector = 'files'",
        )
        return table.options
    columns = ", ".join(c.value for c in partitioned.columns)
    value = ast.Value(kind=LiteralKind.STRING, text=f"'{columns}'", span=partitioned.span)
    option = ast.Option(
        key="partition_by", key_span=partitioned.span, value=value, span=partitioned.span
    )
    return (*table.options, option)


def _reads(query: ast.Query) -> Iterator[tuple[str, Span, bool]]:
    """Each name a query reads, where, and whether it is read ``FOR SYSTEM_TIME AS OF``."""
    if isinstance(query, ast.PipeQuery):
        yield query.source.name.value, query.source.span, False
        for step in query.steps:
            if isinstance(step, ast.Join):
                yield step.right.name.value, step.right.span, step.as_of is not None
            elif isinstance(step, ast.UnionAll):
                for other in step.others:
                    yield other.name.value, other.span, False
        return
    for table in query.tree.find_all(exp.Table):
        if not table.name:
            continue
        meta = table.this.meta if isinstance(table.this, exp.Identifier) else {}
        span = query.span
        if "start" in meta and "end" in meta:
            span = text_span(query.text, query.span, meta["start"], meta["end"] + 1)
        yield table.name, span, table.args.get("version") is not None
