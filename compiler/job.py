"""The compiled job: every stage's IR, filled in pass by pass, and the public compile API."""

from __future__ import annotations

import gc
import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TypeVar

from flowc import ast
from flowc.diagnostics import CompileError, Diagnostic, Reporter, Severity
from flowc.errorcodes import Code
from flowc.job_graph import JobGraph
from flowc.limits import MAX_LITERAL_CHARS, MAX_SOURCE_CHARS, SharedSetting
from flowc.parser import LineIndex, deep_recursion, long_literals
from flowc.physical import PhysicalPlan
from flowc.program import Program
from flowc.python_functions import PythonFunction
from flowc.spans import Span, line_column
from flowc.spark_plan import SparkPlan
from flowc.stream_graph import StreamGraph
from flowc.transformations import TransformationTree
from flowc.trust import TrustPolicy

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
    #: test's rows; the passes plan the program's test form (:mod:`flowc.usertest.harness`).
    test_inputs: dict[str, str] | None = None

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


def compile(
    text: str,
    filename: str = "<string>",
    *,
    for_spark: bool = False,
    option_overrides: Mapping[str, str] | None = None,
    overrides: Mapping[str, str] | None = None,
    trusted: bool = True,
    base_dir: str | None = None,
    functions: Sequence[PythonFunction] = (),
    allowed_functions: Collection[str] = (),
    test_inputs: Mapping[str, str] | None = None,
) -> CompiledJob:
    """Compile flow source text; raises :class:`CompileError` with every diagnostic on errors.

    ``overrides`` are ``flowc run --set KEY=VALUE``: a setting (as ``SET KEY = VALUE;``
    would set it) or a source's or sink's option (``name.option``), each one value, never
    program text (``option_overrides`` is the older name; both may be given).
    ``trusted=False`` compiles a program from someone flowc should not trust: it cannot
    reach the JVM, the process or files outside ``base_dir`` (default: the file's folder);
    docs/security.md has the rules.

    ``functions`` are Python callables the program may call by name without declaring
    them (:class:`flowc.PythonFunction`, with their types); ``allowed_functions`` the
    ``module:function`` targets an untrusted program may declare with CREATE FUNCTION.

    ``test_inputs`` compiles ``flowc test``'s form of the job: every source reads JSON
    files from ``test_inputs[name]``, every sink is Spark's memory sink; the program is
    checked as written, and planned (and generated) in that form.

    Spark Structured Streaming's own limits (E07xx: output modes, watermarks) do not stop
    the plans, which are Flink's; they are in ``spark_diagnostics``, and with
    ``for_spark=True`` (checking, running, generating PySpark) they are errors too.
    """
    from flowc.passes import PASSES

    job = CompiledJob(
        file=filename,
        source=text.removeprefix("\ufeff"),
        overrides={**(option_overrides or {}), **(overrides or {})},
        trust=TrustPolicy(
            trusted=trusted, base_dir=base_dir, functions=frozenset(allowed_functions)
        ),
        for_spark=for_spark,
        functions=tuple(functions),
        test_inputs=dict(test_inputs) if test_inputs is not None else None,
    )
    reporter = Reporter()
    check_input_bounds(job.source, filename, reporter)
    if reporter.has_errors:
        raise CompileError(reporter.sorted())
    with _process_settings_held():
        for compiler_pass in PASSES:
            compiler_pass.apply(job, reporter)
            if reporter.has_errors:
                raise CompileError(reporter.sorted())
    job.diagnostics = tuple(reporter.sorted())
    if for_spark and job.spark_diagnostics:
        everything = sorted(
            [*job.diagnostics, *job.spark_diagnostics],
            key=lambda d: (d.span.line, d.span.column),
        )
        if any(d.severity is Severity.ERROR for d in job.spark_diagnostics):
            raise CompileError(everything)
        job.diagnostics = tuple(everything)  # warnings only (W0040): shown, never blocking
    return job


#: A UTF-16 surrogate on its own: a str may hold one, no encoding can write it (the JSON
#: and HTML writers, a terminal, Spark).
_SURROGATE = re.compile("[\ud800-\udfff]")


def check_input_bounds(text: str, file: str, reporter: Reporter) -> None:
    """The bounds on the input (docs/limits.md), checked before any pass: the source's
    length (E0901) and each string literal's or quoted name's (E0902)."""
    if len(text) > MAX_SOURCE_CHARS:
        # where the bound is passed, without indexing every line of what may be gigabytes
        line, column = line_column(text, MAX_SOURCE_CHARS)
        reporter.error(
            Code.E0901,
            f"the source is {len(text):,} characters long; flowc compiles at most "
            f"{MAX_SOURCE_CHARS:,} (4 MiB)",
            Span(file, line, column, line, column + 1),
            help="split the job into several files (docs/limits.md lists flowc's bounds)",
        )
        return
    surrogate = _SURROGATE.search(text)
    if surrogate is not None:
        start = surrogate.start()
        line, column = line_column(text, start)
        reporter.error(
            Code.E0904,
            f"the source holds a lone surrogate (U+{ord(surrogate.group()):04X}), which is "
            "no character: no file can hold it",
            Span(file, line, column, line, column + 1),
            help="the text was decoded wrongly; decode the file as UTF-8",
        )
        return
    if len(text) <= MAX_LITERAL_CHARS:
        return  # no literal can be longer than the text
    index = LineIndex(file, text)
    for start, end, quote in long_literals(text, MAX_LITERAL_CHARS):
        what = "quoted name" if quote == "`" else "string literal"
        reporter.error(
            Code.E0902,
            f"this {what} is {end - start - 2:,} characters long; at most "
            f"{MAX_LITERAL_CHARS:,} (1 MiB) are allowed",
            index.span(start, start + 1),
            help="read large data from a source (docs/limits.md lists flowc's bounds)",
        )


#: The oldest generation's threshold while a compilation holds full collections off.
_HELD = 1 << 30


def _held_thresholds(found: tuple[int, int, int]) -> tuple[int, int, int] | None:
    if not gc.isenabled() or found[2] == _HELD:
        return None
    return found[0], found[1], _HELD


#: Hold off the cyclic collector's full collections while any compilation runs; young ones
#: go on as usual. Compiling makes many objects that live as long as the job. A full
#: collection would rescan all of them, again and again as they grow (a fifth of the time
#: on large jobs, half at 10,000 operators); collecting nothing until the end would scan
#: them all at once, when they no longer fit in a cache. Young collections scan what was
#: just made, and promote the job's objects like any others. The thresholds are the
#: process's: the first compilation to start (in any thread) sets them, the last to finish
#: puts back what the first found, unless the application set others in between.
_COLLECTOR: SharedSetting[tuple[int, int, int]] = SharedSetting(
    gc.get_threshold, lambda thresholds: gc.set_threshold(*thresholds), _held_thresholds
)


@contextmanager
def _process_settings_held() -> Iterator[None]:
    """The collector's thresholds and Python's recursion limit, as compiling needs them."""
    collector = _COLLECTOR.enter()
    try:
        with deep_recursion():
            yield
    finally:
        if collector:
            _COLLECTOR.leave()


def compile_file(path: str | Path, *, for_spark: bool = False) -> CompiledJob:
    """Compile a .flow file (UTF-8); file errors raise OSError or UnicodeDecodeError."""
    path = Path(path)
    return compile(path.read_bytes().decode("utf-8"), filename=str(path), for_spark=for_spark)
