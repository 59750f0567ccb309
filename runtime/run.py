"""``flowc run``: compile, generate the PySpark program, and run it here.

The program run is exactly the one ``--emit pyspark`` prints, loaded as a module, so
``spark-submit`` of that file and ``flowc run`` do the same work. This module imports
pyspark (through the generated program); the compiler never does.
"""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import subprocess
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from flowc.diagnostics import CompileError, Diagnostic, Severity
from flowc.errorcodes import Code
from flowc.job import CompiledJob
from flowc.runtime.console_relay import Relay
from flowc.runtime.failures import (
    FailureLog,
    JavaTextLost,
    StartedQuery,
    code_of,
    explain,
    jvm_ended,
    py4j_to_log,
    readable,
    spark_errors,
    summary,
)
from flowc.runtime.ownership import check_sink_ownership
from flowc.runtime.rescale import Rescaled, RescaleFailed
from flowc.runtime.state_guard import StateGuard, guard_state
from flowc.runtime.state_report import NO_WATERMARK, HeldState, held_state, state_lines
from flowc.runtime.warm import COLD, COLD_START, shown
from flowc.spark.codegen import generate_pyspark
from flowc.spark.spark_plan import checkpoint_root
from flowc.sql.spark_sql import UnsupportedOnSpark

_EXCHANGE = re.compile(r"^[\s:+\-|]*Exchange ", re.M)


@dataclass(slots=True)
class QueryReport:
    name: str
    sink: str
    exchanges_planned: int
    batches: int = 0
    input_rows: int = 0
    #: Rows the query wrote to its sink (Spark's sink.numOutputRows; -1 where the sink does
    #: not say, as Spark's file sink does not).
    rows_written: int = 0
    duration_s: float = 0.0
    exchanges_executed: int | None = 0
    error: str | None = None
    #: A whole flowc diagnostic for the failure, where flowc can explain it (bad data).
    diagnostic: str | None = None
    #: Spark's failure as a diagnostic at the .flow line it came from (E0802-E0804).
    failure: Diagnostic | None = None
    #: The failure's diagnostic code (E0801-E0804).
    code: Code | None = None
    #: What each stateful operator still held when the run stopped (streaming only).
    state: list[HeldState] = field(default_factory=list)
    #: Micro-batches in which Spark re-ran a stage (lost shuffle output): their
    #: numInputRows may count rows twice. None where flowc could not ask Spark.
    rerun_batches: list[int] | None = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "sink": self.sink,
            "batches": self.batches,
            "input_rows": self.input_rows,
            "rows_written": self.rows_written,
            "duration_s": round(self.duration_s, 3),
            "exchanges_planned": self.exchanges_planned,
            "exchanges_executed": self.exchanges_executed,
            "error": self.error,
            "code": self.code,
            "state": [h.to_json() for h in self.state],
            "rerun_batches": self.rerun_batches,
        }

    def rerun_line(self) -> str | None:
        """The final summary's warning that input_rows may count rows twice, if it may."""
        if not self.rerun_batches:
            return None
        batches = ", ".join(str(b) for b in self.rerun_batches)
        return (
            f"[{self.name}] input_rows {self.input_rows} may count some rows twice: Spark "
            f"re-ran a stage of batch {batches} after losing shuffle output (a lost executor "
            "or shuffle files), and numInputRows adds the rows of re-run tasks again\n"
        )


@dataclass(slots=True)
class RunReport:
    job: str
    duration_s: float = 0.0
    queries: list[QueryReport] = field(default_factory=list)
    stopped_by_user: bool = False
    #: The log file holding Spark's output or the full text of a failure, if any.
    log_file: str | None = None
    #: The queries whose state flowc moved to new partitions before they started.
    rescaled: list[dict[str, object]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "duration_s": round(self.duration_s, 3),
            "stopped_by_user": self.stopped_by_user,
            "log_file": self.log_file,
            "rescaled": self.rescaled,
            "queries": [q.to_json() for q in self.queries],
        }


def load_program(job: CompiledJob) -> types.ModuleType:
    """The generated PySpark program as a module (not run yet)."""
    code = generate_pyspark(job)
    module = types.ModuleType(f"flowc_job_{job.program.settings.job_name}")
    module.__file__ = f"<flowc {job.file}>"
    exec(compile(code, module.__file__, "exec"), module.__dict__)
    return module


@contextmanager
def _interrupts() -> Iterator[list[int]]:
    """Turn Ctrl-C into a flag the monitor loop reads between Spark calls.

    PySpark's own handler cancels jobs and raises in the middle of a py4j call, which
    leaves py4j's connection mid-message; stopping the queries from the loop instead lets
    each running micro-batch commit, so checkpoints stay consistent.
    """
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    previous = signal.signal(signal.SIGINT, lambda number, frame: received.append(number))
    try:
        yield received
    finally:
        signal.signal(signal.SIGINT, previous)


def _until_one_ends(queries: Sequence[Any], seconds: float) -> None:
    """Wait ``seconds``, or less when the first active query ends first: an available-now
    run is seen to end when its last query does, not up to a poll later. A query that
    failed is not raised here: the monitor loop reads its exception."""
    active = next((q for q in queries if q.isActive), None)
    if active is None:
        return
    with suppress(*spark_errors()):
        active.awaitTermination(seconds)


def count_exchanges(plan_text: str) -> int:
    """Shuffle exchanges in an executed plan's tree (a coalesce is no exchange, nor is a
    ReusedExchange: Spark's ReuseExchangeAndSubquery put it where an equal exchange already
    runs, and it reads that exchange's shuffle output without shuffling again).

    Under adaptive execution the text holds the final plan and then the initial one, so
    every exchange would show twice; the initial plan is the one the query planned.
    """
    _, marker, initial = plan_text.partition("== Initial Plan ==")
    return len(_EXCHANGE.findall(initial if marker else plan_text))


def run_job(
    job: CompiledJob,
    *,
    available_now: bool = False,
    checkpoint_dir: str | None = None,
    master: str = "local[*]",
    remote: str | None = None,
    base_dir: str | None = None,
    out: TextIO = sys.stderr,
    poll_seconds: float = 0.5,
    log_file: str | None = None,
    reset_state: Sequence[str] = (),
    warm: bool = False,
) -> RunReport:
    """Start every query of the job and wait for them; Ctrl-C stops them cleanly.

    ``warm``: ``remote`` is the warm Spark (flowc.runtime.warm), chosen by flowc rather
    than the user: what Connect cannot run exactly (state to repartition first, a SET of a
    static spark.* setting) then runs on a new local session, with one line saying why,
    where a ``--remote`` the user gave is refused.
    A new local Spark is announced (COLD_START) once the checks before Spark pass.

    ``log_file``: the file the caller sends Spark's output to (``flowc run`` does, with
    flowc.runtime.failures.spark_output); Spark's progress bars are then off, and a
    failure's full text and stack trace are appended there (else to a new log file).
    A failed query's report holds a diagnostic; Spark refusing to start the session or a
    query raises SparkRefused.
    """
    if remote is not None and checkpoint_dir is not None and "://" not in checkpoint_dir:
        checkpoint_dir = os.path.abspath(checkpoint_dir)  # the server has another folder
    folder = base_dir if base_dir is not None else str(Path(job.file).parent)
    base = os.path.abspath(folder)
    checkpoints = checkpoint_root(job.spark_plan, checkpoint_dir, base)
    # Before Spark: state the edited job cannot go on from (E0820), --reset-state.
    guard = guard_state(job, checkpoints, base, reset_state, out)
    check_sink_ownership(job, checkpoints, base)  # before Spark: folders flowc refuses
    check_processor_packages(job)  # before Spark: a processor's workers need their packages
    if remote is None:  # a refusal above starts no JVM, and says none
        out.write(COLD_START)  # before pyspark loads (the generated program imports it)
    module = load_program(job)
    module.__dict__["EMBEDDED_FUNCTIONS"] = {f.name.lower(): f.call for f in job.functions}
    module.__dict__["BASE_DIR"] = base
    if remote is not None and warm and guard.rescales:
        names = ", ".join(f"'{r.query}'" for r in guard.rescales)
        out.write(
            f"{COLD}the state of query {names} must be repartitioned first, which Spark "
            "Connect cannot do\n"
        )
        out.write(COLD_START)
        remote = None
    if remote is not None and guard.rescales:
        names = ", ".join(f"'{r.query}'" for r in guard.rescales)
        raise SparkRefused(
            f"error: the state of query {names} must be repartitioned to the plan's partitions "
            "first, and Spark Connect has no offline state repartition (Spark Classic only): "
            "run flowc rescale on the job here first, or set the parallelism back\n"
        )
    report = RunReport(job=job.program.settings.job_name, log_file=log_file)
    failure_log = FailureLog(job, checkpoint_dir, base_dir, log_file)
    started = time.monotonic()
    try:
        remote = _static_settings(module, remote, warm, out)
        if remote is not None and warm:
            out.write(f"running on the warm Spark at {shown(remote)} (flowc spark status)\n")
        before = settings_of_the_running_session() if remote is None else None
        spark = module.start_session(master, remote, quiet=log_file is not None)
    except spark_errors() as error:
        raise SparkRefused.of(job, None, error, failure_log, "Spark could not start") from None
    relay: Relay | None = None
    if remote is not None and warm and "CONSOLE_RELAY" in module.__dict__:
        relay = Relay(sys.stdout)  # the console sinks' batches, printed here (not the log)
        module.__dict__["CONSOLE_RELAY"] = relay.writer
    try:
        return _run_started(
            module, spark, job, report, started, out, available_now, checkpoints, guard,
            failure_log, remote, poll_seconds, relay,
        )  # fmt: skip
    finally:
        if relay is not None:
            relay.finish()
        if remote is not None:
            release(spark)
        if before is not None:
            put_back_settings(spark, before)


def _static_settings(
    module: types.ModuleType, remote: str | None, warm: bool, out: TextIO
) -> str | None:
    """``remote``, unless the job SETs a spark.* setting a Connect session cannot take:
    then the warm Spark gives way to a new local session (None, and a line saying why);
    a ``--remote`` the user gave is refused."""
    if remote is None:
        return None
    fixed = static_settings(module, remote)
    if not fixed:
        return remote
    names = ", ".join(fixed)
    if warm:
        out.write(f"{COLD}a Spark Connect session cannot SET {names} (set when Spark starts)\n")
        out.write(COLD_START)
        return None
    raise SparkRefused(
        f"error: the job SETs {names}, which a Spark Connect session cannot set (Spark "
        "takes it when it starts); run without --remote\n"
    )


def static_settings(module: types.ModuleType, remote: str) -> list[str]:
    """The job's SET spark.* settings a Connect session cannot take (static ones, or ones
    Spark does not know), which pyspark's Connect builder would skip without a word."""
    conf: dict[str, str] = module.SPARK_CONF
    if not conf:
        return []
    from pyspark.sql import SparkSession

    # pyspark marks the process as Spark Connect's (its environment) for good once a
    # Connect session starts: unmarked after the probe, a local session can still start.
    marks = {name: os.environ.get(name) for name in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE")}
    probe = SparkSession.builder.remote(remote).create()
    try:
        return [key for key in sorted(conf) if not probe.conf.isModifiable(key)]
    finally:
        probe.stop()
        for name, value in marks.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def local_session_runs() -> bool:
    """Whether this process has a local Spark session already (tests run flowc in one):
    never without pyspark loaded, which is asked first (loading it takes a second)."""
    if "pyspark.sql" not in sys.modules:
        return False
    from pyspark.sql import SparkSession

    return SparkSession.getActiveSession() is not None


def settings_of_the_running_session() -> dict[str, str] | None:
    """The runtime settings of the local session this process has already (an
    application's that embeds flowc, or a test's), or None. The job runs in that session
    (the generated ``start_session`` gets it with the job's SET spark.* settings, its state
    store and its optimizer rules set on it): :func:`put_back_settings` puts them back after
    the run, so neither the application's later queries nor the next job run in it take
    this job's settings (a later job without a SET would otherwise run with them: seen,
    ``compactInterval`` 3 and flowc's excluded optimizer rules left on the caller's session)."""
    if not local_session_runs():
        return None
    from pyspark.sql import SparkSession

    # The session the job's getOrCreate returns (PySpark's own), not the JVM's active one
    # in this thread, which may be a streaming query's clone of it with the query's
    # internal settings (spark.sql.streaming.internal.stateStore.partitions...): put on
    # the session, those made the next query keep another query's state partitions.
    return dict(SparkSession.builder.getOrCreate().conf.getAll)


def put_back_settings(spark: Any, before: dict[str, str]) -> None:
    """The session's runtime settings as they were before the run: changed and removed ones
    set back, added ones unset (a setting Spark does not let a session change stays as it is)."""
    with suppress(*spark_errors()):  # the JVM may have ended; the run's outcome stands
        after = dict(spark.conf.getAll)
        for key in sorted(after.keys() | before.keys()):
            if before.get(key) == after.get(key) or not spark.conf.isModifiable(key):
                continue
            if key in before:
                spark.conf.set(key, before[key])
            else:
                spark.conf.unset(key)


def release(spark: Any) -> None:
    """End a Connect session on the server (its temporary views, its SETs)."""
    with suppress(Exception):  # the server may be gone; the run's outcome stands
        spark.stop()


def _run_started(
    module: types.ModuleType,
    spark: Any,
    job: CompiledJob,
    report: RunReport,
    started: float,
    out: TextIO,
    available_now: bool,
    checkpoints: str,
    guard: StateGuard,
    failure_log: FailureLog,
    remote: str | None,
    poll_seconds: float,
    relay: Relay | None = None,
) -> RunReport:
    if remote is None:
        _check_packages(job, spark)
    if job.spark_plan.batch:
        return _run_batch(module, spark, job, report, started, out, remote, failure_log)
    try:  # before any query starts: the state moved to the plan's partitions
        guard.rescale(spark, out)
    except RescaleFailed as error:
        raise SparkRefused(
            f"error: the state could not be repartitioned (the checkpoint is as it was): {error}"
        ) from None
    report.rescaled = [r.to_json() for r in guard.rescaled]
    watched: list[StartedQuery] = []
    try:
        report = _run_streaming(
            module, spark, job, report, started, out, available_now, checkpoints, guard,
            failure_log, remote, poll_seconds, watched, relay,
        )  # fmt: skip
        guard.finished()
        return report
    except _gone_or_failed() as raised:
        ended = _jvm_ended(job, readable(raised), remote, watched, failure_log)
        if ended is None:
            raise
        raise ended from None


def rescale_job(
    job: CompiledJob,
    *,
    queries: Sequence[str] = (),
    checkpoint_dir: str | None = None,
    master: str = "local[*]",
    base_dir: str | None = None,
    out: TextIO = sys.stderr,
) -> list[Rescaled]:
    """``flowc rescale``: move the state of the job's queries (``queries``, or all) to
    the plan's partitions, as ``flowc run`` would before starting them, and start none.
    Refusals are CompileError (E0826, E0820) before Spark starts; RescaleFailed leaves
    the checkpoint as it was."""
    module = load_program(job)
    folder = base_dir if base_dir is not None else str(Path(job.file).parent)
    base = os.path.abspath(folder)
    checkpoints = checkpoint_root(job.spark_plan, checkpoint_dir, base)
    guard = guard_state(job, checkpoints, base, (), out)
    unknown = [q for q in queries if q not in {p.name for p in job.spark_plan.queries}]
    if unknown:
        raise ValueError(f"--query {unknown[0]}: the job has no query of that name")
    if queries:
        guard.rescales = [r for r in guard.rescales if r.query in queries]
    if not guard.rescales:
        out.write("rescale: every query's state is already in the plan's partitions\n")
        return []
    before = settings_of_the_running_session()
    spark = module.start_session(master, None, quiet=True)
    try:
        guard.rescale(spark, out)
    finally:
        if before is not None:  # an application's session: as run_job leaves it
            put_back_settings(spark, before)
    return guard.rescaled


def computed(progress: Any, key: str) -> float | None:
    """One of a progress's totals over its sources (numInputRows and the two rates): a
    key of Spark Classic's progress, while through Spark Connect the key holds None and
    pyspark computes the total from the sources (an attribute)."""
    value = progress.get(key)
    return getattr(progress, key, None) if value is None else value


def _run_streaming(
    module: types.ModuleType,
    spark: Any,
    job: CompiledJob,
    report: RunReport,
    started: float,
    out: TextIO,
    available_now: bool,
    checkpoints: str,
    guard: StateGuard,
    failure_log: FailureLog,
    remote: str | None,
    poll_seconds: float,
    watched: list[StartedQuery],
    relay: Relay | None = None,
) -> RunReport:
    """Start one query per INSERT and watch them until they end, fail or Ctrl-C;
    ``watched`` is filled with the started queries as Spark's log names them; ``relay``
    prints the console sinks' batches (the warm Spark), before each batch's progress line."""
    planned = {q.name: q for q in job.spark_plan.queries}
    running = {q.id for q in spark.streams.active}
    try:
        queries = module.start_queries(spark, checkpoints, available_now)
    except spark_errors() as error:
        raise _refused(job, spark, running, checkpoints, error, failure_log) from None
    except Exception as error:
        if _versions_refused(module, error):
            _stop_started(spark, running)
        raise _not_loaded(module, job, error) from None
    watched.extend(StartedQuery(q.name, str(q.id), str(q.runId)) for q in queries)
    guard.started(queries)  # the state manifests, beside the checkpoints they describe
    reruns = StageReruns.of(spark) if remote is None else None
    display = ProgressDisplay(out, reruns.batches if reruns is not None else None)
    try:
        with _interrupts() as interrupted:
            while any(q.isActive for q in queries) and not interrupted:
                _until_one_ends(queries, poll_seconds)
                if relay is not None:
                    relay.print_new()
                display.update(queries)
                if any(not q.isActive and q.exception() is not None for q in queries):
                    break  # one query failed: the job has failed, as awaitAnyTermination
            if interrupted:
                report.stopped_by_user = True
            for query in queries:
                if query.isActive:
                    query.stop()
        if relay is not None:
            relay.print_new()
        display.update(queries)
    finally:
        display.close()
    if report.stopped_by_user:
        out.write("stopped: each query committed its running micro-batch\n")
    report.duration_s = time.monotonic() - started
    for query in queries:
        plan = planned[query.name]
        entry = QueryReport(
            name=query.name, sink=plan.sink, exchanges_planned=plan.exchanges_planned
        )
        progress = [p for p in query.recentProgress if p]
        entry.batches = len({p["batchId"] for p in progress})
        entry.input_rows = sum(int(computed(p, "numInputRows") or 0) for p in progress)
        entry.duration_s = (
            sum(p.get("durationMs", {}).get("triggerExecution", 0) for p in progress) / 1000
        )
        entry.exchanges_executed = _executed_exchanges(query) if remote is None else None
        entry.rows_written = _rows_written(progress)
        entry.state = held_state(job.spark_plan, plan, query.lastProgress)
        for line in state_lines(query.name, entry.state):
            out.write(line)
        entry.rerun_batches = _rerun_batches(reruns, query, progress)
        rerun = entry.rerun_line()
        if rerun is not None:
            out.write(rerun)
        failure = query.exception()
        if failure is not None:
            _failed(module, job, entry, failure, failure_log)
            report.log_file = failure_log.path
        report.queries.append(entry)
    return report


def _failed(
    module: types.ModuleType,
    job: CompiledJob,
    entry: QueryReport,
    failure: BaseException,
    log: FailureLog,
) -> None:
    """A failed query's report: flowc's diagnostic for bad data (E0801) or for Spark's
    failure (E0802-E0804), the full text and stack trace appended to the log."""
    malformed = getattr(module, "malformed_record", None)
    entry.diagnostic = malformed(failure) if malformed is not None else None
    entry.error = (entry.diagnostic or str(failure)).strip().splitlines()[0]
    path = log.record(f"query '{entry.name}' failed", failure)
    if entry.diagnostic is not None:
        entry.code = Code.E0801
        return
    entry.failure = explain(job, entry.name, failure, path)
    entry.code = entry.failure.code if entry.failure is not None else code_of(failure)
    if entry.failure is None:  # no INSERT of that name: the diagnostic has no place
        entry.diagnostic = summary(failure, path, f"query '{entry.name}' failed")


def _rows_written(progress: Sequence[Any]) -> int:
    """Rows the sink took, summed over micro-batches; -1 where the sink does not count."""
    counts = [int((p.get("sink") or {}).get("numOutputRows", -1)) for p in progress]
    return -1 if any(c < 0 for c in counts) else sum(counts)


def _run_batch(
    module: types.ModuleType,
    spark: Any,
    job: CompiledJob,
    report: RunReport,
    started: float,
    out: TextIO,
    remote: str | None,
    failure_log: FailureLog,
) -> RunReport:
    """Batch mode: every INSERT written once over the bounded input, in order."""
    done: list[tuple[str, int, str | None]] = []
    failure: BaseException | None = None
    try:
        module.run_batch(spark, done)
    except _gone_or_failed() as raised:
        error = readable(raised)
        names = [q.name for q in job.spark_plan.queries]
        running = names[len(done) : len(done) + 1]  # the query after the ones done
        ended = _jvm_ended(job, error, remote, [StartedQuery(n) for n in running], failure_log)
        if ended is not None:
            raise ended from None
        if not isinstance(raised, spark_errors()):
            raise
        failure = error
    except Exception as error:
        raise _not_loaded(module, job, error) from None
    report.duration_s = time.monotonic() - started
    results = {name: (rows, plan) for name, rows, plan in done}
    for query in job.spark_plan.queries:
        entry = QueryReport(
            name=query.name, sink=query.sink, exchanges_planned=query.exchanges_planned
        )
        if query.name in results:
            rows, plan = results[query.name]
            entry.batches = 1
            entry.rows_written = rows
            entry.exchanges_executed = count_exchanges(plan) if plan is not None else None
            out.write(f"[{query.name}] batch: {rows} rows written\n")
        elif failure is not None:
            _failed(module, job, entry, failure, FailureLog(job, None, None, report.log_file))
            failure = None  # the next queries did not run
        else:
            entry.error = "not run: an earlier query of the batch job failed"
        report.queries.append(entry)
    return report


def _gone_or_failed() -> tuple[type[BaseException], ...]:
    """Spark's errors, and the refused connection of a JVM that has ended."""
    return (*spark_errors(), ConnectionError)


#: How long a JVM whose connection broke is given to finish ending: its shutdown hooks
#: (stopping the SparkContext) took over 10 s on a loaded machine; Hadoop's shutdown hook
#: manager, which runs them, gives them 30 s.
JVM_EXIT_WAIT = 30.0


def _jvm_ended(
    job: CompiledJob,
    error: BaseException,
    remote: str | None,
    running: Sequence[StartedQuery],
    log: FailureLog,
) -> SparkRefused | None:
    """E0807 when ``error`` came of Spark's JVM having ended (None while it runs, or when
    this process did not start it: Spark Connect)."""
    if remote is not None:
        return None
    from pyspark import SparkContext

    process = getattr(SparkContext._gateway, "proc", None)
    if process is None:
        return None
    exit_code = process.poll()
    if exit_code is None and (
        _connection_lost(error) or _context_stopped(error) or _fatal_in_task(error)
    ):
        try:
            exit_code = process.wait(timeout=JVM_EXIT_WAIT)
        except subprocess.TimeoutExpired:
            return None
    if exit_code is None:
        return None
    spark_log = log.path
    path = log.record("Spark's JVM ended", error)
    py4j_to_log(path)
    diagnostic = jvm_ended(job, exit_code, running, spark_log, path)
    return SparkRefused(f"error[{diagnostic.code}]: {diagnostic.message}\n", diagnostic)


#: What a call into a SparkContext that is being stopped says, when the JVM ending under
#: it answers before the connection breaks (seen in CI: the query's cleanup found
#: ``dagScheduler()`` null).
_STOPPED_CONTEXT = (
    '"org.apache.spark.SparkContext.dagScheduler()" is null',
    "SparkContext was shut down",
    "Cannot call methods on a stopped SparkContext",
)


#: Errors Spark's executor answers by ending the JVM (Utils.isFatalError: a
#: VirtualMachineError, but for Spark's own SparkOutOfMemoryError), as a failed task's
#: reason reads in the job's failure. The driver can hear of the failed task before the
#: JVM has ended: in local mode the executor runs in the driver's JVM.
_FATAL_IN_TASK = re.compile(
    r"(?<![\w.])java\.lang\.(StackOverflowError|OutOfMemoryError|InternalError|UnknownError)\b"
)


def _fatal_in_task(error: BaseException) -> bool:
    """A task failed with an error its executor ends the JVM on."""
    return _FATAL_IN_TASK.search(str(error)) is not None


def _context_stopped(error: BaseException) -> bool:
    """The error came of a SparkContext being stopped: the JVM may be ending."""
    text = str(error)
    return any(sign in text for sign in _STOPPED_CONTEXT)


def _connection_lost(error: BaseException) -> bool:
    """py4j lost its connection to the JVM (Py4JNetworkError, or the empty answer of a
    JVM gone mid-call)."""
    if isinstance(error, ConnectionError | JavaTextLost):
        return True
    names = {kind.__name__ for kind in type(error).__mro__}
    return "Py4JNetworkError" in names or "Answer from Java side is empty" in str(error)


def _not_loaded(module: types.ModuleType, job: CompiledJob, error: Exception) -> Exception:
    """A Python function the job calls could not be loaded (the generated program's
    FunctionNotLoaded): E0282 at its CREATE FUNCTION. Any other exception is returned as it
    is: a bug, to be raised with its traceback."""
    if _versions_refused(module, error):
        return _table_versions(job, str(error))
    not_loaded = getattr(module, "FunctionNotLoaded", None)
    if not_loaded is None or not isinstance(error, not_loaded):
        return error
    text = str(error)
    named = re.match(r"function '([^']+)'", text)
    functions = {f.name: f for f in job.program.functions}
    function = functions.get(named.group(1)) if named else None
    span = function.span if function is not None else job.program.span
    diagnostic = Diagnostic(
        Code.E0282,
        Severity.ERROR,
        text,
        span,
        "check that the module is beside the .flow file (or installed) and defines it",
    )
    return SparkRefused(f"error[E0282]: {text}\n", diagnostic)


def _versions_refused(module: types.ModuleType, error: Exception) -> bool:
    """Whether ``error`` is the generated program's TableVersionsRefused."""
    refused = getattr(module, "TableVersionsRefused", None)
    return refused is not None and isinstance(error, refused)


def _table_versions(job: CompiledJob, text: str) -> SparkRefused:
    """E0269 at the CREATE TABLE of a versioned table with two versions of a key at one
    time (the generated program's table_versions found them when the job started)."""
    named = re.match(r"table '([^']+)'", text)
    tables = {s.name: s for s in job.program.sources}
    table = tables.get(named.group(1)) if named else None
    span = table.span if table is not None else job.program.span
    diagnostic = Diagnostic(
        Code.E0269,
        Severity.ERROR,
        text,
        span,
        "keep one row per key and version time in the table's files (which one is valid "
        "is not in the files: Flink keeps the last one it reads)",
    )
    return SparkRefused(f"error[E0269]: {text}\n", diagnostic)


def _stop_started(spark: Any, running: set[str]) -> None:
    """Stop the queries this run started before one of them was refused."""
    for query in spark.streams.active:
        if query.id not in running:
            try:
                query.stop()
            except spark_errors():
                pass  # the refusal is the error to report


class SparkRefused(Exception):
    """Spark would not start the session or a query (a checkpoint from another job, say):
    exit code 1. ``diagnostic`` places it in the .flow file where flowc can; ``text`` is
    the whole message otherwise."""

    def __init__(self, text: str, diagnostic: Diagnostic | None = None) -> None:
        super().__init__(text)
        self.text = text
        self.diagnostic = diagnostic

    @classmethod
    def of(
        cls,
        job: CompiledJob,
        query: str | None,
        error: BaseException,
        log: FailureLog,
        what: str,
    ) -> SparkRefused:
        error = readable(error)
        path = log.record(what, error)
        diagnostic = explain(job, query, error, path, what)
        return cls(summary(error, path, what), diagnostic)


def _refused(
    job: CompiledJob,
    spark: Any,
    running: set[str],
    checkpoints: str,
    error: BaseException,
    log: FailureLog,
) -> SparkRefused:
    """Spark refused to start a query: stop the ones this run started, and name the
    query whose checkpoint Spark's message names, if it names one."""
    _stop_started(spark, running)
    root = os.path.abspath(checkpoints)
    text = str(readable(error))
    named = [q.name for q in job.spark_plan.queries if os.path.join(root, *q.checkpoint) in text]
    query = named[0] if len(named) == 1 else None
    what = f"Spark could not start query '{query}'" if query else "Spark could not start the job"
    return SparkRefused.of(job, query, error, log, what)


KAFKA_PROVIDER = "org.apache.spark.sql.kafka010.KafkaSourceProvider"


#: What Spark's stateful processor API needs in the Python workers' interpreter (which
#: the generated program makes this one): pandas and pyarrow carry the rows, protobuf the
#: state server's messages (STREAMING_PYTHON_RUNNER_INITIALIZATION_FAILURE without it).
PROCESSOR_PACKAGES = {"pandas": "pandas", "pyarrow": "pyarrow", "google.protobuf": "protobuf"}


def check_processor_packages(job: CompiledJob) -> None:
    """E0816, before Spark starts: a job with a stateful processor (a step reading
    CURRENT_WATERMARK, a DEDUPLICATE ... WITHIN, a streaming OVER window) where this
    interpreter lacks what the processor needs."""
    plan = job.spark_plan
    if not plan.processors:
        return
    missing = [p for module, p in PROCESSOR_PACKAGES.items() if not _importable(module)]
    if not missing:
        return
    first = min(
        [
            *((r.line, r.span, "CURRENT_WATERMARK") for r in plan.watermark_readers.values()),
            *(
                (d.line, d.span, "DEDUPLICATE ... WITHIN")
                for d in plan.within_deduplicators.values()
            ),
            *(
                (o.line, o.span, "An OVER window")
                for o in ([] if plan.batch else plan.over_aggregators.values())
            ),
            *((c.line, c.span, f"The {c.kind}") for c in plan.changelog_processors.values()),
        ],
        key=lambda found: found[0],
    )
    raise CompileError(
        [
            Diagnostic(
                Code.E0816,
                Severity.ERROR,
                f"{first[2]} runs as a Spark stateful processor, which needs "
                f"{', '.join(missing)} in Python, and {sys.executable} has not got "
                f"{'it' if len(missing) == 1 else 'them'}",
                first[1],
                "pip install 'flowc[spark]' into this interpreter (Spark's Python "
                "workers run it too)",
            )
        ]
    )


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing
        return False


def _check_packages(job: CompiledJob, spark: Any) -> None:
    """Fail before any query starts when a connector's Spark package is missing."""
    program = job.program
    connectors = [s.connector for s in program.sources] + [s.connector for s in program.sinks]
    uses_kafka = "kafka" in connectors
    if not uses_kafka:
        return
    try:
        spark._jvm.java.lang.Class.forName(KAFKA_PROVIDER)
    except spark_errors():  # ClassNotFoundException, through py4j
        package = f"org.apache.spark:spark-sql-kafka-0-10_2.13:{spark.version}"
        raise UnsupportedOnSpark(
            "the kafka connector needs Spark's Kafka package, which this Spark does not "
            f"have; run with --set spark.jars.packages={package}"
        ) from None


def _executed_exchanges(query: Any) -> int | None:
    """Exchanges in the query's last executed plan: 0 before its first batch, None when
    Spark cannot say (the query failed before its plan was made)."""
    try:
        execution = query._jsq.streamingQuery().lastExecution()
        if execution is None:
            return 0
        return count_exchanges(str(execution.executedPlan().toString()))
    except spark_errors():
        return None


class StageReruns:
    """Which micro-batches of a query re-ran a Spark stage.

    numInputRows is the source scans' SQL metric, an accumulator Spark adds every
    successful task's count to (failed attempts add nothing: SQL metrics do not count
    failed values). When a stage is resubmitted after a fetch failure (a lost executor or
    shuffle files), map tasks that had already succeeded run and add their rows again;
    nothing in the metric tells those rows apart. A query's jobs run in the job group
    named by its runId, each described with its batch id, and a resubmitted stage's
    attempt number is above 0: that is the evidence looked for here.
    """

    def __init__(self, tracker: Any, store: Any = None, bus: Any = None) -> None:
        self.tracker = tracker
        self.store = store
        #: Spark's listener bus: the status store is filled from it, a moment late.
        self.bus = bus
        #: Finished jobs already looked at: each is looked at once.
        self.seen: set[int] = set()
        self.rerun: dict[str, set[int]] = {}
        #: False once Spark could not be asked: the answer is then unknown.
        self.known = True

    @classmethod
    def of(cls, spark: Any) -> StageReruns:
        watch = cls(spark.sparkContext.statusTracker())
        unreachable: tuple[type[BaseException], ...] = (AttributeError, *spark_errors())
        try:  # Spark's own status store, which holds each job's description
            watch.store = spark._jsc.sc().statusStore()
            watch.bus = spark._jsc.sc().listenerBus()
        except unreachable:
            watch.known = False
        return watch

    def batches(self, query: Any) -> set[int]:
        """The batches of ``query`` whose finished jobs re-ran a stage, so far."""
        run = str(query.runId)
        found = self.rerun.setdefault(run, set())
        if not self.known:
            return found
        try:
            self._settle()
            for job in self.tracker.getJobIdsForGroup(run):
                if job in self.seen:
                    continue
                info = self.tracker.getJobInfo(job)
                if info is None or info.status not in ("SUCCEEDED", "FAILED"):
                    continue  # running: a stage may still be resubmitted
                self.seen.add(job)
                if any(self._resubmitted(stage) for stage in info.stageIds):
                    batch = self._batch_of(job)
                    if batch is None:
                        self.known = False
                    else:
                        found.add(batch)
        except spark_errors():
            self.known = False
        return found

    def _settle(self) -> None:
        """Let the status store take in the events already posted (a finished batch's job
        ends), waiting a second at most: a job still shown running is looked at later."""
        if self.bus is None:
            return
        try:
            self.bus.waitUntilEmpty(1000)
        except spark_errors():
            pass  # still busy: the jobs not yet finished are looked at on the next poll

    def _resubmitted(self, stage: int) -> bool:
        info = self.tracker.getStageInfo(stage)
        return info is not None and int(info.currentAttemptId) > 0

    def _batch_of(self, job: int) -> int | None:
        """The batch id in the job's description (StreamExecution's ``batch = N``)."""
        description = self.store.job(job).description()
        text = str(description.get()) if description.isDefined() else ""
        found = re.search(r"^batch = (\d+)\s*$", text, re.M)
        return int(found.group(1)) if found else None


def _rerun_batches(
    reruns: StageReruns | None, query: Any, progress: Sequence[Any]
) -> list[int] | None:
    """The reported batches that re-ran a stage; None where Spark could not be asked."""
    if reruns is None:
        return None
    found = reruns.batches(query)
    if not reruns.known:
        return None
    return sorted(found & {int(p["batchId"]) for p in progress})


#: What a batch line and the live table say of a batch that re-ran a stage.
RERUN_NOTE = "Spark re-ran a stage of this batch: some rows may be counted twice"


@dataclass(frozen=True, slots=True)
class Progress:
    """One query's latest micro-batch, as both displays show it."""

    query: str
    batch: int
    rows: int
    #: None where Spark has no rate: the first micro-batch a query runs in a session has
    #: no earlier trigger to measure from. Spark Connect leaves the rate out (its JSON
    #: drops the NaN); Spark Classic divides by an infinite time and says 0.0, which no
    #: batch that read rows can measure: that 0.0 is no rate either.
    input_rate: float | None
    processed_rate: float
    batch_ms: int
    watermark: str
    state_rows: int
    written: int
    #: Spark re-ran a stage of this batch, so ``rows`` may count rows twice.
    rerun: bool = False

    @classmethod
    def of(cls, name: str, progress: Any, rerun: bool = False) -> Progress:
        durations = progress.get("durationMs") or {}
        states = progress.get("stateOperators") or []
        rows = int(computed(progress, "numInputRows") or 0)
        rate = _rate(computed(progress, "inputRowsPerSecond"))
        return cls(
            query=name,
            batch=int(progress["batchId"]),
            rows=rows,
            input_rate=None if rate == 0.0 and rows > 0 else rate,
            processed_rate=float(computed(progress, "processedRowsPerSecond") or 0.0),
            batch_ms=int(durations.get("triggerExecution") or 0),
            watermark=_watermark((progress.get("eventTime") or {}).get("watermark")),
            state_rows=sum(int(s.get("numRowsTotal") or 0) for s in states),
            written=int((progress.get("sink") or {}).get("numOutputRows", -1)),
            rerun=rerun,
        )

    def line(self) -> str:
        return (
            f"[{self.query}] batch {self.batch}: {self.rows} rows in"
            + (f" ({RERUN_NOTE}), " if self.rerun else ", ")
            + (f"{self.written} written, " if self.written >= 0 else "")
            + (f"{self.input_rate:.1f} in/s, " if self.input_rate is not None else "")
            + f"{self.processed_rate:.1f} processed/s, {self.batch_ms} ms, "
            f"watermark {self.watermark}, state rows {self.state_rows}\n"
        )


def _rate(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def _watermark(value: object) -> str:
    """The progress's watermark, ``-`` for a query without one, ``none yet`` for one
    whose rows have not set it (Spark says the epoch)."""
    if value is None:
        return "-"
    return "none yet" if value == NO_WATERMARK else str(value)


def progress_table(latest: dict[str, Progress]) -> Any:
    """The live display: one row per query."""
    from rich.table import Table

    table = Table(title="flowc run", expand=False)
    for column in (
        "query",
        "batch",
        "in rows/s",
        "processed rows/s",
        "batch ms",
        "watermark",
        "state rows",
    ):
        left = column in ("query", "watermark")
        table.add_column(column, justify="left" if left else "right", overflow="fold")
    if any(p.rerun for p in latest.values()):
        table.caption = f"* {RERUN_NOTE}"
    for p in latest.values():
        table.add_row(
            p.query,
            str(p.batch),
            ("-" if p.input_rate is None else f"{p.input_rate:,.1f}") + ("*" if p.rerun else ""),
            f"{p.processed_rate:,.1f}",
            str(p.batch_ms),
            p.watermark,
            f"{p.state_rows:,}",
        )
    return table


class ProgressDisplay:
    """A live table on a terminal; one plain line per finished micro-batch otherwise.

    ``reruns`` gives a query's batches that re-ran a stage (StageReruns.batches), whose
    rows in are labelled.
    """

    def __init__(self, out: TextIO, reruns: Callable[[Any], set[int]] | None = None) -> None:
        self.out = out
        self.reruns = reruns
        self.latest: dict[str, Progress] = {}
        self.live: Any = None
        if out.isatty():
            from rich.console import Console
            from rich.live import Live

            self.live = Live(progress_table({}), console=Console(file=out), refresh_per_second=2)
            self.live.start()

    def update(self, queries: Sequence[Any]) -> None:
        for query in queries:
            # every batch since the last update, not only the latest: two micro-batches
            # can finish between polls (a line per batch, batch 0 included)
            recent = [p for p in query.recentProgress if p]
            previous = self.latest.get(query.name)
            if previous is not None and all(int(p["batchId"]) <= previous.batch for p in recent):
                continue
            # a batch's progress comes after its jobs finished: they are all seen here
            rerun = self.reruns(query) if self.reruns is not None else set()
            for progress in recent:
                current = Progress.of(query.name, progress, int(progress["batchId"]) in rerun)
                previous = self.latest.get(query.name)
                if previous is not None and current.batch <= previous.batch:
                    continue
                self.latest[query.name] = current
                if self.live is None:
                    self.out.write(current.line())
                    self.out.flush()
        if self.live is not None:
            self.live.update(progress_table(self.latest))

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
