"""The command line: exit codes, formats, colour, file errors, internal errors."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

import pytest

import flowc
from flowc.cli import main as cli

CLEAN = """
CREATE SOURCE s (k BIGINT) WITH (connector = 'datagen');
CREATE SINK o WITH (connector = 'console');
INSERT INTO o FROM s |> WHERE k > 0;
"""
BROKEN = CLEAN.replace("k > 0", "missing > 0")


def _write(tmp_path: Path, text: str | bytes, name: str = "job.flow") -> str:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return str(path)


def test_check_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["check", _write(tmp_path, CLEAN)]) == 0
    assert cli.main(["check", _write(tmp_path, BROKEN, "bad.flow")]) == 1
    err = capsys.readouterr().err
    assert "error[E0201]: unknown column 'missing'" in err
    assert "Traceback" not in err


def test_check_reports_every_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = _write(tmp_path, BROKEN, "a.flow")
    second = _write(tmp_path, BROKEN, "b.flow")
    assert cli.main(["check", "--format", "json", first, second]) == 1
    files = {d["file"] for d in json.loads(capsys.readouterr().out)["diagnostics"]}
    assert files == {first, second}


def test_missing_file_and_directory_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["check", str(tmp_path / "nope.flow")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert cli.main(["check", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err


def test_invalid_utf8_is_a_file_error_with_position(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, b"SET parallelism = 1;\nCREATE \xff SOURCE")
    assert cli.main(["check", path]) == 2
    assert f"{path}:2:8: not valid UTF-8 (byte 0xff)" in capsys.readouterr().err


def test_empty_file_is_a_diagnostic(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["check", _write(tmp_path, "")]) == 1
    assert "E0501" in capsys.readouterr().err


def test_set_value_is_reported_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad ``--set`` value is placed on the command line, never at a line of the file
    (issue #12: it was once reported at line 6 of a 4-line file)."""
    four_lines = (
        "SET parallelism = 2;\n"
        "CREATE SOURCE s (k BIGINT) WITH (connector = 'datagen');\n"
        "CREATE SINK o WITH (connector = 'console');\n"
        "INSERT INTO o FROM s |> WHERE k > 0;\n"
    )
    path = _write(tmp_path, four_lines)
    assert cli.main(["run", path, "--set", "job.name=j", "--set", "parallelism=-3"]) == 1
    err = capsys.readouterr().err
    assert err == (
        "error[E0302]: --set parallelism=-3: invalid value for setting 'parallelism': must be "
        "between 1 and 32768, found -3\n"
        " --> <command line>:2:19\n"
        "  |\n"
        "2 | --set parallelism=-3\n"
        "  |                   ^^\n"
        "  = help: 'parallelism' takes a whole number 1..32768\n"
        "\n"
        "1 error\n"
    )


def test_set_sink_mode_the_connector_lacks_is_e0410_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A valid mode the sink's connector does not take, given with ``--set``: E0410 at the
    command line (it once crashed looking for the mode in the sink's WITH list)."""
    program = (
        "CREATE SOURCE s (k BIGINT) WITH (connector = 'datagen');\n"
        "CREATE SINK counts WITH (connector = 'memory');\n"
        "INSERT INTO counts FROM s |> KEY BY k |> AGGREGATE count(*) AS n;\n"
    )
    path = _write(tmp_path, program)
    assert cli.main(["run", path, "--set", "counts.mode=update"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(
        "error[E0410]: --set counts.mode=update: the memory sink does not support mode "
        "'update'\n --> <command line>:1:19\n"
    ), err


def test_bad_arguments_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 2
    assert cli.main(["check"]) == 2
    assert cli.main(["compile", "x.flow", "--emit", "nonsense"]) == 2
    assert "usage:" in capsys.readouterr().err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"flowc {flowc.__version__}"


def test_json_diagnostics_have_every_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["check", "--format", "json", _write(tmp_path, BROKEN)]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["schema_version"] == 1
    assert document["flowc_version"] == flowc.__version__
    (diagnostic,) = document["diagnostics"]
    assert diagnostic == {
        "code": "E0201",
        "severity": "error",
        "message": "unknown column 'missing'",
        "file": str(tmp_path / "job.flow"),
        "line": 4,
        "column": 31,
        "end_line": 4,
        "end_column": 38,
        "help": "columns here: k",
    }


def test_colour_only_when_asked_or_on_a_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path, BROKEN)
    monkeypatch.delenv("NO_COLOR", raising=False)
    cli.main(["check", path])
    assert "\x1b[" not in capsys.readouterr().err  # captured stderr is not a terminal
    cli.main(["check", "--color", "always", path])
    assert "\x1b[" in capsys.readouterr().err
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    cli.main(["check", path])
    assert "\x1b[" not in capsys.readouterr().err


def test_compile_emit_ast_json_and_output_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, CLEAN)
    assert cli.main(["compile", path, "--emit", "ast", "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["stage"] == "ast"
    statements = document["ast"]["statements"]
    assert [s["node"] for s in statements] == ["CreateSource", "CreateSink", "Insert"]
    assert statements[2]["query"]["steps"][0]["condition"]["span"]["line"] == 4
    target = tmp_path / "out.txt"
    assert cli.main(["compile", path, "--emit", "ast", "-o", str(target)]) == 0
    assert target.read_text().startswith("Program")


def test_compile_with_errors_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["compile", _write(tmp_path, BROKEN), "--emit", "ast"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "E0201" in captured.err


def test_internal_error_exits_101_with_a_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def crash(*args: object, **kwargs: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr("flowc.driver.compile", crash)
    monkeypatch.setenv("FLOWC_CRASH_DIR", str(tmp_path))
    assert cli.main(["check", _write(tmp_path, CLEAN)]) == 101
    err = capsys.readouterr().err
    assert "internal error" in err
    assert "Traceback" not in err
    (report,) = tmp_path.glob("flowc-crash-*.txt")
    assert "RuntimeError: boom" in report.read_text()


def test_python_dash_m_and_console_script(tmp_path: Path) -> None:
    path = _write(tmp_path, CLEAN)
    result = subprocess.run(
        [sys.executable, "-m", "flowc", "check", path], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "flowc", "check", _write(tmp_path, BROKEN, "b.flow")],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 1
    assert "E0201" in bad.stderr


def test_compile_does_not_import_pyspark(tmp_path: Path) -> None:
    code = (
        "import sys, flowc.cli.main\n"
        f"flowc.cli.main.main(['compile', {_write(tmp_path, CLEAN)!r}, '--emit', 'ast'])\n"
        "assert 'pyspark' not in sys.modules, 'pyspark imported'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


SPARK_CANNOT_RUN = """
SET max_parallelism = 128;
CREATE SOURCE s (k BIGINT) WITH (connector = 'datagen');
CREATE SINK o WITH (connector = 'console');
INSERT INTO o FROM s |> KEY BY k |> AGGREGATE count(*) AS n;
"""


FLINK_REFUSES_OVER_UPDATES = """
SET max_parallelism = 16;
CREATE SOURCE bids (auction BIGINT, price BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts)
  WITH (connector = 'datagen');
CREATE SINK f WITH (connector = 'files', path = 'out', format = 'json');
INSERT INTO f FROM bids |> KEY BY auction |> AGGREGATE count(*) AS n;
"""


def test_changelog_refusals_stop_check_run_and_the_plans(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Flink refuses updates into an append-only sink: so do flowc check, flowc run (before
    Spark starts, nothing written) and Flink's plans, with E0748 alone (not Spark's E0704
    at the AGGREGATE as well)."""
    path = _write(tmp_path, FLINK_REFUSES_OVER_UPDATES)
    for command in (["check", path], ["run", path], ["compile", path, "--emit", "jobgraph"]):
        assert cli.main(command) == 1
        err = capsys.readouterr().err
        assert "error[E0748]" in err and "the AGGREGATE at line 6 produces" in err
        assert "E0704" not in err
    assert not (tmp_path / "out").exists()


CDC_SOURCE = """
CREATE SOURCE c (id BIGINT, country STRING)
  WITH (connector = 'files', path = 'in', format = 'debezium-json');
CREATE SINK o WITH (connector = 'console');
INSERT INTO o FROM c |> WHERE id > 0;
"""


@pytest.mark.parametrize("mode", [["--batch"], ["--set", "execution.mode=batch"]])
def test_check_and_compile_take_runs_batch_mode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: list[str]
) -> None:
    """``flowc check --batch`` (or ``--set execution.mode=batch``) refuses what ``flowc run
    --batch`` refuses, here a CDC source (E0299 at its format, as Flink's batch mode);
    without it the same file checks clean (streaming). ``flowc compile`` takes it too."""
    path = _write(tmp_path, CDC_SOURCE)
    assert cli.main(["check", path]) == 0
    capsys.readouterr()
    for command in (["check", *mode, path], ["compile", *mode, path, "--emit", "jobgraph"]):
        assert cli.main(command) == 1
        err = capsys.readouterr().err
        assert "error[E0299]: source 'c' (debezium-json)" in err
        assert ":3:43" in err  # at format = 'debezium-json'
    assert cli.main(["run", *mode, path]) == 1
    assert "error[E0299]: source 'c' (debezium-json)" in capsys.readouterr().err
    assert cli.main(["check", "--set", "execution.mode=bogus", path]) == 1
    assert "--> <command line>:1:22" in capsys.readouterr().err


def test_spark_limits_do_not_stop_the_plans(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A running aggregate in append mode is a valid Flink job that Spark refuses."""
    path = _write(tmp_path, SPARK_CANNOT_RUN)
    assert cli.main(["compile", path, "--emit", "jobgraph"]) == 0
    captured = capsys.readouterr()
    assert "Keyed Aggregate -> Sink: o" in captured.out
    assert "warning[E0704]: Spark cannot run this" in captured.err
    assert cli.main(["check", path]) == 1
    assert "error[E0704]" in capsys.readouterr().err
    assert cli.main(["compile", path, "--emit", "pyspark"]) == 1
    assert "error[E0704]" in capsys.readouterr().err
    job = flowc.compile(SPARK_CANNOT_RUN)
    assert [d.code for d in job.spark_diagnostics] == ["E0704"]
    with pytest.raises(flowc.CompileError):
        flowc.compile(SPARK_CANNOT_RUN, for_spark=True)


def test_writers_run_without_the_cyclic_collector(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """flowc check, compile, diff and fmt run with the cyclic collector off (young
    collections over the growing job took a tenth of a 10,000-operator compile) and turn it
    back on after; a command that runs long (flowc run) keeps it."""
    path = str(tmp_path / "job.flow")
    Path(path).write_text("CREATE SOURCE s (x INT) WITH (connector = 'datagen');\n", "utf-8")
    seen: dict[str, bool] = {}

    def recording(name: str) -> object:
        def command(args: object) -> int:
            seen[name] = gc.isenabled()
            return 0

        return command

    monkeypatch.setattr(cli, "_command", recording)
    assert gc.isenabled()
    for argv in (["check", path], ["compile", path], ["fmt", path], ["run", path]):
        assert cli.main(argv) == 0
        assert gc.isenabled(), argv
    assert seen == {"check": False, "compile": False, "fmt": False, "run": True}


def _small_job(tmp_path: Path) -> Path:
    """A one-query job in ``tmp_path``: what the collector tests below compile."""
    path = tmp_path / "job.flow"
    path.write_text(
        "CREATE SOURCE s (x INT) WITH (connector = 'datagen');\n"
        "CREATE SINK o (x INT) WITH (connector = 'noop');\n"
        "INSERT INTO o FROM s |> WHERE x > 0;\n",
        encoding="utf-8",
    )
    return path


def test_a_writer_leaves_no_young_collection_over_its_job(tmp_path: Path) -> None:
    """What a compile made is moved to the collector's oldest generation as the command
    ends, so turning the collector back on runs no young collection over the job (one
    took 6 ms of a 1,000-operator flowc compile)."""
    path = _small_job(tmp_path)
    code = (
        "import contextlib, gc, io, sys\n"
        "from flowc.cli.main import main\n"
        "started = []\n"
        "gc.callbacks.append(lambda phase, info: phase == 'start' and started.append(1))\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    code = main(['compile', sys.argv[1], '--emit', 'jobgraph'])\n"
        "made = [[] for _ in range(100)]\n"
        "print(code, len(started), gc.isenabled())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["0", "0", "True"], done.stderr


def test_python_m_flowc_freezes_its_modules_before_the_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``python -m flowc`` and the console script freeze what is loaded before the command
    runs: the collector's full collections after a compile then skip the modules (45 ms of
    a 1,000-operator ``flowc compile``, BENCHMARKS.md)."""
    import flowc.__main__ as entry

    frozen_when_run: list[int] = []

    def command() -> int:
        frozen_when_run.append(gc.get_freeze_count())
        return 0

    monkeypatch.setattr(entry, "main", command)
    monkeypatch.setattr(sys, "argv", ["flowc", "run", "job.flow"])
    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    try:
        with pytest.raises(SystemExit):
            entry.run()
    finally:
        gc.unfreeze()
    assert frozen_when_run and frozen_when_run[0] > 0


def test_the_console_scripts_writer_ends_without_a_young_collection(tmp_path: Path) -> None:
    """The console script's flowc compile runs no collection before the interpreter's last
    (which skips what is frozen): it does not freeze before the command (a writer then
    could not move what it made to the oldest generation, and the collector coming back on
    would scan the job)."""
    path = _small_job(tmp_path)
    code = (
        "import gc, os, sys\n"
        "import flowc.__main__ as entry\n"
        "def seen(phase, info):\n"
        "    if phase == 'start' and not sys.is_finalizing():\n"
        "        os.write(2, b'gc\\n')\n"
        "gc.callbacks.append(seen)\n"
        "sys.argv = ['flowc', 'compile', sys.argv[1], '--emit', 'jobgraph', '-o', os.devnull]\n"
        "entry.run()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "gc" not in done.stderr.split(), done.stderr
