"""flowc's JobGraphs against real Flink 2.3's, job by job (opt-in: needs PyFlink).

Set ``FLOWC_FLINK_PYTHON`` to a Python that has ``apache-flink==2.3.0`` (kept in its own
virtualenv, never a flowc dependency) and Java 17 on the PATH; without it these tests
are skipped, unless ``FLOWC_FLINK_REQUIRED=1`` (as in CI) makes that a failure. Each case
is a .flow program and the same job written with PyFlink's DataStream API; Flink's own
StreamGraph and JobGraph come from its Java gateway.
PyFlink's Python operators are named as flowc names them, and Python operator fusion is
off, so the graphs are comparable vertex by vertex, ids included. PyFlink inserts a Python
key-extraction operator before ``key_by``; cases with a KEY BY compare only uid'ed ids.
"""

from __future__ import annotations

import json
import random

import pytest

import flowc
from tests.helpers.flink import (
    FLINK_PYTHON,
    checked_flink_python,
    flink_job_graphs,
    flowc_job_graph,
    only_uid_ids,
    requires_flink,
)
from tests.helpers.flink_worker import run_flink

pytestmark = requires_flink


@pytest.fixture(scope="module", autouse=True)
def flink_python() -> str:
    """The Python that runs PyFlink, checked to hold the Flink these tests compare against."""
    return checked_flink_python()


CASES: dict[str, tuple[str, str, bool]] = {
    # name: (flow program, PyFlink job, compare non-uid ids)
    "chain_with_uids": (
        """
        SET parallelism = 4;
        CREATE SOURCE s (value BIGINT)
          WITH (connector = 'datagen', parallelism = 2, uid = 'source');
        CREATE SINK o WITH (connector = 'console');
        INSERT INTO o FROM s |> SELECT value + 1 AS value WITH (uid = 'map') |> WHERE value > 0;
        """,
        """
        env.set_parallelism(4)
        s = source("s").set_parallelism(2).uid("source")
        m = s.map(lambda x: x + 1, output_type=LONG).name("Map").uid("map")
        m.filter(lambda x: x > 0).name("Filter").print().name("o")
        """,
        True,
    ),
    "fork_union_and_every_exchange": (
        """
        SET parallelism = 4;
        CREATE SOURCE a (value BIGINT) WITH (connector = 'datagen', parallelism = 2);
        CREATE SOURCE b (value BIGINT) WITH (connector = 'datagen');
        CREATE SINK o1 WITH (connector = 'console');
        CREATE SINK o2 WITH (connector = 'console');
        CREATE SINK o3 WITH (connector = 'console');
        CREATE VIEW v AS FROM a |> SELECT value;
        CREATE VIEW u AS FROM v |> UNION ALL b |> WHERE value > 0;
        INSERT INTO o1 FROM u |> RESCALE
          |> SELECT value WITH (parallelism = 2, slot_sharing_group = 'g');
        INSERT INTO o2 FROM u |> BROADCAST
          |> SELECT value WITH (parallelism = 3, chaining = 'new_chain');
        INSERT INTO o3 FROM v |> SHUFFLE |> WHERE value > 1 WITH (chaining = 'never');
        """,
        """
        env.set_parallelism(4)
        a = source("a").set_parallelism(2)
        b = source("b")
        v = a.map(lambda x: x, output_type=LONG).name("Map")
        u = v.union(b).filter(lambda x: x > 0).name("Filter")
        (u.rescale().map(lambda x: x, output_type=LONG).name("Map").set_parallelism(2)
            .slot_sharing_group("g").print().name("o1"))
        (u.broadcast().map(lambda x: x, output_type=LONG).name("Map").set_parallelism(3)
            .start_new_chain().print().name("o2"))
        v.shuffle().filter(lambda x: x > 1).name("Filter").disable_chaining().print().name("o3")
        """,
        True,
    ),
    "global_exchange_and_chaining_off": (
        """
        SET parallelism = 3;
        SET chaining = false;
        CREATE SOURCE s (value BIGINT) WITH (connector = 'datagen');
        CREATE SINK o WITH (connector = 'console', parallelism = 1);
        INSERT INTO o FROM s |> WHERE value > 0 |> GLOBAL |> SELECT value WITH (parallelism = 1);
        """,
        """
        env.set_parallelism(3)
        env.disable_operator_chaining()
        f = source("s").filter(lambda x: x > 0).name("Filter")
        g = DataStream(getattr(f._j_data_stream, "global")())  # PyFlink has no global()
        m = g.map(lambda x: x, output_type=LONG).name("Map").set_parallelism(1)
        m.print().name("o").set_parallelism(1)
        """,
        True,
    ),
    "keyed_aggregate_with_max_parallelism": (
        """
        SET parallelism = 4;
        CREATE SOURCE s (value BIGINT) WITH (connector = 'datagen');
        CREATE SINK o WITH (connector = 'console', mode = 'update');
        INSERT INTO o FROM s |> SELECT value |> KEY BY value |> AGGREGATE sum(value) AS total
          WITH (uid = 'agg', parallelism = 8, max_parallelism = 256);
        """,
        """
        env.set_parallelism(4)
        m = source("s").map(lambda x: x, output_type=LONG).name("Map")
        (m.key_by(lambda x: x % 7).reduce(lambda a, b: a + b).name("Keyed Aggregate").uid("agg")
            .set_parallelism(8).set_max_parallelism(256).print().name("o"))
        """,
        False,
    ),
    # BATCH mode (Flink's adaptive batch JobGraph, docs/plans.md "Batch mode"): -1 where no
    # operator sets the parallelism, an explicit FORWARD joining a vertex to the forward
    # group of one that sets it, RESCALE for unchained edges with no partition step.
    "batch_forward_group_and_rescale": (
        """
        SET execution.mode = 'batch';
        SET parallelism = 2;
        SET chaining = false;
        CREATE SOURCE s (value BIGINT) WITH (connector = 'datagen', number_of_rows = 10);
        CREATE SINK o WITH (connector = 'console', parallelism = 3);
        INSERT INTO o FROM s |> WHERE value > 0 |> SELECT value WITH (parallelism = 2)
          |> FORWARD |> WHERE value > 1;
        """,
        """
        from pyflink.datastream import RuntimeExecutionMode
        env.set_runtime_mode(RuntimeExecutionMode.BATCH)
        env.set_parallelism(2)
        env.disable_operator_chaining()
        f = source("s").filter(lambda x: x > 0).name("Filter")
        m = f.map(lambda x: x, output_type=LONG).name("Map").set_parallelism(2)
        g = m.forward().filter(lambda x: x > 1).name("Filter")
        g.print().name("o").set_parallelism(3)
        """,
        True,
    ),
    # BATCH mode with Flink's auto-parallelism off: no -1, the edges still RESCALE.
    "batch_auto_parallelism_off": (
        """
        SET execution.mode = 'batch';
        SET 'execution.batch.adaptive.auto-parallelism.enabled' = 'false';
        SET parallelism = 2;
        SET chaining = false;
        CREATE SOURCE s (value BIGINT) WITH (connector = 'datagen', number_of_rows = 10);
        CREATE SINK o WITH (connector = 'console');
        INSERT INTO o FROM s |> WHERE value > 0;
        """,
        """
        from pyflink.datastream import RuntimeExecutionMode
        c = Configuration()
        c.set_string("execution.batch.adaptive.auto-parallelism.enabled", "false")
        env.configure(c)
        env.set_runtime_mode(RuntimeExecutionMode.BATCH)
        env.set_parallelism(2)
        env.disable_operator_chaining()
        source("s").filter(lambda x: x > 0).name("Filter").print().name("o")
        """,
        True,
    ),
    # BATCH mode, a keyed edge: the source and the aggregate set no parallelism (-1), the
    # Map after the aggregate chains to it, the sink sets its own.
    "batch_keyed_aggregate": (
        """
        SET execution.mode = 'batch';
        SET parallelism = 4;
        CREATE SOURCE s (value BIGINT) WITH (connector = 'datagen', number_of_rows = 10);
        CREATE SINK o WITH (connector = 'console', mode = 'update', parallelism = 2);
        INSERT INTO o FROM s |> SELECT value |> KEY BY value |> AGGREGATE sum(value) AS total
          WITH (uid = 'agg');
        """,
        """
        from pyflink.datastream import RuntimeExecutionMode
        env.set_runtime_mode(RuntimeExecutionMode.BATCH)
        env.set_parallelism(4)
        m = source("s").map(lambda x: x, output_type=LONG).name("Map")
        (m.key_by(lambda x: x % 7).reduce(lambda a, b: a + b).name("Keyed Aggregate").uid("agg")
            .print().name("o").set_parallelism(2))
        """,
        False,
    ),
    # A stream joined with a CREATE TABLE: Flink's two-input join with a bounded input,
    # both inputs hash-partitioned on the equality columns.
    "dimension_join": (
        """
        SET parallelism = 2;
        CREATE SOURCE s (value BIGINT) WITH (connector = 'datagen');
        CREATE TABLE t (id BIGINT) WITH (connector = 'files', path = 't', format = 'json');
        CREATE SINK o WITH (connector = 'console');
        INSERT INTO o FROM s |> JOIN t ON value = t.id
          WITH (uid = 'join', parallelism = 4, max_parallelism = 64);
        """,
        """
        from pyflink.datastream.functions import KeyedCoProcessFunction

        class Join(KeyedCoProcessFunction):
            def process_element1(self, value, ctx):
                yield value

            def process_element2(self, value, ctx):
                yield value

        env.set_parallelism(2)
        s = source("s")
        t = source("t")
        (s.key_by(lambda x: x).connect(t.key_by(lambda x: x))
            .process(Join(), output_type=LONG).name("Join").uid("join")
            .set_parallelism(4).set_max_parallelism(64).print().name("o"))
        """,
        False,
    ),
    # TOP after WINDOW (Flink SQL's WindowRank): a keyed one-input operator after the PER
    # columns' exchange, as Rank is; the window is in its name.
    "window_top_n": (
        """
        SET parallelism = 4;
        CREATE SOURCE s (value BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL 1 SECOND)
          WITH (connector = 'datagen');
        CREATE SINK o WITH (connector = 'console');
        INSERT INTO o FROM s |> SELECT value, ts |> WINDOW TUMBLE(ts, INTERVAL 1 MINUTE)
          |> TOP 3 BY value DESC PER value
          WITH (uid = 'rank', parallelism = 8, max_parallelism = 256);
        """,
        """
        from pyflink.datastream.functions import KeyedProcessFunction

        class WindowRank(KeyedProcessFunction):
            def process_element(self, value, ctx):
                yield value

        env.set_parallelism(4)
        m = source("s").map(lambda x: x, output_type=LONG).name("Map")
        name = ("WindowRank(window=[TUMBLE(ts, INTERVAL 1 MINUTE)], rankEnd=3, "
                "partitionBy=[value], orderBy=[value DESC])")
        (m.key_by(lambda x: x).process(WindowRank(), output_type=LONG).name(name).uid("rank")
            .set_parallelism(8).set_max_parallelism(256).print().name("o"))
        """,
        False,
    ),
    # A Python function (CREATE FUNCTION) is called by its step's own operator, as a
    # DataStream job calls one inside map(): no operator of its own, chained as before.
    "python_function_in_a_step": (
        """
        SET parallelism = 2;
        CREATE FUNCTION negate(x BIGINT) RETURNS BIGINT LANGUAGE python AS 'operator:neg';
        CREATE SOURCE s (value BIGINT) WITH (connector = 'datagen', uid = 'source');
        CREATE SINK o WITH (connector = 'console');
        INSERT INTO o FROM s |> SELECT negate(value) AS value WITH (uid = 'map')
          |> WHERE negate(value) > 0 WITH (parallelism = 3);
        """,
        """
        import operator

        env.set_parallelism(2)
        s = source("s").uid("source")
        m = s.map(lambda x: operator.neg(x), output_type=LONG).name("Map").uid("map")
        f = m.filter(lambda x: operator.neg(x) > 0).name("Filter").set_parallelism(3)
        f.print().name("o")
        """,
        True,
    ),
    # TOP n (Flink SQL's Rank): a keyed process function after the PER columns' exchange.
    "top_n_per_key": (
        """
        SET parallelism = 4;
        CREATE SOURCE s (value BIGINT) WITH (connector = 'datagen');
        CREATE SINK o WITH (connector = 'console', mode = 'update');
        INSERT INTO o FROM s |> SELECT value |> TOP 3 BY value DESC PER value
          WITH (uid = 'rank', parallelism = 8, max_parallelism = 256);
        """,
        """
        from pyflink.datastream.functions import KeyedProcessFunction

        class Rank(KeyedProcessFunction):
            def process_element(self, value, ctx):
                yield value

        env.set_parallelism(4)
        m = source("s").map(lambda x: x, output_type=LONG).name("Map")
        name = "Rank(rankEnd=3, partitionBy=[value], orderBy=[value DESC])"
        (m.key_by(lambda x: x).process(Rank(), output_type=LONG).name(name).uid("rank")
            .set_parallelism(8).set_max_parallelism(256).print().name("o"))
        """,
        False,
    ),
    # BATCH mode (docs/plans.md, "Batch mode"): the source and sink set no parallelism of
    # their own (-1: Flink's adaptive batch scheduler decides it), the aggregate does (2);
    # its input is a keyed (HASH) edge, its output to the sink an implicit REBALANCE.
    "batch_keyed_edge_set_and_unset_parallelism": (
        """
        SET parallelism = 4;
        SET execution.mode = 'batch';
        CREATE SOURCE s (value BIGINT) WITH (connector = 'datagen', number_of_rows = 10);
        CREATE SINK o WITH (connector = 'console', mode = 'update');
        INSERT INTO o FROM s |> SELECT value |> KEY BY value |> AGGREGATE sum(value) AS total
          WITH (uid = 'agg', parallelism = 2, max_parallelism = 256);
        """,
        """
        from pyflink.datastream import RuntimeExecutionMode
        env.set_runtime_mode(RuntimeExecutionMode.BATCH)
        env.set_parallelism(4)
        m = source("s").map(lambda x: x, output_type=LONG).name("Map")
        (m.key_by(lambda x: x % 7).reduce(lambda a, b: a + b).name("Keyed Aggregate").uid("agg")
            .set_parallelism(2).set_max_parallelism(256).print().name("o"))
        """,
        False,
    ),
    # BATCH mode, nothing chained: the edges with no partition step ship RESCALE, the written
    # FORWARD stays FORWARD and joins Map to Filter's forward group, whose parallelism is set
    # (3), so Map has 3 too; Source and Sink set none (-1).
    "batch_unchained_forwards_and_a_forward_group": (
        """
        SET parallelism = 3;
        SET chaining = false;
        SET execution.mode = 'batch';
        CREATE SOURCE s (value BIGINT) WITH (connector = 'datagen', number_of_rows = 10);
        CREATE SINK o WITH (connector = 'console');
        INSERT INTO o FROM s |> SELECT value |> FORWARD |> WHERE value > 0
          WITH (parallelism = 3);
        """,
        """
        from pyflink.datastream import RuntimeExecutionMode
        env.set_runtime_mode(RuntimeExecutionMode.BATCH)
        env.set_parallelism(3)
        env.disable_operator_chaining()
        m = source("s").map(lambda x: x, output_type=LONG).name("Map")
        f = m.forward().filter(lambda x: x > 0).name("Filter").set_parallelism(3)
        f.print().name("o")
        """,
        True,
    ),
    # BATCH mode: a forward group with max parallelism set on some members gives every member
    # the least of them (64 and 32: all three 32); the parallelism stays -1 (none set).
    "batch_forward_group_takes_the_least_max_parallelism": (
        """
        SET parallelism = 3;
        SET chaining = false;
        SET execution.mode = 'batch';
        CREATE SOURCE s (value BIGINT) WITH (connector = 'datagen', number_of_rows = 10);
        CREATE SINK o WITH (connector = 'console');
        INSERT INTO o FROM s |> SELECT value WITH (max_parallelism = 64) |> FORWARD
          |> WHERE value > 0 WITH (max_parallelism = 32) |> FORWARD |> SELECT value;
        """,
        """
        from pyflink.datastream import RuntimeExecutionMode
        env.set_runtime_mode(RuntimeExecutionMode.BATCH)
        env.set_parallelism(3)
        env.disable_operator_chaining()
        m = source("s").map(lambda x: x, output_type=LONG).name("Map").set_max_parallelism(64)
        f = m.forward().filter(lambda x: x > 0).name("Filter").set_max_parallelism(32)
        f.forward().map(lambda x: x, output_type=LONG).name("Map").print().name("o")
        """,
        True,
    ),
    # BATCH mode, chained: the same job with chaining on is one vertex of -1 (its FORWARD
    # edges are inside the chain), and a chaining hint breaks it into RESCALE edges.
    "batch_chained_and_a_chaining_hint": (
        """
        SET parallelism = 2;
        SET execution.mode = 'batch';
        CREATE SOURCE s (value BIGINT) WITH (connector = 'datagen', number_of_rows = 10);
        CREATE SINK o WITH (connector = 'console');
        CREATE SINK p WITH (connector = 'console');
        INSERT INTO o FROM s |> SELECT value |> WHERE value > 0;
        INSERT INTO p FROM s |> WHERE value > 1 WITH (chaining = 'new_chain');
        """,
        """
        from pyflink.datastream import RuntimeExecutionMode
        env.set_runtime_mode(RuntimeExecutionMode.BATCH)
        env.set_parallelism(2)
        s = source("s")
        s.map(lambda x: x, output_type=LONG).name("Map").filter(lambda x: x > 0).name(
            "Filter").print().name("o")
        s.filter(lambda x: x > 1).name("Filter").start_new_chain().print().name("p")
        """,
        True,
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_job_graph_equals_flinks(case: str) -> None:
    program, pyflink_job, compare_all_ids = CASES[case]
    (expected,) = flink_job_graphs([pyflink_job])
    actual = flowc_job_graph(program)
    if not compare_all_ids:
        only_uid_ids(program, expected, actual)
    assert actual == expected


# ---------------------------------------------------------------- random topologies

EXCHANGES = ("REBALANCE", "RESCALE", "SHUFFLE", "BROADCAST", "GLOBAL", "FORWARD")
PYFLINK_EXCHANGE = {
    "REBALANCE": "{s}.rebalance()",
    "RESCALE": "{s}.rescale()",
    "SHUFFLE": "{s}.shuffle()",
    "BROADCAST": "{s}.broadcast()",
    "FORWARD": "{s}.forward()",
    "GLOBAL": 'DataStream(getattr({s}._j_data_stream, "global")())',
}


def random_case(seed: int, batch: bool = False) -> tuple[str, str]:
    """One job as a .flow program and as PyFlink code: a view with a few steps, read by one or
    two INSERTs with steps of their own; random exchanges, parallelism and hints. ``batch``:
    in BATCH mode (bounded sources), where Flink's adaptive batch scheduler makes the JobGraph
    (docs/plans.md, "Batch mode")."""
    rng = random.Random(seed)
    default_p = rng.randint(1, 4)
    flow = [f"SET parallelism = {default_p};"]
    py = [f"env.set_parallelism({default_p})"]
    bounded = ""
    if batch:
        flow.append("SET execution.mode = 'batch';")
        py.append("from pyflink.datastream import RuntimeExecutionMode")
        py.append("env.set_runtime_mode(RuntimeExecutionMode.BATCH)")
        bounded = ", number_of_rows = 10"
    counter = iter(range(1000))

    def hints(parallel: int | None) -> tuple[list[str], str]:
        flow_hints, calls = [], ""
        if parallel is not None:
            flow_hints.append(f"parallelism = {parallel}")
            calls += f".set_parallelism({parallel})"
        if rng.random() < 0.2:
            uid = f"u{seed}-{next(counter)}"
            flow_hints.append(f"uid = '{uid}'")
            calls += f'.uid("{uid}")'
        if rng.random() < 0.15:
            flow_hints.append("slot_sharing_group = 'g'")
            calls += '.slot_sharing_group("g")'
        chaining = rng.choice(["always"] * 6 + ["new_chain", "never"])
        if chaining != "always":
            flow_hints.append(f"chaining = '{chaining}'")
            calls += ".start_new_chain()" if chaining == "new_chain" else ".disable_chaining()"
        return flow_hints, calls

    def steps(var: str, parallel: int, count: int) -> tuple[str, int]:
        """Steps after ``var`` (whose parallelism is ``parallel``); returns flow text and p."""
        text = ""
        for _ in range(count):
            next_p = rng.choice([None, None, rng.randint(1, 4)])
            effective = next_p if next_p is not None else default_p
            exchange = rng.choice([None, None, *EXCHANGES])
            if exchange == "FORWARD" and effective != parallel:
                exchange = None
            if exchange is not None:
                text += f" |> {exchange}"
                py.append(f"{var} = " + PYFLINK_EXCHANGE[exchange].format(s=var))
            kind = rng.choice(["Filter", "Map"])
            flow_hints, calls = hints(next_p)
            with_hints = f" WITH ({', '.join(flow_hints)})" if flow_hints else ""
            if kind == "Filter":
                text += f" |> WHERE value > 0{with_hints}"
                py.append(f'{var} = {var}.filter(lambda x: x > 0).name("Filter"){calls}')
            else:
                text += f" |> SELECT value{with_hints}"
                py.append(f'{var} = {var}.map(lambda x: x, output_type=LONG).name("Map"){calls}')
            parallel = effective
        return text, parallel

    source_p = rng.choice([None, rng.randint(1, 4)])
    option = f", parallelism = {source_p}" if source_p is not None else ""
    flow.append(f"CREATE SOURCE a (value BIGINT) WITH (connector = 'datagen'{option}{bounded});")
    py.append('a = source("a")' + (f".set_parallelism({source_p})" if source_p else ""))
    flow.append(f"CREATE SOURCE b (value BIGINT) WITH (connector = 'datagen'{bounded});")
    py.append('b = source("b")')
    py.append("v = a")
    view_steps, view_p = steps("v", source_p or default_p, rng.randint(1, 3))
    union = rng.random() < 0.3
    flow.append(f"CREATE VIEW v AS FROM a{view_steps}{' |> UNION ALL b' if union else ''};")
    if union:
        py.append("v = v.union(b)")
    for sink in range(rng.randint(1, 2)):
        sink_p = rng.choice([None, rng.randint(1, 4)])
        flow.append(
            f"CREATE SINK o{sink} WITH (connector = 'console'"
            + (f", parallelism = {sink_p}" if sink_p else "")
            + ");"
        )
        py.append(f"w{sink} = v")
        # After a union the next operator has inputs of two parallelisms: no FORWARD there.
        insert_steps, _ = steps(f"w{sink}", -1 if union else view_p, rng.randint(0, 2))
        flow.append(f"INSERT INTO o{sink} FROM v{insert_steps};")
        py.append(
            f'w{sink}.print().name("o{sink}")' + (f".set_parallelism({sink_p})" if sink_p else "")
        )
    return "\n".join(flow) + "\n", "\n".join(py) + "\n"


def test_random_topologies_equal_flinks() -> None:
    cases = [random_case(seed) for seed in range(40)]
    expected = flink_job_graphs([job for _, job in cases])
    for seed, ((program, job), flink) in enumerate(zip(cases, expected, strict=True)):
        assert flowc_job_graph(program) == flink, f"seed {seed}\n{program}\n{job}"


def test_random_batch_topologies_equal_flinks() -> None:
    """BATCH mode: -1 for every vertex no operator's parallelism is set on, unless a FORWARD
    step joins it to one that is; RESCALE for an unchained edge with no partition step
    (chaining hints, slot sharing groups); explicit exchanges as written."""
    cases = [random_case(seed, batch=True) for seed in range(40)]
    expected = flink_job_graphs([job for _, job in cases])
    parallelisms = {v["parallelism"] for graph in expected for v in graph}
    strategies = {e[1] for graph in expected for v in graph for e in v["inputs"]}
    # The cases reach the rule's corners: unset and set parallelism, both edge conversions.
    assert -1 in parallelisms and parallelisms - {-1}, parallelisms
    assert {"RESCALE", "FORWARD"} <= strategies, strategies
    for seed, ((program, job), flink) in enumerate(zip(cases, expected, strict=True)):
        assert flowc_job_graph(program) == flink, f"seed {seed}\n{program}\n{job}"


# ---------------------------------------------------------------- default max parallelism

# Where rounding 1.5 * p changes (p + p // 2 lands on a power of two), the 128 floor and the
# 32768 cap; tests/test_scale.py pins the same points against the formula restated.
BOUNDARY_PARALLELISMS = (1, 85, 86, 171, 172, 683, 684, 2731, 2732, 21845, 21846, 32768)


def test_default_max_parallelism_equals_flinks() -> None:
    """flowc's physical plan, where no max parallelism is set, against Flink's own
    KeyGroupRangeAssignment.computeDefaultMaxParallelism called through its Java gateway."""
    assert FLINK_PYTHON is not None
    script = (
        "import json\n"
        "from pyflink.java_gateway import get_gateway\n"
        "assign = get_gateway().jvm.org.apache.flink.runtime.state.KeyGroupRangeAssignment\n"
        f"print(json.dumps([assign.computeDefaultMaxParallelism(p) for p in "
        f"{list(BOUNDARY_PARALLELISMS)}]))\n"
    )
    result = run_flink(FLINK_PYTHON, script)
    assert result.returncode == 0, result.stderr[-2000:]
    flinks = json.loads(result.stdout.strip().splitlines()[-1])
    flowcs = []
    for parallelism in BOUNDARY_PARALLELISMS:
        program = (
            f"SET parallelism = {parallelism};\n"
            "CREATE SOURCE s (k BIGINT) WITH (connector = 'datagen');\n"
            "CREATE SINK o WITH (connector = 'noop', mode = 'update');\n"
            "INSERT INTO o FROM s |> KEY BY k |> AGGREGATE count(*) AS n;\n"
        )
        plan = flowc.compile(program, "max_parallelism.flow").physical_plan
        (max_parallelism,) = {v.max_parallelism for v in plan.vertices}
        flowcs.append(max_parallelism)
    assert flowcs == flinks
