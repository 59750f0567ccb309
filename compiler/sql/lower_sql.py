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
window_end)``. ``window_time(window)``, an item of its own, is the AGGREGATE's item
``window_time`` (Flink's: the end minus 1 ms, keeping the watermark). Flink SQL's group
windows (``GROUP BY TUMBLE(...)``) are E0602.

In the Flink dialect (``query.dialect``), Flink's windows are read as Flink's:
``GROUP BY TUMBLE(ts, size)`` / ``HOP(ts, slide, size)`` / ``SESSION(ts, gap)`` is the
WINDOW step (HOP's arguments in flowc's order, size then slide) and ``TUMBLE_START(...)``,
``TUMBLE_END(...)`` (arguments those of the GROUP BY window: E0603) its ``window_start``,
``window_end``; ``FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), size))`` (HOP's slide, size;
CUMULATE's step, size; SESSION's gap, its data ``TABLE t PARTITION BY k``, grouped by
exactly k: E0735) grouped by ``window_start, window_end[, k]`` is ``FROM t |> KEY BY k |>
WINDOW ... |> AGGREGATE``; a window Top-N straight over one (:func:`lower_window_top`, from
:mod:`flowc.sql.sql_forms`'s Top-N) is ``|> WINDOW ... |> TOP``. What has no pipe form is
refused at its place: ``*_PROCTIME`` (E0602: flowc has no processing-time attribute of a
window); ``*_ROWTIME(...)`` and a window table function's ``window_time`` are the
AGGREGATE's ``window_time`` item (the window's end minus 1 ms, with the watermark); a
window table function not grouped by its window (E0604), wrong arguments (E0605), a
window Top-N over SESSION (E0734) or CUMULATE (E0736), CUMULATE's size not a whole multiple
of its step (E0737).
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
from flowc.sql.flink_dialect import FLINK
from flowc.sql.functions import has_aggregate, is_aggregate
from flowc.sql.habits import (
    FLINK_GROUP_WINDOWS,
    FLINK_PROCTIME_META,
    FLINK_PROCTIME_PROPERTIES,
    FLINK_ROWTIME_PROPERTIES,
    FLINK_TIME_PROPERTIES,
    FLINK_WINDOW_PROPERTIES,
    flink_property_help,
    flink_time_property_help,
    flink_window_help,
    function_name,
)
from flowc.sql.spark_sql import interval_millis
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

#: Why a Flink-dialect ORDER BY on a stream is refused, and what to write instead.
_ORDER_BY_HELP = (
    "Flink sorts a stream by its time attribute (a temporal sort: each row held until the "
    "watermark passes its time, then emitted in order), which Spark's streaming has no "
    "form of: leave ORDER BY out (rows reach the sink micro-batch by micro-batch), or "
    "keep the first rows per group with ROW_NUMBER() OVER (PARTITION BY ... ORDER BY ...)"
)

#: The parameters of Flink's window table functions, in their positional order.
_TVF_PARAMETERS = {
    "TUMBLE": ("DATA", "TIMECOL", "SIZE"),
    "HOP": ("DATA", "TIMECOL", "SLIDE", "SIZE"),
    "SESSION": ("DATA", "TIMECOL", "GAP"),
    "CUMULATE": ("DATA", "TIMECOL", "STEP", "SIZE"),
}
#: How each window table function is written positionally, for hints.
_TVF_FORMS = {
    "TUMBLE": "TUMBLE(TABLE t, DESCRIPTOR(ts), size)",
    "HOP": "HOP(TABLE t, DESCRIPTOR(ts), slide, size)",
    "SESSION": "SESSION(TABLE t [PARTITION BY k], DESCRIPTOR(ts), gap)",
    "CUMULATE": "CUMULATE(TABLE t, DESCRIPTOR(ts), step, size)",
}
#: The number of arguments of Flink's group windows.
_GROUP_WINDOW_ARGUMENTS = {"TUMBLE": 2, "HOP": 3, "SESSION": 2}
_GROUP_WINDOW_FORMS = {
    "TUMBLE": "TUMBLE(ts, size)",
    "HOP": "HOP(ts, slide, size)",
    "SESSION": "SESSION(ts, gap)",
}
_TVF_WINDOW_COLUMNS = frozenset({"window_start", "window_end"})
_TVF_HELP = (
    "a window table function is Flink's window aggregation here: SELECT window_start, "
    "window_end, k, count(*) FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' "
    "MINUTE)) GROUP BY window_start, window_end, k"
)

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

    def report(self, reporter: Reporter) -> None:
        reporter.error(
            self.code,
            self.message,
            self.span,
            help=self.help or "write the query as a pipe query (FROM x |> ...)",
        )


def lower_sql_query(
    query: ast.SqlQuery, reporter: Reporter, batch: bool = False
) -> ast.PipeQuery | None:
    """``query`` as pipe steps; ``batch``: in batch mode, where Flink runs LEAD."""
    try:
        return _Lowering(query, batch).lower()
    except _Unsupported as problem:
        problem.report(reporter)
        return None


def lower_extend_over(
    extend: ast.Extend, reporter: Reporter, batch: bool = False
) -> ast.Over | None:
    """A pipe EXTEND of OVER calls (``|> EXTEND AVG(x) OVER (...) AS a, ...``) as the OVER
    step of the SQL form ``SELECT *, AVG(x) OVER (...) AS a, ... FROM s``, checked by the
    SQL form's checks at each call's place in the EXTEND; None when refused (reported).
    Each item is one OVER call with its name (docs/language.md, "OVER windows")."""
    try:
        return _ExtendLowering(extend, batch).over()
    except _Unsupported as problem:
        problem.report(reporter)
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


def lower_window_top(
    query: ast.SqlQuery, top: ast.Top, outer_star: bool, reporter: Reporter
) -> ast.PipeQuery | None:
    """Flink's window Top-N over a window table function (``query``: the ranked rows,
    ``top``: their ROW_NUMBER() as TOP; ``outer_star``: the query around selects ``*``),
    as a pipe query; None when refused (reported)."""
    assert isinstance(query.tree, exp.Select)
    try:
        return _Lowering(query).window_top(query.tree, top, outer_star)
    except _Unsupported as problem:
        problem.report(reporter)
        return None


def is_window_tvf_select(tree: exp.Expr) -> bool:
    """A SELECT reading a window table function (``FROM TABLE(TUMBLE(...))``)."""
    from_ = tree.args.get("from_") if isinstance(tree, exp.Select) else None
    return from_ is not None and isinstance(from_.this, exp.TableFromRows)


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


def _tokenize(text: str, name: str) -> list[Any]:
    """sqlglot's tokens of ``text`` in dialect ``name`` (the query's), by a tokenizer of
    this call's own (a tokenizer keeps the state of the text it works on, so threads must
    not share one)."""
    dialect = Dialect.get_or_raise(name)
    return list(dialect.tokenizer_class(dialect=dialect).tokenize(text))


def _is_window_call(node: exp.Expr | None) -> bool:
    return isinstance(node, exp.Anonymous) and node.name.lower() in _WINDOW_FUNCTIONS


class _Lowering:
    def __init__(self, query: ast.SqlQuery, batch: bool = False) -> None:
        self.query = query
        self.batch = batch
        self.span = query.span
        self.origin = query.text_origin
        self.flink = query.dialect == FLINK
        self._tokens: list[Any] | None = None

    # ------------------------------------------------------------ positions

    def tokens(self) -> list[Any]:
        """sqlglot's tokens of the query text (for keywords, which carry no positions)."""
        if self._tokens is None:
            try:
                self._tokens = _tokenize(self.query.text, self.query.dialect)
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
            span = node_span(ast.SqlExpr(text=self.query.text, tree=node, span=self.origin), node)
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
        if isinstance(table, exp.TableFromRows):
            raise _Unsupported(
                "a window table function joined (Flink's window join) has no pipe form",
                self.span_of(table),
                help=_TVF_HELP,
                code=Code.E0604,
            )
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
                help = _ORDER_BY_HELP if key == "order" and self.flink else None
                raise _Unsupported(what, self.span_of(node, keyword), help=help)
        self.flink_windows(tree)
        self.window_time_places(tree)
        over = self.over_windows(tree)
        for node in tree.walk():
            if isinstance(node, exp.Subquery | exp.Select) and node is not tree:
                raise _Unsupported(
                    "a subquery", self.span_of(node, TokenType.SELECT), help="define it as a view"
                )
        from_ = tree.args.get("from_") or tree.args.get("from")
        if from_ is None:
            raise _Unsupported("SELECT without FROM", self.span)
        tvf_window: ast.Window | None = None
        if isinstance(from_.this, exp.TableFromRows):
            source, tvf_window, partition = self.window_tvf(tree, from_.this)
            if tree.args.get("group") is None:
                kind = from_.this.this.name.upper()
                raise _Unsupported(
                    f"TABLE({kind}(...)) without GROUP BY window_start, window_end "
                    "(Flink's window deduplication or join) has no pipe form here",
                    self.span_of(from_.this),
                    help=_TVF_HELP + "; its Top-N is ROW_NUMBER() OVER (PARTITION BY "
                    "window_start, window_end ORDER BY x DESC) <= n in a subquery",
                    code=Code.E0604,
                )
        else:
            source = self.relation(from_.this)
        steps: list[ast.Step] = []
        fields = self.step_fields()
        for join in tree.args.get("joins") or []:
            if isinstance(join.this, exp.Unnest):
                steps.append(self.unnest(tree, join, join.this, source))
                continue
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
        drop: ast.Drop | None = None
        if over is not None:
            # SELECT *, AGG(x) OVER (...) AS a, ...: the OVER step's own output, its input's
            # columns then the calls (a pipe EXTEND of the calls has the same plans)
            whole = isinstance(items[0], exp.Star) and all(
                isinstance(i, exp.Alias) and isinstance(i.this, exp.Window) for i in items[1:]
            )
            # beside other items, a `*` would read the calls' columns too: they are hidden
            # (``w0$o0``, ...) and dropped after the SELECT
            hidden = not whole and any(isinstance(i, exp.Star) for i in items)
            items = self.over_step(tree, items, over, steps, hidden)
            if whole:
                items = items[:1]
            last = steps[-1]
            assert isinstance(last, ast.Over)
            if hidden:
                drop = ast.Drop(columns=tuple(i.alias for i in last.items if i.alias), **fields)
        has_aggregates = any(has_aggregate(item) for item in items)
        if tvf_window is not None:
            steps.extend(self.aggregate(tree, items, group, tvf_window, partition))
        elif group is not None or has_aggregates:
            steps.extend(self.aggregate(tree, items, group))
        elif any(_is_window_time(i.this if isinstance(i, exp.Alias) else i) for i in items):
            raise self.no_window_time(next(c for c in tree.walk() if _is_window_time(c)))
        elif not (len(items) == 1 and isinstance(items[0], exp.Star)):
            names = _calcite_names(items) if self.flink else [None] * len(items)
            selected = tuple(self.item(i, n) for i, n in zip(items, names, strict=True))
            steps.append(ast.Select(items=selected, **fields))
            if drop is not None:
                steps.append(drop)
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
        """Flink SQL's group windows and their TUMBLE_START-style properties: E0602 (in
        the Flink dialect, the checks of what cannot be lowered)."""
        if self.flink:
            self.flink_checks(tree)
            return
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

    # ------------------------------------------------------------ Flink's windows

    @staticmethod
    def group_window(tree: exp.Select) -> exp.Anonymous | None:
        """The query's Flink group window (its first, when flink_checks has not run)."""
        group = tree.args.get("group")
        for key in group.expressions if group is not None else []:
            if function_name(key) in FLINK_GROUP_WINDOWS:
                assert isinstance(key, exp.Anonymous)
                return key
        return None

    def flink_checks(self, tree: exp.Select) -> None:
        """What a Flink-dialect SELECT's windows must be for their lowering: one group
        window with its arguments (E0605), its properties in the SELECT list or HAVING with
        the window's own arguments (E0603), no ``*_ROWTIME``/``*_PROCTIME`` (E0602)."""
        group = tree.args.get("group")
        windows = [
            key
            for key in (group.expressions if group is not None else [])
            if function_name(key) in FLINK_GROUP_WINDOWS
        ]
        if len(windows) > 1:
            raise _Unsupported("grouping by two windows", self.span_of(windows[1]), code=Code.E0605)
        window = windows[0] if windows else None
        if window is not None:
            kind = window.name.upper()
            expected = _GROUP_WINDOW_ARGUMENTS[kind]
            if len(window.expressions) != expected:
                raise _Unsupported(
                    f"{kind} takes {expected} arguments, found {len(window.expressions)}",
                    self.span_of(window),
                    help=f"GROUP BY {_GROUP_WINDOW_FORMS[kind]}",
                    code=Code.E0605,
                )
            if not isinstance(window.expressions[0], exp.Column):
                raise _Unsupported(
                    f"the first argument of {kind} must be a time attribute column",
                    self.span_of(window.expressions[0]),
                    help="compute it as a column of a view (with its WATERMARK) first",
                    code=Code.E0605,
                )
        having = tree.args.get("having")
        listed = {id(n) for item in tree.expressions for n in item.walk()}
        selected = listed | ({id(n) for n in having.walk()} if having is not None else set())
        tvf = isinstance((tree.args.get("from_") or exp.From()).this, exp.TableFromRows)
        #: Where Flink's window time may stand: an item of its own, a TVF's GROUP BY key.
        items = {id(i.this if isinstance(i, exp.Alias) else i) for i in tree.expressions}
        keys = {id(k) for k in (group.expressions if group is not None else [])}
        for node in tree.walk():
            name = function_name(node)
            if name in FLINK_ROWTIME_PROPERTIES and id(node) in items:
                assert name is not None and isinstance(node, exp.Anonymous)
                self.check_property(node, name, window, selected=True)
            elif name in FLINK_ROWTIME_PROPERTIES and id(node) in listed:
                # inside an expression of the SELECT list: its value only
                assert name is not None and isinstance(node, exp.Anonymous)
                self.check_property(node, name, window, selected=True)
            elif name in FLINK_PROCTIME_PROPERTIES and id(node) in listed:
                # the time its row is written: current_timestamp() after the AGGREGATE
                assert name is not None and isinstance(node, exp.Anonymous)
                self.check_property(node, name, window, selected=True)
            elif name in FLINK_PROCTIME_PROPERTIES:
                assert name is not None
                raise _Unsupported(
                    f"{name}(...), the time a window's row is written, is known only in "
                    "the SELECT list",
                    self.span_of(node),
                    help="select it, and filter on it in a view over this query",
                    code=Code.E0602,
                )
            elif name in FLINK_TIME_PROPERTIES:
                assert name is not None
                raise _Unsupported(
                    f"{name}(...), Flink's window time attribute, has no column in flowc",
                    self.span_of(node),
                    help=flink_time_property_help(name),
                    code=Code.E0602,
                )
            if name in FLINK_WINDOW_PROPERTIES:
                assert name is not None and isinstance(node, exp.Anonymous)
                self.check_property(node, name, window, id(node) in selected)
            elif name in FLINK_GROUP_WINDOWS and node not in windows:
                if not isinstance(node.parent, exp.TableFromRows):
                    raise _Unsupported(
                        f"{name}(...) is Flink's group window: it is only a GROUP BY key",
                        self.span_of(node),
                        help=f"GROUP BY {_GROUP_WINDOW_FORMS[name]}, then select "
                        f"{name}_START(...) and {name}_END(...) with the same arguments",
                        code=Code.E0605,
                    )
            elif (
                tvf
                and isinstance(node, exp.Column)
                and not node.table
                and node.name == "window_time"
                and not ({id(node)} & (items | keys) and group is not None)
                and node.find_ancestor(exp.TableFromRows) is None  # DESCRIPTOR(window_time)
            ):
                raise _Unsupported(
                    "window_time, Flink's window time attribute, has no column in flowc",
                    self.span_of(node),
                    help=flink_time_property_help("TUMBLE_ROWTIME").replace(
                        "TUMBLE_END(...)", "window_end"
                    ),
                    code=Code.E0602,
                )

    def check_property(
        self, node: exp.Anonymous, name: str, window: exp.Anonymous | None, selected: bool
    ) -> None:
        """E0603 unless ``node`` (TUMBLE_START(...) and the like) is in the SELECT list or
        HAVING of a query grouped by the same window, with the same arguments."""
        kind = name.partition("_")[0]
        form = _GROUP_WINDOW_FORMS[kind]
        if window is None:
            raise _Unsupported(
                f"{name}(...) is a property of a group window, and the query has none",
                self.span_of(node),
                help=f"GROUP BY {form} (and the other keys), then select {name}(...) with "
                "the same arguments",
                code=Code.E0603,
            )
        grouped = window.sql("spark")
        if not selected:
            raise _Unsupported(
                f"{name}(...) is known once rows are grouped: only in the SELECT list or HAVING",
                self.span_of(node),
                help="filter the window's rows in a view over this query",
                code=Code.E0603,
            )
        if kind != window.name.upper() or _same_arguments(node) != _same_arguments(window):
            raise _Unsupported(
                f"{name}(...) does not repeat the GROUP BY window {grouped}",
                self.span_of(node),
                help=f"write {kind}_{name.partition('_')[2]}"
                f"({', '.join(a.sql('spark') for a in window.expressions)})"
                if kind == window.name.upper()
                else f"the window's properties are {window.name.upper()}_START(...) and "
                f"{window.name.upper()}_END(...)",
                code=Code.E0603,
            )

    @staticmethod
    def flink_properties(node: exp.Expr) -> exp.Expr:
        """``node`` with TUMBLE_START(...)-style calls the AGGREGATE's window_start and
        window_end (flink_checks has matched them with the group window), and a
        TUMBLE_ROWTIME(...) inside an expression its value, window_end - 1 ms."""

        def swap(part: exp.Expr) -> exp.Expr:
            name = function_name(part)
            if name in FLINK_PROCTIME_PROPERTIES:  # the time the row is written
                written = exp.CurrentTimestamp()
                written.meta[FLINK_PROCTIME_META] = name  # checked on Spark: E0617
                return written
            if name in FLINK_ROWTIME_PROPERTIES:  # in an expression: the value, end - 1 ms
                return exp.Sub(
                    this=exp.column("window_end"),
                    expression=exp.Interval(
                        this=exp.Literal.string("1"), unit=exp.var("MILLISECOND")
                    ),
                )
            if name in FLINK_WINDOW_PROPERTIES and name is not None:
                field = name.partition("_")[2].lower()
                return exp.column(f"window_{field}")
            return part

        return node.copy().transform(swap)

    def flink_group_window(self, window: exp.Anonymous) -> ast.Window:
        """Flink's ``GROUP BY TUMBLE(ts, size)`` (HOP(ts, slide, size), SESSION(ts, gap))
        as flowc's WINDOW step (HOP(ts, size, slide))."""
        kind = WindowKind(window.name.upper())
        args = [self.expr(a) for a in window.expressions]
        if kind is WindowKind.HOP:
            args = [args[0], args[2], args[1]]
        return ast.Window(kind=kind, args=tuple(args), **self.step_fields())

    def window_tvf(
        self, tree: exp.Select, tvf: exp.TableFromRows
    ) -> tuple[ast.Relation, ast.Window, tuple[str, ...]]:
        """``TABLE(TUMBLE(TABLE t, DESCRIPTOR(ts), size))`` (HOP: slide, size; SESSION:
        gap): the relation it reads, the WINDOW step it is and SESSION's partition keys
        (``TABLE t PARTITION BY k``). Its alias names no other relation, so columns
        qualified by it are the relation's own."""
        call = tvf.this
        assert isinstance(call, exp.Anonymous)
        kind = call.name.upper()
        if kind not in _TVF_PARAMETERS:
            raise _Unsupported(
                f"{kind} windows have no flowc window",
                self.span_of(call),
                help="use TUMBLE, HOP or SESSION windows",
                code=Code.E0604,
            )
        if tree.args.get("joins"):
            raise _Unsupported(
                "a window table function joined (Flink's window join) has no pipe form",
                self.span_of(tree.args["joins"][0]),
                help=_TVF_HELP,
                code=Code.E0604,
            )
        parameters = _TVF_PARAMETERS[kind]
        given: dict[str, exp.Expr] = {}
        for index, arg in enumerate(call.expressions):
            if isinstance(arg, exp.Kwarg):
                name, value = arg.this.name.upper(), arg.expression
            elif index < len(parameters) and not given.keys() - set(parameters[:index]):
                name, value = parameters[index], arg
            else:
                name, value = "", arg
            if name not in parameters or name in given:
                raise _Unsupported(
                    f"{kind} takes {', '.join(parameters)}"
                    + (f"; '{name}' is not one of them" if name and name not in parameters else "")
                    + (f"; {name} is given twice" if name in given else ""),
                    self.span_of(arg),
                    help=("a window's offset has no flowc form; " if name in ("", "OFFSET") else "")
                    + f"write {_TVF_FORMS[kind]}",
                    code=Code.E0605,
                )
            given[name] = value
        missing = [p for p in parameters if p not in given]
        if missing:
            raise _Unsupported(
                f"{kind}(...) needs {', '.join(missing)}",
                self.span_of(call),
                help=f"write {_TVF_FORMS[kind]}",
                code=Code.E0605,
            )
        data, descriptor = given["DATA"], given["TIMECOL"]
        if not isinstance(data, exp.Table):
            raise _Unsupported(
                f"the data of {kind} is TABLE name",
                self.span_of(data),
                help="name the source or view: TABLE t",
                code=Code.E0605,
            )
        partition = self.tvf_partition(kind, data)
        if not (
            function_name(descriptor) == "DESCRIPTOR"
            and isinstance(descriptor, exp.Anonymous)
            and len(descriptor.expressions) == 1
            and isinstance(descriptor.expressions[0], exp.Column)
        ):
            raise _Unsupported(
                f"the time column of {kind} is DESCRIPTOR(column)",
                self.span_of(descriptor),
                help="name the time attribute column: DESCRIPTOR(ts)",
                code=Code.E0605,
            )
        alias = tvf.alias
        if alias:
            for column in tree.find_all(exp.Column):
                if column.table == alias and not column.args.get("db"):
                    column.set("table", None)
        where = tree.args.get("where")
        for column in where.find_all(exp.Column) if where is not None else []:
            if column.name in _TVF_WINDOW_COLUMNS:
                raise _Unsupported(
                    f"WHERE on {column.name} of a window table function",
                    self.span_of(column),
                    help="filter on window_start or window_end in HAVING, or in a view over "
                    "the aggregation",
                    code=Code.E0604,
                )
        time = self.expr(descriptor.expressions[0])
        sizes = [self.expr(given["GAP" if kind == "SESSION" else "SIZE"])]
        if kind == "HOP":
            sizes.append(self.expr(given["SLIDE"]))
        if kind == "CUMULATE":
            sizes.append(self.expr(given["STEP"]))
            self.cumulate_sizes(call, given["SIZE"], given["STEP"])
        window = ast.Window(kind=WindowKind(kind), args=(time, *sizes), **self.step_fields())
        where_data = self.span_of(data)
        relation = self.relation(data)
        named = replace(relation, name=replace(relation.name, span=where_data), span=where_data)
        return named, window, partition

    def cumulate_sizes(self, call: exp.Expr, size: exp.Expr, step: exp.Expr) -> None:
        """CUMULATE's size a whole multiple of its step, as Flink requires, said at the
        call (the WINDOW step it becomes has the query's place)."""
        millis = {}
        for name, node in (("SIZE", size), ("STEP", step)):
            value = interval_millis(self.expr(node))
            if not value:
                raise _Unsupported(
                    f"CUMULATE's {name} is not a positive whole number of milliseconds, "
                    "seconds, minutes, hours or days",
                    self.span_of(call),
                    help="write INTERVAL '1' HOUR, INTERVAL '10' MINUTES, ...",
                    code=Code.E0737,
                )
            millis[name] = value
        if millis["SIZE"] % millis["STEP"]:
            raise _Unsupported(
                f"CUMULATE's size {size.sql('spark')} is not a whole multiple of its step "
                f"{step.sql('spark')}",
                self.span_of(call),
                help="for example CUMULATE(TABLE t, DESCRIPTOR(ts), INTERVAL '1' HOUR, "
                "INTERVAL '1' DAY): a window every hour, each from the start of the day",
                code=Code.E0737,
            )

    def tvf_partition(self, kind: str, data: exp.Table) -> tuple[str, ...]:
        """The columns of ``TABLE t PARTITION BY k`` (``(k, j)``): only SESSION's, as Flink."""
        partition = data.args.get("partition")
        if not isinstance(partition, exp.Partition):
            return ()
        if kind != "SESSION":
            raise _Unsupported(
                f"{kind} takes no PARTITION BY (only SESSION's data is partitioned)",
                self.span_of(partition),
                help="group by the keys instead: GROUP BY window_start, window_end, k",
                code=Code.E0605,
            )
        names: list[str] = []
        for key in partition.expressions:
            if not isinstance(key, exp.Column) or key.table or key.name in names:
                raise _Unsupported(
                    "SESSION's PARTITION BY names columns of its table, each once",
                    self.span_of(key),
                    help="write PARTITION BY k, or PARTITION BY (k, j)",
                    code=Code.E0605,
                )
            names.append(key.name)
        return tuple(names)

    def unnest(
        self, tree: exp.Select, join: exp.Join, unnest: exp.Unnest, source: ast.Relation
    ) -> ast.Explode:
        """``CROSS JOIN UNNEST(arr) AS t (x)`` (or ``, UNNEST(...)``): a row per element of
        the array, none for an empty or NULL one, as Flink's (and Spark's ``explode``):
        ``|> EXPLODE arr AS x``. Columns qualified by ``t`` or by the table read are the
        row's own. What EXPLODE cannot give is refused: LEFT JOIN UNNEST (Flink keeps a
        row with NULL for an empty array), WITH ORDINALITY, several arrays or columns."""
        alias = unnest.args.get("alias")
        columns = alias.columns if isinstance(alias, exp.TableAlias) else []
        if (join.side or "").upper() or join.args.get("on") is not None:
            raise _Unsupported(
                "a JOIN UNNEST other than CROSS JOIN UNNEST (LEFT JOIN UNNEST keeps rows "
                "whose array is empty, which EXPLODE drops)",
                self.span_of(unnest),
                help="write CROSS JOIN UNNEST(arr) AS t (x): a row per element",
            )
        if unnest.args.get("offset") or len(unnest.expressions) != 1 or len(columns) != 1:
            raise _Unsupported(
                "UNNEST of other than one array named by one column (WITH ORDINALITY, "
                "several arrays, an array of rows expanded into its fields)",
                self.span_of(unnest),
                help="write CROSS JOIN UNNEST(arr) AS t (x), one array at a time",
            )
        if len(tree.args.get("joins") or []) > 1:
            raise _Unsupported(
                "UNNEST beside another JOIN",
                self.span_of(unnest),
                help="UNNEST in a view of its own, then JOIN the view",
            )
        assert isinstance(alias, exp.TableAlias)  # one column named: an alias holds it
        element = columns[0].name
        own = {alias.name, source.name.value}
        for column in tree.find_all(exp.Column):
            if column.table in own and not column.args.get("db"):
                column.set("table", None)
        return ast.Explode(
            expr=self.expr(unnest.expressions[0]),
            alias=self.name(element),
            **self.step_fields(),
        )

    def window_top(self, rows: exp.Select, top: ast.Top, outer_star: bool) -> ast.PipeQuery:
        """Flink's window Top-N straight over a window table function: ``rows`` (the
        subquery without its ROW_NUMBER) selects from ``TABLE(TUMBLE(...))`` and ``top``
        ranks PER window_start, window_end[, k]: ``FROM t |> WHERE ... |> WINDOW ... |>
        TOP n BY ... PER k AS rn`` (Flink's WindowRank), then the columns ``rows`` names."""
        for key, (what, keyword) in _UNSUPPORTED.items():
            clause = rows.args.get(key)
            if clause:
                node = clause[0] if isinstance(clause, list) else clause
                raise _Unsupported(what, self.span_of(node, keyword))
        self.flink_windows(rows)
        from_ = rows.args["from_"]
        tvf = from_.this
        assert isinstance(tvf, exp.TableFromRows)
        source, window, _ = self.window_tvf(rows, tvf)
        if window.kind is WindowKind.SESSION:
            raise _Unsupported(
                "a window Top-N over a SESSION table function has no flowc form",
                top.span,
                help="rank the rows of a session aggregation in a view over it",
                code=Code.E0734,
            )
        if window.kind is WindowKind.CUMULATE:
            raise _Unsupported(
                "TOP over a CUMULATE window has no Spark form in flowc",
                top.span,
                help="rank the rows of a cumulating aggregation in a view over it",
                code=Code.E0736,
            )
        if rows.args.get("group") is not None or any(has_aggregate(i) for i in rows.expressions):
            raise _Unsupported(
                "ROW_NUMBER() over an aggregation in the same SELECT",
                self.span_of(rows.args.get("group"), TokenType.GROUP_BY),
                help="aggregate in a subquery, and rank its rows in the query around it",
                code=Code.E0604,
            )
        bounds = {
            p.tree.name for p in top.per if isinstance(p.tree, exp.Column) and not p.tree.table
        } & _TVF_WINDOW_COLUMNS
        if bounds != _TVF_WINDOW_COLUMNS:
            raise _Unsupported(
                "a Top-N over a window table function is Flink's window Top-N only "
                "PARTITION BY window_start, window_end (and other columns)",
                top.span,
                help="add window_start, window_end to PARTITION BY",
                code=Code.E0604,
            )
        per = tuple(
            p
            for p in top.per
            if not (isinstance(p.tree, exp.Column) and p.tree.name in _TVF_WINDOW_COLUMNS)
        )
        steps: list[ast.Step] = []
        where = rows.args.get("where")
        if where is not None:
            steps.append(ast.Where(condition=self.expr(where.this), **self.step_fields()))
        steps += [window, replace(top, per=per)]
        items = list(rows.expressions)
        if len(items) == 1 and isinstance(items[0], exp.Star):
            if outer_star:
                raise _Unsupported(
                    "SELECT * of a window table function has window_time, Flink's window "
                    "time attribute, which has no column in flowc",
                    self.span_of(tvf),
                    help="name the columns the query selects",
                    code=Code.E0602,
                )
        else:
            for item in items:
                inner = item.this if isinstance(item, exp.Alias) else item
                if not isinstance(inner, exp.Column):
                    raise _Unsupported(
                        f"'{inner.sql('spark')}' beside ROW_NUMBER() over a window table "
                        "function (its Top-N selects columns)",
                        self.span_of(inner),
                        help="compute it in the query around the Top-N",
                        code=Code.E0604,
                    )
            rank = (
                [
                    ast.SelectItem(
                        expr=self.expr(exp.column(top.rank.value)), alias=None, span=self.span
                    )
                ]
                if top.rank is not None
                else []
            )
            steps.append(
                ast.Select(items=(*(self.item(i) for i in items), *rank), **self.step_fields())
            )
        return ast.PipeQuery(source=source, steps=tuple(steps), span=self.span)

    def over_windows(self, tree: exp.Select) -> exp.Window | None:
        """The SELECT's one OVER window, when flowc runs it (an OVER step: docs/language.md,
        "OVER windows"); any other OVER call refused at its place: first what Flink 2.3
        itself refuses on a stream, then E0753 for a form flowc does not run yet."""
        windows = list(tree.find_all(exp.Window))
        if not windows:
            return None
        named = {
            w.alias.lower(): w for w in tree.args.get("windows") or [] if isinstance(w, exp.Window)
        }
        first: tuple[str, exp.Window] | None = None
        for window in windows:
            spec = named.get(window.alias.lower(), window) if window.alias else window
            if isinstance(window.this, exp.Lead) and not self.batch:
                raise _Unsupported(
                    "LEAD needs rows after the current one, which Flink does not wait for on a "
                    "stream ('LEAD Function is not supported in stream mode')",
                    self.span_of(window),
                    help="LAG over the next rows' order gives the earlier row instead",
                    code=Code.E0752,
                )
            order = spec.args.get("order")
            keys = order.expressions if isinstance(order, exp.Order) else []
            if len(keys) != 1 or not isinstance(keys[0].this, exp.Column):
                raise _Unsupported(
                    "an OVER window is ordered by exactly one time column on a stream "
                    "(Flink: 'The window can only be ordered by a single time column')",
                    self.span_of(order if isinstance(order, exp.Order) else window),
                    help="ORDER BY the stream's event-time column (the one with the WATERMARK)",
                    code=Code.E0751,
                )
            if keys[0].args.get("desc"):
                raise _Unsupported(
                    "an OVER window is ordered ascending on a stream (Flink: 'The window can "
                    "only be ordered in ASCENDING mode')",
                    self.span_of(keys[0]),
                    help=f"ORDER BY {keys[0].this.sql()} (ascending): rows come in time order",
                    code=Code.E0750,
                )
            frame = spec.args.get("spec")
            if isinstance(frame, exp.WindowSpec) and "FOLLOWING" in (
                str(frame.args.get("start_side") or "").upper(),
                str(frame.args.get("end_side") or "").upper(),
            ):
                raise _Unsupported(
                    "an OVER frame ends at the current row on a stream (Flink: 'OVER "
                    "... FOLLOWING windows are not supported yet')",
                    self.span_of(frame),
                    help="end the frame AND CURRENT ROW",
                    code=Code.E0752,
                )
            if isinstance(window.this, exp.Lag | exp.Lead) and isinstance(frame, exp.WindowSpec):
                what = window.this.sql_name().upper()
                rows = "before the current one's time" if what == "LAG" else "after the current one"
                raise _Unsupported(
                    f"{what} takes no frame: it reads the rows {rows} (Flink: 'ROW/RANGE not "
                    "allowed with RANK, DENSE_RANK or ROW_NUMBER functions')",
                    self.span_of(frame),
                    help=f"leave the ROWS/RANGE clause out: {what}(x, n) OVER (PARTITION BY k "
                    "ORDER BY ts)",
                    code=Code.E0755,
                )
            shape = _window_shape(spec)
            if first is None:
                first = (shape, window)
            elif shape != first[0]:
                raise _Unsupported(
                    "every OVER call of one SELECT or EXTEND is over the same window on a stream "
                    f"(Flink plans one), and this one's differs from '{first[0]}'",
                    self.span_of(window),
                    help="compute each window in a view of its own and join them, or use "
                    "one window for every call",
                    code=Code.E0754,
                )
        assert first is not None
        frame = _over_frame(first[1])
        unbounded = frame is not None and isinstance(frame[1], exp.Var)
        if (
            tree.args.get("group") is None
            and not tree.args.get("distinct")
            and all(
                _over_call(w) and isinstance(w.this, exp.Lag | exp.Lead) == unbounded
                for w in windows
            )
            and frame is not None
            and (frame[0] or unbounded or interval_millis(self.expr(frame[1])) is not None)
        ):
            return first[1]
        raise _Unsupported(
            f"OVER ({first[0]}) is Flink's OverAggregate, which flowc does not run on Spark yet",
            self.span_of(first[1]),
            help="Flink runs it ordered by a time attribute only; aggregate per key over a "
            "time WINDOW instead (docs/language.md, "
            '"OVER windows")',
            code=Code.E0753,
        )

    def over_step(
        self,
        tree: exp.Select,
        items: list[exp.Expr],
        window: exp.Window,
        steps: list[ast.Step],
        hide: bool = False,
    ) -> list[exp.Expr]:
        """The OVER step computing every OVER call of the SELECT (one window: its calls are
        named as the items they are, else, or all when ``hide``, ``w0$o0``, ``w0$o1``, ...
        as Flink names them), appended to ``steps``; the items return with each call read
        from its column."""
        frame = _over_frame(window)
        assert frame is not None
        rows, preceding = frame
        order = window.args["order"].expressions[0].this
        # Our own copies: each call's name is keyed by its node, and the items are read
        # back from the same nodes (a copy made later would have other ones).
        items = [item.copy() for item in items]
        taken = {(i.alias_or_name or "").lower() for i in items}
        names: dict[int, str] = {}
        hidden = 0
        for item in items:
            body = item.this if isinstance(item, exp.Alias) else item
            if not hide and isinstance(item, exp.Alias) and isinstance(body, exp.Window):
                names[id(body)] = item.alias
                continue
            for call in body.find_all(exp.Window):
                name = f"w0$o{hidden}"
                hidden += 1
                while name.lower() in taken:
                    name += "_"
                names[id(call)] = name
        calls: list[ast.SelectItem] = []
        for item in items:
            for call in item.find_all(exp.Window):
                calls.append(
                    ast.SelectItem(
                        expr=self.expr(call.this),
                        alias=self.name(names[id(call)], self.span_of(call)),
                        span=self.span_of(call),
                    )
                )
        span = self.span_of(window)
        steps.append(
            ast.Over(
                partition=tuple(
                    self.name(p.name, self.span_of(p))
                    for p in window.args.get("partition_by") or []
                ),
                order=self.name(order.name, self.span_of(order)),
                rows=rows,
                preceding=self.expr(window, preceding)
                if isinstance(preceding, exp.Var)
                else self.expr(preceding),
                items=tuple(calls),
                keyword_span=span,
                hints=(),
                hints_span=None,
                span=span,
            )
        )

        def read(node: exp.Expr) -> exp.Expr:
            if isinstance(node, exp.Window):
                return exp.column(exp.to_identifier(names[id(node)]))
            return node

        lowered: list[exp.Expr] = []
        for item in items:
            if not hide and isinstance(item, exp.Alias) and isinstance(item.this, exp.Window):
                lowered.append(exp.column(exp.to_identifier(item.alias)))
                continue
            lowered.append(item.transform(read, copy=False) if item.find(exp.Window) else item)
        return lowered

    def item(self, node: exp.Expr, name: str | None = None) -> ast.SelectItem:
        """``node`` as a SELECT item; ``name``, where given, names it (Flink's name for an
        item Calcite renames)."""
        if isinstance(node, exp.Alias):
            node, name = node.this, name or node.alias
        return ast.SelectItem(
            expr=self.expr(node), alias=self.name(name) if name else None, span=self.span
        )

    # ------------------------------------------------------------ GROUP BY

    def aggregate(
        self,
        tree: exp.Select,
        items: list[exp.Expr],
        group: exp.Group | None,
        tvf_window: ast.Window | None = None,
        partition: tuple[str, ...] = (),
    ) -> list[ast.Step]:
        """GROUP BY as KEY BY, WINDOW, AGGREGATE, WHERE (HAVING), SELECT. ``tvf_window``:
        the WINDOW of a window table function in FROM, grouped by its window_start and
        window_end; ``partition``: a SESSION table function's PARTITION BY columns."""
        fields = self.step_fields()
        aliases = {item.alias: item.this for item in items if isinstance(item, exp.Alias)}
        keys: list[exp.Expr] = []
        computed: list[tuple[exp.Expr, str]] = []
        window: exp.Anonymous | None = None
        flink_window = self.group_window(tree) if self.flink else None
        window_step = self.flink_group_window(flink_window) if flink_window else tvf_window
        bounds: set[str] = set()
        for key in group.expressions if group is not None else []:
            if key is flink_window:
                continue
            if (
                tvf_window is not None
                and isinstance(key, exp.Column)
                and not key.table
                and key.name in _TVF_WINDOW_COLUMNS
            ):
                bounds.add(key.name)
                continue
            if (
                tvf_window is not None
                and isinstance(key, exp.Column)
                and not key.table
                and key.name == "window_time"
            ):
                continue  # the window's time (Flink's), one value per window: not a key
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
        if tvf_window is not None and bounds != _TVF_WINDOW_COLUMNS:
            raise _Unsupported(
                "a window table function grouped without "
                + " and ".join(sorted(_TVF_WINDOW_COLUMNS - bounds))
                + " is not a window aggregation",
                self.span_of(group, TokenType.GROUP_BY) if group is not None else self.span,
                help=_TVF_HELP,
                code=Code.E0604,
            )
        if window is not None and window_step is not None:
            raise _Unsupported("grouping by two windows", self.span_of(window))
        if tvf_window is not None and tvf_window.kind is WindowKind.SESSION:
            self.session_keys(group, keys, computed, partition)
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
        if window_step is not None:
            steps.append(window_step)
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
        qualified = {(k.table, k.name) for k in keys if isinstance(k, exp.Column) and k.table}
        names -= key_names
        windowed = window is not None or window_step is not None
        grouped = key_names | (set(_TVF_WINDOW_COLUMNS) if windowed else set())
        aggregates: list[ast.SelectItem] = []
        projection: list[ast.SelectItem] = []
        time_item: ast.SelectItem | None = None
        for index, item in enumerate(items):
            inner = item.this if isinstance(item, exp.Alias) else item
            alias = item.alias if isinstance(item, exp.Alias) else None
            flink_time = self.flink and window_step is not None and _is_flink_window_time(inner)
            if flink_time or _is_window_time(inner):
                if not flink_time:
                    assert isinstance(inner, exp.Anonymous)
                    if window is None or not self.names_window(inner, names, window_sql):
                        raise self.no_window_time(inner, window)
                name = alias or "window_time"
                if time_item is None:  # the AGGREGATE outputs it once, under its first name
                    # ... but not as window_start or window_end, the window's own columns
                    # (Flink's cascade writes TUMBLE_ROWTIME(...) AS window_end): the
                    # SELECT after it renames it, as a rename keeps the watermark.
                    kept = alias if alias and alias.lower() not in _WINDOW_BOUNDS else None
                    time_item = ast.SelectItem(
                        expr=self.expr(inner, exp.column("window_time")),
                        alias=self.name(kept) if kept else None,
                        span=self.span,
                    )
                    first = kept or "window_time"
                    projection.append(
                        self.item(
                            exp.column(name)
                            if first == name
                            else exp.alias_(exp.column(first), name, quoted=False)
                        )
                    )
                else:
                    first = time_item.alias.value if time_item.alias else "window_time"
                    projection.append(self.item(exp.alias_(exp.column(first), name)))
            elif has_aggregate(inner):
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
                projection.append(
                    ast.SelectItem(
                        expr=self.expr(inner, _unqualify_keys(inner, qualified)),
                        alias=self.name(alias) if alias else None,
                        span=self.span,
                    )
                )
            else:
                rewritten = _unqualify_keys(self.window_refs(inner, names, window_sql), qualified)
                if flink_window is not None:
                    rewritten = self.flink_properties(rewritten)
                used = {c.name for c in rewritten.find_all(exp.Column)}
                if isinstance(rewritten, exp.Star) or not used <= grouped:
                    raise _Unsupported(
                        f"'{inner.sql('spark')}' (neither grouped nor aggregated)",
                        self.span_of(inner),
                        help=self.ungrouped_help(inner, windowed),
                    )
                output = alias or _spark_name(inner, names)
                if output is None and function_name(inner) in FLINK_PROCTIME_PROPERTIES:
                    output = "window_proctime"
                elif output is None and function_name(inner) in FLINK_WINDOW_PROPERTIES:
                    assert isinstance(rewritten, exp.Column)
                    output = rewritten.name  # TUMBLE_START(...) unnamed: window_start
                projection.append(
                    ast.SelectItem(
                        expr=self.expr(inner, rewritten),
                        alias=self.name(output) if output else None,
                        span=self.span,
                    )
                )
        if not aggregates and (window_step is not None or window is not None):
            # A window's distinct groups (Nexmark q8): Flink's window aggregate with no
            # aggregate calls emits each group once per window, as one with a count left
            # out of the SELECT does (the count keeps the group in Spark's state).
            aggregates.append(
                ast.SelectItem(
                    expr=self.expr(exp.Count(this=exp.Star())),
                    alias=self.name("flowc_rows"),
                    span=self.span,
                )
            )
        if not aggregates:
            raise _Unsupported(
                "GROUP BY without aggregates",
                self.span_of(group, TokenType.GROUP_BY) if group is not None else self.span,
                help="use DISTINCT",
            )
        if time_item is not None:
            aggregates.append(time_item)
        steps.append(ast.Aggregate(items=tuple(aggregates), **fields))
        having = tree.args.get("having")
        if having is not None:
            condition = _unqualify_keys(self.window_refs(having.this, names, window_sql), qualified)
            if flink_window is not None:
                condition = self.flink_properties(condition)
            for agg in aggregates:
                for node in [n for n in condition.walk() if is_aggregate(n)]:
                    if node.sql("spark") == agg.expr.tree.sql("spark") and agg.alias is not None:
                        node.replace(exp.column(agg.alias.value))
            steps.append(ast.Where(condition=self.expr(having.this, condition), **fields))
        steps.append(ast.Select(items=tuple(projection), **fields))
        return steps

    def window_time_places(self, tree: exp.Select) -> None:
        """Spark's ``window_time(w)`` is the AGGREGATE's column ``window_time`` (Flink's):
        an item of its own of the SELECT grouped by ``w``; E0732 inside an expression,
        E0730 in another clause (before the grouping, or after it in HAVING)."""
        for node in tree.walk():
            if not _is_window_time(node):
                continue
            parent = node.parent
            if parent is tree or (isinstance(parent, exp.Alias) and parent.parent is tree):
                continue
            item = node
            while item.parent is not None and item.parent is not tree:
                item = item.parent
            if item.arg_key == "expressions":
                raise _Unsupported(
                    "window_time(...) inside an expression",
                    self.span_of(node),
                    help="select it as an item of its own (window_time(window) AS t), then "
                    "compute with t in a view that reads this one",
                    code=Code.E0732,
                )
            clause = _CLAUSES.get(str(item.arg_key), str(item.arg_key).upper())
            raise _Unsupported(
                f"window_time(...) in {clause}: it is a column of a grouped window's output",
                self.span_of(node),
                help="select window_time(window) AS t as an item of a SELECT that groups by "
                "window(ts, ...), and use t in a view that reads it",
                code=Code.E0730,
            )

    def no_window_time(self, node: exp.Expr, window: exp.Anonymous | None = None) -> _Unsupported:
        """E0730 for ``window_time(x)`` as an item where ``x`` is no grouped window."""
        if window is None:
            what = "window_time(...) is the time of a grouped window, and this SELECT has none"
        else:
            written = ", ".join(a.sql("spark") for a in node.expressions)
            grouped = ", ".join(a.sql("spark") for a in window.expressions)
            what = (
                f"window_time({written}) is not the time of this SELECT's window "
                f"{window.name.lower()}({grouped})"
            )
        return _Unsupported(
            what,
            self.span_of(node),
            help="GROUP BY window(ts, '1 minute') and select window_time(window) AS t",
            code=Code.E0730,
        )

    @staticmethod
    def names_window(call: exp.Anonymous, names: set[str], window_sql: str | None) -> bool:
        """Whether ``window_time(...)``'s one argument is the grouped window: its name
        (``window``, an alias of it) or the ``window(...)`` call itself."""
        if len(call.expressions) != 1:
            return False
        (arg,) = call.expressions
        if isinstance(arg, exp.Column) and not arg.table:
            return arg.name in names or arg.name.lower() in names
        return _is_window_call(arg) and arg.sql("spark") == window_sql

    def session_keys(
        self,
        group: exp.Group | None,
        keys: list[exp.Expr],
        computed: list[tuple[exp.Expr, str]],
        partition: tuple[str, ...],
    ) -> None:
        """A SESSION table function is Flink's session window aggregation only grouped by
        exactly its PARTITION BY columns (sessions per key): grouped otherwise, Flink
        computes sessions over the partitions and then an ordinary GROUP BY of their rows,
        which flowc's WINDOW SESSION does not mean."""
        names = {k.name for k in keys if isinstance(k, exp.Column)}
        if computed or names != set(partition):
            given = ", ".join(partition)
            raise _Unsupported(
                "a SESSION table function grouped by other columns than its PARTITION BY"
                + (f" ({given})" if given else "")
                + " is not a session window aggregation",
                self.span_of(group, TokenType.GROUP_BY) if group is not None else self.span,
                help="partition the sessions by the grouped columns: SESSION(TABLE t PARTITION "
                "BY k, DESCRIPTOR(ts), gap) ... GROUP BY window_start, window_end, k",
                code=Code.E0735,
            )

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


#: The aggregates an OVER step computes (docs/language.md, "OVER windows").
OVER_AGGREGATES = (exp.Count, exp.Sum, exp.Min, exp.Max, exp.Avg)


def _over_call(window: exp.Window) -> bool:
    """Whether an OVER call is one the OVER step computes: COUNT(*), or COUNT, SUM, MIN,
    MAX, AVG of a column, not DISTINCT, not FILTERed; LAG of a column, its offset a
    positive whole number and its default a literal."""
    call = window.this
    if isinstance(call, exp.Lag | exp.Lead):
        offset, default = call.args.get("offset"), call.args.get("default")
        literal = default.this if isinstance(default, exp.Neg) else default
        return (
            isinstance(call.this, exp.Column)
            and (
                offset is None
                or (
                    isinstance(offset, exp.Literal)
                    and offset.this.isdigit()
                    and int(offset.this) > 0
                )
            )
            and (default is None or isinstance(literal, (exp.Literal, exp.Null)))
        )
    if not isinstance(call, OVER_AGGREGATES):
        return False
    arg = call.this
    return isinstance(arg, exp.Column) or (
        isinstance(call, exp.Count) and isinstance(arg, exp.Star)
    )


def _over_frame(window: exp.Window) -> tuple[bool, exp.Expr] | None:
    """``(rows, preceding)`` of ``ROWS BETWEEN n PRECEDING AND CURRENT ROW`` or ``RANGE
    BETWEEN INTERVAL ... PRECEDING AND CURRENT ROW``; ``(False, UNBOUNDED)`` (a Var) of no
    frame or ``RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW``, LAG's frame in Flink (a
    named window, other frames: None)."""
    if window.alias:
        return None
    spec = window.args.get("spec")
    if spec is None:
        return (False, exp.var("UNBOUNDED"))
    if not isinstance(spec, exp.WindowSpec):
        return None
    start, end = spec.args.get("start"), spec.args.get("end")
    if (
        str(spec.args.get("kind") or "").upper() == "RANGE"
        and str(start or "").upper() == "UNBOUNDED"
        and str(end or "CURRENT ROW").upper() == "CURRENT ROW"
        and not spec.args.get("end_side")
    ):
        return (False, exp.var("UNBOUNDED"))
    if str(spec.args.get("start_side") or "").upper() != "PRECEDING":
        return None
    if str(end or "CURRENT ROW").upper() != "CURRENT ROW" or spec.args.get("end_side"):
        return None
    kind = str(spec.args.get("kind") or "").upper()
    if kind == "ROWS" and isinstance(start, exp.Literal) and not start.is_string:
        return (True, start) if start.this.isdigit() else None
    if kind == "RANGE" and isinstance(start, exp.Interval):
        return (False, start)
    return None


def _window_shape(window: exp.Window) -> str:
    """An OVER window's PARTITION BY, ORDER BY and frame as SQL text: two calls share a
    window when these are equal (LAG's frame is Flink's RANGE UNBOUNDED PRECEDING, the
    default; ROW_NUMBER's ROWS UNBOUNDED PRECEDING: Flink 2.3's plans)."""
    spec = window.args.get("spec")
    if isinstance(spec, exp.WindowSpec) and _over_frame(exp.Window(spec=spec)) == (
        False,
        exp.var("UNBOUNDED"),
    ):
        spec = None  # written out, the frame it has without one
    bare = exp.Window(
        this=exp.Null(),
        partition_by=[p.copy() for p in window.args.get("partition_by") or []],
        order=(window.args["order"].copy() if window.args.get("order") else None),
        spec=spec.copy() if spec else None,
    )
    text = bare.sql()
    return text[text.index("(", len("NULL OVER")) + 1 : -1].strip()


def _same_arguments(call: exp.Anonymous) -> list[exp.Expr]:
    """A window call's arguments as Flink compares them: an interval's unit in the
    singular (``INTERVAL '1' MINUTES`` is ``INTERVAL '1' MINUTE``), the rest as written."""
    out = []
    for arg in call.expressions:
        copy = arg.copy()
        for interval in copy.find_all(exp.Interval):
            unit = interval.args.get("unit")
            if isinstance(unit, exp.Var) and unit.name.upper().endswith("S"):
                interval.set("unit", exp.var(unit.name.upper()[:-1]))
            elif isinstance(unit, exp.Var):
                interval.set("unit", exp.var(unit.name.upper()))
        out.append(copy)
    return out


#: How a diagnostic names the clause a SELECT's part sits in, by its sqlglot key.
_CLAUSES = {"where": "WHERE", "group": "GROUP BY", "having": "HAVING", "joins": "a JOIN"}


#: The window's own columns of a windowed AGGREGATE's output.
_WINDOW_BOUNDS = frozenset({"window_start", "window_end"})


def _is_window_time(node: exp.Expr) -> bool:
    return isinstance(node, exp.Anonymous) and node.name.lower() == "window_time"


def _is_flink_window_time(node: exp.Expr) -> bool:
    """Flink's window time attribute: ``TUMBLE_ROWTIME(...)`` (``HOP_``, ``SESSION_``; its
    arguments checked against the group window's) or a window table function's
    ``window_time`` column."""
    if function_name(node) in FLINK_ROWTIME_PROPERTIES:
        return True
    return isinstance(node, exp.Column) and not node.table and node.name == "window_time"


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


def _unqualify_keys(node: exp.Expr, qualified: set[tuple[str, str]]) -> exp.Expr:
    """``node`` with each grouping key named with its relation (``orders.id`` after
    ``GROUP BY orders.id``) outside an aggregate read as the AGGREGATE's output column
    ``id``: the relation's name does not reach past the grouping (as the pipe form's
    ``KEY BY orders.id |> AGGREGATE ... |> SELECT id``)."""
    if not qualified:
        return node.copy()

    def swap(part: exp.Expr) -> exp.Expr:
        if (
            isinstance(part, exp.Column)
            and (part.table, part.name) in qualified
            and not part.args.get("db")
            and part.find_ancestor(exp.AggFunc) is None
        ):
            column = exp.column(part.name, quoted=part.this.quoted)
            column.meta.update(
                {k: v for k, v in _first_meta(part).items() if k in ("start", "end", "line", "col")}
            )
            return column
        return part

    return node.copy().transform(swap)


def _calcite_names(items: list[exp.Expr]) -> list[str | None]:
    """The names Flink (Calcite's SqlValidatorUtil.uniquify) gives a SELECT list's items
    where they differ from what the item would be named: an unnamed expression is
    ``EXPR$i`` (its place), and a name already taken gets the first free suffix 0, 1, ...
    (``SELECT B.dateTime, A.dateTime`` is ``dateTime, dateTime0``); None elsewhere. Names
    are compared as written (Flink's are case-sensitive)."""
    used: set[str] = set()
    names: list[str | None] = []
    for index, item in enumerate(items):
        if isinstance(item, exp.Alias):
            written: str = item.alias
        elif isinstance(item, exp.Column | exp.Dot) and not isinstance(item.this, exp.Star):
            written = item.name
        elif isinstance(item, exp.Star) or (
            isinstance(item, exp.Column) and isinstance(item.this, exp.Star)
        ):
            names.append(None)  # its columns keep their names
            continue
        else:
            written = f"EXPR${index}"
        name = written
        attempt = 0
        while name in used:
            name = f"{written}{attempt}"
            attempt += 1
        used.add(name)
        names.append(None if name == written and not written.startswith("EXPR$") else name)
    return names


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


#: The meta key marking an EXTEND item's expression with its place in the EXTEND (sqlglot
#: copies meta with a node, and the OVER lowering copies the items it reads).
_ITEM = "flowc_extend_item"


class _ExtendLowering(_Lowering):
    """An EXTEND's items read as the SELECT list ``*, item AS name, ...``; each node is
    placed in the file by the lowering of its own item's text."""

    def __init__(self, extend: ast.Extend, batch: bool) -> None:
        super().__init__(ast.SqlQuery(text="", tree=exp.Null(), span=extend.span), batch)
        self.extend = extend
        self.parts = [
            _Lowering(ast.SqlQuery(text=i.expr.text, tree=i.expr.tree, span=i.expr.span))
            for i in extend.items
        ]

    def part(self, node: exp.Expr | None) -> _Lowering | None:
        while node is not None:
            index = node.meta.get(_ITEM) if node._meta else None
            if isinstance(index, int):
                return self.parts[index]
            node = node.parent
        return None

    def span_of(self, node: exp.Expr | None, keyword: TokenType | None = None) -> Span:
        part = self.part(node)
        return part.span_of(node, keyword) if part is not None else self.span

    def expr(self, node: exp.Expr, tree: exp.Expr | None = None) -> ast.SqlExpr:
        part = self.part(node)
        return part.expr(node, tree) if part is not None else super().expr(node, tree)

    def over(self) -> ast.Over:
        """The OVER step; the SQL form's refusals, and EXTEND's own: an item that is not
        an OVER call as a whole (beside one, or holding one in an expression)."""
        items: list[exp.Expr] = [exp.Star()]
        for index, item in enumerate(self.extend.items):
            tree = item.expr.tree.copy()
            tree.meta[_ITEM] = index
            if not isinstance(tree, exp.Window):
                inner = next(tree.find_all(exp.Window), None)
                what = item.expr.text if inner is None else inner.sql("spark")
                raise _Unsupported(
                    f"an EXTEND with OVER calls takes each as a whole item ('AGG(x) OVER "
                    f"(...) AS name'), and '{what}' is "
                    + ("not an OVER call" if inner is None else "inside an expression"),
                    self.span_of(tree if inner is None else inner),
                    help="compute the other items in an EXTEND of their own after this one"
                    if inner is None
                    else "EXTEND the call AS a column, then compute with it in an EXTEND "
                    "after this one",
                    code=Code.E0753,
                )
            assert item.alias is not None  # the analysis named every item first (E0211)
            items.append(
                exp.Alias(this=tree, alias=exp.to_identifier(item.alias.value, item.alias.quoted))
            )
        select = exp.Select(expressions=items)
        window = self.over_windows(select)
        assert window is not None
        steps: list[ast.Step] = []
        self.over_step(select, items, window, steps)
        (step,) = steps
        assert isinstance(step, ast.Over)
        return step
