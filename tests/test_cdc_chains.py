"""A CDC source's changes into chains of updating steps on Spark (issue 28, item 4;
docs/language.md, "Updating pipelines over CDC changes").

A `debezium-json` source with a PRIMARY KEY feeds, in two jobs, an AGGREGATE whose
updates another AGGREGATE counts, a TOP whose updates an AGGREGATE sums, an AGGREGATE
whose updates a TOP ranks, and an AGGREGATE's and a TOP's view each JOINed with an
append-only source: the first stateful step takes the source's changes as its retract
input (a -U carrying the full old row, as Flink's debezium-json gives it), then each step
consumes the one before it as over an insert-only source. And a WHERE after the
AGGREGATE over the changes, the upsert sink deleting a key by a -U that passes it (files
and PostgreSQL). Four micro-batches (one envelope file each, increasing modification
times) in three runs on one checkpoint (two restarts), each upsert table against plain
Python: the envelopes applied to the current rows, then each chain computed over them (a
final table is a function of its inputs' current rows, retractions included). Then the
shapes still refused, and Flink's results and changelog modes for the SQL forms (opt-in).
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc.runtime.run import run_job
from tests.helpers.cdc_envelopes import current_rows
from tests.helpers.compile_errors import compile_errors
from tests.helpers.files import upsert_table
from tests.helpers.flink import (
    COLLECT_CHANGELOG,
    ask_flink,
    checked_flink_python,
    requires_flink,
)

HEAD = """\
SET max_parallelism = 8;
CREATE SOURCE products (id BIGINT, category STRING, price BIGINT,
    PRIMARY KEY (id) NOT ENFORCED)
  WITH (connector = 'files', path = 'in', format = 'debezium-json',
        max_files_per_trigger = 1);
CREATE SOURCE cats (cat STRING, label STRING)
  WITH (connector = 'files', path = 'cats', format = 'json', max_files_per_trigger = 1);
"""


def sink(name: str, key: str) -> str:
    return (
        f"CREATE SINK {name} WITH (connector = 'files', path = 'out/{name}', format = 'json',\n"
        f"  mode = 'update', key = '{key}');\n"
    )


#: Each INSERT: its sink's key, the view it reads (or none) and its text.
INSERTS: dict[str, tuple[str, str, str]] = {
    "per_total": (
        "total",
        "",
        """INSERT INTO per_total FROM products |> KEY BY category |> AGGREGATE sum(price) AS total
  |> KEY BY total |> AGGREGATE count(*) AS n;""",
    ),
    "top_sums": (
        "category",
        "",
        """INSERT INTO top_sums FROM products |> KEY BY category |> TOP 2 BY price DESC
  |> KEY BY category |> AGGREGATE sum(price) AS top_sum, count(*) AS n, min(price) AS low;""",
    ),
    "best_categories": (
        "category",
        "",
        """INSERT INTO best_categories FROM products |> KEY BY category
  |> AGGREGATE sum(price) AS total, count(*) AS n |> TOP 2 BY total DESC;""",
    ),
    "labelled_totals": (
        "category",
        "CREATE VIEW totals AS FROM products |> KEY BY category |> AGGREGATE sum(price) AS total;",
        """INSERT INTO labelled_totals FROM totals |> JOIN cats ON category = cat
  |> SELECT category, total, label;""",
    ),
    "labelled_tops": (
        "category, id",
        "CREATE VIEW tops AS FROM products |> WHERE id > 0 |> KEY BY category"
        " |> TOP 1 BY price DESC;",
        """INSERT INTO labelled_tops FROM tops |> JOIN cats ON category = cat
  |> SELECT id, category, price, label;""",
    ),
    "filtered_totals": (
        "category",
        "",
        """INSERT INTO filtered_totals FROM products |> KEY BY category
  |> AGGREGATE sum(price) AS total |> WHERE total > 10;""",
    ),
}

#: The jobs the Spark test runs: the chains, then the JOINs (five queries of these
#: processors at once start more Python workers than a loaded two-core machine connects
#: in Spark's 10 s).
JOBS = [
    ("per_total", "top_sums", "best_categories"),
    ("labelled_totals", "labelled_tops", "filtered_totals"),
]


def program(names: tuple[str, ...]) -> str:
    """The job of the INSERTs ``names``, with their sinks and views."""
    parts = [HEAD]
    parts += [sink(name, INSERTS[name][0]) for name in names]
    parts += [INSERTS[name][1] + "\n" for name in names if INSERTS[name][1]]
    parts += [INSERTS[name][2] + "\n" for name in names]
    return "".join(parts)


Row = dict[str, Any]
Envelope = tuple[str, Row | None, Row | None]


def product(i: int, category: str, price: int) -> Row:
    return {"id": i, "category": category, "price": price}


#: One envelope file (micro-batch) each. No two categories tie on a total in the top two,
#: no two products of a category on a price (flowc orders ties by the rows, Flink by
#: arrival); two categories share a total (the count per total is 2).
BATCHES: list[list[Envelope]] = [
    [
        ("r", None, product(1, "a", 10)),
        ("c", None, product(2, "a", 20)),
        ("c", None, product(3, "b", 33)),
        ("c", None, product(4, "c", 6)),
        ("c", None, product(5, "c", 25)),
        ("c", None, product(-1, "d", 7)),
    ],
    [
        ("u", product(1, "a", 10), product(1, "b", 12)),  # moves category
        ("u", product(3, "b", 33), product(3, "b", 18)),  # b's best now 18
        ("c", None, product(6, "a", 11)),
    ],
    [
        ("d", product(2, "a", 20), None),  # a's best leaves: 6 is a's best
        ("u", product(5, "c", 25), product(5, "c", 40)),
        ("u", product(-1, "d", 7), product(-1, "d", 8)),
        ("c", None, product(7, "d", 2)),
    ],
    [
        ("u", product(1, "b", 12), product(1, "a", 9)),  # back
        ("d", product(4, "c", 6), None),
        ("u", product(6, "a", 11), product(6, "a", 1)),  # within a's top, out of first
        ("c", None, product(8, "b", 2)),
    ],
]

#: The append-only labels read alongside (one file per micro-batch; "c" arrives late).
CATS: list[list[Row]] = [
    [{"cat": "a", "label": "A"}, {"cat": "b", "label": "B"}],
    [{"cat": "d", "label": "D"}],
    [],
    [{"cat": "c", "label": "C"}],
]

#: The micro-batches of each run (each run a restart on the same checkpoint).
RUNS = [[0], [1, 2], [3]]


def write_files(folder: Path, index: int) -> None:
    """Micro-batch ``index``'s envelopes and labels, with increasing modification times."""
    stamp = 1_700_000_000 + index * 10
    envelopes = folder / "in" / f"part-{index:03d}.json"
    labels = folder / "cats" / f"part-{index:03d}.json"
    for path in (envelopes, labels):
        path.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        json.dumps({"before": b, "after": a, "op": op, "source": {"table": "p"}, "ts_ms": index})
        for op, b, a in BATCHES[index]
    ]
    envelopes.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    labels.write_text("".join(json.dumps(r) + "\n" for r in CATS[index]), encoding="utf-8")
    for path in (envelopes, labels):
        os.utime(path, (stamp, stamp))


def by_category(rows: dict[int, Row]) -> dict[str, list[Row]]:
    grouped: dict[str, list[Row]] = {}
    for row in rows.values():
        grouped.setdefault(row["category"], []).append(row)
    return grouped


def expected_tables(rows: dict[int, Row], labels: dict[str, str]) -> dict[str, list[Row]]:
    """Each sink's table as Flink's semantics leave it over the current ``rows``."""
    grouped = by_category(rows)
    totals = {c: sum(r["price"] for r in members) for c, members in grouped.items()}
    per_total: dict[int, int] = {}
    for total in totals.values():
        per_total[total] = per_total.get(total, 0) + 1
    top_sums = []
    for category, members in grouped.items():
        top = sorted(members, key=lambda r: r["price"], reverse=True)[:2]
        prices = [r["price"] for r in top]
        top_sums.append(
            {"category": category, "top_sum": sum(prices), "n": len(prices), "low": min(prices)}
        )
    ranked = sorted(totals.items(), key=lambda item: item[1], reverse=True)[:2]
    # no tie decides a top (flowc orders ties by the rows, Flink by arrival)
    descending = sorted(totals.values(), reverse=True)
    assert len(descending) < 3 or descending[1] > descending[2]
    assert all(len({r["price"] for r in m}) == len(m) for m in grouped.values())
    best = [{"category": c, "total": t, "n": len(grouped[c])} for c, t in ranked]
    labelled_totals = [
        {"category": c, "total": t, "label": labels[c]} for c, t in totals.items() if c in labels
    ]
    labelled_tops = []
    for category, members in grouped.items():
        kept = [r for r in members if r["id"] > 0]
        if kept and category in labels:
            first = max(kept, key=lambda r: r["price"])
            labelled_tops.append({**first, "label": labels[category]})
    return {
        "filtered_totals": [{"category": c, "total": t} for c, t in totals.items() if t > 10],
        "per_total": [{"total": t, "n": n} for t, n in per_total.items()],
        "top_sums": top_sums,
        "best_categories": best,
        "labelled_totals": labelled_totals,
        "labelled_tops": labelled_tops,
    }


def ordered(rows: list[Row]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for r in rows)


@pytest.mark.parametrize("names", JOBS, ids=["chains", "joins"])
def test_cdc_changes_through_updating_chains_across_micro_batches_and_restarts(
    spark: Any, tmp_path: Path, names: tuple[str, ...]
) -> None:
    text = program(names)
    flow = tmp_path / "job.flow"
    flow.write_text(text, encoding="utf-8")
    job = flowc.compile(text, str(flow), for_spark=True)
    processors = job.spark_plan.changelog_processors.values()
    # each INSERT's consumer (a JOIN's), after the step reading the changes but where
    # the AGGREGATE reading them is the consumer (a WHERE after it)
    assert [p.consumer for p in processors].count(True) == len(names)
    assert len(processors) == 2 * len(names) - ("filtered_totals" in names)
    done = 0
    for run in RUNS:
        for index in run:
            write_files(tmp_path, index)
        job = flowc.compile(text, str(flow), for_spark=True)
        report = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
        assert all(q.error is None for q in report.queries), report
        done = run[-1] + 1
        rows = current_rows(BATCHES[:done])
        labels = {r["cat"]: r["label"] for batch in CATS[:done] for r in batch}
        expected = expected_tables(rows, labels)
        for name in names:
            got = upsert_table(tmp_path / "out" / name)
            assert ordered(got) == ordered(expected[name]), (name, done)
    assert done == len(BATCHES)
    if "per_total" in names:
        counts = {r["total"]: r["n"] for r in upsert_table(tmp_path / "out" / "per_total")}
        assert counts[10] == 2


def test_a_filtered_aggregate_of_changes_into_postgres(
    spark: Any, tmp_path: Path, postgres: dict[str, Any]
) -> None:
    """The WHERE after the AGGREGATE into a postgres upsert sink (its own changelog path,
    where a '-U' passing the filter deletes the key unless upserted): the table after the
    same runs equals the Python's filter of the totals (a's total leaves it in the last
    micro-batch, d's never passes)."""
    import psycopg

    text = (
        HEAD + f"CREATE SINK pg WITH (connector = 'postgres', host = '{postgres['host']}', "
        f"port = {postgres['port']}, database = '{postgres['dbname']}', user = 'postgres', "
        "table = 'cdc_filtered', key = 'category', mode = 'update');\n"
        + INSERTS["filtered_totals"][2].replace("filtered_totals", "pg")
        + "\n"
    )
    flow = tmp_path / "job.flow"
    flow.write_text(text, encoding="utf-8")
    for run in RUNS:
        for index in run:
            write_files(tmp_path, index)
        job = flowc.compile(text, str(flow), for_spark=True)
        report = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
        assert [q.error for q in report.queries] == [None], report
        with psycopg.connect(**postgres) as conn:
            rows = conn.execute("SELECT category, total FROM cdc_filtered").fetchall()
        done = run[-1] + 1
        wanted = expected_tables(current_rows(BATCHES[:done]), {})["filtered_totals"]
        assert sorted(rows) == sorted((r["category"], r["total"]) for r in wanted), done
    assert "a" not in {category for category, _ in rows}


REFUSED_HEAD = HEAD + sink("s", "k")


@pytest.mark.parametrize(
    "steps",
    [
        # a WHERE after the consumer, a third stateful step, a computed step after it
        "|> KEY BY category |> AGGREGATE sum(price) AS total |> KEY BY total"
        " |> AGGREGATE count(*) AS n |> WHERE n > 1 |> SELECT total AS k, n",
        "|> KEY BY category |> AGGREGATE sum(price) AS total |> KEY BY total"
        " |> AGGREGATE count(*) AS n |> KEY BY n |> AGGREGATE count(*) AS k",
        "|> KEY BY category |> TOP 1 BY price DESC |> KEY BY category"
        " |> AGGREGATE count(*) AS n |> EXTEND n * 2 AS k",
    ],
)
def test_chains_flowc_does_not_run_are_refused_at_the_producer(steps: str) -> None:
    program = REFUSED_HEAD + f"INSERT INTO s FROM products {steps};\n"
    errors = compile_errors(program)
    cdc = [(line, message) for code, line, message in errors if code == "E0299"]
    assert cdc and cdc[0][0] == 10, errors
    assert "takes the changes of source 'products'" in cdc[0][1], errors


#: The SQL forms of the job's INSERTs (Flink's dialect): name: (sink columns, sink key,
#: query). Flink 2.3 gives a JOIN of an AGGREGATE's or a TOP's updates no upsert key, so
#: into an upsert sink it plans them only with ON CONFLICT DO DEDUPLICATE (docs/language.md,
#: "A JOIN over an AGGREGATE's updates"), whose table flowc writes.
TOTALS_SQL = "SELECT category, SUM(price) AS total FROM products GROUP BY category"
TOP_SQL = (
    "SELECT id, category, price FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY category "
    "ORDER BY price DESC) AS rn FROM products{where}) WHERE rn <= {n}"
)
SQL_FORMS: dict[str, tuple[str, str, str]] = {
    "per_total": (
        "total BIGINT, n BIGINT",
        "total",
        f"SELECT total, COUNT(*) AS n FROM ({TOTALS_SQL}) GROUP BY total",
    ),
    "top_sums": (
        "category STRING, top_sum BIGINT, n BIGINT, low BIGINT",
        "category",
        "SELECT category, SUM(price) AS top_sum, COUNT(*) AS n, MIN(price) AS low FROM ("
        + TOP_SQL.format(where="", n=2)
        + ") GROUP BY category",
    ),
    "best_categories": (
        "category STRING, total BIGINT, n BIGINT",
        "category",
        "SELECT category, total, n FROM (SELECT *, ROW_NUMBER() OVER (ORDER BY total DESC) "
        "AS rn FROM (SELECT category, SUM(price) AS total, COUNT(*) AS n FROM products "
        "GROUP BY category)) WHERE rn <= 2",
    ),
    "labelled_totals": (
        "category STRING, total BIGINT, label STRING",
        "category",
        f"SELECT t.category, t.total, c.label FROM ({TOTALS_SQL}) t JOIN cats c "
        "ON t.category = c.cat",
    ),
    "filtered_totals": (
        "category STRING, total BIGINT",
        "category",
        f"{TOTALS_SQL} HAVING SUM(price) > 10",
    ),
    "labelled_tops": (
        "id BIGINT, category STRING, price BIGINT, label STRING",
        "category, id",
        "SELECT t.id, t.category, t.price, c.label FROM ("
        + TOP_SQL.format(where=" WHERE id > 0", n=1)
        + ") t JOIN cats c ON t.category = c.cat",
    ),
}

SQL_HEAD = """\
CREATE TABLE products (id BIGINT, category STRING, price BIGINT,
  PRIMARY KEY (id) NOT ENFORCED)
  WITH ('connector' = 'files', 'path' = 'in', 'format' = 'debezium-json');
CREATE TABLE cats (cat STRING, label STRING)
  WITH ('connector' = 'files', 'path' = 'cats', 'format' = 'json');
"""


def sql_program(name: str) -> str:
    """The SQL form of INSERT ``name``, into a files table with a PRIMARY KEY (upsert)."""
    columns, key, query = SQL_FORMS[name]
    return (
        SQL_HEAD
        + f"CREATE TABLE o ({columns}, PRIMARY KEY ({key}) NOT ENFORCED)\n"
        + "  WITH ('connector' = 'files', 'path' = 'out', 'format' = 'json');\n"
        + f"INSERT INTO o {query};\n"
    )


def as_flink(program: str, folder: Path) -> list[str]:
    """``program``'s statements as Flink runs them: filesystem tables reading ``folder``'s
    files, the upsert sink a blackhole (which takes I,UA,D as an upsert sink does)."""
    body = program.replace(
        "'connector' = 'files', 'path' = 'out', 'format' = 'json'", "'connector' = 'blackhole'"
    )
    body = body.replace("'connector' = 'files'", "'connector' = 'filesystem'")
    body = body.replace("'path' = 'in'", f"'path' = '{folder / 'in'}'")
    body = body.replace("'path' = 'cats'", f"'path' = '{folder / 'cats'}'")
    return [s.strip() for s in body.split(";") if s.strip()]


@requires_flink
def test_the_sql_forms_changelog_modes_equal_flinks(tmp_path: Path) -> None:
    """Each SQL form's nodes (the source, each GroupAggregate and Rank, the sink's input)
    and Join in flowc's plan have the changelog modes of Flink 2.3's ``EXPLAIN
    CHANGELOG_MODE``, whose plan has no ChangelogNormalize; each runs on Spark as its two
    processors."""
    from tests.helpers.changelog_flink import PROBE, flink_modes, flowc_modes

    checked_flink_python()
    asked: dict[str, list[str]] = {}
    for name in SQL_FORMS:
        statements = as_flink(sql_program(name), tmp_path)
        asked[name] = statements
        asked[f"{name}_deduplicated"] = [
            *statements[:-1],
            statements[-1] + " ON CONFLICT DO DEDUPLICATE",
        ]
    plans = ask_flink(PROBE, asked)
    for name in SQL_FORMS:
        plan = plans[name]
        if name.startswith("labelled"):
            assert isinstance(plan, str) and "upsert key that differs" in plan, plan
            plan = plans[f"{name}_deduplicated"]
        assert not isinstance(plan, str), (name, plan)
        program = "SET sql.dialect = 'flink';\n" + sql_program(name)
        job = flowc.compile(program, "d.flow", for_spark=True)
        assert flowc_modes(job.stream_graph) == flink_modes(plan), name
        assert ("source", "I,UB,UA,D") in flink_modes(plan), name
        # an update's -U carries the old row: no ChangelogNormalize before the first step
        assert "ChangelogNormalize" not in [kind for _, kind, _ in plan], name
        flink_joins = [mode for _, kind, mode in plan if kind == "Join"]
        ours = [n.changelog_mode for n in job.stream_graph.nodes.values() if "Join" in n.name]
        assert ours == flink_joins, name
        assert len(job.spark_plan.changelog_processors) == 1 + (name != "filtered_totals"), name


@requires_flink
def test_flinks_results_are_the_pythons_tables(tmp_path: Path) -> None:
    """Flink 2.3 reading all the envelopes (one file, in order) and the labels with the
    SQL forms: its change rows applied as an upsert sink applies them (+I/+U upsert by
    the sink's key, -D delete, -U skipped) end with the tables the Python gives, which the
    Spark test holds flowc's to."""
    envelopes = [e for batch in BATCHES for e in batch]
    (tmp_path / "in").mkdir()
    (tmp_path / "cats").mkdir()
    (tmp_path / "in" / "all.json").write_text(
        "".join(
            json.dumps({"before": b, "after": a, "op": op, "source": {"table": "p"}}) + "\n"
            for op, b, a in envelopes
        ),
        encoding="utf-8",
    )
    (tmp_path / "cats" / "all.json").write_text(
        "".join(json.dumps(r) + "\n" for batch in CATS for r in batch), encoding="utf-8"
    )
    asked = {}
    for name, (_, _, query) in SQL_FORMS.items():
        asked[name] = [*as_flink(SQL_HEAD, tmp_path), query]
    collected = ask_flink(COLLECT_CHANGELOG, asked)
    labels = {r["cat"]: r["label"] for batch in CATS for r in batch}
    wanted = expected_tables(current_rows(BATCHES), labels)
    for name, (columns, key, _) in SQL_FORMS.items():
        names = [c.split()[0] for c in columns.split(", ")]
        keys = key.split(", ")
        table: dict[tuple[Any, ...], Row] = {}
        for kind, values in collected[name]:
            row = dict(zip(names, values, strict=True))
            if kind in ("+I", "+U"):
                table[tuple(row[k] for k in keys)] = row
            elif kind == "-D" or (kind == "-U" and name == "filtered_totals"):
                table.pop(tuple(row[k] for k in keys))  # a WHERE's UB deletes (FLINK-9528)
        assert ordered(list(table.values())) == ordered(wanted[name]), name
    assert any(kind == "-D" for kind, _ in collected["best_categories"])
    # the filter drops a key's new row, its old one passing (a -U with no +U)
    kinds = [kind for kind, _ in collected["filtered_totals"]]
    assert any(
        k == "-U" and (i + 1 == len(kinds) or kinds[i + 1] != "+U") for i, k in enumerate(kinds)
    )
