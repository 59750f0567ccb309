"""The checked program: every name resolved, every step typed, settings and hints read.

This is what semantic analysis (:mod:`flowc.analyze`) produces and what the graph passes
consume. A pipeline is a :class:`Stream`: where it starts (a source, a view, a view's
side output) and its steps, each with the schema it outputs.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import field
from typing import ClassVar, TypeAlias

from sqlglot import exp

from flowc import ast
from flowc.catalog import (
    CHANGE_SHOWING_SINKS,
    CHANGELOG_FORMATS,
    ERRORS_COLUMNS,
    OP_COLUMN,
    PARSED_FILE_FORMATS,
    is_upsert,
    partition_columns,
)
from flowc.fast_dataclass import dataclass
from flowc.spans import Span
from flowc.vocabulary import STATEFUL_STEPS, JoinKind, Operator, StateKind, StepKind, WindowKind


@dataclass(frozen=True, slots=True)
class Column:
    """A column: its name, Spark SQL type, and the relation it came from (for JOIN sides)."""

    name: str
    type: str
    qualifier: str | None = None

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "type": self.type}


Schema: TypeAlias = tuple[Column, ...]

#: The columns of a source's side output ``errors``: the record as read, its file, why.
ERRORS_SCHEMA: Schema = tuple(Column(name, type_) for name, type_ in ERRORS_COLUMNS)


@dataclass(frozen=True, slots=True, kw_only=True)
class Hints:
    """Operator hints (``WITH (...)`` on a step, options of a source or sink)."""

    name: str | None = None
    uid: str | None = None
    parallelism: int | None = None
    max_parallelism: int | None = None
    slot_sharing_group: str | None = None
    chaining: str = "always"
    spans: dict[str, Span] = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    parallelism: int = 1
    max_parallelism: int | None = None
    chaining: bool = True
    execution_mode: str = "streaming"
    #: BATCH mode: vertices no operator sets the parallelism of get -1 in the JobGraph
    #: (Flink's execution.batch.adaptive.auto-parallelism.enabled; docs/plans.md).
    auto_parallelism: bool = True
    checkpoint_interval_ms: int | None = None
    checkpoint_mode: str = "exactly_once"
    checkpoint_dir: str | None = None
    job_name: str = "job"
    sql_dialect: str = "spark"
    #: ``minimal`` or ``flink``: see :data:`flowc.catalog.EXCHANGE_MODES`.
    exchanges: str = "minimal"
    #: ``hashmap`` or ``rocksdb`` if set (:mod:`flowc.analyze.state_store` chooses otherwise).
    state_backend: str | None = None
    #: ``state.backend.changelog.enabled`` if set.
    state_changelog: bool | None = None
    spark_conf: tuple[tuple[str, str], ...] = ()
    spans: dict[str, Span] = field(default_factory=dict, compare=False, hash=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class Watermark:
    column: str
    expr: ast.SqlExpr
    span: Span


@dataclass(frozen=True, slots=True, kw_only=True)
class Computed:
    """A source's computed column (Flink's ``total AS price * qty``): computed from the row's
    read columns right after reading, before the watermark, which may be on it."""

    name: str
    expr: ast.SqlExpr
    type: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceDef:
    name: str
    schema: Schema
    watermark: Watermark | None
    connector: str
    options: tuple[tuple[str, object], ...]
    hints: Hints
    span: Span
    #: A ``CREATE TABLE``: bounded, read whole, joined from a stream (a dimension table).
    bounded: bool = False
    #: The processing-time column (``pt AS PROCTIME()``): added after reading, not read.
    proctime: str | None = None
    #: A versioned table (options ``key`` and ``version_time``): each row is the version
    #: of its key valid from its ``version_time`` until the key's next version.
    version_key: tuple[str, ...] = ()
    version_time: str | None = None
    #: Computed columns other than the processing time's, in the order declared; the
    #: stream has them after the read columns (``schema``).
    computed: tuple[Computed, ...] = ()
    #: Columns declared NOT NULL: a row with NULL there fails the query (never silently
    #: passed on, as Flink would trust the declaration).
    not_null: tuple[str, ...] = ()
    #: Each option as written (in WITH (...), or a ``--set`` on the command line), by key,
    #: and each declared column's type as written, by column name: where a diagnostic about
    #: one option or one type points (not at the whole CREATE).
    written_options: dict[str, ast.Option] = field(default_factory=dict, compare=False, hash=False)
    written_types: dict[str, ast.TypeRef] = field(default_factory=dict, compare=False, hash=False)
    #: The columns in the order the program declares them, where the processing time
    #: stands before a read column (Flink keeps a table's declared order: ``SELECT *``
    #: lists it so); empty where the order is the read, computed, processing-time one.
    declared_order: tuple[str, ...] = ()
    #: A stream's PRIMARY KEY columns (a CDC source's: the key its changes are by, the
    #: upsert key Flink derives for its scan); empty without one.
    primary_key: tuple[str, ...] = ()

    @property
    def output_schema(self) -> Schema:
        """The columns the source's stream has: the declared ones, its computed ones, then
        the processing time's, a TIMESTAMP (or as declared: :attr:`declared_order`)."""
        read = self.read_schema
        if self.proctime is None:
            return read
        columns = (*read, Column(self.proctime, "TIMESTAMP"))
        if not self.declared_order:
            return columns
        by_name = {c.name: c for c in columns}
        return tuple(by_name[name] for name in self.declared_order)

    @property
    def read_schema(self) -> Schema:
        """The columns the source's reader returns: the declared ones and the computed ones
        (the processing time is added after it)."""
        if not self.computed:
            return self.schema
        return (*self.schema, *(Column(c.name, c.type) for c in self.computed))

    @property
    def changelog(self) -> bool:
        """Whether its records are changes (a CDC format such as debezium-json): its rows
        carry their kind in :data:`~flowc.catalog.OP_COLUMN`."""
        return self.connector == "files" and dict(self.options).get("format") in CHANGELOG_FORMATS

    @property
    def on_error(self) -> str | None:
        """What a malformed record does: ``fail`` or ``route``; None where none can occur."""
        options = dict(self.options)
        if self.connector != "files" or options.get("format") not in PARSED_FILE_FORMATS:
            return None
        return str(options.get("on_error", "fail"))


@dataclass(frozen=True, slots=True, kw_only=True)
class SinkDef:
    name: str
    schema: Schema | None
    connector: str
    mode: str
    options: tuple[tuple[str, object], ...]
    hints: Hints
    span: Span
    #: Columns declared NOT NULL: a NULL written there fails the query, as Flink's sink
    #: NOT NULL enforcer does by default (``table.exec.sink.not-null-enforcer = ERROR``).
    not_null: tuple[str, ...] = ()
    #: The console sink of a query written as a statement: a digest of the query's text
    #: (its checkpoint's name), and its ``mode`` chosen by the result
    #: (:func:`flowc.spark.streaming.choose_shown_modes`), not written; "" for others.
    shows_result: str = ""
    #: A Flink-dialect table on a console or noop sink, no ``mode`` written: its mode is
    #: chosen by its query as a shown query's is (Flink's print and blackhole sinks take
    #: inserts, updates and deletes alike).
    mode_by_query: bool = False
    #: As :attr:`SourceDef.written_options` and :attr:`SourceDef.written_types`.
    written_options: dict[str, ast.Option] = field(default_factory=dict, compare=False, hash=False)
    written_types: dict[str, ast.TypeRef] = field(default_factory=dict, compare=False, hash=False)
    #: The columns in the order the program declares them, where the processing time
    #: stands before a read column (Flink keeps a table's declared order: ``SELECT *``
    #: lists it so); empty where the order is the read, computed, processing-time one.
    declared_order: tuple[str, ...] = ()


# ---------------------------------------------------------------- functions


@dataclass(frozen=True, slots=True, kw_only=True)
class FunctionDef:
    """A scalar Python function: ``CREATE FUNCTION`` (``module`` and ``attribute`` name it)
    or a callable given to :func:`flowc.compile` (``embedded``; both None)."""

    name: str
    params: Schema
    returns: str
    module: str | None
    attribute: str | None
    span: Span
    #: Run as an Arrow-optimized Python UDF (Spark batches the rows through Arrow): every
    #: type of its signature is a plain scalar. Else a pickled Python UDF.
    arrow: bool
    #: Where ``'module:function'`` is written (None for an embedded function).
    target_span: Span | None = None

    @property
    def embedded(self) -> bool:
        return self.module is None

    @property
    def target(self) -> str:
        return f"{self.module}:{self.attribute}" if self.module is not None else "(embedded)"


#: The key of a Python function's call in its sqlglot node's ``meta``: the call's number,
#: its place in :class:`Program`'s ``function_calls``.
FUNCTION_CALL = "flowc_call"


@dataclass(frozen=True, slots=True, kw_only=True)
class FunctionCall:
    """One call of a Python function: which, and where in the .flow file."""

    function: str
    span: Span


# ---------------------------------------------------------------- streams


@dataclass(frozen=True, slots=True, kw_only=True)
class FromSource:
    name: str
    span: Span


@dataclass(frozen=True, slots=True, kw_only=True)
class FromView:
    name: str
    span: Span


@dataclass(frozen=True, slots=True, kw_only=True)
class FromSideOutput:
    """Rows a view's ROUTE step sent to the side output ``output`` (``FROM view.output``)."""

    view: str
    output: str
    span: Span


@dataclass(frozen=True, slots=True, kw_only=True)
class FromSourceErrors:
    """Malformed records of a file source with ``on_error = 'route'`` (``FROM source.errors``)."""

    source: str
    span: Span


Origin: TypeAlias = FromSource | FromView | FromSideOutput | FromSourceErrors


def view_of(origin: Origin) -> str | None:
    """The view a stream starts from (``FROM v`` or one of its side outputs), else None."""
    if isinstance(origin, FromView):
        return origin.name
    if isinstance(origin, FromSideOutput):
        return origin.view
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """One checked step. Each operation is a class of its own below (``WhereStep``,
    ``AggregateStep``...), holding the parser's node of its own type, so later passes pick
    their handler by the step's class and never prove the node's class again.

    ``inputs`` are the other streams of a JOIN or UNION ALL. ``keys`` are the key
    expressions in force (KEY BY, a JOIN side, DEDUPLICATE columns).
    """

    #: What the step does, as plans and diagnostics name it.
    KIND: ClassVar[StepKind]

    node: ast.Step
    schema: Schema
    hints: Hints
    span: Span
    inputs: tuple[Stream, ...] = ()
    keys: tuple[str, ...] = ()
    #: The WINDOW of a windowed AGGREGATE or TOP (the step's node is the AGGREGATE or TOP).
    window: ast.Window | None = None
    partition: str | None = None
    #: A DIMENSION_JOIN ``FOR SYSTEM_TIME AS OF`` a versioned table: Flink's event-time
    #: temporal join (each row meets the one version of its key valid at its time).
    temporal: bool = False

    #: The operator its transformation runs (Flink's StreamNode ``operator``); None for a
    #: step that only routes records (KEY BY, PARTITION, UNION ALL make no operator).
    OPERATOR: ClassVar[Operator | None] = None
    #: Whether it groups rows into new ones (an aggregation, a Top-N): no column of its
    #: input reaches its output as it was; a window's end and time carry its watermark
    #: (Spark's streaming rules).
    GROUPS: ClassVar[bool] = False

    @property
    def kind(self) -> StepKind:
        return self.KIND

    @property
    def stateful(self) -> bool:
        """Whether it keeps state between records (:data:`~flowc.vocabulary.STATEFUL_STEPS`)."""
        return self.KIND in STATEFUL_STEPS

    @property
    def operator(self) -> Operator | None:
        return self.OPERATOR

    @property
    def state_kind(self) -> StateKind | None:
        """What its state holds (None for a stateless step)."""
        return None

    def keys_after(self, keys: tuple[str, ...] | None) -> tuple[str, ...] | None:
        """The keys in force after the step, given those in force before it: a row-wise
        step keeps them while it keeps every key column."""
        if keys is None:
            return None
        names = {c.name for c in self.schema}
        return keys if all(k in names for k in keys) else None

    def passes_on(self, columns: frozenset[str]) -> frozenset[str]:
        """Which of ``columns`` (of its input) reach its output unchanged, under their
        output names: what carries a watermark or a processing time through it."""
        return columns


#: The column a WHERE reading Flink's CURRENT_WATERMARK sees the watermark in: each call
#: is this column, of its argument's type (docs/language.md, "CURRENT_WATERMARK on Spark").
WATERMARK_COLUMN = "__flowc_watermark"
#: The column its processor groups rows by (a hash of the row).
BUCKET_COLUMN = "__flowc_bucket"


@dataclass(frozen=True, slots=True)
class WatermarkRead:
    """A WHERE's or SELECT's CURRENT_WATERMARK(column): on Spark a stateful processor hands
    each row its micro-batch's watermark. ``on_time`` is the condition's conjunct that keeps only
    rows ahead of the watermark (``'ahead'``: ``ts > CURRENT_WATERMARK(ts)``;
    ``'ahead_or_none'``: ``CURRENT_WATERMARK(ts) IS NULL OR ts > ...``), with which the
    column keeps its watermark after the step; None where late rows may pass, after which
    no column has one."""

    column: str
    on_time: str | None
    #: Where each call is written (a diagnostic about the argument points at them).
    calls: tuple[Span, ...] = field(default=(), compare=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class WhereStep(Step):
    KIND = StepKind.WHERE
    node: ast.Where
    OPERATOR = Operator.FILTER
    #: CURRENT_WATERMARK in the condition (whose calls read :data:`WATERMARK_COLUMN`).
    watermark: WatermarkRead | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SelectStep(Step):
    KIND = StepKind.SELECT
    node: ast.Select
    OPERATOR = Operator.MAP
    #: CURRENT_WATERMARK in an item (whose calls read :data:`WATERMARK_COLUMN`).
    watermark: WatermarkRead | None = None

    def passes_on(self, columns: frozenset[str]) -> frozenset[str]:
        return _read_unchanged(self.node.items, columns)


@dataclass(frozen=True, slots=True, kw_only=True)
class ExtendStep(Step):
    KIND = StepKind.EXTEND
    node: ast.Extend
    OPERATOR = Operator.MAP
    #: CURRENT_WATERMARK in an item (whose calls read :data:`WATERMARK_COLUMN`).
    watermark: WatermarkRead | None = None

    def passes_on(self, columns: frozenset[str]) -> frozenset[str]:
        return columns | _read_unchanged(self.node.items, columns)


@dataclass(frozen=True, slots=True, kw_only=True)
class DropStep(Step):
    KIND = StepKind.DROP
    node: ast.Drop
    OPERATOR = Operator.MAP

    def passes_on(self, columns: frozenset[str]) -> frozenset[str]:
        return columns - {c.value for c in self.node.columns}


@dataclass(frozen=True, slots=True, kw_only=True)
class RenameStep(Step):
    KIND = StepKind.RENAME
    node: ast.Rename
    OPERATOR = Operator.MAP

    def passes_on(self, columns: frozenset[str]) -> frozenset[str]:
        renamed = {i.old.value: i.new.value for i in self.node.items}
        return frozenset(renamed.get(c, c) for c in columns)


@dataclass(frozen=True, slots=True, kw_only=True)
class ExplodeStep(Step):
    KIND = StepKind.EXPLODE
    node: ast.Explode
    OPERATOR = Operator.FLAT_MAP


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyByStep(Step):
    KIND = StepKind.KEY_BY
    node: ast.KeyBy

    def keys_after(self, keys: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return self.keys


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionStep(Step):
    KIND = StepKind.PARTITION
    node: ast.Partition

    def keys_after(self, keys: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionByStep(Step):
    KIND = StepKind.PARTITION_BY
    node: ast.PartitionBy

    def keys_after(self, keys: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class AggregateStep(Step):
    KIND = StepKind.AGGREGATE
    node: ast.Aggregate
    GROUPS = True

    @property
    def operator(self) -> Operator:
        """Flink's keyed aggregate, or its non-parallel global one without GROUP BY."""
        return Operator.KEYED_AGGREGATE if self.keys else Operator.AGGREGATE

    @property
    def state_kind(self) -> StateKind:
        return StateKind.KEYED_AGGREGATE if self.keys else StateKind.GLOBAL_AGGREGATE

    def keys_after(self, keys: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class WindowAggregateStep(Step):
    """A WINDOW's AGGREGATE. Its output is the keys, ``window_start``, ``window_end``, the
    column ``window_time`` if asked for, then the aggregates (``node`` holds those only)."""

    KIND = StepKind.WINDOW_AGGREGATE
    node: ast.Aggregate
    window: ast.Window
    OPERATOR = Operator.WINDOW
    GROUPS = True
    #: The output name of the AGGREGATE's item ``window_time`` (Flink's window_time: the
    #: window's end minus 1 ms, an event-time column), None when it is not asked for.
    window_time: str | None = None

    @property
    def window_columns(self) -> int:
        """How many columns the window adds after the keys: its start, end and time."""
        return 2 if self.window_time is None else 3

    @property
    def state_kind(self) -> StateKind:
        if self.window.kind == WindowKind.SESSION:
            return StateKind.SESSION_WINDOW
        return StateKind.WINDOW_AGGREGATE

    def keys_after(self, keys: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class DeduplicateStep(Step):
    KIND = StepKind.DEDUPLICATE
    node: ast.Deduplicate
    OPERATOR = Operator.DEDUPLICATE

    @property
    def state_kind(self) -> StateKind:
        return StateKind.DEDUPLICATE

    def keys_after(self, keys: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return self.keys


@dataclass(frozen=True, slots=True, kw_only=True)
class OverStep(Step):
    """A SQL SELECT's OVER aggregates: every input column passes through, then one column
    per call; ``keys`` are the PARTITION BY columns. Its output has no watermark on Spark
    (its processor emits rows as the watermark passes them)."""

    KIND = StepKind.OVER
    node: ast.Over
    OPERATOR = Operator.OVER_AGGREGATE

    @property
    def state_kind(self) -> StateKind:
        return StateKind.OVER_AGGREGATE

    def keys_after(self, keys: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return self.keys

    def passes_on(self, columns: frozenset[str]) -> frozenset[str]:
        return frozenset()


@dataclass(frozen=True, slots=True, kw_only=True)
class MatchStep(Step):
    """MATCH_RECOGNIZE (Flink's Match): one row per match, the PARTITION BY columns and
    then the measures; ``keys`` are the PARTITION BY columns. Insert-only; on Spark its
    output carries no watermark (its processor emits a match as the watermark passes its
    rows), so no column passes on as it was."""

    KIND = StepKind.MATCH
    node: ast.MatchRecognize
    OPERATOR = Operator.MATCH
    #: Its input's columns (what the conditions and measures read).
    input_schema: Schema = ()

    @property
    def state_kind(self) -> StateKind:
        return StateKind.MATCH

    def keys_after(self, keys: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return self.keys

    def passes_on(self, columns: frozenset[str]) -> frozenset[str]:
        return frozenset()


@dataclass(frozen=True, slots=True, kw_only=True)
class TopStep(Step):
    KIND = StepKind.TOP
    node: ast.Top
    OPERATOR = Operator.RANK
    GROUPS = True

    @property
    def state_kind(self) -> StateKind:
        return StateKind.RANK

    def keys_after(self, keys: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class WindowTopStep(Step):
    KIND = StepKind.WINDOW_TOP
    node: ast.Top
    window: ast.Window
    OPERATOR = Operator.WINDOW_RANK
    GROUPS = True

    @property
    def state_kind(self) -> StateKind:
        return StateKind.WINDOW_RANK

    def keys_after(self, keys: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinStep(Step):
    KIND = StepKind.JOIN
    node: ast.Join
    OPERATOR = Operator.JOIN

    @property
    def state_kind(self) -> StateKind:
        return StateKind.JOIN

    def keys_after(self, keys: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return self.keys


@dataclass(frozen=True, slots=True, kw_only=True)
class DimensionJoinStep(Step):
    """A JOIN of a stream with a ``CREATE TABLE``: Flink's join with a bounded input,
    Spark's stateless stream-static join."""

    KIND = StepKind.DIMENSION_JOIN
    node: ast.Join
    OPERATOR = Operator.JOIN

    def keys_after(self, keys: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return self.keys


@dataclass(frozen=True, slots=True, kw_only=True)
class UnionStep(Step):
    KIND = StepKind.UNION
    node: ast.UnionAll

    def keys_after(self, keys: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteStep(Step):
    KIND = StepKind.ROUTE
    node: ast.Route
    OPERATOR = Operator.PROCESS


@dataclass(frozen=True, slots=True, kw_only=True)
class SetStep(Step):
    """``SET col = expr, ...``: a Map like EXTEND's, each set column kept in its place."""

    KIND = StepKind.SET
    node: ast.Set
    OPERATOR = Operator.MAP

    def passes_on(self, columns: frozenset[str]) -> frozenset[str]:
        """A set column carries a watermark only when set to a watermarked column as it is
        (``SET ts = ts``, as Spark's alias keeps the column's metadata); any other value
        is a new column, with none."""
        kept = columns - {i.column.value for i in self.node.items}
        return kept | {
            i.column.value
            for i in self.node.items
            if isinstance(i.expr.tree, exp.Column) and i.expr.tree.name in columns
        }


def _read_unchanged(items: tuple[ast.SelectItem, ...], columns: frozenset[str]) -> frozenset[str]:
    """The output names of the items of a SELECT or EXTEND that read one of ``columns``
    as it is (``ts`` or ``ts AS event_time``)."""
    if not columns:
        return columns
    kept = set()
    for item in items:
        tree = item.expr.tree
        if isinstance(tree, exp.Column) and tree.name in columns:
            kept.add(item.alias.value if item.alias else tree.name)
    return frozenset(kept)


#: Every kind of checked step, one class each (tests/test_step_classes.py holds each
#: pass's table of handlers to this tuple).
STEP_CLASSES: tuple[type[Step], ...] = (
    WhereStep,
    SelectStep,
    ExtendStep,
    DropStep,
    RenameStep,
    ExplodeStep,
    KeyByStep,
    PartitionStep,
    PartitionByStep,
    AggregateStep,
    WindowAggregateStep,
    DeduplicateStep,
    TopStep,
    WindowTopStep,
    JoinStep,
    DimensionJoinStep,
    UnionStep,
    RouteStep,
    SetStep,
    OverStep,
    MatchStep,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Stream:
    origin: Origin
    steps: tuple[Step, ...]
    schema: Schema
    keys: tuple[str, ...] | None
    span: Span


@dataclass(frozen=True, slots=True, kw_only=True)
class SideOutput:
    name: str
    step_index: int
    schema: Schema
    span: Span


@dataclass(frozen=True, slots=True, kw_only=True)
class ViewDef:
    name: str
    stream: Stream
    side_outputs: tuple[SideOutput, ...]
    span: Span


@dataclass(frozen=True, slots=True, kw_only=True)
class InsertDef:
    sink: str
    stream: Stream
    span: Span


@dataclass(frozen=True, slots=True, kw_only=True)
class Program:
    file: str
    settings: Settings
    sources: tuple[SourceDef, ...]
    sinks: tuple[SinkDef, ...]
    views: tuple[ViewDef, ...]
    inserts: tuple[InsertDef, ...]
    span: Span
    #: Python functions the program calls: declared by CREATE FUNCTION or given to compile.
    functions: tuple[FunctionDef, ...] = ()
    #: Every call of one of ``functions``, in the order analysis met them; a call's place
    #: in this tuple is its number in the generated program (``name__flowc_N``).
    function_calls: tuple[FunctionCall, ...] = ()
    #: Not an argument, so a ``replace`` of the program starts a new index, never one
    #: holding the definitions it replaced.
    _index: dict[str, SourceDef | SinkDef | ViewDef] = field(
        default_factory=dict, compare=False, repr=False, init=False
    )
    #: How many streams read each view (:func:`view_readers`), counted on first use and
    #: kept under one key by ``setdefault``: threads sharing the program keep one count.
    _view_readers: dict[str, Counter[str | None]] = field(
        default_factory=dict, compare=False, repr=False, init=False
    )

    def _lookup(self, name: str) -> SourceDef | SinkDef | ViewDef:
        """By name (one namespace for all three), from an index built on first use."""
        if not self._index:
            definitions: tuple[SourceDef | SinkDef | ViewDef, ...] = (
                *self.sources,
                *self.sinks,
                *self.views,
            )
            for definition in definitions:
                self._index[definition.name] = definition
        return self._index[name]

    def source(self, name: str) -> SourceDef:
        found = self._lookup(name)
        assert isinstance(found, SourceDef)
        return found

    def sink(self, name: str) -> SinkDef:
        found = self._lookup(name)
        assert isinstance(found, SinkDef)
        return found

    def view(self, name: str) -> ViewDef:
        found = self._lookup(name)
        assert isinstance(found, ViewDef)
        return found

    def side_output(self, origin: FromSideOutput) -> tuple[ViewDef, SideOutput]:
        """The view a ``FROM v.name`` reads and its side output (the rows of the ROUTE
        step at ``step_index``, so the view's stream up to ``step_index + 1``)."""
        view = self.view(origin.view)
        return view, next(o for o in view.side_outputs if o.name == origin.output)


#: Steps that act on each row alone: a change through them stays the same kind of change
#: (a WHERE keeps or drops it, the others change its columns), as Flink's Calc passes on
#: each row's RowKind.
ROW_WISE_STEPS = (WhereStep, SelectStep, ExtendStep, SetStep, DropStep, RenameStep, ExplodeStep)
#: KEY BY changes only which partition reads a row: a hash exchange by key, which keeps one
#: key's changes of one file in order (another partition step would not).
CHANGE_KEEPING_STEPS = (*ROW_WISE_STEPS, KeyByStep)


def _regroups(step: Step) -> bool:
    """A step reading CURRENT_WATERMARK: Spark runs it through a processor grouping rows by
    a hash of the whole row, which would part an update's -U from its +U; or one naming a
    column as the hidden op column."""
    if any(c.name == OP_COLUMN for c in step.schema):
        return True  # a column named as the hidden one would be taken for it
    return isinstance(step, WhereStep | SelectStep | ExtendStep) and step.watermark is not None


@dataclass(frozen=True, slots=True)
class ChangeFlow:
    """Where the changes of the program's CDC sources go: the steps that read them (by
    ``id``), each with its source, and the first step or INSERT that cannot take them."""

    reading: dict[int, str]
    refused_steps: tuple[tuple[Step, str], ...]
    refused_inserts: tuple[tuple[InsertDef, str], ...]


def _retracting_consumer(program: Program, insert: InsertDef) -> Step | None:
    """The INSERT's last AGGREGATE when it has no WINDOW, has keys, only projections that
    keep its keys and WHEREs follow it (:func:`carries_filtered_changes`) and the INSERT
    reads the source itself or through views read by nothing else (as
    flowc.spark.changelog_chains.updating_chain asks, which then runs it as a processor):
    streaming, it can take a CDC source's changes, retracting each -U/-D row's
    contribution (docs/language.md, "Updating pipelines on Spark"). A view's steps are
    the INSERT's, as Flink inlines a view; a view another query reads too is not (its
    rows would reach Spark's own aggregation, which counts a retraction as a row)."""
    if program.settings.execution_mode == "batch":
        return None
    streams = streams_from_source(program, insert.stream)
    if streams is None:
        return None
    steps = [step for s in streams for step in s.steps]
    last = last_aggregate(steps)
    if last is None:
        return None
    consumer = steps[last]
    assert isinstance(consumer, AggregateStep)
    if (
        consumer.window is None
        and consumer.keys
        and carries_filtered_changes(steps[last + 1 :], consumer.keys)
    ):
        return consumer
    return None


def last_aggregate(steps: tuple[Step, ...] | list[Step]) -> int | None:
    """The index of the last AGGREGATE among ``steps``, None without one."""
    found = [i for i, step in enumerate(steps) if isinstance(step, AggregateStep)]
    return found[-1] if found else None


def carries_changes(steps: tuple[Step, ...] | list[Step], keys: tuple[str, ...]) -> bool:
    """Whether ``steps`` after an AGGREGATE consuming updates only select plain columns
    (no ``*``, no qualified name, no CURRENT_WATERMARK), rename or drop columns, keeping each
    of its ``keys`` under its own name: each then passes every change on with its kind, and
    the sink's key still names the AGGREGATE's rows. Flink SQL's outer SELECT of a GROUP BY
    (``SELECT k, COUNT(*) AS n ... GROUP BY k``, an INSERT's columns named as the sink's)
    lowers to such a SELECT after the AGGREGATE."""
    if not all(_plain_projection(step, star=False) for step in steps):
        return False
    for key in keys:
        held = frozenset({key})
        for step in steps:
            held = step.passes_on(held)
        if key not in held:
            return False
    return True


def carries_filtered_changes(steps: tuple[Step, ...] | list[Step], keys: tuple[str, ...]) -> bool:
    """:func:`carries_changes`, WHEREs (without CURRENT_WATERMARK) among the steps: a
    WHERE passes each change it keeps on with its kind, and the upsert sink then takes a
    ``-U`` that passes it as a delete (Flink's Calc with a condition emits UB, FLINK-9528;
    docs/language.md, "Updating pipelines over CDC changes")."""
    kept = [s for s in steps if not (isinstance(s, WhereStep) and s.watermark is None)]
    return carries_changes(kept, keys)


#: The steps a JOIN consuming a CDC source's changes may have after it: projections,
#: which keep each change's -U with its +U (a WHERE there could drop a +U and keep its -U,
#: which an upsert sink skips, keeping the old row).
PROJECTION_STEPS = (SelectStep, ExtendStep, DropStep, RenameStep)


@dataclass(frozen=True, slots=True)
class CdcJoin:
    """An INSERT reading a source JOINed (ON equalities of one column of each side) with
    another source, each read through row-wise steps and KEY BY, one of them or both CDC
    or an AGGREGATE's or a TOP's updates: Flink's regular join consuming updates, inner or
    outer (docs/language.md, "A JOIN over a CDC source's changes", "A JOIN over an
    AGGREGATE's updates" and "A JOIN over a TOP's updates"). ``source``: the CDC sources'
    names, for messages; ``changes`` whether the (stream, other) side carries changes;
    ``pairs`` are the (stream column, other column) equalities, ``left`` and ``right`` the
    JOIN's input rows, ``after`` the projections after it. ``producers``: per side the
    AGGREGATE (no WINDOW, with keys) or the TOP (no WINDOW), over inserts or a CDC
    source's changes, whose changelog the side carries, None for a source's rows;
    ``carrying`` the steps (by ``id``) between such a producer and the JOIN, which pass
    each change on with its kind."""

    join: JoinStep
    source: str
    pairs: tuple[tuple[str, str], ...]
    left: Schema
    right: Schema
    after: tuple[Step, ...]
    kind: JoinKind = JoinKind.INNER
    changes: tuple[bool, bool] = (False, True)
    producers: tuple[AggregateStep | TopStep | None, AggregateStep | TopStep | None] = (
        None,
        None,
    )
    carrying: frozenset[int] = frozenset()

    @property
    def preserved(self) -> tuple[bool, bool]:
        """Whether the (stream, other) side's rows are kept without a match (padded)."""
        return (
            self.kind in (JoinKind.LEFT, JoinKind.FULL),
            self.kind in (JoinKind.RIGHT, JoinKind.FULL),
        )

    @property
    def origin(self) -> str:
        """What the JOIN's changes come from, as messages name it."""
        named = []
        if self.source:
            plural = "s" if self.source.count("' and '") else ""
            named.append(f"CDC source{plural} '{self.source}'")
        named += [f"the {_keyword(p)} on line {p.span.line}" for p in self.producers if p]
        return " and ".join(named)


@dataclass(frozen=True, slots=True)
class _JoinInput:
    """One side of a JOIN over changes: its source, its steps up to the JOIN (through
    views read by nothing else), and the AGGREGATE or TOP producing its changes, if any."""

    source: SourceDef
    steps: tuple[Step, ...]
    producer: AggregateStep | TopStep | None

    @property
    def changes(self) -> bool:
        return self.source.changelog or self.producer is not None

    def carrying(self) -> set[int]:
        if self.producer is None:
            return set()
        at = next(i for i, s in enumerate(self.steps) if s is self.producer)
        return {id(s) for s in self.steps[at + 1 :]}


def _join_input(
    program: Program, streams: list[Stream], steps: tuple[Step, ...]
) -> _JoinInput | None:
    """``steps`` (from the source of ``streams[0]``) as one side of a JOIN over changes:
    row-wise steps and KEY BY, or those, an AGGREGATE without WINDOW with keys or a TOP
    without WINDOW (Flink's Rank, I,UB,UA,D; over a CDC source's changes, its retract
    input), then :data:`UPSERT_KEEPING_STEPS` (each passes every change on with its kind,
    one row per change); None otherwise."""
    origin = streams[0].origin
    assert isinstance(origin, FromSource)
    source = program.source(origin.name)
    if any(s.inputs or _regroups(s) for s in steps):
        return None
    stateful = [i for i, s in enumerate(steps) if not isinstance(s, CHANGE_KEEPING_STEPS)]
    if not stateful:
        # a source's rows: read directly (through a view the JOIN is refused, E0299)
        return _JoinInput(source, steps, None) if len(streams) == 1 else None
    if len(stateful) != 1:
        return None  # a second stateful step
    at = stateful[0]
    producer = steps[at]
    if isinstance(producer, AggregateStep):
        if producer.window is not None or not producer.keys:
            return None
    elif not isinstance(producer, TopStep):
        return None
    if not all(isinstance(s, UPSERT_KEEPING_STEPS) for s in steps[at + 1 :]):
        return None
    return _JoinInput(source, steps, producer)


def _keyword(step: Step) -> str:
    """A producer's keyword, as messages name it."""
    return "TOP" if isinstance(step, TopStep) else "AGGREGATE"


def cdc_join(program: Program, insert: InsertDef) -> CdcJoin | None:
    """The INSERT's CDC join (streaming), None where its steps are not one: neither side
    CDC nor an AGGREGATE's or a TOP's updates, a condition other than equalities, another stateful
    step, a step after it other than a projection, a column of the two sides' rows named
    twice (:func:`cdc_join_shared_names`), ``c.*`` after it. Each side may read views that
    nothing else reads (Flink's SQL form lowers a subquery to one)."""
    joined = _cdc_join(program, insert)
    return None if joined is None or _shared_names(joined) else joined


def cdc_join_shared_names(program: Program, insert: InsertDef) -> tuple[str, ...]:
    """The column names both sides of the INSERT's JOIN over changes have, where that
    alone keeps it from running: the processor's rows name each column once, so a
    diagnostic can say which to rename rather than only that the JOIN cannot run."""
    joined = _cdc_join(program, insert)
    return () if joined is None else _shared_names(joined)


def _shared_names(joined: CdcJoin) -> tuple[str, ...]:
    right = {c.name.lower() for c in joined.right}
    return tuple(c.name for c in joined.left if c.name.lower() in right)


def _cdc_join(program: Program, insert: InsertDef) -> CdcJoin | None:
    """:func:`cdc_join` but for the names both sides have."""
    stream = insert.stream
    if program.settings.execution_mode == "batch":
        return None
    joined = [i for i, step in enumerate(stream.steps) if step.inputs]
    if len(joined) != 1:
        return None
    at = joined[0]
    join = stream.steps[at]
    if not isinstance(join, JoinStep) or len(join.inputs) != 1:
        return None
    (other,) = join.inputs
    main_streams = streams_from_source(program, stream)
    other_streams = streams_from_source(program, other)
    if main_streams is None or other_streams is None:
        return None
    viewed = tuple(step for s in main_streams[:-1] for step in s.steps)
    main = _join_input(program, main_streams, (*viewed, *stream.steps[:at]))
    cdc = _join_input(
        program, other_streams, tuple(step for s in other_streams for step in s.steps)
    )
    if main is None or cdc is None:
        return None
    changes = (main.changes, cdc.changes)
    if not any(changes):
        return None  # two insert-only sides: Spark's own stream-stream join
    after = stream.steps[at + 1 :]
    if not all(isinstance(s, PROJECTION_STEPS) and not _regroups(s) for s in after):
        return None
    left = main.steps[-1].schema if main.steps else main.source.output_schema
    right = cdc.steps[-1].schema if cdc.steps else cdc.source.output_schema
    pairs = _equalities(join, {c.name for c in left}, {c.name for c in right})
    if not pairs or any(_qualified(s.node) for s in after):
        return None
    types = {c.name: c.type.upper() for c in (*left, *right)}
    if any(types[a] != types[b] or types[a] in ("FLOAT", "DOUBLE") for a, b in pairs):
        return None  # both sides' keys hashed alike, and equal where Spark's equality is
    named = "' and '".join(s.source.name for s in (main, cdc) if s.source.changelog)
    return CdcJoin(
        join,
        named,
        pairs,
        left,
        right,
        after,
        JoinKind(join.node.kind),
        changes,
        (main.producer, cdc.producer),
        frozenset(main.carrying() | cdc.carrying()),
    )


def _equalities(
    join: JoinStep, left: set[str], right: set[str]
) -> tuple[tuple[str, str], ...] | None:
    """The JOIN's ON as (left column, right column) equalities, None where it is anything
    else (another comparison, an expression, a time bound)."""
    assert join.node.condition is not None
    tree = join.node.condition.tree
    parts = list(tree.flatten()) if isinstance(tree, exp.And) else [tree]
    pairs = []
    for part in parts:
        if not isinstance(part, exp.EQ):
            return None
        a, b = part.this, part.expression
        if not isinstance(a, exp.Column) or not isinstance(b, exp.Column):
            return None
        if a.name in left and b.name in right:
            pairs.append((a.name, b.name))
        elif b.name in left and a.name in right:
            pairs.append((b.name, a.name))
        else:
            return None
    return tuple(pairs)


def _qualified(node: object) -> bool:
    """Whether a step's node reads one relation's columns (``c.*``): the processor's rows
    have none (a qualified column, ``c.name``, is read by its name, unique in them)."""
    if isinstance(node, exp.Expr):
        return any(c.table and isinstance(c.this, exp.Star) for c in node.find_all(exp.Column))
    if isinstance(node, tuple):
        return any(_qualified(n) for n in node)
    slots = getattr(type(node), "__slots__", ())
    return any(_qualified(getattr(node, s, None)) for s in slots if s != "span")


def view_readers(program: Program) -> Counter[str | None]:
    """How many streams read each view (a JOIN's or UNION ALL's other side included),
    counted once per program: each INSERT's CDC join and Top-N asks, several passes over."""
    counted = program._view_readers.get("readers")
    if counted is not None:
        return counted
    readers: Counter[str | None] = Counter()
    pending = [*(v.stream for v in program.views), *(i.stream for i in program.inserts)]
    while pending:
        stream = pending.pop()
        readers[view_of(stream.origin)] += 1
        pending.extend(other for step in stream.steps for other in step.inputs)
    return program._view_readers.setdefault("readers", readers)


def streams_from_source(program: Program, stream: Stream) -> list[Stream] | None:
    """The streams from a source to ``stream``, first to last, through the views it reads
    (``FROM v``, each read by no other stream: its rows are this chain's alone); None from
    any other origin or where a view is read twice."""
    chain = [stream]
    while isinstance(chain[-1].origin, FromView):
        chain.append(program.view(chain[-1].origin.name).stream)
    if not isinstance(chain[-1].origin, FromSource):
        return None
    if len(chain) > 1:
        readers = view_readers(program)
        if any(readers[view_of(s.origin)] != 1 for s in chain[:-1]):
            return None
    return list(reversed(chain))


@dataclass(frozen=True, slots=True)
class CdcTop:
    """A TOP (no WINDOW) over a CDC source's changes (docs/language.md, "Top-N over CDC
    changes"): the source has a PRIMARY KEY, which row-wise steps and KEY BY (not EXPLODE)
    pass on unchanged to the TOP, as ``identity`` (its names in the TOP's input rows);
    after the TOP only projections (SELECT of plain columns, DROP, RENAME), ``after``.
    Views on the way are read by nothing else (Flink's SQL ``ROW_NUMBER()`` form lowers
    through them)."""

    top: TopStep
    source: SourceDef
    identity: tuple[str, ...]
    after: tuple[Step, ...]
    #: The TOP's input rows.
    input: Schema
    #: Whether its rank column reaches the sink (Flink's upsert key is then the PER
    #: columns and the rank; without it Flink 2.3 gives the Rank none).
    ranked: bool = False


def cdc_top(program: Program, insert: InsertDef) -> CdcTop | None:
    """The INSERT's TOP over a CDC source's changes (streaming), None where its steps are
    not one (see :class:`CdcTop`)."""
    if program.settings.execution_mode == "batch":
        return None
    if not any(s.changelog and s.primary_key for s in program.sources):
        return None  # before the walk through views, which counts their readers
    streams = streams_from_source(program, insert.stream)
    if streams is None:
        return None
    origin = streams[0].origin
    assert isinstance(origin, FromSource)
    source = program.source(origin.name)
    if not source.changelog or not source.primary_key:
        return None
    steps = [step for s in streams for step in s.steps]
    stateful = [i for i, step in enumerate(steps) if step.stateful]
    if len(stateful) != 1 or any(step.inputs or _regroups(step) for step in steps):
        return None
    at = stateful[0]
    top = steps[at]
    if not isinstance(top, TopStep):
        return None
    before, after = steps[:at], steps[at + 1 :]
    if not all(isinstance(s, UPSERT_KEEPING_STEPS) for s in before):
        return None
    if not all(_plain_projection(s) for s in after):
        return None
    identity = []
    for column in source.primary_key:
        held = frozenset({column})
        for step in before:
            held = _passes_on_all(step, held)
        if not held:
            return None
        identity.append(sorted(held)[0] if column not in held else column)
    schema = before[-1].schema if before else source.output_schema
    rank = frozenset({top.node.rank.value}) if top.node.rank is not None else frozenset()
    for step in after:
        rank = _passes_on_all(step, rank)
    return CdcTop(top, source, tuple(identity), tuple(after), schema, bool(rank))


def cdc_producer(program: Program, stream: Stream) -> AggregateStep | TopStep | None:
    """``stream``'s first stateful step when it is an AGGREGATE or a TOP without WINDOW
    over a CDC source's changes (through row-wise steps and KEY BY, views read by nothing
    else) whose updates a later stateful step (an AGGREGATE, a TOP or a JOIN) consumes
    (streaming): it takes the changes as its retract input (docs/language.md, "Updating
    pipelines over CDC changes"). Whether the rest of the chain runs is the Spark backend's
    to say (flowc.spark.changelog_chains, else E0299 at this step)."""
    if program.settings.execution_mode == "batch":
        return None
    if not any(s.changelog for s in program.sources):
        return None  # before the walk through views, which counts their readers
    streams = streams_from_source(program, stream)
    if streams is None:
        return None
    origin = streams[0].origin
    assert isinstance(origin, FromSource)
    if not program.source(origin.name).changelog:
        return None
    steps = [step for s in streams for step in s.steps]
    stateful = [i for i, step in enumerate(steps) if step.stateful or step.inputs]
    if len(stateful) < 2:
        return None
    at = stateful[0]
    producer = steps[at]
    if not isinstance(producer, AggregateStep | TopStep) or producer.window is not None:
        return None
    if any(not isinstance(s, CHANGE_KEEPING_STEPS) or _regroups(s) for s in steps[:at]):
        return None
    return producer


def _plain_projection(step: Step, star: bool = True) -> bool:
    """A step that only selects (unqualified plain columns, or ``*`` where ``star``),
    renames or drops columns: it passes each change on as it is."""
    if isinstance(step, RenameStep | DropStep):
        return True
    if not isinstance(step, SelectStep) or step.watermark is not None:
        return False
    for item in step.node.items:
        tree = item.expr.tree
        if star and isinstance(tree, exp.Star):
            continue
        if not isinstance(tree, exp.Column) or not isinstance(tree.this, exp.Identifier):
            return False
        if tree.table:
            return False
    return True


def change_flow(program: Program) -> ChangeFlow:
    """Follow each CDC source's changes through views and row-wise steps (linear: each
    view's end is computed once)."""
    changing = {s.name for s in program.sources if s.changelog}
    reading: dict[int, str] = {}
    # The TOPs whose processor takes the changes (cdc_top; its own rules check the rest).
    tops = {
        id(found.top)
        for i in (program.inserts if changing else ())
        if (found := cdc_top(program, i)) is not None
    }
    # The AGGREGATEs and TOPs whose processor takes the changes as its retract input
    # (cdc_producer; the Spark backend checks the rest of their chain, else E0299).
    tops |= {
        id(producer)
        for i in (program.inserts if changing else ())
        if (producer := cdc_producer(program, i.stream)) is not None
    }
    # The AGGREGATEs ending an INSERT (in it or in a view only it reads) that retract
    # each change (_retracting_consumer; its own rules check it).
    tops |= {
        id(consumer)
        for i in (program.inserts if changing else ())
        if cdc_join(program, i) is None
        and (consumer := _retracting_consumer(program, i)) is not None
    }
    refused_steps: list[tuple[Step, str]] = []
    ends: dict[str, str | None] = {}

    def origin_changes(origin: Origin) -> str | None:
        if isinstance(origin, FromSource):
            return origin.name if origin.name in changing else None
        view = view_of(origin)
        if view is None:
            return None  # a source's errors: inserts
        if view not in ends:
            ends[view] = None  # a view reads only earlier ones; guard against a cycle
            ends[view] = stream_changes(program.view(view).stream)
        return ends[view]

    def stream_changes(stream: Stream, consumer: Step | None = None) -> str | None:
        source = origin_changes(stream.origin)
        for step in stream.steps:
            others = [c for c in (stream_changes(i) for i in step.inputs) if c is not None]
            carried = source or (others[0] if others else None)
            if carried is None:
                continue
            if step is consumer and isinstance(step, JoinStep):
                return None  # the CDC join's processor takes them (its own rules check it)
            if id(step) in tops and not others:
                return None  # the TOP's processor takes them (its own rules check it)
            if others or not isinstance(step, CHANGE_KEEPING_STEPS) or _regroups(step):
                refused_steps.append((step, carried))
                return None
            reading[id(step)] = carried
        return source

    refused_inserts: list[tuple[InsertDef, str]] = []
    if changing:
        for view in program.views:
            origin_changes(FromView(name=view.name, span=view.span))
        streaming = program.settings.execution_mode != "batch"
        for insert in program.inserts:
            joined = cdc_join(program, insert)
            consumer = joined.join if joined is not None else None
            carried = stream_changes(insert.stream, consumer if streaming else None)
            sink = program.sink(insert.sink)
            if carried is None or (streaming and cdc_upsert(program, insert) is not None):
                continue
            if sink.connector not in CHANGE_SHOWING_SINKS or sink.mode != "append":
                refused_inserts.append((insert, carried))
    return ChangeFlow(reading, tuple(refused_steps), tuple(refused_inserts))


#: Steps a CDC source's changes may pass on their way into an upsert sink: each keeps a
#: change's kind and one row per change (not EXPLODE, after which a key has many rows).
UPSERT_KEEPING_STEPS = (WhereStep, SelectStep, ExtendStep, SetStep, DropStep, RenameStep, KeyByStep)


@dataclass(frozen=True, slots=True)
class CdcUpsert:
    """An INSERT writing a CDC source's changes into an upsert sink, through
    :data:`UPSERT_KEEPING_STEPS` only (streaming). ``key_sources``: the source column each
    of the sink's key columns holds unchanged (None where it holds something else), which
    must be the source's PRIMARY KEY. ``before_deletes``: a WHERE stands between, so Flink
    plans no DropUpdateBefore and each -U reaches the sink, which deletes its key (Flink's
    JDBC, Elasticsearch and upsert-kafka sinks take UPDATE_BEFORE as a delete); without
    one Flink drops the -U rows right after the scan."""

    source: SourceDef
    sink: SinkDef
    key_sources: tuple[str | None, ...]
    before_deletes: bool

    @property
    def key_matches(self) -> bool:
        """Whether the sink's key is the source's PRIMARY KEY, column for column (Flink's
        planner refuses any other key: "The query has an upsert key that differs from the
        primary key of the sink table")."""
        named = [k for k in self.key_sources if k is not None]
        return (
            bool(self.source.primary_key)
            and len(named) == len(self.key_sources) == len(set(named))
            and set(named) == set(self.source.primary_key)
        )


def cdc_upsert(program: Program, insert: InsertDef) -> CdcUpsert | None:
    """The INSERT as a CDC source's changes into an upsert sink, None where it is not one
    (a view, a JOIN or UNION ALL, another step, another sink, a batch job)."""
    origin = insert.stream.origin
    if program.settings.execution_mode == "batch" or not isinstance(origin, FromSource):
        return None
    source = program.source(origin.name)
    sink = program.sink(insert.sink)
    if not source.changelog or not is_upsert(sink.connector, sink.mode):
        return None
    steps = insert.stream.steps
    if any(not isinstance(s, UPSERT_KEEPING_STEPS) or s.inputs or _regroups(s) for s in steps):
        return None
    carriers: dict[str, str] = {}
    for column in source.output_schema:
        held = frozenset({column.name})
        for step in steps:
            held = _passes_on_all(step, held)
        carriers.update((name, column.name) for name in held)
    key = dict(sink.options).get("key")
    names = partition_columns(str(key)) if key is not None else ()
    return CdcUpsert(
        source,
        sink,
        tuple(carriers.get(name) for name in names),
        any(isinstance(s, WhereStep) for s in steps),
    )


def _passes_on_all(step: Step, columns: frozenset[str]) -> frozenset[str]:
    """:meth:`Step.passes_on`, where a SELECT's ``*`` passes every column on too."""
    passed = step.passes_on(columns)
    if isinstance(step, SelectStep) and any(
        isinstance(i.expr.tree, exp.Star) for i in step.node.items
    ):
        passed |= columns
    return passed
