"""Pass 2: Transformation tree → StreamGraph, by Flink's StreamGraphGenerator rules.

Partition and side-output transformations become virtual ids, resolved while edges are
added (the partitioner nearest the consumer wins); a union adds no node, its consumer
gets one edge per input. Also here, because they depend on the StreamGraph alone:
Flink's chainability test (``is_chainable``) and operator ids (StreamGraphHasherV2).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field
from typing import Any

from flowc.diagnostics import Reporter
from flowc.errorcodes import Code
from flowc.fast_dataclass import dataclass
from flowc.flink.hashing import hash_stream_nodes, to_hex
from flowc.graph.transformations import Transformation, TransformationTree
from flowc.limits import MAX_STREAM_EDGES, MAX_STREAM_NODES
from flowc.outputs import count_of, document
from flowc.program import Settings
from flowc.render import Diagram, Edge, Node, Shape
from flowc.spans import Span
from flowc.vocabulary import (
    POINTWISE_PARTITIONERS,
    ChainingStrategy,
    NodeKind,
    Operator,
    Partitioner,
    TransformationKind,
)

DEFAULT_SLOT_SHARING_GROUP = "default"

#: The strategies whose operator chains to its outputs (all but NEVER).
_CHAINS_TO_OUTPUTS = frozenset({ChainingStrategy.ALWAYS, ChainingStrategy.HEAD})
#: The strategies whose operator chains to its input (HEAD starts a chain).
_CHAINS_TO_INPUT = frozenset({ChainingStrategy.ALWAYS})
#: The partitioners whose edges may be chained.
_CHAINED_PARTITIONERS = frozenset({Partitioner.FORWARD})


@dataclass(slots=True, eq=False)
class StreamEdge:
    source_id: int
    target_id: int
    type_number: int
    partitioner: Partitioner
    exchange_mode: str
    output_tag: str | None
    unique_id: int
    keys: tuple[str, ...]
    span: Span
    #: Flink's own REBALANCE between operators of different parallelism, where the program
    #: wrote no partition step (not in the JSON: Flink's graph does not say it either).
    implicit: bool = False
    #: Flink's FORWARD where the program wrote no partition step between equal
    #: parallelisms: a ForwardForUnspecifiedPartitioner in BATCH mode (see
    #: flowc.graph.job_graph's ship_strategy); not in the JSON, which says FORWARD as Flink's.
    forward_for_unspecified: bool = False

    @property
    def pointwise(self) -> bool:
        return self.partitioner in POINTWISE_PARTITIONERS

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source_id,
            "target": self.target_id,
            "type_number": self.type_number,
            "ship_strategy": self.partitioner,
            "exchange_mode": self.exchange_mode,
            "output_tag": self.output_tag,
            "keys": list(self.keys),
            "span": self.span.to_json(),
        }


@dataclass(slots=True, eq=False)
class StreamNode:
    id: int
    name: str
    operator: Operator
    kind: NodeKind
    parallelism: int
    max_parallelism: int | None
    slot_sharing_group: str
    chaining_strategy: ChainingStrategy
    uid: str | None
    keys: tuple[str, ...]
    span: Span
    parallelism_configured: bool
    in_edges: list[StreamEdge] = field(default_factory=list)
    out_edges: list[StreamEdge] = field(default_factory=list)
    #: Flink's changelog mode of its output ("I", "I,UB,UA,D"...; flowc.graph.changelog).
    changelog_mode: str = ""

    def __str__(self) -> str:
        """Flink's StreamNode.toString(), used in its error messages."""
        return f"{self.name}-{self.id}"


@dataclass(slots=True, eq=False)
class StreamGraph:
    job_name: str
    settings: Settings
    nodes: dict[int, StreamNode] = field(default_factory=dict)
    sources: list[int] = field(default_factory=list)
    sinks: list[int] = field(default_factory=list)
    _hashes: dict[int, bytes] | None = None

    @property
    def streaming(self) -> bool:
        return self.settings.execution_mode == "streaming"

    @property
    def chaining_enabled(self) -> bool:
        return self.settings.chaining

    def edges(self) -> list[StreamEdge]:
        return [e for node in self.nodes.values() for e in node.out_edges]

    # ------------------------------------------------------------ Flink's chaining test

    def is_chainable(self, edge: StreamEdge) -> bool:
        """StreamingJobGraphGenerator.isChainable: one input edge, and a chainable input."""
        return len(self.nodes[edge.target_id].in_edges) == 1 and self.is_chainable_input(edge)

    def is_chainable_input(self, edge: StreamEdge) -> bool:
        up = self.nodes[edge.source_id]
        down = self.nodes[edge.target_id]
        if not self.chaining_enabled:
            return False
        if up.slot_sharing_group != down.slot_sharing_group:
            return False
        if up.chaining_strategy not in _CHAINS_TO_OUTPUTS:
            return False
        if down.chaining_strategy not in _CHAINS_TO_INPUT:
            return False
        if up.parallelism != down.parallelism:
            return False
        if edge.partitioner not in _CHAINED_PARTITIONERS or edge.exchange_mode == "BATCH":
            return False
        inputs = down.in_edges
        if len(inputs) == 1 and inputs[0] is edge:
            return True  # its only input (most operators): no other edge to compare
        return not any(
            other is not edge and other.type_number == edge.type_number for other in inputs
        )

    # ------------------------------------------------------------ operator ids

    @property
    def hashes(self) -> dict[int, bytes]:
        """StreamGraphHasherV2: node id → 16-byte hash (uid hash, else traversal-order hash)."""
        if self._hashes is None:
            self._hashes = self._compute_hashes()
        return self._hashes

    def _compute_hashes(self) -> dict[int, bytes]:
        return hash_stream_nodes(
            sorted(self.sources),
            {n.id: n.out_edges for n in self.nodes.values()},
            {n.id: n.in_edges for n in self.nodes.values()},
            {n.id: n.uid for n in self.nodes.values()},
            self.is_chainable,
        )

    def operator_id(self, node_id: int) -> str:
        return to_hex(self.hashes[node_id])

    # ------------------------------------------------------------ outputs

    def json_nodes(self) -> list[dict[str, Any]]:
        """Flink's getStreamingPlanAsJSON nodes, plus flowc's extra keys on each."""
        order = sorted(i for i in self.nodes if i not in self.sinks) + sorted(self.sinks)
        out = []
        for node_id in order:
            node = self.nodes[node_id]
            pact = _PACTS[node.kind]
            data: dict[str, Any] = {
                "id": node.id,
                "type": node.name,
                "pact": pact,
                "contents": node.name,
                "parallelism": node.parallelism,
            }
            if node.kind is not NodeKind.SOURCE:
                data["predecessors"] = [
                    {"id": e.source_id, "ship_strategy": e.partitioner, "side": "second"}
                    for e in node.in_edges
                ]
            data.update(
                {
                    "operator": node.operator,
                    "uid": node.uid,
                    "operator_id": self.operator_id(node.id),
                    "max_parallelism": node.max_parallelism,
                    "slot_sharing_group": node.slot_sharing_group,
                    "chaining_strategy": node.chaining_strategy,
                    "keys": list(node.keys),
                    "span": node.span.to_json(),
                    "changelog_mode": node.changelog_mode,
                }
            )
            if node.kind is not NodeKind.SOURCE:
                for edge, predecessor in zip(node.in_edges, data["predecessors"], strict=True):
                    predecessor["type_number"] = edge.type_number
                    predecessor["exchange_mode"] = edge.exchange_mode
                    if edge.output_tag is not None:
                        predecessor["output_tag"] = edge.output_tag
                    if edge.keys:
                        predecessor["keys"] = list(edge.keys)
            out.append(data)
        return out

    def to_json(self) -> str:
        return document("streamgraph", {"job_name": self.job_name, "nodes": self.json_nodes()})

    def to_text(self) -> str:
        lines = [
            f"StreamGraph of job '{self.job_name}' ({self.settings.execution_mode}, "
            f"{count_of(len(self.nodes), 'node')}, {count_of(len(self.edges()), 'edge')})"
        ]
        for node in self.nodes.values():
            max_p = f", maxP {node.max_parallelism}" if node.max_parallelism is not None else ""
            uid = f", uid '{node.uid}'" if node.uid is not None else ""
            lines.append(
                f"  [{node.id}] {node.name}  (p {node.parallelism}{max_p}, group "
                f"'{node.slot_sharing_group}', {node.chaining_strategy}{uid})  "
                f"line {node.span.line}"
            )
            lines.append(f"      changelog {node.changelog_mode}")
            lines.append(f"      id {self.operator_id(node.id)}")
            for edge in node.out_edges:
                extra = f" side output '{edge.output_tag}'" if edge.output_tag else ""
                keys = f"({', '.join(edge.keys)})" if edge.keys else ""
                chain = "chained" if self.is_chainable(edge) else "exchange"
                lines.append(
                    f"      -> [{edge.target_id}] {self.nodes[edge.target_id].name}: "
                    f"{edge.partitioner}{keys} {'POINTWISE' if edge.pointwise else 'ALL_TO_ALL'}"
                    f"{extra} ({chain})"
                )
        return "\n".join(lines) + "\n"

    def diagram(self) -> Diagram:
        """A box per node with its parallelism, each edge labelled with its partitioner."""
        nodes = tuple(
            Node(f"n{node.id}", f"{node.name}\np={node.parallelism}")
            for node in self.nodes.values()
        )
        edges = tuple(
            Edge(f"n{edge.source_id}", f"n{edge.target_id}", edge.partitioner)
            for edge in self.edges()
        )
        return Diagram(self.job_name, nodes, edges, default_shape=Shape.BOX)

    def to_dot(self) -> str:
        return self.diagram().to_dot()

    def to_mermaid(self) -> str:
        return self.diagram().to_mermaid()


#: Flink's JSON plan names each kind of node by its PACT.
_PACTS = {NodeKind.SOURCE: "Data Source", NodeKind.SINK: "Data Sink", NodeKind.OPERATOR: "Operator"}


# ---------------------------------------------------------------- the generator


@dataclass(frozen=True, slots=True)
class _VirtualPartition:
    partitioner: Partitioner
    keys: tuple[str, ...]
    span: Span


_VIRTUAL = "virtual partition and side-output nodes"
_BOUND_HELP = {
    "operators": "split the job (docs/limits.md lists flowc's bounds)",
    "edges": "a UNION ALL of the same input twice is two edges, so reading a view that "
    "doubles its input doubles the edges again (docs/limits.md lists flowc's bounds)",
    _VIRTUAL: "a partition step after a UNION ALL is one virtual node per input edge "
    "(docs/limits.md lists flowc's bounds)",
}


#: The StreamNode kind of each physical transformation.
_NODE_KINDS = {
    TransformationKind.SOURCE: NodeKind.SOURCE,
    TransformationKind.ONE_INPUT: NodeKind.OPERATOR,
    TransformationKind.TWO_INPUT: NodeKind.OPERATOR,
    TransformationKind.SINK: NodeKind.SINK,
}


def build_stream_graph(tree: TransformationTree, reporter: Reporter) -> StreamGraph:
    return _Generator(tree, reporter).generate()


class _PastBound(Exception):
    """The StreamGraph being built would pass a bound (E0903, reported where it passes)."""


class _Generator:
    """StreamGraphGenerator, linear in the size of the StreamGraph (nodes, edges, virtual
    ids), which is bounded as it is built (E0903): a UNION ALL of the same input twice gives
    its consumer two edges, so n views each doubling the last would ask for 2^n edges; they
    are counted before they are made."""

    def __init__(self, tree: TransformationTree, reporter: Reporter) -> None:
        self.tree = tree
        self.reporter = reporter
        self.settings = tree.settings
        self.graph = StreamGraph(job_name=tree.job_name, settings=tree.settings)
        #: The ids each transformation's output stands for; unions' are not kept (see ids).
        self.done: dict[int, list[int]] = {}
        #: How many ids a union's output stands for (each union's, and only unions').
        self.widths: dict[int, int] = {}
        #: Each virtual id: the StreamNode it resolves to, the partitioner nearest the
        #: consumer, and the side-output tag nearest the consumer.
        self.virtual: dict[int, tuple[int, _VirtualPartition | None, str | None]] = {}
        #: Edges so far by (source, target): a parallel edge's unique id.
        self.parallel: dict[tuple[int, int], int] = {}
        self.edges = 0
        self.next_virtual_id = max(tree.transformations, default=0) + 1
        #: Virtual ids stop before this one.
        self.virtual_bound = self.next_virtual_id + MAX_STREAM_EDGES

    def generate(self) -> StreamGraph:
        if self.settings.execution_mode == "batch":
            for t in self.tree.transformations.values():
                if t.kind is TransformationKind.SOURCE and not t.bounded:
                    self.reporter.error(
                        Code.E0312,
                        "Detected an UNBOUNDED source with the 'execution.runtime-mode' set to "
                        "'BATCH'. This combination is not allowed, please set the "
                        "'execution.runtime-mode' to STREAMING or AUTOMATIC",
                        t.span,
                        help="batch jobs read bounded sources: files, or datagen with "
                        "number_of_rows",
                    )
        transformations = self.tree.transformations
        try:
            for ident in self.tree.env_order:
                self.transform(transformations[ident])
        except _PastBound:
            pass  # reported
        return self.graph

    def past_bound(self, t: Transformation, what: str, bound: int) -> _PastBound:
        self.reporter.error(
            Code.E0903,
            f"the job's StreamGraph would pass flowc's bound of {bound:,} {what}",
            t.span,
            help=_BOUND_HELP[what],
        )
        return _PastBound()

    # ------------------------------------------------------------ the transformations

    def transform(self, root: Transformation) -> None:
        """Transform ``root`` and what it reads, inputs first and in order (Flink's
        recursive ``transform``, with an explicit stack: long pipelines need no deep
        recursion)."""
        done = self.done
        transformations = self.tree.transformations
        stack = [(root, False)]
        while stack:
            t, ready = stack.pop()
            if t.id in done:
                continue
            if not ready:
                stack.append((t, True))
                stack.extend(
                    (transformations[i], False) for i in reversed(t.inputs) if i not in done
                )
                continue
            done[t.id] = self.transform_one(t)

    def width(self, ident: int) -> int:
        """How many ids a transformed output stands for (see ids), without listing them."""
        found = self.widths.get(ident)
        return len(self.done[ident]) if found is None else found

    def ids(self, ident: int) -> list[int]:
        """The StreamGraph ids (real or virtual) a transformed output stands for; a union's
        are its inputs', in order (expanded on each use, not kept: a chain of unions would
        otherwise keep lists of quadratic total length)."""
        if ident not in self.widths:
            return self.done[ident]
        out: list[int] = []
        stack = [iter(self.tree[ident].inputs)]
        while stack:
            following = next(stack[-1], None)
            if following is None:
                stack.pop()
            elif following in self.widths:
                stack.append(iter(self.tree[following].inputs))
            else:
                out.extend(self.done[following])
        return out

    def transform_one(self, t: Transformation) -> list[int]:
        """One transformation whose inputs are transformed: its ids."""
        return _TRANSFORMS[t.kind](self, t)

    def transform_source(self, t: Transformation) -> list[int]:
        if len(self.graph.nodes) == MAX_STREAM_NODES:
            raise self.past_bound(t, "operators", MAX_STREAM_NODES)
        self.add_node(
            t,
            DEFAULT_SLOT_SHARING_GROUP if t.slot_sharing_group is None else t.slot_sharing_group,
        )
        self.graph.sources.append(t.id)
        return [t.id]

    def transform_partition(self, t: Transformation) -> list[int]:
        assert t.partitioner is not None
        self.check_virtual_bound(t)
        partition = _VirtualPartition(t.partitioner, t.keys, t.span)
        ids = []
        for input_id in self.ids(t.inputs[0]):
            node, _, tag = self.resolve(input_id)
            ids.append(self.new_virtual_id(node, partition, tag))
        return ids

    def transform_side_output(self, t: Transformation) -> list[int]:
        assert t.output_tag is not None
        self.check_virtual_bound(t)
        ids = []
        for input_id in self.ids(t.inputs[0]):
            node, partition_or_none, _ = self.resolve(input_id)
            ids.append(self.new_virtual_id(node, partition_or_none, t.output_tag))
        return ids

    def transform_union(self, t: Transformation) -> list[int]:
        self.widths[t.id] = sum(self.width(i) for i in t.inputs)
        return []  # see ids

    def transform_one_input(self, t: Transformation) -> list[int]:
        self.add_operator(t, numbered=False)
        return [t.id]

    def transform_two_input(self, t: Transformation) -> list[int]:
        self.add_operator(t, numbered=True)
        return [t.id]

    def transform_sink(self, t: Transformation) -> list[int]:
        self.add_operator(t, numbered=False)
        self.graph.sinks.append(t.id)
        return []

    def check_virtual_bound(self, t: Transformation) -> None:
        """A partition or side output adds one virtual id per id its input stands for."""
        if self.next_virtual_id + self.width(t.inputs[0]) > self.virtual_bound:
            raise self.past_bound(t, _VIRTUAL, MAX_STREAM_EDGES)

    def add_operator(self, t: Transformation, numbered: bool) -> None:
        """A node for ``t`` and an edge from each id its inputs stand for; ``numbered``: each
        input's edges carry its position (a two-input operator's type number 1 or 2), else 0."""
        if len(self.graph.nodes) == MAX_STREAM_NODES:
            raise self.past_bound(t, "operators", MAX_STREAM_NODES)
        self.edges += sum(self.width(i) for i in t.inputs)
        if self.edges > MAX_STREAM_EDGES:
            raise self.past_bound(t, "edges", MAX_STREAM_EDGES)
        inputs = [self.ids(i) for i in t.inputs]
        flat = [i for group in inputs for i in group]
        self.add_node(t, self.slot_sharing_group(t.slot_sharing_group, flat))
        for index, group in enumerate(inputs):
            type_number = index + 1 if numbered else 0
            for input_id in group:
                self.add_edge(input_id, t.id, type_number)

    def new_virtual_id(
        self, node: int, partition: _VirtualPartition | None, tag: str | None
    ) -> int:
        ident = self.next_virtual_id
        self.next_virtual_id += 1
        self.virtual[ident] = (node, partition, tag)
        return ident

    def resolve(self, ident: int) -> tuple[int, _VirtualPartition | None, str | None]:
        """A real or virtual id's StreamNode, with the partitioner and side-output tag
        nearest the consumer (addEdgeInternal's walk up through virtual ids, memoized)."""
        if ident in self.graph.nodes:
            return ident, None, None
        return self.virtual[ident]

    def slot_sharing_group(self, specified: str | None, input_ids: list[int]) -> str:
        """determineSlotSharingGroup: a hint wins; else the inputs' group if they agree."""
        if specified is not None:
            return specified
        group: str | None = None
        for ident in input_ids:
            candidate = self.graph.nodes[self.resolve(ident)[0]].slot_sharing_group
            if group is None:
                group = candidate
            elif group != candidate:
                return DEFAULT_SLOT_SHARING_GROUP
        return group if group is not None else DEFAULT_SLOT_SHARING_GROUP

    def add_node(self, t: Transformation, group: str) -> None:
        max_parallelism = t.max_parallelism
        if max_parallelism is None and self.settings.max_parallelism is not None:
            max_parallelism = self.settings.max_parallelism
        assert isinstance(t.operator, Operator)
        self.graph.nodes[t.id] = StreamNode(
            id=t.id,
            name=t.name,
            operator=t.operator,
            kind=_NODE_KINDS[t.kind],
            parallelism=t.parallelism,
            max_parallelism=max_parallelism,
            slot_sharing_group=group,
            chaining_strategy=t.chaining_strategy,
            uid=t.uid,
            keys=t.keys,
            span=t.span,
            parallelism_configured=t.parallelism_configured,
        )

    def add_edge(self, up: int, down: int, type_number: int) -> None:
        """addEdgeInternal: resolve virtual ids; the partitioner nearest the consumer wins."""
        up, partitioner, tag = self.resolve(up)
        upstream, downstream = self.graph.nodes[up], self.graph.nodes[down]
        name: Partitioner
        if partitioner is None:
            name = (
                Partitioner.FORWARD
                if upstream.parallelism == downstream.parallelism
                else Partitioner.REBALANCE
            )
            keys: tuple[str, ...] = ()
            span = downstream.span
        else:
            name, keys, span = partitioner.partitioner, partitioner.keys, partitioner.span
        if upstream.parallelism != downstream.parallelism and name == Partitioner.FORWARD:
            self.reporter.error(
                Code.E0310,
                "Forward partitioning does not allow change of parallelism. Upstream operation: "
                f"{upstream} parallelism: {upstream.parallelism}, downstream operation: "
                f"{downstream} parallelism: {downstream.parallelism} You must use another "
                "partitioning strategy, such as broadcast, rebalance, shuffle or global.",
                span,
                help="use REBALANCE (or RESCALE, SHUFFLE, BROADCAST, GLOBAL), or give both "
                "sides the same parallelism",
            )
        unique_id = self.parallel.get((up, down), 0)
        self.parallel[(up, down)] = unique_id + 1
        edge = StreamEdge(
            source_id=up,
            target_id=down,
            type_number=type_number,
            partitioner=name,
            exchange_mode="UNDEFINED",
            output_tag=tag,
            unique_id=unique_id,
            keys=keys,
            span=span,
            implicit=partitioner is None and name == Partitioner.REBALANCE,
            forward_for_unspecified=partitioner is None and name == Partitioner.FORWARD,
        )
        upstream.out_edges.append(edge)
        downstream.in_edges.append(edge)


#: Each kind of transformation's step of the generator.
_TRANSFORMS: dict[TransformationKind, Callable[[_Generator, Transformation], list[int]]] = {
    TransformationKind.SOURCE: _Generator.transform_source,
    TransformationKind.PARTITION: _Generator.transform_partition,
    TransformationKind.SIDE_OUTPUT: _Generator.transform_side_output,
    TransformationKind.UNION: _Generator.transform_union,
    TransformationKind.ONE_INPUT: _Generator.transform_one_input,
    TransformationKind.TWO_INPUT: _Generator.transform_two_input,
    TransformationKind.SINK: _Generator.transform_sink,
}
