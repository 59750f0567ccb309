"""``flowc run``: ``--set`` overrides handed to the compiler, the checks made before Spark
starts (names Spark can take, a writable ``--report``, ``--reset-state`` queries), the run,
and how its failures are reported."""

from __future__ import annotations

import argparse
import json
import os
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

from flowc.cli.input import (
    command_line_overrides,
    compile_source,
    read_source,
    spark_missing,
)
from flowc.cli.output import (
    EXIT_ERRORS,
    EXIT_OK,
    EXIT_USAGE,
    NotRunnable,
    OutputError,
    UsageError,
    encodable,
    print_diagnostics,
    write_file,
    write_stderr,
)
from flowc.diagnostics import CompileError
from flowc.sql.habits import run_blockers
from flowc.sql.spark_sql import UnsupportedOnSpark
from flowc.syntax.overrides import COMMAND_LINE, command_line_text

if TYPE_CHECKING:
    from flowc.job import CompiledJob
    from flowc.runtime.run import RunReport


def _compiled(args: argparse.Namespace) -> tuple[CompiledJob | None, dict[str, str]]:
    """FILE's job with its --set overrides, and the texts diagnostics point into
    (an override's are on the command line, shown as its --set KEY=VALUE); None where it
    does not compile, its diagnostics printed."""
    text = read_source(args.file)
    overrides = command_line_overrides(args)
    sources = {args.file: text, COMMAND_LINE: command_line_text(overrides)}
    try:
        return compile_source(args, text, args.file, overrides=overrides), sources
    except CompileError as error:
        print_diagnostics(error.diagnostics, sources, "text", args.color)
        return None, sources


def run(args: argparse.Namespace) -> int:
    job, sources = _compiled(args)
    if job is None:
        return EXIT_ERRORS
    blockers = run_blockers(job)  # what check only warns of, but Spark fails on at start
    missing = spark_missing(job, "run")
    if missing is not None:
        blockers = [*blockers, missing]
    if blockers:
        print_diagnostics(blockers, sources, "text", args.color)
        return EXIT_ERRORS
    from flowc.runtime.failures import (
        FailureLog,
        log_path,
        readable,
        spark_errors,
        spark_output,
        summary,
    )
    from flowc.runtime.warm import WARM_MASTER, using

    if args.report:
        _check_report_path(args.report)
    _check_utf8_names(job, args)
    reset = _reset_names(job, args.reset_state)
    # Spark's own output (log4j lines, progress bars, stack traces) goes to a log file
    # unless --verbose; flowc's progress lines go to the terminal either way.
    log = None if args.verbose else log_path(job, args.checkpoint_dir, args.base_dir)
    remote, warm = (args.remote, None) if args.remote is not None else warm_spark(job, args.master)
    from flowc.runtime.run import SparkRefused, run_job

    try:
        with (
            using(warm) if warm is not None else nullcontext(),
            spark_output(log) if log is not None else nullcontext(sys.stderr) as terminal,
        ):
            report = run_job(
                job,
                available_now=args.available_now,
                checkpoint_dir=args.checkpoint_dir,
                master=args.master or WARM_MASTER,
                remote=remote,
                base_dir=args.base_dir,
                out=terminal,
                log_file=log,
                reset_state=reset,
                warm=warm is not None,
            )
    except UnsupportedOnSpark as error:
        raise NotRunnable(str(error)) from None
    except SparkRefused as error:
        if error.diagnostic is not None:
            print_diagnostics([error.diagnostic], sources, "text", args.color)
        else:
            sys.stderr.write(error.text)
        return EXIT_ERRORS
    except CompileError as error:  # a sink's folder flowc refuses (flowc.runtime.ownership)
        print_diagnostics(error.diagnostics, sources, "text", args.color)
        return EXIT_ERRORS
    except spark_errors() as raised:  # Spark failed, or its JVM died, while flowc watched
        failure = readable(raised)
        path = FailureLog(job, args.checkpoint_dir, args.base_dir, log).record("run", failure)
        sys.stderr.write(summary(failure, path, "Spark failed while the job ran"))
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
        print_diagnostics(placed, sources, "text", args.color)
    if report.stopped_by_user:
        return 130
    return EXIT_ERRORS if failed else EXIT_USAGE if report_failed else EXIT_OK


def warm_spark(job: CompiledJob, master: str | None) -> tuple[str | None, Path | None]:
    """The warm Spark's URL and state folder; (None, None) where the job runs on a new
    local session, with a line on standard error saying why where a warm Spark runs
    (docs/warm-spark.md)."""
    from flowc.runtime.warm import choose, state_dir

    folder = state_dir()
    choice = choose(job, master is not None, folder)
    if choice.url is None:
        if choice.reason is not None:
            write_stderr(choice.reason + "\n")
        return None, None
    return choice.url, folder


def rescale(args: argparse.Namespace) -> int:
    """``flowc rescale FILE``: the state of a stopped job's queries moved to the plan's
    partitions (its SET parallelism, or --set), as ``flowc run`` does before starting."""
    job, sources = _compiled(args)
    if job is None:
        return EXIT_ERRORS
    if job.spark_plan.batch:
        raise UsageError("flowc rescale: a batch job keeps no checkpoint, no state to rescale")
    missing = spark_missing(job, "rescale")
    if missing is not None:
        print_diagnostics([missing], sources, "text", args.color)
        return EXIT_ERRORS
    from flowc.runtime.failures import log_path, spark_output
    from flowc.runtime.rescale import RescaleFailed
    from flowc.runtime.run import rescale_job

    log = log_path(job, args.checkpoint_dir, args.base_dir)
    try:
        with spark_output(log) as terminal:
            rescale_job(
                job,
                queries=args.query,
                checkpoint_dir=args.checkpoint_dir,
                master=args.master,
                base_dir=args.base_dir,
                out=terminal,
            )
    except ValueError as error:
        raise UsageError(str(error)) from None
    except CompileError as error:
        print_diagnostics(error.diagnostics, sources, "text", args.color)
        return EXIT_ERRORS
    except RescaleFailed as error:
        write_stderr(
            f"error: the state could not be repartitioned (the checkpoint is as it was): {error}\n"
        )
        return EXIT_ERRORS
    return EXIT_OK


def _reset_names(job: CompiledJob, names: list[str]) -> list[str]:
    """``--reset-state QUERY``: each a query of the job (an INSERT's sink), else exit 2."""
    queries = [q.name for q in job.spark_plan.queries]
    for name in names:
        if name not in queries:
            known = ", ".join(queries)
            raise UsageError(f"--reset-state {name}: the job has no query of that name ({known})")
    return names


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
                f"{encodable(path)}: not valid UTF-8, and Spark takes only UTF-8 paths; "
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
        write_file(path, json.dumps(report.to_json(), indent=2) + "\n")
    except OutputError as error:
        write_stderr(f"error: --report {error}\n")
        return False
    return True
