"""Whether Spark's ANSI ``CAST(string AS type)`` succeeds: ports of Spark's string parsers.

The E0231 check (:mod:`flowc.sql.spark_literals`) refuses a string literal Spark would fail to
cast; ``tests/test_spark_functions.py`` checks these rules against the installed Spark.
"""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation

#: Spark's integral and floating-point types (DECIMAL(p, s) apart).
INTEGRAL_TYPES = frozenset({"TINYINT", "SMALLINT", "INT", "BIGINT"})
FRACTIONAL_TYPES = frozenset({"FLOAT", "DOUBLE"})


def spark_can_cast(value: str, target: str) -> bool:
    """Whether Spark's ANSI ``CAST(value AS target)`` succeeds for a string ``value``.

    Ports of Spark's parsers (UTF8String.toLongExact, Java's Double.parseDouble and Spark's
    special values, Decimal.fromStringANSI, SparkDateTimeUtils.stringToDate and
    parseTimestampString, StringUtils.isTrueString). A type not handled here is assumed to
    cast: the check never refuses what Spark might accept.
    """
    if target in INTEGRAL_TYPES:
        return _integral(value, target)
    if target in FRACTIONAL_TYPES:
        return _fractional(value)
    if target.startswith("DECIMAL"):
        return _decimal(value, target)
    if target == "DATE":
        return _special_datetime(value) or _date(value)
    if target in ("TIMESTAMP", "TIMESTAMP_NTZ"):
        return _special_datetime(value) or _timestamp(value, ntz=target == "TIMESTAMP_NTZ")
    if target == "BOOLEAN":
        return _trim_all(value).lower() in _BOOLEANS
    return True


_BOOLEANS = frozenset({"t", "true", "y", "yes", "1", "f", "false", "n", "no", "0"})
_INTEGRAL_RANGE = {
    "TINYINT": 2**7,
    "SMALLINT": 2**15,
    "INT": 2**31,
    "BIGINT": 2**63,
}


def _is_blank(char: str) -> bool:
    """What Spark trims byte by byte (Java's isWhitespace or isISOControl of a byte): ASCII
    controls and the space. A byte of a multi-byte character is negative, so never trimmed."""
    code = ord(char)
    return code <= 0x20 or code == 0x7F


def _trim_all(value: str) -> str:
    start, end = 0, len(value)
    while start < end and _is_blank(value[start]):
        start += 1
    while end > start and _is_blank(value[end - 1]):
        end -= 1
    return value[start:end]


def _java_trim(value: str) -> str:
    """Java's String.trim: characters up to U+0020 at both ends."""
    return value.strip("".join(chr(c) for c in range(0x21)))


def _integral(value: str, target: str) -> bool:
    """UTF8String.toLongExact / toIntExact / ...: sign and digits, no fraction, in range."""
    text = _trim_all(value)
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        return False
    if len(text.lstrip("+-").lstrip("0")) > 19:  # beyond BIGINT (and Python's int() limit)
        return False
    limit = _INTEGRAL_RANGE[target]
    return -limit <= int(text) < limit


_DIGITS = r"[0-9]+"
_EXPONENT = rf"[eE][+-]?{_DIGITS}"
_HEX = r"[0-9a-fA-F]+"
_JAVA_DOUBLE = re.compile(
    rf"[+-]?(NaN|Infinity|((({_DIGITS}(\.)?({_DIGITS})?({_EXPONENT})?)|"
    rf"(\.{_DIGITS}({_EXPONENT})?)|"
    rf"((0[xX]{_HEX}(\.)?)|(0[xX]({_HEX})?\.{_HEX}))[pP][+-]?{_DIGITS})[fFdD]?))"
)
#: Cast.processFloatingPointSpecialLiterals (lower case, after Java's trim).
_SPECIAL_DOUBLES = frozenset({"inf", "+inf", "infinity", "+infinity", "-inf", "-infinity", "nan"})


def _fractional(value: str) -> bool:
    """Java's Double.parseDouble, then Spark's special literals (``inf``, ``nan``, ...)."""
    text = _java_trim(value)
    return bool(_JAVA_DOUBLE.fullmatch(text)) or text.lower() in _SPECIAL_DOUBLES


#: java.math.BigDecimal(String): its digits are any Unicode decimal digits (``\d``), as
#: Character.digit reads them; the exponent's too.
_JAVA_BIG_DECIMAL = re.compile(r"[+-]?((\d+(\.(\d+)?)?)|(\.\d+))([eE][+-]?\d+)?")


def _decimal(value: str, target: str) -> bool:
    """Decimal.fromStringANSI, then the cast to DECIMAL(p, s): rounding half up, in range."""
    text = _java_trim(value)
    if not _JAVA_BIG_DECIMAL.fullmatch(text):
        return False
    match = re.fullmatch(r"DECIMAL(?:\((\d+),\s*(\d+)\))?", target)
    if match is None:
        return True
    precision = int(match.group(1) or 10)
    scale = int(match.group(2) or 0)
    context = Context(prec=100)
    try:
        number = Decimal(text)
        if number.adjusted() >= 38:  # more integral digits than any Spark DECIMAL holds
            return False
        rounded = number.quantize(Decimal(1).scaleb(-scale), ROUND_HALF_UP, context)
    except (InvalidOperation, ValueError):
        return False
    return rounded.is_zero() or rounded.adjusted() < precision - scale


_SPECIAL_DATETIMES = frozenset({"epoch", "now", "today", "yesterday", "tomorrow"})


def _special_datetime(value: str) -> bool:
    """Spark's special date and timestamp values (SparkDateTimeUtils.extractSpecialValue):
    a word, then optionally a time zone, which ``now`` may not have.

    (A zone that does not exist fails in Spark; it is accepted here.)
    """
    match = re.fullmatch(r"([A-Za-z]+)[ \t]*(.*)", _java_trim(value), re.DOTALL)
    if match is None or len(match.group(0)) < 3:
        return False
    word, zone = match.group(1).lower(), match.group(2)
    return word in _SPECIAL_DATETIMES and not (zone and word == "now")


def _date(value: str) -> bool:
    """SparkDateTimeUtils.stringToDate."""
    text = _trim_all(value)
    if not text:
        return False
    sign = 1
    j = 0
    if text[0] in "+-":
        sign = -1 if text[0] == "-" else 1
        j = 1
    segments = [1, 1, 1]
    i = 0
    current = 0
    digits = 0

    def valid(segment: int, count: int) -> bool:
        return (segment == 0 and 4 <= count <= 7) or (segment != 0 and 0 < count <= 2)

    while j < len(text) and i < 3 and text[j] not in " T":
        char = text[j]
        if i < 2 and char == "-":
            if not valid(i, digits):
                return False
            segments[i] = current
            current = digits = 0
            i += 1
        elif "0" <= char <= "9":
            current = current * 10 + int(char)
            digits += 1
        else:
            return False
        j += 1
    if not valid(i, digits):
        return False
    if i < 2 and j < len(text):
        return False
    segments[i] = current
    return _valid_date(sign * segments[0], segments[1], segments[2])


def _valid_date(year: int, month: int, day: int) -> bool:
    """java.time.LocalDate.of: years -999999999..999999999, proleptic Gregorian."""
    if not -999_999_999 <= year <= 999_999_999 or not 1 <= month <= 12 or day < 1:
        return False
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    days = [31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][month - 1]
    return day <= days


def _timestamp(value: str, ntz: bool) -> bool:
    """SparkDateTimeUtils.parseTimestampString, and the date and time it builds.

    The zone part (after the seconds) is accepted whatever it is: Spark resolves it with
    Java's ZoneId, which this check does not repeat.
    """
    text = _trim_all(value)
    if not text:
        return False
    leading = value.index(text[0])  # Spark's index j counts from the untrimmed start
    segments = [1, 1, 1, 0, 0, 0, 0, 0, 0]
    i = 0
    current = 0
    digits = 0
    j = 0
    just_time = False
    year_sign: int | None = None

    def valid(segment: int, count: int) -> bool:
        return (
            segment == 6
            or (segment == 0 and 4 <= count <= 6)
            or (segment == 7 and count <= 2)
            or (segment not in (0, 6, 7) and 0 < count <= 2)
        )

    if text[0] in "+-":
        year_sign = -1 if text[0] == "-" else 1
        j = 1
    while j < len(text):
        char = text[j]
        if not "0" <= char <= "9":
            if j + leading == 0 and char == "T":
                just_time = True
                i += 3
            elif i < 2:
                if char == "-":
                    if not valid(i, digits):
                        return False
                    segments[i] = current
                    current = digits = 0
                    i += 1
                elif i == 0 and char == ":" and year_sign is None:
                    just_time = True
                    if not valid(3, digits):
                        return False
                    segments[3] = current
                    current = digits = 0
                    i = 4
                else:
                    return False
            elif i == 2:
                if char not in " T" or not valid(i, digits):
                    return False
                segments[i] = current
                current = digits = 0
                i += 1
            elif i in (3, 4):
                if char != ":" or not valid(i, digits):
                    return False
                segments[i] = current
                current = digits = 0
                i += 1
            elif i in (5, 6):
                if not valid(i, digits):
                    return False
                segments[i] = current
                current = digits = 0
                i += 1
                if not (char == "." and i == 6):
                    j = len(text) - 1  # the rest is a zone id: accepted, see above
                if i == 6 and char != ".":
                    i += 1
            else:
                if i < len(segments) and char in ": ":
                    if not valid(i, digits):
                        return False
                    segments[i] = current
                    current = digits = 0
                    i += 1
                else:
                    return False
        else:
            if i != 6 or digits < 6:
                current = current * 10 + int(char)
            digits += 1
        j += 1
    if i >= len(segments) or not valid(i, digits):
        return False
    segments[i] = current
    if ntz and just_time:
        return False
    hour, minute, second = segments[3], segments[4], segments[5]
    if not (0 <= hour <= 23 and 0 <= minute <= 59 and 0 <= second <= 59):
        return False
    return just_time or _valid_date(segments[0] * (year_sign or 1), segments[1], segments[2])
