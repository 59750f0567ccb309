"""Checkers of the steps that read another stream: JOIN (an equi-join, whose sides are
hash-partitioned on the equal columns) and UNION ALL (inputs of the same columns).
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from flowc import ast
from flowc.analyze.context import Context
from flowc.analyze.references import is_table, refuse_table_as_stream, resolve_relation
from flowc.analyze.settings import step_hints
from flowc.analyze.step_common import StepInput, check_boolean, schema_text
from flowc.errorcodes import Code
from flowc.program import DimensionJoinStep, JoinStep, Schema, Step, Stream, UnionStep
from flowc.sql.functions import call_span
from flowc.sql.sqltypes import Scope, types_match, union_type
from flowc.vocabulary import JoinKind


def check_join(ctx: Context, node: ast.Join, step: StepInput) -> Step | None:
    hints = step_hints(node, ctx.reporter)
    schema = step.schema
    table = is_table(ctx, node.right)
    if table and node.kind not in (JoinKind.INNER, JoinKind.LEFT):
        ctx.used.add(node.right.name.value)
        ctx.reporter.error(
            Code.E0264,
            f"a {node.kind} JOIN of table '{node.right.name.value}' would have to emit the "
            "table's unmatched rows, which a stream never finishes",
            node.keyword_span,
            help="join a table with INNER or LEFT JOIN (Spark's stream-static join)",
        )
        return None
    resolved = resolve_relation(ctx, node.right, step.view)
    if resolved is None:
        return None
    origin, right_schema = resolved
    if node.condition is None:
        ctx.reporter.error(
            Code.E0219,
            "JOIN needs a condition",
            node.right.span,
            help=f"add ON, e.g. JOIN {node.right.text} ON a.id = {node.right.name.value}.id",
        )
        return None
    left_names = {c.qualifier for c in schema}
    right_name = node.right.name.value
    if right_name in left_names:
        ctx.reporter.error(
            Code.E0220,
            f"both sides of the JOIN are called '{right_name}'",
            node.right.span,
            help="join a view defined over it instead, so each side has its own name",
        )
        return None
    combined = (*schema, *right_schema)
    if not check_boolean(ctx, node.condition, Scope(combined), "JOIN"):
        return None
    if node.kind != JoinKind.INNER and not _no_python_calls(ctx, node):
        return None
    left_keys, right_keys = _equi_keys(node.condition.tree, schema, right_schema)
    if not left_keys:
        ctx.reporter.error(
            Code.E0221,
            "JOIN needs an equality between the two sides",
            node.condition.span,
            help=f"for example ON left_col = {right_name}.col; both sides are "
            "hash-partitioned on it",
        )
        return None
    right_stream = Stream(
        origin=origin, steps=(), schema=right_schema, keys=right_keys, span=node.right.span
    )
    versioned = ctx.sources.get(right_name) if table else None
    joined = DimensionJoinStep if table else JoinStep
    return joined(
        temporal=versioned is not None
        and node.as_of is not None
        and versioned.version_time is not None,
        node=node,
        schema=combined,
        hints=hints,
        span=node.span,
        inputs=(right_stream,),
        keys=left_keys,
    )


def flink_union_types(ctx: Context, node: ast.UnionAll, schema: Schema) -> tuple[str, ...] | None:
    """The column types a Flink-dialect UNION ALL has (Flink's common type of each column
    over every input, :func:`union_type`), or None when some input's columns do not widen
    so (check_union then reports it). Looked up without reporting: check_union does."""
    types = [c.type for c in schema]
    for relation in node.others:
        name = relation.name.value
        source = ctx.sources.get(name)
        view = ctx.views.get(name)
        if relation.side_output is not None or name not in ctx.defined:
            return None
        if source is not None:
            other: Schema = source.output_schema
        elif view is not None:
            other = view.stream.schema
        else:
            return None
        if len(other) != len(types) or any(
            a.name != b.name for a, b in zip(schema, other, strict=True)
        ):
            return None
        for index, column in enumerate(other):
            widened = union_type(types[index], column.type)
            if widened is None:
                return None
            types[index] = widened
    return tuple(types)


def check_union(
    ctx: Context, node: ast.UnionAll, step: StepInput, flink: bool = False
) -> Step | None:
    """UNION ALL: the same columns on every input; in the Flink dialect an input's column
    may be of a narrower type (the query casts its own first: :func:`flink_union_types`),
    which Spark's union widens to the type of the stream's as Flink does."""
    hints = step_hints(node, ctx.reporter)
    schema = step.schema
    others: list[Stream] = []
    ok = True
    for relation in node.others:
        if is_table(ctx, relation):
            refuse_table_as_stream(ctx, relation, "a UNION ALL input")
            ok = False
            continue
        resolved = resolve_relation(ctx, relation, step.view)
        if resolved is None:
            ok = False
            continue
        origin, other_schema = resolved
        same = len(other_schema) == len(schema) and all(
            a.name == b.name
            and (types_match(a.type, b.type) or (flink and union_type(a.type, b.type) == a.type))
            for a, b in zip(schema, other_schema, strict=True)
        )
        if not same:
            ctx.reporter.error(
                Code.E0222,
                f"UNION ALL needs the same columns on every input; '{relation.text}' differs",
                relation.span,
                help=f"stream: ({schema_text(schema)}); {relation.text}: "
                f"({schema_text(other_schema)})"
                + (
                    "; Flink's common type of two numeric types is taken only where Spark's "
                    "union gives the same (not FLOAT with another number, BIGINT with a DECIMAL): "
                    "CAST the columns to one type"
                    if flink
                    else ""
                ),
            )
            ok = False
            continue
        others.append(
            Stream(origin=origin, steps=(), schema=other_schema, keys=None, span=relation.span)
        )
    if not ok:
        return None
    out = tuple(replace(c, qualifier=None) for c in schema)
    return UnionStep(
        node=node,
        schema=out,
        hints=hints,
        span=node.span,
        inputs=tuple(others),
    )


def _equi_keys(
    condition: exp.Expr, left: Schema, right: Schema
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Column pairs ``left = right`` among the condition's AND-ed terms."""
    left_keys: list[str] = []
    right_keys: list[str] = []
    terms = list(condition.flatten()) if isinstance(condition, exp.And) else [condition]
    for term in terms:
        if not isinstance(term, exp.EQ):
            continue
        a, b = term.left, term.right
        if not (isinstance(a, exp.Column) and isinstance(b, exp.Column)):
            continue
        side_a, side_b = _side(a, left, right), _side(b, left, right)
        if side_a == "left" and side_b == "right":
            left_keys.append(a.name)
            right_keys.append(b.name)
        elif side_a == "right" and side_b == "left":
            left_keys.append(b.name)
            right_keys.append(a.name)
    return tuple(left_keys), tuple(right_keys)


def _side(column: exp.Column, left: Schema, right: Schema) -> str | None:
    qualifier = column.table or None
    in_left = any(c.name == column.name and qualifier in (None, c.qualifier) for c in left)
    in_right = any(c.name == column.name and qualifier in (None, c.qualifier) for c in right)
    if in_left and not in_right:
        return "left"
    if in_right and not in_left:
        return "right"
    return None


def _no_python_calls(ctx: Context, node: ast.Join) -> bool:
    """E0285: Spark evaluates no Python function in an outer join's ON clause
    (UNSUPPORTED_FEATURE.PYTHON_UDF_IN_ON_CLAUSE when the query starts)."""
    assert node.condition is not None
    for call in node.condition.tree.find_all(exp.Anonymous):
        if call.name.lower() in ctx.checks.functions:
            ctx.reporter.error(
                Code.E0285,
                f"Python function '{call.name}' in the ON clause of a {node.kind} JOIN",
                call_span(node.condition, call, ctx.checks.positions),
                help="Spark cannot run it there: compute it in a step before the join "
                "(|> EXTEND f(x) AS fx), then join ON the column",
            )
            return False
    return True
