"""Spark's datetime patterns: which ones Spark refuses, decided before anything runs.

Spark builds a formatter from a pattern the first time a row needs it (in a streaming
query: in the first micro-batch with data), so a pattern it refuses fails the running
query. This mirrors Spark's rules (``DateTimeFormatterHelper.convertIncompatiblePattern``,
then Java's ``DateTimeFormatterBuilder.appendPattern``) as measured on Spark 4.3 under its
default time parser policy: tests/test_spark_parser_corpus.py runs every letter A-Z a-z
at counts 1-12 and the special characters through Spark and compares.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Iterator
from typing import ClassVar

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.generators.spark import SparkGenerator as _SparkGenerator
from sqlglot.parsers.spark import SparkParser as _SparkParser
from sqlglot.time import format_time

from flowc.fast_dataclass import dataclass
from flowc.sql.spark_typing import INTEGER_TYPES, decimal

#: Letter -> the counts Spark formats with (None: any count). Every other ASCII letter is
#: refused at any count: week-based fields (Y w W e c u), 'A n N p' (Spark's unsupported
#: list) and letters Java does not know.
_FORMAT_COUNTS: dict[str, frozenset[int] | None] = {
    "G": frozenset(range(1, 5)),
    "y": frozenset(range(1, 7)),
    "D": frozenset(range(1, 4)),
    "M": frozenset(range(1, 5)),
    "L": frozenset(range(1, 5)),
    "d": frozenset({1, 2}),
    "Q": frozenset(range(1, 5)),
    "q": frozenset(range(1, 5)),
    "E": frozenset(range(1, 5)),
    "F": frozenset({1}),
    "a": frozenset({1}),
    "h": frozenset({1, 2}),
    "K": frozenset({1, 2}),
    "k": frozenset({1, 2}),
    "H": frozenset({1, 2}),
    "m": frozenset({1, 2}),
    "s": frozenset({1, 2}),
    "S": frozenset(range(1, 10)),
    "g": None,
    "V": frozenset({2}),
    "v": frozenset({1, 4}),
    "z": frozenset(range(1, 5)),
    "O": frozenset({1, 4}),
    "X": frozenset(range(1, 6)),
    "x": frozenset(range(1, 6)),
    "Z": frozenset(range(1, 6)),
}

#: Letters Spark formats with but refuses in a pattern it parses text with.
_NOT_FOR_PARSING = frozenset("EFQq")

#: Why a letter Spark refuses is refused, for the message.
_WEEK_BASED = frozenset("YwWecu")

#: What to write instead of a refused letter.
_INSTEAD = {
    "Y": "'y' (year); for the week-based year use extract(YEAROFWEEK FROM ts)",
    "w": "extract(WEEK FROM ts) for the week of the year",
    "W": "extract(WEEK FROM ts) for the week; Spark has no week-of-month pattern",
    "e": "'E' (day-of-week text) or dayofweek(ts)",
    "c": "'E' (day-of-week text) or dayofweek(ts)",
    "u": "'E' (day-of-week text) or dayofweek(ts); 'y' for the year",
    "T": "quote literal text: \"yyyy-MM-dd'T'HH:mm\" or 'yyyy-MM-dd''T''HH:mm'",
    "A": "'S' (fraction of second) and 'm', 's'",
    "n": "'S' (fraction of second)",
    "N": "'S' (fraction of second)",
    "p": "padding is not supported; write the field with more letters",
}

#: Where a letter's reason is the pattern being parsed rather than formatted.
_PARSING_INSTEAD = {
    "E": "leave the day-of-week out of a parsing pattern",
    "F": "leave it out of a parsing pattern",
    "Q": "leave the quarter out of a parsing pattern",
    "q": "leave the quarter out of a parsing pattern",
}


@dataclass(frozen=True, slots=True)
class PatternProblem:
    """Why Spark refuses a pattern: the message, what to write instead, and where in the
    pattern (``[start, end)`` of its characters)."""

    message: str
    hint: str
    start: int
    end: int


def pattern_problem(pattern: str, parsing: bool) -> PatternProblem | None:
    """What Spark refuses in ``pattern`` (None: it builds a formatter from it).

    ``parsing``: the pattern reads text into a datetime (to_timestamp, to_date,
    unix_timestamp, a source's timestampFormat) rather than writes one (date_format,
    from_unixtime).
    """
    index = 0
    depth = 0
    length = len(pattern)
    while index < length:
        char = pattern[index]
        if char in string.ascii_letters:
            end = index
            while end < length and pattern[end] == char:
                end += 1
            problem = _letters(char, end - index, parsing, index, end)
            if problem is not None:
                return problem
            index = end
        elif char == "'":
            end = index + 1  # as Java's appendPattern: '' inside quotes is a quote
            while end < length:
                if pattern[end] == "'":
                    if end + 1 < length and pattern[end + 1] == "'":
                        end += 1
                    else:
                        break
                end += 1
            if end >= length:
                return PatternProblem(
                    "the pattern ends inside quoted text (a ' without its closing ')",
                    "close the quote; write '' for a quote character",
                    index,
                    length,
                )
            index = end + 1
        elif char == "[":
            depth += 1
            index += 1
        elif char == "]":
            if depth == 0:
                return PatternProblem(
                    "the pattern has a ']' without an opening '['",
                    "'[...]' marks an optional section; to write a bracket, quote it: ']'",
                    index,
                    index + 1,
                )
            depth -= 1
            index += 1
        elif char in "{}#":
            return PatternProblem(
                f"'{char}' is reserved in Spark's datetime patterns",
                f"quote it: '{char}'",
                index,
                index + 1,
            )
        else:
            index += 1
    return None


def _letters(letter: str, count: int, parsing: bool, start: int, end: int) -> PatternProblem | None:
    run = letter * count
    if letter not in _FORMAT_COUNTS:
        kind = "a week-based field" if letter in _WEEK_BASED else "not a field"
        return PatternProblem(
            f"Spark refuses the pattern letter '{letter}' ({kind}; Spark 3+ datetime patterns)",
            _INSTEAD.get(letter, f"quote literal text: '{letter}'"),
            start,
            end,
        )
    if parsing and letter in _NOT_FOR_PARSING:
        return PatternProblem(
            f"Spark refuses the pattern letter '{letter}' in a pattern that parses text",
            _PARSING_INSTEAD[letter],
            start,
            end,
        )
    counts = _FORMAT_COUNTS[letter]
    if counts is not None and count not in counts:
        allowed = ", ".join(letter * n for n in sorted(counts))
        return PatternProblem(
            f"Spark refuses '{run}': {count} is not a count of '{letter}' it takes",
            f"write one of {allowed}",
            start,
            end,
        )
    return None


# ---------------------------------------------------------------- patterns in expressions

#: Spark's functions that take a datetime pattern as their second argument, and whether
#: the pattern parses text (True) or formats a datetime (False).
PATTERN_FUNCTIONS: dict[str, bool] = {
    "date_format": False,
    "from_unixtime": False,
    "to_timestamp": True,
    "to_timestamp_ltz": True,
    "to_timestamp_ntz": True,
    "try_to_timestamp": True,
    "to_date": True,
    "try_to_date": True,
    "unix_timestamp": True,
    "to_unix_timestamp": True,
}

#: sqlglot's classes for those of the functions its Spark parser knows.
_CLASS_NAMES: dict[type[exp.Expr], str] = {
    exp.TimeToStr: "date_format",
    exp.UnixToStr: "from_unixtime",
    exp.StrToTime: "to_timestamp",
    exp.StrToDate: "to_date",
    exp.TsOrDsToDate: "to_date",
    exp.StrToUnix: "unix_timestamp",
}

#: Meta keys on a call parsed from Spark SQL: the pattern as written (sqlglot's Spark
#: dialect translates it to strftime and back, which is lossy: 'YYYY' and 'y' come back
#: as 'yyyy', 'yyy' as 'yyyyyy', "'day'" as "'dayyyy'") and the function's name.
PATTERN_META = "flowc_spark_pattern"
FUNCTION_META = "flowc_spark_function"
#: Meta key on an aggregate parsed from Flink SQL whose value Flink derives from its
#: argument's type (AVG of integers is an integer; :mod:`flowc.sql.flink_dialect`).
FLINK_AGGREGATE_META = "flowc_flink_aggregate"


def _keeping_pattern(name: str, builder: Callable[..., exp.Expr]) -> Callable[..., exp.Expr]:
    """``builder`` (a parser's function builder), noting the pattern as written on the
    node it builds, with the position of its literal for diagnostics."""

    def build(args: list[exp.Expr], dialect: object) -> exp.Expr:
        try:
            node = builder(args)
        except TypeError:
            node = builder(args, dialect=dialect)
        written = args[1] if len(args) > 1 else None
        if isinstance(written, exp.Literal) and written.is_string:
            node.meta[PATTERN_META] = written.this
            node.meta[FUNCTION_META] = name
            fmt = node.args.get("format")
            if isinstance(fmt, exp.Expr) and written._meta:
                fmt.meta.update(written.meta)
        return node

    return build


class SparkTokenizer(Spark.Tokenizer):
    """Spark's tokenizer, reading ``''`` inside a string as a quote, as Spark 4 does
    (``'it''s'`` is ``it's``; sqlglot read two literals and wrote ``CONCAT('it', 's')``)."""

    STRING_ESCAPES: ClassVar[list[str]] = ["\\", "'"]


class SparkParser(_SparkParser):
    """Spark's parser, keeping each datetime pattern as written."""

    FUNCTIONS: ClassVar[dict[str, Callable[..., exp.Expr]]] = {
        **Spark.Parser.FUNCTIONS,
        **{
            name.upper(): _keeping_pattern(name, Spark.Parser.FUNCTIONS[name.upper()])
            for name in PATTERN_FUNCTIONS
            if name.upper() in Spark.Parser.FUNCTIONS
        },
    }


#: The exact integer types: Flink divides two of them as integers.
_INTEGERS = (exp.DType.TINYINT, exp.DType.SMALLINT, exp.DType.INT, exp.DType.BIGINT)


def is_flink_aggregate(node: exp.Expr) -> bool:
    """Whether ``node`` is an aggregate read from Flink SQL (:data:`FLINK_AGGREGATE_META`)."""
    return bool(node._meta and node._meta.get(FLINK_AGGREGATE_META))


def flink_average(total: exp.Expr, count: exp.Expr, value: str) -> exp.Expr:
    """Flink's AVG of values of type ``value`` from their ``total`` (Spark's sum) and
    ``count``, its type :func:`flowc.sql.spark_typing.flink_average_type`: of integers the
    quotient truncated toward zero (Spark's ``div``, as Flink's long division); of
    DECIMAL(p, s) the sum as DECIMAL(38, s) over the count, which Spark's decimal division
    rounds half up once at scale max(6, s), as Flink's; of FLOAT the average as FLOAT.
    Written for each AVG the Flink dialect reads, and for its DISTINCT form
    (:mod:`flowc.sql.spark_distinct`)."""
    nonzero = exp.Nullif(this=count, expression=exp.Literal.number(0))
    found = decimal(value)
    if value in INTEGER_TYPES:
        return exp.cast(exp.IntDiv(this=exp.paren(total), expression=nonzero), value)
    if found is not None:
        wide = exp.cast(total, f"DECIMAL(38, {found[1]})")
        return exp.cast(exp.Div(this=wide, expression=nonzero), f"DECIMAL(38, {max(6, found[1])})")
    average = exp.cast(exp.Div(this=exp.paren(total), expression=nonzero), "DOUBLE")
    return exp.cast(average, "FLOAT") if value == "FLOAT" else average


class SparkGenerator(_SparkGenerator):
    """Spark's generator, writing each call parsed by :class:`SparkParser` with the
    pattern as written, under the function's own name. The calls are replaced in the
    generator's own copy of the tree before it writes, not in an override of ``sql``: that
    would add a Python frame to every level of every expression, and deep expressions
    would pass the recursion limit the writers keep (docs/limits.md)."""

    def div_sql(self, expression: exp.Div) -> str:
        """Flink's ``/`` (``typed``, :mod:`flowc.sql.flink_dialect`) of two integers as
        Spark's ``div`` (truncating), cast back to the type Flink gives it."""
        left, right = expression.left, expression.right
        typed = expression.args.get("typed")
        if typed and any(
            side.type is None or side.is_type(exp.DType.UNKNOWN) for side in (left, right)
        ):
            # Never guess: Flink's meaning depends on the operands' types.
            raise ValueError("the operands of a Flink division are not typed")
        if typed and all(side.is_type(*_INTEGERS) for side in (left, right)):
            quotient = f"{self.sql(left)} DIV {self.sql(right)}"
            result = expression.type
            if result is not None and result.this in _INTEGERS and result.this != exp.DType.BIGINT:
                return f"CAST({quotient} AS {self.sql(result)})"
            return quotient
        return self.binary(expression, "/")

    def avg_sql(self, expression: exp.Avg) -> str:
        return self._average(expression, None)

    def filter_sql(self, expression: exp.Filter) -> str:
        this = expression.this
        if isinstance(this, exp.Avg) and is_flink_aggregate(this):
            # Each aggregate Flink's AVG is written as filters its own rows.
            return self._average(this, expression.expression)
        where = self.sql(expression, "expression").strip()
        return f"{self.sql(this)} FILTER({where})"

    def _average(self, expression: exp.Avg, where: exp.Expr | None) -> str:
        """Flink's AVG (:data:`FLINK_AGGREGATE_META`) as :func:`flink_average` writes it
        from the sum and the count (each with the FILTER ``where``); Spark's ``avg`` for
        another AVG and for a DOUBLE, whose average both compute alike."""
        if not is_flink_aggregate(expression):
            return self.function_fallback_sql(expression)
        value = expression.this
        if isinstance(value, exp.Distinct) and len(value.expressions) == 1:
            value = value.expressions[0]
        if value.type is None or value.is_type(exp.DType.UNKNOWN):
            # Never guess: Flink's meaning depends on the argument's type.
            raise ValueError("the argument of a Flink AVG is not typed")
        if value.is_type(exp.DType.DOUBLE):
            average: exp.Expr = exp.Avg(this=expression.this.copy())
            if where is not None:
                average = exp.Filter(this=average, expression=where.copy())
            return self.sql(average)
        total: exp.Expr = exp.Sum(this=expression.this.copy())
        count: exp.Expr = exp.Count(this=expression.this.copy())
        if where is not None:
            total = exp.Filter(this=total, expression=where.copy())
            count = exp.Filter(this=count, expression=where.copy())
        return self.sql(flink_average(total, count, str(value.type.sql("spark"))))

    def preprocess(self, expression: exp.Expr) -> exp.Expr:
        expression = super().preprocess(expression)
        for node in list(expression.walk()):
            if node._meta and PATTERN_META in node._meta:
                this = node.this
                if isinstance(this, exp.TimeStrToTime):
                    this = this.this
                call = exp.Anonymous(
                    this=str(node.meta[FUNCTION_META]).upper(),
                    expressions=[this, exp.Literal.string(node.meta[PATTERN_META])],
                )
                if node is expression:
                    expression = call
                else:
                    node.replace(call)
        return expression


@dataclass(frozen=True, slots=True)
class PatternUse:
    """A datetime pattern as Spark will receive it, in a call of ``function``; ``literal``
    is the node to locate it by (None: the pattern is not a literal)."""

    function: str
    pattern: str | None
    parsing: bool
    literal: exp.Expr | None


def pattern_uses(tree: exp.Expr) -> Iterator[PatternUse]:
    """Every call in ``tree`` that hands Spark a datetime pattern, with the pattern the
    generated program writes (:class:`SparkGenerator`)."""
    for node in tree.walk():
        if node._meta and PATTERN_META in node._meta:
            name = str(node.meta[FUNCTION_META])
            fmt = node.args.get("format")
            yield PatternUse(name, str(node.meta[PATTERN_META]), PATTERN_FUNCTIONS[name], fmt)
        elif type(node) in _CLASS_NAMES:
            name = _CLASS_NAMES[type(node)]
            fmt = node.args.get("format")
            if fmt is None:
                continue
            text = _constant(fmt)
            if text is not None:
                text = format_time(text, Spark.INVERSE_TIME_MAPPING, Spark.INVERSE_TIME_TRIE)
            yield PatternUse(name, text, PATTERN_FUNCTIONS[name], fmt)
        elif isinstance(node, exp.Anonymous) and node.name.lower() in PATTERN_FUNCTIONS:
            name = node.name.lower()
            if len(node.expressions) < 2:
                continue
            fmt = node.expressions[1]
            yield PatternUse(name, _constant(fmt), PATTERN_FUNCTIONS[name], fmt)


def _constant(node: exp.Expr) -> str | None:
    """The text of a string literal, or of a CONCAT of them (what sqlglot makes of Spark's
    adjacent literals ``'a' 'b'``, which Spark joins); None for anything else."""
    if isinstance(node, exp.Literal) and node.is_string:
        return str(node.this)
    if isinstance(node, exp.Concat | exp.DPipe):
        parts = [_constant(part) for part in node.expressions or [node.this, node.expression]]
        if all(part is not None for part in parts):
            return "".join(part for part in parts if part is not None)
    return None
