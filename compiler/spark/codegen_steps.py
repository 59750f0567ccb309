"""The generated program's streams: each step of a view or INSERT as DataFrame calls, with
the exchange the Spark plan chose on every edge into an operator."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from sqlglot import exp

from flowc import ast
from flowc.analyze.over_steps import flink_avg, lag_call
from flowc.catalog import OP_COLUMN
from flowc.program import (
    WATERMARK_COLUMN,
    AggregateStep,
    Column,
    DeduplicateStep,
    DimensionJoinStep,
    DropStep,
    ExplodeStep,
    ExtendStep,
    FromSideOutput,
    FromSource,
    FromSourceErrors,
    FromView,
    JoinStep,
    KeyByStep,
    MatchStep,
    Origin,
    OverStep,
    PartitionByStep,
    PartitionStep,
    RenameStep,
    RouteStep,
    SelectStep,
    SetStep,
    Step,
    Stream,
    TopStep,
    UnionStep,
    WhereStep,
    WindowAggregateStep,
    WindowTopStep,
    cdc_join,
)
from flowc.spark.changelog_chains import changelog_call
from flowc.spark.codegen_base import ProgramText
from flowc.spark.match_codegen import match_call
from flowc.spark.spark_plan import ExchangeKind
from flowc.sql.spark_sql import (
    UnsupportedOnSpark,
    aggregate_sql,
    interval_millis,
    interval_text,
    quote_name,
    reversed_order,
    select_columns,
    spark_text,
    sql_of,
    with_call_names,
)
from flowc.sql.sqltypes import type_text
from flowc.vocabulary import JoinKind, WindowKind

#: Spark refuses a streaming session window with no other grouping key (a literal key is
#: optimized away first): one constant key Spark cannot fold is Flink's single stream of
#: global sessions (``time``: the window's time column, quoted).
_GLOBAL_SESSION_KEY = (
    "F.coalesce(F.col({time!r}).cast('long') * 0, F.lit(0)).alias('__flowc_global')"
)

#: Types whose equal values are the same value, so a group's key of one of them is the same
#: in every row of the group (not FLOAT or DOUBLE: Spark groups -0.0 with 0.0).
_EXACT_TYPES = frozenset(
    (
        "TINYINT",
        "SMALLINT",
        "INT",
        "BIGINT",
        "BOOLEAN",
        "DATE",
        "TIMESTAMP",
        "TIMESTAMP_NTZ",
        "STRING",
    )
)


def tie_breaks(top: ast.Top, keys: Sequence[str], columns: Sequence[Column]) -> list[Column]:
    """The columns that break a TOP's ties, after its order: every column but a MAP (Spark
    cannot order one), a column the order already compares, and a group key of an exact
    type (the same in the whole group). Each comparison is per input row in ``max_by``,
    so the fewer the cheaper; rows still tied are equal in every orderable column."""
    ordered = {
        o.expr.tree.name
        for o in top.order
        if isinstance(o.expr.tree, exp.Column) and not o.expr.tree.table
    }
    constant = set(keys)
    return [
        c
        for c in columns
        if not c.type.startswith("MAP")
        and c.name not in ordered
        and not (c.name in constant and (c.type in _EXACT_TYPES or c.type.startswith("DECIMAL(")))
    ]


#: The join type Spark's ``DataFrame.join`` takes for each kind of JOIN.
_SPARK_JOIN_TYPES = {
    JoinKind.INNER: "inner",
    JoinKind.LEFT: "left_outer",
    JoinKind.RIGHT: "right_outer",
    JoinKind.FULL: "full_outer",
}


class StepWriter(ProgramText):
    """Writes streams and their steps."""

    def origin(self, stream: Stream) -> str:
        origin = stream.origin
        if isinstance(origin, FromSource | FromView):
            return self.names[f"stream:{origin.name}"]
        if isinstance(origin, FromSourceErrors):
            return self.names[f"errors:{origin.source}"]
        return self.names[f"side:{origin.view}.{origin.output}"]

    def origin_parts(self, stream: Stream) -> list[tuple[str, int]]:
        """The origin's DataFrame(s), each with the StreamNode that produces its rows: a view
        that ends in UNION ALL has one part per input, each with its own exchange."""
        origin = stream.origin
        if isinstance(origin, FromSource | FromSourceErrors):
            node = self.spark_plan.source_nodes[_relation(origin)]
            return [(self.origin(stream), node)]
        if isinstance(origin, FromView):
            return list(self.tails[origin.name])
        return list(self.tails[f"{origin.view}.{origin.output}"])

    def stream(
        self, stream: Stream, variable: str, view_name: str | None, sink_node: int | None
    ) -> None:
        """Emit a stream's steps. Before each operator, every part of the input gets the
        exchange the Spark plan decided for its edge; nothing is decided here."""
        parts = self.origin_parts(stream)
        first, node = parts[0]
        self.w(f"{variable} = {first}", 1)
        if not isinstance(stream.origin, FromSideOutput):
            self.w(f"{variable} = {variable}.alias({_relation(stream.origin)!r})", 1)
        parts[0] = (variable, node)
        # A view may end with a partition step: it applies on the reader's first edge.
        origin = stream.origin
        pending = self.view_partitions.get(origin.name) if isinstance(origin, FromView) else None
        for step in stream.steps:
            if isinstance(step, KeyByStep | PartitionStep | PartitionByStep):
                pending = step
                continue
            if isinstance(step, UnionStep):
                for other in step.inputs:
                    parts += self.origin_parts(other)
                continue
            node = self.spark_plan.step_nodes[id(step)]
            self.gather(variable, parts, node, pending)
            pending = None
            self.step(step, variable, view_name)
            parts = [(variable, node)]
            if isinstance(step, RouteStep) and view_name is not None:
                for branch in step.node.branches:
                    side = self.names[f"side:{view_name}.{branch.name.value}"]
                    self.tails[f"{view_name}.{branch.name.value}"] = [(side, node)]
        if sink_node is not None:
            self.gather(variable, parts, sink_node, pending)
        elif view_name is not None:
            self.tails[view_name] = parts
            self.view_partitions[view_name] = pending

    def gather(
        self, df: str, parts: list[tuple[str, int]], consumer: int, pending: Step | None
    ) -> None:
        """``df`` = the parts, each through the exchange on its edge into ``consumer``."""
        exchanged = [self.exchanged(part, node, consumer, pending) for part, node in parts]
        if exchanged[0] != df:
            self.w(f"{df} = {exchanged[0]}", 1)
        for other in exchanged[1:]:
            self.w(f"{df} = {df}.unionByName({other})", 1)

    def combined(self, parts: list[tuple[str, int]], consumer: int, pending: Step | None) -> str:
        """The parts, each exchanged on its edge into ``consumer``, as one DataFrame."""
        exchanged = [self.exchanged(part, node, consumer, pending) for part, node in parts]
        return "".join([exchanged[0], *(f".unionByName({other})" for other in exchanged[1:])])

    def exchanged(self, df: str, producer: int, consumer: int, pending: Step | None) -> str:
        """``df`` through the Spark plan's exchange on the edge producer → consumer."""
        exchange = self.spark_plan.exchange(producer, consumer)
        if exchange is None:
            return df
        kind, p = exchange.kind, exchange.partitions
        if kind in (ExchangeKind.NONE, ExchangeKind.STATEFUL, ExchangeKind.STATIC_JOIN):
            return df
        if kind is ExchangeKind.HASH:
            keys = ", ".join(f"F.expr({quote_name(k)!r})" for k in exchange.keys)
            return f"{df}.repartition({p}, {keys})"
        if kind is ExchangeKind.CUSTOM:
            assert isinstance(pending, PartitionByStep)  # the plan's CUSTOM edge is its own
            return f"{df}.repartition({p}, F.expr({sql_of(pending.node.expr)!r}))"
        if kind is ExchangeKind.ROUND_ROBIN:
            return f"{df}.repartition({p})"
        if kind is ExchangeKind.COALESCE:
            return f"{df}.coalesce({p})"
        if kind is ExchangeKind.SINGLE:
            return f"{df}.repartition(1)"
        if kind is ExchangeKind.RANDOM:
            return f"{df}.repartition({p}, F.rand())"
        assert kind is ExchangeKind.BROADCAST
        return (
            f"{df}.crossJoin(spark.range({p}).withColumnRenamed('id', '__flowc_subtask'))"
            f".repartition({p}, '__flowc_subtask').drop('__flowc_subtask')"
        )

    def items_of(self, step: SelectStep | ExtendStep) -> tuple[ast.SelectItem, ...]:
        """The step's items, each column unqualified after a CDC join (``c.name`` read as
        ``name``: the join processor's rows have no relations, and their names are unique)."""
        if id(step) not in self.unqualified:
            return step.node.items
        items = []
        for item in step.node.items:
            tree = item.expr.tree.copy()
            for column in tree.find_all(exp.Column):
                column.set("table", None)
            items.append(replace(item, expr=replace(item.expr, tree=tree)))
        return tuple(items)

    def step(self, step: Step, df: str, view_name: str | None) -> None:
        """The step's PySpark lines, by its class (:data:`STEP_WRITERS`)."""
        STEP_WRITERS[type(step)](self, step, df, view_name)

    def read_watermark(self, step: Step, df: str) -> bool:
        """The processor giving each row its micro-batch's watermark, where the plan puts
        one in front of the step (a CURRENT_WATERMARK reader); whether it does."""
        reader = self.spark_plan.watermark_readers.get(self.spark_plan.step_nodes[id(step)])
        if reader is None:
            return False
        self.w(
            f"{df} = read_watermark({df}, {reader.column!r}, {reader.on_time!r}, {reader.buckets})",
            1,
        )
        return True

    def where(self, step: WhereStep, df: str, view_name: str | None) -> None:
        first = self.marking.get(id(step))
        if first is not None:
            # Into an upsert sink after an AGGREGATE: each row's key stays in the batch,
            # '-D' (deleted by the sink) where the filter fails ('+U' else).
            kept = f"F.coalesce(F.expr({sql_of(step.node.condition)!r}), F.lit(False))"
            if not first:
                kept = f"(F.col({OP_COLUMN!r}) == '+U') & {kept}"
            self.w(
                f"{df} = {df}.withColumn({OP_COLUMN!r}, "
                f"F.when({kept}, F.lit('+U')).otherwise(F.lit('-D')))",
                1,
            )
            return
        condition = f"{df}.where(F.expr({sql_of(step.node.condition)!r}))"
        if self.read_watermark(step, df):
            condition += f".drop({WATERMARK_COLUMN!r})"
        self.w(f"{df} = {condition}", 1)

    def select(self, step: SelectStep, df: str, view_name: str | None) -> None:
        names = [c.name for c in step.schema]
        items = [
            f"F.col({quote_name(name)!r})"
            if item is None
            else f"F.expr({aggregate_sql(item.expr)!r}).alias({name!r})"
            for item, name in select_columns(self.items_of(step), names)
        ]
        if id(step) in self.change_reading:
            items.append(f"F.col({OP_COLUMN!r})")  # each change keeps its kind
        self.read_watermark(step, df)  # its column is not selected: SELECT * lists the input's
        self.w(f"{df} = {df}.select({', '.join(items)})", 1)

    def extend(self, step: ExtendStep, df: str, view_name: str | None) -> None:
        names = [c.name for c in step.schema]
        added = names[len(names) - len(step.node.items) :]
        pairs = ", ".join(
            f"{name!r}: F.expr({sql_of(item.expr)!r})"
            for item, name in zip(self.items_of(step), added, strict=True)
        )
        dropped = f".drop({WATERMARK_COLUMN!r})" if self.read_watermark(step, df) else ""
        self.w(f"{df} = {df}.withColumns({{{pairs}}}){dropped}", 1)

    def set(self, step: SetStep, df: str, view_name: str | None) -> None:
        """``withColumns`` replaces each named column where it stands, every expression
        over the input row (one projection), as SET does."""
        pairs = ", ".join(
            f"{i.column.value!r}: F.expr({sql_of(i.expr)!r})" for i in step.node.items
        )
        self.w(f"{df} = {df}.withColumns({{{pairs}}})", 1)

    def drop(self, step: DropStep, df: str, view_name: str | None) -> None:
        self.w(f"{df} = {df}.drop({', '.join(repr(c.value) for c in step.node.columns)})", 1)

    def rename(self, step: RenameStep, df: str, view_name: str | None) -> None:
        pairs = ", ".join(f"{i.old.value!r}: {i.new.value!r}" for i in step.node.items)
        self.w(f"{df} = {df}.withColumnsRenamed({{{pairs}}})", 1)

    def explode(self, step: ExplodeStep, df: str, view_name: str | None) -> None:
        node = step.node
        assert node.alias is not None  # analysis names the column (E0214 otherwise)
        self.w(
            f"{df} = {df}.withColumn({node.alias.value!r}, "
            f"F.explode(F.expr({sql_of(node.expr)!r})))",
            1,
        )

    def deduplicate(self, step: DeduplicateStep, df: str, view_name: str | None) -> None:
        """DEDUPLICATE: Spark's ``dropDuplicates``; with WITHIN the plan's processor
        (:class:`~flowc.spark.spark_plan.WithinDeduplicator`), one per key group."""
        columns = ", ".join(repr(k) for k in step.keys)
        if step.node.within is None:
            self.w(f"{df} = {df}.dropDuplicates([{columns}])", 1)
            return
        found = self.spark_plan.within_deduplicators.get(self.spark_plan.step_nodes[id(step)])
        if found is None:  # the streaming rules refuse it (E0707, E0708)
            raise UnsupportedOnSpark("DEDUPLICATE ... WITHIN without one event-time column")
        self.w(
            f"{df} = deduplicate_within({df}, [{columns}], {found.column!r}, "
            f"{found.within_ms}, {found.key_groups}, {found.streaming}"
            f"{', pandas=True' if found.pandas else ''})",
            1,
        )

    def over(self, step: OverStep, df: str, view_name: str | None) -> None:
        """OVER: the plan's :class:`~flowc.spark.spark_plan.OverAggregator`, a processor
        streaming, Spark's window functions in batch."""
        found = self.spark_plan.over_aggregators[self.spark_plan.step_nodes[id(step)]]
        calls = []
        types = {c.name: c.type for c in step.schema}
        for item in step.node.items:
            call = item.expr.tree
            assert isinstance(call, exp.Func) and item.alias is not None
            arg = call.this
            column = arg.name if isinstance(arg, exp.Column) else None
            offset, default = lag_call(call) if isinstance(call, exp.Lag | exp.Lead) else (0, None)
            function = call.sql_name().lower()
            if flink_avg(call, types.get(item.alias.value)):
                function = "flink_avg"  # of the argument's integer type, truncated
            calls.append((function, column, item.alias.value, offset, default))
        self.w(
            f"{df} = over_aggregate({df}, {list(found.keys)!r}, {found.column!r}, {calls!r}, "
            f"{found.rows}, {found.preceding}, {found.frame!r}, {found.streaming})",
            1,
        )

    def match(self, step: MatchStep, df: str, view_name: str | None) -> None:
        """MATCH_RECOGNIZE: the plan's :class:`~flowc.spark.spark_plan.PatternMatcher`, a
        processor (:mod:`flowc.spark.match_codegen`)."""
        matcher = self.spark_plan.pattern_matchers[self.spark_plan.step_nodes[id(step)]]
        self.w(match_call(step, df, matcher.streaming), 1)

    def no_operator(self, step: Step, df: str, view_name: str | None) -> None:
        """KEY BY, PARTITION and UNION ALL write no lines of their own: :meth:`stream`
        turns them into the exchange or the union of the next operator's input."""
        raise AssertionError(f"{step.kind} has no operator of its own")

    def window_group(self, window: ast.Window) -> str:
        """The grouping column of a WINDOW, aliased ``__flowc_window``."""
        time_column = quote_name(window.args[0].tree.name)
        if window.kind == WindowKind.SESSION:
            return (
                f"F.session_window(F.col({time_column!r}), "
                f"{interval_text(window.args[1])!r}).alias('__flowc_window')"
            )
        args = ", ".join(repr(interval_text(a)) for a in window.args[1:])
        return f"F.window(F.col({time_column!r}), {args}).alias('__flowc_window')"

    def cumulate_windows(self, window: ast.Window, df: str) -> None:
        """CUMULATE(ts, size, step): each row once per window holding it, [start, start +
        k * step) for the k with ts before the end, start = ts floored to size (from the
        epoch, as Flink and Spark's window); the struct ``__flowc_window`` carries the time
        column's watermark, so Spark ends each window (append mode: emits it once, drops
        late rows of it) when the watermark passes its end, as it does ``window(...)``."""
        name = window.args[0].tree.name
        size, step = (interval_millis(a) for a in window.args[1:])
        assert size and step  # checked (E0737)
        t = f"unix_millis({quote_name(name)})"
        start = f"({t} - pmod({t}, {size}))"
        ends = f"sequence({t} - pmod({t}, {step}) + {step}, {start} + {size}, {step})"
        windows = (
            f"transform({ends}, e -> named_struct('start', timestamp_millis({start}), "
            "'end', timestamp_millis(e)))"
        )
        self.w(f"{df} = {df}.withColumn('__flowc_window', F.explode(F.expr({windows!r})))", 1)
        self.w(f"{df} = {df}.withMetadata('__flowc_window', {df}.schema[{name!r}].metadata)", 1)

    def top(self, step: TopStep | WindowTopStep, df: str, view_name: str | None) -> None:
        """TOP n: per group, Spark's ``max_by(row, order, n)`` (``min_by`` ascending), whose
        state is the group's n first rows; then one row per rank. Ties in the BY order are
        broken by the rows' other columns, in the same direction."""
        w = self.w
        node = step.node
        groups = [f"F.col({quote_name(k)!r})" for k in step.keys]
        if step.window is not None:
            if step.window.kind == WindowKind.SESSION and not step.keys:
                groups.append(
                    _GLOBAL_SESSION_KEY.format(time=quote_name(step.window.args[0].tree.name))
                )
            groups.append(self.window_group(step.window))
        width = len(step.schema) - (2 if step.window else 0) - (1 if node.rank else 0)
        columns = step.schema[:width]
        row = ", ".join(quote_name(c.name) for c in columns)
        primary = node.order[0].descending
        order: list[str] = []
        for item in node.order:
            written = sql_of(item.expr)
            if item.descending == primary:
                order.append(written)
            else:  # against the first one's direction: NULL-ness, then the value negated
                order += reversed_order(written, type_text(item.expr.tree))
        order += [quote_name(c.name) for c in tie_breaks(node, step.keys, columns)]
        changelog = self.spark_plan.changelog_processors.get(self.spark_plan.step_nodes[id(step)])
        if changelog is not None:
            struct = f"struct({', '.join(order)})"
            # A consumer whose rank does not reach the sink (none, or a SELECT after it
            # leaves it out) changes rows by Flink's upsert key, its updating input's keys
            # (docs/language.md, "Top-N over updates"), and computes no rank.
            keyed = changelog.consumer and bool(changelog.row_keys)
            rank = repr(node.rank.value) if node.rank is not None and not keyed else "None"
            keys = list(step.keys)
            identities = f", {list(changelog.row_keys)!r}" if keyed else ""
            w(
                f"{df} = changelog_operator({df}, 'top', {keys!r}, [], {node.count}, "
                f"{primary}, {rank}, F.expr({struct!r}), {changelog.key_groups}, None"
                f"{identities})",
                1,
            )
            return
        first = self.spark_plan.rowtime_firsts.get(self.spark_plan.step_nodes[id(step)])
        if first is not None:
            # Flink's keep-first row by event time (docs/language.md, "Top-N"): a processor
            # with Flink's lateness, not min_by, which a late row would change.
            rank = repr(node.rank.value) if node.rank is not None else "None"
            struct = f"struct({', '.join(order)})"
            w(
                f"{df} = rowtime_first_row({df}, {list(step.keys)!r}, {first.column!r}, "
                f"F.expr({struct!r}), {rank})",
                1,
            )
            return
        function = "max_by" if primary else "min_by"
        # Always a struct, one field or more: max_by skips a row whose order is NULL, and
        # a struct is never NULL, so such a row still counts, lowest (docs/language.md).
        top = f"{function}(struct({row}), struct({', '.join(order)}), {node.count})"
        w(f"{df} = {df}.groupBy({', '.join(groups)}).agg(F.expr({top!r}).alias('__flowc_top'))", 1)
        window = "'__flowc_window', " if step.window is not None else ""
        w(
            f"{df} = {df}.select({window}"
            "F.posexplode('__flowc_top').alias('__flowc_rank', '__flowc_row'))",
            1,
        )
        outputs = [f"F.col('__flowc_row.{c.name}').alias({c.name!r})" for c in columns]
        if step.window is not None:
            outputs += [
                "F.col('__flowc_window.start').alias('window_start')",
                "F.col('__flowc_window.end').alias('window_end')",
            ]
        if node.rank is not None:
            outputs.append(f"(F.col('__flowc_rank') + 1).cast('bigint').alias({node.rank.value!r})")
        w(f"{df} = {df}.select({', '.join(outputs)})", 1)

    def aggregate(
        self, step: AggregateStep | WindowAggregateStep, df: str, view_name: str | None
    ) -> None:
        w = self.w
        node = step.node
        groups = [f"F.col({quote_name(k)!r})" for k in step.keys]
        if step.window is not None:
            window = step.window
            time_column = quote_name(window.args[0].tree.name)
            if window.kind == WindowKind.SESSION:
                if not step.keys:
                    groups.append(_GLOBAL_SESSION_KEY.format(time=time_column))
                groups.append(
                    f"F.session_window(F.col({time_column!r}), "
                    f"{interval_text(window.args[1])!r}).alias('__flowc_window')"
                )
            elif window.kind == WindowKind.CUMULATE:
                self.cumulate_windows(window, df)
                groups.append("F.col('__flowc_window')")
            else:
                args = ", ".join(repr(interval_text(a)) for a in window.args[1:])
                groups.append(f"F.window(F.col({time_column!r}), {args}).alias('__flowc_window')")
        window_time = step.window_time if isinstance(step, WindowAggregateStep) else None
        width = len(step.keys) + (
            step.window_columns if isinstance(step, WindowAggregateStep) else 0
        )
        names = [c.name for c in step.schema][width:]
        aggregates = ", ".join(
            f"F.expr({aggregate_sql(item.expr)!r}).alias({name!r})"
            for item, name in zip(node.items, names, strict=True)
        )
        changelog = self.spark_plan.changelog_processors.get(self.spark_plan.step_nodes[id(step)])
        if changelog is not None:
            calls = []
            for item, name in zip(node.items, names, strict=True):
                call = changelog_call(item.expr.tree, None)
                assert call is not None  # the streaming rules refuse the others (E0741)
                calls.append((*call, name))
            w(
                f"{df} = changelog_operator({df}, 'aggregate', {list(step.keys)!r}, {calls!r}, "
                f"0, False, None, None, {changelog.key_groups}, "
                f"{df}.groupBy({', '.join(groups)}).agg({aggregates}).schema)",
                1,
            )
            return
        w(f"{df} = {df}.groupBy({', '.join(groups)}).agg({aggregates})", 1)
        if step.window is not None:
            keys = "".join(f"{k!r}, " for k in step.keys)
            values = ", ".join(repr(n) for n in names)
            # window_end keeps the window's watermark (Spark's window_time does the same),
            # so that a later stateful step can use it as its event time; so does
            # window_time, Flink's: the end minus 1 ms (docs/language.md, "Cascading
            # windows").
            metadata = f"metadata={df}.schema['__flowc_window'].metadata"
            time = (
                ""
                if window_time is None
                else "(F.col('__flowc_window.end') - F.expr('INTERVAL 1 MILLISECOND'))"
                f".alias({window_time!r}, {metadata}), "
            )
            w(
                f"{df} = {df}.select({keys}F.col('__flowc_window.start').alias('window_start'), "
                f"F.col('__flowc_window.end').alias('window_end', {metadata}), {time}{values})",
                1,
            )

    def join(self, step: JoinStep | DimensionJoinStep, df: str, view_name: str | None) -> None:
        node = step.node
        assert node.condition is not None  # a JOIN's ON (E0221 otherwise)
        (right,) = step.inputs
        join_node = self.spark_plan.step_nodes[id(step)]
        other = self.combined(self.origin_parts(right), join_node, None)
        alias = _relation(right.origin)
        changelog = self.spark_plan.changelog_processors.get(join_node)
        if changelog is not None:
            # A JOIN consuming a CDC source's changes: flowc's processor, not Spark's join,
            # which takes inserts only (docs/language.md, "Updating pipelines on Spark").
            assert isinstance(step, JoinStep)
            insert = next(i for i in self.program.inserts if any(s is step for s in i.stream.steps))
            joined = cdc_join(self.program, insert)
            assert joined is not None
            names = [c.name for c in (*joined.left, *joined.right)]
            at = [names.index(k) for k in changelog.row_keys]
            outer = f", {joined.preserved!r}" if any(joined.preserved) else ""
            self.w(
                f"{df} = changelog_join({df}, {other}, {list(joined.pairs)!r}, {at!r}, "
                f"{changelog.key_groups}{outer})",
                1,
            )
            return
        condition = sql_of(node.condition)
        split = self.spark_plan.join_filters.get(join_node)
        if split is not None:  # E0760's bounds tested after Spark's join (JoinFilter)
            condition = spark_text(with_call_names(split.kept))
        temporal = join_node in self.spark_plan.temporal_joins
        if temporal:
            # Each version is valid from its time until its key's next version: the row
            # meets the one whose interval holds its time (Flink's temporal join).
            assert node.as_of is not None and isinstance(right.origin, FromSource)
            table = self.program.source(right.origin.name)
            assert table.version_time is not None
            key = list(table.version_key)
            other = f"table_versions({other}, {table.name!r}, {key!r}, {table.version_time!r})"
            time = sql_of(node.as_of)
            since = f"{quote_name(alias)}.{quote_name(table.version_time)}"
            until = f"{quote_name(alias)}.{quote_name(VALID_TO)}"
            condition = (
                f"({condition}) AND {time} >= {since} AND ({until} IS NULL OR {time} < {until})"
            )
        if join_node in self.spark_plan.broadcast_joins:
            # The table is broadcast, whatever Spark's size estimate, as the plan decided:
            # no state, no shuffle of the stream.
            other = f"F.broadcast({other})"
        dropped = f".drop({VALID_TO!r})" if temporal else ""
        self.w(
            f"{df} = {df}.join({other}.alias({alias!r}), F.expr({condition!r}), "
            f"{_SPARK_JOIN_TYPES[JoinKind(node.kind)]!r}){dropped}",
            1,
        )
        for moved in split.moved if split is not None else ():
            self.w(f"{df} = {df}.where(F.expr({spark_text(with_call_names(moved))!r}))", 1)

    def route(self, step: RouteStep, df: str, view_name: str | None) -> None:
        """Rows go to the first branch whose condition holds; the rest stay on the main output."""
        w = self.w
        node = step.node
        taken: list[str] = []
        source = self.var("routed")
        w(f"{source} = {df}", 1)
        for branch in node.branches:
            condition = f"coalesce(({sql_of(branch.condition)}), false)"
            guard = " AND ".join([*(f"NOT {t}" for t in taken), condition])
            variable = self.var(f"side_{branch.name.value}")
            w(f"{variable} = {source}.where(F.expr({guard!r}))", 1)
            if view_name is not None:
                self.names[f"side:{view_name}.{branch.name.value}"] = variable
            taken.append(condition)
        rest = " AND ".join(f"NOT {t}" for t in taken)
        w(f"{df} = {source}.where(F.expr({rest!r}))", 1)


#: Each step class's writer (tests/test_step_classes.py: every class has one).
STEP_WRITERS: dict[type[Step], Callable[..., None]] = {
    WhereStep: StepWriter.where,
    SelectStep: StepWriter.select,
    ExtendStep: StepWriter.extend,
    SetStep: StepWriter.set,
    DropStep: StepWriter.drop,
    RenameStep: StepWriter.rename,
    ExplodeStep: StepWriter.explode,
    KeyByStep: StepWriter.no_operator,
    PartitionStep: StepWriter.no_operator,
    PartitionByStep: StepWriter.no_operator,
    AggregateStep: StepWriter.aggregate,
    WindowAggregateStep: StepWriter.aggregate,
    DeduplicateStep: StepWriter.deduplicate,
    OverStep: StepWriter.over,
    MatchStep: StepWriter.match,
    TopStep: StepWriter.top,
    WindowTopStep: StepWriter.top,
    JoinStep: StepWriter.join,
    DimensionJoinStep: StepWriter.join,
    UnionStep: StepWriter.no_operator,
    RouteStep: StepWriter.route,
}

#: The column :func:`flowc.spark.generated_runtime.table_versions` adds: where a version ends.
VALID_TO = "__flowc_valid_to"


def _relation(origin: Origin) -> str:
    """The name a stream's columns are qualified with (its source or view)."""
    if isinstance(origin, FromSource | FromView):
        return origin.name
    if isinstance(origin, FromSourceErrors):
        return origin.source
    return origin.view
