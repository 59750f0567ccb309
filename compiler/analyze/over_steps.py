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
from flowc.sql.flink_dialect import FLINK
from flowc.sql.spark_patterns import is_flink_aggregate
from flowc.sql.spark_typing import INTEGER_TYPES
from flowc.sql.sqltypes import Scope

#: The argument types each call takes: those whose result the processor computes in Python
#: as Spark computes it (no DECIMAL, no interval; MIN and MAX of types Python orders alike).
_SUMMED = frozenset({*INTEGER_TYPES, "FLOAT", "DOUBLE"})
_ORDERED = frozenset({*INTEGER_TYPES, "STRING", "DATE", "TIMESTAMP", "TIMESTAMP_NTZ"})
#: What each call gives, by its result type: Spark's types (BIGINT sums and counts, a
#: DOUBLE average); Flink's average of an INT or BIGINT is allowed apart (:func:`flink_avg`).
_RESULTS = {"sum": frozenset({"BIGINT", "DOUBLE"}), "avg": frozenset({"DOUBLE"})}
#: The integer types whose Flink AVG the processor and the batch form compute: Flink sums
#: them in their own type (wrapping) and truncates the quotient (asked of Flink 2.3);
#: TINYINT and SMALLINT were not asked, and stay E0753.
_FLINK_AVG_TYPES = frozenset({"INT", "BIGINT"})


def flink_avg(call: exp.Expr, result: str | None) -> bool:
    """Whether ``call`` (typed ``result``) is the Flink dialect's AVG of an INT or BIGINT,
    an integer of its argument's type: the OVER call ``flink_avg`` of the runtime."""
    return isinstance(call, exp.Avg) and is_flink_aggregate(call) and result in _FLINK_AVG_TYPES


#: A LAG default the processor cannot hold as a value of the argument's type.
_NO_DEFAULT = object()


def _lag_default(call: exp.Expr) -> object:
    """A LAG call's default as a Python value (None without one), or ``_NO_DEFAULT`` for
    one that is not a number, a string or NULL."""
    default = call.args.get("default")
    if default is None or isinstance(default, exp.Null):
        return None
    negative = isinstance(default, exp.Neg)
    literal = default.this if negative else default
    if not isinstance(literal, exp.Literal):
        return _NO_DEFAULT
    if literal.is_string:
        return _NO_DEFAULT if negative else str(literal.this)
    text = str(literal.this)
    value: float = int(text) if text.isdigit() else float(text)
    return -value if negative else value


def flink_lag_default_refused(call: exp.Lag | exp.Lead, kind: str) -> bool:
    """Whether Flink 2.3 refuses the LAG's default for a column of type ``kind`` ("Please
    explicitly cast default value ...", asked of it): its literal's type must be the
    column's (an integer literal is INT, or BIGINT past INT's range; 1.5 is a DECIMAL), and
    a NULL default is illegal."""
    default = call.args.get("default")
    if default is None:
        return False
    value = _lag_default(call)
    if value is None:
        return True  # Flink: "Illegal use of 'NULL'"
    if isinstance(value, str):
        return kind != "STRING"
    if isinstance(value, int):
        literal = "INT" if -(2**31) <= value < 2**31 else "BIGINT"
        return kind != literal
    return True


def _lag_type(call: exp.Lag | exp.Lead, names: dict[str, Column]) -> str | None:
    """A LAG call's type, its argument's; None when its default is not of that type."""
    arg = call.this
    if not isinstance(arg, exp.Column) or arg.name.lower() not in names:
        return None
    kind = names[arg.name.lower()].type
    default = _lag_default(call)
    if default is None:
        return kind
    if isinstance(default, str):
        return kind if kind == "STRING" else None
    if isinstance(default, int):
        return kind if kind in _SUMMED else None
    return kind if kind in ("FLOAT", "DOUBLE") and isinstance(default, float) else None


def lag_call(call: exp.Expr) -> tuple[int, object]:
    """A checked LAG call's offset and default (``LAG(x[, n[, default]])``)."""
    offset = call.args.get("offset")
    return (int(offset.this) if offset is not None else 1), _lag_default(call)


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
        if isinstance(call, exp.Lag | exp.Lead):  # LEAD: batch mode only (the lowering)
            # a window function, which the expression checks refuse outside OVER: its
            # type is its argument's, its default a literal of that type
            assert item.alias is not None
            arg = call.this
            if isinstance(arg, exp.Column) and arg.name.lower() not in names:
                report_unknown_column(ctx, ast.Name(value=arg.name, span=item.span), schema)
                ok = False
                continue
            lagged = _lag_type(call, names)
            if (
                lagged is not None
                and ctx.settings.sql_dialect == FLINK
                and flink_lag_default_refused(call, lagged)
            ):
                ctx.reporter.error(
                    Code.E0756,
                    f"'{item.expr.text}': Flink takes a {call.sql_name().upper()} default only "
                    f"of its column's type "
                    f"({lagged}), and not NULL ('Please explicitly cast default value ...')",
                    item.span,
                    help="leave the default out (NULL), or give a literal of the column's "
                    "type: an integer for INT, one past INT's range for BIGINT, a string for "
                    "STRING",
                )
                ok = False
                continue
            if lagged is None:
                ctx.reporter.error(
                    Code.E0753,
                    f"'{item.expr.text}' in an OVER window is not one flowc computes on Spark yet",
                    item.span,
                    help="LAG of a column, its default a number for a number column or a "
                    "string for a STRING column, runs",
                )
                ok = False
            else:
                out.append(Column(item.alias.value, lagged))
            continue
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
        if flink_avg(call, result) and arg_type == result:
            out.append(Column(item.alias.value, result))
            continue
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
                + (
                    " (Flink's AVG of an integer is of its type: flowc computes it for INT "
                    "and BIGINT)"
                    if function == "avg" and is_flink_aggregate(call)
                    else ""
                ),
                item.span,
                help="COUNT, SUM and AVG of integers or doubles (in the Flink dialect AVG "
                "of INT, BIGINT or DOUBLE), MIN and MAX of integers, "
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
