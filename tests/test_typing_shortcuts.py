"""The shortcuts typing takes for speed give what the long way gives.

``flowc.sql.sqltypes`` types every tree it cannot take from its cache of typings: it walks
the tree with its own loop (not sqlglot's generators) and asks each node for flowc's rule
only when the node is of a class a rule tests for. Both are exact only while the walk
keeps sqlglot's order and the class lists name every class the rules test.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable

import pytest
import sqlglot
from sqlglot import exp

from flowc.ast import SqlExpr
from flowc.diagnostics import Reporter
from flowc.program import Column
from flowc.spans import Span
from flowc.sql import sql_parsing, sqltypes

EXPRESSIONS = [
    "v > 12",
    "sum(v)",
    "CASE WHEN a > 1 THEN b + 2 WHEN a < 0 THEN -b ELSE coalesce(c, d, 3) END",
    "f(a, b, c, d, e) + x[1]",
    "s.f.g IS NOT NULL AND (t BETWEEN 1 AND 2 OR u IN (1, 2, 3))",
    "count(DISTINCT k) FILTER (WHERE v > 0)",
    "CAST(a AS DECIMAL(10, 2)) / try_divide(b, 3)",
    "window(ts, '5 minutes').start",
    "named_struct('a', 1, 'b', array(1, 2, 3))",
    "ts + INTERVAL '1' HOUR",
]


@pytest.mark.parametrize("text", EXPRESSIONS)
def test_preorder_is_sqlglots_depth_first_order(text: str) -> None:
    tree = sqlglot.parse_one(text, read="spark")
    walked = list(tree.walk(bfs=False))
    mine = sqltypes._preorder(tree)
    assert len(mine) == len(walked)
    assert all(a is b for a, b in zip(mine, walked, strict=True))


def _tested_classes(function: Callable[..., object]) -> set[type]:
    """The sqlglot classes ``function`` tests with ``isinstance`` (``exp.X``, ``exp.X |
    exp.Y``, or a module tuple of them)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    found: set[type] = set()
    for call in ast.walk(tree):
        if not (
            isinstance(call, ast.Call)
            and isinstance(call.func, ast.Name)
            and call.func.id == "isinstance"
        ):
            continue
        for node in ast.walk(call.args[1]):
            value: object = None
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "exp"
            ):
                value = getattr(exp, node.attr)
            elif isinstance(node, ast.Name) and node.id != "exp":
                value = getattr(sqltypes, node.id)
            candidates = value if isinstance(value, tuple) else (value,)
            found.update(c for c in candidates if isinstance(c, type) and issubclass(c, exp.Expr))
    return found


@pytest.mark.parametrize(
    ("function", "classes"),
    [
        (sqltypes._spark_rule, sqltypes._SPARK_RULE_CLASSES),
        (sqltypes._infer, sqltypes._INFERRED_CLASSES),
    ],
    ids=["_spark_rule", "_infer"],
)
def test_class_lists_name_every_class_a_rule_tests(
    function: Callable[..., object], classes: tuple[type, ...]
) -> None:
    tested = _tested_classes(function)
    assert len(tested) > 10  # the source was read
    missing = sorted(c.__name__ for c in tested if not issubclass(c, classes))
    assert not missing, f"{function.__name__} tests classes its shortcut leaves out: {missing}"


#: Column types for the comparison shortcut: those it takes, and some it leaves.
_COLUMN_TYPES = [
    *sorted(sqltypes._COMPARED_TYPES),
    "DECIMAL(10,2)",
    "STRUCT<a: INT>",
    "ARRAY<INT>",
    "UNKNOWN",
]
_DIGITS = ["0", "7", "007", "42", "123456789", "2147483647", "2147483648", "00000000000012"]
_OPERATORS = ["=", "<>", "!=", "<", ">", "<=", ">="]


def _typed(text: str, dialect: str, column_type: str) -> tuple[object, ...]:
    """Type ``text`` over a scope of ``v`` (of ``column_type``), ``k`` and two ``w``: the
    result, the diagnostics, and each node's class, type and metadata."""
    sqltypes.clear_typing_cache()
    tree, _ = sql_parsing.parse_sql(text, dialect, own=True)
    expr = SqlExpr(text=text, tree=tree, span=Span("t.flow", 1, 1, 1, len(text) + 1))
    schema = (
        Column("v", column_type),
        Column("k", "BIGINT"),
        Column("w", "INT", qualifier="a"),
        Column("w", "INT", qualifier="b"),
    )
    reporter = Reporter()
    result = sqltypes.resolve_and_type(expr, sqltypes.Scope(schema), reporter)
    nodes = [
        (
            type(node).__name__,
            node._type,
            node._type.sql("spark") if node._type is not None else None,
            node._meta,
        )
        for node in tree.walk()
    ]
    return result, reporter.diagnostics, nodes, tree.sql("spark")


def test_columns_and_comparisons_are_typed_as_the_long_way_types_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The shortcuts (sqltypes._typed_shortcut: bare columns, comparisons) give the long
    way's result, diagnostics, types and metadata, node by node, for trees they take and
    shapes they leave."""
    texts = [
        f"{column} {op} {digits}"
        for op in _OPERATORS
        for digits in _DIGITS
        for column in ("v", "k")
    ]
    texts += ["v>5", "v  =  5", "k > 3", "zz > 3", "w > 3", "V > 3", "v > 5.0", "a.w > 3"]
    texts += ["`v` > 5", "v > -5", "5 < v", "v > 1e3", "(v) > 5", "v > 5 AND k > 1"]
    texts += ["v", "k", "V", "zz", "w", "a.w", "`v`", "`zz`", "*", "a.*", "v.f"]
    cases = [(t, d, c) for t in texts for d in ("spark", "flink") for c in _COLUMN_TYPES]
    short = [_typed(*case) for case in cases]
    taken = sum(
        sqltypes._typed_comparison(
            SqlExpr(
                text=t, tree=sql_parsing.parse_sql(t, d, own=True)[0], span=Span("t", 1, 1, 1, 1)
            ),
            sqltypes.Scope((Column("v", c),)),
            Reporter(),
        )
        is not sqltypes._NOT_TAKEN
        for t, d, c in cases
    )
    assert taken > len(cases) // 4  # the shortcut is taken for a good part of these
    monkeypatch.setattr(sqltypes, "_typed_shortcut", lambda *args: sqltypes._NOT_TAKEN)
    long = [_typed(*case) for case in cases]
    for case, a, b in zip(cases, short, long, strict=True):
        assert a == b, case
