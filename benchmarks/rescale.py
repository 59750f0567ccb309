"""Spark's offline state repartition (issue 29), timed at several key counts.

A keyed running aggregate (count and sum per key, RocksDB store, 2 shuffle partitions,
update mode, noop sink) runs one micro-batch over ``keys`` keys through flowc's own
generated program; then Spark's ``StreamingCheckpointManager.repartition`` (PySpark 4.2+)
rewrites a copy of its checkpoint to 4 partitions, and that one to 1 (the issue's 2 -> 4
-> 1), each timed alone, with the driver's session already warm. After each, Spark's
state reader (``format('statestore')``) counts the state's rows: every key must still be
there, or the run fails instead of printing a time.

    python -m benchmarks.rescale [--keys 1000,100000,1000000] [--rounds 2]
        [--output BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from dataclasses import dataclass

import flowc
from benchmarks.report import machine, update_section
from flowc.runtime.run import load_program

JOB = """
SET parallelism = 2;
SET state.backend.type = 'rocksdb';
{settings}
CREATE SOURCE events (k BIGINT, v BIGINT)
  WITH (connector = 'files', path = '{path}', format = 'parquet');
CREATE SINK totals WITH (connector = 'noop', mode = 'update');
INSERT INTO totals FROM events |> KEY BY k |> AGGREGATE count(*) AS n, sum(v) AS total;
"""

#: The partition counts a checkpoint is taken through, from the first run's.
STEPS = (4, 1)


@dataclass(frozen=True, slots=True)
class Measured:
    first_run_s: float
    #: Seconds per repartition, in the order of :data:`STEPS`.
    repartition_s: tuple[float, ...]
    state_rows: int


def write_input(spark: object, folder: str, keys: int) -> None:
    """One parquet file of ``keys`` rows, one per key."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    assert isinstance(spark, SparkSession)
    spark.range(keys).select(F.col("id").alias("k"), (F.col("id") * 3).alias("v")).coalesce(
        1
    ).write.parquet(folder)


def state_rows(spark: object, checkpoint: str) -> int:
    """The aggregate's state rows in the checkpoint's latest batch (Spark's state reader)."""
    from pyspark.sql import SparkSession

    assert isinstance(spark, SparkSession)
    return int(spark.read.format("statestore").load(checkpoint).count())


def measure_once(spark: object, data: str, folder: str, keys: int) -> Measured:
    from pyspark.sql import SparkSession

    assert isinstance(spark, SparkSession)
    job = flowc.compile(JOB.format(settings="", path=data), "rescale.flow", for_spark=True)
    program = load_program(job)
    started = time.perf_counter()
    queries = program.start_queries(spark, folder + "/first", True)
    for query in queries:
        query.awaitTermination()
    first = time.perf_counter() - started
    (checkpoint,) = [d for d, subs, _ in os.walk(folder + "/first") if "offsets" in subs]
    rows = state_rows(spark, checkpoint)
    assert rows == keys, f"first run: {rows} state rows, not {keys}"
    manager = spark._streamingCheckpointManager
    times = []
    for step, partitions in enumerate(STEPS):
        copy = os.path.join(folder, f"to-{partitions}-{step}")
        shutil.copytree(checkpoint, copy)
        started = time.perf_counter()
        manager.repartition(copy, partitions)
        times.append(time.perf_counter() - started)
        rows = state_rows(spark, copy)
        assert rows == keys, f"after repartition to {partitions}: {rows} state rows, not {keys}"
        checkpoint = copy
    return Measured(first, tuple(times), keys)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", default="1000,100000,1000000")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--output", default="BENCHMARKS.md")
    args = parser.parse_args()
    keys = [int(k) for k in args.keys.split(",")]
    memory = f"SET spark.driver.memory = '{args.driver_memory}';"
    probe = load_program(
        flowc.compile(JOB.format(settings=memory, path="x"), "r.flow", for_spark=True)
    )
    spark = probe.start_session("local[2]", quiet=True)
    spark.sparkContext.setLogLevel("ERROR")
    best: dict[int, Measured] = {}
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as folder:
        for k in keys:
            data = os.path.join(folder, f"in-{k}")
            write_input(spark, data, k)
            for round_ in range(args.rounds):
                result = measure_once(spark, data, os.path.join(folder, f"r-{k}-{round_}"), k)
                print(
                    f"{k:>10,} keys  first run {result.first_run_s:6.2f} s  repartition "
                    + "  ".join(
                        f"-> {p}: {s:6.2f} s"
                        for p, s in zip(STEPS, result.repartition_s, strict=True)
                    ),
                    flush=True,
                )
                kept = best.get(k)
                if kept is None or sum(result.repartition_s) < sum(kept.repartition_s):
                    best[k] = result
    lines = [
        f"Machine: {machine()}, Spark local[2], load {load:.1f} at the start. Command: "
        f"`python -m benchmarks.rescale --keys {args.keys} --rounds {args.rounds}`.",
        "",
        "A keyed count and sum (RocksDB store) run once over one file with one row per key "
        "at 2 shuffle partitions; then Spark's offline `repartition` of a copy of the "
        "checkpoint to 4 partitions, and of that to 1, each timed alone (best round by their "
        "sum). Each repartition is checked by reading the state back: every key is there.",
        "",
        "| keys | first run (s) | repartition 2 -> 4 (s) | repartition 4 -> 1 (s) |",
        "|---|---|---|---|",
    ]
    for k, m in best.items():
        lines.append(
            f"| {k:,} | {m.first_run_s:.2f} | "
            + " | ".join(f"{s:.2f}" for s in m.repartition_s)
            + " |"
        )
    update_section(args.output, "Rescaling state (offline repartition)", "\n".join(lines))
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
