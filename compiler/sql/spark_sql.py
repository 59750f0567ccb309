"""Spark SQL text for checked expressions: shared by Spark's checks and code generation.

The Spark checks (:mod:`flowc.spark.spark_checks`) call these on every expression of a job and
turn a failure into a located diagnostic, so code generation, which calls them again,
never meets a program it cannot write.
"""

from __future__ import annotations

import threading
from functools import cache

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import SqlglotError
from sqlglot.generator import Generator
from sqlglot.tokens import Tokenizer

from flowc import ast
from flowc.program import FUNCTION_CALL, SourceDef
from flowc.sql.spark_distinct import UnsupportedDistinct, rewrite_distinct
from flowc.sql.spark_patterns import SparkGenerator

#: Column types the datagen connector's generated program can compute.
DATAGEN_TYPES = frozenset(
    {
        "TINYINT",
        "SMALLINT",
        "INT",
        "BIGINT",
        "FLOAT",
        "DOUBLE",
        "BOOLEAN",
        "TIMESTAMP",
        "DATE",
        "STRING",
    }
)


#: What sqlglot's generator raises on a call it cannot write (it assumes well-formed calls:
#: ``regexp_replace(k, n)`` lacks an argument). Narrow, so flowc's own bugs still surface.
GENERATOR_ERRORS = (AttributeError, IndexError, KeyError, TypeError, ValueError, SqlglotError)


class UnsupportedOnSpark(Exception):
    """A construct the Spark backend cannot write; the message says which."""


def quote_name(name: str) -> str:
    """A Spark SQL identifier, always back-quoted (backticks doubled)."""
    return str(exp.to_identifier(name, quoted=True).sql("spark"))


def registered_name(function: str, call: int) -> str:
    """The name the generated program registers a Python function's call under: one per
    call, so a failure inside it names the .flow line of that call."""
    return f"{function}__flowc_{call}"


def with_call_names(tree: exp.Expr) -> exp.Expr:
    """``tree`` with each numbered call of a Python function renamed to its registered
    name (a copy; ``tree`` itself if it calls none)."""
    if not any(FUNCTION_CALL in node.meta for node in tree.find_all(exp.Anonymous)):
        return tree
    renamed = tree.copy()
    for node in renamed.find_all(exp.Anonymous):
        call = node.meta.get(FUNCTION_CALL)
        if isinstance(call, int):
            node.set("this", registered_name(node.name.lower(), call))
    return renamed


def sql_of(expr: ast.SqlExpr) -> str:
    """Spark SQL for a checked expression, identifiers quoted; Python functions' calls
    under their registered names."""
    try:
        return spark_text(with_call_names(expr.tree))
    except GENERATOR_ERRORS:
        raise UnsupportedOnSpark(
            f"cannot write '{expr.text}' in Spark SQL (check the arguments of its functions)"
        ) from None


def aggregate_sql(expr: ast.SqlExpr) -> str:
    """Spark SQL for an AGGREGATE item: :func:`sql_of`, with distinct aggregates in the
    forms Spark runs on a stream (:mod:`flowc.sql.spark_distinct`)."""
    try:
        tree, _ = rewrite_distinct(expr.tree)
    except UnsupportedDistinct as error:
        raise UnsupportedOnSpark(str(error)) from None
    if tree is expr.tree:
        return sql_of(expr)
    try:
        return spark_text(with_call_names(tree))
    except GENERATOR_ERRORS:
        raise UnsupportedOnSpark(
            f"cannot write '{expr.text}' in Spark SQL (check the arguments of its functions)"
        ) from None


def interval_text(expr: ast.SqlExpr) -> str:
    """``INTERVAL 1 MINUTE`` or ``'1 minute'`` → ``'1 minute'`` as Spark's window functions take."""
    tree = expr.tree
    if isinstance(tree, exp.Literal) and tree.is_string:
        return str(tree.this)
    if isinstance(tree, exp.Interval):
        unit = tree.args.get("unit")
        amount = tree.this.name if tree.this is not None else ""
        return f"{amount} {unit.name.lower() if unit is not None else ''}".strip()
    raise UnsupportedOnSpark(f"'{expr.text}' is not an interval")


_MILLIS = {
    "millisecond": 1,
    "second": 1000,
    "minute": 60_000,
    "hour": 3_600_000,
    "day": 86_400_000,
}


def interval_millis(expr: ast.SqlExpr) -> int | None:
    """``INTERVAL 10 MINUTES`` (``'10 minutes'``) in milliseconds; None for any other form
    (months, compound intervals, fractions), which has no fixed length to divide by."""
    try:
        amount, _, unit = interval_text(expr).lower().partition(" ")
    except UnsupportedOnSpark:
        return None
    factor = _MILLIS.get(unit.strip().removesuffix("s"))
    if factor is None or not amount.isdigit():
        return None
    return int(amount) * factor


def watermark_delay(source: SourceDef) -> tuple[str, str]:
    """Spark takes a column and a delay: ``ts - INTERVAL 5 SECONDS`` → ('ts', '5 seconds')."""
    assert source.watermark is not None
    tree = source.watermark.expr.tree
    if isinstance(tree, exp.Column):
        return source.watermark.column, "0 seconds"
    if isinstance(tree, exp.Sub) and isinstance(tree.left, exp.Column):
        delay = ast.SqlExpr(text=tree.right.sql(), tree=tree.right, span=source.watermark.span)
        return source.watermark.column, interval_text(delay)
    raise UnsupportedOnSpark("a WATERMARK other than `column - INTERVAL ...`")


def datagen_supports(type_text: str) -> bool:
    return type_text in DATAGEN_TYPES or type_text.startswith("DECIMAL")


def is_star(tree: exp.Expr) -> bool:
    """``*`` or ``s.*``."""
    return isinstance(tree, exp.Star) or (
        isinstance(tree, exp.Column) and isinstance(tree.this, exp.Star)
    )


def select_columns(
    items: tuple[ast.SelectItem, ...], names: list[str]
) -> list[tuple[ast.SelectItem | None, str]]:
    """Each output column of a SELECT with the item computing it; None for a column a ``*``
    passes through. One ``*`` stands for every column the others do not name by position."""
    stars = [index for index, item in enumerate(items) if is_star(item.expr.tree)]
    if not stars:
        return list(zip(items, names, strict=True))
    if len(stars) > 1:
        raise UnsupportedOnSpark("cannot run a SELECT with more than one *")
    (star,) = stars
    width = len(names) - (len(items) - 1)
    before = list(zip(items[:star], names[:star], strict=True))
    passed: list[tuple[ast.SelectItem | None, str]] = [
        (None, n) for n in names[star : star + width]
    ]
    after = list(zip(items[star + 1 :], names[star + width :], strict=True))
    return [*before, *passed, *after]


#: This thread's Spark generator and tokenizer: both keep the state of what they work on,
#: so threads compiling at once never share them.
_tools = threading.local()


def spark_generator() -> Generator:
    generator: Generator | None = getattr(_tools, "generator", None)
    if generator is None:
        generator = _tools.generator = SparkGenerator(dialect=_spark())
    return generator


def spark_text(tree: exp.Expr) -> str:
    """The Spark SQL flowc hands Spark for ``tree``: identifiers quoted, datetime patterns
    as written (:class:`~flowc.sql.spark_patterns.SparkGenerator`)."""
    generator: Generator | None = getattr(_tools, "identifying", None)
    if generator is None:
        generator = _tools.identifying = SparkGenerator(dialect=_spark(), identify=True)
    return str(generator.generate(tree))


def spark_tokenizer() -> Tokenizer:
    tokenizer: Tokenizer | None = getattr(_tools, "tokenizer", None)
    if tokenizer is None:
        spark = _spark()
        tokenizer = _tools.tokenizer = spark.tokenizer_class(dialect=spark)
    return tokenizer


@cache
def _spark() -> Dialect:
    return Dialect.get_or_raise("spark")


def reversible(type_text: str) -> bool:
    """Whether a TOP can order by a value of this type against the first BY expression's
    direction: an exact number or a time, whose order a number reverses exactly."""
    return type_text in REVERSIBLE_TYPES or type_text.startswith("DECIMAL")


#: The types :func:`reversed_order` turns around, and how it makes each a number.
REVERSIBLE_TYPES = {
    "TINYINT": "CAST({x} AS DECIMAL(20, 0))",
    "SMALLINT": "CAST({x} AS DECIMAL(20, 0))",
    "INT": "CAST({x} AS DECIMAL(20, 0))",
    "BIGINT": "CAST({x} AS DECIMAL(20, 0))",
    "DATE": "unix_date({x})",
    "TIMESTAMP": "unix_micros({x})",
    "TIMESTAMP_NTZ": "unix_micros(CAST({x} AS TIMESTAMP))",
}


def reversed_order(sql: str, type_text: str) -> list[str]:
    """The fields of a TOP's order struct that order ``sql`` (of ``type_text``) against the
    struct's direction: first whether it is NULL (a NULL, lowest in its own direction, is
    then highest: first in ASC, last in DESC, as in its own), then its value negated
    (a wider number, so no negation overflows)."""
    template = REVERSIBLE_TYPES.get(type_text, "{x}")
    return [f"({sql}) IS NULL", f"-({template.format(x=f'({sql})')})"]
