"""Inputs that crashed flowc (exit 101), hung it or lost rows (issue 10, item 5).

Each is now a clear exit 1 (a problem in the program) or 2 (a usage or file problem) with
a message and no traceback. Behaviour that belongs to the process (stdout on a full disk,
a FIFO, /dev/zero) runs ``python -m flowc`` in a subprocess; the rest calls ``main``.
"""

from __future__ import annotations

import ast as pyast
import contextlib
import io
import json
import os
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc.cli import input as cli_input
from flowc.cli import main as cli
from flowc.cli.main import main
from flowc.runtime.ownership import CHECKPOINT_MARKER, SINK_MARKER, check_sink_ownership
from flowc.spark.codegen import generate_pyspark
from flowc.syntax.overrides import COMMAND_LINE

CLEAN = """\
CREATE SOURCE s (k BIGINT) WITH (connector = 'datagen', number_of_rows = 3);
CREATE SINK o WITH (connector = 'noop');
INSERT INTO o FROM s |> WHERE k >= 0;
"""

HAS_DEV_FULL = os.path.exists("/dev/full")
needs_dev_full = pytest.mark.skipif(not HAS_DEV_FULL, reason="no /dev/full on this system")


def _write(folder: Path, text: str, name: str = "job.flow") -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def _flowc(
    *args: str, cwd: Path, stdout: Any = subprocess.PIPE
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "flowc", *args],
        cwd=cwd,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=120,
        check=False,
    )


def _no_traceback(err: str) -> None:
    assert "Traceback" not in err
    assert "internal error" not in err
    assert "Exception ignored" not in err


# ---------------------------------------------------------------- 1. control characters


@pytest.mark.parametrize(("written", "code_point"), [("\\0", "U+0000")])
def test_control_character_in_job_name_is_refused_at_the_setting(
    written: str, code_point: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, f"SET job.name = 'a{written}b';\n" + CLEAN)
    assert main(["check", str(path)]) == 1
    err = capsys.readouterr().err
    assert f"error[E0413]: job.name contains the control character {code_point}" in err
    assert f"{path}:1:16" in err  # at the value
    assert main(["compile", str(path), "--emit", "pyspark"]) == 1
    _no_traceback(capsys.readouterr().err)


@pytest.mark.parametrize("name", ["tab\there.flow", "bell\x07\x1b[31m.flow", "del\x7f.flow"])
def test_control_characters_in_the_file_name_make_a_valid_program(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The job is named after the file: its name reaches the program's docstrings."""
    path = _write(tmp_path, CLEAN, name)
    assert main(["compile", str(path), "--emit", "pyspark"]) == 0
    program = capsys.readouterr().out
    compile(program, "job.py", "exec")
    docstring = pyast.get_docstring(pyast.parse(program), clean=False) or ""
    assert docstring.startswith(f"{path.stem}: a PySpark")


# ---------------------------------------------------------------- 2. non-UTF-8 file names

NOT_UTF8 = os.fsdecode(b"job\xff.flow")


@pytest.mark.skipif(sys.platform == "win32", reason="Windows file names are UTF-16")
def test_file_name_that_is_not_utf8_checks_and_compiles(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, CLEAN, NOT_UTF8)
    assert main(["check", str(path)]) == 0
    for stage in ("ast", "transformations", "streamgraph", "jobgraph", "physical", "pyspark"):
        assert main(["compile", str(path), "--emit", stage]) == 0, stage
        out = capsys.readouterr().out
        assert stage == "ast" or "job\\udcff" in out, stage  # the job is named after the file
    assert main(["compile", str(path), "--emit", "jobgraph", "--format", "json"]) == 0
    assert "job\\udcff" in json.dumps(json.loads(capsys.readouterr().out))
    assert main(["compile", str(path), "--emit", "all", "-o", str(tmp_path / "all")]) == 0
    program = (tmp_path / "all" / "pyspark.py").read_text(encoding="utf-8")
    compile(program, "job.py", "exec")
    for output in (tmp_path / "all").iterdir():
        output.read_text(encoding="utf-8")  # every output is valid UTF-8
    broken = _write(tmp_path, CLEAN.replace("k >= 0", "missing > 0"), NOT_UTF8)
    assert main(["check", str(broken)]) == 1
    err = capsys.readouterr().err
    assert "E0201" in err and "job\\udcff.flow:3:" in err


@pytest.mark.skipif(sys.platform == "win32", reason="Windows file names are UTF-16")
def test_file_name_that_is_not_utf8_on_stdout_of_a_process(tmp_path: Path) -> None:
    _write(tmp_path, CLEAN, NOT_UTF8)
    result = _flowc("compile", NOT_UTF8, "--emit", "transformations", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "job\\udcff" in result.stdout


@pytest.mark.skipif(sys.platform == "win32", reason="Windows file names are UTF-16")
def test_file_name_that_is_not_utf8_is_refused_by_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """py4j sends UTF-8 only: the job's name (the file's stem) cannot reach Spark."""
    path = _write(tmp_path, CLEAN, NOT_UTF8)
    assert main(["run", str(path), "--available-now"]) == 2
    err = capsys.readouterr().err
    assert "not valid UTF-8" in err and "SET job.name" in err
    _no_traceback(err)


def test_job_id_of_utf8_names_is_unchanged_and_any_name_has_one() -> None:
    from flowc.flink.murmur import murmur3_x64_128

    job = flowc.compile("SET job.name = 'jöb';\n" + CLEAN, "job.flow")
    graph = job.stream_graph
    seed = "|".join(graph.operator_id(n) for n in sorted(graph.nodes)).encode()
    expected = murmur3_x64_128("jöb".encode() + b"\0" + seed).hex()
    assert job.job_graph.job_id == expected
    other = flowc.compile(CLEAN, NOT_UTF8)
    assert len(other.job_graph.job_id) == 32


# ---------------------------------------------------------------- 3. a full disk


@needs_dev_full
@pytest.mark.parametrize(
    "args",
    [
        ("compile", "job.flow", "--emit", "jobgraph"),
        ("compile", "job.flow", "--emit", "pyspark"),
        ("check", "job.flow", "--format", "json"),
    ],
    ids=["jobgraph", "pyspark", "check-json"],
)
def test_stdout_on_a_full_disk(args: tuple[str, ...], tmp_path: Path) -> None:
    _write(tmp_path, CLEAN)
    with open("/dev/full", "w") as full:
        result = _flowc(*args, cwd=tmp_path, stdout=full)
    assert result.returncode == 2, result.stderr
    assert "error: cannot write to standard output: No space left on device" in result.stderr
    _no_traceback(result.stderr)


@needs_dev_full
def test_output_file_on_a_full_disk(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, CLEAN)
    assert main(["compile", str(path), "--emit", "jobgraph", "-o", "/dev/full"]) == 2
    err = capsys.readouterr().err
    assert "error: /dev/full: cannot write: No space left on device" in err


def test_a_reader_that_leaves_is_not_an_error(tmp_path: Path) -> None:
    """`flowc compile ... | head -1`: exit 0 and nothing on stderr at exit."""
    path = _write(tmp_path, CLEAN)
    process = subprocess.Popen(
        [sys.executable, "-m", "flowc", "compile", str(path), "--emit", "physical"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # the reader leaves at once
    err = process.stderr.read().decode()
    assert process.wait(timeout=120) == 0, err
    _no_traceback(err)


@pytest.mark.parametrize("where", ["folder", "missing", "missing-parent"])
def test_report_path_is_checked_before_the_job_runs(
    where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, CLEAN)
    report = {
        "folder": tmp_path,
        "missing": tmp_path / "no" / "report.json",
        "missing-parent": tmp_path / "job.flow" / "report.json",
    }[where]
    assert main(["run", str(path), "--available-now", "--report", str(report)]) == 2
    err = capsys.readouterr().err
    assert f"--report {report}" in err
    _no_traceback(err)


@needs_dev_full
def test_report_on_a_full_disk(
    tmp_path: Path, spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, CLEAN)
    args = ["run", str(path), "--available-now", "--master", "local[2]"]
    assert main([*args, "--report", "/dev/full"]) == 2
    err = capsys.readouterr().err
    assert "error: --report /dev/full: cannot write: No space left on device" in err
    _no_traceback(err)


# ---------------------------------------------------------------- 4. --emit all -o DIR


def test_emit_all_where_an_output_is_a_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, CLEAN)
    (tmp_path / "out" / "jobgraph.txt").mkdir(parents=True)
    assert main(["compile", str(path), "--emit", "all", "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"error: {tmp_path / 'out' / 'jobgraph.txt'}: cannot write: is a directory" in err
    _no_traceback(err)


def test_emit_all_into_a_file_and_output_into_a_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, CLEAN)
    assert main(["compile", str(path), "--emit", "all", "-o", str(path)]) == 2
    assert "cannot create: a file is in the way; -o DIR is a folder" in capsys.readouterr().err
    assert main(["compile", str(path), "--emit", "ast", "-o", str(tmp_path)]) == 2
    assert f"{tmp_path}: cannot write: is a directory" in capsys.readouterr().err


# ---------------------------------------------------------------- 5, 6. files that never end


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
@pytest.mark.parametrize("command", ["check", "compile", "run"])
def test_dev_zero_is_refused(command: str, tmp_path: Path) -> None:
    result = _flowc(command, "/dev/zero", cwd=tmp_path)
    assert result.returncode == 2
    assert "/dev/zero: is a character device, not a regular file" in result.stderr
    _no_traceback(result.stderr)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
def test_fifo_without_a_writer_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = tmp_path / "job.flow"
    os.mkfifo(fifo)
    result = _flowc("check", str(fifo), cwd=tmp_path)  # would block forever on open()
    assert result.returncode == 2
    assert f"{fifo}: is a named pipe (FIFO), not a regular file" in result.stderr


def test_file_larger_than_the_bound_is_refused_before_it_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 50 MB literal: refused from its size, without reading 50 MB into memory."""
    path = tmp_path / "big.flow"
    with path.open("w", encoding="utf-8") as handle:
        handle.write("SET job.name = '" + "x" * 50_000_000 + "';\n")
    assert main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: larger than 16 MiB, the most flowc reads" in err
    assert cli.MAX_SOURCE_BYTES == 16 * 1024 * 1024


def test_read_source_reads_at_most_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file that grows after its size was looked at is still cut at the bound."""
    monkeypatch.setattr(cli_input, "MAX_SOURCE_BYTES", 10)
    path = tmp_path / "job.flow"
    path.write_bytes(b"-- 1234567")  # 10 bytes: read
    assert cli.read_source(str(path)) == "-- 1234567"
    real_stat = os.stat

    def stale_stat(target: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        found = real_stat(target, *args, **kwargs)
        if str(target) == str(path):  # as if looked at before it grew
            fields = list(found)
            fields[stat.ST_SIZE] = 5
            return os.stat_result(fields)
        return found

    path.write_bytes(b"-- 12345678")  # 11 bytes
    monkeypatch.setattr(os, "stat", stale_stat)
    with pytest.raises(cli.UsageError, match="larger than"):
        cli.read_source(str(path))


# ---------------------------------------------------------------- 7. unwritable sink folders

FILES_JOB = """\
SET job.name = 'first';
CREATE SOURCE s (id BIGINT, name STRING)
  WITH (connector = 'files', path = 'data/in', format = 'json');
CREATE SINK o WITH (connector = 'files', path = '{path}', format = 'json');
INSERT INTO o FROM s;
"""


def _files_job(folder: Path, sink_path: str = "out/o", job_name: str = "first") -> Path:
    (folder / "data" / "in").mkdir(parents=True, exist_ok=True)
    text = FILES_JOB.format(path=sink_path).replace("'first'", f"'{job_name}'")
    return _write(folder, text)


def _compiled(path: Path) -> flowc.CompiledJob:
    return flowc.compile(path.read_text(encoding="utf-8"), str(path), for_spark=True)


def _refusal(path: Path, checkpoints: Path | None = None) -> list[flowc.Diagnostic]:
    job = _compiled(path)
    root = checkpoints or path.parent / ".flowc-checkpoints"
    with pytest.raises(flowc.CompileError) as raised:
        check_sink_ownership(job, str(root), str(path.parent))
    return list(raised.value.diagnostics)


def test_sink_under_a_regular_file_is_refused_at_its_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _files_job(tmp_path, "job.flow/out")
    (diagnostic,) = _refusal(path)
    assert diagnostic.code == "E0813"
    assert "job.flow is a file, not a folder" in diagnostic.message
    assert (diagnostic.span.line, diagnostic.span.column) == (4, 49)
    assert main(["run", str(path), "--available-now"]) == 1  # before Spark starts
    err = capsys.readouterr().err
    assert "error[E0813]: sink 'o' cannot write to" in err
    assert f"--> {path}:4:49" in err
    _no_traceback(err)


def test_sink_path_given_with_set_is_refused_at_the_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The path a ``--set`` gave is the one refused: the caret is under that --set on the
    command line, not under the path the file wrote."""
    path = _files_job(tmp_path)
    overrides = {"o.path": "job.flow/out"}
    job = flowc.compile(
        path.read_text(encoding="utf-8"), str(path), for_spark=True, overrides=overrides
    )
    with pytest.raises(flowc.CompileError) as raised:
        check_sink_ownership(job, str(tmp_path / ".flowc-checkpoints"), str(tmp_path))
    (diagnostic,) = raised.value.diagnostics
    assert diagnostic.code == "E0813"
    assert diagnostic.span.file == COMMAND_LINE
    assert main(["run", str(path), "--available-now", "--set", "o.path=job.flow/out"]) == 1
    err = capsys.readouterr().err
    assert "error[E0813]: sink 'o' cannot write to" in err
    assert "--> <command line>:1:" in err and "o.path=job.flow/out" in err
    _no_traceback(err)


@pytest.mark.skipif(
    sys.platform == "win32" or os.geteuid() == 0, reason="root writes read-only folders"
)
def test_sink_under_a_read_only_folder_is_refused(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        (diagnostic,) = _refusal(_files_job(tmp_path, "locked/out"))
    finally:
        locked.chmod(0o755)
    assert diagnostic.code == "E0813"
    assert "no permission to write in" in diagnostic.message


def test_checkpoint_under_a_regular_file_is_refused(tmp_path: Path) -> None:
    path = _files_job(tmp_path)
    (diagnostic,) = _refusal(path, checkpoints=path / "checkpoints")
    assert diagnostic.code == "E0814"
    assert "--checkpoint-dir" in (diagnostic.help or "")


def test_two_file_sinks_in_one_folder_are_refused(tmp_path: Path) -> None:
    (tmp_path / "data" / "in").mkdir(parents=True)
    path = _write(
        tmp_path,
        "CREATE SOURCE s (id BIGINT) WITH (connector = 'files', path = 'data/in', "
        "format = 'json');\n"
        "CREATE SINK a WITH (connector = 'files', path = 'out', format = 'json');\n"
        "CREATE SINK b WITH (connector = 'files', path = './out', format = 'json');\n"
        "INSERT INTO a FROM s;\nINSERT INTO b FROM s;\n",
    )
    (diagnostic,) = _refusal(path)
    assert diagnostic.code == "E0815"
    assert diagnostic.span.line == 3


# ---------------------------------------------------------------- 8. Kafka options

KAFKA = """\
CREATE SOURCE events (key STRING, value STRING)
  WITH (connector = 'kafka', topic = 'events', bootstrap_servers = 'broker:9092',
        starting_offsets = 'earliest', fail_on_data_loss = false,
        max_offsets_per_trigger = 1000, kafka.security.protocol = 'SSL',
        kafka.ssl.truststore.location = '/etc/kafka/trust.jks');
CREATE SINK copy WITH (connector = 'kafka', topic = 'copy', bootstrap_servers = 'broker:9092',
                       kafka.security.protocol = 'SASL_SSL', kafka.sasl.mechanism = 'PLAIN');
INSERT INTO copy FROM events;
"""


def test_kafka_options_reach_spark_under_its_names() -> None:
    program = generate_pyspark(flowc.compile(KAFKA, "kafka.flow", for_spark=True))
    compile(program, "job.py", "exec")
    source = program[program.index("readStream.format('kafka')") :]
    source = source[: source.index(".load())")]
    for option in (
        ".option('startingOffsets', 'earliest')",
        ".option('failOnDataLoss', 'false')",
        ".option('maxOffsetsPerTrigger', '1000')",
        ".option('kafka.security.protocol', 'SSL')",
        ".option('kafka.ssl.truststore.location', '/etc/kafka/trust.jks')",
    ):
        assert option in source, option
    sink = program[program.index("writer.format('kafka')") :]
    sink = sink[: sink.index("writer.start()")]
    assert "writer.option('kafka.security.protocol', 'SASL_SSL')" in sink
    assert "writer.option('kafka.sasl.mechanism', 'PLAIN')" in sink
    assert "failOnDataLoss" not in sink  # a reader's option: Spark's writer has none


# ---------------------------------------------------------------- 9. who owns a sink's folder


def _fake_log(folder: Path, batches: int) -> None:
    log = folder / "_spark_metadata"
    log.mkdir(parents=True, exist_ok=True)
    for batch in range(batches):
        (log / str(batch)).write_text("v1\n", encoding="utf-8")


def test_log_without_any_checkpoint_is_refused(tmp_path: Path) -> None:
    path = _files_job(tmp_path)
    _fake_log(tmp_path / "out" / "o", 3)  # another Spark job's folder
    (diagnostic,) = _refusal(path)
    assert diagnostic.code == "E0812"
    assert "batches 0 to 2" in diagnostic.message
    assert "skip the first 3 batches" in (diagnostic.help or "")


def test_deleted_checkpoint_with_the_log_left_is_refused(tmp_path: Path) -> None:
    path = _files_job(tmp_path)
    job = _compiled(path)
    checkpoints = tmp_path / ".flowc-checkpoints"
    check_sink_ownership(job, str(checkpoints), str(tmp_path))  # the first run's markers
    marker = json.loads((tmp_path / "out" / "o" / SINK_MARKER).read_text(encoding="utf-8"))
    assert marker == {
        "job": "first",
        "sink": "o",
        "checkpoint": str(checkpoints / "first" / "o"),
        "file": str(path),
    }
    query = json.loads((checkpoints / "first" / "o" / CHECKPOINT_MARKER).read_text())
    assert query["sink"] == "o" and query["folder"] == str(tmp_path / "out" / "o")
    _fake_log(tmp_path / "out" / "o", 2)
    (diagnostic,) = _refusal(path)  # the checkpoint has no batch: as if deleted
    assert diagnostic.code == "E0811"
    assert "is gone" in diagnostic.message


def test_checkpoint_that_has_every_logged_batch_runs_on(tmp_path: Path) -> None:
    path = _files_job(tmp_path)
    checkpoints = tmp_path / ".flowc-checkpoints"
    check_sink_ownership(_compiled(path), str(checkpoints), str(tmp_path))
    _fake_log(tmp_path / "out" / "o", 2)
    (checkpoints / "first" / "o" / "offsets").mkdir()
    (checkpoints / "first" / "o" / "offsets" / "1").write_text("v1\n")
    check_sink_ownership(_compiled(path), str(checkpoints), str(tmp_path))  # a restart


def _rows(folder: Path) -> list[dict[str, Any]]:
    rows = []
    for part in sorted(folder.glob("part-*.json")):
        rows += [json.loads(line) for line in part.read_text(encoding="utf-8").splitlines()]
    return sorted(rows, key=lambda r: r["id"])


def test_renamed_job_is_refused_not_rows_lost(
    tmp_path: Path, spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Run a job writing 3 rows, rename job.name, add 2 rows: flowc refuses the run (it
    would write nothing); with the old name restored, the 2 rows are written."""
    from flowc.runtime.run import run_job

    def run(path: Path) -> None:
        report = run_job(_compiled(path), available_now=True, master="local[2]", out=io.StringIO())
        assert [q.error for q in report.queries] == [None]

    inputs = tmp_path / "data" / "in"
    path = _files_job(tmp_path)
    (inputs / "1.json").write_text(
        "".join(json.dumps({"id": i, "name": f"n{i}"}) + "\n" for i in (1, 2, 3))
    )
    run(path)
    assert [r["id"] for r in _rows(tmp_path / "out" / "o")] == [1, 2, 3]

    path = _files_job(tmp_path, job_name="renamed")
    (inputs / "2.json").write_text(
        "".join(json.dumps({"id": i, "name": f"n{i}"}) + "\n" for i in (4, 5))
    )
    assert main(["run", str(path), "--available-now", "--master", "local[2]"]) == 1
    err = capsys.readouterr().err
    assert "error[E0810]: job.name is now 'renamed', not 'first'" in err
    assert f"--> {path}:1:5" in err  # at the setting
    assert "restore job.name = 'first'" in err
    _no_traceback(err)
    assert not (tmp_path / ".flowc-checkpoints" / "renamed").exists()  # Spark never started

    run(_files_job(tmp_path, job_name="first"))  # the old name: its checkpoint goes on
    assert [r["id"] for r in _rows(tmp_path / "out" / "o")] == [1, 2, 3, 4, 5]


# ------------------------------------------------------------ 8. nesting (issue 25, item 7)

NEST_HEADER = (
    "CREATE SOURCE s (k BIGINT, x BIGINT, b BOOLEAN) WITH (connector = 'datagen');\n"
    "CREATE SINK o WITH (connector = 'console');\n"
)


def _struct(depth: int) -> str:
    text = "BIGINT"
    for _ in range(depth):
        text = f"STRUCT<a {text}>"
    return text


def _where(condition: str) -> str:
    return NEST_HEADER + f"INSERT INTO o FROM s |> WHERE {condition};\n"


def _select(expression: str) -> str:
    return NEST_HEADER + f"INSERT INTO o FROM s |> SELECT {expression} AS y;\n"


def _alternating(terms: int) -> str:
    return "x > 1" + "".join(f" {'+-'[i % 2]} {i}" for i in range(terms))


#: Each kind of nesting, far past its bound (and a few of them past the stack): programs
#: that crashed with exit 101, or took hours, before the bounds (docs/limits.md).
TOO_DEEP = {
    "brackets": _where("(" * 20_000 + "k > 1" + ")" * 20_000),
    "unary minus": _select("- " * 3000 + "x"),
    "unary minus unspaced in brackets": _select("-(" * 1000 + "x" + ")" * 1000),
    "NOT": _where("NOT " * 3000 + "b"),
    "IS NOT NULL chain": _where("x IS NOT NULL" + " = true IS NOT NULL" * 500),
    "BETWEEN chain": _where("x" + " BETWEEN 1 AND 2" * 500),
    "alternating + and -": _where(_alternating(2000)),
    "cast chain": _select("x" + "::BIGINT" * 500),
    "CASE": _select("CASE WHEN x > 1 THEN " * 300 + "x" + " END" * 300),
    "function calls": _select("abs(" * 300 + "x" + ")" * 300),
    "type names called": _select("date(" * 30 + "x" + ")" * 30),
    "struct calls": _select("struct(" * 60 + "x" + ")" * 60),
    "CAST to a nested ARRAY": _select("CAST(x AS " + "ARRAY<" * 300 + "INT" + ">" * 300 + ")"),
    "STRUCT column": (
        f"CREATE SOURCE s (k {_struct(800)}) WITH (connector = 'datagen');\n"
        "CREATE SINK o WITH (connector = 'console');\nINSERT INTO o FROM s;\n"
    ),
    "STRUCT sink column": (
        NEST_HEADER.splitlines()[0]
        + f"\nCREATE SINK o (k {_struct(800)}) WITH (connector = 'console');\n"
        "INSERT INTO o FROM s;\n"
    ),
    "STRUCT parameter of a function": (
        NEST_HEADER + f"CREATE FUNCTION f(v {_struct(500)}) RETURNS BIGINT AS 'm.f';\n"
    ),
    "SQL query brackets": NEST_HEADER
    + "INSERT INTO o SELECT "
    + "(" * 5000
    + "x"
    + ")" * 5000
    + " AS y FROM s;\n",
}


def _main(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = main(argv)
    return code, out.getvalue()


@pytest.mark.parametrize("kind", sorted(TOO_DEEP))
def test_nesting_of_every_kind_is_e0004_in_check_compile_and_diff(
    kind: str, tmp_path: Path
) -> None:
    path = str(_write(tmp_path, TOO_DEEP[kind]))
    for argv in (
        ["check", path],
        ["compile", "--emit", "all", "-o", str(tmp_path / "out"), path],
        ["diff", path, path],
    ):
        started = time.monotonic()
        code, out = _main(argv)
        assert code == 1, (argv[0], out[-500:])
        assert "error[E0004]" in out, (argv[0], out[-500:])
        assert "job.flow:" in out  # located
        assert time.monotonic() - started < 60


@pytest.mark.parametrize("kind", ["unary minus", "BETWEEN chain", "STRUCT column"])
def test_nesting_exit_code_of_the_process(kind: str, tmp_path: Path) -> None:
    _write(tmp_path, TOO_DEEP[kind])
    for args in (("check", "job.flow"), ("compile", "--emit", "pyspark", "job.flow")):
        result = _flowc(*args, cwd=tmp_path)
        assert result.returncode == 1, result.stderr[-500:]
        assert "error[E0004]" in result.stderr
        _no_traceback(result.stderr)


#: The deepest program of each kind flowc accepts: at the bounds, not past them.
AT_THE_BOUND = {
    "brackets": _where("(" * 64 + "k > 1" + ")" * 64),
    "SQL query brackets": NEST_HEADER
    + "INSERT INTO o SELECT "
    + "(" * 63
    + "x"
    + ")" * 63
    + " AS y FROM s;\n",
    "unary minus": _select("- " * 64 + "x"),
    "NOT": _where("NOT " * 64 + "b"),
    "IS NOT NULL chain": _where("x IS NOT NULL" + " = true IS NOT NULL" * 30),
    "BETWEEN chain": _where("x" + " BETWEEN 1 AND 2" * 150),
    "alternating + and -": _where(_alternating(150)),
    "cast chain": _select("x" + "::BIGINT" * 150),
    "CASE": _select("CASE WHEN x > 1 THEN " * 64 + "x" + " END" * 64),
    "function calls": _select("abs(" * 64 + "x" + ")" * 64),
    "type names called": _select("string(" * 4 + "x" + ")" * 4),
    "STRUCT column": (
        f"CREATE SOURCE s (k {_struct(63)}) WITH (connector = 'files', path = 'in', "
        "format = 'json');\n"
        "CREATE SINK o WITH (connector = 'console');\nINSERT INTO o FROM s;\n"
    ),
    "long AND/OR chain": _where(" OR ".join(f"x = {i} AND b" for i in range(3000))),
}


def _deepest_stack(work: Callable[[], object]) -> int:
    """How many Python frames deeper than its caller ``work`` goes (a profile hook)."""
    depth = deepest = 0

    def hook(frame: object, event: str, arg: object) -> None:
        nonlocal depth, deepest
        if event == "call":
            depth += 1
            deepest = max(deepest, depth)
        elif event == "return":
            depth -= 1

    sys.setprofile(hook)
    try:
        work()
    finally:
        sys.setprofile(None)
    return deepest


@pytest.mark.parametrize("kind", sorted(AT_THE_BOUND))
def test_nesting_at_the_bounds_stays_far_from_the_recursion_limit_in_a_small_thread(
    kind: str,
) -> None:
    """Compiling goes at most half way to the recursion limit compiling holds (8,000), and
    every writer after it stays under Python's default limit (1,000) without holding any,
    in a thread of a 2 MiB stack (C frames too, not only Python's count)."""
    from flowc.diff import diff_plans
    from flowc.viewer import GRAPH_STAGES, render_html

    found: dict[str, object] = {}

    def run() -> None:
        try:
            job: list[flowc.CompiledJob] = []
            found["compile"] = _deepest_stack(
                lambda: job.append(flowc.compile(AT_THE_BOUND[kind], "t.flow", for_spark=True))
            )
            assert sys.getrecursionlimit() == 1000
            found["writers"] = _deepest_stack(
                lambda: (
                    generate_pyspark(job[0]),
                    [render_html(job[0], stage) for stage in GRAPH_STAGES],
                    diff_plans(job[0], job[0]),
                    job[0].physical_plan.to_json(),
                )
            )
        except BaseException as error:  # handed to the test's thread
            found["error"] = error

    previous = threading.stack_size(2 << 20)
    try:
        thread = threading.Thread(target=run)
        thread.start()
        thread.join(timeout=120)
    finally:
        threading.stack_size(previous)
    assert not thread.is_alive()
    error = found.get("error")
    if isinstance(error, BaseException):
        raise AssertionError(kind) from error
    assert isinstance(found["compile"], int) and found["compile"] < 4000, found
    assert isinstance(found["writers"], int) and found["writers"] < 900, found


# ------------------------------------------------ 9. test files (YAML) (issue 25, item 7)

TESTED_JOB = """\
CREATE SOURCE s (k BIGINT, v STRING) WITH (connector = 'files', path = 'in', format = 'json');
CREATE SINK o WITH (connector = 'files', path = 'out', format = 'json');
INSERT INTO o FROM s |> WHERE k > 0;
"""


def _rows_test(rows: str) -> str:
    return f"tests:\n  - name: t\n    given:\n      s:\n{rows}    expect:\n      o: []\n"


_LAUGHS = "".join(
    f"{name}: &{name} [{', '.join([f'*{previous}'] * 9) if previous else 'x, ' * 8 + 'x'}]\n"
    for previous, name in zip(["", *"abcdefg"], "abcdefgh", strict=True)
)

#: Test files that crashed ``flowc test`` (exit 101) or ran for minutes, and the code each
#: now gets, at the line and column given.
HOSTILE_TEST_FILES = {
    "python tag": (
        _rows_test("        - {k: !!python/object/apply:os.system ['true']}\n"),
        "E0832",
        5,
    ),
    "set tag": (_rows_test("        - {k: 1, v: !!set {a, b}}\n"), "E0832", 5),
    "local tag": (_rows_test("        - {k: !mine 1}\n"), "E0832", 5),
    "self-referencing anchor": (_rows_test("        - &a [*a]\n"), "E0834", 5),
    "deep nesting": (
        _rows_test("        - {k: 1, v: " + "[" * 5000 + "]" * 5000 + "}\n"),
        "E0835",
        5,
    ),
    "billion laughs": (_LAUGHS + "tests: *h\n", "E0833", None),
    "larger than the bound": (
        _rows_test("".join(f"        - {{k: {i}, v: value{i}}}\n" for i in range(400_000))),
        "E0831",
        1,
    ),
    "not UTF-8": (_rows_test("        - {k: 1, v: caf\udce9}\n"), "E0830", 5),
}


@pytest.mark.parametrize("kind", sorted(HOSTILE_TEST_FILES))
def test_hostile_test_file_is_a_located_diagnostic(kind: str, tmp_path: Path) -> None:
    from flowc.usertest import TestFileError, load_test_file

    text, code, line = HOSTILE_TEST_FILES[kind]
    path = tmp_path / "job.test.yaml"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    job = flowc.compile(TESTED_JOB, "job.flow")
    started = time.monotonic()
    with pytest.raises(TestFileError) as raised:
        load_test_file(str(path), job)
    assert time.monotonic() - started < 10
    (diagnostic,) = raised.value.diagnostics
    assert diagnostic.code == code
    assert diagnostic.span is not None and diagnostic.span.file == str(path)
    if line is not None:
        assert diagnostic.span.line == line


def test_aliases_within_the_bound_are_read() -> None:
    """The bound counts what aliases expand to, and a few shared rows are fine."""
    from flowc.usertest.safe_yaml import compose

    node = compose("rows: &r [{k: 1}, {k: 2}]\nagain: *r\nthird: *r\n")
    assert node is not None


@pytest.mark.parametrize("kind", ["python tag", "billion laughs", "self-referencing anchor"])
def test_hostile_test_file_exit_code_of_the_process(kind: str, tmp_path: Path) -> None:
    _write(tmp_path, TESTED_JOB)
    text, code, _ = HOSTILE_TEST_FILES[kind]
    (tmp_path / "job.test.yaml").write_text(text, encoding="utf-8")
    result = _flowc("test", "job.flow", cwd=tmp_path)
    assert result.returncode == 1, result.stdout[-500:] + result.stderr[-500:]
    assert f"error[{code}]" in result.stdout
    _no_traceback(result.stdout + result.stderr)


# ------------------------------------------- 10. lone surrogates (issue 25, item 7)


@pytest.mark.parametrize("where", ["'\ud800'", "`col\udfff`", "-- \udc80 in a comment"])
def test_lone_surrogate_in_the_source_is_refused_where_it_is(where: str) -> None:
    """A str may hold a surrogate no file can: the JSON and HTML writers crashed on it."""
    text = CLEAN.replace("WHERE k >= 0;", f"WHERE k >= 0 {where}\n;")
    with pytest.raises(flowc.CompileError) as raised:
        flowc.compile(text, "t.flow")
    (diagnostic,) = raised.value.diagnostics
    assert diagnostic.code == "E0904"
    surrogate = next(i for i, c in enumerate(text) if "\ud800" <= c <= "\udfff")
    line = text.count("\n", 0, surrogate) + 1
    column = surrogate - text.rfind("\n", 0, surrogate)
    assert diagnostic.span is not None
    assert (diagnostic.span.line, diagnostic.span.column) == (line, column)
    json.dumps(diagnostic.message, ensure_ascii=False).encode("utf-8")  # writable


def test_lone_surrogate_escape_in_a_test_file_is_refused(tmp_path: Path) -> None:
    from flowc.usertest import TestFileError, load_test_file

    path = tmp_path / "job.test.yaml"
    path.write_text(_rows_test('        - {k: 1, v: "a\\ud800"}\n'), encoding="utf-8")
    with pytest.raises(TestFileError) as raised:
        load_test_file(str(path), flowc.compile(TESTED_JOB, "job.flow"))
    (diagnostic,) = raised.value.diagnostics
    assert diagnostic.code == "E0904"
    assert diagnostic.span is not None and diagnostic.span.line == 5
