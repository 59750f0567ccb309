"""A MATCH_RECOGNIZE clause read from its statement's text: its PATTERN's variables and
quantifiers, and each part outside flowc's subset, located, with Flink 2.3's reason where
Flink refuses it too (docs/language.md#match_recognize).

flowc does not run the clause yet: a clause with none of these parts is still E0759 at
its name; one with them is E0759 at each part, so that what will stay refused says so.
The text read is the statement's with strings and comments blanked (positions kept).
"""

from __future__ import annotations

import re

from flowc.fast_dataclass import dataclass

_NOT_YET = "MATCH_RECOGNIZE is not run yet in any form; "


@dataclass(frozen=True, slots=True)
class Refusal:
    """A part of the clause outside the subset: message, hint, ``[start, end)``."""

    message: str
    hint: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class PatternVariable:
    """One variable of PATTERN: least and most rows (None: unbounded), greedy or not (Flink's
    reading: ``?`` and ``{n}`` are never greedy), where it is written."""

    name: str
    low: int
    high: int | None
    greedy: bool
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class MatchClause:
    """What was read of one clause: its PATTERN (empty where it could not be read), the
    parts refused, and where its other parts are written, as ``(start, end)`` places of the
    text (``measures``: each expression's place and its name; ``define``: each variable and
    its condition's place; ``skip``: what follows AFTER MATCH SKIP, upper-cased, "" if
    none), for the plan to read."""

    pattern: tuple[PatternVariable, ...]
    refusals: tuple[Refusal, ...]
    partition_by: tuple[tuple[int, int], ...] = ()
    order_by: tuple[tuple[int, int], ...] = ()
    measures: tuple[tuple[str, int, int], ...] = ()
    define: tuple[tuple[str, int, int], ...] = ()
    skip: str = ""


_WORDS = re.compile(r"[A-Za-z_][A-Za-z_0-9$]*|\S")
_QUANTIFIER = re.compile(r"\s*(\*|\+|\?|\{\s*(\d*)\s*(,?)\s*(\d*)\s*\})(\??)")
_CALLS = {
    "NEXT": "NEXT (a later row) is not in Flink 2.3's MATCH_RECOGNIZE",
    "CLASSIFIER": "CLASSIFIER() is not in flowc's MATCH_RECOGNIZE subset",
    "MATCH_NUMBER": "MATCH_NUMBER() is not in flowc's MATCH_RECOGNIZE subset",
    "MATCH_PROCTIME": "MATCH_PROCTIME() is processing time, not in flowc's subset",
}


def _closing(code: str, open_at: int) -> int:
    """The position of the bracket closing the one at ``open_at`` (the text's end if none)."""
    depth = 0
    for position in range(open_at, len(code)):
        char = code[position]
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth == 0:
                return position
    return len(code)


def _top_level_words(code: str, start: int, end: int) -> list[tuple[str, int, int]]:
    """The upper-cased words and signs of ``code[start:end]`` outside inner brackets."""
    found = []
    depth = 0
    for match in _WORDS.finditer(code, start, end):
        token = match.group()
        if token == "(":
            depth += 1
        elif token == ")":
            depth -= 1
        if depth == 0 and token not in "()":
            found.append((token.upper(), match.start(), match.end()))
    return found


def _phrase(words: list[tuple[str, int, int]], at: int, *names: str) -> bool:
    return [w for w, _, _ in words[at : at + len(names)]] == list(names)


def read_match_recognize(code: str, name_start: int, name_end: int) -> MatchClause:
    """The clause whose name is ``code[name_start:name_end]`` (its bracket follows)."""
    open_at = code.find("(", name_end)
    if open_at == -1:
        return MatchClause((), ())
    close_at = _closing(code, open_at)
    words = _top_level_words(code, open_at + 1, close_at)
    refusals: list[Refusal] = []
    pattern: tuple[PatternVariable, ...] = ()
    if not any(_phrase(words, i, "PARTITION", "BY") for i in range(len(words))):
        refusals.append(
            Refusal(
                "MATCH_RECOGNIZE without PARTITION BY is not in flowc's subset",
                _NOT_YET + "its rows are to be matched per key: Flink runs an unpartitioned "
                "one in a single subtask",
                name_start,
                name_end,
            )
        )
    for i, (word, start, end) in enumerate(words):
        if _phrase(words, i, "ALL", "ROWS", "PER", "MATCH"):
            refusals.append(
                Refusal(
                    "ALL ROWS PER MATCH is refused: Flink 2.3 runs ONE ROW PER MATCH only",
                    _NOT_YET + 'Flink says "All rows per match mode is not supported yet"',
                    start,
                    words[i + 3][2],
                )
            )
        elif _phrase(words, i, "SKIP", "TO") and not _phrase(words, i, "SKIP", "TO", "NEXT"):
            last = words[min(i + 3, len(words) - 1)]
            refusals.append(
                Refusal(
                    "AFTER MATCH SKIP TO a variable is not in flowc's subset",
                    _NOT_YET + "the subset has AFTER MATCH SKIP PAST LAST ROW and SKIP TO NEXT ROW",
                    start,
                    last[2],
                )
            )
        elif word in ("WITHIN", "SUBSET"):
            refusals.append(
                Refusal(
                    f"{word} is not in flowc's MATCH_RECOGNIZE subset",
                    _NOT_YET + "the subset has no time bound on a match (WITHIN) and no "
                    "union variables (SUBSET)",
                    start,
                    end,
                )
            )
        elif word == "PATTERN" and code.find("(", end, close_at) != -1:
            pattern_open = code.find("(", end, close_at)
            pattern_close = _closing(code, pattern_open)
            pattern, found = _read_pattern(code, pattern_open + 1, pattern_close)
            refusals += found
    refusals += _refused_calls(code, open_at + 1, close_at)
    parts = _sections(code, words, close_at)
    return MatchClause(
        pattern,
        tuple(sorted(refusals, key=lambda r: r.start)),
        tuple(_split(code, *parts["PARTITION"])) if "PARTITION" in parts else (),
        tuple(_split(code, *parts["ORDER"])) if "ORDER" in parts else (),
        tuple(_named(code, *parts["MEASURES"], last=True)) if "MEASURES" in parts else (),
        tuple(_named(code, *parts["DEFINE"], last=False)) if "DEFINE" in parts else (),
        " ".join(code[slice(*parts["AFTER"])].split()).upper() if "AFTER" in parts else "",
    )


#: The clause's parts, each by its first word and the words that open it.
_OPENERS = {
    "PARTITION": ("PARTITION", "BY"),
    "ORDER": ("ORDER", "BY"),
    "MEASURES": ("MEASURES",),
    "ONE": ("ONE", "ROW", "PER", "MATCH"),
    "ALL": ("ALL", "ROWS", "PER", "MATCH"),
    "AFTER": ("AFTER", "MATCH", "SKIP"),
    "PATTERN": ("PATTERN",),
    "WITHIN": ("WITHIN",),
    "SUBSET": ("SUBSET",),
    "DEFINE": ("DEFINE",),
}


def _sections(
    code: str, words: list[tuple[str, int, int]], close_at: int
) -> dict[str, tuple[int, int]]:
    """Each part's text after its opening words, up to the next part's."""
    starts: list[tuple[str, int, int]] = []
    for i, (word, start, _) in enumerate(words):
        opener = _OPENERS.get(word)
        if opener is not None and _phrase(words, i, *opener):
            starts.append((word, start, words[i + len(opener) - 1][2]))
    found: dict[str, tuple[int, int]] = {}
    for n, (word, _, body) in enumerate(starts):
        found.setdefault(word, (body, starts[n + 1][1] if n + 1 < len(starts) else close_at))
    return found


def _split(code: str, start: int, end: int) -> list[tuple[int, int]]:
    """The places of the comma-separated items of ``code[start:end]`` (brackets kept
    whole), blanks trimmed."""
    items = []
    depth = 0
    begin = start
    for position in range(start, end + 1):
        char = code[position] if position < end else ","
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            text = code[begin:position]
            if text.strip():
                left = begin + len(text) - len(text.lstrip())
                items.append((left, left + len(text.strip())))
            begin = position + 1
    return items


_AS = re.compile(r"\bAS\b", re.IGNORECASE)


def _named(code: str, start: int, end: int, last: bool) -> list[tuple[str, int, int]]:
    """Items ``expression AS name`` (``last``: MEASURES, the last top-level AS) or ``name
    AS condition`` (DEFINE, the first): the name and the expression's place."""
    named = []
    for left, right in _split(code, start, end):
        found = list(_AS.finditer(code, left, right))
        if not found:
            continue
        split = found[-1] if last else found[0]
        if last:
            expression = code[left : split.start()]
            named.append((code[split.end() : right].strip(), left, left + len(expression.rstrip())))
        else:
            name = code[left : split.start()].strip()
            body = code[split.end() : right]
            offset = split.end() + len(body) - len(body.lstrip())
            named.append((name, offset, right))
    return named


def _read_pattern(
    code: str, start: int, end: int
) -> tuple[tuple[PatternVariable, ...], list[Refusal]]:
    """PATTERN's variables with their quantifiers, and what in it is refused."""
    variables: list[PatternVariable] = []
    refusals: list[Refusal] = []
    position = start
    name_re = re.compile(r"\s*([A-Za-z_][A-Za-z_0-9]*)")
    while position < end:
        while position < end and code[position].isspace():
            position += 1
        if position >= end:
            break
        char = code[position]
        named = name_re.match(code, position, end)
        if named is None or named.group(1).upper() == "PERMUTE":
            what = {
                "|": "alternation (|)",
                "(": "a group of variables",
                "^": "an anchor (^)",
                "$": "an anchor ($)",
            }.get(char, f"{code[position]!r}")
            if named is not None:
                what = "PERMUTE"
            elif code.startswith("{-", position):
                what = "an exclusion ({- -})"
            refusals.append(
                Refusal(
                    f"{what} in PATTERN is not in flowc's MATCH_RECOGNIZE subset",
                    _NOT_YET + "the subset's PATTERN is a sequence of variables, each with "
                    "?, +, *, {n}, {n,} or {n,m} (reluctant with a trailing ?); Flink 2.3 "
                    "refuses the rest",
                    position,
                    position + (len("PERMUTE") if named is not None else 1),
                )
            )
            return (), refusals
        name = named.group(1)
        name_at = named.start(1)
        position = named.end()
        quantified = _QUANTIFIER.match(code, position, end)
        low, greedy, q_end = 1, True, position
        high: int | None = 1
        if quantified is not None:
            sign, least, comma, most, reluctant = quantified.groups()
            q_end = quantified.end()
            if sign == "*":
                low, high = 0, None
            elif sign == "+":
                low, high = 1, None
            elif sign == "?":
                low, high = 0, 1
            else:
                low = int(least) if least else 0
                high = int(most) if most else (None if comma else low)
            greedy = not reluctant
            if sign.startswith("{") and not least and comma:
                refusals.append(
                    Refusal(
                        "{,m} with no least count is refused: Flink 2.3 fails on it",
                        _NOT_YET + 'Flink says "The from should be a positive number greater '
                        'than 0"; write {0,m}',
                        name_at,
                        q_end,
                    )
                )
            elif low == 0 and high == 1 and not greedy:
                refusals.append(
                    Refusal(
                        "a reluctant optional variable (??) is refused: Flink 2.3 does not run it",
                        _NOT_YET + 'Flink says "Reluctant optional variables are not '
                        'supported yet"',
                        name_at,
                        q_end,
                    )
                )
            elif high is not None and (high == 0 or high < low):
                refusals.append(
                    Refusal(
                        "a quantifier with no rows or fewer rows at most than at least",
                        _NOT_YET + "write {n,m} with 0 < m and n <= m",
                        name_at,
                        q_end,
                    )
                )
        if any(v.name.upper() == name.upper() for v in variables):
            refusals.append(
                Refusal(
                    f"variable {name} is twice in PATTERN",
                    _NOT_YET + 'Flink says "Pattern variables must be unique"',
                    name_at,
                    q_end,
                )
            )
        variables.append(PatternVariable(name, low, high, greedy, name_at, q_end))
        position = q_end
    if variables:
        last = variables[-1]
        never_greedy = (last.low == 0 and last.high == 1) or last.low == last.high
        if last.greedy and not never_greedy:
            refusals.append(
                Refusal(
                    "a greedy quantifier on PATTERN's last variable is refused: Flink 2.3 "
                    "does not run it",
                    _NOT_YET + 'Flink says "Greedy quantifiers are not allowed as the last '
                    'element of a Pattern yet"; make it reluctant (+?, *?, {n,m}?) or end '
                    "with a plain variable",
                    last.start,
                    last.end,
                )
            )
        if all(v.low == 0 for v in variables):
            refusals.append(
                Refusal(
                    "a PATTERN whose every variable is optional is refused: it can match no row",
                    _NOT_YET + 'Flink says "Patterns that can produce empty matches are not '
                    'supported"',
                    variables[0].start,
                    variables[-1].end,
                )
            )
    return tuple(variables), refusals


_CALL = re.compile(r"\b(NEXT|CLASSIFIER|MATCH_NUMBER|MATCH_PROCTIME|PREV)\s*\(", re.IGNORECASE)
_QUALIFIED_PREV = re.compile(r"\s*[A-Za-z_][A-Za-z_0-9]*\s*\.")
_RUNNING = re.compile(r"\b(RUNNING|FINAL)\s+[A-Za-z_][A-Za-z_0-9]*\s*\(", re.IGNORECASE)


def _refused_calls(code: str, start: int, end: int) -> list[Refusal]:
    """NEXT, CLASSIFIER, MATCH_NUMBER, MATCH_PROCTIME, PREV of a variable's column, and
    RUNNING or FINAL written out, in MEASURES or DEFINE."""
    found = []
    for call in _CALL.finditer(code, start, end):
        name = call.group(1).upper()
        if name == "PREV":
            if _QUALIFIED_PREV.match(code, call.end(), end) is None:
                continue
            found.append(
                Refusal(
                    "PREV of a variable's column is refused: Flink 2.3 does not run it",
                    _NOT_YET + 'Flink says "Flink does not support physical offsets within '
                    'partition"; PREV(col) reads the row before within the match, LAST(V.col, '
                    "n) a variable's rows",
                    call.start(1),
                    call.end(1),
                )
            )
            continue
        found.append(
            Refusal(
                _CALLS[name], _NOT_YET + "see the subset in the docs", call.start(1), call.end(1)
            )
        )
    for word in _RUNNING.finditer(code, start, end):
        found.append(
            Refusal(
                f"{word.group(1).upper()} written out is not in flowc's MATCH_RECOGNIZE subset",
                _NOT_YET + "Flink evaluates MEASURES as FINAL; the subset takes them unwritten",
                word.start(1),
                word.end(1),
            )
        )
    return found
