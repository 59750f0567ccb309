"""``--emit ast``: the syntax tree as JSON (for programs) or as an indented tree (for people)."""

from __future__ import annotations

import dataclasses
from enum import Enum
from typing import Any

from flowc import ast
from flowc.outputs import document
from flowc.spans import Span


def ast_to_data(node: Any) -> Any:
    """Plain JSON data for an AST node: ``{"node": "Where", ..., "span": {...}}``."""
    if isinstance(node, Span):
        return node.to_json()
    if isinstance(node, ast.SqlExpr):
        return {"node": "SqlExpr", "text": node.text, "span": node.span.to_json()}
    if isinstance(node, ast.SqlQuery):
        return {"node": "SqlQuery", "text": node.text, "span": node.span.to_json()}
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        data: dict[str, Any] = {"node": type(node).__name__}
        for f in dataclasses.fields(node):
            value = getattr(node, f.name)
            if f.metadata.get("omitted_unset") and value == f.default:
                continue
            data[f.name] = ast_to_data(value)
        return data
    if isinstance(node, tuple | list):
        return [ast_to_data(item) for item in node]
    return node


def ast_to_json(program: ast.Program) -> str:
    return document("ast", {"ast": ast_to_data(program)})


def ast_to_text(program: ast.Program) -> str:
    lines: list[str] = []
    _text(program, 0, None, lines)
    return "\n".join(lines) + "\n"


def _position(span: Span) -> str:
    return f"@{span.line}:{span.column}"


def _text(node: Any, depth: int, label: str | None, lines: list[str]) -> None:
    pad = "  " * depth
    prefix = f"{label}: " if label else ""
    if isinstance(node, ast.Name):
        lines.append(f"{pad}{prefix}{node.value} {_position(node.span)}")
    elif isinstance(node, ast.SqlExpr | ast.SqlQuery | ast.TypeRef):
        text = " ".join(node.text.split())
        lines.append(f"{pad}{prefix}`{text}` {_position(node.span)}")
    elif isinstance(node, ast.Value):
        lines.append(f"{pad}{prefix}{node.text} {_position(node.span)}")
    elif isinstance(node, ast.Option):
        lines.append(f"{pad}{prefix}{node.key} = {node.value.text} {_position(node.span)}")
    elif dataclasses.is_dataclass(node) and not isinstance(node, type):
        span = getattr(node, "span", None)
        where = f" {_position(span)}" if isinstance(span, Span) else ""
        lines.append(f"{pad}{prefix}{type(node).__name__}{where}")
        for f in dataclasses.fields(node):
            if f.name in ("span", "keyword_span", "hints_span", "key_span", "file"):
                continue
            value = getattr(node, f.name)
            if value is None or value == ():
                continue
            if f.metadata.get("omitted_unset") and value == f.default:
                continue
            _text(value, depth + 1, f.name, lines)
    elif isinstance(node, tuple | list):
        lines.append(f"{pad}{prefix}[{len(node)}]")
        for item in node:
            _text(item, depth + 1, None, lines)
    else:
        shown = node.value if isinstance(node, Enum) else node  # a kind prints as its text
        lines.append(f"{pad}{prefix}{shown!r}")
