"""Per stateful operator, the physical plan's Spark realization says how Flink's key groups
relate to the Spark partitions its state is in (issue 29): each operator kind's layout
(input: a pipeline; expected: what Spark hashes), every number in it taken from the plan
(the shuffle partitions, the exchange's keys, the Flink vertex's key groups), and on real
Spark the executed plan hashing each operator's input on exactly those columns."""

from __future__ import annotations

import functools
import html
import json
import re
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc.flink.keygroups import compute_key_group_range_for_operator_index
from flowc.spark.spark_plan import SparkPlan, SparkQuery
from flowc.spark.state_partitions import Spread, StatePartitions
from flowc.viewer import render_html

HEAD = """\
SET parallelism = 2;
SET max_parallelism = 16;
SET state.backend.type = 'rocksdb';
CREATE SOURCE bids (auction BIGINT, bidder BIGINT, price BIGINT, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL 5 SECONDS)
  WITH (connector = 'files', path = 'bids', format = 'json');
CREATE SOURCE auctions (id BIGINT, seller BIGINT, opened TIMESTAMP,
  WATERMARK FOR opened AS opened - INTERVAL 5 SECONDS)
  WITH (connector = 'files', path = 'auctions', format = 'json');
"""

W = "INTERVAL 10 SECONDS"

#: (query, its sink's options, its pipeline, per stateful operator: how Spark spreads the
#: state, the columns it hashes per input side, whether the window is hashed with them).
KINDS: list[tuple[str, str, str, list[tuple[Spread, tuple[tuple[str, ...], ...], bool]]]] = [
    (
        "keyed_aggregate",
        "mode = 'update'",
        "FROM bids |> KEY BY auction, bidder |> AGGREGATE count(*) AS n",
        [(Spread.COLUMNS, (("auction", "bidder"),), False)],
    ),
    (
        "global_aggregate",
        "mode = 'update'",
        "FROM bids |> AGGREGATE count(*) AS n",
        [(Spread.SINGLE, (), False)],
    ),
    (
        "tumble",
        "",
        f"FROM bids |> KEY BY auction |> WINDOW TUMBLE(ts, {W}) |> AGGREGATE count(*) AS n",
        [(Spread.COLUMNS, (("auction",),), True)],
    ),
    (
        "hop",
        "",
        f"FROM bids |> KEY BY auction |> WINDOW HOP(ts, {W}, INTERVAL 5 SECONDS) "
        "|> AGGREGATE count(*) AS n",
        [(Spread.COLUMNS, (("auction",),), True)],
    ),
    (
        "cumulate",
        "",
        f"FROM bids |> KEY BY auction |> WINDOW CUMULATE(ts, {W}, INTERVAL 5 SECONDS) "
        "|> AGGREGATE count(*) AS n",
        [(Spread.COLUMNS, (("auction",),), True)],
    ),
    (
        "global_window",
        "",
        f"FROM bids |> WINDOW TUMBLE(ts, {W}) |> AGGREGATE count(*) AS n",
        [(Spread.COLUMNS, ((),), True)],
    ),
    (
        "session",
        "",
        f"FROM bids |> KEY BY auction |> WINDOW SESSION(ts, {W}) |> AGGREGATE count(*) AS n",
        [(Spread.COLUMNS, (("auction",),), False)],
    ),
    (
        "global_session",
        "",
        f"FROM bids |> WINDOW SESSION(ts, {W}) |> AGGREGATE count(*) AS n",
        [(Spread.ONE_GROUP, (), False)],
    ),
    (
        "join",
        "",
        "FROM auctions |> JOIN bids ON id = bids.auction "
        "AND ts BETWEEN opened AND opened + INTERVAL 1 MINUTE |> SELECT id, price",
        [(Spread.COLUMNS, (("id",), ("auction",)), False)],
    ),
    (
        "dedup",
        "",
        "FROM bids |> DEDUPLICATE ON auction",
        [(Spread.COLUMNS, (("auction",),), False)],
    ),
    (
        "dedup_rows",
        "",
        "FROM bids |> DEDUPLICATE",
        [(Spread.COLUMNS, (("auction", "bidder", "price", "ts"),), False)],
    ),
    (
        "top",
        "mode = 'update'",
        "FROM bids |> TOP 2 BY price DESC PER auction AS rn",
        [(Spread.COLUMNS, (("auction",),), False)],
    ),
    (
        "global_top",
        "mode = 'update'",
        "FROM bids |> TOP 1 BY price DESC AS rn",
        [(Spread.SINGLE, (), False)],
    ),
    (
        "window_top",
        "",
        f"FROM bids |> WINDOW TUMBLE(ts, {W}) |> TOP 2 BY price DESC PER auction",
        [(Spread.COLUMNS, (("auction",),), True)],
    ),
    (
        "over",
        "",
        "FROM bids |> EXTEND AVG(price) OVER (PARTITION BY auction ORDER BY ts "
        "ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS a",
        [(Spread.COLUMNS, (("auction",),), False)],
    ),
    (
        "dedup_within",
        "",
        f"FROM bids |> DEDUPLICATE ON auction WITHIN {W}",
        [(Spread.KEY_GROUPS, (("auction",),), False)],
    ),
    (
        "watermark_reader",
        "",
        "FROM bids |> WHERE CURRENT_WATERMARK(ts) IS NULL OR ts > CURRENT_WATERMARK(ts)",
        [(Spread.ROW_BUCKETS, (), False)],
    ),
    (
        "aggregate_of_aggregate",
        "connector = 'files', path = 'out/chain', format = 'json', mode = 'update', key = 'n'",
        "FROM bids |> KEY BY auction |> AGGREGATE count(*) AS n "
        "|> KEY BY n |> AGGREGATE count(*) AS c",
        [
            (Spread.KEY_GROUPS, (("auction",),), False),
            (Spread.KEY_GROUPS, (("n",),), False),
        ],
    ),
]


def _sink(options: str) -> str:
    """A noop sink unless the options name a connector."""
    return (
        options
        if "connector" in options
        else ", ".join(filter(None, ["connector = 'noop'", options]))
    )


PROGRAM = HEAD + "".join(
    f"CREATE SINK {name} WITH ({_sink(sink)});\nINSERT INTO {name} {pipeline};\n"
    for name, sink, pipeline, _ in KINDS
)


def program_of(names: list[str]) -> str:
    return HEAD + "".join(
        f"CREATE SINK {name} WITH ({_sink(sink)});\nINSERT INTO {name} {pipeline};\n"
        for name, sink, pipeline, _ in KINDS
        if name in names
    )


@functools.cache
def compiled() -> flowc.CompiledJob:
    return flowc.compile(PROGRAM, "kinds.flow", for_spark=True)


def plan() -> SparkPlan:
    spark = compiled().physical_plan.spark
    assert spark is not None
    return spark


def hashed(state: StatePartitions) -> list[tuple[str, ...]]:
    """The columns Spark hashes, as the plan states them (the window as ``window``)."""
    if state.spread is Spread.KEY_GROUPS:
        return [("__flowc_key_group",)] * len(state.spark_keys)
    if state.spread is Spread.ROW_BUCKETS:
        return [("__flowc_bucket",)]
    return [(*keys, "window") if state.window else keys for keys in state.spark_keys]


@pytest.mark.parametrize(
    ("name", "expected"), [(k[0], k[3]) for k in KINDS], ids=[k[0] for k in KINDS]
)
def test_each_operator_kind_has_its_layout(
    name: str, expected: list[tuple[Spread, tuple[tuple[str, ...], ...], bool]]
) -> None:
    query = plan().query(name)
    assert [(s.spread, s.spark_keys, s.window) for s in query.state] == expected


@pytest.mark.parametrize("name", [k[0] for k in KINDS])
def test_the_numbers_are_the_plans(name: str) -> None:
    """Partitions: the plan's shuffle partitions (one for SinglePartition); Spark's keys:
    the planned exchange's into the operator; Flink's ranges: the physical plan's vertex."""
    spark = plan()
    query: SparkQuery = spark.query(name)
    physical = compiled().physical_plan
    assert query.state
    for state in query.state:
        single = state.spread is Spread.SINGLE
        assert state.partitions == (1 if single else spark.shuffle_partitions)
        n = state.partitions
        exchanged = tuple(
            e.keys for e in query.exchanges if e.consumer_id == state.node_id and e.keys
        )
        if state.spread is Spread.COLUMNS:
            assert state.spark_keys == (exchanged or ((),))
            for columns in hashed(state):
                assert f"murmur3({', '.join(columns)}) mod {n}" in state.to_text() or (
                    len(state.spark_keys) == 2 and ", ".join(columns) in state.to_text()
                )
        vertex = next(
            v
            for v in physical.vertices
            if any(op.node_id == state.node_id for op in v.vertex.operators)
        )
        assert (state.parallelism, state.max_parallelism) == (
            vertex.parallelism,
            vertex.max_parallelism,
        )
        if state.keyed:
            ranges = [vertex.key_groups_of(i) for i in range(vertex.parallelism)]
            assert ranges == [
                compute_key_group_range_for_operator_index(
                    state.max_parallelism, state.parallelism, i
                )
                for i in range(state.parallelism)
            ]
            shown = ", ".join(f"{low}-{high}" for low, high in ranges)
            assert f"{state.parallelism} subtask" in state.to_text()
            assert f"({shown})" in state.to_text()
        if state.spread in (Spread.KEY_GROUPS, Spread.ROW_BUCKETS):
            assert state.groups == (
                spark.shuffle_partitions
                if state.spread is Spread.ROW_BUCKETS
                else state.max_parallelism
            )
            assert f"into {state.groups} " in state.to_text()
        document = query.to_json()["state"]
        assert [d["spark"]["partitions"] for d in document] == [s.partitions for s in query.state]


def test_text_json_and_page_carry_the_lines() -> None:
    job = compiled()
    spark = plan()
    texts = [s.to_text() for q in spark.queries for s in q.state]
    assert len(texts) == sum(len(k[3]) for k in KINDS)
    lines = job.physical_plan.to_text().splitlines()
    assert [line for line in lines if line.startswith("    state: ")] == [
        f"    state: {t}" for t in texts
    ]
    document = json.loads(job.physical_plan.to_json())
    queries = document["spark"]["queries"]
    assert [d["text"] for q in queries for d in q.get("state", [])] == texts
    page = html.unescape(render_html(job, "jobgraph"))
    assert all(f"state: {t}" in page for t in texts)


def test_the_rescaling_line_of_an_aggregate_without_a_key_says_refused() -> None:
    """flowc refuses to repartition an aggregate without a key (E0826, docs/state.md); on
    RocksDB a keyed aggregate's line says flowc run repartitions it."""
    spark = plan()
    assert spark.state_store.backend == "rocksdb"
    unkeyed = spark.query("global_aggregate").rescaling
    keyed = spark.query("keyed_aggregate").rescaling
    assert unkeyed is not None and keyed is not None
    assert "E0826" in unkeyed and "without a key" in unkeyed
    assert "flowc run first repartitions it" in keyed and "E0826" not in keyed


def test_a_batch_job_keeps_no_state_to_lay_out() -> None:
    """Batch mode reads its bounded input once: no state between runs, no state lines
    (what batch mode refuses, CURRENT_WATERMARK and OVER, left out)."""
    kept = [k[0] for k in KINDS if k[0] not in ("watermark_reader", "over", "dedup_within")]
    batch = program_of(kept).replace(
        "SET parallelism", "SET execution.mode = 'batch';\nSET parallelism"
    )
    spark = flowc.compile(batch, "kinds.flow").physical_plan.spark
    assert spark is not None and spark.batch
    assert len(spark.queries) == len(kept)
    assert all(not q.state and q.stateful for q in spark.queries)


# ---------------------------------------------------------------- on real Spark

_EXCHANGE = re.compile(r"Exchange (hashpartitioning\((.*)\)|SinglePartition), (\w+)")
_STATE_PARTITIONS = re.compile(r"numPartitions = (\d+)\]")


def _column(text: str) -> str:
    """A column of Spark's plan as the state line names it: ids and watermark delays
    dropped, Spark's window columns as ``window``."""
    name = re.sub(r"(#\d+L?)?(-T\d+ms)?$", "", text.strip())
    return "window" if name in ("window", "__flowc_window", "session_window") else name


def executed_hashing(plan_text: str) -> tuple[Counter[tuple[tuple[str, ...], int]], list[int]]:
    """Spark's exchanges before stateful operators as (columns, partitions), and the
    partition count of each state store."""
    found: Counter[tuple[tuple[str, ...], int]] = Counter()
    for line in plan_text.splitlines():
        match = _EXCHANGE.search(line)
        if match is None:
            continue
        if match.group(2) is None:
            found[((), 1)] += 1
            continue
        if match.group(3) != "REQUIRED_BY_STATEFUL_OPERATOR":
            continue
        *columns, count = match.group(2).split(", ")
        found[(tuple(_column(c) for c in columns), int(count))] += 1
    return found, [int(n) for n in _STATE_PARTITIONS.findall(plan_text)]


def planned_hashing(query: SparkQuery) -> Counter[tuple[tuple[str, ...], int]]:
    found: Counter[tuple[tuple[str, ...], int]] = Counter()
    for state in query.state:
        if state.spread is Spread.SINGLE:
            found[((), 1)] += 1
        elif state.spread is Spread.ONE_GROUP:
            found[(("_groupingexpression",), state.partitions)] += 1
        else:
            for columns in hashed(state):
                found[(columns, state.partitions)] += 1
    return found


#: The kinds run on Spark: one of each way Spark spreads the state (Spark's own operators
#: together; the processors, whose Python workers start slowly, apart).
ON_SPARK = {
    "spark_operators": ["global_aggregate", "tumble", "session", "join", "global_window"],
    "processors": ["aggregate_of_aggregate"],
}


@pytest.mark.parametrize("group", list(ON_SPARK))
def test_spark_hashes_each_operator_as_the_plan_says(
    spark: Any, tmp_path: Path, group: str
) -> None:
    """Spark's executed plan of every query: the exchanges before its stateful operators
    hash the columns the plan's state lines name, into as many partitions, and each state
    store has the plan's partition count."""
    from flowc.runtime.run import load_program

    start = datetime(2026, 1, 1, 12)
    bids = [
        {"auction": i % 3, "bidder": i % 2, "price": i, "ts": str(start + timedelta(seconds=3 * i))}
        for i in range(8)
    ]
    auctions = [{"id": i, "seller": 1, "opened": str(start)} for i in range(3)]
    for folder, rows in (("bids", bids), ("auctions", auctions)):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "a.json").write_text("\n".join(json.dumps(r) for r in rows))
    job = flowc.compile(program_of(ON_SPARK[group]), str(tmp_path / "kinds.flow"), for_spark=True)
    spark_plan = job.physical_plan.spark
    assert spark_plan is not None
    program = load_program(job)
    program.__dict__["BASE_DIR"] = str(tmp_path)
    started = program.start_queries(spark, str(tmp_path / "checkpoints"), True)
    executed: dict[str, str] = {}
    try:
        for query in started:
            assert query.awaitTermination(300), "the available-now run did not finish"
            execution = query._jsq.streamingQuery().lastExecution()
            executed[query.name] = str(execution.executedPlan().toString())
    finally:
        for query in started:
            query.stop()
    assert sorted(executed) == sorted(ON_SPARK[group])
    for query in spark_plan.queries:
        found, stores = executed_hashing(executed[query.name])
        assert found == planned_hashing(query), (query.name, executed[query.name])
        # Spark's state info says the shuffle partitions even where SinglePartition leaves
        # all but partition 0 empty (the exchange above says that)
        assert set(stores) == {spark_plan.shuffle_partitions}, query.name
