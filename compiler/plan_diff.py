"""What an edit does to a job's plans: the plan half of ``flowc diff OLD.flow NEW.flow``.

The state half (which stateful operators keep their state) is :mod:`flowc.state_compat`'s;
this module lists the plan changes around it:

- **vertices**: JobGraph vertices added, removed and re-chained. Vertices are matched by
  their operators: an old and a new vertex are the same when they hold the same operators
  in the same order; vertices that share operators otherwise were re-chained (split,
  merged, or an operator joined or left the chain).
- **exchanges**: a consumer's input whose ship strategy or keys changed (or that appeared
  or went away while its consumer stayed).
- **parallelism**: a vertex's parallelism or max parallelism (with Flink's default when
  unset: a keyed vertex's key groups are fixed by it).
- **operator ids**: an operator whose id changed. An auto-generated id is a hash of the
  topology before the operator, so it changes with any edit upstream; Flink matches state
  by these ids, so the advice is to pin a ``uid``.
- **spark**: shuffle partitions, queries added or removed, and each query's exchanges.

Operators are matched first by id (a pinned ``uid`` or an unchanged position), then, for
those left, by name and what they read and feed (and the step's source text), one tier
after another: each tier is a dictionary lookup, so matching is linear in the graphs, and
every list comes out in a fixed order (the new plan's topological order, then the old's
for what was removed).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from flowc import __version__
from flowc.diagnostics import Diagnostic, Severity, render_text
from flowc.flink.keygroups import compute_default_max_parallelism
from flowc.spans import Span
from flowc.spark_plan import STATEFUL_OPERATORS, SparkExchange, SparkQuery
from flowc.state_compat import Finding, StateComparison, Verdict
from flowc.stream_graph import StreamEdge, StreamGraph, StreamNode

if TYPE_CHECKING:
    from flowc.job import CompiledJob
    from flowc.job_graph import JobGraph, JobVertex

#: The longest piece of a step's source text used to tell two same-named operators apart.
_TEXT_KEY_CHARS = 200


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
        return {
            "kind": self.kind.value,
            "query": self.query,
            "old": self.old,
            "new": self.new,
            "message": self.message,
        }


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


# ---------------------------------------------------------------- one side, indexed


class _Side:
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
                lambda n: n.kind == "source",
            )
        return self._sources

    def sinks(self) -> dict[int, frozenset[str]]:
        """Each node's downstream sink names."""
        if self._sinks is None:
            self._sinks = self._reach(
                list(reversed(self._forward_order())),
                lambda n: [e.target_id for e in n.out_edges],
                lambda n: n.kind == "sink",
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


# ---------------------------------------------------------------- matching operators


def _pair_operators(old: _Side, new: _Side) -> dict[int, int]:
    """Old node id → new node id for the operators both jobs have."""
    pairs: dict[int, int] = {}
    by_id = {old.refs[n].id: n for n in old.order}
    for node in new.order:
        match = by_id.get(new.refs[node].id)
        if match is not None:  # one id is one operator to Flink, whatever it now does
            pairs[match] = node

    def tier(key: Callable[[_Side, int], Hashable]) -> None:
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

    def name(side: _Side, node: int) -> tuple[str, str]:
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


# ---------------------------------------------------------------- the diff


def diff_plans(old: CompiledJob, new: CompiledJob) -> PlanDiff:
    """The plan changes from ``old`` to ``new`` (both compiled; Spark plans included)."""
    before, after = _Side(old), _Side(new)
    pairs = _pair_operators(before, after)
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
    from pathlib import PurePath

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


def _vertex_changes(old: _Side, new: _Side, pairs: dict[int, int]) -> tuple[VertexChange, ...]:
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
    old: _Side, new: _Side, back: dict[int, int]
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


def _inputs(
    node: StreamNode, producer: Callable[[int], Hashable]
) -> dict[tuple[int, Hashable, int], StreamEdge]:
    """A node's inputs by (input side, producer's match, occurrence)."""
    seen: dict[tuple[int, Hashable], int] = {}
    out: dict[tuple[int, Hashable, int], StreamEdge] = {}
    for edge in node.in_edges:
        key = (edge.type_number, producer(edge.source_id))
        count = seen.get(key, 0)
        seen[key] = count + 1
        out[(*key, count)] = edge
    return out


def _exchange_changes(old: _Side, new: _Side, pairs: dict[int, int]) -> tuple[ExchangeChange, ...]:
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
        by_side: dict[int, list[tuple[int, Hashable, int]]] = {}
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


def _edge_ref(side: _Side, edge: StreamEdge) -> EdgeRef:
    return EdgeRef(
        producer=side.graph.nodes[edge.source_id].name,
        ship_strategy=edge.partitioner,
        keys=edge.keys,
        chained=side.graph.is_chainable(edge),
    )


# ---------------------------------------------------------------- Spark


def _spark_changes(old: _Side, new: _Side, pairs: dict[int, int]) -> tuple[SparkChange, ...]:
    before, after = old.job.spark_plan, new.job.spark_plan
    changes: list[SparkChange] = []
    if before.shuffle_partitions != after.shuffle_partitions:
        stateful = any(q.stateful for q in before.queries) and not before.batch
        note = (
            ": on an existing checkpoint Spark keeps the first run's count for stateful "
            "queries and ignores the new one; rescaling state needs a new checkpoint"
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
    def key_of(
        exchanges: Iterable[SparkExchange], map_id: Callable[[int], Hashable]
    ) -> dict[tuple[Hashable, Hashable, int], SparkExchange]:
        seen: dict[tuple[Hashable, Hashable], int] = {}
        out: dict[tuple[Hashable, Hashable, int], SparkExchange] = {}
        for exchange in exchanges:
            key = (map_id(exchange.consumer_id), map_id(exchange.producer_id))
            count = seen.get(key, 0)
            seen[key] = count + 1
            out[(*key, count)] = exchange
        return out

    was = key_of(old.exchanges, lambda i: pairs.get(i, ("old", i)))
    now = key_of(new.exchanges, lambda i: i)
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


# ---------------------------------------------------------------- flowc diff's report

#: The version of ``flowc diff --format json``'s document (docs/state.md, "flowc diff").
DIFF_SCHEMA_VERSION = 1


@dataclass(frozen=True, slots=True)
class CheckpointCheck:
    """``flowc diff --against DIR``: the new job checked against a checkpoint folder, as
    ``flowc run`` would check it before starting (flowc.runtime.state_guard)."""

    #: The checkpoint root given (as ``flowc run --checkpoint-dir``).
    root: str
    #: The job's folder under it that was checked; None when none was found.
    job_folder: str | None
    #: Errors (E0820: the state would be lost or corrupted) and warnings (E0821, E0822).
    diagnostics: tuple[Diagnostic, ...]
    #: What was (or could not be) checked, in a sentence.
    note: str

    @property
    def ok(self) -> bool:
        return not any(d.severity is Severity.ERROR for d in self.diagnostics)

    def to_json(self) -> dict[str, Any]:
        return {
            "root": self.root,
            "job_folder": self.job_folder,
            "ok": self.ok,
            "note": self.note,
            "diagnostics": [d.to_json() for d in self.diagnostics],
        }


@dataclass(frozen=True, slots=True)
class DiffReport:
    """Everything ``flowc diff OLD NEW`` says: state verdicts, plan changes, checkpoint."""

    old_file: str
    new_file: str
    old_job: str
    new_job: str
    state: StateComparison
    plan: PlanDiff
    checkpoint: CheckpointCheck | None = None

    @property
    def ok(self) -> bool:
        """Every state survives (unchanged, compatible, rescaled), here and in the
        checkpoint checked: exit code 0; else 1."""
        return self.state.ok and (self.checkpoint is None or self.checkpoint.ok)

    @property
    def changed(self) -> bool:
        """Anything at all differs between the two jobs' state or plans."""
        return (
            self.plan.changed
            or any(True for _ in self.state.findings())
            or any(
                (q.old is None) != (q.new is None)
                or any((o.old is None) != (o.new is None) for o in q.operators)
                for q in self.state.queries
            )
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "flowc_version": __version__,
            "schema_version": DIFF_SCHEMA_VERSION,
            "old": {"file": self.old_file, "job": self.old_job},
            "new": {"file": self.new_file, "job": self.new_job},
            "ok": self.ok,
            "changed": self.changed,
            "verdict": self.state.verdict.value,
            "state": [q.to_json() for q in self.state.queries],
            "plan": self.plan.to_json(),
            "checkpoint": None if self.checkpoint is None else self.checkpoint.to_json(),
        }

    def to_text(self, sources: dict[str, str], color: bool = False) -> str:
        """The report as text: each finding about state as a diagnostic at the new line
        (with the old definition), a verdict per stateful operator, the plan changes, the
        checkpoint's findings, and the result."""
        paint = _Paint(color)
        out: list[str] = []
        if not self.changed and (self.checkpoint is None or not self.checkpoint.diagnostics):
            out.append(
                f"no changes: {self.new_file} keeps every plan and all state of {self.old_file}"
            )
            if self.checkpoint is not None:
                out.append(f"checkpoint: {self.checkpoint.note}")
            return "\n".join(out) + "\n"
        for query, finding in self.state.findings():
            if finding.verdict in (Verdict.INCOMPATIBLE, Verdict.RESCALED):
                out.append(_finding_text(query, finding, sources, paint, self.new_file))
        out.extend(self._verdicts(paint))
        plan = self.plan.to_text()
        out.append(paint.bold("plan changes:") if plan else "plan changes: none")
        out.extend(plan)
        if self.checkpoint is not None:
            out.append("")
            title = paint.bold(f"checkpoint {self.checkpoint.root}:")
            out.append(f"{title} {self.checkpoint.note}")
            # What the checkpoint says that the comparison of the two files said already
            # (the checkpoint was written by OLD) is not repeated.
            shown = {
                (f.code, f.new.line if f.new is not None else None, f.message)
                for _, f in self.state.findings()
            }
            fresh = [
                d
                for d in self.checkpoint.diagnostics
                if (d.code, d.span.line, d.message) not in shown
            ]
            repeated = len(self.checkpoint.diagnostics) - len(fresh)
            if repeated:
                out.append(
                    f"  the checkpoint holds OLD's state: {_count(repeated, 'finding')} as above"
                )
            if fresh:
                out.append(render_text(fresh, sources, color).rstrip("\n"))
        out.append("")
        out.append(self._result(paint))
        return "\n".join(out) + "\n"

    def _verdicts(self, paint: _Paint) -> list[str]:
        lines = [paint.bold("state:")]
        if not self.state.queries:
            lines.append("  no queries")
        for query in self.state.queries:
            status = (
                "new query: starts with empty state"
                if query.old is None
                else "removed"
                if query.new is None
                else f"{_count(len(query.operators), 'stateful operator')}"
                if query.operators
                else "stateless"
            )
            lines.append(f"  query '{query.name}': {status}")
            for finding in query.findings:
                lines.append(f"    {_verdict_word(finding.verdict, paint)} {finding.message}")
            for operator in query.operators:
                where = operator.new if operator.new is not None else operator.old
                assert where is not None
                location = f"{where.location.file}:{where.location.line}"
                lines.append(
                    f"    {_verdict_word(operator.verdict, paint)} {operator.name}  ({location})"
                )
                for finding in operator.findings:
                    if finding.verdict is Verdict.COMPATIBLE:
                        lines.append(f"        {finding.message}")
        lines.append("")
        return lines

    def _result(self, paint: _Paint) -> str:
        counts: dict[Verdict, int] = {}
        for query in self.state.queries:
            for operator in query.operators:
                counts[operator.verdict] = counts.get(operator.verdict, 0) + 1
        shown = ", ".join(
            f"{counts[v]} {v.value}" for v in reversed(list(Verdict)) if counts.get(v)
        )
        tally = f" ({shown})" if shown else ""
        if self.ok:
            return paint.green("ok:") + f" every state survives the edit{tally}"
        lost = []
        if not self.state.ok:
            lost.append("the edit would lose or corrupt state")
        if self.checkpoint is not None and not self.checkpoint.ok:
            lost.append(f"the checkpoint in {self.checkpoint.root} cannot go on with the new job")
        return paint.red("not ok:") + f" {'; '.join(lost)}{tally}"


class _Paint:
    """ANSI styles as flowc's diagnostics use them, or none."""

    def __init__(self, color: bool) -> None:
        self.color = color

    def style(self, text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color else text

    def bold(self, text: str) -> str:
        return self.style(text, "1")

    def red(self, text: str) -> str:
        return self.style(text, "1;31")

    def yellow(self, text: str) -> str:
        return self.style(text, "1;33")

    def green(self, text: str) -> str:
        return self.style(text, "1;32")

    def blue(self, text: str) -> str:
        return self.style(text, "1;34")


def _verdict_word(verdict: Verdict, paint: _Paint) -> str:
    word = f"{verdict.value:<12}"
    if verdict is Verdict.INCOMPATIBLE:
        return paint.red(word)
    if verdict is Verdict.RESCALED:
        return paint.yellow(word)
    return word


def _finding_text(
    query: str, finding: Finding, sources: dict[str, str], paint: _Paint, new_file: str
) -> str:
    """One finding as a diagnostic: at the new definition (the old one when it is gone),
    the source line and a caret, the old definition, and the help."""
    error = finding.verdict is Verdict.INCOMPATIBLE
    severity = "error" if error else "warning"
    code = finding.code or ""
    message = finding.message
    old = finding.old
    if old is not None:
        # state_compat ends an incompatible message with the old definition; shown below.
        was = f"was: {old.text} (line {old.line})"
        message = message.replace(f"; {was}", "").replace(f" ({was})", "")
    head = paint.red if error else paint.yellow
    lines = [head(f"{severity}[{code}]") + paint.bold(f": {message}")]
    at = finding.new if finding.new is not None else old
    if at is None:
        lines.append(f" = query '{query}'")
    else:
        gutter = " " * len(str(at.line))
        lines.append(f"{gutter}{paint.blue('-->')} {at.file}:{at.line}:{at.column}")
        text = sources.get(at.file)
        source_lines = text.split("\n") if text is not None else []
        if 1 <= at.line <= len(source_lines):
            shown = source_lines[at.line - 1].rstrip("\r").expandtabs(1)
            start = max(at.column - 1, 0)
            width = (
                max(at.end_column - at.column, 1)
                if at.end_line == at.line
                else max(len(shown) - start, 1)
            )
            lines.append(f"{gutter} {paint.blue('|')}")
            lines.append(f"{paint.blue(f'{at.line} |')} {shown}")
            caret = " " * min(start, len(shown)) + "^" * width
            lines.append(f"{gutter} {paint.blue('|')} {head(caret)}")
        if old is not None and finding.new is not None and old.text != finding.new.text:
            lines.append(f"{gutter} {paint.blue('=')} was: {old.text} ({old.file}:{old.line})")
        elif old is not None:
            lines.append(f"{gutter} {paint.blue('=')} no longer in {new_file}")
    if finding.help:
        gutter = " " * len(str(at.line)) if at is not None else ""
        lines.append(f"{gutter} {paint.blue('=')} {paint.bold('help')}: {finding.help}")
    return "\n".join(lines) + "\n"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
