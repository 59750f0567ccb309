"""The parser's fast paths give what the plain paths give.

- the shipped LALR tables (grammar/tables.py) are those of the current grammar;
- the table driver builds the same AST, spans and diagnostics as Lark's parse;
- ``copy_tree`` copies sqlglot trees as ``Expr.copy`` does;
- analysis's copy of the AST (code written per class) is the copy field by field;
- kept typings type trees as sqlglot's annotator does;
- plain-text diagnostics are what rich renders without colour;
- compile() leaves the cyclic collector as it found it.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import re
from pathlib import Path
from typing import Any

import pytest
from fuzzing import EXAMPLES, generate_program, mutate_tokens, seeded
from sqlglot import exp
from sqlglot.errors import SqlglotError

import flowc
from flowc.analyze.own_copy import copy_by_fields, with_own_sql
from flowc.diagnostics import Diagnostic, Reporter, Severity, _render_rich, render_text
from flowc.grammar.tables import TABLES
from flowc.spans import Span
from flowc.sql import flink_dialect, sql_parsing, sqltypes
from flowc.syntax import lalr, parser
from flowc.syntax.astdump import ast_to_json

ROOT = Path(__file__).resolve().parent.parent
CHECK_FILES = sorted((ROOT / "tests" / "data" / "check").glob("*.test"))


def corpus() -> list[str]:
    texts = [p.read_text(encoding="utf-8") for p in sorted((ROOT / "examples").rglob("*.flow"))]
    for path in CHECK_FILES:
        texts.extend(path.read_text(encoding="utf-8").split("[case "))
    for seed in range(120):
        chooser = seeded(seed)
        if seed % 2:
            texts.append(generate_program(chooser))
        else:
            texts.append(mutate_tokens(chooser, EXAMPLES[chooser.choice(sorted(EXAMPLES))]))
    return texts


CORPUS = corpus()


def test_shipped_tables_are_the_grammars() -> None:
    shipped = json.loads(TABLES)
    assert shipped["grammar_sha256"] == lalr.grammar_digest(lalr.grammar_text()), (
        "grammar/flow.lark changed: run `python -m flowc.syntax.lalr` to rewrite grammar/tables.py"
    )
    assert shipped == json.loads(json.dumps(lalr.build_tables(lalr.lark_parser())))


class _LarkOnly:
    """A driver that always stops, so every statement goes through Lark."""

    def parse(self, text: str, builder: Any) -> Any:
        raise lalr.NoFastPath


def _sql_of(node: Any, out: list[Any]) -> list[Any]:
    if isinstance(node, tuple):
        for item in node:
            _sql_of(item, out)
    elif dataclasses.is_dataclass(node) and not isinstance(node, type):
        tree = getattr(node, "tree", None)
        if tree is not None:
            out.append(repr(tree))  # the whole tree: sqlglot cannot write some as SQL
        for field in dataclasses.fields(node):
            _sql_of(getattr(node, field.name), out)
    return out


def test_driver_parses_as_lark(monkeypatch: pytest.MonkeyPatch) -> None:
    fast_driver = parser._driver()
    syntax_errors = 0
    for text in CORPUS:
        monkeypatch.setattr(parser, "_driver", lambda: fast_driver)
        fast_reporter = Reporter()
        fast = parser.parse(text, "t.flow", fast_reporter)
        monkeypatch.setattr(parser, "_driver", _LarkOnly)
        lark_reporter = Reporter()
        slow = parser.parse(text, "t.flow", lark_reporter)
        assert fast == slow, text
        assert _sql_of(fast, []) == _sql_of(slow, []), text
        assert fast_reporter.diagnostics == lark_reporter.diagnostics, text
        syntax_errors += any(d.code == "E0001" for d in fast_reporter.diagnostics)
    assert syntax_errors > 20  # the corpus reaches Lark's error path too


class _Recorder:
    """A builder that records each reduction: the rule, its bounds and its children's text."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, lalr.Bounds, list[str]]] = []

    def __getattr__(self, rule: str) -> Any:
        def build(bounds: lalr.Bounds, children: list[Any]) -> str:
            self.calls.append((rule, bounds, [repr(c) for c in children]))
            return rule

        return build


def _reductions(driver: lalr.Driver, text: str) -> list[Any]:
    recorder = _Recorder()
    try:
        driver.parse(text, recorder)
    except lalr.NoFastPath:
        return [*recorder.calls, "stopped"]
    return recorder.calls


def test_spaces_stepped_over_lex_as_the_expressions_do() -> None:
    """The driver steps over a single space without its lexer's expressions
    (lalr._skips_space); with that off in every lexer, it makes the same reductions."""
    fast = lalr.Driver(lalr.tables())
    plain_tables = lalr.Tables(lalr.tables().data)
    for state in range(len(plain_tables.actions)):
        plain_tables.lexer(state).skips_space = False
    plain = lalr.Driver(plain_tables)
    statements = [s for text in CORPUS for s in re.split(r"(?<=;)", text)]
    statements += ["SELECT  a ,b\t FROM  t ", " INSERT INTO s SELECT 1 ", "SET a = 1 \u2003"]
    assert all(fast.tables.lexer(state).skips_space for state in range(len(fast.tables.actions)))
    for text in statements:
        assert _reductions(fast, text) == _reductions(plain, text), text


#: Texts that start with a space, to try patterns on.
_SPACE_PROBES = [" ", "  ", " a", " 1", " _", " --", " /*", " \t", " \n", " '", " |>", " )"]


def test_patterns_said_not_to_start_with_a_space_do_not() -> None:
    """lalr._may_start_with_space is never False for a pattern that matches a text
    starting with a space (it may be True for one that does not: it is cautious)."""
    data = lalr.tables().data
    patterns = [(p, data["flags"]) for p in data["patterns"].values()]
    patterns += [
        (p, 0)
        for p in [
            r"a* b",
            r"(?:x|\s)",
            r"[^a]",
            r"\W",
            r"(?=a)\s",
            r"(?i: )",
            r"[\d\s]",
            r"a?b",
            r"[ -~]",
            r"(?!x).",
            r"\D",
            r"(?:ab)*\S",
            r"[^\S]",
            r"x{0} ",
            r"(?> )",
            r"\b ",
            r"(a)\1",
            r"[\w]",
            r"[^\w]",
            r"a|b*",
            r"(?:a|)c",
        ]
    ]
    said = {}
    for pattern, flags in patterns:
        said[pattern] = lalr._may_start_with_space(pattern, flags)
        if any(re.match(pattern, probe, flags) for probe in _SPACE_PROBES):
            assert said[pattern], pattern
    assert said[r"\W"] and said["a|b*"] and not said[r"[\w]"] and not said[r"(?:ab)*\S"]
    assert said[r"\s+"] and not said[r"(?i:[a-z_][a-z0-9_]*)"]


def test_stale_tables_are_rebuilt_from_lark(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lalr, "grammar_digest", lambda text: "not the shipped digest")
    lalr.tables.cache_clear()
    try:
        rebuilt = lalr.tables()
    finally:
        lalr.tables.cache_clear()
    rebuilt_data = json.loads(json.dumps(rebuilt.data))
    assert rebuilt_data == json.loads(TABLES) | {"grammar_sha256": "not the shipped digest"}


def test_copy_tree_copies_as_sqlglot_does() -> None:
    texts = [
        "a + 1",
        "CASE WHEN a > 1 THEN 'x' /* note */ ELSE lower(b) END",
        "CAST(a AS DECIMAL(12, 2))",
        "s.f.g[0]",
        "sum(v) FILTER (WHERE v > 0)",
        "window(ts, '5 seconds')",
        "x IN (1, 2, 3) AND NOT y IS NULL",
    ]
    for text in texts:
        tree = sql_parsing.parse_sql_uncached(text, "spark")
        tree.find(exp.Column).type = "BIGINT"  # typed trees copy their types
        ours, theirs = parser.copy_tree(tree), tree.copy()
        assert ours == theirs
        assert repr(ours) == repr(theirs)
        for a, b in zip(ours.walk(), theirs.walk(), strict=True):
            assert (a.meta, a.comments, a.type, a.parent is None) == (
                b.meta,
                b.comments,
                b.type,
                b.parent is None,
            )
            assert a.meta is not b.meta or not a.meta
            assert (a.arg_key, a.index, type(a.parent)) == (b.arg_key, b.index, type(b.parent))
            assert a.parent is None or a in list(a.parent.iter_expressions())
        originals = {id(node) for node in tree.walk()}
        assert not any(id(node) in originals for node in ours.walk())
        ours.find(exp.Column).replace(exp.column("z"))  # a copy is edited as sqlglot's is
        theirs.find(exp.Column).replace(exp.column("z"))
        assert ours.sql() == theirs.sql() and ours != tree


def _literal_places_by_character(text: str) -> list[tuple[int, int]]:
    """Strings, quoted names and comments found looking at each character in turn."""
    found: list[tuple[int, int]] = []
    position, size = 0, len(text)
    while position < size:
        char = text[position]
        if char in "'`":
            close = text.find(char, position + 1)
            while close != -1 and text[close + 1 : close + 2] == char:
                close = text.find(char, close + 2)
            end = size if close == -1 else close + 1
        elif text.startswith("--", position):
            newline = text.find("\n", position)
            end = size if newline == -1 else newline + 1
        elif text.startswith("/*", position):
            close = text.find("*/", position + 2)
            end = size if close == -1 else close + 2
        else:
            position += 1
            continue
        found.append((position, end))
        position = end
    return found


def test_literal_scan_finds_what_a_character_scan_finds() -> None:
    chooser = seeded(7)
    texts = list(CORPUS)
    for _ in range(3000):
        texts.append("".join(chooser.choice("'`-/*+\n a(M") for _ in range(chooser.integer(0, 11))))
    texts += [
        "SELECT * FROM t MATCH_RECOGNIZE/* c */(x)",
        "SELECT '-- MATCH_RECOGNIZE (' FROM t match_recognize (",
        "SELECT a FROM t",
    ]
    clauses = 0
    for text in texts:
        places = _literal_places_by_character(text)
        assert flink_dialect._literal_places(text) == places, text
        code = list(text)
        for start, end in places:
            code[start:end] = " " * (end - start)
        expected = [
            (m.group(1).upper(), m.start(), m.end())
            for m in re.finditer(r"\b(MATCH_RECOGNIZE)\b(?=\s*\()", "".join(code), re.I)
        ]
        assert flink_dialect.unsupported_clauses(text) == expected, text
        clauses += len(expected)
    assert clauses >= 2


def _nodes(tree: exp.Expr) -> list[Any]:
    return [
        (type(n).__name__, n.meta, n.comments, n.type, n.arg_key, n.index, type(n.parent))
        for n in tree.walk()
    ]


def test_comparisons_are_built_as_sqlglot_parses_them() -> None:
    from sqlglot.dialects.spark import Spark

    chooser = seeded(11)
    names = sorted(
        {
            *Spark.Parser.FUNCTIONS,
            *Spark.Parser.FUNCTION_PARSERS,
            *Spark.Parser.NO_PAREN_FUNCTION_PARSERS,
            *Spark.Tokenizer.KEYWORDS,
            "v",
            "k",
            "_x1",
            "Amount",
            "next",
            "if",
        }
    )
    names = [n for n in names if n.replace("_", "a").isalnum() and not n[0].isdigit()]
    built = 0
    for dialect in ("spark", "flink"):
        for name in names:
            for _ in range(3):
                operator = chooser.choice(["=", "<>", "!=", "<", ">", "<=", ">="])
                digits = chooser.choice(["0", "7", "007", "42", "12345678901234567890123"])
                left, right = " " * chooser.integer(0, 2), " " * chooser.integer(0, 2)
                word = name.lower() if chooser.integer(0, 1) else name
                text = f"{word}{left}{operator}{right}{digits}"
                quick = sql_parsing._comparison(text, dialect)
                if quick is None:
                    continue
                built += 1
                tree, tokens = sql_parsing._parse_and_count(text, dialect)
                assert repr(quick) == repr(tree) and quick == tree, text
                assert _nodes(quick) == _nodes(tree), text
                assert sql_parsing.parse_sql(text, dialect, own=False)[1] == tokens == 3
    assert built > 1000
    assert sql_parsing._comparison("v > 1", "bigquery") is None  # other dialects: sqlglot
    assert sql_parsing._comparison("v > -1", "spark") is None
    assert sql_parsing._comparison("NULL > 1", "spark") is None


def test_bare_columns_are_built_as_sqlglot_parses_them() -> None:
    """A bare name the builder does not give sqlglot's parser (no keyword) is the tree,
    with its positions, that the parser makes of it."""
    from sqlglot.dialects.spark import Spark

    names = {*Spark.Parser.FUNCTIONS, *Spark.Parser.NO_PAREN_FUNCTION_PARSERS, "v", "k", "_x1"}
    built = 0
    for dialect in ("spark", "flink"):
        for name in sorted(names):
            for word in (name, name.lower()):
                if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", word):
                    continue
                if word.upper() in sql_parsing.sql_keywords(dialect):
                    continue
                try:
                    tree, _ = sql_parsing._parse_and_count(word, dialect)
                except SqlglotError:
                    continue  # (the builder's tree of it is a column all the same)
                if not isinstance(tree, exp.Column):
                    continue  # a function sqlglot calls without brackets
                quick = sql_parsing.bare_column(word)
                assert repr(quick) == repr(tree) and quick == tree, word
                assert _nodes(quick) == _nodes(tree), word
                built += 1
    assert built > 500


def test_analysis_copy_equals_the_parse_and_shares_no_sql_node() -> None:
    text = (
        "CREATE SOURCE s (k BIGINT, v BIGINT) WITH (connector = 'datagen');\n"
        "CREATE SINK o WITH (connector = 'noop');\n"
        "CREATE VIEW w AS FROM s |> WHERE v > 1 |> SELECT k, v + 1 AS v |> KEY BY k\n"
        "  |> AGGREGATE sum(v) AS v;\n"
        "INSERT INTO o SELECT k, v FROM w WHERE v IS NOT NULL;\n"
    )
    tree = parser.parse(text, "t.flow", Reporter())
    copied = with_own_sql(tree)
    assert copied == tree
    assert ast_to_json(copied) == ast_to_json(tree)
    mine = [id(node) for t in _trees(tree, []) for node in t.walk()]
    theirs = [id(node) for t in _trees(copied, []) for node in t.walk()]
    assert len(mine) == len(theirs) > 10
    assert not set(mine) & set(theirs)


def _shape(node: Any, original: Any) -> Any:
    """What a copy is, node by node: each syntax-tree node's class, whether it is the
    original's own node, and its fields; each sqlglot node's class, arguments, metadata
    and type, and whether it is one of the original's."""
    if isinstance(node, exp.Expr):
        return [
            (type(n).__name__, n.arg_key, n.index, n.meta, n.type, n.comments, n is o)
            for n, o in zip(node.walk(), original.walk(), strict=True)
        ] + [node.sql()]
    if isinstance(node, tuple):
        return (
            "tuple",
            node is original,
            [_shape(n, o) for n, o in zip(node, original, strict=True)],
        )
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        return (
            type(node).__name__,
            node is original,
            [
                _shape(getattr(node, f.name), getattr(original, f.name))
                for f in dataclasses.fields(node)
            ],
        )
    return (repr(node), node is original)


@pytest.mark.parametrize("index", range(0, len(CORPUS), 7))
def test_analysis_copy_is_the_copy_field_by_field(index: int) -> None:
    tree = parser.parse(CORPUS[index], "t.flow", Reporter())
    fast, slow = with_own_sql(tree), copy_by_fields(tree)
    assert _shape(fast, tree) == _shape(slow, tree)
    assert ast_to_json(fast) == ast_to_json(slow) == ast_to_json(tree)


def _trees(node: Any, out: list[exp.Expr]) -> list[exp.Expr]:
    if isinstance(node, exp.Expr):
        out.append(node)
    elif isinstance(node, tuple):
        for item in node:
            _trees(item, out)
    elif dataclasses.is_dataclass(node) and not isinstance(node, type):
        for field in dataclasses.fields(node):
            _trees(getattr(node, field.name), out)
    return out


def _types(node: Any, out: list[Any]) -> list[Any]:
    if isinstance(node, tuple):
        for item in node:
            _types(item, out)
    elif dataclasses.is_dataclass(node) and not isinstance(node, type):
        tree = getattr(node, "tree", None)
        if tree is not None:
            for part in tree.walk():
                dtype = part.type.sql("spark") if part.type is not None else None
                out.append((type(part).__name__, dtype, dict(part.meta)))
        for field in dataclasses.fields(node):
            _types(getattr(node, field.name), out)
    return out


def _compiled(text: str) -> Any:
    try:
        job = flowc.compile(text, "t.flow")
    except flowc.CompileError as error:
        return [d.to_json() for d in error.diagnostics]
    return [
        job.stream_graph.to_json(),
        [d.to_json() for d in (*job.diagnostics, *job.spark_diagnostics)],
        _types(job.ast, []),
    ]


def test_kept_typings_type_as_sqlglot(monkeypatch: pytest.MonkeyPatch) -> None:
    import flowc.sql.functions

    def always_afresh(
        expr: Any, scope: Any, reporter: Reporter, functions: Any = None
    ) -> str | None:
        return sqltypes._resolve_and_type(expr, scope, reporter, functions)

    monkeypatch.setattr(flowc.sql.functions, "resolve_and_type", always_afresh)
    expected = [_compiled(text) for text in CORPUS]
    monkeypatch.undo()
    parser.clear_expression_cache()
    for _ in range(2):  # the second round types from kept typings
        assert [_compiled(text) for text in CORPUS] == expected
    assert any(kept is not None for kept in sqltypes._typings.values())


def test_plain_diagnostics_are_what_rich_prints() -> None:
    file = "t.flow"
    source = "SET a = 1;\nCREATE SOURCE s (k BIGINT)\n\tWITH (connector = 'x');\n"
    diagnostics = [
        Diagnostic("E0001", Severity.ERROR, "syntax error: 'x'", Span(file, 2, 5, 2, 9), "h"),
        Diagnostic("W0001", Severity.WARNING, "a warning", Span(file, 3, 2, 4, 1)),
        Diagnostic("E0002", Severity.ERROR, "no line", Span(file, 9, 1, 9, 1), None),
        Diagnostic("E0003", Severity.ERROR, "elsewhere", Span("u.flow", 1, 1, 1, 3), "x"),
    ]
    for count in range(1, len(diagnostics) + 1):
        shown = diagnostics[:count]
        expected = _render_rich(_pieces(shown, {file: source}), False)
        assert render_text(shown, {file: source}, color=False) == expected
    # Text rich would change (a tab, a control character, wide characters) goes through rich.
    odd = Diagnostic("E0001", Severity.ERROR, "tab\there \x07 中", Span(file, 1, 1, 1, 2))
    plain = render_text([odd], {file: source}, color=False)
    assert plain == _render_rich(_pieces([odd], {file: source}), False)
    assert "\x07" not in plain


def _pieces(diagnostics: list[Diagnostic], sources: dict[str, str]) -> list[Any]:
    from flowc.diagnostics import _render_one

    lines = {name: text.split("\n") for name, text in sources.items()}
    out = [_render_one(d, lines.get(d.span.file)) for d in diagnostics]
    errors = sum(d.severity is Severity.ERROR for d in diagnostics)
    warnings = len(diagnostics) - errors
    parts = [f"{errors} error{'s' if errors != 1 else ''}"] if errors else []
    parts += [f"{warnings} warning{'s' if warnings != 1 else ''}"] if warnings else []
    out.append([(", ".join(parts), "bold")])
    return out


def test_compile_leaves_the_collector_as_it_was() -> None:
    text = (ROOT / "examples" / "wordcount.flow").read_text(encoding="utf-8")
    thresholds, enabled = gc.get_threshold(), gc.isenabled()
    try:
        gc.set_threshold(500, 7, 9)
        flowc.compile(text, "wordcount.flow")
        assert gc.get_threshold() == (500, 7, 9) and gc.isenabled()
        with pytest.raises(flowc.CompileError):
            flowc.compile("INSERT INTO nowhere FROM nothing;", "bad.flow")
        assert gc.get_threshold() == (500, 7, 9) and gc.isenabled()
        gc.disable()
        flowc.compile(text, "wordcount.flow")
        assert gc.get_threshold() == (500, 7, 9) and not gc.isenabled()
    finally:
        gc.set_threshold(*thresholds)
        if enabled:
            gc.enable()
