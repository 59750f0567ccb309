"""A JOIN consuming an AGGREGATE's updates on Spark (Flink's regular join over a GROUP BY;
docs/language.md, "A JOIN over an AGGREGATE's updates"): the AGGREGATE runs as a producer
ChangelogOperator emitting Flink's changelog, the JOIN as the ChangelogJoin consuming it.

Real Spark, five micro-batches (input files with increasing modification times, one per
source per micro-batch) in three runs on one checkpoint (restarts after the second and
the fourth), for the pipe form with the AGGREGATE in a view JOINed by a CDC source, the
AGGREGATE as the INSERT's own stream LEFT JOIN a CDC source, and the SQL form (a GROUP BY
subquery) with an append-only side; each upsert table against plain Python computing
Flink's semantics record by record (the GroupAggregate's -U/+U per order, then the join:
tests/helpers/cdc_join_flink.py, whose rules tests/test_cdc_against_flink.py holds to
Flink 2.3's collected changelog), materialized by the sink's key. And the refusals.
"""

from __future__ import annotations

import io
import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc.errorcodes import Code
from flowc.runtime.run import run_job
from flowc.state import Verdict, compare, describe_state
from tests.helpers.cdc_join_flink import (
    Record,
    Values,
    envelope_records,
    flink_join,
    group_aggregate,
    materialized,
    upserted,
)
from tests.helpers.compile_errors import compile_errors, edited
from tests.helpers.fake_state import Handle
from tests.helpers.files import upsert_table

Envelope = tuple[str, Values | None, Values | None]
Order = tuple[int, int | None, int]

HEAD = """\
SET max_parallelism = 8;
CREATE SOURCE orders (order_id BIGINT, customer_id BIGINT, amount BIGINT)
  WITH (connector = 'files', path = 'in_o', format = 'json', max_files_per_trigger = 1);
CREATE SOURCE customers (id BIGINT, name STRING)
  WITH (connector = 'files', path = 'in_c', format = '{customers}',
        max_files_per_trigger = 1);
CREATE SINK totals WITH (connector = 'files', path = 'out/totals', format = 'json',
  mode = 'update', key = '{key}');
"""

#: name: (customers' format, sink key, the program's rest, JOIN kind's preserved sides,
#: whether the AGGREGATE is the JOIN's left side, the sink's columns)
CASES: dict[str, tuple[str, str, str, tuple[bool, bool], bool, tuple[str, ...]]] = {
    "cdc_customers_join_a_view": (
        "debezium-json",
        "id",
        """CREATE VIEW order_totals AS FROM orders
  |> WHERE amount > 0
  |> KEY BY customer_id
  |> AGGREGATE sum(amount) AS total, count(*) AS n, max(amount) AS biggest;
INSERT INTO totals FROM customers
  |> JOIN order_totals ON customers.id = order_totals.customer_id
  |> SELECT id, name, total, n, biggest;
""",
        (False, False),
        False,
        ("id", "name", "total", "n", "biggest"),
    ),
    "aggregate_left_join_cdc_customers": (
        "debezium-json",
        "customer_id",
        """INSERT INTO totals FROM orders
  |> KEY BY customer_id
  |> AGGREGATE sum(amount) AS total, count(*) AS n, max(amount) AS biggest
  |> LEFT JOIN customers ON customer_id = customers.id
  |> SELECT customer_id, total, n, biggest, name;
""",
        (True, False),
        True,
        ("customer_id", "total", "n", "biggest", "name"),
    ),
    "sql_form_append_customers": (
        "json",
        "id",
        """INSERT INTO totals SELECT c.id, c.name, t.total, t.n, t.biggest FROM customers c
  JOIN (SELECT customer_id, SUM(amount) AS total, COUNT(*) AS n, MAX(amount) AS biggest
        FROM orders WHERE amount > 0 GROUP BY customer_id) t
  ON c.id = t.customer_id;
""",
        (False, False),
        False,
        ("id", "name", "total", "n", "biggest"),
    ),
    "two_aggregates_full_join": (
        "json",
        "customer_id, cid",
        """CREATE VIEW order_stats AS FROM orders
  |> WHERE amount > 3 AND customer_id IS NOT NULL
  |> KEY BY customer_id
  |> AGGREGATE sum(amount) AS big_total, count(*) AS big_n, max(amount) AS big_max
  |> RENAME customer_id AS cid;
INSERT INTO totals FROM orders
  |> KEY BY customer_id
  |> AGGREGATE sum(amount) AS total, count(*) AS n, max(amount) AS biggest
  |> FULL JOIN order_stats ON customer_id = cid
  |> SELECT customer_id, cid, total, big_total, big_n;
""",
        (True, True),
        True,
        ("customer_id", "cid", "total", "big_total", "big_n"),
    ),
}


def program(case: str) -> str:
    customers, key, rest, *_ = CASES[case]
    return HEAD.format(customers=customers, key=key) + rest


def customer(i: int, name: str) -> Values:
    return (i, name)


#: Per micro-batch: the orders and the customers' envelopes (an append-only customers
#: source reads each customer's first create only: customer_batches).
BATCHES: list[tuple[list[Order], list[Envelope]]] = [
    # customer 20's orders before the customer; order 3 without a customer id
    ([(1, 10, 5), (2, 20, 7), (3, None, 4)], [("c", None, customer(10, "ann"))]),
    ([(4, 10, 2), (5, 30, -1)], [("c", None, customer(20, "bob"))]),  # 5 filtered (or not)
    ([(6, 20, 1), (7, 10, 9)], [("u", customer(10, "ann"), customer(10, "anne"))]),
    ([(8, 40, 3)], [("d", customer(20, "bob"), None), ("c", None, customer(30, "cy"))]),
    (
        [(9, 20, 2), (10, 30, 6)],
        [("c", None, customer(20, "bea")), ("c", None, customer(40, "dan"))],
    ),
]

#: The micro-batches each run reads: restarts after the second and the fourth.
RUNS = [2, 4, 5]


def customer_batches(case: str) -> list[list[Envelope]]:
    """The customers' envelopes each micro-batch; an append-only source gets each id once
    (its creates, less the re-insert after a delete), as its rows are inserts only."""
    cdc = CASES[case][0] == "debezium-json"
    out = []
    seen: set[object] = set()
    for _, envelopes in BATCHES:
        kept = []
        for envelope in envelopes:
            if cdc:
                kept.append(envelope)
            elif envelope[0] == "c" and envelope[2] is not None and envelope[2][0] not in seen:
                seen.add(envelope[2][0])
                kept.append(envelope)
        out.append(kept)
    return out


def write_batch(root: Path, case: str, index: int) -> None:
    stamp = 1_700_000_000 + index * 10
    orders = [
        dict(zip(("order_id", "customer_id", "amount"), o, strict=True)) for o in BATCHES[index][0]
    ]

    def record(values: Values | None) -> dict[str, Any] | None:
        return None if values is None else dict(zip(("id", "name"), values, strict=True))

    envelopes = customer_batches(case)[index]
    if CASES[case][0] == "debezium-json":
        customers = [{"before": record(b), "after": record(a), "op": op} for op, b, a in envelopes]
    else:
        customers = [record(a) for _, _, a in envelopes]
    for folder, lines in ((root / "in_o", orders), (root / "in_c", customers)):
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"part-{index:03d}.json"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
        os.utime(path, (stamp, stamp))


def flink_table(case: str, upto: int) -> dict[Values, Values]:
    """Flink's changelog of the INSERT over the first ``upto`` micro-batches (each batch's
    orders, then its customers, or the second AGGREGATE's changes), materialized by the
    sink's key; rows in the sink's columns."""
    _, key, rest, preserved, aggregate_left, columns = CASES[case]
    filtered = "amount > 0" in rest
    side = 0 if aggregate_left else 1
    held: dict[object, list[int]] = {}
    big: dict[object, list[int]] = {}
    records: list[Record] = []
    for (orders, _), envelopes in zip(BATCHES[:upto], customer_batches(case), strict=False):
        kept = [o for o in orders if o[2] > 0 or not filtered]
        records += group_aggregate([(o[1], o[2]) for o in kept], held, side)
        if "order_stats" in rest:  # the other side: the orders over 3 with a customer id
            over = [(o[1], o[2]) for o in orders if o[2] > 3 and o[1] is not None]
            records += group_aggregate(over, big, 1 - side)
        else:
            records += envelope_records(1 - side, envelopes)
    aggregated = ("customer_id", "total", "n", "biggest")
    if "order_stats" in rest:
        changes = flink_join(records, ([0], [0]), (4, 4), preserved)
        names = (*aggregated, "cid", "big_total", "big_n", "big_max")
    elif aggregate_left:
        changes = flink_join(records, ([0], [0]), (4, 2), preserved)
        names = (*aggregated, "id", "name")
    else:
        changes = flink_join(records, ([0], [0]), (2, 4), preserved)
        names = ("id", "name", *aggregated)
    projected = [(kind, tuple(row[names.index(c)] for c in columns)) for kind, row in changes]
    return materialized(projected, [columns.index(k.strip()) for k in key.split(",")])


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_join_over_an_aggregates_updates_across_micro_batches_and_restarts(
    spark: Any, tmp_path: Path, case: str
) -> None:
    _, key, _, preserved, _, columns = CASES[case]
    text = program(case)
    flow = tmp_path / "job.flow"
    flow.write_text(text, encoding="utf-8")
    job = flowc.compile(text, str(flow), for_spark=True)
    processors = sorted(job.spark_plan.changelog_processors.values(), key=lambda p: p.kind)
    producers = 2 if "order_stats" in CASES[case][2] else 1
    assert [(p.kind, p.consumer) for p in processors] == [("AGGREGATE", False)] * producers + [
        ("JOIN", True)
    ]
    assert "because the JOIN on line" in processors[0].to_text()
    wanted = [flink_table(case, upto) for upto in RUNS]
    assert any(None in row for row in wanted[-1].values()) == any(preserved)
    assert wanted[0] != wanted[1] != wanted[2]  # each run changes the table
    done = 0
    for run, upto in enumerate(RUNS):
        for index in range(done, upto):
            write_batch(tmp_path, case, index)
        done = upto
        job = flowc.compile(text, str(flow), for_spark=True)
        report = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
        assert all(q.error is None for q in report.queries), report
        rows = [tuple(r.get(c) for c in columns) for r in upsert_table(tmp_path / "out" / "totals")]
        at = [columns.index(k.strip()) for k in key.split(",")]
        got = {tuple(row[i] for i in at): row for row in rows}
        assert len(got) == len(rows), rows
        assert got == wanted[run], (case, run)


#: An append-only customers source, in place of the CDC one.
APPEND = ("format = 'debezium-json'", "format = 'json'")


@pytest.mark.parametrize(
    ("case", "edits", "code", "line"),
    [
        # a call the producer's processor does not compute
        (
            "aggregate_left_join_cdc_customers",
            [("max(amount) AS biggest", "max(amount * 2) AS biggest")],
            Code.E0741,
            11,
        ),
        # a sink key without the preserved side's join column
        (
            "aggregate_left_join_cdc_customers",
            [("key = 'customer_id'", "key = 'name'")],
            Code.E0742,
            9,
        ),
        # a sink that cannot apply updates and deletes
        (
            "cdc_customers_join_a_view",
            [("mode = 'update', key = 'id'", "mode = 'append'")],
            Code.E0748,
            13,
        ),
        # an AGGREGATE without keys (global) stays refused: at the JOIN
        (
            "cdc_customers_join_a_view",
            [
                APPEND,
                (
                    "|> KEY BY customer_id\n  |> AGGREGATE sum(amount) AS total",
                    "|> AGGREGATE max(customer_id) AS customer_id, sum(amount) AS total",
                ),
            ],
            Code.E0702,
            13,
        ),
        # so does an AGGREGATE over a TOP's updates before the JOIN
        (
            "cdc_customers_join_a_view",
            [APPEND, ("AS FROM orders", "AS FROM orders |> TOP 1 BY amount DESC PER order_id")],
            Code.E0702,
            14,
        ),
        # and, with a CDC side, an AGGREGATE over an AGGREGATE's updates: at the JOIN
        (
            "aggregate_left_join_cdc_customers",
            [
                (
                    "|> LEFT JOIN",
                    "|> KEY BY customer_id, total, n, biggest\n"
                    "  |> AGGREGATE count(*) AS c |> LEFT JOIN",
                )
            ],
            Code.E0299,
            13,
        ),
        # an AGGREGATE in a view another INSERT reads too: its changes would be shared
        (
            "cdc_customers_join_a_view",
            [
                APPEND,
                (
                    "CREATE SINK totals",
                    "CREATE SINK other WITH (connector = 'memory');\nCREATE SINK totals",
                ),
                (
                    "|> SELECT id, name, total, n, biggest;",
                    "|> SELECT id, name, total, n, biggest;\nINSERT INTO other FROM order_totals;",
                ),
            ],
            Code.E0702,
            15,
        ),
    ],
)
def test_other_shapes_are_refused_where_they_are_written(
    case: str, edits: list[tuple[str, str]], code: Code, line: int
) -> None:
    """Each variation is refused before anything runs, at its place."""
    errors = compile_errors(edited(program(case), edits))
    assert (code.value, line) in [(c, n) for c, n, _ in errors], errors


def test_the_state_manifest_holds_the_producer_and_the_join() -> None:
    """Both processors' state, with the producer's role, and the JOIN's row keys (the
    sink's key), which a later job must keep."""
    text = program("aggregate_left_join_cdc_customers")
    manifest = describe_state(flowc.compile(text, "job.flow", for_spark=True))
    processors = {
        op["processor"]["name"]: {p["name"]: p["value"] for p in op["processor"]["parameters"]}
        for op in manifest.to_json()["queries"][0]["operators"]
        if op.get("processor")
    }
    assert processors["ChangelogOperator"]["role"] == "AGGREGATE that produces a changelog"
    assert processors["ChangelogJoin"]["row_keys"] == "customer_id"
    assert processors["ChangelogJoin"]["outer_join"] == "LEFT"
    rekeyed = text.replace("key = 'customer_id'", "key = 'customer_id, name'")
    other = describe_state(flowc.compile(rekeyed, "job.flow", for_spark=True))
    comparison = compare(manifest, other)
    messages = [f.message for _, f in comparison.findings()]
    assert comparison.verdict is Verdict.INCOMPATIBLE, messages
    assert any("row_keys" in m for m in messages), messages
    assert compare(manifest, manifest).verdict is not Verdict.INCOMPATIBLE


#: Per JOIN kind (the AGGREGATE on the left, customers on the right): the preserved sides
#: and the sink key's positions in the joined row (customer_id, total, n, biggest, id,
#: name): the preserved sides' join columns, both for FULL.
PROCESSOR_KINDS = {
    "inner": ((False, False), [4]),
    "left": ((True, False), [0]),
    "right": ((False, True), [4]),
    "full": ((True, True), [0, 4]),
}


def random_batches(rng: random.Random) -> list[list[tuple[str, Values]]]:
    """Micro-batches of orders ("o", (customer_id, amount)) and customers' changes
    ("c", kind and row): a consistent log (one row per id at a time)."""
    live: dict[int, Values] = {}
    batches = []
    for _ in range(rng.randint(1, 6)):
        batch: list[tuple[str, Values]] = []
        for _ in range(rng.randint(0, 6)):
            if rng.random() < 0.6:
                batch.append(("o", (rng.choice([1, 2, 3, None]), rng.randint(-2, 5))))
                continue
            i = rng.randint(1, 3)
            if i not in live:
                live[i] = (i, rng.choice("abc"))
                batch.append(("c", ("+I", live[i])))
            elif rng.random() < 0.6:
                old, live[i] = live[i], (i, rng.choice("abc"))
                batch += [("c", ("-U", old)), ("c", ("+U", live[i]))]
            else:
                batch.append(("c", ("-D", live.pop(i))))
        batches.append(batch)
    return batches


@pytest.mark.parametrize("kind", sorted(PROCESSOR_KINDS))
def test_the_processors_end_each_micro_batch_with_flinks_table(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The producer ChangelogOperator (sum, count, max per customer_id) into the
    ChangelogJoin with a CDC customers side, both run by their own handleInputRows in
    plain Python (state in memory, tests/helpers/fake_state.py) over random micro-batches:
    the join's changelog applied as an upsert sink applies it is, after every micro-batch,
    Flink's table (its GroupAggregate and join record by record, materialized by key)."""
    from pyspark.sql import Row as SparkRow
    from pyspark.sql import types

    from flowc.spark import generated_runtime

    monkeypatch.setattr(generated_runtime, "Row", SparkRow, raising=False)
    for name in ("StructType", "StructField", "BinaryType"):
        monkeypatch.setattr(generated_runtime, name, getattr(types, name), raising=False)
    preserved, at = PROCESSOR_KINDS[kind]
    left = ["customer_id", "total", "n", "biggest"]
    right = ["id", "name"]
    order = SparkRow("customer_id", "amount")
    side_row = SparkRow(*left, *right, "__flowc_side", "__flowc_op")
    for seed in range(40):
        rng = random.Random(seed)
        producer = generated_runtime.ChangelogOperator(
            "aggregate", ["customer_id"], ["customer_id", "amount"],
            [("sum", "amount"), ("count", None), ("max", "amount")],
            0, False, False, "__flowc_order", "__flowc_key_group", False,
        )  # fmt: skip
        join = generated_runtime.ChangelogJoin(
            left, right, ["customer_id"], ["id"], at, left + right, preserved
        )
        producer.init(Handle())
        join.init(Handle())
        ours: list[tuple[str, Values]] = []
        records: list[Record] = []
        held: dict[object, list[int]] = {}
        for batch in random_batches(rng):
            orders = [values for what, values in batch if what == "o"]
            changes = [values for what, values in batch if what == "c"]
            emitted = list(producer.handleInputRows((0,), iter([order(*o) for o in orders]), None))
            rows = [side_row(*tuple(r)[:-1], None, None, 0, r["__flowc_op"]) for r in emitted]
            rows += [side_row(None, None, None, None, *v, 1, k) for k, v in changes]
            out = join.handleInputRows((0,), iter(rows), None)
            ours += [(r["__flowc_op"], tuple(r)[:-1]) for r in out]
            records += group_aggregate(orders, held, 0)  # type: ignore[arg-type]
            records += [(1, k, v) for k, v in changes]
            flink = flink_join(records, ([0], [0]), (4, 2), preserved)
            assert upserted(ours, at) == materialized(flink, at), (seed, batch)
