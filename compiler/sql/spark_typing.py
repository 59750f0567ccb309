"""Spark's result types where sqlglot's differ: decimals, aggregates, widening, intervals.

sqlglot types an expression the way most SQL engines do; Spark's analyzer has rules of
its own, and a type flowc gets wrong is checked against a sink's declared type (E0207)
and becomes a postgres upsert table's column type. The rules here are Spark 4's (ANSI
mode, ``spark.sql.decimalOperations.allowPrecisionLoss`` on, both defaults), from
apache/spark's ``arithmetic.scala`` (``BinaryArithmetic.resultDecimalType``),
``DecimalPrecision``, ``TypeCoercion.findWiderTypeForTwo``, ``Sum.resultType`` and
``Average.resultType``; ``benchmarks/spark_types.py`` checks them against Spark itself.

:func:`spark_rule` gives a node's type from its children's types (already Spark's), or
None where sqlglot's type stands.
"""

from __future__ import annotations

import re

from sqlglot import exp

MAX_PRECISION = 38
#: Spark's DecimalType.MINIMUM_ADJUSTED_SCALE: the least scale a lossy result keeps.
MINIMUM_ADJUSTED_SCALE = 6

_INTEGRAL_ORDER = ("TINYINT", "SMALLINT", "INT", "BIGINT")
#: The exact integer types, by name.
INTEGER_TYPES = frozenset(_INTEGRAL_ORDER)
_NUMERIC_ORDER = (*_INTEGRAL_ORDER, "FLOAT", "DOUBLE")
#: DecimalType.forType: the decimal an integral operand of decimal arithmetic becomes.
_INTEGRAL_DECIMAL = {"TINYINT": (3, 0), "SMALLINT": (5, 0), "INT": (10, 0), "BIGINT": (20, 0)}
#: DecimalType.forType of FLOAT and DOUBLE (ceil and floor to a scale use them).
_FRACTIONAL_DECIMAL = {"FLOAT": (14, 7), "DOUBLE": (30, 15)}
_DECIMAL = re.compile(r"DECIMAL\((\d+), (\d+)\)")

_YEAR_MONTH_UNITS = ("YEAR", "MONTH")
_DAY_TIME_UNITS = ("DAY", "HOUR", "MINUTE", "SECOND")


def decimal(type_text: str) -> tuple[int, int] | None:
    """(precision, scale) of a DECIMAL type's text; None for another type."""
    match = _DECIMAL.fullmatch(type_text)
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2))


def decimal_text(precision: int, scale: int) -> str:
    return f"DECIMAL({precision}, {scale})"


def bounded(precision: int, scale: int) -> str:
    """DecimalType.bounded: each of precision and scale at most 38."""
    return decimal_text(min(precision, MAX_PRECISION), min(scale, MAX_PRECISION))


def adjusted(precision: int, scale: int) -> str:
    """DecimalType.adjustPrecisionScale: a result too wide for 38 digits loses scale (down
    to 6 digits at least) before it loses integral digits."""
    if precision <= MAX_PRECISION:
        return decimal_text(precision, scale)
    integral = precision - scale
    least = min(scale, MINIMUM_ADJUSTED_SCALE)
    return decimal_text(MAX_PRECISION, max(MAX_PRECISION - integral, least))


def _is_integral_literal(node: exp.Expr) -> bool:
    return (
        isinstance(node, exp.Literal)
        and not node.is_string
        and re.fullmatch(r"\d+", node.name) is not None
    )


def _literal_decimal(node: exp.Expr, type_text: str) -> tuple[int, int] | None:
    """An operand of decimal arithmetic as a decimal: an integral literal takes just its
    digits (Spark's literalPickMinimumPrecision), an integral column its type's."""
    found = decimal(type_text)
    if found is not None:
        return found
    if type_text in _INTEGRAL_DECIMAL:
        if _is_integral_literal(node):
            return len(node.name.lstrip("0") or "0"), 0
        return _INTEGRAL_DECIMAL[type_text]
    return None


def literal_type(node: exp.Literal) -> str | None:
    """A numeric literal's type: INT, BIGINT, DECIMAL(p, s) as written, or DOUBLE (an
    exponent); Spark reads ``1.5`` as DECIMAL(2, 1), where sqlglot says DOUBLE."""
    if node.is_string:
        return None
    text = node.name
    if re.fullmatch(r"\d+", text):
        value = int(text)
        if value <= 2**31 - 1:
            return "INT"
        if value <= 2**63 - 1:
            return "BIGINT"
        digits = len(text.lstrip("0"))
        return decimal_text(digits, 0) if digits <= MAX_PRECISION else None
    match = re.fullmatch(r"(\d*)\.(\d*)", text)
    if match is None:
        return "DOUBLE" if re.fullmatch(r"[\d.]+[eE][-+]?\d+", text) else None
    whole, fraction = match.group(1).lstrip("0"), match.group(2)
    scale = len(fraction)
    precision = max(len(whole) + scale, scale, 1)
    return decimal_text(precision, scale) if precision <= MAX_PRECISION else None


def arithmetic(node: exp.Binary, left: str, right: str) -> str | None:
    """The type of ``+ - * / % div`` over two numbers (Spark's BinaryArithmetic)."""
    if isinstance(node, exp.IntDiv):
        return "BIGINT" if _numeric(left) and _numeric(right) else None
    if isinstance(node, exp.Mul | exp.Div):
        for interval, number in ((left, right), (right, left)):
            if interval.startswith("INTERVAL") and _numeric(number):
                if isinstance(node, exp.Div) and interval is right:
                    return None
                year_month = interval.startswith(("INTERVAL YEAR", "INTERVAL MONTH"))
                return "INTERVAL YEAR TO MONTH" if year_month else "INTERVAL DAY TO SECOND"
    if not (_numeric(left) and _numeric(right)):
        return None
    if left in ("FLOAT", "DOUBLE") or right in ("FLOAT", "DOUBLE"):
        # FLOAT stays FLOAT only with FLOAT: with an integer or a decimal it is DOUBLE.
        return "FLOAT" if left == right == "FLOAT" and not isinstance(node, exp.Div) else "DOUBLE"
    if decimal(left) is None and decimal(right) is None:
        if isinstance(node, exp.Div):
            # Flink's ``/`` (``typed``) of two integers is integer division of their type.
            integers = left in _INTEGRAL_ORDER and right in _INTEGRAL_ORDER
            if integers and node.args.get("typed"):
                return max(left, right, key=_NUMERIC_ORDER.index)
            return "DOUBLE"
        return max(left, right, key=_NUMERIC_ORDER.index)
    a = _literal_decimal(node.left, left)
    b = _literal_decimal(node.right, right)
    if a is None or b is None:
        return None
    (p1, s1), (p2, s2) = a, b
    if isinstance(node, exp.Add | exp.Sub):
        scale = max(s1, s2)
        return adjusted(max(p1 - s1, p2 - s2) + scale + 1, scale)
    if isinstance(node, exp.Mul):
        return adjusted(p1 + p2 + 1, s1 + s2)
    if isinstance(node, exp.Div):
        scale = max(MINIMUM_ADJUSTED_SCALE, s1 + p2 + 1)
        return adjusted(p1 - s1 + s2 + scale, scale)
    if isinstance(node, exp.Mod):
        scale = max(s1, s2)
        return adjusted(min(p1 - s1, p2 - s2) + scale, scale)
    return None


def _numeric(type_text: str) -> bool:
    return type_text in _NUMERIC_ORDER or decimal(type_text) is not None


def wider(a: str, b: str) -> str | None:
    """TypeCoercion.findWiderTypeForTwo for numbers and equal types; NULL gives way."""
    if a == b:
        return a
    if a == "NULL":
        return b
    if b == "NULL":
        return a
    for x, y in ((a, b), (b, a)):
        # ANSI mode: a string meets another type as that type (an integer as BIGINT, a
        # fractional number as DOUBLE); dates widen to timestamps, TIMESTAMP_NTZ to TIMESTAMP.
        if x == "STRING" and y in _INTEGRAL_ORDER:
            return "BIGINT"
        if x == "STRING" and (y in ("FLOAT", "DOUBLE") or decimal(y)):
            return "DOUBLE"
        if x == "STRING" and y in ("BOOLEAN", "DATE", "TIMESTAMP", "TIMESTAMP_NTZ"):
            return y
        if x == "DATE" and y in ("TIMESTAMP", "TIMESTAMP_NTZ"):
            return y
        if x == "TIMESTAMP_NTZ" and y == "TIMESTAMP":
            return y
    if not (_numeric(a) and _numeric(b)):
        return None
    if a in ("FLOAT", "DOUBLE") or b in ("FLOAT", "DOUBLE"):
        return "DOUBLE"
    first = decimal(a) or _INTEGRAL_DECIMAL.get(a)
    second = decimal(b) or _INTEGRAL_DECIMAL.get(b)
    if decimal(a) is None and decimal(b) is None:
        return max(a, b, key=_NUMERIC_ORDER.index)
    if first is None or second is None:
        return None
    scale = max(first[1], second[1])
    return bounded(max(first[0] - first[1], second[0] - second[1]) + scale, scale)


def widest(types: list[str]) -> str | None:
    """The wider type of all of ``types``, left to right; None where one is not found."""
    if not types:
        return None
    result: str | None = types[0]
    for other in types[1:]:
        if result is None:
            return None
        result = wider(result, other)
    return result


def sum_type(arg: str) -> str | None:
    """Sum.resultType: BIGINT for integers, DOUBLE for floats, DECIMAL(p + 10, s)."""
    if arg in _INTEGRAL_ORDER:
        return "BIGINT"
    if arg in ("FLOAT", "DOUBLE"):
        return "DOUBLE"
    found = decimal(arg)
    if found is not None:
        return bounded(found[0] + 10, found[1])
    if arg.startswith("INTERVAL"):
        return arg
    return None


def average_type(arg: str) -> str | None:
    """Average.resultType: DECIMAL(p + 4, s + 4) for decimals, DOUBLE for other numbers."""
    found = decimal(arg)
    if found is not None:
        return bounded(found[0] + 4, found[1] + 4)
    if arg in _NUMERIC_ORDER:
        return "DOUBLE"
    if arg.startswith("INTERVAL"):
        return arg
    return None


def flink_average_type(arg: str) -> str | None:
    """Flink's AVG: the argument's type for integers and FLOAT (an average of INT is an
    INT), DECIMAL(38, max(6, s)) for DECIMAL(p, s), DOUBLE for DOUBLE (asked of Flink 2.3)."""
    found = decimal(arg)
    if found is not None:
        return f"DECIMAL(38, {max(6, found[1])})"
    if arg in _INTEGRAL_ORDER or arg in ("FLOAT", "DOUBLE"):
        return arg
    return None


def interval_type(node: exp.Interval) -> str | None:
    """An interval literal's type: INTERVAL DAY, INTERVAL HOUR TO SECOND, INTERVAL YEAR
    TO MONTH, ... from its units (weeks count in days, fractions of seconds in seconds)."""
    unit = node.args.get("unit")
    if isinstance(unit, exp.IntervalSpan):
        units = [_unit_name(unit.this), _unit_name(unit.expression)]
    elif unit is not None:
        units = [_unit_name(unit)]
    else:
        return None
    if None in units:
        return None
    names = [u for u in units if u is not None]
    order = _YEAR_MONTH_UNITS if names[0] in _YEAR_MONTH_UNITS else _DAY_TIME_UNITS
    if any(u not in order for u in names):
        return None
    first, last = names[0], names[-1]
    if order.index(first) > order.index(last):
        return None
    return f"INTERVAL {first}" if first == last else f"INTERVAL {first} TO {last}"


def _unit_name(unit: exp.Expr) -> str | None:
    name = unit.name.upper().removesuffix("S")
    if name == "WEEK":
        return "DAY"
    if name in ("MILLISECOND", "MICROSECOND"):
        return "SECOND"
    if name in _YEAR_MONTH_UNITS or name in _DAY_TIME_UNITS:
        return name
    return None


def datetime_arithmetic(node: exp.Binary, left: str, right: str) -> str | None:
    """``date/timestamp ± interval`` and ``date/timestamp - date/timestamp``."""
    if not isinstance(node, exp.Add | exp.Sub):
        return None
    if left.startswith("INTERVAL") and right.startswith("INTERVAL"):
        return _interval_union(left, right)
    moments = ("DATE", "TIMESTAMP", "TIMESTAMP_NTZ")
    if left in moments and right.startswith("INTERVAL"):
        moment, interval = left, right
    elif isinstance(node, exp.Add) and right in moments and left.startswith("INTERVAL"):
        moment, interval = right, left
    elif isinstance(node, exp.Sub) and left in moments and right in moments:
        if left == right == "DATE":
            return "INTERVAL DAY"
        return "INTERVAL DAY TO SECOND"
    else:
        return None
    if moment != "DATE":
        return moment
    if interval.startswith("INTERVAL YEAR") or interval.startswith("INTERVAL MONTH"):
        return "DATE"
    return "DATE" if interval == "INTERVAL DAY" else "TIMESTAMP"


def rounded(arg: str, scale: int, ceiling: bool) -> str | None:
    """round/bround (``ceiling`` False) and ceil/floor (True) to ``scale`` digits: an
    integer stays (ceil and floor make it BIGINT), a decimal keeps room for one more
    integral digit (Spark's RoundBase and RoundCeil/RoundFloor)."""
    found = decimal(arg)
    if found is None and ceiling and scale != 0:
        found = _INTEGRAL_DECIMAL.get(arg) or _FRACTIONAL_DECIMAL.get(arg)
    if found is not None and ceiling and found[1] == 0 and scale == 0:
        return decimal_text(*found)
    if found is None:
        if arg in _INTEGRAL_ORDER:
            return "BIGINT" if ceiling and scale == 0 else arg
        if arg in ("FLOAT", "DOUBLE"):
            return "BIGINT" if ceiling and scale == 0 else ("DOUBLE" if ceiling else arg)
        return None
    precision, old_scale = found
    integral = precision - old_scale + 1
    if scale < 0:
        return decimal_text(max(integral, -scale + 1), 0)
    new_scale = min(old_scale, scale)
    if ceiling and scale == 0:
        return decimal_text(min(integral, MAX_PRECISION), 0)
    return decimal_text(min(integral + new_scale, MAX_PRECISION), new_scale)


def _interval_units(type_text: str) -> list[str]:
    return [word for word in type_text.removeprefix("INTERVAL ").split() if word != "TO"]


def _interval_union(left: str, right: str) -> str | None:
    """The interval adding two intervals of one family gives: from the larger first unit
    to the smaller last (INTERVAL DAY + INTERVAL HOUR is INTERVAL DAY TO HOUR)."""
    units = _interval_units(left) + _interval_units(right)
    for order in (_YEAR_MONTH_UNITS, _DAY_TIME_UNITS):
        if all(u in order for u in units):
            first = min(units, key=order.index)
            last = max(units, key=order.index)
            return f"INTERVAL {first}" if first == last else f"INTERVAL {first} TO {last}"
    return None


#: Functions whose result type is one type whatever their arguments, where sqlglot's
#: differs (Spark: ``year`` is INT, ``timestampdiff`` BIGINT).
FIXED_RESULTS = {
    "year": "INT", "month": "INT", "day": "INT", "dayofmonth": "INT", "dayofweek": "INT",
    "dayofyear": "INT", "weekofyear": "INT", "weekday": "INT", "quarter": "INT",
    "hour": "INT", "minute": "INT", "timestampdiff": "BIGINT", "array_position": "BIGINT",
    "bit_get": "TINYINT", "getbit": "TINYINT", "week_of_year": "INT", "split_part": "STRING",
}  # fmt: skip
