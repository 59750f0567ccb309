"""The compiler's passes, in the order they run (cf. sqlglot's optimizer ``RULES``).

Each pass reads the previous stage's IR from the :class:`~flowc.job.CompiledJob` under
construction and returns the next; compilation stops after the first pass that reported
an error, so later passes only ever see a program that earlier ones accepted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flowc.analyze import analyze
from flowc.diagnostics import Reporter
from flowc.parser import parse


@dataclass(frozen=True, slots=True)
class Pass:
    """``stage`` is the CompiledJob attribute the pass fills in."""

    stage: str
    run: Callable[[Any, Reporter], Any]


def _parse(job: Any, reporter: Reporter) -> Any:
    return parse(job.source, job.file, reporter)


def _analyze(job: Any, reporter: Reporter) -> Any:
    return analyze(job.ast, reporter)


PASSES: tuple[Pass, ...] = (
    Pass("ast", _parse),
    Pass("program", _analyze),
)
