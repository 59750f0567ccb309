"""The AST of one statement, built from the grammar's rules as they are reduced (by
:class:`flowc.syntax.lalr.Driver`) or from the tree Lark made; SQL parts go to sqlglot, and the
steps and tokens built are counted against flowc's bounds.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from sqlglot import exp
from sqlglot.errors import ParseError, SqlglotError

from flowc import ast
from flowc.diagnostics import Reporter
from flowc.errorcodes import Code
from flowc.fast_dataclass import dataclass
from flowc.limits import MAX_NESTING, MAX_TOKENS
from flowc.spans import Span, text_span
from flowc.sql.flink_dialect import FLINK, flink_column_type
from flowc.sql.flink_functions import rewrite_flink
from flowc.sql.sql_parsing import (
    LONG_EXPRESSION,
    TooDeep,
    bare_column,
    count_tokens,
    parse_sql,
    sql_keywords,
)
from flowc.syntax.lalr import Bounds, Token
from flowc.syntax.source_text import LineIndex
from flowc.syntax.syntax_errors import first_line, report_sqlglot_error
from flowc.vocabulary import JoinKind, LiteralKind, Partitioner, WindowKind

if TYPE_CHECKING:
    import lark

#: Deepest nesting accepted in one expression (flowc.limits.MAX_NESTING).
MAX_EXPRESSION_DEPTH = MAX_NESTING

DEFAULT_DIALECT = "spark"


_BARE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

#: What sqlglot parses that is a statement, not an expression.
_STATEMENTS = (exp.Command, exp.DDL, exp.DML, exp.Set, exp.Use)


def query_steps(tree: exp.Expr) -> int:
    """The steps a SQL query becomes, about (see flowc.sql.lower_sql): one for the SELECT list,
    one per JOIN, WHERE, HAVING and DISTINCT, two for a GROUP BY; a UNION's sides' sum."""
    steps = 0
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, exp.SetOperation):
            stack.extend(side for side in (node.this, node.expression) if side is not None)
            continue
        args = node.args
        steps += 1 + len(args.get("joins") or ())
        steps += sum(1 for clause in ("where", "having", "distinct") if args.get(clause))
        steps += 2 if args.get("group") else 0
    return steps


@dataclass(frozen=True, slots=True, kw_only=True)
class ShownQuery:
    """A query written as a statement, before :func:`flowc.syntax.parser.parse` names the
    console sink that shows its result (the names of the whole file are known then)."""

    query: ast.Query
    text: str
    span: Span


class _Failed:
    """A part whose problem is reported, so the statement it is in is dropped."""


_FAILED = _Failed()


class AstBuilder:
    """Lark tree of one statement → AST node. ``base`` is the statement's offset in the file.

    A plain post-order walk calling ``rule(meta, children)``: Lark's Transformer with
    ``v_args(meta=True)`` wraps every call, which costs a third of the parse on big files.
    """

    def __init__(self, index: LineIndex, reporter: Reporter) -> None:
        self.index = index
        self.reporter = reporter
        self.base = 0
        #: The statement's text being built (``index.text`` from ``base`` on, or the same
        #: with a MATCH_RECOGNIZE clause replaced by its hidden view's name).
        self.source = index.text
        self.dialect = DEFAULT_DIALECT
        #: Pipe steps and SQL clauses built so far (bounded by MAX_STEPS), and the tokens
        #: of SQL expressions and queries (bounded by MAX_TOKENS).
        self.steps = 0
        self.tokens = 0

    def transform(self, tree: lark.Tree[lark.Token]) -> Any:
        """The node of a tree Lark parsed (the driver builds nodes without trees)."""
        return self._walk(tree)[0]

    def _walk(self, tree: lark.Tree[lark.Token]) -> tuple[Any, int, int]:
        """Build the node of ``tree``; also return the offsets of its first and last token.

        Spans come from the tokens here rather than from Lark's ``propagate_positions``,
        which costs a fifth of the parse.
        """
        from lark import Tree

        children: list[Any] = []
        start = end = -1
        for child in tree.children:
            if isinstance(child, Tree):
                value, first, last = self._walk(child)
                children.append(value)
            elif child is None:
                children.append(None)
                continue
            else:
                first, last = child.start_pos or 0, child.end_pos or 0
                children.append(Token.make(child.type, str(child), first, last))
            if first >= 0:
                if start < 0:
                    start = first
                end = last
        meta = Bounds(start, end)
        return getattr(self, str(tree.data))(meta, children), start, end

    # -- helpers

    def _span(self, meta: Bounds) -> Span:
        if meta.start_pos < 0:
            return self.index.span(self.base, self.base)
        return self.index.span(self.base + meta.start_pos, self.base + meta.end_pos)

    def _token_span(self, token: Token) -> Span:
        start = self.base + (token.start_pos or 0)
        return self.index.span(start, start + len(str(token)))

    def _text(self, meta: Bounds) -> str:
        return self.source[meta.start_pos : meta.end_pos]

    @staticmethod
    def _options(node: Any) -> tuple[tuple[ast.Option, ...], Span | None]:
        if node is None:
            return (), None
        options, span = node
        return options, span

    def _step(self, meta: Bounds, keyword: Token, options: Any) -> dict[str, Any]:
        self.steps += 1
        hints, hints_span = self._options(options)
        return {
            "keyword_span": self._token_span(keyword),
            "hints": hints,
            "hints_span": hints_span,
            "span": self._span(meta),
        }

    def _sql(self, text: str, span: Span, statement: bool) -> exp.Expr | None:
        bare = not statement and _BARE_NAME.fullmatch(text)
        if bare and text.upper() not in sql_keywords(self.dialect):
            # A bare column name, the commonest expression: no need for sqlglot's parser.
            self.tokens += 1
            return bare_column(text)
        if len(text) > LONG_EXPRESSION:
            counted = count_tokens(text)
            if self.tokens + counted > MAX_TOKENS:
                self.tokens += counted  # too large to parse: parse() reports it
                return None
        try:
            # Flink's rewrite below changes the tree in place: it needs a tree of its own.
            tree, tokens = parse_sql(text, self.dialect, own=self.dialect == FLINK)
        except TooDeep as error:
            self.reporter.error(
                Code.E0004,
                f"{'query' if statement else 'expression'} {error}",
                text_span(text, span, error.start, error.end),
                help="split it into several steps, or name parts with EXTEND",
            )
            return None
        except ParseError as error:
            report_sqlglot_error(self.reporter, error, text, span, self.dialect)
            return None
        except SqlglotError as error:
            self.reporter.error(Code.E0003, f"invalid SQL: {first_line(str(error))}", span)
            return None
        except RecursionError:
            self.reporter.error(
                Code.E0004,
                "expression is too deeply nested or too long to compile",
                span,
                help="split it into several steps",
            )
            return None
        except ValueError as error:
            self.reporter.error(Code.E0003, f"invalid SQL: {first_line(str(error))}", span)
            return None
        except (AttributeError, IndexError, KeyError, TypeError):
            # sqlglot's function builders assume well-formed calls: map(k) has no value
            self.reporter.error(
                Code.E0003,
                "invalid SQL: cannot parse this expression",
                span,
                help="check the arguments of its functions",
            )
            return None
        self.tokens += tokens
        if isinstance(tree, _STATEMENTS):
            self.reporter.error(
                Code.E0003,
                "invalid SQL: a statement is not allowed here",
                span,
                help="end the previous statement with ';'"
                if statement
                else "write an expression here",
            )
            return None
        if isinstance(tree, exp.Query) != statement:
            what = "a query" if statement else "an expression"
            self.reporter.error(Code.E0003, f"invalid SQL: expected {what} here", span)
            return None
        if self.dialect == FLINK:  # Flink's meaning of names Spark gives another one
            return rewrite_flink(tree, text, span, self.reporter, whole_query=statement)
        return tree

    def _plain(self, expr: ast.SqlExpr | None) -> ast.SqlExpr | None:
        """Reject ``expr word`` (sqlglot reads it as an alias) where no alias belongs."""
        if expr is None or not isinstance(expr.tree, exp.Alias):
            return expr
        self.reporter.error(
            Code.E0003,
            f"invalid SQL expression: unexpected '{expr.tree.alias}' after the expression",
            expr.span,
            help="remove it, or join the two parts with an operator",
        )
        return None

    # -- names, options, types

    def name(self, meta: Bounds, children: list[Token]) -> ast.Name:
        token = children[0]
        value = str(token)
        quoted = token.type == "QUOTED_NAME"
        if quoted:
            value = value[1:-1].replace("``", "`")
        return ast.Name(value=value, quoted=quoted, span=self._span(meta))

    def option_key(self, meta: Bounds, children: list[Token]) -> tuple[str, Span]:
        if len(children) == 1 and children[0].type == "STRING":
            key = str(
                ast.Value(
                    kind=LiteralKind.STRING, text=str(children[0]), span=self._span(meta)
                ).python
            )
        else:
            parts = []
            for token in children:
                part = str(token)
                if token.type == "QUOTED_NAME":
                    part = part[1:-1].replace("``", "`")
                parts.append(part)
            key = ".".join(parts)
        return key, self._span(meta)

    def option_value(self, meta: Bounds, children: list[Token]) -> ast.Value:
        span = self._span(meta)
        first = children[0]
        if first.type == "STRING":
            return ast.Value(kind=LiteralKind.STRING, text=str(first), span=span)
        if first.type == "MINUS":
            return ast.Value(kind=LiteralKind.NUMBER, text="-" + str(children[1]), span=span)
        if first.type == "NUMBER":
            return ast.Value(kind=LiteralKind.NUMBER, text=str(first), span=span)
        return ast.Value(kind=LiteralKind.WORD, text=str(first), span=span)

    def option(self, meta: Bounds, children: list[Any]) -> ast.Option:
        (key, key_span), value = children
        return ast.Option(key=key, key_span=key_span, value=value, span=self._span(meta))

    def options(self, meta: Bounds, children: list[Any]) -> tuple[tuple[ast.Option, ...], Span]:
        return tuple(c for c in children if isinstance(c, ast.Option)), self._span(meta)

    def type(self, meta: Bounds, children: list[Any]) -> Bounds:
        """Only where the type is: its text is taken where it is used, once, and not again for
        each type nested in it (which would cost the square of its length)."""
        return meta

    def _type_ref(self, meta: Bounds) -> ast.TypeRef | None:
        """The type at ``meta``; None (and E0004) if it nests past the bound, which keeps
        sqlglot's recursive type parser far from Python's stack limit."""
        text = self._text(meta)
        span = self._span(meta)
        depth = 0
        quoted = False
        for offset, char in enumerate(text):
            if char == "`":
                quoted = not quoted
            elif quoted:
                continue
            elif char in "<(":
                depth += 1
                if depth > MAX_NESTING:
                    self.reporter.error(
                        Code.E0004,
                        f"type nests {depth} deep; at most {MAX_NESTING} are allowed",
                        text_span(text, span, offset, offset + 1),
                        help="flatten the type: a STRUCT of fewer levels",
                    )
                    return None
            elif char in ">)":
                depth -= 1
        if self.dialect == FLINK:
            text = flink_column_type(text)
        return ast.TypeRef(text=text, span=span)

    def type_arg(self, meta: Bounds, children: list[Any]) -> None:
        return None

    # -- statements

    def statement(self, meta: Bounds, children: list[Any]) -> ast.Statement | None:
        node: ast.Statement | None = children[0]
        return node

    def set_stmt(self, meta: Bounds, children: list[Any]) -> ast.SetStmt:
        _, (key, key_span), value = children
        span = self._span(meta)
        option = ast.Option(
            key=key, key_span=key_span, value=value, span=key_span.cover(value.span)
        )
        return ast.SetStmt(option=option, span=span)

    def column_def(self, meta: Bounds, children: list[Any]) -> ast.ColumnDef | _Failed:
        name, where = children
        type_ref = self._type_ref(where)
        if type_ref is None:
            return _FAILED
        return ast.ColumnDef(name=name, type=type_ref, span=self._span(meta))

    def watermark_def(self, meta: Bounds, children: list[Any]) -> ast.WatermarkDef | None:
        _, _, column, _, expr = children
        expr = self._plain(expr)
        if expr is None:
            return None
        return ast.WatermarkDef(column=column, expr=expr, span=self._span(meta))

    def computed_column(self, meta: Bounds, children: list[Any]) -> ast.ComputedColumn | None:
        name, _, expr = children
        expr = self._plain(expr)
        if expr is None:
            return None
        return ast.ComputedColumn(name=name, expr=expr, span=self._span(meta))

    def table_column(
        self, meta: Bounds, children: list[Any]
    ) -> tuple[ast.ColumnDef, ast.PrimaryKey | None] | _Failed:
        """A table's column; its inline ``PRIMARY KEY NOT ENFORCED`` comes with it."""
        name, where, not_null = children[0], children[1], children[2]
        type_ref = self._type_ref(where)
        if type_ref is None:
            return _FAILED
        key_word = next(
            (c for c in children[3:] if isinstance(c, Token) and c.type == "PRIMARY"), None
        )
        key = None
        if key_word is not None:
            key = ast.PrimaryKey(
                columns=(name,),
                span=self.index.span(
                    self.base + key_word.start_pos, self.base + children[6].end_pos
                ),
            )
        column = ast.ColumnDef(name=name, type=type_ref, span=self._span(meta), not_null=not_null)
        return column, key

    def nullability(self, meta: Bounds, children: list[Any]) -> Span | None:
        """The span of ``NOT NULL``; None for ``NULL`` (a column's default)."""
        return self._span(meta) if children[0] is not None else None

    def metadata_column(self, meta: Bounds, children: list[Any]) -> None:
        self.reporter.error(
            Code.E0292,
            f"metadata column '{children[0].value}': flowc's connectors expose no metadata",
            self._span(meta),
            help="remove it; a file's name or a record's time must be a column of the data",
        )

    def table_key(self, meta: Bounds, children: list[Any]) -> ast.PrimaryKey:
        names = [c for c in children if isinstance(c, ast.Name)]
        if children[0] is not None:  # CONSTRAINT name
            names = names[1:]
        return ast.PrimaryKey(columns=tuple(names), span=self._span(meta))

    def if_not_exists(self, meta: Bounds, children: list[Any]) -> None:
        return None

    def statement_set(self, meta: Bounds, children: list[Any]) -> None:
        """``BEGIN STATEMENT SET``, ``EXECUTE STATEMENT SET BEGIN`` and ``END``: the
        INSERTs between them run as if written alone (every INSERT of a file is one job)."""
        return None

    def create_source(self, meta: Bounds, children: list[Any]) -> ast.CreateSource | None:
        if any(c is _FAILED for c in children):
            return None
        kind = next(c for c in children if isinstance(c, Token) and c.type in ("SOURCE", "TABLE"))
        name = next(c for c in children if isinstance(c, ast.Name))
        elements = [c for c in children[children.index(name) + 1 : -1] if c is not None]
        columns: list[ast.ColumnDef] = []
        keys: list[ast.PrimaryKey] = []
        for element in elements:
            if isinstance(element, tuple):
                columns.append(element[0])
                if element[1] is not None:
                    keys.append(element[1])
            elif isinstance(element, ast.PrimaryKey):
                keys.append(element)
        for extra in keys[1:]:
            self.reporter.error(
                Code.E0293,
                f"'{name.value}' has a PRIMARY KEY already",
                extra.span,
                help=f"a table has one primary key (of several columns: PRIMARY KEY (a, b) NOT "
                f"ENFORCED); the first is at {keys[0].span}",
            )
        options, _ = self._options(children[-1])
        return ast.CreateSource(
            name=name,
            columns=tuple(columns),
            watermarks=tuple(e for e in elements if isinstance(e, ast.WatermarkDef)),
            options=options,
            span=self._span(meta),
            bounded=str(kind).lower() == "table",
            computed=tuple(e for e in elements if isinstance(e, ast.ComputedColumn)),
            primary_key=keys[0] if keys else None,
            partitioned_by=next((e for e in elements if isinstance(e, ast.PartitionedBy)), None),
        )

    def partitioned_by(self, meta: Bounds, children: list[Any]) -> ast.PartitionedBy:
        columns = tuple(c for c in children if isinstance(c, ast.Name))
        return ast.PartitionedBy(columns=columns, span=self._span(meta))

    def create_sink(self, meta: Bounds, children: list[Any]) -> ast.CreateSink | None:
        if any(c is _FAILED for c in children):
            return None
        name = children[2]
        columns = tuple(c for c in children[3:-1] if isinstance(c, ast.ColumnDef))
        options, _ = self._options(children[-1])
        return ast.CreateSink(
            name=name, columns=columns or None, options=options, span=self._span(meta)
        )

    def create_view(self, meta: Bounds, children: list[Any]) -> ast.CreateView | None:
        if children[-1] is None:
            return None
        name = next(c for c in children if isinstance(c, ast.Name))
        return ast.CreateView(name=name, query=children[-1], span=self._span(meta))

    def function_signature(
        self, meta: Bounds, children: list[Any]
    ) -> ast.FunctionSignature | _Failed:
        params = tuple(c for c in children if isinstance(c, ast.ColumnDef))
        if any(c is _FAILED for c in children):
            return _FAILED
        returns = self._type_ref(children[-1])
        if returns is None:
            return _FAILED
        return ast.FunctionSignature(params=params, returns=returns, span=self._span(meta))

    def create_function(self, meta: Bounds, children: list[Any]) -> ast.CreateFunction | None:
        if children[3] is _FAILED:
            return None
        tokens = [c for c in children if isinstance(c, Token)]
        target = next(t for t in tokens if t.type == "STRING")
        language = next((c for c in children[3:] if isinstance(c, ast.Name)), None)
        signature = children[3] if isinstance(children[3], ast.FunctionSignature) else None
        return ast.CreateFunction(
            name=children[2],
            signature=signature,
            language=language,
            target=ast.Value(
                kind=LiteralKind.STRING, text=str(target), span=self._token_span(target)
            ),
            span=self._span(meta),
        )

    def query_stmt(self, meta: Bounds, children: list[Any]) -> ShownQuery | None:
        if children[0] is None:
            return None
        return ShownQuery(query=children[0], text=self._text(meta), span=self._span(meta))

    def insert_stmt(self, meta: Bounds, children: list[Any]) -> ast.Insert | None:
        if children[3] is None:
            return None
        return ast.Insert(sink=children[2], query=children[3], span=self._span(meta))

    # -- queries

    def relation(self, meta: Bounds, children: list[Any]) -> ast.Relation:
        return ast.Relation(name=children[0], side_output=children[1], span=self._span(meta))

    def pipe_query(self, meta: Bounds, children: list[Any]) -> ast.PipeQuery | None:
        steps = [c for c in children[2:] if not isinstance(c, Token)]
        if any(s is None for s in steps):
            return None
        return ast.PipeQuery(source=children[1], steps=tuple(steps), span=self._span(meta))

    def sql_query(self, meta: Bounds, children: list[Any]) -> ast.SqlQuery | None:
        span = self._span(meta)
        text = self._text(meta)
        tree = self._sql(text, span, statement=True)
        if tree is None:
            return None
        self.steps += query_steps(tree)
        return ast.SqlQuery(text=text, tree=tree, span=span, dialect=self.dialect)

    def expr(self, meta: Bounds, children: list[Token]) -> ast.SqlExpr | None:
        span = self._span(meta)
        text = self._text(meta)
        tree = self._sql(text, span, statement=False)
        if tree is None:
            return None
        return ast.SqlExpr(text=text, tree=tree, span=span)

    def select_item(self, meta: Bounds, children: list[Any]) -> ast.SelectItem | None:
        expr, _, alias = children
        if expr is None:
            return None
        if alias is not None:
            expr = self._plain(expr)
            if expr is None:
                return None
        if alias is None and isinstance(expr.tree, exp.Alias):
            alias_text = expr.tree.alias
            alias = ast.Name(value=alias_text, quoted=False, span=expr.span)
            expr = ast.SqlExpr(text=expr.text, tree=expr.tree.this, span=expr.span)
        return ast.SelectItem(expr=expr, alias=alias, span=self._span(meta))

    def set_item(self, meta: Bounds, children: list[Any]) -> ast.SetItem | None:
        column, expr = children
        expr = self._plain(expr)
        if expr is None:
            return None
        return ast.SetItem(column=column, expr=expr, span=self._span(meta))

    def rename_item(self, meta: Bounds, children: list[Any]) -> ast.RenameItem:
        old, _, new = children
        return ast.RenameItem(old=old, new=new, span=self._span(meta))

    def route_branch(self, meta: Bounds, children: list[Any]) -> ast.RouteBranch | None:
        name, _, condition = children
        condition = self._plain(condition)
        if condition is None:
            return None
        return ast.RouteBranch(name=name, condition=condition, span=self._span(meta))

    # -- steps (None when a part failed to parse; the error is already reported)

    def where_step(self, meta: Bounds, children: list[Any]) -> ast.Where | None:
        keyword, condition, options = children
        condition = self._plain(condition)
        if condition is None:
            return None
        return ast.Where(condition=condition, **self._step(meta, keyword, options))

    def select_step(self, meta: Bounds, children: list[Any]) -> ast.Select | None:
        items = children[1:-1]
        if any(i is None for i in items):
            return None
        return ast.Select(items=tuple(items), **self._step(meta, children[0], children[-1]))

    def extend_step(self, meta: Bounds, children: list[Any]) -> ast.Extend | None:
        items = children[1:-1]
        if any(i is None for i in items):
            return None
        return ast.Extend(items=tuple(items), **self._step(meta, children[0], children[-1]))

    def set_step(self, meta: Bounds, children: list[Any]) -> ast.Set | None:
        items = children[1:-1]
        if any(i is None for i in items):
            return None
        return ast.Set(items=tuple(items), **self._step(meta, children[0], children[-1]))

    def drop_step(self, meta: Bounds, children: list[Any]) -> ast.Drop:
        return ast.Drop(
            columns=tuple(children[1:-1]), **self._step(meta, children[0], children[-1])
        )

    def rename_step(self, meta: Bounds, children: list[Any]) -> ast.Rename:
        return ast.Rename(
            items=tuple(children[1:-1]), **self._step(meta, children[0], children[-1])
        )

    def explode_step(self, meta: Bounds, children: list[Any]) -> ast.Explode | None:
        keyword, expr, _, alias, options = children
        expr = self._plain(expr)
        if expr is None:
            return None
        return ast.Explode(expr=expr, alias=alias, **self._step(meta, keyword, options))

    def key_by_step(self, meta: Bounds, children: list[Any]) -> ast.KeyBy | None:
        keys = [self._plain(k) for k in children[2:-1]]
        plain = [k for k in keys if k is not None]
        if len(plain) != len(keys):
            return None
        return ast.KeyBy(keys=tuple(plain), **self._step(meta, children[0], children[-1]))

    def partition_step(self, meta: Bounds, children: list[Any]) -> ast.Partition:
        keyword, options = children
        return ast.Partition(
            kind=Partitioner(str(keyword).upper()), **self._step(meta, keyword, options)
        )

    def partition_by_step(self, meta: Bounds, children: list[Any]) -> ast.PartitionBy | None:
        keyword, _, expr, options = children
        expr = self._plain(expr)
        if expr is None:
            return None
        return ast.PartitionBy(expr=expr, **self._step(meta, keyword, options))

    def window_step(self, meta: Bounds, children: list[Any]) -> ast.Window | None:
        keyword, kind = children[0], children[1]
        args = [self._plain(c) for c in children[2:-1] if not isinstance(c, Token)]
        plain = [a for a in args if a is not None]
        if len(plain) != len(args):
            return None
        return ast.Window(
            kind=WindowKind(str(kind).upper()),
            args=tuple(plain),
            **self._step(meta, keyword, children[-1]),
        )

    def aggregate_step(self, meta: Bounds, children: list[Any]) -> ast.Aggregate | None:
        items = children[1:-1]
        if any(i is None for i in items):
            return None
        return ast.Aggregate(items=tuple(items), **self._step(meta, children[0], children[-1]))

    def order_item(self, meta: Bounds, children: list[Any]) -> ast.OrderItem | None:
        expr = self._plain(children[0])
        if expr is None:
            return None
        direction = children[1] if len(children) > 1 else None
        descending = direction is not None and str(direction).lower() == "desc"
        return ast.OrderItem(expr=expr, descending=descending, span=self._span(meta))

    def top_step(self, meta: Bounds, children: list[Any]) -> ast.Top | None:
        keyword, count, options = children[0], children[1], children[-1]
        order: list[ast.OrderItem] = []
        per: list[ast.SqlExpr] = []
        rank: ast.Name | None = None
        after_per = False
        for item in children[3:-1]:
            if isinstance(item, Token):
                after_per = after_per or item.type == "PER"
            elif isinstance(item, ast.OrderItem):
                order.append(item)
            elif isinstance(item, ast.Name):
                rank = item
            elif isinstance(item, ast.SqlExpr) and after_per:
                plain = self._plain(item)
                if plain is None:
                    return None
                per.append(plain)
        if any(i is None for i in children[3:-1] if not isinstance(i, Token)) and not order:
            return None
        text = str(count)
        return ast.Top(
            count=int(text) if text.isdigit() else -1,
            count_span=self._token_span(count),
            order=tuple(order),
            per=tuple(per),
            rank=rank,
            **self._step(meta, keyword, options),
        )

    def deduplicate_step(self, meta: Bounds, children: list[Any]) -> ast.Deduplicate | None:
        keyword, options = children[0], children[-1]
        columns: list[Any] = []
        within = None
        rest = children[1:-1]
        i = 0
        while i < len(rest):
            item = rest[i]
            if isinstance(item, Token) and item.type == "WITHIN":
                within = self._plain(rest[i + 1])
                if within is None:
                    return None
                i += 2
                continue
            if isinstance(item, Token) or item is None:
                i += 1
                continue
            if self._plain(item) is None:
                return None
            columns.append(item)
            i += 1
        return ast.Deduplicate(
            columns=tuple(columns), within=within, **self._step(meta, keyword, options)
        )

    def join_step(self, meta: Bounds, children: list[Any]) -> ast.Join | None:
        kind_token, _outer, join_token, right, _on, condition, options = children
        condition = self._plain(condition)
        if _on is not None and condition is None:
            return None
        kind = JoinKind(str(kind_token).upper()) if kind_token is not None else JoinKind.INNER
        first = kind_token if kind_token is not None else join_token
        return ast.Join(
            kind=kind, right=right, condition=condition, **self._step(meta, first, options)
        )

    def union_step(self, meta: Bounds, children: list[Any]) -> ast.UnionAll:
        return ast.UnionAll(
            others=tuple(children[2:-1]), **self._step(meta, children[0], children[-1])
        )

    def route_step(self, meta: Bounds, children: list[Any]) -> ast.Route | None:
        branches = children[1:-1]
        if any(b is None for b in branches):
            return None
        return ast.Route(branches=tuple(branches), **self._step(meta, children[0], children[-1]))
