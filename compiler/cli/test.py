"""``flowc test``: run the YAML tests beside users' jobs, or lock their plans.

``flowc test PATH...`` runs every ``*.test.yaml`` (a folder: every one under it; a .flow
file: the test file beside it) on a local Spark and prints each test's result, a failed
one's rows as a diff; ``--junit-xml FILE`` writes a JUnit report. ``flowc test --plans
DIR`` compares each .flow's plans under DIR with the JSON locked in ``__plans__/`` beside
it (``--update`` writes them). Exit codes: 0 every test passed, 1 a test failed or a file
has errors, 2 usage. docs/testing.md.
"""

from __future__ import annotations

import argparse
import difflib
import os
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

from flowc.cli.compile import render_stage
from flowc.cli.input import compile_source, read_source, spark_missing
from flowc.cli.output import (
    EXIT_ERRORS,
    EXIT_OK,
    UsageError,
    print_diagnostics,
    write_file,
    write_stdout,
)
from flowc.diagnostics import CompileError, render_text
from flowc.usertest import (
    PLAN_STAGES,
    TEST_SUFFIX,
    TestFileError,
    TestOutcome,
    TestRun,
    load_test_file,
    test_files,
)
from flowc.usertest.safe_yaml import MAX_TEST_FILE_BYTES

if TYPE_CHECKING:
    from flowc.job import CompiledJob


def test(args: argparse.Namespace) -> int:
    if args.plans is not None:
        return _plans(args)
    if not args.paths:
        raise UsageError("give test files, folders or .flow files (or --plans DIR)")
    from flowc.runtime.failures import spark_output

    run = TestRun()
    log = os.path.join(tempfile.gettempdir(), f"flowc-test-{os.getpid()}.log")
    with spark_output(log):
        _run_tests(args, run)
    if args.junit_xml:
        write_file(args.junit_xml, run.junit_xml())
    write_stdout(run.summary() + "\n")
    return EXIT_OK if run.passed and run.outcomes else EXIT_ERRORS


def _run_tests(args: argparse.Namespace, run: TestRun) -> None:
    """Each test file's tests, on one local SparkSession (Spark's log goes to a file), or
    on the warm Spark, where it runs and the job can run through it exactly; the warm
    Spark's session is released at the end (its memory tables with it)."""
    with ExitStack() as stack:
        _run_pairs(args, run, stack)


def _run_pairs(args: argparse.Namespace, run: TestRun, stack: ExitStack) -> None:
    sessions: dict[str, object] = {}
    pairs = _pairs(args.paths)
    warm = _warm_url(args, pairs)
    for test_path, job_path in pairs:
        try:
            text = read_source(job_path)
        except UsageError as error:
            run.outcomes.append(TestOutcome(test_path, "(job)", 0.0, error=str(error)))
            write_stdout(f"ERROR {test_path}: {error}\n")
            continue
        try:
            job = compile_source(args, text, job_path)
            tests = load_test_file(test_path, job)
        except (CompileError, TestFileError) as error:
            sources = {job_path: text, test_path: _shown(test_path)}
            # On standard output: standard error is Spark's log file here.
            write_stdout(render_text(list(error.diagnostics), sources, color=False))
            run.outcomes.append(TestOutcome(test_path, "(file)", 0.0, error="does not compile"))
            continue
        missing = spark_missing(job, "test")
        if missing is not None:
            write_stdout(render_text([missing], {job_path: text}, color=False))
            run.outcomes.append(TestOutcome(test_path, "(job)", 0.0, error="no pyspark"))
            continue
        from flowc.runtime.user_tests import run_test

        spark = _session(job, args.master, warm, sessions, stack)
        for case in tests.tests:
            outcome = run_test(spark, job, case, tests)
            run.outcomes.append(outcome)
            status = "PASS" if outcome.passed else "FAIL"
            write_stdout(f"{status} {test_path} :: {case.name} ({outcome.seconds:.1f} s)\n")
            for text_block in (outcome.failure, outcome.error):
                if text_block:
                    write_stdout("".join(f"    {line}\n" for line in text_block.splitlines()))


def _warm_url(args: argparse.Namespace, pairs: list[tuple[str, str]]) -> str | None:
    """The warm Spark's URL where one runs and every job can run through it exactly; else
    None, with the line that says why where one runs. All or none: one process cannot
    hold a local session beside a Connect one (pyspark refuses the second)."""
    from flowc.runtime.warm import COLD, choose, read_server, state_dir

    if read_server(state_dir()) is None:
        return None
    url = None
    for _, job_path in pairs:
        try:
            job = compile_source(args, read_source(job_path), job_path)
        except (CompileError, UsageError):
            continue  # reported when its tests run
        if spark_missing(job, "test") is not None:
            return None
        choice = choose(job, args.master is not None)
        if choice.url is None:
            if choice.reason is not None:
                write_stdout(f"{choice.reason} ({job_path})\n")
            return None
        from flowc.runtime.run import load_program, static_settings

        fixed = static_settings(load_program(job), choice.url)
        if fixed:
            write_stdout(
                f"{COLD}a Spark Connect session cannot SET {', '.join(fixed)} ({job_path})\n"
            )
            return None
        url = choice.url
    return url


def _session(
    job: CompiledJob,
    master: str | None,
    warm: str | None,
    sessions: dict[str, object],
    stack: ExitStack,
) -> object:
    """The session for ``job``'s tests, started for the first: on the warm Spark
    (``warm``, docs/warm-spark.md), else a local one, said before pyspark loads.
    ``stack`` releases the warm one and this process's mark as the server's client."""
    from flowc.runtime.run import load_program, local_session_runs, release
    from flowc.runtime.warm import COLD_START, WARM_MASTER, shown, state_dir, using

    if "spark" in sessions:
        return sessions["spark"]
    if warm is None and not local_session_runs():
        write_stdout(COLD_START)
    module = load_program(job)
    if warm is not None:
        write_stdout(f"running on the warm Spark at {shown(warm)}\n")
        stack.enter_context(using(state_dir()))
        session = module.start_session(WARM_MASTER, warm, quiet=True)
        stack.callback(release, session)
    else:
        session = module.start_session(master or "local[2]", quiet=True)
        session.sparkContext.setLogLevel("ERROR")
    sessions["spark"] = session
    return session


def _shown(path: str) -> str:
    """A test file's text to show under its diagnostics: its start only, if it is too large
    to read (E0831), and bytes that are not UTF-8 replaced."""
    with open(path, "rb") as file:
        return file.read(MAX_TEST_FILE_BYTES).decode("utf-8", errors="replace")


def _pairs(paths: list[str]) -> list[tuple[str, str]]:
    pairs = []
    for path in paths:
        if path.endswith(".flow"):
            test_path = path.removesuffix(".flow") + TEST_SUFFIX
            if not Path(test_path).is_file():
                raise UsageError(f"{path}: no test file {test_path} beside it")
            pairs.append((test_path, path))
        elif Path(path).exists():
            found = list(test_files([path]))
            if not found:
                raise UsageError(f"{path}: no *{TEST_SUFFIX} files under it")
            pairs += found
        else:
            raise UsageError(f"{path}: no such file or folder")
    return pairs


def _plans(args: argparse.Namespace) -> int:
    """Each .flow under the folder: every stage's JSON against ``__plans__/NAME.STAGE.json``."""
    folder = Path(args.plans)
    if not folder.is_dir():
        raise UsageError(f"{folder}: not a folder")
    failed = False
    started = time.monotonic()
    jobs = sorted(p for p in folder.rglob("*.flow") if "__plans__" not in p.parts)
    for path in jobs:
        text = read_source(str(path))
        try:
            job = compile_source(args, text, str(path))
        except CompileError as error:
            print_diagnostics(list(error.diagnostics), {str(path): text}, "text", args.color)
            failed = True
            continue
        for stage in PLAN_STAGES:
            locked = path.parent / "__plans__" / f"{path.stem}.{stage}.json"
            now = render_stage(job, stage, "json")
            if locked.is_file() and locked.read_text(encoding="utf-8") == now:
                continue
            if args.update:
                locked.parent.mkdir(exist_ok=True)
                write_file(str(locked), now)
                write_stdout(f"UPDATED {locked}\n")
                continue
            failed = True
            if not locked.is_file():
                write_stdout(f"FAIL {path}: no locked {stage} plan ({locked}); run with --update\n")
                continue
            write_stdout(f"FAIL {path}: the {stage} plan changed\n")
            write_stdout(
                "".join(
                    difflib.unified_diff(
                        locked.read_text(encoding="utf-8").splitlines(keepends=True),
                        now.splitlines(keepends=True),
                        fromfile=str(locked),
                        tofile=f"{path} ({stage} now)",
                    )
                )
            )
    write_stdout(
        f"{len(jobs)} jobs' plans checked in {time.monotonic() - started:.1f} s: "
        f"{'some changed' if failed else 'all as locked'}\n"
    )
    return EXIT_ERRORS if failed else EXIT_OK
