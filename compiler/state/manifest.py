"""The state manifest: what each query of a job keeps in state, as plain data.

Every record here round-trips through ``to_json()`` / ``from_json()``; the JSON is stable
(no time, no machine-dependent value) and documented in ``docs/state.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from flowc.spans import Span

#: The manifest's format version: a reader refuses a manifest of a later version.
#: The manifest's format version: a reader refuses a manifest of a later version.
MANIFEST_VERSION = 1
MANIFEST_FORMAT = "flowc-state-manifest"


# ---------------------------------------------------------------- the manifest


class StateKind(StrEnum):
    """What a stateful operator keeps (``StatefulOperator.kind``): finer than its
    operator, since a session window's or a global aggregate's state is its own kind."""

    KEYED_AGGREGATE = "keyed_aggregate"
    GLOBAL_AGGREGATE = "global_aggregate"
    WINDOW_AGGREGATE = "window_aggregate"
    SESSION_WINDOW = "session_window"
    DEDUPLICATE = "deduplicate"
    JOIN = "join"


@dataclass(frozen=True, slots=True)
class Location:
    """Where a definition is in its .flow file, with its source text (on one line)."""

    file: str
    line: int
    column: int
    end_line: int
    end_column: int
    text: str

    @property
    def span(self) -> Span:
        return Span(self.file, self.line, self.column, self.end_line, self.end_column)

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
            "text": self.text,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Location:
        return cls(
            str(data["file"]),
            int(data["line"]),
            int(data["column"]),
            int(data["end_line"]),
            int(data["end_column"]),
            str(data["text"]),
        )


@dataclass(frozen=True, slots=True)
class StateColumn:
    """A column the state is keyed on or holds: name, Spark SQL type, and lineage (the
    expression over source columns, ``source.column``, it stands for)."""

    name: str
    type: str
    lineage: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type, "lineage": self.lineage}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StateColumn:
        return cls(str(data["name"]), str(data["type"]), str(data["lineage"]))

    def shown(self) -> str:
        return f"{self.name} {self.type}"


@dataclass(frozen=True, slots=True)
class AggregateState:
    """One aggregate of an AGGREGATE: its output column, SQL, function, arguments."""

    name: str
    sql: str
    function: str
    arguments: tuple[str, ...]
    type: str
    lineage: str

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "sql": self.sql,
            "function": self.function,
            "arguments": list(self.arguments),
            "type": self.type,
            "lineage": self.lineage,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AggregateState:
        return cls(
            str(data["name"]),
            str(data["sql"]),
            str(data["function"]),
            tuple(str(a) for a in data["arguments"]),
            str(data["type"]),
            str(data["lineage"]),
        )


@dataclass(frozen=True, slots=True)
class WindowState:
    """TUMBLE / HOP / SESSION: the time column and the sizes as Spark takes them."""

    kind: str
    time: StateColumn
    size: str
    slide: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "time": self.time.to_json(),
            "size": self.size,
            "slide": self.slide,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> WindowState:
        slide = data.get("slide")
        return cls(
            str(data["kind"]),
            StateColumn.from_json(data["time"]),
            str(data["size"]),
            None if slide is None else str(slide),
        )

    def shown(self) -> str:
        sizes = self.size if self.slide is None else f"{self.size}, {self.slide}"
        return f"{self.kind}({self.time.name}, {sizes})"


@dataclass(frozen=True, slots=True)
class JoinState:
    """A stream-stream join: both sides' rows are its state."""

    type: str
    right: str
    left_keys: tuple[StateColumn, ...]
    right_keys: tuple[StateColumn, ...]
    condition: str
    #: The condition's terms other than the key equalities (the time bound, if any).
    bound: str | None
    #: Each side's row as the state stores it.
    left_row: tuple[StateColumn, ...]
    right_row: tuple[StateColumn, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "right": self.right,
            "left_keys": [c.to_json() for c in self.left_keys],
            "right_keys": [c.to_json() for c in self.right_keys],
            "condition": self.condition,
            "bound": self.bound,
            "left_row": [c.to_json() for c in self.left_row],
            "right_row": [c.to_json() for c in self.right_row],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JoinState:
        bound = data.get("bound")
        return cls(
            str(data["type"]),
            str(data["right"]),
            _columns(data["left_keys"]),
            _columns(data["right_keys"]),
            str(data["condition"]),
            None if bound is None else str(bound),
            _columns(data["left_row"]),
            _columns(data["right_row"]),
        )


@dataclass(frozen=True, slots=True)
class WatermarkState:
    """A source's watermark that reaches the operator: column and delay."""

    source: str
    column: str
    delay: str

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "column": self.column, "delay": self.delay}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> WatermarkState:
        return cls(str(data["source"]), str(data["column"]), str(data["delay"]))


@dataclass(frozen=True, slots=True)
class StatefulOperator:
    """One stateful operator of a query, as its state is kept.

    ``kind`` is ``keyed_aggregate``, ``global_aggregate``, ``window_aggregate``,
    ``session_window``, ``deduplicate`` or ``join``. ``keys`` are the grouping keys (the
    deduplicated columns for ``deduplicate``, the left side's keys for ``join``).
    """

    index: int
    name: str
    kind: str
    uid: str | None
    operator_id: str
    vertex_id: str | None
    node_id: int
    keys: tuple[StateColumn, ...]
    #: Where the keys are given (the KEY BY before an AGGREGATE), if not in the step.
    keys_location: Location | None
    aggregates: tuple[AggregateState, ...]
    window: WindowState | None
    within: str | None
    join: JoinState | None
    watermarks: tuple[WatermarkState, ...]
    parallelism: int
    max_parallelism: int
    max_parallelism_set: bool
    location: Location

    @property
    def key_groups(self) -> int:
        return self.max_parallelism

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name,
            "kind": self.kind,
            "uid": self.uid,
            "operator_id": self.operator_id,
            "vertex_id": self.vertex_id,
            "node_id": self.node_id,
            "keys": [c.to_json() for c in self.keys],
            "keys_location": None if self.keys_location is None else self.keys_location.to_json(),
            "aggregates": [a.to_json() for a in self.aggregates],
            "window": None if self.window is None else self.window.to_json(),
            "within": self.within,
            "join": None if self.join is None else self.join.to_json(),
            "watermarks": [w.to_json() for w in self.watermarks],
            "parallelism": self.parallelism,
            "max_parallelism": self.max_parallelism,
            "max_parallelism_set": self.max_parallelism_set,
            "key_groups": self.key_groups,
            "location": self.location.to_json(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StatefulOperator:
        uid = data.get("uid")
        vertex = data.get("vertex_id")
        within = data.get("within")
        return cls(
            index=int(data["index"]),
            name=str(data["name"]),
            kind=str(data["kind"]),
            uid=None if uid is None else str(uid),
            operator_id=str(data["operator_id"]),
            vertex_id=None if vertex is None else str(vertex),
            node_id=int(data["node_id"]),
            keys=_columns(data["keys"]),
            keys_location=(
                None
                if data.get("keys_location") is None
                else Location.from_json(data["keys_location"])
            ),
            aggregates=tuple(AggregateState.from_json(a) for a in data["aggregates"]),
            window=None if data.get("window") is None else WindowState.from_json(data["window"]),
            within=None if within is None else str(within),
            join=None if data.get("join") is None else JoinState.from_json(data["join"]),
            watermarks=tuple(WatermarkState.from_json(w) for w in data["watermarks"]),
            parallelism=int(data["parallelism"]),
            max_parallelism=int(data["max_parallelism"]),
            max_parallelism_set=bool(data["max_parallelism_set"]),
            location=Location.from_json(data["location"]),
        )

    @property
    def identity(self) -> str:
        """How a message names it: its kind and uid or name, and its line."""
        label = f"uid '{self.uid}'" if self.uid is not None else self.name
        return f"{label} (line {self.location.line})"


@dataclass(frozen=True, slots=True)
class SourceRead:
    """A source a query reads: where its rows come from."""

    name: str
    connector: str
    path: str | None
    format: str | None

    @property
    def where(self) -> tuple[str, str | None, str | None]:
        return (self.connector, self.path, self.format)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "connector": self.connector,
            "path": self.path,
            "format": self.format,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SourceRead:
        return cls(
            str(data["name"]),
            str(data["connector"]),
            optional_str(data.get("path")),
            optional_str(data.get("format")),
        )

    def shown(self) -> str:
        where = f" {self.path}" if self.path is not None else ""
        return f"'{self.name}' ({self.connector}{where})"


@dataclass(frozen=True, slots=True)
class SinkWrite:
    """The sink a query writes."""

    name: str
    connector: str
    path: str | None
    format: str | None
    mode: str
    location: Location

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "connector": self.connector,
            "path": self.path,
            "format": self.format,
            "mode": self.mode,
            "location": self.location.to_json(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SinkWrite:
        return cls(
            str(data["name"]),
            str(data["connector"]),
            optional_str(data.get("path")),
            optional_str(data.get("format")),
            str(data["mode"]),
            Location.from_json(data["location"]),
        )


@dataclass(frozen=True, slots=True)
class QueryState:
    """One query (INSERT): its sources, sink, checkpoint and stateful operators, in
    Spark's order (index 0 nearest the sink)."""

    name: str
    checkpoint: tuple[str, str]
    sink: SinkWrite
    sources: tuple[SourceRead, ...]
    output_mode: str
    #: ``spark.sql.shuffle.partitions`` as planned for this run.
    shuffle_partitions: int
    #: The partitions Spark keeps this query's state in: the first run's, frozen in the
    #: checkpoint (equal to ``shuffle_partitions`` on a first run).
    state_partitions: int
    operators: tuple[StatefulOperator, ...]
    #: Every step of the query (views it reads included), as written, in pipeline order.
    steps: tuple[str, ...]
    location: Location

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "checkpoint": list(self.checkpoint),
            "sink": self.sink.to_json(),
            "sources": [s.to_json() for s in self.sources],
            "output_mode": self.output_mode,
            "shuffle_partitions": self.shuffle_partitions,
            "state_partitions": self.state_partitions,
            "operators": [o.to_json() for o in self.operators],
            "steps": list(self.steps),
            "location": self.location.to_json(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> QueryState:
        job, query = (str(s) for s in data["checkpoint"])
        return cls(
            name=str(data["name"]),
            checkpoint=(job, query),
            sink=SinkWrite.from_json(data["sink"]),
            sources=tuple(SourceRead.from_json(s) for s in data["sources"]),
            output_mode=str(data["output_mode"]),
            shuffle_partitions=int(data["shuffle_partitions"]),
            state_partitions=int(data["state_partitions"]),
            operators=tuple(StatefulOperator.from_json(o) for o in data["operators"]),
            steps=tuple(str(s) for s in data["steps"]),
            location=Location.from_json(data["location"]),
        )


@dataclass(frozen=True, slots=True)
class StateManifest:
    """What every query of a job keeps in state (see the module's docstring)."""

    version: int
    job: str
    file: str
    flowc_version: str
    engine: str
    queries: tuple[QueryState, ...]

    def query(self, name: str) -> QueryState | None:
        return next((q for q in self.queries if q.name == name), None)

    def only(self, names: Iterable[str]) -> StateManifest:
        """The manifest of some of its queries (the others left out)."""
        keep = set(names)
        return _replace_queries(self, tuple(q for q in self.queries if q.name in keep))

    def to_json(self) -> dict[str, Any]:
        return {
            "format": MANIFEST_FORMAT,
            "version": self.version,
            "job": self.job,
            "file": self.file,
            "flowc_version": self.flowc_version,
            "engine": self.engine,
            "queries": [q.to_json() for q in self.queries],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StateManifest:
        """Read a manifest; ValueError when it is not one this flowc can read."""
        if not isinstance(data, Mapping) or data.get("format") != MANIFEST_FORMAT:
            raise ValueError("not a flowc state manifest")
        version = data.get("version")
        if not isinstance(version, int) or not 1 <= version <= MANIFEST_VERSION:
            raise ValueError(f"state manifest version {version!r}: this flowc reads 1")
        try:
            return cls(
                version=version,
                job=str(data["job"]),
                file=str(data["file"]),
                flowc_version=str(data["flowc_version"]),
                engine=str(data["engine"]),
                queries=tuple(QueryState.from_json(q) for q in data["queries"]),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise ValueError(f"a damaged state manifest: {error!r}") from None


def _replace_queries(manifest: StateManifest, queries: tuple[QueryState, ...]) -> StateManifest:
    return StateManifest(
        manifest.version,
        manifest.job,
        manifest.file,
        manifest.flowc_version,
        manifest.engine,
        queries,
    )


def _columns(data: Iterable[Mapping[str, Any]]) -> tuple[StateColumn, ...]:
    return tuple(StateColumn.from_json(c) for c in data)


def optional_str(value: object) -> str | None:
    return None if value is None else str(value)
