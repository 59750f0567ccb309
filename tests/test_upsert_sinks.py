"""Upsert sinks (issue 13, item 7): a running aggregate written to a real PostgreSQL server
and to a files table, one row per key, over several micro-batches, against plain Python;
a micro-batch replayed after a crash writes nothing twice.

The PostgreSQL server is Debian's (``apt-get install postgresql``), started by the
session fixture below on a free loopback port with a data folder of its own, and stopped
at the end. Where its binaries are missing the tests are skipped, saying so; CI sets
``FLOWC_POSTGRES_REQUIRED=1``, which makes that a failure.
"""

from __future__ import annotations

import json
import os
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc.errorcodes import Code
from tests.helpers.bid_totals import BIDS, expected_totals
from tests.helpers.files import Row, at, source, write_batches
from tests.helpers.postgres_server import free_port
from tests.helpers.spark_run import run_in

COLUMNS = "auction BIGINT, price BIGINT, ts TIMESTAMP"
TOTALS = "|> KEY BY auction |> AGGREGATE count(*) AS n, max(price) AS top, sum(price) AS total"


def _rows(postgres: dict[str, Any], query: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(**postgres) as conn:
        return [tuple(row) for row in conn.execute(query).fetchall()]


def _postgres_sink(postgres: dict[str, Any], table: str, key: str = "auction") -> str:
    return (
        f"CREATE SINK totals WITH (connector = 'postgres', host = '{postgres['host']}', "
        f"port = {postgres['port']}, database = '{postgres['dbname']}', user = 'postgres', "
        f"table = '{table}', key = '{key}', mode = 'update');\n"
    )


# ---------------------------------------------------------------- postgres


def test_a_running_aggregate_upserted_into_postgres(
    spark: Any, tmp_path: Path, postgres: dict[str, Any]
) -> None:
    write_batches(tmp_path / "bids", BIDS)
    program = (
        source("bids", COLUMNS)
        + "SET max_parallelism = 16;\n"
        + _postgres_sink(postgres, "auction_totals")
        + f"INSERT INTO totals FROM bids {TOTALS};\n"
    )
    job = flowc.compile(program, str(tmp_path / "job.flow"), for_spark=True)
    (query,) = job.spark_plan.queries
    assert query.upsert is not None and "ON CONFLICT (auction)" in query.upsert
    report = run_in(job, tmp_path)
    assert [q.error for q in report.queries] == [None]
    assert report.queries[0].batches == 3
    rows = _rows(postgres, "SELECT auction, n, top, total FROM auction_totals")
    assert {r[0]: r[1:] for r in rows} == expected_totals(BIDS)
    assert len(rows) == 4  # one row per key, though keys were updated in later batches
    # the server is the session's: other tests' sinks have rows in flowc_sink_batches too
    (done,) = _rows(
        postgres,
        "SELECT batch_id FROM flowc_sink_batches WHERE sink_table LIKE '%auction_totals'",
    )
    assert done == (2,)
    types = dict(
        _rows(
            postgres,
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_name = 'auction_totals'",
        )
    )
    assert types == {"auction": "bigint", "n": "bigint", "top": "bigint", "total": "bigint"}


def test_decimal_totals_past_ten_digits_fit_the_table(
    spark: Any, tmp_path: Path, postgres: dict[str, Any]
) -> None:
    """sum(DECIMAL(12, 2)) is Spark's DECIMAL(22, 2), and so is the table's column: a total
    past 10^10 is stored (flowc once created numeric(12, 2), and the batch that reached
    10^10 failed), and equals the plain-Python sum of the same Decimals."""
    amount = "9999999999.99"  # the largest DECIMAL(12, 2) values: three of them pass 10^10
    batches: list[list[Row]] = [
        [
            {"auction": 1, "amount": amount, "ts": at(0)},
            {"auction": 2, "amount": "1.50", "ts": at(1)},
        ],
        [{"auction": 1, "amount": amount, "ts": at(61)}],
        [
            {"auction": 1, "amount": amount, "ts": at(120)},
            {"auction": 2, "amount": "-0.25", "ts": at(121)},
        ],
    ]
    write_batches(tmp_path / "bids", batches)
    program = (
        source("bids", "auction BIGINT, amount DECIMAL(12, 2), ts TIMESTAMP")
        + "SET max_parallelism = 16;\n"
        + _postgres_sink(postgres, "decimal_totals")
        + "INSERT INTO totals FROM bids |> KEY BY auction "
        "|> AGGREGATE sum(amount) AS total, avg(amount) AS mean;\n"
    )
    job = flowc.compile(program, str(tmp_path / "job.flow"), for_spark=True)
    report = run_in(job, tmp_path)
    assert [q.error for q in report.queries] == [None]
    expected: dict[int, list[Decimal]] = {}
    for batch in batches:
        for row in batch:
            expected.setdefault(row["auction"], []).append(Decimal(row["amount"]))
    rows = _rows(postgres, "SELECT auction, total, mean FROM decimal_totals")
    assert {r[0]: (r[1], r[2]) for r in rows} == {
        key: (sum(values), (sum(values) / len(values)).quantize(Decimal("0.000001")))
        for key, values in expected.items()
    }
    assert max(r[1] for r in rows) > 10**10
    columns = _rows(
        postgres,
        "SELECT column_name, numeric_precision, numeric_scale FROM information_schema.columns "
        "WHERE table_name = 'decimal_totals' AND column_name IN ('total', 'mean')",
    )
    assert sorted(columns) == [("mean", 16, 6), ("total", 22, 2)]


def test_a_replayed_micro_batch_writes_nothing_twice(
    spark: Any, tmp_path: Path, postgres: dict[str, Any]
) -> None:
    """A crash after the table committed a batch but before Spark did: Spark runs the batch
    again (its commit file is gone), and the table is what one run would have written. A
    sink that appended (counting each row once per write) would count it twice."""
    write_batches(tmp_path / "bids", BIDS)
    program = (
        source("bids", COLUMNS)
        + "SET max_parallelism = 16;\n"
        + _postgres_sink(postgres, "replayed", key="auction, price")
        + "INSERT INTO totals FROM bids |> WHERE price IS NOT NULL;\n"
    ).replace("mode = 'update'", "mode = 'append'")
    job = flowc.compile(program, str(tmp_path / "job.flow"), for_spark=True)
    assert [q.error for q in run_in(job, tmp_path).queries] == [None]
    first = sorted(_rows(postgres, "SELECT auction, price FROM replayed"))
    forget_last_commit(tmp_path)  # the crash: Spark never recorded that batch 2 was written
    with psycopg_connection(postgres) as conn:
        conn.execute("INSERT INTO replayed VALUES (99, 99, now())")  # a row only we wrote
    report = run_in(job, tmp_path)
    assert [q.error for q in report.queries] == [None]
    assert report.queries[0].batches == 1  # the replay of batch 2
    again = sorted(_rows(postgres, "SELECT auction, price FROM replayed"))
    assert again == sorted([*first, (99, 99)])
    expected = sorted((r["auction"], r["price"]) for b in BIDS for r in b if r["price"] is not None)
    assert first == expected


def forget_last_commit(folder: Path) -> None:
    """Delete the query's last commit (and its checksum file), as a crash between the
    sink's write and Spark's commit leaves it."""
    commits = folder / "checkpoints" / "job" / "totals" / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink(missing_ok=True)


def psycopg_connection(postgres: dict[str, Any]) -> Any:
    import psycopg

    return psycopg.connect(**postgres, autocommit=True)


def test_a_key_that_does_not_identify_a_row_fails_the_batch(
    spark: Any, tmp_path: Path, postgres: dict[str, Any]
) -> None:
    write_batches(tmp_path / "bids", BIDS)
    program = (
        source("bids", COLUMNS)
        + _postgres_sink(postgres, "by_auction")
        + "INSERT INTO totals FROM bids;\n"
    ).replace("mode = 'update'", "mode = 'append'")
    job = flowc.compile(program, str(tmp_path / "job.flow"), for_spark=True)
    (query,) = run_in(job, tmp_path).queries
    assert query.code == Code.E0806
    assert query.failure is not None and query.failure.span.line == 3
    assert "two rows of micro-batch 0 have the key (1,)" in query.failure.message
    assert _rows(postgres, "SELECT to_regclass('by_auction')") == [(None,)]  # nothing written


def test_a_server_that_refuses_is_a_located_error(spark: Any, tmp_path: Path) -> None:
    write_batches(tmp_path / "bids", BIDS[:1])
    closed = {"host": "127.0.0.1", "port": free_port(), "dbname": "nothing"}
    program = (
        source("bids", COLUMNS)
        + _postgres_sink(closed, "t")
        + "SET max_parallelism = 16;\n"
        + f"INSERT INTO totals FROM bids {TOTALS};\n"
    )
    job = flowc.compile(program, str(tmp_path / "job.flow"), for_spark=True)
    (query,) = run_in(job, tmp_path).queries
    assert query.code == Code.E0806
    assert query.failure is not None and query.failure.span.line == 4
    assert "sink 'totals': PostgreSQL: connection" in query.failure.message


# ---------------------------------------------------------------- files


def _current_table(spark: Any, folder: Path) -> list[tuple[Any, ...]]:
    pointer = json.loads((folder / "_current").read_text(encoding="utf-8"))
    rows = spark.read.parquet(str(folder / pointer["version"])).collect()
    return sorted((tuple(row) for row in rows), key=repr)


def test_a_running_aggregate_upserted_into_a_files_table(spark: Any, tmp_path: Path) -> None:
    write_batches(tmp_path / "bids", BIDS)
    program = (
        source("bids", COLUMNS)
        + "SET max_parallelism = 16;\n"
        + "CREATE SINK totals WITH (connector = 'files', path = 'out/totals', "
        "format = 'parquet', mode = 'update', key = 'auction');\n"
        + f"INSERT INTO totals FROM bids {TOTALS};\n"
    )
    job = flowc.compile(program, str(tmp_path / "job.flow"), for_spark=True)
    report = run_in(job, tmp_path)
    assert [q.error for q in report.queries] == [None]
    table = tmp_path / "out" / "totals"
    rows = _current_table(spark, table)
    assert {r[0]: r[1:] for r in rows} == expected_totals(BIDS)
    assert len(rows) == 4
    versions = [p.name for p in table.iterdir() if p.name.startswith("v-")]
    assert len(versions) == 1  # older versions are deleted after the switch
    pointer = json.loads((table / "_current").read_text(encoding="utf-8"))
    assert pointer["batch_id"] == 2 and pointer["version"] == versions[0]

    # A replay of the last batch writes nothing: the table is the same version.
    forget_last_commit(tmp_path)
    again = run_in(job, tmp_path)
    assert [q.error for q in again.queries] == [None]
    assert json.loads((table / "_current").read_text(encoding="utf-8")) == pointer
    assert _current_table(spark, table) == rows

    # New input later: the table goes on from what it holds.
    write_batches(tmp_path / "more", [[{"auction": 3, "price": 50, "ts": at(300)}]])
    for file in (tmp_path / "more").iterdir():
        target = tmp_path / "bids" / "part-099.json"
        file.rename(target)
        os.utime(target, (1_700_001_000, 1_700_001_000))
    assert [q.error for q in run_in(job, tmp_path).queries] == [None]
    later = {r[0]: r[1:] for r in _current_table(spark, table)}
    assert later == {**expected_totals(BIDS), 3: (2, 50, 55)}


def test_an_upsert_run_reports_one_state_row_per_key_and_each_input_row_once(
    spark: Any, tmp_path: Path
) -> None:
    """The foreachBatch function reads its micro-batch twice (its keys, then the rows it
    writes), persisted, so the batch is computed once: Spark's per-batch metrics (input
    rows, numRowsTotal of the aggregation's state) are not doubled by a second run of the
    batch, and the end-of-run report says 20 rows held for 20 keys."""
    keys = 20
    batches: list[list[Row]] = [
        [{"auction": k, "price": 10 * i + k, "ts": at(5 * i + k)} for k in range(keys)]
        for i in range(3)
    ]
    write_batches(tmp_path / "bids", batches)
    program = (
        source("bids", COLUMNS)
        + "SET max_parallelism = 16;\n"
        + "CREATE SINK totals WITH (connector = 'files', path = 'out/totals', "
        "format = 'parquet', mode = 'update', key = 'auction');\n"
        + f"INSERT INTO totals FROM bids {TOTALS};\n"
    )
    job = flowc.compile(program, str(tmp_path / "job.flow"), for_spark=True)
    report = run_in(job, tmp_path)
    (query,) = report.queries
    assert query.error is None, query.error
    assert (query.batches, query.input_rows) == (3, 3 * keys)
    assert [(h.kind, h.rows) for h in query.state] == [("keyed_aggregate", keys)]
    assert len(_current_table(spark, tmp_path / "out" / "totals")) == keys


# ---------------------------------------------------------------- a Top-N into an upsert sink

#: Sales per category, one file a micro-batch: products enter each category's top two and
#: push others out of it (b pushes a out, g pushes f out, c enters y and is pushed out).
SALES: list[list[Row]] = [
    [
        {"category": "x", "product": "a", "sales": 5},
        {"category": "x", "product": "f", "sales": 8},
        {"category": "y", "product": "c", "sales": 1},
    ],
    [
        {"category": "x", "product": "b", "sales": 9},
        {"category": "y", "product": "h", "sales": 4},
    ],
    [
        {"category": "x", "product": "g", "sales": 10},
        {"category": "y", "product": "k", "sales": 2},
        {"category": "x", "product": "e", "sales": 3},
    ],
]
SALES_SOURCE = source("sales", "category STRING, product STRING, sales BIGINT")
TOP_TWO = "FROM sales |> TOP 2 BY sales DESC PER category |> SELECT category, product, sales"


def _top_two(batches: list[list[Row]]) -> list[tuple[str, str, int]]:
    """Flink's Rank result after ``batches``: each category's two best products (a row
    that left the top retracted)."""
    best: dict[str, list[tuple[int, str]]] = {}
    for row in (r for batch in batches for r in batch):
        best.setdefault(row["category"], []).append((row["sales"], row["product"]))
    return sorted(
        (category, product, sales)
        for category, rows in best.items()
        for sales, product in sorted(rows, reverse=True)[:2]
    )


def test_a_top_n_upserted_into_a_files_table_deletes_rows_that_leave_the_top(
    spark: Any, tmp_path: Path
) -> None:
    """The table after each run (two micro-batches, then a restart for the third) holds
    each category's current top two, as Flink's upsert sink after its Rank's retractions:
    the rows pushed out are deleted, not kept beside the new ones."""
    program = (
        SALES_SOURCE
        + "SET max_parallelism = 16;\n"
        + "CREATE SINK best WITH (connector = 'files', path = 'out/best', format = 'parquet',"
        " mode = 'update', key = 'category, product');\n" + f"INSERT INTO best {TOP_TWO};\n"
    )
    job = flowc.compile(program, str(tmp_path / "job.flow"), for_spark=True)
    (query,) = job.spark_plan.queries
    assert query.upsert_groups == ("category",)
    table = tmp_path / "out" / "best"
    write_batches(tmp_path / "sales", SALES[:2])
    assert [q.error for q in run_in(job, tmp_path).queries] == [None]
    assert _current_table(spark, table) == sorted(_top_two(SALES[:2]), key=repr)
    write_batches(tmp_path / "sales", SALES)
    assert [q.error for q in run_in(job, tmp_path).queries] == [None]
    assert _current_table(spark, table) == sorted(_top_two(SALES), key=repr)


def test_a_top_n_upserted_into_postgres_deletes_rows_that_leave_the_top(
    spark: Any, tmp_path: Path, postgres: dict[str, Any]
) -> None:
    """As the files table: the PostgreSQL table holds each category's current top two
    after each run, the rows pushed out deleted in the micro-batch's transaction."""
    sink = _postgres_sink(postgres, "top_sales", key="category, product").replace(
        "CREATE SINK totals", "CREATE SINK best"
    )
    program = SALES_SOURCE + "SET max_parallelism = 16;\n" + sink + f"INSERT INTO best {TOP_TWO};\n"
    job = flowc.compile(program, str(tmp_path / "job.flow"), for_spark=True)
    query = "SELECT category, product, sales FROM top_sales"
    write_batches(tmp_path / "sales", SALES[:2])
    assert [q.error for q in run_in(job, tmp_path).queries] == [None]
    assert sorted(_rows(postgres, query)) == _top_two(SALES[:2])
    write_batches(tmp_path / "sales", SALES)
    assert [q.error for q in run_in(job, tmp_path).queries] == [None]
    assert sorted(_rows(postgres, query)) == _top_two(SALES)


def test_a_top_n_filtered_before_an_upsert_sink_is_refused() -> None:
    """A WHERE after the TOP may keep none of a changed group's rows, and the group's old
    rows would stay: E0709 at the WHERE (a filter before the TOP is fine)."""
    program = (
        SALES_SOURCE
        + "CREATE SINK best WITH (connector = 'files', path = 'out/best', format = 'parquet',"
        " mode = 'update', key = 'category, product');\n"
        + "INSERT INTO best FROM sales |> TOP 2 BY sales DESC PER category |> WHERE sales > 3;\n"
    )
    with pytest.raises(flowc.CompileError) as raised:
        flowc.compile(program, "job.flow", for_spark=True)
    [error] = [d for d in raised.value.diagnostics if d.code == "E0709"]
    assert (error.span.line, error.span.column) == (3, 68)
    assert "a WHERE may keep none of a changed group's rows" in error.message
    before = program.replace(
        "FROM sales |> TOP 2 BY sales DESC PER category |> WHERE sales > 3",
        "FROM sales |> WHERE sales > 3 |> TOP 2 BY sales DESC PER category",
    )
    assert flowc.compile(before, "job.flow", for_spark=True).spark_plan.queries[
        0
    ].upsert_groups == ("category",)


def test_a_window_top_n_in_update_mode_deletes_rows_that_leave_a_windows_top(
    spark: Any, tmp_path: Path
) -> None:
    """In update mode a window's Top-N is written as it changes: the table holds each
    (window, category)'s current top two, a product pushed out of an open window's top
    deleted (two micro-batches, then a restart)."""
    minute = [[{**r, "ts": at(10 + i)} for i, r in enumerate(batch)] for batch in SALES]
    program = (
        source("sales", "category STRING, product STRING, sales BIGINT, ts TIMESTAMP", "1 SECOND")
        + "SET max_parallelism = 16;\n"
        + "CREATE SINK best WITH (connector = 'files', path = 'out/best', format = 'parquet',"
        " mode = 'update', key = 'window_start, category, product');\n"
        + "INSERT INTO best FROM sales |> WINDOW TUMBLE(ts, INTERVAL 1 MINUTE)\n"
        + "  |> TOP 2 BY sales DESC PER category\n"
        + "  |> SELECT window_start, window_end, category, product, sales;\n"
    )
    job = flowc.compile(program, str(tmp_path / "job.flow"), for_spark=True)
    (query,) = job.spark_plan.queries
    assert query.output_mode == "update"
    assert query.upsert_groups == ("category", "window_start", "window_end")
    table = tmp_path / "out" / "best"
    write_batches(tmp_path / "sales", minute[:2])
    assert [q.error for q in run_in(job, tmp_path).queries] == [None]
    assert [r[2:] for r in _current_table(spark, table)] == sorted(_top_two(SALES[:2]), key=repr)
    write_batches(tmp_path / "sales", minute)
    assert [q.error for q in run_in(job, tmp_path).queries] == [None]
    assert [r[2:] for r in _current_table(spark, table)] == sorted(_top_two(SALES), key=repr)


def test_a_batch_job_upserts_its_final_result_into_postgres(
    spark: Any, tmp_path: Path, postgres: dict[str, Any]
) -> None:
    """Batch mode (E0433 before issue 28): the whole final result upserted once by key; a
    key of the table the run does not write keeps its row."""
    import psycopg

    with psycopg.connect(**postgres, autocommit=True) as conn:
        conn.execute(
            "CREATE TABLE batch_totals (auction bigint PRIMARY KEY, n bigint, top bigint, "
            "total bigint)"
        )
        conn.execute("INSERT INTO batch_totals VALUES (999, 1, 1, 1), (1, 0, 0, 0)")
    write_batches(tmp_path / "bids", BIDS)
    program = (
        "SET execution.mode = batch;\n"
        + source("bids", COLUMNS)
        + "SET max_parallelism = 16;\n"
        + _postgres_sink(postgres, "batch_totals")
        + f"INSERT INTO totals FROM bids {TOTALS};\n"
    )
    job = flowc.compile(program, str(tmp_path / "job.flow"), for_spark=True)
    report = run_in(job, tmp_path)
    assert [q.error for q in report.queries] == [None]
    rows = _rows(postgres, "SELECT auction, n, top, total FROM batch_totals")
    assert {r[0]: r[1:] for r in rows} == {**expected_totals(BIDS), 999: (1, 1, 1)}
