"""A debezium-json source's changelog mode against real Flink 2.3's ``EXPLAIN
CHANGELOG_MODE`` (opt-in: needs PyFlink, tests/helpers/flink.py): the same Flink-dialect
programs, flowc's files tables as Flink's filesystem tables of the same format, compared
as tests/test_changelog_against_flink.py compares them (the source's mode and the mode
of what each sink reads)."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest

import flowc
from tests.helpers.cdc_join_flink import (
    Change,
    Record,
    envelope_records,
    flink_join,
    group_aggregate,
    materialized,
    upserted,
)
from tests.helpers.changelog_flink import PROBE, flink_modes, flowc_modes
from tests.helpers.fake_state import Handle
from tests.helpers.flink import (
    COLLECT_CHANGELOG,
    ask_flink,
    checked_flink_python,
    requires_flink,
)

pytestmark = requires_flink

ORDERS = """CREATE TABLE orders (order_id BIGINT, customer_id BIGINT, amount BIGINT)
          WITH ('connector' = 'files', 'path' = 'in', 'format' = 'json');"""
CUSTOMERS = """CREATE TABLE customers (id BIGINT, name STRING, country STRING)
          WITH ('connector' = 'files', 'path' = 'in', 'format' = 'debezium-json');"""
PAYMENTS = """CREATE TABLE payments (pid BIGINT, cid BIGINT, amount BIGINT)
          WITH ('connector' = 'files', 'path' = 'in', 'format' = 'debezium-json');"""

PROGRAMS = {
    "scan_into_print": """
        CREATE TABLE s (id BIGINT, name STRING, n INT)
          WITH ('connector' = 'files', 'path' = 'in', 'format' = 'debezium-json');
        CREATE TABLE o (id BIGINT, name STRING) WITH ('connector' = 'print');
        INSERT INTO o SELECT id, name FROM s WHERE n > 1;
    """,
    "keyed_scan_into_print": """
        CREATE TABLE s (id BIGINT, name STRING, n INT, PRIMARY KEY (id) NOT ENFORCED)
          WITH ('connector' = 'files', 'path' = 'in', 'format' = 'debezium-json',
                'debezium-json.schema-include' = 'true');
        CREATE TABLE o (id BIGINT, twice INT) WITH ('connector' = 'print');
        INSERT INTO o SELECT id, n * 2 AS twice FROM s;
    """,
    # Into an upsert sink keyed by the source's key: Flink drops UPDATE_BEFORE after the
    # scan (DropUpdateBefore, the Calc I,UA,D), but a WHERE's Calc reads and emits it.
    "keyed_scan_into_upsert": """
        CREATE TABLE s (id BIGINT, name STRING, n INT, PRIMARY KEY (id) NOT ENFORCED)
          WITH ('connector' = 'files', 'path' = 'in', 'format' = 'debezium-json');
        CREATE TABLE o (id BIGINT, name STRING, PRIMARY KEY (id) NOT ENFORCED)
          WITH ('connector' = 'files', 'path' = 'out', 'format' = 'json');
        INSERT INTO o SELECT id, UPPER(name) FROM s;
    """,
    "keyed_scan_filtered_into_upsert": """
        CREATE TABLE s (id BIGINT, name STRING, n INT, PRIMARY KEY (id) NOT ENFORCED)
          WITH ('connector' = 'files', 'path' = 'in', 'format' = 'debezium-json');
        CREATE TABLE o (id BIGINT, name STRING, PRIMARY KEY (id) NOT ENFORCED)
          WITH ('connector' = 'files', 'path' = 'out', 'format' = 'json');
        INSERT INTO o SELECT id, name FROM s WHERE n > 1;
    """,
    # Flink's regular join consuming updates: the Join and the Calc after it carry the CDC
    # side's kinds, I,UB,UA,D (docs/language.md, "Updating pipelines on Spark")
    "join_into_print": """
        CREATE TABLE orders (order_id BIGINT, customer_id BIGINT, amount BIGINT)
          WITH ('connector' = 'files', 'path' = 'in', 'format' = 'json');
        CREATE TABLE customers (id BIGINT, name STRING, country STRING)
          WITH ('connector' = 'files', 'path' = 'in', 'format' = 'debezium-json');
        CREATE TABLE o (order_id BIGINT, amount BIGINT, name STRING)
          WITH ('connector' = 'print');
        INSERT INTO o SELECT order_id, amount, name
          FROM orders JOIN customers ON orders.customer_id = customers.id;
    """,
    # Both sides CDC, and outer JOINs over changes (LEFT of an append stream with a CDC
    # source, RIGHT, FULL of two CDC sources, a CDC stream LEFT JOIN an append one): the
    # Join and the Calc after it are I,UB,UA,D, as flowc's ChangelogJoin emits.
    "join_cdc_with_cdc_into_print": f"""
        {PAYMENTS}
        {CUSTOMERS}
        CREATE TABLE o (pid BIGINT, amount BIGINT, name STRING) WITH ('connector' = 'print');
        INSERT INTO o SELECT pid, amount, name
          FROM payments JOIN customers ON payments.cid = customers.id;
    """,
    "left_join_into_print": f"""
        {ORDERS}
        {CUSTOMERS}
        CREATE TABLE o (order_id BIGINT, amount BIGINT, name STRING)
          WITH ('connector' = 'print');
        INSERT INTO o SELECT order_id, amount, name
          FROM orders LEFT JOIN customers ON orders.customer_id = customers.id;
    """,
    "right_join_into_print": f"""
        {ORDERS}
        {CUSTOMERS}
        CREATE TABLE o (order_id BIGINT, id BIGINT, name STRING) WITH ('connector' = 'print');
        INSERT INTO o SELECT order_id, id, name
          FROM orders RIGHT JOIN customers ON orders.customer_id = customers.id;
    """,
    "full_join_cdc_with_cdc_into_print": f"""
        {PAYMENTS}
        {CUSTOMERS}
        CREATE TABLE o (pid BIGINT, id BIGINT, name STRING) WITH ('connector' = 'print');
        INSERT INTO o SELECT pid, id, name
          FROM payments FULL JOIN customers ON payments.cid = customers.id;
    """,
    "cdc_left_join_append_into_print": f"""
        {ORDERS}
        {CUSTOMERS}
        CREATE TABLE o (order_id BIGINT, id BIGINT, name STRING) WITH ('connector' = 'print');
        INSERT INTO o SELECT order_id, id, name
          FROM customers LEFT JOIN orders ON orders.customer_id = customers.id;
    """,
    # A TOP over the changes (Flink's RetractStrategy Rank): with its rank into an upsert
    # sink keyed by the PER column and the rank the Rank is I,UA,D, without it into a
    # print sink I,UB,UA,D (docs/language.md, "Top-N over updates").
    "top_numbered_into_upsert": """
        CREATE TABLE s (id BIGINT, country STRING, score BIGINT, PRIMARY KEY (id) NOT ENFORCED)
          WITH ('connector' = 'files', 'path' = 'in', 'format' = 'debezium-json');
        CREATE TABLE o (id BIGINT, country STRING, score BIGINT, rn BIGINT,
          PRIMARY KEY (country, rn) NOT ENFORCED)
          WITH ('connector' = 'files', 'path' = 'out', 'format' = 'json');
        INSERT INTO o SELECT id, country, score, rn FROM (SELECT *, ROW_NUMBER() OVER
          (PARTITION BY country ORDER BY score DESC) AS rn FROM s WHERE id > 0) WHERE rn <= 2;
    """,
    "top_into_print": """
        CREATE TABLE s (id BIGINT, country STRING, score BIGINT, PRIMARY KEY (id) NOT ENFORCED)
          WITH ('connector' = 'files', 'path' = 'in', 'format' = 'debezium-json');
        CREATE TABLE o (id BIGINT, country STRING, score BIGINT) WITH ('connector' = 'print');
        INSERT INTO o SELECT id, country, score FROM (SELECT *, ROW_NUMBER() OVER
          (PARTITION BY country ORDER BY score DESC) AS rn FROM s) WHERE rn <= 2;
    """,
    # An AGGREGATE over the changes into an upsert sink keyed by its keys (Flink's
    # GroupAggregate with retraction), in the INSERT and through a view the INSERT alone
    # reads (Flink inlines it), a projection and a WHERE after the view (docs/language.md,
    # "Change-data capture input").
    "aggregate_into_upsert": f"""
        {CUSTOMERS}
        CREATE TABLE o (country STRING, n BIGINT, PRIMARY KEY (country) NOT ENFORCED)
          WITH ('connector' = 'files', 'path' = 'out', 'format' = 'json');
        INSERT INTO o SELECT country, COUNT(*) AS n FROM customers GROUP BY country;
    """,
    "aggregate_in_a_view_into_upsert": f"""
        {CUSTOMERS}
        CREATE VIEW v AS SELECT country, COUNT(*) AS n, MAX(id) AS top FROM customers
          GROUP BY country;
        CREATE TABLE o (country STRING, n BIGINT, top BIGINT, PRIMARY KEY (country) NOT ENFORCED)
          WITH ('connector' = 'files', 'path' = 'out', 'format' = 'json');
        INSERT INTO o SELECT * FROM v;
    """,
    "aggregate_in_a_view_filtered_into_upsert": f"""
        {CUSTOMERS}
        CREATE VIEW v AS SELECT country, COUNT(*) AS n, MAX(id) AS top FROM customers
          GROUP BY country;
        CREATE TABLE o (country STRING, n BIGINT, PRIMARY KEY (country) NOT ENFORCED)
          WITH ('connector' = 'files', 'path' = 'out', 'format' = 'json');
        INSERT INTO o SELECT country, n FROM v WHERE n > 1;
    """,
    "top_in_a_view_into_upsert": """
        CREATE TABLE s (id BIGINT, country STRING, score BIGINT, PRIMARY KEY (id) NOT ENFORCED)
          WITH ('connector' = 'files', 'path' = 'in', 'format' = 'debezium-json');
        CREATE VIEW best AS SELECT * FROM (SELECT *, ROW_NUMBER() OVER
          (PARTITION BY country ORDER BY score DESC) AS rn FROM s) WHERE rn <= 2;
        CREATE TABLE o (id BIGINT, country STRING, score BIGINT, rn BIGINT,
          PRIMARY KEY (country, rn) NOT ENFORCED)
          WITH ('connector' = 'files', 'path' = 'out', 'format' = 'json');
        INSERT INTO o SELECT id, country, score, rn FROM best;
    """,
    "aggregate_over_an_aggregate_in_a_view_into_upsert": f"""
        {CUSTOMERS}
        CREATE VIEW v AS SELECT country, COUNT(*) AS n FROM customers GROUP BY country;
        CREATE TABLE o (n BIGINT, countries BIGINT, PRIMARY KEY (n) NOT ENFORCED)
          WITH ('connector' = 'files', 'path' = 'out', 'format' = 'json');
        INSERT INTO o SELECT n, COUNT(*) AS countries FROM v GROUP BY n;
    """,
}

#: The JOINs over changes, each Join node's mode compared with Flink's.
JOINS = [name for name in PROGRAMS if "join" in name]

#: Without its rank, into an upsert sink keyed by the source's key: Flink 2.3 gives the
#: Rank no upsert key and refuses the INSERT unless it says ON CONFLICT DO DEDUPLICATE
#: (its SinkUpsertMaterializer then reads I,UB,UA,D), whose table flowc writes.
TOP_UNNUMBERED = """
    CREATE TABLE s (id BIGINT, country STRING, score BIGINT, PRIMARY KEY (id) NOT ENFORCED)
      WITH ('connector' = 'files', 'path' = 'in', 'format' = 'debezium-json');
    CREATE TABLE o (id BIGINT, country STRING, score BIGINT, PRIMARY KEY (id) NOT ENFORCED)
      WITH ('connector' = 'files', 'path' = 'out', 'format' = 'json');
    INSERT INTO o SELECT id, country, score FROM (SELECT *, ROW_NUMBER() OVER
      (PARTITION BY country ORDER BY score DESC) AS rn FROM s) WHERE rn <= 2;
"""

#: A files sink with a PRIMARY KEY (flowc's upsert table) as Flink's blackhole sink, which
#: takes inserts, updates after and deletes, as an upsert sink does.
UPSERT_SINK = "'connector' = 'files', 'path' = 'out', 'format' = 'json'"


def as_flink_sql(program: str, folder: Path) -> list[str]:
    """The program's statements as Flink runs them: files tables are filesystem tables."""
    body = program.replace(UPSERT_SINK, "'connector' = 'blackhole'")
    body = re.sub(r"'connector' = 'files'", "'connector' = 'filesystem'", body)
    body = body.replace("'path' = 'in'", f"'path' = '{folder}'")
    return [s.strip() for s in body.split(";") if s.strip()]


@pytest.fixture(scope="module")
def flink_plans(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[list[object]] | str]:
    checked_flink_python()
    folder = tmp_path_factory.mktemp("in")
    asked = {
        name: as_flink_sql(textwrap.dedent(program), folder) for name, program in PROGRAMS.items()
    }
    unnumbered = as_flink_sql(textwrap.dedent(TOP_UNNUMBERED), folder)
    asked["top_unnumbered"] = unnumbered
    asked["top_unnumbered_deduplicated"] = [
        *unnumbered[:-1],
        unnumbered[-1] + " ON CONFLICT DO DEDUPLICATE",
    ]
    plans: dict[str, list[list[object]] | str] = ask_flink(PROBE, asked)
    return plans


@pytest.mark.parametrize("case", sorted(PROGRAMS))
def test_cdc_changelog_modes_equal_flinks(
    case: str, flink_plans: dict[str, list[list[object]] | str]
) -> None:
    plan = flink_plans[case]
    assert not isinstance(plan, str), plan
    program = "SET sql.dialect = 'flink';\n" + textwrap.dedent(PROGRAMS[case])
    job = flowc.compile(program, "d.flow")
    assert not [d for d in job.diagnostics if d.severity.name == "ERROR"], job.diagnostics
    modes = flowc_modes(job.stream_graph)
    assert ("source", "I,UB,UA,D") in modes
    assert modes == flink_modes(plan)


@pytest.mark.parametrize("case", JOINS)
def test_a_join_consuming_changes_has_flinks_mode(
    case: str, flink_plans: dict[str, list[list[object]] | str]
) -> None:
    """The Join node itself, beside the sink's input the test above compares."""
    plan = flink_plans[case]
    assert not isinstance(plan, str), plan
    flink = [mode for _, kind, mode in plan if kind == "Join"]
    program = "SET sql.dialect = 'flink';\n" + textwrap.dedent(PROGRAMS[case])
    job = flowc.compile(program, "d.flow")
    ours = [n.changelog_mode for n in job.stream_graph.nodes.values() if "Join" in n.name]
    assert ours == flink == ["I,UB,UA,D"], (ours, flink)


#: The stream's rows (orders: inserts; payments: debezium envelopes) and the customers'.
COLLECTED_ORDERS = [(1, 10, 5), (2, 20, 7), (3, None, 1)]
COLLECTED_PAYMENTS: list[tuple[str, tuple[object, ...] | None, tuple[object, ...] | None]] = [
    ("c", None, (1, 10, 5)),
    ("c", None, (2, None, 5)),
    ("c", None, (4, 30, 1)),
    ("u", (4, 30, 1), (4, 10, 1)),
    ("c", None, (5, 20, 3)),
]
COLLECTED_CUSTOMERS: list[tuple[str, tuple[object, ...] | None, tuple[object, ...] | None]] = [
    ("c", None, (10, "ann", "FR")),
    ("u", (10, "ann", "FR"), (10, "ann", "DE")),
    ("d", (10, "ann", "DE"), None),
    ("c", None, (30, "cy", "UK")),
    ("c", None, (10, "anne", "IT")),
    ("c", None, (20, "bob", "US")),
    ("d", (20, "bob", "US"), None),  # order 2 and payment 5 padded again
]

#: name: (stream, JOIN kind, preserved sides)
COLLECTED = {
    "inner_cdc_with_cdc": ("payments", "", (False, False)),
    "left_append_with_cdc": ("orders", "LEFT", (True, False)),
    "right_append_with_cdc": ("orders", "RIGHT", (False, True)),
    "full_cdc_with_cdc": ("payments", "FULL", (True, True)),
    "left_cdc_with_cdc": ("payments", "LEFT", (True, False)),
}


def test_flinks_collected_join_changelog_is_the_one_computed_in_plain_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Flink 2.3 runs each JOIN over the same small changes; the table its changelog
    leaves (every current row) is the one tests/helpers/cdc_join_flink.py computes record
    by record, which the Spark tests hold ChangelogJoin to, and the one ChangelogJoin
    leaves, given every record in one micro-batch or each in its own."""
    checked_flink_python()
    names = {"orders": ORDER_COLUMNS, "payments": PAYMENT_COLUMNS, "customers": CUSTOMER_COLUMNS}

    def record(table: str, values: tuple[object, ...] | None) -> dict[str, object] | None:
        return None if values is None else dict(zip(names[table], values, strict=True))

    files = {
        "orders": [record("orders", r) for r in COLLECTED_ORDERS],
        "payments": [
            {"before": record("payments", b), "after": record("payments", a), "op": op}
            for op, b, a in COLLECTED_PAYMENTS
        ],
        "customers": [
            {"before": record("customers", b), "after": record("customers", a), "op": op}
            for op, b, a in COLLECTED_CUSTOMERS
        ],
    }
    for table, lines in files.items():
        (tmp_path / table).mkdir()
        (tmp_path / table / "part.json").write_text(
            "".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8"
        )
    asked = {}
    for name, (stream, kind, _) in COLLECTED.items():
        ddl = [
            f"CREATE TABLE {table} ({', '.join(f'{c} {TYPES[c]}' for c in names[table])}) "
            f"WITH ('connector' = 'filesystem', 'path' = '{tmp_path / table}', "
            f"'format' = '{'json' if table == 'orders' else 'debezium-json'}')"
            for table in (stream, "customers")
        ]
        join_column = names[stream][1]
        asked[name] = [
            *ddl,
            f"SELECT * FROM {stream} {kind} JOIN customers "
            f"ON {stream}.{join_column} = customers.id",
        ]
    collected: dict[str, list[list[Any]]] = ask_flink(COLLECT_CHANGELOG, asked)
    for name, (stream, _, preserved) in COLLECTED.items():
        records: list[Record] = (
            [(0, "+I", r) for r in COLLECTED_ORDERS]
            if stream == "orders"
            else envelope_records(0, COLLECTED_PAYMENTS)
        ) + envelope_records(1, COLLECTED_CUSTOMERS)
        every = range(6)
        flink = materialized([(k, tuple(r)) for k, r in collected[name]], every)
        computed = flink_join(records, ([1], [0]), (3, 3), preserved)
        assert materialized(computed, every) == flink, name
        assert any(None in row for row in flink) == any(preserved), name
        for bundles in ([records], [[r] for r in records]):
            ours = changelog_join_run(bundles, preserved, monkeypatch)
            assert set(upserted(ours, every).values()) == set(flink.values()), (name, bundles)


ORDER_COLUMNS = ("order_id", "customer_id", "amount")
PAYMENT_COLUMNS = ("pid", "cid", "amount")
CUSTOMER_COLUMNS = ("id", "name", "country")
TYPES = {c: "STRING" if c in ("name", "country") else "BIGINT" for c in
         (*ORDER_COLUMNS, *PAYMENT_COLUMNS, *CUSTOMER_COLUMNS)}  # fmt: skip


def changelog_join_run(
    bundles: list[list[Record]], preserved: tuple[bool, bool], monkeypatch: pytest.MonkeyPatch
) -> list[Change]:
    """flowc's ChangelogJoin (generated_runtime) in plain Python, one call per bundle
    (micro-batch), its state kept in memory between them (tests/helpers/fake_state.py);
    its changelog."""
    from pyspark.sql import Row, types

    from flowc.spark import generated_runtime

    monkeypatch.setattr(generated_runtime, "Row", Row, raising=False)
    for name in ("StructType", "StructField", "BinaryType"):
        monkeypatch.setattr(generated_runtime, name, getattr(types, name), raising=False)
    names = ["l0", "l1", "l2", "r0", "r1", "r2"]
    join = generated_runtime.ChangelogJoin(
        names[:3], names[3:], ["l1"], ["r0"], [0, 1, 2, 3, 4, 5], names, preserved
    )
    join.init(Handle())
    given = Row(*names, "__flowc_side", "__flowc_op")
    out: list[Change] = []
    for bundle in bundles:
        rows = [
            given(*((*v, None, None, None) if side == 0 else (None, None, None, *v)), side, kind)
            for side, kind, v in bundle
        ]
        emitted = join.handleInputRows((0,), iter(rows), None)  # type: ignore[arg-type]
        out += [(r["__flowc_op"], tuple(r)[:-1]) for r in emitted]
    return out


def test_a_top_without_its_rank_has_flinks_deduplicating_modes(
    flink_plans: dict[str, list[list[object]] | str],
) -> None:
    """Flink refuses the INSERT as written (no upsert key); flowc runs it, its modes those
    of Flink's plan with ON CONFLICT DO DEDUPLICATE (the Rank I,UB,UA,D)."""
    refused = flink_plans["top_unnumbered"]
    assert isinstance(refused, str) and "upsert key that differs" in refused, refused
    plan = flink_plans["top_unnumbered_deduplicated"]
    assert not isinstance(plan, str), plan
    job = flowc.compile("SET sql.dialect = 'flink';\n" + textwrap.dedent(TOP_UNNUMBERED), "d.flow")
    assert not [d for d in job.diagnostics if d.severity.name == "ERROR"], job.diagnostics
    modes = flowc_modes(job.stream_graph)
    assert ("rank", "I,UB,UA,D") in modes
    assert modes == flink_modes(plan)


#: A JOIN over an AGGREGATE's updates (Flink's regular join over a GROUP BY; flowc's
#: producer ChangelogOperator into ChangelogJoin): the GroupAggregate I,UB,UA, the Join
#: the union of its inputs' kinds (I,UB,UA over an append side; with a CDC side or an
#: outer kind I,UB,UA,D), into print sinks, and into an upsert sink, which Flink takes only
#: with ON CONFLICT DO DEDUPLICATE (the join has no upsert key) and whose table flowc writes.
ORDER_TOTALS = "(SELECT customer_id, SUM(amount) AS total FROM orders GROUP BY customer_id) t"
APPEND_CUSTOMERS = """CREATE TABLE customers (id BIGINT, name STRING, country STRING)
          WITH ('connector' = 'files', 'path' = 'in', 'format' = 'json');"""
PRINTED = "CREATE TABLE o (id BIGINT, name STRING, total BIGINT) WITH ('connector' = 'print');"
AGGREGATE_JOINS = {
    "append_join_aggregate_into_print": f"""
        {ORDERS}
        {APPEND_CUSTOMERS}
        {PRINTED}
        INSERT INTO o SELECT c.id, c.name, t.total FROM customers c
          JOIN {ORDER_TOTALS} ON c.id = t.customer_id;
    """,
    "cdc_join_aggregate_into_print": f"""
        {ORDERS}
        {CUSTOMERS}
        {PRINTED}
        INSERT INTO o SELECT c.id, c.name, t.total FROM customers c
          JOIN {ORDER_TOTALS} ON c.id = t.customer_id;
    """,
    "aggregate_left_join_append_into_print": f"""
        {ORDERS}
        {APPEND_CUSTOMERS}
        CREATE TABLE o (customer_id BIGINT, name STRING, total BIGINT)
          WITH ('connector' = 'print');
        INSERT INTO o SELECT t.customer_id, c.name, t.total FROM {ORDER_TOTALS}
          LEFT JOIN customers c ON c.id = t.customer_id;
    """,
    "append_right_join_aggregate_into_print": f"""
        {ORDERS}
        {APPEND_CUSTOMERS}
        {PRINTED}
        INSERT INTO o SELECT c.id, c.name, t.total FROM customers c
          RIGHT JOIN {ORDER_TOTALS} ON c.id = t.customer_id;
    """,
    "append_full_join_aggregate_into_print": f"""
        {ORDERS}
        {APPEND_CUSTOMERS}
        CREATE TABLE o (id BIGINT, customer_id BIGINT, total BIGINT)
          WITH ('connector' = 'print');
        INSERT INTO o SELECT c.id, t.customer_id, t.total FROM customers c
          FULL JOIN {ORDER_TOTALS} ON c.id = t.customer_id;
    """,
    "append_join_aggregate_into_upsert": f"""
        {ORDERS}
        {APPEND_CUSTOMERS}
        CREATE TABLE o (id BIGINT, name STRING, total BIGINT, PRIMARY KEY (id) NOT ENFORCED)
          WITH ('connector' = 'files', 'path' = 'out', 'format' = 'json');
        INSERT INTO o SELECT c.id, c.name, t.total FROM customers c
          JOIN {ORDER_TOTALS} ON c.id = t.customer_id;
    """,
}


@pytest.fixture(scope="module")
def aggregate_join_plans(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[str, list[list[object]] | str]:
    checked_flink_python()
    folder = tmp_path_factory.mktemp("in")
    asked = {}
    for name, program in AGGREGATE_JOINS.items():
        statements = as_flink_sql(textwrap.dedent(program), folder)
        asked[name] = statements
        if "upsert" in name:
            asked[f"{name}_deduplicated"] = [
                *statements[:-1],
                statements[-1] + " ON CONFLICT DO DEDUPLICATE",
            ]
    plans: dict[str, list[list[object]] | str] = ask_flink(PROBE, asked)
    return plans


@pytest.mark.parametrize("case", sorted(AGGREGATE_JOINS))
def test_a_join_over_an_aggregates_updates_has_flinks_modes(
    case: str, aggregate_join_plans: dict[str, list[list[object]] | str]
) -> None:
    """The GroupAggregate's, the Join's and the sink input's modes; into an upsert sink
    Flink refuses the INSERT as written (no upsert key), and flowc's modes are those of
    its plan with ON CONFLICT DO DEDUPLICATE."""
    plan = aggregate_join_plans[case]
    if "upsert" in case:
        assert isinstance(plan, str) and "upsert key that differs" in plan, plan
        plan = aggregate_join_plans[f"{case}_deduplicated"]
    assert not isinstance(plan, str), plan
    program = "SET sql.dialect = 'flink';\n" + textwrap.dedent(AGGREGATE_JOINS[case])
    job = flowc.compile(program, "d.flow")
    assert not [d for d in job.diagnostics if d.severity.name == "ERROR"], job.diagnostics
    modes = flowc_modes(job.stream_graph)
    assert ("aggregate", "I,UB,UA") in modes
    assert modes == flink_modes(plan)
    flink = [mode for _, kind, mode in plan if kind == "Join"]
    ours = [n.changelog_mode for n in job.stream_graph.nodes.values() if "Join" in n.name]
    assert ours == flink, (ours, flink)
    if "upsert" in case:  # it runs on Spark, as the two processors
        job = flowc.compile(program, "d.flow", for_spark=True)
        kinds = sorted(p.kind for p in job.spark_plan.changelog_processors.values())
        assert kinds == ["AGGREGATE", "JOIN"], kinds


#: Orders (customer_id, amount) for the GROUP BY, and the customers' envelopes (id, name).
AGGREGATED_ORDERS: list[tuple[object, int]] = [(10, 5), (20, 7), (10, 2), (None, 4), (30, 1)]
AGGREGATED_CUSTOMERS: list[tuple[str, tuple[object, ...] | None, tuple[object, ...] | None]] = [
    ("c", None, (10, "ann")),
    ("c", None, (20, "bob")),
    ("u", (10, "ann"), (10, "anne")),
    ("d", (20, "bob"), None),  # total 20 padded again (LEFT)
    ("c", None, (40, "dan")),
]


@pytest.mark.parametrize("kind", ["", "LEFT", "FULL"])
def test_flinks_collected_join_over_a_group_by_is_the_one_computed_in_plain_python(
    tmp_path: Path, kind: str
) -> None:
    """Flink 2.3 runs the GROUP BY (SUM, COUNT, MAX) JOINed with a CDC table; the table
    its changelog leaves, keyed by the aggregate's key (and the customer's id for FULL),
    is the one plain Python computes record by record (tests/helpers/cdc_join_flink.py's
    GroupAggregate then its join), which tests/test_aggregate_join.py holds flowc's
    processors to on Spark, with the orders read first or the customers first."""
    checked_flink_python()
    (tmp_path / "orders").mkdir()
    (tmp_path / "customers").mkdir()
    (tmp_path / "orders" / "part.json").write_text(
        "".join(json.dumps({"customer_id": k, "amount": v}) + "\n" for k, v in AGGREGATED_ORDERS),
        encoding="utf-8",
    )

    def record(values: tuple[object, ...] | None) -> dict[str, object] | None:
        return None if values is None else {"id": values[0], "name": values[1]}

    (tmp_path / "customers" / "part.json").write_text(
        "".join(
            json.dumps({"before": record(b), "after": record(a), "op": op}) + "\n"
            for op, b, a in AGGREGATED_CUSTOMERS
        ),
        encoding="utf-8",
    )
    ddl = [
        f"CREATE TABLE orders (customer_id BIGINT, amount BIGINT) WITH ('connector' = "
        f"'filesystem', 'path' = '{tmp_path / 'orders'}', 'format' = 'json')",
        f"CREATE TABLE customers (id BIGINT, name STRING) WITH ('connector' = "
        f"'filesystem', 'path' = '{tmp_path / 'customers'}', 'format' = 'debezium-json')",
    ]
    query = (
        "SELECT * FROM (SELECT customer_id, SUM(amount) AS total, COUNT(*) AS n, "
        f"MAX(amount) AS biggest FROM orders GROUP BY customer_id) t {kind} JOIN customers "
        "ON t.customer_id = customers.id"
    )
    collected: dict[str, list[list[Any]]] = ask_flink(COLLECT_CHANGELOG, {"q": [*ddl, query]})
    at = [0, 4] if kind == "FULL" else [0]
    flink = materialized([(k, tuple(r)) for k, r in collected["q"]], at)
    preserved = (kind in ("LEFT", "FULL"), kind == "FULL")
    aggregated = group_aggregate(AGGREGATED_ORDERS, {}, 0)
    customers = envelope_records(1, AGGREGATED_CUSTOMERS)
    for records in (aggregated + customers, customers + aggregated):
        computed = flink_join(records, ([0], [0]), (4, 2), preserved)
        assert materialized(computed, at) == flink, kind
    assert any(None in row for row in flink.values()) == any(preserved), flink


#: An append stream JOINed with a CDC source into an upsert sink: Flink 2.3 refuses the
#: INSERT as written (the join has no upsert key); flowc's modes are those of its plan
#: with ON CONFLICT DO DEDUPLICATE, as for a JOIN over an AGGREGATE's updates.
CDC_JOIN_INTO_UPSERT = f"""
    {ORDERS}
    {CUSTOMERS}
    CREATE TABLE o (order_id BIGINT, customer_id BIGINT, name STRING,
      PRIMARY KEY (order_id, customer_id) NOT ENFORCED)
      WITH ('connector' = 'files', 'path' = 'out', 'format' = 'json');
    INSERT INTO o SELECT order_id, orders.customer_id, name
      FROM orders JOIN customers ON orders.customer_id = customers.id;
"""


def test_a_join_over_changes_into_an_upsert_sink_has_flinks_deduplicating_modes(
    tmp_path: Path,
) -> None:
    checked_flink_python()
    statements = as_flink_sql(textwrap.dedent(CDC_JOIN_INTO_UPSERT), tmp_path)
    plans: dict[str, list[list[object]] | str] = ask_flink(
        PROBE,
        {
            "as_written": statements,
            "deduplicated": [*statements[:-1], statements[-1] + " ON CONFLICT DO DEDUPLICATE"],
        },
    )
    refused = plans["as_written"]
    assert isinstance(refused, str) and "upsert key that differs" in refused, refused
    plan = plans["deduplicated"]
    assert not isinstance(plan, str), plan
    program = "SET sql.dialect = 'flink';\n" + textwrap.dedent(CDC_JOIN_INTO_UPSERT)
    job = flowc.compile(program, "d.flow")
    assert not [d for d in job.diagnostics if d.severity.name == "ERROR"], job.diagnostics
    assert flowc_modes(job.stream_graph) == flink_modes(plan)
    flink = [mode for _, kind, mode in plan if kind == "Join"]
    ours = [n.changelog_mode for n in job.stream_graph.nodes.values() if "Join" in n.name]
    assert ours == flink == ["I,UB,UA,D"], (ours, flink)
