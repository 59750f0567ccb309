"""The state manifest: what each query of a job keeps in state, as plain data.

Every record here round-trips through ``to_json()`` / ``from_json()``; the JSON is stable
(no time, no machine-dependent value) and documented in ``docs/state.md``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from enum import StrEnum
from typing import Any

from flowc.fast_dataclass import dataclass
from flowc.json_records import JsonRecord, record_json
from flowc.spans import Span

#: The manifest's format version: a reader refuses a manifest of a later version.
#: 2: steps reading CURRENT_WATERMARK are listed among the operators (kind ``processor``),
#: as Spark numbers them; a version 1 manifest never lists them.
MANIFEST_VERSION = 2
#: The kind of an operator that is a processor keeping no state of Spark's kinds (a
#: WatermarkReader): listed because it takes a position among Spark's stateful operators.
PROCESSOR_KIND = "processor"
MANIFEST_FORMAT = "flowc-state-manifest"


# ---------------------------------------------------------------- the manifest


@dataclass(frozen=True, slots=True)
class Location(JsonRecord):
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


@dataclass(frozen=True, slots=True)
class StateColumn(JsonRecord):
    """A column the state is keyed on or holds: name, Spark SQL type, and lineage (the
    expression over source columns, ``source.column``, it stands for)."""

    name: str
    type: str
    lineage: str

    def shown(self) -> str:
        return f"{self.name} {self.type}"


@dataclass(frozen=True, slots=True)
class AggregateState(JsonRecord):
    """One aggregate of an AGGREGATE: its output column, SQL, function, arguments."""

    name: str
    sql: str
    function: str
    arguments: tuple[str, ...]
    type: str
    lineage: str


@dataclass(frozen=True, slots=True)
class WindowState(JsonRecord):
    """TUMBLE / HOP / SESSION: the time column and the sizes as Spark takes them."""

    read_first = ("slide",)

    kind: str
    time: StateColumn
    size: str
    slide: str | None = None

    def shown(self) -> str:
        sizes = self.size if self.slide is None else f"{self.size}, {self.slide}"
        return f"{self.kind}({self.time.name}, {sizes})"


@dataclass(frozen=True, slots=True)
class JoinState(JsonRecord):
    """A stream-stream join: both sides' rows are its state."""

    read_first = ("bound",)

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


@dataclass(frozen=True, slots=True)
class WatermarkState(JsonRecord):
    """A source's watermark that reaches the operator: column and delay."""

    source: str
    column: str
    delay: str


class ParameterRule(StrEnum):
    """How a change of a processor's parameter bears on the state it kept."""

    #: Any change gives the stored state another meaning: refused.
    SAME = "same"
    #: The state covers every value up to the old ``amount``: a value no greater reads it
    #: as it is (a narrower frame); a greater one would find too little: refused.
    AT_MOST = "at_most"
    #: Only what is computed from the stored state changes (the state holds raw rows):
    #: allowed, from the next row emitted on.
    FREE = "free"


@dataclass(frozen=True, slots=True)
class ProcessorParameter(JsonRecord):
    """One setting of a stateful processor, with what changing it does to its state."""

    read_first = ("amount",)

    name: str
    #: As shown (lineage for a column, so a renamed source still compares equal).
    value: str
    rule: str
    #: Why a refused change would misread the state (said in the finding).
    why: str
    #: The number ``at_most`` compares (rows, milliseconds).
    amount: int | None = None


@dataclass(frozen=True, slots=True)
class ProcessorState(JsonRecord):
    """A ``transformWithState`` processor flowc generates (OverAggregate,
    DeduplicateWithin...): its class, what Spark groups its state by, the parameters that
    bear on its state, and the rows it stores (empty when it stores none)."""

    name: str
    keyed_by: str
    parameters: tuple[ProcessorParameter, ...]
    row: tuple[StateColumn, ...]

    def parameter(self, name: str) -> ProcessorParameter | None:
        return next((p for p in self.parameters if p.name == name), None)


@dataclass(frozen=True, slots=True)
class StatefulOperator(JsonRecord):
    """One stateful operator of a query, as its state is kept.

    ``kind`` is ``keyed_aggregate``, ``global_aggregate``, ``window_aggregate``,
    ``session_window``, ``deduplicate``, ``join``, ``rank``, ``window_rank`` or
    ``over_aggregate``. ``keys`` are the grouping keys (the
    deduplicated columns for ``deduplicate``, the left side's keys for ``join``).
    """

    read_first = ("uid", "vertex_id", "within", "processor")

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
    #: The processor that keeps this state, when flowc generates one (None in a manifest
    #: of an older flowc, and for Spark's own operators).
    processor: ProcessorState | None = None

    @property
    def key_groups(self) -> int:
        return self.max_parallelism

    def to_json(self) -> dict[str, Any]:
        data = record_json(self)
        location = data.pop("location")
        processor = data.pop("processor")
        out: dict[str, Any] = {}
        for key, value in data.items():
            out[key] = value
            if key == "join":  # beside the other descriptions of what the state holds
                out["processor"] = processor
        return {**out, "key_groups": self.key_groups, "location": location}


@dataclass(frozen=True, slots=True)
class OptionValue(JsonRecord):
    """An option of a source or sink, or a setting, as written (a secret as a digest),
    and where it is written."""

    key: str
    value: str
    location: Location | None = None


@dataclass(frozen=True, slots=True)
class FunctionState(JsonRecord):
    """A Python function a query calls, and what identifies its code.

    ``digest`` covers the function's code and the top-level definitions of its module it
    uses, transitively (helpers, constants, imports), read with Python's parser: a comment,
    a docstring or the layout do not count, and neither does an edit elsewhere in the
    module (``module_digest`` is the whole file's). ``feeds`` is ``state`` when a
    stateful operator keeps a value it computes, else ``output``."""

    name: str
    target: str
    file: str | None
    digest: str | None
    module_digest: str | None
    feeds: str
    location: Location


@dataclass(frozen=True, slots=True)
class SourceRead(JsonRecord):
    """A source a query reads: where its rows come from."""

    name: str
    connector: str
    path: str | None
    format: str | None
    #: Every option as written (None in a manifest of an older flowc).
    options: tuple[OptionValue, ...] | None = None
    #: The declared columns and watermark, as one line.
    columns: str | None = None

    @property
    def where(self) -> tuple[str, str | None, str | None]:
        return (self.connector, self.path, self.format)

    def shown(self) -> str:
        where = f" {self.path}" if self.path is not None else ""
        return f"'{self.name}' ({self.connector}{where})"


@dataclass(frozen=True, slots=True)
class SinkWrite(JsonRecord):
    """The sink a query writes."""

    name: str
    connector: str
    path: str | None
    format: str | None
    mode: str
    location: Location
    #: Every option as written, ``mode`` among them (None in an older flowc's manifest).
    options: tuple[OptionValue, ...] | None = None


@dataclass(frozen=True, slots=True)
class QueryState(JsonRecord):
    """One query (INSERT): its sources, sink, checkpoint and stateful operators, in
    Spark's order (index 0 nearest the sink)."""

    read_first = ("checkpoint",)

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
    #: The job's settings as set (None in a manifest of an older flowc).
    settings: tuple[OptionValue, ...] | None = None
    #: The Python functions the query calls (None in a manifest of an older flowc).
    functions: tuple[FunctionState, ...] | None = None


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
        return replace(self, queries=tuple(q for q in self.queries if q.name in keep))

    def to_json(self) -> dict[str, Any]:
        return {"format": MANIFEST_FORMAT, **record_json(self)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StateManifest:
        """Read a manifest; ValueError when it is not one this flowc can read."""
        if not isinstance(data, Mapping) or data.get("format") != MANIFEST_FORMAT:
            raise ValueError("not a flowc state manifest")
        version = data.get("version")
        if not isinstance(version, int) or not 1 <= version <= MANIFEST_VERSION:
            raise ValueError(
                f"state manifest version {version!r}: this flowc reads 1 to {MANIFEST_VERSION}"
            )
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
