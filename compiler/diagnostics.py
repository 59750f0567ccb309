"""Diagnostics: what flowc tells a user about their program, as objects and as text or JSON.

Every pass reports into a :class:`Reporter` instead of raising, so one run reports every
problem of a file. The text form follows rustc's: ``error[CODE]: message``, the
location, the source line, a caret under the span and a ``help:`` line.
"""

from __future__ import annotations

import difflib
import io
import json
from collections.abc import Iterable, Sequence
from enum import StrEnum
from typing import Any

from flowc.errorcodes import Code
from flowc.fast_dataclass import dataclass
from flowc.spans import Span


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True, slots=True)
class Diagnostic:
    code: Code
    severity: Severity
    message: str
    span: Span
    help: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity.value,
            "message": self.message,
            "file": self.span.file,
            "line": self.span.line,
            "column": self.span.column,
            "end_line": self.span.end_line,
            "end_column": self.span.end_column,
            "help": self.help,
        }


class CompileError(Exception):
    """Raised by :func:`flowc.compile` on errors; ``diagnostics`` holds every one of them."""

    def __init__(self, diagnostics: Sequence[Diagnostic]) -> None:
        self.diagnostics = tuple(diagnostics)
        errors = [d for d in self.diagnostics if d.severity is Severity.ERROR]
        first = errors[0] if errors else None
        summary = f"{first.span}: {first.message}" if first else "compilation failed"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        super().__init__(summary + more)


class Reporter:
    """Collects diagnostics of one compilation, in the order they are found."""

    def __init__(self) -> None:
        self.diagnostics: list[Diagnostic] = []

    def error(self, code: Code, message: str, span: Span, help: str | None = None) -> None:
        self.diagnostics.append(Diagnostic(code, Severity.ERROR, message, span, help))

    def warning(self, code: Code, message: str, span: Span, help: str | None = None) -> None:
        self.diagnostics.append(Diagnostic(code, Severity.WARNING, message, span, help))

    @property
    def has_errors(self) -> bool:
        return any(d.severity is Severity.ERROR for d in self.diagnostics)

    def sorted(self) -> list[Diagnostic]:
        """By position, errors before warnings at the same place; stable otherwise."""
        return sorted(
            self.diagnostics,
            key=lambda d: (d.span.line, d.span.column, d.severity is Severity.WARNING),
        )


def did_you_mean(word: str, candidates: Iterable[str]) -> str | None:
    """A ``did you mean 'x'?`` hint for the closest candidate, if one is close enough."""
    pool = sorted(set(candidates))
    matches = difflib.get_close_matches(word, pool, n=1, cutoff=0.6)
    if not matches:
        lowered = {c.lower(): c for c in pool}
        if word.lower() in lowered:
            matches = [lowered[word.lower()]]
    return f"did you mean '{matches[0]}'?" if matches else None


def one_of(candidates: Iterable[str]) -> str:
    return ", ".join(f"'{c}'" for c in sorted(candidates))


# ---------------------------------------------------------------- rendering


def render_json(diagnostics: Sequence[Diagnostic]) -> str:
    return json.dumps([d.to_json() for d in diagnostics], indent=2, ensure_ascii=False) + "\n"


def render_text(diagnostics: Sequence[Diagnostic], sources: dict[str, str], color: bool) -> str:
    """Render diagnostics as text; ``sources`` maps file names to their text for excerpts.

    Colour goes through rich. Without colour, text that rich would print unchanged
    (printable ASCII) is joined directly, which spares a command importing rich.
    """
    lines: dict[str, list[str]] = {}
    rendered: list[list[tuple[str, str]]] = []
    for diagnostic in diagnostics:
        file = diagnostic.span.file
        if file not in lines and file in sources:
            lines[file] = sources[file].split("\n")
        rendered.append(_render_one(diagnostic, lines.get(file)))
    errors = sum(d.severity is Severity.ERROR for d in diagnostics)
    warnings = len(diagnostics) - errors
    if errors or warnings:
        parts = []
        if errors:
            parts.append(f"{errors} error{'s' if errors != 1 else ''}")
        if warnings:
            parts.append(f"{warnings} warning{'s' if warnings != 1 else ''}")
        rendered.append([(", ".join(parts), "bold")])
    if not color and all(_prints_as_is(text) for pieces in rendered for text, _ in pieces):
        return "".join("".join(text for text, _ in pieces) + "\n" for pieces in rendered)
    return _render_rich(rendered, color)


def _prints_as_is(text: str) -> bool:
    """Whether rich prints ``text`` unchanged: printable ASCII (and line breaks) only."""
    return text.isascii() and text.replace("\n", "").isprintable()


def _render_rich(rendered: list[list[tuple[str, str]]], color: bool) -> str:
    from rich.console import Console
    from rich.text import Text

    console = Console(
        color_system="standard" if color else None,
        force_terminal=color,
        no_color=not color,
        width=10_000,
        highlight=False,
        soft_wrap=True,
        record=True,
        file=io.StringIO(),
    )
    for pieces in rendered:
        out = Text()
        for text, style in pieces:
            out.append(text, style=style or None)
        console.print(out)
    return console.export_text(styles=color)


def _render_one(diagnostic: Diagnostic, lines: list[str] | None) -> list[tuple[str, str]]:
    """One diagnostic as (text, rich style) pieces; the style is empty for plain text."""
    span = diagnostic.span
    color = "red" if diagnostic.severity is Severity.ERROR else "yellow"
    out: list[tuple[str, str]] = []
    out.append((f"{diagnostic.severity.value}[{diagnostic.code}]", f"bold {color}"))
    out.append((f": {diagnostic.message}\n", "bold"))
    gutter = len(str(span.line))
    pad = " " * gutter
    out.append((f"{pad}--> ", "bold blue"))
    out.append((f"{span.file}:{span.line}:{span.column}\n", ""))
    line_text = _source_line(lines, span.line)
    if line_text is not None:
        shown = line_text.expandtabs(1)
        out.append((f"{pad} |\n", "bold blue"))
        out.append((f"{span.line} | ", "bold blue"))
        out.append((shown + "\n", ""))
        start = max(span.column - 1, 0)
        if span.end_line == span.line:
            width = max(span.end_column - span.column, 1)
        else:
            width = max(len(shown) - start, 1)
        out.append((f"{pad} | ", "bold blue"))
        out.append((" " * min(start, len(shown)) + "^" * width, f"bold {color}"))
        out.append(("\n", ""))
    if diagnostic.help:
        out.append((f"{pad} = ", "bold blue"))
        out.append(("help", "bold"))
        out.append((f": {diagnostic.help}\n", ""))
    return out


def _source_line(lines: list[str] | None, line: int) -> str | None:
    if lines is None or not 1 <= line <= len(lines):
        return None
    return lines[line - 1].rstrip("\r")
