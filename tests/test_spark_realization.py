"""The Spark realization in the physical plan: one query per INSERT, an exchange per edge."""

from __future__ import annotations

import re
from typing import Any

import pytest

import flowc
from flowc.spark.codegen import generate_pyspark
from flowc.spark.spark_plan import ExchangeKind

HEADER = """
SET parallelism = 4;
CREATE SOURCE s (k BIGINT, v BIGINT) WITH (connector = 'datagen', parallelism = 4);
"""


def spark(program: str) -> dict[str, Any]:
    plan = flowc.compile(HEADER + program, "t.flow").physical_plan.spark
    assert plan is not None
    return plan.to_json()


def only_exchange(program: str) -> dict[str, Any]:
    (query,) = spark(program)["queries"]
    (exchange,) = query["exchanges"]
    return exchange


@pytest.mark.parametrize(
    ("step", "parallelism", "expected_spark", "partitioning", "shuffle"),
    [
        ("REBALANCE", 3, "repartition(3)", "RoundRobinPartitioning(3)", True),
        ("RESCALE", 2, "coalesce(2)", "coalesced to 2 partitions", False),
        ("RESCALE", 8, "repartition(8)", "RoundRobinPartitioning(8)", True),
        ("GLOBAL", 4, "repartition(1)", "SinglePartition", True),
        ("SHUFFLE", 4, "repartition(4, rand())", "HashPartitioning([rand()], 4)", True),
        (
            "BROADCAST",
            3,
            "crossJoin(range(3)).repartition(3, subtask)",
            "HashPartitioning([subtask], 3)",
            True,
        ),
        ("PARTITION BY k % 3", 4, "repartition(4, k % 3)", "HashPartitioning([k % 3], 4)", True),
    ],
)
def test_each_ship_strategy_has_its_spark_exchange(
    step: str, parallelism: int, expected_spark: str, partitioning: str, shuffle: bool
) -> None:
    exchange = only_exchange(
        f"CREATE SINK o WITH (connector = 'noop', parallelism = {parallelism});\n"
        f"INSERT INTO o FROM s |> {step} |> SELECT k, v WITH (parallelism = {parallelism});\n"
    )
    assert (exchange["spark"], exchange["partitioning"], exchange["shuffle"]) == (
        expected_spark,
        partitioning,
        shuffle,
    )


def test_forward_edges_are_no_exchange_and_keyed_aggregates_use_their_own() -> None:
    plan = spark(
        "CREATE SINK o WITH (connector = 'console', mode = 'update');\n"
        "INSERT INTO o FROM s |> WHERE v > 0 |> KEY BY k |> AGGREGATE sum(v) AS total;\n"
    )
    (query,) = plan["queries"]
    assert [(e["ship_strategy"], e["spark"]) for e in query["exchanges"]] == [
        ("HASH", "groupBy(k)")
    ]
    assert query["exchanges_planned"] == 1
    assert plan["shuffle_partitions"] == 4
    assert "rescaling" in query


def test_shuffle_partitions_follow_the_stateful_parallelism_not_key_groups() -> None:
    plan = spark(
        "SET max_parallelism = 128;\n"
        "CREATE SINK o WITH (connector = 'console', mode = 'update');\n"
        "INSERT INTO o FROM s |> KEY BY k |> AGGREGATE count(*) AS n WITH (parallelism = 2);\n"
    )
    assert plan["shuffle_partitions"] == 2
    keyed = [e for e in plan["exchanges"] if e["ship_strategy"] == "HASH"]
    assert [e["partitioning"] for e in keyed] == ["HashPartitioning([k], 2)"]


def test_set_spark_shuffle_partitions_overrides() -> None:
    plan = spark(
        "SET spark.sql.shuffle.partitions = 16;\n"
        "CREATE SINK o WITH (connector = 'console', mode = 'update');\n"
        "INSERT INTO o FROM s |> KEY BY k |> AGGREGATE count(*) AS n;\n"
    )
    assert plan["shuffle_partitions"] == 16
    assert plan["exchanges"][0]["partitioning"] == "HashPartitioning([k], 16)"


def test_one_query_per_insert_with_only_its_own_exchanges() -> None:
    plan = spark(
        "CREATE SINK a WITH (connector = 'noop');\n"
        "CREATE SINK b WITH (connector = 'noop');\n"
        "CREATE VIEW w AS FROM s |> REBALANCE |> WHERE v > 0;\n"
        "INSERT INTO a FROM w;\n"
        "INSERT INTO b FROM w |> SHUFFLE |> SELECT k WITH (parallelism = 2);\n"
    )
    queries = {q["name"]: q for q in plan["queries"]}
    assert set(queries) == {"a", "b"}
    assert [e["ship_strategy"] for e in queries["a"]["exchanges"]] == ["REBALANCE"]
    assert [e["ship_strategy"] for e in queries["b"]["exchanges"]] == [
        "REBALANCE",
        "SHUFFLE",
        "REBALANCE",
    ]
    assert [e["query"] for e in plan["exchanges"]] == ["a", "b", "b", "b"]


def test_trigger_and_checkpoint_location_come_from_the_settings() -> None:
    plan = spark(
        "SET checkpoint.interval = 10s;\nSET checkpoint.dir = '/data/ck';\n"
        "CREATE SINK o WITH (connector = 'noop');\nINSERT INTO o FROM s;\n"
    )
    (query,) = plan["queries"]
    assert query["trigger"].startswith("processingTime 10000 ms")
    assert query["checkpoint_location"] == "/data/ck/t/o"
    assert query["exchanges_planned"] == 0


def test_global_aggregate_gathers_into_one_partition() -> None:
    exchange = only_exchange(
        "SET max_parallelism = 128;\n"
        "CREATE SINK o WITH (connector = 'console', mode = 'complete', parallelism = 1);\n"
        "INSERT INTO o FROM s |> AGGREGATE count(*) AS n;\n"
    )
    assert (exchange["spark"], exchange["partitioning"]) == (
        "groupBy() (global)",
        "SinglePartition",
    )


RESCALE_BETWEEN = """
CREATE SOURCE r (k BIGINT, v BIGINT) WITH (connector = 'datagen', parallelism = {up});
CREATE SINK o WITH (connector = 'noop', parallelism = {down});
INSERT INTO o FROM r |> RESCALE |> SELECT k, v WITH (parallelism = {down});
"""

# Flink's RESCALE wires each producer subtask to a fixed few consumers. When the consumers are
# no more than the producers (equal counts included), merging neighbouring partitions does
# that without a shuffle; only widening needs one, because Spark cannot split a partition.
RESCALES = [
    (2, 2, ExchangeKind.COALESCE, ".coalesce(2)"),
    (2, 4, ExchangeKind.ROUND_ROBIN, ".repartition(4)"),
    (4, 2, ExchangeKind.COALESCE, ".coalesce(2)"),
]


@pytest.mark.parametrize(("up", "down", "kind", "call"), RESCALES)
def test_rescale_exchange_in_the_plan_and_the_generated_code(
    up: int, down: int, kind: ExchangeKind, call: str
) -> None:
    """The plan decides the RESCALE edge once and the generated program writes that decision:
    a flipped comparison (equal parallelisms shuffled) fails here on both sides."""
    job = flowc.compile(RESCALE_BETWEEN.format(up=up, down=down), "t.flow", for_spark=True)
    plan = job.spark_plan
    (exchange,) = plan.exchanges.values()
    assert (exchange.ship_strategy, exchange.kind, exchange.partitions) == ("RESCALE", kind, down)
    assert exchange.shuffle is (kind is ExchangeKind.ROUND_ROBIN)
    (query,) = plan.queries
    assert query.exchanges_planned == (1 if exchange.shuffle else 0)
    code = generate_pyspark(job)
    written = re.findall(r"\.(?:coalesce|repartition)\(\d+[^)]*\)", code)
    assert written == [call]


# ---------------------------------------------------------------- minimal exchanges

IMPLICIT = [
    # (the program after HEADER, Spark's operation on each edge in order, shuffles)
    (
        "CREATE SINK o WITH (connector = 'noop', parallelism = 2);\n"
        "INSERT INTO o FROM s |> SELECT k, v WITH (parallelism = 2);\n",
        ["coalesce(2)"],
        0,
    ),
    (
        "CREATE SINK o WITH (connector = 'noop', parallelism = 8);\n"
        "INSERT INTO o FROM s |> SELECT k, v WITH (parallelism = 8);\n",
        ["repartition(8)"],
        1,
    ),
    (
        "SET max_parallelism = 16;\n"
        "CREATE SINK o WITH (connector = 'noop', mode = 'update');\n"
        "INSERT INTO o FROM s |> SELECT k, v WITH (parallelism = 8)\n"
        "  |> KEY BY k |> AGGREGATE count(*) AS n WITH (parallelism = 8);\n",
        ["none", "groupBy(k)", "coalesce(4)"],
        1,
    ),
    (
        "CREATE SINK o WITH (connector = 'noop');\n"
        "INSERT INTO o FROM s |> SELECT k, v WITH (parallelism = 8) |> REBALANCE\n"
        "  |> WHERE k > 0;\n",
        ["none", "repartition(4)"],
        1,
    ),
    (
        "CREATE SINK o WITH (connector = 'noop');\n"
        "CREATE SINK p WITH (connector = 'noop', parallelism = 8);\n"
        "CREATE VIEW wide AS FROM s |> SELECT k, v WITH (parallelism = 8);\n"
        "INSERT INTO o FROM wide |> REBALANCE |> WHERE k > 0;\n"
        "INSERT INTO p FROM wide;\n",
        ["repartition(8)", "repartition(4)"],
        2,
    ),
]


@pytest.mark.parametrize(("program", "operations", "shuffles"), IMPLICIT)
def test_flinks_own_rebalances_run_no_shuffle_where_spark_needs_none(
    program: str, operations: list[str], shuffles: int
) -> None:
    """Narrowing: coalesce; before an exchange that redistributes every row anyway (a
    stateful step's own, a REBALANCE written): nothing; widening into a sink, or where one
    path is not redistributed: the shuffle stays. SET exchanges = 'flink' keeps them all."""
    plan = spark(program)
    (query, *_) = plan["queries"]
    assert [e["spark"] for e in query["exchanges"]] == operations
    assert sum(e["shuffle"] for e in query["exchanges"]) == shuffles
    faithful = spark("SET exchanges = 'flink';\n" + program)
    for exchange, kept in zip(query["exchanges"], faithful["queries"][0]["exchanges"], strict=True):
        if exchange["spark"] in ("none", "coalesce(2)", "coalesce(4)"):
            assert kept["spark"].startswith("repartition(") and kept["shuffle"]
            assert "only because the parallelism" in exchange["why"]
