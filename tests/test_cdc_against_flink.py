"""A debezium-json source's changelog mode against real Flink 2.3's ``EXPLAIN
CHANGELOG_MODE`` (opt-in: needs PyFlink, tests/helpers/flink.py): the same Flink-dialect
programs, flowc's files tables as Flink's filesystem tables of the same format, compared
as tests/test_changelog_against_flink.py compares them (the source's mode and the mode
of what each sink reads)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

import flowc
from tests.helpers.changelog_flink import PROBE, flink_modes, flowc_modes
from tests.helpers.flink import ask_flink, checked_flink_python, requires_flink

pytestmark = requires_flink

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
}

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


def test_a_join_consuming_changes_has_flinks_mode(
    flink_plans: dict[str, list[list[object]] | str],
) -> None:
    """The Join node itself, beside the sink's input the test above compares."""
    plan = flink_plans["join_into_print"]
    assert not isinstance(plan, str), plan
    flink = [mode for _, kind, mode in plan if kind == "Join"]
    program = "SET sql.dialect = 'flink';\n" + textwrap.dedent(PROGRAMS["join_into_print"])
    job = flowc.compile(program, "d.flow")
    ours = [n.changelog_mode for n in job.stream_graph.nodes.values() if "Join" in n.name]
    assert ours == flink == ["I,UB,UA,D"], (ours, flink)


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
