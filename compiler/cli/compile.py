"""``flowc check`` and ``flowc compile``: diagnostics of files, and each stage of the
pipeline in its formats (``--emit STAGE``, ``--emit all -o DIR``)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from flowc.cli.input import STAGE_FORMATS, command_line_overrides, compile_source, read_source
from flowc.cli.output import (
    EXIT_ERRORS,
    EXIT_OK,
    EXIT_USAGE,
    NotRunnable,
    OutputError,
    UsageError,
    print_diagnostics,
    write_file,
    write_stderr,
    write_stdout,
)
from flowc.diagnostics import CompileError, Diagnostic, Severity
from flowc.sql.spark_sql import UnsupportedOnSpark
from flowc.syntax.astdump import ast_to_json, ast_to_text
from flowc.syntax.overrides import COMMAND_LINE, command_line_text

if TYPE_CHECKING:
    from flowc.job import CompiledJob


def check(args: argparse.Namespace) -> int:

    all_diagnostics: list[Diagnostic] = []
    overrides = command_line_overrides(args)
    # Diagnostics about an override are on the command line, shown as its --set KEY=VALUE.
    sources: dict[str, str] = {COMMAND_LINE: command_line_text(overrides)}
    failed = False
    usage_failed = False
    for path in args.files:
        try:
            text = read_source(path)
        except UsageError as error:
            write_stderr(f"error: {error}\n")
            usage_failed = True
            continue
        sources[path] = text
        try:
            job = compile_source(args, text, path, overrides=overrides)
        except CompileError as error:
            all_diagnostics.extend(error.diagnostics)
            failed = True
            continue
        all_diagnostics.extend(job.diagnostics)
    print_diagnostics(all_diagnostics, sources, args.format, args.color)
    if usage_failed:
        return EXIT_USAGE
    return EXIT_ERRORS if failed else EXIT_OK


def compile_file(args: argparse.Namespace) -> int:

    text = read_source(args.file)
    for_spark = args.emit in ("pyspark", "all")
    overrides = command_line_overrides(args)
    sources = {args.file: text, COMMAND_LINE: command_line_text(overrides)}
    try:
        job = compile_source(args, text, args.file, for_spark=for_spark, overrides=overrides)
    except CompileError as error:
        print_diagnostics(error.diagnostics, sources, "text", args.color)
        return EXIT_ERRORS
    notes = [*job.diagnostics, *(_as_warnings(job.spark_diagnostics))]
    if notes:
        print_diagnostics(notes, sources, "text", args.color)
    if args.emit == "all":
        if not args.output:
            raise UsageError("--emit all writes every stage: give a folder with -o DIR")
        if args.format is not None:
            raise UsageError("--emit all writes every format; leave out --format")
        write_all(job, args.output)
        return EXIT_OK
    output = render_stage(job, args.emit, args.format or "text")
    if args.output:
        write_file(args.output, output)
    else:
        write_stdout(output)
    return EXIT_OK


_STAGE_ATTRIBUTES = {
    "transformations": "transformations",
    "streamgraph": "stream_graph",
    "jobgraph": "job_graph",
    "physical": "physical_plan",
}
_EXTENSIONS = {"text": "txt", "json": "json", "dot": "dot", "mermaid": "mmd", "html": "html"}


def _as_warnings(diagnostics: Sequence[Diagnostic]) -> list[Diagnostic]:
    """Spark's limits, shown (not failing) where only plans are asked for."""
    return [
        Diagnostic(d.code, Severity.WARNING, f"Spark cannot run this: {d.message}", d.span, d.help)
        for d in diagnostics
    ]


def render_stage(job: CompiledJob, stage: str, fmt: str) -> str:
    if fmt not in STAGE_FORMATS[stage]:
        raise UsageError(f"--emit {stage} has no --format {fmt}")
    if stage == "ast":
        return ast_to_json(job.ast) if fmt == "json" else ast_to_text(job.ast)
    if stage == "pyspark":
        from flowc.spark.codegen import generate_pyspark

        try:
            return generate_pyspark(job)
        except UnsupportedOnSpark as error:
            raise NotRunnable(str(error)) from None
    if fmt == "html":
        from flowc.viewer import TooLargeToView, render_html

        try:
            return render_html(job, stage)
        except TooLargeToView as error:
            raise UsageError(str(error)) from None
    text: str = getattr(getattr(job, _STAGE_ATTRIBUTES[stage]), f"to_{fmt}")()
    return text


def write_all(job: CompiledJob, directory: str) -> None:
    """``--emit all -o DIR``: every stage in every format it has."""
    target = Path(directory)
    if target.exists() and not target.is_dir():
        raise OutputError(f"{directory}: cannot create: a file is in the way; -o DIR is a folder")
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"{directory}: cannot create: {error.strerror or error}") from None
    for stage, formats in STAGE_FORMATS.items():
        for fmt in formats:
            extension = "py" if stage == "pyspark" else _EXTENSIONS[fmt]
            write_file(target / f"{stage}.{extension}", render_stage(job, stage, fmt))
