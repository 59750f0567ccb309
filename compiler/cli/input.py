"""What the commands read: a .flow file's text (:func:`read_source`), compiled as the
command's options say (:func:`compile_source`), and the stages ``--emit`` prints.

The command modules (:mod:`flowc.cli.compile`, :mod:`flowc.cli.run`, ...) share these;
:mod:`flowc.cli.main` imports the command modules, so none of them imports it.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import stat
import sys
from collections.abc import Mapping

from flowc import driver
from flowc.cli.output import UsageError
from flowc.diagnostics import Diagnostic, Severity
from flowc.errorcodes import Code
from flowc.job import CompiledJob
from flowc.limits import MAX_SOURCE_CHARS
from flowc.spans import undecodable_at

__all__ = [
    "FORMATS",
    "GRAPH_FORMATS",
    "MAX_SOURCE_BYTES",
    "STAGE_FORMATS",
    "compile_source",
    "read_source",
    "spark_missing",
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
        line, column = undecodable_at(data, error)
        raise UsageError(
            f"{path}:{line}:{column}: not valid UTF-8 (byte 0x{data[error.start]:02x}); "
            "save the file as UTF-8"
        ) from None


def command_line_overrides(args: argparse.Namespace) -> dict[str, str]:
    """``--set KEY=VALUE`` (and ``--batch``), in command-line order, the last for a key
    winning in its place. Each is one value for one key, handed to the compiler as data
    (never pasted into the program, see :func:`flowc.trust.policy.read_overrides`)."""
    overrides: dict[str, str] = {}
    for assignment in args.set:
        key, equals, value = assignment.partition("=")
        key, value = key.strip(), value.strip()
        if not equals or not key:
            raise UsageError(f"--set {assignment}: write KEY=VALUE")
        overrides.pop(key, None)
        overrides[key] = value
    if args.batch:
        overrides.pop("execution.mode", None)
        overrides["execution.mode"] = "batch"
    return overrides


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
    return driver.compile(
        text,
        filename=path,
        for_spark=for_spark,
        overrides=overrides,
        trusted=not args.untrusted,
        base_dir=args.base_dir,
    )


def spark_missing(job: CompiledJob, command: str) -> Diagnostic | None:
    """E0817 at the job's first INSERT where this Python has no pyspark: ``pip install
    flowc`` is the compiler alone (docs/install.md); running a job needs the ``spark``
    extra. Checked before anything starts, so a light install says what to install
    rather than failing on an import."""
    if importlib.util.find_spec("pyspark") is not None:
        return None
    span = job.program.inserts[0].span if job.program.inserts else job.program.span
    return Diagnostic(
        Code.E0817,
        Severity.ERROR,
        f"flowc {command} needs Spark, and {sys.executable} has no pyspark "
        "(flowc is installed without Spark)",
        span,
        "pip install 'flowc[spark]' into this interpreter (PySpark 4, and pandas, pyarrow "
        "and protobuf for its stateful processors; Spark needs Java 17)",
    )
