"""Parse .flow source text into the AST (:mod:`flowc.ast`): the loop over statements.

The file is cut into statements first (:mod:`flowc.syntax.source_text`), then each statement is
parsed with the LALR grammar in ``grammar/flow.lark``. A syntax error costs one statement,
not the file: the parser reports it (:mod:`flowc.syntax.syntax_errors`) and goes on with the next
statement, so every problem is reported. :class:`flowc.syntax.lalr.Driver` runs the grammar's
LALR tables (shipped precomputed) and :class:`flowc.syntax.ast_builder.AstBuilder` makes the AST
as it goes; Lark itself parses only statements the driver stops at, to report their syntax
errors. SQL expressions are handed to sqlglot (:mod:`flowc.sql.sql_parsing`). This module also
stops the parse at flowc's bounds on steps and tokens (E0903).
"""

from __future__ import annotations

import hashlib
import threading
from functools import cache
from typing import cast

from flowc import ast
from flowc.diagnostics import Reporter
from flowc.errorcodes import Code
from flowc.limits import MAX_STEPS, MAX_TOKENS
from flowc.spans import Span
from flowc.sql.flink_dialect import (
    FLINK,
    code_only,
    hint_comments,
    unsupported_clauses,
)
from flowc.sql.match_recognize import MatchInput, Refusal, match_input, read_match_recognize
from flowc.sql.sql_parsing import (
    NODE_BYTES,
    clear_parse_cache,
    copy_tree,
    deep_recursion,
    tree_bytes,
)
from flowc.sql.sqltypes import clear_typing_cache
from flowc.syntax.ast_builder import MAX_EXPRESSION_DEPTH, AstBuilder, ShownQuery
from flowc.syntax.flink_ddl import resolve_tables
from flowc.syntax.lalr import Driver, NoFastPath, lark_parser, tables
from flowc.syntax.source_text import WORD, Chunk, LineIndex, long_literals, split_statements
from flowc.syntax.syntax_errors import report_syntax_error
from flowc.vocabulary import LiteralKind

__all__ = [
    "MAX_EXPRESSION_DEPTH",
    "NODE_BYTES",
    "LineIndex",
    "clear_expression_cache",
    "copy_tree",
    "deep_recursion",
    "long_literals",
    "parse",
    "tree_bytes",
]

_driver_lock = threading.Lock()


@cache
def _driver() -> Driver:
    with _driver_lock:  # the first call builds the tables: once, whatever the threads
        return Driver(tables())


def parse(text: str, file: str, reporter: Reporter) -> ast.Program:
    """Parse a whole file; syntax errors go to ``reporter`` and drop their statement."""
    index = LineIndex(file, text)
    builder = AstBuilder(index, reporter)
    statements: list[ast.Statement | ShownQuery] = []
    #: Where each Flink-dialect CREATE TABLE stands once shown queries are two statements.
    flink_tables: set[int] = set()
    position = 0
    #: The hidden views' names MATCH_RECOGNIZE clauses read through (``t$match``, ...).
    hidden_names: set[str] = set()
    driver = _driver()
    for chunk in split_statements(text):
        builder.base = chunk.start
        source = text[chunk.start : chunk.end]
        reported = len(reporter.diagnostics)
        steps = builder.steps
        matched = _match_recognize(
            source, chunk.start, index, reporter, builder.dialect, hidden_names
        )
        if matched is None:
            continue
        source, hidden = matched
        builder.source = source
        if hidden is not None:
            statements.append(hidden)
            position += 1
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
                report_syntax_error(error, chunk, index, reporter)
                continue
            statement = builder.transform(tree)
        if builder.dialect == FLINK:
            _refuse_hints(source, chunk.start, index, reporter)
        if not chunk.terminated:
            end = chunk.last_token_end
            reporter.error(
                Code.E0002,
                "missing ';' after this statement",
                index.span(end, end),
                help="end every statement with ';'",
            )
        if statement is not None:
            flink_table = isinstance(statement, ast.CreateSource) and statement.bounded
            if flink_table and builder.dialect == FLINK:  # a source, sink or table by use
                flink_tables.add(position)
            statements.append(statement)
            position += 2 if isinstance(statement, ShownQuery) else 1
            if isinstance(statement, ast.SetStmt) and statement.option.key == "sql.dialect":
                builder.dialect = str(statement.option.value.python).lower()
        if builder.steps > MAX_STEPS or builder.tokens > MAX_TOKENS:
            _too_large(builder, chunk, index, reporter)
            break
    resolved = resolve_tables(shown_queries(statements), frozenset(flink_tables), reporter)
    return ast.Program(file=file, statements=tuple(resolved), span=index.span(0, len(text)))


def _match_recognize(
    source: str,
    base: int,
    index: LineIndex,
    reporter: Reporter,
    dialect: str,
    hidden_names: set[str],
) -> tuple[str, ast.CreateView | None] | None:
    """A statement's MATCH_RECOGNIZE: in the subset (one per statement, Flink dialect),
    the statement's text with ``table MATCH_RECOGNIZE (...)`` replaced by a hidden view's
    name (positions kept) and that view, reading the table through a MatchRecognize step;
    else E0759 at each part outside it and None (the statement is dropped). A statement
    without one is returned as it is."""
    found = unsupported_clauses(source)
    if not found:
        return source, None
    code = code_only(source)

    def span(start: int, end: int) -> Span:
        return index.span(base + start, base + end)

    refused = False
    taken: MatchInput | None = None
    for _, start, end in found:
        # A part that is to stay refused is E0759 there, with why.
        parts: list[Refusal] | MatchInput = list(read_match_recognize(code, start, end).refusals)
        if not parts:
            if dialect != FLINK:
                parts = [
                    Refusal(
                        "MATCH_RECOGNIZE is Flink SQL: flowc runs it in the Flink dialect",
                        "write SET sql.dialect = 'flink'; before the statement (Spark SQL has "
                        "no MATCH_RECOGNIZE)",
                        start,
                        end,
                    )
                ]
            elif taken is not None:
                parts = [
                    Refusal(
                        "one MATCH_RECOGNIZE per statement in flowc's subset",
                        "write the other one in a view of its own",
                        start,
                        end,
                    )
                ]
            else:
                parts = match_input(source, code, start, end, span)
        if isinstance(parts, MatchInput):
            taken = parts
            continue
        refused = True
        for part in parts:
            reporter.error(part.code, part.message, span(part.start, part.end), help=part.hint)
    if refused or taken is None:
        return None
    hidden = f"{taken.table}$match"
    number = 2
    while hidden in hidden_names:
        hidden, number = f"{taken.table}$match{number}", number + 1
    hidden_names.add(hidden)
    width = taken.end - taken.start
    replaced = source[: taken.start] + f"`{hidden}`".ljust(width) + source[taken.end :]
    table_span = span(taken.table_start, taken.table_end)
    view = ast.CreateView(
        name=ast.Name(value=hidden, quoted=True, span=table_span),
        query=ast.PipeQuery(
            source=ast.Relation(
                name=ast.Name(value=taken.table, span=table_span),
                side_output=None,
                span=table_span,
            ),
            steps=(taken.step,),
            span=taken.step.span,
        ),
        # at the statement's start: the plans build the view before the statement
        span=span(0, 0),
    )
    return replaced, view


def _refuse_hints(source: str, base: int, index: LineIndex, reporter: Reporter) -> None:
    """E0739 at each Flink hint of a Flink-dialect statement (``source``, at ``base``):
    flowc's reading would drop it as a comment, and with it what it asks for."""
    for start, end in hint_comments(source):
        reporter.error(
            Code.E0739,
            f"Flink's hint {source[start:end]} is not applied on Spark",
            index.span(base + start, base + end),
            help="for a table's options (OPTIONS), write them in its WITH (...), or define "
            "another table with them; remove other hints (Spark plans its own joins and "
            "keeps state as the job's settings say)",
        )


def _digest(text: str) -> str:
    """A shown query's text as 8 hex digits: another query (or the same one edited, even
    in its spacing, which may be inside a string) gets another checkpoint, as Flink's SQL
    client runs each SELECT as a new job; the same text keeps its state wherever the
    statement moves."""
    return hashlib.sha256(text.strip().encode("utf-8")).hexdigest()[:8]


def shown_queries(statements: list[ast.Statement | ShownQuery]) -> list[ast.Statement]:
    """Each query written as a statement made a console sink and an INSERT into it, as
    Flink's SQL client shows a SELECT's rows. The sink is ``select_<n>`` (the n-th such
    query; the next free name if the file defines that one), its span the query's."""
    if not any(isinstance(s, ShownQuery) for s in statements):
        return cast(list[ast.Statement], statements)
    taken = {
        s.name.value.lower()
        for s in statements
        if isinstance(s, ast.CreateSource | ast.CreateSink | ast.CreateView)
    }
    out: list[ast.Statement] = []
    number = 0
    digests: dict[str, int] = {}
    for statement in statements:
        if not isinstance(statement, ShownQuery):
            out.append(statement)
            continue
        number += 1
        while f"select_{number}" in taken:
            number += 1
        name = ast.Name(value=f"select_{number}", span=statement.span)
        digest = _digest(statement.text)
        digests[digest] = digests.get(digest, 0) + 1
        if digests[digest] > 1:  # the same text twice: each its own checkpoint
            digest = f"{digest}-{digests[digest]}"
        taken.add(name.value)
        span = statement.span
        connector = ast.Value(kind=LiteralKind.STRING, text="'console'", span=span)
        option = ast.Option(key="connector", key_span=span, value=connector, span=span)
        out.append(
            ast.CreateSink(
                name=name,
                columns=None,
                options=(option,),
                span=span,
                shows_result=digest,
            )
        )
        out.append(ast.Insert(sink=name, query=statement.query, span=span))
    return out


def clear_expression_cache() -> None:
    """Forget memoized expression parses and typings (benchmarks measure compiles from cold)."""
    clear_parse_cache()
    clear_typing_cache()


def _too_large(builder: AstBuilder, chunk: Chunk, index: LineIndex, reporter: Reporter) -> None:
    """E0903 at the statement whose steps or SQL tokens pass their bound; parsing stops
    there, well before the passes after it would take long (a step or a token of an
    expression costs more in each of them)."""
    word = WORD.match(index.text, chunk.start)
    what = (
        f"{MAX_STEPS:,} steps (pipe steps, and the clauses of SQL queries)"
        if builder.steps > MAX_STEPS
        else f"{MAX_TOKENS:,} tokens in SQL expressions and queries"
    )
    reporter.error(
        Code.E0903,
        f"the program would pass flowc's bound of {what}",
        index.span(chunk.start, word.end() if word else chunk.start + 1),
        help="split the job (docs/limits.md lists flowc's bounds)",
    )
