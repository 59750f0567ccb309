"""Checkers of the steps that group records and keep state for each group: AGGREGATE,
WINDOW ... AGGREGATE (a window's AGGREGATE is checked with it) and DEDUPLICATE.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from sqlglot import exp

from flowc import ast
from flowc.analyze.context import Context
from flowc.analyze.rank_steps import top_step
from flowc.analyze.settings import step_hints
from flowc.analyze.step_common import StepInput, check_unique, is_interval, item_name
from flowc.errorcodes import Code
from flowc.program import (
    AggregateStep,
    Column,
    DeduplicateStep,
    Hints,
    Schema,
    Step,
    WindowAggregateStep,
)
from flowc.sql.functions import has_aggregate, inside_aggregate
from flowc.sql.spark_sql import interval_millis
from flowc.sql.sqltypes import TIMESTAMP, UNKNOWN, Scope, node_span
from flowc.vocabulary import WindowKind

_WINDOW_ARGUMENTS = {
    WindowKind.TUMBLE: 2,
    WindowKind.HOP: 3,
    WindowKind.SESSION: 2,
    WindowKind.CUMULATE: 3,
}
_WINDOW_EXAMPLES = {
    WindowKind.TUMBLE: "TUMBLE(ts, INTERVAL 1 MINUTE)",
    WindowKind.HOP: "HOP(ts, INTERVAL 1 MINUTE, INTERVAL 10 SECONDS)",
    WindowKind.SESSION: "SESSION(ts, INTERVAL 5 MINUTES)",
    WindowKind.CUMULATE: "CUMULATE(ts, INTERVAL 1 DAY, INTERVAL 1 HOUR)",
}


def check_aggregate(ctx: Context, node: ast.Aggregate, step: StepInput) -> Step | None:
    return _aggregate(ctx, node, step, None)


def check_window(ctx: Context, node: ast.Window, step: StepInput) -> Step | None:
    """A WINDOW and the AGGREGATE or TOP that follows it (the query checks that one does)."""
    following = step.following
    if isinstance(following, ast.Top):
        if not check_window_call(ctx, node, step.schema):
            return None
        if node.kind == WindowKind.CUMULATE:
            ctx.reporter.error(
                Code.E0736,
                "TOP over a CUMULATE window has no Spark form in flowc",
                following.keyword_span,
                help="AGGREGATE the cumulating windows, or rank the rows of a TUMBLE window",
            )
            return None
        return top_step(ctx, following, step, node)
    assert isinstance(following, ast.Aggregate)
    return _aggregate(ctx, following, step, node)


def check_deduplicate(ctx: Context, node: ast.Deduplicate, step: StepInput) -> Step | None:
    hints = step_hints(node, ctx.reporter)
    keys: list[str] = []
    for column in node.columns:
        if not isinstance(column.tree, exp.Column):
            ctx.reporter.error(
                Code.E0218,
                "DEDUPLICATE ON takes column names",
                column.span,
                help="add the expression as a column with EXTEND first",
            )
            return None
        if ctx.checks.type(column, Scope(step.schema), ctx.reporter) is None:
            return None
        keys.append(column.tree.name)
    if node.within is not None and not is_interval(node.within.tree):
        ctx.reporter.error(
            Code.E0217,
            f"'{node.within.text}' is not an interval",
            node.within.span,
            help="for example WITHIN INTERVAL 1 HOUR",
        )
        return None
    return DeduplicateStep(
        node=node,
        schema=step.schema,
        hints=hints,
        span=node.span,
        keys=tuple(keys) if keys else tuple(c.name for c in step.schema),
    )


def _aggregate(
    ctx: Context, node: ast.Aggregate, step: StepInput, window: ast.Window | None
) -> Step | None:
    schema, keys = step.schema, step.keys
    hints = _aggregate_hints(ctx, node, window)
    if hints is None:
        return None
    scope = Scope(schema)
    out: list[Column] = []
    ok = True
    for key in keys or ():
        matches = [c for c in schema if c.name == key]
        if len(matches) != 1:
            ctx.reporter.error(
                Code.E0215,
                f"AGGREGATE outputs its keys as columns, but the key '{key}' is an expression",
                node.keyword_span,
                help="name the key first: |> EXTEND <expr> AS k |> KEY BY k",
            )
            return None
        out.append(replace(matches[0], qualifier=None))
    if window is not None:
        if not check_window_call(ctx, window, schema):
            return None
        out.append(Column("window_start", TIMESTAMP))
        out.append(Column("window_end", TIMESTAMP))
    found = _window_time(ctx, node, schema, keys or (), window)
    if found is None:
        return None
    window_time, node = found
    if window_time is not None:
        out.append(Column(window_time, TIMESTAMP))
    for item in node.items:
        type_text = ctx.checks.type(item.expr, scope, ctx.reporter)
        name = item_name(ctx, item)
        if type_text is None or name is None:
            ok = False
            continue
        if not _aggregated(ctx, item.expr, keys or ()):
            ok = False
            continue
        out.append(Column(name, type_text))
    if not ok or not check_unique(ctx, out, node.span):
        return None
    if window is not None:
        return WindowAggregateStep(
            node=node,
            schema=tuple(out),
            hints=hints,
            span=window.span.cover(node.span),
            keys=keys or (),
            window=window,
            window_time=window_time,
        )
    return AggregateStep(node=node, schema=tuple(out), hints=hints, span=node.span, keys=keys or ())


WINDOW_TIME = "window_time"


def _window_time(
    ctx: Context,
    node: ast.Aggregate,
    schema: Schema,
    keys: Sequence[str],
    window: ast.Window | None,
) -> tuple[str | None, ast.Aggregate] | None:
    """The AGGREGATE's item ``window_time`` (Flink's window_time, asked for by name): its
    output name and the AGGREGATE without it; None after an error. A bare input column
    is no aggregate, so in a windowed AGGREGATE the name is the window's time even over an
    input column ``window_time`` (a cascade's); a key of that name, or an input column
    without WINDOW, keeps its meaning."""
    asked = [
        item
        for item in node.items
        if isinstance(item.expr.tree, exp.Column)
        and not item.expr.tree.table
        and item.expr.tree.name.lower() == WINDOW_TIME
        and not any(k.lower() == WINDOW_TIME for k in keys)
        and (window is not None or not any(c.name.lower() == WINDOW_TIME for c in schema))
    ]
    if not asked:
        return None, node
    if window is None:
        ctx.reporter.error(
            Code.E0730,
            "window_time is the time of a window: an AGGREGATE without WINDOW has none",
            asked[0].expr.span,
            help="group into windows first: |> WINDOW TUMBLE(ts, INTERVAL 1 MINUTE) "
            "|> AGGREGATE ..., window_time",
        )
        return None
    if len(asked) > 1:
        ctx.reporter.error(
            Code.E0731,
            "window_time is asked for twice",
            asked[1].expr.span,
            help="ask once; rename it later with |> RENAME or |> SELECT window_time AS t",
        )
        return None
    (item,) = asked
    rest = tuple(i for i in node.items if i is not item)
    if not rest:
        ctx.reporter.error(
            Code.E0731,
            "an AGGREGATE of window_time alone computes nothing",
            item.expr.span,
            help="add an aggregate, for example |> AGGREGATE count(*) AS n, window_time",
        )
        return None
    name = item.alias.value if item.alias is not None else WINDOW_TIME
    return name, replace(node, items=rest)


def _aggregate_hints(ctx: Context, node: ast.Aggregate, window: ast.Window | None) -> Hints | None:
    """AGGREGATE's hints, with its WINDOW's; one given on both is E0303 (None)."""
    hints = step_hints(node, ctx.reporter)
    if window is None or not window.hints:
        return hints
    window_hints = step_hints(window, ctx.reporter)
    for key, span in window_hints.spans.items():
        if key in hints.spans:
            ctx.reporter.error(
                Code.E0303,
                f"hint '{key}' is given on both WINDOW and AGGREGATE",
                span,
                help="give it once, on AGGREGATE",
            )
            return None
    return Hints(
        **{
            f: getattr(hints, f) if f in hints.spans else getattr(window_hints, f)
            for f in ("name", "uid", "parallelism", "max_parallelism", "slot_sharing_group")
        },
        chaining=hints.chaining if "chaining" in hints.spans else window_hints.chaining,
        spans={**window_hints.spans, **hints.spans},
    )


def _aggregated(ctx: Context, expr: ast.SqlExpr, keys: Sequence[str]) -> bool:
    """Every column an AGGREGATE item reads must sit inside an aggregate function."""
    if not has_aggregate(expr.tree):
        ctx.reporter.error(
            Code.E0216,
            f"'{expr.text}' is not an aggregate",
            expr.span,
            help="use an aggregate function such as count(*), sum(x), max(x); "
            "key columns are output already",
        )
        return False
    for column in expr.tree.find_all(exp.Column):
        if not inside_aggregate(column) and column.name not in keys:
            ctx.reporter.error(
                Code.E0216,
                f"column '{column.sql()}' is used outside an aggregate function",
                node_span(expr, column),
                help="wrap it in an aggregate (max, first, ...) or add it to KEY BY",
            )
            return False
    return True


def check_window_call(ctx: Context, window: ast.Window, schema: Schema) -> bool:
    """TUMBLE, HOP, SESSION or CUMULATE: the argument count, a TIMESTAMP column, then
    intervals (CUMULATE's size a whole multiple of its step)."""
    expected = _WINDOW_ARGUMENTS[WindowKind(window.kind)]
    example = _WINDOW_EXAMPLES[WindowKind(window.kind)]
    if len(window.args) != expected:
        ctx.reporter.error(
            Code.E0217,
            f"{window.kind} takes {expected} arguments, found {len(window.args)}",
            window.span,
            help=f"for example {example}",
        )
        return False
    time_arg = window.args[0]
    if not isinstance(time_arg.tree, exp.Column):
        ctx.reporter.error(
            Code.E0217,
            f"the first argument of {window.kind} must be a TIMESTAMP column",
            time_arg.span,
            help=f"for example {example}",
        )
        return False
    type_text = ctx.checks.type(time_arg, Scope(schema), ctx.reporter)
    if type_text is None:
        return False
    if type_text not in (TIMESTAMP, UNKNOWN):
        ctx.reporter.error(
            Code.E0217,
            f"window time column '{time_arg.text}' is {type_text}, not TIMESTAMP",
            time_arg.span,
        )
        return False
    for arg in window.args[1:]:
        if not is_interval(arg.tree):
            ctx.reporter.error(
                Code.E0217,
                f"'{arg.text}' is not an interval",
                arg.span,
                help="write sizes as INTERVAL 10 SECONDS or '10 seconds'",
            )
            return False
    if window.kind == WindowKind.CUMULATE:
        return _check_cumulate(ctx, window)
    return True


def _check_cumulate(ctx: Context, window: ast.Window) -> bool:
    """CUMULATE(ts, size, step): windows [start, start + k * step) for k = 1 .. size / step,
    so size is a whole multiple of step, as Flink requires."""
    size, step = (interval_millis(a) for a in window.args[1:])
    for arg, millis in zip(window.args[1:], (size, step), strict=True):
        if not millis:
            ctx.reporter.error(
                Code.E0737,
                f"'{arg.text}' is not a positive whole number of milliseconds, seconds, "
                "minutes, hours or days",
                arg.span,
                help="write CUMULATE's sizes as INTERVAL 1 HOUR, INTERVAL 10 MINUTES, ...",
            )
            return False
    assert size is not None and step is not None
    if size % step:
        ctx.reporter.error(
            Code.E0737,
            f"CUMULATE's size {window.args[1].text} is not a whole multiple of its step "
            f"{window.args[2].text}",
            window.span,
            help=f"for example {_WINDOW_EXAMPLES[WindowKind.CUMULATE]}: a window every "
            "hour, each from the start of the day",
        )
        return False
    return True
