"""``flowc compile --emit STAGE --format FORMAT [-o PATH]``: exit codes, outputs, files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from stages import COMBINATIONS, EMITTED, ROOT, STAGE_FORMATS

from flowc.cli.main import main

CLEAN = "examples/wordcount.flow"  # compiles without warnings
WARNS = "examples/clicks_per_user.flow"  # at parallelism 100 (not 8): a W0001 warning
BROKEN = "examples/errors/unknown_column.flow"
SYNTAX_ERROR = "examples/errors/syntax.flow"

SUPPORTED = COMBINATIONS
UNSUPPORTED = [
    (stage, fmt)
    for stage in STAGE_FORMATS
    for fmt in ("text", "json", "dot", "mermaid")
    if fmt not in STAGE_FORMATS[stage]
]
HEADERS = {"dot": "digraph ", "mermaid": "flowchart "}


@pytest.fixture(autouse=True)
def _at_repository_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


def _ids(pairs: list[tuple[str, str]]) -> list[str]:
    return [f"{stage}-{fmt}" for stage, fmt in pairs]


@pytest.mark.parametrize(("stage", "fmt"), SUPPORTED, ids=_ids(SUPPORTED))
def test_every_supported_combination_exits_0(
    stage: str, fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compile", CLEAN, "--emit", stage, "--format", fmt]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    assert captured.out.endswith("\n") and captured.out.strip()
    if fmt == "json":
        assert json.loads(captured.out)["stage"] == stage
    elif fmt in HEADERS:
        assert captured.out.startswith(HEADERS[fmt])


def test_defaults_are_ast_and_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compile", CLEAN]) == 0
    default = capsys.readouterr().out
    assert main(["compile", CLEAN, "--emit", "ast", "--format", "text"]) == 0
    assert capsys.readouterr().out == default
    assert default.startswith("Program")


@pytest.mark.parametrize(("stage", "fmt"), UNSUPPORTED, ids=_ids(UNSUPPORTED))
def test_unsupported_combination_is_a_usage_error(
    stage: str, fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compile", CLEAN, "--emit", stage, "--format", fmt]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"error: --emit {stage} has no --format {fmt}" in captured.err
    assert "Traceback" not in captured.err
    target = tmp_path / "out"
    assert main(["compile", CLEAN, "--emit", stage, "--format", fmt, "-o", str(target)]) == 2
    assert not target.exists()


@pytest.mark.parametrize("arguments", [["--emit", "pyspark2"], ["--format", "xml"]])
def test_unknown_stage_or_format_is_a_usage_error(
    arguments: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compile", CLEAN, *arguments]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "invalid choice" in captured.err


@pytest.mark.parametrize(("stage", "fmt"), SUPPORTED, ids=_ids(SUPPORTED))
def test_output_file_gets_what_stdout_would(
    stage: str, fmt: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compile", CLEAN, "--emit", stage, "--format", fmt]) == 0
    expected = capsys.readouterr().out
    target = tmp_path / f"{stage}.{fmt}"
    target.write_text("stale content that must be replaced", encoding="utf-8")
    assert main(["compile", CLEAN, "--emit", stage, "--format", fmt, "-o", str(target)]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == ""
    assert target.read_text(encoding="utf-8") == expected


def test_output_file_in_a_missing_folder_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "missing" / "plan.json"
    assert (
        main(["compile", CLEAN, "--emit", "jobgraph", "--format", "json", "-o", str(target)]) == 2
    )
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"{target}: cannot write" in captured.err
    assert "Traceback" not in captured.err


def test_warnings_go_to_stderr_and_leave_stdout_parseable(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    warns = tmp_path / "clicks_per_user.flow"
    text = (ROOT / WARNS).read_text(encoding="utf-8")
    warns.write_text(text.replace("parallelism = 8,", "parallelism = 100,"), encoding="utf-8")
    assert main(["compile", str(warns), "--emit", "jobgraph", "--format", "json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["stage"] == "jobgraph"
    assert "warning[W0001]" in captured.err


def test_emit_all_without_output_folder_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["compile", CLEAN, "--emit", "all"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "error: --emit all" in captured.err
    assert "-o DIR" in captured.err


def test_emit_all_into_an_existing_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "taken"
    target.write_text("not a folder", encoding="utf-8")
    assert main(["compile", CLEAN, "--emit", "all", "-o", str(target)]) == 2
    assert f"{target}: cannot create" in capsys.readouterr().err
    assert target.read_text(encoding="utf-8") == "not a folder"


def test_emit_all_creates_nested_folders(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "a" / "b"
    assert main(["compile", CLEAN, "--emit", "all", "-o", str(target)]) == 0
    assert capsys.readouterr().out == ""
    assert len(list(target.iterdir())) == len(EMITTED)


@pytest.mark.parametrize("path", [BROKEN, SYNTAX_ERROR])
@pytest.mark.parametrize("stage", [*STAGE_FORMATS, "all"])
def test_program_with_errors_exits_1_and_writes_nothing(
    path: str, stage: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fmt = "json" if stage != "all" else "text"
    assert main(["compile", path, "--emit", stage, "--format", fmt]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "error[E0" in captured.err
    assert f"--> {path}:" in captured.err

    target = tmp_path / "out"
    assert main(["compile", path, "--emit", stage, "--format", fmt, "-o", str(target)]) == 1
    assert capsys.readouterr().out == ""
    assert not target.exists()


def test_missing_input_file_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compile", "examples/no_such_file.flow", "--emit", "jobgraph"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "examples/no_such_file.flow: no such file" in captured.err


#: Records every attempt to import pyspark (even one that would fail), then runs every
#: stage and format of every example, and --emit all.
NO_PYSPARK = """
import contextlib, io, sys, tempfile
from pathlib import Path

attempts = []

class Spy:
    def find_spec(self, name, path=None, target=None):
        if name == "pyspark" or name.startswith("pyspark."):
            attempts.append(name)
        return None

sys.meta_path.insert(0, Spy())
from flowc.cli.main import main

runs = 0
for path in sorted(Path("examples").glob("*.flow")):
    commands = [["--emit", stage, "--format", fmt] for stage, fmt in SUPPORTED]
    commands.append(["--emit", "all", "-o", tempfile.mkdtemp()])
    for arguments in commands:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            assert main(["compile", path.as_posix(), *arguments]) == 0, (path, arguments)
        runs += 1
assert runs > 100, runs
assert not attempts, f"flowc compile imported {attempts}"
assert not [m for m in sys.modules if m.split(".")[0] == "pyspark"]
print("ok", runs)
"""


def test_compile_never_imports_pyspark() -> None:
    code = f"SUPPORTED = {SUPPORTED!r}\n" + NO_PYSPARK
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok ")
