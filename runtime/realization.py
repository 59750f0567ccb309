"""How the physical plan is realized on Spark Structured Streaming: queries and exchanges.

One streaming query per INSERT, named after its sink. Every JobEdge becomes the Spark
exchange that gives the consumer the same data distribution Flink's ship strategy does,
and the plan says why; ``exchanges_planned`` counts the shuffles Spark will run. This
module plans only (it never imports pyspark); running lives beside it.

Shuffle partitions: Spark keeps a stateful query's state in exactly
``spark.sql.shuffle.partitions`` partitions and freezes that number in the checkpoint
(a later change is silently ignored). Each partition costs a state store per micro-batch
(measured here on PySpark 4.3: 246 ms per batch at 1 partition, 331 ms at 4, 5.2 s at
Spark's default 200). flowc therefore uses the stateful operators' parallelism, not
their key groups: local runs stay fast, and the plan says that rescaling state later
needs a new checkpoint (where Flink could rescale up to max parallelism).
``SET spark.sql.shuffle.partitions`` overrides it.

Every planned exchange runs: the generated program excludes Catalyst's
CollapseRepartition rule, which would merge two repartitions with only row-wise steps
between them into one shuffle.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from flowc.program import Program
from flowc.stream_graph import StreamEdge, StreamGraph, StreamNode

STATEFUL_OPERATORS = frozenset({"keyed_aggregate", "aggregate", "window", "deduplicate", "join"})
DEFAULT_CHECKPOINT_ROOT = ".flowc-checkpoints"


@dataclass(frozen=True, slots=True)
class SparkExchange:
    producer: str
    consumer: str
    ship_strategy: str
    keys: tuple[str, ...]
    spark: str
    partitioning: str
    shuffle: bool
    why: str

    def to_json(self) -> dict[str, Any]:
        return {
            "from": self.producer,
            "to": self.consumer,
            "ship_strategy": self.ship_strategy,
            "keys": list(self.keys),
            "spark": self.spark,
            "partitioning": self.partitioning,
            "shuffle": self.shuffle,
            "why": self.why,
        }


def realize(program: Program, graph: StreamGraph) -> dict[str, Any]:
    """The ``spark`` section of the physical plan."""
    settings = program.settings
    stateful_nodes = [n for n in graph.nodes.values() if n.operator in STATEFUL_OPERATORS]
    partitions, reason = _shuffle_partitions(stateful_nodes, dict(settings.spark_conf))
    queries = []
    everything = []
    for insert, sink_id in zip(program.inserts, graph.sinks, strict=True):
        nodes = _upstream(graph, sink_id)
        stateful = [n for n in nodes if n.operator in STATEFUL_OPERATORS]
        exchanges = [
            _exchange(edge, graph, partitions)
            for node in nodes
            for edge in node.in_edges
            if edge.partitioner != "FORWARD"
        ]
        sink = program.sink(insert.sink)
        query: dict[str, Any] = {
            "name": insert.sink,
            "sink": {"name": sink.name, "connector": sink.connector},
            "reads": sorted(graph.nodes[n.id].name for n in nodes if n.kind == "source"),
            "output_mode": sink.mode,
            "trigger": _trigger(settings.checkpoint_interval_ms),
            "checkpoint_location": _checkpoint_location(
                settings.checkpoint_dir, program, insert.sink
            ),
            "exchanges": [e.to_json() for e in exchanges],
            "exchanges_planned": sum(e.shuffle for e in exchanges),
        }
        if stateful:
            query["rescaling"] = (
                f"state lives in {partitions} partitions, frozen in the checkpoint: a later "
                "change of parallelism keeps them (Spark ignores the new value); rescaling "
                "state needs a new checkpoint"
            )
        queries.append(query)
        everything += [{"query": insert.sink, **e.to_json()} for e in exchanges]
    return {
        "engine": "spark-structured-streaming",
        "shuffle_partitions": partitions,
        "shuffle_partitions_reason": reason,
        "queries": queries,
        "exchanges": everything,
    }


def _upstream(graph: StreamGraph, sink_id: int) -> list[StreamNode]:
    """The nodes one query runs: everything the sink reads from, in node-id order."""
    seen = {sink_id}
    queue = deque([sink_id])
    while queue:
        for edge in graph.nodes[queue.popleft()].in_edges:
            if edge.source_id not in seen:
                seen.add(edge.source_id)
                queue.append(edge.source_id)
    return [graph.nodes[i] for i in sorted(seen)]


def _shuffle_partitions(stateful: list[StreamNode], conf: dict[str, str]) -> tuple[int, str]:
    if "spark.sql.shuffle.partitions" in conf:
        value = int(conf["spark.sql.shuffle.partitions"])
        return value, "set with SET spark.sql.shuffle.partitions"
    if not stateful:
        return 1, "no stateful operator: only explicit repartitions shuffle, with their own counts"
    parallelism = max(n.parallelism for n in stateful)  # one value for the job's every query
    names = ", ".join(sorted({n.name for n in stateful}))
    return (
        parallelism,
        f"the parallelism of the stateful operators ({names}); key groups would cost a state "
        "store each per micro-batch",
    )


def _exchange(edge: StreamEdge, graph: StreamGraph, partitions: int) -> SparkExchange:
    producer = graph.nodes[edge.source_id]
    consumer = graph.nodes[edge.target_id]
    p = consumer.parallelism
    keys = edge.keys
    strategy = edge.partitioner

    def make(spark: str, partitioning: str, shuffle: bool, why: str) -> SparkExchange:
        return SparkExchange(
            producer.name, consumer.name, strategy, keys, spark, partitioning, shuffle, why
        )

    key_list = ", ".join(keys)
    if strategy == "HASH" and consumer.operator in STATEFUL_OPERATORS:
        if not keys:
            return make(
                "groupBy() (global)",
                "SinglePartition",
                True,
                "a global aggregate gathers every row in one partition, as Flink's windowAll "
                "sends every row to its single subtask",
            )
        operation = "join" if consumer.operator == "join" else "groupBy"
        return make(
            f"{operation}({key_list})",
            f"HashPartitioning([{key_list}], {partitions})",
            True,
            f"the stateful {consumer.name}'s own exchange: rows with equal keys meet in one "
            "state partition, as key groups do in Flink",
        )
    if strategy == "HASH":
        return make(
            f"repartition({partitions}, {key_list})",
            f"HashPartitioning([{key_list}], {partitions})",
            True,
            "KEY BY before a stateless step: hash-partition on the key so the rows of one key "
            "stay together up to the stateful step",
        )
    if strategy == "REBALANCE":
        return make(
            f"repartition({p})",
            f"RoundRobinPartitioning({p})",
            True,
            f"round-robin over the consumer's {p} partitions, as Flink's REBALANCE",
        )
    if strategy == "RESCALE":
        if p <= producer.parallelism:
            return make(
                f"coalesce({p})",
                f"coalesced to {p} partitions",
                False,
                "narrowing RESCALE merges neighbouring partitions without a shuffle",
            )
        return make(
            f"repartition({p})",
            f"RoundRobinPartitioning({p})",
            True,
            "widening RESCALE: Spark cannot split partitions without a shuffle",
        )
    if strategy == "GLOBAL":
        return make(
            "repartition(1)",
            "SinglePartition",
            True,
            "every row to one consumer, as Flink's GLOBAL sends all to subtask 0",
        )
    if strategy == "SHUFFLE":
        return make(
            f"repartition({p}, rand())",
            f"HashPartitioning([rand()], {p})",
            True,
            "random partitioning, as Flink's SHUFFLE",
        )
    if strategy == "BROADCAST":
        return make(
            f"crossJoin(range({p})).repartition({p}, subtask)",
            f"HashPartitioning([subtask], {p})",
            True,
            f"every row copied to each of the {p} consumer partitions, as Flink's BROADCAST",
        )
    if strategy == "CUSTOM":
        return make(
            f"repartition({p}, {key_list})",
            f"HashPartitioning([{key_list}], {p})",
            True,
            "PARTITION BY: partitions chosen from the expression's value",
        )
    return make("none", "unchanged", False, "rows stay in their partition")


def _trigger(interval_ms: int | None) -> str:
    if interval_ms is None:
        return "default: the next micro-batch starts when the previous one ends"
    return f"processingTime {interval_ms} ms: one micro-batch, and so one checkpoint, per interval"


def _checkpoint_location(directory: str | None, program: Program, query: str) -> str:
    root = directory if directory is not None else DEFAULT_CHECKPOINT_ROOT
    return f"{root}/{program.settings.job_name}/{query}"
