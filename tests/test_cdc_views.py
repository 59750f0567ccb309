"""A CDC source's changes into an AGGREGATE or a TOP written in a VIEW (issue 28;
docs/language.md, "Change-data capture input: debezium-json").

Flink inlines a view into the query reading it, so a view's steps run as if the INSERT
had them: a KEY BY ... AGGREGATE in a view, read by one INSERT into an upsert sink keyed
by its keys (a WHERE and a projection after the view), runs as the retracting consumer;
a TOP in a view over a source with a PRIMARY KEY runs as the TOP processor. The
SQL form writes the view as it is (``SELECT * FROM v``), the pipe form filters and
projects it. The pipe form
and Flink's SQL form (``CREATE VIEW v AS SELECT ... GROUP BY``; a ``ROW_NUMBER()`` view),
each over four micro-batches in three runs on one checkpoint (two restarts), the upsert
tables against the envelopes applied in plain Python (tests/helpers/cdc_envelopes.py). A
view two INSERTs read stays E0299 (tests/data/check/cdc_source.test).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc.runtime.run import run_job
from tests.helpers.cdc_envelopes import (
    Envelope,
    current_rows,
    customer,
    per_country,
    top_n,
    write_envelopes,
)
from tests.helpers.files import upsert_table

SOURCES = """\
SET max_parallelism = 8;
CREATE SOURCE customers (id BIGINT, country STRING, score BIGINT)
  WITH (connector = 'files', path = 'in', format = 'debezium-json',
        max_files_per_trigger = 1);
CREATE SOURCE keyed (id BIGINT, country STRING, score BIGINT, PRIMARY KEY (id) NOT ENFORCED)
  WITH (connector = 'files', path = 'in', format = 'debezium-json',
        max_files_per_trigger = 1);
"""

PIPE = (
    SOURCES
    + """\
CREATE VIEW per_country_v AS FROM customers |> WHERE id > 0 |> KEY BY country
  |> AGGREGATE count(*) AS customers, sum(score) AS total, max(score) AS best;
CREATE VIEW best_v AS FROM keyed |> WHERE id > 0 |> TOP 2 BY score DESC PER country AS rn;
CREATE SINK per_country WITH (connector = 'files', path = 'out/per_country', format = 'json',
  mode = 'update', key = 'country');
CREATE SINK best WITH (connector = 'files', path = 'out/best', format = 'json',
  mode = 'update', key = 'country, rn');
INSERT INTO per_country FROM per_country_v |> WHERE customers > 1
  |> SELECT country, customers, total, best;
INSERT INTO best FROM best_v |> SELECT country, rn, id, score;
"""
)

FLINK_SQL = """\
SET sql.dialect = 'flink';
SET max_parallelism = 8;
CREATE TABLE customers (id BIGINT, country STRING, score BIGINT)
  WITH ('connector' = 'files', 'path' = 'in', 'format' = 'debezium-json',
        'max_files_per_trigger' = '1');
CREATE TABLE keyed (id BIGINT, country STRING, score BIGINT, PRIMARY KEY (id) NOT ENFORCED)
  WITH ('connector' = 'files', 'path' = 'in', 'format' = 'debezium-json',
        'max_files_per_trigger' = '1');
CREATE VIEW per_country_v AS
  SELECT country, COUNT(*) AS customers, SUM(score) AS total, MAX(score) AS best
  FROM customers WHERE id > 0 GROUP BY country;
CREATE VIEW best_v AS SELECT * FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY country ORDER BY score DESC) AS rn
  FROM keyed WHERE id > 0) WHERE rn <= 2;
CREATE TABLE per_country (country STRING, customers BIGINT, total BIGINT, best BIGINT,
    PRIMARY KEY (country) NOT ENFORCED)
  WITH ('connector' = 'files', 'path' = 'out/per_country', 'format' = 'json');
CREATE TABLE best (country STRING, rn BIGINT, id BIGINT, score BIGINT,
    PRIMARY KEY (country, rn) NOT ENFORCED)
  WITH ('connector' = 'files', 'path' = 'out/best', 'format' = 'json');
INSERT INTO per_country SELECT * FROM per_country_v;
INSERT INTO best SELECT country, rn, id, score FROM best_v;
"""

#: One file (micro-batch) each.
BATCHES: list[list[Envelope]] = [
    [
        ("r", None, customer(1, "FR", 5)),
        ("c", None, customer(2, "FR", 9)),
        ("c", None, customer(8, "FR", 1)),  # below FR's top 2
        ("c", None, customer(3, "US", 4)),  # US: one customer, filtered after the view
        ("c", None, customer(-1, "US", 100)),  # filtered out in the views
    ],
    [
        ("u", customer(2, "FR", 9), customer(2, "FR", 3)),  # FR's max retracted: 9 -> 5
        ("u", customer(1, "FR", 5), customer(1, "DE", 5)),  # moves: 8 enters FR's top
        ("c", None, customer(4, "US", 8)),  # US: two customers, passes the filter
    ],
    [
        ("u", customer(4, "US", 8), customer(4, "US", 1)),
        ("d", customer(3, "US", 4), None),
        ("d", customer(4, "US", 1), None),  # US emptied: its rows deleted
        ("c", None, customer(5, "DE", 7)),  # DE: two customers, enters the filter
        ("u", customer(-1, "US", 100), customer(-1, "US", 101)),  # filtered out
    ],
    [
        ("c", None, customer(6, "US", 7)),  # US back
        ("c", None, customer(7, "US", 2)),
        ("d", customer(2, "FR", 3), None),  # FR down to one: leaves the filter
        ("u", customer(1, "DE", 5), customer(1, "DE", 6)),
        ("u", customer(5, "DE", 7), customer(5, "DE", 4)),  # DE's max retracted: 7 -> 6
    ],
]

#: The micro-batches of each run (each run a restart on the same checkpoint).
RUNS = [[0], [1, 2], [3]]


def wanted_aggregates(done: int, least: int = 1) -> dict[str, tuple[int, int, int]]:
    """The aggregate table after the first ``done`` micro-batches: per country of the rows
    left, count, sum and max, where at least ``least`` customers (the pipe form's WHERE
    after the view)."""
    table = per_country(current_rows(BATCHES[:done]))
    return {country: row for country, row in table.items() if row[0] >= least}


def test_the_expectations_cover_what_the_views_must_get_right() -> None:
    """Keys enter and leave the filter after the view, a max is retracted, a country is
    emptied and comes back, a row enters a top as another leaves it: each after a run."""
    after = {run[-1] + 1: wanted_aggregates(run[-1] + 1, least=2) for run in RUNS}
    assert after[1] == {"FR": (3, 15, 9)}
    assert "US" not in after[3] and after[3]["DE"] == (2, 12, 7) and after[3]["FR"][2] == 3
    assert "FR" not in after[4] and after[4]["DE"] == (2, 10, 6) and "US" in after[4]
    assert top_n(current_rows(BATCHES[:1]), 2)[("FR", 2)]["id"] == 1
    assert top_n(current_rows(BATCHES[:3]), 2)[("FR", 2)]["id"] == 8


@pytest.mark.parametrize(
    ("program", "least"), [(PIPE, 2), (FLINK_SQL, 1)], ids=["pipe", "flink_sql"]
)
def test_an_aggregate_and_a_top_in_views_across_micro_batches_and_restarts(
    spark: Any, tmp_path: Path, program: str, least: int
) -> None:
    flow = tmp_path / "job.flow"
    flow.write_text(program, encoding="utf-8")
    job = flowc.compile(program, str(flow), for_spark=True)
    processors = sorted(job.spark_plan.changelog_processors.values(), key=lambda p: p.kind)
    assert [(p.kind, p.consumer) for p in processors] == [("AGGREGATE", True), ("TOP", True)]
    for run in RUNS:
        for index in run:
            write_envelopes(tmp_path / "in", index, BATCHES[index])
        job = flowc.compile(program, str(flow), for_spark=True)
        report = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
        assert all(q.error is None for q in report.queries), report
        done = run[-1] + 1
        rows = upsert_table(tmp_path / "out" / "per_country")
        got = {r["country"]: (r["customers"], r["total"], r["best"]) for r in rows}
        assert got == wanted_aggregates(done, least), done
        best = {(r["country"], r["rn"]): r for r in upsert_table(tmp_path / "out" / "best")}
        wanted = top_n(current_rows(BATCHES[:done]), 2)
        assert best == {key: {**row, "rn": key[1]} for key, row in wanted.items()}, done
