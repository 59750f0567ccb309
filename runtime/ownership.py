"""Which job owns a file sink's folder and a query's checkpoint: checked before Spark starts.

Spark's file sink keeps a commit log in its output folder (``<path>/_spark_metadata``)
and skips every batch id the log already has: it takes a batch it has seen for a batch
replayed after a failure. The batch ids come from the query's checkpoint, so a folder
written under one checkpoint and then under another (``job.name`` renamed, another
``--checkpoint-dir``, the checkpoint deleted to start over) silently loses the new
checkpoint's first batches: the query runs, reports its input rows, and writes nothing.

``flowc run`` therefore writes two small markers before the queries start: in each file
sink's folder, ``_flowc_sink.json`` (the job, the sink and the checkpoint location that
write it), and in each query's checkpoint folder, ``_flowc_query.json`` (the job, the sink
and the sink's folder). Before that it refuses, located at the sink's ``path`` (or at
``job.name``), a folder whose commit log another checkpoint wrote, or whose log is ahead
of this query's checkpoint (E0810-E0812), and a sink folder it cannot create or write
(E0813) or a checkpoint folder it cannot write (E0814), so Spark never starts on them.
Two file sinks of one job writing one folder would share a log the same way (E0815).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlparse

from flowc.diagnostics import CompileError, Diagnostic, Severity
from flowc.errorcodes import Code
from flowc.job import CompiledJob
from flowc.program import SinkDef
from flowc.spans import Span

#: In a file sink's folder: who writes it.
SINK_MARKER = "_flowc_sink.json"
#: In a query's checkpoint folder: whose checkpoint it is.
CHECKPOINT_MARKER = "_flowc_query.json"
#: Spark's file sink commit log, in the sink's folder.
SPARK_SINK_LOG = "_spark_metadata"

_BATCH_FILE = re.compile(r"^(\d+)(\.compact)?$")
#: A URI's scheme (two letters or more: ``C:`` is a Windows drive).
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):")


@dataclass(frozen=True, slots=True)
class _Claim:
    """One file sink of this run: its folder and the checkpoint that writes it."""

    sink: SinkDef
    folder: str
    checkpoint: str
    span: Span


def check_sink_ownership(job: CompiledJob, checkpoint_root: str, base_dir: str) -> None:
    """Refuse (CompileError) a run that would lose rows or fail in Spark on its folders;
    otherwise write the markers and return. Called before any query starts."""
    streaming = not job.spark_plan.batch
    diagnostics: list[Diagnostic] = []
    claims: list[_Claim] = []
    folders: dict[str, str] = {}
    for query in job.spark_plan.queries:
        sink = job.program.sink(query.sink)
        checkpoint = os.path.abspath(os.path.join(checkpoint_root, *query.checkpoint))
        if sink.connector != "files":
            if streaming:
                claims.append(_Claim(sink, "", checkpoint, sink.span))
            continue
        folder = _local_folder(base_dir, str(dict(sink.options)["path"]))
        if folder is None:
            continue  # another file system (s3a://...): nothing flowc can look at
        span = _path_span(job, sink)
        other = folders.setdefault(folder, sink.name)
        if other != sink.name and streaming:
            diagnostics.append(
                _error(
                    Code.E0815,
                    f"sinks '{other}' and '{sink.name}' write to the same folder {_shown(folder)}",
                    span,
                    "Spark's file sink keeps one commit log per folder and skips the batch "
                    "ids it has seen, so one query's rows would be dropped: give each sink "
                    "its own path",
                )
            )
            continue
        problem = _unwritable(folder)
        if problem is not None:
            diagnostics.append(
                _error(
                    Code.E0813,
                    f"sink '{sink.name}' cannot write to {_shown(folder)}: {problem}",
                    span,
                    "point the sink's path at a folder you can write, or create it first",
                )
            )
            continue
        if streaming:
            found = _owner_problem(job, sink, folder, checkpoint, span)
            if found is not None:
                diagnostics.append(found)
                continue
        claims.append(_Claim(sink, folder, checkpoint, span))
    if not diagnostics and streaming:  # a batch run keeps no checkpoint or commit log
        diagnostics.extend(_write_markers(job, claims))
    if diagnostics:
        raise CompileError(diagnostics)


# ---------------------------------------------------------------- the checks


def _owner_problem(
    job: CompiledJob, sink: SinkDef, folder: str, checkpoint: str, span: Span
) -> Diagnostic | None:
    """Why this query must not write ``folder``'s commit log, or None when it may."""
    logged = latest_batch(os.path.join(folder, SPARK_SINK_LOG))
    if logged is None:
        return None  # no commit log: nothing to skip
    marker = _read_json(os.path.join(folder, SINK_MARKER)) or {}
    settings = job.program.settings
    shown = _shown(folder)
    recorded = marker.get("checkpoint")
    started = latest_batch(os.path.join(checkpoint, "offsets"))
    covered = started is not None and started >= logged
    if isinstance(recorded, str) and os.path.abspath(recorded) != checkpoint:
        if covered and _moved_here(checkpoint, job, sink):
            return None  # the checkpoint was moved (with --checkpoint-dir): still this query's
        old_job = str(marker.get("job", "?"))
        renamed = old_job != settings.job_name
        if renamed:
            message = (
                f"job.name is now '{settings.job_name}', not '{old_job}': sink '{sink.name}' "
                f"would write to {shown} under a new checkpoint"
            )
            restore = (
                f"restore job.name = '{old_job}'"
                if "job.name" in settings.spans
                else f"add SET job.name = '{old_job}';"
            )
        else:
            message = (
                f"sink '{sink.name}' would write to {shown} under a new checkpoint "
                f"({_shown(checkpoint)})"
            )
            restore = f"run with --checkpoint-dir {os.path.dirname(os.path.dirname(recorded))}"
        return _error(
            Code.E0810,
            message,
            settings.spans.get("job.name", span) if renamed else span,
            f"{shown} has a commit log (batches 0 to {logged}) written by job '{old_job}', "
            f"sink '{marker.get('sink', '?')}' under checkpoint {_shown(recorded)}, and Spark "
            f"would skip {_batches(logged + 1)} of this run and never write their rows: "
            f"point sink '{sink.name}' at a new folder, or {restore}",
        )
    if covered:
        return None  # the checkpoint has every batch the log has: a restart, as Spark expects
    skipped = _batches(logged - (started if started is not None else -1))
    if marker:
        where = "is gone" if started is None else f"ends at batch {started}"
        return _error(
            Code.E0811,
            f"the checkpoint of sink '{sink.name}' {where}, but {shown} has a commit log "
            f"up to batch {logged}",
            span,
            f"Spark would skip {skipped} and never write their rows: to start over, delete "
            f"{shown} as well as {_shown(checkpoint)}, or point sink '{sink.name}' at a new "
            "folder",
        )
    return _error(
        Code.E0812,
        f"sink '{sink.name}' writes to {shown}, which has a commit log (batches 0 to "
        f"{logged}) that no checkpoint of this job wrote",
        span,
        f"Spark would skip {skipped} and never write their rows: point sink "
        f"'{sink.name}' at a new folder, or delete {shown} if its rows are not needed",
    )


def _batches(count: int) -> str:
    return "the first batch" if count == 1 else f"the first {count} batches"


def _shown(path: str) -> str:
    """A path as the user would write it: relative to the working folder when inside it."""
    try:
        relative = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return path
    return path if relative.startswith("..") else relative


def _moved_here(checkpoint: str, job: CompiledJob, sink: SinkDef) -> bool:
    """Whether the checkpoint folder's marker says it is this job's query for ``sink``."""
    marker = _read_json(os.path.join(checkpoint, CHECKPOINT_MARKER))
    return (
        marker is not None
        and marker.get("job") == job.program.settings.job_name
        and marker.get("sink") == sink.name
    )


def _unwritable(folder: str) -> str | None:
    """Why ``folder`` cannot be created or written, or None."""
    existing = folder
    while not os.path.lexists(existing):
        parent = os.path.dirname(existing)
        if parent == existing:
            break
        existing = parent
    if os.path.lexists(existing) and not os.path.isdir(existing):
        what = "it" if existing == folder else _shown(existing)
        return f"{what} is a file, not a folder"
    if not os.access(existing, os.W_OK | os.X_OK):
        what = "it" if existing == folder else _shown(existing)
        return f"no permission to write in {what}"
    return None


def _write_markers(job: CompiledJob, claims: Iterable[_Claim]) -> list[Diagnostic]:
    """The markers of every claim; a folder that cannot be written is a diagnostic."""
    problems = []
    job_name = job.program.settings.job_name
    for claim in claims:
        record: dict[str, Any]
        if claim.folder:
            record = {
                "job": job_name,
                "sink": claim.sink.name,
                "checkpoint": claim.checkpoint,
                "file": job.file,
            }
            reason = _write_json(claim.folder, SINK_MARKER, record)
            if reason is not None:
                problems.append(
                    _error(
                        Code.E0813,
                        f"sink '{claim.sink.name}' cannot write to {_shown(claim.folder)}: "
                        f"{reason}",
                        claim.span,
                        "point the sink's path at a folder you can write, or create it first",
                    )
                )
                continue
        record = {
            "job": job_name,
            "sink": claim.sink.name,
            "connector": claim.sink.connector,
            "folder": claim.folder or None,
            "file": job.file,
        }
        reason = _write_json(claim.checkpoint, CHECKPOINT_MARKER, record)
        if reason is not None:
            at = job.program.settings.spans.get("checkpoint.dir", claim.sink.span)
            problems.append(
                _error(
                    Code.E0814,
                    f"the checkpoint of sink '{claim.sink.name}' cannot be written to "
                    f"{_shown(claim.checkpoint)}: {reason}",
                    at,
                    "give a checkpoint folder you can write with --checkpoint-dir DIR",
                )
            )
    return problems


# ---------------------------------------------------------------- files


def _local_folder(base_dir: str, path: str) -> str | None:
    """The sink's folder on this machine (relative paths from the .flow file's folder);
    None for a URI of another file system."""
    scheme = _SCHEME.match(path)
    if scheme is None:
        return os.path.abspath(os.path.join(base_dir, path))
    if scheme.group(1).lower() != "file":
        return None
    return os.path.abspath(unquote(urlparse(path).path))


def latest_batch(folder: str) -> int | None:
    """The highest batch id of a Spark metadata log (offsets, commits, a sink's log)."""
    try:
        names = os.listdir(folder)
    except OSError:
        return None
    ids = [int(m.group(1)) for m in map(_BATCH_FILE.match, names) if m is not None]
    return max(ids) if ids else None


def _read_json(path: str) -> dict[str, Any] | None:
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write_json(folder: str, name: str, record: dict[str, Any]) -> str | None:
    """Write ``folder/name`` (creating the folder); the reason it failed, or None."""
    try:
        os.makedirs(folder, exist_ok=True)
        temporary = os.path.join(folder, f".{name}.tmp")
        with open(temporary, "w", encoding="utf-8", errors="surrogateescape") as handle:
            handle.write(json.dumps(record, indent=2) + "\n")
        os.replace(temporary, os.path.join(folder, name))
    except OSError as error:
        return error.strerror.lower() if error.strerror else str(error)
    return None


# ---------------------------------------------------------------- diagnostics


def _path_span(job: CompiledJob, sink: SinkDef) -> Span:
    """Where the sink's ``path`` is written: in WITH (...), or the ``--set`` that gave it
    on the command line (the sink's declaration if not found)."""
    written = sink.written_options.get("path")
    return written.value.span if written is not None else sink.span


def _error(code: Code, message: str, span: Span, help: str) -> Diagnostic:
    return Diagnostic(code, Severity.ERROR, message, span, help)
