"""What Spark refuses in an expression that sqlglot accepts: functions and literals.

Expressions are Spark SQL (sqlglot parses them, code generation writes them back as
Spark SQL), so a name Spark does not know, or a string literal Spark's ANSI mode cannot
cast, only failed when ``flowc run`` started the query. These checks make ``flowc check``
refuse them, each at its own span:

- E0230: a function the generated Spark SQL calls is not one of Spark's built-in
  functions (``compiler/sql/spark_functions.py``, generated from pyspark), with a "did you
  mean" from that list.
- E0231: a string literal that Spark casts and fails on (``amount > 'large'`` where
  ``amount`` is DOUBLE, ``CAST('abc' AS INT)``). Spark's rules are followed exactly: which
  type the literal is cast to (a comparison with an INT casts it to BIGINT, with a DECIMAL
  to DOUBLE) and which strings that cast accepts (ports of Spark's parsers). Only with ANSI
  mode on (Spark 4's default; ``SET spark.sql.ansi.enabled = false`` turns Spark's failure
  into NULL, and this check off). Written in :mod:`flowc.sql.spark_literals`, with the casts in
  :mod:`flowc.sql.spark_casts`.
- E0232: a window function (``row_number``, ``lag``, ...), which needs ``OVER (...)``, or an
  ``OVER (...)`` window: Spark refuses them on a stream (NON_TIME_WINDOW_NOT_SUPPORTED_IN_
  STREAMING).

This module holds the entry point (:class:`SparkExpressionChecks`), the aggregate tests
the analysis shares, and E0230 and E0232. It never imports pyspark;
``tests/test_spark_functions.py`` checks both the list and the literal rules against the
installed Spark.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

from sqlglot import exp
from sqlglot.tokenizer_core import TokenType

from flowc.ast import SqlExpr, SqlQuery
from flowc.diagnostics import Reporter, did_you_mean
from flowc.errorcodes import Code
from flowc.program import FUNCTION_CALL, FunctionCall, FunctionDef, Settings
from flowc.spans import Span
from flowc.sql.flink_dialect import (
    CURRENT_WATERMARK_HELP,
    CURRENT_WATERMARK_MESSAGE,
    FLINK,
)
from flowc.sql.habits import FLINK_WINDOW_CALLS
from flowc.sql.python_functions import accepts
from flowc.sql.spark_functions import AGGREGATE_FUNCTIONS, FUNCTIONS, WINDOW_FUNCTIONS
from flowc.sql.spark_literals import Positions, check_literals, literal_span
from flowc.sql.spark_sql import GENERATOR_ERRORS, spark_generator, spark_tokenizer
from flowc.sql.sqltypes import (
    UNKNOWN,
    Scope,
    data_type,
    node_span,
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


class SparkExpressionChecks:
    """The checks for one program: ANSI mode and extensions come from its ``SET spark.*``;
    ``functions`` are the Python functions it may call (:mod:`flowc.sql.python_functions`),
    ``calls`` the calls of them met so far."""

    __slots__ = ("ansi", "called", "calls", "extensions", "functions", "positions", "returns")

    def __init__(
        self,
        ansi: bool = True,
        extensions: bool = False,
        functions: Mapping[str, FunctionDef] | None = None,
        broken: frozenset[str] = frozenset(),
    ) -> None:
        self.ansi = ansi
        #: ``spark.sql.extensions`` may register functions flowc cannot know: then a name
        #: missing from Spark's built-in list is not refused.
        self.extensions = extensions
        self.positions: Positions = {}
        self.functions: Mapping[str, FunctionDef] = functions or {}
        #: Return types by name; a function whose declaration failed is of unknown type,
        #: so its calls add no errors of their own.
        self.returns = {name: UNKNOWN for name in broken}
        self.returns.update((name, f.returns) for name, f in self.functions.items())
        self.calls: list[FunctionCall] = []
        #: The functions called at least once, well or not (W0004 is for the others).
        self.called: set[str] = set()

    @staticmethod
    def for_settings(
        settings: Settings,
        functions: Mapping[str, FunctionDef] | None = None,
        broken: frozenset[str] = frozenset(),
    ) -> SparkExpressionChecks:
        conf = dict(settings.spark_conf)
        ansi = conf.get("spark.sql.ansi.enabled", "true").strip().lower() != "false"
        return SparkExpressionChecks(
            ansi=ansi,
            extensions="spark.sql.extensions" in conf,
            functions=functions,
            broken=broken,
        )

    def type(self, expr: SqlExpr, scope: Scope, reporter: Reporter) -> str | None:
        """:func:`flowc.sql.sqltypes.resolve_and_type`, then Spark's checks; None on errors.

        Functions are checked even when a column is unknown (both are reported); literals
        need the types, so only a typed expression has them checked.
        """
        tree = expr.tree
        if isinstance(tree, exp.Star) or (
            isinstance(tree, exp.Column) and isinstance(tree.this, exp.Star)
        ):
            reporter.error(
                Code.E0003,
                f"'{expr.text}' is every column, not a value",
                expr.span,
                help="name the column to read (a * belongs in SELECT *, or in count(*))",
            )
            return None
        result = resolve_and_type(expr, scope, reporter, self.returns)
        text = expr.text
        # Without a parenthesis there is no call (CURRENT_DATE is sqlglot's, and Spark's);
        # without a quote, no string literal: most expressions skip the walks.
        functions_ok = "(" not in text or check_functions(
            expr,
            reporter,
            known_only=not self.extensions,
            positions=self.positions,
            declared=self.returns,
        )
        if self.functions and "(" in text:
            names = {node.name.lower() for node in expr.tree.find_all(exp.Anonymous)}
            self.called.update(names & self.functions.keys())
            if result is not None and functions_ok:
                functions_ok = self._check_calls(expr, reporter)
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
        located = SqlExpr(text=query.text, tree=query.tree, span=query.text_origin)
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
                    if span != query.text_origin:
                        self.positions[(start, end)] = span
        ok = True
        flink = query.dialect == FLINK
        for node, name in _calls(query.tree):
            if flink and name.upper() in FLINK_WINDOW_CALLS:
                continue  # Flink's windows: lower_sql lowers (or refuses) each one
            if flink and name.upper() == "CURRENT_WATERMARK":
                continue  # refused outside a WHERE when parsed; the WHERE's checker reads it
            if name.lower() in WINDOW_FUNCTIONS and node.find_ancestor(exp.Window) is None:
                _report_window_function(located, node, name, reporter, {})
                ok = False
            elif not self.extensions and _unknown(name, self.returns):
                _report_unknown(located, node, name, reporter, {})
                ok = False
        return ok

    def _check_calls(self, expr: SqlExpr, reporter: Reporter) -> bool:
        """Each call of a Python function: its arguments' number (E0283) and types (E0284);
        an argument that needs a widening gets a CAST, so the function is given the type it
        declares. Numbers the call (``node.meta``) and remembers where it is."""
        ok = True
        for node in list(expr.tree.find_all(exp.Anonymous)):
            function = self.functions.get(node.name.lower())
            if function is None:
                continue
            span = call_span(expr, node, self.positions)
            arguments = list(node.expressions)
            if len(arguments) != len(function.params):
                expected = ", ".join(f"{p.name} {p.type}" for p in function.params)
                reporter.error(
                    Code.E0283,
                    f"function '{node.name}' takes {len(function.params)} "
                    f"argument{'s' if len(function.params) != 1 else ''}, "
                    f"not {len(arguments)}",
                    span,
                    help=f"its signature: {function.name}({expected}) RETURNS {function.returns}",
                )
                ok = False
                continue
            for position, (argument, param) in enumerate(
                zip(arguments, function.params, strict=True), start=1
            ):
                given = type_text(argument)
                if not accepts(param.type, given):
                    reporter.error(
                        Code.E0284,
                        f"argument {position} of '{node.name}' is {given}, but its "
                        f"parameter '{param.name}' is {param.type}",
                        node_span(expr, argument),
                        help=f"convert it: CAST({argument.sql('spark')} AS {param.type})",
                    )
                    ok = False
                elif given != param.type:
                    cast = exp.Cast(this=argument.copy(), to=data_type(param.type))
                    cast.type = data_type(param.type)
                    argument.replace(cast)
            if ok and FUNCTION_CALL not in node.meta:
                node.meta[FUNCTION_CALL] = len(self.calls)
                self.calls.append(FunctionCall(function=function.name, span=span))
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
    """Inside an aggregate's arguments, or inside its ``FILTER (WHERE ...)`` clause."""
    parent = node.parent
    while parent is not None:
        if is_aggregate(parent) or (isinstance(parent, exp.Filter) and is_aggregate(parent.this)):
            return True
        parent = parent.parent
    return False


# ---------------------------------------------------------------- E0230, E0232: functions


def check_functions(
    expr: SqlExpr,
    reporter: Reporter,
    known_only: bool = True,
    positions: Positions | None = None,
    declared: Mapping[str, str] | None = None,
) -> bool:
    """Report each call Spark would not resolve (``declared``: the program's Python
    functions, which it will), and OVER windows; False if there was one."""
    positions = positions or {}
    ok = True
    windowed: set[int] = set()
    for window in expr.tree.find_all(exp.Window):
        function = window.this
        if not isinstance(function, exp.Expr) or id(function) in windowed:
            continue
        windowed.add(id(function))
        reporter.error(
            Code.E0232,
            "an OVER (...) window is computed by an EXTEND of OVER calls only (or a SQL "
            "SELECT), not inside this step",
            _over_span(expr, function, positions),
            help="|> EXTEND AGG(x) OVER (PARTITION BY k ORDER BY ts ...) AS name, then read "
            "'name' here (docs/language.md, \"OVER windows\"); or aggregate per key (|> KEY "
            "BY k |> AGGREGATE ...) or over time with WINDOW TUMBLE/HOP/SESSION",
        )
        ok = False
    for node, name in _calls(expr.tree):
        if name.lower() in WINDOW_FUNCTIONS:
            if id(node) not in windowed:
                _report_window_function(expr, node, name, reporter, positions)
                ok = False
        elif known_only and _unknown(name, declared):
            _report_unknown(expr, node, name, reporter, positions)
            ok = False
    return ok


def _unknown(name: str, declared: Mapping[str, str] | None = None) -> bool:
    lowered = name.lower()
    return (
        lowered not in FUNCTIONS
        and lowered not in _GRAMMAR
        and (declared is None or lowered not in declared)
    )


def _report_unknown(
    expr: SqlExpr, node: exp.Expr, name: str, reporter: Reporter, positions: Positions
) -> None:
    if name.upper() == "CURRENT_WATERMARK":  # Flink's, read by a WHERE or SELECT step only
        reporter.error(
            Code.E0610,
            CURRENT_WATERMARK_MESSAGE,
            call_span(expr, node, positions),
            help=CURRENT_WATERMARK_HELP,
        )
        return
    reporter.error(
        Code.E0230,
        f"unknown function '{name}'",
        call_span(expr, node, positions),
        help=_PROCTIME_HELP if name.lower() == "proctime" else _function_hint(node, name),
    )


#: PROCTIME() outside a source's columns: flowc reads it only as a declared column (and,
#: inline, as a ROW_NUMBER's ORDER BY ... ASC kept at rn = 1, Flink's deduplication).
_PROCTIME_HELP = (
    "declare the processing time as a column of the source (`pt AS PROCTIME()` among its "
    "columns) and read pt here: flowc takes PROCTIME() inline only as ROW_NUMBER() OVER "
    "(PARTITION BY k ORDER BY PROCTIME() ASC) kept at rn = 1"
)


def _report_window_function(
    expr: SqlExpr, node: exp.Expr, name: str, reporter: Reporter, positions: Positions
) -> None:
    reporter.error(
        Code.E0232,
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
    generator = spark_generator()
    dispatch: dict[type, Any] | None = getattr(generator, "_dispatch", None)
    if dispatch is not None and node.__class__ not in dispatch:
        return [str(generator.function_name(node))]
    try:
        own = Counter(_calls_in(generator.generate(node)))
        for child in node.iter_expressions():
            own.subtract(_calls_in(generator.generate(child)))
    except GENERATOR_ERRORS:
        return []  # sqlglot cannot write it: reported where the program's SQL is written
    return [name for name, count in own.items() if count > 0]


#: This thread's Spark generator and tokenizer: both keep the state of what they work on,
#: so threads compiling at once never share them.


_NOT_NAMES = frozenset({TokenType.STRING, TokenType.NUMBER, TokenType.IDENTIFIER})


def _calls_in(sql: str) -> list[str]:
    """Names directly followed by ``(`` in Spark SQL text (quoted identifiers are not)."""
    tokens = spark_tokenizer().tokenize(sql)
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
