"""How a ``flowc`` command ends and what it writes: the exit codes, the errors that map to
them, and every output (stdout, ``-o``, ``--emit all``, ``--report``, diagnostics).

A full disk, a directory in the way or a closed pipe is a message and exit 2, never a
traceback. Text is written as UTF-8; a lone surrogate (a file name that is not UTF-8,
decoded by Python with surrogateescape) is written as its escape, \\udcff, which is valid in
every format flowc writes (a JSON string, a Python string or docstring, plain text).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TextIO

from flowc._version import __version__
from flowc.diagnostics import Diagnostic, render_json, render_text

EXIT_OK = 0
EXIT_ERRORS = 1
EXIT_USAGE = 2
EXIT_INTERNAL = 101


class UsageError(Exception):
    """Bad arguments or an unreadable file: exit code 2."""


class NotRunnable(Exception):
    """A program flowc can plan but the Spark backend cannot run yet: exit code 1."""


class OutputError(UsageError):
    """flowc could not write its output (a full disk, say): exit code 2."""


def encodable(text: str) -> str:
    """``text`` with each lone surrogate as its backslash escape."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def write_file(path: str | Path, text: str) -> None:
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
            stream.write(encodable(text))
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
        discard_stdout()
        raise OutputError(f"cannot write to standard output: {_reason(error)}") from None


def write_stderr(text: str) -> None:
    """A message on standard error; a file name that is not UTF-8 shows as its escapes."""
    sys.stderr.write(encodable(text))


def discard_stdout() -> None:
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


def use_color(choice: str, stream: TextIO) -> bool:
    if choice == "always":
        return True
    if choice == "never" or os.environ.get("NO_COLOR"):
        return False
    return stream.isatty()


def print_diagnostics(
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
        write_stderr(render_text(diagnostics, sources, use_color(color, sys.stderr)))
