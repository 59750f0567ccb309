"""Flink's DDL in the Flink dialect (docs/language.md, "Flink tables"): a CREATE TABLE is a
source, sink or dimension table by use, and plans as the same job in flowc's own forms."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc.diagnostics import CompileError, Reporter
from flowc.errorcodes import Code
from flowc.spark.codegen import generate_pyspark
from flowc.syntax.parser import parse
from tests.helpers.bid_totals import BIDS, expected_totals
from tests.helpers.files import Row, at, write_batches, write_table
from tests.helpers.plans import without_spans
from tests.helpers.rates import ORDERS as TEMPORAL_ORDERS
from tests.helpers.rates import VERSIONS
from tests.helpers.rates import naive_time as _time
from tests.helpers.rates import version_of as _version_of
from tests.helpers.rates import written_versions as _versions_written
from tests.helpers.spark_run import compiled, run_generated, run_in, spark_codes, table

FLINK = """SET sql.dialect = 'flink';
SET parallelism = 2;
SET max_parallelism = 64;
CREATE TEMPORARY TABLE bids (auction BIGINT, price BIGINT NULL, t STRING, pt AS PROCTIME(),
  ts AS CAST(t AS TIMESTAMP), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (connector = 'files', path = 'in', format = 'json');
CREATE TABLE IF NOT EXISTS auctions (id BIGINT, category BIGINT, PRIMARY KEY (id) NOT ENFORCED)
  WITH (connector = 'files', path = 'a', format = 'json');
CREATE TABLE totals (auction BIGINT, n BIGINT, CONSTRAINT pk PRIMARY KEY (auction) NOT ENFORCED)
  WITH (connector = 'files', path = 'out/t', format = 'json');
CREATE TABLE joined (auction BIGINT, category BIGINT) WITH (connector = 'console');
CREATE TEMPORARY VIEW cheap AS SELECT auction, price, pt FROM bids WHERE price < 10;
EXECUTE STATEMENT SET
BEGIN
INSERT INTO totals SELECT auction, count(*) AS n FROM cheap GROUP BY auction;
INSERT INTO joined SELECT c.auction, a.category
  FROM cheap AS c JOIN auctions FOR SYSTEM_TIME AS OF c.pt AS a ON c.auction = a.id;
END;
"""

FLOWC = """SET sql.dialect = 'flink';
SET parallelism = 2;
SET max_parallelism = 64;
CREATE SOURCE bids (auction BIGINT, price BIGINT, t STRING, pt AS PROCTIME(),
  ts AS CAST(t AS TIMESTAMP), WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (connector = 'files', path = 'in', format = 'json');
CREATE TABLE auctions (id BIGINT, category BIGINT)
  WITH (connector = 'files', path = 'a', format = 'json');
CREATE SINK totals (auction BIGINT, n BIGINT)
  WITH (connector = 'files', path = 'out/t', format = 'json', key = 'auction', mode = 'update');
CREATE SINK joined (auction BIGINT, category BIGINT) WITH (connector = 'console');
CREATE VIEW cheap AS FROM bids |> WHERE price < 10 |> SELECT auction, price, pt;
INSERT INTO totals SELECT auction, count(*) AS n FROM cheap GROUP BY auction;
INSERT INTO joined SELECT c.auction, a.category
  FROM cheap AS c JOIN auctions FOR SYSTEM_TIME AS OF c.pt AS a ON c.auction = a.id;
"""


def _without_lines(text: str) -> str:
    data = json.loads(text)
    return re.sub(r'"(line|column|end_line|end_column)": \d+', "", json.dumps(data))


def test_flink_ddl_plans_as_flowc_forms() -> None:
    """Tables by use, TEMPORARY, IF NOT EXISTS, a statement set and a PRIMARY KEY sink give
    the JobGraph and StreamGraph of CREATE SOURCE / TABLE / SINK with key = '...'."""
    flink = flowc.compile(FLINK, "job.flow", for_spark=True)
    ours = flowc.compile(FLOWC, "job.flow", for_spark=True)
    assert not [d for d in flink.diagnostics if d.severity.name == "ERROR"]
    assert _without_lines(flink.job_graph.to_json()) == _without_lines(ours.job_graph.to_json())
    assert _without_lines(flink.stream_graph.to_json()) == _without_lines(
        ours.stream_graph.to_json()
    )
    totals = flink.program.sink("totals")
    assert (totals.mode, dict(totals.options)["key"]) == ("update", "auction")
    assert [s.name for s in flink.program.sources if s.bounded] == ["auctions"]


def _errors(text: str) -> list[tuple[Code, int, int, int]]:
    with pytest.raises(CompileError) as raised:
        flowc.compile(text, "job.flow")
    return [
        (d.code, d.span.line, d.span.column, d.span.end_column)
        for d in raised.value.diagnostics
        if d.severity.name == "ERROR"
    ]


def test_errors_point_at_their_clause() -> None:
    head = "SET sql.dialect = 'flink';\nCREATE TABLE s (a BIGINT) WITH (connector = 'datagen');\n"
    text = head + (
        "CREATE TABLE o (a BIGINT, PRIMARY KEY (a) NOT ENFORCED) WITH (connector = 'console');\n"
        "INSERT INTO o SELECT a FROM s;\n"
    )
    assert _errors(text) == [(Code.E0293, 3, 27, 55)]
    text = head + "CREATE TABLE o (a BIGINT, b BIGINT PRIMARY KEY NOT ENFORCED)"
    text += " WITH (connector = 'files', path = 'o', format = 'json', key = 'a');\n"
    text += "INSERT INTO o SELECT a, a AS b FROM s;\n"
    assert _errors(text) == [(Code.E0293, 3, 36, 60)]
    text = head + "CREATE TABLE t (a BIGINT) WITH (connector = 'console');\n"
    text += "INSERT INTO t SELECT a FROM s;\nINSERT INTO t SELECT a FROM t;\n"
    assert _errors(text) == [(Code.E0295, 3, 14, 15)]


def test_create_table_is_a_table_in_the_spark_dialect() -> None:
    """Without the Flink dialect a CREATE TABLE keeps its meaning: a dimension table."""
    text = "CREATE TABLE t (a BIGINT) WITH (connector = 'files', path = 'a', format = 'json');\n"
    (table,) = parse(text, "job.flow", Reporter()).statements
    assert table.bounded  # type: ignore[union-attr]
    (flink,) = parse("SET sql.dialect = 'flink';\n" + text, "job.flow", Reporter()).statements[1:]
    assert not flink.bounded  # type: ignore[union-attr]


def _current_table(spark: Any, folder: Path) -> list[tuple[Any, ...]]:
    pointer = json.loads((folder / "_current").read_text(encoding="utf-8"))
    rows = spark.read.parquet(str(folder / pointer["version"])).collect()
    return sorted((tuple(row) for row in rows), key=repr)


def test_a_primary_key_table_upserts_on_spark(spark: Any, tmp_path: Path) -> None:
    """Flink DDL end to end: a source table, a PRIMARY KEY sink table (a files table in update
    mode), a statement set; the table holds one row per key, as plain Python's running
    aggregate, after three micro-batches."""
    write_batches(tmp_path / "bids", BIDS)
    program = (
        "SET sql.dialect = 'flink';\nSET max_parallelism = 16;\n"
        "CREATE TEMPORARY TABLE bids (auction BIGINT, price BIGINT NULL, ts TIMESTAMP)\n"
        "  WITH (connector = 'files', path = 'bids', format = 'json', max_files_per_trigger = 1);\n"
        "CREATE TABLE totals (auction BIGINT, n BIGINT, top BIGINT, total BIGINT,\n"
        "  PRIMARY KEY (auction) NOT ENFORCED)\n"
        "  WITH (connector = 'files', path = 'out/totals', format = 'parquet');\n"
        "BEGIN STATEMENT SET;\n"
        "INSERT INTO totals SELECT auction, count(*) AS n, max(price) AS top,\n"
        "  sum(price) AS total FROM bids GROUP BY auction;\n"
        "END;\n"
    )
    job = flowc.compile(program, str(tmp_path / "job.flow"), for_spark=True)
    assert not [d for d in job.diagnostics if d.severity.name == "ERROR"]
    report = run_in(job, tmp_path)
    assert [q.error for q in report.queries] == [None]
    rows = _current_table(spark, tmp_path / "out" / "totals")
    assert {r[0]: r[1:] for r in rows} == expected_totals(BIDS)
    assert len(rows) == len(expected_totals(BIDS))


#: Bids whose time is a string, over four micro-batches; the last moves the watermark past
#: every minute before it.
SALES: list[list[Row]] = [
    [
        {"auction": 1, "price": 10, "qty": 2, "t": at(1)},
        {"auction": 2, "price": 7, "qty": 1, "t": at(20)},
        {"auction": 1, "price": 3, "qty": None, "t": at(50)},
    ],
    [
        {"auction": 1, "price": 5, "qty": 3, "t": at(61)},
        {"auction": 2, "price": 4, "qty": 4, "t": at(119)},
    ],
    [
        {"auction": 2, "price": 9, "qty": 1, "t": at(130)},
        {"auction": 1, "price": 1, "qty": 1, "t": at(125)},
    ],
    [{"auction": 3, "price": 1, "qty": 1, "t": at(400)}],
]


def test_computed_columns_in_a_watermark_and_a_window_on_spark(spark: Any, tmp_path: Path) -> None:
    """``total AS price * qty`` and ``ts AS CAST(t AS TIMESTAMP)`` computed after reading,
    the WATERMARK on ``ts``: per-minute totals per auction equal plain Python's (windows the
    final watermark closed)."""
    write_batches(tmp_path / "sales", SALES)
    job = compiled(
        tmp_path,
        "SET sql.dialect = 'flink';\nSET max_parallelism = 16;\n"
        "CREATE TABLE sales (auction BIGINT, price BIGINT, qty BIGINT, t STRING,\n"
        "  total AS price * qty, ts AS CAST(t AS TIMESTAMP),\n"
        "  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)\n"
        "  WITH (connector = 'files', path = 'sales', format = 'json',\n"
        "        max_files_per_trigger = 1);\n"
        "CREATE SINK per_minute WITH (connector = 'memory');\n"
        "INSERT INTO per_minute FROM sales |> KEY BY auction\n"
        "  |> WINDOW TUMBLE(ts, INTERVAL '1' MINUTE) |> AGGREGATE sum(total) AS s, count(*) AS n\n"
        "  |> SELECT auction, window_start, s, n;\n",
    )
    assert spark_codes(job) == set()
    run_generated(spark, tmp_path, job)
    watermark = datetime.min
    sums: dict[tuple[int, datetime], list[int | None]] = defaultdict(list)
    for batch in SALES:
        for row in batch:
            ts = datetime.fromisoformat(row["t"])
            assert ts >= watermark  # no late rows: when they are dropped is timing's
            total = None if row["qty"] is None else row["price"] * row["qty"]
            minute = ts.replace(second=0, microsecond=0)
            sums[(row["auction"], minute)].append(total)
        latest = max(datetime.fromisoformat(r["t"]) for r in batch)
        watermark = max(watermark, latest - timedelta(seconds=5))
    expected = sorted(
        (auction, minute, sum(t for t in totals if t is not None) or None, len(totals))
        for (auction, minute), totals in sums.items()
        if minute + timedelta(minutes=1) <= watermark
    )
    assert len(expected) == 6
    assert table(spark, "per_minute") == expected


#: Orders over three micro-batches; ``ORDERS_NULL`` has a NULL customer in the second.
ORDERS: list[list[Row]] = [
    [{"id": 1, "customer": 10, "amount": 5}, {"id": 2, "customer": 11, "amount": None}],
    [{"id": 3, "customer": 10, "amount": 7}],
    [{"id": 4, "customer": 12, "amount": 1}, {"id": 5, "customer": 11, "amount": 2}],
]
ORDERS_NULL: list[list[Row]] = [ORDERS[0], [{"id": 3, "customer": None, "amount": 7}], ORDERS[2]]


def _not_null_job(tmp_path: Path, batches: list[list[Row]], sink_not_null: str) -> Any:
    write_batches(tmp_path / "orders", batches)
    return flowc.compile(
        "SET sql.dialect = 'flink';\n"
        "CREATE TABLE orders (id BIGINT NOT NULL, customer BIGINT NOT NULL, amount BIGINT NULL)\n"
        "  WITH (connector = 'files', path = 'orders', format = 'json',\n"
        "        max_files_per_trigger = 1);\n"
        f"CREATE TABLE big (id BIGINT NOT NULL, customer BIGINT, {sink_not_null})\n"
        "  WITH (connector = 'files', path = 'out/big', format = 'json');\n"
        "INSERT INTO big SELECT id, customer, amount * 2 AS doubled FROM orders;\n",
        str(tmp_path / "job.flow"),
        for_spark=True,
    )


def _written(spark: Any, folder: Path) -> list[tuple[Any, ...]]:
    rows = spark.read.json(str(folder)).select("id", "customer", "doubled").collect()
    return sorted(tuple(r) for r in rows)


def test_not_null_columns_pass_rows_without_nulls_on_spark(spark: Any, tmp_path: Path) -> None:
    """NOT NULL on source and sink columns that hold no NULL: every row written, as plain
    Python computes them, over three micro-batches (a NULL in a column not declared NOT
    NULL passes)."""
    job = _not_null_job(tmp_path, ORDERS, "doubled BIGINT NULL")
    report = run_in(job, tmp_path)
    assert [q.error for q in report.queries] == [None]
    expected = sorted(
        (r["id"], r["customer"], None if r["amount"] is None else r["amount"] * 2)
        for batch in ORDERS
        for r in batch
    )
    assert _written(spark, tmp_path / "out" / "big") == expected


def test_a_null_in_a_not_null_source_column_fails_the_query(spark: Any, tmp_path: Path) -> None:
    """Flink trusts a source's NOT NULL; flowc never passes the NULL on: the query fails at
    the micro-batch that holds it, naming the source and column, after writing the rows
    before it."""
    job = _not_null_job(tmp_path, ORDERS_NULL, "doubled BIGINT")
    (query,) = run_in(job, tmp_path).queries
    assert query.error is not None and query.failure is not None
    assert "source 'orders': column 'customer' is declared NOT NULL" in query.failure.message
    assert (query.code, query.failure.span.line) == (Code.E0804, 7)  # the failed INSERT
    assert _written(spark, tmp_path / "out" / "big") == [(1, 10, 10), (2, 11, None)]


def test_a_null_written_to_a_not_null_sink_column_fails_the_query(
    spark: Any, tmp_path: Path
) -> None:
    """Flink's sink NOT NULL enforcer (ERROR, its default): the first NULL written to a NOT
    NULL column fails the job; nothing of that micro-batch is written."""
    job = _not_null_job(tmp_path, ORDERS, "doubled BIGINT NOT NULL")
    (query,) = run_in(job, tmp_path).queries
    assert query.error is not None and query.failure is not None
    assert "sink 'big': column 'doubled' is declared NOT NULL" in query.failure.message
    assert query.code == Code.E0804
    assert list((tmp_path / "out" / "big").glob("part-*")) == []


def test_a_null_key_written_to_a_primary_key_sink_fails_the_query(
    spark: Any, tmp_path: Path
) -> None:
    """Flink makes a sink's PRIMARY KEY columns NOT NULL: a GROUP BY's NULL group written
    to it fails the job (asked of Flink 2.3: "Column 'customer' is NOT NULL, however, a
    null value is being written into it"), where flowc wrote a row without a key; the
    micro-batch before it is written."""
    write_batches(
        tmp_path / "orders",
        [[{"id": 1, "customer": 10, "amount": 5}], [{"id": 2, "customer": None, "amount": 7}]],
    )
    job = flowc.compile(
        "SET sql.dialect = 'flink';\n"
        "CREATE TABLE orders (id BIGINT, customer BIGINT, amount BIGINT)\n"
        "  WITH (connector = 'files', path = 'orders', format = 'json',\n"
        "        max_files_per_trigger = 1);\n"
        "CREATE TABLE per_customer (customer BIGINT, total BIGINT,\n"
        "  PRIMARY KEY (customer) NOT ENFORCED)\n"
        "  WITH (connector = 'files', path = 'out/per_customer', format = 'json');\n"
        "INSERT INTO per_customer SELECT customer, SUM(amount) AS total FROM orders\n"
        "  GROUP BY customer;\n",
        str(tmp_path / "job.flow"),
        for_spark=True,
    )
    (query,) = run_in(job, tmp_path).queries
    assert query.error is not None and query.failure is not None
    expected = "column 'customer' is declared NOT NULL (or in its PRIMARY KEY)"
    assert f"sink 'per_customer': {expected}" in query.failure.message
    assert (query.code, query.failure.span.line) == (Code.E0804, 8)
    table = tmp_path / "out" / "per_customer"
    version = json.loads((table / "_current").read_text())["version"]
    rows = spark.read.json(str(table / version)).collect()
    assert sorted(tuple(r) for r in rows) == [(10, 5)]


VERSIONED_FLINK = """SET sql.dialect = 'flink';
SET max_parallelism = 16;
CREATE TABLE orders (id BIGINT, cur STRING, amount DOUBLE, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
  WITH (connector = 'files', path = 'orders', format = 'json', max_files_per_trigger = 1);
CREATE TABLE rates (cur STRING, rate DOUBLE, since TIMESTAMP(3),
  PRIMARY KEY (cur) NOT ENFORCED, WATERMARK FOR since AS since)
  WITH (connector = 'files', path = 'rates', format = 'json');
CREATE TABLE inner_out (id BIGINT, rate DOUBLE, since TIMESTAMP(3))
  WITH (connector = 'files', path = 'inner', format = 'json');
INSERT INTO inner_out SELECT o.id, r.rate, r.since FROM orders AS o
  JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.cur = r.cur;
"""


def test_a_versioned_flink_table_plans_as_key_and_version_time() -> None:
    """Flink's versioned table (a PRIMARY KEY and a WATERMARK) read FOR SYSTEM_TIME AS OF
    event time is flowc's table with key and version_time: equal plans."""
    ours = (
        VERSIONED_FLINK.replace("CREATE TABLE orders", "CREATE SOURCE orders")
        .replace(
            ",\n  PRIMARY KEY (cur) NOT ENFORCED, WATERMARK FOR since AS since)\n"
            "  WITH (connector = 'files', path = 'rates', format = 'json');",
            ")\n  WITH (connector = 'files', path = 'rates', format = 'json', key = 'cur',\n"
            "  version_time = 'since');",
        )
        .replace("CREATE TABLE inner_out", "CREATE SINK inner_out")
    )
    assert "version_time" in ours and "CREATE TABLE rates" in ours
    flink = flowc.compile(VERSIONED_FLINK, "job.flow", for_spark=True)
    plain = flowc.compile(ours, "job.flow", for_spark=True)
    for stage in ("job_graph", "stream_graph"):
        assert _without_lines(getattr(flink, stage).to_json()) == _without_lines(
            getattr(plain, stage).to_json()
        )
    rates = flink.program.source("rates")
    assert (rates.version_key, rates.version_time, rates.watermark) == (("cur",), "since", None)


def test_a_versioned_flink_table_joins_on_spark(spark: Any, tmp_path: Path) -> None:
    """The event-time temporal join of tests/test_temporal_joins.py written in Flink's DDL:
    each order meets its currency's version valid at its time, over three micro-batches,
    as plain Python computes it."""
    write_table(tmp_path / "rates", VERSIONS)
    write_batches(tmp_path / "orders", TEMPORAL_ORDERS)
    job = compiled(tmp_path, VERSIONED_FLINK)
    assert not job.spark_diagnostics
    run_generated(spark, tmp_path, job)
    expected = []
    for order in (o for batch in TEMPORAL_ORDERS for o in batch):
        version = _version_of(order)
        if version is not None:
            expected.append((order["id"], version["rate"], _time(version["since"])))
    assert len(expected) == 7
    assert _versions_written(tmp_path / "inner") == sorted(expected, key=repr)


KEYED_STREAM = """\
SET sql.dialect = 'flink';
CREATE TABLE airports (code STRING, city STRING{key}) WITH ('connector' = '{connector}'{options});
CREATE TABLE o (code STRING, city STRING) WITH ('connector' = 'console');
INSERT INTO o SELECT * FROM airports;
"""


@pytest.mark.parametrize(
    ("connector", "options"),
    [("files", ", 'path' = 'in', 'format' = 'json'"), ("datagen", "")],
)
def test_a_key_on_a_files_or_datagen_stream_is_a_declaration(connector: str, options: str) -> None:
    """Flink scans a filesystem or datagen table with a PRIMARY KEY as inserts, as without
    it: the plans and the generated program equal the same job's without the key, so the
    rows Spark reads are the same (every row, duplicates of a key included)."""
    keyed = KEYED_STREAM.format(
        key=", PRIMARY KEY (code) NOT ENFORCED", connector=connector, options=options
    )
    plain = KEYED_STREAM.format(key="", connector=connector, options=options)
    with_key = flowc.compile(keyed, "j.flow", for_spark=True)
    without = flowc.compile(plain, "j.flow", for_spark=True)
    assert without_spans(json.loads(with_key.job_graph.to_json())) == without_spans(
        json.loads(without.job_graph.to_json())
    )
    assert generate_pyspark(with_key) == generate_pyspark(without)


@pytest.mark.parametrize(
    "constraint",
    ["user_id INT PRIMARY KEY, age INT", "user_id INT, age INT, PRIMARY KEY (user_id)"],
)
def test_an_enforced_primary_key_is_refused_with_flinks_reason(constraint: str) -> None:
    """Flink 2.3 refuses it too ("Flink doesn't support ENFORCED mode for PRIMARY KEY
    constraint"): the syntax error says to write NOT ENFORCED."""
    program = (
        "SET sql.dialect = 'flink';\n"
        f"CREATE TABLE users ({constraint}) WITH ('connector' = 'datagen');\n"
    )
    with pytest.raises(CompileError) as raised:
        flowc.compile(program, "j.flow")
    (error,) = raised.value.diagnostics
    assert error.code == "E0001"
    assert "NOT ENFORCED" in (error.help or "")


POSITIONAL = """SET sql.dialect = 'flink';
SET max_parallelism = 64;
CREATE TABLE bid (auction INT, bidder BIGINT, price BIGINT)
  WITH (connector = 'files', path = 'in', format = 'json');
CREATE TABLE q7 (auction BIGINT, bidder BIGINT, euros DECIMAL(23, 3)) WITH (connector = 'noop');
CREATE TABLE q4 (id BIGINT, n BIGINT, PRIMARY KEY (id) NOT ENFORCED)
  WITH (connector = 'files', path = 'out/q4', format = 'parquet');
CREATE TABLE q15 (bidder BIGINT, total BIGINT) WITH (connector = 'noop');
INSERT INTO q7 SELECT auction, price, 0.908 * price AS e FROM bid;
INSERT INTO q4 SELECT auction, count(*) FROM bid GROUP BY auction;
INSERT INTO q15 SELECT bidder, sum(price) FROM bid GROUP BY bidder;
"""

NAMED = """SET sql.dialect = 'flink';
SET max_parallelism = 64;
CREATE TABLE bid (auction INT, bidder BIGINT, price BIGINT)
  WITH (connector = 'files', path = 'in', format = 'json');
CREATE TABLE q7 (auction BIGINT, bidder BIGINT, euros DECIMAL(23, 3)) WITH (connector = 'noop');
CREATE TABLE q4 (id BIGINT, n BIGINT, PRIMARY KEY (id) NOT ENFORCED)
  WITH (connector = 'files', path = 'out/q4', format = 'parquet');
CREATE TABLE q15 (bidder BIGINT, total BIGINT) WITH (connector = 'noop', mode = 'update');
INSERT INTO q7 SELECT CAST(auction AS BIGINT) AS auction, price AS bidder,
  TRY_CAST(0.908 * price AS DECIMAL(23, 3)) AS euros FROM bid;
INSERT INTO q4 SELECT CAST(auction AS BIGINT) AS id, count(*) AS n FROM bid GROUP BY auction;
INSERT INTO q15 SELECT bidder, sum(price) AS total FROM bid GROUP BY bidder;
"""


def test_positional_insert_plans_as_named_insert() -> None:
    """Flink writes an INSERT's columns by position, cast to the sink's types: the plans are
    those of the same job written with the sink's names and explicit casts (no operator
    more), and a noop table without mode takes its updating query's mode."""
    positional = flowc.compile(POSITIONAL, "job.flow", for_spark=True)
    named = flowc.compile(NAMED, "job.flow", for_spark=True)
    for job in (positional, named):
        assert not [d for d in job.diagnostics if d.severity.name == "ERROR"], job.diagnostics
    assert _without_lines(positional.job_graph.to_json()) == _without_lines(
        named.job_graph.to_json()
    )
    assert _without_lines(positional.stream_graph.to_json()) == _without_lines(
        named.stream_graph.to_json()
    )
    from flowc.spark.codegen import generate_pyspark

    assert generate_pyspark(positional) == generate_pyspark(named)  # the same Spark job
    modes = {s.name: s.mode for s in positional.program.sinks}
    assert modes == {"q7": "append", "q4": "update", "q15": "update"}
    assert [c.name for c in positional.program.inserts[1].stream.schema] == ["id", "n"]


def test_blackhole_and_print_are_noop_and_console() -> None:
    """Flink's blackhole and print connectors plan as flowc's noop and console sinks."""
    flink = POSITIONAL.replace("'noop'", "'blackhole'")
    assert flink.count("'blackhole'") == 2
    ours = flowc.compile(POSITIONAL, "job.flow", for_spark=True)
    theirs = flowc.compile(flink, "job.flow", for_spark=True)
    assert _without_lines(theirs.job_graph.to_json()) == _without_lines(ours.job_graph.to_json())
    assert [(s.connector, s.mode) for s in theirs.program.sinks] == [
        (s.connector, s.mode) for s in ours.program.sinks
    ]
    printed = flowc.compile(POSITIONAL.replace("'noop'", "'print'"), "job.flow", for_spark=True)
    assert [s.connector for s in printed.program.sinks] == ["console", "files", "console"]


def test_updating_query_into_flink_files_table_hints_primary_key() -> None:
    """Flink's filesystem sink refuses updates, and so does a files table: E0748 whatever
    the target (Flink refuses it too), whose hint in the Flink dialect names the PRIMARY
    KEY that makes it an upsert table; Spark's E0704 at the aggregate is not shown too."""
    with pytest.raises(flowc.CompileError) as raised:
        flowc.compile(
            "SET sql.dialect = 'flink';\nSET max_parallelism = 16;\n"
            "CREATE TABLE bid (auction BIGINT, price BIGINT) WITH ('connector' = 'datagen');\n"
            "CREATE TABLE f (auction BIGINT, n BIGINT)\n"
            "  WITH ('connector' = 'files', 'path' = 'out', 'format' = 'json');\n"
            "INSERT INTO f SELECT auction, count(*) FROM bid GROUP BY auction;\n",
            "job.flow",
            for_spark=True,
        )
    (error,) = raised.value.diagnostics
    assert error.code == "E0748"
    assert error.help is not None and "PRIMARY KEY (auction) NOT ENFORCED" in error.help


def test_a_processing_time_column_keeps_its_declared_place(spark: Any, tmp_path: Path) -> None:
    """Flink lists a table's columns as declared, PROCTIME() among them (the cookbook writes
    it before the event time): SELECT * into a table by position puts each value in its
    column, where appending PROCTIME() last would swap two TIMESTAMP columns unseen."""
    program = (
        "SET sql.dialect = 'flink';\n"
        "CREATE TABLE s (a STRING, pt AS PROCTIME(), ts TIMESTAMP_LTZ(3), b BIGINT)"
        " WITH (connector = 'files', path = 'in', format = 'json');\n"
        "CREATE TABLE o (a STRING, pt TIMESTAMP_LTZ(3), ts TIMESTAMP_LTZ(3), b BIGINT)"
        " WITH (connector = 'files', path = 'out', format = 'json');\n"
        "INSERT INTO o SELECT * FROM s;\n"
    )
    job = compiled(tmp_path, program)
    assert [c.name for c in job.program.source("s").output_schema] == ["a", "pt", "ts", "b"]
    between = compiled(
        tmp_path,
        program.replace(
            "pt AS PROCTIME(), ts TIMESTAMP_LTZ(3), b BIGINT",
            "b BIGINT, ts TIMESTAMP_LTZ(3), pt AS PROCTIME(), t2 AS ts",
        ).replace("INSERT INTO o SELECT * FROM s", "INSERT INTO o SELECT a, pt, ts, b FROM s"),
    )
    assert [c.name for c in between.program.source("s").output_schema] == [
        "a",
        "b",
        "ts",
        "pt",
        "t2",
    ]
    assert [c.type for c in job.program.source("s").output_schema][2] == "TIMESTAMP"
    write_batches(tmp_path / "in", [[{"a": "x", "ts": "2001-02-03T04:05:06", "b": 7}]])
    assert [q.error for q in run_in(job, tmp_path).queries] == [None]
    from tests.helpers.files import read_json_dir

    (row,) = read_json_dir(tmp_path / "out")
    assert (row["a"], row["b"]) == ("x", 7)
    assert row["ts"].startswith("2001-02-03T04:05:06")
    assert not row["pt"].startswith("2001")
