"""Flink 2.3's Top-N over insert-only rows (its Rank with AppendFastStrategy, ROW_NUMBER),
record by record in plain Python, as one side of a join (tests/helpers/cdc_join_flink.py):
shared by the tests of a JOIN consuming a TOP's updates, which hold it to Flink's
collected changelog (tests/test_top_join.py).

Per partition Flink keeps the first ``n`` rows in the order (a new row after the rows
it ties with). With the rank number, a row entering at rank r emits, for each rank from
r to the last held, -U the old row there and +U the new one (+I for a rank not held
before). Without it, a row entering a full top emits -D the row it pushes out, then +I
itself (TOP 1: -U and +U, the partition's one row changing); a row that does not enter
emits nothing (asked of Flink 2.3: the collected changelog of each form).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from tests.helpers.cdc_join_flink import Record, Values


def flink_rank(
    rows: Iterable[Values],
    partition: Callable[[Values], object],
    order: Callable[[Values], object],
    n: int,
    ranked: bool,
    held: dict[object, list[Values]],
    side: int,
) -> list[Record]:
    """The Rank's changelog over ``rows`` as records of join side ``side``: its rows the
    input rows, then the rank where ``ranked``. ``order`` is a sort key, lowest first
    (negate for DESC). ``held``: each partition's current top, updated in place (so later
    calls continue it)."""
    out: list[Record] = []
    for row in rows:
        top = held.setdefault(partition(row), [])
        at = sum(1 for r in top if order(r) <= order(row))  # after the rows it ties with
        if at >= n:
            continue
        old = list(top)
        top.insert(at, row)
        pushed = top.pop() if len(top) > n else None
        if not ranked:
            if pushed is None:
                out.append((side, "+I", row))
            elif n == 1:  # the partition's one row changes
                out += [(side, "-U", pushed), (side, "+U", row)]
            else:
                out += [(side, "-D", pushed), (side, "+I", row)]
            continue
        for rank in range(at, len(top)):
            if rank < len(old):
                out.append((side, "-U", (*old[rank], rank + 1)))
                out.append((side, "+U", (*top[rank], rank + 1)))
            else:
                out.append((side, "+I", (*top[rank], rank + 1)))
    return out
