"""The checker of the OVER step (a SQL SELECT's OVER aggregates, Flink's OverAggregate):
its columns, and the calls its processor computes exactly as Spark would (docs/language.md,
"OVER windows")."""

from __future__ import annotations

from sqlglot import exp

from flowc import ast
from flowc.analyze.context import Context
from flowc.analyze.step_common import StepInput, check_unique, report_unknown_column
from flowc.errorcodes import Code
from flowc.program import Column, Hints, OverStep, Step
from flowc.sql.spark_typing import INTEGER_TYPES
from flowc.sql.sqltypes import Scope

#: The argument types each call takes: those whose result the processor computes in Python
#: as Spark computes it (no DECIMAL, no interval; MIN and MAX of types Python orders alike).
_SUMMED = frozenset({*INTEGER_TYPES, "FLOAT", "DOUBLE"})
_ORDERED = frozenset({*INTEGER_TYPES, "STRING", "DATE", "TIMESTAMP", "TIMESTAMP_NTZ"})
#: What each call gives, by its result type: Spark's types (BIGINT sums and counts, a
#: DOUBLE average), never Flink's average of integers, an integer.
_RESULTS = {"sum": frozenset({"BIGINT", "DOUBLE"}), "avg": frozenset({"DOUBLE"})}


def check_over(ctx: Context, node: ast.Over, step: StepInput) -> Step | None:
    schema = step.schema
    names = {c.name.lower(): c for c in schema}
    ok = True
    for name in (*node.partition, node.order):
        if name.value.lower() not in names:
            report_unknown_column(ctx, name, schema)
            ok = False
    if not ok:
        return None
    order = names[node.order.value.lower()]
    if not order.type.startswith("TIMESTAMP"):
        ctx.reporter.error(
            Code.E0751,
            f"an OVER window is ordered by a time column, and '{order.name}' is {order.type}",
            node.order.span,
            help="ORDER BY the stream's event-time column (the one with the WATERMARK)",
        )
        return None
    if not node.partition:
        # Flink runs it as one subtask behind a GLOBAL exchange, with the steps after it
        # chained at parallelism 1; flowc's graph for it is not that yet.
        ctx.reporter.error(
            Code.E0753,
            "an OVER window without PARTITION BY is not run by flowc yet",
            node.order.span,
            help="add PARTITION BY the columns whose rows each window reads (Flink runs "
            "an unpartitioned OVER window in one subtask)",
        )
        return None
    scope = Scope(schema)
    out = list(schema)
    for item in node.items:
        call = item.expr.tree
        result = ctx.checks.type(item.expr, scope, ctx.reporter)
        if result is None:
            ok = False
            continue
        assert item.alias is not None
        function = call.sql_name().lower() if isinstance(call, exp.Func) else ""
        arg = call.this if isinstance(call, exp.Func) else None
        arg_type = (
            names[arg.name.lower()].type
            if isinstance(arg, exp.Column) and arg.name.lower() in names
            else None
        )
        allowed = (
            function == "count"
            or (function in ("sum", "avg") and arg_type in _SUMMED)
            or (function in ("min", "max") and arg_type in _ORDERED)
        )
        if not allowed or result not in _RESULTS.get(function, frozenset({result})):
            ctx.reporter.error(
                Code.E0753,
                f"'{item.expr.text}' of {arg_type or 'this'} in an OVER window is not one "
                "flowc computes on Spark yet"
                + (" (Flink's AVG of an integer is an integer)" if function == "avg" else ""),
                item.span,
                help="COUNT, SUM and AVG of integers or doubles, MIN and MAX of integers, "
                "strings, dates or timestamps run; aggregate per key over a time WINDOW "
                "for the rest",
            )
            ok = False
            continue
        out.append(Column(item.alias.value, result))
    if not ok or not check_unique(ctx, out, node.span):
        return None
    keys = tuple(names[p.value.lower()].name for p in node.partition)
    return OverStep(node=node, schema=tuple(out), hints=Hints(), span=node.span, keys=keys)
