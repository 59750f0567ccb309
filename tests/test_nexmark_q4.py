"""Nexmark q4 on Spark as an updating pipeline (docs/language.md, "Updating pipelines on
Spark"): auctions joined with their bids (the join as flowc asks for it, E0760), the
highest bid per auction (an AGGREGATE whose updates...) averaged per category (...another
AGGREGATE consumes). Five micro-batches, the job restarted on the same checkpoint after
the first and after the third: the upsert table after each run equals Flink's result in
plain Python (the regular join and WHERE, MAX per auction, AVG per category)."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc.diagnostics import CompileError, Severity
from flowc.runtime.run import run_job
from tests.helpers.files import upsert_table
from tests.helpers.minute_events import write_batch
from tests.helpers.nexmark_q4 import BATCHES, closing_averages, flink_join

# price DOUBLE: Flink's AVG of a DOUBLE is a DOUBLE, as flowc's AVG is (of a BIGINT,
# Flink's would be a truncated BIGINT)
PROGRAM = """
SET parallelism = 2;
SET max_parallelism = 16;
CREATE SOURCE auction (id BIGINT, category BIGINT, date_time TIMESTAMP, expires TIMESTAMP,
  WATERMARK FOR date_time AS date_time - INTERVAL 4 SECONDS)
  WITH (connector = 'files', path = 'in_a', format = 'json', max_files_per_trigger = 1);
CREATE SOURCE bid (auction BIGINT, price DOUBLE, date_time TIMESTAMP,
  WATERMARK FOR date_time AS date_time - INTERVAL 4 SECONDS)
  WITH (connector = 'files', path = 'in_b', format = 'json', max_files_per_trigger = 1);
CREATE SINK per_category WITH (connector = 'files', path = 'out/per_category',
  format = 'json', mode = 'update', key = 'category');
INSERT INTO per_category
  FROM auction
  |> JOIN bid ON auction.id = bid.auction AND bid.date_time >= auction.date_time
  |> WHERE bid.date_time <= auction.expires
  |> KEY BY auction.id, category
  |> AGGREGATE max(price) AS final
  |> KEY BY category
  |> AGGREGATE avg(final) AS avg_final;
"""


def flink_q4(upto: int) -> dict[int, float]:
    """Flink's q4 over the first ``upto`` micro-batches: MAX per auction, AVG per category."""
    final: dict[tuple[int, int], float] = {}
    for auction_id, category, price in flink_join(BATCHES[:upto]):
        final[auction_id, category] = max(final.get((auction_id, category), price), price)
    per_category: dict[int, list[float]] = {}
    for (_, category), value in final.items():
        per_category.setdefault(category, []).append(value)
    return {c: sum(values) / len(values) for c, values in per_category.items()}


def table(folder: Path) -> dict[int, float]:
    return {r["category"]: r["avg_final"] for r in upsert_table(folder)}


#: q4 as Flink users write it in SQL: a GROUP BY over a GROUP BY subquery, the outer
#: SELECT list naming the subquery's columns (it lowers through a view and projections).
SQL_FORMS = {
    "join_on": PROGRAM.split("INSERT INTO")[0]
    + """\
INSERT INTO per_category
SELECT Q.category, AVG(Q.final) AS avg_final
FROM (
  SELECT MAX(B.price) AS final, A.category
  FROM auction A JOIN bid B ON A.id = B.auction AND B.date_time >= A.date_time
  WHERE B.date_time <= A.expires
  GROUP BY A.id, A.category
) Q
GROUP BY Q.category;
""",
    # Nexmark's own text: a comma join, every condition in WHERE (the expiry bound tested
    # after Spark's join: a join filter)
    "nexmark_comma_join": PROGRAM.split("INSERT INTO")[0]
    + """\
INSERT INTO per_category
SELECT Q.category, AVG(Q.final) AS avg_final
FROM (
  SELECT MAX(B.price) AS final, A.category
  FROM auction A, bid B
  WHERE A.id = B.auction AND B.date_time BETWEEN A.date_time AND A.expires
  GROUP BY A.id, A.category
) Q
GROUP BY Q.category;
""",
}
FORMS = {"pipe": PROGRAM, **SQL_FORMS}


#: The forms run on Spark. Nexmark's comma join is the JOIN ... ON form with its time
#: condition written the other way round (below): the same program otherwise.
ON_SPARK = ("join_on", "pipe")


def test_the_comma_join_is_the_join_on_forms_program() -> None:
    """The comma join's generated program is the JOIN ... ON form's, the time condition
    written the other way round and nothing else: so running the JOIN ... ON form on Spark
    answers for both."""
    from flowc.spark.codegen import generate_pyspark

    def program(form: str) -> str:
        return generate_pyspark(flowc.compile(FORMS[form], "job.flow", for_spark=True))

    on, comma = program("join_on"), program("nexmark_comma_join")
    written = "`bid`.`date_time` >= `auction`.`date_time`"
    assert on.count(written) == 1
    assert comma == on.replace(written, "`auction`.`date_time` <= `bid`.`date_time`")


@pytest.mark.parametrize("form", ON_SPARK)
def test_q4_across_micro_batches_and_restarts(spark: Any, tmp_path: Path, form: str) -> None:
    program = FORMS[form]
    flow = tmp_path / "job.flow"
    flow.write_text(program, encoding="utf-8")
    job = flowc.compile(program, str(flow), for_spark=True)
    assert job.spark_plan.changelog_processors
    for run in ([0], [1, 2], [3, 4]):  # restarts after the first and the third
        for i in run:
            write_batch(tmp_path / "in_a", i, BATCHES[i][0])
            write_batch(tmp_path / "in_b", i, BATCHES[i][1])
        report = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
        assert [q.error for q in report.queries] == [None]
        assert table(tmp_path / "out" / "per_category") == flink_q4(run[-1] + 1), run
    # auction 1's later bids (120 in the second micro-batch) count: lost by a broken join
    assert flink_q4(5)[10] != flink_q4(1)[10]


#: Shapes through a JOIN other than q4's (as replacements in PROGRAM): each stays E0702.
OTHER_SHAPES: dict[str, list[tuple[str, str]]] = {
    "an outer join": [("|> JOIN bid", "|> LEFT JOIN bid")],
    "a TOP producer": [
        ("|> KEY BY auction.id, category", "|> SELECT auction.id AS id, category, price"),
        ("|> AGGREGATE max(price) AS final", "|> TOP 1 BY price DESC PER id, category"),
        ("avg(final)", "avg(price)"),
    ],
    "a global consumer": [("|> KEY BY category\n", ""), ("'category'", "'avg_final'")],
}


@pytest.mark.parametrize("shape", sorted(OTHER_SHAPES))
def test_other_join_shapes_stay_refused(tmp_path: Path, shape: str) -> None:
    program = PROGRAM
    for old, new in OTHER_SHAPES[shape]:
        assert old in program
        program = program.replace(old, new, 1)
    with pytest.raises(CompileError) as refused:
        flowc.compile(program, str(tmp_path / "job.flow"), for_spark=True)
    codes = {d.code for d in refused.value.diagnostics if d.severity is Severity.ERROR}
    assert codes == {"E0702"}, (shape, refused.value)


EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "nexmark_q4.flow"


def shipped_q4() -> dict[int, float]:
    """Flink's q4 over the example's shipped auctions and bids, in plain Python."""
    data = EXAMPLE.parent / "data"
    auctions, bids = (
        [
            json.loads(line)
            for p in sorted((data / folder).glob("*.json"))
            for line in p.read_text(encoding="utf-8").splitlines()
            if line.strip()
        ]
        for folder in ("auctions", "bids")
    )
    return closing_averages(auctions, bids)


@pytest.mark.parametrize("batch", [False, True], ids=["streaming", "batch"])
def test_the_q4_example_on_its_shipped_data(spark: Any, tmp_path: Path, batch: bool) -> None:
    """The example streaming (a micro-batch per file) and in batch mode, on its shipped
    data: the table equals plain Python's."""
    text = EXAMPLE.read_text(encoding="utf-8")
    if batch:
        text = "SET execution.mode = batch;\n" + text
    copy = tmp_path / EXAMPLE.name
    copy.write_text(text, encoding="utf-8")
    shutil.copytree(EXAMPLE.parent / "data" / "auctions", tmp_path / "data" / "auctions")
    shutil.copytree(EXAMPLE.parent / "data" / "bids", tmp_path / "data" / "bids")
    job = flowc.compile(text, str(copy), for_spark=True)
    assert bool(job.spark_plan.changelog_processors) is not batch
    report = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
    assert [q.error for q in report.queries] == [None]
    got = table(tmp_path / "out" / "avg_price_per_category")
    wanted = shipped_q4()
    assert len(wanted) > 1 and got == pytest.approx(wanted)
