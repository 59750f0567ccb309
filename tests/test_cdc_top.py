"""A TOP (Flink's Top-N, no WINDOW) over a CDC source's changes on Spark (docs/language.md,
"Top-N over updates"; the CDC bullet of "Change-data capture input: debezium-json").

A `debezium-json` source with a PRIMARY KEY, through a WHERE, into a TOP run as the
ChangelogOperator processor (its input rows a signed multiset, a -U/-D retracting the row
equal to it), into upsert sinks: the pipe form and Flink's SQL ``ROW_NUMBER()`` form
without the rank (the sink keyed by the source's key) and with it (keyed by the PER
column and the rank). Four micro-batches (one envelope file each, increasing
modification times) in three runs on one checkpoint (two restarts), each upsert table
against plain Python: the envelopes applied as Flink reads them to the current rows,
then their Top-N per country (no ties in these tops). Covered: a customer moving
country while in a top (its '-D' and '+I' come from two processors' partitions in one
micro-batch, in no order: the sink's upsert wins), moving back, a delete, an update of
the score moving a row into and out of a top, a filtered row. Then the tie rule (ties
ordered by the rows), the processor and the sink's rules in plain Python, and the
refusals.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc.errorcodes import Code
from flowc.runtime.run import run_job
from tests.helpers.cdc_envelopes import current_rows
from tests.helpers.cdc_envelopes import write_envelopes as write_file
from tests.helpers.compile_errors import compile_errors
from tests.helpers.fake_state import Handle
from tests.helpers.files import upsert_table
from tests.helpers.flink import ask_flink, requires_flink

SOURCE = """\
SET max_parallelism = 8;
CREATE SOURCE customers (id BIGINT, country STRING, score BIGINT,
    PRIMARY KEY (id) NOT ENFORCED)
  WITH (connector = 'files', path = 'in', format = 'debezium-json',
        max_files_per_trigger = 1);
"""

PROGRAM = (
    SOURCE
    + """\
CREATE SINK piped WITH (connector = 'files', path = 'out/piped', format = 'json',
  mode = 'update', key = 'id');
CREATE SINK numbered WITH (connector = 'files', path = 'out/numbered', format = 'json',
  mode = 'update', key = 'country, rn');
CREATE SINK unnumbered WITH (connector = 'files', path = 'out/unnumbered', format = 'json',
  mode = 'update', key = 'id');
INSERT INTO piped FROM customers |> WHERE id > 0 |> TOP 2 BY score DESC PER country;
INSERT INTO numbered SELECT id, country, score, rn FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY country ORDER BY score DESC) AS rn
  FROM customers WHERE id > 0) WHERE rn <= 2;
INSERT INTO unnumbered SELECT id, country, score FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY country ORDER BY score DESC) AS rn
  FROM customers WHERE id > 0) WHERE rn <= 2;
"""
)

Row = dict[str, Any]
Envelope = tuple[str, Row | None, Row | None]
TOP_N = 2


def customer(i: int, country: str, score: int) -> Row:
    return {"id": i, "country": country, "score": score}


#: One file (micro-batch) each.
BATCHES: list[list[Envelope]] = [
    [
        ("r", None, customer(1, "FR", 50)),
        ("c", None, customer(2, "FR", 40)),
        ("c", None, customer(3, "FR", 30)),
        ("c", None, customer(6, "FR", 25)),
        ("c", None, customer(4, "US", 20)),
        ("c", None, customer(5, "US", 10)),
        ("c", None, customer(-1, "US", 99)),  # filtered out by the WHERE
    ],
    [
        # Leaves FR's top (its processor: -D) and enters US's (+I): one key, two partitions.
        ("u", customer(1, "FR", 50), customer(1, "US", 55)),
        ("u", customer(3, "FR", 30), customer(3, "FR", 35)),  # enters FR's top so
    ],
    [
        ("d", customer(2, "FR", 40), None),  # 6 enters FR's top
        ("u", customer(5, "US", 10), customer(5, "US", 60)),  # into US's top, 4 out
        ("u", customer(-1, "US", 99), customer(-1, "US", 100)),  # filtered out
    ],
    [
        ("u", customer(1, "US", 55), customer(1, "FR", 45)),  # back: FR's first, 6 out
        ("c", None, customer(7, "DE", 5)),
        ("d", customer(6, "FR", 25), None),
        ("u", customer(3, "FR", 35), customer(3, "FR", 33)),  # an update within the top
    ],
]

#: The micro-batches of each run (each run a restart on the same checkpoint).
RUNS = [[0], [1, 2], [3]]


def top_n(rows: dict[int, Row]) -> list[tuple[Row, int]]:
    """Flink's Top-N of the current rows (WHERE id > 0): per country, the rows by score
    descending, each with its rank; ties ordered by the rows (the greater id first,
    flowc's documented rule)."""
    countries: dict[str, list[Row]] = {}
    for row in rows.values():
        if row["id"] > 0:
            countries.setdefault(row["country"], []).append(row)
    ranked = []
    for members in countries.values():
        members.sort(key=lambda r: (r["score"], r["id"]), reverse=True)
        ranked += [(row, i + 1) for i, row in enumerate(members[:TOP_N])]
    return ranked


def without_ties(rows: dict[int, Row]) -> bool:
    """Whether no two rows of one country, one of them in its top, share a score."""
    tops = {(r["country"], r["score"]) for r, _ in top_n(rows)}
    seen = [(r["country"], r["score"]) for r in rows.values() if r["id"] > 0]
    return all(seen.count(pair) == 1 for pair in tops)


def test_a_top_over_cdc_changes_across_micro_batches_and_restarts(
    spark: Any, tmp_path: Path
) -> None:
    flow = tmp_path / "job.flow"
    flow.write_text(PROGRAM, encoding="utf-8")
    job = flowc.compile(PROGRAM, str(flow), for_spark=True)
    processors = list(job.spark_plan.changelog_processors.values())
    assert [p.kind for p in processors] == ["TOP"] * 3
    assert sorted(p.row_keys for p in processors) == [(), ("id",), ("id",)]
    done = 0
    for run in RUNS:
        for index in run:
            write_file(tmp_path / "in", index, BATCHES[index])
        job = flowc.compile(PROGRAM, str(flow), for_spark=True)
        report = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
        assert all(q.error is None for q in report.queries), report
        done = run[-1] + 1
        rows = current_rows(BATCHES[:done])
        assert without_ties(rows)
        wanted = top_n(rows)
        by_key = {r["id"]: r for r, _ in wanted}
        for sink in ("piped", "unnumbered"):
            got = {r["id"]: r for r in upsert_table(tmp_path / "out" / sink)}
            assert got == by_key, (sink, done)
        numbered = {(r["country"], r["rn"]): r for r in upsert_table(tmp_path / "out" / "numbered")}
        assert numbered == {(r["country"], n): {**r, "rn": n} for r, n in wanted}, done
    assert done == len(BATCHES)
    assert by_key[1]["country"] == "FR" and 6 not in by_key and 4 in by_key


def test_a_top_over_cdc_changes_into_postgres(
    spark: Any, tmp_path: Path, postgres: dict[str, Any]
) -> None:
    """The pipe form into a postgres upsert sink (its own changelog path, where the
    upsert of a moved customer wins over its delete too): the table after the same runs
    equals the Python Top-N."""
    import psycopg

    program = SOURCE + (
        f"CREATE SINK pg WITH (connector = 'postgres', host = '{postgres['host']}', "
        f"port = {postgres['port']}, database = '{postgres['dbname']}', user = 'postgres', "
        "table = 'cdc_top', key = 'id', mode = 'update');\n"
        "INSERT INTO pg FROM customers |> WHERE id > 0 |> TOP 2 BY score DESC PER country;\n"
    )
    flow = tmp_path / "job.flow"
    flow.write_text(program, encoding="utf-8")
    for run in RUNS:
        for index in run:
            write_file(tmp_path / "in", index, BATCHES[index])
        job = flowc.compile(program, str(flow), for_spark=True)
        report = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
        assert [q.error for q in report.queries] == [None], report
        with psycopg.connect(**postgres) as conn:
            rows = conn.execute("SELECT id, country, score FROM cdc_top").fetchall()
        wanted = top_n(current_rows(BATCHES[: run[-1] + 1]))
        assert sorted(rows) == sorted((r["id"], r["country"], r["score"]) for r, _ in wanted)


FLINK_CHANGES = """
import json, sys
from pyflink.table import EnvironmentSettings, TableEnvironment
folder, queries = json.loads(sys.argv[1])
t = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
t.get_config().set("parallelism.default", "1")
t.execute_sql(
    "CREATE TABLE customers (id BIGINT, country STRING, score BIGINT, PRIMARY KEY (id) "
    f"NOT ENFORCED) WITH ('connector' = 'filesystem', 'path' = '{folder}', "
    "'format' = 'debezium-json')"
)
out = []
for query in queries:
    with t.execute_sql(query).collect() as rows:
        out.append([[str(r.get_row_kind()), *list(r)] for r in rows])
print(json.dumps(out))
"""

RANKED = (
    "SELECT id, country, score{rn} FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY country "
    "ORDER BY score DESC) AS rn FROM customers WHERE id > 0) WHERE rn <= 2"
)


@requires_flink
def test_flinks_changelog_leaves_the_pythons_tables(tmp_path: Path) -> None:
    """Flink 2.3 reading the same envelopes (one file, in order) with the SQL forms: its
    change rows applied as an upsert sink keyed by the query's key applies them (+I/+U
    upsert, -D delete, -U skipped: into an upsert sink its Rank emits I,UA,D) end with
    the table the Python Top-N gives, which the Spark test holds flowc's to."""
    write_file(tmp_path / "in", 0, [e for batch in BATCHES for e in batch])
    unnumbered, numbered = ask_flink(
        FLINK_CHANGES, [str(tmp_path / "in"), [RANKED.format(rn=""), RANKED.format(rn=", rn")]]
    )
    wanted = top_n(current_rows(BATCHES))
    for changes, key in ((unnumbered, (0,)), (numbered, (1, 3))):
        table: dict[tuple[Any, ...], list[Any]] = {}
        for kind, *row in changes:
            if kind in ("+I", "+U"):
                table[tuple(row[i] for i in key)] = row
            elif kind == "-D":
                table.pop(tuple(row[i] for i in key))
        expected = [
            [r["id"], r["country"], r["score"], *([n] if len(key) == 2 else [])] for r, n in wanted
        ]
        assert sorted(table.values()) == sorted(expected)
    assert any(kind == "-D" for kind, *_ in unnumbered)


TIED = (
    SOURCE
    + """\
CREATE SINK tied WITH (connector = 'files', path = 'out/tied', format = 'json',
  mode = 'update', key = 'country, rn');
INSERT INTO tied FROM customers |> WHERE id > 0 |> TOP 2 BY score DESC PER country AS rn;
"""
)

TIED_BATCHES: list[list[Envelope]] = [
    [("c", None, customer(i, "FR", 7)) for i in (3, 1, 2)] + [("c", None, customer(9, "US", 1))],
    [("u", customer(3, "FR", 7), customer(3, "FR", 6)), ("c", None, customer(4, "FR", 7))],
    [("d", customer(4, "FR", 7), None), ("c", None, customer(8, "US", 1))],
]


def test_ties_are_ordered_by_the_rows(spark: Any, tmp_path: Path) -> None:
    """The documented decision: rows of equal score rank by their other columns, in the
    BY's direction (the greater id first), whatever order they arrive in (Flink: by
    arrival, which a micro-batch's fold cannot know)."""
    flow = tmp_path / "job.flow"
    flow.write_text(TIED, encoding="utf-8")
    for index, batch in enumerate(TIED_BATCHES):
        write_file(tmp_path / "in", index, batch)
    job = flowc.compile(TIED, str(flow), for_spark=True)
    report = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
    assert all(q.error is None for q in report.queries), report
    rows = current_rows(TIED_BATCHES)
    assert not without_ties(rows)
    got = {(r["country"], r["rn"]): r for r in upsert_table(tmp_path / "out" / "tied")}
    assert got == {(r["country"], n): {**r, "rn": n} for r, n in top_n(rows)}


def test_the_sink_keeps_a_row_whose_delete_and_upsert_meet_in_one_micro_batch() -> None:
    """A '-D' of a key from one partition's processor and its '+I' from another's, in
    either order: the upsert is applied, the delete dropped; a delete alone stays."""
    from flowc.spark.generated_runtime import upserts_win

    moved = [(1, "FR", 50, "-D"), (1, "US", 55, "+I"), (4, "US", 20, "-D")]
    for rows in (moved, list(reversed(moved))):
        assert sorted(upserts_win(rows, [0])) == [(1, "US", 55, "+I"), (4, "US", 20, "-D")]


def test_the_processor_refuses_a_key_held_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    """ChangelogOperator's own handleInputRows in plain Python: a customer moving inside
    its partition's top is '-U'/'+U' by its key; a log inserting a key it holds (two
    rows of one PRIMARY KEY in one top) fails the query rather than keep either."""
    from pyspark.sql import Row as SparkRow
    from pyspark.sql import types

    from flowc.spark import generated_runtime

    monkeypatch.setattr(generated_runtime, "Row", SparkRow, raising=False)
    for name in ("StructType", "StructField", "BinaryType"):
        monkeypatch.setattr(generated_runtime, name, getattr(types, name), raising=False)
    names = ["id", "country", "score"]
    top = generated_runtime.ChangelogOperator(
        "top", ["country"], names, [], 2, True, False, "__flowc_order", "__flowc_key_group",
        True, ["id"],
    )  # fmt: skip
    top.init(Handle())
    given = SparkRow(*names, "__flowc_order", "__flowc_op")

    def batch(*changes: tuple[str, tuple[int, str, int]]) -> list[tuple[str, tuple[Any, ...]]]:
        rows = [given(*row, {"score": row[2], "id": row[0]}, op) for op, row in changes]
        out = top.handleInputRows(("FR",), iter(rows), None)  # type: ignore[arg-type]
        return [(r["__flowc_op"], tuple(r)[:-1]) for r in out]

    ann, ann_up = (1, "FR", 5), (1, "FR", 9)
    assert batch(("+I", ann)) == [("+I", ann)]
    assert batch(("-U", ann), ("+U", ann_up)) == [("-U", ann), ("+U", ann_up)]
    with pytest.raises(ValueError, match="FLOWC_TOP_KEY_TWICE"):
        batch(("+I", (1, "FR", 7)))


PIPE = SOURCE + (
    "CREATE SINK s WITH (connector = 'files', path = 'out', format = 'json', mode = 'update',\n"
    "  key = '{key}');\n"
    "INSERT INTO s FROM customers{steps};\n"
)
TOP = " |> TOP 2 BY score DESC PER country"


@pytest.mark.parametrize(
    ("key", "steps", "code"),
    [
        ("id", TOP, None),
        ("country, rn", TOP + " AS rn", None),
        ("id", " |> WHERE id > 0 |> KEY BY country" + TOP + " |> SELECT id, score", None),
        # the sink's key is not the TOP's upsert key
        ("country", TOP, Code.E0742),
        ("id", TOP + " AS rn", Code.E0742),
        ("score", TOP + " |> SELECT country, score", Code.E0742),
        # what the processor does not run: a step computing after it, the key computed
        ("id", TOP + " |> WHERE score > 1", Code.E0299),
        ("id", TOP + " |> EXTEND score * 2 AS twice", Code.E0299),
        ("id", " |> SET id = id + 1" + TOP, Code.E0299),
        ("id", " |> EXPLODE SEQUENCE(1, 2) AS n" + TOP, Code.E0299),
        ("country", " |> DEDUPLICATE ON country", Code.E0299),
        # a TOP over the TOP's updates: no chain runs it (E0299 at the first), nor Spark
        ("id", TOP + " |> TOP 1 BY score DESC", (Code.E0299, Code.E0702)),
    ],
)
def test_which_shapes_run(key: str, steps: str, code: Code | tuple[Code, ...] | None) -> None:
    errors = compile_errors(PIPE.format(key=key, steps=steps))
    codes = () if code is None else code if isinstance(code, tuple) else (code,)
    assert [c for c, _, _ in errors] == [c.value for c in codes], errors
    if code is not None:
        assert errors[0][1] == 8, errors  # the INSERT's line: at it or at its step


def test_a_source_without_primary_key_a_batch_job_and_an_append_sink_are_refused() -> None:
    """No PRIMARY KEY names the rows: E0299 at the TOP; a batch job reads no CDC source
    (E0299); an append sink takes no updates (Flink's own refusal, E0748)."""
    keyless = PIPE.replace(",\n    PRIMARY KEY (id) NOT ENFORCED", "")
    ((code, line, message),) = compile_errors(keyless.format(key="id", steps=TOP))
    assert (code, line) == ("E0299", 7) and "declares no PRIMARY KEY" in message
    batch = "SET execution.mode = batch;\n" + PIPE.format(key="id", steps=TOP)
    assert "E0299" in [c for c, _, _ in compile_errors(batch)]
    append = PIPE.format(key="id", steps=TOP).replace(
        "mode = 'update',\n  key = 'id'", "mode = 'append'"
    )
    assert [c for c, _, _ in compile_errors(append)] == ["E0748"]
