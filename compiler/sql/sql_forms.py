"""Spark SQL forms users paste, lowered to views before analysis: CTEs, subqueries in FROM,
table aliases, Flink's Top-N (``ROW_NUMBER() OVER (...)`` filtered by ``rn <= n``) and
its ``FOR SYSTEM_TIME AS OF`` joins.

Each ``WITH name AS (...)`` and each subquery in FROM becomes a **hidden view** defined
just before the statement that holds it, named ``owner$name`` (``owner`` is the view's or
the sink's name; ``$`` cannot be in a plain name) and read by that name; the query then
lowers as before (:mod:`flowc.sql.lower_sql`). Views add no operator, so a query written with
CTEs has the plans of the same query written with views. A table alias (``FROM bids AS
b``) is its relation's name: ``b.price`` is ``bids.price``.

The Top-N pattern ``SELECT ... FROM (SELECT ..., ROW_NUMBER() OVER (PARTITION BY k ORDER
BY x DESC) AS rn FROM s) WHERE rn <= n`` becomes a hidden view ending in ``TOP n BY x
DESC PER k AS rn`` (Flink's Rank); every other OVER stays E0232. Its ORDER BY and
PARTITION BY name the subquery's input (``b.price`` of its join), TOP reads the
subquery's output: the same item by name, or a column computed for TOP and dropped.

``a UNION ALL SELECT ... FROM b WHERE ...``: each branch after the first that is more
than ``SELECT * FROM x`` is a hidden view (``owner$union``), its items named by position
as the first branch names them.

Codes: E0250 (WITH RECURSIVE), E0251 (a CTE name given twice), E0252 (FOR SYSTEM_TIME AS
OF on a stream), E0253 (ROW_NUMBER() not filtered by an upper bound), E0265 (an AS OF
clause other than FOR SYSTEM_TIME AS OF: Spark's time travel; whether its expression is
processing time is checked with the streams' columns, :mod:`flowc.spark.streaming`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from sqlglot import exp
from sqlglot.tokenizer_core import TokenType

from flowc import ast
from flowc.diagnostics import Reporter
from flowc.errorcodes import Code
from flowc.spans import Span
from flowc.sql.functions import has_aggregate
from flowc.sql.lower_sql import (
    QueryPositions,
    StepFields,
    is_window_tvf_select,
    lower_window_top,
)

__all__ = ["expand_sql_forms"]

_TOP_HELP = (
    "Flink's Top-N: SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY k ORDER BY x "
    "DESC) AS rn FROM s) WHERE rn <= 3, or the pipe step |> TOP 3 BY x DESC PER k AS rn"
)


_LATERAL_HELP = (
    "write Flink's Top-N per group as SELECT * FROM (SELECT *, ROW_NUMBER() OVER "
    "(PARTITION BY k ORDER BY x DESC) AS rn FROM r) WHERE rn <= n, or as the LATERAL form "
    "Flink decorrelates: FROM (SELECT DISTINCT k FROM r) d, LATERAL (SELECT ... FROM r "
    "WHERE r.k = d.k ORDER BY x DESC LIMIT n)"
)

_AS_OF_HELP = (
    "join the table's current rows with FOR SYSTEM_TIME AS OF s.pt, where the stream "
    "declares pt AS PROCTIME() (Flink's lookup join), or with a plain JOIN"
)


def expand_sql_forms(
    statements: Sequence[ast.Statement], reporter: Reporter
) -> tuple[ast.Statement, ...]:
    """The statements with each SQL query's CTEs and FROM subqueries as hidden views
    before it; a statement with an error in these forms is left out (reported)."""
    taken = {s.name.value for s in statements if isinstance(s, _NAMED)}
    tables = {s.name.value for s in statements if isinstance(s, ast.CreateSource) and s.bounded}
    proctimes = frozenset(
        column.name.value
        for s in statements
        if isinstance(s, ast.CreateSource)
        for column in s.computed
        if is_proctime_call(column.expr.tree)
    )
    out: list[ast.Statement] = []
    for statement in statements:
        if not isinstance(statement, ast.CreateView | ast.Insert) or not isinstance(
            statement.query, ast.SqlQuery
        ):
            out.append(statement)
            continue
        owner = (
            statement.name.value
            if isinstance(statement, ast.CreateView)
            else (statement.sink.value)
        )
        start = statement.span
        at = Span(start.file, start.line, start.column, start.line, start.column)
        expansion = _Expansion(statement.query, owner, at, taken, tables, proctimes, reporter)
        try:
            query = expansion.query(statement.query.tree.copy(), statement.query.span)
        except _Refused:
            continue
        out.extend(expansion.views)
        out.append(replace(statement, query=query))
    return tuple(out)


_NAMED = (ast.CreateSource, ast.CreateSink, ast.CreateView)


class _Refused(Exception):
    """Reported already: the statement is left out."""


class _Expansion:
    """One statement's query: the hidden views it needs, in order."""

    def __init__(
        self,
        query: ast.SqlQuery,
        owner: str,
        at: Span,
        taken: set[str],
        tables: set[str],
        proctimes: frozenset[str],
        reporter: Reporter,
    ) -> None:
        self.source = query
        self.owner = owner
        #: Where the hidden views are defined: at the start of the statement holding them,
        #: so that plans are built from them first, as from views written above it.
        self.at = at
        self.taken = taken
        self.tables = tables
        #: The sources' processing-time attributes (``pt AS PROCTIME()``), by name.
        self.proctimes = proctimes
        self.reporter = reporter
        self.positions = QueryPositions(query)
        self.views: list[ast.CreateView] = []

    # ------------------------------------------------------------ helpers

    def error(self, code: Code, message: str, node: exp.Expr | None, help: str) -> _Refused:
        keyword = TokenType.WITH if code in (Code.E0250, Code.E0251) else None
        self.reporter.error(code, message, self.positions.span(node, keyword), help=help)
        return _Refused()

    def hidden_name(self, name: str) -> str:
        base = f"{self.owner}${name}"
        candidate, number = base, 2
        while candidate in self.taken:
            candidate, number = f"{base}{number}", number + 1
        self.taken.add(candidate)
        return candidate

    def name_span(self, node: exp.Expr | None) -> Span:
        return self.positions.span(node)

    def define(self, name: str, query: ast.Query, at: exp.Expr | None) -> None:
        span = self.name_span(at)
        self.views.append(
            ast.CreateView(
                name=ast.Name(value=name, quoted=True, span=span), query=query, span=self.at
            )
        )

    def sql(self, tree: exp.Expr, span: Span) -> ast.SqlQuery:
        """A query of the same text: sqlglot's positions in ``tree`` stay right."""
        return ast.SqlQuery(
            text=self.source.text,
            tree=tree,
            span=span,
            dialect=self.source.dialect,
            origin=self.source.text_origin,
        )

    # ------------------------------------------------------------ queries

    def query(self, tree: exp.Expr, span: Span) -> ast.SqlQuery:
        """``tree`` with its CTEs and FROM subqueries made hidden views (defined in
        ``self.views``), its aliases made relation names."""
        renamed: dict[str, str] = {}
        with_ = tree.args.get("with_")
        if isinstance(with_, exp.With):
            if with_.args.get("recursive"):
                raise self.error(
                    Code.E0250,
                    "WITH RECURSIVE has no streaming meaning",
                    with_,
                    help="a streaming query reads each row once: define each step as a view",
                )
            for cte in with_.expressions:
                name = cte.alias
                if name in renamed:
                    raise self.error(
                        Code.E0251,
                        f"the CTE name '{name}' is given twice",
                        cte,
                        help="give each WITH entry its own name",
                    )
                body = cte.this
                _rename_tables(body, renamed)
                hidden = self.hidden_name(name)
                self.define(hidden, self.query(body, self.positions.span(body)), cte)
                renamed[name] = hidden
            tree.set("with_", None)
        _rename_tables(tree, renamed)
        if isinstance(tree, exp.Union):
            self.union_branches(tree)
        for select in _selects(tree):
            self.lateral_top_n(select)
            self.from_subqueries(select)
            _comma_joins(select)
            self.aliases(select)
            self.join_keys(select)
        return self.sql(tree, span)

    def union_branches(self, tree: exp.Union) -> None:
        """``a UNION ALL SELECT ... FROM b WHERE ...``: each branch after the first that is
        more than ``SELECT * FROM x`` becomes a hidden view (its projection a Calc, as in
        Flink's plan) read by UNION ALL. Columns match by position, named by the first
        branch (as SQL): a branch's items are renamed to the first branch's names when
        those are known from its text; types must then be the same (E0222 otherwise)."""
        selects = _selects(tree)
        if not selects:
            return
        first = selects[0]
        written = [_output_name(item) for item in first.expressions]
        names = [name for name in written if name is not None]
        if len(names) != len(written):
            names = []  # a `*` or an unnamed item: the names are known after analysis only
        node: exp.Expr = tree
        chain: list[exp.Union] = []
        while isinstance(node, exp.Union):
            chain.append(node)
            node = node.left
        for union in reversed(chain):
            if union.args.get("distinct"):
                return  # lower_sql refuses UNION without ALL at its keyword
            branch = union.right
            if isinstance(branch, exp.Subquery) and isinstance(branch.this, exp.Select):
                branch = branch.this  # UNION ALL (SELECT ...)
            if not isinstance(branch, exp.Select):
                continue
            if _plain_star(branch):
                union.set("expression", branch)
                continue
            if names and len(branch.expressions) == len(names):
                branch.set(
                    "expressions",
                    [
                        _named(item, name)
                        for item, name in zip(branch.expressions, names, strict=True)
                    ],
                )
            hidden = self.hidden_name("union")
            span = self.positions.span(branch, TokenType.SELECT)
            self.define(hidden, self.query(branch, span), branch)
            table = exp.Table(this=exp.to_identifier(hidden, quoted=True))
            positioned = [p.meta for p in branch.walk() if "start" in p.meta and "end" in p.meta]
            if positioned:
                table.this.meta.update(
                    start=min(m["start"] for m in positioned),
                    end=max(m["end"] for m in positioned),
                )
            union.set("expression", exp.select("*").from_(table))

    def join_keys(self, select: exp.Select) -> None:
        """``ON mod(b.auction, 10000) = s.key``: an equality whose side is an expression of
        one stream's columns is made an equality of columns, as Flink's planner computes
        the key in a Calc below the join: that stream is read through a hidden view
        ``owner$<stream>_keys`` adding the column ``$join<n>``, which lower_sql drops after
        the join where ``*`` would show it. A table's side, and a stream's whose
        processing time a FOR SYSTEM_TIME AS OF reads, stay (a view over a table is no
        table, and keeps no PROCTIME()): E0221 as before."""
        joins = select.args.get("joins") or []
        from_ = select.args.get("from_")
        if not joins or from_ is None:
            return
        relations = {
            t.name: t
            for t in [from_.this, *(j.this for j in joins)]
            if isinstance(t, exp.Table) and not t.alias
        }
        timed = {  # a view does not keep PROCTIME(): AS OF must read the stream itself
            column.table
            for join in joins
            if isinstance(join.this, exp.Table) and join.this.args.get("version") is not None
            for column in join.this.args["version"].find_all(exp.Column)
        }
        keys: dict[str, list[tuple[exp.Expr, str]]] = {}
        count = 0
        for join in joins:
            on = join.args.get("on")
            terms = list(on.flatten()) if isinstance(on, exp.And) else [on]
            for term in terms:
                if not isinstance(term, exp.EQ):
                    continue
                sides = [term.left, term.right]
                owners = [_owner(side) for side in sides]
                if owners[0] is None or owners[1] is None or owners[0] == owners[1]:
                    continue
                for side, owner in zip(sides, owners, strict=True):
                    if (
                        isinstance(side, exp.Column)
                        or owner is None
                        or owner in self.tables
                        or owner in timed
                        or owner not in relations
                    ):
                        continue
                    name = f"$join{count}"
                    count += 1
                    keys.setdefault(owner, []).append((side.copy(), name))
                    column = exp.column(name, table=owner, quoted=True)
                    column.this.meta.update({k: v for k, v in _positions(side).items()})
                    side.replace(column)
        for owner, computed in keys.items():
            hidden = self.hidden_name(f"{owner}_keys")
            span = self.positions.span(computed[0][0])
            fields: StepFields = {
                "keyword_span": span,
                "hints": (),
                "hints_span": None,
                "span": span,
            }
            extend = ast.Extend(  # EXTEND, not SELECT *, ...: the event time passes on
                items=tuple(
                    ast.SelectItem(
                        expr=self.positions.expr(key),
                        alias=ast.Name(value=name, quoted=True, span=self.positions.span(key)),
                        span=self.positions.span(key),
                    )
                    for key, name in computed
                ),
                **fields,
            )
            source = ast.Relation(
                name=ast.Name(value=owner, quoted=True, span=span), side_output=None, span=span
            )
            self.define(hidden, ast.PipeQuery(source=source, steps=(extend,), span=span), None)
            relations[owner].set("this", exp.to_identifier(hidden, quoted=True))
            _requalify(select, owner, hidden)

    def lateral_top_n(self, select: exp.Select) -> None:
        """Flink's LATERAL Top-N per group, ``FROM (SELECT DISTINCT k FROM r) d, LATERAL
        (SELECT ... FROM r WHERE r.k = d.k ORDER BY x DESC LIMIT n) t`` (also ``CROSS JOIN
        LATERAL``, ``JOIN LATERAL ... ON TRUE``, ``FETCH FIRST n ROWS ONLY``, GROUP BY k
        for DISTINCT), rewritten in place as the ROW_NUMBER() Top-N over ``r``: Flink 2.3
        decorrelates exactly this form into a Rank over ``r`` (the DISTINCT side drops
        out), and the outer query's WHERE, GROUP BY and HAVING after it. Every other
        LATERAL subquery is E0758 at the part that differs, saying whether Flink 2.3
        refuses it too ("unexpected correlate variable") or flowc does not lower it."""
        joins = select.args.get("joins") or []
        laterals = [
            j for j in joins if isinstance(j.this, exp.Lateral) and not j.this.args.get("view")
        ]
        if not laterals:
            return
        join = laterals[0]
        lateral = join.this
        body = lateral.this.this if isinstance(lateral.this, exp.Subquery) else None
        if not isinstance(body, exp.Select):
            raise self._lateral_refused("a LATERAL that is not a subquery", lateral, False)
        if len(joins) != 1:
            raise self._lateral_refused(
                "a LATERAL subquery beside other joins", joins[0], flink_refuses=False
            )
        on = join.args.get("on")
        if join.side or (on is not None and not (isinstance(on, exp.Boolean) and on.this)):
            what = f"{join.side} JOIN LATERAL" if join.side else "JOIN LATERAL ON a condition"
            raise self._lateral_refused(what, on if on is not None else lateral)
        for key in ("order", "limit", "offset", "distinct", "qualify"):
            clause = select.args.get(key)
            if clause:
                raise self._lateral_refused(
                    f"a LATERAL Top-N under {key.upper()}", clause, flink_refuses=False
                )
        from_ = select.args.get("from_")
        keys, relation, outer = self._lateral_groups(from_.this if from_ is not None else None)
        n = self._lateral_rows(body, relation, outer, keys)
        for item in body.expressions:
            named = _output_name(item)
            if named in keys and not (isinstance(item, exp.Column) and item.name == named):
                # d.k reads the group column; an item of that name would shadow it.
                raise self._lateral_refused(
                    f"a LATERAL subquery item named as the group column '{named}'",
                    item,
                    flink_refuses=False,
                )
        for name in keys:
            if not any(_output_name(i) == name for i in body.expressions):
                body.append("expressions", exp.column(name))
        rank = "$lateral_rn"
        window = exp.Window(
            this=exp.RowNumber(),
            partition_by=[exp.column(name) for name in keys],
            order=body.args["order"],
        )
        body.set("order", None)
        limit = body.args.get("limit")
        body.set("limit", None)
        body.append(
            "expressions", exp.Alias(this=window, alias=exp.to_identifier(rank, quoted=True))
        )
        alias = lateral.alias or "$lateral"
        items: list[exp.Expr] = []
        for item in select.expressions:
            if isinstance(item, exp.Star):
                unnamed = [i for i in body.expressions[:-1] if _output_name(i) is None]
                if unnamed:
                    raise self._lateral_refused(
                        "SELECT * over a LATERAL subquery item with no name",
                        unnamed[0],
                        flink_refuses=False,
                    )
                items += [exp.column(name, quoted=True) for name in keys]
                items += [
                    exp.column(_output_name(i) or "", quoted=True)
                    for i in body.expressions[: len(body.expressions) - 1]
                    if _output_name(i) not in keys
                ]
            elif any(
                isinstance(c, exp.Column) and isinstance(c.this, exp.Star) for c in item.walk()
            ):
                raise self._lateral_refused(
                    "a LATERAL Top-N selecting x.*", item, flink_refuses=False
                )
            else:
                items.append(item)
        select.set("expressions", items)
        select.set("joins", None)
        select.set(
            "from_",
            exp.From(
                this=exp.Subquery(this=body, alias=exp.TableAlias(this=exp.to_identifier(alias)))
            ),
        )
        for column in select.find_all(exp.Column):
            # The query now reads one relation: its columns unqualified, as Spark's rules
            # follow a TOP's group columns by their plain names to an upsert sink.
            if column.table in (outer, alias) and column.find_ancestor(exp.Select) is select:
                column.set("table", None)
        bound = exp.Literal.number(n)
        if limit is not None:
            bound.meta.update(_meta_of(limit))
        bounded: exp.Expr = exp.LTE(this=exp.column(rank, quoted=True), expression=bound)
        where = select.args.get("where")
        if where is not None:  # Flink's Calc after the Rank: TOP, then the filter
            bounded = exp.and_(bounded, where.this)
        select.set("where", exp.Where(this=bounded))

    def _lateral_refused(
        self, what: str, node: exp.Expr | None, flink_refuses: bool = True
    ) -> _Refused:
        """E0758 at ``node``: ``flink_refuses`` where Flink 2.3 was asked and refused the
        form on a stream; else a form flowc does not lower (Flink may plan it)."""
        why = (
            "Flink 2.3 refuses it on a stream (unexpected correlate variable)"
            if flink_refuses
            else "flowc lowers only that form"
        )
        return self.error(
            Code.E0758,
            f"{what} is not Flink's LATERAL Top-N per group: {why}",
            node,
            help=_LATERAL_HELP,
        )

    def _lateral_groups(self, node: exp.Expr | None) -> tuple[list[str], str, str]:
        """The LATERAL form's groups ``(SELECT DISTINCT k, ... FROM r) d``: the key names,
        ``r``'s name and the alias ``d``."""
        inner = node.this if isinstance(node, exp.Subquery) else None
        if not isinstance(inner, exp.Select) or not node or not node.alias:
            raise self._lateral_refused(
                "a LATERAL subquery after anything but a subquery (SELECT DISTINCT k FROM r) "
                "d in FROM, with its alias",
                node,
                flink_refuses=False,
            )
        from_ = inner.args.get("from_")
        relation = from_.this if from_ is not None else None
        group = inner.args.get("group")
        items = inner.expressions
        plain = all(isinstance(i, exp.Column) for i in items)
        grouped = (
            group is not None
            and not group.args.get("rollup")
            and [g.sql("spark") for g in group.expressions] == [i.sql("spark") for i in items]
        )
        if (
            not isinstance(relation, exp.Table)
            or not plain
            or not (bool(inner.args.get("distinct")) ^ grouped)
            or any(inner.args.get(k) for k in ("where", "joins", "having", "order", "limit"))
        ):
            raise self._lateral_refused(
                "a LATERAL subquery whose groups are not SELECT DISTINCT k, ... FROM r (no "
                "WHERE, no join)",
                inner,
                flink_refuses=bool(inner.args.get("where")),
            )
        return [i.name for i in items], relation.name, node.alias

    def _lateral_rows(
        self,
        body: exp.Select,
        relation: str,
        outer: str,
        keys: list[str],
    ) -> int:
        """Check the LATERAL subquery ``body`` reads ``relation``, keyed only by ``r.k =
        d.k`` for each group key, ordered and limited; its columns made unqualified (it
        reads one relation). Returns the LIMIT's n."""
        from_ = body.args.get("from_")
        table = from_.this if from_ is not None else None
        if not isinstance(table, exp.Table) or table.name != relation:
            raise self._lateral_refused(
                f"a LATERAL subquery reading another relation than '{relation}'", table or body
            )
        for key in ("joins", "group", "having", "distinct", "offset", "qualify"):
            clause = body.args.get(key)
            if clause:
                raise self._lateral_refused(
                    f"a LATERAL subquery with {key.upper().replace('GROUP', 'GROUP BY')}",
                    clause[0] if isinstance(clause, list) else clause,
                    flink_refuses=key in ("group", "having", "offset"),
                )
        if any(isinstance(n, exp.Window) for n in body.walk()) or has_aggregate(body):
            raise self._lateral_refused(
                "a LATERAL subquery with aggregates or OVER", body, flink_refuses=False
            )
        limit = body.args.get("limit")
        count = (
            limit.args.get("count")
            if isinstance(limit, exp.Fetch)
            else limit.expression
            if isinstance(limit, exp.Limit)
            else None
        )
        if not (
            isinstance(count, exp.Literal)
            and not count.is_string
            and count.this.isdigit()
            and body.args.get("order")
        ):
            raise self._lateral_refused(
                "a LATERAL subquery without ORDER BY ... LIMIT n (Flink joins it)",
                limit or body,
                flink_refuses=False,
            )
        inner_alias = table.alias or relation
        where = body.args.get("where")
        terms = list(where.this.flatten()) if where is not None else []
        if where is not None and not isinstance(where.this, exp.And):
            terms = [where.this]
        matched: set[str] = set()
        for term in terms:
            sides = [term.this, term.expression] if isinstance(term, exp.EQ) else []
            ours = [s for s in sides if isinstance(s, exp.Column) and s.table != outer]
            theirs = [s for s in sides if isinstance(s, exp.Column) and s.table == outer]
            if (
                len(ours) != 1
                or len(theirs) != 1
                or ours[0].table not in ("", inner_alias)
                or ours[0].name != theirs[0].name
                or ours[0].name not in keys
            ):
                raise self._lateral_refused(
                    f"a LATERAL subquery's condition other than r.k = {outer}.k on its group keys",
                    term,
                )
            matched.add(ours[0].name)
        if matched != set(keys):
            raise self._lateral_refused(
                f"a LATERAL subquery not keyed by every column of {outer} "
                f"({', '.join(sorted(set(keys) - matched))} unmatched)",
                where.this if where is not None else body,
            )
        body.set("where", None)
        for column in body.find_all(exp.Column):
            if column.table == outer:
                raise self._lateral_refused(
                    f"a LATERAL subquery reading {outer}'s columns outside its WHERE",
                    column,
                    flink_refuses=False,
                )
            if column.table == inner_alias:
                column.set("table", None)
        table.set("alias", None)
        return int(count.this)

    def from_subqueries(self, select: exp.Select) -> None:
        """Each subquery of FROM and JOIN made a hidden view (the Top-N pattern a view
        ending in TOP)."""
        from_ = select.args.get("from_")
        sources = [from_] if from_ is not None else []
        sources += [join for join in select.args.get("joins") or []]
        for holder in sources:
            subquery = holder.this
            if not isinstance(subquery, exp.Subquery):
                continue
            alias = subquery.alias or "subquery"
            hidden = self.hidden_name(alias)
            inner = subquery.this
            top = self.top_n(select, inner) if holder is from_ else None
            if (
                top is not None
                and is_window_tvf_select(top[0])
                and len(top[1]) == 1
                and isinstance(top[1][0], ast.Top)
            ):
                rows, (step,) = top  # Flink's window Top-N: one view, WINDOW then TOP
                assert isinstance(step, ast.Top)
                outer_star = any(isinstance(e, exp.Star) for e in select.expressions)
                windowed = lower_window_top(
                    self.sql(rows, self.positions.span(rows)), step, outer_star, self.reporter
                )
                if windowed is None:
                    raise _Refused()
                self.define(hidden, windowed, subquery)
            elif top is not None:
                rows, steps = top
                step = steps[0]
                below = self.hidden_name(f"{alias}_rows")
                self.define(below, self.query(rows, self.positions.span(rows)), inner)
                relation = ast.Relation(
                    name=ast.Name(value=below, quoted=True, span=step.span),
                    side_output=None,
                    span=step.span,
                )
                pipe = ast.PipeQuery(source=relation, steps=steps, span=step.span)
                self.define(hidden, pipe, subquery)
            else:
                span = self.positions.span(inner, TokenType.SELECT)
                self.define(hidden, self.query(inner, span), subquery)
            table = exp.Table(this=exp.to_identifier(hidden, quoted=True))
            if subquery.alias:
                _requalify(select, subquery.alias, hidden)
            subquery.replace(table)

    def aliases(self, select: exp.Select) -> None:
        """``FROM bids AS b``: ``b.x`` is ``bids.x``, and the alias goes. ``FOR SYSTEM_TIME
        AS OF`` is kept on a table for :mod:`flowc.sql.lower_sql` (the JOIN's ``as_of``),
        refused on a stream (E0252); other AS OF forms are E0265."""
        tables = [select.args.get("from_"), *(select.args.get("joins") or [])]
        relations = [t.this for t in tables if t is not None and isinstance(t.this, exp.Table)]
        names = {t.name for t in relations}
        for table in relations:
            version = table.args.get("version")
            if version is not None:
                if table.name not in self.tables:
                    raise self.error(
                        Code.E0252,
                        f"FOR SYSTEM_TIME AS OF reads a table, and '{table.name}' is a stream",
                        version,
                        help="declare the dimension with CREATE TABLE, or join two streams "
                        "with a time bound (ON ... AND b.ts BETWEEN a.ts - INTERVAL ... AND ...)",
                    )
                words, span = self.positions.version_clause(table)
                if words != "FOR SYSTEM_TIME AS OF":
                    self.reporter.error(
                        Code.E0265,
                        f"'{words}' reads a table's past versions, and a flowc table has "
                        "one: the rows it holds when the job starts",
                        span,
                        help=_AS_OF_HELP,
                    )
                    raise _Refused()
                if not isinstance(version.expression, exp.Column):
                    self.reporter.error(
                        Code.E0265,
                        "FOR SYSTEM_TIME AS OF takes a column of the stream joined, its "
                        "processing time (as Flink: the left table's time attribute)",
                        span,
                        help=_AS_OF_HELP,
                    )
                    raise _Refused()
            alias = table.alias
            if alias and alias != table.name:
                if alias in names:
                    continue  # an alias that is another relation's name: lower_sql refuses
                _requalify(select, alias, table.name)
                table.set("alias", None)

    def top_n(
        self, outer: exp.Select, inner: exp.Expr
    ) -> tuple[exp.Select, tuple[ast.Step, ...]] | None:
        """The Top-N pattern: ``inner`` selects ``ROW_NUMBER() OVER (...) AS rn`` and
        ``outer`` keeps ``rn <= n`` (``rn < n``, ``rn = 1``). Returns the inner query
        without the ranking and the steps after it (TOP, and the DROP of the columns
        computed for it, :meth:`rank_inputs`); None for any other subquery."""
        if not isinstance(inner, exp.Select):
            return None
        ranked = [
            item
            for item in inner.expressions
            if isinstance(item, exp.Alias) and isinstance(item.this, exp.Window)
        ]
        if len(ranked) != 1:
            return None
        item = ranked[0]
        window = item.this
        assert isinstance(window, exp.Window)
        function = window.this
        rank = item.alias
        if not isinstance(function, exp.RowNumber):
            raise self.error(
                Code.E0253,
                f"{function.sql('spark')} OVER (...) is not Flink's Top-N: only ROW_NUMBER() is",
                window,
                help=_TOP_HELP,
            )
        count, rest = self.bound(outer, rank, window)
        order = window.args.get("order")
        if order is None or not order.expressions:
            raise self.error(
                Code.E0253,
                "ROW_NUMBER() OVER (...) without ORDER BY ranks rows in no order",
                window,
                help=_TOP_HELP,
            )
        outer.set("where", exp.Where(this=rest) if rest is not None else None)
        rows = inner.copy()
        rows.set("expressions", [e for e in rows.expressions if e.alias_or_name != rank])
        if not rows.expressions:
            rows.set("expressions", [exp.Star()])
        partition = list(window.args.get("partition_by") or [])
        deduplicates = self.keeps_first_row(outer, rank, count[0], order.expressions, partition)
        # a deduplication reads no order (its PROCTIME() inline is no column of the rows)
        ordered = [] if deduplicates else [o.this for o in order.expressions]
        read, added = _rank_inputs(rows, ordered + partition)
        read = [*([exp.null()] * (len(order.expressions) - len(ordered))), *read]
        span = self.positions.span(window)
        step = ast.Top(
            count=count[0],
            count_span=count[1],
            order=tuple(
                ast.OrderItem(
                    expr=self.positions.expr(o.this, read[index]),
                    descending=bool(o.args.get("desc")),
                    span=self.positions.span(o),
                )
                for index, o in enumerate(order.expressions)
            ),
            per=tuple(
                self.positions.expr(p, read[len(order.expressions) + index])
                for index, p in enumerate(partition)
            ),
            rank=ast.Name(value=rank, quoted=False, span=self.positions.span(item)),
            keyword_span=span,
            hints=(),
            hints_span=None,
            span=span,
        )
        first: ast.Step = step
        if deduplicates:
            first = ast.Deduplicate(
                columns=step.per,
                within=None,
                keyword_span=span,
                hints=(),
                hints_span=None,
                span=span,
            )
        if not added:
            return rows, (first,)
        drop = ast.Drop(
            columns=tuple(ast.Name(value=name, quoted=True, span=span) for name in added),
            keyword_span=span,
            hints=(),
            hints_span=None,
            span=span,
        )
        return rows, (first, drop)

    def keeps_first_row(
        self,
        outer: exp.Select,
        rank: str,
        count: int,
        order: list[exp.Expr],
        partition: list[exp.Expr],
    ) -> bool:
        """Flink's deduplication: ``ROW_NUMBER() OVER (PARTITION BY k ORDER BY pt ASC)``
        kept at ``rn = 1``, ``pt`` a processing-time attribute, is the first row of each
        key as it arrives (Flink's insert-only Deduplicate, not a Rank): flowc's
        DEDUPLICATE. So is ``ORDER BY PROCTIME() ASC`` inline (Flink 2.3 plans it as a
        Rank whose output is insert-only, the first row of each key). Only when the query
        around it does not read the rank."""
        if count != 1 or len(order) != 1 or not partition or order[0].args.get("desc"):
            return False
        column = order[0].this
        if is_proctime_call(column):
            return self.reads_no_rank(outer, rank)
        if not isinstance(column, exp.Column) or column.name not in self.proctimes:
            return False
        return self.reads_no_rank(outer, rank)

    @staticmethod
    def reads_no_rank(outer: exp.Select, rank: str) -> bool:
        """Whether the query around a ROW_NUMBER reads neither its rank nor ``*``."""
        return not any(
            isinstance(node, exp.Star) or (isinstance(node, exp.Column) and node.name == rank)
            for item in outer.expressions
            for node in item.walk()
        )

    def bound(
        self, outer: exp.Select, rank: str, window: exp.Expr
    ) -> tuple[tuple[int, Span], exp.Expr | None]:
        """The outer WHERE's upper bound of ``rank`` (as TOP's n and its span) and the rest
        of the WHERE; E0253 without one."""
        where = outer.args.get("where")
        terms = (
            list(where.this.flatten())
            if where is not None and isinstance(where.this, exp.And)
            else ([where.this] if where is not None else [])
        )
        for term in terms:
            found = _upper_bound(term, rank)
            if found is not None:
                others = [t for t in terms if t is not term]
                rest = exp.and_(*[t.copy() for t in others]) if others else None
                return (found, self.positions.span(term)), rest
        raise self.error(
            Code.E0253,
            f"ROW_NUMBER() ... AS {rank} is kept only with a bound such as WHERE {rank} <= 3",
            window,
            help=_TOP_HELP,
        )


def _comma_joins(select: exp.Select) -> None:
    """``FROM a x, b y WHERE x.k = y.k AND ...`` (a comma join, sqlglot's CROSS join
    without ON; also ``CROSS JOIN``): the WHERE's conditions over both sides, each column
    qualified, become the join's ON, as a cross join filtered by them is that inner join
    (Flink's planner pushes them into the join too); the rest stay in WHERE. A cross join
    no condition reaches stays one (refused later as before)."""
    joins = select.args.get("joins") or []
    where = select.args.get("where")
    from_ = select.args.get("from_")
    if where is None or from_ is None or not joins:
        return
    terms = list(where.this.flatten()) if isinstance(where.this, exp.And) else [where.this]
    seen = {from_.this.alias_or_name}
    for join in joins:
        name = join.this.alias_or_name
        if join.args.get("kind") == "CROSS" and join.args.get("on") is None:
            moving = [t for t in terms if _reads_both(t, seen, name)]
            if moving:
                join.set("kind", None)
                join.set("on", exp.and_(*[t.copy() for t in moving]))
                terms = [t for t in terms if not any(t is m for m in moving)]
        seen.add(name)
    select.set("where", exp.Where(this=exp.and_(*terms)) if terms else None)


def _reads_both(term: exp.Expr, before: set[str], name: str) -> bool:
    """Whether every column of ``term`` is qualified by ``name`` or one of ``before``,
    with both sides read."""
    tables = [c.table for c in term.find_all(exp.Column)]
    return (
        bool(tables)
        and all(tables)
        and name in tables
        and any(t in before for t in tables)
        and set(tables) <= before | {name}
    )


def is_proctime_call(tree: exp.Expr) -> bool:
    """``PROCTIME()``: a source's processing-time attribute (Flink's computed column)."""
    return isinstance(tree, exp.Anonymous) and tree.name.lower() == "proctime"


def _rank_inputs(rows: exp.Select, inputs: list[exp.Expr]) -> tuple[list[exp.Expr], list[str]]:
    """What TOP reads for each ORDER BY and PARTITION BY expression of ``ROW_NUMBER()
    OVER (...)``, which SQL evaluates over the subquery's input (``b.price`` of its join,
    a column it does not select), while TOP runs after the subquery's projection: an
    item of the same text is read by its name; an unqualified column a ``*`` passes on
    stays; anything else is computed as a column ``$rank<n>`` added to ``rows`` (and the
    names of these, for the DROP after TOP)."""
    items = list(rows.expressions)
    named = {_output_name(i) for i in items} - {None}
    by_text = {
        (i.this if isinstance(i, exp.Alias) else i).sql("spark"): _output_name(i) for i in items
    }
    star = any(isinstance(i, exp.Star) for i in items)
    read: list[exp.Expr] = []
    added: list[str] = []
    for node in inputs:
        name = by_text.get(node.sql("spark"))
        if name is not None:
            plain = name.isidentifier()
            read.append(exp.column(name, quoted=not plain) if name != node.sql("spark") else node)
        elif isinstance(node, exp.Column) and not node.table and star and node.name not in named:
            read.append(node)
        else:
            hidden = f"$rank{len(added)}"
            added.append(hidden)
            items.append(exp.Alias(this=node.copy(), alias=exp.to_identifier(hidden, quoted=True)))
            by_text[node.sql("spark")] = hidden
            read.append(exp.column(hidden, quoted=True))
    rows.set("expressions", items)
    return read, added


def _meta_of(node: exp.Expr) -> dict[str, object]:
    """The source position of ``node``'s first part that has one (for a node made here)."""
    for part in node.walk():
        if "start" in part.meta:
            return dict(part.meta)
    return {}


def _owner(side: exp.Expr) -> str | None:
    """The one relation whose columns ``side`` reads (all qualified by it), else None."""
    tables = {column.table for column in side.find_all(exp.Column)}
    if len(tables) != 1 or "" in tables or has_aggregate(side):
        return None
    return next(iter(tables))


def _positions(node: exp.Expr) -> dict[str, int]:
    """Where ``node`` stands (its first and last identifier), for the column replacing it."""
    metas = [p.meta for p in node.walk() if isinstance(p, exp.Identifier) and "start" in p.meta]
    if not metas:
        return {}
    return {"start": min(m["start"] for m in metas), "end": max(m["end"] for m in metas)}


def _plain_star(select: exp.Select) -> bool:
    """``SELECT * FROM x``: what UNION ALL reads as a relation."""
    from_ = select.args.get("from_")
    return (
        len(select.expressions) == 1
        and isinstance(select.expressions[0], exp.Star)
        and from_ is not None
        and isinstance(from_.this, exp.Table)
        and not any(select.args.get(k) for k in ("where", "joins", "group", "having", "distinct"))
    )


def _output_name(item: exp.Expr) -> str | None:
    """The column name a SELECT item gives, when its text says it (None for ``*`` and
    unnamed expressions)."""
    if isinstance(item, exp.Alias):
        return item.alias
    if isinstance(item, exp.Column) and not isinstance(item.this, exp.Star):
        return item.name
    return None


def _named(item: exp.Expr, name: str) -> exp.Expr:
    """``item`` giving the column ``name`` (as the first UNION branch names it)."""
    if _output_name(item) == name or isinstance(item, exp.Star):
        return item
    inner = item.this if isinstance(item, exp.Alias) else item
    return exp.Alias(this=inner, alias=exp.to_identifier(name))


def _upper_bound(term: exp.Expr, rank: str) -> int | None:
    """n for ``rank <= n``, ``rank < n + 1``, ``rank = 1``, ``n >= rank``; else None."""
    left, right = term.args.get("this"), term.args.get("expression")
    flipped = {exp.GTE: exp.LTE, exp.GT: exp.LT, exp.EQ: exp.EQ}
    kind: type[exp.Expr] = type(term)
    if isinstance(right, exp.Column) and not isinstance(left, exp.Column) and kind in flipped:
        left, right, kind = right, left, flipped[kind]
    if not (isinstance(left, exp.Column) and left.name == rank and not left.table):
        return None
    if not (isinstance(right, exp.Literal) and not right.is_string and right.this.isdigit()):
        return None
    value = int(right.this)
    if kind is exp.LTE:
        return value
    if kind is exp.LT:
        return value - 1
    if kind is exp.EQ and value == 1:
        return 1
    return None


def _selects(tree: exp.Expr) -> list[exp.Select]:
    """The SELECTs of a query: itself, or each side of a UNION."""
    if isinstance(tree, exp.Union):
        return [*_selects(tree.left), *_selects(tree.right)]
    return [tree] if isinstance(tree, exp.Select) else []


def _rename_tables(tree: exp.Expr, renamed: dict[str, str]) -> None:
    """Tables named after a CTE read its hidden view; columns qualified by the CTE's name
    follow (a CTE's name is the statement's, at every level of it)."""
    if not renamed:
        return
    for table in list(tree.find_all(exp.Table)):
        hidden = renamed.get(table.name)
        if hidden is not None and not table.args.get("db"):
            table.set("this", exp.to_identifier(hidden, quoted=True))
    for column in tree.find_all(exp.Column):
        hidden = renamed.get(column.table)
        if hidden is not None and not column.args.get("db"):
            column.set("table", exp.to_identifier(hidden, quoted=True))


def _requalify(select: exp.Select, old: str, new: str) -> None:
    """``old.x`` is ``new.x`` in ``select`` (not inside its subqueries, which have their
    own relations)."""
    for column in select.find_all(exp.Column):
        if column.table == old and column.find_ancestor(exp.Subquery, exp.Select) in (
            select,
            None,
        ):
            named = exp.to_identifier(new, quoted=True)
            written = column.args.get("table")
            if isinstance(written, exp.Identifier):  # where the alias stands, for spans
                named.meta.update(written.meta)
            column.set("table", named)
