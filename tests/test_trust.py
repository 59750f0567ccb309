"""The trust model (docs/security.md): a program cannot leave its sandbox.

One test per escape an adversarial tester found: a shell through
``spark.driver.extraJavaOptions``, the environment and a symbolic link through
``reflect``, a file read through a subquery in a pipe expression and through EXISTS,
statements injected through ``--set``, and paths out of the base directory (``../``, an
absolute path, a symbolic link). Each is refused in untrusted mode with its code at the
offending text; the subqueries in trusted mode too. Real Spark runs show that what
trusted mode accepts still works, that the escapes are real on Spark itself, and that a
refused program never reaches Spark.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc import Diagnostic, Severity
from flowc.cli.main import main
from flowc.runtime.run import run_job as real_run_job
from flowc.trust.policy import COMMAND_LINE, DENIED_FUNCTIONS, SPARK_SETTINGS

STREAMS = """\
CREATE SOURCE s (k BIGINT, v STRING) WITH (connector = 'datagen');
CREATE SINK o WITH (connector = 'console');
"""


def errors(text: str, *, trusted: bool = False, **options: Any) -> list[Diagnostic]:
    """The errors of a program flowc refuses."""
    options.setdefault("filename", "job.flow")
    with pytest.raises(flowc.CompileError) as refused:
        flowc.compile(text, for_spark=True, trusted=trusted, **options)
    return [d for d in refused.value.diagnostics if d.severity is Severity.ERROR]


def the_error(text: str, code: str, *, trusted: bool = False, **options: Any) -> Diagnostic:
    found = errors(text, trusted=trusted, **options)
    assert [d.code for d in found] == [code], found
    assert found[0].help
    return found[0]


def under(text: str, diagnostic: Diagnostic) -> str:
    """The text a diagnostic's span covers (one line)."""
    span = diagnostic.span
    assert span.end_line == span.line
    return text.split("\n")[span.line - 1][span.column - 1 : span.end_column - 1]


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """``flowc run`` with Spark replaced: a refused program must never get there."""
    calls: list[object] = []

    def run_job(job: object, **kwargs: object) -> None:
        calls.append(job)
        raise AssertionError("a refused program reached Spark")

    monkeypatch.setattr("flowc.runtime.run.run_job", run_job)
    return calls


def run_flowc(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(args)
    return code, capsys.readouterr().err


def run_on_spark(folder: Path, program: str) -> None:
    flow = folder / "job.flow"
    flow.write_text(program, encoding="utf-8")
    job = flowc.compile(program, str(flow), for_spark=True)
    report = flowc_run_job(job)
    assert [q.error for q in report.queries] == [None] * len(report.queries)


def flowc_run_job(job: flowc.CompiledJob) -> Any:
    return real_run_job(job, available_now=True, master="local[2]", out=io.StringIO())


# ---------------------------------------------------------------- a shell through the JVM's options

SHELL = (
    "SET spark.driver.extraJavaOptions = '-XX:OnOutOfMemoryError=\"touch /tmp/pwned\"';\n"
    + STREAMS
    + "INSERT INTO o FROM s;\n"
)


def test_shell_through_extra_java_options_is_refused_untrusted() -> None:
    error = the_error(SHELL, "E0951")
    assert under(SHELL, error) == "spark.driver.extraJavaOptions"
    assert error.message == (
        "setting 'spark.driver.extraJavaOptions' is not allowed in an untrusted program"
    )
    # Trusted (the default), it is passed to Spark as before.
    conf = dict(flowc.compile(SHELL, "job.flow").program.settings.spark_conf)
    assert conf["spark.driver.extraJavaOptions"].startswith("-XX:OnOutOfMemoryError")


@pytest.mark.parametrize(
    "key",
    [
        "spark.driver.extraJavaOptions",
        "spark.executor.extraJavaOptions",
        "spark.driver.extraClassPath",
        "spark.jars",
        "spark.jars.packages",
        "spark.hadoop.fs.file.impl",
        "spark.sql.extensions",
        "spark.plugins",
        "spark.sql.catalog.evil",
        "spark.sql.streaming.stateStore.providerClass",
        "spark.sql.warehouse.dir",
        "spark.local.dir",
        "spark.eventLog.dir",
        "spark.sql.optimizer.excludedRules",
    ],
)
def test_spark_settings_outside_the_allow_list_are_refused(key: str) -> None:
    text = f"SET {key} = 'x';\n{STREAMS}INSERT INTO o FROM s;\n"
    assert under(text, the_error(text, "E0951")) == key
    assert key not in SPARK_SETTINGS


def test_allowed_spark_settings_take_only_plain_values() -> None:
    clean = (
        "SET spark.sql.shuffle.partitions = 4;\nSET spark.sql.session.timeZone = 'UTC';\n"
        f"{STREAMS}INSERT INTO o FROM s;\n"
    )
    job = flowc.compile(clean, "job.flow", for_spark=True, trusted=False)
    assert dict(job.program.settings.spark_conf)["spark.sql.shuffle.partitions"] == "4"
    bad = f"SET spark.sql.session.timeZone = 'org.evil.Zone;x';\n{STREAMS}INSERT INTO o FROM s;\n"
    assert under(bad, the_error(bad, "E0951")) == "'org.evil.Zone;x'"


def test_a_spark_setting_given_with_set_is_checked_on_the_command_line() -> None:
    text = f"{STREAMS}INSERT INTO o FROM s;\n"
    overrides = {"spark.driver.extraJavaOptions": "-XX:OnOutOfMemoryError=id"}
    error = the_error(text, "E0951", overrides=overrides)
    assert (error.span.file, error.span.line, error.span.column) == (COMMAND_LINE, 1, 7)
    assert error.message.startswith(
        "--set spark.driver.extraJavaOptions=-XX:OnOutOfMemoryError=id: setting "
    )


def test_the_command_line_is_trusted_by_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flow = tmp_path / "job.flow"
    flow.write_text(SHELL, encoding="utf-8")
    assert run_flowc(["check", str(flow)], capsys)[0] == 0
    code, err = run_flowc(["check", "--untrusted", str(flow)], capsys)
    assert code == 1
    assert "error[E0951]: setting 'spark.driver.extraJavaOptions'" in err
    assert f"--> {flow}:1:5" in err


def test_a_refused_shell_never_reaches_spark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_spark: list[object]
) -> None:
    flow = tmp_path / "job.flow"
    flow.write_text(SHELL, encoding="utf-8")
    code, err = run_flowc(["run", "--untrusted", str(flow), "--available-now"], capsys)
    assert (code, no_spark) == (1, [])
    assert "error[E0951]" in err


# ---------------------------------------------------------------- the environment through reflect

ENV = (
    "CREATE SOURCE s (v STRING) WITH (connector = 'files', path = 'in', format = 'json');\n"
    "CREATE SINK trust_env WITH (connector = 'memory');\n"
    "INSERT INTO trust_env FROM s |> EXTEND reflect('java.lang.System', 'getenv', 'HOME') AS h;\n"
)


def test_environment_through_reflect_is_refused_untrusted() -> None:
    error = the_error(ENV, "E0952")
    assert under(ENV, error) == "reflect"
    assert error.message.startswith("function 'reflect' is not allowed in an untrusted program")


@pytest.mark.parametrize(
    ("call", "name"),
    [
        ("java_method('java.lang.System', 'getenv', 'HOME')", "java_method"),
        ("try_reflect('java.lang.System', 'getenv', 'HOME')", "try_reflect"),
        ("REFLECT('java.lang.System', 'getenv', 'HOME')", "REFLECT"),
        ("`reflect`('java.lang.System', 'getenv', 'HOME')", "`reflect`"),
        ("builtin.reflect('java.lang.System', 'getenv', 'HOME')", "reflect"),
        ("system.builtin.java_method('java.lang.System', 'getenv', 'HOME')", "java_method"),
        ("upper(reflect('java.lang.System', 'getenv', 'HOME'))", "reflect"),
        ("current_user()", "current_user"),
        ("from_protobuf(cast(v AS BINARY), 'M', '/etc/x.desc')", "from_protobuf"),
    ],
)
def test_every_spelling_of_a_denied_function_is_refused(call: str, name: str) -> None:
    text = f"{STREAMS}INSERT INTO o FROM s |> EXTEND {call} AS x;\n"
    assert under(text, the_error(text, "E0952")) == name


def test_denied_functions_in_sql_selects_are_refused() -> None:
    select = "SELECT k, reflect('java.lang.System', 'getenv', 'HOME') AS h FROM s"
    text = f"{STREAMS}INSERT INTO o {select};\n"
    assert under(text, the_error(text, "E0952")) == "reflect"
    assert {"reflect", "java_method", "try_reflect"} <= set(DENIED_FUNCTIONS)


def test_reflect_reads_the_environment_when_trusted(spark: Any, tmp_path: Path) -> None:
    """Trusted mode runs reflect as before; the same program untrusted never reaches Spark."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.json").write_text('{"v": "a"}\n', encoding="utf-8")
    run_on_spark(tmp_path, ENV)
    rows = spark.sql("SELECT v, h FROM trust_env").collect()
    assert [(r.v, r.h) for r in rows] == [("a", os.environ["HOME"])]


def test_a_refused_reflect_never_reaches_spark(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_spark: list[object]
) -> None:
    flow = tmp_path / "job.flow"
    flow.write_text(ENV, encoding="utf-8")
    code, err = run_flowc(["run", "--untrusted", str(flow), "--available-now"], capsys)
    assert (code, no_spark) == (1, [])
    assert "error[E0952]: function 'reflect'" in err
    assert f"--> {flow}:3:40" in err


# ---------------------------------------------------------------- a symbolic link through reflect


def symlink_program(target: Path, link: Path) -> str:
    return (
        "CREATE SOURCE s (v STRING) WITH (connector = 'files', path = 'in', format = 'json');\n"
        "CREATE SINK trust_link WITH (connector = 'memory');\n"
        "INSERT INTO trust_link FROM s\n"
        f"  |> EXTEND reflect('org.apache.hadoop.fs.FileUtil', 'symLink', '{target}', '{link}')"
        " AS made;\n"
    )


def test_symlink_through_reflect_is_refused_untrusted(tmp_path: Path) -> None:
    text = symlink_program(Path("/etc"), tmp_path / "etc")
    error = the_error(text, "E0952")
    assert under(text, error) == "reflect"
    assert error.span.line == 4


def test_a_refused_symlink_is_never_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_spark: list[object]
) -> None:
    (tmp_path / "target").mkdir()
    link = tmp_path / "link"
    flow = tmp_path / "job.flow"
    flow.write_text(symlink_program(tmp_path / "target", link), encoding="utf-8")
    code, err = run_flowc(["run", "--untrusted", str(flow), "--available-now"], capsys)
    assert (code, no_spark, link.is_symlink()) == (1, [], False)
    assert "error[E0952]: function 'reflect'" in err


def test_reflect_makes_a_symlink_when_trusted(spark: Any, tmp_path: Path) -> None:
    """The escape is real: trusted, as before, the call runs and Spark makes the link."""
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.json").write_text('{"v": "a"}\n', encoding="utf-8")
    (tmp_path / "target").mkdir()
    link = tmp_path / "link"
    run_on_spark(tmp_path, symlink_program(tmp_path / "target", link))
    assert [r.made for r in spark.sql("SELECT made FROM trust_link").collect()] == ["0"]
    assert link.is_symlink() and os.readlink(link) == str(tmp_path / "target")


# ---------------------------------------------------------------- a file read through a subquery


def subquery_program(secret: Path) -> str:
    return (
        f"{STREAMS}INSERT INTO o FROM s\n"
        f"  |> EXTEND concat('', (SELECT * FROM text.`{secret}` LIMIT 1)) AS h;\n"
    )


@pytest.mark.parametrize("trusted", [True, False])
def test_file_read_through_a_subquery_is_refused_in_every_mode(trusted: bool) -> None:
    text = subquery_program(Path("/etc/hostname"))
    error = the_error(text, "E0950", trusted=trusted)
    assert under(text, error) == "(SELECT * FROM text.`/etc/hostname` LIMIT 1)"
    assert error.span.line == 4


@pytest.mark.parametrize("trusted", [True, False])
def test_file_read_through_exists_is_refused_in_every_mode(trusted: bool) -> None:
    text = f"{STREAMS}INSERT INTO o FROM s |> WHERE EXISTS (SELECT 1 FROM text.`/etc/passwd`);\n"
    error = the_error(text, "E0950", trusted=trusted)
    assert under(text, error) == "EXISTS (SELECT 1 FROM text.`/etc/passwd`)"
    # The same in a SQL SELECT is E0601, as before (it lowers to pipe steps).
    sql = f"{STREAMS}INSERT INTO o SELECT k FROM s WHERE EXISTS (SELECT 1 FROM text.`/x`);\n"
    assert [d.code for d in errors(sql, trusted=trusted)] == ["E0601"]


def test_the_subquery_escape_is_real_on_spark_and_flowc_keeps_it_away(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], no_spark: list[object]
) -> None:
    from pyspark.sql import functions as F

    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET-CONTENT\n", encoding="utf-8")
    # On Spark itself, the expression flowc used to pass through reads the file.
    read = F.expr(f"concat('', (SELECT * FROM text.`{secret}` LIMIT 1))")
    assert spark.range(1).select(read.alias("h")).collect()[0].h == "SECRET-CONTENT"
    # flowc refuses it, trusted too, so it never reaches Spark.
    flow = tmp_path / "job.flow"
    flow.write_text(subquery_program(secret), encoding="utf-8")
    code, err = run_flowc(["run", str(flow), "--available-now"], capsys)
    assert (code, no_spark) == (1, [])
    assert "error[E0950]: a query inside an expression" in err
    column = subquery_program(secret).split("\n")[3].index("(SELECT") + 1
    assert f"--> {flow}:4:{column}" in err


def test_reading_a_file_the_planned_way_works_as_before(spark: Any, tmp_path: Path) -> None:
    """A file is read by a source, a plan node; higher-order exists() is no subquery."""
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("a SECRET here\nnothing\n", encoding="utf-8")
    program = (
        "CREATE SOURCE notes (line STRING)"
        " WITH (connector = 'files', path = 'notes', format = 'text');\n"
        "CREATE SINK trust_lines WITH (connector = 'memory');\n"
        "INSERT INTO trust_lines FROM notes\n"
        "  |> WHERE exists(split(line, ' '), w -> w = 'SECRET');\n"
    )
    flowc.compile(program, str(tmp_path / "job.flow"), for_spark=True, trusted=False)
    run_on_spark(tmp_path, program)
    assert [r.line for r in spark.sql("SELECT line FROM trust_lines").collect()] == [
        "a SECRET here"
    ]


# ---------------------------------------------------------------- statements injected through --set

INJECTION = (
    "job.name='x'; CREATE SINK evil WITH (connector = 'files', path = 'evil', "
    "format = 'json'); INSERT INTO evil FROM s"
)


@pytest.mark.parametrize("untrusted", [[], ["--untrusted"]])
def test_statements_injected_through_set_are_a_bad_value(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    no_spark: list[object],
    untrusted: list[str],
) -> None:
    flow = tmp_path / "job.flow"
    flow.write_text(f"{STREAMS}INSERT INTO o FROM s;\n", encoding="utf-8")
    code, err = run_flowc(["run", *untrusted, str(flow), "--set", INJECTION], capsys)
    assert (code, no_spark) == (1, [])
    assert not (tmp_path / "evil").exists()
    assert (
        f"error[E0302]: --set {INJECTION}: invalid value for setting 'job.name': a value that "
        "starts with a quote must be one quoted string, with nothing after it\n"
        f" --> {COMMAND_LINE}:1:16\n"
        "  |\n"
        f"1 | --set {INJECTION}\n"
    ) in err


def test_a_set_value_is_a_value_never_program_text() -> None:
    text = f"{STREAMS}INSERT INTO o FROM s;\n"
    name = INJECTION.removeprefix("job.name=").replace("'x'", "x")
    job = flowc.compile(text, "job.flow", overrides={"job.name": name}, trusted=False)
    assert job.program.settings.job_name == name
    assert [s.name for s in job.program.sinks] == ["o"]
    assert len(job.program.inserts) == 1
    quoted = flowc.compile(text, "job.flow", overrides={"job.name": "'it''s \\\\ mine'"})
    assert quoted.program.settings.job_name == "it's \\ mine"
    backslash = flowc.compile(text, "job.flow", overrides={"job.name": "ends with \\"})
    assert backslash.program.settings.job_name == "ends with \\"


def test_set_diagnostics_point_at_the_command_line() -> None:
    text = f"SET parallelism = 2;\n{STREAMS}INSERT INTO o FROM s;\n"
    error = the_error(text, "E0302", trusted=True, overrides={"parallelism": "0"})
    assert error.message == (
        "--set parallelism=0: invalid value for setting 'parallelism': must be between 1 "
        "and 32768, found 0"
    )
    assert (error.span.file, error.span.line, error.span.column) == (COMMAND_LINE, 1, 19)
    overrides = {"parallelism": "2", "nope.path": "x"}
    unknown = the_error(text, "E0411", trusted=True, overrides=overrides)
    assert unknown.message == "--set nope.path=x: there is no source or sink 'nope'"
    assert (unknown.span.line, unknown.span.column, unknown.span.end_column) == (2, 7, 16)
    # Overriding a SET is what --set is for: no "set again" warning.
    job = flowc.compile(text, "job.flow", overrides={"parallelism": "3"})
    assert (job.program.settings.parallelism, job.diagnostics) == (3, ())


def test_set_renders_the_command_line_under_its_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_spark: list[object]
) -> None:
    flow = tmp_path / "job.flow"
    flow.write_text(f"{STREAMS}INSERT INTO o FROM s;\n", encoding="utf-8")
    args = ["run", str(flow), "--set", "job.name=ok", "--set", "parallelism=many"]
    code, err = run_flowc(args, capsys)
    assert (code, no_spark) == (1, [])
    assert (
        "error[E0302]: --set parallelism=many: invalid value for setting 'parallelism': "
        "expected a whole number, found 'many'\n"
        f" --> {COMMAND_LINE}:2:19\n"
        "  |\n"
        "2 | --set parallelism=many\n"
        "  |                   ^^^^\n"
    ) in err


# ---------------------------------------------------------------- paths out of the base directory


def files_program(source_path: str, sink_path: str = "out") -> str:
    return (
        "CREATE SOURCE s (line STRING)"
        f" WITH (connector = 'files', path = '{source_path}', format = 'text');\n"
        f"CREATE SINK o WITH (connector = 'files', path = '{sink_path}', format = 'json');\n"
        "INSERT INTO o FROM s;\n"
    )


@pytest.mark.parametrize(
    ("path", "code", "why"),
    [
        ("../secrets", "E0953", "climbs out of the base directory"),
        ("in/../../secrets", "E0953", "climbs out of the base directory"),
        ("/etc", "E0953", "is absolute"),
        ("in/{../../etc,x}", "E0953", "uses '{', '}'"),
        ("file:///etc", "E0954", "has the URI scheme 'file:'"),
        ("hdfs://namenode/data", "E0954", "has the URI scheme 'hdfs:'"),
        ("http://169.254.169.254/latest", "E0954", "has the URI scheme 'http:'"),
    ],
)
def test_paths_out_of_the_base_directory_are_refused_untrusted(
    tmp_path: Path, path: str, code: str, why: str
) -> None:
    text = files_program(path)
    error = the_error(text, code, filename=str(tmp_path / "job.flow"))
    assert under(text, error) == f"'{path}'"
    assert why in error.message
    assert str(tmp_path) not in f"{error.message} {error.help}"  # no server paths shown
    flowc.compile(text, str(tmp_path / "job.flow"))  # trusted: as before


def test_a_sink_path_out_of_the_base_directory_is_refused(tmp_path: Path) -> None:
    text = files_program("in", "../../tmp/out")
    assert under(text, the_error(text, "E0953", filename=str(tmp_path / "job.flow"))) == (
        "'../../tmp/out'"
    )


def test_symbolic_links_out_of_the_base_directory_are_refused(tmp_path: Path) -> None:
    base, outside = tmp_path / "base", tmp_path / "outside"
    (base / "in").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.txt").write_text("SECRET\n", encoding="utf-8")
    (base / "door").symlink_to(outside)
    flow = str(base / "job.flow")
    text = files_program("door")
    error = the_error(text, "E0953", filename=flow)
    assert "leads out of the base directory through a symbolic link" in error.message
    # A link inside a folder the source reads, or the sink writes, leads out too.
    (base / "in" / "planted.txt").symlink_to(outside / "secret.txt")
    text = files_program("in")
    error = the_error(text, "E0953", filename=flow)
    assert error.message.endswith("(in/planted.txt)")
    (base / "out").mkdir()
    (base / "out" / "_spark_metadata").symlink_to(outside)
    found = errors(files_program("in", "out"), filename=flow)
    assert [d.code for d in found] == ["E0953", "E0953"]
    # Links that stay inside are fine.
    (base / "in" / "planted.txt").unlink()
    (base / "out" / "_spark_metadata").unlink()
    (base / "in" / "inner.txt").symlink_to(base / "in")
    flowc.compile(files_program("in"), flow, for_spark=True, trusted=False)


def test_no_existence_oracle_outside_the_base_directory(tmp_path: Path) -> None:
    """flowc warns about a missing source folder, but never about one outside the sandbox."""
    (tmp_path / "exists").mkdir()
    base = tmp_path / "base"
    base.mkdir()
    (base / "job.flow").write_text("-- the job's file exists: flowc looks for its paths\n")
    for path in ("../exists", "../missing"):
        with pytest.raises(flowc.CompileError) as refused:
            flowc.compile(files_program(path), str(base / "job.flow"), trusted=False)
        assert [d.code for d in refused.value.diagnostics] == ["E0953"]  # and no W0020
    trusted = flowc.compile(files_program("../missing"), str(base / "job.flow"), for_spark=True)
    assert [d.code for d in trusted.diagnostics] == ["W0020"]


def test_base_dir_and_set_paths(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "data" / "in").mkdir(parents=True)
    flow = tmp_path / "jobs" / "job.flow"
    flow.parent.mkdir()
    # The base directory is the file's folder, unless --base-dir says otherwise; relative
    # paths start from it (at run time too).
    climbing = files_program("../data/in")
    flow.write_text(climbing, encoding="utf-8")
    assert under(climbing, the_error(climbing, "E0953", filename=str(flow))) == "'../data/in'"
    code, err = run_flowc(["check", "--untrusted", str(flow)], capsys)
    assert code == 1 and "error[E0953]" in err
    inside = files_program("data/in")
    job = flowc.compile(inside, str(flow), trusted=False, base_dir=str(tmp_path))
    assert job.trust.base(str(flow)) == str(tmp_path.resolve())
    flow.write_text(inside, encoding="utf-8")
    code, err = run_flowc(["check", "--untrusted", "--base-dir", str(tmp_path), str(flow)], capsys)
    assert code == 0 and "error" not in err
    # A path given with --set is checked as written there.
    error = the_error(
        inside, "E0953", filename=str(flow), base_dir=str(tmp_path), overrides={"o.path": "../x"}
    )
    assert (error.span.file, error.span.line, error.span.column) == (COMMAND_LINE, 1, 14)
    assert error.message.startswith("--set o.path=../x: the path '../x' of sink 'o'")


def test_examples_compile_untrusted() -> None:
    examples = sorted((Path(__file__).parent.parent / "examples").glob("*.flow"))
    assert len(examples) > 5
    for path in examples:
        text = path.read_text(encoding="utf-8")
        # The platform allows the Python functions it reviewed (E0956 otherwise).
        allowed = {f.target for f in flowc.compile(text, str(path)).program.functions}
        flowc.compile(text, str(path), for_spark=True, trusted=False, allowed_functions=allowed)
    with pytest.raises(flowc.CompileError) as refused:
        path = examples[0].parent / "bid_fees.flow"
        flowc.compile(path.read_text(encoding="utf-8"), str(path), for_spark=True, trusted=False)
    assert {d.code for d in refused.value.diagnostics} == {"E0956"}


def test_the_json_format_carries_trust_diagnostics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flow = tmp_path / "job.flow"
    flow.write_text(ENV, encoding="utf-8")
    assert main(["check", "--untrusted", "--format", "json", str(flow)]) == 1
    document = json.loads(capsys.readouterr().out)
    [diagnostic] = [d for d in document["diagnostics"] if d["severity"] == "error"]
    assert (diagnostic["code"], diagnostic["line"], diagnostic["column"]) == ("E0952", 3, 40)
