"""Names: declaring every definition up front, resolving a reference (``FROM x``,
``FROM v.out``, a JOIN or UNION ALL side) to its origin and schema, and explaining a
reference that fails (unknown, a sink, used before its definition, a cycle of views).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from sqlglot import exp

from flowc import ast, catalog
from flowc.analyze.context import Context, Definition
from flowc.diagnostics import Reporter, did_you_mean
from flowc.errorcodes import Code
from flowc.program import (
    ERRORS_SCHEMA,
    FromSideOutput,
    FromSource,
    FromSourceErrors,
    FromView,
    Origin,
    Schema,
)
from flowc.vocabulary import DefinitionKind

_DEFINITION_KINDS: dict[type[ast.Statement], DefinitionKind] = {
    ast.CreateSource: DefinitionKind.SOURCE,
    ast.CreateSink: DefinitionKind.SINK,
    ast.CreateView: DefinitionKind.VIEW,
}


def declare(statements: Sequence[ast.Statement], reporter: Reporter) -> dict[str, Definition]:
    """Every definition, recorded first, so a reference to a later one can be explained;
    a second definition of a name is E0102."""
    definitions: dict[str, Definition] = {}
    for order, statement in enumerate(statements):
        if not isinstance(statement, ast.CreateSource | ast.CreateSink | ast.CreateView):
            continue
        name = statement.name.value
        previous = definitions.get(name)
        if previous is not None:
            reporter.error(
                Code.E0102,
                f"'{name}' is already defined",
                statement.name.span,
                help=f"the {previous.kind} '{name}' is defined at "
                f"{previous.node.name.span}; choose another name",
            )
            continue
        definitions[name] = Definition(_DEFINITION_KINDS[type(statement)], statement, order)
    return definitions


def is_table(ctx: Context, relation: ast.Relation) -> bool:
    """Whether ``relation`` names a ``CREATE TABLE`` (a bounded dimension table)."""
    definition = ctx.definitions.get(relation.name.value)
    return (
        definition is not None
        and isinstance(definition.node, ast.CreateSource)
        and definition.node.bounded
    )


def refuse_table_as_stream(ctx: Context, relation: ast.Relation, use: str) -> None:
    """E0263: a table is not a stream; only a JOIN from a stream reads it."""
    name = relation.name.value
    ctx.used.add(name)
    ctx.reporter.error(
        Code.E0263,
        f"table '{name}' is bounded and cannot be {use}",
        relation.name.span,
        help=f"read a stream and join the table from it: FROM <stream> |> JOIN {name} ON ...",
    )


def resolve_relation(
    ctx: Context, relation: ast.Relation, view: str | None
) -> tuple[Origin, Schema] | None:
    """Resolve ``FROM x`` / ``FROM v.out`` / a JOIN or UNION side to its origin and schema."""
    name = relation.name.value
    definition = ctx.definitions.get(name)
    if definition is not None:
        ctx.used.add(name)
    if definition is None:
        candidates = [n for n, d in ctx.definitions.items() if d.kind != DefinitionKind.SINK]
        ctx.reporter.error(
            Code.E0101,
            f"unknown source or view '{name}'",
            relation.name.span,
            help=did_you_mean(name, candidates)
            or ("defined: " + ", ".join(candidates) if candidates else None),
        )
        return None
    if definition.kind == DefinitionKind.SINK:
        ctx.reporter.error(
            Code.E0103,
            f"cannot read from '{name}': it is a sink",
            relation.name.span,
            help="read from a source or a view",
        )
        return None
    if name == view:
        ctx.reporter.error(
            Code.E0105,
            f"view '{name}' reads from itself",
            relation.name.span,
            help="a view cannot be defined in terms of itself",
        )
        return None
    if name not in ctx.defined:
        cycle = _cycle(ctx, name, view) if view is not None else None
        if cycle is not None:
            ctx.reporter.error(
                Code.E0105,
                "views form a cycle: " + " -> ".join(cycle),
                relation.name.span,
                help="streams must flow one way; break the cycle",
            )
        else:
            ctx.reporter.error(
                Code.E0104,
                f"{definition.kind} '{name}' is used before its definition",
                relation.name.span,
                help=f"move CREATE {definition.kind.upper()} {name} "
                f"(line {definition.node.span.line}) above this statement",
            )
        return None
    ctx.used.add(name)
    if definition.kind == DefinitionKind.SOURCE:
        source = ctx.sources.get(name)
        if source is None:
            return None
        if relation.side_output is None:
            return FromSource(name=name, span=relation.span), _qualified(source.output_schema, name)
        wanted = relation.side_output.value
        if wanted == catalog.ERRORS_OUTPUT and source.on_error == "route":
            ctx.read_errors.add(name)
            errors = FromSourceErrors(source=name, span=relation.span)
            return errors, _qualified(ERRORS_SCHEMA, name)
        ctx.reporter.error(
            Code.E0106,
            f"source '{name}' has no side output '{wanted}'",
            relation.side_output.span,
            help=f"a json or csv file source with on_error = 'route' has the side output "
            f"'{catalog.ERRORS_OUTPUT}' (its malformed records); other side outputs come "
            "from a view's ROUTE step",
        )
        return None
    view_def = ctx.views.get(name)
    if view_def is None:
        return None
    if relation.side_output is None:
        schema = _qualified(view_def.stream.schema, name)
        return FromView(name=name, span=relation.span), schema
    output_name = relation.side_output.value
    for output in view_def.side_outputs:
        if output.name == output_name:
            origin = FromSideOutput(view=name, output=output_name, span=relation.span)
            return origin, _qualified(output.schema, name)
    outputs = [o.name for o in view_def.side_outputs]
    ctx.reporter.error(
        Code.E0106,
        f"view '{name}' has no side output '{output_name}'",
        relation.side_output.span,
        help=did_you_mean(output_name, outputs)
        or (f"its side outputs: {', '.join(outputs)}" if outputs else "it has no ROUTE step"),
    )
    return None


def _cycle(ctx: Context, start: str, target: str) -> list[str] | None:
    """The path of view references from ``start`` back to ``target``, if there is one."""
    path = [target, start]
    seen = {start}

    def visit(name: str) -> bool:
        definition = ctx.definitions.get(name)
        if definition is None or not isinstance(definition.node, ast.CreateView):
            return False
        for ref in query_references(definition.node.query):
            if ref == target:
                path.append(target)
                return True
            if ref not in seen:
                seen.add(ref)
                path.append(ref)
                if visit(ref):
                    return True
                path.pop()
        return False

    return path if visit(start) else None


def query_references(query: ast.Query) -> list[str]:
    """The names a query reads: its source, and its JOIN and UNION ALL sides (or a SQL
    query's tables)."""
    if isinstance(query, ast.SqlQuery):
        return [t.name for t in query.tree.find_all(exp.Table)]
    refs = [query.source.name.value]
    for step in query.steps:
        if isinstance(step, ast.Join):
            refs.append(step.right.name.value)
        elif isinstance(step, ast.UnionAll):
            refs.extend(r.name.value for r in step.others)
    return refs


def _qualified(schema: Schema, qualifier: str) -> Schema:
    return tuple(replace(c, qualifier=qualifier) for c in schema)
