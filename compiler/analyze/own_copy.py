"""Analysis types and rewrites sqlglot trees in place (a column's type, a struct field
read turned into a ``Dot``), so it works on its own copy of them, as sqlglot's
``optimize()`` copies its input: the AST stays the parser's output.

Only the sqlglot trees are copied; the frozen AST nodes around them are rebuilt where
they hold one and shared where they do not.
"""

from __future__ import annotations

from dataclasses import replace
from typing import cast

from sqlglot import exp

from flowc import ast
from flowc.syntax.parser import copy_tree


def with_own_sql(tree: ast.Program) -> ast.Program:
    """``tree`` with a copy of every sqlglot tree in it."""
    return cast(ast.Program, _copy(tree))


def _copy(node: object) -> object:
    if type(node) is tuple:
        items = []
        changed = False
        for item in node:
            new = _copy(item)
            changed = changed or new is not item
            items.append(new)
        return tuple(items) if changed else node
    if isinstance(node, exp.Expr):
        return copy_tree(node)
    changes = {}
    for name in ast.sql_fields(type(node)):
        old = getattr(node, name)
        new = _copy(old)
        if new is not old:
            changes[name] = new
    return replace(node, **changes) if changes else node  # type: ignore[type-var]
