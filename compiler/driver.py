"""The compile driver, flowc's public API: :func:`compile` checks the input's bounds, then
runs the passes (:mod:`flowc.passes`) in order, each storing its stage in the
:class:`~flowc.job.CompiledJob`, and stops after the first with errors."""

from __future__ import annotations

import gc
import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from flowc.diagnostics import CompileError, Reporter, Severity
from flowc.errorcodes import Code
from flowc.job import CompiledJob
from flowc.limits import MAX_LITERAL_CHARS, MAX_SOURCE_CHARS, SharedSetting
from flowc.passes import PASSES
from flowc.spans import Span, line_column
from flowc.sql.python_functions import PythonFunction
from flowc.sql.sql_parsing import deep_recursion
from flowc.syntax.source_text import LineIndex, long_literals
from flowc.trust.policy import TrustPolicy

__all__ = ["check_input_bounds", "compile", "compile_file"]


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
    test_outputs: Mapping[str, str] | None = None,
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
    files from ``test_inputs[name]``, every upsert sink named in ``test_outputs`` is a files
    upsert sink (parquet) in the folder given there, every other sink is Spark's memory
    sink; the program is checked as written, and planned (and generated) in that form.

    Spark Structured Streaming's own limits (E07xx: output modes, watermarks) do not stop
    the plans, which are Flink's; they are in ``spark_diagnostics``, and with
    ``for_spark=True`` (checking, running, generating PySpark) they are errors too.
    """
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
        test_outputs=dict(test_outputs) if test_outputs is not None else None,
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


def compile_test_form(
    job: CompiledJob,
    inputs: Mapping[str, str],
    *,
    mode: str | None = None,
    outputs: Mapping[str, str] | None = None,
) -> CompiledJob:
    """``job`` compiled again, from its own text and compile options, in its test form:
    each source reads ``inputs[name]``, each upsert sink keeps its table in
    ``outputs[name]`` (:func:`flowc.analyze.test_form.test_program`);
    ``mode``: in that execution mode whatever the job sets (a test's ``mode:``)."""
    overrides = job.overrides if mode is None else {**job.overrides, "execution.mode": mode}
    return compile(
        job.source,
        job.file,
        for_spark=job.for_spark,
        overrides=overrides,
        trusted=job.trust.trusted,
        base_dir=job.trust.base_dir,
        functions=job.functions,
        allowed_functions=job.trust.functions,
        test_inputs=inputs,
        test_outputs=outputs,
    )
