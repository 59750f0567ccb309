"""A Python function's identity for the state manifest: its target and a digest of its code.

The digest covers the function's definition and every top-level statement of its module
it uses, transitively (a helper it calls, a constant, an import), and every top-level
statement flowc cannot tell the use of (an ``if``, a ``try``, a call run on import, a
star import). It is taken over Python's syntax tree without docstrings, so a comment,
a docstring or the layout never count; an edit of another function of the module does
not either (the module's whole digest is kept beside it, for the report). A function
imported from another module is identified by its import only; a function of an
installed package without source, and a callable given to :func:`flowc.compile` without
source, by their name.
"""

from __future__ import annotations

import ast as python_ast
import hashlib
import inspect
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from flowc.program import FunctionDef
from flowc.sql.python_functions import find_module, parse_python

#: A function's identity: (file, code digest, module digest).
Identity = tuple[str | None, str | None, str | None]


def function_identity(
    function: FunctionDef, base: str, given: Callable[..., object] | None = None
) -> Identity:
    """The file, code digest and module digest of a declared or given function."""
    if function.module is None or function.attribute is None:
        return _given_identity(given)
    found = find_module(function.module, base)
    if not isinstance(found, Path):
        return None, None, None
    try:
        data = found.read_bytes()
    except OSError:
        return None, None, None
    module_digest = _digest([data])
    try:
        tree = parse_python(data, filename=str(found))
    except (SyntaxError, ValueError):
        return _shown(found, base), module_digest, module_digest
    return _shown(found, base), used_code_digest(tree, function.attribute), module_digest


def used_code_digest(tree: python_ast.Module, name: str) -> str:
    """The digest of ``name``'s definition and the top-level statements it uses."""
    bound: dict[str, list[int]] = {}
    always: list[int] = []
    for index, statement in enumerate(tree.body):
        names = _binds(statement)
        if names is None:
            always.append(index)
        for bound_name in names or ():
            bound.setdefault(bound_name, []).append(index)
    included: set[int] = set(always)
    waiting = [name]
    for index in always:
        waiting += _loads(tree.body[index])
    seen: set[str] = set()
    while waiting:
        current = waiting.pop()
        if current in seen:
            continue
        seen.add(current)
        for index in bound.get(current, ()):
            if index not in included:
                included.add(index)
                waiting += _loads(tree.body[index])
    parts = [_dump(tree.body[i]).encode("utf-8") for i in sorted(included)]
    return _digest([name.encode("utf-8"), *parts])


def _binds(statement: python_ast.stmt) -> list[str] | None:
    """The names a top-level statement binds; None when flowc cannot tell."""
    if isinstance(
        statement, python_ast.FunctionDef | python_ast.AsyncFunctionDef | python_ast.ClassDef
    ):
        return [statement.name]
    if isinstance(statement, python_ast.Import | python_ast.ImportFrom):
        if any(alias.name == "*" for alias in statement.names):
            return None
        return [(alias.asname or alias.name).split(".")[0] for alias in statement.names]
    if isinstance(statement, python_ast.Assign | python_ast.AnnAssign | python_ast.AugAssign):
        targets = (
            statement.targets if isinstance(statement, python_ast.Assign) else [statement.target]
        )
        names = [
            n.id for t in targets for n in python_ast.walk(t) if isinstance(n, python_ast.Name)
        ]
        return names or None
    if isinstance(statement, python_ast.Expr) and isinstance(statement.value, python_ast.Constant):
        return []  # a docstring
    return None


def _loads(statement: python_ast.stmt) -> list[str]:
    return [n.id for n in python_ast.walk(statement) if isinstance(n, python_ast.Name)]


def _dump(statement: python_ast.stmt) -> str:
    """The statement's syntax tree without docstrings (no positions, no comments)."""
    copy = parse_python(python_ast.unparse(statement)).body[0]
    for node in python_ast.walk(copy):
        if isinstance(
            node, python_ast.FunctionDef | python_ast.AsyncFunctionDef | python_ast.ClassDef
        ):
            body = node.body
            if (
                body
                and isinstance(body[0], python_ast.Expr)
                and isinstance(body[0].value, python_ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                node.body = body[1:] or [python_ast.Pass()]
    return python_ast.dump(copy)


def _given_identity(call: Callable[..., object] | None) -> Identity:
    """A callable given to flowc.compile: its source's digest if Python can find it."""
    if call is None:
        return None, None, None
    try:
        source = inspect.getsource(call)
        file = inspect.getsourcefile(call)
    except (OSError, TypeError):
        code = getattr(call, "__code__", None)
        if code is None:
            return None, None, None
        return None, _digest([code.co_code, repr(code.co_consts).encode("utf-8")]), None
    try:
        tree = parse_python(inspect.cleandoc(source) if source[:1].isspace() else source)
        digest = _digest([_dump(s).encode("utf-8") for s in tree.body])
    except (SyntaxError, ValueError):
        digest = _digest([source.encode("utf-8")])
    return file, digest, None


def _digest(parts: Iterable[bytes]) -> str:
    hasher = hashlib.sha256()
    for part in parts:
        hasher.update(len(part).to_bytes(8, "big"))
        hasher.update(part)
    return hasher.hexdigest()[:16]


def _shown(path: Path, base: str) -> str:
    try:
        relative = os.path.relpath(path, base)
    except ValueError:
        return str(path)
    return str(path) if relative.startswith("..") else relative
