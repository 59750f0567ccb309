"""Updating pipelines on Spark (issue 28; docs/language.md, "Updating pipelines on Spark").

A TOP or an AGGREGATE whose updates another AGGREGATE consumes runs as flowc's
ChangelogOperator processors, which emit Flink's changelog ('+I', '-U', '+U', '-D' in
``__flowc_op``) with Flink's mini-batch semantics (a micro-batch is the bundle), and the
upsert sink applies the last one by key. Here, against the same semantics computed in
plain Python (:func:`flink_changelog`):

- the processor's own emitted changelog, batch by batch, retractions included (its
  ``handleInputRows`` over a stand-in for Spark's state, which it pickles as on Spark);
- both shapes (TOP then AGGREGATE: the CDC job; AGGREGATE of an AGGREGATE) on real Spark,
  four micro-batches each its own run on the same checkpoint (a restart), the upsert
  table after each equal to Python's (min/max retracted, a key deleted and back);
- a TOP over an AGGREGATE's updates, with and without its rank (the sink keyed as
  Flink's upsert key), the tables after each restarted micro-batch equal to each
  partition's top rows of the input so far (rows entering, leaving and tied);
- batch mode (Spark's own operators over the whole input) ending with the same table.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc.runtime.run import run_job
from flowc.spark import generated_runtime
from flowc.spark.codegen import generate_pyspark
from tests.helpers.files import upsert_table
from tests.helpers.flink import ask_flink, requires_flink
from tests.helpers.minute_events import Row, at, minutes, write_batch

Change = tuple[str, tuple[Any, ...]]

# ---------------------------------------------------------------- Flink's semantics, in Python


def emitted(old: dict[Any, tuple[Any, ...]], new: dict[Any, tuple[Any, ...]]) -> list[Change]:
    """Flink's mini-batch changes from one bundle, per key (sorted): '+I' a new key's row,
    '-U' and '+U' a changed one (nothing unchanged), '-D' a key gone."""
    out: list[Change] = []
    for key in sorted(set(old) | set(new), key=repr):
        if key not in old:
            out.append(("+I", new[key]))
        elif key not in new:
            out.append(("-D", old[key]))
        elif old[key] != new[key]:
            out += [("-U", old[key]), ("+U", new[key])]
    return out


def flink_changelog(
    batches: list[list[Any]],
    key: Callable[[Any], Any],
    result: Callable[[Any, list[Any]], tuple[Any, ...] | None],
    signed: bool = False,
) -> list[list[Change]]:
    """A keyed operator's changelog per bundle: its input (rows, or (op, row) changes when
    ``signed``) folded per key as a multiset, ``result`` of each key's rows (None: no
    row), the changes from the bundle before."""
    held: dict[Any, list[Any]] = {}
    out: dict[Any, tuple[Any, ...]] = {}
    log = []
    for batch in batches:
        touched = set()
        for item in batch:
            op, row = item if signed else ("+I", item)
            rows = held.setdefault(key(row), [])
            if op in ("+I", "+U"):
                rows.append(row)
            else:
                rows.remove(row)
            touched.add(key(row))
        new = dict(out)
        for k in touched:
            value = result(k, held[k]) if held[k] else None
            if value is None:
                new.pop(k, None)
            else:
                new[k] = value
        log.append(emitted(out, new))
        out = new
    return log


def table_after(log: list[list[Change]], key: Callable[[tuple[Any, ...]], Any]) -> list[dict]:
    """An upsert sink's table after each bundle: +I/+U upsert, -D delete, -U skipped."""
    table: dict[Any, tuple[Any, ...]] = {}
    tables = []
    for changes in log:
        for op, row in changes:
            if op in ("+I", "+U"):
                table[key(row)] = row
            elif op == "-D":
                del table[key(row)]
        tables.append(dict(table))
    return tables


# ---------------------------------------------------------------- the CDC job's shape

CDC = """\
SET max_parallelism = 16;
CREATE SOURCE changes (customer_id BIGINT, country STRING, updated_at TIMESTAMP, score BIGINT)
  WITH (connector = 'files', path = 'in', format = 'json');
CREATE SINK per_country WITH (connector = 'files', path = 'out/per_country', format = 'json',
  mode = 'update', key = 'country');
INSERT INTO per_country
  FROM changes
  |> TOP 1 BY updated_at DESC PER customer_id
  |> KEY BY country
  |> AGGREGATE count(*) AS customers, sum(customer_id) AS ids, max(customer_id) AS top,
       min(updated_at) AS first_change, avg(score) AS score;
"""


def change(customer: int, country: str, minute: float, score: int) -> Row:
    return {"customer_id": customer, "country": country, "updated_at": at(minute), "score": score}


CDC_BATCHES: list[list[Row]] = [
    [
        change(1, "FR", 0, 10),
        change(2, "FR", 1, 20),
        change(3, "DE", 2, 30),
        change(4, "FR", 3, 40),
    ],
    # 4 leaves FR (FR's max retracted to 2), 1's older change is ignored, US is new
    [change(4, "DE", 10, 41), change(1, "DE", -1, 11), change(5, "US", 11, 50)],
    # two changes of 5 in one micro-batch: only the latest counts; US empties (-D)
    [change(5, "DE", 20, 51), change(5, "FR", 19, 52)],
    # FR empties, US comes back; 3's score changes: DE's row is updated (-U/+U)
    [change(1, "US", 30, 12), change(2, "US", 31, 21), change(3, "DE", 32, 33)],
]


def cdc_top(batches: list[list[Row]]) -> list[list[Change]]:
    """TOP 1 BY updated_at DESC PER customer_id, rows as (id, country, time, score)."""
    rows = [
        [(r["customer_id"], r["country"], r["updated_at"], r["score"]) for r in b] for b in batches
    ]
    return flink_changelog(rows, lambda r: r[0], lambda k, held: max(held, key=lambda r: r[2]))


def cdc_aggregate(top: list[list[Change]]) -> list[list[Change]]:
    """The AGGREGATE over the TOP's changelog, per country."""

    def result(country: Any, held: list[Any]) -> tuple[Any, ...]:
        scores = [r[3] for r in held]
        return (
            country,
            len(held),
            sum(r[0] for r in held),
            max(r[0] for r in held),
            minutes(min(r[2] for r in held)),
            sum(scores) / len(scores),
        )

    return flink_changelog(top, lambda r: r[1], result, signed=True)


def test_the_python_semantics_on_hand_worked_rows() -> None:
    """The reference itself: FR's max retracted to 2, US deleted then back, DE updated."""
    log = cdc_aggregate(cdc_top(CDC_BATCHES))
    tables = table_after(log, lambda r: r[0])
    assert tables[0] == {"FR": ("FR", 3, 7, 4, 0.0, 70 / 3), "DE": ("DE", 1, 3, 3, 2.0, 30.0)}
    assert tables[1]["FR"] == ("FR", 2, 3, 2, 0.0, 15.0)
    assert set(tables[2]) == {"FR", "DE"} and ("-D", ("US", 1, 5, 5, 11.0, 50.0)) in log[2]
    assert set(tables[3]) == {"DE", "US"}
    assert [op for op, row in log[3] if row[0] == "DE"] == ["-U", "+U"]


# ---------------------------------------------------------------- the processor's changelog


class _State:
    """Spark's ValueState, as the processor uses it: one row of one BINARY value."""

    def __init__(self) -> None:
        self.value: tuple[bytes] | None = None

    def get(self) -> tuple[bytes] | None:
        return self.value

    def update(self, value: tuple[bytes]) -> None:
        self.value = value

    def clear(self) -> None:
        self.value = None


class _Handle:
    def __init__(self) -> None:
        self.state = _State()

    def getValueState(self, name: str, schema: object) -> _State:
        return self.state


def _run(operator: Any, batches: list[list[Any]]) -> Iterator[list[Change]]:
    """The operator's emitted changes per micro-batch, all rows in one key group."""
    operator.init(_Handle())
    for batch in batches:
        yield sorted(
            (
                (row["__flowc_op"], tuple(row)[:-1])
                for row in operator.handleInputRows((0,), iter(batch), None)
            ),
            key=repr,
        )


def test_the_processors_emit_flinks_changelog(monkeypatch: pytest.MonkeyPatch) -> None:
    """ChangelogOperator's own output, the TOP's and then the AGGREGATE's over it, equals
    Flink's mini-batch changelog micro-batch by micro-batch: -U/+U for a changed row, -D
    for a country emptied, nothing for an unchanged one, state kept between batches."""
    sql = pytest.importorskip("pyspark.sql")
    monkeypatch.setattr(generated_runtime, "Row", sql.Row, raising=False)
    monkeypatch.setattr(generated_runtime, "StructType", lambda fields: None, raising=False)
    monkeypatch.setattr(generated_runtime, "StructField", lambda *a: None, raising=False)
    monkeypatch.setattr(generated_runtime, "BinaryType", lambda: None, raising=False)
    columns = ["customer_id", "country", "updated_at", "score"]
    source = sql.Row(*columns, "__flowc_order")
    top = generated_runtime.ChangelogOperator(
        "top", ["customer_id"], columns, [], 1, True, False, "__flowc_order", "g", False
    )
    rows = [
        [
            source(
                r["customer_id"], r["country"], r["updated_at"], r["score"], {"t": r["updated_at"]}
            )
            for r in b
        ]
        for b in CDC_BATCHES
    ]
    top_log = list(_run(top, rows))
    assert top_log == [sorted(b, key=repr) for b in cdc_top(CDC_BATCHES)]
    changelog = sql.Row(*columns, "__flowc_op")
    aggregate = generated_runtime.ChangelogOperator(
        "aggregate",
        ["country"],
        columns,
        [
            ("count", None),
            ("sum", "customer_id"),
            ("max", "customer_id"),
            ("min", "updated_at"),
            ("avg", "score"),
        ],
        0,
        False,
        False,
        "__flowc_order",
        "g",
    )
    changes = [[changelog(*row, op) for op, row in b] for b in top_log]
    got = list(_run(aggregate, changes))
    wanted = cdc_aggregate(cdc_top(CDC_BATCHES))
    as_minutes = [
        sorted(((op, (*r[:4], minutes(r[4]), r[5])) for op, r in b), key=repr) for b in got
    ]
    assert as_minutes == [sorted(b, key=repr) for b in wanted]
    assert any(op == "-D" for op, _ in as_minutes[2]) and any(op == "-U" for op, _ in as_minutes[1])


# ---------------------------------------------------------------- on Spark


def run_batches(
    tmp_path: Path, program: str, batches: list[list[Row]], after: Callable[[int], None]
) -> None:
    """Each micro-batch its own run (a restart) on the same checkpoint."""
    flow = tmp_path / "job.flow"
    flow.write_text(program, encoding="utf-8")
    for index, batch in enumerate(batches):
        write_batch(tmp_path / "in", index, batch)
        job = flowc.compile(program, str(flow), for_spark=True)
        report = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
        assert all(q.error is None for q in report.queries), report
        after(index)


def run_as_batch(tmp_path: Path, program: str) -> None:
    flow = tmp_path / "batch.flow"
    text = "SET execution.mode = batch;\n" + program.replace("out/", "batch_out/")
    flow.write_text(text, encoding="utf-8")
    job = flowc.compile(text, str(flow), for_spark=True)
    assert job.spark_plan.batch and not job.spark_plan.changelog_processors
    report = run_job(job, master="local[2]", out=io.StringIO())
    assert all(q.error is None for q in report.queries), report


def cdc_rows(rows: list[dict[str, Any]]) -> dict[str, tuple[Any, ...]]:
    return {
        r["country"]: (
            r["country"],
            r["customers"],
            r["ids"],
            r["top"],
            minutes(r["first_change"]),
            r["score"],
        )
        for r in rows
    }


def test_the_cdc_shape_on_spark_across_micro_batches_and_restarts(
    spark: Any, tmp_path: Path
) -> None:
    """TOP 1 ... PER customer_id, then count, sum, max, min and avg per country: the upsert
    table after each of four micro-batches (each a restart) equals Flink's semantics',
    and batch mode over the whole input ends with the same table."""
    job = flowc.compile(CDC, "job.flow", for_spark=True)
    text = "\n".join(job.spark_plan.to_text())
    assert "updating: line 8: TOP runs as a transformWithState processor" in text
    assert "updating: line 10: AGGREGATE runs as a transformWithState processor" in text
    assert job.spark_plan.processors and job.spark_plan.state_store.backend == "rocksdb"
    assert "changelog=True" in generate_pyspark(job)
    wanted = table_after(cdc_aggregate(cdc_top(CDC_BATCHES)), lambda r: r[0])
    seen: list[dict[str, tuple[Any, ...]]] = []

    def check(index: int) -> None:
        seen.append(cdc_rows(upsert_table(tmp_path / "out" / "per_country")))
        assert seen[-1] == wanted[index], index

    run_batches(tmp_path, CDC, CDC_BATCHES, check)
    assert "US" not in seen[2] and "FR" not in seen[3]
    run_as_batch(tmp_path, CDC)
    assert cdc_rows(upsert_table(tmp_path / "batch_out" / "per_country")) == wanted[-1]


# ---------------------------------------------------------------- an aggregate of an aggregate

NESTED = """\
SET max_parallelism = 16;
CREATE SOURCE s (k BIGINT, v BIGINT) WITH (connector = 'files', path = 'in', format = 'json');
CREATE SINK by_count WITH (connector = 'files', path = 'out/by_count', format = 'json',
  mode = 'update', key = 'n');
INSERT INTO by_count
  FROM s
  |> KEY BY k
  |> AGGREGATE count(*) AS n, max(v) AS top
  |> KEY BY n
  |> AGGREGATE count(*) AS keys, sum(top) AS total, min(top) AS low, max(top) AS high;
"""

NESTED_BATCHES: list[list[Row]] = [
    [{"k": 1, "v": 5}, {"k": 2, "v": 7}, {"k": 3, "v": 1}],
    [{"k": 1, "v": 2}],  # n = 1 loses 5; n = 2 is new
    [{"k": 2, "v": 9}, {"k": 3, "v": 0}, {"k": 4, "v": 3}],  # n = 1's max 7 retracted
    [{"k": 4, "v": 4}, {"k": 1, "v": 1}],  # n = 1 empties (-D), n = 3 is new
]


def nested_log(batches: list[list[Row]]) -> list[list[Change]]:
    first = flink_changelog(
        [[(r["k"], r["v"]) for r in b] for b in batches],
        lambda r: r[0],
        lambda k, held: (k, len(held), max(v for _, v in held)),
    )
    return flink_changelog(
        first,
        lambda r: r[1],
        lambda n, held: (
            n,
            len(held),
            sum(r[2] for r in held),
            min(r[2] for r in held),
            max(r[2] for r in held),
        ),
        signed=True,
    )


def nested_rows(rows: list[dict[str, Any]]) -> dict[int, tuple[Any, ...]]:
    return {r["n"]: (r["n"], r["keys"], r["total"], r["low"], r["high"]) for r in rows}


#: NESTED as Flink SQL writes it: a GROUP BY over a GROUP BY subquery (a view ending with
#: the subquery's SELECT list, then the outer one).
NESTED_FORMS = {
    "pipe": NESTED,
    "sql": NESTED.split("INSERT INTO")[0]
    + """\
INSERT INTO by_count
SELECT n, COUNT(*) AS keys, SUM(top) AS total, MIN(top) AS low, MAX(top) AS high
FROM (SELECT k, COUNT(*) AS n, MAX(v) AS top FROM s GROUP BY k) GROUP BY n;
""",
}


@pytest.mark.parametrize("form", sorted(NESTED_FORMS))
def test_an_aggregate_of_an_aggregate_on_spark(spark: Any, tmp_path: Path, form: str) -> None:
    """Counts per key, then keys per count, in the pipe form and in SQL: the table after
    each micro-batch (each a restart) equals Flink's semantics' (a max retracted, a count
    emptied and deleted), and batch mode ends with the same table."""
    program = NESTED_FORMS[form]
    wanted = table_after(nested_log(NESTED_BATCHES), lambda r: r[0])
    assert wanted[2][1] == (1, 1, 3, 3, 3) and 1 not in wanted[3]

    def check(index: int) -> None:
        assert nested_rows(upsert_table(tmp_path / "out" / "by_count")) == wanted[index], index

    run_batches(tmp_path, program, NESTED_BATCHES, check)
    run_as_batch(tmp_path, program)
    assert nested_rows(upsert_table(tmp_path / "batch_out" / "by_count")) == wanted[-1]


# ---------------------------------------------------------------- a TOP over an aggregate

TOP_OVER_UPDATES = """\
SET max_parallelism = 16;
CREATE SOURCE bids (category STRING, seller STRING, price BIGINT)
  WITH (connector = 'files', path = 'in', format = 'json');
CREATE SINK top_sellers WITH (connector = 'files', path = 'out/top_sellers', format = 'json',
  mode = 'update', key = 'category, seller');
CREATE SINK top_ranks WITH (connector = 'files', path = 'out/top_ranks', format = 'json',
  mode = 'update', key = 'category, rn');
INSERT INTO top_sellers
  FROM bids
  |> KEY BY category, seller
  |> AGGREGATE sum(price) AS total
  |> TOP 2 BY total DESC PER category;
INSERT INTO top_ranks
  FROM bids
  |> KEY BY category, seller
  |> AGGREGATE sum(price) AS total
  |> TOP 2 BY total DESC PER category AS rn;
"""


def bid(category: str, seller: str, price: int) -> Row:
    return {"category": category, "seller": seller, "price": price}


TOP_BATCHES: list[list[Row]] = [
    [bid("a", "s1", 10), bid("a", "s2", 20), bid("a", "s3", 30), bid("b", "t1", 5)],
    # s1 enters a's top (s2 leaves); t2 ties t1 (both in b's top, t2 first)
    [bid("a", "s1", 25), bid("a", "s4", 5), bid("b", "t2", 5)],
    # s3 falls out (s2 comes back); t3 pushes t1 out
    [bid("a", "s3", -29), bid("b", "t3", 7), bid("b", "t1", -5)],
    # s2 ties s1 at 35 (s2 first); t3 falls to 0 and ties t1 (t3 first)
    [bid("a", "s2", 15), bid("b", "t3", -7), bid("a", "s4", 1)],
]


def top_tables(batches: list[list[Row]]) -> list[tuple[dict[Any, Any], dict[Any, Any]]]:
    """After each micro-batch, each category's top 2 sellers by total over every bid so
    far (ties by the seller, greater first: flowc's order), as the two sinks hold them:
    keyed by (category, seller), and by (category, rank)."""
    totals: dict[tuple[str, str], int] = {}
    tables = []
    for batch in batches:
        for r in batch:
            key = (r["category"], r["seller"])
            totals[key] = totals.get(key, 0) + r["price"]
        by_seller: dict[Any, Any] = {}
        by_rank: dict[Any, Any] = {}
        for category in {c for c, _ in totals}:
            ranked = sorted(
                ((t, s) for (c, s), t in totals.items() if c == category), reverse=True
            )[:2]
            for rank, (total, seller) in enumerate(ranked, start=1):
                by_seller[(category, seller)] = total
                by_rank[(category, rank)] = (seller, total)
        tables.append((by_seller, by_rank))
    return tables


def test_a_top_over_an_aggregate_on_spark(spark: Any, tmp_path: Path) -> None:
    """TOP 2 ... PER category over sums per (category, seller), without and with its rank:
    the upsert tables after each of four micro-batches (each a restart) are each
    category's top 2 of the bids so far (rows entering, leaving, tied), and batch mode
    ends with the same tables."""
    job = flowc.compile(TOP_OVER_UPDATES, "job.flow", for_spark=True)
    text = "\n".join(job.spark_plan.to_text())
    assert "updating: line 12: TOP runs as a transformWithState processor" in text
    assert "by category, seller (+I entered" in text and "rank by rank" in text
    wanted = top_tables(TOP_BATCHES)
    assert wanted[3][1][("a", 1)] == ("s2", 35) and wanted[3][1][("b", 2)] == ("t3", 0)

    def check(index: int) -> None:
        assert top_sink_tables(tmp_path / "out") == wanted[index], index

    run_batches(tmp_path, TOP_OVER_UPDATES, TOP_BATCHES, check)
    run_as_batch(tmp_path, TOP_OVER_UPDATES)
    assert top_sink_tables(tmp_path / "batch_out") == wanted[-1]


def top_sink_tables(folder: Path, seller: str = "seller") -> tuple[dict[Any, Any], dict[Any, Any]]:
    """The two sinks' tables as :func:`top_tables` gives them (``seller``: the column
    naming the seller in top_sellers)."""
    by_seller = upsert_table(folder / "top_sellers")
    by_rank = upsert_table(folder / "top_ranks")
    return (
        {(r["category"], r[seller]): r["total"] for r in by_seller},
        {(r["category"], r["rn"]): (r["seller"], r["total"]) for r in by_rank},
    )


#: Flink's SQL forms of TOP_OVER_UPDATES (ROW_NUMBER over a GROUP BY, lowered through
#: views and SELECTs): a subquery with the rank left out, a CREATE VIEW renaming the
#: seller (the sink keyed by the new name), a WITH CTE with the rank selected.
TOP_OVER_UPDATES_SQL = {
    "subquery": TOP_OVER_UPDATES.split("INSERT INTO")[0]
    + """\
INSERT INTO top_sellers
SELECT category, seller, total FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY category ORDER BY total DESC) AS rn
  FROM (SELECT category, seller, SUM(price) AS total FROM bids GROUP BY category, seller)
) WHERE rn <= 2;
INSERT INTO top_ranks
WITH sums AS (SELECT category, seller, SUM(price) AS total FROM bids GROUP BY category, seller)
SELECT category, rn, seller, total FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY category ORDER BY total DESC) AS rn FROM sums
) WHERE rn <= 2;
""",
    "view": TOP_OVER_UPDATES.split("INSERT INTO")[0].replace(
        "key = 'category, seller'", "key = 'category, who'"
    )
    + """\
CREATE VIEW totals AS
  SELECT category, seller AS who, SUM(price) AS total FROM bids GROUP BY category, seller;
INSERT INTO top_sellers
SELECT category, who, total FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY category ORDER BY total DESC) AS rn FROM totals
) WHERE rn <= 2;
INSERT INTO top_ranks
SELECT category, rn, seller, total FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY category ORDER BY total DESC) AS rn
  FROM (SELECT category, seller, SUM(price) AS total FROM bids GROUP BY category, seller)
) WHERE rn <= 2;
""",
}


@pytest.mark.parametrize("form", sorted(TOP_OVER_UPDATES_SQL))
def test_a_top_over_a_group_by_in_sql_on_spark(form: str, spark: Any, tmp_path: Path) -> None:
    """The SQL forms run as the pipe form does (the AGGREGATE and the TOP as processors,
    through the views and SELECTs they lower to): the same tables after each of four
    restarted micro-batches, and batch mode ending with the last."""
    program = TOP_OVER_UPDATES_SQL[form]
    seller = "who" if form == "view" else "seller"
    job = flowc.compile(program, "job.flow", for_spark=True)
    text = "\n".join(job.spark_plan.to_text())
    assert f"by category, {seller} (+I entered" in text and "rank by rank" in text
    wanted = top_tables(TOP_BATCHES)

    def check(index: int) -> None:
        assert top_sink_tables(tmp_path / "out", seller) == wanted[index], index

    run_batches(tmp_path, program, TOP_BATCHES, check)
    run_as_batch(tmp_path, program)
    assert top_sink_tables(tmp_path / "batch_out", seller) == wanted[-1]


LATERAL_OVER_SUMS = """\
SET sql.dialect = 'flink';
SET max_parallelism = 16;
CREATE TABLE bids (category STRING, seller STRING, price BIGINT) WITH ('connector' = 'datagen');
CREATE TEMPORARY VIEW totals AS
  SELECT category, seller, SUM(price) AS total FROM bids GROUP BY category, seller;
CREATE TABLE o (category STRING, seller STRING, total BIGINT,
  PRIMARY KEY (category, seller) NOT ENFORCED)
  WITH ('connector' = 'files', 'path' = 'out/o', 'format' = 'json');
INSERT INTO o SELECT category, seller, total
FROM (SELECT DISTINCT category FROM totals) c,
  LATERAL (SELECT seller, total FROM totals WHERE category = c.category
    ORDER BY total DESC LIMIT 2);
"""


def test_the_lateral_form_runs_as_the_row_number_form() -> None:
    """Flink's LATERAL Top-N over the view of a GROUP BY lowers to the steps of the
    ROW_NUMBER form (tested on Spark above): the same processors, the TOP's changes by
    row (category, seller), and the same generated calls."""

    def processors(program: str) -> tuple[list[tuple[Any, ...]], list[str]]:
        job = flowc.compile(program, "job.flow", for_spark=True)
        found = [
            (c.kind, c.keys, c.consumer, c.row_keys)
            for _, c in sorted(job.spark_plan.changelog_processors.items())
        ]
        calls = [  # each call but its DataFrame's variable
            re.sub(r"\w+\.groupBy", "df.groupBy", line.split("= changelog_operator(")[1]).split(
                ", ", 1
            )[1]
            for line in generate_pyspark(job).splitlines()
            if "= changelog_operator(" in line
        ]
        return found, calls

    subquery = TOP_OVER_UPDATES_SQL["subquery"]
    one_insert = subquery[: subquery.index("INSERT INTO top_ranks")]
    lateral = processors(LATERAL_OVER_SUMS)
    assert lateral == processors(one_insert)
    assert [p[3] for p in lateral[0]] == [(), ("category", "seller")]


# ---------------------------------------------------------------- the example, on its data

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def latest_per_country(files: list[Path]) -> dict[str, tuple[int, float]]:
    """Customers per country of each customer's latest change, and the latest change
    among them, in plain Python (the final result, whatever the micro-batches)."""
    latest: dict[int, tuple[str, str]] = {}
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            kept = latest.get(row["customer_id"])
            if kept is None or row["updated_at"] > kept[0]:
                latest[row["customer_id"]] = (row["updated_at"], row["country"])
    out: dict[str, tuple[int, float]] = {}
    for at_text, country in latest.values():
        count, last = out.get(country, (0, float("-inf")))
        out[country] = (count + 1, max(last, minutes(at_text)))
    return out


def test_the_streaming_cdc_example_on_its_shipped_data(spark: Any, tmp_path: Path) -> None:
    """examples/customers_per_country_streaming.flow: one micro-batch per shipped file, the
    first two in one run and the third after a restart on the same checkpoint, then in
    batch mode: both tables equal plain Python's latest-row-per-customer counts."""
    import shutil

    data = EXAMPLES / "data" / "customer_changes"
    files = sorted(data.glob("*.json"))
    assert len(files) == 3
    program = (EXAMPLES / "customers_per_country_streaming.flow").read_text(encoding="utf-8")
    flow = tmp_path / "customers_per_country_streaming.flow"
    flow.write_text(program, encoding="utf-8")
    folder = tmp_path / "data" / "customer_changes"
    for index, rounds in enumerate((files[:2], files[2:])):
        for path in rounds:
            write_batch(
                folder, files.index(path), [json.loads(x) for x in path.read_text().splitlines()]
            )
        job = flowc.compile(program, str(flow), for_spark=True)
        assert len(job.spark_plan.changelog_processors) == 2
        report = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
        assert all(q.error is None for q in report.queries), report
        table = {
            r["country"]: (r["customers"], minutes(r["last_change"]))
            for r in upsert_table(tmp_path / "out" / "customers_per_country")
        }
        assert table == latest_per_country(files[:2] if index == 0 else files), index
    shutil.rmtree(tmp_path / "out")
    run_as_batch(tmp_path, program)
    table = {
        r["country"]: (r["customers"], minutes(r["last_change"]))
        for r in upsert_table(tmp_path / "batch_out" / "customers_per_country")
    }
    assert table == latest_per_country(files)


# ---------------------------------------------------------------- Flink itself

FLINK_FINAL = """
import json, sys
from pyflink.table import EnvironmentSettings, TableEnvironment
rows = json.loads(sys.argv[1])
t = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
t.get_config().set("table.exec.mini-batch.enabled", "true")
t.get_config().set("table.exec.mini-batch.allow-latency", "1 s")
t.get_config().set("table.exec.mini-batch.size", "1000")
t.get_config().set("parallelism.default", "1")
values = ",".join(
    f"({r[0]}, '{r[1]}', TIMESTAMP '{r[2].replace('T', ' ')}', CAST({r[3]} AS BIGINT))"
    for r in rows
)
t.execute_sql(
    f"CREATE TEMPORARY VIEW ch AS SELECT * FROM (VALUES {values}) AS v(customer_id, country, "
    "updated_at, score)"
)
result = t.execute_sql(
    "SELECT country, count(*), sum(customer_id), max(customer_id), min(updated_at), "
    "avg(CAST(score AS DOUBLE)) FROM (SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION "
    "BY customer_id ORDER BY updated_at DESC) AS rn FROM ch) WHERE rn = 1) GROUP BY country"
)
table = {}
with result.collect() as changes:
    for row in changes:
        kind = str(row.get_row_kind())
        if kind in ("+I", "+U"):
            table[row[0]] = [row[0], row[1], row[2], row[3], row[4].isoformat(), row[5]]
        elif kind == "-D":
            del table[row[0]]
print(json.dumps(sorted(table.values())))
"""


@requires_flink
def test_flink_ends_the_cdc_shape_with_the_pythons_table() -> None:
    """Flink 2.3 (mini-batch on) running the CDC shape over the same changes, in one go,
    applying its changelog as an upsert sink does, ends with the table the Python
    semantics give (the tests above hold flowc's to that one)."""
    rows = [
        [r["customer_id"], r["country"], r["updated_at"], r["score"]]
        for batch in CDC_BATCHES
        for r in batch
    ]
    flink = ask_flink(FLINK_FINAL, rows)
    wanted = table_after(cdc_aggregate(cdc_top(CDC_BATCHES)), lambda r: r[0])[-1]
    got = {r[0]: (r[0], r[1], r[2], r[3], minutes(r[4]), r[5]) for r in flink}
    assert got == wanted


def test_an_aggregate_of_an_aggregate_into_postgres(
    spark: Any,
    tmp_path: Path,
    postgres: dict[str, Any],
) -> None:
    """The same into PostgreSQL: after each micro-batch (each a restart) the table equals
    Flink's semantics', a count emptied deleted in the micro-batch's transaction."""
    sink = (
        f"CREATE SINK by_count WITH (connector = 'postgres', host = '{postgres['host']}', "
        f"port = {postgres['port']}, database = '{postgres['dbname']}', user = 'postgres', "
        "table = 'by_count', key = 'n', mode = 'update');\n"
    )
    start, end = NESTED.index("CREATE SINK"), NESTED.index("INSERT INTO")
    program = NESTED[:start] + sink + NESTED[end:]
    wanted = table_after(nested_log(NESTED_BATCHES), lambda r: r[0])

    def check(index: int) -> None:
        import psycopg

        with psycopg.connect(**postgres) as conn:
            rows = conn.execute("SELECT n, keys, total, low, high FROM by_count").fetchall()
        assert {r[0]: tuple(r) for r in rows} == wanted[index], index

    run_batches(tmp_path, program, NESTED_BATCHES, check)
