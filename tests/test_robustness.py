"""Hostile input never crashes flowc: deep nesting, huge files, odd bytes, empty files."""

from __future__ import annotations

from pathlib import Path

import pytest

import flowc
from flowc.cli.main import main

HEADER = (
    "CREATE SOURCE s (k BIGINT) WITH (connector = 'datagen');\n"
    "CREATE SINK o WITH (connector = 'console');\n"
)


def _codes(text: str) -> list[str]:
    try:
        flowc.compile(text, "t.flow")
    except flowc.CompileError as error:
        return [d.code for d in error.diagnostics if d.severity == "error"]
    return []


@pytest.mark.parametrize("depth", [65, 1000, 20_000])
def test_deep_nesting_is_a_diagnostic(depth: int) -> None:
    text = HEADER + "INSERT INTO o FROM s |> WHERE " + "(" * depth + "k > 1" + ")" * depth + ";\n"
    assert _codes(text) == ["E0004"]


def test_nesting_up_to_the_limit_compiles() -> None:
    text = HEADER + "INSERT INTO o FROM s |> WHERE " + "(" * 64 + "k > 1" + ")" * 64 + ";\n"
    assert _codes(text) == []


def test_deep_case_nesting_is_a_diagnostic() -> None:
    expr = "CASE WHEN k > 1 THEN " * 200 + "true" + " END" * 200
    assert _codes(HEADER + f"INSERT INTO o FROM s |> WHERE {expr};\n") == ["E0004"]


def test_very_long_flat_expression_does_not_crash() -> None:
    text = HEADER + "INSERT INTO o FROM s |> WHERE k > " + "+".join(["1"] * 5000) + ";\n"
    assert _codes(text) in ([], ["E0004"])


def test_huge_file_compiles() -> None:
    views = "".join(
        f"CREATE VIEW v{i} AS FROM {'s' if i == 0 else f'v{i - 1}'} |> WHERE k > {i};\n"
        for i in range(500)
    )
    job = flowc.compile(HEADER + views + "INSERT INTO o FROM v499;\n", "big.flow")
    assert len(job.program.views) == 500


def test_many_errors_are_all_reported() -> None:
    lines = "".join(f"INSERT INTO o FROM s |> WHERE nope{i} > 1;\n" for i in range(300))
    codes = _codes(HEADER + lines)
    assert codes == ["E0201"] * 300


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n\n  ",
        "-- only a comment",
        "/* never closed",
        ";;;;",
        "\x00\x01\x02",
        "CREATE",
        "CREATE SOURCE",
        "INSERT INTO o FROM s |> WHERE k = 'unterminated",
        "INSERT INTO o FROM s |> WHERE k = `unterminated",
        "SET parallelism = ;",
        "\ufeffSET parallelism = 1;",
        "SELECT * FROM nope;",  # a query statement (shown on the console) of nothing defined
        "CREATE VIEW v AS FROM v;",
        ")))(((",
        "INSERT INTO o FROM s |> " + "|> " * 1000,
        "é" * 10_000,
    ],
)
def test_odd_input_gives_diagnostics(text: str) -> None:
    codes = _codes(HEADER + text)
    assert codes, "expected at least one error"


def test_invalid_utf8_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.flow"
    path.write_bytes(HEADER.encode() + b"\xc3\x28\n")
    assert main(["check", str(path)]) == 2
    assert "not valid UTF-8" in capsys.readouterr().err


def test_unterminated_block_comment_is_named() -> None:
    try:
        flowc.compile(HEADER + "INSERT INTO o FROM s;\n/* never closed\n", "t.flow")
    except flowc.CompileError as error:
        assert [d.message for d in error.diagnostics] == [
            "syntax error: unterminated block comment"
        ]
    else:
        pytest.fail("no error")


# Regressions found by fuzzing (tests/test_fuzz.py).


def test_statement_inside_an_expression_is_a_diagnostic() -> None:
    assert _codes(HEADER + "INSERT INTO o FROM s |> WHERE (DROP TABLE x);\n") != []


def test_aggregate_over_unknown_typed_argument_does_not_crash() -> None:
    text = HEADER + "INSERT INTO o FROM s |> KEY BY k |> AGGREGATE min(nullif(k, k)) AS m;\n"
    assert _codes(text) == []


@pytest.mark.parametrize(
    "job_name",
    ['\'\' """', "back\\\\slash", "\\\\N{x}", 'ends with a quote"'],
)
def test_hostile_names_in_the_generated_program_docstrings(job_name: str) -> None:
    """The job name, the file name and a source name are written into docstrings of the
    PySpark program: quotes and backslashes there must not end or break them."""
    import ast as pyast

    from flowc.spark.codegen import generate_pyspark

    text = (
        f"SET job.name = '{job_name}';\n"
        'CREATE SOURCE `tri"""ple \\N` (k BIGINT) WITH (connector = \'datagen\');\n'
        "CREATE SINK o WITH (connector = 'console');\n"
        'INSERT INTO o FROM `tri"""ple \\N`;\n'
    )
    job = flowc.compile(text, 'say """hi""" \\x.flow', for_spark=True)
    module = pyast.parse(generate_pyspark(job))
    docstring = pyast.get_docstring(module) or ""
    assert docstring.startswith(f"{job.program.settings.job_name}: a PySpark")
    assert 'Source: say """hi""" \\x.flow.' in docstring
    functions = [node for node in module.body if isinstance(node, pyast.FunctionDef)]
    docstrings = [pyast.get_docstring(function) for function in functions]
    assert 'Source \'tri"""ple \\\\N\' (datagen).' in docstrings


@pytest.mark.parametrize(
    ("text", "code"),
    [
        (f"SET checkpoint.interval = {'9' * 400}s;\n", "E0302"),
        (f"SET checkpoint.interval = '{'9' * 400} seconds';\n", "E0302"),
        (
            "CREATE SOURCE t (k BIGINT) WITH (connector = 'datagen', rows_per_second = 1e309);\n",
            "E0405",
        ),
        ("INSERT INTO o FROM s |> SELECT map(k) AS m;\n", "E0003"),
        ("INSERT INTO o SELECT var_map(k, 1, k) AS m FROM s;\n", "E0003"),
        ("INSERT INTO o FROM s |> WHERE ceil() > 1;\n", "E0003"),
        ("INSERT INTO o FROM s |> EXTEND floor() AS f;\n", "E0003"),
    ],
)
def test_numbers_and_calls_that_overflow_or_break_sqlglot_are_diagnostics(
    text: str, code: str
) -> None:
    """Found by the soak: a duration or number beyond a float, and function calls sqlglot's
    parser or type rules index past their arguments, crashed flowc."""
    assert code in _codes(HEADER + text)


def test_types_sqlglot_cannot_build_are_unknown_not_a_crash() -> None:
    text = HEADER + "INSERT INTO o FROM s |> SELECT j_s_o_n_cast(k, k) AS j;\n"
    assert _codes(text) == []


@pytest.mark.parametrize(
    "call", ["regexp_replace(n, 'a')", "j_s_o_n_object(k)", "x_m_l_table(k, n)"]
)
def test_calls_sqlglot_cannot_write_as_spark_sql_are_not_runnable(
    call: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found by the soak: sqlglot types these calls but cannot write them back as Spark SQL
    (it assumes arguments that are missing); --emit pyspark said so with a traceback."""
    path = tmp_path / "t.flow"
    path.write_text(
        "CREATE SOURCE s (k BIGINT, n STRING) WITH (connector = 'datagen');\n"
        "CREATE SINK o WITH (connector = 'console');\n"
        f"INSERT INTO o FROM s |> EXTEND {call} AS r;\n",
        encoding="utf-8",
    )
    assert main(["compile", str(path), "--emit", "pyspark"]) == 1
    err = capsys.readouterr().err
    assert f"cannot write '{call}' in Spark SQL" in err
    assert "Traceback" not in err
