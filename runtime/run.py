"""``flowc run``: compile, generate the PySpark program, and run it here.

The program run is exactly the one ``--emit pyspark`` prints, loaded as a module, so
``spark-submit`` of that file and ``flowc run`` do the same work. This module imports
pyspark (through the generated program); the compiler never does.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
import time
import types
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from flowc.job import CompiledJob
from flowc.runtime.codegen import UnsupportedOnSpark, generate_pyspark
from flowc.runtime.realization import DEFAULT_CHECKPOINT_ROOT

_EXCHANGE = re.compile(r"^[\s:+\-|]*Exchange ", re.M)


@dataclass(slots=True)
class QueryReport:
    name: str
    sink: str
    exchanges_planned: int
    batches: int = 0
    input_rows: int = 0
    duration_s: float = 0.0
    exchanges_executed: int | None = 0
    error: str | None = None
    #: A whole flowc diagnostic for the failure, where flowc can explain it (bad data).
    diagnostic: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "sink": self.sink,
            "batches": self.batches,
            "input_rows": self.input_rows,
            "duration_s": round(self.duration_s, 3),
            "exchanges_planned": self.exchanges_planned,
            "exchanges_executed": self.exchanges_executed,
            "error": self.error,
        }


@dataclass(slots=True)
class RunReport:
    job: str
    duration_s: float = 0.0
    queries: list[QueryReport] = field(default_factory=list)
    stopped_by_user: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "duration_s": round(self.duration_s, 3),
            "stopped_by_user": self.stopped_by_user,
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


def count_exchanges(plan_text: str) -> int:
    """Shuffle exchanges in an executed plan's tree (a coalesce is no exchange).

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
) -> RunReport:
    """Start every query of the job and wait for them; Ctrl-C stops them cleanly."""
    module = load_program(job)
    from pyspark.errors import PySparkException
    folder = base_dir if base_dir is not None else str(Path(job.file).parent)
    module.__dict__["BASE_DIR"] = base = os.path.abspath(folder)
    checkpoints = checkpoint_dir or os.path.join(base, DEFAULT_CHECKPOINT_ROOT)
    planned = {q["name"]: q for q in (job.physical_plan.spark or {}).get("queries", [])}
    report = RunReport(job=job.program.settings.job_name)
    started = time.monotonic()
    spark = module.start_session(master, remote)
    if remote is None:
        _check_packages(job, spark)
    try:
        queries = module.start_queries(spark, checkpoints, available_now)
    except PySparkException as error:
        raise SparkRefused(str(error).strip()) from None
    display = _Display(out)
    try:
        with _interrupts() as interrupted:
            while any(q.isActive for q in queries) and not interrupted:
                time.sleep(poll_seconds)
                display.update(queries)
                if any(not q.isActive and q.exception() is not None for q in queries):
                    break  # one query failed: the job has failed, as awaitAnyTermination
            if interrupted:
                report.stopped_by_user = True
            for query in queries:
                if query.isActive:
                    query.stop()
        display.update(queries)
    finally:
        display.close()
    if report.stopped_by_user:
        out.write("stopped: each query committed its running micro-batch\n")
    report.duration_s = time.monotonic() - started
    for query in queries:
        plan = planned.get(query.name, {})
        entry = QueryReport(
            name=query.name,
            sink=str(plan.get("sink", {}).get("name", query.name)),
            exchanges_planned=int(plan.get("exchanges_planned", 0)),
        )
        progress = [p for p in query.recentProgress if p]
        entry.batches = len({p["batchId"] for p in progress})
        entry.input_rows = sum(int(p.get("numInputRows") or 0) for p in progress)
        entry.duration_s = (
            sum(p.get("durationMs", {}).get("triggerExecution", 0) for p in progress) / 1000
        )
        entry.exchanges_executed = _executed_exchanges(query) if remote is None else None
        failure = query.exception()
        if failure is not None:
            explain = getattr(module, "malformed_record", None)
            entry.diagnostic = explain(failure) if explain is not None else None
            entry.error = (entry.diagnostic or str(failure)).splitlines()[0]
        report.queries.append(entry)
    return report


class SparkRefused(Exception):
    """Spark would not start a query (a checkpoint from another job, say): exit code 1."""


KAFKA_PROVIDER = "org.apache.spark.sql.kafka010.KafkaSourceProvider"


def _check_packages(job: CompiledJob, spark: Any) -> None:
    """Fail before any query starts when a connector's Spark package is missing."""
    program = job.program
    connectors = [s.connector for s in program.sources] + [s.connector for s in program.sinks]
    uses_kafka = "kafka" in connectors
    if not uses_kafka:
        return
    try:
        spark._jvm.java.lang.Class.forName(KAFKA_PROVIDER)
    except Exception:
        package = f"org.apache.spark:spark-sql-kafka-0-10_2.13:{spark.version}"
        raise UnsupportedOnSpark(
            "the kafka connector needs Spark's Kafka package, which this Spark does not "
            f"have; run with --set spark.jars.packages={package}"
        ) from None


def _executed_exchanges(query: Any) -> int:
    try:
        execution = query._jsq.streamingQuery().lastExecution()
    except Exception:  # the query never ran a batch
        return 0
    if execution is None:
        return 0
    return count_exchanges(str(execution.executedPlan().toString()))


@dataclass(frozen=True, slots=True)
class Progress:
    """One query's latest micro-batch, as both displays show it."""

    query: str
    batch: int
    rows: int
    input_rate: float
    processed_rate: float
    batch_ms: int
    watermark: str
    state_rows: int

    @classmethod
    def of(cls, name: str, progress: Any) -> Progress:
        durations = progress.get("durationMs") or {}
        states = progress.get("stateOperators") or []
        return cls(
            query=name,
            batch=int(progress["batchId"]),
            rows=int(progress.get("numInputRows") or 0),
            input_rate=float(progress.get("inputRowsPerSecond") or 0.0),
            processed_rate=float(progress.get("processedRowsPerSecond") or 0.0),
            batch_ms=int(durations.get("triggerExecution") or 0),
            watermark=str((progress.get("eventTime") or {}).get("watermark", "-")),
            state_rows=sum(int(s.get("numRowsTotal") or 0) for s in states),
        )

    def line(self) -> str:
        return (
            f"[{self.query}] batch {self.batch}: {self.rows} rows, {self.input_rate:.1f} in/s, "
            f"{self.processed_rate:.1f} processed/s, {self.batch_ms} ms, "
            f"watermark {self.watermark}, state rows {self.state_rows}\n"
        )


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
    for p in latest.values():
        table.add_row(
            p.query,
            str(p.batch),
            f"{p.input_rate:,.1f}",
            f"{p.processed_rate:,.1f}",
            str(p.batch_ms),
            p.watermark,
            f"{p.state_rows:,}",
        )
    return table


class _Display:
    """A live table on a terminal; one plain line per finished micro-batch otherwise."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.latest: dict[str, Progress] = {}
        self.live: Any = None
        if out.isatty():
            from rich.console import Console
            from rich.live import Live

            self.live = Live(progress_table({}), console=Console(file=out), refresh_per_second=2)
            self.live.start()

    def update(self, queries: Sequence[Any]) -> None:
        for query in queries:
            progress = query.lastProgress
            if not progress:
                continue
            current = Progress.of(query.name, progress)
            previous = self.latest.get(query.name)
            if previous is not None and previous.batch == current.batch:
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


def write_report(report: RunReport, path: str) -> None:
    Path(path).write_text(json.dumps(report.to_json(), indent=2) + "\n", encoding="utf-8")
