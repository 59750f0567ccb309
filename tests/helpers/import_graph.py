"""flowc's import graph, read from its files with :mod:`ast` (tests/test_import_graph.py
holds it free of cycles, tests/test_layers.py to its layers).

Every ``import`` of a module of the ``flowc`` distribution (``compiler/`` → ``flowc``,
``runtime/`` → ``flowc.runtime``, ``grammar/`` → ``flowc.grammar``, as pyproject.toml maps
them) counts, at module level and inside functions; only imports under
``if TYPE_CHECKING:`` are left out: they never run.
"""

from __future__ import annotations

import ast
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


@dataclass(frozen=True, slots=True)
class Import:
    """One import statement's target, where it is, and whether it runs in a function."""

    target: str
    line: int
    lazy: bool


def packages(root: Path = ROOT) -> dict[str, Path]:
    """Each package of the distribution and its folder, from pyproject.toml."""
    with (root / "pyproject.toml").open("rb") as handle:
        dirs: dict[str, str] = tomllib.load(handle)["tool"]["setuptools"]["package-dir"]
    return {name: root / folder for name, folder in dirs.items()}


def modules(roots: dict[str, Path]) -> dict[str, Path]:
    """Every module's dotted name and file; a folder with ``__init__.py`` is its package."""
    found: dict[str, Path] = {}
    for package, folder in roots.items():
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(name: str, path: Path, known: dict[str, Path]) -> list[Import]:
    """Every import the module runs, with the module it names (not under TYPE_CHECKING)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[Import] = []
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, lazy = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child.test):
                stack.extend((other, lazy) for other in child.orelse)
            elif isinstance(child, ast.Import):
                found.extend(Import(a.name, child.lineno, lazy) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parts = package.split(".")
                    parts = parts[: len(parts) - child.level + 1]
                    base = ".".join([*parts, *([base] if base else [])])
                for alias in child.names:
                    full = f"{base}.{alias.name}"
                    found.append(Import(full if full in known else base, child.lineno, lazy))
            else:
                inner = lazy or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
                stack.append((child, inner))
    return sorted(found, key=lambda i: (i.line, i.target))


def module_of(target: str, known: dict[str, Path]) -> str | None:
    """The distribution's module ``target`` names, or None for one outside it."""
    while target not in known:
        if "." not in target:
            return None
        target = target.rpartition(".")[0]
    return target


@dataclass(frozen=True, slots=True)
class Edge:
    """``source`` imports ``target`` at ``line`` (``via`` the module named, for a package
    whose ``__init__`` runs because a module inside it is imported)."""

    target: str
    line: int
    via: str = ""


def graph(known: dict[str, Path]) -> dict[str, dict[str, Edge]]:
    """Module → the modules it imports, each with the first line that does."""
    edges: dict[str, dict[str, Edge]] = {name: {} for name in known}
    roots = {name for name in known if "." not in name}
    for name, path in known.items():
        out = edges[name]
        for found in imports(name, path, known):
            target = module_of(found.target, known)
            if target is None:
                continue
            if target != name:
                out.setdefault(target, Edge(target, found.line))
            parts = target.split(".")
            for end in range(1, len(parts)):
                parent = ".".join(parts[:end])
                if parent in roots or parent == name or name.startswith(parent + "."):
                    continue
                out.setdefault(parent, Edge(parent, found.line, via=target))
    return edges
