"""The ``flowc`` command line.

Exit codes: 0 clean (warnings allowed), 1 the program has errors, 2 usage or file
errors (missing file, bytes that are not UTF-8), 101 a crash inside flowc, with a report
written to a file. A Python traceback never reaches the user.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import platform
import re
import sys
import tempfile
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TextIO

from flowc import __version__
from flowc.diagnostics import CompileError, Diagnostic, Severity, render_json, render_text

if TYPE_CHECKING:
    from flowc.job import CompiledJob

EXIT_OK = 0
EXIT_ERRORS = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 101

FORMATS = ("text", "json", "dot", "mermaid")
#: Each stage and the formats it has; ``--emit all`` writes exactly these.
STAGE_FORMATS: dict[str, tuple[str, ...]] = {
    "ast": ("text", "json"),
    "transformations": FORMATS,
    "streamgraph": FORMATS,
    "jobgraph": FORMATS,
    "physical": ("text", "json"),
    "pyspark": ("text",),
}
STAGES = (*STAGE_FORMATS, "all")


class UsageError(Exception):
    """Bad arguments or an unreadable file: exit code 2."""


class NotRunnable(Exception):
    """A program flowc can plan but the Spark backend cannot run yet: exit code 1."""


class _ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        raise UsageError(message)


def _parser() -> argparse.ArgumentParser:
    parser = _ArgumentParser(
        prog="flowc",
        description="Compile declarative streaming jobs (.flow files): "
        "Flink's plans, Spark's engine.",
    )
    parser.add_argument("--version", action="version", version=f"flowc {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    check = commands.add_parser("check", help="check files and report every problem")
    check.add_argument("files", nargs="+", metavar="FILE")
    check.add_argument("--format", choices=FORMATS, default="text", help="diagnostics format")
    _color_option(check)

    compile_ = commands.add_parser("compile", help="compile a file and print one stage")
    compile_.add_argument("file", metavar="FILE")
    compile_.add_argument("--emit", choices=STAGES, default="ast", help="the stage to print")
    compile_.add_argument("--format", choices=FORMATS, help="output format (default: text)")
    compile_.add_argument("-o", "--output", metavar="PATH", help="write to PATH, not stdout")
    _color_option(compile_)

    run = commands.add_parser("run", help="run a job on Spark Structured Streaming")
    run.add_argument("file", metavar="FILE")
    run.add_argument(
        "--available-now", action="store_true", help="process what is there, then stop"
    )
    run.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a setting (as SET KEY = VALUE; would)",
    )
    run.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    run.add_argument(
        "--remote", metavar="URL", help="a Spark Connect server (needs flowc[connect])"
    )
    run.add_argument(
        "--checkpoint-dir", help="where queries keep checkpoints (default: beside the file)"
    )
    run.add_argument("--report", metavar="FILE", help="write a JSON report of the run")
    _color_option(run)
    return parser


def _color_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="colour diagnostics (auto: on a terminal, unless NO_COLOR is set)",
    )


def _use_color(choice: str, stream: TextIO) -> bool:
    if choice == "always":
        return True
    if choice == "never" or os.environ.get("NO_COLOR"):
        return False
    return stream.isatty()


def read_source(path: str) -> str:
    """The file's text, or UsageError with a clear reason."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a directory, not a .flow file") from None
    except OSError as error:
        raise UsageError(f"{path}: cannot read: {error.strerror or error}") from None
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as error:
        before = data[: error.start]
        line = before.count(b"\n") + 1
        column = len(before) - (before.rfind(b"\n") + 1) + 1
        raise UsageError(
            f"{path}:{line}:{column}: not valid UTF-8 (byte 0x{data[error.start]:02x}); "
            "save the file as UTF-8"
        ) from None


def _print_diagnostics(
    diagnostics: Sequence[Diagnostic], sources: dict[str, str], fmt: str, color: str
) -> None:
    if fmt == "json":
        document = {
            "flowc_version": __version__,
            "schema_version": 1,
            "diagnostics": json.loads(render_json(diagnostics)),
        }
        sys.stdout.write(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    elif diagnostics:
        sys.stderr.write(render_text(diagnostics, sources, _use_color(color, sys.stderr)))


def _check(args: argparse.Namespace) -> int:
    from flowc.job import compile

    all_diagnostics: list[Diagnostic] = []
    sources: dict[str, str] = {}
    failed = False
    usage_failed = False
    for path in args.files:
        try:
            text = read_source(path)
        except UsageError as error:
            sys.stderr.write(f"error: {error}\n")
            usage_failed = True
            continue
        sources[path] = text
        try:
            job = compile(text, filename=path, for_spark=True)
        except CompileError as error:
            all_diagnostics.extend(error.diagnostics)
            failed = True
            continue
        all_diagnostics.extend(job.diagnostics)
    _print_diagnostics(all_diagnostics, sources, args.format, args.color)
    if usage_failed:
        return EXIT_USAGE
    return EXIT_ERRORS if failed else EXIT_OK


def _compile(args: argparse.Namespace) -> int:
    from flowc.job import compile

    text = read_source(args.file)
    for_spark = args.emit in ("pyspark", "all")
    try:
        job = compile(text, filename=args.file, for_spark=for_spark)
    except CompileError as error:
        _print_diagnostics(error.diagnostics, {args.file: text}, "text", args.color)
        return EXIT_ERRORS
    notes = [*job.diagnostics, *(_as_warnings(job.spark_diagnostics))]
    if notes:
        _print_diagnostics(notes, {args.file: text}, "text", args.color)
    if args.emit == "all":
        if not args.output:
            raise UsageError("--emit all writes every stage: give a folder with -o DIR")
        if args.format is not None:
            raise UsageError("--emit all writes every format; leave out --format")
        _write_all(job, args.output)
        return EXIT_OK
    output = _render_stage(job, args.emit, args.format or "text")
    if args.output:
        try:
            Path(args.output).write_text(output, encoding="utf-8")
        except OSError as error:
            raise UsageError(f"{args.output}: cannot write: {error.strerror or error}") from None
    else:
        sys.stdout.write(output)
    return EXIT_OK


_STAGE_ATTRIBUTES = {
    "transformations": "transformations",
    "streamgraph": "stream_graph",
    "jobgraph": "job_graph",
    "physical": "physical_plan",
}
_EXTENSIONS = {"text": "txt", "json": "json", "dot": "dot", "mermaid": "mmd"}


def _run(args: argparse.Namespace) -> int:
    from flowc.job import compile

    text = read_source(args.file)
    from flowc.catalog import SETTING_PREFIXES, SETTINGS

    overrides = []
    options: dict[str, str] = {}
    for assignment in args.set:
        key, equals, value = assignment.partition("=")
        key, value = key.strip(), value.strip()
        if not equals or not key:
            raise UsageError(f"--set {assignment}: write KEY=VALUE")
        if key in SETTINGS or key.startswith(SETTING_PREFIXES) or "." not in key:
            literal = value
            if not re.fullmatch(r"-?\d+|true|false|\w+|'.*'", literal):
                literal = "'" + literal.replace("'", "''") + "'"
            overrides.append(f"SET {key} = {literal};")
        else:
            options[key] = value
    source = text + ("\n" + "\n".join(overrides) + "\n" if overrides else "")
    try:
        job = compile(source, filename=args.file, for_spark=True, option_overrides=options)
    except CompileError as error:
        _print_diagnostics(error.diagnostics, {args.file: source}, "text", args.color)
        return EXIT_ERRORS
    from flowc.runtime.codegen import UnsupportedOnSpark
    from flowc.runtime.run import SparkRefused, run_job, write_report

    try:
        report = run_job(
            job,
            available_now=args.available_now,
            checkpoint_dir=args.checkpoint_dir,
            master=args.master,
            remote=args.remote,
        )
    except UnsupportedOnSpark as error:
        raise NotRunnable(str(error)) from None
    except SparkRefused as error:
        sys.stderr.write(f"error: Spark could not start the job: {error}\n")
        return EXIT_ERRORS
    if args.report:
        write_report(report, args.report)
    failed = [q for q in report.queries if q.error]
    for query in failed:
        if query.diagnostic is not None:
            sys.stderr.write(query.diagnostic)
        else:
            sys.stderr.write(f"error: query '{query.name}' failed: {query.error}\n")
    if report.stopped_by_user:
        return 130
    return EXIT_ERRORS if failed else EXIT_OK


def _as_warnings(diagnostics: Sequence[Diagnostic]) -> list[Diagnostic]:
    """Spark's limits, shown (not failing) where only plans are asked for."""
    return [
        Diagnostic(d.code, Severity.WARNING, f"Spark cannot run this: {d.message}", d.span, d.help)
        for d in diagnostics
    ]


def _render_stage(job: CompiledJob, stage: str, fmt: str) -> str:
    if fmt not in STAGE_FORMATS[stage]:
        raise UsageError(f"--emit {stage} has no --format {fmt}")
    if stage == "ast":
        from flowc.astdump import ast_to_json, ast_to_text

        return ast_to_json(job.ast) if fmt == "json" else ast_to_text(job.ast)
    if stage == "pyspark":
        from flowc.runtime.codegen import UnsupportedOnSpark, generate_pyspark

        try:
            return generate_pyspark(job)
        except UnsupportedOnSpark as error:
            raise NotRunnable(str(error)) from None
    text: str = getattr(getattr(job, _STAGE_ATTRIBUTES[stage]), f"to_{fmt}")()
    return text


def _write_all(job: CompiledJob, directory: str) -> None:
    """``--emit all -o DIR``: every stage in every format it has."""
    target = Path(directory)
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"{directory}: cannot create: {error.strerror or error}") from None
    for stage, formats in STAGE_FORMATS.items():
        for fmt in formats:
            extension = "py" if stage == "pyspark" else _EXTENSIONS[fmt]
            (target / f"{stage}.{extension}").write_text(
                _render_stage(job, stage, fmt), encoding="utf-8"
            )


def _write_crash_report(argv: Sequence[str]) -> str:
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    directory = Path(os.environ.get("FLOWC_CRASH_DIR") or tempfile.gettempdir())
    path = directory / f"flowc-crash-{stamp}-{os.getpid()}.txt"
    report = (
        f"flowc {__version__} internal error\n"
        f"python {platform.python_version()} on {platform.platform()}\n"
        f"argv: {list(argv)}\n\n{traceback.format_exc()}"
    )
    try:
        path.write_text(report, encoding="utf-8")
    except OSError:
        with tempfile.NamedTemporaryFile(
            "w", prefix="flowc-crash-", suffix=".txt", delete=False, encoding="utf-8"
        ) as fallback:
            fallback.write(report)
            return fallback.name
    return str(path)


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    # flowc reports sqlglot's problems as diagnostics; its log lines would only repeat them.
    logging.getLogger("sqlglot").setLevel(logging.CRITICAL)
    try:
        args = _parser().parse_args(arguments)
        commands: dict[str, Callable[[argparse.Namespace], int]] = {
            "check": _check,
            "compile": _compile,
            "run": _run,
        }
        return commands[args.command](args)
    except UsageError as error:
        sys.stderr.write(f"error: {error}\n")
        return EXIT_USAGE
    except NotRunnable as error:
        sys.stderr.write(f"error: the Spark backend cannot run this yet: {error}\n")
        return EXIT_ERRORS
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else EXIT_OK
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    except BrokenPipeError:
        return EXIT_OK
    except BaseException:
        path = _write_crash_report(arguments)
        sys.stderr.write(
            "error: internal error: flowc crashed; this is a bug in flowc, not in your program.\n"
            f"A report was written to {path}\n"
        )
        return EXIT_INTERNAL
