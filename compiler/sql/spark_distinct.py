"""Distinct aggregates in forms Spark Structured Streaming runs.

Spark refuses ``count(DISTINCT x)`` and every other distinct aggregate on a stream
("Distinct aggregations are not supported on streaming DataFrames/Datasets"), yet users
write them (Nexmark q15, q16). Each is rewritten over the set of distinct values the
group has seen, ``collect_set``, which Spark keeps in the aggregation's state:

- ``count(DISTINCT x)`` → ``size(collect_set(x))`` (``collect_set`` skips NULLs, as
  ``count`` does); ``count(DISTINCT a, b)`` collects ``struct(a, b)`` of the rows where
  no column is NULL;
- ``sum(DISTINCT x)`` → a fold of the set (NULL when it is empty, as ``sum``);
- ``avg(DISTINCT x)`` → that fold over ``size`` of the set, in DOUBLE (or the decimal
  ``avg`` gives: DECIMAL(p + 4, s + 4));
- ``min``/``max(DISTINCT x)`` → ``min``/``max(x)``: the same value.

A ``FILTER (WHERE ...)`` clause moves onto the ``collect_set``. Any other distinct
aggregate raises :class:`UnsupportedDistinct`. Flink runs all of them natively: its
plans do not change; the Spark realization lists each rewrite (:func:`rewrite_distinct`
returns them).
"""

from __future__ import annotations

from sqlglot import exp

from flowc.fast_dataclass import dataclass
from flowc.sql.spark_patterns import flink_average, is_flink_aggregate
from flowc.sql.spark_typing import (
    average_type,
    sum_type,
)
from flowc.sql.sqltypes import UNKNOWN, type_text


class UnsupportedDistinct(Exception):
    """A distinct aggregate with no exact streaming form; the message says which."""


@dataclass(frozen=True, slots=True)
class DistinctRewrite:
    """One rewritten aggregate: as written, and as Spark runs it."""

    written: str
    spark: str


def rewrite_distinct(tree: exp.Expr) -> tuple[exp.Expr, tuple[DistinctRewrite, ...]]:
    """``tree`` (copied) with every distinct aggregate rewritten, and the rewrites."""
    if not _has_distinct_aggregate(tree):
        return tree, ()
    copy = tree.copy()
    rewrites: list[DistinctRewrite] = []
    for node in list(copy.find_all(exp.AggFunc)):
        distinct = node.this
        if not isinstance(distinct, exp.Distinct):
            continue
        wrapper = node.parent if isinstance(node.parent, exp.Filter) else None
        written = (wrapper or node).sql("spark")
        where = wrapper.expression if wrapper is not None else None
        replacement = _rewritten(node, list(distinct.expressions), where)
        if replacement is not None:
            replaced = wrapper or node
            if replaced is copy:
                copy = replacement
            else:
                replaced.replace(replacement)
        rewrites.append(DistinctRewrite(written, (replacement or node).sql("spark")))
        if replacement is None:
            node.set("this", distinct.expressions[0])
            rewrites[-1] = DistinctRewrite(written, (wrapper or node).sql("spark"))
    return copy, tuple(rewrites)


def _has_distinct_aggregate(tree: exp.Expr) -> bool:
    """Whether an aggregate of ``tree`` is DISTINCT: a walk with a plain stack, as every
    aggregation of a plan asks it (sqlglot's ``find_all`` walks through a generator)."""
    stack = [tree]
    expr_class = exp.Expr
    while stack:
        node = stack.pop()
        if isinstance(node, exp.AggFunc) and isinstance(node.args.get("this"), exp.Distinct):
            return True
        for value in node.args.values():
            if isinstance(value, expr_class):
                stack.append(value)
            elif type(value) is list:
                stack.extend(v for v in value if isinstance(v, expr_class))
    return False


def _rewritten(
    node: exp.AggFunc, values: list[exp.Expr], where: exp.Expr | None
) -> exp.Expr | None:
    """The streaming form of ``node``; None where dropping DISTINCT is the form."""
    name = node.sql("spark").split("(", 1)[0].lower()
    if isinstance(node, (exp.Min, exp.Max)) and len(values) == 1:
        return None
    if isinstance(node, exp.Count):
        return exp.cast(exp.func("size", _collected(_row_of(values), where)), "BIGINT")
    if isinstance(node, (exp.Sum, exp.Avg)) and len(values) == 1:
        value = values[0]
        total = _fold(_collected(value.copy(), where), _sum_type(value))
        if isinstance(node, exp.Sum):
            return total
        count = exp.func("size", _collected(value.copy(), where))
        if is_flink_aggregate(node):
            return flink_average(total, count, type_text(value))
        average = exp.Div(
            this=exp.paren(total),
            expression=exp.Nullif(this=count, expression=exp.Literal.number(0)),
        )
        if not _sum_type(value).startswith("DECIMAL"):
            return exp.cast(average, "DOUBLE")
        # Spark's Average divides the decimal sum by the count, then casts to its result
        # type, DECIMAL(p + 4, s + 4): so does this (the division alone is wider).
        return exp.cast(average, average_type(type_text(value)) or "DOUBLE")
    raise UnsupportedDistinct(
        f"{name}(DISTINCT ...) has no streaming form on Spark: flowc rewrites only count, "
        "sum, avg, min and max with DISTINCT"
    )


def _row_of(values: list[exp.Expr]) -> exp.Expr:
    """One value per row; NULL where any column is NULL, as ``count(DISTINCT a, b)`` skips."""
    if len(values) == 1:
        return values[0].copy()
    present = exp.and_(
        *(exp.Not(this=exp.Is(this=v.copy(), expression=exp.Null())) for v in values)
    )
    return exp.Case(
        ifs=[exp.If(this=present, true=exp.Struct(expressions=[v.copy() for v in values]))]
    )


def _collected(value: exp.Expr, where: exp.Expr | None) -> exp.Expr:
    collected: exp.Expr = exp.ArrayUniqueAgg(this=value)
    if where is not None:
        collected = exp.Filter(this=collected, expression=where.copy())
    return collected


def _sum_type(value: exp.Expr) -> str:
    """The type ``sum`` returns for ``value``'s type, as Spark's Sum does."""
    text = type_text(value)
    if text.startswith("DECIMAL"):
        return sum_type(text) or text
    if text in ("FLOAT", "DOUBLE"):
        return "DOUBLE"
    if text == UNKNOWN or text in ("TINYINT", "SMALLINT", "INT", "BIGINT"):
        return "BIGINT"
    raise UnsupportedDistinct(f"sum(DISTINCT ...) of a {text} has no streaming form on Spark")


def _fold(values: exp.Expr, type_text: str) -> exp.Expr:
    """``aggregate(values, NULL, (acc, v) -> coalesce(acc, 0) + v)``: NULL for no values."""
    zero = exp.cast(exp.Literal.number(0), type_text)
    acc, item = exp.to_identifier("flowc_acc"), exp.to_identifier("flowc_v")
    total: exp.Expr = exp.Add(
        this=exp.func("coalesce", exp.column(acc), zero),
        expression=exp.cast(exp.column(item), type_text),
    )
    if type_text.startswith("DECIMAL"):
        # Spark widens a decimal sum by a digit (DECIMAL(22, 2) + DECIMAL(22, 2) is
        # DECIMAL(23, 2)), and aggregate() refuses a step of another type than its start;
        # Sum keeps its buffer in its result type the same way (ANSI: overflow fails).
        total = exp.cast(total, type_text)
    step = exp.Lambda(this=total, expressions=[acc, item])
    return exp.func("aggregate", values, exp.cast(exp.Null(), type_text), step)
