"""No ``${`` in an untrusted program's text (E0958): Spark would read it as a variable.

Spark's SQL parser substitutes ``${...}`` in every text it parses (expressions given to
``F.expr``, view names, ...) before it reads the SQL: ``${env:VAR}``, ``${system:prop}``
and ``${spark:key}`` are the environment, the JVM's properties and Spark's settings, and
an unset ``${hivevar:x}`` is the empty string, which can end a comment early and make
commented text code. flowc turns that substitution off on every session it runs
(``spark.sql.variable.substitute=false``); an untrusted program is also refused any
``${`` in the text it hands on, so it stays safe on a session where substitution is back
on. Looked for in:

- every string of the syntax tree (names, option keys and values, types, expressions,
  SQL queries, comments inside them), at each place it is written;
- each string and back-quoted name of an expression after its escapes are read
  (``'$\\{x}'``, ``'\\u0024{x}'`` and ``'\\044{x}'`` are all ``${x}``);
- the Spark SQL flowc writes for each expression, which is the text Spark parses;
- each ``--set`` override.

A ``.flow`` comment between statements never reaches Spark and is not looked at.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import TokenError

from flowc import ast
from flowc.diagnostics import Reporter
from flowc.errorcodes import Code
from flowc.spans import Span
from flowc.sql.spark_sql import GENERATOR_ERRORS, with_call_names
from flowc.sql.sqltypes import sub_span
from flowc.syntax.overrides import Override, shown

#: What Spark's variable substitution (and Hadoop's, in its configuration) starts with.
MARKER = "${"

_HELP = (
    "leave '${' out of the program; a value that must hold it can be built at run time: "
    "concat('$', '{...}')"
)
_WHY = (
    "Spark's SQL variable substitution would replace '${...}' (with the environment, the "
    "JVM's properties or Spark's settings)"
)


def check_text(tree: ast.Program, overrides: Sequence[Override], reporter: Reporter) -> None:
    """E0958 at each ``${`` an untrusted program would hand to Spark."""
    for node in _nodes(tree.statements):
        if isinstance(node, ast.SqlExpr | ast.SqlQuery):
            _check_sql(node, reporter)
        elif isinstance(node, ast.Value):
            _check_value(node, reporter)
        elif isinstance(node, ast.TypeRef):
            _report_all(node.text, node.span, reporter)
        elif isinstance(node, ast.Name) and MARKER in node.value:
            _report(node.span, f"the name '{shown(node.value)}'", reporter)
        elif isinstance(node, ast.Option) and MARKER in node.key:
            _report(node.key_span, f"the key '{shown(node.key)}'", reporter)
    for override in overrides:
        option = override.option()
        if MARKER in option.key:
            _report(option.key_span, f"the key '{shown(option.key)}'", reporter)
        _check_value(option.value, reporter)


def _nodes(root: object) -> Iterator[object]:
    """Every node of a piece of the syntax tree (dataclasses, in tuples), in order."""
    stack: list[object] = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, tuple):
            stack.extend(reversed(node))
        elif dataclasses.is_dataclass(node) and not isinstance(node, type | Span):
            yield node
            if isinstance(node, ast.SqlExpr | ast.SqlQuery | ast.Value | ast.TypeRef):
                continue  # their text is looked at as a whole
            children = [getattr(node, f.name) for f in dataclasses.fields(node)]
            stack.extend(reversed(children))


def _check_value(value: ast.Value, reporter: Reporter) -> None:
    if _report_all(value.text, value.span, reporter):
        return
    if MARKER in str(value.python):  # an escape read as '{' or '$'
        _report(value.span, f"{shown(value.text)}, its escapes read,", reporter)


def _check_sql(node: ast.SqlExpr | ast.SqlQuery, reporter: Reporter) -> None:
    """At each ``${`` written and each string or name whose escapes make one; where there
    is none, at the whole expression if the Spark SQL written for it holds one."""
    found = _report_all(node.text, node.span, reporter)
    for token in _tokens(node.text):
        start, end = int(token.start), int(token.end) + 1
        written = node.text[start:end]
        if MARKER in token.text and MARKER not in written:
            what = f"{shown(written)}, its escapes read,"
            _report(_within(node.text, node.span, start, end), what, reporter)
            found = True
    if found:
        return
    try:
        spark_sql = str(with_call_names(node.tree).sql(dialect="spark", identify=True))
    except GENERATOR_ERRORS:
        return  # nothing is written for it: analysis reports why
    if MARKER in spark_sql:
        _report(node.span, "the Spark SQL written for this expression", reporter)


def _report_all(text: str, span: Span, reporter: Reporter) -> bool:
    """E0958 at each ``${...}`` of ``text`` (source text starting at ``span``)."""
    start = text.find(MARKER)
    found = start >= 0
    while start >= 0:
        close = text.find("}", start)
        newline = text.find("\n", start)
        end = close + 1 if close >= 0 and (newline < 0 or close < newline) else start + 2
        _report(_within(text, span, start, end), f"'{shown(text[start:end])}'", reporter)
        start = text.find(MARKER, end)
    return found


def _report(span: Span, what: str, reporter: Reporter) -> None:
    reporter.error(
        Code.E0958,
        f"{what} holds '${{': {_WHY}; not allowed in an untrusted program",
        span,
        help=_HELP,
    )


def _within(text: str, span: Span, start: int, end: int) -> Span:
    """The file span of characters ``[start, end)`` of ``text``, which starts at ``span``."""
    return sub_span(ast.SqlExpr(text=text, tree=exp.Null(), span=span), start, end)


def _tokens(text: str) -> list[Any]:
    """Spark SQL's tokens of ``text``, strings and names with their escapes read."""
    try:
        return list(Dialect.get_or_raise("spark").tokenize(text))
    except TokenError:  # the expression parsed already; its text is looked at as written
        return []
