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
from typing import Any, cast

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import ParseError
from sqlglot.parser import Parser
from sqlglot.tokenizer_core import Token, TokenType

from flowc.limits import (
    MAX_NESTING,
    MAX_TREE_DEPTH,
    MAX_TYPE_CALLS,
    BoundedCache,
    SharedSetting,
)
from flowc.sql.flink_dialect import Flink
from flowc.sql.habits import KEYWORD_FUNCTION_WORDS, keyword_calls_as_functions
from flowc.sql.spark_patterns import SparkParser, SparkTokenizer

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
        instance = Dialect.get_or_raise(dialect)
        if dialect == "spark":  # Spark's own SQL read as Spark reads it (flowc.sql.spark_patterns)
            found = (SparkTokenizer(dialect=instance), SparkParser(dialect=instance))
        elif isinstance(instance, Flink):
            found = (Flink.Tokenizer(dialect=instance), Flink.Parser(dialect=instance))
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


def parse_sql(text: str, dialect: str, own: bool) -> tuple[exp.Expr, int]:
    """sqlglot's parse of one expression, memoized, and its number of tokens. With ``own``
    the caller gets its own tree, to mutate; without, it may get the memoized tree itself,
    shared with other callers and other compiles, which nothing may change: the AST keeps
    its trees as parsed (the analysis types a copy, flowc.analyze.own_copy), and
    tests/test_parse_cache.py checks that a compile leaves the memoized trees as they were."""
    quick = _comparison(text, dialect)
    if quick is not None:
        return quick, 3
    key = (text, dialect)
    entry = _parsed.get(key)
    if entry is not None:
        kept, tokens = entry[0]
        if kept is not None:
            return (copy_tree(kept) if own else kept), tokens
    with deep_recursion():  # sqlglot's parser recurses; copying does not
        tree, tokens = _parse_and_count(text, dialect)
    if entry is not None:  # the second use: keep a pristine tree for the next ones
        _parsed.put(key, (tree, tokens), len(text) + tree_bytes(tree))
        return (copy_tree(tree) if own else tree), tokens
    _parsed.put(key, (None, tokens), len(text))
    return tree, tokens


#: ``column <op> digits`` on one line, spaces only: a filter's commonest form, built here as
#: sqlglot's parser builds it (the same nodes and positions, for the dialects below;
#: tests/test_lalr.py compares the two), a twentieth of the cost of tokenizing and parsing.
_COMPARISON = re.compile(r"([A-Za-z_][A-Za-z0-9_]*) *(<>|!=|<=|>=|=|<|>) *([0-9]+)")
_COMPARISONS: dict[str, type[exp.Expr]] = {
    "=": exp.EQ,
    "<>": exp.NEQ,
    "!=": exp.NEQ,
    "<": exp.LT,
    ">": exp.GT,
    "<=": exp.LTE,
    ">=": exp.GTE,
}
#: The dialects whose tokenizer and parser read such a comparison so (flowc's own).
_COMPARISON_DIALECTS = frozenset({"spark", "flink"})


def _comparison(text: str, dialect: str) -> exp.Expr | None:
    """sqlglot's tree of ``text`` when it is ``column <op> digits`` (see _COMPARISON), a
    new one each time; None for any other text (and for a keyword as the column)."""
    found = _COMPARISON.fullmatch(text)
    if found is None or dialect not in _COMPARISON_DIALECTS:
        return None
    name, operator, digits = found.groups()
    if name.upper() in _not_columns(dialect):
        return None
    end = len(text)
    column = bare_column(name)
    number = _node(
        exp.Literal,
        {"this": digits, "is_string": False},
        {"line": 1, "col": end, "start": end - len(digits), "end": end - 1},
    )
    tree = _node(_COMPARISONS[operator], {"this": column, "expression": number}, None)
    column.parent = number.parent = tree
    column.arg_key = "this"
    number.arg_key = "expression"
    return tree


def bare_column(name: str) -> exp.Column:
    """sqlglot's tree of a column's bare name (``[A-Za-z_][A-Za-z0-9_]*``, no keyword), with
    the positions its parser gives, a new one each time (tests/test_lalr.py compares)."""
    identifier = _node(
        exp.Identifier,
        {"this": name, "quoted": False},
        {"line": 1, "col": len(name), "start": 0, "end": len(name) - 1},
    )
    column = _node(exp.Column, {"this": identifier}, None)
    identifier.parent = column
    identifier.arg_key = "this"
    return cast(exp.Column, column)


def _node(kind: type[exp.Expr], args: dict[str, Any], meta: dict[str, Any] | None) -> exp.Expr:
    """A node as sqlglot's constructor makes it, without its ``__init__`` (whose walk over
    the arguments, setting each child's parent, costs twice the rest here): the caller sets
    its children's parents."""
    node = object.__new__(kind)
    node.args = args
    node.parent = None
    node.arg_key = None
    node.index = None
    node.comments = None
    node._type = None
    node._meta = meta
    node._hash = None
    return node


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


def clear_parse_cache() -> None:
    """Forget memoized expression parses (:func:`flowc.syntax.parser.clear_expression_cache`)."""
    _parsed.clear()


def parse_sql_uncached(text: str, dialect: str) -> exp.Expr:
    return _parse_and_count(text, dialect)[0]


def _parse_and_count(text: str, dialect: str) -> tuple[exp.Expr, int]:
    """sqlglot's parse of one expression, and its number of tokens."""
    tokenizer, parser = sql_tools(dialect)
    tokens = tokenizer.tokenize(text)
    check_nesting(tokens)
    if KEYWORD_FUNCTION_WORDS.search(text):  # GROUP BY window(ts, '1 minute')
        tokens = keyword_calls_as_functions(tokens)
    statements = parser.parse(tokens, text)
    if len(statements) != 1 or statements[0] is None:
        raise ParseError(f"expected one expression in '{text}'")
    tree: exp.Expr = statements[0]
    check_tree_depth(tree, text)
    return tree, len(tokens)


class TooDeep(Exception):
    """Text nested past one of flowc's bounds (E0004): what is deep, how deep, the bound,
    and the characters ``[start, end)`` of the text where the bound is passed."""

    def __init__(self, what: str, depth: int, bound: int, start: int, end: int) -> None:
        super().__init__(f"{what} {depth} deep; at most {bound} are allowed")
        self.what = what
        self.depth = depth
        self.bound = bound
        self.start = start
        self.end = end


_OPENERS = frozenset({TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE, TokenType.CASE})
_CLOSERS = frozenset({TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE, TokenType.END})
#: Words whose ``<`` opens a type's parameters, not a comparison.
_TYPE_WORDS = frozenset({TokenType.ARRAY, TokenType.MAP, TokenType.STRUCT})
#: Type names that sqlglot, seeing them before a bracket, first tries to parse as a type
#: (``DATE(...)``, ``DECIMAL(10, 2)``, ``ARRAY[...]``) and parses again as a call when that
#: fails: each such level nested in another doubles the work (``date(date(...))`` 20 deep
#: takes hours). ``array(`` and ``map(`` do not (measured).
_TYPE_CALLS = frozenset(Parser.TYPE_TOKENS)
_TYPE_CALL_BRACKETS = {
    word: (
        frozenset({TokenType.L_BRACKET})
        if word in (TokenType.ARRAY, TokenType.MAP)
        else frozenset({TokenType.L_PAREN, TokenType.L_BRACKET})
    )
    for word in _TYPE_CALLS
}
#: Prefix operators whose operand is one term: open until the next operator.
_ARITHMETIC_PREFIX = frozenset(
    {TokenType.DASH, TokenType.PLUS, TokenType.TILDE, TokenType.PIPE_SLASH, TokenType.DPIPE_SLASH}
)
#: What ends the operand of NOT (``NOT a = NOT b`` nests) and of a lambda's arrow (``x ->
#: y -> ...``): they are open until a comma, AND, OR, a CASE word or the bracket closes.
_LOOSE_ENDS = frozenset(
    {
        TokenType.COMMA,
        TokenType.AND,
        TokenType.OR,
        TokenType.XOR,
        TokenType.WHEN,
        TokenType.THEN,
        TokenType.ELSE,
    }
)
#: Tokens after which a ``-``/``+``/``NOT`` is a binary operator (``a - b``, ``a NOT IN``).
_OPERAND_ENDS = frozenset(
    {
        TokenType.VAR,
        TokenType.NUMBER,
        TokenType.STRING,
        TokenType.IDENTIFIER,
        TokenType.NULL,
        TokenType.TRUE,
        TokenType.FALSE,
        TokenType.STAR,
        TokenType.R_PAREN,
        TokenType.R_BRACKET,
        TokenType.R_BRACE,
        TokenType.END,
    }
)


def check_nesting(tokens: list[Token]) -> None:
    """Raise TooDeep where ``tokens`` nest past :data:`flowc.limits.MAX_NESTING`, before
    sqlglot's recursive parser sees them (a linear scan, no recursion).

    A level is an open bracket, CASE or type ``<``, or a prefix operator whose operand is
    not over: ``- - x`` is two levels until the next operator, ``NOT a = NOT b`` two until
    a comma, AND or OR. Only where a prefix operator is counted too long (an ``a - -b``
    read as unary) is the count high; never is it low.
    """
    # Per open bracket: its kind, and the prefix operators open inside it (tight, loose).
    kinds: list[TokenType] = [TokenType.L_PAREN]
    tight: list[int] = [0]
    loose: list[int] = [0]
    calls: list[bool] = [False]
    depth = type_calls = 0
    previous: TokenType | None = None
    for token in tokens:
        kind = token.token_type
        opens = kind in _OPENERS or (kind is TokenType.LT and previous in _TYPE_WORDS)
        if opens:
            call = previous in _TYPE_CALLS and kind in _TYPE_CALL_BRACKETS[previous]
            kinds.append(kind)
            tight.append(0)
            loose.append(0)
            calls.append(call)
            depth += 1
            type_calls += call
            if type_calls > MAX_TYPE_CALLS:
                raise TooDeep(
                    "nests type names called as functions (date(...), struct(...))",
                    type_calls,
                    MAX_TYPE_CALLS,
                    token.start,
                    token.end + 1,
                )
        elif (kind in _CLOSERS or (kind is TokenType.GT and kinds[-1] is TokenType.LT)) and len(
            kinds
        ) > 1:
            kinds.pop()
            depth -= 1 + tight.pop() + loose.pop()
            type_calls -= calls.pop()
            kind = TokenType.R_PAREN  # what follows a closed bracket follows an operand
        elif kind in _ARITHMETIC_PREFIX and previous not in _OPERAND_ENDS:
            tight[-1] += 1
            depth += 1
        elif kind is TokenType.ARROW or (
            kind is TokenType.NOT and previous not in _OPERAND_ENDS and previous is not TokenType.IS
        ):
            loose[-1] += 1
            depth += 1
        elif kind in _LOOSE_ENDS:
            depth -= tight[-1] + loose[-1]
            tight[-1] = loose[-1] = 0
        elif kind not in _OPERAND_ENDS and previous in _OPERAND_ENDS:
            # an operator after an operand ends the tight prefix operators' operand
            depth -= tight[-1]
            tight[-1] = 0
        if depth > MAX_NESTING:
            raise TooDeep("nests", depth, MAX_NESTING, token.start, token.end + 1)
        previous = kind


def _chained(parent: exp.Expr, child: exp.Expr, key: str) -> bool:
    """Whether every pass walks from ``parent`` to ``child`` in a loop, not a call: the
    left operand of the same binary operator (sqlglot's generator, typing), AND and OR."""
    if isinstance(parent, exp.Connector) and isinstance(child, exp.Connector):
        return True
    return (
        key == "this"
        and type(child) is type(parent)
        and isinstance(parent, exp.Binary)
        and child.args.get("negate") == parent.args.get("negate")
    )


def check_tree_depth(tree: exp.Expr, text: str) -> None:
    """Raise TooDeep if ``tree`` is deeper than :data:`flowc.limits.MAX_TREE_DEPTH`
    (see there), before any recursive pass walks it; a walk with a stack."""
    stack: list[tuple[exp.Expr, int]] = [(tree, 1)]
    expr_class = exp.Expr
    while stack:
        node, depth = stack.pop()
        if depth > MAX_TREE_DEPTH:
            start, end = _position(node, text)
            raise TooDeep("has operators nested", depth, MAX_TREE_DEPTH, start, end)
        for key, value in node.args.items():
            if isinstance(value, expr_class):
                stack.append((value, depth if _chained(node, value, key) else depth + 1))
            elif type(value) is list:
                stack.extend((v, depth + 1) for v in value if isinstance(v, expr_class))


def _position(node: exp.Expr, text: str) -> tuple[int, int]:
    """The characters from the first to the last name in ``node`` that sqlglot located, or
    the whole text."""
    starts: list[int] = []
    ends: list[int] = []
    for part in node.walk():
        meta = part.meta if isinstance(part, exp.Identifier) else None
        if meta and "start" in meta and "end" in meta:
            starts.append(int(meta["start"]))
            ends.append(int(meta["end"]) + 1)
    return (min(starts), max(ends)) if starts else (0, len(text))


def copy_tree(tree: exp.Expr) -> exp.Expr:
    """``tree.copy()``, about three times as fast: sqlglot's own copy loop, but each node is
    made with its parent, key and index already set (sqlglot builds an empty node, then
    ``set`` walks up the parents clearing hashes), and position metadata (plain ints) and
    comments (strings) are copied shallowly instead of by ``deepcopy``. A node is made in
    place (what ``like.__class__()`` sets, with no ``__init__`` call), each attribute once."""
    new_node = object.__new__
    expr_class = exp.Expr
    scalars = _SCALARS
    root: exp.Expr = new_node(tree.__class__)
    root.parent = None
    root.arg_key = None
    root.index = None
    stack = [(tree, root)]
    while stack:
        node, new = stack.pop()
        comments = node.comments
        new.comments = list(comments) if comments is not None else None
        dtype = node._type
        new._type = deepcopy(dtype) if dtype is not None else None
        meta = node._meta
        if meta is not None:
            for value in meta.values():
                if type(value) not in scalars:
                    meta = deepcopy(meta)
                    break
            else:
                meta = dict(meta)
        new._meta = meta
        new._hash = node._hash
        args: dict[str, Any] = {}
        for key, value in node.args.items():
            if isinstance(value, expr_class):
                child = new_node(value.__class__)
                child.parent = new
                child.arg_key = key
                child.index = None
                stack.append((value, child))
                args[key] = child
            elif type(value) is list:
                items: list[Any] = []
                for index, item in enumerate(value):
                    if isinstance(item, expr_class):
                        child = new_node(item.__class__)
                        child.parent = new
                        child.arg_key = key
                        child.index = index
                        stack.append((item, child))
                        items.append(child)
                    else:
                        items.append(item)
                args[key] = items
            else:
                args[key] = value
        new.args = args
    return root


_SCALARS = frozenset({int, str, bool, float, type(None)})


@cache
def sql_keywords(dialect: str) -> frozenset[str]:
    return frozenset(Dialect.get_or_raise(dialect).tokenizer_class.KEYWORDS)


@cache
def _not_columns(dialect: str) -> frozenset[str]:
    """Words sqlglot does not read as a column before an operator: its keywords, and names
    it parses as a function without brackets (``CONNECT_BY_ROOT x``)."""
    parser = Dialect.get_or_raise(dialect).parser_class
    return sql_keywords(dialect) | frozenset(parser.NO_PAREN_FUNCTION_PARSERS)
