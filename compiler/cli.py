"""The ``flowc`` command line: its arguments, reading a .flow file, and ``main``.

Each command is a module of its own: :mod:`flowc.cli_compile` (check, compile),
:mod:`flowc.cli_run` (run), :mod:`flowc.cli_diff` (diff), :mod:`flowc.cli_fmt` (fmt);
what they write and the errors that end them are :mod:`flowc.cli_output`'s. Exit codes:
0 clean (warnings allowed), 1 the program has errors, 2 usage or file errors (missing
file, bytes that are not UTF-8), 101 a crash inside flowc, with a report written to a
file. A Python traceback never reaches the user.
"""

from __future__ import annotations

import argparse
import datetime
import logging
import os
import platform
import stat
import sys
import tempfile
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from flowc import __version__
from flowc.cli_output import (
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
from flowc.limits import MAX_SOURCE_CHARS
from flowc.spans import line_column

if TYPE_CHECKING:
    from flowc.job import CompiledJob

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

FORMATS = ("text", "json", "dot", "mermaid")
#: The graph stages' formats: html is the plan viewer (docs/viewer.md).
GRAPH_FORMATS = (*FORMATS, "html")
#: Each stage and the formats it has; ``--emit all`` writes exactly these.
STAGE_FORMATS: dict[str, tuple[str, ...]] = {
    "ast": ("text", "json"),
    "transformations": GRAPH_FORMATS,
    "streamgraph": GRAPH_FORMATS,
    "jobgraph": GRAPH_FORMATS,
    "physical": ("text", "json"),
    "pyspark": ("text",),
}
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
    test.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    _trust_options(test)
    _color_option(test)

    lsp = commands.add_parser("lsp", help="the language server, over stdin and stdout")
    lsp.add_argument("--stdio", action="store_true", help="(the default; editors pass it)")
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
        # the bytes before the first bad one decode: the column counts characters, as
        # every other column does
        before = data[: error.start].decode("utf-8").removeprefix("\ufeff")
        line, column = line_column(before, len(before))
        raise UsageError(
            f"{path}:{line}:{column}: not valid UTF-8 (byte 0x{data[error.start]:02x}); "
            "save the file as UTF-8"
        ) from None


def compile_source(
    args: argparse.Namespace,
    text: str,
    path: str,
    *,
    for_spark: bool = True,
    overrides: Mapping[str, str] | None = None,
) -> CompiledJob:
    """:func:`flowc.compile` of one file's text, as trusted as the command's ``--untrusted``
    and ``--base-dir`` say; raises CompileError as it does."""
    from flowc.job import compile

    return compile(
        text,
        filename=path,
        for_spark=for_spark,
        overrides=overrides,
        trusted=not args.untrusted,
        base_dir=args.base_dir,
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
    """The function of one command (its module imports this one, so it is imported here)."""
    from flowc import cli_compile, cli_diff, cli_fmt, cli_lsp, cli_run, cli_test

    commands: dict[str, Callable[[argparse.Namespace], int]] = {
        "check": cli_compile.check,
        "compile": cli_compile.compile_file,
        "run": cli_run.run,
        "diff": cli_diff.diff,
        "fmt": cli_fmt.fmt,
        "test": cli_test.test,
        "lsp": cli_lsp.lsp,
    }
    return commands[name]


#: Commands whose writers walk expression trees after compiling, under the recursion limit
#: compiling holds (not the commands that start Spark or serve an editor for long).
_WRITERS = frozenset({"check", "compile", "diff", "fmt"})


def main(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    # flowc reports sqlglot's problems as diagnostics; its log lines would only repeat them.
    logging.getLogger("sqlglot").setLevel(logging.CRITICAL)
    try:
        args = _parser().parse_args(arguments)
        if args.command not in _WRITERS:
            return _command(args.command)(args)
        from flowc.sql_parsing import deep_recursion

        # as flowc.compile does: the writers after it walk the same (bounded) trees
        with deep_recursion():
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
