"""The errors a program compiled for Spark gives, as the refusal tests of the updating
pipelines compare them (code, line, message); shared so each module need not copy it."""

from __future__ import annotations

import flowc
from flowc.diagnostics import CompileError, Severity


def compile_errors(text: str) -> list[tuple[str, int, str]]:
    """The errors compiling ``text`` for Spark gives: code, line, message (none where it
    compiles)."""
    try:
        job = flowc.compile(text, "job.flow", for_spark=True)
    except CompileError as error:
        found = error.diagnostics
    else:
        found = job.diagnostics
    return [(d.code.value, d.span.line, d.message) for d in found if d.severity is Severity.ERROR]


def edited(text: str, edits: list[tuple[str, str]]) -> str:
    """``text`` with each (old, new) replaced in order; each old must be there."""
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    return text
