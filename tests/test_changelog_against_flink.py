"""flowc's changelog mode per operator against Flink 2.3's ``EXPLAIN CHANGELOG_MODE``, for
the Flink-dialect SQL forms tests/test_flink_sql_against_flink.py compares graphs of.

Each case's program goes to flowc as written and to Flink as the same statements, with
flowc's own options left out (``SET``, ``uid``, ``parallelism``...) and its console and files
sinks made Flink's print sink. The comparison is, per kind of stateful operator (group
aggregate, Top-N, window aggregate, window Top-N, join), the modes each has, and the mode
of what each sink receives. Opt-in: skipped without FLOWC_FLINK_PYTHON, as the others.
"""

from __future__ import annotations

import re
import textwrap
from collections import Counter

import pytest

import flowc
from flowc.vocabulary import NodeKind, Operator
from tests.helpers.flink import ask_flink, checked_flink_python, requires_flink
from tests.test_flink_sql_against_flink import CASES

pytestmark = requires_flink

#: Cases not compared, and why: each with a PRIMARY KEY sink is an upsert sink in flowc
#: (it takes I,UA,D), but PyFlink's jars hold no upsert connector (upsert-kafka, jdbc) to
#: ask Flink with; its print sink would ask for UPDATE_BEFORE. tests/test_changelog_modes.py
#: checks the upsert rule without Flink.
NOT_COMPARED = {
    "upsert_sink_and_computed_column": "a PRIMARY KEY sink: no upsert connector in PyFlink",
    "top_n_over_an_aggregate": "a PRIMARY KEY sink: no upsert connector in PyFlink",
}

#: Flink's physical node names by the kind of stateful operator flowc compares them as.
FLINK_KINDS = {
    "GroupAggregate": "aggregate",
    "GlobalGroupAggregate": "aggregate",
    "Rank": "rank",
    "Deduplicate": "rank",
    "WindowRank": "window_rank",
    "GlobalWindowAggregate": "window",
    "WindowAggregate": "window",
    "GroupWindowAggregate": "window",
    "Join": "join",
    "IntervalJoin": "join",
    "TemporalJoin": "join",
}
FLOWC_KINDS = {
    Operator.KEYED_AGGREGATE: "aggregate",
    Operator.AGGREGATE: "aggregate",
    Operator.RANK: "rank",
    Operator.DEDUPLICATE: "rank",
    Operator.WINDOW_RANK: "window_rank",
    Operator.WINDOW: "window",
    Operator.JOIN: "join",
}

SCRIPT = """
import json, sys
from pyflink.table import EnvironmentSettings, TableEnvironment
out = {}
for name, (ddl, queries) in json.loads(sys.argv[1]).items():
    t = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
    for statement in ddl:
        t.execute_sql(statement)
    plans = []
    for query in queries:
        try:
            rows = t.execute_sql("EXPLAIN CHANGELOG_MODE " + query).collect()
            plans.append(next(iter(rows))[0])
            rows.close()
        except Exception as error:
            plans.append("REFUSED " + str(error).splitlines()[0])
    out[name] = plans
print(json.dumps(out))
"""

_NODE = re.compile(r"^[\s:|+-]*(\w+)\(.*changelogMode=\[([A-Z,]+)\]\)\s*$")


def flink_statements(program: str) -> tuple[list[str], list[str]]:
    """The program as Flink's statements: its CREATEs, and its queries to explain."""
    ddl, queries = [], []
    sinks = set(re.findall(r"INSERT\s+INTO\s+(\w+)", program, re.IGNORECASE))
    for statement in (s.strip() for s in program.split(";")):
        if not statement or statement.upper().startswith("SET "):
            continue
        if statement.upper().startswith("CREATE"):
            ddl.append(_flink_options(statement, sinks))
        else:
            queries.append(statement)
    return ddl, queries


def _flink_options(statement: str, sinks: set[str]) -> str:
    """WITH (...) with only the options Flink's connectors know: a sink prints, a source
    is datagen."""
    table = re.match(r"CREATE\s+TABLE\s+(\w+)", statement, re.IGNORECASE)
    if table is None or "WITH" not in statement:
        return statement
    head, _, options = statement.rpartition("WITH")
    pairs = dict(re.findall(r"'([\w.-]+)'\s*=\s*'([^']*)'", options))
    kept = {"connector": "print" if table.group(1) in sinks else "datagen"}
    if "number_of_rows" in pairs:
        kept["number-of-rows"] = pairs["number_of_rows"]
    listed = ", ".join(f"'{k}' = '{v}'" for k, v in kept.items())
    return f"{head}WITH ({listed})"


def flink_modes(plans: list[str]) -> tuple[Counter[tuple[str, str]], list[str]]:
    """The stateful operators' (kind, mode) and what each sink (or query) receives."""
    operators: Counter[tuple[str, str]] = Counter()
    received = []
    for plan in plans:
        assert not plan.startswith("REFUSED"), plan
        physical = plan.split("== Optimized Physical Plan ==")[1].split("==")[0]
        nodes = [m.groups() for m in map(_NODE.match, physical.splitlines()) if m]
        operators.update((FLINK_KINDS[n], mode) for n, mode in nodes if n in FLINK_KINDS)
        received.append(nodes[1][1] if nodes[0][0] == "Sink" else nodes[0][1])
    return operators, received


def flowc_modes(program: str) -> tuple[Counter[tuple[str, str]], list[str]]:
    job = flowc.compile(textwrap.dedent(program), "changelog.flow")
    graph = job.stream_graph
    operators = Counter(
        (FLOWC_KINDS[n.operator], n.changelog_mode)
        for n in graph.nodes.values()
        if n.operator in FLOWC_KINDS
    )
    received = [
        graph.nodes[e.source_id].changelog_mode
        for sink in sorted(graph.sinks)
        for e in graph.nodes[sink].in_edges[:1]
    ]
    return operators, received


COMPARED = sorted(name for name in CASES if name not in NOT_COMPARED)


@pytest.fixture(scope="module")
def flink_plans() -> dict[str, list[str]]:
    """Flink's EXPLAIN CHANGELOG_MODE of every compared case, in one JVM."""
    checked_flink_python()
    asked = {name: flink_statements(CASES[name][0]) for name in COMPARED}
    plans: dict[str, list[str]] = ask_flink(SCRIPT, asked)
    return plans


@pytest.mark.parametrize("case", COMPARED)
def test_changelog_modes_equal_flinks(case: str, flink_plans: dict[str, list[str]]) -> None:
    operators, received = flowc_modes(CASES[case][0])
    expected_operators, expected_received = flink_modes(flink_plans[case])
    assert operators == expected_operators
    assert sorted(received) == sorted(expected_received)


def test_some_case_updates() -> None:
    """The comparison covers updating operators, not only insert-only ones."""
    modes = {m for name in COMPARED for (_, m) in flowc_modes(CASES[name][0])[0]}
    assert {"I", "I,UB,UA"} <= modes
    assert NodeKind.SINK  # the sinks' received modes are compared too
