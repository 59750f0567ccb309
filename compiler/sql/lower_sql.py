"""Lower a Spark SQL ``SELECT`` view to the pipe steps it means.

``SELECT ... FROM t [JOIN u ON ...] WHERE ... GROUP BY k, window(ts, '10 seconds')
HAVING ...`` becomes ``FROM t |> JOIN u ON ... |> WHERE ... |> KEY BY k |> WINDOW
TUMBLE(ts, ...) |> AGGREGATE ... |> WHERE <having> |> SELECT ...``, so SQL views get
exactly the plans of the equivalent pipe query. ``GROUP BY auction % 10`` computes the key
first (``EXTEND auction % 10 AS `$f0` |> KEY BY `$f0```, Flink's Calc below the exchange
and Flink's name for the field). CTEs, subqueries in FROM and aliases are
made views and relation names before (:mod:`flowc.sql.sql_forms`). What has no streaming
meaning here (ORDER BY, LIMIT, subqueries in expressions, OVER windows) is a diagnostic
at its position.

The grouped window is a column of the windowed AGGREGATE's output, as in Spark: named
``window`` (``session_window``), or the alias of ``window(...) AS w`` in the SELECT list.
``window.start`` / ``w.start`` (and ``.end``) are the AGGREGATE's ``window_start`` and
``window_end``; the whole struct is ``named_struct('start', window_start, 'end',
window_end)``. Flink SQL's group windows (``GROUP BY TUMBLE(...)``) are E0602.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any, TypedDict

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import TokenError
from sqlglot.tokenizer_core import TokenType

from flowc import ast
from flowc.diagnostics import Reporter
from flowc.errorcodes import Code
from flowc.spans import Span
from flowc.sql.functions import has_aggregate, is_aggregate
from flowc.sql.habits import (
    FLINK_GROUP_WINDOWS,
    FLINK_WINDOW_PROPERTIES,
    flink_property_help,
    flink_window_help,
    function_name,
)
from flowc.sql.sqltypes import node_span, sub_span
from flowc.vocabulary import JoinKind, WindowKind

_UNSUPPORTED: dict[str, tuple[str, TokenType | None]] = {
    "with_": ("WITH (common table expressions)", TokenType.WITH),
    "with": ("WITH (common table expressions)", TokenType.WITH),
    "order": ("ORDER BY", TokenType.ORDER_BY),
    "limit": ("LIMIT", TokenType.LIMIT),
    "offset": ("OFFSET", TokenType.OFFSET),
    "qualify": ("QUALIFY", TokenType.QUALIFY),
    "laterals": ("LATERAL VIEW", TokenType.LATERAL),
    "windows": ("WINDOW clauses", TokenType.WINDOW),
}

#: Spark's window functions, by the name Spark gives the grouped window column.
_WINDOW_FUNCTIONS = frozenset({"window", "session_window"})
_FIELDS = frozenset({"start", "end"})
_STRUCT = "named_struct('start', window_start, 'end', window_end)"


class StepFields(TypedDict):
    """What every lowered step shares (:class:`~flowc.ast.StepBase`): the query's span."""

    keyword_span: Span
    hints: tuple[ast.Option, ...]
    hints_span: Span | None
    span: Span


class _Unsupported(Exception):
    def __init__(
        self, what: str, span: Span, help: str | None = None, code: Code = Code.E0601
    ) -> None:
        super().__init__(what)
        self.what = what
        self.span = span
        self.help = help
        self.code = code

    @property
    def message(self) -> str:
        if self.code == Code.E0601:
            return f"not supported in a streaming query: {self.what}"
        return self.what


def lower_sql_query(query: ast.SqlQuery, reporter: Reporter) -> ast.PipeQuery | None:
    try:
        return _Lowering(query).lower()
    except _Unsupported as problem:
        reporter.error(
            problem.code,
            problem.message,
            problem.span,
            help=problem.help or "write the query as a pipe query (FROM x |> ...)",
        )
        return None


#: The last word of an AS OF clause's words (``AS OF``, ``BETWEEN``, ``FROM``, ``CONTAINED
#: IN``).
_CLAUSE_ENDS = frozenset({"OF", "BETWEEN", "FROM", "IN"})


class QueryPositions:
    """Where the nodes of one SQL query stand in the file, for code that rewrites the
    query (:mod:`flowc.sql.sql_forms`): spans, and expressions located at their text."""

    def __init__(self, query: ast.SqlQuery) -> None:
        self._lowering = _Lowering(query)

    def span(self, node: exp.Expr | None, keyword: TokenType | None = None) -> Span:
        return self._lowering.span_of(node, keyword)

    def version_clause(self, table: exp.Table) -> tuple[str, Span]:
        return self._lowering.version_clause(table)

    def expr(self, node: exp.Expr, tree: exp.Expr | None = None) -> ast.SqlExpr:
        return self._lowering.expr(node, tree)


def check_flink_windows(query: ast.SqlQuery, reporter: Reporter) -> bool:
    """E0602 for Flink SQL's group windows in ``query``; False when there is one.

    Runs before Spark's function checks, which would call TUMBLE an unknown function.
    """
    lowering = _Lowering(query)
    try:
        for select in query.tree.find_all(exp.Select):
            lowering.flink_windows(select)
    except _Unsupported as problem:
        reporter.error(problem.code, problem.message, problem.span, help=problem.help)
        return False
    return True


def _tokenize(text: str) -> list[Any]:
    """sqlglot's Spark tokens of ``text``, by a tokenizer of this call's own (a tokenizer
    keeps the state of the text it works on, so threads must not share one)."""
    dialect = Dialect.get_or_raise("spark")
    return list(dialect.tokenizer_class(dialect=dialect).tokenize(text))


def _is_window_call(node: exp.Expr | None) -> bool:
    return isinstance(node, exp.Anonymous) and node.name.lower() in _WINDOW_FUNCTIONS


class _Lowering:
    def __init__(self, query: ast.SqlQuery) -> None:
        self.query = query
        self.span = query.span
        self.origin = query.origin or query.span
        self._tokens: list[Any] | None = None

    # ------------------------------------------------------------ positions

    def tokens(self) -> list[Any]:
        """sqlglot's tokens of the query text (for keywords, which carry no positions)."""
        if self._tokens is None:
            try:
                self._tokens = _tokenize(self.query.text)
            except TokenError:  # only costs precision
                self._tokens = []
        return self._tokens

    def span_of(self, node: exp.Expr | None, keyword: TokenType | None = None) -> Span:
        """Where ``node`` stands in the query: from its ``keyword`` (a clause's, which
        sqlglot does not place) or its first positioned part to its last, brackets closed."""
        starts: list[int] = []
        ends: list[int] = []
        for part in node.walk() if node is not None else ():
            meta = part._meta
            if meta and "start" in meta and "end" in meta:
                starts.append(meta["start"])
                ends.append(meta["end"] + 1)
        tokens = self.tokens()
        lo = min(starts) if starts else None
        hi = max(ends) if ends else None
        if keyword is not None:
            candidates = [
                t for t in tokens if t.token_type is keyword and (lo is None or t.start <= lo)
            ]
            if keyword is TokenType.WINDOW:  # the clause WINDOW w AS (...), not window(...)
                following = {t.start: n for t, n in itertools.pairwise(tokens)}
                candidates = [
                    t
                    for t in candidates
                    if t.start not in following
                    or following[t.start].token_type is not TokenType.L_PAREN
                ]
            if candidates:
                chosen = candidates[-1] if lo is not None else candidates[0]
                lo = chosen.start
                hi = max(hi or 0, chosen.end + 1)
        if lo is None or hi is None:
            return self.span
        inside = [i for i, t in enumerate(tokens) if lo <= t.start < hi]
        if inside:
            first, last = inside[0], inside[-1]
            depth = sum(_bracket(t) for t in tokens[first : last + 1])
            while depth > 0 and last + 1 < len(tokens):  # close what the construct opened
                last += 1
                depth += _bracket(tokens[last])
            while depth < 0 and first > 0:  # open what it closes
                first -= 1
                depth += _bracket(tokens[first])
            while (
                keyword is TokenType.ORDER_BY
                and last + 1 < len(tokens)
                and _is_modifier(tokens[last + 1])
            ):  # ORDER BY k DESC NULLS LAST
                last += 1
            if (
                first > 0
                and last + 1 < len(tokens)
                and tokens[first - 1].token_type is TokenType.L_PAREN
                and tokens[last + 1].token_type is TokenType.R_PAREN
                and tokens[first].token_type is TokenType.SELECT
            ):  # a subquery: its brackets too
                first, last = first - 1, last + 1
            lo, hi = min(lo, tokens[first].start), max(hi, tokens[last].end + 1)
        located = ast.SqlExpr(text=self.query.text, tree=exp.Null(), span=self.origin)
        return sub_span(located, lo, hi)

    def version_clause(self, table: exp.Table) -> tuple[str, Span]:
        """A table's AS OF clause: its words before the expression (``FOR SYSTEM_TIME AS
        OF``; sqlglot reads Spark's ``TIMESTAMP AS OF`` into the same tree) and its span,
        from its first word to the end of its expression (a call's brackets included)."""
        version = table.args.get("version")
        expression = version.expression if isinstance(version, exp.Version) else None
        name = table.this
        after = name.meta.get("end", -1) if isinstance(name, exp.Identifier) else -1
        tokens = self.tokens()
        rest = [i for i, t in enumerate(tokens) if t.start > after]
        ends = [i for i in rest if tokens[i].text.upper() in _CLAUSE_ENDS]
        if not rest:
            return "", self.span
        first, last = rest[0], ends[0] if ends else rest[0]
        text = " ".join(t.text.upper() for t in tokens[first : last + 1])
        located = ast.SqlExpr(text=self.query.text, tree=exp.Null(), span=self.origin)
        stops = [
            part.meta["end"]
            for part in (expression.walk() if expression is not None else ())
            if "end" in part.meta
        ]
        alias = table.args.get("alias")
        named = alias.this if isinstance(alias, exp.TableAlias) else None
        at = named.meta.get("start") if isinstance(named, exp.Identifier) else None
        if at is not None:  # ends before ``AS a``: all of the expression, unplaced parts too
            before = max(i for i, t in enumerate(tokens) if t.start < at)
            last = before - 1 if tokens[before].token_type is TokenType.ALIAS else before
            return text, sub_span(located, tokens[first].start, tokens[last].end + 1)
        if stops:
            last = max(i for i, t in enumerate(tokens) if t.start <= max(stops))
        else:  # an expression sqlglot does not place (a literal): the next token
            last = min(last + 1, len(tokens) - 1)
        depth = 0
        while last + 1 < len(tokens) and (
            depth > 0 or tokens[last + 1].token_type is TokenType.L_PAREN
        ):
            last += 1
            depth += _bracket(tokens[last])
        return text, sub_span(located, tokens[first].start, tokens[last].end + 1)

    # ------------------------------------------------------------ AST pieces

    def expr(self, node: exp.Expr, tree: exp.Expr | None = None) -> ast.SqlExpr:
        """A standalone expression for ``node`` (or ``tree``, what it is rewritten to),
        with the span ``node`` has in the file."""
        if tree is None:
            located = ast.SqlExpr(text=self.query.text, tree=node, span=self.origin)
            span = node_span(located, node)
        else:
            span = self.span_of(node)
        copy = (tree if tree is not None else node).copy()
        for part in copy.walk():
            if isinstance(part, exp.Identifier):
                for key in ("start", "end", "line", "col"):
                    part.meta.pop(key, None)
        return ast.SqlExpr(text=copy.sql("spark"), tree=copy, span=span)

    def name(self, value: str, span: Span | None = None) -> ast.Name:
        return ast.Name(value=value, quoted=False, span=span or self.span)

    def step_fields(self) -> StepFields:
        return {"keyword_span": self.span, "hints": (), "hints_span": None, "span": self.span}

    def relation(self, table: exp.Expr) -> ast.Relation:
        if not isinstance(table, exp.Table) or table.args.get("db"):
            raise _Unsupported(
                "a subquery or qualified table in FROM",
                self.span_of(table, TokenType.SELECT if isinstance(table, exp.Subquery) else None),
                help="define the subquery as a view and read the view",
            )
        if table.alias and table.alias != table.name:
            raise _Unsupported(
                f"the table alias '{table.alias}'",
                self.span_of(table),
                help=f"refer to the source or view by its name '{table.name}'",
            )
        return ast.Relation(name=self.name(table.name), side_output=None, span=self.span)

    # ------------------------------------------------------------ queries

    def lower(self) -> ast.PipeQuery:
        tree = self.query.tree
        if isinstance(tree, exp.Union):
            return self.union(tree)
        if not isinstance(tree, exp.Select):
            raise _Unsupported(f"'{type(tree).__name__.upper()}'", self.span)
        return self.select(tree)

    def union(self, tree: exp.Union) -> ast.PipeQuery:
        if tree.args.get("distinct") or not isinstance(tree, exp.Union):
            raise _Unsupported(
                "UNION without ALL", self.span_of(None, TokenType.UNION), help="use UNION ALL"
            )
        left = tree.left
        right = tree.right
        assert isinstance(left, exp.Select | exp.Union)  # the grammar admits no other left side
        first = self.select(left) if isinstance(left, exp.Select) else self.union(left)
        if not (
            isinstance(right, exp.Select)
            and len(right.expressions) == 1
            and isinstance(right.expressions[0], exp.Star)
            and not right.args.get("where")
            and not right.args.get("joins")
        ):
            raise _Unsupported(
                "UNION ALL of a query other than SELECT * FROM x",
                self.span_of(right, TokenType.SELECT),
                help="define each side as a view, then UNION ALL the views",
            )
        table = right.args["from_"].this
        relation = replace(self.relation(table), span=self.span_of(table))
        step = ast.UnionAll(others=(relation,), **self.step_fields())
        return ast.PipeQuery(source=first.source, steps=(*first.steps, step), span=self.span)

    def select(self, tree: exp.Select) -> ast.PipeQuery:
        for key, (what, keyword) in _UNSUPPORTED.items():
            clause = tree.args.get(key)
            if clause:
                node = clause[0] if isinstance(clause, list) else clause
                raise _Unsupported(what, self.span_of(node, keyword))
        self.flink_windows(tree)
        for window in tree.find_all(exp.Window):
            raise _Unsupported("OVER (...) window functions", self.span_of(window))
        for node in tree.walk():
            if isinstance(node, exp.Subquery | exp.Select) and node is not tree:
                raise _Unsupported(
                    "a subquery", self.span_of(node, TokenType.SELECT), help="define it as a view"
                )
        from_ = tree.args.get("from_") or tree.args.get("from")
        if from_ is None:
            raise _Unsupported("SELECT without FROM", self.span)
        source = self.relation(from_.this)
        steps: list[ast.Step] = []
        fields = self.step_fields()
        for join in tree.args.get("joins") or []:
            side = (join.side or "").upper()
            kind = JoinKind(side) if side in ("LEFT", "RIGHT", "FULL") else JoinKind.INNER
            on = join.args.get("on")
            table = join.this
            version = table.args.get("version") if isinstance(table, exp.Table) else None
            as_of, as_of_span = None, None
            if isinstance(version, exp.Version) and version.expression is not None:
                assert isinstance(table, exp.Table)
                as_of, as_of_span = self.expr(version.expression), self.version_clause(table)[1]
            steps.append(
                ast.Join(
                    kind=kind,
                    right=self.relation(table),
                    condition=self.expr(on) if on is not None else None,
                    as_of=as_of,
                    as_of_span=as_of_span,
                    **fields,
                )
            )
        items = list(tree.expressions)
        steps.extend(self.drop_join_keys(tree, items))
        where = tree.args.get("where")
        if where is not None:
            steps.append(ast.Where(condition=self.expr(where.this), **fields))
        group = tree.args.get("group")
        has_aggregates = any(has_aggregate(item) for item in items)
        if group is not None or has_aggregates:
            steps.extend(self.aggregate(tree, items, group))
        elif not (len(items) == 1 and isinstance(items[0], exp.Star)):
            steps.append(ast.Select(items=tuple(self.item(i) for i in items), **fields))
        if tree.args.get("distinct"):
            steps.append(ast.Deduplicate(columns=(), within=None, **fields))
        return ast.PipeQuery(source=source, steps=tuple(steps), span=self.span)

    def drop_join_keys(self, tree: exp.Select, items: list[exp.Expr]) -> list[ast.Step]:
        """The DROP of the join keys computed for the query (``$join<n>``,
        :mod:`flowc.sql.sql_forms`) where a ``*`` would show them."""
        names = sorted(
            {
                column.name
                for join in tree.args.get("joins") or []
                for column in (join.args["on"].find_all(exp.Column) if join.args.get("on") else ())
                if column.name.startswith("$join")
            }
        )
        starred = any(
            isinstance(i, exp.Star) or (isinstance(i, exp.Column) and isinstance(i.this, exp.Star))
            for i in items
        )
        if not names or not starred:
            return []
        columns = tuple(ast.Name(value=n, quoted=True, span=self.span) for n in names)
        return [ast.Drop(columns=columns, **self.step_fields())]

    def flink_windows(self, tree: exp.Select) -> None:
        """Flink SQL's group windows and their TUMBLE_START-style properties: E0602."""
        group = tree.args.get("group")
        for key in group.expressions if group is not None else []:
            if function_name(key) in FLINK_GROUP_WINDOWS:
                assert isinstance(key, exp.Anonymous)
                raise _Unsupported(
                    f"GROUP BY {key.name.upper()}(...) is Flink SQL's group window, not Spark SQL",
                    self.span_of(key),
                    help=flink_window_help(key),
                    code=Code.E0602,
                )
        for node in tree.walk():
            name = function_name(node)
            if name in FLINK_WINDOW_PROPERTIES:
                assert name is not None
                raise _Unsupported(
                    f"{name}(...) is Flink SQL's window property, not Spark SQL",
                    self.span_of(node),
                    help=flink_property_help(name),
                    code=Code.E0602,
                )

    def item(self, node: exp.Expr) -> ast.SelectItem:
        if isinstance(node, exp.Alias):
            return ast.SelectItem(
                expr=self.expr(node.this), alias=self.name(node.alias), span=self.span
            )
        return ast.SelectItem(expr=self.expr(node), alias=None, span=self.span)

    # ------------------------------------------------------------ GROUP BY

    def aggregate(
        self, tree: exp.Select, items: list[exp.Expr], group: exp.Group | None
    ) -> list[ast.Step]:
        fields = self.step_fields()
        aliases = {item.alias: item.this for item in items if isinstance(item, exp.Alias)}
        keys: list[exp.Expr] = []
        computed: list[tuple[exp.Expr, str]] = []
        window: exp.Anonymous | None = None
        for key in group.expressions if group is not None else []:
            target = key
            if (
                isinstance(key, exp.Column)
                and not key.table
                and _is_window_call(aliases.get(key.name))
            ):
                target = aliases[key.name]  # GROUP BY w, with window(...) AS w (as Spark)
            if _is_window_call(target):
                if window is not None:
                    raise _Unsupported("grouping by two windows", self.span_of(key))
                assert isinstance(target, exp.Anonymous)
                window = target
            elif isinstance(key, exp.Column):
                keys.append(key)
            else:
                column = self.computed_key(key, computed)
                if column.name not in {k.name for k in keys}:  # GROUP BY a, (a): one key
                    keys.append(column)
        steps: list[ast.Step] = []
        if computed:
            steps.append(self.key_columns(computed))
            items = [self.read_keys(item, computed) for item in items]
            having_clause = tree.args.get("having")
            if having_clause is not None:
                tree = tree.copy()
                tree.set("having", exp.Having(this=_read_keys(tree.args["having"].this, computed)))
        if keys:
            steps.append(ast.KeyBy(keys=tuple(self.expr(k) for k in keys), **fields))
        window_sql = window.sql("spark") if window is not None else None
        names: set[str] = set()
        if window is not None:
            args = [self.expr(a) for a in window.expressions]
            if window.name.lower() == "session_window":
                kind = WindowKind.SESSION
            else:
                kind = WindowKind.HOP if len(args) == 3 else WindowKind.TUMBLE
            steps.append(ast.Window(kind=kind, args=tuple(args), **fields))
            names = {window.name.lower()} | {
                alias for alias, node in aliases.items() if node.sql("spark") == window_sql
            }
        key_names = {k.name for k in keys}
        names -= key_names
        grouped = key_names | ({"window_start", "window_end"} if window is not None else set())
        aggregates: list[ast.SelectItem] = []
        projection: list[ast.SelectItem] = []
        for index, item in enumerate(items):
            inner = item.this if isinstance(item, exp.Alias) else item
            alias = item.alias if isinstance(item, exp.Alias) else None
            if has_aggregate(inner):
                name = alias or f"agg_{index}"
                aggregates.append(
                    ast.SelectItem(expr=self.expr(inner), alias=self.name(name), span=self.span)
                )
                projection.append(self.item(exp.column(name) if not alias else exp.column(alias)))
            elif window is not None and inner.sql("spark") == window_sql:
                struct: exp.Expr = exp.maybe_parse(_STRUCT, dialect="spark")
                projection.append(
                    ast.SelectItem(
                        expr=self.expr(struct),
                        alias=self.name(alias or window.name.lower()),
                        span=self.span,
                    )
                )
            elif (
                isinstance(inner, exp.Column)
                and inner.name in key_names
                and inner.table not in names
            ):
                projection.append(self.item(item))
            else:
                rewritten = self.window_refs(inner, names, window_sql)
                used = {c.name for c in rewritten.find_all(exp.Column)}
                if isinstance(rewritten, exp.Star) or not used <= grouped:
                    raise _Unsupported(
                        f"'{inner.sql('spark')}' (neither grouped nor aggregated)",
                        self.span_of(inner),
                        help=self.ungrouped_help(inner, window is not None),
                    )
                output = alias or _spark_name(inner, names)
                projection.append(
                    ast.SelectItem(
                        expr=self.expr(inner, rewritten),
                        alias=self.name(output) if output else None,
                        span=self.span,
                    )
                )
        if not aggregates:
            raise _Unsupported(
                "GROUP BY without aggregates",
                self.span_of(group, TokenType.GROUP_BY) if group is not None else self.span,
                help="use DISTINCT",
            )
        steps.append(ast.Aggregate(items=tuple(aggregates), **fields))
        having = tree.args.get("having")
        if having is not None:
            condition = self.window_refs(having.this, names, window_sql)
            for agg in aggregates:
                for node in [n for n in condition.walk() if is_aggregate(n)]:
                    if node.sql("spark") == agg.expr.tree.sql("spark") and agg.alias is not None:
                        node.replace(exp.column(agg.alias.value))
            steps.append(ast.Where(condition=self.expr(having.this, condition), **fields))
        steps.append(ast.Select(items=tuple(projection), **fields))
        return steps

    def computed_key(self, key: exp.Expr, computed: list[tuple[exp.Expr, str]]) -> exp.Column:
        """``GROUP BY auction % 10``: the key is a column the query computes before KEY BY
        (as Flink's Calc below the exchange), named ``$f<n>`` as Flink's planner names a
        computed field; a plain name cannot be it, and a quoted one that is meets E0213."""
        if has_aggregate(key) or any(True for _ in key.find_all(exp.Window)):
            raise _Unsupported(
                "GROUP BY an aggregate",
                self.span_of(key),
                help="GROUP BY columns or expressions of one row's columns",
            )
        while isinstance(key, exp.Paren):
            key = key.this
        text = key.sql("spark")
        for done, name in computed:
            if done.sql("spark") == text:
                return exp.column(name, quoted=True)
        name = f"$f{len(computed)}"
        computed.append((key, name))
        return exp.column(name, quoted=True)

    def read_keys(self, item: exp.Expr, computed: list[tuple[exp.Expr, str]]) -> exp.Expr:
        """A SELECT item reading the computed keys; a bare key expression needs a name
        (Spark and Flink would name it by its text or ``EXPR$0``: flowc asks for AS)."""
        rewritten = _read_keys(item, computed)
        if isinstance(rewritten, exp.Column) and rewritten.name in {n for _, n in computed}:
            raise _Unsupported(
                f"'{item.sql('spark')}' without a name",
                self.span_of(item),
                help=f"name the grouped expression: {item.sql('spark')} AS k",
            )
        return rewritten

    def key_columns(self, computed: list[tuple[exp.Expr, str]]) -> ast.Extend:
        """The EXTEND that computes the GROUP BY's expressions, each at its span."""
        return ast.Extend(
            items=tuple(
                ast.SelectItem(
                    expr=self.expr(key), alias=self.name(name, self.span_of(key)), span=self.span
                )
                for key, name in computed
            ),
            **self.step_fields(),
        )

    @staticmethod
    def window_refs(node: exp.Expr, names: set[str], window_sql: str | None) -> exp.Expr:
        """``node`` with the grouped window's references made the AGGREGATE's columns:
        ``window.start`` → ``window_start``, ``window`` → the struct of both."""
        if window_sql is None:
            return node.copy()

        def swap(part: exp.Expr) -> exp.Expr:
            if (
                isinstance(part, exp.Column)
                and part.table in names
                and not part.args.get("db")
                and part.name.lower() in _FIELDS
            ):
                return exp.column(f"window_{part.name.lower()}")
            if (
                isinstance(part, exp.Dot)
                and part.this.sql("spark") == window_sql
                and part.name.lower() in _FIELDS
            ):
                return exp.column(f"window_{part.name.lower()}")
            if (isinstance(part, exp.Column) and not part.table and part.name in names) or (
                _is_window_call(part) and part.sql("spark") == window_sql
            ):
                struct: exp.Expr = exp.maybe_parse(_STRUCT, dialect="spark")
                return struct
            return part

        return node.copy().transform(swap)

    @staticmethod
    def ungrouped_help(node: exp.Expr, windowed: bool) -> str:
        for column in node.find_all(exp.Column):
            if column.table in _WINDOW_FUNCTIONS and not windowed:
                return (
                    f"{column.table}.{column.name} needs GROUP BY {column.table}(ts, ...): "
                    "then it is the window's bound"
                )
        return "add it to GROUP BY or wrap it in an aggregate"


def _read_keys(node: exp.Expr, computed: list[tuple[exp.Expr, str]]) -> exp.Expr:
    """``node`` with each GROUP BY expression outside an aggregate read from its computed
    key column (``auction % 10 AS k`` is ``$f0 AS k``), positions kept for spans."""
    texts = {key.sql("spark"): name for key, name in computed}

    def swap(part: exp.Expr) -> exp.Expr:
        name = texts.get(part.sql("spark")) if not isinstance(part, exp.Alias) else None
        if name is None or part.find_ancestor(exp.AggFunc) is not None:
            return part
        column = exp.column(name, quoted=True)
        column.meta.update(
            {k: v for k, v in _first_meta(part).items() if k in ("start", "end", "line", "col")}
        )
        return column

    return node.copy().transform(swap)


def _first_meta(node: exp.Expr) -> dict[str, Any]:
    for part in node.walk():
        if part._meta and "start" in part._meta:
            return dict(part._meta)
    return {}


def _spark_name(node: exp.Expr, names: set[str]) -> str | None:
    """The name Spark gives an unaliased reference to the window: ``window.start`` is
    ``start``, ``window`` is ``window``; None for other expressions (they need AS)."""
    if isinstance(node, exp.Column) and (
        not node.table or (node.table in names and node.name.lower() in _FIELDS)
    ):
        return node.name
    if isinstance(node, exp.Dot) and node.name.lower() in _FIELDS:
        return node.name
    return None


def _is_modifier(token: Any) -> bool:
    """A word sqlglot keeps no position for that ends an ORDER BY item."""
    return token.token_type in (TokenType.ASC, TokenType.DESC) or token.text.upper() in (
        "NULLS",
        "FIRST",
        "LAST",
    )


def _bracket(token: Any) -> int:
    if token.token_type is TokenType.L_PAREN:
        return 1
    if token.token_type is TokenType.R_PAREN:
        return -1
    return 0
