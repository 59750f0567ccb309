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
from flowc.program import Column, Program
from flowc.spans import Span
from flowc.spark.spark_plan import SparkPlan
from flowc.sql.python_functions import PythonFunction
from flowc.sql.spark_sql import quote_name
from flowc.trust.policy import TrustPolicy

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class SinkOutput:
    """What one INSERT writes: its sink, and the columns of the rows it hands the sink as
    Spark types them, so a platform can create the sink's table, or check its readers,
    before the job runs (docs/api.md). ``tests/test_api.py`` compares them with the
    DataFrame the generated program hands Spark's writer."""

    #: The sink's name, and its connector (``files``, ``postgres``, ``kafka``, ...).
    sink: str
    connector: str
    #: The query's output mode on Spark: ``append``, ``update`` or ``complete``.
    output_mode: str
    #: The columns an upsert sink keeps one row per; None where the sink appends.
    key: tuple[str, ...] | None
    #: In the order written; each ``type`` is Spark SQL's (``BIGINT``, ``ARRAY<STRING>``).
    columns: tuple[Column, ...]
    #: The INSERT (or the query written as a statement) that writes them.
    span: Span

    @property
    def ddl(self) -> str:
        """The columns as Spark's DDL (``StructType.fromDDL`` reads it)."""
        return ", ".join(f"{quote_name(c.name)} {c.type}" for c in self.columns)

    def to_json(self) -> dict[str, object]:
        return {
            "sink": self.sink,
            "connector": self.connector,
            "output_mode": self.output_mode,
            "key": None if self.key is None else list(self.key),
            "columns": [c.to_json() for c in self.columns],
            "line": self.span.line,
        }


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

    def outputs(self) -> tuple[SinkOutput, ...]:
        """What each INSERT writes, in the program's order (one per Spark query)."""
        return tuple(
            SinkOutput(
                sink=insert.sink,
                connector=query.connector,
                output_mode=query.output_mode,
                key=query.upsert_key,
                columns=tuple(Column(c.name, c.type) for c in insert.stream.schema),
                span=insert.span,
            )
            for insert, query in zip(self.program.inserts, self.spark_plan.queries, strict=True)
        )

    def pyspark_program(self) -> str:
        """The PySpark program ``flowc run`` runs: one Python module, importable without
        flowc, whose ``main()`` runs the job and ``start_queries(spark, checkpoint_dir,
        available_now)`` starts its queries in a session of the caller's. Only a job
        compiled ``for_spark=True`` has one: Spark's own limits are errors there."""
        if not self.for_spark:
            raise ValueError(
                "the PySpark program of a job compiled without for_spark=True: compile it "
                "with flowc.compile(..., for_spark=True), which checks Spark's own limits"
            )
        from flowc.spark.codegen import generate_pyspark

        return generate_pyspark(self)


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
