"""``--set KEY=VALUE``: each one value for one key, never program text.

An override is read as a value would be written in the program (a number, true or false,
one quoted string, or else the text as a string). Its diagnostics point at the command line
(file :data:`COMMAND_LINE`, line N for the N-th override, shown as ``--set KEY=VALUE``)
and their messages start with ``--set KEY=VALUE:``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import replace

from flowc import ast, catalog
from flowc.diagnostics import Reporter
from flowc.errorcodes import Code
from flowc.fast_dataclass import dataclass
from flowc.spans import Span
from flowc.vocabulary import LiteralKind

#: The file name of diagnostics about ``--set`` overrides.
COMMAND_LINE = "<command line>"


@dataclass(frozen=True, slots=True)
class Override:
    """One ``--set KEY=VALUE``: its value as if written in the program, on the command line."""

    key: str
    value: ast.Value
    key_span: Span
    span: Span

    @property
    def is_setting(self) -> bool:
        return is_setting(self.key)

    def option(self, key: str | None = None) -> ast.Option:
        """The override as a ``key = value`` option (``key`` without the ``name.`` prefix)."""
        return ast.Option(
            key=key or self.key, key_span=self.key_span, value=self.value, span=self.span
        )


def is_setting(key: str) -> bool:
    """Whether ``--set KEY=...`` sets a setting (else an option ``source_or_sink.option``)."""
    return key in catalog.SETTINGS or key.startswith(catalog.SETTING_PREFIXES) or "." not in key


def shown(text: str) -> str:
    """Text as one printable line: other characters as escapes."""
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text)


def command_line_lines(overrides: Mapping[str, str]) -> list[str]:
    """``--set KEY=VALUE``, one line per override: the "source" of :data:`COMMAND_LINE`."""
    return [f"--set {shown(key)}={shown(value)}" for key, value in overrides.items()]


def command_line_text(overrides: Mapping[str, str]) -> str:
    """What diagnostics on :data:`COMMAND_LINE` quote (give it to ``render_text``)."""
    return "\n".join(command_line_lines(overrides))


_NUMBER = re.compile(r"[+-]?\d+(\.\d+)?")
_QUOTED = re.compile(r"'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.|\"\")*\"", re.DOTALL)


def _value(text: str, span: Span) -> ast.Value | str:
    """``--set`` text as a value: a number, true/false, one quoted string, or else the
    text itself as a string. A problem is returned as its description."""
    if any(not c.isprintable() for c in text):
        return "a value cannot hold line breaks or other control characters"
    if _NUMBER.fullmatch(text):
        return ast.Value(kind=LiteralKind.NUMBER, text=text, span=span)
    if text.lower() in ("true", "false"):
        return ast.Value(kind=LiteralKind.WORD, text=text, span=span)
    if text[:1] in ("'", '"'):
        if not _QUOTED.fullmatch(text):
            return (
                "a value that starts with a quote must be one quoted string, with nothing after it"
            )
        return ast.Value(kind=LiteralKind.STRING, text=text, span=span)
    quoted = "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"
    return ast.Value(kind=LiteralKind.STRING, text=quoted, span=span)


def read_overrides(overrides: Mapping[str, str], reporter: Reporter) -> list[Override]:
    """Each ``--set KEY=VALUE`` as an :class:`Override`; a malformed value is E0302 (a
    setting) or E0405 (an option) and left out."""
    out: list[Override] = []
    lines = command_line_lines(overrides)
    for number, ((key, text), line) in enumerate(zip(overrides.items(), lines, strict=True), 1):
        key_end = len("--set ") + len(shown(key)) + 1
        key_span = Span(COMMAND_LINE, number, len("--set ") + 1, number, key_end)
        value_span = Span(COMMAND_LINE, number, key_end + 1, number, len(line) + 1)
        value = _value(text, value_span)
        if isinstance(value, str):
            what = "setting" if is_setting(key) else "option"
            reporter.error(
                Code.E0302 if is_setting(key) else Code.E0405,
                f"invalid value for {what} '{key}': {value}",
                value_span,
                help="--set takes one value for one key: a number, true or false, a word, "
                "or one 'quoted string'",
            )
            continue
        whole = Span(COMMAND_LINE, number, 1, number, len(line) + 1)
        out.append(Override(key=key, value=value, key_span=key_span, span=whole))
    return out


def label_command_line(reporter: Reporter, start: int, overrides: Mapping[str, str]) -> None:
    """Begin the messages of diagnostics on the command line (from index ``start`` on) with
    the ``--set KEY=VALUE`` they are about."""
    lines = command_line_lines(overrides)
    for index in range(start, len(reporter.diagnostics)):
        diagnostic = reporter.diagnostics[index]
        line = diagnostic.span.line
        if diagnostic.span.file != COMMAND_LINE or not 1 <= line <= len(lines):
            continue
        if not diagnostic.message.startswith(lines[line - 1]):
            message = f"{lines[line - 1]}: {diagnostic.message}"
            reporter.diagnostics[index] = replace(diagnostic, message=message)
