"""The editor files (issue 15, item 1): the TextMate grammar colours every keyword of
flowc's grammar, its patterns compile, and the VS Code extension's manifest starts
``flowc lsp`` for .flow files with the files it names present."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from flowc.cli.main import main

ROOT = Path(__file__).resolve().parent.parent
VSCODE = ROOT / "editors" / "vscode"
GRAMMAR = json.loads((VSCODE / "syntaxes" / "flow.tmLanguage.json").read_text(encoding="utf-8"))
MANIFEST = json.loads((VSCODE / "package.json").read_text(encoding="utf-8"))


def language_keywords() -> set[str]:
    """The words flowc's Lark grammar (grammar/flow.lark) reserves where it expects them."""
    text = (ROOT / "grammar" / "flow.lark").read_text(encoding="utf-8")
    words: set[str] = set()
    for match in re.finditer(r"^[A-Z_]+(?:\.\d+)?:\s*(.+)$", text, re.MULTILINE):
        words |= {w.upper() for w in re.findall(r'"([a-z_]+)"i', match.group(1))}
    return words


def patterns(node: object) -> list[dict[str, str]]:
    if isinstance(node, dict):
        found = [node] if "match" in node or "begin" in node else []
        for value in node.values():
            found += patterns(value)
        return found
    if isinstance(node, list):
        return [p for item in node for p in patterns(item)]
    return []


def test_every_keyword_of_the_language_is_coloured() -> None:
    keywords = language_keywords()
    assert {"CREATE", "WINDOW", "AGGREGATE", "TOP", "WATERMARK"} <= keywords
    coloured = [re.compile(p["match"]) for p in patterns(GRAMMAR["repository"]["keywords"])]
    missing = [
        k for k in sorted(keywords) if not any(r.fullmatch(k) or r.search(k) for r in coloured)
    ]
    assert missing == []
    for keyword in keywords:  # case-insensitive, as the language is
        assert any(r.search(keyword.lower()) for r in coloured), keyword


@pytest.mark.parametrize("pattern", patterns(GRAMMAR), ids=lambda p: p.get("name", "?"))
def test_each_pattern_compiles(pattern: dict[str, str]) -> None:
    for key in ("match", "begin", "end"):
        if key in pattern:
            re.compile(pattern[key])


def test_comments_strings_and_names_are_told_apart() -> None:
    repository = GRAMMAR["repository"]
    line_comment = re.compile(repository["comments"]["patterns"][2]["match"])
    assert line_comment.search("SET a = 1;  -- a note").group(0) == "-- a note"
    hint = re.compile(repository["comments"]["patterns"][0]["begin"])
    assert hint.match("/*+ parallelism(2) */") and not hint.match("/* plain */")
    pipe = re.compile(repository["pipe"]["match"])
    assert pipe.search("FROM s |> WHERE x") is not None


def test_the_extension_starts_flowc_lsp_for_flow_files(
    capsys: pytest.CaptureFixture[str],
) -> None:
    (language,) = MANIFEST["contributes"]["languages"]
    assert language["id"] == "flow" and language["extensions"] == [".flow"]
    (grammar,) = MANIFEST["contributes"]["grammars"]
    assert grammar["scopeName"] == GRAMMAR["scopeName"] == "source.flow"
    for path in (grammar["path"], MANIFEST["main"], language["configuration"]):
        assert (VSCODE / path).is_file(), path
    command = MANIFEST["contributes"]["configuration"]["properties"]["flowc.command"]
    assert command["default"] == ["flowc", "lsp"]
    assert "onLanguage:flow" in MANIFEST["activationEvents"]
    assert "vscode-languageclient" in MANIFEST["dependencies"]
    assert "flowc" in (VSCODE / "extension.js").read_text(encoding="utf-8")
    assert main(["lsp", "--help"]) == 0
    assert "usage: flowc lsp" in capsys.readouterr().out
