"""Analysis types and rewrites sqlglot trees in place (a column's type, a struct field
read turned into a ``Dot``), so it works on its own copy of them, as sqlglot's
``optimize()`` copies its input: the AST stays the parser's output.

Only the sqlglot trees are copied; the frozen AST nodes around them are rebuilt where
they hold one and shared where they do not.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import fields, is_dataclass
from types import MappingProxyType
from typing import cast

from sqlglot import exp

from flowc import ast
from flowc.syntax.parser import copy_tree

#: How one kind of value is copied: a function of the value.
Copier = Callable[[object], object]


def with_own_sql(tree: ast.Program) -> ast.Program:
    """``tree`` with a copy of every sqlglot tree in it."""
    return cast(ast.Program, _copy(tree))


def _copy(node: object) -> object:
    copier = _COPIERS.get(type(node))
    if copier is None:
        copier = _copier(type(node))
    return copier(node)


def copy_by_fields(node: object) -> object:
    """The copy the long way: field by field, by name (the copiers of :func:`_node_copier`
    do the same in code written for each class; tests/test_lalr.py compares the two)."""
    kind = type(node)
    if kind is tuple:
        old_items = cast(tuple[object, ...], node)
        items = tuple(copy_by_fields(item) for item in old_items)
        return items if any(n is not o for n, o in zip(items, old_items, strict=True)) else node
    names = _SQL_FIELDS.get(kind)
    if names is None:
        return copy_tree(node) if isinstance(node, exp.Expr) else node
    changes = {}
    for name in names:
        old = getattr(node, name)
        new = copy_by_fields(old)
        if new is not old:
            changes[name] = new
    if not changes:
        return node
    rebuilt = object.__new__(kind)
    for name in _FIELDS[kind]:
        object.__setattr__(rebuilt, name, changes[name] if name in changes else getattr(node, name))
    return rebuilt


def _copy_tuple(node: object) -> object:
    old_items = cast(tuple[object, ...], node)
    items = [_copy(item) for item in old_items]
    for new, old in zip(items, old_items, strict=True):
        if new is not old:
            return tuple(items)
    return node


def _same(node: object) -> object:
    return node


#: Each kind of value met so far, and its copier (made at its first copy: only the few
#: classes a program uses are written out). Filled under ``_lock``; read without it (a
#: dict's get is atomic, and a kind's copier, once there, never changes).
_COPIERS: dict[type, Copier] = {tuple: _copy_tuple}
_lock = threading.Lock()


def _copier(kind: type) -> Copier:
    with _lock:
        found = _COPIERS.get(kind)
        if found is not None:
            return found
        made: Copier
        if kind in _SQL_FIELDS:
            made = _node_copier(kind)
        elif issubclass(kind, exp.Expr):
            made = cast(Copier, copy_tree)
        else:
            made = _same
        _COPIERS[kind] = made
        return made


def _node_copier(kind: type) -> Copier:
    """The copy of one syntax-tree class's nodes, written out: each field that may hold SQL
    copied; the node itself when none changed, else a node of the same fields (each set
    through its slot, with no ``__init__`` and its checks: a third of the time of
    ``dataclasses.replace``)."""
    names = _SQL_FIELDS[kind]
    namespace: dict[str, object] = {"_copy": _copy, "_new": object.__new__, "_kind": kind}
    lines = ["def copy(node):"]
    for i, name in enumerate(names):
        lines += [f"    old{i} = node.{name}", f"    new{i} = _copy(old{i})"]
    unchanged = " and ".join(f"new{i} is old{i}" for i in range(len(names)))
    lines += [f"    if {unchanged}:", "        return node", "    rebuilt = _new(_kind)"]
    for j, name in enumerate(_FIELDS[kind]):
        namespace[f"_set{j}"] = getattr(kind, name).__set__
        value = f"new{names.index(name)}" if name in names else f"node.{name}"
        lines.append(f"    _set{j}(rebuilt, {value})")
    lines.append("    return rebuilt")
    exec(compile("\n".join(lines), f"<copy of {kind.__name__}>", "exec"), namespace)
    return cast(Copier, namespace["copy"])


#: Each syntax-tree class's fields, computed once when the module loads.
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
