"""Resolve and type SQL expressions against a step's input schema, with sqlglot.

sqlglot parses and types; flowc resolves column names itself (so an unknown column is
reported at its own position, with a "did you mean") and adds rules for what sqlglot
leaves UNKNOWN: window structs, date_trunc, split, sums and arithmetic.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from typing import Any

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.annotate_types import TypeAnnotator
from sqlglot.schema import Schema as SqlglotSchema
from sqlglot.schema import ensure_schema

from flowc.ast import SqlExpr
from flowc.diagnostics import Reporter, did_you_mean
from flowc.errorcodes import Code
from flowc.limits import BoundedCache
from flowc.program import Column, Schema
from flowc.spans import Span, text_span
from flowc.sql import spark_typing
from flowc.sql.spark_patterns import is_flink_aggregate
from flowc.sql.sql_parsing import NODE_BYTES, deep_recursion

UNKNOWN = "UNKNOWN"
BOOLEAN = "BOOLEAN"
TIMESTAMP = "TIMESTAMP"
WINDOW_STRUCT = "STRUCT<start: TIMESTAMP, end: TIMESTAMP>"

_INTEGERS = ("TINYINT", "SMALLINT", "INT", "BIGINT")
_FLOATS = ("FLOAT", "DOUBLE")


class TypeSyntaxError(Exception):
    """A column type that is not a Spark SQL type."""


#: Built types by their text. Shared by every tree that gets the type (never mutated).
_data_types: BoundedCache[str, exp.DataType] = BoundedCache(
    "data types", max_bytes=4 << 20, max_entry_bytes=256 << 10
)
#: Spark's spelling of a type, by the type's text.
_normalized: BoundedCache[str, str] = BoundedCache(
    "normalized types", max_bytes=1 << 20, max_entry_bytes=64 << 10
)
_ARITY = {exp.DataType.Type.ARRAY: 1, exp.DataType.Type.MAP: 2}


def data_type(text: str) -> exp.DataType:
    """The sqlglot type of a Spark type's text (memoized); TypeSyntaxError if it is none."""
    entry = _data_types.get(text)
    if entry is not None:
        return entry[0]
    try:
        dtype = exp.DataType.build(text, dialect="spark")
    except (SqlglotError, ValueError) as error:
        raise TypeSyntaxError(text) from error
    # sqlglot drops an element type it does not know (ARRAY<FOO> becomes ARRAY): count them.
    nodes = 0
    for part in dtype.walk():
        nodes += 1
        if not isinstance(part, exp.DataType):
            continue
        if part.this in (exp.DataType.Type.USERDEFINED, exp.DataType.Type.UNKNOWN):
            raise TypeSyntaxError(text)
        if part.this in _ARITY and len(part.expressions) != _ARITY[part.this]:
            raise TypeSyntaxError(text)
        if part.this == exp.DataType.Type.STRUCT and not part.expressions:
            raise TypeSyntaxError(text)
    _data_types.put(text, dtype, 2 * len(text) + NODE_BYTES * nodes)
    return dtype


def normalize_type(text: str) -> str:
    """Spark's spelling of a type: ``long`` → ``BIGINT``, ``decimal(12,2)`` → ``DECIMAL(12, 2)``,
    ``TIMESTAMP_LTZ`` (Flink's ``TIMESTAMP_LTZ(3)``) → ``TIMESTAMP``."""
    if text == UNKNOWN:
        return UNKNOWN
    entry = _normalized.get(text)
    if entry is not None:
        return entry[0]
    dtype = data_type(text)
    if any(
        isinstance(part, exp.DataType) and part.this == exp.DataType.Type.TIMESTAMPLTZ
        for part in dtype.walk()
    ):  # Spark's TIMESTAMP_LTZ is its TIMESTAMP (TimestampType): one spelling, one type
        dtype = dtype.transform(
            lambda part: (
                exp.DataType.build("TIMESTAMP")
                if isinstance(part, exp.DataType) and part.this == exp.DataType.Type.TIMESTAMPLTZ
                else part
            )
        )
    normal = str(dtype.sql("spark"))
    _normalized.put(text, normal, len(text) + len(normal) + 100)
    return normal


def types_match(a: str, b: str) -> bool:
    return a == b or UNKNOWN in (a, b)


#: The decimal digits of each integer type as Flink (Calcite) counts them for a common
#: type with a DECIMAL, and as Spark does (Spark gives BIGINT 20, Calcite 19).
_FLINK_DIGITS = {"TINYINT": 3, "SMALLINT": 5, "INT": 10, "BIGINT": 19}
_SPARK_DIGITS = {"TINYINT": 3, "SMALLINT": 5, "INT": 10, "BIGINT": 20}
_DECIMAL = re.compile(r"DECIMAL\((\d+), (\d+)\)")


def union_type(a: str, b: str) -> str | None:
    """The type a UNION ALL of columns typed ``a`` and ``b`` has in Flink (Calcite's
    leastRestrictive), where Spark's union (WidenSetOperationTypes) gives the same type;
    None where the two differ (INT or DOUBLE with FLOAT: FLOAT in Flink, DOUBLE in Spark;
    BIGINT with a DECIMAL; a DECIMAL past 38 digits) or Flink has no common type (INT with
    STRING)."""
    if a == b:
        return a
    ranks = {name: rank for rank, name in enumerate(_INTEGERS)}
    if a in ranks and b in ranks:
        return a if ranks[a] > ranks[b] else b
    other = b if a == "DOUBLE" else a if b == "DOUBLE" else None
    if other is not None and (other in _INTEGERS or _DECIMAL.fullmatch(other)):
        return "DOUBLE"  # FLOAT with DOUBLE is FLOAT in Flink 2.3 (run there), DOUBLE in Spark
    decimals = [(int(m[1]), int(m[2])) for m in map(_DECIMAL.fullmatch, (a, b)) if m]
    if decimals and all(t in ranks or _DECIMAL.fullmatch(t) for t in (a, b)):
        found = set()
        for digits in (_FLINK_DIGITS, _SPARK_DIGITS):
            both = decimals + [(digits[t], 0) for t in (a, b) if t in ranks]
            scale = max(s for _, s in both)
            whole = max(p - s for p, s in both)
            found.add((whole + scale, scale))
        if len(found) != 1:
            return None
        ((precision, scale),) = found
        return f"DECIMAL({precision}, {scale})" if precision <= 38 else None
    return None


def is_numeric(type_text: str) -> bool:
    return type_text in _INTEGERS or type_text in _FLOATS or type_text.startswith("DECIMAL")


# ---------------------------------------------------------------- positions


def sub_span(expr: SqlExpr, start: int, end: int) -> Span:
    """The file span of characters ``[start, end)`` of an expression's text."""
    return text_span(expr.text, expr.span, start, end)


def node_span(expr: SqlExpr, node: exp.Expr) -> Span:
    """Where ``node`` stands in the file, from the positions sqlglot keeps on identifiers."""
    places = identifier_places(node)
    return expr.span if places is None else sub_span(expr, *places)


def identifier_places(node: exp.Expr) -> tuple[int, int] | None:
    """The characters ``[start, end)`` of an expression's text from its first identifier
    to its last (sqlglot keeps positions on identifiers only); None without one."""
    starts: list[int] = []
    ends: list[int] = []
    for part in node.walk():
        meta = part.meta if isinstance(part, exp.Identifier) else None
        if meta and "start" in meta and "end" in meta:
            starts.append(meta["start"])
            ends.append(meta["end"] + 1)
    return (min(starts), max(ends)) if starts else None


# ---------------------------------------------------------------- column resolution


class Scope:
    """The columns an expression may use; qualifiers are the relations a JOIN brought in."""

    def __init__(self, schema: Schema) -> None:
        self.schema = schema
        self.qualifiers = {c.qualifier for c in schema if c.qualifier}
        self._signature: tuple[tuple[str, str], ...] | None = None

    @property
    def signature(self) -> tuple[tuple[str, str], ...]:
        """What typing an expression without qualified columns reads: names and types."""
        if self._signature is None:
            self._signature = tuple((c.name, c.type) for c in self.schema)
        return self._signature

    def lookup(self, name: str, qualifier: str | None) -> list[Column]:
        if qualifier is None:
            return [c for c in self.schema if c.name == name]
        return [c for c in self.schema if c.name == name and c.qualifier == qualifier]


def resolve_and_type(
    expr: SqlExpr, scope: Scope, reporter: Reporter, functions: Mapping[str, str] | None = None
) -> str | None:
    """Check every column of ``expr`` against ``scope``; return its type, None on errors.
    ``functions`` are the program's Python functions: name (lower case) to return type.

    The same text over the same columns types the same way: from its second clean typing
    on, an expression's result is kept (see :class:`_Typing`) and given to the next such
    tree without sqlglot's work. A tree calling a Python function is typed by its
    program's declarations, so it is never kept nor given a kept typing. The commonest
    trees, a bare column and ``column <op> digits``, take shortcuts (:func:`_typed_shortcut`).
    """
    if functions and _calls_any(expr.tree, functions):
        return _resolve_and_type(expr, scope, reporter, functions)
    typed = _typed_shortcut(expr, scope, reporter)
    if typed is not _NOT_TAKEN:
        return typed
    signature = scope.signature
    key = (expr.text, signature)
    entry = _typings.get(key)
    # What the key keeps alive: the text and (perhaps shared with other keys) the signature.
    key_bytes = len(expr.text) + _SIGNATURE_COLUMN_BYTES * len(signature)
    if entry is None:
        _typings.put(key, None, key_bytes)
        return _resolve_and_type(expr, scope, reporter)
    known = entry[0]
    if known is not None and known.apply(expr.tree):
        return known.result
    before = _Snapshot.of(expr.tree)
    result = _resolve_and_type(expr, scope, reporter)
    if result is not None and before is not None:
        after = _Snapshot.of(expr.tree, typed=True)
        if after is not None and after.shape == before.shape:
            typing = _Typing(before, after, result)
            _typings.put(key, typing, key_bytes + typing.bytes())
    return result


#: What :func:`_typed_comparison` returns for a tree it leaves to the long way.
_NOT_TAKEN = "not taken"

#: The comparisons ``column <op> digits`` (a filter's commonest form) typed by
#: :func:`_typed_comparison`, and the column types it takes (a bounded set: one probe each).
_COMPARISON_CLASSES: Mapping[str, type[exp.Expr]] = {
    kind.__name__: kind for kind in (exp.EQ, exp.NEQ, exp.LT, exp.GT, exp.LTE, exp.GTE)
}
_COMPARED_TYPES = frozenset(
    {
        "TINYINT",
        "SMALLINT",
        "INT",
        "BIGINT",
        "FLOAT",
        "DOUBLE",
        "STRING",
        "BOOLEAN",
        "DATE",
        "TIMESTAMP",
        "TIMESTAMP_NTZ",
        "BINARY",
    }
)
#: The largest number literal typed INT (spark_typing.literal_type): its digits' count.
_INT_DIGITS = len(str(2**31 - 1))


def _typed_shortcut(expr: SqlExpr, scope: Scope, reporter: Reporter) -> str | None:
    """A bare column's typing, or a comparison's (:func:`_typed_comparison`), as the long way
    (:func:`_resolve_and_type`) gives it; ``_NOT_TAKEN`` for any other tree.

    A bare column is the tree's only column: the long way resolves it and returns its
    type, and so does this, without looking up and applying a kept typing (which costs
    more than resolving it again).
    """
    tree = expr.tree
    if tree.__class__ is exp.Column:
        if tree.args.keys() == {"this"} and tree.args["this"].__class__ is exp.Identifier:
            return type_text(tree) if _resolve_column(expr, tree, scope, reporter) else None
        return _NOT_TAKEN
    return _typed_comparison(expr, scope, reporter)


def _typed_comparison(expr: SqlExpr, scope: Scope, reporter: Reporter) -> str | None:
    """The typing of ``column <op> digits`` (an unqualified column of a simple type, an
    INT literal), as :func:`_resolve_and_type` types it, without sqlglot's annotator: a
    tenth of the cost; ``_NOT_TAKEN`` for any other tree (then the caller types it).

    The column is resolved as the long way resolves it (same diagnostics). What the rest
    of the long way does to such a tree depends on the comparison's class and the
    column's type only: the literal enters through its type, INT for all digits up to
    2**31 - 1 (flowc's rule for number literals replaces sqlglot's type), and no rule reads
    names or positions. So one probe per class and type, typed the long way
    (:func:`_comparison_probe`), gives the types and the metadata typing adds, set here
    on the tree. tests/test_typing_shortcuts.py compares the two for every class, type
    and many columns and literals.
    """
    tree = expr.tree
    kind = tree.__class__
    if _COMPARISON_CLASSES.get(kind.__name__) is not kind or tree.args.keys() != {
        "this",
        "expression",
    }:
        return _NOT_TAKEN
    column, number = tree.args["this"], tree.args["expression"]
    if column.__class__ is not exp.Column or column.args.keys() != {"this"}:
        return _NOT_TAKEN
    identifier = column.args["this"]
    if (
        identifier.__class__ is not exp.Identifier
        or identifier.args.get("quoted")
        or number.__class__ is not exp.Literal
        or number.args.get("is_string") is not False
    ):
        return _NOT_TAKEN
    digits = number.args.get("this")
    if not (isinstance(digits, str) and digits.isdigit() and digits.isascii()):
        return _NOT_TAKEN
    if len(digits) >= _INT_DIGITS and int(digits) > 2**31 - 1:
        return _NOT_TAKEN
    nodes: tuple[exp.Expr, ...] = (tree, column, identifier, number)
    for node in nodes:
        if node._type is not None or node.comments:
            return _NOT_TAKEN
    matches = scope.lookup(identifier.name, None)
    if len(matches) != 1 or matches[0].type not in _COMPARED_TYPES:
        return _NOT_TAKEN
    probe = _comparison_probe(kind.__name__, matches[0].type)
    if probe is None:
        return _NOT_TAKEN
    if not _resolve_column(expr, column, scope, reporter):
        return None  # pragma: no cover - the column was found above
    changes, result = probe
    for node, (dtype, added, removed) in zip(nodes, changes, strict=True):
        if node is not column:  # the column keeps the type its resolution gave it
            node._type = dtype
        if added or removed:
            meta = dict(node._meta) if node._meta else {}
            meta.update(added)
            for key in removed:
                meta.pop(key, None)
            node._meta = meta
    return result


_MetaChange = tuple[exp.DataType | None, dict[str, Any], tuple[str, ...]]


@cache
def _comparison_probe(kind: str, column_type: str) -> tuple[tuple[_MetaChange, ...], str] | None:
    """``c <op> 1`` of class ``kind`` over a column ``c`` of ``column_type``, typed the long way:
    per node (comparison, column, identifier, literal) its type and the metadata typing
    added and removed, and the result; None if it reported anything. Bounded: one entry
    per comparison class and type of _COMPARED_TYPES."""
    identifier = exp.Identifier(this="c", quoted=False)
    identifier.meta.update({"line": 1, "col": 1, "start": 0, "end": 0})
    number = exp.Literal(this="1", is_string=False)
    tree = _COMPARISON_CLASSES[kind](this=exp.Column(this=identifier), expression=number)
    nodes: tuple[exp.Expr, ...] = (tree, tree.args["this"], identifier, number)
    before = [dict(node._meta) if node._meta else {} for node in nodes]
    reporter = Reporter()
    span = Span("<probe>", 1, 1, 1, 1)
    probe = SqlExpr(text="c ? 1", tree=tree, span=span)
    result = _resolve_and_type(probe, Scope((Column("c", column_type),)), reporter)
    if result is None or reporter.diagnostics:
        return None
    changes: list[_MetaChange] = []
    for node, old in zip(nodes, before, strict=True):
        new = node._meta or {}
        added = {key: value for key, value in new.items() if old.get(key, _ABSENT) != value}
        removed = tuple(key for key in old if key not in new)
        changes.append((node._type, added, removed))
    return tuple(changes), result


_ABSENT = object()


class _Snapshot:
    """A tree's nodes in :func:`_nodes` order: their classes and plain arguments (``shape``),
    metadata and types."""

    __slots__ = ("bytes", "metas", "shape", "types")

    def __init__(self, nodes: list[exp.Expr]) -> None:
        #: About what the snapshot keeps alive: its lists, and each node's plain arguments.
        self.bytes = _SNAPSHOT_NODE_BYTES * len(nodes)
        self.shape = [(node.__class__, _plain_args(node)) for node in nodes]
        for _, plain in self.shape:
            self.bytes += sum(len(value) for _, value in plain if type(value) is str)
        self.metas = [dict(node._meta) if node._meta else None for node in nodes]
        self.types = [node._type for node in nodes]

    @staticmethod
    def of(tree: exp.Expr, typed: bool = False) -> _Snapshot | None:
        """None for a tree that cannot be kept: typed already (unless ``typed``), or with a
        qualified column or a struct field (typing those reads more than names and types)."""
        nodes = _nodes(tree)
        for node in nodes:
            if node._type is not None and not typed:
                return None
            if isinstance(node, exp.Dot):
                return None
            if isinstance(node, exp.Column) and (
                node.args.get("table") or node.args.get("db") or node.args.get("catalog")
            ):
                return None
        return _Snapshot(nodes)


class _Typing:
    """What typing did to one tree: ``before`` and ``after`` snapshots, and the result.

    A tree of the same text and shape (a tree of the same text parsed in another dialect
    may differ) gets the same types and metadata (sqlglot marks some nodes ``nonnull``).
    """

    __slots__ = ("after", "before", "result")

    def __init__(self, before: _Snapshot, after: _Snapshot, result: str) -> None:
        self.before = before
        self.after = after
        self.result = result

    def bytes(self) -> int:
        """About what the typing keeps alive (the types of ``after`` may be shared; they
        are counted as a node each)."""
        return self.before.bytes + self.after.bytes + NODE_BYTES * len(self.after.types)

    def apply(self, tree: exp.Expr) -> bool:
        """Type an untyped tree like the one kept; False (and nothing done) if it differs.
        One walk in :func:`_nodes` order compares each node as it is met (a tree kept
        apart by its first node does not walk on)."""
        before = self.before
        shape, metas = before.shape, before.metas
        count = len(shape)
        nodes: list[exp.Expr] = []
        stack = [tree]
        expr_class = exp.Expr
        while stack:
            node = stack.pop()
            index = len(nodes)
            if index == count:
                return False
            kind, plain = shape[index]
            if node.__class__ is not kind or node._type is not None:
                return False
            if (node._meta or None) != metas[index]:
                return False
            nodes.append(node)
            found: list[tuple[str, Any]] = []  # _plain_args(node), made in the same loop
            for key, value in node.args.items():
                if isinstance(value, expr_class):
                    stack.append(value)
                elif type(value) is list:
                    found.append((key, [v for v in value if not isinstance(v, expr_class)]))
                    stack.extend(v for v in value if isinstance(v, expr_class))
                else:
                    found.append((key, value))
            if found != plain:
                return False
        if len(nodes) != count:
            return False
        for node, dtype, meta in zip(nodes, self.after.types, self.after.metas, strict=True):
            node._type = dtype
            node._meta = dict(meta) if meta is not None else None
        return True


#: By (text, column names and types): None for a key seen once, then its kept typing.
_typings: BoundedCache[tuple[str, tuple[tuple[str, str], ...]], _Typing | None] = BoundedCache(
    "typings", max_bytes=16 << 20, max_entry_bytes=256 << 10
)
#: A column of a signature: its (name, type) tuple and the signature's slot for it.
_SIGNATURE_COLUMN_BYTES = 72
#: A node of a snapshot: its (class, plain arguments) pair and list, and its slots in the
#: lists of metadata and types (a metadata dict counted too).
_SNAPSHOT_NODE_BYTES = 400


def clear_typing_cache() -> None:
    """Forget kept typings (benchmarks measure compiles from cold)."""
    _typings.clear()


def _nodes(tree: exp.Expr) -> list[exp.Expr]:
    """Every node of ``tree``, parents before children (a fixed order for a given tree)."""
    nodes = []
    stack = [tree]
    expr_class = exp.Expr
    while stack:
        node = stack.pop()
        nodes.append(node)
        for value in node.args.values():
            if isinstance(value, expr_class):
                stack.append(value)
            elif type(value) is list:
                stack.extend(v for v in value if isinstance(v, expr_class))
    return nodes


def _plain_args(node: exp.Expr) -> list[tuple[str, Any]]:
    """A node's arguments that are not nodes (names, flags, literal text)."""
    expr_class = exp.Expr
    return [
        (key, [v for v in value if not isinstance(v, expr_class)] if type(value) is list else value)
        for key, value in node.args.items()
        if not isinstance(value, expr_class)
    ]


def _calls_any(tree: exp.Expr, functions: Mapping[str, str]) -> bool:
    return any(node.name.lower() in functions for node in tree.find_all(exp.Anonymous))


def _resolve_and_type(
    expr: SqlExpr, scope: Scope, reporter: Reporter, functions: Mapping[str, str] | None = None
) -> str | None:
    ok = True
    for column in list(expr.tree.find_all(exp.Column)):
        if not _resolve_column(expr, column, scope, reporter):
            ok = False
    if not ok:
        return None
    if isinstance(expr.tree, exp.Column):
        return type_text(expr.tree)
    try:
        with deep_recursion():
            try:
                _annotate(expr.tree)
            except (AttributeError, IndexError, KeyError, TypeError, ValueError):
                # sqlglot's typing rules assume well-formed calls: ceil() has no argument
                reporter.error(
                    Code.E0003,
                    "invalid SQL: cannot work out the type of this expression",
                    expr.span,
                    help="check the arguments of its functions",
                )
                return None
            refused = _fill_unknown_types(expr.tree, functions or {})
    except RecursionError:
        reporter.error(
            Code.E0004,
            "expression is too deeply nested or too long to compile",
            expr.span,
            help="split it into several steps",
        )
        return None
    if refused:
        for node in refused:
            _refuse_flink_aggregate(expr, node, reporter)
        return None
    return type_text(expr.tree)


def _refuse_flink_aggregate(expr: SqlExpr, node: exp.Expr, reporter: Reporter) -> None:
    """E0619: a Flink aggregate whose value depends on its argument's type where flowc
    cannot compute it as Flink does."""
    name = _called_name(expr, node)
    argument = _argument_type(node)
    if argument == UNKNOWN:
        problem = f"{name} of an argument flowc cannot type: Flink's {name} takes its type"
        hint = f"CAST the argument to the type you mean: {name}(CAST(x AS DOUBLE))"
    else:
        problem = (
            f"{name} of {argument}: Flink computes it from sums and counts in {argument}, "
            "truncating each step, which flowc does not reproduce"
        )
        hint = (
            "CAST the argument to DOUBLE, as Flink's users do for a fractional result: "
            f"{name}(CAST(x AS DOUBLE))"
        )
    reporter.error(Code.E0619, problem, _call_span(expr, node, name), help=hint)


_CALL_BEFORE = re.compile(r"(\w+)\s*\(\s*(?:DISTINCT\s+)?\Z", re.IGNORECASE)


def _called_name(expr: SqlExpr, node: exp.Expr) -> str:
    """The function's name as written (``VAR_SAMP``, which sqlglot reads as VARIANCE)."""
    places = identifier_places(node)
    found = _CALL_BEFORE.search(expr.text[: places[0]]) if places is not None else None
    if found is not None:
        return found.group(1).upper()
    return node.sql_name().upper() if isinstance(node, exp.Func) else node.key.upper()


def _call_span(expr: SqlExpr, node: exp.Expr, name: str) -> Span:
    """The span of the call ``name(...)`` around ``node``'s arguments, else theirs."""
    places = identifier_places(node)
    if places is None:
        return expr.span
    found = _CALL_BEFORE.search(expr.text[: places[0]])
    if found is None:
        return node_span(expr, node)
    close = expr.text.find(")", places[1])
    return sub_span(expr, found.start(), close + 1 if close != -1 else places[1])


@cache
def _spark_schema() -> SqlglotSchema:
    return ensure_schema(None, dialect="spark")


def _annotate(tree: exp.Expr) -> None:
    """sqlglot's annotate_types for a lone expression: no scopes to walk, Spark's rules, and
    column types set by flowc kept."""
    TypeAnnotator(_spark_schema(), overwrite_types=False).annotate(tree, annotate_scope=False)


#: sqlglot's UNKNOWN type kind, looked up once (an enum member read through its class
#: costs more than the test; members are singletons, so ``is`` is their ``==``).
_UNKNOWN_KIND = exp.DataType.Type.UNKNOWN


def type_text(node: exp.Expr) -> str:
    """Spark's spelling of a node's type; simple types skip sqlglot's generator (hot path)."""
    dtype = node.type
    if dtype is None or dtype.this is _UNKNOWN_KIND:
        return UNKNOWN
    if not dtype.expressions and not dtype.args.get("values") and isinstance(dtype.this, exp.DType):
        return _simple_type_name(dtype.this)
    try:
        return normalize_type(str(dtype.sql("spark")))
    except TypeSyntaxError:
        return UNKNOWN


@cache
def _simple_type_name(kind: exp.DType) -> str:
    try:
        return normalize_type(str(exp.DataType.build(kind).sql("spark")))
    except (TypeSyntaxError, SqlglotError, ValueError):  # not a type sqlglot can build
        return UNKNOWN


def _is_unknown(node: exp.Expr) -> bool:
    dtype = node.type
    return dtype is None or dtype.this is _UNKNOWN_KIND


def _resolve_column(expr: SqlExpr, column: exp.Column, scope: Scope, reporter: Reporter) -> bool:
    if isinstance(column.this, exp.Star):
        if column.args.get("db") or column.args.get("catalog"):
            reporter.error(Code.E0201, f"unknown column '{column.sql()}'", node_span(expr, column))
            return False
        return True
    parts = [p.name for p in column.parts]
    quoted = [bool(p.args.get("quoted")) for p in column.parts]
    if len(parts) == 1 or (parts[0] in scope.qualifiers and scope.lookup(parts[1], parts[0])):
        qualifier = parts[0] if len(parts) > 1 else None
        name, fields = (parts[1], parts[2:]) if qualifier else (parts[0], [])
    elif scope.lookup(parts[0], None):
        qualifier, name, fields = None, parts[0], parts[1:]
    elif parts[0] in scope.qualifiers:
        qualifier, name, fields = parts[0], parts[1], parts[2:]
    else:
        known = sorted(scope.qualifiers)
        candidates = [c.name for c in scope.schema]
        reporter.error(
            Code.E0201,
            f"unknown relation or column '{parts[0]}' in '{column.sql()}'",
            node_span(expr, column),
            help=did_you_mean(parts[0], known + candidates)
            or (f"relations here: {', '.join(known)}; " if known else "")
            + ("columns here: " + ", ".join(dict.fromkeys(candidates)) if candidates else ""),
        )
        return False
    matches = scope.lookup(name, qualifier)
    if not matches:
        candidates = [c.name for c in scope.schema]
        hint = did_you_mean(name, candidates)
        if name.lower() == "window_time" and "window_end" in candidates:
            hint = (
                "a windowed AGGREGATE outputs window_time when asked: |> AGGREGATE ..., "
                "window_time (in SQL, select window_time(window))"
            )
        if hint is None and candidates:
            hint = "columns here: " + ", ".join(dict.fromkeys(candidates))
        reporter.error(
            Code.E0201, f"unknown column '{column.sql()}'", node_span(expr, column), hint
        )
        return False
    if len(matches) > 1:
        sides = ", ".join(f"{c.qualifier}.{c.name}" for c in matches if c.qualifier)
        reporter.error(
            Code.E0202,
            f"column '{name}' is ambiguous",
            node_span(expr, column),
            help=f"qualify it: {sides}" if sides else None,
        )
        return False
    type_text = matches[0].type
    if not fields:
        column.type = (
            data_type(type_text) if type_text != UNKNOWN else exp.DataType.build("UNKNOWN")
        )
        return True
    index = len(parts) - len(fields) - 1
    base = exp.column(name, table=qualifier, quoted=quoted[index])
    if qualifier is not None:
        base.args["table"].set("quoted", quoted[index - 1])
    base.type = data_type(type_text) if type_text != UNKNOWN else exp.DataType.build("UNKNOWN")
    node: exp.Expr = base
    path = name
    for offset, field in enumerate(fields):
        if type_text != UNKNOWN:
            if not type_text.startswith("STRUCT"):
                reporter.error(
                    Code.E0201,
                    f"'{path}' is a {type_text}, not a struct: it has no field '{field}'",
                    node_span(expr, column),
                )
                return False
            field_type = _struct_field(type_text, field)
            if field_type is None:
                reporter.error(
                    Code.E0201,
                    f"struct column '{path}' has no field '{field}'",
                    node_span(expr, column),
                    help=did_you_mean(field, _struct_fields(type_text)),
                )
                return False
            type_text = field_type
        node = exp.Dot(
            this=node, expression=exp.to_identifier(field, quoted=quoted[index + 1 + offset])
        )
        node.type = data_type(type_text) if type_text != UNKNOWN else exp.DataType.build("UNKNOWN")
        path = f"{path}.{field}"
    if column.parent is None:
        # The whole expression is the field (a computed column ``bid.price``): the tree's
        # root stays the column, which Spark reads as the same field, typed as the field.
        column.type = node.type
        return True
    column.replace(node)
    return True


def _struct_fields(struct_type: str) -> list[str]:
    return [e.name for e in data_type(struct_type).expressions if isinstance(e, exp.ColumnDef)]


def _struct_field(struct_type: str, field: str) -> str | None:
    for e in data_type(struct_type).expressions:
        if isinstance(e, exp.ColumnDef) and e.name == field:
            kind = e.args.get("kind")
            return str(kind.sql("spark")) if kind is not None else UNKNOWN
    return None


# ---------------------------------------------------------------- flowc's own typing rules


def _fill_unknown_types(tree: exp.Expr, functions: Mapping[str, str]) -> list[exp.Expr]:
    """Give each node Spark's type where sqlglot's rules differ from Spark's (see
    :mod:`flowc.sql.spark_typing`) and type what sqlglot leaves UNKNOWN, children first; a
    Python function's call has the type it declares. Returns the Flink aggregates whose
    Flink value cannot be given for their argument's type (E0619)."""
    refused: list[exp.Expr] = []
    for node in reversed(_preorder(tree)):
        if (
            node.__class__ in _FLINK_AGGREGATE_CLASSES
            and is_flink_aggregate(node)
            and not _flink_aggregate_computable(node)
        ):
            refused.append(node)
        if isinstance(node, exp.Anonymous) and node.name.lower() in functions:
            inferred: str | None = functions[node.name.lower()]
        else:
            inferred = _spark_rule(node)
            if inferred is None and _is_unknown(node):
                inferred = _infer(node)
        if inferred is None or UNKNOWN in inferred:
            continue
        try:
            node.type = data_type(inferred)
        except TypeSyntaxError:
            continue
    return refused


def _preorder(tree: exp.Expr) -> list[exp.Expr]:
    """``list(tree.walk(bfs=False))``, the same order, without a generator per node (typing
    walks every tree it cannot take from the cache of typings)."""
    order: list[exp.Expr] = []
    stack = [tree]
    expr_class = exp.Expr
    while stack:
        node = stack.pop()
        order.append(node)
        for value in reversed(node.args.values()):  # pushed last first: popped in order
            if isinstance(value, list):
                for item in reversed(value):
                    if isinstance(item, expr_class):
                        stack.append(item)
            elif isinstance(value, expr_class):
                stack.append(value)
    return order


#: The classes of the aggregates the Flink dialect marks (its FLINK_AGGREGATES).
_FLINK_AGGREGATE_CLASSES = frozenset(
    {exp.Avg, exp.Stddev, exp.StddevPop, exp.StddevSamp, exp.Variance, exp.VariancePop}
)


def _flink_aggregate_computable(node: exp.Expr) -> bool:
    """Flink's AVG of an argument flowc types (the generator writes Flink's value); the
    variance family of a typed argument but an integer (Spark's value is Flink's)."""
    argument = _argument_type(node)
    if isinstance(node, exp.Avg):
        return argument != UNKNOWN
    return argument != UNKNOWN and argument not in spark_typing.INTEGER_TYPES


def _spark_rule(node: exp.Expr) -> str | None:
    """Spark's type of ``node`` from its children's, where flowc knows Spark's rule."""
    if not isinstance(node, _SPARK_RULE_CLASSES):  # most nodes: one test, not twenty
        return None
    if isinstance(node, exp.Literal):
        return spark_typing.literal_type(node)
    if isinstance(node, exp.Interval):
        return spark_typing.interval_type(node)
    if isinstance(node, exp.Paren | exp.Filter):  # ``agg(x) FILTER (WHERE ...)``: agg's
        inner = type_text(node.this)
        return inner if inner != UNKNOWN else None
    if isinstance(node, exp.Neg):
        inner = type_text(node.this)
        return inner if is_numeric(inner) or inner.startswith("INTERVAL") else None
    if isinstance(node, _ARITHMETIC):
        left, right = _operand_type(node.left), _operand_type(node.right)
        return spark_typing.datetime_arithmetic(node, left, right) or spark_typing.arithmetic(
            node, left, right
        )
    name = node.name.lower() if isinstance(node, exp.Anonymous) else ""
    if isinstance(node, exp.Func):
        called = name or node.sql_name().lower()
        if called in spark_typing.FIXED_RESULTS:
            return spark_typing.FIXED_RESULTS[called]
    if isinstance(node, exp.SafeDivide):  # try_divide: the type of ``/``
        division = exp.Div(this=node.this, expression=node.expression)
        return spark_typing.arithmetic(division, type_text(node.this), type_text(node.expression))
    if isinstance(node, exp.Abs) and type_text(node.this).startswith("INTERVAL"):
        return type_text(node.this)
    if isinstance(node, exp.DateTrunc):  # trunc(d, 'MM'); date_trunc is TimestampTrunc
        return "DATE"
    if isinstance(node, exp.UnixDate):  # written DATEDIFF(DAY, ...), which is BIGINT
        return "BIGINT"
    if isinstance(node, exp.Sum) or name == "try_sum":
        return spark_typing.sum_type(_argument_type(node))
    if isinstance(node, exp.Avg) and is_flink_aggregate(node):
        return spark_typing.flink_average_type(_argument_type(node))
    if isinstance(node, exp.Avg) or name in ("mean", "try_avg"):
        return spark_typing.average_type(_argument_type(node))
    if isinstance(node, exp.Round | exp.Ceil | exp.Floor) or name in ("bround", "ceiling"):
        return _rounding_type(node, ceiling=not isinstance(node, exp.Round) and name != "bround")
    if isinstance(node, exp.Case):
        branches = [_operand_type(i.args["true"]) for i in node.args.get("ifs") or []]
        default = node.args.get("default")
        branches.append(_operand_type(default) if default is not None else "NULL")
        return _known(spark_typing.widest(branches))
    if isinstance(node, exp.If):
        false = node.args.get("false")
        branches = [_operand_type(node.args["true"])]
        branches.append(_operand_type(false) if false is not None else "NULL")
        return _known(spark_typing.widest(branches))
    if isinstance(node, exp.Coalesce | exp.Greatest | exp.Least):
        operands = [node.this, *node.expressions]
        return _known(spark_typing.widest([_operand_type(o) for o in operands]))
    return None


#: Every class :func:`_spark_rule` tests for (a call by name is an ``Anonymous``, a
#: ``Func``): a node of none of them has no rule. tests/test_sqltypes_rules.py checks
#: that the list names each class the function tests.
_SPARK_RULE_CLASSES = (
    exp.Literal,
    exp.Interval,
    exp.Paren,
    exp.Filter,
    exp.Neg,
    exp.Add,
    exp.Sub,
    exp.Mul,
    exp.Div,
    exp.Mod,
    exp.IntDiv,
    exp.Func,
    exp.Anonymous,
    exp.SafeDivide,
    exp.Abs,
    exp.DateTrunc,
    exp.UnixDate,
    exp.Sum,
    exp.Avg,
    exp.Round,
    exp.Ceil,
    exp.Floor,
    exp.Case,
    exp.If,
    exp.Coalesce,
    exp.Greatest,
    exp.Least,
)


def _rounding_type(node: exp.Expr, ceiling: bool) -> str | None:
    arguments = node.expressions if isinstance(node, exp.Anonymous) else [node.this]
    digits = node.args.get("decimals") if not isinstance(node, exp.Anonymous) else None
    if isinstance(node, exp.Anonymous) and len(arguments) == 2:
        arguments, digits = arguments[:1], arguments[1]
    if len(arguments) != 1:
        return None
    scale = 0
    if digits is not None:
        literal = digits.this if isinstance(digits, exp.Neg) else digits
        if not (isinstance(literal, exp.Literal) and literal.name.isdigit()):
            return None
        scale = -int(literal.name) if isinstance(digits, exp.Neg) else int(literal.name)
    return spark_typing.rounded(type_text(arguments[0]), scale, ceiling)


_ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.IntDiv)


def _operand_type(node: exp.Expr) -> str:
    """A node's type, with NULL for the NULL literal (it takes any type)."""
    return "NULL" if isinstance(node, exp.Null) else type_text(node)


def _argument_type(node: exp.Expr) -> str:
    arguments = [node.this] if not isinstance(node, exp.Anonymous) else node.expressions
    if len(arguments) != 1 or not isinstance(arguments[0], exp.Expr):
        return UNKNOWN
    argument = arguments[0]
    if isinstance(argument, exp.Distinct) and len(argument.expressions) == 1:
        argument = argument.expressions[0]
    return type_text(argument)


def _known(type_text: str | None) -> str | None:
    return None if type_text is None or UNKNOWN in type_text or type_text == "NULL" else type_text


def _infer(node: exp.Expr) -> str | None:
    if not isinstance(node, _INFERRED_CLASSES):  # most nodes: one test, not fifteen
        return None
    if isinstance(node, exp.Anonymous) and node.name.lower() in ("window", "session_window"):
        return WINDOW_STRUCT
    if isinstance(node, exp.TimestampTrunc | exp.DateTrunc):
        return TIMESTAMP
    if isinstance(node, exp.RegexpSplit | exp.Split):
        return "ARRAY<STRING>"
    if isinstance(node, exp.Paren):
        return type_text(node.this)
    if isinstance(node, exp.Sum):
        return _sum_type(type_text(node.this))
    if isinstance(node, exp.Avg):
        arg = type_text(node.this)
        return "DOUBLE" if is_numeric(arg) and not arg.startswith("DECIMAL") else None
    if isinstance(node, exp.Min | exp.Max | exp.First | exp.Last | exp.AnyValue):
        arg = type_text(node.this)
        return arg if arg != UNKNOWN else None
    if isinstance(node, exp.ArrayAgg):
        arg = type_text(node.this)
        return f"ARRAY<{arg}>" if arg != UNKNOWN else None
    if isinstance(node, exp.Dot):
        base = type_text(node.this)
        if base.startswith("STRUCT"):
            return _struct_field(base, node.name)
        return None
    if isinstance(node, exp.Binary):
        return _binary_type(node)
    if isinstance(node, exp.Neg):
        return type_text(node.this) if is_numeric(type_text(node.this)) else None
    return None


#: Every class :func:`_infer` tests for (checked as :data:`_SPARK_RULE_CLASSES` is).
_INFERRED_CLASSES = (
    exp.Anonymous,
    exp.TimestampTrunc,
    exp.DateTrunc,
    exp.RegexpSplit,
    exp.Split,
    exp.Paren,
    exp.Sum,
    exp.Avg,
    exp.Min,
    exp.Max,
    exp.First,
    exp.Last,
    exp.AnyValue,
    exp.ArrayAgg,
    exp.Dot,
    exp.Binary,
    exp.Neg,
)


def _sum_type(arg: str) -> str | None:
    if arg in _INTEGERS:
        return "BIGINT"
    if arg in _FLOATS:
        return "DOUBLE"
    if arg.startswith("DECIMAL"):
        dtype = data_type(arg)
        params = [int(p.name) for p in dtype.expressions if p.name.isdigit()]
        precision, scale = [*params, 10, 0][:2]
        return f"DECIMAL({min(38, precision + 10)}, {scale})"
    return None


_NUMERIC_ORDER = ("TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE")


def _binary_type(node: exp.Binary) -> str | None:
    left, right = type_text(node.left), type_text(node.right)
    if isinstance(node, exp.Add | exp.Sub):
        if left in (TIMESTAMP, "DATE") and isinstance(node.right, exp.Interval):
            return TIMESTAMP
        if right == TIMESTAMP and isinstance(node.left, exp.Interval):
            return TIMESTAMP
    if isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Mod | exp.Div | exp.IntDiv):
        if not (is_numeric(left) and is_numeric(right)):
            return None
        if isinstance(node, exp.Div):
            return "DOUBLE"
        if left.startswith("DECIMAL") or right.startswith("DECIMAL"):
            return left if left.startswith("DECIMAL") else right
        return max(left, right, key=_NUMERIC_ORDER.index)
    return None
