"""MATCH_RECOGNIZE's Spark processor, written as code that ruff and mypy check and copied
as text into the generated program (as :mod:`flowc.spark.generated_runtime`'s functions
are): the DEFINE conditions' three-valued operators, the measures, and the
``transformWithState`` processor around :func:`~flowc.spark.match_runtime.match_feed`
(docs/language.md#match_recognize).

The processor keeps, per PARTITION BY key, the rows the watermark has not reached yet
(list ``waiting``, typed as the input) and the state machine's state (value ``match``,
plain JSON: its partial and waiting matches and the rows they hold, each row its columns'
internal values: timestamps as epoch microseconds, dates as days). A row at or behind the
current watermark when it comes is late and dropped (Flink's CepOperator drops it); an
event-time timer feeds the rows the watermark has passed to the state machine in time
order (ties in arrival order), and each match completed is emitted as one row.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from flowc.spark.match_runtime import (
    MatchContext,
    _holds,
    _pairs,
    _queue_add,
    _queue_poll,
    _queue_prune,
    _queue_sift_down,
    _rank,
    _reaches_final,
    _spans,
    _taking,
    match_feed,
    match_first,
    match_last,
    match_new_state,
    match_rows,
)

if TYPE_CHECKING:
    from collections.abc import Iterator

    from pyspark.sql import DataFrame, Row
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.stateful_processor import (
        StatefulProcessor,
        StatefulProcessorHandle,
        TimerValues,
    )
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    from flowc.spark.generated_runtime import quoted
    from flowc.spark.match_runtime import MatchState, Nfa
else:
    #: The program imports pyspark's; flowc never does (the class is copied as text).
    StatefulProcessor = object

# fmt: off

def match_compare(op: str, left: Any, right: Any) -> bool | None:
    """A comparison, NULL if either side is."""
    if left is None or right is None:
        return None
    if op == '=':
        return bool(left == right)
    if op == '<>':
        return bool(left != right)
    if op == '<':
        return bool(left < right)
    if op == '<=':
        return bool(left <= right)
    if op == '>':
        return bool(left > right)
    return bool(left >= right)


def match_double(value: Any) -> float | None:
    """An integer compared with a DOUBLE, as Java compares them: as doubles."""
    return None if value is None else float(value)


def match_and(left: object, right: object) -> bool | None:
    """SQL's AND: FALSE wins over NULL."""
    if left is False or right is False:
        return False
    if left is None or right is None:
        return None
    return True


def match_or(left: object, right: object) -> bool | None:
    """SQL's OR: TRUE wins over NULL."""
    if left is True or right is True:
        return True
    if left is None or right is None:
        return None
    return False


def match_not(value: object) -> bool | None:
    return None if value is None else not value


def match_wrap(value: Any, bits: int) -> Any:
    """An integer result in Java's arithmetic of ``bits`` (0: a DOUBLE, as it is)."""
    if not bits or value is None:
        return value
    half = 2 ** (bits - 1)
    return (value + half) % (2 * half) - half


def match_arithmetic(op: str, left: Any, right: Any, bits: int) -> Any:
    """``+``, ``-`` or ``*`` of INT (bits 32), BIGINT (64) or DOUBLE (0) values."""
    if left is None or right is None:
        return None
    if op == '+':
        return match_wrap(left + right, bits)
    if op == '-':
        return match_wrap(left - right, bits)
    return match_wrap(left * right, bits)


def match_values(rows: list[list[Any]], column: int, function: str, bits: int) -> Any:
    """COUNT, SUM, AVG, MIN or MAX of a column over rows: NULLs skipped; SUM and AVG of an
    integer in its type (Java's wrapping sum, AVG truncated toward zero)."""
    values: list[Any] = [r[column] for r in rows if r[column] is not None]
    if function == 'COUNT':
        return len(values)
    if not values:
        return None
    if function == 'MIN':
        return min(values)
    if function == 'MAX':
        return max(values)
    if function == 'SUM':
        total = values[0]
        for value in values[1:]:
            total = match_wrap(total + value, bits)
        return total
    if bits:
        total = 0
        for value in values:
            total = match_wrap(total + value, bits)
        quotient = abs(total) // len(values)
        return -quotient if total < 0 else quotient
    average = 0.0
    for value in values:
        average += value
    return average / len(values)


def match_aggregate(
    context: MatchContext, variable: int, column: int, function: str, bits: int
) -> Any:
    """An aggregate in a condition: over the variable's rows so far (the current row with
    them in its own condition)."""
    return match_values(match_rows(context, variable), column, function, bits)


def match_measure(
    match: list[tuple[int, list[Any]]],
    measure: tuple[str, int, int, int, int],
    emitting: list[Any],
    rowtime: int,
) -> Any:
    """One measure (function, variable, column, offset, bits) of a completed match, FINAL
    as Flink evaluates it: LAST (``V.col``) and FIRST of the variable's rows, an aggregate
    over them, MATCH_ROWTIME() the emitting row's time (column ``rowtime``)."""
    function, variable, column, offset, bits = measure
    if function == 'MATCH_ROWTIME':
        return emitting[rowtime]
    rows = [r for v, r in match if v == variable]
    if function == 'LAST':
        return rows[-1 - offset][column] if offset < len(rows) else None
    if function == 'FIRST':
        return rows[offset][column] if offset < len(rows) else None
    return match_values(rows, column, function, bits)


class MatchRecognizer(StatefulProcessor):
    """A MATCH_RECOGNIZE step per PARTITION BY key (Flink's Match, event time): rows (the
    columns the conditions and measures read, then the time as epoch ms) wait in
    ``waiting`` until the watermark reaches their time, then go to the state machine in
    time order (ties in arrival order); each completed match is one output row, the key's
    columns then the measures (``output``, its names). A DATE column is held as its days
    in the JSON state and given back as a date; times stay epoch milliseconds (the
    program turns them into timestamps after the processor, exactly)."""

    def __init__(
        self, nfa: Nfa, conditions: list[Callable[[MatchContext], object] | None],
        past_last_row: bool, measures: list[tuple[str, int, int, int, int]],
        state: StructType, output: list[str], streaming: bool,
    ) -> None:
        self.streaming = streaming
        self.nfa = nfa
        self.conditions = conditions
        self.past_last_row = past_last_row
        self.measures = measures
        self.state = state
        self.output = output

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        if self.streaming:
            self.waiting = handle.getListState('waiting', self.state)
            self.match = handle.getValueState(
                'match', StructType([StructField('json', StringType())])
            )

    def emit(
        self, key: tuple[object, ...], mark: int, new: list[tuple[Any, ...]]
    ) -> Iterator[Row]:
        """Takes ``new`` rows in (late ones dropped) and feeds every waiting row at or
        before watermark ``mark`` to the state machine; stores the state and the timer."""
        at = len(self.state.fields) - 1
        waiting = [tuple(r) for r in self.waiting.get()]
        waiting += [r for r in new if r[at] is not None and r[at] > mark]
        ready = sorted((r for r in waiting if r[at] <= mark), key=lambda r: r[at])
        later = [r for r in waiting if r[at] > mark]
        stored = self.match.get()
        state = match_new_state() if stored is None else json.loads(stored[0])
        yield from self.feed(key, state, ready)
        self.match.update((json.dumps(state, separators=(',', ':')),))
        self.waiting.clear()
        for timer in list(self.handle.listTimers()):
            self.handle.deleteTimer(timer)
        if later:
            self.waiting.put(later)
            self.handle.registerTimer(min(r[at] for r in later))

    def feed(
        self, key: tuple[object, ...], state: MatchState, ready: list[tuple[Any, ...]]
    ) -> Iterator[Row]:
        """Feeds ``ready`` rows, in time order, to ``state``; a row per match."""
        kinds = [f.dataType for f in self.state.fields]
        dates = [k.simpleString() == 'date' for k in kinds]
        at = len(kinds) - 1
        output = Row(*self.output)
        for row in ready:
            values = [
                k.toInternal(v) if date else v
                for k, date, v in zip(kinds, dates, row, strict=True)
            ]
            for match in match_feed(self.nfa, self.conditions, self.past_last_row, state, values):
                out = []
                for measure in self.measures:
                    value = match_measure(match, measure, values, at)
                    column = measure[2]
                    if value is not None and measure[0] != 'COUNT' and dates[column]:
                        value = kinds[column].fromInternal(value)
                    out.append(value)
                yield output(*key, *out)

    def handleInputRows(
        self, key: tuple[object, ...], rows: Iterator[Row], timerValues: TimerValues
    ) -> Iterator[Row]:
        names = self.state.fieldNames()
        new = [tuple(row[n] for n in names) for row in rows]
        if not self.streaming:
            # batch: every row of the key at once, in time order (none is late), and the
            # partial matches open at the input's end dropped, as Flink's batch Match
            at = len(names) - 1
            ready = sorted((r for r in new if r[at] is not None), key=lambda r: r[at])
            yield from self.feed(key, match_new_state(), ready)
            return
        yield from self.emit(key, timerValues.getCurrentWatermarkInMs(), new)

    def handleExpiredTimer(
        self, key: tuple[object, ...], timerValues: TimerValues, expiredTimerInfo: object
    ) -> Iterator[Row]:
        yield from self.emit(key, timerValues.getCurrentWatermarkInMs(), [])

    def close(self) -> None:
        pass


def match_recognize(
    df: DataFrame, keys: list[str], column: str, columns: list[str], nfa: Nfa,
    conditions: list[Callable[[MatchContext], object] | None], past_last_row: bool,
    measures: list[tuple[str, str, int, int, int, int]], streaming: bool,
) -> DataFrame:
    """``df``'s matches, one row each: the keys, then each measure (name, function,
    variable, column index in ``columns`` + the time (``len(columns)``: ``column`` as epoch
    ms), offset, bits). A MatchRecognizer per key; the input's watermark is taken off its
    columns, so Spark leaves the late rows to the processor (Flink's rule, not Spark's);
    the time measures come out as epoch ms and are made timestamps here."""
    taken = set(df.columns)
    millis = '__flowc_event_ms'
    while millis in taken:
        millis = millis + '_'
    fields = {f.name: f for f in df.schema.fields}
    timed = df.select(
        *[F.col(quoted(k)).alias(k, metadata={}) for k in keys],
        *[F.col(quoted(c)).alias(c, metadata={}) for c in columns],
        F.unix_millis(F.col(quoted(column))).alias(millis),
    )
    state = StructType(
        [StructField(c, fields[c].dataType, True) for c in columns]
        + [StructField(millis, LongType(), True)]
    )
    results = []
    times = []
    for name, function, _, at, _, _ in measures:
        kind = (
            LongType() if function == 'COUNT' or at == len(columns)
            else fields[columns[at]].dataType
        )
        if at == len(columns) and function != 'COUNT':
            times.append(name)
        results.append(StructField(name, kind, True))
    matched = timed.groupBy(*[F.col(quoted(k)) for k in keys]).transformWithState(
        MatchRecognizer(
            nfa, conditions, past_last_row,
            [(function, variable, at, offset, bits) for _, function, variable, at, offset, bits
             in measures],
            state, [*keys, *[m[0] for m in measures]], streaming,
        ),
        StructType([StructField(k, fields[k].dataType, True) for k in keys] + results),
        'Append',
        'EventTime' if streaming else 'None',
    )
    return matched.withColumns(
        {name: F.timestamp_millis(F.col(quoted(name))) for name in times}
    )

# fmt: on


#: What a program with a MATCH_RECOGNIZE step carries (and ``quoted``): the state
#: machine's runtime functions, then the processor's.
MATCH_HELPERS: tuple[Callable[..., object], ...] = (
    match_new_state,
    _spans,
    match_rows,
    match_last,
    match_first,
    _holds,
    _taking,
    _rank,
    _queue_add,
    _queue_sift_down,
    _queue_poll,
    _queue_prune,
    match_feed,
    _pairs,
    _reaches_final,
    match_compare,
    match_double,
    match_and,
    match_or,
    match_not,
    match_wrap,
    match_arithmetic,
    match_values,
    match_aggregate,
    match_measure,
    MatchRecognizer,
    match_recognize,
)
