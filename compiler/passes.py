"""The compiler's passes, in the order they run (cf. sqlglot's optimizer ``RULES``).

Each pass is a typed function: it reads the stages made before it from the
:class:`~flowc.job.CompiledJob` under construction and returns its own stage, which only
the driver (:func:`flowc.driver.compile`) stores. Compilation stops after the first pass that
reported an error, so later passes only ever see a program that earlier ones accepted.

Spark's limits (the streaming rules, E07xx, and the Spark backend's checks) report into a
reporter of their own: their diagnostics are a stage, kept apart from the plans' errors,
so that they stop only what targets Spark (see ``flowc.driver.compile``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from flowc import ast
from flowc.analyze import analyze
from flowc.analyze.test_form import test_program
from flowc.analyze.udfs import check_function_sources
from flowc.diagnostics import Diagnostic, Reporter, Severity
from flowc.fast_dataclass import dataclass
from flowc.graph.changelog import infer_changelog_modes
from flowc.graph.job_graph import JobGraph, build_job_graph
from flowc.graph.physical import PhysicalPlan, build_physical_plan
from flowc.graph.stream_graph import StreamGraph, build_stream_graph
from flowc.graph.transformations import TransformationTree, build_transformations
from flowc.job import CompiledJob, Stage, stages
from flowc.program import Program
from flowc.spark.changelog_refusals import check_changelog_refusals, within
from flowc.spark.spark_checks import check_spark
from flowc.spark.spark_plan import SparkPlan, build_spark_plan
from flowc.spark.streaming import (
    check_current_watermark,
    check_streaming,
    check_temporal_joins,
    choose_shown_modes,
)
from flowc.syntax.parser import parse

T = TypeVar("T")


class CompilerPass(Protocol):
    """What the driver runs: a pass's name, and the step that makes and stores its stage."""

    @property
    def name(self) -> str: ...

    def apply(self, job: CompiledJob, reporter: Reporter) -> None: ...


@dataclass(frozen=True, slots=True)
class Pass(Generic[T]):
    """A pass that makes ``stage`` from the job's earlier stages."""

    stage: Stage[T]
    run: Callable[[CompiledJob, Reporter], T]

    @property
    def name(self) -> str:
        return self.stage.name

    def apply(self, job: CompiledJob, reporter: Reporter) -> None:
        self.stage.store(job, self.run(job, reporter))


def _parse(job: CompiledJob, reporter: Reporter) -> ast.Program:
    return parse(job.source, job.file, reporter)


def _analyze(job: CompiledJob, reporter: Reporter) -> Program:
    program = analyze(job.ast, reporter, job.overrides, job.trust, job.functions)
    if not reporter.has_errors:
        check_temporal_joins(program, reporter)
        check_current_watermark(program, reporter)
        program = choose_shown_modes(program)
    if job.test_inputs is not None and not reporter.has_errors:
        # flowc test: the program as written is checked above; its test form is planned
        program = test_program(program, job.test_inputs, job.test_outputs or {})
    return program


def _streaming_rules(job: CompiledJob, reporter: Reporter) -> tuple[Diagnostic, ...]:
    """Spark Structured Streaming's rules (E07xx), whatever the target; and the steps and
    sinks Flink refuses over updates (E0745-E0748), errors whatever the target, which take
    the place of Spark's rules where both refuse (one error, not two: a Spark diagnostic
    inside what a refusal covers is dropped). A program refused so stops here, with the
    rest of Spark's errors where Spark is the target."""
    rules = Reporter()
    check_streaming(job.program, rules)
    covered = check_changelog_refusals(job.program, reporter)
    kept = tuple(d for d in rules.sorted() if not any(within(d.span, c) for c in covered))
    if covered and job.for_spark:
        reporter.diagnostics.extend(d for d in kept if d.severity is Severity.ERROR)
    return kept


def _transformations(job: CompiledJob, reporter: Reporter) -> TransformationTree:
    return build_transformations(job.program, reporter)


def _stream_graph(job: CompiledJob, reporter: Reporter) -> StreamGraph:
    graph = build_stream_graph(job.transformations, reporter)
    return infer_changelog_modes(graph, job.program, job.transformations)


def _job_graph(job: CompiledJob, reporter: Reporter) -> JobGraph:
    return build_job_graph(job.stream_graph, reporter)


def _spark_checks(job: CompiledJob, reporter: Reporter) -> tuple[Diagnostic, ...]:
    """What the Spark backend cannot write (E0720, E0724, E0725). They write every
    expression as Spark SQL, so they run only where Spark is the target."""
    if not job.for_spark:
        return ()
    backend = Reporter()
    check_function_sources(
        job.program, job.trust.base(job.file), backend, trusted=job.trust.trusted
    )
    check_spark(job.program, backend)
    return tuple(backend.sorted())


def _spark_plan(job: CompiledJob, reporter: Reporter) -> SparkPlan:
    return build_spark_plan(job.program, job.transformations, job.stream_graph, job.job_graph)


def _physical_plan(job: CompiledJob, reporter: Reporter) -> PhysicalPlan:
    return build_physical_plan(job.job_graph, job.spark_plan)


PASSES: tuple[CompilerPass, ...] = (
    Pass(stages.AST, _parse),
    Pass(stages.PROGRAM, _analyze),
    Pass(stages.STREAMING_DIAGNOSTICS, _streaming_rules),
    Pass(stages.TRANSFORMATIONS, _transformations),
    Pass(stages.STREAM_GRAPH, _stream_graph),
    Pass(stages.JOB_GRAPH, _job_graph),
    Pass(stages.BACKEND_DIAGNOSTICS, _spark_checks),
    Pass(stages.SPARK_PLAN, _spark_plan),
    Pass(stages.PHYSICAL_PLAN, _physical_plan),
)
