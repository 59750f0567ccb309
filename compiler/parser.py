"""Parse .flow source text into the AST (:mod:`flowc.ast`).

The file is cut into statements first (at ``;`` and before a ``CREATE``, ``INSERT`` or
``SET`` that starts a line), then each statement is parsed with the LALR grammar in
``grammar/flow.lark``. A syntax error costs one statement, not the file: the parser
reports it and goes on with the next statement, so every problem is reported.
:class:`flowc.lalr.Driver` runs the grammar's LALR tables (shipped precomputed) and the
builder below makes the AST as it goes; Lark itself parses only statements the driver
stops at, to report their syntax errors.
SQL expressions are handed to sqlglot; its error positions are mapped back to the file.
"""

from __future__ import annotations

import bisect
import re
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from copy import deepcopy
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from sqlglot import exp
from sqlglot.errors import ParseError, SqlglotError

from flowc import ast
from flowc.diagnostics import Reporter
from flowc.habits import (
    FLINK_WINDOW_TVF,
    KEYWORD_FUNCTION_WORDS,
    create_help,
    flink_tvf_help,
    keyword_calls_as_functions,
    text_span,
)
from flowc.lalr import Bounds, Driver, NoFastPath, Token, lark_parser, tables
from flowc.limits import MAX_STEPS, MAX_TOKENS, BoundedCache, SharedSetting
from flowc.spans import Span

if TYPE_CHECKING:
    import lark

#: Deepest bracket nesting accepted in one expression. sqlglot parses recursively
#: (about twenty Python frames per level), so the limit keeps far from the stack's end.
MAX_EXPRESSION_DEPTH = 64

#: Python's recursion limit while sqlglot works on an expression.
_RECURSION_LIMIT = 8000

DEFAULT_DIALECT = "spark"


_driver_lock = threading.Lock()


@cache
def _driver() -> Driver:
    with _driver_lock:  # the first call builds the tables: once, whatever the threads
        return Driver(tables())


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


# ---------------------------------------------------------------- positions


class LineIndex:
    """Offsets ↔ (line, column) for one file; columns are 1-based, in characters."""

    def __init__(self, file: str, text: str) -> None:
        self.file = file
        self.text = text
        self._starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def position(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self._starts, offset)
        return line, offset - self._starts[line - 1] + 1

    def span(self, start: int, end: int) -> Span:
        starts = self._starts
        line = bisect.bisect_right(starts, start)
        column = start - starts[line - 1] + 1
        end = max(end, start)
        if line == len(starts) or end < starts[line]:  # on the same line, the usual case
            return Span(self.file, line, column, line, end - starts[line - 1] + 1)
        end_line, end_column = self.position(end)
        return Span(self.file, line, column, end_line, end_column)

    def end_of_file(self) -> Span:
        return self.span(len(self.text), len(self.text))


# ---------------------------------------------------------------- statement splitting


@dataclass(frozen=True, slots=True)
class _Chunk:
    start: int
    end: int
    terminated: bool
    last_token_end: int


#: Strings and quoted names are written as "unrolled loops" here and in _RUNS:
#: ``'(?:[^'\\]|\\.|'')*'`` matches the same, but Python's regex engine keeps a
#: backtracking record per character of it, over 100 MB for a literal of 1 MB.
_SCAN = re.compile(
    r"""
      (?P<ws>[ \t\r\f\v]+)
    | (?P<nl>\n)
    | (?P<comment>--[^\n]*)
    | (?P<block>/\*.*?\*/)
    | (?P<str>'[^'\\]*(?:(?:\\.|'')[^'\\]*)*'|"[^"\\]*(?:(?:\\.|"")[^"\\]*)*")
    | (?P<qname>`[^`]*(?:``[^`]*)*`)
    | (?P<semi>;)
    | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<other>.)
    """,
    re.S | re.X,
)

_STATEMENT_STARTS = frozenset({"create", "insert", "set"})


#: What _SCAN finds, with runs of words, spaces and other characters (but no line break,
#: ``;``, quote or comment start) as one match: splitting looks at a run's first token only.
_RUNS = re.compile(
    r"""
      (?P<run>[^\n;'"`/\-]+)
    | (?P<nl>\n)
    | (?P<comment>--[^\n]*)
    | (?P<block>/\*.*?\*/)
    | (?P<str>'[^'\\]*(?:(?:\\.|'')[^'\\]*)*'|"[^"\\]*(?:(?:\\.|"")[^"\\]*)*")
    | (?P<qname>`[^`]*(?:``[^`]*)*`)
    | (?P<semi>;)
    | (?P<other>.)
    """,
    re.S | re.X,
)
_SPACES = " \t\r\f\v"
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def long_literals(text: str, limit: int) -> Iterator[tuple[int, int, str]]:
    """Each string literal or quoted name longer than ``limit`` characters (quotes not
    counted), as the statement splitter reads the text (so not inside a comment): its
    offsets, quotes included, and its quote character."""
    for m in _RUNS.finditer(text):
        if m.lastgroup in ("str", "qname") and m.end() - m.start() - 2 > limit:
            yield m.start(), m.end(), text[m.start()]


def _split_statements(text: str) -> list[_Chunk]:
    """Cut the file into statements: at ``;``, and before a line-leading CREATE/INSERT/SET.

    The second rule lets a missing ``;`` or an unclosed bracket cost one statement only.
    """
    chunks: list[_Chunk] = []
    start: int | None = None
    last_end = 0
    line_has_token = False
    for m in _RUNS.finditer(text):
        kind = m.lastgroup
        if kind == "run":
            run = m.group()
            tokens = run.lstrip(_SPACES)
            if not tokens:
                continue
            first = m.end() - len(tokens)
            if start is not None and not line_has_token:
                word = _WORD.match(text, first)
                if word is not None and word.group().lower() in _STATEMENT_STARTS:
                    chunks.append(_Chunk(start, first, False, last_end))
                    start = None
            if start is None:
                start = first
            line_has_token = True
            last_end = m.start() + len(run.rstrip(_SPACES))
            continue
        if kind in ("comment", "block"):
            continue
        if kind == "nl":
            line_has_token = False
            continue
        if kind == "semi":
            chunks.append(_Chunk(m.start() if start is None else start, m.end(), True, m.end()))
            start = None
            line_has_token = True
            last_end = m.end()
            continue
        if start is None:
            start = m.start()
        line_has_token = True
        last_end = m.end()
    if start is not None:
        chunks.append(_Chunk(start, len(text), False, last_end))
    return chunks


def _open_bracket(text: str, start: int, stop: int) -> tuple[str, int] | None:
    """The innermost bracket (``(``, ``[`` or CASE) still open at ``stop``, and its offset."""
    stack: list[tuple[str, int]] = []
    for m in _SCAN.finditer(text, start, stop):
        token = m.group()
        if m.lastgroup == "word":
            if text[m.start() - 1 : m.start()] == ".":
                continue  # a field: w.end
            if token.lower() == "case":
                stack.append(("CASE", m.start()))
            elif token.lower() == "end" and stack and stack[-1][0] == "CASE":
                stack.pop()
        elif token in "([":
            stack.append((token, m.start()))
        elif token in ")]" and stack and stack[-1][0] != "CASE":
            stack.pop()
    return stack[-1] if stack else None


# ---------------------------------------------------------------- syntax errors

_TERMINAL_TEXT = {
    "SEMICOLON": "';'",
    "COMMA": "','",
    "LPAR": "'('",
    "RPAR": "')'",
    "LSQB": "'['",
    "RSQB": "']'",
    "EQUAL": "'='",
    "DOT": "'.'",
    "COLON": "':'",
    "LESSTHAN": "'<'",
    "MORETHAN": "'>'",
    "PIPE": "'|>'",
    "MINUS": "'-'",
    "NAME": "a name",
    "QUOTED_NAME": "a name",
    "STRING": "a string",
    "NUMBER": "a number",
    "OPERATOR": "an operator",
    "$END": "the end of the statement",
    "WINDOW_KIND": "TUMBLE, HOP or SESSION",
    "JOIN_KIND": "INNER, LEFT, RIGHT or FULL",
}

_STEP_KEYWORDS = [
    *("WHERE", "SELECT", "EXTEND", "DROP", "RENAME", "EXPLODE", "KEY", "REBALANCE", "RESCALE"),
    *("SHUFFLE", "BROADCAST", "GLOBAL", "FORWARD", "PARTITION", "WINDOW", "AGGREGATE"),
    *("DEDUPLICATE", "JOIN", "UNION", "ROUTE"),
]


def _describe_terminal(name: str) -> str:
    if name in _TERMINAL_TEXT:
        return _TERMINAL_TEXT[name]
    if name.isupper() and name.isalpha():
        return name
    return name.lower()


def _describe_token(token: Token) -> str:
    if token.type == "$END":
        return "end of statement"
    if token.type == "SEMICOLON":
        return "';'"
    value = str(token)
    if len(value) > 30:
        value = value[:27] + "..."
    if token.type in ("NAME", "QUOTED_NAME"):
        return f"name '{value}'"
    if token.type == "CHAR":
        return f"character '{value}'"
    if token.type == "STRING":
        return f"string {value}"
    if token.type == "NUMBER":
        return f"number {value}"
    return f"'{value}'"


def _expected_text(expected: set[str]) -> tuple[str, str | None]:
    """A short phrase for what the parser expected, and a help line where one helps."""
    for closer, opener in (("RPAR", "("), ("RSQB", "["), ("END", "CASE")):
        if closer in expected:
            wanted = [_describe_terminal(closer)]
            if "COMMA" in expected:
                wanted.insert(0, "','")
            return " or ".join(wanted), f"a '{opener}' is not closed"
    if set(_STEP_KEYWORDS) <= expected:
        return "a pipe step", "steps: " + ", ".join(_STEP_KEYWORDS)
    names = sorted({_describe_terminal(e) for e in expected})
    if len(names) <= 4:
        return " or ".join(names), None
    return "something else", "expected one of: " + ", ".join(names)


# ---------------------------------------------------------------- the parser


def parse(text: str, file: str, reporter: Reporter) -> ast.Program:
    """Parse a whole file; syntax errors go to ``reporter`` and drop their statement."""
    index = LineIndex(file, text)
    builder = _AstBuilder(index, reporter)
    statements: list[ast.Statement] = []
    driver = _driver()
    for chunk in _split_statements(text):
        builder.base = chunk.start
        source = text[chunk.start : chunk.end]
        reported = len(reporter.diagnostics)
        steps = builder.steps
        try:
            statement = driver.parse(source, builder)
        except NoFastPath:
            # Lark parses it again and raises the syntax error; what the builder reported
            # before the driver stopped is dropped, as the statement is.
            del reporter.diagnostics[reported:]
            builder.steps = steps
            from lark.exceptions import UnexpectedInput

            try:
                tree = lark_parser().parse(source)
            except UnexpectedInput as error:
                _report_syntax_error(error, chunk, index, reporter)
                continue
            statement = builder.transform(tree)
        if not chunk.terminated:
            end = chunk.last_token_end
            reporter.error(
                "E0002",
                "missing ';' after this statement",
                index.span(end, end),
                help="end every statement with ';'",
            )
        if statement is not None:
            statements.append(statement)
            if isinstance(statement, ast.SetStmt) and statement.option.key == "sql.dialect":
                builder.dialect = str(statement.option.value.python).lower()
        if builder.steps > MAX_STEPS or builder.tokens > MAX_TOKENS:
            _too_large(builder, chunk, index, reporter)
            break
    return ast.Program(file=file, statements=tuple(statements), span=index.span(0, len(text)))


def _too_large(builder: _AstBuilder, chunk: _Chunk, index: LineIndex, reporter: Reporter) -> None:
    """E0903 at the statement whose steps or SQL tokens pass their bound; parsing stops
    there, well before the passes after it would take long (a step or a token of an
    expression costs more in each of them)."""
    word = _WORD.match(index.text, chunk.start)
    what = (
        f"{MAX_STEPS:,} steps (pipe steps, and the clauses of SQL queries)"
        if builder.steps > MAX_STEPS
        else f"{MAX_TOKENS:,} tokens in SQL expressions and queries"
    )
    reporter.error(
        "E0903",
        f"the program would pass flowc's bound of {what}",
        index.span(chunk.start, word.end() if word else chunk.start + 1),
        help="split the job (docs/limits.md lists flowc's bounds)",
    )


def _query_steps(tree: exp.Expr) -> int:
    """The steps a SQL query becomes, about (see flowc.lower_sql): one for the SELECT list,
    one per JOIN, WHERE, HAVING and DISTINCT, two for a GROUP BY; a UNION's sides' sum."""
    steps = 0
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, exp.SetOperation):
            stack.extend(side for side in (node.this, node.expression) if side is not None)
            continue
        args = node.args
        steps += 1 + len(args.get("joins") or ())
        steps += sum(1 for clause in ("where", "having", "distinct") if args.get(clause))
        steps += 2 if args.get("group") else 0
    return steps


def _report_syntax_error(
    error: lark.exceptions.UnexpectedInput, chunk: _Chunk, index: LineIndex, reporter: Reporter
) -> None:
    from lark.exceptions import UnexpectedCharacters, UnexpectedToken

    if isinstance(error, UnexpectedToken):
        token = error.token
        if token.type == "$END":
            span_start = chunk.last_token_end
            span = index.span(span_start, span_start)
        else:
            span_start = chunk.start + (token.start_pos or 0)
            if token.type == "SOUP":
                piece = re.match(r"\w+|\S", str(token))
                text = piece.group() if piece else str(token)
                kind = "NUMBER" if text[0].isdigit() else "NAME" if text[0].isalpha() else "CHAR"
                kind = "NAME" if text[0] == "_" else kind
                token = Token.make(kind, text, 0, len(text))
            span = index.span(span_start, span_start + len(str(token)))
            if index.text.startswith("/*", span_start):
                _unterminated_comment(reporter, index, span_start)
                return
        if token.type == "CHAR":
            reporter.error("E0001", f"syntax error: unexpected character '{token}'", span)
            return
        expected_set = set(error.expected)
        found = _describe_token(token)
        if expected_set & {"RPAR", "RSQB", "END"}:
            opener = _open_bracket(index.text, chunk.start, span_start)
            if opener is not None:
                closer = {"(": "')'", "[": "']'", "CASE": "END"}[opener[0]]
                wanted = (
                    f"',' or {closer}"
                    if "COMMA" in expected_set and opener[0] != "CASE"
                    else closer
                )
                line, column = index.position(opener[1])
                reporter.error(
                    "E0001",
                    f"syntax error: expected {wanted}, found {found}",
                    span,
                    help=f"the '{opener[0]}' at line {line}, column {column} is not closed",
                )
                return
        expected, help = _expected_text(expected_set)
        if token.type == "NAME" and {"SOURCE", "SINK"} <= expected_set:
            help = create_help(str(token), index.text[chunk.start : chunk.end]) or help
        reporter.error("E0001", f"syntax error: expected {expected}, found {found}", span, help)
        return
    if isinstance(error, UnexpectedCharacters):
        start = chunk.start + (error.pos_in_stream or 0)
        char = index.text[start]
        if index.text.startswith("/*", start):
            _unterminated_comment(reporter, index, start)
        elif char in "'\"":
            reporter.error(
                "E0001",
                "syntax error: unterminated string",
                index.span(start, start + 1),
                help=f"close the string with {char}",
            )
        elif char == "`":
            reporter.error(
                "E0001",
                "syntax error: unterminated quoted name",
                index.span(start, start + 1),
                help="close the name with `",
            )
        else:
            reporter.error(
                "E0001",
                f"syntax error: unexpected character {char!r}",
                index.span(start, start + 1),
            )
        return
    span = index.span(chunk.end, chunk.end)
    reporter.error("E0001", "syntax error: unexpected end of input", span)


def _unterminated_comment(reporter: Reporter, index: LineIndex, start: int) -> None:
    reporter.error(
        "E0001",
        "syntax error: unterminated block comment",
        index.span(start, start + 2),
        help="close the comment with */",
    )


_BRACKET_OPEN = frozenset({"LPAR", "LSQB", "CASE"})
_BRACKET_CLOSE = frozenset({"RPAR", "RSQB", "END"})


_BARE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

#: What sqlglot parses that is a statement, not an expression.
_STATEMENTS = (exp.Command, exp.DDL, exp.DML, exp.Set, exp.Use)


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

        instance = Dialect.get_or_raise(dialect)
        found = mine[dialect] = (instance.tokenizer_class(dialect=instance), instance.parser())
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


def _parse_sql(text: str, dialect: str) -> tuple[exp.Expr, int]:
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
_LONG_EXPRESSION = 4096
#: About sqlglot's tokens (a string one token), for counting before it parses: a regex does
#: it thirty times as fast.
_TOKEN = re.compile(
    r"""'[^'\\]*(?:(?:\\.|'')[^'\\]*)*'|"[^"\\]*(?:(?:\\.|"")[^"\\]*)*"|`[^`]*(?:``[^`]*)*`"""
    r"|\w+|\S",
    re.S,
)


def _count_tokens(text: str) -> int:
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


def _parse_sql_uncached(text: str, dialect: str) -> exp.Expr:
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
def _sql_keywords(dialect: str) -> frozenset[str]:
    from sqlglot.dialects.dialect import Dialect

    return frozenset(Dialect.get_or_raise(dialect).tokenizer_class.KEYWORDS)


class _AstBuilder:
    """Lark tree of one statement → AST node. ``base`` is the statement's offset in the file.

    A plain post-order walk calling ``rule(meta, children)``: Lark's Transformer with
    ``v_args(meta=True)`` wraps every call, which costs a third of the parse on big files.
    """

    def __init__(self, index: LineIndex, reporter: Reporter) -> None:
        self.index = index
        self.reporter = reporter
        self.base = 0
        self.dialect = DEFAULT_DIALECT
        #: Pipe steps and SQL clauses built so far (bounded by MAX_STEPS), and the tokens
        #: of SQL expressions and queries (bounded by MAX_TOKENS).
        self.steps = 0
        self.tokens = 0

    def transform(self, tree: lark.Tree[lark.Token]) -> Any:
        """The node of a tree Lark parsed (the driver builds nodes without trees)."""
        return self._walk(tree)[0]

    def _walk(self, tree: lark.Tree[lark.Token]) -> tuple[Any, int, int]:
        """Build the node of ``tree``; also return the offsets of its first and last token.

        Spans come from the tokens here rather than from Lark's ``propagate_positions``,
        which costs a fifth of the parse.
        """
        from lark import Tree

        children: list[Any] = []
        start = end = -1
        for child in tree.children:
            if isinstance(child, Tree):
                value, first, last = self._walk(child)
                children.append(value)
            elif child is None:
                children.append(None)
                continue
            else:
                first, last = child.start_pos or 0, child.end_pos or 0
                children.append(Token.make(child.type, str(child), first, last))
            if first >= 0:
                if start < 0:
                    start = first
                end = last
        meta = Bounds(start, end)
        return getattr(self, str(tree.data))(meta, children), start, end

    # -- helpers

    def _span(self, meta: Bounds) -> Span:
        if meta.start_pos < 0:
            return self.index.span(self.base, self.base)
        return self.index.span(self.base + meta.start_pos, self.base + meta.end_pos)

    def _token_span(self, token: Token) -> Span:
        start = self.base + (token.start_pos or 0)
        return self.index.span(start, start + len(str(token)))

    def _text(self, meta: Bounds) -> str:
        return self.index.text[self.base + meta.start_pos : self.base + meta.end_pos]

    @staticmethod
    def _options(node: Any) -> tuple[tuple[ast.Option, ...], Span | None]:
        if node is None:
            return (), None
        options, span = node
        return options, span

    def _step(self, meta: Bounds, keyword: Token, options: Any) -> dict[str, Any]:
        self.steps += 1
        hints, hints_span = self._options(options)
        return {
            "keyword_span": self._token_span(keyword),
            "hints": hints,
            "hints_span": hints_span,
            "span": self._span(meta),
        }

    def _sql(self, text: str, span: Span, statement: bool) -> exp.Expr | None:
        bare = not statement and _BARE_NAME.fullmatch(text)
        if bare and text.upper() not in _sql_keywords(self.dialect):
            # A bare column name, the commonest expression: no need for sqlglot's parser.
            identifier = exp.to_identifier(text)
            identifier.meta.update({"line": 1, "col": len(text), "start": 0, "end": len(text) - 1})
            self.tokens += 1
            return exp.Column(this=identifier)
        if len(text) > _LONG_EXPRESSION:
            counted = _count_tokens(text)
            if self.tokens + counted > MAX_TOKENS:
                self.tokens += counted  # too large to parse: parse() reports it
                return None
        try:
            tree, tokens = _parse_sql(text, self.dialect)
        except ParseError as error:
            self._report_sqlglot_error(error, text, span)
            return None
        except SqlglotError as error:
            self.reporter.error("E0003", f"invalid SQL: {_first_line(str(error))}", span)
            return None
        except RecursionError:
            self.reporter.error(
                "E0004",
                "expression is too deeply nested or too long to compile",
                span,
                help="split it into several steps",
            )
            return None
        except ValueError as error:
            self.reporter.error("E0003", f"invalid SQL: {_first_line(str(error))}", span)
            return None
        except (AttributeError, IndexError, KeyError, TypeError):
            # sqlglot's function builders assume well-formed calls: map(k) has no value
            self.reporter.error(
                "E0003",
                "invalid SQL: cannot parse this expression",
                span,
                help="check the arguments of its functions",
            )
            return None
        self.tokens += tokens
        if isinstance(tree, _STATEMENTS):
            self.reporter.error(
                "E0003",
                "invalid SQL: a statement is not allowed here",
                span,
                help="end the previous statement with ';'"
                if statement
                else "write an expression here",
            )
            return None
        if isinstance(tree, exp.Query) != statement:
            what = "a query" if statement else "an expression"
            self.reporter.error("E0003", f"invalid SQL: expected {what} here", span)
            return None
        return tree

    def _report_sqlglot_error(self, error: ParseError, text: str, span: Span) -> None:
        tvf = FLINK_WINDOW_TVF.search(text)
        if tvf is not None:
            kind = tvf.group(1).upper()
            self.reporter.error(
                "E0602",
                f"Flink's window table function TABLE({kind}(...)) is not Spark SQL",
                text_span(text, span, tvf.start(), tvf.end() - 1),
                help=flink_tvf_help(kind),
            )
            return
        detail = error.errors[0] if error.errors else {}
        line = detail.get("line")
        col = detail.get("col")
        description = detail.get("description") or _first_line(str(error))
        highlight = detail.get("highlight") or ""
        where = span
        if isinstance(line, int) and isinstance(col, int) and line >= 1:
            start_col = max(col - len(highlight) + 1, 1) if highlight else max(col, 1)
            file_line = span.line + line - 1
            file_col = (span.column + start_col - 1) if line == 1 else start_col
            width = max(len(highlight), 1)
            where = Span(span.file, file_line, file_col, file_line, file_col + width)
        description = re.sub(r"<class '(?:[\w.]+\.)?(\w+)'>", r"\1", description)
        if description.startswith("Required keyword"):
            description = "an operand is missing"
        message = f"invalid SQL expression: {description}"
        if highlight:
            message += f" near '{highlight}'"
        self.reporter.error("E0003", message, where, help=_sqlglot_help(description))

    def _plain(self, expr: ast.SqlExpr | None) -> ast.SqlExpr | None:
        """Reject ``expr word`` (sqlglot reads it as an alias) where no alias belongs."""
        if expr is None or not isinstance(expr.tree, exp.Alias):
            return expr
        self.reporter.error(
            "E0003",
            f"invalid SQL expression: unexpected '{expr.tree.alias}' after the expression",
            expr.span,
            help="remove it, or join the two parts with an operator",
        )
        return None

    # -- names, options, types

    def name(self, meta: Bounds, children: list[Token]) -> ast.Name:
        token = children[0]
        value = str(token)
        quoted = token.type == "QUOTED_NAME"
        if quoted:
            value = value[1:-1].replace("``", "`")
        return ast.Name(value=value, quoted=quoted, span=self._span(meta))

    def option_key(self, meta: Bounds, children: list[Token]) -> tuple[str, Span]:
        if len(children) == 1 and children[0].type == "STRING":
            key = str(ast.Value(kind="string", text=str(children[0]), span=self._span(meta)).python)
        else:
            parts = []
            for token in children:
                part = str(token)
                if token.type == "QUOTED_NAME":
                    part = part[1:-1].replace("``", "`")
                parts.append(part)
            key = ".".join(parts)
        return key, self._span(meta)

    def option_value(self, meta: Bounds, children: list[Token]) -> ast.Value:
        span = self._span(meta)
        first = children[0]
        if first.type == "STRING":
            return ast.Value(kind="string", text=str(first), span=span)
        if first.type == "MINUS":
            return ast.Value(kind="number", text="-" + str(children[1]), span=span)
        if first.type == "NUMBER":
            return ast.Value(kind="number", text=str(first), span=span)
        return ast.Value(kind="word", text=str(first), span=span)

    def option(self, meta: Bounds, children: list[Any]) -> ast.Option:
        (key, key_span), value = children
        return ast.Option(key=key, key_span=key_span, value=value, span=self._span(meta))

    def options(self, meta: Bounds, children: list[Any]) -> tuple[tuple[ast.Option, ...], Span]:
        return tuple(c for c in children if isinstance(c, ast.Option)), self._span(meta)

    def type(self, meta: Bounds, children: list[Any]) -> ast.TypeRef:
        return ast.TypeRef(text=self._text(meta), span=self._span(meta))

    def type_arg(self, meta: Bounds, children: list[Any]) -> None:
        return None

    # -- statements

    def statement(self, meta: Bounds, children: list[Any]) -> ast.Statement | None:
        node: ast.Statement | None = children[0]
        return node

    def set_stmt(self, meta: Bounds, children: list[Any]) -> ast.SetStmt:
        _, (key, key_span), value = children
        span = self._span(meta)
        option = ast.Option(
            key=key, key_span=key_span, value=value, span=key_span.cover(value.span)
        )
        return ast.SetStmt(option=option, span=span)

    def column_def(self, meta: Bounds, children: list[Any]) -> ast.ColumnDef:
        name, type_ref = children
        return ast.ColumnDef(name=name, type=type_ref, span=self._span(meta))

    def watermark_def(self, meta: Bounds, children: list[Any]) -> ast.WatermarkDef | None:
        _, _, column, _, expr = children
        expr = self._plain(expr)
        if expr is None:
            return None
        return ast.WatermarkDef(column=column, expr=expr, span=self._span(meta))

    def create_source(self, meta: Bounds, children: list[Any]) -> ast.CreateSource:
        name = children[2]
        elements = [c for c in children[3:-1] if c is not None]
        options, _ = self._options(children[-1])
        return ast.CreateSource(
            name=name,
            columns=tuple(e for e in elements if isinstance(e, ast.ColumnDef)),
            watermarks=tuple(e for e in elements if isinstance(e, ast.WatermarkDef)),
            options=options,
            span=self._span(meta),
        )

    def create_sink(self, meta: Bounds, children: list[Any]) -> ast.CreateSink:
        name = children[2]
        columns = tuple(c for c in children[3:-1] if isinstance(c, ast.ColumnDef))
        options, _ = self._options(children[-1])
        return ast.CreateSink(
            name=name, columns=columns or None, options=options, span=self._span(meta)
        )

    def create_view(self, meta: Bounds, children: list[Any]) -> ast.CreateView | None:
        if children[4] is None:
            return None
        return ast.CreateView(name=children[2], query=children[4], span=self._span(meta))

    def insert_stmt(self, meta: Bounds, children: list[Any]) -> ast.Insert | None:
        if children[3] is None:
            return None
        return ast.Insert(sink=children[2], query=children[3], span=self._span(meta))

    # -- queries

    def relation(self, meta: Bounds, children: list[Any]) -> ast.Relation:
        return ast.Relation(name=children[0], side_output=children[1], span=self._span(meta))

    def pipe_query(self, meta: Bounds, children: list[Any]) -> ast.PipeQuery | None:
        steps = [c for c in children[2:] if not isinstance(c, Token)]
        if any(s is None for s in steps):
            return None
        return ast.PipeQuery(source=children[1], steps=tuple(steps), span=self._span(meta))

    def sql_query(self, meta: Bounds, children: list[Any]) -> ast.SqlQuery | None:
        span = self._span(meta)
        text = self._text(meta)
        tree = self._sql(text, span, statement=True)
        if tree is None:
            return None
        self.steps += _query_steps(tree)
        return ast.SqlQuery(text=text, tree=tree, span=span)

    def expr(self, meta: Bounds, children: list[Token]) -> ast.SqlExpr | None:
        span = self._span(meta)
        depth = deepest = 0
        for token in children:
            if token.type in _BRACKET_OPEN:
                depth += 1
                deepest = max(deepest, depth)
            elif token.type in _BRACKET_CLOSE:
                depth -= 1
        if deepest > MAX_EXPRESSION_DEPTH:
            self.reporter.error(
                "E0004",
                f"expression nests brackets {deepest} deep; at most {MAX_EXPRESSION_DEPTH} "
                "are allowed",
                span,
                help="split it into several steps, or name parts with EXTEND",
            )
            return None
        text = self._text(meta)
        tree = self._sql(text, span, statement=False)
        if tree is None:
            return None
        return ast.SqlExpr(text=text, tree=tree, span=span)

    def select_item(self, meta: Bounds, children: list[Any]) -> ast.SelectItem | None:
        expr, _, alias = children
        if expr is None:
            return None
        if alias is not None:
            expr = self._plain(expr)
            if expr is None:
                return None
        if alias is None and isinstance(expr.tree, exp.Alias):
            alias_text = expr.tree.alias
            alias = ast.Name(value=alias_text, quoted=False, span=expr.span)
            expr = ast.SqlExpr(text=expr.text, tree=expr.tree.this, span=expr.span)
        return ast.SelectItem(expr=expr, alias=alias, span=self._span(meta))

    def rename_item(self, meta: Bounds, children: list[Any]) -> ast.RenameItem:
        old, _, new = children
        return ast.RenameItem(old=old, new=new, span=self._span(meta))

    def route_branch(self, meta: Bounds, children: list[Any]) -> ast.RouteBranch | None:
        name, _, condition = children
        condition = self._plain(condition)
        if condition is None:
            return None
        return ast.RouteBranch(name=name, condition=condition, span=self._span(meta))

    # -- steps (None when a part failed to parse; the error is already reported)

    def where_step(self, meta: Bounds, children: list[Any]) -> ast.Where | None:
        keyword, condition, options = children
        condition = self._plain(condition)
        if condition is None:
            return None
        return ast.Where(condition=condition, **self._step(meta, keyword, options))

    def select_step(self, meta: Bounds, children: list[Any]) -> ast.Select | None:
        items = children[1:-1]
        if any(i is None for i in items):
            return None
        return ast.Select(items=tuple(items), **self._step(meta, children[0], children[-1]))

    def extend_step(self, meta: Bounds, children: list[Any]) -> ast.Extend | None:
        items = children[1:-1]
        if any(i is None for i in items):
            return None
        return ast.Extend(items=tuple(items), **self._step(meta, children[0], children[-1]))

    def drop_step(self, meta: Bounds, children: list[Any]) -> ast.Drop:
        return ast.Drop(
            columns=tuple(children[1:-1]), **self._step(meta, children[0], children[-1])
        )

    def rename_step(self, meta: Bounds, children: list[Any]) -> ast.Rename:
        return ast.Rename(
            items=tuple(children[1:-1]), **self._step(meta, children[0], children[-1])
        )

    def explode_step(self, meta: Bounds, children: list[Any]) -> ast.Explode | None:
        keyword, expr, _, alias, options = children
        expr = self._plain(expr)
        if expr is None:
            return None
        return ast.Explode(expr=expr, alias=alias, **self._step(meta, keyword, options))

    def key_by_step(self, meta: Bounds, children: list[Any]) -> ast.KeyBy | None:
        keys = [self._plain(k) for k in children[2:-1]]
        plain = [k for k in keys if k is not None]
        if len(plain) != len(keys):
            return None
        return ast.KeyBy(keys=tuple(plain), **self._step(meta, children[0], children[-1]))

    def partition_step(self, meta: Bounds, children: list[Any]) -> ast.Partition:
        keyword, options = children
        return ast.Partition(kind=str(keyword).upper(), **self._step(meta, keyword, options))

    def partition_by_step(self, meta: Bounds, children: list[Any]) -> ast.PartitionBy | None:
        keyword, _, expr, options = children
        expr = self._plain(expr)
        if expr is None:
            return None
        return ast.PartitionBy(expr=expr, **self._step(meta, keyword, options))

    def window_step(self, meta: Bounds, children: list[Any]) -> ast.Window | None:
        keyword, kind = children[0], children[1]
        args = [self._plain(c) for c in children[2:-1] if not isinstance(c, Token)]
        plain = [a for a in args if a is not None]
        if len(plain) != len(args):
            return None
        return ast.Window(
            kind=str(kind).upper(), args=tuple(plain), **self._step(meta, keyword, children[-1])
        )

    def aggregate_step(self, meta: Bounds, children: list[Any]) -> ast.Aggregate | None:
        items = children[1:-1]
        if any(i is None for i in items):
            return None
        return ast.Aggregate(items=tuple(items), **self._step(meta, children[0], children[-1]))

    def deduplicate_step(self, meta: Bounds, children: list[Any]) -> ast.Deduplicate | None:
        keyword, options = children[0], children[-1]
        columns: list[Any] = []
        within = None
        rest = children[1:-1]
        i = 0
        while i < len(rest):
            item = rest[i]
            if isinstance(item, Token) and item.type == "WITHIN":
                within = self._plain(rest[i + 1])
                if within is None:
                    return None
                i += 2
                continue
            if isinstance(item, Token) or item is None:
                i += 1
                continue
            if self._plain(item) is None:
                return None
            columns.append(item)
            i += 1
        return ast.Deduplicate(
            columns=tuple(columns), within=within, **self._step(meta, keyword, options)
        )

    def join_step(self, meta: Bounds, children: list[Any]) -> ast.Join | None:
        kind_token, _outer, join_token, right, _on, condition, options = children
        condition = self._plain(condition)
        if _on is not None and condition is None:
            return None
        kind = str(kind_token).upper() if kind_token is not None else "INNER"
        first = kind_token if kind_token is not None else join_token
        return ast.Join(
            kind=kind, right=right, condition=condition, **self._step(meta, first, options)
        )

    def union_step(self, meta: Bounds, children: list[Any]) -> ast.UnionAll:
        return ast.UnionAll(
            others=tuple(children[2:-1]), **self._step(meta, children[0], children[-1])
        )

    def route_step(self, meta: Bounds, children: list[Any]) -> ast.Route | None:
        branches = children[1:-1]
        if any(b is None for b in branches):
            return None
        return ast.Route(branches=tuple(branches), **self._step(meta, children[0], children[-1]))


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else "parse error"


def _sqlglot_help(description: str) -> str | None:
    if "Expecting )" in description:
        return "a '(' is not closed"
    if "Required keyword" in description:
        return "an operator is missing an operand"
    return None
