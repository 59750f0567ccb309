"""MATCH_RECOGNIZE's lines of the generated program: the pattern compiled to the state
machine's table, each DEFINE condition a Python function of a match context (SQL's
three-valued logic, Java's integer arithmetic: :mod:`flowc.spark.match_processor`), and
the measures as the processor's tuples."""

from __future__ import annotations

from flowc import ast
from flowc.analyze.match_steps import NUMBERS, arithmetic_type, literal_type
from flowc.program import MatchStep
from flowc.spark.match_runtime import compile_pattern

#: The bits of Java's arithmetic in each integer type flowc computes with (DOUBLE: 0).
_BITS = {"INT": 32, "BIGINT": 64}


class _Conditions:
    """Writes one step's conditions: ``columns`` are the processor row's columns."""

    def __init__(self, step: MatchStep, columns: list[str]) -> None:
        self.variables = {v.name.value.upper(): i for i, v in enumerate(step.node.variables)}
        self.columns = {c.lower(): i for i, c in enumerate(columns)}
        self.types = {c.name.lower(): c.type for c in step.input_schema}

    def variable(self, name: str | None) -> int:
        return -1 if name is None else self.variables[name.upper()]

    def code(self, expr: ast.MatchExpr) -> tuple[str, str]:
        """The expression's Python text (of context ``c``) and its type."""
        if isinstance(expr, ast.MatchLiteral):
            return repr(expr.value), literal_type(expr)
        if isinstance(expr, ast.MatchColumn):
            at = self.columns[expr.column.lower()]
            kind = self.types[expr.column.lower()]
            return f"match_last(c, {self.variable(expr.variable)}, {at}, 0)", kind
        if isinstance(expr, ast.MatchCall):
            assert expr.column is not None
            at = self.columns[expr.column.lower()]
            kind = self.types[expr.column.lower()]
            variable = self.variable(expr.variable)
            if expr.function in ("PREV", "LAST"):
                return f"match_last(c, {variable}, {at}, {expr.offset})", kind
            if expr.function == "FIRST":
                return f"match_first(c, {variable}, {at}, {expr.offset})", kind
            bits = _BITS.get(kind, 0)
            result = "BIGINT" if expr.function == "COUNT" else kind
            return f"match_aggregate(c, {variable}, {at}, {expr.function!r}, {bits})", result
        if isinstance(expr, ast.MatchUnary):
            inner, kind = self.code(expr.operand)
            if expr.op == "IS NULL":
                return f"({inner} is None)", "BOOLEAN"
            if expr.op == "IS NOT NULL":
                return f"({inner} is not None)", "BOOLEAN"
            if expr.op == "NOT":
                return f"match_not({inner})", "BOOLEAN"
            return f"match_arithmetic('-', 0, {inner}, {_BITS.get(kind, 0)})", kind
        left, left_type = self.code(expr.left)
        right, right_type = self.code(expr.right)
        if expr.op == "AND":
            return f"match_and({left}, {right})", "BOOLEAN"
        if expr.op == "OR":
            return f"match_or({left}, {right})", "BOOLEAN"
        if expr.op in ("+", "-", "*"):
            result = arithmetic_type(left_type, right_type)
            bits = _BITS.get(result, 0)
            return f"match_arithmetic({expr.op!r}, {left}, {right}, {bits})", result
        doubles = {"FLOAT", "DOUBLE"}
        if {left_type, right_type} & doubles and {left_type, right_type} <= NUMBERS:
            # Java compares an integer with a double as doubles
            left, right = f"match_double({left})", f"match_double({right})"
        return f"match_compare({expr.op!r}, {left}, {right})", "BOOLEAN"


def _read(expr: ast.MatchExpr | None, into: set[str]) -> None:
    """The columns ``expr`` reads, lower-cased, into ``into``."""
    if isinstance(expr, ast.MatchColumn | ast.MatchCall):
        if expr.column is not None:
            into.add(expr.column.lower())
    elif isinstance(expr, ast.MatchUnary):
        _read(expr.operand, into)
    elif isinstance(expr, ast.MatchBinary):
        _read(expr.left, into)
        _read(expr.right, into)


def match_columns(step: MatchStep) -> list[str]:
    """The columns of the processor's rows, in the input's order: those the conditions
    and measures read, but the ORDER BY column (held as epoch milliseconds apart)."""
    node = step.node
    read: set[str] = set()
    for variable in node.variables:
        _read(variable.condition, read)
    for measure in node.measures:
        _read(measure.call, read)
    read.discard(node.order.value.lower())
    return [c.name for c in step.input_schema if c.name.lower() in read]


def match_call(step: MatchStep, df: str, streaming: bool) -> str:
    """The program's line running ``step`` on ``df``: ``match_recognize(...)``."""
    node = step.node
    order = node.order.value.lower()
    columns = match_columns(step)
    writer = _Conditions(step, columns)
    nfa = compile_pattern([(v.low, v.high, v.greedy) for v in node.variables])
    conditions = [
        "None" if v.condition is None else f"lambda c: {writer.code(v.condition)[0]}"
        for v in node.variables
    ]
    measures = []
    for measure in node.measures:
        call = measure.call
        function = "LAST" if isinstance(call, ast.MatchColumn) else call.function
        offset = 0 if isinstance(call, ast.MatchColumn) else call.offset
        column = call.column
        at = (
            len(columns)
            if column is None or column.lower() == order
            else writer.columns[column.lower()]
        )
        kind = writer.types.get(column.lower(), "") if column is not None else ""
        measures.append(
            (
                measure.alias.value,
                function,
                writer.variable(call.variable),
                at,
                offset,
                _BITS.get(kind, 0),
            )
        )
    keys = list(step.keys)
    return (
        f"{df} = match_recognize({df}, {keys!r}, {node.order.value!r}, {columns!r}, {nfa!r}, "
        f"[{', '.join(conditions)}], {node.past_last_row}, {measures!r}, {streaming})"
    )
