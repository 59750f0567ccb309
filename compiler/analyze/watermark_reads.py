"""Flink's CURRENT_WATERMARK in a WHERE or a SELECT (the Flink dialect): which column's
watermark a step reads, whether a WHERE keeps only rows ahead of it, and the expressions
typed with each call read as :data:`~flowc.program.WATERMARK_COLUMN`, the column a stateful
processor adds on Spark (docs/language.md, "CURRENT_WATERMARK on Spark").

Flink's rule, checked here: the argument is a time attribute of the input (a TIMESTAMP
column); the streaming rules check that it carries a watermark where the WHERE reads it.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from flowc import ast
from flowc.analyze.context import Context
from flowc.errorcodes import Code
from flowc.program import BUCKET_COLUMN, WATERMARK_COLUMN, Column, WatermarkRead
from flowc.spans import Span
from flowc.sql.flink_functions import watermark_calls
from flowc.sql.functions import call_span
from flowc.sql.sql_parsing import copy_tree
from flowc.sql.sqltypes import TIMESTAMP, Scope

#: Spark's micro-batch watermark is in milliseconds of the epoch, which a TIMESTAMP
#: (Flink's TIMESTAMP(3) and TIMESTAMP_LTZ(3)) holds; a TIMESTAMP_NTZ has no instant.
_HELP_ARGUMENT = (
    "pass the time column the source's WATERMARK is declared on, as it is: CURRENT_WATERMARK(ts)"
)


def read_watermark(
    ctx: Context, exprs: Sequence[ast.SqlExpr], scope: Scope, *, condition: bool
) -> tuple[list[ast.SqlExpr], Scope, WatermarkRead | None] | None:
    """``exprs`` (a WHERE's condition, or a SELECT's items) with their CURRENT_WATERMARK
    calls read as the watermark column, the scope that has it, and what they read;
    ``exprs`` themselves where none calls it; None (each error reported at its call) where
    an argument is not one TIMESTAMP column. Only a ``condition`` can keep just the rows
    ahead of the watermark."""
    found = [
        (expr, calls)
        for expr in exprs
        if "(" in expr.text and (calls := watermark_calls(expr.tree))
    ]
    if not found:
        return list(exprs), scope, None
    taken = [name for name in (WATERMARK_COLUMN, BUCKET_COLUMN) if scope.lookup(name, None)]
    if taken:
        expr, calls = found[0]
        ctx.reporter.error(
            Code.E0610,
            f"CURRENT_WATERMARK with a column named '{taken[0]}' in the input, a name "
            "flowc's watermark reader gives a column of its own",
            call_span(expr, calls[0], ctx.checks.positions),
            help=f"rename the column '{taken[0]}' (RENAME, or AS in a SELECT) before this step",
        )
        return None
    columns: set[str] = set()
    places: list[Span] = []
    for expr, calls in found:
        for call in calls:
            column = _argument(ctx, expr, call, scope)
            if column is None:
                return None
            columns.add(column.name)
            places.append(call_span(expr, call, ctx.checks.positions))
    if len(columns) > 1:
        expr, calls = found[-1]
        ctx.reporter.error(
            Code.E0610,
            "CURRENT_WATERMARK of two columns in one step: "
            + " and ".join(f"'{c}'" for c in sorted(columns)),
            call_span(expr, calls[-1], ctx.checks.positions),
            help="a stream has one watermark: read it through one time column",
        )
        return None
    (name,) = columns
    read = [_read_as_column(expr) for expr in exprs]
    on_time = _on_time(read[0].tree, name) if condition else None
    with_mark = Scope((*scope.schema, Column(WATERMARK_COLUMN, TIMESTAMP)))
    return read, with_mark, WatermarkRead(column=name, on_time=on_time, calls=tuple(places))


def _read_as_column(expr: ast.SqlExpr) -> ast.SqlExpr:
    """``expr`` with each CURRENT_WATERMARK call the watermark column (a copy where any)."""
    if "(" not in expr.text or not watermark_calls(expr.tree):
        return expr
    tree = copy_tree(expr.tree)
    for call in watermark_calls(tree):
        replacement = exp.column(WATERMARK_COLUMN, quoted=True)
        if call is tree:
            tree = replacement
        else:
            call.replace(replacement)
    return ast.SqlExpr(text=expr.text, tree=tree, span=expr.span)


def _argument(
    ctx: Context, condition: ast.SqlExpr, call: exp.Anonymous, scope: Scope
) -> Column | None:
    """The input column a call reads; None, reported at the call, for anything else."""
    span = call_span(condition, call, ctx.checks.positions)
    arguments = list(call.expressions)
    argument = arguments[0] if len(arguments) == 1 else None
    if not isinstance(argument, exp.Column) or isinstance(argument.this, exp.Star):
        ctx.reporter.error(
            Code.E0610,
            f"CURRENT_WATERMARK takes a time column, not '{argument.sql()}'"
            if argument is not None
            else f"CURRENT_WATERMARK takes one time column, not {len(arguments)} arguments",
            span,
            help=_HELP_ARGUMENT,
        )
        return None
    found = scope.lookup(argument.name, argument.table or None)
    if len(found) != 1:
        ctx.reporter.error(
            Code.E0201 if not found else Code.E0610,
            f"unknown column '{argument.sql()}'"
            if not found
            else f"'{argument.sql()}' names two columns of the input",
            span,
            help=_HELP_ARGUMENT,
        )
        return None
    column = found[0]
    if column.type != TIMESTAMP:
        ctx.reporter.error(
            Code.E0610,
            f"CURRENT_WATERMARK of '{column.name}', which is {column.type}, not a time "
            "attribute (TIMESTAMP)",
            span,
            help=_HELP_ARGUMENT,
        )
        return None
    return column


def _on_time(tree: exp.Expr, column: str) -> str | None:
    """Which conjunct of the condition keeps only rows ahead of the watermark, if any:
    ``column > W`` (``'ahead'``) or ``W IS NULL OR column > W`` (``'ahead_or_none'``)."""
    found: str | None = None
    for conjunct in _conjuncts(tree):
        if _ahead(conjunct, column):
            return "ahead"
        if isinstance(conjunct, exp.Or):
            sides = [_bare(conjunct.this), _bare(conjunct.expression)]
            if any(_none(s) for s in sides) and any(_ahead(s, column) for s in sides):
                found = "ahead_or_none"
    return found


def _conjuncts(tree: exp.Expr) -> list[exp.Expr]:
    tree = _bare(tree)
    if isinstance(tree, exp.And):
        return [*_conjuncts(tree.this), *_conjuncts(tree.expression)]
    return [tree]


def _bare(tree: exp.Expr) -> exp.Expr:
    while isinstance(tree, exp.Paren):
        tree = tree.this
    return tree


def _is_mark(tree: exp.Expr) -> bool:
    tree = _bare(tree)
    return isinstance(tree, exp.Column) and tree.name == WATERMARK_COLUMN


def _is_column(tree: exp.Expr, column: str) -> bool:
    tree = _bare(tree)
    return isinstance(tree, exp.Column) and tree.name == column


def _ahead(tree: exp.Expr, column: str) -> bool:
    """``column > W`` or ``W < column``."""
    tree = _bare(tree)
    if isinstance(tree, exp.GT):
        return _is_column(tree.this, column) and _is_mark(tree.expression)
    if isinstance(tree, exp.LT):
        return _is_mark(tree.this) and _is_column(tree.expression, column)
    return False


def _none(tree: exp.Expr) -> bool:
    """``W IS NULL``."""
    tree = _bare(tree)
    return (
        isinstance(tree, exp.Is) and _is_mark(tree.this) and isinstance(tree.expression, exp.Null)
    )
