"""The trust model: what a .flow program may reach, and ``--set`` values that stay values.

A program is run by flowc on Spark, in flowc's process (``flowc run``) or as a generated
PySpark program. In **every mode** an expression may not hold a query (a subquery,
``EXISTS (...)``, ``IN (SELECT ...)``, a table such as ``text.`/path```): it is not a
plan node, so flowc cannot plan it, and Spark would read whatever it names (E0950).

A **trusted** program (the default) may otherwise do what its author could do with
Spark. An **untrusted** one (``TrustPolicy(trusted=False)``, ``flowc ... --untrusted``,
``flowc.compile(..., trusted=False)``) cannot leave its sandbox:

- E0951 ``spark.*`` settings outside :data:`SPARK_SETTINGS` (JVM options, jars, class
  names, paths, Hadoop settings), or an allowed one with a value of the wrong shape;
- E0952 functions that reach the JVM, the file system or the process
  (:data:`DENIED_FUNCTIONS`), the options argument of those whose options name files
  (:data:`FILE_OPTION_ARGUMENTS`), qualified function names, ``TRANSFORM ... USING``;
- E0953 a ``files`` path outside the base directory (absolute, ``..``, through a
  symbolic link, or a glob alternative ``{a,b}``), or a symbolic link under it that
  leads out;
- E0954 a path with a URI scheme (``hdfs:``, ``http:``, ``file:``...): only plain
  relative paths are allowed;
- E0955 connector options handed on as written: ``kafka.*`` outside
  :data:`KAFKA_OPTIONS`, a ``compression`` that is not a codec's short name.

``--set KEY=VALUE`` (:func:`read_overrides`) gives one value to one key: it never becomes
program text. Its diagnostics point at the command line (file :data:`COMMAND_LINE`,
line N for the N-th override, shown as ``--set KEY=VALUE``) and their messages start with
``--set KEY=VALUE:``. docs/security.md is the user-facing account of all this.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, is_dataclass, replace
from pathlib import PurePath, PurePosixPath
from typing import Any

from sqlglot import exp
from sqlglot.errors import TokenError

from flowc import ast, catalog
from flowc.diagnostics import Reporter
from flowc.flink.keygroups import UPPER_BOUND_MAX_PARALLELISM
from flowc.spans import Span
from flowc.spark_sql import GENERATOR_ERRORS
from flowc.sqltypes import node_span, sub_span

#: The file name of diagnostics about ``--set`` overrides.
COMMAND_LINE = "<command line>"


@dataclass(frozen=True, slots=True)
class TrustPolicy:
    """How far a program is trusted; ``base_dir`` is where an untrusted one's files live.

    ``base_dir`` None means the .flow file's folder (the current folder for text compiled
    without a file name), the folder relative paths start from at run time.
    """

    trusted: bool = True
    base_dir: str | None = None

    def base(self, file: str) -> str:
        """The base directory, absolute, with symbolic links resolved."""
        if self.base_dir is not None:
            folder = self.base_dir
        else:
            folder = str(PurePath(file).parent) if file != "<string>" else "."
        return os.path.realpath(folder)


# ---------------------------------------------------------------- allow-lists


def _whole(low: int, high: int | None = None) -> Callable[[str], bool]:
    def check(text: str) -> bool:
        if re.fullmatch(r"\d{1,18}", text) is None:
            return False
        return low <= int(text) and (high is None or int(text) <= high)

    return check


def _matches(pattern: str) -> Callable[[str], bool]:
    compiled = re.compile(pattern, re.IGNORECASE)
    return lambda text: compiled.fullmatch(text) is not None


_BOOLEAN = ("true or false", _matches(r"true|false"))
_BYTES = ("a size such as 10485760, 64m or 128mb", _matches(r"-1|\d+(b|k|kb|m|mb|g|gb)?"))

#: The ``spark.*`` settings an untrusted program may make: tuning of SQL and streaming
#: that names no class, path, host or JVM option. Each maps to (what it takes, check).
SPARK_SETTINGS: dict[str, tuple[str, Callable[[str], bool]]] = {
    "spark.sql.shuffle.partitions": (
        f"a whole number 1..{UPPER_BOUND_MAX_PARALLELISM}",
        _whole(1, UPPER_BOUND_MAX_PARALLELISM),
    ),
    "spark.default.parallelism": (
        f"a whole number 1..{UPPER_BOUND_MAX_PARALLELISM}",
        _whole(1, UPPER_BOUND_MAX_PARALLELISM),
    ),
    "spark.sql.session.timeZone": (
        "a time-zone id such as UTC, Europe/Paris or +02:00",
        _matches(r"[A-Za-z][A-Za-z0-9_+\-]{0,40}(/[A-Za-z0-9_+\-]{1,40}){0,2}|[+-]\d{2}:\d{2}"),
    ),
    "spark.sql.ansi.enabled": _BOOLEAN,
    "spark.sql.adaptive.enabled": _BOOLEAN,
    "spark.sql.caseSensitive": _BOOLEAN,
    "spark.sql.autoBroadcastJoinThreshold": _BYTES,
    "spark.sql.files.maxPartitionBytes": _BYTES,
    "spark.sql.files.maxRecordsPerFile": ("a whole number", _whole(0)),
    "spark.sql.jsonGenerator.ignoreNullFields": _BOOLEAN,
    "spark.sql.streaming.noDataMicroBatches.enabled": _BOOLEAN,
    "spark.sql.streaming.minBatchesToRetain": ("a whole number >= 1", _whole(1)),
    "spark.sql.streaming.multipleWatermarkPolicy": ("min or max", _matches(r"min|max")),
    "spark.sql.legacy.timeParserPolicy": (
        "EXCEPTION, CORRECTED or LEGACY",
        _matches(r"exception|corrected|legacy"),
    ),
    "spark.sql.mapKeyDedupPolicy": ("EXCEPTION or LAST_WIN", _matches(r"exception|last_win")),
    "spark.sql.timestampType": (
        "TIMESTAMP_LTZ or TIMESTAMP_NTZ",
        _matches(r"timestamp_ltz|timestamp_ntz"),
    ),
}

_JVM = "it calls any static Java method by name, so it reaches all the JVM can"
_AVRO = "its options can load an Avro schema from a file or URL (avroSchemaUrl)"
_PROTOBUF = "it reads the Protobuf descriptor file its argument names"
_USER = "it tells which account the Spark process runs as"

#: Spark functions an untrusted program may not call (lower case), and why.
DENIED_FUNCTIONS: dict[str, str] = {
    "reflect": _JVM,
    "java_method": _JVM,
    "try_reflect": _JVM,
    "from_protobuf": _PROTOBUF,
    "to_protobuf": _PROTOBUF,
    "from_avro": _AVRO,
    "schema_of_avro": _AVRO,
    "current_user": _USER,
    "user": _USER,
    "session_user": _USER,
    "python_worker_logs": "it reads the logs of Spark's Python worker processes",
    "identifier": "it makes a name from a string at run time, past flowc's checks",
}

#: Functions whose options argument (at this index, from 0) can name a file or URL.
FILE_OPTION_ARGUMENTS: dict[str, int] = {"from_xml": 2, "schema_of_xml": 1}

#: ``kafka.*`` options (handed to the Kafka client as written) an untrusted program may
#: give: none names a class, a file or credentials.
KAFKA_OPTIONS = frozenset(
    {
        "kafka.client.id",
        "kafka.request.timeout.ms",
        "kafka.session.timeout.ms",
        "kafka.max.poll.records",
        "kafka.fetch.max.bytes",
        "kafka.max.partition.fetch.bytes",
        "kafka.linger.ms",
        "kafka.batch.size",
        "kafka.acks",
        "kafka.compression.type",
    }
)
_KAFKA_VALUE = re.compile(r"[A-Za-z0-9_.\-]{1,100}")

#: File compression codecs by short name (Spark and Hadoop also take a codec's class name).
COMPRESSION_CODECS = frozenset(
    {"none", "uncompressed", "bzip2", "deflate", "gzip", "lz4", "lz4_raw", "lzo", "snappy",
     "zstd", "brotli", "zlib"}
)  # fmt: skip

#: URI schemes a file path may have in untrusted mode: none, only plain relative paths.
URI_SCHEMES: frozenset[str] = frozenset()

#: Entries of a source's or sink's folder looked at for symbolic links leading out.
SYMLINK_SCAN_LIMIT = 10_000

# ---------------------------------------------------------------- --set overrides


@dataclass(frozen=True, slots=True)
class Override:
    """One ``--set KEY=VALUE``: its value as if written in the program, on the command line."""

    key: str
    value: ast.Value
    key_span: Span
    span: Span

    @property
    def is_setting(self) -> bool:
        return is_setting(self.key)

    def option(self, key: str | None = None) -> ast.Option:
        """The override as a ``key = value`` option (``key`` without the ``name.`` prefix)."""
        return ast.Option(
            key=key or self.key, key_span=self.key_span, value=self.value, span=self.span
        )


def is_setting(key: str) -> bool:
    """Whether ``--set KEY=...`` sets a setting (else an option ``source_or_sink.option``)."""
    return key in catalog.SETTINGS or key.startswith(catalog.SETTING_PREFIXES) or "." not in key


def _shown(text: str) -> str:
    """Text as one printable line: other characters as escapes."""
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text)


def command_line_lines(overrides: Mapping[str, str]) -> list[str]:
    """``--set KEY=VALUE``, one line per override: the "source" of :data:`COMMAND_LINE`."""
    return [f"--set {_shown(key)}={_shown(value)}" for key, value in overrides.items()]


def command_line_text(overrides: Mapping[str, str]) -> str:
    """What diagnostics on :data:`COMMAND_LINE` quote (give it to ``render_text``)."""
    return "\n".join(command_line_lines(overrides))


_NUMBER = re.compile(r"[+-]?\d+(\.\d+)?")
_QUOTED = re.compile(r"'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.|\"\")*\"", re.DOTALL)


def _value(text: str, span: Span) -> ast.Value | str:
    """``--set`` text as a value: a number, true/false, one quoted string, or else the
    text itself as a string. A problem is returned as its description."""
    if any(not c.isprintable() for c in text):
        return "a value cannot hold line breaks or other control characters"
    if _NUMBER.fullmatch(text):
        return ast.Value(kind="number", text=text, span=span)
    if text.lower() in ("true", "false"):
        return ast.Value(kind="word", text=text, span=span)
    if text[:1] in ("'", '"'):
        if not _QUOTED.fullmatch(text):
            return (
                "a value that starts with a quote must be one quoted string, with nothing after it"
            )
        return ast.Value(kind="string", text=text, span=span)
    quoted = "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"
    return ast.Value(kind="string", text=quoted, span=span)


def read_overrides(overrides: Mapping[str, str], reporter: Reporter) -> list[Override]:
    """Each ``--set KEY=VALUE`` as an :class:`Override`; a malformed value is E0302 (a
    setting) or E0405 (an option) and left out."""
    out: list[Override] = []
    lines = command_line_lines(overrides)
    for number, ((key, text), line) in enumerate(zip(overrides.items(), lines, strict=True), 1):
        key_end = len("--set ") + len(_shown(key)) + 1
        key_span = Span(COMMAND_LINE, number, len("--set ") + 1, number, key_end)
        value_span = Span(COMMAND_LINE, number, key_end + 1, number, len(line) + 1)
        value = _value(text, value_span)
        if isinstance(value, str):
            what = "setting" if is_setting(key) else "option"
            reporter.error(
                "E0302" if is_setting(key) else "E0405",
                f"invalid value for {what} '{key}': {value}",
                value_span,
                help="--set takes one value for one key: a number, true or false, a word, "
                "or one 'quoted string'",
            )
            continue
        whole = Span(COMMAND_LINE, number, 1, number, len(line) + 1)
        out.append(Override(key=key, value=value, key_span=key_span, span=whole))
    return out


def label_command_line(reporter: Reporter, start: int, overrides: Mapping[str, str]) -> None:
    """Begin the messages of diagnostics on the command line (from index ``start`` on) with
    the ``--set KEY=VALUE`` they are about."""
    lines = command_line_lines(overrides)
    for index in range(start, len(reporter.diagnostics)):
        diagnostic = reporter.diagnostics[index]
        line = diagnostic.span.line
        if diagnostic.span.file != COMMAND_LINE or not 1 <= line <= len(lines):
            continue
        if not diagnostic.message.startswith(lines[line - 1]):
            message = f"{lines[line - 1]}: {diagnostic.message}"
            reporter.diagnostics[index] = replace(diagnostic, message=message)


# ---------------------------------------------------------------- the check


def check_program(
    tree: ast.Program, overrides: Sequence[Override], policy: TrustPolicy, reporter: Reporter
) -> bool:
    """Check a parsed program (and its ``--set`` overrides) against ``policy``.

    Returns False when an expression holds a query (E0950): semantic analysis would only
    add follow-on errors about the query's columns, so it does not run (as after a syntax
    error). Untrusted-mode problems are reported and analysis goes on.
    """
    parts = _sql_parts(tree.statements)
    clean = True
    for part in parts:
        if isinstance(part, ast.SqlExpr) and not _no_queries(part, reporter):
            clean = False
    if policy.trusted:
        return clean
    _check_settings(tree, overrides, reporter)
    for part in parts:
        _check_functions(part, reporter)
    _check_connectors(tree, overrides, policy.base(tree.file), reporter)
    return clean


# -- queries inside expressions (every mode)

#: sqlglot's nodes for a query or a table: none belongs in an expression.
_QUERY_NODES: tuple[type[exp.Expr], ...] = (exp.Query, exp.Values, exp.Table, exp.From)
_QUERY_STARTS = frozenset({"SELECT", "VALUES", "WITH", "FROM", "TABLE"})


#: Words one of which a query in an expression must spell (checked on ASCII text only):
#: an expression without any needs no look at its tree.
_QUERY_WORDS = re.compile(
    r"select|values|from|table|with|join|lateral|unnest|pivot|exists", re.IGNORECASE
)


def _no_queries(expr: ast.SqlExpr, reporter: Reporter) -> bool:
    if expr.text.isascii() and _QUERY_WORDS.search(expr.text) is None:
        return True
    nodes = [n for n in expr.tree.walk() if isinstance(n, _QUERY_NODES)]
    if not nodes:
        return True
    spans = _query_spans(expr) or [node_span(expr, nodes[0])]
    for span in spans:
        reporter.error(
            "E0950",
            "a query inside an expression (a subquery, EXISTS, IN (SELECT ...)) cannot be planned",
            span,
            help="declare what it reads with CREATE SOURCE and JOIN it, or compute the value "
            "in an earlier step",
        )
    return False


def _query_spans(expr: ast.SqlExpr) -> list[Span]:
    """Where each outermost ``(SELECT ...)`` / ``EXISTS (...)`` of the text stands."""
    tokens = _tokens(expr.text)
    spans: list[tuple[int, int]] = []
    for index, token in enumerate(tokens[:-1]):
        if token.token_type.name != "L_PAREN":
            continue
        if tokens[index + 1].token_type.name not in _QUERY_STARTS:
            continue
        if spans and token.start < spans[-1][1]:
            continue  # inside the previous query
        end = _closing(tokens, index)
        start = token.start
        if index > 0 and tokens[index - 1].token_type.name == "EXISTS":
            start = tokens[index - 1].start
        spans.append((start, end))
    return [sub_span(expr, start, end) for start, end in spans]


def _closing(tokens: list[Any], index: int) -> int:
    """The end offset of the bracket closing the one at ``tokens[index]``."""
    depth = 0
    for token in tokens[index:]:
        name = token.token_type.name
        depth += (name == "L_PAREN") - (name == "R_PAREN")
        if depth == 0:
            return int(token.end) + 1
    return int(tokens[-1].end) + 1


def _tokens(text: str) -> list[Any]:
    from sqlglot.dialects.dialect import Dialect

    try:
        return list(Dialect.get_or_raise("spark").tokenize(text))
    except TokenError:  # only to locate; the expression itself parsed already
        return []


# -- settings


def _check_settings(tree: ast.Program, overrides: Sequence[Override], reporter: Reporter) -> None:
    options = [s.option for s in tree.statements if isinstance(s, ast.SetStmt)]
    options += [o.option() for o in overrides if o.is_setting]
    for option in options:
        if not option.key.startswith(catalog.SETTING_PREFIXES):
            continue
        allowed = SPARK_SETTINGS.get(option.key)
        if allowed is None:
            reporter.error(
                "E0951",
                f"setting '{option.key}' is not allowed in an untrusted program",
                option.key_span,
                help="an untrusted program may set only these spark.* keys: "
                + ", ".join(sorted(SPARK_SETTINGS)),
            )
            continue
        description, check = allowed
        if not check(str(option.value.python)):
            reporter.error(
                "E0951",
                f"value {option.value.text} is not allowed for '{option.key}' in an "
                "untrusted program",
                option.value.span,
                help=f"'{option.key}' takes {description}",
            )


# -- functions


def _check_functions(part: ast.SqlExpr | ast.SqlQuery, reporter: Reporter) -> None:
    expr = (
        part
        if isinstance(part, ast.SqlExpr)
        else ast.SqlExpr(text=part.text, tree=part.tree, span=part.span)
    )
    calls: dict[str, int] = {}  # name -> calls met so far, to place each at its own call
    for node in expr.tree.walk():
        if isinstance(node, exp.QueryTransform):
            reporter.error(
                "E0952",
                "TRANSFORM ... USING runs a command: not allowed in an untrusted program",
                node_span(expr, node),
                help="compute the value with Spark SQL functions",
            )
        elif isinstance(node, exp.Dot) and isinstance(node.expression, exp.Func):
            name = _function_name(node.expression)
            if name not in DENIED_FUNCTIONS:  # else reported as denied, just below
                reporter.error(
                    "E0952",
                    f"qualified function name '{_shown(node.sql('spark'))[:60]}' is not "
                    "allowed in an untrusted program",
                    _name_span(expr, name, calls.get(name, 0)),
                    help="call Spark's built-in functions by their plain name",
                )
        elif isinstance(node, exp.Func):
            name = _function_name(node)
            why = DENIED_FUNCTIONS.get(name)
            file_options = FILE_OPTION_ARGUMENTS.get(name)
            if why is not None:
                reporter.error(
                    "E0952",
                    f"function '{name}' is not allowed in an untrusted program: {why}",
                    _name_span(expr, name, calls.get(name, 0)),
                    help="untrusted programs cannot call " + ", ".join(sorted(DENIED_FUNCTIONS)),
                )
            elif file_options is not None and len(_arguments(node)) > file_options:
                reporter.error(
                    "E0952",
                    f"the options of '{name}' are not allowed in an untrusted program: they "
                    "can load a schema from a file or URL (rowValidationXSDPath)",
                    _name_span(expr, name, calls.get(name, 0)),
                    help=f"leave out the options argument of {name}",
                )
            calls[name] = calls.get(name, 0) + 1


def _function_name(node: exp.Expr) -> str:
    """The name Spark will see for a function call, lower case."""
    if isinstance(node, exp.Anonymous):
        return node.name.lower()
    try:
        text = node.sql("spark")
    except GENERATOR_ERRORS:  # a malformed call sqlglot cannot write; analysis reports it
        text = node.key
    match = re.match(r"\s*`?([A-Za-z_][A-Za-z0-9_]*)", text)
    return match.group(1).lower() if match else node.key


def _arguments(node: exp.Func) -> list[exp.Expr]:
    if isinstance(node, exp.Anonymous):
        return list(node.expressions)
    return [a for a in node.iter_expressions()]


def _name_span(expr: ast.SqlExpr, name: str, skip: int = 0) -> Span:
    """Where ``name`` is called in the text, after ``skip`` earlier calls (the whole
    expression if not found): a name before ``(``, or a keyword that is a call by itself
    (``current_user``)."""
    tokens = _tokens(expr.text)
    for index, token in enumerate(tokens):
        if token.text.lower() != name:
            continue
        following = tokens[index + 1].token_type.name if index + 1 < len(tokens) else None
        if following == "L_PAREN" or token.token_type.name not in ("VAR", "IDENTIFIER"):
            if skip == 0:
                return sub_span(expr, token.start, token.end + 1)
            skip -= 1
    return expr.span


# -- connectors: paths, schemes, options handed on as written


def _check_connectors(
    tree: ast.Program, overrides: Sequence[Override], base: str, reporter: Reporter
) -> None:
    for statement in tree.statements:
        if not isinstance(statement, ast.CreateSource | ast.CreateSink):
            continue
        name = statement.name.value
        options = {o.key: o for o in statement.options}
        for override in overrides:
            if not override.is_setting and override.key.startswith(name + "."):
                key = override.key[len(name) + 1 :]
                options[key] = override.option(key)
        role = "source" if isinstance(statement, ast.CreateSource) else "sink"
        connector = options.get("connector")
        if connector is None:
            continue
        if connector.value.python == "files" and "path" in options:
            _check_path(options["path"], role, name, base, reporter)
        for key, option in options.items():
            if key.startswith("kafka.") and connector.value.python == "kafka":
                value = str(option.value.python)
                if key not in KAFKA_OPTIONS:
                    reporter.error(
                        "E0955",
                        f"option '{key}' goes to the Kafka client as written: not allowed in "
                        "an untrusted program",
                        option.key_span,
                        help="untrusted programs may give " + ", ".join(sorted(KAFKA_OPTIONS)),
                    )
                elif not _KAFKA_VALUE.fullmatch(value):
                    reporter.error(
                        "E0955",
                        f"value {_shown(option.value.text)} of option '{key}' is not allowed in "
                        "an untrusted program",
                        option.value.span,
                        help="give a plain value: letters, digits, '.', '_' and '-'",
                    )
            elif key == "compression" and connector.value.python == "files":
                codec = str(option.value.python).lower()
                if codec not in COMPRESSION_CODECS:
                    reporter.error(
                        "E0955",
                        f"compression '{option.value.python}' is not a codec's name (a class "
                        "name is not allowed in an untrusted program)",
                        option.value.span,
                        help="codecs: " + ", ".join(sorted(COMPRESSION_CODECS)),
                    )


_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")
_GLOB_ESCAPES = ("{", "}", "\\")


def _check_path(option: ast.Option, role: str, name: str, base: str, reporter: Reporter) -> None:
    path = str(option.value.python)
    found = path_problem(path, base)
    if found is None:
        return
    code, problem = found
    reporter.error(
        code,
        f"the path '{_shown(path)}' of {role} '{name}' {problem}",
        option.value.span,
        help="write a path relative to the base directory (the .flow file's folder, or "
        "--base-dir), that stays inside it",
    )


def path_problem(path: str, base: str) -> tuple[str, str] | None:
    """Why an untrusted program may not use ``path`` under ``base`` (resolved): the code
    (E0953 or E0954) and the reason, or None when it may."""
    scheme = _SCHEME.match(path)
    if scheme and scheme.group(1).lower() not in URI_SCHEMES:
        return "E0954", f"has the URI scheme '{scheme.group(1)}:' (only plain relative paths)"
    if os.path.isabs(path) or path.startswith("\\"):
        return "E0953", "is absolute"
    if any(c in path for c in _GLOB_ESCAPES):
        return (
            "E0953",
            "uses '{', '}' or '\\' (glob alternatives and escapes can name other folders)",
        )
    if any(not c.isprintable() for c in path):
        return "E0953", "holds control characters"
    target = os.path.realpath(os.path.join(base, path))
    if not _inside(target, base):
        if ".." in PurePosixPath(path).parts:
            return "E0953", "climbs out of the base directory"
        return "E0953", "leads out of the base directory through a symbolic link"
    link = _link_out(_static_prefix(target, base), base)
    if link is not None:
        return "E0953", f"holds a symbolic link that leads out of the base directory ({link})"
    return None


def path_allowed(policy: TrustPolicy, file: str, path: str) -> bool:
    """Whether the program in ``file`` may use the files path ``path`` (always, trusted).

    Whatever looks at the file system for a path (does it exist?) asks this first, so an
    untrusted program cannot learn about files outside its base directory.
    """
    return policy.trusted or path_problem(path, policy.base(file)) is None


def _inside(path: str, base: str) -> bool:
    return path == base or path.startswith(base.rstrip(os.sep) + os.sep)


def _static_prefix(target: str, base: str) -> str:
    """The folder part of ``target`` before any glob wildcard (``*``, ``?``, ``[``)."""
    parts = PurePath(target).parts
    kept: list[str] = []
    for part in parts:
        if any(c in part for c in "*?["):
            break
        kept.append(part)
    return str(PurePath(*kept)) if kept else base


def _link_out(folder: str, base: str) -> str | None:
    """The first symbolic link under ``folder`` (or ``folder`` itself) leading out of
    ``base``, relative to ``base``; looks at :data:`SYMLINK_SCAN_LIMIT` entries at most."""
    if not os.path.isdir(folder):
        return None
    seen = 0
    for root, dirs, files in os.walk(folder, followlinks=False):
        for entry in (*dirs, *files):
            seen += 1
            if seen > SYMLINK_SCAN_LIMIT:
                return None
            full = os.path.join(root, entry)
            if os.path.islink(full) and not _inside(os.path.realpath(full), base):
                return os.path.relpath(full, base)
    return None


# -- walking the syntax tree


def _sql_parts(root: object) -> list[ast.SqlExpr | ast.SqlQuery]:
    """Every SQL expression and query in a piece of the syntax tree, in order."""
    found: list[ast.SqlExpr | ast.SqlQuery] = []
    stack: list[Any] = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.SqlExpr | ast.SqlQuery):
            found.append(node)
        elif isinstance(node, tuple):
            stack.extend(reversed(node))
        else:
            stack.extend(getattr(node, name) for name in reversed(_child_fields(type(node))))
    return found


#: Nodes that hold no SQL: their fields are not looked at.
_LEAVES = (Span, ast.Name, ast.Value, ast.Option, ast.TypeRef, ast.Relation, ast.ColumnDef)
#: Field types (as annotated in flowc.ast) that hold no SQL. A field of any other type is
#: looked into, so SQL in a new kind of node is never missed, only looked for.
_SQL_FREE = frozenset(
    {
        "str",
        "bool",
        "Span",
        "Span | None",
        "Name",
        "Name | None",
        "tuple[Name, ...]",
        "Relation",
        "tuple[Relation, ...]",
        "tuple[Option, ...]",
        "tuple[ColumnDef, ...]",
        "tuple[ColumnDef, ...] | None",
    }
)


_FIELDS: dict[type, tuple[str, ...]] = {}


def _child_fields(cls: type) -> tuple[str, ...]:
    """The fields of a syntax-tree class that may hold SQL (none for other classes)."""
    known = _FIELDS.get(cls)
    if known is None:
        if not is_dataclass(cls) or issubclass(cls, _LEAVES):
            known = ()
        else:
            known = tuple(f.name for f in fields(cls) if str(f.type) not in _SQL_FREE)
        _FIELDS[cls] = known
    return known
