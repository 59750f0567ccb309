"""Column lineage: the expression over the sources' columns a column stands for, so that
``SELECT k2 AS k |> KEY BY k`` is not taken for ``KEY BY k``.
"""

from __future__ import annotations

import hashlib

from sqlglot import exp

from flowc import ast
from flowc.program import Column, Schema
from flowc.sql.functions import is_aggregate
from flowc.sql.spark_sql import GENERATOR_ERRORS, UnsupportedOnSpark, interval_text
from flowc.state.manifest import AggregateState, StateColumn

#: Lineage text longer than this is cut (with a digest, so it still compares exactly).
#: Lineage text longer than this is cut (with a digest, so it still compares exactly).
_MAX_LINEAGE = 400


#: A column's lineage within a stream: (qualifier, name) → lineage text.
Env = list[tuple[str | None, str, str]]


def without_comments(text: str) -> str:
    return "\n".join(
        line.split("--", 1)[0] if "--" in line and "'" not in line else line
        for line in text.split("\n")
    )


def one_line(text: str) -> str:
    return " ".join(text.split())


def requalified(env: Env, name: str) -> Env:
    """A view's columns, as its readers qualify them: by the view's name."""
    return [(name, column, lineage) for _, column, lineage in env]


def lookup(env: Env, qualifier: str | None, name: str) -> str:
    """A column's lineage; the last definition wins (EXTEND after SELECT)."""
    found = None
    for q, n, lineage in env:
        if n == name and (qualifier is None or q == qualifier):
            found = lineage
    if found is None and qualifier is not None:
        return lookup(env, None, name)
    return found if found is not None else f"?{name}"


def expression_lineage(expr: ast.SqlExpr, env: Env) -> str:
    """The expression with each column replaced by its lineage."""

    def substitute(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
            return exp.Var(this=lookup(env, node.table or None, node.name))
        return node

    tree = expr.tree.copy().transform(substitute)
    return bounded(sql_text(tree))


def sql_text(tree: exp.Expr) -> str:
    try:
        return str(tree.sql(dialect="spark"))
    except GENERATOR_ERRORS:  # a call sqlglot cannot write: the tree's text
        return one_line(str(tree))


def bounded(text: str) -> str:
    if len(text) <= _MAX_LINEAGE:
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{text[:_MAX_LINEAGE]}...#{digest}"


def interval_or_text(expr: ast.SqlExpr) -> str:
    try:
        return str(interval_text(expr))
    except UnsupportedOnSpark:
        return one_line(expr.text)


def state_column(name: str, schema: Schema, env: Env) -> StateColumn:
    column = next((c for c in schema if c.name == name), None)
    return StateColumn(
        name, column.type if column is not None else "UNKNOWN", lookup(env, None, name)
    )


def aggregate_state(item: ast.SelectItem, column: Column, env: Env) -> AggregateState:
    """One AGGREGATE item: its function(s) and their arguments (``*`` for count(*))."""
    tree = item.expr.tree
    calls = [n for n in tree.walk() if is_aggregate(n)]
    names = []
    for call in calls:
        name = (
            call.sql_name().lower()
            if isinstance(call, exp.Func) and not isinstance(call, exp.Anonymous)
            else str(call.name).lower()
        )
        if call.args.get("distinct") is not None or isinstance(call.this, exp.Distinct):
            name += " distinct"
        names.append(name)
    arguments: tuple[str, ...]
    if len(calls) != 1:
        arguments = tuple(sql_text(call) for call in calls)
    elif isinstance(calls[0], exp.Count) and isinstance(calls[0].this, exp.Star):
        arguments = ("*",)
    else:
        call = calls[0]
        found = ([call.this] if isinstance(call.this, exp.Expr) else []) + list(call.expressions)
        arguments = tuple(sql_text(a) for a in found)
    function = ", ".join(names) or sql_text(tree)
    return AggregateState(
        name=column.name,
        sql=one_line(item.expr.text),
        function=function,
        arguments=arguments,
        type=column.type,
        lineage=expression_lineage(item.expr, env),
    )
