"""``flowc fmt`` (issue 15, item 4): the canonical layout, comments kept, idempotent, and
never a change to what a program compiles to.

Cases are input/expected pairs; every example and hypothesis's generated programs and
token mutants of the examples are formatted twice (the second pass changes nothing) and
compiled before and after: every stage's JSON but the AST's must be the same, spans
left out (they say where in the file, which formatting moves), and a program that does
not compile must fail with the same codes. A program
that does not parse is not formatted, and nothing crashes.
"""

from __future__ import annotations

import io
import json
import re
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from fuzzing import EXAMPLES
from hypothesis import HealthCheck, given, settings

import flowc
from flowc.cli.compile import render_stage
from flowc.cli.main import main
from flowc.diagnostics import CompileError
from flowc.formatter import TokenKind, format_program, significant, tokens
from tests.helpers.strategies import programs, token_mutants

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = sorted((ROOT / "examples").glob("*.flow"))
STAGES = ("transformations", "streamgraph", "jobgraph", "physical")
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))


def formatted(text: str) -> str:
    result = format_program(text, "job.flow")
    assert result.text is not None, result.diagnostics
    return result.text


def without_spans(data: object) -> object:
    """A stage's JSON without its ``span`` objects: where in the file, not what it plans."""
    if isinstance(data, dict):
        return {k: without_spans(v) for k, v in data.items() if k != "span"}
    if isinstance(data, list):
        return [without_spans(v) for v in data]
    if isinstance(data, str):  # a position written in a line of text ("line 21:13: ...")
        return re.sub(r"\bline \d+(:\d+)?", "line ?", data)
    return data


def outcome(text: str, file: str) -> dict[str, object] | list[str]:
    """Every stage's JSON (spans left out), or the codes of the errors that stop the
    compile."""
    try:
        job = flowc.compile(text, file)
    except CompileError as error:
        return sorted(d.code for d in error.diagnostics)
    return {stage: without_spans(json.loads(render_stage(job, stage, "json"))) for stage in STAGES}


def comments(text: str) -> list[str]:
    return [
        t.text.rstrip()
        for t in tokens(text)
        if t.kind in (TokenKind.LINE_COMMENT, TokenKind.BLOCK_COMMENT)
    ]


def assert_formats_safely(text: str, file: str = "job.flow") -> None:
    result = format_program(text, file)
    if result.text is None:
        assert result.diagnostics  # refused, with the reason
        return
    assert formatted(result.text) == result.text  # idempotent
    assert significant(result.text) == significant(text)
    assert comments(result.text) == comments(text)
    assert outcome(result.text, file) == outcome(text, file)


# ---------------------------------------------------------------- input / expected

CASES = [
    (
        "one_line_pipe",
        "INSERT INTO o FROM s |> WHERE x > 1 |> SELECT x;",
        "INSERT INTO o FROM s\n  |> WHERE x > 1\n  |> SELECT x;\n",
    ),
    (
        "spaces_collapse_and_glued_tokens_stay_glued",
        "SET   parallelism   =  2 ;\nINSERT INTO o FROM s |> SELECT count(*)   AS n,a.b,f(x,y);",
        "SET parallelism = 2 ;\nINSERT INTO o FROM s\n  |> SELECT count(*) AS n, a.b, f(x, y);\n",
    ),
    (
        "blank_lines_between_statements_collapse_to_one",
        "SET a = 1;\n\n\n\nSET b = 2;\nSET c = 3;",
        "SET a = 1;\n\nSET b = 2;\nSET c = 3;\n",
    ),
    (
        "brackets_indent_from_their_opening_line",
        "CREATE SOURCE s (\n      a INT,\n b    STRING\n    ) WITH (connector = 'datagen');",
        "CREATE SOURCE s (\n  a INT,\n  b STRING\n) WITH (connector = 'datagen');\n",
    ),
    (
        "a_steps_further_lines_indent_by_five",
        "INSERT INTO o FROM s |> AGGREGATE count(*) AS n\nWITH (parallelism = 2,\nuid = 'u');",
        "INSERT INTO o FROM s\n  |> AGGREGATE count(*) AS n\n     WITH (parallelism = 2,\n"
        "       uid = 'u');\n",
    ),
    (
        "comments_keep_their_place",
        "-- head\n/* block\n   two lines */\nSET a = 1;   -- after\n"
        "INSERT INTO o -- sink\n FROM s /* inline */ |> WHERE x > 1;--end   ",
        "-- head\n/* block\n   two lines */\nSET a = 1;  -- after\n"
        "INSERT INTO o  -- sink\n  FROM s  /* inline */\n  |> WHERE x > 1;  --end\n",
    ),
    (
        "strings_and_quoted_names_are_kept_whole",
        "INSERT INTO o FROM s |> WHERE `a  b` = 'x  |>  y'\n|> SELECT \"two\nlines\"  AS t;",
        "INSERT INTO o FROM s\n  |> WHERE `a  b` = 'x  |>  y'\n  |> SELECT \"two\nlines\" AS t;\n",
    ),
    (
        "windows_line_ends",
        "SET a = 1;\r\n\r\nSET b = 2;\r\n",
        "SET a = 1;\n\nSET b = 2;\n",
    ),
    (
        "set_step_like_any_step",
        "INSERT INTO o FROM s |> SET a = a + 1,b = upper(b)\nWITH (name = 'x') |>\nSET c = 2;",
        "INSERT INTO o FROM s\n  |> SET a = a + 1, b = upper(b)\n     WITH (name = 'x')\n  |>\n"
        "     SET c = 2;\n",
    ),
    (
        "word_case_is_kept",
        "insert into o from s |> select Key, KEY2;",
        "insert into o from s\n  |> select Key, KEY2;\n",
    ),
]


@pytest.mark.parametrize(("name", "text", "expected"), CASES, ids=[c[0] for c in CASES])
def test_layout(name: str, text: str, expected: str) -> None:
    from flowc.formatter import layout

    assert layout(text) == expected
    assert layout(expected) == expected


def test_a_syntax_error_is_not_formatted() -> None:
    result = format_program("CREATE SOURCE s (a INT WITH (connector = 'datagen');\n", "bad.flow")
    assert result.text is None
    assert [d.code for d in result.diagnostics] == ["E0001"]
    assert result.diagnostics[0].span.file == "bad.flow"


# ---------------------------------------------------------------- the examples


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.name)
def test_examples_are_formatted_and_formatting_keeps_their_plans(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert formatted(text) == text, f"run: flowc fmt {path.relative_to(ROOT)}"
    messy = "".join(  # the same program, badly laid out
        t.text.replace(" ", "  ").replace("\n", "\n   ") if t.kind is TokenKind.SPACE else t.text
        for t in tokens(text)
    )
    assert messy != text
    assert formatted(messy) == text
    assert outcome(messy, str(path)) == outcome(text, str(path))


def test_every_example_keeps_its_comments_and_plans() -> None:
    for file, text in EXAMPLES.items():
        assert_formats_safely(text, file)


def test_a_set_step_formats_safely() -> None:
    """``|> SET`` laid out, a SET after a ``|>`` that ends its line included: the same
    plans before and after, and a second pass changes nothing."""
    text = (
        "CREATE SOURCE s (a INT, b STRING, c BIGINT) WITH (connector = 'datagen');\n"
        "CREATE SINK o WITH (connector = 'console');\n"
        "INSERT INTO o FROM s |> SET a = a + 1,b = upper(b) WITH (name = 'x') |>\n"
        "SET c = a |> WHERE c > 0;\n"
    )
    assert isinstance(outcome(text, "job.flow"), dict)  # it compiles
    assert formatted(text) != text
    assert_formats_safely(text)


# ---------------------------------------------------------------- fuzzed programs


@FUZZ
@given(programs())
def test_generated_programs_format_safely(text: str) -> None:
    assert_formats_safely(text)


@FUZZ
@given(token_mutants())
def test_token_mutants_format_safely(text: str) -> None:
    assert_formats_safely(text)


# ---------------------------------------------------------------- the command


def run(*argv: str, stdin: str = "") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    old = __import__("sys").stdin
    __import__("sys").stdin = io.StringIO(stdin)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            code = main(list(argv))
    finally:
        __import__("sys").stdin = old
    return code, out.getvalue(), err.getvalue()


def test_check_passes_on_the_examples() -> None:
    code, out, err = run("fmt", "--check", *map(str, PROGRAMS))
    assert (code, out, err) == (0, "", "")


def test_check_and_diff_tell_and_rewrite_nothing(tmp_path: Path) -> None:
    job = tmp_path / "job.flow"
    job.write_text("SET a = 1;   SET b = 2;\n", encoding="utf-8")
    code, out, err = run("fmt", "--check", "--diff", str(tmp_path))
    assert code == 1 and f"would reformat {job}" in err
    assert "-SET a = 1;   SET b = 2;\n+SET a = 1;\n+SET b = 2;\n" in out
    assert job.read_text(encoding="utf-8") == "SET a = 1;   SET b = 2;\n"
    code, out, err = run("fmt", str(job))
    assert (code, f"reformatted {job}") == (0, err.strip())
    assert job.read_text(encoding="utf-8") == "SET a = 1;\nSET b = 2;\n"
    assert run("fmt", "--check", str(job)) == (0, "", "")


def test_standard_input_to_standard_output() -> None:
    assert run("fmt", "-", stdin="SET a  =  1;") == (0, "SET a = 1;\n", "")


def test_a_file_with_a_syntax_error_is_left_alone(tmp_path: Path) -> None:
    job = tmp_path / "bad.flow"
    job.write_text("CREATE VIEW v AS FROM s |> ;\n", encoding="utf-8")
    code, out, err = run("fmt", "--color", "never", str(job))
    assert code == 1
    assert "error[E0001]" in out + err and f"{job}:1:28" in out + err
    assert job.read_text(encoding="utf-8") == "CREATE VIEW v AS FROM s |> ;\n"


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    assert run("fmt", str(tmp_path / "missing.flow"))[0] == 2
    assert run("fmt", "-", "x.flow")[0] == 2
