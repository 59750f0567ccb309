"""The trust model holds against the layers below flowc (docs/security.md, "Layers below
flowc"): each escape an outside tester measured is shown real on Spark with the protection
off, and refused or neutralized with it on.

- Spark's SQL variable substitution: ``'${system:user.dir}'`` read the JVM's properties,
  and an unset ``${hivevar:x}`` in a comment made the comment's ``reflect(...)`` code.
  flowc jobs run with substitution off; untrusted, ``${`` is refused (E0958).
- The look for symbolic links that could not finish (10,001 entries) allowed the path;
  now it refuses it (E0959).
- An allowed ``json:dumps`` ran the base directory's json.py, and the base directory
  stayed on ``sys.path``; untrusted, installed modules come first, and the path is
  restored in every mode.
- W0020 looked for a relative path beside the .flow file, outside ``--base-dir``.
"""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path
from typing import Any

import pytest

import flowc
from flowc import Diagnostic, Severity
from flowc.runtime.run import run_job
from flowc.spark.codegen import generate_pyspark

SOURCE = "CREATE SOURCE s (v STRING) WITH (connector = 'files', path = 'in', format = 'json');\n"


def errors(text: str, filename: str = "job.flow", **options: Any) -> list[Diagnostic]:
    with pytest.raises(flowc.CompileError) as refused:
        flowc.compile(text, filename, for_spark=True, trusted=False, **options)
    return [d for d in refused.value.diagnostics if d.severity is Severity.ERROR]


def under(text: str, diagnostic: Diagnostic) -> str:
    span = diagnostic.span
    assert span.end_line == span.line
    return text.split("\n")[span.line - 1][span.column - 1 : span.end_column - 1]


def run(folder: Path, program: str, *, trusted: bool = True, **options: Any) -> None:
    """Run ``program`` from ``folder`` (its base directory) on the shared session."""
    flow = folder / "job.flow"
    flow.write_text(program, encoding="utf-8")
    job = flowc.compile(program, str(flow), for_spark=True, trusted=trusted, **options)
    report = run_job(job, available_now=True, master="local[2]", out=io.StringIO())
    assert [q.error for q in report.queries] == [None] * len(report.queries)


def with_input(folder: Path) -> Path:
    (folder / "in").mkdir()
    (folder / "in" / "a.json").write_text('{"v": "a"}\n', encoding="utf-8")
    return folder


@pytest.fixture
def substitution_on(spark: Any) -> Any:
    """The shared session with Spark's default: variable substitution on."""
    spark.conf.set("spark.sql.variable.substitute", "true")
    yield spark
    spark.conf.set("spark.sql.variable.substitute", "false")


def spark_sql(text: str) -> str:
    """The Spark SQL flowc writes for an expression (what it hands to F.expr)."""
    import sqlglot

    return str(sqlglot.parse_one(text, read="spark").sql(dialect="spark", identify=True))


# ---------------------------------------------------------------- variable substitution

PROPERTY = "'${system:user.dir}'"
PROPERTY_JOB = (
    f"{SOURCE}CREATE SINK layers_property WITH (connector = 'memory');\n"
    f"INSERT INTO layers_property FROM s |> EXTEND {PROPERTY} AS d;\n"
)


def test_a_variable_in_a_string_reads_jvm_properties_with_substitution_on(
    substitution_on: Any,
) -> None:
    """The escape is real: Spark replaces the literal flowc hands it."""
    from pyspark.sql import functions as F

    row = substitution_on.range(1).select(F.expr(spark_sql(PROPERTY)).alias("d")).collect()[0]
    assert row.d == os.getcwd()


def test_flowc_jobs_run_with_substitution_off(substitution_on: Any, tmp_path: Path) -> None:
    """The same literal in a job is the string written, on a session that had it on; the
    session has it on again after the run (run_job puts an application's settings back)."""
    run(with_input(tmp_path), PROPERTY_JOB)
    rows = substitution_on.sql("SELECT v, d FROM layers_property").collect()
    assert [(r.v, r.d) for r in rows] == [("a", "${system:user.dir}")]
    assert substitution_on.conf.get("spark.sql.variable.substitute") == "true"


@pytest.mark.parametrize(
    ("expression", "marked"),
    [
        (PROPERTY, "${system:user.dir}"),
        ("'${env:HOME}'", "${env:HOME}"),
        ("concat(v, '${spark:spark.app.name}')", "${spark:spark.app.name}"),
        ("'$\\{env:HOME}'", "'$\\{env:HOME}'"),
        ("'\\u0024{env:HOME}'", "'\\u0024{env:HOME}'"),
        ("'\\044{env:HOME}'", "'\\044{env:HOME}'"),
    ],
)
def test_a_variable_in_an_untrusted_expression_is_refused(expression: str, marked: str) -> None:
    text = f"{SOURCE}CREATE SINK o WITH (connector = 'console');\n"
    text += f"INSERT INTO o FROM s |> EXTEND {expression} AS d;\n"
    [error] = errors(text)
    assert (error.code, under(text, error)) == ("E0958", marked)
    assert "variable substitution" in error.message and error.help


HIDDEN = (
    "concat(v -- *${hivevar:x}/, reflect('java.lang.System', 'getProperty', 'user.dir')"
    " /${hivevar:x}*\n)"
)
HIDDEN_JOB = (
    f"{SOURCE}CREATE SINK layers_comment WITH (connector = 'memory');\n"
    f"INSERT INTO layers_comment FROM s |> EXTEND {HIDDEN} AS h;\n"
)


def test_a_comment_becomes_code_with_substitution_on(substitution_on: Any) -> None:
    """The escape is real: the empty ${hivevar:x} closes the comment early, and the
    reflect(...) flowc saw as a comment runs."""
    from pyspark.sql import functions as F

    written = spark_sql(HIDDEN)
    assert "/*" in written and "reflect" in written  # a comment, as sqlglot writes it
    df = substitution_on.createDataFrame([("a",)], "v STRING")
    assert df.select(F.expr(written).alias("h")).collect()[0].h == "a" + os.getcwd()


def test_a_comment_stays_a_comment_in_flowc_jobs(substitution_on: Any, tmp_path: Path) -> None:
    run(with_input(tmp_path), HIDDEN_JOB)
    assert [r.h for r in substitution_on.sql("SELECT h FROM layers_comment").collect()] == ["a"]


def test_a_variable_in_a_comment_is_refused_untrusted() -> None:
    found = errors(HIDDEN_JOB)
    assert [(d.code, under(HIDDEN_JOB, d)) for d in found] == [("E0958", "${hivevar:x}")] * 2
    assert {d.span.line for d in found} == {3}


@pytest.mark.parametrize(
    ("program", "marked"),
    [
        (
            "CREATE SOURCE s (v STRING) WITH (connector = 'files', path = 'in', format = 'csv',"
            " date_format = 'yyyy${env:HOME}');\nCREATE SINK o WITH (connector = 'console');\n"
            "INSERT INTO o FROM s;\n",
            "${env:HOME}",
        ),
        (
            f"{SOURCE}CREATE SINK o WITH (connector = 'console');\n"
            "INSERT INTO o FROM s |> EXTEND v AS `x${env:HOME}`;\n",
            "`x${env:HOME}`",
        ),
        (
            f"SET job.name = 'j${{system:user.name}}';\n{SOURCE}"
            "CREATE SINK o WITH (connector = 'console');\nINSERT INTO o FROM s;\n",
            "${system:user.name}",
        ),
        (
            f"{SOURCE}CREATE SINK o WITH (connector = 'console');\n"
            "INSERT INTO o SELECT v, '${env:HOME}' AS d FROM s;\n",
            "${env:HOME}",
        ),
    ],
)
def test_a_variable_anywhere_spark_gets_it_is_refused(program: str, marked: str) -> None:
    """Options, names, settings and SQL queries: each place is named."""
    [error] = errors(program)
    assert (error.code, under(program, error)) == ("E0958", marked)


def test_a_variable_in_a_set_value_is_refused_on_the_command_line() -> None:
    text = f"{SOURCE}CREATE SINK o WITH (connector = 'console');\nINSERT INTO o FROM s;\n"
    [error] = errors(text, overrides={"s.date_format": "${env:HOME}"})
    assert (error.code, error.span.line) == ("E0958", 1)
    assert error.message.startswith("--set s.date_format=${env:HOME}: ")


def test_comments_between_statements_never_reach_spark() -> None:
    text = f"-- ${{env:HOME}} is Spark's syntax\n{SOURCE}"
    text += "CREATE SINK o WITH (connector = 'console');\nINSERT INTO o FROM s;\n"
    flowc.compile(text, "job.flow", for_spark=True, trusted=False)


def test_turning_substitution_on_is_refused_trusted() -> None:
    text = "SET spark.sql.variable.substitute = true;\n"
    text += f"{SOURCE}CREATE SINK o WITH (connector = 'console');\nINSERT INTO o FROM s;\n"
    with pytest.raises(flowc.CompileError) as refused:
        flowc.compile(text, "job.flow", for_spark=True)
    [error] = refused.value.diagnostics
    assert (error.code, under(text, error)) == ("E0958", "true")
    assert [d.code for d in errors(text)] == ["E0951"]  # untrusted: not on the allow-list


def test_the_generated_program_turns_substitution_off_before_any_sql() -> None:
    text = PROPERTY_JOB
    job = flowc.compile(text, "job.flow", for_spark=True)
    program = generate_pyspark(job)
    body = program.split("def start_queries(", 1)[1]
    first = body.index("no_variable_substitution(spark)")
    assert first < body.index("F.expr(")
    session = program.split("def start_session(", 1)[1].split("\ndef ", 1)[0]
    assert session.index("getOrCreate()") < session.index("no_variable_substitution(spark)")
    assert "spark.conf.set('spark.sql.variable.substitute', 'false')" in program


# ---------------------------------------------------------------- a look that cannot finish


def planted(base: Path, folders: int) -> Path:
    """``base/in`` with ``folders`` empty folders and a link to a secret outside ``base``."""
    (base / "in").mkdir(parents=True)
    for index in range(folders):
        (base / "in" / f"d{index:05d}").mkdir()
    secret = base.parent / "secret.json"
    secret.write_text('{"v": "SECRET"}\n', encoding="utf-8")
    (base / "in" / "zz.json").symlink_to(secret)
    return base


SCAN_JOB = (
    f"{SOURCE}CREATE SINK layers_scan WITH (connector = 'memory');\n"
    "INSERT INTO layers_scan FROM s;\n"
)


def test_a_link_past_the_scan_limit_is_refused(tmp_path: Path) -> None:
    base = planted(tmp_path / "base", 10_001)
    [error] = errors(SCAN_JOB, str(base / "job.flow"))
    assert (error.code, under(SCAN_JOB, error)) == ("E0959", "'in'")
    assert "more than 10,000 entries" in error.message
    assert str(tmp_path) not in error.message + str(error.help)
    # Below the limit, the link itself is found.
    small = planted(tmp_path / "small" / "base", 3)
    [error] = errors(SCAN_JOB, str(small / "job.flow"))
    assert (error.code, error.message.endswith("(in/zz.json)")) == ("E0953", True)


def test_spark_reads_a_link_past_the_scan_limit(spark: Any, tmp_path: Path) -> None:
    """The escape is real: where flowc does not look (trusted here; untrusted past the
    limit, before), Spark follows the planted link (a few folders: Spark lists 10,001
    slowly, and the count changes nothing for Spark)."""
    run(planted(tmp_path / "base", 3), SCAN_JOB)
    assert [r.v for r in spark.sql("SELECT v FROM layers_scan").collect()] == ["SECRET"]


def test_a_folder_that_cannot_be_listed_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = planted(tmp_path / "base", 1)
    walk = os.walk

    def unlistable(top: str, onerror: Any = None, followlinks: bool = False) -> Any:
        for root, dirs, files in walk(top, followlinks=followlinks):
            if onerror is not None and dirs:
                denied = os.path.join(root, dirs[0])
                onerror(PermissionError(13, "Permission denied", denied))
                return
            yield root, dirs, files

    monkeypatch.setattr("flowc.trust.paths.os.walk", unlistable)
    [error] = errors(SCAN_JOB, str(base / "job.flow"))
    assert error.code == "E0959"
    assert "cannot list (in/d00000: Permission denied)" in error.message


# ---------------------------------------------------------------- Python functions

SHADOW = "def dumps(value):\n    return 'SHADOWED'\n"
DUMPS_JOB = (
    "CREATE FUNCTION as_json(v STRING) RETURNS STRING LANGUAGE python AS 'json:dumps';\n"
    f"{SOURCE}CREATE SINK {{sink}} WITH (connector = 'memory');\n"
    "INSERT INTO {sink} FROM s |> EXTEND as_json(v) AS j;\n"
)


def test_a_base_directory_file_shadows_an_installed_module_when_trusted(
    spark: Any, tmp_path: Path
) -> None:
    """The escape is real: the base directory's json.py runs for json:dumps (trusted, the
    job's folder comes first, as for a script); the path is restored afterwards."""
    (with_input(tmp_path) / "json.py").write_text(SHADOW, encoding="utf-8")
    before = list(sys.path)
    run(tmp_path, DUMPS_JOB.format(sink="layers_shadowed"))
    assert [r.j for r in spark.sql("SELECT j FROM layers_shadowed").collect()] == ["SHADOWED"]
    assert sys.path == before


def test_untrusted_functions_never_shadow_installed_modules(spark: Any, tmp_path: Path) -> None:
    (with_input(tmp_path) / "json.py").write_text(SHADOW, encoding="utf-8")
    before = list(sys.path)
    run(
        tmp_path,
        DUMPS_JOB.format(sink="layers_installed"),
        trusted=False,
        allowed_functions={"json:dumps"},
    )
    assert [r.j for r in spark.sql("SELECT j FROM layers_installed").collect()] == ['"a"']
    assert sys.path == before and str(tmp_path) not in sys.path


def test_a_module_of_the_base_directory_still_loads_untrusted(spark: Any, tmp_path: Path) -> None:
    """A module that is not installed comes from the base directory; its sibling loads,
    and neither stays importable in the platform's process."""
    with_input(tmp_path)
    (tmp_path / "layers_helper.py").write_text("def tag(v):\n    return v + '!'\n")
    (tmp_path / "layers_mod.py").write_text(
        "import layers_helper\n\ndef shout(v):\n    return layers_helper.tag(v.upper())\n"
    )
    program = (
        "CREATE FUNCTION shout(v STRING) RETURNS STRING LANGUAGE python AS 'layers_mod:shout';\n"
        f"{SOURCE}CREATE SINK layers_own WITH (connector = 'memory');\n"
        "INSERT INTO layers_own FROM s |> EXTEND shout(v) AS j;\n"
    )
    run(tmp_path, program, trusted=False, allowed_functions={"layers_mod:shout"})
    assert [r.j for r in spark.sql("SELECT j FROM layers_own").collect()] == ["A!"]
    assert "layers_helper" not in sys.modules and str(tmp_path) not in sys.path


def test_the_check_reads_the_installed_module_untrusted(tmp_path: Path) -> None:
    """flowc check looks where the job loads from: the installed json, not json.py."""
    (tmp_path / "json.py").write_text("x = 1\n", encoding="utf-8")
    text = DUMPS_JOB.format(sink="o").replace("'json:dumps'", "'json:nothing_such'")
    flow = str(tmp_path / "job.flow")
    [error] = errors(text, flow, allowed_functions={"json:nothing_such"})
    assert error.code == "E0282" and "__init__.py defines no 'nothing_such'" in str(error.help)
    trusted = flowc.compile(DUMPS_JOB.format(sink="o"), flow, for_spark=False)
    assert trusted.program.functions[0].module == "json"


def test_a_module_file_linked_out_of_the_base_directory_is_refused(tmp_path: Path) -> None:
    base = tmp_path / "base"
    base.mkdir()
    outside = tmp_path / "elsewhere.py"
    outside.write_text("def band(v):\n    return v\n", encoding="utf-8")
    (base / "layers_linked.py").symlink_to(outside)
    text = (
        "CREATE FUNCTION band(v STRING) RETURNS STRING LANGUAGE python"
        " AS 'layers_linked:band';\n"
        f"{SOURCE}CREATE SINK o WITH (connector = 'console');\n"
        "INSERT INTO o FROM s |> EXTEND band(v) AS b;\n"
    )
    [error] = errors(text, str(base / "job.flow"), allowed_functions={"layers_linked:band"})
    assert (error.code, under(text, error)) == ("E0960", "'layers_linked:band'")


# ---------------------------------------------------------------- W0020 inside the base directory


def test_the_missing_path_warning_looks_only_in_the_base_directory(tmp_path: Path) -> None:
    """Beside the .flow file (outside --base-dir) 'in' exists, in the base directory it
    does not: W0020 says so, and names no folder outside the base directory."""
    jobs, base = tmp_path / "jobs", tmp_path / "base"
    (jobs / "in").mkdir(parents=True)
    base.mkdir()
    text = f"{SOURCE}CREATE SINK o WITH (connector = 'console');\nINSERT INTO o FROM s;\n"
    flow = jobs / "job.flow"
    flow.write_text(text, encoding="utf-8")
    job = flowc.compile(text, str(flow), for_spark=True, trusted=False, base_dir=str(base))
    [warning] = job.diagnostics
    assert warning.code == "W0020" and str(base / "in") in warning.message
    assert str(jobs) not in warning.message
    # The other way round: in the base directory, not beside the file: no warning.
    (base / "in").mkdir()
    (jobs / "in").rmdir()
    job = flowc.compile(text, str(flow), for_spark=True, trusted=False, base_dir=str(base))
    assert job.diagnostics == ()
