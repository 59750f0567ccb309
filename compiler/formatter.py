"""``flowc fmt``: one canonical layout for a program, its tokens and comments kept.

The formatter changes whitespace only, never a token: the text of every word, literal,
quoted name, operator and comment is written back as it was, in the same order, so the
program compiles to the same plans (docs/formatting.md). Word case is kept too, because a
column's name is spelled as written (``SELECT Key`` names a column ``Key``). What it
decides:

- statements start at column 0; a blank line between two statements stays one blank
  line, more collapse to one; no blank line inside a statement;
- every pipe step starts a line, ``  |> STEP``; a step's further lines are indented by 5,
  lines inside brackets by 2 more per bracket; other continuation lines by 2;
- runs of spaces become one space; where the author put no space (``count(*)``,
  ``a.b``) none is added, except one after a comma;
- a line break the author put inside a statement is kept (as gofmt keeps them): which
  lists are one per line is the author's choice; its indentation is not;
- a comment after code on its line is two spaces after it; trailing spaces go; the file
  ends with one newline.

A program with a syntax error is not formatted: the parser's diagnostics are returned,
as ``flowc check`` reports them.
"""

from __future__ import annotations

import re
from enum import Enum

from flowc.diagnostics import Diagnostic, Reporter, Severity
from flowc.driver import check_input_bounds
from flowc.fast_dataclass import dataclass
from flowc.syntax.parser import deep_recursion, parse


class TokenKind(Enum):
    SPACE = "space"
    LINE_COMMENT = "line_comment"
    BLOCK_COMMENT = "block_comment"
    TEXT = "text"


@dataclass(frozen=True, slots=True)
class Token:
    kind: TokenKind
    text: str


_TOKEN = re.compile(
    r"(?P<space>\s+)"
    r"|(?P<line_comment>--[^\n]*)"
    r"|(?P<block_comment>/\*(?:[^*]|\*+[^*/])*\*+/)"
    r"|(?P<text>'(?:[^'\\]|\\.|'')*'"
    r'|"(?:[^"\\]|\\.|"")*"'
    r"|`(?:[^`]|``)*`"
    r"|\|>"
    r"|[A-Za-z_][A-Za-z0-9_]*"
    r"|(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?[A-Za-z]*"
    r"|.)",
    re.DOTALL,
)

_OPEN = frozenset("([")
_CLOSE = frozenset(")]")
#: Indentation of a pipe step's line, and of the step's further lines.
_STEP_INDENT = 2
_STEP_BODY_INDENT = 5
_CONTINUATION_INDENT = 2


def tokens(text: str) -> list[Token]:
    """The program's tokens, whitespace and comments included (the lexer's rules for
    strings, quoted names and comments; operators one character each)."""
    found: list[Token] = []
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup
        assert kind is not None
        found.append(Token(TokenKind(kind), match.group()))
    return found


def significant(text: str) -> list[str]:
    """What formatting must keep: every token but whitespace, in order (line comments
    without their trailing spaces)."""
    return [
        t.text.rstrip() if t.kind is TokenKind.LINE_COMMENT else t.text
        for t in tokens(text)
        if t.kind is not TokenKind.SPACE
    ]


@dataclass(frozen=True, slots=True)
class Formatted:
    """The canonical text, or the diagnostics that stopped formatting."""

    text: str | None
    diagnostics: tuple[Diagnostic, ...]

    @property
    def ok(self) -> bool:
        return self.text is not None


def format_program(text: str, file: str = "<input>") -> Formatted:
    """The program in flowc's canonical layout; syntax errors leave it unformatted."""
    reporter = Reporter()
    check_input_bounds(text, file, reporter)
    if not reporter.has_errors:
        with deep_recursion():  # as flowc.compile parses: deeply nested input is no crash
            parse(text, file, reporter)
    errors = tuple(d for d in reporter.sorted() if d.severity is Severity.ERROR)
    if errors:
        return Formatted(None, errors)
    result = layout(text)
    if significant(result) != significant(text):  # by construction; a bug otherwise
        raise AssertionError(f"formatting {file} changed a token")
    return Formatted(result, ())


def layout(text: str) -> str:
    """The canonical layout of a program's tokens (see the module docstring)."""
    writer = _Writer()
    for token in tokens(text.replace("\r\n", "\n")):
        if token.kind is TokenKind.SPACE:
            writer.space(token.text)
        else:
            writer.token(token)
    return writer.result()


class _Writer:
    """Writes tokens one by one, deciding the whitespace before each."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        #: The current line, in parts (joined once: a line may be megabytes long).
        self.line: list[str] = []
        self.pending = ""  # the whitespace the author wrote before the next token
        self.in_statement = False
        self.in_pipe = False
        #: The indentation of the line each open bracket is on.
        self.openers: list[int] = []
        self.indent = 0
        self.after_comma = False
        self.after_line_comment = False

    def space(self, text: str) -> None:
        self.pending += text

    def token(self, token: Token) -> None:
        newlines = self.pending.count("\n")
        spaced = bool(self.pending)
        self.pending = ""
        text = token.text.rstrip() if token.kind is TokenKind.LINE_COMMENT else token.text
        comment = token.kind is not TokenKind.TEXT
        first = not self.lines and not self.line
        if first:
            self.line, self.indent = [text], 0
        elif not self.in_statement:
            self._between_statements(text, newlines, spaced, comment)
        else:
            self._inside_statement(text, newlines, spaced, comment)
        if token.kind is TokenKind.TEXT:
            if not self.in_statement:
                self.in_statement, self.in_pipe, self.openers = True, False, []
            if text in _OPEN:
                self.openers.append(self.indent)
            elif text in _CLOSE:
                if self.openers:
                    self.openers.pop()
            elif text == "|>" and not self.openers:
                self.in_pipe = True
            elif text == ";" and not self.openers:
                self.in_statement = False
        self.after_comma = text == ","
        self.after_line_comment = token.kind is TokenKind.LINE_COMMENT

    def _between_statements(self, text: str, newlines: int, spaced: bool, comment: bool) -> None:
        if comment and newlines == 0 and not self.after_line_comment:
            self.line += ["  ", text]  # after the ';'
            return
        self._newline(blank=newlines >= 2)
        self.line = [text]
        self.indent = 0

    def _inside_statement(self, text: str, newlines: int, spaced: bool, comment: bool) -> None:
        pipe = text == "|>" and not self.openers
        if pipe or newlines or self.after_line_comment:
            self._newline(blank=False)
            self.indent = self._indent(text)
            self.line = [" " * self.indent, text]
        elif comment and spaced:
            self.line += ["  ", text]
        elif spaced or self.after_comma:
            self.line += [" ", text]
        else:
            self.line.append(text)

    def _indent(self, text: str) -> int:
        """A new line's indentation: a closing bracket's is its opener's line's, a line
        inside brackets 2 more than that, a pipe step's 2, a step's further lines 5."""
        if self.openers:
            return self.openers[-1] + (0 if text in _CLOSE else 2)
        if text == "|>":
            return _STEP_INDENT
        return _STEP_BODY_INDENT if self.in_pipe else _CONTINUATION_INDENT

    def _newline(self, blank: bool) -> None:
        self.lines.append("".join(self.line).rstrip())
        if blank:
            self.lines.append("")
        self.line = []

    def result(self) -> str:
        lines = [*self.lines, "".join(self.line).rstrip()]
        while lines and not lines[-1]:
            lines.pop()
        return "\n".join(lines) + "\n" if lines else ""
