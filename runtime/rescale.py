"""Rescaling a query's state to the plan's partitions, as Flink's key groups let a job do.

Spark freezes a stateful query's shuffle partitions in its checkpoint (``offsets/<n>``'s
conf) and ignores a new value. Spark 4.2 added an offline state repartition
(``SparkSession._streamingCheckpointManager.repartition``): with the query stopped, it
reads every operator's state as of the last committed batch N, repartitions it by the
state's partition key into the new count, and writes batch N+1 with no input: an
``offsets/N+1`` equal to N's but for ``spark.sql.shuffle.partitions``, each operator's
state at version N+2 in the new partitions, then ``commits/N+1`` (a copy of N's). Only
the RocksDB store (the HDFS-backed one is refused, UNSUPPORTED_PROVIDER), and only the
operators Spark knows a partition key for (:data:`ACCEPTED`).

It is not atomic: a kill between ``offsets/N+1`` and ``commits/N+1`` leaves a checkpoint
Spark refuses to run (STREAMING_UNFINISHED_REPARTITION_DETECTED, measured) until the
repartition is retried at that count, with half-written state files. flowc therefore
repartitions a copy (``<folder>.rescale-new``), writes :data:`MARKER` in it when Spark
is done, and swaps it in by two renames; :func:`recover` (run before anything else looks
at the folder) finishes or undoes a swap a kill interrupted. The old checkpoint stays
beside it (``<folder>.rescale-old``) until the new one has committed a batch of its own.

A files sink's commit log (``<path>/_spark_metadata``) must hold every batch id: Spark's
compaction and its reader fail on a missing one. Batch N+1 wrote no rows, so flowc adds
its entry (empty, or the compaction of the batches before when N+1 is a compaction batch),
from the marker, so a kill after the swap is finished by the next run.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass
from importlib import metadata
from typing import Any, TextIO

from flowc.analyze.state_store import ROCKSDB_PROVIDER
from flowc.runtime.failures import readable, spark_errors
from flowc.runtime.ownership import latest_batch
from flowc.state.manifest import StatefulOperator

#: Spark's operators its repartition accepts (StatePartitionKeyExtractorFactory, Spark
#: 4.3) that flowc has checked, flowc's processors (OVER, DEDUPLICATE ... WITHIN,
#: CURRENT_WATERMARK, the changelog AGGREGATE, TOP and JOIN) among them: Spark's
#: TransformWithStatePartitionKeyExtractorFactory takes every column family of a
#: transformWithState (value, list and map state, both indexes of its timers, TTL) by
#: its grouping key. Their operator metadata (``_metadata/v2/<batch>``) names the schema
#: files by absolute path, the original checkpoint's; the copy keeps those paths (Spark's
#: StateRewriter reads the schemas through them, from the original, which the copy
#: equals, and OfflineStateRepartitionRunner writes them unchanged into the new batch's
#: metadata), and the swap puts the copy at that path: measured on PySpark 4.3.
ACCEPTED = frozenset(
    {
        "stateStoreSave",
        "dedupe",
        "dedupeWithinWatermark",
        "sessionWindowStateStoreSaveExec",
        "symmetricHashJoin",
        "transformWithStateInPySparkExec",
        "transformWithStateInPandasExec",
    }
)
#: The first Spark with the offline state repartition.
FIRST_SPARK = (4, 2)
STAGING = ".rescale-new"
KEPT = ".rescale-old"
#: An older rescale's intermediate checkpoint, while the swap of a newer one runs.
DROPPED = ".rescale-drop"
#: In a rescaled checkpoint (written into the copy before the swap): what was done.
MARKER = "_flowc_rescale.json"
COMPACT_INTERVAL_CONF = "spark.sql.streaming.fileSink.log.compactInterval"
DEFAULT_COMPACT_INTERVAL = 10


class RescaleFailed(Exception):
    """Spark's repartition failed, or its result is not what flowc expects: the
    checkpoint is left as it was."""


@dataclass(frozen=True, slots=True)
class Rescale:
    """A query whose state moves to another number of partitions before it starts."""

    query: str
    folder: str
    before: int
    after: int
    #: The query's files sink's commit log folder, if it writes to one on this machine.
    sink_log: str | None
    #: ``spark.sql.streaming.fileSink.log.compactInterval`` as the job sets it (the
    #: session's value, which spark-defaults.conf may set too, wins: see
    #: :func:`session_compact_interval`).
    compact_interval: int = DEFAULT_COMPACT_INTERVAL


@dataclass(frozen=True, slots=True)
class Rescaled:
    """A finished rescale, for the run's output and ``--report``."""

    query: str
    before: int
    after: int
    batch: int
    seconds: float
    kept: str

    def to_json(self) -> dict[str, object]:
        return {
            "query": self.query,
            "partitions_before": self.before,
            "partitions_after": self.after,
            "batch": self.batch,
            "seconds": round(self.seconds, 3),
            "kept": self.kept,
        }


# ---------------------------------------------------------------- before Spark


def spark_version() -> tuple[int, int] | None:
    """The installed PySpark's major and minor version; None when it cannot be told."""
    try:
        text = metadata.version("pyspark")
    except metadata.PackageNotFoundError:
        return None
    parts = text.split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


#: The kinds of state Spark keeps in partition 0 whatever the count (a SinglePartition
#: aggregation), which its repartition hashes elsewhere: the manifest's kind of an
#: aggregate without a key, and :func:`state_kinds`' name for a TOP without one.
GLOBAL_AGGREGATE = "global_aggregate"
GLOBAL_TOP = "global_top"


def state_kinds(operators: Iterable[StatefulOperator]) -> list[str]:
    """The operators' kinds as :func:`obstacle` reads them: a TOP without a key that runs
    as Spark's aggregation (not as a processor, whose state is keyed) is ``global_top``."""
    return [
        GLOBAL_TOP
        if o.kind == "rank" and not o.keys and o.processor is None
        else o.kind
        for o in operators
    ]


def obstacle(
    folder: str,
    provider: str | None,
    operators: Iterable[str] | None,
    version: tuple[int, int] | None,
    kinds: Iterable[str] = (),
) -> str | None:
    """Why the checkpoint in ``folder`` cannot be repartitioned, or None when it can;
    ``operators`` are Spark's names of its stateful operators, ``kinds`` flowc's."""
    if version is not None and version < FIRST_SPARK:
        return (
            f"PySpark {version[0]}.{version[1]} has no offline state repartition "
            "(Spark 4.2 added it)"
        )
    if provider != ROCKSDB_PROVIDER:
        shown = "the HDFS-backed store" if provider is None or "HDFS" in provider else provider
        return (
            f"its state is in {shown}, which Spark's repartition refuses "
            "(STATE_REPARTITION_INVALID_CHECKPOINT.UNSUPPORTED_PROVIDER): only the RocksDB "
            "store can be repartitioned"
        )
    kinds = set(kinds)
    if GLOBAL_AGGREGATE in kinds:
        return (
            "an aggregate without a key keeps its state in one partition whatever the count, "
            "and Spark's repartition fails on the partitions it left empty (measured: "
            "CANNOT_READ_STREAMING_STATE_FILE)"
        )
    if GLOBAL_TOP in kinds:
        return (
            "a TOP without a key (Spark's aggregation without grouping) keeps its state in "
            "partition 0 whatever the count, and Spark's repartition moves its one key to "
            "another partition, where the next run would not read it (measured: 2 -> 4 put "
            "it in partition 2)"
        )
    if operators is None:
        return "Spark's state metadata (state/<n>/_metadata) cannot be read"
    refused = sorted({name for name in operators if name not in ACCEPTED})
    if refused:
        return (
            f"its state includes {', '.join(refused)}, which flowc does not repartition yet "
            f"(it does {', '.join(sorted(ACCEPTED))})"
        )
    foreign = foreign_schema(folder)
    if foreign is not None:
        return (
            f"a processor's operator metadata names its state schema at {foreign}, outside "
            "the checkpoint (it was moved since that was written): Spark's repartition "
            "would read the schema from there"
        )
    offsets = latest_batch(os.path.join(folder, "offsets"))
    commits = latest_batch(os.path.join(folder, "commits"))
    if commits is None:
        return "it has no committed micro-batch yet"
    if offsets != commits:
        return (
            f"its last micro-batch ({offsets}) did not commit: repartitioning would skip "
            "it, and a files sink would get its rows twice"
        )
    return None


def foreign_schema(folder: str) -> str | None:
    """A schema file a processor's latest operator metadata (``state/<n>/_metadata/v2/
    <batch>``) names outside ``folder``, or None. The repartition reads the schemas
    through these absolute paths, and the swap makes them the copy's own only when they
    are under ``folder``."""
    state = os.path.join(folder, "state")
    inside = os.path.realpath(folder) + os.sep
    try:
        operators = [n for n in os.listdir(state) if n.isdigit()]
    except OSError:
        return None
    for operator in operators:
        v2 = os.path.join(state, operator, "_metadata", "v2")
        latest = latest_batch(v2)
        if latest is None:
            continue
        try:
            with open(os.path.join(v2, str(latest)), encoding="utf-8") as handle:
                handle.readline()
                stores = json.loads(handle.readline()).get("stateStoreInfo") or []
        except (OSError, ValueError, AttributeError):
            continue  # unreadable: Spark's own repartition says why
        for store in stores:
            for path in store.get("stateSchemaFilePaths") or []:
                local = path[len("file:") :] if path.startswith("file:") else path
                if not os.path.realpath(local).startswith(inside):
                    return str(path)
    return None


def recover(folder: str) -> list[str]:
    """Finish or undo a swap a kill interrupted, and drop an unfinished copy: the folder
    is then the old checkpoint or the new one, never half. What was done, as lines."""
    staging, kept, dropped = folder + STAGING, folder + KEPT, folder + DROPPED
    done = []
    if not os.path.lexists(folder):
        if os.path.isfile(os.path.join(staging, MARKER)):
            os.rename(staging, folder)
            done.append(f"rescale: finished the interrupted swap of {folder}")
        elif os.path.isdir(dropped):
            os.rename(dropped, folder)
            done.append(f"rescale: undid the interrupted swap of {folder}")
        elif os.path.isdir(kept):
            os.rename(kept, folder)
            done.append(f"rescale: undid the interrupted swap of {folder}")
    for left in (staging, dropped):
        if os.path.lexists(left):
            shutil.rmtree(left)
            done.append(f"rescale: removed {left}, left by an interrupted rescale")
    return done


def read_marker(folder: str) -> dict[str, Any] | None:
    try:
        with open(os.path.join(folder, MARKER), encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def settle(folder: str, sink_log: str | None) -> list[str]:
    """After a rescale: add its batch to the files sink's commit log if a kill left it
    out; once the new checkpoint has committed a batch of its own, remove the old one
    kept aside and the marker."""
    marker = read_marker(folder)
    if marker is None:
        return []
    batch = int(marker["batch"])
    done = []
    if sink_log is not None:
        added = align_sink_log(sink_log, batch, int(marker.get("compact_interval", 10)))
        if added is not None:
            done.append(f"rescale: added batch {batch} to {added}")
    committed = latest_batch(os.path.join(folder, "commits"))
    if committed is not None and committed > batch:
        kept = folder + KEPT
        if os.path.isdir(kept):
            shutil.rmtree(kept)
            done.append(f"rescale: removed {kept}: the rescaled checkpoint has committed")
        with suppress(OSError):
            os.unlink(os.path.join(folder, MARKER))
    return done


# ---------------------------------------------------------------- the files sink's log


def compact_interval(log: str, default: int) -> int:
    """The compaction interval Spark will use for this commit log (as
    CompactibleFileStreamLog derives it from the ``.compact`` files it finds)."""
    try:
        compacts = sorted(
            (int(n[: -len(".compact")]) for n in os.listdir(log) if n.endswith(".compact")),
            reverse=True,
        )
    except (OSError, ValueError):
        return default
    if len(compacts) >= 2:
        return compacts[0] - compacts[1]
    if len(compacts) == 1:
        latest = compacts[0] + 1
        if latest <= default:
            return latest
        if default < latest // 2:
            divisors = [i for i in range(default, latest // 2 + 1) if latest % i == 0]
            return divisors[0] if divisors else latest
        return latest
    return default


def align_sink_log(log: str, batch: int, default_interval: int) -> str | None:
    """Write ``batch``'s entry (no files) into a files sink's commit log that ends at
    the batch before; the entry's path, or None when the log needs none."""
    latest = latest_batch(log)
    if latest is None or latest >= batch:
        return None
    if latest != batch - 1:
        raise RescaleFailed(
            f"{log} ends at batch {latest}, not at {batch - 1}, the batch before the rescale"
        )
    interval = compact_interval(log, default_interval)
    if (batch + 1) % interval == 0:
        lines = ["v1"]
        for earlier in range(max(0, batch - interval), batch):
            compact = (earlier + 1) % interval == 0
            name = f"{earlier}.compact" if compact else str(earlier)
            with open(os.path.join(log, name), encoding="utf-8") as handle:
                entries = handle.read().split("\n")
            if entries[0] != "v1":
                raise RescaleFailed(f"{os.path.join(log, name)}: not a v1 commit log entry")
            lines += [e for e in entries[1:] if e]
        target = os.path.join(log, f"{batch}.compact")
    else:
        lines = ["v1"]
        target = os.path.join(log, str(batch))
    _write_atomically(target, "\n".join(lines))
    return target


def _write_atomically(path: str, text: str) -> None:
    temporary = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.flowc.tmp")
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


# ---------------------------------------------------------------- with Spark


def session_compact_interval(spark: Any, default: int) -> int:
    """The files sink's compaction interval the query will use: the session's conf (the
    job's SET, or spark-defaults.conf where the job sets none), else ``default``."""
    try:
        value = spark.conf.get(COMPACT_INTERVAL_CONF, str(default))
    except spark_errors():
        return default
    try:
        return int(value)
    except (ValueError, TypeError):
        return default


def repartition(spark: Any, rescale: Rescale, out: TextIO | None = None) -> Rescaled:
    """Repartition a copy of the checkpoint with Spark, then swap it in; RescaleFailed
    leaves the checkpoint as it was."""
    folder = rescale.folder
    recover(folder)
    staging = folder + STAGING
    if out is not None:
        out.write(
            f"rescale: query '{rescale.query}': moving its state from {rescale.before} to "
            f"{rescale.after} partitions (Spark's offline state repartition, on a copy)\n"
        )
        out.flush()
    started = time.monotonic()
    interval = session_compact_interval(spark, rescale.compact_interval)
    shutil.copytree(folder, staging, symlinks=True)
    try:
        spark._streamingCheckpointManager.repartition(staging, rescale.after, True)
    except spark_errors() as error:
        shutil.rmtree(staging, ignore_errors=True)
        raise RescaleFailed(f"Spark's state repartition failed: {readable(error)}") from None
    batch = latest_batch(os.path.join(staging, "commits"))
    problem = _check_result(staging, rescale, batch)
    if problem is not None:
        shutil.rmtree(staging, ignore_errors=True)
        raise RescaleFailed(problem)
    assert batch is not None
    kept = folder + KEPT
    record = {
        "before": rescale.before,
        "after": rescale.after,
        "batch": batch,
        "kept": kept,
        "compact_interval": interval,
    }
    _write_atomically(os.path.join(staging, MARKER), json.dumps(record, indent=2) + "\n")
    _sync_tree(staging)
    # The swap: the old checkpoint aside (an older rescale's original stays kept, its
    # intermediate result is dropped), then the copy in. recover() finishes either half.
    aside = kept if not os.path.lexists(kept) else folder + DROPPED
    os.rename(folder, aside)
    os.rename(staging, folder)
    _sync_dir(os.path.dirname(folder))
    if aside != kept:
        shutil.rmtree(aside)
    if rescale.sink_log is not None:
        align_sink_log(rescale.sink_log, batch, interval)
    seconds = time.monotonic() - started
    done = Rescaled(rescale.query, rescale.before, rescale.after, batch, seconds, kept)
    if out is not None:
        out.write(
            f"rescale: query '{rescale.query}': state now in {rescale.after} partitions "
            f"(batch {batch}, {seconds:.1f} s); the old checkpoint is kept at {kept} until "
            "the query commits a batch\n"
        )
    return done


def _check_result(staging: str, rescale: Rescale, batch: int | None) -> str | None:
    """What is wrong with Spark's repartitioned copy, or None."""
    offsets = latest_batch(os.path.join(staging, "offsets"))
    if batch is None or offsets != batch:
        return f"Spark's repartition left batch {offsets} uncommitted"
    try:
        with open(os.path.join(staging, "offsets", str(batch)), encoding="utf-8") as handle:
            handle.readline()
            conf = json.loads(handle.readline())["conf"]
        partitions = int(conf["spark.sql.shuffle.partitions"])
    except (OSError, ValueError, KeyError, TypeError):
        return f"the repartitioned offsets/{batch} cannot be read"
    if partitions != rescale.after:
        return f"the repartitioned offsets/{batch} says {partitions} partitions"
    # The swap renames the copy: nothing in it may name the copy's own path.
    for root, _, names in os.walk(os.path.join(staging, "state")):
        for name in names:
            if "_metadata" not in root:
                continue
            with open(os.path.join(root, name), "rb") as handle:
                if staging.encode() in handle.read():
                    return f"{os.path.join(root, name)} names the copy's path"
    return None


def _sync_tree(folder: str) -> None:
    """Flush the copy's files to disk before the rename makes it the checkpoint."""
    for root, _, names in os.walk(folder):
        for name in names:
            with suppress(OSError):
                descriptor = os.open(os.path.join(root, name), os.O_RDONLY)
                try:
                    os.fsync(descriptor)
                finally:
                    os.close(descriptor)
        _sync_dir(root)


def _sync_dir(folder: str) -> None:
    with suppress(OSError):
        descriptor = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
