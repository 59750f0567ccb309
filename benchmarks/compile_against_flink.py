"""flowc's compile against Flink's warm JVM, side by side in one run (issue 30, item 4).

Two long-lived workers answer one timed round per request. flowc: this tree's compiler/,
runtime/ and grammar/ copied onto PYTHONPATH (as benchmarks.compile_speed lays them out),
imported, one compile done, then per round ``clear_expression_cache()`` and
``flowc.compile`` of benchmarks/generate.py's job (as benchmarks.compile_speed times it).
Flink: a JVM (benchmarks/flink_compile_speed.py) after ``--warmup`` unmeasured rounds.
Rounds alternate which side goes first; each round also times, in fresh processes,
``import flowc`` and the whole ``python -m flowc compile JOB --emit jobgraph``. A busy
moment of the shared machine then falls on both sides: the report gives each side's best
and median and the median of the rounds' ratios, in wall time and in CPU time (flowc: the
process's CPU time; Flink: the JVM process's, which counts its garbage collector and JIT
threads, and the building thread's alone).

``--against REV`` adds git revision REV's flowc (its compiler/, runtime/ and grammar/ on
PYTHONPATH, as benchmarks.compile_speed does) to every round: before and after, in one run.

    FLOWC_FLINK_PYTHON=/work/flinkvenv/bin/python python -m benchmarks.compile_against_flink \
        [--operators 1000] [--rounds 10] [--warmup 30] [--against REV]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.compile_speed import REPOSITORY, importable_tree, revision_tree
from benchmarks.generate import generate_job

#: flowc's worker: compile once to load everything, then one cold compile per line read.
_FLOWC_WORKER = r"""
import json, sys, time
import flowc
try:
    from flowc.syntax.parser import clear_expression_cache
except ImportError:  # revisions before the stage packages
    from flowc.parser import clear_expression_cache
text = open(sys.argv[1], encoding="utf-8").read()
job = flowc.compile(text, "bench.flow")
print(json.dumps({"ready": True, "file": flowc.__file__, "nodes": len(job.stream_graph.nodes)}))
sys.stdout.flush()
for line in sys.stdin:
    if line.strip() == "quit":
        break
    clear_expression_cache()
    cpu0, thread0, wall0 = time.process_time(), time.thread_time(), time.perf_counter()
    flowc.compile(text, "bench.flow")
    wall = time.perf_counter() - wall0
    cpu, thread = time.process_time() - cpu0, time.thread_time() - thread0
    print(json.dumps({"wall": wall, "cpu": cpu, "thread_cpu": thread}))
    sys.stdout.flush()
"""


@dataclass
class Series:
    """One measured quantity's rounds: wall clock and CPU seconds."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    thread_cpu: list[float] = field(default_factory=list)


class Worker:
    """A long-lived process that answers one timed round per ``round`` line."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
            cwd=REPOSITORY,
        )
        self.ready = self._answer()

    def _answer(self) -> dict[str, float | str | bool | int]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"worker {self.process.args!r} ended: {self.process.wait()}")
        answer: dict[str, float | str | bool | int] = json.loads(line)
        return answer

    def round(self, into: Series) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write("round\n")
        self.process.stdin.flush()
        answer = self._answer()
        into.wall.append(float(answer["wall"]))
        into.cpu.append(float(answer["cpu"]))
        into.thread_cpu.append(float(answer["thread_cpu"]))

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write("quit\n")
        self.process.stdin.flush()
        self.process.wait(timeout=60)


def timed_process(command: list[str], env: dict[str, str], into: Series) -> None:
    """Wall and CPU time (user + system, from the children's rusage) of one process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, env=env, cwd=REPOSITORY)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    into.wall.append(wall)
    into.cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)


_IMPORT = (
    "import time; wall, cpu = time.perf_counter(), time.process_time(); import flowc; "
    "print(time.perf_counter() - wall, time.process_time() - cpu)"
)


def timed_import(env: dict[str, str], into: Series) -> None:
    """``import flowc`` in a fresh process, timed inside it (the interpreter's start left
    out, as ``python -X importtime`` counts it)."""
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=REPOSITORY,
    )
    wall, cpu = done.stdout.split()
    into.wall.append(float(wall))
    into.cpu.append(float(cpu))


def describe(name: str, series: Series) -> str:
    wall = f"wall best {min(series.wall):.3f} s, median {statistics.median(series.wall):.3f} s"
    cpu = f"CPU best {min(series.cpu):.3f} s, median {statistics.median(series.cpu):.3f} s"
    thread = (
        f"; thread CPU median {statistics.median(series.thread_cpu):.3f} s"
        if series.thread_cpu
        else ""
    )
    return f"{name}: {wall}; {cpu}{thread}"


def ratio(of: list[float], to: list[float]) -> str:
    ratios = [a / b for a, b in zip(of, to, strict=True)]
    return f"median {statistics.median(ratios):.3f} (rounds {min(ratios):.3f}-{max(ratios):.3f})"


def load() -> str:
    return ", ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--operators", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=30, help="Flink's unmeasured rounds")
    parser.add_argument("--against", help="a git revision of flowc to measure in every round")
    args = parser.parse_args()
    flink_python = os.environ.get("FLOWC_FLINK_PYTHON")
    if not flink_python:
        raise SystemExit("set FLOWC_FLINK_PYTHON to a Python with apache-flink==2.3.0")
    with tempfile.TemporaryDirectory() as directory:
        job = Path(directory) / "job.flow"
        job.write_text(generate_job(args.operators), encoding="utf-8")
        env = dict(os.environ)
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # as pip leaves an installed package
        env["PYTHONPYCACHEPREFIX"] = str(Path(directory) / "pycache")
        # each tree from a copy on PYTHONPATH, both found the same way
        here = importable_tree(REPOSITORY, Path(directory) / "here")
        trees: dict[str, dict[str, str]] = {"flowc": dict(env, PYTHONPATH=str(here))}
        if args.against:
            old = importable_tree(
                revision_tree(args.against, Path(directory) / "src"), Path(directory) / "old"
            )
            trees[f"flowc {args.against}"] = dict(env, PYTHONPATH=str(old))
        print(f"load before: {load()}", flush=True)
        flink = Worker(
            [
                flink_python,
                "-m",
                "benchmarks.flink_compile_speed",
                "--serve",
                "--operators",
                str(args.operators),
                "--warmup",
                str(args.warmup),
            ],
            {k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        )
        workers = {
            name: Worker([sys.executable, "-c", _FLOWC_WORKER, str(job)], tree_env)
            for name, tree_env in trees.items()
        }
        for name, worker in workers.items():
            if not str(worker.ready["file"]).startswith(trees[name]["PYTHONPATH"]):
                raise RuntimeError(f"{name} imported {worker.ready['file']}")
            print(f"{name}: {worker.ready['file']}, {worker.ready['nodes']} stream nodes")
        compiles = {name: Series() for name in [*workers, "flink"]}
        imports = {name: Series() for name in workers}
        processes = {name: Series() for name in workers}
        loads = [load()]
        for number in range(args.rounds):
            order: list[tuple[str, Worker]] = [*workers.items(), ("flink", flink)]
            if number % 2:
                order.reverse()
            for name, worker in order:
                worker.round(compiles[name])
            for name, tree_env in trees.items():
                timed_import(tree_env, imports[name])
                timed_process(
                    [
                        sys.executable,
                        "-m",
                        "flowc",
                        "compile",
                        str(job),
                        "--emit",
                        "jobgraph",
                        "-o",
                        os.devnull,
                    ],
                    tree_env,
                    processes[name],
                )
            loads.append(load())
        flink.close()
        for worker in workers.values():
            worker.close()
    print(f"{args.operators} operators, {args.rounds} rounds; load (1, 5, 15 min) per round:")
    print("  " + " | ".join(loads))
    print("in-process compile:")
    for name, series in compiles.items():
        print("  " + describe(name, series))
    for name in workers:
        print(f"  {name} / flink, wall: {ratio(compiles[name].wall, compiles['flink'].wall)}")
        print(
            f"  {name} / flink, CPU (JVM process): "
            f"{ratio(compiles[name].cpu, compiles['flink'].cpu)}"
        )
        print(
            f"  {name} / flink, CPU (JVM building thread): "
            f"{ratio(compiles[name].cpu, compiles['flink'].thread_cpu)}"
        )
    print("import flowc (in a fresh process, the interpreter's start left out):")
    for name, series in imports.items():
        print("  " + describe(name, series))
    print("whole `flowc compile JOB --emit jobgraph` process:")
    for name, series in processes.items():
        print("  " + describe(name, series))
    if args.against:
        new, old = "flowc", f"flowc {args.against}"
        print(f"this tree / {args.against}:")
        print(
            f"  in-process wall {ratio(compiles[new].wall, compiles[old].wall)}, "
            f"CPU {ratio(compiles[new].cpu, compiles[old].cpu)}"
        )
        print(
            f"  import wall {ratio(imports[new].wall, imports[old].wall)}, "
            f"CPU {ratio(imports[new].cpu, imports[old].cpu)}"
        )
        print(
            f"  whole process wall {ratio(processes[new].wall, processes[old].wall)}, "
            f"CPU {ratio(processes[new].cpu, processes[old].cpu)}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
