"""Spark Structured Streaming's rules, checked at compile time (its UnsupportedOperationChecker).

Each INSERT runs as one streaming query; Spark refuses some combinations of stateful
operators, watermarks and output modes only when the query starts. flowc reports them
at the step that causes them, with what to change, before Spark is ever started.

The rules are :data:`RULES`, one function each, run for every INSERT in order; what they
need to know about event time (which columns carry a watermark where) is behind
:class:`Lineage`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TypeVar

from sqlglot import exp

from flowc import ast
from flowc.analyze.program_checks import CHANGES_DOCS
from flowc.analyze.state_store import store_other_than_rocksdb
from flowc.analyze.step_common import keyword
from flowc.analyze.upsert_sinks import upsert_key
from flowc.catalog import is_upsert
from flowc.diagnostics import Reporter
from flowc.errorcodes import Code
from flowc.fast_dataclass import dataclass
from flowc.graph.changelog import rowtime_first_tops
from flowc.program import (
    AggregateStep,
    CdcJoin,
    DeduplicateStep,
    DimensionJoinStep,
    DropStep,
    ExtendStep,
    FromSideOutput,
    FromSource,
    FromSourceErrors,
    FromView,
    InsertDef,
    JoinStep,
    Program,
    RenameStep,
    Schema,
    SelectStep,
    SetStep,
    Step,
    Stream,
    TopStep,
    UnionStep,
    WatermarkRead,
    WhereStep,
    WindowAggregateStep,
    WindowTopStep,
    cdc_join,
    cdc_join_shared_names,
    cdc_producer,
    cdc_top,
    change_flow,
    streams_from_source,
)
from flowc.spans import Span
from flowc.spark.changelog_chains import (
    UpdatingChain,
    changelog_call,
    join_row_key,
    updating_chain,
)
from flowc.spark.match_rules import check_match_time
from flowc.spark.over_rules import check_over_time
from flowc.sql.habits import FLINK_PROCTIME_META
from flowc.sql.spark_sql import interval_millis
from flowc.vocabulary import (
    JoinKind,
    StepKind,
    WindowKind,
)


def check_streaming(program: Program, reporter: Reporter) -> Program:
    """Every rule for each INSERT; in batch mode only :data:`BATCH_RULES`: Spark's batch
    engine runs every aggregate, TOP, join and session over the whole bounded input, with
    no output mode, watermark or state to constrain it."""
    lineage = Lineage(program)
    once = _OncePerPlace(reporter)
    rules = BATCH_RULES if program.settings.execution_mode == "batch" else RULES
    for insert in program.inserts:
        query = _query(program, lineage, insert)
        for rule in rules:
            rule(query, lineage, once)
    return program


def choose_shown_modes(program: Program) -> Program:
    """``program`` with the mode of each shown query's sink (a ``SELECT ...;`` statement's
    console) and of each Flink-dialect console or noop table written without ``mode``
    (:attr:`SinkDef.mode_by_query`) chosen: the first of append, update and complete in
    which these rules let Spark run the query. Append where the result is final rows
    (Flink's insert-only results: rows, windows closed by the watermark), update where
    rows change (an aggregation without a window, a window over processing time), as
    Flink's SQL client shows a changing result. Where no mode passes, append stays and the
    rules report why."""
    if not any(sink.shows_result or sink.mode_by_query for sink in program.sinks):
        return program
    lineage = Lineage(program)
    chosen: dict[str, str] = {}
    for insert in program.inserts:
        sink = program.sink(insert.sink)
        if not (sink.shows_result or sink.mode_by_query):
            continue
        query = _query(program, lineage, insert)
        for mode in ("append", "update", "complete"):
            trial = Reporter()
            tried = replace(query, mode=mode)
            for rule in RULES:
                rule(tried, lineage, _OncePerPlace(trial))
            if not trial.has_errors:
                chosen[insert.sink] = mode
                break
    return replace(
        program,
        sinks=tuple(replace(s, mode=chosen.get(s.name, s.mode)) for s in program.sinks),
    )


@dataclass(frozen=True, slots=True)
class Query:
    """One INSERT's streaming query: ``steps`` is its lineage (:meth:`Lineage.steps`),
    ``where`` how messages name it."""

    insert: InsertDef
    mode: str
    where: str
    steps: tuple[Step, ...]
    stateful: tuple[Step, ...]


def _query(program: Program, lineage: Lineage, insert: InsertDef) -> Query:
    mode = program.sink(insert.sink).mode
    steps = tuple(lineage.steps(insert.stream))
    return Query(
        insert=insert,
        mode=mode,
        where=f"INSERT INTO {insert.sink} (mode '{mode}')",
        steps=steps,
        stateful=tuple(s for s in steps if s.stateful),
    )


# ---------------------------------------------------------------- the rules


def check_complete_mode(query: Query, lineage: Lineage, reporter: _OncePerPlace) -> None:
    """E0701: complete mode rewrites the whole result, so there must be one to rewrite."""
    if query.mode == "complete" and not _aggregations(query):
        reporter.error(
            Code.E0701,
            f"{query.where}: complete mode needs an aggregation",
            query.insert.span,
            help="complete mode rewrites the whole result each batch; use mode = 'append' "
            "or 'update', or AGGREGATE the stream",
        )
    if query.mode != "complete":
        return
    for step in query.stateful:
        if id(step) in lineage.rowtime_tops:
            reporter.error(
                Code.E0701,
                f"{query.where}: complete mode rewrites the whole result, and TOP 1 BY an "
                "event time ascending writes each group's first row once (Flink's "
                "keep-first row by event time, a processor on Spark, which has no complete "
                "mode)",
                _keyword(step),
                help="write the rows with mode = 'append' (each group's row once) or to an "
                "upsert sink (mode = 'update' with the PER columns as key)",
            )


def check_stateful_operators(query: Query, lineage: Lineage, reporter: _OncePerPlace) -> None:
    """E0702: outside append mode, an aggregation emits rows the global watermark has
    already passed, and Spark refuses a stateful step fed by one (its
    checkStreamingQueryGlobalWatermarkLimit: an aggregation, a stream-stream join or a
    deduplication on an event-time column, with a streaming aggregation below it). Other
    chains run, e.g. DEDUPLICATE or an inner JOIN before an AGGREGATE. A DEDUPLICATE after
    an aggregation is refused whatever its columns: whether a grouping key still carries
    Spark's watermark is not tracked here (docs/language.md)."""
    if query.mode == "append":
        return
    chain = updating_chain(lineage.program, query.insert)
    joined = cdc_join(lineage.program, query.insert)
    for step in query.stateful:
        if chain is not None and step is chain.consumer:
            continue  # its processor consumes the updates (check_updating_chains)
        if joined is not None and step is joined.join:
            continue  # ChangelogJoin consumes an AGGREGATE's updates (check_cdc_joins)
        if lineage.aggregates_before(query.insert, step):
            reporter.error(
                Code.E0702,
                f"{query.where}: Spark runs {_keyword_text(step)} after an aggregation only in "
                "append mode",
                _keyword(step),
                help=_join_after_updates_help(
                    lineage.running_results_before(query.insert, step),
                    cdc_join_shared_names(lineage.program, query.insert),
                )
                if isinstance(step, JoinStep)
                else _RUNNING_HELP
                if lineage.running_results_before(query.insert, step)
                else "write this query with mode = 'append' (windowed aggregates over "
                "watermarked columns), or write the aggregation to a sink of its own",
            )


#: E0702's help at a JOIN: the updates a JOIN does consume.
_JOIN_AFTER_UPDATES_HELP = (
    "a JOIN consumes the updates of one AGGREGATE (without WINDOW, with keys) or one TOP "
    "(without WINDOW) over insert-only rows, read directly or through views that nothing "
    'else reads, into an upsert sink (docs/language.md, "A JOIN over a TOP\'s updates")'
)


def _join_after_updates_help(running: bool, shared: tuple[str, ...] = ()) -> str:
    """E0702's help at a JOIN: what it consumes, then append mode only where no running
    result (an AGGREGATE or TOP without WINDOW) comes before it; where only the column
    names both sides have keep it from running, which to rename."""
    if shared:
        return _shared_names_help(shared)
    if running:
        return (
            f"{_JOIN_AFTER_UPDATES_HELP}; mode = 'append' cannot run this (a result without "
            "WINDOW is never final): reshape the query, or write the aggregation to a sink "
            "of its own"
        )
    return (
        f"{_JOIN_AFTER_UPDATES_HELP}; else write this query with mode = 'append' (windowed "
        "aggregates over watermarked columns), or write the aggregation to a sink of its own"
    )


def _shared_names_help(shared: tuple[str, ...]) -> str:
    """The help where a JOIN over changes would run but for column names both sides have:
    a RENAME just before the JOIN (a step every side's chain takes) is the way out."""
    names = ", ".join(f"'{n}'" for n in shared)
    first = shared[0]
    return (
        f"both sides of the JOIN have a column named {names}: a JOIN over changes runs as "
        "flowc's processor, whose rows name each column once; rename the first side's "
        f"just before the JOIN, e.g. |> RENAME {first} AS left_{first} |> JOIN ... ON "
        f"left_{first} = ...{first}"
    )


#: E0702's help after an AGGREGATE or TOP without WINDOW, whose running results append
#: mode cannot write (offering it would change the query's meaning).
_RUNNING_HELP = (
    "flowc runs only some steps over another's running results, as changelog processors "
    '(docs/language.md, "Updating pipelines on Spark"): an AGGREGATE with keys over one '
    "AGGREGATE's or TOP's updates through KEY BY and plain column selections (after one inner "
    "JOIN of two sources at most), a TOP over an AGGREGATE's, a JOIN on equalities over an "
    "AGGREGATE's or a TOP's; mode = 'append' cannot run this (a result without WINDOW is "
    "never final): reshape the query as one of those, or write the first aggregation to a "
    "sink of its own"
)


def check_session_windows(query: Query, lineage: Lineage, reporter: _OncePerPlace) -> None:
    """E0703: Spark has no session windows in update mode."""
    if query.mode != "update":
        return
    for step in _aggregations(query):
        window = step.window
        if window is not None and window.kind == WindowKind.SESSION:
            reporter.error(
                Code.E0703,
                f"{query.where}: Spark does not support session windows in update mode",
                window.keyword_span,
                help="write with mode = 'append' (with a watermark) or 'complete'",
            )


def _append_only_help(program: Program, sink_name: str) -> str:
    """What an updating query needs from its sink: a Flink-dialect files table (Flink's
    filesystem sink refuses updates too) becomes an upsert table with a PRIMARY KEY."""
    window = "aggregate per WINDOW over a column with a WATERMARK"
    sink = program.sink(sink_name)
    if program.settings.sql_dialect == "flink" and sink.connector == "files":
        return (
            "a files table takes inserts only, as Flink's filesystem sink does: declare "
            f"PRIMARY KEY (the grouped columns) NOT ENFORCED on '{sink_name}' for an upsert "
            f"table, or {window}"
        )
    return f"give the sink mode = 'update' or 'complete', or {window}"


def check_appended_aggregations(query: Query, lineage: Lineage, reporter: _OncePerPlace) -> None:
    """E0704, E0705: append mode emits an aggregate once it is final, which only a window
    over a watermarked column ever is."""
    if query.mode != "append":
        return
    for step in _aggregations(query):
        window = step.window
        if window is None and set(step.keys) & lineage.columns_before(query.insert, step):
            continue  # grouped by a watermarked column: a group is final once it passes
        if id(step) in lineage.rowtime_tops and step is query.stateful[-1]:
            continue  # keeps each group's first row by event time: final once written
        if window is None:
            reporter.error(
                Code.E0704,
                f"{query.where}: {_keyword_text(step)} without WINDOW never finishes a result, "
                "so it cannot be appended",
                _keyword(step),
                help=_append_only_help(lineage.program, query.insert.sink),
            )
            continue
        time_column = window.args[0].tree
        columns = lineage.columns_before(query.insert, step)
        if isinstance(time_column, exp.Column) and time_column.name not in columns:
            processing = {s.proctime for s in lineage.program.sources if s.proctime}
            help_text = (
                "a window over processing time (PROCTIME()) has no watermark on Spark: "
                "write with mode = 'update', which writes each window's count as it grows"
                if time_column.name in processing
                else "its rows passed a step reading CURRENT_WATERMARK that lets late rows "
                "through, after which no column keeps a watermark on Spark: window the rows "
                "before that step, or keep only rows ahead of the watermark there (WHERE "
                f"{time_column.name} > CURRENT_WATERMARK({time_column.name}))"
                if time_column.name in lineage.time_attributes.columns_before(query.insert, step)
                else f"declare WATERMARK FOR {time_column.name} AS {time_column.name} - "
                "INTERVAL 5 SECONDS in the source, or write with mode = 'update'"
            )
            reporter.error(
                Code.E0705,
                f"{query.where}: a window is appended only once the watermark passes its end, "
                f"and '{time_column.name}' has no WATERMARK",
                window.args[0].span,
                help=help_text,
            )


def check_outer_joins(query: Query, lineage: Lineage, reporter: _OncePerPlace) -> None:
    """E0706: an outer stream-stream join needs watermarks on both sides and a time bound."""
    for step in query.stateful:
        if not isinstance(step, JoinStep):
            continue
        node = step.node
        if node.kind == JoinKind.INNER or _is_cdc_join(lineage, query, step):
            continue  # a CDC join's processor emits and retracts its padded rows itself
        left = lineage.columns_before(query.insert, step)
        right = lineage.watermarked(step.inputs[0])
        condition = node.condition
        bounded = condition is not None and _has_time_bound(condition.tree, left | right)
        if left and right and bounded:
            continue
        missing = []
        if not left or not right:
            missing.append("a WATERMARK on both sides")
        if not bounded:
            missing.append("a time bound in ON (e.g. b.ts BETWEEN a.ts AND a.ts + INTERVAL 1 HOUR)")
        reporter.error(
            Code.E0706,
            f"a {node.kind} OUTER stream-stream JOIN needs {' and '.join(missing)}",
            node.keyword_span,
            help="Spark can emit the unmatched rows of an outer join only once the "
            "watermark rules out later matches",
        )


def _is_cdc_join(lineage: Lineage, query: Query, step: JoinStep) -> bool:
    """Whether ``step`` is the INSERT's JOIN over changes (ChangelogJoin's), not Spark's."""
    joined = cdc_join(lineage.program, query.insert)
    return joined is not None and joined.join is step


def check_join_state_bounds(query: Query, lineage: Lineage, reporter: _OncePerPlace) -> None:
    """W0040: an inner stream-stream JOIN without watermarks on both sides and a time bound
    keeps every row of both sides forever (Spark, and Flink without state TTL)."""
    for step in query.stateful:
        if not isinstance(step, JoinStep):
            continue
        node = step.node
        if _is_cdc_join(lineage, query, step):
            reporter.warning(
                Code.W0040,
                f"{query.where}: this JOIN over changes keeps every row of both sides in "
                "state forever (a row taken back by a -U or -D leaves it)",
                node.keyword_span,
                help="a JOIN over changes (a CDC source's, an AGGREGATE's or a TOP's) has no "
                "time to bound its state by (a time bound in ON over changes is E0299, as "
                "Flink plans no interval join over updates); Flink keeps its rows until a "
                "state TTL expires them, which flowc does not run",
            )
            continue
        if node.kind != JoinKind.INNER:
            continue  # an outer join without them is E0706
        left = lineage.columns_before(query.insert, step)
        right = lineage.watermarked(step.inputs[0])
        condition = node.condition
        if (
            left
            and right
            and condition is not None
            and _has_time_bound(condition.tree, left | right)
        ):
            continue
        reporter.warning(
            Code.W0040,
            f"{query.where}: this stream-stream JOIN keeps every row of both sides in state "
            "forever: nothing bounds how long a row waits for its match",
            node.keyword_span,
            help="declare a WATERMARK on both sides and bound the time in ON (e.g. "
            "AND b.ts BETWEEN a.ts AND a.ts + INTERVAL 1 HOUR), or JOIN a CREATE TABLE if "
            "one side is a dimension table",
        )


def check_join_time_columns(query: Query, lineage: Lineage, reporter: _OncePerPlace) -> None:
    """E0760: Spark derives a side's state watermark from a range condition on *any*
    TIMESTAMP column of that side and the other side's watermark column, then evicts the
    side's rows by its *watermark* column (StreamingSymmetricHashJoinHelper's
    getOneSideStateWatermarkPredicate): ``b.t <= a.expires`` evicts an auction once the
    watermark passes its ``date_time``, long before it expires, and later matches are lost
    (Nexmark q4; docs/language.md). Refused where a range condition of ON reads a
    TIMESTAMP column that carries no watermark beside a watermarked one, unless the JOIN is
    INNER and each such condition is one of ON's conjuncts, which Spark then tests after
    the join (:func:`join_filter`)."""
    for step in query.stateful:
        if not isinstance(step, JoinStep) or step.node.condition is None:
            continue
        left = lineage.columns_before(query.insert, step)
        right = lineage.watermarked(step.inputs[0])
        if not left or not right:
            continue  # a side without a watermark: Spark derives no bound from it
        if join_filter(step, left, right) is not None:
            continue
        marked = left | right
        times = _time_columns(step)
        for node in step.node.condition.tree.walk():
            other = _bounded_below(node, times - marked, marked)
            if not other:
                continue
            inner = step.node.kind == JoinKind.INNER
            reporter.error(
                Code.E0760,
                f"{query.where}: Spark would drop this JOIN's rows from state once the "
                f"watermark passes their WATERMARK column, though '{other[0]}' (no "
                "watermark) still lets them match: later matches would be lost",
                step.node.condition.span,
                help=(
                    f"make the comparison with '{other[0]}' a condition of its own, ANDed "
                    "with the others (flowc then tests it after Spark's join, which for an "
                    "INNER JOIN means the same), or bound ON "
                    if inner
                    else f"no form of this bound runs on Spark in a {step.node.kind} JOIN's "
                    "ON (a WHERE after it would also drop the unmatched rows it keeps): bound "
                    "ON "
                )
                + "by watermarked columns only (b.t BETWEEN a.t AND a.t + INTERVAL ...) where "
                "that is the meaning wanted",
            )
            break


def _time_columns(step: JoinStep) -> set[str]:
    return {c.name for c in step.schema if c.type.lower().startswith("timestamp")}


@dataclass(frozen=True, slots=True)
class JoinFilter:
    """An INNER stream-stream JOIN's ON as Spark runs it: ``kept`` in Spark's join
    condition, ``moved`` tested right after the join. Each moved condition bounds a
    TIMESTAMP column without a watermark (``columns``) from below by a watermarked one
    (E0760's case: Spark would evict rows by their WATERMARK column too early); a
    conjunct of an INNER JOIN's ON means the same as that filter after it, which
    Catalyst leaves there (the program excludes PushPredicateThroughJoin)."""

    kept: exp.Expr
    moved: tuple[exp.Expr, ...]
    columns: tuple[str, ...]


def join_filter(
    step: JoinStep, left: frozenset[str] | set[str], right: frozenset[str] | set[str]
) -> JoinFilter | None:
    """The INNER JOIN's ON split as Spark runs it (:class:`JoinFilter`), both sides
    watermarked (``left``, ``right``: their watermarked columns); None where no condition
    needs moving, or where one is no conjunct of ON (inside an OR, a NOT, a CASE): then
    E0760. A BETWEEN conjunct with one end to move is split into its two comparisons."""
    condition = step.node.condition
    if step.node.kind != JoinKind.INNER or condition is None or not left or not right:
        return None
    marked = set(left) | set(right)
    unmarked = _time_columns(step) - marked
    tree = condition.tree
    conjuncts = list(tree.flatten()) if isinstance(tree, exp.And) else [tree]
    kept: list[exp.Expr] = []
    moved: list[exp.Expr] = []
    columns: set[str] = set()
    for part in (p.unnest() for p in conjuncts):
        halves = (
            [
                exp.LTE(this=part.args["low"].copy(), expression=part.this.copy()),
                exp.LTE(this=part.this.copy(), expression=part.args["high"].copy()),
            ]
            if isinstance(part, exp.Between) and _bounded_below(part, unmarked, marked)
            else [part]
        )
        for half in halves:
            found = _bounded_below(half, unmarked, marked)
            columns.update(found)
            (moved if found else kept).append(half.copy() if found else half)
    if not moved or not kept:
        return None
    if any(_bounded_below(n, unmarked, marked) for k in kept for n in k.walk()):
        return None  # a bound inside another condition: not one Spark can test apart
    return JoinFilter(exp.and_(*kept), tuple(moved), tuple(sorted(columns)))


def _bounded_below(
    node: exp.Expr, unmarked: frozenset[str] | set[str], marked: frozenset[str] | set[str]
) -> list[str]:
    """The TIMESTAMP columns without a watermark that ``node`` bounds from below by a
    watermarked column (``w <= x``, ``x > w``, ``w BETWEEN ... AND x``): only such a bound
    lets Spark derive a state watermark for ``x``'s side, which it then applies to that
    side's watermark column. A column bounding a watermarked one from below (``x <= w``,
    q7's ``ts BETWEEN window_start AND ...``) gives Spark no bound for it."""
    pairs: list[tuple[exp.Expr, exp.Expr]] = []  # (smaller, greater)
    if isinstance(node, exp.LT | exp.LTE):
        pairs.append((node.this, node.expression))
    elif isinstance(node, exp.GT | exp.GTE):
        pairs.append((node.expression, node.this))
    elif isinstance(node, exp.Between):
        pairs += [(node.args["low"], node.this), (node.this, node.args["high"])]
    found: set[str] = set()
    for smaller, greater in pairs:
        below = {c.name for c in smaller.find_all(exp.Column)}
        above = {c.name for c in greater.find_all(exp.Column)}
        if below & marked:
            found |= above & unmarked
    return sorted(found)


def check_deduplicate_within(query: Query, lineage: Lineage, reporter: _OncePerPlace) -> None:
    """E0707, E0708: a DEDUPLICATE ... WITHIN whose processor (docs/language.md,
    "DEDUPLICATE WITHIN on Spark") has no one event time to read, or no store to run on."""
    for step in query.stateful:
        if not isinstance(step, DeduplicateStep):
            continue
        node = step.node
        if node.within is None:
            continue
        watermarked = lineage.columns_before(query.insert, step)
        within = " ".join(node.within.text.split())
        if not watermarked:
            reporter.error(
                Code.E0707,
                "DEDUPLICATE ... WITHIN needs a WATERMARK on the stream",
                node.within.span,
                help="declare a WATERMARK in the source, or drop WITHIN to keep every key forever",
            )
            continue
        if len(watermarked) > 1:
            reporter.error(
                Code.E0708,
                f"WITHIN {within} compares rows by their event time, and "
                f"{' and '.join(sorted(watermarked))} each carry a watermark here",
                node.within.span,
                help=_exact_deduplicate(node, watermarked)
                + "; or deduplicate before the step that brings the second time column",
            )
            continue
        if interval_millis(node.within) is None:
            reporter.error(
                Code.E0708,
                f"WITHIN {within} is not a whole number of days, hours, minutes, seconds or "
                "milliseconds",
                node.within.span,
                help="the processor compares event times in milliseconds: write INTERVAL 90 "
                "SECONDS, not 1.5 minutes (a month has no fixed length)",
            )
            continue
        settings = lineage.program.settings
        chosen = store_other_than_rocksdb(settings)
        if settings.execution_mode != "batch" and chosen is not None:
            reporter.error(
                Code.E0708,
                f"DEDUPLICATE ... WITHIN runs as a stateful processor on Spark, which needs "
                f"the RocksDB state store, and the job sets {chosen}",
                node.within.span,
                help="SET state.backend.type = 'rocksdb' (or leave it out): Spark runs "
                "transformWithState processors only on RocksDB",
            )


def check_window_time_uses(query: Query, lineage: Lineage, reporter: _OncePerPlace) -> None:
    """E0733: a stateful step other than a window over it that Spark would watch the
    watermark on a ``window_time`` column for (an aggregation keyed by one; a JOIN or a
    DEDUPLICATE of rows holding one, as Spark watches their first watermarked column).
    Spark drops a row whose time is not after the watermark of the batch before, and a
    window is written in the batch after the watermark passed its end: the watermark
    before can be the end minus 1 ms, which is ``window_time``, so the row would be
    dropped (found on Spark). A window over it is
    kept: Spark compares that window's end, never earlier than the first's end."""
    for step in query.stateful:
        times = lineage.window_times_before(query.insert, step)
        if isinstance(step, JoinStep):
            times |= lineage.window_times(step.inputs[0])
        if isinstance(step, JoinStep | DeduplicateStep):
            # Spark watches the first watermarked column of the rows, whichever the keys.
            used = sorted(times)
        else:
            used = [k for k in step.keys if k in times]  # an aggregation's: of its keys
        if not used:
            continue
        reporter.error(
            Code.E0733,
            f"{query.where}: {_keyword_text(step)} would watch the watermark on '{used[0]}', "
            "a window_time (its window's end minus 1 ms): Spark can drop its row as late "
            "when the window closes",
            _keyword(step),
            help="use window_end, which keeps the watermark and is safe (the same windows, 1 ms "
            "later); window_time is for a window over it: |> WINDOW TUMBLE(window_time, ...)"
            + (
                "; or DROP window_time before it"
                if isinstance(step, JoinStep | DeduplicateStep)
                else ""
            ),
        )


def check_window_proctime(query: Query, lineage: Lineage, reporter: _OncePerPlace) -> None:
    """E0617: Flink's ``TUMBLE_PROCTIME(...)`` (the ``current_timestamp()`` after the
    AGGREGATE it is written as) of a window over event time, which Flink types as the
    window's rowtime attribute and never materializes as a processing time."""
    window: WindowAggregateStep | None = None
    for step in query.steps:
        if isinstance(step, WindowAggregateStep):
            window = step
        elif step.GROUPS:
            window = None
        if window is None or not isinstance(step, SelectStep) or window.window is None:
            continue
        time_column = window.window.args[0].tree
        if not isinstance(time_column, exp.Column):
            continue
        if time_column.name in lineage.processing_before(query.insert, window):
            continue
        for item in step.node.items:
            for node in item.expr.tree.find_all(exp.CurrentTimestamp):
                name = node.meta.get(FLINK_PROCTIME_META)
                if name is None:
                    continue
                reporter.error(
                    Code.E0617,
                    f"{name}(...) of a window over '{time_column.name}', which is not a "
                    "processing time (PROCTIME()): Flink types it as the window's rowtime "
                    "(not a processing time flowc can write)",
                    item.expr.span,
                    help=f"group by a window over a PROCTIME() column, or select "
                    f"{name.partition('_')[0]}_ROWTIME(...) for the event time of the window",
                )


def check_temporal_joins(program: Program, reporter: Reporter) -> None:
    """E0265 for every target, not only Spark: an event-time temporal join would have
    Flink's plans wrong too (:func:`_temporal_joins`). Only a JOIN ... FOR SYSTEM_TIME AS
    OF is looked at: without one in the program, no query's lineage is listed."""
    if not any(
        isinstance(step, JoinStep | DimensionJoinStep) and step.node.as_of is not None
        for stream in [*(v.stream for v in program.views), *(i.stream for i in program.inserts)]
        for step in steps_within(stream)
    ):
        return
    lineage = Lineage(program)
    once = _OncePerPlace(reporter)
    for insert in program.inserts:
        _temporal_joins(_query(program, lineage, insert), lineage, once)


def _temporal_joins(query: Query, lineage: Lineage, reporter: _OncePerPlace) -> None:
    """``JOIN t FOR SYSTEM_TIME AS OF x``: with ``x`` the left stream's processing time it
    is Flink's lookup join, which reads the table's current rows (for a flowc table, the
    rows it holds when the job starts: every row of a key, as a lookup returns), unless
    the table is versioned (E0268: Flink has no processing-time temporal join of one).
    With ``x`` the left stream's event time and a versioned table (options ``key`` and
    ``version_time``) it is Flink's event-time temporal join, whose ON must equate every
    key column (E0267). Anything else is E0265: joining every row would give each stream
    row every version, future ones included."""
    for step in query.steps:
        if not isinstance(step, JoinStep | DimensionJoinStep):
            continue
        node = step.node
        if node.as_of is None:
            continue
        tree = node.as_of.tree
        table = node.right.name.value
        column = tree.name if isinstance(tree, exp.Column) and tree.table != table else None
        span = node.as_of_span or node.as_of.span
        if column is not None and column in lineage.processing_before(query.insert, step):
            if step.temporal:
                reporter.error(
                    Code.E0268,
                    f"FOR SYSTEM_TIME AS OF the processing time '{column}': table '{table}' "
                    "is versioned, and Flink joins a versioned table as of event time only",
                    span,
                    help="join AS OF the stream's event time (its WATERMARK column) to meet "
                    "the version valid at each row's time, or drop the table's key and "
                    "version_time options to look up all of its rows",
                )
            continue
        if column is not None and column in lineage.columns_before(query.insert, step):
            if step.temporal:
                _temporal_key(lineage.program, step, node, reporter)
                continue
            reporter.error(
                Code.E0265,
                f"FOR SYSTEM_TIME AS OF the event time '{column}': an event-time temporal "
                f"join needs a versioned table, and table '{table}' declares no versions",
                span,
                help="declare them: WITH (..., key = 'k', version_time = 't'), t a TIMESTAMP "
                "column from which each row is its key's version; or join the table's "
                "current rows AS OF s.pt, where the stream declares pt AS PROCTIME()",
            )
            continue
        what = (
            f"'{tree.name}' is neither the processing time (PROCTIME()) nor the event time "
            "of the stream joined"
            if isinstance(tree, exp.Column)
            else "the time is not a column of the stream joined"
        )
        reporter.error(
            Code.E0265,
            f"FOR SYSTEM_TIME AS OF: {what}",
            span,
            help="AS OF s.pt, where the stream declares pt AS PROCTIME(), joins the table's "
            "current rows (Flink's lookup join); AS OF the stream's WATERMARK column joins "
            "the version valid at each row's time, from a table that declares key and "
            "version_time (an event-time temporal join)",
        )


def _temporal_key(program: Program, step: Step, node: ast.Join, reporter: _OncePerPlace) -> None:
    """E0267: Flink's temporal join needs an equality on every column of the versioned
    table's PRIMARY KEY, which decides the versions a row chooses from."""
    table = node.right.name.value
    (right,) = step.inputs
    key = program.source(table).version_key
    missing = [k for k in key if k not in (right.keys or ())]
    if not missing:
        return
    assert node.condition is not None
    reporter.error(
        Code.E0267,
        f"an event-time temporal join needs an equality on every key column of table "
        f"'{table}'; the ON has none on {', '.join(repr(m) for m in missing)}",
        node.condition.span,
        help=f"add it: ON ... AND s.x = {table}.{missing[0]} (each version is the version of "
        "its key; another key would choose among versions of other rows)",
    )


Rule = Callable[[Query, "Lineage", "_OncePerPlace"], None]


#: Spark's rules, checked in this order for each INSERT.
@dataclass(frozen=True, slots=True)
class TopGroups:
    """An updating TOP whose rows reach an upsert sink. Each micro-batch carries every row
    of each group the TOP changed (its n first rows, as the aggregation holds them), so
    the sink replaces all of a group's rows with the batch's: a row that left the top is
    deleted, as Flink's Rank retracts it. ``columns`` are the sink's columns naming the
    groups (none for a global TOP: the batch is the whole result); where a step between
    the TOP and the sink would hide a group from the batch (a WHERE) or lose its columns,
    ``blocker`` is that step and ``reason`` says why."""

    top: TopStep | WindowTopStep
    columns: tuple[str, ...] | None
    blocker: Step | None = None
    reason: str = ""


def origin_stream(program: Program, stream: Stream) -> tuple[Stream, int | None] | None:
    """The view stream a stream starts from, and up to which step of it (a side output
    holds the rows of its ROUTE step); None for a source."""
    origin = stream.origin
    if isinstance(origin, FromView):
        return program.view(origin.name).stream, None
    if isinstance(origin, FromSideOutput):
        view, output = program.side_output(origin)
        return view.stream, output.step_index + 1
    return None


def top_groups(program: Program, insert: InsertDef) -> TopGroups | None:
    """The TOP whose rows the INSERT writes, and how the sink names its groups; None
    where no TOP (without WINDOW) feeds the sink, or a later stateful step does."""
    after: list[Step] = []
    stream: Stream | None = insert.stream
    upto: int | None = None
    while stream is not None:
        for step in reversed(stream.steps[:upto]):
            if isinstance(step, TopStep | WindowTopStep):
                return _through_to_sink(step, list(reversed(after)))
            if step.stateful:
                return None
            if step.inputs:
                tops = [
                    s
                    for s in Lineage(program).steps(insert.stream)
                    if isinstance(s, TopStep | WindowTopStep)
                ]
                if not tops:
                    return None
                return TopGroups(
                    tops[0], None, step, f"its rows meet others' in {_keyword_text(step)}"
                )
            after.append(step)
        stream, upto = origin_stream(program, stream) or (None, None)
    return None


def _through_to_sink(top: TopStep | WindowTopStep, after: list[Step]) -> TopGroups:
    """Follow the TOP's group columns (after a WINDOW, its window's too: in update mode
    each micro-batch holds a changed window's rows so far) through the steps after it,
    renamed as they rename them; a step that drops rows or a group column is the blocker."""
    groups = (*top.keys, *(("window_start", "window_end") if top.window else ()))
    names = {k.lower(): k for k in groups}
    for step in after:
        if isinstance(step, RenameStep):
            renames = {i.old.value.lower(): i.new.value for i in step.node.items}
            names = {k: renames.get(v.lower(), v) for k, v in names.items()}
            continue
        if isinstance(step, SelectStep):
            kept: dict[str, str] = {}
            for item in step.node.items:
                tree = item.expr.tree
                if isinstance(tree, exp.Star):  # every column, under its name
                    kept.update({v.lower(): v for v in names.values()})
                elif isinstance(tree, exp.Column) and not tree.table:
                    output = item.alias.value if item.alias is not None else tree.name
                    kept.setdefault(tree.name.lower(), output)
            lost = [v for v in names.values() if v.lower() not in kept]
            if lost:
                return TopGroups(top, None, step, f"it leaves out the group column '{lost[0]}'")
            names = {k: kept[v.lower()] for k, v in names.items()}
            continue
        if isinstance(step, ExtendStep | SetStep | DropStep):
            if isinstance(step, DropStep):
                written = {c.value.lower() for c in step.node.columns}
            elif isinstance(step, SetStep):
                written = {i.column.value.lower() for i in step.node.items}
            else:
                written = {
                    (i.alias.value if i.alias is not None else i.expr.text).lower()
                    for i in step.node.items
                }
            hit = [v for v in names.values() if v.lower() in written]
            if hit:
                return TopGroups(top, None, step, f"it replaces the group column '{hit[0]}'")
            continue
        return TopGroups(
            top,
            None,
            step,
            f"{_keyword_text(step)} may keep none of a changed group's rows, and the "
            "group's old rows would stay",
        )
    return TopGroups(top, tuple(names[k.lower()] for k in groups))


def check_top_into_upsert(query: Query, lineage: Lineage, reporter: _OncePerPlace) -> None:
    """E0709: an upsert sink keeps one row per key; a TOP's rows that leave its top are
    deleted only where each micro-batch names their group (see :class:`TopGroups`)."""
    sink = lineage.program.sink(query.insert.sink)
    if not is_upsert(sink.connector, sink.mode):
        return
    found = top_groups(lineage.program, query.insert)
    if found is None or found.blocker is None:
        return
    chain = updating_chain(lineage.program, query.insert)
    if chain is not None and chain.consumer is found.top:
        return  # its processor emits the rows' changes by key (check_updating_chains)
    top = found.top
    reporter.error(
        Code.E0709,
        f"{query.where}: rows that leave TOP {top.node.count}'s groups could not be deleted "
        f"from the table: {found.reason}",
        _keyword(found.blocker),
        help="write the TOP's rows to the sink through steps that keep every row and the "
        "group columns (SELECT, RENAME, EXTEND), filter before the TOP, or write to a sink "
        "that appends each micro-batch's rows (mode = 'update' on console or memory)",
    )


@dataclass(frozen=True, slots=True)
class FilteredUpsert:
    """A filter between an AGGREGATE (windowed too) and an upsert sink (see
    :func:`filtered_upsert`): ``where`` the first WHERE after ``aggregate``; ``marking``:
    the WHEREs run as marks (each row's ``__flowc_op``: '+U' kept, '-D' its key deleted)
    and the SELECTs after the first carrying the mark, by ``id``; empty where refused."""

    where: WhereStep
    aggregate: AggregateStep | WindowAggregateStep
    marking: frozenset[int] = frozenset()
    carrying: frozenset[int] = frozenset()


def filtered_upsert(program: Program, insert: InsertDef) -> FilteredUpsert | None:
    """The filter between an AGGREGATE and the INSERT's upsert sink, streaming; None where
    none. In update mode each micro-batch writes a key's new row, which a WHERE drops where
    it fails, and the table would keep the old one; Flink deletes the key there (its filter
    passes the retraction of the old row, which its upsert sink takes as a delete). It runs
    marked (the sink deletes the key of a row the filter fails) where the WHEREs are in the
    INSERT's own stream, every step after the AGGREGATE keeps its key columns under their
    names, the sink's key is the AGGREGATE's (with ``window_start``), and no processor's or
    CDC source's changes reach the sink."""
    if program.settings.execution_mode == "batch":
        return None
    sink = program.sink(insert.sink)
    if not is_upsert(sink.connector, sink.mode):
        return None
    after: list[tuple[Step, bool]] = []  # sink first; whether in the INSERT's own stream
    stream: Stream | None = insert.stream
    upto: int | None = None
    while stream is not None:
        own = stream is insert.stream
        for step in reversed(stream.steps[:upto]):
            if isinstance(step, AggregateStep | WindowAggregateStep):
                wheres = [s for s, _ in after if isinstance(s, WhereStep)]
                if not wheres:
                    return None
                found = FilteredUpsert(wheres[-1], step)
                return _marked(program, insert, found, list(reversed(after)))
            if step.inputs and not step.stateful:  # UNION ALL: its branches, unmarked
                where = next((s for s, _ in reversed(after) if isinstance(s, WhereStep)), None)
                branches = [
                    *step.inputs,
                    replace(stream, steps=stream.steps[: stream.steps.index(step)]),
                ]
                return next(
                    (f for b in branches if (f := _filter_in_branch(program, b, where))), None
                )
            if step.stateful:
                return None
            after.append((step, own))
        stream, upto = origin_stream(program, stream) or (None, None)
    return None


def _filter_in_branch(
    program: Program, stream: Stream, where: WhereStep | None
) -> FilteredUpsert | None:
    """A filter between an AGGREGATE and a UNION ALL into an upsert sink (``where``: one
    after the UNION ALL), found through views: it cannot run marked (E0761)."""
    while True:
        for step in reversed(stream.steps):
            if isinstance(step, WhereStep):
                where = where or step
            elif isinstance(step, AggregateStep | WindowAggregateStep):
                return None if where is None else FilteredUpsert(where, step)
            elif step.stateful:
                return None
            for other in step.inputs:
                found = _filter_in_branch(program, other, where)
                if found is not None:
                    return found
        if not isinstance(stream.origin, FromView):
            return None
        stream = program.view(stream.origin.name).stream


def _marked(
    program: Program, insert: InsertDef, found: FilteredUpsert, after: list[tuple[Step, bool]]
) -> FilteredUpsert:
    """``found`` with its marking steps where the filter can run marked, else as it is."""
    if updating_chain(program, insert) is not None or change_flow(program).reading:
        return found  # changes of their own in the rows: not marked here
    aggregate = found.aggregate
    keys = {k.lower() for k in aggregate.keys}
    if isinstance(aggregate, WindowAggregateStep):
        keys.add("window_start")
    if {k.lower() for k in upsert_key(program.sink(insert.sink))} != keys:
        return found
    marking: set[int] = set()
    carrying: set[int] = set()
    for step, own in after:
        if isinstance(step, WhereStep):
            if not own or reads_watermark(step) is not None:
                return found
            marking.add(id(step))
        elif isinstance(step, SelectStep):
            if marking:
                carrying.add(id(step))
            kept = {
                tree.name.lower()
                for item in step.node.items
                if isinstance(tree := item.expr.tree, exp.Column)
                and not tree.table
                and (item.alias is None or item.alias.value.lower() == tree.name.lower())
            }
            if not keys <= kept:
                return found
        elif isinstance(step, ExtendStep | SetStep | DropStep):
            if isinstance(step, DropStep):
                written = {c.value.lower() for c in step.node.columns}
            elif isinstance(step, SetStep):
                written = {i.column.value.lower() for i in step.node.items}
            else:
                written = {c.name.lower() for c in step.schema[-len(step.node.items) :]}
            if keys & written:
                return found
        elif step.kind not in (StepKind.KEY_BY, StepKind.PARTITION):
            return found
    return replace(found, marking=frozenset(marking), carrying=frozenset(carrying))


def check_filter_into_upsert(query: Query, lineage: Lineage, reporter: _OncePerPlace) -> None:
    """E0761: a filter after an AGGREGATE into an upsert sink that cannot run marked
    (:func:`filtered_upsert`). A TOP so filtered is E0709's."""
    found = filtered_upsert(lineage.program, query.insert)
    if found is None or found.marking:
        return
    chain = updating_chain(lineage.program, query.insert)
    if chain is not None and chain.before_deletes:
        return  # the processor's changelog, filtered: the sink deletes by its -U rows
    step = found.aggregate
    updating = f"{'WINDOW ... ' if step.window else ''}AGGREGATE"
    reporter.error(
        Code.E0761,
        f"{query.where}: this filter (WHERE or HAVING) drops the rows the {updating} on "
        f"line {step.span.line} updates where they fail it, so a key whose new row fails it "
        f"would keep its old row in sink '{query.insert.sink}' (Flink deletes the key)",
        found.where.node.condition.span,
        help="write the WHERE in the INSERT itself, the sink keyed by the AGGREGATE's keys "
        "(window_start too) and the key columns kept as they are, so it runs as a mark that "
        "deletes the keys it fails; or filter the rows before the AGGREGATE",
    )


def _refuse_cdc_producer(query: Query, program: Program, reporter: _OncePerPlace) -> None:
    """E0299: an AGGREGATE or a TOP taking a CDC source's changes as its retract input
    (:func:`~flowc.program.cdc_producer`) whose updates go on to a step that no updating
    chain runs (:func:`updating_chain`) nor a JOIN over changes (:func:`cdc_join`)."""
    producer = cdc_producer(program, query.insert.stream)
    if producer is None:
        return
    joined = cdc_join(program, query.insert)
    if joined is not None and any(p is producer for p in joined.producers):
        return
    streams = streams_from_source(program, query.insert.stream)
    assert streams is not None and isinstance(streams[0].origin, FromSource)  # cdc_producer's
    shared = cdc_join_shared_names(program, query.insert)
    reporter.error(
        Code.E0299,
        f"{query.where}: the {keyword(producer.node)} takes the changes of source "
        f"'{streams[0].origin.name}' (debezium-json), and what follows it cannot consume "
        "its updates as a processor",
        _keyword(producer),
        help=_shared_names_help(shared)
        if shared
        else "its updates go on through KEY BY and projections into one AGGREGATE or TOP "
        "without WINDOW, then projections only, or into a JOIN ON equal columns (see "
        f"{CHANGES_DOCS})",
    )


def check_updating_chains(query: Query, lineage: Lineage, reporter: _OncePerPlace) -> None:
    """E0741-E0744: an AGGREGATE consuming a TOP's or an AGGREGATE's updates runs as a
    retracting processor (:mod:`flowc.spark.changelog_chains`) that computes count, sum,
    avg, min and max of a column; its changelog goes to an upsert sink keyed by its keys;
    both run on RocksDB, the only store Spark runs a processor on."""
    program = lineage.program
    chain = updating_chain(program, query.insert)
    if chain is None:
        _refuse_cdc_producer(query, program, reporter)
        found = cdc_top(program, query.insert)
        if found is not None:  # a projection after the TOP flowc does not trace
            reporter.error(
                Code.E0299,
                f"{query.where}: the TOP over the changes of source '{found.source.name}' "
                "runs as a processor only where plain columns follow it",
                _keyword(found.top),
                help="after the TOP, SELECT plain columns (or *), RENAME or DROP only",
            )
        return
    consumer, producer = chain.consumer, chain.producer
    origin = chain.origin_text("" if producer is None else keyword(producer.node))
    chosen = store_other_than_rocksdb(program.settings)
    if chosen is not None:
        reporter.error(
            Code.E0744,
            f"{query.where}: "
            + (
                f"the {keyword(consumer.node)} consuming the {origin} runs as a stateful "
                "processor, which needs the "
                if producer is None
                else f"the {origin} and the AGGREGATE consuming its updates run as stateful "
                "processors, which need the "
            )
            + f"RocksDB state store, and the job sets {chosen}",
            _keyword(consumer),
            help="SET state.backend.type = 'rocksdb' (or leave it out): Spark runs "
            "transformWithState processors only on RocksDB",
        )
    if isinstance(producer, AggregateStep):
        consumed = f"the {keyword(consumer.node)} on line {consumer.span.line} consumes its updates"
        for item in _uncomputed_calls(producer, chain.producer_input):
            reporter.error(
                Code.E0741,
                f"{query.where}: the AGGREGATE runs as a processor, as {consumed}, and "
                f"computes only count, sum, avg, min and max of a column: not "
                f"'{item.expr.text}'",
                item.expr.span,
                help=_CALLS_HELP,
            )
    if isinstance(consumer, TopStep):
        _check_top_over_updates(query, program, chain, origin, reporter)
        return
    for item in _uncomputed_calls(consumer, chain.input):
        reporter.error(
            Code.E0741,
            f"{query.where}: the AGGREGATE reads the updates of the {origin}, and "
            "retracts a "
            f"row's contribution only for count, sum, avg, min and max of a column: not "
            f"'{item.expr.text}'",
            item.expr.span,
            help=_CALLS_HELP,
        )
    sink = program.sink(query.insert.sink)
    if not is_upsert(sink.connector, sink.mode):
        reporter.error(
            Code.E0743,
            f"{query.where}: the AGGREGATE's results change with the {origin}, and sink "
            f"'{sink.name}' cannot apply "
            "updates and deletes",
            query.insert.span,
            help="write to an upsert sink keyed by the AGGREGATE's keys (connector = 'files' "
            "with mode = 'update', or 'postgres'), or run the job in batch mode",
        )
        return
    key = upsert_key(sink)
    if {k.lower() for k in key} != {k.lower() for k in consumer.keys}:
        reporter.error(
            Code.E0742,
            f"{query.where}: the sink's key ({', '.join(key) or 'none'}) is not the "
            f"AGGREGATE's keys ({', '.join(consumer.keys)}), which its updates and deletes "
            "name",
            query.insert.span,
            help=f"give sink '{sink.name}' key = '{', '.join(consumer.keys)}'",
        )


_CALLS_HELP = (
    "write the call as count(*), count(col), sum(col), avg(col) (not of a DECIMAL: CAST it "
    "to DOUBLE first), min(col) or max(col), computing any expression in an EXTEND before "
    "the first step"
)


def _uncomputed_calls(step: AggregateStep, input: Schema) -> list[ast.SelectItem]:
    """The items of an updating pipeline's AGGREGATE its processor does not compute
    (:func:`~flowc.spark.changelog_chains.changelog_call`, over ``input``, the step's
    input row; an avg of a DECIMAL, whose result is the avg's DECIMAL type)."""
    found = []
    values = step.schema[len(step.keys) :]
    for item, column in zip(step.node.items, values, strict=True):
        call = changelog_call(item.expr.tree, input)
        if call is None or (call[0] == "avg" and column.type.lower().startswith("decimal")):
            found.append(item)
    return found


def check_cdc_joins(query: Query, lineage: Lineage, reporter: _OncePerPlace) -> None:
    """E0742-E0744 for a JOIN consuming a CDC source's changes (Flink's regular join over
    updates), which runs as a processor (ChangelogJoin) emitting the joined rows' changes
    by the sink's key: an upsert sink whose key holds, for each equality of the ON, one of
    its two columns (so one processor group holds every row of a sink key, and finds two
    rows with one key), on the RocksDB store."""
    program = lineage.program
    joined = cdc_join(program, query.insert)
    if joined is None:
        return
    origin = f"changes of {joined.origin}"
    chosen = store_other_than_rocksdb(program.settings)
    if chosen is not None:
        reporter.error(
            Code.E0744,
            f"{query.where}: the JOIN consuming the {origin} runs as a stateful processor, "
            f"which needs the RocksDB state store, and the job sets {chosen}",
            joined.join.node.span,
            help="SET state.backend.type = 'rocksdb' (or leave it out): Spark runs "
            "transformWithState processors only on RocksDB",
        )
    for producer in joined.producers:
        if not isinstance(producer, AggregateStep):
            continue  # none, or a TOP: its ORDER BY is any expression
        for item in _uncomputed_calls(producer, ()):
            reporter.error(
                Code.E0741,
                f"{query.where}: the AGGREGATE runs as a processor, as the JOIN on line "
                f"{joined.join.span.line} consumes its updates, and computes only count, sum, "
                f"avg, min and max of a column: not '{item.expr.text}'",
                item.expr.span,
                help=_CALLS_HELP,
            )
    sink = program.sink(query.insert.sink)
    wanted = join_key_columns(joined)
    pairs = " and ".join(wanted)
    if not is_upsert(sink.connector, sink.mode):
        reporter.error(
            Code.E0743,
            f"{query.where}: the JOIN's rows change with the {origin}, and sink "
            f"'{sink.name}' cannot apply updates and deletes",
            query.insert.span,
            help=f"write to an upsert sink (connector = 'files' with mode = 'update', or "
            f"'postgres') whose key holds {pairs} and what makes a joined row unique",
        )
        return
    row_key = join_row_key(program, query.insert, joined)
    if not row_key or not all(
        any(c in row_key for c in columns) for columns in _join_key_choices(joined)
    ):
        padded = (
            f" ({joined.kind.value} JOIN: a row without a match has NULL in the other "
            "side's columns, so the key holds the kept side's)"
            if any(joined.preserved)
            else ""
        )
        reporter.error(
            Code.E0742,
            f"{query.where}: the sink's key ({', '.join(upsert_key(sink)) or 'none'}) does not "
            f"hold the JOIN's key ({pairs}) as joined columns passed on unchanged, and the "
            f"JOIN's updates and deletes name its rows by the sink's key{padded}",
            query.insert.span,
            help=f"give sink '{sink.name}' a key of joined columns with {pairs} among them "
            "(e.g. the stream's id and its join column): Flink 2.3 gives this join no upsert "
            "key, so no other key is known to name one joined row",
        )


def _join_key_choices(joined: CdcJoin) -> list[tuple[str, ...]]:
    """Per ON equality, the columns of which the sink's key must hold one (an INNER JOIN:
    either; an outer one: each preserved side's, as a padded row has NULL in the other's;
    FULL: both, each column then naming its side's padded rows)."""
    keep_left, keep_right = joined.preserved
    choices: list[tuple[str, ...]] = []
    for a, b in joined.pairs:
        if keep_left and keep_right:
            choices += [(a,), (b,)]
        elif keep_left or keep_right:
            choices.append((a,) if keep_left else (b,))
        else:
            choices.append((a, b))
    return choices


def join_key_columns(joined: CdcJoin) -> list[str]:
    """The sink key's join columns, as a message names them ("a or b", "a")."""
    return [" or ".join(columns) for columns in _join_key_choices(joined)]


def _check_top_over_updates(
    query: Query,
    program: Program,
    chain: UpdatingChain,
    origin: str,
    reporter: _OncePerPlace,
) -> None:
    """E0743/E0742 for a TOP over an AGGREGATE's updates: its changelog names rows by
    Flink's upsert key, the PER columns and the rank where the rank reaches the sink, else
    the updating AGGREGATE's keys (each as the sink's column names it), so the upsert sink
    must be keyed so."""
    sink = program.sink(query.insert.sink)
    ranked = not chain.row_keys
    wanted = list(chain.sink_key)
    if not is_upsert(sink.connector, sink.mode):
        reporter.error(
            Code.E0743,
            f"{query.where}: the TOP's rows change with the {origin}, and sink "
            f"'{sink.name}' cannot apply updates and deletes",
            query.insert.span,
            help=f"write to an upsert sink keyed by {', '.join(wanted)} (connector = 'files' "
            "with mode = 'update', or 'postgres'), or run the job in batch mode",
        )
        return
    key = upsert_key(sink)
    if not wanted:  # a CDC source's: its PRIMARY KEY (or the PER columns) left out
        reporter.error(
            Code.E0742,
            f"{query.where}: the TOP's upsert key, "
            + (
                "its PER columns and its rank"
                if ranked
                else f"the PRIMARY KEY of source '{chain.source}' (its rank is not selected)"
            )
            + ", does not reach the sink unchanged, and its updates and deletes name rows by it",
            query.insert.span,
            help="select the key's columns as they are after the TOP",
        )
        return
    if {k.lower() for k in key} != {k.lower() for k in wanted}:
        what = (
            f"the PER columns and the rank ({', '.join(wanted)})"
            if ranked
            else f"the updating AGGREGATE's keys ({', '.join(wanted)}), as no rank is selected"
            if chain.producer is not None
            else f"the PRIMARY KEY of source '{chain.source}' ({', '.join(wanted)}), as no "
            "rank is selected"
        )
        reporter.error(
            Code.E0742,
            f"{query.where}: the sink's key ({', '.join(key) or 'none'}) is not the TOP's "
            f"upsert key, {what}, which its updates and deletes name",
            query.insert.span,
            help=f"give sink '{sink.name}' key = '{', '.join(wanted)}'",
        )


def check_watermark_reads(query: Query, lineage: Lineage, reporter: _OncePerPlace) -> None:
    """E0740: the stateful processor that reads CURRENT_WATERMARK on Spark runs in an
    append-mode query, on the RocksDB store (the only one Spark runs a processor on,
    job-wide); W0041: a second query reading it judges rows by micro-batches of its own
    (docs/language.md, "CURRENT_WATERMARK on Spark")."""
    warned = False
    for step in query.steps:
        if reads_watermark(step) is None:
            continue
        earlier = lineage.reader_queries()
        first = earlier[0] if earlier else query.insert
        if first is not query.insert and not warned:
            warned = True
            reporter.warning(
                Code.W0041,
                f"{query.where} and INSERT INTO {first.sink} read CURRENT_WATERMARK each in a "
                "Spark query of its own, each judging rows by its own micro-batches",
                _keyword(step),
                help="where the two split the input alike (a files source with "
                "max_files_per_trigger, its files in place at the start) each row is judged "
                "alike in both, as in Flink; where input arrives while they run, a row near "
                "the watermark can pass both routes or neither (docs/language.md, "
                '"CURRENT_WATERMARK on Spark")',
            )
        if query.mode != "append":
            reporter.error(
                Code.E0740,
                f"{query.where}: {_keyword_text(step)} reading CURRENT_WATERMARK runs only in "
                "append mode",
                _keyword(step),
                help="write this query with mode = 'append': Spark runs the processor that "
                "reads the watermark only there",
            )
        found = lineage.place(query.insert, step)
        before = lineage.steps(*found) if found is not None else []
        sources = lineage.watermarked_sources(query.insert.stream)
        if any(isinstance(s, JoinStep) for s in before) or len(sources) > 1:
            reporter.error(
                Code.E0740,
                f"{query.where}: {_keyword_text(step)} reading CURRENT_WATERMARK after a "
                "stream-stream JOIN, or in a query reading more than one watermarked source"
                + (f" ({', '.join(sorted(sources))})" if len(sources) > 1 else ""),
                _keyword(step),
                help="Spark's micro-batch watermark is one for the whole query (the least "
                "of its sources'), and no JOIN holds it back by its time bound as Flink's "
                "does: read CURRENT_WATERMARK before the JOIN, in a query of one source",
            )
        chosen = store_other_than_rocksdb(lineage.program.settings)
        if chosen is not None:
            reporter.error(
                Code.E0740,
                f"{_keyword_text(step)} reading CURRENT_WATERMARK needs the RocksDB state "
                f"store, and the job sets {chosen}",
                _keyword(step),
                help="SET state.backend.type = 'rocksdb' (or leave it out): Spark runs the "
                "processor that reads the watermark only on RocksDB",
            )


def check_current_watermark(program: Program, reporter: Reporter) -> None:
    """E0610 for every target, not only Spark (Flink refuses these too): CURRENT_WATERMARK
    of a column that is not a time attribute with a watermark where it is read, or in
    batch mode, where no column is one. Reported at each call."""
    if not any(
        reads_watermark(step) is not None
        for stream in [*(v.stream for v in program.views), *(i.stream for i in program.inserts)]
        for step in steps_within(stream)
    ):
        return
    lineage = Lineage(program, readers_strip=False)
    once = _OncePerPlace(reporter)
    batch = program.settings.execution_mode == "batch"
    for insert in program.inserts:
        for step in lineage.steps(insert.stream):
            read = reads_watermark(step)
            if read is None:
                continue
            column = read.column
            if batch:
                message = (
                    f"CURRENT_WATERMARK({column}) in batch mode, where no column is a time "
                    "attribute (Flink 2.3 refuses it: its argument must be a rowtime attribute)"
                )
                help_text = (
                    "run the job in streaming mode, or leave CURRENT_WATERMARK out: a batch "
                    "job reads its whole input, with no row late"
                )
            elif column not in lineage.columns_before(insert, step):
                message = f"CURRENT_WATERMARK({column}): '{column}' carries no watermark here"
                help_text = (
                    "read the watermark of the column a source's WATERMARK FOR declares (or "
                    "a window's rowtime), before any step that drops it"
                )
            else:
                continue
            for span in read.calls or (_keyword(step),):
                once.error(Code.E0610, message, span, help=help_text)


def reads_watermark(step: Step) -> WatermarkRead | None:
    """What a WHERE, SELECT or EXTEND reads of CURRENT_WATERMARK; None for other steps."""
    if isinstance(step, WhereStep | SelectStep | ExtendStep):
        return step.watermark
    return None


def _kept_by_reader(read: WatermarkRead) -> frozenset[str]:
    """The watermarked columns after a WHERE reading CURRENT_WATERMARK: the processor takes
    every watermark off its input (Spark would drop the rows behind the previous batch's
    before it) and gives the time column its own back only where the condition keeps just
    rows ahead of it."""
    return frozenset({read.column}) if read.on_time is not None else frozenset()


RULES: tuple[Rule, ...] = (
    check_complete_mode,
    check_stateful_operators,
    check_session_windows,
    check_appended_aggregations,
    check_outer_joins,
    check_join_state_bounds,
    check_join_time_columns,
    check_deduplicate_within,
    check_window_time_uses,
    check_window_proctime,
    check_top_into_upsert,
    check_filter_into_upsert,
    check_updating_chains,
    check_cdc_joins,
    check_watermark_reads,
    check_over_time,
    check_match_time,
)

#: The rules that still hold in batch mode: WITHIN's processor (its own batch cases),
#: CURRENT_WATERMARK's processor, and Flink's typing of TUMBLE_PROCTIME. Output modes
#: (E0701-E0705), watermarks for outer joins and windows (E0705, E0706, E0733), state
#: bounds (W0040) and rows leaving a TOP between micro-batches (E0709) are streaming's.
BATCH_RULES: tuple[Rule, ...] = (
    check_deduplicate_within,
    check_window_proctime,
    check_watermark_reads,
    check_match_time,
)


def _aggregations(query: Query) -> list[Step]:
    return [s for s in query.stateful if s.GROUPS]


def _window_end_kept(step: Step, columns: frozenset[str]) -> frozenset[str]:
    """After an aggregation or TOP, only ``window_end`` and ``window_time`` (if asked for)
    of a window over a watermarked column carry the watermark (the generated program gives
    them the window's watermark metadata, as Spark's window_time does), so that a later
    window, TOP, time-bounded JOIN or DEDUPLICATE can follow in append mode; every other
    column has none."""
    window = step.window
    if not isinstance(step, WindowAggregateStep) or window is None:
        return frozenset()
    time_column = window.args[0].tree
    if isinstance(time_column, exp.Column) and time_column.name in columns:
        kept = {"window_end"}
        if step.window_time is not None:
            kept.add(step.window_time)
        return frozenset(kept)
    return frozenset()


def _keyword_text(step: Step) -> str:
    """The step's keyword with its article: "an AGGREGATE", "a WINDOW", "a JOIN"."""
    word = keyword(step.window or step.node)
    return f"{'an' if word[0] in 'AEIOU' else 'a'} {word}"


# ---------------------------------------------------------------- event time


class Lineage:
    """What the rules ask about a program's streams, memoized across its queries: the steps
    a query runs (:meth:`steps`) and which columns carry a watermark where
    (:meth:`watermarked`, :meth:`columns_before`)."""

    def __init__(self, program: Program, *, readers_strip: bool = True) -> None:
        self.program = program
        #: Whether a step reading CURRENT_WATERMARK takes the watermarks off (Spark's
        #: processor does); Flink's time attributes pass it (:attr:`time_attributes`).
        self.readers_strip = readers_strip
        self._time_attributes: Lineage | None = None
        self._reader_queries: list[InsertDef] | None = None
        #: watermarked() by (id(stream), upto): views are read by many streams.
        self._watermarks: dict[tuple[int, int | None], frozenset[str]] = {}
        #: Per INSERT (by id of its stream): where each step of its lineage stands.
        self._places: dict[int, dict[int, tuple[Stream, int]]] = {}
        #: _aggregated() by (id(stream), upto).
        self._aggregations: dict[tuple[int, int | None], bool] = {}
        #: processing() by (id(stream), upto).
        self._processing: dict[tuple[int, int | None], frozenset[str]] = {}
        #: window_times() by (id(stream), upto).
        self._window_times: dict[tuple[int, int | None], frozenset[str]] = {}
        #: Whether any source declares a WATERMARK: every watermark starts at one, so
        #: without one no column anywhere carries a watermark (nothing to work out).
        self._any_watermark = any(s.watermark is not None for s in program.sources)
        #: Whether any windowed AGGREGATE asks for window_time (else there is none to find).
        self._rowtime_tops: frozenset[int] | None = None
        self._asks_window_time = any(
            isinstance(step, WindowAggregateStep) and step.window_time is not None
            for stream in [*(v.stream for v in program.views), *(i.stream for i in program.inserts)]
            for step in steps_within(stream)
        )

    @property
    def rowtime_tops(self) -> frozenset[int]:
        """The TOPs keeping each group's first row by event time (by ``id``): a processor
        writes each group's row once (:func:`~flowc.graph.changelog.rowtime_first_tops`,
        the time the only BY expression)."""
        if self._rowtime_tops is None:
            self._rowtime_tops = rowtime_first_tops(self.program, alone=True)
        return self._rowtime_tops

    def place(self, insert: InsertDef, target: Step) -> tuple[Stream, int] | None:
        """Where ``target`` stands in the INSERT's lineage: its stream and index."""
        return self._place(insert, target)

    def watermarked_sources(self, stream: Stream) -> frozenset[str]:
        """The sources declaring a WATERMARK that the stream reads, through its views, side
        outputs, JOINs and UNION ALLs."""
        found: set[str] = set()
        seen: set[int] = set()
        todo = [stream]
        while todo:
            current = todo.pop()
            if id(current) in seen:
                continue
            seen.add(id(current))
            origin = current.origin
            if isinstance(origin, FromSource):
                if self.program.source(origin.name).watermark is not None:
                    found.add(origin.name)
            else:
                read = self._origin_stream(current)
                if read is not None:
                    todo.append(read[0])
            for step in current.steps:
                todo.extend(step.inputs)
        return frozenset(found)

    def reader_queries(self) -> list[InsertDef]:
        """The INSERTs whose queries read CURRENT_WATERMARK, in program order (memoized)."""
        if self._reader_queries is None:
            self._reader_queries = [
                insert
                for insert in self.program.inserts
                if any(reads_watermark(s) is not None for s in self.steps(insert.stream))
            ]
        return self._reader_queries

    @property
    def time_attributes(self) -> Lineage:
        """The same program's lineage as Flink's time attributes follow it: a step reading
        CURRENT_WATERMARK keeps them (on Spark its processor takes the watermarks off)."""
        if not self.readers_strip:
            return self
        if self._time_attributes is None:
            self._time_attributes = Lineage(self.program, readers_strip=False)
        return self._time_attributes

    def watermarked(self, stream: Stream, upto: int | None = None) -> frozenset[str]:
        """Columns that carry an event-time watermark after the stream's steps.

        Memoized, and what it reads (upstream views, JOIN and UNION ALL inputs) is worked
        out first with an explicit stack: a chain of thousands of views needs no deep
        recursion, and a view read by many others is worked out once.
        """
        if not self._any_watermark:
            return frozenset()
        return _bottom_up(self._watermarks, stream, upto, self._lineage_inputs, self._watermarked)

    def _origin_stream(self, stream: Stream) -> tuple[Stream, int | None] | None:
        """:func:`origin_stream` in this lineage's program."""
        return origin_stream(self.program, stream)

    def _watermarked(self, stream: Stream, upto: int | None) -> frozenset[str]:
        """:meth:`watermarked`, once what it reads is known."""
        columns = self._origin_watermarked(stream)
        for step in stream.steps[:upto]:
            columns = self._after(step, columns)
        return columns

    def _origin_watermarked(self, stream: Stream) -> frozenset[str]:
        """Watermarked columns where the stream starts."""
        origin = stream.origin
        if isinstance(origin, FromSource):
            watermark = self.program.source(origin.name).watermark
            return frozenset({watermark.column} if watermark else ())
        if isinstance(origin, FromView):
            return self.watermarked(self.program.view(origin.name).stream)
        if isinstance(origin, FromSourceErrors):
            return frozenset()  # a malformed record's event time is unknown
        view, output = self.program.side_output(origin)
        return self.watermarked(view.stream, upto=output.step_index + 1)

    def processing(self, stream: Stream, upto: int | None = None) -> frozenset[str]:
        """Columns that are a source's processing time (its ``PROCTIME()`` column) after
        the stream's steps: read unchanged, renamed or selected, as Flink keeps a time
        attribute; an aggregation or TOP keeps none (memoized like :meth:`watermarked`)."""
        return _bottom_up(
            self._processing, stream, upto, self._lineage_inputs, self._processing_columns
        )

    def _processing_columns(self, stream: Stream, upto: int | None) -> frozenset[str]:
        """:meth:`processing`, once what it reads is known."""
        origin = stream.origin
        if isinstance(origin, FromSource):
            proctime = self.program.source(origin.name).proctime
            columns = frozenset({proctime} if proctime else ())
        elif isinstance(origin, FromView):
            columns = self.processing(self.program.view(origin.name).stream)
        elif isinstance(origin, FromSourceErrors):
            columns = frozenset()
        else:
            view, output = self.program.side_output(origin)
            columns = self.processing(view.stream, upto=output.step_index + 1)
        for step in stream.steps[:upto]:
            if step.GROUPS:
                columns = frozenset()
            elif isinstance(step, JoinStep | DimensionJoinStep):
                columns |= self.processing(step.inputs[0])
            elif isinstance(step, UnionStep):
                for other in step.inputs:
                    columns &= self.processing(other)
            else:
                columns = step.passes_on(columns)
        return columns

    def window_times(self, stream: Stream, upto: int | None = None) -> frozenset[str]:
        """Columns that are a window's ``window_time`` with the watermark after the
        stream's steps, read as they are (renamed, selected): where Spark would compare
        one with the watermark, it can drop a row (:func:`check_window_time_uses`).
        Memoized like :meth:`watermarked`."""
        if not self._asks_window_time:
            return frozenset()
        return _bottom_up(
            self._window_times, stream, upto, self._lineage_inputs, self._window_time_columns
        )

    def _window_time_columns(self, stream: Stream, upto: int | None) -> frozenset[str]:
        """:meth:`window_times`, once what it reads is known."""
        origin = stream.origin
        if isinstance(origin, FromView):
            columns = self.window_times(self.program.view(origin.name).stream)
        elif isinstance(origin, FromSideOutput):
            view, output = self.program.side_output(origin)
            columns = self.window_times(view.stream, upto=output.step_index + 1)
        else:
            columns = frozenset()
        marked = self._origin_watermarked(stream)
        for step in stream.steps[:upto]:
            if step.GROUPS:
                kept = _window_end_kept(step, marked)
                columns = kept - {"window_end"}
            elif isinstance(step, JoinStep | DimensionJoinStep):
                columns |= self.window_times(step.inputs[0])
            elif isinstance(step, UnionStep):
                for other in step.inputs:
                    columns &= self.window_times(other)
            elif self.readers_strip and (read := reads_watermark(step)) is not None:
                columns &= _kept_by_reader(read)
            else:
                columns = step.passes_on(columns)
            marked = self._after(step, marked)
        return columns

    def window_times_before(self, insert: InsertDef, target: Step) -> frozenset[str]:
        """:meth:`window_times` at the input of ``target``."""
        if not self._asks_window_time:
            return frozenset()  # no window_time anywhere (before finding the place)
        found = self._place(insert, target)
        if found is None:
            return frozenset()
        stream, index = found
        return self.window_times(stream, upto=index)

    def processing_before(self, insert: InsertDef, target: Step) -> frozenset[str]:
        """Processing-time columns at the input of ``target``."""
        found = self._place(insert, target)
        if found is None:
            return frozenset()
        stream, index = found
        return self.processing(stream, upto=index)

    def _after(self, step: Step, columns: frozenset[str]) -> frozenset[str]:
        if not columns and not isinstance(step, JoinStep):
            return columns  # no step but a JOIN's other side brings a watermark in
        if step.GROUPS:
            return _window_end_kept(step, columns)
        if isinstance(step, JoinStep):
            return columns | self.watermarked(step.inputs[0])
        if isinstance(step, UnionStep):
            for other in step.inputs:
                columns &= self.watermarked(other)
            return columns
        if self.readers_strip and (read := reads_watermark(step)) is not None:
            return step.passes_on(columns) & _kept_by_reader(read)
        return step.passes_on(columns)

    def steps(self, stream: Stream, upto: int | None = None) -> list[Step]:
        """Every step the query runs: upstream views' first, then the stream's own.

        A step the query runs more than once (a view read twice: a self-join, a UNION ALL
        of the same input) is listed twice, not once per path to it: the paths can be
        exponentially many (a ladder of views each reading the one before twice), and the
        checks only ask whether a second stateful operator runs. So the part of the lineage
        below a (stream, upto) is walked twice at most: after that every step in it is
        listed twice already. An explicit stack rather than nested generators, which made a
        chain of n views cost n squared (each step passed up through every generator below).
        """
        steps: list[Step] = []
        walked: dict[tuple[int, int | None], int] = {}
        stack: list[tuple[Stream, int | None] | Step] = [(stream, upto)]
        while stack:
            item = stack.pop()
            if not isinstance(item, tuple):
                steps.append(item)
                continue
            stream, upto = item
            key = (id(stream), upto)
            times = walked.get(key, 0)
            if times == 2:
                continue
            walked[key] = times + 1
            read = self._origin_stream(stream)
            todo: list[tuple[Stream, int | None] | Step] = [read] if read is not None else []
            for step in stream.steps[:upto]:
                todo.extend((other, None) for other in step.inputs)
                todo.append(step)
            stack.extend(reversed(todo))
        listed: dict[int, int] = {}
        twice: list[Step] = []
        for step in steps:  # a step under two side outputs' (stream, upto) came more often
            times = listed.get(id(step), 0)
            if times < 2:
                listed[id(step)] = times + 1
                twice.append(step)
        return twice

    def running_results_before(self, insert: InsertDef, target: Step) -> bool:
        """Whether an AGGREGATE or TOP without WINDOW runs upstream of ``target`` (on any
        of its inputs): its results change as rows arrive and are never final, so append
        mode cannot write them (E0704). Walked only for a diagnostic."""
        found = self._place(insert, target)
        if found is None:
            return False
        todo: list[tuple[Stream, int | None]] = [found, *((o, None) for o in target.inputs)]
        while todo:
            stream, upto = todo.pop()
            for step in stream.steps[:upto]:
                if isinstance(step, AggregateStep | TopStep) and step.window is None:
                    return True
                todo.extend((other, None) for other in step.inputs)
            read = self._origin_stream(stream)
            if read is not None:
                todo.append(read)
        return False

    def aggregates_before(self, insert: InsertDef, target: Step) -> bool:
        """Whether an aggregation runs upstream of ``target`` (on any of its inputs)."""
        found = self._place(insert, target)
        if found is None:
            return False
        stream, index = found
        return self._aggregated(stream, index) or any(
            self._aggregated(other, None) for other in target.inputs
        )

    def _aggregated(self, stream: Stream, upto: int | None) -> bool:
        """Whether an aggregation runs in the lineage of the stream's first ``upto`` steps."""
        return _bottom_up(self._aggregations, stream, upto, self._lineage_inputs, self._aggregates)

    def _lineage_inputs(self, stream: Stream, upto: int | None) -> list[tuple[Stream, int | None]]:
        """Every stream the stream's first ``upto`` steps read: its origin, and the other
        inputs of its JOIN and UNION ALL steps (the only steps with inputs)."""
        read = self._origin_stream(stream)
        inputs: list[tuple[Stream, int | None]] = [read] if read is not None else []
        for step in stream.steps[:upto]:
            inputs.extend((other, None) for other in step.inputs)
        return inputs

    def _aggregates(self, stream: Stream, upto: int | None) -> bool:
        """:meth:`_aggregated`, once what it reads is known."""
        return any(
            self._aggregations[(id(s), u)] for s, u in self._lineage_inputs(stream, upto)
        ) or any(step.GROUPS for step in stream.steps[:upto])

    def _place(self, insert: InsertDef, target: Step) -> tuple[Stream, int] | None:
        places = self._places.get(id(insert.stream))
        if places is None:
            places = self._places[id(insert.stream)] = _places(self.program, insert.stream)
        return places.get(id(target))

    def columns_before(self, insert: InsertDef, target: Step) -> frozenset[str]:
        """Watermarked columns at the input of ``target`` (found in the query's lineage)."""
        if not self._any_watermark:
            return frozenset()
        found = self._place(insert, target)
        if found is None:
            return frozenset()
        stream, index = found
        return self.watermarked(stream, upto=index)


def steps_within(stream: Stream) -> Iterator[Step]:
    """The stream's steps and those of the streams its JOIN and UNION ALL steps read
    (each view's own are walked from the view)."""
    todo = [stream]
    while todo:
        for step in todo.pop().steps:
            yield step
            todo.extend(step.inputs)


class _OncePerPlace:
    """A step in a view runs in every query that reads the view: report its problem once."""

    def __init__(self, reporter: Reporter) -> None:
        self.reporter = reporter
        self.seen: set[tuple[Code, Span]] = set()

    def error(self, code: Code, message: str, span: Span, help: str | None = None) -> None:
        if (code, span) not in self.seen:
            self.seen.add((code, span))
            self.reporter.error(code, message, span, help)

    def warning(self, code: Code, message: str, span: Span, help: str | None = None) -> None:
        if (code, span) not in self.seen:
            self.seen.add((code, span))
            self.reporter.warning(code, message, span, help)


def _exact_deduplicate(node: ast.Deduplicate, watermarked: frozenset[str]) -> str:
    """What to write instead of DEDUPLICATE ... WITHIN: deduplications Spark runs exactly."""
    time = next(
        (
            c.tree.name
            for c in node.columns
            if isinstance(c.tree, exp.Column) and c.tree.name in watermarked
        ),
        None,
    )
    if not node.columns:
        time = min(watermarked)
        return (
            f"drop WITHIN: a whole-row DEDUPLICATE compares '{time}' too, so Spark drops "
            f"copies of a row and forgets each once the watermark passes its '{time}'"
        )
    on = ", ".join(" ".join(c.text.split()) for c in node.columns)
    if time is not None:
        return (
            f"drop WITHIN: with '{time}' among the ON columns Spark drops copies of an event "
            f"and forgets each once the watermark passes it (DEDUPLICATE ON {on})"
        )
    time = min(watermarked)
    return (
        f"drop WITHIN to keep every key forever (DEDUPLICATE ON {on}), or add the "
        f"watermarked '{time}' to ON to drop copies of an event and forget each once the "
        f"watermark passes it (DEDUPLICATE ON {on}, {time})"
    )


def _keyword(step: Step) -> Span:
    return step.window.keyword_span if step.window is not None else step.node.keyword_span


def _has_time_bound(condition: exp.Expr, watermarked: frozenset[str]) -> bool:
    """A range condition (BETWEEN, <, <=, >, >=) that reads a watermarked column."""
    for node in condition.walk():
        if isinstance(node, exp.Between | exp.LT | exp.LTE | exp.GT | exp.GTE) and any(
            c.name in watermarked for c in node.find_all(exp.Column)
        ):
            return True
    return False


def _places(program: Program, stream: Stream) -> dict[int, tuple[Stream, int]]:
    """Where each step (by id) stands that a search from ``stream`` finds first: the stream
    holding it and its index there, searching each step's inputs after it, then upstream
    views. One walk for all steps, each stream searched once (a search per step, from the
    top and without remembering searched streams, was exponential on ladders of views)."""
    places: dict[int, tuple[Stream, int]] = {}
    searched = {id(stream)}
    stack = [_search(program, stream)]
    while stack:
        found = next(stack[-1], None)
        if found is None:
            stack.pop()
            continue
        holder, index, step = found
        if step is not None:
            places.setdefault(id(step), (holder, index))
        elif id(holder) not in searched:
            searched.add(id(holder))
            stack.append(_search(program, holder))
    return places


def _search(program: Program, stream: Stream) -> Iterator[tuple[Stream, int, Step | None]]:
    """What a search of ``stream`` meets, in order: each step (with the stream and index),
    then the streams it reads (with no step), then the upstream view's stream."""
    for index, step in enumerate(stream.steps):
        yield stream, index, step
        for other in step.inputs:
            yield other, -1, None
    origin = stream.origin
    if isinstance(origin, FromView):
        yield program.view(origin.name).stream, -1, None
    if isinstance(origin, FromSideOutput):
        yield program.view(origin.view).stream, -1, None


Key = tuple[Stream, int | None]
T = TypeVar("T")


def _bottom_up(
    memo: dict[tuple[int, int | None], T],
    stream: Stream,
    upto: int | None,
    inputs: Callable[[Stream, int | None], list[Key]],
    compute: Callable[[Stream, int | None], T],
) -> T:
    """``compute(stream, upto)``, memoized by (id(stream), upto), after every (stream, upto)
    it reads (``inputs``) is in ``memo``: worked out first with an explicit stack, so a
    chain of thousands of views needs no deep recursion, and a view read by many others is
    worked out once."""
    pending = [(stream, upto)]
    while pending:
        current, until = pending[-1]
        if (id(current), until) in memo:
            pending.pop()
            continue
        missing = [(s, u) for s, u in inputs(current, until) if (id(s), u) not in memo]
        if missing:
            pending.extend(missing)
            continue
        pending.pop()
        memo[(id(current), until)] = compute(current, until)
    return memo[(id(stream), upto)]
