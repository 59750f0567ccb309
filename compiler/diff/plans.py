"""diff_plans: the plan changes from one compiled job to another, on the JobGraph, the
StreamGraph's exchanges and operator ids, and the Spark plan.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from pathlib import PurePath
from typing import TYPE_CHECKING, TypeVar

from flowc.diff.changes import (
    ChangeKind,
    EdgeRef,
    ExchangeChange,
    IdChangeReason,
    OperatorIdChange,
    OperatorRef,
    ParallelismChange,
    PlanDiff,
    SparkChange,
    SparkChangeKind,
    VertexChange,
    VertexChangeKind,
)
from flowc.diff.sides import Side, pair_operators
from flowc.flink.keygroups import compute_default_max_parallelism
from flowc.graph.stream_graph import StreamEdge, StreamNode
from flowc.spark.spark_plan import SparkExchange, SparkQuery

if TYPE_CHECKING:
    from flowc.graph.job_graph import JobVertex
    from flowc.job import CompiledJob

_Item = TypeVar("_Item")


def diff_plans(old: CompiledJob, new: CompiledJob) -> PlanDiff:
    """The plan changes from ``old`` to ``new`` (both compiled; Spark plans included)."""
    before, after = Side(old), Side(new)
    pairs = pair_operators(before, after)
    back = {n: o for o, n in pairs.items()}
    return PlanDiff(
        old_job=old.job_graph.name,
        new_job=new.job_graph.name,
        job_renamed=_renamed(old, new),
        vertices=_vertex_changes(before, after, pairs),
        exchanges=_exchange_changes(before, after, pairs),
        parallelism=_parallelism_changes(before, after, back),
        operator_ids=tuple(
            change
            for node in after.order
            if node in back
            for change in [_id_change(before.refs[back[node]], after.refs[node])]
            if change is not None
        ),
        operators_added=tuple(after.refs[n] for n in after.order if n not in back),
        operators_removed=tuple(before.refs[n] for n in before.order if n not in pairs),
        operators_changed=tuple(
            (before.refs[back[n]], after.refs[n])
            for n in after.order
            if n in back and before.refs[back[n]].name != after.refs[n].name
        ),
        spark=_spark_changes(before, after, pairs),
    )


def _renamed(old: CompiledJob, new: CompiledJob) -> bool:
    """A changed job name, unless both are the files' own names (the default): diffing
    ``old.flow`` with ``new.flow`` is one job in two versions, not a rename."""
    old_name, new_name = old.job_graph.name, new.job_graph.name
    if old_name == new_name:
        return False
    defaulted = old_name == (PurePath(old.file).stem or "job") and new_name == (
        PurePath(new.file).stem or "job"
    )
    return not defaulted


class _Components:
    """Union-find over vertex keys ("o:<id>" old, "n:<id>" new)."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, key: str) -> str:
        parent = self.parent.setdefault(key, key)
        root = key
        while parent != root:
            root = parent
            parent = self.parent[root]
        while self.parent[key] != root:  # path compression
            self.parent[key], key = root, self.parent[key]
        return root

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def _vertex_changes(old: Side, new: Side, pairs: dict[int, int]) -> tuple[VertexChange, ...]:
    components = _Components()
    for vertex in old.vertices:
        components.find("o:" + vertex.id)
    for vertex in new.vertices:
        components.find("n:" + vertex.id)
    for old_node, new_node in pairs.items():
        components.union("o:" + old.vertex_of[old_node], "n:" + new.vertex_of[new_node])
    groups: dict[str, tuple[list[JobVertex], list[JobVertex]]] = {}
    for vertex in old.vertices:
        groups.setdefault(components.find("o:" + vertex.id), ([], []))[0].append(vertex)
    for vertex in new.vertices:
        groups.setdefault(components.find("n:" + vertex.id), ([], []))[1].append(vertex)
    changes: list[tuple[tuple[int, int], VertexChange]] = []
    for olds, news in groups.values():
        if not olds:
            kind = VertexChangeKind.ADDED
        elif not news:
            kind = VertexChangeKind.REMOVED
        elif len(olds) == 1 and len(news) == 1 and _same_chain(olds[0], news[0], pairs):
            continue
        else:
            kind = VertexChangeKind.RECHAINED
        order = (0, new.vertex_rank[news[0].id]) if news else (1, old.vertex_rank[olds[0].id])
        change = VertexChange(
            kind, tuple(old.chain(v) for v in olds), tuple(new.chain(v) for v in news)
        )
        changes.append((order, change))
    changes.sort(key=lambda item: item[0])
    return tuple(change for _, change in changes)


def _same_chain(old: JobVertex, new: JobVertex, pairs: dict[int, int]) -> bool:
    return len(old.operators) == len(new.operators) and all(
        pairs.get(a.node_id) == b.node_id for a, b in zip(old.operators, new.operators, strict=True)
    )


def _parallelism_changes(
    old: Side, new: Side, back: dict[int, int]
) -> tuple[ParallelismChange, ...]:
    """Per new vertex with a counterpart: its head-most paired operator's old vertex."""
    changes: list[ParallelismChange] = []
    for vertex in new.vertices:
        matched = next((op.node_id for op in vertex.operators if op.node_id in back), None)
        if matched is None:
            continue
        was = old.job_graph.vertices[old.vertex_of[back[matched]]]
        if was.parallelism != vertex.parallelism:
            changes.append(
                ParallelismChange(
                    "parallelism",
                    vertex.name,
                    vertex.id,
                    was.parallelism,
                    vertex.parallelism,
                    None,
                    None,
                    vertex.keyed,
                    vertex.span,
                )
            )
        old_effective = _effective_max(was)
        new_effective = _effective_max(vertex)
        if was.max_parallelism != vertex.max_parallelism or old_effective != new_effective:
            changes.append(
                ParallelismChange(
                    "max_parallelism",
                    vertex.name,
                    vertex.id,
                    was.max_parallelism,
                    vertex.max_parallelism,
                    old_effective,
                    new_effective,
                    vertex.keyed,
                    vertex.span,
                )
            )
    return tuple(changes)


def _effective_max(vertex: JobVertex) -> int:
    if vertex.max_parallelism is not None:
        return vertex.max_parallelism
    return compute_default_max_parallelism(vertex.parallelism)


def _id_change(old: OperatorRef, new: OperatorRef) -> OperatorIdChange | None:
    if old.id == new.id:
        return None
    if old.uid is not None and new.uid is not None:
        reason = IdChangeReason.UID_CHANGED
    elif new.uid is not None:
        reason = IdChangeReason.UID_ADDED
    elif old.uid is not None:
        reason = IdChangeReason.UID_REMOVED
    else:
        reason = IdChangeReason.TOPOLOGY
    return OperatorIdChange(old, new, reason)


def _by_occurrence(
    items: Iterable[_Item], key: Callable[[_Item], tuple[Hashable, Hashable]]
) -> dict[tuple[Hashable, Hashable, int], _Item]:
    """Items by their key and, among items of one key, their occurrence (0, 1, ...)."""
    seen: dict[tuple[Hashable, Hashable], int] = {}
    out: dict[tuple[Hashable, Hashable, int], _Item] = {}
    for item in items:
        found = key(item)
        count = seen.get(found, 0)
        seen[found] = count + 1
        out[(*found, count)] = item
    return out


def _inputs(
    node: StreamNode, producer: Callable[[int], Hashable]
) -> dict[tuple[Hashable, Hashable, int], StreamEdge]:
    """A node's inputs by (input side, producer's match, occurrence)."""
    return _by_occurrence(node.in_edges, lambda e: (e.type_number, producer(e.source_id)))


def _exchange_changes(old: Side, new: Side, pairs: dict[int, int]) -> tuple[ExchangeChange, ...]:
    """Each paired consumer's inputs, matched by input side and paired producer; an input
    whose producer changed is matched by input side and position among the rest."""
    changes: list[ExchangeChange] = []
    back = {n: o for o, n in pairs.items()}
    for node_id in new.order:
        if node_id not in back:
            continue
        was_node = old.graph.nodes[back[node_id]]
        node = new.graph.nodes[node_id]
        old_inputs = _inputs(was_node, lambda i: pairs.get(i, ("old", i)))
        new_inputs = _inputs(node, lambda i: i)
        left_old = [key for key in old_inputs if key not in new_inputs]
        left_new = [key for key in new_inputs if key not in old_inputs]
        matched = [(old_inputs[k], new_inputs[k]) for k in new_inputs if k in old_inputs]
        # Inputs whose producer changed (a step inserted before the consumer): by side.
        by_side: dict[Hashable, list[tuple[Hashable, Hashable, int]]] = {}
        for key in left_old:
            by_side.setdefault(key[0], []).append(key)
        unmatched_new: list[StreamEdge] = []
        for key in left_new:
            candidates = by_side.get(key[0])
            if candidates:
                matched.append((old_inputs[candidates.pop(0)], new_inputs[key]))
            else:
                unmatched_new.append(new_inputs[key])
        unmatched_old = [old_inputs[k] for keys in by_side.values() for k in keys]
        for was, now in matched:
            before, after = _edge_ref(old, was), _edge_ref(new, now)
            if (before.ship_strategy, before.keys) != (after.ship_strategy, after.keys):
                changes.append(
                    ExchangeChange(ChangeKind.CHANGED, node.name, before, after, now.span)
                )
        for now in unmatched_new:
            changes.append(
                ExchangeChange(ChangeKind.ADDED, node.name, None, _edge_ref(new, now), now.span)
            )
        for was in unmatched_old:
            changes.append(
                ExchangeChange(ChangeKind.REMOVED, node.name, _edge_ref(old, was), None, node.span)
            )
    return tuple(changes)


def _edge_ref(side: Side, edge: StreamEdge) -> EdgeRef:
    return EdgeRef(
        producer=side.graph.nodes[edge.source_id].name,
        ship_strategy=edge.partitioner,
        keys=edge.keys,
        chained=side.graph.is_chainable(edge),
    )


# ---------------------------------------------------------------- Spark


def _spark_changes(old: Side, new: Side, pairs: dict[int, int]) -> tuple[SparkChange, ...]:
    before, after = old.job.spark_plan, new.job.spark_plan
    changes: list[SparkChange] = []
    if before.shuffle_partitions != after.shuffle_partitions:
        stateful = any(q.stateful for q in before.queries) and not before.batch
        note = (
            ": on an existing checkpoint flowc run repartitions the state of stateful queries "
            "to the new count before they start (RocksDB store only, else refused: E0826)"
            if stateful
            else ""
        )
        changes.append(
            SparkChange(
                SparkChangeKind.SHUFFLE_PARTITIONS,
                None,
                str(before.shuffle_partitions),
                str(after.shuffle_partitions),
                f"shuffle partitions {before.shuffle_partitions} -> "
                f"{after.shuffle_partitions} ({after.shuffle_partitions_reason}){note}",
            )
        )
    if before.checkpoint_root != after.checkpoint_root and not (before.batch and after.batch):
        changes.append(
            SparkChange(
                SparkChangeKind.CHECKPOINT_ROOT,
                None,
                before.checkpoint_root,
                after.checkpoint_root,
                f"checkpoint.dir {before.checkpoint_root} -> {after.checkpoint_root}: every "
                "query starts over with empty state in the new folder, and the state in the "
                "old one is left behind",
            )
        )
    old_queries = {q.name: q for q in before.queries}
    new_names = {q.name for q in after.queries}
    for query in after.queries:
        was = old_queries.get(query.name)
        if was is None:
            changes.append(
                SparkChange(
                    SparkChangeKind.QUERY_ADDED,
                    query.name,
                    None,
                    query.checkpoint_location,
                    f"new query '{query.name}' (checkpoint {query.checkpoint_location})",
                )
            )
            continue
        changes.extend(_query_exchange_changes(was, query, pairs))
    for query in before.queries:
        if query.name not in new_names:
            changes.append(
                SparkChange(
                    SparkChangeKind.QUERY_REMOVED,
                    query.name,
                    query.checkpoint_location,
                    None,
                    f"query '{query.name}' removed (its checkpoint "
                    f"{query.checkpoint_location} is no longer read)",
                )
            )
    return tuple(changes)


def _query_exchange_changes(
    old: SparkQuery, new: SparkQuery, pairs: dict[int, int]
) -> Iterable[SparkChange]:
    def old_id(i: int) -> Hashable:
        return pairs.get(i, ("old", i))

    was = _by_occurrence(old.exchanges, lambda e: (old_id(e.consumer_id), old_id(e.producer_id)))
    now = _by_occurrence(new.exchanges, lambda e: (e.consumer_id, e.producer_id))
    # An exchange whose producer changed (a step inserted before it) matches by consumer.
    left_old: dict[Hashable, list[SparkExchange]] = {}
    for key, exchange in was.items():
        if key not in now:
            left_old.setdefault(key[0], []).append(exchange)
    for key, exchange in now.items():
        before = was.get(key)
        if before is None:
            candidates = left_old.get(key[0])
            before = candidates.pop(0) if candidates else None
        if before is None:
            yield SparkChange(
                SparkChangeKind.EXCHANGE_ADDED,
                new.name,
                None,
                exchange.spark,
                f"query '{new.name}': new exchange {exchange.producer} -> {exchange.consumer}: "
                f"{exchange.spark} [{exchange.partitioning}]",
            )
        elif (before.kind, before.spark, before.partitioning) != (
            exchange.kind,
            exchange.spark,
            exchange.partitioning,
        ):
            yield SparkChange(
                SparkChangeKind.EXCHANGE_CHANGED,
                new.name,
                before.spark,
                exchange.spark,
                f"query '{new.name}': {exchange.producer} -> {exchange.consumer}: "
                f"{before.spark} [{before.partitioning}] -> {exchange.spark} "
                f"[{exchange.partitioning}]",
            )
    for candidates in left_old.values():
        for exchange in candidates:
            yield SparkChange(
                SparkChangeKind.EXCHANGE_REMOVED,
                old.name,
                exchange.spark,
                None,
                f"query '{old.name}': exchange {exchange.producer} -> {exchange.consumer} "
                f"removed: {exchange.spark}",
            )
