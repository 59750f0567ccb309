"""A .flow file as text: offsets to lines and columns, and the file cut into statements.

Statements are cut at ``;`` and before a ``CREATE``, ``INSERT`` or ``SET`` that starts a
line, by a scan that knows strings, quoted names and comments but no grammar, so a
syntax error in one statement cannot swallow the next.
"""

from __future__ import annotations

import bisect
import re
import sys
from collections.abc import Iterator

from flowc.fast_dataclass import dataclass
from flowc.spans import Span

# ---------------------------------------------------------------- positions

#: Past any offset: where the last line's successor would start.
_PAST = sys.maxsize


class LineIndex:
    """Offsets ↔ (line, column) for one file; columns are 1-based, in characters."""

    def __init__(self, file: str, text: str) -> None:
        self.file = file
        self.text = text
        self._starts = [0] + [m.end() for m in re.finditer("\n", text)]
        #: The line of the last span (its first offset, the next line's, its number):
        #: the parser asks for spans statement by statement, mostly on one line, so the
        #: next one is checked against it before a search. One tuple, replaced whole, so
        #: a thread reading it sees one line's three values.
        self._last: tuple[int, int, int] = (
            0,
            self._starts[1] if len(self._starts) > 1 else _PAST,
            1,
        )

    def position(self, offset: int) -> tuple[int, int]:
        line = bisect.bisect_right(self._starts, offset)
        return line, offset - self._starts[line - 1] + 1

    def span(self, start: int, end: int) -> Span:
        first, after, line = self._last
        if first <= start < after and end < after:  # on the last span's line
            return Span(self.file, line, start - first + 1, line, max(end, start) - first + 1)
        starts = self._starts
        line = bisect.bisect_right(starts, start)
        first = starts[line - 1]
        after = starts[line] if line < len(starts) else _PAST
        self._last = (first, after, line)
        column = start - first + 1
        end = max(end, start)
        if end < after:  # on the same line, the usual case
            return Span(self.file, line, column, line, end - first + 1)
        end_line, end_column = self.position(end)
        return Span(self.file, line, column, end_line, end_column)


# ---------------------------------------------------------------- statement splitting


@dataclass(frozen=True, slots=True)
class Chunk:
    """One statement's offsets in the file; whether a ``;`` ends it, and where its last
    token ends (a missing ``;`` is reported there)."""

    start: int
    end: int
    terminated: bool
    last_token_end: int


#: What both scanners below match the same way: line breaks, comments, strings, quoted
#: names and ``;``. Strings and quoted names are written as "unrolled loops":
#: ``'(?:[^'\\]|\\.|'')*'`` matches the same, but Python's regex engine keeps a
#: backtracking record per character of it, over 100 MB for a literal of 1 MB.
_SHARED = r"""
    | (?P<nl>\n)
    | (?P<comment>--[^\n]*)
    | (?P<block>/\*.*?\*/)
    | (?P<str>'[^'\\]*(?:(?:\\.|'')[^'\\]*)*'|"[^"\\]*(?:(?:\\.|"")[^"\\]*)*")
    | (?P<qname>`[^`]*(?:``[^`]*)*`)
    | (?P<semi>;)
"""

#: The file token by token (spaces, words, other characters one by one).
_SCAN = re.compile(
    r"(?P<ws>[ \t\r\f\v]+)" + _SHARED + r"| (?P<word>[A-Za-z_][A-Za-z0-9_]*) | (?P<other>.)",
    re.S | re.X,
)

_STATEMENT_STARTS = frozenset({"create", "insert", "set"})

#: Flink's ``EXECUTE STATEMENT SET BEGIN``: a statement of its own, ended by ``BEGIN``
#: (the INSERT after it, on its line or the next, starts the next statement).
_SET_HEADER = re.compile(r"execute\s+statement\s+set\s+begin\b", re.I)


#: What _SCAN finds, with runs of words, spaces and other characters (but no line break,
#: ``;``, quote or comment start) as one match: splitting looks at a run's first token only.
_RUNS = re.compile(r"""(?P<run>[^\n;'"`/\-]+)""" + _SHARED + r"| (?P<other>.)", re.S | re.X)

_SPACES = " \t\r\f\v"
WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def long_literals(text: str, limit: int) -> Iterator[tuple[int, int, str]]:
    """Each string literal or quoted name longer than ``limit`` characters (quotes not
    counted), as the statement splitter reads the text (so not inside a comment): its
    offsets, quotes included, and its quote character."""
    for m in _RUNS.finditer(text):
        if m.lastgroup in ("str", "qname") and m.end() - m.start() - 2 > limit:
            yield m.start(), m.end(), text[m.start()]


def split_statements(text: str) -> list[Chunk]:
    """Cut the file into statements: at ``;``, and before a line-leading CREATE/INSERT/SET
    (not a SET after ``|>``: that is the pipe step).

    The second rule lets a missing ``;`` or an unclosed bracket cost one statement only.
    """
    chunks: list[Chunk] = []
    start: int | None = None
    last_end = 0
    line_has_token = False
    header_end = 0
    for m in _RUNS.finditer(text):
        kind = m.lastgroup
        if m.end() <= header_end:
            continue
        if kind == "run":
            run = m.group()
            if m.start() < header_end:
                run = run[header_end - m.start() :]
            tokens = run.lstrip(_SPACES)
            if not tokens:
                continue
            first = m.end() - len(tokens)
            header = _SET_HEADER.match(text, first) if start is None else None
            if header is not None:
                chunks.append(Chunk(first, header.end(), True, header.end()))
                line_has_token = True
                last_end = header_end = header.end()
                rest = text[header_end : m.end()].lstrip(_SPACES)
                if not rest:
                    continue
                tokens, first = rest, m.end() - len(rest)
            if start is not None and not line_has_token:
                word = WORD.match(text, first)
                if (
                    word is not None
                    and word.group().lower() in _STATEMENT_STARTS
                    and text[last_end - 2 : last_end] != "|>"  # a pipe step: |> SET
                ):
                    chunks.append(Chunk(start, first, False, last_end))
                    start = None
            if start is None:
                start = first
            line_has_token = True
            last_end = m.end() - len(m.group()) + len(m.group().rstrip(_SPACES))
            continue
        if kind in ("comment", "block"):
            continue
        if kind == "nl":
            line_has_token = False
            continue
        if kind == "semi":
            chunks.append(Chunk(m.start() if start is None else start, m.end(), True, m.end()))
            start = None
            line_has_token = True
            last_end = m.end()
            continue
        if start is None:
            start = m.start()
        line_has_token = True
        last_end = m.end()
    if start is not None:
        chunks.append(Chunk(start, len(text), False, last_end))
    return chunks


def open_bracket(text: str, start: int, stop: int) -> tuple[str, int] | None:
    """The innermost bracket (``(``, ``[`` or CASE) still open at ``stop``, and its offset."""
    stack: list[tuple[str, int]] = []
    for m in _SCAN.finditer(text, start, stop):
        token = m.group()
        if m.lastgroup == "word":
            if text[m.start() - 1 : m.start()] == ".":
                continue  # a field: w.end
            if token.lower() == "case":
                stack.append(("CASE", m.start()))
            elif token.lower() == "end" and stack and stack[-1][0] == "CASE":
                stack.pop()
        elif token in "([":
            stack.append((token, m.start()))
        elif token in ")]" and stack and stack[-1][0] != "CASE":
            stack.pop()
    return stack[-1] if stack else None
