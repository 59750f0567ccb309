"""Spark benchmark: a flowc job against the same query hand-written in PySpark.

datagen → filter → KEY BY → WINDOW TUMBLE → AGGREGATE → noop, with a bounded datagen so
each run processes the same rows; flowc's program and the hand-written one run
alternately in one process and SparkSession (best of several runs each). Also the median
micro-batch time of a tiny stateful query with flowc's default shuffle partitions.

    python -m benchmarks.spark_speed [--rows 16000000] [--rounds 4] [--output BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from typing import Any

import flowc
from benchmarks.report import machine, update_section
from flowc.runtime.run import count_exchanges, load_program

GOAL_RATIO = 0.97

JOB = """
SET parallelism = 2;
SET max_parallelism = 128;
CREATE SOURCE events (k BIGINT, v BIGINT, ts TIMESTAMP,
                      WATERMARK FOR ts AS ts - INTERVAL 5 SECONDS)
  WITH (connector = 'datagen', number_of_rows = {rows}, seed = 7,
        fields.k.max = 999, fields.v.max = 1000);
CREATE SINK sink WITH (connector = 'noop');
INSERT INTO sink
  FROM events
  |> WHERE v > 100
  |> KEY BY k
  |> WINDOW TUMBLE(ts, INTERVAL 1 MINUTE)
  |> AGGREGATE count(*) AS n, sum(v) AS total;
"""

TINY = """
SET parallelism = 2;
SET max_parallelism = 128;
CREATE SOURCE events (k BIGINT, v BIGINT)
  WITH (connector = 'datagen', rows_per_second = 10, fields.k.max = 9);
CREATE SINK sink WITH (connector = 'noop', mode = 'update');
INSERT INTO sink FROM events |> KEY BY k |> AGGREGATE count(*) AS n;
"""


def hand_written(spark: Any, rows: int, checkpoint: str) -> Any:
    """The same query as a PySpark user would write it, over the same generated rows."""
    from pyspark.sql import functions as F

    events = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", rows)
        .option("numPartitions", 2)
        .load()
        .where(F.col("value") < rows)
        .select(
            (F.abs(F.xxhash64(F.lit(7), F.col("value"), F.lit(0))) % 1000).alias("k"),
            (F.abs(F.xxhash64(F.lit(7), F.col("value"), F.lit(1))) % 1001).alias("v"),
            F.col("timestamp").alias("ts"),
        )
        .withWatermark("ts", "5 seconds")
    )
    counts = (
        events.where("v > 100")
        .groupBy("k", F.window("ts", "1 minute"))
        .agg(F.count("*").alias("n"), F.sum("v").alias("total"))
        .select("k", "window.start", "window.end", "n", "total")  # the query's output columns
    )
    return (
        counts.writeStream.format("noop")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )


def timed(start: Any) -> tuple[float, int]:
    began = time.perf_counter()
    query = start()
    query.awaitTermination()
    elapsed = time.perf_counter() - began
    plan = str(query._jsq.streamingQuery().lastExecution().executedPlan().toString())
    return elapsed, count_exchanges(plan)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=16_000_000)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--output", default="BENCHMARKS.md")
    args = parser.parse_args()
    job = flowc.compile(JOB.format(rows=args.rows), "bench.flow", for_spark=True)
    program = load_program(job)
    spark = program.start_session("local[2]")
    spark.sparkContext.setLogLevel("ERROR")
    planned = job.spark_plan.queries[0].exchanges_planned
    flowc_runs, hand_runs = [], []
    exchanges = {}
    with tempfile.TemporaryDirectory() as directory:
        timed(lambda: hand_written(spark, args.rows, f"{directory}/warm-up"))
        for round_ in range(args.rounds):
            runs = [
                (
                    "flowc",
                    lambda r=round_: program.start_queries(spark, f"{directory}/f{r}", True)[0],
                ),
                (
                    "hand-written",
                    lambda r=round_: hand_written(spark, args.rows, f"{directory}/h{r}"),
                ),
            ]
            if round_ % 2:
                runs.reverse()  # neither side always runs on the warmer JVM
            for name, start in runs:
                seconds, exchanges[name] = timed(start)
                (flowc_runs if name == "flowc" else hand_runs).append(seconds)
            print(
                f"round {round_}: flowc {flowc_runs[-1]:.2f} s, hand-written {hand_runs[-1]:.2f} s"
            )
        tiny = flowc.compile(TINY, "tiny.flow", for_spark=True)
        tiny_program = load_program(tiny)
        shuffle = tiny.spark_plan.shuffle_partitions
        spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "true")
        from pyspark.sql import SparkSession  # noqa: F401  (the session already exists)

        query = tiny_program.start_queries(spark, f"{directory}/tiny", False)[0]
        durations: list[float] = []
        seen: set[int] = set()
        deadline = time.monotonic() + 120
        while len(durations) < 12 and time.monotonic() < deadline:
            for progress in query.recentProgress:
                if progress["batchId"] not in seen and progress["batchId"] > 0:
                    seen.add(progress["batchId"])
                    durations.append(progress["durationMs"]["triggerExecution"])
            time.sleep(0.5)
        query.stop()
    flowc_rate = args.rows / min(flowc_runs)
    hand_rate = args.rows / min(hand_runs)
    ratio = flowc_rate / hand_rate
    median_batch = statistics.median(durations) if durations else float("nan")
    checks = [
        ("rows/s, flowc / hand-written", f"{ratio:.3f}", f">= {GOAL_RATIO}", ratio >= GOAL_RATIO),
        (
            "exchanges, flowc = hand-written = planned",
            f"{exchanges['flowc']} / {exchanges['hand-written']} / {planned}",
            "equal",
            exchanges["flowc"] == exchanges["hand-written"] == planned,
        ),
    ]
    body = "\n".join(
        [
            f"Machine: {machine()}, Spark local[2]. Command: `python -m benchmarks.spark_speed`.",
            f"datagen ({args.rows:,} rows) → WHERE → KEY BY → WINDOW TUMBLE → AGGREGATE → noop,",
            "compiled by flowc and hand-written in PySpark over the same generated rows, run",
            f"alternately in one SparkSession, best of {args.rounds} each (`availableNow`).",
            "",
            "| | best time (s) | rows/s |",
            "|---|---|---|",
            f"| flowc | {min(flowc_runs):.2f} | {flowc_rate:,.0f} |",
            f"| hand-written PySpark | {min(hand_runs):.2f} | {hand_rate:,.0f} |",
            "",
            "| goal | measured | target | met |",
            "|---|---|---|---|",
            *[f"| {n} | {v} | {t} | {'yes' if ok else 'NO'} |" for n, v, t, ok in checks],
            "",
            "Tiny stateful query (datagen 10 rows/s → KEY BY → AGGREGATE → noop, update mode)",
            f"with flowc's default {shuffle} shuffle partitions: median micro-batch "
            f"{median_batch:.0f} ms over {len(durations)} batches.",
        ]
    )
    update_section(args.output, "Spark", body)
    print(body)
    return 0 if all(ok for *_, ok in checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
