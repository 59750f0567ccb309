"""Flink 2.3's regular join over changes, record by record in plain Python (as its
StreamingJoinOperator emits, asked of Flink: tests/test_cdc_against_flink.py), and the
tables an upsert sink ends with: shared by the tests of flowc's ChangelogJoin.

An inner join passes each input row's kind to each joined row. An outer join's preserved
side emits a row without a match padded with NULLs; the first match of it retracts the
padded row (-D) before its joined row, and when its last match goes the padded row comes
back (+I). A row with a NULL join key matches nothing (a preserved side's is emitted
padded). A retraction of a row not held is ignored.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

Values = tuple[object, ...]
#: (side 0 or 1, kind +I/-U/+U/-D, the side's row)
Record = tuple[int, str, Values]
Change = tuple[str, Values]


def flink_join(
    records: Iterable[Record],
    keys: tuple[Sequence[int], Sequence[int]],
    widths: tuple[int, int],
    preserved: tuple[bool, bool],
) -> list[Change]:
    """The join's changelog (joined rows are side 0's columns then side 1's); ``keys``:
    each side's join columns (positions), ``widths`` each side's column count."""
    held: tuple[list[Values], list[Values]] = ([], [])
    out: list[Change] = []

    def key(side: int, row: Values) -> Values | None:
        found = tuple(row[i] for i in keys[side])
        return None if any(v is None for v in found) else found

    def joined(side: int, row: Values, other: Values) -> Values:
        return (*row, *other) if side == 0 else (*other, *row)

    def padded(side: int, row: Values) -> Values:
        nulls = (None,) * widths[1 - side]
        return (*row, *nulls) if side == 0 else (*nulls, *row)

    for side, kind, row in records:
        other = 1 - side
        adding = kind in ("+I", "+U")
        if not adding:
            if row not in held[side]:
                continue
            held[side].remove(row)
        found = key(side, row)
        matches = [m for m in held[other] if found is not None and key(other, m) == found]
        for match in matches:
            # the rows of this side the match meets besides ``row``
            company = sum(1 for r in held[side] if key(side, r) == found)
            if adding:
                if preserved[other] and company == 0:
                    out.append(("-D", padded(other, match)))
                out.append((kind, joined(side, row, match)))
            else:
                out.append((kind, joined(side, row, match)))
                if preserved[other] and company == 0:
                    out.append(("+I", padded(other, match)))
        if not matches and preserved[side]:
            out.append((kind, padded(side, row)))
        if adding:
            held[side].append(row)
    return out


def materialized(changes: Iterable[Change], at: Sequence[int]) -> dict[Values, Values]:
    """The table Flink's SinkUpsertMaterializer (ON CONFLICT DO DEDUPLICATE) ends with,
    keyed by the columns ``at``: each key's rows in arrival order, a retraction taking
    back its row, the latest one shown."""
    rows: dict[Values, list[Values]] = {}
    for kind, row in changes:
        key = tuple(row[i] for i in at)
        held = rows.setdefault(key, [])
        if kind in ("+I", "+U"):
            held.append(row)
        elif row in held:
            del held[len(held) - 1 - held[::-1].index(row)]
    return {key: held[-1] for key, held in rows.items() if held}


def upserted(changes: Iterable[Change], at: Sequence[int]) -> dict[Values, Values]:
    """The table an upsert sink keyed by ``at`` ends with, applying flowc's changelog as
    it does (+I/+U write the key's row, -D deletes it, -U is skipped)."""
    table: dict[Values, Values] = {}
    for kind, row in changes:
        key = tuple(row[i] for i in at)
        if kind in ("+I", "+U"):
            table[key] = row
        elif kind == "-D":
            table.pop(key, None)
    return table


def envelope_records(
    side: int, envelopes: Iterable[tuple[str, Values | None, Values | None]]
) -> list[Record]:
    """A debezium-json file's records as Flink reads them (c/r: +I; u: -U then +U; d: -D)."""
    out: list[Record] = []
    for op, before, after in envelopes:
        if op in ("c", "r"):
            assert after is not None
            out.append((side, "+I", after))
        elif op == "u":
            assert before is not None and after is not None
            out += [(side, "-U", before), (side, "+U", after)]
        else:
            assert before is not None
            out.append((side, "-D", before))
    return out


def group_aggregate(
    rows: Iterable[tuple[object, int]], held: dict[object, list[int]], side: int
) -> list[Record]:
    """Flink's GroupAggregate of SUM, COUNT(*) and MAX of a value per key over insert-only
    ``rows`` (key, value), record by record, as one side of a join: per row its key's +I
    (the first) or -U old then +U new, rows (key, sum, count, max). ``held``: each key's
    [sum, count, max], updated in place (so later calls continue it)."""
    out: list[Record] = []
    for key, value in rows:
        old = held.get(key)
        new = [value, 1, value] if old is None else [old[0] + value, old[1] + 1, max(old[2], value)]
        held[key] = new
        if old is not None:
            out.append((side, "-U", (key, *old)))
        out.append((side, "+I" if old is None else "+U", (key, *new)))
    return out
