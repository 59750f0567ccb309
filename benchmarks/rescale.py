"""Spark's offline state repartition (issue 29), timed at several key counts.

A stateful query over ``keys`` keys (RocksDB store, 2 shuffle partitions, noop sink) runs
once through flowc's own generated program: ``aggregate``, a keyed running aggregate
(count and sum per key, update mode: Spark's ``stateStoreSave``), or ``over``, an OVER per
key (``transformWithStateInPySparkExec``, flowc's OverAggregate processor: per key two
lists, a value and its timers' column families). Then Spark's
``StreamingCheckpointManager.repartition`` (PySpark 4.2+) rewrites a copy of its
checkpoint to 4 partitions, and that one to 1 (the issue's 2 -> 4 -> 1), each timed
alone, with the driver's session already warm. After each, Spark's state reader
(``format('statestore')``; for the processor its value state ``last``) counts the
state's rows: every key must still be there, or the run fails instead of printing a time.

    python -m benchmarks.rescale [--keys 1000,100000,1000000] [--kind aggregate,over]
        [--rounds 2] [--output BENCHMARKS.md]
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

HEAD = """
SET parallelism = 2;
SET state.backend.type = 'rocksdb';
{settings}
"""
#: Per kind: its source, sink and INSERT (``{path}``: the input folder), and the state
#: variable whose rows are counted (None: the operator's one state).
KINDS: dict[str, tuple[str, str | None]] = {
    "aggregate": (
        """CREATE SOURCE events (k BIGINT, v BIGINT, ts TIMESTAMP)
  WITH (connector = 'files', path = '{path}', format = 'parquet');
CREATE SINK totals WITH (connector = 'noop', mode = 'update');
INSERT INTO totals FROM events |> KEY BY k |> AGGREGATE count(*) AS n, sum(v) AS total;
""",
        None,
    ),
    "over": (
        """CREATE SOURCE events (k BIGINT, v BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts)
  WITH (connector = 'files', path = '{path}', format = 'parquet');
CREATE SINK sums WITH (connector = 'noop');
INSERT INTO sums FROM events |> EXTEND
  SUM(v) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS s;
""",
        "last",
    ),
}


def job_text(kind: str, path: str, settings: str = "") -> str:
    return HEAD.format(settings=settings) + KINDS[kind][0].format(path=path)


#: The partition counts a checkpoint is taken through, from the first run's.
STEPS = (4, 1)


@dataclass(frozen=True, slots=True)
class Measured:
    first_run_s: float
    #: Seconds per repartition, in the order of :data:`STEPS`.
    repartition_s: tuple[float, ...]
    state_rows: int


def write_input(spark: object, folder: str, keys: int) -> None:
    """One parquet file of ``keys`` rows, one per key, all at one event time (the watermark
    the batch leaves reaches it: the OVER emits every row and keeps its ``last``)."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    assert isinstance(spark, SparkSession)
    spark.range(keys).select(
        F.col("id").alias("k"),
        (F.col("id") * 3).alias("v"),
        F.lit("2024-01-01 10:00:00").cast("timestamp").alias("ts"),
    ).coalesce(1).write.parquet(folder)


def state_rows(spark: object, checkpoint: str, variable: str | None) -> int:
    """The operator's state rows in the checkpoint's latest batch (Spark's state reader):
    a processor's of state variable ``variable``."""
    from pyspark.sql import SparkSession

    assert isinstance(spark, SparkSession)
    reader = spark.read.format("statestore")
    if variable is not None:
        reader = reader.option("stateVarName", variable)
    return int(reader.load(checkpoint).count())


def measure_once(spark: object, kind: str, data: str, folder: str, keys: int) -> Measured:
    from pyspark.sql import SparkSession

    assert isinstance(spark, SparkSession)
    variable = KINDS[kind][1]
    job = flowc.compile(job_text(kind, data), "rescale.flow", for_spark=True)
    program = load_program(job)
    started = time.perf_counter()
    queries = program.start_queries(spark, folder + "/first", True)
    for query in queries:
        query.awaitTermination()
    first = time.perf_counter() - started
    (checkpoint,) = [d for d, subs, _ in os.walk(folder + "/first") if "offsets" in subs]
    rows = state_rows(spark, checkpoint, variable)
    assert rows == keys, f"first run: {rows} state rows, not {keys}"
    manager = spark._streamingCheckpointManager
    times = []
    for step, partitions in enumerate(STEPS):
        copy = os.path.join(folder, f"to-{partitions}-{step}")
        shutil.copytree(checkpoint, copy)
        started = time.perf_counter()
        manager.repartition(copy, partitions)
        times.append(time.perf_counter() - started)
        rows = state_rows(spark, copy, variable)
        assert rows == keys, f"after repartition to {partitions}: {rows} state rows, not {keys}"
        checkpoint = copy
    return Measured(first, tuple(times), keys)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", default="1000,100000,1000000")
    parser.add_argument("--kind", default="aggregate", help="aggregate, over, or both")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--output", default="BENCHMARKS.md")
    args = parser.parse_args()
    keys = [int(k) for k in args.keys.split(",")]
    kinds = args.kind.split(",")
    if not set(kinds) <= set(KINDS):
        parser.error(f"--kind: one or more of {', '.join(KINDS)}")
    memory = f"SET spark.driver.memory = '{args.driver_memory}';"
    # The session of the last kind: an OVER's processor needs RocksDB's settings, which
    # the aggregate's plan does not ask for.
    probe = load_program(flowc.compile(job_text(kinds[-1], "x", memory), "r.flow", for_spark=True))
    spark = probe.start_session("local[2]", quiet=True)
    spark.sparkContext.setLogLevel("ERROR")
    best: dict[tuple[int, str], Measured] = {}
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as folder:
        for k in keys:
            data = os.path.join(folder, f"in-{k}")
            write_input(spark, data, k)
            for round_, kind in ((r, kind) for r in range(args.rounds) for kind in kinds):
                run = os.path.join(folder, f"r-{k}-{kind}-{round_}")
                result = measure_once(spark, kind, data, run, k)
                print(
                    f"{k:>10,} keys  {kind:<9}  first run {result.first_run_s:6.2f} s  repartition "
                    + "  ".join(
                        f"-> {p}: {s:6.2f} s"
                        for p, s in zip(STEPS, result.repartition_s, strict=True)
                    ),
                    flush=True,
                )
                kept = best.get((k, kind))
                if kept is None or sum(result.repartition_s) < sum(kept.repartition_s):
                    best[(k, kind)] = result
    end_load = os.getloadavg()[0]
    lines = [
        f"Machine: {machine()}, Spark local[2], load {load:.1f} at the start and "
        f"{end_load:.1f} at the end. Command: `python -m benchmarks.rescale --keys {args.keys} "
        f"--kind {args.kind} --rounds {args.rounds}`.",
        "",
        "Each kind (RocksDB store) runs once over one file with one row per key at 2 shuffle "
        "partitions: `aggregate` a keyed count and sum (Spark's aggregation), `over` a SUM "
        "OVER the last 3 rows per key (flowc's OVER processor, `transformWithState`: two "
        "lists, a value and an event-time timer per key); then Spark's offline `repartition` "
        "of a copy of the checkpoint to 4 partitions, and of that to 1, each timed alone "
        "(best round by their sum), the kinds alternating within each round. Each "
        "repartition is checked by reading the state back: every key is there.",
        "",
        "| keys | kind | first run (s) | repartition 2 -> 4 (s) | repartition 4 -> 1 (s) |",
        "|---|---|---|---|---|",
    ]
    for (k, kind), m in best.items():
        lines.append(
            f"| {k:,} | {kind} | {m.first_run_s:.2f} | "
            + " | ".join(f"{s:.2f}" for s in m.repartition_s)
            + " |"
        )
    update_section(args.output, "Rescaling state (offline repartition)", "\n".join(lines))
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
