"""``flowc lsp``: the language server over stdio (pygls), a thin layer over
:mod:`flowc.lsp.analysis`.

Diagnostics are ``flowc check``'s, published when a document opens or is saved and 0.3 s
after the last change (debounced). Analyses run on threads of their own, never on the
event loop, so a big document never holds up another's requests; each has a time budget
(a document past it gets E0991), at most two run per document (the newest text's and
one left behind) and only the newest text's result is published (a stale analysis never
overwrites a newer one). A crash inside flowc while analysing is published as E0990;
while answering a request, it is logged and answered as "nothing here" (never a dead
server). Every frame and request is answered, invalid ones with JSON-RPC's errors
(:mod:`flowc.lsp.wire`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import threading
from collections.abc import Callable
from dataclasses import field
from typing import BinaryIO, TypeVar
from urllib.parse import unquote, urlparse

from lsprotocol import types
from pygls.io_ import StdoutWriter
from pygls.lsp.server import LanguageServer

from flowc._version import __version__
from flowc.diagnostics import Diagnostic, Severity
from flowc.errorcodes import Code
from flowc.fast_dataclass import dataclass
from flowc.lsp import analysis
from flowc.lsp.analysis import Document
from flowc.lsp.wire import FlowProtocol, StdinReader, serve
from flowc.spans import Span

DEBOUNCE_SECONDS = 0.3
#: Seconds one analysis may take before its document gets E0991 instead (the client may
#: set another with the initialization option ``analysisTimeout``).
ANALYSIS_BUDGET = 15.0
#: Bytes of stack of an analysis thread: flowc's parsers recurse up to 8,000 frames deep.
ANALYSIS_STACK = 64 * 1024 * 1024
#: Analyses of one document at once: the newest text's, and one left behind (stale, or
#: past its budget: a thread cannot be stopped); more edits wait for one to end.
ANALYSES_PER_DOCUMENT = 2
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


@dataclass(eq=False)
class Tracked:
    """One open document: its text's generation (one more at each change), the newest
    finished analysis and the generation it is of, the analyses running and the newest
    generation one was started for, and the debounced start of the next."""

    generation: int = 0
    version: int | None = None
    done: Document | None = None
    done_generation: int = -1
    running: int = 0
    started: int = -1
    timer: asyncio.TimerHandle | None = None
    finished: list[asyncio.Future[None]] = field(default_factory=list)


class FlowServer(LanguageServer):
    """Keeps each open document's newest analysis and schedules the next."""

    def __init__(self) -> None:
        super().__init__("flowc", __version__, protocol_cls=FlowProtocol)
        self.tracked: dict[str, Tracked] = {}
        self.budget = ANALYSIS_BUDGET
        self.tasks: set[asyncio.Task[None]] = set()  # held: the loop keeps weak references

    # ---------------------------------------------------------------- analyses

    def opened(self, uri: str, version: int | None) -> None:
        self.tracked[uri] = Tracked()
        self.changed(uri, version, 0)

    def changed(self, uri: str, version: int | None, delay: float) -> None:
        """The text of open document ``uri`` changed: analyse it after ``delay`` s."""
        state = self.tracked.get(uri)
        if state is None:  # never opened: nothing to analyse (no file is read)
            return
        state.generation += 1
        state.version = version
        self.schedule(uri, delay)

    def saved(self, uri: str) -> None:
        """Check again at once (a file the program names may have appeared meanwhile)."""
        state = self.tracked.get(uri)
        if state is not None:
            self.changed(uri, state.version, 0)

    def schedule(self, uri: str, delay: float) -> None:
        state = self.tracked.get(uri)
        if state is None:
            return
        if state.timer is not None:
            state.timer.cancel()
            state.timer = None
        if delay > 0:
            state.timer = asyncio.get_running_loop().call_later(delay, self.start, uri)
        else:
            self.start(uri)

    def closed(self, uri: str) -> None:
        state = self.tracked.pop(uri, None)
        if state is not None:
            if state.timer is not None:
                state.timer.cancel()
            _wake(state)

    def start(self, uri: str) -> None:
        """Analyse the newest text of ``uri`` unless that is under way, or done, or
        ANALYSES_PER_DOCUMENT are running (then it starts when one ends)."""
        state = self.tracked.get(uri)
        if state is None or state.started == state.generation:
            return
        if state.running >= ANALYSES_PER_DOCUMENT:
            return
        if state.timer is not None:
            state.timer.cancel()
            state.timer = None
        state.running += 1
        state.started = state.generation
        text = self.workspace.get_text_document(uri).source
        task = asyncio.get_running_loop().create_task(
            self.analyse(uri, state, state.generation, state.version, text)
        )
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def analyse(
        self, uri: str, state: Tracked, generation: int, version: int | None, text: str
    ) -> None:
        work = on_thread(analyse_or_report, uri, text)
        try:
            late = False
            try:
                document = await asyncio.wait_for(asyncio.shield(work), self.budget)
            except TimeoutError:
                log.warning("flowc lsp: %s: analysis past its budget of %s s", uri, self.budget)
                document, late = past_budget(uri, text, self.budget), True
            if not self.finish(uri, state, generation, version, document):
                self.window_log_message(
                    types.LogMessageParams(
                        type=types.MessageType.Log,
                        message=f"flowc lsp: dropped the analysis of {uri} version {version}: "
                        "the text changed, or the document closed, since",
                    )
                )
            if late:
                await asyncio.wait([work])  # a thread cannot be stopped: it still counts
        finally:
            state.running -= 1
            if self.tracked.get(uri) is state and state.timer is None:
                self.start(uri)

    def finish(
        self, uri: str, state: Tracked, generation: int, version: int | None, document: Document
    ) -> bool:
        """Keep and publish ``document`` if it is still of the newest text (True)."""
        if self.tracked.get(uri) is not state or state.generation != generation:
            return False
        state.done, state.done_generation = document, generation
        _wake(state)
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(
                uri=uri,
                diagnostics=[_diagnostic(d) for d in document.diagnostics if _ours(d, uri)],
                version=version,
            )
        )
        return True

    async def document(self, uri: str) -> Document | None:
        """The analysis of the newest text of ``uri``, waited for (within the budget); an
        older one if it does not come in time; None for a document that is not open."""
        state = self.tracked.get(uri)
        if state is None:
            return None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.budget + 1
        while state.done_generation != state.generation and self.tracked.get(uri) is state:
            self.start(uri)  # at once: someone waits
            finished: asyncio.Future[None] = loop.create_future()
            state.finished.append(finished)
            try:
                await asyncio.wait_for(finished, max(deadline - loop.time(), 0))
            except TimeoutError:
                break
        if self.tracked.get(uri) is not state:
            return None  # closed meanwhile
        if state.done is not None:
            return state.done
        text = self.workspace.get_text_document(uri).source
        return Document(uri, text, None, None, ())

    def text(self, uri: str) -> str | None:
        return self.workspace.get_text_document(uri).source if uri in self.tracked else None

    # ---------------------------------------------------------------- transport

    def start_io(self, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> None:
        """pygls's stdio server with :func:`flowc.lsp.wire.serve` reading the frames."""
        self._stop_event = stop = threading.Event()
        reader = StdinReader(stdin or sys.stdin.buffer)
        self.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))
        assert isinstance(self.protocol, FlowProtocol)
        try:
            asyncio.run(serve(stop, reader, self.protocol))
        except BrokenPipeError:
            log.error("flowc lsp: the client is gone")
        except (KeyboardInterrupt, SystemExit):
            pass
        finally:
            reader.thread.shutdown(wait=False, cancel_futures=True)
            self.shutdown()  # type: ignore[no-untyped-call]


def _wake(state: Tracked) -> None:
    for waiting in state.finished:
        if not waiting.done():
            waiting.set_result(None)
    state.finished.clear()


def on_thread(
    work: Callable[[str, str], Document], uri: str, text: str
) -> asyncio.Future[Document]:
    """``work(uri, text)`` on a new thread with a deep stack; its result on the loop."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Document] = loop.create_future()

    def deliver(result: Document | BaseException) -> None:
        if future.done():
            return
        if isinstance(result, BaseException):
            future.set_exception(result)
        else:
            future.set_result(result)

    def run() -> None:
        result: Document | BaseException
        try:
            result = work(uri, text)
        except BaseException as error:  # delivered to the loop, which reports it
            result = error
        with contextlib.suppress(RuntimeError):  # a closed loop: the server has exited
            loop.call_soon_threadsafe(deliver, result)

    previous = threading.stack_size(ANALYSIS_STACK)
    try:
        threading.Thread(target=run, name=f"flowc-lsp-analysis {uri}", daemon=True).start()
    finally:
        threading.stack_size(previous)
    return future


def analyse_or_report(uri: str, text: str) -> Document:
    """:func:`analysis.analyse`; if flowc crashes, the parse alone with E0990 at 1:1."""
    file = _file_of(uri)
    try:
        return analysis.analyse(uri, text, file)
    except Exception as error:
        log.exception("flowc lsp: analysing %s crashed", uri)
        crash = Diagnostic(
            Code.E0990,
            Severity.ERROR,
            f"internal error: flowc crashed analysing this document ({type(error).__name__}: "
            f"{error}); this is a bug in flowc, not in your program: please report it",
            Span(file, 1, 1, 1, 1),
            "report it with the document and the traceback from the language server's log "
            "(`flowc check` on the file may write a crash report too)",
        )
        return analysis.outline(uri, text, file, (crash,))


def past_budget(uri: str, text: str, budget: float) -> Document:
    file = _file_of(uri)
    diagnostic = Diagnostic(
        Code.E0991,
        Severity.ERROR,
        f"flowc's analysis of this document took longer than its budget of {budget:g} s: "
        "no diagnostics, hover or definitions until it is edited",
        Span(file, 1, 1, 1, 1),
        "`flowc check` on the file checks it without a budget; or raise the budget "
        "(the initialization option analysisTimeout, in seconds)",
    )
    return Document(uri, text, None, None, (diagnostic,), complete=False)


def safely(answer: Callable[[], T], otherwise: T) -> T:
    try:
        return answer()
    except Exception:  # a bug in flowc: logged, and the editor gets no answer, not a crash
        log.exception("flowc lsp: a request failed")
        return otherwise


async def answered(answer: Callable[[], T], otherwise: T) -> T:
    """``answer()`` on a worker thread (a request on a big document never holds the event
    loop), guarded as :func:`safely`."""
    return await asyncio.get_running_loop().run_in_executor(None, safely, answer, otherwise)


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

    @server.feature(types.INITIALIZE)
    def initialize(ls: FlowServer, params: types.InitializeParams) -> None:
        options = params.initialization_options
        budget = options.get("analysisTimeout") if isinstance(options, dict) else None
        if isinstance(budget, int | float) and not isinstance(budget, bool) and budget > 0:
            ls.budget = float(budget)

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: FlowServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.opened(params.text_document.uri, params.text_document.version)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: FlowServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.changed(params.text_document.uri, params.text_document.version, DEBOUNCE_SECONDS)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: FlowServer, params: types.DidSaveTextDocumentParams) -> None:
        ls.saved(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: FlowServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.closed(uri)
        ls.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=[])
        )

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def hover(ls: FlowServer, params: types.HoverParams) -> types.Hover | None:
        document = await ls.document(params.text_document.uri)
        if document is None or not document.complete:
            return None
        text = await answered(lambda: analysis.hover(document, *_at(params.position)), None)
        if text is None:
            return None
        return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=text))

    @server.feature(types.TEXT_DOCUMENT_DEFINITION)
    async def definition(ls: FlowServer, params: types.DefinitionParams) -> types.Location | None:
        uri = params.text_document.uri
        document = await ls.document(uri)
        if document is None or not document.complete:
            return None
        span = await answered(lambda: analysis.definition(document, *_at(params.position)), None)
        return None if span is None else types.Location(uri=uri, range=_range(span))

    @server.feature(types.TEXT_DOCUMENT_REFERENCES)
    async def references(ls: FlowServer, params: types.ReferenceParams) -> list[types.Location]:
        uri = params.text_document.uri
        document = await ls.document(uri)
        if document is None or not document.complete:
            return []

        def answer() -> list[types.Location]:
            spans = analysis.references(document, *_at(params.position))
            return [types.Location(uri=uri, range=_range(s)) for s in spans]

        return await answered(answer, [])

    @server.feature(
        types.TEXT_DOCUMENT_COMPLETION,
        types.CompletionOptions(trigger_characters=[">", " ", "'", "("]),
    )
    async def completion(ls: FlowServer, params: types.CompletionParams) -> types.CompletionList:
        """From the newest text and the last analysis, not waiting for the next (typing)."""
        uri = params.text_document.uri
        text = ls.text(uri)
        nothing = types.CompletionList(is_incomplete=False, items=[])
        if text is None:
            return nothing
        state = ls.tracked[uri]
        last = state.done or Document(uri, text, None, None, ())
        document = Document(uri, text, last.job, last.tree, last.diagnostics, last.symbols)

        def answer() -> types.CompletionList:
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

        return await answered(answer, nothing)

    @server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    async def symbols(
        ls: FlowServer, params: types.DocumentSymbolParams
    ) -> list[types.DocumentSymbol]:
        document = await ls.document(params.text_document.uri)
        if document is None:
            return []
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
