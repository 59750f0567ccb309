"""What Spark refuses in an expression that sqlglot accepts: functions and literals.

Expressions are Spark SQL (sqlglot parses them, code generation writes them back as
Spark SQL), so a name Spark does not know, or a string literal Spark's ANSI mode cannot
cast, only failed when ``flowc run`` started the query. These checks make ``flowc check``
refuse them, each at its own span:

- E0230: a function the generated Spark SQL calls is not one of Spark's built-in
  functions (``compiler/spark_functions.py``, generated from pyspark), with a "did you
  mean" from that list.
- E0231: a string literal that Spark casts and fails on (``amount > 'large'`` where
  ``amount`` is DOUBLE, ``CAST('abc' AS INT)``). Spark's rules are followed exactly: which
  type the literal is cast to (a comparison with an INT casts it to BIGINT, with a DECIMAL
  to DOUBLE) and which strings that cast accepts (the parsers below are ports of Spark's).
  Only with ANSI mode on (Spark 4's default; ``SET spark.sql.ansi.enabled = false``
  turns Spark's failure into NULL, and this check off).
- E0232: a window function (``row_number``, ``lag``, ...), which needs ``OVER (...)``, or an
  ``OVER (...)`` window: Spark refuses them on a stream (NON_TIME_WINDOW_NOT_SUPPORTED_IN_
  STREAMING).

This module never imports pyspark; ``tests/test_spark_functions.py`` checks both the list
and the literal rules against the installed Spark.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation
from functools import cache
from typing import Any

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.tokenizer_core import TokenType

from flowc.ast import SqlExpr, SqlQuery
from flowc.diagnostics import Reporter, did_you_mean
from flowc.program import Settings
from flowc.spans import Span
from flowc.spark_functions import AGGREGATE_FUNCTIONS, FUNCTIONS, WINDOW_FUNCTIONS
from flowc.sqltypes import (
    UNKNOWN,
    Scope,
    TypeSyntaxError,
    normalize_type,
    resolve_and_type,
    sub_span,
    type_text,
)

#: Words Spark's grammar reads before a parenthesis without looking a function up:
#: keywords in front of a bracketed operand (``x IN (...)``, ``WHEN (a) THEN (b)``,
#: ``OVER (...)``, ``WITHIN GROUP (...)``) and the grammar's own calls that are not in
#: the function registry (``TRY_CAST(x AS INT)``, ``TIMESTAMPADD(HOUR, 1, ts)``).
_GRAMMAR = frozenset(
    {
        "all", "and", "any", "as", "between", "by", "case", "cast", "current", "distinct",
        "else", "end", "escape", "exists", "extract", "filter", "following", "for", "from",
        "group", "identifier", "ilike", "in", "interval", "is", "like", "not", "nulls", "on",
        "or", "order", "over", "partition", "preceding", "range", "regexp", "rlike", "row",
        "rows", "some", "then", "timestampadd", "timestampdiff", "try_cast", "unbounded",
        "using", "values", "when", "within",
    }
)  # fmt: skip

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


# ---------------------------------------------------------------- the entry point


#: Where calls and string literals of a SQL query stand in the file, by the positions
#: sqlglot gave them in the query's text: a query's expressions are rewritten into pipe
#: steps with new text, but their nodes keep those positions.
Positions = dict[tuple[int, int], Span]


class SparkExpressionChecks:
    """The checks for one program: ANSI mode and extensions come from its ``SET spark.*``."""

    __slots__ = ("ansi", "extensions", "positions")

    def __init__(self, ansi: bool = True, extensions: bool = False) -> None:
        self.ansi = ansi
        #: ``spark.sql.extensions`` may register functions flowc cannot know: then a name
        #: missing from Spark's built-in list is not refused.
        self.extensions = extensions
        self.positions: Positions = {}

    @staticmethod
    def for_settings(settings: Settings) -> SparkExpressionChecks:
        conf = dict(settings.spark_conf)
        ansi = conf.get("spark.sql.ansi.enabled", "true").strip().lower() != "false"
        return SparkExpressionChecks(ansi=ansi, extensions="spark.sql.extensions" in conf)

    def type(self, expr: SqlExpr, scope: Scope, reporter: Reporter) -> str | None:
        """:func:`flowc.sqltypes.resolve_and_type`, then Spark's checks; None on errors.

        Functions are checked even when a column is unknown (both are reported); literals
        need the types, so only a typed expression has them checked.
        """
        result = resolve_and_type(expr, scope, reporter)
        text = expr.text
        # Without a parenthesis there is no call (CURRENT_DATE is sqlglot's, and Spark's);
        # without a quote, no string literal: most expressions skip the walks.
        functions_ok = "(" not in text or check_functions(
            expr, reporter, known_only=not self.extensions, positions=self.positions
        )
        if result is None or not functions_ok:
            return None
        if (
            self.ansi
            and ("'" in text or '"' in text)
            and not check_literals(expr, reporter, self.positions)
        ):
            return None
        return result

    def sql_query(self, query: SqlQuery, reporter: Reporter) -> bool:
        """Check a SQL query's calls before it is lowered to pipe steps; False on errors.

        An unknown aggregate is then "unknown function", not "neither grouped nor
        aggregated", and is reported at its place in the query. (OVER windows are the
        lowering's to refuse.) Remembers the query's positions for the steps it becomes.
        """
        located = SqlExpr(text=query.text, tree=query.tree, span=query.span)
        self.positions = {}
        for node in query.tree.walk():
            if isinstance(node, exp.Literal | exp.Func):
                meta = node._meta or {}
                start, end = meta.get("start"), meta.get("end")
                if isinstance(start, int) and isinstance(end, int):
                    span = (
                        literal_span(located, node)
                        if isinstance(node, exp.Literal)
                        else call_span(located, node)
                    )
                    if span != query.span:
                        self.positions[(start, end)] = span
        ok = True
        for node, name in _calls(query.tree):
            if name.lower() in WINDOW_FUNCTIONS and node.find_ancestor(exp.Window) is None:
                _report_window_function(located, node, name, reporter, {})
                ok = False
            elif not self.extensions and _unknown(name):
                _report_unknown(located, node, name, reporter, {})
                ok = False
        return ok


# ---------------------------------------------------------------- aggregates


def is_aggregate(node: exp.Expr) -> bool:
    """An aggregate call: one sqlglot knows (but not a window function such as ``lag``,
    which sqlglot counts among them), or a Spark aggregate sqlglot leaves anonymous
    (``mean``, ``std``, ``every``, ``try_sum``, ...)."""
    if isinstance(node, exp.AggFunc):
        return node.sql_name().lower() not in WINDOW_FUNCTIONS
    return isinstance(node, exp.Anonymous) and node.name.lower() in AGGREGATE_FUNCTIONS


def has_aggregate(tree: exp.Expr) -> bool:
    return any(is_aggregate(node) for node in tree.walk())


def inside_aggregate(node: exp.Expr) -> bool:
    parent = node.parent
    while parent is not None:
        if is_aggregate(parent):
            return True
        parent = parent.parent
    return False


# ---------------------------------------------------------------- E0230, E0232: functions


def check_functions(
    expr: SqlExpr, reporter: Reporter, known_only: bool = True, positions: Positions | None = None
) -> bool:
    """Report each call Spark would not resolve, and OVER windows; False if there was one."""
    positions = positions or {}
    ok = True
    windowed: set[int] = set()
    for window in expr.tree.find_all(exp.Window):
        function = window.this
        if not isinstance(function, exp.Expr) or id(function) in windowed:
            continue
        windowed.add(id(function))
        reporter.error(
            "E0232",
            "OVER (...) windows are not supported in streaming queries",
            _over_span(expr, function, positions),
            help="aggregate per key instead (|> KEY BY k |> AGGREGATE ...), or over time "
            "with WINDOW TUMBLE/HOP/SESSION",
        )
        ok = False
    for node, name in _calls(expr.tree):
        if name.lower() in WINDOW_FUNCTIONS:
            if id(node) not in windowed:
                _report_window_function(expr, node, name, reporter, positions)
                ok = False
        elif known_only and _unknown(name):
            _report_unknown(expr, node, name, reporter, positions)
            ok = False
    return ok


def _unknown(name: str) -> bool:
    lowered = name.lower()
    return lowered not in FUNCTIONS and lowered not in _GRAMMAR


def _report_unknown(
    expr: SqlExpr, node: exp.Expr, name: str, reporter: Reporter, positions: Positions
) -> None:
    reporter.error(
        "E0230",
        f"unknown function '{name}'",
        call_span(expr, node, positions),
        help=_function_hint(node, name),
    )


def _report_window_function(
    expr: SqlExpr, node: exp.Expr, name: str, reporter: Reporter, positions: Positions
) -> None:
    reporter.error(
        "E0232",
        f"window function '{name.lower()}' needs OVER (...), which streaming queries "
        "do not support",
        call_span(expr, node, positions),
        help="aggregate per key instead (|> KEY BY k |> AGGREGATE ...), or over time "
        "with WINDOW TUMBLE/HOP/SESSION",
    )


def _function_hint(node: exp.Expr, name: str) -> str:
    candidates = [f for f in FUNCTIONS if _NAME.fullmatch(f)]
    hint = did_you_mean(name.lower(), candidates)
    if not isinstance(node, exp.Anonymous):
        # sqlglot read the call as one of its own functions and writes it under this name
        written = f"sqlglot writes this call as {name}(...) in Spark SQL, which Spark lacks"
        return f"{written}; {hint}" if hint else written
    return hint or "Spark's built-in functions are listed by SHOW FUNCTIONS"


def _calls(tree: exp.Expr) -> Iterator[tuple[exp.Expr, str]]:
    """Each function call of the Spark SQL generated for ``tree``: (node, name called)."""
    for node in tree.walk():
        if isinstance(node, exp.Anonymous):
            yield node, node.name
        elif isinstance(node, exp.Func):
            for name in _names_called(node):
                yield node, name


def _names_called(node: exp.Func) -> list[str]:
    """The function names ``node`` itself writes in Spark SQL (not those of its arguments).

    A class sqlglot writes with its generic rule is ``NAME(args)``; a class with its own
    generator may write anything (``STRPOS`` → ``LOCATE``, ``DATE 'x'`` → ``CAST``), so the
    calls in its SQL, less those in its arguments' SQL, are its own.
    """
    generator = _generator()
    dispatch: dict[type, Any] | None = getattr(generator, "_dispatch", None)
    if dispatch is not None and node.__class__ not in dispatch:
        return [str(generator.function_name(node))]
    try:
        own = Counter(_calls_in(generator.generate(node)))
        for child in node.iter_expressions():
            own.subtract(_calls_in(generator.generate(child)))
    except (SqlglotError, AttributeError, IndexError, KeyError, TypeError, ValueError):
        return []  # sqlglot cannot write it: reported where the program's SQL is written
    return [name for name, count in own.items() if count > 0]


#: This thread's Spark generator and tokenizer: both keep the state of what they work on,
#: so threads compiling at once never share them.
_tools = threading.local()


def _generator() -> Any:
    generator = getattr(_tools, "generator", None)
    if generator is None:
        generator = _tools.generator = _spark().generator()
    return generator


def _tokenizer() -> Any:
    tokenizer = getattr(_tools, "tokenizer", None)
    if tokenizer is None:
        spark = _spark()
        tokenizer = _tools.tokenizer = spark.tokenizer_class(dialect=spark)
    return tokenizer


@cache
def _spark() -> Any:
    from sqlglot.dialects.dialect import Dialect

    return Dialect.get_or_raise("spark")


_NOT_NAMES = frozenset({TokenType.STRING, TokenType.NUMBER, TokenType.IDENTIFIER})


def _calls_in(sql: str) -> list[str]:
    """Names directly followed by ``(`` in Spark SQL text (quoted identifiers are not)."""
    tokens = _tokenizer().tokenize(sql)
    out = []
    for i, token in enumerate(tokens[:-1]):
        if tokens[i + 1].token_type is not TokenType.L_PAREN:
            continue
        if token.token_type in _NOT_NAMES or not _NAME.fullmatch(token.text):
            continue
        if i > 0 and tokens[i - 1].token_type is TokenType.DOT:
            continue
        out.append(token.text)
    return out


def _over_span(expr: SqlExpr, function: exp.Expr, positions: Positions) -> Span:
    """From the windowed call's name to the end of its ``OVER (...)``, when the text shows
    them next to each other; else the call's span."""
    span = call_span(expr, function, positions)
    meta = function._meta or {}
    start, end = meta.get("start"), meta.get("end")
    if span == expr.span or not isinstance(start, int) or not isinstance(end, int):
        return span
    call_end = _closing_paren(expr.text, end + 1)
    if call_end is None:
        return span
    over = re.match(r"\s*OVER\b", expr.text[call_end:], re.IGNORECASE)
    if over is None:
        return span
    close = _closing_paren(expr.text, call_end + over.end())
    return sub_span(expr, start, close) if close is not None else span


def call_span(expr: SqlExpr, node: exp.Expr, positions: Positions | None = None) -> Span:
    """The span of a call: its name to its closing parenthesis.

    sqlglot keeps the position of a call's name. Where it does not match the text (an
    expression rewritten from a SQL query), ``positions`` may know where it was; else the
    expression's own span is used.
    """
    meta = node._meta or {}
    start, end = meta.get("start"), meta.get("end")
    text = expr.text
    if not isinstance(start, int) or not isinstance(end, int) or not 0 <= start <= end:
        return expr.span
    name = text[start : end + 1]
    close = _closing_paren(text, end + 1)
    if (
        not _NAME.fullmatch(name)
        or (isinstance(node, exp.Anonymous) and name.lower() != node.name.lower())
        or close is None
    ):
        return (positions or {}).get((start, end), expr.span)
    return sub_span(expr, start, close)


def _closing_paren(text: str, position: int) -> int | None:
    """Just past the ``)`` closing the ``(`` that follows ``position`` (blanks allowed)."""
    i = position
    while i < len(text) and text[i].isspace():
        i += 1
    if i >= len(text) or text[i] != "(":
        return None
    depth = 0
    quote: str | None = None
    while i < len(text):
        char = text[i]
        if quote is not None:
            if char == "\\":
                i += 1
            elif char == quote:
                quote = None
        elif char in "'\"`":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


# ---------------------------------------------------------------- E0231: literals


_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.NullSafeNEQ)
_ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.IntDiv)
_BINARY = (*_COMPARISONS, *_ARITHMETIC)
_INTEGRAL = frozenset({"TINYINT", "SMALLINT", "INT", "BIGINT"})
_FRACTIONAL = frozenset({"FLOAT", "DOUBLE"})


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
        reporter.error("E0231", message, span, help=_cast_help(cast))
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
    if other in _INTEGRAL:
        return "BIGINT"
    if other in _FRACTIONAL or other.startswith("DECIMAL"):
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
        return str(_generator().generate(node)).upper().startswith("CAST(")
    except (SqlglotError, AttributeError, IndexError, KeyError, TypeError, ValueError):
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
    if target in _INTEGRAL:
        what = "write a whole number without quotes"
        if cast.other is not None and cast.other not in _INTEGRAL:
            what = "write a number without quotes"
    elif target in _FRACTIONAL or target.startswith("DECIMAL"):
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


# ---------------------------------------------------------------- Spark's string casts


def spark_can_cast(value: str, target: str) -> bool:
    """Whether Spark's ANSI ``CAST(value AS target)`` succeeds for a string ``value``.

    Ports of Spark's parsers (UTF8String.toLongExact, Java's Double.parseDouble and Spark's
    special values, Decimal.fromStringANSI, SparkDateTimeUtils.stringToDate and
    parseTimestampString, StringUtils.isTrueString). A type not handled here is assumed to
    cast: the check never refuses what Spark might accept.
    """
    if target in _INTEGRAL:
        return _integral(value, target)
    if target in _FRACTIONAL:
        return _fractional(value)
    if target.startswith("DECIMAL"):
        return _decimal(value, target)
    if target == "DATE":
        return _special_datetime(value) or _date(value)
    if target in ("TIMESTAMP", "TIMESTAMP_NTZ"):
        return _special_datetime(value) or _timestamp(value, ntz=target == "TIMESTAMP_NTZ")
    if target == "BOOLEAN":
        return _trim_all(value).lower() in _BOOLEANS
    return True


_BOOLEANS = frozenset({"t", "true", "y", "yes", "1", "f", "false", "n", "no", "0"})
_INTEGRAL_RANGE = {
    "TINYINT": 2**7,
    "SMALLINT": 2**15,
    "INT": 2**31,
    "BIGINT": 2**63,
}


def _is_blank(char: str) -> bool:
    """What Spark trims byte by byte (Java's isWhitespace or isISOControl of a byte): ASCII
    controls and the space. A byte of a multi-byte character is negative, so never trimmed."""
    code = ord(char)
    return code <= 0x20 or code == 0x7F


def _trim_all(value: str) -> str:
    start, end = 0, len(value)
    while start < end and _is_blank(value[start]):
        start += 1
    while end > start and _is_blank(value[end - 1]):
        end -= 1
    return value[start:end]


def _java_trim(value: str) -> str:
    """Java's String.trim: characters up to U+0020 at both ends."""
    return value.strip("".join(chr(c) for c in range(0x21)))


def _integral(value: str, target: str) -> bool:
    """UTF8String.toLongExact / toIntExact / ...: sign and digits, no fraction, in range."""
    text = _trim_all(value)
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        return False
    if len(text.lstrip("+-").lstrip("0")) > 19:  # beyond BIGINT (and Python's int() limit)
        return False
    limit = _INTEGRAL_RANGE[target]
    return -limit <= int(text) < limit


_DIGITS = r"[0-9]+"
_EXPONENT = rf"[eE][+-]?{_DIGITS}"
_HEX = r"[0-9a-fA-F]+"
_JAVA_DOUBLE = re.compile(
    rf"[+-]?(NaN|Infinity|((({_DIGITS}(\.)?({_DIGITS})?({_EXPONENT})?)|"
    rf"(\.{_DIGITS}({_EXPONENT})?)|"
    rf"((0[xX]{_HEX}(\.)?)|(0[xX]({_HEX})?\.{_HEX}))[pP][+-]?{_DIGITS})[fFdD]?))"
)
#: Cast.processFloatingPointSpecialLiterals (lower case, after Java's trim).
_SPECIAL_DOUBLES = frozenset({"inf", "+inf", "infinity", "+infinity", "-inf", "-infinity", "nan"})


def _fractional(value: str) -> bool:
    """Java's Double.parseDouble, then Spark's special literals (``inf``, ``nan``, ...)."""
    text = _java_trim(value)
    return bool(_JAVA_DOUBLE.fullmatch(text)) or text.lower() in _SPECIAL_DOUBLES


#: java.math.BigDecimal(String): its digits are any Unicode decimal digits (``\d``), as
#: Character.digit reads them; the exponent's too.
_JAVA_BIG_DECIMAL = re.compile(r"[+-]?((\d+(\.(\d+)?)?)|(\.\d+))([eE][+-]?\d+)?")


def _decimal(value: str, target: str) -> bool:
    """Decimal.fromStringANSI, then the cast to DECIMAL(p, s): rounding half up, in range."""
    text = _java_trim(value)
    if not _JAVA_BIG_DECIMAL.fullmatch(text):
        return False
    match = re.fullmatch(r"DECIMAL(?:\((\d+),\s*(\d+)\))?", target)
    if match is None:
        return True
    precision = int(match.group(1) or 10)
    scale = int(match.group(2) or 0)
    context = Context(prec=100)
    try:
        number = Decimal(text)
        if number.adjusted() >= 38:  # more integral digits than any Spark DECIMAL holds
            return False
        rounded = number.quantize(Decimal(1).scaleb(-scale), ROUND_HALF_UP, context)
    except (InvalidOperation, ValueError):
        return False
    return rounded.is_zero() or rounded.adjusted() < precision - scale


_SPECIAL_DATETIMES = frozenset({"epoch", "now", "today", "yesterday", "tomorrow"})


def _special_datetime(value: str) -> bool:
    """Spark's special date and timestamp values (SparkDateTimeUtils.extractSpecialValue):
    a word, then optionally a time zone, which ``now`` may not have.

    (A zone that does not exist fails in Spark; it is accepted here.)
    """
    match = re.fullmatch(r"([A-Za-z]+)[ \t]*(.*)", _java_trim(value), re.DOTALL)
    if match is None or len(match.group(0)) < 3:
        return False
    word, zone = match.group(1).lower(), match.group(2)
    return word in _SPECIAL_DATETIMES and not (zone and word == "now")


def _date(value: str) -> bool:
    """SparkDateTimeUtils.stringToDate."""
    text = _trim_all(value)
    if not text:
        return False
    sign = 1
    j = 0
    if text[0] in "+-":
        sign = -1 if text[0] == "-" else 1
        j = 1
    segments = [1, 1, 1]
    i = 0
    current = 0
    digits = 0

    def valid(segment: int, count: int) -> bool:
        return (segment == 0 and 4 <= count <= 7) or (segment != 0 and 0 < count <= 2)

    while j < len(text) and i < 3 and text[j] not in " T":
        char = text[j]
        if i < 2 and char == "-":
            if not valid(i, digits):
                return False
            segments[i] = current
            current = digits = 0
            i += 1
        elif "0" <= char <= "9":
            current = current * 10 + int(char)
            digits += 1
        else:
            return False
        j += 1
    if not valid(i, digits):
        return False
    if i < 2 and j < len(text):
        return False
    segments[i] = current
    return _valid_date(sign * segments[0], segments[1], segments[2])


def _valid_date(year: int, month: int, day: int) -> bool:
    """java.time.LocalDate.of: years -999999999..999999999, proleptic Gregorian."""
    if not -999_999_999 <= year <= 999_999_999 or not 1 <= month <= 12 or day < 1:
        return False
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    days = [31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
    return day <= days


def _timestamp(value: str, ntz: bool) -> bool:
    """SparkDateTimeUtils.parseTimestampString, and the date and time it builds.

    The zone part (after the seconds) is accepted whatever it is: Spark resolves it with
    Java's ZoneId, which this check does not repeat.
    """
    text = _trim_all(value)
    if not text:
        return False
    leading = value.index(text[0])  # Spark's index j counts from the untrimmed start
    segments = [1, 1, 1, 0, 0, 0, 0, 0, 0]
    i = 0
    current = 0
    digits = 0
    j = 0
    just_time = False
    year_sign: int | None = None

    def valid(segment: int, count: int) -> bool:
        return (
            segment == 6
            or (segment == 0 and 4 <= count <= 6)
            or (segment == 7 and count <= 2)
            or (segment not in (0, 6, 7) and 0 < count <= 2)
        )

    if text[0] in "+-":
        year_sign = -1 if text[0] == "-" else 1
        j = 1
    while j < len(text):
        char = text[j]
        if not "0" <= char <= "9":
            if j + leading == 0 and char == "T":
                just_time = True
                i += 3
            elif i < 2:
                if char == "-":
                    if not valid(i, digits):
                        return False
                    segments[i] = current
                    current = digits = 0
                    i += 1
                elif i == 0 and char == ":" and year_sign is None:
                    just_time = True
                    if not valid(3, digits):
                        return False
                    segments[3] = current
                    current = digits = 0
                    i = 4
                else:
                    return False
            elif i == 2:
                if char not in " T" or not valid(i, digits):
                    return False
                segments[i] = current
                current = digits = 0
                i += 1
            elif i in (3, 4):
                if char != ":" or not valid(i, digits):
                    return False
                segments[i] = current
                current = digits = 0
                i += 1
            elif i in (5, 6):
                if not valid(i, digits):
                    return False
                segments[i] = current
                current = digits = 0
                i += 1
                if not (char == "." and i == 6):
                    j = len(text) - 1  # the rest is a zone id: accepted, see above
                if i == 6 and char != ".":
                    i += 1
            else:
                if i < len(segments) and char in ": ":
                    if not valid(i, digits):
                        return False
                    segments[i] = current
                    current = digits = 0
                    i += 1
                else:
                    return False
        else:
            if i != 6 or digits < 6:
                current = current * 10 + int(char)
            digits += 1
        j += 1
    if i >= len(segments) or not valid(i, digits):
        return False
    segments[i] = current
    if ntz and just_time:
        return False
    hour, minute, second = segments[3], segments[4], segments[5]
    if not (0 <= hour <= 23 and 0 <= minute <= 59 and 0 <= second <= 59):
        return False
    return just_time or _valid_date(segments[0] * (year_sign or 1), segments[1], segments[2])
