"""``flowc fmt``: rewrite files in the canonical layout (:mod:`flowc.formatter`).

``flowc fmt FILE...`` rewrites each file that is not yet formatted (a folder: every
.flow file under it); ``-`` reads standard
input and writes the result to standard output; ``--check`` rewrites nothing and exits 1
when a file would change (``--diff`` shows how). A file with a syntax error is left as
it is, its diagnostics printed as ``flowc check`` prints them, and the exit is 1.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

from flowc.cli.input import read_source
from flowc.cli.output import (
    EXIT_ERRORS,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    print_diagnostics,
    write_file,
    write_stderr,
    write_stdout,
)
from flowc.formatter import format_program
from flowc.limits import MAX_SOURCE_CHARS


def fmt(args: argparse.Namespace) -> int:
    status = EXIT_OK
    if "-" in args.files and len(args.files) > 1:
        raise UsageError("'-' (standard input) cannot be formatted with other files")
    for path in _expand(args.files):
        try:
            text = _read_stdin() if path == "-" else read_source(path)
        except UsageError as error:
            write_stderr(f"error: {error}\n")
            status = EXIT_USAGE
            continue
        shown = "<stdin>" if path == "-" else path
        result = format_program(text, shown)
        if result.text is None:
            print_diagnostics(list(result.diagnostics), {shown: text}, "text", args.color)
            status = max(status, EXIT_ERRORS)
            continue
        if path == "-" and not args.check:
            write_stdout(result.text)
            continue
        if result.text == text:
            continue
        if args.check:
            write_stderr(f"would reformat {shown}\n")
            if args.diff:
                write_stdout(_diff(shown, text, result.text))
            status = max(status, EXIT_ERRORS)
        else:
            write_file(path, result.text)
            write_stderr(f"reformatted {shown}\n")
    return status


def _expand(paths: list[str]) -> list[str]:
    """Files as given; a folder stands for every .flow file under it, in order."""
    found: list[str] = []
    for path in paths:
        if path != "-" and Path(path).is_dir():
            found += sorted(str(p) for p in Path(path).rglob("*.flow") if p.is_file())
        else:
            found.append(path)
    return found


def _read_stdin() -> str:
    text = sys.stdin.read(MAX_SOURCE_CHARS + 1)
    return text.removeprefix("\ufeff")


def _diff(path: str, before: str, after: str) -> str:
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile=path,
            tofile=f"{path} (formatted)",
        )
    )
