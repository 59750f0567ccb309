"""Steps and sinks Flink's planner refuses over an updating input (E0745-E0748).

Flink 2.3 refuses, with "... doesn't support consuming update and delete changes which is
produced by node ...", a WindowRank, an IntervalJoin, an OverAggregate and an append-only
table sink fed by a GroupAggregate, a Rank or an outer Join (docs/language.md, "Changelog
modes"). flowc refuses the same programs before anything runs, at the consuming step (or
the INSERT), naming the step that produces the updates, in streaming mode only (a batch
run has no changelog). Each stream is walked once, each view's result memoized: linear.

Two shapes are inserts here although Flink's plan marks them updating. An AGGREGATE or
TOP keyed by a column carrying the watermark, written in append mode, writes each group
once, final (Spark's append mode; E0704 lets it through). A join with a bounded TABLE is
run as Spark's stream-static join over the table read whole before the first
micro-batch, so no row it writes is ever retracted (Flink's regular Join may retract a
padded row when the table's row arrives late).
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from flowc.analyze.step_common import keyword
from flowc.catalog import is_upsert
from flowc.diagnostics import Reporter
from flowc.errorcodes import Code
from flowc.fast_dataclass import dataclass
from flowc.graph.changelog import (
    INSERT_ONLY,
    ModifyKinds,
    is_interval_join,
    produced,
    rowtime_first_tops,
)
from flowc.program import (
    AggregateStep,
    DimensionJoinStep,
    DropStep,
    ExtendStep,
    FromSideOutput,
    FromView,
    JoinStep,
    MatchStep,
    OverStep,
    Program,
    RenameStep,
    SelectStep,
    SetStep,
    Step,
    Stream,
    TopStep,
    WhereStep,
    WindowAggregateStep,
    WindowTopStep,
)
from flowc.spans import Span
from flowc.spark.streaming import Lineage
from flowc.vocabulary import JoinKind

#: Sinks that cannot show a change: they write each row they get, once.
APPEND_ONLY_CONNECTORS = frozenset({"files", "kafka"})


@dataclass(frozen=True, slots=True)
class Changes:
    """What a stream carries: its kinds of change, and the step that last made updates."""

    kinds: ModifyKinds
    producer: Step | None = None
    #: Whether its rows are a window aggregate's, through row-wise steps only: a TOP per
    #: ``window_start, window_end`` over them is Flink's WindowRank (insert-only).
    windowed: bool = False
    #: Whether every step making its updates is an AGGREGATE or TOP keyed by a column that
    #: carries the watermark: in append mode Spark writes each of its groups once, final
    #: (the rule E0704 lets through), so an append-only sink takes its rows.
    final_in_append: bool = False


NONE = Changes(INSERT_ONLY)
#: The steps that keep a window aggregate's rows as they are, row by row.
ROW_WISE = (WhereStep, SelectStep, ExtendStep, SetStep, DropStep, RenameStep)


def check_changelog_refusals(program: Program, reporter: Reporter) -> tuple[Span, ...]:
    """Refuse each step and sink Flink refuses over the updates reaching it; returns what
    the refusals cover (each refused step, each refused INSERT and the step making its
    updates), where Spark's rules need say nothing more."""
    if program.settings.execution_mode == "batch":
        return ()
    walk = _Walk(program, reporter)
    for view in program.views:
        walk.view(view.name)
    for insert in program.inserts:
        changes = walk.stream(insert.stream)
        sink = program.sink(insert.sink)
        if changes.kinds.insert_only or changes.producer is None:
            continue
        if sink.mode == "append" and changes.final_in_append:
            continue
        if sink.connector in APPEND_ONLY_CONNECTORS and not is_upsert(sink.connector, sink.mode):
            producer = changes.producer
            walk.once(
                Code.E0748,
                f"sink '{sink.name}' ({sink.connector}, mode '{sink.mode}') is append-only: it "
                f"cannot consume the {_kinds(changes.kinds)} {_named(producer)} produces",
                insert.span,
                _sink_help(program, sink.name, producer),
            )
            walk.covered.append(_keyword(producer))
    return tuple(walk.covered)


def within(inner: Span, outer: Span) -> bool:
    """Whether ``inner`` lies inside ``outer`` (same file)."""
    return (
        inner.file == outer.file
        and (inner.line, inner.column) >= (outer.line, outer.column)
        and (inner.end_line, inner.end_column) <= (outer.end_line, outer.end_column)
    )


class _Walk:
    """Each stream's changes, views memoized; each problem reported once per place."""

    def __init__(self, program: Program, reporter: Reporter) -> None:
        self.program = program
        self.reporter = reporter
        self.times = frozenset(
            s.watermark.column for s in program.sources if s.watermark is not None
        )
        self.lineage = Lineage(program)
        #: The TOPs that keep each group's first row by event time (insert-only).
        self.rowtime_tops = rowtime_first_tops(program)
        self.views: dict[str, tuple[Changes, ...]] = {}
        self.seen: set[tuple[Code, Span]] = set()
        self.covered: list[Span] = []

    def once(self, code: Code, message: str, span: Span, help: str) -> None:
        if (code, span) not in self.seen:
            self.seen.add((code, span))
            self.covered.append(span)
            self.reporter.error(code, message, span, help)

    def view(self, name: str) -> tuple[Changes, ...]:
        """The changes after each step of view ``name`` (the first: its origin's)."""
        found = self.views.get(name)
        if found is None:
            found = self._after_each(self.program.view(name).stream)
            self.views[name] = found
        return found

    def stream(self, stream: Stream) -> Changes:
        return self._after_each(stream)[-1]

    def _origin(self, stream: Stream) -> Changes:
        origin = stream.origin
        if isinstance(origin, FromView):
            return self.view(origin.name)[-1]
        if isinstance(origin, FromSideOutput):
            return self._side_output(origin)
        return NONE

    def _side_output(self, origin: FromSideOutput) -> Changes:
        view = self.program.view(origin.view)
        for output in view.side_outputs:
            if output.name == origin.output:
                return self.view(origin.view)[output.step_index + 1]
        return self.view(origin.view)[-1]

    def _after_each(self, stream: Stream) -> tuple[Changes, ...]:
        current = self._origin(stream)
        out = [current]
        for index, step in enumerate(stream.steps):
            current = self._step(step, current)
            if (
                isinstance(step, AggregateStep | TopStep)
                and current.producer is step
                and out[-1].kinds.insert_only
                and not step.inputs
            ):
                keyed = set(step.keys) & self.lineage.watermarked(stream, upto=index)
                current = replace(current, final_in_append=bool(keyed))
            out.append(current)
        return tuple(out)

    def _step(self, step: Step, main: Changes) -> Changes:
        incoming = [main, *(self.stream(s) for s in step.inputs)]
        kinds = INSERT_ONLY
        producer: Step | None = None
        final = True
        for changes in incoming:
            kinds = kinds | changes.kinds
            if not changes.kinds.insert_only:
                final = final and changes.final_in_append
                producer = producer or changes.producer
        if producer is not None and not kinds.insert_only and self._refuse(step, kinds, producer):
            self.covered.append(_keyword(producer))
        if isinstance(step, DimensionJoinStep):
            return Changes(kinds, producer, final_in_append=final)
        if isinstance(step, WindowAggregateStep):
            return Changes(INSERT_ONLY, windowed=True)
        if isinstance(step, ROW_WISE):
            windowed = main.windowed and not step.inputs
            if (
                (kinds is main.kinds or kinds == main.kinds)
                and producer is main.producer
                and windowed == main.windowed
                and final == main.final_in_append
            ):
                return main  # what it carries, unchanged (a frozen value: shared)
            return Changes(kinds, producer, windowed, final)
        if isinstance(step, TopStep) and main.windowed and _per_window(step):
            return NONE
        out = produced(step, kinds, self.times, self.rowtime_tops)
        if out.insert_only:
            return NONE
        if out == kinds and producer is not None and not _makes_updates(step):
            return Changes(out, producer, final_in_append=final)
        return Changes(out, step)

    def _refuse(self, step: Step, kinds: ModifyKinds, producer: Step) -> bool:
        """Report ``step`` if Flink refuses it over ``kinds``; whether it did."""
        interval_join = isinstance(step, JoinStep) and is_interval_join(step, self.times)
        if not (isinstance(step, WindowTopStep | OverStep | MatchStep) or interval_join):
            return False  # every step after an update comes here: most are none of these
        consumes = f"cannot consume the {_kinds(kinds)} {_named(producer)} produces"
        if isinstance(step, WindowTopStep):
            self.once(
                Code.E0745,
                f"WINDOW ... TOP at line {step.span.line} {consumes} (Flink's WindowRank "
                "takes inserts only)",
                _keyword(step),
                "put the WINDOW ... TOP before the step that updates its rows, or use TOP "
                "without WINDOW (a Top-N over updates)",
            )
        elif interval_join:
            self.once(
                Code.E0746,
                f"JOIN at line {step.span.line} bounds an event time, as Flink's IntervalJoin "
                f"does, and {consumes}",
                _keyword(step),
                "join the rows before the step that updates them, or drop the time bound "
                "from ON for a regular JOIN",
            )
        elif isinstance(step, MatchStep):
            self.once(
                Code.E0759,
                f"MATCH_RECOGNIZE at line {step.span.line} {consumes} (Flink's Match takes "
                "inserts only)",
                step.node.keyword_span,
                "match the rows before the step that updates them",
            )
        elif isinstance(step, OverStep):
            self.once(
                Code.E0747,
                f"OVER aggregate at line {step.span.line} {consumes} (Flink's OverAggregate "
                "takes inserts only)",
                _keyword(step),
                "compute the OVER aggregate before the step that updates its rows",
            )
        return True


def _makes_updates(step: Step) -> bool:
    """Whether ``step`` makes updates of its own (rather than passing on its input's)."""
    return isinstance(step, AggregateStep | TopStep) or (
        isinstance(step, JoinStep) and step.node.kind != JoinKind.INNER
    )


def _per_window(step: TopStep) -> bool:
    """Whether the TOP ranks per window (PER names ``window_start`` and ``window_end``)."""
    per = {e.tree.name for e in step.node.per if isinstance(e.tree, exp.Column)}
    return {"window_start", "window_end"} <= per and {"window_start", "window_end"} <= {
        c.name for c in step.schema
    }


def _kinds(kinds: ModifyKinds) -> str:
    return "updates and deletes" if kinds.delete else "updates"


def _named(step: Step) -> str:
    """``the TOP at line 9``, ``the WINDOW ... AGGREGATE at line 12``."""
    word = keyword(step.node)
    if step.window is not None:
        word = f"WINDOW ... {word}"
    return f"the {word} at line {step.span.line}"


def _keyword(step: Step) -> Span:
    return step.window.keyword_span if step.window is not None else step.node.keyword_span


def _sink_help(program: Program, sink: str, producer: Step) -> str:
    key = ", ".join(producer.keys) if producer.keys else "the columns that identify a row"
    if program.settings.sql_dialect == "flink":
        return (
            f"declare PRIMARY KEY ({key}) NOT ENFORCED on a files or postgres table for an "
            "upsert table, or window the rows before the step that updates them"
        )
    return (
        f"write to an upsert sink (postgres, or files with mode = 'update'; key = '{key}'), "
        "or window the rows before the step that updates them"
    )
