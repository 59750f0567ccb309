"""Numbers written as strings in WITH (...) and SET (Flink writes every option so:
``'number_of_rows' = '10'``) mean the numbers: the same plans and the same generated
program as the numbers written bare."""

from __future__ import annotations

import pytest

import flowc
from flowc.spark.codegen import generate_pyspark
from tests.helpers.plans import job_graph_json

BARE = """SET parallelism = 2;
CREATE SOURCE s (k BIGINT) WITH (connector = 'datagen', number_of_rows = 10,
  rows_per_second = 2.5);
CREATE SOURCE f (k BIGINT) WITH (connector = 'files', path = 'in', format = 'json',
  max_files_per_trigger = 1);
CREATE SINK o WITH (connector = 'console', rows = 5);
INSERT INTO o FROM s |> UNION ALL f;
"""
QUOTED = """SET parallelism = '2';
CREATE SOURCE s (k BIGINT) WITH ('connector' = 'datagen', 'number_of_rows' = '10',
  'rows_per_second' = '2.5');
CREATE SOURCE f (k BIGINT) WITH ('connector' = 'files', 'path' = 'in', 'format' = 'json',
  'max_files_per_trigger' = '1');
CREATE SINK o WITH ('connector' = 'console', 'rows' = '5');
INSERT INTO o FROM s |> UNION ALL f;
"""


def test_quoted_numbers_plan_and_generate_as_numbers() -> None:
    bare = flowc.compile(BARE, "job.flow", for_spark=True)
    quoted = flowc.compile(QUOTED, "job.flow", for_spark=True)
    assert job_graph_json(QUOTED) == job_graph_json(BARE)
    assert generate_pyspark(quoted) == generate_pyspark(bare)


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("SET parallelism = '2x';", "E0302"),
        ("SET parallelism = '2.5';", "E0302"),
        ("CREATE SOURCE t (k BIGINT) WITH (connector = 'datagen', seed = '1e3');", "E0405"),
        (
            "CREATE SOURCE t (k BIGINT) WITH (connector = 'datagen', rows_per_second = 'x');",
            "E0405",
        ),
    ],
)
def test_a_string_that_is_no_number_stays_refused(text: str, code: str) -> None:
    with pytest.raises(flowc.CompileError) as raised:
        flowc.compile(text + "\n" + BARE, "job.flow")
    assert code in {d.code for d in raised.value.diagnostics}
