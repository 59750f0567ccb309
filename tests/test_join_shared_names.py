"""A JOIN over changes whose two sides both have a column of one name: refused (the
processor's rows name each column once), and the help names the column and the RENAME
that makes it run; the RENAME it suggests does run (compiles clean for Spark)."""

from __future__ import annotations

import pytest

import flowc
from flowc.diagnostics import CompileError, Diagnostic, Severity
from tests.helpers.compile_errors import edited

APPEND_ONLY = "WITH (connector = 'files', path = 'p', format = 'json')"
CDC = (
    ", PRIMARY KEY (id) NOT ENFORCED) "
    "WITH (connector = 'files', path = 'p', format = 'debezium-json')"
)

PROGRAM = f"""CREATE SOURCE products (id BIGINT, category STRING, price BIGINT) {APPEND_ONLY};
CREATE SOURCE cats (category STRING, label STRING)
  WITH (connector = 'files', path = 'c', format = 'json');
CREATE SINK out WITH (connector = 'files', path = 'o', format = 'json', mode = 'update',
  key = 'category');
CREATE VIEW totals AS FROM products |> KEY BY category |> AGGREGATE sum(price) AS total;
INSERT INTO out FROM totals
  |> JOIN cats ON totals.category = cats.category
  |> SELECT totals.category, label, total;
"""

#: The source's changes read as a CDC source's instead (the AGGREGATE takes them).
AS_CDC = [(f"price BIGINT) {APPEND_ONLY}", f"price BIGINT{CDC}")]

#: The help's RENAME, written as it says.
RENAMED = [
    (
        "FROM totals\n  |> JOIN cats ON totals.category = cats.category\n"
        "  |> SELECT totals.category,",
        "FROM totals\n  |> RENAME category AS left_category\n"
        "  |> JOIN cats ON left_category = cats.category\n  |> SELECT left_category,",
    ),
    ("key = 'category'", "key = 'left_category'"),
]


def diagnostics(text: str) -> list[Diagnostic]:
    try:
        job = flowc.compile(text, "job.flow", for_spark=True)
    except CompileError as error:
        return list(error.diagnostics)
    return list(job.diagnostics)


@pytest.mark.parametrize("edits", [[], AS_CDC], ids=["aggregate", "aggregate_of_changes"])
def test_the_help_names_the_shared_column_and_the_rename(edits: list[tuple[str, str]]) -> None:
    errors = [d for d in diagnostics(edited(PROGRAM, edits)) if d.severity is Severity.ERROR]
    assert errors, "a JOIN whose sides share a column name compiled"
    for error in errors:
        assert error.help is not None
        assert "a column named 'category'" in error.help, error.help
        assert "RENAME category AS left_category" in error.help, error.help


@pytest.mark.parametrize("edits", [[], AS_CDC], ids=["aggregate", "aggregate_of_changes"])
def test_the_suggested_rename_runs(edits: list[tuple[str, str]]) -> None:
    found = diagnostics(edited(PROGRAM, [*edits, *RENAMED]))
    assert [d for d in found if d.severity is Severity.ERROR] == []
    job = flowc.compile(edited(PROGRAM, [*edits, *RENAMED]), "job.flow", for_spark=True)
    assert job.spark_plan.processors, "the JOIN over changes should run as a processor"
