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
  :data:`KAFKA_OPTIONS`, a ``compression`` that is not a codec's short name;
- E0958 ``${`` in text handed to Spark (:mod:`flowc.trust.text`): Spark's variable
  substitution would read it (flowc turns it off; turning it on is E0958 trusted too);
- E0959 a look for symbolic links that could not finish: refused, never allowed;
- E0960 (in :mod:`flowc.analyze.udfs`) a Python module file linked out of the base
  directory.

``--set KEY=VALUE`` (:func:`read_overrides`) gives one value to one key: it never becomes
program text. Its diagnostics point at the command line (file :data:`COMMAND_LINE`,
line N for the N-th override, shown as ``--set KEY=VALUE``) and their messages start with
``--set KEY=VALUE:``. docs/security.md is the user-facing account of all this.

The lists are :mod:`flowc.trust.lists`'s, the path checks :mod:`flowc.trust.paths`'s and
the reading of ``--set`` :mod:`flowc.syntax.overrides`'s; this module holds the policy and the
checks of a parsed program against it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import PurePath
from typing import Any

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import TokenError

from flowc import ast, catalog
from flowc.diagnostics import Reporter
from flowc.errorcodes import Code
from flowc.fast_dataclass import dataclass
from flowc.spans import Span
from flowc.sql.spark_sql import GENERATOR_ERRORS
from flowc.sql.sqltypes import node_span, sub_span
from flowc.syntax.overrides import (
    COMMAND_LINE,
    Override,
    command_line_text,
    label_command_line,
    read_overrides,
    shown,
)
from flowc.trust.lists import (
    COMPRESSION_CODECS,
    DENIED_FUNCTIONS,
    FILE_OPTION_ARGUMENTS,
    KAFKA_OPTIONS,
    KAFKA_VALUE,
    REGEX_ARGUMENTS,
    SPARK_SETTINGS,
    SUBSTITUTION_KEY,
    SYMLINK_SCAN_LIMIT,
)
from flowc.trust.paths import path_problem
from flowc.trust.text import check_text

__all__ = [
    "COMMAND_LINE",
    "DENIED_FUNCTIONS",
    "SPARK_SETTINGS",
    "Override",
    "TrustPolicy",
    "check_program",
    "command_line_text",
    "label_command_line",
    "path_allowed",
    "path_problem",
    "read_overrides",
]


@dataclass(frozen=True, slots=True)
class TrustPolicy:
    """How far a program is trusted; ``base_dir`` is where an untrusted one's files live.

    ``base_dir`` None means the .flow file's folder (the current folder for text compiled
    without a file name), the folder relative paths start from at run time.
    """

    trusted: bool = True
    base_dir: str | None = None
    #: The ``module:function`` targets an untrusted program may declare (E0956).
    functions: frozenset[str] = frozenset()

    def base(self, file: str) -> str:
        """The base directory, absolute, with symbolic links resolved."""
        if self.base_dir is not None:
            folder = self.base_dir
        else:
            folder = str(PurePath(file).parent) if file != "<string>" else "."
        return os.path.realpath(folder)


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
    _check_substitution_setting(tree, overrides, policy, reporter)
    if policy.trusted:
        return clean
    check_text(tree, overrides, reporter)
    _check_settings(tree, overrides, reporter)
    for part in parts:
        _check_functions(part, reporter)
    _check_connectors(tree, overrides, policy.base(tree.file), reporter)
    _check_checkpoint_dir(tree, overrides, policy.base(tree.file), reporter)
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
            Code.E0950,
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
                Code.E0951,
                f"setting '{option.key}' is not allowed in an untrusted program",
                option.key_span,
                help="an untrusted program may set only these spark.* keys: "
                + ", ".join(sorted(SPARK_SETTINGS)),
            )
            continue
        description, check = allowed
        if not check(str(option.value.python)):
            reporter.error(
                Code.E0951,
                f"value {option.value.text} is not allowed for '{option.key}' in an "
                "untrusted program",
                option.value.span,
                help=f"'{option.key}' takes {description}",
            )


def _check_substitution_setting(
    tree: ast.Program, overrides: Sequence[Override], policy: TrustPolicy, reporter: Reporter
) -> None:
    """E0958 for turning Spark's variable substitution on, trusted too: flowc turns it off
    on every session (a string literal is the string written, as in Flink). Untrusted, the
    key is outside the allow-list anyway (E0951)."""
    if not policy.trusted:
        return
    options = [s.option for s in tree.statements if isinstance(s, ast.SetStmt)]
    options += [o.option() for o in overrides if o.is_setting]
    for option in options:
        if option.key == SUBSTITUTION_KEY and str(option.value.python).lower() != "false":
            reporter.error(
                Code.E0958,
                f"'{SUBSTITUTION_KEY}' cannot be turned on: flowc keeps Spark's variable "
                "substitution off, so that no '${...}' in a job's text is replaced",
                option.value.span,
                help="leave the setting out; compute values with Spark SQL functions",
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
                Code.E0952,
                "TRANSFORM ... USING runs a command: not allowed in an untrusted program",
                node_span(expr, node),
                help="compute the value with Spark SQL functions",
            )
        elif isinstance(node, exp.Dot) and isinstance(node.expression, exp.Func):
            name = _function_name(node.expression)
            if name not in DENIED_FUNCTIONS:  # else reported as denied, just below
                reporter.error(
                    Code.E0952,
                    f"qualified function name '{shown(node.sql('spark'))[:60]}' is not "
                    "allowed in an untrusted program",
                    _name_span(expr, name, calls.get(name, 0)),
                    help="call Spark's built-in functions by their plain name",
                )
        elif isinstance(node, exp.Func):
            name = _function_name(node)
            why = None if _time_zone_lookup(node) else DENIED_FUNCTIONS.get(name)
            file_options = FILE_OPTION_ARGUMENTS.get(name)
            if why is not None:
                reporter.error(
                    Code.E0952,
                    f"function '{name}' is not allowed in an untrusted program: {why}",
                    _name_span(expr, name, calls.get(name, 0)),
                    help="untrusted programs cannot call " + ", ".join(sorted(DENIED_FUNCTIONS)),
                )
            elif file_options is not None and len(_arguments(node)) > file_options:
                reporter.error(
                    Code.E0952,
                    f"the options of '{name}' are not allowed in an untrusted program: they "
                    "can load a schema from a file or URL (rowValidationXSDPath)",
                    _name_span(expr, name, calls.get(name, 0)),
                    help=f"leave out the options argument of {name}",
                )
            calls[name] = calls.get(name, 0) + 1
        if isinstance(node, exp.Func):
            _check_regexes(expr, node, reporter)


#: A group closed and then repeated, or a back reference: Java's regex engine recurses
#: once per repetition of a group, so a long input overflows the stack, and a
#: StackOverflowError in a Spark task ends the whole JVM (SparkUncaughtExceptionHandler).
_RISKY_REGEX = re.compile(r"\\(?:[1-9]|k<)|\)\s*[*+?{]|\(\?[a-zA-Z-]*x")


def _check_regexes(expr: ast.SqlExpr, node: exp.Func, reporter: Reporter) -> None:
    """E0961: each regular expression a function hands Java's regex engine must be a string
    literal that repeats no group and refers back to none."""
    if isinstance(node, exp.RegexpLike):
        name, arguments = "rlike", [node.this, node.expression]
    elif isinstance(node, exp.Anonymous):
        name, arguments = node.name.lower(), list(node.expressions)
    else:
        name = _function_name(node)
        arguments = [node.args.get(key) for key in node.arg_types]
    for index in REGEX_ARGUMENTS.get(name, ()):
        pattern = arguments[index] if index < len(arguments) else None
        if not isinstance(pattern, exp.Expr):
            continue
        if not (isinstance(pattern, exp.Literal) and pattern.is_string):
            problem = "is not a string literal, so flowc cannot check it"
        elif _risky_regex(pattern.this):
            problem = "repeats a group or refers back to one"
        else:
            continue
        reporter.error(
            Code.E0961,
            f"the regular expression of '{name}' {problem}: Java's regex engine recurses once "
            "per repetition of a group, and on a long input the stack overflow ends Spark's "
            "JVM",
            node_span(expr, pattern),
            help="write the pattern as a literal without a repeated group or back reference: "
            "'[ab]*' instead of '(a|b)*'",
        )


def _risky_regex(pattern: str) -> bool:
    """Whether ``pattern`` (Java regex syntax) repeats a group or refers back to one.

    Quoted text (``\\Q...\\E``) and escaped characters are skipped; a ``)`` inside a
    character class is taken as closing a group, which only refuses more."""
    text = re.sub(r"\\Q.*?(\\E|$)", "", pattern, flags=re.DOTALL)
    text = re.sub(r"\\[^1-9k]", "", text)
    return _RISKY_REGEX.search(text) is not None


def _time_zone_lookup(node: exp.Func) -> bool:
    """``reflect('java.util.TimeZone', 'getTimeZone', zone)``, which only reads a zone's
    rules: the Flink dialect's CONVERT_TZ reads zones as Flink does with it."""
    args = node.expressions if isinstance(node, exp.Anonymous) else []
    return (
        _function_name(node) == "reflect"
        and len(args) == 3
        and [a.this if isinstance(a, exp.Literal) and a.is_string else None for a in args[:2]]
        == ["java.util.TimeZone", "getTimeZone"]
    )


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
                        Code.E0955,
                        f"option '{key}' goes to the Kafka client as written: not allowed in "
                        "an untrusted program",
                        option.key_span,
                        help="untrusted programs may give " + ", ".join(sorted(KAFKA_OPTIONS)),
                    )
                elif not KAFKA_VALUE.fullmatch(value):
                    reporter.error(
                        Code.E0955,
                        f"value {shown(option.value.text)} of option '{key}' is not allowed in "
                        "an untrusted program",
                        option.value.span,
                        help="give a plain value: letters, digits, '.', '_' and '-'",
                    )
            elif key == "compression" and connector.value.python == "files":
                codec = str(option.value.python).lower()
                if codec not in COMPRESSION_CODECS:
                    reporter.error(
                        Code.E0955,
                        f"compression '{option.value.python}' is not a codec's name (a class "
                        "name is not allowed in an untrusted program)",
                        option.value.span,
                        help="codecs: " + ", ".join(sorted(COMPRESSION_CODECS)),
                    )


def _check_path(option: ast.Option, role: str, name: str, base: str, reporter: Reporter) -> None:
    path = str(option.value.python)
    found = path_problem(path, base)
    if found is None:
        return
    code, problem = found
    reporter.error(
        code,
        f"the path '{shown(path)}' of {role} '{name}' {problem}",
        option.value.span,
        help=(
            f"use a folder with at most {SYMLINK_SCAN_LIMIT:,} entries below it, all of "
            "which flowc can list: what flowc could not check is refused"
            if code is Code.E0959
            else "write a path relative to the base directory (the .flow file's folder, or "
            "--base-dir), that stays inside it"
        ),
    )


def _check_checkpoint_dir(
    tree: ast.Program, overrides: Sequence[Override], base: str, reporter: Reporter
) -> None:
    """``checkpoint.dir`` is where ``flowc run`` writes: inside the base directory, as a
    files path must be (E0953, E0954)."""
    options = [s.option for s in tree.statements if isinstance(s, ast.SetStmt)]
    options += [o.option() for o in overrides if o.is_setting]
    for option in options:
        if option.key != "checkpoint.dir":
            continue
        path = str(option.value.python)
        found = path_problem(path, base)
        if found is not None:
            code, problem = found
            reporter.error(
                code,
                f"checkpoint.dir '{shown(path)}' {problem}",
                option.value.span,
                help="write a folder relative to the base directory (the .flow file's folder, "
                "or --base-dir), that stays inside it",
            )


def path_allowed(policy: TrustPolicy, file: str, path: str) -> bool:
    """Whether the program in ``file`` may use the files path ``path`` (always, trusted).

    Whatever looks at the file system for a path (does it exist?) asks this first, so an
    untrusted program cannot learn about files outside its base directory.
    """
    return policy.trusted or path_problem(path, policy.base(file)) is None


# -- walking the syntax tree


#: A tuple made once: ``ast.SqlExpr | ast.SqlQuery`` written in the loop would make a new
#: union for every node of the syntax tree.
_SQL_PARTS = (ast.SqlExpr, ast.SqlQuery)


def _sql_parts(root: object) -> list[ast.SqlExpr | ast.SqlQuery]:
    """Every SQL expression and query in a piece of the syntax tree, in order."""
    found: list[ast.SqlExpr | ast.SqlQuery] = []
    stack: list[Any] = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, _SQL_PARTS):
            found.append(node)
        elif isinstance(node, tuple):
            stack.extend(reversed(node))
        else:
            for name in reversed(ast.sql_fields(type(node))):  # no generator per node
                stack.append(getattr(node, name))
    return found
