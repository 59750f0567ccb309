"""The one offset-to-position rule (flowc.spans.line_column) and the spans built on it."""

from __future__ import annotations

import random

import pytest

from flowc.spans import Span, line_column, text_span
from flowc.syntax.source_text import LineIndex


@pytest.mark.parametrize(
    ("text", "offset", "expected"),
    [
        ("", 0, (1, 1)),  # an empty text: its end is line 1, column 1
        ("SELECT a", 0, (1, 1)),  # the first character
        ("SELECT a", 7, (1, 8)),  # on the first line
        ("SELECT a", 8, (1, 9)),  # the end of the text, past its last character
        ("a\nbc", 1, (1, 2)),  # the newline itself is on the line it ends
        ("a\nbc", 2, (2, 1)),  # just after a newline
        ("a\nbc", 4, (2, 3)),  # the end of the text on a later line
        ("a\n", 2, (2, 1)),  # the end of a text that ends with a newline
        ("a\r\nb", 1, (1, 2)),  # CRLF: the \r is its line's last column
        ("a\r\nb", 3, (2, 1)),  # and the next line starts after the \n
        ("é€😀x", 3, (1, 4)),  # columns count characters, not bytes or UTF-16 units
        ("π\n😀y", 3, (2, 2)),
    ],
)
def test_line_column(text: str, offset: int, expected: tuple[int, int]) -> None:
    assert line_column(text, offset) == expected


def test_line_column_agrees_with_the_line_index() -> None:
    """LineIndex answers many look-ups in one text; it must give line_column's answer."""
    text = "SET a = 1;\r\n\nCREATE é\n  😀 x\n"
    index = LineIndex("f.flow", text)
    for offset in range(len(text) + 1):
        assert index.position(offset) == line_column(text, offset), offset


def test_line_index_spans_in_any_order_are_line_columns() -> None:
    """Spans of a LineIndex (which remembers the last span's line) in any order of
    look-ups: each end is line_column's, an end before its start is the start."""
    text = "SET a = 1;\r\n\nCREATE é\n  😀 x\nlast"
    rng = random.Random(5)
    index = LineIndex("f.flow", text)
    pairs = [(a, b) for a in range(len(text) + 1) for b in range(len(text) + 1)]
    for start, end in pairs + rng.sample(pairs, len(pairs)):
        line, column = line_column(text, start)
        end_line, end_column = line_column(text, max(start, end))
        assert index.span(start, end) == Span("f.flow", line, column, end_line, end_column)


def test_text_span_is_relative_to_its_origin() -> None:
    origin = Span("f.flow", 3, 10, 4, 5)
    text = "a + b\n  + cé"
    # on the origin's line, columns shift by the origin's column
    assert text_span(text, origin, 4, 5) == Span("f.flow", 3, 14, 3, 15)
    # on a later line, columns are the text's own
    assert text_span(text, origin, 8, 12) == Span("f.flow", 4, 3, 4, 7)
    # from one line to the next
    assert text_span(text, origin, 0, 7) == Span("f.flow", 3, 10, 4, 2)
    # offsets past the text are clamped to its end
    assert text_span(text, origin, 11, 99) == Span("f.flow", 4, 6, 4, 7)
