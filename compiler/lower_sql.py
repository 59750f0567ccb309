"""Lower a Spark SQL ``SELECT`` view to the pipe steps it means.

``SELECT ... FROM t [JOIN u ON ...] WHERE ... GROUP BY k, window(ts, '10 seconds')
HAVING ...`` becomes ``FROM t |> JOIN u ON ... |> WHERE ... |> KEY BY k |> WINDOW
TUMBLE(ts, ...) |> AGGREGATE ... |> WHERE <having> |> SELECT ...``, so SQL views get
exactly the plans of the equivalent pipe query. What has no streaming meaning here
(ORDER BY, LIMIT, subqueries, CTEs, OVER windows) is a diagnostic at its position.
"""

from __future__ import annotations

from sqlglot import exp

from flowc import ast
from flowc.diagnostics import Reporter
from flowc.spans import Span
from flowc.sqltypes import node_span

_UNSUPPORTED = {
    "with": "WITH (common table expressions)",
    "order": "ORDER BY",
    "limit": "LIMIT",
    "offset": "OFFSET",
    "qualify": "QUALIFY",
    "laterals": "LATERAL VIEW",
    "windows": "WINDOW clauses",
}


class _Unsupported(Exception):
    def __init__(self, what: str, span: Span, help: str | None = None) -> None:
        super().__init__(what)
        self.what = what
        self.span = span
        self.help = help


def lower_sql_query(query: ast.SqlQuery, reporter: Reporter) -> ast.PipeQuery | None:
    try:
        return _Lowering(query).lower()
    except _Unsupported as problem:
        reporter.error(
            "E0601",
            f"not supported in a streaming query: {problem.what}",
            problem.span,
            help=problem.help or "write the query as a pipe query (FROM x |> ...)",
        )
        return None


class _Lowering:
    def __init__(self, query: ast.SqlQuery) -> None:
        self.query = query
        self.span = query.span

    def expr(self, node: exp.Expr) -> ast.SqlExpr:
        """A standalone expression for ``node``, with the span it has in the file."""
        located = ast.SqlExpr(text=self.query.text, tree=node, span=self.span)
        span = node_span(located, node)
        copy = node.copy()
        for part in copy.walk():
            if isinstance(part, exp.Identifier):
                for key in ("start", "end", "line", "col"):
                    part.meta.pop(key, None)
        return ast.SqlExpr(text=copy.sql("spark"), tree=copy, span=span)

    def name(self, value: str, span: Span | None = None) -> ast.Name:
        return ast.Name(value=value, quoted=False, span=span or self.span)

    def step_fields(self) -> dict[str, object]:
        return {"keyword_span": self.span, "hints": (), "hints_span": None, "span": self.span}

    def relation(self, table: exp.Expr) -> ast.Relation:
        if not isinstance(table, exp.Table) or table.args.get("db"):
            raise _Unsupported(
                "a subquery or qualified table in FROM",
                self.expr(table).span,
                help="define the subquery as a view and read the view",
            )
        if table.alias and table.alias != table.name:
            raise _Unsupported(
                f"the table alias '{table.alias}'",
                self.expr(table).span,
                help=f"refer to the source or view by its name '{table.name}'",
            )
        return ast.Relation(name=self.name(table.name), side_output=None, span=self.span)

    def lower(self) -> ast.PipeQuery:
        tree = self.query.tree
        if isinstance(tree, exp.Union):
            return self.union(tree)
        if not isinstance(tree, exp.Select):
            raise _Unsupported(f"'{type(tree).__name__.upper()}'", self.span)
        return self.select(tree)

    def union(self, tree: exp.Union) -> ast.PipeQuery:
        if tree.args.get("distinct") or not isinstance(tree, exp.Union):
            raise _Unsupported("UNION without ALL", self.span, help="use UNION ALL")
        left = tree.left
        right = tree.right
        first = self.select(left) if isinstance(left, exp.Select) else self.union(left)  # type: ignore[arg-type]
        if not (
            isinstance(right, exp.Select)
            and len(right.expressions) == 1
            and isinstance(right.expressions[0], exp.Star)
            and not right.args.get("where")
            and not right.args.get("joins")
        ):
            raise _Unsupported(
                "UNION ALL of a query other than SELECT * FROM x",
                self.span,
                help="define each side as a view, then UNION ALL the views",
            )
        step = ast.UnionAll(others=(self.relation(right.args["from_"].this),), **self.step_fields())  # type: ignore[arg-type]
        return ast.PipeQuery(source=first.source, steps=(*first.steps, step), span=self.span)

    def select(self, tree: exp.Select) -> ast.PipeQuery:
        for key, what in _UNSUPPORTED.items():
            if tree.args.get(key):
                raise _Unsupported(what, self.span)
        if any(isinstance(n, exp.Window) for n in tree.find_all(exp.Window)):
            raise _Unsupported("OVER (...) window functions", self.span)
        if any(isinstance(n, exp.Subquery | exp.Select) and n is not tree for n in tree.walk()):
            raise _Unsupported("a subquery", self.span, help="define it as a view")
        from_ = tree.args.get("from_") or tree.args.get("from")
        if from_ is None:
            raise _Unsupported("SELECT without FROM", self.span)
        source = self.relation(from_.this)
        steps: list[ast.Step] = []
        fields = self.step_fields()
        for join in tree.args.get("joins") or []:
            side = (join.side or "").upper()
            kind = side if side in ("LEFT", "RIGHT", "FULL") else "INNER"
            on = join.args.get("on")
            steps.append(
                ast.Join(
                    kind=kind,
                    right=self.relation(join.this),
                    condition=self.expr(on) if on is not None else None,
                    **fields,  # type: ignore[arg-type]
                )
            )
        where = tree.args.get("where")
        if where is not None:
            steps.append(ast.Where(condition=self.expr(where.this), **fields))  # type: ignore[arg-type]
        items = list(tree.expressions)
        group = tree.args.get("group")
        has_aggregates = any(isinstance(n, exp.AggFunc) for item in items for n in item.walk())
        if group is not None or has_aggregates:
            steps.extend(self.aggregate(tree, items, group))
        elif not (len(items) == 1 and isinstance(items[0], exp.Star)):
            steps.append(ast.Select(items=tuple(self.item(i) for i in items), **fields))  # type: ignore[arg-type]
        if tree.args.get("distinct"):
            steps.append(ast.Deduplicate(columns=(), within=None, **fields))  # type: ignore[arg-type]
        return ast.PipeQuery(source=source, steps=tuple(steps), span=self.span)

    def item(self, node: exp.Expr) -> ast.SelectItem:
        if isinstance(node, exp.Alias):
            return ast.SelectItem(
                expr=self.expr(node.this), alias=self.name(node.alias), span=self.span
            )
        return ast.SelectItem(expr=self.expr(node), alias=None, span=self.span)

    def aggregate(
        self, tree: exp.Select, items: list[exp.Expr], group: exp.Group | None
    ) -> list[ast.Step]:
        fields = self.step_fields()
        keys: list[exp.Expr] = []
        window: exp.Anonymous | None = None
        for key in group.expressions if group is not None else []:
            if isinstance(key, exp.Anonymous) and key.name.lower() in ("window", "session_window"):
                if window is not None:
                    raise _Unsupported("grouping by two windows", self.expr(key).span)
                window = key
            elif isinstance(key, exp.Column):
                keys.append(key)
            else:
                raise _Unsupported(
                    "GROUP BY an expression",
                    self.expr(key).span,
                    help="compute it in a view first, then GROUP BY the column",
                )
        steps: list[ast.Step] = []
        if keys:
            steps.append(ast.KeyBy(keys=tuple(self.expr(k) for k in keys), **fields))  # type: ignore[arg-type]
        window_sql = window.sql("spark") if window is not None else None
        if window is not None:
            args = [self.expr(a) for a in window.expressions]
            if window.name.lower() == "session_window":
                kind = "SESSION"
            else:
                kind = "HOP" if len(args) == 3 else "TUMBLE"
            steps.append(ast.Window(kind=kind, args=tuple(args), **fields))  # type: ignore[arg-type]
        key_names = {k.name for k in keys}
        aggregates: list[ast.SelectItem] = []
        projection: list[ast.SelectItem] = []
        for index, item in enumerate(items):
            inner = item.this if isinstance(item, exp.Alias) else item
            alias = item.alias if isinstance(item, exp.Alias) else None
            if any(isinstance(n, exp.AggFunc) for n in inner.walk()):
                name = alias or f"agg_{index}"
                aggregates.append(
                    ast.SelectItem(expr=self.expr(inner), alias=self.name(name), span=self.span)
                )
                projection.append(self.item(exp.column(name) if not alias else exp.column(alias)))
            elif window_sql is not None and inner.sql("spark") == window_sql:
                struct: exp.Expr = exp.maybe_parse(
                    "named_struct('start', window_start, 'end', window_end)", dialect="spark"
                )
                projection.append(
                    ast.SelectItem(
                        expr=self.expr(struct), alias=self.name(alias or "window"), span=self.span
                    )
                )
            elif isinstance(inner, exp.Column) and inner.name in key_names:
                projection.append(self.item(item))
            else:
                raise _Unsupported(
                    f"'{inner.sql('spark')}' (neither grouped nor aggregated)",
                    self.expr(inner).span,
                    help="add it to GROUP BY or wrap it in an aggregate",
                )
        if not aggregates:
            raise _Unsupported("GROUP BY without aggregates", self.span, help="use DISTINCT")
        steps.append(ast.Aggregate(items=tuple(aggregates), **fields))  # type: ignore[arg-type]
        having = tree.args.get("having")
        if having is not None:
            condition = having.this.copy()
            for agg in aggregates:
                for node in list(condition.find_all(exp.AggFunc)):
                    if node.sql("spark") == agg.expr.tree.sql("spark") and agg.alias is not None:
                        node.replace(exp.column(agg.alias.value))
            steps.append(ast.Where(condition=self.expr(condition), **fields))  # type: ignore[arg-type]
        steps.append(ast.Select(items=tuple(projection), **fields))  # type: ignore[arg-type]
        return steps
