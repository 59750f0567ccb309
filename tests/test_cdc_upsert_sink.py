"""A CDC source's changes straight into an upsert sink on Spark (issue 28: "replicate a
table"; docs/language.md, "Change-data capture input: debezium-json").

A `debezium-json` source with a PRIMARY KEY, through row-wise steps, into files sinks in
update mode keyed by that key. Asked of Flink 2.3 (EXPLAIN CHANGELOG_MODE, an upsert sink
keyed by the source's key): without a WHERE it drops the -U rows right after the scan
(DropUpdateBefore) and the sink upserts +I/+U and deletes -D by key; with a WHERE its Calc
passes each -U to the sink, which deletes its key (Flink's upsert sinks take UPDATE_BEFORE
as a delete); each change row is filtered on its own. Four micro-batches, one envelope file
each with increasing modification times, each its own run on the same checkpoint (a
restart); after each, both tables equal the envelopes applied in plain Python. A sink
keyed otherwise, or a source without a PRIMARY KEY, is refused (Flink refuses both).
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc.diagnostics import CompileError
from flowc.errorcodes import Code
from flowc.runtime.run import run_job
from flowc.spark.codegen import generate_pyspark
from tests.helpers.cdc_envelopes import write_envelopes as write_file
from tests.helpers.files import upsert_table
from tests.helpers.flink import ask_flink, requires_flink

SOURCE = """\
CREATE SOURCE customers (id BIGINT, name STRING, country STRING, PRIMARY KEY (id) NOT ENFORCED)
  WITH (connector = 'files', path = 'in', format = 'debezium-json');
"""

PROGRAM = (
    SOURCE
    + """\
CREATE SINK filtered WITH (connector = 'files', path = 'out/filtered', format = 'json',
  mode = 'update', key = 'id');
CREATE SINK copied WITH (connector = 'files', path = 'out/copied', format = 'json',
  mode = 'update', key = 'id');
INSERT INTO filtered FROM customers
  |> WHERE country <> 'XX'
  |> SELECT id, upper(name) AS name, country;
INSERT INTO copied FROM customers |> KEY BY id |> RENAME name AS full_name;
"""
)

Row = dict[str, Any]
Envelope = tuple[str, Row | None, Row | None]


def customer(i: int, name: str, country: str) -> Row:
    return {"id": i, "name": name, "country": country}


BATCHES: list[list[Envelope]] = [
    [
        ("c", None, customer(1, "ann", "DE")),
        ("c", None, customer(2, "bob", "FR")),
        ("c", None, customer(3, "cy", "XX")),  # filtered out
        ("r", None, customer(4, "dee", "US")),
    ],
    [
        ("u", customer(1, "ann", "DE"), customer(1, "anna", "DE")),  # the row changes
        ("d", customer(2, "bob", "FR"), None),  # a delete
        ("d", customer(99, "zed", "DE"), None),  # a delete of a key never inserted
        ("u", customer(4, "dee", "US"), customer(4, "dee", "XX")),  # leaves the filter
        ("u", customer(3, "cy", "XX"), customer(3, "cy", "FR")),  # enters the filter
    ],
    [
        ("c", None, customer(2, "bob", "PT")),  # re-inserted after its delete
        ("c", None, customer(5, "eve", "DE")),
        ("u", customer(5, "eve", "DE"), customer(6, "eve", "DE")),  # the key changes
        ("d", customer(1, "anna", "DE"), None),  # deleted and inserted again in one batch
        ("c", None, customer(1, "ann", "AT")),
    ],
    [
        ("d", customer(6, "eve", "DE"), None),
        ("u", customer(2, "bob", "PT"), customer(2, "bobby", "PT")),
        ("d", customer(4, "dee", "XX"), None),  # filtered out: the filtered table keeps none
        ("u", customer(3, "cy", "FR"), customer(3, "cy", "FR")),  # an update changing nothing
    ],
]


def flink_changes(envelope: Envelope) -> list[tuple[str, Row]]:
    """Flink's debezium-json rows of one envelope, in order."""
    op, before, after = envelope
    rows = {"c": [("+I", after)], "r": [("+I", after)], "u": [("-U", before), ("+U", after)],
            "d": [("-D", before)]}[op]  # fmt: skip
    return [(kind, row) for kind, row in rows if row is not None]


def applied(
    batches: list[list[Envelope]],
    keep: Callable[[Row], bool],
    shape: Callable[[Row], Row],
    before_deletes: bool,
) -> list[dict[int, Row]]:
    """The upsert table after each batch, as Flink's sink leaves it: each change row
    filtered on its own, then +I/+U upserted by id, -D deleted by id, and -U deleted by id
    where the sink receives it (a WHERE between) or dropped (DropUpdateBefore)."""
    table: dict[int, Row] = {}
    out = []
    for batch in batches:
        for envelope in batch:
            for kind, row in flink_changes(envelope):
                if not keep(row):
                    continue
                if kind in ("+I", "+U"):
                    table[row["id"]] = shape(row)
                elif kind == "-D" or before_deletes:
                    table.pop(row["id"], None)
        out.append(dict(table))
    return out


def test_cdc_changes_into_upsert_sinks_across_micro_batches_and_restarts(
    spark: Any, tmp_path: Path
) -> None:
    flow = tmp_path / "job.flow"
    flow.write_text(PROGRAM, encoding="utf-8")
    filtered = applied(
        BATCHES,
        lambda r: r["country"] != "XX",
        lambda r: {**r, "name": r["name"].upper()},
        before_deletes=True,
    )
    copied = applied(
        BATCHES,
        lambda r: True,
        lambda r: {"id": r["id"], "full_name": r["name"], "country": r["country"]},
        before_deletes=False,
    )
    # The cases the batches are for: a key left behind by an update changing the key
    # where Flink drops -U, deleted where it passes it; a row leaving the filter deleted.
    assert 5 in copied[2] and 5 not in filtered[2] and 6 in filtered[2]
    assert 4 not in filtered[1] and copied[1][4]["country"] == "XX" and 3 in filtered[1]
    assert 2 not in copied[1] and copied[2][2]["country"] == "PT" and 99 not in copied[1]
    assert copied[2][1]["country"] == "AT" and 4 not in copied[3]
    for index, batch in enumerate(BATCHES):
        write_file(tmp_path / "in", index, batch)
        job = flowc.compile(PROGRAM, str(flow), for_spark=True)
        report = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
        assert all(q.error is None for q in report.queries), report
        for name, wanted in (("filtered", filtered), ("copied", copied)):
            rows = upsert_table(tmp_path / "out" / name)
            assert len(rows) == len({r["id"] for r in rows}), (name, index, rows)
            assert {r["id"]: r for r in rows} == wanted[index], (name, index)


def test_cdc_changes_into_postgres_one_file_per_micro_batch(
    spark: Any, tmp_path: Path, postgres: dict[str, Any]
) -> None:
    """The same changes into a postgres upsert sink behind a WHERE: two runs on one
    checkpoint (a restart), each reading two files as two micro-batches, oldest first."""
    import psycopg

    program = (
        SOURCE.replace(
            "format = 'debezium-json'", "format = 'debezium-json', max_files_per_trigger = 1"
        )
        + f"CREATE SINK pg WITH (connector = 'postgres', host = '{postgres['host']}', "
        f"port = {postgres['port']}, database = '{postgres['dbname']}', user = 'postgres', "
        "table = 'cdc_customers', key = 'id', mode = 'update');\n"
        "INSERT INTO pg FROM customers |> WHERE country <> 'XX' "
        "|> SELECT id, upper(name) AS name, country;\n"
    )
    flow = tmp_path / "job.flow"
    flow.write_text(program, encoding="utf-8")
    wanted = applied(
        BATCHES,
        lambda r: r["country"] != "XX",
        lambda r: {**r, "name": r["name"].upper()},
        before_deletes=True,
    )
    for run in (0, 1):
        for index in (2 * run, 2 * run + 1):
            write_file(tmp_path / "in", index, BATCHES[index])
        job = flowc.compile(program, str(flow), for_spark=True)
        report = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
        assert [q.error for q in report.queries] == [None], report
        with psycopg.connect(**postgres) as conn:
            rows = conn.execute("SELECT id, name, country FROM cdc_customers").fetchall()
        got = {i: {"id": i, "name": n, "country": c} for i, n, c in rows}
        assert got == wanted[2 * run + 1], run


FLINK_CHANGES = """
import json, sys
from pyflink.table import EnvironmentSettings, TableEnvironment
folder, queries = json.loads(sys.argv[1])
t = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
t.get_config().set("parallelism.default", "1")
t.execute_sql(
    "CREATE TABLE customers (id BIGINT, name STRING, country STRING, PRIMARY KEY (id) "
    f"NOT ENFORCED) WITH ('connector' = 'filesystem', 'path' = '{folder}', "
    "'format' = 'debezium-json')"
)
out = []
for query in queries:
    with t.execute_sql(query).collect() as rows:
        out.append([[str(r.get_row_kind()), r[0], r[1], r[2]] for r in rows])
print(json.dumps(out))
"""


@requires_flink
def test_flinks_changes_leave_the_pythons_tables(tmp_path: Path) -> None:
    """Flink 2.3 reading the same envelopes (one file, in order) through the same WHERE and
    SELECT: the change rows it hands the sink, applied as its upsert sinks do (a -U a
    delete where the WHERE passes it on, dropped by DropUpdateBefore otherwise), end with
    the tables the Python semantics give (which the Spark test holds flowc's to)."""
    write_file(tmp_path / "in", 0, [e for batch in BATCHES for e in batch])
    filtered, copied = ask_flink(
        FLINK_CHANGES,
        [
            str(tmp_path / "in"),
            [
                "SELECT id, UPPER(name), country FROM customers WHERE country <> 'XX'",
                "SELECT id, name, country FROM customers",
            ],
        ],
    )
    for changes, before_deletes, wanted in (
        (filtered, True, applied(BATCHES, lambda r: r["country"] != "XX",
                                 lambda r: {**r, "name": r["name"].upper()}, True)),
        (copied, False, applied(BATCHES, lambda r: True, dict, False)),
    ):  # fmt: skip
        table: dict[int, Row] = {}
        for kind, i, name, country in changes:
            if kind in ("+I", "+U"):
                table[i] = {"id": i, "name": name, "country": country}
            elif kind == "-D" or (kind == "-U" and before_deletes):
                table.pop(i, None)
        assert table == wanted[-1]


def refusal(text: str) -> tuple[str, int, int]:
    """The one E0298 compiling ``text`` gives: its message, line and column."""
    with pytest.raises(CompileError) as raised:
        flowc.compile(text, "job.flow", for_spark=True)
    (found,) = [d for d in raised.value.diagnostics if d.code == Code.E0298]
    return found.message, found.span.line, found.span.column


SINK = """\
CREATE SINK out WITH (connector = 'files', path = 'out', format = 'json', mode = 'update',
  key = '{key}');
"""


def test_a_sink_keyed_otherwise_is_refused_at_its_key() -> None:
    """Flink 2.3: "The query has an upsert key that differs from the primary key of the
    sink table" (asked of it); flowc says the same, at the sink's key."""
    text = SOURCE + SINK.format(key="name") + "INSERT INTO out FROM customers;\n"
    message, line, column = refusal(text)
    assert "is not the PRIMARY KEY of source 'customers' (id)" in message
    assert (line, column) == (4, 3)
    renamed = (
        SOURCE
        + SINK.format(key="id")
        + "INSERT INTO out FROM customers |> SELECT name AS id, country;\n"
    )
    message, _, _ = refusal(renamed)
    assert "'id' holds column 'name'" in message
    keyless = SOURCE.replace(", PRIMARY KEY (id) NOT ENFORCED", "")
    message, _, _ = refusal(keyless + SINK.format(key="id") + "INSERT INTO out FROM customers;\n")
    assert "declares no PRIMARY KEY" in message


def test_a_step_other_than_row_wise_ones_is_refused() -> None:
    """EXPLODE makes many rows of one change: the key no longer names one row."""
    text = (
        SOURCE
        + SINK.format(key="id")
        + "INSERT INTO out FROM customers |> EXPLODE SPLIT(name, ' ') AS part;\n"
    )
    message, line, _ = refusal(text)
    assert "cannot take the changes" in message and line == 5


def test_the_accepted_shape_compiles_and_batch_mode_refuses_it() -> None:
    job = flowc.compile(PROGRAM, "job.flow", for_spark=True)
    filtered, copied = (q.upsert or "" for q in job.spark_plan.queries)
    assert "CDC source 'customers'" in filtered and "-U deletes its key" in filtered
    assert "-U is skipped (Flink's DropUpdateBefore)" in copied
    code = generate_pyspark(job)
    assert "in_order=True, before_deletes=True" in code
    assert "in_order=True, before_deletes=False" in code
    with pytest.raises(CompileError) as raised:
        flowc.compile("SET execution.mode = batch;\n" + PROGRAM, "job.flow", for_spark=True)
    assert any(d.code == Code.E0299 for d in raised.value.diagnostics)


def test_a_null_key_fails_the_query_as_flinks_sink_enforcer_does(
    spark: Any, tmp_path: Path
) -> None:
    """A change whose key is NULL: Flink 2.3 fails the job (asked of it: "Column 'id' is
    NOT NULL, however, a null value is being written into it", its sink's PRIMARY KEY
    being NOT NULL); flowc failed nothing and wrote a row without key (one per NULL key).
    The micro-batch before it is written, the failing one not (E0804 at the INSERT)."""
    program = SOURCE + SINK.format(key="id") + "INSERT INTO out FROM customers;\n"
    flow = tmp_path / "job.flow"
    flow.write_text(program, encoding="utf-8")
    first = [("c", None, customer(1, "ann", "DE"))]
    keyless = {"id": None, "name": "nul", "country": "FR"}
    second = [("c", None, customer(2, "bob", "FR")), ("c", None, keyless)]
    reports = []
    for index, batch in enumerate((first, second)):
        write_file(tmp_path / "in", index, batch)
        job = flowc.compile(program, str(flow), for_spark=True)
        report = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
        reports.append(report.queries[0])
    assert reports[0].error is None and reports[1].failure is not None
    failure = reports[1].failure
    assert failure.code == Code.E0804 and failure.span.line == 5
    # the cause, not py4j's wrapper around the upsert sink's foreachBatch function
    assert "NULL in the sink's key column 'id'" in failure.message, failure.message
    rows = upsert_table(tmp_path / "out")
    assert {r["id"]: r for r in rows} == applied([first], lambda r: True, dict, False)[0]
