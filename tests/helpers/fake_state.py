"""A stand-in for transformWithState's handle and state, as far as flowc's processors use
them, so a processor's own ``handleInputRows``/``emit`` runs in plain Python (the state
kept in memory between calls, as Spark keeps it between micro-batches)."""

from __future__ import annotations

from typing import Any


class ListState:
    def __init__(self) -> None:
        self.rows: list[Any] = []

    def get(self) -> Any:
        return iter(list(self.rows))

    def put(self, rows: list[Any]) -> None:
        self.rows = list(rows)

    def clear(self) -> None:
        self.rows = []


class ValueState:
    def __init__(self) -> None:
        self.value: Any = None

    def get(self) -> Any:
        return self.value

    def update(self, value: Any) -> None:
        self.value = value

    def clear(self) -> None:
        self.value = None


class Handle:
    """transformWithState's handle: fresh states, timers that do nothing."""

    def getListState(self, name: str, schema: object) -> ListState:
        return ListState()

    def getValueState(self, name: str, schema: object) -> ValueState:
        return ValueState()

    def listTimers(self) -> list[int]:
        return []

    def deleteTimer(self, timer: int) -> None:
        pass

    def registerTimer(self, timer: int) -> None:
        pass
