"""The plan changes ``flowc diff`` lists (vertices, exchanges, parallelism, operator ids,
Spark), each as a record with its message and JSON form, and :class:`PlanDiff`, the lot.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Any

from flowc.fast_dataclass import dataclass
from flowc.json_records import record_json
from flowc.spans import Span


class VertexChangeKind(StrEnum):
    ADDED = "added"
    REMOVED = "removed"
    RECHAINED = "rechained"


class ChangeKind(StrEnum):
    ADDED = "added"
    REMOVED = "removed"
    CHANGED = "changed"


class IdChangeReason(StrEnum):
    #: An auto-generated id: the topology before the operator changed.
    TOPOLOGY = "topology"
    UID_CHANGED = "uid_changed"
    UID_ADDED = "uid_added"
    UID_REMOVED = "uid_removed"


@dataclass(frozen=True, slots=True)
class OperatorRef:
    """One operator (StreamNode) of one side, as the diff names it."""

    id: str
    name: str
    operator: str
    uid: str | None
    parallelism: int
    stateful: bool
    span: Span

    @property
    def where(self) -> str:
        return f"{self.span.file}:{self.span.line}"

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "operator": self.operator,
            "uid": self.uid,
            "parallelism": self.parallelism,
            "stateful": self.stateful,
            "file": self.span.file,
            "line": self.span.line,
            "column": self.span.column,
        }


@dataclass(frozen=True, slots=True)
class ChainRef:
    """One JobGraph vertex: a chain of operators run in one task."""

    id: str
    name: str
    parallelism: int
    max_parallelism: int | None
    operators: tuple[OperatorRef, ...]
    span: Span

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "parallelism": self.parallelism,
            "max_parallelism": self.max_parallelism,
            "operators": [op.id for op in self.operators],
            "file": self.span.file,
            "line": self.span.line,
        }


@dataclass(frozen=True, slots=True)
class VertexChange:
    change: VertexChangeKind
    old: tuple[ChainRef, ...]
    new: tuple[ChainRef, ...]

    @property
    def span(self) -> Span:
        return (self.new or self.old)[0].span

    @property
    def message(self) -> str:
        if self.change is VertexChangeKind.ADDED:
            return f"new vertex {_chains(self.new)}"
        if self.change is VertexChangeKind.REMOVED:
            return f"vertex removed: {_chains(self.old)}"
        return f"re-chained: {_chains(self.old)} is now {_chains(self.new)}"

    def to_json(self) -> dict[str, Any]:
        return {
            "change": self.change.value,
            "message": self.message,
            "old": [c.to_json() for c in self.old],
            "new": [c.to_json() for c in self.new],
        }


@dataclass(frozen=True, slots=True)
class ParallelismChange:
    """A vertex's parallelism or max parallelism (``field``) changed."""

    field: str  # "parallelism" or "max_parallelism"
    vertex: str  # the new vertex's name
    vertex_id: str
    old: int | None
    new: int | None
    #: Max parallelism only: the value in effect (Flink's default when unset).
    old_effective: int | None
    new_effective: int | None
    keyed: bool
    span: Span

    @property
    def message(self) -> str:
        if self.field == "parallelism":
            return f"{self.vertex}: parallelism {self.old} -> {self.new}"
        text = (
            f"{self.vertex}: max parallelism {_max_p(self.old, self.old_effective)} -> "
            f"{_max_p(self.new, self.new_effective)}"
        )
        if self.keyed and self.old_effective != self.new_effective:
            text += (
                " (its key groups change: Flink cannot restore its keyed state from a "
                "checkpoint of the old job)"
            )
        return text

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "field": self.field,
            "vertex": self.vertex,
            "vertex_id": self.vertex_id,
            "old": self.old,
            "new": self.new,
        }
        if self.field == "max_parallelism":
            data["old_effective"] = self.old_effective
            data["new_effective"] = self.new_effective
        data["keyed"] = self.keyed
        data["message"] = self.message
        data["file"] = self.span.file
        data["line"] = self.span.line
        return data


@dataclass(frozen=True, slots=True)
class EdgeRef:
    """How one consumer reads one input: the StreamEdge's partitioning."""

    producer: str
    ship_strategy: str
    keys: tuple[str, ...]
    chained: bool

    @property
    def text(self) -> str:
        keys = f"({', '.join(self.keys)})" if self.keys else ""
        return f"{self.ship_strategy}{keys}{' (chained)' if self.chained else ''}"

    def to_json(self) -> dict[str, Any]:
        return {
            "from": self.producer,
            "ship_strategy": self.ship_strategy,
            "keys": list(self.keys),
            "chained": self.chained,
        }


@dataclass(frozen=True, slots=True)
class ExchangeChange:
    change: ChangeKind
    consumer: str
    old: EdgeRef | None
    new: EdgeRef | None
    span: Span

    @property
    def message(self) -> str:
        if self.old is None and self.new is not None:
            return f"{self.consumer}: new input from {self.new.producer}: {self.new.text}"
        if self.new is None and self.old is not None:
            return f"{self.consumer}: input from {self.old.producer} removed: {self.old.text}"
        assert self.old is not None and self.new is not None
        return f"{self.consumer} <- {self.new.producer}: {self.old.text} -> {self.new.text}"

    def to_json(self) -> dict[str, Any]:
        return {
            "change": self.change.value,
            "consumer": self.consumer,
            "old": self.old.to_json() if self.old is not None else None,
            "new": self.new.to_json() if self.new is not None else None,
            "message": self.message,
            "file": self.span.file,
            "line": self.span.line,
        }


UID_HELP = (
    "pin the operator's id with WITH (uid = '...') on its step: a pinned id survives edits "
    "elsewhere in the job, and Flink matches checkpointed state to operators by id"
)


@dataclass(frozen=True, slots=True)
class OperatorIdChange:
    old: OperatorRef
    new: OperatorRef
    reason: IdChangeReason

    @property
    def message(self) -> str:
        head = f"{self.new.name}: operator id {self.old.id[:8]} -> {self.new.id[:8]}"
        if self.reason is IdChangeReason.UID_CHANGED:
            return f"{head}: its uid changed from '{self.old.uid}' to '{self.new.uid}'"
        if self.reason is IdChangeReason.UID_ADDED:
            return f"{head}: uid '{self.new.uid}' pinned (was auto-generated)"
        if self.reason is IdChangeReason.UID_REMOVED:
            return f"{head}: uid '{self.old.uid}' removed (now auto-generated)"
        return f"{head}: an auto-generated id changes whenever the topology before it does"

    @property
    def help(self) -> str | None:
        if self.reason is IdChangeReason.TOPOLOGY:
            return UID_HELP
        if self.reason is IdChangeReason.UID_ADDED:
            return None
        return "keep the old uid to keep the operator's identity (and its state in Flink)"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.new.name,
            "old_id": self.old.id,
            "new_id": self.new.id,
            "old_uid": self.old.uid,
            "new_uid": self.new.uid,
            "reason": self.reason.value,
            "stateful": self.new.stateful,
            "message": self.message,
            "help": self.help,
            "file": self.new.span.file,
            "line": self.new.span.line,
        }


class SparkChangeKind(StrEnum):
    SHUFFLE_PARTITIONS = "shuffle_partitions"
    CHECKPOINT_ROOT = "checkpoint_root"
    QUERY_ADDED = "query_added"
    QUERY_REMOVED = "query_removed"
    EXCHANGE_ADDED = "exchange_added"
    EXCHANGE_REMOVED = "exchange_removed"
    EXCHANGE_CHANGED = "exchange_changed"


@dataclass(frozen=True, slots=True)
class SparkChange:
    kind: SparkChangeKind
    #: The query (INSERT, named after its sink); None for job-wide changes.
    query: str | None
    old: str | None
    new: str | None
    message: str

    def to_json(self) -> dict[str, Any]:
        return record_json(self)


@dataclass(frozen=True, slots=True)
class PlanDiff:
    """Every plan change between two compiled jobs, each list in a fixed order."""

    old_job: str
    new_job: str
    #: The job's name changed (and it was set with SET job.name on at least one side).
    job_renamed: bool
    vertices: tuple[VertexChange, ...]
    exchanges: tuple[ExchangeChange, ...]
    parallelism: tuple[ParallelismChange, ...]
    operator_ids: tuple[OperatorIdChange, ...]
    operators_added: tuple[OperatorRef, ...]
    operators_removed: tuple[OperatorRef, ...]
    #: Operators kept whose name (and so definition: a window's size, a join's type)
    #: changed: (old, new).
    operators_changed: tuple[tuple[OperatorRef, OperatorRef], ...]
    spark: tuple[SparkChange, ...]

    @property
    def changed(self) -> bool:
        return bool(
            self.job_renamed
            or self.vertices
            or self.exchanges
            or self.parallelism
            or self.operator_ids
            or self.operators_added
            or self.operators_removed
            or self.operators_changed
            or self.spark
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "changed": self.changed,
            "job": {"old": self.old_job, "new": self.new_job, "renamed": self.job_renamed},
            "vertices": [v.to_json() for v in self.vertices],
            "exchanges": [e.to_json() for e in self.exchanges],
            "parallelism": [p.to_json() for p in self.parallelism],
            "operator_ids": [o.to_json() for o in self.operator_ids],
            "operators": {
                "added": [o.to_json() for o in self.operators_added],
                "removed": [o.to_json() for o in self.operators_removed],
                "changed": [
                    {"old": old.to_json(), "new": new.to_json()}
                    for old, new in self.operators_changed
                ],
            },
            "spark": [s.to_json() for s in self.spark],
        }

    def to_text(self) -> list[str]:
        """The changes as indented lines (no trailing newlines); empty when none."""
        lines: list[str] = []

        def section(title: str, items: Sequence[tuple[str, str, str | None]]) -> None:
            """A titled list; each distinct help line once, after the items."""
            if not items:
                return
            lines.append(f"  {title}:")
            for mark, text, _ in items:
                lines.append(f"    {mark} {text}")
            for hint in dict.fromkeys(hint for _, _, hint in items if hint):
                lines.append(f"    = help: {hint}")

        if self.job_renamed:
            section(
                "job",
                [
                    (
                        "~",
                        f"renamed '{self.old_job}' -> '{self.new_job}': Spark keeps checkpoints "
                        "under the job's name, so the new job starts from a new folder",
                        None,
                    )
                ],
            )
        marks = {
            VertexChangeKind.ADDED: "+",
            VertexChangeKind.REMOVED: "-",
            VertexChangeKind.RECHAINED: "~",
        }
        section(
            "vertices",
            [(marks[v.change], f"{v.message}  ({_where(v.span)})", None) for v in self.vertices],
        )
        section(
            "operators",
            [("+", f"{o.name}  ({o.where})", None) for o in self.operators_added]
            + [("-", f"{o.name}  (was {o.where})", None) for o in self.operators_removed]
            + [
                ("~", f"{old.name} is now {new.name}  ({new.where})", None)
                for old, new in self.operators_changed
            ],
        )
        change_marks = {ChangeKind.ADDED: "+", ChangeKind.REMOVED: "-", ChangeKind.CHANGED: "~"}
        section(
            "exchanges",
            [
                (change_marks[e.change], f"{e.message}  ({_where(e.span)})", None)
                for e in self.exchanges
            ],
        )
        section(
            "parallelism",
            [("~", f"{p.message}  ({_where(p.span)})", None) for p in self.parallelism],
        )
        section(
            "operator ids",
            [("~", f"{o.message}  ({o.new.where})", o.help) for o in self.operator_ids],
        )
        spark_marks = {
            SparkChangeKind.QUERY_ADDED: "+",
            SparkChangeKind.EXCHANGE_ADDED: "+",
            SparkChangeKind.QUERY_REMOVED: "-",
            SparkChangeKind.EXCHANGE_REMOVED: "-",
        }
        section("spark", [(spark_marks.get(s.kind, "~"), s.message, None) for s in self.spark])
        return lines


def _where(span: Span) -> str:
    return f"{span.file}:{span.line}"


def _chains(chains: Sequence[ChainRef]) -> str:
    return ", ".join(f"[{c.name}] (p {c.parallelism})" for c in chains)


def _max_p(value: int | None, effective: int | None) -> str:
    return str(value) if value is not None else f"unset (default {effective})"
