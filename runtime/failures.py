"""A failed Spark query as a flowc diagnostic, and Spark's own output kept off the terminal.

Spark reports a failure as an error class and a message (``[CAST_INVALID_INPUT] The value
'x' ...``), often with the SQL text of the expression that failed, followed by pages of
Java stack trace. ``flowc run`` shows the class and the message's first lines as a
diagnostic at the .flow line the failure came from:

- E0802: an expression failed at run time (a cast, a division by zero, an overflow);
  the caret is under that expression.
- E0803: the checkpoint holds state or metadata this version of the query cannot use
  (an AGGREGATE's key or values changed, say); the caret is under the stateful step.
- E0804: any other failure of Spark; the caret is under the INSERT of the failed query.
- E0806: an upsert sink could not write a micro-batch (its server refused, or two rows of
  the batch had one key); the caret is under the INSERT.
- E0807: Spark's JVM ended while the job ran (a task overflowed Java's stack or ran out
  of memory, which Spark's executor answers by ending the JVM); the caret is under the
  INSERT of the query whose task ended it, which Spark's log names.
- E0805: a Python function raised, or returned a value that is not of its declared type;
  the caret is under the call (each call of a function is a UDF of its own).

The full text and the Java stack trace go to a log file the diagnostic names. By default
``flowc run`` sends everything Spark writes to the process's standard error (log4j lines,
progress bars, stack traces; the JVM inherits the descriptor when it starts) to that same
file: :func:`spark_output`.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import os
import re
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from flowc import ast
from flowc.diagnostics import Diagnostic, Severity
from flowc.errorcodes import Code
from flowc.job import CompiledJob
from flowc.program import InsertDef, Program, Step, Stream, view_of
from flowc.spans import Span, text_span
from flowc.spark.spark_plan import checkpoint_root
from flowc.sql.spark_sql import UnsupportedOnSpark, sql_of

EXPRESSION_FAILED = Code.E0802
CHECKPOINT_INCOMPATIBLE = Code.E0803
SPARK_FAILED = Code.E0804
FUNCTION_FAILED = Code.E0805
SINK_FAILED = Code.E0806
JVM_ENDED = Code.E0807

LOG_FOLDER = ".flowc-logs"
#: Log files kept per job in a log folder; older ones are deleted when a run starts.
KEEP_LOGS = 20

#: Error classes of a checkpoint this query cannot continue from (Spark's names).
CHECKPOINT_CLASSES = frozenset(
    {
        "STATE_STORE_KEY_SCHEMA_NOT_COMPATIBLE",
        "STATE_STORE_VALUE_SCHEMA_NOT_COMPATIBLE",
        "STATE_STORE_COLUMN_FAMILY_SCHEMA_INCOMPATIBLE",
        "STATE_STORE_INVALID_VALUE_SCHEMA_EVOLUTION",
        "STATE_STORE_INVALID_CONFIG_AFTER_RESTART",
        "STATE_STORE_INVALID_VARIABLE_TYPE_CHANGE",
        "STATE_STORE_KEY_ROW_FORMAT_VALIDATION_FAILURE",
        "STATE_STORE_VALUE_ROW_FORMAT_VALIDATION_FAILURE",
        "STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY",
        "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA",
        "STREAMING_STATEFUL_OPERATOR_MISSING_STATE_DIRECTORY",
        "STREAM_STREAM_JOIN_INCOMPATIBLE_STATE_STORE_CONFIGS",
    }
)
#: Messages of the same kind that carry no error class (Spark's legacy errors).
_CHECKPOINT_MESSAGES = ("does not support recovering from checkpoint location",)
_CHECKPOINT_ADVICE = (
    "Spark cannot continue this query from what its checkpoint holds (was the query "
    "changed since?): run with a new --checkpoint-dir, where it starts over, or revert "
    "the change"
)

_ERROR_CLASS = re.compile(r"\[([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)\]")
#: Spark's query context for SQL text: the line of the SQL text and carets under the part
#: that failed (SQLQueryContext.summary).
_SQL_CONTEXT = re.compile(r"^== SQL[^\n]*\(line \d+, position \d+\) ==\n([^\n]*)\n( *)(\^+)", re.M)
_DATAFRAME_CONTEXT = re.compile(r"^== DataFrame ==$", re.M)
#: Where Spark's own summary ends and its dump of the query's state begins.
_SUMMARY_END = ("\n=== Streaming Query ===", "\nJVM stacktrace:", "\n\tat ")
#: Wrappers around the cause's own message.
_WRAPPERS = (
    re.compile(r"^\[STREAM_FAILED\] Query .*? terminated with exception: "),
    re.compile(r"^(?:[a-z][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error): "),
    # A failure inside an upsert sink's foreachBatch function: the cause is the last
    # line of the Python traceback py4j hands back (a raise_error's message, say).
    re.compile(
        r"^.*?An exception was raised by the Python Proxy\. Return Message: Traceback "
        r"\(most recent call last\):.*?^pyspark\.errors\.exceptions\.[\w.]+: ",
        re.S | re.M,
    ),
)
#: Spark's advice that flowc replaces with its own (never turn off the schema check).
_DROPPED_ADVICE = (
    "If you want to force",
    "However, please note",
    "Please check number",
    "SQLSTATE: ",  # the wrapper's own, after the cause's message
)


class JavaErrorText(RuntimeError):
    """A py4j Py4JJavaError's text, read once: py4j asks the JVM for it each time the
    error is printed, and the JVM may end after the call failed (a task's fatal error ends
    it: seen in CI, where printing the failure then raised ConnectionRefusedError and
    flowc crashed)."""


class JavaTextLost(JavaErrorText):
    """A Py4JJavaError whose text could not be read: the JVM had already ended."""


def readable(error: BaseException) -> BaseException:
    """``error``, or, for py4j's Py4JJavaError, its text read now, which stays readable
    after the JVM ends."""
    if not hasattr(error, "java_exception"):
        return error  # its text is Python's: PySpark's captured errors, py4j's others
    try:
        text = str(error)
    except Exception:  # py4j found no JVM to ask
        message = getattr(error, "errmsg", None) or type(error).__name__
        lost = JavaTextLost(f"{message} (Java's text of the error is lost: the JVM ended)")
        lost.__cause__ = error
        return lost
    read = JavaErrorText(text)
    read.__cause__ = error
    return read


def spark_errors() -> tuple[type[BaseException], ...]:
    """The exceptions a call into Spark raises when Spark fails (not when flowc has a bug):
    PySpark's errors (a failed query, an analysis error, Spark Connect's) and py4j's (an
    exception in the JVM, a lost connection to it)."""
    from pyspark.errors import PySparkException

    try:
        from py4j.protocol import Py4JError  # type: ignore[import-untyped]
    except ImportError:  # Spark Connect's client alone has no py4j
        return (PySparkException,)
    return (PySparkException, Py4JError)


# ---------------------------------------------------------------- the log file


def log_path(job: CompiledJob, checkpoint_dir: str | None, base_dir: str | None) -> str:
    """A new log file's path for a run of ``job``: ``.flowc-logs/<job>-<time>-<pid>.log`` in
    the checkpoint folder when that is a local folder (else in the temporary folder). The
    folder is created and its oldest logs of the job are deleted."""
    folder = base_dir if base_dir is not None else str(Path(job.file).parent)
    root = checkpoint_root(job.spark_plan, checkpoint_dir, os.path.abspath(folder))
    if root.startswith("file:"):
        root = re.sub(r"^file:(//)?", "", root)
    elif re.match(r"^[A-Za-z][\w+.-]*:", root) and not os.path.isabs(root):
        root = tempfile.gettempdir()  # hdfs://, s3a://: not a folder of this machine
    name = re.sub(r"[^\w.-]", "_", job.program.settings.job_name)[:80] or "job"
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    file_name = f"{name}-{stamp}-{os.getpid()}.log"
    for candidate in (Path(root) / LOG_FOLDER, Path(tempfile.gettempdir()) / "flowc-logs"):
        try:
            candidate.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        _prune(candidate, name)
        return str(candidate / file_name)
    return os.path.join(tempfile.gettempdir(), file_name)


def _prune(folder: Path, name: str) -> None:
    pattern = re.compile(re.escape(name) + r"-\d{8}T\d{6}Z-\d+\.log")
    try:
        logs = sorted(p for p in folder.iterdir() if pattern.fullmatch(p.name))
    except OSError:
        return
    for old in logs[: max(len(logs) - (KEEP_LOGS - 1), 0)]:
        with suppress(OSError):
            old.unlink()


class FailureLog:
    """Where a run's failures are recorded: the run's log file, or one made on the first
    failure."""

    def __init__(
        self,
        job: CompiledJob,
        checkpoint_dir: str | None,
        base_dir: str | None,
        path: str | None = None,
    ) -> None:
        self.job = job
        self.checkpoint_dir = checkpoint_dir
        self.base_dir = base_dir
        self.path = path

    def record(self, title: str, error: BaseException) -> str:
        """Append ``error``'s whole text; the log's path."""
        if self.path is None:
            self.path = log_path(self.job, self.checkpoint_dir, self.base_dir)
        record(self.path, title, error)
        return self.path


@contextmanager
def spark_output(path: str) -> Iterator[TextIO]:
    """Everything written to this process's standard error while inside, and ever after by
    a JVM or Python worker started inside (they inherit the descriptor), goes to the file
    at ``path``: Spark's log lines, progress bars and stack traces, and pyspark's own
    logging and warnings. Yields a stream to the real standard error for flowc's lines."""
    sys.stderr.flush()
    try:
        log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    except OSError:  # no log file: Spark's output stays where it is
        yield sys.stderr
        return
    try:
        saved = os.dup(2)
    except OSError:  # no standard error to redirect
        os.close(log)
        yield sys.stderr
        return
    terminal = os.fdopen(
        os.dup(saved),
        "w",
        encoding=getattr(sys.stderr, "encoding", None) or "utf-8",
        errors="backslashreplace",
        buffering=1,
    )
    os.dup2(log, 2)
    os.close(log)
    try:
        yield terminal
    finally:
        terminal.flush()
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        terminal.close()


class Py4jToLog(logging.Filter):
    """py4j reports each call into a JVM that has ended on the *root* logger
    (``logging.exception`` in ``GatewayClient.send_command``), with a Python traceback;
    once the diagnostic has said the JVM ended, those records go to Spark's log, not to
    the terminal (seen in CI: a traceback after E0807, written at the process's exit)."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def filter(self, record: logging.LogRecord) -> bool:
        if f"{os.sep}py4j{os.sep}" not in record.pathname:
            return True
        try:
            with open(self.path, "a", encoding="utf-8", errors="backslashreplace") as log:
                log.write(logging.Formatter().format(record) + "\n")
        except OSError:
            pass
        return False


def py4j_to_log(path: str) -> None:
    """From now on, py4j's log records (its own loggers' and the root logger's) go to the
    log at ``path``."""
    logging.getLogger("py4j").disabled = True
    root = logging.getLogger()
    if not any(isinstance(f, Py4jToLog) for f in root.filters):
        root.addFilter(Py4jToLog(path))


def record(path: str, title: str, error: BaseException) -> None:
    """Append a failure's whole text and its Java stack trace to the log at ``path``."""
    stamp = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    text = str(error)
    trace = getattr(error, "_stackTrace", None) or ""
    if trace and trace not in text:
        text += "\n\nJVM stack trace:\n" + str(trace)
    try:
        with open(path, "a", encoding="utf-8", errors="backslashreplace") as log:
            log.write(f"\n==== flowc {stamp}: {title}\n{text.rstrip()}\n====\n")
    except OSError:
        pass


# ---------------------------------------------------------------- reading Spark's error


@dataclass(frozen=True, slots=True)
class SparkError:
    """What flowc reads from a Spark failure's text."""

    headline: str
    #: Further lines of Spark's message (before its query context and its plan dump).
    details: tuple[str, ...]
    error_class: str | None
    #: The SQL text Spark ran, the failing part's offset in it and the part itself.
    sql: tuple[str, int, str] | None
    #: Spark said which DataFrame call failed (an expression flowc did not write as SQL).
    dataframe_context: bool

    @classmethod
    def of(cls, text: str) -> SparkError:
        summary = text.strip()
        for end in _SUMMARY_END:
            summary = summary.split(end, 1)[0]
        for wrapper in _WRAPPERS:
            summary = wrapper.sub("", summary, count=1)
        context = _SQL_CONTEXT.search(summary)
        sql = None
        if context is not None:
            line, spaces, carets = context.groups()
            start = len(spaces)
            sql = (line, start, line[start : start + len(carets)])
        message = re.split(r"^== ", summary, maxsplit=1, flags=re.M)[0].strip()
        lines = [line.strip() for line in message.splitlines() if line.strip()] or [
            "Spark failed without a message"
        ]
        details = tuple(line for line in lines[1:4] if not line.startswith(_DROPPED_ADVICE))
        found = _ERROR_CLASS.match(lines[0])
        return cls(
            headline=lines[0],
            details=details,
            error_class=found.group(1) if found else None,
            sql=sql,
            dataframe_context=_DATAFRAME_CONTEXT.search(summary) is not None,
        )

    @property
    def checkpoint_incompatible(self) -> bool:
        if self.error_class is not None:
            return self.error_class.split(".")[0] in CHECKPOINT_CLASSES
        return any(m in self.headline for m in _CHECKPOINT_MESSAGES)


# ---------------------------------------------------------------- mapping to the .flow file


def explain(
    job: CompiledJob,
    query: str | None,
    error: BaseException,
    log: str | None,
    what: str | None = None,
) -> Diagnostic | None:
    """The diagnostic for ``error``, a failure of query ``query`` (None: of the job as a
    whole, before its queries ran), its message starting with ``what`` (default: "query
    'name' failed"); None when flowc cannot place it in the .flow file (then
    :func:`summary` is the message). ``log`` is the log file to name."""
    read = SparkError.of(str(error))
    program = job.program
    failed_call = _FUNCTION_FAILED.search(str(error))
    if failed_call is not None:
        return _function_failed(job, failed_call, log, what, query)
    insert = _insert(program, query) if query is not None else None
    failed_sink = _SINK_FAILED.search(str(error))
    if failed_sink is not None and insert is not None:
        where = what or f"query '{query}' failed"
        advice = "the sink could not write this micro-batch; it wrote nothing of it"
        if log:
            advice += f"; Spark's log and stack trace: {_shown(log)}"
        return Diagnostic(
            SINK_FAILED, Severity.ERROR, f"{where}: {failed_sink.group(1)}", insert.span, advice
        )
    streams = list(_lineage(program, insert.stream)) if insert is not None else []
    span: Span | None = None
    notes: list[str] = list(read.details)
    if read.checkpoint_incompatible:
        code = CHECKPOINT_INCOMPATIBLE
        step = _stateful_step(streams, read)
        span = step.span if step is not None else insert.span if insert is not None else None
        advice = _CHECKPOINT_ADVICE
    elif read.sql is not None or read.dataframe_context:
        code = EXPRESSION_FAILED
        advice = "a row made this expression fail at run time"
        if read.sql is not None:
            found = _failed_expression(job, streams, *read.sql)
            if found is not None:
                span = found
            else:
                notes.append(f"Spark ran: {read.sql[0]}")
        span = span or (insert.span if insert is not None else None)
    else:
        code = SPARK_FAILED
        advice = "Spark failed running this query"
        span = insert.span if insert is not None else None
    if span is None:
        return None
    where = what or (f"query '{query}' failed" if query is not None else "Spark failed")
    if log:
        advice += f"; Spark's log and stack trace: {_shown(log)}"
    # Spark's further lines as notes, in the layout render_text gives the help line.
    pad = " " * len(str(span.line))
    help_text = advice + "".join(f"\n{pad} = note: {note}" for note in notes)
    return Diagnostic(code, Severity.ERROR, f"{where}: {read.headline}", span, help_text)


#: The generated program's message for a Python function that raised or returned a value
#: of another type (flowc.spark.generated_runtime.python_function): the call's number, then what.
_FUNCTION_FAILED = re.compile(
    r"\[FLOWC_FUNCTION_FAILED\] call (\d+) at [^\n]*?: (function '[^\n]*)"
)


#: An upsert sink's message for a micro-batch it could not write (flowc.spark.generated_runtime).
_SINK_FAILED = re.compile(r"\[FLOWC_SINK_FAILED\] (sink '[^\n]*)")


def _function_failed(
    job: CompiledJob, found: re.Match[str], log: str | None, what: str | None, query: str | None
) -> Diagnostic | None:
    """E0805 at the call of the function that failed (each call is registered apart)."""
    calls = job.program.function_calls
    number = int(found.group(1))
    if number >= len(calls):
        return None
    where = what or (f"query '{query}' failed" if query is not None else "Spark failed")
    advice = "a row made this Python function fail; the row's values reached it as declared"
    if log:
        advice += f"; Spark's log and stack trace: {_shown(log)}"
    return Diagnostic(
        FUNCTION_FAILED, Severity.ERROR, f"{where}: {found.group(2)}", calls[number].span, advice
    )


def summary(error: BaseException, log: str | None, what: str = "Spark failed") -> str:
    """A failure flowc cannot place in the .flow file, as its diagnostics read."""
    read = SparkError.of(str(error))
    code = CHECKPOINT_INCOMPATIBLE if read.checkpoint_incompatible else SPARK_FAILED
    lines = [f"error[{code}]: {what}: {read.headline}"]
    lines += [f"  = note: {d}" for d in read.details]
    if code == CHECKPOINT_INCOMPATIBLE:
        lines.append(f"  = help: {_CHECKPOINT_ADVICE}")
    if log:
        lines.append(f"  = help: Spark's log and stack trace: {_shown(log)}")
    return "\n".join(lines) + "\n"


def code_of(error: BaseException) -> Code:
    if _FUNCTION_FAILED.search(str(error)) is not None:
        return FUNCTION_FAILED
    if _SINK_FAILED.search(str(error)) is not None:
        return SINK_FAILED
    read = SparkError.of(str(error))
    if read.checkpoint_incompatible:
        return CHECKPOINT_INCOMPATIBLE
    if read.sql is not None or read.dataframe_context:
        return EXPRESSION_FAILED
    return SPARK_FAILED


def _shown(path: str) -> str:
    """A path as the user can best use it: relative to the working folder when inside it."""
    relative = os.path.relpath(path)
    return path if relative.startswith("..") else relative


def _insert(program: Program, query: str) -> InsertDef | None:
    """The INSERT whose Spark query is named ``query`` (queries are named after sinks)."""
    return next((i for i in program.inserts if i.sink == query), None)


def _lineage(program: Program, stream: Stream) -> Iterator[Stream]:
    """``stream`` and every stream it reads from, through views, joins and unions."""
    seen: set[str] = set()
    pending = [stream]
    while pending:
        current = pending.pop(0)
        yield current
        view = view_of(current.origin)
        if view is not None and view not in seen:
            seen.add(view)
            pending.append(program.view(view).stream)
        for step in current.steps:
            pending.extend(step.inputs)


def _steps(streams: list[Stream]) -> Iterator[Step]:
    for stream in streams:
        yield from stream.steps


def _expressions(node: object) -> Iterator[ast.SqlExpr]:
    """Every SQL expression under an AST node."""
    if isinstance(node, ast.SqlExpr):
        yield node
    elif isinstance(node, tuple | list):
        for item in node:
            yield from _expressions(item)
    elif dataclasses.is_dataclass(node) and not isinstance(node, type):
        for f in dataclasses.fields(node):
            if f.name != "span":
                yield from _expressions(getattr(node, f.name))


def _step_expressions(step: Step) -> Iterator[ast.SqlExpr]:
    yield from _expressions(step.node)
    if step.window is not None:
        yield from _expressions(step.window)


def _failed_expression(
    job: CompiledJob, streams: list[Stream], sql: str, start: int, fragment: str
) -> Span | None:
    """The span of the expression Spark's SQL text ``sql`` came from (flowc writes each
    expression as one SQL text, sometimes inside a larger one), narrowed to ``fragment``
    where the .flow text shows it. The failed query's own streams are searched first."""
    program = job.program
    everything = [v.stream for v in program.views] + [i.stream for i in program.inserts]
    candidates: list[tuple[int, int, ast.SqlExpr]] = []
    for rank, pool in enumerate((streams, everything)):
        for step in _steps(pool):
            for expr in _step_expressions(step):
                try:
                    text = sql_of(expr)
                except UnsupportedOnSpark:
                    continue
                at = sql.find(text)
                while at >= 0:
                    if at <= start and start + len(fragment) <= at + len(text):
                        exact = 0 if at == 0 and len(text) == len(sql) else 1
                        candidates.append((rank * 2 + exact, len(text), expr))
                        break
                    at = sql.find(text, at + 1)
        if candidates:
            break
    if not candidates:
        return None
    _, _, expr = min(candidates, key=lambda c: (c[0], c[1]))
    return _narrow(job.source, expr, fragment)


def _narrow(source: str, expr: ast.SqlExpr, fragment: str) -> Span:
    """The part of ``expr`` in the .flow file that reads as ``fragment`` (Spark's SQL for
    it: quoted names, other spacing, other case), or the whole expression."""
    span = expr.span
    lines = source.split("\n")
    if not 1 <= span.line <= len(lines):
        return span
    offset = sum(len(line) + 1 for line in lines[: span.line - 1]) + span.column - 1
    if source[offset : offset + len(expr.text)] != expr.text:
        return span
    written, positions = _normalized(expr.text)
    wanted, _ = _normalized(fragment)
    at = written.find(wanted) if wanted else -1
    if at < 0 or written.find(wanted, at + 1) >= 0 or wanted == written:
        return span
    first = offset + positions[at]
    last = offset + positions[at + len(wanted) - 1] + 1
    return text_span(source, Span(span.file, 1, 1, 1, 1), first, last)


def _normalized(text: str) -> tuple[str, list[int]]:
    """``text`` lower case without spaces and back-quotes, with each kept character's
    offset in ``text``."""
    kept: list[str] = []
    positions: list[int] = []
    for index, char in enumerate(text):
        if char.isspace() or char == "`":
            continue
        kept.append(char.lower())
        positions.append(index)
    return "".join(kept), positions


def _stateful_step(streams: list[Stream], read: SparkError) -> Step | None:
    """The stateful step whose state the checkpoint holds: the only one in the query, or
    the one whose keys Spark's message names."""
    steps = [s for s in _steps(streams) if s.stateful]
    if len(steps) <= 1:
        return steps[0] if steps else None
    text = " ".join(read.details)
    new = text[text.find("new ") :] if "new " in text else text
    named = [s for s in steps if s.keys and all(f"({k}," in new for k in s.keys)]
    return named[0] if len(named) == 1 else None


# ---------------------------------------------------------------- the JVM ended


@dataclass(frozen=True, slots=True)
class StartedQuery:
    """A query as Spark's log names it: by name, by id (its first characters on task
    lines) and by run id."""

    name: str
    id: str = ""
    run_id: str = ""


#: Spark's executor ends the JVM on a fatal error of a task (Utils.isFatalError: a
#: VirtualMachineError such as StackOverflowError), through SparkUncaughtExceptionHandler,
#: which logs the thread and the error's class on the next line.
_UNCAUGHT = re.compile(
    r"SparkUncaughtExceptionHandler: [^\n]*Uncaught exception in thread ([^\n]*)\n"
    r"((?:[a-z][\w$]*\.)+[A-Z][\w$]*)"
)
_TASK_THREAD = re.compile(
    r"Executor task launch worker for task [\d.]+ in stage [\d.]+ \(TID (\d+)\)"
)
_LOST_TASK = re.compile(r"\[queryId = ([0-9a-f]+)\][^\n]*? Lost task [^\n]*?\(TID (\d+)\)")
_QUERY_TERMINATED = re.compile(
    r"Query [^\n]*? \[id = [0-9a-f-]+, runId = ([0-9a-f-]+)\] terminated with error"
)
#: How much of the end of Spark's log is read for why the JVM ended.
_LOG_TAIL = 8 << 20
_STACK_ADVICE = (
    "a task overflowed Java's stack, and Spark ends its JVM on that; a regular expression "
    "that repeats a group ('(a|b)*' in rlike, regexp_extract, split, ...) recurses once per "
    "repetition, so a long value overflows it: write the pattern without the repeated "
    "group ('[ab]*'), or give Java's threads a larger stack with "
    "--set spark.driver.extraJavaOptions=-Xss64m"
)
_MEMORY_ADVICE = (
    "the JVM ran out of memory, and Spark ends it on that: give it more with "
    "--set spark.driver.memory=4g, or keep less state"
)


def jvm_ended(
    job: CompiledJob,
    exit_code: int | None,
    candidates: Sequence[StartedQuery],
    spark_log: str | None,
    log: str | None,
) -> Diagnostic:
    """E0807: Spark's JVM ended while ``candidates`` ran. Spark's own output (``spark_log``,
    where flowc sent it) says which error of which task ended it; the caret is under that
    query's INSERT (under the only query's, when one ran; else at the program)."""
    text = _log_tail(spark_log)
    error, thread = _fatal_error(text)
    query = _query_that_ended(candidates, text, thread)
    insert = _insert(job.program, query) if query is not None else None
    span = insert.span if insert is not None else job.program.span
    message = "Spark's JVM ended" + (f" (exit code {exit_code})" if exit_code is not None else "")
    message += f" while query '{query}' ran" if query is not None else " while the job ran"
    if error is not None:
        message += f": {error}"
    if error == "java.lang.StackOverflowError":
        advice = _STACK_ADVICE
    elif error is not None and error.endswith("OutOfMemoryError"):
        advice = _MEMORY_ADVICE
    else:
        advice = "Spark's log says why it ended"
    shown = spark_log or log
    if shown:
        advice += f"; Spark's log and stack trace: {_shown(shown)}"
    return Diagnostic(JVM_ENDED, Severity.ERROR, message, span, advice)


def _log_tail(path: str | None) -> str:
    if path is None:
        return ""
    try:
        with open(path, "rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(log.tell() - _LOG_TAIL, 0))
            return log.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _fatal_error(text: str) -> tuple[str | None, str | None]:
    """The class of the error Spark's uncaught exception handler ended the JVM on, and the
    thread it was in (the first such, the one that ended it)."""
    found = _UNCAUGHT.search(text)
    return (found.group(2), found.group(1)) if found is not None else (None, None)


def _query_that_ended(
    candidates: Sequence[StartedQuery], text: str, thread: str | None
) -> str | None:
    """The query whose task ended the JVM: the only one; else the one Spark's log names
    for the task in ``thread`` (its "Lost task ... (TID n)" line); else the only one the
    log says terminated with an error."""
    if len(candidates) == 1:
        return candidates[0].name
    task = _TASK_THREAD.search(thread or "")
    if task is not None:
        named = {
            q.name
            for found in _LOST_TASK.finditer(text)
            if found.group(2) == task.group(1)
            for q in candidates
            if q.id and q.id.startswith(found.group(1))
        }
        if len(named) == 1:
            return named.pop()
    runs = {q.run_id: q.name for q in candidates if q.run_id}
    terminated = {runs[r] for r in _QUERY_TERMINATED.findall(text) if r in runs}
    return terminated.pop() if len(terminated) == 1 else None
