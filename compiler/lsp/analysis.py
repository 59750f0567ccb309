"""What the language server knows of one document, as plain functions over flowc's IR
(no protocol here, so each is tested directly): diagnostics, symbols, the name or step at
a position, definitions and references, hover text, completion candidates, quick fixes.

Positions are flowc's: 1-based lines and columns (the server converts to LSP's 0-based).
"""

from __future__ import annotations

import re
from dataclasses import field

from flowc import ast, catalog
from flowc.diagnostics import CompileError, Diagnostic, Reporter
from flowc.driver import compile
from flowc.fast_dataclass import dataclass
from flowc.formatter import TokenKind, tokens
from flowc.job import CompiledJob
from flowc.spans import Span
from flowc.syntax.parser import deep_recursion, parse
from flowc.syntax.source_text import LineIndex

#: Pipe steps offered after ``|>``, with what each does.
STEPS: tuple[tuple[str, str], ...] = (
    ("WHERE", "keep the rows where a condition holds (Flink: Filter)"),
    ("SELECT", "compute the columns of each row (Flink: Map)"),
    ("EXTEND", "add computed columns (Flink: Map)"),
    ("SET", "replace the values of columns, each in its place (Flink: Map)"),
    ("DROP", "leave columns out"),
    ("RENAME", "rename columns"),
    ("EXPLODE", "one row per element of an array"),
    ("KEY BY", "partition by key: the next stateful step is keyed (HASH exchange)"),
    ("REBALANCE", "round-robin to the next operator's subtasks"),
    ("RESCALE", "round-robin within local groups of subtasks"),
    ("SHUFFLE", "to random subtasks"),
    ("BROADCAST", "every row to every subtask"),
    ("GLOBAL", "every row to subtask 0"),
    ("FORWARD", "to the same subtask (needs equal parallelism)"),
    ("PARTITION BY", "by an expression of your own (CUSTOM)"),
    ("WINDOW", "TUMBLE, HOP, SESSION or CUMULATE windows over an event-time column"),
    ("AGGREGATE", "aggregate per key (and window): count(*), sum(x), ..."),
    ("DEDUPLICATE", "keep the first row per key"),
    ("TOP", "TOP n BY x DESC PER k: the first n rows per group (Flink's Top-N)"),
    ("JOIN", "join another stream or a table"),
    ("UNION ALL", "merge streams of the same columns"),
    ("ROUTE", "ROUTE name WHEN condition, ...: side outputs"),
)

_DID_YOU_MEAN = re.compile(r"did you mean '([^']+)'\?")


@dataclass(frozen=True, slots=True)
class Symbol:
    """A source, table, view, sink, function or side output, where it is defined."""

    name: str
    kind: str
    span: Span
    name_span: Span


@dataclass(slots=True)
class Document:
    """One analysed text: the job when it compiles, the AST when it parses. Not
    ``complete`` when its analysis was abandoned (past the server's budget): then no
    request looks into it."""

    uri: str
    text: str
    job: CompiledJob | None
    tree: ast.Program | None
    diagnostics: tuple[Diagnostic, ...]
    symbols: tuple[Symbol, ...] = field(default_factory=tuple)
    complete: bool = True
    names: list[Word] | None = field(default=None, repr=False, compare=False)

    def lines(self) -> list[str]:
        return self.text.splitlines()


def analyse(uri: str, text: str, file: str) -> Document:
    """Compile ``text`` as ``flowc check`` does (Spark's rules included); when it does not
    compile, parse it alone for the symbols. Never raises for any text."""
    job: CompiledJob | None = None
    try:
        job = compile(text, file, for_spark=True)
        diagnostics = tuple(job.diagnostics)
    except CompileError as error:
        diagnostics = tuple(error.diagnostics)
    tree = job.ast if job is not None else _parse(text, file)
    document = Document(uri, text, job, tree, diagnostics)
    document.symbols = tuple(_symbols(tree)) if tree is not None else ()
    return document


def outline(uri: str, text: str, file: str, diagnostics: tuple[Diagnostic, ...]) -> Document:
    """The parse alone (symbols, no job) with ``diagnostics``: what is known of a text
    whose compilation failed inside flowc. Never raises."""
    try:
        tree = _parse(text, file)
        symbols = tuple(_symbols(tree)) if tree is not None else ()
    except Exception:
        tree, symbols = None, ()
    return Document(uri, text, None, tree, diagnostics, symbols)


def _parse(text: str, file: str) -> ast.Program | None:
    try:
        with deep_recursion():
            return parse(text, file, Reporter())
    except RecursionError:
        return None


def _symbols(tree: ast.Program) -> list[Symbol]:
    found: list[Symbol] = []
    for statement in tree.statements:
        if isinstance(statement, ast.CreateSource):
            kind = "table" if statement.bounded else "source"
            found.append(Symbol(statement.name.value, kind, statement.span, statement.name.span))
        elif isinstance(statement, ast.CreateSink):
            found.append(Symbol(statement.name.value, "sink", statement.span, statement.name.span))
        elif isinstance(statement, ast.CreateView):
            query = statement.query
            if isinstance(query, ast.PipeQuery) and any(
                isinstance(step, ast.MatchRecognize) for step in query.steps
            ):
                continue  # the hidden view a MATCH_RECOGNIZE is read as: no name written
            found.append(Symbol(statement.name.value, "view", statement.span, statement.name.span))
            query = statement.query
            if isinstance(query, ast.PipeQuery):
                for step in query.steps:
                    if isinstance(step, ast.Route):
                        found += [
                            Symbol(
                                f"{statement.name.value}.{b.name.value}",
                                "side output",
                                b.span,
                                b.name.span,
                            )
                            for b in step.branches
                        ]
        elif isinstance(statement, ast.CreateFunction):
            found.append(
                Symbol(statement.name.value, "function", statement.span, statement.name.span)
            )
    return found


# ---------------------------------------------------------------- positions


def contains(span: Span, line: int, column: int) -> bool:
    if (line, column) < (span.line, span.column):
        return False
    return (line, column) <= (span.end_line, span.end_column)


@dataclass(frozen=True, slots=True)
class Word:
    text: str
    span: Span


def word_at(document: Document, line: int, column: int) -> Word | None:
    """The name (a word or a quoted name) under the position, outside strings and comments."""
    for word in words(document):
        if word.span.line == line and word.span.column <= column <= word.span.end_column:
            return word
    return None


def words(document: Document) -> list[Word]:
    """Every name of the text with its span (the formatter's tokens, so strings and
    comments are never names); worked out once per document (seconds for 1 MB)."""
    if document.names is None:
        document.names = _words(document)
    return document.names


def _words(document: Document) -> list[Word]:
    found: list[Word] = []
    index = LineIndex(document.uri, document.text)
    offset = 0
    for token in tokens(document.text):
        text = token.text
        if token.kind is TokenKind.TEXT and (text[:1].isalpha() or text[:1] in "_`"):
            name = text.strip("`").replace("``", "`") if text.startswith("`") else text
            found.append(Word(name, index.span(offset, offset + len(text))))
        offset += len(text)
    return found


def _same(a: str, b: str) -> bool:
    return a.lower() == b.lower()


# ---------------------------------------------------------------- definition, references


def definition(document: Document, line: int, column: int) -> Span | None:
    """Where the source, table, view, sink, function, side output or source column under
    the position is defined."""
    word = word_at(document, line, column)
    if word is None:
        return None
    for symbol in document.symbols:
        if _same(symbol.name, word.text) or _same(symbol.name.rpartition(".")[2], word.text):
            return symbol.name_span
    for column_def in _source_columns(document):
        if _same(column_def.name.value, word.text):
            return column_def.name.span
    return None


def references(document: Document, line: int, column: int) -> list[Span]:
    """Every place the name under the position is written (definition included)."""
    word = word_at(document, line, column)
    if word is None:
        return []
    return [w.span for w in words(document) if _same(w.text, word.text)]


def _source_columns(document: Document) -> list[ast.ColumnDef]:
    if document.tree is None:
        return []
    return [
        column
        for statement in document.tree.statements
        if isinstance(statement, ast.CreateSource | ast.CreateSink)
        for column in (statement.columns or ())
    ]


# ---------------------------------------------------------------- hover


def hover(document: Document, line: int, column: int) -> str | None:
    """Markdown: a relation's schema, or a step's operator in the JobGraph with the
    schema it outputs."""
    word = word_at(document, line, column)
    job = document.job
    if job is not None and word is not None:
        schema = _relation_schema(job, word.text)
        if schema is not None:
            kind, columns = schema
            return f"**{kind} `{word.text}`**\n\n" + _columns_table(columns)
    if job is not None:
        step = _step_at(job, line, column)
        if step is not None:
            return step
    if word is not None:
        for symbol in document.symbols:
            if _same(symbol.name, word.text):
                return f"**{symbol.kind} `{symbol.name}`** (the program has errors: no schema)"
    return None


def _columns_table(columns: list[tuple[str, str]]) -> str:
    rows = "\n".join(f"| `{name}` | {type_} |" for name, type_ in columns)
    return "| column | type |\n|---|---|\n" + rows


def _relation_schema(job: CompiledJob, name: str) -> tuple[str, list[tuple[str, str]]] | None:
    program = job.program
    for source in program.sources:
        if _same(source.name, name):
            kind = "table" if source.bounded else "source"
            return kind, [(c.name, c.type) for c in source.output_schema]
    for view in program.views:
        if _same(view.name, name):
            return "view", [(c.name, c.type) for c in view.stream.schema]
    for insert in program.inserts:
        if _same(insert.sink, name):
            return "sink", [(c.name, c.type) for c in insert.stream.schema]
    return None


def _step_at(job: CompiledJob, line: int, column: int) -> str | None:
    """The innermost step whose span holds the position: its kind, schema and operator."""
    best = None
    streams = [v.stream for v in job.program.views] + [i.stream for i in job.program.inserts]
    while streams:
        stream = streams.pop()
        for step in stream.steps:
            streams.extend(step.inputs)
            if contains(step.span, line, column) and (
                best is None
                or (step.span.line, step.span.column) > (best.span.line, best.span.column)
            ):
                best = step
    if best is None:
        return None
    text = [f"**{best.kind.value}** (line {best.span.line})"]
    node_id = job.transformations.step_nodes.get(id(best))
    if node_id is not None:
        for vertex in job.job_graph.vertices.values():
            if any(op.node_id == node_id for op in vertex.operators):
                physical = next(v for v in job.physical_plan.vertices if v.vertex is vertex)
                runs = physical.key_groups
                groups = (
                    ", ".join(f"subtasks {r.first}-{r.last}: {r.low}-{r.high}" for r in runs)
                    if runs
                    else "not keyed"
                )
                inputs = (
                    ", ".join(
                        f"{e.ship_strategy}"
                        + (f"({', '.join(e.stream_edge.keys)})" if e.stream_edge.keys else "")
                        for e in vertex.inputs
                    )
                    or "none (a source)"
                )
                text.append(
                    f"JobGraph vertex `{vertex.name}` ({vertex.id[:8]}), parallelism "
                    f"{vertex.parallelism}; exchange in: {inputs}; key groups: {groups}"
                )
                break
    text.append(_columns_table([(c.name, c.type) for c in best.schema]))
    return "\n\n".join(text)


# ---------------------------------------------------------------- completion


@dataclass(frozen=True, slots=True)
class Candidate:
    label: str
    kind: str  # step, setting, connector, option, column, relation, keyword
    detail: str


def completions(document: Document, line: int, column: int) -> list[Candidate]:
    """What may be written at the position: a step after ``|>``, a setting key after SET,
    a connector name in ``connector = '``, an option of the statement's connector inside
    ``WITH (``, otherwise relations and columns in scope."""
    lines = document.lines()
    before = lines[line - 1][: column - 1] if 0 < line <= len(lines) else ""
    if re.search(r"\|>\s*\w*$", before):
        return [Candidate(step, "step", what) for step, what in STEPS]
    if re.search(r"^\s*SET\s+[\w.]*$", before, re.IGNORECASE):
        return [
            Candidate(key, "setting", kind.description) for key, kind in catalog.SETTINGS.items()
        ]
    if re.search(r"connector\s*=\s*'\w*$", before, re.IGNORECASE):
        return [
            Candidate(name, "connector", " and ".join(sorted(c.roles)))
            for name, c in catalog.CONNECTORS.items()
        ]
    statement = _statement_text(document, line, column)
    if re.search(r"\bWITH\s*\([^)]*$", statement, re.IGNORECASE):
        connector = re.search(r"connector\s*=\s*'(\w+)'", statement, re.IGNORECASE)
        found = catalog.CONNECTORS.get(connector.group(1).lower()) if connector else None
        if found is not None:
            return [Candidate(k, "option", v.description) for k, v in found.options.items()]
        return [Candidate("connector", "option", "the connector: " + ", ".join(catalog.CONNECTORS))]
    candidates = [Candidate(s.name, "relation", s.kind) for s in document.symbols]
    seen: set[str] = set()
    for name, type_, owner in _columns(document):
        if name not in seen:
            seen.add(name)
            candidates.append(Candidate(name, "column", f"{type_} ({owner})"))
    return candidates


def _statement_text(document: Document, line: int, column: int) -> str:
    """The text from the start of the statement holding the position up to it."""
    lines = document.lines()
    if not 0 < line <= len(lines):
        return ""
    upto = "\n".join([*lines[: line - 1], lines[line - 1][: column - 1]])
    return upto[upto.rfind(";") + 1 :]


def _columns(document: Document) -> list[tuple[str, str, str]]:
    job = document.job
    found: list[tuple[str, str, str]] = []
    if job is not None:
        for source in job.program.sources:
            found += [(c.name, c.type, source.name) for c in source.output_schema]
        for view in job.program.views:
            found += [(c.name, c.type, view.name) for c in view.stream.schema]
    else:
        found += [(c.name.value, c.type.text, "") for c in _source_columns(document)]
    return found


# ---------------------------------------------------------------- quick fixes


def suggestion(diagnostic_help: str | None) -> str | None:
    """The replacement a diagnostic's "did you mean 'x'?" offers."""
    if not diagnostic_help:
        return None
    match = _DID_YOU_MEAN.search(diagnostic_help)
    return match.group(1) if match else None
