"""Soak: 100,000 fuzzed inputs through every pass, the CLI in-process, and some processes.

    python -m benchmarks.soak [--cases 100000] [--seed 0] [--output RELIABILITY.md]

Each case draws from ``random.Random(f"{seed}:{case}")`` (so one case reproduces alone,
``--only CASE``) one input of the mix in tests/fuzzing.py: half generated programs (one in
ten of them then token-mutated), a quarter token-level and a quarter byte-level mutants of
the examples in examples/ and examples/errors/. Every case runs every pass and renders
every stage in every format and the PySpark program (:func:`fuzzing.run_data`); one case in
``--cli-every`` also runs ``flowc.cli.main.main`` in-process (check, check --format json,
--emit all, --emit pyspark), and one in ``--process-every`` real ``python -m flowc``
processes (check, --emit all). A crash, a broken promise (an error without a diagnostic, a
PySpark program that is not Python, an exit code other than 0, 1 or 2 or not the one the
outcome implies, a traceback on stderr) or a case slower than ``--timeout`` seconds is
saved to ``--crash-dir`` with its traceback. The numbers go to the "Soak" section of
RELIABILITY.md; the exit code is 1 if anything was found.

Two more runs (each replaces its own part of RELIABILITY.md, "Bounds, threads and
memory"):

    python -m benchmarks.soak --limits [--literals 300]
    python -m benchmarks.soak --threads 2000

``--limits`` compiles programs made to explode (many views, unions of the same input, join
ladders, deep view chains, huge literals and files, programs at the size bounds), each in
a fresh process, and reports the outcome (compiled, or the bound's diagnostic), the
compile time, the rendering of every stage and the process's peak memory, against the
goals (compile < 2 s, peak < 500 MB); then ``--literals`` programs with distinct 1 MB
literals compiled one after another in one process (the memo caches' bytes, the peak).
``--threads N`` runs 8 threads of N compiles each of tests/test_threads.py's corpus and
checks every result against a serial compile, and the process's settings after.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import logging
import os
import random
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import FrameType

from benchmarks.report import machine

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the fuzzing helpers live beside the tests

from fuzzing import (  # noqa: E402
    Outcome,
    RandomChooser,
    cli_problem,
    fuzz_input,
    run_cli,
    run_cli_subprocess,
    run_data,
)

BEGIN, END = "<!-- soak:begin -->", "<!-- soak:end -->"
LIMITS = ("<!-- limits:begin -->", "<!-- limits:end -->")
THREADS = ("<!-- threads:begin -->", "<!-- threads:end -->")
#: Goals of --limits: each case's compile time, and the peak memory of its process.
GOAL_COMPILE_SECONDS = 2.0
GOAL_PEAK_MB = 500


class CaseTimeout(BaseException):
    """Raised by SIGALRM; not an Exception, so that no ``except Exception`` swallows it."""


@dataclass
class Findings:
    cases: int = 0
    by_input: collections.Counter[str] = field(default_factory=collections.Counter)
    outcomes: collections.Counter[str] = field(default_factory=collections.Counter)
    table: collections.Counter[tuple[str, str]] = field(default_factory=collections.Counter)
    codes: collections.Counter[str] = field(default_factory=collections.Counter)
    cli_cases: int = 0
    cli_exits: collections.Counter[int] = field(default_factory=collections.Counter)
    process_cases: int = 0
    process_exits: collections.Counter[int] = field(default_factory=collections.Counter)
    problems: list[dict[str, object]] = field(default_factory=list)
    slowest: list[tuple[float, int]] = field(default_factory=list)


def chooser(seed: int, case: int) -> RandomChooser:
    return RandomChooser(random.Random(f"{seed}:{case}"))


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise CaseTimeout


def record_problem(
    findings: Findings, crash_dir: Path, seed: int, case: int, kind: str, data: bytes, why: str
) -> None:
    crash_dir.mkdir(parents=True, exist_ok=True)
    stem = crash_dir / f"seed{seed}-case{case}"
    stem.with_suffix(".flow").write_bytes(data)
    report = (
        f"{why}\n\ninput kind: {kind}\n"
        f"reproduce: python -m benchmarks.soak --seed {seed} --only {case}\n"
    )
    stem.with_suffix(".txt").write_text(report, encoding="utf-8")
    findings.problems.append({"case": case, "input": kind, "what": why.strip().splitlines()[-1]})
    print(f"\nPROBLEM in case {case} ({kind}): saved to {stem}.flow\n{why}", file=sys.stderr)


def run_case(findings: Findings, args: argparse.Namespace, case: int, directory: Path) -> None:
    kind, data = fuzz_input(chooser(args.seed, case))
    findings.cases += 1
    findings.by_input[kind] += 1
    start = time.perf_counter()
    signal.alarm(args.timeout)
    try:
        outcome = run_data(data)
        if case % args.cli_every == 0:
            findings.cli_cases += 1
            for result in run_cli(data, directory, outcome):
                findings.cli_exits[result.code] += 1
                problem = cli_problem(result)
                if problem:
                    raise AssertionError(f"flowc {' '.join(result.argv[:-1])}: {problem}")
        if case % args.process_every == 0:
            findings.process_cases += 1
            path = directory / "process.flow"
            path.write_bytes(data)
            for arguments, expected in (
                (["check"], outcome.check_exit),
                (["compile", "--emit", "all", "-o", str(directory / "out")], outcome.emit_exit),
            ):
                code, stderr = run_cli_subprocess([path], arguments)
                findings.process_exits[code] += 1
                if code != expected or "Traceback" in stderr:
                    raise AssertionError(
                        f"python -m flowc {' '.join(arguments)}: exit {code}, "
                        f"expected {expected}: {stderr}"
                    )
    except CaseTimeout:
        outcome = Outcome("timeout")
        why = f"case took longer than {args.timeout} s"
        record_problem(findings, args.crash_dir, args.seed, case, kind, data, why)
    except Exception:
        outcome = Outcome("crash")
        why = traceback.format_exc()
        record_problem(findings, args.crash_dir, args.seed, case, kind, data, why)
    finally:
        signal.alarm(0)
    elapsed = time.perf_counter() - start
    findings.slowest = sorted([*findings.slowest, (elapsed, case)], reverse=True)[:3]
    findings.outcomes[outcome.kind] += 1
    findings.table[(kind.split("+")[0], outcome.kind)] += 1
    findings.codes.update(outcome.codes)


def git_revision() -> str:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "compiler", "runtime", "grammar"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + (" with uncommitted changes to the compiler" if dirty else "")


def report(findings: Findings, args: argparse.Namespace, seconds: float, command: str) -> str:
    kinds = ["compiled", "spark", "unsupported", "diagnostic", "not-utf8", "crash", "timeout"]
    inputs = ["generated", "tokens", "bytes"]
    lines = [
        f"Latest run: {datetime.date.today().isoformat()}, flowc at {git_revision()}, "
        f"on {machine()}.",
        "",
        f"    {command}",
        "",
        f"**{findings.cases:,} cases in {seconds / 60:.1f} min "
        f"({findings.cases / seconds:.0f} cases/s), seed {args.seed}. "
        f"Crashes, broken promises or timeouts: {len(findings.problems)}.**",
        "",
        "| input | " + " | ".join(kinds) + " | total |",
        "|---|" + "---:|" * (len(kinds) + 1),
    ]
    for name in inputs:
        row = [findings.table[(name, k)] for k in kinds]
        lines.append(f"| {name} | " + " | ".join(f"{n:,}" for n in row) + f" | {sum(row):,} |")
    totals = [findings.outcomes[k] for k in kinds]
    lines.append("| **all** | " + " | ".join(f"{n:,}" for n in totals) + f" | {sum(totals):,} |")
    generated_mutated = findings.by_input["generated+tokens"]
    lines += [
        "",
        f"Of the generated programs, {generated_mutated:,} were then token-mutated. "
        "compiled: every pass, every stage in every format, and the PySpark program (valid "
        "Python); spark: Flink's plans in every format, but Spark's streaming rules (E07xx) "
        "reject the job for check/run/--emit pyspark; unsupported: plans, but the PySpark "
        "generator cannot express it (exit 1); diagnostic: errors; not-utf8: the CLI's "
        "exit 2.",
        "",
        "Error codes (cases reporting each): "
        + ", ".join(f"{code} {n:,}" for code, n in sorted(findings.codes.items()))
        + ".",
        "",
        f"CLI in-process (check, check --format json, --emit all, --emit pyspark) on "
        f"{findings.cli_cases:,} cases (one in {args.cli_every}): exit codes "
        + ", ".join(f"{code}: {n:,}" for code, n in sorted(findings.cli_exits.items()))
        + f". Real `python -m flowc` processes (check, --emit all) on "
        f"{findings.process_cases:,} cases (one in {args.process_every}): exit codes "
        + ", ".join(f"{code}: {n:,}" for code, n in sorted(findings.process_exits.items()))
        + ".",
        "",
        "Slowest cases: "
        + ", ".join(f"{t * 1000:.0f} ms (case {case})" for t, case in findings.slowest)
        + ".",
    ]
    if findings.problems:
        lines += ["", "Problems found (inputs and tracebacks in `benchmarks/soak-crashes/`):", ""]
        lines += [f"- case {p['case']} ({p['input']}): {p['what']}" for p in findings.problems]
    return "\n".join(lines) + "\n"


def write_section(
    path: Path, body: str, markers: tuple[str, str] = (BEGIN, END), title: str = "Soak"
) -> None:
    """Replace the text between the markers of RELIABILITY.md (or append it)."""
    begin, end = markers
    text = path.read_text(encoding="utf-8") if path.exists() else "# Reliability\n"
    block = f"{begin}\n{body}{end}"
    if begin in text and end in text:
        text = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda _: block, text, flags=re.S)
    else:
        text = text.rstrip("\n") + f"\n\n## {title}\n\n" + block + "\n"
    path.write_text(text, encoding="utf-8")


# ---------------------------------------------------------------- --limits


def limit_cases() -> dict[str, tuple[str, str, Callable[[], str]]]:
    """name -> (kind: explosive or size, what it is, its program), in the report's order.

    Explosive: small programs whose plan or work would explode (the goals apply); size:
    programs at the size bounds, whose time is linear in their size."""
    import test_limits as t

    def many_views(n: int) -> str:
        lines = [t.HEADER]
        lines += [
            f"CREATE VIEW v{i} AS FROM src |> WHERE k > {i} |> SELECT k, v + {i} AS v, ts;"
            for i in range(n)
        ]
        for first in range(0, n, 10):
            others = ", ".join(f"v{i}" for i in range(first + 1, min(first + 10, n)))
            lines.append(f"INSERT INTO out FROM v{first} |> UNION ALL {others};")
        return "\n".join(lines) + "\n"

    def wide_union(n: int) -> str:
        lines = [t.HEADER]
        lines += [f"CREATE VIEW v{i} AS FROM src |> WHERE k > {i};" for i in range(n)]
        others = ", ".join(f"v{i}" for i in range(1, n))
        lines.append(f"INSERT INTO out FROM v0 |> UNION ALL {others};")
        return "\n".join(lines) + "\n"

    def chained_views(n: int) -> str:
        return t.pipe_view_chain(n, step="SELECT k, v + 1 AS v, ts")

    def steps(n: int) -> str:
        return t.HEADER + "INSERT INTO out FROM src" + " |> WHERE k > 0" * n + ";\n"

    def sources(n: int) -> str:
        lines = ["CREATE SINK out WITH (connector = 'noop');"]
        for i in range(n):
            lines.append(f"CREATE SOURCE s{i} (k BIGINT) WITH (connector = 'datagen');")
            lines.append(f"INSERT INTO out FROM s{i};")
        return "\n".join(lines) + "\n"

    def terms(n: int) -> str:
        return t.HEADER + "INSERT INTO out FROM src |> WHERE k > " + "+".join(["1"] * n) + ";\n"

    def huge_file(chars: int) -> str:
        return t.HEADER + "INSERT INTO out FROM src;\n-- " + "x" * chars + "\n"

    kb = 1000
    explosive, size = "explosive", "size"
    cases: dict[str, tuple[str, str, Callable[[], str]]] = {}
    for n in (10, 14, 15, 16, 20, 40):
        cases[f"union-ladder-{n}"] = (
            explosive,
            f"views doubling by UNION ALL of the same input, n = {n}",
            partial(t.union_ladder, n),
        )
    cases["union-ladder-20-rebalance"] = (
        explosive,
        "the same, n = 20, then REBALANCE",
        partial(t.union_ladder, 20, " |> REBALANCE"),
    )
    for n in (10, 20, 40):
        cases[f"join-ladder-{n}"] = (explosive, f"join ladder, n = {n}", partial(t.join_ladder, n))
    cases["outer-join-ladder-40"] = (
        explosive,
        "LEFT JOIN ladder, n = 40",
        partial(t.join_ladder, 40, "LEFT "),
    )
    cases["many-views-1000"] = (
        explosive,
        "1,000 views of one source, unions of 10",
        partial(many_views, 1000),
    )
    cases["wide-union-1000"] = (explosive, "UNION ALL of 1,000 views", partial(wide_union, 1000))
    for n in (1000, 3000):
        cases[f"view-chain-{n}"] = (
            explosive,
            f"{n:,} chained views with an exchange each",
            partial(t.pipe_view_chain, n),
        )
    for n in (450, 600):
        cases[f"chained-views-{n}"] = (
            explosive,
            f"{n:,} chained views, {2 * n + 2:,} operators one after another in one chain",
            partial(chained_views, n),
        )
    cases["sql-view-chain-400"] = (
        explosive,
        "400 chained SQL views",
        partial(t.sql_view_chain, 400),
    )
    for chars in (100 * kb, 1000 * kb, 1024 * 1024 + 1):
        cases[f"literal-{chars}"] = (
            explosive,
            f"a literal of {chars:,} characters",
            partial(t.literal_program, chars),
        )
    cases["terms-10000"] = (explosive, "an expression of 10,000 terms", partial(terms, 10_000))
    cases["terms-1000000"] = (
        explosive,
        "an expression of 1,000,000 terms (2 MB)",
        partial(terms, 1_000_000),
    )
    cases["file-4MiB"] = (
        explosive,
        "a file just under 4 MiB (comments)",
        partial(huge_file, 4 * 1024**2 - 400),
    )
    cases["file-100MB"] = (explosive, "a 100 MB file", partial(huge_file, 100_000_000))
    # Programs at the size bounds: their time is linear in their size (a job of 10,000
    # operators, the scale benchmark's, takes about 2 s by itself).
    cases["many-views-4000"] = (
        size,
        "4,000 views of one source, unions of 10",
        partial(many_views, 4000),
    )
    cases["wide-union-5000"] = (size, "UNION ALL of 5,000 views", partial(wide_union, 5000))
    cases["view-chain-8000"] = (
        size,
        "8,000 chained views with an exchange each",
        partial(t.pipe_view_chain, 8000),
    )
    cases["sql-view-chain-5000"] = (
        size,
        "5,000 chained SQL views (10,000 operators in one chain)",
        partial(t.sql_view_chain, 5000),
    )
    for n in (24_000, 30_000):
        cases[f"steps-{n}"] = (size, f"{n:,} steps in one query", partial(steps, n))
    for n in (12_000, 13_000):
        cases[f"sources-{n}"] = (size, f"{n:,} sources, each into a sink", partial(sources, n))
    cases["terms-49000"] = (size, "an expression of 49,000 terms", partial(terms, 49_000))
    return cases


def limit_case(name: str) -> dict[str, object]:
    """Run one --limits case in this process (a fresh one): what it gave, how long, peak."""
    import resource

    import flowc
    from flowc import limits

    _, _, make = limit_cases()[name]
    text = make()
    flowc.compile((ROOT / "examples" / "wordcount.flow").read_text(), "warm.flow")  # grammar
    start = time.perf_counter()
    result: dict[str, object] = {"name": name, "chars": len(text)}
    try:
        job = flowc.compile(text, f"{name}.flow")
    except flowc.CompileError as error:
        result["compile"] = time.perf_counter() - start
        result["outcome"] = ", ".join(sorted({d.code for d in error.diagnostics}))
        result["message"] = error.diagnostics[0].message
    else:
        result["compile"] = time.perf_counter() - start
        result["outcome"] = "compiled"
        result["operators"] = len(job.stream_graph.nodes)
        result["edges"] = len(job.stream_graph.edges())
        start = time.perf_counter()
        for stage in (job.transformations, job.stream_graph, job.job_graph):
            stage.to_text()
            stage.to_json()
        job.physical_plan.to_text()
        job.physical_plan.to_json()
        result["render"] = time.perf_counter() - start
    result["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result["cache_bytes"] = sum(limits.cache_bytes().values())
    return result


def distinct_literals(count: int) -> dict[str, object]:
    """``count`` programs, each with its own 1 MB literal, compiled one after another."""
    import resource

    from test_limits import literal_program

    import flowc
    from flowc import limits

    slowest = 0.0
    most = 0
    start = time.perf_counter()
    for salt in range(count):
        began = time.perf_counter()
        flowc.compile(literal_program(1_000_000, salt), "literal.flow")
        slowest = max(slowest, time.perf_counter() - began)
        most = max(most, sum(limits.cache_bytes().values()))
    return {
        "count": count,
        "seconds": time.perf_counter() - start,
        "slowest": slowest,
        "cache_bytes": most,
        "budget": sum(c.max_bytes for c in limits.CACHES.values()),
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def _in_a_process(*arguments: str) -> dict[str, object]:
    process = subprocess.run(
        [sys.executable, "-m", "benchmarks.soak", *arguments],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=1800,
    )
    if process.returncode != 0:
        return {"outcome": "crash", "message": process.stderr.strip().splitlines()[-1:]}
    data: dict[str, object] = json.loads(process.stdout.strip().splitlines()[-1])
    return data


def run_limits(args: argparse.Namespace) -> tuple[str, bool]:
    cases = limit_cases()
    rows = []
    for name, (kind, what, _) in cases.items():
        result = _in_a_process("--limit-case", name)
        result["what"] = what
        result["kind"] = kind
        rows.append(result)
        print(json.dumps(result), file=sys.stderr, flush=True)
    literals = _in_a_process("--distinct-literals", str(args.literals))
    print(json.dumps(literals), file=sys.stderr, flush=True)

    def seconds(value: object) -> str:
        return f"{value:.2f}" if isinstance(value, float) else "-"

    def number(row: dict[str, object], key: str) -> float:
        return float(str(row.get(key, 0)))

    lines = [
        f"Latest run: {datetime.date.today().isoformat()}, flowc at {git_revision()}, "
        f"on {machine()}.",
        "",
        "    python -m benchmarks.soak --limits" + (f" --literals {args.literals}"),
        "",
        "Each case in a fresh process: compile time (grammar loaded first), rendering every "
        "stage's text and JSON (when it compiles), and the process's peak resident memory "
        "(the interpreter and imports included).",
    ]
    for kind, title in (
        ("explosive", "Programs made to explode (the goals apply):"),
        ("size", "Programs at the size bounds (time linear in their size):"),
    ):
        lines += [
            "",
            title,
            "",
            "| case | program (chars) | outcome | compile (s) | render (s) | peak (MiB) |",
            "|---|---:|---|---:|---:|---:|",
        ]
        for row in rows:
            if row["kind"] != kind:
                continue
            outcome = str(row.get("outcome"))
            if outcome == "compiled":
                edges = int(str(row["edges"]))
                outcome = (
                    f"compiled: {row['operators']:,} operators, {edges:,} "
                    f"edge{'' if edges == 1 else 's'}"
                )
            lines.append(
                f"| {row['what']} | {row.get('chars', 0):,} | {outcome} | "
                f"{seconds(row.get('compile'))} | {seconds(row.get('render'))} | "
                f"{number(row, 'peak_mb'):.0f} |"
            )
    explosive = [r for r in rows if r["kind"] == "explosive"]
    slowest = max(explosive, key=lambda r: number(r, "compile"))
    slowest_size = max(rows, key=lambda r: number(r, "compile"))
    largest = max(rows, key=lambda r: number(r, "peak_mb"))
    peak = max(number(largest, "peak_mb"), number(literals, "peak_mb"))
    crashes = [r["what"] for r in rows if r.get("outcome") == "crash"]
    met_time = number(slowest, "compile") < GOAL_COMPILE_SECONDS
    met_memory = peak < GOAL_PEAK_MB
    lines += [
        "",
        f"{literals['count']} programs, each with its own 1 MB literal, compiled one after "
        f"another in one process: {number(literals, 'seconds'):.1f} s, the slowest "
        f"{number(literals, 'slowest'):.2f} s; the memo caches held at most "
        f"{int(number(literals, 'cache_bytes')):,} bytes by their own accounting (budget "
        f"{int(number(literals, 'budget')):,}); peak {number(literals, 'peak_mb'):.0f} MiB.",
        "",
        "| goal | measured | target | met |",
        "|---|---|---|---|",
        f"| compile time, slowest program made to explode | {number(slowest, 'compile'):.2f} s "
        f"({slowest['what']}) | < {GOAL_COMPILE_SECONDS:.0f} s | {'yes' if met_time else 'no'} |",
        f"| peak memory, any case | {peak:.0f} MiB ({largest['what']}) | < {GOAL_PEAK_MB} MB | "
        f"{'yes' if met_memory else 'no'} |",
        f"| crashes | {len(crashes)} | 0 | {'yes' if not crashes else 'no'} |",
        "",
        f"At the size bounds the slowest compile was {number(slowest_size, 'compile'):.2f} s "
        f"({slowest_size['what']}).",
    ]
    return "\n".join(lines) + "\n", not crashes and met_time and met_memory


# ---------------------------------------------------------------- --threads


def run_threads(args: argparse.Namespace) -> tuple[str, bool]:
    import gc

    import test_threads as t

    from flowc import limits

    programs = t.corpus(generated=200)
    start = time.perf_counter()
    serial = {name: t.fingerprint(text, name) for name, text in programs.items()}
    serial_seconds = time.perf_counter() - start
    gc.set_threshold(555, 7, 9)
    sys.setrecursionlimit(1234)
    failure = ""
    start = time.perf_counter()
    try:
        results = t.run_in_threads(programs, args.threads)
    except Exception:
        failure = traceback.format_exc().strip().splitlines()[-1]
        results = []
    seconds = time.perf_counter() - start
    settings = (gc.get_threshold(), sys.getrecursionlimit())
    wrong = sorted({name for name, found in results if found != serial[name]})
    ok = not failure and not wrong and settings == ((555, 7, 9), 1234)
    cache = sum(limits.cache_bytes().values())
    budget = sum(c.max_bytes for c in limits.CACHES.values())
    lines = [
        f"Latest run: {datetime.date.today().isoformat()}, flowc at {git_revision()}, "
        f"on {machine()}.",
        "",
        f"    python -m benchmarks.soak --threads {args.threads}",
        "",
        f"**{t.THREADS} threads x {args.threads:,} compiles ({len(results):,} in all) of "
        f"{len(programs)} programs in {seconds / 60:.1f} min: {len(wrong)} results differing "
        f"from the serial compile, {failure if failure else 'no exception'}.** Each "
        "result is every stage in every format, the diagnostics and each SQL tree of the "
        f"AST with its type; the serial compiles took {serial_seconds:.1f} s. The "
        f"application's own settings afterwards: collector thresholds {settings[0]} and "
        f"recursion limit {settings[1]} (it set (555, 7, 9) and 1234); memo caches "
        f"{cache:,} bytes by their own accounting (budget {budget:,}).",
    ]
    if wrong:
        lines += ["", "Differing: " + ", ".join(wrong[:20])]
    return "\n".join(lines) + "\n", ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.soak", description=__doc__)
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", type=int, metavar="CASE", help="run this one case")
    parser.add_argument("--cli-every", type=int, default=10, metavar="N")
    parser.add_argument("--process-every", type=int, default=1000, metavar="N")
    parser.add_argument("--timeout", type=int, default=60, help="seconds per case")
    parser.add_argument("--crash-dir", type=Path, default=ROOT / "benchmarks" / "soak-crashes")
    parser.add_argument("--output", type=Path, default=ROOT / "RELIABILITY.md")
    parser.add_argument("--no-write", action="store_true", help="do not update --output")
    parser.add_argument("--limits", action="store_true", help="the bounds' cases instead")
    parser.add_argument("--literals", type=int, default=300, help="with --limits")
    parser.add_argument("--threads", type=int, metavar="N", help="8 threads x N compiles")
    parser.add_argument("--limit-case", help=argparse.SUPPRESS)
    parser.add_argument("--distinct-literals", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.limit_case is not None:
        print(json.dumps(limit_case(args.limit_case)))
        return 0
    if args.distinct_literals is not None:
        print(json.dumps(distinct_literals(args.distinct_literals)))
        return 0
    if args.limits or args.threads is not None:
        logging.getLogger("sqlglot").setLevel(logging.CRITICAL)
        if args.limits:
            text, ok = run_limits(args)
            markers, title = LIMITS, "Bounds: the explosive cases"
        else:
            text, ok = run_threads(args)
            markers, title = THREADS, "Threads: the full-size stress"
        print(text)
        if not args.no_write:
            write_section(args.output, text, markers, title)
        return 0 if ok else 1

    os.environ.setdefault("FLOWC_CRASH_DIR", str(args.crash_dir))
    args.crash_dir.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGALRM, _alarm)
    findings = Findings()
    cases = [args.only] if args.only is not None else range(args.cases)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="flowc-soak-") as directory:
        for i, case in enumerate(cases):
            run_case(findings, args, case, Path(directory))
            if (i + 1) % 1000 == 0:
                elapsed = time.perf_counter() - start
                print(
                    f"{i + 1:>7,} cases  {elapsed:7.0f} s  {(i + 1) / elapsed:5.0f}/s  "
                    f"{json.dumps(dict(findings.outcomes))}",
                    file=sys.stderr,
                    flush=True,
                )
    seconds = time.perf_counter() - start
    command = "python -m benchmarks.soak " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])
    )
    text = report(findings, args, seconds, command.strip())
    print(text)
    if args.only is None and not args.no_write:
        write_section(args.output, text)
    return 1 if findings.problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
