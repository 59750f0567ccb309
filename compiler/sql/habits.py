"""What Spark and Flink users write out of habit, and how flowc answers it.

- sqlglot reads ``GROUP BY window(ts, '1 minute')`` as the start of a WINDOW clause;
  :func:`keyword_calls_as_functions` makes ``window(`` (and ``session(``) a function call
  again, as Spark reads it.
- Flink SQL's group windows (``GROUP BY TUMBLE(ts, INTERVAL '1' MINUTE)``, HOP, SESSION,
  ``TUMBLE_START(...)`` and the rest of that family, ``FROM TABLE(TUMBLE(...))``) are
  E0602, with the Spark SQL and the pipe step to write instead.
- ``CREATE TABLE`` (Flink's way to declare sources and sinks) gets a hint on its syntax
  error: write CREATE SOURCE or CREATE SINK.
- A ``files`` source whose path does not exist is warning W0020 where it is compiled (the
  folder may be made later) and an error where it is run (:func:`run_blockers`).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlglot import exp
from sqlglot.tokenizer_core import TokenType

from flowc import catalog
from flowc.diagnostics import Diagnostic, Reporter, Severity
from flowc.errorcodes import Code

if TYPE_CHECKING:
    from flowc import ast
    from flowc.job import CompiledJob

# ---------------------------------------------------------------- Spark's window(...)

_KEYWORD_FUNCTIONS = frozenset({TokenType.WINDOW, TokenType.SESSION})


def keyword_calls_as_functions(tokens: list[Any]) -> list[Any]:
    """Make ``window(`` and ``session(`` function calls in sqlglot's tokens (in place).

    sqlglot stops a GROUP BY list at a WINDOW token, taking it for a WINDOW clause, so
    ``GROUP BY window(ts, '1 minute')`` does not parse; SESSION cannot start a call at
    all. A WINDOW clause is ``WINDOW name AS (...)``: right before ``(`` either word is
    a function's name (Spark's ``window``, Flink's ``SESSION``).
    """
    for token, following in itertools.pairwise(tokens):
        if token.token_type in _KEYWORD_FUNCTIONS and following.token_type is TokenType.L_PAREN:
            token.token_type = TokenType.VAR
    return tokens


#: The words that may need :func:`keyword_calls_as_functions` (a cheap test on the text).
KEYWORD_FUNCTION_WORDS = re.compile(r"\b(?:window|session)\s*\(", re.IGNORECASE)


# ---------------------------------------------------------------- Flink's group windows

#: Flink SQL's group window functions, as written in GROUP BY.
FLINK_GROUP_WINDOWS = frozenset({"TUMBLE", "HOP", "SESSION"})

#: Flink SQL's auxiliary window functions: TUMBLE_START(ts, size) and the like.
FLINK_WINDOW_PROPERTIES = frozenset(
    f"{kind}_{part}"
    for kind in FLINK_GROUP_WINDOWS
    for part in ("START", "END", "ROWTIME", "PROCTIME")
)

#: Flink's window calls that are not functions of a row: the group windows, their
#: properties, the window table functions and DESCRIPTOR (the Flink dialect lowers them).
FLINK_WINDOW_CALLS = (
    FLINK_GROUP_WINDOWS | FLINK_WINDOW_PROPERTIES | frozenset({"CUMULATE", "DESCRIPTOR"})
)

#: The properties flowc has no column for: Flink's rowtime (the window's end minus 1 ms,
#: with the watermark) and proctime attributes of a window.
FLINK_TIME_PROPERTIES = frozenset(
    name for name in FLINK_WINDOW_PROPERTIES if name.endswith(("_ROWTIME", "_PROCTIME"))
)


#: Flink's proctime properties: the time a window's row is written (Flink's
#: PROCTIME_MATERIALIZE after the window), ``current_timestamp()`` after the AGGREGATE.
FLINK_PROCTIME_PROPERTIES = frozenset(
    name for name in FLINK_WINDOW_PROPERTIES if name.endswith("_PROCTIME")
)


#: The meta key marking the ``current_timestamp()`` a ``*_PROCTIME`` property was written
#: as (its value the property's name), for the check of its window's time (E0617).
FLINK_PROCTIME_META = "flink_proctime"


#: Flink's rowtime properties: the window's end minus 1 ms, with the watermark (the
#: windowed AGGREGATE's ``window_time``).
FLINK_ROWTIME_PROPERTIES = frozenset(
    name for name in FLINK_WINDOW_PROPERTIES if name.endswith("_ROWTIME")
)


def flink_time_property_help(name: str) -> str:
    """What to write instead of ``TUMBLE_PROCTIME(...)`` (or a window time attribute where
    none can stand) in the Flink dialect."""
    kind = name.partition("_")[0]
    return (
        f"select {kind}_ROWTIME(...) (the window's end minus 1 ms, with the watermark) as "
        "an item of its own to cascade a window over event time; flowc has no "
        f"processing-time attribute of a window, and {kind}_END(...) is no substitute for "
        "cascading: a window over it puts the minute [09:59, 10:00) in [10:00, 10:05), "
        "where Flink puts it in [09:55, 10:00)"
    )


_UNITS = {
    "SECOND": "second",
    "SECONDS": "second",
    "MINUTE": "minute",
    "MINUTES": "minute",
    "HOUR": "hour",
    "HOURS": "hour",
    "DAY": "day",
    "DAYS": "day",
    "MILLISECOND": "millisecond",
    "MILLISECONDS": "millisecond",
}


def function_name(node: exp.Expr) -> str | None:
    """The upper-case name of an anonymous function call, else None."""
    if isinstance(node, exp.Anonymous):
        return node.name.upper()
    return None


def _interval(node: exp.Expr) -> tuple[str, str] | None:
    """``INTERVAL '1' MINUTE`` (or ``'1 minute'``) as ("1", "minute"), when it is that simple."""
    if isinstance(node, exp.Interval):
        unit = node.args.get("unit")
        value = node.this
        if isinstance(value, exp.Literal) and unit is not None:
            name = _UNITS.get(unit.name.upper())
            if name is not None and re.fullmatch(r"\d+", value.name):
                return value.name, name
        if isinstance(value, exp.Literal) and unit is None:
            node = value
    if isinstance(node, exp.Literal) and node.is_string:
        match = re.fullmatch(r"\s*(\d+)\s+([a-z]+?)s?\s*", node.name, re.IGNORECASE)
        if match and match.group(2).upper() in _UNITS:
            return match.group(1), _UNITS[match.group(2).upper()]
    return None


def _spark_duration(node: exp.Expr) -> str:
    parsed = _interval(node)
    if parsed is None:
        return node.sql("spark")
    count, unit = parsed
    return f"'{count} {unit}{'' if count == '1' else 's'}'"


def _pipe_duration(node: exp.Expr) -> str:
    parsed = _interval(node)
    if parsed is None:
        return node.sql("spark")
    count, unit = parsed
    return f"INTERVAL {count} {unit.upper()}"


def flink_window_help(call: exp.Anonymous) -> str:
    """What to write instead of Flink's ``TUMBLE(ts, size)``, ``HOP(ts, slide, size)``
    or ``SESSION(ts, gap)`` in GROUP BY: Spark's function, or flowc's pipe step."""
    kind = call.name.upper()
    args = list(call.expressions)
    time = args[0].sql("spark") if args else "ts"
    rest = args[1:]
    if kind == "HOP" and len(rest) == 2:
        slide, size = rest  # Flink: HOP(time, slide, size)
        spark = f"window({time}, {_spark_duration(size)}, {_spark_duration(slide)})"
        pipe = f"WINDOW HOP({time}, {_pipe_duration(size)}, {_pipe_duration(slide)})"
    else:
        function = "session_window" if kind == "SESSION" else "window"
        spark = f"{function}({', '.join([time, *(_spark_duration(a) for a in rest)])})"
        pipe = f"WINDOW {kind}({', '.join([time, *(_pipe_duration(a) for a in rest)])})"
    column = "session_window" if kind == "SESSION" else "window"
    return (
        f"Spark SQL groups by {spark} (then {column}.start and {column}.end are the "
        f"window's bounds); in a pipe query write |> {pipe} |> AGGREGATE ..."
    )


def flink_property_help(name: str) -> str:
    """What to write instead of ``TUMBLE_START(...)`` and its family."""
    kind, _, part = name.partition("_")
    field = "start" if part == "START" else "end"
    function = "session_window" if kind == "SESSION" else "window"
    return (
        f"group by Spark's {function}(ts, ...) and select {function}.{field}; "
        "a windowed AGGREGATE outputs window_start and window_end"
    )


#: Flink's window table functions: ``FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), ...))``.
FLINK_WINDOW_TVF = re.compile(r"\bTABLE\s*\(\s*(TUMBLE|HOP|CUMULATE|SESSION)\s*\(", re.IGNORECASE)


def flink_tvf_help(kind: str) -> str:
    kind = kind.upper()
    if kind == "CUMULATE":
        return (
            "Spark SQL has no cumulating window: write SET sql.dialect = 'flink'; before "
            "the query, or in a pipe query |> WINDOW CUMULATE(ts, size, step) |> AGGREGATE ..."
        )
    spark = {"TUMBLE": "window(ts, '1 minute')", "HOP": "window(ts, size, slide)"}.get(
        kind, "session_window(ts, gap)"
    )
    return (
        f"read the source itself and GROUP BY {spark}: window.start and window.end are the "
        f"window's bounds; in a pipe query write |> WINDOW {kind}(ts, ...) |> AGGREGATE ..."
    )


# ---------------------------------------------------------------- CREATE TABLE

#: Words after CREATE that Flink (or Spark) users write, and what flowc wants.
_CREATE_WORDS = frozenset({"table", "temporary", "temp", "or"})
_CONNECTOR = re.compile(r"""['"`]?connector['"`]?\s*=\s*['"]([\w-]+)['"]""", re.IGNORECASE)


def create_help(word: str, statement: str) -> str | None:
    """A help line for ``CREATE <word>`` where flowc expected SOURCE, SINK or VIEW."""
    word = word.lower()
    if word not in _CREATE_WORDS:
        return None
    rest = statement.lower()
    if (
        word in ("or", "temporary", "temp")
        and re.search(r"\bview\b", rest)
        and not re.search(r"\btable\b", rest)
    ):
        return "write CREATE VIEW name AS query; a view is defined once, and only for this job"
    roles: tuple[str, ...] = ("source", "sink")
    match = _CONNECTOR.search(statement)
    connector = catalog.CONNECTORS.get(match.group(1).lower()) if match else None
    if connector is not None:
        roles = tuple(r for r in ("source", "sink") if r in connector.roles) or roles
    return table_help(roles)


def table_help(roles: tuple[str, ...]) -> str:
    """What to write instead of a Flink ``CREATE TABLE`` over a connector of these roles:
    flowc's tables are bounded files joined from a stream, nothing else."""
    if roles == ("source",):
        return (
            "a flowc table is bounded files (connector = 'files'); a table you read as a "
            "stream is CREATE SOURCE name (columns) WITH (...)"
        )
    if roles == ("sink",):
        return (
            "a flowc table is bounded files you JOIN; a table you write is "
            "CREATE SINK name WITH (...)"
        )
    return (
        "a flowc table is bounded files (connector = 'files') you JOIN; write CREATE SOURCE "
        "name (columns) WITH (...) for a stream you read, CREATE SINK name WITH (...) for "
        "one you INSERT INTO"
    )


# ---------------------------------------------------------------- files source paths

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
#: Hadoop's glob characters: Spark does not check a glob path before it runs.
_GLOB = re.compile(r"[*?\[\]{}\\]")


def local_source_path(file: str, path: str, base_dir: str | None = None) -> Path | None:
    """Where a ``files`` source's ``path`` is on this machine, resolved as the generated
    program resolves it (relative to ``base_dir``, by default the .flow file's folder);
    None when it cannot be checked here: no real .flow file for a relative path, a remote
    file system, a glob."""
    if not file or file.startswith("<"):
        return None
    scheme = _SCHEME.match(path)
    if scheme is not None and len(scheme.group(1)) > 1:  # not a Windows drive letter
        if scheme.group(1).lower() != "file":
            return None
        path = re.sub(r"^file:(//[^/]*)?", "", path)
    if not path or _GLOB.search(path):
        return None
    resolved = Path(path)
    if not resolved.is_absolute():
        folder = Path(base_dir) if base_dir is not None else Path(file).parent
        if not Path(file).is_file():
            return None
        resolved = folder / resolved
    return resolved


def check_source_path(
    file: str,
    source: str,
    option: ast.Option,
    path: object,
    reporter: Reporter,
    base_dir: str | None = None,
) -> None:
    """W0020 at ``option``'s value when a files source's ``path`` does not exist, looked
    for where the job reads it: relative to ``base_dir`` (``--base-dir``), by default the
    .flow file's folder."""
    if not isinstance(path, str):
        return
    resolved = local_source_path(file, path, base_dir)
    if resolved is None or resolved.exists():
        return
    where = "" if str(resolved) == path else f" (looked for {resolved})"
    reporter.warning(
        Code.W0020,
        f"source '{source}' reads '{path}', which does not exist{where}",
        option.value.span,
        help="flowc run needs it: create the folder or fix the path (relative paths start "
        "from the .flow file's folder, or --base-dir)",
    )


def run_blockers(job: CompiledJob | Iterable[Diagnostic]) -> list[Diagnostic]:
    """The warnings ``flowc run`` must treat as errors, as errors with the same code.

    A ``files`` source whose path does not exist (W0020) is only a warning where a job is
    checked or compiled, as the folder may be made before the job runs; Spark would fail
    the query at start with ``PATH_NOT_FOUND``. Takes a compiled job (or its diagnostics).
    """
    diagnostics: Sequence[Diagnostic] = (
        job.diagnostics if not isinstance(job, Iterable) else tuple(job)
    )
    return [
        replace(d, severity=Severity.ERROR)
        for d in diagnostics
        if d.code in RUN_BLOCKING and d.severity is Severity.WARNING
    ]


#: Warning codes :func:`run_blockers` turns into errors.
RUN_BLOCKING = frozenset({Code.W0020})
