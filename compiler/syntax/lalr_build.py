"""Lark's side of the grammar: the grammar's text and digest, Lark's parser of it (which
reports syntax errors), and the LALR tables read off that parser and written as
``grammar/tables.py`` (see :mod:`flowc.syntax.lalr` for the tables' layout and their driver).

Lark is imported only when one of these runs: a ``flowc`` process whose grammar matches
the shipped tables imports it only to report a syntax error.
"""

from __future__ import annotations

import hashlib
import json
import pkgutil
import threading
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import lark

#: Bumped whenever the layout of the shipped tables changes.
TABLES_FORMAT = 1


def grammar_text() -> str:
    """flow.lark as ``importlib.resources`` reads it (its lines' ends made ``\\n``), through
    the package's loader: ``importlib.resources`` and what it imports (tempfile, shutil,
    zipfile) were 5 ms of a ``flowc compile`` process."""
    data = pkgutil.get_data("flowc.grammar", "flow.lark")
    assert data is not None, "flowc.grammar is a package with a loader"
    return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")


def grammar_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_lark_lock = threading.Lock()


def lark_parser() -> lark.Lark:
    """Lark's parser of the grammar: it builds the tables and reports syntax errors.

    Built once, under a lock: Lark writes its cache file as it builds, and another thread
    must not read that file half written. (Lark's ``parse`` is safe across threads.)
    """
    with _lark_lock:
        return _build_lark_parser()


@cache
def _build_lark_parser() -> lark.Lark:
    import lark

    return lark.Lark(
        grammar_text(),
        parser="lalr",
        lexer="contextual",
        start="statement",
        propagate_positions=False,
        maybe_placeholders=True,
        cache=True,
    )


def build_tables(grammar: lark.Lark, digest: str | None = None) -> dict[str, Any]:
    """Read the tables off a Lark parser (see :class:`flowc.syntax.lalr.Tables` for the layout),
    recorded under ``digest``: by default the SHA-256 of the grammar's text."""
    from functools import partial

    from lark import Tree
    from lark.lexer import BasicLexer, ContextualLexer, UnlessCallback
    from lark.parse_tree_builder import (
        ChildFilterLALR,
        ChildFilterLALR_NoPlaceholders,
        ExpandSingleChild,
    )
    from lark.parsers.lalr_analysis import Shift

    frontend = grammar.parser
    table = frontend.parser.parser.parse_table
    callbacks = frontend.parser.parser.callbacks
    contextual = frontend.lexer
    if not isinstance(contextual, ContextualLexer) or grammar.lexer_conf.use_bytes:
        raise TypeError("the tables need Lark's contextual lexer over str")

    # Lark numbers states and orders rules differently from run to run (set iteration
    # under hash randomisation); the tables are written in a canonical order instead.
    def rule_key(rule: Any) -> tuple[Any, ...]:
        return (rule.origin.name, tuple(s.name for s in rule.expansion), rule.order)

    rule_index: dict[Any, int] = {}
    rules: list[list[Any]] = []
    for rule in sorted(callbacks, key=rule_key):
        callback = callbacks[rule]
        include: list[tuple[int, bool, int]] | None = None
        append_none = 0
        if isinstance(callback, ChildFilterLALR):
            include = list(callback.to_include)
            append_none = callback.append_none
            callback = callback.node_builder
        elif isinstance(callback, ChildFilterLALR_NoPlaceholders):
            include = [(i, expand, 0) for i, expand in callback.to_include]
            callback = callback.node_builder
        expand_single = isinstance(callback, ExpandSingleChild)
        if expand_single:
            callback = callback.node_builder
        if not (
            isinstance(callback, partial)
            and callback.func is Tree
            and len(callback.args) == 1
            and not callback.keywords
        ):
            raise TypeError(f"unexpected Lark tree builder for {rule}")
        name = str(callback.args[0])
        size = len(rule.expansion)
        inline = name.startswith("_")
        shortcut = 0
        if include is None and inline and not expand_single:
            shortcut = 1
        elif include is None and expand_single and size == 1:
            shortcut = 2
        elif inline and include == [(0, True, 0)] and not append_none and not expand_single:
            shortcut = 2  # an inlined rule of one inlined rule: its list as it is
        rule_index[rule] = len(rules)
        rules.append(
            [size, rule.origin.name, include, append_none, expand_single, name, inline, shortcut]
        )

    start_state = table.start_states["statement"]
    end_state = table.end_states["statement"]
    number = {start_state: 0}  # states numbered breadth first from the start, by symbol
    states = [start_state]
    for state in states:
        for symbol in sorted(table.states[state]):
            action, arg = table.states[state][symbol]
            if action is Shift and arg not in number:
                number[arg] = len(states)
                states.append(arg)
    if len(states) != len(table.states):
        raise TypeError("a parser state is unreachable")
    actions: list[dict[str, int]] = []
    for state in states:
        row: dict[str, int] = {}
        for symbol, (action, arg) in sorted(table.states[state].items()):
            row[symbol] = number[arg] if action is Shift else ~rule_index[arg]
        actions.append(row)

    patterns: dict[str, str] = {}
    lexers: list[dict[str, Any]] = []
    lexer_index: dict[int, int] = {}
    lexer_of_state: list[int] = []
    for state in states:
        basic = contextual.lexers[state]
        if not isinstance(basic, BasicLexer):
            raise TypeError("unexpected Lark lexer")
        if id(basic) not in lexer_index:
            scanner = basic.scanner  # built on first use, with basic.callback
            unless: dict[str, list[str]] = {}
            for kind, callback in basic.callback.items():
                if not isinstance(callback, UnlessCallback):
                    raise TypeError(f"unexpected Lark lexer callback for {kind}")
                unless[kind] = [t.name for t in callback.scanner.terminals]
                for t in callback.scanner.terminals:
                    patterns[t.name] = t.pattern.to_regexp()
            for t in scanner.terminals:
                patterns[t.name] = t.pattern.to_regexp()
            lexer_index[id(basic)] = len(lexers)
            lexers.append(
                {
                    "terminals": [t.name for t in scanner.terminals],
                    "ignore": sorted(basic.ignore_types),
                    "unless": unless,
                }
            )
        lexer_of_state.append(lexer_index[id(basic)])

    return {
        "format": TABLES_FORMAT,
        "grammar_sha256": grammar_digest(grammar_text()) if digest is None else digest,
        "start": number[start_state],
        "end": number[end_state],
        "flags": grammar.lexer_conf.g_regex_flags,
        "actions": actions,
        "rules": rules,
        "patterns": patterns,
        "lexers": lexers,
        "lexer_of_state": lexer_of_state,
    }


def render_tables_module(data: dict[str, Any]) -> str:
    """The text of ``grammar/tables.py`` for ``data`` (JSON in a string: quick to load)."""
    import lark

    text = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return (
        "# ruff: noqa: E501\n"
        '"""Generated by ``python -m flowc.syntax.lalr`` from grammar/flow.lark with Lark '
        f"{lark.__version__}: do not edit.\n\n"
        "The grammar's LALR tables (see flowc.syntax.lalr); used while the grammar's SHA-256 "
        "matches.\n"
        '"""\n\n'
        f"TABLES = {text!r}\n"
    )
