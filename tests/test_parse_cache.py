"""The memoized expression parses are shared, not copied, with every AST that parses the
same text (flowc.sql.sql_parsing.parse_sql): a compile must leave them exactly as parsed,
or a later compile of other text would read a changed tree."""

from __future__ import annotations

from pathlib import Path

from sqlglot import exp

import flowc
from flowc import ast
from flowc.spark.codegen import generate_pyspark
from flowc.sql import sql_parsing
from flowc.sql.sql_parsing import parse_sql_uncached
from flowc.syntax.astdump import ast_to_json, ast_to_text
from flowc.syntax.parser import clear_expression_cache

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.flow"))

Fingerprint = tuple[object, ...]


def fingerprint(node: exp.Expr) -> Fingerprint:
    """Everything of ``node`` a pass could change: its class, arguments, position
    metadata, type, comments and links to its parent, recursively."""
    args: list[tuple[str, object]] = []
    for key, value in node.args.items():
        if isinstance(value, exp.Expr):
            assert value.parent is node and value.arg_key == key and value.index is None
            args.append((key, fingerprint(value)))
        elif type(value) is list:
            items: list[object] = []
            for index, item in enumerate(value):
                if isinstance(item, exp.Expr):
                    assert item.parent is node and item.arg_key == key and item.index == index
                    items.append(fingerprint(item))
                else:
                    items.append(repr(item))
            args.append((key, tuple(items)))
        else:
            args.append((key, repr(value)))
    meta = tuple(sorted((k, repr(v)) for k, v in node._meta.items())) if node._meta else ()
    comments = tuple(node.comments) if node.comments else ()
    return (type(node).__name__, tuple(args), meta, repr(node._type), comments)


def kept_trees() -> dict[tuple[str, str], exp.Expr]:
    return {
        key: tree
        for key, ((tree, _), _) in list(sql_parsing._parsed._data.items())
        if tree is not None
    }


def all_trees(program: ast.Program) -> list[exp.Expr]:
    found: list[exp.Expr] = []
    stack: list[object] = [program]
    while stack:
        node = stack.pop()
        if isinstance(node, exp.Expr):
            found.append(node)
        elif isinstance(node, tuple):
            stack.extend(node)
        elif hasattr(node, "__dataclass_fields__"):
            stack.extend(getattr(node, name) for name in node.__dataclass_fields__)
    return found


def test_compiles_leave_the_shared_parses_as_parsed() -> None:
    assert len(EXAMPLES) > 10
    clear_expression_cache()
    for path in EXAMPLES:  # twice each: a text's second parse is the one kept
        flowc.compile(path.read_text(), str(path))
        flowc.compile(path.read_text(), str(path))
    kept = kept_trees()
    assert len(kept) > 20
    kept_ids = {id(tree) for tree in kept.values()}
    shared = 0
    for path in EXAMPLES:  # every stage and the Spark program, from ASTs of kept trees
        job = flowc.compile(path.read_text(), str(path), for_spark=True)
        shared += sum(id(tree) in kept_ids for tree in all_trees(job.ast))
        ast_to_text(job.ast)
        ast_to_json(job.ast)
        generate_pyspark(job)
    assert shared > 20  # the ASTs did hold the kept trees, not copies
    assert kept_trees() == kept
    for (text, dialect), tree in kept.items():  # as a parse of their text gives them
        assert fingerprint(tree) == fingerprint(parse_sql_uncached(text, dialect)), text
    clear_expression_cache()
