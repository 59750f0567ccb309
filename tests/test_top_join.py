"""A JOIN consuming a TOP's updates on Spark (Flink's regular join over a Rank; docs/
language.md, "A JOIN over a TOP's updates"): the TOP runs as a producer ChangelogOperator
emitting Flink's changelog, the JOIN as the ChangelogJoin consuming it.

Real Spark, five micro-batches (input files with increasing modification times, one per
source per micro-batch) in two runs on one checkpoint (a restart after the third), for a
TOP 1 in a view JOINed with a CDC source, a TOP 2 with its rank LEFT JOIN a source, and
the SQL form (a source LEFT JOIN a ROW_NUMBER subquery); each upsert
table against plain Python computing Flink's semantics record by record (the Rank's
changelog per bid, tests/helpers/rank_flink.py, then the join, tests/helpers/
cdc_join_flink.py), materialized by the sink's key. The processors over random
micro-batches in plain Python, the refusals, the state manifest; and (opt-in, PyFlink)
Flink 2.3's collected changelogs and plan modes, which the plain Python follows.
"""

from __future__ import annotations

import io
import json
import os
import random
import textwrap
from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc.diagnostics import CompileError
from flowc.errorcodes import Code
from flowc.runtime.run import run_job
from flowc.state import Verdict, compare, describe_state
from tests.helpers.cdc_join_flink import (
    Record,
    Values,
    envelope_records,
    flink_join,
    materialized,
    upserted,
)
from tests.helpers.changelog_flink import PROBE, flink_modes, flowc_modes
from tests.helpers.compile_errors import compile_errors, edited
from tests.helpers.fake_state import Handle
from tests.helpers.files import upsert_table
from tests.helpers.flink import (
    COLLECT_CHANGELOG,
    ask_flink,
    checked_flink_python,
    requires_flink,
)
from tests.helpers.rank_flink import flink_rank

Envelope = tuple[str, Values | None, Values | None]
Bid = tuple[int, int | None, float]

HEAD = """\
SET max_parallelism = 8;
CREATE SOURCE bids (auction BIGINT, bidder BIGINT, price DOUBLE)
  WITH (connector = 'files', path = 'in_b', format = 'json', max_files_per_trigger = 1);
CREATE SOURCE people (id BIGINT, name STRING)
  WITH (connector = 'files', path = 'in_p', format = '{people}', max_files_per_trigger = 1);
CREATE SINK o WITH (connector = 'files', path = 'out/o', format = 'json',
  mode = 'update', key = '{key}');
"""


#: name: (people's format, sink key, the program's rest, the TOP's n, whether its rank is
#: a column, the preserved sides, whether the TOP is the JOIN's left side, whether bids
#: of price <= 0 are filtered, the sink's columns)
Case = tuple[str, str, str, int, bool, tuple[bool, bool], bool, bool, tuple[str, ...]]
CASES: dict[str, Case] = {
    "top1_view_join_cdc_people": (
        "debezium-json",
        "auction, bidder",
        """CREATE VIEW best AS FROM bids |> WHERE price > 0 |> TOP 1 BY price DESC PER auction;
INSERT INTO o FROM best |> JOIN people ON best.bidder = people.id
  |> SELECT auction, bidder, price, name;
""",
        1,
        False,
        (False, False),
        True,
        True,
        ("auction", "bidder", "price", "name"),
    ),
    "top2_ranked_left_join_people": (
        "json",
        "auction, place, bidder",
        """INSERT INTO o FROM bids |> TOP 2 BY price DESC PER auction AS place
  |> LEFT JOIN people ON bidder = people.id
  |> SELECT auction, place, bidder, price, name;
""",
        2,
        True,
        (True, False),
        True,
        False,
        ("auction", "place", "bidder", "price", "name"),
    ),
    "sql_people_left_join_top2": (
        "json",
        "id, auction, price",
        """INSERT INTO o SELECT p.id, p.name, b.auction, b.price FROM people p
  LEFT JOIN (SELECT auction, bidder, price FROM (SELECT *, ROW_NUMBER() OVER
    (PARTITION BY auction ORDER BY price DESC) AS rn FROM bids) WHERE rn <= 2) b
  ON p.id = b.bidder;
""",
        2,
        False,
        (True, False),
        False,
        False,
        ("id", "name", "auction", "price"),
    ),
}


def program(case: str) -> str:
    people, key, rest, *_ = CASES[case]
    return HEAD.format(people=people, key=key) + rest


#: Per micro-batch: the bids (no two of one auction at one price: flowc orders ties by
#: the rows, Flink by arrival) and the people's envelopes (an append-only people source
#: reads each id's first create only: people_batches).
BATCHES: list[tuple[list[Bid], list[Envelope]]] = [
    ([(1, 10, 5.0), (1, 11, 7.0), (2, 10, 3.0)], [("c", None, (10, "ann"))]),
    (
        [(1, 12, 6.0), (2, 12, 9.0), (3, 13, 2.0), (2, 14, -1.0)],
        [("c", None, (11, "bob")), ("c", None, (12, "cy"))],
    ),
    ([(1, 13, 8.0), (2, 11, 4.0), (3, None, 4.5)], [("u", (10, "ann"), (10, "anne"))]),
    ([(1, 10, 2.0), (2, 13, 10.0)], [("d", (12, "cy"), None), ("c", None, (13, "dan"))]),
    ([(3, 11, 6.0), (1, 14, 9.5)], [("c", None, (12, "cyd")), ("c", None, (14, "eve"))]),
]

#: The micro-batches each run reads: a restart after the third (one restart keeps the
#: module's Spark time small; tests/test_aggregate_join.py restarts the same processors twice).
RUNS = [3, 5]


def people_batches(case: str) -> list[list[Envelope]]:
    """The people's envelopes each micro-batch; an append-only source gets each id once."""
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
    bids = [dict(zip(("auction", "bidder", "price"), b, strict=True)) for b in BATCHES[index][0]]

    def record(values: Values | None) -> dict[str, Any] | None:
        return None if values is None else dict(zip(("id", "name"), values, strict=True))

    envelopes = people_batches(case)[index]
    if CASES[case][0] == "debezium-json":
        people = [{"before": record(b), "after": record(a), "op": op} for op, b, a in envelopes]
    else:
        people = [record(a) for _, _, a in envelopes]
    for folder, lines in ((root / "in_b", bids), (root / "in_p", people)):
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"part-{index:03d}.json"
        path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
        os.utime(path, (stamp, stamp))


def flink_table(case: str, upto: int) -> dict[Values, Values]:
    """Flink's changelog of the INSERT over the first ``upto`` micro-batches (each batch's
    bids through the Rank, then its people), materialized by the sink's key; rows in the
    sink's columns."""
    _, key, _, n, ranked, preserved, top_left, filtered, columns = CASES[case]
    top, people = (0, 1) if top_left else (1, 0)
    held: dict[object, list[Values]] = {}
    records: list[Record] = []
    for (bids, _), envelopes in zip(BATCHES[:upto], people_batches(case), strict=False):
        kept = [b for b in bids if b[2] > 0 or not filtered]
        records += flink_rank(kept, lambda r: r[0], lambda r: -r[2], n, ranked, held, top)
        records += envelope_records(people, envelopes)
    top_names = ("auction", "bidder", "price", *(("place",) if ranked else ()))
    if top_left:
        names = (*top_names, "id", "name")
        changes = flink_join(records, ([1], [0]), (len(top_names), 2), preserved)
    else:
        names = ("id", "name", *top_names)
        changes = flink_join(records, ([0], [1]), (2, len(top_names)), preserved)
    projected = [(kind, tuple(row[names.index(c)] for c in columns)) for kind, row in changes]
    at = [columns.index(k.strip()) for k in key.split(",")]
    return materialized(projected, at)


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_join_over_a_tops_updates_across_micro_batches_and_restarts(
    spark: Any, tmp_path: Path, case: str
) -> None:
    _, key, _, _, _, preserved, _, _, columns = CASES[case]
    text = program(case)
    flow = tmp_path / "job.flow"
    flow.write_text(text, encoding="utf-8")
    job = flowc.compile(text, str(flow), for_spark=True)
    processors = sorted(job.spark_plan.changelog_processors.values(), key=lambda p: p.kind)
    assert [(p.kind, p.consumer) for p in processors] == [("JOIN", True), ("TOP", False)]
    assert "because the JOIN on line" in processors[1].to_text()
    wanted = [flink_table(case, upto) for upto in RUNS]
    assert any(None in row for row in wanted[-1].values()) == any(preserved)
    assert wanted[0] != wanted[1]  # each run changes the table
    done = 0
    for run, upto in enumerate(RUNS):
        for index in range(done, upto):
            write_batch(tmp_path, case, index)
        done = upto
        job = flowc.compile(text, str(flow), for_spark=True)
        report = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
        assert all(q.error is None for q in report.queries), report
        rows = [tuple(r.get(c) for c in columns) for r in upsert_table(tmp_path / "out" / "o")]
        at = [columns.index(k.strip()) for k in key.split(",")]
        got = {tuple(row[i] for i in at): row for row in rows}
        assert len(got) == len(rows), rows
        assert got == wanted[run], (case, run)


#: An append-only people source, in place of the CDC one.
APPEND = ("format = 'debezium-json'", "format = 'json'")
#: A second sink, for the TOP's rows themselves.
OTHER_SINK = (
    "CREATE SINK other WITH (connector = 'files', path = 'out/other', format = 'json', "
    "mode = 'update', key = 'auction');"
)
HASHMAP = (
    "SET max_parallelism = 8;",
    "SET max_parallelism = 8;\nSET state.backend.type = 'hashmap';",
)


@pytest.mark.parametrize(
    ("case", "edits", "code", "line"),
    [
        # a sink key without the JOIN's key: the TOP's PER column does not name a joined row
        (
            "top1_view_join_cdc_people",
            [("key = 'auction, bidder'", "key = 'auction'")],
            Code.E0742,
            9,
        ),
        # LEFT JOIN: the key holds the preserved side's join column, not the other's
        (
            "sql_people_left_join_top2",
            [
                ("key = 'id, auction, price'", "key = 'auction, price, bidder'"),
                ("SELECT p.id, p.name,", "SELECT p.id, b.bidder, p.name,"),
            ],
            Code.E0742,
            8,
        ),
        # a sink that cannot apply updates and deletes
        (
            "top2_ranked_left_join_people",
            [("mode = 'update', key = 'auction, place, bidder'", "mode = 'append'")],
            Code.E0748,
            8,
        ),
        # another state store
        (
            "top2_ranked_left_join_people",
            [HASHMAP],
            Code.E0744,
            10,
        ),
        # a TOP over an AGGREGATE's updates before the JOIN stays refused
        (
            "top1_view_join_cdc_people",
            [
                APPEND,
                (
                    "|> WHERE price > 0 |>",
                    "|> KEY BY auction, bidder |> AGGREGATE max(price) AS price |>",
                ),
            ],
            Code.E0702,
            9,
        ),
        # a TOP in a view another INSERT reads too: its changes would be shared
        (
            "top1_view_join_cdc_people",
            [
                APPEND,
                ("CREATE SINK o", f"{OTHER_SINK}\nCREATE SINK o"),
                ("price, name;", "price, name;\nINSERT INTO other FROM best;"),
            ],
            Code.E0702,
            10,
        ),
    ],
)
def test_other_shapes_are_refused_where_they_are_written(
    case: str, edits: list[tuple[str, str]], code: Code, line: int
) -> None:
    """Each variation is refused before anything runs, at its place."""
    errors = compile_errors(edited(program(case), edits))
    assert (code.value, line) in [(c, n) for c, n, _ in errors], errors


def test_the_sink_key_refusal_says_what_names_a_joined_row() -> None:
    """The brief's job (a TOP 1 keyed by its PER column): E0742, whose hint names the
    JOIN's columns, not append mode (E0702's, which it gave before)."""
    text = program("top1_view_join_cdc_people").replace("'auction, bidder'", "'auction'")
    errors = compile_errors(text)
    assert [c for c, _, _ in errors] == [Code.E0742.value], errors
    with pytest.raises(CompileError) as refused:
        flowc.compile(text, "job.flow", for_spark=True)
    (found,) = [d for d in refused.value.diagnostics if d.code == Code.E0742.value]
    assert "bidder or id" in (found.help or ""), found


def test_a_join_over_a_shared_view_names_the_shapes_that_run() -> None:
    """E0702 at a JOIN over a TOP whose view another INSERT reads: its hint names the
    shapes that run, before append mode (which such a JOIN never takes)."""
    text = program("top1_view_join_cdc_people").replace(*APPEND)
    text = text.replace("CREATE SINK o", f"{OTHER_SINK}\nCREATE SINK o")
    text = text.replace("price, name;", "price, name;\nINSERT INTO other FROM best;")
    with pytest.raises(CompileError) as refused:
        flowc.compile(text, "job.flow", for_spark=True)
    (found,) = [d for d in refused.value.diagnostics if d.code == Code.E0702.value]
    assert "views that nothing else reads" in (found.help or ""), found


def test_the_state_manifest_holds_the_producer_and_the_join() -> None:
    """Both processors' state, the TOP's role, and the JOIN's row keys; a later job with
    another n or another sink key is refused (its state would mean something else)."""
    text = program("top2_ranked_left_join_people")
    manifest = describe_state(flowc.compile(text, "job.flow", for_spark=True))
    processors = {
        op["processor"]["name"]: {p["name"]: p["value"] for p in op["processor"]["parameters"]}
        for op in manifest.to_json()["queries"][0]["operators"]
        if op.get("processor")
    }
    assert processors["ChangelogOperator"]["role"] == "TOP that produces a changelog"
    assert processors["ChangelogJoin"]["row_keys"] == "auction, place, bidder"
    assert processors["ChangelogJoin"]["outer_join"] == "LEFT"
    for changed in (text.replace("TOP 2", "TOP 3"), text.replace("key = 'auction, ", "key = '")):
        comparison = compare(
            manifest, describe_state(flowc.compile(changed, "job.flow", for_spark=True))
        )
        assert comparison.verdict is Verdict.INCOMPATIBLE, changed
    assert compare(manifest, manifest).verdict is not Verdict.INCOMPATIBLE


#: Per JOIN kind (the TOP on the left, people on the right): the preserved sides and the
#: sink key's positions in the joined row (auction, bidder, price[, rank], id, name): the
#: TOP's partition and the preserved sides' join columns (id for an inner or RIGHT JOIN).
PROCESSOR_KINDS = {
    "inner": ((False, False), ("auction", "id")),
    "left": ((True, False), ("auction", "bidder")),
    "right": ((False, True), ("auction", "id")),
    "full": ((True, True), ("auction", "bidder", "id")),
}


def random_batches(rng: random.Random) -> list[list[tuple[str, Values]]]:
    """Micro-batches of bids ("b", (auction, bidder, price)) and people's changes ("p",
    kind and row): a consistent log (one row per id at a time); no two bids at one price,
    no bidder twice in an auction (one joined row per sink key)."""
    live: dict[int, Values] = {}
    distinct = rng.sample(range(1, 60), 24)  # no tie, in an auction or across them
    prices = {1: distinct[:12], 2: distinct[12:]}
    bidders = {a: rng.sample([1, 2, 3, 4, None], 5) for a in (1, 2)}
    batches = []
    for _ in range(rng.randint(1, 5)):
        batch: list[tuple[str, Values]] = []
        for _ in range(rng.randint(0, 6)):
            auction = rng.choice([1, 2])
            if rng.random() < 0.5 and prices[auction] and bidders[auction]:
                bid = (auction, bidders[auction].pop(), float(prices[auction].pop()))
                batch.append(("b", bid))
                continue
            i = rng.randint(1, 3)
            if i not in live:
                live[i] = (i, rng.choice("abc"))
                batch.append(("p", ("+I", live[i])))
            elif rng.random() < 0.6:
                old, live[i] = live[i], (i, rng.choice("abc"))
                batch += [("p", ("-U", old)), ("p", ("+U", live[i]))]
            else:
                batch.append(("p", ("-D", live.pop(i))))
        batches.append(batch)
    return batches


@pytest.mark.parametrize("per", [True, False])
@pytest.mark.parametrize("ranked", [False, True])
@pytest.mark.parametrize("n", [1, 2])
@pytest.mark.parametrize("kind", sorted(PROCESSOR_KINDS))
def test_the_processors_end_each_micro_batch_with_flinks_table(
    kind: str, n: int, ranked: bool, per: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The producer ChangelogOperator (TOP n BY price DESC PER auction or global, over
    insert-only bids) into the ChangelogJoin with a CDC people side, both run by their own
    handleInputRows in plain Python (state in memory, tests/helpers/fake_state.py) over
    random micro-batches: the join's changelog applied as an upsert sink applies it is,
    after every micro-batch, Flink's table (its Rank and join record by record,
    materialized by key)."""
    from pyspark.sql import Row as SparkRow
    from pyspark.sql import types

    from flowc.spark import generated_runtime

    monkeypatch.setattr(generated_runtime, "Row", SparkRow, raising=False)
    for name in ("StructType", "StructField", "BinaryType"):
        monkeypatch.setattr(generated_runtime, name, getattr(types, name), raising=False)
    preserved, key = PROCESSOR_KINDS[kind]
    left = ["auction", "bidder", "price", *(["rank"] if ranked else [])]
    right = ["id", "name"]
    at = [(*left, *right).index(k) for k in key]
    bid = SparkRow("auction", "bidder", "price", "__flowc_order")
    side_row = SparkRow(*left, *right, "__flowc_side", "__flowc_op")
    for seed in range(30):
        rng = random.Random(seed)
        producer = generated_runtime.ChangelogOperator(
            "top", ["auction"] if per else [], ["auction", "bidder", "price"], [], n, True, ranked,
            "__flowc_order", "__flowc_key_group", False,
        )  # fmt: skip
        join = generated_runtime.ChangelogJoin(
            left, right, ["bidder"], ["id"], at, left + right, preserved
        )
        producer.init(Handle())
        join.init(Handle())
        ours: list[tuple[str, Values]] = []
        records: list[Record] = []
        held: dict[object, list[Values]] = {}
        for batch in random_batches(rng):
            bids = [values for what, values in batch if what == "b"]
            changes = [values for what, values in batch if what == "p"]
            given = iter([bid(*b, (b[2], b[1])) for b in bids])
            emitted = list(producer.handleInputRows((0,), given, None))  # type: ignore[arg-type]
            blank = (None,) * len(right)
            rows = [side_row(*tuple(r)[:-1], *blank, 0, r["__flowc_op"]) for r in emitted]
            rows += [side_row(*(None,) * len(left), *v, 1, k) for k, v in changes]
            out = join.handleInputRows((0,), iter(rows), None)  # type: ignore[arg-type]
            ours += [(r["__flowc_op"], tuple(r)[:-1]) for r in out]
            partition = (lambda r: r[0]) if per else (lambda r: None)
            records += flink_rank(bids, partition, lambda r: -r[2], n, ranked, held, 0)
            records += [(1, k, v) for k, v in changes]
            flink = flink_join(records, ([1], [0]), (len(left), 2), preserved)
            assert upserted(ours, at) == materialized(flink, at), (seed, batch)


# Flink 2.3 itself (opt-in: FLOWC_FLINK_PYTHON), what the plain Python above follows.


#: All the bids in one file, in order, and the people (inserts).
FLINK_BIDS = [b for bids, _ in BATCHES for b in bids]
FLINK_PEOPLE = [(10, "ann"), (11, "bob"), (12, "cy"), (14, "eve")]


def ranked_query(n: int, rank: bool) -> str:
    """The Rank over ``bids`` as Flink's SQL writes a Top-N."""
    return (
        f"SELECT auction, bidder, price{', rn' if rank else ''} FROM (SELECT *, ROW_NUMBER() "
        f"OVER (PARTITION BY auction ORDER BY price DESC) AS rn FROM bids) WHERE rn <= {n}"
    )


@requires_flink
def test_flinks_collected_rank_and_join_are_the_ones_computed_in_plain_python(
    tmp_path: Path,
) -> None:
    """Flink 2.3 runs the Top-N (n 1 and 2, with and without its rank) over the bids: its
    changelog is, record by record, tests/helpers/rank_flink.py's; and the JOIN of a Top-N
    with people (inner and LEFT, either side) leaves the table plain Python's Rank then
    join leaves (materialized by the TOP's partition, its bidder, the person's id)."""
    checked_flink_python()
    for name, lines in (
        ("bids", [dict(zip(("auction", "bidder", "price"), b, strict=True)) for b in FLINK_BIDS]),
        ("people", [{"id": i, "name": s} for i, s in FLINK_PEOPLE]),
    ):
        (tmp_path / name).mkdir()
        text = "".join(json.dumps(line) + "\n" for line in lines)
        (tmp_path / name / "part.json").write_text(text, encoding="utf-8")
    ddl = [
        f"CREATE TABLE bids (auction BIGINT, bidder BIGINT, price DOUBLE) WITH ("
        f"'connector' = 'filesystem', 'path' = '{tmp_path / 'bids'}', 'format' = 'json')",
        f"CREATE TABLE people (id BIGINT, name STRING) WITH ('connector' = 'filesystem', "
        f"'path' = '{tmp_path / 'people'}', 'format' = 'json')",
    ]
    forms = [(n, rank) for n in (1, 2) for rank in (False, True)]
    asked = {f"top{n}_{rank}": [*ddl, ranked_query(n, rank)] for n, rank in forms}
    joins = {
        "inner": ("top", "", (False, False)),
        "left": ("top", "LEFT", (True, False)),
        "people_left": ("people", "LEFT", (True, False)),
    }
    for name, (first, kind, _) in joins.items():
        top = f"({ranked_query(2, False)}) t"
        tables = (top, "people") if first == "top" else ("people", top)
        asked[name] = [
            *ddl,
            f"SELECT * FROM {tables[0]} {kind} JOIN {tables[1]} ON t.bidder = people.id",
        ]
    collected: dict[str, list[list[Any]]] = ask_flink(COLLECT_CHANGELOG, asked)
    for n, rank in forms:
        flink = [(k, tuple(r)) for k, r in collected[f"top{n}_{rank}"]]
        ours = flink_rank(FLINK_BIDS, lambda r: r[0], lambda r: -r[2], n, rank, {}, 0)
        assert [(k, r) for _, k, r in ours] == flink, (n, rank)
    people = [(1, "+I", p) for p in FLINK_PEOPLE]
    for name, (first, _, preserved) in joins.items():
        side = 0 if first == "top" else 1
        ranked = flink_rank(FLINK_BIDS, lambda r: r[0], lambda r: -r[2], 2, False, {}, side)
        others = [(1 - side, k, r) for _, k, r in people]
        keys = ([1], [0]) if side == 0 else ([0], [1])
        widths = (3, 2) if side == 0 else (2, 3)
        at = [0, 1, 3] if side == 0 else [2, 3, 0]
        flink = materialized([(k, tuple(r)) for k, r in collected[name]], at)
        assert any(None in row for row in flink.values()) == any(preserved), name
        for records in (ranked + others, others + ranked):
            computed = flink_join(records, keys, widths, preserved)
            assert materialized(computed, at) == flink, name


#: The SQL forms Flink plans (files tables as filesystem ones; the upsert table as
#: blackhole, which takes what an upsert sink takes): the Rank I,UB,UA,D over insert-only
#: bids, the Join and its Calc I,UB,UA,D; into an upsert sink Flink refuses the INSERT as
#: written (the join has no upsert key) and flowc's modes are those of its plan with ON
#: CONFLICT DO DEDUPLICATE, the table flowc writes.
FLINK_TABLES = """
    CREATE TABLE bids (auction BIGINT, bidder BIGINT, price DOUBLE)
      WITH ('connector' = 'files', 'path' = 'in', 'format' = 'json');
    CREATE TABLE people (id BIGINT, name STRING)
      WITH ('connector' = 'files', 'path' = 'in', 'format' = 'json');
"""
MODES_CASES = {
    "top1_join_people_into_print": f"""{FLINK_TABLES}
    CREATE TABLE o (auction BIGINT, price DOUBLE, name STRING) WITH ('connector' = 'print');
    INSERT INTO o SELECT auction, price, name FROM ({ranked_query(1, False)}) t
      JOIN people ON t.bidder = people.id;
    """,
    "top2_ranked_left_join_people_into_print": f"""{FLINK_TABLES}
    CREATE TABLE o (auction BIGINT, rn BIGINT, name STRING) WITH ('connector' = 'print');
    INSERT INTO o SELECT auction, rn, name FROM ({ranked_query(2, True)}) t
      LEFT JOIN people ON t.bidder = people.id;
    """,
    "people_left_join_top2_into_upsert": f"""{FLINK_TABLES}
    CREATE TABLE o (id BIGINT, auction BIGINT, price DOUBLE,
      PRIMARY KEY (id, auction, price) NOT ENFORCED)
      WITH ('connector' = 'blackhole');
    INSERT INTO o SELECT people.id, t.auction, t.price FROM people
      LEFT JOIN ({ranked_query(2, False)}) t ON people.id = t.bidder;
    """,
}


@requires_flink
@pytest.mark.parametrize("case", sorted(MODES_CASES))
def test_a_join_over_a_tops_updates_has_flinks_modes(case: str, tmp_path: Path) -> None:
    checked_flink_python()
    flowc_text = textwrap.dedent(MODES_CASES[case])
    flink_text = flowc_text.replace("'connector' = 'files'", "'connector' = 'filesystem'")
    flink_text = flink_text.replace("'path' = 'in'", f"'path' = '{tmp_path}'")
    statements = [s.strip() for s in flink_text.split(";") if s.strip()]
    asked = {"as_written": statements}
    if "upsert" in case:
        asked["deduplicated"] = [*statements[:-1], statements[-1] + " ON CONFLICT DO DEDUPLICATE"]
    plans: dict[str, list[list[object]] | str] = ask_flink(PROBE, asked)
    plan = plans["as_written"]
    if "upsert" in case:
        assert isinstance(plan, str) and "upsert key that differs" in plan, plan
        plan = plans["deduplicated"]
        flowc_text = flowc_text.replace("'connector' = 'blackhole'", "'connector' = 'files', "
                                        "'path' = 'out', 'format' = 'json'")  # fmt: skip
    assert not isinstance(plan, str), plan
    text = "SET sql.dialect = 'flink';\n" + flowc_text
    job = flowc.compile(text, "d.flow")
    assert not [d for d in job.diagnostics if d.severity.name == "ERROR"], job.diagnostics
    modes = flowc_modes(job.stream_graph)
    assert ("rank", "I,UB,UA,D") in modes
    assert modes == flink_modes(plan)
    flink = [mode for _, kind, mode in plan if kind == "Join"]
    ours = [n.changelog_mode for n in job.stream_graph.nodes.values() if "Join" in n.name]
    assert ours == flink == ["I,UB,UA,D"], (ours, flink)
    if "upsert" in case:  # it runs on Spark, as the two processors
        spark = flowc.compile(text, "d.flow", for_spark=True)
        kinds = sorted(p.kind for p in spark.spark_plan.changelog_processors.values())
        assert kinds == ["JOIN", "TOP"], kinds
