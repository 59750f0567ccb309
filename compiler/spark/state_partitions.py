"""Per stateful operator: Flink's key groups beside the Spark partitions its state is in.

Flink hashes each key into one of ``max_parallelism`` key groups and gives every subtask a
contiguous range of them; restored at another parallelism, it hands whole key groups to
the new subtasks. Spark has no key groups: a stateful operator requires its input
hash-partitioned on its state's key (``StatefulOpClusteredDistribution``, met by a
``HashPartitioning``, whose partition is ``pmod(murmur3(columns), n)``), partition ``i``
keeps the state of the keys that hash to ``i``, and the offline repartition of Spark 4.2+
(``OfflineStateRepartitionRunner``) reads all of it and writes it again by
``repartition(n, partition_key)``, the partition key Spark recovers from each operator's
state key (``StatePartitionKeyExtractorFactory``): every key is hashed anew.

What Spark hashes, per operator (read in Spark's executed plans; checked on real Spark by
tests/test_state_partitions.py): a keyed aggregate, a TOP (Spark's max_by aggregation),
a DEDUPLICATE and an OVER processor its keys; a session window its keys, not the
session; a TUMBLE, HOP or CUMULATE window and a window's TOP the keys and the window
(each window of a key apart); a stream-stream join each side by its join key; an aggregate
or TOP without a key is one partition (``SinglePartition``) whatever the count, a session
without a key one constant group. flowc's DEDUPLICATE ... WITHIN and the processors of
updating pipelines group rows by a key-group column of their own (a Spark hash of the
keys into ``max_parallelism`` groups), so each of those groups is whole in one partition
and moves whole; a CURRENT_WATERMARK reader groups rows by a hash of the whole row into
buckets.
"""

from __future__ import annotations

from enum import StrEnum

from flowc.fast_dataclass import dataclass
from flowc.flink.keygroups import (
    compute_default_max_parallelism,
    compute_key_group_range_for_operator_index,
    key_group_runs,
)
from flowc.graph.job_graph import JobVertex
from flowc.graph.stream_graph import StreamNode
from flowc.program import Step, WindowAggregateStep, WindowTopStep
from flowc.spans import Span
from flowc.vocabulary import Operator, Partitioner, WindowKind

#: Key-group runs in the JSON at most (as the physical plan's vertices).
_RUNS = 8
#: Subtasks whose key groups the text lists one by one; more are elided.
_LISTED = 4


class Spread(StrEnum):
    """How Spark spreads one operator's state over its partitions."""

    COLUMNS = "columns"  # HashPartitioning on the state's key columns
    KEY_GROUPS = "key_groups"  # a processor's own key-group column, a hash of the keys
    ROW_BUCKETS = "row_buckets"  # a CURRENT_WATERMARK reader's buckets, a hash of the row
    ONE_GROUP = "one_group"  # one constant key: one of the partitions holds it all
    SINGLE = "single"  # SinglePartition: one partition whatever the count


@dataclass(frozen=True, slots=True)
class StatePartitions:
    """Where one stateful operator's state lives: Flink's key groups and subtasks, and
    Spark's partitions, now and after a repartition to another count."""

    node_id: int
    name: str
    uid: str | None
    #: The step that keeps the state (its operator's span).
    span: Span
    #: Flink's key per keyed input (a join's two sides in order); () where Flink keeps no
    #: keyed state (a CURRENT_WATERMARK reader), ``((),)`` for a keyed input with no key.
    flink_keys: tuple[tuple[str, ...], ...]
    parallelism: int
    max_parallelism: int
    spread: Spread
    #: What Spark hashes, per input side: the state's key columns (COLUMNS), the keys a
    #: processor hashes into its key groups (KEY_GROUPS); () otherwise.
    spark_keys: tuple[tuple[str, ...], ...]
    #: COLUMNS: the window is hashed with the keys.
    window: bool
    #: How many Spark partitions keep the state: the shuffle partitions, 1 for SINGLE.
    partitions: int
    #: A processor's key groups (KEY_GROUPS) or buckets (ROW_BUCKETS); None otherwise.
    groups: int | None

    @property
    def keyed(self) -> bool:
        return bool(self.flink_keys)

    def to_json(self) -> dict[str, object]:
        flink: dict[str, object] = {
            "keys": [list(k) for k in self.flink_keys] if self.keyed else None,
            "parallelism": self.parallelism,
            "max_parallelism": self.max_parallelism,
            "key_groups": [
                {"subtasks": [first, last], "key_groups": [low, high]}
                for first, last, low, high in key_group_runs(
                    self.max_parallelism, self.parallelism, _RUNS
                )
            ]
            if self.keyed
            else None,
        }
        spark: dict[str, object] = {
            "partitions": self.partitions,
            "spread": self.spread.value,
            "keys": [list(k) for k in self.spark_keys],
            "window": self.window,
            "groups": self.groups,
        }
        return {
            "operator": self.name,
            "uid": self.uid,
            "span": self.span.to_json(),
            "flink": flink,
            "spark": spark,
            "text": self.to_text(),
        }

    def to_text(self) -> str:
        uid = f" [uid {self.uid}]" if self.uid else ""
        return (
            f"{self.name}{uid} (line {self.span.line}): {self._flink()}; {self._spark()}; "
            f"{self._rescaled()}"
        )

    def _flink(self) -> str:
        if not self.keyed:
            return "Flink keeps no state for it (its operator reads its own watermark)"
        groups = f"key groups 0-{self.max_parallelism - 1} (max parallelism {self.max_parallelism})"
        subtasks = _subtasks(self.max_parallelism, self.parallelism)
        if not any(self.flink_keys):
            return f"Flink has no key: {groups} in {subtasks}"
        return f"Flink hashes {_sides(self.flink_keys)} into {groups} in {subtasks}"

    def _spark(self) -> str:
        n = self.partitions
        if self.spread is Spread.SINGLE:
            return (
                "Spark keeps it in 1 partition (SinglePartition) whatever "
                "spark.sql.shuffle.partitions"
            )
        if self.spread is Spread.ONE_GROUP:
            return f"Spark groups every row under one constant key: one of its {n} partitions"
        if self.spread is Spread.ROW_BUCKETS:
            return (
                f"Spark's processor groups rows into {self.groups} buckets by a hash of the "
                f"whole row, in {_count(n, 'partition')} by murmur3(bucket) mod {n}"
            )
        if self.spread is Spread.KEY_GROUPS:
            return (
                f"Spark's processor groups rows into {self.groups} key groups of its own (a "
                f"Spark hash of {_sides(self.spark_keys)}, not Flink's) in "
                f"{_count(n, 'partition')} by murmur3(key group) mod {n}: each key group "
                "whole in one partition"
            )
        hashed = [", ".join((*keys, "window") if self.window else keys) for keys in self.spark_keys]
        spread = (
            ": a key group's keys land in any partition" if any(self.flink_keys) and n > 1 else ""
        )
        if len(hashed) == 2:
            return (
                f"Spark keeps both sides in {_count(n, 'partition')} by murmur3 of their join "
                f"key mod {n} (left {hashed[0]}, right {hashed[1]}){spread}"
            )
        apart = ", each window of a key apart" if self.window and any(self.spark_keys) else ""
        return (
            f"Spark keeps it in {_count(n, 'partition')} by murmur3({hashed[0]}) mod {n}"
            f"{apart}{spread}"
        )

    def _rescaled(self) -> str:
        if self.spread is Spread.SINGLE:
            return (
                "Spark's repartition to N moves its one (empty) key to partition 42 mod N "
                "(murmur3 of no column is its seed), and the next run reads partition 0 only"
            )
        if self.spread is Spread.ONE_GROUP:
            return "at N partitions the one group moves whole (murmur3 mod N)"
        if self.spread is Spread.ROW_BUCKETS:
            return (
                "repartitioned to N, each bucket moves whole to murmur3(bucket) mod N, and the "
                "next run hashes rows into N buckets"
            )
        if self.spread is Spread.KEY_GROUPS:
            return (
                "repartitioned to N, each key group moves whole to murmur3(key group) mod N, "
                "as Flink moves whole key groups, though not as contiguous ranges"
            )
        unit = "key" if any(self.spark_keys) else "window"
        return (
            f"repartitioned to N, Spark hashes every {unit} again (mod N) and rewrites all the "
            "state, where Flink hands whole key groups to the new subtasks"
        )


def describe_state(
    node: StreamNode,
    vertex: JobVertex | None,
    step: Step | None,
    partitions: int,
    processor_groups: tuple[tuple[str, ...], int] | None = None,
    buckets: int | None = None,
) -> StatePartitions:
    """The state layout of ``node``, one stateful operator of a streaming query:
    ``vertex`` its Flink vertex (its parallelism and max parallelism), ``step`` the step
    it runs, ``partitions`` the plan's shuffle partitions; ``processor_groups`` the keys a
    processor hashes into how many key groups, ``buckets`` a CURRENT_WATERMARK reader's."""
    parallelism = vertex.parallelism if vertex is not None else node.parallelism
    declared = vertex.max_parallelism if vertex is not None else node.max_parallelism
    max_parallelism = (
        declared if declared is not None else compute_default_max_parallelism(parallelism)
    )
    hashed = sorted(
        (e for e in node.in_edges if e.partitioner == Partitioner.HASH),
        key=lambda e: e.type_number,
    )
    flink_keys = tuple(e.keys for e in hashed)
    window = isinstance(step, WindowTopStep) or (
        isinstance(step, WindowAggregateStep) and step.window.kind != WindowKind.SESSION
    )
    session = isinstance(step, WindowAggregateStep) and step.window.kind == WindowKind.SESSION
    spark_keys: tuple[tuple[str, ...], ...] = flink_keys
    groups = None
    if buckets is not None:  # a WHERE or SELECT: no state in Flink, whatever its input
        flink_keys, spark_keys, groups = (), (), buckets
        spread = Spread.ROW_BUCKETS
    elif processor_groups is not None:
        keys, groups = processor_groups
        spread = Spread.KEY_GROUPS
        if node.operator != Operator.JOIN or len(flink_keys) != 2:
            spark_keys = (keys,)
    elif any(flink_keys) or window:
        spread, spark_keys = Spread.COLUMNS, flink_keys or ((),)
    elif session:
        spread, spark_keys = Spread.ONE_GROUP, ()
    else:
        spread, spark_keys = Spread.SINGLE, ()
    return StatePartitions(
        node_id=node.id,
        name=node.name,
        uid=node.uid,
        span=node.span,
        flink_keys=flink_keys,
        parallelism=parallelism,
        max_parallelism=max_parallelism,
        spread=spread,
        spark_keys=spark_keys,
        window=window and spread is Spread.COLUMNS,
        partitions=1 if spread is Spread.SINGLE else partitions,
        groups=groups,
    )


def _sides(keys: tuple[tuple[str, ...], ...]) -> str:
    """``word``; a join's ``id (left) and auction (right)``."""
    shown = [", ".join(k) or "no key" for k in keys]
    if len(shown) == 2:
        return f"{shown[0]} (left) and {shown[1]} (right)"
    return shown[0] if shown else "no key"


def _subtasks(max_parallelism: int, parallelism: int) -> str:
    """``2 subtasks (0-63, 64-127)``; past four, the first two and the last."""
    ranges = [
        "{}-{}".format(*compute_key_group_range_for_operator_index(max_parallelism, parallelism, i))
        for i in (range(parallelism) if parallelism <= _LISTED else (0, 1, parallelism - 1))
    ]
    if parallelism > _LISTED:
        ranges.insert(2, "...")
    return f"{_count(parallelism, 'subtask')} ({', '.join(ranges)})"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
