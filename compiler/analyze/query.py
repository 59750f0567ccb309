"""A query, step by step: the table of step checkers (one per AST step class) and the
loop that runs them, carrying the schema and the keys in force from step to step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar, cast

from sqlglot import exp

from flowc import ast
from flowc.analyze.context import Context
from flowc.analyze.grouping_steps import check_aggregate, check_deduplicate, check_window
from flowc.analyze.input_steps import check_join, check_union, flink_union_types
from flowc.analyze.match_steps import check_match
from flowc.analyze.over_steps import check_over
from flowc.analyze.rank_steps import check_top
from flowc.analyze.references import (
    is_table,
    query_references,
    refuse_table_as_stream,
    resolve_relation,
)
from flowc.analyze.row_steps import (
    check_drop,
    check_explode,
    check_key_by,
    check_partition,
    check_partition_by,
    check_rename,
    check_route,
    check_select,
    check_set,
    check_where,
)
from flowc.analyze.step_common import StepChecker, StepInput, item_name
from flowc.errorcodes import Code
from flowc.program import Schema, SideOutput, Step, Stream
from flowc.sql.flink_dialect import FLINK
from flowc.sql.lower_sql import check_flink_windows, lower_extend_over, lower_sql_query

_Node = TypeVar("_Node", bound=ast.StepBase)


def _entry(
    step_class: type[_Node], checker: Callable[[Context, _Node, StepInput], Step | None]
) -> tuple[type[ast.StepBase], StepChecker]:
    """A table row. The cast is safe: the table is looked up by ``type(node)``, so a checker
    only ever gets nodes of its own class."""
    return step_class, cast(StepChecker, checker)


STEP_CHECKERS: dict[type[ast.StepBase], StepChecker] = dict(
    [
        _entry(ast.Where, check_where),
        _entry(ast.Select, check_select),
        _entry(ast.Extend, check_select),
        _entry(ast.Set, check_set),
        _entry(ast.Drop, check_drop),
        _entry(ast.Rename, check_rename),
        _entry(ast.Explode, check_explode),
        _entry(ast.KeyBy, check_key_by),
        _entry(ast.Partition, check_partition),
        _entry(ast.PartitionBy, check_partition_by),
        _entry(ast.Window, check_window),
        _entry(ast.Aggregate, check_aggregate),
        _entry(ast.Deduplicate, check_deduplicate),
        _entry(ast.Over, check_over),
        _entry(ast.MatchRecognize, check_match),
        _entry(ast.Top, check_top),
        _entry(ast.Join, check_join),
        _entry(ast.UnionAll, check_union),
        _entry(ast.Route, check_route),
    ]
)


def check_query(
    ctx: Context, query: ast.Query, side_outputs: list[SideOutput], view: str | None
) -> Stream | None:
    """The checked stream, or None; ``side_outputs`` receives the query's ROUTE outputs."""
    flink = isinstance(query, ast.SqlQuery) and query.dialect == FLINK
    if isinstance(query, ast.SqlQuery):
        lowered = (
            lower_sql_query(query, ctx.reporter, ctx.settings.execution_mode == "batch")
            if check_flink_windows(query, ctx.reporter)  # Flink's TUMBLE(...): E0602
            and ctx.checks.sql_query(query, ctx.reporter)  # unknown functions first
            else None
        )
        if lowered is None:
            ctx.used.update(query_references(query))
            return None
        query = lowered
    if is_table(ctx, query.source):
        refuse_table_as_stream(ctx, query.source, "read as a stream (FROM)")
        return None
    resolved = resolve_relation(ctx, query.source, view)
    if resolved is None:
        return None
    origin, schema = resolved
    steps: list[Step] = []
    keys: tuple[str, ...] | None = None
    ast_steps = list(query.steps)
    ok = True
    widened: set[int] = set()
    i = 0
    while i < len(ast_steps):
        node = ast_steps[i]
        following = ast_steps[i + 1] if i + 1 < len(ast_steps) else None
        if isinstance(node, ast.Window) and not isinstance(following, ast.Aggregate | ast.Top):
            ctx.reporter.error(
                Code.E0208,
                "WINDOW must be followed by AGGREGATE or TOP",
                node.keyword_span,
                help="add |> AGGREGATE count(*) AS n (or other aggregates) after it, or "
                "|> TOP 3 BY x DESC for the first rows of each window",
            )
            return None
        if flink and isinstance(node, ast.UnionAll) and id(node) not in widened:
            widened.add(id(node))
            cast = _union_casts(ctx, node, schema)
            if cast is not None:  # checked next, then the UNION ALL over the widened columns
                ast_steps[i:i] = [cast]
                continue
        if isinstance(node, ast.Extend) and any(
            i.expr.tree.find(exp.Window) for i in node.items
        ):  # OVER calls: the OVER step of the SQL form
            names = [item_name(ctx, i) for i in node.items]
            batch = ctx.settings.execution_mode == "batch"
            over = lower_extend_over(node, ctx.reporter, batch) if None not in names else None
            if over is None:
                ok = False
                break
            ast_steps[i] = over
            continue
        step = StepInput(schema, keys, side_outputs, len(steps), view, following)
        if flink and isinstance(node, ast.UnionAll):
            result = check_union(ctx, node, step, flink=True)
        else:
            result = STEP_CHECKERS[type(node)](ctx, node, step)
        i += 2 if isinstance(node, ast.Window) else 1  # a WINDOW's AGGREGATE is checked with it
        if result is None:
            ok = False
            if isinstance(node, ast.Over):  # the SELECT after it reads the columns it adds
                break
            continue
        steps.append(result)
        schema = result.schema
        keys = result.keys_after(keys)
    if not ok:
        return None
    return Stream(origin=origin, steps=tuple(steps), schema=schema, keys=keys, span=query.span)


def _union_casts(ctx: Context, node: ast.UnionAll, schema: Schema) -> ast.Select | None:
    """A Flink-dialect UNION ALL whose inputs' column types differ and widen (INT with
    BIGINT): the SELECT casting the stream's own columns to Flink's common types (Flink's
    Calc below its Union); the other inputs Spark's union widens to the same types. None
    when nothing is cast."""
    types = flink_union_types(ctx, node, schema)
    if types is None or all(c.type == t for c, t in zip(schema, types, strict=True)):
        return None
    items = []
    for column, type_text in zip(schema, types, strict=True):
        name = exp.to_identifier(column.name, quoted=True)
        tree: exp.Expr = exp.column(name)
        if column.type != type_text:
            tree = exp.cast(tree, exp.DataType.build(type_text, dialect="spark"))
        expr = ast.SqlExpr(text=tree.sql("spark"), tree=tree, span=node.span)
        alias = ast.Name(value=column.name, quoted=True, span=node.span)
        items.append(ast.SelectItem(expr=expr, alias=alias, span=node.span))
    return ast.Select(
        items=tuple(items),
        keyword_span=node.keyword_span,
        hints=(),
        hints_span=None,
        span=node.span,
    )
