"""Source positions carried by every node, from the AST to the physical plan."""

from __future__ import annotations

from flowc.fast_dataclass import dataclass


@dataclass(frozen=True, slots=True, init=False)
class Span:
    """A range in a source file: 1-based lines and columns; the end column is one past the end."""

    file: str
    line: int
    column: int
    end_line: int
    end_column: int

    def __init__(self, file: str, line: int, column: int, end_line: int, end_column: int) -> None:
        """The dataclass's ``__init__``, twice as fast: each field set through its slot
        (a frozen dataclass calls ``object.__setattr__`` by name); a compile of 1000
        operators makes about 7000 spans."""
        _set_file(self, file)
        _set_line(self, line)
        _set_column(self, column)
        _set_end_line(self, end_line)
        _set_end_column(self, end_column)

    def to_json(self) -> dict[str, object]:
        return {
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
        }

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"

    def cover(self, other: Span) -> Span:
        """The smallest span holding both (same file)."""
        start = min((self.line, self.column), (other.line, other.column))
        end = max((self.end_line, self.end_column), (other.end_line, other.end_column))
        return Span(self.file, start[0], start[1], end[0], end[1])


#: The slots' setters, which a frozen class's ``__setattr__`` does not guard.
_set_file = Span.__dict__["file"].__set__
_set_line = Span.__dict__["line"].__set__
_set_column = Span.__dict__["column"].__set__
_set_end_line = Span.__dict__["end_line"].__set__
_set_end_column = Span.__dict__["end_column"].__set__


def line_column(text: str, offset: int) -> tuple[int, int]:
    """The 1-based line and column, in characters, of ``offset`` in ``text``: the one
    offset-to-position rule of every diagnostic. A line ends after its ``\\n`` (a CRLF's
    ``\\r`` is its line's last column); ``len(text)`` is the position past the end. Scans
    ``text[:offset]`` once: for many look-ups in one text, source_text.LineIndex indexes
    the lines instead (and is tested to agree)."""
    return text.count("\n", 0, offset) + 1, offset - text.rfind("\n", 0, offset)


def undecodable_at(data: bytes, error: UnicodeDecodeError) -> tuple[int, int]:
    """Where the first byte that is not UTF-8 stands, as :func:`line_column` counts: the
    bytes before it decode, so its column counts characters as every other column does."""
    before = data[: error.start].decode("utf-8").removeprefix("\ufeff")
    return line_column(before, len(before))


def text_span(text: str, origin: Span, start: int, end: int) -> Span:
    """The file span of characters ``[start, end)`` of ``text``, a text whose first
    character stands at ``origin`` (an expression's text inside its file); offsets out of
    range are clamped to the text."""
    start = max(0, min(start, len(text)))
    end = max(start, min(end, len(text)))

    def position(offset: int) -> tuple[int, int]:
        line, column = line_column(text, offset)
        if line == 1:
            return origin.line, origin.column + column - 1
        return origin.line + line - 1, column

    line, column = position(start)
    end_line, end_column = position(end)
    return Span(origin.file, line, column, end_line, end_column)
