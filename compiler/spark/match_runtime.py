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
(SKIP TO NEXT ROW).
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


#: What a DEFINE condition reads: (the partial match's (variable, row) pairs, the current
#: row, the variable the row is taken as).
MatchContext = tuple[list[tuple[int, list[object]]], list[object], int]
Condition = Callable[[MatchContext], object]


def match_rows(context: MatchContext, variable: int) -> list[list[object]]:
    """A variable's rows in the match so far (-1: every row, ``*``), with the current row
    when it is that variable's (always for ``*``)."""
    path, row, defining = context
    rows = [r for v, r in path if variable in (-1, v)]
    if variable in (-1, defining):
        rows.append(row)
    return rows


def match_last(context: MatchContext, variable: int, column: int, offset: int = 0) -> object:
    """``LAST(var.col, offset)``; ``PREV(col, n)`` is ``LAST(*.col, n)`` (variable -1)."""
    rows = match_rows(context, variable)
    return rows[-1 - offset][column] if offset < len(rows) else None


def match_first(context: MatchContext, variable: int, column: int, offset: int = 0) -> object:
    """``FIRST(var.col, offset)``."""
    rows = match_rows(context, variable)
    return rows[offset][column] if offset < len(rows) else None


def _holds(
    conditions: Sequence[Condition | None],
    edge: Edge,
    path: list[tuple[int, list[object]]],
    row: list[object],
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


class MatchOrderUnknown(Exception):
    """Two completed matches from one row wait together: Flink emits them in its
    PriorityQueue's order, which this does not follow."""


#: A (variable, row id) pair of a match; JSON turns the tuples into lists, read alike.
Taken = tuple[int, int]


class MatchState(TypedDict):
    """A key's state, plain JSON: the next row's id, the rows a partial or waiting match
    holds (by id), the partial matches (state, start row id, taken rows) and the completed
    matches waiting for an earlier one (start row id, taken rows)."""

    next: int
    rows: dict[str, list[object]]
    partials: list[tuple[int, int, list[Taken]]]
    done: list[tuple[int, list[Taken]]]


def match_new_state() -> MatchState:
    """A key's state before its first row: no row, no partial match."""
    return {"next": 0, "rows": {}, "partials": [], "done": []}


def match_feed(
    nfa: Nfa,
    conditions: Sequence[Condition | None],
    past_last_row: bool,
    state: MatchState,
    row: list[object],
) -> list[list[tuple[int, list[object]]]]:
    """Feeds one row (the key's next in time order, not late) to the key's ``state``,
    changed in place; the matches it emits, in order, each its (variable, row) pairs."""
    start_state, table = nfa
    rows = state["rows"]
    row_id = state["next"]
    state["next"] = row_id + 1
    rows[str(row_id)] = row
    # The start state is every row's first partial match (start -1: the row's own id).
    partials = [*state["partials"], (start_state, -1, [])]
    done = state["done"]
    moved: list[tuple[int, int, list[Taken]]] = []
    for at, start, ids in partials:
        path = [(v, rows[str(i)]) for v, i in ids]
        begins = row_id if start < 0 else start
        stack = [at]
        while stack:
            current = stack.pop()
            for edge in table[current][1]:
                if not _holds(conditions, edge, path, row):
                    continue
                if not edge[0]:
                    stack.append(edge[1])
                    continue
                taken = [*ids, (table[current][0], row_id)]
                if table[edge[1]][0] == -1:
                    done.append((begins, taken))
                    continue
                moved.append((edge[1], begins, taken))
                if _reaches_final(table, edge[1], conditions, path, row):
                    done.append((begins, taken))
    emitted = []
    while done:
        first = min(d[0] for d in done)
        if any(p[1] < first for p in moved):
            break
        mine = [d for d in done if d[0] == first]
        if len(mine) > 1:
            raise MatchOrderUnknown(f"two matches from one row ({len(mine)})")
        positions = [i for _, i in mine[0][1]]
        pruning = max(positions) if past_last_row else min(positions)
        moved = [p for p in moved if p[1] > pruning]
        done[:] = [d for d in done if d[0] > pruning]
        emitted.append([(v, rows[str(i)]) for v, i in mine[0][1]])
    state["partials"] = moved
    kept = {str(i) for p in moved for _, i in p[2]} | {str(i) for d in done for _, i in d[1]}
    state["rows"] = {k: v for k, v in rows.items() if k in kept}
    return emitted


def _reaches_final(
    table: tuple[State, ...],
    state: int,
    conditions: Sequence[Condition | None],
    path: list[tuple[int, list[object]]],
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
