"""``flowc lsp`` (issue 15, item 1) through a real LSP client over stdio (pytest-lsp):
``python -m flowc lsp`` in its own process, each feature on the examples and on broken
files, and a few hundred fuzzed programs (tests/fuzzing.py) that must not take it down.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_lsp
from fuzzing import EXAMPLES, generate_program, mutate_bytes, mutate_tokens, seeded
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

ROOT = Path(__file__).resolve().parent.parent
CLICKS = ROOT / "examples" / "clicks_per_user.flow"


@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=[sys.executable, "-m", "flowc", "lsp", "--stdio"])
)
async def client(lsp_client: LanguageClient) -> AsyncIterator[None]:
    await lsp_client.initialize_session(
        types.InitializeParams(capabilities=types.ClientCapabilities(), root_uri=ROOT.as_uri())
    )
    yield
    await lsp_client.shutdown_session()


def uri_of(path: Path) -> str:
    return path.as_uri()


def open_document(client: LanguageClient, uri: str, text: str, version: int = 1) -> None:
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=uri, language_id="flow", version=version, text=text
            )
        )
    )


async def diagnostics_of(client: LanguageClient, uri: str) -> list[types.Diagnostic]:
    await client.wait_for_notification(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    return client.diagnostics[uri]


def position_of(text: str, needle: str, offset: int = 0) -> types.Position:
    index = text.index(needle) + offset
    line = text.count("\n", 0, index)
    return types.Position(line=line, character=index - (text.rfind("\n", 0, index) + 1))


def document(uri: str) -> types.TextDocumentIdentifier:
    return types.TextDocumentIdentifier(uri=uri)


@pytest.mark.asyncio
async def test_diagnostics_are_flowc_checks(client: LanguageClient, tmp_path: Path) -> None:
    # At parallelism 100 the window's default max parallelism moves with it: W0001.
    text = CLICKS.read_text(encoding="utf-8").replace("parallelism = 8,", "parallelism = 100,")
    open_document(client, uri_of(CLICKS), text)
    found = await diagnostics_of(client, uri_of(CLICKS))
    assert [(d.code, d.severity) for d in found] == [("W0001", types.DiagnosticSeverity.Warning)]
    assert found[0].range.start == position_of(text, "WINDOW TUMBLE")
    broken = tmp_path / "broken.flow"
    bad = text.replace("lower(url) AS url", "lower(uurl) AS url")
    open_document(client, uri_of(broken), bad)
    errors = await diagnostics_of(client, uri_of(broken))
    assert [d.code for d in errors if d.severity == types.DiagnosticSeverity.Error] == ["E0201"]
    unknown = next(d for d in errors if d.code == "E0201")
    assert unknown.range.start == position_of(bad, "uurl")


@pytest.mark.asyncio
async def test_changes_are_checked_after_a_pause(client: LanguageClient, tmp_path: Path) -> None:
    uri = uri_of(tmp_path / "typing.flow")
    open_document(client, uri, "")
    await diagnostics_of(client, uri)
    text = ""
    for version, piece in enumerate(["CREATE SOU", "RCE s (k BIGINT", ") WITH (connector"], 2):
        text += piece
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )
    found = await diagnostics_of(client, uri)  # one publication, for the last text
    assert found and all(d.code in ("E0001", "E0002") for d in found)
    assert client.diagnostics[uri] == found


@pytest.mark.asyncio
async def test_hover_shows_schemas_and_operators(client: LanguageClient) -> None:
    text = CLICKS.read_text(encoding="utf-8")
    uri = uri_of(CLICKS)
    open_document(client, uri, text)
    await diagnostics_of(client, uri)
    on_view = await client.text_document_hover_async(
        types.HoverParams(text_document=document(uri), position=position_of(text, "cleaned", 2))
    )
    assert on_view is not None
    shown = on_view.contents.value  # type: ignore[union-attr]
    assert "view `cleaned`" in shown and "| `user_id` | STRING |" in shown
    on_step = await client.text_document_hover_async(
        types.HoverParams(
            text_document=document(uri), position=position_of(text, "AGGREGATE count", 3)
        )
    )
    assert on_step is not None
    shown = on_step.contents.value  # type: ignore[union-attr]
    assert "JobGraph vertex `Window(TUMBLE(ts, INTERVAL 1 MINUTE))`" in shown
    assert "parallelism 8" in shown and "HASH(user_id)" in shown and "key groups" in shown
    assert "| `clicks` | BIGINT |" in shown


@pytest.mark.asyncio
async def test_definition_and_references(client: LanguageClient) -> None:
    text = CLICKS.read_text(encoding="utf-8")
    uri = uri_of(CLICKS)
    open_document(client, uri, text)
    await diagnostics_of(client, uri)
    use = text.index("FROM cleaned") + 5
    at = position_of(text, "FROM cleaned", 5)
    found = await client.text_document_definition_async(
        types.DefinitionParams(text_document=document(uri), position=at)
    )
    assert isinstance(found, types.Location)
    assert found.range.start == position_of(text, "cleaned AS")
    refs = await client.text_document_references_async(
        types.ReferenceParams(
            text_document=document(uri),
            position=at,
            context=types.ReferenceContext(include_declaration=True),
        )
    )
    assert refs is not None and len(refs) == text.count("cleaned") == 2
    assert use > 0
    column = await client.text_document_definition_async(
        types.DefinitionParams(
            text_document=document(uri), position=position_of(text, "KEY BY user_id", 7)
        )
    )
    assert isinstance(column, types.Location)
    assert column.range.start == position_of(text, "user_id STRING")


@pytest.mark.asyncio
async def test_completion(client: LanguageClient, tmp_path: Path) -> None:
    text = CLICKS.read_text(encoding="utf-8")
    uri = uri_of(CLICKS)
    open_document(client, uri, text)
    await diagnostics_of(client, uri)

    async def labels(at: types.Position, target: str = uri) -> dict[str, str | None]:
        result = await client.text_document_completion_async(
            types.CompletionParams(text_document=document(target), position=at)
        )
        assert isinstance(result, types.CompletionList)
        return {item.label: item.detail for item in result.items}

    steps = await labels(position_of(text, "|> KEY BY", 3))
    assert {"WHERE", "KEY BY", "WINDOW", "AGGREGATE", "TOP"} <= set(steps)
    columns = await labels(position_of(text, "user_id\n  |> WINDOW"))
    assert columns["url"] == "STRING (clicks)" and "cleaned" in columns
    options = await labels(position_of(text, "path = 'data/clicks'"))
    assert "max_files_per_trigger" in options and "format" in options
    fresh = tmp_path / "new.flow"
    typed = "SET \nCREATE SOURCE s (k BIGINT) WITH (connector = '"
    open_document(client, uri_of(fresh), typed)
    await diagnostics_of(client, uri_of(fresh))
    settings = await labels(types.Position(line=0, character=4), uri_of(fresh))
    assert "parallelism" in settings and "state.backend.type" in settings
    connectors = await labels(
        types.Position(line=1, character=len(typed.splitlines()[1])), uri_of(fresh)
    )
    assert {"files", "datagen", "kafka"} <= set(connectors)


@pytest.mark.asyncio
async def test_document_symbols(client: LanguageClient) -> None:
    path = ROOT / "examples" / "payments_routing.flow"
    text = path.read_text(encoding="utf-8")
    open_document(client, uri_of(path), text)
    await diagnostics_of(client, uri_of(path))
    found = await client.text_document_document_symbol_async(
        types.DocumentSymbolParams(text_document=document(uri_of(path)))
    )
    assert found is not None
    names = {(s.name, s.detail) for s in found}  # type: ignore[union-attr]
    assert {("payments", "source"), ("refunds", "source"), ("checked", "view")} <= names
    assert {("checked.invalid", "side output"), ("totals", "sink")} <= names


@pytest.mark.asyncio
async def test_a_did_you_mean_is_a_quick_fix(client: LanguageClient, tmp_path: Path) -> None:
    path = tmp_path / "typo.flow"
    text = (
        "SET paralellism = 2;\n"
        "CREATE SOURCE s (k BIGINT) WITH (connector = 'datagen');\n"
        "CREATE SINK o WITH (connector = 'console');\n"
        "INSERT INTO o FROM s;\n"
    )
    open_document(client, uri_of(path), text)
    (typo,) = [d for d in await diagnostics_of(client, uri_of(path)) if d.code == "E0301"]
    actions = await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=document(uri_of(path)),
            range=typo.range,
            context=types.CodeActionContext(diagnostics=[typo]),
        )
    )
    assert actions is not None
    (action,) = actions
    assert isinstance(action, types.CodeAction) and action.edit is not None
    assert action.edit.changes is not None
    (edit,) = action.edit.changes[uri_of(path)]
    assert edit.new_text == "parallelism" and edit.range == typo.range


@pytest.mark.asyncio
async def test_fuzzed_programs_never_take_the_server_down(
    client: LanguageClient, tmp_path: Path
) -> None:
    """300 programs: generated, token and byte mutants of the examples; each opened, then
    hovered, completed, looked up and listed at several positions."""
    inputs: list[str] = []
    examples = sorted(EXAMPLES)
    for seed in range(300):
        chooser = seeded(5000 + seed)
        if seed % 3 == 0:
            inputs.append(generate_program(chooser))
        elif seed % 3 == 1:
            inputs.append(mutate_tokens(chooser, EXAMPLES[examples[seed % len(examples)]]))
        else:
            data = mutate_bytes(chooser, EXAMPLES[examples[seed % len(examples)]].encode())
            inputs.append(data.decode("utf-8", "replace"))
    for index, text in enumerate(inputs):
        uri = uri_of(tmp_path / f"fuzz{index}.flow")
        open_document(client, uri, text)
        lines = text.splitlines() or [""]
        for line in {0, len(lines) // 2, len(lines) - 1}:
            position = types.Position(line=line, character=len(lines[line]) // 2)
            at = types.TextDocumentPositionParams(text_document=document(uri), position=position)
            await client.text_document_hover_async(
                types.HoverParams(text_document=at.text_document, position=position)
            )
            await client.text_document_completion_async(
                types.CompletionParams(text_document=at.text_document, position=position)
            )
            await client.text_document_definition_async(
                types.DefinitionParams(text_document=at.text_document, position=position)
            )
        await client.text_document_document_symbol_async(
            types.DocumentSymbolParams(text_document=document(uri))
        )
        client.text_document_did_close(
            types.DidCloseTextDocumentParams(text_document=document(uri))
        )
    # Still answering: the first example, checked as at the start.
    text = CLICKS.read_text(encoding="utf-8")
    open_document(client, uri_of(CLICKS), text)
    found = await client.text_document_document_symbol_async(
        types.DocumentSymbolParams(text_document=document(uri_of(CLICKS)))
    )
    assert found is not None and len(found) == 3
