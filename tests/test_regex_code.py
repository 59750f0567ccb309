"""The lexers' regular expressions made from the shipped engine code
(``grammar/lexer_regexes.py``, :mod:`flowc.syntax.regex_code`) are ``re.compile``'s: a
pattern object compares its text, flags and engine code, so equal patterns match alike."""

from __future__ import annotations

import re
import sys

import pytest

from flowc.syntax import lalr, regex_code
from flowc.syntax.regex_code import SHIPPED, compiled

_SHIPPED_FOR_THIS_PYTHON = pytest.mark.skipif(
    not SHIPPED,
    reason="grammar/lexer_regexes.py was written by another Python: re.compile is used",
)


def test_every_lexer_pattern_is_shipped() -> None:
    """By the patterns' text, whichever Python wrote the file: a stale file fails here on
    every Python, not only on the one whose code it holds."""
    from flowc.grammar.lexer_regexes import CODES

    patterns = lalr.all_lexer_patterns(lalr.tables().data)
    missing = sorted(set(patterns) - set(CODES))
    assert not missing, (
        f"{len(missing)} lexer patterns not in grammar/lexer_regexes.py: run "
        "`python -m flowc.syntax.lalr` to write it again"
    )


@_SHIPPED_FOR_THIS_PYTHON
def test_shipped_code_compiles_as_re_does() -> None:
    assert len(SHIPPED) > 50
    for (pattern, flags), shipped in SHIPPED.items():
        made = compiled(pattern, flags)
        expected = re.compile(pattern, flags)
        assert made == expected, pattern
        assert (made.flags, made.groups, made.groupindex) == (
            expected.flags,
            expected.groups,
            expected.groupindex,
        ), pattern
        assert shipped == regex_code.regex_code(pattern, flags), pattern


def test_a_pattern_not_shipped_is_compiled_by_re() -> None:
    pattern = r"(?P<word>[a-z]+)-(?P<digits>\d+)"
    assert (pattern, re.IGNORECASE) not in SHIPPED
    made = compiled(pattern, re.IGNORECASE)
    assert made is re.compile(pattern, re.IGNORECASE)


def test_code_from_another_engine_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """The shipped code is read only when this interpreter's version and engine wrote it."""
    import importlib

    monkeypatch.setattr(sys, "version_info", (2, 7, 18, "final", 0))
    reloaded = importlib.reload(regex_code)
    try:
        assert reloaded.SHIPPED == {}
    finally:
        monkeypatch.undo()
        importlib.reload(regex_code)


def test_regex_code_gives_the_engine_what_re_compile_does() -> None:
    """Case-insensitive keywords, named groups, a possessive repeat and a character class
    as the lexers write them, from regex_code's code, match as re.compile's patterns."""
    import _sre  # type: ignore[import-not-found]

    texts = ["Select x", "SELECT", "abc123", "'it''s'", "  \t", "--c\n", "ä_1"]
    for pattern, flags in [
        (r"(?P<SELECT>(?i:select))|(?P<NAME>[A-Za-z_]\w*)", 0),
        (r"(?P<STRING>'[^'\\]*(?:(?:\\.|'')[^'\\]*)*')|(?P<WS>\s+)", 0),
        (r"(?P<SOUP>(?:[^;']|'[^']*')++)", re.MULTILINE),
        (r"(?P<COMMENT>--[^\n]*)", re.IGNORECASE),
    ]:
        final_flags, code, groups, groupindex, indexgroup = regex_code.regex_code(pattern, flags)
        made = _sre.compile(pattern, final_flags, list(code), groups, groupindex, indexgroup)
        expected = re.compile(pattern, flags)
        assert made == expected
        for text in texts:
            for start in range(len(text)):
                got, want = made.match(text, start), expected.match(text, start)
                assert (got and (got.span(), got.lastgroup)) == (
                    want and (want.span(), want.lastgroup)
                ), (pattern, text, start)
