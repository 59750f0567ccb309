"""The last pass: how the job runs on Spark — queries, exchanges, partitions, checkpoints.

One query per INSERT, named after its sink. Every StreamEdge that is not FORWARD becomes
the Spark exchange that gives the consumer the same data distribution Flink's ship
strategy does, and the plan says why; ``exchanges_planned`` counts the shuffles Spark
will run. This is the single place where a Spark decision is made: code generation and
``flowc run`` read the :class:`SparkPlan` and decide nothing again.

Shuffle partitions: Spark keeps a stateful query's state in exactly
``spark.sql.shuffle.partitions`` partitions and freezes that number in the checkpoint
(a later change is silently ignored). Each partition costs a state store per micro-batch
(measured here on PySpark 4.3: 246 ms per batch at 1 partition, 331 ms at 4, 5.2 s at
Spark's default 200). flowc therefore uses the stateful operators' parallelism, not
their key groups: local runs stay fast, and the plan says that a later change is
repartitioned offline by ``flowc run`` (runtime/rescale.py; RocksDB store only).
``SET spark.sql.shuffle.partitions`` overrides it.

Every planned exchange runs: the generated program excludes Catalyst's
CollapseRepartition rule, which would merge two repartitions with only row-wise steps
between them into one shuffle, and CollapseGroupedSumOfCount, which would run a sum of
an aggregation's counts as one aggregation. An exchange Spark's ReuseExchangeAndSubquery
shares between two aggregations written alike is planned as no shuffle (:func:`_reused`);
in batch mode adaptive execution reuses it at run time, and the plan counts it as the
initial plan, the one ``flowc run`` reads, shows it.

Batch mode (``execution.mode = batch``) runs every query as a Spark batch read and
write over the bounded input, so every window, session and outer-join row is emitted,
as Flink's bounded execution does with its final watermark.
"""

from __future__ import annotations

import os
import re
from collections import deque
from dataclasses import field, replace
from enum import StrEnum

from sqlglot import exp

from flowc import ast
from flowc.analyze.state_store import StateStore, choose_state_store
from flowc.analyze.step_common import keyword
from flowc.analyze.upsert_sinks import upsert_key
from flowc.catalog import is_upsert, partition_columns
from flowc.fast_dataclass import dataclass
from flowc.flink.keygroups import compute_default_max_parallelism
from flowc.graph.changelog import rowtime_first_tops
from flowc.graph.job_graph import JobGraph, JobVertex
from flowc.graph.stream_graph import StreamEdge, StreamGraph, StreamNode
from flowc.graph.transformations import TransformationTree
from flowc.program import (
    AggregateStep,
    CdcUpsert,
    DeduplicateStep,
    DimensionJoinStep,
    DropStep,
    ExtendStep,
    InsertDef,
    JoinStep,
    MatchStep,
    OverStep,
    Program,
    RenameStep,
    Schema,
    SelectStep,
    SetStep,
    SinkDef,
    Step,
    TopStep,
    WatermarkRead,
    WhereStep,
    WindowAggregateStep,
    WindowTopStep,
    cdc_join,
    cdc_upsert,
)
from flowc.spans import Span
from flowc.spark.changelog_chains import join_row_key, updating_chain
from flowc.spark.state_partitions import StatePartitions, describe_state
from flowc.spark.streaming import (
    JoinFilter,
    Lineage,
    join_filter,
    reads_watermark,
    steps_within,
    top_groups,
)
from flowc.sql.spark_distinct import UnsupportedDistinct, rewrite_distinct
from flowc.sql.spark_sql import interval_millis, registered_name, spark_text
from flowc.vocabulary import (
    STATEFUL_OPERATORS,
    JoinKind,
    NodeKind,
    Operator,
    Partitioner,
    WindowKind,
)

DEFAULT_CHECKPOINT_ROOT = ".flowc-checkpoints"


class ExchangeKind(StrEnum):
    """What the generated program does for an exchange."""

    NONE = "none"  # rows stay where they are (FORWARD)
    STATEFUL = "stateful"  # the stateful operator's own groupBy / join exchange
    HASH = "hash"  # repartition(partitions, keys)
    ROUND_ROBIN = "round_robin"  # repartition(p)
    COALESCE = "coalesce"  # coalesce(p): no shuffle
    SINGLE = "single"  # repartition(1)
    RANDOM = "random"  # repartition(p, rand())
    BROADCAST = "broadcast"  # every row to each of p partitions
    CUSTOM = "custom"  # repartition(p, expression)
    STATIC_JOIN = "static_join"  # a stream-static join: Spark's planner exchanges, no state


@dataclass(frozen=True, slots=True)
class SparkExchange:
    """One StreamEdge as Spark runs it."""

    producer: str
    consumer: str
    producer_id: int
    consumer_id: int
    ship_strategy: str
    keys: tuple[str, ...]
    kind: ExchangeKind
    partitions: int
    spark: str
    partitioning: str
    shuffle: bool
    why: str

    def to_json(self) -> dict[str, object]:
        return {
            "from": self.producer,
            "to": self.consumer,
            "ship_strategy": self.ship_strategy,
            "keys": list(self.keys),
            "spark": self.spark,
            "partitioning": self.partitioning,
            "shuffle": self.shuffle,
            "why": self.why,
        }


@dataclass(frozen=True, slots=True)
class SparkQuery:
    """One INSERT: a streaming query (or, in batch mode, one batch write)."""

    name: str
    sink: str
    connector: str
    reads: tuple[str, ...]
    output_mode: str
    trigger: str
    #: Path segments under the checkpoint root: the job's and the query's, sanitised.
    checkpoint: tuple[str, str]
    checkpoint_location: str
    exchanges: tuple[SparkExchange, ...]
    rescaling: str | None
    stateful: tuple[int, ...]
    #: Per stateful operator (and CURRENT_WATERMARK reader): Flink's key groups beside
    #: the Spark partitions its state is in (streaming only).
    state: tuple[StatePartitions, ...] = ()
    #: How Spark runs what it has no streaming operator for (distinct aggregates), one
    #: line each: ``line 9: COUNT(DISTINCT b) runs as ...``.
    rewrites: tuple[str, ...] = ()
    #: A files sink's partition columns: one Hive-style folder level each.
    partition_by: tuple[str, ...] = ()
    #: How an upsert sink writes (foreachBatch, its key, idempotence); None for others.
    upsert: str | None = None
    #: The columns an upsert sink keeps one row per (its foreachBatch merges on them);
    #: None where the sink appends what Spark's writer gives it (``upsert`` says how).
    upsert_key: tuple[str, ...] | None = None
    #: Where an upsert sink writes a TOP's rows: the columns naming its groups, whose old
    #: rows each micro-batch replaces (``()``: a global TOP, the whole table); None else.
    upsert_groups: tuple[str, ...] | None = None
    #: The processing-time trigger's interval (``SET checkpoint.interval``); None where
    #: the next micro-batch starts when the previous one ends (``trigger`` says which).
    trigger_interval_ms: int | None = None

    @property
    def exchanges_planned(self) -> int:
        return sum(e.shuffle for e in self.exchanges)

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = {
            "name": self.name,
            "sink": {"name": self.sink, "connector": self.connector},
            "reads": list(self.reads),
            "output_mode": self.output_mode,
            "trigger": self.trigger,
            "checkpoint_location": self.checkpoint_location,
            "exchanges": [e.to_json() for e in self.exchanges],
            "exchanges_planned": self.exchanges_planned,
        }
        if self.rescaling is not None:
            data["rescaling"] = self.rescaling
        if self.state:
            data["state"] = [s.to_json() for s in self.state]
        if self.rewrites:
            data["rewrites"] = list(self.rewrites)
        if self.partition_by:
            data["partition_by"] = list(self.partition_by)
        if self.upsert is not None:
            data["upsert"] = self.upsert
        if self.upsert_groups is not None:
            data["upsert_groups"] = list(self.upsert_groups)
        return data


@dataclass(frozen=True, slots=True)
class WatermarkReader:
    """A WHERE or SELECT reading Flink's CURRENT_WATERMARK: on Spark a stateful processor
    (``transformWithState`` in event-time mode, rows grouped by a hash of the row into
    ``buckets`` groups) reads the micro-batch's watermark and hands it to each row. Every
    watermark is taken off its input, so Spark drops no row before it; ``on_time`` (see
    :class:`~flowc.program.WatermarkRead`) makes it drop the rows the condition drops
    anyway and declare ``column`` its output's event time, which keeps the watermark."""

    node_id: int
    #: The step's place (a diagnostic about the processor points at it).
    span: Span
    #: The step's keyword: WHERE, SELECT or EXTEND.
    step: str
    column: str
    on_time: str | None
    buckets: int

    @property
    def line(self) -> int:
        return self.span.line

    def to_text(self) -> str:
        kept = (
            f"keeps the rows ahead of it, and '{self.column}' its watermark"
            if self.on_time is not None
            else "passes every row on; no column keeps a watermark after it"
        )
        return (
            f"line {self.line}: the {self.step} reads CURRENT_WATERMARK({self.column}) from a "
            f"transformWithState processor (event time, rows grouped by a hash of the row "
            f"into {self.buckets} group{'' if self.buckets == 1 else 's'}): the micro-batch's "
            "watermark, NULL before the first; "
            f"it {kept}"
        )


@dataclass(frozen=True, slots=True)
class WithinDeduplicator:
    """A DEDUPLICATE ... WITHIN: on Spark a stateful processor (``transformWithState``,
    rows grouped by ``keys``) keeps each key's first row and a later one ``within_ms`` or
    more from the kept row by event time ``column``, a micro-batch's rows in time order.
    Streaming, the kept row's time is the key's state, cleared by an event-time timer once
    the watermark passes it by the interval, and ``column`` keeps its watermark; Spark drops
    the late rows before it (docs/language.md, "DEDUPLICATE WITHIN on Spark")."""

    node_id: int
    span: Span
    keys: tuple[str, ...]
    column: str
    within: str
    within_ms: int
    key_groups: int
    streaming: bool
    #: The input moves to the processor as pandas DataFrames (``transformWithStateInPandas``)
    #: rather than Row objects; ``form_why`` says why (:func:`within_form`).
    pandas: bool = False
    form_why: str = ""

    @property
    def line(self) -> int:
        return self.span.line

    def to_text(self) -> str:
        keys = ", ".join(self.keys)
        groups = f"{self.key_groups} key groups by a hash of {keys}"
        api = "transformWithStateInPandas" if self.pandas else "transformWithState"
        form = f"; {self.form_why}" if self.form_why else ""
        if not self.streaming:
            return (
                f"line {self.line}: DEDUPLICATE ON {keys} WITHIN {self.within} runs as a "
                f"{api} processor over {groups}: each key's rows in "
                f"'{self.column}' order, a row kept when it is the key's first, or the "
                f"interval or more from the row kept before it{form}"
            )
        return (
            f"line {self.line}: DEDUPLICATE ON {keys} WITHIN {self.within} runs as a "
            f"{api} processor (event time, {groups}): a row is kept when it "
            f"is its key's first, or the interval or more by '{self.column}' from the key's "
            "kept row, whose time each key group's state lists until the watermark passes it "
            f"by the interval; '{self.column}' keeps its watermark{form}"
        )


#: The column types the pandas form of a processor carries exactly, each shown by a test
#: on real Spark (tests/test_dedup_within.py): integers through pandas' nullable extension
#: types (``preferIntExtensionDtype``), a TIMESTAMP rebuilt from its epoch microseconds.
PANDAS_EXACT_TYPES = re.compile(
    r"BIGINT|INT|SMALLINT|TINYINT|BOOLEAN|STRING|DATE|TIMESTAMP|DECIMAL\(\d+, ?\d+\)"
)


def within_form(schema: Schema) -> tuple[bool, str]:
    """Whether a DEDUPLICATE ... WITHIN over ``schema`` runs in the pandas form, and why:
    only when every column has a type PySpark's pandas conversion is shown to carry
    exactly both ways (a NaN DOUBLE comes back NULL; nested values are not shown)."""
    for column in schema:
        if not PANDAS_EXACT_TYPES.fullmatch(column.type):
            return False, (
                f"rows move as Row objects: column '{column.name}' is {column.type}, which "
                "the pandas form is not shown to carry exactly (a NaN FLOAT or DOUBLE "
                "comes back NULL)"
            )
    return True, (
        "rows move as pandas DataFrames, not Row objects: every column's type is one the "
        "pandas form carries exactly (integers as pandas' nullable integers, a TIMESTAMP "
        "rebuilt from its epoch microseconds)"
    )


@dataclass(frozen=True, slots=True)
class PatternMatcher:
    """A MATCH_RECOGNIZE step (Flink's Match): a stateful processor (``transformWithState``,
    event time, rows grouped by the PARTITION BY ``keys``): rows wait in state until the
    watermark reaches their time (``column``), then go to the pattern's state machine in
    time order, one row out per match; a row at or behind the watermark when it comes is
    dropped as late, as Flink drops it (docs/language.md#match_recognize)."""

    node_id: int
    span: Span
    keys: tuple[str, ...]
    column: str
    streaming: bool

    @property
    def line(self) -> int:
        return self.span.line

    def to_text(self) -> str:
        if not self.streaming:
            return (
                f"line {self.line}: MATCH_RECOGNIZE (PARTITION BY {', '.join(self.keys)} "
                f"ORDER BY {self.column}) runs as a processor (transformWithState, batch): "
                "each key's rows at once, in time order (none is late), through the "
                "pattern's state machine; the partial matches open at the input's end are "
                "dropped, as Flink's batch Match drops them"
            )
        return (
            f"line {self.line}: MATCH_RECOGNIZE (PARTITION BY {', '.join(self.keys)} ORDER BY "
            f"{self.column}) runs as a stateful processor (transformWithState, event time): "
            "each key's rows wait in its state until the watermark passes them, then go to "
            "the pattern's state machine in time order (its partial matches in the state "
            "too); a row behind the watermark is dropped as late, as Flink drops it"
        )


@dataclass(frozen=True, slots=True)
class OverAggregator:
    """An OVER step (Flink's OverAggregate). Streaming, a stateful processor
    (``transformWithState``, event time, rows grouped by the PARTITION BY ``keys``, all rows
    in one group without): rows wait in state until the watermark reaches their time, are
    then taken in time order (ties in arrival order) with each call computed over the
    frame, a RANGE frame's ties alike; the state keeps the waiting rows and what the frame
    still needs (the last ``preceding`` rows, or the rows within ``preceding`` ms); a row
    at or behind the last time emitted is dropped as late, as Flink drops it. Batch:
    Spark's window functions over the same frame (docs/language.md, "OVER windows")."""

    node_id: int
    span: Span
    keys: tuple[str, ...]
    column: str
    rows: bool
    preceding: int
    frame: str
    streaming: bool

    @property
    def line(self) -> int:
        return self.span.line

    def to_text(self) -> str:
        keys = f"PARTITION BY {', '.join(self.keys)}" if self.keys else "no PARTITION BY"
        if not self.streaming:
            return (
                f"line {self.line}: OVER ({keys} ORDER BY {self.column} {self.frame}) runs as "
                "Spark's window functions over the same frame"
            )
        kept = (
            "the last rows emitted its LAG calls read"
            if self.preceding < 0
            else f"the last {self.preceding} rows emitted"
            if self.rows
            else f"the rows emitted within {self.preceding} ms"
        )
        return (
            f"line {self.line}: OVER ({keys} ORDER BY {self.column} {self.frame}) runs as a "
            f"transformWithState processor (event time, grouped by "
            f"{', '.join(self.keys) or 'one group'}): rows wait in state until the watermark "
            f"reaches their '{self.column}', then are emitted in time order with each call "
            f"over its frame; the state keeps the waiting rows and {kept}; a row at or behind "
            "the last time emitted is dropped as late, as Flink drops it; the output has no "
            "watermark"
        )


@dataclass(frozen=True, slots=True)
class RowtimeFirst:
    """A TOP 1 whose first BY is an event-time attribute ascending, over insert-only rows:
    Flink's insert-only keep-first row by event time (docs/language.md, "Top-N"). Streaming,
    a stateful processor (``transformWithState``, event time, rows grouped by the PER
    ``keys``, one group without) keeps each group's candidate until the watermark reaches
    its time, emits it once, and drops the rows behind the watermark as late, as Flink
    does; Spark's ``min_by`` aggregation would let a late row replace it."""

    node_id: int
    span: Span
    keys: tuple[str, ...]
    column: str
    #: The BY order as written (its first expression is ``column``).
    order: str

    @property
    def line(self) -> int:
        return self.span.line

    def to_text(self) -> str:
        keys = f"PER {', '.join(self.keys)}" if self.keys else "one group"
        return (
            f"line {self.line}: TOP 1 BY {self.order} runs as a transformWithState processor "
            f"(event time, grouped by {keys}), not Spark's min_by, because '{self.column}' is "
            "an event-time attribute, which makes it Flink's insert-only keep-first row: a "
            f"row whose '{self.column}' is behind the micro-batch's watermark is late and "
            "dropped; the group's first row in the order (one kept from an earlier "
            "micro-batch winning ties of its time) waits in state until the watermark reaches "
            "its time, is then written once, and every later row of the group is ignored; "
            "the state keeps, per group, that row and whether it was written"
        )


@dataclass(frozen=True, slots=True)
class ChangelogProcessor:
    """A TOP or AGGREGATE of an updating pipeline (:mod:`flowc.spark.changelog_chains`),
    streaming: a stateful processor (``transformWithState``, rows grouped by a hash of
    ``keys`` into ``key_groups`` groups) that folds each micro-batch's rows per key as a
    signed multiset (Flink's mini-batch semantics) and emits Flink's changelog of its
    results; the consumer retracts a row's contribution and adds the new one."""

    node_id: int
    span: Span
    kind: str
    keys: tuple[str, ...]
    consumer: bool
    key_groups: int
    #: The other end of the chain: the consumer for a producer ("the AGGREGATE on line
    #: 9"), what produces the updates for a consumer ("the step on line 7", or a CDC
    #: source's changes).
    other: str
    #: A TOP consumer's row identity (its updating input's keys, Flink's upsert key when
    #: the rank is not selected); empty otherwise.
    row_keys: tuple[str, ...] = ()
    #: A JOIN's kind where it is outer (LEFT, RIGHT, FULL): its rows without a match are
    #: emitted padded; empty otherwise.
    outer: str = ""
    #: A producer (an AGGREGATE or a TOP) whose changelog a JOIN consumes.
    feeds_join: bool = False

    @property
    def line(self) -> int:
        return self.span.line

    def to_text(self) -> str:
        keys = ", ".join(self.keys) or "no key"
        groups = f"{self.key_groups} key groups by a hash of {keys}"
        if not self.consumer:
            kept = "its rows" if self.kind == "TOP" else "its accumulators"
            return (
                f"line {self.line}: {self.kind} runs as a transformWithState processor "
                f"({groups}), not Spark's own, because {self.other} consumes its "
                "updates: per micro-batch it folds each key's "
                f"rows and emits Flink's changelog of its changed results (+I, -U/+U, -D); "
                f"the state keeps, per key, {kept} and its last results"
            )
        if self.kind == "JOIN":
            return (
                f"line {self.line}: JOIN runs as a transformWithState processor ({groups}) "
                f"consuming {self.other}, not Spark's stream-stream join, which takes "
                "inserts only: both inputs in one stream, each row tagged with its side; per "
                "micro-batch it adds +I/+U rows to and retracts -U/-D rows from each side's "
                "rows of their join key, and emits the changed joined rows by the sink's key "
                f"({', '.join(self.row_keys)}): +I new, -U/+U changed, -D gone"
                + (
                    f" (a {self.outer} JOIN: a preserved row without a match is a row padded "
                    "with NULLs, gone while it has one)"
                    if self.outer
                    else ""
                )
                + "; the state keeps, per join key, both sides' current rows"
            )
        if self.kind == "TOP":
            changed = (
                f"per row by {', '.join(self.row_keys)} (+I entered, -U/+U changed, -D left)"
                if self.row_keys
                else "rank by rank (+I, -U/+U, -D)"
            )
            return (
                f"line {self.line}: TOP runs as a transformWithState processor ({groups}) "
                f"consuming the changelog of {self.other}: per micro-batch it adds +I/+U "
                f"rows and retracts -U/-D rows, re-ranks each key's rows and emits its "
                f"changed top rows {changed}; the state keeps, per key, its current input "
                "rows and last results"
            )
        return (
            f"line {self.line}: AGGREGATE runs as a transformWithState processor ({groups}) "
            f"consuming the changelog of {self.other}: per "
            "micro-batch it adds +I/+U rows and retracts -U/-D rows (Flink's mini-batch "
            "GroupAggregate), min and max keeping a count per value, and emits +I, -U/+U "
            "(nothing for an unchanged result) or -D (its input count back to 0) per key; "
            "the state keeps, per key, its input count, accumulators and last result"
        )


@dataclass(frozen=True, slots=True)
class SparkPlan:
    """The Spark realization of a job: what code generation and ``flowc run`` execute."""

    batch: bool
    shuffle_partitions: int
    shuffle_partitions_reason: str
    #: The state store of the stateful queries, and why (:mod:`flowc.analyze.state_store`).
    state_store: StateStore
    queries: tuple[SparkQuery, ...]
    #: Every exchange by (producer node id, consumer node id).
    exchanges: dict[tuple[int, int], SparkExchange]
    #: The StreamGraph node that runs each program step (keyed by ``id(step)``), and
    #: each source's and each INSERT's sink node.
    step_nodes: dict[int, int]
    source_nodes: dict[str, int]
    sink_nodes: tuple[int, ...]
    #: Stateful operators by node id: (name, operator, span line) for reports.
    stateful: dict[int, StreamNode]
    #: How each call of a Python function runs, one line each (:func:`_function_lines`).
    functions: tuple[str, ...] = ()
    #: What Spark does with each source's processing-time column (PROCTIME()).
    processing_time: tuple[str, ...] = ()
    #: The folder the queries' checkpoints go under, as the plan shows it: ``SET
    #: checkpoint.dir`` (relative to the job's folder), else ``.flowc-checkpoints``.
    checkpoint_root: str = DEFAULT_CHECKPOINT_ROOT
    #: How many partitions each source (by name) reads into: its transformation's
    #: parallelism (a rate or datagen source's ``numPartitions``).
    source_partitions: dict[str, int] = field(default_factory=dict)
    #: The join nodes whose table side Spark broadcasts (stream-static joins, temporal
    #: ones included): the stream is not exchanged and no state is kept.
    broadcast_joins: frozenset[int] = frozenset()
    #: Of those, the temporal joins (``AS OF``): each row meets the version of the table
    #: valid at its time, the table's versions given their ends when the job starts.
    temporal_joins: frozenset[int] = frozenset()
    #: The steps reading CURRENT_WATERMARK that a query runs, by node id: each runs as a
    #: processor.
    watermark_readers: dict[int, WatermarkReader] = field(default_factory=dict)
    #: The DEDUPLICATE ... WITHIN steps a query runs, by node id: each runs as a processor.
    within_deduplicators: dict[int, WithinDeduplicator] = field(default_factory=dict)
    #: The OVER steps a query runs, by node id: streaming, each runs as a processor.
    over_aggregators: dict[int, OverAggregator] = field(default_factory=dict)
    #: The MATCH_RECOGNIZE steps a query runs, by node id: each runs as a processor.
    pattern_matchers: dict[int, PatternMatcher] = field(default_factory=dict)
    #: The TOP and AGGREGATE steps of updating pipelines, by node id: streaming, each runs
    #: as a processor emitting a changelog.
    changelog_processors: dict[int, ChangelogProcessor] = field(default_factory=dict)
    #: The TOPs keeping each group's first row by event time, by node id: streaming, each
    #: runs as a processor.
    rowtime_firsts: dict[int, RowtimeFirst] = field(default_factory=dict)
    #: The INNER stream-stream JOINs whose ON Spark runs split, by node id: conditions
    #: bounding a column without watermark tested after the join (E0760's case).
    join_filters: dict[int, JoinFilter] = field(default_factory=dict)

    @property
    def processors(self) -> bool:
        """Whether a query runs a stateful processor (``transformWithState``), which needs
        the RocksDB store and pandas, pyarrow and protobuf in the Python workers."""
        return bool(
            self.watermark_readers
            or self.within_deduplicators
            or (not self.batch and self.over_aggregators)
            or self.pattern_matchers
            or self.changelog_processors
            or self.rowtime_firsts
        )

    @property
    def engine(self) -> str:
        return "spark-batch" if self.batch else "spark-structured-streaming"

    def exchange(self, producer: int, consumer: int) -> SparkExchange | None:
        """The exchange on the edge producer → consumer; None for FORWARD."""
        return self.exchanges.get((producer, consumer))

    def query(self, name: str) -> SparkQuery:
        return next(q for q in self.queries if q.name == name)

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = {
            "engine": self.engine,
            "shuffle_partitions": self.shuffle_partitions,
            "shuffle_partitions_reason": self.shuffle_partitions_reason,
            "state_store": self.state_store.to_json(),
            "queries": [q.to_json() for q in self.queries],
            "exchanges": [
                {"query": q.name, **e.to_json()} for q in self.queries for e in q.exchanges
            ],
        }
        if self.functions:
            data["python_functions"] = list(self.functions)
        if self.processing_time:
            data["processing_time"] = list(self.processing_time)
        if self.watermark_readers:
            data["watermark_readers"] = [
                r.to_text() for _, r in sorted(self.watermark_readers.items())
            ]
        if self.within_deduplicators:
            data["within_deduplicators"] = [
                d.to_text() for _, d in sorted(self.within_deduplicators.items())
            ]
        if self.changelog_processors:
            data["changelog_processors"] = [
                c.to_text() for _, c in sorted(self.changelog_processors.items())
            ]
        if self.over_aggregators:
            data["over_aggregators"] = [
                o.to_text() for _, o in sorted(self.over_aggregators.items())
            ]
        if self.pattern_matchers:
            data["pattern_matchers"] = [
                m.to_text() for _, m in sorted(self.pattern_matchers.items())
            ]
        if self.rowtime_firsts:
            data["rowtime_firsts"] = [r.to_text() for _, r in sorted(self.rowtime_firsts.items())]
        if self.join_filters:
            data["join_filters"] = [
                _join_filter_text(self.stateful[n], f) for n, f in sorted(self.join_filters.items())
            ]
        return data

    def to_text(self) -> list[str]:
        title = (
            "Spark realization (batch)"
            if self.batch
            else "Spark realization (Structured Streaming)"
        )
        lines = [
            f"{title}:",
            f"  shuffle partitions: {self.shuffle_partitions} ({self.shuffle_partitions_reason})",
            f"  state store: {self.state_store.to_text()}",
        ]
        lines += [f"  python function: {line}" for line in self.functions]
        lines += [f"  processing time: {line}" for line in self.processing_time]
        lines += [
            f"  watermark reader: {r.to_text()}" for _, r in sorted(self.watermark_readers.items())
        ]
        lines += [
            f"  deduplicate within: {d.to_text()}"
            for _, d in sorted(self.within_deduplicators.items())
        ]
        lines += [f"  over: {o.to_text()}" for _, o in sorted(self.over_aggregators.items())]
        lines += [f"  match: {m.to_text()}" for _, m in sorted(self.pattern_matchers.items())]
        lines += [
            f"  updating: {c.to_text()}" for _, c in sorted(self.changelog_processors.items())
        ]
        lines += [f"  first row: {r.to_text()}" for _, r in sorted(self.rowtime_firsts.items())]
        lines += [
            f"  join filter: {_join_filter_text(self.stateful[n], f)}"
            for n, f in sorted(self.join_filters.items())
        ]
        for query in self.queries:
            lines.append(
                f"  query '{query.name}': writes {query.connector} sink '{query.sink}', output "
                f"mode {query.output_mode}, reads {', '.join(query.reads)}"
            )
            lines.append(f"    trigger: {query.trigger}")
            lines.append(f"    checkpoint: {query.checkpoint_location}")
            if query.rescaling is not None:
                lines.append(f"    rescaling: {query.rescaling}")
            lines += [f"    state: {s.to_text()}" for s in query.state]
            if query.partition_by:
                folders = "/".join(f"{c}=<value>" for c in query.partition_by)
                lines.append(
                    f"    partitioned by: {', '.join(query.partition_by)} (folders {folders})"
                )
            if query.upsert is not None:
                lines.append(f"    upsert: {query.upsert}")
            if query.upsert_groups is not None:
                groups = ", ".join(query.upsert_groups) or "the whole table"
                lines.append(
                    f"    upsert groups: {groups}: each micro-batch holds every row of the TOP's "
                    "groups it changed and replaces their old rows, so a row that leaves the "
                    "top is deleted"
                )
            for rewrite in query.rewrites:
                lines.append(f"    rewrite: {rewrite}")
            lines.append(f"    exchanges planned: {query.exchanges_planned}")
            for e in query.exchanges:
                lines.append(
                    f"    - {e.producer} -> {e.consumer}: {e.ship_strategy} as {e.spark} "
                    f"[{e.partitioning}]: {e.why}"
                )
        return lines


def _rescaling(partitions: int, store: StateStore, processor: bool, unkeyed: bool = False) -> str:
    """What a later change of parallelism does to a stateful query's state on Spark;
    ``unkeyed``: it runs an aggregate or a TOP without a key as Spark's aggregation, which
    flowc does not repartition."""
    frozen = f"state lives in {partitions} partitions, frozen in the checkpoint"
    if unkeyed and store.backend == "rocksdb":
        return (
            f"{frozen}; an aggregate or TOP without a key keeps its state in partition 0 "
            "whatever the count, and Spark's repartition moves it elsewhere, so flowc "
            "refuses a later change of parallelism (E0826)"
        )
    if store.backend == "rocksdb":
        moved = (
            "; a processor's lists, values and timers move by its grouping key" if processor else ""
        )
        return (
            f"{frozen}: on a later change of parallelism flowc run first repartitions it "
            "into the new count (Spark's offline state repartition: every key re-hashed, "
            f"where Flink would move whole key groups{moved})"
        )
    return (
        f"{frozen}; the {store.backend} store cannot be repartitioned, so a later change of "
        "parallelism is refused (E0826): choose state.backend.type = 'rocksdb' to be able "
        "to rescale"
    )


def build_spark_plan(
    program: Program, tree: TransformationTree, graph: StreamGraph, job_graph: JobGraph
) -> SparkPlan:
    """The Spark realization of the job's StreamGraph (the ``spark`` section of its plans);
    ``job_graph`` gives each stateful operator's Flink key groups beside its partitions."""
    settings = program.settings
    batch = settings.execution_mode == "batch"
    static_joins = _static_joins(program, tree)
    temporal_joins = _static_joins(program, tree, temporal=True)
    stateful_nodes = {
        n.id: n
        for n in graph.nodes.values()
        if n.operator in STATEFUL_OPERATORS and n.id not in static_joins
    }
    reads = _watermark_reads(program, tree)
    if reads:  # only those a query runs (a view no INSERT reads runs nowhere)
        used = {n.id for sink_id in graph.sinks for n in _upstream(graph, sink_id)}
        reads = {node: read for node, read in reads.items() if node in used}
    partitions, reason = _shuffle_partitions(
        [*stateful_nodes.values(), *(graph.nodes[n] for n in sorted(reads))],
        dict(settings.spark_conf),
    )
    readers = {
        node: WatermarkReader(
            node_id=node,
            span=step.span,
            step=keyword(step.node),
            column=read.column,
            on_time=read.on_time,
            buckets=partitions,
        )
        for node, (step, read) in reads.items()
    }
    deduplicators = _within_deduplicators(program, tree, graph, batch)
    overs = _over_aggregators(program, tree, graph, batch)
    matchers = _pattern_matchers(program, tree, graph, batch)
    changelogs = {} if batch else _changelog_processors(program, tree, graph)
    firsts = {} if batch else _rowtime_firsts(program, tree, graph)
    join_filters = {} if batch else _join_filters(program, tree, graph, changelogs)
    state_store = choose_state_store(
        settings,
        bool(stateful_nodes) or bool(readers),
        processors=bool(readers)
        or bool(deduplicators)
        or (bool(overs) and not batch)
        or bool(matchers)
        or bool(firsts),
        updating=bool(changelogs),
        joins_only=all(c.kind == "JOIN" or c.feeds_join for c in changelogs.values()),
    )
    queries = []
    exchanges: dict[tuple[int, int], SparkExchange] = {}
    job_segment = checkpoint_segment(settings.job_name)
    root = (
        settings.checkpoint_dir if settings.checkpoint_dir is not None else DEFAULT_CHECKPOINT_ROOT
    )
    rewrites = _distinct_rewrites(program, tree, frozenset(firsts))
    hashed = _HashedOutputs(graph, _node_steps(program, tree), static_joins)
    vertices = {op.node_id: v for v in job_graph.vertices.values() for op in v.operators}
    for insert, sink_id in zip(program.inserts, graph.sinks, strict=True):
        nodes = _upstream(graph, sink_id)
        stateful = tuple(n.id for n in nodes if n.id in stateful_nodes)
        query_exchanges = []
        for node in nodes:
            for edge in node.in_edges:
                if edge.partitioner == Partitioner.FORWARD:
                    continue
                exchange = _exchange(
                    edge,
                    graph,
                    partitions,
                    static_joins,
                    settings.exchanges == "minimal",
                    temporal_joins,
                    hashed,
                )
                query_exchanges.append(exchange)
        if not batch:  # a batch plan's exchanges are counted before AQE reuses any
            query_exchanges = _reused(query_exchanges, graph, hashed.steps)
        exchanges.update({(e.producer_id, e.consumer_id): e for e in query_exchanges})
        sink = program.sink(insert.sink)
        segment = checkpoint_segment(  # a shown query's by its text: moved, it keeps it
            f"select-{sink.shows_result}" if sink.shows_result else insert.sink
        )
        queries.append(
            SparkQuery(
                name=insert.sink,
                sink=sink.name,
                connector=sink.connector,
                reads=tuple(sorted(n.name for n in nodes if n.kind == NodeKind.SOURCE)),
                output_mode=sink.mode,
                trigger=_trigger(settings.checkpoint_interval_ms, batch),
                checkpoint=(job_segment, segment),
                checkpoint_location=(
                    "none: a batch job reads its bounded input once"
                    if batch
                    else f"{root}/{job_segment}/{segment}"
                ),
                exchanges=tuple(query_exchanges),
                rescaling=_rescaling(
                    partitions,
                    state_store,
                    any(
                        n.id in deduplicators
                        or n.id in overs
                        or n.id in changelogs
                        or n.id in readers
                        or n.id in firsts
                        for n in nodes
                    ),
                    unkeyed=any(
                        isinstance(step, AggregateStep | TopStep)
                        and not step.keys
                        and n not in changelogs
                        and n not in firsts
                        for n, step in ((n, hashed.steps.get(n)) for n in stateful)
                    ),
                )
                if stateful and not batch
                else None,
                stateful=stateful,
                state=()
                if batch
                else tuple(
                    _state_partitions(
                        n,
                        vertices.get(n.id),
                        hashed.steps.get(n.id),
                        partitions,
                        deduplicators,
                        changelogs,
                        readers,
                    )
                    for n in nodes
                    if n.id in stateful_nodes or n.id in readers
                ),
                partition_by=partition_columns(str(dict(sink.options)["partition_by"]))
                if "partition_by" in dict(sink.options)
                else (),
                rewrites=tuple(r for n in sorted(n.id for n in nodes) for r in rewrites.get(n, ())),
                upsert=_upsert_text(sink, None if batch else cdc_upsert(program, insert)),
                upsert_key=upsert_key(sink) if is_upsert(sink.connector, sink.mode) else None,
                upsert_groups=_upsert_groups(program, insert, sink, changelogs, tree),
                trigger_interval_ms=None if batch else settings.checkpoint_interval_ms,
            )
        )
    return SparkPlan(
        batch=batch,
        shuffle_partitions=partitions,
        shuffle_partitions_reason=reason,
        state_store=state_store,
        queries=tuple(queries),
        exchanges=exchanges,
        step_nodes=dict(tree.step_nodes),
        source_nodes=dict(tree.source_nodes),
        sink_nodes=tuple(graph.sinks),
        stateful=stateful_nodes,
        checkpoint_root=root,
        source_partitions={
            name: tree[node].parallelism for name, node in tree.source_nodes.items()
        },
        broadcast_joins=static_joins,
        temporal_joins=temporal_joins,
        watermark_readers=readers,
        within_deduplicators=deduplicators,
        over_aggregators=overs,
        pattern_matchers=matchers,
        changelog_processors=changelogs,
        rowtime_firsts=firsts,
        join_filters=join_filters,
        functions=_function_lines(program),
        processing_time=tuple(
            f"source '{s.name}': {s.proctime} is current_timestamp(), the start time of "
            "the micro-batch that reads the row (one value per micro-batch, not per row); "
            "Spark keeps no watermark for it, so a window over it runs in update mode (its "
            "count written as it grows) and its state is never dropped"
            for s in program.sources
            if s.proctime is not None
        ),
    )


def _state_partitions(
    node: StreamNode,
    vertex: JobVertex | None,
    step: Step | None,
    partitions: int,
    deduplicators: dict[int, WithinDeduplicator],
    changelogs: dict[int, ChangelogProcessor],
    readers: dict[int, WatermarkReader],
) -> StatePartitions:
    """One operator's state layout; a processor's own key groups or buckets where it
    groups rows by them."""
    processor = deduplicators.get(node.id) or changelogs.get(node.id)
    reader = readers.get(node.id)
    return describe_state(
        node,
        vertex,
        step,
        partitions,
        processor_groups=(processor.keys, processor.key_groups) if processor else None,
        buckets=reader.buckets if reader is not None else None,
    )


def _redistributed_after(
    graph: StreamGraph, node: StreamNode, static_joins: frozenset[int]
) -> str | None:
    """The exchange that redistributes every row reaching ``node``, on every path from it
    (following forwarded edges): a stateful step's own hash exchange, or a partition step
    the program wrote. None where a path reaches a sink or a Spark-local edge first."""
    names: list[str] = []
    pending, seen = [node], {node.id}
    while pending:
        current = pending.pop()
        if not current.out_edges:
            return None  # a sink (or a dead end): these rows are written as they are
        for edge in current.out_edges:
            target = graph.nodes[edge.target_id]
            if edge.partitioner == Partitioner.FORWARD:
                if target.id not in seen:
                    seen.add(target.id)
                    pending.append(target)
            elif (
                edge.implicit
                or target.id in static_joins
                or edge.partitioner in (Partitioner.RESCALE, Partitioner.FORWARD)
            ):
                return None  # no shuffle of its own there either (a RESCALE may coalesce)
            elif edge.partitioner == Partitioner.HASH and target.operator in STATEFUL_OPERATORS:
                names.append(f"the stateful {target.name}'s own exchange")
            else:
                names.append(f"the {edge.partitioner} written before {target.name}")
    return " and ".join(dict.fromkeys(names)) if names else None


def _upsert_groups(
    program: Program,
    insert: InsertDef,
    sink: SinkDef,
    changelogs: dict[int, ChangelogProcessor],
    tree: TransformationTree,
) -> tuple[str, ...] | None:
    """The groups whose rows an upsert sink replaces per micro-batch (a TOP's); none for
    a TOP consuming updates as a processor, whose changelog the sink applies row by row."""
    if not is_upsert(sink.connector, sink.mode):
        return None
    chain = updating_chain(program, insert)
    if chain is not None and tree.step_nodes.get(id(chain.consumer)) in changelogs:
        return None
    found = top_groups(program, insert)
    return found.columns if found is not None else None


def _upsert_text(sink: SinkDef, cdc: CdcUpsert | None = None) -> str | None:
    """What an upsert sink does with each micro-batch (:mod:`flowc.analyze.upsert_sinks`);
    ``cdc``: a CDC source's changes, applied in order."""
    if not is_upsert(sink.connector, sink.mode):
        return None
    key = ", ".join(upsert_key(sink))
    options = dict(sink.options)
    if sink.connector == "postgres":
        text = (
            f"foreachBatch: INSERT INTO {options['table']} ... ON CONFLICT ({key}) DO UPDATE, "
            "one row per key, in one transaction with the micro-batch id in "
            "flowc_sink_batches, so a replayed batch writes nothing twice"
        )
    else:
        text = (
            f"foreachBatch: the {options['format']} table at {options['path']} rewritten per "
            f"micro-batch, one row per ({key}), into a new version folder that _current then "
            "names (replaced atomically, with the micro-batch id), so a replayed batch writes "
            "nothing twice"
        )
    if cdc is None:
        return text
    before = (
        "-U deletes its key (a WHERE stands between: Flink passes -U to the sink)"
        if cdc.before_deletes
        else "-U is skipped (Flink's DropUpdateBefore)"
    )
    return (
        f"{text}; the changes of CDC source '{cdc.source.name}' applied key by key in the "
        f"order Spark hands them over, the last deciding: +I/+U upsert, -D deletes, {before}"
    )


def _function_lines(program: Program) -> tuple[str, ...]:
    """How each call of a Python function runs: one UDF per call, Arrow-optimized or
    pickled, its result checked against the declared type."""
    functions = {f.name: f for f in program.functions}
    lines = []
    for number, call in enumerate(program.function_calls):
        function = functions[call.function]
        params = ", ".join(f"{p.name} {p.type}" for p in function.params)
        kind = "Arrow-optimized Python UDF" if function.arrow else "Python UDF (pickled rows)"
        lines.append(
            f"line {call.span.line}:{call.span.column}: {function.name}({params}) -> "
            f"{function.returns} from {function.target}, as {kind} "
            f"{registered_name(function.name, number)}; each value returned is checked "
            f"against {function.returns}"
        )
    return tuple(lines)


def _static_joins(
    program: Program, tree: TransformationTree, temporal: bool = False
) -> frozenset[int]:
    """The StreamGraph nodes of joins with a table: stateless on Spark (``temporal``: of
    those, the event-time temporal joins)."""
    streams = [v.stream for v in program.views] + [i.stream for i in program.inserts]
    return frozenset(
        tree.step_nodes[id(step)]
        for stream in streams
        for step in stream.steps
        if isinstance(step, DimensionJoinStep)
        and id(step) in tree.step_nodes
        and (step.temporal or not temporal)
    )


def _distinct_rewrites(
    program: Program, tree: TransformationTree, processed: frozenset[int] = frozenset()
) -> dict[int, list[str]]:
    """Per StreamGraph node, how its distinct aggregates and TOPs run on Spark (but the
    TOPs of nodes ``processed``, which run as processors the plan lists)."""
    out: dict[int, list[str]] = {}
    streams = [v.stream for v in program.views] + [i.stream for i in program.inserts]
    for stream in streams:
        for step in stream.steps:
            if id(step) not in tree.step_nodes:
                continue
            if isinstance(step, TopStep | WindowTopStep):
                if tree.step_nodes[id(step)] in processed:
                    continue
                out.setdefault(tree.step_nodes[id(step)], []).append(_top_realization(step.node))
                continue
            if not isinstance(step, AggregateStep | WindowAggregateStep):
                continue
            for item in step.node.items:
                try:
                    _, found = rewrite_distinct(item.expr.tree)
                except UnsupportedDistinct:
                    continue
                out.setdefault(tree.step_nodes[id(step)], []).extend(
                    f"line {item.expr.span.line}: {r.written} runs as {r.spark}: Spark has no "
                    "distinct aggregates on streams; the aggregation's state keeps each "
                    "group's set of distinct values"
                    for r in found
                )
    return out


def _top_realization(node: ast.Top) -> str:
    """How a TOP runs on Spark (codegen_steps.StepWriter.top writes it)."""
    function = "max_by" if node.order[0].descending else "min_by"
    return (
        f"line {node.span.line}: TOP {node.count} runs as {function}(row, order, {node.count}) "
        f"per group, then one row per rank: the aggregation's state keeps each group's "
        f"{node.count} first rows; ties in the order are broken by the rows' other columns"
    )


_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:")


def checkpoint_root(plan: SparkPlan, flag: str | None, base_dir: str) -> str:
    """The folder a run keeps the queries' checkpoints in: ``--checkpoint-dir`` as given
    (the command line wins, as ``--set`` does), else the plan's (``SET checkpoint.dir``;
    relative to ``base_dir``, the job's folder, as every path of the .flow file is), else
    ``.flowc-checkpoints`` in ``base_dir``. ``flowc run``, the generated program and
    the failure log all take it from here, so a run uses the checkpoint the plan shows."""
    if flag:
        return flag
    return join_root(base_dir, plan.checkpoint_root)


def join_root(base_dir: str, root: str) -> str:
    """``root`` under ``base_dir`` unless it is absolute or a URI (``s3a://...``)."""
    if _URI.match(root) or os.path.isabs(root):
        return root
    return os.path.join(base_dir, root)


def checkpoint_segment(name: str) -> str:
    """A name as one folder under the checkpoint root: collision-free and never a path.

    Letters, digits, ``_`` and ``-`` stay; every other character (``/``, ``.``, ``%``,
    non-ASCII) is percent-encoded byte by byte, so ``../x`` cannot leave the root and
    job ``a/b`` + sink ``c`` never meets job ``a`` + sink ``b/c``.
    """
    out = []
    for char in name:
        if char.isascii() and (char.isalnum() or char in "_-"):
            out.append(char)
        else:
            out.extend(f"%{byte:02X}" for byte in char.encode("utf-8", "surrogatepass"))
    return "".join(out) or "%00"


def _watermark_reads(
    program: Program, tree: TransformationTree
) -> dict[int, tuple[Step, WatermarkRead]]:
    """The steps reading CURRENT_WATERMARK, by the node that runs each."""
    found: dict[int, tuple[Step, WatermarkRead]] = {}
    for stream in [*(v.stream for v in program.views), *(i.stream for i in program.inserts)]:
        for step in steps_within(stream):
            read = reads_watermark(step)
            if read is not None:
                found[tree.step_nodes[id(step)]] = (step, read)
    return found


def _join_filters(
    program: Program,
    tree: TransformationTree,
    graph: StreamGraph,
    changelogs: dict[int, ChangelogProcessor],
) -> dict[int, JoinFilter]:
    """The INNER stream-stream JOINs a streaming query runs with part of their ON after
    the join (:func:`~flowc.spark.streaming.join_filter`), by node id; a JOIN run as a
    changelog processor is not Spark's join."""
    found: dict[int, JoinFilter] = {}
    if not any(
        isinstance(step, JoinStep) and step.node.kind == JoinKind.INNER
        for stream in [*(v.stream for v in program.views), *(i.stream for i in program.inserts)]
        for step in steps_within(stream)
    ):
        return found
    lineage = Lineage(program)
    for insert in program.inserts:
        for step in lineage.steps(insert.stream):
            if not isinstance(step, JoinStep) or id(step) not in tree.step_nodes:
                continue
            node = tree.step_nodes[id(step)]
            if node in found or node in changelogs or node not in graph.nodes:
                continue
            split = join_filter(
                step, lineage.columns_before(insert, step), lineage.watermarked(step.inputs[0])
            )
            if split is not None:
                found[node] = split
    return found


def _join_filter_text(node: StreamNode, split: JoinFilter) -> str:
    """What Spark's join runs of the ON, and what it tests after the join, and why."""
    columns = ", ".join(f"'{c}'" for c in split.columns)
    return (
        f"{node.name} (line {node.span.line}): Spark joins ON {spark_text(split.kept)} and "
        f"tests {' AND '.join(spark_text(m) for m in split.moved)} right after the join: a "
        f"bound on {columns} (no watermark) in Spark's join condition would evict rows by "
        "their WATERMARK column too early (E0760's case); for an INNER JOIN the filter "
        "after it means the same"
    )


def _within_deduplicators(
    program: Program, tree: TransformationTree, graph: StreamGraph, batch: bool
) -> dict[int, WithinDeduplicator]:
    """The DEDUPLICATE ... WITHIN steps a query runs, by node id, each with its event time:
    the one column with a watermark before it (the streaming rules refuse the others,
    E0707 and E0708)."""
    found: dict[int, WithinDeduplicator] = {}
    if not any(
        isinstance(step, DeduplicateStep) and step.node.within is not None
        for stream in [*(v.stream for v in program.views), *(i.stream for i in program.inserts)]
        for step in steps_within(stream)
    ):
        return found
    lineage = Lineage(program)
    for insert in program.inserts:
        for step in lineage.steps(insert.stream):
            if not isinstance(step, DeduplicateStep) or step.node.within is None:
                continue
            node = tree.step_nodes[id(step)]
            if node in found or node not in graph.nodes:
                continue
            columns = lineage.columns_before(insert, step)
            millis = interval_millis(step.node.within)
            if len(columns) != 1 or millis is None:
                continue
            (column,) = columns
            pandas, why = within_form(step.schema)
            found[node] = WithinDeduplicator(
                node_id=node,
                span=step.span,
                keys=step.keys,
                column=column,
                within=" ".join(step.node.within.text.split()),
                within_ms=millis,
                key_groups=graph.nodes[node].max_parallelism
                or compute_default_max_parallelism(graph.nodes[node].parallelism),
                streaming=not batch,
                pandas=pandas,
                form_why=why,
            )
    return found


def _changelog_processors(
    program: Program, tree: TransformationTree, graph: StreamGraph
) -> dict[int, ChangelogProcessor]:
    """The steps of the INSERTs' updating chains, by node id (streaming only)."""
    found: dict[int, ChangelogProcessor] = {}
    for insert in program.inserts:
        joined = cdc_join(program, insert)
        node = tree.step_nodes.get(id(joined.join)) if joined is not None else None
        if joined is not None and node is not None and node in graph.nodes:
            found[node] = ChangelogProcessor(
                node_id=node,
                span=joined.join.span,
                kind="JOIN",
                keys=tuple(a for a, _ in joined.pairs),
                consumer=True,
                key_groups=graph.nodes[node].max_parallelism
                or compute_default_max_parallelism(graph.nodes[node].parallelism),
                other=f"the changes of {joined.origin}",
                row_keys=join_row_key(program, insert, joined),
                outer=joined.kind.value if any(joined.preserved) else "",
            )
            for made_by in joined.producers:
                made = tree.step_nodes.get(id(made_by)) if made_by is not None else None
                if made_by is None or made is None or made not in graph.nodes:
                    continue
                found[made] = ChangelogProcessor(
                    node_id=made,
                    span=made_by.span,
                    kind="TOP" if isinstance(made_by, TopStep) else "AGGREGATE",
                    keys=made_by.keys,
                    consumer=False,
                    key_groups=graph.nodes[made].max_parallelism
                    or compute_default_max_parallelism(graph.nodes[made].parallelism),
                    other=f"the JOIN on line {joined.join.span.line}",
                    feeds_join=True,
                )
        chain = updating_chain(program, insert)
        if chain is None:
            continue
        producer = chain.producer
        origin = (
            f"the changes of source '{chain.source}' (debezium-json)"
            if producer is None
            else f"the step on line {producer.span.line}"
        )
        steps: list[tuple[Step, bool, str]] = [(chain.consumer, True, origin)]
        consumer_kind = "TOP" if isinstance(chain.consumer, TopStep) else "AGGREGATE"
        if producer is not None:
            steps.append(
                (producer, False, f"the {consumer_kind} on line {chain.consumer.span.line}")
            )
        identity = chain.row_keys
        for step, consumer, other in steps:
            node = tree.step_nodes[id(step)]
            if node not in graph.nodes:
                continue
            found[node] = ChangelogProcessor(
                node_id=node,
                span=step.span,
                kind="TOP" if isinstance(step, TopStep) else "AGGREGATE",
                keys=step.keys,
                consumer=consumer,
                key_groups=graph.nodes[node].max_parallelism
                or compute_default_max_parallelism(graph.nodes[node].parallelism),
                other=other,
                row_keys=identity if consumer else (),
            )
    return found


def _rowtime_firsts(
    program: Program, tree: TransformationTree, graph: StreamGraph
) -> dict[int, RowtimeFirst]:
    """The TOPs a query runs that keep each group's first row by event time, the time
    their only BY expression (:func:`~flowc.graph.changelog.rowtime_first_tops`), by node
    id (streaming only). With a second BY expression Flink's runtime emits updates and
    drops no late row: Spark's min_by then gives its final table."""
    tops = rowtime_first_tops(program, alone=True)
    found: dict[int, RowtimeFirst] = {}
    if not tops:
        return found
    for stream in [*(v.stream for v in program.views), *(i.stream for i in program.inserts)]:
        for step in stream.steps:
            if not isinstance(step, TopStep) or id(step) not in tops:
                continue
            node = tree.step_nodes.get(id(step))
            if node is None or node not in graph.nodes or graph.nodes[node].changelog_mode != "I":
                continue
            first = step.node.order[0].expr.tree
            assert isinstance(first, exp.Column)  # rowtime_first's
            found[node] = RowtimeFirst(
                node_id=node,
                span=step.span,
                keys=step.keys,
                column=first.name,
                order=", ".join(
                    f"{' '.join(i.expr.text.split())} {'DESC' if i.descending else 'ASC'}"
                    for i in step.node.order
                ),
            )
    return found


def _over_aggregators(
    program: Program, tree: TransformationTree, graph: StreamGraph, batch: bool
) -> dict[int, OverAggregator]:
    """The OVER steps a query runs, by node id."""
    found: dict[int, OverAggregator] = {}
    for stream in [*(v.stream for v in program.views), *(i.stream for i in program.inserts)]:
        for step in steps_within(stream):
            if not isinstance(step, OverStep):
                continue
            node = tree.step_nodes.get(id(step))
            if node is None or node in found or node not in graph.nodes:
                continue
            over = step.node
            if over.preceding.text == "UNBOUNDED":
                preceding = -1  # LAG's frame: the processor keeps its largest offset's rows
            elif over.rows:
                preceding = int(over.preceding.text)
            else:
                millis = interval_millis(over.preceding)
                assert millis is not None  # the lowering takes only whole intervals
                preceding = millis
            frame = (
                f"{'ROWS' if over.rows else 'RANGE'} BETWEEN "
                f"{' '.join(over.preceding.text.split())} PRECEDING AND CURRENT ROW"
            )
            found[node] = OverAggregator(
                node_id=node,
                span=step.span,
                keys=step.keys,
                column=over.order.value,
                rows=over.rows,
                preceding=preceding,
                frame=frame,
                streaming=not batch,
            )
    return found


def _pattern_matchers(
    program: Program, tree: TransformationTree, graph: StreamGraph, batch: bool
) -> dict[int, PatternMatcher]:
    """The MATCH_RECOGNIZE steps a query runs, by node id."""
    found: dict[int, PatternMatcher] = {}
    for stream in [*(v.stream for v in program.views), *(i.stream for i in program.inserts)]:
        for step in steps_within(stream):
            if not isinstance(step, MatchStep):
                continue
            node = tree.step_nodes.get(id(step))
            if node is None or node in found or node not in graph.nodes:
                continue
            found[node] = PatternMatcher(
                node_id=node,
                span=step.span,
                keys=step.keys,
                column=step.node.order.value,
                streaming=not batch,
            )
    return found


def _upstream(graph: StreamGraph, sink_id: int) -> list[StreamNode]:
    """The nodes one query runs: everything the sink reads from, in node-id order."""
    seen = {sink_id}
    queue = deque([sink_id])
    while queue:
        for edge in graph.nodes[queue.popleft()].in_edges:
            if edge.source_id not in seen:
                seen.add(edge.source_id)
                queue.append(edge.source_id)
    return [graph.nodes[i] for i in sorted(seen)]


def _shuffle_partitions(stateful: list[StreamNode], conf: dict[str, str]) -> tuple[int, str]:
    if "spark.sql.shuffle.partitions" in conf:
        value = int(conf["spark.sql.shuffle.partitions"])
        return value, "set with SET spark.sql.shuffle.partitions"
    if not stateful:
        return 1, "no stateful operator: only explicit repartitions shuffle, with their own counts"
    parallelism = max(n.parallelism for n in stateful)  # one value for the job's every query
    names = ", ".join(sorted({n.name for n in stateful}))
    return (
        parallelism,
        f"the parallelism of the stateful operators ({names}); key groups would cost a state "
        "store each per micro-batch",
    )


def _exchange(
    edge: StreamEdge,
    graph: StreamGraph,
    partitions: int,
    static_joins: frozenset[int],
    minimal: bool = True,
    temporal_joins: frozenset[int] = frozenset(),
    hashed: _HashedOutputs | None = None,
) -> SparkExchange:
    """The one place an exchange is decided: Flink's ship strategy → Spark's operation.
    ``minimal`` (SET exchanges = 'minimal', the default): Flink's own REBALANCE, there only
    because the parallelism changes, runs no shuffle where Spark needs none.
    ``hashed``: the key lists each node's rows are already hash-partitioned on
    (:class:`_HashedOutputs`), which a stateful consumer on exactly those keys reuses; asked
    only there, so a node no stateful exchange reads is never worked out."""
    producer = graph.nodes[edge.source_id]
    consumer = graph.nodes[edge.target_id]
    p = consumer.parallelism
    keys = edge.keys
    strategy = edge.partitioner

    def make(
        kind: ExchangeKind, count: int, spark: str, partitioning: str, shuffle: bool, why: str
    ) -> SparkExchange:
        return SparkExchange(
            producer.name,
            consumer.name,
            producer.id,
            consumer.id,
            strategy,
            keys,
            kind,
            count,
            spark,
            partitioning,
            shuffle,
            why,
        )

    def coalesce(why: str) -> SparkExchange:
        partitioning = f"coalesced to {p} partition{'s' if p != 1 else ''}"
        return make(ExchangeKind.COALESCE, p, f"coalesce({p})", partitioning, False, why)

    key_list = ", ".join(keys)
    if strategy == Partitioner.HASH and consumer.id in temporal_joins:
        return make(
            ExchangeKind.STATIC_JOIN,
            partitions,
            f"join({key_list}, time in [version_time, next version_time)) with "
            "broadcast(table's versions)",
            "BroadcastExchange of the table, the stream not exchanged",
            False,
            "a stream-static join: when the job starts each version of the table gets its "
            "end, the next version time of its key (lead over a window partitioned by the "
            "key), and every task joins its rows of each micro-batch with the version valid "
            "at their time, keeping no state; Flink's TemporalJoin hash-partitions both "
            "inputs on the key and keeps both in state until the watermark passes",
        )
    if strategy == Partitioner.HASH and consumer.id in static_joins:
        return make(
            ExchangeKind.STATIC_JOIN,
            partitions,
            f"join({key_list}) with broadcast(table)",
            "BroadcastExchange of the table, the stream not exchanged",
            False,
            "a stream-static join: every task gets the whole table and joins its rows of "
            "each micro-batch with it, keeping no state; Flink hash-partitions both inputs "
            "of its join",
        )
    if strategy == Partitioner.HASH and consumer.operator in STATEFUL_OPERATORS:
        step = hashed.steps.get(consumer.id) if hashed is not None else None
        window = isinstance(step, WindowTopStep) or (
            isinstance(step, WindowAggregateStep) and step.window.kind != WindowKind.SESSION
        )
        if window:  # Spark groups by the window too: each window of a key hashed apart
            hashed_keys = ", ".join((*keys, "window"))
            return make(
                ExchangeKind.STATEFUL,
                partitions,
                f"groupBy({', '.join((*keys, 'window'))})",
                f"HashPartitioning([{hashed_keys}], {partitions})",
                True,
                f"the stateful {consumer.name}'s own exchange: rows with equal keys and "
                "window meet in one state partition (Flink keys by the keys alone)",
            )
        if not keys and isinstance(step, WindowAggregateStep):  # a session without a key
            return make(
                ExchangeKind.STATEFUL,
                partitions,
                "groupBy(constant, session)",
                f"HashPartitioning([constant], {partitions})",
                True,
                "a session window without a key groups every row under one constant key: "
                "one partition gets them all, as Flink's windowAll sends every row to its "
                "single subtask",
            )
        if not keys:
            return make(
                ExchangeKind.STATEFUL,
                1,
                "groupBy() (global)",
                "SinglePartition",
                True,
                "a global aggregate gathers every row in one partition, as Flink's windowAll "
                "sends every row to its single subtask",
            )
        operation = "join" if consumer.operator == Operator.JOIN else "groupBy"
        windowed = consumer.operator in (Operator.WINDOW, Operator.WINDOW_RANK)
        if (
            not windowed  # a session's state is keyed by the session too
            and hashed is not None
            and _names(keys) in hashed.of(producer.id)
        ):
            return make(
                ExchangeKind.STATEFUL,
                partitions,
                f"{operation}({key_list})",
                f"HashPartitioning([{key_list}], {partitions}) of {producer.name}, reused",
                False,
                f"{producer.name}'s rows are hash-partitioned on exactly ({key_list}) in "
                f"{partitions} partitions already: Spark's EnsureRequirements finds the "
                f"stateful {consumer.name}'s StatefulOpClusteredDistribution satisfied and "
                "adds no exchange",
            )
        return make(
            ExchangeKind.STATEFUL,
            partitions,
            f"{operation}({key_list})",
            f"HashPartitioning([{key_list}], {partitions})",
            True,
            f"the stateful {consumer.name}'s own exchange: rows with equal keys meet in one "
            "state partition, as key groups do in Flink",
        )
    if strategy == Partitioner.HASH:
        return make(
            ExchangeKind.HASH,
            partitions,
            f"repartition({partitions}, {key_list})",
            f"HashPartitioning([{key_list}], {partitions})",
            True,
            "KEY BY before a stateless step: hash-partition on the key so the rows of one key "
            "stay together up to the stateful step",
        )
    if strategy == Partitioner.REBALANCE and edge.implicit and minimal:
        change = f"{producer.parallelism} -> {p}"
        later = _redistributed_after(graph, consumer, static_joins)
        if later is not None:
            return make(
                ExchangeKind.NONE,
                producer.parallelism,
                "none",
                "the producer's partitions",
                False,
                f"Flink rebalances only because the parallelism changes ({change}); {later} "
                "redistributes these rows anyway, so Spark does not shuffle them twice",
            )
        if p <= producer.parallelism:
            return coalesce(
                f"Flink rebalances only because the parallelism narrows ({change}): coalesce "
                "merges neighbouring partitions without a shuffle"
            )
        return make(
            ExchangeKind.ROUND_ROBIN,
            p,
            f"repartition({p})",
            f"RoundRobinPartitioning({p})",
            True,
            f"Flink rebalances because the parallelism widens ({change}): Spark cannot split "
            "partitions without a shuffle",
        )
    if strategy == Partitioner.REBALANCE:
        return make(
            ExchangeKind.ROUND_ROBIN,
            p,
            f"repartition({p})",
            f"RoundRobinPartitioning({p})",
            True,
            f"round-robin over the consumer's {p} partitions, as Flink's REBALANCE",
        )
    if strategy == Partitioner.RESCALE:
        if p <= producer.parallelism:
            return coalesce("narrowing RESCALE merges neighbouring partitions without a shuffle")
        return make(
            ExchangeKind.ROUND_ROBIN,
            p,
            f"repartition({p})",
            f"RoundRobinPartitioning({p})",
            True,
            "widening RESCALE: Spark cannot split partitions without a shuffle",
        )
    if strategy == Partitioner.GLOBAL:
        return make(
            ExchangeKind.SINGLE,
            1,
            "repartition(1)",
            "SinglePartition",
            True,
            "every row to one consumer, as Flink's GLOBAL sends all to subtask 0",
        )
    if strategy == Partitioner.SHUFFLE:
        return make(
            ExchangeKind.RANDOM,
            p,
            f"repartition({p}, rand())",
            f"HashPartitioning([rand()], {p})",
            True,
            "random partitioning, as Flink's SHUFFLE",
        )
    if strategy == Partitioner.BROADCAST:
        return make(
            ExchangeKind.BROADCAST,
            p,
            f"crossJoin(range({p})).repartition({p}, subtask)",
            f"HashPartitioning([subtask], {p})",
            True,
            f"every row copied to each of the {p} consumer partitions, as Flink's BROADCAST",
        )
    if strategy == Partitioner.CUSTOM:
        return make(
            ExchangeKind.CUSTOM,
            p,
            f"repartition({p}, {key_list})",
            f"HashPartitioning([{key_list}], {p})",
            True,
            "PARTITION BY: partitions chosen from the expression's value",
        )
    return make(ExchangeKind.NONE, p, "none", "unchanged", False, "rows stay in their partition")


#: The aggregations whose input exchange Spark's ReuseExchangeAndSubquery may share.
_REUSABLE = frozenset({Operator.KEYED_AGGREGATE, Operator.WINDOW})


def _reused(
    exchanges: list[SparkExchange], graph: StreamGraph, steps: dict[int, Step]
) -> list[SparkExchange]:
    """The query's exchanges, a repeated one marked as Spark's ReusedExchange. Spark's
    ReuseExchangeAndSubquery (a physical preparation rule) replaces an Exchange whose
    canonicalized plan equals one already in the query with a ReusedExchange, which reads
    the first one's shuffle output: no second shuffle. Modelled for the one case whose
    plans are equal by construction: two aggregations written alike (the same GROUP BY
    keys, window and aggregate calls, aliases aside) over the same producer, their rows
    filtered nowhere after them (Spark would push a filter on a key below one of them)."""
    first: dict[tuple[object, ...], SparkExchange] = {}
    out = []
    for e in exchanges:
        signature = _reuse_signature(e, graph, steps)
        if signature is None:
            out.append(e)
            continue
        earlier = first.setdefault(signature, e)
        if earlier is e:
            out.append(e)
            continue
        out.append(
            replace(
                e,
                partitioning=f"{e.partitioning}: ReusedExchange of {earlier.producer} -> "
                f"{earlier.consumer}",
                shuffle=False,
                why=f"{e.consumer} aggregates {e.producer}'s rows exactly as {earlier.consumer} "
                "does: Spark's ReuseExchangeAndSubquery finds the two exchanges equal and "
                f"reads {earlier.consumer}'s shuffle output again (each keeps its own state)",
            )
        )
    return out


def _reuse_signature(
    e: SparkExchange, graph: StreamGraph, steps: dict[int, Step]
) -> tuple[object, ...] | None:
    """What makes two aggregations' input exchanges equal plans in Spark; None where flowc
    does not model it."""
    consumer = graph.nodes[e.consumer_id]
    step = steps.get(consumer.id)
    if (
        not e.shuffle
        or e.kind != ExchangeKind.STATEFUL
        or consumer.operator not in _REUSABLE
        or step is None
        or not isinstance(step, AggregateStep | WindowAggregateStep)
        or _filtered_after(graph, consumer, steps)
    ):
        return None
    window = (
        None
        if step.window is None
        else (step.window.kind, tuple(a.tree.sql() for a in step.window.args))
    )
    calls = tuple(item.expr.tree.sql() for item in step.node.items)
    return (e.producer_id, _names(e.keys), e.partitions, consumer.operator, window, calls)


def _filtered_after(graph: StreamGraph, node: StreamNode, steps: dict[int, Step]) -> bool:
    """Whether a WHERE follows ``node`` before the next exchange (forwarded edges only)."""
    pending, seen = [node], {node.id}
    while pending:
        for edge in pending.pop().out_edges:
            target = graph.nodes[edge.target_id]
            if edge.partitioner != Partitioner.FORWARD or target.id in seen:
                continue
            step = steps.get(target.id)
            if isinstance(step, WhereStep):
                return True
            seen.add(target.id)
            pending.append(target)
    return False


#: A key Spark can match to a column: a plain (unqualified) name.
_PLAIN_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _names(keys: tuple[str, ...]) -> tuple[str, ...]:
    """Keys as column names compared the way Spark resolves them (case-insensitively)."""
    return tuple(k.lower() for k in keys)


def _node_steps(program: Program, tree: TransformationTree) -> dict[int, Step]:
    """The program step each StreamGraph node runs, where one does."""
    out: dict[int, Step] = {}
    pending = [v.stream for v in program.views] + [i.stream for i in program.inserts]
    while pending:
        stream = pending.pop()
        for step in stream.steps:
            node = tree.step_nodes.get(id(step))
            if node is not None:
                out.setdefault(node, step)
            pending.extend(step.inputs)
    return out


class _HashedOutputs:
    """Which key lists each node's output rows are hash-partitioned on, as Spark's physical
    plan says (``outputPartitioning``), so that an exchange Spark will not run is not
    counted. Spark's EnsureRequirements adds a shuffle before a stateful operator only
    where its input does not satisfy the operator's StatefulOpClusteredDistribution: a
    HashPartitioning on exactly the operator's keys, in that order, in
    ``spark.sql.shuffle.partitions`` partitions (a subset of the keys does not do; checked
    on Spark, tests/test_run.py). Modelled: a keyed (not windowed) aggregation,
    deduplication or TOP keeps its keys' partitioning, a stream-stream join both sides'
    keys (Spark's PartitioningCollection), a join with a table the stream's (a broadcast
    join keeps its streamed side's), WHERE keeps it, SELECT/RENAME/DROP/EXTEND/SET keep a key
    column passed through as it is (Spark's alias-aware Project). A windowed step's
    partitioning includes the window, which its output does not: none. Anything else:
    none, so a shuffle is planned."""

    def __init__(
        self, graph: StreamGraph, steps: dict[int, Step], static_joins: frozenset[int]
    ) -> None:
        self.graph = graph
        self.steps = steps
        self.static_joins = static_joins
        self.memo: dict[int, frozenset[tuple[str, ...]]] = {}

    def of(self, node_id: int) -> frozenset[tuple[str, ...]]:
        if node_id not in self.memo:
            self.memo[node_id] = frozenset()  # a cycle (there is none) finds nothing
            self.memo[node_id] = self._compute(self.graph.nodes[node_id])
        return self.memo[node_id]

    def _compute(self, node: StreamNode) -> frozenset[tuple[str, ...]]:
        step = self.steps.get(node.id)
        if node.kind == NodeKind.SOURCE or step is None:
            return frozenset()
        edges = node.in_edges
        if node.id in self.static_joins:
            found = frozenset(k for e in edges for k in self.of(e.source_id))
        elif node.operator in STATEFUL_OPERATORS:
            if node.operator in (Operator.WINDOW, Operator.WINDOW_RANK):
                return frozenset()
            found = frozenset(
                _names(e.keys) for e in edges if e.partitioner == Partitioner.HASH and e.keys
            )
        elif len(edges) == 1 and edges[0].partitioner == Partitioner.FORWARD:
            found = _through(step, self.of(edges[0].source_id))
        else:
            return frozenset()
        if not found:
            return found
        columns = [c.name.lower() for c in step.schema]
        return frozenset(
            keys
            for keys in found
            if all(_PLAIN_NAME.match(k) and columns.count(k) == 1 for k in keys)
        )


def _through(step: Step, hashed: frozenset[tuple[str, ...]]) -> frozenset[tuple[str, ...]]:
    """The partitionings a row-wise step passes on, its key columns renamed as it renames
    them; a key it drops or computes anew ends that partitioning."""
    if not hashed or isinstance(step, WhereStep):
        return hashed
    if isinstance(step, SelectStep):
        renamed: dict[str, str] = {}
        for item in step.node.items:
            tree = item.expr.tree
            if isinstance(tree, exp.Column) and not tree.table:
                name = (item.alias.value if item.alias is not None else tree.name).lower()
                renamed.setdefault(tree.name.lower(), name)
        return frozenset(
            tuple(renamed[k] for k in keys) for keys in hashed if all(k in renamed for k in keys)
        )
    if isinstance(step, ExtendStep):
        redefined = {
            (i.alias.value if i.alias is not None else i.expr.text).lower() for i in step.node.items
        }
        return frozenset(keys for keys in hashed if not redefined & set(keys))
    if isinstance(step, SetStep):  # a key set anew, as EXTEND's
        redefined = {i.column.value.lower() for i in step.node.items}
        return frozenset(keys for keys in hashed if not redefined & set(keys))
    if isinstance(step, DropStep):
        dropped = {c.value.lower() for c in step.node.columns}
        return frozenset(keys for keys in hashed if not dropped & set(keys))
    if isinstance(step, RenameStep):
        renames = {i.old.value.lower(): i.new.value.lower() for i in step.node.items}
        return frozenset(tuple(renames.get(k, k) for k in keys) for keys in hashed)
    return frozenset()


def _trigger(interval_ms: int | None, batch: bool) -> str:
    if batch:
        return "batch: one run over the bounded input, every result emitted at its end"
    if interval_ms is None:
        return "default: the next micro-batch starts when the previous one ends"
    return f"processingTime {interval_ms} ms: one micro-batch, and so one checkpoint, per interval"
