"""Flink's meaning for functions and operators Spark has under the same name: each Flink
tree is rewritten, right after it is parsed, into the Spark SQL that computes what Flink
computes, or refused where flowc cannot (docs/language.md, "Functions whose meaning
differs"). Division of two exact integers, whose meaning depends on the operands' types,
is marked by the dialect's parser (``typed``) and written by the Spark generator.

Only trees read in the Flink dialect pass through here: Spark programs keep their text.
"""

from __future__ import annotations

import re

from sqlglot import exp, parse_one

from flowc.diagnostics import Reporter
from flowc.errorcodes import Code
from flowc.fast_dataclass import dataclass
from flowc.spans import Span, text_span
from flowc.sql import sql_parsing
from flowc.sql.flink_dialect import CURRENT_WATERMARK_HELP, CURRENT_WATERMARK_MESSAGE
from flowc.sql.spark_patterns import FUNCTION_META, PATTERN_META, pattern_uses


@dataclass(frozen=True, slots=True)
class _Refusal:
    """Why a Flink form cannot be written for Spark: the characters ``[start, end)`` of
    the expression's text at fault, the message and the hint."""

    code: Code
    message: str
    start: int
    end: int
    help: str


def watermark_calls(tree: exp.Expr) -> list[exp.Anonymous]:
    """The CURRENT_WATERMARK calls in ``tree``, in the order of the walk."""
    return [
        node
        for node in tree.walk()
        if isinstance(node, exp.Anonymous) and node.name.upper() == "CURRENT_WATERMARK"
    ]


def rewrite_flink(
    tree: exp.Expr, text: str, span: Span, reporter: Reporter, *, whole_query: bool = True
) -> exp.Expr | None:
    """``tree`` (parsed from ``text`` in the Flink dialect) computing Flink's values on
    Spark; None, with each refusal reported at its span, where it cannot. A pipe step's
    expression (not ``whole_query``) keeps its CURRENT_WATERMARK calls: the step's checker
    reads them, or refuses them (E0610)."""
    refusals: list[_Refusal] = []
    watermarks = watermark_calls(tree) if whole_query else []
    if watermarks:
        places = _calls(text, "CURRENT_WATERMARK", len(watermarks))
        for call, (start, end) in zip(_in_text_order(watermarks), places, strict=True):
            if _read_by_a_row_step(call):
                continue  # the WHERE's or SELECT's checker reads it (analyze/row_steps.py)
            refusals.append(
                _Refusal(
                    Code.E0610,
                    CURRENT_WATERMARK_MESSAGE,
                    start,
                    end,
                    CURRENT_WATERMARK_HELP,
                )
            )
    # Children before their parents (a parent is rewritten from its rewritten children).
    for node in reversed(list(tree.walk(bfs=True))):
        replacement: exp.Expr | None = None
        if isinstance(node, exp.RegexpExtract):
            replacement = _regexp_extract(node, text, refusals)
        elif isinstance(node, exp.SimilarTo):
            replacement = _similar_to(node, text, refusals)
        elif isinstance(node, exp.Anonymous) and node.name.upper() == "TO_TIMESTAMP":
            replacement = _to_timestamp(node, text, refusals)
        elif isinstance(node, exp.Anonymous) and node.name.upper() == "UNIX_TIMESTAMP":
            replacement = _unix_timestamp(node, text, refusals)
        elif isinstance(node, exp.Anonymous) and node.name.upper() == "SPLIT_INDEX":
            replacement = _split_index(node, text, refusals)
        elif isinstance(node, exp.Anonymous) and node.name.upper() == "CONVERT_TZ":
            replacement = _convert_tz(node, text, refusals)
        elif node.meta.get(FUNCTION_META) == "date_format":
            replacement = _week_date_format(node)
        if replacement is not None:
            if node is tree:
                tree = replacement
            else:
                node.replace(replacement)
    for use in pattern_uses(tree):
        if use.function == "date_format" and use.pattern is not None:
            found = date_format_difference(use.pattern)
            if found is not None:
                offset, length, reason = found
                start, end = _place(use.literal, text) if use.literal is not None else (0, 0)
                if text[start : start + 1] == "'" and text[start + 1 : end - 1] == use.pattern:
                    start, end = start + 1 + offset, start + 1 + offset + length
                refusals.append(
                    _Refusal(
                        Code.E0612,
                        f"DATE_FORMAT pattern '{use.pattern}': {reason}",
                        start,
                        end,
                        "write SSS for milliseconds; for a day's place in its month "
                        "compute it: (dayofmonth(ts) + 6) DIV 7",
                    )
                )
    for refusal in refusals:
        reporter.error(
            refusal.code,
            refusal.message,
            text_span(text, span, refusal.start, refusal.end),
            help=refusal.help,
        )
    return None if refusals else tree


def _regexp_extract(
    node: exp.RegexpExtract, text: str, refusals: list[_Refusal]
) -> exp.Expr | None:
    """Flink's ``REGEXP_EXTRACT(s, re[, group])``: group 0 (the whole match) by default,
    NULL where ``re`` does not match; Spark's default group is 1 and it gives ''.

    A group that may not take part in a match is NULL in Flink and '' in Spark, and a
    group past the regex's is NULL in Flink and an error in Spark: a group other than 0
    is written only when the regex is a literal in which it always takes part."""
    subject, pattern = node.this, node.expression
    group = node.args.get("group")  # the Flink dialect's parser fills in Flink's 0
    index = group.to_py() if isinstance(group, exp.Literal) and group.is_int else None
    if index != 0:
        regex = pattern.this if isinstance(pattern, exp.Literal) and pattern.is_string else None
        why = None if regex is None or index is None else group_problem(regex, int(index))
        if regex is None or index is None or why is not None:
            start, end = _place(group if regex is not None and group is not None else pattern, text)
            refusals.append(
                _Refusal(
                    Code.E0613,
                    "REGEXP_EXTRACT's group: "
                    + (why or "a group other than 0 needs a literal regex and group number"),
                    start,
                    end,
                    "Flink gives NULL where the group takes no part in the match, Spark '': "
                    "make the group always take part, e.g. (a?) for (a)?, or extract group 0",
                )
            )
            return None
    call = exp.RegexpExtract(
        this=subject.copy(),
        expression=pattern.copy(),
        group=group.copy() if group is not None else exp.Literal.number(0),
    )
    matches = exp.RegexpLike(this=subject.copy(), expression=pattern.copy())
    return exp.Case(ifs=[exp.If(this=matches, true=call)])


#: Flink's TO_TIMESTAMP format when none is given (Flink's documentation).
FLINK_TIMESTAMP_FORMAT = "yyyy-MM-dd HH:mm:ss"
#: The format letters flowc passes to Spark's parser: these runs mean the same fixed-width
#: fields in Java's DateTimeFormatter (Flink's) and in Spark's datetime patterns.
_TIMESTAMP_FIELDS = frozenset({"yyyy", "MM", "dd", "HH", "mm", "ss"})
_LETTER_RUN = re.compile(r"[A-Za-z]+")


def to_timestamp_format_problem(fmt: str) -> tuple[int, int, str] | None:
    """Where (offset, length) and why a TO_TIMESTAMP format is not one flowc reads as
    Flink does, or None: only the fields yyyy, MM, dd, HH, mm, ss and separators that are
    neither letters nor quotes."""
    if "'" in fmt:
        return fmt.index("'"), 1, "a quoted literal in the format is not read"
    for run in _LETTER_RUN.finditer(fmt):
        if run.group() not in _TIMESTAMP_FIELDS:
            return run.start(), len(run.group()), f"the field '{run.group()}' is not read"
    if not _LETTER_RUN.search(fmt):
        return 0, len(fmt), "the format has no fields"
    return None


def timestamp_shape(fmt: str) -> str:
    """A Java regular expression every string Flink could read with ``fmt`` matches,
    leniently (each field any digits, blanks around): its strict parse, java.time's
    SMART resolving (``02-30`` as the month's last day) or the fallback Flink takes
    (java.sql.Timestamp.valueOf / Date.valueOf: ``yyyy-[m]m-[d]d[ hh:mm:ss[.f]]``)."""
    parts = []
    index = 0
    for run in _LETTER_RUN.finditer(fmt):
        parts.append(re.escape(fmt[index : run.start()]))
        parts.append("[0-9]+")
        index = run.end()
    parts.append(re.escape(fmt[index:]))
    return r"(?s)^\s*(?:" + "".join(parts) + r"|[0-9]+-[0-9]+-[0-9]+(?:\s.*)?)\s*$"


def _to_timestamp(node: exp.Anonymous, text: str, refusals: list[_Refusal]) -> exp.Expr | None:
    """Flink's ``TO_TIMESTAMP(s[, fmt])``: ``s`` read with ``fmt`` (by default
    'yyyy-MM-dd HH:mm:ss'), NULL where it cannot be read; Spark's ``to_timestamp`` fails
    the job there (ANSI) and, without a format, reads far more forms (a cast).

    Written as Spark's strict ``try_to_timestamp(s, fmt)``, which agrees where it reads
    the string; where it does not, NULL when the string cannot have a Flink reading (not
    of the format's shape, nor a date: :func:`timestamp_shape`), else the job fails
    (raise_error) rather than write a NULL where Flink may give a timestamp."""
    args = node.expressions
    if len(args) not in (1, 2):
        start, end = _place(node, text)
        refusals.append(
            _Refusal(
                Code.E0614,
                f"TO_TIMESTAMP takes a string and a format, not {len(args)} arguments",
                start,
                end,
                "write TO_TIMESTAMP(s) or TO_TIMESTAMP(s, 'yyyy-MM-dd HH:mm:ss')",
            )
        )
        return None
    subject = args[0]
    fmt = FLINK_TIMESTAMP_FORMAT
    if len(args) == 2:
        literal = args[1]
        start, end = _place(literal, text)
        if not (isinstance(literal, exp.Literal) and literal.is_string):
            refusals.append(
                _Refusal(
                    Code.E0614,
                    "TO_TIMESTAMP's format must be a string literal to be read as Flink reads it",
                    start,
                    end,
                    "write the format as a string literal, e.g. 'yyyy-MM-dd HH:mm:ss'",
                )
            )
            return None
        fmt = literal.this
        problem = to_timestamp_format_problem(fmt)
        if problem is not None:
            offset, length, why = problem
            inside = text[start : start + 1] == "'" and text[start + 1 : end - 1] == fmt
            refusals.append(
                _Refusal(
                    Code.E0614,
                    f"TO_TIMESTAMP format '{fmt}': {why}",
                    start + 1 + offset if inside else start,
                    start + 1 + offset + length if inside else end,
                    "flowc reads the fields yyyy, MM, dd, HH, mm and ss between separators; "
                    "parse other forms with Spark's functions in the Spark dialect",
                )
            )
            return None
    parsed = exp.Anonymous(
        this="try_to_timestamp", expressions=[subject.copy(), exp.Literal.string(fmt)]
    )
    readable = exp.RegexpLike(
        this=subject.copy(), expression=exp.Literal.string(timestamp_shape(fmt))
    )
    fail = exp.Anonymous(
        this="raise_error",
        expressions=[
            exp.Literal.string(
                f"TO_TIMESTAMP: Flink may read this string with '{fmt}' leniently (a "
                "day past the month's end, single digits, a fraction, a date alone), "
                "Spark's strict parse does not; flowc stops rather than write NULL"
            )
        ],
    )
    return exp.Cast(  # typed for flowc (try_to_timestamp is TIMESTAMP in Spark too)
        this=exp.Case(
            ifs=[
                exp.If(
                    this=exp.Not(this=exp.Is(this=parsed, expression=exp.Null())),
                    true=parsed.copy(),
                ),
                exp.If(this=readable, true=fail),
            ]
        ),
        to=exp.DataType.build("TIMESTAMP"),
    )


def _unix_timestamp(node: exp.Anonymous, text: str, refusals: list[_Refusal]) -> exp.Expr | None:
    """Flink's ``UNIX_TIMESTAMP()`` is Spark's (the current time in seconds); of a string
    Flink parses with SimpleDateFormat, leniently (trailing text ignored, a day past the
    month's end carried over) in the session time zone, and gives Long.MIN_VALUE where it
    cannot, where Spark parses strictly and fails the job: refused."""
    if not node.expressions:
        return None
    start, _ = _place(node.expressions[0], text)
    _, end = _place(node.expressions[-1], text)
    name = [m.start() for m in re.finditer(r"UNIX_TIMESTAMP\s*\(", text[:start], re.IGNORECASE)]
    close = text.find(")", end)
    refusals.append(
        _Refusal(
            Code.E0615,
            "UNIX_TIMESTAMP of a string: Flink parses it leniently and gives "
            "-9223372036854775808 where it cannot; Spark parses strictly and fails the job",
            name[-1] if name else start,
            close + 1 if close >= 0 else end,
            "parse with TO_TIMESTAMP(s, 'yyyy-MM-dd HH:mm:ss') (NULL where the text does "
            "not parse, as in Flink) and keep the TIMESTAMP",
        )
    )
    return None


#: Flink's SPLIT_INDEX(s, sep, i) in Spark SQL: NULL for an empty string (Flink splits it
#: into no parts), a negative index or one past the parts (``sep`` occurs, without
#: overlapping, once less than there are parts); else Spark's ``split_part``, which splits
#: on ``sep`` as written (no regex) as Flink does (commons-lang's
#: splitByWholeSeparatorPreserveAllTokens), its parts counted from 1.
_SPLIT_INDEX = (
    "CASE WHEN flowc_s = '' OR flowc_i < 0 OR flowc_i >= (CHAR_LENGTH(flowc_s) - "
    "CHAR_LENGTH(REPLACE(flowc_s, flowc_sep, ''))) DIV CHAR_LENGTH(flowc_sep) + 1 "
    "THEN NULL ELSE SPLIT_PART(flowc_s, flowc_sep, flowc_i + 1) END"
)


def _split_index(node: exp.Anonymous, text: str, refusals: list[_Refusal]) -> exp.Expr | None:
    """Flink's ``SPLIT_INDEX(s, sep, i)``: the ``i``-th part (from 0) of ``s`` split on the
    string ``sep``; NULL past the parts, for a negative ``i`` and for an empty ``s``. An
    empty separator splits on whitespace in Flink: the separator must be a non-empty
    string literal (E0738)."""
    arguments = node.expressions
    separator = arguments[1] if len(arguments) == 3 else None
    if not (isinstance(separator, exp.Literal) and separator.is_string and separator.this != ""):
        start, end = _place(separator if separator is not None else node, text)
        refusals.append(
            _Refusal(
                Code.E0738,
                "SPLIT_INDEX(string, separator, index): the separator must be a non-empty "
                "string literal (Flink splits on whitespace for an empty one)",
                start,
                end,
                "write the separator as a string: SPLIT_INDEX(s, ',', 0)",
            )
        )
        return None
    template = sql_parsing.parse_sql_uncached(_SPLIT_INDEX, "spark")
    places = {"flowc_s": arguments[0], "flowc_sep": separator, "flowc_i": arguments[2]}
    for column in list(template.find_all(exp.Column)):
        column.replace(places[column.name].copy())
    return template


#: Flink's CONVERT_TZ (DateTimeUtils.convertTz) on Spark, ``__s``, ``__from``, ``__to`` its
#: arguments. Flink parses ``s`` with a lenient SimpleDateFormat 'yyyy-MM-dd HH:mm:ss' in
#: java.util.TimeZone.getTimeZone(from) (an unknown zone is GMT), formats the instant in
#: ``to``, and gives NULL where the parse fails. Here, with TIMESTAMP_NTZ throughout (no
#: step through the session time zone, whose DST gaps would shift a wall time): the zones
#: are the ids that same
#: getTimeZone gives (``reflect``, so an unknown zone is GMT as in Flink), which Spark's
#: java.time reads with the same rules; the text is read strictly where it is
#: 'yyyy-MM-dd HH:mm:ss' (the rest, a fraction, ignored as Flink does) in the years
#: 1900-9998; in a fall-back overlap Flink's calendar takes the offset after the
#: transition, where convert_timezone takes the earlier one, so the later reading is
#: taken where there is one (no zone has two transitions within a day since 1900). The two
#: Java libraries agree on every zone's offsets from 1900 to 9998 but for five zones past
#: 2036 (java.util.TimeZone keeps no transitions past 2037: it repeats the last rule), a
#: scan of Java 17's 631 zone ids (tzdb 2025a) found: there the job fails. Text
#: with no Flink reading (not the digits - digits - digits : digits : digits the pattern
#: needs) is NULL; other text, which Flink may read leniently, fails the job.
_CONVERT_TZ = r"""
CASE
  WHEN __s IS NULL OR __from IS NULL OR __to IS NULL THEN NULL
  WHEN NOT __s RLIKE __some_reading THEN NULL
  WHEN NOT (__s RLIKE '^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(?![0-9])'
            AND COALESCE(__w BETWEEN TIMESTAMP_NTZ '1900-01-01 00:00:00'
                                 AND TIMESTAMP_NTZ '9998-12-31 23:59:59', FALSE))
    THEN RAISE_ERROR(__lenient)
  WHEN __zf RLIKE '^GMT[+-](18:0[1-9]|18:[1-5][0-9]|19|2[0-3])'
    OR __zt RLIKE '^GMT[+-](18:0[1-9]|18:[1-5][0-9]|19|2[0-3])'
    THEN RAISE_ERROR(__far_offset)
  WHEN (__zf IN ('Africa/Casablanca', 'Africa/El_Aaiun', 'Africa/Windhoek', 'Asia/Gaza',
                 'Asia/Hebron')
        OR __zt IN ('Africa/Casablanca', 'Africa/El_Aaiun', 'Africa/Windhoek', 'Asia/Gaza',
                    'Asia/Hebron'))
       AND __w >= TIMESTAMP_NTZ '2036-12-30 00:00:00'
    THEN RAISE_ERROR(__far_apart)
  ELSE CAST(CONVERT_TIMEZONE('UTC', __zt,
    CASE WHEN CONVERT_TIMEZONE('UTC', __zf, __late) = __w
      THEN __late ELSE __early END) AS STRING)
END
"""
#: The parts of :data:`_CONVERT_TZ`: the wall time read, its readings, the zones' ids.
_CONVERT_TZ_PARTS = {
    "__late": "__w - (CONVERT_TIMEZONE('UTC', __zf, __early + INTERVAL 1 DAY)"
    " - (__early + INTERVAL 1 DAY))",
    "__early": "CONVERT_TIMEZONE(__zf, 'UTC', __w)",
    "__w": "TRY_CAST(SUBSTRING(__s, 1, 19) AS TIMESTAMP_NTZ)",
    # ZoneInfo's text: sun.util.calendar.ZoneInfo[id="America/Los_Angeles",offset=...
    "__zf": "SPLIT_PART(REFLECT('java.util.TimeZone', 'getTimeZone', __from), '\"', 2)",
    "__zt": "SPLIT_PART(REFLECT('java.util.TimeZone', 'getTimeZone', __to), '\"', 2)",
}


#: The string literals of :data:`_CONVERT_TZ`.
_CONVERT_TZ_TEXTS = {
    # the characters a SimpleDateFormat parse of 'yyyy-MM-dd HH:mm:ss' needs, in order
    "__some_reading": r"(?s)[\p{Nd}].*-.*[\p{Nd}].*-.*[\p{Nd}].*:.*[\p{Nd}].*:.*[\p{Nd}]",
    "__lenient": "CONVERT_TZ: Flink may read this text leniently (single digits, a day or "
    "hour past its range, other spacing, a year before 1900 or after 9998); flowc reads "
    "yyyy-MM-dd HH:mm:ss and stops rather than guess",
    "__far_offset": "CONVERT_TZ: a GMT offset past 18 hours, which Flink reads and Spark cannot",
    "__far_apart": "CONVERT_TZ: past 2036 java.util.TimeZone (Flink) and java.time (Spark) "
    "give this zone other offsets",
}


def convert_tz_sql() -> exp.Expr:
    """:data:`_CONVERT_TZ` with its parts written in, over the columns ``__s``,
    ``__from``, ``__to``."""
    tree = parse_one(_CONVERT_TZ, read="spark")
    for name, value in _CONVERT_TZ_TEXTS.items():

        def text(node: exp.Expr, name: str = name, value: str = value) -> exp.Expr:
            if isinstance(node, exp.Column) and not node.table and node.name == name:
                return exp.Literal.string(value)
            return node

        tree = tree.transform(text)
    for name, part in _CONVERT_TZ_PARTS.items():
        template = parse_one(part, read="spark")

        def fill(node: exp.Expr, name: str = name, template: exp.Expr = template) -> exp.Expr:
            if isinstance(node, exp.Column) and not node.table and node.name == name:
                return template.copy()
            return node

        tree = tree.transform(fill)
    return tree


def _convert_tz(node: exp.Anonymous, text: str, refusals: list[_Refusal]) -> exp.Expr | None:
    """Flink's ``CONVERT_TZ(s, from, to)``: :data:`_CONVERT_TZ`. Three arguments, else
    E0616; a zone written as a literal is checked here (a GMT offset past 18 hours)."""
    args = node.expressions
    if len(args) != 3:
        start, end = _place(node, text)
        refusals.append(
            _Refusal(
                Code.E0616,
                f"CONVERT_TZ takes a string and two time zones, not {len(args)} arguments",
                start,
                end,
                "write CONVERT_TZ(s, 'America/Los_Angeles', 'UTC'), s as 'yyyy-MM-dd HH:mm:ss'",
            )
        )
        return None
    for zone in args[1:]:
        if isinstance(zone, exp.Literal) and zone.is_string and _FAR_OFFSET.match(zone.this):
            start, end = _place(zone, text)
            refusals.append(
                _Refusal(
                    Code.E0616,
                    f"CONVERT_TZ zone '{zone.this}': Flink reads a GMT offset up to 23 hours, "
                    "Spark up to 18",
                    start,
                    end,
                    "write a zone of at most 18 hours, e.g. 'GMT+14:00' or a region such as "
                    "'Pacific/Kiritimati'",
                )
            )
            return None
    names: dict[str, exp.Expr] = {"__s": args[0], "__from": args[1], "__to": args[2]}

    def place(part: exp.Expr) -> exp.Expr:
        if isinstance(part, exp.Column) and not part.table and part.name in names:
            return names[part.name].copy()
        return part

    # typed for flowc (Spark types the CASE as STRING too)
    return exp.Cast(this=convert_tz_sql().transform(place), to=exp.DataType.build("STRING"))


#: A GMT offset java.util.TimeZone reads and java.time's ZoneOffset (past 18:00) does not.
_FAR_OFFSET = re.compile(r"GMT[+-](?:18:?(?:0[1-9]|[1-5][0-9])|19|2[0-3])")


#: A run of one letter, a quoted text ('' is a quote) or other characters of a pattern.
_PATTERN_PART = re.compile(r"([A-Za-z])\1*|'(?:[^']|'')*'?|[^A-Za-z']+")
#: Flink's week fields (java.time's, in the JVM's default locale, English: weeks start
#: on Sunday, the week holding January 1 is week 1) as Spark SQL over ``__t``: the week's
#: Saturday is in its week-based year, and the week number is that Saturday's week.
_WEEK_SATURDAY = "DATE_ADD(CAST(__t AS DATE), 7 - DAYOFWEEK(__t))"
_WEEK_FIELDS = {
    "Y": f"CAST(YEAR({_WEEK_SATURDAY}) AS STRING)",
    "YY": f"LPAD(CAST(MOD(YEAR({_WEEK_SATURDAY}), 100) AS STRING), 2, '0')",
    "w": f"CAST((DAYOFYEAR({_WEEK_SATURDAY}) + 6) DIV 7 AS STRING)",
    "ww": f"LPAD(CAST((DAYOFYEAR({_WEEK_SATURDAY}) + 6) DIV 7 AS STRING), 2, '0')",
    "W": "CAST((DAYOFMONTH(__t) + DAYOFWEEK(TRUNC(CAST(__t AS DATE), 'MM')) - 2) DIV 7 + 1 "
    "AS STRING)",
}


def _week_date_format(node: exp.Expr) -> exp.Expr | None:
    """Flink's ``DATE_FORMAT(ts, p)`` with the week-based fields ``Y``..``YYYY``, ``w``,
    ``ww``, ``W`` (which Spark 3+ refuses) as a CONCAT of the fields computed
    (:data:`_WEEK_FIELDS`) and Spark's DATE_FORMAT of the other letters; None (Spark's
    checks apply) when the pattern has none of them, or a count Flink refuses."""
    pattern = str(node.meta[PATTERN_META])
    parts = [m.group() for m in _PATTERN_PART.finditer(pattern)]
    if "".join(parts) != pattern or not any(p[0] in "Yw" or p == "W" for p in parts):
        return None
    subject = node.this.this if isinstance(node.this, exp.TimeStrToTime) else node.this
    pieces: list[exp.Expr] = []
    for part in parts:
        if part[0] == "Y" or part[0] == "w" or part[0] == "W":
            key = part if part in _WEEK_FIELDS else "Y" if part[0] == "Y" and part != "YY" else None
            if key is None:
                return None
            field = parse_one(_WEEK_FIELDS[key], read="spark")
            if key == "Y" and len(part) > 1:  # at least as many digits as letters
                field = parse_one(
                    f"LPAD(__y, GREATEST({len(part)}, LENGTH(__y)), '0')", read="spark"
                ).transform(lambda n, f=field: f.copy() if _named(n, "__y") else n)
            pieces.append(field.transform(lambda n: subject.copy() if _named(n, "__t") else n))
        elif part[0] == "'":
            pieces.append(
                exp.Literal.string(part[1:-1].replace("''", "'") if len(part) > 1 else "")
            )
        elif part[0].isalpha():
            call = exp.Anonymous(
                this="date_format", expressions=[subject.copy(), exp.Literal.string(part)]
            )
            pieces.append(call)
        else:
            pieces.append(exp.Literal.string(part))
    return pieces[0] if len(pieces) == 1 else exp.Concat(expressions=pieces)


def _named(node: exp.Expr, name: str) -> bool:
    return isinstance(node, exp.Column) and not node.table and node.name == name


def group_problem(regex: str, index: int) -> str | None:
    """Why capturing group ``index`` of the Java ``regex`` may not take part in a match
    (inside an alternative, a group that may repeat zero times or a lookaround), or is
    not there; None when it always takes part. Conservative: a form it does not read
    (``\\Q``, a class holding ``[`` or a backslash) is a problem."""
    unread = "the regex has a form flowc does not read"
    parents: dict[int, int] = {0: 0}  # every group (0: the whole regex) to its parent
    optional: set[int] = set()  # may take no part: repeated zero times, or a lookaround
    alternated: set[int] = set()  # holding a | of its own
    capturing: list[int] = []
    stack = [0]
    position = 0
    while position < len(regex):
        char = regex[position]
        if char == "\\":
            if regex[position + 1 : position + 2] in ("Q", ""):
                return unread
            position += 2
            continue
        if char == "[":
            first = position + 1 + (regex[position + 1 : position + 2] == "^")
            close = regex.find("]", first + 1)
            if close < 0 or "[" in regex[position + 1 : close] or "\\" in regex[position:close]:
                return unread
            position = close + 1
            continue
        if char == "(":
            number = len(parents)
            parents[number] = stack[-1]
            stack.append(number)
            if regex.startswith(("(?=", "(?!", "(?<=", "(?<!"), position):
                optional.add(number)
            elif not regex.startswith("(?", position) or regex.startswith("(?<", position):
                capturing.append(number)
        elif char == ")":
            if len(stack) == 1:
                return unread
            number = stack.pop()
            after = regex[position + 1 : position + 3]
            if after[:1] in ("?", "*") or after in ("{0", "{,"):
                optional.add(number)
        elif char == "|":
            alternated.add(stack[-1])
        position += 1
    if len(stack) != 1:
        return unread
    if not 0 < index <= len(capturing):
        return f"the regex has {len(capturing)} groups, not group {index}"
    target = chain = capturing[index - 1]
    while True:
        if chain in optional or (chain != target and chain in alternated):
            return f"group {index} may take no part in a match"
        if chain == 0:
            return None
        chain = parents[chain]


#: SIMILAR TO's operators, passed to the Java regular expression as they are.
_SIMILAR_OPERATORS = frozenset("|*+?(),")
#: A repetition ``{m}``, ``{m,}`` or ``{m,n}``.
_BOUND = re.compile(r"\{[0-9]+(,[0-9]*)?\}")


def _similar_to(node: exp.SimilarTo, text: str, refusals: list[_Refusal]) -> exp.Expr | None:
    """``s SIMILAR TO p`` as Spark's ``s RLIKE r``: ``r`` matches the whole string
    (anchored, ``%`` and ``_`` matching line ends too), every other character literal."""
    pattern = node.expression
    start, end = _place(pattern, text)
    if node.args.get("escape") is not None:
        refusals.append(
            _Refusal(
                Code.E0611,
                "SIMILAR TO with ESCAPE is not translated for Spark",
                start,
                end,
                "write RLIKE with a Java regular expression",
            )
        )
        return None
    if not (isinstance(pattern, exp.Literal) and pattern.is_string):
        refusals.append(
            _Refusal(
                Code.E0611,
                "the pattern of SIMILAR TO must be a string literal to be translated for "
                "Spark's RLIKE",
                start,
                end,
                "write the pattern as a string literal",
            )
        )
        return None
    translated = similar_to_regex(pattern.this)
    if isinstance(translated, tuple):
        offset, reason = translated
        inside = start + 1 + offset if text[start : start + 1] == "'" else start
        refusals.append(
            _Refusal(
                Code.E0611,
                f"SIMILAR TO pattern '{pattern.this}': {reason}",
                inside,
                inside + 1 if inside != start else end,
                "write RLIKE with a Java regular expression: x RLIKE '^(?s)(a|b).*\\z'",
            )
        )
        return None
    return exp.RegexpLike(this=node.this.copy(), expression=exp.Literal.string(translated))


def similar_to_regex(pattern: str) -> str | tuple[int, str]:
    """The Java regular expression matching what ``pattern`` matches under SIMILAR TO,
    or where (an offset in ``pattern``) and why it is not translated."""
    out = ["(?s)^(?:"]
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "%":
            out.append(".*")
        elif char == "_":
            out.append(".")
        elif char == "\\":
            return index, "a backslash (SIMILAR TO's escape) is not translated"
        elif char == "[":
            close = pattern.find("]", index + 2)
            if close < 0:
                return index, "'[' is not closed"
            body = pattern[index + 1 : close]
            if body.startswith(":") or any(c in "[\\%_&" for c in body):
                return index, "this bracket expression is not translated"
            negated = body.startswith("^")
            members = body[1:] if negated else body
            escaped = "".join(
                c if c.isalnum() or (c == "-" and 0 < i < len(members) - 1) else "\\" + c
                for i, c in enumerate(members)
            )
            out.append("[" + ("^" if negated else "") + escaped + "]")
            index = close
        elif char == "{":
            bound = _BOUND.match(pattern, index)
            if bound is None or index == 0 or pattern[index - 1] in "|(":
                return index, "'{' is not a repetition {m}, {m,} or {m,n} after an item"
            out.append(bound.group())
            index = bound.end() - 1
        elif char == "}":
            return index, "'}' closes no repetition"
        elif char in ".^$":
            # The SQL standard reads these as themselves, Calcite's translation for Flink
            # may hand them to Java's regex as they are: only the bracketed form is sure.
            return index, f"'{char}' outside brackets is not translated; write [{char}]"
        elif char in _SIMILAR_OPERATORS or char.isalnum() or char == " ":
            out.append(char)
        else:
            out.append("\\" + char)
        index += 1
    out.append(")\\z")
    regex = "".join(out)
    try:
        re.compile(regex.replace("\\z", "\\Z"))
    except re.error:
        return 0, "the pattern is not a well-formed SIMILAR TO pattern"
    return regex


def date_format_difference(pattern: str) -> tuple[int, int, str] | None:
    """The first letters of a DATE_FORMAT pattern whose meaning under Flink's
    SimpleDateFormat patterns is not Spark's (offset, length, why), or None. ``S`` is
    milliseconds there, a fraction of a second in Spark: they agree written ``SSS`` only;
    ``F`` is the week of the month's day there. Quoted text is text in both."""
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "'":
            close = pattern.find("'", index + 1)
            index = len(pattern) if close < 0 else close + 1
            continue
        run = index
        while run < len(pattern) and pattern[run] == char:
            run += 1
        if char == "S" and run - index != 3:
            return index, run - index, "S is milliseconds in Flink, a fraction of a second in Spark"
        if char == "F":
            return (
                index,
                run - index,
                "F (SimpleDateFormat's day of week in month) is not translated",
            )
        index = run
    return None


def _place(node: exp.Expr, text: str) -> tuple[int, int]:
    """The characters of ``text`` ``node`` stands on (a literal's own positions, else
    its identifiers'), or the whole text."""
    starts: list[int] = []
    ends: list[int] = []
    for part in node.walk():
        meta = part._meta
        if meta and "start" in meta and "end" in meta:
            starts.append(int(meta["start"]))
            ends.append(int(meta["end"]) + 1)
    if not starts:
        return 0, len(text)
    return min(starts), max(ends)


def _read_by_a_row_step(call: exp.Expr) -> bool:
    """Whether a call stands in a WHERE condition or a SELECT item (outside any aggregate
    or OVER), which flowc lowers to a WHERE or SELECT step of its own."""
    child: exp.Expr = call
    parent = call.parent
    while parent is not None:
        if isinstance(parent, exp.AggFunc | exp.Window):
            return False
        if isinstance(parent, exp.Where):
            return True
        if isinstance(parent, exp.Select):
            return child.arg_key == "expressions"
        child, parent = parent, parent.parent
    return False


def _in_text_order(nodes: list[exp.Anonymous]) -> list[exp.Anonymous]:
    """``nodes`` in the order they are written (by the parser's positions, where known)."""
    return sorted(nodes, key=lambda node: (node._meta or {}).get("start", 0))


def _calls(text: str, word: str, count: int) -> list[tuple[int, int]]:
    """Where the ``count`` calls of ``word`` stand in ``text``, in text order (the whole
    text when the calls written there are not as many: a name in a string)."""
    found = [m.span(1) for m in re.finditer(rf"\b({re.escape(word)})\s*\(", text, re.IGNORECASE)]
    return found if len(found) == count else [(0, len(text))] * count
