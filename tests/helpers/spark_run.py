"""Compiling a job and running it on the shared local SparkSession, in this process."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import flowc
from flowc.runtime.run import load_program


def compiled(tmp_path: Path, program: str) -> flowc.CompiledJob:
    """The job with Spark's rules kept apart, as the Flink plans are built."""
    flow = tmp_path / "job.flow"
    flow.write_text(program, encoding="utf-8")
    return flowc.compile(program, str(flow))


def spark_codes(job: flowc.CompiledJob) -> set[str]:
    """The codes of the Spark rules' errors (W0040, state that grows forever, is a warning:
    Spark runs the query)."""
    return {d.code for d in job.spark_diagnostics if d.severity.name == "ERROR"}


class Refused(Exception):
    """Spark refused to start a query: its error condition."""

    def __init__(self, condition: str, message: str) -> None:
        super().__init__(f"{condition}: {message}")
        self.condition = condition


def run_generated(
    spark: Any,
    tmp_path: Path,
    job: flowc.CompiledJob,
    edit: Callable[[str], str] | None = None,
) -> None:
    """Start the job's generated queries (``edit``: a change to the generated text) with
    availableNow and wait for them; Spark refusing one at start raises :class:`Refused`."""
    from pyspark.errors import PySparkException

    module = load_program(job)
    if edit is not None:
        from flowc.spark.codegen import generate_pyspark

        text = edit(generate_pyspark(job))
        module.__dict__.clear()
        exec(compile(text, "<edited job>", "exec"), module.__dict__)
    module.__dict__["BASE_DIR"] = str(tmp_path)
    try:
        queries = module.start_queries(spark, str(tmp_path / "checkpoints"), True)
    except PySparkException as error:
        for query in spark.streams.active:
            query.stop()
        raise Refused(str(error.getCondition()), str(error)) from None
    for query in queries:
        query.awaitTermination()
        assert query.exception() is None, query.exception()


def run_in(job: flowc.CompiledJob, folder: Path) -> Any:
    """``flowc run --available-now`` of the job in ``folder`` (its base directory, and its
    checkpoints under ``checkpoints/``), in this process: the run's report."""
    from flowc.runtime.run import run_job

    return run_job(
        job,
        available_now=True,
        checkpoint_dir=str(folder / "checkpoints"),
        base_dir=str(folder),
        out=io.StringIO(),
    )


def table(spark: Any, name: str) -> list[tuple[Any, ...]]:
    return sorted(tuple(row) for row in spark.sql(f"SELECT * FROM `{name}`").collect())


def into_memory(text: str) -> str:
    """The generated text with its noop sink made a memory table (flowc's memory sink takes
    append and complete mode only; Spark's takes update as well), so the rows can be read."""
    assert text.count("writer.format('noop')") == 1
    return text.replace("writer.format('noop')", "writer.format('memory')")
