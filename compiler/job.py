"""The compiled job: every stage's IR, filled in pass by pass, and the public compile API."""

from __future__ import annotations

import gc
from dataclasses import dataclass, field
from pathlib import Path

from flowc import ast
from flowc.diagnostics import CompileError, Diagnostic, Reporter
from flowc.job_graph import JobGraph
from flowc.physical import PhysicalPlan
from flowc.program import Program
from flowc.stream_graph import StreamGraph
from flowc.transformations import TransformationTree


@dataclass(slots=True)
class CompiledJob:
    """What :func:`flowc.compile` returns: the source, each stage, and any warnings."""

    file: str
    source: str
    ast: ast.Program = field(init=False)
    program: Program = field(init=False)
    transformations: TransformationTree = field(init=False)
    stream_graph: StreamGraph = field(init=False)
    job_graph: JobGraph = field(init=False)
    physical_plan: PhysicalPlan = field(init=False)
    diagnostics: tuple[Diagnostic, ...] = ()
    spark_diagnostics: tuple[Diagnostic, ...] = ()
    option_overrides: dict[str, str] = field(default_factory=dict)


def compile(
    text: str,
    filename: str = "<string>",
    *,
    for_spark: bool = False,
    option_overrides: dict[str, str] | None = None,
) -> CompiledJob:
    """Compile flow source text; raises :class:`CompileError` with every diagnostic on errors.

    Spark Structured Streaming's own limits (E07xx: output modes, watermarks) do not stop
    the plans, which are Flink's; they are in ``spark_diagnostics``, and with
    ``for_spark=True`` (checking, running, generating PySpark) they are errors too.
    """
    from flowc.passes import PASSES

    job = CompiledJob(
        file=filename,
        source=text.removeprefix("\ufeff"),
        option_overrides=dict(option_overrides or {}),
    )
    reporter = Reporter()
    # Compiling allocates many small objects and frees nothing cyclic on the way; the
    # cyclic collector would only rescan them (a fifth of the time on large jobs).
    collecting = gc.isenabled()
    gc.disable()
    try:
        for compiler_pass in PASSES:
            setattr(job, compiler_pass.stage, compiler_pass.run(job, reporter))
            if reporter.has_errors:
                raise CompileError(reporter.sorted())
    finally:
        if collecting:
            gc.enable()
    job.diagnostics = tuple(reporter.sorted())
    if for_spark and job.spark_diagnostics:
        everything = [*job.diagnostics, *job.spark_diagnostics]
        raise CompileError(sorted(everything, key=lambda d: (d.span.line, d.span.column)))
    return job


def compile_file(path: str | Path, *, for_spark: bool = False) -> CompiledJob:
    """Compile a .flow file (UTF-8); file errors raise OSError or UnicodeDecodeError."""
    path = Path(path)
    return compile(path.read_bytes().decode("utf-8"), filename=str(path), for_spark=for_spark)
