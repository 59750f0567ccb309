"""Source positions carried by every node, from the AST to the physical plan."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Span:
    """A range in a source file: 1-based lines and columns; the end column is one past the end."""

    file: str
    line: int
    column: int
    end_line: int
    end_column: int

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
