"""Soak: 100,000 fuzzed inputs through every pass, the CLI in-process, and some processes.

    python -m benchmarks.soak [--cases 100000] [--seed 0] [--output RELIABILITY.md]

Each case draws from ``random.Random(f"{seed}:{case}")`` (so one case reproduces alone,
``--only CASE``) one input of the mix in tests/fuzzing.py: half generated programs (one in
ten of them then token-mutated), a quarter token-level and a quarter byte-level mutants of
the examples in examples/ and examples/errors/. Every case runs every pass and renders
every stage in every format and the PySpark program (:func:`fuzzing.run_data`); one case in
``--cli-every`` also runs ``flowc.cli.main`` in-process (check, check --format json,
--emit all, --emit pyspark), and one in ``--process-every`` real ``python -m flowc``
processes (check, --emit all). A crash, a broken promise (an error without a diagnostic, a
PySpark program that is not Python, an exit code other than 0, 1 or 2 or not the one the
outcome implies, a traceback on stderr) or a case slower than ``--timeout`` seconds is
saved to ``--crash-dir`` with its traceback. The numbers go to the "Soak" section of
RELIABILITY.md; the exit code is 1 if anything was found.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
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
from dataclasses import dataclass, field
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


def write_section(path: Path, body: str) -> None:
    """Replace the text between the soak markers of RELIABILITY.md (or append it)."""
    text = path.read_text(encoding="utf-8") if path.exists() else "# Reliability\n"
    block = f"{BEGIN}\n{body}{END}"
    if BEGIN in text and END in text:
        text = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: block, text, flags=re.S)
    else:
        text = text.rstrip("\n") + "\n\n## Soak\n\n" + block + "\n"
    path.write_text(text, encoding="utf-8")


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
    args = parser.parse_args(argv)

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
