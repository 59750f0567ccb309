"""The LALR(1) tables of ``grammar/flow.lark``, and a driver that parses with them.

Lark builds the tables: the parse table, one lexer per parser state (Lark's contextual
lexer) and, per grammar rule, how the rule's children are shaped (Lark's tree builder:
anonymous tokens dropped, ``_rules`` inlined, ``[optional]`` parts kept as None). They
are shipped precomputed in ``grammar/tables.py``, keyed by the grammar's SHA-256, so a
``flowc`` process neither imports Lark nor rebuilds them; when the grammar changes they
are rebuilt from Lark until ``python -m flowc.syntax.lalr`` writes the file again. Reading the
tables off Lark is :mod:`flowc.syntax.lalr_build`'s.

:class:`Driver` runs the tables and hands each rule's children, with the offsets of its
first and last token, to the AST builder (:mod:`flowc.syntax.ast_builder`) as it reduces. It parses
exactly what Lark parses; on anything else (a syntax error) it raises :class:`NoFastPath`
and the caller lets Lark parse the statement again, to report the error Lark's way.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Callable
from functools import cache
from operator import itemgetter
from pathlib import Path
from typing import Any, NamedTuple

import flowc.grammar
from flowc.syntax.lalr_build import (
    TABLES_FORMAT,
    build_tables,
    grammar_digest,
    grammar_text,
    lark_parser,
    render_tables_module,
)
from flowc.syntax.regex_code import compiled, render_module

try:
    from flowc.grammar.tables import TABLES as _SHIPPED
except ImportError:  # pragma: no cover - the file is shipped
    _SHIPPED = ""

__all__ = [
    "TABLES_FORMAT",
    "Bounds",
    "Driver",
    "NoFastPath",
    "Token",
    "build_tables",
    "grammar_digest",
    "grammar_text",
    "lark_parser",
    "tables",
]

#: Terminals whose pattern is longer than this are matched on their own, not inside each
#: state's alternation: compiling that alternation is most of the cost of a lexer, and
#: the long pattern (SOUP, a run of expression text) is then compiled once, not per state.
_LONG_PATTERN = 200


class NoFastPath(Exception):
    """The driver met something it leaves to Lark (a syntax error, mostly)."""


class Token(str):
    """A token as the AST builder sees it: its text, terminal and offsets in the statement."""

    __slots__ = ("end_pos", "start_pos", "type")

    type: str
    start_pos: int
    end_pos: int

    @staticmethod
    def make(type: str, value: str, start_pos: int, end_pos: int) -> Token:
        token = str.__new__(Token, value)
        token.type = type
        token.start_pos = start_pos
        token.end_pos = end_pos
        return token


class Bounds(NamedTuple):
    """Offsets (in the statement) of a rule's first and last token; -1 when it has none."""

    start_pos: int
    end_pos: int


class Rule(NamedTuple):
    """What reducing by one grammar rule does (read off the tree builder Lark made for it).

    ``include`` lists (child index, splice it, placeholders before it) as Lark's
    ``ChildFilterLALR`` does; None keeps the children as they are. ``shortcut`` 1: the
    value is the children as they are (an inlined rule that filters nothing); 2: it is
    the only child's (a ``?rule`` of one symbol, an inlined rule of one inlined rule);
    0: shaped in full (see :meth:`Driver.parse`).
    """

    size: int
    origin: str
    include: tuple[tuple[int, bool, int], ...] | None
    append_none: int
    expand_single: bool
    name: str
    inline: bool
    shortcut: int


class Tables:
    """Parse table, rules and lexers, in the plain form the shipped file holds.

    ``actions[state][symbol]`` is the next state (a shift, or the goto after a reduction)
    when >= 0, and ``~rule`` (a reduction by ``rules[rule]``) when negative.
    """

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.start: int = data["start"]
        self.end: int = data["end"]
        self.actions: list[dict[str, int]] = data["actions"]
        self.rules = tuple(
            Rule(size, origin, None if inc is None else tuple(map(tuple, inc)), *rest)
            for size, origin, inc, *rest in data["rules"]
        )
        self.lexer_of_state: list[int] = data["lexer_of_state"]
        self._lexers: list[_Lexer | None] = [None] * len(data["lexers"])
        #: The lexer of each state, once built (see :meth:`lexer`).
        self.lexers_by_state: list[_Lexer | None] = [None] * len(self.actions)

    def lexer(self, state: int) -> _Lexer:
        """The lexer Lark uses in ``state``, built on first use (most are never used)."""
        index = self.lexer_of_state[state]
        found = self._lexers[index]
        if found is None:
            found = self._lexers[index] = _Lexer(self.data, self.data["lexers"][index])
        self.lexers_by_state[state] = found
        return found


class _Lexer:
    """Lark's lexer for some parser states: the allowed terminals in Lark's order, matched
    as Lark's single alternation would (the first alternative that matches wins), the
    ignored terminals, and keywords a NAME-like match turns into (Lark's UnlessCallback)."""

    __slots__ = ("ignore", "segments", "skips_space", "unless")

    def __init__(self, data: dict[str, Any], spec: dict[str, Any]) -> None:
        flags: int = data["flags"]
        segments, unless = lexer_patterns(data, spec)
        self.skips_space = _skips_space(spec["terminals"], spec["ignore"], data["patterns"], flags)
        self.segments = tuple(compiled(pattern, flags) for pattern in segments)
        self.ignore = frozenset(spec["ignore"])
        self.unless = {kind: compiled(pattern, flags) for kind, pattern in unless.items()}


def lexer_patterns(data: dict[str, Any], spec: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """The regular expressions of one lexer: its segments', and its keywords' per kind."""
    patterns: dict[str, str] = data["patterns"]
    segments = [
        "|".join(f"(?P<{name}>{_lean(patterns[name], len(run) == 1)})" for name in run)
        for run in _runs(spec["terminals"], patterns)
    ]
    unless = {
        kind: "|".join(f"(?P<{n}>{patterns[n]})" for n in names)
        for kind, names in spec["unless"].items()
    }
    return segments, unless


#: Lark's patterns for strings and quoted names, and the same as "unrolled loops": Python's
#: regex engine keeps a backtracking record per character of the first form (over 100 MB
#: for a literal of 1 MB), and none for runs of plain characters in the second.
_UNROLLED = {
    r"""'(?:[^'\\]|\\.|'')*'""": r"""'[^'\\]*(?:(?:\\.|'')[^'\\]*)*'""",
    r'''"(?:[^"\\]|\\.|"")*"''': r'''"[^"\\]*(?:(?:\\.|"")[^"\\]*)*"''',
    r"`(?:[^`]|``)*`": r"`[^`]*(?:``[^`]*)*`",
}


def _lean(pattern: str, alone: bool) -> str:
    """``pattern``, matching the same with no backtracking record per character.

    Strings and quoted names are unrolled (see _UNROLLED). A pattern matched ``alone`` (a
    long one: SOUP, a run of expression text) that ends with a repeated group gets that
    repeat possessive: nothing follows it that could fail, so the match is the same, but
    the engine no longer keeps a record per repetition (400 MB for 2 MB of expression).
    """
    for form, unrolled in _UNROLLED.items():
        pattern = pattern.replace(form, unrolled)
    if alone and pattern.endswith(")*)"):
        pattern = pattern[:-1] + "+)"
    return pattern


def _runs(names: list[str], patterns: dict[str, str]) -> list[list[str]]:
    """``names`` cut into runs, each long pattern a run of its own (same order)."""
    runs: list[list[str]] = []
    for name in names:
        if len(patterns[name]) > _LONG_PATTERN:
            runs.append([name])
            runs.append([])
        elif runs:
            runs[-1].append(name)
        else:
            runs.append([name])
    return [run for run in runs if run]


def _skips_space(
    terminals: list[str], ignore: list[str], patterns: dict[str, str], flags: int
) -> bool:
    """Whether, in a lexer of ``terminals`` (in Lark's order), a space followed by no other
    white space is an ignored token of one character.

    True when the first terminal that may match text starting with a space is ignored and
    is ``\\s+`` (which there matches the space alone). The driver then steps over such a
    space without a regular expression: half of a statement's matches are single spaces.
    """
    for name in terminals:
        if _may_start_with_space(patterns[name], flags):
            return name in ignore and patterns[name] == r"\s+"
    return False


class _Unknown(Exception):
    """A part of a pattern :func:`_may_start_with_space` does not analyse."""


@cache
def _may_start_with_space(pattern: str, flags: int) -> bool:
    """Whether ``pattern`` may match a text that starts with a space (U+0020), read off
    Python's own parse of it; True whenever a part is not understood (so a False is
    certain). A pattern that may match the empty string may match there too. The space
    has no other case, so ``re.IGNORECASE`` changes nothing here. Kept per pattern (the
    grammar's terminals: a bounded set), as lexers share most of their terminals."""
    try:
        may, empty = _first_space(list(_sre_parser.parse(pattern, flags)))
    except _Unknown:
        return True
    return may or empty


#: Python's regular-expression parser (``re._parser``; ``sre_parse`` is its deprecated alias).
_sre_parser = importlib.import_module("re._parser")
_sre = importlib.import_module("re._constants")

#: Character categories that hold the space, and those that do not.
_SPACE_CATEGORIES = frozenset(
    {_sre.CATEGORY_SPACE, _sre.CATEGORY_NOT_DIGIT, _sre.CATEGORY_NOT_WORD}
)
_NO_SPACE_CATEGORIES = frozenset({_sre.CATEGORY_NOT_SPACE, _sre.CATEGORY_DIGIT, _sre.CATEGORY_WORD})
_SPACE = ord(" ")


def _first_space(items: list[tuple[object, Any]]) -> tuple[bool, bool]:
    """For a sequence of parsed items: (may its match start with a space, may it match
    the empty string)."""
    for op, value in items:
        may, empty = _item_space(op, value)
        if may:
            return True, empty
        if not empty:
            return False, False
    return False, True


def _item_space(op: object, value: Any) -> tuple[bool, bool]:
    if op is _sre.LITERAL:
        return value == _SPACE, False
    if op is _sre.NOT_LITERAL:
        return value != _SPACE, False
    if op is _sre.ANY:
        return True, False
    if op is _sre.IN:
        return _in_set_space(value), False
    if op is _sre.SUBPATTERN:
        return _first_space(list(value[3]))
    if op is _sre.ATOMIC_GROUP:
        return _first_space(list(value))
    if op is _sre.BRANCH:
        results = [_first_space(list(branch)) for branch in value[1]]
        return any(may for may, _ in results), any(empty for _, empty in results)
    if op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT, _sre.POSSESSIVE_REPEAT):
        low, high, body = value
        if high == 0:
            return False, True
        may, empty = _first_space(list(body))
        return may, empty or low == 0
    if op in (_sre.AT, _sre.ASSERT, _sre.ASSERT_NOT):
        return False, True  # zero-width: what follows decides (an assertion only narrows)
    raise _Unknown


def _in_set_space(items: list[tuple[object, Any]]) -> bool:
    """Whether a character class ``[...]`` holds the space."""
    negate = bool(items) and items[0][0] is _sre.NEGATE
    found = False
    for op, value in items[1:] if negate else items:
        if op is _sre.LITERAL:
            found = found or value == _SPACE
        elif op is _sre.RANGE:
            found = found or value[0] <= _SPACE <= value[1]
        elif op is _sre.CATEGORY and value in _SPACE_CATEGORIES:
            found = True
        elif not (op is _sre.CATEGORY and value in _NO_SPACE_CATEGORIES):
            raise _Unknown
    return found != negate


# ---------------------------------------------------------------- loading


@cache
def tables() -> Tables:
    """The shipped tables when they were built from this grammar; else built from Lark."""
    digest = grammar_digest(grammar_text())
    if _SHIPPED:
        data = json.loads(_SHIPPED)
        if data.get("format") == TABLES_FORMAT and data.get("grammar_sha256") == digest:
            return Tables(data)
    return Tables(build_tables(lark_parser(), digest))


# ---------------------------------------------------------------- the driver


_NONE_ENTRY: tuple[None, int, int] = (None, -1, -1)


class Driver:
    """Runs the tables over one statement; see the module docstring."""

    def __init__(self, tables: Tables) -> None:
        self.tables = tables

    def parse(self, text: str, builder: Any) -> Any:
        """The value the builder made for the start rule, built as the text is parsed.

        Each reduction of a named rule calls ``builder.<rule>(bounds, children)``. Values
        on the stack are (value, first offset, last offset), or lists of them for inlined
        rules; the loop is written out (no helper calls per token or per reduction) as it
        runs per token. A reduction shapes the children as Lark's tree builder would: the
        ``include`` filter of Lark's ``ChildFilterLALR``, then ``expand_single``, then the
        rule's node (or the list itself, for an inlined rule).
        """
        tables = self.tables
        actions = tables.actions
        rules = tables.rules
        lexers = tables.lexers_by_state
        end_state = tables.end
        new_str = str.__new__
        new_tuple = _new_tuple
        first_of = _first
        none_entry = _NONE_ENTRY
        state = tables.start
        state_stack = [state]
        value_stack: list[Any] = []
        pos = 0
        length = len(text)
        last = length - 1
        while True:
            token: Token | None = None
            lexer = lexers[state] or tables.lexer(state)
            skips_space = lexer.skips_space
            while pos < length:
                if (
                    skips_space
                    and text[pos] == " "
                    and (pos == last or not text[pos + 1].isspace())
                ):
                    pos += 1  # the ignored \s+ of one space (see _skips_space)
                    continue
                for pattern in lexer.segments:
                    match = pattern.match(text, pos)
                    if match is not None:
                        break
                else:
                    raise NoFastPath
                group = match.lastgroup
                assert group is not None  # every segment's alternatives are named groups
                kind = group
                end = match.end()
                if kind in lexer.ignore:
                    pos = end
                    continue
                lexeme = match.group()
                keyword = lexer.unless.get(kind)
                if keyword is not None:
                    found = keyword.fullmatch(lexeme)
                    if found is not None:
                        group = found.lastgroup
                        assert group is not None
                        kind = group
                token = new_str(Token, lexeme)
                token.type = kind
                token.start_pos = pos
                token.end_pos = end
                break
            if token is None:
                kind = "$END"
            while True:
                action = actions[state].get(kind)
                if action is None:
                    raise NoFastPath
                if action >= 0:
                    if token is None:
                        raise NoFastPath
                    state = action
                    state_stack.append(state)
                    value_stack.append((token, pos, end))
                    pos = end
                    break
                size, origin, include, append_none, expand_single, name, inline, shortcut = rules[
                    ~action
                ]
                if size == 1 and shortcut:  # the commonest reductions, done in place
                    if shortcut == 1:
                        value_stack[-1] = [value_stack[-1]]
                    state = state_stack[-1] = actions[state_stack[-2]][origin]
                    continue
                if size:
                    children = value_stack[-size:]
                    del value_stack[-size:]
                    del state_stack[-size:]
                else:
                    children = []
                value: Any
                if shortcut == 1:
                    value = children
                elif shortcut == 2:
                    value = children[0]
                else:
                    if include is None:
                        filtered = children
                    else:
                        filtered = []
                        for index, splice, placeholders in include:
                            if placeholders:
                                filtered.extend([none_entry] * placeholders)
                            if splice:
                                if filtered:
                                    filtered.extend(children[index])
                                else:  # reuse the list: a left-recursive rule grows it in place
                                    filtered = children[index]
                            else:
                                filtered.append(children[index])
                        if append_none:
                            filtered.extend([none_entry] * append_none)
                    if expand_single and len(filtered) == 1:
                        value = filtered[0]
                    elif inline:
                        value = filtered
                    else:
                        # the first child's first offset and the last child's last, of the
                        # children that have tokens (first offset >= 0)
                        start = stop = -1
                        for _, first, _ in filtered:
                            if first >= 0:
                                start = first
                                break
                        if start >= 0:
                            for child in reversed(filtered):
                                if child[1] >= 0:
                                    stop = child[2]
                                    break
                        method: Callable[[Bounds, list[Any]], Any] = getattr(builder, name)
                        # tuple.__new__ and map: no Python frame for the NamedTuple's
                        # __new__ or a comprehension
                        value = (
                            method(new_tuple(Bounds, (start, stop)), list(map(first_of, filtered))),
                            start,
                            stop,
                        )
                state = actions[state_stack[-1]][origin]
                state_stack.append(state)
                value_stack.append(value)
                if token is None and state == end_state:
                    return value[0]


_new_tuple = tuple.__new__
_first = itemgetter(0)


def all_lexer_patterns(data: dict[str, Any]) -> list[tuple[str, int]]:
    """Every regular expression the lexers of ``data`` compile, with its flags."""
    found: list[tuple[str, int]] = []
    for spec in data["lexers"]:
        segments, unless = lexer_patterns(data, spec)
        found.extend((pattern, data["flags"]) for pattern in [*segments, *unless.values()])
    return found


def main() -> int:
    """Write grammar/tables.py for the current grammar, and grammar/lexer_regexes.py for
    its lexers (by this Python)."""
    grammar = Path(flowc.grammar.__file__).parent / "flow.lark"
    folder = grammar.resolve().parent  # beside the source, not a build's link
    data = build_tables(lark_parser())
    (folder / "tables.py").write_text(render_tables_module(data), encoding="utf-8")
    regexes = render_module(all_lexer_patterns(data))
    (folder / "lexer_regexes.py").write_text(regexes, encoding="utf-8")
    print(f"wrote {folder / 'tables.py'} and {folder / 'lexer_regexes.py'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
