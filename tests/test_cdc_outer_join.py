"""Outer JOINs over changes, and JOINs of two CDC sources, on Spark (docs/language.md, "A
JOIN over a CDC source's changes"): the ChangelogJoin processor against Flink 2.3's join
changelog computed record by record in plain Python (tests/helpers/cdc_join_flink.py,
its rules asked of Flink: a preserved row without a match is emitted padded with NULLs,
retracted when a match arrives, back when the last match goes).

- real Spark: a LEFT JOIN of an append-only stream with a CDC source, an inner and a FULL
  JOIN of two CDC sources; five micro-batches (input files with increasing modification
  times, one per source per micro-batch) in three runs on one checkpoint (restarts after
  the second and the fourth); the upsert table after each run against Flink's;
- the processor's own ``handleInputRows`` in plain Python over random changes of both
  sides in random micro-batches, for each JOIN kind, against the same;
- the refusals: a sink key without the preserved side's join column (E0742).
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
from flowc.spark.codegen import generate_pyspark
from flowc.state import Verdict, compare, describe_state
from tests.helpers.cdc_join_flink import (
    Record,
    Values,
    envelope_records,
    flink_join,
    materialized,
    upserted,
)
from tests.helpers.compile_errors import compile_errors
from tests.helpers.fake_state import Handle
from tests.helpers.files import upsert_table

Envelope = tuple[str, Values | None, Values | None]

CUSTOMERS = ("id", "name", "country")
ORDERS = ("order_id", "customer_id", "amount")
PAYMENTS = ("pid", "cid", "amount")

PROGRAM = """\
SET max_parallelism = 8;
CREATE SOURCE {stream} ({stream_columns})
  WITH (connector = 'files', path = 'in_l', format = '{stream_format}',
        max_files_per_trigger = 1);
CREATE SOURCE customers (id BIGINT, name STRING, country STRING)
  WITH (connector = 'files', path = 'in_r', format = 'debezium-json',
        max_files_per_trigger = 1);
CREATE SINK joined WITH (connector = 'files', path = 'out/joined', format = 'json',
  mode = 'update', key = '{key}');
INSERT INTO joined FROM {stream}
  |> WHERE amount > 0
  |> {kind} JOIN customers ON {stream}.{join_column} = customers.id
  |> SELECT {columns};
"""


def c(i: int, name: str, country: str) -> Values:
    return (i, name, country)


#: Per micro-batch: the stream's envelopes (orders: creates only) and the customers'.
ORDER_BATCHES: list[tuple[list[Envelope], list[Envelope]]] = [
    # order 2 before its customer, order 3 with a NULL join key
    ([("c", None, (1, 10, 5)), ("c", None, (2, 20, 7)), ("c", None, (3, None, 1))],
     [("c", None, c(10, "ann", "FR"))]),
    ([("c", None, (4, 10, 2))], [("r", None, c(20, "bob", "US"))]),  # order 2 joins now
    ([("c", None, (5, 30, 1))], [("u", c(10, "ann", "FR"), c(10, "ann", "DE"))]),
    ([("c", None, (6, 20, -3))], [("d", c(20, "bob", "US"), None)]),  # 2 padded again
    ([("c", None, (7, 20, 4))],
     [("c", None, c(20, "bea", "UK")), ("u", c(10, "ann", "DE"), c(10, "anne", "DE"))]),
]  # fmt: skip

#: Per micro-batch: the payments' envelopes and the customers'.
PAYMENT_BATCHES: list[tuple[list[Envelope], list[Envelope]]] = [
    ([("c", None, (1, 10, 5)), ("c", None, (2, 20, 7)), ("c", None, (3, None, 1))],
     [("c", None, c(10, "ann", "FR"))]),
    ([("u", (1, 10, 5), (1, 10, 6)), ("c", None, (4, 10, 2))],
     [("r", None, c(20, "bob", "US")), ("c", None, c(30, "cy", "IT"))]),
    ([("u", (2, 20, 7), (2, 30, 7)), ("d", (4, 10, 2), None)],  # payment 2 moves to cy
     [("u", c(10, "ann", "FR"), c(10, "anne", "FR"))]),
    ([("d", (3, None, 1), None), ("c", None, (5, 40, 1)), ("c", None, (8, 20, -1))],
     [("d", c(20, "bob", "US"), None)]),
    ([("c", None, (6, 20, 3))],
     [("c", None, c(20, "bea", "UK")), ("d", c(30, "cy", "IT"), None)]),  # 2 padded again
]  # fmt: skip

#: The micro-batches each run reads: restarts after the second and the fourth.
RUNS = [2, 4, 5]

#: name: (stream, its columns, its batches, JOIN kind, sink key, preserved sides)
CASES: dict[str, tuple[str, tuple[str, ...], list[Any], str, str, tuple[bool, bool]]] = {
    "left_append_with_cdc": (
        "orders",
        ORDERS,
        ORDER_BATCHES,
        "LEFT",
        "order_id, customer_id",
        (True, False),
    ),
    "inner_cdc_with_cdc": ("payments", PAYMENTS, PAYMENT_BATCHES, "", "pid, cid", (False, False)),
    "full_cdc_with_cdc": (
        "payments",
        PAYMENTS,
        PAYMENT_BATCHES,
        "FULL",
        "pid, cid, id",
        (True, True),
    ),
}


def program(case: str) -> str:
    stream, columns, batches, kind, key, _ = CASES[case]
    cdc = batches is PAYMENT_BATCHES
    return PROGRAM.format(
        stream=stream,
        stream_columns=", ".join(f"{n} BIGINT" for n in columns),
        stream_format="debezium-json" if cdc else "json",
        key=key,
        kind=kind,
        join_column=columns[1],
        columns=", ".join((*columns, *CUSTOMERS)),
    )


def write_batch(root: Path, index: int, columns: tuple[str, ...], cdc: bool, batch: Any) -> None:
    """The stream's file and the customers' file, both modified after the batch before's."""
    stamp = 1_700_000_000 + index * 10
    stream, customers = batch

    def record(names: tuple[str, ...], values: Values | None) -> dict[str, Any] | None:
        return None if values is None else dict(zip(names, values, strict=True))

    if cdc:
        left = [{"before": record(columns, b), "after": record(columns, a), "op": op}
                for op, b, a in stream]  # fmt: skip
    else:
        left = [record(columns, a) for _, _, a in stream]
    right = [{"before": record(CUSTOMERS, b), "after": record(CUSTOMERS, a), "op": op}
             for op, b, a in customers]  # fmt: skip
    for folder, lines in ((root / "in_l", left), (root / "in_r", right)):
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"part-{index:03d}.json"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
        os.utime(path, (stamp, stamp))


def flink_table(case: str, upto: int) -> dict[Values, Values]:
    """Flink's join changelog over the first ``upto`` micro-batches (each batch's stream
    records, then its customers', the stream's filtered by WHERE amount > 0), as its
    SinkUpsertMaterializer keeps it by the sink's key."""
    _, columns, batches, _, key, preserved = CASES[case]
    records: list[Record] = []
    for stream, customers in batches[:upto]:
        records += [r for r in envelope_records(0, stream) if int(str(r[2][2])) > 0]
        records += envelope_records(1, customers)
    names = (*columns, *CUSTOMERS)
    at = [names.index(k.strip()) for k in key.split(",")]
    return materialized(flink_join(records, ([1], [0]), (3, 3), preserved), at)


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_join_over_changes_across_micro_batches_and_restarts(
    spark: Any, tmp_path: Path, case: str
) -> None:
    stream, columns, batches, _, key, preserved = CASES[case]
    text = program(case)
    flow = tmp_path / "job.flow"
    flow.write_text(text, encoding="utf-8")
    job = flowc.compile(text, str(flow), for_spark=True)
    (processor,) = job.spark_plan.changelog_processors.values()
    assert processor.kind == "JOIN"
    outer = f", {preserved!r})" if any(preserved) else ")"
    assert f"{processor.key_groups}{outer}" in generate_pyspark(job)
    wanted = [flink_table(case, upto) for upto in RUNS]
    padded = [row for table in wanted for row in table.values() if None in row]
    assert bool(padded) == any(preserved)  # an outer case has padded rows to check
    names = (*columns, *CUSTOMERS)
    at = [names.index(k.strip()) for k in key.split(",")]
    done = 0
    for run, upto in enumerate(RUNS):
        for index in range(done, upto):
            write_batch(tmp_path, index, columns, batches is PAYMENT_BATCHES, batches[index])
        done = upto
        job = flowc.compile(text, str(flow), for_spark=True)
        report = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
        assert all(q.error is None for q in report.queries), report
        notes = [held.note for q in report.queries for held in q.state]
        assert any("none waits for a watermark" in n for n in notes), notes
        assert not any("outer join" in n for n in notes), notes
        rows = [tuple(r.get(n) for n in names) for r in upsert_table(tmp_path / "out" / "joined")]
        got = {tuple(row[i] for i in at): row for row in rows}
        assert len(got) == len(rows), rows
        assert got == wanted[run], (run, stream)


def processor(preserved: tuple[bool, bool], monkeypatch: pytest.MonkeyPatch) -> Any:
    """A ChangelogJoin of (lid, lkey, lv) with (rid, rkey, rv) on lkey = rkey, its state in
    memory (tests/helpers/fake_state.py), as Spark would call it."""
    from pyspark.sql import Row as SparkRow
    from pyspark.sql import types

    from flowc.spark import generated_runtime

    monkeypatch.setattr(generated_runtime, "Row", SparkRow, raising=False)
    for name in ("StructType", "StructField", "BinaryType"):
        monkeypatch.setattr(generated_runtime, name, getattr(types, name), raising=False)
    names = ["lid", "lkey", "lv", "rid", "rkey", "rv"]
    at = KEYS[preserved]
    join = generated_runtime.ChangelogJoin(
        names[:3], names[3:], ["lkey"], ["rkey"], at, names, preserved
    )
    join.init(Handle())
    return join


#: The sink key per JOIN kind (positions in the joined row): each side's id and the
#: preserved sides' join columns.
KEYS = {
    (False, False): [0, 3, 1],
    (True, False): [0, 1, 3],
    (False, True): [0, 3, 4],
    (True, True): [0, 1, 3, 4],
}


def random_changes(rng: random.Random, cdc: tuple[bool, bool]) -> list[list[Record]]:
    """Micro-batches of changes of both sides: rows with unique ids, join keys 1, 2 or
    NULL; a CDC side's rows are also updated (value or join key) and deleted."""
    live: tuple[list[Values], list[Values]] = ([], [])
    batches: list[list[Record]] = []
    next_id = 0
    for _ in range(rng.randint(1, 6)):
        batch: list[Record] = []
        for _ in range(rng.randint(0, 6)):
            side = rng.randint(0, 1)
            rows = live[side]
            action = rng.random()
            if not cdc[side] or not rows or action < 0.5:
                next_id += 1
                row = (next_id, rng.choice([1, 2, None]), rng.randint(0, 2))
                rows.append(row)
                batch.append((side, "+I", row))
            elif action < 0.8:
                old = rows.pop(rng.randrange(len(rows)))
                new = (old[0], rng.choice([1, 2, None]), rng.randint(0, 2))
                rows.append(new)
                batch += [(side, "-U", old), (side, "+U", new)]
            else:
                old = rows.pop(rng.randrange(len(rows)))
                batch.append((side, "-D", old))
        batches.append(batch)
    return batches


@pytest.mark.parametrize("preserved", sorted(KEYS))
@pytest.mark.parametrize("cdc", [(False, True), (True, False), (True, True)])
def test_the_processor_ends_with_flinks_table(
    preserved: tuple[bool, bool], cdc: tuple[bool, bool], monkeypatch: pytest.MonkeyPatch
) -> None:
    """ChangelogJoin's own handleInputRows, micro-batch by micro-batch, over random
    changes; its changelog applied as an upsert sink applies it gives, after every
    micro-batch, Flink's table (its changelog record by record, materialized by key)."""
    for seed in range(60):
        rng = random.Random(seed)
        join = processor(preserved, monkeypatch)
        given = join_row()
        at = KEYS[preserved]
        ours: list[tuple[str, Values]] = []
        records: list[Record] = []
        for batch in random_changes(rng, cdc):
            rows = [
                given(*((*values, None, None, None) if side == 0 else (None,) * 3 + values),
                      side, kind)
                for side, kind, values in batch
            ]  # fmt: skip
            out = join.handleInputRows((0,), iter(rows), None)
            ours += [(r["__flowc_op"], tuple(r)[:-1]) for r in out]
            records += batch
            flink = flink_join(records, ([1], [1]), (3, 3), preserved)
            assert upserted(ours, at) == materialized(flink, at), (seed, records)


def join_row() -> Any:
    from pyspark.sql import Row as SparkRow

    return SparkRow("lid", "lkey", "lv", "rid", "rkey", "rv", "__flowc_side", "__flowc_op")


@pytest.mark.parametrize(
    ("case", "key"),
    [
        # a LEFT JOIN's padded rows have a NULL customer id: they would share a key
        ("left_append_with_cdc", "order_id, id"),
        # a FULL JOIN's key holds both sides' join columns
        ("full_cdc_with_cdc", "pid, cid"),
        ("full_cdc_with_cdc", "pid, id"),
        # an inner JOIN's, one of them
        ("inner_cdc_with_cdc", "pid"),
    ],
)
def test_a_key_without_the_preserved_join_column_is_refused(case: str, key: str) -> None:
    """E0742 at the INSERT, before anything runs."""
    text = program(case).replace(f"key = '{CASES[case][4]}'", f"key = '{key}'")
    errors = compile_errors(text)
    assert [(c, n) for c, n, _ in errors] == [(Code.E0742.value, 10)], errors


def test_w0040_on_a_join_over_changes_says_what_applies() -> None:
    """A JOIN over changes has no time to bound its state by: W0040's hint says so, not
    "bound the time in ON" (E0299 over changes)."""
    job = flowc.compile(program("left_append_with_cdc"), "job.flow", for_spark=True)
    (warning,) = [d for d in job.diagnostics if d.code is Code.W0040]
    assert "JOIN over changes" in warning.message
    assert warning.help is not None and "E0299" in warning.help and "BETWEEN" not in warning.help


@pytest.mark.parametrize(
    ("old", "new"),
    [("JOIN", "LEFT JOIN"), ("LEFT JOIN", "JOIN"), ("LEFT JOIN", "FULL JOIN")],
)
def test_another_join_kind_on_the_same_checkpoint_is_refused(old: str, new: str) -> None:
    """The state holds each side's rows, not what was emitted: under another kind the
    padded rows would be retracted unwritten, or never written (flowc.state.compare)."""
    text = program("full_cdc_with_cdc")
    before = text.replace("|> FULL JOIN", f"|> {old}")
    after = text.replace("|> FULL JOIN", f"|> {new}")
    manifests = [
        describe_state(flowc.compile(t, "job.flow", for_spark=True)) for t in (before, after)
    ]
    comparison = compare(*manifests)
    messages = [f.message for _, f in comparison.findings()]
    assert comparison.verdict is Verdict.INCOMPATIBLE, messages
    assert any("outer_join" in m for m in messages), messages
    same = compare(manifests[1], manifests[1])
    assert same.verdict is not Verdict.INCOMPATIBLE
