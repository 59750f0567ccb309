"""The syntax tree of a .flow file: frozen, slotted dataclasses, each with its source span.

Built from Lark's parse tree by :mod:`flowc.syntax.parser` (the shape of Lark's
``examples/advanced/create_ast.py``). SQL expressions are kept as their source text
with the sqlglot tree parsed from it; the tree is excluded from equality so that two
programs with the same text compare equal.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field, fields, is_dataclass
from types import MappingProxyType
from typing import TypeAlias

from sqlglot import exp

from flowc.fast_dataclass import dataclass
from flowc.spans import Span
from flowc.vocabulary import JoinKind, LiteralKind, Partitioner, WindowKind

#: A field's metadata: the AST's JSON leaves it out while it has its default (Flink's
#: constraints, which programs without them do not show).
OMITTED_UNSET: Mapping[str, bool] = MappingProxyType({"omitted_unset": True})


@dataclass(frozen=True, slots=True, kw_only=True)
class Name:
    """An identifier as written; ``quoted`` for `` `back-quoted` `` names."""

    value: str
    quoted: bool = False
    span: Span


@dataclass(frozen=True, slots=True, kw_only=True)
class SqlExpr:
    """A Spark SQL expression: its source text and sqlglot's tree of it."""

    text: str
    tree: exp.Expr = field(compare=False, repr=False)
    span: Span


@dataclass(frozen=True, slots=True, kw_only=True)
class Value:
    """A literal in SET or WITH (...): ``kind`` is string, number or word."""

    kind: LiteralKind
    text: str
    span: Span

    @property
    def python(self) -> str | int | float | bool:
        """The value as Python sees it: strings unquoted, numbers parsed, words as written."""
        if self.kind == LiteralKind.STRING:
            return _unquote_string(self.text)
        if self.kind == LiteralKind.NUMBER:
            try:
                return int(self.text)
            except ValueError:
                try:
                    return float(self.text)
                except ValueError:
                    return self.text
        return self.text


def _unquote_string(text: str) -> str:
    quote = text[0]
    body = text[1:-1].replace(quote * 2, quote)
    out: list[str] = []
    escapes = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", "'": "'", '"': '"'}
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            out.append(escapes.get(nxt, "\\" + nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


@dataclass(frozen=True, slots=True, kw_only=True)
class Option:
    """``key = value`` in a WITH (...) list or a SET statement."""

    key: str
    key_span: Span
    value: Value
    span: Span


@dataclass(frozen=True, slots=True, kw_only=True)
class TypeRef:
    """A Spark SQL type as written (``DECIMAL(12, 2)``, ``ARRAY<STRING>``); in the Flink
    dialect, Spark's spelling of the Flink type written (``ROW<a INT>`` is ``STRUCT<a INT>``:
    :func:`flowc.sql.flink_dialect.flink_column_type`)."""

    text: str
    span: Span


# ---------------------------------------------------------------- statements


@dataclass(frozen=True, slots=True, kw_only=True)
class SetStmt:
    option: Option
    span: Span


@dataclass(frozen=True, slots=True, kw_only=True)
class ColumnDef:
    """A declared column. ``not_null`` is Flink's ``NOT NULL`` (its span; ``NULL`` is the
    default and leaves it None)."""

    name: Name
    type: TypeRef
    span: Span
    not_null: Span | None = field(default=None, metadata=OMITTED_UNSET)


@dataclass(frozen=True, slots=True, kw_only=True)
class PrimaryKey:
    """Flink's ``PRIMARY KEY (k, ...) NOT ENFORCED``, a table's or one column's."""

    columns: tuple[Name, ...]
    span: Span


@dataclass(frozen=True, slots=True, kw_only=True)
class WatermarkDef:
    column: Name
    expr: SqlExpr
    span: Span


@dataclass(frozen=True, slots=True, kw_only=True)
class ComputedColumn:
    """``name AS expr`` among a source's columns (Flink's computed column)."""

    name: Name
    expr: SqlExpr
    span: Span


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateSource:
    """``CREATE SOURCE`` (a stream) or ``CREATE TABLE`` (``bounded``: a dimension table).
    ``computed`` are its computed columns (``pt AS PROCTIME()``)."""

    name: Name
    columns: tuple[ColumnDef, ...]
    watermarks: tuple[WatermarkDef, ...]
    options: tuple[Option, ...]
    span: Span
    bounded: bool = False
    computed: tuple[ComputedColumn, ...] = ()
    primary_key: PrimaryKey | None = field(default=None, metadata=OMITTED_UNSET)
    partitioned_by: PartitionedBy | None = field(default=None, metadata=OMITTED_UNSET)


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionedBy:
    """Flink's ``PARTITIONED BY (a, b)`` of a ``CREATE TABLE``."""

    columns: tuple[Name, ...]
    span: Span


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateSink:
    """``CREATE SINK``, or a Flink-dialect ``CREATE TABLE`` that is written: its
    ``primary_key`` is the upsert key. ``shows_result``: for the console sink of a query
    written as a statement (``SELECT ...;``), a digest of the query's text (its
    checkpoint is the text's, not the statement's place); its output mode is chosen by
    the result. ``flink_table``: a Flink-dialect ``CREATE TABLE`` (a console or noop one
    without ``mode`` takes its query's, as Flink's print and blackhole sinks take any
    changelog)."""

    name: Name
    columns: tuple[ColumnDef, ...] | None
    options: tuple[Option, ...]
    span: Span
    primary_key: PrimaryKey | None = field(default=None, metadata=OMITTED_UNSET)
    shows_result: str = field(default="", metadata=OMITTED_UNSET)
    flink_table: bool = field(default=False, metadata=OMITTED_UNSET)


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateView:
    name: Name
    query: Query
    span: Span


@dataclass(frozen=True, slots=True, kw_only=True)
class Insert:
    sink: Name
    query: Query
    span: Span


@dataclass(frozen=True, slots=True, kw_only=True)
class FunctionSignature:
    """``(arg TYPE, ...) RETURNS TYPE``: what every call is checked against."""

    params: tuple[ColumnDef, ...]
    returns: TypeRef
    span: Span


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateFunction:
    """``CREATE FUNCTION name(arg TYPE, ...) RETURNS TYPE LANGUAGE python AS 'module:fn'``.

    ``signature`` is None for Flink's untyped form, which analysis refuses with a hint;
    ``language`` is None where it was left out (Flink's default is Java)."""

    name: Name
    signature: FunctionSignature | None
    language: Name | None
    target: Value
    span: Span


Statement: TypeAlias = SetStmt | CreateSource | CreateSink | CreateView | CreateFunction | Insert


# ---------------------------------------------------------------- queries


@dataclass(frozen=True, slots=True, kw_only=True)
class Relation:
    """A stream read by name: a source, a view, or a view's side output (``v.name``)."""

    name: Name
    side_output: Name | None
    span: Span

    @property
    def text(self) -> str:
        if self.side_output is None:
            return self.name.value
        return f"{self.name.value}.{self.side_output.value}"


@dataclass(frozen=True, slots=True, kw_only=True)
class SelectItem:
    expr: SqlExpr
    alias: Name | None
    span: Span


@dataclass(frozen=True, slots=True, kw_only=True)
class SetItem:
    """``column = expr`` of a SET step."""

    column: Name
    expr: SqlExpr
    span: Span


@dataclass(frozen=True, slots=True, kw_only=True)
class RenameItem:
    old: Name
    new: Name
    span: Span


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteBranch:
    name: Name
    condition: SqlExpr
    span: Span


@dataclass(frozen=True, slots=True, kw_only=True)
class StepBase:
    """What every pipe step has: its keyword's span, its hints and its whole span."""

    keyword_span: Span
    hints: tuple[Option, ...]
    hints_span: Span | None
    span: Span


@dataclass(frozen=True, slots=True, kw_only=True)
class Where(StepBase):
    condition: SqlExpr


@dataclass(frozen=True, slots=True, kw_only=True)
class Select(StepBase):
    items: tuple[SelectItem, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Extend(StepBase):
    items: tuple[SelectItem, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Set(StepBase):
    """``SET col = expr, ...`` (BigQuery's pipe SET): each column keeps its place and takes
    its expression's value and type; every expression reads the input row."""

    items: tuple[SetItem, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Drop(StepBase):
    columns: tuple[Name, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Rename(StepBase):
    items: tuple[RenameItem, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Explode(StepBase):
    expr: SqlExpr
    alias: Name | None


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyBy(StepBase):
    keys: tuple[SqlExpr, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Partition(StepBase):
    """REBALANCE, RESCALE, SHUFFLE, BROADCAST, GLOBAL or FORWARD (upper case in ``kind``)."""

    kind: Partitioner


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionBy(StepBase):
    expr: SqlExpr


@dataclass(frozen=True, slots=True, kw_only=True)
class Window(StepBase):
    """TUMBLE(ts, size), HOP(ts, size, slide) or SESSION(ts, gap); ``kind`` upper case."""

    kind: WindowKind
    args: tuple[SqlExpr, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Aggregate(StepBase):
    items: tuple[SelectItem, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Deduplicate(StepBase):
    columns: tuple[SqlExpr, ...]
    within: SqlExpr | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Over(StepBase):
    """Flink's OverAggregate (a SQL SELECT's ``AGG(x) OVER (PARTITION BY k ORDER BY ts
    ROWS|RANGE BETWEEN ... PRECEDING AND CURRENT ROW)`` calls, one window): each input row
    with ``items`` (``AGG(x) AS name``) computed over its frame, rows in ``order``.
    ``preceding`` is the frame's start: a row count (ROWS) or an interval (RANGE)."""

    partition: tuple[Name, ...]
    order: Name
    rows: bool
    preceding: SqlExpr
    items: tuple[SelectItem, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class MatchLiteral:
    """A literal of a MATCH_RECOGNIZE condition: ``kind`` is int, double, string, boolean
    or null; ``value`` its Python value."""

    kind: str
    value: str | int | float | bool | None
    span: Span


@dataclass(frozen=True, slots=True, kw_only=True)
class MatchColumn:
    """``col`` (the current row's) or ``V.col`` (variable V's last row, with the current
    one in V's own condition)."""

    variable: str | None
    column: str
    span: Span


@dataclass(frozen=True, slots=True, kw_only=True)
class MatchCall:
    """``PREV(col[, n])``, ``FIRST(V.col[, n])``, ``LAST(V.col[, n])``, ``COUNT``,
    ``SUM``, ``AVG``, ``MIN``, ``MAX`` of ``V.col`` (``function`` upper case), or
    ``MATCH_ROWTIME()`` (no variable, no column)."""

    function: str
    variable: str | None
    column: str | None
    offset: int
    span: Span


@dataclass(frozen=True, slots=True, kw_only=True)
class MatchUnary:
    """``NOT x``, ``-x``, ``x IS NULL`` (op ``IS NULL``), ``x IS NOT NULL``."""

    op: str
    operand: MatchExpr
    span: Span


@dataclass(frozen=True, slots=True, kw_only=True)
class MatchBinary:
    """``AND``, ``OR``, a comparison (``=``, ``<>``, ``<``, ``<=``, ``>``, ``>=``) or
    ``+``, ``-``, ``*``."""

    op: str
    left: MatchExpr
    right: MatchExpr
    span: Span


MatchExpr: TypeAlias = MatchLiteral | MatchColumn | MatchCall | MatchUnary | MatchBinary


@dataclass(frozen=True, slots=True, kw_only=True)
class MatchVariable:
    """A PATTERN variable: least and most rows (None: unbounded), greedy or reluctant
    (Flink's reading: ``?`` and ``{n}`` never greedy), its DEFINE condition (None: TRUE)."""

    name: Name
    low: int
    high: int | None
    greedy: bool
    condition: MatchExpr | None
    span: Span


@dataclass(frozen=True, slots=True, kw_only=True)
class MatchMeasure:
    """``call AS name`` of MEASURES (evaluated FINAL, as Flink does)."""

    call: MatchCall | MatchColumn
    alias: Name
    span: Span


@dataclass(frozen=True, slots=True, kw_only=True)
class MatchRecognize(StepBase):
    """Flink's MATCH_RECOGNIZE (its Match operator) over the rows of each PARTITION BY
    key in ``order`` (the rowtime attribute), ONE ROW PER MATCH: the partition columns,
    then the measures (docs/language.md#match_recognize)."""

    partition: tuple[Name, ...]
    order: Name
    measures: tuple[MatchMeasure, ...]
    variables: tuple[MatchVariable, ...]
    past_last_row: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class OrderItem:
    """``expr [ASC|DESC]`` of a TOP step's BY list."""

    expr: SqlExpr
    descending: bool
    span: Span


@dataclass(frozen=True, slots=True, kw_only=True)
class Top(StepBase):
    """``TOP n BY order [PER columns] [AS rank]``: the first ``n`` rows of each group, as
    Flink's ROW_NUMBER() OVER (PARTITION BY ... ORDER BY ...) <= n (its Rank operator)."""

    count: int
    count_span: Span
    order: tuple[OrderItem, ...]
    per: tuple[SqlExpr, ...]
    rank: Name | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Join(StepBase):
    """``kind`` is INNER, LEFT, RIGHT or FULL. ``as_of`` is SQL's ``FOR SYSTEM_TIME AS OF
    x`` on the right relation (its expression ``x``; ``as_of_span`` covers the whole
    clause): the stream's processing time (a lookup) or, of a versioned table, its event
    time (a temporal join); anything else is E0265."""

    kind: JoinKind
    right: Relation
    condition: SqlExpr | None
    as_of: SqlExpr | None = None
    as_of_span: Span | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class UnionAll(StepBase):
    others: tuple[Relation, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Route(StepBase):
    branches: tuple[RouteBranch, ...]


Step: TypeAlias = (
    Where
    | Select
    | Extend
    | Set
    | Drop
    | Rename
    | Explode
    | KeyBy
    | Partition
    | PartitionBy
    | Window
    | Aggregate
    | Deduplicate
    | Over
    | MatchRecognize
    | Top
    | Join
    | UnionAll
    | Route
)


@dataclass(frozen=True, slots=True, kw_only=True)
class PipeQuery:
    source: Relation
    steps: tuple[Step, ...]
    span: Span


@dataclass(frozen=True, slots=True, kw_only=True)
class SqlQuery:
    """A Spark SQL SELECT (or Flink SQL's, per ``dialect``, the sqlglot dialect its text
    was read with); the compiler lowers it to pipe steps."""

    text: str
    tree: exp.Expr = field(compare=False, repr=False)
    span: Span
    dialect: str = "spark"
    #: Where the first character of ``text`` stands, when not at ``span`` (a hidden view
    #: of a CTE or subquery keeps its statement's text: :mod:`flowc.sql.sql_forms`).
    origin: Span | None = field(default=None, compare=False, repr=False)

    @property
    def text_origin(self) -> Span:
        """Where the first character of ``text`` stands in the file."""
        return self.origin if self.origin is not None else self.span


Query: TypeAlias = PipeQuery | SqlQuery


@dataclass(frozen=True, slots=True, kw_only=True)
class Program:
    """A whole file: its statements in order."""

    file: str
    statements: tuple[Statement, ...]
    span: Span


# ---------------------------------------------------------------- where SQL can be

#: Nodes that hold no SQL: their fields are never looked into.
_SQL_LEAVES = (Span, Name, Value, Option, TypeRef, Relation, ColumnDef, PrimaryKey)

#: Field types (as annotated here) that hold no SQL. A field of any other type may, so SQL
#: in a new kind of node is never missed by a walk, only looked for.
_SQL_FREE_TYPES = frozenset(
    {
        "str",
        "bool",
        "Span",
        "Span | None",
        "Name",
        "Name | None",
        "tuple[Name, ...]",
        "Relation",
        "tuple[Relation, ...]",
        "Option",
        "tuple[Option, ...]",
        "tuple[ColumnDef, ...]",
        "tuple[ColumnDef, ...] | None",
        "PrimaryKey | None",
    }
)

#: Each node class's fields that may hold SQL, computed once when the module loads (so
#: no thread ever writes to it).
_SQL_FIELDS: Mapping[type, tuple[str, ...]] = MappingProxyType(
    {
        cls: tuple(f.name for f in fields(cls) if str(f.type) not in _SQL_FREE_TYPES)
        for cls in list(globals().values())
        if isinstance(cls, type)
        and is_dataclass(cls)
        and cls.__module__ == __name__
        and not issubclass(cls, _SQL_LEAVES)
    }
)


def sql_fields(cls: type) -> tuple[str, ...]:
    """The fields of a syntax-tree class that may hold SQL (none for any other class):
    what a walk looking for SQL (the trust checks, analysis's own copy) looks into."""
    return _SQL_FIELDS.get(cls, ())
