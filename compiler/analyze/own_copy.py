"""Analysis types and rewrites sqlglot trees in place (a column's type, a struct field
read turned into a ``Dot``), so it works on its own copy of them, as sqlglot's
``optimize()`` copies its input: the AST stays the parser's output.

Only the sqlglot trees are copied; the frozen AST nodes around them are rebuilt where
they hold one and shared where they do not.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from types import MappingProxyType
from typing import cast

from sqlglot import exp

from flowc import ast
from flowc.syntax.parser import copy_tree


def with_own_sql(tree: ast.Program) -> ast.Program:
    """``tree`` with a copy of every sqlglot tree in it."""
    return cast(ast.Program, _copy(tree))


def _copy(node: object) -> object:
    kind = type(node)
    if kind is tuple:
        items = []
        changed = False
        for item in cast(tuple[object, ...], node):
            new = _copy(item)
            changed = changed or new is not item
            items.append(new)
        return tuple(items) if changed else node
    names = _SQL_FIELDS.get(kind)
    if names is None:
        return copy_tree(node) if isinstance(node, exp.Expr) else node
    changes = {}
    for name in names:
        old = getattr(node, name)
        new = _copy(old)
        if new is not old:
            changes[name] = new
    if not changes:
        return node
    rebuilt = object.__new__(kind)
    for name in _FIELDS[kind]:
        object.__setattr__(rebuilt, name, changes[name] if name in changes else getattr(node, name))
    return rebuilt


#: Each syntax-tree class's fields, computed once when the module loads. A node is
#: rebuilt field by field (``dataclasses.replace`` would run its ``__init__`` and checks
#: again, a third of the copy's time): only SQL trees change, for copies of themselves.
_FIELDS: Mapping[type, tuple[str, ...]] = MappingProxyType(
    {
        cls: tuple(f.name for f in fields(cls))
        for cls in vars(ast).values()
        if isinstance(cls, type) and is_dataclass(cls) and cls.__module__ == ast.__name__
    }
)
#: The syntax-tree classes that may hold SQL, and the fields that may.
_SQL_FIELDS: Mapping[type, tuple[str, ...]] = MappingProxyType(
    {cls: ast.sql_fields(cls) for cls in _FIELDS if ast.sql_fields(cls)}
)
