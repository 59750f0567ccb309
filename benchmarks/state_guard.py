"""Restart guard benchmark: what ``flowc run`` adds before Spark starts on a checkpoint.

Runs every example once on Spark (``--available-now``, in a temporary copy of
``examples/``), so that each query has a real checkpoint and state manifest, then times
the restart guard (:func:`flowc.runtime.state_guard.guard_state`: describe the new plan,
read each query's manifest and Spark's offsets, compare) as the next run would call it:
the median and the worst of ``--rounds`` calls per example. Then the same without
manifests (a checkpoint of plain Spark: the operators, partitions and key schemas read
from Spark's own files). Compiling is not timed: every run compiles anyway. Goal: under
50 ms per restart. ``--no-spark`` fakes the checkpoints (an offset log and the manifest)
instead of running Spark.

    python -m benchmarks.state_guard [--rounds 50] [--no-spark]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import flowc
from flowc.job import CompiledJob
from flowc.runtime.state_guard import STATE_MANIFEST, guard_state
from flowc.spark.codegen import generate_pyspark

GOAL_MS = 50.0
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _fake_checkpoints(job: CompiledJob, root: str, base: str) -> None:
    """What a first run leaves: an offset log (with Spark's frozen partitions) and the
    state manifests."""
    guard = guard_state(job, root, base)
    for query in job.spark_plan.queries:
        offsets = os.path.join(root, *query.checkpoint, "offsets")
        os.makedirs(offsets, exist_ok=True)
        conf = {"spark.sql.shuffle.partitions": str(job.spark_plan.shuffle_partitions)}
        with open(os.path.join(offsets, "0"), "w", encoding="utf-8") as handle:
            handle.write("v1\n" + json.dumps({"batchWatermarkMs": 0, "conf": conf}) + "\n")
    guard.started([])


def _run_quietly(job: CompiledJob) -> None:
    """Run the job once on Spark, its console sinks' rows (the JVM's stdout) not shown."""
    from flowc.runtime.run import run_job

    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 1)
            run_job(job, available_now=True, master="local[2]", out=io.StringIO())
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def _time(job: CompiledJob, root: str, base: str, rounds: int) -> list[float]:
    """Each call's milliseconds; the first is the one a ``flowc run`` pays (after compiling
    and generating the program, as run_job does before the guard)."""
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        guard_state(job, root, base)
        times.append((time.perf_counter() - started) * 1000)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--no-spark", action="store_true", help="fake the checkpoints")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="flowc-state-guard-"))
    try:
        folder = work / "examples"
        shutil.copytree(EXAMPLES, folder, ignore=shutil.ignore_patterns(".flowc-*", "out"))
        jobs = []
        for path in sorted(folder.glob("*.flow")):
            job = flowc.compile(path.read_text(encoding="utf-8"), str(path), for_spark=True)
            root = str(folder / ".flowc-checkpoints")
            if args.no_spark:
                _fake_checkpoints(job, root, str(folder))
            else:
                _run_quietly(job)
            generate_pyspark(job)  # run_job generates the program before the guard runs
            jobs.append((path.name, job, root))
        kind = "faked" if args.no_spark else "real"
        print(f"restart guard, {args.rounds} rounds per example ({kind} checkpoints)")
        header = ("example", "queries", "stateful", "first ms", "median", "worst", "no manifest")
        print("{:28} {:>7} {:>8} {:>9} {:>7} {:>7} {:>12}".format(*header))
        worst = typical = first = 0.0
        for name, job, root in jobs:
            times = _time(job, root, str(folder), args.rounds)
            stateful = sum(len(q.stateful) for q in job.spark_plan.queries)
            for query in job.spark_plan.queries:
                manifest = os.path.join(root, *query.checkpoint, STATE_MANIFEST)
                if os.path.exists(manifest):
                    os.rename(manifest, manifest + ".kept")
            bare = _time(job, root, str(folder), args.rounds)
            for query in job.spark_plan.queries:
                manifest = os.path.join(root, *query.checkpoint, STATE_MANIFEST)
                if os.path.exists(manifest + ".kept"):
                    os.rename(manifest + ".kept", manifest)
            first = max(first, times[0])
            typical = max(typical, statistics.median(times), statistics.median(bare))
            worst = max(worst, max(times), max(bare))
            print(
                f"{name:28} {len(job.spark_plan.queries):>7} {stateful:>8} {times[0]:>9.2f} "
                f"{statistics.median(times):>7.2f} {max(times):>7.2f} "
                f"{statistics.median(bare):>12.2f}"
            )
        met = max(first, typical) < GOAL_MS
        print(
            f"slowest first call {first:.2f} ms, slowest median {typical:.2f} ms: goal < "
            f"{GOAL_MS:.0f} ms {'met' if met else 'NOT met'}; slowest single call "
            f"{worst:.2f} ms (pauses of a shared machine included)"
        )
        return 0 if met else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
