"""Comparing a sink's rows with a test's: a multiset of canonical texts, and the
difference shown as tables."""

from __future__ import annotations

import datetime
import decimal
import json
from collections import Counter
from collections.abc import Mapping, Sequence

from flowc.fast_dataclass import dataclass
from flowc.usertest.model import ExpectedRows, Row, Value


def canonical(value: Value) -> str:
    """One text for values that mean the same: 2 and 2.0 and Decimal('2.00'), a timestamp
    with ' ' or 'T' and with or without zero seconds' fraction, lists and maps as JSON."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | decimal.Decimal):
        number = decimal.Decimal(str(value))
        return "0" if number == 0 else format(number.normalize(), "f")
    if isinstance(value, datetime.datetime):
        return value.replace(tzinfo=None).isoformat(sep=" ").removesuffix(".000000")
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, str) and len(value) > 10 and value[4:5] == "-" and value[7:8] == "-":
        try:  # a timestamp written as text: 'T' or ' ', with or without a fraction
            return canonical(datetime.datetime.fromisoformat(value))
        except ValueError:
            return value
    if isinstance(value, Mapping):
        return json.dumps({str(k): canonical(v) for k, v in value.items()}, sort_keys=True)
    if isinstance(value, list | tuple):
        return json.dumps([canonical(v) for v in value])
    return str(value)


def _canonical_row(row: Mapping[str, Value], columns: Sequence[str]) -> tuple[str, ...]:
    return tuple(canonical(row.get(c)) for c in columns)


@dataclass(frozen=True, slots=True)
class SinkResult:
    sink: str
    columns: tuple[str, ...]
    missing: tuple[tuple[str, ...], ...]
    unexpected: tuple[tuple[str, ...], ...]

    @property
    def passed(self) -> bool:
        return not self.missing and not self.unexpected


def compare(expected: ExpectedRows, got: Sequence[Row], all_columns: Sequence[str]) -> SinkResult:
    """Order-insensitive: the multiset of expected rows against what the sink holds. Only
    the columns the test names are compared; an updating sink holds the last row per key."""
    named = [c for c in all_columns if any(c in r for r in expected.rows)] or list(all_columns)
    held = list(got)
    if expected.key:
        last: dict[tuple[str, ...], Row] = {}
        for row in held:
            last[_canonical_row(row, expected.key)] = row
        held = list(last.values())
    want = Counter(_canonical_row(r, named) for r in expected.rows)
    have = Counter(_canonical_row(r, named) for r in held)
    return SinkResult(
        expected.sink,
        tuple(named),
        tuple(sorted((want - have).elements())),
        tuple(sorted((have - want).elements())),
    )


def table(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """Rows as an aligned text table."""
    widths = [max([len(c), *(len(r[i]) for r in rows)]) for i, c in enumerate(columns)]
    line = " | ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()
    out = [line, "-+-".join("-" * w for w in widths)]
    out += [" | ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return out


def diff_text(result: SinkResult) -> str:
    """What a failed sink shows: the rows missing and the rows not expected."""
    parts = [f"sink '{result.sink}':"]
    if result.missing:
        parts.append(f"  expected but not written ({len(result.missing)}):")
        parts += ["    " + line for line in table(result.columns, result.missing)]
    if result.unexpected:
        parts.append(f"  written but not expected ({len(result.unexpected)}):")
        parts += ["    " + line for line in table(result.columns, result.unexpected)]
    return "\n".join(parts)
