"""The checker of MATCH_RECOGNIZE (Flink's Match): its columns, each DEFINE condition and
measure typed as Flink types them, and what its processor computes exactly
(docs/language.md#match_recognize); the rest is E0759 at its place."""

from __future__ import annotations

from flowc import ast
from flowc.analyze.context import Context
from flowc.analyze.step_common import StepInput, check_unique, report_unknown_column
from flowc.errorcodes import Code
from flowc.program import Column, Hints, MatchStep, Step
from flowc.spans import Span

#: The column types a condition reads, and those it computes with (+, -, *): Python's
#: arithmetic wrapped to the type's width is Java's; FLOAT's (single precision) is not.
_READ = frozenset(
    {"TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "STRING", "BOOLEAN", "DATE"}
)
_ARITHMETIC = ("INT", "BIGINT", "DOUBLE")
NUMBERS = frozenset({"TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE"})
#: The aggregates' argument types and results (Flink's: SUM and AVG of an integer are of
#: its type, AVG truncated; asked of Flink 2.3 for INT).
_SUMMED = frozenset({"INT", "BIGINT", "DOUBLE"})
_ORDERED = frozenset({"TINYINT", "SMALLINT", "INT", "BIGINT", "DOUBLE", "STRING", "DATE"})
#: The ORDER BY column's type (a TIMESTAMP_NTZ's epoch milliseconds depend on the time
#: zone: not taken yet).
_TIMES = ("TIMESTAMP",)


def literal_type(literal: ast.MatchLiteral) -> str:
    """A literal's type as Flink types it: an integer INT, or BIGINT past INT's range."""
    if literal.kind == "int":
        value = literal.value
        assert isinstance(value, int)
        return "INT" if -(2**31) <= value < 2**31 else "BIGINT"
    return {"double": "DOUBLE", "string": "STRING", "boolean": "BOOLEAN"}.get(literal.kind, "NULL")


def arithmetic_type(left: str, right: str) -> str:
    """The type of ``+``, ``-`` or ``*`` of two of INT, BIGINT and DOUBLE: the wider."""
    return next(t for t in ("DOUBLE", "BIGINT", "INT") if t in (left, right))


class _Refused(Exception):
    """Reported already."""


class _Typer:
    """Types one condition or measure against the input's columns and the variables."""

    def __init__(
        self,
        ctx: Context,
        names: dict[str, Column],
        variables: frozenset[str],
        schema: tuple[Column, ...],
        order: str,
    ) -> None:
        self.order = order
        self.ctx = ctx
        self.names = names
        self.variables = variables
        self.schema = schema

    def refuse(self, message: str, span: Span, code: Code = Code.E0759) -> _Refused:
        self.ctx.reporter.error(
            code,
            message,
            span,
            help="see what MATCH_RECOGNIZE's conditions and measures take: "
            "docs/language.md#match_recognize",
        )
        return _Refused()

    def column(self, variable: str | None, name: str, span: Span) -> Column:
        if variable is not None and variable.upper() not in self.variables:
            raise self.refuse(f"'{variable}' is not a PATTERN variable", span, Code.E0201)
        found = self.names.get(name.lower())
        if found is None:
            report_unknown_column(self.ctx, ast.Name(value=name, span=span), self.schema)
            raise _Refused()
        return found

    def read(self, variable: str | None, name: str, span: Span, times: bool = False) -> str:
        found = self.column(variable, name, span)
        if found.type in _READ or (times and found.name == self.order):
            return found.type
        raise self.refuse(
            f"'{found.name}' is {found.type}: not a type flowc's MATCH_RECOGNIZE reads here",
            span,
        )

    def type(self, expr: ast.MatchExpr) -> str:
        if isinstance(expr, ast.MatchLiteral):
            return literal_type(expr)
        if isinstance(expr, ast.MatchColumn):
            return self.read(expr.variable, expr.column, expr.span)
        if isinstance(expr, ast.MatchCall):
            if expr.function == "MATCH_ROWTIME":
                raise self.refuse("MATCH_ROWTIME() is a measure, not in a condition", expr.span)
            return self.call(expr)
        if isinstance(expr, ast.MatchUnary):
            inner = self.type(expr.operand)
            if expr.op in ("IS NULL", "IS NOT NULL"):
                return "BOOLEAN"
            if expr.op == "NOT":
                if inner not in ("BOOLEAN", "NULL"):
                    raise self.refuse(f"NOT of {inner}", expr.span, Code.E0210)
                return "BOOLEAN"
            if inner not in (*_ARITHMETIC, "NULL"):
                raise self.refuse(f"- of {inner} is not in the subset", expr.span)
            return inner
        left, right = self.type(expr.left), self.type(expr.right)
        if expr.op in ("AND", "OR"):
            for side, kind in ((expr.left, left), (expr.right, right)):
                if kind not in ("BOOLEAN", "NULL"):
                    raise self.refuse(f"{expr.op} of {kind}", side.span, Code.E0210)
            return "BOOLEAN"
        if expr.op in ("+", "-", "*"):
            for side, kind in ((expr.left, left), (expr.right, right)):
                if kind not in _ARITHMETIC:
                    raise self.refuse(
                        f"{expr.op} of {kind} is not in flowc's MATCH_RECOGNIZE subset "
                        "(INT, BIGINT and DOUBLE are)",
                        side.span,
                    )
            return arithmetic_type(left, right)
        comparable = (
            left == right or "NULL" in (left, right) or (left in NUMBERS and right in NUMBERS)
        )
        if not comparable:
            raise self.refuse(f"compares {left} with {right}", expr.span, Code.E0210)
        return "BOOLEAN"

    def call(self, call: ast.MatchCall) -> str:
        if call.function == "MATCH_ROWTIME":
            return "TIMESTAMP"
        assert call.column is not None
        if call.function == "COUNT":
            self.column(call.variable, call.column, call.span)
            return "BIGINT"
        kind = self.read(call.variable, call.column, call.span)
        if call.function in ("SUM", "AVG") and kind not in _SUMMED:
            raise self.refuse(
                f"{call.function} of {kind} is not in flowc's MATCH_RECOGNIZE subset (of "
                "INT, BIGINT and DOUBLE it is)",
                call.span,
            )
        if call.function in ("MIN", "MAX") and kind not in _ORDERED:
            raise self.refuse(f"{call.function} of {kind} is not in the subset", call.span)
        return kind

    def measure(self, measure: ast.MatchMeasure) -> str:
        call = measure.call
        if isinstance(call, ast.MatchColumn):
            assert call.variable is not None
            return self.read(call.variable, call.column, call.span, times=True)
        if call.function in ("FIRST", "LAST"):
            assert call.column is not None
            return self.read(call.variable, call.column, call.span, times=True)
        return self.call(call)


def check_match(ctx: Context, node: ast.MatchRecognize, step: StepInput) -> Step | None:
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
    if order.type not in _TIMES:
        ctx.reporter.error(
            Code.E0759,
            f"MATCH_RECOGNIZE is ordered by its table's rowtime attribute, and "
            f"'{order.name}' is {order.type}",
            node.order.span,
            help="ORDER BY the table's event-time column (the one with the WATERMARK); Flink "
            'says "You must specify either rowtime or proctime for order by as the first one"',
        )
        return None
    variables = frozenset(v.name.value.upper() for v in node.variables)
    typer = _Typer(ctx, names, variables, schema, order.name)
    for variable in node.variables:
        if variable.condition is None:
            continue
        try:
            kind = typer.type(variable.condition)
        except _Refused:
            ok = False
            continue
        if kind not in ("BOOLEAN", "NULL"):
            ctx.reporter.error(
                Code.E0210,
                f"DEFINE {variable.name.value}'s condition must be BOOLEAN, and it is {kind}",
                variable.condition.span,
                help="compare it with something, e.g. price > PREV(price)",
            )
            ok = False
    out = [names[p.value.lower()] for p in node.partition]
    out = [Column(c.name, c.type) for c in out]
    for measure in node.measures:
        try:
            out.append(Column(measure.alias.value, typer.measure(measure)))
        except _Refused:
            ok = False
    if not ok or not check_unique(ctx, out, node.span):
        return None
    keys = tuple(names[p.value.lower()].name for p in node.partition)
    return MatchStep(
        node=node,
        schema=tuple(out),
        hints=Hints(),
        span=node.span,
        keys=keys,
        input_schema=tuple(schema),
    )
