"""describe_state: a compiled job's state manifest, built from its program and plans."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import field
from typing import TYPE_CHECKING

from sqlglot import exp

from flowc import ast
from flowc._version import __version__
from flowc.analyze.over_steps import lag_call
from flowc.fast_dataclass import dataclass
from flowc.flink.keygroups import compute_default_max_parallelism
from flowc.graph.stream_graph import StreamNode
from flowc.program import (
    ERRORS_SCHEMA,
    AggregateStep,
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
    OverStep,
    PartitionByStep,
    PartitionStep,
    Program,
    RenameStep,
    RouteStep,
    Schema,
    SelectStep,
    SetStep,
    Step,
    Stream,
    TopStep,
    UnionStep,
    WhereStep,
    WindowAggregateStep,
    WindowTopStep,
    view_of,
)
from flowc.spans import Span
from flowc.spark.match_codegen import match_columns
from flowc.spark.spark_plan import (
    ChangelogProcessor,
    OverAggregator,
    PatternMatcher,
    RowtimeFirst,
    WatermarkReader,
    WithinDeduplicator,
)
from flowc.sql.spark_sql import UnsupportedOnSpark, select_columns, watermark_delay
from flowc.state.functions import function_identity
from flowc.state.lineage import (
    Env,
    aggregate_state,
    bounded,
    expression_lineage,
    interval_or_text,
    lookup,
    one_line,
    requalified,
    sql_text,
    state_column,
    without_comments,
)
from flowc.state.manifest import (
    MANIFEST_VERSION,
    PROCESSOR_KIND,
    AggregateState,
    FunctionState,
    JoinState,
    Location,
    OptionValue,
    ParameterRule,
    ProcessorParameter,
    ProcessorState,
    QueryState,
    SinkWrite,
    SourceRead,
    StateColumn,
    StatefulOperator,
    StateManifest,
    WatermarkState,
    WindowState,
)
from flowc.state.options import stored_value
from flowc.vocabulary import NodeKind, Partitioner

if TYPE_CHECKING:
    from flowc.job import CompiledJob


# ---------------------------------------------------------------- describe_state


def describe_state(job: CompiledJob, base_dir: str | None = None) -> StateManifest:
    """The state every query of ``job`` keeps, operator by operator in Spark's order.
    ``base_dir`` is the folder the job's Python modules are read from (its run's base
    folder; by default the .flow file's)."""
    return _Describer(job, base_dir).manifest()


@dataclass(slots=True)
class _StepInfo:
    step: Step
    #: The columns reaching the step, each with its lineage.
    env: Env
    schema: Schema
    #: The right side's columns of a JOIN.
    right_env: Env = field(default_factory=list)
    right_schema: Schema = ()


class _Describer:
    def __init__(self, job: CompiledJob, base_dir: str | None) -> None:
        self.job = job
        self.base = base_dir if base_dir is not None else job.trust.base(job.file)
        #: Where each option of each source and sink, and each setting, is written.
        self.option_spans: dict[tuple[str, str], Span] = {}
        for statement in job.ast.statements:
            if isinstance(statement, ast.CreateSource | ast.CreateSink):
                for option in statement.options:
                    self.option_spans[(statement.name.value, option.key)] = option.span
        self.identities: dict[str, tuple[str | None, str | None, str | None]] = {}
        self.program: Program = job.program
        self.plan = job.spark_plan
        self.graph = job.stream_graph
        self.lines = job.source.split("\n")
        #: Each view's env after each of its steps (index -1: its origin's).
        self.view_envs: dict[str, list[Env]] = {}
        #: Every stateful step by StreamGraph node id.
        self.stateful: dict[int, _StepInfo] = {}
        #: Every step reading CURRENT_WATERMARK by node id: a processor in Spark's plan.
        self.readers: dict[int, _StepInfo] = {}
        self.vertex_of: dict[int, str] = {}
        for vertex in job.job_graph.vertices.values():
            for operator in vertex.operators:
                self.vertex_of[operator.node_id] = vertex.id

    def manifest(self) -> StateManifest:
        for view in self.program.views:
            if view.name not in self.view_envs:
                self._view(view.name)
        queries = []
        for insert, sink_node in zip(self.program.inserts, self.plan.sink_nodes, strict=True):
            steps: list[str] = []
            self._texts(insert.stream, steps, set())
            self._steps(insert.stream, self._origin_env(insert.stream)[0])
            queries.append(self._query(insert.sink, sink_node, insert.span, tuple(steps)))
        return StateManifest(
            version=MANIFEST_VERSION,
            job=self.program.settings.job_name,
            file=self.job.file,
            flowc_version=__version__,
            engine=self.plan.engine,
            queries=tuple(queries),
        )

    # ------------------------------------------------------------ lineage

    def _origin_env(self, stream: Stream) -> tuple[Env, Schema]:
        origin = stream.origin
        if isinstance(origin, FromSource):
            schema = self.program.source(origin.name).read_schema
            return [(origin.name, c.name, f"{origin.name}.{c.name}") for c in schema], schema
        if isinstance(origin, FromSourceErrors):
            return [
                (origin.source, c.name, f"{origin.source}.errors.{c.name}") for c in ERRORS_SCHEMA
            ], ERRORS_SCHEMA
        if isinstance(origin, FromView):
            envs = self._view(origin.name)
            view = self.program.view(origin.name)
            return requalified(envs[-1], origin.name), view.stream.schema
        assert isinstance(origin, FromSideOutput)
        envs = self._view(origin.view)
        _, output = self.program.side_output(origin)
        return requalified(envs[output.step_index + 1], origin.view), output.schema

    def _view(self, name: str) -> list[Env]:
        found = self.view_envs.get(name)
        if found is not None:
            return found
        view = self.program.view(name)
        env, _ = self._origin_env(view.stream)
        envs = [env]
        self.view_envs[name] = envs  # a view cannot read itself (E0105)
        self._steps(view.stream, env, envs)
        return envs

    def _steps(self, stream: Stream, env: Env, envs: list[Env] | None = None) -> Env:
        """Run the lineage through a stream's steps; note every stateful step."""
        _, schema = self._origin_env(stream)
        for step in stream.steps:
            node = self.plan.step_nodes.get(id(step))
            if node is not None and node in self.plan.watermark_readers:
                self.readers.setdefault(node, _StepInfo(step, env, schema))
            if node is not None and node in self.plan.stateful:
                info = _StepInfo(step, env, schema)
                if isinstance(step, JoinStep):
                    (right,) = step.inputs
                    right_env, right_schema = self._origin_env(right)
                    info.right_env, info.right_schema = right_env, right_schema
                self.stateful[node] = info
            env = self._step(step, env)
            schema = step.schema
            if envs is not None:
                envs.append(env)
        return env

    def _step(self, step: Step, env: Env) -> Env:
        """The columns' lineage after ``step``, by its class (:data:`LINEAGE`)."""
        return LINEAGE[type(step)](self, step, env)

    def _select(self, step: SelectStep, env: Env) -> Env:
        names = [c.name for c in step.schema]
        try:
            items = select_columns(step.node.items, names)
        except UnsupportedOnSpark:  # several stars: each column by its name
            items = [(None, name) for name in names]
        return [
            (
                None,
                name,
                lookup(env, None, name) if item is None else expression_lineage(item.expr, env),
            )
            for item, name in items
        ]

    def _extend(self, step: ExtendStep, env: Env) -> Env:
        names = [c.name for c in step.schema]
        added = names[len(names) - len(step.node.items) :]
        return [
            *env,
            *(
                (None, name, expression_lineage(item.expr, env))
                for item, name in zip(step.node.items, added, strict=True)
            ),
        ]

    def _set(self, step: SetStep, env: Env) -> Env:
        """A set column's lineage is its expression's (over the input row); the others
        keep theirs."""
        exprs = {i.column.value: i.expr for i in step.node.items}
        return [
            (None, name, expression_lineage(exprs[name], env))
            if name in exprs
            else (qualifier, name, lineage)
            for qualifier, name, lineage in env
        ]

    def _drop(self, step: DropStep, env: Env) -> Env:
        dropped = {c.value for c in step.node.columns}
        return [entry for entry in env if entry[1] not in dropped]

    def _rename(self, step: RenameStep, env: Env) -> Env:
        renamed = {i.old.value: i.new.value for i in step.node.items}
        return [(q, renamed.get(n, n), lineage) for q, n, lineage in env]

    def _explode(self, step: ExplodeStep, env: Env) -> Env:
        node = step.node
        alias = node.alias.value if node.alias is not None else step.schema[-1].name
        return [*env, (None, alias, f"explode({expression_lineage(node.expr, env)})")]

    def _aggregate(self, step: AggregateStep | WindowAggregateStep, env: Env) -> Env:
        names = [c.name for c in step.schema]
        keys = [(None, k, lookup(env, None, k)) for k in step.keys]
        by = ", ".join(lineage for _, _, lineage in keys)
        out: Env = list(keys)
        if step.window is not None:
            out += self._window_columns(step.window, env)
        if isinstance(step, WindowAggregateStep) and step.window_time is not None:
            end = out[-1][2]
            out.append((None, step.window_time, f"{end} - 1 ms"))
        values = names[len(out) :]
        for item, name in zip(step.node.items, values, strict=True):
            out.append((None, name, bounded(f"{expression_lineage(item.expr, env)} BY ({by})")))
        return out

    def _join_columns(self, step: JoinStep | DimensionJoinStep, env: Env) -> Env:
        (right,) = step.inputs
        right_env, _ = self._origin_env(right)
        return [*env, *right_env]

    def _union(self, step: UnionStep, env: Env) -> Env:
        others = [self._origin_env(s)[0] for s in step.inputs]
        out: Env = []
        for index, (_, name, lineage) in enumerate(env):
            found = [lineage] + [o[index][2] for o in others if index < len(o)]
            unique = list(dict.fromkeys(found))
            out.append(
                (None, name, unique[0] if len(unique) == 1 else f"union({', '.join(unique)})")
            )
        return out

    def _top(self, step: TopStep | WindowTopStep, env: Env) -> Env:
        node = step.node
        out = list(env)
        if step.window is not None:
            out += self._window_columns(step.window, env)
        if node.rank is not None:
            order = ", ".join(expression_lineage(o.expr, env) for o in node.order)
            out.append((None, node.rank.value, f"row_number() BY ({order})"))
        return out

    def _match(self, step: MatchStep, env: Env) -> Env:
        """The PARTITION BY columns as they were, then each measure over the matches."""
        keys: Env = [(None, k, lookup(env, None, k)) for k in step.keys]
        return [
            *keys,
            *(
                (None, m.alias.value, f"{match_text(m.call)} OF MATCH_RECOGNIZE")
                for m in step.node.measures
            ),
        ]

    def _over(self, step: OverStep, env: Env) -> Env:
        """An OVER call's lineage: its aggregate over the frame of the rows in order."""
        node = step.node
        frame = f"{'ROWS' if node.rows else 'RANGE'} {one_line(node.preceding.text)} PRECEDING"
        where = f"PARTITION BY {', '.join(step.keys)} " if step.keys else ""
        return [
            *env,
            *(
                (
                    None,
                    item.alias.value,
                    f"{expression_lineage(item.expr, env)} OVER ({where}ORDER BY "
                    f"{node.order.value} {frame})",
                )
                for item in node.items
                if item.alias is not None
            ),
        ]

    def _same_columns(self, step: Step, env: Env) -> Env:
        return env

    @staticmethod
    def _top_state(node: ast.Top, env: Env) -> AggregateState:
        """What a TOP keeps per group: its n first rows by its order (codegen's max_by or
        min_by of the row), so a change of n, of the order or of the rows' columns is a
        change of what the state holds."""
        function = "max_by" if node.order[0].descending else "min_by"
        order = ", ".join(expression_lineage(o.expr, env) for o in node.order)
        row = ", ".join(lineage for _, _, lineage in env)
        return AggregateState(
            name="top",
            sql=f"{function}(row, ({order}), {node.count})",
            function=f"{function}(row, order, {node.count})",
            arguments=tuple(one_line(o.expr.text) for o in node.order),
            type=f"ARRAY<ROW> of {node.count}",
            lineage=f"top {node.count} BY ({order}) OF ({row})",
        )

    def _window_columns(self, window: ast.Window, env: Env) -> Env:
        """``window_start`` and ``window_end`` of a WINDOW's output, with their lineage."""
        state = self._window(window, env)
        text = f"{state.kind}({state.time.lineage}, {state.size}"
        text += f", {state.slide})" if state.slide else ")"
        return [(None, "window_start", f"{text}.start"), (None, "window_end", f"{text}.end")]

    def _window(self, window: ast.Window, env: Env) -> WindowState:
        time_name = window.args[0].tree.name
        sizes = [interval_or_text(a) for a in window.args[1:]]
        return WindowState(
            kind=window.kind,
            time=StateColumn(time_name, "TIMESTAMP", lookup(env, None, time_name)),
            size=sizes[0],
            slide=sizes[1] if len(sizes) > 1 else None,
        )

    def _texts(self, stream: Stream, steps: list[str], seen: set[str]) -> None:
        """The steps a query runs as written, in pipeline order (views it reads first)."""
        streams = [stream, *(other for step in stream.steps for other in step.inputs)]
        for each in streams:
            view = view_of(each.origin)
            if view is not None and view not in seen:
                seen.add(view)
                self._texts(self.program.view(view).stream, steps, seen)
        steps.extend(self._text(step.span) for step in stream.steps)

    # ------------------------------------------------------------ the query

    def _query(self, name: str, sink_node: int, span: Span, steps: tuple[str, ...]) -> QueryState:
        query = self.plan.query(name)
        sink_def = self.program.sink(query.sink)
        sink_options = dict(sink_def.options)
        sources = []
        upstream = self._upstream(sink_node)
        for source_name, source_node in self.plan.source_nodes.items():
            if source_node not in upstream:
                continue
            source = self.program.source(source_name)
            options = dict(source.options)
            where = options.get("path", options.get("topic"))
            columns = ", ".join(f"{c.name} {c.type}" for c in source.schema)
            for computed in source.computed:
                columns += f", {computed.name} AS {one_line(computed.expr.text)}"
            if source.proctime is not None:
                columns += f", {source.proctime} AS PROCTIME()"
            if source.watermark is not None:
                columns += (
                    f", WATERMARK FOR {source.watermark.column} AS "
                    f"{one_line(source.watermark.expr.text)}"
                )
            sources.append(
                SourceRead(
                    source.name,
                    source.connector,
                    None if where is None else str(where),
                    _optional(options.get("format")),
                    self._options(source.name, source.options),
                    columns,
                )
            )
        operators = [
            self._operator(index, node) for index, node in enumerate(self._spark_order(sink_node))
        ]
        where = sink_options.get("path", sink_options.get("topic"))
        return QueryState(
            name=name,
            checkpoint=query.checkpoint,
            sink=SinkWrite(
                sink_def.name,
                sink_def.connector,
                None if where is None else str(where),
                _optional(sink_options.get("format")),
                sink_def.mode,
                self._location(sink_def.span),
                self._options(sink_def.name, (("mode", sink_def.mode), *sink_def.options)),
            ),
            sources=tuple(sorted(sources, key=lambda s: s.name)),
            output_mode=query.output_mode,
            shuffle_partitions=self.plan.shuffle_partitions,
            state_partitions=self.plan.shuffle_partitions,
            operators=tuple(operators),
            steps=steps,
            location=self._location(span),
            settings=self._settings(),
            functions=self._functions(steps, operators),
        )

    def _options(
        self, owner: str, options: Iterable[tuple[str, object]]
    ) -> tuple[OptionValue, ...]:
        out = []
        for key, value in sorted(options, key=lambda item: item[0]):
            span = self.option_spans.get((owner, key))
            out.append(
                OptionValue(
                    key,
                    stored_value(key, value),
                    None if span is None else self._location(span),
                )
            )
        return tuple(out)

    def _settings(self) -> tuple[OptionValue, ...]:
        """The settings as set (in the file or with --set), each where it is written."""
        settings = self.program.settings
        values: dict[str, object] = {
            "parallelism": settings.parallelism,
            "max_parallelism": settings.max_parallelism,
            "chaining": settings.chaining,
            "execution.mode": settings.execution_mode,
            "checkpoint.interval": settings.checkpoint_interval_ms,
            "checkpoint.mode": settings.checkpoint_mode,
            "checkpoint.dir": settings.checkpoint_dir,
            "job.name": settings.job_name,
            "sql.dialect": settings.sql_dialect,
            "exchanges": settings.exchanges,
            # the store as planned (Flink's default when unset), so an unset choice and
            # the default written out are one store
            "state.backend.type": None
            if self.plan.state_store.backend == "none"
            else self.plan.state_store.backend,
            "state.backend.changelog.enabled": self.plan.state_store.changelog,
            **dict(settings.spark_conf),
        }
        out = []
        for key in sorted(values):
            if values[key] is None:
                continue
            span = settings.spans.get(key)
            out.append(
                OptionValue(
                    key,
                    stored_value(key, values[key]),
                    None if span is None or span.file != self.job.file else self._location(span),
                )
            )
        return tuple(out)

    def _functions(
        self, steps: tuple[str, ...], operators: list[StatefulOperator]
    ) -> tuple[FunctionState, ...]:
        """The Python functions the query's steps call; ``state`` for those whose values
        a stateful operator keeps (in its keys, values, window, join or rows)."""
        functions = self.program.functions
        if not functions:
            return ()
        text = "\n".join(steps)
        kept = json.dumps([o.to_json() for o in operators])
        given = {f.name.lower(): f.call for f in self.job.functions}
        out = []
        for function in functions:
            call = re.compile(rf"(?<![\w.]){re.escape(function.name)}\s*\(", re.IGNORECASE)
            if call.search(text) is None:
                continue
            if function.name not in self.identities:
                self.identities[function.name] = function_identity(
                    function, self.base, given.get(function.name)
                )
            file, digest, module_digest = self.identities[function.name]
            out.append(
                FunctionState(
                    name=function.name,
                    target=function.target
                    if not function.embedded
                    else _given_target(given.get(function.name)),
                    file=file,
                    digest=digest,
                    module_digest=module_digest,
                    feeds="state" if call.search(kept) else "output",
                    location=self._location(function.span),
                )
            )
        return tuple(out)

    def _spark_order(self, sink_node: int) -> list[int]:
        """The query's stateful nodes as Spark numbers them: pre-order from the sink (the
        physical plan is walked top-down), a join's left input before its right; a node
        read twice (a view in a UNION ALL with itself) is two operators in Spark."""
        order: list[int] = []
        stack = [sink_node]
        nodes = self.graph.nodes
        while stack:
            ident = stack.pop()
            if ident in self.plan.stateful or ident in self.plan.watermark_readers:
                order.append(ident)
            edges = sorted(nodes[ident].in_edges, key=lambda e: e.type_number)
            stack.extend(e.source_id for e in reversed(edges))
        return order

    def _operator(self, index: int, node_id: int) -> StatefulOperator:
        node = self.graph.nodes[node_id]
        reader = self.plan.watermark_readers.get(node_id)
        if reader is not None and node_id not in self.plan.stateful:
            return self._reader(index, node, reader)
        info = self.stateful.get(node_id)
        assert info is not None, f"stateful node {node_id} has no step"
        step = info.step
        env = info.env
        keys = tuple(state_column(k, info.schema, env) for k in step.keys)
        aggregates: tuple[AggregateState, ...] = ()
        window = None
        within = None
        join = None
        kind = step.state_kind
        assert kind is not None, f"{type(step).__name__} keeps no state"
        if isinstance(step, AggregateStep | WindowAggregateStep):
            if step.window is not None:
                window = self._window(step.window, env)
            width = len(step.keys) + (
                step.window_columns if isinstance(step, WindowAggregateStep) else 0
            )
            aggregates = tuple(
                aggregate_state(item, column, env)
                for item, column in zip(step.node.items, step.schema[width:], strict=True)
            )
            keys = tuple(
                StateColumn(c.name, c.type, lookup(env, None, c.name))
                for c in step.schema[: len(step.keys)]
            )
        elif isinstance(step, TopStep | WindowTopStep):
            if step.window is not None:
                window = self._window(step.window, env)
            aggregates = (self._top_state(step.node, env),)
        elif isinstance(step, DeduplicateStep):
            within = None if step.node.within is None else one_line(step.node.within.text)
        elif isinstance(step, JoinStep):
            join = self._join(step, info)
        max_set = node.max_parallelism is not None
        max_parallelism = (
            node.max_parallelism
            if node.max_parallelism is not None
            else compute_default_max_parallelism(node.parallelism)
        )
        return StatefulOperator(
            index=index,
            name=node.name,
            kind=kind,
            uid=node.uid,
            operator_id=self.graph.operator_id(node_id),
            vertex_id=self.vertex_of.get(node_id),
            node_id=node_id,
            keys=keys,
            keys_location=(
                self._keys_location(node) if not isinstance(step, DeduplicateStep) else None
            ),
            aggregates=aggregates,
            window=window,
            within=within,
            join=join,
            watermarks=self._watermarks(node_id),
            parallelism=node.parallelism,
            max_parallelism=max_parallelism,
            max_parallelism_set=max_set,
            location=self._location(step.span),
            processor=self._processor(node_id, info),
        )

    def _reader(self, index: int, node: StreamNode, reader: WatermarkReader) -> StatefulOperator:
        """A step reading CURRENT_WATERMARK: a processor that keeps no state, but a
        stateful operator of Spark's plan all the same (it takes a position)."""
        info = self.readers.get(node.id)
        env = info.env if info is not None else []
        return StatefulOperator(
            index=index,
            name=f"{reader.step} reading CURRENT_WATERMARK({reader.column})",
            kind=PROCESSOR_KIND,
            uid=node.uid,
            operator_id=self.graph.operator_id(node.id),
            vertex_id=self.vertex_of.get(node.id),
            node_id=node.id,
            keys=(),
            keys_location=None,
            aggregates=(),
            window=None,
            within=None,
            join=None,
            watermarks=self._watermarks(node.id),
            parallelism=node.parallelism,
            max_parallelism=node.max_parallelism
            if node.max_parallelism is not None
            else compute_default_max_parallelism(node.parallelism),
            max_parallelism_set=node.max_parallelism is not None,
            location=self._location(reader.span),
            processor=None if self.plan.batch else reader_processor(reader, env),
        )

    def _processor(self, node_id: int, info: _StepInfo) -> ProcessorState | None:
        """The processor flowc generates for the step, streaming (a batch run keeps no
        state), described by one function per processor class."""
        if self.plan.batch:
            return None
        over = self.plan.over_aggregators.get(node_id)
        if over is not None and isinstance(info.step, OverStep):
            return over_processor(over, info.step, info.env, info.schema)
        matcher = self.plan.pattern_matchers.get(node_id)
        if matcher is not None and isinstance(info.step, MatchStep):
            return match_processor(matcher, info.step, info.env)
        within = self.plan.within_deduplicators.get(node_id)
        if within is not None:
            return within_processor(within)
        changelog = self.plan.changelog_processors.get(node_id)
        if changelog is not None:
            return changelog_processor(changelog)
        first = self.plan.rowtime_firsts.get(node_id)
        if first is not None:
            return rowtime_first_processor(first, info.env, info.schema)
        return None

    def _keys_location(self, node: StreamNode) -> Location | None:
        """The KEY BY that gives an AGGREGATE its keys (its HASH edge's span)."""
        for edge in node.in_edges:
            if edge.partitioner == Partitioner.HASH and edge.keys and edge.span != node.span:
                return self._location(edge.span)
        return None

    def _join(self, step: JoinStep, info: _StepInfo) -> JoinState:
        node = step.node
        assert node.condition is not None  # a stream-stream JOIN has ON (E0221)
        (right,) = step.inputs
        assert right.keys is not None
        left_keys = tuple(state_column(k, info.schema, info.env) for k in step.keys)
        right_keys = tuple(state_column(k, info.right_schema, info.right_env) for k in right.keys)
        terms = (
            list(node.condition.tree.flatten())
            if isinstance(node.condition.tree, exp.And)
            else [node.condition.tree]
        )
        equalities = {(a.name, b.name) for a, b in zip(left_keys, right_keys, strict=True)}
        rest = []
        for term in terms:
            if (
                isinstance(term, exp.EQ)
                and isinstance(term.left, exp.Column)
                and isinstance(term.right, exp.Column)
            ):
                pair = (term.left.name, term.right.name)
                if pair in equalities or pair[::-1] in equalities:
                    continue
            rest.append(sql_text(term))
        return JoinState(
            type=node.kind,
            right=node.right.text,
            left_keys=left_keys,
            right_keys=right_keys,
            condition=sql_text(node.condition.tree),
            bound=" AND ".join(rest) or None,
            left_row=tuple(
                StateColumn(c.name, c.type, lineage)
                for c, (_, _, lineage) in zip(info.schema, info.env, strict=False)
            ),
            right_row=tuple(
                StateColumn(c.name, c.type, lineage)
                for c, (_, _, lineage) in zip(info.right_schema, info.right_env, strict=False)
            ),
        )

    def _upstream(self, node_id: int) -> set[int]:
        """The node and every node it reads from."""
        seen: set[int] = set()
        stack = [node_id]
        while stack:
            ident = stack.pop()
            if ident in seen:
                continue
            seen.add(ident)
            stack.extend(e.source_id for e in self.graph.nodes[ident].in_edges)
        return seen

    def _watermarks(self, node_id: int) -> tuple[WatermarkState, ...]:
        """The watermarks of the sources upstream of the operator."""
        sources = [
            i for i in self._upstream(node_id) if self.graph.nodes[i].kind == NodeKind.SOURCE
        ]
        by_node = {v: k for k, v in self.plan.source_nodes.items()}
        out = []
        for ident in sorted(sources):
            name = by_node.get(ident)
            if name is None:
                continue
            source = self.program.source(name)
            if source.watermark is None:
                continue
            try:
                column, delay = watermark_delay(source)
            except UnsupportedOnSpark:
                column, delay = source.watermark.column, one_line(source.watermark.expr.text)
            out.append(WatermarkState(source.name, column, delay))
        return tuple(out)

    def _location(self, span: Span) -> Location:
        return Location(
            span.file, span.line, span.column, span.end_line, span.end_column, self._text(span)
        )

    def _text(self, span: Span) -> str:
        """The source text of a span, on one line."""
        lines = self.lines
        if not 1 <= span.line <= len(lines):
            return ""
        if span.end_line == span.line:
            text = lines[span.line - 1][span.column - 1 : span.end_column - 1]
        else:
            parts = [lines[span.line - 1][span.column - 1 :]]
            parts += lines[span.line : span.end_line - 1]
            if span.end_line <= len(lines):
                parts.append(lines[span.end_line - 1][: span.end_column - 1])
            text = "\n".join(parts)
        return one_line(without_comments(text))


def match_text(expr: ast.MatchExpr) -> str:
    """A MATCH_RECOGNIZE condition or measure as one line of text."""
    if isinstance(expr, ast.MatchLiteral):
        if expr.kind == "string":
            return "'" + str(expr.value).replace("'", "''") + "'"
        return "NULL" if expr.value is None else str(expr.value).upper()
    if isinstance(expr, ast.MatchColumn):
        return expr.column if expr.variable is None else f"{expr.variable}.{expr.column}"
    if isinstance(expr, ast.MatchCall):
        if expr.column is None:
            return f"{expr.function}()"
        column = expr.column if expr.variable is None else f"{expr.variable}.{expr.column}"
        offset = f", {expr.offset}" if expr.function in ("PREV", "FIRST", "LAST") else ""
        return f"{expr.function}({column}{offset})"
    if isinstance(expr, ast.MatchUnary):
        if expr.op in ("IS NULL", "IS NOT NULL"):
            return f"({match_text(expr.operand)} {expr.op})"
        return f"({expr.op} {match_text(expr.operand)})"
    return f"({match_text(expr.left)} {expr.op} {match_text(expr.right)})"


def match_processor(matcher: PatternMatcher, step: MatchStep, env: Env) -> ProcessorState:
    """MatchRecognizer's state per PARTITION BY key: the rows waiting for the watermark (by
    the ORDER BY column's time) and the pattern's partial matches, states of the pattern's
    machine holding rows of the columns the conditions and measures read. The pattern, its
    conditions, the skip and those columns give the stored partial matches their meaning:
    each is refused to change; the measures are computed as a match ends, from its rows."""
    node = step.node
    pattern = " ".join(
        v.name.value
        + (
            ""
            if (v.low, v.high) == (1, 1)
            else f"{{{v.low},{'' if v.high is None else v.high}}}" + ("" if v.greedy else "?")
        )
        for v in node.variables
    )
    define = ", ".join(
        f"{v.name.value} AS {match_text(v.condition)}"
        for v in node.variables
        if v.condition is not None
    )
    measures = ", ".join(f"{match_text(m.call)} AS {m.alias.value}" for m in node.measures)
    read = match_columns(step)
    types = {c.name: c.type for c in step.input_schema}
    return ProcessorState(
        name="MatchRecognizer",
        keyed_by=f"PARTITION BY {', '.join(matcher.keys)}",
        parameters=(
            ProcessorParameter(
                "order",
                lookup(env, None, matcher.column),
                ParameterRule.SAME.value,
                "its waiting rows and its partial matches are in the old ORDER BY column's time",
            ),
            ProcessorParameter(
                "pattern",
                pattern,
                ParameterRule.SAME.value,
                "its partial matches are states of the old pattern's machine",
            ),
            ProcessorParameter(
                "define",
                define,
                ParameterRule.SAME.value,
                "its partial matches took their rows by the old conditions",
            ),
            ProcessorParameter(
                "after match",
                "SKIP PAST LAST ROW" if node.past_last_row else "SKIP TO NEXT ROW",
                ParameterRule.SAME.value,
                "its partial matches are those the old skip left",
            ),
            ProcessorParameter(
                "rows",
                ", ".join(f"{lookup(env, None, c)} {types[c]}" for c in read),
                ParameterRule.SAME.value,
                "its partial matches hold rows of the old columns, by position",
            ),
            ProcessorParameter(
                "measures",
                measures,
                ParameterRule.FREE.value,
                "it computes the measures from a match's rows when the match ends",
            ),
        ),
        row=tuple(StateColumn(c, types[c], lookup(env, None, c)) for c in read),
    )


def over_processor(
    over: OverAggregator, step: OverStep, env: Env, schema: Schema
) -> ProcessorState:
    """OverAggregate's state per PARTITION BY key: the waiting rows, the rows the frame
    still needs (the last ``preceding`` rows, or those within ``preceding`` ms of the last
    time emitted) and that last time, all by the ORDER BY column. It keeps whole input
    rows and computes the calls when it emits, so the calls are free to change; the rows'
    columns, the order column and the frame's unit are not, and the frame may narrow but
    not widen. (The OverStep's fields are read here only: a new frame or call is one
    parameter more.)"""
    node = step.node
    calls = ", ".join(
        f"{expression_lineage(item.expr, env)} AS {item.alias.value}"
        for item in node.items
        if item.alias is not None
    )
    unit = "rows" if over.rows else "ms"
    kept = ProcessorParameter(
        "preceding",
        f"{over.preceding} {unit}",
        ParameterRule.AT_MOST.value,
        "it kept only the rows of the old, narrower frame: the first rows emitted "
        "would be computed over too few rows",
        over.preceding,
    )
    if over.preceding < 0:
        # LAG's frame (RANGE UNBOUNDED): the processor keeps as many past rows as the
        # largest offset, so a larger offset would read rows it no longer has.
        offset = max(
            (lag_call(call)[0] for item in node.items for call in item.expr.tree.find_all(exp.Lag)),
            default=0,
        )
        kept = ProcessorParameter(
            "lag rows kept",
            f"{offset} rows",
            ParameterRule.AT_MOST.value,
            "it kept only the last rows the old LAG offsets read: a larger offset would read "
            "rows it no longer has",
            offset,
        )
    return ProcessorState(
        name="OverAggregate",
        keyed_by=f"PARTITION BY {', '.join(over.keys)}" if over.keys else "one group",
        parameters=(
            ProcessorParameter(
                "order",
                lookup(env, None, over.column),
                ParameterRule.SAME.value,
                "its waiting rows, its frame's rows and its last emitted time are by the old "
                "ORDER BY column's time",
            ),
            ProcessorParameter(
                "frame",
                "ROWS" if over.rows else "RANGE",
                ParameterRule.SAME.value,
                "it kept the rows the old frame's unit needs (a count of rows, or a time span)",
            ),
            kept,
            ProcessorParameter(
                "calls",
                calls,
                ParameterRule.FREE.value,
                "it keeps whole rows and computes the calls when it emits",
            ),
        ),
        row=tuple(
            StateColumn(c.name, c.type, lineage)
            for c, (_, _, lineage) in zip(schema, env, strict=False)
        ),
    )


def reader_processor(reader: WatermarkReader, env: Env) -> ProcessorState:
    """WatermarkReader keeps nothing (rows grouped into buckets only to run it): every
    parameter is free."""
    return ProcessorState(
        name="WatermarkReader",
        keyed_by=f"bucket: hash(row) mod {reader.buckets}",
        parameters=(
            ProcessorParameter(
                "column",
                lookup(env, None, reader.column),
                ParameterRule.FREE.value,
                "it keeps no state: it hands each row the micro-batch's watermark",
            ),
            ProcessorParameter(
                "drops",
                reader.on_time or "none",
                ParameterRule.FREE.value,
                "it keeps no state: the rows it drops are decided row by row",
            ),
        ),
        row=(),
    )


def within_processor(within: WithinDeduplicator) -> ProcessorState:
    """DeduplicateWithin's state per key group (a hash of the ON columns modulo the key
    groups): each key's kept time. Another count of key groups looks a key up in another
    group's list (its kept time lost, a repeat within the interval kept)."""
    keys = ", ".join(within.keys)
    return ProcessorState(
        name="DeduplicateWithin",
        keyed_by=f"key group: hash({keys}) mod {within.key_groups}",
        parameters=(
            ProcessorParameter(
                "key_groups",
                str(within.key_groups),
                ParameterRule.SAME.value,
                "each key's kept time is in its key group's list (a hash of the ON columns "
                "modulo max_parallelism): under another count a key is looked up in another "
                "group, its kept time is lost and a repeat within the interval is kept",
                within.key_groups,
            ),
            # only in the pandas form, so the manifests of the row form's checkpoints,
            # written before it existed, still compare equal
            *(
                (
                    ProcessorParameter(
                        "form",
                        "pandas",
                        ParameterRule.SAME.value,
                        "Spark runs the pandas form (transformWithStateInPandas) and the row "
                        "form (transformWithState) as different operators and fails a "
                        "checkpoint the other wrote (STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_"
                        "STATE_METADATA); the form follows the input's column types",
                    ),
                )
                if within.pandas
                else ()
            ),
        ),
        row=(),
    )


def rowtime_first_processor(first: RowtimeFirst, env: Env, schema: Schema) -> ProcessorState:
    """RowtimeFirstRow's state per PER key: the key's candidate row (pickled: the input's
    columns by place) and its time, and whether the key's row was written. Spark's min_by
    aggregation kept other state under the same operator (the group's rows as a struct):
    the restart guard refuses the change either way (a RowtimeFirstRow state beside none
    is another operator's)."""
    order = state_column(first.column, schema, env).lineage
    return ProcessorState(
        name="RowtimeFirstRow",
        keyed_by=f"PER {', '.join(first.keys)}" if first.keys else "one group",
        parameters=(
            ProcessorParameter(
                "order",
                order,
                ParameterRule.SAME.value,
                "the kept candidate's time is this column's: another column's times would "
                "be compared with it and with the watermark",
            ),
        ),
        row=tuple(
            StateColumn(c.name, c.type, lineage)
            for c, (_, _, lineage) in zip(schema, env, strict=False)
        ),
    )


def changelog_processor(processor: ChangelogProcessor) -> ProcessorState:
    """ChangelogOperator's state per key group (a hash of the keys modulo the key groups):
    one pickled map from each key to what it keeps (a TOP's rows, an AGGREGATE's input
    count and accumulators, one per call in the order of its calls, which the operator's
    ``aggregates`` compare) and the results it emitted last. Another count of key groups
    looks a key up in another group's map; a producer and a consumer keep different things."""
    keys = ", ".join(processor.keys) or "no key"
    role = "consumes a changelog" if processor.consumer else "produces a changelog"
    joined = processor.kind == "JOIN"
    return ProcessorState(
        name="ChangelogJoin" if joined else "ChangelogOperator",
        keyed_by=f"key group: hash({keys}) mod {processor.key_groups}",
        parameters=(
            ProcessorParameter(
                "key_groups",
                str(processor.key_groups),
                ParameterRule.SAME.value,
                "each key's rows or accumulators are in its key group's map (a hash of the "
                "keys modulo max_parallelism): under another count a key is looked up in "
                "another group, its state lost and its results emitted as new",
                processor.key_groups,
            ),
            ProcessorParameter(
                "role",
                f"{processor.kind} that {role}",
                ParameterRule.SAME.value,
                "a producer keeps its input rows and last results, a consumer its input count "
                "and retractable accumulators (a TOP consumer its current input rows): "
                "neither reads the other's",
            ),
            *(
                (
                    ProcessorParameter(
                        "row_keys",
                        ", ".join(processor.row_keys),
                        ParameterRule.SAME.value,
                        (
                            "the JOIN's emitted rows are identified by these columns (the "
                            "sink's key): under others its changes would name other rows"
                            if joined
                            else "the TOP's emitted rows are identified by these columns "
                            "(Flink's upsert key): under others its changes would name "
                            "other rows"
                        ),
                    ),
                )
                if processor.row_keys
                else ()
            ),
            *(
                (
                    ProcessorParameter(
                        "outer_join",
                        processor.outer,
                        ParameterRule.SAME.value,
                        "the JOIN's state holds each side's rows, whose emitted rows depend "
                        "on the JOIN's kind (padded or not): under another kind its changes "
                        "would retract rows never written and leave others unwritten",
                    ),
                )
                if processor.outer
                else ()
            ),
        ),
        row=(),
    )


def _optional(value: object) -> str | None:
    return None if value is None else str(value)


def _given_target(call: object) -> str:
    """A callable given to flowc.compile, as ``module:qualified name``."""
    module = getattr(call, "__module__", None) or "?"
    name = getattr(call, "__qualname__", None) or getattr(call, "__name__", None) or "?"
    return f"{module}:{name} (given)"


#: Each step class's column lineage (tests/test_step_classes.py: every class has one).
LINEAGE: dict[type[Step], Callable[..., Env]] = {
    SelectStep: _Describer._select,
    ExtendStep: _Describer._extend,
    SetStep: _Describer._set,
    DropStep: _Describer._drop,
    RenameStep: _Describer._rename,
    ExplodeStep: _Describer._explode,
    AggregateStep: _Describer._aggregate,
    WindowAggregateStep: _Describer._aggregate,
    JoinStep: _Describer._join_columns,
    DimensionJoinStep: _Describer._join_columns,
    UnionStep: _Describer._union,
    TopStep: _Describer._top,
    WindowTopStep: _Describer._top,
    OverStep: _Describer._over,
    MatchStep: _Describer._match,
    WhereStep: _Describer._same_columns,
    KeyByStep: _Describer._same_columns,
    PartitionStep: _Describer._same_columns,
    PartitionByStep: _Describer._same_columns,
    DeduplicateStep: _Describer._same_columns,
    RouteStep: _Describer._same_columns,
}
