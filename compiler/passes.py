"""The compiler's passes, in the order they run (cf. sqlglot's optimizer ``RULES``).

Each pass reads the previous stage's IR from the :class:`~flowc.job.CompiledJob` under
construction and returns the next; compilation stops after the first pass that reported
an error, so later passes only ever see a program that earlier ones accepted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flowc.analyze import analyze
from flowc.diagnostics import Reporter
from flowc.job_graph import build_job_graph
from flowc.parser import parse
from flowc.physical import build_physical_plan
from flowc.spark_checks import check_spark
from flowc.spark_plan import build_spark_plan
from flowc.stream_graph import build_stream_graph
from flowc.streaming import check_streaming
from flowc.transformations import build_transformations


@dataclass(frozen=True, slots=True)
class Pass:
    """``stage`` is the CompiledJob attribute the pass fills in."""

    stage: str
    run: Callable[[Any, Reporter], Any]


def _parse(job: Any, reporter: Reporter) -> Any:
    return parse(job.source, job.file, reporter)


def _analyze(job: Any, reporter: Reporter) -> Any:
    return analyze(job.ast, reporter, job.overrides, job.trust)


def _streaming_rules(job: Any, reporter: Reporter) -> Any:
    """Spark's limits: kept apart, so they stop only what targets Spark (see job.compile)."""
    spark = Reporter()
    check_streaming(job.program, spark)
    job.spark_diagnostics = tuple(spark.sorted())
    return job.program


def _transformations(job: Any, reporter: Reporter) -> Any:
    return build_transformations(job.program, reporter)


def _stream_graph(job: Any, reporter: Reporter) -> Any:
    return build_stream_graph(job.transformations, reporter)


def _job_graph(job: Any, reporter: Reporter) -> Any:
    return build_job_graph(job.stream_graph, reporter)


def _spark_plan(job: Any, reporter: Reporter) -> Any:
    """Spark's realization; what Spark cannot run is kept apart, as Spark's rules are.
    The backend's checks write every expression as Spark SQL, so they run only where
    Spark is the target."""
    if job.for_spark:
        spark = Reporter()
        check_spark(job.program, spark)
        job.spark_diagnostics = (*job.spark_diagnostics, *spark.sorted())
    return build_spark_plan(job.program, job.transformations, job.stream_graph)


def _physical_plan(job: Any, reporter: Reporter) -> Any:
    return build_physical_plan(job.job_graph, job.spark_plan)


PASSES: tuple[Pass, ...] = (
    Pass("ast", _parse),
    Pass("program", _analyze),
    Pass("program", _streaming_rules),
    Pass("transformations", _transformations),
    Pass("stream_graph", _stream_graph),
    Pass("job_graph", _job_graph),
    Pass("spark_plan", _spark_plan),
    Pass("physical_plan", _physical_plan),
)
