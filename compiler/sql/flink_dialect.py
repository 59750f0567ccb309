"""Flink SQL as a sqlglot dialect: ``SET sql.dialect = 'flink';`` reads the statements after
it as Flink 2.x writes them (docs/language.md, "Flink SQL").

sqlglot has no Flink dialect. Flink's SQL (Calcite's parser with Flink's lexical rules) is
close to Spark's: backquoted identifiers, single-quoted strings, the same INTERVAL forms;
so the dialect extends flowc's reading of Spark's (:mod:`flowc.sql.spark_patterns`) where
they differ. The trees it makes are sqlglot's, written as Spark SQL like any other (so a
string read here is written again as Spark reads it), and what the same function name
computes differently in Flink is rewritten before typing, so the program means what it
means on Flink.

Lexical differences kept here: a backslash in a string is a backslash (Flink has no
backslash escapes; ``''`` is a quote in both). Grammar: Flink's window table functions,
``FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' MINUTE))`` (also with named
arguments, ``DATA => TABLE t``), read as a :class:`sqlglot.exp.TableFromRows` around the
call, whose ``TABLE t`` argument is a :class:`sqlglot.exp.Table` (SESSION's ``TABLE t
PARTITION BY k`` keeps its keys as the table's ``partition``, a
:class:`sqlglot.exp.Partition`) and each named argument a :class:`sqlglot.exp.Kwarg`
(:mod:`flowc.sql.lower_sql` lowers them).
"""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Any, ClassVar

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.tokenizer_core import TokenType

from flowc.sql.spark_patterns import FLINK_AGGREGATE_META, SparkParser, SparkTokenizer

#: The name ``sql.dialect`` takes (sqlglot registers a dialect by its class's name).
FLINK = "flink"

#: Flink's window table functions (``FROM TABLE(TUMBLE(...))``).
WINDOW_TVFS = frozenset({"TUMBLE", "HOP", "CUMULATE", "SESSION"})


#: Aggregates whose type, and so value, Flink derives from the argument's type: AVG of
#: integers is an integer (the sum divided by the count, truncated), and so are the
#: variance family's (which Calcite reduces to sums and counts in the argument's type).
FLINK_AGGREGATES = (
    "AVG",
    "STDDEV",
    "STDDEV_POP",
    "STDDEV_SAMP",
    "VARIANCE",
    "VAR_POP",
    "VAR_SAMP",
)


def _flink_aggregate(build: Any) -> Any:
    """Spark's parser of the aggregate, its node marked as Flink's
    (:data:`flowc.sql.spark_patterns.FLINK_AGGREGATE_META`)."""

    def flink(args: list[exp.Expr]) -> exp.Expr:
        node: exp.Expr = build(args)
        node.meta[FLINK_AGGREGATE_META] = True
        return node

    return flink


def _place(node: exp.Expr, first: Any, last: Any) -> exp.Expr:
    """``node`` placed from token ``first`` to token ``last`` (for spans)."""
    node.meta.update({"line": first.line, "col": first.col, "start": first.start, "end": last.end})
    return node


class Flink(Spark):
    """Flink SQL, read into sqlglot's trees (registered as ``flink``)."""

    #: ``a / b`` of two exact integers is integer division (truncating, of their wider
    #: type): the parser marks each division ``typed``, the Spark generator writes it
    #: as Spark's ``div`` where both operands are typed as integers.
    TYPED_DIVISION = True
    #: ``REGEXP_EXTRACT(s, re)`` is group 0, the whole match (Spark's default is 1).
    REGEXP_EXTRACT_DEFAULT_GROUP = 0

    class Tokenizer(SparkTokenizer):
        #: Flink reads ``'a\\b'`` as the three characters ``a\\b``; only ``''`` escapes.
        STRING_ESCAPES: ClassVar[list[str]] = ["'"]

    class Parser(SparkParser):
        #: Flink's TO_TIMESTAMP and UNIX_TIMESTAMP kept as calls of their own (sqlglot
        #: would make ``TO_TIMESTAMP(s)`` a CAST and give ``UNIX_TIMESTAMP(s)`` Spark's
        #: default format): :mod:`flowc.sql.flink_functions` rewrites or refuses them.
        FUNCTIONS: ClassVar[dict[str, Any]] = {
            **SparkParser.FUNCTIONS,
            "TO_TIMESTAMP": lambda args: exp.Anonymous(this="TO_TIMESTAMP", expressions=args),
            "UNIX_TIMESTAMP": lambda args: exp.Anonymous(this="UNIX_TIMESTAMP", expressions=args),
            **{name: _flink_aggregate(SparkParser.FUNCTIONS[name]) for name in FLINK_AGGREGATES},
        }

        def _parse_table(
            self,
            schema: bool = False,
            joins: bool = False,
            alias_tokens: Collection[TokenType] | None = None,
            parse_bracket: bool = False,
            is_db_reference: bool = False,
            parse_partition: bool = False,
            consume_pipe: bool = False,
        ) -> exp.Expr | None:
            if not schema and not is_db_reference:
                tvf = self._parse_window_tvf()
                if tvf is not None:
                    if joins:
                        for join in self._parse_joins(alias_tokens=alias_tokens):
                            tvf.append("joins", join)
                    return tvf
            return super()._parse_table(
                schema=schema,
                joins=joins,
                alias_tokens=alias_tokens,
                parse_bracket=parse_bracket,
                is_db_reference=is_db_reference,
                parse_partition=parse_partition,
                consume_pipe=consume_pipe,
            )

        def _parse_window_tvf(self) -> exp.Expr | None:
            """``TABLE(TUMBLE(args))`` at the current token, else None (nothing read)."""
            tokens = self._tokens[self._index : self._index + 4]
            if not (
                len(tokens) == 4
                and tokens[0].token_type is TokenType.TABLE
                and tokens[1].token_type is TokenType.L_PAREN
                and tokens[2].text.upper() in WINDOW_TVFS
                and tokens[3].token_type is TokenType.L_PAREN
            ):
                return None
            first, name = tokens[0], tokens[2]
            self._advance(4)
            args = self._parse_csv(self._parse_window_tvf_argument)
            closing = self._curr
            self._match_r_paren()
            call = _place(exp.Anonymous(this=name.text.upper(), expressions=args), name, closing)
            last = self._curr
            self._match_r_paren()
            tvf = _place(exp.TableFromRows(this=call), first, last or closing)
            alias = self._parse_table_alias(alias_tokens=self.TABLE_ALIAS_TOKENS)
            if alias:
                tvf.set("alias", alias)
            return tvf

        def _parse_window_tvf_argument(self) -> exp.Expr | None:
            """``TABLE t``, ``DESCRIPTOR(ts)``, an interval; each maybe ``NAME => ...``."""
            named = None
            if self._next is not None and self._next.token_type is TokenType.FARROW:
                named = self._curr
                self._advance(2)
            start = self._curr
            value: exp.Expr | None
            if self._match(TokenType.TABLE):
                value = self._parse_table_parts()
                if value is not None and self._curr is not None:
                    partition_start = self._curr
                    if self._match(TokenType.PARTITION_BY):  # a key, or (keys): Calcite's
                        keys = (
                            self._parse_wrapped_csv(self._parse_column)
                            if self._curr is not None and self._curr.token_type is TokenType.L_PAREN
                            else [self._parse_column()]
                        )
                        value.set(
                            "partition",
                            _place(exp.Partition(expressions=keys), partition_start, self._prev),
                        )
                if value is not None and start is not None:
                    _place(value, start, self._prev)
            else:
                value = self._parse_assignment()
            if named is None:
                return value
            return _place(
                exp.Kwarg(this=exp.var(named.text.upper()), expression=value), named, self._prev
            )


#: Flink's spellings of column types that Spark spells otherwise (outside backquotes):
#: ``ROW<name type, ...>`` is Spark's STRUCT; CHAR(n) and VARCHAR(n) columns are
#: strings, which Flink reads and writes as they come (no padding, no truncation:
#: ``table.exec.sink.type-length-enforcer`` is IGNORE by default), and which Spark
#: refuses in the schema it reads records with; BYTES is Spark's BINARY.
_FLINK_TYPE_WORDS = re.compile(
    r"`(?:[^`]|``)*`"  # a quoted name: kept as written
    r"|\bROW\s*<"
    r"|\b(?:VAR)?CHAR\s*\(\s*\d+\s*\)"
    r"|\bBYTES\b",
    re.IGNORECASE,
)


#: Where CURRENT_WATERMARK is refused (docs/language.md, "CURRENT_WATERMARK on Spark"):
#: Spark hands a micro-batch's watermark only to a stateful processor, which flowc puts in
#: front of a WHERE or SELECT step; in an aggregate, a GROUP BY or a JOIN's ON there is none.
CURRENT_WATERMARK_MESSAGE = "CURRENT_WATERMARK is given only in a WHERE condition or a SELECT item"
CURRENT_WATERMARK_HELP = (
    "read it in a WHERE, as Flink's late-data routing does (WHERE CURRENT_WATERMARK(ts) IS "
    "NULL OR ts > CURRENT_WATERMARK(ts) keeps the rows on time, WHERE ts <= "
    "CURRENT_WATERMARK(ts) the late ones), or as a SELECT item of its own"
)


def flink_column_type(text: str) -> str:
    """A column type written in Flink SQL, spelled as Spark's type of the same values."""

    def spark(match: re.Match[str]) -> str:
        word = match.group(0)
        if word.startswith("`"):
            return word
        upper = word.upper()
        if upper.startswith("ROW"):
            return "STRUCT<"
        if upper == "BYTES":
            return "BINARY"
        return "STRING"

    return _FLINK_TYPE_WORDS.sub(spark, text)


#: Flink SQL clauses flowc does not run, refused by name before sqlglot reads them (it
#: would report a bracket it cannot close): their message and hint. The name counts only
#: before an opening bracket, so a Spark-dialect column of that name is still a column.
UNSUPPORTED_CLAUSES = {
    "MATCH_RECOGNIZE": (
        "MATCH_RECOGNIZE (Flink's pattern recognition over each key's ordered rows) is not "
        "supported yet",
        "no form of it is: it needs a state machine per key kept across micro-batches "
        "(Flink's CEP operator), a processor flowc does not have yet; compute the pattern "
        "outside flowc, or express its steps as windows and joins",
    ),
}
_CLAUSE_WORDS = re.compile(r"\b(" + "|".join(UNSUPPORTED_CLAUSES) + r")\b(?=\s*\()", re.IGNORECASE)
#: The clauses' names anywhere: blanking strings and comments makes no name, so a text
#: without one has no clause (every statement is checked; almost none has one).
_CLAUSE_NAMES = re.compile("|".join(UNSUPPORTED_CLAUSES), re.IGNORECASE)


def unsupported_clauses(text: str) -> list[tuple[str, int, int]]:
    """Each clause of :data:`UNSUPPORTED_CLAUSES` in ``text`` outside strings, quoted names
    and comments: its name and characters ``[start, end)``."""
    if _CLAUSE_NAMES.search(text) is None:
        return []
    code = _code_only(text)
    return [(m.group(1).upper(), m.start(), m.end()) for m in _CLAUSE_WORDS.finditer(code)]


def code_only(text: str) -> str:
    """``text`` with strings, quoted names and comments blanked (positions kept): what the
    readers of a refused clause's parts look at."""
    return _code_only(text)


def _code_only(text: str) -> str:
    """``text`` with strings, quoted names and comments blanked (positions kept)."""
    out = list(text)
    for start, end in _literal_places(text):
        out[start:end] = " " * (end - start)
    return "".join(out)


#: Where a string, quoted name or comment may start: the scan below jumps from one to the
#: next instead of looking at each character in Python.
_LITERAL_START = re.compile(r"['`]|--|/\*")


def _literal_places(text: str) -> list[tuple[int, int]]:
    """The ``[start, end)`` of each string, quoted name and comment of ``text``."""
    found: list[tuple[int, int]] = []
    size = len(text)
    start = _LITERAL_START.search(text)
    while start is not None:
        position = start.start()
        char = text[position]
        if char in "'`":
            close = text.find(char, position + 1)
            while close != -1 and text[close + 1 : close + 2] == char:  # '' and ``
                close = text.find(char, close + 2)
            end = size if close == -1 else close + 1
        elif char == "-":  # --
            newline = text.find("\n", position)
            end = size if newline == -1 else newline + 1
        else:  # /*
            close = text.find("*/", position + 2)
            end = size if close == -1 else close + 2
        found.append((position, end))
        start = _LITERAL_START.search(text, end)
    return found


def hint_comments(text: str) -> list[tuple[int, int]]:
    """The ``[start, end)`` of each ``/*+ ... */`` in ``text`` outside strings, quoted names
    and other comments: Flink's hints (``/*+ OPTIONS('k' = 'v') */`` after a table, the
    dynamic table options; ``/*+ BROADCAST(t) */``, ``/*+ STATE_TTL(...) */`` after
    SELECT), which Spark's SQL would read as a comment or as hints of its own."""
    return [(a, b) for a, b in _literal_places(text) if text.startswith("/*+", a)]
