"""What the step checkers share: the input a step sees (:class:`StepInput`), the checker
type, and small checks that several steps make (a BOOLEAN condition, a column's name,
unique output columns).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sqlglot import exp

from flowc import ast
from flowc.analyze.context import Context
from flowc.diagnostics import did_you_mean
from flowc.errorcodes import Code
from flowc.fast_dataclass import dataclass
from flowc.program import Column, Schema, SideOutput, Step
from flowc.spans import Span
from flowc.sql.sqltypes import BOOLEAN, UNKNOWN, Scope


@dataclass(frozen=True, slots=True)
class StepInput:
    """The stream a step reads and where it stands: ``keys`` are those in force (KEY BY),
    ``side_outputs`` the query's ROUTE outputs so far (a ROUTE adds to it), ``index`` the
    step's position among the checked steps, ``view`` the view being defined (None in an
    INSERT), ``following`` the next AST step (a WINDOW's AGGREGATE)."""

    schema: Schema
    keys: tuple[str, ...] | None
    side_outputs: list[SideOutput]
    index: int
    view: str | None
    following: ast.Step | None


#: Checks one AST step against its input; None when it reported an error.
StepChecker = Callable[[Context, ast.StepBase, StepInput], Step | None]


def check_boolean(ctx: Context, condition: ast.SqlExpr, scope: Scope, where: str) -> bool:
    type_text = ctx.checks.type(condition, scope, ctx.reporter)
    if type_text is None:
        return False
    if type_text not in (BOOLEAN, UNKNOWN):
        ctx.reporter.error(
            Code.E0210,
            f"{where} condition must be BOOLEAN, but '{condition.text}' is {type_text}",
            condition.span,
            help="compare it with something, e.g. x > 0 or x IS NOT NULL",
        )
        return False
    return True


def report_unknown_column(ctx: Context, name: ast.Name, schema: Schema) -> None:
    names = [c.name for c in schema]
    ctx.reporter.error(
        Code.E0201,
        f"unknown column '{name.value}'",
        name.span,
        help=did_you_mean(name.value, names) or "columns here: " + ", ".join(names),
    )


def item_name(ctx: Context, item: ast.SelectItem) -> str | None:
    """The output column's name: the alias, or the column read; otherwise E0211."""
    if item.alias is not None:
        return item.alias.value
    tree = item.expr.tree
    if isinstance(tree, exp.Column) and not isinstance(tree.this, exp.Star):
        return tree.name
    if isinstance(tree, exp.Dot):
        return tree.name
    ctx.reporter.error(
        Code.E0211,
        f"'{item.expr.text}' needs a name",
        item.expr.span,
        help=f"add AS <name>: {item.expr.text} AS my_column",
    )
    return None


def check_unique(ctx: Context, columns: Sequence[Column], span: Span) -> bool:
    seen: set[str] = set()
    for column in columns:
        key = column.name
        if key in seen:
            ctx.reporter.error(
                Code.E0206,
                f"column '{column.name}' appears twice in the output",
                span,
                help="rename one of them with AS",
            )
            return False
        seen.add(key)
    return True


def keyword(node: ast.StepBase) -> str:
    """The step's keyword as written (KEY BY, UNION ALL, REBALANCE, ...)."""
    if isinstance(node, ast.Partition):
        return node.kind
    names = {
        ast.KeyBy: "KEY BY",
        ast.PartitionBy: "PARTITION BY",
        ast.UnionAll: "UNION ALL",
        ast.Join: "JOIN",
        ast.Window: "WINDOW",
        ast.Top: "TOP",
        ast.MatchRecognize: "MATCH_RECOGNIZE",
    }
    return names.get(type(node), type(node).__name__.upper())


def is_interval(tree: exp.Expr) -> bool:
    if isinstance(tree, exp.Interval):
        return True
    return isinstance(tree, exp.Literal) and tree.is_string


def schema_text(schema: Schema) -> str:
    return ", ".join(f"{c.name} {c.type}" for c in schema)
