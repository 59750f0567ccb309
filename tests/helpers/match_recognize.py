"""Flink's MATCH_RECOGNIZE rows in plain Python, for the subset flowc means to run
(docs/language.md, "MATCH_RECOGNIZE"): the independent computation the tests hold Spark's
and Flink's answers to.

A port of what Flink 2.3 does, not of its code: ``StreamExecMatch.translatePattern``
turns the pattern into a CEP ``Pattern`` (``begin``/``next``: strict contiguity; ``+`` is
``oneOrMore().consecutive()``, ``*`` the same ``.optional()``, ``?`` ``optional()``,
``{n}`` ``times(n)``, ``{n,m}`` ``times(n, m).consecutive()``, ``{n,}``
``timesOrMore(n).consecutive()``; greedy unless reluctant, except ``?`` and ``{n}``);
``NFACompiler`` makes its states from the last variable back (a greedy quantifier ANDs
NOT(its own condition) onto every edge of the state after it); ``NFA.doProcess`` feeds
each key's rows in time order, keeps every partial match, holds a completed match until
no partial match started before it, then emits it and prunes by the skip strategy
(SKIP PAST LAST ROW: every partial or completed match that started at or before the
match's last row; SKIP TO NEXT ROW: at or before its first row). Partial and completed
matches live in ``java.util.PriorityQueue``s ordered by their start row only
(``NFAState.COMPUTATION_STATE_COMPARATOR``), iterated in their array's order, so which of
two completed matches from one start row is emitted (the skip prunes the other) is the
queue's doing: :class:`JavaPriorityQueue` follows the JDK's algorithms step for step.

Conditions see Flink's MatchCodeGenerator's view: the rows of the partial match so far
plus the current row, which belongs to the variable being defined (so ``PREV(price)`` is
``LAST(*.price, 1)``: the row before the current one *within the match*, NULL on its first
row). A NULL condition is false; NOT of it is true (Flink's ``NotCondition`` over the
generated condition's false).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

Row = Mapping[str, object]


@dataclass(frozen=True)
class Variable:
    """One pattern variable with its quantifier: ``low``..``high`` rows (``high`` None:
    unbounded), ``greedy`` unless reluctant; ``condition`` None is DEFINE's default TRUE."""

    name: str
    low: int = 1
    high: int | None = 1
    greedy: bool = True
    condition: Callable[[Context], object] | None = None


class Context:
    """What a DEFINE condition reads: the partial match's rows, the current row taken as
    ``defining``'s."""

    def __init__(
        self, path: Sequence[tuple[str, int]], rows: Sequence[Row], current: int, defining: str
    ) -> None:
        self._path = path
        self._rows = rows
        self.row = rows[current]
        self._current = current
        self._defining = defining

    def rows_of(self, var: str | None) -> list[Row]:
        """``var``'s rows in the match so far (``None``: every variable's, ``*``), with the
        current row if it is ``var``'s."""
        indices = [i for name, i in self._path if var is None or name == var]
        if var is None or var == self._defining:
            indices.append(self._current)
        return [self._rows[i] for i in indices]

    def last(self, var: str | None, column: str, offset: int = 0) -> object:
        """``LAST(var.column, offset)``; ``var`` None is ``*`` (``PREV(column, offset)``)."""
        rows = self.rows_of(var)
        return rows[-1 - offset][column] if offset < len(rows) else None

    def first(self, var: str | None, column: str, offset: int = 0) -> object:
        """``FIRST(var.column, offset)``."""
        rows = self.rows_of(var)
        return rows[offset][column] if offset < len(rows) else None

    def prev(self, column: str, offset: int = 1) -> object:
        """``PREV(column, offset)``: Flink's ``LAST(*.column, offset)``."""
        return self.last(None, column, offset)


Condition = Callable[[Context], bool]


@dataclass
class _Edge:
    action: str  # "take" or "proceed"
    target: _State
    condition: Condition


@dataclass(eq=False)
class _State:
    name: str
    final: bool = False
    edges: list[_Edge] = field(default_factory=list)


def _true(_: Context) -> bool:
    return True


def _defined(variable: Variable) -> Condition:
    """The variable's condition as a boolean (NULL is false)."""
    condition = variable.condition

    def check(context: Context) -> bool:
        if condition is None:
            return True
        return condition(_as(context, variable.name)) is True

    return check


def _as(context: Context, name: str) -> Context:
    """The same partial match with the current row taken as ``name``'s."""
    return Context(context._path, context._rows, context._current, name)


def _and_not(first: Condition, second: Condition) -> Condition:
    return lambda context: first(context) and not second(context)


def _compile(pattern: Sequence[Variable]) -> _State:
    """The start state of NFACompiler's graph for ``pattern`` (no IGNORE edges: every
    variable is strictly contiguous)."""
    sink = _State("$endState$", final=True)
    for index in range(len(pattern) - 1, -1, -1):
        sink = _convert(pattern[index], sink)
    return sink


def _singleton(
    variable: Variable, sink: _State, proceed: _State | None, optional: bool, take: Condition
) -> _State:
    state = _State(variable.name)
    state.edges.append(_Edge("take", sink, take))
    if optional:
        assert proceed is not None
        state.edges.append(_Edge("proceed", proceed, _true))
    return state


def _greedy_update(state: _State, take: Condition) -> None:
    for edge in state.edges:
        edge.condition = _and_not(edge.condition, take)


def _convert(variable: Variable, sink: _State) -> _State:
    take = _defined(variable)
    optional = variable.low == 0
    looping = variable.high is None
    # Flink's quantifier: ? and {n} are never greedy; the others greedy unless reluctant.
    single_optional = variable.low == 0 and variable.high == 1
    greedy = variable.greedy and not single_optional and variable.low != variable.high
    if looping:
        loop = _State(variable.name)
        loop.edges.append(_Edge("proceed", sink, _true))
        if greedy:
            _greedy_update(sink, take)
        loop.edges.append(_Edge("take", loop, take))
        times = max(variable.low, 1)
        return _times(variable, loop, sink, times, times, optional, False, take)
    if (variable.low == 1 and variable.high == 1) or single_optional:
        return _singleton(variable, sink, sink, optional, take)
    assert variable.high is not None
    return _times(variable, sink, sink, max(variable.low, 1), variable.high, optional, greedy, take)


def _times(
    variable: Variable,
    sink: _State,
    proceed: _State,
    low: int,
    high: int,
    optional: bool,
    greedy: bool,
    take: Condition,
) -> _State:
    """NFACompiler.createTimesState: ``high - low`` optional states, ``low - 1`` plain
    ones, then the first (optional when the quantifier is)."""
    if greedy and low != high:
        _greedy_update(sink, take)
    last = sink
    for _ in range(low, high):
        last = _singleton(variable, last, proceed, True, take)
    for _ in range(low - 1):
        last = _singleton(variable, last, None, False, take)
    return _singleton(variable, last, proceed, optional, take)


@dataclass(frozen=True)
class _Partial:
    state: _State
    path: tuple[tuple[str, int], ...]
    start: int | None  # the first row's index; None: the start state

    def key(self) -> float:
        return float("inf") if self.start is None else self.start


class JavaPriorityQueue:
    """java.util.PriorityQueue (JDK 9 and later) with Flink's COMPUTATION_STATE_COMPARATOR
    (the start row; the start state last): its array, in which it iterates, and its
    sift-up, sift-down, poll and bulk removal, step for step, so that partial and
    completed matches from one start row come out in Flink's order."""

    def __init__(self) -> None:
        self.array: list[_Partial] = []

    def __iter__(self) -> Iterator[_Partial]:
        return iter(list(self.array))

    def __len__(self) -> int:
        return len(self.array)

    def peek(self) -> _Partial:
        return self.array[0]

    def add(self, item: _Partial) -> None:
        """offer: siftUpUsingComparator from the end (an equal parent stays above)."""
        es = self.array
        es.append(item)
        k = len(es) - 1
        while k > 0:
            parent = (k - 1) >> 1
            if item.key() >= es[parent].key():
                break
            es[k] = es[parent]
            k = parent
        es[k] = item

    def _sift_down(self, k: int, item: _Partial, n: int) -> None:
        """siftDownUsingComparator: the smaller child, the left one on a tie."""
        es = self.array
        half = n >> 1
        while k < half:
            child = 2 * k + 1
            right = child + 1
            if right < n and es[child].key() > es[right].key():
                child = right
            if item.key() <= es[child].key():
                break
            es[k] = es[child]
            k = child
        es[k] = item

    def poll(self) -> _Partial:
        es = self.array
        result = es[0]
        last = es.pop()
        if es:
            self._sift_down(0, last, len(es))
        return result

    def remove_if(self, doomed: Callable[[_Partial], bool]) -> None:
        """removeAll (bulkRemove): the survivors kept in array order, then heapify."""
        if not any(doomed(p) for p in self.array):
            return
        self.array[:] = [p for p in self.array if not doomed(p)]
        for i in range((len(self.array) >> 1) - 1, -1, -1):
            self._sift_down(i, self.array[i], len(self.array))


def _next(partial: _Partial, rows: Sequence[Row], index: int) -> list[_Partial]:
    """NFA.computeNextStates without IGNORE edges: each TAKE reachable through PROCEED edges
    whose conditions hold, and a final state right after it when PROCEED edges reach one."""
    context = Context(partial.path, rows, index, "")
    takes: list[_Edge] = []
    sources: list[_State] = []
    stack = [partial.state]
    while stack:
        state = stack.pop()
        for edge in state.edges:
            if edge.condition(context):
                if edge.action == "proceed":
                    stack.append(edge.target)
                else:
                    takes.append(edge)
                    sources.append(state)
    out = []
    start = index if partial.start is None else partial.start
    for edge, source in zip(takes, sources, strict=True):
        path = (*partial.path, (source.name, index))
        out.append(_Partial(edge.target, path, start))
        final = _final_after_proceed(edge.target, context)
        if final is not None:
            out.append(_Partial(final, path, start))
    if partial.start is None:
        out.append(partial)
    return out


def _final_after_proceed(state: _State, context: Context) -> _State | None:
    stack = [state]
    while stack:
        current = stack.pop()
        for edge in current.edges:
            if edge.action == "proceed" and edge.condition(context):
                if edge.target.final:
                    return edge.target
                stack.append(edge.target)
    return None


Match = dict[str, list[Row]]


@dataclass(frozen=True)
class Emitted:
    """A match and the row whose processing emitted it: its last row's, or a later one's
    when it waited for an earlier partial match (MATCH_ROWTIME() is that row's time)."""

    rows: Match
    at: Row
    #: How many other completed matches from the same start row waited with it (Flink's
    #: queue decided which came first; the skip pruned the others).
    rivals: int = 0


def find_matches(pattern: Sequence[Variable], rows: Sequence[Row], skip: str) -> list[Emitted]:
    """Each match Flink emits over one key's ``rows`` (already in time order, none late),
    in its order. ``skip``: "PAST LAST ROW" or "TO NEXT ROW"."""
    assert skip in ("PAST LAST ROW", "TO NEXT ROW"), skip
    partials = JavaPriorityQueue()
    partials.add(_Partial(_compile(pattern), (), None))
    completed = JavaPriorityQueue()
    emitted: list[Emitted] = []
    for index in range(len(rows)):
        # NFA.doProcess: the partial matches in their queue's array order; each one's
        # completed matches into a queue as they come, the others after them.
        new_partials = JavaPriorityQueue()
        potential = JavaPriorityQueue()
        for partial in partials:
            retained = []
            for state in _next(partial, rows, index):
                if state.state.final:
                    potential.add(state)
                else:
                    retained.append(state)
            for state in retained:
                new_partials.add(state)
        for state in potential:
            completed.add(state)
        while completed:
            earliest = completed.peek()
            if new_partials and earliest.key() > new_partials.peek().key():
                break
            rivals = sum(1 for c in completed if c.start == earliest.start) - 1
            completed.poll()
            taken = [i for _, i in earliest.path]
            pruning = max(taken) if skip == "PAST LAST ROW" else min(taken)

            def pruned(p: _Partial, pruning: int = pruning) -> bool:
                return p.start is not None and p.start <= pruning

            new_partials.remove_if(pruned)
            completed.remove_if(pruned)
            match: Match = {}
            for name, i in earliest.path:
                match.setdefault(name, []).append(rows[i])
            emitted.append(Emitted(match, rows[index], rivals))
        partials = new_partials
    return emitted


def in_time_order(
    rows: Sequence[Row],
    keys: Sequence[str],
    time: str,
    watermarks: Sequence[str | None] | None = None,
) -> dict[str, list[Row]]:
    """Each key's rows (key: its values joined by "|") in time order, ties in arrival order
    as Flink's CepOperator sorts a timestamp's buffered rows. ``watermarks``: for each
    row, the watermark it arrived behind (None: none yet), times as ISO strings; a row at
    or behind it is late and dropped, as CepOperator drops a row whose timestamp is not
    after the current watermark."""
    grouped: dict[str, list[Row]] = {}
    for position, row in enumerate(rows):
        mark = None if watermarks is None else watermarks[position]
        if mark is not None and str(row[time]) <= mark:
            continue
        grouped.setdefault("|".join(str(row[k]) for k in keys), []).append(row)
    return {k: sorted(v, key=lambda r: str(r[time])) for k, v in grouped.items()}
