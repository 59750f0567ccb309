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
import stat
import sys
import tempfile
import traceback
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TextIO

from flowc import __version__
from flowc.diagnostics import CompileError, Diagnostic, Severity, render_json, render_text
from flowc.limits import MAX_SOURCE_CHARS

if TYPE_CHECKING:
    from flowc.job import CompiledJob
    from flowc.plan_diff import CheckpointCheck
    from flowc.runtime.run import RunReport

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
    _trust_options(check)
    _color_option(check)

    compile_ = commands.add_parser("compile", help="compile a file and print one stage")
    compile_.add_argument("file", metavar="FILE")
    compile_.add_argument("--emit", choices=STAGES, default="ast", help="the stage to print")
    compile_.add_argument("--format", choices=FORMATS, help="output format (default: text)")
    compile_.add_argument("-o", "--output", metavar="PATH", help="write to PATH, not stdout")
    _trust_options(compile_)
    _color_option(compile_)

    run = commands.add_parser("run", help="run a job on Spark Structured Streaming")
    run.add_argument("file", metavar="FILE")
    run.add_argument(
        "--available-now", action="store_true", help="process what is there, then stop"
    )
    run.add_argument(
        "--batch",
        action="store_true",
        help="run as a batch job over bounded input, every window and outer-join row "
        "written (as --set execution.mode=batch)",
    )
    run.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="give one key one value: a setting (as SET KEY = VALUE; would) or "
        "SOURCE_OR_SINK.OPTION",
    )
    run.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    run.add_argument(
        "--remote", metavar="URL", help="a Spark Connect server (needs flowc[connect])"
    )
    run.add_argument(
        "--checkpoint-dir", help="where queries keep checkpoints (default: beside the file)"
    )
    run.add_argument("--report", metavar="FILE", help="write a JSON report of the run")
    run.add_argument(
        "--reset-state",
        action="append",
        default=[],
        metavar="QUERY",
        help="start QUERY over: move its checkpoint (and a file sink's folder) aside to "
        "<folder>.reset-<time>, never deleting it (docs/state.md)",
    )
    run.add_argument(
        "--verbose",
        action="store_true",
        help="show Spark's own log lines, progress bars and stack traces (by default they "
        "go to a log file in .flowc-logs/ beside the checkpoints)",
    )
    _trust_options(run)
    _color_option(run)

    diff = commands.add_parser(
        "diff",
        help="what an edit does to a job's state and plans: exit 1 when state would be lost",
    )
    diff.add_argument("old", metavar="OLD", help="the job as it runs now")
    diff.add_argument("new", metavar="NEW", help="the edited job")
    diff.add_argument("--format", choices=("text", "json"), default="text", help="report format")
    diff.add_argument(
        "--against",
        metavar="CHECKPOINT_DIR",
        help="also check NEW against the checkpoints in this folder (flowc run's "
        "--checkpoint-dir), as flowc run would before starting",
    )
    _trust_options(diff)
    _color_option(diff)
    return parser


def _trust_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--untrusted",
        action="store_true",
        help="the program comes from someone you do not trust: refuse what leaves its "
        "sandbox (docs/security.md)",
    )
    parser.add_argument(
        "--base-dir",
        metavar="DIR",
        help="the folder relative paths start from, and that an untrusted program's files "
        "must stay in (default: the file's folder)",
    )


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


#: Bytes of a .flow file the command line reads (docs/language.md, "Input files"): four
#: bytes for each character flowc compiles (MAX_SOURCE_CHARS, E0901), UTF-8's widest, so a
#: file the bound refuses could never compile. 16 MiB.
MAX_SOURCE_BYTES = 4 * MAX_SOURCE_CHARS


def _file_kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _not_regular(path: str, mode: int) -> UsageError:
    kind = _file_kind(mode)
    if kind == "a directory":
        return UsageError(f"{path}: is a directory, not a .flow file")
    return UsageError(f"{path}: is {kind}, not a regular file; save the program to a file")


def _too_large(path: str) -> UsageError:
    return UsageError(
        f"{path}: larger than {MAX_SOURCE_BYTES // (1024 * 1024)} MiB, the most flowc reads; "
        "split the job into smaller files"
    )


def read_source(path: str) -> str:
    """The file's text, or UsageError with a clear reason.

    Only regular files are read (a FIFO with no writer would block forever, /dev/zero
    never ends), and at most :data:`MAX_SOURCE_BYTES` of them. The kind is checked before
    opening and again on the open descriptor, which is opened non-blocking, so a file
    swapped for a FIFO in between cannot hang the read either.
    """
    try:
        found = os.stat(path)
        if not stat.S_ISREG(found.st_mode):
            raise _not_regular(path, found.st_mode)
        if found.st_size > MAX_SOURCE_BYTES:
            raise _too_large(path)
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
        descriptor = os.open(path, flags)
        with open(descriptor, "rb") as handle:
            opened = os.fstat(descriptor)
            if not stat.S_ISREG(opened.st_mode):
                raise _not_regular(path, opened.st_mode)
            data = handle.read(MAX_SOURCE_BYTES + 1)
    except FileNotFoundError:
        raise UsageError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UsageError(f"{path}: is a directory, not a .flow file") from None
    except (OSError, ValueError) as error:  # ValueError: a NUL in the path
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        raise UsageError(f"{path}: cannot read: {reason}") from None
    if len(data) > MAX_SOURCE_BYTES:
        raise _too_large(path)
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
        write_stdout(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    elif diagnostics:
        write_stderr(render_text(diagnostics, sources, _use_color(color, sys.stderr)))


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
            write_stderr(f"error: {error}\n")
            usage_failed = True
            continue
        sources[path] = text
        try:
            job = compile(
                text,
                filename=path,
                for_spark=True,
                trusted=not args.untrusted,
                base_dir=args.base_dir,
            )
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
        job = compile(
            text,
            filename=args.file,
            for_spark=for_spark,
            trusted=not args.untrusted,
            base_dir=args.base_dir,
        )
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
        _write_file(args.output, output)
    else:
        write_stdout(output)
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
    from flowc.trust import COMMAND_LINE, command_line_text

    text = read_source(args.file)
    # Each --set is one value for one key, handed to the compiler as data (never pasted
    # into the program); its diagnostics point at the command line.
    overrides: dict[str, str] = {}
    for assignment in args.set:
        key, equals, value = assignment.partition("=")
        key, value = key.strip(), value.strip()
        if not equals or not key:
            raise UsageError(f"--set {assignment}: write KEY=VALUE")
        overrides.pop(key, None)  # the last one wins, in its place on the command line
        overrides[key] = value
    if args.batch:
        overrides.pop("execution.mode", None)
        overrides["execution.mode"] = "batch"
    try:
        job = compile(
            text,
            filename=args.file,
            for_spark=True,
            overrides=overrides,
            trusted=not args.untrusted,
            base_dir=args.base_dir,
        )
    except CompileError as error:
        sources = {args.file: text, COMMAND_LINE: command_line_text(overrides)}
        _print_diagnostics(error.diagnostics, sources, "text", args.color)
        return EXIT_ERRORS
    from flowc.habits import run_blockers

    blockers = run_blockers(job)  # what check only warns of, but Spark fails on at start
    if blockers:
        sources = {args.file: text, COMMAND_LINE: command_line_text(overrides)}
        _print_diagnostics(blockers, sources, "text", args.color)
        return EXIT_ERRORS
    from flowc.runtime.failures import FailureLog, log_path, spark_errors, spark_output, summary
    from flowc.runtime.run import SparkRefused, run_job
    from flowc.spark_sql import UnsupportedOnSpark

    if args.report:
        _check_report_path(args.report)
    _check_utf8_names(job, args)
    reset = _reset_names(job, args.reset_state)
    # Spark's own output (log4j lines, progress bars, stack traces) goes to a log file
    # unless --verbose; flowc's progress lines go to the terminal either way.
    log = None if args.verbose else log_path(job, args.checkpoint_dir, args.base_dir)
    try:
        with spark_output(log) if log is not None else nullcontext(sys.stderr) as terminal:
            report = run_job(
                job,
                available_now=args.available_now,
                checkpoint_dir=args.checkpoint_dir,
                master=args.master,
                remote=args.remote,
                base_dir=args.base_dir,
                out=terminal,
                log_file=log,
                reset_state=reset,
            )
    except UnsupportedOnSpark as error:
        raise NotRunnable(str(error)) from None
    except SparkRefused as error:
        if error.diagnostic is not None:
            _print_diagnostics([error.diagnostic], {args.file: text}, "text", args.color)
        else:
            sys.stderr.write(error.text)
        return EXIT_ERRORS
    except CompileError as error:  # a sink's folder flowc refuses (flowc.runtime.ownership)
        sources = {args.file: text, COMMAND_LINE: command_line_text(overrides)}
        _print_diagnostics(error.diagnostics, sources, "text", args.color)
        return EXIT_ERRORS
    except spark_errors() as error:  # Spark failed, or its JVM died, while flowc watched
        path = FailureLog(job, args.checkpoint_dir, args.base_dir, log).record("run", error)
        sys.stderr.write(summary(error, path, "Spark failed while the job ran"))
        return EXIT_ERRORS
    report_failed = bool(args.report) and not _save_report(report, args.report)
    failed = [q for q in report.queries if q.error]
    for query in failed:
        if query.failure is not None:
            continue  # below, as diagnostics at their lines
        if query.diagnostic is not None:
            sys.stderr.write(query.diagnostic)
        else:
            sys.stderr.write(f"error: query '{query.name}' failed: {query.error}\n")
    placed = [q.failure for q in failed if q.failure is not None]
    if placed:
        _print_diagnostics(placed, {args.file: text}, "text", args.color)
    if report.stopped_by_user:
        return 130
    return EXIT_ERRORS if failed else EXIT_USAGE if report_failed else EXIT_OK


def _reset_names(job: CompiledJob, names: list[str]) -> list[str]:
    """``--reset-state QUERY``: each a query of the job (an INSERT's sink), else exit 2."""
    queries = [q.name for q in job.spark_plan.queries]
    for name in names:
        if name not in queries:
            known = ", ".join(queries)
            raise UsageError(f"--reset-state {name}: the job has no query of that name ({known})")
    return names


def _diff(args: argparse.Namespace) -> int:
    """``flowc diff OLD NEW``: whether NEW can go on from OLD's state, and how its plans
    changed (docs/state.md, "flowc diff"). Never imports pyspark."""
    from flowc.job import compile
    from flowc.plan_diff import DiffReport, diff_plans
    from flowc.state_compat import compare, describe_state

    sources: dict[str, str] = {}
    unreadable = False
    for path in (args.old, args.new):
        try:
            sources[path] = read_source(path)
        except UsageError as error:
            write_stderr(f"error: {error}\n")
            unreadable = True
    if unreadable:
        return EXIT_USAGE
    jobs: list[CompiledJob] = []
    errors: list[Diagnostic] = []
    for path in (args.old, args.new):
        try:
            jobs.append(
                compile(
                    sources[path],
                    filename=path,
                    for_spark=True,
                    trusted=not args.untrusted,
                    base_dir=args.base_dir,
                )
            )
        except CompileError as error:
            errors.extend(error.diagnostics)
    if errors:
        _print_diagnostics(errors, sources, args.format, args.color)
        return EXIT_ERRORS
    old, new = jobs
    report = DiffReport(
        old_file=args.old,
        new_file=args.new,
        old_job=old.program.settings.job_name,
        new_job=new.program.settings.job_name,
        state=compare(describe_state(old), describe_state(new)),
        plan=diff_plans(old, new),
        checkpoint=_diff_against(args, old, new) if args.against is not None else None,
    )
    if args.format == "json":
        write_stdout(json.dumps(report.to_json(), indent=2, ensure_ascii=False) + "\n")
    else:
        write_stdout(report.to_text(sources, _use_color(args.color, sys.stdout)))
    return EXIT_OK if report.ok else EXIT_ERRORS


def _diff_against(args: argparse.Namespace, old: CompiledJob, new: CompiledJob) -> CheckpointCheck:
    """``--against DIR``: NEW checked against the job's checkpoints under DIR, as ``flowc
    run --checkpoint-dir DIR`` checks before Spark starts (flowc.runtime.state_guard, which
    reads small files and imports no pyspark).

    The job's folder is ``DIR/<job name>``. A job named after its file (no SET job.name)
    is one job in two files, so when ``DIR/<new name>`` is not there, ``DIR/<old name>``
    is checked, with NEW compiled under that name."""
    from flowc.job import compile
    from flowc.plan_diff import CheckpointCheck
    from flowc.runtime.state_guard import guard_state
    from flowc.spark_plan import checkpoint_segment

    root = args.against
    if not os.path.isdir(root):
        raise UsageError(f"--against {root}: no such folder")
    base = os.path.abspath(
        args.base_dir if args.base_dir is not None else str(Path(args.new).parent)
    )
    new_name = new.program.settings.job_name
    old_name = old.program.settings.job_name
    job = new
    folder = os.path.join(root, checkpoint_segment(new_name))
    defaulted = new_name == (Path(args.new).stem or "job")
    if not os.path.isdir(folder):
        old_folder = os.path.join(root, checkpoint_segment(old_name))
        if not os.path.isdir(old_folder):
            return CheckpointCheck(
                root,
                None,
                (),
                f"no checkpoint of job '{new_name}' here ({folder} is not there): every query "
                "would start with empty state, and nothing was checked",
            )
        if not defaulted:
            renamed = Diagnostic(
                "E0820",
                Severity.ERROR,
                f"the job is now named '{new_name}', and its checkpoints would go to {folder}: "
                f"the state of job '{old_name}' in {old_folder} would be left behind",
                new.program.span,
                "keep the job's name (SET job.name), or start over on purpose",
            )
            return CheckpointCheck(root, old_folder, (renamed,), "the job was renamed")
        try:
            job = compile(
                new.source,
                filename=new.file,
                for_spark=True,
                overrides={"job.name": old_name},
                trusted=not args.untrusted,
                base_dir=args.base_dir,
            )
        except CompileError as error:
            return CheckpointCheck(root, old_folder, error.diagnostics, "not checked")
        folder = old_folder
    try:
        guard = guard_state(job, checkpoint_root=root, base_dir=base, reset_state=())
    except CompileError as error:
        return CheckpointCheck(root, folder, error.diagnostics, _checked(job, folder))
    return CheckpointCheck(root, folder, tuple(guard.warnings), _checked(job, folder))


def _checked(job: CompiledJob, folder: str) -> str:
    """Which of the job's queries had a checkpoint in ``folder``."""
    if job.spark_plan.batch:
        return "a batch job keeps no checkpoint: nothing to go on from"
    found = [
        q.name
        for q in job.spark_plan.queries
        if os.path.isdir(os.path.join(folder, q.checkpoint[1], "offsets"))
    ]
    if not found:
        return f"{folder} holds no checkpoint of this job's queries: nothing to go on from"
    return f"checked {folder} for {', '.join(repr(name) for name in found)}"


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
        from flowc.codegen import generate_pyspark
        from flowc.spark_sql import UnsupportedOnSpark

        try:
            return generate_pyspark(job)
        except UnsupportedOnSpark as error:
            raise NotRunnable(str(error)) from None
    text: str = getattr(getattr(job, _STAGE_ATTRIBUTES[stage]), f"to_{fmt}")()
    return text


def _write_all(job: CompiledJob, directory: str) -> None:
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
            _write_file(target / f"{stage}.{extension}", _render_stage(job, stage, fmt))


# ---------------------------------------------------------------- writing outputs
#
# Every output flowc writes (stdout, -o, --emit all, --report) goes through these: a full
# disk, a directory in the way or a closed pipe is a message and exit 2, never a traceback.
# Text is written as UTF-8; a lone surrogate (a file name that is not UTF-8, decoded by
# Python with surrogateescape) is written as its escape, \udcff, which is valid in every
# format flowc writes (a JSON string, a Python string or docstring, plain text).


class OutputError(UsageError):
    """flowc could not write its output (a full disk, say): exit code 2."""


def _encodable(text: str) -> str:
    """``text`` with each lone surrogate as its backslash escape."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _write_file(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path``, or OutputError saying why not."""
    if os.path.isdir(path):
        raise OutputError(f"{path}: cannot write: is a directory")
    try:
        with open(path, "w", encoding="utf-8", errors="backslashreplace") as handle:
            handle.write(text)
    except OSError as error:
        raise OutputError(f"{path}: cannot write: {_reason(error)}") from None


def _reason(error: OSError) -> str:
    return error.strerror or str(error)


def write_stdout(text: str) -> None:
    """``text`` on standard output, flushed now, so a full disk is reported here (exit 2)
    rather than by the interpreter as it exits (a traceback and exit code 120)."""
    stream = sys.stdout
    try:
        try:
            stream.write(_encodable(text))
        except UnicodeEncodeError:  # a terminal whose encoding lacks a character
            buffer = getattr(stream, "buffer", None)
            if buffer is None:
                raise
            stream.flush()
            buffer.write(text.encode(stream.encoding or "utf-8", "backslashreplace"))
        stream.flush()
    except BrokenPipeError:
        raise
    except OSError as error:
        _discard_stdout()
        raise OutputError(f"cannot write to standard output: {_reason(error)}") from None


def write_stderr(text: str) -> None:
    """A message on standard error; a file name that is not UTF-8 shows as its escapes."""
    sys.stderr.write(_encodable(text))


def _discard_stdout() -> None:
    """After a failed write to the process's standard output, send what is still buffered
    to the null device, so the interpreter's last flush at exit cannot fail again."""
    stream = sys.__stdout__
    if stream is None or sys.stdout is not stream:
        return  # an embedding application's stream: leave it alone
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, stream.fileno())
        os.close(null)
    except (OSError, ValueError):
        pass


def _check_utf8_names(job: CompiledJob, args: argparse.Namespace) -> None:
    """Names that reach Spark must be UTF-8 (py4j sends UTF-8 only). A file or folder name
    that is not reaches Python with lone surrogates; flowc can check and compile such a
    file, but refuses to run it (exit 2) rather than crash inside py4j."""
    folder = args.base_dir if args.base_dir is not None else str(Path(job.file).parent)
    if _has_surrogate(job.program.settings.job_name):
        raise UsageError(
            f"{args.file}: the job is named after the file, whose name is not valid UTF-8, "
            "and Spark takes only UTF-8 names; rename the file or SET job.name"
        )
    for path in (os.path.abspath(folder), args.checkpoint_dir):
        if path is not None and _has_surrogate(path):
            raise UsageError(
                f"{_encodable(path)}: not valid UTF-8, and Spark takes only UTF-8 paths; "
                "rename the folder"
            )


def _has_surrogate(text: str) -> bool:
    return any(0xD800 <= ord(char) < 0xE000 for char in text)


def _check_report_path(path: str) -> None:
    """``--report FILE`` must be writable before the job runs, not found out after it."""
    if os.path.isdir(path):
        raise UsageError(f"--report {path}: is a directory; give a file name")
    if os.path.exists(path):
        if not os.access(path, os.W_OK):
            raise UsageError(f"--report {path}: cannot write: permission denied")
        return
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise UsageError(f"--report {path}: no such folder {parent}")
    if not os.access(parent, os.W_OK):
        raise UsageError(f"--report {path}: cannot write in {parent}: permission denied")


def _save_report(report: RunReport, path: str) -> bool:
    """Write the run's JSON report; False (with the reason on stderr) when it cannot."""
    try:
        _write_file(path, json.dumps(report.to_json(), indent=2) + "\n")
    except OutputError as error:
        write_stderr(f"error: --report {error}\n")
        return False
    return True


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
        path.write_text(report, encoding="utf-8", errors="backslashreplace")
    except OSError:
        with tempfile.NamedTemporaryFile(
            "w",
            prefix="flowc-crash-",
            suffix=".txt",
            delete=False,
            encoding="utf-8",
            errors="backslashreplace",
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
            "diff": _diff,
        }
        return commands[args.command](args)
    except UsageError as error:
        write_stderr(f"error: {error}\n")
        return EXIT_USAGE
    except NotRunnable as error:
        write_stderr(f"error: the Spark backend cannot run this yet: {error}\n")
        return EXIT_ERRORS
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else EXIT_OK
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130
    except BrokenPipeError:
        _discard_stdout()  # the reader left: nothing more to say, and no error at exit
        return EXIT_OK
    except BaseException:
        path = _write_crash_report(arguments)
        sys.stderr.write(
            "error: internal error: flowc crashed; this is a bug in flowc, not in your program.\n"
            f"A report was written to {path}\n"
        )
        return EXIT_INTERNAL
