"""sqlglot's side of parsing: SQL expressions and queries parsed once per text and copied
after (typing mutates trees), a thread's own tokenizer and parser, token counting for the
bound on tokens, and the deeper recursion sqlglot's recursive parser needs.
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from copy import deepcopy
from functools import cache
from typing import Any

from sqlglot import exp
from sqlglot.errors import ParseError

from flowc.habits import KEYWORD_FUNCTION_WORDS, keyword_calls_as_functions
from flowc.limits import BoundedCache, SharedSetting

#: Python's recursion limit while sqlglot works on an expression.
_RECURSION_LIMIT = 8000

#: Python's recursion limit is the process's: raised while any compilation in any thread
#: needs it, put back by the last one to finish (see flowc.limits.SharedSetting).
_RECURSION: SharedSetting[int] = SharedSetting(
    sys.getrecursionlimit,
    sys.setrecursionlimit,
    lambda found: _RECURSION_LIMIT if found < _RECURSION_LIMIT else None,
)


@contextmanager
def deep_recursion() -> Iterator[None]:
    """Let sqlglot's recursive parser and typing go deeper than Python's default limit.

    Re-entrant and safe across threads: the limit is raised to ``_RECURSION_LIMIT`` while
    any thread is inside, and the limit found by the first to enter is put back when the
    last leaves (unless the application set another limit meanwhile, which then stays).
    :func:`flowc.compile` holds it for a whole compilation, so the inner uses cost little.
    """
    if not _RECURSION.enter():
        yield
        return
    try:
        yield
    finally:
        _RECURSION.leave()


#: Each thread's sqlglot tokenizers and parsers, by dialect: both keep the state of the
#: text they work on, so a thread never shares them.
_tools = threading.local()


def sql_tools(dialect: str) -> tuple[Any, Any]:
    """This thread's tokenizer and parser for ``dialect`` (sqlglot's parse_one builds both
    per call)."""
    mine: dict[str, tuple[Any, Any]] | None = getattr(_tools, "by_dialect", None)
    if mine is None:
        mine = _tools.by_dialect = {}
    found = mine.get(dialect)
    if found is None:
        from sqlglot.dialects.dialect import Dialect

        from flowc.spark_patterns import SparkParser, SparkTokenizer

        instance = Dialect.get_or_raise(dialect)
        if dialect == "spark":  # Spark's own SQL read as Spark reads it (flowc.spark_patterns)
            found = (SparkTokenizer(dialect=instance), SparkParser(dialect=instance))
        else:
            found = (instance.tokenizer_class(dialect=instance), instance.parser())
        mine[dialect] = found
    return found


#: What one node of a kept sqlglot tree costs (its object, args and meta dicts), measured
#: with tracemalloc on typical expressions: about 430 bytes.
NODE_BYTES = 450

#: Expressions parsed before, by (text, dialect): the tree, kept pristine, or None for a
#: text seen once only (a single use needs no copy; a second one keeps a tree to copy);
#: and the number of sqlglot tokens of the text.
_parsed: BoundedCache[tuple[str, str], tuple[exp.Expr | None, int]] = BoundedCache(
    "parsed expressions", max_bytes=16 << 20, max_entry_bytes=256 << 10
)


def parse_sql(text: str, dialect: str) -> tuple[exp.Expr, int]:
    """sqlglot's parse of one expression, memoized, and its number of tokens; each caller
    gets its own tree, as typing mutates trees."""
    key = (text, dialect)
    entry = _parsed.get(key)
    if entry is not None:
        kept, tokens = entry[0]
        if kept is not None:
            return copy_tree(kept), tokens
    with deep_recursion():  # sqlglot's parser recurses; copying does not
        tree, tokens = _parse_and_count(text, dialect)
    if entry is not None:  # the second use: keep a pristine tree for the next ones
        _parsed.put(key, (tree, tokens), len(text) + tree_bytes(tree))
        return copy_tree(tree), tokens
    _parsed.put(key, (None, tokens), len(text))
    return tree, tokens


#: Expressions longer than this (in characters) have their tokens counted before sqlglot
#: parses them (see MAX_TOKENS); shorter ones, as sqlglot parses them.
LONG_EXPRESSION = 4096
#: About sqlglot's tokens (a string one token), for counting before it parses: a regex does
#: it thirty times as fast.
_TOKEN = re.compile(
    r"""'[^'\\]*(?:(?:\\.|'')[^'\\]*)*'|"[^"\\]*(?:(?:\\.|"")[^"\\]*)*"|`[^`]*(?:``[^`]*)*`"""
    r"|\w+|\S",
    re.S,
)


def count_tokens(text: str) -> int:
    return sum(1 for _ in _TOKEN.finditer(text))


def tree_bytes(tree: exp.Expr) -> int:
    """About what ``tree`` keeps alive: :data:`NODE_BYTES` a node, and its strings."""
    total = 0
    stack = [tree]
    expr_class = exp.Expr
    while stack:
        node = stack.pop()
        total += NODE_BYTES
        for value in node.args.values():
            if isinstance(value, expr_class):
                stack.append(value)
            elif type(value) is list:
                stack.extend(v for v in value if isinstance(v, expr_class))
            elif type(value) is str:
                total += len(value)
    return total


def clear_expression_cache() -> None:
    """Forget memoized expression parses and typings (benchmarks measure compiles from cold)."""
    from flowc.sqltypes import clear_typing_cache

    _parsed.clear()
    clear_typing_cache()


def parse_sql_uncached(text: str, dialect: str) -> exp.Expr:
    return _parse_and_count(text, dialect)[0]


def _parse_and_count(text: str, dialect: str) -> tuple[exp.Expr, int]:
    """sqlglot's parse of one expression, and its number of tokens."""
    tokenizer, parser = sql_tools(dialect)
    tokens = tokenizer.tokenize(text)
    if KEYWORD_FUNCTION_WORDS.search(text):  # GROUP BY window(ts, '1 minute')
        tokens = keyword_calls_as_functions(tokens)
    statements = parser.parse(tokens, text)
    if len(statements) != 1 or statements[0] is None:
        raise ParseError(f"expected one expression in '{text}'")
    tree: exp.Expr = statements[0]
    return tree, len(tokens)


def copy_tree(tree: exp.Expr) -> exp.Expr:
    """``tree.copy()``, about twice as fast: sqlglot's own copy loop, but position metadata
    (plain ints) and comments (strings) are copied shallowly instead of by ``deepcopy``."""
    root = tree.__class__()
    stack = [(tree, root)]
    expr_class = exp.Expr
    while stack:
        node, new = stack.pop()
        if node.comments is not None:
            new.comments = list(node.comments)
        if node._type is not None:
            new._type = deepcopy(node._type)
        meta = node._meta
        if meta is not None:
            plain = all(type(v) in _SCALARS for v in meta.values())
            new._meta = dict(meta) if plain else deepcopy(meta)
        if node._hash is not None:
            new._hash = node._hash
        args = new.args
        for key, value in node.args.items():
            if isinstance(value, expr_class):
                child = value.__class__()
                stack.append((value, child))
                new.set(key, child)
            elif type(value) is list:
                args[key] = []
                for item in value:
                    if isinstance(item, expr_class):
                        child = item.__class__()
                        stack.append((item, child))
                        new.append(key, child)
                    else:
                        new.append(key, item)
            else:
                args[key] = value
    return root


_SCALARS = frozenset({int, str, bool, float, type(None)})


@cache
def sql_keywords(dialect: str) -> frozenset[str]:
    from sqlglot.dialects.dialect import Dialect

    return frozenset(Dialect.get_or_raise(dialect).tokenizer_class.KEYWORDS)
