"""Whole-program checks, run in order once every statement is checked (cf. sqlglot's
optimizer ``RULES``): each is one function of the context and the checked program.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from flowc import ast, catalog
from flowc.analyze.context import Context
from flowc.analyze.step_common import keyword
from flowc.analyze.upsert_sinks import upsert_key as upsert_key_of
from flowc.errorcodes import Code
from flowc.flink.keygroups import (
    DEFAULT_LOWER_BOUND_MAX_PARALLELISM,
    compute_default_max_parallelism,
)
from flowc.program import (
    CHANGE_KEEPING_STEPS,
    AggregateStep,
    CdcUpsert,
    Hints,
    InsertDef,
    JoinStep,
    KeyByStep,
    PartitionByStep,
    PartitionStep,
    Program,
    Step,
    Stream,
    TopStep,
    cdc_upsert,
    change_flow,
)
from flowc.spans import Span

ProgramCheck = Callable[[Context, Program], None]


def check_has_insert(ctx: Context, program: Program) -> None:
    """A program without INSERT INTO does nothing (reported only if nothing else was)."""
    if program.inserts or ctx.reporter.has_errors:
        return
    statements = ctx.statements
    span = statements[-1].span if statements else Span(ctx.file, 1, 1, 1, 1)
    ctx.reporter.error(
        Code.E0501,
        "the program has no INSERT INTO, so the job does nothing",
        span,
        help="write results to a sink: INSERT INTO <sink> FROM <view or source> ...;",
    )


def check_error_outputs_read(ctx: Context, program: Program) -> None:
    """Malformed records routed to ``source.errors`` must be read: flowc drops none."""
    for source in program.sources:
        if source.on_error == "route" and source.name not in ctx.read_errors:
            ctx.reporter.error(
                Code.E0412,
                f"source '{source.name}' routes malformed records to "
                f"{source.name}.{catalog.ERRORS_OUTPUT}, but nothing reads them",
                ctx.on_error_spans.get(source.name, source.span),
                help=f"write them somewhere (INSERT INTO <sink> FROM {source.name}."
                f"{catalog.ERRORS_OUTPUT}), or remove on_error to fail on the first "
                "malformed record; flowc never drops records silently",
            )


#: Where E0299's help points for what takes a CDC source's changes.
CHANGES_DOCS = "docs/language.md, 'Change-data capture input'"


def changes_help(step: Step) -> str:
    """E0299's help at a step that cannot take a CDC source's changes (and at a chain's
    producer): what such a step takes, in one sentence, and where the rules are."""
    if isinstance(step, AggregateStep):
        what = (
            "an AGGREGATE takes changes without WINDOW, with keys, ending the INSERT (or "
            "a view only it reads) into an upsert sink keyed by them, only WHEREs and plain "
            "columns keeping its keys after it, or as an updating chain's first step"
        )
    elif isinstance(step, TopStep):
        what = (
            "a TOP takes changes without WINDOW, from a source whose PRIMARY KEY reaches it "
            "unchanged (no EXPLODE before it), into an upsert sink, only plain columns "
            "after it"
        )
    elif isinstance(step, JoinStep):
        what = (
            "a JOIN takes changes ON equal columns of the INSERT's source and another "
            "source, each side read directly through row-wise steps and KEY BY (an "
            "AGGREGATE or a TOP may end it), only SELECT, EXTEND, DROP or RENAME after it"
        )
    elif isinstance(step, CHANGE_KEEPING_STEPS):
        what = (
            f"a {keyword(step.node)} takes changes unless it reads CURRENT_WATERMARK or "
            f"names a column {catalog.OP_COLUMN}"
        )
    else:
        what = (
            f"{keyword(step.node)} takes no changes: row-wise steps, KEY BY, an AGGREGATE, "
            "a TOP and a JOIN do, each as its rules say"
        )
    return f"{what} (see {CHANGES_DOCS})"


def check_changes_consumed(ctx: Context, program: Program) -> None:
    """A CDC source's changes go only where they are taken as changes: through row-wise
    steps into a sink that shows each change's kind. Anything else would read a -U or a
    -D as a new row: refused, at the first step or INSERT that would. A batch job reads
    none: Flink 2.3's batch mode queries only insert-only sources (asked of it)."""
    if program.settings.execution_mode == "batch":
        for read in program.sources:
            if read.changelog:
                written = read.written_options.get("format")
                ctx.reporter.error(
                    Code.E0299,
                    f"source '{read.name}' (debezium-json) gives inserts, updates and "
                    "deletes, and a batch job reads only insert-only sources, as Flink: "
                    '"Querying a table in batch mode is currently only possible for '
                    'INSERT-only table sources"',
                    written.span if written is not None else read.span,
                    help="run the job streaming (flowc run --available-now reads what is "
                    "there, then stops)",
                )
        return
    flow = change_flow(program)
    for step, source in flow.refused_steps:
        keyless = isinstance(step, TopStep) and not program.source(source).primary_key
        ctx.reporter.error(
            Code.E0299,
            f"{keyword(step.node)} cannot take the changes of source '{source}' (debezium-json: "
            "inserts, updates and deletes)"
            + (
                ": the source declares no PRIMARY KEY, by which a TOP names the rows it holds"
                if keyless
                else ""
            ),
            step.span,
            help=changes_help(step),
        )
    for insert, source in flow.refused_inserts:
        sink = program.sink(insert.sink)
        ctx.reporter.error(
            Code.E0298,
            f"sink '{sink.name}' ({sink.connector}, {sink.mode}) cannot take the changes of "
            f"source '{source}' (debezium-json: inserts, updates and deletes)",
            insert.span,
            help="a memory or console sink in append mode takes changes, showing each "
            f"change's kind in the column {catalog.OP_COLUMN}; an upsert sink keyed by the "
            "source's PRIMARY KEY takes them through WHERE, SELECT, EXTEND, SET, DROP, "
            "RENAME and KEY BY",
        )
    if program.settings.execution_mode == "batch":
        return
    for insert in program.inserts:
        upsert = cdc_upsert(program, insert)
        if upsert is not None and not upsert.key_matches:
            _refuse_cdc_upsert_key(ctx, insert, upsert)


def _refuse_cdc_upsert_key(ctx: Context, insert: InsertDef, upsert: CdcUpsert) -> None:
    """E0298: an upsert sink whose key is not the CDC source's PRIMARY KEY. Flink 2.3
    refuses it too ("The query has an upsert key that differs from the primary key of the
    sink table", asked of it) unless an ON CONFLICT clause picks a SinkUpsertMaterializer,
    which flowc does not have."""
    source, sink = upsert.source, upsert.sink
    key = ", ".join(upsert_key_of(sink))
    if not source.primary_key:
        why = f"source '{source.name}' declares no PRIMARY KEY"
        hint = (
            f"declare the source's key, PRIMARY KEY ({key}) NOT ENFORCED, the column(s) "
            "each change's row is identified by"
        )
    else:
        primary = ", ".join(source.primary_key)
        steps = insert.stream.steps
        written = {c.name for c in (steps[-1].schema if steps else source.output_schema)}
        held = [
            f"'{name}' " + _what_key_holds(name, column, written)
            for name, column in zip(upsert_key_of(sink), upsert.key_sources, strict=True)
            if column != name
        ]
        why = f"its key ({key}) is not the PRIMARY KEY of source '{source.name}' ({primary})"
        if held:
            why += " (" + ", ".join(held) + ")"
        hint = (
            f"key the sink by the source's PRIMARY KEY, passed on unchanged: key = '{primary}'; "
            "to key it by other columns, aggregate the changes first (KEY BY ... AGGREGATE)"
        )
    ctx.reporter.error(
        Code.E0298,
        f"sink '{sink.name}' ({sink.connector}, {sink.mode}) cannot apply the changes of "
        f"source '{source.name}' by key: {why}, so two rows of the source could land on one "
        'row of the sink (Flink 2.3 refuses this too: "The query has an upsert key that '
        'differs from the primary key of the sink table")',
        sink.written_options["key"].span if "key" in sink.written_options else insert.span,
        help=hint,
    )


def _what_key_holds(name: str, column: str | None, written: set[str]) -> str:
    """What a sink key column that is not the source's key column holds, as E0298 says it:
    a key the query does not write at all is E0431's (beside it), so name that."""
    if name not in written:
        return "is not a column the query writes"
    return f"holds column '{column}'" if column else "holds a computed value"


def check_hints(ctx: Context, program: Program) -> None:
    """Each uid once; a hinted parallelism within its max_parallelism."""
    uids: dict[str, Span] = {}
    settings = program.settings
    for hints, where in _all_hints(program):
        if hints.uid is not None:
            span = hints.spans["uid"]
            if hints.uid in uids:
                ctx.reporter.error(
                    Code.E0307,
                    f"uid '{hints.uid}' is used twice",
                    span,
                    help=f"uids must be unique; first used at {uids[hints.uid]}",
                )
            else:
                uids[hints.uid] = span
        parallelism = hints.parallelism or settings.parallelism
        max_parallelism = hints.max_parallelism or settings.max_parallelism
        hinted = hints.parallelism is not None or hints.max_parallelism is not None
        if hinted and max_parallelism is not None and parallelism > max_parallelism:
            span = (
                hints.spans.get("parallelism")
                or hints.spans.get("max_parallelism")
                or settings.spans.get("parallelism")
                or where
            )
            ctx.reporter.error(
                Code.E0305,
                f"parallelism {parallelism} is larger than max_parallelism {max_parallelism}",
                span,
                help="Maximum parallelism must not be smaller than parallelism: "
                "raise max_parallelism or lower parallelism",
            )


def check_stateful_max_parallelism(ctx: Context, program: Program) -> None:
    """W0001 where a stateful step's default max parallelism moves with its parallelism.

    Below parallelism 86 Flink's default is 128 key groups whatever the parallelism, so a
    later parallelism change keeps them and leaving it unset costs nothing; above, the
    default is 1.5x the parallelism, so a later change of parallelism changes the key
    groups too, which Flink cannot restore state across (nor flowc's plans keep). Spark
    has no key groups (docs/state.md): the warning is about the plans and a Flink run,
    and says so, where it matters only."""
    settings = program.settings
    if settings.max_parallelism is not None:
        return
    for step in _all_steps(program):
        if step.stateful and step.hints.max_parallelism is None:
            parallelism = step.hints.parallelism or settings.parallelism
            key_groups = compute_default_max_parallelism(parallelism)
            if key_groups <= DEFAULT_LOWER_BOUND_MAX_PARALLELISM:
                continue
            keyword_span = step.window.keyword_span if step.window else step.node.keyword_span
            ctx.reporter.warning(
                Code.W0001,
                f"stateful {keyword(step.window or step.node)} at parallelism {parallelism} "
                f"without max_parallelism: its default, {key_groups} key groups, moves with "
                "the parallelism, so a later parallelism change would change its key groups",
                keyword_span,
                help="SET max_parallelism = <n>; (or a max_parallelism hint) to fix the key "
                "groups of Flink's plans; Spark's state has none and is repartitioned on a "
                "rescale whatever this setting (docs/state.md)",
            )


def check_unused(ctx: Context, program: Program) -> None:
    """W0004 for a source, view or sink that passed its checks and is never read, and for
    a declared function never called."""
    checked = {*ctx.sources, *ctx.views, *ctx.sinks}
    for name, definition in ctx.definitions.items():
        if name not in ctx.used and name in checked:
            owner, hidden, part = name.partition("$")  # a CTE's view (flowc.sql.sql_forms)
            what = f"WITH {part} of '{owner}'" if hidden else f"{definition.kind} '{name}'"
            ctx.reporter.warning(Code.W0004, f"{what} is never used", definition.node.name.span)
    called = ctx.checks.called
    declared = {
        s.name.value.lower(): s for s in ctx.statements if isinstance(s, ast.CreateFunction)
    }
    for function in program.functions:
        node = declared.get(function.name)
        if function.name not in called and node is not None and node.span == function.span:
            ctx.reporter.warning(
                Code.W0004, f"function '{node.name.value}' is never called", node.name.span
            )


def check_overrides_applied(ctx: Context, program: Program) -> None:
    """E0411 for ``--set name.option=...`` where no source or sink is called ``name``."""
    for override in ctx.overrides:
        if override.is_setting or override.key in ctx.applied_overrides:
            continue
        ctx.reporter.error(
            Code.E0411,
            f"there is no source or sink '{override.key.split('.')[0]}'",
            override.key_span,
            help="write --set <source or sink>.<option>=<value>, or --set <setting>=<value>",
        )


CHECKS: tuple[ProgramCheck, ...] = (
    check_has_insert,
    check_error_outputs_read,
    check_changes_consumed,
    check_hints,
    check_stateful_max_parallelism,
    check_unused,
    check_overrides_applied,
)


def _all_steps(program: Program) -> Iterable[Step]:
    def walk(stream: Stream) -> Iterable[Step]:
        for step in stream.steps:
            yield step
            for other in step.inputs:
                yield from walk(other)

    for view in program.views:
        yield from walk(view.stream)
    for insert in program.inserts:
        yield from walk(insert.stream)


def _all_hints(program: Program) -> Iterable[tuple[Hints, Span]]:
    for source in program.sources:
        yield source.hints, source.span
    for step in _all_steps(program):
        if not isinstance(step, KeyByStep | PartitionStep | PartitionByStep):
            yield step.hints, step.span
    for sink in program.sinks:
        yield sink.hints, sink.span
