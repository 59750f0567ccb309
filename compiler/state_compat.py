"""What a job keeps in state, and whether an edited job can go on from it.

A streaming job lives for months and is edited while its state lives on in a checkpoint.
Spark checks little when it restarts on one (``../shared/spec/spark-state.md``):
``count(*)`` → ``sum(v)`` of the same type reads the old counts as sums, grouping on
another column of the same name and type merges the old state in, reordered keys and a
new window size are taken silently, and a new ``spark.sql.shuffle.partitions`` is
ignored. Other edits fail only after Spark started, with a Java stack trace.

:func:`describe_state` says what each query keeps, as a :class:`StateManifest`: per query
(one per INSERT) its sources and sink, and per stateful operator, in Spark's stateful
operator order (Spark numbers them 0, 1, ... from the sink upstream and matches state to
operators by that number alone), its identity (uid, Flink's operator id, Spark's index),
kind, keys with their types, the state's values (aggregates, window, deduplicated
columns, join), the watermark, the parallelism and key groups, and where the step is in
the .flow file. Every column is described with its *lineage*: the expression over the
sources' columns it stands for, so that ``SELECT k2 AS k |> KEY BY k`` is not taken for
``KEY BY k``.

:func:`compare` classifies every stateful operator of every query of two manifests:

- ``unchanged``: nothing about it changed;
- ``compatible``: its state means the same (a filter or a projection added or removed
  around it, an output column renamed, a uid given): Spark and Flink keep the state;
- ``rescaled``: a new parallelism, max parallelism or number of shuffle partitions:
  Spark keeps the state in the first run's partitions (frozen in the checkpoint) and
  ignores the new value; Flink redistributes key groups (or refuses a new max
  parallelism);
- ``incompatible``: the state would be read wrongly or not at all: keys, aggregates,
  window, deduplicated columns or join changed, an operator removed, added or moved,
  a uid changed or removed; and, per query, sources or a file sink's folder changed.

Both are plain data: ``to_json()`` / ``from_json()`` round-trip, and the JSON is stable
(no time, no machine-dependent value). ``flowc run`` writes a query's manifest beside its
checkpoint and compares before the next run starts (:mod:`flowc.runtime.state_guard`);
``flowc diff`` compares two files. The JSON forms are documented in ``docs/state.md``.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeVar

from sqlglot import exp

from flowc import __version__, ast
from flowc.flink.keygroups import (
    compute_default_max_parallelism,
    compute_operator_index_for_key_group,
)
from flowc.functions import is_aggregate
from flowc.program import (
    ERRORS_SCHEMA,
    Column,
    FromSideOutput,
    FromSource,
    FromSourceErrors,
    FromView,
    Program,
    Schema,
    Step,
    Stream,
    view_of,
)
from flowc.spans import Span
from flowc.spark_sql import GENERATOR_ERRORS, UnsupportedOnSpark, interval_text
from flowc.stream_graph import StreamNode

if TYPE_CHECKING:
    from flowc.job import CompiledJob

#: The manifest's format version: a reader refuses a manifest of a later version.
MANIFEST_VERSION = 1
MANIFEST_FORMAT = "flowc-state-manifest"
COMPARISON_FORMAT = "flowc-state-comparison"

#: Diagnostic codes of the findings (the restart guard adds E0822).
INCOMPATIBLE_CODE = "E0820"
RESCALED_CODE = "E0821"

#: Lineage text longer than this is cut (with a digest, so it still compares exactly).
_MAX_LINEAGE = 400


class Verdict(StrEnum):
    """What an edit does to one stateful operator's state (worst last)."""

    UNCHANGED = "unchanged"
    COMPATIBLE = "compatible"
    RESCALED = "rescaled"
    INCOMPATIBLE = "incompatible"

    @property
    def rank(self) -> int:
        return _RANKS[self]


_RANKS = {
    Verdict.UNCHANGED: 0,
    Verdict.COMPATIBLE: 1,
    Verdict.RESCALED: 2,
    Verdict.INCOMPATIBLE: 3,
}


# ---------------------------------------------------------------- the manifest


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
            _optional(data.get("path")),
            _optional(data.get("format")),
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
            _optional(data.get("path")),
            _optional(data.get("format")),
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


def _optional(value: object) -> str | None:
    return None if value is None else str(value)


# ---------------------------------------------------------------- describe_state


def describe_state(job: CompiledJob) -> StateManifest:
    """The state every query of ``job`` keeps, operator by operator in Spark's order."""
    return _Describer(job).manifest()


#: A column's lineage within a stream: (qualifier, name) → lineage text.
_Env = list[tuple[str | None, str, str]]


@dataclass(slots=True)
class _StepInfo:
    step: Step
    #: The columns reaching the step, each with its lineage.
    env: _Env
    schema: Schema
    #: The right side's columns of a JOIN.
    right_env: _Env = field(default_factory=list)
    right_schema: Schema = ()


class _Describer:
    def __init__(self, job: CompiledJob) -> None:
        self.job = job
        self.program: Program = job.program
        self.plan = job.spark_plan
        self.graph = job.stream_graph
        self.lines = job.source.split("\n")
        #: Each view's env after each of its steps (index -1: its origin's).
        self.view_envs: dict[str, list[_Env]] = {}
        #: Every stateful step by StreamGraph node id.
        self.stateful: dict[int, _StepInfo] = {}
        self.vertex_of: dict[int, str] = {}
        for vertex in job.job_graph.vertices.values():
            for operator in vertex.operators:
                self.vertex_of[operator.node_id] = vertex.id

    def manifest(self) -> StateManifest:
        for view in self.program.views:
            if view.name not in self.view_envs:
                self._view(view.name)
        queries = []
        for insert, sink_node in zip(self.program.inserts, self.plan.sink_nodes, strict=True):
            steps: list[str] = []
            self._texts(insert.stream, steps, set())
            self._steps(insert.stream, self._origin_env(insert.stream)[0])
            queries.append(self._query(insert.sink, sink_node, insert.span, tuple(steps)))
        return StateManifest(
            version=MANIFEST_VERSION,
            job=self.program.settings.job_name,
            file=self.job.file,
            flowc_version=__version__,
            engine=self.plan.engine,
            queries=tuple(queries),
        )

    # ------------------------------------------------------------ lineage

    def _origin_env(self, stream: Stream) -> tuple[_Env, Schema]:
        origin = stream.origin
        if isinstance(origin, FromSource):
            schema = self.program.source(origin.name).schema
            return [(origin.name, c.name, f"{origin.name}.{c.name}") for c in schema], schema
        if isinstance(origin, FromSourceErrors):
            return [
                (origin.source, c.name, f"{origin.source}.errors.{c.name}") for c in ERRORS_SCHEMA
            ], ERRORS_SCHEMA
        if isinstance(origin, FromView):
            envs = self._view(origin.name)
            view = self.program.view(origin.name)
            return _requalified(envs[-1], origin.name), view.stream.schema
        assert isinstance(origin, FromSideOutput)
        envs = self._view(origin.view)
        view = self.program.view(origin.view)
        output = next(o for o in view.side_outputs if o.name == origin.output)
        return _requalified(envs[output.step_index + 1], origin.view), output.schema

    def _view(self, name: str) -> list[_Env]:
        found = self.view_envs.get(name)
        if found is not None:
            return found
        view = self.program.view(name)
        env, _ = self._origin_env(view.stream)
        envs = [env]
        self.view_envs[name] = envs  # a view cannot read itself (E0105)
        self._steps(view.stream, env, envs)
        return envs

    def _steps(self, stream: Stream, env: _Env, envs: list[_Env] | None = None) -> _Env:
        """Run the lineage through a stream's steps; note every stateful step."""
        _, schema = self._origin_env(stream)
        for step in stream.steps:
            node = self.plan.step_nodes.get(id(step))
            if node is not None and node in self.plan.stateful:
                info = _StepInfo(step, env, schema)
                if step.kind == "join":
                    (right,) = step.inputs
                    right_env, right_schema = self._origin_env(right)
                    info.right_env, info.right_schema = right_env, right_schema
                self.stateful[node] = info
            env = self._step(step, env)
            schema = step.schema
            if envs is not None:
                envs.append(env)
        return env

    def _step(self, step: Step, env: _Env) -> _Env:
        kind = step.kind
        node = step.node
        names = [c.name for c in step.schema]
        if kind == "select":
            assert isinstance(node, ast.Select)
            from flowc.spark_sql import UnsupportedOnSpark, select_columns

            try:
                items = select_columns(node.items, names)
            except UnsupportedOnSpark:  # several stars: each column by its name
                items = [(None, name) for name in names]
            out: _Env = []
            for item, name in items:
                out.append(
                    (
                        None,
                        name,
                        _lookup(env, None, name) if item is None else _lineage(item.expr, env),
                    )
                )
            return out
        if kind == "extend":
            assert isinstance(node, ast.Extend)
            added = names[len(names) - len(node.items) :]
            return [
                *env,
                *(
                    (None, name, _lineage(item.expr, env))
                    for item, name in zip(node.items, added, strict=True)
                ),
            ]
        if kind == "drop":
            assert isinstance(node, ast.Drop)
            dropped = {c.value for c in node.columns}
            return [entry for entry in env if entry[1] not in dropped]
        if kind == "rename":
            assert isinstance(node, ast.Rename)
            renamed = {i.old.value: i.new.value for i in node.items}
            return [(q, renamed.get(n, n), lineage) for q, n, lineage in env]
        if kind == "explode":
            assert isinstance(node, ast.Explode)
            alias = node.alias.value if node.alias is not None else names[-1]
            return [*env, (None, alias, f"explode({_lineage(node.expr, env)})")]
        if kind in ("aggregate", "window_aggregate"):
            assert isinstance(node, ast.Aggregate)
            keys = [(None, k, _lookup(env, None, k)) for k in step.keys]
            by = ", ".join(lineage for _, _, lineage in keys)
            out = list(keys)
            if step.window is not None:
                window = self._window(step.window, env)
                text = f"{window.kind}({window.time.lineage}, {window.size}"
                text += f", {window.slide})" if window.slide else ")"
                out += [
                    (None, "window_start", f"{text}.start"),
                    (None, "window_end", f"{text}.end"),
                ]
            values = names[len(out) :]
            for item, name in zip(node.items, values, strict=True):
                out.append((None, name, _cut(f"{_lineage(item.expr, env)} BY ({by})")))
            return out
        if kind == "join":
            (right,) = step.inputs
            right_env, _ = self._origin_env(right)
            return [*env, *right_env]
        if kind == "union":
            others = [self._origin_env(s)[0] for s in step.inputs]
            out = []
            for index, (_, name, lineage) in enumerate(env):
                found = [lineage] + [o[index][2] for o in others if index < len(o)]
                unique = list(dict.fromkeys(found))
                out.append(
                    (None, name, unique[0] if len(unique) == 1 else f"union({', '.join(unique)})")
                )
            return out
        return env  # where, key_by, partitions, deduplicate, route: same columns

    def _window(self, window: ast.Window, env: _Env) -> WindowState:
        time_name = window.args[0].tree.name
        sizes = [_interval(a) for a in window.args[1:]]
        return WindowState(
            kind=window.kind,
            time=StateColumn(time_name, "TIMESTAMP", _lookup(env, None, time_name)),
            size=sizes[0],
            slide=sizes[1] if len(sizes) > 1 else None,
        )

    def _texts(self, stream: Stream, steps: list[str], seen: set[str]) -> None:
        """The steps a query runs as written, in pipeline order (views it reads first)."""
        streams = [stream, *(other for step in stream.steps for other in step.inputs)]
        for each in streams:
            view = view_of(each.origin)
            if view is not None and view not in seen:
                seen.add(view)
                self._texts(self.program.view(view).stream, steps, seen)
        steps.extend(self._text(step.span) for step in stream.steps)

    # ------------------------------------------------------------ the query

    def _query(self, name: str, sink_node: int, span: Span, steps: tuple[str, ...]) -> QueryState:
        query = self.plan.query(name)
        sink_def = self.program.sink(query.sink)
        sink_options = dict(sink_def.options)
        sources = []
        upstream = self._upstream(sink_node)
        for source_name, source_node in self.plan.source_nodes.items():
            if source_node not in upstream:
                continue
            source = self.program.source(source_name)
            options = dict(source.options)
            where = options.get("path", options.get("topic"))
            sources.append(
                SourceRead(
                    source.name,
                    source.connector,
                    None if where is None else str(where),
                    _optional(options.get("format")),
                )
            )
        operators = [
            self._operator(index, node) for index, node in enumerate(self._spark_order(sink_node))
        ]
        where = sink_options.get("path", sink_options.get("topic"))
        return QueryState(
            name=name,
            checkpoint=query.checkpoint,
            sink=SinkWrite(
                sink_def.name,
                sink_def.connector,
                None if where is None else str(where),
                _optional(sink_options.get("format")),
                sink_def.mode,
                self._location(sink_def.span),
            ),
            sources=tuple(sorted(sources, key=lambda s: s.name)),
            output_mode=query.output_mode,
            shuffle_partitions=self.plan.shuffle_partitions,
            state_partitions=self.plan.shuffle_partitions,
            operators=tuple(operators),
            steps=steps,
            location=self._location(span),
        )

    def _spark_order(self, sink_node: int) -> list[int]:
        """The query's stateful nodes as Spark numbers them: pre-order from the sink (the
        physical plan is walked top-down), a join's left input before its right; a node
        read twice (a view in a UNION ALL with itself) is two operators in Spark."""
        order: list[int] = []
        stack = [sink_node]
        nodes = self.graph.nodes
        while stack:
            ident = stack.pop()
            if ident in self.plan.stateful:
                order.append(ident)
            edges = sorted(nodes[ident].in_edges, key=lambda e: e.type_number)
            stack.extend(e.source_id for e in reversed(edges))
        return order

    def _operator(self, index: int, node_id: int) -> StatefulOperator:
        node = self.graph.nodes[node_id]
        info = self.stateful.get(node_id)
        assert info is not None, f"stateful node {node_id} has no step"
        step = info.step
        env = info.env
        keys = tuple(_state_column(k, info.schema, env) for k in step.keys)
        aggregates: tuple[AggregateState, ...] = ()
        window = None
        within = None
        join = None
        kind = {"deduplicate": "deduplicate", "join": "join"}.get(step.kind, "")
        if step.kind in ("aggregate", "window_aggregate"):
            node_ast = step.node
            assert isinstance(node_ast, ast.Aggregate)
            if step.window is not None:
                window = self._window(step.window, env)
                kind = "session_window" if window.kind == "SESSION" else "window_aggregate"
            else:
                kind = "keyed_aggregate" if step.keys else "global_aggregate"
            width = len(step.keys) + (2 if step.window is not None else 0)
            aggregates = tuple(
                _aggregate(item, column, env)
                for item, column in zip(node_ast.items, step.schema[width:], strict=True)
            )
            keys = tuple(
                StateColumn(c.name, c.type, _lookup(env, None, c.name))
                for c in step.schema[: len(step.keys)]
            )
        elif step.kind == "deduplicate":
            node_ast = step.node
            assert isinstance(node_ast, ast.Deduplicate)
            within = None if node_ast.within is None else _one_line(node_ast.within.text)
        elif step.kind == "join":
            join = self._join(info)
        max_set = node.max_parallelism is not None
        max_parallelism = (
            node.max_parallelism
            if node.max_parallelism is not None
            else compute_default_max_parallelism(node.parallelism)
        )
        return StatefulOperator(
            index=index,
            name=node.name,
            kind=kind,
            uid=node.uid,
            operator_id=self.graph.operator_id(node_id),
            vertex_id=self.vertex_of.get(node_id),
            node_id=node_id,
            keys=keys,
            keys_location=self._keys_location(node) if step.kind != "deduplicate" else None,
            aggregates=aggregates,
            window=window,
            within=within,
            join=join,
            watermarks=self._watermarks(node_id),
            parallelism=node.parallelism,
            max_parallelism=max_parallelism,
            max_parallelism_set=max_set,
            location=self._location(step.span),
        )

    def _keys_location(self, node: StreamNode) -> Location | None:
        """The KEY BY that gives an AGGREGATE its keys (its HASH edge's span)."""
        for edge in node.in_edges:
            if edge.partitioner == "HASH" and edge.keys and edge.span != node.span:
                return self._location(edge.span)
        return None

    def _join(self, info: _StepInfo) -> JoinState:
        step = info.step
        node = step.node
        assert isinstance(node, ast.Join) and node.condition is not None
        (right,) = step.inputs
        assert right.keys is not None
        left_keys = tuple(_state_column(k, info.schema, info.env) for k in step.keys)
        right_keys = tuple(_state_column(k, info.right_schema, info.right_env) for k in right.keys)
        terms = (
            list(node.condition.tree.flatten())
            if isinstance(node.condition.tree, exp.And)
            else [node.condition.tree]
        )
        equalities = {(a.name, b.name) for a, b in zip(left_keys, right_keys, strict=True)}
        rest = []
        for term in terms:
            if (
                isinstance(term, exp.EQ)
                and isinstance(term.left, exp.Column)
                and isinstance(term.right, exp.Column)
            ):
                pair = (term.left.name, term.right.name)
                if pair in equalities or pair[::-1] in equalities:
                    continue
            rest.append(_sql(term))
        return JoinState(
            type=node.kind,
            right=node.right.text,
            left_keys=left_keys,
            right_keys=right_keys,
            condition=_sql(node.condition.tree),
            bound=" AND ".join(rest) or None,
            left_row=tuple(
                StateColumn(c.name, c.type, lineage)
                for c, (_, _, lineage) in zip(info.schema, info.env, strict=False)
            ),
            right_row=tuple(
                StateColumn(c.name, c.type, lineage)
                for c, (_, _, lineage) in zip(info.right_schema, info.right_env, strict=False)
            ),
        )

    def _upstream(self, node_id: int) -> set[int]:
        """The node and every node it reads from."""
        seen: set[int] = set()
        stack = [node_id]
        while stack:
            ident = stack.pop()
            if ident in seen:
                continue
            seen.add(ident)
            stack.extend(e.source_id for e in self.graph.nodes[ident].in_edges)
        return seen

    def _watermarks(self, node_id: int) -> tuple[WatermarkState, ...]:
        """The watermarks of the sources upstream of the operator."""
        from flowc.spark_sql import UnsupportedOnSpark, watermark_delay

        sources = [i for i in self._upstream(node_id) if self.graph.nodes[i].kind == "source"]
        by_node = {v: k for k, v in self.plan.source_nodes.items()}
        out = []
        for ident in sorted(sources):
            name = by_node.get(ident)
            if name is None:
                continue
            source = self.program.source(name)
            if source.watermark is None:
                continue
            try:
                column, delay = watermark_delay(source)
            except UnsupportedOnSpark:
                column, delay = source.watermark.column, _one_line(source.watermark.expr.text)
            out.append(WatermarkState(source.name, column, delay))
        return tuple(out)

    def _location(self, span: Span) -> Location:
        return Location(
            span.file, span.line, span.column, span.end_line, span.end_column, self._text(span)
        )

    def _text(self, span: Span) -> str:
        """The source text of a span, on one line."""
        lines = self.lines
        if not 1 <= span.line <= len(lines):
            return ""
        if span.end_line == span.line:
            text = lines[span.line - 1][span.column - 1 : span.end_column - 1]
        else:
            parts = [lines[span.line - 1][span.column - 1 :]]
            parts += lines[span.line : span.end_line - 1]
            if span.end_line <= len(lines):
                parts.append(lines[span.end_line - 1][: span.end_column - 1])
            text = "\n".join(parts)
        return _one_line(_without_comments(text))


def _without_comments(text: str) -> str:
    return "\n".join(
        line.split("--", 1)[0] if "--" in line and "'" not in line else line
        for line in text.split("\n")
    )


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _requalified(env: _Env, name: str) -> _Env:
    """A view's columns, as its readers qualify them: by the view's name."""
    return [(name, column, lineage) for _, column, lineage in env]


def _lookup(env: _Env, qualifier: str | None, name: str) -> str:
    """A column's lineage; the last definition wins (EXTEND after SELECT)."""
    found = None
    for q, n, lineage in env:
        if n == name and (qualifier is None or q == qualifier):
            found = lineage
    if found is None and qualifier is not None:
        return _lookup(env, None, name)
    return found if found is not None else f"?{name}"


def _lineage(expr: ast.SqlExpr, env: _Env) -> str:
    """The expression with each column replaced by its lineage."""

    def substitute(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
            return exp.Var(this=_lookup(env, node.table or None, node.name))
        return node

    tree = expr.tree.copy().transform(substitute)
    return _cut(_sql(tree))


def _sql(tree: exp.Expr) -> str:
    try:
        return str(tree.sql(dialect="spark"))
    except GENERATOR_ERRORS:  # a call sqlglot cannot write: the tree's text
        return _one_line(str(tree))


def _cut(text: str) -> str:
    if len(text) <= _MAX_LINEAGE:
        return text
    import hashlib

    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{text[:_MAX_LINEAGE]}...#{digest}"


def _interval(expr: ast.SqlExpr) -> str:
    try:
        return str(interval_text(expr))
    except UnsupportedOnSpark:
        return _one_line(expr.text)


def _state_column(name: str, schema: Schema, env: _Env) -> StateColumn:
    column = next((c for c in schema if c.name == name), None)
    return StateColumn(
        name, column.type if column is not None else "UNKNOWN", _lookup(env, None, name)
    )


def _aggregate(item: ast.SelectItem, column: Column, env: _Env) -> AggregateState:
    """One AGGREGATE item: its function(s) and their arguments (``*`` for count(*))."""
    tree = item.expr.tree
    calls = [n for n in tree.walk() if is_aggregate(n)]
    names = []
    for call in calls:
        name = (
            call.sql_name().lower()
            if isinstance(call, exp.Func) and not isinstance(call, exp.Anonymous)
            else str(call.name).lower()
        )
        if call.args.get("distinct") is not None or isinstance(call.this, exp.Distinct):
            name += " distinct"
        names.append(name)
    arguments: tuple[str, ...]
    if len(calls) != 1:
        arguments = tuple(_sql(call) for call in calls)
    elif isinstance(calls[0], exp.Count) and isinstance(calls[0].this, exp.Star):
        arguments = ("*",)
    else:
        call = calls[0]
        found = ([call.this] if isinstance(call.this, exp.Expr) else []) + list(call.expressions)
        arguments = tuple(_sql(a) for a in found)
    function = ", ".join(names) or _sql(tree)
    return AggregateState(
        name=column.name,
        sql=_one_line(item.expr.text),
        function=function,
        arguments=arguments,
        type=column.type,
        lineage=_lineage(item.expr, env),
    )


# ---------------------------------------------------------------- compare


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing an edit changed about an operator or a query.

    ``aspect`` names what changed: ``keys``, ``aggregates``, ``window``, ``within``,
    ``join``, ``kind``, ``uid``, ``operator_id``, ``removed``, ``added``, ``order``,
    ``parallelism``, ``max_parallelism``, ``shuffle_partitions``, ``watermark``,
    ``steps``, ``names``, ``sources``, ``sink``, ``query``.
    """

    verdict: Verdict
    aspect: str
    message: str
    help: str | None
    #: The old definition (text and span) and where it is now.
    old: Location | None
    new: Location | None

    @property
    def code(self) -> str | None:
        if self.verdict is Verdict.INCOMPATIBLE:
            return INCOMPATIBLE_CODE
        if self.verdict is Verdict.RESCALED:
            return RESCALED_CODE
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict.value,
            "code": self.code,
            "aspect": self.aspect,
            "message": self.message,
            "help": self.help,
            "old": None if self.old is None else self.old.to_json(),
            "new": None if self.new is None else self.new.to_json(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Finding:
        return cls(
            Verdict(data["verdict"]),
            str(data["aspect"]),
            str(data["message"]),
            _optional(data.get("help")),
            None if data.get("old") is None else Location.from_json(data["old"]),
            None if data.get("new") is None else Location.from_json(data["new"]),
        )


@dataclass(frozen=True, slots=True)
class OperatorComparison:
    """One stateful operator, old and new (either None when added or removed)."""

    query: str
    old: StatefulOperator | None
    new: StatefulOperator | None
    verdict: Verdict
    findings: tuple[Finding, ...]

    @property
    def name(self) -> str:
        operator = self.new if self.new is not None else self.old
        assert operator is not None
        return operator.name

    def to_json(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "name": self.name,
            "old_index": None if self.old is None else self.old.index,
            "new_index": None if self.new is None else self.new.index,
            "old": None if self.old is None else self.old.location.to_json(),
            "new": None if self.new is None else self.new.location.to_json(),
            "verdict": self.verdict.value,
            "findings": [f.to_json() for f in self.findings],
        }


@dataclass(frozen=True, slots=True)
class QueryComparison:
    """One query: its own findings (sources, sink, added, removed) and its operators'."""

    name: str
    old: QueryState | None
    new: QueryState | None
    findings: tuple[Finding, ...]
    operators: tuple[OperatorComparison, ...]

    @property
    def verdict(self) -> Verdict:
        verdicts = [f.verdict for f in self.findings] + [o.verdict for o in self.operators]
        return max(verdicts, key=lambda v: v.rank, default=Verdict.UNCHANGED)

    def all_findings(self) -> Iterator[Finding]:
        yield from self.findings
        for operator in self.operators:
            yield from operator.findings

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "verdict": self.verdict.value,
            "findings": [f.to_json() for f in self.findings],
            "operators": [o.to_json() for o in self.operators],
        }


@dataclass(frozen=True, slots=True)
class StateComparison:
    """Every query and stateful operator of two manifests, classified."""

    queries: tuple[QueryComparison, ...]

    @property
    def ok(self) -> bool:
        """False when any edit is incompatible with the old state."""
        return all(q.verdict is not Verdict.INCOMPATIBLE for q in self.queries)

    @property
    def verdict(self) -> Verdict:
        return max(
            (q.verdict for q in self.queries), key=lambda v: v.rank, default=Verdict.UNCHANGED
        )

    def query(self, name: str) -> QueryComparison | None:
        return next((q for q in self.queries if q.name == name), None)

    def findings(self) -> Iterator[tuple[str, Finding]]:
        """Every finding with its query's name, queries in order."""
        for query in self.queries:
            for finding in query.all_findings():
                yield query.name, finding

    def to_json(self) -> dict[str, Any]:
        return {
            "format": COMPARISON_FORMAT,
            "version": MANIFEST_VERSION,
            "ok": self.ok,
            "verdict": self.verdict.value,
            "queries": [q.to_json() for q in self.queries],
        }


def compare(old: StateManifest, new: StateManifest) -> StateComparison:
    """Classify every stateful operator of every query (see the module's docstring)."""
    queries = []
    new_names = {q.name for q in new.queries}
    for query in new.queries:
        queries.append(_compare_query(old.query(query.name), query))
    for query in old.queries:
        if query.name not in new_names:
            queries.append(_compare_query(query, None))
    return StateComparison(tuple(queries))


_HELP_WAYS_OUT = (
    "revert the change; or keep the old state and start this query over with a new "
    "--checkpoint-dir, or with flowc run --reset-state {query} (moves its old checkpoint "
    "aside, never deletes it)"
)


def ways_out(query: str) -> str:
    """The help line of an incompatible edit: the ways out."""
    return _HELP_WAYS_OUT.format(query=query)


def _compare_query(old: QueryState | None, new: QueryState | None) -> QueryComparison:
    if new is None:
        assert old is not None
        finding = Finding(
            Verdict.INCOMPATIBLE,
            "query",
            f"query '{old.name}' was removed: the state of its "
            f"{_count(len(old.operators), 'stateful operator')} is left behind",
            "its checkpoint stays where it is; delete it once the query is gone for good",
            old.location,
            None,
        )
        operators = tuple(
            OperatorComparison(old.name, o, None, Verdict.INCOMPATIBLE, ()) for o in old.operators
        )
        return QueryComparison(old.name, old, None, (finding,), operators)
    if old is None:
        operators = tuple(
            OperatorComparison(new.name, None, o, Verdict.UNCHANGED, ()) for o in new.operators
        )
        return QueryComparison(new.name, None, new, (), operators)
    findings = list(_query_findings(old, new))
    operators = _compare_operators(old, new)
    return QueryComparison(new.name, old, new, tuple(findings), operators)


def _query_findings(old: QueryState, new: QueryState) -> Iterator[Finding]:
    name = new.name
    renames = _source_renames(old, new)
    old_where = Counter(s.where for s in old.sources)
    new_where = Counter(s.where for s in new.sources)
    if old_where != new_where or (
        not renames and {s.name for s in old.sources} != {s.name for s in new.sources}
    ):
        old_names = {s.name for s in new.sources} | set(renames)
        gone = [s.shown() for s in old.sources if s.name not in old_names]
        added = [s.shown() for s in new.sources if s.name not in {*old_names, *renames.values()}]
        gone = gone or [s.shown() for s in old.sources if new_where[s.where] < old_where[s.where]]
        added = added or [s.shown() for s in new.sources if new_where[s.where] > old_where[s.where]]
        parts = []
        if gone:
            parts.append(f"no longer reads {', '.join(gone)}")
        if added:
            parts.append(f"now reads {', '.join(added)}")
        yield Finding(
            Verdict.INCOMPATIBLE,
            "sources",
            f"query '{name}' {' and '.join(parts) or 'reads other sources'}: Spark's "
            "checkpoint records its sources' offsets by position and cannot go on with "
            "other sources",
            ways_out(name),
            old.location,
            new.location,
        )
    elif renames:
        shown = ", ".join(f"'{a}' → '{b}'" for a, b in renames.items())
        yield Finding(
            Verdict.COMPATIBLE,
            "sources",
            f"query '{name}': source renamed ({shown}), same data",
            None,
            old.location,
            new.location,
        )
    yield from _sink_findings(old, new)
    if new.operators and old.operators and new.shuffle_partitions != old.shuffle_partitions:
        explained = {o.parallelism for o in old.operators} != {o.parallelism for o in new.operators}
        if not explained:
            yield Finding(
                Verdict.RESCALED,
                "shuffle_partitions",
                f"query '{name}': spark.sql.shuffle.partitions is now "
                f"{new.shuffle_partitions}, but Spark keeps this query's state in the "
                f"{old.state_partitions} partitions of its first run (frozen in the "
                f"checkpoint) and ignores the new value",
                "to spread the state over new partitions, start the query over (a new "
                f"--checkpoint-dir, or flowc run --reset-state {name})",
                old.location,
                new.location,
            )


def _sink_findings(old: QueryState, new: QueryState) -> Iterator[Finding]:
    a, b = old.sink, new.sink
    name = new.name
    if (a.connector == "files") != (b.connector == "files") or (
        a.connector == "files" and (a.path, a.format) != (b.path, b.format)
    ):
        before = f"{a.connector}" + (f" {a.path}" if a.path else "")
        after = f"{b.connector}" + (f" {b.path}" if b.path else "")
        yield Finding(
            Verdict.INCOMPATIBLE,
            "sink",
            f"query '{name}' now writes {after}, not {before}: a file sink's commit log and "
            "the checkpoint's batch ids go together, and Spark does not allow a file sink's "
            "folder to change",
            ways_out(name),
            a.location,
            b.location,
        )
    elif (a.connector, a.path, a.format, a.mode, a.name) != (
        b.connector,
        b.path,
        b.format,
        b.mode,
        b.name,
    ):
        yield Finding(
            Verdict.COMPATIBLE,
            "sink",
            f"query '{name}': its sink changed ({_sink_shown(a)} → {_sink_shown(b)}); the "
            "state is kept",
            None,
            a.location,
            b.location,
        )


def _sink_shown(sink: SinkWrite) -> str:
    where = f" {sink.path}" if sink.path else ""
    return f"{sink.connector}{where}, mode {sink.mode}"


def _source_renames(old: QueryState, new: QueryState) -> dict[str, str]:
    """Old source name → new, for sources that read the same data under another name
    (only where that data is read by one source on each side)."""
    old_where = Counter(s.where for s in old.sources)
    new_where = Counter(s.where for s in new.sources)
    by_where = {s.where: s.name for s in new.sources if new_where[s.where] == 1}
    return {
        s.name: by_where[s.where]
        for s in old.sources
        if old_where[s.where] == 1 and s.where in by_where and by_where[s.where] != s.name
    }


def _signature(operator: StatefulOperator) -> str:
    """What aligns operators between two versions: the uid, else kind and keys' names."""
    if operator.uid is not None:
        return f"uid:{operator.uid}"
    return f"{operator.kind}:{','.join(k.name for k in operator.keys)}"


def _compare_operators(old: QueryState, new: QueryState) -> tuple[OperatorComparison, ...]:
    """Spark matches state to operators by index; the alignment names what moved."""
    renames = _source_renames(old, new)
    out: list[OperatorComparison] = []
    a = [_signature(o) for o in old.operators]
    b = [_signature(o) for o in new.operators]
    same_count = len(a) == len(b)
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal" or (tag == "replace" and same_count and i2 - i1 == j2 - j1):
            for i, j in zip(range(i1, i2), range(j1, j2), strict=True):
                out.append(_compare_operator(old, new, old.operators[i], new.operators[j], renames))
            continue
        for i in range(i1, i2):
            operator = old.operators[i]
            out.append(
                OperatorComparison(
                    old.name,
                    operator,
                    None,
                    Verdict.INCOMPATIBLE,
                    (_removed(new, operator),),
                )
            )
        for j in range(j1, j2):
            operator = new.operators[j]
            out.append(
                OperatorComparison(
                    new.name, None, operator, Verdict.INCOMPATIBLE, (_added(old, new, operator),)
                )
            )
    # Operators kept but at another index: Spark would give them another's state.
    moved = [
        o for o in out if o.old is not None and o.new is not None and o.old.index != o.new.index
    ]
    if moved:
        result = []
        for o in out:
            if o in moved:
                assert o.old is not None and o.new is not None
                finding = Finding(
                    Verdict.INCOMPATIBLE,
                    "order",
                    f"{o.new.name} is now Spark's stateful operator {o.new.index}, not "
                    f"{o.old.index}: Spark finds state by position, so it would read the "
                    "state of another operator",
                    ways_out(new.name),
                    o.old.location,
                    o.new.location,
                )
                o = OperatorComparison(
                    o.query, o.old, o.new, Verdict.INCOMPATIBLE, (*o.findings, finding)
                )
            result.append(o)
        out = result
    return tuple(out)


def _removed(new: QueryState, operator: StatefulOperator) -> Finding:
    return Finding(
        Verdict.INCOMPATIBLE,
        "removed",
        f"the stateful step {operator.name} was removed from query '{new.name}' "
        f"(was: {operator.location.text} (line {operator.location.line})): Spark finds state "
        "by the operator's position and would not start, or would give its state to another",
        ways_out(new.name),
        operator.location,
        new.location,
    )


def _added(old: QueryState, new: QueryState, operator: StatefulOperator) -> Finding:
    # Spark numbers from the sink upstream: index - 1 runs after it, index + 1 before it.
    after = [o for o in new.operators if o.index == operator.index - 1]
    before = [o for o in new.operators if o.index == operator.index + 1]
    where = (
        f" before {after[0].name} (line {after[0].location.line})"
        if after
        else f" after {before[0].name} (line {before[0].location.line})"
        if before
        else ""
    )
    return Finding(
        Verdict.INCOMPATIBLE,
        "added",
        f"a stateful step was added{where} to query '{new.name}': "
        f"{operator.location.text}; Spark finds state by position, and the checkpoint holds "
        f"the state of {_count(len(old.operators), 'stateful operator')}",
        ways_out(new.name),
        None,
        operator.location,
    )


def _compare_operator(
    old_query: QueryState,
    new_query: QueryState,
    old: StatefulOperator,
    new: StatefulOperator,
    renames: Mapping[str, str],
) -> OperatorComparison:
    findings: list[Finding] = []
    query = new_query.name
    help_ = ways_out(query)

    def incompatible(aspect: str, message: str) -> None:
        before, after = old.location, new.location
        if aspect == "keys" and old.keys_location is not None and new.keys_location is not None:
            before, after = old.keys_location, new.keys_location
        shown = f"was: {before.text} (line {before.line})"
        findings.append(
            Finding(Verdict.INCOMPATIBLE, aspect, f"{message}; {shown}", help_, before, after)
        )

    def note(verdict: Verdict, aspect: str, message: str, help: str | None = None) -> None:
        findings.append(Finding(verdict, aspect, message, help, old.location, new.location))

    def lineage(text: str) -> str:
        for a, b in renames.items():
            text = re.sub(rf"(?<![\w.]){re.escape(a)}\.", _literally(f"{b}."), text)
        return text

    if old.kind != new.kind:
        incompatible(
            "kind",
            f"{new.name} is a {_kind_name(new.kind)} where the state holds a "
            f"{_kind_name(old.kind)}: Spark would read one operator's state as another's",
        )
    else:
        _compare_keys(old, new, lineage, incompatible, note)
        _compare_values(old, new, lineage, incompatible, note)
    _compare_identity(old, new, incompatible, note)
    _compare_scale(old_query, new_query, old, new, note)
    if old.watermarks != new.watermarks:
        shown_old = ", ".join(f"{w.column} - {w.delay}" for w in old.watermarks) or "none"
        shown_new = ", ".join(f"{w.column} - {w.delay}" for w in new.watermarks) or "none"
        note(
            Verdict.COMPATIBLE,
            "watermark",
            f"the watermark reaching {new.name} changed ({shown_old} → {shown_new}): the state "
            "is kept; results and state are dropped at the new watermark from now on",
        )
    if not findings and old_query.steps != new_query.steps:
        changes = _step_changes(old_query.steps, new_query.steps)
        note(
            Verdict.COMPATIBLE,
            "steps",
            f"steps around {new.name} changed ({changes}); its state means the same and is "
            "kept, and the change applies to rows from now on",
        )
    verdict = max((f.verdict for f in findings), key=lambda v: v.rank, default=Verdict.UNCHANGED)
    return OperatorComparison(query, old, new, verdict, tuple(findings))


def _literally(text: str) -> Callable[[re.Match[str]], str]:
    """A replacement for re.sub that is ``text`` as it is (no escapes)."""
    return lambda _: text


def _kind_name(kind: str) -> str:
    return kind.replace("_", " ")


_T = TypeVar("_T")


def _compare_keys(
    old: StatefulOperator,
    new: StatefulOperator,
    lineage: Any,
    incompatible: Any,
    note: Any,
) -> None:
    what = "deduplicated columns" if old.kind == "deduplicate" else "keys"
    if old.kind == "join":
        return  # the join's keys are compared with the join
    problem = _columns_problem(old.keys, new.keys, lineage, what)
    if problem is not None:
        incompatible("keys", f"{new.name}: {problem}")
    elif [k.name for k in old.keys] != [k.name for k in new.keys]:
        note(
            Verdict.COMPATIBLE,
            "names",
            f"{new.name}: {what} renamed ({_names(old.keys)} → {_names(new.keys)}), same values",
        )


def _columns_problem(
    old: Sequence[StateColumn], new: Sequence[StateColumn], lineage: Any, what: str
) -> str | None:
    """Why state keyed on ``old`` cannot be read as keyed on ``new``, or None."""
    old_shown, new_shown = _shown_columns(old), _shown_columns(new)
    if len(old) != len(new):
        return f"the {what} are now ({new_shown}), were ({old_shown})"
    old_lineage = [lineage(c.lineage) for c in old]
    new_lineage = [c.lineage for c in new]
    if old_lineage != new_lineage and sorted(old_lineage) == sorted(new_lineage):
        return (
            f"the {what} are reordered: ({new_shown}), were ({old_shown}); Spark would pair "
            "each stored key with the wrong columns"
        )
    one = what.removesuffix("s")
    for a, b, la, lb in zip(old, new, old_lineage, new_lineage, strict=True):
        if a.type != b.type:
            return f"{one} '{b.name}' is {b.type}, was {a.type} ('{a.name}')"
        if la != lb:
            same = " of the same name and type" if a.name == b.name else " of the same type"
            return (
                f"{one} '{b.name}' is now {lb}, "
                f"was {la}: another column{same}, whose old state Spark would merge in"
            )
    return None


def _compare_values(
    old: StatefulOperator,
    new: StatefulOperator,
    lineage: Any,
    incompatible: Any,
    note: Any,
) -> None:
    if old.aggregates or new.aggregates:
        a, b = old.aggregates, new.aggregates
        if len(a) != len(b):
            incompatible(
                "aggregates",
                f"{new.name} now computes {_aggs(b)}, was {_aggs(a)}: the state holds one "
                "value per aggregate of the old list",
            )
        else:
            for x, y in zip(a, b, strict=True):
                if x.function != y.function or x.type != y.type:
                    same = (
                        " of the same type: Spark would go on from the old values as if they were "
                        f"{y.function}s"
                        if x.type == y.type
                        else ""
                    )
                    incompatible(
                        "aggregates",
                        f"{new.name}: '{y.name}' is now {y.sql} ({y.type}), was {x.sql} "
                        f"({x.type}){same}",
                    )
                    break
                if lineage(x.lineage) != y.lineage:
                    incompatible(
                        "aggregates",
                        f"{new.name}: '{y.name}' now aggregates {y.lineage}, was {x.lineage}: "
                        "the stored values were computed from another expression",
                    )
                    break
            else:
                if [x.name for x in a] != [y.name for y in b]:
                    note(
                        Verdict.COMPATIBLE,
                        "names",
                        f"{new.name}: aggregates renamed ({', '.join(x.name for x in a)} → "
                        f"{', '.join(y.name for y in b)}), same values",
                    )
    if old.window != new.window:
        wa, wb = old.window, new.window
        if wa is None or wb is None:
            incompatible("window", f"{new.name}: the window changed")
        elif (wa.kind, wa.size, wa.slide) != (wb.kind, wb.size, wb.slide):
            incompatible(
                "window",
                f"{new.name}: the window is now {wb.shown()}, was {wa.shown()}: the state holds "
                "the old windows, which Spark would go on filling and closing as new ones",
            )
        elif lineage(wa.time.lineage) != wb.time.lineage:
            incompatible(
                "window",
                f"{new.name}: the window's time column is now {wb.time.lineage}, was "
                f"{wa.time.lineage}",
            )
    if old.within != new.within:
        incompatible(
            "within",
            f"{new.name}: WITHIN is now {new.within or 'none'}, was {old.within or 'none'}",
        )
    if old.join is not None and new.join is not None:
        _compare_join(old.join, new.join, new.name, lineage, incompatible)


def _compare_join(a: JoinState, b: JoinState, name: str, lineage: Any, incompatible: Any) -> None:
    if a.type != b.type:
        incompatible(
            "join",
            f"{name} is now a {b.type} join, was {a.type}: the state keeps rows for the old "
            "join type (an outer join keeps unmatched rows until its bound passes)",
        )
        return
    for side, old_keys, new_keys in (
        ("left", a.left_keys, b.left_keys),
        ("right", a.right_keys, b.right_keys),
    ):
        problem = _columns_problem(old_keys, new_keys, lineage, f"{side} join keys")
        if problem is not None:
            incompatible("join", f"{name}: {problem}")
            return
    if a.bound != b.bound:
        incompatible(
            "join",
            f"{name}: the join's time bound is now {b.bound or 'none'}, was {a.bound or 'none'}: "
            "the state was kept and evicted for the old bound",
        )
        return
    for side, old_row, new_row in (
        ("left", a.left_row, b.left_row),
        ("right", a.right_row, b.right_row),
    ):
        if [(c.type, lineage(c.lineage)) for c in old_row] != [
            (c.type, c.lineage) for c in new_row
        ]:
            incompatible(
                "join",
                f"{name}: the {side} side's rows are now ({_shown_columns(new_row)}), were "
                f"({_shown_columns(old_row)}): the join keeps both sides' rows in state",
            )
            return


def _compare_identity(
    old: StatefulOperator, new: StatefulOperator, incompatible: Any, note: Any
) -> None:
    if old.uid is not None and new.uid != old.uid:
        now = f"'{new.uid}'" if new.uid is not None else "gone"
        incompatible(
            "uid",
            f"{new.name}: its uid is now {now}, was '{old.uid}': the uid names the operator's "
            "state (Flink maps state to operators by it and would not restore this one; Spark "
            "finds state by position only)",
        )
    elif old.uid is None and new.uid is not None:
        note(
            Verdict.COMPATIBLE,
            "uid",
            f"{new.name} was given uid '{new.uid}': Spark finds state by position and keeps it; "
            f"on Flink its operator id changes ({old.operator_id} → {new.operator_id}), so a "
            "Flink savepoint would need setUidHash",
        )
    elif old.uid is None and old.operator_id != new.operator_id:
        note(
            Verdict.COMPATIBLE,
            "operator_id",
            f"{new.name}: Flink's generated operator id changes ({old.operator_id} → "
            f"{new.operator_id}) because the steps before it changed; Spark keeps the state "
            "(on Flink, give it a uid)",
        )


def _compare_scale(
    old_query: QueryState,
    new_query: QueryState,
    old: StatefulOperator,
    new: StatefulOperator,
    note: Any,
) -> None:
    partitions = old_query.state_partitions
    restart = f"flowc run --reset-state {new_query.name}"
    if old.parallelism != new.parallelism and new_query.shuffle_partitions == partitions:
        note(
            Verdict.COMPATIBLE,
            "parallelism",
            f"{new.name}: parallelism {old.parallelism} → {new.parallelism}: back to the "
            f"{partitions} partitions Spark keeps the state in; "
            f"{_key_groups_moving(old, new)}",
        )
    elif old.parallelism != new.parallelism:
        flink = _key_groups_moving(old, new)
        note(
            Verdict.RESCALED,
            "parallelism",
            f"{new.name}: parallelism {old.parallelism} → {new.parallelism}: Spark keeps the "
            f"state in the {partitions} partitions of the first run (frozen in the checkpoint) "
            f"and runs this operator on {partitions}, not {new_query.shuffle_partitions}; {flink}",
            f"to run on {new_query.shuffle_partitions} partitions, start the query over (a new "
            f"--checkpoint-dir, or {restart})",
        )
    if old.max_parallelism != new.max_parallelism:
        note(
            Verdict.RESCALED,
            "max_parallelism",
            f"{new.name}: max parallelism {old.max_parallelism} → {new.max_parallelism}: Spark "
            f"ignores it (the state stays in {partitions} partitions); Flink would refuse to "
            f"restore this operator's keyed state ({old.key_groups} key groups, now "
            f"{new.key_groups})",
            "keep max_parallelism as it was to stay restorable on Flink",
        )


def _key_groups_moving(old: StatefulOperator, new: StatefulOperator) -> str:
    """On Flink, which key groups change subtask when only parallelism changes."""
    if old.max_parallelism != new.max_parallelism:
        return "on Flink the key groups change too (max parallelism changed)"
    m = new.max_parallelism
    moved = [
        g
        for g in range(m)
        if compute_operator_index_for_key_group(m, old.parallelism, g)
        != compute_operator_index_for_key_group(m, new.parallelism, g)
    ]
    ranges = _ranges(moved)
    shown = ", ".join(ranges[:4]) + (", ..." if len(ranges) > 4 else "")
    return f"on Flink {len(moved)} of its {m} key groups would move to another subtask" + (
        f" ({shown})" if moved else ""
    )


def _ranges(values: Sequence[int]) -> list[str]:
    out: list[str] = []
    start = previous = None
    for value in values:
        if start is None:
            start = previous = value
        elif previous is not None and value == previous + 1:
            previous = value
        else:
            out.append(f"{start}-{previous}" if start != previous else f"{start}")
            start = previous = value
    if start is not None:
        out.append(f"{start}-{previous}" if start != previous else f"{start}")
    return out


def _step_changes(old: Sequence[str], new: Sequence[str]) -> str:
    parts = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if tag in ("delete", "replace"):
            parts += [f"removed {s}" for s in old[i1:i2]]
        if tag in ("insert", "replace"):
            parts += [f"added {s}" for s in new[j1:j2]]
    text = "; ".join(parts)
    return text if len(text) <= 300 else text[:297] + "..."


def _names(columns: Sequence[StateColumn]) -> str:
    return ", ".join(c.name for c in columns)


def _shown_columns(columns: Sequence[StateColumn]) -> str:
    return ", ".join(c.shown() for c in columns)


def _aggs(aggregates: Sequence[AggregateState]) -> str:
    return ", ".join(a.sql for a in aggregates) or "nothing"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
