"""Compile-time benchmark: generated jobs of 10, 100, 1000 and 10000 operators.

Measures ``flowc.compile`` in-process (best of several runs, wall clock) and a whole
``flowc compile`` process (best of several), checks the goals and writes BENCHMARKS.md.

The processes run with Python's bytecode cache, as an installed flowc has (pip compiles
a package's modules when it installs it): in a private directory (PYTHONPYCACHEPREFIX),
filled by a first, untimed run, so the source tree is left alone. Without it (a shell
with PYTHONDONTWRITEBYTECODE=1 and an editable install) every process compiles flowc's
sources first; that time is shown too, for 1000 operators, outside the goals.

    python -m benchmarks.compile_speed [--sizes 10,100,1000,10000] [--output BENCHMARKS.md]
        [--against REV [--rounds 8]]

``--against REV`` measures this tree and git revision REV side by side as well: each
round runs the 1000-operator job in-process in a fresh process of each tree, in turn,
so a busy moment of the machine falls on both; the report gives each tree's best and
the median of the rounds' ratios. Absolute times on a shared machine move by 10-20%
from hour to hour; a comparison in one run does not.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
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

REPOSITORY = Path(__file__).resolve().parents[1]


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


#: One round of one tree: compile a job in-process, cold, a few times; print the best.
_ROUND = r"""
import json, sys, time
import flowc
try:
    from flowc.syntax.parser import clear_expression_cache
except ImportError:  # revisions before the stage packages
    from flowc.parser import clear_expression_cache
text = open(sys.argv[1], encoding="utf-8").read()
flowc.compile(text, "bench.flow")
best = float("inf")
for _ in range(int(sys.argv[2])):
    clear_expression_cache()
    start = time.perf_counter()
    flowc.compile(text, "bench.flow")
    best = min(best, time.perf_counter() - start)
print(json.dumps({"file": flowc.__file__, "best": best}))
"""


def importable_tree(root: Path, into: Path) -> Path:
    """A directory to put on PYTHONPATH for the flowc of source tree ``root``: its
    ``compiler/``, ``runtime/`` and ``grammar/`` laid out as pyproject.toml installs them."""
    package = into / "flowc"
    shutil.copytree(root / "compiler", package)
    shutil.copytree(root / "runtime", package / "runtime")
    shutil.copytree(root / "grammar", package / "grammar")
    return into


def revision_tree(revision: str, into: Path) -> Path:
    """The source tree of git revision ``revision`` of this repository, in ``into``."""
    into.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "archive", revision, "compiler", "runtime", "grammar"],
        cwd=REPOSITORY,
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def side_by_side(
    path: str, revision: str, rounds: int, directory: Path
) -> tuple[float, float, float, float, float]:
    """Best in-process time of this tree and of ``revision``, alternating by round, and
    the median, lowest and highest of the rounds' ratios (this tree / ``revision``)."""
    trees = {
        "here": importable_tree(REPOSITORY, directory / "here"),
        "then": importable_tree(revision_tree(revision, directory / "src"), directory / "then"),
    }
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(directory / "pycache")
    best: dict[str, list[float]] = {name: [] for name in trees}
    for _ in range(rounds):
        for name, tree in trees.items():
            done = subprocess.run(
                [sys.executable, "-c", _ROUND, path, "3"],
                env=dict(env, PYTHONPATH=str(tree)),
                cwd=directory,
                check=True,
                capture_output=True,
                text=True,
            )
            result = json.loads(done.stdout)
            if not str(result["file"]).startswith(str(tree)):
                raise RuntimeError(f"the {name} round imported {result['file']}, not {tree}")
            best[name].append(float(result["best"]))
    ratios = [here / then for here, then in zip(best["here"], best["then"], strict=True)]
    return (
        min(best["here"]),
        min(best["then"]),
        statistics.median(ratios),
        min(ratios),
        max(ratios),
    )


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
    parser.add_argument("--against", help="a git revision to measure side by side")
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    results: dict[int, tuple[int, float, float]] = {}
    uncached: float | None = None
    compared: tuple[float, float, float, float, float] | None = None
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
        if args.against:
            path = str(Path(directory) / "side.flow")
            Path(path).write_text(generate_job(1000), encoding="utf-8")
            compared = side_by_side(path, args.against, args.rounds, Path(directory) / "side")
            print(
                f"side by side, 1000 operators: here {compared[0]:.3f} s, "
                f"{args.against} {compared[1]:.3f} s, ratio {compared[2]:.3f} "
                f"({compared[3]:.3f}-{compared[4]:.3f})",
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
        *(
            [
                f"Side by side with `{args.against}` (`--against {args.against}`, "
                f"{args.rounds} rounds, each tree in",
                "a fresh process per round, in turn; 1000 operators in-process, best of 3 "
                "per round):",
                f"this tree {compared[0]:.3f} s, `{args.against}` {compared[1]:.3f} s; "
                f"ratio of the rounds (this / then) {compared[2]:.3f}",
                f"median, {compared[3]:.3f} to {compared[4]:.3f}.",
                "",
            ]
            if compared is not None
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
