"""The parser: AST node types, names and spans for every statement, step and hint.

Positions are computed from the source text here (``where``), independently of the
parser's own offset bookkeeping: 1-based lines and columns, the end column one past the
last character (as the diagnostics renderer draws carets).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from sqlglot import exp

import flowc
from flowc import ast
from flowc.diagnostics import Reporter
from flowc.spans import Span
from flowc.syntax.parser import MAX_EXPRESSION_DEPTH, parse

FILE = "grammar.flow"


def parse_ok(text: str) -> ast.Program:
    reporter = Reporter()
    program = parse(text, FILE, reporter)
    assert reporter.diagnostics == [], reporter.diagnostics
    return program


def parse_errors(text: str) -> tuple[ast.Program, list[flowc.Diagnostic]]:
    reporter = Reporter()
    program = parse(text, FILE, reporter)
    return program, reporter.diagnostics


def where(
    text: str, needle: str, nth: int = 1, part: str | None = None
) -> tuple[int, int, int, int]:
    """(line, column, end_line, end_column) of the nth occurrence of ``needle``.

    With ``part``, the position of ``part`` inside that occurrence.
    """
    offset = -1
    for _ in range(nth):
        offset = text.index(needle, offset + 1)
    if part is not None:
        offset += needle.index(part)
        needle = part

    def position(at: int) -> tuple[int, int]:
        line = text.count("\n", 0, at) + 1
        return line, at - (text.rfind("\n", 0, at) + 1) + 1

    return (*position(offset), *position(offset + len(needle)))


def at(span: Span) -> tuple[int, int, int, int]:
    return span.line, span.column, span.end_line, span.end_column


def start(span: Span) -> tuple[int, int]:
    return span.line, span.column


def only_step(text: str) -> ast.Step:
    program = parse_ok(text)
    query = program.statements[-1].query
    assert isinstance(query, ast.PipeQuery)
    assert len(query.steps) == 1
    return query.steps[0]


def insert(step_text: str) -> str:
    return f"INSERT INTO o FROM s |> {step_text};"


# ---------------------------------------------------------------- statements


def test_set_statement_key_value_and_spans() -> None:
    text = "SET checkpoint.interval = 10s;\nSET job.name = 'it''s';\nSET parallelism = -3;\n"
    first, second, third = parse_ok(text).statements
    assert isinstance(first, ast.SetStmt)
    option = first.option
    assert option.key == "checkpoint.interval"
    assert at(option.key_span) == where(text, "checkpoint.interval")
    assert (option.value.kind, option.value.text) == ("number", "10s")
    assert at(option.value.span) == where(text, "10s")
    assert at(option.span) == where(text, "checkpoint.interval = 10s")
    assert at(first.span)[:2] == (1, 1)
    assert isinstance(second, ast.SetStmt)
    assert second.option.value.kind == "string"
    assert second.option.value.python == "it's"
    assert isinstance(third, ast.SetStmt)
    assert (third.option.value.kind, third.option.value.python) == ("number", -3)


def test_option_keys_may_be_quoted_parts_or_strings() -> None:
    text = "SET spark.`odd-key`.x = true;\nSET 'a b' = word;\n"
    first, second = parse_ok(text).statements
    assert isinstance(first, ast.SetStmt) and isinstance(second, ast.SetStmt)
    assert first.option.key == "spark.odd-key.x"
    assert at(first.option.key_span) == where(text, "spark.`odd-key`.x")
    assert (first.option.value.kind, first.option.value.python) == ("word", "true")
    assert second.option.key == "a b"
    assert (second.option.value.kind, second.option.value.text) == ("word", "word")


@pytest.mark.parametrize(
    ("literal", "kind", "python"),
    [
        ("'plain'", "string", "plain"),
        ("'it''s'", "string", "it's"),
        ("'tab\\there'", "string", "tab\there"),
        ('"double"', "string", "double"),
        ("42", "number", 42),
        ("2.5", "number", 2.5),
        ("-7", "number", -7),
        ("500ms", "number", "500ms"),
        ("streaming", "word", "streaming"),
    ],
)
def test_option_values(literal: str, kind: str, python: object) -> None:
    text = f"SET x = {literal};"
    (statement,) = parse_ok(text).statements
    assert isinstance(statement, ast.SetStmt)
    value = statement.option.value
    assert (value.kind, value.python) == (kind, python)
    assert at(value.span) == where(text, literal)


def test_create_source_columns_watermark_and_options() -> None:
    text = (
        "CREATE SOURCE clicks (\n"
        "  user_id STRING,\n"
        "  price   DECIMAL(12, 2),\n"
        "  tags    ARRAY<STRING>,\n"
        "  ts      TIMESTAMP,\n"
        "  WATERMARK FOR ts AS ts - INTERVAL 5 SECONDS\n"
        ") WITH (connector = 'files', path = 'data/clicks', parallelism = 2, uid = 'src');\n"
    )
    (source,) = parse_ok(text).statements
    assert isinstance(source, ast.CreateSource)
    assert source.name.value == "clicks"
    assert at(source.name.span) == where(text, "clicks")
    assert [(c.name.value, c.type.text) for c in source.columns] == [
        ("user_id", "STRING"),
        ("price", "DECIMAL(12, 2)"),
        ("tags", "ARRAY<STRING>"),
        ("ts", "TIMESTAMP"),
    ]
    price = source.columns[1]
    assert at(price.name.span) == where(text, "price")
    assert at(price.type.span) == where(text, "DECIMAL(12, 2)")
    assert at(price.span) == where(text, "price   DECIMAL(12, 2)")
    (watermark,) = source.watermarks
    assert watermark.column.value == "ts"
    assert at(watermark.column.span) == where(text, "FOR ts", part="ts")
    assert watermark.expr.text == "ts - INTERVAL 5 SECONDS"
    assert isinstance(watermark.expr.tree, exp.Sub)
    assert at(watermark.expr.span) == where(text, "ts - INTERVAL 5 SECONDS")
    assert at(watermark.span) == where(text, "WATERMARK FOR ts AS ts - INTERVAL 5 SECONDS")
    # Hints of a source are options like the connector's own.
    assert [(o.key, o.value.python) for o in source.options] == [
        ("connector", "files"),
        ("path", "data/clicks"),
        ("parallelism", 2),
        ("uid", "src"),
    ]
    parallelism = source.options[2]
    assert at(parallelism.key_span) == where(text, "parallelism")
    assert at(parallelism.value.span) == where(text, "2, uid", part="2")
    assert at(parallelism.span) == where(text, "parallelism = 2")
    assert start(source.span) == (1, 1)
    assert source.span.end_line == 7


def test_create_source_without_options_or_columns() -> None:
    (source,) = parse_ok("CREATE SOURCE s ();").statements
    assert isinstance(source, ast.CreateSource)
    assert (source.columns, source.watermarks, source.options) == ((), (), ())


def test_create_sink_with_and_without_columns() -> None:
    text = (
        "CREATE SINK a WITH (connector = 'console', mode = 'update', parallelism = 1);\n"
        "CREATE SINK b (k BIGINT, n BIGINT) WITH (connector = 'noop');\n"
    )
    a, b = parse_ok(text).statements
    assert isinstance(a, ast.CreateSink) and isinstance(b, ast.CreateSink)
    assert a.name.value == "a"
    assert a.columns is None
    assert [o.key for o in a.options] == ["connector", "mode", "parallelism"]
    assert at(a.options[2].key_span) == where(text, "parallelism")
    assert b.columns is not None
    assert [(c.name.value, c.type.text) for c in b.columns] == [("k", "BIGINT"), ("n", "BIGINT")]
    assert at(b.columns[1].span) == where(text, "n BIGINT")
    assert b.span.line == 2


def test_create_view_and_insert() -> None:
    text = "CREATE VIEW v AS FROM s |> WHERE k > 0;\nINSERT INTO o FROM v;\n"
    view, insert_stmt = parse_ok(text).statements
    assert isinstance(view, ast.CreateView)
    assert view.name.value == "v"
    assert at(view.name.span) == where(text, "v AS", part="v")
    assert isinstance(view.query, ast.PipeQuery)
    assert view.query.source.name.value == "s"
    assert at(view.query.span) == where(text, "FROM s |> WHERE k > 0")
    assert isinstance(insert_stmt, ast.Insert)
    assert insert_stmt.sink.value == "o"
    assert at(insert_stmt.sink.span) == where(text, "o FROM", part="o")
    assert isinstance(insert_stmt.query, ast.PipeQuery)
    assert insert_stmt.query.steps == ()
    assert at(insert_stmt.query.source.span) == where(text, "v;", part="v")
    assert at(insert_stmt.span) == where(text, "INSERT INTO o FROM v")


def test_relation_with_side_output() -> None:
    text = "INSERT INTO o FROM routed.large |> UNION ALL a.b, c;"
    (statement,) = parse_ok(text).statements
    assert isinstance(statement, ast.Insert)
    query = statement.query
    assert isinstance(query, ast.PipeQuery)
    relation = query.source
    assert relation.name.value == "routed"
    assert relation.side_output is not None
    assert relation.side_output.value == "large"
    assert relation.text == "routed.large"
    assert at(relation.side_output.span) == where(text, "large")
    assert at(relation.span) == where(text, "routed.large")
    (union,) = query.steps
    assert isinstance(union, ast.UnionAll)
    assert [r.text for r in union.others] == ["a.b", "c"]
    assert union.others[1].side_output is None


def test_sql_select_query() -> None:
    text = "CREATE VIEW v AS\n  SELECT k, count(*) AS n\n  FROM s\n  GROUP BY k;\n"
    (view,) = parse_ok(text).statements
    assert isinstance(view, ast.CreateView)
    query = view.query
    assert isinstance(query, ast.SqlQuery)
    assert query.text == "SELECT k, count(*) AS n\n  FROM s\n  GROUP BY k"
    assert isinstance(query.tree, exp.Select)
    assert at(query.span) == (2, 3, 4, 13)


def test_program_span_statement_order_and_file_name() -> None:
    text = "SET parallelism = 2;\nCREATE SINK o WITH (connector = 'noop');\nINSERT INTO o FROM s;\n"
    program = parse_ok(text)
    assert program.file == FILE
    assert [type(s).__name__ for s in program.statements] == ["SetStmt", "CreateSink", "Insert"]
    assert at(program.span) == (1, 1, 4, 1)


# ---------------------------------------------------------------- pipe steps

STEP_CASES = [
    ("WHERE k > 0", ast.Where, "WHERE"),
    ("SELECT k, v AS w", ast.Select, "SELECT"),
    ("EXTEND k + 1 AS j", ast.Extend, "EXTEND"),
    ("SET a = a + 1, b = 'x'", ast.Set, "SET"),
    ("DROP a, b", ast.Drop, "DROP"),
    ("RENAME a AS b, c AS d", ast.Rename, "RENAME"),
    ("EXPLODE tags AS tag", ast.Explode, "EXPLODE"),
    ("KEY BY a, lower(b)", ast.KeyBy, "KEY"),
    ("REBALANCE", ast.Partition, "REBALANCE"),
    ("RESCALE", ast.Partition, "RESCALE"),
    ("SHUFFLE", ast.Partition, "SHUFFLE"),
    ("BROADCAST", ast.Partition, "BROADCAST"),
    ("GLOBAL", ast.Partition, "GLOBAL"),
    ("FORWARD", ast.Partition, "FORWARD"),
    ("PARTITION BY k % 4", ast.PartitionBy, "PARTITION"),
    ("WINDOW TUMBLE(ts, INTERVAL 1 MINUTE)", ast.Window, "WINDOW"),
    ("AGGREGATE count(*) AS n", ast.Aggregate, "AGGREGATE"),
    ("DEDUPLICATE ON a WITHIN INTERVAL 1 HOUR", ast.Deduplicate, "DEDUPLICATE"),
    ("JOIN t ON s.k = t.k", ast.Join, "JOIN"),
    ("LEFT OUTER JOIN t ON s.k = t.k", ast.Join, "LEFT"),
    ("UNION ALL a, b", ast.UnionAll, "UNION"),
    ("ROUTE small WHEN k < 10", ast.Route, "ROUTE"),
]


@pytest.mark.parametrize(
    ("step_text", "node_type", "keyword"), STEP_CASES, ids=[c[0] for c in STEP_CASES]
)
def test_every_step_kind(step_text: str, node_type: type, keyword: str) -> None:
    text = insert(step_text)
    step = only_step(text)
    assert type(step) is node_type
    assert at(step.keyword_span) == where(text, keyword)
    assert at(step.span) == where(text, step_text)
    assert step.hints == ()
    assert step.hints_span is None


@pytest.mark.parametrize(
    ("step_text", "node_type", "keyword"), STEP_CASES, ids=[c[0] for c in STEP_CASES]
)
def test_every_step_kind_takes_hints(step_text: str, node_type: type, keyword: str) -> None:
    # The parser accepts hints everywhere; the checker rejects them on partition steps.
    with_hints = f"{step_text} WITH (parallelism = 2, name = 'x')"
    text = insert(with_hints)
    step = only_step(text)
    assert type(step) is node_type
    assert [(h.key, h.value.python) for h in step.hints] == [("parallelism", 2), ("name", "x")]
    assert at(step.hints[0].key_span) == where(text, "parallelism")
    assert at(step.hints[0].value.span) == where(text, "= 2,", part="2")
    assert at(step.hints[1].span) == where(text, "name = 'x'")
    assert step.hints_span is not None
    assert at(step.hints_span) == where(text, "WITH (parallelism = 2, name = 'x')")
    assert at(step.span) == where(text, with_hints)


def test_where_condition() -> None:
    text = insert("WHERE a > 0 AND b IS NOT NULL")
    step = only_step(text)
    assert isinstance(step, ast.Where)
    assert step.condition.text == "a > 0 AND b IS NOT NULL"
    assert isinstance(step.condition.tree, exp.And)
    assert at(step.condition.span) == where(text, "a > 0 AND b IS NOT NULL")


def test_select_and_extend_items() -> None:
    text = insert("SELECT k, lower(v) AS v2, k + 1 j")
    step = only_step(text)
    assert isinstance(step, ast.Select)
    k, v2, j = step.items
    assert (k.expr.text, k.alias) == ("k", None)
    assert at(k.span) == where(text, "k, lower", part="k")
    assert v2.expr.text == "lower(v)"
    assert isinstance(v2.expr.tree, exp.Lower)
    assert v2.alias is not None and v2.alias.value == "v2"
    assert at(v2.alias.span) == where(text, "v2")
    assert at(v2.span) == where(text, "lower(v) AS v2")
    # Spark's implicit alias (no AS) is split off the expression.
    assert j.alias is not None and j.alias.value == "j"
    assert isinstance(j.expr.tree, exp.Add)
    extend = only_step(insert("EXTEND a * 2 AS b"))
    assert isinstance(extend, ast.Extend)
    (item,) = extend.items
    assert (item.expr.text, item.alias and item.alias.value) == ("a * 2", "b")


def test_drop_and_rename() -> None:
    text = insert("DROP a, `b c`")
    drop = only_step(text)
    assert isinstance(drop, ast.Drop)
    assert [(c.value, c.quoted) for c in drop.columns] == [("a", False), ("b c", True)]
    assert at(drop.columns[1].span) == where(text, "`b c`")
    text = insert("RENAME a AS b, c AS d")
    rename = only_step(text)
    assert isinstance(rename, ast.Rename)
    assert [(i.old.value, i.new.value) for i in rename.items] == [("a", "b"), ("c", "d")]
    assert at(rename.items[1].span) == where(text, "c AS d")
    assert at(rename.items[1].new.span) == where(text, "d")


def test_explode_with_and_without_alias() -> None:
    text = insert("EXPLODE split(line, ' ') AS word")
    step = only_step(text)
    assert isinstance(step, ast.Explode)
    assert step.expr.text == "split(line, ' ')"
    assert at(step.expr.span) == where(text, "split(line, ' ')")
    assert step.alias is not None and step.alias.value == "word"
    bare = only_step(insert("EXPLODE tags"))
    assert isinstance(bare, ast.Explode)
    assert bare.alias is None


def test_key_by_and_partition_by() -> None:
    text = insert("KEY BY a, lower(b)")
    step = only_step(text)
    assert isinstance(step, ast.KeyBy)
    assert [k.text for k in step.keys] == ["a", "lower(b)"]
    assert at(step.keys[1].span) == where(text, "lower(b)")
    text = insert("PARTITION BY k % 4")
    step = only_step(text)
    assert isinstance(step, ast.PartitionBy)
    assert step.expr.text == "k % 4"
    assert at(step.expr.span) == where(text, "k % 4")


@pytest.mark.parametrize(
    "kind", ["REBALANCE", "RESCALE", "SHUFFLE", "BROADCAST", "GLOBAL", "FORWARD"]
)
def test_partition_kind_is_upper_case(kind: str) -> None:
    step = only_step(insert(kind.lower()))
    assert isinstance(step, ast.Partition)
    assert step.kind == kind


@pytest.mark.parametrize(
    ("window", "kind", "args"),
    [
        ("tumble(ts, INTERVAL 1 MINUTE)", "TUMBLE", ["ts", "INTERVAL 1 MINUTE"]),
        (
            "HOP(ts, INTERVAL 1 MINUTE, INTERVAL 10 SECONDS)",
            "HOP",
            ["ts", "INTERVAL 1 MINUTE", "INTERVAL 10 SECONDS"],
        ),
        ("Session(ts, '5 minutes')", "SESSION", ["ts", "'5 minutes'"]),
    ],
)
def test_window_kinds_and_arguments(window: str, kind: str, args: list[str]) -> None:
    text = insert(f"WINDOW {window}")
    step = only_step(text)
    assert isinstance(step, ast.Window)
    assert step.kind == kind
    assert [a.text for a in step.args] == args
    for arg in step.args:
        assert at(arg.span) == where(text, arg.text)


def test_aggregate_items() -> None:
    text = insert("AGGREGATE count(*) AS n, sum(v) AS total")
    step = only_step(text)
    assert isinstance(step, ast.Aggregate)
    assert [(i.expr.text, i.alias and i.alias.value) for i in step.items] == [
        ("count(*)", "n"),
        ("sum(v)", "total"),
    ]
    assert isinstance(step.items[1].expr.tree, exp.Sum)
    assert at(step.items[1].span) == where(text, "sum(v) AS total")


@pytest.mark.parametrize(
    ("step_text", "columns", "within"),
    [
        ("DEDUPLICATE", [], None),
        ("DEDUPLICATE ON a, b", ["a", "b"], None),
        ("DEDUPLICATE WITHIN INTERVAL 1 HOUR", [], "INTERVAL 1 HOUR"),
        ("DEDUPLICATE ON a WITHIN '10 minutes'", ["a"], "'10 minutes'"),
    ],
)
def test_deduplicate_forms(step_text: str, columns: list[str], within: str | None) -> None:
    text = insert(step_text)
    step = only_step(text)
    assert isinstance(step, ast.Deduplicate)
    assert [c.text for c in step.columns] == columns
    assert (step.within.text if step.within else None) == within
    if step.within is not None:
        assert at(step.within.span) == where(text, within or "")


@pytest.mark.parametrize(
    ("join", "kind"),
    [
        ("JOIN", "INNER"),
        ("INNER JOIN", "INNER"),
        ("left join", "LEFT"),
        ("LEFT OUTER JOIN", "LEFT"),
        ("RIGHT JOIN", "RIGHT"),
        ("Right Outer Join", "RIGHT"),
        ("FULL JOIN", "FULL"),
        ("FULL OUTER JOIN", "FULL"),
    ],
)
def test_join_kinds(join: str, kind: str) -> None:
    text = insert(f"{join} payments ON orders.id = payments.id")
    step = only_step(text)
    assert isinstance(step, ast.Join)
    assert step.kind == kind
    assert step.right.name.value == "payments"
    assert at(step.right.span) == where(text, "payments")
    assert step.condition is not None
    assert step.condition.text == "orders.id = payments.id"
    assert isinstance(step.condition.tree, exp.EQ)
    assert at(step.keyword_span) == where(text, join.split()[0])


def test_join_without_condition() -> None:
    step = only_step(insert("JOIN t"))
    assert isinstance(step, ast.Join)
    assert step.condition is None


def test_route_branches() -> None:
    text = insert(
        "ROUTE small WHEN k < 10,\n      odd WHEN CASE WHEN k % 2 = 1 THEN true ELSE false END"
    )
    step = only_step(text)
    assert isinstance(step, ast.Route)
    small, odd = step.branches
    assert (small.name.value, small.condition.text) == ("small", "k < 10")
    assert at(small.name.span) == where(text, "small")
    assert at(small.span) == where(text, "small WHEN k < 10")
    assert odd.name.value == "odd"
    assert odd.condition.text == "CASE WHEN k % 2 = 1 THEN true ELSE false END"
    assert isinstance(odd.condition.tree, exp.Case)
    assert at(odd.condition.span) == where(text, odd.condition.text)
    assert odd.span.line == 2


def test_several_steps_in_order() -> None:
    text = (
        "INSERT INTO o\n"
        "  FROM s\n"
        "  |> WHERE k > 0\n"
        "  |> KEY BY k\n"
        "  |> WINDOW TUMBLE(ts, INTERVAL 1 MINUTE)\n"
        "  |> AGGREGATE count(*) AS n WITH (uid = 'agg');\n"
    )
    (statement,) = parse_ok(text).statements
    assert isinstance(statement, ast.Insert)
    query = statement.query
    assert isinstance(query, ast.PipeQuery)
    assert [type(s).__name__ for s in query.steps] == ["Where", "KeyBy", "Window", "Aggregate"]
    assert [s.keyword_span.line for s in query.steps] == [3, 4, 5, 6]
    assert all(s.keyword_span.column == 6 for s in query.steps)
    assert at(query.span) == where(text, "FROM")[:2] + where(text, "(uid = 'agg')")[2:]


# ---------------------------------------------------------------- expressions and spans


def test_multiline_expression_span() -> None:
    text = (
        "INSERT INTO o\n"
        "  FROM s\n"
        "  |> WHERE a > 0\n"
        "       AND b IN ('x',\n"
        "                 'y')\n"
        "  |> SELECT a;\n"
    )
    (statement,) = parse_ok(text).statements
    assert isinstance(statement, ast.Insert)
    assert isinstance(statement.query, ast.PipeQuery)
    where_step = statement.query.steps[0]
    assert isinstance(where_step, ast.Where)
    condition = where_step.condition
    assert condition.text == "a > 0\n       AND b IN ('x',\n                 'y')"
    assert at(condition.span) == (3, 12, 5, 22)
    assert at(where_step.span) == (3, 6, 5, 22)
    assert isinstance(condition.tree, exp.And)


def test_names_may_be_keywords_or_quoted() -> None:
    text = "INSERT INTO `my sink` FROM `a``b` |> SELECT key, window, left, `from` AS `x y`;"
    (statement,) = parse_ok(text).statements
    assert isinstance(statement, ast.Insert)
    assert (statement.sink.value, statement.sink.quoted) == ("my sink", True)
    assert at(statement.sink.span) == where(text, "`my sink`")
    query = statement.query
    assert isinstance(query, ast.PipeQuery)
    assert (query.source.name.value, query.source.name.quoted) == ("a`b", True)
    (select,) = query.steps
    assert isinstance(select, ast.Select)
    assert [i.expr.text for i in select.items] == ["key", "window", "left", "`from`"]
    alias = select.items[3].alias
    assert alias is not None
    assert (alias.value, alias.quoted) == ("x y", True)


def test_keywords_are_case_insensitive() -> None:
    upper = (
        "CREATE VIEW v AS FROM s |> WHERE k > 0 |> KEY BY k "
        "|> WINDOW TUMBLE(ts, INTERVAL 1 MINUTE) |> AGGREGATE count(*) AS n "
        "WITH (parallelism = 2);"
    )
    lower = (
        "create view v as from s |> where k > 0 |> key by k "
        "|> window tumble(ts, INTERVAL 1 MINUTE) |> aggregate count(*) as n "
        "with (parallelism = 2);"
    )
    assert parse_ok(upper) == parse_ok(lower)


def test_comments_do_not_change_the_tree() -> None:
    plain = "INSERT INTO o FROM s |> WHERE k > 0 |> SELECT k;"
    commented = "INSERT INTO o FROM s /* a; comment */ |> WHERE k > 0 -- to the end\n|> SELECT k;"
    a = parse_ok(plain).statements[0]
    b = parse_ok(commented).statements[0]
    assert isinstance(a, ast.Insert) and isinstance(b, ast.Insert)
    assert isinstance(a.query, ast.PipeQuery) and isinstance(b.query, ast.PipeQuery)
    assert [type(s) for s in a.query.steps] == [type(s) for s in b.query.steps]
    assert [s.condition.text for s in (a.query.steps[0], b.query.steps[0])] == ["k > 0"] * 2
    assert b.query.steps[1].span.line == 2


def _walk(node: Any, parent: Span | None, seen: list[Span]) -> None:
    if isinstance(node, tuple | list):
        for item in node:
            _walk(item, parent, seen)
        return
    if not dataclasses.is_dataclass(node) or isinstance(node, type | Span):
        return
    span = getattr(node, "span", None)
    if isinstance(span, Span):
        seen.append(span)
        if parent is not None:
            inside = (parent.line, parent.column) <= (span.line, span.column) and (
                span.end_line,
                span.end_column,
            ) <= (parent.end_line, parent.end_column)
            assert inside, f"{type(node).__name__} {span} outside its parent {parent}"
        parent = span
    for f in dataclasses.fields(node):
        if f.name != "span":
            _walk(getattr(node, f.name), parent, seen)


def test_every_span_names_the_file_and_sits_inside_its_parent() -> None:
    text = (
        "SET parallelism = 2;\n"
        "CREATE SOURCE s (k BIGINT, v STRING, ts TIMESTAMP,\n"
        "  WATERMARK FOR ts AS ts - INTERVAL 5 SECONDS)\n"
        "  WITH (connector = 'datagen', uid = 'src');\n"
        "CREATE SINK o (k BIGINT, n BIGINT) WITH (connector = 'console');\n"
        "CREATE VIEW v AS\n"
        "  FROM s\n"
        "  |> WHERE k > 0 WITH (name = 'w')\n"
        "  |> SELECT k, v AS w, ts\n"
        "  |> RENAME w AS v |> DROP v |> EXPLODE array(k) AS e\n"
        "  |> JOIN t ON s.k = t.k |> UNION ALL u.side\n"
        "  |> DEDUPLICATE ON k WITHIN INTERVAL 1 HOUR\n"
        "  |> ROUTE big WHEN k > 10;\n"
        "INSERT INTO o FROM v |> KEY BY k |> WINDOW HOP(ts, INTERVAL 1 MINUTE, INTERVAL 1 SECOND)\n"
        "  |> AGGREGATE count(*) AS n WITH (uid = 'agg');\n"
    )
    program = parse_ok(text)
    spans: list[Span] = []
    _walk(program, None, spans)
    assert len(spans) > 40
    assert {s.file for s in spans} == {FILE}


# ---------------------------------------------------------------- errors and their positions


def _errors(text: str) -> list[flowc.Diagnostic]:
    with pytest.raises(flowc.CompileError) as caught:
        flowc.compile(text, filename=FILE)
    return [d for d in caught.value.diagnostics if d.severity is flowc.Severity.ERROR]


PRELUDE = (
    "CREATE SOURCE s (k BIGINT, v STRING) WITH (connector = 'datagen');\n"
    "CREATE SINK o WITH (connector = 'console');\n"
)


def test_sqlglot_error_on_line_three_maps_to_its_column() -> None:
    text = PRELUDE + "INSERT INTO o FROM s |> WHERE k > 1 1;\n"
    (error,) = _errors(text)
    assert error.code == "E0003"
    assert error.span.file == FILE
    # sqlglot stops at the second '1'.
    assert at(error.span) == where(text, "1;", part="1")


def test_sqlglot_error_inside_a_multiline_expression() -> None:
    text = PRELUDE + ("INSERT INTO o\n  FROM s\n  |> WHERE k > 0\n       AND CAST(k AS) > 1;\n")
    (error,) = _errors(text)
    assert error.code == "E0003"
    assert "Expected TYPE after CAST" in error.message
    # The expression starts on line 5; the error is on its second line, at the ')'.
    assert at(error.span) == where(text, "AS) > 1", part=")")


def test_sqlglot_error_spans_the_offending_token() -> None:
    text = PRELUDE + "INSERT INTO o FROM s |> SELECT CASE END AS j;\n"
    (error,) = _errors(text)
    assert error.code == "E0003"
    assert at(error.span) == where(text, "END")


def test_unknown_column_position_inside_an_expression() -> None:
    text = PRELUDE + "INSERT INTO o\n  FROM s\n  |> WHERE k > 0\n       AND prize > 1;\n"
    (error,) = _errors(text)
    assert error.code == "E0201"
    assert at(error.span) == where(text, "prize")


def test_unexpected_token_spans_the_token() -> None:
    text = PRELUDE + "INSERT INTO o FROM s |> FILTER k > 0;\n"
    (error,) = _errors(text)
    assert error.code == "E0001"
    assert at(error.span) == where(text, "FILTER")


def test_missing_semicolon_points_after_the_last_token() -> None:
    text = PRELUDE + "INSERT INTO o\n  FROM s\n  |> WHERE k > 0\nINSERT INTO o FROM s;\n"
    (error,) = _errors(text)
    assert error.code == "E0002"
    end = where(text, "k > 0")
    assert at(error.span) == (end[2], end[3], end[2], end[3])


def test_unterminated_string_and_bad_character_positions() -> None:
    text = PRELUDE + "INSERT INTO o FROM s |> WHERE v = 'abc;\n"
    (error,) = _errors(text)
    assert (error.code, error.message) == ("E0001", "syntax error: unterminated string")
    assert start(error.span) == where(text, "'abc")[:2]
    text = PRELUDE + "CREATE SINK p# WITH (connector = 'console');\n"
    (error,) = _errors(text)
    assert error.message == "syntax error: unexpected character '#'"
    assert at(error.span) == where(text, "#")


def test_bad_character_inside_an_expression_is_reported_by_sqlglot_at_the_character() -> None:
    text = PRELUDE + "INSERT INTO o FROM s |> WHERE k # 2 = 0;\n"
    (error,) = _errors(text)
    assert error.code == "E0003"
    assert at(error.span) == where(text, "#")


def test_a_syntax_error_costs_one_statement() -> None:
    text = (
        "CREATE SOURCE s (k BIGINT WITH (connector = 'datagen');\n"
        "CREATE SINK o WITH (connector = 'console');\n"
        "INSERT INTO o FROM s |> ;\n"
        "INSERT INTO o FROM s;\n"
    )
    program, diagnostics = parse_errors(text)
    assert [d.code for d in diagnostics] == ["E0001", "E0001"]
    assert [d.span.line for d in diagnostics] == [1, 3]
    assert [type(s).__name__ for s in program.statements] == ["CreateSink", "Insert"]
    assert program.statements[1].span.line == 4


def test_too_deep_nesting_is_reported_at_the_bracket_past_the_bound() -> None:
    depth = MAX_EXPRESSION_DEPTH + 1
    expression = "(" * depth + "k" + ")" * depth
    text = f"INSERT INTO o FROM s |> SELECT {expression} AS j;"
    program, diagnostics = parse_errors(text)
    (error,) = diagnostics
    assert error.code == "E0004"
    assert f"{depth} deep" in error.message
    column = where(text, expression)[1] + MAX_EXPRESSION_DEPTH
    assert at(error.span) == (1, column, 1, column + 1)
    assert program.statements == ()
    limit = "(" * MAX_EXPRESSION_DEPTH + "k" + ")" * MAX_EXPRESSION_DEPTH
    step = only_step(f"INSERT INTO o FROM s |> SELECT {limit} AS j;")
    assert isinstance(step, ast.Select)


def test_window_without_arguments_is_a_syntax_error() -> None:
    with pytest.raises(flowc.CompileError) as raised:
        flowc.compile(insert("WINDOW TUMBLE()"), "t.flow")
    assert [d.code for d in raised.value.diagnostics] == ["E0001"]
