"""``flowc lsp``: the language server over stdio (pygls), a thin layer over
:mod:`flowc.lsp.analysis`.

Diagnostics are ``flowc check``'s, published when a document opens or is saved and 0.3 s
after the last change (debounced). Every request is answered from the document's last
analysis; an exception inside flowc while answering is logged and answered as "nothing
here" (never a dead server).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TypeVar
from urllib.parse import unquote, urlparse

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from flowc import __version__
from flowc.diagnostics import Diagnostic, Severity
from flowc.lsp import analysis
from flowc.lsp.analysis import Document
from flowc.spans import Span

DEBOUNCE_SECONDS = 0.3
log = logging.getLogger("flowc.lsp")
T = TypeVar("T")

_KINDS = {
    "source": types.SymbolKind.Event,
    "table": types.SymbolKind.Struct,
    "view": types.SymbolKind.Interface,
    "sink": types.SymbolKind.Object,
    "function": types.SymbolKind.Function,
    "side output": types.SymbolKind.Field,
}
_COMPLETION_KINDS = {
    "step": types.CompletionItemKind.Keyword,
    "setting": types.CompletionItemKind.Property,
    "connector": types.CompletionItemKind.Module,
    "option": types.CompletionItemKind.Property,
    "column": types.CompletionItemKind.Field,
    "relation": types.CompletionItemKind.Class,
}


class FlowServer(LanguageServer):
    """Keeps each open document's last analysis and its pending debounced check."""

    def __init__(self) -> None:
        super().__init__("flowc", __version__)
        self.documents: dict[str, Document] = {}
        self.pending: dict[str, asyncio.Task[None]] = {}

    def check(self, uri: str) -> Document:
        text = self.workspace.get_text_document(uri).source
        document = safely(
            lambda: analysis.analyse(uri, text, _file_of(uri)),
            Document(uri, text, None, None, ()),
        )
        self.documents[uri] = document
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(
                uri=uri, diagnostics=[_diagnostic(d) for d in document.diagnostics if _ours(d, uri)]
            )
        )
        return document

    def document(self, uri: str) -> Document:
        found = self.documents.get(uri)
        return found if found is not None else self.check(uri)

    def later(self, uri: str) -> None:
        """Check ``uri`` once no change came for DEBOUNCE_SECONDS."""
        previous = self.pending.pop(uri, None)
        if previous is not None:
            previous.cancel()

        async def wait_then_check() -> None:
            await asyncio.sleep(DEBOUNCE_SECONDS)
            self.pending.pop(uri, None)
            self.check(uri)

        self.pending[uri] = asyncio.get_running_loop().create_task(wait_then_check())


def safely(answer: Callable[[], T], otherwise: T) -> T:
    try:
        return answer()
    except Exception:  # a bug in flowc: logged, and the editor gets no answer, not a crash
        log.exception("flowc lsp: a request failed")
        return otherwise


def _file_of(uri: str) -> str:
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else uri


def _ours(diagnostic: Diagnostic, uri: str) -> bool:
    """Diagnostics in this document (not, say, the command line's)."""
    return diagnostic.span.file in (uri, _file_of(uri))


def _range(span: Span) -> types.Range:
    return types.Range(
        start=types.Position(line=max(span.line - 1, 0), character=max(span.column - 1, 0)),
        end=types.Position(line=max(span.end_line - 1, 0), character=max(span.end_column - 1, 0)),
    )


def _diagnostic(d: Diagnostic) -> types.Diagnostic:
    return types.Diagnostic(
        range=_range(d.span),
        message=d.message + (f"\n{d.help}" if d.help else ""),
        severity=types.DiagnosticSeverity.Error
        if d.severity is Severity.ERROR
        else types.DiagnosticSeverity.Warning,
        code=str(d.code),
        source="flowc",
        data={"help": d.help} if d.help else None,
    )


def _at(position: types.Position) -> tuple[int, int]:
    return position.line + 1, position.character + 1


def build() -> FlowServer:
    server = FlowServer()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: FlowServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.check(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: FlowServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.documents.pop(params.text_document.uri, None)
        ls.later(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: FlowServer, params: types.DidSaveTextDocumentParams) -> None:
        ls.check(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: FlowServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.documents.pop(uri, None)
        pending = ls.pending.pop(uri, None)
        if pending is not None:
            pending.cancel()
        ls.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=[])
        )

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def hover(ls: FlowServer, params: types.HoverParams) -> types.Hover | None:
        def answer() -> types.Hover | None:
            text = analysis.hover(ls.document(params.text_document.uri), *_at(params.position))
            if text is None:
                return None
            return types.Hover(
                contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=text)
            )

        return safely(answer, None)

    @server.feature(types.TEXT_DOCUMENT_DEFINITION)
    def definition(ls: FlowServer, params: types.DefinitionParams) -> types.Location | None:
        def answer() -> types.Location | None:
            uri = params.text_document.uri
            span = analysis.definition(ls.document(uri), *_at(params.position))
            return None if span is None else types.Location(uri=uri, range=_range(span))

        return safely(answer, None)

    @server.feature(types.TEXT_DOCUMENT_REFERENCES)
    def references(ls: FlowServer, params: types.ReferenceParams) -> list[types.Location]:
        def answer() -> list[types.Location]:
            uri = params.text_document.uri
            spans = analysis.references(ls.document(uri), *_at(params.position))
            return [types.Location(uri=uri, range=_range(s)) for s in spans]

        return safely(answer, [])

    @server.feature(
        types.TEXT_DOCUMENT_COMPLETION,
        types.CompletionOptions(trigger_characters=[">", " ", "'", "("]),
    )
    def completion(ls: FlowServer, params: types.CompletionParams) -> types.CompletionList:
        def answer() -> types.CompletionList:
            uri = params.text_document.uri
            text = ls.workspace.get_text_document(uri).source
            document = ls.documents.get(uri) or Document(uri, text, None, None, ())
            document = Document(
                uri, text, document.job, document.tree, document.diagnostics, document.symbols
            )
            found = analysis.completions(document, *_at(params.position))
            return types.CompletionList(
                is_incomplete=False,
                items=[
                    types.CompletionItem(
                        label=c.label,
                        kind=_COMPLETION_KINDS.get(c.kind, types.CompletionItemKind.Text),
                        detail=c.detail,
                    )
                    for c in found
                ],
            )

        return safely(answer, types.CompletionList(is_incomplete=False, items=[]))

    @server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    def symbols(ls: FlowServer, params: types.DocumentSymbolParams) -> list[types.DocumentSymbol]:
        def answer() -> list[types.DocumentSymbol]:
            document = ls.document(params.text_document.uri)
            return [
                types.DocumentSymbol(
                    name=s.name,
                    detail=s.kind,
                    kind=_KINDS.get(s.kind, types.SymbolKind.Variable),
                    range=_range(s.span),
                    selection_range=_range(s.name_span),
                )
                for s in document.symbols
            ]

        return safely(answer, [])

    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION)
    def code_actions(ls: FlowServer, params: types.CodeActionParams) -> list[types.CodeAction]:
        def answer() -> list[types.CodeAction]:
            uri = params.text_document.uri
            actions = []
            for d in params.context.diagnostics:
                data = d.data if isinstance(d.data, dict) else {}
                replacement = analysis.suggestion(data.get("help") or d.message)
                if replacement is None:
                    continue
                actions.append(
                    types.CodeAction(
                        title=f"Replace with '{replacement}'",
                        kind=types.CodeActionKind.QuickFix,
                        diagnostics=[d],
                        edit=types.WorkspaceEdit(
                            changes={uri: [types.TextEdit(range=d.range, new_text=replacement)]}
                        ),
                    )
                )
            return actions

        return safely(answer, [])

    return server


def main() -> None:
    """Serve on stdin and stdout until the client says exit."""
    build().start_io()
