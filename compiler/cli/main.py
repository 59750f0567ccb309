"""The ``flowc`` command line: its arguments and ``main``.

Each command is a module of its own: :mod:`flowc.cli.compile` (check, compile),
:mod:`flowc.cli.run` (run), :mod:`flowc.cli.diff` (diff), :mod:`flowc.cli.fmt` (fmt),
:mod:`flowc.cli.test` (test), :mod:`flowc.cli.lsp` (lsp). What they read is
:mod:`flowc.cli.input`'s; what they write and the errors that end them are
:mod:`flowc.cli.output`'s. This module imports the commands, never the reverse. Exit codes:
0 clean (warnings allowed), 1 the program has errors, 2 usage or file errors (missing
file, bytes that are not UTF-8), 101 a crash inside flowc, with a report written to a
file. A Python traceback never reaches the user.
"""

from __future__ import annotations

import argparse
import datetime
import logging
import os
import sys
import tempfile
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from flowc._version import __version__
from flowc.cli.input import (
    FORMATS,
    GRAPH_FORMATS,
    MAX_SOURCE_BYTES,
    STAGE_FORMATS,
    compile_source,
    read_source,
)
from flowc.cli.output import (
    EXIT_ERRORS,
    EXIT_INTERNAL,
    EXIT_OK,
    EXIT_USAGE,
    NotRunnable,
    OutputError,
    UsageError,
    discard_stdout,
    write_stderr,
)
from flowc.outputs import without_young_collections
from flowc.sql.sql_parsing import deep_recursion

__all__ = [
    "EXIT_ERRORS",
    "EXIT_INTERNAL",
    "EXIT_OK",
    "EXIT_USAGE",
    "MAX_SOURCE_BYTES",
    "STAGE_FORMATS",
    "NotRunnable",
    "OutputError",
    "UsageError",
    "compile_source",
    "main",
    "read_source",
]

STAGES = (*STAGE_FORMATS, "all")


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
    _mode_options(check, "check")
    _trust_options(check)
    _color_option(check)

    compile_ = commands.add_parser("compile", help="compile a file and print one stage")
    compile_.add_argument("file", metavar="FILE")
    compile_.add_argument("--emit", choices=STAGES, default="ast", help="the stage to print")
    compile_.add_argument(
        "--format",
        choices=GRAPH_FORMATS,
        help="output format (default: text); html: the plan viewer, one self-contained page",
    )
    compile_.add_argument("-o", "--output", metavar="PATH", help="write to PATH, not stdout")
    _mode_options(compile_, "compile")
    _trust_options(compile_)
    _color_option(compile_)

    run = commands.add_parser("run", help="run a job on Spark Structured Streaming")
    run.add_argument("file", metavar="FILE")
    run.add_argument(
        "--available-now", action="store_true", help="process what is there, then stop"
    )
    _mode_options(run, "run")
    run.add_argument(
        "--master",
        help="Spark master (default local[*]; given, the job runs on a new session, never "
        "the warm Spark)",
    )
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

    rescale = commands.add_parser(
        "rescale",
        help="move a stopped job's state to the plan's partitions, as flowc run would first",
    )
    rescale.add_argument("file", metavar="FILE")
    _mode_options(rescale, "rescale")
    rescale.add_argument(
        "--query",
        action="append",
        default=[],
        metavar="QUERY",
        help="rescale only QUERY (an INSERT's sink); default: every query",
    )
    rescale.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    rescale.add_argument(
        "--checkpoint-dir", help="where queries keep checkpoints (default: beside the file)"
    )
    _trust_options(rescale)
    _color_option(rescale)

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

    fmt = commands.add_parser(
        "fmt", help="rewrite files in the canonical layout (--check: only tell)"
    )
    fmt.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="files, folders (every .flow under them), or - for standard input",
    )
    fmt.add_argument(
        "--check", action="store_true", help="rewrite nothing; exit 1 if a file would change"
    )
    fmt.add_argument("--diff", action="store_true", help="with --check: show the changes")
    _color_option(fmt)

    test = commands.add_parser(
        "test", help="run the YAML tests beside jobs (*.test.yaml), or lock their plans"
    )
    test.add_argument("paths", nargs="*", metavar="PATH", help="test files, folders or .flow files")
    test.add_argument("--plans", metavar="DIR", help="compare every job's plans under DIR")
    test.add_argument("--update", action="store_true", help="with --plans: lock the plans as now")
    test.add_argument("--junit-xml", metavar="FILE", help="write a JUnit XML report")
    test.add_argument(
        "--master",
        help="Spark master (default local[2]; given, the tests run on a new session, never "
        "the warm Spark)",
    )
    _trust_options(test)
    _color_option(test)

    spark = commands.add_parser(
        "spark", help="start, show or stop the warm Spark that run and test use"
    )
    spark.add_argument("action", choices=("start", "status", "stop"))
    spark.add_argument(
        "--idle-minutes",
        type=float,
        help="start: stop after this many minutes unused (default 30)",
    )

    lsp = commands.add_parser("lsp", help="the language server, over stdin and stdout")
    lsp.add_argument("--stdio", action="store_true", help="(the default; editors pass it)")
    return parser


def _mode_options(parser: argparse.ArgumentParser, verb: str) -> None:
    """``--batch`` and ``--set``, the same for check, compile and run: what ``flowc run
    --batch`` refuses, ``flowc check --batch`` refuses too."""
    parser.add_argument(
        "--batch",
        action="store_true",
        help=f"{verb} as a batch job over bounded input, every window and outer-join row "
        "written (as --set execution.mode=batch)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="give one key one value: a setting (as SET KEY = VALUE; would) or "
        "SOURCE_OR_SINK.OPTION",
    )


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


def _write_crash_report(argv: Sequence[str]) -> str:
    import platform

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


def _command(name: str) -> Callable[[argparse.Namespace], int]:
    """The function of one command. Its module is imported here, when it runs, so that
    ``flowc check`` does not load what only ``diff`` (the state code), ``test`` (PyYAML)
    or ``compile --format html`` (the viewer) need: about 100 ms of every start."""
    if name in ("check", "compile"):
        from flowc.cli import compile as cli_compile

        return cli_compile.check if name == "check" else cli_compile.compile_file
    if name in ("run", "rescale"):
        from flowc.cli import run as cli_run

        return cli_run.run if name == "run" else cli_run.rescale
    if name == "diff":
        from flowc.cli import diff as cli_diff

        return cli_diff.diff
    if name == "fmt":
        from flowc.cli import fmt as cli_fmt

        return cli_fmt.fmt
    if name == "test":
        from flowc.cli import test as cli_test

        return cli_test.test
    if name == "spark":
        from flowc.cli import spark as cli_spark

        return cli_spark.spark
    assert name == "lsp", name
    from flowc.cli import lsp as cli_lsp

    return cli_lsp.lsp


#: Commands whose writers walk expression trees after compiling, under the recursion limit
#: compiling holds (not the commands that start Spark or serve an editor for long).
WRITERS = frozenset({"check", "compile", "diff", "fmt"})


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    # flowc reports sqlglot's problems as diagnostics; its log lines would only repeat them.
    logging.getLogger("sqlglot").setLevel(logging.CRITICAL)
    try:
        # The parser is garbage once read: made without a young collection over it (one
        # fell there or not by how many objects the imports before it happened to make).
        with without_young_collections():
            args = _parser().parse_args(arguments)
        if args.command not in WRITERS:
            return _command(args.command)(args)
        # as flowc.compile does: the writers after it walk the same (bounded) trees. They
        # run without the cyclic collector: what they make (the job, its renderings) lives
        # until they end, and a compile leaves little garbage in cycles, yet young
        # collections over the job as it grows took a tenth of a 10,000-operator compile
        # (docs/limits.md).
        with deep_recursion(), without_young_collections():
            return _command(args.command)(args)
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
        discard_stdout()  # the reader left: nothing more to say, and no error at exit
        return EXIT_OK
    except BaseException:
        path = _write_crash_report(arguments)
        sys.stderr.write(
            "error: internal error: flowc crashed; this is a bug in flowc, not in your program.\n"
            f"A report was written to {path}\n"
        )
        return EXIT_INTERNAL
