"""Every example checks clean; every error example fails where its header says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flowc.cli.main import main

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "examples").glob("*.flow"))
ERROR_EXAMPLES = sorted((ROOT / "examples" / "errors").glob("*.flow"))
#: The Flink-dialect examples (examples/flink_sql/) check clean too.
FLINK_SQL_EXAMPLES = sorted((ROOT / "examples" / "flink_sql").glob("*.flow"))

#: Lines (and codes) where each error example must be reported.
EXPECTED_ERRORS = {
    "forward_parallelism.flow": [(4, "E0310")],
    "hint_on_partition.flow": [(2, "E0301"), (5, "E0306")],
    "max_parallelism.flow": [(5, "E0305")],
    "no_insert.flow": [(3, "E0501")],
    "syntax.flow": [(2, "E0001"), (4, "E0001")],
    "unknown_column.flow": [(4, "E0201")],
    "streaming_aggregate_append.flow": [(5, "E0704")],
    "streaming_complete_without_aggregate.flow": [(4, "E0701")],
    "streaming_deduplicate_within.flow": [(5, "E0707")],
    "streaming_outer_join.flow": [(6, "E0706")],
    "streaming_session_window_update.flow": [(5, "E0703")],
    "streaming_two_stateful_in_update.flow": [(5, "E0702")],
    "streaming_update_file_sink.flow": [(4, "E0430")],
    "streaming_window_without_watermark.flow": [(5, "E0705")],
}


def _relative(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_every_example_directory_is_covered() -> None:
    assert EXAMPLES, "no examples found"
    assert FLINK_SQL_EXAMPLES, "no Flink-dialect examples found"
    assert {p.name for p in ERROR_EXAMPLES} == set(EXPECTED_ERRORS)


@pytest.mark.parametrize(
    "path", EXAMPLES + FLINK_SQL_EXAMPLES, ids=lambda p: p.relative_to(ROOT / "examples").as_posix()
)
def test_example_checks_clean(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["check", "--format", "json", str(path)])
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out
    assert all(d["severity"] == "warning" for d in out["diagnostics"])


@pytest.mark.parametrize("path", ERROR_EXAMPLES, ids=lambda p: p.name)
def test_error_example_fails_at_the_right_line(
    path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    code = main(["check", "--format", "json", _relative(path)])
    out = json.loads(capsys.readouterr().out)
    assert code == 1
    errors = [(d["line"], d["code"]) for d in out["diagnostics"] if d["severity"] == "error"]
    assert errors == EXPECTED_ERRORS[path.name]


@pytest.mark.parametrize("path", ERROR_EXAMPLES, ids=lambda p: p.name)
def test_error_example_text_snapshot(
    path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    snapshot: object,
) -> None:
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("NO_COLOR", "1")
    assert main(["check", _relative(path)]) == 1
    assert capsys.readouterr().err == snapshot


@pytest.mark.parametrize("path", ERROR_EXAMPLES, ids=lambda p: p.name)
def test_error_example_json_snapshot(
    path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    snapshot: object,
) -> None:
    monkeypatch.chdir(ROOT)
    assert main(["check", "--format", "json", _relative(path)]) == 1
    document = json.loads(capsys.readouterr().out)
    document.pop("flowc_version")
    assert document == snapshot


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_ast_snapshot(
    path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    snapshot: object,
) -> None:
    monkeypatch.chdir(ROOT)
    assert main(["compile", _relative(path), "--emit", "ast", "--format", "text"]) == 0
    assert capsys.readouterr().out == snapshot
