"""The restart guard: a query's state manifest beside its checkpoint, checked before Spark.

Spark matches state to operators by position and checks little more when a query
restarts on a checkpoint (``../shared/spec/spark-state.md``): some edits are taken
silently and corrupt the state (``count(*)`` → ``sum(v)``, keys reordered or replaced by
another column of the same type, a new window size), others fail only after Spark
started, with a Java stack trace; a new number of shuffle partitions is ignored.

``flowc run`` therefore writes, beside each query's checkpoint,
``<root>/<job>/<query>/_flowc_state.json``: the query's part of
:func:`flowc.state.describe_state` (after its queries started, atomically). On
the next run, before any JVM starts, :func:`guard_state` compares it with the new plan
(:func:`flowc.state.compare`) and

- refuses an incompatible edit: E0820, an error at the changed line that shows the old
  definition and the ways out (revert, a new ``--checkpoint-dir``, or
  ``flowc run --reset-state QUERY``);
- rescales: where the checkpoint froze another number of shuffle partitions than the
  plan's, :meth:`StateGuard.rescale` repartitions the state before the queries start
  (``flowc.runtime.rescale``; an E0821 warning says so), or E0826 refuses where it cannot
  (the HDFS-backed store, Spark before 4.2, an operator not handled); a new
  max_parallelism is a warning (E0821): Spark ignores it;
- warns about a checkpoint without a readable manifest (E0822: plain Spark or an older
  flowc): what Spark's own files tell (``offsets/<n>``'s shuffle partitions; each
  operator's name, partitions and key schema in ``state/<n>/_metadata``) is checked, an
  operator count, kind or key types that cannot match is E0820, and the rest is said to
  be unverified.

``--reset-state QUERY`` moves that query's checkpoint aside (``<folder>.reset-<time>``),
and a file sink's folder too (its commit log belongs to the old checkpoint): nothing is
deleted. The guard reads a few small files: it costs about a millisecond per query
(``python -m benchmarks.state_guard``).
"""

from __future__ import annotations

import datetime
import json
import os
import re
from collections.abc import Iterable, Sequence
from contextlib import suppress
from dataclasses import dataclass, field, replace
from typing import Any, TextIO
from urllib.parse import unquote, urlparse

from flowc.analyze.state_store import PROVIDER_CLASS_CONF
from flowc.diagnostics import CompileError, Diagnostic, Severity, render_text
from flowc.errorcodes import Code
from flowc.job import CompiledJob
from flowc.runtime.failures import spark_errors
from flowc.runtime.ownership import latest_batch
from flowc.runtime.rescale import (
    COMPACT_INTERVAL_CONF,
    DEFAULT_COMPACT_INTERVAL,
    KEPT,
    Rescale,
    Rescaled,
    RescaleFailed,
    obstacle,
    recover,
    repartition,
    settle,
    spark_version,
    state_kinds,
)
from flowc.spans import Span
from flowc.state import (
    INCOMPATIBLE_CODE,
    Finding,
    QueryState,
    StatefulOperator,
    StateManifest,
    Verdict,
    compare,
    describe_state,
    ways_out,
)

#: Beside each query's checkpoint: the state manifest of the query that last ran on it.
STATE_MANIFEST = "_flowc_state.json"
UNVERIFIED_CODE = Code.E0822

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):")

_PROCESSOR_KINDS = frozenset(
    {
        "over_aggregate",
        "deduplicate",
        "processor",
        "rank",
        "keyed_aggregate",
        "global_aggregate",
        "join",
    }
)
#: Spark's names for its stateful operators (state/<n>/_metadata/metadata) → flowc's kinds.
SPARK_OPERATORS: dict[str, frozenset[str]] = {
    "stateStoreSave": frozenset({"keyed_aggregate", "global_aggregate", "window_aggregate"}),
    "sessionWindowStateStoreSaveExec": frozenset({"session_window"}),
    "dedupe": frozenset({"deduplicate"}),
    "symmetricHashJoin": frozenset({"join"}),
    # flowc's processors (OVER, DEDUPLICATE ... WITHIN, CURRENT_WATERMARK, keep-first by
    # event time, the steps consuming updates); their metadata is under
    # _metadata/v2/<batch> (measured on PySpark 4.3); the pandas form has a name of its own
    "transformWithStateInPySparkExec": _PROCESSOR_KINDS,
    "transformWithStateInPandasExec": _PROCESSOR_KINDS,
}
#: flowc's type names → Spark's JSON type names (in a state schema file).
_SPARK_TYPES = {
    "STRING": "string",
    "BIGINT": "long",
    "INT": "integer",
    "SMALLINT": "short",
    "TINYINT": "byte",
    "DOUBLE": "double",
    "FLOAT": "float",
    "BOOLEAN": "boolean",
    "DATE": "date",
    "TIMESTAMP": "timestamp",
    "TIMESTAMP_NTZ": "timestamp_ntz",
    "BINARY": "binary",
}


@dataclass(slots=True)
class _Query:
    """One query of this run: where its checkpoint is and what the guard found there."""

    state: QueryState
    folder: str | None
    #: The partitions Spark froze in the checkpoint (offsets/<n>), if it has one.
    frozen: int | None = None


@dataclass(slots=True)
class StateGuard:
    """What :func:`guard_state` found; :meth:`started` writes the new manifests."""

    manifest: StateManifest
    queries: list[_Query] = field(default_factory=list)
    warnings: list[Diagnostic] = field(default_factory=list)
    #: Folders --reset-state moved aside: (from, to).
    moved: list[tuple[str, str]] = field(default_factory=list)
    #: Queries whose state :meth:`rescale` moves to the plan's partitions.
    rescales: list[Rescale] = field(default_factory=list)
    #: The rescales done, for the run's report.
    rescaled: list[Rescaled] = field(default_factory=list)

    def rescale(self, spark: Any, out: TextIO | None = None) -> None:
        """With Spark started and before any query: repartition each query's state that
        the guard found frozen at another count (RescaleFailed leaves it as it was)."""
        for rescale in self.rescales:
            self.rescaled.append(repartition(spark, rescale, out))
            for query in self.queries:
                if query.state.name == rescale.query:
                    query.frozen = rescale.after

    def finished(self) -> None:
        """After the run: a rescaled query that committed a batch no longer needs its old
        checkpoint kept aside (the next run would remove it otherwise)."""
        for rescale in self.rescales:
            with suppress(OSError, RescaleFailed):
                settle(rescale.folder, rescale.sink_log)

    def started(self, started: Iterable[Any] = ()) -> list[str]:
        """After the queries started: write each one's manifest beside its checkpoint
        (a query that already failed keeps the old one). The manifests written."""
        failed = set()
        for query in started:
            try:
                if query.exception() is not None:
                    failed.add(query.name)
            except spark_errors():  # Spark's own failure to say: the run reports it
                failed.add(getattr(query, "name", None))
        written = []
        for query in self.queries:
            if query.folder is None or query.state.name in failed:
                continue
            state = query.state
            if query.frozen is not None:
                state = replace(state, state_partitions=query.frozen)
            path = write_manifest(query.folder, _single(self.manifest, state))
            if path is not None:
                written.append(path)
        return written


def guard_state(
    job: CompiledJob,
    checkpoint_root: str,
    base_dir: str,
    reset_state: Sequence[str] = (),
    out: TextIO | None = None,
    repair: bool = True,
) -> StateGuard:
    """Before Spark starts: move aside the checkpoints of ``reset_state``, then compare
    every query's old manifest with the new plan. Raises CompileError (E0820) on an
    incompatible edit; warnings (E0821, E0822) are written to ``out`` and kept.
    ``base_dir`` is the folder the job's relative paths start from; a name in
    ``reset_state`` that is no query of the job is a ValueError. ``repair`` (flowc run;
    not flowc diff, which only reads) finishes or undoes a rescale a kill interrupted.
    A query whose checkpoint froze another partition count than the plan's is in
    ``rescales`` (an E0821 warning says so) or refused (E0826)."""
    manifest = describe_state(job, base_dir)
    guard = StateGuard(manifest)
    if job.spark_plan.batch:
        return guard  # a batch run keeps no checkpoint
    names = [q.name for q in job.spark_plan.queries]
    unknown = [name for name in reset_state if name not in names]
    if unknown:
        raise ValueError(
            f"--reset-state {unknown[0]}: the job has no query of that name "
            f"(its queries: {', '.join(names)})"
        )
    errors: list[Diagnostic] = []
    root = _local(checkpoint_root)
    for state in manifest.queries:
        folder = None if root is None else os.path.join(os.path.abspath(root), *state.checkpoint)
        guard.queries.append(_Query(state, folder))
    reset = set(reset_state)
    old_states: list[QueryState] = []
    said: list[str] = []
    for query in guard.queries:
        if query.folder is None:
            continue
        try:  # a rescale a kill interrupted: finish it or undo it, before anything reads
            if repair:
                said += recover(query.folder)
                said += settle(query.folder, _sink_log(query, base_dir))
        except (OSError, RescaleFailed) as error:
            errors.append(
                Diagnostic(
                    Code.E0826,
                    Severity.ERROR,
                    f"the checkpoint of query '{query.state.name}' is in the middle of a "
                    f"rescale a kill interrupted, and flowc could not finish or undo it: {error}",
                    _scale_span(job, query),
                    f"the old checkpoint is {_shown(query.folder + KEPT)} (or "
                    f"{_shown(query.folder)} itself): put it back at {_shown(query.folder)} "
                    "and run again",
                )
            )
            continue
        if query.state.name in reset:
            continue
        if not _is_checkpoint(query.folder):
            continue
        query.frozen = _frozen_partitions(query.folder)
        if (store := _frozen_store(job, query)) is not None:
            guard.warnings.append(store)
        old = read_manifest(query.folder)
        if isinstance(old, QueryState):
            if query.frozen is not None:
                old = replace(old, state_partitions=query.frozen)
            old_states.append(old)
        else:
            found, unverified = _unmanifested(job, query, old)
            errors += found
            guard.warnings += unverified
    if old_states:
        old_manifest = StateManifest(
            manifest.version,
            manifest.job,
            manifest.file,
            manifest.flowc_version,
            manifest.engine,
            tuple(old_states),
        )
        comparison = compare(old_manifest, manifest.only(q.name for q in old_states))
        for name, finding in comparison.findings():
            if finding.aspect == "state_store":
                continue  # E0824 above says it from the store the checkpoint froze
            if finding.aspect in _RESCALING:
                continue  # the rescale below says what happens to the partitions
            if finding.verdict is Verdict.INCOMPATIBLE:
                errors.append(_diagnostic(job, name, finding, Severity.ERROR))
            elif finding.verdict is Verdict.RESCALED or finding.warning:
                guard.warnings.append(_diagnostic(job, name, finding, Severity.WARNING))
    version = spark_version()
    for query in guard.queries:
        planned = query.state.shuffle_partitions
        if query.frozen is None or not query.state.operators or query.frozen == planned:
            continue
        if query.state.name in reset or query.folder is None:
            continue
        why = obstacle(
            query.folder,
            (_offsets_conf(query.folder) or {}).get(PROVIDER_CLASS_CONF),
            None if (ops := spark_operators(query.folder)) is None else [o.name for o in ops],
            version,
            state_kinds(query.state.operators),
        )
        if why is not None:
            errors.append(_not_rescalable(job, query, why))
            continue
        conf = dict(job.program.settings.spark_conf)
        try:
            interval = int(conf.get(COMPACT_INTERVAL_CONF, DEFAULT_COMPACT_INTERVAL))
        except ValueError:
            interval = DEFAULT_COMPACT_INTERVAL
        guard.rescales.append(
            Rescale(
                query.state.name,
                query.folder,
                query.frozen,
                planned,
                _sink_log(query, base_dir),
                interval,
            )
        )
        guard.warnings.append(_rescaling(job, query))
    if errors:
        everything = sorted(
            [*errors, *guard.warnings],
            key=lambda d: (d.span.line, d.span.column, d.severity is Severity.WARNING),
        )
        raise CompileError(_unique(everything))
    for query in guard.queries:
        if query.state.name in reset and query.folder is not None:
            moved = _reset(query, base_dir)
            guard.moved += moved
            query.frozen = None
            if out is not None and not moved:
                out.write(f"reset-state: query '{query.state.name}' has no checkpoint yet\n")
    if out is not None:
        for line in said:
            out.write(line + "\n")
        for source, target in guard.moved:
            out.write(f"reset-state: moved {_shown(source)} aside to {_shown(target)}\n")
        if guard.warnings:
            out.write(render_text(guard.warnings, {job.file: job.source}, color=False))
    return guard


# ---------------------------------------------------------------- the manifest files


def manifest_path(folder: str) -> str:
    return os.path.join(folder, STATE_MANIFEST)


def write_manifest(folder: str, manifest: StateManifest) -> str | None:
    """Write ``folder/_flowc_state.json`` atomically (temporary file, then rename); the
    path, or None when the folder cannot be written (the run goes on: the next restart
    then says the checkpoint could not be verified)."""
    path = manifest_path(folder)
    temporary = os.path.join(folder, f".{STATE_MANIFEST}.{os.getpid()}.tmp")
    try:
        os.makedirs(folder, exist_ok=True)
        with open(temporary, "w", encoding="utf-8", errors="surrogateescape") as handle:
            handle.write(dumps(manifest))
        os.replace(temporary, path)
    except OSError:
        with suppress(OSError):
            os.unlink(temporary)
        return None
    return path


def dumps(manifest: StateManifest) -> str:
    """The manifest's JSON text: indented, keys in a fixed order, one newline at the end."""
    return json.dumps(manifest.to_json(), indent=2, ensure_ascii=False) + "\n"


def read_manifest(folder: str) -> QueryState | str | None:
    """The query's state as the last run wrote it; a reason string when the file is there
    but cannot be read; None when there is none."""
    path = manifest_path(folder)
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as handle:
            text = handle.read()
    except FileNotFoundError:
        return None
    except OSError as error:
        return f"{STATE_MANIFEST} cannot be read ({error.strerror or error})"
    try:
        manifest = StateManifest.from_json(json.loads(text))
    except ValueError as error:
        return f"{STATE_MANIFEST} cannot be read ({error})"
    if len(manifest.queries) != 1:
        return f"{STATE_MANIFEST} describes {len(manifest.queries)} queries, not one"
    return manifest.queries[0]


def _single(manifest: StateManifest, query: QueryState) -> StateManifest:
    return StateManifest(
        manifest.version,
        manifest.job,
        manifest.file,
        manifest.flowc_version,
        manifest.engine,
        (query,),
    )


# ---------------------------------------------------------------- Spark's own files


def _local(path: str) -> str | None:
    """A checkpoint root on this machine; None for another file system (s3a://...)."""
    scheme = _SCHEME.match(path)
    if scheme is None:
        return path
    if scheme.group(1).lower() != "file":
        return None
    return unquote(urlparse(path).path)


def _is_checkpoint(folder: str) -> bool:
    """Whether Spark has run a query on this folder (it has an offset log)."""
    return latest_batch(os.path.join(folder, "offsets")) is not None


def _offsets_conf(folder: str) -> dict[str, str] | None:
    """The Spark settings the checkpoint froze (its latest offsets file's ``conf``)."""
    offsets = os.path.join(folder, "offsets")
    latest = latest_batch(offsets)
    if latest is None:
        return None
    try:
        with open(os.path.join(offsets, str(latest)), encoding="utf-8") as handle:
            handle.readline()  # v1
            metadata = json.loads(handle.readline())
        conf = metadata["conf"]
        return {str(k): str(v) for k, v in conf.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _frozen_partitions(folder: str) -> int | None:
    """``spark.sql.shuffle.partitions`` as the checkpoint froze it (its latest offsets)."""
    conf = _offsets_conf(folder)
    try:
        return None if conf is None else int(conf["spark.sql.shuffle.partitions"])
    except (KeyError, ValueError):
        return None


def _frozen_store(job: CompiledJob, query: _Query) -> Diagnostic | None:
    """E0824 when the plan asks for another state store than the checkpoint froze: Spark
    keeps the checkpoint's (it restores the provider class from the offsets conf)."""
    planned = job.spark_plan.state_store
    if query.folder is None or planned.provider_class is None or not query.state.operators:
        return None
    frozen = (_offsets_conf(query.folder) or {}).get(PROVIDER_CLASS_CONF)
    if frozen is None or frozen == planned.provider_class:
        return None
    name = query.state.name
    return Diagnostic(
        Code.E0824,
        Severity.WARNING,
        f"query '{name}' plans the {planned.backend} state store ({planned.provider_class}), "
        f"but its checkpoint froze {frozen}: Spark keeps the state there and ignores the "
        "new choice",
        query.state.location.span,
        "to move the state to the new store, start the query over (a new --checkpoint-dir, "
        f"or flowc run --reset-state {name}); or set the store back to the checkpoint's",
    )


@dataclass(frozen=True, slots=True)
class SparkOperator:
    """A stateful operator as Spark's checkpoint files describe it."""

    index: int
    name: str
    partitions: int | None
    #: The key schema's fields as (name, Spark JSON type), if a schema file was found.
    key: tuple[tuple[str, str], ...] | None


def spark_operators(folder: str) -> list[SparkOperator] | None:
    """The checkpoint's stateful operators from ``state/<n>/_metadata`` (Spark 4 writes
    them); None when the checkpoint has no state metadata to read."""
    state = os.path.join(folder, "state")
    try:
        indexes = sorted(int(n) for n in os.listdir(state) if n.isdigit())
    except OSError:
        return None  # no state yet (no batch committed), or no stateful operator
    found = []
    for index in indexes:
        try:
            with open(
                _operator_metadata(os.path.join(state, str(index))), encoding="utf-8"
            ) as handle:
                handle.readline()
                data = json.loads(handle.readline())
            name = str(data["operatorInfo"]["operatorName"])
            stores = data.get("stateStoreInfo") or [{}]
            partitions = stores[0].get("numPartitions")
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            return None
        found.append(
            SparkOperator(
                index,
                name,
                None if partitions is None else int(partitions),
                _key_schema(os.path.join(state, str(index), "0", "_metadata", "schema")),
            )
        )
    return found


def _operator_metadata(folder: str) -> str:
    """An operator's metadata file: ``_metadata/metadata`` (Spark's own operators, v1), or
    the latest ``_metadata/v2/<batch>`` (a transformWithState's)."""
    v1 = os.path.join(folder, "_metadata", "metadata")
    v2 = os.path.join(folder, "_metadata", "v2")
    if os.path.exists(v1) or not os.path.isdir(v2):
        return v1
    batches = [int(n) for n in os.listdir(v2) if n.isdigit()]
    return os.path.join(v2, str(max(batches))) if batches else v1


def _key_schema(path: str) -> tuple[tuple[str, str], ...] | None:
    """The key schema's fields from a state schema file (two JSON schemas, the key's
    first, between binary length prefixes)."""
    try:
        with open(path, "rb") as handle:
            text = handle.read(1 << 20).decode("utf-8", "replace")
    except OSError:
        return None
    start = text.find('{"type":"struct"')
    if start < 0:
        return None
    try:
        schema, _ = json.JSONDecoder().raw_decode(text, start)
        return tuple(
            (str(f["name"]), json.dumps(f["type"]) if not isinstance(f["type"], str) else f["type"])
            for f in schema["fields"]
        )
    except (ValueError, KeyError, TypeError):
        return None


def _unmanifested(
    job: CompiledJob, query: _Query, problem: str | None
) -> tuple[list[Diagnostic], list[Diagnostic]]:
    """A checkpoint without a readable manifest: check what Spark's files tell."""
    assert query.folder is not None
    state = query.state
    span = state.location.span
    where = _shown(query.folder)
    why = problem if problem is not None else f"it has no {STATE_MANIFEST}"
    errors: list[Diagnostic] = []
    checked: list[str] = []
    found = spark_operators(query.folder)
    if found is not None:
        checked.append(f"{_count(len(found), 'stateful operator')}")
        if len(found) != len(state.operators):
            errors.append(
                Diagnostic(
                    INCOMPATIBLE_CODE,
                    Severity.ERROR,
                    f"the checkpoint of query '{state.name}' holds the state of "
                    f"{_count(len(found), 'stateful operator')} "
                    f"({', '.join(o.name for o in found) or 'none'}), and the query now has "
                    f"{len(state.operators)}: Spark finds state by position and would not "
                    "start it",
                    span,
                    ways_out(state.name),
                )
            )
        else:
            for spark_op, operator in zip(found, state.operators, strict=True):
                error = _operator_problem(state.name, spark_op, operator)
                if error is not None:
                    errors.append(error)
            checked.append("their kinds and key types")
    if query.frozen is not None:
        checked.append(f"its {query.frozen} shuffle partitions")
    warnings: list[Diagnostic] = []
    if state.operators or problem is not None:
        known = f"checked from Spark's files: {', '.join(checked)}; " if checked else ""
        warnings.append(
            Diagnostic(
                UNVERIFIED_CODE,
                Severity.WARNING,
                f"the checkpoint of query '{state.name}' ({where}) cannot be fully verified: "
                f"{why} (written by plain Spark or an older flowc)",
                span,
                f"{known}not checked: which columns the keys are, the aggregate functions, "
                "window sizes and join conditions; if the query changed since its "
                f"checkpoint was written, start it over (flowc run --reset-state {state.name}); "
                "this run writes the manifest, so the next restart is checked",
            )
        )
    return errors, warnings


#: Key fields of a window's state that are no KEY BY column: Spark's window structs,
#: CUMULATE's exploded window (``__flowc_window``) and the constant key of a session
#: window with no other (``__flowc_global``), both flowc.spark.codegen_steps's.
_WINDOW_KEYS = frozenset({"window", "session_window", "__flowc_window", "__flowc_global"})


def _operator_problem(
    query: str, found: SparkOperator, operator: StatefulOperator
) -> Diagnostic | None:
    span = operator.location.span
    kinds = SPARK_OPERATORS.get(found.name)
    if kinds is not None and operator.kind not in kinds:
        return Diagnostic(
            INCOMPATIBLE_CODE,
            Severity.ERROR,
            f"{operator.name} is Spark's stateful operator {operator.index} of query "
            f"'{query}', but the checkpoint holds a {found.name} there",
            span,
            ways_out(query),
        )
    if found.key is None or kinds is None or operator.kind == "join":
        return None
    keys = [f for f in found.key if f[0] not in _WINDOW_KEYS]
    expected = [_SPARK_TYPES.get(k.type) for k in operator.keys]
    if None in expected:
        return None
    if [t for _, t in keys] != expected:
        stored = ", ".join(f"{n} {t}" for n, t in keys) or "none"
        now = ", ".join(f"{k.name} {k.type}" for k in operator.keys) or "nothing"
        return Diagnostic(
            INCOMPATIBLE_CODE,
            Severity.ERROR,
            f"{operator.name}: the checkpoint's state is keyed on ({stored}), and the query "
            f"now keys it on ({now})",
            span,
            ways_out(query),
        )
    return None


# ---------------------------------------------------------------- rescaling

#: The findings a rescale answers: flowc moves the state to the plan's partitions.
_RESCALING = frozenset({"parallelism", "shuffle_partitions"})


def _sink_log(query: _Query, base_dir: str) -> str | None:
    """The query's files sink's commit log folder, on this machine."""
    sink = query.state.sink
    if sink.connector != "files" or sink.path is None:
        return None
    local = _local(sink.path)
    if local is None:
        return None
    return os.path.join(os.path.abspath(os.path.join(base_dir, local)), "_spark_metadata")


def _scale_span(job: CompiledJob, query: _Query) -> Span:
    """The parallelism setting (the query where the job sets none)."""
    settings = job.program.settings
    return (
        settings.spans.get("spark.sql.shuffle.partitions")
        or settings.spans.get("parallelism")
        or query.state.location.span
    )


def _rescaling(job: CompiledJob, query: _Query) -> Diagnostic:
    """E0821: what flowc run does before the query starts."""
    state = query.state
    return Diagnostic(
        Code.E0821,
        Severity.WARNING,
        f"query '{state.name}' plans {state.shuffle_partitions} shuffle partitions, and its "
        f"checkpoint keeps the state in {query.frozen}: flowc run repartitions the state into "
        f"{state.shuffle_partitions} before the query starts (Spark's offline state "
        "repartition, on a copy of the checkpoint swapped in when done)",
        _scale_span(job, query),
        f"the old checkpoint is kept beside it ({os.path.basename(query.folder or '')}"
        f"{KEPT}) until the query commits a batch",
    )


def _not_rescalable(job: CompiledJob, query: _Query, why: str) -> Diagnostic:
    """E0826 at the parallelism setting (the query where the job sets none)."""
    state = query.state
    span = _scale_span(job, query)
    return Diagnostic(
        Code.E0826,
        Severity.ERROR,
        f"query '{state.name}' plans {state.shuffle_partitions} shuffle partitions, but its "
        f"checkpoint keeps the state in {query.frozen}, and flowc cannot repartition it: "
        f"{why}",
        span,
        f"set the parallelism back to {query.frozen} to go on from the checkpoint; or start "
        f"the query over with empty state (flowc run --reset-state {state.name}, or a new "
        "--checkpoint-dir), with SET state.backend.type = 'rocksdb' to be able to rescale "
        "it later",
    )


# ---------------------------------------------------------------- --reset-state


def _reset(query: _Query, base_dir: str) -> list[tuple[str, str]]:
    """Move the query's checkpoint aside, and its file sink's folder if that has a commit
    log (which belongs to the old checkpoint); never delete."""
    assert query.folder is not None
    moved = []
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    folders = [query.folder]
    sink = query.state.sink
    if sink.connector == "files" and sink.path is not None:
        local = _local(sink.path)
        folder = None if local is None else os.path.abspath(os.path.join(base_dir, local))
        if folder is not None and os.path.isdir(os.path.join(folder, "_spark_metadata")):
            folders.append(folder)
    for folder in folders:
        if not os.path.lexists(folder):
            continue
        target = f"{folder}.reset-{stamp}"
        suffix = 1
        while os.path.lexists(target):
            target = f"{folder}.reset-{stamp}-{suffix}"
            suffix += 1
        try:
            os.rename(folder, target)
        except OSError as error:
            raise CompileError(
                [
                    Diagnostic(
                        Code.E0823,
                        Severity.ERROR,
                        f"--reset-state {query.state.name}: cannot move {_shown(folder)} "
                        f"aside: {error.strerror or error}",
                        query.state.location.span,
                        "move it yourself, or run with a new --checkpoint-dir",
                    )
                ]
            ) from None
        moved.append((folder, target))
    return moved


# ---------------------------------------------------------------- diagnostics


def _diagnostic(job: CompiledJob, query: str, finding: Finding, severity: Severity) -> Diagnostic:
    """A finding at its place in the new file (the old text is in its message)."""
    span = finding.new.span if finding.new is not None else job.program.span
    return Diagnostic(
        finding.code or INCOMPATIBLE_CODE, severity, finding.message, span, finding.help
    )


def _unique(diagnostics: Sequence[Diagnostic]) -> list[Diagnostic]:
    return list(dict.fromkeys(diagnostics))


def _shown(path: str) -> str:
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return path
    return path if relative.startswith("..") else relative


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"
