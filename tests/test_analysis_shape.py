"""Analysis leaves the AST as the parser made it (it types and rewrites its own copy of the
SQL trees, as sqlglot's ``optimize()`` does), and checks every kind of pipe step."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import get_args

import pytest
from sqlglot import exp

import flowc
from flowc import ast
from flowc.analyze import analyze
from flowc.analyze.query import STEP_CHECKERS
from flowc.diagnostics import Reporter
from flowc.syntax.parser import parse

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_DIRS = (ROOT / "examples", ROOT.parent / "shared" / "examples")
EXAMPLES = sorted(p for d in EXAMPLE_DIRS for p in d.glob("*.flow"))
ERROR_EXAMPLES = sorted(p for d in EXAMPLE_DIRS for p in (d / "errors").glob("*.flow"))


def _sql_trees(node: object) -> Iterator[exp.Expr]:
    """Every sqlglot tree in an AST, in order."""
    if isinstance(node, exp.Expr):
        yield node
    elif isinstance(node, tuple):
        for item in node:
            yield from _sql_trees(item)
    elif is_dataclass(node) and not isinstance(node, type):
        for field in fields(node):
            yield from _sql_trees(getattr(node, field.name))


def _assert_as_parsed(tree: ast.Program, text: str, file: str) -> None:
    fresh = parse(text, file, Reporter())
    assert tree == fresh  # the dataclasses (sqlglot trees are not compared by ==)
    trees = list(_sql_trees(tree))
    assert [t.sql("spark") for t in trees] == [t.sql("spark") for t in _sql_trees(fresh)]
    typed = [n.sql("spark") for t in trees for n in t.walk() if n.type is not None]
    assert typed == [], "analysis typed the parser's trees"


def _relative(path: Path) -> str:
    return str(path.relative_to(ROOT.parent))


def test_there_are_examples() -> None:
    assert EXAMPLES and ERROR_EXAMPLES


@pytest.mark.parametrize("path", EXAMPLES, ids=_relative)
def test_compile_leaves_the_ast_as_parsed(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    job = flowc.compile(text, str(path), for_spark=True)
    _assert_as_parsed(job.ast, text, str(path))


@pytest.mark.parametrize("path", ERROR_EXAMPLES, ids=_relative)
def test_analysis_with_errors_leaves_the_ast_as_parsed(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    reporter = Reporter()
    tree = parse(text, str(path), reporter)
    analyze(tree, reporter)
    _assert_as_parsed(tree, text, str(path))


def test_every_step_class_has_a_checker() -> None:
    assert set(STEP_CHECKERS) == set(get_args(ast.Step))
