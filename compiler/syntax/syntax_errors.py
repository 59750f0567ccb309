"""The messages of syntax errors: of the flow grammar (from Lark's error, which names the
token found and the terminals expected) and of SQL expressions (from sqlglot's, mapped
back to the file); each says what was expected in words, with a help line where one helps.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from sqlglot.errors import ParseError

from flowc.diagnostics import Reporter
from flowc.errorcodes import Code
from flowc.spans import Span, text_span
from flowc.sql.flink_dialect import FLINK
from flowc.sql.habits import FLINK_WINDOW_TVF, create_help, flink_tvf_help
from flowc.syntax.lalr import Token
from flowc.syntax.source_text import Chunk, LineIndex, open_bracket

if TYPE_CHECKING:
    import lark

_TERMINAL_TEXT = {
    "COMMENT_WORD": "COMMENT",
    "SEMICOLON": "';'",
    "COMMA": "','",
    "LPAR": "'('",
    "RPAR": "')'",
    "LSQB": "'['",
    "RSQB": "']'",
    "EQUAL": "'='",
    "DOT": "'.'",
    "COLON": "':'",
    "LESSTHAN": "'<'",
    "MORETHAN": "'>'",
    "PIPE": "'|>'",
    "MINUS": "'-'",
    "NAME": "a name",
    "QUOTED_NAME": "a name",
    "STRING": "a string",
    "NUMBER": "a number",
    "OPERATOR": "an operator",
    "$END": "the end of the statement",
    "WINDOW_KIND": "TUMBLE, HOP, SESSION or CUMULATE",
    "JOIN_KIND": "INNER, LEFT, RIGHT or FULL",
}

_STEP_KEYWORDS = [
    *("WHERE", "SELECT", "EXTEND", "SET", "DROP", "RENAME", "EXPLODE", "KEY", "REBALANCE"),
    *("RESCALE", "SHUFFLE", "BROADCAST", "GLOBAL", "FORWARD", "PARTITION", "WINDOW"),
    *("AGGREGATE", "DEDUPLICATE", "JOIN", "UNION", "ROUTE"),
]


def _describe_terminal(name: str) -> str:
    if name in _TERMINAL_TEXT:
        return _TERMINAL_TEXT[name]
    if name.isupper() and name.isalpha():
        return name
    return name.lower()


def _describe_token(token: Token) -> str:
    if token.type == "$END":
        return "end of statement"
    if token.type == "SEMICOLON":
        return "';'"
    value = str(token)
    if len(value) > 30:
        value = value[:27] + "..."
    if token.type in ("NAME", "QUOTED_NAME"):
        return f"name '{value}'"
    if token.type == "CHAR":
        return f"character '{value}'"
    if token.type == "STRING":
        return f"string {value}"
    if token.type == "NUMBER":
        return f"number {value}"
    return f"'{value}'"


def _expected_text(expected: set[str]) -> tuple[str, str | None]:
    """A short phrase for what the parser expected, and a help line where one helps."""
    if "CREATE" in expected and "INSERT" in expected:  # a statement's start
        return (
            "a statement",
            "a statement starts with CREATE, INSERT or SET, or is a query (SELECT, WITH, FROM)",
        )
    for closer, opener in (("RPAR", "("), ("RSQB", "["), ("END", "CASE")):
        if closer in expected:
            wanted = [_describe_terminal(closer)]
            if "COMMA" in expected:
                wanted.insert(0, "','")
            return " or ".join(wanted), f"a '{opener}' is not closed"
    if set(_STEP_KEYWORDS) <= expected:
        return "a pipe step", "steps: " + ", ".join(_STEP_KEYWORDS)
    names = sorted({_describe_terminal(e) for e in expected})
    if len(names) <= 5:
        return " or ".join(names), None
    return "something else", "expected one of: " + ", ".join(names)


def report_syntax_error(
    error: lark.exceptions.UnexpectedInput, chunk: Chunk, index: LineIndex, reporter: Reporter
) -> None:
    from lark.exceptions import UnexpectedCharacters, UnexpectedToken

    if isinstance(error, UnexpectedToken):
        token = error.token
        if token.type == "$END":
            span_start = chunk.last_token_end
            span = index.span(span_start, span_start)
        else:
            span_start = chunk.start + (token.start_pos or 0)
            if token.type == "SOUP":
                piece = re.match(r"\w+|\S", str(token))
                text = piece.group() if piece else str(token)
                kind = "NUMBER" if text[0].isdigit() else "NAME" if text[0].isalpha() else "CHAR"
                kind = "NAME" if text[0] == "_" else kind
                token = Token.make(kind, text, 0, len(text))
            span = index.span(span_start, span_start + len(str(token)))
            if index.text.startswith("/*", span_start):
                _unterminated_comment(reporter, index, span_start)
                return
        if token.type == "CHAR":
            reporter.error(Code.E0001, f"syntax error: unexpected character '{token}'", span)
            return
        expected_set = set(error.expected)
        found = _describe_token(token)
        if expected_set & {"RPAR", "RSQB", "END"}:
            opener = open_bracket(index.text, chunk.start, span_start)
            if opener is not None:
                closer = {"(": "')'", "[": "']'", "CASE": "END"}[opener[0]]
                wanted = (
                    f"',' or {closer}"
                    if "COMMA" in expected_set and opener[0] != "CASE"
                    else closer
                )
                line, column = index.position(opener[1])
                reporter.error(
                    Code.E0001,
                    f"syntax error: expected {wanted}, found {found}",
                    span,
                    help=f"the '{opener[0]}' at line {line}, column {column} is not closed",
                )
                return
        expected, help = _expected_text(expected_set)
        statement = index.text[chunk.start : chunk.end]
        if token.type == "NAME" and {"SOURCE", "SINK"} <= expected_set:
            help = create_help(str(token), statement) or help
        elif expected_set == {"NOT"} and re.search(
            r"\bprimary\s+key\s*(\([^()]*\))?\s*$", index.text[chunk.start : span_start], re.I
        ):
            # Flink too refuses an enforced key: it does not own the data it would check.
            help = (
                "Flink takes only PRIMARY KEY ... NOT ENFORCED (it cannot check data it does "
                "not own): write PRIMARY KEY NOT ENFORCED"
            )
        elif re.match(r"\s*create\s+table\b", statement, re.IGNORECASE):
            help = create_help("table", statement) or help
        reporter.error(Code.E0001, f"syntax error: expected {expected}, found {found}", span, help)
        return
    if isinstance(error, UnexpectedCharacters):
        start = chunk.start + (error.pos_in_stream or 0)
        char = index.text[start]
        if index.text.startswith("/*", start):
            _unterminated_comment(reporter, index, start)
        elif char in "'\"":
            reporter.error(
                Code.E0001,
                "syntax error: unterminated string",
                index.span(start, start + 1),
                help=f"close the string with {char}",
            )
        elif char == "`":
            reporter.error(
                Code.E0001,
                "syntax error: unterminated quoted name",
                index.span(start, start + 1),
                help="close the name with `",
            )
        else:
            reporter.error(
                Code.E0001,
                f"syntax error: unexpected character {char!r}",
                index.span(start, start + 1),
            )
        return
    span = index.span(chunk.end, chunk.end)
    reporter.error(Code.E0001, "syntax error: unexpected end of input", span)


def _unterminated_comment(reporter: Reporter, index: LineIndex, start: int) -> None:
    reporter.error(
        Code.E0001,
        "syntax error: unterminated block comment",
        index.span(start, start + 2),
        help="close the comment with */",
    )


def report_sqlglot_error(
    reporter: Reporter, error: ParseError, text: str, span: Span, dialect: str = "spark"
) -> None:
    """E0003 (in the Spark dialect, E0602 for a Flink window table function) for an
    expression sqlglot cannot parse, at the place sqlglot names, mapped back to the file."""
    tvf = FLINK_WINDOW_TVF.search(text) if dialect != FLINK else None
    if tvf is not None:
        kind = tvf.group(1).upper()
        reporter.error(
            Code.E0602,
            f"Flink's window table function TABLE({kind}(...)) is not Spark SQL",
            text_span(text, span, tvf.start(), tvf.end() - 1),
            help=flink_tvf_help(kind),
        )
        return
    detail = error.errors[0] if error.errors else {}
    line = detail.get("line")
    col = detail.get("col")
    description = detail.get("description") or first_line(str(error))
    highlight = detail.get("highlight") or ""
    where = span
    if isinstance(line, int) and isinstance(col, int) and line >= 1:
        start_col = max(col - len(highlight) + 1, 1) if highlight else max(col, 1)
        file_line = span.line + line - 1
        file_col = (span.column + start_col - 1) if line == 1 else start_col
        width = max(len(highlight), 1)
        where = Span(span.file, file_line, file_col, file_line, file_col + width)
    description = re.sub(r"<class '(?:[\w.]+\.)?(\w+)'>", r"\1", description)
    if description.startswith("Required keyword"):
        description = "an operand is missing"
    message = f"invalid SQL expression: {description}"
    if highlight:
        message += f" near '{highlight}'"
    reporter.error(Code.E0003, message, where, help=_sqlglot_help(description))


def first_line(text: str) -> str:
    """The first line of an error's text, for a one-line message."""
    return text.strip().splitlines()[0] if text.strip() else "parse error"


def _sqlglot_help(description: str) -> str | None:
    if "Expecting )" in description:
        return "a '(' is not closed"
    if "Required keyword" in description:
        return "an operator is missing an operand"
    return None
