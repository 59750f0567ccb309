"""Escapes of untrusted mode through what Spark's functions interpret again
(docs/security.md, "Refused functions"): each shown real on Spark as the trusted
program's text runs there, and refused untrusted.

- ``xpath*``: Spark's XPath functions parse the document with an XML parser that loads
  the external DTD it names (``<!DOCTYPE x SYSTEM '/any/path'>``), so a document in the
  program's own input read a file outside the base directory, whose entities then filled
  the result. Untrusted, the ``xpath*`` functions are refused (E0952).
- regular expressions: Java's regex engine recurses once per repetition of a group, so
  ``(a|b)*c`` on a 100,000-character value overflows the stack of the task's thread, and
  Spark's executor ends the whole JVM on that fatal error (Executor.TaskRunner hands a
  ``Utils.isFatalError`` error to SparkUncaughtExceptionHandler, which calls
  ``System.exit(50)``). Shown in a process of its own, never the shared session. Untrusted,
  such a pattern is refused (E0961) before Spark starts; trusted, ``flowc run`` reports the
  JVM's end as E0807 at the INSERT.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc import Severity
from flowc.runtime.failures import StartedQuery, jvm_ended
from flowc.runtime.warm import COLD_START
from flowc.spark.codegen import generate_pyspark

XPATH_FUNCTIONS = (
    "xpath", "xpath_boolean", "xpath_double", "xpath_float", "xpath_int", "xpath_long",
    "xpath_number", "xpath_short", "xpath_string",
)  # fmt: skip


def program(expression: str) -> str:
    return (
        "CREATE SOURCE s (v STRING) WITH (connector = 'files', path = 'in', format = 'json');\n"
        "CREATE SINK o WITH (connector = 'console');\n"
        f"INSERT INTO o FROM s |> SELECT {expression} AS w;\n"
    )


def test_xpath_reads_an_external_dtd_outside_the_base_dir_on_spark(
    spark: Any, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.dtd").write_text('<!ENTITY e "secret-from-outside">\n', encoding="utf-8")
    base = tmp_path / "base"
    (base / "in").mkdir(parents=True)
    document = f'<!DOCTYPE x SYSTEM "{(outside / "secret.dtd").as_uri()}"><x>&e;</x>'
    (base / "in" / "a.json").write_text(
        spark.createDataFrame([(document,)], "v STRING").toJSON().first() + "\n",
        encoding="utf-8",
    )
    expression = "xpath_string(v, '/x')"
    trusted = flowc.compile(program(expression), str(base / "job.flow"), for_spark=True)
    assert trusted is not None
    rows = spark.read.schema("v STRING").json(str(base / "in")).selectExpr(expression).collect()
    assert [r[0] for r in rows] == ["secret-from-outside"]

    with pytest.raises(flowc.CompileError) as refused:
        flowc.compile(program(expression), str(base / "job.flow"), for_spark=True, trusted=False)
    errors = [d for d in refused.value.diagnostics if d.severity is Severity.ERROR]
    assert [d.code for d in errors] == ["E0952"]
    assert (errors[0].span.line, errors[0].span.column) == (3, 32)
    assert "external DTD" in errors[0].message


@pytest.mark.parametrize("name", XPATH_FUNCTIONS)
def test_every_xpath_function_is_refused_untrusted_however_spelled(name: str) -> None:
    for spelled in (name, name.upper(), f"`{name}`"):
        with pytest.raises(flowc.CompileError) as refused:
            flowc.compile(program(f"{spelled}(v, '/x')"), "job.flow", for_spark=True, trusted=False)
        codes = [d.code for d in refused.value.diagnostics if d.severity is Severity.ERROR]
        assert codes == ["E0952"], spelled


# -- regular expressions: a repeated group overflows the stack, which ends Spark's JVM


@pytest.mark.parametrize(
    "expression",
    [
        "rlike(v, '(a|b)*c')",
        "v RLIKE '(a|b)*c'",
        "v REGEXP '(ab)+'",
        "regexp(v, '(a)+')",
        "regexp_like(v, '(a){2,}')",
        "regexp_replace(v, '(?:ab)+', 'x')",
        "regexp_extract(v, '(a|b)*', 1)",
        "regexp_extract_all(v, '(a|b)*', 1)",
        "regexp_count(v, '(a|b)*')",
        "regexp_instr(v, '(a|b)*')",
        "regexp_substr(v, '(a|b)*')",
        "split(v, '(a|b)+')",
        "str_to_map(v, ',', '(x)+')",
        "rlike(v, '(a)\\\\1')",
        "rlike(v, '(a|b\\u0029*c')",
        "rlike(v, '(?x)(a) #\\n *')",
        "rlike(v, v)",
        "rlike(v, concat('(a', ')*'))",
    ],
)
def test_a_regex_that_repeats_a_group_or_is_not_a_literal_is_refused(expression: str) -> None:
    with pytest.raises(flowc.CompileError) as refused:
        flowc.compile(program(expression), "job.flow", for_spark=True, trusted=False)
    errors = [d for d in refused.value.diagnostics if d.severity is Severity.ERROR]
    assert [d.code for d in errors] == ["E0961"]
    assert errors[0].help is not None
    flowc.compile(program(expression), "job.flow", for_spark=True)


@pytest.mark.parametrize(
    "expression",
    [
        "rlike(v, '[ab]*c')",
        "regexp_replace(v, '\\\\s+', ' ')",
        "regexp_extract(v, '([a-z]+)-(\\\\d+)', 2)",
        "split(v, ',')",
        "rlike(v, '\\\\(a\\\\)*')",
        "v LIKE '%(a)%'",
    ],
)
def test_a_literal_regex_without_repeated_groups_is_allowed(expression: str) -> None:
    assert flowc.compile(program(expression), "job.flow", for_spark=True, trusted=False)


# -- the regex that ends Spark's JVM, each in a process of its own

LONG_VALUE = "ab" * 50_000
REGEX_PROGRAM = program("regexp_extract(v, '(a|b)*c', 0)")
#: A Java stack frame's line ("\tat org.apache...(File.java:12)"), and Python's traceback.
JAVA_FRAME = re.compile(r"^\s+at [\w$.<>/]+\(", re.M)

#: Runs the generated program in a JVM of its own: a control query first (the same value,
#: a pattern with no repeated group, matching all of it), then the job; prints what
#: happened as JSON.
DRIVER = """
import json, sys, types
from pyspark import SparkContext
path, base, checkpoints, value = sys.argv[1:5]
module = types.ModuleType("job")
module.__file__ = path
exec(compile(open(path, encoding="utf-8").read(), path, "exec"), module.__dict__)
module.BASE_DIR = base
spark = module.start_session("local[1]")
frame = spark.createDataFrame([(value,)], "v STRING")
control = frame.selectExpr("length(regexp_extract(v, '[ab]*', 0))").first()[0]
error = None
try:
    for query in module.start_queries(spark, checkpoints, True):
        query.awaitTermination()
except BaseException as failure:
    error = type(failure).__name__
print(json.dumps({"control": control, "error": error,
                  "jvm_exit": SparkContext._gateway.proc.wait(timeout=30)}), flush=True)
"""


def _regex_job(folder: Path) -> Path:
    (folder / "in").mkdir(parents=True)
    (folder / "in" / "a.json").write_text(json.dumps({"v": LONG_VALUE}) + "\n", encoding="utf-8")
    job = folder / "job.flow"
    job.write_text(REGEX_PROGRAM, encoding="utf-8")
    return job


def _environment() -> dict[str, str]:
    """This environment without a gateway of the test session's JVM: the child starts its
    own."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_GATEWAY")}


def _flowc(
    folder: Path, *arguments: str, timeout: float
) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "flowc", *arguments],
        cwd=folder,
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return done, time.monotonic() - started


def test_a_regex_repeating_a_group_ends_sparks_jvm_trusted(tmp_path: Path) -> None:
    """The generated program of the trusted job, in a JVM of its own: the same value
    passes a pattern without a repeated group, then the job's pattern ends the JVM with
    Spark's exit code for an uncaught fatal error (50) and a StackOverflowError."""
    job = _regex_job(tmp_path)
    compiled = flowc.compile(REGEX_PROGRAM, str(job), for_spark=True)
    assert compiled is not None
    generated = tmp_path / "job.py"
    generated.write_text(generate_pyspark(compiled), encoding="utf-8")
    arguments = [str(generated), str(tmp_path), str(tmp_path / "checkpoints"), LONG_VALUE]
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", DRIVER, *arguments],
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    assert outcome["control"] == len(LONG_VALUE)  # the safe pattern matched the whole value
    assert outcome["error"] is not None  # the job's query did not end normally
    assert outcome["jvm_exit"] == 50  # SparkExitCode.UNCAUGHT_EXCEPTION: the JVM ended
    assert re.search(
        r"SparkUncaughtExceptionHandler: Uncaught exception in thread [^\n]*\n"
        r"java\.lang\.StackOverflowError",
        done.stderr,
    ), done.stderr[-3000:]
    print(f"JVM ended after {elapsed:.1f} s")


@pytest.mark.parametrize("mode", ["--available-now", "--batch"])
def test_flowc_run_reports_the_jvm_ending_at_the_insert(tmp_path: Path, mode: str) -> None:
    """Trusted, ``flowc run`` of the job (streaming or batch) is one located diagnostic
    (E0807 at the INSERT, with what to do), exit 1: no Java stack trace, no Python
    traceback, no exit 101; before it only the line a cold start says first."""
    _regex_job(tmp_path)
    done, elapsed = _flowc(tmp_path, "run", mode, "--master", "local[1]", "job.flow", timeout=120)
    assert done.returncode == 1, done.stderr[-3000:]
    assert done.stderr.startswith(
        COLD_START + "error[E0807]: Spark's JVM ended (exit code 50) while query 'o' ran: "
        "java.lang.StackOverflowError\n --> job.flow:3:1\n"
    ), done.stderr[-3000:]
    assert "repeats a group" in done.stderr
    assert "--set spark.driver.extraJavaOptions=-Xss64m" in done.stderr
    assert "Spark's log and stack trace: .flowc-checkpoints/.flowc-logs/" in done.stderr
    for output in (done.stdout, done.stderr):
        assert JAVA_FRAME.search(output) is None
        assert "Traceback" not in output
        assert "Exception" not in output
    print(f"flowc run {mode} ended after {elapsed:.1f} s")


@pytest.mark.parametrize("command", ["check", "run"])
def test_flowc_refuses_the_regex_untrusted_before_spark_starts(
    tmp_path: Path, command: str
) -> None:
    """Untrusted, the same job is E0961 at the pattern, exit 1, and Spark never starts:
    no checkpoint or log folder is made, no Spark output."""
    _regex_job(tmp_path)
    extra = ["--available-now"] if command == "run" else []
    done, elapsed = _flowc(tmp_path, command, "--untrusted", *extra, "job.flow", timeout=60)
    assert done.returncode == 1, done.stderr[-3000:]
    assert done.stderr.startswith("error[E0961]: the regular expression of 'regexp_extract'")
    assert " --> job.flow:3:32\n" in done.stderr
    assert not (tmp_path / ".flowc-checkpoints").exists()
    assert "Spark" not in done.stdout and "WARN" not in done.stderr
    print(f"flowc {command} --untrusted refused after {elapsed:.1f} s")


def test_the_query_whose_task_ended_the_jvm_is_read_from_sparks_log(tmp_path: Path) -> None:
    """With several queries, the INSERT under the caret is the one whose task (its TID)
    Spark's log says was lost when the uncaught StackOverflowError ended the JVM."""
    text = (
        "CREATE SOURCE s (v STRING) WITH (connector = 'files', path = 'in', format = 'json');\n"
        "CREATE SINK a WITH (connector = 'console');\n"
        "CREATE SINK b WITH (connector = 'console');\n"
        "INSERT INTO a FROM s |> SELECT v;\n"
        "INSERT INTO b FROM s |> SELECT regexp_extract(v, '(a|b)*c', 0) AS w;\n"
    )
    compiled = flowc.compile(text, "job.flow", for_spark=True)
    log = tmp_path / "spark.log"
    log.write_text(
        "26/11/28 08:08:18 ERROR SparkUncaughtExceptionHandler: Uncaught exception in thread "
        "Thread[Executor task launch worker for task 0.0 in stage 3.0 (TID 7),5,main]\n"
        "java.lang.StackOverflowError\n\tat java.base/java.util.regex.Pattern$Loop.match\n"
        "26/11/28 08:08:18 WARN TaskSetManager: [queryId = 1111a] [batchId = 0] Lost task 0.0 "
        "in stage 2.0 (TID 6) (host executor driver): TaskKilled\n"
        "26/11/28 08:08:18 WARN TaskSetManager: [queryId = 2222b] [batchId = 0] Lost task 0.0 "
        "in stage 3.0 (TID 7) (host executor driver): java.lang.StackOverflowError\n",
        encoding="utf-8",
    )
    queries = [StartedQuery("a", "1111a-0", "r1"), StartedQuery("b", "2222b-0", "r2")]
    diagnostic = jvm_ended(compiled, 50, queries, str(log), None)
    assert diagnostic.code == "E0807"
    assert (diagnostic.span.line, diagnostic.span.column) == (5, 1)
    assert diagnostic.message == (
        "Spark's JVM ended (exit code 50) while query 'b' ran: java.lang.StackOverflowError"
    )
    assert diagnostic.help is not None and "-Xss64m" in diagnostic.help
    unknown = jvm_ended(compiled, 52, queries, None, None)
    assert unknown.message == "Spark's JVM ended (exit code 52) while the job ran"
    assert unknown.span == compiled.program.span


class _GatewayOf:
    """A py4j gateway client whose JVM answers ``answers`` times, then has ended."""

    def __init__(self, answers: int) -> None:
        self.answers = answers

    def send_command(self, command: str) -> str:
        if self.answers == 0:
            raise ConnectionRefusedError(111, "Connection refused")
        self.answers -= 1
        return "ysjava.lang.StackOverflowError"  # py4j's answer: a string


def _java_error(answers: int) -> BaseException:
    from py4j.protocol import Py4JJavaError

    class JavaObject:
        _target_id = "o42"
        _gateway_client = _GatewayOf(answers)

    return Py4JJavaError("An error occurred while calling o41.save.\n", JavaObject())


def test_a_java_error_is_read_while_the_jvm_answers_and_kept() -> None:
    """py4j reads a Py4JJavaError's text from the JVM each time it is printed, and a task's
    fatal error ends the JVM just after the call failed: printing the failure then raised
    ConnectionRefusedError and ``flowc run`` crashed (exit 101, seen in CI). flowc reads the
    text once, and when the JVM has already ended keeps py4j's own message, read as the
    JVM having ended."""
    from flowc.runtime.failures import JavaErrorText, JavaTextLost, readable
    from flowc.runtime.run import _connection_lost, _fatal_in_task

    with pytest.raises(ConnectionRefusedError):
        str(_java_error(answers=0))  # py4j's own behaviour, which the fix is for
    read = readable(_java_error(answers=1))
    assert isinstance(read, JavaErrorText) and not isinstance(read, JavaTextLost)
    first = str(read)
    assert first.endswith("java.lang.StackOverflowError") and str(read) == first
    assert _fatal_in_task(read)  # the JVM is about to end: flowc waits for it
    lost = readable(_java_error(answers=0))
    assert isinstance(lost, JavaTextLost) and _connection_lost(lost)
    assert str(lost).startswith("An error occurred while calling o41.save.")
    plain = RuntimeError("[DIVIDE_BY_ZERO] Division by zero.")
    assert readable(plain) is plain and not _fatal_in_task(plain)
    assert not _fatal_in_task(RuntimeError("org.apache.spark.memory.SparkOutOfMemoryError"))


def test_a_stopped_spark_context_is_read_as_the_jvm_ending() -> None:
    """The JVM ending can answer a call before its connection breaks: the query's cleanup
    then fails on a stopped SparkContext (CI saw this message once in a run of the test
    above). flowc waits for the JVM then, instead of reporting an unlocated E0804; any
    other error is not read so."""
    from flowc.runtime.run import _context_stopped

    seen = RuntimeError(
        'Cannot invoke "org.apache.spark.scheduler.DAGScheduler.cleanupQueryJobs(long)" '
        'because the return value of "org.apache.spark.SparkContext.dagScheduler()" is null'
    )
    assert _context_stopped(seen)
    assert not _context_stopped(RuntimeError("[DIVIDE_BY_ZERO] Division by zero."))
