"""Compile-time benchmark: generated jobs of 10, 100, 1000 and 10000 operators.

Measures ``flowc.compile`` in-process (best of several runs, wall clock) and a whole
``flowc compile`` process (best of several), checks the goals and writes BENCHMARKS.md.

The processes run with Python's bytecode cache, as an installed flowc has (pip compiles
a package's modules when it installs it): in a private directory (PYTHONPYCACHEPREFIX),
filled by a first, untimed run, so the source tree is left alone. Without it (a shell
with PYTHONDONTWRITEBYTECODE=1 and an editable install) every process compiles flowc's
sources first; that time is shown too, for 1000 operators, outside the goals.

    python -m benchmarks.compile_speed [--sizes 10,100,1000,10000] [--output BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.generate import generate_job
from benchmarks.report import machine, update_section

GOAL_IN_PROCESS_1000 = 0.2
GOAL_PROCESS_1000 = 0.5
GOAL_LINEARITY = 11.0


def best_of(runs: int, action: object) -> float:
    assert callable(action)
    timings = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        timings.append(time.perf_counter() - start)
    return min(timings)


def in_process(text: str, runs: int) -> tuple[float, int]:
    import flowc
    from flowc.syntax.parser import clear_expression_cache

    job = flowc.compile(text, "bench.flow")  # load the grammar and sqlglot's dialect tables
    operators = len(job.stream_graph.nodes)

    def cold_compile() -> None:
        clear_expression_cache()  # no memoized expressions from the previous run
        flowc.compile(text, "bench.flow")

    return best_of(runs, cold_compile), operators


def whole_process(path: str, runs: int, bytecode_cache: str | None) -> float:
    """Best time of ``python -m flowc compile``; ``bytecode_cache`` is the directory for
    Python's bytecode cache, None for no cache at all."""
    command = [
        sys.executable,
        "-m",
        "flowc",
        "compile",
        path,
        "--emit",
        "jobgraph",
        "-o",
        os.devnull,
    ]
    env = dict(os.environ)
    env.pop("PYTHONPYCACHEPREFIX", None)
    if bytecode_cache is None:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    else:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = bytecode_cache

    def run() -> None:
        subprocess.run(command, check=True, capture_output=True, env=env)

    run()
    return best_of(runs, run)


def pyspark_imported_by_compile(path: str) -> bool:
    code = (
        "import sys, flowc.cli.main\n"
        f"flowc.cli.main.main(['compile', {path!r}, '--emit', 'physical', '-o', {os.devnull!r}])\n"
        "print('pyspark' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    return result.stdout.strip() == "True"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,1000,10000")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--output", default="BENCHMARKS.md")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    results: dict[int, tuple[int, float, float]] = {}
    uncached: float | None = None
    with tempfile.TemporaryDirectory() as directory:
        bytecode_cache = str(Path(directory) / "pycache")
        for size in sizes:
            text = generate_job(size)
            path = str(Path(directory) / f"job{size}.flow")
            Path(path).write_text(text, encoding="utf-8")
            runs = args.runs if size <= 1000 else max(2, args.runs // 2)
            seconds, operators = in_process(text, runs)
            process = whole_process(path, runs, bytecode_cache)
            if size == 1000:
                uncached = whole_process(path, runs, None)
            results[size] = (operators, seconds, process)
            rows.append(f"| {size} | {operators} | {seconds:.3f} | {process:.3f} |")
            print(
                f"{size:>6} operators ({operators} nodes): in-process {seconds:.3f} s, "
                f"process {process:.3f} s",
                flush=True,
            )
        imports_pyspark = pyspark_imported_by_compile(str(Path(directory) / f"job{sizes[0]}.flow"))
    checks = []
    if 1000 in results:
        _, seconds, process = results[1000]
        checks.append(
            (
                "1000 operators in-process",
                f"{seconds:.3f} s",
                f"<= {GOAL_IN_PROCESS_1000} s",
                seconds <= GOAL_IN_PROCESS_1000,
            )
        )
        checks.append(
            (
                "1000 operators, whole process",
                f"{process:.3f} s",
                f"<= {GOAL_PROCESS_1000} s",
                process <= GOAL_PROCESS_1000,
            )
        )
    if 1000 in results and 10000 in results:
        ratio = results[10000][1] / results[1000][1]
        checks.append(
            (
                "10000 / 1000 in-process",
                f"{ratio:.2f}x",
                f"<= {GOAL_LINEARITY}x",
                ratio <= GOAL_LINEARITY,
            )
        )
    checks.append(
        ("`flowc compile` imports pyspark", str(imports_pyspark), "False", not imports_pyspark)
    )
    report = [
        f"Machine: {machine()}. Command: `python -m benchmarks.compile_speed`.",
        "Jobs come from `benchmarks/generate.py` (views of ten steps: filters, maps, a",
        "rebalance, a keyed aggregate with a uid). Times are the best of several runs, wall",
        "clock; the whole process runs `python -m flowc compile JOB --emit jobgraph`, with",
        "Python's bytecode cache (as pip leaves an installed package).",
        "",
        "| operators asked | stream nodes | in-process (s) | whole process (s) |",
        "|---|---|---|---|",
        *rows,
        "",
        *(
            [
                "Without a bytecode cache (`PYTHONDONTWRITEBYTECODE=1` with an editable "
                "install), each",
                f"process first compiles flowc's sources: 1000 operators take {uncached:.3f} s.",
                "",
            ]
            if uncached is not None
            else []
        ),
        "| goal | measured | target | met |",
        "|---|---|---|---|",
        *[
            f"| {name} | {value} | {target} | {'yes' if ok else 'NO'} |"
            for name, value, target, ok in checks
        ],
        "",
    ]
    update_section(args.output, "Compile time", "\n".join(report))
    print(f"wrote {args.output}")
    return 0 if all(ok for *_, ok in checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
