"""E0231: a string literal that Spark casts and fails on (``amount > 'large'`` where
``amount`` is DOUBLE, ``CAST('abc' AS INT)``).

Spark's rules are followed exactly: which type the literal is cast to (a comparison with an
INT casts it to BIGINT, with a DECIMAL to DOUBLE, :func:`literal_casts`) and which strings
that cast accepts (:func:`flowc.sql.spark_casts.spark_can_cast`). Only with ANSI mode on (see
:mod:`flowc.sql.functions`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sqlglot import exp
from sqlglot.errors import SqlglotError

from flowc.ast import SqlExpr
from flowc.diagnostics import Reporter
from flowc.errorcodes import Code
from flowc.fast_dataclass import dataclass
from flowc.spans import Span
from flowc.sql.spark_casts import FRACTIONAL_TYPES, INTEGRAL_TYPES, spark_can_cast
from flowc.sql.spark_sql import GENERATOR_ERRORS, spark_generator
from flowc.sql.sqltypes import UNKNOWN, TypeSyntaxError, normalize_type, sub_span, type_text

#: Where calls and string literals of a SQL query stand in the file, by the positions
#: sqlglot gave them in the query's text: a query's expressions are rewritten into pipe
#: steps with new text, but their nodes keep those positions.
Positions = dict[tuple[int, int], Span]


_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.NullSafeNEQ)
_ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.IntDiv)
_BINARY = (*_COMPARISONS, *_ARITHMETIC)


@dataclass(frozen=True, slots=True)
class LiteralCast:
    """A string literal Spark casts to ``target``, and why (``other`` is the other side's type;
    None for an explicit CAST)."""

    literal: exp.Literal
    target: str
    other: str | None
    arithmetic: bool = False


def check_literals(expr: SqlExpr, reporter: Reporter, positions: Positions | None = None) -> bool:
    """Report each string literal Spark's ANSI mode casts and fails on; False if any."""
    ok = True
    for cast in literal_casts(expr.tree):
        value = str(cast.literal.this)
        if spark_can_cast(value, cast.target):
            continue
        shown = _show(value)
        if cast.other is None:
            message = f"'{shown}' cannot be cast to {cast.target}"
        elif cast.arithmetic:
            message = f"'{shown}' cannot be cast to {cast.target} for arithmetic with {cast.other}"
        else:
            message = f"'{shown}' cannot be cast to {cast.target} to compare with {cast.other}"
        span = literal_span(expr, cast.literal, positions)
        reporter.error(Code.E0231, message, span, help=_cast_help(cast))
        ok = False
    return ok


def literal_casts(tree: exp.Expr) -> Iterator[LiteralCast]:
    """Each string literal of a typed tree that Spark casts, with the type it casts it to.

    Spark's ANSI type coercion (checked in tests/test_spark_functions.py): compared with,
    or in arithmetic with, an integral type a string becomes BIGINT; with FLOAT, DOUBLE or
    DECIMAL, DOUBLE; compared with a DATE, TIMESTAMP, TIMESTAMP_NTZ or BOOLEAN, that type.
    IN compares the value with each item (only a list of string literals is checked);
    BETWEEN is two comparisons.
    """
    for node in tree.walk():
        if isinstance(node, exp.Cast):
            literal = _string_literal(node.this)
            if literal is not None and _writes_cast(node):
                target = _type_of(node.args.get("to"))
                if target is not None:
                    yield LiteralCast(literal, target, None)
        elif isinstance(node, _BINARY):
            arithmetic = isinstance(node, _ARITHMETIC)
            for this, other in ((node.left, node.right), (node.right, node.left)):
                literal = _string_literal(this)
                if literal is None or _string_literal(other) is not None:
                    continue
                other_type = type_text(other)
                target = _coerced(other_type, arithmetic)
                if target is not None:
                    yield LiteralCast(literal, target, other_type, arithmetic)
        elif isinstance(node, exp.Between):
            other_type = type_text(node.this)
            target = _coerced(other_type, False)
            if target is None:
                continue
            for bound in (node.args.get("low"), node.args.get("high")):
                literal = _string_literal(bound)
                if literal is not None:
                    yield LiteralCast(literal, target, other_type)
        elif isinstance(node, exp.In) and node.expressions:
            other_type = type_text(node.this)
            target = _coerced(other_type, False)
            items = [_string_literal(item) for item in node.expressions]
            if target is None or _string_literal(node.this) is not None:
                continue
            if all(item is not None for item in items):
                for item in items:
                    assert item is not None
                    yield LiteralCast(item, target, other_type)


def _coerced(other: str, arithmetic: bool) -> str | None:
    """The type Spark's ANSI coercion casts a string to, beside a value of type ``other``."""
    if other in INTEGRAL_TYPES:
        return "BIGINT"
    if other in FRACTIONAL_TYPES or other.startswith("DECIMAL"):
        return "DOUBLE"
    if not arithmetic and other in ("DATE", "TIMESTAMP", "TIMESTAMP_NTZ", "BOOLEAN"):
        return other
    return None


def _string_literal(node: exp.Expr | None) -> exp.Literal | None:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Literal) and node.is_string:
        return node
    return None


def _writes_cast(node: exp.Cast) -> bool:
    """Whether Spark SQL gets ``CAST(...)`` (fails on bad input), not ``TRY_CAST(...)``."""
    if node.args.get("safe"):
        return False
    try:
        return str(spark_generator().generate(node)).upper().startswith("CAST(")
    except GENERATOR_ERRORS:
        return False


def _type_of(node: Any) -> str | None:
    if not isinstance(node, exp.DataType):
        return None
    try:
        text = normalize_type(str(node.sql("spark")))
    except (TypeSyntaxError, SqlglotError, ValueError):
        return None
    return None if text == UNKNOWN else text


def literal_span(expr: SqlExpr, literal: exp.Literal, positions: Positions | None = None) -> Span:
    """The span of a string literal, quotes included (see :func:`call_span`)."""
    meta = literal._meta or {}
    start, end = meta.get("start"), meta.get("end")
    text = expr.text
    if not isinstance(start, int) or not isinstance(end, int):
        return expr.span
    if (
        0 <= start < end < len(text)
        and text[start] in "'\""
        and text[end] == text[start]
        and str(literal.this) in text[start + 1 : end].replace("\\", "")
    ):
        return sub_span(expr, start, end + 1)
    return (positions or {}).get((start, end), expr.span)


def _show(value: str) -> str:
    shown = value.encode("unicode_escape").decode("ascii").replace("'", "\\'")
    return shown if len(shown) <= 40 else shown[:37] + "..."


def _cast_help(cast: LiteralCast) -> str:
    value = _show(str(cast.literal.this))
    target = cast.target
    if target in INTEGRAL_TYPES:
        what = "write a whole number without quotes"
        if cast.other is not None and cast.other not in INTEGRAL_TYPES:
            what = "write a number without quotes"
    elif target in FRACTIONAL_TYPES or target.startswith("DECIMAL"):
        what = "write a number without quotes"
    elif target == "DATE":
        what = "write a date as 'yyyy-mm-dd'"
    elif target.startswith("TIMESTAMP"):
        what = "write a timestamp as 'yyyy-mm-dd hh:mm:ss'"
    elif target == "BOOLEAN":
        what = "write true or false"
    else:
        what = f"write a {target} value"
    return (
        f"Spark's ANSI mode fails the query on it; {what}, "
        f"or use try_cast('{value}' AS {target}) for NULL instead"
    )
