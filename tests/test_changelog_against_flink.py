"""flowc's changelog mode per operator against real Flink 2.3's ``EXPLAIN CHANGELOG_MODE``
(opt-in: needs PyFlink, tests/helpers/flink.py).

Each program is a Flink-dialect program of tests/test_flink_sql_against_flink.py (plus the
updating forms below), run through Flink as SQL: its sources as ``datagen`` tables, a sink
flowc keeps one row per key (files/postgres with a PRIMARY KEY) as ``blackhole`` (which,
as an upsert sink, takes no UPDATE_BEFORE) and every other sink as ``print`` (a retract
sink). Operators are mapped by kind, as Flink's physical plan names them: a flowc
``Window(...)`` is a GroupWindowAggregate or (Global)WindowAggregate, ``Keyed Aggregate``
a GroupAggregate, ``Rank(...)``/``Deduplicate`` a Rank or Deduplicate, ``WindowRank`` a
WindowRank, a source a TableSourceScan, and the node a sink reads the sink's input. Calc
nodes are not compared: Flink merges and splits them where flowc has Filters and Maps.
"""

from __future__ import annotations

import textwrap

import pytest
from stages import ROOT

import flowc
from tests.helpers.changelog_flink import PROBE, as_flink_sql, flink_modes, flowc_modes
from tests.helpers.flink import ask_flink, checked_flink_python, requires_flink
from tests.helpers.flink_sql_cases import CASES, flink_sql

pytestmark = requires_flink

SOURCE = """
CREATE TABLE b (k STRING, p BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts)
  WITH ('connector' = 'datagen');
"""

#: Updating forms: aggregates over aggregates, Top-N over an aggregate, keep-last.
UPDATING = {
    "aggregate_over_an_aggregate": flink_sql(
        SOURCE,
        """
        CREATE TABLE o (n BIGINT, c BIGINT) WITH ('connector' = 'console');
        INSERT INTO o SELECT n, COUNT(*) AS c FROM (SELECT k, COUNT(*) AS n FROM b GROUP BY k)
          GROUP BY n;
        """,
    ),
    "aggregate_into_a_retract_sink": flink_sql(
        SOURCE,
        """
        CREATE TABLE o (k STRING, n BIGINT) WITH ('connector' = 'console');
        INSERT INTO o SELECT k, COUNT(*) AS n FROM b GROUP BY k;
        """,
    ),
}

UPDATING["match_recognize"] = flink_sql(
    SOURCE,
    """
    CREATE TABLE o (k STRING, bottom BIGINT, n BIGINT, t TIMESTAMP(3))
      WITH ('connector' = 'files', 'path' = 'out', 'format' = 'json');
    INSERT INTO o SELECT * FROM b MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts
      MEASURES LAST(B.p) AS bottom, COUNT(B.p) AS n, MATCH_ROWTIME() AS t
      AFTER MATCH SKIP TO NEXT ROW PATTERN (A B+ C)
      DEFINE B AS p < PREV(p), C AS p > PREV(p)) AS T;
    """,
)

UPDATING["top_n_per_window_after_a_window_aggregate"] = flink_sql(
    SOURCE,
    """
    CREATE TABLE o (s TIMESTAMP(3), k STRING, n BIGINT)
      WITH ('connector' = 'files', 'path' = 'out', 'format' = 'json');
    INSERT INTO o SELECT window_start, k, n FROM (
      SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY n DESC) AS rn
      FROM (SELECT window_start, window_end, k, COUNT(*) AS n
        FROM TABLE(TUMBLE(TABLE b, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
        GROUP BY window_start, window_end, k)) WHERE rn <= 1;
    """,
)

TOP_SOURCE = """
CREATE TABLE bids (category STRING, seller STRING, price BIGINT) WITH ('connector' = 'datagen');
"""
TOP_SINK = """
CREATE TABLE o (category STRING, seller STRING, total BIGINT,
  PRIMARY KEY (category, seller) NOT ENFORCED)
  WITH ('connector' = 'files', 'path' = 'out', 'format' = 'json');
"""
TOP_OF_SUMS = """
SELECT *, ROW_NUMBER() OVER (PARTITION BY category ORDER BY total DESC) AS rn FROM {}
"""
SUMS = "SELECT category, seller, SUM(price) AS total FROM bids GROUP BY category, seller"

#: Flink's Top-N over an unwindowed GROUP BY, as SQL (flowc runs these on Spark: the
#: subquery, a CREATE VIEW with the rank selected, a WITH CTE).
UPDATING["sql_top_n_over_a_group_by"] = flink_sql(
    TOP_SOURCE,
    TOP_SINK,
    f"INSERT INTO o SELECT category, seller, total FROM ({TOP_OF_SUMS.format(f'({SUMS})')})"
    " WHERE rn <= 3;\n",
)
UPDATING["sql_top_n_over_a_group_by_view_with_its_rank"] = flink_sql(
    TOP_SOURCE,
    """
    CREATE TABLE r (category STRING, rn BIGINT, seller STRING, total BIGINT,
      PRIMARY KEY (category, rn) NOT ENFORCED)
      WITH ('connector' = 'files', 'path' = 'out', 'format' = 'json');
    """,
    f"CREATE VIEW totals AS {SUMS};\n"
    f"INSERT INTO r SELECT category, rn, seller, total FROM ({TOP_OF_SUMS.format('totals')})"
    " WHERE rn <= 3;\n",
)
UPDATING["sql_top_n_over_a_group_by_in_a_cte"] = flink_sql(
    TOP_SOURCE,
    TOP_SINK,
    f"INSERT INTO o WITH sums AS ({SUMS}) SELECT category, seller, total FROM "
    f"({TOP_OF_SUMS.format('sums')}) WHERE rn <= 3;\n",
)

#: A TOP 1 by the rowtime attribute ascending (Flink 2.3: insert-only, its keep-first row by
#: event time; tests/test_rowtime_first_row.py runs it on Spark), and the near forms that
#: stay updating.
ROWTIME_SOURCE = """
CREATE TABLE t (k STRING, v BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
  WITH ('connector' = 'datagen');
"""
ROWTIME_SINK = (
    "CREATE TABLE o (k STRING, v BIGINT, ts TIMESTAMP(3)) WITH ('connector' = 'console');\n"
)


def _first_rows(order: str, keep: str = "rn = 1", partition: str = "PARTITION BY k ") -> str:
    return ROWTIME_SINK + (
        f"INSERT INTO o SELECT k, v, ts FROM (SELECT *, ROW_NUMBER() OVER ({partition}"
        f"ORDER BY {order}) AS rn FROM t) WHERE {keep};\n"
    )


UPDATING["rowtime_first_row"] = flink_sql(ROWTIME_SOURCE, _first_rows("ts ASC"))
UPDATING["rowtime_first_row_then_v"] = flink_sql(ROWTIME_SOURCE, _first_rows("ts ASC, v"))
UPDATING["rowtime_first_row_one_group"] = flink_sql(
    ROWTIME_SOURCE, _first_rows("ts ASC", partition="")
)
UPDATING["rowtime_first_row_rank_selected"] = flink_sql(
    ROWTIME_SOURCE,
    "CREATE TABLE r (k STRING, v BIGINT, ts TIMESTAMP(3), rn BIGINT)\n"
    "  WITH ('connector' = 'console');\n"
    "INSERT INTO r SELECT k, v, ts, rn FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k "
    "ORDER BY ts ASC) AS rn FROM t) WHERE rn = 1;\n",
)
UPDATING["rowtime_first_two_rows"] = flink_sql(ROWTIME_SOURCE, _first_rows("ts ASC", "rn <= 2"))
UPDATING["rowtime_last_row"] = flink_sql(ROWTIME_SOURCE, _first_rows("ts DESC"))


#: Nexmark q4 as Flink SQL (examples/flink_sql/nexmark_q4.flow: a GROUP BY over a GROUP BY
#: subquery over a regular join) and in Nexmark's own text (a comma join, all in WHERE).
NEXMARK_Q4 = (ROOT / "examples" / "flink_sql" / "nexmark_q4.flow").read_text(encoding="utf-8")
UPDATING["nexmark_q4_example"] = NEXMARK_Q4
UPDATING["nexmark_q4_comma_join"] = NEXMARK_Q4.replace(
    "FROM auctions A JOIN bids B ON A.id = B.auction AND B.date_time >= A.date_time\n"
    "  WHERE B.date_time <= A.expires",
    "FROM auctions A, bids B\n"
    "  WHERE A.id = B.auction AND B.date_time BETWEEN A.date_time AND A.expires",
)
assert UPDATING["nexmark_q4_comma_join"] != NEXMARK_Q4

#: Where flowc's modes are not Flink's (reported, not bent).
DIFFERENCES: dict[str, str] = {
    "top_n_per_window_after_a_window_aggregate": (
        "Flink 2.3 plans a ROW_NUMBER per window_start, window_end over a window aggregate "
        "as its WindowRank (insert-only); flowc plans a Rank and shows I,UB,UA,D (its "
        "changelog refusals take the rows as final: docs/language.md, 'Changelog modes')"
    ),
}

#: Programs Flink's planner refuses as SQL on other grounds than changelog modes.
FLINK_REFUSES = {
    "top_n_over_an_aggregate": (
        "Flink 2.3 refuses an upsert sink whose primary key is not the query's upsert key "
        "(it asks for ON CONFLICT): not a changelog-mode question"
    ),
    "row_number_top_n": (
        "Flink 2.3 refuses an upsert sink whose primary key is not the query's upsert key "
        "(it asks for ON CONFLICT): not a changelog-mode question"
    ),
}

#: Programs not compared: not Flink SQL as this file turns them into it.
NOT_COMPARED = {
    "statement_set_of_two_inserts": "its STATEMENT SET block is not split into statements here",
    "windowed_view_read_twice": "its view is not split into Flink statements here",
    "current_watermark_routing": "flowc's routing form is not a statement Flink's SQL takes",
    "unnest_grouped_and_a_bare_query": (
        "a bare query is flowc's print sink, not an INSERT Flink's statement set explains"
    ),
}


def programs() -> dict[str, str]:
    """Every program compared: the single-query Flink-dialect cases and UPDATING."""
    named = {
        name: textwrap.dedent(program)
        for name, (program, _, _) in CASES.items()
        if "batch" not in name and "INSERT" in program and name not in NOT_COMPARED
    }
    named.update(UPDATING)
    return named


@pytest.fixture(scope="module")
def flink_plans() -> dict[str, list[list[object]] | str]:
    """Flink's physical plan with changelog modes of every program, in one Python."""
    checked_flink_python()
    asked = {name: as_flink_sql(program) for name, program in programs().items()}
    plans: dict[str, list[list[object]] | str] = ask_flink(PROBE, asked)
    return plans


@pytest.mark.parametrize("case", sorted(programs()))
def test_changelog_modes_equal_flinks(
    case: str, flink_plans: dict[str, list[list[object]] | str]
) -> None:
    if case in DIFFERENCES:
        pytest.xfail(DIFFERENCES[case])
    plan = flink_plans[case]
    if case in FLINK_REFUSES:
        assert isinstance(plan, str), "Flink no longer refuses: compare it"
        pytest.skip(FLINK_REFUSES[case])
    assert not isinstance(plan, str), plan
    graph = flowc.compile(programs()[case], "d.flow").stream_graph
    assert flowc_modes(graph) == flink_modes(plan)


# ------------------------------------------------ what Flink refuses over updates

REFUSAL_SOURCES = """
SET max_parallelism = 16;
CREATE TABLE b (k STRING, p BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts)
  WITH ('connector' = 'datagen');
CREATE TABLE c (k STRING, q BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts)
  WITH ('connector' = 'datagen');
CREATE VIEW topv AS SELECT k, p, ts FROM (
  SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY p DESC) AS rn FROM b) WHERE rn <= 2;
"""

#: Programs Flink 2.3 refuses ("... doesn't support consuming update and delete changes
#: which is produced by node ..."), with the code flowc refuses each with.
REFUSED = {
    "window_top_n_over_a_top_n": (
        flink_sql(
            REFUSAL_SOURCES,
            """
            CREATE TABLE o (s TIMESTAMP(3), k STRING, p BIGINT) WITH ('connector' = 'console');
            INSERT INTO o SELECT window_start, k, p FROM (
              SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end, k
                ORDER BY p DESC) AS rn
              FROM TABLE(TUMBLE(TABLE topv, DESCRIPTOR(ts), INTERVAL '1' MINUTE))) WHERE rn <= 1;
            """,
        ),
        "E0745",
    ),
    "interval_join_over_a_top_n": (
        flink_sql(
            REFUSAL_SOURCES,
            """
            CREATE TABLE o (k STRING, p BIGINT, q BIGINT) WITH ('connector' = 'console');
            INSERT INTO o SELECT t.k, t.p, c.q FROM topv t JOIN c
              ON t.k = c.k AND c.ts BETWEEN t.ts - INTERVAL '1' MINUTE AND t.ts;
            """,
        ),
        "E0746",
    ),
    "over_aggregate_over_a_top_n": (
        flink_sql(
            REFUSAL_SOURCES,
            """
            CREATE TABLE o (k STRING, s BIGINT) WITH ('connector' = 'console');
            INSERT INTO o SELECT k, SUM(p) OVER (PARTITION BY k ORDER BY ts
              ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) FROM topv;
            """,
        ),
        "E0747",
    ),
    "aggregate_into_a_files_table": (
        flink_sql(
            REFUSAL_SOURCES,
            """
            CREATE TABLE o (k STRING, n BIGINT)
              WITH ('connector' = 'files', 'path' = 'out', 'format' = 'json');
            INSERT INTO o SELECT k, COUNT(*) FROM b GROUP BY k;
            """,
        ),
        "E0748",
    ),
    "top_n_into_a_files_table": (
        flink_sql(
            REFUSAL_SOURCES,
            """
            CREATE TABLE o (k STRING, p BIGINT, ts TIMESTAMP(3))
              WITH ('connector' = 'files', 'path' = 'out', 'format' = 'json');
            INSERT INTO o SELECT * FROM topv;
            """,
        ),
        "E0748",
    ),
}

#: Near-misses Flink 2.3 plans, which flowc does not refuse on changelog grounds (Spark's
#: own rules may still refuse some where Spark is the target: E0702 for the window).
ACCEPTED = {
    "window_aggregate_over_a_top_n": flink_sql(
        REFUSAL_SOURCES,
        """
        CREATE TABLE o (s TIMESTAMP(3), n BIGINT) WITH ('connector' = 'console');
        INSERT INTO o SELECT window_start, COUNT(*)
          FROM TABLE(TUMBLE(TABLE topv, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
          GROUP BY window_start, window_end;
        """,
    ),
    "interval_join_over_inserts": flink_sql(
        REFUSAL_SOURCES,
        """
        CREATE TABLE o (k STRING, p BIGINT, q BIGINT)
          WITH ('connector' = 'files', 'path' = 'out', 'format' = 'json');
        INSERT INTO o SELECT b.k, b.p, c.q FROM b JOIN c
          ON b.k = c.k AND c.ts BETWEEN b.ts - INTERVAL '1' MINUTE AND b.ts;
        """,
    ),
    "window_top_n_over_inserts_into_a_files_table": flink_sql(
        REFUSAL_SOURCES,
        """
        CREATE TABLE o (s TIMESTAMP(3), k STRING, p BIGINT)
          WITH ('connector' = 'files', 'path' = 'out', 'format' = 'json');
        INSERT INTO o SELECT window_start, k, p FROM (
          SELECT *, ROW_NUMBER() OVER (PARTITION BY window_start, window_end, k
            ORDER BY p DESC) AS rn
          FROM TABLE(TUMBLE(TABLE b, DESCRIPTOR(ts), INTERVAL '1' MINUTE))) WHERE rn <= 1;
        """,
    ),
}

REFUSAL_PROBE = r"""
import json, sys
from pyflink.table import EnvironmentSettings, ExplainDetail, TableEnvironment
out = {}
for name, statements in json.loads(sys.argv[1]).items():
    env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    inserts = env.create_statement_set()
    try:
        for s in statements:
            if s.lstrip().upper().startswith("INSERT"):
                inserts.add_insert_sql(s)
            else:
                env.execute_sql(s)
        inserts.explain(ExplainDetail.CHANGELOG_MODE)
        out[name] = "planned"
    except Exception as e:
        out[name] = " ".join(l for l in str(e).splitlines() if "support" in l)[:500] or str(e)[:500]
print(json.dumps(out))
"""


def as_flink_tables(program: str) -> list[str]:
    """``program``'s statements for Flink: a console table is Flink's print, a files table
    Flink's filesystem (the option names flowc's Flink dialect reads them by)."""
    body = "\n".join(
        line for line in program.splitlines() if not line.strip().upper().startswith("SET ")
    )
    out = []
    for s in (s.strip() for s in body.split(";") if s.strip()):
        s = s.replace("'connector' = 'console'", "'connector' = 'print'")
        s = s.replace("'connector' = 'files'", "'connector' = 'filesystem'")
        out.append(s.replace("'path' = '", "'path' = '/tmp/flowc-refusals/"))
    return out


@pytest.fixture(scope="module")
def flink_refusals() -> dict[str, str]:
    """What Flink says of each REFUSED and ACCEPTED program: "planned" or its refusal."""
    checked_flink_python()
    asked = {
        name: as_flink_tables(program)
        for name, program in [*((n, p) for n, (p, _) in REFUSED.items()), *ACCEPTED.items()]
    }
    said: dict[str, str] = ask_flink(REFUSAL_PROBE, asked)
    return said


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_flowc_refuses_what_flink_refuses_over_updates(
    case: str, flink_refusals: dict[str, str]
) -> None:
    program, code = REFUSED[case]
    assert "doesn't support consuming update" in flink_refusals[case], flink_refusals[case]
    with pytest.raises(flowc.CompileError) as raised:
        flowc.compile(textwrap.dedent(program), "d.flow")
    errors = [d for d in raised.value.diagnostics if d.severity.name == "ERROR"]
    assert [str(d.code) for d in errors] == [code], errors
    assert "produces" in errors[0].message and errors[0].help


@pytest.mark.parametrize("case", sorted(ACCEPTED))
def test_flowc_does_not_refuse_what_flink_plans(case: str, flink_refusals: dict[str, str]) -> None:
    assert flink_refusals[case] == "planned", flink_refusals[case]
    job = flowc.compile(textwrap.dedent(ACCEPTED[case]), "d.flow")
    codes = {str(d.code) for d in (*job.diagnostics, *job.spark_diagnostics)}
    assert not codes & {"E0745", "E0746", "E0747", "E0748"}
