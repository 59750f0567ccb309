"""A regular inner JOIN of an append-only stream with a CDC source's changes on Spark
(issue 28, item 1: "a JOIN emits the retractions Flink emits"; docs/language.md, "Updating
pipelines on Spark").

Orders (insert-only) JOIN customers (debezium-json) ON the customer's id, into an upsert
sink keyed by the order and its customer: the JOIN runs as the ChangelogJoin processor.
Five micro-batches (orders and envelope files with increasing modification times, one of
each per micro-batch) in three runs on the same checkpoint (two restarts), against plain
Python: Flink 2.3's join changelog (asked of it: an input row's kind passes to each
joined row, so an order gives +I per live customer row, a customer's +I/-U/+U/-D the same
kind per stored order) applied by key as an upsert sink applies it (+I/+U upsert, -D
delete, -U skipped). Covered: an order before its customer exists, a customer update
changing its joined rows, a customer delete, a re-insert, a filtered order.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc.errorcodes import Code
from flowc.runtime.run import run_job
from tests.helpers.compile_errors import compile_errors
from tests.helpers.fake_state import Handle
from tests.helpers.files import upsert_table

PROGRAM = """\
SET max_parallelism = 8;
CREATE SOURCE orders (order_id BIGINT, customer_id BIGINT, amount BIGINT)
  WITH (connector = 'files', path = 'in_o', format = 'json', max_files_per_trigger = 1);
CREATE SOURCE customers (id BIGINT, name STRING, country STRING)
  WITH (connector = 'files', path = 'in_c', format = 'debezium-json',
        max_files_per_trigger = 1);
CREATE SINK enriched WITH (connector = 'files', path = 'out/enriched', format = 'json',
  mode = 'update', key = 'order_id, customer_id');
INSERT INTO enriched FROM orders
  |> WHERE amount > 0
  |> JOIN customers ON orders.customer_id = customers.id
  |> SELECT order_id, orders.customer_id, amount, customers.name, country;
"""

Envelope = tuple[str, dict[str, Any] | None, dict[str, Any] | None]
Order = tuple[int, int, int]


def customer(i: int, name: str, country: str) -> dict[str, Any]:
    return {"id": i, "name": name, "country": country}


#: Per micro-batch: the orders file's rows and the customers file's envelopes.
BATCHES: list[tuple[list[Order], list[Envelope]]] = [
    ([(1, 10, 5), (2, 20, 7)], [("c", None, customer(10, "ann", "FR"))]),  # 2: no customer yet
    ([(3, 10, 9)], [("r", None, customer(20, "bob", "US"))]),  # order 2 joins now
    ([(4, 30, 1)], [("u", customer(10, "ann", "FR"), customer(10, "ann", "DE"))]),
    ([(5, 20, -3)], [("d", customer(20, "bob", "US"), None)]),  # order 5 filtered out
    (
        [(6, 20, 4)],
        [
            ("c", None, customer(20, "bea", "UK")),  # re-inserted: orders 2 and 6 join
            ("u", customer(10, "ann", "DE"), customer(10, "anne", "DE")),
        ],
    ),
]

#: The micro-batches each run reads: restarts after the second and the fourth (the delete).
RUNS = [2, 4, 5]


def write_batch(root: Path, index: int, orders: list[Order], envelopes: list[Envelope]) -> None:
    """One orders file and one customers file, both modified after the batch before's."""
    stamp = 1_700_000_000 + index * 10
    for folder, lines in (
        (root / "in_o", [{"order_id": o, "customer_id": c, "amount": a} for o, c, a in orders]),
        (root / "in_c", [{"before": b, "after": a, "op": op} for op, b, a in envelopes]),
    ):
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"part-{index:03d}.json"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
        os.utime(path, (stamp, stamp))


def flink_table(batches: list[tuple[list[Order], list[Envelope]]]) -> dict[tuple[int, int], Any]:
    """Flink's join changelog, record by record (each batch's orders, then its customer
    changes), applied by the sink's key (order_id, customer_id) as an upsert sink does."""
    orders: list[Order] = []
    customers: list[dict[str, Any]] = []
    table: dict[tuple[int, int], tuple[int, int, int, str, str]] = {}

    def apply(kind: str, order: Order, row: dict[str, Any]) -> None:
        key = (order[0], order[1])
        if kind in ("+I", "+U"):
            table[key] = (*order, row["name"], row["country"])
        elif kind == "-D":
            table.pop(key, None)

    for batch_orders, envelopes in batches:
        for order in batch_orders:
            if order[2] > 0:
                orders.append(order)
                for row in customers:
                    if row["id"] == order[1]:
                        apply("+I", order, row)
        for op, before, after in envelopes:
            changes = {"c": [("+I", after)], "r": [("+I", after)],
                       "u": [("-U", before), ("+U", after)], "d": [("-D", before)]}[op]  # fmt: skip
            for kind, row in changes:
                assert row is not None
                if kind in ("-U", "-D"):
                    customers.remove(row)
                else:
                    customers.append(row)
                for order in orders:
                    if order[1] == row["id"]:
                        apply(kind, order, row)
    return table


def test_a_join_with_a_cdc_source_across_micro_batches_and_restarts(
    spark: Any, tmp_path: Path
) -> None:
    flow = tmp_path / "job.flow"
    flow.write_text(PROGRAM, encoding="utf-8")
    job = flowc.compile(PROGRAM, str(flow), for_spark=True)
    (processor,) = job.spark_plan.changelog_processors.values()
    assert processor.kind == "JOIN" and processor.row_keys == ("order_id", "customer_id")
    assert "JOIN runs as a transformWithState processor" in processor.to_text()
    wanted = [flink_table(BATCHES[:upto]) for upto in RUNS]
    assert (2, 20) not in flink_table(BATCHES[:1]) and (2, 20) in wanted[0]  # sanity
    assert wanted[1][1, 10][4] == "DE" and (2, 20) not in wanted[1]
    assert wanted[2][2, 20][3] == "bea" and (5, 20) not in wanted[2]
    done = 0
    for run, upto in enumerate(RUNS):
        for index in range(done, upto):
            write_batch(tmp_path, index, *BATCHES[index])
        done = upto
        job = flowc.compile(PROGRAM, str(flow), for_spark=True)
        report = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
        assert all(q.error is None for q in report.queries), report
        rows = upsert_table(tmp_path / "out" / "enriched")
        got = {
            (r["order_id"], r["customer_id"]): (
                r["order_id"],
                r["customer_id"],
                r["amount"],
                r["name"],
                r["country"],
            )
            for r in rows
        }
        assert len(got) == len(rows), rows
        assert got == wanted[run], run


@pytest.mark.parametrize(
    ("old", "new", "code", "line"),
    [
        # a sink key without the join's key: its rows could sit in two processor groups
        ("key = 'order_id, customer_id'", "key = 'order_id'", Code.E0742, 9),
        # a sink that cannot apply updates and deletes
        ("mode = 'update', key = 'order_id, customer_id'", "mode = 'append'", Code.E0743, 9),
        # an ON other than equalities of one column of each side, at the JOIN
        (
            "ON orders.customer_id = customers.id",
            "ON orders.customer_id = customers.id AND amount > customers.id",
            Code.E0299,
            11,
        ),
        # a WHERE after the JOIN could drop a +U and keep its -U
        ("|> SELECT order_id", "|> WHERE amount > 1\n  |> SELECT order_id", Code.E0299, 11),
        # one relation's columns after the JOIN: the processor's rows have none
        (
            "SELECT order_id, orders.customer_id, amount, customers.name, country",
            "SELECT customers.*, order_id, customer_id",
            Code.E0299,
            11,
        ),
        # a join key of another type
        ("customer_id BIGINT", "customer_id INT", Code.E0299, 11),
    ],
)
def test_other_shapes_are_refused_where_they_are_written(
    old: str, new: str, code: Code, line: int
) -> None:
    """Each variation of the program is refused before anything runs, at its place."""
    assert old in PROGRAM
    errors = compile_errors(PROGRAM.replace(old, new))
    assert [(c, n) for c, n, _ in errors] == [(code.value, line)], errors


def test_batch_mode_refuses_it() -> None:
    codes = compile_errors("SET execution.mode = batch;\n" + PROGRAM)
    assert any(c == Code.E0299.value for c, _, _ in codes)


def test_the_join_processor_emits_flinks_kinds_and_refuses_a_key_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ChangelogJoin's own handleInputRows in plain Python, micro-batch by micro-batch
    (state in a stand-in for Spark's): the kinds Flink 2.3's join gives each change (an
    order before its customer: nothing; the customer's +I: +I; its update: -U then +U; its
    delete: -D), a NULL join key meeting nothing, two joined rows of one sink key failing."""
    from pyspark.sql import Row as SparkRow
    from pyspark.sql import types

    from flowc.spark import generated_runtime

    monkeypatch.setattr(generated_runtime, "Row", SparkRow, raising=False)
    for name in ("StructType", "StructField", "BinaryType"):
        monkeypatch.setattr(generated_runtime, name, getattr(types, name), raising=False)
    names = ["order_id", "customer_id", "id", "name"]
    join = generated_runtime.ChangelogJoin(
        names[:2], names[2:], ["customer_id"], ["id"], [0, 1], names
    )
    join.init(Handle())
    given = SparkRow(*names, "__flowc_side", "__flowc_op")

    def batch(*changes: tuple[int, str, tuple[Any, ...]]) -> list[tuple[str, tuple[Any, ...]]]:
        rows = [
            given(*((*values, None, None) if side == 0 else (None, None, *values)), side, op)
            for side, op, values in changes
        ]
        out = join.handleInputRows((0,), iter(rows), None)  # type: ignore[arg-type]
        return [(r["__flowc_op"], tuple(r)[:-1]) for r in out]

    order, ann, bob = (1, 10), (10, "ann"), (10, "bob")
    assert batch((0, "+I", order)) == []
    assert batch((1, "+I", ann)) == [("+I", order + ann)]
    assert batch((1, "-U", ann), (1, "+U", bob)) == [("-U", order + ann), ("+U", order + bob)]
    assert batch((0, "+I", (2, None))) == []
    assert batch((1, "-D", bob)) == [("-D", order + bob)]
    with pytest.raises(ValueError, match="FLOWC_JOIN_KEY_TWICE"):
        batch((1, "+I", ann), (1, "+I", bob))
