"""Pass 3: StreamGraph → JobGraph, by Flink's StreamingJobGraphGenerator rules.

Operators chain when :meth:`StreamGraph.is_chainable` says so; chains are built
depth-first from the sources in ascending id, and vertices are created after their
downstream chains (post-order), as in Flink, so ``vertices`` is downstream-first.
JobEdges are connected per vertex in that order, one IntermediateDataSet per edge
(PIPELINED_BOUNDED in streaming) or shared where Flink reuses a BLOCKING one (batch).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import field
from typing import Any

from flowc.diagnostics import CompileError, Reporter
from flowc.errorcodes import Code
from flowc.fast_dataclass import dataclass
from flowc.flink.chains import chained_name, escape_description, tree_description
from flowc.flink.keygroups import compute_default_max_parallelism
from flowc.flink.murmur import murmur3_x64_128
from flowc.graph.stream_graph import StreamEdge, StreamGraph, StreamNode
from flowc.limits import MAX_CHAINED_OPERATORS
from flowc.outputs import count_of, document, reference_name
from flowc.program import Settings
from flowc.render import Diagram, Edge, Node, Shape
from flowc.spans import Span
from flowc.vocabulary import POINTWISE_PARTITIONERS, Partitioner

#: CheckpointCoordinatorConfiguration's DISABLED_CHECKPOINT_INTERVAL (Long.MAX_VALUE).
DISABLED_CHECKPOINT_INTERVAL = 2**63 - 1
#: Flink's MINIMAL_CHECKPOINT_TIME in ms.
MINIMAL_CHECKPOINT_TIME = 10


@dataclass(slots=True, eq=False)
class ChainedOperator:
    node_id: int
    operator_id: str
    name: str
    uid: str | None
    span: Span
    #: Its StreamNode's changelog mode (flowc.graph.changelog).
    changelog_mode: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.operator_id,
            "node_id": self.node_id,
            "name": self.name,
            "uid": self.uid,
            "span": self.span.to_json(),
            "changelog_mode": self.changelog_mode,
        }


@dataclass(slots=True, eq=False)
class IntermediateDataSet:
    """A result of vertex ``producer``, read by ``consumers``."""

    id: str
    producer: str
    result_partition_type: str
    partitioner: Partitioner
    consumers: list[JobEdge] = field(default_factory=list)


@dataclass(slots=True, eq=False)
class JobEdge:
    source: IntermediateDataSet
    target: str
    ship_strategy: Partitioner
    distribution: str
    stream_edge: StreamEdge

    @property
    def producer(self) -> str:
        return self.source.producer

    @property
    def exchange(self) -> str:
        return self.source.result_partition_type.lower()


@dataclass(slots=True, eq=False)
class JobVertex:
    id: str
    name: str
    head: int
    parallelism: int
    max_parallelism: int | None
    slot_sharing_group: str
    operators: list[ChainedOperator]
    description: str
    parallelism_configured: bool
    keyed: bool
    span: Span
    inputs: list[JobEdge] = field(default_factory=list)
    produced: list[IntermediateDataSet] = field(default_factory=list)
    #: BATCH mode, parallelism configured nowhere: Flink's adaptive batch scheduler decides
    #: it at run time (-1 in Flink's JobGraph); ``parallelism`` is then the bound flowc
    #: plans for (docs/plans.md, "Batch mode").
    adaptive: bool = False

    @property
    def flink_parallelism(self) -> int:
        """The parallelism in Flink's JobGraph: -1 where the scheduler decides it."""
        return -1 if self.adaptive else self.parallelism

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": self.id,
            "name": self.name,
            "parallelism": self.flink_parallelism,
        }
        if self.adaptive:
            data["planned_parallelism"] = self.parallelism
        data |= {
            "max_parallelism": self.max_parallelism,
            "slot_sharing_group": self.slot_sharing_group,
            "operator": "",
            "operator_strategy": "",
            "description": escape_description(self.description),
            "operators": [op.to_json() for op in self.operators],
        }
        if self.inputs:
            data["inputs"] = [
                {
                    "num": num,
                    "id": edge.producer,
                    "ship_strategy": edge.ship_strategy,
                    "distribution": edge.distribution,
                    "exchange": edge.exchange,
                    "dataset": edge.source.id,
                    "keys": list(edge.stream_edge.keys),
                }
                for num, edge in enumerate(self.inputs)
            ]
        data["optimizer_properties"] = {}
        data["span"] = self.span.to_json()
        return data


@dataclass(frozen=True, slots=True)
class CheckpointSettings:
    interval_ms: int
    exactly_once: bool
    mode: str

    @property
    def enabled(self) -> bool:
        return self.interval_ms != DISABLED_CHECKPOINT_INTERVAL

    def to_json(self) -> dict[str, Any]:
        return {
            "interval": self.interval_ms,
            "enabled": self.enabled,
            "exactly_once": self.exactly_once,
            "mode": self.mode,
        }


@dataclass(slots=True, eq=False)
class JobGraph:
    job_id: str
    name: str
    job_type: str
    stream_graph: StreamGraph
    checkpoints: CheckpointSettings
    vertices: dict[str, JobVertex] = field(default_factory=dict)

    def edges(self) -> list[JobEdge]:
        return [e for v in self.vertices.values() for e in v.inputs]

    def to_json(self) -> str:
        body = {
            "jid": self.job_id,
            "name": self.name,
            "type": self.job_type,
            "checkpoints": self.checkpoints.to_json(),
            "nodes": [v.to_json() for v in self.vertices.values()],
        }
        return document("jobgraph", body)

    def to_text(self) -> str:
        lines = [
            f"JobGraph of job '{self.name}' ({self.job_type}, "
            f"{count_of(len(self.vertices), 'vertex', 'vertices')}, "
            f"{count_of(len(self.edges()), 'edge')})",
            "checkpoints: "
            + (
                f"every {self.checkpoints.interval_ms} ms, {self.checkpoints.mode}"
                if self.checkpoints.enabled
                else "disabled"
            ),
        ]
        for vertex in self.topological():
            max_p = (
                vertex.max_parallelism
                if vertex.max_parallelism is not None
                else f"unset (default {compute_default_max_parallelism(vertex.parallelism)})"
            )
            lines.append("")
            lines.append(f"{vertex.name} [{vertex.id[:8]}]")
            parallelism = (
                f"-1 (decided at run time; planned {vertex.parallelism})"
                if vertex.adaptive
                else str(vertex.parallelism)
            )
            lines.append(
                f"  vertex {vertex.id}  parallelism {parallelism}, max parallelism "
                f"{max_p}, slot sharing group '{vertex.slot_sharing_group}'"
            )
            for op in vertex.operators:
                uid = f" uid '{op.uid}'" if op.uid is not None else ""
                lines.append(f"  - {op.name}  (line {op.span.line}){uid}  id {op.operator_id}")
            for edge in vertex.inputs:
                producer = self.vertices[edge.producer]
                keys = f"({', '.join(edge.stream_edge.keys)})" if edge.stream_edge.keys else ""
                lines.append(
                    f"  <- {reference_name(producer.name)} [{producer.id[:8]}]: "
                    f"{edge.ship_strategy}{keys}, "
                    f"{edge.distribution}, {edge.exchange}"
                )
        return "\n".join(lines) + "\n"

    def diagram(self) -> Diagram:
        """A box per vertex (``v0``, ``v1``, ... in ``vertices`` order) with its parallelism,
        each edge labelled with its ship strategy and distribution."""
        names = {vid: f"v{i}" for i, vid in enumerate(self.vertices)}
        nodes = tuple(
            Node(names[vertex.id], f"{vertex.name}\np={vertex.parallelism}")
            for vertex in self.vertices.values()
        )
        edges = tuple(
            Edge(
                names[edge.producer],
                names[edge.target],
                f"{edge.ship_strategy} {edge.distribution}",
            )
            for edge in self.edges()
        )
        return Diagram(self.name, nodes, edges, default_shape=Shape.BOX)

    def to_dot(self) -> str:
        return self.diagram().to_dot()

    def to_mermaid(self) -> str:
        return self.diagram().to_mermaid()

    def topological(self) -> list[JobVertex]:
        """JobGraph.getVerticesSortedTopologicallyFromSources."""
        remaining = dict(self.vertices)
        waiting = {v.id: len(v.inputs) for v in self.vertices.values()}
        ordered = [v for v in self.vertices.values() if not v.inputs]
        for vertex in ordered:
            _order(vertex, remaining, waiting)
        position = 0
        while remaining:
            if position >= len(ordered):
                raise ValueError("The job graph is cyclic.")
            current = ordered[position]
            position += 1
            _add_without_new_predecessors(current, ordered, remaining, waiting)
        return ordered


def _add_without_new_predecessors(
    start: JobVertex,
    ordered: list[JobVertex],
    remaining: dict[str, JobVertex],
    waiting: dict[str, int],
) -> None:
    """addNodesThatHaveNoNewPredecessors: depth-first, descending into a consumer as soon
    as it is added (with an explicit stack, so long pipelines need no deep recursion).

    ``waiting`` counts each vertex's inputs whose producer is still ``remaining``: Flink
    scans the consumer's inputs for each edge, which is quadratic in parallel edges.
    """
    stack = [_consumers(start)]
    while stack:
        edge = next(stack[-1], None)
        if edge is None:
            stack.pop()
            continue
        target = remaining.get(edge.target)
        if target is None or waiting[target.id]:
            continue
        ordered.append(target)
        _order(target, remaining, waiting)
        stack.append(_consumers(target))


def _consumers(vertex: JobVertex) -> Iterator[JobEdge]:
    return (edge for dataset in vertex.produced for edge in dataset.consumers)


def _order(vertex: JobVertex, remaining: dict[str, JobVertex], waiting: dict[str, int]) -> None:
    """Take ``vertex`` out of ``remaining``: its consumers wait for one input less."""
    del remaining[vertex.id]
    for edge in _consumers(vertex):
        waiting[edge.target] -= 1


def build_job_graph(graph: StreamGraph, reporter: Reporter | None = None) -> JobGraph:
    """The JobGraph; a chain past MAX_CHAINED_OPERATORS is E0903 (to ``reporter``, else
    raised as a CompileError), and the JobGraph is then left unfinished."""
    errors = Reporter() if reporter is None else reporter
    generator = _JobGraphGenerator(graph)
    try:
        return generator.generate()
    except _ChainTooLong as chain:
        errors.error(
            Code.E0903,
            "the operators chained one after another in one task would pass flowc's bound "
            f"of {MAX_CHAINED_OPERATORS:,}",
            chain.node.span,
            help="break the chain with a partition step (REBALANCE, KEY BY) or a hint "
            "WITH (chaining = 'new_chain') (docs/limits.md lists flowc's bounds)",
        )
    if reporter is None:
        raise CompileError(errors.sorted())
    return generator.job


class _ChainTooLong(Exception):
    """A chain passes MAX_CHAINED_OPERATORS operators one after another at ``node``: Flink's
    tree description of a task indents each operator by its depth in the chain, so a chain
    of n describes in about 3n²/2 characters."""

    def __init__(self, node: StreamNode) -> None:
        self.node = node


class _ChainFrame:
    """One call of Flink's recursive createChain: the node, its chain's head, the outputs
    left to visit, and the transitive outputs found (added to the caller's on return when
    the call followed a chainable edge)."""

    __slots__ = (
        "caller",
        "chainable",
        "current",
        "head",
        "next_chainable",
        "next_other",
        "non_chainable",
        "transitive",
    )

    def __init__(self, current: int, head: int, caller: list[StreamEdge] | None = None) -> None:
        self.current = current
        self.head = head
        self.caller = caller
        self.chainable: list[StreamEdge] | None = None
        self.non_chainable: list[StreamEdge] = []
        self.next_chainable = 0
        self.next_other = 0
        self.transitive: list[StreamEdge] = []


#: What makes a BLOCKING dataset reusable by another edge (see _JobGraphGenerator.connect):
#: producer vertex, source node, partitioner, the consumer's parallelism and max
#: parallelism, output tag, keys.
_ReuseKey = tuple[str, int, Partitioner, int, int | None, str | None, tuple[str, ...]]


class _JobGraphGenerator:
    def __init__(self, graph: StreamGraph) -> None:
        self.graph = graph
        self.built: set[int] = set()
        #: Each node's chainable output edges, in order.
        self.chained: dict[int, list[StreamEdge]] = {}
        self.transitive_out: dict[int, list[StreamEdge]] = {}
        self.vertex_of_node: dict[int, str] = {}
        #: The BLOCKING dataset a new edge reuses, by what makes it reusable (see connect).
        self.blocking: dict[_ReuseKey, IntermediateDataSet] = {}
        streaming = graph.streaming
        self.job = JobGraph(
            job_id=_job_id(graph),
            name=graph.job_name,
            job_type="STREAMING" if streaming else "BATCH",
            stream_graph=graph,
            checkpoints=_checkpoint_settings(graph.settings),
        )

    def generate(self) -> JobGraph:
        for source in sorted(self.graph.sources):
            self.create_chain(source)
        if not self.graph.streaming:
            self.set_adaptive_parallelisms()
        for vertex_id, vertex in list(self.job.vertices.items()):
            for edge in self.transitive_out[vertex.head]:
                self.connect(vertex_id, edge)
        return self.job

    def ship_strategy(self, edge: StreamEdge) -> Partitioner:
        """The JobEdge's partitioner. In BATCH mode Flink's graph is dynamic (adaptive batch
        scheduler): an edge with no partition step between equal parallelisms carries a
        ForwardForUnspecifiedPartitioner (StreamGraph.addEdgeInternal), which
        tryConvertPartitionerForDynamicGraph makes a RescalePartitioner where it is not
        chained (a JobEdge is never chained); an explicit FORWARD stays FORWARD."""
        if not self.graph.streaming and edge.forward_for_unspecified:
            return Partitioner.RESCALE
        return edge.partitioner

    def set_adaptive_parallelisms(self) -> None:
        """Flink's setVertexParallelismsForDynamicGraphIfNecessary (BATCH mode, whose
        adaptive batch scheduler has execution.batch.adaptive.auto-parallelism.enabled on by
        default; ``batch.auto_parallelism = false`` turns it off): a vertex none of whose
        operators has its parallelism configured gets -1 (``adaptive``); then the vertices
        joined by FORWARD JobEdges form forward groups (ForwardGroupComputeUtil), and a group
        with a decided parallelism gives it to all, as a group with a max parallelism set on
        some member gives all the least of them (JobVertexForwardGroup). flowc keeps
        ``parallelism`` as the bound it plans for (docs/plans.md)."""
        vertices = self.job.vertices
        auto = self.graph.settings.auto_parallelism
        for vertex in vertices.values():
            vertex.adaptive = auto and not vertex.parallelism_configured
        group: dict[str, str] = {vid: vid for vid in vertices}

        def find(vid: str) -> str:
            while group[vid] != vid:
                group[vid] = group[group[vid]]
                vid = group[vid]
            return vid

        for vid, vertex in vertices.items():
            for edge in self.transitive_out[vertex.head]:
                if self.ship_strategy(edge) == Partitioner.FORWARD:
                    group[find(self.vertex_of_node[edge.target_id])] = find(vid)
        decided = {find(vid) for vid, v in vertices.items() if not v.adaptive}
        max_parallelism: dict[str, int] = {}
        for vid, vertex in vertices.items():
            if vertex.max_parallelism is not None:
                root = find(vid)
                known = max_parallelism.get(root, vertex.max_parallelism)
                max_parallelism[root] = min(known, vertex.max_parallelism)
        for vid, vertex in vertices.items():
            if vertex.adaptive and find(vid) in decided:
                vertex.adaptive = False
                vertex.parallelism_configured = True
            if find(vid) in max_parallelism:
                vertex.max_parallelism = max_parallelism[find(vid)]

    def create_chain(self, source: int) -> None:
        """Flink's createChain from ``source``: chainable outputs first, then a new chain per
        other output; a chain's vertex is created once its downstream chains are (post-order).

        Flink recurses; this walks the same order with an explicit stack of frames, so a
        pipeline of any length needs no deep recursion.
        """
        stack = [_ChainFrame(source, source)]
        while stack:
            frame = stack[-1]
            if frame.chainable is None:
                if frame.head in self.built:
                    stack.pop()  # adds nothing to the caller's transitive outputs
                    continue
                node = self.graph.nodes[frame.current]
                chainable: list[StreamEdge] = []
                frame.non_chainable = []
                for e in node.out_edges:  # each edge's verdict once
                    (chainable if self.graph.is_chainable(e) else frame.non_chainable).append(e)
                frame.chainable = chainable
            if frame.next_chainable < len(frame.chainable):
                edge = frame.chainable[frame.next_chainable]
                frame.next_chainable += 1
                stack.append(_ChainFrame(edge.target_id, frame.head, frame.transitive))
                continue
            if frame.next_other < len(frame.non_chainable):
                edge = frame.non_chainable[frame.next_other]
                frame.next_other += 1
                frame.transitive.append(edge)
                stack.append(_ChainFrame(edge.target_id, edge.target_id))
                continue
            stack.pop()
            self.chained[frame.current] = frame.chainable
            if frame.current == frame.head:
                self.transitive_out[frame.head] = frame.transitive
                self.create_vertex(self.graph.nodes[frame.current])
            if frame.caller is not None:
                frame.caller.extend(frame.transitive)

    def chain_members(self, head: int) -> list[int]:
        """The chain's operators, head first, then depth-first along chained outputs.

        _ChainTooLong past MAX_CHAINED_OPERATORS one after another (the head is the first).
        """
        order: list[int] = []
        stack = [(head, 1)]
        while stack:
            current, depth = stack.pop()
            if depth > MAX_CHAINED_OPERATORS:
                raise _ChainTooLong(self.graph.nodes[current])
            order.append(current)
            stack.extend((e.target_id, depth + 1) for e in reversed(self.chained[current]))
        return order

    def create_vertex(self, head_node: StreamNode) -> None:
        head = head_node.id
        self.built.add(head)
        members = self.chain_members(head)
        vertex_id = self.graph.operator_id(head)
        nodes = [self.graph.nodes[m] for m in members]
        operators = [
            ChainedOperator(
                node_id=n.id,
                operator_id=self.graph.operator_id(n.id),
                name=n.name,
                uid=n.uid,
                span=n.span,
                changelog_mode=n.changelog_mode,
            )
            for n in nodes
        ]
        span = nodes[0].span
        for n in nodes[1:]:
            if n.span.file == span.file:
                span = span.cover(n.span)
        vertex = JobVertex(
            id=vertex_id,
            name=chained_name(head, self.graph.nodes, self.chained),
            head=head,
            parallelism=head_node.parallelism,
            max_parallelism=head_node.max_parallelism,
            slot_sharing_group=head_node.slot_sharing_group,
            operators=operators,
            description=tree_description(head, self.graph.nodes, self.chained),
            parallelism_configured=any(n.parallelism_configured for n in nodes),
            keyed=any(e.partitioner == Partitioner.HASH for e in head_node.in_edges),
            span=span,
        )
        self.job.vertices[vertex_id] = vertex
        for member in members:
            self.vertex_of_node[member] = vertex_id

    def result_partition_type(self, edge: StreamEdge) -> str:
        if edge.exchange_mode == "BATCH":
            return "BLOCKING"
        if edge.exchange_mode == "PIPELINED":
            return "PIPELINED_BOUNDED"
        return "PIPELINED_BOUNDED" if self.graph.streaming else "BLOCKING"

    def connect(self, producer_id: str, edge: StreamEdge) -> None:
        producer = self.job.vertices[producer_id]
        consumer = self.job.vertices[self.vertex_of_node[edge.target_id]]
        partition_type = self.result_partition_type(edge)
        ship_strategy = self.ship_strategy(edge)
        dataset = None
        # Flink reuses the first BLOCKING dataset of the producer with the same source node
        # and partitioner whose first consumer has this consumer's parallelism, max
        # parallelism, output tag and keys: looked up by those, not by scanning the
        # producer's datasets for each edge.
        reuse = (
            producer_id,
            edge.source_id,
            ship_strategy,
            consumer.flink_parallelism,
            consumer.max_parallelism,
            edge.output_tag,
            edge.keys,
        )
        if partition_type == "BLOCKING":
            dataset = self.blocking.get(reuse)
        if dataset is None:
            dataset = IntermediateDataSet(
                id=_dataset_id(producer_id, len(producer.produced)),
                producer=producer_id,
                result_partition_type=partition_type,
                partitioner=ship_strategy,
            )
            producer.produced.append(dataset)
            if partition_type == "BLOCKING":
                self.blocking.setdefault(reuse, dataset)
        job_edge = JobEdge(
            source=dataset,
            target=consumer.id,
            ship_strategy=ship_strategy,
            distribution="POINTWISE" if ship_strategy in POINTWISE_PARTITIONERS else "ALL_TO_ALL",
            stream_edge=edge,
        )
        dataset.consumers.append(job_edge)
        consumer.inputs.append(job_edge)


def _checkpoint_settings(settings: Settings) -> CheckpointSettings:
    interval = settings.checkpoint_interval_ms
    if settings.execution_mode == "batch" or interval is None or interval < MINIMAL_CHECKPOINT_TIME:
        return CheckpointSettings(DISABLED_CHECKPOINT_INTERVAL, False, "AT_LEAST_ONCE")
    exactly_once = settings.checkpoint_mode == "exactly_once"
    return CheckpointSettings(
        interval, exactly_once, "EXACTLY_ONCE" if exactly_once else "AT_LEAST_ONCE"
    )


def _job_id(graph: StreamGraph) -> str:
    """A JobID derived from the job's operator ids (Flink's is random; flowc's is stable).

    The job name defaults to the file's stem, and a file name that is not UTF-8 reaches
    Python with its bytes as lone surrogates (surrogateescape); ``surrogatepass`` encodes
    every string, and any name that is valid UTF-8 as before, so ids do not change.
    """
    seed = "|".join(graph.operator_id(n) for n in sorted(graph.nodes)).encode()
    name = graph.job_name.encode("utf-8", "surrogatepass")
    return murmur3_x64_128(name + b"\0" + seed).hex()


def _dataset_id(producer: str, index: int) -> str:
    return murmur3_x64_128(f"{producer}/{index}".encode()).hex()
