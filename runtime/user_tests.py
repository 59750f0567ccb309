"""``flowc test`` on Spark: each test runs the job's generated program over the rows it
gives and compares what each sink holds (:mod:`flowc.usertest` reads and compares).

Each source reads the test's rows from JSON files, one per micro-batch, modified one after
the other (Spark reads them in that order); each upsert sink (files in update mode,
postgres) is a files upsert sink in the test's folder, written by the code ``flowc run``
runs, and read back as the table its ``_current`` file names (so an updating pipeline's
updates and deletes are applied, as the job's sink applies them); each other sink is
Spark's memory sink. The queries
run as ``flowc run --available-now`` does: until the given rows are read, so a window is
written only once a later row's watermark has passed its end, as the job would write it.
A test with ``mode: batch`` runs the job as ``flowc run --batch`` does: every result of
the given rows, final.
"""

from __future__ import annotations

import datetime
import decimal
import json
import os
import tempfile
import time
from typing import Any

from flowc.diagnostics import CompileError, render_text
from flowc.driver import compile_test_form
from flowc.errorcodes import Code
from flowc.job import CompiledJob
from flowc.runtime.failures import code_of, explain, readable, spark_errors
from flowc.runtime.run import load_program
from flowc.usertest import (
    Row,
    TestFile,
    TestOutcome,
    UserTest,
    compare,
    diff_text,
)


def run_test(spark: Any, job: CompiledJob, test: UserTest, file: TestFile) -> TestOutcome:
    """One test: a fresh folder for its inputs and checkpoints, the job's queries run to
    the end of the given rows, each expected sink compared."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="flowc-test-") as folder:
        inputs = {s.name: os.path.join(folder, "in", s.name) for s in job.program.sources}
        outputs = {s.name: os.path.join(folder, "out", s.name) for s in job.program.sinks}
        given = {g.source: g for g in test.given}
        for name, path in inputs.items():
            os.makedirs(path)
            if name in given:
                _write_batches(path, [list(b) for b in given[name].batches])
        try:
            form = compile_test_form(job, inputs, mode=test.mode, outputs=outputs)
        except CompileError as error:  # the job in the test's mode: refused as flowc run would
            diagnostics = render_text(list(error.diagnostics), {job.file: job.source}, False)
            seconds = time.monotonic() - started
            return TestOutcome(file.path, test.name, seconds, error=diagnostics.rstrip())
        module = load_program(form)
        # The job's folder: its Python functions import from there; every source and sink
        # of the test form has a path of its own (or none).
        module.__dict__["BASE_DIR"] = os.path.abspath(os.path.dirname(job.file) or ".")
        awaited: str | None = None  # the query whose end is awaited, when one fails
        for query in spark.streams.active:  # a test before that failed half-way
            query.stop()
        try:
            if form.spark_plan.batch:  # one batch job per INSERT; each memory sink a temporary view
                names = [name for name, _, _ in module.run_batch(spark)]
            else:
                queries = module.start_queries(spark, os.path.join(folder, "checkpoints"), True)
                for query in queries:
                    awaited = query.name
                    query.awaitTermination()
                names = [query.name for query in queries]
        except Exception as error:
            refused = getattr(module, "TableVersionsRefused", None)
            if not isinstance(error, spark_errors()) and not (
                refused is not None and isinstance(error, refused)
            ):
                raise  # a bug: its traceback
            for query in spark.streams.active:
                query.stop()
            seconds = time.monotonic() - started
            shown = _first_line(error)
            if code_of(readable(error)) is Code.E0806:  # the sink's own diagnostic, located
                found = explain(form, awaited, readable(error), None)
                if found is not None:
                    shown = render_text([found], {job.file: job.source}, False).rstrip()
            return TestOutcome(file.path, test.name, seconds, error=shown)
        failures = []
        for expected in test.expect:
            if form.program.sink(expected.sink).connector == "files":  # an upsert table
                rows, columns = _upsert_table(spark, outputs[expected.sink], form, expected.sink)
            else:
                frame = spark.table(f"`{expected.sink}`")
                rows = [r.asDict(recursive=True) for r in frame.collect()]
                columns = list(frame.columns)
            result = compare(expected, rows, columns)
            if not result.passed:
                failures.append(diff_text(result))
        for name in names:
            spark.catalog.dropTempView(name)
    return TestOutcome(
        file.path,
        test.name,
        time.monotonic() - started,
        failure="\n".join(failures) if failures else None,
    )


def _upsert_table(
    spark: Any, path: str, form: CompiledJob, sink: str
) -> tuple[list[Row], list[str]]:
    """The rows of the files upsert table at ``path``: the version its ``_current`` file
    names, as a reader of the job's table reads it; none before the first write."""
    pointer = os.path.join(path, "_current")
    if not os.path.exists(pointer):
        written = next(i.stream.schema for i in form.program.inserts if i.sink == sink)
        return [], [c.name for c in written]
    with open(pointer, encoding="utf-8") as handle:
        version = json.load(handle)["version"]
    frame = spark.read.parquet(os.path.join(path, version))
    return [r.asDict(recursive=True) for r in frame.collect()], list(frame.columns)


def _write_batches(folder: str, batches: list[list[Row]]) -> None:
    stamp = time.time() - 3600
    for index, rows in enumerate(batches):
        path = os.path.join(folder, f"batch-{index:04d}.json")
        with open(path, "w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row, default=_json_value) + "\n")
        os.utime(path, (stamp + index, stamp + index))


def _json_value(value: object) -> object:
    if isinstance(value, datetime.datetime | datetime.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    raise TypeError(f"cannot write {value!r} as JSON")


def _first_line(error: BaseException) -> str:
    text = str(readable(error)).strip()  # py4j's text, while the JVM answers
    return text.splitlines()[0] if text else type(error).__name__
