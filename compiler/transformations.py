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
from dataclasses import dataclass, field

from flowc.catalog import ERRORS_OUTPUT
from flowc.diagnostics import Reporter
from flowc.names import sink_name, source_name, step_name
from flowc.outputs import document, dot_string, mermaid_label
from flowc.program import (
    FromSource,
    FromSourceErrors,
    FromView,
    Hints,
    Program,
    Settings,
    SourceDef,
    Step,
    Stream,
)
from flowc.spans import Span

CHAINING = {"always": "ALWAYS", "new_chain": "HEAD", "never": "NEVER"}

#: Transformation kinds that become no StreamNode of their own.
VIRTUAL_KINDS = frozenset({"partition", "side_output", "union"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Transformation:
    """``kind``: source, one_input, two_input, partition, side_output, union or sink.

    ``operator`` names the step (filter, map, keyed_aggregate, window, ...);
    ``partitioner`` is set on partition transformations (FORWARD, REBALANCE, RESCALE,
    SHUFFLE, BROADCAST, GLOBAL, HASH, CUSTOM), ``output_tag`` on side-output selections,
    ``keys`` on HASH/CUSTOM partitions and keyed operators.
    """

    id: int
    kind: str
    name: str
    operator: str
    inputs: tuple[int, ...]
    parallelism: int
    max_parallelism: int | None
    uid: str | None
    slot_sharing_group: str | None
    chaining_strategy: str
    span: Span
    partitioner: str | None = None
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
            if t.kind not in VIRTUAL_KINDS:
                extra.append(f"p={t.parallelism}")
                if t.max_parallelism is not None:
                    extra.append(f"maxP={t.max_parallelism}")
                if t.uid is not None:
                    extra.append(f"uid={json.dumps(t.uid)}")
                if t.slot_sharing_group is not None:
                    extra.append(f"group={json.dumps(t.slot_sharing_group)}")
                if t.chaining_strategy != "ALWAYS":
                    extra.append(t.chaining_strategy)
            detail = f" [{', '.join(extra)}]" if extra else ""
            lines.append(
                f"  {t.id:>3} {t.kind:<11} {t.name}{detail} <- {inputs}   (line {t.span.line})"
            )
        return "\n".join(lines) + "\n"

    def _label(self, t: Transformation) -> str:
        if t.kind in VIRTUAL_KINDS:
            return f"{t.id}: {t.name}"
        return f"{t.id}: {t.name}\np={t.parallelism}"

    def to_dot(self) -> str:
        lines = [f"digraph {dot_string(self.job_name)} {{", "  rankdir=LR;"]
        for t in self.transformations.values():
            shape = "ellipse" if t.kind in VIRTUAL_KINDS else "box"
            lines.append(f"  t{t.id} [shape={shape}, label={dot_string(self._label(t))}];")
        for t in self.transformations.values():
            for input_id in t.inputs:
                lines.append(f"  t{input_id} -> t{t.id};")
        lines.append("}")
        return "\n".join(lines) + "\n"

    def to_mermaid(self) -> str:
        lines = ["flowchart LR"]
        for t in self.transformations.values():
            label = mermaid_label(self._label(t))
            lines.append(
                f"  t{t.id}([{label}])" if t.kind in VIRTUAL_KINDS else f"  t{t.id}[{label}]"
            )
        for t in self.transformations.values():
            for input_id in t.inputs:
                lines.append(f"  t{input_id} --> t{t.id}")
        return "\n".join(lines) + "\n"


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
        self.next_id = 1
        self.sources: dict[str, int] = {}
        self.view_ends: dict[str, int] = {}
        self.view_steps: dict[str, list[int]] = {}

    def add(self, **fields: object) -> int:
        ident = self.next_id
        self.next_id += 1
        transformation = Transformation(id=ident, **fields)  # type: ignore[arg-type]
        self.tree.transformations[ident] = transformation
        if transformation.kind in ("one_input", "two_input", "sink"):
            self.tree.env_order.append(ident)
        return ident

    def parallelism(self, hints: Hints) -> int:
        return hints.parallelism if hints.parallelism is not None else self.settings.parallelism

    def physical(
        self,
        kind: str,
        name: str,
        operator: str,
        inputs: tuple[int, ...],
        hints: Hints,
        span: Span,
        keys: tuple[str, ...] = (),
        parallelism: int | None = None,
        max_parallelism: int | None = None,
    ) -> int:
        return self.add(
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
            chaining_strategy=CHAINING[hints.chaining],
            span=span,
            keys=keys,
            parallelism_configured=hints.parallelism is not None or parallelism is not None,
        )

    def virtual(
        self,
        kind: str,
        input_id: int,
        span: Span,
        partitioner: str | None = None,
        output_tag: str | None = None,
        keys: tuple[str, ...] = (),
        inputs: tuple[int, ...] | None = None,
    ) -> int:
        upstream = self.tree[input_id]
        names = {
            "partition": (partitioner or "").capitalize() if partitioner else "Partition",
            "side_output": f"SideOutput({output_tag})",
            "union": "Union",
        }
        return self.add(
            kind=kind,
            name=names[kind],
            operator=kind,
            inputs=inputs if inputs is not None else (input_id,),
            parallelism=upstream.parallelism,
            max_parallelism=upstream.max_parallelism,
            uid=None,
            slot_sharing_group=None,
            chaining_strategy="ALWAYS",
            span=span,
            partitioner=partitioner,
            output_tag=output_tag,
            keys=keys,
        )

    # ------------------------------------------------------------ driver

    def build(self) -> TransformationTree:
        """Statements in file order: sources, views and inserts as the program declares them."""
        order: list[tuple[Span, str, str]] = []
        order += [(s.span, "source", s.name) for s in self.program.sources]
        order += [(v.span, "view", v.name) for v in self.program.views]
        order += [(i.span, "insert", str(n)) for n, i in enumerate(self.program.inserts)]
        order.sort(key=lambda item: (item[0].line, item[0].column))
        for _, kind, name in order:
            if kind == "source":
                source = self.program.source(name)
                self.sources[name] = self.add(
                    kind="source",
                    name=source_name(source),
                    operator="source",
                    inputs=(),
                    parallelism=self.parallelism(source.hints),
                    max_parallelism=source.hints.max_parallelism,
                    uid=source.hints.uid,
                    slot_sharing_group=source.hints.slot_sharing_group,
                    chaining_strategy=CHAINING[source.hints.chaining],
                    span=source.span,
                    parallelism_configured=source.hints.parallelism is not None,
                    bounded=_bounded(source),
                )
                self.tree.source_nodes[name] = self.sources[name]
            elif kind == "view":
                view = self.program.view(name)
                ids: list[int] = []
                self.view_ends[name] = self.stream(view.stream, ids)
                self.view_steps[name] = ids
            else:
                insert = self.program.inserts[int(name)]
                end = self.stream(insert.stream, [])
                sink = self.program.sink(insert.sink)
                self.physical("sink", sink_name(sink), "sink", (end,), sink.hints, insert.span)
        return self.tree

    # ------------------------------------------------------------ streams and steps

    def origin(self, stream: Stream) -> int:
        origin = stream.origin
        if isinstance(origin, FromSource):
            return self.sources[origin.name]
        if isinstance(origin, FromView):
            return self.view_ends[origin.name]
        if isinstance(origin, FromSourceErrors):
            source = self.sources[origin.source]
            return self.virtual("side_output", source, origin.span, output_tag=ERRORS_OUTPUT)
        view = self.program.view(origin.view)
        output = next(o for o in view.side_outputs if o.name == origin.output)
        route = self.view_steps[origin.view][output.step_index]
        return self.virtual("side_output", route, origin.span, output_tag=origin.output)

    def stream(self, stream: Stream, ids: list[int]) -> int:
        """Add the stream's steps; ``ids[i]`` is the transformation ending step ``i``."""
        current = self.origin(stream)
        for step in stream.steps:
            current = self.step(step, current)
            ids.append(current)
            if self.tree[current].kind not in VIRTUAL_KINDS:
                self.tree.step_nodes[id(step)] = current
        return current

    def step(self, step: Step, current: int) -> int:
        hints = step.hints
        span = step.span
        if step.kind in ("key_by", "partition", "partition_by"):
            assert step.partition is not None
            return self.virtual(
                "partition", current, span, partitioner=step.partition, keys=step.keys
            )
        if step.kind == "union":
            others = tuple(self.origin(s) for s in step.inputs)
            return self.virtual("union", current, span, inputs=(current, *others))
        if step.kind == "join":
            (right,) = step.inputs
            assert right.keys is not None
            left_in = self.virtual("partition", current, span, partitioner="HASH", keys=step.keys)
            right_in = self.virtual(
                "partition", self.origin(right), span, partitioner="HASH", keys=right.keys
            )
            return self.physical(
                "two_input",
                step_name(step),
                "join",
                (left_in, right_in),
                hints,
                span,
                keys=step.keys,
            )
        if step.kind in ("aggregate", "window_aggregate") and not step.keys:
            # Flink's windowAll / global aggregation: a HASH exchange on a constant key
            # into one non-parallel operator (parallelism 1, max parallelism 1).
            if hints.parallelism not in (None, 1):
                self.reporter.error(
                    "E0311",
                    f"a global {step_name(step)} runs with parallelism 1, not {hints.parallelism}",
                    hints.spans["parallelism"],
                    help="KEY BY a column first to aggregate in parallel",
                )
            partition = self.virtual("partition", current, span, partitioner="HASH")
            operator = "window" if step.kind == "window_aggregate" else "aggregate"
            return self.physical(
                "one_input",
                step_name(step),
                operator,
                (partition,),
                hints,
                span,
                parallelism=1,
                max_parallelism=1,
            )
        if step.kind == "deduplicate" and self._needs_key_partition(step, current):
            current = self.virtual("partition", current, span, partitioner="HASH", keys=step.keys)
        operator = {
            "where": "filter",
            "select": "map",
            "extend": "map",
            "drop": "map",
            "rename": "map",
            "explode": "flat_map",
            "aggregate": "keyed_aggregate",
            "window_aggregate": "window",
            "deduplicate": "deduplicate",
            "route": "process",
        }[step.kind]
        keys = step.keys if step.kind in ("aggregate", "window_aggregate", "deduplicate") else ()
        return self.physical("one_input", step_name(step), operator, (current,), hints, span, keys)

    def _needs_key_partition(self, step: Step, current: int) -> bool:
        """DEDUPLICATE reuses a KEY BY on the same columns just before it, else adds its own."""
        upstream = self.tree[current]
        return not (upstream.partitioner == "HASH" and upstream.keys == step.keys)


def _bounded(source: SourceDef) -> bool:
    """Bounded as Flink sees it: a file source (FileSource without monitoring) or a datagen
    with ``number_of_rows``; rate, socket and Kafka sources are unbounded."""
    if source.connector == "files":
        return True
    return source.connector == "datagen" and dict(source.options).get("number_of_rows") is not None
