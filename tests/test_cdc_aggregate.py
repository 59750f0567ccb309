"""A CDC source's changes into an AGGREGATE on Spark (issue 28, item 4: "a CDC source feeds
every shape"; docs/language.md, "Updating pipelines on Spark").

A `debezium-json` source's changes (+I, -U, +U, -D) reach a KEY BY ... AGGREGATE, which
runs as the retracting ChangelogOperator: each -U/-D row's contribution is taken back, so
the upsert table holds the aggregate of the rows the changes leave. Four micro-batches,
each its own run on the same checkpoint (a restart), against plain Python: the envelopes
applied as Flink reads them (c/r: +I after; u: -U before, +U after; d: -D before), the rows
left counted per country. Batch mode refuses the shape (E0299) rather than count a
retraction as a row.
"""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc.diagnostics import CompileError
from flowc.errorcodes import Code
from flowc.runtime.run import run_job
from tests.helpers.cdc_envelopes import write_envelopes as write_file
from tests.helpers.files import upsert_table

PROGRAM = """\
SET max_parallelism = 8;
CREATE SOURCE customers (id BIGINT, country STRING, score BIGINT)
  WITH (connector = 'files', path = 'in', format = 'debezium-json');
CREATE SINK per_country WITH (connector = 'files', path = 'out/per_country', format = 'json',
  mode = 'update', key = 'country');
INSERT INTO per_country FROM customers
  |> WHERE id > 0
  |> KEY BY country
  |> AGGREGATE count(*) AS customers, sum(score) AS total, max(score) AS best,
       min(score) AS worst;
"""

Envelope = tuple[str, dict[str, Any] | None, dict[str, Any] | None]


def customer(i: int, country: str, score: int) -> dict[str, Any]:
    return {"id": i, "country": country, "score": score}


BATCHES: list[list[Envelope]] = [
    [
        ("r", None, customer(1, "FR", 5)),
        ("c", None, customer(2, "FR", 9)),
        ("c", None, customer(3, "US", 4)),
        ("c", None, customer(-1, "US", 100)),  # filtered out by the WHERE
    ],
    [
        ("u", customer(2, "FR", 9), customer(2, "FR", 3)),  # FR's max retracted: 9 -> 5
        ("u", customer(1, "FR", 5), customer(1, "DE", 5)),  # moves to another country
        ("c", None, customer(4, "US", 8)),
        ("u", customer(4, "US", 8), customer(4, "US", 1)),  # two changes of one key
    ],
    [
        ("d", customer(3, "US", 4), None),
        ("d", customer(4, "US", 1), None),  # US has no customer left: deleted
        ("u", customer(-1, "US", 100), customer(-1, "US", 101)),  # filtered out
    ],
    [
        ("c", None, customer(5, "US", 7)),  # US back
        ("d", customer(2, "FR", 3), None),  # FR gone
        ("u", customer(1, "DE", 5), customer(1, "DE", 6)),
    ],
]


def expected_tables(batches: list[list[Envelope]]) -> list[dict[str, tuple[Any, ...]]]:
    """After each micro-batch, per country: count, sum, max and min of the rows the changes
    leave (their multiset: +I/+U add a row, -U/-D take one back), WHERE applied first."""
    held: Counter[tuple[int, str, int]] = Counter()
    out = []
    for batch in batches:
        for op, before, after in batch:
            signs = {"c": [("+", after)], "r": [("+", after)], "u": [("-", before), ("+", after)],
                     "d": [("-", before)]}[op]  # fmt: skip
            for sign, row in signs:
                assert row is not None
                if row["id"] > 0:
                    held[(row["id"], row["country"], row["score"])] += 1 if sign == "+" else -1
        table: dict[str, list[int]] = {}
        for (_, country, score), times in held.items():
            table.setdefault(country, []).extend([score] * times)
        out.append({c: (len(s), sum(s), max(s), min(s)) for c, s in table.items() if s})
    return out


def test_a_cdc_source_into_an_aggregate_across_micro_batches_and_restarts(
    spark: Any, tmp_path: Path
) -> None:
    flow = tmp_path / "job.flow"
    flow.write_text(PROGRAM, encoding="utf-8")
    job = flowc.compile(PROGRAM, str(flow), for_spark=True)
    (processor,) = job.spark_plan.changelog_processors.values()
    assert processor.consumer and "CDC" not in processor.other
    assert "source 'customers' (debezium-json)" in processor.to_text()
    wanted = expected_tables(BATCHES)
    assert "US" not in wanted[2] and "FR" not in wanted[3] and wanted[1]["FR"][2] == 3
    for index, batch in enumerate(BATCHES):
        write_file(tmp_path / "in", index, batch)
        job = flowc.compile(PROGRAM, str(flow), for_spark=True)
        report = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
        assert all(q.error is None for q in report.queries), report
        rows = upsert_table(tmp_path / "out" / "per_country")
        got = {r["country"]: (r["customers"], r["total"], r["best"], r["worst"]) for r in rows}
        assert got == wanted[index], index


def test_batch_mode_refuses_it() -> None:
    """A batch run would read a retraction as a row: refused before anything runs."""
    text = "SET execution.mode = batch;\n" + PROGRAM
    with pytest.raises(CompileError) as raised:
        flowc.compile(text, "job.flow", for_spark=True)
    assert any(d.code == Code.E0299 for d in raised.value.diagnostics)


#: The same job as Flink users write it: the GROUP BY's outer SELECT (its columns named
#: as the sink's, by position) lowers to a SELECT after the AGGREGATE, which passes each
#: change on; it was refused (E0299) while the AGGREGATE had to end the INSERT.
FLINK_PROGRAM = """\
SET sql.dialect = 'flink';
SET max_parallelism = 8;
CREATE TABLE customers (id BIGINT, country STRING, score BIGINT)
  WITH ('connector' = 'files', 'path' = 'in', 'format' = 'debezium-json');
CREATE TABLE per_country (country STRING, customers BIGINT, best BIGINT, total BIGINT,
    worst BIGINT, PRIMARY KEY (country) NOT ENFORCED)
  WITH ('connector' = 'files', 'path' = 'out/per_country', 'format' = 'json');
INSERT INTO per_country
SELECT country, COUNT(*), MAX(score), SUM(score) AS total, MIN(score) AS worst
FROM customers WHERE id > 0 GROUP BY country;
"""


def test_the_flink_sql_group_by_over_a_cdc_source_across_micro_batches_and_restarts(
    spark: Any, tmp_path: Path
) -> None:
    flow = tmp_path / "job.flow"
    wanted = expected_tables(BATCHES)
    for index, batch in enumerate(BATCHES):
        write_file(tmp_path / "in", index, batch)
        job = flowc.compile(FLINK_PROGRAM, str(flow), for_spark=True)
        (processor,) = job.spark_plan.changelog_processors.values()
        assert processor.consumer
        report = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
        assert all(q.error is None for q in report.queries), report
        rows = upsert_table(tmp_path / "out" / "per_country")
        got = {r["country"]: (r["customers"], r["total"], r["best"], r["worst"]) for r in rows}
        assert got == wanted[index], index


@pytest.mark.parametrize(
    ("select", "code"),
    [
        # computed after the AGGREGATE: the SELECT would read a -U or -D row as a new one
        ("SELECT UPPER(country), COUNT(*), MAX(score), SUM(score), MIN(score)", Code.E0299),
        # the SQL lowering computes this in the AGGREGATE, which does not retract it
        ("SELECT country, COUNT(*) * 2, MAX(score), SUM(score), MIN(score)", Code.E0741),
    ],
)
def test_a_computing_select_after_the_group_by_stays_refused(select: str, code: Code) -> None:
    """Only projections keeping the keys pass each change on as it is."""
    text = FLINK_PROGRAM.replace(
        "SELECT country, COUNT(*), MAX(score), SUM(score) AS total, MIN(score) AS worst", select
    )
    with pytest.raises(CompileError) as raised:
        flowc.compile(text, "job.flow", for_spark=True)
    assert any(d.code == code for d in raised.value.diagnostics), raised.value
