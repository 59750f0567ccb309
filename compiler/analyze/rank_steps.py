"""The checker of TOP n BY ... [PER ...] [AS rank], alone or after a WINDOW: Flink's Top-N
(ROW_NUMBER() OVER (PARTITION BY ... ORDER BY ...) <= n)."""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from flowc import ast
from flowc.analyze.context import Context
from flowc.analyze.settings import step_hints
from flowc.analyze.step_common import StepInput, check_unique
from flowc.errorcodes import Code
from flowc.program import Column, Step, TopStep, WindowTopStep
from flowc.sql.spark_sql import reversible
from flowc.sql.sqltypes import TIMESTAMP, Scope

#: The largest n: each group keeps up to n rows in state (docs/limits.md).
MAX_TOP_ROWS = 10_000


def check_top(ctx: Context, node: ast.Top, step: StepInput) -> Step | None:
    return top_step(ctx, node, step, None)


def top_step(
    ctx: Context, node: ast.Top, step: StepInput, window: ast.Window | None
) -> Step | None:
    """The first ``n`` rows of each group by the BY order; a group is the PER columns (or
    the keys in force, or every row), and with a WINDOW (already checked) also the window."""
    hints = step_hints(node, ctx.reporter)
    if not 1 <= node.count <= MAX_TOP_ROWS:
        ctx.reporter.error(
            Code.E0270,
            f"TOP takes a whole number of rows from 1 to {MAX_TOP_ROWS}",
            node.count_span,
            help="for example TOP 3 BY price DESC PER auction",
        )
        return None
    scope = Scope(step.schema)
    primary = node.order[0].descending if node.order else True
    for item in node.order:
        type_text = ctx.checks.type(item.expr, scope, ctx.reporter)
        if type_text is None:
            return None
        if item.descending != primary and not reversible(type_text):
            ctx.reporter.error(
                Code.E0271,
                f"TOP orders '{item.expr.text}', a {type_text}, against the first BY "
                "expression's direction, which flowc writes only for integers, DECIMAL, "
                "DATE and TIMESTAMP",
                item.span,
                help="order this expression in the first one's direction, or order by a "
                "number computed from it",
            )
            return None
        if type_text.startswith("MAP"):
            ctx.reporter.error(
                Code.E0271,
                f"TOP cannot order rows by '{item.expr.text}', a {type_text}",
                item.expr.span,
                help="order by a column of a type with an order (numbers, strings, times)",
            )
            return None

    keys: list[str] = []
    for column in node.per:
        if not isinstance(column.tree, exp.Column):
            ctx.reporter.error(
                Code.E0272,
                "PER takes column names",
                column.span,
                help="add the expression as a column with EXTEND first",
            )
            return None
        if ctx.checks.type(column, scope, ctx.reporter) is None:
            return None
        keys.append(column.tree.name)
    if not node.per and step.keys:
        keys = list(step.keys)
    out = [replace(c, qualifier=None) for c in step.schema]
    if window is not None:  # its arguments checked by grouping_steps.check_window
        out += [Column("window_start", TIMESTAMP), Column("window_end", TIMESTAMP)]
    if node.rank is not None:
        out.append(Column(node.rank.value, "BIGINT"))
    if not check_unique(ctx, out, node.span):
        return None
    if window is not None:
        return WindowTopStep(
            node=node,
            schema=tuple(out),
            hints=hints,
            span=window.span.cover(node.span),
            keys=tuple(keys),
            window=window,
        )
    return TopStep(node=node, schema=tuple(out), hints=hints, span=node.span, keys=tuple(keys))
