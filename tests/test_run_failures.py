"""A query that fails on Spark is exit 1 and one flowc diagnostic, never a crash of flowc.

E0802: an expression failed at run time (caret under it); E0803: the checkpoint does not
fit the query any more; E0804: any other failure of Spark. Spark's own output (log4j
lines, progress bars, Java stack traces) goes to a log file the diagnostic names, unless
``--verbose``. Each ``flowc run`` subprocess starts a JVM, so there are only three.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import flowc
from flowc.cli.main import main as flowc_main
from flowc.runtime.failures import (
    CHECKPOINT_INCOMPATIBLE,
    EXPRESSION_FAILED,
    SPARK_FAILED,
    SparkError,
    explain,
)
from flowc.runtime.run import run_job
from flowc.spark.codegen import generate_pyspark

CAST_JOB = """\
SET parallelism = 1;
CREATE SOURCE pay (user STRING, amount STRING)
  WITH (connector = 'files', path = 'in', format = 'json');
CREATE SINK out WITH (connector = 'files', path = 'out', format = 'json');
INSERT INTO out
  FROM pay
  |> WHERE user <> ''
  |> SELECT user, CAST(amount AS INT) + 1 AS n;
"""
#: Where the failing cast is in CAST_JOB: line 8, from column 19.
CAST_LINE = "  |> SELECT user, CAST(amount AS INT) + 1 AS n;"

#: What Spark's own output looks like on a terminal: log4j lines, stack traces, progress.
SPARK_NOISE = re.compile(
    r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (?:INFO|WARN|ERROR) |\tat |^java\.lang\.|log4j|\[Stage \d",
    re.M,
)


def write_cast_job(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "in").mkdir()
    rows = [{"user": "a", "amount": "1"}, {"user": "b", "amount": "x"}]
    (folder / "in" / "a.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (folder / "job.flow").write_text(CAST_JOB, encoding="utf-8")


def flowc_run(folder: Path, *options: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "flowc", "run", "job.flow", "--available-now", *options]
    return subprocess.run(
        command, cwd=folder, capture_output=True, text=True, timeout=900, check=False
    )


def assert_cast_diagnostic(stderr: str) -> None:
    assert "error[E0802]: query 'out' failed: [CAST_INVALID_INPUT] The value 'x'" in stderr
    assert " --> job.flow:8:19\n" in stderr
    assert f"8 | {CAST_LINE}\n" in stderr
    caret = " " * (CAST_LINE.index("CAST") + 1) + "^" * len("CAST(amount AS INT)")
    assert f"  |{caret}\n" in stderr


def test_a_runtime_cast_failure_is_a_diagnostic_and_spark_output_goes_to_a_log(
    tmp_path: Path,
) -> None:
    write_cast_job(tmp_path)
    result = flowc_run(tmp_path)
    assert result.returncode == 1, result.stderr[-3000:]
    assert_cast_diagnostic(result.stderr)
    assert SPARK_NOISE.search(result.stderr) is None, result.stderr[-3000:]
    assert SPARK_NOISE.search(result.stdout) is None, result.stdout[-3000:]
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    found = re.search(r"Spark's log and stack trace: (\S+\.log)", result.stderr)
    assert found is not None, result.stderr
    log = tmp_path / found.group(1)
    assert log.parent == tmp_path / ".flowc-checkpoints" / ".flowc-logs"
    text = log.read_text(encoding="utf-8")
    assert "CAST_INVALID_INPUT" in text
    assert "\tat org.apache.spark" in text  # the Java stack trace, kept for a bug report
    assert "WARN" in text  # and Spark's log lines


def test_verbose_shows_sparks_own_output(tmp_path: Path) -> None:
    write_cast_job(tmp_path)
    result = flowc_run(tmp_path, "--verbose")
    assert result.returncode == 1, result.stderr[-3000:]
    assert SPARK_NOISE.search(result.stderr) is not None, result.stderr[-3000:]
    assert_cast_diagnostic(result.stderr)
    assert "Traceback" not in result.stderr


def test_the_generated_program_alone_reports_a_failure_without_a_traceback(
    tmp_path: Path,
) -> None:
    write_cast_job(tmp_path)
    job = flowc.compile(CAST_JOB, str(tmp_path / "job.flow"), for_spark=True)
    (tmp_path / "job.py").write_text(generate_pyspark(job), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "job.py", "--available-now", "--master", "local[1]"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    last = result.stderr[result.stderr.rindex("error: ") :]
    assert last.startswith("error: [CAST_INVALID_INPUT] The value 'x'"), last
    assert "CAST(`amount` AS INT) + 1" in last  # Spark's SQL context, no stack trace
    assert "\tat " not in last


COUNTS = """\
SET parallelism = 2;
CREATE SOURCE pay (user STRING, k INT)
  WITH (connector = 'files', path = 'in', format = 'json');
CREATE SINK totals WITH (connector = 'memory', mode = 'complete');
INSERT INTO totals
  FROM pay
  |> KEY BY user
  |> AGGREGATE count(*) AS n;
"""


def test_a_checkpoint_the_changed_query_cannot_use_is_E0803(
    spark: Any, tmp_path: Path, capfd: Any
) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.json").write_text('{"user": "a", "k": 1}\n{"user": "b", "k": 2}\n')
    flow = tmp_path / "job.flow"
    flow.write_text(COUNTS, encoding="utf-8")
    job = flowc.compile(COUNTS, str(flow), for_spark=True)
    first = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
    assert [q.error for q in first.queries] == [None]
    # flowc's restart guard would refuse the edit before Spark starts (E0820, tested in
    # test_state_guard.py); without what it reads, a checkpoint from plain Spark or an
    # older flowc, only Spark can tell, at run time.
    checkpoints = tmp_path / ".flowc-checkpoints"
    for path in [*checkpoints.rglob("_flowc_state.json"), *checkpoints.rglob("_metadata/metadata")]:
        path.unlink()
    # The key's type changes (STRING user to INT k); new input makes Spark run a batch.
    flow.write_text(COUNTS.replace("KEY BY user", "KEY BY k"), encoding="utf-8")
    (tmp_path / "in" / "b.json").write_text('{"user": "c", "k": 3}\n')
    capfd.readouterr()
    code = flowc_main(["run", str(flow), "--available-now", "--color", "never"])
    err = capfd.readouterr().err
    assert code == 1, err
    assert "error[E0803]: query 'totals' failed: [STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE]" in err
    assert f" --> {flow}:8:6\n" in err  # the AGGREGATE, whose state it is
    assert "run with a new --checkpoint-dir" in err
    assert "at org.apache" not in err and "Traceback" not in err
    assert not spark.streams.active


# ---------------------------------------------------------------- without Spark

STREAM_FAILED = """\
[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: \
[DIVIDE_BY_ZERO] Division by zero. Use `try_divide` to tolerate divisor being 0 and \
return NULL instead. SQLSTATE: 22012
== SQL (line 1, position 13) ==
`amount` + (`amount` / `k`)
            ^^^^^^^^^^^^^^

=== Streaming Query ===
Identifier: out [id = 1, runId = 2]
"""

DIVIDE_JOB = """\
CREATE SOURCE pay (user STRING, amount BIGINT, k BIGINT)
  WITH (connector = 'files', path = 'in', format = 'json');
CREATE SINK out WITH (connector = 'files', path = 'out', format = 'json');
CREATE VIEW v AS FROM pay |> WHERE k >= 0;
INSERT INTO out FROM v |> EXTEND amount + (amount / k) AS ratio;
"""


def test_spark_error_text_is_read_for_class_message_and_failed_sql() -> None:
    read = SparkError.of(STREAM_FAILED)
    assert read.error_class == "DIVIDE_BY_ZERO"
    assert read.headline.startswith("[DIVIDE_BY_ZERO] Division by zero.")
    assert read.sql == ("`amount` + (`amount` / `k`)", 12, "`amount` / `k`")
    assert not read.checkpoint_incompatible


def test_a_failed_expression_is_placed_at_its_part_in_the_flow_file() -> None:
    job = flowc.compile(DIVIDE_JOB, "job.flow", for_spark=True)
    diagnostic = explain(job, "out", RuntimeError(STREAM_FAILED), "/tmp/x.log")
    assert diagnostic is not None and diagnostic.code == EXPRESSION_FAILED
    line = DIVIDE_JOB.splitlines()[4]
    column = line.index("amount / k") + 1
    span = diagnostic.span
    assert (span.line, span.column, span.end_column) == (5, column, column + len("amount / k"))
    assert diagnostic.help is not None and "/tmp/x.log" in diagnostic.help


def test_other_failures_point_at_the_insert_and_checkpoint_ones_are_E0803() -> None:
    job = flowc.compile(DIVIDE_JOB, "job.flow", for_spark=True)
    other = explain(job, "out", RuntimeError("java.io.IOException: disk full"), None)
    assert other is not None and other.code == SPARK_FAILED
    assert other.message == "query 'out' failed: disk full"
    assert (other.span.line, other.span.column) == (5, 1)
    legacy = RuntimeError(
        "This query does not support recovering from checkpoint location. Delete /x to start over."
    )
    refused = explain(job, "out", legacy, None)
    assert refused is not None and refused.code == CHECKPOINT_INCOMPATIBLE
    assert explain(job, None, legacy, None) is None  # no query: no place in the file


TOP_JOB = """\
SET parallelism = 1;
CREATE SOURCE bids (auction BIGINT, price BIGINT)
  WITH (connector = 'files', path = 'in', format = 'json');
CREATE SINK out WITH (connector = 'files', path = 'out', format = 'json', mode = 'update',
  key = 'auction, rank');
INSERT INTO out FROM bids |> WHERE price > 0
  |> TOP 2 BY price DESC PER auction AS rank;
"""


def test_a_checkpoint_a_changed_top_cannot_use_is_placed_at_the_top() -> None:
    """The stateful steps E0803 can point at are the compiler's own list (STATEFUL_STEPS),
    TOP among them: the caret is under the TOP, not the INSERT."""
    job = flowc.compile(TOP_JOB, "job.flow", for_spark=True)
    changed = RuntimeError(
        "This query does not support recovering from checkpoint location. Delete /x to start over."
    )
    diagnostic = explain(job, "out", changed, None)
    assert diagnostic is not None and diagnostic.code == CHECKPOINT_INCOMPATIBLE
    line = TOP_JOB.splitlines()[6]
    assert (diagnostic.span.line, diagnostic.span.column) == (7, line.index("TOP") + 1)


PY4J_AFTER_THE_JVM_ENDED = """
import logging, sys
import py4j.java_gateway
from flowc.runtime.failures import py4j_to_log

py4j_to_log(sys.argv[1])
# What GatewayClient.send_command runs on a call into the ended JVM: the root logger's
# logging.exception, from py4j's own file.
code = "try:\\n    raise ConnectionResetError(104, 'reset')\\nexcept OSError:\\n" \\
    "    logging.exception('Exception while sending command.')\\n"
exec(compile(code, py4j.java_gateway.__file__, "exec"), {"logging": logging})
logging.error("not py4j's")
"""


def test_py4js_tracebacks_after_the_jvm_ended_go_to_the_log(tmp_path: Path) -> None:
    """Once E0807 is said, py4j's root-logger tracebacks of later calls into the ended JVM
    are written to Spark's log, not the terminal; other log records are untouched."""
    log = tmp_path / "spark.log"
    done = subprocess.run(
        [sys.executable, "-c", PY4J_AFTER_THE_JVM_ENDED, str(log)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert "sending command" not in done.stderr
    assert "not py4j's" in done.stderr
    text = log.read_text(encoding="utf-8")
    assert "Exception while sending command." in text
    assert "Traceback" in text and "ConnectionResetError" in text
