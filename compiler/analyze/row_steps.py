"""Checkers of the steps that work record by record: WHERE, SELECT, EXTEND, SET, DROP, RENAME,
EXPLODE, ROUTE, and the partition steps (KEY BY, PARTITION BY, REBALANCE and the other
exchanges), which only choose how records are distributed.
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from flowc import ast
from flowc.analyze.context import Context
from flowc.analyze.settings import step_hints
from flowc.analyze.step_common import (
    StepInput,
    check_boolean,
    check_unique,
    item_name,
    keyword,
    report_unknown_column,
)
from flowc.analyze.watermark_reads import read_watermark
from flowc.errorcodes import Code
from flowc.program import (
    Column,
    DropStep,
    ExplodeStep,
    ExtendStep,
    Hints,
    KeyByStep,
    PartitionByStep,
    PartitionStep,
    RenameStep,
    RouteStep,
    SelectStep,
    SetStep,
    SideOutput,
    Step,
    WhereStep,
)
from flowc.sql.functions import is_aggregate
from flowc.sql.sqltypes import UNKNOWN, Scope
from flowc.vocabulary import Partitioner


def check_where(ctx: Context, node: ast.Where, step: StepInput) -> Step | None:
    hints = step_hints(node, ctx.reporter)
    read = read_watermark(ctx, [node.condition], Scope(step.schema), condition=True)
    if read is None:
        return None
    (condition,), scope, watermark = read
    if condition is not node.condition:  # a CURRENT_WATERMARK read as a column
        node = replace(node, condition=condition)
    if not check_boolean(ctx, node.condition, scope, "WHERE"):
        return None
    return WhereStep(
        node=node, schema=step.schema, hints=hints, span=node.span, watermark=watermark
    )


def check_select(ctx: Context, node: ast.Select | ast.Extend, step: StepInput) -> Step | None:
    """SELECT, and EXTEND (which keeps the input's columns and adds new ones)."""
    hints = step_hints(node, ctx.reporter)
    schema = step.schema
    read = read_watermark(ctx, [i.expr for i in node.items], Scope(schema), condition=False)
    if read is None:
        return None
    exprs, scope, watermark = read
    written = node.items
    if watermark is not None:
        node = replace(
            node,
            items=tuple(replace(i, expr=e) for i, e in zip(node.items, exprs, strict=True)),
        )
    out: list[Column] = [] if isinstance(node, ast.Select) else list(schema)
    ok = True
    for item, as_written in zip(node.items, written, strict=True):
        tree = item.expr.tree
        if isinstance(tree, exp.Star) or (
            isinstance(tree, exp.Column) and isinstance(tree.this, exp.Star)
        ):
            qualifier = tree.table if isinstance(tree, exp.Column) else None
            chosen = [c for c in schema if not qualifier or c.qualifier == qualifier]
            out.extend(replace(c, qualifier=None) for c in chosen)
            continue
        if is_aggregate(item.expr.tree):
            ctx.reporter.error(
                Code.E0212,
                f"aggregate '{item.expr.text}' in {keyword(node)}",
                item.expr.span,
                help="aggregates belong in AGGREGATE (after KEY BY for per-key results)",
            )
            ok = False
            continue
        type_text = ctx.checks.type(item.expr, scope, ctx.reporter)
        name = item_name(ctx, as_written)
        if type_text is None or name is None:
            ok = False
            continue
        if isinstance(node, ast.Extend) and any(c.name == name for c in schema):
            ctx.reporter.error(
                Code.E0213,
                f"EXTEND adds column '{name}', which already exists",
                (item.alias or item.expr).span,
                help="choose a new name, or replace it with SELECT",
            )
            ok = False
            continue
        qualifier = None
        if isinstance(item.expr.tree, exp.Column) and item.alias is None:
            matches = scope.lookup(name, item.expr.tree.table or None)
            qualifier = matches[0].qualifier if len(matches) == 1 else None
        out.append(Column(name, type_text, qualifier))
    if not ok:
        return None
    if not check_unique(ctx, out, node.span):
        return None
    if isinstance(node, ast.Select):
        return SelectStep(
            node=node, schema=tuple(out), hints=hints, span=node.span, watermark=watermark
        )
    return ExtendStep(
        node=node, schema=tuple(out), hints=hints, span=node.span, watermark=watermark
    )


def check_set(ctx: Context, node: ast.Set, step: StepInput) -> Step | None:
    """SET: each item replaces a column that exists, in its place, with its expression's
    value and type. Every expression reads the input row, not another item's result."""
    hints = step_hints(node, ctx.reporter)
    schema = step.schema
    scope = Scope(schema)
    names = {c.name for c in schema}
    seen: set[str] = set()
    replaced: dict[str, Column] = {}
    ok = True
    for item in node.items:
        name = item.column.value
        if name not in names:
            report_unknown_column(ctx, item.column, schema)
            ok = False
            continue
        if name in seen:
            ctx.reporter.error(
                Code.E0206,
                f"SET sets column '{name}' twice",
                item.column.span,
                help="set it once: every item reads the input row, so a second one cannot "
                "build on the first",
            )
            ok = False
            continue
        seen.add(name)
        tree = item.expr.tree
        if isinstance(tree, exp.Star) or (
            isinstance(tree, exp.Column) and isinstance(tree.this, exp.Star)
        ):
            ctx.reporter.error(
                Code.E0003,
                f"'{item.expr.text}' in SET: a column takes one value, not a list of columns",
                item.expr.span,
                help=f"name the column to read: SET {name} = {schema[0].name}",
            )
            ok = False
            continue
        if is_aggregate(tree):
            ctx.reporter.error(
                Code.E0212,
                f"aggregate '{item.expr.text}' in SET",
                item.expr.span,
                help="aggregates belong in AGGREGATE (after KEY BY for per-key results)",
            )
            ok = False
            continue
        type_text = ctx.checks.type(item.expr, scope, ctx.reporter)
        if type_text is None:
            ok = False
            continue
        replaced[name] = Column(name, type_text, None)
    if not ok:
        return None
    out = tuple(replaced.get(c.name, c) for c in schema)
    return SetStep(node=node, schema=out, hints=hints, span=node.span)


def check_drop(ctx: Context, node: ast.Drop, step: StepInput) -> Step | None:
    hints = step_hints(node, ctx.reporter)
    schema = step.schema
    names = {c.name for c in schema}
    ok = True
    for column in node.columns:
        if column.value not in names:
            report_unknown_column(ctx, column, schema)
            ok = False
    if not ok:
        return None
    dropped = {c.value for c in node.columns}
    remaining = tuple(c for c in schema if c.name not in dropped)
    if not remaining:
        ctx.reporter.error(Code.E0209, "DROP removes every column", node.keyword_span)
        return None
    return DropStep(node=node, schema=remaining, hints=hints, span=node.span)


def check_rename(ctx: Context, node: ast.Rename, step: StepInput) -> Step | None:
    hints = step_hints(node, ctx.reporter)
    schema = step.schema
    mapping: dict[str, str] = {}
    names = [c.name for c in schema]
    ok = True
    for item in node.items:
        if item.old.value not in names:
            report_unknown_column(ctx, item.old, schema)
            ok = False
            continue
        mapping[item.old.value] = item.new.value
    if not ok:
        return None
    out = tuple(replace(c, name=mapping.get(c.name, c.name)) for c in schema)
    if not check_unique(ctx, out, node.span):
        return None
    return RenameStep(node=node, schema=out, hints=hints, span=node.span)


def check_explode(ctx: Context, node: ast.Explode, step: StepInput) -> Step | None:
    hints = step_hints(node, ctx.reporter)
    schema = step.schema
    type_text = ctx.checks.type(node.expr, Scope(schema), ctx.reporter)
    if type_text is None:
        return None
    if node.alias is None:
        ctx.reporter.error(
            Code.E0211,
            "EXPLODE needs a name for the new column",
            node.expr.span,
            help=f"EXPLODE {node.expr.text} AS item",
        )
        return None
    if type_text.startswith("ARRAY<"):
        element = type_text[len("ARRAY<") : -1]
    elif type_text == UNKNOWN:
        element = UNKNOWN
    else:
        ctx.reporter.error(
            Code.E0214,
            f"EXPLODE needs an ARRAY, but '{node.expr.text}' is {type_text}",
            node.expr.span,
            help="split a string into an array with split(text, pattern)",
        )
        return None
    name = node.alias.value
    if any(c.name == name for c in schema):
        ctx.reporter.error(
            Code.E0213,
            f"EXPLODE adds column '{name}', which already exists",
            node.alias.span,
            help="choose a new name",
        )
        return None
    out = (*schema, Column(name, element, None))
    return ExplodeStep(node=node, schema=out, hints=hints, span=node.span)


def check_key_by(ctx: Context, node: ast.KeyBy, step: StepInput) -> Step | None:
    hints = _partition_hints(ctx, node)
    scope = Scope(step.schema)
    texts = []
    for key in node.keys:
        if ctx.checks.type(key, scope, ctx.reporter) is None:
            return None
        texts.append(_key_text(key))
    return KeyByStep(
        node=node,
        schema=step.schema,
        hints=hints,
        span=node.span,
        keys=tuple(texts),
        partition=Partitioner.HASH,
    )


def check_partition(ctx: Context, node: ast.Partition, step: StepInput) -> Step | None:
    hints = _partition_hints(ctx, node)
    return PartitionStep(
        node=node,
        schema=step.schema,
        hints=hints,
        span=node.span,
        partition=node.kind,
    )


def check_partition_by(ctx: Context, node: ast.PartitionBy, step: StepInput) -> Step | None:
    hints = _partition_hints(ctx, node)
    if ctx.checks.type(node.expr, Scope(step.schema), ctx.reporter) is None:
        return None
    return PartitionByStep(
        node=node,
        schema=step.schema,
        hints=hints,
        span=node.span,
        keys=(_key_text(node.expr),),
        partition=Partitioner.CUSTOM,
    )


def check_route(ctx: Context, node: ast.Route, step: StepInput) -> Step | None:
    """Each branch adds a side output to ``step.side_outputs``, named once per query."""
    hints = step_hints(node, ctx.reporter)
    ok = True
    scope = Scope(step.schema)
    for branch in node.branches:
        if not check_boolean(ctx, branch.condition, scope, "ROUTE"):
            ok = False
            continue
        name = branch.name.value
        if any(o.name == name for o in step.side_outputs):
            ctx.reporter.error(
                Code.E0223,
                f"side output '{name}' is defined twice",
                branch.name.span,
                help="give each ROUTE branch its own name",
            )
            ok = False
            continue
        step.side_outputs.append(
            SideOutput(name=name, step_index=step.index, schema=step.schema, span=branch.name.span)
        )
    if not ok:
        return None
    return RouteStep(node=node, schema=step.schema, hints=hints, span=node.span)


def _partition_hints(ctx: Context, node: ast.KeyBy | ast.Partition | ast.PartitionBy) -> Hints:
    """A partition step takes no hints (E0306): it has no operator of its own."""
    for option in node.hints:
        ctx.reporter.error(
            Code.E0306,
            f"hints are not allowed on a partition step ({keyword(node)}): '{option.key}'",
            option.key_span,
            help="a partition step only chooses the exchange; put the hint on the step after it",
        )
    return Hints()


def _key_text(expr: ast.SqlExpr) -> str:
    if isinstance(expr.tree, exp.Column):
        return expr.tree.name
    return str(expr.tree.sql("spark"))
