"""MATCH_RECOGNIZE's state machine for the Spark processor (docs/language.md,
"MATCH_RECOGNIZE"): the pattern compiled once by flowc into a table of states, and the
per-key step the generated program is to run on each row, its state plain JSON so a
``transformWithState`` processor can keep it across micro-batches and restarts.

Not wired into code generation yet: MATCH_RECOGNIZE is still E0759. The runtime functions
(:func:`match_feed` and what it calls) use only the standard library, so that code
generation can copy their source into the program as it does generated_runtime's.

Flink's meaning, which this follows: strict contiguity; a greedy quantifier on V makes every
edge of the next variable also require NOT(V's condition); a completed match waits until no
partial match that started before it is open, then is emitted and prunes every partial or
waiting match that started at or before its last row (SKIP PAST LAST ROW) or first row
(SKIP TO NEXT ROW); of two completed matches from one start row, the one emitted is the
one Flink's PriorityQueue puts first, its array kept here as Flink's is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypedDict

#: An edge: (takes the row, target state, the variable whose condition it needs or -1 for
#: none, the variables whose conditions must fail: the greedy rule).
Edge = tuple[bool, int, int, tuple[int, ...]]
#: A state: (its variable, -1 for the final state; its edges in Flink's order).
State = tuple[int, tuple[Edge, ...]]
#: The compiled pattern: (the start state's index, the states).
Nfa = tuple[int, tuple[State, ...]]
#: A quantifier: (least rows, most rows or None for unbounded, greedy).
Quantifier = tuple[int, int | None, bool]


class _Draft:
    """An edge while the states are built: the greedy rule adds to ``nots`` later."""

    __slots__ = ("nots", "take", "target", "variable")

    def __init__(self, take: bool, target: int, variable: int) -> None:
        self.take = take
        self.target = target
        self.variable = variable
        self.nots: tuple[int, ...] = ()


def compile_pattern(quantifiers: Sequence[Quantifier]) -> Nfa:
    """The states of a sequence of variables with these quantifiers, built from the last
    variable back as Flink's NFACompiler does (``?`` and ``{n}`` are never greedy)."""
    states: list[tuple[int, list[_Draft]]] = [(-1, [])]
    sink = 0

    def new(variable: int, edges: list[_Draft]) -> int:
        states.append((variable, edges))
        return len(states) - 1

    def greedy_rule(state: int, variable: int) -> None:
        for edge in states[state][1]:
            edge.nots = (*edge.nots, variable)

    for variable in range(len(quantifiers) - 1, -1, -1):
        low, high, greedy = quantifiers[variable]
        greedy = greedy and not (low == 0 and high == 1) and low != high
        skip = [_Draft(False, sink, -1)] if low == 0 else []
        if high is None:
            loop = new(variable, [_Draft(False, sink, -1)])
            if greedy:
                greedy_rule(sink, variable)
            states[loop][1].append(_Draft(True, loop, variable))
            last = loop
            for _ in range(max(low, 1) - 1):
                last = new(variable, [_Draft(True, last, variable)])
            sink = new(variable, [_Draft(True, last, variable), *skip])
        elif high == 1:
            sink = new(variable, [_Draft(True, sink, variable), *skip])
        else:
            least = max(low, 1)
            if greedy:
                greedy_rule(sink, variable)
            last = sink
            for _ in range(least, high):
                last = new(variable, [_Draft(True, last, variable), _Draft(False, sink, -1)])
            for _ in range(least - 1):
                last = new(variable, [_Draft(True, last, variable)])
            sink = new(variable, [_Draft(True, last, variable), *skip])
    table = tuple(
        (variable, tuple((e.take, e.target, e.variable, e.nots) for e in edges))
        for variable, edges in states
    )
    return sink, table


#: A partial or waiting match's rows, shared: strict contiguity makes them the rows from
#: its start row's id on, one a row, and the pattern's variables come in order, so each
#: run of one variable's rows is a [variable, count] pair (JSON lists). A run of N rows
#: is one pair, not N: the state of N open partial matches is linear in N.
Runs = list[list[int]]
#: A path as a condition reads it: (the key's rows by id, the first row's id, the runs).
MatchPath = tuple[dict[str, list[object]], int, Runs]
#: What a DEFINE condition reads: (the partial match's path, the current row, the
#: variable the row is taken as); ``match_rows``, ``match_last`` and ``match_first``
#: read the path.
MatchContext = tuple[MatchPath, list[object], int]
Condition = Callable[[MatchContext], object]


def _spans(path: MatchPath, variable: int) -> list[tuple[int, int]]:
    """A variable's runs in the path (-1: every run) as (first row id, count), in order."""
    _, at, runs = path
    spans = []
    for v, count in runs:
        if variable in (-1, v):
            spans.append((at, count))
        at += count
    return spans


def match_rows(context: MatchContext, variable: int) -> list[list[object]]:
    """A variable's rows in the match so far (-1: every row, ``*``), with the current row
    when it is that variable's (always for ``*``)."""
    path, row, defining = context
    rows = path[0]
    out = [rows[str(first + k)] for first, count in _spans(path, variable) for k in range(count)]
    if variable in (-1, defining):
        out.append(row)
    return out


def match_last(context: MatchContext, variable: int, column: int, offset: int = 0) -> object:
    """``LAST(var.col, offset)``; ``PREV(col, n)`` is ``LAST(*.col, n)`` (variable -1).
    Reads the one row it needs, not the whole path."""
    path, row, defining = context
    if variable in (-1, defining):
        if offset == 0:
            return row[column]
        offset -= 1
    for first, count in reversed(_spans(path, variable)):
        if offset < count:
            return path[0][str(first + count - 1 - offset)][column]
        offset -= count
    return None


def match_first(context: MatchContext, variable: int, column: int, offset: int = 0) -> object:
    """``FIRST(var.col, offset)``."""
    path, row, defining = context
    for first, count in _spans(path, variable):
        if offset < count:
            return path[0][str(first + offset)][column]
        offset -= count
    if variable in (-1, defining) and offset == 0:
        return row[column]
    return None


def _holds(
    conditions: Sequence[Condition | None], edge: Edge, path: MatchPath, row: list[object]
) -> bool:
    """Whether an edge may be taken: its variable's condition true (NULL is false), and
    every greedy loop's condition before it not true."""
    _, _, needs, nots = edge
    if needs >= 0:
        condition = conditions[needs]
        if condition is not None and condition((path, row, needs)) is not True:
            return False
    for variable in nots:
        condition = conditions[variable]
        if condition is None or condition((path, row, variable)) is True:
            return False
    return True


#: A partial or completed match, Flink's ComputationState: (its NFA state, its start row's
#: id or -1 for the start state, its runs).
Partial = tuple[int, int, Runs]


class MatchState(TypedDict):
    """A key's state, plain JSON: the next row's id, the rows a partial or waiting match
    holds (by id: every id from the earliest open partial match's start row on, since a
    waiting match waits for an earlier one), the partial matches (the start state's
    among them) and the completed matches waiting for an earlier one, each list the
    array of Flink's PriorityQueue, in its order."""

    next: int
    rows: dict[str, list[object]]
    partials: list[Partial]
    done: list[Partial]


def match_new_state() -> MatchState:
    """A key's state before its first row: no row, no partial match (``match_feed`` puts
    the start state's in on the first row)."""
    return {"next": 0, "rows": {}, "partials": [], "done": []}


def _taking(runs: Runs, variable: int) -> Runs:
    """The runs with one more row taken as ``variable`` (a copy: other matches share the
    runs they came from)."""
    if runs and runs[-1][0] == variable:
        return [*runs[:-1], [variable, runs[-1][1] + 1]]
    return [*runs, [variable, 1]]


# Flink keeps its partial and completed matches in java.util.PriorityQueues ordered by
# NFAState.COMPUTATION_STATE_COMPARATOR (the start row, the start state last), iterates
# the partial ones in the queue's array order and emits the completed one at its head; so
# of two completed matches from one start row, the one emitted (the skip prunes the other)
# is the one the queue's array puts first. These are the JDK's (9 and later) algorithms,
# step for step, on the same arrays.


def _rank(partial: Partial) -> float:
    """The comparator's key: the start row's id; the start state's after every row."""
    return partial[1] if partial[1] >= 0 else float("inf")


def _queue_add(queue: list[Partial], item: Partial) -> None:
    """PriorityQueue.offer: siftUpUsingComparator from the end (not above an equal)."""
    queue.append(item)
    k = len(queue) - 1
    rank = _rank(item)
    while k > 0:
        parent = (k - 1) >> 1
        if rank >= _rank(queue[parent]):
            break
        queue[k] = queue[parent]
        k = parent
    queue[k] = item


def _queue_sift_down(queue: list[Partial], k: int, item: Partial) -> None:
    """siftDownUsingComparator: into the smaller child's place, the left one on a tie."""
    size = len(queue)
    rank = _rank(item)
    while k < size >> 1:
        child = 2 * k + 1
        if child + 1 < size and _rank(queue[child]) > _rank(queue[child + 1]):
            child += 1
        if rank <= _rank(queue[child]):
            break
        queue[k] = queue[child]
        k = child
    queue[k] = item


def _queue_poll(queue: list[Partial]) -> Partial:
    """PriorityQueue.poll: the head out, the last element sifted down from the top."""
    head = queue[0]
    last = queue.pop()
    if queue:
        _queue_sift_down(queue, 0, last)
    return head


def _queue_prune(queue: list[Partial], pruning: int) -> list[Partial]:
    """AfterMatchSkipStrategy.prune's removeAll (bulkRemove): every match that started at or
    before ``pruning`` out, the others kept in array order, then heapify."""
    kept = [p for p in queue if not 0 <= p[1] <= pruning]
    if len(kept) == len(queue):
        return queue
    for k in range((len(kept) >> 1) - 1, -1, -1):
        _queue_sift_down(kept, k, kept[k])
    return kept


def match_feed(
    nfa: Nfa,
    conditions: Sequence[Condition | None],
    past_last_row: bool,
    state: MatchState,
    row: list[object],
) -> list[list[tuple[int, list[object]]]]:
    """Feeds one row (the key's next in time order, not late) to the key's ``state``,
    changed in place; the matches it emits, in order, each its (variable, row) pairs.
    The work is the open partial matches' conditions: no path is copied whole."""
    start_state, table = nfa
    rows = state["rows"]
    row_id = state["next"]
    state["next"] = row_id + 1
    rows[str(row_id)] = row
    partials = state["partials"] or [(start_state, -1, [])]
    lowest = min((p[1] for p in partials if p[1] >= 0), default=row_id)
    moved: list[Partial] = []
    completed: list[Partial] = []
    # NFA.doProcess: each partial match in the queue's array order; its completed matches
    # into one queue as they come, its others into the next row's queue after them.
    for at, start, runs in partials:
        begins = row_id if start < 0 else start
        path: MatchPath = (rows, begins, runs)
        retained: list[Partial] = []
        stack = [at]
        while stack:
            current = stack.pop()
            for edge in table[current][1]:
                if not _holds(conditions, edge, path, row):
                    continue
                if not edge[0]:
                    stack.append(edge[1])
                    continue
                taken = _taking(runs, table[current][0])
                if table[edge[1]][0] == -1:
                    _queue_add(completed, (edge[1], begins, taken))
                    continue
                retained.append((edge[1], begins, taken))
                if _reaches_final(table, edge[1], conditions, path, row):
                    # compile_pattern's final state is its first.
                    _queue_add(completed, (0, begins, taken))
        if start < 0:
            retained.append((at, -1, []))
        for item in retained:
            _queue_add(moved, item)
    done = state["done"]
    for item in completed:
        _queue_add(done, item)
    emitted = []
    while done and not (moved and _rank(done[0]) > _rank(moved[0])):
        _, begins, runs = _queue_poll(done)
        pruning = begins + sum(c for _, c in runs) - 1 if past_last_row else begins
        moved = _queue_prune(moved, pruning)
        done = _queue_prune(done, pruning)
        emitted.append([(v, rows[str(i)]) for v, i in _pairs(begins, runs)])
    state["partials"] = moved
    state["done"] = done
    # A waiting match waits for an earlier open one, whose rows run to this row: the rows
    # any match holds are those from the earliest open one's start on.
    keep = min((p[1] for p in moved if p[1] >= 0), default=row_id + 1)
    for i in range(lowest, keep):
        del rows[str(i)]
    return emitted


def _pairs(begins: int, runs: Runs) -> list[tuple[int, int]]:
    """A match's (variable, row id) pairs in row order."""
    pairs = []
    for variable, count in runs:
        pairs += [(variable, begins + k) for k in range(count)]
        begins += count
    return pairs


def _reaches_final(
    table: tuple[State, ...],
    state: int,
    conditions: Sequence[Condition | None],
    path: MatchPath,
    row: list[object],
) -> bool:
    """Whether PROCEED edges from ``state`` reach the final state (Flink's
    findFinalStateAfterProceed, its conditions read as before the row was taken)."""
    stack = [state]
    while stack:
        current = stack.pop()
        for edge in table[current][1]:
            if not edge[0] and _holds(conditions, edge, path, row):
                if table[edge[1]][0] == -1:
                    return True
                stack.append(edge[1])
    return False
