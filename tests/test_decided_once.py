"""Code generation decides nothing: it writes what the SparkPlan says.

Each test compiles a job, changes one decision in the SparkPlan the compiler made
(``dataclasses.replace``, the program left as it is), generates the PySpark program from
the changed plan and finds the program following the plan. A code generator that derived
the decision again from the program (the sink's mode, the source's hints, the join's
kind, the settings) would write the original decision and fail here.
"""

from __future__ import annotations

from dataclasses import replace

import flowc
from flowc.job import CompiledJob, stages
from flowc.spark.codegen import generate_pyspark
from flowc.spark.spark_plan import ExchangeKind, SparkPlan


def compiled(text: str) -> CompiledJob:
    return flowc.compile(text, "job.flow", for_spark=True)


def generated_with(job: CompiledJob, plan: SparkPlan) -> str:
    """The program generated from ``plan`` in place of the compiler's own."""
    stages.SPARK_PLAN.store(job, plan)
    return generate_pyspark(job)


def with_query(plan: SparkPlan, index: int, **changes: object) -> SparkPlan:
    queries = list(plan.queries)
    queries[index] = replace(queries[index], **changes)  # type: ignore[arg-type]
    return replace(plan, queries=tuple(queries))


RATE = """
SET parallelism = 2;
CREATE SOURCE s (value BIGINT) WITH (connector = 'rate', rows_per_second = 5);
CREATE SINK o WITH (connector = 'console');
INSERT INTO o FROM s |> WHERE value > 0;
"""

DATAGEN = """
SET parallelism = 2;
CREATE SOURCE s (value BIGINT) WITH (connector = 'datagen', number_of_rows = 10,
  parallelism = 4);
CREATE SINK o WITH (connector = 'console');
INSERT INTO o FROM s |> WHERE value > 0;
"""


def test_a_rate_source_reads_into_the_plans_partitions() -> None:
    job = compiled(RATE)
    assert job.spark_plan.source_partitions == {"s": 2}
    assert ".option('numPartitions', 2)" in generate_pyspark(job)
    code = generated_with(job, replace(job.spark_plan, source_partitions={"s": 3}))
    assert ".option('numPartitions', 3)" in code
    assert ".option('numPartitions', 2)" not in code


def test_a_datagen_source_reads_into_the_plans_partitions() -> None:
    job = compiled(DATAGEN)
    assert job.spark_plan.source_partitions == {"s": 4}  # the source's hint, not the job's 2
    assert ".option('numPartitions', 4)" in generate_pyspark(job)
    code = generated_with(job, replace(job.spark_plan, source_partitions={"s": 3}))
    assert ".option('numPartitions', 3)" in code
    assert "numPartitions', 4" not in code


def test_a_batch_datagen_source_reads_into_the_plans_partitions() -> None:
    job = compiled("SET execution.mode = 'batch';\n" + DATAGEN)
    assert "spark.range(0, 10, 1, 4)" in generate_pyspark(job)
    code = generated_with(job, replace(job.spark_plan, source_partitions={"s": 3}))
    assert "spark.range(0, 10, 1, 3)" in code


KEYED = """
SET parallelism = 2;
CREATE SOURCE s (k BIGINT, v BIGINT) WITH (connector = 'datagen', number_of_rows = 10);
CREATE SINK o WITH (connector = 'console', mode = 'update');
INSERT INTO o FROM s |> KEY BY k |> AGGREGATE sum(v) AS total;
"""


def test_a_query_runs_in_the_plans_output_mode() -> None:
    job = compiled(KEYED)
    assert job.spark_plan.queries[0].output_mode == "update"
    assert ".outputMode('update')" in generate_pyspark(job)
    code = generated_with(job, with_query(job.spark_plan, 0, output_mode="complete"))
    assert ".outputMode('complete')" in code
    assert ".outputMode('update')" not in code


UPSERT = """
SET parallelism = 2;
CREATE SOURCE bids (auction BIGINT, bidder BIGINT, price BIGINT)
  WITH (connector = 'files', path = 'in', format = 'json');
CREATE SINK totals WITH (connector = 'files', path = 'out', format = 'parquet',
  mode = 'update', key = 'auction');
INSERT INTO totals FROM bids |> KEY BY auction, bidder |> AGGREGATE max(price) AS top;
"""


def test_an_upsert_sink_merges_on_the_plans_key() -> None:
    job = compiled(UPSERT)
    assert job.spark_plan.queries[0].upsert_key == ("auction",)
    assert "'parquet', ['auction'], " in generate_pyspark(job)
    code = generated_with(job, with_query(job.spark_plan, 0, upsert_key=("auction", "bidder")))
    assert "'parquet', ['auction', 'bidder'], " in code
    assert "['auction'], " not in code


def test_a_sink_upserts_only_where_the_plan_says_so() -> None:
    job = compiled(UPSERT)
    assert "def file_upsert(" in generate_pyspark(job)
    code = generated_with(job, with_query(job.spark_plan, 0, upsert_key=None))
    assert "foreachBatch" not in code and "def file_upsert(" not in code
    assert "writer = writer.format('parquet')" in code

    appending = compiled(
        UPSERT.replace("mode = 'update', key = 'auction'", "mode = 'append'").replace(
            "KEY BY auction, bidder |> AGGREGATE max(price) AS top", "WHERE price > 0"
        )
    )
    assert appending.spark_plan.queries[0].upsert_key is None
    assert "foreachBatch" not in generate_pyspark(appending)
    code = generated_with(appending, with_query(appending.spark_plan, 0, upsert_key=("auction",)))
    assert "def file_upsert(" in code
    assert "writer = writer.foreachBatch(file_upsert('totals', " in code


def test_a_query_triggers_at_the_plans_interval() -> None:
    job = compiled(KEYED)
    assert job.spark_plan.queries[0].trigger_interval_ms is None
    assert "processingTime" not in generate_pyspark(job)
    code = generated_with(job, with_query(job.spark_plan, 0, trigger_interval_ms=7000))
    assert "writer = writer.trigger(processingTime='7000 milliseconds')" in code

    timed = compiled("SET checkpoint.interval = '5 s';\n" + KEYED)
    assert timed.spark_plan.queries[0].trigger_interval_ms == 5000
    assert "processingTime='5000 milliseconds'" in generate_pyspark(timed)
    assert "processingTime" not in generated_with(
        timed, with_query(timed.spark_plan, 0, trigger_interval_ms=None)
    )


DIMENSION = """
SET parallelism = 2;
CREATE SOURCE bids (auction BIGINT, price BIGINT)
  WITH (connector = 'files', path = 'bids', format = 'json');
CREATE TABLE auctions (id BIGINT, item STRING)
  WITH (connector = 'files', path = 'auctions', format = 'json');
CREATE SINK o WITH (connector = 'console');
INSERT INTO o FROM bids |> JOIN auctions ON auction = auctions.id |> SELECT auction, item;
"""


def test_a_table_is_broadcast_where_the_plan_says_so() -> None:
    job = compiled(DIMENSION)
    plan = job.spark_plan
    assert len(plan.broadcast_joins) == 1
    assert "F.broadcast(" in generate_pyspark(job)
    code = generated_with(job, replace(plan, broadcast_joins=frozenset()))
    assert "F.broadcast(" not in code
    assert ".join(auctions_" in code


TEMPORAL = """
CREATE SOURCE orders (id BIGINT, cur STRING, ts TIMESTAMP,
  WATERMARK FOR ts AS ts - INTERVAL 5 SECONDS)
  WITH (connector = 'files', path = 'orders', format = 'json');
CREATE TABLE rates (cur STRING, rate DOUBLE, since TIMESTAMP)
  WITH (connector = 'files', path = 'rates', format = 'json', key = 'cur',
  version_time = 'since');
CREATE SINK o WITH (connector = 'files', path = 'out', format = 'json');
INSERT INTO o SELECT o.id, r.rate FROM orders AS o
  JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.cur = r.cur;
"""


def test_a_table_is_joined_by_version_where_the_plan_says_so() -> None:
    job = compiled(TEMPORAL)
    plan = job.spark_plan
    assert plan.temporal_joins and plan.temporal_joins <= plan.broadcast_joins
    code = generate_pyspark(job)
    assert "F.broadcast(table_versions(" in code and "def table_versions(" in code
    code = generated_with(job, replace(plan, temporal_joins=frozenset()))
    assert "table_versions" not in code and "__flowc_valid_to" not in code
    assert "from pyspark.sql import Window" not in code
    assert "F.broadcast(rates_" in code


PARTITIONED = """
CREATE SOURCE bids (auction BIGINT, price BIGINT, day STRING)
  WITH (connector = 'files', path = 'bids', format = 'json');
CREATE SINK o WITH (connector = 'files', path = 'out', format = 'json', partition_by = 'day');
INSERT INTO o FROM bids |> WHERE price > 0;
"""


def test_a_files_sink_writes_the_plans_partition_folders() -> None:
    job = compiled(PARTITIONED)
    assert job.spark_plan.queries[0].partition_by == ("day",)
    assert "writer.partitionBy(*['day'])" in generate_pyspark(job)
    code = generated_with(job, with_query(job.spark_plan, 0, partition_by=("auction", "day")))
    assert "writer.partitionBy(*['auction', 'day'])" in code
    assert "partitionBy(*['day'])" not in code


def test_a_batch_files_sink_writes_the_plans_partition_folders() -> None:
    job = compiled("SET execution.mode = 'batch';\n" + PARTITIONED)
    assert "writer.partitionBy(*['day'])" in generate_pyspark(job)
    code = generated_with(job, with_query(job.spark_plan, 0, partition_by=()))
    assert "partitionBy" not in code


REBALANCED = """
SET parallelism = 2;
CREATE SOURCE s (k BIGINT, v BIGINT) WITH (connector = 'datagen', number_of_rows = 10);
CREATE SINK o WITH (connector = 'console', parallelism = 3);
INSERT INTO o FROM s |> REBALANCE |> SELECT k, v WITH (parallelism = 3);
"""


def test_an_edge_gets_the_plans_exchange() -> None:
    job = compiled(REBALANCED)
    plan = job.spark_plan
    ((edge, exchange),) = plan.exchanges.items()
    assert exchange.kind is ExchangeKind.ROUND_ROBIN and exchange.partitions == 3
    assert ".repartition(3)" in generate_pyspark(job)
    coalesced = replace(exchange, kind=ExchangeKind.COALESCE, partitions=1)
    code = generated_with(job, replace(plan, exchanges={edge: coalesced}))
    assert ".coalesce(1)" in code and ".repartition(" not in code


def test_a_job_shuffles_into_the_plans_partitions() -> None:
    job = compiled(KEYED)
    assert job.spark_plan.shuffle_partitions == 2
    assert "SHUFFLE_PARTITIONS = 2\n" in generate_pyspark(job)
    code = generated_with(job, replace(job.spark_plan, shuffle_partitions=9))
    assert "SHUFFLE_PARTITIONS = 9\n" in code


def test_a_query_keeps_its_checkpoint_where_the_plan_says() -> None:
    job = compiled(KEYED)
    checkpoint = job.spark_plan.queries[0].checkpoint
    assert f"os.path.join(checkpoint_dir, *{checkpoint!r})" in generate_pyspark(job)
    moved = with_query(job.spark_plan, 0, checkpoint=("j", "q"))
    code = generated_with(job, replace(moved, checkpoint_root="/elsewhere"))
    assert "os.path.join(checkpoint_dir, *('j', 'q'))" in code
    assert f"*{checkpoint!r}" not in code
    assert "checkpoint_dir = args.checkpoint_dir or '/elsewhere'" in code
