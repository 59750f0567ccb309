"""Analysis types and rewrites sqlglot trees in place (a column's type, a struct field
read turned into a ``Dot``), so it works on its own copy of them, as sqlglot's
``optimize()`` copies its input: the AST stays the parser's output.

Only the sqlglot trees are copied; the frozen AST nodes around them are rebuilt where
they hold one and shared where they do not.
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass, replace
from typing import cast

from sqlglot import exp

from flowc import ast
from flowc.parser import copy_tree
from flowc.spans import Span

#: Nodes that hold no SQL: their fields are not looked at.
_LEAVES = (Span, ast.Name, ast.Value, ast.Option, ast.TypeRef, ast.Relation, ast.ColumnDef)
#: Field types (as annotated in flowc.ast) that hold no SQL; any other field is looked
#: into, so SQL in a new kind of node is copied too.
_SQL_FREE = frozenset(
    {
        "str",
        "bool",
        "Span",
        "Span | None",
        "Name",
        "Name | None",
        "tuple[Name, ...]",
        "Relation",
        "tuple[Relation, ...]",
        "Option",
        "tuple[Option, ...]",
        "tuple[ColumnDef, ...]",
        "tuple[ColumnDef, ...] | None",
    }
)


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
    names = _FIELDS.get(type(node))
    if names is None:
        names = _sql_fields(type(node))
    changes = {}
    for name in names:
        old = getattr(node, name)
        new = _copy(old)
        if new is not old:
            changes[name] = new
    return replace(node, **changes) if changes else node  # type: ignore[type-var]


_FIELDS: dict[type, tuple[str, ...]] = {}


def _sql_fields(cls: type) -> tuple[str, ...]:
    """The fields of an AST class that may hold SQL (none for other classes)."""
    if not is_dataclass(cls) or issubclass(cls, _LEAVES):
        known: tuple[str, ...] = ()
    else:
        known = tuple(f.name for f in fields(cls) if str(f.type) not in _SQL_FREE)
    _FIELDS[cls] = known
    return known
