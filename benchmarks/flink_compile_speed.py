"""Flink's side of the compile-speed comparison: benchmarks/generate.py's job in Flink's
DataStream API, built to a JobGraph in one warm JVM (benchmarks/flink/FlinkCompileSpeed.java).

Run with the Python that has PyFlink 2.3 (``FLOWC_FLINK_PYTHON``): it only lends the JVM its
jars (``pyflink/lib``); the job is Java, compiled here with ``javac`` into a cache directory,
so no py4j call lies inside the timed part.

What one round times, in the JVM (``System.nanoTime``, the process's and the thread's CPU
clocks): a new ``StreamExecutionEnvironment`` with parallelism 4 and max parallelism 128, a
``DataGeneratorSource`` at parallelism 2, per view of the generated job the same ten steps
(filter, three maps, rebalance, filter, map, keyBy, a reduce that sums with its uid, filter),
a ``DiscardingSink``; then ``getStreamGraph()`` and ``StreamGraph.getJobGraph()``. That is
the Java program's whole work from its first DataStream call to the JobGraph: type
information, closure cleaning, transformations, the StreamGraph, chaining and the JobGraph.
The program text is not parsed (javac did that before): flowc's parse has no counterpart.

    $FLOWC_FLINK_PYTHON -m benchmarks.flink_compile_speed [--operators 1000] [--rounds 10]
    $FLOWC_FLINK_PYTHON -m benchmarks.flink_compile_speed --serve ...   # one round per line

This module must not import flowc (the Flink Python has none); benchmarks.generate is
plain Python.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.generate import view_count

JAVA_SOURCE = Path(__file__).resolve().parent / "flink" / "FlinkCompileSpeed.java"
JAVA_CLASS = "FlinkCompileSpeed"
FLINK_VERSION = "2.3.0"


def flink_jars() -> str:
    """The class path of the installed PyFlink's Flink (its ``lib`` directory)."""
    import pyflink
    import pyflink.version

    if pyflink.version.__version__ != FLINK_VERSION:
        raise SystemExit(f"PyFlink {pyflink.version.__version__}, expected {FLINK_VERSION}")
    return str(Path(pyflink.__file__).resolve().parent / "lib" / "*")


def compiled_classes(jars: str) -> Path:
    """A directory holding FlinkCompileSpeed.class, compiled once per source version."""
    key = f"{JAVA_SOURCE.stat().st_mtime_ns}-{JAVA_SOURCE.stat().st_size}"
    directory = Path(tempfile.gettempdir()) / f"flowc-flink-compile-speed-{key}"
    if not (directory / f"{JAVA_CLASS}.class").exists():
        directory.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["javac", "-nowarn", "-d", str(directory), "-cp", jars, str(JAVA_SOURCE)],
            check=True,
        )
    return directory


def java_command(operators: int, warmup: int) -> list[str]:
    jars = flink_jars()
    classes = compiled_classes(jars)
    return [
        "java",
        "-cp",
        f"{classes}{os.pathsep}{jars}",
        JAVA_CLASS,
        str(view_count(operators)),
        str(warmup),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--operators", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=30, help="unmeasured rounds first")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument(
        "--serve",
        action="store_true",
        help="become the JVM: one timed round per line 'round' on stdin, JSON on stdout",
    )
    args = parser.parse_args()
    command = java_command(args.operators, args.warmup)
    if args.serve:
        sys.stdout.flush()
        os.execvp(command[0], command)
    rounds = "round\n" * args.rounds + "quit\n"
    done = subprocess.run(command, input=rounds, capture_output=True, text=True, check=True)
    results = [json.loads(line) for line in done.stdout.splitlines()[1:]]
    for field in ("wall", "cpu", "thread_cpu"):
        values = [float(r[field]) for r in results]
        print(f"{field}: best {min(values):.4f} s, median {statistics.median(values):.4f} s")
    print(f"stream nodes {results[0]['nodes']}, JobGraph vertices {results[0]['vertices']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
