"""One side of a plan diff: a compiled job's graphs indexed for matching, and the
matching of the old side's operators to the new side's, tier by tier.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING

from flowc.diff.changes import ChainRef, OperatorRef
from flowc.graph.stream_graph import StreamGraph, StreamNode
from flowc.vocabulary import STATEFUL_OPERATORS, NodeKind

if TYPE_CHECKING:
    from flowc.graph.job_graph import JobGraph, JobVertex
    from flowc.job import CompiledJob

#: The longest piece of a step's source text used to tell two same-named operators apart.
_TEXT_KEY_CHARS = 200


class Side:
    """One compiled job's graphs, indexed for the diff."""

    def __init__(self, job: CompiledJob) -> None:
        self.job = job
        self.graph: StreamGraph = job.stream_graph
        self.job_graph: JobGraph = job.job_graph
        #: Vertices in topological order, and each node's vertex.
        self.vertices: list[JobVertex] = self.job_graph.topological()
        self.vertex_of: dict[int, str] = {}
        self.vertex_rank: dict[str, int] = {}
        for rank, vertex in enumerate(self.vertices):
            self.vertex_rank[vertex.id] = rank
            for op in vertex.operators:
                self.vertex_of[op.node_id] = vertex.id
        #: Nodes in plan order: by vertex, then along the chain.
        self.order: list[int] = [op.node_id for v in self.vertices for op in v.operators]
        self.refs: dict[int, OperatorRef] = {
            n.id: OperatorRef(
                id=self.graph.operator_id(n.id),
                name=n.name,
                operator=n.operator,
                uid=n.uid,
                parallelism=n.parallelism,
                stateful=n.operator in STATEFUL_OPERATORS,
                span=n.span,
            )
            for n in self.graph.nodes.values()
        }
        self._lines: list[int] | None = None
        self._sources: dict[int, frozenset[str]] | None = None
        self._sinks: dict[int, frozenset[str]] | None = None

    def chain(self, vertex: JobVertex) -> ChainRef:
        return ChainRef(
            id=vertex.id,
            name=vertex.name,
            parallelism=vertex.parallelism,
            max_parallelism=vertex.max_parallelism,
            operators=tuple(self.refs[op.node_id] for op in vertex.operators),
            span=vertex.span,
        )

    def text(self, node: StreamNode) -> str:
        """The first line of the step's source text (whitespace collapsed), bounded."""
        if self._lines is None:
            starts = [0]
            source = self.job.source
            position = source.find("\n")
            while position != -1:
                starts.append(position + 1)
                position = source.find("\n", position + 1)
            self._lines = starts
        span = node.span
        if span.file != self.job.file or not 1 <= span.line <= len(self._lines):
            return ""
        start = self._lines[span.line - 1] + span.column - 1
        end = self.job.source.find("\n", start)
        end = len(self.job.source) if end == -1 else end
        if span.end_line == span.line:
            end = min(end, self._lines[span.line - 1] + span.end_column - 1)
        return " ".join(self.job.source[start : min(end, start + _TEXT_KEY_CHARS)].split())

    def sources(self) -> dict[int, frozenset[str]]:
        """Each node's upstream source names (shared sets along single-input chains)."""
        if self._sources is None:
            self._sources = self._reach(
                self._forward_order(),
                lambda n: [e.source_id for e in n.in_edges],
                lambda n: n.kind == NodeKind.SOURCE,
            )
        return self._sources

    def sinks(self) -> dict[int, frozenset[str]]:
        """Each node's downstream sink names."""
        if self._sinks is None:
            self._sinks = self._reach(
                list(reversed(self._forward_order())),
                lambda n: [e.target_id for e in n.out_edges],
                lambda n: n.kind == NodeKind.SINK,
            )
        return self._sinks

    def _forward_order(self) -> list[int]:
        """Nodes with every input before them (Kahn's order)."""
        graph = self.graph
        waiting = {n.id: len(n.in_edges) for n in graph.nodes.values()}
        ready = sorted(i for i, count in waiting.items() if count == 0)
        order: list[int] = []
        while ready:
            node = ready.pop()
            order.append(node)
            for edge in graph.nodes[node].out_edges:
                waiting[edge.target_id] -= 1
                if waiting[edge.target_id] == 0:
                    ready.append(edge.target_id)
        return order

    def _reach(
        self,
        order: list[int],
        before: Callable[[StreamNode], list[int]],
        is_end: Callable[[StreamNode], bool],
    ) -> dict[int, frozenset[str]]:
        found: dict[int, frozenset[str]] = {}
        for ident in order:
            node = self.graph.nodes[ident]
            earlier = [found[i] for i in before(node) if i in found]
            if is_end(node):
                name = node.name.split(": ", 1)[-1]
                found[ident] = frozenset({name}).union(*earlier)
            elif len(earlier) == 1:
                found[ident] = earlier[0]
            else:
                found[ident] = frozenset().union(*earlier)
        return found


def pair_operators(old: Side, new: Side) -> dict[int, int]:
    """Old node id → new node id for the operators both jobs have."""
    pairs: dict[int, int] = {}
    by_id = {old.refs[n].id: n for n in old.order}
    for node in new.order:
        match = by_id.get(new.refs[node].id)
        if match is not None:  # one id is one operator to Flink, whatever it now does
            pairs[match] = node

    def tier(key: Callable[[Side, int], Hashable]) -> None:
        paired = set(pairs.values())
        waiting: dict[Hashable, list[int]] = {}
        for node in old.order:
            if node not in pairs:
                waiting.setdefault(key(old, node), []).append(node)
        for key_value in waiting.values():
            key_value.reverse()  # popped from the end: first come, first paired
        for node in new.order:
            if node in paired:
                continue
            candidates = waiting.get(key(new, node))
            if candidates:
                pairs[candidates.pop()] = node

    def name(side: Side, node: int) -> tuple[str, str]:
        ref = side.refs[node]
        return ref.name, ref.operator

    tier(lambda s, n: (name(s, n), s.text(s.graph.nodes[n]), s.sources()[n], s.sinks()[n]))
    tier(lambda s, n: (name(s, n), s.sources()[n], s.sinks()[n]))
    tier(lambda s, n: (name(s, n), s.text(s.graph.nodes[n]), s.sinks()[n]))
    tier(lambda s, n: (name(s, n), s.sinks()[n]))
    tier(lambda s, n: (name(s, n), s.sources()[n]))
    tier(name)
    # An operator whose name changed with its definition (a window's size, a join's type).
    tier(lambda s, n: (s.refs[n].operator, s.sources()[n], s.sinks()[n]))
    tier(lambda s, n: (s.refs[n].operator, s.sinks()[n]))
    return pairs
