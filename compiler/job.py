"""The compiled job: every stage's IR, filled in pass by pass (by :mod:`flowc.driver`)."""

from __future__ import annotations

from dataclasses import field
from typing import Generic, TypeVar

from flowc import ast
from flowc.diagnostics import Diagnostic
from flowc.fast_dataclass import dataclass
from flowc.graph.job_graph import JobGraph
from flowc.graph.physical import PhysicalPlan
from flowc.graph.stream_graph import StreamGraph
from flowc.graph.transformations import TransformationTree
from flowc.program import Program
from flowc.spark.spark_plan import SparkPlan
from flowc.sql.python_functions import PythonFunction
from flowc.trust.policy import TrustPolicy

T = TypeVar("T")


@dataclass(slots=True)
class CompiledJob:
    """What :func:`flowc.compile` returns: the source, each stage, and any warnings.

    The stages (the fields after ``source``) are filled by the driver only, one a pass
    (:mod:`flowc.passes`), in this order."""

    file: str
    source: str
    ast: ast.Program = field(init=False)
    program: Program = field(init=False)
    #: Spark Structured Streaming's rules (E07xx), kept apart from the plans' errors.
    streaming_diagnostics: tuple[Diagnostic, ...] = field(init=False, default=())
    transformations: TransformationTree = field(init=False)
    stream_graph: StreamGraph = field(init=False)
    job_graph: JobGraph = field(init=False)
    #: What the Spark backend cannot write (only checked when compiling for Spark).
    backend_diagnostics: tuple[Diagnostic, ...] = field(init=False, default=())
    spark_plan: SparkPlan = field(init=False)
    physical_plan: PhysicalPlan = field(init=False)
    diagnostics: tuple[Diagnostic, ...] = ()
    #: Compiled to run on Spark: the Spark backend's own checks run too.
    for_spark: bool = False
    #: Every ``--set KEY=VALUE``: settings and ``source_or_sink.option``s, as given.
    overrides: dict[str, str] = field(default_factory=dict)
    #: How far the program is trusted (docs/security.md).
    trust: TrustPolicy = field(default_factory=TrustPolicy)
    #: The Python callables given to :func:`compile` (``functions=``).
    functions: tuple[PythonFunction, ...] = ()
    #: ``flowc test``'s substitutions (``test_inputs=``): source name -> the folder of the
    #: test's rows; the passes plan the program's test form (:mod:`flowc.analyze.test_form`).
    test_inputs: dict[str, str] | None = None
    #: ``flowc test``'s upsert tables (``test_outputs=``): sink name -> the folder where an
    #: upsert sink of that name keeps its table in the test form.
    test_outputs: dict[str, str] | None = None

    @property
    def spark_diagnostics(self) -> tuple[Diagnostic, ...]:
        """What stops the job on Spark only: the streaming rules, then the backend's checks."""
        return (*self.streaming_diagnostics, *self.backend_diagnostics)


class Stage(Generic[T]):
    """The typed name of one of :class:`CompiledJob`'s stages: a pass returns a ``T``,
    and the driver stores it here (tests/test_passes.py checks each name and type)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def store(self, job: CompiledJob, value: T) -> None:
        setattr(job, self.name, value)


class stages:  # a namespace of constants, read as ``stages.AST``
    """The job's stages, in the order the passes make them."""

    AST = Stage[ast.Program]("ast")
    PROGRAM = Stage[Program]("program")
    STREAMING_DIAGNOSTICS = Stage[tuple[Diagnostic, ...]]("streaming_diagnostics")
    TRANSFORMATIONS = Stage[TransformationTree]("transformations")
    STREAM_GRAPH = Stage[StreamGraph]("stream_graph")
    JOB_GRAPH = Stage[JobGraph]("job_graph")
    BACKEND_DIAGNOSTICS = Stage[tuple[Diagnostic, ...]]("backend_diagnostics")
    SPARK_PLAN = Stage[SparkPlan]("spark_plan")
    PHYSICAL_PLAN = Stage[PhysicalPlan]("physical_plan")
