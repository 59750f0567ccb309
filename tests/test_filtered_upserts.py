"""A filter after an AGGREGATE into an upsert sink (docs/language.md, "Upsert sinks"): the
WHERE (or HAVING) runs as a mark, and the sink deletes the key of a row it fails, so the
table equals Flink's (whose filter passes the retraction of the old row, which its upsert
sink takes as a delete). Real Spark, one micro-batch per run, each run a restart on the
same checkpoint, against plain Python: a key that leaves the filter, one that enters it,
one that leaves and re-enters; the pipe form, SQL's HAVING, a windowed AGGREGATE."""

from __future__ import annotations

import io
from collections import defaultdict
from pathlib import Path
from typing import Any

import flowc
from flowc.runtime.run import run_job
from tests.helpers.files import upsert_table
from tests.helpers.flink import ask_flink, requires_flink
from tests.helpers.minute_events import Row, at, minutes, write_batch

PROGRAM = """\
SET max_parallelism = 16;
CREATE SOURCE bids (auction BIGINT, price BIGINT, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL 1 HOUR)
  WITH (connector = 'files', path = 'in', format = 'json');
CREATE SINK low WITH (connector = 'files', path = 'out/low', format = 'json',
  mode = 'update', key = 'auction');
CREATE SINK having_low WITH (connector = 'files', path = 'out/having_low', format = 'json',
  mode = 'update', key = 'auction');
CREATE SINK quiet WITH (connector = 'files', path = 'out/quiet', format = 'json',
  mode = 'update', key = 'auction, window_start');
INSERT INTO low FROM bids |> KEY BY auction |> AGGREGATE sum(price) AS total
  |> WHERE total < 10 |> SELECT auction, total |> WHERE auction <> 9;
INSERT INTO having_low SELECT auction, sum(price) AS total FROM bids GROUP BY auction
  HAVING sum(price) < 10;
INSERT INTO quiet FROM bids |> KEY BY auction |> WINDOW TUMBLE(ts, INTERVAL 1 MINUTE)
  |> AGGREGATE count(*) AS c |> WHERE c < 3 |> SELECT auction, window_start, c;
"""

#: auction 1 leaves the filter, 2 enters it, 3 leaves and re-enters, 9 is always filtered
#: out by the second WHERE; in the windows, auction 1's first minute reaches 3 bids.
BATCHES: list[list[Row]] = [
    [
        {"auction": 1, "price": 5, "ts": at(0.1)},
        {"auction": 2, "price": 12, "ts": at(0.2)},
        {"auction": 3, "price": 4, "ts": at(0.3)},
        {"auction": 9, "price": 1, "ts": at(0.4)},
    ],
    [{"auction": 1, "price": 10, "ts": at(0.5)}, {"auction": 3, "price": 10, "ts": at(1.1)}],
    [{"auction": 2, "price": -5, "ts": at(1.2)}, {"auction": 3, "price": -8, "ts": at(1.3)}],
    [{"auction": 1, "price": 1, "ts": at(0.6)}, {"auction": 9, "price": 1, "ts": at(1.4)}],
]


def expected(batches: list[list[Row]]) -> list[dict[str, dict[Any, Any]]]:
    """Each sink's table after each micro-batch, per key: the aggregate then the filter
    (Flink's table once each window has fired: Spark writes a window as it changes)."""
    totals: dict[int, int] = defaultdict(int)
    counts: dict[tuple[int, float], int] = defaultdict(int)
    tables = []
    for batch in batches:
        for row in batch:
            totals[row["auction"]] += row["price"]
            counts[(row["auction"], minutes(row["ts"]) // 1)] += 1
        low = {k: t for k, t in totals.items() if t < 10 and k != 9}
        having = {k: t for k, t in totals.items() if t < 10}
        quiet = {k: c for k, c in counts.items() if c < 3}
        tables.append({"low": low, "having_low": having, "quiet": quiet})
    return tables


def read(folder: Path) -> dict[str, dict[Any, Any]]:
    return {
        "low": {r["auction"]: r["total"] for r in upsert_table(folder / "low")},
        "having_low": {r["auction"]: r["total"] for r in upsert_table(folder / "having_low")},
        "quiet": {
            (r["auction"], minutes(r["window_start"])): r["c"]
            for r in upsert_table(folder / "quiet")
        },
    }


def test_a_filter_after_an_aggregate_deletes_the_keys_it_fails(spark: Any, tmp_path: Path) -> None:
    wanted = expected(BATCHES)
    # The cases the test is about, in the expected tables themselves.
    assert 1 in wanted[0]["low"] and 1 not in wanted[1]["low"]
    assert 2 not in wanted[1]["low"] and wanted[2]["low"][2] == 7
    assert [3 in w["low"] for w in wanted[:3]] == [True, False, True]
    assert (1, 0.0) in wanted[2]["quiet"] and (1, 0.0) not in wanted[3]["quiet"]
    flow = tmp_path / "job.flow"
    flow.write_text(PROGRAM, encoding="utf-8")
    for index, batch in enumerate(BATCHES):
        write_batch(tmp_path / "in", index, batch)
        job = flowc.compile(PROGRAM, str(flow), for_spark=True)
        assert not [d for d in job.diagnostics if d.severity.name == "ERROR"], job.diagnostics
        report = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
        assert all(q.error is None for q in report.queries), report
        assert read(tmp_path / "out") == wanted[index], index


def test_the_same_into_postgres(spark: Any, tmp_path: Path, postgres: dict[str, Any]) -> None:
    """The pipe form into PostgreSQL: a key the filter fails is deleted in the micro-batch's
    transaction (three micro-batches, each a restart)."""
    import psycopg

    sink = (
        f"CREATE SINK low WITH (connector = 'postgres', host = '{postgres['host']}', "
        f"port = {postgres['port']}, database = '{postgres['dbname']}', user = 'postgres', "
        "table = 'filtered_low', key = 'auction', mode = 'update');\n"
    )
    head = PROGRAM[: PROGRAM.index("CREATE SINK")]
    pipe = PROGRAM[PROGRAM.index("INSERT INTO low") : PROGRAM.index("INSERT INTO having_low")]
    program = head + sink + pipe
    batches = BATCHES[:3]
    wanted = [w["low"] for w in expected(batches)]
    flow = tmp_path / "job.flow"
    flow.write_text(program, encoding="utf-8")
    for index, batch in enumerate(batches):
        write_batch(tmp_path / "in", index, batch)
        job = flowc.compile(program, str(flow), for_spark=True)
        report = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
        assert all(q.error is None for q in report.queries), report
        with psycopg.connect(**postgres) as conn:
            rows = conn.execute("SELECT auction, total FROM filtered_low").fetchall()
        assert dict(rows) == wanted[index], index


#: Flink's changes of SQL's HAVING over the bids, applied as its upsert sink applies them
#: (the '-U' its filter passes deletes the key; no mini-batch: one change per bid).
FLINK_HAVING = """
import json, sys
from pyflink.table import EnvironmentSettings, TableEnvironment
rows = json.loads(sys.argv[1])
t = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
t.get_config().set("parallelism.default", "1")
values = ",".join(f"(CAST({a} AS BIGINT), CAST({p} AS BIGINT))" for a, p in rows)
t.execute_sql(f"CREATE TEMPORARY VIEW bids AS SELECT * FROM (VALUES {values}) AS v(auction, price)")
result = t.execute_sql(
    "SELECT auction, sum(price) AS total FROM bids GROUP BY auction HAVING sum(price) < 10"
)
table = {}
with result.collect() as changes:
    for row in changes:
        if str(row.get_row_kind()) in ("+I", "+U"):
            table[row[0]] = row[1]
        else:
            table.pop(row[0], None)
print(json.dumps(sorted(table.items())))
"""


@requires_flink
def test_flink_ends_with_the_pythons_table() -> None:
    """Real Flink 2.3 (opt-in): the HAVING's upsert table is the plain Python's."""
    rows = [(r["auction"], r["price"]) for batch in BATCHES for r in batch]
    got = {auction: total for auction, total in ask_flink(FLINK_HAVING, rows)}
    assert got == expected(BATCHES)[-1]["having_low"]
