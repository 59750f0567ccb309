"""Diagnostics about one option or one column type point at it, not at the whole CREATE:
the compiler's IR keeps each source's and sink's options and declared types as written
(SourceDef.written_options, written_types), and the Spark checks place E0225 (a datetime
pattern option Spark refuses), E0227 (CHAR/VARCHAR in a read schema) and E0725 (a type
the Spark backend's datagen cannot generate) there.
"""

from __future__ import annotations

import pytest

import flowc
from flowc import Diagnostic, Severity
from flowc.syntax.overrides import COMMAND_LINE


def errors(text: str, overrides: dict[str, str] | None = None) -> list[Diagnostic]:
    with pytest.raises(flowc.CompileError) as refused:
        flowc.compile(text, "job.flow", for_spark=True, overrides=overrides)
    return [d for d in refused.value.diagnostics if d.severity is Severity.ERROR]


def place(diagnostic: Diagnostic) -> tuple[str, int, int, int, int]:
    span = diagnostic.span
    return (diagnostic.code, span.line, span.column, span.end_line, span.end_column)


SINK = "CREATE SINK o WITH (connector = 'console');\nINSERT INTO o FROM s;\n"


def test_a_pattern_option_points_at_the_letters_at_fault_in_its_value() -> None:
    text = (
        "CREATE SOURCE s (k BIGINT, ts TIMESTAMP)\n"
        "  WITH (connector = 'files', path = 'in', format = 'csv',\n"
        "        timestamp_format = 'yyyy-MM-dd YYYY');\n" + SINK
    )
    # 'YYYY' is characters 11-14 of the pattern, whose quote is at column 28 of line 3
    assert [place(d) for d in errors(text)] == [("E0225", 3, 40, 3, 44)]


def test_a_sink_pattern_option_points_at_its_value() -> None:
    text = (
        "CREATE SOURCE s (k BIGINT, d DATE) WITH (connector = 'datagen');\n"
        "CREATE SINK o WITH (connector = 'files', path = 'out', format = 'json',\n"
        "  date_format = 'yyyy#');\n"
        "INSERT INTO o FROM s;\n"
    )
    assert [place(d) for d in errors(text)] == [("E0225", 3, 22, 3, 23)]


def test_a_pattern_option_given_with_set_points_at_the_command_line() -> None:
    text = (
        "CREATE SOURCE s (k BIGINT, ts TIMESTAMP)\n"
        "  WITH (connector = 'files', path = 'in', format = 'csv');\n" + SINK
    )
    found = errors(text, {"s.timestamp_format": "YYYY"})
    assert [d.code for d in found] == ["E0225"]
    assert found[0].span.file == COMMAND_LINE


def test_char_and_varchar_point_at_each_type() -> None:
    text = (
        "CREATE SOURCE s (k BIGINT,\n"
        "                 name VARCHAR(10),\n"
        "                 code  CHAR(2))\n"
        "  WITH (connector = 'files', path = 'in', format = 'json');\n" + SINK
    )
    assert sorted(place(d) for d in errors(text)) == [
        ("E0227", 2, 23, 2, 34),
        ("E0227", 3, 24, 3, 31),
    ]


def test_a_type_datagen_cannot_generate_points_at_the_type() -> None:
    text = "CREATE SOURCE s (k BIGINT,\n  t TIMESTAMP_NTZ) WITH (connector = 'datagen');\n" + SINK
    assert [place(d) for d in errors(text)] == [("E0725", 2, 5, 2, 18)]
