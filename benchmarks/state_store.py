"""State stores and shuffle partitions, measured through flowc's own generated program.

A keyed running aggregate (count and sum per key, update mode, noop sink) reads four
parquet files, one per micro-batch, under each state store flowc can choose: ``hashmap``
(Spark's HDFS-backed store, flowc's default), ``rocksdb`` with changelog checkpointing
(flowc's default when RocksDB is chosen) and ``rocksdb`` without it; then, under the
default store, with several ``spark.sql.shuffle.partitions``. Configurations alternate
within each round; each keeps its best round. The median micro-batch leaves out the
first (it starts from no state), so it is the time of a batch that updates existing state.

    python -m benchmarks.state_store [--keys 1000,100000,1000000] [--rounds 2]
        [--output BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass

import flowc
from benchmarks.report import machine, update_section
from flowc.runtime.run import load_program

FILES = 4

JOB = """
SET parallelism = 2;
{settings}
CREATE SOURCE events (k BIGINT, v BIGINT)
  WITH (connector = 'files', path = '{path}', format = 'parquet', max_files_per_trigger = 1);
CREATE SINK totals WITH (connector = 'noop', mode = 'update');
INSERT INTO totals FROM events |> KEY BY k |> AGGREGATE count(*) AS n, sum(v) AS total;
"""


@dataclass(frozen=True, slots=True)
class Config:
    id: str
    name: str
    settings: str


STORES = (
    Config("hashmap", "hashmap (default)", ""),
    Config("rocksdb", "rocksdb, changelog", "SET state.backend.type = 'rocksdb';"),
    Config(
        "rocksdb-snapshots",
        "rocksdb, no changelog",
        "SET state.backend.type = 'rocksdb';\nSET state.backend.changelog.enabled = false;",
    ),
)


def partitions(count: int) -> Config:
    return Config(
        f"p{count}",
        f"hashmap, {count} shuffle partitions",
        f"SET spark.sql.shuffle.partitions = {count};",
    )


@dataclass(frozen=True, slots=True)
class Measured:
    median_batch_ms: float
    total_s: float
    state_rows: int
    state_memory_mb: float


def write_input(spark: object, folder: str, keys: int) -> int:
    """FILES parquet files of max(keys, 200,000) rows each over ``keys`` keys, modified in
    order one second apart (Spark reads them in that order). Returns rows per file."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    assert isinstance(spark, SparkSession)
    rows = max(keys, 200_000)
    now = time.time() - 3600
    for i in range(FILES):
        target = os.path.join(folder, f"part{i}")
        frame = spark.range(rows).select(
            ((F.col("id") * 7919 + i * 104729) % keys).alias("k"), F.col("id").alias("v")
        )
        frame.coalesce(1).write.parquet(target)
        for name in os.listdir(target):
            if name.endswith(".parquet"):
                final = os.path.join(folder, f"{i:02d}.parquet")
                os.replace(os.path.join(target, name), final)
                os.utime(final, (now + i, now + i))
    for i in range(FILES):
        for name in os.listdir(os.path.join(folder, f"part{i}")):
            os.remove(os.path.join(folder, f"part{i}", name))
        os.rmdir(os.path.join(folder, f"part{i}"))
    return rows


def run_once(spark: object, config: Config, data: str, checkpoint: str) -> Measured:
    job = flowc.compile(
        JOB.format(settings=config.settings, path=data), "state_store.flow", for_spark=True
    )
    program = load_program(job)
    started = time.perf_counter()
    queries = program.start_queries(spark, checkpoint, True)
    for query in queries:
        query.awaitTermination()
    total = time.perf_counter() - started
    progress = [p for p in queries[0].recentProgress if p["numInputRows"] > 0]
    assert len(progress) == FILES, f"{config.name}: {len(progress)} batches, not {FILES}"
    durations = [p["durationMs"]["triggerExecution"] for p in progress[1:]]
    last = progress[-1]["stateOperators"][0]
    return Measured(
        statistics.median(durations),
        total,
        int(last["numRowsTotal"]),
        int(last["memoryUsedBytes"]) / 2**20,
    )


def measure(
    spark: object, configs: Sequence[Config], keys: int, rounds: int, folder: str
) -> dict[str, Measured]:
    data = os.path.join(folder, f"in-{keys}")
    os.makedirs(data)
    write_input(spark, data, keys)
    run_once(spark, configs[0], data, os.path.join(folder, f"warm-up-{keys}"))  # JIT, caches
    best: dict[str, Measured] = {}
    for round_ in range(rounds):
        for i, config in enumerate(configs):
            checkpoint = os.path.join(folder, f"ckpt-{keys}-{round_}-{i}")
            result = run_once(spark, config, data, checkpoint)
            assert result.state_rows == keys, (config.name, result.state_rows, keys)
            kept = best.get(config.name)
            if kept is None or result.median_batch_ms < kept.median_batch_ms:
                best[config.name] = result
            print(
                f"{keys:>10,} keys  {config.name:<34} median batch "
                f"{result.median_batch_ms:>7.0f} ms  total {result.total_s:6.2f} s",
                flush=True,
            )
    return best


def table(results: dict[int, dict[str, Measured]]) -> list[str]:
    lines = [
        "| keys | configuration | median micro-batch (ms) | whole run (s) | state rows "
        "| state memory (MiB) |",
        "|---|---|---|---|---|---|",
    ]
    for keys, by_config in results.items():
        for name, m in by_config.items():
            lines.append(
                f"| {keys:,} | {name} | {m.median_batch_ms:.0f} | {m.total_s:.2f} "
                f"| {m.state_rows:,} | {m.state_memory_mb:.1f} |"
            )
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", default="1000,100000,1000000")
    parser.add_argument("--partitions", default="1,2,8,200")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--stores", default=",".join(c.id for c in STORES))
    parser.add_argument(
        "--driver-memory",
        default="4g",
        help="the JVM's heap (Spark's default, 1g, runs out with hashmap at 1,000,000 keys)",
    )
    parser.add_argument("--output", default="BENCHMARKS.md")
    args = parser.parse_args()
    stores_asked = [c for c in STORES if c.id in args.stores.split(",")]
    keys = [int(k) for k in args.keys.split(",")]
    counts = [int(p) for p in args.partitions.split(",") if p]
    memory = f"SET spark.driver.memory = '{args.driver_memory}';"
    probe = load_program(
        flowc.compile(JOB.format(settings=memory, path="x"), "s.flow", for_spark=True)
    )
    spark = probe.start_session("local[2]", quiet=True)
    spark.sparkContext.setLogLevel("ERROR")
    stores: dict[int, dict[str, Measured]] = {}
    shuffles: dict[int, dict[str, Measured]] = {}
    with tempfile.TemporaryDirectory() as folder:
        for k in keys:
            stores[k] = measure(spark, stores_asked, k, args.rounds, folder)
        for k in dict.fromkeys((keys[0], keys[-1])) if counts else ():
            shuffles[k] = measure(
                spark, [partitions(c) for c in counts], k, args.rounds, f"{folder}/p{k}"
            )
    default = STORES[0].name
    wins = {
        k: min(by_config, key=lambda name: by_config[name].median_batch_ms)
        for k, by_config in stores.items()
    }
    body = [
        f"Machine: {machine()}, Spark local[2]. Command: `python -m benchmarks.state_store "
        f"--keys {args.keys} --partitions {args.partitions} --rounds {args.rounds} "
        f"--driver-memory {args.driver_memory}`.",
        "",
        "flowc's generated program for a keyed running aggregate (count and sum per key,",
        "update mode, noop sink) over four parquet files read one per micro-batch, each of",
        "max(keys, 200,000) rows spread over every key. Configurations alternate within each",
        "round; each keeps its best round. The median micro-batch leaves out the first, so it",
        "is a batch that updates existing state.",
        "",
        "### State stores",
        "",
        *table(stores),
        "",
        "Fastest median micro-batch: "
        + "; ".join(f"{k:,} keys: {name}" for k, name in wins.items())
        + f". Default: {default}.",
        "",
        "### Shuffle partitions (hashmap)",
        "",
        *table(shuffles),
    ]
    update_section(args.output, "State stores", "\n".join(body))
    print("\n".join(body))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
