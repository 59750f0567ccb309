"""Pass 1 of the graph pipeline: checked program → Transformation tree (Flink's ``Transformation``).

One transformation per step, created in the order a Flink DataStream program written
statement by statement would create them: a source at its CREATE SOURCE, a view's
operators at its CREATE VIEW (once, however many statements read it), a side-output
selection and a sink at each use. Ids count from 1 in creation order, as Flink's static
counter does. ``env_order`` lists what Flink's ``env.addOperator`` would hold: operators
and sinks, in creation order (sources, partitions, side outputs and unions are reached
through inputs only).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import field

from flowc.catalog import ERRORS_OUTPUT
from flowc.diagnostics import Reporter
from flowc.errorcodes import Code
from flowc.fast_dataclass import dataclass
from flowc.graph.names import sink_name, source_name, step_name
from flowc.outputs import document
from flowc.program import (
    AggregateStep,
    DeduplicateStep,
    DimensionJoinStep,
    DropStep,
    ExplodeStep,
    ExtendStep,
    FromSource,
    FromSourceErrors,
    FromView,
    Hints,
    JoinStep,
    KeyByStep,
    MatchStep,
    OverStep,
    PartitionByStep,
    PartitionStep,
    Program,
    RenameStep,
    RouteStep,
    SelectStep,
    SetStep,
    Settings,
    SourceDef,
    Step,
    Stream,
    TopStep,
    UnionStep,
    WhereStep,
    WindowAggregateStep,
    WindowTopStep,
)
from flowc.render import Diagram, Edge, Node, Shape
from flowc.spans import Span
from flowc.vocabulary import (
    CHAINING_HINTS,
    PHYSICAL_TRANSFORMATIONS,
    VIRTUAL_TRANSFORMATIONS,
    ChainingStrategy,
    Operator,
    Partitioner,
    TransformationKind,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Transformation:
    """``operator`` names the step a physical transformation runs; a virtual one's is its
    kind. ``partitioner`` is set on partition transformations, ``output_tag`` on
    side-output selections, ``keys`` on HASH/CUSTOM partitions and keyed operators.
    """

    id: int
    kind: TransformationKind
    name: str
    operator: Operator | TransformationKind
    inputs: tuple[int, ...]
    parallelism: int
    max_parallelism: int | None
    uid: str | None
    slot_sharing_group: str | None
    chaining_strategy: ChainingStrategy
    span: Span
    partitioner: Partitioner | None = None
    output_tag: str | None = None
    keys: tuple[str, ...] = ()
    parallelism_configured: bool = False
    bounded: bool = False

    def to_json(self) -> dict[str, object]:
        data: dict[str, object] = {
            "id": self.id,
            "kind": self.kind,
            "name": self.name,
            "operator": self.operator,
            "inputs": list(self.inputs),
            "parallelism": self.parallelism,
            "max_parallelism": self.max_parallelism,
            "uid": self.uid,
            "slot_sharing_group": self.slot_sharing_group,
            "chaining_strategy": self.chaining_strategy,
        }
        if self.partitioner is not None:
            data["partitioner"] = self.partitioner
        if self.output_tag is not None:
            data["output_tag"] = self.output_tag
        if self.keys:
            data["keys"] = list(self.keys)
        data["span"] = self.span.to_json()
        return data


@dataclass(slots=True)
class TransformationTree:
    """Every transformation by id, and Flink's ``env.transformations`` order."""

    job_name: str
    settings: Settings
    transformations: dict[int, Transformation] = field(default_factory=dict)
    env_order: list[int] = field(default_factory=list)
    #: The transformation (and so StreamNode) that runs each non-virtual program step,
    #: keyed by ``id(step)``; each source's. The Spark plan and code generation use them
    #: to find the exchange in front of a step.
    step_nodes: dict[int, int] = field(default_factory=dict)
    source_nodes: dict[str, int] = field(default_factory=dict)

    def __getitem__(self, id: int) -> Transformation:
        return self.transformations[id]

    def to_json(self) -> str:
        return document(
            "transformations",
            {
                "job_name": self.job_name,
                "transformations": [t.to_json() for t in self.transformations.values()],
            },
        )

    def to_text(self) -> str:
        lines = [f"Transformations of job '{self.job_name}'"]
        for t in self.transformations.values():
            inputs = ", ".join(str(i) for i in t.inputs) or "-"
            extra = []
            if t.partitioner:
                extra.append(t.partitioner + (f"({', '.join(t.keys)})" if t.keys else ""))
            if t.output_tag:
                extra.append(f"side output '{t.output_tag}'")
            if t.kind not in VIRTUAL_TRANSFORMATIONS:
                extra.append(f"p={t.parallelism}")
                if t.max_parallelism is not None:
                    extra.append(f"maxP={t.max_parallelism}")
                if t.uid is not None:
                    extra.append(f"uid={json.dumps(t.uid)}")
                if t.slot_sharing_group is not None:
                    extra.append(f"group={json.dumps(t.slot_sharing_group)}")
                if t.chaining_strategy is not ChainingStrategy.ALWAYS:
                    extra.append(t.chaining_strategy)
            detail = f" [{', '.join(extra)}]" if extra else ""
            lines.append(
                f"  {t.id:>3} {t.kind:<11} {t.name}{detail} <- {inputs}   (line {t.span.line})"
            )
        return "\n".join(lines) + "\n"

    def diagram(self) -> Diagram:
        """Virtual transformations drawn rounded and without a parallelism; every node
        states its shape (there is no default)."""
        nodes = tuple(
            Node(f"t{t.id}", f"{t.id}: {t.name}", Shape.ROUNDED)
            if t.kind in VIRTUAL_TRANSFORMATIONS
            else Node(f"t{t.id}", f"{t.id}: {t.name}\np={t.parallelism}")
            for t in self.transformations.values()
        )
        edges = tuple(
            Edge(f"t{input_id}", f"t{t.id}")
            for t in self.transformations.values()
            for input_id in t.inputs
        )
        return Diagram(self.job_name, nodes, edges)

    def to_dot(self) -> str:
        return self.diagram().to_dot()

    def to_mermaid(self) -> str:
        return self.diagram().to_mermaid()


def build_transformations(program: Program, reporter: Reporter) -> TransformationTree:
    return _Builder(program, reporter).build()


class _Builder:
    def __init__(self, program: Program, reporter: Reporter) -> None:
        self.program = program
        self.reporter = reporter
        self.settings = program.settings
        self.tree = TransformationTree(
            job_name=program.settings.job_name, settings=program.settings
        )
        self.view_ends: dict[str, int] = {}
        self.view_steps: dict[str, list[int]] = {}

    def add(self, transformation: Transformation) -> int:
        """Record ``transformation``, whose id is :attr:`next_id`."""
        ident = transformation.id
        assert ident == self.next_id
        self.tree.transformations[ident] = transformation
        if transformation.kind in PHYSICAL_TRANSFORMATIONS:
            self.tree.env_order.append(ident)
        return ident

    @property
    def next_id(self) -> int:
        """Ids count from 1 in creation order, with no gaps."""
        return len(self.tree.transformations) + 1

    def parallelism(self, hints: Hints) -> int:
        return hints.parallelism if hints.parallelism is not None else self.settings.parallelism

    def physical(
        self,
        kind: TransformationKind,
        name: str,
        operator: Operator,
        inputs: tuple[int, ...],
        hints: Hints,
        span: Span,
        keys: tuple[str, ...] = (),
        parallelism: int | None = None,
        max_parallelism: int | None = None,
        bounded: bool = False,
    ) -> int:
        return self.add(
            Transformation(
                id=self.next_id,
                kind=kind,
                name=name,
                operator=operator,
                inputs=inputs,
                parallelism=parallelism if parallelism is not None else self.parallelism(hints),
                max_parallelism=max_parallelism
                if max_parallelism is not None
                else hints.max_parallelism,
                uid=hints.uid,
                slot_sharing_group=hints.slot_sharing_group,
                chaining_strategy=CHAINING_HINTS[hints.chaining],
                span=span,
                keys=keys,
                parallelism_configured=hints.parallelism is not None or parallelism is not None,
                bounded=bounded,
            )
        )

    def virtual(
        self,
        kind: TransformationKind,
        input_id: int,
        span: Span,
        partitioner: Partitioner | None = None,
        output_tag: str | None = None,
        keys: tuple[str, ...] = (),
        inputs: tuple[int, ...] | None = None,
    ) -> int:
        upstream = self.tree[input_id]
        if kind is TransformationKind.PARTITION:
            name = partitioner.capitalize() if partitioner else "Partition"
        elif kind is TransformationKind.SIDE_OUTPUT:
            name = f"SideOutput({output_tag})"
        else:
            name = "Union"
        return self.add(
            Transformation(
                id=self.next_id,
                kind=kind,
                name=name,
                operator=kind,
                inputs=inputs if inputs is not None else (input_id,),
                parallelism=upstream.parallelism,
                max_parallelism=upstream.max_parallelism,
                uid=None,
                slot_sharing_group=None,
                chaining_strategy=ChainingStrategy.ALWAYS,
                span=span,
                partitioner=partitioner,
                output_tag=output_tag,
                keys=keys,
            )
        )

    def hash_partition(self, input_id: int, span: Span, keys: tuple[str, ...] = ()) -> int:
        return self.virtual(
            TransformationKind.PARTITION, input_id, span, partitioner=Partitioner.HASH, keys=keys
        )

    def side_output(self, input_id: int, span: Span, output_tag: str) -> int:
        return self.virtual(TransformationKind.SIDE_OUTPUT, input_id, span, output_tag=output_tag)

    # ------------------------------------------------------------ driver

    def build(self) -> TransformationTree:
        """Statements in file order: sources, views and inserts as the program declares them."""
        order: list[tuple[Span, str, str]] = []
        order += [(s.span, "source", s.name) for s in self.program.sources]
        order += [(v.span, "view", v.name) for v in self.program.views]
        order += [(i.span, "insert", str(n)) for n, i in enumerate(self.program.inserts)]
        order.sort(key=lambda item: (item[0].line, item[0].column))
        for _, statement, name in order:
            if statement == "source":
                source = self.program.source(name)
                self.tree.source_nodes[name] = self.physical(
                    TransformationKind.SOURCE,
                    source_name(source),
                    Operator.SOURCE,
                    (),
                    source.hints,
                    source.span,
                    bounded=_bounded(source),
                )
            elif statement == "view":
                view = self.program.view(name)
                ids: list[int] = []
                self.view_ends[name] = self.stream(view.stream, ids)
                self.view_steps[name] = ids
            else:
                insert = self.program.inserts[int(name)]
                end = self.stream(insert.stream, [])
                sink = self.program.sink(insert.sink)
                self.physical(
                    TransformationKind.SINK,
                    sink_name(sink),
                    Operator.SINK,
                    (end,),
                    sink.hints,
                    insert.span,
                )
        return self.tree

    # ------------------------------------------------------------ streams and steps

    def origin(self, stream: Stream) -> int:
        origin = stream.origin
        if isinstance(origin, FromSource):
            return self.tree.source_nodes[origin.name]
        if isinstance(origin, FromView):
            return self.view_ends[origin.name]
        if isinstance(origin, FromSourceErrors):
            source = self.tree.source_nodes[origin.source]
            return self.side_output(source, origin.span, ERRORS_OUTPUT)
        _, output = self.program.side_output(origin)
        route = self.view_steps[origin.view][output.step_index]
        return self.side_output(route, origin.span, origin.output)

    def stream(self, stream: Stream, ids: list[int]) -> int:
        """Add the stream's steps; ``ids[i]`` is the transformation ending step ``i``."""
        current = self.origin(stream)
        for step in stream.steps:
            current = self.step(step, current)
            ids.append(current)
            if self.tree[current].kind not in VIRTUAL_TRANSFORMATIONS:
                self.tree.step_nodes[id(step)] = current
        return current

    def step(self, step: Step, current: int) -> int:
        """The transformations running ``step`` on ``current``: the last one's id."""
        return TRANSLATORS[type(step)](self, step, current)

    def partition_step(self, step: Step, current: int) -> int:
        assert step.partition is not None
        return self.virtual(
            TransformationKind.PARTITION,
            current,
            step.span,
            partitioner=_partitioner(step.partition),
            keys=step.keys,
        )

    def union_step(self, step: Step, current: int) -> int:
        others = tuple(self.origin(s) for s in step.inputs)
        return self.virtual(TransformationKind.UNION, current, step.span, inputs=(current, *others))

    def join_step(self, step: Step, current: int) -> int:
        (right,) = step.inputs
        assert right.keys is not None
        left_in = self.hash_partition(current, step.span, step.keys)
        right_in = self.hash_partition(self.origin(right), step.span, right.keys)
        return self.physical(
            TransformationKind.TWO_INPUT,
            step_name(step),
            _operator(step),
            (left_in, right_in),
            step.hints,
            step.span,
            keys=step.keys,
        )

    def aggregate_step(self, step: Step, current: int) -> int:
        if step.keys:
            return self.one_input_step(step, current)
        # Flink's windowAll / global aggregation: a HASH exchange on a constant key
        # into one non-parallel operator (parallelism 1, max parallelism 1).
        hints = step.hints
        if hints.parallelism not in (None, 1):
            self.reporter.error(
                Code.E0311,
                f"a global {step_name(step)} runs with parallelism 1, not {hints.parallelism}",
                hints.spans["parallelism"],
                help="KEY BY a column first to aggregate in parallel",
            )
        return self.physical(
            TransformationKind.ONE_INPUT,
            step_name(step),
            _operator(step),
            (self.hash_partition(current, step.span),),
            hints,
            step.span,
            parallelism=1,
            max_parallelism=1,
        )

    def top_step(self, step: Step, current: int) -> int:
        """Flink's Rank (WindowRank after a WINDOW): keyed by the PER columns, or one
        non-parallel operator over every row when there are none (a global Top-N)."""
        operator = _operator(step)
        if not step.keys:
            return self.physical(
                TransformationKind.ONE_INPUT,
                step_name(step),
                operator,
                (self.hash_partition(current, step.span),),
                step.hints,
                step.span,
                parallelism=1,
                max_parallelism=1,
            )
        if self._needs_key_partition(step, current):
            current = self.hash_partition(current, step.span, step.keys)
        return self.physical(
            TransformationKind.ONE_INPUT,
            step_name(step),
            operator,
            (current,),
            step.hints,
            step.span,
            step.keys,
        )

    def match_step(self, step: Step, current: int) -> int:
        """Flink's StreamExecMatch: a HASH exchange on the PARTITION BY columns into a
        StreamRecordTimestampInserter (the rowtime into each record's timestamp), then the
        keyed Match operator, chained to it (FORWARD)."""
        current = self.hash_partition(current, step.span, step.keys)
        inserter = self.physical(
            TransformationKind.ONE_INPUT,
            "StreamRecordTimestampInserter",
            Operator.MAP,
            (current,),
            step.hints,
            step.span,
        )
        return self.physical(
            TransformationKind.ONE_INPUT,
            step_name(step),
            _operator(step),
            (inserter,),
            step.hints,
            step.span,
            step.keys,
        )

    def deduplicate_step(self, step: Step, current: int) -> int:
        if self._needs_key_partition(step, current):
            current = self.hash_partition(current, step.span, step.keys)
        return self.one_input_step(step, current)

    def one_input_step(self, step: Step, current: int) -> int:
        return self.physical(
            TransformationKind.ONE_INPUT,
            step_name(step),
            _operator(step),
            (current,),
            step.hints,
            step.span,
            step.keys if isinstance(step, _KEYED_STEPS) else (),
        )

    def _needs_key_partition(self, step: Step, current: int) -> bool:
        """DEDUPLICATE reuses a KEY BY on the same columns just before it, else adds its own."""
        upstream = self.tree[current]
        return not (upstream.partitioner == Partitioner.HASH and upstream.keys == step.keys)


def _operator(step: Step) -> Operator:
    """The operator of a step that runs one (every step its translator gives a node)."""
    operator = step.operator
    if operator is None:
        raise ValueError(f"{type(step).__name__} runs no operator")
    return operator


def _partitioner(name: str) -> Partitioner:
    """A partition step's partitioner, by the name :class:`~flowc.program.Step` gives it."""
    return Partitioner(name)


#: How each step class is built, as Flink's StreamGraphGenerator keys its translators by
#: the transformation's class (tests/test_step_classes.py: every class has one).
TRANSLATORS: dict[type[Step], Callable[..., int]] = {
    WhereStep: _Builder.one_input_step,
    SelectStep: _Builder.one_input_step,
    ExtendStep: _Builder.one_input_step,
    SetStep: _Builder.one_input_step,
    DropStep: _Builder.one_input_step,
    RenameStep: _Builder.one_input_step,
    ExplodeStep: _Builder.one_input_step,
    RouteStep: _Builder.one_input_step,
    KeyByStep: _Builder.partition_step,
    PartitionStep: _Builder.partition_step,
    PartitionByStep: _Builder.partition_step,
    UnionStep: _Builder.union_step,
    JoinStep: _Builder.join_step,
    DimensionJoinStep: _Builder.join_step,
    AggregateStep: _Builder.aggregate_step,
    WindowAggregateStep: _Builder.aggregate_step,
    DeduplicateStep: _Builder.deduplicate_step,
    TopStep: _Builder.top_step,
    WindowTopStep: _Builder.top_step,
    OverStep: _Builder.top_step,
    MatchStep: _Builder.match_step,
}

#: The one-input steps whose operator is keyed (by the keys in force).
_KEYED_STEPS = (AggregateStep, WindowAggregateStep, DeduplicateStep)


def _bounded(source: SourceDef) -> bool:
    """Bounded as Flink sees it: a file source (FileSource without monitoring) or a datagen
    with ``number_of_rows``; rate, socket and Kafka sources are unbounded."""
    if source.connector == "files":
        return True
    return source.connector == "datagen" and dict(source.options).get("number_of_rows") is not None
