"""A MATCH_RECOGNIZE clause read from its statement's text: its PATTERN's variables and
quantifiers, and each part outside flowc's subset, located, with Flink 2.3's reason where
Flink refuses it too (docs/language.md#match_recognize).

flowc does not run the clause yet: a clause with none of these parts is still E0759 at
its name; one with them is E0759 at each part, so that what will stay refused says so.
The text read is the statement's with strings and comments blanked (positions kept).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from typing import TypeVar

from flowc import ast
from flowc.errorcodes import Code
from flowc.fast_dataclass import dataclass
from flowc.limits import MAX_NESTING, MAX_TREE_DEPTH
from flowc.spans import Span

_NOT_YET = "MATCH_RECOGNIZE is not run yet in any form; "


@dataclass(frozen=True, slots=True)
class Refusal:
    """A part of the clause outside the subset: message, hint, ``[start, end)``; ``code``
    E0759, or E0004 for a condition nested past the compiler's bounds."""

    message: str
    hint: str
    start: int
    end: int
    code: Code = Code.E0759


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
    for before, after in itertools.pairwise(variables):
        greedy_range = (
            before.greedy and before.low != before.high and (before.low, before.high) != (0, 1)
        )
        if greedy_range and after.low == 0:
            refusals.append(
                Refusal(
                    f"an optional variable ({after.name}) right after a greedy one is "
                    "refused: Flink 2.3 does not run it",
                    _NOT_YET + 'Flink says "Optional pattern cannot be preceded by greedy '
                    f'pattern"; make {before.name} reluctant (+?, *?, {{n,m}}?)',
                    after.start,
                    after.end,
                )
            )
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


class _NotInSubset(Exception):
    """A part of a condition or measure outside the subset, at ``[start, end)``."""

    def __init__(self, message: str, start: int, end: int, code: Code = Code.E0759) -> None:
        super().__init__(message)
        self.message = message
        self.start = start
        self.end = end
        self.code = code


_TOKEN = re.compile(
    r"\s*(?:(?P<number>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)|(?P<string>'(?:[^']|'')*')"
    r"|(?P<word>[A-Za-z_][A-Za-z_0-9]*)|(?P<sign><>|<=|>=|!=|[-+*/%=<>(),.]))"
)
_COMPARISONS = ("=", "<>", "!=", "<", "<=", ">", ">=")
#: Calls of a variable's rows, with an offset (FIRST, LAST) or without (the aggregates).
_ROW_CALLS = ("FIRST", "LAST")
_AGGREGATES = ("COUNT", "SUM", "AVG", "MIN", "MAX")


class _ExpressionReader:
    """A Pratt reader of one condition or measure: ``source`` is the statement's text,
    ``span`` turns its offsets into spans."""

    def __init__(self, source: str, start: int, end: int, span: Callable[[int, int], Span]) -> None:
        self.tokens: list[tuple[str, str, int, int]] = []
        position = start
        while position < end:
            found = _TOKEN.match(source, position, end)
            if found is None or found.lastgroup is None:
                rest = source[position:end]
                if rest.strip() == "":
                    break
                at = position + len(rest) - len(rest.lstrip())
                raise _NotInSubset(
                    f"{source[at]!r} is not in flowc's MATCH_RECOGNIZE subset", at, at + 1
                )
            kind = found.lastgroup
            self.tokens.append((kind, found.group(kind), found.start(kind), found.end(kind)))
            position = found.end()
        self.at = 0
        self.depth = 0
        self.to_span = span
        #: Each node's place in the text, by id (the nodes live as long as the reader).
        self.places: dict[int, tuple[int, int]] = {}

    def made(self, node: _N, start: int, end: int) -> _N:
        self.places[id(node)] = (start, end)
        return node

    def start(self, node: ast.MatchExpr) -> int:
        return self.places[id(node)][0]

    def end(self, node: ast.MatchExpr) -> int:
        return self.places[id(node)][1]

    def peek(self) -> tuple[str, str, int, int] | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def word(self) -> str:
        token = self.peek()
        return token[1].upper() if token is not None and token[0] != "string" else ""

    def take(self) -> tuple[str, str, int, int]:
        token = self.peek()
        if token is None:
            last = self.tokens[-1] if self.tokens else ("", "", 0, 0)
            raise _NotInSubset("this expression ends too soon", last[2], last[3])
        self.at += 1
        return token

    def expect(self, sign: str) -> tuple[str, str, int, int]:
        token = self.take()
        if token[1].upper() != sign:
            raise _NotInSubset(f"expected {sign!r} here", token[2], token[3])
        return token

    def whole(self) -> ast.MatchExpr:
        expr = self.expression(0)
        extra = self.peek()
        if extra is not None:
            raise _NotInSubset(f"unexpected {extra[1]!r} here", extra[2], extra[3])
        # The passes after this walk the tree recursively: its depth is bounded (a chain
        # of + or AND is as deep as it is long).
        stack = [(expr, 1)]
        while stack:
            node, depth = stack.pop()
            if depth > MAX_TREE_DEPTH:
                raise _NotInSubset(
                    f"this condition's tree is more than {MAX_TREE_DEPTH} levels deep",
                    self.start(expr),
                    self.end(expr),
                    Code.E0004,
                )
            if isinstance(node, ast.MatchUnary):
                stack.append((node.operand, depth + 1))
            elif isinstance(node, ast.MatchBinary):
                stack += [(node.left, depth + 1), (node.right, depth + 1)]
        return expr

    def expression(self, least: int) -> ast.MatchExpr:
        """Binding powers: OR 1, AND 2, NOT 3, comparisons 4, IS 5, + and - 6, * 7. Each
        bracket, NOT or - open is a level; past MAX_NESTING, E0004 (no deep recursion)."""
        self.depth += 1
        try:
            return self._expression(least)
        finally:
            self.depth -= 1

    def _expression(self, least: int) -> ast.MatchExpr:
        if self.depth > MAX_NESTING:
            token = self.peek() or self.tokens[-1]
            raise _NotInSubset(
                f"this condition is nested more than {MAX_NESTING} levels deep",
                token[2],
                token[3],
                Code.E0004,
            )
        left = self.prefix()
        while True:
            op = self.word()
            power = 4 if op in _COMPARISONS else _POWERS.get(op)
            if op in ("/", "%"):
                token = self.take()
                raise _NotInSubset(
                    f"{op} is not in flowc's MATCH_RECOGNIZE subset (Flink's and Spark's "
                    "division of integers differ)",
                    token[2],
                    token[3],
                )
            if power is None or power <= least:
                return left
            self.take()
            if op == "IS":
                negated = self.word() == "NOT"
                if negated:
                    self.take()
                null = self.take()
                if null[1].upper() != "NULL":
                    raise _NotInSubset("only IS [NOT] NULL is in the subset", null[2], null[3])
                start = self.start(left)
                unary = ast.MatchUnary(
                    op="IS NOT NULL" if negated else "IS NULL",
                    operand=left,
                    span=self.to_span(start, null[3]),
                )
                left = self.made(unary, start, null[3])
                continue
            right = self.expression(power)
            start, end = self.start(left), self.end(right)
            binary = ast.MatchBinary(
                op="<>" if op == "!=" else op,
                left=left,
                right=right,
                span=self.to_span(start, end),
            )
            left = self.made(binary, start, end)

    def prefix(self) -> ast.MatchExpr:
        kind, text, start, end = self.take()
        upper = text.upper()
        span = self.to_span(start, end)
        if kind == "number":
            if "." in text and "e" not in text.lower():
                raise _NotInSubset(
                    "a DECIMAL literal is not in flowc's MATCH_RECOGNIZE subset (write it "
                    "as a DOUBLE: 1.5E0)",
                    start,
                    end,
                )
            value: int | float = float(text) if any(c in text for c in ".eE") else int(text)
            literal = "double" if isinstance(value, float) else "int"
            return self.made(ast.MatchLiteral(kind=literal, value=value, span=span), start, end)
        if kind == "string":
            value_text = text[1:-1].replace("''", "'")
            return self.made(
                ast.MatchLiteral(kind="string", value=value_text, span=span), start, end
            )
        if upper == "(":
            inner = self.expression(0)
            self.expect(")")
            return inner
        if upper in ("NOT", "-"):
            operand = self.expression(3 if upper == "NOT" else 7)
            finish = self.end(operand)
            unary = ast.MatchUnary(op=upper, operand=operand, span=self.to_span(start, finish))
            return self.made(unary, start, finish)
        if kind != "word":
            raise _NotInSubset(f"unexpected {text!r} here", start, end)
        if upper in ("TRUE", "FALSE", "NULL"):
            value_of = None if upper == "NULL" else upper == "TRUE"
            literal = "null" if upper == "NULL" else "boolean"
            return self.made(ast.MatchLiteral(kind=literal, value=value_of, span=span), start, end)
        if self.word() == "(":
            return self.call(upper, start, end)
        if self.word() == ".":
            self.take()
            column = self.take()
            if column[0] != "word":
                raise _NotInSubset("expected a column's name here", column[2], column[3])
            found = ast.MatchColumn(
                variable=text, column=column[1], span=self.to_span(start, column[3])
            )
            return self.made(found, start, column[3])
        return self.made(ast.MatchColumn(variable=None, column=text, span=span), start, end)

    def call(self, name: str, start: int, end: int) -> ast.MatchCall:
        self.expect("(")
        if name == "MATCH_ROWTIME":
            close = self.expect(")")
            rowtime = ast.MatchCall(
                function=name,
                variable=None,
                column=None,
                offset=0,
                span=self.to_span(start, close[3]),
            )
            return self.made(rowtime, start, close[3])
        if name not in ("PREV", *_ROW_CALLS, *_AGGREGATES):
            raise _NotInSubset(f"{name}() is not in flowc's MATCH_RECOGNIZE subset", start, end)
        first = self.take()
        variable: str | None = None
        column = first
        if self.word() == ".":
            self.take()
            variable, column = first[1], self.take()
        if column[0] != "word":
            raise _NotInSubset("expected a column's name here", column[2], column[3])
        if name == "PREV" and variable is not None:
            raise _NotInSubset("PREV of a variable's column is refused", first[2], column[3])
        if name != "PREV" and variable is None:
            raise _NotInSubset(
                f"{name} of a column without its variable is not in flowc's subset: write "
                f"{name}(V.{column[1]})",
                column[2],
                column[3],
            )
        offset = 1 if name == "PREV" else 0
        if self.word() == ",":
            self.take()
            number = self.take()
            if name in _AGGREGATES or number[0] != "number" or not number[1].isdigit():
                raise _NotInSubset(
                    "expected a row count (a whole number) here", number[2], number[3]
                )
            offset = int(number[1])
        close = self.expect(")")
        found = ast.MatchCall(
            function=name,
            variable=variable,
            column=column[1],
            offset=offset,
            span=self.to_span(start, close[3]),
        )
        return self.made(found, start, close[3])


_N = TypeVar(
    "_N",
    bound=ast.MatchLiteral | ast.MatchColumn | ast.MatchCall | ast.MatchUnary | ast.MatchBinary,
)
_POWERS = {"OR": 1, "AND": 2, "IS": 5, "+": 6, "-": 6, "*": 7}


@dataclass(frozen=True, slots=True)
class MatchInput:
    """A clause in the subset, as the parser takes it: the table it reads (its name and
    place), the place ``[start, end)`` of ``table MATCH_RECOGNIZE (...)`` that a hidden
    view's name replaces, and the step that view runs."""

    table: str
    table_start: int
    table_end: int
    start: int
    end: int
    step: ast.MatchRecognize


def _strings_kept(source: str, code: str) -> str:
    """``code`` with its blanked strings and quoted names filled again (with ``_``), so the
    parts' places include them; comments stay blank."""
    out = list(code)
    position = 0
    while position < len(code):
        if code[position] == source[position]:
            position += 1
            continue
        end = position
        while end < len(code) and code[end] != source[end]:
            end += 1
        if source[position] in "'`\"":
            out[position:end] = "_" * (end - position)
        position = end
    return "".join(out)


_FROM_TABLE = re.compile(r"\bFROM\s+([A-Za-z_][A-Za-z_0-9]*)\s*$", re.IGNORECASE)
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


def match_input(
    source: str,
    code: str,
    name_start: int,
    name_end: int,
    span: Callable[[int, int], Span],
) -> MatchInput | list[Refusal]:
    """The clause at ``code[name_start:name_end]`` (no part refused by
    :func:`read_match_recognize`) as a step over its table, or what in it is outside the
    subset (with where)."""
    clause = read_match_recognize(_strings_kept(source, code), name_start, name_end)
    found = _FROM_TABLE.search(code, 0, name_start)
    if found is None:
        return [
            Refusal(
                "MATCH_RECOGNIZE is run over a table named right after FROM",
                "write FROM t MATCH_RECOGNIZE (...), with t a table or a view (a view for a query)",
                name_start,
                name_end,
            )
        ]
    refusals: list[Refusal] = []

    def refuse(message: str, start: int, end: int, hint: str, code: Code = Code.E0759) -> None:
        refusals.append(Refusal(message, hint, start, end, code))

    def names(places: tuple[tuple[int, int], ...], what: str) -> list[ast.Name]:
        out = []
        for start, end in places:
            text = source[start:end]
            if _PLAIN_NAME.fullmatch(text) is None:
                refuse(
                    f"{what} here is a column's name in flowc's MATCH_RECOGNIZE subset",
                    start,
                    end,
                    "name a column of the table (compute others in a view before)",
                )
                continue
            out.append(ast.Name(value=text, span=span(start, end)))
        return out

    partition = names(clause.partition_by, "PARTITION BY")
    order_text = [(s, e) for s, e in clause.order_by]
    order: ast.Name | None = None
    if len(order_text) != 1:
        refuse(
            "MATCH_RECOGNIZE's ORDER BY is one column in flowc's subset: the rowtime attribute",
            name_start,
            name_end,
            "ORDER BY the table's event-time column (with a WATERMARK), ascending",
        )
    else:
        start, end = order_text[0]
        words = source[start:end].split()
        if len(words) == 2 and words[1].upper() == "ASC":
            end = start + len(words[0])
            words = words[:1]
        if len(words) != 1 or _PLAIN_NAME.fullmatch(words[0]) is None:
            refuse(
                "MATCH_RECOGNIZE's ORDER BY is the rowtime attribute, ascending",
                start,
                end,
                "ORDER BY the table's event-time column (with a WATERMARK); Flink says "
                '"You must specify either rowtime or proctime for order by as the first '
                'one"',
            )
        else:
            order = ast.Name(value=words[0], span=span(start, end))
    skip = clause.skip
    if skip not in ("", "PAST LAST ROW", "TO NEXT ROW"):
        refuse(
            f"AFTER MATCH SKIP {skip} is not in flowc's subset",
            name_start,
            name_end,
            "write AFTER MATCH SKIP PAST LAST ROW (the default) or SKIP TO NEXT ROW",
        )
    known = {v.name.upper(): v for v in clause.pattern}
    conditions: dict[str, ast.MatchExpr] = {}
    for variable, start, end in clause.define:
        if variable.upper() not in known:
            refuse(
                f"DEFINE of {variable}, which is not a PATTERN variable",
                start,
                end,
                "define the variables PATTERN names",
            )
            continue
        try:
            conditions[variable.upper()] = _ExpressionReader(source, start, end, span).whole()
        except _NotInSubset as error:
            refuse(error.message, error.start, error.end, _EXPRESSION_HINT, error.code)
    measures = []
    for alias, start, end in clause.measures:
        try:
            call = _ExpressionReader(source, start, end, span).whole()
        except _NotInSubset as error:
            refuse(error.message, error.start, error.end, _MEASURE_HINT, error.code)
            continue
        if not (
            (isinstance(call, ast.MatchCall) and call.function != "PREV")
            or (isinstance(call, ast.MatchColumn) and call.variable is not None)
        ):
            refuse(
                "a measure is one call in flowc's MATCH_RECOGNIZE subset",
                start,
                end,
                _MEASURE_HINT,
            )
            continue
        if _PLAIN_NAME.fullmatch(alias) is None:
            refuse("a measure's name is a plain name here", start, end, _MEASURE_HINT)
            continue
        alias_at = source.rfind(alias, start, len(source))
        measures.append(
            ast.MatchMeasure(
                call=call,
                alias=ast.Name(value=alias, span=span(alias_at, alias_at + len(alias))),
                span=span(start, alias_at + len(alias)),
            )
        )
    if not clause.measures:
        refuse(
            "MATCH_RECOGNIZE without MEASURES is not in flowc's subset",
            name_start,
            name_end,
            _MEASURE_HINT,
        )
    if refusals or order is None:
        return refusals
    open_at = code.find("(", name_end)
    close_at = _closing(code, open_at)
    variables = tuple(
        ast.MatchVariable(
            name=ast.Name(value=v.name, span=span(v.start, v.start + len(v.name))),
            low=v.low,
            high=v.high,
            greedy=v.greedy,
            condition=conditions.get(v.name.upper()),
            span=span(v.start, v.end),
        )
        for v in clause.pattern
    )
    step = ast.MatchRecognize(
        keyword_span=span(name_start, name_end),
        hints=(),
        hints_span=None,
        span=span(found.start(1), close_at + 1),
        partition=tuple(partition),
        order=order,
        measures=tuple(measures),
        variables=variables,
        past_last_row=skip != "TO NEXT ROW",
    )
    return MatchInput(
        found.group(1), found.start(1), found.end(1), found.start(1), close_at + 1, step
    )


_EXPRESSION_HINT = (
    "the subset's conditions compare columns, PREV(col[, n]), FIRST/LAST(V.col[, n]) and "
    "COUNT/SUM/AVG/MIN/MAX(V.col) with each other and with literals, joined by AND, OR, "
    "NOT, IS [NOT] NULL, + - * (docs/language.md#match_recognize)"
)
_MEASURE_HINT = (
    "each measure is one of V.col, FIRST/LAST(V.col[, n]), COUNT/SUM/AVG/MIN/MAX(V.col), "
    "MATCH_ROWTIME(), named with AS; compute expressions of them in the SELECT over the "
    "MATCH_RECOGNIZE"
)
