"""Issue 28's SQL forms against real Flink 2.3 (opt-in: needs PyFlink, tests/helpers/flink.py):
a Top-N over an unwindowed GROUP BY and Flink's LATERAL Top-N per group. Each program's
changelog mode per operator is compared with Flink's ``EXPLAIN CHANGELOG_MODE`` of the same
SQL (as tests/test_changelog_against_flink.py does: sources datagen, a sink with a PRIMARY
KEY blackhole, other sinks print), and the LATERAL form's JobGraph with the DataStream job
of the operators Flink plans for it (as tests/test_flink_sql_against_flink.py does). The
forms Flink refuses are asked of Flink too, so that flowc's E0758 stays Flink's refusal.
"""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

import flowc
from tests.helpers.changelog_flink import PROBE, as_flink_sql, flink_modes, flowc_modes
from tests.helpers.flink import (
    ask_flink,
    checked_flink_python,
    flink_job_graphs,
    flowc_job_graph,
    requires_flink,
)
from tests.helpers.flink_sql_cases import WINDOWS, flink_sql

pytestmark = requires_flink

SRC = """
CREATE TABLE src (c STRING, k STRING, v BIGINT, ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'datagen', 'uid' = 'src');
"""
PRINT = "CREATE TABLE o (c STRING, k STRING, n BIGINT) WITH ('connector' = 'console');\n"
UPSERT = (
    "CREATE TABLE o (c STRING, k STRING, n BIGINT, PRIMARY KEY (c, k) NOT ENFORCED)\n"
    "  WITH ('connector' = 'files', 'path' = 'out/o', 'format' = 'json');\n"
)


def _top(aggregate: str, order: str = "DESC", rank: str = "", sink: str = PRINT) -> str:
    """A Top-N over ``SELECT c, k, <aggregate> AS n FROM src GROUP BY c, k``."""
    outer = "SELECT *" if rank else "SELECT c, k, n"
    return flink_sql(
        SRC,
        sink.replace("n BIGINT)", f"n BIGINT{rank})"),
        f"""
        INSERT INTO o {outer} FROM (
          SELECT *, ROW_NUMBER() OVER (PARTITION BY c ORDER BY n {order}) AS rn
          FROM (SELECT c, k, {aggregate} AS n FROM src GROUP BY c, k))
        WHERE rn <= 3;
        """,
    )


LATERAL = """
INSERT INTO o SELECT d.c, t.k, t.v FROM (SELECT DISTINCT c FROM src) d,
  LATERAL (SELECT k, v FROM src WHERE src.c = d.c ORDER BY v DESC LIMIT 3) t;
"""
LATERAL_SINK = "CREATE TABLE o (c STRING, k STRING, v BIGINT) WITH ('connector' = 'console');\n"
COOKBOOK = """
CREATE TABLE People (id INT, city STRING, state STRING, arrival_time TIMESTAMP(3),
  WATERMARK FOR arrival_time AS arrival_time - INTERVAL '1' MINUTE)
  WITH ('connector' = 'datagen');
CREATE TEMPORARY VIEW CurrentPopulation AS
SELECT city, state, COUNT(*) AS population FROM People GROUP BY city, state;
CREATE TABLE o (state STRING, city STRING, population BIGINT) WITH ('connector' = 'console');
INSERT INTO o SELECT state, city, population
FROM (SELECT DISTINCT state FROM CurrentPopulation) States,
  LATERAL (SELECT city, population FROM CurrentPopulation WHERE state = States.state
    ORDER BY population DESC LIMIT 2);
"""

#: Programs whose changelog modes are compared with Flink's EXPLAIN CHANGELOG_MODE.
PROGRAMS = {
    # Flink's UpdateFastStrategy: COUNT only grows, ordered DESC; the aggregate [I,UA].
    "count_desc_into_print": _top("COUNT(*)"),
    "count_desc_rank_selected": _top("COUNT(*)", rank=", rn BIGINT"),
    "count_desc_into_upsert_sink": _top("COUNT(*)", sink=UPSERT),
    "max_desc": _top("MAX(v)"),
    "min_asc": _top("MIN(v)", order="ASC"),
    # RetractStrategy: the aggregate [I,UB,UA].
    "count_asc": _top("COUNT(*)", order="ASC"),
    "sum_desc": _top("SUM(v)"),
    "min_desc": _top("MIN(v)"),
    "count_distinct_desc": _top("COUNT(DISTINCT v)"),
    "sum_of_a_positive_column_desc": _top("SUM(v)").replace(
        "FROM src GROUP BY", "FROM src WHERE v > 0 GROUP BY"
    ),
    "count_desc_over_a_keep_last_row": flink_sql(
        SRC,
        PRINT,
        """
        INSERT INTO o SELECT c, k, n FROM (
          SELECT *, ROW_NUMBER() OVER (PARTITION BY c ORDER BY n DESC) AS rn
          FROM (SELECT c, k, COUNT(*) AS n FROM (
            SELECT c, k, ROW_NUMBER() OVER (PARTITION BY k ORDER BY ts DESC) AS r FROM src)
            WHERE r = 1 GROUP BY c, k))
        WHERE rn <= 3;
        """,
    ),
    # A rename between the aggregate and the Top-N: Flink follows the columns.
    "count_desc_renamed": flink_sql(
        SRC,
        PRINT,
        """
        INSERT INTO o SELECT cat, k, cnt FROM (
          SELECT *, ROW_NUMBER() OVER (PARTITION BY cat ORDER BY cnt DESC) AS rn
          FROM (SELECT c AS cat, k, n AS cnt FROM (
            SELECT c, k, COUNT(*) AS n FROM src GROUP BY c, k)))
        WHERE rn <= 3;
        """,
    ),
    # Partitioned by a column the aggregate's key does not hold: RetractStrategy.
    "count_desc_partitioned_by_a_value": flink_sql(
        SRC,
        PRINT,
        """
        INSERT INTO o SELECT c, k, n FROM (
          SELECT *, ROW_NUMBER() OVER (PARTITION BY m ORDER BY n DESC) AS rn
          FROM (SELECT c, k, COUNT(*) AS n, MAX(v) AS m FROM src GROUP BY c, k))
        WHERE rn <= 3;
        """,
    ),
    # No PARTITION BY: a global Rank, over a keyed or a global aggregate.
    "count_desc_global_rank": flink_sql(
        SRC,
        PRINT,
        """
        INSERT INTO o SELECT c, k, n FROM (
          SELECT *, ROW_NUMBER() OVER (ORDER BY n DESC) AS rn
          FROM (SELECT c, k, COUNT(*) AS n FROM src GROUP BY c, k))
        WHERE rn <= 3;
        """,
    ),
    "count_desc_over_a_global_aggregate": flink_sql(
        SRC,
        "CREATE TABLE o (n BIGINT) WITH ('connector' = 'console');",
        """
        INSERT INTO o SELECT n FROM (
          SELECT *, ROW_NUMBER() OVER (ORDER BY n DESC) AS rn
          FROM (SELECT COUNT(*) AS n FROM src))
        WHERE rn <= 3;
        """,
    ),
    "lateral_top_n": flink_sql(SRC, LATERAL_SINK, LATERAL),
    "lateral_cross_join_grouped": flink_sql(
        SRC,
        LATERAL_SINK,
        """
        INSERT INTO o SELECT * FROM (SELECT c FROM src GROUP BY c) d CROSS JOIN LATERAL
          (SELECT k, v FROM src AS s WHERE s.c = d.c ORDER BY v DESC LIMIT 3) t;
        """,
    ),
    "lateral_two_keys_fetch_first": flink_sql(
        SRC,
        LATERAL_SINK,
        """
        INSERT INTO o SELECT d.c, d.k, t.v FROM (SELECT DISTINCT c, k FROM src) d
          JOIN LATERAL (SELECT v FROM src WHERE src.c = d.c AND src.k = d.k
            ORDER BY v DESC FETCH FIRST 2 ROWS ONLY) t ON TRUE;
        """,
    ),
    "lateral_cookbook_over_an_aggregate": flink_sql(COOKBOOK),
    # The query around the form: Flink's Calc (a filter) or GroupAggregate after the Rank.
    "lateral_filtered_after": flink_sql(
        SRC, LATERAL_SINK, LATERAL.replace(") t;", ") t WHERE t.v > 3;")
    ),
    "lateral_grouped_after": flink_sql(
        SRC,
        LATERAL_SINK,
        LATERAL.replace("t.v FROM", "COUNT(*) AS v FROM").replace(") t;", ") t GROUP BY d.c, t.k;"),
    ),
}

#: Where flowc's modes are not Flink's (reported, not bent).
DIFFERENCES = {
    "sum_of_a_positive_column_desc": (
        "Flink 2.3 finds from the WHERE (its column intervals) that SUM(v) of v > 0 only "
        "grows and plans the UpdateFastStrategy Rank (the aggregate I,UA); flowc does not "
        "follow value ranges and plans the RetractStrategy (I,UB,UA): docs/language.md "
        "'Changelog modes'"
    ),
}

#: LATERAL forms flowc refuses (E0758), each because Flink 2.3 refuses it on a stream.
REFUSED = {
    "left_join_lateral": LATERAL.replace("d,\n  LATERAL", "d\n  LEFT JOIN LATERAL").replace(
        ") t;", ") t ON TRUE;"
    ),
    "groups_filtered": LATERAL.replace("FROM src) d", "FROM src WHERE v > 10) d"),
    "other_condition": LATERAL.replace("src.c = d.c", "src.c = d.c AND v > 10"),
    "offset": LATERAL.replace("LIMIT 3", "LIMIT 3 OFFSET 1"),
    "join_on_a_condition": LATERAL.replace("d,\n  LATERAL", "d\n  JOIN LATERAL").replace(
        ") t;", ") t ON t.v > 3;"
    ),
    "grouped_inside": LATERAL.replace(
        "SELECT k, v FROM src WHERE src.c = d.c",
        "SELECT k, MAX(v) AS v FROM src WHERE src.c = d.c GROUP BY k",
    ),
    "groups_of_another_relation": LATERAL.replace("FROM src) d", "FROM other) d"),
    "not_keyed_by_every_group_column": LATERAL.replace("DISTINCT c FROM", "DISTINCT c, k FROM"),
}
OTHER = "CREATE TABLE other (c STRING) WITH ('connector' = 'datagen');\n"


def _flowc_modes(program: str) -> set[tuple[str, str]]:
    """flowc's (kind, mode) pairs, as tests/test_changelog_against_flink.py takes them,
    with the global aggregate (its node ``Aggregate``) a GroupAggregate too."""
    graph = flowc.compile(textwrap.dedent(program), "d.flow").stream_graph
    modes = flowc_modes(graph)
    modes |= {
        ("aggregate", n.changelog_mode) for n in graph.nodes.values() if n.name == "Aggregate"
    }
    return modes


@pytest.fixture(scope="module")
def flink_plans() -> dict[str, list[list[object]] | str]:
    """Flink's physical plan with changelog modes of every program (or its refusal)."""
    checked_flink_python()
    asked = {name: as_flink_sql(textwrap.dedent(p)) for name, p in PROGRAMS.items()}
    asked.update(
        {
            f"refused {name}": as_flink_sql(flink_sql(SRC, OTHER, LATERAL_SINK, q))
            for name, q in REFUSED.items()
        }
    )
    plans: dict[str, list[list[object]] | str] = ask_flink(PROBE, asked)
    return plans


@pytest.mark.parametrize("case", sorted(PROGRAMS))
def test_changelog_modes_equal_flinks(
    case: str, flink_plans: dict[str, list[list[object]] | str]
) -> None:
    plan = flink_plans[case]
    assert not isinstance(plan, str), plan
    if case in DIFFERENCES:
        assert _flowc_modes(PROGRAMS[case]) != flink_modes(plan), "flowc agrees: drop the entry"
        pytest.xfail(DIFFERENCES[case])
    assert _flowc_modes(PROGRAMS[case]) == flink_modes(plan)


def test_update_fast_and_retract_cases_both_occur(
    flink_plans: dict[str, list[list[object]] | str],
) -> None:
    """The cases above hold both of Flink's strategies (the aggregate with and without
    UPDATE_BEFORE), so the comparison tells them apart."""
    modes = {
        mode
        for name in PROGRAMS
        for _, kind, mode in flink_plans[name]  # type: ignore[misc]
        if kind == "GroupAggregate"
    }
    assert {"I,UA", "I,UB,UA"} <= modes


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_lateral_forms_flink_refuses_are_e0758(
    case: str, flink_plans: dict[str, list[list[object]] | str]
) -> None:
    """Flink refuses each ("unexpected correlate variable $cor0 in the plan"; keyed by part
    of the groups, Calcite's own assertion fails), and flowc with E0758."""
    plan = flink_plans[f"refused {case}"]
    assert isinstance(plan, str), plan
    with pytest.raises(flowc.CompileError) as refused:
        flowc.compile(flink_sql(SRC, OTHER, LATERAL_SINK, REFUSED[case]), "d.flow")
    errors = [d for d in refused.value.diagnostics if d.severity.name == "ERROR"]
    assert [d.code for d in errors] == ["E0758"]
    assert "Flink 2.3 refuses it on a stream" in errors[0].message


# The LATERAL form's JobGraph: Flink's Calc (a Map chained to the source), its Rank behind a
# HASH exchange on the group column, the Calc before the sink. A Java keyed operator stands
# in for the Rank (as tests/test_flink_sql_against_flink.py's STAND_INS), so every id compares.
JOB_PROGRAM = flink_sql(
    "SET parallelism = 4;\nSET max_parallelism = 256;",
    SRC,
    "CREATE TABLE o (c STRING, k STRING, v BIGINT) WITH ('connector' = 'console', 'uid' = 'snk');",
    LATERAL,
)
JOB = """
env.set_parallelism(4)
env.set_max_parallelism(256)
m = source("src").uid("src").map(same, output_type=LONG).name("Map")
r = keyed_aggregate(m, "Rank(rankEnd=3, partitionBy=[c], orderBy=[v DESC])")
r.map(same, output_type=LONG).name("Map").print().name("o").uid("snk")
"""


def test_lateral_top_n_job_graph_equals_flinks() -> None:
    checked_flink_python()
    (expected,) = flink_job_graphs([WINDOWS + textwrap.dedent(JOB)], as_pyflink_runs=True)
    actual: list[dict[str, Any]] = flowc_job_graph(JOB_PROGRAM)
    assert actual == expected
